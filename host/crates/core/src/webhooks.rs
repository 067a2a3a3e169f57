//! WireMock's webhooks: a stub (or a transport's own mapping) that names the `webhook` serve-event
//! listener sends an HTTP request of its own once it has answered.
//!
//! This module owns what is transport-neutral: reading the definitions as WireMock
//! 3.13 reads them (`serveEventListeners`, and the older `postServeActions` in both its
//! list and its map form), and rendering one for a served request through the
//! `response-template` plugin (WireMock always templates webhooks, with the request
//! as `originalRequest` and the webhook's own parameters as `parameters`). The answer
//! the request got is there too, as `originalResponse` (`status`, `headers`, `body`:
//! the name WireMock's open proposal for it uses; WireMock 3.13 renders it empty),
//! so a listener can pass on what the stub answered (an id it generated). Sending is
//! behind [`WebhookSink`]: the `decoy` crate implements it with its pooled HTTP
//! client, and transports hand it what they served through the serve step
//! ([`crate::serve::Outcomes::hand_off`]) once their answer is out (a response
//! written, a reply confirmed).
//!
//! WireMock loads a stub whose webhook can never be sent (no `url`, a `delay` that is
//! not a distribution, bad base64...) and fails the webhook each time it fires; decoy
//! does the same, and says why when the stub is loaded (a warning naming the field).
//! What WireMock refuses to load (a listener that is not an object, `parameters` that
//! are not an object) is an error here too.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use bytes::Bytes;
use decoy_plugin_host::{Plugin, PluginRequest, Plugins, wit};
use decoy_spec::fields::{FieldError, Fields, index, join, kind, show};
use decoy_spec::plan::DelayDistribution;
use serde_json::{Map, Value};

use crate::publish::{MessageTarget, SubEvents};

/// The listener's name, as WireMock 3 registers it.
pub const NAME: &str = "webhook";

/// decoy's listener that publishes a message on an MQ connection
/// ([`crate::publish`]).
pub const MESSAGE: &str = "message";

/// The templating plugin webhooks are rendered with.
const TEMPLATER: &str = "response-template";

/// One webhook of a mapping, as written; rendered per request by [`Webhook::render`].
#[derive(Debug)]
pub struct Webhook {
    /// Where it is in the mapping (`serveEventListeners[0]`), for messages.
    pub at: String,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<WebhookBody>,
    pub delay: Option<DelayDistribution>,
    /// Why it can never be sent, when that is known from the definition alone.
    pub broken: Option<String>,
    /// A `message` listener: where it publishes (its `headers` are the message's
    /// properties, its body the message's). Its `destination` is a template when
    /// `destination_templated`.
    pub message: Option<MessageTarget>,
    destination_templated: bool,
    /// Some template names `originalResponse`: the answer is kept for it.
    uses_answer: bool,
    /// The listener's `parameters` as JSON, the model's `parameters`.
    parameters: Arc<str>,
    /// `response-template`, when some field is a template.
    templater: Option<Arc<Plugin>>,
    context: OnceLock<wit::CallContext>,
}

#[derive(Debug)]
enum WebhookBody {
    /// `body`: a template.
    Text(String),
    /// `base64Body`: sent as decoded, not templated (as in WireMock).
    Binary(Bytes),
}

/// A webhook rendered for one request: what to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookCall {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Sent only with `POST`, `PUT` and `PATCH`, as WireMock does (always for a
    /// message).
    pub body: Option<Bytes>,
    /// A message to publish there, rather than an HTTP request (`headers` are its
    /// properties).
    pub message: Option<MessageTarget>,
}

/// The webhooks of one mapping (a thin pointer: every mapping carries the field).
pub type Webhooks = Arc<Vec<Webhook>>;

/// What a transport hands the sink for one served request.
pub struct Fired {
    pub hooks: Webhooks,
    pub mapping_id: Arc<str>,
    /// The mapping as messages name it (file, position, id, name).
    pub mapping: String,
    /// The request the mapping answered, as the templates see it.
    pub request: PluginRequest,
    /// Resolves when the answer is out (the HTTP response written); the webhooks wait
    /// for it. `None`: already out.
    pub after: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Where the journal entry of the request keeps what became of its listeners.
    pub journal: Option<Arc<SubEvents>>,
    /// The answer the request got, for templates that name `originalResponse`; set
    /// by the transport only when [`wants_answer`] says some hook uses it.
    pub answer: Option<Answer>,
}

/// The answer a served request got, as listeners' templates see it
/// (`originalResponse`). Shares the answer's buffers: keeping it copies no body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status; `None` for an MQ reply.
    pub status: Option<u16>,
    pub headers: AnswerHeaders,
    pub body: Bytes,
}

/// An answer's headers: an HTTP response's, or an MQ reply's properties.
#[derive(Debug, Clone)]
pub enum AnswerHeaders {
    Http(Arc<[(http::HeaderName, http::HeaderValue)]>),
    Properties(Vec<(String, String)>),
}

impl Answer {
    /// An HTTP response's status, headers and body.
    pub fn http(
        status: u16,
        headers: Arc<[(http::HeaderName, http::HeaderValue)]>,
        body: Bytes,
    ) -> Answer {
        Answer {
            status: Some(status),
            headers: AnswerHeaders::Http(headers),
            body,
        }
    }

    /// An MQ reply's body and properties.
    pub fn reply(body: Bytes, properties: Vec<(String, String)>) -> Answer {
        Answer {
            status: None,
            headers: AnswerHeaders::Properties(properties),
            body,
        }
    }

