//! Record and playback: turning proxied traffic into stub mappings.
//!
//! `POST /__admin/recordings/start` adds one proxy stub (priority 1, so every request
//! the filters let through reaches the real service) and remembers when it started;
//! requests then flow through the ordinary proxy path and land in the journal with
//! the real service's answer. `stop` removes the proxy stub and turns the journal's
//! proxied events since the start into stubs; `snapshot` does the same with every
//! proxied event in the journal, without a recording. Stubs are written as files into
//! `mappings/` (bodies into `__files/`) and adopted by the store as file stubs, so the
//! watcher sees files it already knows and does not load them twice.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use decoy_core::journal::ServeEvent;
use decoy_core::mapping::load;
use decoy_core::paths;
use decoy_core::store::Store;
use decoy_core::stub_files::StubFiles;
use decoy_matching::request::RequestPattern;

/// The state of the recorder, kept by the admin API.
#[derive(Debug, Default)]
pub struct Recorder {
    state: Mutex<RecorderState>,
}

#[derive(Debug, Default)]
enum RecorderState {
    #[default]
    NeverStarted,
    Recording(Recording),
    Stopped,
}

#[derive(Debug)]
struct Recording {
    spec: Spec,
    started: SystemTime,
    /// The proxy stub `start` added (none without `targetBaseUrl`).
    proxy_stub_id: Option<String>,
}

/// A recording or snapshot request, as WireMock's `RecordSpec`.
#[derive(Debug)]
pub struct Spec {
    target_base_url: Option<String>,
    /// The raw filter request pattern (also the proxy stub's request).
    filter_json: Option<Value>,
    filter: Option<RequestPattern>,
    ids: Option<Vec<String>>,
    allow_non_proxied: bool,
    /// Header name → case-insensitive comparison.
    capture_headers: Vec<(String, bool)>,
    text_threshold: Option<u64>,
    binary_threshold: Option<u64>,
    persist: bool,
    repeats_as_scenarios: bool,
    ids_only: bool,
}

/// A refused recording call: the HTTP status and the reason.
pub type Refusal = (u16, String);

impl Spec {
    pub fn parse(v: &Value) -> Result<Spec, Refusal> {
        let bad = |m: String| (422, m);
        let target_base_url = v
            .get("targetBaseUrl")
            .map(|t| t.as_str().map(|s| s.trim_end_matches('/').to_owned()))
            .map(|t| t.ok_or_else(|| bad("targetBaseUrl must be a string".into())))
            .transpose()?;
        let mut filter_json = None;
        let mut filter = None;
        let mut ids = None;
        let mut allow_non_proxied = false;
        if let Some(f) = v.get("filters") {
            let Some(obj) = f.as_object() else {
                return Err(bad("filters must be an object".into()));
            };
            let mut pattern = obj.clone();
            if let Some(list) = pattern.remove("ids") {
                let list = list
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .ok_or_else(|| bad("filters.ids must be a list of request ids".into()))?;
                ids = Some(list);
            }
            if let Some(a) = pattern.remove("allowNonProxied") {
                allow_non_proxied = a.as_bool().unwrap_or(false);
            }
            if !pattern.is_empty() {
                let pv = Value::Object(pattern);
                filter = Some(
                    RequestPattern::parse(&pv, "filters", &mut Vec::new())
                        .map_err(|e| bad(e.to_string()))?,
                );
                filter_json = Some(pv);
            }
        }
        let mut capture_headers = Vec::new();
        if let Some(c) = v.get("captureHeaders") {
            let obj = c
                .as_object()
                .ok_or_else(|| bad("captureHeaders must be an object".into()))?;
            for (name, opts) in obj {
                let ci = opts
                    .get("caseInsensitive")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                capture_headers.push((name.clone(), ci));
            }
        }
        let threshold = |key: &str| -> Result<Option<u64>, Refusal> {
            match v.get("extractBodyCriteria").and_then(|c| c.get(key)) {
                None | Some(Value::Null) => Ok(None),
                Some(t) => size(t).map(Some).ok_or_else(|| {
                    bad(format!(
                        "extractBodyCriteria.{key}: expected a size such as 2048 or \"10 kb\""
                    ))
                }),
            }
        };
        let output = v
            .get("outputFormat")
            .and_then(Value::as_str)
            .unwrap_or("FULL");
        Ok(Spec {
            target_base_url,
            filter_json,
            filter,
            ids,
            allow_non_proxied,
            capture_headers,
            text_threshold: threshold("textSizeThreshold")?,
            binary_threshold: threshold("binarySizeThreshold")?,
            persist: v.get("persist").and_then(Value::as_bool).unwrap_or(true),
            repeats_as_scenarios: v
                .get("repeatsAsScenarios")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            ids_only: output.eq_ignore_ascii_case("IDS"),
        })
    }

