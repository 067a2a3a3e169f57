//! Calling a plugin: taking a warm instance (or making one), the deadline, and what
//! a failure looks like to the rest of decoy.
//!
//! A transformer that exports `prepare` does its per-mapping work there (the bundled
//! `response-template` compiles the answer's templates): before an instance
//! transforms an answer of a mapping for the first time, or an answer or parameters
//! that changed, `prepare` is called on it with [`PREPARE_BUDGET`] of CPU time, and only then the
//! transform, under the plugin's deadline. Each instance remembers, per mapping, the
//! [`AnswerKey`] (a hash) of the answer it was prepared for and a hash of the
//! parameters (`transformerParameters`, a few bytes), so later calls skip
//! straight to the transform. A caller whose answer is the same on every call (a
//! stub's own answer, which `decoy-core` keys once when the stub loads) makes the
//! key once and passes it in ([`Plugin::transform_keyed`]); otherwise the answer is
//! hashed on each call that may prepare (what an earlier transformer of a chain made
//! differs per request). Compiled state lives in an instance's own memory, which no
//! other instance can read: each instance prepares once per mapping and answer.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use wasmtime::Store;

use super::cpu_clock::{CallClock, Stopped, WALL_FACTOR};
use super::exports::decoy::plugin::{matcher, prepare, transformer};
use super::host_api::State;
use super::load::Isolation;
use super::{Code, Guest, Plugin, PluginRequest, wit};

/// The CPU time a `prepare` may take: a load-time budget, not a call's deadline (a
/// 250 KB template compiles in a few milliseconds; this only bounds a runaway).
pub(crate) const PREPARE_BUDGET: Duration = Duration::from_secs(5);

/// Mappings an instance remembers having been prepared for; past this many it
/// forgets them all (preparing again is cheap when the plugin kept its work).
const MAX_PREPARED: usize = 20_000;

/// An instance ready for calls, in its own store.
pub(crate) struct Warm {
    store: Store<State>,
    transformer: Option<transformer::Guest>,
    matcher: Option<matcher::Guest>,
    prepare: Option<prepare::Guest>,
    /// Calls this instance has served.
    calls: u64,
    /// By mapping id, what this instance was last prepared for: the answer's key
    /// and the hash of the call's parameters (a reload may change only those).
    prepared: HashMap<String, PreparedFor>,
    /// The compilations this instance last reported from `prepare` (a running total).
    compilations: u64,
    /// Whether `prepare` is running (or trapped) on it.
    preparing: bool,
    /// The plugin's deadline for a call, in time and in epoch ticks.
    timeout: Duration,
    deadline_ticks: u64,
}

/// Which answer an instance was prepared for: a hash of what a transformer is given
/// as the answer, its headers (or properties) and body (a status or delay change
/// prepares nothing new, but costs little to hash too). Equal answers have equal
/// keys, whoever makes them; it is plain data, made from the WIT record alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AnswerKey(u64);

impl AnswerKey {
    /// The key of `response`.
    pub fn of(response: &wit::Response) -> AnswerKey {
        let mut h = foldhash::quality::FixedState::with_seed(0).build_hasher();
        let (tag, fields, body, status) = match response {
            wit::Response::Http(r) => (0u8, &r.headers, &r.body, r.status),
            wit::Response::Mq(r) => (1u8, &r.properties, &r.body, 0),
        };
        h.write_u8(tag);
        h.write_u16(status);
        h.write_usize(fields.len());
        for (name, value) in fields {
            h.write_usize(name.len());
            h.write(name.as_bytes());
            h.write_usize(value.len());
            h.write(value.as_bytes());
        }
        h.write_usize(body.len());
        h.write(body);
        AnswerKey(h.finish())
    }
}

/// What an instance was prepared for, for one mapping: the answer's key and a hash
/// of the call's parameters (`transformerParameters` as JSON text), which `prepare`
/// is given beside the answer. A reload that changes only the parameters prepares
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PreparedFor {
    answer: AnswerKey,
    parameters: u64,
}

impl PreparedFor {
    fn of(answer: AnswerKey, context: &wit::CallContext) -> PreparedFor {
        let mut h = foldhash::quality::FixedState::with_seed(1).build_hasher();
        h.write(context.parameters.as_bytes());
        PreparedFor {
            answer,
            parameters: h.finish(),
        }
    }
}

/// Why a plugin call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFailure {
    pub plugin: String,
    pub reason: String,
    /// The plugin is still compiling (a first load that outlived the wait): the
    /// request may be tried again shortly (HTTP answers 503 with `Retry-After`).
    pub loading: bool,
}

