//! The `request` part of a mapping: URL, method, headers, query, form, cookies, auth,
//! body and multipart patterns, compiled, and evaluated against a [`RequestSnapshot`].
//!
//! [`RequestPattern::matches`] is the hot path: it stops at the first failed part
//! (cheapest parts first). How close a request came and what differed, for the "not
//! matched" report and the near-miss lists, is [`near_miss`](crate::near_miss)'s.

use std::sync::Arc;

use super::regex::{Regex, full_regex};
use base64::Engine as _;
use serde_json::{Map, Value};

use super::custom::{CustomMatch, CustomMatchers, MatchFailure};
use super::pattern::{Actual, StringPattern};
use decoy_spec::fields::{
    FieldError, FieldResult, Fields, as_array, as_object, as_str, as_u64, join, warn_unknown,
};
use decoy_spec::request::RequestSnapshot;

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

#[derive(Debug)]
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

/// A segment of a template, as [`PathTemplate::parts`] gives it.
enum Part<'t> {
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
    fn parts(&self) -> impl Iterator<Item = Part<'_>> {
        self.segments.iter().map(|s| {
            let text = &self.text[s.start as usize..s.end as usize];
            if s.var {
                Part::Var(&text[1..text.len() - 1])
            } else {
                Part::Literal(text)
            }
        })
    }

    /// Walks `path` along the template: whether it fits, handing each variable's
    /// name and raw (still encoded) segment to `var` on the way.
    fn fit<'t, 'p>(&'t self, path: &'p str, mut var: impl FnMut(&'t str, &'p str)) -> bool {
        let mut parts = path.split('/');
        for seg in self.parts() {
            let Some(part) = parts.next() else {
                return false;
            };
            match seg {
                Part::Literal(l) if l != part => return false,
                Part::Var(_) if part.is_empty() => return false,
                Part::Var(name) => var(name, part),
                Part::Literal(_) => {}
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
        self.parts().filter_map(|s| match s {
            Part::Var(v) => Some(v),
            Part::Literal(_) => None,
        })
    }

    /// The template with each `{variable}` (and `**`) as `_`, as WireMock compares
    /// it with a path to score a near miss.
    pub fn without_variables(&self) -> String {
        let mut out = String::new();
        for (i, seg) in self.parts().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match seg {
                Part::Literal(l) => out.push_str(&l.replace("**", "_")),
                Part::Var(_) => out.push('_'),
            }
        }
        out
    }

    /// The part before the first variable, for the index.
    pub fn literal_prefix(&self) -> String {
        let mut out = String::new();
        for (i, seg) in self.parts().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match seg {
                Part::Literal(l) => out.push_str(l),
                Part::Var(_) => return out,
            }
        }
        out
    }
}

/// Patterns for a field that may occur several times (headers, query parameters).
#[derive(Debug)]
pub enum MultiValuePattern {
    /// Matches when any value matches (or, with no value, when the pattern accepts absence).
    Single(StringPattern),
    /// Every pattern matches a distinct value and there are no other values.
    HasExactly(Vec<StringPattern>),
    /// Every pattern matches some value.
    Includes(Vec<StringPattern>),
}

