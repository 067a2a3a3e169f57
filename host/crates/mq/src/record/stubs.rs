//! Recorded exchanges as `mq-mappings` files, in the format `decoy serve` loads:
//! the request's destination and body pattern (chosen as the HTTP recorder chooses
//! it, [`decoy_core::recording`]), the chosen properties, and the reply as the back
//! end sent it (body inline, or in `__files` past `textSizeThreshold`; format;
//! properties; the correlation rule the pairing showed).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::book::Exchange;
use super::spec::{RecordSpec, ReplyMode, Route};
use crate::config::Correlation;
use crate::transport::{Destination, Message};
use decoy_core::recording::{body_extension, request_body_pattern};

/// Reply properties not written: ones the serving side sets itself from the
/// reply's correlation id (a NATS header).
const NOT_RECORDED: &[&str] = &[crate::nats::CORRELATION_HEADER];

fn destination(d: &Destination) -> Value {
    json!({ "name": d.name, "type": if d.topic { "TOPIC" } else { "QUEUE" } })
}

/// A message's content type, when its format is one (AMQP); MQ format names are not.
fn content_type(m: &Message) -> &str {
    m.format
        .as_deref()
        .filter(|f| f.contains('/'))
        .unwrap_or("")
}

/// The stub's `request`: what makes requests distinct.
pub fn request_part(spec: &RecordSpec, route: &Route, request: &Message) -> Value {
    let mut out = Map::new();
    out.insert("destination".into(), destination(&route.listen));
    out.insert(
        "bodyMatcher".into(),
        request_body_pattern(&request.body, content_type(request), &spec.fields),
    );
    let mut props = Map::new();
    for name in &spec.properties {
        if let Some((_, v)) = request.properties.iter().find(|(k, _)| k == name) {
            props.insert(name.clone(), json!({ "equalTo": v }));
        }
    }
    if !props.is_empty() {
        out.insert("properties".into(), Value::Object(props));
    }
    Value::Object(out)
}

fn correlation(route: &Route) -> &'static str {
    match route.reply {
        ReplyMode::ReplyTo => "CORRELID_OR_MSGID",
        ReplyMode::Fixed { pair_by, .. } => match pair_by {
            Correlation::CopyCorrelId => "COPY_CORRELID",
            Correlation::MsgIdToCorrelId => "MSGID_TO_CORRELID",
            Correlation::CorrelIdOrMsgId => "CORRELID_OR_MSGID",
        },
    }
}

fn format_name(m: &Message) -> &'static str {
    match m.format.as_deref().map(str::trim) {
        Some("MQSTR") => "MQFMT_STRING",
        Some("MQHRF2") => "MQFMT_RF_HEADER_2",
        None | Some("") => "MQFMT_NONE",
        // A content type (AMQP) cannot be said in a mapping; the body is text or not.
        Some(_) => "MQFMT_STRING",
    }
}

/// Writes one mapping file per exchange into `root/mq-mappings/` (and body files
/// into `root/__files/`); never replaces a file. Returns the mapping files written.
pub fn write(
    root: &Path,
    spec: &RecordSpec,
    exchanges: &[Exchange],
) -> Result<Vec<PathBuf>, String> {
    let dir = root.join("mq-mappings");
    let files = root.join("__files");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for x in exchanges {
        let route = &spec.routes[x.route];
        let id = uuid::Uuid::new_v4().to_string();
        let stem = format!(
            "recorded-{}-{}",
            decoy_core::filenames::sanitise(&route.listen.name.replace(['/', '.'], "-")),
            &id[..8]
        );
        let request: Value =
            serde_json::from_str(&x.key).unwrap_or_else(|_| request_part(spec, route, &x.request));
        let mut response = Map::new();
        let body = &x.reply.body;
        let text = std::str::from_utf8(body).ok();
        if spec.text_threshold.is_some_and(|t| body.len() as u64 > t) {
            let name = format!("{stem}.{}", body_extension(content_type(&x.reply), body));
            std::fs::create_dir_all(&files)
                .map_err(|e| format!("cannot create {}: {e}", files.display()))?;
            write_new(&files.join(&name), body)?;
            response.insert("bodyFileName".into(), json!(name));
        } else if let Some(t) = text {
            response.insert("text".into(), json!(t));
        } else {
            response.insert(
                "base64Body".into(),
                json!(base64::engine::general_purpose::STANDARD.encode(body)),
            );
        }
        response.insert("format".into(), json!(format_name(&x.reply)));
        let props: Map<String, Value> = x
            .reply
            .properties
            .iter()
            .filter(|(k, _)| !NOT_RECORDED.iter().any(|n| n.eq_ignore_ascii_case(k)))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        if !props.is_empty() {
            response.insert("properties".into(), Value::Object(props));
        }
        if let ReplyMode::Fixed {
            pass_to: Some(to), ..
        } = &route.reply
        {
            response.insert("destination".into(), destination(to));
        }
        let mapping = json!({
            "mappingId": id,
            "name": format!("recorded from {}", route.listen),
            "connectionId": route.connection_id,
            "request": request,
            "response": Value::Object(response),
            "correlation": correlation(route),
        });
        let path = dir.join(format!("{stem}.json"));
        let text = serde_json::to_string_pretty(&mapping).map_err(|e| e.to_string())?;
        write_new(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
