//! WireMock's admin API under `/__admin`, with the JSON shapes WireMock 3 returns,
//! so existing clients (Java `WireMock`, `wiremock-rest-client`, the `wiremock` PyPI
//! package) work unchanged.
//!
//! Requests arrive already read whole; every handler is synchronous (the store and the
//! journal lock only for in-memory work) and returns an [`AdminReply`], which the HTTP
//! transport sends like any other answer. Mapping changes go through the same parser
//! as files, so they are validated the same way, with the same messages.
//!
//! Before any handler runs, [`Admin::handle`] checks the token ([`auth`]) or, without
//! one, refuses what a web page on another site could make a browser send
//! ([`cross_site`]), and percent-decodes the path's segments, so every handler sees
//! names and ids as they are.

pub mod auth;
mod channels;
mod cross_site;
pub mod dashboard;
mod files;
pub mod json;
mod mappings;
pub mod record;
mod recordings;
mod requests;
mod scenarios;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::watch;

use decoy_core::engine::{Engine, GlobalSettings};
use decoy_core::journal::Journal;
use decoy_core::metrics::Metrics;
use decoy_core::store::Store;
use decoy_spec::request::RequestSnapshot;

/// Everything the admin API acts on.
#[derive(Debug)]
pub struct Admin {
    pub store: Arc<Store>,
    pub journal: Arc<Journal>,
    pub metrics: Arc<Metrics>,
    pub shutdown: watch::Sender<bool>,
    /// When set, admin requests need `Authorization: Bearer <token>`.
    pub token: Option<auth::AdminToken>,
    pub started: Instant,
    pub recorder: record::Recorder,
    /// The MQ side, whose file problems `/__admin/problems` lists too.
    pub mq: Option<Arc<decoy_mq::MqService>>,
    /// The gRPC side: its descriptors' and stubs' problems are listed too, and
    /// `POST /__admin/ext/grpc/reset` reads its descriptors again.
    pub grpc: Option<Arc<crate::grpc::GrpcServe>>,
    /// The dashboard's per-second figures (see [`dashboard`]).
    pub live: dashboard::Live,
}

/// An admin answer.
#[derive(Debug)]
pub struct AdminReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
    /// A long answer written piece by piece after `body` (see [`Streamed`]).
    pub stream: Option<Streamed>,
}

/// The rest of an answer too large to build whole (a journal listing: 10,000 events
/// with bodies once took gigabytes as one JSON value): a function, run on a blocking
/// thread, that hands its pieces one at a time to a sink, which sends them on and
/// returns false once the client has gone. Only a few pieces are ever held at once.
pub struct Streamed(pub Box<dyn FnOnce(Sink<'_>) + Send>);

/// Where a [`Streamed`] answer's pieces go; false once the client has gone.
pub type Sink<'a> = &'a mut dyn FnMut(Bytes) -> bool;

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Streamed")
    }
}

impl AdminReply {
    fn json(status: u16, v: Value) -> Self {
        AdminReply::text(
            status,
            "application/json",
            serde_json::to_vec_pretty(&v).unwrap_or_default(),
        )
    }

