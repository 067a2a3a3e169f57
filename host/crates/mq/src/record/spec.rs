//! The recording description: which requests to forward where, and how replies are
//! paired. Read from a JSON file (or built from `decoy record-mq`'s flags), checked
//! whole before anything connects: every problem names the file, the field and why.
//!
//! ```json
//! {
//!   "routes": [
//!     { "connectionId": "rabbit", "listen": "QUOTES.REQUEST", "forward": "REAL.QUOTES" },
//!     { "connectionId": "qm1", "listen": "APP.REQUEST", "forward": "BACKEND.IN",
//!       "reply": { "queue": "BACKEND.OUT", "pairBy": "MSGID_TO_CORRELID" } }
//!   ],
//!   "timeoutMilliseconds": 30000,
//!   "matchJsonPaths": ["$.symbol"],
//!   "textSizeThreshold": "10 kb"
//! }
//! ```

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{Connection, Correlation, parse_destination};
use crate::transport::Destination;
use decoy_core::recording::{MatchFields, parse_size};
use decoy_spec::fields::FieldError;

/// How long a forwarded request waits for its reply, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests forwarded and not yet answered, at most (then receiving waits).
pub const DEFAULT_MAX_OUTSTANDING: usize = 10_000;
/// Their bodies' bytes, at most.
pub const DEFAULT_MAX_OUTSTANDING_BYTES: u64 = 64 * 1024 * 1024;
/// Recorded exchanges' bytes kept for writing, at most (past it, exchanges are still
/// forwarded and answered, but not recorded, and the recording says so).
pub const DEFAULT_MAX_RECORDED_BYTES: u64 = 256 * 1024 * 1024;

const FIELDS: &[&str] = &[
    "routes",
    "timeoutMilliseconds",
    "maxOutstanding",
    "maxOutstandingBytes",
    "maxRecordedBytes",
    "matchJsonPaths",
    "matchXPaths",
    "matchProperties",
    "textSizeThreshold",
];
const ROUTE_FIELDS: &[&str] = &["connectionId", "listen", "forward", "reply"];
const REPLY_FIELDS: &[&str] = &["queue", "pairBy", "passTo"];

/// A whole recording.
#[derive(Debug, Clone)]
pub struct RecordSpec {
    pub routes: Vec<Route>,
    pub timeout: Duration,
    pub max_outstanding: usize,
    pub max_outstanding_bytes: u64,
    pub max_recorded_bytes: u64,
    /// Match recorded requests on these fields rather than their whole body.
    pub fields: MatchFields,
    /// Request properties recorded as `equalTo` matches, when a request has them.
    pub properties: Vec<String>,
    /// Reply bodies larger than this go to `__files`; `None`: all stay inline.
    pub text_threshold: Option<u64>,
}

/// One path from the system under test to the real back end.
#[derive(Debug, Clone)]
pub struct Route {
    pub connection_id: String,
    /// Where the system under test sends requests (and where playback listens).
    pub listen: Destination,
    /// Where the real back end takes them.
    pub forward: Destination,
    pub reply: ReplyMode,
}

/// How a back end's reply finds its way back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyMode {
    /// decoy names a reply destination of its own on each forwarded request and
    /// pairs what comes back there (the requester's reply-to gets it).
    ReplyTo,
    /// The back end answers on a fixed queue; replies are paired by correlation id.
    Fixed {
        queue: Destination,
        pair_by: Correlation,
        /// Where the requester reads replies, when not its messages' reply-to.
        pass_to: Option<Destination>,
    },
}

impl Default for RecordSpec {
    fn default() -> Self {
        RecordSpec {
            routes: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_outstanding: DEFAULT_MAX_OUTSTANDING,
            max_outstanding_bytes: DEFAULT_MAX_OUTSTANDING_BYTES,
            max_recorded_bytes: DEFAULT_MAX_RECORDED_BYTES,
            fields: MatchFields::default(),
            properties: Vec::new(),
            text_threshold: None,
        }
    }
}

/// Reads `file` (shown as `shown` in errors); every problem, not just the first.
pub fn read(file: &Path, connections: &[Connection]) -> Result<RecordSpec, Vec<String>> {
    let shown = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| vec![format!("{shown}: {e}")])?;
    let v: Value = serde_json::from_str(&text).map_err(|e| vec![format!("{shown}: {e}")])?;
    parse(&v, connections)
        .map_err(|errs| errs.into_iter().map(|e| format!("{shown}: {e}")).collect())
}

