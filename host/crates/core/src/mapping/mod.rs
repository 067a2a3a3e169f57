//! Mappings (WireMock "stubs"): their parsed, immutable form, and how they are read.
//!
//! A [`Mapping`] is built once from JSON and never changes; everything that changes at
//! run time (scenario states, counters) lives in the engine. The path-tracking JSON
//! readers are `decoy_spec::fields`; `load` reads a root directory.

pub mod load;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value};

use decoy_matching::custom::CustomMatchers;
use decoy_matching::request::RequestPattern;
use decoy_spec::fields::{
    FieldError, FieldResult, Fields, as_array, as_i64, as_object, as_str, as_u64, join, kind,
    warn_unknown,
};
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::{ChunkedDribble, DelayDistribution, Fault, ProxySpec, parse_distribution};

/// WireMock's default priority.
pub const DEFAULT_PRIORITY: i64 = 5;

/// One stub: a request pattern and the response to give.
///
/// The fields are in this order on purpose (`repr(C)` keeps it): answering a request
/// reads `served_headers` and the start of `response`, so they come first, right
/// after the `Arc`'s reference count that the answer also takes: 168 bytes from the
/// start of the allocation, three or four cache lines where they were spread over
/// five or six; then the URL matcher, the start of `request`. With requests spread
/// over 10,000 stubs each answer finds its stub's memory cold, so every line saved
/// counts (`docs/performance.md`).
#[derive(Debug)]
#[repr(C)]
pub struct Mapping {
    /// `response.headers` plus WireMock's `Matched-Stub-Id` / `Matched-Stub-Name`,
    /// built once here so answering a request copies no header.
    pub served_headers: Arc<[(HeaderName, HeaderValue)]>,
    pub response: ResponseDef,
    pub request: RequestPattern,
    pub id: Arc<str>,
    pub name: Option<Arc<str>>,
    pub priority: i64,
    pub scenario: Option<Box<ScenarioSpec>>,
    /// Where it came from, for messages (`None` for mappings made through an API).
    pub source: Option<Source>,
    /// The mapping as it was written, kept for the admin API and `validate`.
    pub json: Box<str>,
    /// `serveEventListeners` (and `postServeActions`) naming WireMock's `webhook`.
    pub webhooks: Option<crate::webhooks::Webhooks>,
}

impl Mapping {
    /// How the stub's answer spells its header names: as `response.headers` writes
    /// them, and WireMock's `Matched-Stub-Id` / `Matched-Stub-Name`. Read from the
    /// written JSON for the admin API (kept out of the mapping: 10,000 stubs stay small).
    pub fn header_case(&self) -> HeaderCase {
        let written: Value = serde_json::from_str(&self.json).unwrap_or(Value::Null);
        written_header_case(&written)
    }
}

/// [`Mapping::header_case`] of a stub's written JSON.
pub fn written_header_case(stub: &Value) -> HeaderCase {
    let mut case = HeaderCase::as_sent();
    let written = stub
        .field("response")
        .and_then(|r| r.field("headers"))
        .and_then(Value::as_object);
    for name in written.into_iter().flat_map(|h| h.keys()) {
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            case.note(name);
        }
    }
    case.note("Matched-Stub-Id");
    case.note("Matched-Stub-Name");
    case
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Relative to the root directory (`mappings/users.json`).
    pub file: PathBuf,
    /// Position in the file (0 for a file holding one stub).
    pub index: usize,
    /// The file is a `{"mappings": [...]}` list (even of one), which WireMock treats as
    /// read-only: `save` does not rewrite it, removing its stubs does not delete it.
    pub in_list: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioSpec {
    pub name: String,
    pub required_state: Option<String>,
    pub new_state: Option<String>,
}

