//! The URL: exactly one of WireMock's five URL fields (`url`, `urlPattern`, `urlPath`,
//! `urlPathPattern`, `urlPathTemplate`), or none, which takes every URL.

use serde_json::{Map, Value};

use super::part::Part;
use crate::near_miss::{ReportRow, Score, levenshtein_distance};
use crate::regex::{Regex, full_regex};
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_str, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &[
    "url",
    "urlPattern",
    "urlPath",
    "urlPathPattern",
    "urlPathTemplate",
];

/// How the URL is matched; exactly one of WireMock's five URL fields, or none.
#[derive(Debug)]
pub enum UrlMatcher {
    Any,
    /// `url`: path and query, exactly.
    Url(String),
    /// `urlPattern`: a regex over path and query.
    UrlPattern(Regex),
    /// `urlPath`: the path, exactly.
    Path(String),
    /// `urlPathPattern`: a regex over the path.
    PathPattern(Regex),
    /// `urlPathTemplate`: `/contacts/{id}`.
    PathTemplate(PathTemplate),
}

impl UrlMatcher {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        let url_fields: Vec<(&str, &Value)> = FIELDS
            .iter()
            .filter_map(|&k| Some((k, obj.field(k)?)))
            .collect();
        if url_fields.len() > 1 {
            let keys: Vec<&str> = url_fields.iter().map(|(k, _)| *k).collect();
            return Err(FieldError::new(
                path,
                format!(
                    "only one URL field may be given, found {}",
                    keys.join(" and ")
                ),
            ));
        }
        let Some(&(key, value)) = url_fields.first() else {
            return Ok(UrlMatcher::Any);
        };
        let kpath = join(path, key);
        let text = as_str(value, &kpath)?;
        Ok(match key {
            "url" => UrlMatcher::Url(text.to_owned()),
            "urlPattern" => UrlMatcher::UrlPattern(full_regex(text, &kpath)?),
            "urlPath" => UrlMatcher::Path(text.to_owned()),
            "urlPathPattern" => UrlMatcher::PathPattern(full_regex(text, &kpath)?),
            _ => UrlMatcher::PathTemplate(PathTemplate::parse(text, &kpath)?),
        })
    }

    /// `urlPathTemplate` variables of `req` (none for other URL matchers).
    pub fn path_parameters(&self, req: &RequestSnapshot) -> Vec<(String, String)> {
        match self {
            UrlMatcher::PathTemplate(t) => t
                .capture(req.path())
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Part for UrlMatcher {
    fn constrains(&self) -> bool {
        !matches!(self, UrlMatcher::Any)
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        match self {
            UrlMatcher::Any => true,
            UrlMatcher::Url(u) => *u == req.url,
            UrlMatcher::UrlPattern(re) => re.is_match(&req.url),
            UrlMatcher::Path(p) => p == req.path(),
            UrlMatcher::PathPattern(re) => re.is_match(req.path()),
            UrlMatcher::PathTemplate(t) => t.matches(req.path()),
        }
    }

    /// The normalised Levenshtein distance for exact URLs and paths (and for a
    /// template, with its variables as `_`), 0 or 1 for regexes.
    fn score(&self, req: &RequestSnapshot) -> Score {
        match self {
            UrlMatcher::Any => Score::EXACT,
            UrlMatcher::Url(u) => Score {
                exact: *u == req.url,
                distance: levenshtein_distance(u, Some(&req.url)),
            },
            UrlMatcher::UrlPattern(re) => Score::of(re.is_match(&req.url)),
            UrlMatcher::Path(p) => Score {
                exact: p == req.path(),
                distance: levenshtein_distance(p, Some(req.path())),
            },
            UrlMatcher::PathPattern(re) => Score::of(re.is_match(req.path())),
            UrlMatcher::PathTemplate(t) => {
                if t.capture(req.path()).is_some() {
                    Score::EXACT
                } else {
                    Score {
                        exact: false,
                        distance: levenshtein_distance(&t.without_variables(), Some(req.path())),
                    }
                }
            }
        }
    }

    /// The URL row, with WireMock's hints for a regex with an unescaped `?` and for
    /// a URL that does not start with `/`.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        let (printed, expected, regex) = match self {
            UrlMatcher::Any => ("(always)".to_owned(), None, false),
            UrlMatcher::Url(u) => (u.clone(), Some(u.as_str()), false),
            UrlMatcher::UrlPattern(r) => {
                (format!("[regex] {}", r.as_str()), Some(r.as_str()), true)
            }
            UrlMatcher::Path(p) => (format!("[path] {p}"), Some(p.as_str()), false),
            UrlMatcher::PathPattern(r) => (
                format!("[path regex] {}", r.as_str()),
                Some(r.as_str()),
                true,
            ),
            UrlMatcher::PathTemplate(t) => (
                format!("[path template] {}", t.text),
                Some(t.text.as_str()),
                false,
            ),
        };
        let exact = self.score(req).exact;
        let mut row = ReportRow::part("URL", printed, req.url.clone(), exact);
        // WireMock's hints, appended to whatever the note was (Java prints a null
        // note as "null").
        let mut hint = |extra: &str| {
            let base = row.message.take().unwrap_or_else(|| "null".into());
            row.message = Some(format!("{base}{extra}"));
        };
        if let Some(expected) = expected {
            if regex && !question_marks_escaped(expected) {
                hint(". When using a regex, \"?\" should be \"\\?\"");
            }
            if !expected.starts_with('/') {
                hint(". URLs must start with a /");
            }
        }
        rows.push(row);
    }
}

