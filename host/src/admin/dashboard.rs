//! The live dashboard at `/__admin/dashboard`: a page for a person watching a load
//! test, and the small JSON API and event stream behind it.
//!
//! - **Assets.** The page is plain HTML, CSS and JavaScript in `dashboard/`, compiled
//!   into the binary with `include_str!` (no build step, no CDN: it works offline).
//!   They hold no data, so they are served without the admin token; everything the
//!   page shows comes from the API below, which is behind the token like the rest
//!   of the admin API (the page asks for the token when the API answers 401).
//! - **Live figures.** [`sample`] runs once a second whatever is watching: it reads
//!   the cumulative counters the request path keeps anyway ([`Metrics`]: matched,
//!   unmatched, the fine latency histogram; the plugins' counters), and keeps the
//!   difference with the previous second in a ring of the last [`HISTORY`] seconds
//!   (rates, p50/p95/p99). So a request costs nothing more for being watched, and
//!   each connected page costs one shared, already-rendered event per second. The
//!   tick's totals (mapping counts, problems) are rendered only while a page is
//!   connected: with 10,000 stub files they walk every file.
//! - **Event stream.** `GET /__admin/dashboard/events` is Server-Sent Events: the
//!   history first, then one `tick` a second. The admin handler only authorizes it
//!   (it answers an empty 200 of type [`EVENT_STREAM`]); the HTTP transport then
//!   streams [`event_stream`], fed by a task that ends with the connection or the
//!   server.
//! - **Paged lists.** Mappings and journal entries are listed a page at a time
//!   (`offset`, `limit`), filtered on the server, so the page stays usable with
//!   10,000 of each: it asks only for the rows it shows.
//!
//! [`Metrics`]: decoy_core::metrics::Metrics

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::{Admin, AdminReply, AdminRequest, json};
use decoy_core::journal::{Journal, ServeEvent};
use decoy_core::latency;
use decoy_core::mapping::Mapping;
use decoy_core::mapping::load::Problem;
use decoy_core::metrics::{MappingStats, TransportMetrics};
use decoy_matching::request::UrlMatcher;

/// The content type of the event stream, and the admin handler's "go ahead" for it.
pub const EVENT_STREAM: &str = "text/event-stream";

/// Seconds of history kept for the charts (five minutes).
pub const HISTORY: usize = 300;

/// Rows a page may ask for at once.
const MAX_PAGE: usize = 500;

const INDEX_HTML: &str = include_str!("dashboard/index.html");
const APP_JS: &str = include_str!("dashboard/app.js");
const STYLE_CSS: &str = include_str!("dashboard/style.css");

/// The page's files, served without the token (they hold no data). `path` is the
/// admin path, such as `/dashboard/app.js`.
pub fn asset(method: &str, path: &str) -> Option<AdminReply> {
    if method != "GET" {
        return None;
    }
    let (content_type, body) = match path.trim_end_matches('/') {
        "/dashboard" | "/dashboard/index.html" => ("text/html; charset=utf-8", INDEX_HTML),
        "/dashboard/app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "/dashboard/style.css" => ("text/css; charset=utf-8", STYLE_CSS),
        _ => return None,
    };
    Some(AdminReply::text(
        200,
        content_type,
        Bytes::from_static(body.as_bytes()),
    ))
}

/// The live figures: the last [`HISTORY`] seconds, and the newest tick as an event.
#[derive(Debug)]
pub struct Live {
    seconds: Mutex<VecDeque<Value>>,
    /// The newest `tick` event, rendered once for every page connected.
    tick: watch::Sender<Bytes>,
    previous: Mutex<Option<Counters>>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            seconds: Mutex::new(VecDeque::with_capacity(HISTORY)),
            tick: watch::channel(Bytes::new()).0,
            previous: Mutex::new(None),
        }
    }
}

/// Cumulative counters of one side (HTTP, or the MQ transports together).
#[derive(Debug, Clone, Default)]
struct Side {
    matched: u64,
    unmatched: u64,
    latency: Vec<u64>,
}

