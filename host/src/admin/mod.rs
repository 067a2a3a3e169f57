//! WireMock's admin API under `/__admin`, with the JSON shapes WireMock 3 returns,
//! so existing clients (Java `WireMock`, `wiremock-rest-client`, the `wiremock` PyPI
//! package) work unchanged.
//!
//! Requests arrive already read whole; every handler is synchronous (the store and the
//! journal lock only for in-memory work) and returns an [`AdminReply`], which the HTTP
//! transport sends like any other answer. Mapping changes go through the same parser
//! as files, so they are validated the same way, with the same messages.

pub mod json;
pub mod record;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::engine::{Engine, GlobalSettings, STARTED};
use crate::journal::{Journal, ServeEvent};
use crate::mapping::fields::FieldError;
use crate::mapping::{self, Mapping, load};
use crate::matching::pattern::{Actual, StringPattern};
use crate::matching::request::RequestPattern;
use crate::metrics::Metrics;
use crate::request::RequestSnapshot;
use crate::store::Store;

/// Everything the admin API acts on.
#[derive(Debug)]
pub struct Admin {
    pub store: Arc<Store>,
    pub journal: Arc<Journal>,
    pub metrics: Arc<Metrics>,
    pub shutdown: watch::Sender<bool>,
    /// When set, admin requests need `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub started: Instant,
    pub recorder: record::Recorder,
    /// The MQ side, whose file problems `/__admin/problems` lists too.
    pub mq: Option<Arc<crate::mq::MqService>>,
}

/// An admin answer.
#[derive(Debug)]
pub struct AdminReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl AdminReply {
    fn json(status: u16, v: Value) -> Self {
        AdminReply {
            status,
            content_type: "application/json",
            body: Bytes::from(serde_json::to_vec_pretty(&v).unwrap_or_default()),
        }
    }

    fn empty(status: u16) -> Self {
        AdminReply {
            status,
            content_type: "application/json",
            body: Bytes::new(),
        }
    }

    fn text(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        AdminReply {
            status,
            content_type,
            body: body.into(),
        }
    }

    /// WireMock answers `{}` where there is nothing to say.
    fn ok() -> Self {
        AdminReply::json(200, json!({}))
    }

    /// WireMock's 404s for a missing mapping, request or file have no body.
    fn not_found(what: &str) -> Self {
        tracing::debug!("admin API: {what}");
        AdminReply::empty(404)
    }

    fn bad_request(detail: &str) -> Self {
        AdminReply::json(400, json::error("Bad request", detail))
    }
}

/// An admin request, already read whole (owned, so it can move to a blocking thread:
/// some endpoints touch the disk).
#[derive(Debug)]
pub struct AdminRequest {
    pub method: String,
    /// The path after `/__admin`, such as `/mappings/123`.
    pub path: String,
    pub query: Vec<(String, String)>,
    pub authorization: Option<String>,
    pub body: Bytes,
}

impl AdminRequest {
    fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json_body(&self) -> Result<Value, AdminReply> {
        if self.body.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(json!({}));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            AdminReply::json(
                422,
                json::error(
                    "Error parsing JSON",
                    &format!("the request body is not valid JSON: {e}"),
                ),
            )
        })
    }
}

impl Admin {
    pub fn engine(&self) -> &Arc<Engine> {
        self.store.engine()
    }

