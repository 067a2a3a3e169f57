//! `/__admin/requests` and `/__admin/near-misses`: the request journal, queried,
//! counted and cleared, and the closest stubs for a request.

use super::{Admin, AdminReply, AdminRequest, json};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use super::snapshot_from_logged;
use decoy_core::engine::Engine;
use decoy_core::engine::report::near_misses;
use decoy_core::journal::ServeEvent;
use decoy_core::mapping::Mapping;
use decoy_core::shared::Unavailable;
use decoy_matching::limits::with_deadline;
use decoy_matching::near_miss::{NEAR_MISS_COUNT, nearest};
use decoy_matching::request::RequestPattern;
use decoy_spec::request::RequestSnapshot;

/// How long scoring every stub against one request may take for the admin API's
/// near-miss lists (a thread of the blocking pool, not a request worker, so more
/// generous than the not-matched report's 20 ms).
const NEAR_MISS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

impl Admin {
    /// `/__admin/requests/...`; `rest` is the path after `requests`.
    pub(super) fn requests_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        let reply = match (req.method.as_str(), rest) {
            ("GET", []) => self.list_requests(req),
            ("DELETE", []) | ("POST", ["reset"]) => self.journal.clear().map(|()| AdminReply::ok()),
            ("POST", ["count"]) => {
                let disabled = !self.journal.enabled();
                self.with_pattern(
                    req,
                    |events| json!({ "count": events.len(), "requestJournalDisabled": disabled }),
                )
            }
            ("POST", ["find"]) => self.find_requests(req),
            ("POST", ["remove"]) => self.remove_requests(req),
            ("POST", ["remove-by-metadata"]) => self.remove_by_stub_metadata(req),
            ("GET", ["unmatched"]) => self.unmatched().map(|events| {
                AdminReply::json_list(
                    200,
                    "requests",
                    events,
                    |e| json::event_request(e),
                    json!({ "requestJournalDisabled": !self.journal.enabled() }),
                )
            }),
            ("GET", ["unmatched", "near-misses"]) => self.unmatched().map(|events| {
                // Streamed, an unmatched request at a time: each near miss carries the
                // request, so with large bodies the whole list once took gigabytes.
                let engine = Arc::clone(self.engine());
                AdminReply::json_list_of(
                    200,
                    "nearMisses",
                    events,
                    move |e| near_misses_for(&engine, &e.request, Some(e)),
                    json!({}),
                )
            }),
            ("GET", [id]) => self.journal.get(id).map(|found| match found {
                Some(e) => AdminReply::json(200, serve_event(self.engine(), &e)),
                None => AdminReply::not_found(&format!("no request with id {id}")),
            }),
            ("DELETE", [id]) => self.journal.remove_by_id(id).map(|_| AdminReply::ok()),
            _ => return None,
        };
        Some(reply.unwrap_or_else(|e| super::unavailable(&e)))
    }

    /// The unmatched requests, newest first.
    fn unmatched(&self) -> Result<Vec<Arc<ServeEvent>>, Unavailable> {
        let mut events = self.journal.newest_first()?;
        events.retain(|e| !e.was_matched());
        Ok(events)
    }

    /// `POST /requests/find`: oldest first, as WireMock finds them (its journal lists
    /// newest first).
    fn find_requests(&self, req: &AdminRequest) -> Result<AdminReply, Unavailable> {
        let p = match self.parse_pattern(req) {
            Ok(p) => p,
            Err(r) => return Ok(r),
        };
        let mut events = self.journal.newest_first()?;
        events.retain(|e| p.matches(&e.request));
        events.reverse();
        Ok(AdminReply::json_list(
            200,
            "requests",
            events,
            |e| json::event_request(e),
            json!({ "requestJournalDisabled": false }),
        ))
    }

    /// `POST /requests/remove`: the events the posted pattern matches, newest first.
    fn remove_requests(&self, req: &AdminRequest) -> Result<AdminReply, Unavailable> {
        let p = match self.parse_pattern(req) {
            Ok(p) => p,
            Err(r) => return Ok(r),
        };
        let gone = self.journal.remove_where(|e| p.matches(&e.request))?;
        Ok(AdminReply::json(
            200,
            json!({ "serveEvents": gone.iter().map(|e| json::serve_event(e)).collect::<Vec<_>>() }),
        ))
    }

    /// `/__admin/near-misses/...`.
    pub(super) fn near_misses_route(
        &self,
        req: &AdminRequest,
        rest: &[&str],
    ) -> Option<AdminReply> {
        Some(match (req.method.as_str(), rest) {
            ("POST", ["request"]) => match req.json_body() {
                Ok(v) => match snapshot_from_logged(&v) {
                    Some(snap) => AdminReply::json(
                        200,
                        json!({ "nearMisses": near_misses_for(self.engine(), &snap, None) }),
                    ),
                    None => {
                        AdminReply::bad_request("expected a logged request with at least \"url\"")
                    }
                },
                Err(r) => r,
            },
            ("POST", ["request-pattern"]) => match self.parse_pattern(req) {
                Ok(p) => {
                    let events = match self.journal.newest_first() {
                        Ok(events) => events,
                        Err(e) => return Some(super::unavailable(&e)),
                    };
                    let deadline = std::time::Instant::now() + NEAR_MISS_DEADLINE;
                    let (near, _) = with_deadline(deadline, || {
                        nearest(events.iter(), NEAR_MISS_COUNT, |e| {
                            p.near_miss_distance(&e.request)
                        })
                    });
                    let pattern = req.json_body().unwrap_or_default();
                    let near: Vec<Value> = near
                        .into_iter()
                        .map(|(distance, e)| {
                            json!({
                                "request": json::event_request(e),
                                "requestPattern": pattern,
                                "matchResult": { "subEvents": [], "diffDescriptions": [], "distance": distance },
                            })
                        })
                        .collect();
                    AdminReply::json(200, json!({ "nearMisses": near }))
                }
                Err(r) => r,
            },
            _ => return None,
        })
    }

    fn list_requests(&self, req: &AdminRequest) -> Result<AdminReply, Unavailable> {
        let mut events = self.journal.newest_first()?;
        if req.query("unmatched") == Some("true") {
            events.retain(|e| !e.was_matched());
        }
        // `matchingStub=ID`: the events that stub answered (WireMock's ServeEventQuery).
        if let Some(stub) = req.query("matchingStub") {
            let Ok(id) = uuid::Uuid::parse_str(stub) else {
                return Ok(AdminReply::json(
                    400,
                    json::coded(
                        15,
                        &format!("Query parameter matchingStub value '{stub}' is not a valid UUID"),
                    ),
                ));
            };
            events.retain(|e| {
                e.mapping
                    .as_ref()
                    .is_some_and(|m| uuid::Uuid::parse_str(&m.id).is_ok_and(|m| m == id))
            });
        }
        if let Some(since) = req
            .query("since")
            .and_then(decoy_matching::date::parse_date_time)
        {
            events.retain(|e| chrono::DateTime::<chrono::Utc>::from(e.logged_at) > since);
        }
        let total = events.len();
        if let Some(limit) = req.query("limit").and_then(|l| l.parse().ok()) {
            events.truncate(limit);
        }
        // Each event is rendered with its engine, so the tie check runs on the
        // thread that streams the listing.
        let engine = self.engine().clone();
        let events: Vec<_> = events.into_iter().map(|e| (e, engine.clone())).collect();
        Ok(AdminReply::json_list(
            200,
            "requests",
            events,
            |(e, engine)| serve_event(engine, e),
            json!({
                "meta": { "total": total },
                "requestJournalDisabled": !self.journal.enabled(),
            }),
        ))
    }

    /// `POST /requests/remove-by-metadata`: removes the events answered by stubs whose
    /// metadata matches the posted string pattern; returns them, newest first.
    fn remove_by_stub_metadata(&self, req: &AdminRequest) -> Result<AdminReply, Unavailable> {
        let pattern = match self.metadata_pattern(req) {
            Ok(p) => p,
            Err(r) => return Ok(r),
        };
        let gone = self.journal.remove_where(|e| {
            e.mapping
                .as_ref()
                .is_some_and(|m| super::mappings::metadata_matches(m, &pattern))
        })?;
        Ok(AdminReply::json(
            200,
            json!({ "serveEvents": gone.iter().map(|e| json::serve_event(e)).collect::<Vec<_>>() }),
        ))
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
    ) -> Result<AdminReply, Unavailable> {
        Ok(match self.parse_pattern(req) {
            Ok(p) => {
                let mut events = self.journal.newest_first()?;
                events.retain(|e| p.matches(&e.request));
                AdminReply::json(200, render(&events))
            }
            Err(r) => r,
        })
    }
}

