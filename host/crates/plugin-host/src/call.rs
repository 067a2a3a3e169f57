//! Calling a plugin: taking a warm instance (or making one), the deadline, and what
//! a failure looks like to the rest of decoy.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use wasmtime::Store;

use super::exports::decoy::plugin::{matcher, transformer};
use super::host_api::State;
use super::load::Isolation;
use super::{Code, Plugin, wit};

/// An instance ready for calls, in its own store.
pub(crate) struct Warm {
    store: Store<State>,
    transformer: Option<transformer::Guest>,
    matcher: Option<matcher::Guest>,
}

/// Why a plugin call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFailure {
    pub plugin: String,
    pub reason: String,
}

impl std::fmt::Display for PluginFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {:?} failed: {}", self.plugin, self.reason)
    }
}

impl Code {
    fn instantiate(&self, plugin: Arc<Plugin>) -> wasmtime::Result<Warm> {
        let mut store = Store::new(
            &self.engine,
            State::new(plugin, self.settings.memory_limit_bytes()),
        );
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_trap();
        // Start functions run under the same deadline as calls.
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
        Ok(Warm {
            store,
            transformer,
            matcher,
        })
    }
}

impl Plugin {
    /// Runs the plugin's transformer.
    pub fn transform(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &wit::Request,
        response: &wit::Response,
    ) -> Result<wit::Response, PluginFailure> {
        self.with_instance(|w| {
            let Some(t) = &w.transformer else {
                return Ok(Err(wit::PluginError {
                    message: "it has no transformer (it is a matcher plugin)".into(),
                }));
            };
            t.call_transform(&mut w.store, context, request, response)
        })
    }

    /// Runs the plugin's matcher.
    pub fn matches(
        self: &Arc<Self>,
        context: &wit::CallContext,
        request: &wit::Request,
    ) -> Result<bool, PluginFailure> {
        self.with_instance(|w| {
            let Some(m) = &w.matcher else {
                return Ok(Err(wit::PluginError {
                    message: "it has no matcher (it is a transformer plugin)".into(),
                }));
            };
            m.call_matches(&mut w.store, context, request)
        })
    }

    /// Runs `call` on an instance. Calls run directly on the calling thread. WASI's
    /// blocking host functions (writing to stdout or stderr, sleeping, polling) drive
    /// an async implementation with `block_on`, which panics on a thread that is
    /// running async tasks; the first time a plugin does that, the panic is caught,
    /// the instance dropped, the plugin marked, and the call made again (and every
    /// later call of that plugin) under [`outside_async`], which costs a thread
    /// hand-off per call. Side effects the first attempt had before it stopped (a
    /// `kv` write, say) happen twice, once.
    fn with_instance<R: Send>(
        self: &Arc<Self>,
        call: impl Fn(&mut Warm) -> wasmtime::Result<Result<R, wit::PluginError>> + Send + Sync,
    ) -> Result<R, PluginFailure> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let attempt = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call_on_instance(&call)
            }))
        };
        let mut result = None;
        if !self.needs_blocking.load(Ordering::Relaxed) {
            match attempt() {
                Err(_) if tokio::runtime::Handle::try_current().is_ok() => {
                    self.needs_blocking.store(true, Ordering::Relaxed);
                    tracing::info!(
                        plugin = %self.name,
                        "the plugin makes blocking WASI calls (stdout, stderr, sleep or poll); its calls now run off the async worker, which costs more per call"
                    );
                }
                other => result = Some(other),
            }
        }
        let result = result.unwrap_or_else(|| outside_async(attempt));
        result.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(plugin = %self.name, "a plugin call failed in the host: {what}");
            Err(PluginFailure {
                plugin: self.name.clone(),
                reason: format!("the host failed while serving it: {what}"),
            })
        })
    }

    fn call_on_instance<R>(
        self: &Arc<Self>,
        call: &impl Fn(&mut Warm) -> wasmtime::Result<Result<R, wit::PluginError>>,
    ) -> Result<R, PluginFailure> {
        let code = self.code.load_full();
        let pooled = code.settings.isolation == Isolation::Pooled;
        let warm = if pooled {
            code.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let mut warm = match warm {
            Some(w) => w,
            None => {
                self.stats.instances_created.fetch_add(1, Ordering::Relaxed);
                match code.instantiate(self.clone()) {
                    Ok(w) => w,
                    Err(e) => return Err(self.failed(&code, &e, "could not be instantiated")),
                }
            }
        };
        warm.store
            .set_epoch_deadline(code.settings.deadline_ticks());
        let result = call(&mut warm);
        let give_back = |warm: Warm| {
            if pooled {
                let mut pool = code.pool.lock().unwrap_or_else(|p| p.into_inner());
                if pool.len() < code.settings.max_idle_instances {
                    pool.push(warm);
                }
            }
        };
        match result {
            Ok(Ok(v)) => {
                give_back(warm);
                Ok(v)
            }
            Ok(Err(e)) => {
                // An error the plugin returned as a value: the instance is sound.
                give_back(warm);
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                Err(PluginFailure {
                    plugin: self.name.clone(),
                    reason: format!("it returned an error: {}", e.message),
                })
            }
            // A trap: this instance is dropped (it cannot be entered again).
            Err(e) => Err(self.failed(&code, &e, "trapped")),
        }
    }

    fn failed(&self, code: &Code, e: &wasmtime::Error, what: &str) -> PluginFailure {
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        let text = format!("{e:#}");
        let reason = if matches!(
            e.downcast_ref::<wasmtime::Trap>(),
            Some(wasmtime::Trap::Interrupt)
        ) {
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
            format!(
                "it ran past its CPU deadline of {} ms and was stopped",
                code.settings.timeout_milliseconds
            )
        } else if text.contains("growing memory") || text.contains("memory minimum size") {
            format!(
                "it went over its memory limit of {} MiB",
                code.settings.memory_limit_mib
            )
        } else {
            // Wasmtime appends a wasm backtrace; the first line says what happened.
            let first = text.lines().next().unwrap_or_default().trim().to_owned();
            let hint = if first.contains("unreachable") {
                " (a panic or abort in the guest ends this way)"
            } else {
                ""
            };
            format!("{what}: {first}{hint}")
        };
        tracing::warn!(plugin = %self.name, origin = %code.origin, "plugin call failed: {reason}");
        PluginFailure {
            plugin: self.name.clone(),
            reason,
        }
    }
}

/// Runs `f` where WASI's synchronous host functions may block: they drive their
/// async implementation with `block_on`, which tokio forbids on a thread that is
/// running async tasks. On a multi-threaded runtime's worker, `block_in_place` hands
/// the worker's other tasks to another thread for the duration; on a
/// current-thread runtime (tests, tools) the call runs on a scoped thread.
fn outside_async<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Err(_) => f(),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}