/// The `response` object, with bodies already loaded and headers already validated.
///
/// In this order on purpose (`repr(C)`): what every answer reads first, the rare
/// delay distribution boxed, and `headers` (the answer uses
/// [`Mapping::served_headers`]) last. See [`Mapping`].
#[derive(Debug)]
#[repr(C)]
pub struct ResponseDef {
    pub status: u16,
    pub fault: Option<Fault>,
    pub body: Bytes,
    pub status_message: Option<Arc<str>>,
    /// Forward to a real service instead of answering from the stub.
    pub proxy: Option<Arc<ProxySpec>>,
    pub delay_distribution: Option<Box<DelayDistribution>>,
    pub fixed_delay: Duration,
    pub dribble: Option<ChunkedDribble>,
    /// Plugins that build the response from the request (`transformers`).
    pub transformers: crate::plugins::Transformers,
    /// `headers` as parsed. Building the [`Mapping`] moves them into
    /// [`Mapping::served_headers`] (so a built mapping's are empty): one copy of each
    /// stub's headers instead of two (128 bytes a stub, 1.2 MiB with 10,000).
    pub headers: Box<[(HeaderName, HeaderValue)]>,
}

/// What parsing needs to know besides the JSON.
#[derive(Debug, Clone)]
pub struct ParseContext {
    /// The `__files` directory that `bodyFileName` is resolved in.
    pub files_dir: PathBuf,
    /// The largest file `bodyFileName` may name, in bytes (`--max-body-file-size`).
    pub max_body_file_size: u64,
    /// Where plugin names resolve; `None` refuses mappings that name a plugin.
    pub plugins: Option<Arc<decoy_plugin_host::Plugins>>,
    /// `--global-response-templating`: every stub goes through `response-template`.
    pub global_templating: bool,
}

impl ParseContext {
    /// Where `bodyFileName` is read, and how much of it.
    pub fn body_files(&self) -> BodyFiles<'_> {
        BodyFiles {
            dir: &self.files_dir,
            max_size: self.max_body_file_size,
        }
    }

    /// Plugins from `<root>/plugins` (or `plugins_dir`) and the bundled ones, with
    /// compiled code cached in the user's cache directory.
    pub fn for_root(root: &Path) -> ParseContext {
        ParseContext {
            files_dir: load::files_dir(root),
            max_body_file_size: DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: Some(Arc::new(decoy_plugin_host::Plugins::new(
                Some(root.join("plugins")),
                decoy_plugin_host::Plugins::default_cache_dir(),
            ))),
            global_templating: false,
        }
    }
}

/// The largest body file a stub may name unless `--max-body-file-size` says otherwise
/// (64 MiB, as `--max-pending-webhook-bytes`). A stub holds its body in memory for as
/// long as it is loaded, so one file (a mistaken link, a disk image) must not be able
/// to take the memory every other stub and request needs; past it the stub is
/// rejected with the file's size and the limit.
pub const DEFAULT_MAX_BODY_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// The `__files` directory `bodyFileName` is read from, and the largest file it may
/// name.
#[derive(Debug, Clone, Copy)]
pub struct BodyFiles<'a> {
    pub dir: &'a Path,
    pub max_size: u64,
}

const MAPPING_FIELDS: &[&str] = &[
    "id",
    "uuid",
    "name",
    "priority",
    "request",
    "response",
    "scenarioName",
    "requiredScenarioState",
    "newScenarioState",
    "serveEventListeners",
    "postServeActions",
];
/// Fields WireMock writes that do not change how decoy serves a stub.
const MAPPING_IGNORED: &[&str] = &["persistent", "metadata", "insertionIndex"];
const RESPONSE_FIELDS: &[&str] = &[
    "status",
    "statusMessage",
    "headers",
    "body",
    "jsonBody",
    "base64Body",
    "bodyFileName",
    "fixedDelayMilliseconds",
    "delayDistribution",
    "chunkedDribbleDelay",
    "fault",
    "proxyBaseUrl",
    "proxyUrlPrefixToRemove",
    "additionalProxyRequestHeaders",
    "removeProxyRequestHeaders",
    "transformers",
    "transformerParameters",
];
const RESPONSE_IGNORED: &[&str] = &["fromConfiguredStub"];