impl Side {
    fn of<'a>(transports: impl Iterator<Item = &'a TransportMetrics>) -> Side {
        let mut side = Side {
            latency: vec![0; latency::BUCKETS],
            ..Side::default()
        };
        for t in transports {
            side.matched += t.matched_total();
            side.unmatched += t.unmatched_total();
            for (sum, c) in side.latency.iter_mut().zip(t.latency_counts()) {
                *sum += c;
            }
        }
        side
    }

    /// This second's figures: what changed since `before`.
    fn since(&self, before: &Side) -> Value {
        let delta: Vec<u64> = self
            .latency
            .iter()
            .zip(before.latency.iter().chain(std::iter::repeat(&0)))
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        let micros = |q| latency::quantile(&delta, q).map(|n| (n as f64 / 100.0).round() / 10.0);
        json!({
            "matched": self.matched.saturating_sub(before.matched),
            "unmatched": self.unmatched.saturating_sub(before.unmatched),
            "p50": micros(0.50),
            "p95": micros(0.95),
            "p99": micros(0.99),
        })
    }
}

/// Everything [`sample`] reads each second.
#[derive(Debug, Clone, Default)]
struct Counters {
    http: Side,
    mq: Side,
    plugin_calls: u64,
    plugin_failures: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Live {
    /// The history event a page gets first: every second kept, oldest first.
    fn history_event(&self) -> Bytes {
        let seconds: Vec<Value> = lock(&self.seconds).iter().cloned().collect();
        event("history", &json!({ "seconds": seconds }))
    }

    /// The history and the newest tick, as JSON (`GET dashboard/api/live`).
    fn snapshot(&self) -> Value {
        let seconds: Vec<Value> = lock(&self.seconds).iter().cloned().collect();
        json!({ "seconds": seconds })
    }
}

fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// Samples the counters once a second until the server stops (see the module doc).
pub async fn sample(admin: Arc<Admin>) {
    let mut stop = admin.shutdown.subscribe();
    // A shutdown sent before this task first ran is already the current value,
    // which `changed` would never report.
    if *stop.borrow() {
        return;
    }
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = every.tick() => admin.sample_once(),
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
        }
    }
}

impl Admin {
    /// Every problem and warning of what is served: the stub files (HTTP), the MQ
    /// files and the listeners of stubs that publish, the gRPC descriptors and the
    /// stubs checked against them. The one list
    /// `/__admin/problems`, the dashboard's count and its problem list show.
    pub fn problems(&self) -> (Vec<Problem>, Vec<Problem>) {
        let (mut problems, mut warnings) = self.store.problems();
        if let Some(mq) = &self.mq {
            let (p, w) = mq.problems();
            problems.extend(p);
            warnings.extend(w);
            // HTTP stubs' `message` listeners naming no connection.
            let set = self.engine().mappings();
            problems.extend(decoy_mq::check_listeners(
                &mq.publisher().connections(),
                set.iter().filter_map(crate::server::listeners_of),
            ));
        }
        if let Some(grpc) = &self.grpc {
            let (p, w) = crate::grpc::problems(grpc, self.store.context().global_templating);
            problems.extend(p);
            warnings.extend(w);
        }
        (problems, warnings)
    }

    fn counters(&self) -> Counters {
        let m = &self.metrics;
        let (mut plugin_calls, mut plugin_failures) = (0, 0);
        if let Some(p) = &self.store.context().plugins {
            for p in p.loaded() {
                plugin_calls += p.stats.calls.load(Relaxed);
                plugin_failures += p.stats.failures.load(Relaxed);
            }
        }
        // HTTP (and gRPC, which is served on it) in one column, the brokers' transports
        // in the other.
        let transports = m.transports();
        let http = |name: &str| !decoy_mq::TRANSPORTS.contains(&name);
        Counters {
            http: Side::of(
                transports
                    .iter()
                    .filter(|(n, _)| http(n))
                    .map(|(_, t)| &**t),
            ),
            mq: Side::of(
                transports
                    .iter()
                    .filter(|(n, _)| !http(n))
                    .map(|(_, t)| &**t),
            ),
            plugin_calls,
            plugin_failures,
        }
    }