impl MultiValuePattern {
    fn parse(v: &Value, path: &str) -> FieldResult<Self> {
        let obj = as_object(v, path)?;
        for (key, ctor) in [("hasExactly", true), ("includes", false)] {
            if let Some(list) = obj.field(key) {
                let lpath = join(path, key);
                let items = as_array(list, &lpath)?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| StringPattern::parse(p, &format!("{lpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?;
                return Ok(if ctor {
                    MultiValuePattern::HasExactly(items)
                } else {
                    MultiValuePattern::Includes(items)
                });
            }
        }
        StringPattern::parse(v, path).map(MultiValuePattern::Single)
    }

    pub fn matches(&self, values: &[&str]) -> bool {
        match self {
            MultiValuePattern::Single(p) => {
                if values.is_empty() {
                    p.matches_opt(None)
                } else {
                    values.iter().any(|v| p.matches(&Actual::new(v)))
                }
            }
            MultiValuePattern::Includes(ps) => ps
                .iter()
                .all(|p| values.iter().any(|v| p.matches(&Actual::new(v)))),
            MultiValuePattern::HasExactly(ps) => {
                if values.len() != ps.len() {
                    return false;
                }
                let mut used = vec![false; values.len()];
                ps.iter().all(|p| {
                    let hit = values
                        .iter()
                        .enumerate()
                        .position(|(i, v)| !used[i] && p.matches(&Actual::new(v)));
                    if let Some(i) = hit {
                        used[i] = true;
                    }
                    hit.is_some()
                })
            }
        }
    }

    /// 0.0 when matching, else how far the closest value is (for reports).
    pub fn distance(&self, values: &[&str]) -> f64 {
        if self.matches(values) {
            return 0.0;
        }
        match self {
            MultiValuePattern::Single(p) if !values.is_empty() => values
                .iter()
                .map(|v| p.distance(Some(&Actual::new(v))))
                .fold(1.0, f64::min),
            _ => 1.0,
        }
    }

    pub fn describe(&self) -> String {
        let list = |ps: &[StringPattern]| {
            ps.iter()
                .map(|p| p.describe())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            MultiValuePattern::Single(p) => p.describe(),
            MultiValuePattern::HasExactly(ps) => format!("[hasExactly] {}", list(ps)),
            MultiValuePattern::Includes(ps) => format!("[includes] {}", list(ps)),
        }
    }
}

#[derive(Debug)]
pub struct MultipartPattern {
    /// `matchingType`: `ANY` (default: some part matches) or `ALL` (every part does).
    all: bool,
    headers: Vec<(String, MultiValuePattern)>,
    body: Vec<StringPattern>,
}

/// The compiled `request` object of a mapping.
#[derive(Debug)]
pub struct RequestPattern {
    /// `None` is `ANY`.
    pub method: Option<String>,
    pub url: UrlMatcher,
    pub path_params: Vec<(String, StringPattern)>,
    pub scheme: Option<String>,
    pub host: Option<Box<StringPattern>>,
    pub port: Option<u16>,
    /// Names as the stub wrote them (the not-matched report prints them so; looking
    /// a name up in a request's `HeaderMap` ignores case, at the same cost);
    /// `basicAuthCredentials` adds the last one.
    pub headers: Vec<(String, MultiValuePattern)>,
    /// The last entry of `headers` is `basicAuthCredentials`' `Authorization`.
    pub basic_auth: bool,
    pub query: Vec<(String, MultiValuePattern)>,
    pub form: Vec<(String, MultiValuePattern)>,
    pub cookies: Vec<(String, StringPattern)>,
    pub body: Vec<StringPattern>,
    pub multipart: Vec<MultipartPattern>,
    /// `customMatcher`: asked last, after everything else matched (a plugin's
    /// matcher, resolved through [`CustomMatchers`] while the stub was parsed).
    pub custom: Option<Arc<dyn CustomMatch>>,
}

const REQUEST_FIELDS: &[&str] = &[
    "method",
    "url",
    "urlPattern",
    "urlPath",
    "urlPathPattern",
    "urlPathTemplate",
    "pathParameters",
    "scheme",
    "host",
    "port",
    "headers",
    "queryParameters",
    "formParameters",
    "cookies",
    "basicAuthCredentials",
    "basicAuth",
    "bodyPatterns",
    "multipartPatterns",
    "customMatcher",
];

impl RequestPattern {
    /// A pattern outside a stub mapping (journal queries, recording filters), where
    /// `customMatcher` is refused.
    pub fn parse(v: &Value, path: &str, warnings: &mut Vec<FieldError>) -> FieldResult<Self> {
        Self::parse_with(v, path, warnings, None)
    }

    /// A stub's pattern: `custom` resolves a `customMatcher`.
    pub fn parse_with(
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
        custom: Option<&dyn CustomMatchers>,
    ) -> FieldResult<Self> {
        crate::pattern::take_lenient_warnings();
        let parsed = Self::parse_inner(v, path, warnings, custom);
        warnings.extend(crate::pattern::take_lenient_warnings());
        parsed
    }

    fn parse_inner(
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
        custom: Option<&dyn CustomMatchers>,
    ) -> FieldResult<Self> {
        let obj = as_object(v, path)?;
        let custom = match (obj.field("customMatcher"), custom) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(FieldError::new(
                    join(path, "customMatcher"),
                    "customMatcher is only supported in stub mappings",
                ));
            }
            (Some(cm), Some(resolver)) => {
                Some(resolver.resolve(cm, &join(path, "customMatcher"), warnings)?)
            }
        };
        warn_unknown(obj, path, REQUEST_FIELDS, &[], warnings);

        let method = match obj.field("method") {
            None => None,
            Some(m) => {
                let m = as_str(m, &join(path, "method"))?
                    .trim()
                    .to_ascii_uppercase();
                if m.is_empty()
                    || !m
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(FieldError::new(
                        join(path, "method"),
                        format!("{m:?} is not an HTTP method (use GET, POST, ..., or ANY)"),
                    ));
                }
                (m != "ANY").then_some(m)
            }
        };