    fn wants(&self, e: &ServeEvent) -> bool {
        (e.proxied || self.allow_non_proxied)
            && self.filter.as_ref().is_none_or(|f| f.matches(&e.request))
            && self
                .ids
                .as_ref()
                .is_none_or(|ids| ids.iter().any(|id| *id == e.id.to_string()))
    }
}

use decoy_core::recording::parse_size as size;

impl Recorder {
    /// WireMock's names: `NeverStarted`, `Recording`, `Stopped`.
    pub fn status(&self) -> &'static str {
        match &*self.lock() {
            RecorderState::NeverStarted => "NeverStarted",
            RecorderState::Recording(_) => "Recording",
            RecorderState::Stopped => "Stopped",
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecorderState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts recording through a proxy stub added to `store`. As in WireMock, a
    /// start while recording changes nothing, and a start without `targetBaseUrl`
    /// records without a proxy stub (what the journal gets from existing proxy stubs).
    pub fn start(&self, store: &Store, spec: Spec) -> Result<(), Refusal> {
        let mut state = self.lock();
        if matches!(*state, RecorderState::Recording(_)) {
            return Ok(());
        }
        let Some(target) = spec.target_base_url.clone().filter(|t| !t.is_empty()) else {
            *state = RecorderState::Recording(Recording {
                spec,
                started: SystemTime::now(),
                proxy_stub_id: None,
            });
            return Ok(());
        };
        let id = uuid::Uuid::new_v4().to_string();
        let request = spec.filter_json.clone().unwrap_or_else(|| json!({}));
        let stub = json!({
            "id": id,
            "name": "decoy recording proxy",
            "priority": 1,
            "request": request,
            "response": { "proxyBaseUrl": target },
        });
        let mapping =
            decoy_core::mapping::Mapping::parse(&stub, store.context(), None, &mut Vec::new())
                .map_err(|errs| {
                    (
                        422,
                        errs.iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; "),
                    )
                })?;
        store.upsert(mapping).map_err(|e| (503, e.to_string()))?;
        *state = RecorderState::Recording(Recording {
            spec,
            started: SystemTime::now(),
            proxy_stub_id: Some(id),
        });
        Ok(())
    }

    /// Stops recording and turns what was recorded into stubs.
    pub fn stop(&self, store: &Store, events: &[Arc<ServeEvent>]) -> Result<Value, Refusal> {
        let rec = {
            let mut state = self.lock();
            match std::mem::replace(&mut *state, RecorderState::Stopped) {
                RecorderState::Recording(rec) => rec,
                other => {
                    *state = other;
                    return Err((400, "Not currently recording.".into()));
                }
            }
        };
        if let Some(id) = &rec.proxy_stub_id
            && let Err(e) = store.remove(id)
        {
            tracing::warn!("recording: {e}");
        }
        let since: Vec<Arc<ServeEvent>> = events
            .iter()
            .filter(|e| e.logged_at >= rec.started)
            .cloned()
            .collect();
        make_stubs(store, &rec.spec, &since)
    }
}

/// Turns the wanted `events` (newest first, as the journal lists them) into stubs,
/// installs them, and returns WireMock's `{"mappings": [...]}` (or `{"ids": [...]}`).
pub fn make_stubs(
    store: &Store,
    spec: &Spec,
    events: &[Arc<ServeEvent>],
) -> Result<Value, Refusal> {
    let wanted: Vec<&Arc<ServeEvent>> = events.iter().rev().filter(|e| spec.wants(e)).collect();
    // Group identical requests, keeping first-seen order.
    let mut groups: Vec<(Value, Vec<&ServeEvent>)> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for e in wanted {
        let request = request_pattern(spec, e);
        let key = request.to_string();
        match by_key.get(&key) {
            Some(&i) => groups[i].1.push(e),
            None => {
                by_key.insert(key, groups.len());
                groups.push((request, vec![e]));
            }
        }
    }
    let mut stubs: Vec<(Value, Option<BodyFile>)> = Vec::new();
    let mut scenario_count = 0;
    for (request, events) in groups {
        let repeats = spec.repeats_as_scenarios && events.len() > 1;
        let events = if repeats {
            events
        } else {
            events[..1].to_vec()
        };
        let base_name = decoy_core::filenames::recorded_stub_name(events[0].request.path());
        let scenario = if repeats {
            scenario_count += 1;
            Some(format!(
                "scenario-{scenario_count}-{}",
                path_parts(events[0].request.path())
            ))
        } else {
            None
        };
        let n = events.len();
        for (i, e) in events.into_iter().enumerate() {
            let id = uuid::Uuid::new_v4().to_string();
            let mut stub = Map::new();
            stub.insert("id".into(), json!(id));
            stub.insert("name".into(), json!(base_name));
            stub.insert("request".into(), request.clone());
            let (response, file) = response_def(spec, e, &Value::Object(stub.clone()), &id);
            stub.insert("response".into(), response);
            if spec.persist {
                stub.insert("persistent".into(), json!(true));
            }
            if let Some(s) = &scenario {
                stub.insert("scenarioName".into(), json!(s));
                let state = |k: usize| {
                    if k == 1 {
                        "Started".to_owned()
                    } else {
                        format!("{s}-{k}")
                    }
                };
                stub.insert("requiredScenarioState".into(), json!(state(i + 1)));
                if i + 1 < n {
                    stub.insert("newScenarioState".into(), json!(state(i + 2)));
                }
            }
            stubs.push((Value::Object(stub), file));
        }
    }

    let mut mappings_out = Vec::new();
    let mut in_memory: Vec<&Value> = Vec::new();
    if spec.persist {
        let root = store.root();
        let mut written = Vec::new();
        let io = |e: std::io::Error| (500, format!("cannot write the recorded stubs: {e}"));
        std::fs::create_dir_all(load::mappings_dir(root)).map_err(io)?;
        // Names are built from the recorded URLs: each must stay in its folder.
        let outside = |why: String| (500, format!("cannot write the recorded stubs: {why}"));
        // Each stub's files, or `None` for one that stays in memory.
        let write =
            |stub: &Value, file: &Option<BodyFile>| -> Result<Option<PathBuf>, (u16, String)> {
                if let Some((name, bytes)) = file {
                    let dir = load::files_dir(root);
                    std::fs::create_dir_all(&dir).map_err(io)?;
                    let path = paths::inside(&dir, name, "__files").map_err(outside)?;
                    // A fresh id in the name: never a file already there.
                    decoy_core::stub_files::create_exclusively(&path, bytes).map_err(io)?;
                }
                let id: Arc<str> = Arc::from(stub["id"].as_str().unwrap_or_default());
                let name = store.filenames().file_name(stub, &id).map_err(outside)?;
                if !load::is_mapping_file_name(Path::new(&name)) {
                    // A --filename-template without `.json`: the file is no mapping file
                    // (it would be dropped at the next rescan), so the stub stays in
                    // memory, and, being persistent, gets its file when it is added.
                    return Ok(None);
                }
                // A name taken already (two stubs of a scenario named alike, a file that
                // is no stub) gets a number rather than replacing that file.
                let text = serde_json::to_string_pretty(stub).unwrap_or_default() + "\n";
                StubFiles::new(root)
                    .create(&id, &name, &text)
                    .map(Some)
                    .map_err(|e| (500, format!("cannot write the recorded stubs: {e}")))
            };
        let mut failed = None;
        for (stub, file) in &stubs {
            match write(stub, file) {
                Ok(Some(rel)) => written.push(rel),
                Ok(None) => in_memory.push(stub),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // What was written is served, even when a later stub failed.
        store.adopt_files(&written);
        if let Some(e) = failed {
            return Err(e);
        }
    } else {
        in_memory.extend(stubs.iter().map(|(stub, _)| stub));
    }
    for stub in in_memory {
        match decoy_core::mapping::Mapping::parse(stub, store.context(), None, &mut Vec::new()) {
            Ok(m) => match store.upsert(m) {
                Ok(done) => {
                    if let Some(e) = done.not_saved {
                        tracing::warn!("recording: {e}");
                    }
                }
                Err(e) => tracing::warn!("recording: {e}"),
            },
            Err(errs) => tracing::warn!(
                "a recorded stub was not valid: {}",
                errs.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    }
    // Newest first, with `uuid`, as WireMock lists them.
    for (mut stub, _) in stubs.into_iter().rev() {
        let id = stub["id"].clone();
        if let Value::Object(obj) = &mut stub {
            obj.insert("uuid".into(), id);
        }
        mappings_out.push(stub);
    }
    if spec.ids_only {
        let ids: Vec<Value> = mappings_out.iter().map(|m| m["id"].clone()).collect();
        return Ok(json!({ "ids": ids }));
    }
    Ok(json!({ "mappings": mappings_out }))
}

/// Whether `e` is a gRPC call: its request and answer are proto3 JSON, recorded in
/// the gRPC stub format (docs/grpc.md).
fn is_grpc(e: &ServeEvent) -> bool {
    e.request
        .header("content-type")
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

fn request_pattern(spec: &Spec, e: &ServeEvent) -> Value {
    let req = &e.request;
    let mut out = Map::new();
    if is_grpc(e) {
        // The method's path, and the request message (for a client stream, the array
        // of its messages) exactly: proto3 JSON prints each message one way.
        out.insert("urlPath".into(), json!(req.path()));
        out.insert("method".into(), json!("POST"));
        if let Some(h) = captured_headers(spec, req) {
            out.insert("headers".into(), h);
        }
        if !req.body.is_empty() {
            out.insert(
                "bodyPatterns".into(),
                json!([{ "equalToJson": req.body_text() }]),
            );
        }
        return Value::Object(out);
    }
    // As WireMock 3 records: the exact `url` when there is no query, else `urlPath`
    // and each query parameter with exactly the values it had, in order.
    if req.raw_query().is_none() {
        out.insert("url".into(), json!(req.url));
        out.insert("method".into(), json!(req.method));
    } else {
        out.insert("urlPath".into(), json!(req.path()));
        out.insert("method".into(), json!(req.method));
        let mut query = Map::new();
        for (k, v) in req.query() {
            let entry = query
                .entry(k.clone())
                .or_insert_with(|| json!({ "hasExactly": [] }));
            if let Some(Value::Array(values)) = entry.get_mut("hasExactly") {
                values.push(json!({ "equalTo": v }));
            }
        }
        out.insert("queryParameters".into(), Value::Object(query));
    }
    if let Some(h) = captured_headers(spec, req) {
        out.insert("headers".into(), h);
    }
    if !req.body.is_empty() {
        let ct = req.header("content-type").unwrap_or_default();
        let pattern = decoy_core::recording::body_pattern(&req.body, &ct);
        out.insert("bodyPatterns".into(), json!([pattern]));
    }
    Value::Object(out)
}

/// `captureHeaders` the request carried, as `equalTo` patterns.
fn captured_headers(spec: &Spec, req: &decoy_spec::request::RequestSnapshot) -> Option<Value> {
    let mut headers = Map::new();
    for (name, ci) in &spec.capture_headers {
        if let Some(v) = req.header(name) {
            let mut p = Map::new();
            p.insert("equalTo".into(), json!(v));
            if *ci {
                p.insert("caseInsensitive".into(), json!(true));
            }
            headers.insert(name.clone(), Value::Object(p));
        }
    }
    (!headers.is_empty()).then_some(Value::Object(headers))
}

/// A body file to write into `__files`: its name and content.
type BodyFile = (String, Vec<u8>);

/// The response part of a recorded stub, and the body file to write, if any.
/// `stub` is the stub so far (id, name, request), which the body file is named from.
fn response_def(spec: &Spec, e: &ServeEvent, stub: &Value, id: &str) -> (Value, Option<BodyFile>) {
    let mut out = Map::new();
    out.insert("status".into(), json!(e.status));
    let body = e.response_body();
    let mut file = None;
    let grpc_json = if is_grpc(e) {
        serde_json::from_slice::<Value>(body).ok()
    } else {
        None
    };
    if let Some(v) = grpc_json {
        // The answer's messages (an array for a server stream), as the loader reads
        // them back.
        out.insert("jsonBody".into(), v);
    } else if !body.is_empty() {
        let ct = header(e, "content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let text = std::str::from_utf8(body)
            .ok()
            .filter(|_| !is_binary_type(&ct));
        // As WireMock: a body goes into __files only when `extractBodyCriteria` says
        // so (larger than its threshold); without criteria every body stays inline.
        let threshold = match text {
            Some(_) => spec.text_threshold,
            None => spec.binary_threshold,
        };
        let extract = threshold.is_some_and(|t| body.len() as u64 > t);
        if extract {
            // WireMock names body files with its default template whatever
            // --filename-template says: `<name>-<id>.<extension>`.
            let ext = extension(&ct, text.is_some());
            let name = decoy_core::filenames::FilenameMaker::for_body_file(ext)
                .file_name(stub, id)
                .unwrap_or_else(|_| format!("{id}.{ext}"));
            out.insert("bodyFileName".into(), json!(name));
            file = Some((name, body.to_vec()));
        } else if let Some(t) = text {
            out.insert("body".into(), json!(t));
        } else {
            out.insert(
                "base64Body".into(),
                json!(base64::engine::general_purpose::STANDARD.encode(body)),
            );
        }
    }
    let mut headers = Map::new();
    let case = e.response_case();
    for (name, value) in e.response_headers().iter() {
        if NOT_RECORDED.contains(&name.as_str()) {
            continue;
        }
        let v = json!(String::from_utf8_lossy(value.as_bytes()));
        // As the real service spelled it, when that is known.
        let name = match &case {
            Some(case) => case.name(name.as_str()),
            None => name.as_str(),
        };
        match headers.get_mut(name) {
            None => {
                headers.insert(name.to_owned(), v);
            }
            Some(Value::Array(list)) => list.push(v),
            Some(existing) => {
                let first = existing.take();
                *existing = json!([first, v]);
            }
        }
    }
    if !headers.is_empty() {
        out.insert("headers".into(), Value::Object(headers));
    }
    (Value::Object(out), file)
}

/// Response headers a recorded stub does not replay: decoy's own `matched-stub-*`,
/// and framing that the server sets itself. (`Date` is kept, as WireMock keeps it.)
const NOT_RECORDED: &[&str] = &[
    "matched-stub-id",
    "matched-stub-name",
    "content-length",
    "transfer-encoding",
    "connection",
];

fn header(e: &ServeEvent, name: &str) -> Option<String> {
    e.response_headers()
        .iter()
        .find(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
        .map(|(_, v)| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn is_binary_type(ct: &str) -> bool {
    [
        "image/",
        "audio/",
        "video/",
        "application/octet-stream",
        "application/pdf",
        "application/zip",
        "application/gzip",
    ]
    .iter()
    .any(|p| ct.starts_with(p))
}

fn extension(ct: &str, text: bool) -> &'static str {
    if ct.contains("json") {
        "json"
    } else if ct.contains("xml") {
        "xml"
    } else if ct.contains("html") {
        "html"
    } else if text {
        "txt"
    } else {
        "bin"
    }
}

/// The path's segments, percent-decoded, joined with `-` (`/api/users/7` →
/// `api-users-7`): how WireMock's `Urls.urlToPathParts` names a recording's scenarios.
fn path_parts(raw_path: &str) -> String {
    percent_encoding::percent_decode_str(raw_path)
        .decode_utf8_lossy()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_numbers_and_units() {
        assert_eq!(size(&json!(2048)), Some(2048));
        assert_eq!(size(&json!("10 kb")), Some(10240));
        assert_eq!(size(&json!("1mb")), Some(1 << 20));
        assert_eq!(size(&json!("lots")), None);
    }

    #[test]
    fn scenarios_are_named_from_the_decoded_path_segments() {
        assert_eq!(path_parts("/api/Users/7"), "api-Users-7");
        assert_eq!(path_parts("//a%20b/"), "a b");
        assert_eq!(path_parts("/"), "");
    }
}