    /// What it holds beyond its shared buffers, and the body (for the webhooks'
    /// byte budget).
    pub fn bytes(&self) -> usize {
        let headers: usize = match &self.headers {
            AnswerHeaders::Http(h) => h.iter().map(|(k, v)| k.as_str().len() + v.len()).sum(),
            AnswerHeaders::Properties(p) => p.iter().map(|(k, v)| k.len() + v.len()).sum(),
        };
        headers + self.body.len()
    }

    /// `originalResponse` in the template model: `status` (HTTP), `headers` by lower
    /// case name, each its value, or the list of its values when it has several (so
    /// `{{originalResponse.headers.Location}}` is the value, as `request.headers`
    /// reads), `body` as text.
    fn model(&self) -> Value {
        let mut headers: Map<String, Value> = Map::new();
        let mut add = |name: String, value: String| {
            if let Value::Array(values) = headers
                .entry(name)
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                values.push(Value::String(value));
            }
        };
        match &self.headers {
            AnswerHeaders::Http(h) => {
                for (k, v) in h.iter() {
                    add(
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    );
                }
            }
            AnswerHeaders::Properties(p) => {
                for (k, v) in p {
                    add(k.to_ascii_lowercase(), v.clone());
                }
            }
        }
        for value in headers.values_mut() {
            if let Value::Array(values) = value
                && values.len() == 1
            {
                *value = values.pop().unwrap_or(Value::Null);
            }
        }
        let mut m = Map::new();
        if let Some(s) = self.status {
            m.insert("status".into(), Value::from(s));
        }
        m.insert("headers".into(), Value::Object(headers));
        m.insert(
            "body".into(),
            Value::String(String::from_utf8_lossy(&self.body).into_owned()),
        );
        Value::Object(m)
    }
}

/// Whether some hook of `hooks` names `originalResponse` (so the transport keeps the
/// answer for it).
pub fn wants_answer(hooks: &[Webhook]) -> bool {
    hooks.iter().any(|h| h.uses_answer)
}

/// Where a listener's template finds the answer: a key of the model's `parameters`
/// that [`webhook_template`] points `originalResponse` to (the templating plugin's
/// model has `request` and `parameters` only).
const ANSWER_KEY: &str = "originalResponse";

impl fmt::Debug for Fired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fired")
            .field("mapping", &self.mapping)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

/// Sends webhooks in the background. `fire` returns at once: nothing a webhook does
/// (its delay, a slow or dead target) may hold up or change the answer.
pub trait WebhookSink: Send + Sync + fmt::Debug {
    fn fire(&self, fired: Fired);
}

impl<S: WebhookSink + ?Sized> WebhookSink for Arc<S> {
    fn fire(&self, fired: Fired) {
        (**self).fire(fired)
    }
}