impl Mapping {
    /// Compiles one stub. Every problem found is returned (not only the first), so
    /// `decoy validate` can list them all; unknown fields go to `warnings`.
    pub fn parse(
        v: &Value,
        ctx: &ParseContext,
        source: Option<Source>,
        warnings: &mut Vec<FieldError>,
    ) -> Result<Mapping, Vec<FieldError>> {
        Mapping::parse_with_text(v, None, ctx, source, warnings)
    }

    /// As [`Mapping::parse`], keeping `text` (the stub as written) instead of
    /// re-serialising `v`.
    pub fn parse_with_text(
        v: &Value,
        text: Option<&str>,
        ctx: &ParseContext,
        source: Option<Source>,
        warnings: &mut Vec<FieldError>,
    ) -> Result<Mapping, Vec<FieldError>> {
        let obj = as_object(v, "").map_err(|e| vec![e])?;
        warn_unknown(obj, "", MAPPING_FIELDS, MAPPING_IGNORED, warnings);
        let mut errors = Vec::new();

        let id: Option<Arc<str>> = match obj.field("id").or_else(|| obj.field("uuid")) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().into()),
            Some(other) => {
                errors.push(FieldError::new(
                    "id",
                    format!("expected a non-empty string, found {}", kind(other)),
                ));
                None
            }
            None => None,
        };
        let name = match obj.field("name") {
            Some(n) => match as_str(n, "name") {
                Ok(s) => Some(Arc::<str>::from(s)),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
            None => None,
        };
        let priority = match obj.field("priority") {
            Some(p) => as_i64(p, "priority").unwrap_or_else(|e| {
                errors.push(e);
                DEFAULT_PRIORITY
            }),
            None => DEFAULT_PRIORITY,
        };
        let request = match obj.field("request") {
            Some(r) => {
                let matchers = ctx.plugins.as_deref().map(crate::plugins::PluginMatchers);
                let custom = matchers.as_ref().map(|m| m as &dyn CustomMatchers);
                RequestPattern::parse_with(r, "request", warnings, custom)
                    .map_err(|e| errors.push(e))
                    .ok()
            }
            None => {
                errors.push(FieldError::new(
                    "request",
                    "missing; every mapping needs a request pattern",
                ));
                None
            }
        };
        let response = match obj.field("response") {
            Some(r) => parse_response(r, ctx, warnings)
                .map_err(|e| errors.extend(e))
                .ok(),
            None => Some(default_response()),
        };
        let scenario = parse_scenario(obj)
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        let webhooks =
            crate::webhooks::parse(obj, ctx.plugins.as_deref(), ctx.body_files(), warnings)
                .map_err(|e| errors.extend(e))
                .ok()
                .flatten();

        match (request, response, errors.is_empty()) {
            (Some(request), Some(mut response), true) => {
                let id = id.unwrap_or_else(|| derived_id(source.as_ref(), v));
                let mut served = std::mem::take(&mut response.headers).into_vec();
                for (header, value) in [
                    ("matched-stub-id", Some(&id)),
                    ("matched-stub-name", name.as_ref()),
                ] {
                    if let Some(v) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
                        served.push((HeaderName::from_static(header), v));
                    }
                }
                share_one_buffer(&mut served, &mut response.body);
                let served: Arc<[(HeaderName, HeaderValue)]> = Arc::from(served);
                // A template that does not compile is reported now, with its field
                // and position, but the stub stays: WireMock loads it and answers 500
                // when it is hit, and so does the plugin here (a user's root must
                // answer as under WireMock); `decoy validate --strict` fails on it.
                if let Err(errors) = response.transformers.prepare_templates(
                    obj.field("response"),
                    &served,
                    &response.body,
                    ctx.plugins.as_deref(),
                ) {
                    warnings.extend(errors);
                }
                response
                    .transformers
                    .key_answer(response.status, &served, &response.body);

                if let Some(c) = request.custom_matcher() {
                    c.bind(&id, name.as_deref());
                }
                Ok(Mapping {
                    id,
                    name,
                    priority,
                    request,
                    response,
                    scenario: scenario.map(Box::new),
                    source,
                    json: match text {
                        Some(t) => t.into(),
                        None => v.to_string().into_boxed_str(),
                    },
                    served_headers: served,
                    webhooks,
                })
            }
            _ => Err(errors),
        }
    }

    /// Whether the stub says `"persistent": true`: WireMock keeps such a stub's file in
    /// step with it (written on save, deleted when the stub is removed).
    pub fn is_persistent(&self) -> bool {
        serde_json::from_str::<Value>(&self.json)
            .ok()
            .and_then(|v| v.field("persistent").and_then(Value::as_bool))
            .unwrap_or(false)
    }

    /// `users.json [2] (id …, name "get user")`, for messages.
    pub fn label(&self) -> String {
        let mut s = String::new();
        if let Some(src) = &self.source {
            s.push_str(&format!("{} [{}] ", src.file.display(), src.index));
        }
        s.push_str(&format!("(id {}", self.id));
        if let Some(n) = &self.name {
            s.push_str(&format!(", name {n:?}"));
        }
        s.push(')');
        s
    }
}

