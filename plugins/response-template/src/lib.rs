//! WireMock's response templating, as a decoy transformer plugin.
//!
//! A mapping with `"transformers": ["response-template"]` has its body (inline or
//! from `bodyFileName`) and its header values rendered as Handlebars templates
//! against WireMock's model: `request.url`, `request.path`, `request.pathSegments`,
//! named path parameters (`request.path.id`), `request.query.*`,
//! `request.headers.*`, `request.cookies.*`, `request.method`, `request.body`,
//! `request.baseUrl`, `request.clientIp`, the parts of a multipart body
//! (`request.parts.<name>.body`...), and `parameters.*` (the mapping's
//! `transformerParameters`). The client's address and the machine's name
//! (`{{hostname}}`) are asked of decoy through `request-info`.
//! The helpers are listed in [`helpers`]. An MQ message is templated the same way:
//! its properties are `request.headers`, and `request.destination`,
//! `request.correlationId`, `request.messageId` and `request.replyTo` are set.
//!
//! Templates are compiled once per text for the whole plugin: an instance keeps the
//! templates of each mapping it serves (see [`Cache`], which counts compilations),
//! and finds one compiled elsewhere in decoy's `cache`, shared by every instance of
//! the plugin, as bytes it reads back instead of compiling (see [`compile_shared`]):
//! decoy's host puts there each template it compiled when the template's stub
//! loaded, so that a stub's first request compiles nothing either, and an instance
//! that compiles a template (one the cache lost in a reload of this plugin, or one
//! the host never saw) puts it there for the others. decoy calls the plugin's
//! `prepare` on an instance before its first call for a mapping's answer, outside
//! the call's deadline: the templates are compiled (or read back) there, and a
//! call only renders. A large template is compiled in pieces, in time that grows
//! with its length (see [`pieces`]). A body or header without `{{` is passed through untouched. A
//! template that only echoes request fields is rendered without Handlebars (see
//! [`direct`]), to the same output.
//!
//! What a template means is shared with decoy's host through `decoy-template`:
//! the path rewrites, the compiler, and the request fields. The host compiles every
//! template of a stub when the stub loads (one that fails is a problem of the stub,
//! not a 500), and renders itself those made only of text and plain request fields
//! (`decoy_template::Plain`), without calling this plugin; the templates that reach
//! it use a helper, a block, `parameters` or a list.

pub mod dates;
pub mod direct;
pub mod helpers;

pub use decoy_template::{base_url_parts, pieces, rewrite_paths};

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use decoy_plugin::{Context, Error, Request, Response, Transformer, wit::types};
use decoy_template::cached;
use direct::Direct;
use handlebars::{Handlebars, Template};
use serde_json::{Map, Value, json};

/// The transformer.
#[derive(Debug)]
pub struct ResponseTemplate;

impl Transformer for ResponseTemplate {
    fn transform(ctx: &Context, req: &Request, mut resp: Response) -> Result<Response, Error> {
        let header_templates = resp.headers().iter().any(|(_, v)| v.contains("{{"));
        let body = std::str::from_utf8(resp.body())
            .ok()
            .filter(|b| b.contains("{{"));
        if body.is_none() && !header_templates {
            return Ok(resp);
        }
        let (new_body, new_headers) = CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            // Find (or, when decoy did not prepare this instance for this answer,
            // compile) every template first, so that afterwards a slot holds a
            // template exactly when that part of this response is one, and to know
            // which parts of the model the Handlebars ones use; the model is then
            // built once, with only those parts, and only if some template needs it.
            let templates = cache.refresh(ctx.mapping_id(), body, resp.headers())?;
            let mut needs = Needs::default();
            let used = templates
                .body
                .iter()
                .chain(templates.headers.iter().flatten());
            for c in used.filter(|c| c.direct.is_none()) {
                needs.add(&c.needs);
            }
            if (needs.all || needs.fields.contains(&"parts"))
                && let Some(e) = duplicate_part(req)
            {
                return Err(Error(format!("template failed: {e}")));
            }
            let model = std::cell::OnceCell::new();
            let render_one = |c: &Compiled| match &c.direct {
                Some(d) => d.render(req),
                None => render(
                    &c.template,
                    model.get_or_init(|| handlebars::Context::from(needs.model(ctx, req))),
                ),
            };
            let new_body = templates.body.as_ref().map(render_one).transpose()?;
            let mut new_headers = Vec::new();
            for (i, (slot, (name, _))) in templates.headers.iter().zip(resp.headers()).enumerate() {
                if let Some(c) = slot {
                    let value = render_one(c).map_err(|e| Error(format!("header {name}: {e}")))?;
                    new_headers.push((i, value));
                }
            }
            Ok::<_, Error>((new_body, new_headers))
        })?;
        if let Some(b) = new_body {
            resp.set_body(b);
        }
        for (i, value) in new_headers {
            resp.headers_mut()[i].1 = value;
        }
        Ok(resp)
    }
}