impl std::fmt::Display for PluginFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {:?} failed: {}", self.plugin, self.reason)
    }
}

impl Code {
    fn instantiate(&self, plugin: Arc<Guest>) -> wasmtime::Result<Warm> {
        let timeout = Duration::from_millis(self.settings.timeout_milliseconds);
        let mut store = Store::new(
            &self.engine,
            State::new(
                plugin,
                self.cache.clone(),
                self.settings.memory_limit_bytes(),
                timeout,
            ),
        );
        store.limiter(|s| &mut s.limits);
        // The epoch deadline is wall time; the callback turns it into CPU time.
        store.epoch_deadline_callback(move |mut store| {
            let state = store.data_mut();
            state.clock.on_deadline(state.budget, super::TICK)
        });
        // Start functions run under the same deadline as calls.
        store.data_mut().clock = CallClock::start();
        store.set_epoch_deadline(self.settings.deadline_ticks());
        let instance = self.pre.instantiate(&mut store)?;
        let transformer = match &self.transformer {
            Some(i) => Some(i.load(&mut store, &instance)?),
            None => None,
        };
        let matcher = match &self.matcher {
            Some(i) => Some(i.load(&mut store, &instance)?),
            None => None,
        };
        let prepare = match &self.prepare {
            Some(i) => Some(i.load(&mut store, &instance)?),
            None => None,
        };
        Ok(Warm {
            store,
            transformer,
            matcher,
            prepare,
            calls: 0,
            prepared: HashMap::new(),
            compilations: 0,
            preparing: false,
            timeout,
            deadline_ticks: self.settings.deadline_ticks(),
        })
    }
}

impl Warm {
    /// Calls `prepare` for `response` of the call's mapping, unless this instance
    /// was prepared for that answer already (or the plugin has no `prepare`); `key`
    /// is the answer's key when the caller made it, else it is made here. It runs
    /// under [`PREPARE_BUDGET`]; the call's own deadline starts afresh after it.
    /// Adds what the instance reports compiling since its last report to `stats`.
    fn prepare_for(
        &mut self,
        stats: &super::PluginStats,
        context: &wit::CallContext,
        response: &wit::Response,
        key: Option<AnswerKey>,
    ) -> wasmtime::Result<Result<(), wit::PluginError>> {
        let Some(p) = self.prepare.clone() else {
            return Ok(Ok(()));
        };
        let key = match key {
            Some(key) => {
                // A key of another answer would leave the instance prepared for the
                // wrong one: debug builds (every test) check the caller's.
                debug_assert_eq!(key, AnswerKey::of(response), "the key of another answer");
                key
            }
            None => AnswerKey::of(response),
        };
        let prepared_for = PreparedFor::of(key, context);
        if self.prepared.get(&context.mapping_id) == Some(&prepared_for) {
            return Ok(Ok(()));
        }
        self.preparing = true;
        self.set_budget(PREPARE_BUDGET, ticks(PREPARE_BUDGET));
        // A trap leaves `preparing` set, for the failure's reason (the instance is
        // dropped).
        let result = p.call_prepare(&mut self.store, context, response)?;
        self.preparing = false;
        self.set_budget(self.timeout, self.deadline_ticks);
        let total = match result {
            Ok(total) => total,
            Err(e) => return Ok(Err(e)),
        };
        stats.prepares.fetch_add(1, Ordering::Relaxed);
        stats
            .compilations
            .fetch_add(total.saturating_sub(self.compilations), Ordering::Relaxed);
        self.compilations = self.compilations.max(total);
        if self.prepared.len() >= MAX_PREPARED {
            self.prepared.clear();
        }
        self.prepared
            .insert(context.mapping_id.clone(), prepared_for);
        Ok(Ok(()))
    }

    /// Starts the clock of what runs next on this instance, with `budget` of CPU.
    fn set_budget(&mut self, budget: Duration, deadline_ticks: u64) {
        let state = self.store.data_mut();
        state.budget = budget;
        state.clock = CallClock::start();
        self.store.set_epoch_deadline(deadline_ticks);
    }
}

/// Epoch ticks for `budget` (at least one whole tick past it).
fn ticks(budget: Duration) -> u64 {
    (budget.as_millis() / super::TICK.as_millis()).max(1) as u64 + 1
}

