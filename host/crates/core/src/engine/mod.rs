//! The engine: the live mapping set, scenario states, and request → response plan.
//!
//! The mapping set is immutable once built ([`MappingSet`]) and published through an
//! `ArcSwap`: a request takes a snapshot pointer once and uses it to the end, so a
//! reload that swaps in a new set never blocks a reader and a request never sees half
//! of one set and half of another. The only shared mutable state on the request path
//! is the scenario table, touched only by mappings that belong to a scenario.
//!
//! Scenario states live in this process ([`Scenarios::Local`], a mutex-protected map)
//! or, with `decoy serve --state`, in a store shared by several instances
//! ([`Scenarios::Shared`]): then [`Engine::respond_async`] awaits the shared store,
//! and only for a request whose best candidate belongs to a scenario.

pub mod index;
pub mod report;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;
use crate::metrics::MappingStats;
use crate::shared::{SharedScenarios, Step, Unavailable};
use decoy_matching::custom::MatchFailure;
use decoy_spec::plan::{ResponsePlan, add_delay};
use decoy_spec::request::RequestSnapshot;
use index::{Index, URL_CHECKED};
use std::time::Duration;

/// Scenario state every scenario starts in, as in WireMock.
pub const STARTED: &str = "Started";

/// An immutable, indexed set of mappings in priority order.
#[derive(Debug)]
pub struct MappingSet {
    /// Best first: lowest `priority`, then the most recently added; see [`Entry`].
    ranked: Vec<Entry>,
    /// Rank of each mapping in the order they were added (for the admin API).
    added: Vec<u32>,
    index: Index,
}

/// One mapping of the set, with what matching reads first and its counters, packed
/// in one array of 32-byte entries so that a request spread over 10,000 stubs finds
/// the method, the flags and both pointers in one cache line next to the other
/// stubs' instead of in three arrays and the mapping's own memory, which the CPU's
/// caches have long lost. For a stub that pins only its method and URL (most of
/// them), with a URL the index has decided, this is all of matching. Aligned to its
/// size, so that no entry straddles two cache lines.
#[derive(Debug)]
#[repr(align(32))]
struct Entry {
    mapping: Arc<Mapping>,
    /// Runtime counters. A mapping keeps its counters across reloads (they are
    /// carried over by id), so they are not part of the spec.
    stats: Arc<MappingStats>,
    /// The method, packed by [`method_key`]; `ANY_METHOD` for any.
    method: u64,
    /// `method` says all about the method (false for one too long to pack, left to
    /// the pattern).
    method_decided: bool,
    /// Nothing to match but the method and the URL: no other matcher, no custom
    /// matcher, no scenario.
    plain: bool,
}

// Two entries to a cache line, never one across two.
const _: () = assert!(std::mem::size_of::<Entry>() == 32 && std::mem::align_of::<Entry>() == 32);

/// [`Entry::method`] of a stub that takes any method.
const ANY_METHOD: u64 = 0;

/// A method of up to 8 bytes, packed into a `u64` (so comparing two is one
/// instruction); `None` for a longer one. Methods are non-empty tokens, so no packed
/// method is [`ANY_METHOD`].
fn method_key(method: &str) -> Option<u64> {
    let b = method.as_bytes();
    if b.is_empty() || b.len() > 8 {
        return None;
    }
    let mut word = [0u8; 8];
    word[..b.len()].copy_from_slice(b);
    Some(u64::from_le_bytes(word))
}

impl Entry {
    fn new(mapping: Arc<Mapping>, stats: Arc<MappingStats>) -> Entry {
        let (method, method_decided) = match mapping.request.method.name() {
            None => (ANY_METHOD, true),
            Some(name) => match method_key(name) {
                Some(key) => (key, true),
                None => (ANY_METHOD, false),
            },
        };
        let plain =
            method_decided && mapping.scenario.is_none() && mapping.request.only_method_and_url();
        Entry {
            mapping,
            stats,
            method,
            method_decided,
            plain,
        }
    }

    /// Whether a request whose method packs to `request_method` (`u64::MAX` when it
    /// does not pack, which no stub's key equals) can match.
    fn method_allows(&self, request_method: u64) -> bool {
        self.method == ANY_METHOD || self.method == request_method
    }
}