    /// One second: the figures since the previous call, kept and published.
    pub fn sample_once(&self) {
        // Read and replace under one lock, so two samples at once (the sampler's
        // tick and an explicit one) never both count the same requests; the first
        // sample counts everything since the start.
        let (now, before) = {
            let mut previous = lock(&self.live.previous);
            let now = self.counters();
            let before = previous.replace(now.clone()).unwrap_or_default();
            (now, before)
        };
        let second = json!({
            "t": unix_millis(SystemTime::now()) / 1000,
            "http": now.http.since(&before.http),
            "mq": now.mq.since(&before.mq),
            "plugins": {
                "calls": now.plugin_calls.saturating_sub(before.plugin_calls),
                "failures": now.plugin_failures.saturating_sub(before.plugin_failures),
            },
        });
        {
            let mut seconds = lock(&self.live.seconds);
            if seconds.len() == HISTORY {
                seconds.pop_front();
            }
            seconds.push_back(second.clone());
        }
        // The totals list every file's problems: with 10,000 stub files, a walk over
        // all of them once a second, evicting the stubs a load test is hitting from
        // the caches, for nobody. So the tick is rendered only while a page is
        // connected; a page that connects is sent one of its own ([`event_stream`]).
        if self.live.tick.receiver_count() > 0 {
            self.live.tick.send_replace(self.tick(second, &now));
        }
    }

    /// The `tick` event: one second's figures and the running totals.
    fn tick(&self, second: Value, now: &Counters) -> Bytes {
        event(
            "tick",
            &json!({ "second": second, "totals": self.totals(now) }),
        )
    }

    /// A tick for a page that has just connected: the newest second kept and the
    /// totals as they are now (`None` before the first second).
    fn fresh_tick(&self) -> Option<Bytes> {
        let second = lock(&self.live.seconds).back().cloned()?;
        Some(self.tick(second, &self.counters()))
    }

    /// Whether the sampler rendered a tick for pages (none while no page is connected).
    pub fn tick_rendered(&self) -> bool {
        !self.live.tick.borrow().is_empty()
    }

    /// Running totals and the state of the server, sent with every tick.
    fn totals(&self, c: &Counters) -> Value {
        let (problems, warnings) = self.problems();
        let mq_mappings = self.mq.as_ref().map_or(0, |mq| mq.mappings().len());
        let plugins = self
            .store
            .context()
            .plugins
            .as_ref()
            .map_or(0, |p| p.loaded().len());
        json!({
            "http": { "matched": c.http.matched, "unmatched": c.http.unmatched },
            "mq": { "matched": c.mq.matched, "unmatched": c.mq.unmatched },
            "plugins": { "loaded": plugins, "calls": c.plugin_calls, "failures": c.plugin_failures },
            "journal": { "enabled": self.journal.enabled(), "recorded": self.journal.recorded() },
            "mappings": {
                "http": self.engine().mappings().len(),
                "mq": mq_mappings,
                "version": self.store.swaps(),
                "problems": problems.len(),
                "warnings": warnings.len(),
            },
            "uptimeSeconds": self.started.elapsed().as_secs(),
        })
    }

