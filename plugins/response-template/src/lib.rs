//! WireMock's response templating, as a decoy transformer plugin.
//!
//! A mapping with `"transformers": ["response-template"]` has its body (inline or
//! from `bodyFileName`) and its header values rendered as Handlebars templates
//! against WireMock's model: `request.url`, `request.path`, `request.pathSegments`,
//! named path parameters (`request.path.id`), `request.query.*`,
//! `request.headers.*`, `request.cookies.*`, `request.method`, `request.body`,
//! `request.baseUrl`, and `parameters.*` (the mapping's `transformerParameters`).
//! The helpers are listed in [`helpers`]. An MQ message is templated the same way:
//! its properties are `request.headers`, and `request.destination`,
//! `request.correlationId`, `request.messageId` and `request.replyTo` are set.
//!
//! Templates are compiled once per mapping and text in each instance, and kept
//! (see [`Cache`]); a body or header without `{{` is passed through untouched.

pub mod dates;
pub mod helpers;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use decoy_plugin::{Context, Error, Request, Response, Transformer, wit::types};
use handlebars::{Handlebars, Template};
use serde_json::{Map, Value, json};

/// The transformer.
#[derive(Debug)]
pub struct ResponseTemplate;

impl Transformer for ResponseTemplate {
    fn transform(ctx: &Context, req: &Request, mut resp: Response) -> Result<Response, Error> {
        let body_is_template = std::str::from_utf8(resp.body())
            .map(|b| b.contains("{{"))
            .unwrap_or(false);
        let header_templates = resp.headers().iter().any(|(_, v)| v.contains("{{"));
        if !body_is_template && !header_templates {
            return Ok(resp);
        }
        let parameters: Value = serde_json::from_str(ctx.parameters_json()).unwrap_or(json!({}));
        let model = json!({ "request": request_model(req), "parameters": parameters });
        let id = ctx.mapping_id();
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if body_is_template {
                let text = resp.body_text().into_owned();
                let out = cache.render(id, "body", &text, &model)?;
                resp.set_body(out);
            }
            if header_templates {
                let mut headers = resp.headers().to_vec();
                for (i, (name, value)) in headers.iter_mut().enumerate() {
                    if value.contains("{{") {
                        *value = cache
                            .render(id, &format!("header {i}"), value, &model)
                            .map_err(|e| Error(format!("header {name}: {e}")))?;
                    }
                }
                *resp.headers_mut() = headers;
            }
            Ok(resp)
        })
    }
}

decoy_plugin::export!(transformer = ResponseTemplate);

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Compiled templates, by mapping, field and text. A mapping whose text changed (a
/// reload) gets a new entry; the cache is emptied when it grows past a bound.
#[derive(Default)]
#[allow(missing_debug_implementations)]
pub struct Cache {
    templates: HashMap<(String, String), (String, Template)>,
}

const MAX_CACHED: usize = 20_000;

impl Cache {
    pub fn render(
        &mut self,
        mapping: &str,
        field: &str,
        text: &str,
        model: &Value,
    ) -> Result<String, Error> {
        let key = (mapping.to_owned(), field.to_owned());
        let fresh = match self.templates.get(&key) {
            Some((t, _)) => t != text,
            None => true,
        };
        if fresh {
            if self.templates.len() >= MAX_CACHED {
                self.templates.clear();
            }
            let template = compile(text)?;
            self.templates
                .insert(key.clone(), (text.to_owned(), template));
        }
        let (_, template) = &self.templates[&key];
        render(template, model)
    }
}

/// The registry with WireMock's helpers (built once per instance).
pub fn registry() -> &'static Handlebars<'static> {
    static REGISTRY: OnceLock<Handlebars<'static>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut h = Handlebars::new();
        helpers::register(&mut h);
        h
    })
}

/// Compiles `text` after rewriting WireMock-only paths into this model's names.
pub fn compile(text: &str) -> Result<Template, Error> {
    let text = rewrite_paths(text);
    Template::compile(&text).map_err(|e| Error(format!("bad template: {e}")))
}

pub fn render(template: &Template, model: &Value) -> Result<String, Error> {
    let reg = registry();
    let ctx = handlebars::Context::wraps(model).map_err(|e| Error(e.to_string()))?;
    let mut rc = handlebars::RenderContext::new(None);
    let mut out = handlebars::StringOutput::new();
    use handlebars::Renderable;
    template
        .render(reg, &ctx, &mut rc, &mut out)
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
    render(&compile(text)?, model)
}