/// A mapping without an `id` gets one derived from where it was read and what it says,
/// so the id (shown in `Matched-Stub-Id` and metrics) stays the same across restarts
/// and reloads, unlike WireMock's random one.
/// Puts a stub's served header values and its body in one buffer, each a slice of
/// it. Serving the stub clones each of them (into the response and the journal); a
/// clone of a `Bytes` counts a reference in the buffer it shares, so with one buffer
/// a request touches one reference count instead of one per value, and with
/// thousands of stubs each of those is a cache miss (docs/performance.md).
/// A body larger than `SHARED_BODY_MAX` keeps its own buffer (copying it would
/// cost load time and, briefly, twice its memory, for a miss among many).
fn share_one_buffer(headers: &mut [(HeaderName, HeaderValue)], body: &mut Bytes) {
    const SHARED_BODY_MAX: usize = 64 * 1024;
    let with_body = body.len() <= SHARED_BODY_MAX;
    let total = headers.iter().map(|(_, v)| v.len()).sum::<usize>();
    let mut buf = Vec::with_capacity(total + if with_body { body.len() } else { 0 });
    for (_, v) in headers.iter() {
        buf.extend_from_slice(v.as_bytes());
    }
    let body_at = buf.len();
    if with_body {
        buf.extend_from_slice(body);
    }
    let shared = Bytes::from(buf);
    let mut at = 0;
    for (_, v) in headers.iter_mut() {
        let len = v.len();
        if let Ok(mut slice) = HeaderValue::from_maybe_shared(shared.slice(at..at + len)) {
            slice.set_sensitive(v.is_sensitive());
            *v = slice;
        }
        at += len;
    }
    if with_body {
        *body = shared.slice(body_at..);
    }
}

fn derived_id(source: Option<&Source>, v: &Value) -> Arc<str> {
    let key = match source {
        Some(s) => format!("{}#{}", s.file.display(), s.index),
        None => v.to_string(),
    };
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, key.as_bytes())
        .to_string()
        .into()
}

fn default_response() -> ResponseDef {
    ResponseDef {
        status: 200,
        status_message: None,
        headers: Box::default(),
        body: Bytes::new(),
        fixed_delay: Duration::ZERO,
        delay_distribution: None,
        dribble: None,
        fault: None,
        proxy: None,
        transformers: Default::default(),
    }
}

fn parse_scenario(obj: &Map<String, Value>) -> FieldResult<Option<ScenarioSpec>> {
    let get = |k: &str| -> FieldResult<Option<String>> {
        obj.field(k)
            .map(|v| as_str(v, k).map(str::to_owned))
            .transpose()
    };
    let name = get("scenarioName")?;
    let required_state = get("requiredScenarioState")?;
    let new_state = get("newScenarioState")?;
    match name {
        Some(name) => Ok(Some(ScenarioSpec {
            name,
            required_state,
            new_state,
        })),
        None if required_state.is_some() || new_state.is_some() => Err(FieldError::new(
            "scenarioName",
            "missing: requiredScenarioState and newScenarioState need a scenarioName",
        )),
        None => Ok(None),
    }
}

