//! Where plugins meet mappings: a `customMatcher` in a request pattern, the
//! `transformers` chain on a response (an HTTP response or a message reply, as the
//! plugin interface has them), and the plugin's view of an HTTP request. The plugin runtime below (`decoy-plugin-host`) knows nothing of HTTP or
//! mappings; this module adapts the two, and [`Transformers::run`] is the one place
//! that decides what a failed chain means, for every transport.

use std::sync::Arc;

use bytes::Bytes;
use decoy_matching::custom::{CustomMatch, CustomMatchers, MatchFailure, MissingMatcher};
use decoy_plugin_host::{AnswerKey, Plugin, PluginFailure, PluginRequest, Plugins, wit};
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_object, as_str, join};
use decoy_spec::plan::ResponsePlan;
use decoy_spec::request::RequestSnapshot;
use http::{HeaderName, HeaderValue};
use serde_json::Value;

/// Resolves `customMatcher`s to plugins' matchers while stubs are parsed.
#[derive(Debug, Clone, Copy)]
pub struct PluginMatchers<'a>(pub &'a Plugins);

impl CustomMatchers for PluginMatchers<'_> {
    /// A name no plugin has is a warning, not an error: WireMock loads a stub whose
    /// matcher it does not have (an extension it was started without) and never
    /// matches it, and so does decoy, until the plugin appears (adding it to the
    /// plugins folder re-reads the mappings). A plugin that exists but cannot be used
    /// is an error.
    fn resolve(
        &self,
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
    ) -> FieldResult<Arc<dyn CustomMatch>> {
        match CustomMatcher::parse(v, path, self.0)? {
            Resolved::Plugin(m) => Ok(Arc::new(m)),
            Resolved::Missing(name) => {
                warnings.push(FieldError::new(join(path, "name"), unknown_matcher(&name)));
                Ok(Arc::new(MissingMatcher { name }))
            }
        }
    }
}

/// What a `customMatcher` names: a plugin's matcher, or a name no plugin has.
#[derive(Debug)]
pub enum Resolved {
    Plugin(CustomMatcher),
    Missing(String),
}

/// `request.customMatcher`: `{"name": "...", "parameters": {...}}`.
#[derive(Debug)]
pub struct CustomMatcher {
    pub plugin: Arc<Plugin>,
    /// JSON text of `parameters` (`{}` when absent).
    pub parameters: Arc<str>,
    /// The call context (mapping id, name, parameters), built once the mapping's id
    /// is known, so a call allocates none of it.
    context: std::sync::OnceLock<wit::CallContext>,
}

impl CustomMatcher {
    pub fn parse(v: &Value, path: &str, plugins: &Plugins) -> FieldResult<Resolved> {
        let obj = as_object(v, path)?;
        for k in obj.keys() {
            if k != "name" && k != "parameters" {
                return Err(FieldError::new(
                    join(path, k),
                    "unknown field (a customMatcher has name and parameters)",
                ));
            }
        }
        let name_path = join(path, "name");
        let name = as_str(
            obj.field("name")
                .ok_or_else(|| FieldError::new(&name_path, "missing: the plugin's name"))?,
            &name_path,
        )?;
        let parameters = parameters_json(obj.field("parameters"), &join(path, "parameters"))?;
        if !plugins.exists(name) {
            return Ok(Resolved::Missing(name.to_owned()));
        }
        let plugin = plugins
            .get(name)
            .map_err(|e| FieldError::new(&name_path, e))?;
        if !plugin.has_matcher() {
            return Err(FieldError::new(
                &name_path,
                format!("plugin {name:?} has no matcher (it exports only a transformer)"),
            ));
        }
        Ok(Resolved::Plugin(CustomMatcher {
            plugin,
            parameters,
            context: std::sync::OnceLock::new(),
        }))
    }
}

impl CustomMatch for CustomMatcher {
    fn name(&self) -> &str {
        &self.plugin.name
    }

    fn bind(&self, id: &str, name: Option<&str>) {
        let _ = self.context.set(call_context(id, name, &self.parameters));
    }