impl MappingSet {
    /// `mappings` in the order they were added (later ones win ties).
    pub fn new(mappings: Vec<Arc<Mapping>>) -> MappingSet {
        MappingSet::with_stats(mappings, |_| Arc::default())
    }

    fn with_stats(
        mappings: Vec<Arc<Mapping>>,
        stats_for: impl Fn(&Mapping) -> Arc<MappingStats>,
    ) -> MappingSet {
        let n = mappings.len();
        let mut ranked: Vec<(usize, Arc<Mapping>)> =
            mappings.into_iter().enumerate().rev().collect();
        // Stable: among equal priorities the reversed insertion order is kept.
        ranked.sort_by_key(|(_, m)| m.priority);
        let mut added = vec![0u32; n];
        for (rank, (i, _)) in ranked.iter().enumerate() {
            added[*i] = rank as u32;
        }
        let ranked: Vec<Entry> = ranked
            .into_iter()
            .map(|(_, m)| {
                let stats = stats_for(&m);
                Entry::new(m, stats)
            })
            .collect();
        let index = Index::build(ranked.iter().map(|e| &e.mapping.request.url));
        MappingSet {
            ranked,
            added,
            index,
        }
    }

    /// In the order they were added (files in path order, then API stubs).
    pub fn in_insertion_order(&self) -> impl DoubleEndedIterator<Item = &Arc<Mapping>> {
        self.added.iter().map(|&r| &self.ranked[r as usize].mapping)
    }

    /// Every mapping with its counters, in priority order.
    pub fn with_stats_iter(&self) -> impl Iterator<Item = (&Arc<Mapping>, &MappingStats)> {
        self.ranked.iter().map(|e| (&e.mapping, &*e.stats))
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Mapping>> {
        self.iter().find(|m| &*m.id == id)
    }

    pub fn len(&self) -> usize {
        self.ranked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranked.is_empty()
    }

    /// In priority order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Mapping>> {
        self.ranked.iter().map(|e| &e.mapping)
    }
}

/// What the engine decided for one request.
#[derive(Debug)]
pub enum Outcome {
    Matched {
        mapping: Arc<Mapping>,
        plan: ResponsePlan,
        /// The mapping's counters, for the serve step to count the answer in.
        stats: Arc<MappingStats>,
    },
    /// WireMock's 404 with a report of the closest mapping.
    NotMatched { plan: ResponsePlan },
}

impl Outcome {
    pub fn plan(&self) -> &ResponsePlan {
        match self {
            Outcome::Matched { plan, .. } | Outcome::NotMatched { plan } => plan,
        }
    }

    pub fn into_plan(self) -> ResponsePlan {
        match self {
            Outcome::Matched { plan, .. } | Outcome::NotMatched { plan } => plan,
        }
    }
}

/// Delays added to every stubbed response (`POST /__admin/settings`), as WireMock's
/// global settings.
#[derive(Debug, Clone, Default)]
pub struct GlobalSettings {
    pub fixed_delay: std::time::Duration,
    pub delay_distribution: Option<decoy_spec::plan::DelayDistribution>,
    /// The settings as last posted, echoed by `GET /__admin/settings`.
    pub raw: Option<serde_json::Value>,
}

/// Where scenario states are kept.
#[derive(Debug)]
pub enum Scenarios {
    /// In this process: scenario name → current state (absent: [`STARTED`]).
    Local(Mutex<HashMap<String, String>>),
    /// In a store shared with other instances (`decoy serve --state`).
    Shared(Arc<dyn SharedScenarios>),
}

#[derive(Debug)]
pub struct Engine {
    /// The live mapping set; replaced wholesale by [`Engine::replace`].
    set: ArcSwap<MappingSet>,
    scenarios: Scenarios,
    /// Global delays; read once per matched request.
    settings: ArcSwap<GlobalSettings>,
}

