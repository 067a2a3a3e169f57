//! The engine: the live mapping set, scenario states, and request → response plan.
//!
//! The mapping set is immutable once built ([`MappingSet`]) and published through an
//! `ArcSwap`: a request takes a snapshot pointer once and uses it to the end, so a
//! reload that swaps in a new set never blocks a reader and a request never sees half
//! of one set and half of another. The only shared mutable state on the request path
//! is the scenario table, touched only by mappings that belong to a scenario.

pub mod index;
pub mod report;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;
use crate::metrics::MappingStats;
use decoy_spec::plan::ResponsePlan;
use decoy_spec::request::RequestSnapshot;
use index::Index;

/// Scenario state every scenario starts in, as in WireMock.
pub const STARTED: &str = "Started";

/// An immutable, indexed set of mappings in priority order.
#[derive(Debug)]
pub struct MappingSet {
    /// Best first: lowest `priority`, then the most recently added.
    ranked: Vec<Arc<Mapping>>,
    /// Runtime counters, parallel to `ranked`. A mapping keeps its counters across
    /// reloads (they are carried over by id), so they are not part of the spec.
    stats: Vec<Arc<MappingStats>>,
    /// Rank of each mapping in the order they were added (for the admin API).
    added: Vec<u32>,
    index: Index,
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
        let ranked: Vec<Arc<Mapping>> = ranked.into_iter().map(|(_, m)| m).collect();
        let stats = ranked.iter().map(|m| stats_for(m)).collect();
        let index = Index::build(ranked.iter().map(|m| &m.request.url));
        MappingSet {
            ranked,
            stats,
            added,
            index,
        }
    }

    /// In the order they were added (files in path order, then API stubs).
    pub fn in_insertion_order(&self) -> impl DoubleEndedIterator<Item = &Arc<Mapping>> {
        self.added.iter().map(|&r| &self.ranked[r as usize])
    }

    /// Every mapping with its counters, in priority order.
    pub fn with_stats_iter(&self) -> impl Iterator<Item = (&Arc<Mapping>, &MappingStats)> {
        self.ranked.iter().zip(self.stats.iter().map(|s| &**s))
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Mapping>> {
        self.ranked.iter().find(|m| &*m.id == id)
    }

    pub fn len(&self) -> usize {
        self.ranked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranked.is_empty()
    }

    /// In priority order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Mapping>> {
        self.ranked.iter()
    }
}

/// What the engine decided for one request.
#[derive(Debug)]
pub enum Outcome {
    Matched {
        mapping: Arc<Mapping>,
        plan: ResponsePlan,
        /// The mapping's counters, for the transport to add the processing time.
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

#[derive(Debug)]
pub struct Engine {
    /// The live mapping set; replaced wholesale by [`Engine::replace`].
    set: ArcSwap<MappingSet>,
    /// Scenario name → current state. A scenario absent here is in [`STARTED`].
    scenarios: Mutex<HashMap<String, String>>,
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
            scenarios: Mutex::new(HashMap::new()),
            settings: ArcSwap::from_pointee(GlobalSettings::default()),
        }
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
            .zip(&old.stats)
            .map(|(m, s)| (&*m.id, s))
            .collect();
        let set = MappingSet::with_stats(mappings, |m| {
            by_id.get(&*m.id).map(|s| Arc::clone(s)).unwrap_or_default()
        });
        drop(by_id);
        let names: std::collections::HashSet<&str> = set
            .iter()
            .filter_map(|m| m.scenario.as_ref().map(|s| s.name.as_str()))
            .collect();
        self.lock_scenarios()
            .retain(|name, _| names.contains(name.as_str()));
        self.set.store(Arc::new(set));
    }

    pub fn scenario_state(&self, name: &str) -> String {
        self.lock_scenarios()
            .get(name)
            .cloned()
            .unwrap_or_else(|| STARTED.to_owned())
    }

    pub fn reset_scenarios(&self) {
        self.lock_scenarios().clear();
    }