    /// A JSON document `{ "<key>": [ items... ], <rest> }`, with the items rendered
    /// and sent one at a time (see [`Streamed`]).
    fn json_list<T: Send + Sync + 'static>(
        status: u16,
        key: &str,
        items: Vec<T>,
        render: fn(&T) -> Value,
        rest: Value,
    ) -> Self {
        AdminReply::json_list_of(status, key, items, move |item| vec![render(item)], rest)
    }

    /// As [`AdminReply::json_list`], where each item gives any number of entries of
    /// the list (the near misses of one unmatched request), rendered as it is sent.
    fn json_list_of<T: Send + Sync + 'static>(
        status: u16,
        key: &str,
        items: Vec<T>,
        render: impl Fn(&T) -> Vec<Value> + Send + 'static,
        rest: Value,
    ) -> Self {
        let mut tail = String::from("\n  ]");
        if let Value::Object(obj) = rest {
            for (k, v) in obj {
                tail.push_str(&format!(
                    ",\n  {}: {}",
                    Value::String(k),
                    serde_json::to_string(&v).unwrap_or_default()
                ));
            }
        }
        tail.push_str("\n}");
        let head = format!("{{\n  {}: [", Value::String(key.to_owned()));
        let produce = move |sink: Sink<'_>| {
            let mut first = true;
            for item in &items {
                for entry in render(item) {
                    let mut piece = Vec::from(if first { "\n" } else { ",\n" });
                    first = false;
                    if serde_json::to_writer_pretty(&mut piece, &entry).is_err()
                        || !sink(Bytes::from(piece))
                    {
                        return;
                    }
                }
            }
            sink(Bytes::from(tail));
        };
        AdminReply {
            stream: Some(Streamed(Box::new(produce))),
            ..AdminReply::text(status, "application/json", head)
        }
    }

    fn empty(status: u16) -> Self {
        AdminReply::text(status, "application/json", Bytes::new())
    }

    fn text(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        AdminReply {
            status,
            content_type,
            body: body.into(),
            stream: None,
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
    /// The listener's scheme (`http` or `https`) and the authority the client
    /// addressed (HTTP/2's `:authority` or an absolute URI; `None` for `Host`): where
    /// the request was sent, which a browser's `Origin` is compared with.
    pub scheme: &'static str,
    pub authority: Option<String>,
    /// The request's headers (`Origin`, `Sec-Fetch-Site` and `Content-Type` are read
    /// by the cross-site checks, see [`cross_site`]).
    pub headers: http::HeaderMap,
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
        // The dashboard's page holds no data: it is served without the token, and
        // asks for it when its API calls are refused.
        if let Some(page) = dashboard::asset(&req.method, &req.path) {
            return page;
        }
        if let Some(token) = &self.token
            && !token.accepts(req.authorization.as_deref())
        {
            return AdminReply::json(
                401,
                json::error(
                    "Unauthorized",
                    "the admin API needs Authorization: Bearer <token>",
                ),
            );
        }
        // Without the token, a browser could be made to call from another site.
        if self.token.is_none()
            && let Some(refused) =
                cross_site::cross_site(req).or_else(|| cross_site::form_body(req))
        {
            return refused;
        }
        // Each segment is percent-decoded once, after splitting on the `/` as sent:
        // clients send names and ids encoded (the dashboard, most HTTP libraries),
        // and an encoded `/` stays inside its segment (a scenario named `a/b`).
        let decoded: Vec<String> = req
            .path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
        let reply = match segments.split_first() {
            Some((&"mappings", rest)) => self.mappings_route(req, rest),
            Some((&"requests", rest)) => self.requests_route(req, rest),
            Some((&"near-misses", rest)) => self.near_misses_route(req, rest),
            Some((&"scenarios", rest)) => self.scenarios_route(req, rest),
            Some((&"files", rest)) => self.files_route(req, rest),
            Some((&"recordings", rest)) => self.recordings_route(req, rest),
            Some((&"dashboard", rest)) => self.dashboard_route(req, rest),
            Some((&"channels", rest)) => self.channels_route(req, rest),
            _ => self.system_route(req, &segments),
        };
        reply.unwrap_or_else(|| {
            AdminReply::not_found(&format!(
                "no admin endpoint {} /__admin{}",
                req.method, req.path
            ))
        })
    }

    /// Everything else: reset, settings, health, version, shutdown, metrics, problems.
    fn system_route(&self, req: &AdminRequest, segments: &[&str]) -> Option<AdminReply> {
        Some(match (req.method.as_str(), segments) {
            ("POST", ["reset"]) => {
                let reset = self.store.reset().map(drop);
                match reset
                    .and_then(|()| self.journal.clear())
                    .and_then(|()| self.engine().reset_scenarios())
                {
                    Ok(()) => AdminReply::empty(200),
                    Err(e) => unavailable(&e),
                }
            }
            ("GET", ["settings"]) => {
                let s = self.engine().settings();
                // WireMock's defaults until settings are posted: only proxyPassThrough.
                AdminReply::json(
                    200,
                    json!({ "settings": s.raw.clone().unwrap_or_else(|| json!({ "proxyPassThrough": true })) }),
                )
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
            ("GET", ["version"]) => {
                AdminReply::json(200, json!({ "version": env!("CARGO_PKG_VERSION") }))
            }
            ("POST", ["shutdown"]) => {
                let _ = self.shutdown.send(true);
                AdminReply::empty(200)
            }
            ("GET", ["metrics"]) => self.metrics_reply(),
            // The WireMock gRPC extension's endpoint: read the descriptors again.
            ("POST", ["ext", "grpc", "reset"]) => match &self.grpc {
                Some(grpc) => {
                    grpc.reload();
                    AdminReply::empty(200)
                }
                None => return None,
            },
            ("GET", ["problems"]) => {
                let (problems, warnings) = self.problems();
                // The shared state out of step (--state) heads the list.
                let shared = self.store.replica_problem();
                AdminReply::json(
                    200,
                    json!({
                        "problems": shared.into_iter().chain(problems.iter().map(|p| p.to_string())).collect::<Vec<_>>(),
                        "warnings": warnings.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                    }),
                )
            }
            _ => return None,
        })
    }

    pub fn metrics_reply(&self) -> AdminReply {
        let set = self.engine().mappings();
        let mut text = self.metrics.render(
            set.with_stats_iter()
                .map(|(m, s)| (&*m.id, m.name.as_deref(), s)),
        );
        let (problems, warnings) = self.store.problems();
        decoy_core::metrics::render_store(
            &mut text,
            self.store.swaps(),
            set.len(),
            problems.len(),
            warnings.len(),
        );
        if let Some(p) = &self.store.context().plugins {
            decoy_core::metrics::render_plugins(&mut text, &p.loaded());
        }
        AdminReply::text(200, "text/plain; version=0.0.4", text)
    }

    fn post_settings(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        // WireMock accepts the settings bare or wrapped in {"settings": ...}.
        let s = v.get("settings").cloned().unwrap_or(v);
        // Kept as WireMock reads and writes them back: its four fields, nulls left out,
        // and proxyPassThrough false unless posted (a missing Java boolean).
        let mut raw = serde_json::Map::new();
        for key in ["fixedDelay", "delayDistribution", "extended"] {
            if let Some(v) = s.get(key).filter(|v| !v.is_null()) {
                raw.insert(key.into(), v.clone());
            }
        }
        let pass_through = s.get("proxyPassThrough").and_then(Value::as_bool);
        raw.insert(
            "proxyPassThrough".into(),
            Value::Bool(pass_through.unwrap_or(false)),
        );
        let mut new = GlobalSettings {
            raw: Some(Value::Object(raw)),
            ..GlobalSettings::default()
        };
        if let Some(d) = s.get("fixedDelay").filter(|d| !d.is_null()) {
            match decoy_spec::fields::as_u64(d, "fixedDelay") {
                Ok(ms) => new.fixed_delay = std::time::Duration::from_millis(ms),
                Err(e) => return AdminReply::json(422, json::errors(&[e])),
            }
        }
        if let Some(d) = s.get("delayDistribution").filter(|d| !d.is_null()) {
            match decoy_spec::plan::parse_distribution(d, "delayDistribution") {
                Ok(dist) => new.delay_distribution = Some(dist),
                Err(e) => return AdminReply::json(422, json::errors(&[e])),
            }
        }
        self.engine().set_settings(new);
        AdminReply::empty(200)
    }
}

/// A snapshot from a `LoggedRequest` JSON (for `near-misses/request`).
/// With state shared between instances (`--state`), a change or query the shared
/// store could not take: nothing changed, and the caller is told so with a 503.
fn unavailable(e: &decoy_core::shared::Unavailable) -> AdminReply {
    tracing::warn!("admin API: {e}; nothing changed");
    AdminReply::json(503, json::error("Shared state unavailable", &e.to_string()))
}

fn snapshot_from_logged(v: &Value) -> Option<RequestSnapshot> {
    let url = v.get("url").and_then(Value::as_str)?;
    let method = v.get("method").and_then(Value::as_str).unwrap_or("GET");
    let mut headers = http::HeaderMap::new();
    // WireMock shows the names as posted.
    let mut header_case = decoy_spec::header_case::HeaderCase::as_sent();
    if let Some(h) = v.get("headers").and_then(Value::as_object) {
        for (k, val) in h {
            if k.bytes().any(|b| b.is_ascii_uppercase()) {
                header_case.note(k);
            }
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
    let mut snap = RequestSnapshot::new(method, url)
        .with_headers(headers)
        .with_body(body);
    snap.header_case = header_case;
    Some(snap)
}