/// Compiles an answer's templates before decoy's first call for it on this
/// instance, outside the call's deadline (see [`decoy_plugin::Prepare`]).
impl decoy_plugin::Prepare for ResponseTemplate {
    fn prepare(ctx: &Context, resp: &Response) -> Result<u64, Error> {
        let body = std::str::from_utf8(resp.body())
            .ok()
            .filter(|b| b.contains("{{"));
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if body.is_some() || resp.headers().iter().any(|(_, v)| v.contains("{{")) {
                cache.refresh(ctx.mapping_id(), body, resp.headers())?;
            }
            Ok(cache.compilations)
        })
    }
}

decoy_plugin::export!(transformer = ResponseTemplate, prepare = ResponseTemplate);

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Compiled templates, by mapping. A mapping whose text changed (a reload) has its
/// template compiled again; the cache is emptied when it holds too many mappings.
#[derive(Default)]
#[allow(missing_debug_implementations)]
pub struct Cache {
    mappings: HashMap<String, MappingTemplates>,
    /// Templates this instance has compiled (each text once; again only when the
    /// text changes or the cache was emptied, and not when decoy's `cache` had it).
    compilations: u64,
}

/// How many templates this instance (this thread, in native tests) has compiled.
pub fn compilations() -> u64 {
    CACHE.with(|c| c.borrow().compilations)
}

impl Cache {
    /// The templates of `mapping` for this answer (`body` when it is a template,
    /// and the header values), compiling those whose text is new.
    fn refresh(
        &mut self,
        mapping: &str,
        body: Option<&str>,
        headers: &[(String, String)],
    ) -> Result<&MappingTemplates, Error> {
        let compiled = &mut self.compilations;
        let templates = templates_of(&mut self.mappings, mapping);
        match body {
            Some(text) => Compiled::refresh(&mut templates.body, text, compiled)?,
            None => templates.body = None,
        }
        templates.headers.resize_with(headers.len(), || None);
        for (slot, (name, value)) in templates.headers.iter_mut().zip(headers) {
            if value.contains("{{") {
                Compiled::refresh(slot, value, compiled)
                    .map_err(|e| Error(format!("header {name}: {e}")))?;
            } else {
                *slot = None;
            }
        }
        Ok(templates)
    }
}

/// A mapping's templates: its body and, by position, its header values (`None`
/// where that part of the last response seen was no template).
#[derive(Default)]
#[allow(missing_debug_implementations)]
pub struct MappingTemplates {
    body: Option<Compiled>,
    headers: Vec<Option<Compiled>>,
}

/// One template: its text (to notice a change), what it uses of the model, and its
/// compiled forms.
#[allow(missing_debug_implementations)]
pub struct Compiled {
    text: String,
    needs: Needs,
    template: Template,
    direct: Option<Direct>,
}

const MAX_CACHED_MAPPINGS: usize = 20_000;