thread_local! {
    static CANDIDATES: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Engine {
    pub fn new(mappings: Vec<Mapping>) -> Engine {
        Engine {
            set: ArcSwap::from_pointee(MappingSet::new(
                mappings.into_iter().map(Arc::new).collect(),
            )),
            scenarios: Scenarios::Local(Mutex::new(HashMap::new())),
            settings: ArcSwap::from_pointee(GlobalSettings::default()),
        }
    }

    /// An engine whose scenario states live in `shared` (no mappings yet).
    pub fn with_shared_scenarios(shared: Arc<dyn SharedScenarios>) -> Engine {
        Engine {
            scenarios: Scenarios::Shared(shared),
            ..Engine::new(Vec::new())
        }
    }

    /// Whether scenario states are shared with other instances.
    pub fn shares_scenarios(&self) -> bool {
        matches!(self.scenarios, Scenarios::Shared(_))
    }

    pub fn settings(&self) -> Arc<GlobalSettings> {
        self.settings.load_full()
    }

    pub fn set_settings(&self, s: GlobalSettings) {
        self.settings.store(Arc::new(s));
    }

    /// The current mapping set (a cheap pointer copy).
    pub fn mappings(&self) -> Arc<MappingSet> {
        self.set.load_full()
    }

    /// Publishes a new mapping set atomically. Requests already matching keep the old
    /// set; scenario states are kept for scenarios that still exist.
    pub fn replace(&self, mappings: Vec<Mapping>) {
        self.replace_shared(mappings.into_iter().map(Arc::new).collect());
    }

    /// As [`Engine::replace`], for mappings shared with the store. Counters carry over
    /// to the new set for mappings whose id remains.
    pub fn replace_shared(&self, mappings: Vec<Arc<Mapping>>) {
        let old = self.set.load();
        let by_id: HashMap<&str, &Arc<MappingStats>> = old
            .ranked
            .iter()
            .map(|e| (&*e.mapping.id, &e.stats))
            .collect();
        let set = MappingSet::with_stats(mappings, |m| {
            by_id.get(&*m.id).map(|s| Arc::clone(s)).unwrap_or_default()
        });
        drop(by_id);
        // Shared states are left alone: other instances serve the same scenarios,
        // and a reset clears them all.
        if let Scenarios::Local(states) = &self.scenarios {
            let names: std::collections::HashSet<&str> = set
                .iter()
                .filter_map(|m| m.scenario.as_ref().map(|s| s.name.as_str()))
                .collect();
            lock(states).retain(|name, _| names.contains(name.as_str()));
        }
        self.set.store(Arc::new(set));
    }

    /// A scenario's state. With shared states this asks the shared store (blocking:
    /// admin API threads only), which can fail.
    pub fn scenario_state(&self, name: &str) -> Result<String, Unavailable> {
        Ok(match &self.scenarios {
            Scenarios::Local(states) => lock(states)
                .get(name)
                .cloned()
                .unwrap_or_else(|| STARTED.to_owned()),
            Scenarios::Shared(shared) => shared
                .states_blocking()?
                .remove(name)
                .unwrap_or_else(|| STARTED.to_owned()),
        })
    }

    /// Every scenario back to [`STARTED`] (shared: as [`Engine::scenario_state`]).
    pub fn reset_scenarios(&self) -> Result<(), Unavailable> {
        match &self.scenarios {
            Scenarios::Local(states) => lock(states).clear(),
            Scenarios::Shared(shared) => shared.reset()?,
        }
        Ok(())
    }

    pub fn set_scenario_state(&self, name: &str, state: &str) -> Result<(), Unavailable> {
        match &self.scenarios {
            Scenarios::Local(states) => {
                let mut states = lock(states);
                if state == STARTED {
                    states.remove(name);
                } else {
                    states.insert(name.to_owned(), state.to_owned());
                }
            }
            Scenarios::Shared(shared) => shared.set_state(name, state)?,
        }
        Ok(())
    }

    /// Finds the mapping for `req` and plans the response, with scenario states in
    /// this process. (With shared states, scenario stubs are skipped here: the
    /// transport calls [`Engine::respond_async`].)
    pub fn respond(&self, req: &RequestSnapshot) -> Outcome {
        let set = self.set.load();
        // The first candidate that matches (and whose scenario is in the required
        // state) wins. A custom matcher that failed stops the search: the request gets
        // a 500 naming the plugin, not some other mapping's answer.
        let method = method_key(&req.method).unwrap_or(u64::MAX);
        let found = CANDIDATES.with(|c| {
            let mut candidates = c.borrow_mut();
            set.index.candidates(req.path(), &req.url, &mut candidates);
            candidates.iter().find_map(|&c| {
                let rank = Index::rank(c);
                let entry = &set.ranked[rank];
                if !entry.method_allows(method) {
                    return None;
                }
                let url_checked = c & URL_CHECKED != 0;
                let m = &entry.mapping;
                if entry.plain {
                    // Method and URL are all it pins: the rest of the pattern (and
                    // its memory) need not be read.
                    return (url_checked || m.request.url_matches(req)).then_some((rank, None));
                }
                match m
                    .request
                    .try_matches_checked(req, url_checked, entry.method_decided)
                {
                    Ok(true) if self.enter_scenario(m) => Some((rank, None)),
                    Ok(_) => None,
                    Err(f) => Some((rank, Some(f))),
                }
            })
        });
        match found {
            Some((rank, failure)) => self.matched(&set, rank, failure, req),
            None => Outcome::NotMatched {
                // Local states (the shared ones are read by `respond_async`).
                plan: report::not_matched_plan(&set, req, |name| {
                    self.scenario_state(name)
                        .unwrap_or_else(|_| STARTED.to_owned())
                }),
            },
        }
    }

    /// Other stubs of `winner`'s priority whose built-in matchers also accept `req`:
    /// the stubs a tie was decided against (the one read or added last wins, as in
    /// WireMock, so the answer can depend on the file system's listing order). This is
    /// for the admin API's journal, computed when an event is read, never while
    /// serving; stubs with a plugin matcher are left out, so reading the journal never
    /// calls a plugin. Scenario states are not considered.
    pub fn also_matching(&self, req: &RequestSnapshot, winner: &Mapping) -> Vec<Arc<Mapping>> {
        let set = self.set.load();
        let mut candidates = Vec::new();
        set.index.candidates(req.path(), &req.url, &mut candidates);
        candidates
            .iter()
            .map(|&c| &set.ranked[Index::rank(c)].mapping)
            .filter(|m| {
                m.priority == winner.priority
                    && m.id != winner.id
                    && m.request.custom_matcher().is_none()
                    && m.request.matches(req)
            })
            .cloned()
            .collect()
    }

    /// As [`Engine::respond`], for the async transports: with scenario states in
    /// this process it is exactly that; with shared states, the matching candidates
    /// of scenarios are sent to the shared store in one atomic step, which picks the
    /// first whose scenario is in its required state and moves it on. A request that
    /// touches no scenario does not wait for the shared store.
    pub async fn respond_async(&self, req: &RequestSnapshot) -> Outcome {
        let shared = match &self.scenarios {
            Scenarios::Local(_) => return self.respond(req),
            Scenarios::Shared(shared) => shared,
        };
        let set = self.set.load_full();
        // Matching candidates of scenarios, in order, up to the first candidate that
        // wins without a scenario (or whose custom matcher failed).
        let mut steps: Vec<usize> = Vec::new();
        let mut last: Option<(usize, Option<MatchFailure>)> = None;
        CANDIDATES.with(|c| {
            let mut candidates = c.borrow_mut();
            set.index.candidates(req.path(), &req.url, &mut candidates);
            for &c in candidates.iter() {
                let rank = Index::rank(c);
                let m = &set.ranked[rank].mapping;
                match m.request.try_matches_with(req, c & URL_CHECKED != 0) {
                    Ok(true) if m.scenario.is_some() => steps.push(rank),
                    Ok(true) => {
                        last = Some((rank, None));
                        break;
                    }
                    Ok(false) => {}
                    Err(f) => {
                        last = Some((rank, Some(f)));
                        break;
                    }
                }
            }
        });
        let found = if steps.is_empty() {
            last
        } else {
            let scenario_steps: Vec<Step<'_>> = steps
                .iter()
                .filter_map(|&rank| set.ranked[rank].mapping.scenario.as_ref())
                .map(|s| Step {
                    scenario: &s.name,
                    required: s.required_state.as_deref(),
                    new_state: s.new_state.as_deref(),
                })
                .collect();
            match shared.choose(&scenario_steps).await {
                Ok(Some(i)) => steps.get(i).map(|&rank| (rank, None)),
                Ok(None) => last,
                Err(e) => {
                    tracing::warn!("{e}: scenario request answered 503");
                    let mapping = set.ranked[steps[0]].mapping.clone();
                    let stats = set.ranked[steps[0]].stats.clone();
                    let plan = unavailable_plan(&mapping, &e.0);
                    return Outcome::Matched {
                        mapping,
                        plan,
                        stats,
                    };
                }
            }
        };
        match found {
            Some((rank, failure)) => self.matched(&set, rank, failure, req),
            None => {
                let states = shared.states().await.unwrap_or_default();
                Outcome::NotMatched {
                    plan: report::not_matched_plan(&set, req, |name| {
                        states
                            .get(name)
                            .cloned()
                            .unwrap_or_else(|| STARTED.to_owned())
                    }),
                }
            }
        }
    }

    /// The answer of the mapping ranked `rank`, which matched (or whose custom
    /// matcher failed).
    fn matched(
        &self,
        set: &MappingSet,
        rank: usize,
        failure: Option<MatchFailure>,
        req: &RequestSnapshot,
    ) -> Outcome {
        let entry = &set.ranked[rank];
        // Counted by the serve step's record (`MappingStats::record`).
        let stats = entry.stats.clone();
        let mapping = entry.mapping.clone();
        if let Some(f) = failure {
            let plan = failure_plan(&mapping, &f.matcher, &f.reason, f.loading);
            return Outcome::Matched {
                mapping,
                plan,
                stats,
            };
        }
        let mut plan = plan_for(&mapping);
        if !mapping.response.transformers.is_empty()
            && plan.proxy.is_none()
            && let Err(f) = mapping.response.transformers.transform_http(
                (&mapping.id, mapping.name.as_deref()),
                req,
                mapping.request.path_parameters(req),
                &mut plan,
            )
        {
            plan = failure_plan(&mapping, &f.plugin, &f.reason, f.loading);
        }
        let global = self.settings.load();
        plan.delay = add_delay(plan.delay, global.fixed_delay);
        if let Some(d) = &global.delay_distribution {
            plan.delay = add_delay(plan.delay, d.sample());
        }
        Outcome::Matched {
            mapping,
            plan,
            stats,
        }
    }

    /// Checks the mapping's required scenario state and moves the scenario on, under
    /// one lock so two concurrent requests cannot both take the same transition.
    fn enter_scenario(&self, m: &Mapping) -> bool {
        let Some(s) = &m.scenario else { return true };
        let Scenarios::Local(states) = &self.scenarios else {
            return false;
        };
        let mut states = lock(states);
        let current = states.get(&s.name).map(String::as_str).unwrap_or(STARTED);
        if let Some(required) = &s.required_state
            && required != current
        {
            return false;
        }
        if let Some(new) = &s.new_state {
            states.insert(s.name.clone(), new.clone());
        }
        true
    }
}

fn lock(
    states: &Mutex<HashMap<String, String>>,
) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    // A panic while holding this lock cannot leave the map inconsistent (every
    // update is a single insert), so a poisoned lock is still usable.
    states.lock().unwrap_or_else(|p| p.into_inner())
}