        let url_fields: Vec<(&str, &Value)> = [
            "url",
            "urlPattern",
            "urlPath",
            "urlPathPattern",
            "urlPathTemplate",
        ]
        .into_iter()
        .filter_map(|k| Some((k, obj.field(k)?)))
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
        let url = match url_fields.first() {
            None => UrlMatcher::Any,
            Some(&(key, value)) => {
                let kpath = join(path, key);
                let text = as_str(value, &kpath)?;
                match key {
                    "url" => UrlMatcher::Url(text.to_owned()),
                    "urlPattern" => UrlMatcher::UrlPattern(full_regex(text, &kpath)?),
                    "urlPath" => UrlMatcher::Path(text.to_owned()),
                    "urlPathPattern" => UrlMatcher::PathPattern(full_regex(text, &kpath)?),
                    _ => UrlMatcher::PathTemplate(PathTemplate::parse(text, &kpath)?),
                }
            }
        };

        let path_params = match obj.field("pathParameters") {
            None => Vec::new(),
            Some(pp) => {
                let pppath = join(path, "pathParameters");
                let UrlMatcher::PathTemplate(t) = &url else {
                    return Err(FieldError::new(
                        pppath,
                        "pathParameters need urlPathTemplate (a URL with {variables})",
                    ));
                };
                let list = string_patterns(pp, &pppath)?;
                for (name, _) in &list {
                    if !t.variables().any(|v| v == name) {
                        return Err(FieldError::new(
                            join(&pppath, name),
                            format!("the template {:?} has no variable {{{name}}}", t.text),
                        ));
                    }
                }
                list
            }
        };