/// WireMock names some values by paths this model cannot hold as JSON (`request.path`
/// is both a string and a list of segments; header names are case-insensitive), so
/// templates are rewritten before compiling:
/// - `request.path.[0]` → `request.pathSegments.[0]`, `request.path.id` → `request.pathParams.id`
/// - `request.headers.Content-Type` → `request.headers.[content-type]`
/// - `request.query.a.[1]` → `request.queryAll.a.[1]` (and `headersAll` likewise)
/// - `request.requestLine.x` → `request.x` (WireMock 2's older names)
pub fn rewrite_paths(text: &str) -> String {
    static RULES: OnceLock<[regex::Regex; 5]> = OnceLock::new();
    let [line, hdr_idx, hdr, query_idx, path] = RULES.get_or_init(|| {
        [
            regex::Regex::new(r"request\.requestLine\.").expect("valid"),
            regex::Regex::new(r"request\.headers\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)\.\[(\d+)\]")
                .expect("valid"),
            regex::Regex::new(r"request\.headers\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)").expect("valid"),
            regex::Regex::new(r"request\.query\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)\.\[(\d+)\]")
                .expect("valid"),
            regex::Regex::new(r"request\.path\.(\[\d+\]|[A-Za-z_][A-Za-z0-9_\-]*)").expect("valid"),
        ]
    });
    let bare = |s: &str| {
        s.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    };
    let t = line.replace_all(text, "request.");
    let t = hdr_idx.replace_all(&t, |c: &regex::Captures| {
        format!("request.headersAll.[{}].[{}]", bare(&c[1]), &c[2])
    });
    let t = hdr.replace_all(&t, |c: &regex::Captures| {
        format!("request.headers.[{}]", bare(&c[1]))
    });
    let t = query_idx.replace_all(&t, "request.queryAll.$1.[$2]");
    let t = path.replace_all(&t, |c: &regex::Captures| {
        let seg = &c[1];
        if seg.starts_with('[') {
            format!("request.pathSegments.{seg}")
        } else {
            format!("request.pathParams.{seg}")
        }
    });
    t.into_owned()
}

fn first_values(
    fields: &[(String, String)],
    lower: bool,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut first = Map::new();
    let mut all: Map<String, Value> = Map::new();
    for (k, v) in fields {
        let k = if lower {
            k.to_ascii_lowercase()
        } else {
            k.clone()
        };
        first
            .entry(k.clone())
            .or_insert_with(|| Value::String(v.clone()));
        match all.entry(k).or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(a) => a.push(Value::String(v.clone())),
            _ => unreachable!("only arrays are inserted"),
        }
    }
    (first, all)
}

/// WireMock's `request` model.
pub fn request_model(req: &Request) -> Value {
    match &req.0 {
        types::Request::Http(h) => {
            let (query, query_all) = first_values(&h.query, false);
            let (headers, headers_all) = first_values(&h.headers, true);
            let (cookies, _) = first_values(&h.cookies, false);
            let (path_params, _) = first_values(&h.path_parameters, false);
            let segments: Vec<Value> = h
                .path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Value::String(
                        percent_encoding::percent_decode_str(s)
                            .decode_utf8_lossy()
                            .into_owned(),
                    )
                })
                .collect();
            let (scheme, rest) = h
                .base_url
                .split_once("://")
                .unwrap_or(("http", &h.base_url));
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, port)) => (host, port.parse::<u16>().ok()),
                None => (rest, None),
            };
            json!({
                "url": h.url,
                "path": h.path,
                "pathSegments": segments,
                "pathParams": path_params,
                "query": query,
                "queryAll": query_all,
                "headers": headers,
                "headersAll": headers_all,
                "cookies": cookies,
                "method": h.method,
                "body": String::from_utf8_lossy(&h.body),
                "bodyAsBase64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &h.body),
                "baseUrl": h.base_url,
                "scheme": scheme,
                "host": host,
                "port": port,
            })
        }
        types::Request::Mq(m) => {
            let (headers, headers_all) = first_values(&m.properties, false);
            json!({
                "url": m.destination,
                "path": m.destination,
                "destination": m.destination,
                "replyTo": m.reply_to,
                "messageId": m.message_id,
                "correlationId": m.correlation_id,
                "headers": headers,
                "headersAll": headers_all,
                "query": {},
                "cookies": {},
                "method": "",
                "body": String::from_utf8_lossy(&m.body),
                "bodyAsBase64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &m.body),
            })
        }
    }
}

#[cfg(test)]
mod tests;
