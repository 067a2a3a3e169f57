//! Recorded exchanges as `mq-mappings` files, in the format `decoy serve` loads:
//! the request's destination and body pattern (chosen as the HTTP recorder chooses
//! it, [`decoy_core::recording`]), the chosen properties, and the reply as the back
//! end sent it (body inline, or in `__files` past `textSizeThreshold`; format;
//! properties; the correlation rule the pairing showed).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::book::Exchange;
use super::spec::{RecordSpec, ReplyMode, Route};
use crate::config::Correlation;
use crate::transport::{Destination, Message};
use decoy_core::recording::{body_extension, request_body_pattern};
use decoy_core::stub_files::{MAX_NUMBER, create_exclusively, numbered};

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
        let body_file = if spec.text_threshold.is_some_and(|t| body.len() as u64 > t) {
            std::fs::create_dir_all(&files)
                .map_err(|e| format!("cannot create {}: {e}", files.display()))?;
            Some(BodyFile {
                dir: &files,
                extension: body_extension(content_type(&x.reply), body),
                bytes: body,
            })
        } else {
            if let Some(t) = text {
                response.insert("text".into(), json!(t));
            } else {
                response.insert(
                    "base64Body".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(body)),
                );
            }
            None
        };
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
        let mapping = |body_file_name: Option<&str>| {
            let mut response = response.clone();
            if let Some(name) = body_file_name {
                response.insert("bodyFileName".into(), json!(name));
            }
            let mapping = json!({
                "mappingId": id,
                "name": format!("recorded from {}", route.listen),
                "connectionId": route.connection_id,
                "request": request,
                "response": Value::Object(response),
                "correlation": correlation(route),
            });
            serde_json::to_string_pretty(&mapping).map_err(|e| e.to_string())
        };
        written.push(place(&dir, &stem, body_file.as_ref(), mapping)?);
    }
    Ok(written)
}

/// A reply body written to `__files` beside its mapping.
struct BodyFile<'a> {
    dir: &'a Path,
    extension: &'a str,
    bytes: &'a [u8],
}

/// Writes a mapping file named from `stem` into `dir` (and its body file, named
/// alike), as `stem`, or when a file of that name exists already (an earlier
/// recording, or two ids alike in their first 8 characters, which a long recording
/// meets), as the first free numbered form (`stem-2`, ...), as the HTTP recorder
/// does. The mapping and its body file always share their name.
fn place(
    dir: &Path,
    stem: &str,
    body_file: Option<&BodyFile>,
    mapping: impl Fn(Option<&str>) -> Result<String, String>,
) -> Result<PathBuf, String> {
    let taken = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let exists = |e: &std::io::Error| e.kind() == std::io::ErrorKind::AlreadyExists;
    let cannot = |p: &Path, e: std::io::Error| format!("cannot write {}: {e}", p.display());
    for n in 1..=MAX_NUMBER {
        let name = numbered(stem, n);
        let path = dir.join(format!("{name}.json"));
        let body = body_file.map(|b| {
            let file_name = format!("{name}.{}", b.extension);
            (b.dir.join(&file_name), file_name, b.bytes)
        });
        if taken(&path) || body.as_ref().is_some_and(|(p, _, _)| taken(p)) {
            continue;
        }
        if let Some((body_path, _, bytes)) = &body {
            match create_exclusively(body_path, bytes) {
                Ok(()) => {}
                Err(e) if exists(&e) => continue,
                Err(e) => return Err(cannot(body_path, e)),
            }
        }
        let text = mapping(body.as_ref().map(|(_, name, _)| name.as_str()))?;
        match create_exclusively(&path, text.as_bytes()) {
            Ok(()) => return Ok(path),
            Err(e) => {
                // The body file just written is this mapping's alone: take it back.
                if let Some((body_path, _, _)) = &body {
                    let _ = std::fs::remove_file(body_path);
                }
                if !exists(&e) {
                    return Err(cannot(&path, e));
                }
            }
        }
    }
    Err(format!(
        "cannot write a recorded mapping in {}: files named {stem}.json to {}.json exist already",
        dir.display(),
        numbered(stem, MAX_NUMBER)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(body_file_name: Option<&str>) -> Result<String, String> {
        Ok(format!("{{\"bodyFileName\": {body_file_name:?}}}"))
    }

    #[test]
    fn a_name_taken_already_gets_the_next_number_and_nothing_is_replaced() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        std::fs::write(dir.join("recorded-q-0123abcd.json"), "earlier").unwrap();
        let first = place(dir, "recorded-q-0123abcd", None, mapping).unwrap();
        assert_eq!(first, dir.join("recorded-q-0123abcd-2.json"));
        // The same 8 characters again (another id alike in them).
        let second = place(dir, "recorded-q-0123abcd", None, mapping).unwrap();
        assert_eq!(second, dir.join("recorded-q-0123abcd-3.json"));
        assert_eq!(
            std::fs::read_to_string(dir.join("recorded-q-0123abcd.json")).unwrap(),
            "earlier"
        );
        assert_eq!(
            std::fs::read_to_string(&second).unwrap(),
            "{\"bodyFileName\": None}"
        );
    }

    #[test]
    fn a_mapping_and_its_body_file_share_a_free_name() {
        let root = tempfile::tempdir().unwrap();
        let (dir, files) = (root.path().join("mq-mappings"), root.path().join("__files"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&files).unwrap();
        // Only the body file's name is taken: both move on to -2.
        std::fs::write(files.join("recorded-q-0123abcd.xml"), "earlier").unwrap();
        let body = BodyFile {
            dir: &files,
            extension: "xml",
            bytes: b"<reply/>",
        };
        let path = place(&dir, "recorded-q-0123abcd", Some(&body), mapping).unwrap();
        assert_eq!(path, dir.join("recorded-q-0123abcd-2.json"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"bodyFileName\": Some(\"recorded-q-0123abcd-2.xml\")}"
        );
        assert_eq!(
            std::fs::read(files.join("recorded-q-0123abcd-2.xml")).unwrap(),
            b"<reply/>"
        );
        assert_eq!(
            std::fs::read_to_string(files.join("recorded-q-0123abcd.xml")).unwrap(),
            "earlier"
        );
        assert!(!dir.join("recorded-q-0123abcd.json").exists());
    }
}
