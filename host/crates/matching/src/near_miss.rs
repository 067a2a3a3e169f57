//! How close a request came to a stub, and the rows of the "Request was not matched"
//! report, both as WireMock 3.13 works them out, so that decoy names the same closest
//! stub and prints the same table.
//!
//! Closeness follows WireMock's `RequestPattern.match`: every part of the pattern
//! gives a distance from 0.0 (matches) to 1.0, and the request's distance is their
//! weighted mean. The URL, host and port weigh 10, the method, scheme (and client
//! IP) 3; only when all of these match do the headers, query, form, cookies, body,
//! path parameters and multipart parts count, with weight 1 each (each of them the
//! plain mean over its items). A part's distance is WireMock's: the normalised
//! Levenshtein distance for `equalTo` and exact URLs and paths, the share of
//! differing nodes for `equalToJson`, and 0 or 1 for the operators WireMock scores
//! that way.
//!
//! The rows are WireMock's `Diff` as its `PlainTextDiffRenderer` shows it: the
//! header names as the stub wrote them, "... is not present" for a missing value,
//! expected JSON and XML bodies pretty-printed, and body rows only for the body
//! patterns that fail.
//!
//! [`nearest`] orders candidates by that distance as WireMock's `NearMissCalculator`
//! does. It is the one closeness model: the report's closest stub and every
//! near-miss list of the admin API (`/__admin/near-misses/request`,
//! `/__admin/near-misses/request-pattern`, `/__admin/requests/unmatched/near-misses`)
//! come from it, so they always agree.
//!
//! None of this is on the hot path: it runs for unmatched requests only.

use base64::Engine as _;
use serde_json::Value;

use crate::pattern::{Actual, JsonPathQuery, StringPattern, definite_path_form};
use crate::request_pattern::{MultiValuePattern, RequestPattern, UrlMatcher};
use decoy_spec::request::RequestSnapshot;

/// One row of the report: the stub's side, the request's side, and the note shown
/// after `<<<<<` (none for a part that matched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRow {
    pub left: String,
    pub right: String,
    pub message: Option<String>,
}

impl ReportRow {
    /// The blank row WireMock leaves between sections.
    pub fn spacer() -> Self {
        ReportRow {
            left: String::new(),
            right: String::new(),
            message: None,
        }
    }

    /// A row for one part: `attribute` names it in the note ("Header", "Body"...).
    /// As WireMock's `DiffLine.getMessage`: an empty request side is "not present"
    /// (even for a part that matched, e.g. an `absent` header), otherwise a part
    /// that failed "does not match".
    fn part(attribute: &str, left: String, right: String, exact: bool) -> Self {
        let message = if right.is_empty() {
            Some(format!("{attribute} is not present"))
        } else if exact {
            None
        } else {
            Some(format!("{attribute} does not match"))
        };
        ReportRow {
            left,
            right,
            message,
        }
    }
}

/// WireMock's `MatchResult`: whether a part matched, and how far it was.
#[derive(Debug, Clone, Copy)]
pub struct Score {
    pub exact: bool,
    pub distance: f64,
}

impl Score {
    const EXACT: Score = Score {
        exact: true,
        distance: 0.0,
    };
    const NO: Score = Score {
        exact: false,
        distance: 1.0,
    };

    fn of(exact: bool) -> Score {
        if exact { Score::EXACT } else { Score::NO }
    }
}

/// `MatchResult.aggregate`: exact when all are, the distance their mean (NaN for no
/// parts at all, as in Java).
fn aggregate(scores: &[Score]) -> Score {
    Score {
        exact: scores.iter().all(|s| s.exact),
        distance: scores.iter().map(|s| s.distance).sum::<f64>() / scores.len() as f64,
    }
}

/// The score with the smallest distance, the first of equals (WireMock's
/// `getBestMatch`); `None` for no scores.
fn best(scores: impl IntoIterator<Item = Score>) -> Option<Score> {
    scores
        .into_iter()
        .fold(None, |acc: Option<Score>, s| match acc {
            Some(a) if a.distance <= s.distance || s.distance.is_nan() => Some(a),
            _ => Some(s),
        })
}

/// WireMock's `normalisedLevenshteinDistance`: the edit distance over the longer
/// length; 1.0 when the value is missing (and NaN for two empty strings, as in Java).
pub fn levenshtein_distance(expected: &str, actual: Option<&str>) -> f64 {
    let Some(actual) = actual else { return 1.0 };
    let longest = expected
        .encode_utf16()
        .count()
        .max(actual.encode_utf16().count());
    strsim::levenshtein(expected, actual) as f64 / longest as f64
}

impl StringPattern {
    /// This pattern's `match(value).getDistance()` and `isExactMatch()` in WireMock;
    /// `None` is a missing value (Java's null).
    pub fn score(&self, actual: Option<&Actual<'_>>) -> Score {
        let exact = self.matches_opt(actual);
        match self {
            StringPattern::EqualTo { value, .. } => Score {
                exact,
                distance: levenshtein_distance(value, actual.map(|a| a.text)),
            },
            StringPattern::EqualToJson(eq) => {
                let Some(doc) = actual.and_then(|a| a.json()) else {
                    return Score::NO;
                };
                Score {
                    exact,
                    distance: if exact { 0.0 } else { eq.distance(doc) },
                }
            }
            StringPattern::MatchesJsonPath { sub: Some(sub), .. } if !exact => {
                let Some(results) = actual.and_then(|a| self.expression_result(a.text, sub)) else {
                    return Score::NO;
                };
                let mut results = results;
                if results.is_empty() && matches!(**sub, StringPattern::Absent) {
                    return sub.score(None);
                }
                if results.is_empty() {
                    return Score::NO;
                }
                let scores = results
                    .drain(..)
                    .map(|r| sub.score(Some(&Actual::new(&r))))
                    .collect::<Vec<_>>();
                Score {
                    exact: false,
                    distance: best(scores).map_or(1.0, |s| s.distance),
                }
            }
            StringPattern::MatchesXPath {
                xpath,
                sub: Some(sub),
            } if !exact => {
                let Some(nodes) = actual.and_then(|a| a.xml()).and_then(|d| xpath.evaluate(d))
                else {
                    return Score::NO;
                };
                best(nodes.iter().map(|n| sub.score(Some(&Actual::new(n))))).unwrap_or(Score::NO)
            }
            StringPattern::And(list) => {
                let scores: Vec<Score> = list.iter().map(|p| p.score(actual)).collect();
                aggregate(&scores)
            }
            StringPattern::Or(list) => Score {
                exact,
                distance: list
                    .iter()
                    .map(|p| p.score(actual).distance)
                    .fold(f64::INFINITY, f64::min),
            },
            _ => Score::of(exact),
        }
    }

