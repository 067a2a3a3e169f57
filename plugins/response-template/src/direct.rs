//! Templates that only echo the request, rendered without Handlebars.
//!
//! Most templates in service virtualization are text with a few `{{request.…}}`
//! values in it (a path segment, a query value, a header) or a helper reading one
//! (`{{xPath request.body '/order/id/text()'}}`). Rendering those through Handlebars
//! means building the JSON model of the request first, and both cost more than the
//! work they amount to. A [`Direct`] template is made from the compiled Handlebars
//! template when every element is text, a comment, a plain value expression naming
//! one request field, or one of [`crate::helpers`]' helpers whose arguments are
//! literals or such fields. It reads fields straight from the request, with the same
//! meaning [`crate::request_model`] gives them, and calls the same helper functions.
//! Anything else (a block, a built-in helper, a subexpression, `parameters.*`, a
//! path to an object or a list) keeps the Handlebars path. The tests render each
//! supported form both ways and compare.

use std::borrow::Cow;

use decoy_plugin::{Error, Request, wit::types};
use handlebars::template::{HelperTemplate, Parameter, TemplateElement};
use handlebars::{Path, PathSeg, Template};
use serde_json::{Map, Value};

use crate::helpers::{self, Spec};

/// A template made of text and request fields.
#[derive(Debug)]
pub struct Direct(Vec<Piece>);

#[derive(Debug)]
enum Piece {
    Text(String),
    Field(Field),
    Helper {
        spec: &'static Spec,
        params: Vec<Arg>,
        hash: Map<String, Value>,
    },
}

#[derive(Debug)]
enum Arg {
    Literal(Value),
    Field(Field),
}

/// One leaf of the request model (see [`crate::request_model`]).
#[derive(Debug)]
enum Field {
    Url,
    Path,
    Method,
    Body,
    BaseUrl,
    Scheme,
    Host,
    Port,
    ClientIp,
    Destination,
    ReplyTo,
    MessageId,
    CorrelationId,
    Segment(usize),
    Query(String),
    Header(String),
    Cookie(String),
    PathParam(String),
}

impl Direct {
    /// The direct form of `template`, if it has one.
    pub fn of(template: &Template) -> Option<Direct> {
        let mut pieces = Vec::with_capacity(template.elements.len());
        for element in &template.elements {
            match element {
                TemplateElement::RawString(s) => pieces.push(Piece::Text(s.clone())),
                TemplateElement::Comment(_) => {}
                TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                    pieces.push(expression(ht)?)
                }
                _ => return None,
            }
        }
        Some(Direct(pieces))
    }

    pub fn render(&self, req: &Request) -> Result<String, Error> {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(s) => out.push_str(s),
                Piece::Field(f) => {
                    if let Some(v) = value(f, req) {
                        out.push_str(&v);
                    }
                }
                Piece::Helper { spec, params, hash } => {
                    let params: Vec<Value> = params
                        .iter()
                        .map(|a| match a {
                            Arg::Literal(v) => v.clone(),
                            Arg::Field(f) => json_value(f, req),
                        })
                        .collect();
                    let v = helpers::run(spec, &params, hash)
                        .map_err(|e| Error(format!("template failed: {e}")))?;
                    out.push_str(&helpers::text_of(spec.kind, &v));
                }
            }
        }
        Ok(out)
    }
}

/// `{{path}}` or `{{helper arg... key=value...}}`, when it can be rendered directly.
fn expression(ht: &HelperTemplate) -> Option<Piece> {
    if ht.block || ht.template.is_some() || ht.inverse.is_some() || ht.block_param.is_some() {
        return None;
    }
    let name = match &ht.name {
        Parameter::Name(n) => n.as_str(),
        Parameter::Path(Path::Relative((_, raw))) => raw.as_str(),
        _ => return None,
    };
    if name == helpers::VALUE {
        // `{{path}}`, compiled as a call to the value helper.
        let [p] = ht.params.as_slice() else {
            return None;
        };
        return Some(Piece::Field(path_field(p)?));
    }
    if let Some(spec) = helpers::simple(name) {
        // A helper that sets a variable changes what later parts see.
        let sets_variable = match spec.name {
            "regexExtract" => ht.params.len() > 2,
            "parseJson" | "formData" => ht.params.len() > 1,
            "val" => ht.hash.contains_key("assign"),
            _ => spec.assigns,
        };
        if sets_variable {
            return None;
        }
        let params = ht.params.iter().map(arg).collect::<Option<Vec<_>>>()?;
        // A helper that takes a multi-valued field whole is left to Handlebars.
        if spec.lists
            && params.iter().any(|a| {
                matches!(
                    a,
                    Arg::Field(Field::Query(_) | Field::Header(_) | Field::Cookie(_))
                )
            })
        {
            return None;
        }
        let mut hash = Map::new();
        for (k, v) in &ht.hash {
            let Parameter::Literal(v) = v else {
                return None;
            };
            hash.insert(k.clone(), v.clone());
        }
        return Some(Piece::Helper { spec, params, hash });
    }
    if !ht.params.is_empty() || !ht.hash.is_empty() {
        return None;
    }
    Some(Piece::Field(path_field(&ht.name)?))
}