/// Reads `serveEventListeners` and `postServeActions` from a mapping object.
/// `Ok(None)`: it has no webhook.
pub fn parse(
    obj: &Map<String, Value>,
    plugins: Option<&Plugins>,
    files: crate::mapping::BodyFiles<'_>,
    warnings: &mut Vec<FieldError>,
) -> Result<Option<Webhooks>, Vec<FieldError>> {
    let mut hooks = Vec::new();
    let mut errors = Vec::new();
    let mut listeners = |key: &str, items: &[Value], warnings: &mut Vec<FieldError>| {
        for (i, item) in items.iter().enumerate() {
            match parse_listener(item, &index(key, i), plugins, files, warnings) {
                Ok(Some(h)) => hooks.push(h),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
    };
    match obj.field("serveEventListeners") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => listeners("serveEventListeners", items, warnings),
        Some(other) => warnings.push(FieldError::new(
            "serveEventListeners",
            format!(
                "expected a list of listeners, found {}: WireMock 3.13 reads it as no listener, so nothing is sent",
                kind(other)
            ),
        )),
    }
    match obj.field("postServeActions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => listeners("postServeActions", items, warnings),
        // WireMock 2's form: `{"webhook": {...parameters}}`.
        Some(Value::Object(actions)) => {
            for (name, params) in actions {
                let at = join("postServeActions", name);
                if name != NAME {
                    warnings.push(not_installed(&at, name));
                    continue;
                }
                match webhook_from(params, &at, plugins, warnings) {
                    Ok(h) => hooks.push(h),
                    Err(e) => errors.push(e),
                }
            }
        }
        Some(other) => errors.push(FieldError::new(
            "postServeActions",
            format!("expected a list of listeners, found {}", kind(other)),
        )),
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((!hooks.is_empty()).then(|| Arc::new(hooks)))
}

fn not_installed(at: &str, name: &str) -> FieldError {
    FieldError::new(
        at,
        format!(
            "no listener named {name:?}: decoy has WireMock 3's {NAME:?} and its own {MESSAGE:?}; ignored, as WireMock ignores a listener that is not installed"
        ),
    )
}

/// One `{"name": ..., "parameters": {...}}`; `None` when it is not a webhook.
fn parse_listener(
    item: &Value,
    at: &str,
    plugins: Option<&Plugins>,
    files: crate::mapping::BodyFiles<'_>,
    warnings: &mut Vec<FieldError>,
) -> Result<Option<Webhook>, FieldError> {
    let Value::Object(o) = item else {
        return Err(FieldError::new(
            at,
            format!(
                "expected an object with \"name\" and \"parameters\", found {}",
                kind(item)
            ),
        ));
    };
    for k in o.keys() {
        if !["name", "parameters", "requestPhases"].contains(&k.as_str()) {
            warnings.push(FieldError::new(
                join(at, k),
                "unknown field, ignored (a listener has name and parameters)",
            ));
        }
    }
    match o.field("name") {
        None | Some(Value::Null) => {
            warnings.push(FieldError::new(
                join(at, "name"),
                "missing: no listener is named, so nothing is sent (as in WireMock)",
            ));
            Ok(None)
        }
        Some(Value::String(n)) if n == NAME => {
            let params = o.field("parameters").unwrap_or(&Value::Null);
            webhook_from(params, &join(at, "parameters"), plugins, warnings).map(Some)
        }
        Some(Value::String(n)) if n == MESSAGE => {
            let params = o.field("parameters").unwrap_or(&Value::Null);
            message_from(params, &join(at, "parameters"), plugins, files, warnings).map(Some)
        }
        Some(Value::String(n)) => {
            warnings.push(not_installed(&join(at, "name"), n));
            Ok(None)
        }
        Some(other) => Err(FieldError::new(
            join(at, "name"),
            format!("expected a string, found {}", kind(other)),
        )),
    }
}

/// A webhook from its parameters at `at`. Problems WireMock only meets when the
/// webhook fires make it `broken` (with a warning now); the stub is still served.
fn webhook_from(
    params: &Value,
    at: &str,
    plugins: Option<&Plugins>,
    warnings: &mut Vec<FieldError>,
) -> Result<Webhook, FieldError> {
    let empty = Map::new();
    let p = match params {
        Value::Object(p) => p,
        Value::Null => &empty,
        other => {
            return Err(FieldError::new(
                at,
                format!("expected an object, found {}", kind(other)),
            ));
        }
    };
    let mut broken: Vec<FieldError> = Vec::new();
    let mut text =
        |key: &str, default: Option<&str>, broken: &mut Vec<FieldError>| match p.field(key) {
            None | Some(Value::Null) => default.map(str::to_owned),
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                let path = join(at, key);
                match default {
                    // WireMock reads a field that has a default as absent when it is not text.
                    Some(d) => warnings.push(FieldError::new(
                        path,
                        format!(
                            "expected a string, found {}: WireMock uses {d:?} instead",
                            kind(other)
                        ),
                    )),
                    None => broken.push(FieldError::new(
                        path,
                        format!("expected a string, found {}", kind(other)),
                    )),
                }
                default.map(str::to_owned)
            }
        };
    let method = text("method", Some("GET"), &mut broken).unwrap_or_default();
    let url = text("url", None, &mut broken);
    if url.is_none() && p.field("url").is_none_or(Value::is_null) {
        broken.push(FieldError::new(join(at, "url"), "missing"));
    }
    let url = url.unwrap_or_default();
    if !url.is_empty()
        && !url.contains("{{")
        && let Err(reason) = check_url(&url)
    {
        broken.push(FieldError::new(join(at, "url"), reason));
    }
    let mut headers = Vec::new();
    match p.field("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (name, value) in h {
                let path = join(&join(at, "headers"), name);
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    broken.push(FieldError::new(&path, "not a valid HTTP header name"));
                }
                let values: Vec<&Value> = match value {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                for v in values {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    headers.push((name.clone(), text));
                }
            }
        }
        Some(other) => broken.push(FieldError::new(
            join(at, "headers"),
            format!("expected an object of header names, found {}", kind(other)),
        )),
    }
    // `body` wins over `base64Body`, as in WireMock; a `body` that is not text is none.
    let body = match p.field("body") {
        Some(Value::String(s)) => Some(WebhookBody::Text(s.clone())),
        Some(Value::Null) | None => match p.field("base64Body") {
            Some(Value::String(b)) => {
                match base64::engine::general_purpose::STANDARD.decode(b.trim()) {
                    Ok(bytes) => Some(WebhookBody::Binary(Bytes::from(bytes))),
                    Err(e) => {
                        broken.push(FieldError::new(
                            join(at, "base64Body"),
                            format!("not valid base64: {e}"),
                        ));
                        None
                    }
                }
            }
            Some(Value::Null) | None => None,
            Some(other) => {
                warnings.push(FieldError::new(
                    join(at, "base64Body"),
                    format!(
                        "expected a string, found {}: no body is sent (as in WireMock)",
                        kind(other)
                    ),
                ));
                None
            }
        },
        Some(other) => {
            warnings.push(FieldError::new(
                join(at, "body"),
                format!(
                    "expected a string, found {}: no body is sent (as in WireMock); write JSON as a string",
                    kind(other)
                ),
            ));
            None
        }
    };
    let delay = match p.field("delay") {
        None | Some(Value::Null) => None,
        Some(d @ Value::Object(_)) => {
            match decoy_spec::plan::parse_distribution(d, &join(at, "delay")) {
                Ok(d) => Some(d),
                Err(e) => {
                    broken.push(e);
                    None
                }
            }
        }
        Some(other) => {
            broken.push(FieldError::new(
                join(at, "delay"),
                format!(
                    "expected {{\"type\": \"fixed\", \"milliseconds\": ...}} or a uniform or lognormal distribution, found {}",
                    kind(other)
                ),
            ));
            None
        }
    };
    let templated = method.contains("{{")
        || url.contains("{{")
        || headers.iter().any(|(_, v)| v.contains("{{"))
        || matches!(&body, Some(WebhookBody::Text(t)) if t.contains("{{"));
    let uses_answer = templated
        && (names_answer(&method)
            || names_answer(&url)
            || headers.iter().any(|(_, v)| names_answer(v))
            || matches!(&body, Some(WebhookBody::Text(t)) if names_answer(t)));
    let mut templater = None;
    if templated && broken.is_empty() {
        match plugins.map(|p| p.get(TEMPLATER)) {
            Some(Ok(p)) => templater = Some(p),
            Some(Err(e)) => broken.push(FieldError::new(
                at,
                format!("its templates cannot be rendered: {e}"),
            )),
            // Only where plugins are off (some tests): sent as written.
            None => {}
        }
    }
    let broken = (!broken.is_empty()).then(|| {
        let reasons: Vec<String> = broken.iter().map(ToString::to_string).collect();
        let reason = reasons.join("; ");
        for e in broken {
            warnings.push(FieldError::new(
                e.path,
                format!(
                    "{}: the stub is served, and this webhook is never sent (WireMock fails it the same way each time it fires)",
                    e.reason
                ),
            ));
        }
        reason
    });
    Ok(Webhook {
        at: at.to_owned(),
        method,
        url,
        headers,
        body,
        delay,
        broken,
        message: None,
        destination_templated: false,
        uses_answer,
        parameters: Arc::from(Value::Object(p.clone()).to_string()),
        templater,
        context: OnceLock::new(),
    })
}