    fn matches(
        &self,
        req: &RequestSnapshot,
        path_parameters: &[(String, String)],
    ) -> Result<bool, MatchFailure> {
        let ctx = self
            .context
            .get_or_init(|| call_context("", None, &self.parameters));
        with_http_request(req, path_parameters, |request| {
            self.plugin.matches(ctx, request)
        })
        .map_err(|f| MatchFailure {
            matcher: f.plugin,
            reason: f.reason,
            loading: f.loading,
        })
    }
}

/// What a plugin call is told about its mapping.
pub fn call_context(id: &str, name: Option<&str>, parameters: &str) -> wit::CallContext {
    wit::CallContext {
        mapping_id: id.to_owned(),
        mapping_name: name.map(str::to_owned),
        parameters: parameters.to_owned(),
    }
}

fn parameters_json(v: Option<&Value>, path: &str) -> FieldResult<Arc<str>> {
    match v {
        // Shared: with 10,000 stubs each holding its own copy of "{}", 320 KB.
        None | Some(Value::Null) => {
            static EMPTY: std::sync::LazyLock<Arc<str>> =
                std::sync::LazyLock::new(|| Arc::from("{}"));
            Ok(EMPTY.clone())
        }
        Some(v @ Value::Object(_)) => Ok(Arc::from(v.to_string())),
        Some(_) => Err(FieldError::new(path, "must be a JSON object")),
    }
}

/// `response.transformers` and `response.transformerParameters`, resolved.
#[derive(Debug, Default, Clone)]
pub struct Transformers {
    pub plugins: Vec<Arc<Plugin>>,
    pub parameters: Arc<str>,
    /// The call context, built on the first call (these belong to one mapping);
    /// boxed, as most mappings have no transformer and all carry this field.
    context: std::sync::OnceLock<Box<CallCache>>,
    /// The answer's templates, when the host renders them itself (see
    /// [`crate::templates`]): set when the stub loads.
    native: Option<Arc<crate::templates::NativeTemplates>>,
    /// The stub's own HTTP answer and its key, set when the stub loads (see
    /// [`Transformers::key_answer`]); boxed, as `context`.
    stub: Option<Box<StubAnswer>>,
}

/// What the calls of one mapping's transformers share, built on the first call.
#[derive(Debug, Clone)]
struct CallCache {
    context: wit::CallContext,
    /// The stub's own answer as the plugin sees it, built on the first HTTP call:
    /// a call on the stub's unchanged plan (the usual case) lowers it from here
    /// instead of copying every header and the body into new strings first.
    stub_record: std::sync::OnceLock<wit::Response>,
    /// The context of the call rendering an MQ reply's templated destination
    /// ([`Transformers::destination_context`]), built on its first call.
    destination: std::sync::OnceLock<wit::CallContext>,
}

/// The largest stub body kept, per mapping, in the WIT record a transformer is
/// given (a larger one is copied for each call, as the call would copy it anyway).
const STUB_RECORD_MAX_BODY: usize = 64 * 1024;

/// A stub's HTTP answer as it loaded (shared with the mapping), and the key a
/// transformer's instance is prepared for it by, made then: the answer is the same
/// on every call of the loaded stub, so no call hashes it.
#[derive(Debug, Clone)]
struct StubAnswer {
    status: u16,
    headers: Arc<[(HeaderName, HeaderValue)]>,
    body: Bytes,
    key: AnswerKey,
}

impl StubAnswer {
    /// Whether `plan` is still this answer (the same shared headers and body).
    fn is(&self, plan: &ResponsePlan) -> bool {
        self.status == plan.status
            && Arc::ptr_eq(&self.headers, &plan.headers)
            && self.body.as_ptr() == plan.body.as_ptr()
            && self.body.len() == plan.body.len()
    }
}

/// The WIT record of an HTTP answer.
fn http_response_record(
    status: u16,
    headers: &[(HeaderName, HeaderValue)],
    body: &Bytes,
) -> wit::Response {
    wit::Response::Http(wit::HttpResponse {
        status,
        headers: header_fields(headers.iter().map(|(k, v)| (k, v))),
        body: body.to_vec(),
        delay_ms: None,
    })
}

impl Transformers {
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// The context every call of these transformers gets, for mapping `id`.
    pub fn context(&self, id: &str, name: Option<&str>) -> &wit::CallContext {
        &self.cache(id, name).context
    }