/// How one attempt at a call ended.
enum Attempt<R> {
    Done(Result<R, PluginFailure>),
    /// A warm instance hit its memory cap, and the call changed nothing outside the
    /// instance: it may be made once more on a fresh instance.
    RetryFresh(PluginFailure),
}

impl Plugin {
    /// Runs the plugin's transformer.
    pub fn transform(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &PluginRequest,
        response: &wit::Response,
    ) -> Result<wit::Response, PluginFailure> {
        self.transform_with(context, request, response, None)
    }

    /// Runs the plugin's transformer on an answer whose key the caller made once
    /// (`key` is [`AnswerKey::of`] `response`): nothing is hashed for the call.
    pub fn transform_keyed(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &PluginRequest,
        response: &wit::Response,
        key: AnswerKey,
    ) -> Result<wit::Response, PluginFailure> {
        self.transform_with(context, request, response, Some(key))
    }

    fn transform_with(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &PluginRequest,
        response: &wit::Response,
        key: Option<AnswerKey>,
    ) -> Result<wit::Response, PluginFailure> {
        self.with_instance(context, request, |w| {
            let Some(t) = w.transformer.clone() else {
                return Ok(Err(wit::PluginError {
                    message: "it has no transformer (it is a matcher plugin)".into(),
                }));
            };
            if let Err(e) = w.prepare_for(&self.stats, context, response, key)? {
                return Ok(Err(e));
            }
            t.call_transform(&mut w.store, context, &request.request, response)
        })
    }

    /// Runs the plugin's matcher.
    pub fn matches(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &PluginRequest,
    ) -> Result<bool, PluginFailure> {
        self.with_instance(context, request, |w| {
            let Some(m) = &w.matcher else {
                return Ok(Err(wit::PluginError {
                    message: "it has no matcher (it is a transformer plugin)".into(),
                }));
            };
            m.call_matches(&mut w.store, context, &request.request)
        })
    }