/// The longest destination name (MQTT's limit; the other brokers refuse a longer
/// name of theirs when it is published to).
pub const MAX_DESTINATION: usize = 65_535;

/// Whether a template names the answer.
fn names_answer(text: &str) -> bool {
    text.contains("{{") && text.contains(ANSWER_KEY)
}

/// Checks a destination a template rendered: a client's request can put anything in
/// it, so what no broker takes as a name to publish to is refused here, before it
/// reaches a connection (where MQTT and NATS would drop the connection over it).
pub fn check_destination(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("rendered empty".into());
    }
    if name.len() > MAX_DESTINATION {
        return Err(format!(
            "rendered {} bytes long, longer than {MAX_DESTINATION}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '*' | '>' | '+' | '#'))
    {
        return Err(format!(
            "rendered as {:?}, which has {c:?}: a rendered destination may not hold whitespace, control characters or the wildcards * > + #",
            show_excerpt(name)
        ));
    }
    Ok(())
}

/// The start of a long value, for messages.
fn show_excerpt(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The fields of a `message` listener's parameters.
const MESSAGE_FIELDS: [&str; 10] = [
    "connection",
    "queue",
    "topic",
    "subject",
    "body",
    "jsonBody",
    "base64Body",
    "bodyFileName",
    "properties",
    "delay",
];

/// A `message` listener from its parameters at `at`:
/// `{"connection": "rabbit", "queue" | "topic" | "subject": "name", "body" | "jsonBody"
/// | "base64Body" | "bodyFileName": ..., "properties": {...}, "delay": {...}}`. Where it goes is checked
/// now (an error names the field); whether the connection exists is checked against
/// `mq-connections.json` by the binary, which knows both.
fn message_from(
    params: &Value,
    at: &str,
    plugins: Option<&Plugins>,
    files: crate::mapping::BodyFiles<'_>,
    warnings: &mut Vec<FieldError>,
) -> Result<Webhook, FieldError> {
    let Value::Object(p) = params else {
        return Err(FieldError::new(
            at,
            format!(
                "expected an object with \"connection\", \"queue\" (or \"topic\", or \"subject\") and \"body\", found {}",
                kind(params)
            ),
        ));
    };
    for k in p.keys() {
        if !MESSAGE_FIELDS.contains(&k.as_str()) {
            warnings.push(FieldError::new(
                join(at, k),
                format!(
                    "unknown field, ignored (a message listener has {})",
                    MESSAGE_FIELDS.join(", ")
                ),
            ));
        }
    }
    let connection = match p.field("connection") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        None | Some(Value::Null) => {
            return Err(FieldError::new(
                join(at, "connection"),
                "missing: name the connectionId of a connection in mq-connections.json",
            ));
        }
        Some(other) => {
            return Err(FieldError::new(
                join(at, "connection"),
                format!(
                    "expected the connectionId of a connection in mq-connections.json, found {}",
                    show(other)
                ),
            ));
        }
    };
    let named: Vec<(&str, &Value)> = ["queue", "topic", "subject"]
        .into_iter()
        .filter_map(|k| p.field(k).filter(|v| !v.is_null()).map(|v| (k, v)))
        .collect();
    let (key, value) = match named.as_slice() {
        [one] => *one,
        [] => {
            return Err(FieldError::new(
                at,
                "no destination: give \"queue\", \"topic\" (MQTT, AMQP's amq.topic) or \"subject\" (NATS)",
            ));
        }
        [first, second, ..] => {
            return Err(FieldError::new(
                join(at, second.0),
                format!(
                    "{:?} is given too: a message goes to one destination (use one listener per destination)",
                    first.0
                ),
            ));
        }
    };
    let destination = match value {
        Value::String(d) if d.trim().is_empty() => {
            return Err(FieldError::new(join(at, key), "empty"));
        }
        Value::String(d) if d.contains("{{") && !d.contains("}}") => {
            return Err(FieldError::new(
                join(at, key),
                "an unclosed template (\"{{\" without \"}}\")",
            ));
        }
        Value::String(d) if d.len() > MAX_DESTINATION => {
            return Err(FieldError::new(
                join(at, key),
                format!("longer than {MAX_DESTINATION} bytes"),
            ));
        }
        Value::String(d) => d.clone(),
        other => {
            return Err(FieldError::new(
                join(at, key),
                format!("expected a name, found {}", kind(other)),
            ));
        }
    };
    // As a response's body (a JSON `body` is written as JSON, a file is read from
    // `__files` now); text is a template, `base64Body` and a file that is not UTF-8
    // are sent as they are.
    let keys = ["body", "jsonBody", "base64Body", "bodyFileName"];
    let body = crate::mapping::parse_body_field(p, files, &keys)
        .map_err(|e| {
            let field = e.path.strip_prefix("response").unwrap_or("");
            let path = match field.strip_prefix('.') {
                Some(key) => join(at, key),
                None => at.to_owned(),
            };
            FieldError::new(path, e.reason)
        })?
        .map(|bytes| {
            if p.field("base64Body").is_some_and(|v| !v.is_null()) {
                return WebhookBody::Binary(bytes);
            }
            match std::str::from_utf8(&bytes) {
                Ok(text) => WebhookBody::Text(text.to_owned()),
                Err(_) => WebhookBody::Binary(bytes),
            }
        });
    let mut properties = Vec::new();
    match p.field("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (name, value) in h {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                properties.push((name.clone(), text));
            }
        }
        Some(other) => {
            return Err(FieldError::new(
                join(at, "properties"),
                format!(
                    "expected an object of property names, found {}",
                    kind(other)
                ),
            ));
        }
    }
    let delay = match p.field("delay") {
        None | Some(Value::Null) => None,
        Some(d @ Value::Object(_)) => {
            Some(decoy_spec::plan::parse_distribution(d, &join(at, "delay"))?)
        }
        Some(other) => {
            return Err(FieldError::new(
                join(at, "delay"),
                format!(
                    "expected {{\"type\": \"fixed\", \"milliseconds\": ...}} or a uniform or lognormal distribution, found {}",
                    kind(other)
                ),
            ));
        }
    };
    let destination_templated = destination.contains("{{");
    let templated = destination_templated
        || properties.iter().any(|(_, v)| v.contains("{{"))
        || matches!(&body, Some(WebhookBody::Text(t)) if t.contains("{{"));
    let uses_answer = templated
        && (names_answer(&destination)
            || properties.iter().any(|(_, v)| names_answer(v))
            || matches!(&body, Some(WebhookBody::Text(t)) if names_answer(t)));
    let mut broken = None;
    let mut templater = None;
    if templated {
        match plugins.map(|p| p.get(TEMPLATER)) {
            Some(Ok(p)) => templater = Some(p),
            Some(Err(e)) => {
                let reason = format!("its templates cannot be rendered: {e}");
                warnings.push(FieldError::new(
                    at,
                    format!("{reason}: the stub is served, and this message is never published"),
                ));
                broken = Some(reason);
            }
            None => {}
        }
    }
    Ok(Webhook {
        at: at.to_owned(),
        method: String::new(),
        url: String::new(),
        headers: properties,
        body,
        delay,
        broken,
        message: Some(MessageTarget {
            connection,
            destination,
            topic: key == "topic",
        }),
        destination_templated,
        uses_answer,
        parameters: Arc::from(Value::Object(p.clone()).to_string()),
        templater,
        context: OnceLock::new(),
    })
}