/// The 503 for a request to a scenario stub while the shared state cannot be
/// reached: JSON naming the mapping and the reason, `Retry-After: 1`.
pub fn unavailable_plan(mapping: &Mapping, reason: &str) -> ResponsePlan {
    let body = serde_json::json!({
        "error": "shared state unavailable",
        "mapping": mapping.id.as_ref(),
        "mappingName": mapping.name.as_deref(),
        "reason": reason,
    });
    let mut plan = decoy_spec::plan::text_plan(503, format!("{body:#}\n"));
    plan.headers = Arc::from(vec![
        (
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("application/json"),
        ),
        (
            HeaderName::from_static("retry-after"),
            HeaderValue::from_static("1"),
        ),
    ]);
    plan
}

/// The plan for a matched mapping. Everything is shared with the mapping except the
/// sampled delay.
pub fn plan_for(m: &Mapping) -> ResponsePlan {
    let r = &m.response;
    // Capped at MAX_DELAY, whatever the mapping says.
    let mut delay = add_delay(r.fixed_delay, Duration::ZERO);
    if let Some(d) = &r.delay_distribution {
        delay = add_delay(delay, d.sample());
    }
    ResponsePlan {
        status: r.status,
        status_message: r.status_message.clone(),
        headers: m.served_headers.clone(),
        body: r.body.clone(),
        delay,
        dribble: r.dribble,
        fault: r.fault,
        proxy: r.proxy.clone(),
    }
}