fn parse_response(
    v: &Value,
    ctx: &ParseContext,
    warnings: &mut Vec<FieldError>,
) -> Result<ResponseDef, Vec<FieldError>> {
    let obj = as_object(v, "response").map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    warn_unknown(obj, "response", RESPONSE_FIELDS, RESPONSE_IGNORED, warnings);
    let mut check = |r: FieldResult<()>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    let mut out = default_response();

    check((|| {
        if let Some(s) = obj.field("status") {
            let n = as_u64(s, "response.status")?;
            out.status = u16::try_from(n)
                .ok()
                .filter(|n| (100..=999).contains(n))
                .ok_or_else(|| {
                    FieldError::new(
                        "response.status",
                        format!("{n} is not an HTTP status (100-999)"),
                    )
                })?;
        }
        if let Some(m) = obj.field("statusMessage") {
            out.status_message = Some(as_str(m, "response.statusMessage")?.into());
        }
        Ok(())
    })());
    check(parse_headers(obj, &mut out));
    check(parse_body(obj, ctx, &mut out));
    check(parse_delays(obj, &mut out));
    check(parse_proxy(obj, &mut out));
    check((|| {
        if let Some(f) = obj.field("fault") {
            let name = as_str(f, "response.fault")?;
            out.fault = Some(Fault::from_name(name).ok_or_else(|| {
                FieldError::new(
                    "response.fault",
                    format!(
                        "unknown fault {name:?}; expected one of {}",
                        Fault::NAMES.join(", ")
                    ),
                )
            })?);
        }
        Ok(())
    })());
    match crate::plugins::Transformers::parse(
        obj,
        ctx.plugins.as_deref(),
        ctx.global_templating,
        warnings,
    ) {
        Ok(t) => out.transformers = t,
        Err(e) => errors.extend(e),
    }
    if let Some(missing) = missing_body_file(obj, ctx) {
        warnings.push(FieldError::new(
            "response.bodyFileName",
            format!("body file {missing:?} not found: __files/{missing} does not exist; the stub is loaded and answers 500, as in WireMock"),
        ));
        load::serve_missing_body_file(&mut out, &missing);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// `proxyBaseUrl` and its companions: forward the request to a real service.
fn parse_proxy(obj: &Map<String, Value>, out: &mut ResponseDef) -> FieldResult<()> {
    let Some(base) = obj.field("proxyBaseUrl") else {
        for key in [
            "proxyUrlPrefixToRemove",
            "additionalProxyRequestHeaders",
            "removeProxyRequestHeaders",
        ] {
            if obj.has_field(key) {
                return Err(FieldError::new(
                    join("response", key),
                    "only has an effect with proxyBaseUrl, which is missing",
                ));
            }
        }
        return Ok(());
    };
    let path = "response.proxyBaseUrl";
    let base = as_str(base, path)?.trim_end_matches('/');
    let uri: http::Uri = base
        .parse()
        .map_err(|e| FieldError::new(path, format!("{base:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.authority().is_some() => {}
        _ => {
            return Err(FieldError::new(
                path,
                format!("{base:?} must be an absolute http:// or https:// URL"),
            ));
        }
    }
    let prefix = obj
        .field("proxyUrlPrefixToRemove")
        .map(|v| as_str(v, "response.proxyUrlPrefixToRemove").map(str::to_owned))
        .transpose()?;
    let mut add = Vec::new();
    if let Some(h) = obj.field("additionalProxyRequestHeaders") {
        let hpath = "response.additionalProxyRequestHeaders";
        for (k, v) in as_object(h, hpath)? {
            let at = join(hpath, k);
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| FieldError::new(&at, "is not a valid header name"))?;
            let value = HeaderValue::from_str(as_str(v, &at)?).map_err(|_| {
                FieldError::new(&at, "contains characters not allowed in a header value")
            })?;
            add.push((name, value));
        }
    }
    let mut remove = Vec::new();
    if let Some(list) = obj.field("removeProxyRequestHeaders") {
        let rpath = "response.removeProxyRequestHeaders";
        for (i, v) in as_array(list, rpath)?.iter().enumerate() {
            let at = format!("{rpath}[{i}]");
            remove.push(
                HeaderName::from_bytes(as_str(v, &at)?.as_bytes())
                    .map_err(|_| FieldError::new(&at, "is not a valid header name"))?,
            );
        }
    }
    out.proxy = Some(Arc::new(ProxySpec {
        base_url: base.to_owned(),
        prefix_to_remove: prefix,
        add_headers: add,
        remove_headers: remove,
    }));
    Ok(())
}

fn parse_headers(obj: &Map<String, Value>, out: &mut ResponseDef) -> FieldResult<()> {
    let Some(h) = obj.field("headers") else {
        return Ok(());
    };
    let mut list = Vec::new();
    for (name, value) in as_object(h, "response.headers")? {
        let path = join("response.headers", name);
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| FieldError::new(&path, "not a valid HTTP header name"))?;
        let values: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for (i, v) in values.into_iter().enumerate() {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(FieldError::new(
                        &path,
                        format!(
                            "expected a string or an array of strings, found {}",
                            kind(other)
                        ),
                    ));
                }
            };
            let hv = HeaderValue::from_str(&text).map_err(|_| {
                FieldError::new(
                    format!("{path}[{i}]"),
                    "contains characters not allowed in a header value",
                )
            })?;
            list.push((header.clone(), hv));
        }
    }
    out.headers = list.into_boxed_slice();
    Ok(())
}

