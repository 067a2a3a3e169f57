//! `--record-mappings`: WireMock's command-line recorder. Every answer that came from
//! a proxy (usually the `--proxy-all` stub) is written as it happens: a mapping
//! `mappings/mapping-<path>-<id>.json` and its body `__files/body-<path>-<id>.<ext>`,
//! in the shape WireMock 3.13.2 writes them (checked against the jar): the request's
//! `url` and `method`, the `--match-headers` the request carried as `equalTo`, its
//! body as `equalToJson` (ignoring array order and extra elements) or `equalTo`; the
//! answer's status, headers (less `Content-Length` and `Content-Encoding`, their names
//! spelled as the service sent them) and `bodyFileName`. A request already recorded
//! (same method, URL, matched headers and body) is not recorded again.
//!
//! Files are written on a blocking thread, off the request's path. With hot reload on,
//! the watcher loads each new mapping, so a repeat of a recorded request is answered
//! from the recording; `--no-watch` keeps every request going to the proxy, as in
//! WireMock, which reads recorded files only at its next start.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use rand::RngExt as _;
use serde_json::{Map, Value, json};

use decoy_core::paths;
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::ResponsePlan;
use decoy_spec::request::RequestSnapshot;

#[derive(Debug)]
pub struct Recorder {
    mappings: PathBuf,
    files: PathBuf,
    /// `--match-headers`, as given.
    match_headers: Vec<String>,
    seen: Mutex<HashSet<String>>,
}

impl decoy_core::serve::Recording for Recorder {
    fn proxied(&self, req: &RequestSnapshot, plan: &ResponsePlan, case: Option<&HeaderCase>) {
        self.record(req, plan, case)
    }
}

impl Recorder {
    pub fn new(root: &std::path::Path, match_headers: Vec<String>) -> Recorder {
        Recorder {
            mappings: root.join("mappings"),
            files: root.join("__files"),
            match_headers,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// Records one proxied exchange unless the same request was recorded before.
    /// `case` is how the service spelled the answer's header names, when known.
    pub fn record(&self, req: &RequestSnapshot, plan: &ResponsePlan, case: Option<&HeaderCase>) {
        if req
            .header("content-type")
            .is_some_and(|ct| ct.starts_with("application/grpc"))
        {
            return self.record_grpc(req, plan);
        }
        let request = self.request_pattern(req);
        let key = request.to_string();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if !seen.insert(key) {
                return;
            }
        }
        let file_id: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(5)
            .map(char::from)
            .collect();
        let slug = slug(req.path());
        let content_type = plan
            .headers
            .iter()
            .find(|(n, _)| *n == http::header::CONTENT_TYPE)
            .and_then(|(_, v)| v.to_str().ok())
            .unwrap_or("");
        let body_file = format!(
            "body-{slug}-{file_id}.{}",
            extension(content_type, req.path())
        );
        let mut headers = Map::new();
        for (name, value) in plan.headers.iter() {
            if *name == http::header::CONTENT_LENGTH || *name == http::header::CONTENT_ENCODING {
                continue;
            }
            let value = Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned());
            // As the service spelled it; when that is not known, capitalised, the
            // spelling almost every service uses.
            let name = match case {
                Some(case) => case.name(name.as_str()).to_owned(),
                None => title_case(name.as_str()),
            };
            match headers.get_mut(&name) {
                Some(Value::Array(a)) => a.push(value),
                Some(one) => *one = Value::Array(vec![one.take(), value]),
                None => {
                    headers.insert(name, value);
                }
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let mut response = json!({ "status": plan.status, "bodyFileName": body_file });
        if !headers.is_empty() {
            response["headers"] = Value::Object(headers);
        }
        let mapping = json!({ "id": id, "request": request, "response": response, "uuid": id });
        let mapping_name = format!("mapping-{slug}-{file_id}.json");
        let mappings_dir = self.mappings.clone();
        let files_dir = self.files.clone();
        let body = plan.body.clone();
        let url = req.url.clone();
        // The body first: the watcher then finds it when the mapping appears. Both
        // names are built from the request and the answer (the extension from its
        // Content-Type), so each must stay inside its folder, and neither may replace
        // a file already there (however unlikely, with a random part in each name).
        let write = move || -> std::io::Result<()> {
            let body_path =
                paths::inside(&files_dir, &body_file, "__files").map_err(std::io::Error::other)?;
            let mapping_path = paths::inside(&mappings_dir, &mapping_name, "mappings")
                .map_err(std::io::Error::other)?;
            if let Some(dir) = body_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            decoy_core::stub_files::create_exclusively(&body_path, &body)?;
            if let Some(dir) = mapping_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let text = serde_json::to_vec_pretty(&mapping).unwrap_or_default();
            decoy_core::stub_files::create_exclusively(&mapping_path, text)
        };
        let task = move || match write() {
            Ok(()) => tracing::info!("recorded a mapping for {url}"),
            Err(e) => tracing::warn!("--record-mappings: cannot write the mapping for {url}: {e}"),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(task);
            }
            Err(_) => task(),
        }
    }

    /// A proxied gRPC call, in the gRPC stub format (docs/grpc.md): the method's
    /// path, the request message (or a client stream's array of them) exactly, the
    /// answer's messages as `jsonBody` and its status and metadata as headers; one
    /// file, no body file.
    fn record_grpc(&self, req: &RequestSnapshot, plan: &ResponsePlan) {
        let mut request = self.request_pattern(req);
        request["urlPath"] = json!(req.path());
        if let Some(obj) = request.as_object_mut() {
            obj.remove("url");
            obj.remove("bodyPatterns");
        }
        if !req.body.is_empty() {
            request["bodyPatterns"] = json!([{ "equalToJson": req.body_text() }]);
        }
        let key = request.to_string();
        if !self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            return;
        }
        let mut response = json!({ "status": plan.status });
        if let Ok(v) = serde_json::from_slice::<Value>(&plan.body) {
            response["jsonBody"] = v;
        }
        let headers: Map<String, Value> = plan
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    json!(String::from_utf8_lossy(v.as_bytes())),
                )
            })
            .collect();
        if !headers.is_empty() {
            response["headers"] = Value::Object(headers);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let mapping = json!({ "id": id, "request": request, "response": response, "uuid": id });
        let file_id: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(5)
            .map(char::from)
            .collect();
        let name = format!("mapping-{}-{file_id}.json", slug(req.path()));
        let dir = self.mappings.clone();
        let url = req.url.clone();
        let task = move || {
            let write = || -> std::io::Result<()> {
                let path = paths::inside(&dir, &name, "mappings").map_err(std::io::Error::other)?;
                std::fs::create_dir_all(&dir)?;
                let text = serde_json::to_vec_pretty(&mapping).unwrap_or_default();
                decoy_core::stub_files::create_exclusively(&path, text)
            };
            match write() {
                Ok(()) => tracing::info!("recorded a mapping for {url}"),
                Err(e) => {
                    tracing::warn!("--record-mappings: cannot write the mapping for {url}: {e}")
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(task);
            }
            Err(_) => task(),
        }
    }

    fn request_pattern(&self, req: &RequestSnapshot) -> Value {
        let mut pattern = json!({ "url": req.url, "method": req.method });
        let mut headers = Map::new();
        for name in &self.match_headers {
            if let Some(v) = req.header(name) {
                headers.insert(name.clone(), json!({ "equalTo": v }));
            }
        }
        if !headers.is_empty() {
            pattern["headers"] = Value::Object(headers);
        }
        if !req.body.is_empty() {
            let text = req.body_text();
            let ct = req
                .header("content-type")
                .map(|c| c.to_ascii_lowercase())
                .unwrap_or_default();
            let body = if ct.contains("json")
                || serde_json::from_slice::<Value>(&req.body)
                    .is_ok_and(|v| v.is_object() || v.is_array())
            {
                json!({ "equalToJson": text, "ignoreArrayOrder": true, "ignoreExtraElements": true })
            } else if ct.contains("xml") {
                json!({ "equalToXml": text })
            } else {
                json!({ "equalTo": text })
            };
            pattern["bodyPatterns"] = json!([body]);
        }
        pattern
    }
}