/// Parses a recording description.
pub fn parse(v: &Value, connections: &[Connection]) -> Result<RecordSpec, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(obj) = v.as_object() else {
        return Err(vec![FieldError::new(
            "",
            "expected a JSON object with \"routes\"",
        )]);
    };
    unknown(obj, "", FIELDS, &mut errors);
    let mut spec = RecordSpec::default();
    match obj.get("routes") {
        Some(Value::Array(routes)) if !routes.is_empty() => {
            for (i, r) in routes.iter().enumerate() {
                match route(r, &format!("routes[{i}]"), connections) {
                    Ok(r) => spec.routes.push(r),
                    Err(mut e) => errors.append(&mut e),
                }
            }
        }
        Some(_) => errors.push(FieldError::new(
            "routes",
            "expected a non-empty list of routes",
        )),
        None => errors.push(FieldError::new("routes", "missing: say what to record")),
    }
    // Two routes on one listening destination would take each other's requests; a
    // route forwarding to where it listens would forward its own requests forever.
    for (i, a) in spec.routes.iter().enumerate() {
        if spec.routes[..i]
            .iter()
            .any(|b| b.listen == a.listen && b.connection_id == a.connection_id)
        {
            errors.push(FieldError::new(
                format!("routes[{i}].listen"),
                format!("{} is listened on by an earlier route", a.listen),
            ));
        }
        if a.listen == a.forward {
            errors.push(FieldError::new(
                format!("routes[{i}].forward"),
                format!(
                    "{} is where the route listens: it would forward its own requests",
                    a.forward
                ),
            ));
        }
    }
    let number = |key: &str, min: u64, max: u64, errors: &mut Vec<FieldError>| -> Option<u64> {
        let v = obj.get(key)?;
        match v.as_u64().filter(|n| (min..=max).contains(n)) {
            Some(n) => Some(n),
            None => {
                errors.push(FieldError::new(
                    key,
                    format!("{v}: expected a whole number from {min} to {max}"),
                ));
                None
            }
        }
    };
    if let Some(ms) = number("timeoutMilliseconds", 1, 3_600_000, &mut errors) {
        spec.timeout = Duration::from_millis(ms);
    }
    if let Some(n) = number("maxOutstanding", 1, 1_000_000, &mut errors) {
        spec.max_outstanding = n as usize;
    }
    for (key, slot) in [
        ("maxOutstandingBytes", &mut spec.max_outstanding_bytes),
        ("maxRecordedBytes", &mut spec.max_recorded_bytes),
    ] {
        if let Some(v) = obj.get(key) {
            match parse_size(v).filter(|n| *n >= 1024) {
                Some(n) => *slot = n,
                None => errors.push(FieldError::new(
                    key,
                    format!("{v}: expected a size of at least 1 kb, such as 67108864 or \"64 mb\""),
                )),
            }
        }
    }
    if let Some(v) = obj.get("textSizeThreshold") {
        match parse_size(v) {
            Some(n) => spec.text_threshold = Some(n),
            None => errors.push(FieldError::new(
                "textSizeThreshold",
                format!("{v}: expected a size such as 2048 or \"10 kb\""),
            )),
        }
    }
    spec.fields.json_paths = strings(obj, "matchJsonPaths", &mut errors);
    spec.fields.xpaths = strings(obj, "matchXPaths", &mut errors);
    spec.properties = strings(obj, "matchProperties", &mut errors);
    for (i, p) in spec.fields.json_paths.iter().enumerate() {
        let one = MatchFields {
            json_paths: vec![p.clone()],
            xpaths: Vec::new(),
        };
        if let Err(e) = one.check() {
            errors.push(FieldError::new(format!("matchJsonPaths[{i}]"), e));
        }
    }
    for (i, x) in spec.fields.xpaths.iter().enumerate() {
        let one = MatchFields {
            json_paths: Vec::new(),
            xpaths: vec![x.clone()],
        };
        if let Err(e) = one.check() {
            errors.push(FieldError::new(format!("matchXPaths[{i}]"), e));
        }
    }
    if errors.is_empty() {
        Ok(spec)
    } else {
        Err(errors)
    }
}