    pub fn set_scenario_state(&self, name: &str, state: &str) {
        let mut states = self.lock_scenarios();
        if state == STARTED {
            states.remove(name);
        } else {
            states.insert(name.to_owned(), state.to_owned());
        }
    }

    fn lock_scenarios(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // A panic while holding this lock cannot leave the map inconsistent (every
        // update is a single insert), so a poisoned lock is still usable.
        self.scenarios.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Finds the mapping for `req` and plans the response.
    pub fn respond(&self, req: &RequestSnapshot) -> Outcome {
        let set = self.set.load();
        // The first candidate that matches (and whose scenario is in the required
        // state) wins. A custom matcher that failed stops the search: the request gets
        // a 500 naming the plugin, not some other mapping's answer.
        let found = CANDIDATES.with(|c| {
            let mut candidates = c.borrow_mut();
            set.index.candidates(req.path(), &mut candidates);
            candidates.iter().find_map(|&rank| {
                let m = &set.ranked[rank as usize];
                match m.request.try_matches(req) {
                    Ok(true) if self.enter_scenario(m) => Some((rank as usize, None)),
                    Ok(_) => None,
                    Err(f) => Some((rank as usize, Some(f))),
                }
            })
        });
        match found {
            Some((rank, failure)) => {
                let stats = set.stats[rank].clone();
                stats.served.fetch_add(1, Ordering::Relaxed);
                let mapping = set.ranked[rank].clone();
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
                plan.delay += global.fixed_delay;
                if let Some(d) = &global.delay_distribution {
                    plan.delay += d.sample();
                }
                Outcome::Matched {
                    mapping,
                    plan,
                    stats,
                }
            }
            None => Outcome::NotMatched {
                plan: report::not_matched_plan(&set, req, |name| self.scenario_state(name)),
            },
        }
    }

    /// Checks the mapping's required scenario state and moves the scenario on, under
    /// one lock so two concurrent requests cannot both take the same transition.
    fn enter_scenario(&self, m: &Mapping) -> bool {
        let Some(s) = &m.scenario else { return true };
        let mut states = self.lock_scenarios();
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

/// The plan for a matched mapping. Everything is shared with the mapping except the
/// sampled delay.
pub fn plan_for(m: &Mapping) -> ResponsePlan {
    let r = &m.response;
    let mut delay = r.fixed_delay;
    if let Some(d) = &r.delay_distribution {
        delay += d.sample();
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
        mapping_id: Some(m.id.clone()),
        mapping_name: m.name.clone(),
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
    plan.mapping_id = Some(mapping.id.clone());
    plan.mapping_name = mapping.name.clone();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::ParseContext;
    use serde_json::{Value, json};

    fn engine(stubs: Vec<Value>) -> Engine {
        let ctx = ParseContext {
            files_dir: "/nonexistent".into(),
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
        assert_eq!(e.scenario_state("todo"), "added");
        assert_eq!(body(&e, "GET", "/todo"), "one item");
        e.reset_scenarios();
        assert_eq!(body(&e, "GET", "/todo"), "empty");
    }

    #[test]
    fn replace_keeps_states_of_scenarios_that_remain() {
        let s = |state: &str| json!({"scenarioName": "s", "requiredScenarioState": state, "newScenarioState": "next", "request": {"urlPath": "/s"}});
        let e = engine(vec![s("Started")]);
        e.respond(&RequestSnapshot::new("GET", "/s"));
        assert_eq!(e.scenario_state("s"), "next");
        let ctx = ParseContext {
            files_dir: "/x".into(),
            plugins: None,
            global_templating: false,
        };
        e.replace(vec![
            Mapping::parse(&s("next"), &ctx, None, &mut Vec::new()).unwrap(),
        ]);
        assert_eq!(e.scenario_state("s"), "next");
        e.replace(Vec::new());
        assert_eq!(e.scenario_state("s"), STARTED);
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