/// `/api/items` → `api-items`, `/` → `(root)`, as WireMock's recorder names files.
fn slug(path: &str) -> String {
    let parts: Vec<String> = path
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .collect();
    let mut s = parts.join("-");
    s.truncate(150);
    if s.is_empty() { "(root)".into() } else { s }
}

fn extension(content_type: &str, path: &str) -> String {
    let ct = content_type.to_ascii_lowercase();
    let by_type = if ct.contains("json") {
        Some("json")
    } else if ct.contains("xml") {
        Some("xml")
    } else if ct.contains("html") {
        Some("html")
    } else if ct.starts_with("text/") {
        Some("txt")
    } else if let Some(sub) = ct.strip_prefix("image/") {
        // The upstream's Content-Type ends up in a file name: letters and digits only.
        let sub: String = sub
            .split([';', '+'])
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(10)
            .collect();
        return if sub.is_empty() { "bin".into() } else { sub };
    } else {
        None
    };
    if let Some(e) = by_type {
        return e.to_owned();
    }
    let last = path.rsplit('/').next().unwrap_or("");
    match last.rsplit_once('.') {
        Some((_, e))
            if !e.is_empty() && e.len() <= 5 && e.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            e.to_ascii_lowercase()
        }
        _ => "txt".into(),
    }
}

/// `content-type` → `Content-Type`: the guess for a name whose spelling is not known.
fn title_case(name: &str) -> String {
    decoy_spec::request::title_case_header(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_wiremock() {
        assert_eq!(slug("/"), "(root)");
        assert_eq!(slug("/api/items"), "api-items");
        assert_eq!(extension("application/json; charset=utf-8", "/x"), "json");
        assert_eq!(extension("", "/a/b.csv"), "csv");
        assert_eq!(extension("", "/a/b"), "txt");
        assert_eq!(title_case("x-up"), "X-Up");
        assert_eq!(extension("image/png; q=1", "/x"), "png");
        assert_eq!(extension("image/../../../tmp/evil", "/x"), "tmpevil");
        assert_eq!(extension("image/;", "/x"), "bin");
    }
}