fn route(v: &Value, at: &str, connections: &[Connection]) -> Result<Route, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(obj) = v.as_object() else {
        return Err(vec![FieldError::new(
            at,
            "expected an object with \"listen\" and \"forward\"",
        )]);
    };
    unknown(obj, at, ROUTE_FIELDS, &mut errors);
    let path = |k: &str| format!("{at}.{k}");
    let connection_id = match obj.get("connectionId") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            errors.push(FieldError::new(
                path("connectionId"),
                format!("{other}: expected a string"),
            ));
            String::new()
        }
        None if connections.len() == 1 => connections[0].id.clone(),
        None => {
            errors.push(FieldError::new(
                path("connectionId"),
                "missing; mq-connections.json defines several connections (or none), say which one",
            ));
            String::new()
        }
    };
    if !connection_id.is_empty() && !connections.iter().any(|c| c.id == connection_id) {
        let known: Vec<&str> = connections.iter().map(|c| c.id.as_str()).collect();
        errors.push(FieldError::new(
            path("connectionId"),
            format!(
                "{connection_id:?} is not a connection in mq-connections.json (known: {})",
                known.join(", ")
            ),
        ));
    }
    let mut dest = |key: &str| -> Option<Destination> {
        match obj.get(key) {
            Some(d) => parse_destination(d, &path(key))
                .map_err(|e| errors.push(e))
                .ok(),
            None => {
                errors.push(FieldError::new(path(key), "missing"));
                None
            }
        }
    };
    let listen = dest("listen");
    let forward = dest("forward");
    let reply = match obj.get("reply") {
        None => Some(ReplyMode::ReplyTo),
        Some(Value::String(s)) if s == "replyTo" => Some(ReplyMode::ReplyTo),
        Some(Value::Object(r)) => {
            let at = path("reply");
            unknown(r, &at, REPLY_FIELDS, &mut errors);
            let queue = match r.get("queue") {
                Some(q) => parse_destination(q, &format!("{at}.queue"))
                    .map_err(|e| errors.push(e))
                    .ok(),
                None => {
                    errors.push(FieldError::new(
                        format!("{at}.queue"),
                        "missing: the queue the back end replies on",
                    ));
                    None
                }
            };
            let pair_by = match r.get("pairBy").map(|p| p.as_str()) {
                None | Some(Some("MSGID_TO_CORRELID")) => Some(Correlation::MsgIdToCorrelId),
                Some(Some("COPY_CORRELID")) => Some(Correlation::CopyCorrelId),
                Some(_) => {
                    errors.push(FieldError::new(
                        format!("{at}.pairBy"),
                        "expected MSGID_TO_CORRELID (the reply's correlation id is the request's message id) or COPY_CORRELID (the request's correlation id)",
                    ));
                    None
                }
            };
            let pass_to = match r.get("passTo") {
                Some(p) => match parse_destination(p, &format!("{at}.passTo")) {
                    Ok(d) => Some(Some(d)),
                    Err(e) => {
                        errors.push(e);
                        None
                    }
                },
                None => Some(None),
            };
            match (queue, pair_by, pass_to) {
                (Some(queue), Some(pair_by), Some(pass_to)) => Some(ReplyMode::Fixed {
                    queue,
                    pair_by,
                    pass_to,
                }),
                _ => None,
            }
        }
        Some(other) => {
            errors.push(FieldError::new(
                path("reply"),
                format!("{other}: expected \"replyTo\" or {{\"queue\": ..., \"pairBy\": ...}}"),
            ));
            None
        }
    };
    match (listen, forward, reply) {
        (Some(listen), Some(forward), Some(reply)) if errors.is_empty() => Ok(Route {
            connection_id,
            listen,
            forward,
            reply,
        }),
        _ => Err(errors),
    }
}

fn strings(obj: &Map<String, Value>, key: &str, errors: &mut Vec<FieldError>) -> Vec<String> {
    match obj.get(key) {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(|s| s.as_str().is_some_and(|s| !s.is_empty())) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        Some(_) => {
            errors.push(FieldError::new(key, "expected a list of non-empty strings"));
            Vec::new()
        }
    }
}

/// Unknown fields are errors here (a misspelt option would silently record the
/// wrong thing, and this file is written by hand, not by another tool).
fn unknown(obj: &Map<String, Value>, at: &str, known: &[&str], errors: &mut Vec<FieldError>) {
    for k in obj.keys() {
        if !known.contains(&k.as_str()) {
            let path = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            errors.push(FieldError::new(
                path,
                format!("unknown field (known: {})", known.join(", ")),
            ));
        }
    }
}
