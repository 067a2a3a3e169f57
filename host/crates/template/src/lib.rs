//! WireMock's response templates, read in one place for decoy's host and for its
//! `response-template` plugin.
//!
//! A template is rendered by the plugin, in the sandbox, with Handlebars and
//! WireMock's helpers. Three things about it are the host's business too, and all
//! need the template read exactly as the plugin reads it:
//! - a template that does not compile is a problem of its stub when the stub loads
//!   (file, stub, field and position), not a 500 on every request: the host compiles
//!   each one then, with [`compile`], the plugin's own compiler;
//! - a template made only of text and plain request fields
//!   (`segment {{request.pathSegments.[1]}} q {{request.query.q}}`, most templates
//!   in service virtualization) is a [`Plain`] template, compiled once when its stub
//!   loads and rendered by the host on the request path with no wasm call: there
//!   is nothing in it for a sandbox to contain, and a call would cost more than the
//!   rendering (lowering every request field into the guest, its allocations);
//! - any other template is compiled by the host too, when its stub loads, and put
//!   in the plugin's `cache` as bytes under the key the plugin looks it up by, so
//!   that no instance of the plugin compiles it, not even for the first request.
//!
//! So this crate holds what both sides must agree on: the rewrites of WireMock's
//! paths into the model's names ([`rewrite_paths`]), compiling in time linear in a
//! template's size ([`pieces`]), the request fields a template can name with what
//! each one means ([`Field`], read through the [`RequestFields`] trait that the
//! plugin implements on its WIT record and the host on its request snapshot), and
//! a compiled template's form as bytes with the key it is kept under in the
//! plugin's `cache` ([`cached`]).
//! The plugin's own direct renderer and its Handlebars model are built on the same
//! [`Field`]s, and its tests render every form both ways and compare.
//!
//! It builds for the host and for `wasm32-wasip2` alike.
//! May depend on: nothing of decoy's.

pub mod cached;
pub mod fields;
pub mod pieces;
pub mod plain;

use std::sync::OnceLock;

pub use fields::{Field, Message, RequestFields, base_url_parts, client_ip, jetty_address};
pub use handlebars::Template;
pub use plain::Plain;

/// A template that does not compile: where, and why, said on one line (it goes
/// into a load-time problem, a log line or a 500 answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// `bad template: <reason> at line L, column C, near "..."`.
    pub message: String,
    /// Line and column (from 1) in the template's text, when the parser knows them.
    pub position: Option<(usize, usize)>,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CompileError {}

/// Compiles `text` after rewriting WireMock-only paths into the model's names: in
/// pieces when it is long (see [`pieces`]), else whole. A template that fails is
/// compiled whole, so the error has its true position.
pub fn compile(text: &str) -> Result<Template, CompileError> {
    let text = rewrite_paths(text);
    match pieces::compile(&text, pieces::PIECE) {
        Some(t) => Ok(t),
        None => Template::compile(&text).map_err(|e| template_error(&e, &text)),
    }
}

/// A template that does not compile, said on one line. The handlebars crate's own
/// text is a multi-line excerpt with the parser's list of expected tokens.
fn template_error(e: &handlebars::TemplateError, text: &str) -> CompileError {
    use handlebars::TemplateErrorReason as R;
    let reason = match e.reason() {
        R::InvalidSyntax(_) => "invalid Handlebars syntax".to_owned(),
        other => other.to_string(),
    };
    let Some((line, column)) = e.pos() else {
        return CompileError {
            message: format!("bad template: {reason}"),
            position: None,
        };
    };
    let rest = text.lines().nth(line.saturating_sub(1)).and_then(|l| {
        l.char_indices()
            .nth(column.saturating_sub(1))
            .map(|(i, _)| &l[i..])
    });
    let at = match rest {
        Some(rest) => {
            let near: String = rest.chars().take(24).collect();
            let more = if rest.chars().count() > 24 { "..." } else { "" };
            format!("at line {line}, column {column}, near \"{near}{more}\"")
        }
        None if line >= text.lines().count() => {
            format!(
                "at line {line}, column {column}: the template ends before a {{{{...}}}} or a {{{{#block}}}} is closed"
            )
        }
        None => format!("at the end of line {line}"),
    };
    CompileError {
        message: format!("bad template: {reason} {at}"),
        position: Some((line, column)),
    }
}

/// WireMock names some values by paths this model cannot hold as JSON (`request.path`
/// is both a string and a list of segments; header names are case-insensitive), so
/// templates are rewritten before compiling:
/// - `request.path.[0]` → `request.pathSegments.[0]`, `request.path.id` → `request.pathParams.id`
/// - `request.headers.Content-Type` → `request.headers.[content-type]`
/// - `request.query.a.first` → `request.query.a.[0]`, `.last` → `request.queryLast.a`
///   (and headers and cookies likewise)
/// - `request.parts.file.headers.Content-Type` → `request.parts.file.headers.[content-type]`
/// - `request.requestLine.x` → `request.x` (WireMock 2's older names)
pub fn rewrite_paths(text: &str) -> String {
    static RULES: OnceLock<[regex::Regex; 5]> = OnceLock::new();
    let [line, hdr, part_hdr, ends, path] = RULES.get_or_init(|| {
        [
            regex::Regex::new(r"request\.requestLine\.").expect("valid"),
            regex::Regex::new(r"request\.headers\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)").expect("valid"),
            regex::Regex::new(
                r"request\.parts\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)\.headers\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)",
            )
            .expect("valid"),
            regex::Regex::new(
                r"request\.(query|headers|cookies)\.(\[[^\]]+\]|[A-Za-z0-9_\-]+)\.(first|last)\b",
            )
            .expect("valid"),
            regex::Regex::new(r"request\.path\.(\[\d+\]|[A-Za-z_][A-Za-z0-9_\-]*)").expect("valid"),
        ]
    });
    if !text.contains("request.") {
        return text.to_owned();
    }
    let bare = |s: &str| {
        s.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    };
    let t = line.replace_all(text, "request.");
    let t = hdr.replace_all(&t, |c: &regex::Captures| {
        format!("request.headers.[{}]", bare(&c[1]))
    });
    let t = part_hdr.replace_all(&t, |c: &regex::Captures| {
        format!("request.parts.{}.headers.[{}]", &c[1], bare(&c[2]))
    });
    let t = ends.replace_all(&t, |c: &regex::Captures| match &c[3] {
        "first" => format!("request.{}.{}.[0]", &c[1], &c[2]),
        _ => format!("request.{}Last.{}", &c[1], &c[2]),
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_that_does_not_compile_says_where_on_one_line() {
        let e = compile("a\nb {{#if request.url}} c").unwrap_err();
        assert_eq!(e.position.map(|(l, _)| l), Some(2), "{e}");
        assert!(e.message.starts_with("bad template: "), "{e}");
        assert!(!e.message.contains('\n'), "{e}");
        let e = compile("x {{request.url").unwrap_err();
        assert!(e.message.contains("line 1"), "{e}");
    }

    #[test]
    fn a_large_template_with_an_error_late_in_it_reports_its_true_line() {
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!(
                "{{\"i\": {i}, \"u\": \"{{{{request.url}}}}\"}},\n"
            ));
        }
        text.push_str("{{/nope}}\n");
        let e = compile(&text).unwrap_err();
        assert_eq!(e.position.map(|(l, _)| l), Some(301), "{e}");
    }
}