/// The 500 for a request whose plugin failed: JSON naming the plugin, the mapping
/// and the reason. A plugin still compiling (`loading`) gives a 503 with
/// `Retry-After: 1` instead.
pub fn failure_plan(mapping: &Mapping, plugin: &str, reason: &str, loading: bool) -> ResponsePlan {
    let body = serde_json::json!({
        "error": if loading { "plugin loading" } else { "plugin failed" },
        "plugin": plugin,
        "mapping": mapping.id.as_ref(),
        "mappingName": mapping.name.as_deref(),
        "reason": reason,
    });
    let status = if loading { 503 } else { 500 };
    let mut plan = decoy_spec::plan::text_plan(status, format!("{body:#}\n"));
    let mut headers = vec![(
        HeaderName::from_static("content-type"),
        HeaderValue::from_static("application/json"),
    )];
    if loading {
        headers.push((
            HeaderName::from_static("retry-after"),
            HeaderValue::from_static("1"),
        ));
    }
    plan.headers = Arc::from(headers);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::ParseContext;
    use crate::shared;
    use serde_json::{Value, json};
    use std::sync::atomic::Ordering;

    fn engine(stubs: Vec<Value>) -> Engine {
        let ctx = ParseContext {
            files_dir: "/nonexistent".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        };
        Engine::new(
            stubs
                .iter()
                .map(|v| Mapping::parse(v, &ctx, None, &mut Vec::new()).unwrap())
                .collect(),
        )
    }

    fn body(e: &Engine, method: &str, url: &str) -> String {
        let plan = e.respond(&RequestSnapshot::new(method, url)).into_plan();
        String::from_utf8_lossy(&plan.body).into_owned()
    }

    #[test]
    fn lowest_priority_number_wins_then_latest_added() {
        let e = engine(vec![
            json!({"request": {"urlPathPattern": "/a/.*"}, "response": {"body": "regex"}}),
            json!({"request": {"urlPath": "/a/b"}, "response": {"body": "exact-old"}}),
            json!({"request": {"urlPath": "/a/b"}, "response": {"body": "exact-new"}}),
            json!({"priority": 1, "request": {"urlPathPattern": "/a/b.*"}, "response": {"body": "urgent"}}),
        ]);
        assert_eq!(body(&e, "GET", "/a/b"), "urgent");
        assert_eq!(body(&e, "GET", "/a/c"), "regex");
        let e = engine(vec![
            json!({"request": {"urlPath": "/a/b"}, "response": {"body": "exact"}}),
            json!({"request": {"urlPathPattern": "/a/.*"}, "response": {"body": "regex"}}),
        ]);
        assert_eq!(body(&e, "GET", "/a/b"), "regex");
    }

    #[test]
    fn stubs_decided_from_their_packed_method_and_url_match_as_the_full_pattern_does() {
        // Later stubs win ties; each is skipped unless its method (packed, long or
        // any), its other matchers and its scenario allow the request.
        let e = engine(vec![
            json!({"request": {"urlPath": "/m"}, "response": {"body": "any"}}),
            json!({"request": {"method": "GET", "url": "/m"}, "response": {"body": "get"}}),
            json!({"request": {"method": "PROPPATCHX", "urlPath": "/m"}, "response": {"body": "long"}}),
            json!({"request": {"method": "POST", "urlPath": "/m", "headers": {"X": {"equalTo": "1"}}}, "response": {"body": "post-x"}}),
            json!({"scenarioName": "s", "requiredScenarioState": "later", "request": {"method": "PUT", "urlPath": "/m"}, "response": {"body": "put-later"}}),
            json!({"request": {"method": "GETX", "urlPath": "/m"}, "response": {"body": "getx"}}),
        ]);
        assert_eq!(body(&e, "GET", "/m"), "get");
        assert_eq!(
            body(&e, "GET", "/m?q=1"),
            "any",
            "a url with no query does not match one with a query"
        );
        assert_eq!(body(&e, "GETX", "/m"), "getx");
        assert_eq!(body(&e, "PROPPATCHX", "/m"), "long");
        assert_eq!(body(&e, "PROPPATCHY", "/m"), "any");
        assert_eq!(
            body(&e, "POST", "/m"),
            "any",
            "the header matcher still runs"
        );
        let with_x = e.respond(
            &RequestSnapshot::new("POST", "/m").with_headers(
                [(
                    http::header::HeaderName::from_static("x"),
                    http::HeaderValue::from_static("1"),
                )]
                .into_iter()
                .collect(),
            ),
        );
        assert_eq!(&with_x.into_plan().body[..], b"post-x");
        assert_eq!(
            body(&e, "PUT", "/m"),
            "any",
            "the scenario is still in Started"
        );
        e.set_scenario_state("s", "later").unwrap();
        assert_eq!(body(&e, "PUT", "/m"), "put-later");
    }

    #[test]
    fn packed_methods_are_distinct_and_long_ones_are_not_packed() {
        assert_ne!(method_key("GET"), method_key("GETX"));
        assert_ne!(method_key("GET"), method_key("get"));
        assert_eq!(method_key("OPTIONS"), method_key("OPTIONS"));
        assert!(method_key("PROPPATCH").is_none());
        assert!(method_key("").is_none());
        assert!(method_key("GET").is_some_and(|k| k != ANY_METHOD));
    }

    #[test]
    fn scenarios_move_through_their_states() {
        let e = engine(vec![
            json!({"scenarioName": "todo", "requiredScenarioState": "Started", "request": {"urlPath": "/todo"}, "response": {"body": "empty"}}),
            json!({"scenarioName": "todo", "requiredScenarioState": "Started", "newScenarioState": "added", "request": {"method": "POST", "urlPath": "/todo"}, "response": {"status": 201}}),
            json!({"scenarioName": "todo", "requiredScenarioState": "added", "request": {"urlPath": "/todo"}, "response": {"body": "one item"}}),
        ]);
        assert_eq!(body(&e, "GET", "/todo"), "empty");
        assert_eq!(
            e.respond(&RequestSnapshot::new("POST", "/todo"))
                .plan()
                .status,
            201
        );
        assert_eq!(e.scenario_state("todo").unwrap(), "added");
        assert_eq!(body(&e, "GET", "/todo"), "one item");
        e.reset_scenarios().unwrap();
        assert_eq!(body(&e, "GET", "/todo"), "empty");
    }

    #[test]
    fn replace_keeps_states_of_scenarios_that_remain() {
        let s = |state: &str| json!({"scenarioName": "s", "requiredScenarioState": state, "newScenarioState": "next", "request": {"urlPath": "/s"}});
        let e = engine(vec![s("Started")]);
        e.respond(&RequestSnapshot::new("GET", "/s"));
        assert_eq!(e.scenario_state("s").unwrap(), "next");
        let ctx = ParseContext {
            files_dir: "/x".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        };
        e.replace(vec![
            Mapping::parse(&s("next"), &ctx, None, &mut Vec::new()).unwrap(),
        ]);
        assert_eq!(e.scenario_state("s").unwrap(), "next");
        e.replace(Vec::new());
        assert_eq!(e.scenario_state("s").unwrap(), STARTED);
    }

    /// One `choose` call as the fake saw it: (scenario, required, new state) per step.
    type Asked = Vec<(String, Option<String>, Option<String>)>;

    /// Scenario states behind the shared seam, in memory: records what it is asked.
    #[derive(Debug, Default)]
    struct FakeShared {
        states: Mutex<HashMap<String, String>>,
        asked: Mutex<Vec<Asked>>,
        down: std::sync::atomic::AtomicBool,
    }

    impl SharedScenarios for FakeShared {
        fn choose<'a>(
            &'a self,
            steps: &'a [Step<'a>],
        ) -> shared::BoxFuture<'a, Result<Option<usize>, shared::Unavailable>> {
            let record = steps
                .iter()
                .map(|s| {
                    (
                        s.scenario.to_owned(),
                        s.required.map(str::to_owned),
                        s.new_state.map(str::to_owned),
                    )
                })
                .collect();
            lock_any(&self.asked).push(record);
            let result = if self.down.load(Ordering::Relaxed) {
                Err(shared::Unavailable("down".into()))
            } else {
                let mut states = lock_any(&self.states);
                Ok(steps.iter().position(|s| {
                    let current = states
                        .get(s.scenario)
                        .map(String::as_str)
                        .unwrap_or(STARTED);
                    let ok = s.required.is_none_or(|r| r == current);
                    if ok && let Some(n) = s.new_state {
                        states.insert(s.scenario.to_owned(), n.to_owned());
                    }
                    ok
                }))
            };
            Box::pin(std::future::ready(result))
        }
        fn states(
            &self,
        ) -> shared::BoxFuture<'_, Result<HashMap<String, String>, shared::Unavailable>> {
            Box::pin(std::future::ready(Ok(lock_any(&self.states).clone())))
        }
        fn states_blocking(&self) -> Result<HashMap<String, String>, shared::Unavailable> {
            Ok(lock_any(&self.states).clone())
        }
        fn set_state(&self, name: &str, state: &str) -> Result<(), shared::Unavailable> {
            lock_any(&self.states).insert(name.into(), state.into());
            Ok(())
        }
        fn reset(&self) -> Result<(), shared::Unavailable> {
            lock_any(&self.states).clear();
            Ok(())
        }
    }

    fn lock_any<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs a future that never waits (the fake's are ready at once).
    fn now<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the fake shared state never waits"),
        }
    }

    #[test]
    fn with_shared_states_scenario_candidates_go_to_the_store_in_one_step_and_static_stubs_never_do()
     {
        let fake = Arc::new(FakeShared::default());
        let e = Engine::with_shared_scenarios(fake.clone());
        let ctx = ParseContext {
            files_dir: "/nonexistent".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        };
        let stubs = [
            json!({"request": {"urlPath": "/static"}, "response": {"body": "static"}}),
            json!({"scenarioName": "s", "requiredScenarioState": "Started", "newScenarioState": "two", "request": {"urlPath": "/s"}, "response": {"body": "one"}}),
            json!({"scenarioName": "s", "requiredScenarioState": "two", "request": {"urlPath": "/s"}, "response": {"body": "two"}}),
        ];
        e.replace(
            stubs
                .iter()
                .map(|v| Mapping::parse(v, &ctx, None, &mut Vec::new()).unwrap())
                .collect(),
        );
        let answer = |url: &str| {
            let plan = now(e.respond_async(&RequestSnapshot::new("GET", url))).into_plan();
            (
                plan.status,
                String::from_utf8_lossy(&plan.body).into_owned(),
            )
        };
        assert_eq!(answer("/static"), (200, "static".into()));
        assert!(lock_any(&fake.asked).is_empty());
        assert_eq!(answer("/s"), (200, "one".into()));
        assert_eq!(answer("/s"), (200, "two".into()));
        // Both candidates, newest first, in one call each time.
        let asked = lock_any(&fake.asked).clone();
        assert_eq!(asked.len(), 2);
        assert_eq!(
            asked[0],
            [
                ("s".into(), Some("two".into()), None),
                ("s".into(), Some("Started".into()), Some("two".into())),
            ]
        );
        fake.down.store(true, Ordering::Relaxed);
        let (status, body) = answer("/s");
        assert_eq!(status, 503);
        assert!(body.contains("shared state unavailable"), "{body}");
        assert_eq!(answer("/static"), (200, "static".into()));
    }

    #[test]
    fn unmatched_requests_get_a_404_report() {
        let e = engine(vec![
            json!({"name": "users", "request": {"method": "GET", "urlPath": "/users"}}),
        ]);
        let out = e.respond(&RequestSnapshot::new("GET", "/userz"));
        assert!(matches!(out, Outcome::NotMatched { .. }));
        let plan = out.into_plan();
        assert_eq!(plan.status, 404);
        let text = String::from_utf8_lossy(&plan.body);
        assert!(text.contains("Request was not matched"), "{text}");
        assert!(text.contains("users"), "{text}");
        assert!(text.contains("<<<<< URL does not match"), "{text}");
    }
}