    /// What a JSONPath with a sub-pattern selects in `body`, as the strings WireMock
    /// matches the sub-pattern against (`getExpressionResult`): an object (or a list,
    /// when the sub-pattern is `equalToJson`) as pretty JSON, a list element by
    /// element, a scalar as its text. `None` when the body is empty, not JSON or the
    /// path selects nothing.
    fn expression_result(&self, body: &str, sub: &StringPattern) -> Option<Vec<String>> {
        let StringPattern::MatchesJsonPath {
            expression,
            path,
            length,
            ..
        } = self
        else {
            return None;
        };
        if body.is_empty() || body.trim_start().starts_with('<') {
            return None;
        }
        let doc: Value = serde_json::from_str(body).ok()?;
        let selected = json_path_select(path, *length, expression, &doc)?;
        let json_sub = matches!(sub, StringPattern::EqualToJson(_));
        let out = match &selected {
            Value::Object(_) => vec![jackson_pretty(&selected)],
            Value::Array(_) if json_sub => vec![jackson_pretty(&selected)],
            Value::Array(items) => items.iter().map(java_to_string).collect(),
            Value::Null => Vec::new(),
            other => vec![java_to_string(other)],
        };
        Some(out)
    }

    /// WireMock's operator name for this pattern (`equalTo`, `matches`...).
    pub fn wm_name(&self) -> String {
        match self {
            StringPattern::EqualTo { .. } => "equalTo".into(),
            StringPattern::BinaryEqualTo(_) => "binaryEqualTo".into(),
            StringPattern::Contains(_) => "contains".into(),
            StringPattern::DoesNotContain(_) => "doesNotContain".into(),
            StringPattern::Matches(_) => "matches".into(),
            StringPattern::DoesNotMatch(_) => "doesNotMatch".into(),
            StringPattern::Absent => "absent".into(),
            StringPattern::Anything => "anything".into(),
            StringPattern::EqualToJson(_) => "equalToJson".into(),
            StringPattern::MatchesJsonPath { .. } => "matchesJsonPath".into(),
            StringPattern::MatchesJsonSchema(_) => "matchesJsonSchema".into(),
            StringPattern::EqualToXml(_) => "equalToXml".into(),
            StringPattern::MatchesXPath { .. } => "matchesXPath".into(),
            StringPattern::DateTime(d) => {
                let described = d.describe();
                described
                    .strip_prefix('[')
                    .and_then(|r| r.split_once(']'))
                    .map(|(op, _)| op.to_owned())
                    .unwrap_or(described)
            }
            StringPattern::And(_) => "and".into(),
            StringPattern::Or(_) => "or".into(),
            StringPattern::Not(_) => "not".into(),
        }
    }

    /// WireMock's `getExpected()`: the operand as the report prints it (JSON and
    /// XML pretty-printed, `(absent)` for `absent`).
    pub fn wm_expected(&self) -> String {
        match self {
            StringPattern::EqualTo { value, .. } => value.clone(),
            StringPattern::BinaryEqualTo(b) => base64::engine::general_purpose::STANDARD.encode(b),
            StringPattern::Contains(s) | StringPattern::DoesNotContain(s) => s.clone(),
            StringPattern::Matches(r) | StringPattern::DoesNotMatch(r) => r.as_str().to_owned(),
            StringPattern::Absent => "(absent)".into(),
            StringPattern::Anything => "anything".into(),
            StringPattern::EqualToJson(eq) => jackson_pretty(&eq.expected),
            StringPattern::MatchesJsonPath { expression, .. } => expression.clone(),
            StringPattern::MatchesJsonSchema(v) => jackson_pretty(&v.1),
            StringPattern::EqualToXml(x) => {
                xml_pretty(&x.expected_text).unwrap_or_else(|| x.expected_text.clone())
            }
            StringPattern::MatchesXPath { xpath, .. } => xpath.expression.clone(),
            StringPattern::DateTime(d) => {
                let described = d.describe();
                described
                    .split_once("] ")
                    .map(|(_, raw)| raw.to_owned())
                    .unwrap_or(described)
            }
            StringPattern::And(list) | StringPattern::Or(list) => {
                let op = if matches!(self, StringPattern::And(_)) {
                    " AND "
                } else {
                    " OR "
                };
                list.iter()
                    .map(|p| format!("{} {}", p.wm_name(), p.wm_expected()))
                    .collect::<Vec<_>>()
                    .join(op)
            }
            StringPattern::Not(inner) => inner.wm_expected(),
        }
    }

    /// WireMock prints no operator for the equality patterns (`isAnEqualToPattern`).
    fn is_equality(&self) -> bool {
        matches!(
            self,
            StringPattern::EqualTo { .. }
                | StringPattern::EqualToJson(_)
                | StringPattern::EqualToXml(_)
                | StringPattern::BinaryEqualTo(_)
        )
    }

    /// `generateOperatorString`: `default` for an equality, else ` [name] `.
    fn operator(&self, default: &str) -> String {
        if self.is_equality() {
            default.to_owned()
        } else {
            format!(" [{}] ", self.wm_name())
        }
    }
}

/// The node (or list of nodes) a JSONPath selects, as Jayway hands it to WireMock: a
/// definite path gives its value, an indefinite one the list of what it found.
fn json_path_select(
    path: &JsonPathQuery,
    length: bool,
    expression: &str,
    doc: &Value,
) -> Option<Value> {
    // Past its node budget a path selects nothing here, as in matching.
    let owned = path.query(doc).unwrap_or_default();
    let nodes: Vec<&Value> = owned.iter().map(|v| &**v).collect();
    if length {
        let n = match nodes.as_slice() {
            [Value::Array(a)] => a.len(),
            [Value::Object(o)] => o.len(),
            [Value::String(s)] => s.chars().count(),
            _ => return None,
        };
        return Some(Value::from(n));
    }
    if definite_path_form(expression) {
        nodes.first().map(|v| (*v).clone())
    } else {
        Some(Value::Array(nodes.into_iter().cloned().collect()))
    }
}