/// The templates of `mapping`, found without allocating once it is known.
fn templates_of<'a>(
    mappings: &'a mut HashMap<String, MappingTemplates>,
    mapping: &str,
) -> &'a mut MappingTemplates {
    if !mappings.contains_key(mapping) {
        if mappings.len() >= MAX_CACHED_MAPPINGS {
            mappings.clear();
        }
        mappings.insert(mapping.to_owned(), MappingTemplates::default());
    }
    mappings
        .get_mut(mapping)
        .expect("inserted above when missing")
}

impl Compiled {
    pub fn new(text: &str) -> Result<Compiled, Error> {
        Ok(Compiled::of(text, compile(text)?))
    }

    fn of(text: &str, template: Template) -> Compiled {
        Compiled {
            text: text.to_owned(),
            needs: Needs::of(text),
            direct: Direct::of(&template),
            template,
        }
    }

    /// Leaves `slot` holding `text` compiled, compiling only when it changed and
    /// no other instance compiled it (counted in `compiled`; see [`compile_shared`]).
    fn refresh(slot: &mut Option<Compiled>, text: &str, compiled: &mut u64) -> Result<(), Error> {
        if slot.as_ref().is_none_or(|c| c.text != text) {
            *slot = None;
            let template = compile_shared(text, compiled)?;
            *slot = Some(Compiled::of(text, template));
        }
        Ok(())
    }
}

/// `text` compiled as [`compile`] does, from what decoy's `cache` holds when it is
/// there: put by decoy's host, which compiles every template of a stub when the
/// stub loads, or by another instance of this plugin (each instance's own [`Cache`]
/// only serves that instance). The cache holds a template as
/// [`decoy_template::compile`] leaves it, the form both sides make alike (the key
/// and the bytes are `decoy_template::cached`'s, which the host uses too); what
/// [`compile`] does after that depends on this plugin's helpers, and is done here
/// on what was read, in time linear in the template's elements. Compiling (counted
/// in `compiled`: a template read from the cache is not) stores the result there
/// for the others. Bytes that do not read back as a template (which only a bug
/// could cause) are compiled over, never used.
pub fn compile_shared(text: &str, compiled: &mut u64) -> Result<Template, Error> {
    let key = cached::cache_key(text);
    let read = decoy_plugin::cache::get(&key).and_then(|bytes| {
        cached::from_bytes(&bytes)
            .map_err(|e| {
                warn(&format!(
                    "a cached compiled template does not read back ({e}); compiling it"
                ))
            })
            .ok()
    });
    let mut template = match read {
        Some(template) => template,
        None => {
            *compiled += 1;
            let template = decoy_template::compile(text).map_err(|e| Error(e.message))?;
            match cached::to_bytes(&template) {
                Ok(bytes) => decoy_plugin::cache::put(&key, &bytes),
                Err(e) => warn(&format!(
                    "a compiled template cannot be cached ({e}); other instances compile it too"
                )),
            }
            template
        }
    };
    values_through_helper(&mut template);
    Ok(template)
}