/// A `bodyFileName` inside `__files` that does not exist (WireMock loads such a stub
/// and fails when it is hit; a name leaving `__files` stays an error).
fn missing_body_file(obj: &Map<String, Value>, ctx: &ParseContext) -> Option<String> {
    let name = obj.field("bodyFileName")?.as_str()?;
    let only_body = ["body", "jsonBody", "base64Body"]
        .iter()
        .all(|k| obj.field(k).is_none_or(Value::is_null));
    let missing = resolve_body_file(&ctx.files_dir, name).is_err()
        && !ctx.files_dir.join(name).exists()
        && only_body
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    missing.then(|| name.to_owned())
}

fn parse_body(
    obj: &Map<String, Value>,
    ctx: &ParseContext,
    out: &mut ResponseDef,
) -> FieldResult<()> {
    if missing_body_file(obj, ctx).is_some() {
        return Ok(());
    }
    let keys = ["body", "jsonBody", "base64Body", "bodyFileName"];
    if let Some(body) = parse_body_field(obj, ctx.body_files(), &keys)? {
        out.body = body;
    }
    Ok(())
}

/// The body of a `response` object (HTTP or MQ), from whichever one of `keys` it
/// gives: `body` (a string, or any JSON value written as JSON, as WireMock does),
/// `text` (a string), `jsonBody`, `base64Body` or `bodyFileName` (read from
/// `files.dir`, never outside it, a regular file of at most `files.max_size` bytes).
/// More than one is an error; none is `None`.
pub fn parse_body_field(
    obj: &Map<String, Value>,
    files: BodyFiles<'_>,
    keys: &[&str],
) -> FieldResult<Option<Bytes>> {
    let given: Vec<(&str, &Value)> = keys
        .iter()
        .filter_map(|&k| Some((k, obj.field(k).filter(|v| !v.is_null())?)))
        .collect();
    if given.len() > 1 {
        let names: Vec<&str> = given.iter().map(|(k, _)| *k).collect();
        return Err(FieldError::new(
            "response",
            format!(
                "only one body field may be given, found {}",
                names.join(" and ")
            ),
        ));
    }
    let Some(&(key, value)) = given.first() else {
        return Ok(None);
    };
    let path = join("response", key);
    Ok(Some(match key {
        "body" => Bytes::from(match value {
            Value::String(s) => s.clone(),
            // WireMock accepts a JSON value in `body` and writes it as JSON.
            other => other.to_string(),
        }),
        "jsonBody" => Bytes::from(value.to_string()),
        "base64Body" => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(as_str(value, &path)?.trim())
                .map_err(|e| FieldError::new(&path, format!("not valid base64: {e}")))?,
        ),
        "bodyFileName" => {
            let name = as_str(value, &path)?;
            let file = resolve_body_file(files.dir, name).map_err(|r| FieldError::new(&path, r))?;
            let body = crate::files::read_limited(&file, files.max_size).map_err(|e| {
                let hint = match e {
                    crate::files::FileError::TooLarge { .. } => {
                        "; a stub keeps its body in memory: raise --max-body-file-size to load it"
                    }
                    _ => "",
                };
                FieldError::new(
                    &path,
                    format!("cannot read body file {}: {e}{hint}", file.display()),
                )
            })?;
            Bytes::from(body)
        }
        _ => Bytes::from(as_str(value, &path)?.to_owned()),
    }))
}