/// Java's `toString` of what Jayway returns: a string as itself, a map as
/// `{a=1, b=2}`, a list as compact JSON.
fn java_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => decoy_jsonfmt::number(n, decoy_jsonfmt::Numbers::BigDecimal),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}={}", java_to_string(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

impl MultiValuePattern {
    /// WireMock's `MultiValuePattern.match`: a single pattern takes the closest of
    /// the values (or the missing value); `hasExactly` / `includes` need a value and
    /// average their patterns' best scores (`hasExactly` also scores the count).
    pub fn score(&self, values: &[&str]) -> Score {
        match self {
            MultiValuePattern::Single(p) => {
                if values.is_empty() {
                    p.score(None)
                } else {
                    best(values.iter().map(|v| p.score(Some(&Actual::new(v))))).unwrap_or(Score::NO)
                }
            }
            MultiValuePattern::HasExactly(ps) | MultiValuePattern::Includes(ps) => {
                if values.is_empty() {
                    return Score::NO;
                }
                let each: Vec<Score> = ps
                    .iter()
                    .map(|p| {
                        best(values.iter().map(|v| p.score(Some(&Actual::new(v)))))
                            .unwrap_or(Score::NO)
                    })
                    .collect();
                let all = aggregate(&each);
                match self {
                    MultiValuePattern::HasExactly(_) => {
                        aggregate(&[Score::of(ps.len() == values.len()), all])
                    }
                    _ => all,
                }
            }
        }
    }

    /// `generateOperatorStringForMultiValuePattern`.
    fn operator(&self, default: &str) -> String {
        match self {
            MultiValuePattern::Single(p) => p.operator(default),
            MultiValuePattern::HasExactly(ps) => format!(" exactly [{}]", list_name(ps)),
            MultiValuePattern::Includes(ps) => format!(" including [{}]", list_name(ps)),
        }
    }

    /// `getExpected()`: the single pattern's operand; nothing for a list.
    fn expected(&self) -> String {
        match self {
            MultiValuePattern::Single(p) => p.wm_expected(),
            _ => String::new(),
        }
    }
}