/// A warning in decoy's log (on stderr in the plugin's native tests, which have no
/// host to log to).
fn warn(message: &str) {
    #[cfg(target_arch = "wasm32")]
    decoy_plugin::log::warn(message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{message}");
}

/// Which parts of the model a template uses, found once from its text, so a call
/// builds only those (most templates use two or three request fields).
#[derive(Debug, Clone, Default)]
pub struct Needs {
    /// Everything: the template names `request` without a known field after it.
    all: bool,
    fields: Vec<&'static str>,
    parameters: bool,
}

const FIELDS: &[&str] = &[
    "url",
    "path",
    "pathSegments",
    "pathParams",
    "query",
    "queryLast",
    "headers",
    "headersLast",
    "cookies",
    "cookiesLast",
    "id",
    "isMultipart",
    "parts",
    "clientIp",
    "method",
    "body",
    "bodyAsBase64",
    "baseUrl",
    "scheme",
    "host",
    "port",
    "destination",
    "replyTo",
    "messageId",
    "correlationId",
];

impl Needs {
    fn of(text: &str) -> Needs {
        let text = rewrite_paths(text);
        let mut n = Needs {
            parameters: text.contains("parameters"),
            ..Needs::default()
        };
        let mut rest = text.as_str();
        while let Some(i) = rest.find("request") {
            let after = &rest[i + "request".len()..];
            match after.strip_prefix('.') {
                Some(f) => {
                    let name: String = f
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect();
                    match FIELDS.iter().find(|k| **k == name) {
                        Some(k) if !n.fields.contains(k) => n.fields.push(k),
                        Some(_) => {}
                        None => n.all = true,
                    }
                }
                None => n.all = true,
            }
            rest = after;
        }
        n
    }

    fn add(&mut self, other: &Needs) {
        self.all |= other.all;
        self.parameters |= other.parameters;
        for f in &other.fields {
            if !self.fields.contains(f) {
                self.fields.push(f);
            }
        }
    }

    fn model(&self, ctx: &Context, req: &Request) -> Value {
        let fields = (!self.all).then_some(self.fields.as_slice());
        let parameters: Value = if self.parameters {
            serde_json::from_str(ctx.parameters_json()).unwrap_or(json!({}))
        } else {
            Value::Null
        };
        json!({ "request": request_model(req, fields), "parameters": parameters })
    }
}

/// The registry with WireMock's helpers (built once per instance).
pub fn registry() -> &'static Handlebars<'static> {
    static REGISTRY: OnceLock<Handlebars<'static>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut h = Handlebars::new();
        // WireMock 3 writes values as they are, in `{{...}}` as in `{{{...}}}`
        // (checked against 3.13.2): no HTML escaping.
        h.register_escape_fn(handlebars::no_escape);
        helpers::register(&mut h);
        h
    })
}

/// Compiles `text` as [`decoy_template::compile`] does (the host compiles each
/// template with it when its stub loads, so one that fails there never reaches a
/// call), then makes its values calls to [`helpers::VALUE`].
pub fn compile(text: &str) -> Result<Template, Error> {
    let mut t = decoy_template::compile(text).map_err(|e| Error(e.message))?;
    values_through_helper(&mut t);
    Ok(t)
}

/// Makes each plain value expression (`{{request.query.tag}}`, `{{this}}`) a call
/// to [`helpers::VALUE`], which writes it as WireMock does: a multi-valued field as
/// its first value, a list or map as Java prints it; and each block named by a value
/// (`{{#request.query.q}}...{{/request.query.q}}`) a call to [`helpers::SECTION`].
/// Names of helpers are left.
fn values_through_helper(t: &mut Template) {
    use handlebars::template::{Parameter, TemplateElement};
    for e in &mut t.elements {
        match e {
            TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                let is_value = ht.params.is_empty()
                    && ht.hash.is_empty()
                    && !ht.block
                    && match &ht.name {
                        Parameter::Path(handlebars::Path::Relative((_, raw))) => {
                            !helpers::is_helper(raw)
                        }
                        _ => false,
                    };
                if is_value {
                    let path =
                        std::mem::replace(&mut ht.name, Parameter::Name(helpers::VALUE.into()));
                    ht.params.push(path);
                }
            }
            TemplateElement::HelperBlock(ht) => {
                // `{{#name}}` where `name` is no helper: a section over its value (a
                // plain name is parsed as a name, a dotted one as a path).
                let section = if !ht.params.is_empty() || !ht.hash.is_empty() {
                    None
                } else {
                    match &ht.name {
                        Parameter::Path(handlebars::Path::Relative((_, raw)))
                            if !helpers::is_helper(raw) =>
                        {
                            Some(ht.name.clone())
                        }
                        Parameter::Name(name) if !helpers::is_helper(name) => {
                            handlebars::Path::parse(name).ok().map(Parameter::Path)
                        }
                        _ => None,
                    }
                };
                if let Some(value) = section {
                    ht.name = Parameter::Name(helpers::SECTION.into());
                    ht.params.push(value);
                }
                if let Some(t) = &mut ht.template {
                    values_through_helper(t);
                }
                if let Some(t) = &mut ht.inverse {
                    values_through_helper(t);
                }
            }
            _ => {}
        }
    }
}

