//! The JSON shapes of WireMock's admin API: stub mappings, logged requests, serve
//! events, near misses, errors.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use decoy_core::journal::ServeEvent;
use decoy_core::mapping::{Mapping, written_header_case};
use decoy_spec::fields::FieldError;
use decoy_spec::request::RequestSnapshot;

/// A stub as the admin API shows it: as written, with `id` and `uuid` filled in.
pub fn mapping(m: &Mapping) -> Value {
    let written: Value = serde_json::from_str(&m.json).unwrap_or_else(|_| json!({}));
    // `id` first and `uuid` last, as WireMock writes them.
    let mut out = Map::new();
    out.insert("id".into(), Value::String(m.id.to_string()));
    if let Value::Object(obj) = written {
        for (k, v) in obj {
            if !matches!(k.as_str(), "id" | "uuid" | "mappings") {
                out.insert(k, v);
            }
        }
    }
    out.insert("uuid".into(), Value::String(m.id.to_string()));
    Value::Object(out)
}

pub fn mappings<'a>(list: impl Iterator<Item = &'a Arc<Mapping>>, total: usize) -> Value {
    json!({
        "mappings": list.map(|m| mapping(m)).collect::<Vec<_>>(),
        "meta": { "total": total }
    })
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn iso(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn header_object<'a>(headers: impl Iterator<Item = (&'a str, String)>) -> Value {
    let mut out = Map::new();
    for (name, value) in headers {
        match out.get_mut(name) {
            None => {
                out.insert(name.to_owned(), Value::String(value));
            }
            Some(Value::Array(list)) => list.push(Value::String(value)),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, Value::String(value)]);
            }
        }
    }
    Value::Object(out)
}

/// WireMock's `{"name": {"key": "name", "values": [...]}}` for query and form fields.
fn key_values(pairs: &[(String, String)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in pairs {
        let entry = out
            .entry(k.clone())
            .or_insert_with(|| json!({"key": k, "values": []}));
        if let Some(Value::Array(values)) = entry.get_mut("values") {
            values.push(Value::String(v.clone()));
        }
    }
    out
}

/// WireMock's `LoggedRequest`.
pub fn logged_request(
    req: &RequestSnapshot,
    logged_at: SystemTime,
    protocol: &str,
    local_port: u16,
) -> Value {
    let (host, port) = req
        .host_port()
        .unwrap_or_else(|| ("localhost".into(), local_port));
    let headers = header_object(req.headers.iter().map(|(k, v)| {
        (
            req.header_case.name(k.as_str()),
            String::from_utf8_lossy(v.as_bytes()).into_owned(),
        )
    }));
    let cookies: Map<String, Value> = req
        .cookies()
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let query = key_values(req.query());
    let is_form = req
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    let form = if is_form {
        key_values(req.form())
    } else {
        Map::new()
    };
    json!({
        "url": req.url,
        "absoluteUrl": format!("{}{}", decoy_spec::request::base_url(req.scheme, &host, port), req.url),
        "method": req.method,
        "clientIp": req.client_addr.map(|a| a.ip().to_string()).unwrap_or_else(|| "127.0.0.1".into()),
        "headers": headers,
        "cookies": cookies,
        "browserProxyRequest": false,
        "loggedDate": millis(logged_at),
        "bodyAsBase64": base64::engine::general_purpose::STANDARD.encode(&req.body),
        "body": req.body_text(),
        "protocol": protocol,
        "scheme": req.scheme,
        "host": host,
        "port": port,
        "loggedDateString": iso(logged_at),
        "queryParams": query,
        "formParams": form,
    })
}

/// WireMock's `LoggedRequest` of a journal event; a body the journal kept truncated
/// is flagged with two fields of decoy's own, `bodyTruncated: true` and `bodySize`
/// (the full size); WireMock's clients ignore fields they do not know.
pub fn event_request(e: &ServeEvent) -> Value {
    let mut v = logged_request(&e.request, e.logged_at, e.protocol, e.local_port);
    if let (Some(size), Value::Object(obj)) = (e.request_body_size, &mut v) {
        obj.insert("bodyTruncated".into(), Value::Bool(true));
        obj.insert("bodySize".into(), json!(size));
    }
    v
}

/// The id WireMock gives the placeholder stub of every unmatched serve event: one per
/// process, as WireMock's `StubMapping.NOT_CONFIGURED`.
fn not_configured_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().to_string())
}

