//! Templates that only echo the request, rendered without Handlebars.
//!
//! Most templates in service virtualization are text with a few `{{request.…}}`
//! values in it (a path segment, a query value, a header) or a helper reading one
//! (`{{xPath request.body '/order/id/text()'}}`). Rendering those through Handlebars
//! means building the JSON model of the request first, and both cost more than the
//! work they amount to. A [`Direct`] template is made from the compiled Handlebars
//! template when every element is text, a comment, a plain value expression naming
//! one request field, or one of [`crate::helpers`]' helpers whose arguments are
//! literals or such fields. It reads fields straight from the request through
//! [`decoy_template::Field`], which the model is built with too, and calls the same
//! helper functions.
//! Anything else (a block, a built-in helper, a subexpression, `parameters.*`, a
//! path to an object or a list) keeps the Handlebars path. The tests render each
//! supported form both ways and compare.

use std::borrow::Cow;

use decoy_plugin::{Error, Request, wit::types};
use decoy_template::fields::{self, Field, Message, RequestFields};
use handlebars::template::{HelperTemplate, Parameter, TemplateElement};
use handlebars::{Path, Template};
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
                    if let Some(v) = f.text(&View(req)) {
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
        return Some(Piece::Field(Field::of_parameter(p)?));
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
    Some(Piece::Field(Field::of_parameter(&ht.name)?))
}

fn arg(p: &Parameter) -> Option<Arg> {
    match p {
        Parameter::Literal(v) => Some(Arg::Literal(v.clone())),
        other => Field::of_parameter(other).map(Arg::Field),
    }
}

/// What the model holds at `f`, as a helper receives it.
fn json_value(f: &Field, req: &Request) -> Value {
    match (f, f.text(&View(req))) {
        (Field::Port, Some(p)) => p.parse::<u16>().map_or(Value::Null, Value::from),
        (_, Some(v)) => Value::String(v.into_owned()),
        (_, None) => Value::Null,
    }
}

/// The plugin's request as templates read it (see [`decoy_template::fields`]).
#[derive(Debug, Clone, Copy)]
pub struct View<'a>(pub &'a Request);

impl<'a> View<'a> {
    fn http(&self) -> Option<&'a types::HttpRequest> {
        match &self.0.0 {
            types::Request::Http(h) => Some(h),
            types::Request::Mq(_) => None,
        }
    }
}

impl RequestFields for View<'_> {
    fn message(&self) -> Option<Message<'_>> {
        match &self.0.0 {
            types::Request::Mq(q) => Some(Message {
                destination: &q.destination,
                reply_to: q.reply_to.as_deref(),
                message_id: q.message_id.as_deref(),
                correlation_id: q.correlation_id.as_deref(),
            }),
            types::Request::Http(_) => None,
        }
    }

    fn method(&self) -> &str {
        self.http().map_or("", |h| &h.method)
    }

    fn url(&self) -> &str {
        self.http().map_or("", |h| &h.url)
    }

    fn path(&self) -> &str {
        self.http().map_or("", |h| &h.path)
    }

    fn body(&self) -> &[u8] {
        match &self.0.0 {
            types::Request::Http(h) => &h.body,
            types::Request::Mq(q) => &q.body,
        }
    }

    fn base_url(&self) -> &str {
        self.http().map_or("", |h| &h.base_url)
    }

    fn query(&self, name: &str) -> Option<&str> {
        self.http().and_then(|h| fields::first(&h.query, name))
    }

    fn header(&self, lower: &str) -> Option<Cow<'_, str>> {
        let list = match &self.0.0 {
            types::Request::Http(h) => &h.headers,
            types::Request::Mq(q) => &q.properties,
        };
        fields::first_lower(list, lower).map(Cow::Borrowed)
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        self.http().and_then(|h| fields::first(&h.cookies, name))
    }

    fn path_param(&self, name: &str) -> Option<&str> {
        self.http()
            .and_then(|h| fields::first(&h.path_parameters, name))
    }

    fn peer_ip(&self) -> Option<Cow<'_, str>> {
        decoy_plugin::request_info::client_ip().map(Cow::Owned)
    }
}
