//! A stub's response templates, on the host's side of the `response-template`
//! plugin.
//!
//! When a stub whose transformers include `response-template` (or every stub, with
//! `--global-response-templating`) loads, each of its templates (the body, each
//! header value with `{{` in it) is compiled here with the plugin's own compiler
//! (`decoy_template::compile`), once, on the loading thread:
//! - a template that does not compile is a problem of the stub, said with the file,
//!   the stub, the field (`response.jsonBody`, `response.headers.Location`) and the
//!   line and column, like a bad matcher; a request never meets it;
//! - when every template of the answer is plain (text and request fields, see
//!   `decoy_template::Plain`) and `response-template` is the stub's only transformer
//!   (and the bundled one), the compiled templates are kept ([`NativeTemplates`],
//!   shared by every serving thread) and rendered here on the request path: no wasm
//!   call, nothing compiled per request or per instance, no deadline to meet. What
//!   they render is what the plugin renders, byte for byte (the field meanings are
//!   `decoy_template::Field`'s, which the plugin uses too, and a test compares both
//!   ways on real requests);
//! - every other template (a helper, a block, `parameters`, or any template of a
//!   stub with another transformer too) is the plugin's to render, in the sandbox,
//!   but not to compile: when the plugin is the bundled one, what was compiled here
//!   is put in its `cache` (`share`), as bytes under the key the plugin looks it
//!   up by (`decoy_template::cached`, which both sides call), at each load of the
//!   stub. An instance reads it when the plugin runtime prepares the instance for
//!   the mapping, before its first call and outside the call's deadline, and keeps
//!   it for that instance's calls: a stub's first request compiles nothing, however
//!   large its template. The plugin compiles a template itself (once for all its
//!   instances, and puts it there for the others) only when the cache lacks it:
//!   after the plugin's code was reloaded, which empties its cache while the stubs
//!   stay loaded, or when the bound dropped it.
//!
//! An MQ reply's templates, which the plugin always renders, are compiled and put
//! the same way (`check`). Nothing is serialized for templates rendered here, and
//! nothing on the request path.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use decoy_plugin_host::{Plugin, PluginFailure};
use decoy_spec::fields::{FieldError, Fields, join};
use decoy_spec::plan::ResponsePlan;
use decoy_spec::request::RequestSnapshot;
use decoy_template::cached::{cache_key, to_bytes};
use decoy_template::fields::{Message, RequestFields, first};
use decoy_template::{Plain, Template, compile};
use http::{HeaderName, HeaderValue};
use serde_json::Value;

/// The name of the bundled templating plugin.
pub const PLUGIN: &str = "response-template";

/// A stub answer's templates, compiled when it loaded, rendered by the host.
#[derive(Debug)]
pub struct NativeTemplates {
    body: Option<Plain>,
    /// By position in the answer's headers.
    headers: Vec<(usize, Plain)>,
    /// The answer they were compiled from (a plan that is no longer it goes to the
    /// plugin).
    stub_headers: Arc<[(HeaderName, HeaderValue)]>,
    stub_body: Bytes,
}

/// What loading a stub's templates gave.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    /// Every template compiled, with its text.
    pub(crate) compiled: Vec<(Cow<'a, str>, Template)>,
    /// The templates, when the host can render them all.
    pub(crate) native: Option<NativeTemplates>,
}

/// The fields an HTTP stub's body may come from, in the order they are looked for.
const HTTP_BODY_KEYS: [&str; 4] = ["body", "jsonBody", "base64Body", "bodyFileName"];