    pub fn handle(&self, req: &AdminRequest) -> AdminReply {
        if let Some(token) = &self.token {
            let ok = req
                .authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .is_some_and(|t| t.trim() == token);
            if !ok {
                return AdminReply::json(
                    401,
                    json::error(
                        "Unauthorized",
                        "the admin API needs Authorization: Bearer <token>",
                    ),
                );
            }
        }
        let path = req.path.trim_end_matches('/');
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        match (req.method.as_str(), segments.as_slice()) {
            ("GET", ["mappings"]) => self.list_mappings(req),
            ("POST", ["mappings"]) => self.create_mapping(req),
            ("DELETE", ["mappings"]) => {
                self.store.remove_all();
                AdminReply::ok()
            }
            ("POST", ["mappings", "reset"]) => {
                self.store.reset();
                AdminReply::empty(200)
            }
            ("POST", ["mappings", "save"]) => match self.store.save() {
                Ok(_) => AdminReply::empty(200),
                Err(e) => AdminReply::json(500, json::error("Save failed", &e.to_string())),
            },
            ("POST", ["mappings", "import"]) => self.import(req),
            ("POST", ["mappings", "find-by-metadata"]) => self.find_by_metadata(req, false),
            ("POST", ["mappings", "remove-by-metadata"]) => self.find_by_metadata(req, true),
            ("GET", ["mappings", "unmatched"]) => {
                let unmatched = self.unmatched_mappings();
                let total = unmatched.len();
                AdminReply::json(200, json::mappings(unmatched.iter(), total))
            }
            ("DELETE", ["mappings", "unmatched"]) => {
                for m in self.unmatched_mappings() {
                    self.store.remove(&m.id);
                }
                AdminReply::ok()
            }
            ("GET", ["mappings", id]) => match self.find_mapping(id) {
                Some(m) => AdminReply::json(200, json::mapping(&m)),
                None => AdminReply::not_found(&format!("no mapping with id {id}")),
            },
            ("PUT", ["mappings", id]) => self.edit_mapping(req, id),
            ("DELETE", ["mappings", id]) => {
                if self.store.remove(id) {
                    AdminReply::ok()
                } else {
                    AdminReply::not_found(&format!("no mapping with id {id}"))
                }
            }

            ("GET", ["requests"]) => self.list_requests(req),
            ("DELETE", ["requests"]) | ("POST", ["requests", "reset"]) => {
                self.journal.clear();
                AdminReply::ok()
            }
            ("POST", ["requests", "count"]) => {
                let disabled = !self.journal.enabled();
                self.with_pattern(req, |events| json!({ "count": events.len(), "requestJournalDisabled": disabled }))
            }
            ("POST", ["requests", "find"]) => self.with_pattern(req, |events| {
                json!({ "requests": events.iter().map(|e| json::logged_request(&e.request, e.logged_at, e.protocol, e.local_port)).collect::<Vec<_>>(), "requestJournalDisabled": false })
            }),
            ("POST", ["requests", "remove"]) => match self.parse_pattern(req) {
                Ok(p) => {
                    let gone = self.journal.remove_where(|e| p.matches(&e.request));
                    AdminReply::json(200, json!({ "serveEvents": gone.iter().map(|e| json::serve_event(e)).collect::<Vec<_>>() }))
                }
                Err(r) => r,
            },
            ("GET", ["requests", "unmatched"]) => {
                let events: Vec<_> = self.journal.newest_first().into_iter().filter(|e| !e.was_matched()).collect();
                AdminReply::json(200, json!({ "requests": events.iter().map(|e| json::logged_request(&e.request, e.logged_at, e.protocol, e.local_port)).collect::<Vec<_>>(), "requestJournalDisabled": !self.journal.enabled() }))
            }
            ("GET", ["requests", "unmatched", "near-misses"]) => {
                let mut misses = Vec::new();
                for e in self.journal.newest_first().into_iter().filter(|e| !e.was_matched()) {
                    misses.extend(self.near_misses_for(&e.request, Some(&e)));
                }
                AdminReply::json(200, json!({ "nearMisses": misses }))
            }
            ("GET", ["requests", id]) => match self.journal.get(id) {
                Some(e) => AdminReply::json(200, json::serve_event(&e)),
                None => AdminReply::not_found(&format!("no request with id {id}")),
            },
            ("DELETE", ["requests", id]) => {
                self.journal.remove_by_id(id);
                AdminReply::ok()
            }
            ("POST", ["near-misses", "request"]) => match req.json_body() {
                Ok(v) => match snapshot_from_logged(&v) {
                    Some(snap) => AdminReply::json(200, json!({ "nearMisses": self.near_misses_for(&snap, None) })),
                    None => AdminReply::bad_request("expected a logged request with at least \"url\""),
                },
                Err(r) => r,
            },
            ("POST", ["near-misses", "request-pattern"]) => match self.parse_pattern(req) {
                Ok(p) => {
                    let mut scored: Vec<(f64, Value)> = self
                        .journal
                        .newest_first()
                        .iter()
                        .map(|e| {
                            let lines = p.diagnose(&e.request);
                            (score(&lines), json!({
                                "request": json::logged_request(&e.request, e.logged_at, e.protocol, e.local_port),
                                "requestPattern": req.json_body().unwrap_or_default(),
                                "matchResult": { "subEvents": [], "diffDescriptions": [], "distance": score(&lines) },
                            }))
                        })
                        .collect();
                    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
                    AdminReply::json(200, json!({ "nearMisses": scored.into_iter().take(3).map(|s| s.1).collect::<Vec<_>>() }))
                }
                Err(r) => r,
            },

            ("GET", ["scenarios"]) => AdminReply::json(200, self.scenarios()),
            ("POST", ["scenarios", "reset"]) => {
                self.engine().reset_scenarios();
                AdminReply::ok()
            }
            ("PUT", ["scenarios", name, "state"]) => self.set_scenario(req, name),
            ("POST", ["scenarios", name, "state"]) => self.set_scenario(req, name),

            ("GET", ["files"]) => self.list_files(),
            ("GET", ["files", rest @ ..]) => self.file_op(req, &rest.join("/")),
            ("PUT", ["files", rest @ ..]) => self.file_op(req, &rest.join("/")),
            ("DELETE", ["files", rest @ ..]) => self.file_op(req, &rest.join("/")),

            ("POST", ["reset"]) => {
                self.store.reset();
                self.journal.clear();
                self.engine().reset_scenarios();
                AdminReply::empty(200)
            }
            ("GET", ["settings"]) => {
                let s = self.engine().settings();
                AdminReply::json(200, json!({ "settings": s.raw.clone().unwrap_or_else(|| json!({})) }))
            }
            ("POST", ["settings"]) | ("PUT", ["settings"]) => self.post_settings(req),
            ("GET", ["health"]) => AdminReply::json(
                200,
                json!({
                    "status": "healthy",
                    "message": "decoy is ok",
                    "version": env!("CARGO_PKG_VERSION"),
                    "uptimeInSeconds": self.started.elapsed().as_secs(),
                    "timestamp": json::iso(SystemTime::now()),
                }),
            ),
            ("GET", ["version"]) => AdminReply::json(200, json!({ "version": env!("CARGO_PKG_VERSION") })),
            ("POST", ["shutdown"]) => {
                let _ = self.shutdown.send(true);
                AdminReply::empty(200)
            }
            ("GET", ["metrics"]) => self.metrics_reply(),
            ("GET", ["problems"]) => {
                let (mut problems, mut warnings) = self.store.problems();
                if let Some(mq) = &self.mq {
                    let (p, w) = mq.problems();
                    problems.extend(p);
                    warnings.extend(w);
                }
                AdminReply::json(200, json!({
                    "problems": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                    "warnings": warnings.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                }))
            }
            ("POST", ["recordings", "start"]) => match req.json_body().map(|v| record::Spec::parse(&v)) {
                Ok(Ok(spec)) => match self.recorder.start(&self.store, spec) {
                    Ok(()) => AdminReply::ok(),
                    Err((status, why)) => AdminReply::json(status, json::error("Recording not started", &why)),
                },
                Ok(Err((status, why))) => AdminReply::json(status, json::error("Error parsing JSON", &why)),
                Err(r) => r,
            },
            ("POST", ["recordings", "stop"]) => {
                match self.recorder.stop(&self.store, &self.journal.newest_first()) {
                    Ok(v) => AdminReply::json(200, v),
                    Err((status, why)) => AdminReply::json(status, json::error("Recording not stopped", &why)),
                }
            }
            ("GET", ["recordings", "status"]) => AdminReply::json(200, json!({ "status": self.recorder.status() })),
            ("POST", ["recordings", "snapshot"]) => match req.json_body().map(|v| record::Spec::parse(&v)) {
                Ok(Ok(spec)) => match record::make_stubs(&self.store, &spec, &self.journal.newest_first()) {
                    Ok(v) => AdminReply::json(200, v),
                    Err((status, why)) => AdminReply::json(status, json::error("Snapshot failed", &why)),
                },
                Ok(Err((status, why))) => AdminReply::json(status, json::error("Error parsing JSON", &why)),
                Err(r) => r,
            },
            _ => AdminReply::not_found(&format!("no admin endpoint {} /__admin{}", req.method, req.path)),
        }
    }