    /// `/__admin/dashboard/...` behind the token: the event stream and the JSON API.
    pub(super) fn dashboard_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        if req.method != "GET" {
            return None;
        }
        Some(match rest {
            ["events"] => AdminReply::text(200, EVENT_STREAM, Bytes::new()),
            ["api", "live"] => AdminReply::json(200, self.live.snapshot()),
            ["api", "mappings"] => self.mapping_page(req),
            ["api", "mappings", id] => match self.mapping_detail(id) {
                Some(v) => AdminReply::json(200, v),
                None => AdminReply::not_found(&format!("no mapping with id {id}")),
            },
            ["api", "problems"] => self.problem_list(),
            ["api", "journal"] => self.journal_page(req),
            ["api", "journal", id, "near-miss"] => match self.journal.get(id) {
                Ok(Some(e)) => AdminReply::json(200, self.near_miss_report(&e)),
                Ok(None) => AdminReply::not_found(&format!("no request with id {id}")),
                Err(e) => super::unavailable(&e),
            },
            ["api", "plugins"] => AdminReply::json(200, self.plugin_list()),
            _ => return None,
        })
    }

    /// Every mapping (HTTP, then MQ) whose text contains `q`, a page at a time.
    fn mapping_page(&self, req: &AdminRequest) -> AdminReply {
        let (offset, limit) = page(req);
        let q = req.query("q").unwrap_or("").trim().to_lowercase();
        let set = self.engine().mappings();
        let stats: std::collections::HashMap<&str, &MappingStats> =
            set.with_stats_iter().map(|(m, s)| (&*m.id, s)).collect();
        let mut rows: Vec<Value> = Vec::new();
        let mut total = 0;
        let mut all = 0;
        let mut take = |row: &dyn Fn() -> Value, text: &dyn Fn() -> bool| {
            all += 1;
            if q.is_empty() || text() {
                if total >= offset && rows.len() < limit {
                    rows.push(row());
                }
                total += 1;
            }
        };
        for m in set.in_insertion_order() {
            let s = stats.get(&*m.id).copied();
            take(&|| http_row(m, s), &|| http_text(m).contains(&q));
        }
        let mq = self.mq.as_ref().map(|mq| mq.mappings()).unwrap_or_default();
        for (m, s) in &mq {
            let text = || {
                format!(
                    "{} {} {} {} {}",
                    m.id,
                    m.name.as_deref().unwrap_or(""),
                    m.queue,
                    m.file.display(),
                    m.connection_id
                )
                .to_lowercase()
                .contains(&q)
            };
            take(&|| mq_row(m, s), &text);
        }
        AdminReply::json(
            200,
            json!({ "total": total, "all": all, "offset": offset, "items": rows }),
        )
    }

    /// One mapping: its row and its JSON (for MQ, read back from its file).
    fn mapping_detail(&self, id: &str) -> Option<Value> {
        let set = self.engine().mappings();
        if let Some((m, s)) = set.with_stats_iter().find(|(m, _)| &*m.id == id) {
            return Some(json!({ "row": http_row(m, Some(s)), "json": json::mapping(m) }));
        }
        let service = self.mq.as_ref()?;
        let mq = service.mappings();
        let (m, s) = mq.iter().find(|(m, _)| &*m.id == id)?;
        let path = service.root().join(&m.file);
        let written = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| {
                let list = v.get("mappings").cloned().unwrap_or(v);
                match list {
                    Value::Array(a) => a.get(m.index).cloned(),
                    one => Some(one),
                }
            })
            .unwrap_or(Value::Null);
        Some(json!({ "row": mq_row(m, s), "json": written }))
    }

    /// Problems and warnings of the mapping files (HTTP, MQ and gRPC: descriptors and
    /// stubs against them), field by field.
    fn problem_list(&self) -> AdminReply {
        let (problems, warnings) = self.problems();
        AdminReply::json(
            200,
            json!({
                "problems": problems.iter().map(problem_json).collect::<Vec<_>>(),
                "warnings": warnings.iter().map(problem_json).collect::<Vec<_>>(),
            }),
        )
    }

    /// Journal entries, newest first, optionally only matched or unmatched ones.
    fn journal_page(&self, req: &AdminRequest) -> AdminReply {
        let (offset, limit) = page(req);
        let mut events = match self.journal.newest_first() {
            Ok(events) => events,
            Err(e) => return super::unavailable(&e),
        };
        match req.query("filter") {
            Some("matched") => events.retain(|e| e.was_matched()),
            Some("unmatched") => events.retain(|e| !e.was_matched()),
            _ => {}
        }
        let rows: Vec<Value> = events
            .iter()
            .skip(offset)
            .take(limit)
            .map(|e| journal_row(e))
            .collect();
        AdminReply::json(
            200,
            json!({
                "total": events.len(),
                "offset": offset,
                "recorded": self.journal.recorded(),
                "enabled": self.journal.enabled(),
                "items": rows,
            }),
        )
    }

    /// WireMock's "Request was not matched" report for a journaled request, against
    /// the mappings as they are now (so it changes once a stub for it is added).
    fn near_miss_report(&self, e: &ServeEvent) -> Value {
        let set = self.engine().mappings();
        let engine = self.engine();
        // A scenario whose state cannot be read now counts as just started.
        let plan = decoy_core::engine::report::not_matched_plan(&set, &e.request, |name| {
            engine
                .scenario_state(name)
                .unwrap_or_else(|_| decoy_core::engine::STARTED.to_owned())
        });
        let matches_now = engine
            .mappings()
            .iter()
            .any(|m| m.request.matches(&e.request));
        json!({
            "report": String::from_utf8_lossy(&plan.body),
            "matchesNow": matches_now,
        })
    }

    /// The plugins loaded, with their counters and last failure.
    fn plugin_list(&self) -> Value {
        let Some(plugins) = &self.store.context().plugins else {
            return json!({ "plugins": [], "enabled": false });
        };
        let list: Vec<Value> = plugins
            .loaded()
            .iter()
            .map(|p| {
                let s = &p.stats;
                let last = lock(&s.last_error).clone();
                json!({
                    "name": p.name,
                    "origin": p.origin(),
                    "sha256": p.sha256(),
                    "loading": p.is_loading(),
                    "loadError": p.load_failure(),
                    "matcher": p.has_matcher(),
                    "transformer": p.has_transformer(),
                    "warmInstances": p.warm_instances(),
                    "calls": s.calls.load(Relaxed),
                    "failures": s.failures.load(Relaxed),
                    "timeouts": s.timeouts.load(Relaxed),
                    "instancesCreated": s.instances_created.load(Relaxed),
                    "instancesRetired": s.instances_retired.load(Relaxed),
                    "retries": s.retries.load(Relaxed),
                    "compilations": s.compilations.load(Relaxed),
                    "lastError": last.map(|(t, reason)| json!({ "at": json::iso(t), "reason": reason })),
                })
            })
            .collect();
        json!({ "plugins": list, "enabled": true })
    }
}