/// Compiles the templates of an answer: its body when it is UTF-8 text with `{{` in
/// it, and each such header value (as the plugin sees them). `response` is the
/// stub's `response` object, for the names of the fields in errors.
pub(crate) fn prepare<'a>(
    response: Option<&Value>,
    headers: &'a Arc<[(HeaderName, HeaderValue)]>,
    body: &'a Bytes,
) -> Result<Prepared<'a>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut compiled = Vec::new();
    let mut all_plain = true;
    let mut body_template = None;
    if let Some((text, result)) = compile_body(response, &HTTP_BODY_KEYS, body) {
        match result {
            Ok(t) => {
                body_template = Plain::of(&t);
                all_plain &= body_template.is_some();
                compiled.push((Cow::Borrowed(text), t));
            }
            Err(e) => errors.push(e),
        }
    }
    let mut header_templates = Vec::new();
    for (i, (name, value)) in headers.iter().enumerate() {
        let value = String::from_utf8_lossy(value.as_bytes());
        let field = || join("response.headers", &header_name(response, name));
        let Some(result) = compile_field(field, &value) else {
            continue;
        };
        match result {
            Ok(t) => {
                match Plain::of(&t) {
                    Some(p) => header_templates.push((i, p)),
                    None => all_plain = false,
                }
                compiled.push((value, t));
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Prepared {
        compiled,
        native: all_plain.then(|| NativeTemplates {
            body: body_template,
            headers: header_templates,
            stub_headers: headers.clone(),
            stub_body: body.clone(),
        }),
    })
}

/// Compiles the templates of an answer the host never renders itself (an MQ reply,
/// whose reply the plugin always builds), only to find those that do not compile:
/// its `body` when it is UTF-8 text with `{{` in it (read from whichever of
/// `body_keys` `response` gives) and each of `values` (a field's path and its text)
/// with `{{` in it. Returns those compiled, with their texts, or every error.
pub(crate) fn check<'a>(
    response: Option<&Value>,
    body_keys: &[&str],
    body: &'a [u8],
    values: &[(String, &'a str)],
) -> Result<Vec<(Cow<'a, str>, Template)>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut compiled = Vec::new();
    let body = compile_body(response, body_keys, body);
    let values = values.iter().filter_map(|(field, text)| {
        compile_field(|| field.clone(), text).map(|result| (*text, result))
    });
    for (text, result) in body.into_iter().chain(values) {
        match result {
            Ok(t) => compiled.push((Cow::Borrowed(text), t)),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(compiled)
    } else {
        Err(errors)
    }
}

/// Compiles `body` when it is a template (UTF-8 text with `{{` in it), given with
/// its text; an error is one of the field of `response` it came from (the first of
/// `keys` given), and names the body file it was read from.
fn compile_body<'a>(
    response: Option<&Value>,
    keys: &[&str],
    body: &'a [u8],
) -> Option<(&'a str, Result<Template, FieldError>)> {
    let text = std::str::from_utf8(body)
        .ok()
        .filter(|b| b.contains("{{"))?;
    let result = compile(text).map_err(|e| {
        let (field, file) = body_field(response, keys);
        let message = match file {
            Some(f) => format!("in __files/{f}: {}", e.message),
            None => e.message,
        };
        FieldError::new(field, message)
    });
    Some((text, result))
}

/// Puts each of `templates` (compiled from their texts as the plugin compiles them)
/// in the cache of `plugin`, the bundled `response-template`, under the key the
/// plugin looks it up by, as bytes it reads back (`decoy_template::cached`): no
/// instance of it compiles them then, not even for a stub's first request. A key
/// already there (the same text in another stub, or a reload that left it
/// unchanged) is not written again, nor its template serialized. Nothing is put
/// while the plugin's first load is still compiling: its instances compile them
/// then, once for the plugin, as they do after a reload of the plugin (which
/// empties its cache).
pub(crate) fn share(plugin: &Plugin, templates: Vec<(Cow<'_, str>, Template)>) {
    for (text, template) in templates {
        plugin.cache_put(cache_key(&text), || match to_bytes(&template) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                tracing::warn!(plugin = %plugin.name, "a compiled template cannot be cached ({e}); the plugin compiles it");
                None
            }
        });
    }
}

/// Compiles `text` when it is a template (it has `{{` in it); an error is one of
/// `field` (named only then), with the line and column.
fn compile_field(
    field: impl FnOnce() -> String,
    text: &str,
) -> Option<Result<Template, FieldError>> {
    text.contains("{{")
        .then(|| compile(text).map_err(|e| FieldError::new(field(), e.message)))
}

/// Which field of `response` the body came from (the first of `keys` it gives), and
/// the body file's name.
fn body_field(response: Option<&Value>, keys: &[&str]) -> (String, Option<String>) {
    let given = |k: &str| response.and_then(|r| r.field(k)).filter(|v| !v.is_null());
    for &key in keys {
        if let Some(v) = given(key) {
            let file = (key == "bodyFileName")
                .then(|| v.as_str().map(str::to_owned))
                .flatten();
            return (join("response", key), file);
        }
    }
    (
        join("response", keys.first().copied().unwrap_or("body")),
        None,
    )
}

/// A header's name as the stub spells it.
fn header_name(response: Option<&Value>, name: &HeaderName) -> String {
    response
        .and_then(|r| r.field("headers"))
        .and_then(Value::as_object)
        .and_then(|h| h.keys().find(|k| k.eq_ignore_ascii_case(name.as_str())))
        .cloned()
        .unwrap_or_else(|| name.as_str().to_owned())
}

impl NativeTemplates {
    /// Whether `plan` still holds the answer these were compiled from.
    pub fn is_for(&self, plan: &ResponsePlan) -> bool {
        let same_body = self.stub_body.as_ptr() == plan.body.as_ptr()
            && self.stub_body.len() == plan.body.len();
        (Arc::ptr_eq(&self.stub_headers, &plan.headers) || self.stub_headers == plan.headers)
            && (same_body || self.stub_body == plan.body)
    }

    /// Renders the templates into `plan` for `req`, as `plugin` would. A header
    /// value that is not a valid one fails as a plugin's answer with it fails.
    pub fn render(
        &self,
        plugin: &Plugin,
        req: &RequestSnapshot,
        path_parameters: &[(String, String)],
        plan: &mut ResponsePlan,
    ) -> Result<(), PluginFailure> {
        let view = SnapshotFields {
            req,
            path_parameters,
            base_url: OnceCell::new(),
        };
        if let Some(t) = &self.body {
            plan.body = Bytes::from(t.render(&view));
        }
        if !self.headers.is_empty() {
            let mut headers = plan.headers.to_vec();
            for (i, t) in &self.headers {
                let value = t.render(&view);
                let Some((name, slot)) = headers.get_mut(*i) else {
                    continue;
                };
                *slot = HeaderValue::from_str(&value).map_err(|_| {
                    let reason =
                        format!("it returned an invalid value for header {name}: {value:?}");
                    plugin.stats.failures.fetch_add(1, Relaxed);
                    tracing::warn!(plugin = %plugin.name, "plugin call failed: {reason}");
                    PluginFailure {
                        plugin: plugin.name.clone(),
                        reason,
                        loading: false,
                    }
                })?;
            }
            plan.headers = Arc::from(headers);
        }
        plugin.stats.host_rendered.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// A request snapshot as templates read it: the same text the plugin is given
/// (`plugins::fill_http_request`), read in place.
struct SnapshotFields<'a> {
    req: &'a RequestSnapshot,
    path_parameters: &'a [(String, String)],
    base_url: OnceCell<String>,
}

impl RequestFields for SnapshotFields<'_> {
    fn message(&self) -> Option<Message<'_>> {
        None
    }

    fn method(&self) -> &str {
        &self.req.method
    }

    fn url(&self) -> &str {
        &self.req.url
    }

    fn path(&self) -> &str {
        self.req.path()
    }

    fn body(&self) -> &[u8] {
        &self.req.body
    }

    fn base_url(&self) -> &str {
        self.base_url.get_or_init(|| {
            let mut s = String::new();
            crate::plugins::write_base_url(&mut s, self.req);
            s
        })
    }

    fn query(&self, name: &str) -> Option<&str> {
        first(self.req.query(), name)
    }

    fn header(&self, lower: &str) -> Option<Cow<'_, str>> {
        // Names are compared as written in lower case: a name with an upper-case
        // letter matches none (the plugin compares them so).
        if lower.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        self.req
            .headers
            .get(lower)
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        first(self.req.cookies(), name)
    }

    fn path_param(&self, name: &str) -> Option<&str> {
        first(self.path_parameters, name)
    }

    fn peer_ip(&self) -> Option<Cow<'_, str>> {
        self.req
            .client_addr
            .map(|a| Cow::Owned(a.ip().to_canonical().to_string()))
    }
}
