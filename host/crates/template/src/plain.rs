//! Templates made only of text and plain request fields, which the host renders
//! itself.
//!
//! `segment {{request.pathSegments.[1]}} q {{request.query.q}}` needs neither
//! Handlebars nor a helper: it is text with holes, each filled with one
//! [`Field`]'s text. A [`Plain`] template is made from the compiled Handlebars
//! template (so white space control, comments, escapes and triple braces are what
//! Handlebars makes of them), when every element is text, a comment, or a value
//! expression naming one request field. Anything else (a helper, a block,
//! `parameters.*`, a path to a list or an object) is not plain, and stays the
//! plugin's. The plugin's tests render each plain form through Handlebars and
//! through [`Plain::render`] and compare.

use handlebars::Template;
use handlebars::template::{HelperTemplate, TemplateElement};

use crate::fields::{Field, RequestFields};

/// A template of text and request fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plain {
    pieces: Vec<Piece>,
    /// The length of its text, a first guess at the length of what it renders.
    text_len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Box<str>),
    Field(Field),
}

impl Plain {
    /// The plain form of `template` (as [`crate::compile`] gives it), if it has one.
    pub fn of(template: &Template) -> Option<Plain> {
        let mut pieces: Vec<Piece> = Vec::with_capacity(template.elements.len());
        let mut text_len = 0;
        for element in &template.elements {
            match element {
                TemplateElement::RawString(s) => {
                    text_len += s.len();
                    // Text on both sides of a comment is one piece.
                    match pieces.last_mut() {
                        Some(Piece::Text(t)) => {
                            let mut joined = String::from(std::mem::take(t));
                            joined.push_str(s);
                            *t = joined.into_boxed_str();
                        }
                        _ => pieces.push(Piece::Text(s.as_str().into())),
                    }
                }
                TemplateElement::Comment(_) => {}
                TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                    pieces.push(Piece::Field(field_expression(ht)?))
                }
                _ => return None,
            }
        }
        Some(Plain { pieces, text_len })
    }

    /// Writes what it renders for `req` at the end of `out`.
    pub fn render_into<R: RequestFields + ?Sized>(&self, req: &R, out: &mut String) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(s) => out.push_str(s),
                Piece::Field(f) => {
                    if let Some(v) = f.text(req) {
                        out.push_str(&v);
                    }
                }
            }
        }
    }

    /// What it renders for `req`.
    pub fn render<R: RequestFields + ?Sized>(&self, req: &R) -> String {
        let mut out = String::with_capacity(self.text_len + 16 * self.pieces.len());
        self.render_into(req, &mut out);
        out
    }

    /// Whether it has no field: it renders as the text it is.
    pub fn is_text(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Text(_)))
    }
}

/// `{{request.x}}` (or `{{{request.x}}}`): a path to a field, with no argument.
fn field_expression(ht: &HelperTemplate) -> Option<Field> {
    if ht.block
        || ht.template.is_some()
        || ht.inverse.is_some()
        || ht.block_param.is_some()
        || !ht.params.is_empty()
        || !ht.hash.is_empty()
    {
        return None;
    }
    Field::of_parameter(&ht.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_and_plain_request_fields_are_plain() {
        for t in [
            "segment {{request.pathSegments.[1]}} q {{request.query.q}}",
            "{{request.requestLine.baseUrl}}/images/1.png",
            "{{ request.headers.X-Trace }} {{{request.url}}} {{! note }}",
            "no template at all",
        ] {
            assert!(Plain::of(&crate::compile(t).unwrap()).is_some(), "{t}");
        }
        for t in [
            "{{upper request.url}}",
            "{{#if request.url}}x{{/if}}",
            "{{parameters.x}}",
            "{{request.query}}",
            "{{hostname}}",
            "{{now}}",
            "{{request.query.tag.[1]}}",
            "{{request.id}}",
        ] {
            assert!(Plain::of(&crate::compile(t).unwrap()).is_none(), "{t}");
        }
    }
}