/// Resolves `name` inside `files_dir`, refusing anything that would leave it.
pub fn resolve_body_file(files_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let rel = Path::new(name);
    let mut depth = 0usize;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => {
                return Err(format!(
                    "{name:?} is outside __files; bodyFileName must be a relative path inside __files"
                ));
            }
        }
    }
    let full = files_dir.join(rel);
    // A folder or a FIFO exists: reading it says what it is.
    if !full.exists() {
        return Err(format!(
            "body file {name:?} not found: __files/{name} does not exist"
        ));
    }
    // A symlink inside __files may still point outside it.
    let (Ok(canon), Ok(root)) = (full.canonicalize(), files_dir.canonicalize()) else {
        return Err(format!("cannot resolve body file {name:?}"));
    };
    if !canon.starts_with(&root) {
        return Err(format!(
            "{name:?} resolves outside __files (through a link)"
        ));
    }
    Ok(full)
}

fn parse_delays(obj: &Map<String, Value>, out: &mut ResponseDef) -> FieldResult<()> {
    if let Some(ms) = obj.field("fixedDelayMilliseconds") {
        out.fixed_delay = Duration::from_millis(as_u64(ms, "response.fixedDelayMilliseconds")?);
    }
    if let Some(d) = obj.field("delayDistribution") {
        out.delay_distribution = Some(Box::new(parse_distribution(
            d,
            "response.delayDistribution",
        )?));
    }
    if let Some(d) = obj.field("chunkedDribbleDelay") {
        let path = "response.chunkedDribbleDelay";
        let o = as_object(d, path)?;
        let get = |k: &str| {
            o.field(k)
                .ok_or_else(|| FieldError::new(path, format!("missing \"{k}\"")))
                .and_then(|v| as_u64(v, &join(path, k)))
        };
        let chunks = get("numberOfChunks")?;
        if chunks == 0 || chunks > 100_000 {
            return Err(FieldError::new(
                join(path, "numberOfChunks"),
                "must be between 1 and 100000",
            ));
        }
        out.dribble = Some(ChunkedDribble {
            chunks: chunks as u32,
            total: Duration::from_millis(get("totalDuration")?),
        });
    }
    Ok(())
}