/// The three stubs closest to `snap`, as WireMock's near-miss list: the model that
/// names the not-matched report's closest stub. Scored within [`NEAR_MISS_DEADLINE`]
/// per request: past it, expensive matchers (a backtracking regex, XML, JSONPath...)
/// count as not matching.
fn near_misses_for(
    engine: &Engine,
    snap: &RequestSnapshot,
    event: Option<&ServeEvent>,
) -> Vec<Value> {
    let set = engine.mappings();
    let deadline = std::time::Instant::now() + NEAR_MISS_DEADLINE;
    let near = near_misses(&set, snap, deadline);
    let logged = match event {
        Some(e) => json::event_request(e),
        None => json::logged_request(snap, SystemTime::now(), "HTTP/1.1", 0),
    };
    near.into_iter()
        .map(|(distance, m)| {
            json!({
                "request": logged.clone(),
                "stubMapping": json::mapping(m),
                "matchResult": { "subEvents": [], "diffDescriptions": [], "distance": distance },
            })
        })
        .collect()
}

/// A journal entry as WireMock writes it. When other stubs of the winner's priority
/// also match the request, the answer depended on which stub was read or added last
/// (for files, the directory's listing order, which differs between file systems):
/// a `TIE` sub-event names them. A sub-event, because `subEvents` is part of
/// WireMock's own `ServeEvent` (a type, a time offset and free-form data), and
/// WireMock's Java client reads serve events strictly: a field its model lacks makes
/// `getServeEvents()` throw. Computed now, against the current stubs.
pub(super) fn serve_event(engine: &Engine, e: &ServeEvent) -> Value {
    let mut out = json::serve_event(e);
    if let Some(winner) = &e.mapping {
        let tied = engine.also_matching(&e.request, winner);
        if !tied.is_empty()
            && let Some(subs) = out["subEvents"].as_array_mut()
        {
            subs.push(tie_sub_event(winner, &tied));
        }
    }
    out
}

/// The `TIE` sub-event: the stubs that also matched, with their `id`, `name` and
/// `file`, and a sentence saying what that means.
fn tie_sub_event(winner: &Mapping, tied: &[Arc<Mapping>]) -> Value {
    let stubs: Vec<Value> = tied
        .iter()
        .map(|m| {
            let mut t = json!({ "id": &*m.id });
            if let Some(name) = &m.name {
                t["name"] = json!(&**name);
            }
            if let Some(src) = &m.source {
                t["file"] = json!(src.file.to_string_lossy());
            }
            t
        })
        .collect();
    json!({
        "type": "TIE",
        "timeOffsetNanos": 0,
        "data": {
            "message": format!(
                "{} other stub(s) of priority {} also match this request; the one read or \
                 added last answered (for files, the directory's listing order decides)",
                stubs.len(),
                winner.priority
            ),
            "tiedWith": stubs,
        },
    })
}