    /// The context of the second call an MQ reply with a templated destination
    /// (`devices/{{...}}/ack`) makes, rendering the destination's name as its body:
    /// the mapping's, with `/destination` after its id. An instance is prepared per
    /// mapping id for one answer at a time, and `response-template` keeps one
    /// mapping's templates per id: under the same id the body and the destination
    /// would each prepare (and compile) again on every message.
    pub fn destination_context(&self, id: &str, name: Option<&str>) -> &wit::CallContext {
        let cache = self.cache(id, name);
        cache.destination.get_or_init(|| {
            let mut c = cache.context.clone();
            c.mapping_id.push_str("/destination");
            c
        })
    }

    fn cache(&self, id: &str, name: Option<&str>) -> &CallCache {
        self.context.get_or_init(|| {
            Box::new(CallCache {
                context: call_context(id, name, &self.parameters),
                stub_record: std::sync::OnceLock::new(),
                destination: std::sync::OnceLock::new(),
            })
        })
    }

    /// Reads the two fields from `response` (`obj`). With `global_templating`,
    /// `response-template` runs first on every stub.
    ///
    /// A name that no plugin has is left out with a warning in `warnings`: WireMock
    /// serves a stub whose transformer is not installed without it, and so does
    /// decoy. A plugin that exists but cannot be used is an error.
    pub fn parse(
        obj: &serde_json::Map<String, Value>,
        plugins: Option<&Plugins>,
        global_templating: bool,
        warnings: &mut Vec<FieldError>,
    ) -> Result<Transformers, Vec<FieldError>> {
        let mut names: Vec<(String, String)> = Vec::new();
        let mut errors = Vec::new();
        if global_templating {
            names.push((
                "response-template".into(),
                "--global-response-templating".into(),
            ));
        }
        match obj.field("transformers") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("response.transformers[{i}]");
                    match item.as_str() {
                        Some(n) if global_templating && n == "response-template" => {}
                        Some(n) => names.push((n.to_owned(), path)),
                        None => {
                            errors.push(FieldError::new(path, "must be a plugin name (a string)"))
                        }
                    }
                }
            }
            Some(_) => errors.push(FieldError::new(
                "response.transformers",
                "must be a list of plugin names",
            )),
        }
        let parameters = parameters_json(
            obj.field("transformerParameters"),
            "response.transformerParameters",
        )
        .map_err(|e| errors.push(e))
        .unwrap_or_else(|()| Arc::from("{}"));
        let mut out = Vec::new();
        if !names.is_empty() {
            match plugins {
                None => errors.push(FieldError::new(
                    "response.transformers",
                    "plugins are not available here",
                )),
                Some(plugins) => {
                    for (name, path) in names {
                        if !plugins.exists(&name) {
                            warnings.push(FieldError::new(path, unknown_transformer(&name)));
                            continue;
                        }
                        match plugins.get(&name) {
                            Ok(p) if p.has_transformer() => out.push(p),
                            Ok(_) => errors.push(FieldError::new(
                                path,
                                format!(
                                    "plugin {name:?} has no transformer (it exports only a matcher)"
                                ),
                            )),
                            Err(e) => errors.push(FieldError::new(path, e)),
                        }
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(Transformers {
                plugins: out,
                parameters,
                context: std::sync::OnceLock::new(),
                native: None,
                stub: None,
            })
        } else {
            Err(errors)
        }
    }

    /// The bundled `response-template` plugin, when the chain names it.
    fn template_plugin(&self) -> Option<&Arc<Plugin>> {
        self.plugins
            .iter()
            .find(|p| p.name == crate::templates::PLUGIN)
    }

    /// Compiles the templates of the stub's answer (`headers` as served, `body`) when
    /// `response-template` is among these transformers: one that does not compile is
    /// an error of the field it is in (`response` is the stub's `response` object,
    /// for the field names). When the bundled plugin is the only transformer and
    /// every template is plain, they are kept to be rendered by the host (see
    /// [`crate::templates`]); otherwise, when the plugin is the bundled one, they
    /// are put in its cache, where its instances find them compiled. Each
    /// compilation is counted in the plugin's `host_compiled`.
    pub fn prepare_templates(
        &mut self,
        response: Option<&Value>,
        headers: &Arc<[(HeaderName, HeaderValue)]>,
        body: &Bytes,
        plugins: Option<&Plugins>,
    ) -> Result<(), Vec<FieldError>> {
        let Some(plugin) = self.template_plugin().cloned() else {
            return Ok(());
        };
        let prepared = crate::templates::prepare(response, headers, body)?;
        plugin.stats.host_compiled.fetch_add(
            prepared.compiled.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let bundled = plugins.is_some_and(|p| p.is_bundled(crate::templates::PLUGIN));
        if self.plugins.len() == 1 && bundled {
            self.native = prepared.native.map(Arc::new);
        }
        if bundled && self.native.is_none() {
            crate::templates::share(&plugin, prepared.compiled);
        }
        Ok(())
    }

    /// Keeps the stub's own HTTP answer as it is served (`status`, `headers`,
    /// `body`) with its [`AnswerKey`], made here, once: a call on that answer gives
    /// it to the first transformer, which then hashes nothing to know whether its
    /// instance was prepared for it. Called when the stub loads, after
    /// [`prepare_templates`](Self::prepare_templates); a stub without transformers,
    /// or whose templates the host renders itself, calls no plugin and keeps nothing.
    pub fn key_answer(
        &mut self,
        status: u16,
        headers: &Arc<[(HeaderName, HeaderValue)]>,
        body: &Bytes,
    ) {
        if self.plugins.is_empty() || self.native.is_some() {
            return;
        }
        self.stub = Some(Box::new(StubAnswer {
            status,
            headers: headers.clone(),
            body: body.clone(),
            key: AnswerKey::of(&http_response_record(status, headers, body)),
        }));
    }

    /// Compiles the templates of a reply that is not an HTTP answer (an MQ reply) when
    /// `response-template` is among these transformers, as [`Self::prepare_templates`]
    /// does for a stub: its `body` (from whichever of `body_keys` `response` gives)
    /// and `values`, each a field's path and its text (`response.properties.<name>`).
    /// One that does not compile is an error of its field, with the line and column.
    /// The plugin renders them all on each request: when it is the bundled one (in
    /// `plugins`), they are put in its cache, where its instances find them
    /// compiled. Each compilation is counted in the plugin's `host_compiled`.
    pub fn check_templates(
        &self,
        response: Option<&Value>,
        body_keys: &[&str],
        body: &[u8],
        values: &[(String, &str)],
        plugins: Option<&Plugins>,
    ) -> Result<(), Vec<FieldError>> {
        let Some(plugin) = self.template_plugin() else {
            return Ok(());
        };
        let compiled = crate::templates::check(response, body_keys, body, values)?;
        plugin
            .stats
            .host_compiled
            .fetch_add(compiled.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if plugins.is_some_and(|p| p.is_bundled(crate::templates::PLUGIN)) {
            crate::templates::share(plugin, compiled);
        }
        Ok(())
    }

    /// Runs the chain over `response`, in order, and checks what the last plugin
    /// gave back with `accept`. `key` is `response`'s [`AnswerKey`] when the caller
    /// made it once (a stub's own answer, keyed when it loaded): the first plugin is
    /// given it; each later one is given what the one before made, which differs
    /// per call and is hashed by the call.
    ///
    /// This is the failure rule for both transports: a call that fails is that
    /// plugin's failure (counted and logged by the runtime); an answer `accept`
    /// refuses (wrong kind, invalid header...) counts against the plugin that gave
    /// it, the last one, and is logged here.
    pub fn run<T>(
        &self,
        context: &wit::CallContext,
        request: &PluginRequest,
        response: &wit::Response,
        key: Option<AnswerKey>,
        accept: impl FnOnce(wit::Response) -> Result<T, String>,
    ) -> Result<T, PluginFailure> {
        let mut changed: Option<wit::Response> = None;
        for plugin in &self.plugins {
            changed = Some(match &changed {
                Some(input) => plugin.transform(context, request, input)?,
                None => match key {
                    Some(key) => plugin.transform_keyed(context, request, response, key)?,
                    None => plugin.transform(context, request, response)?,
                },
            });
        }
        accept(changed.unwrap_or_else(|| response.clone())).map_err(|reason| {
            let last = self.plugins.last();
            if let Some(p) = last {
                p.stats
                    .failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(plugin = %p.name, "plugin call failed: {reason}");
            }
            PluginFailure {
                plugin: last.map(|p| p.name.clone()).unwrap_or_default(),
                reason,
                loading: false,
            }
        })
    }

    /// Runs the chain over an HTTP response `plan` for the request `req` of mapping
    /// `id`/`name`; `path_parameters` are the request's `urlPathTemplate` variables.
    pub fn transform_http(
        &self,
        (id, name): (&str, Option<&str>),
        req: &RequestSnapshot,
        path_parameters: Vec<(String, String)>,
        plan: &mut ResponsePlan,
    ) -> Result<(), PluginFailure> {
        if let Some(native) = &self.native
            && let [plugin] = self.plugins.as_slice()
            && native.is_for(plan)
        {
            return native.render(plugin, req, &path_parameters, plan);
        }
        let cache = self.cache(id, name);
        let stub = self.stub.as_deref().filter(|s| s.is(plan));
        // A large body is not kept a second time for every mapping that has one.
        let stub_record = stub
            .filter(|_| plan.body.len() <= STUB_RECORD_MAX_BODY)
            .map(|_| {
                cache
                    .stub_record
                    .get_or_init(|| http_response_record(plan.status, &plan.headers, &plan.body))
            });
        let fresh;
        let response = match stub_record {
            Some(r) => r,
            None => {
                fresh = http_response_record(plan.status, &plan.headers, &plan.body);
                &fresh
            }
        };
        let key = stub.map(|s| s.key);
        let (r, headers) = with_http_request(req, &path_parameters, |request| {
            self.run(&cache.context, request, response, key, |r| {
                let wit::Response::Http(r) = r else {
                    return Err("it returned an MQ reply for an HTTP request".into());
                };
                if !(100..=999).contains(&r.status) {
                    return Err(format!(
                        "it returned status {}, which is not an HTTP status",
                        r.status
                    ));
                }
                // Headers given back unchanged stay the stub's own list: nothing to
                // parse or allocate, and the journal shares it with the stub.
                if let (Some(stub), Some(wit::Response::Http(record))) = (stub, stub_record)
                    && record.headers == r.headers
                {
                    return Ok((r, stub.headers.clone()));
                }
                let mut headers = Vec::with_capacity(r.headers.len());
                for (k, v) in &r.headers {
                    let name = HeaderName::from_bytes(k.as_bytes())
                        .map_err(|_| format!("it returned an invalid header name {k:?}"))?;
                    let value = HeaderValue::from_str(v).map_err(|_| {
                        format!("it returned an invalid value for header {k}: {v:?}")
                    })?;
                    headers.push((name, value));
                }
                Ok((r, Arc::from(headers)))
            })
        })?;
        plan.status = r.status;
        plan.headers = headers;
        plan.body = Bytes::from(r.body);
        if let Some(ms) = r.delay_ms {
            plan.delay = decoy_spec::plan::add_delay(
                plan.delay,
                std::time::Duration::from_millis(u64::from(ms)),
            );
        }
        Ok(())
    }
}

/// HTTP headers as the plugin sees them: name and value as text.
fn header_fields<'a>(
    headers: impl Iterator<Item = (&'a http::HeaderName, &'a http::HeaderValue)>,
) -> Vec<(String, String)> {
    headers
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// The plugin's view of an HTTP request: the record, and the client's address for
/// `request-info.client-ip` (an IPv4 client of an IPv6 listener written as IPv4).
pub fn http_request_for(
    req: &RequestSnapshot,
    path_parameters: Vec<(String, String)>,
) -> PluginRequest {
    let mut out = PluginRequest::from(wit::Request::Http(empty_http_request()));
    fill_http_request(&mut out, req, &path_parameters);
    out
}

/// Runs `f` on the plugin's view of `req`, built in this thread's scratch record:
/// its strings and lists are refilled in place, so a call allocates nothing for the
/// request once the thread has served one like it (a templated request otherwise
/// makes about fifteen small allocations here, and frees them after the call).
pub fn with_http_request<R>(
    req: &RequestSnapshot,
    path_parameters: &[(String, String)],
    f: impl FnOnce(&PluginRequest) -> R,
) -> R {
    thread_local! {
        /// The thread's last request record (taken while in use, so a nested call
        /// simply builds its own).
        static SCRATCH: std::cell::Cell<Option<Box<PluginRequest>>> =
            const { std::cell::Cell::new(None) };
    }
    let mut scratch = SCRATCH.take().unwrap_or_else(|| {
        Box::new(PluginRequest::from(
            wit::Request::Http(empty_http_request()),
        ))
    });
    fill_http_request(&mut scratch, req, path_parameters);
    let result = f(&scratch);
    // A large body's buffer is not kept for the next request.
    if let wit::Request::Http(r) = &mut scratch.request
        && r.body.capacity() > SCRATCH_BODY_KEPT
    {
        r.body = Vec::new();
    }
    SCRATCH.set(Some(scratch));
    result
}

/// The largest request body buffer a thread's scratch record keeps between calls.
const SCRATCH_BODY_KEPT: usize = 64 * 1024;

fn empty_http_request() -> wit::HttpRequest {
    wit::HttpRequest {
        method: String::new(),
        url: String::new(),
        path: String::new(),
        query: Vec::new(),
        headers: Vec::new(),
        cookies: Vec::new(),
        body: Vec::new(),
        base_url: String::new(),
        path_parameters: Vec::new(),
    }
}

/// Writes the plugin's view of `req` into `out`, reusing what `out` already holds.
fn fill_http_request(
    out: &mut PluginRequest,
    req: &RequestSnapshot,
    path_parameters: &[(String, String)],
) {
    use std::fmt::Write;
    if !matches!(out.request, wit::Request::Http(_)) {
        out.request = wit::Request::Http(empty_http_request());
    }
    let wit::Request::Http(r) = &mut out.request else {
        unreachable!("set just above")
    };
    set_text(&mut r.method, &req.method);
    set_text(&mut r.url, &req.url);
    set_text(&mut r.path, req.path());
    set_fields(
        &mut r.query,
        req.query().iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    set_fields(
        &mut r.headers,
        req.headers.iter().map(|(k, v)| {
            let v = match std::str::from_utf8(v.as_bytes()) {
                Ok(v) => std::borrow::Cow::Borrowed(v),
                Err(_) => String::from_utf8_lossy(v.as_bytes()),
            };
            (k.as_str(), v)
        }),
    );
    set_fields(
        &mut r.cookies,
        req.cookies().iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    r.body.clear();
    r.body.extend_from_slice(&req.body);
    r.base_url.clear();
    write_base_url(&mut r.base_url, req);
    set_fields(
        &mut r.path_parameters,
        path_parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    match req.client_addr {
        Some(a) => {
            let ip = out.client_ip.get_or_insert_with(String::new);
            ip.clear();
            let _ = write!(ip, "{}", a.ip().to_canonical());
        }
        None => out.client_ip = None,
    }
}

/// WireMock's `request.baseUrl` of `req`, written at the end of `out`.
pub(crate) fn write_base_url(out: &mut String, req: &RequestSnapshot) {
    match req.host_port() {
        Some((host, port)) => decoy_spec::request::write_base_url(out, req.scheme, &host, port),
        None => {
            out.push_str(req.scheme);
            out.push_str("://localhost");
        }
    }
}

fn set_text(dst: &mut String, src: &str) {
    dst.clear();
    dst.push_str(src);
}

/// Makes `dst` the list `src`, refilling the strings it already has.
fn set_fields<K: AsRef<str>, V: AsRef<str>>(
    dst: &mut Vec<(String, String)>,
    src: impl Iterator<Item = (K, V)>,
) {
    let mut n = 0;
    for (k, v) in src {
        match dst.get_mut(n) {
            Some((dk, dv)) => {
                set_text(dk, k.as_ref());
                set_text(dv, v.as_ref());
            }
            None => dst.push((k.as_ref().to_owned(), v.as_ref().to_owned())),
        }
        n += 1;
    }
    dst.truncate(n);
}

/// Why a stub whose `customMatcher` names `name`, which no plugin provides, is loaded
/// but never matches, and what to use instead for the WireMock extensions met in real
/// roots.
pub fn unknown_matcher(name: &str) -> String {
    let lower: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let instead = if lower.contains("state") {
        "; the WireMock state extension is not available: keep state in a decoy plugin (its kv store; see docs/plugins.md)"
    } else {
        "; if it is a WireMock extension (Java), write a decoy plugin that does the same (docs/plugins.md)"
    };
    format!(
        "no plugin named {name:?}: the stub is loaded but never matches, as in WireMock without that extension, until a plugin of that name is added{instead}"
    )
}

/// Why a stub naming transformer `name`, which no plugin provides, is served without
/// it, and what to use instead for the WireMock extensions met in real roots.
pub fn unknown_transformer(name: &str) -> String {
    let lower: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let instead = if lower == "responsetemplate"
        || lower == "responsetemplating"
        || lower == "responsetemplatetransformer"
        || lower == "responsetemplates"
        || lower == "template"
        || lower == "handlebars"
    {
        "; did you mean \"response-template\" (built in)?".to_owned()
    } else if lower == "bodytransformer" {
        "; body-transformer is a WireMock extension: the built-in response-template plugin does its job ({{jsonPath request.body '$.field'}}, {{xPath request.body '/a/b'}}, {{request.query.name}}; see docs/plugins.md)".to_owned()
    } else if lower.contains("state") {
        "; the WireMock state extension is not available: keep state in a decoy plugin (its kv store; see docs/plugins.md)".to_owned()
    } else {
        "; if it is a WireMock extension (Java), write a decoy plugin that does the same (docs/plugins.md)".to_owned()
    };
    format!(
        "no plugin named {name:?}: the stub is served without this transformer, as WireMock serves a stub whose transformer is not installed{instead}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_ip_of(addr: Option<&str>) -> Option<String> {
        let mut snap = RequestSnapshot::new("GET", "/");
        snap.client_addr = addr.map(|a| a.parse().expect("a socket address"));
        http_request_for(&snap, Vec::new()).client_ip
    }

    #[test]
    fn plugins_are_told_the_client_ip_without_its_port_and_an_ipv4_client_as_ipv4() {
        assert_eq!(
            client_ip_of(Some("127.0.0.1:50123")).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(client_ip_of(Some("[::1]:50123")).as_deref(), Some("::1"));
        // An IPv4 client of a dual-stack IPv6 listener.
        assert_eq!(
            client_ip_of(Some("[::ffff:192.0.2.7]:50123")).as_deref(),
            Some("192.0.2.7")
        );
        assert_eq!(client_ip_of(None), None);
    }

    fn snapshot(
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        client: Option<&str>,
    ) -> RequestSnapshot {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).expect("a header name"),
                HeaderValue::from_bytes(v.as_bytes()).expect("a header value"),
            );
        }
        let mut snap = RequestSnapshot::new("POST", url)
            .with_headers(map)
            .with_body(body.to_vec());
        snap.client_addr = client.map(|a| a.parse().expect("a socket address"));
        snap
    }

    /// Loads a stub answering `body` through `transformers`, as a (re)load of its
    /// file does: the same id each time, a new mapping.
    fn load_stub(
        plugins: &Arc<Plugins>,
        body: &str,
        transformers: &[&str],
    ) -> crate::mapping::Mapping {
        let ctx = crate::mapping::ParseContext {
            files_dir: "/nonexistent".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: Some(plugins.clone()),
            global_templating: false,
        };
        let stub = serde_json::json!({
            "id": "6f1d2c1e-3b7a-4c1e-9a51-1f0c2d3e4b5a",
            "request": {"urlPath": "/t"},
            "response": {"body": body, "headers": {"X-Kind": "test"},
                         "transformers": transformers}
        });
        crate::mapping::Mapping::parse(&stub, &ctx, None, &mut Vec::new()).unwrap()
    }

    /// The stub's answer to `GET url`, through its transformers.
    fn answer(m: &crate::mapping::Mapping, url: &str) -> String {
        let mut plan = crate::engine::plan_for(m);
        m.response
            .transformers
            .transform_http(
                (&m.id, m.name.as_deref()),
                &RequestSnapshot::new("GET", url),
                Vec::new(),
                &mut plan,
            )
            .unwrap();
        String::from_utf8(plan.body.to_vec()).unwrap()
    }

    fn bundled_plugins() -> Arc<Plugins> {
        Arc::new(Plugins::new(None, Plugins::default_cache_dir()))
    }

    /// The stub's answer is keyed when it loads, so the calls hash nothing: an
    /// instance prepared for it is prepared again only when a reload changed it.
    /// decoy compiles the template at each load and puts it in the plugin's cache,
    /// so the plugin compiles none: preparing is counted in `prepares`.
    #[test]
    fn a_reloaded_stub_prepares_again_when_its_answer_changed_and_only_then() {
        let plugins = bundled_plugins();
        let plugin = plugins.get(crate::templates::PLUGIN).unwrap();
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        // A helper: the plugin's to render, not the host's.
        let first = load_stub(
            &plugins,
            "{{upper request.path}} one",
            &["response-template"],
        );
        assert_eq!(count(&plugin.stats.host_compiled), 1);
        assert_eq!(answer(&first, "/t"), "/T one");
        assert_eq!(count(&plugin.stats.prepares), 1);
        assert_eq!(answer(&first, "/t?again"), "/T one");
        assert_eq!(
            count(&plugin.stats.prepares),
            1,
            "prepared once for the loaded stub"
        );

        let same = load_stub(
            &plugins,
            "{{upper request.path}} one",
            &["response-template"],
        );
        assert_eq!(answer(&same, "/t"), "/T one");
        assert_eq!(
            count(&plugin.stats.prepares),
            1,
            "an unchanged answer is not prepared again"
        );

        let changed = load_stub(
            &plugins,
            "{{upper request.path}} two",
            &["response-template"],
        );
        assert_eq!(answer(&changed, "/t"), "/T two");
        assert_eq!(
            count(&plugin.stats.prepares),
            2,
            "a changed answer is prepared again"
        );
        assert_eq!(answer(&changed, "/t"), "/T two");
        assert_eq!(count(&plugin.stats.prepares), 2);
        assert_eq!(count(&plugin.stats.host_compiled), 3, "at each load");
        assert_eq!(
            count(&plugin.stats.compilations),
            0,
            "each read from the cache, where decoy put it"
        );
        let key =
            |m: &crate::mapping::Mapping| m.response.transformers.stub.as_ref().map(|s| s.key);
        assert!(key(&first).is_some(), "keyed when it loaded");
        assert_eq!(key(&first), key(&same));
        assert_ne!(key(&first), key(&changed));
        assert_eq!(
            plugin
                .stats
                .failures
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }

    /// Only the first transformer of a chain is given the stub's answer; the next
    /// is given what the first made of it for this request, and is prepared for
    /// that, whatever it was prepared for before.
    #[test]
    fn a_later_transformer_of_a_chain_is_prepared_for_what_the_one_before_made() {
        let plugins = bundled_plugins();
        // The first pass leaves `{{upper request.path}}` (escaped) for the second.
        let m = load_stub(
            &plugins,
            "\\{{upper request.path}} {{lower 'ONE'}}",
            &["response-template", "response-template"],
        );
        assert_eq!(answer(&m, "/t"), "/T one");
        assert_eq!(answer(&m, "/t"), "/T one");
        assert_eq!(answer(&m, "/t"), "/T one");
    }

    #[test]
    fn a_threads_scratch_request_is_exactly_a_fresh_one_whatever_it_held_before() {
        let big = snapshot(
            "/a/b?x=1&y=2&x=3",
            &[
                ("host", "example.com:8080"),
                ("cookie", "c=1; d=2"),
                ("x-many", "1"),
                ("x-many", "2"),
            ],
            b"a long body, longer than the next one",
            Some("[::1]:5000"),
        );
        let small = snapshot(
            "/z",
            &[("host", "[::1]:9"), ("x-bytes", "caf\u{e9}")],
            b"",
            None,
        );
        let params = vec![("id".to_owned(), "7".to_owned())];
        // Every order: the second request must not keep anything of the first.
        for (first, second, second_params) in [
            (&big, &small, &[][..]),
            (&small, &big, &params[..]),
            (&big, &big, &params[..]),
        ] {
            with_http_request(first, &params, |_| ());
            let reused = with_http_request(second, second_params, |r| format!("{r:?}"));
            let fresh = format!("{:?}", http_request_for(second, second_params.to_vec()));
            assert_eq!(reused, fresh);
        }
    }
}