/// A file holds one stub, or `{"mappings": [...]}`.
pub fn stubs_in_file(v: &Value) -> FieldResult<Vec<&Value>> {
    match v.field("mappings") {
        Some(list) if v.field("request").is_none() => {
            Ok(as_array(list, "mappings")?.iter().collect())
        }
        _ => Ok(vec![v]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> ParseContext {
        ParseContext {
            files_dir: PathBuf::from("/nonexistent/__files"),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        }
    }

    fn parse(v: Value) -> Result<Mapping, Vec<FieldError>> {
        Mapping::parse(&v, &ctx(), None, &mut Vec::new())
    }

    #[test]
    fn parses_a_typical_stub() {
        let m = parse(json!({
            "name": "get user",
            "priority": 1,
            "request": {"method": "GET", "urlPath": "/users/1"},
            "response": {
                "status": 201, "statusMessage": "Made",
                "headers": {"Content-Type": "application/json", "Set-Cookie": ["a=1", "b=2"]},
                "jsonBody": {"id": 1},
                "fixedDelayMilliseconds": 10
            }
        }))
        .unwrap();
        assert_eq!(m.priority, 1);
        assert_eq!(m.response.status, 201);
        // The three written, then Matched-Stub-Id and Matched-Stub-Name.
        assert_eq!(m.served_headers.len(), 5);
        assert_eq!(&m.response.body[..], br#"{"id":1}"#);
        assert_eq!(m.response.fixed_delay, Duration::from_millis(10));
    }

    #[test]
    fn ids_without_an_id_field_are_stable() {
        let v = json!({"request": {"urlPath": "/a"}});
        let src = Source {
            file: "mappings/a.json".into(),
            index: 0,
            in_list: false,
        };
        let a = Mapping::parse(&v, &ctx(), Some(src.clone()), &mut Vec::new()).unwrap();
        let b = Mapping::parse(&v, &ctx(), Some(src), &mut Vec::new()).unwrap();
        assert_eq!(a.id, b.id);
    }

    #[test]
    fn collects_every_error_in_a_mapping() {
        let errs = parse(json!({
            "priority": "high",
            "request": {"headers": {"A": {"equalsTo": "x"}}},
            "response": {"status": 42, "fault": "BOOM", "body": "a", "jsonBody": {}}
        }))
        .unwrap_err();
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert!(paths.contains(&"priority"), "{paths:?}");
        assert!(paths.contains(&"request.headers.A.equalsTo"), "{paths:?}");
        assert!(paths.contains(&"response.status"), "{paths:?}");
        assert!(paths.contains(&"response.fault"), "{paths:?}");
        assert!(paths.contains(&"response"), "{paths:?}");
    }

    #[test]
    fn body_files_may_not_escape_files_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ok.txt"), "x").unwrap();
        assert!(resolve_body_file(dir.path(), "ok.txt").is_ok());
        assert!(
            resolve_body_file(dir.path(), "../etc/passwd")
                .unwrap_err()
                .contains("outside __files")
        );
        assert!(
            resolve_body_file(dir.path(), "/etc/passwd")
                .unwrap_err()
                .contains("outside __files")
        );
        assert!(
            resolve_body_file(dir.path(), "missing.txt")
                .unwrap_err()
                .contains("not found")
        );
    }
}

#[cfg(test)]
mod size_tests {
    use std::mem::size_of;

    /// A root of 10,000 stubs holds 10,000 of these (and, while loading, briefly two
    /// copies): cold parts (look-around regexes, JSON/XML/date matchers, scenario,
    /// transformer context) are boxed so the common stub does not pay for them.
    /// Before that, a Mapping was 1,024 bytes and RSS with 10,000 stubs 10 MB higher.
    #[test]
    fn a_mapping_stays_small() {
        assert!(
            size_of::<super::Mapping>() <= 640,
            "{}",
            size_of::<super::Mapping>()
        );
        assert!(size_of::<decoy_matching::pattern::StringPattern>() <= 64);
        assert!(size_of::<decoy_matching::regex::Regex>() <= 56);
    }

    /// What answering a matched request reads of its mapping (see [`super::Mapping`])
    /// lies in its first 168 bytes with the `Arc`'s 16-byte header: three or four
    /// cache lines (the allocation is 16-byte aligned); before the fields were ordered
    /// it was spread over five or six.
    #[test]
    fn what_an_answer_reads_comes_first() {
        use super::{Mapping, ResponseDef};
        use std::mem::offset_of;
        let response = offset_of!(Mapping, response);
        let last_read = [
            offset_of!(ResponseDef, status),
            offset_of!(ResponseDef, fault),
            offset_of!(ResponseDef, body),
            offset_of!(ResponseDef, status_message),
            offset_of!(ResponseDef, proxy),
            offset_of!(ResponseDef, delay_distribution),
            offset_of!(ResponseDef, fixed_delay),
            offset_of!(ResponseDef, dribble),
            offset_of!(ResponseDef, transformers),
        ]
        .into_iter()
        .max()
        .unwrap();
        assert_eq!(offset_of!(Mapping, served_headers), 0);
        assert!(response + last_read + 32 <= 168, "{}", response + last_read);
        assert!(offset_of!(ResponseDef, headers) > last_read);
    }
}