/// An absolute `http://` or `https://` URL, as a webhook target must be.
pub fn check_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.authority().is_some() => Ok(uri),
        _ => Err(format!(
            "{url:?} is not an absolute http:// or https:// URL"
        )),
    }
}

impl Webhook {
    /// Whether its templating plugin is still compiling (its first load): a sender
    /// that can wait does, rather than fail the webhook.
    pub fn templater_loading(&self) -> bool {
        self.templater.as_ref().is_some_and(|p| p.is_loading())
    }

    /// Renders the webhook for `request`, answered by mapping `mapping_id` with
    /// `answer` (when the transport kept it). The error says why nothing can be sent
    /// (a broken definition, a template that failed, a destination that rendered as
    /// no name a broker takes).
    pub fn render(
        &self,
        mapping_id: &str,
        request: &PluginRequest,
        answer: Option<&Answer>,
    ) -> Result<WebhookCall, String> {
        if let Some(b) = &self.broken {
            return Err(b.clone());
        }
        let mut method = self.method.clone();
        let mut url = self.url.clone();
        let mut headers = self.headers.clone();
        let mut message = self.message.clone();
        let mut text_body = match &self.body {
            Some(WebhookBody::Text(t)) => Some(t.clone()),
            _ => None,
        };
        if let Some(plugin) = &self.templater {
            // One call renders every field: the method and the URL (a message: its
            // destination) and the header values go in as headers of a response, the
            // body as its body.
            let mut fields = match &message {
                Some(m) => vec![("destination".to_owned(), webhook_template(&m.destination))],
                None => vec![
                    ("method".to_owned(), webhook_template(&method)),
                    ("url".to_owned(), webhook_template(&url)),
                ],
            };
            fields.extend(
                headers
                    .iter()
                    .map(|(k, v)| (k.clone(), webhook_template(v))),
            );
            let response = wit::Response::Http(wit::HttpResponse {
                status: 200,
                headers: fields,
                body: text_body
                    .as_deref()
                    .map(|b| webhook_template(b).into_bytes())
                    .unwrap_or_default(),
                delay_ms: None,
            });
            let context = self.context.get_or_init(|| wit::CallContext {
                // Its own cache slot in the plugin, apart from the stub's response.
                mapping_id: format!("{mapping_id}#{}", self.at),
                mapping_name: None,
                parameters: self.parameters.to_string(),
            });
            // The answer goes in as a key of `parameters`, for this call only.
            let with_answer;
            let context = match answer.filter(|_| self.uses_answer) {
                Some(a) => {
                    with_answer = wit::CallContext {
                        parameters: with_key(&self.parameters, ANSWER_KEY, &a.model()),
                        ..context.clone()
                    };
                    &with_answer
                }
                None => context,
            };
            let rendered = plugin
                .transform(context, request, &response)
                .map_err(|f| format!("template failed: {}", f.reason))?;
            let wit::Response::Http(r) = rendered else {
                return Err("the templating plugin returned an MQ reply".into());
            };
            let mut values = r.headers.into_iter().map(|(_, v)| v);
            match &mut message {
                Some(m) => m.destination = values.next().unwrap_or_default(),
                None => {
                    method = values.next().unwrap_or_default();
                    url = values.next().unwrap_or_default();
                }
            }
            for (h, v) in headers.iter_mut().zip(values) {
                h.1 = v;
            }
            if text_body.is_some() {
                text_body = Some(String::from_utf8_lossy(&r.body).into_owned());
            }
        }
        if let Some(m) = &message
            && self.destination_templated
        {
            check_destination(&m.destination).map_err(|e| {
                let kind = if m.topic { "topic" } else { "queue" };
                format!("its {kind} {e}")
            })?;
        }
        let body = if self.message.is_some() || matches!(method.as_str(), "POST" | "PUT" | "PATCH")
        {
            match &self.body {
                Some(WebhookBody::Binary(b)) => Some(b.clone()),
                Some(WebhookBody::Text(_)) => text_body.map(Bytes::from),
                None => None,
            }
        } else {
            None
        };
        Ok(WebhookCall {
            method,
            url,
            headers,
            body,
            message,
        })
    }
}