        let mut headers = match obj.field("headers") {
            Some(h) => multi_patterns(h, &join(path, "headers"))?,
            None => Vec::new(),
        };
        let mut basic_auth = false;
        for key in ["basicAuthCredentials", "basicAuth"] {
            if let Some(auth) = obj.field(key) {
                let apath = join(path, key);
                let a = as_object(auth, &apath)?;
                let field = |k: &str| -> FieldResult<&str> {
                    as_str(
                        a.field(k)
                            .ok_or_else(|| FieldError::new(&apath, format!("missing \"{k}\"")))?,
                        &join(&apath, k),
                    )
                };
                let token = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    field("username")?,
                    field("password")?
                ));
                headers.push((
                    "Authorization".to_owned(),
                    MultiValuePattern::Single(StringPattern::EqualTo {
                        value: format!("Basic {token}"),
                        case_insensitive: false,
                    }),
                ));
                basic_auth = true;
            }
        }

        let port = match obj.field("port") {
            Some(p) => {
                let ppath = join(path, "port");
                Some(
                    u16::try_from(as_u64(p, &ppath)?)
                        .map_err(|_| FieldError::new(ppath, "not a port number"))?,
                )
            }
            None => None,
        };
        let scheme = match obj.field("scheme") {
            Some(s) => Some(as_str(s, &join(path, "scheme"))?.to_ascii_lowercase()),
            None => None,
        };
        let host = match obj.field("host") {
            Some(h) => Some(StringPattern::parse(h, &join(path, "host"))?),
            None => None,
        };

        let body = match obj.field("bodyPatterns") {
            Some(b) => {
                let bpath = join(path, "bodyPatterns");
                as_array(b, &bpath)?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| StringPattern::parse(p, &format!("{bpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?
            }
            None => Vec::new(),
        };

        let multipart = match obj.field("multipartPatterns") {
            Some(m) => {
                let mpath = join(path, "multipartPatterns");
                as_array(m, &mpath)?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| parse_multipart(p, &format!("{mpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?
            }
            None => Vec::new(),
        };

        Ok(RequestPattern {
            method,
            url,
            path_params,
            scheme,
            host: host.map(Box::new),
            port,
            headers,
            basic_auth,
            query: match obj.field("queryParameters") {
                Some(q) => multi_patterns(q, &join(path, "queryParameters"))?,
                None => Vec::new(),
            },
            form: match obj.field("formParameters") {
                Some(q) => multi_patterns(q, &join(path, "formParameters"))?,
                None => Vec::new(),
            },
            cookies: match obj.field("cookies") {
                Some(c) => string_patterns(c, &join(path, "cookies"))?,
                None => Vec::new(),
            },
            body,
            multipart,
            custom,
        })
    }

    /// Does `req` match? A custom matcher that fails counts as no match; the engine
    /// uses [`RequestPattern::try_matches`] to tell the two apart.
    pub fn matches(&self, req: &RequestSnapshot) -> bool {
        self.try_matches(req).unwrap_or(false)
    }

    /// The hot path: does `req` match? Cheap checks first, the custom matcher last;
    /// its failure is returned, so the caller can stop searching.
    pub fn try_matches(&self, req: &RequestSnapshot) -> Result<bool, MatchFailure> {
        self.try_matches_with(req, false)
    }

    /// As [`RequestPattern::try_matches`], where the caller may already have decided
    /// the URL matcher (`url_checked`: the engine's index compared the whole path
    /// with a `urlPath`, or with a `url` for a request without a query).
    pub fn try_matches_with(
        &self,
        req: &RequestSnapshot,
        url_checked: bool,
    ) -> Result<bool, MatchFailure> {
        self.try_matches_checked(req, url_checked, false)
    }

    /// As [`RequestPattern::try_matches_with`], where the caller may also have
    /// decided the method (`method_checked`: it compared it already).
    pub fn try_matches_checked(
        &self,
        req: &RequestSnapshot,
        url_checked: bool,
        method_checked: bool,
    ) -> Result<bool, MatchFailure> {
        if !method_checked && !self.method_matches(req) {
            return Ok(false);
        }
        if !url_checked && !self.url_matches(req) {
            return Ok(false);
        }
        if !self.rest_matches(req) {
            return Ok(false);
        }
        match &self.custom {
            None => Ok(true),
            Some(c) => c.matches(req, &self.path_parameters(req)),
        }
    }

    /// `urlPathTemplate` variables of `req` (none for other URL matchers).
    pub fn path_parameters(&self, req: &RequestSnapshot) -> Vec<(String, String)> {
        match &self.url {
            UrlMatcher::PathTemplate(t) => t
                .capture(req.path())
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the method and the URL are all it matches on (no path parameter,
    /// scheme, host, port, header, query, form, cookie, body, multipart or custom
    /// matcher): then a caller that has decided those two has decided the match.
    pub fn only_method_and_url(&self) -> bool {
        self.path_params.is_empty()
            && self.scheme.is_none()
            && self.host.is_none()
            && self.port.is_none()
            && self.headers.is_empty()
            && self.query.is_empty()
            && self.form.is_empty()
            && self.cookies.is_empty()
            && self.body.is_empty()
            && self.multipart.is_empty()
            && self.custom.is_none()
    }

    fn method_matches(&self, req: &RequestSnapshot) -> bool {
        self.method.as_ref().is_none_or(|m| *m == req.method)
    }

    /// Whether the URL matcher (with the path parameters a template pins) accepts
    /// `req`: all of matching for a stub that [only matches on method and
    /// URL](RequestPattern::only_method_and_url), once the method is decided.
    pub fn url_matches(&self, req: &RequestSnapshot) -> bool {
        match &self.url {
            UrlMatcher::Any => true,
            UrlMatcher::Url(u) => *u == req.url,
            UrlMatcher::UrlPattern(re) => re.is_match(&req.url),
            UrlMatcher::Path(p) => p == req.path(),
            UrlMatcher::PathPattern(re) => re.is_match(req.path()),
            UrlMatcher::PathTemplate(t) if self.path_params.is_empty() => t.matches(req.path()),
            UrlMatcher::PathTemplate(t) => match t.capture(req.path()) {
                None => false,
                Some(vars) => self.path_params.iter().all(|(name, p)| {
                    vars.iter()
                        .find(|(n, _)| n == name)
                        .is_some_and(|(_, v)| p.matches(&Actual::new(v)))
                }),
            },
        }
    }

    fn rest_matches(&self, req: &RequestSnapshot) -> bool {
        if let Some(s) = &self.scheme
            && s != req.scheme
        {
            return false;
        }
        if self.host.is_some() || self.port.is_some() {
            let hp = req.host_port();
            if let Some(port) = self.port
                && hp.as_ref().map(|(_, p)| *p) != Some(port)
            {
                return false;
            }
            if let Some(h) = &self.host
                && !h.matches_opt(hp.as_ref().map(|(h, _)| Actual::new(h)).as_ref())
            {
                return false;
            }
        }
        for (name, p) in &self.headers {
            let values = req.header_values(name);
            let values: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
            if !p.matches(&values) {
                return false;
            }
        }
        for (name, p) in &self.query {
            let values: Vec<&str> = req.query_values(name).collect();
            if !p.matches(&values) {
                return false;
            }
        }
        for (name, p) in &self.cookies {
            let value = req
                .cookies()
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| Actual::new(v));
            if !p.matches_opt(value.as_ref()) {
                return false;
            }
        }
        for (name, p) in &self.form {
            let values: Vec<&str> = req
                .form()
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect();
            if !p.matches(&values) {
                return false;
            }
        }
        if !self.body.is_empty() {
            let text = req.body_text();
            let actual = Actual::body(&text, &req.body);
            if !self.body.iter().all(|p| p.matches(&actual)) {
                return false;
            }
        }
        self.multipart.iter().all(|mp| mp.matches(req))
    }
}

impl MultipartPattern {
    /// Whether `req`'s parts satisfy this pattern.
    pub(crate) fn matches_request(&self, req: &RequestSnapshot) -> bool {
        self.matches(req)
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        let parts = req.parts();
        if parts.is_empty() {
            return false;
        }
        let part_ok = |part: &decoy_spec::request::Part| {
            self.headers.iter().all(|(name, p)| {
                let values: Vec<std::borrow::Cow<'_, str>> = part
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()))
                    .collect();
                let refs: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
                p.matches(&refs)
            }) && {
                let text = String::from_utf8_lossy(&part.body);
                let actual = Actual::body(&text, &part.body);
                self.body.iter().all(|p| p.matches(&actual))
            }
        };
        if self.all {
            parts.iter().all(part_ok)
        } else {
            parts.iter().any(part_ok)
        }
    }
}

fn parse_multipart(v: &Value, path: &str) -> FieldResult<MultipartPattern> {
    let obj = as_object(v, path)?;
    let all = match obj.field("matchingType") {
        None => false,
        Some(t) => match as_str(t, &join(path, "matchingType"))? {
            "ANY" => false,
            "ALL" => true,
            other => {
                return Err(FieldError::new(
                    join(path, "matchingType"),
                    format!("{other:?} is not a matching type; use ANY or ALL"),
                ));
            }
        },
    };
    let headers = match obj.field("headers") {
        Some(h) => multi_patterns(h, &join(path, "headers"))?
            .into_iter()
            .map(|(k, p)| (k.to_ascii_lowercase(), p))
            .collect(),
        None => Vec::new(),
    };
    let body = match obj.field("bodyPatterns") {
        Some(b) => {
            let bpath = join(path, "bodyPatterns");
            as_array(b, &bpath)?
                .iter()
                .enumerate()
                .map(|(i, p)| StringPattern::parse(p, &format!("{bpath}[{i}]")))
                .collect::<FieldResult<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    Ok(MultipartPattern { all, headers, body })
}

fn multi_patterns(v: &Value, path: &str) -> FieldResult<Vec<(String, MultiValuePattern)>> {
    let obj: &Map<String, Value> = as_object(v, path)?;
    obj.iter()
        .map(|(k, p)| Ok((k.clone(), MultiValuePattern::parse(p, &join(path, k))?)))
        .collect()
}

fn string_patterns(v: &Value, path: &str) -> FieldResult<Vec<(String, StringPattern)>> {
    let obj: &Map<String, Value> = as_object(v, path)?;
    obj.iter()
        .map(|(k, p)| Ok((k.clone(), StringPattern::parse(p, &join(path, k))?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use serde_json::json;

    fn pat(v: Value) -> RequestPattern {
        RequestPattern::parse(&v, "request", &mut Vec::new()).unwrap()
    }

    fn req(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> RequestSnapshot {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        RequestSnapshot::new(method, url)
            .with_headers(h)
            .with_body(body.to_owned())
    }

    #[test]
    fn url_fields_follow_wiremock_semantics() {
        let r = req("GET", "/a/b?x=1", &[], "");
        assert!(pat(json!({"url": "/a/b?x=1"})).matches(&r));
        assert!(!pat(json!({"url": "/a/b"})).matches(&r));
        assert!(pat(json!({"urlPath": "/a/b"})).matches(&r));
        assert!(pat(json!({"urlPattern": "/a/.*\\?x=1"})).matches(&r));
        assert!(!pat(json!({"urlPattern": "/a/b"})).matches(&r));
        assert!(pat(json!({"urlPathPattern": "/a/[a-z]"})).matches(&r));
        assert!(pat(json!({})).matches(&r));
    }

    #[test]
    fn path_templates_capture_and_check_parameters() {
        let p = pat(json!({
            "urlPathTemplate": "/contacts/{contactId}/addresses/{addressId}",
            "pathParameters": {"contactId": {"equalTo": "12"}, "addressId": {"matches": "[0-9]+"}}
        }));
        assert!(p.matches(&req("GET", "/contacts/12/addresses/99?x", &[], "")));
        assert!(!p.matches(&req("GET", "/contacts/13/addresses/99", &[], "")));
        assert!(!p.matches(&req("GET", "/contacts/12/addresses/abc", &[], "")));
        assert!(!p.matches(&req("GET", "/contacts/12/addresses", &[], "")));
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
            let p = pat(json!({ "urlPathTemplate": t }));
            let UrlMatcher::PathTemplate(tpl) = &p.url else {
                panic!("{t} is a template")
            };
            for path in paths {
                assert_eq!(
                    tpl.matches(path),
                    tpl.capture(path).is_some(),
                    "{t} against {path}"
                );
            }
        }
        let p = pat(json!({ "urlPathTemplate": "/contacts/{contactId}/addresses/{addressId}" }));
        let UrlMatcher::PathTemplate(tpl) = &p.url else {
            panic!("a template")
        };
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
    fn method_any_matches_every_method() {
        let p = pat(json!({"method": "ANY", "urlPath": "/x"}));
        assert!(p.matches(&req("DELETE", "/x", &[], "")));
        assert!(!pat(json!({"method": "GET"})).matches(&req("POST", "/x", &[], "")));
    }

    #[test]
    fn headers_are_case_insensitive_by_name_and_multi_valued() {
        let r = req("GET", "/", &[("X-Tag", "a"), ("x-tag", "b")], "");
        assert!(pat(json!({"headers": {"x-TAG": {"equalTo": "b"}}})).matches(&r));
        assert!(
            pat(
                json!({"headers": {"X-Tag": {"hasExactly": [{"equalTo": "b"}, {"equalTo": "a"}]}}})
            )
            .matches(&r)
        );
        assert!(
            !pat(json!({"headers": {"X-Tag": {"hasExactly": [{"equalTo": "a"}]}}})).matches(&r)
        );
        assert!(pat(json!({"headers": {"X-Tag": {"includes": [{"equalTo": "a"}]}}})).matches(&r));
        assert!(pat(json!({"headers": {"X-Other": {"absent": true}}})).matches(&r));
    }

    #[test]
    fn query_form_cookies_and_basic_auth() {
        let r = req(
            "POST",
            "/f?q=hello%20world",
            &[
                ("cookie", "session=abc; theme=dark"),
                ("authorization", "Basic dXNlcjpwYXNz"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            "name=Ann+Lee&age=30",
        );
        let p = pat(json!({
            "queryParameters": {"q": {"equalTo": "hello world"}},
            "cookies": {"session": {"equalTo": "abc"}},
            "formParameters": {"name": {"equalTo": "Ann Lee"}},
            "basicAuthCredentials": {"username": "user", "password": "pass"}
        }));
        assert!(p.matches(&r));
        let wrong = pat(json!({"basicAuth": {"username": "user", "password": "nope"}}));
        assert!(!wrong.matches(&r));
    }

    #[test]
    fn rejects_two_url_fields_and_unknown_template_variables() {
        let e = RequestPattern::parse(
            &json!({"url": "/a", "urlPath": "/a"}),
            "request",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.reason.contains("only one URL field"));
        let e = RequestPattern::parse(
            &json!({"urlPathTemplate": "/a/{id}", "pathParameters": {"idd": {"equalTo": "1"}}}),
            "request",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(e.path, "request.pathParameters.idd");
    }

    #[test]
    fn unknown_request_fields_are_warnings() {
        let mut w = Vec::new();
        RequestPattern::parse(&json!({"urlPath": "/a", "hedaers": {}}), "request", &mut w).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "request.hedaers");
        assert!(w[0].reason.contains("did you mean \"headers\""));
    }
}