fn arg(p: &Parameter) -> Option<Arg> {
    match p {
        Parameter::Literal(v) => Some(Arg::Literal(v.clone())),
        other => path_field(other).map(Arg::Field),
    }
}

fn path_field(p: &Parameter) -> Option<Field> {
    let Parameter::Path(Path::Relative((segs, _))) = p else {
        return None;
    };
    let mut names = Vec::with_capacity(segs.len());
    for s in segs {
        match s {
            PathSeg::Named(n) => names.push(n.as_str()),
            _ => return None,
        }
    }
    field(&names)
}

/// The field a path names, when it is a leaf holding a string or a number.
fn field(path: &[&str]) -> Option<Field> {
    let (&"request", rest) = path.split_first()? else {
        return None;
    };
    Some(match rest {
        ["url"] => Field::Url,
        ["path"] => Field::Path,
        ["method"] => Field::Method,
        ["body"] => Field::Body,
        ["baseUrl"] => Field::BaseUrl,
        ["scheme"] => Field::Scheme,
        ["host"] => Field::Host,
        ["port"] => Field::Port,
        ["clientIp"] => Field::ClientIp,
        ["destination"] => Field::Destination,
        ["replyTo"] => Field::ReplyTo,
        ["messageId"] => Field::MessageId,
        ["correlationId"] => Field::CorrelationId,
        // As Handlebars indexes a list (a path that is no number fails there).
        ["pathSegments", i] => Field::Segment(i.parse().ok()?),
        ["query", k] => Field::Query((*k).to_owned()),
        ["headers", k] => Field::Header((*k).to_owned()),
        ["cookies", k] => Field::Cookie((*k).to_owned()),
        ["pathParams", k] => Field::PathParam((*k).to_owned()),
        _ => return None,
    })
}

fn first<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The first value whose name, in lower case, is `key` (the model's header and
/// property names are lower case, as template paths to them are).
fn first_lower<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| {
            n.len() == key.len()
                && n.bytes()
                    .zip(key.bytes())
                    .all(|(a, b)| a.to_ascii_lowercase() == b)
        })
        .map(|(_, v)| v.as_str())
}

/// What the model holds at `f`, as a helper receives it.
fn json_value(f: &Field, req: &Request) -> Value {
    match (f, value(f, req)) {
        (Field::Port, Some(p)) => p.parse::<u16>().map_or(Value::Null, Value::from),
        (_, Some(v)) => Value::String(v.into_owned()),
        (_, None) => Value::Null,
    }
}

/// What the model holds at `f`, as Handlebars writes it (`None` renders nothing).
fn value<'a>(f: &Field, req: &'a Request) -> Option<Cow<'a, str>> {
    let borrowed = |s: &'a str| Some(Cow::Borrowed(s));
    match &req.0 {
        types::Request::Http(h) => {
            let base = || crate::base_url_parts(&h.base_url);
            match f {
                Field::Url => borrowed(&h.url),
                Field::Path => borrowed(&h.path),
                Field::Method => borrowed(&h.method),
                Field::Body => Some(String::from_utf8_lossy(&h.body)),
                Field::BaseUrl => borrowed(&h.base_url),
                Field::Scheme => borrowed(base().0),
                Field::Host => borrowed(base().1),
                Field::Port => base().2.map(|p| Cow::Owned(p.to_string())),
                Field::ClientIp => crate::client_ip(&h.headers).map(Cow::Owned),
                Field::Segment(i) => h
                    .path
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .nth(*i)
                    .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy()),
                Field::Query(k) => first(&h.query, k).map(Cow::Borrowed),
                Field::Header(k) => first_lower(&h.headers, k).map(Cow::Borrowed),
                Field::Cookie(k) => first(&h.cookies, k).map(Cow::Borrowed),
                Field::PathParam(k) => first(&h.path_parameters, k).map(Cow::Borrowed),
                Field::Destination | Field::ReplyTo | Field::MessageId | Field::CorrelationId => {
                    None
                }
            }
        }
        types::Request::Mq(q) => match f {
            Field::Url | Field::Path | Field::Destination => borrowed(&q.destination),
            Field::ReplyTo => q.reply_to.as_deref().map(Cow::Borrowed),
            Field::MessageId => q.message_id.as_deref().map(Cow::Borrowed),
            Field::CorrelationId => q.correlation_id.as_deref().map(Cow::Borrowed),
            Field::Header(k) => first_lower(&q.properties, k).map(Cow::Borrowed),
            Field::Method => borrowed(""),
            Field::Body => Some(String::from_utf8_lossy(&q.body)),
            Field::BaseUrl
            | Field::Scheme
            | Field::Host
            | Field::Port
            | Field::ClientIp
            | Field::Segment(_)
            | Field::Query(_)
            | Field::Cookie(_)
            | Field::PathParam(_) => None,
        },
    }
}