/// The event stream of one page: the history, then each tick until the page goes
/// away or the server stops. A page that falls behind skips ticks (at most a few
/// are queued for it), so a stalled browser never makes decoy hold memory.
pub fn event_stream(admin: &Arc<Admin>) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(4);
    let admin = Arc::clone(admin);
    let mut ticks = admin.live.tick.subscribe();
    let mut stop = admin.shutdown.subscribe();
    let history = admin.live.history_event();
    tokio::spawn(async move {
        if tx.send(history).await.is_err() {
            return;
        }
        // A stream opened after the shutdown was sent ends at once (`changed`
        // reports only later changes).
        if *stop.borrow() {
            return;
        }
        // The sampler renders ticks only while a page is connected, so the last one
        // may be old (or missing): this page starts with a fresh one.
        ticks.borrow_and_update();
        let mut latest = admin.fresh_tick().unwrap_or_default();
        loop {
            if !latest.is_empty()
                && let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(latest)
            {
                return;
            }
            tokio::select! {
                changed = ticks.changed() => if changed.is_err() { return },
                changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
                _ = tx.closed() => return,
            }
            latest = ticks.borrow_and_update().clone();
        }
    });
    rx
}

/// `offset` and `limit` from the query (a page of 100 by default).
fn page(req: &AdminRequest) -> (usize, usize) {
    let num = |name, default| {
        req.query(name)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    (num("offset", 0), num("limit", 100).min(MAX_PAGE))
}

/// What a pattern's URL matcher says, for the list.
fn url_label(u: &UrlMatcher) -> (String, &'static str) {
    match u {
        UrlMatcher::Any => ("(any URL)".into(), "any"),
        UrlMatcher::Url(s) => (s.clone(), "url"),
        UrlMatcher::Path(s) => (s.clone(), "urlPath"),
        UrlMatcher::UrlPattern(r) => (r.as_str().to_owned(), "urlPattern"),
        UrlMatcher::PathPattern(r) => (r.as_str().to_owned(), "urlPathPattern"),
        UrlMatcher::PathTemplate(t) => (t.text.clone(), "urlPathTemplate"),
    }
}

fn stats_json(s: Option<&MappingStats>) -> (u64, Option<f64>, Option<String>) {
    let Some(s) = s else {
        return (0, None, None);
    };
    let hits = s.served.load(Relaxed);
    let mean = (hits > 0).then(|| {
        let micros = s.latency_nanos.load(Relaxed) as f64 / hits as f64 / 1000.0;
        (micros * 10.0).round() / 10.0
    });
    let last = match s.last_hit_millis.load(Relaxed) {
        0 => None,
        ms => Some(json::iso(UNIX_EPOCH + Duration::from_millis(ms))),
    };
    (hits, mean, last)
}

fn http_row(m: &Mapping, s: Option<&MappingStats>) -> Value {
    let (url, url_kind) = url_label(&m.request.url);
    let (hits, mean, last) = stats_json(s);
    json!({
        "id": m.id.as_ref(),
        "kind": "http",
        "name": m.name.as_deref(),
        "method": m.request.method.name().unwrap_or("ANY"),
        "url": url,
        "urlKind": url_kind,
        "status": m.response.status,
        "priority": m.priority,
        "file": m.source.as_ref().map(|s| s.file.display().to_string()),
        "index": m.source.as_ref().map(|s| s.index),
        "hits": hits,
        "meanLatencyMicros": mean,
        "lastHit": last,
    })
}

/// The text a search looks in: id, name, method, URL, file, and the JSON as written
/// (which holds the metadata).
fn http_text(m: &Mapping) -> String {
    let (url, _) = url_label(&m.request.url);
    let file = m
        .source
        .as_ref()
        .map(|s| s.file.display().to_string())
        .unwrap_or_default();
    format!(
        "{} {} {} {} {} {}",
        m.id,
        m.name.as_deref().unwrap_or(""),
        m.request.method.name().unwrap_or("ANY"),
        url,
        file,
        m.json
    )
    .to_lowercase()
}

fn mq_row(m: &decoy_mq::config::MqMapping, s: &MappingStats) -> Value {
    let (hits, mean, last) = stats_json(Some(s));
    json!({
        "id": m.id.as_ref(),
        "kind": "mq",
        "name": m.name.as_deref(),
        "method": "MQ",
        "url": m.queue.to_string(),
        "urlKind": "queue",
        "connection": m.connection_id,
        "priority": m.priority,
        "file": m.file.display().to_string(),
        "index": m.index,
        "hits": hits,
        "meanLatencyMicros": mean,
        "lastHit": last,
    })
}

fn problem_json(p: &Problem) -> Value {
    json!({
        "file": p.file.display().to_string(),
        "mapping": p.stub.as_ref().map(|s| json!({ "kind": s.kind.as_str(), "index": s.index, "id": s.id, "name": s.name })),
        "field": p.error.path,
        "reason": p.error.reason,
        "text": p.to_string(),
    })
}

fn journal_row(e: &ServeEvent) -> Value {
    json!({
        "id": e.id.to_string(),
        "seq": Journal::sequence(e),
        "loggedDate": json::iso(e.logged_at),
        "method": e.request.method,
        "url": e.request.url,
        "status": e.status,
        "matched": e.was_matched(),
        "proxied": e.proxied,
        "mapping": e.mapping.as_ref().map(|m| json!({ "id": m.id.as_ref(), "name": m.name.as_deref() })),
        "processMicros": e.process_time.as_micros() as u64,
        "delayMillis": e.added_delay.as_millis() as u64,
    })
}