/// WireMock's `ServeEvent`. An unmatched one is shaped as WireMock shapes it: a
/// not-configured 404 definition, an empty logged response, the "Request was not
/// matched" report as a `REQUEST_NOT_MATCHED` sub-event and the placeholder stub
/// (clients read `stubMapping` and `responseDefinition.fromConfiguredStub`).
pub fn serve_event(e: &ServeEvent) -> Value {
    let added = e.added_delay.as_millis() as u64;
    let process = e.process_time.as_millis() as u64;
    let timing = json!({
        "addedDelay": added,
        "processTime": process,
        "responseSendTime": 0,
        "serveTime": process,
        "totalTime": process + added,
    });
    let request = event_request(e);
    let Some(m) = &e.mapping else {
        let id = not_configured_id();
        return json!({
            "id": e.id.to_string(),
            "request": request,
            "responseDefinition": { "status": e.status, "fromConfiguredStub": false },
            "response": { "status": e.status, "bodyAsBase64": "", "body": "" },
            "wasMatched": false,
            "timing": timing,
            "subEvents": [{
                "type": "REQUEST_NOT_MATCHED",
                "timeOffsetNanos": e.process_time.as_nanos() as u64,
                "data": {
                    "status": e.status,
                    "contentType": "text/plain",
                    "report": String::from_utf8_lossy(e.response_body()),
                },
            }],
            "stubMapping": {
                "id": id,
                "request": { "method": "ANY" },
                "response": { "status": 404, "fromConfiguredStub": false },
                "uuid": id,
            },
        });
    };
    let stub = mapping(m);
    // As the real service sent them, or as the stub writes them.
    let case = match &e.response_header_case {
        Some(case) => Some(std::borrow::Cow::Borrowed(&**case)),
        None if !e.proxied => Some(std::borrow::Cow::Owned(written_header_case(&stub))),
        None => None,
    };
    let headers = header_object(e.response_headers().iter().map(|(k, v)| {
        (
            match &case {
                Some(case) => case.name(k.as_str()),
                None => k.as_str(),
            },
            String::from_utf8_lossy(v.as_bytes()).into_owned(),
        )
    }));
    let mut response = json!({
        "status": e.status,
        "headers": headers,
        "bodyAsBase64": base64::engine::general_purpose::STANDARD.encode(e.response_body()),
        "body": String::from_utf8_lossy(e.response_body()),
    });
    if let Some(size) = e.response_body_size {
        response["bodyTruncated"] = Value::Bool(true);
        response["bodySize"] = json!(size);
    }
    json!({
        "id": e.id.to_string(),
        "request": request,
        "responseDefinition": {
            "status": e.status,
            "body": String::from_utf8_lossy(e.response_body()),
        },
        "response": response,
        "wasMatched": true,
        "timing": timing,
        "subEvents": sub_events(e),
        "stubMapping": stub,
    })
}

/// What the stub's listeners did after the answer (messages published or not), as
/// WireMock's sub-events.
fn sub_events(e: &ServeEvent) -> Value {
    let Some(s) = &e.sub_events else {
        return json!([]);
    };
    Value::Array(
        s.list()
            .into_iter()
            .map(|ev| {
                json!({
                    "type": ev.kind,
                    "timeOffsetNanos": ev.offset.as_nanos() as u64,
                    "data": ev.data,
                })
            })
            .collect(),
    )
}

/// WireMock's error document for a rejected mapping.
pub fn errors(errs: &[FieldError]) -> Value {
    json!({
        "errors": errs.iter().map(|e| json!({
            "code": 10,
            "source": { "pointer": format!("/{}", e.path.replace('.', "/")) },
            "title": "Error parsing JSON",
            "detail": e.to_string(),
        })).collect::<Vec<_>>()
    })
}

pub fn error(title: &str, detail: &str) -> Value {
    json!({ "errors": [ { "code": 10, "title": title, "detail": detail } ] })
}

/// WireMock's error document with its own error code and only a title.
pub fn coded(code: u16, title: &str) -> Value {
    json!({ "errors": [ { "code": code, "title": title } ] })
}