/// `json` (an object's text) with `key` set to `value` (after the others, so it wins
/// over a key of that name already there).
fn with_key(json: &str, key: &str, value: &Value) -> String {
    let inner = json
        .trim()
        .strip_prefix('{')
        .and_then(|j| j.strip_suffix('}'))
        .unwrap_or("")
        .trim();
    let key = Value::String(key.to_owned());
    if inner.is_empty() {
        format!("{{{key}:{value}}}")
    } else {
        format!("{{{inner},{key}:{value}}}")
    }
}

/// A webhook template in the terms of the `response-template` model: WireMock names
/// the request `originalRequest` in a webhook and has no `request` there, so inside
/// each `{{...}}` (outside its quoted strings) `originalRequest` becomes `request`
/// and a `request` of its own becomes a name that renders empty, as in WireMock.
/// `originalResponse` becomes `parameters.originalResponse`, where [`Webhook::render`]
/// puts the answer, and a header name after `originalResponse.headers.` is written
/// in lower case in brackets, as the model keeps them (`Content-Type` →
/// `[content-type]`).
pub fn webhook_template(text: &str) -> String {
    if !text.contains("{{") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let inner_start = open + 2;
        let Some(close) = rest[inner_start..].find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        out.push_str("{{");
        out.push_str(&rename_request(&rest[inner_start..inner_start + close]));
        out.push_str("}}");
        rest = &rest[inner_start + close + 2..];
    }
    out.push_str(rest);
    out
}

fn rename_request(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut quote: Option<char> = None;
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let flush = |word: &mut String, out: &mut String, prev: Option<char>| {
        // A path's first segment only: `x.request` and `@request` are left alone.
        let head = !matches!(prev, Some('.' | '/' | '@'));
        match word.as_str() {
            "originalRequest" if head => out.push_str("request"),
            ANSWER_KEY if head => {
                out.push_str("parameters.");
                out.push_str(ANSWER_KEY);
            }
            "request" if head => out.push_str("noRequestInWebhooks"),
            w => out.push_str(w),
        }
        word.clear();
    };
    let mut before_word = None;
    for c in expr.chars() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
        } else if c.is_ascii_alphanumeric() || c == '_' {
            if word.is_empty() {
                before_word = prev;
            }
            word.push(c);
        } else {
            flush(&mut word, &mut out, before_word);
            if c == '\'' || c == '"' {
                quote = Some(c);
            }
            out.push(c);
        }
        prev = Some(c);
    }
    flush(&mut word, &mut out, before_word);
    answer_header_names(&out)
}