pub fn render(template: &Template, ctx: &handlebars::Context) -> Result<String, Error> {
    helpers::reset_vars();
    let reg = registry();
    let mut rc = handlebars::RenderContext::new(None);
    let mut out = handlebars::StringOutput::new();
    use handlebars::Renderable;
    template
        .render(reg, ctx, &mut rc, &mut out)
        .map_err(|e| Error(format!("template failed: {}", render_error(&e))))?;
    out.into_string().map_err(|e| Error(e.to_string()))
}

fn render_error(e: &handlebars::RenderError) -> String {
    match e.reason() {
        handlebars::RenderErrorReason::Other(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders one template string against a model (tests and one-off use).
pub fn render_str(text: &str, model: &Value) -> Result<String, Error> {
    render(&compile(text)?, &handlebars::Context::from(model.clone()))
}

/// Fields by name: the first value (path parameters), every value (WireMock's
/// list-or-single values) and the last value.
fn field_values(fields: &[(String, String)], lower: bool) -> [Map<String, Value>; 3] {
    let mut first = Map::new();
    let mut all: Map<String, Value> = Map::new();
    let mut last = Map::new();
    for (k, v) in fields {
        let k = if lower {
            k.to_ascii_lowercase()
        } else {
            k.clone()
        };
        first
            .entry(k.clone())
            .or_insert_with(|| Value::String(v.clone()));
        last.insert(k.clone(), Value::String(v.clone()));
        if let Value::Array(a) = all.entry(k).or_insert_with(|| Value::Array(Vec::new())) {
            a.push(Value::String(v.clone()));
        }
    }
    [first, all, last]
}

/// The first value of header `name` (any case).
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Whether WireMock reads a body of this content type as text: its mime type
/// contains `text`, `json`, `xml`, `html`, `yaml`, `csv` or
/// `x-www-form-urlencoded` (WireMock's `ContentTypes`, case as written). A part
/// without a content type is binary.
fn is_text_type(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else {
        return false;
    };
    let mime = ct.split(';').next().unwrap_or_default().trim();
    [
        "text",
        "json",
        "xml",
        "html",
        "yaml",
        "csv",
        "x-www-form-urlencoded",
    ]
    .iter()
    .any(|t| mime.contains(t))
}

/// The named parts of a `multipart/*` request (a part's name is the field name of
/// its `form-data` disposition; a part without one is left out, as WireMock's
/// parser leaves it); none for any other request.
fn named_parts(h: &types::HttpRequest) -> Vec<(String, decoy_multipart::Part<'_>)> {
    let Some(boundary) = header(&h.headers, "content-type").and_then(decoy_multipart::boundary)
    else {
        return Vec::new();
    };
    decoy_multipart::parse(&h.body, &boundary)
        .into_iter()
        .filter_map(|p| Some((p.name()?, p)))
        .collect()
}

/// WireMock builds `request.parts` as a map and fails the whole response when two
/// parts have the same name (a Java `IllegalStateException: Duplicate key`). Here
/// only a template that reads `request.parts` fails, with this reason.
pub(crate) fn duplicate_part(req: &Request) -> Option<String> {
    let types::Request::Http(h) = &req.0 else {
        return None;
    };
    let parts = named_parts(h);
    parts.iter().enumerate().find_map(|(i, (name, _))| {
        parts[..i].iter().any(|(n, _)| n == name).then(|| {
            format!("request.parts: two parts are named {name:?} (WireMock fails such a request with \"Duplicate key {name}\")")
        })
    })
}

/// WireMock's `request.parts`: the named parts of a `multipart/*` body (see
/// [`named_parts`]), each with its `name`, `headers` (by lower-case name, as
/// WireMock's parser gives them; template paths to them are lower-cased), `body`
/// (as text), `bodyAsBase64` and `binary`. Empty for any other request.
fn parts_model(h: &types::HttpRequest) -> Value {
    let mut out = Map::new();
    for (name, part) in named_parts(h) {
        let mut headers: Map<String, Value> = Map::new();
        for (k, v) in &part.headers {
            let key = k.to_ascii_lowercase();
            if let Value::Array(a) = headers.entry(key).or_insert_with(|| json!([])) {
                a.push(Value::String(v.clone()));
            }
        }
        let binary = !is_text_type(part.header("content-type"));
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, part.body);
        out.insert(
            name.clone(),
            json!({
                "name": name,
                "headers": headers,
                "body": String::from_utf8_lossy(part.body),
                "bodyAsBase64": b64,
                "binary": binary,
            }),
        );
    }
    Value::Object(out)
}

/// WireMock's `request` model; with `only`, just those fields (the others cost
/// nothing to leave out: the headers map, the base64 body...).
pub fn request_model(req: &Request, only: Option<&[&str]>) -> Value {
    let wanted = |k: &str| only.is_none_or(|o| o.contains(&k));
    let mut m = Map::new();
    let mut put = |k: &str, f: &dyn Fn() -> Value| {
        if wanted(k) {
            m.insert(k.to_owned(), f());
        }
    };
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    match &req.0 {
        types::Request::Http(h) => {
            let (scheme, host, port) = base_url_parts(&h.base_url);
            put("url", &|| json!(h.url));
            put("path", &|| json!(h.path));
            put("pathSegments", &|| {
                Value::Array(
                    h.path
                        .split('/')
                        .filter(|s| !s.is_empty())
                        .map(|s| {
                            Value::String(
                                percent_encoding::percent_decode_str(s)
                                    .decode_utf8_lossy()
                                    .into_owned(),
                            )
                        })
                        .collect(),
                )
            });
            let [params, _, _] = field_values(&h.path_parameters, false);
            put("pathParams", &|| Value::Object(params.clone()));
            let list = |f: &[(String, String)], lower: bool, i: usize| {
                let [a, b, c] = field_values(f, lower);
                Value::Object([a, b, c].into_iter().nth(i).unwrap_or_default())
            };
            put("query", &|| list(&h.query, false, 1));
            put("queryLast", &|| list(&h.query, false, 2));
            put("headers", &|| list(&h.headers, true, 1));
            put("headersLast", &|| list(&h.headers, true, 2));
            put("cookies", &|| list(&h.cookies, false, 1));
            put("cookiesLast", &|| list(&h.cookies, false, 2));
            put("id", &|| json!(uuid::Uuid::new_v4().to_string()));
            put("isMultipart", &|| {
                json!(
                    h.headers
                        .iter()
                        .any(|(k, v)| k.eq_ignore_ascii_case("content-type")
                            && v.to_ascii_lowercase().starts_with("multipart/"))
                )
            });
            put("parts", &|| parts_model(h));
            put("clientIp", &|| {
                json!(decoy_template::client_ip(&direct::View(req)))
            });
            put("method", &|| json!(h.method));
            put("body", &|| json!(String::from_utf8_lossy(&h.body)));
            put("bodyAsBase64", &|| json!(b64(&h.body)));
            put("baseUrl", &|| json!(h.base_url));
            put("scheme", &|| json!(scheme));
            put("host", &|| json!(host));
            put("port", &|| json!(port));
        }
        types::Request::Mq(q) => {
            put("url", &|| json!(q.destination));
            put("path", &|| json!(q.destination));
            put("destination", &|| json!(q.destination));
            put("replyTo", &|| json!(q.reply_to));
            put("messageId", &|| json!(q.message_id));
            put("correlationId", &|| json!(q.correlation_id));
            put("headers", &|| {
                Value::Object(field_values(&q.properties, true)[1].clone())
            });
            put("headersLast", &|| {
                Value::Object(field_values(&q.properties, true)[2].clone())
            });
            put("query", &|| json!({}));
            put("cookies", &|| json!({}));
            put("method", &|| json!(""));
            put("body", &|| json!(String::from_utf8_lossy(&q.body)));
            put("bodyAsBase64", &|| json!(b64(&q.body)));
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests;