    /// Runs `call` on an instance, on the calling thread. WASI's blocking functions
    /// never block here (see `stdio.rs`), so nothing needs moving off the async
    /// worker. A call that failed only because its warm instance reached its memory
    /// cap, and changed nothing outside it, is made once more on a fresh instance;
    /// every other call is made exactly once.
    fn with_instance<R>(
        self: &Arc<Self>,
        ctx: &wit::CallContext,
        request: &PluginRequest,
        call: impl Fn(&mut Warm) -> wasmtime::Result<Result<R, wit::PluginError>>,
    ) -> Result<R, PluginFailure> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let Some(code) = self.code.load_full() else {
            if let Some(e) = self.load_failure() {
                // Its first load failed after a mapping was accepted with it (the
                // mapping file's last good version then stays live, naming it).
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                let reason = format!("it could not be loaded: {e}");
                tracing::warn!(plugin = %self.name, mapping = %ctx.mapping_id, "plugin call failed: {reason}");
                *self
                    .stats
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) =
                    Some((std::time::SystemTime::now(), reason.clone()));
                return Err(PluginFailure {
                    plugin: self.name.clone(),
                    reason,
                    loading: false,
                });
            }
            self.stats.loading.fetch_add(1, Ordering::Relaxed);
            return Err(PluginFailure {
                plugin: self.name.clone(),
                reason: "the plugin is still loading (compiling); try again shortly".into(),
                loading: true,
            });
        };
        let result = match self.guarded(|| self.attempt(&code, ctx, request, &call, false)) {
            Attempt::Done(r) => r,
            Attempt::RetryFresh(first) => {
                self.stats.retries.fetch_add(1, Ordering::Relaxed);
                tracing::info!(plugin = %self.name, mapping = %ctx.mapping_id, "a warm instance hit its memory cap; the call is made again on a fresh instance");
                match self.guarded(|| self.attempt(&code, ctx, request, &call, true)) {
                    Attempt::Done(Err(f)) => Err(PluginFailure {
                        reason: format!(
                            "{} (also on a fresh instance, after: {})",
                            f.reason, first.reason
                        ),
                        ..f
                    }),
                    Attempt::Done(ok) => ok,
                    Attempt::RetryFresh(f) => Err(f),
                }
            }
        };
        if let Err(f) = &result {
            *self
                .stats
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner()) =
                Some((std::time::SystemTime::now(), f.reason.clone()));
        }
        result
    }

    /// A last line of defence: a panic in the host while serving a call (a bug, or
    /// a WASI function not made safe here) fails that call, never the worker. The
    /// instance it used is gone with the unwinding; the call is not made again.
    fn guarded<R>(self: &Arc<Self>, f: impl FnOnce() -> Attempt<R>) -> Attempt<R> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(plugin = %self.name, "a plugin call failed in the host: {what}");
            Attempt::Done(Err(PluginFailure {
                plugin: self.name.clone(),
                reason: format!("the host failed while serving it: {what}"),
                loading: false,
            }))
        })
    }

    fn attempt<R>(
        self: &Arc<Self>,
        code: &Arc<Code>,
        ctx: &wit::CallContext,
        request: &PluginRequest,
        call: &impl Fn(&mut Warm) -> wasmtime::Result<Result<R, wit::PluginError>>,
        fresh: bool,
    ) -> Attempt<R> {
        let pooled = code.settings.isolation == Isolation::Pooled;
        let warm = if pooled && !fresh {
            code.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let mut warm = match warm {
            Some(w) => w,
            None => {
                self.stats.instances_created.fetch_add(1, Ordering::Relaxed);
                match code.instantiate(self.guest.clone()) {
                    Ok(w) => w,
                    Err(e) => {
                        return Attempt::Done(Err(self.failed(
                            code,
                            &e,
                            None,
                            "could not be instantiated",
                        )));
                    }
                }
            }
        };
        {
            let state = warm.store.data_mut();
            if state.mapping != ctx.mapping_id {
                state.mapping.clone_from(&ctx.mapping_id);
            }
            state.client_ip.clone_from(&request.client_ip);
            state.side_effects = false;
            state.stdio.clear_tail();
        }
        warm.set_budget(warm.timeout, warm.deadline_ticks);
        let result = call(&mut warm);
        warm.calls += 1;
        let trapped = result.is_err();
        warm.store.data_mut().forward_output(trapped);
        match result {
            Ok(Ok(v)) => {
                self.give_back(code, warm, pooled);
                Attempt::Done(Ok(v))
            }
            Ok(Err(e)) => {
                // An error the plugin returned as a value: the instance is sound.
                self.give_back(code, warm, pooled);
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                let reason = format!("it returned an error: {}", e.message);
                tracing::warn!(plugin = %self.name, mapping = %ctx.mapping_id, "plugin call failed: {reason}");
                Attempt::Done(Err(PluginFailure {
                    plugin: self.name.clone(),
                    reason,
                    loading: false,
                }))
            }
            // A trap: this instance is dropped (it cannot be entered again).
            Err(e) => {
                let state = warm.store.data();
                let retry = state.limits.hit_cap
                    && warm.calls > 1
                    && !state.side_effects
                    && !fresh
                    && pooled;
                let what = if warm.preparing {
                    "trapped in prepare"
                } else {
                    "trapped"
                };
                let failure = self.failed(code, &e, Some(&warm), what);
                if retry {
                    // Not counted as a failure unless the fresh instance fails too.
                    self.stats.failures.fetch_sub(1, Ordering::Relaxed);
                    Attempt::RetryFresh(failure)
                } else {
                    Attempt::Done(Err(failure))
                }
            }
        }
    }

    /// Returns a sound instance to the pool, unless it is retired: its memory has
    /// reached the high-water mark, or it has served its quota of calls.
    fn give_back(&self, code: &Code, warm: Warm, pooled: bool) {
        if !pooled {
            return;
        }
        let s = &code.settings;
        let retire = warm.store.data().limits.peak >= s.retire_at_bytes()
            || (s.max_calls_per_instance > 0 && warm.calls >= s.max_calls_per_instance);
        if retire {
            self.stats.instances_retired.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(plugin = %self.name, calls = warm.calls, memory = warm.store.data().limits.peak, "instance retired");
            return;
        }
        let mut pool = code.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < s.max_idle_instances {
            pool.push(warm);
        }
    }

    fn failed(
        &self,
        code: &Code,
        e: &wasmtime::Error,
        warm: Option<&Warm>,
        what: &str,
    ) -> PluginFailure {
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        let hit_cap = warm.is_some_and(|w| w.store.data().limits.hit_cap);
        let text = format!("{e:#}");
        let mut reason = if matches!(
            e.downcast_ref::<wasmtime::Trap>(),
            Some(wasmtime::Trap::Interrupt)
        ) {
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
            let ms = code.settings.timeout_milliseconds;
            let preparing = warm.is_some_and(|w| w.preparing);
            match warm.and_then(|w| w.store.data().clock.stopped) {
                _ if preparing => format!(
                    "its prepare ran past its budget of {} ms of CPU time ({WALL_FACTOR} times that in wall time) and was stopped",
                    PREPARE_BUDGET.as_millis()
                ),
                Some(Stopped::Wall) => format!(
                    "it took {} ms of wall time ({WALL_FACTOR} times its CPU deadline of {ms} ms; the machine may be overloaded, or the plugin waits) and was stopped",
                    ms * u64::from(WALL_FACTOR)
                ),
                _ => format!("it ran past its CPU deadline of {ms} ms and was stopped"),
            }
        } else if hit_cap || text.contains("growing memory") || text.contains("memory minimum size")
        {
            format!(
                "it went over its memory limit of {} MiB",
                code.settings.memory_limit_mib
            )
        } else {
            let cause = match e.downcast_ref::<wasmtime::Trap>() {
                Some(t) => t.to_string(),
                None => e.root_cause().to_string(),
            };
            let cause = cause.lines().next().unwrap_or_default().trim().to_owned();
            let hint = if cause.contains("unreachable") {
                " (a panic, abort or uncaught exception in the guest ends this way)"
            } else {
                ""
            };
            format!("{what}: {cause}{hint}")
        };
        if let Some(w) = warm {
            let tail = w.store.data().stdio.stderr_tail();
            if !tail.is_empty() {
                reason.push_str("\nguest stderr:\n");
                reason.push_str(&tail);
            }
        }
        if let Some(bt) = e.downcast_ref::<wasmtime::WasmBacktrace>() {
            let frames: Vec<String> = bt
                .frames()
                .iter()
                .take(12)
                .enumerate()
                .map(|(i, f)| {
                    let module = f.module().name().unwrap_or("<module>");
                    match f.func_name() {
                        Some(n) => format!("  {i}: {module}!{n}"),
                        None => format!("  {i}: {module}!<function {}>", f.func_index()),
                    }
                })
                .collect();
            if !frames.is_empty() {
                reason.push_str("\nwasm backtrace:\n");
                reason.push_str(&frames.join("\n"));
                if bt.frames().len() > frames.len() {
                    reason.push_str(&format!(
                        "\n  ... {} more",
                        bt.frames().len() - frames.len()
                    ));
                }
            }
        }
        tracing::warn!(plugin = %self.name, origin = %code.origin, "plugin call failed: {reason}");
        PluginFailure {
            plugin: self.name.clone(),
            reason,
            loading: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, headers: &[(&str, &str)], body: &str) -> wit::Response {
        wit::Response::Http(wit::HttpResponse {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: body.as_bytes().to_vec(),
            delay_ms: None,
        })
    }

    #[test]
    fn equal_answers_have_equal_keys_and_any_change_changes_the_key() {
        let answer = http(200, &[("a", "1")], "{{x}}");
        assert_eq!(AnswerKey::of(&answer), AnswerKey::of(&answer.clone()));
        let others = [
            http(201, &[("a", "1")], "{{x}}"),
            http(200, &[("a", "2")], "{{x}}"),
            http(200, &[("a", "1"), ("b", "")], "{{x}}"),
            // The same bytes, cut elsewhere.
            http(200, &[("a1", "")], "{{x}}"),
            http(200, &[("a", "1")], "{{y}}"),
            wit::Response::Mq(wit::MqReply {
                body: b"{{x}}".to_vec(),
                properties: vec![("a".into(), "1".into())],
                destination: None,
                delay_ms: None,
            }),
        ];
        for other in others {
            assert_ne!(AnswerKey::of(&answer), AnswerKey::of(&other), "{other:?}");
        }
    }

    /// `prepare` is given the parameters too: an instance prepared for an answer
    /// under some parameters is not prepared for it under others.
    #[test]
    fn the_same_answer_under_other_parameters_is_prepared_again() {
        let key = AnswerKey::of(&http(200, &[], "{{x}}"));
        let context = |parameters: &str| wit::CallContext {
            mapping_id: "m".into(),
            mapping_name: None,
            parameters: parameters.into(),
        };
        assert_eq!(
            PreparedFor::of(key, &context("{}")),
            PreparedFor::of(key, &context("{}"))
        );
        assert_ne!(
            PreparedFor::of(key, &context("{}")),
            PreparedFor::of(key, &context(r#"{"schema":"v2"}"#))
        );
        let other = AnswerKey::of(&http(200, &[], "{{y}}"));
        assert_ne!(
            PreparedFor::of(key, &context("{}")),
            PreparedFor::of(other, &context("{}"))
        );
    }
}