/// `parameters.originalResponse.headers.Content-Type` (or `.[Content-Type]`) →
/// `parameters.originalResponse.headers.[content-type]`: the answer's header names
/// are kept in lower case, and `-` is not a path character of Handlebars.
fn answer_header_names(expr: &str) -> String {
    const PATH: &str = "parameters.originalResponse.headers.";
    let mut out = String::with_capacity(expr.len() + 2);
    let mut rest = expr;
    while let Some(i) = rest.find(PATH) {
        out.push_str(&rest[..i + PATH.len()]);
        let after = &rest[i + PATH.len()..];
        let (name, next) = match after.strip_prefix('[') {
            Some(inner) => match inner.find(']') {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => ("", after),
            },
            None => {
                let n = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(after.len());
                (&after[..n], &after[n..])
            }
        };
        if !name.is_empty() {
            out.push('[');
            out.push_str(&name.to_ascii_lowercase());
            out.push(']');
        }
        rest = next;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_one(v: Value) -> (Result<Option<Webhooks>, Vec<FieldError>>, Vec<FieldError>) {
        let mut warnings = Vec::new();
        let r = parse(
            v.as_object().unwrap(),
            None,
            crate::mapping::BodyFiles {
                dir: std::path::Path::new("/nonexistent/__files"),
                max_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            },
            &mut warnings,
        );
        (r, warnings)
    }

    fn request() -> PluginRequest {
        PluginRequest::from(wit::Request::Http(wit::HttpRequest {
            method: "POST".into(),
            url: "/x".into(),
            path: "/x".into(),
            query: vec![],
            headers: vec![],
            cookies: vec![],
            body: vec![],
            base_url: "http://localhost:1".into(),
            path_parameters: vec![],
        }))
    }

    #[test]
    fn original_request_is_the_request_of_the_template_model_and_request_is_nothing() {
        assert_eq!(
            webhook_template("id {{jsonPath originalRequest.body '$.request'}} {{request.url}}"),
            "id {{jsonPath request.body '$.request'}} {{noRequestInWebhooks.url}}"
        );
        assert_eq!(
            webhook_template("{{{originalRequest.body}}} request"),
            "{{{request.body}}} request"
        );
        assert_eq!(
            webhook_template("plain originalRequest"),
            "plain originalRequest"
        );
        assert_eq!(
            webhook_template("{{#each originalRequest.query.id}}{{this.request}}{{/each}}"),
            "{{#each request.query.id}}{{this.request}}{{/each}}"
        );
    }

    #[test]
    fn original_response_is_a_key_of_parameters_and_its_header_names_are_lower_case() {
        assert_eq!(
            webhook_template(
                "{{originalResponse.status}} {{jsonPath originalResponse.body '$.id'}} {{originalResponse.headers.Content-Type}}"
            ),
            "{{parameters.originalResponse.status}} {{jsonPath parameters.originalResponse.body '$.id'}} {{parameters.originalResponse.headers.[content-type]}}"
        );
        assert_eq!(
            webhook_template("{{originalResponse.headers.[X-Id]}}|{{x.originalResponse}}"),
            "{{parameters.originalResponse.headers.[x-id]}}|{{x.originalResponse}}"
        );
        assert_eq!(
            with_key(r#"{"a":1}"#, "originalResponse", &json!({"status": 201})),
            r#"{"a":1,"originalResponse":{"status":201}}"#
        );
        assert_eq!(
            with_key("{}", "originalResponse", &json!(null)),
            r#"{"originalResponse":null}"#
        );
        let answer = Answer::http(
            201,
            Arc::from(vec![
                (
                    http::HeaderName::from_static("x-id"),
                    http::HeaderValue::from_static("7"),
                ),
                (
                    http::HeaderName::from_static("x-id"),
                    http::HeaderValue::from_static("8"),
                ),
            ]),
            Bytes::from_static(b"{\"id\":7}"),
        );
        assert_eq!(
            answer.model(),
            json!({"status": 201, "headers": {"x-id": ["7", "8"]}, "body": "{\"id\":7}"})
        );
        let reply = Answer::reply(Bytes::from_static(b"ok"), vec![("Kind".into(), "a".into())]);
        assert_eq!(
            reply.model(),
            json!({"headers": {"kind": "a"}, "body": "ok"})
        );
    }

    #[test]
    fn a_rendered_destination_must_be_a_name_a_broker_takes() {
        assert!(check_destination("orders.eu-1").is_ok());
        assert!(check_destination("decoy/test/orders").is_ok());
        for bad in ["", "  ", "orders.*", "a b", "t/#", "t/+/x", "x>", "a\nb"] {
            let e = check_destination(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad:?}");
        }
        assert!(
            check_destination(&"x".repeat(MAX_DESTINATION + 1))
                .unwrap_err()
                .contains("longer")
        );
    }

    #[test]
    fn a_templated_destination_is_read_and_its_listener_keeps_the_answer_only_when_named() {
        let (r, w) = parse_one(json!({"serveEventListeners": [
            {"name": "message", "parameters": {"connection": "c",
                "queue": "orders.{{originalRequest.pathSegments.[1]}}"}},
            {"name": "message", "parameters": {"connection": "c", "queue": "q",
                "body": "{{jsonPath originalResponse.body '$.id'}}"}},
            {"name": "webhook", "parameters": {"url": "http://h/{{originalResponse.status}}"}}]}));
        assert!(w.is_empty(), "{w:?}");
        let hooks = r.unwrap().unwrap();
        assert!(hooks[0].destination_templated && !hooks[0].uses_answer);
        assert!(hooks[1].uses_answer && !hooks[1].destination_templated);
        assert!(hooks[2].uses_answer);
        assert!(wants_answer(&hooks[1..2]) && !wants_answer(&hooks[..1]));
    }

    #[test]
    fn a_full_webhook_is_read_and_rendered_without_templates_as_written() {
        let (r, warnings) = parse_one(
            json!({"serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": "http://127.0.0.1:9/cb",
            "headers": {"Content-Type": "application/json", "X-Multi": ["a", 2]},
            "body": "{\"a\":1}", "delay": {"type": "uniform", "lower": 1, "upper": 2}}}]}),
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let hooks = r.unwrap().unwrap();
        assert_eq!(
            hooks[0].delay,
            Some(DelayDistribution::Uniform { lower: 1, upper: 2 })
        );
        let call = hooks[0].render("m", &request(), None).unwrap();
        assert_eq!(call.method, "POST");
        assert_eq!(call.url, "http://127.0.0.1:9/cb");
        assert_eq!(
            call.headers,
            [
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("X-Multi".to_owned(), "a".to_owned()),
                ("X-Multi".to_owned(), "2".to_owned())
            ]
        );
        assert_eq!(call.body.as_deref(), Some(&b"{\"a\":1}"[..]));
    }

    #[test]
    fn the_method_defaults_to_get_and_only_post_put_and_patch_carry_a_body() {
        let (r, _) = parse_one(json!({"serveEventListeners": [
            {"name": "webhook", "parameters": {"url": "http://h/a", "body": "x"}},
            {"name": "webhook", "parameters": {"url": "http://h/b", "method": "PUT", "base64Body": "aGk="}}]}));
        let hooks = r.unwrap().unwrap();
        let get = hooks[0].render("m", &request(), None).unwrap();
        assert_eq!((get.method.as_str(), get.body), ("GET", None));
        let put = hooks[1].render("m", &request(), None).unwrap();
        assert_eq!(put.body.as_deref(), Some(&b"hi"[..]));
    }

    #[test]
    fn the_older_post_serve_actions_are_read_in_both_forms() {
        let (r, w) = parse_one(json!({
            "postServeActions": {"webhook": {"url": "http://h/map"}, "other": {}}}));
        assert_eq!(r.unwrap().unwrap()[0].url, "http://h/map");
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].path, "postServeActions.other");
        let (r, _) = parse_one(json!({
            "postServeActions": [{"name": "webhook", "parameters": {"url": "http://h/list"}}]}));
        assert_eq!(r.unwrap().unwrap()[0].url, "http://h/list");
    }

    #[test]
    fn what_wiremock_refuses_is_an_error_and_what_it_fails_at_fire_time_is_a_warning() {
        let (r, _) = parse_one(json!({"serveEventListeners": ["webhook"]}));
        assert_eq!(r.unwrap_err()[0].path, "serveEventListeners[0]");
        let (r, _) =
            parse_one(json!({"serveEventListeners": [{"name": "webhook", "parameters": "x"}]}));
        assert_eq!(r.unwrap_err()[0].path, "serveEventListeners[0].parameters");

        let (r, w) = parse_one(json!({"serveEventListeners": [
            {"name": "webhook", "parameters": {"method": "POST"}},
            {"name": "webhook", "parameters": {"url": "/relative", "delay": 100, "base64Body": "!!"}}]}));
        let hooks = r.unwrap().unwrap();
        let paths: Vec<&str> = w.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "serveEventListeners[0].parameters.url",
                "serveEventListeners[1].parameters.url",
                "serveEventListeners[1].parameters.base64Body",
                "serveEventListeners[1].parameters.delay"
            ]
        );
        assert!(w[0].reason.contains("never sent"), "{}", w[0].reason);
        assert!(
            hooks[0]
                .render("m", &request(), None)
                .unwrap_err()
                .contains("url")
        );

        let (r, w) = parse_one(json!({"serveEventListeners": [
            {"name": "other", "parameters": {}}, {"parameters": {}}]}));
        assert!(r.unwrap().is_none());
        assert_eq!(w.len(), 2, "{w:?}");
        let (r, w) = parse_one(json!({"serveEventListeners": {"name": "webhook"}}));
        assert!(r.unwrap().is_none());
        assert!(w[0].reason.contains("no listener"), "{}", w[0].reason);
    }

    #[test]
    fn a_message_listener_is_read_with_its_destination_properties_and_body() {
        let (r, w) = parse_one(json!({"serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit", "queue": "orders",
                "jsonBody": {"a": 1}, "properties": {"kind": "created", "n": 2},
                "delay": {"type": "fixed", "milliseconds": 5}}},
            {"name": "message", "parameters": {"connection": "mqtt", "topic": "t/1", "base64Body": "aGk="}}]}));
        assert!(w.is_empty(), "{w:?}");
        let hooks = r.unwrap().unwrap();
        let call = hooks[0].render("m", &request(), None).unwrap();
        let target = call.message.unwrap();
        assert_eq!(
            (
                target.connection.as_str(),
                target.destination.as_str(),
                target.topic
            ),
            ("rabbit", "orders", false)
        );
        assert_eq!(call.body.as_deref(), Some(&br#"{"a":1}"#[..]));
        assert_eq!(
            call.headers,
            [
                ("kind".to_owned(), "created".to_owned()),
                ("n".to_owned(), "2".to_owned())
            ]
        );
        let call = hooks[1].render("m", &request(), None).unwrap();
        assert!(call.message.unwrap().topic);
        assert_eq!(call.body.as_deref(), Some(&b"hi"[..]));
    }

    #[test]
    fn a_message_listener_that_cannot_say_where_it_goes_is_an_error_naming_the_field() {
        for (params, path) in [
            (
                json!({"queue": "q"}),
                "serveEventListeners[0].parameters.connection",
            ),
            (
                json!({"connection": "c"}),
                "serveEventListeners[0].parameters",
            ),
            (
                json!({"connection": "c", "queue": "q", "topic": "t"}),
                "serveEventListeners[0].parameters.topic",
            ),
            (
                json!({"connection": "c", "queue": ""}),
                "serveEventListeners[0].parameters.queue",
            ),
            (
                json!({"connection": "c", "queue": "orders.{{x"}),
                "serveEventListeners[0].parameters.queue",
            ),
            (
                json!({"connection": "c", "queue": "q", "bodyFileName": "../x"}),
                "serveEventListeners[0].parameters.bodyFileName",
            ),
            (
                json!({"connection": "c", "queue": "q", "base64Body": "!"}),
                "serveEventListeners[0].parameters.base64Body",
            ),
            (
                json!({"connection": "c", "queue": "q", "body": "x", "jsonBody": 1}),
                "serveEventListeners[0].parameters",
            ),
            (
                json!({"connection": 3, "queue": "q"}),
                "serveEventListeners[0].parameters.connection",
            ),
        ] {
            let (r, _) = parse_one(
                json!({"serveEventListeners": [{"name": "message", "parameters": params}]}),
            );
            let errors = r.unwrap_err();
            assert_eq!(errors[0].path, path, "{params}: {errors:?}");
        }
        let (r, w) = parse_one(json!({"serveEventListeners": [{"name": "message",
            "parameters": {"connection": "c", "queue": "q", "colour": "red"}}]}));
        assert!(r.unwrap().is_some());
        assert_eq!(w[0].path, "serveEventListeners[0].parameters.colour");
    }
}