    pub fn metrics_reply(&self) -> AdminReply {
        let set = self.engine().mappings();
        let mut text = self.metrics.render(
            set.with_stats_iter()
                .map(|(m, s)| (&*m.id, m.name.as_deref(), s)),
        );
        let (problems, _) = self.store.problems();
        crate::metrics::render_store(&mut text, self.store.swaps(), set.len(), problems.len());
        if let Some(p) = &self.store.context().plugins {
            crate::metrics::render_plugins(&mut text, &p.loaded());
        }
        AdminReply::text(200, "text/plain; version=0.0.4", text)
    }

    fn find_mapping(&self, id: &str) -> Option<Arc<Mapping>> {
        self.engine()
            .mappings()
            .iter()
            .find(|m| &*m.id == id)
            .cloned()
    }

    fn list_mappings(&self, req: &AdminRequest) -> AdminReply {
        let set = self.engine().mappings();
        // WireMock lists the most recently added first.
        let mut all: Vec<&Arc<Mapping>> = set.in_insertion_order().collect();
        all.reverse();
        let total = all.len();
        let offset = req
            .query("offset")
            .and_then(|o| o.parse().ok())
            .unwrap_or(0);
        let limit = req
            .query("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(usize::MAX);
        AdminReply::json(
            200,
            json::mappings(all.into_iter().skip(offset).take(limit), total),
        )
    }

    /// Parses a stub posted to the API, giving it a fresh random id when it has none
    /// (as WireMock does), and validating it exactly like a file.
    fn parse_api_mapping(
        &self,
        mut v: Value,
        forced_id: Option<&str>,
    ) -> Result<Mapping, AdminReply> {
        if let Value::Object(obj) = &mut v {
            if let Some(id) = forced_id {
                obj.insert("id".into(), Value::String(id.to_owned()));
            } else if !obj.contains_key("id") {
                let id = obj
                    .get("uuid")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                obj.insert("id".into(), Value::String(id));
            }
            obj.remove("uuid");
        }
        let mut warnings = Vec::new();
        let parsed = Mapping::parse(&v, self.store.context(), None, &mut warnings);
        for w in &warnings {
            tracing::warn!("admin API mapping: {w}");
        }
        parsed.map_err(|errs| AdminReply::json(422, json::errors(&errs)))
    }

    fn create_mapping(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        match self.parse_api_mapping(v, None) {
            Ok(m) => {
                let m = self.store.upsert(m);
                AdminReply::json(201, json::mapping(&m))
            }
            Err(r) => r,
        }
    }

    fn edit_mapping(&self, req: &AdminRequest, id: &str) -> AdminReply {
        if self.find_mapping(id).is_none() {
            return AdminReply::not_found(&format!("no mapping with id {id}"));
        }
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        match self.parse_api_mapping(v, Some(id)) {
            Ok(m) => {
                let m = self.store.upsert(m);
                AdminReply::json(200, json::mapping(&m))
            }
            Err(r) => r,
        }
    }

    fn import(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let Some(list) = v.get("mappings").and_then(Value::as_array) else {
            return AdminReply::json(
                422,
                json::error("Error parsing JSON", "expected {\"mappings\": [...]}"),
            );
        };
        let options = v.get("importOptions");
        let policy = options
            .and_then(|o| o.get("duplicatePolicy"))
            .and_then(Value::as_str)
            .unwrap_or("OVERWRITE");
        if policy != "OVERWRITE" && policy != "IGNORE" {
            return AdminReply::json(
                422,
                json::error(
                    "Error parsing JSON",
                    "duplicatePolicy must be OVERWRITE or IGNORE",
                ),
            );
        }
        let delete_others = options
            .and_then(|o| o.get("deleteAllNotInImport"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Validate everything first: an import with a bad stub changes nothing.
        let mut parsed = Vec::new();
        let mut errors: Vec<FieldError> = Vec::new();
        for (i, item) in list.iter().enumerate() {
            match self.parse_api_mapping(item.clone(), None) {
                Ok(m) => parsed.push(m),
                Err(_) => {
                    let errs = Mapping::parse(item, self.store.context(), None, &mut Vec::new())
                        .err()
                        .unwrap_or_default();
                    errors.extend(
                        errs.into_iter().map(|e| {
                            FieldError::new(format!("mappings[{i}].{}", e.path), e.reason)
                        }),
                    );
                }
            }
        }
        if !errors.is_empty() {
            return AdminReply::json(422, json::errors(&errors));
        }
        let existing: std::collections::HashSet<Arc<str>> = self
            .engine()
            .mappings()
            .iter()
            .map(|m| m.id.clone())
            .collect();
        let imported: std::collections::HashSet<Arc<str>> =
            parsed.iter().map(|m| m.id.clone()).collect();
        if delete_others {
            for id in existing.difference(&imported) {
                self.store.remove(id);
            }
        }
        for m in parsed {
            if policy == "IGNORE" && existing.contains(&m.id) {
                continue;
            }
            self.store.upsert(m);
        }
        AdminReply::empty(200)
    }

    fn find_by_metadata(&self, req: &AdminRequest, remove: bool) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let pattern = match StringPattern::parse(&v, "") {
            Ok(p) => p,
            Err(e) => return AdminReply::json(422, json::errors(&[e])),
        };
        let set = self.engine().mappings();
        let found: Vec<Arc<Mapping>> = set
            .in_insertion_order()
            .filter(|m| {
                let meta = serde_json::from_str::<Value>(&m.json)
                    .ok()
                    .and_then(|v| v.get("metadata").cloned());
                meta.is_some_and(|meta| {
                    let text = meta.to_string();
                    pattern.matches(&Actual::new(&text))
                })
            })
            .cloned()
            .collect();
        if remove {
            for m in &found {
                self.store.remove(&m.id);
            }
            return AdminReply::ok();
        }
        let total = found.len();
        AdminReply::json(200, json::mappings(found.iter(), total))
    }

    fn unmatched_mappings(&self) -> Vec<Arc<Mapping>> {
        let set = self.engine().mappings();
        let hit: std::collections::HashSet<Arc<str>> = self
            .journal
            .newest_first()
            .iter()
            .filter_map(|e| e.mapping.as_ref().map(|m| m.id.clone()))
            .collect();
        set.in_insertion_order()
            .filter(|m| !hit.contains(&m.id))
            .cloned()
            .collect()
    }

    fn list_requests(&self, req: &AdminRequest) -> AdminReply {
        let mut events = self.journal.newest_first();
        if req.query("unmatched") == Some("true") {
            events.retain(|e| !e.was_matched());
        }
        if let Some(since) = req
            .query("since")
            .and_then(crate::matching::date::parse_date_time)
        {
            events.retain(|e| chrono::DateTime::<chrono::Utc>::from(e.logged_at) > since);
        }
        let total = events.len();
        if let Some(limit) = req.query("limit").and_then(|l| l.parse().ok()) {
            events.truncate(limit);
        }
        AdminReply::json(
            200,
            json!({
                "requests": events.iter().map(|e| json::serve_event(e)).collect::<Vec<_>>(),
                "meta": { "total": total },
                "requestJournalDisabled": !self.journal.enabled(),
            }),
        )
    }

    fn parse_pattern(&self, req: &AdminRequest) -> Result<RequestPattern, AdminReply> {
        let v = req.json_body()?;
        RequestPattern::parse(&v, "", &mut Vec::new())
            .map_err(|e| AdminReply::json(422, json::errors(&[e])))
    }

    fn with_pattern(
        &self,
        req: &AdminRequest,
        render: impl Fn(&[Arc<ServeEvent>]) -> Value,
    ) -> AdminReply {
        match self.parse_pattern(req) {
            Ok(p) => {
                let events: Vec<_> = self
                    .journal
                    .newest_first()
                    .into_iter()
                    .filter(|e| p.matches(&e.request))
                    .collect();
                AdminReply::json(200, render(&events))
            }
            Err(r) => r,
        }
    }

    /// The three stubs closest to `snap`, as WireMock's near-miss list.
    fn near_misses_for(&self, snap: &RequestSnapshot, event: Option<&ServeEvent>) -> Vec<Value> {
        let set = self.engine().mappings();
        let mut scored: Vec<(f64, &Arc<Mapping>)> = set
            .iter()
            .map(|m| (score(&m.request.diagnose(snap)), m))
            .collect();
        scored.sort_by(|a, b| a.0.total_cmp(&b.0));
        let logged = match event {
            Some(e) => json::logged_request(&e.request, e.logged_at, e.protocol, e.local_port),
            None => json::logged_request(snap, SystemTime::now(), "HTTP/1.1", 0),
        };
        scored
            .into_iter()
            .take(3)
            .map(|(distance, m)| {
                json!({
                    "request": logged.clone(),
                    "stubMapping": json::mapping(m),
                    "matchResult": { "subEvents": [], "diffDescriptions": [], "distance": distance },
                })
            })
            .collect()
    }

    fn scenarios(&self) -> Value {
        let set = self.engine().mappings();
        let mut by_name: std::collections::BTreeMap<&str, (Vec<&str>, Vec<Value>)> =
            Default::default();
        for m in set.in_insertion_order() {
            if let Some(s) = &m.scenario {
                let entry = by_name.entry(s.name.as_str()).or_default();
                for st in [
                    Some(STARTED),
                    s.required_state.as_deref(),
                    s.new_state.as_deref(),
                ]
                .into_iter()
                .flatten()
                {
                    if !entry.0.contains(&st) {
                        entry.0.push(st);
                    }
                }
                entry.1.push(json::mapping(m));
            }
        }
        let list: Vec<Value> = by_name
            .into_iter()
            .map(|(name, (states, mappings))| {
                json!({
                    "id": name,
                    "name": name,
                    "state": self.engine().scenario_state(name),
                    "possibleStates": states,
                    "mappings": mappings,
                })
            })
            .collect();
        json!({ "scenarios": list })
    }

    fn set_scenario(&self, req: &AdminRequest, name: &str) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let exists = self
            .engine()
            .mappings()
            .iter()
            .any(|m| m.scenario.as_ref().is_some_and(|s| s.name == name));
        if !exists {
            return AdminReply::json(
                404,
                json!({ "errors": [ { "code": 404, "title": format!("Scenario {name} does not exist") } ] }),
            );
        }
        match v.get("state").and_then(Value::as_str) {
            Some(state) => {
                self.engine().set_scenario_state(name, state);
                AdminReply::ok()
            }
            None => {
                self.engine().set_scenario_state(name, STARTED);
                AdminReply::ok()
            }
        }
    }

    fn files_dir(&self) -> std::path::PathBuf {
        load::files_dir(self.store.root())
    }

    fn list_files(&self) -> AdminReply {
        let dir = self.files_dir();
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&dir) {
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        out.sort();
        AdminReply::json(200, json!(out))
    }

    fn file_op(&self, req: &AdminRequest, name: &str) -> AdminReply {
        let dir = self.files_dir();
        let name = percent_encoding::percent_decode_str(name)
            .decode_utf8_lossy()
            .into_owned();
        // The same containment rule as bodyFileName; a new file need not exist yet.
        let inside = std::path::Path::new(&name)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if name.is_empty() || !inside {
            return AdminReply::bad_request(&format!("{name:?} is not a path inside __files"));
        }
        let path = dir.join(&name);
        match req.method.as_str() {
            "GET" => match std::fs::read(&path) {
                Ok(bytes) => AdminReply::text(200, "application/octet-stream", bytes),
                Err(_) => AdminReply::not_found(&format!("no file {name} in __files")),
            },
            "PUT" => {
                if let Some(parent) = path.parent()
                    && let Err(e) = std::fs::create_dir_all(parent)
                {
                    return AdminReply::json(500, json::error("Write failed", &e.to_string()));
                }
                match std::fs::write(&path, &req.body) {
                    // WireMock answers with the content, base64-encoded, as a JSON string.
                    Ok(()) => AdminReply::json(
                        200,
                        json!(base64::engine::general_purpose::STANDARD.encode(&req.body)),
                    ),
                    Err(e) => AdminReply::json(500, json::error("Write failed", &e.to_string())),
                }
            }
            _ => match std::fs::remove_file(&path) {
                Ok(()) => AdminReply::empty(200),
                Err(_) => AdminReply::not_found(&format!("no file {name} in __files")),
            },
        }
    }

    fn post_settings(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        // WireMock accepts the settings bare or wrapped in {"settings": ...}.
        let s = v.get("settings").cloned().unwrap_or(v);
        let mut new = GlobalSettings {
            raw: Some(s.clone()),
            ..GlobalSettings::default()
        };
        if let Some(d) = s.get("fixedDelay").filter(|d| !d.is_null()) {
            match mapping::fields::as_u64(d, "fixedDelay") {
                Ok(ms) => new.fixed_delay = std::time::Duration::from_millis(ms),
                Err(e) => return AdminReply::json(422, json::errors(&[e])),
            }
        }
        if let Some(d) = s.get("delayDistribution").filter(|d| !d.is_null()) {
            match mapping::parse_distribution(d, "delayDistribution") {
                Ok(dist) => new.delay_distribution = Some(dist),
                Err(e) => return AdminReply::json(422, json::errors(&[e])),
            }
        }
        self.engine().set_settings(new);
        AdminReply::empty(200)
    }
}

fn score(lines: &[crate::matching::request::DiffLine]) -> f64 {
    let weights: f64 = lines.iter().map(|l| l.weight).sum();
    lines.iter().map(|l| l.distance * l.weight).sum::<f64>() / weights.max(1.0)
}

/// A snapshot from a `LoggedRequest` JSON (for `near-misses/request`).
fn snapshot_from_logged(v: &Value) -> Option<RequestSnapshot> {
    let url = v.get("url").and_then(Value::as_str)?;
    let method = v.get("method").and_then(Value::as_str).unwrap_or("GET");
    let mut headers = http::HeaderMap::new();
    if let Some(h) = v.get("headers").and_then(Value::as_object) {
        for (k, val) in h {
            let values: Vec<&Value> = match val {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for one in values {
                if let (Ok(name), Some(Ok(value))) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    one.as_str().map(http::HeaderValue::from_str),
                ) {
                    headers.append(name, value);
                }
            }
        }
    }
    let body = v
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Some(
        RequestSnapshot::new(method, url)
            .with_headers(headers)
            .with_body(body),
    )
}
