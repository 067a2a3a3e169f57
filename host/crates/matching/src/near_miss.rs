//! WireMock 3.13's closeness model, so that decoy names the same closest stub and
//! prints the same "Request was not matched" table: the [`Score`] of one value against
//! one pattern, the [`ReportRow`] the report prints, how the report names and prints a
//! pattern, and the order of near misses.
//!
//! A part's distance runs from 0.0 (matches) to 1.0, as WireMock's `MatchResult`: the
//! normalised Levenshtein distance for `equalTo` (and exact URLs and paths), the share
//! of differing nodes for `equalToJson`, and 0 or 1 for the operators WireMock scores
//! that way. How the parts of a request are weighed into one distance, and which rows
//! each part adds, is each part's module under [`request`](crate::request).
//!
//! The rows are WireMock's `Diff` as its `PlainTextDiffRenderer` shows it: "... is not
//! present" for a missing value, "... does not match" for one that differs, expected
//! JSON and XML pretty-printed ([`jackson_pretty`], [`xml_pretty`]).
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
    pub(crate) fn part(attribute: &str, left: String, right: String, exact: bool) -> Self {
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
    pub(crate) const EXACT: Score = Score {
        exact: true,
        distance: 0.0,
    };
    pub(crate) const NO: Score = Score {
        exact: false,
        distance: 1.0,
    };

    pub(crate) fn of(exact: bool) -> Score {
        if exact { Score::EXACT } else { Score::NO }
    }
}

/// `MatchResult.aggregate`: exact when all are, the distance their mean (NaN for no
/// parts at all, as in Java).
pub(crate) fn aggregate(scores: &[Score]) -> Score {
    Score {
        exact: scores.iter().all(|s| s.exact),
        distance: scores.iter().map(|s| s.distance).sum::<f64>() / scores.len() as f64,
    }
}

/// The score with the smallest distance, the first of equals (WireMock's
/// `getBestMatch`); `None` for no scores.
pub(crate) fn best(scores: impl IntoIterator<Item = Score>) -> Option<Score> {
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
    pub(crate) fn expression_result(&self, body: &str, sub: &StringPattern) -> Option<Vec<String>> {
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
    pub(crate) fn operator(&self, default: &str) -> String {
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

/// How many near misses WireMock lists (`NearMissCalculator.NEAR_MISS_COUNT`).
pub const NEAR_MISS_COUNT: usize = 3;

/// WireMock's `NearMissCalculator` order: of `items`, the `limit` at the smallest
/// [`RequestPattern::near_miss_distance`](crate::request::RequestPattern::near_miss_distance)
/// (as `distance` gives it), smallest first.
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
}