/// `anyQuestionsMarksAreEscaped` as WireMock writes it (a `?` in the first two
/// characters counts as unescaped).
fn question_marks_escaped(s: &str) -> bool {
    let Some(index) = s.find('?') else {
        return true;
    };
    index >= 2 && s[..index].ends_with('\\')
}

#[derive(Debug, Clone)]
pub struct PathTemplate {
    pub text: String,
    /// The segments between `/`s, as ranges of `text`: a literal, or a variable
    /// with its braces. Matching reads `text` and this array, two allocations in
    /// all, rather than one string per segment.
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u32,
    end: u32,
    var: bool,
}

/// A segment of a template, as [`PathTemplate::pieces`] gives it.
enum Piece<'t> {
    Literal(&'t str),
    Var(&'t str),
}

impl PathTemplate {
    fn parse(text: &str, path: &str) -> FieldResult<Self> {
        if u32::try_from(text.len()).is_err() {
            return Err(FieldError::new(path, "template too long"));
        }
        let mut segments = Vec::new();
        let mut start = 0;
        for seg in text.split('/') {
            let end = start + seg.len();
            let var = if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                if name.is_empty() || name.contains(['{', '}']) {
                    return Err(FieldError::new(
                        path,
                        format!("bad template segment {seg:?}"),
                    ));
                }
                true
            } else if seg.contains(['{', '}']) {
                return Err(FieldError::new(
                    path,
                    format!("a template variable must fill a whole segment: {seg:?}"),
                ));
            } else {
                false
            };
            segments.push(Segment {
                start: start as u32,
                end: end as u32,
                var,
            });
            start = end + 1;
        }
        Ok(PathTemplate {
            text: text.to_owned(),
            segments,
        })
    }

    /// The segments in order: literals as written, variables by name.
    fn pieces(&self) -> impl Iterator<Item = Piece<'_>> {
        self.segments.iter().map(|s| {
            let text = &self.text[s.start as usize..s.end as usize];
            if s.var {
                Piece::Var(&text[1..text.len() - 1])
            } else {
                Piece::Literal(text)
            }
        })
    }

    /// Walks `path` along the template: whether it fits, handing each variable's
    /// name and raw (still encoded) segment to `var` on the way.
    fn fit<'t, 'p>(&'t self, path: &'p str, mut var: impl FnMut(&'t str, &'p str)) -> bool {
        let mut parts = path.split('/');
        for seg in self.pieces() {
            let Some(part) = parts.next() else {
                return false;
            };
            match seg {
                Piece::Literal(l) if l != part => return false,
                Piece::Var(_) if part.is_empty() => return false,
                Piece::Var(name) => var(name, part),
                Piece::Literal(_) => {}
            }
        }
        parts.next().is_none()
    }

    /// Whether `path` fits the template: [`PathTemplate::capture`] without
    /// decoding or keeping the values.
    pub fn matches(&self, path: &str) -> bool {
        self.fit(path, |_, _| {})
    }

    /// The variables' values when `path` fits the template (decoded).
    pub fn capture(&self, path: &str) -> Option<Vec<(&str, String)>> {
        let mut out = Vec::new();
        let fits = self.fit(path, |name, part| {
            let value = percent_encoding::percent_decode_str(part).decode_utf8_lossy();
            out.push((name, value.into_owned()));
        });
        fits.then_some(out)
    }

    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.pieces().filter_map(|s| match s {
            Piece::Var(v) => Some(v),
            Piece::Literal(_) => None,
        })
    }

    /// The template with each `{variable}` (and `**`) as `_`, as WireMock compares
    /// it with a path to score a near miss.
    pub fn without_variables(&self) -> String {
        let mut out = String::new();
        for (i, seg) in self.pieces().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match seg {
                Piece::Literal(l) => out.push_str(&l.replace("**", "_")),
                Piece::Var(_) => out.push('_'),
            }
        }
        out
    }

    /// The part before the first variable, for the index.
    pub fn literal_prefix(&self) -> String {
        let mut out = String::new();
        for (i, seg) in self.pieces().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match seg {
                Piece::Literal(l) => out.push_str(l),
                Piece::Var(_) => return out,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::request;
    use super::*;
    use serde_json::json;

    fn url(v: Value) -> UrlMatcher {
        UrlMatcher::parse(v.as_object().unwrap(), "request").unwrap()
    }

    fn template(text: &str) -> PathTemplate {
        let UrlMatcher::PathTemplate(t) = url(json!({ "urlPathTemplate": text })) else {
            panic!("{text} is a template")
        };
        t
    }

    #[test]
    fn url_fields_follow_wiremock_semantics() {
        let r = request("GET", "/a/b?x=1", &[], "");
        assert!(url(json!({"url": "/a/b?x=1"})).matches(&r));
        assert!(!url(json!({"url": "/a/b"})).matches(&r));
        assert!(url(json!({"urlPath": "/a/b"})).matches(&r));
        assert!(url(json!({"urlPattern": "/a/.*\\?x=1"})).matches(&r));
        assert!(!url(json!({"urlPattern": "/a/b"})).matches(&r));
        assert!(url(json!({"urlPathPattern": "/a/[a-z]"})).matches(&r));
        assert!(url(json!({})).matches(&r));
        assert!(!url(json!({})).constrains());
    }

    #[test]
    fn two_url_fields_are_refused() {
        let e = UrlMatcher::parse(
            json!({"url": "/a", "urlPath": "/a"}).as_object().unwrap(),
            "request",
        )
        .unwrap_err();
        assert_eq!(e.path, "request");
        assert!(e.reason.contains("only one URL field"));
    }

    #[test]
    fn a_template_matches_exactly_the_paths_it_captures() {
        let templates = [
            "/contacts/{contactId}/addresses/{addressId}",
            "/api/v3/res7/{id}",
            "/{a}",
            "/",
            "/x/**/y",
            "",
        ];
        let paths = [
            "/contacts/12/addresses/99",
            "/contacts/12/addresses/",
            "/contacts//addresses/99",
            "/contacts/12/addresses/99/",
            "/contacts/12/addresses",
            "/api/v3/res7/42",
            "/api/v3/res7/%2F",
            "/api/v3/res70/42",
            "/api/v3/res7",
            "/x/**/y",
            "/x/a/y",
            "/a",
            "/",
            "",
        ];
        for t in templates {
            let tpl = template(t);
            for path in paths {
                assert_eq!(
                    tpl.matches(path),
                    tpl.capture(path).is_some(),
                    "{t} against {path}"
                );
            }
        }
        let tpl = template("/contacts/{contactId}/addresses/{addressId}");
        assert_eq!(
            tpl.capture("/contacts/a%20b/addresses/9"),
            Some(vec![
                ("contactId", "a b".to_owned()),
                ("addressId", "9".to_owned())
            ])
        );
        assert_eq!(
            tpl.variables().collect::<Vec<_>>(),
            ["contactId", "addressId"]
        );
        assert_eq!(tpl.literal_prefix(), "/contacts/");
        assert_eq!(tpl.without_variables(), "/contacts/_/addresses/_");
    }

    #[test]
    fn a_template_scores_a_near_miss_with_its_variables_as_underscores() {
        let u = url(json!({"urlPathTemplate": "/ab/{id}"}));
        assert!(u.score(&request("GET", "/ab/7", &[], "")).exact);
        // "/ab/_" against "/ab/": one edit in five.
        assert_eq!(u.score(&request("GET", "/ab/", &[], "")).distance, 0.2);
    }

    #[test]
    fn the_url_row_carries_wiremocks_hints() {
        let mut rows = Vec::new();
        url(json!({"urlPattern": "/a?b=1"})).report(&request("GET", "/x", &[], ""), &mut rows);
        url(json!({"urlPath": "a"})).report(&request("GET", "/x", &[], ""), &mut rows);
        url(json!({"urlPath": "a"})).report(&request("GET", "a", &[], ""), &mut rows);
        assert_eq!(
            rows[0].message.as_deref(),
            Some("URL does not match. When using a regex, \"?\" should be \"\\?\"")
        );
        assert_eq!(
            rows[1].message.as_deref(),
            Some("URL does not match. URLs must start with a /")
        );
        // A hint on a URL that matched follows Java's "null".
        assert_eq!(
            rows[2].message.as_deref(),
            Some("null. URLs must start with a /")
        );
    }

    #[test]
    fn regex_urls_with_an_unescaped_question_mark_get_the_hint() {
        assert!(question_marks_escaped("/a"));
        assert!(question_marks_escaped("/a\\?b=1"));
        assert!(!question_marks_escaped("/a?b=1"));
        assert!(!question_marks_escaped("?"));
    }
}