fn list_name(ps: &[StringPattern]) -> String {
    ps.iter()
        .map(|p| format!("{} {}", p.wm_name(), p.wm_expected()))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The custom matcher's row, as WireMock's `Diff` writes it: for a matcher it has,
/// `[custom matcher: NAME]` against the request shown as one blank (its
/// `EmptyToStringRequestWrapper`), noted when the matcher says no (it is asked even
/// when other parts already differ); for one it does not have (an extension it was
/// started without), a section title `[custom matcher: NAME]` on both sides.
fn custom_matcher_row(
    custom: &dyn crate::custom::CustomMatch,
    path_parameters: impl FnOnce() -> Vec<(String, String)>,
    req: &RequestSnapshot,
) -> ReportRow {
    let title = format!("[custom matcher: {}]", custom.name());
    if !custom.installed() {
        return ReportRow {
            left: title.clone(),
            right: title,
            message: None,
        };
    }
    let exact = custom.matches(req, &path_parameters()).unwrap_or(false);
    ReportRow::part("custom matcher", title, " ".into(), exact)
}

/// `key: value` per value, one per line (WireMock's `MultiValue.toString`).
fn multi_value_text(key: &str, values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{key}: {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many near misses WireMock lists (`NearMissCalculator.NEAR_MISS_COUNT`).
pub const NEAR_MISS_COUNT: usize = 3;

/// WireMock's `NearMissCalculator` order: of `items`, the `limit` at the smallest
/// [`RequestPattern::near_miss_distance`] (as `distance` gives it), smallest first.
/// Among equal distances the earlier item comes first (WireMock's sort is stable);
/// NaN, which Java's `Double.compare` sorts after every number, comes last. Only
/// `limit` items are kept while scanning, so the report's search for its one closest
/// stub holds one.
pub fn nearest<T>(
    items: impl IntoIterator<Item = T>,
    limit: usize,
    mut distance: impl FnMut(&T) -> f64,
) -> Vec<(f64, T)> {
    let closer = |a: f64, b: f64| a < b || (b.is_nan() && !a.is_nan());
    let mut best: Vec<(f64, T)> = Vec::with_capacity(limit.min(NEAR_MISS_COUNT));
    for item in items {
        let d = distance(&item);
        let at = best
            .iter()
            .position(|(b, _)| closer(d, *b))
            .unwrap_or(best.len());
        if at < limit {
            if best.len() == limit {
                best.pop();
            }
            best.insert(at, (d, item));
        }
    }
    best
}

impl RequestPattern {
    /// How far `req` is from this pattern, as WireMock scores a near miss (0.0 for
    /// a match). `custom` says whether the custom matcher accepts the request; it is
    /// asked only when every other part matches.
    pub fn near_miss_distance(&self, req: &RequestSnapshot) -> f64 {
        let mut parts: Vec<(Score, f64)> = Vec::with_capacity(14);
        parts.push((
            self.scheme
                .as_ref()
                .map_or(Score::EXACT, |s| Score::of(s == req.scheme)),
            3.0,
        ));
        let hp = if self.host.is_some() || self.port.is_some() {
            req.host_port()
        } else {
            None
        };
        parts.push((
            self.host.as_ref().map_or(Score::EXACT, |h| {
                h.score(hp.as_ref().map(|(h, _)| Actual::new(h)).as_ref())
            }),
            10.0,
        ));
        parts.push((
            self.port.map_or(Score::EXACT, |p| {
                Score::of(hp.as_ref().map(|(_, port)| *port) == Some(p))
            }),
            10.0,
        ));
        // `clientIp`, which decoy's stubs do not have: always a match, still weighed.
        parts.push((Score::EXACT, 3.0));
        parts.push((self.url_score(req), 10.0));
        parts.push((
            Score::of(self.method.as_ref().is_none_or(|m| *m == req.method)),
            3.0,
        ));
        if parts.iter().all(|(s, _)| s.exact) {
            parts.push((self.path_params_score(req), 1.0));
            parts.push((self.headers_score(req), 1.0));
            parts.push((self.query_score(req), 1.0));
            parts.push((self.form_score(req), 1.0));
            parts.push((self.cookies_score(req), 1.0));
            parts.push((self.body_score(req), 1.0));
            parts.push((self.multipart_score(req), 1.0));
        }
        let weights: f64 = parts.iter().map(|(_, w)| w).sum();
        let distance = parts.iter().map(|(s, w)| s.distance * w).sum::<f64>() / weights;
        if parts.iter().all(|(s, _)| s.exact)
            && let Some(custom) = &self.custom
        {
            let ok = custom
                .matches(req, &self.path_parameters(req))
                .unwrap_or(false);
            return (distance + if ok { 0.0 } else { 1.0 }) / 2.0;
        }
        distance
    }

    fn url_score(&self, req: &RequestSnapshot) -> Score {
        match &self.url {
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

    fn path_params_score(&self, req: &RequestSnapshot) -> Score {
        let UrlMatcher::PathTemplate(t) = &self.url else {
            return Score::EXACT;
        };
        if self.path_params.is_empty() {
            return Score::EXACT;
        }
        let Some(vars) = t.capture(req.path()) else {
            return Score::NO;
        };
        let scores: Vec<Score> = self
            .path_params
            .iter()
            .map(|(name, p)| {
                let value = vars
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str());
                p.score(value.map(Actual::new).as_ref())
            })
            .collect();
        aggregate(&scores)
    }

    fn headers_score(&self, req: &RequestSnapshot) -> Score {
        if self.headers.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .headers
            .iter()
            .map(|(name, p)| {
                let values = req.header_values(name);
                let refs: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
                p.score(&refs)
            })
            .collect();
        aggregate(&scores)
    }

    fn query_score(&self, req: &RequestSnapshot) -> Score {
        if self.query.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .query
            .iter()
            .map(|(name, p)| {
                let values: Vec<&str> = req.query_values(name).collect();
                p.score(&values)
            })
            .collect();
        aggregate(&scores)
    }

    fn form_score(&self, req: &RequestSnapshot) -> Score {
        if self.form.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .form
            .iter()
            .map(|(name, p)| p.score(&form_values(req, name)))
            .collect();
        aggregate(&scores)
    }

    fn cookies_score(&self, req: &RequestSnapshot) -> Score {
        if self.cookies.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .cookies
            .iter()
            .map(|(name, p)| {
                let values: Vec<&str> = req
                    .cookies()
                    .iter()
                    .filter(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
                    .collect();
                if values.is_empty() {
                    Score::of(p.matches_opt(None))
                } else {
                    best(values.iter().map(|v| p.score(Some(&Actual::new(v))))).unwrap_or(Score::NO)
                }
            })
            .collect();
        aggregate(&scores)
    }

    fn body_score(&self, req: &RequestSnapshot) -> Score {
        if self.body.is_empty() {
            return Score::EXACT;
        }
        let text = req.body_text();
        let actual = Actual::body(&text, &req.body);
        let present = (!text.is_empty()).then_some(&actual);
        let scores: Vec<Score> = self
            .body
            .iter()
            .map(|p| match p {
                StringPattern::BinaryEqualTo(b) => Score::of(b[..] == req.body[..]),
                _ => p.score(present),
            })
            .collect();
        aggregate(&scores)
    }

    fn multipart_score(&self, req: &RequestSnapshot) -> Score {
        if self.multipart.is_empty() {
            return Score::EXACT;
        }
        if req.parts().is_empty() {
            return Score::NO;
        }
        let scores: Vec<Score> = self
            .multipart
            .iter()
            .map(|mp| Score::of(mp.matches_request(req)))
            .collect();
        aggregate(&scores)
    }

    /// The report's rows for this pattern against `req`, in WireMock's order
    /// (`Diff.getLines`, less the body rows that match): host, port, scheme, method,
    /// URL; then headers, path parameters, query, form, cookies, body, multipart and
    /// custom matcher sections, each followed by a blank row. The scenario row, which
    /// needs the engine's state, is the caller's to add.
    pub fn report_rows(&self, req: &RequestSnapshot) -> Vec<ReportRow> {
        let mut rows = Vec::new();
        let hp = if self.host.is_some() || self.port.is_some() {
            req.host_port()
        } else {
            None
        };
        if let Some(h) = &self.host {
            let actual = hp.as_ref().map(|(h, _)| h.to_string()).unwrap_or_default();
            let printed = format!("{}{}", h.operator(""), h.wm_expected());
            let exact = h.matches_opt(hp.as_ref().map(|(h, _)| Actual::new(h)).as_ref());
            rows.push(ReportRow::part(
                "Host",
                printed.trim().to_owned(),
                actual,
                exact,
            ));
        }
        if let Some(port) = self.port {
            let actual = hp.as_ref().map(|(_, p)| *p);
            rows.push(ReportRow::part(
                "Port",
                port.to_string(),
                actual.map(|p| p.to_string()).unwrap_or_default(),
                actual == Some(port),
            ));
        }
        if let Some(s) = &self.scheme {
            rows.push(ReportRow::part(
                "Scheme",
                s.clone(),
                req.scheme.to_owned(),
                s == req.scheme,
            ));
        }
        rows.push(ReportRow::part(
            "HTTP method",
            self.method.clone().unwrap_or_else(|| "ANY".into()),
            req.method.clone(),
            self.method.as_ref().is_none_or(|m| *m == req.method),
        ));
        let url = self.url_score(req);
        rows.push(self.url_row(req, url.exact));
        rows.push(ReportRow::spacer());

        if !self.headers.is_empty() {
            for (i, (name, p)) in self.headers_in_wiremock_order() {
                let written = name.as_str();
                let values = req.header_values(name);
                let refs: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
                let expected = p.expected();
                let operator = if self.basic_auth && i == self.headers.len() - 1 {
                    " [prefix] ".to_owned()
                } else {
                    p.operator("")
                };
                let printed = format!(
                    "{written}{operator}{}",
                    if expected.is_empty() {
                        String::new()
                    } else {
                        format!(": {expected}")
                    }
                );
                rows.push(ReportRow::part(
                    "Header",
                    printed,
                    multi_value_text(written, &refs),
                    p.score(&refs).exact,
                ));
            }
            rows.push(ReportRow::spacer());
        }

        if let UrlMatcher::PathTemplate(t) = &self.url
            && !self.path_params.is_empty()
            && url.exact
        {
            let vars = t.capture(req.path()).unwrap_or_default();
            for (name, value) in &vars {
                let Some((_, p)) = self.path_params.iter().find(|(n, _)| n == name) else {
                    continue;
                };
                rows.push(ReportRow::part(
                    "Path parameter",
                    format!(
                        "Path parameter: {name}{}{}",
                        p.operator(" = "),
                        p.wm_expected()
                    ),
                    value.clone(),
                    p.matches(&Actual::new(value)),
                ));
            }
            rows.push(ReportRow::spacer());
        }

        let multi_section = |rows: &mut Vec<ReportRow>,
                             attribute: &str,
                             label: &str,
                             list: &[(String, MultiValuePattern)],
                             values_of: &dyn Fn(&str) -> Vec<String>| {
            for (name, p) in list {
                let values = values_of(name);
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                rows.push(ReportRow::part(
                    attribute,
                    format!("{label}: {name}{}{}", p.operator(" = "), p.expected()),
                    multi_value_text(name, &refs),
                    p.score(&refs).exact,
                ));
            }
            if !list.is_empty() {
                rows.push(ReportRow::spacer());
            }
        };
        multi_section(&mut rows, "Query", "Query", &self.query, &|name| {
            req.query_values(name).map(str::to_owned).collect()
        });
        multi_section(&mut rows, "Form data", "Form", &self.form, &|name| {
            form_values(req, name)
                .into_iter()
                .map(str::to_owned)
                .collect()
        });

        for (name, p) in &self.cookies {
            let value = req
                .cookies()
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone());
            // WireMock prints the cookie pattern's raw value here, not `getExpected`.
            let raw = match p {
                StringPattern::Absent => "null".to_owned(),
                other => other.wm_expected(),
            };
            rows.push(ReportRow::part(
                "Cookie",
                format!("Cookie: {name}{}{raw}", p.operator("=")),
                value.clone().unwrap_or_default(),
                p.matches_opt(value.as_deref().map(Actual::new).as_ref()),
            ));
        }
        if !self.cookies.is_empty() {
            rows.push(ReportRow::spacer());
        }

        self.body_rows(req, &mut rows);

        if !self.multipart.is_empty() && req.parts().is_empty() {
            for _ in &self.multipart {
                rows.push(ReportRow::part(
                    "[Multipart request body]",
                    "[Multipart request body]".into(),
                    String::new(),
                    true,
                ));
            }
        }

        if let Some(custom) = &self.custom {
            rows.push(custom_matcher_row(
                custom.as_ref(),
                || self.path_parameters(req),
                req,
            ));
        }

        rows
    }

    fn url_row(&self, req: &RequestSnapshot, exact: bool) -> ReportRow {
        let (printed, expected, regex) = match &self.url {
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
        row
    }

    /// The header patterns in the order WireMock walks them: as written, except that
    /// `basicAuthCredentials` makes WireMock copy them into a `java.util.HashMap`
    /// with the `Authorization` pattern, which then iterates in hash order.
    fn headers_in_wiremock_order(&self) -> Vec<(usize, &(String, MultiValuePattern))> {
        let mut list: Vec<(usize, &(String, MultiValuePattern))> =
            self.headers.iter().enumerate().collect();
        if self.basic_auth {
            let names: Vec<&str> = list.iter().map(|(_, (name, _))| name.as_str()).collect();
            let order = java_hash_map_order(&names);
            list = order.into_iter().map(|i| list[i]).collect();
        }
        list
    }

    fn body_rows(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        if self.body.is_empty() {
            return;
        }
        let text = req.body_text();
        for p in &self.body {
            let formatted = format_body(p, &text, &req.body);
            match p {
                StringPattern::MatchesJsonPath { sub, .. }
                | StringPattern::MatchesXPath { sub, .. } => {
                    let expression = p.wm_expected();
                    let Some(sub) = sub else {
                        let exact = p.matches(&Actual::new(&formatted)) && !formatted.is_empty();
                        if !exact {
                            rows.push(ReportRow::part("Body", expression, formatted, false));
                        }
                        continue;
                    };
                    let printed = format!("{expression} [{}] {}", sub.wm_name(), sub.wm_expected());
                    let result = if text.is_empty() {
                        None
                    } else {
                        match p {
                            StringPattern::MatchesJsonPath { .. } => p
                                .expression_result(&text, sub)
                                .and_then(|r| r.into_iter().next()),
                            StringPattern::MatchesXPath { xpath, .. } => {
                                let actual = Actual::new(&text);
                                actual
                                    .xml()
                                    .and_then(|d| xpath.evaluate(d))
                                    .and_then(|r| r.into_iter().next())
                            }
                            _ => None,
                        }
                    };
                    match result {
                        Some(r) => {
                            if !sub.matches(&Actual::new(&r)) {
                                rows.push(ReportRow::part("Body", printed, r, false));
                            }
                        }
                        None => {
                            let exact =
                                !formatted.is_empty() && p.matches(&Actual::new(&formatted));
                            if !exact {
                                rows.push(ReportRow::part("Body", printed, formatted, false));
                            }
                        }
                    }
                }
                StringPattern::BinaryEqualTo(b) => {
                    if b[..] != req.body[..] {
                        rows.push(ReportRow::part("Body", p.wm_expected(), formatted, false));
                    }
                }
                _ => {
                    let shown = format!("\n{formatted}");
                    if !p.matches(&Actual::new(&shown)) {
                        rows.push(ReportRow::part(
                            "Body",
                            format!("[{}]\n{}", p.wm_name(), p.wm_expected()),
                            shown,
                            false,
                        ));
                    }
                }
            }
        }
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

fn form_values<'a>(req: &'a RequestSnapshot, name: &str) -> Vec<&'a str> {
    req.form()
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The request body as WireMock shows it next to a body pattern
/// (`formatIfJsonOrXml`): pretty-printed for `equalToJson` / `equalToXml` when it
/// parses, base64 for `binaryEqualTo`, as sent otherwise.
fn format_body(p: &StringPattern, text: &str, bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return String::new();
    }
    match p {
        StringPattern::EqualToJson(_) => serde_json::from_str::<Value>(text)
            .map(|v| jackson_pretty(&v))
            .unwrap_or_else(|_| text.to_owned()),
        StringPattern::EqualToXml(_) => xml_pretty(text).unwrap_or_else(|| text.to_owned()),
        StringPattern::BinaryEqualTo(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        _ => text.to_owned(),
    }
}

/// The order in which a `java.util.HashMap` built from `keys` (a copy of a map of
/// `keys.len() - 1` entries, then one more put) iterates them: by bucket, then by
/// insertion within a bucket.
fn java_hash_map_order(keys: &[&str]) -> Vec<usize> {
    let copied = keys.len().saturating_sub(1);
    // HashMap(Map) sizes its table for the copied entries; the last put may grow it.
    let mut capacity = ((copied as f64 / 0.75) + 1.0).ceil() as usize;
    capacity = capacity.next_power_of_two().max(1);
    if copied == 0 {
        capacity = 16;
    }
    if keys.len() as f64 > capacity as f64 * 0.75 {
        capacity *= 2;
    }
    let bucket = |k: &str| {
        let h = k
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & (capacity - 1)
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| bucket(keys[i]));
    order
}

/// Jackson's default pretty printer over a JSON tree, as WireMock's
/// `Json.prettyPrint`: `{\n  "a" : 1,\n  "b" : [ 1, 2 ]\n}`, `{ }`, `[ ]`.
pub fn jackson_pretty(v: &Value) -> String {
    decoy_jsonfmt::Pretty::TREE.print(v)
}

/// WireMock's `Xml.prettyPrint` (the JDK's identity transform, indent 2, no XML
/// declaration): an element holding only text stays on one line; otherwise each
/// child goes on its own line, indented, text included (its line breaks dropped).
/// Attributes come in name order, as the JDK's DOM keeps them. `None` when `xml`
/// does not parse.
pub fn xml_pretty(xml: &str) -> Option<String> {
    use sxd_document::dom::ChildOfRoot;
    let package = crate::xml::parse_document(xml).ok()?;
    let doc = package.as_document();
    let mut out = String::new();
    for child in doc.root().children() {
        match child {
            ChildOfRoot::Element(e) => element_into(e, 0, &mut out),
            ChildOfRoot::Comment(c) => {
                out.push_str(&format!("<!--{}-->", c.text()));
                out.push('\n');
            }
            ChildOfRoot::ProcessingInstruction(pi) => {
                out.push_str(&format!(
                    "<?{}{}?>\n",
                    pi.target(),
                    pi.value().map(|v| format!(" {v}")).unwrap_or_default()
                ));
            }
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

fn qualified(prefix: Option<&str>, local: &str) -> String {
    match prefix {
        Some(p) => format!("{p}:{local}"),
        None => local.to_owned(),
    }
}

fn element_into(e: sxd_document::dom::Element<'_>, level: usize, out: &mut String) {
    use sxd_document::dom::ChildOfElement;
    let name = qualified(e.preferred_prefix(), e.name().local_part());
    out.push('<');
    out.push_str(&name);
    let mut attrs: Vec<(String, String)> = e
        .namespaces_in_scope()
        .into_iter()
        .filter(|ns| {
            e.parent()
                .and_then(|p| p.element())
                .is_none_or(|parent| parent.namespace_uri_for_prefix(ns.prefix()) != Some(ns.uri()))
        })
        .filter(|ns| ns.prefix() != "xml")
        .map(|ns| {
            let key = if ns.prefix().is_empty() {
                "xmlns".to_owned()
            } else {
                format!("xmlns:{}", ns.prefix())
            };
            (key, ns.uri().to_owned())
        })
        .collect();
    if let Some(default) = e.default_namespace_uri()
        && e.parent()
            .and_then(|p| p.element())
            .is_none_or(|parent| parent.default_namespace_uri() != Some(default))
    {
        attrs.push(("xmlns".into(), default.to_owned()));
    }
    for a in e.attributes() {
        attrs.push((
            qualified(a.preferred_prefix(), a.name().local_part()),
            a.value().to_owned(),
        ));
    }
    attrs.sort_by(|a, b| a.0.cmp(&b.0));
    attrs.dedup_by(|a, b| a.0 == b.0);
    for (k, v) in &attrs {
        out.push_str(&format!(" {k}=\"{}\"", escape_xml(v, true)));
    }
    let children = e.children();
    if children.is_empty() {
        out.push_str("/>");
        return;
    }
    out.push('>');
    let only_text = children
        .iter()
        .all(|c| matches!(c, ChildOfElement::Text(_)));
    if only_text {
        for c in &children {
            if let ChildOfElement::Text(t) = c {
                out.push_str(&escape_xml(t.text(), false));
            }
        }
    } else {
        let indent = "  ".repeat(level + 1);
        for c in &children {
            out.push('\n');
            out.push_str(&indent);
            match c {
                ChildOfElement::Element(child) => element_into(*child, level + 1, out),
                ChildOfElement::Text(t) => {
                    out.push_str(&escape_xml(&t.text().replace(['\n', '\r'], ""), false))
                }
                ChildOfElement::Comment(cm) => out.push_str(&format!("<!--{}-->", cm.text())),
                ChildOfElement::ProcessingInstruction(pi) => out.push_str(&format!(
                    "<?{}{}?>",
                    pi.target(),
                    pi.value().map(|v| format!(" {v}")).unwrap_or_default()
                )),
            }
        }
        out.push('\n');
        out.push_str(&"  ".repeat(level));
    }
    out.push_str("</");
    out.push_str(&name);
    out.push('>');
}

fn escape_xml(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pattern(v: Value) -> RequestPattern {
        RequestPattern::parse(&v, "request", &mut Vec::new()).unwrap()
    }

    fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> RequestSnapshot {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        RequestSnapshot::new(method, url)
            .with_headers(map)
            .with_body(body.to_owned())
    }

    fn row(left: &str, right: &str, message: Option<&str>) -> ReportRow {
        ReportRow {
            left: left.into(),
            right: right.into(),
            message: message.map(str::to_owned),
        }
    }

    /// A matcher that answers `answer`, and a resolver that knows only "known".
    #[derive(Debug)]
    struct Says(bool);

    impl crate::custom::CustomMatch for Says {
        fn name(&self) -> &str {
            "known"
        }

        fn matches(
            &self,
            _: &RequestSnapshot,
            _: &[(String, String)],
        ) -> Result<bool, crate::custom::MatchFailure> {
            Ok(self.0)
        }
    }

    struct Only(bool);

    impl crate::custom::CustomMatchers for Only {
        fn resolve(
            &self,
            v: &Value,
            path: &str,
            warnings: &mut Vec<decoy_spec::fields::FieldError>,
        ) -> decoy_spec::fields::FieldResult<std::sync::Arc<dyn crate::custom::CustomMatch>>
        {
            let name = v["name"].as_str().unwrap_or_default();
            if name == "known" {
                return Ok(std::sync::Arc::new(Says(self.0)));
            }
            warnings.push(decoy_spec::fields::FieldError::new(path, "not installed"));
            Ok(std::sync::Arc::new(crate::custom::MissingMatcher {
                name: name.to_owned(),
            }))
        }
    }

    fn with_custom(name: &str, answer: bool) -> RequestPattern {
        let v = json!({"method": "GET", "urlPath": "/todo", "customMatcher": {"name": name}});
        let mut warnings = Vec::new();
        let p =
            RequestPattern::parse_with(&v, "request", &mut warnings, Some(&Only(answer))).unwrap();
        assert_eq!(warnings.len(), usize::from(name != "known"), "{warnings:?}");
        p
    }

    #[test]
    fn a_custom_matcher_nothing_provides_never_matches_and_gets_wiremocks_section_row() {
        let p = with_custom("state-matcher", true);
        let req = request("GET", "/todo", &[], "");
        assert!(!p.matches(&req));
        // Every built-in part matches, the custom one never: (0 + 1) / 2.
        assert_eq!(p.near_miss_distance(&req), 0.5);
        let title = "[custom matcher: state-matcher]";
        assert_eq!(p.report_rows(&req).last(), Some(&row(title, title, None)));
        // Shown even when the URL already differs, as WireMock's Diff does.
        let other = request("GET", "/elsewhere", &[], "");
        assert_eq!(p.report_rows(&other).last(), Some(&row(title, title, None)));
    }

    #[test]
    fn an_installed_custom_matcher_row_says_whether_it_matched() {
        let req = request("GET", "/todo", &[], "");
        let no = with_custom("known", false);
        assert_eq!(
            no.report_rows(&req).last(),
            Some(&row(
                "[custom matcher: known]",
                " ",
                Some("custom matcher does not match")
            ))
        );
        let yes = with_custom("known", true);
        assert!(yes.matches(&req));
        assert_eq!(
            yes.report_rows(&req).last(),
            Some(&row("[custom matcher: known]", " ", None))
        );
    }

    #[test]
    fn header_rows_use_the_stubs_spelling_and_say_when_a_header_is_missing() {
        let p = pattern(json!({
            "method": "GET", "urlPath": "/pet",
            "headers": {
                "content-type": {"equalTo": "application/json", "caseInsensitive": true},
                "Accept": {"equalTo": "application/json"},
                "X-Id": {"matches": "[0-9]+"}
            }
        }));
        let rows = p.report_rows(&request(
            "GET",
            "/pet",
            &[("content-type", "APPLICATION/json"), ("x-id", "abc")],
            "",
        ));
        assert_eq!(
            rows[3..7],
            [
                row(
                    "content-type: application/json",
                    "content-type: APPLICATION/json",
                    None
                ),
                row(
                    "Accept: application/json",
                    "",
                    Some("Header is not present")
                ),
                row(
                    "X-Id [matches] : [0-9]+",
                    "X-Id: abc",
                    Some("Header does not match")
                ),
                ReportRow::spacer(),
            ]
        );
    }

    #[test]
    fn body_rows_pretty_print_json_and_show_only_failing_patterns() {
        let p = pattern(json!({
            "method": "POST", "url": "/pets",
            "bodyPatterns": [
                {"equalToJson": {"id": 1, "tags": []}},
                {"matchesJsonPath": "$.id"},
                {"matchesJsonPath": {"expression": "$.tags[0]", "equalToJson": {"name": "x"}}}
            ]
        }));
        let rows = p.report_rows(&request(
            "POST",
            "/pets",
            &[],
            r#"{"id": 2, "tags": [{"name": "y"}]}"#,
        ));
        assert_eq!(
            rows[3..],
            [
                row(
                    "[equalToJson]\n{\n  \"id\" : 1,\n  \"tags\" : [ ]\n}",
                    "\n{\n  \"id\" : 2,\n  \"tags\" : [ {\n    \"name\" : \"y\"\n  } ]\n}",
                    Some("Body does not match")
                ),
                row(
                    "$.tags[0] [equalToJson] {\n  \"name\" : \"x\"\n}",
                    "{\n  \"name\" : \"y\"\n}",
                    Some("Body does not match")
                ),
            ]
        );
    }

    #[test]
    fn a_json_schema_is_shown_pretty_printed_under_its_operator() {
        // As WireMock 3.13.2 printed it for a real user's stub (the schema written as
        // a string, keys in their written order).
        let p = pattern(json!({
            "method": "POST", "url": "/schema-match",
            "bodyPatterns": [{"matchesJsonSchema": "{\"type\": \"object\", \"required\": [\"name\"]}"}]
        }));
        let rows = p.report_rows(&request(
            "POST",
            "/schema-match",
            &[],
            r#"{"nothing": "matches"}"#,
        ));
        assert_eq!(
            rows.last(),
            Some(&row(
                "[matchesJsonSchema]\n{\n  \"type\" : \"object\",\n  \"required\" : [ \"name\" ]\n}",
                "\n{\"nothing\": \"matches\"}",
                Some("Body does not match")
            ))
        );
    }

    #[test]
    fn an_absent_body_is_not_present_for_a_path_pattern() {
        let p = pattern(json!({"urlPath": "/q", "bodyPatterns": [{"matchesJsonPath": "$.a"}]}));
        let rows = p.report_rows(&request("GET", "/q", &[], ""));
        assert_eq!(
            rows.last(),
            Some(&row("$.a", "", Some("Body is not present")))
        );
    }

    #[test]
    fn a_failing_url_leaves_headers_and_query_out_of_the_distance() {
        // WireMock scores only scheme, host, port, URL and method until they all
        // match: a query pattern the request meets does not bring a stub closer.
        let users = pattern(json!({"method": "GET", "url": "/users"}));
        let user = pattern(json!({
            "method": "GET", "urlPath": "/user",
            "queryParameters": {"pretty": {"absent": true}}
        }));
        let req = request("GET", "/corpus-compat/no-such-path", &[], "");
        let d_users = users.near_miss_distance(&req);
        let d_user = user.near_miss_distance(&req);
        let lev = |a: &str| strsim::levenshtein(a, "/corpus-compat/no-such-path") as f64 / 27.0;
        assert_eq!(d_users, 10.0 * lev("/users") / 39.0);
        assert_eq!(d_user, 10.0 * lev("/user") / 39.0);
        // Once method and URL match, each other part weighs 1 of 46.
        let req = request("GET", "/user?pretty=1", &[], "");
        assert_eq!(user.near_miss_distance(&req), 1.0 / 46.0);
    }

    #[test]
    fn the_url_row_carries_wiremocks_hints() {
        let p = pattern(json!({"urlPattern": "/a?b=1"}));
        let rows = p.report_rows(&request("GET", "/x", &[], ""));
        assert_eq!(
            rows[1].message.as_deref(),
            Some("URL does not match. When using a regex, \"?\" should be \"\\?\"")
        );
        let p = pattern(json!({"urlPath": "a"}));
        let rows = p.report_rows(&request("GET", "/x", &[], ""));
        assert_eq!(
            rows[1].message.as_deref(),
            Some("URL does not match. URLs must start with a /")
        );
    }

    #[test]
    fn json_is_pretty_printed_as_jackson_prints_it() {
        let v: Value = serde_json::from_str(
            r#"{"a":1.5,"b":[],"c":{},"d":null,"e":[{"x":1},2,[3,4]],"f":1e20,"g":"é/\\"}"#,
        )
        .unwrap();
        assert_eq!(
            jackson_pretty(&v),
            "{\n  \"a\" : 1.5,\n  \"b\" : [ ],\n  \"c\" : { },\n  \"d\" : null,\n  \"e\" : [ {\n    \"x\" : 1\n  }, 2, [ 3, 4 ] ],\n  \"f\" : 100000000000000000000,\n  \"g\" : \"é/\\\\\"\n}"
        );
    }

    #[test]
    fn xml_is_pretty_printed_as_the_jdk_transformer_prints_it() {
        // Outputs of WireMock 3.13.2's Xml.prettyPrint for the same inputs.
        assert_eq!(
            xml_pretty("<a><b>1</b><c x=\"1\"/></a>").unwrap(),
            "<a>\n  <b>1</b>\n  <c x=\"1\"/>\n</a>\n"
        );
        assert_eq!(
            xml_pretty("<a>\n  <b>1</b>\n    <c/>\n</a>").unwrap(),
            "<a>\n    \n  <b>1</b>\n      \n  <c/>\n  \n</a>\n"
        );
        assert_eq!(
            xml_pretty("<a>text<b>1</b>tail</a>").unwrap(),
            "<a>\n  text\n  <b>1</b>\n  tail\n</a>\n"
        );
        assert_eq!(
            xml_pretty("<a b='x&amp;y' c=\"q&quot;\">&lt;&gt;&amp;</a>").unwrap(),
            "<a b=\"x&amp;y\" c=\"q&quot;\">&lt;&gt;&amp;</a>\n"
        );
        assert_eq!(xml_pretty("<a></a>").unwrap(), "<a/>\n");
        assert!(xml_pretty("not xml").is_none());
    }

    #[test]
    fn nearest_keeps_the_closest_in_order_the_earlier_first_among_equals_and_nan_last() {
        let items = [
            (0, 0.5),
            (1, f64::NAN),
            (2, 0.25),
            (3, 0.5),
            (4, 0.75),
            (5, 0.25),
        ];
        let near = |limit| -> Vec<usize> {
            nearest(items, limit, |(_, d)| *d)
                .into_iter()
                .map(|(_, (i, _))| i)
                .collect()
        };
        assert_eq!(near(NEAR_MISS_COUNT), [2, 5, 0]);
        assert_eq!(near(1), [2]);
        assert_eq!(near(6), [2, 5, 0, 3, 4, 1]);
        assert!(near(0).is_empty());
    }

    #[test]
    fn levenshtein_distance_is_normalised_by_the_longer_string() {
        assert_eq!(levenshtein_distance("abc", Some("abc")), 0.0);
        assert_eq!(levenshtein_distance("abcd", Some("abce")), 0.25);
        assert_eq!(levenshtein_distance("abc", None), 1.0);
        assert!(levenshtein_distance("", Some("")).is_nan());
    }

    #[test]
    fn a_hash_map_with_basic_auth_iterates_in_java_bucket_order() {
        // java.util.HashMap: "Authorization" (bucket 13 of 16) after "Accept" (11).
        assert_eq!(
            java_hash_map_order(&["Accept", "Authorization"]),
            vec![0, 1]
        );
        // "X-Token" lands in bucket 14 of 16, after "Authorization" (13).
        assert_eq!(
            java_hash_map_order(&["X-Token", "Authorization"]),
            vec![1, 0]
        );
        assert_eq!(
            java_hash_map_order(&["Content-Type", "Accept", "X-Request-Id", "Authorization"]),
            vec![3, 1, 2, 0]
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
