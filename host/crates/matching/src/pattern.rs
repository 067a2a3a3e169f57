//! WireMock's value patterns (`equalTo`, `matches`, `equalToJson`, `matchesXPath`, ...).
//!
//! A [`StringPattern`] is compiled once, when a mapping is loaded (regexes, JSONPath
//! and JSON Schema are checked and built then), and evaluated against an [`Actual`]:
//! the text of a header, a query value, a cookie or a body. `Actual` caches the body
//! parsed as JSON or XML so that several candidate mappings with JSON or XPath matchers
//! parse a request body once, not once each.

use std::borrow::Cow;
use std::cell::OnceCell;

use super::regex::{Regex, full_regex};
use base64::Engine as _;
use serde_json::{Map, Value};

use super::limits::{Budget, JSONPATH_NODE_BUDGET};
use super::{date::DateTimePattern, json::JsonEquality, xml};
use decoy_spec::fields::{
    FieldError, FieldResult, Fields, as_array, as_bool, as_object, as_str, join, kind, suggest,
};

/// What a pattern is evaluated against.
pub struct Actual<'a> {
    pub text: &'a str,
    pub bytes: &'a [u8],
    json: OnceCell<Option<Value>>,
    xml: OnceCell<Option<sxd_document::Package>>,
}

impl std::fmt::Debug for Actual<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actual")
            .field("text", &self.text)
            .finish_non_exhaustive()
    }
}

impl<'a> Actual<'a> {
    pub fn new(text: &'a str) -> Self {
        Actual {
            text,
            bytes: text.as_bytes(),
            json: OnceCell::new(),
            xml: OnceCell::new(),
        }
    }

    /// A body: `text` is the lossy UTF-8 reading of `bytes`.
    pub fn body(text: &'a str, bytes: &'a [u8]) -> Self {
        Actual {
            text,
            bytes,
            json: OnceCell::new(),
            xml: OnceCell::new(),
        }
    }

    pub fn json(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| serde_json::from_str(self.text).ok())
            .as_ref()
    }

    /// The value parsed as XML; `None` when it is not XML, or nests deeper than
    /// [`MAX_XML_DEPTH`](crate::limits::MAX_XML_DEPTH) (logged).
    pub fn xml(&self) -> Option<&sxd_document::Package> {
        self.xml
            .get_or_init(|| match xml::parse_document(self.text) {
                Ok(doc) => Some(doc),
                Err(xml::XmlError::TooDeep) => {
                    tracing::warn!(
                        "an XML value of {} bytes nests deeper than {} elements: XML matchers do not match it",
                        self.text.len(),
                        crate::limits::MAX_XML_DEPTH
                    );
                    None
                }
                Err(xml::XmlError::Invalid(_)) => None,
            })
            .as_ref()
    }
}

/// One compiled value pattern.
#[derive(Debug)]
pub enum StringPattern {
    EqualTo {
        value: String,
        case_insensitive: bool,
    },
    BinaryEqualTo(Vec<u8>),
    Contains(String),
    DoesNotContain(String),
    Matches(Regex),
    DoesNotMatch(Regex),
    Absent,
    Anything,
    EqualToJson(Box<JsonEquality>),
    MatchesJsonPath {
        expression: String,
        path: Box<JsonPathQuery>,
        /// Jayway's trailing `.length()` / `.size()`: the result is the length.
        length: bool,
        sub: Option<Box<StringPattern>>,
    },
    /// The compiled validator, and the schema as written for the not-matched report.
    MatchesJsonSchema(Box<(jsonschema::Validator, Value)>),
    EqualToXml(Box<xml::XmlEquality>),
    MatchesXPath {
        xpath: Box<xml::XPathSpec>,
        sub: Option<Box<StringPattern>>,
    },
    DateTime(Box<DateTimePattern>),
    And(Vec<StringPattern>),
    Or(Vec<StringPattern>),
    Not(Box<StringPattern>),
}

/// The operator names accepted in a value pattern, for messages.
pub const OPERATORS: &[&str] = &[
    "equalTo",
    "binaryEqualTo",
    "contains",
    "doesNotContain",
    "matches",
    "doesNotMatch",
    "absent",
    "anything",
    "equalToJson",
    "matchesJsonPath",
    "matchesJsonSchema",
    "equalToXml",
    "matchesXPath",
    "before",
    "after",
    "equalToDateTime",
    "and",
    "or",
    "not",
];

/// Keys that modify an operator rather than being one.
const MODIFIERS: &[&str] = &[
    "caseInsensitive",
    "ignoreArrayOrder",
    "ignoreExtraElements",
    "serializeAsString",
    "schemaVersion",
    "enablePlaceholders",
    "placeholderOpeningDelimiterRegex",
    "placeholderClosingDelimiterRegex",
    "exemptedComparisons",
    "ignoreOrderOfSameNode",
    "namespaceAwareness",
    "xPathNamespaces",
    "actualFormat",
    "truncateExpected",
    "truncateActual",
    "expectedOffset",
    "expectedOffsetUnit",
    "applyTruncationLast",
];

/// Whether a JSONPath selects at most one value by its form (no wildcard, deep
/// scan, filter, slice or union), as Jayway decides what it returns.
pub(crate) fn definite_path_form(expression: &str) -> bool {
    definite_path(expression)
}

fn definite_path(expression: &str) -> bool {
    !(expression.contains('*')
        || expression.contains("..")
        || expression.contains("?(")
        || expression.contains(':')
        || expression.contains(','))
}

thread_local! {
    static LENIENT: std::cell::RefCell<Vec<FieldError>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A pattern that loads, but not as written (WireMock loads it the same way); kept
/// for the parse of the stub being read on this thread, which collects it with
/// [`take_lenient_warnings`].
fn lenient_warning(e: FieldError) {
    LENIENT.with(|l| l.borrow_mut().push(e));
}

/// Warnings about patterns parsed on this thread since the last call (a stub is
/// parsed on one thread from start to end).
pub fn take_lenient_warnings() -> Vec<FieldError> {
    LENIENT.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

impl StringPattern {
    /// Compiles `{"<operator>": value, <modifiers>...}` found at `path`. Two or more
    /// operators: the first one written applies, as in WireMock, and a warning is
    /// left for [`take_lenient_warnings`].
    pub fn parse(v: &Value, path: &str) -> FieldResult<StringPattern> {
        let obj = as_object(v, path)?;
        let ops: Vec<&String> = obj
            .keys()
            .filter(|k| OPERATORS.contains(&k.as_str()))
            .collect();
        for key in obj.keys() {
            if !OPERATORS.contains(&key.as_str()) && !MODIFIERS.contains(&key.as_str()) {
                return Err(FieldError::new(
                    join(path, key),
                    format!("unknown operator ({})", suggest(key, OPERATORS)),
                ));
            }
        }
        let op = match ops.as_slice() {
            [op] => op.as_str(),
            [] => {
                return Err(FieldError::new(
                    path,
                    format!(
                        "no operator given; expected one of {}",
                        OPERATORS.join(", ")
                    ),
                ));
            }
            [first, rest @ ..] => {
                // WireMock reads the first operator written and ignores the others;
                // so does decoy, loudly.
                let ignored: Vec<&str> = rest.iter().map(|s| s.as_str()).collect();
                lenient_warning(FieldError::new(
                    path,
                    format!(
                        "more than one operator ({first}, {}): only the first, {first}, is applied, as WireMock does; combine them with \"and\" or \"or\" to apply every one",
                        ignored.join(", ")
                    ),
                ));
                first.as_str()
            }
        };
        let value = &obj[op];
        let vpath = join(path, op);
        Ok(match op {
            "equalTo" => StringPattern::EqualTo {
                value: scalar_text(value, &vpath)?,
                case_insensitive: flag(obj, "caseInsensitive", path)?,
            },
            "binaryEqualTo" => {
                let text = as_str(value, &vpath)?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|e| FieldError::new(&vpath, format!("not valid base64: {e}")))?;
                StringPattern::BinaryEqualTo(bytes)
            }
            "contains" => StringPattern::Contains(scalar_text(value, &vpath)?),
            "doesNotContain" => StringPattern::DoesNotContain(scalar_text(value, &vpath)?),
            "matches" => StringPattern::Matches(full_regex(as_str(value, &vpath)?, &vpath)?),
            "doesNotMatch" => {
                StringPattern::DoesNotMatch(full_regex(as_str(value, &vpath)?, &vpath)?)
            }
            "absent" => {
                // WireMock writes `"absent": true`; `false` would mean "present", which
                // WireMock does not support either, so say so rather than guess.
                if value.as_bool() == Some(false) {
                    return Err(FieldError::new(
                        &vpath,
                        "\"absent\": false is not a pattern; use {\"matches\": \".*\"} for \"present\"",
                    ));
                }
                StringPattern::Absent
            }
            "anything" => StringPattern::Anything,
            "equalToJson" => {
                StringPattern::EqualToJson(Box::new(JsonEquality::parse(value, obj, &vpath)?))
            }
            "matchesJsonPath" => parse_json_path(value, &vpath)?,
            "matchesJsonSchema" => {
                let schema = match value {
                    Value::String(s) => serde_json::from_str(s).map_err(|e| {
                        FieldError::new(&vpath, format!("the schema is not valid JSON: {e}"))
                    })?,
                    other => other.clone(),
                };
                let validator = jsonschema::validator_for(&schema)
                    .map_err(|e| FieldError::new(&vpath, format!("invalid JSON Schema: {e}")))?;
                StringPattern::MatchesJsonSchema(Box::new((validator, schema)))
            }
            "equalToXml" => {
                StringPattern::EqualToXml(Box::new(xml::XmlEquality::parse(value, obj, &vpath)?))
            }
            "matchesXPath" => parse_xpath(value, obj, &vpath, path)?,
            "before" | "after" | "equalToDateTime" => {
                StringPattern::DateTime(Box::new(DateTimePattern::parse(op, value, obj, path)?))
            }
            "and" | "or" => {
                let items = as_array(value, &vpath)?;
                if items.is_empty() {
                    return Err(FieldError::new(&vpath, "needs at least one pattern"));
                }
                let list = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| StringPattern::parse(item, &format!("{vpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?;
                if op == "and" {
                    StringPattern::And(list)
                } else {
                    StringPattern::Or(list)
                }
            }
            "not" => StringPattern::Not(Box::new(StringPattern::parse(value, &vpath)?)),
            _ => unreachable!("operator list and match arms agree"),
        })
    }

    /// Evaluates against a value that may be missing (an absent header, say).
    ///
    /// As in WireMock, a missing value matches only `absent` (and negations of
    /// patterns that would not match it).
    pub fn matches_opt(&self, actual: Option<&Actual<'_>>) -> bool {
        match actual {
            Some(a) => self.matches(a),
            None => self.matches_absent(),
        }
    }

    fn matches_absent(&self) -> bool {
        match self {
            StringPattern::Absent => true,
            StringPattern::Not(inner) => !inner.matches_absent(),
            StringPattern::And(list) => list.iter().all(|p| p.matches_absent()),
            StringPattern::Or(list) => list.iter().any(|p| p.matches_absent()),
            _ => false,
        }
    }

    pub fn matches(&self, a: &Actual<'_>) -> bool {
        match self {
            StringPattern::EqualTo {
                value,
                case_insensitive: false,
            } => a.text == value,
            StringPattern::EqualTo {
                value,
                case_insensitive: true,
            } => a.text.to_lowercase() == value.to_lowercase(),
            StringPattern::BinaryEqualTo(bytes) => a.bytes == bytes.as_slice(),
            StringPattern::Contains(s) => a.text.contains(s.as_str()),
            StringPattern::DoesNotContain(s) => !a.text.contains(s.as_str()),
            // A regex that gives up (backtracking limit) counts as "no match", for
            // doesNotMatch too: it is not known not to match.
            StringPattern::Matches(re) => re.is_match(a.text),
            StringPattern::DoesNotMatch(re) => re.try_is_match(a.text) == Some(false),
            StringPattern::Absent => false,
            StringPattern::Anything => true,
            StringPattern::EqualToJson(eq) => a.json().is_some_and(|v| eq.matches(v)),
            StringPattern::MatchesJsonPath {
                expression,
                path,
                sub,
                length,
            } => {
                let Some(doc) = a.json() else { return false };
                if crate::limits::past_deadline() {
                    return false;
                }
                let Ok(found) = path.query(doc) else {
                    tracing::warn!(
                        "JSONPath {expression:?} selected more than {JSONPATH_NODE_BUDGET} nodes in a {}-byte body: counted as no match",
                        a.text.len()
                    );
                    return false;
                };
                let nodes: Vec<&Value> = found.iter().map(|n| n.as_ref()).collect();
                let len_value;
                let nodes = if *length {
                    let Some(n) = (match nodes.as_slice() {
                        [Value::Array(a)] => Some(a.len()),
                        [Value::Object(o)] => Some(o.len()),
                        [Value::String(s)] => Some(s.chars().count()),
                        _ => None,
                    }) else {
                        return sub.as_ref().is_some_and(|s| s.matches_opt(None));
                    };
                    len_value = Value::from(n);
                    vec![&len_value]
                } else {
                    nodes
                };
                match sub {
                    // As Jayway answers WireMock: a definite path gives its value, and
                    // an empty object, empty array or null is no match; an indefinite
                    // one gives a list, a match when it is not empty.
                    None => match nodes.as_slice() {
                        [] => false,
                        [one] if !*length && definite_path(expression) => {
                            !matches!(one, Value::Null)
                                && !matches!(one, Value::Object(o) if o.is_empty())
                                && !matches!(one, Value::Array(a) if a.is_empty())
                        }
                        _ => true,
                    },
                    Some(sub) => json_path_sub_match(&nodes, sub),
                }
            }
            StringPattern::MatchesJsonSchema(v) => a
                .json()
                .is_some_and(|doc| !crate::limits::past_deadline() && v.0.is_valid(doc)),
            StringPattern::EqualToXml(eq) => a.xml().is_some_and(|doc| eq.matches(doc)),
            StringPattern::MatchesXPath { xpath, sub } => {
                let Some(doc) = a.xml() else { return false };
                match xpath.evaluate(doc) {
                    None => false,
                    Some(values) => match sub {
                        None => !values.is_empty(),
                        Some(sub) => values.iter().any(|v| sub.matches(&Actual::new(v))),
                    },
                }
            }
            StringPattern::DateTime(d) => d.matches(a.text),
            StringPattern::And(list) => list.iter().all(|p| p.matches(a)),
            StringPattern::Or(list) => list.iter().any(|p| p.matches(a)),
            StringPattern::Not(inner) => !inner.matches(a),
        }
    }

    /// The literal, when this is a case-sensitive `equalTo` (used by the index).
    pub fn exact_literal(&self) -> Option<&str> {
        match self {
            StringPattern::EqualTo {
                value,
                case_insensitive: false,
            } => Some(value),
            _ => None,
        }
    }
}

/// `equalTo` and friends take a string; numbers and booleans are read as their text,
/// as WireMock's Jackson binding does.
fn scalar_text(v: &Value, path: &str) -> FieldResult<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(FieldError::new(
            path,
            format!("expected a string, found {}", kind(other)),
        )),
    }
}

fn flag(obj: &Map<String, Value>, key: &str, path: &str) -> FieldResult<bool> {
    obj.field(key)
        .map(|v| as_bool(v, &join(path, key)))
        .transpose()
        .map(|b| b.unwrap_or(false))
}

/// The two forms of `matchesJsonPath` and `matchesXPath`: the expression as a string,
/// or `{"expression": ..., <operator>: ...}` with a pattern for what it selects.
fn expression_and_sub(
    v: &Value,
    path: &str,
    what: &str,
) -> FieldResult<(String, Option<Box<StringPattern>>)> {
    match v {
        Value::String(s) => Ok((s.clone(), None)),
        Value::Object(obj) => {
            let expr = obj.field("expression").ok_or_else(|| {
                FieldError::new(path, "an object form needs \"expression\" and one operator")
            })?;
            let expression = as_str(expr, &join(path, "expression"))?.to_owned();
            let rest: Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| *k != "expression")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let sub = if rest.is_empty() {
                None
            } else {
                Some(Box::new(StringPattern::parse(&Value::Object(rest), path)?))
            };
            Ok((expression, sub))
        }
        other => Err(FieldError::new(
            path,
            format!("expected {what} string or an object, found {}", kind(other)),
        )),
    }
}

/// The reason in a `regex` error, on one line. Its message spans several lines (the
/// pattern as decoy wrapped it, a caret line, then `error: <reason>`), and a problem
/// is printed as one line.
fn regex_reason(e: &::regex::Error) -> String {
    let text = e.to_string();
    let last = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

/// The nodes a JSONPath (Jayway's syntax, as in `matchesJsonPath`) selects in `doc`:
/// for a recorder that writes a match on the values a request had there.
pub fn json_path_values(expression: &str, doc: &Value) -> Result<Vec<Value>, String> {
    match parse_json_path(&Value::String(expression.to_owned()), "").map_err(|e| e.reason)? {
        StringPattern::MatchesJsonPath { path, .. } => Ok(path
            .query(doc)
            .map_err(|_| format!("JSONPath {expression:?} selects too many nodes"))?
            .into_iter()
            .map(std::borrow::Cow::into_owned)
            .collect()),
        _ => Err(format!("{expression:?} is not a JSONPath")),
    }
}

fn parse_json_path(v: &Value, path: &str) -> FieldResult<StringPattern> {
    let (expression, sub) = expression_and_sub(v, path, "a JSONPath")?;
    let (rfc, length) = jayway_to_rfc9535(&expression);
    let rewritten = decoy_jsonpath::rewrite(&rfc)
        .map_err(|e| FieldError::new(path, format!("invalid JSONPath {expression:?}: {e}")))?;
    // `match()` compiles its regex with the `regex` crate at each use and takes one it
    // cannot compile as "no match": checked here, such a path is refused at load.
    for r in &rewritten.regexes {
        ::regex::Regex::new(&format!("(?R)^({r})$")).map_err(|e| {
            FieldError::new(
                path,
                format!(
                    "JSONPath {expression:?}: the regex {r:?} of =~ cannot be used (look-around and back-references are not supported): {}",
                    regex_reason(&e)
                ),
            )
        })?;
    }
    let compiled = JsonPathQuery::parse(&rewritten.expression)
        .map_err(|e| FieldError::new(path, format!("invalid JSONPath {expression:?}: {e}")))?;
    Ok(StringPattern::MatchesJsonPath {
        expression,
        path: Box::new(compiled),
        length,
        sub,
    })
}

/// A JSONPath with Jayway's reading of filters: in Jayway, `$.order[?(@.qty > 1)]`
/// applied to an *object* `order` tests the object itself (RFC 9535 would test its
/// members), and applied to a string, a number or a boolean selects nothing. So the
/// expression is split at its first filter: the part before selects nodes, and the
/// filter (with the rest of the path) runs on each list, and on each object wrapped
/// in a list.
///
/// Each part is evaluated one segment at a time ([`Steps`]), counting the nodes
/// selected against [`JSONPATH_NODE_BUDGET`]: a path with several `..` segments
/// multiplies its nodes at each of them, so it stops at the budget (no match, logged)
/// instead of growing without bound.
#[derive(Debug)]
pub enum JsonPathQuery {
    Plain(Steps),
    Filtered { before: Steps, filter: Steps },
}

/// A JSONPath as its segments, each compiled on its own (`$` followed by the
/// segment), applied in turn to the nodes the previous one selected. A path whose
/// filters refer to the root (`$` inside a segment) cannot be cut so: it stays one
/// step, evaluated whole, refused beforehand when its worst case is over budget.
#[derive(Debug)]
pub struct Steps {
    steps: Vec<serde_json_path::JsonPath>,
    /// `..` segments, for the whole-path estimate (one step only).
    descendants: u32,
}

/// The evaluation stopped at [`JSONPATH_NODE_BUDGET`].
#[derive(Debug)]
pub struct OverBudget;

impl Steps {
    fn parse(rfc: &str) -> Result<Steps, serde_json_path::ParseError> {
        let whole = serde_json_path::JsonPath::parse(rfc)?;
        let segments = split_segments(rfc);
        let descendants = segments.as_ref().map_or(0, |s| {
            s.iter()
                .filter(|s| s.trim_start().starts_with(".."))
                .count()
        }) as u32;
        let steps = segments
            .filter(|s| s.iter().all(|seg| !seg.contains('$')))
            .and_then(|s| {
                s.iter()
                    .map(|seg| serde_json_path::JsonPath::parse(&format!("${seg}")).ok())
                    .collect::<Option<Vec<_>>>()
            });
        Ok(match steps {
            Some(steps) => Steps {
                steps,
                descendants: 0,
            },
            None => Steps {
                steps: vec![whole],
                descendants: descendants.max(rfc.matches("..").count() as u32),
            },
        })
    }

    fn query<'a>(&self, doc: &'a Value, budget: &Budget) -> Result<Vec<&'a Value>, OverBudget> {
        if self.steps.len() == 1 && self.descendants >= 2 {
            // Cut into segments impossible: the worst case of a whole evaluation is
            // the document's node count to the power of its `..` segments.
            let nodes = count_nodes(doc, JSONPATH_NODE_BUDGET as u64 + 1);
            let worst = nodes.saturating_pow(self.descendants);
            if !budget.spend(worst) {
                return Err(OverBudget);
            }
        }
        let mut current = vec![doc];
        for step in &self.steps {
            let mut next = Vec::new();
            for node in current {
                let found = step.query(node).all();
                if !budget.spend(found.len() as u64) {
                    return Err(OverBudget);
                }
                next.extend(found);
            }
            current = next;
        }
        Ok(current)
    }
}

/// Nodes in `v` (itself included), counting no further than `limit`.
fn count_nodes(v: &Value, limit: u64) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n += 1;
        if n >= limit {
            break;
        }
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    n
}

/// Cuts an RFC 9535 query after its `$` into its segments, each with its own
/// leading dots (`.a`, `..a`, `[0]`, `..[?@.x]`, `.*`); `None` when the text does
/// not have that shape (the whole path is then one step).
fn split_segments(rfc: &str) -> Option<Vec<&str>> {
    let rest = rfc.trim_start().strip_prefix('$')?;
    let bytes = rest.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes[i..].starts_with(b"..") {
            i += 2;
        } else if bytes[i..].starts_with(b".") {
            i += 1;
        } else if !bytes[i..].starts_with(b"[") {
            return None;
        }
        if bytes.get(i) == Some(&b'[') {
            // To the matching `]`, skipping quoted strings.
            let mut depth = 0usize;
            let mut quote: Option<u8> = None;
            while i < bytes.len() {
                let c = bytes[i];
                match quote {
                    Some(_) if c == b'\\' => i += 1,
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == b'\'' || c == b'"' => quote = Some(c),
                    None if c == b'[' => depth += 1,
                    None if c == b']' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    None => {}
                }
                i += 1;
            }
            if depth != 0 {
                return None;
            }
        } else {
            // A name or `*`: to the next segment.
            while i < bytes.len()
                && !matches!(bytes[i], b'.' | b'[')
                && !bytes[i].is_ascii_whitespace()
            {
                i += 1;
            }
        }
        out.push(&rest[start..i]);
    }
    Some(out)
}

impl JsonPathQuery {
    pub(crate) fn parse(rfc: &str) -> Result<Self, serde_json_path::ParseError> {
        let whole = Steps::parse(rfc)?;
        let Some(start) = rfc.find("[?") else {
            return Ok(JsonPathQuery::Plain(whole));
        };
        let (before, filter) = rfc.split_at(start);
        let before = if before.is_empty() { "$" } else { before };
        match (Steps::parse(before), Steps::parse(&format!("${filter}"))) {
            (Ok(before), Ok(filter)) => Ok(JsonPathQuery::Filtered { before, filter }),
            _ => Ok(JsonPathQuery::Plain(whole)),
        }
    }

    /// The nodes selected, or [`OverBudget`] past [`JSONPATH_NODE_BUDGET`] nodes
    /// (selected, or copied to wrap an object for a filter). Nodes are borrowed from
    /// `doc`, except those a filter selected in a wrapped copy.
    pub fn query<'a>(&self, doc: &'a Value) -> Result<Vec<Cow<'a, Value>>, OverBudget> {
        let budget = Budget::new(JSONPATH_NODE_BUDGET as u64);
        match self {
            JsonPathQuery::Plain(p) => Ok(p
                .query(doc, &budget)?
                .into_iter()
                .map(Cow::Borrowed)
                .collect()),
            JsonPathQuery::Filtered { before, filter } => {
                let mut out = Vec::new();
                for node in before.query(doc, &budget)? {
                    if node.is_array() {
                        out.extend(filter.query(node, &budget)?.into_iter().map(Cow::Borrowed));
                    } else if node.is_object() {
                        let copied = count_nodes(node, JSONPATH_NODE_BUDGET as u64 + 1);
                        if !budget.spend(copied) {
                            return Err(OverBudget);
                        }
                        let wrapped = Value::Array(vec![node.clone()]);
                        for found in filter.query(&wrapped, &budget)? {
                            if !budget.spend(count_nodes(found, JSONPATH_NODE_BUDGET as u64 + 1)) {
                                return Err(OverBudget);
                            }
                            out.push(Cow::Owned(found.clone()));
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

/// WireMock uses Jayway JsonPath; `serde_json_path` implements RFC 9535. The common
/// Jayway forms are rewritten: filters `[?(@.a == 1)]` are valid RFC 9535 as they are,
/// `@.list.size()` / `.length()` inside a filter becomes `length(@.list)`, and a
/// trailing `.length()` / `.size()` is returned as a flag (the length is computed
/// after the query). Jayway's other operators (`=~`, `in`, `nin`, `subsetof`,
/// `anyof`, `noneof`, `size`, `empty`) are rewritten afterwards, by `decoy_jsonpath`
/// (shared with the `response-template` plugin).
fn jayway_to_rfc9535(expr: &str) -> (String, bool) {
    static IN_FILTER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"@((?:\.[A-Za-z0-9_$-]+|\[[^\]]*\])*)\.(?:size|length)\(\)")
            .expect("static regex")
    });
    let expr = expr.trim();
    let (base, length) = match expr
        .strip_suffix(".length()")
        .or_else(|| expr.strip_suffix(".size()"))
    {
        Some(base) => (base, true),
        None => (expr, false),
    };
    (
        IN_FILTER.replace_all(base, "length(@$1)").into_owned(),
        length,
    )
}

/// With a sub-pattern, WireMock renders the selected value as text (a string as
/// itself, anything else as JSON) and matches that; when the path selects several
/// nodes, it matches when any of them does, or when the list as a whole does.
fn json_path_sub_match(nodes: &[&Value], sub: &StringPattern) -> bool {
    if nodes.is_empty() {
        return sub.matches_opt(None);
    }
    let render = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if nodes.len() == 1 {
        let text = render(nodes[0]);
        return sub.matches(&Actual::new(&text));
    }
    if nodes.iter().any(|n| {
        let text = render(n);
        sub.matches(&Actual::new(&text))
    }) {
        return true;
    }
    let whole = Value::Array(nodes.iter().map(|v| (*v).clone()).collect()).to_string();
    sub.matches(&Actual::new(&whole))
}

fn parse_xpath(
    v: &Value,
    obj: &Map<String, Value>,
    vpath: &str,
    path: &str,
) -> FieldResult<StringPattern> {
    let namespaces = match obj.field("xPathNamespaces") {
        Some(ns) => {
            let nspath = join(path, "xPathNamespaces");
            as_object(ns, &nspath)?
                .iter()
                .map(|(k, v)| Ok((k.clone(), as_str(v, &join(&nspath, k))?.to_owned())))
                .collect::<FieldResult<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    let (expression, sub) = expression_and_sub(v, vpath, "an XPath")?;
    let xpath = xml::XPathSpec::new(expression, namespaces)
        .map_err(|reason| FieldError::new(vpath, reason))?;
    Ok(StringPattern::MatchesXPath {
        xpath: Box::new(xpath),
        sub,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> StringPattern {
        StringPattern::parse(&v, "t").unwrap()
    }

    fn m(v: Value, actual: &str) -> bool {
        p(v).matches(&Actual::new(actual))
    }

    #[test]
    fn equal_to_is_exact_unless_case_insensitive() {
        assert!(m(json!({"equalTo": "abc"}), "abc"));
        assert!(!m(json!({"equalTo": "abc"}), "ABC"));
        assert!(m(json!({"equalTo": "abc", "caseInsensitive": true}), "ABC"));
    }

    #[test]
    fn matches_needs_the_whole_value_to_match() {
        assert!(m(json!({"matches": "/api/.*"}), "/api/x"));
        assert!(!m(json!({"matches": "api"}), "/api/x"));
        assert!(m(json!({"doesNotMatch": "api"}), "/api/x"));
    }

    #[test]
    fn lookahead_regexes_from_java_are_supported() {
        assert!(m(json!({"matches": "(?!admin).*"}), "user"));
        assert!(!m(json!({"matches": "(?!admin).*"}), "admin"));
    }

    #[test]
    fn contains_and_does_not_contain() {
        assert!(m(json!({"contains": "ell"}), "hello"));
        assert!(m(json!({"doesNotContain": "xyz"}), "hello"));
        assert!(!m(json!({"doesNotContain": "ell"}), "hello"));
    }

    #[test]
    fn absent_only_matches_a_missing_value() {
        let a = p(json!({"absent": true}));
        assert!(a.matches_opt(None));
        assert!(!a.matches_opt(Some(&Actual::new(""))));
        assert!(!p(json!({"equalTo": "x"})).matches_opt(None));
        assert!(p(json!({"not": {"equalTo": "x"}})).matches_opt(None));
    }

    #[test]
    fn logical_operators_combine_patterns() {
        let v = json!({"and": [{"contains": "a"}, {"contains": "b"}]});
        assert!(m(v.clone(), "ab"));
        assert!(!m(v, "a"));
        assert!(m(json!({"or": [{"equalTo": "x"}, {"equalTo": "y"}]}), "y"));
        assert!(m(json!({"not": {"equalTo": "x"}}), "y"));
    }

    #[test]
    fn json_path_checks_presence_or_a_sub_pattern() {
        let body = r#"{"user": {"name": "Ann", "tags": ["a", "b"]}, "n": 3}"#;
        assert!(m(json!({"matchesJsonPath": "$.user.name"}), body));
        assert!(!m(json!({"matchesJsonPath": "$.user.age"}), body));
        assert!(m(json!({"matchesJsonPath": "$[?(@.n == 3)]"}), body));
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.user.name", "equalTo": "Ann"}}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.user.tags", "equalToJson": "[\"a\",\"b\"]"}}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.user.age", "absent": true}}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.user.tags.length()", "equalTo": "2"}}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": "$[?(@.user.tags.size() == 2)]"}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": "$.user.tags[?(@ == 'b')]"}),
            body
        ));
        assert!(!m(
            json!({"matchesJsonPath": "$.user.tags[?(@ == 'c')]"}),
            body
        ));
    }

    /// As WireMock 3.13.2 (Jayway) matched the same stubs and bodies.
    #[test]
    fn json_path_filters_read_jayways_word_operators() {
        // The hmcts/ccd-test-stubs-service stub: a filter on a list of codes. On a
        // single string Jayway's filter selects nothing, so that body is no match.
        let codes = json!({"matchesJsonPath":
            "$.personal_code[?(@ in [\"7007496\", \"4927250\", \"4918178\"])]"});
        assert!(m(codes.clone(), r#"{"personal_code": ["4927250"]}"#));
        assert!(m(codes.clone(), r#"{"personal_code": ["1", "7007496"]}"#));
        assert!(!m(codes.clone(), r#"{"personal_code": ["1"]}"#));
        assert!(!m(codes, r#"{"personal_code": "4927250"}"#));
        let on_object = json!({"matchesJsonPath": "$[?(@.size in ['S', 'M'])]"});
        assert!(m(on_object.clone(), r#"{"size": "M"}"#));
        assert!(!m(on_object, r#"{"size": "L"}"#));
        let nin = json!({"matchesJsonPath": "$[?(@.size nin ['S', 'M'])]"});
        assert!(m(nin.clone(), r#"{"size": "L"}"#));
        assert!(
            m(nin, r#"{"colour": "red"}"#),
            "a missing value is not in any list"
        );
        let subset = json!({"matchesJsonPath": "$[?(@.tags subsetof ['a', 'b', 'c'])]"});
        assert!(m(subset.clone(), r#"{"tags": ["a", "c"]}"#));
        assert!(!m(subset, r#"{"tags": ["a", "d"]}"#));
        let any = json!({"matchesJsonPath": "$[?(@.tags anyof ['x', 'c'])]"});
        assert!(m(any.clone(), r#"{"tags": ["a", "c"]}"#));
        assert!(!m(any, r#"{"tags": ["a", "b"]}"#));
        let none = json!({"matchesJsonPath": "$[?(@.tags noneof ['x', 'y'])]"});
        assert!(m(none.clone(), r#"{"tags": ["a", "c"]}"#));
        assert!(!m(none, r#"{"tags": ["a", "x"]}"#));
        let size = json!({"matchesJsonPath": "$[?(@.items size 2)]"});
        assert!(m(size.clone(), r#"{"items": [1, 2]}"#));
        assert!(!m(size, r#"{"items": [1]}"#));
        let empty = json!({"matchesJsonPath": "$[?(@.items empty false)]"});
        assert!(m(empty.clone(), r#"{"items": [1]}"#));
        assert!(!m(empty, r#"{"items": []}"#));
        // Any filter on a scalar selects nothing in Jayway.
        assert!(!m(
            json!({"matchesJsonPath": "$.name[?(@ == 'xyz')]"}),
            r#"{"name": "xyz"}"#
        ));
    }

    #[test]
    fn json_path_filters_read_jayways_regex_operator_as_a_full_match() {
        // The stackrox corpus stub: a request body object filtered on itself.
        let stub = json!({"matchesJsonPath": "$[?(@.query =~ /.*CVE-2021-44228.*/)]"});
        assert!(m(stub.clone(), r#"{"query": "is CVE-2021-44228 fixed?"}"#));
        assert!(!m(stub.clone(), r#"{"query": "CVE-2022-1"}"#));
        assert!(!m(stub, r#"{"other": "CVE-2021-44228"}"#));
        // Whole value, not a search.
        assert!(!m(
            json!({"matchesJsonPath": "$[?(@.q =~ /CVE/)]"}),
            r#"{"q": "a CVE b"}"#
        ));
        // Flags: case-insensitive, dot-all; Java-only ones are accepted and dropped.
        let ci = json!({"matchesJsonPath": "$.hits[?(@.q =~ /cve-.*/i)]"});
        assert!(m(ci.clone(), r#"{"hits": [{"q": "CVE-1"}]}"#));
        assert!(!m(ci, r#"{"hits": [{"q": "xCVE-1"}]}"#));
        let dotall = json!({"matchesJsonPath": "$[?(@.t =~ /a.b/su)]"});
        assert!(m(dotall, "{\"t\": \"a\\nb\"}"));
        // An escaped `/`, and a quote, inside the regex.
        let slash = json!({"matchesJsonPath": r"$[?(@.p =~ /\/api\/v[0-9]+\/.*/)]"});
        assert!(m(slash.clone(), r#"{"p": "/api/v2/users"}"#));
        assert!(!m(slash, r#"{"p": "/api/vx/users"}"#));
        let quote = json!({"matchesJsonPath": "$[?(@.s =~ /it's \\d+/)]"});
        assert!(m(quote, r#"{"s": "it's 42"}"#));
        // A list on the left matches when one element does, as in Jayway.
        let tags = json!({"matchesJsonPath": "$[?(@.tags =~ /b.*/)]"});
        assert!(m(tags.clone(), r#"{"tags": ["a", "bc"]}"#));
        assert!(!m(tags.clone(), r#"{"tags": ["a", "c"]}"#));
        assert!(m(tags, r#"{"tags": "bc"}"#));
        // An object is not looked into (Jayway matches it as empty text).
        assert!(!m(
            json!({"matchesJsonPath": "$[?(@.o =~ /x/)]"}),
            r#"{"o": {"k": "x"}}"#
        ));
        // The regex first, as Jayway also reads it.
        assert!(m(
            json!({"matchesJsonPath": "$[?(/b.*/ =~ @.s)]"}),
            r#"{"s": "bc"}"#
        ));
        // With a sub-pattern, and combined with another test.
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.items[?(@.n =~ /x.*/ && @.k == 1)].n",
                                       "equalTo": "xy"}}),
            r#"{"items": [{"n": "xy", "k": 1}, {"n": "xz", "k": 2}]}"#
        ));
    }

    #[test]
    fn a_regex_operator_decoy_cannot_run_is_refused_at_load() {
        let e = StringPattern::parse(&json!({"matchesJsonPath": "$[?(@.a =~ /(?=x)y/)]"}), "b")
            .unwrap_err();
        assert!(e.reason.contains("cannot be used"), "{}", e.reason);
        // One line, ending with the regex library's reason.
        assert!(!e.reason.contains('\n'), "{}", e.reason);
        assert!(
            e.reason
                .ends_with(": look-around, including look-ahead and look-behind, is not supported"),
            "{}",
            e.reason
        );
        let e = StringPattern::parse(&json!({"matchesJsonPath": "$[?(@.a =~ /abc)]"}), "b")
            .unwrap_err();
        assert!(e.reason.contains("no closing /"), "{}", e.reason);
    }

    #[test]
    fn json_schema_validates_the_body() {
        let v = json!({"matchesJsonSchema": {"type": "object", "required": ["id"]}});
        assert!(m(v.clone(), r#"{"id": 1}"#));
        assert!(!m(v.clone(), r#"{"name": 1}"#));
        assert!(!m(v, "not json"));
    }

    #[test]
    fn binary_equal_to_compares_bytes() {
        let pat = p(json!({"binaryEqualTo": "AQID"}));
        assert!(pat.matches(&Actual::body("", &[1, 2, 3])));
        assert!(!pat.matches(&Actual::body("", &[1, 2])));
    }

    #[test]
    fn rejects_unknown_and_duplicate_operators_with_a_hint() {
        let e = StringPattern::parse(&json!({"equalsTo": "x"}), "request.headers.A").unwrap_err();
        assert_eq!(e.path, "request.headers.A.equalsTo");
        assert!(
            e.reason.contains("did you mean \"equalTo\""),
            "{}",
            e.reason
        );
        take_lenient_warnings();
        let p = StringPattern::parse(&json!({"contains": "y", "equalTo": "x"}), "h").unwrap();
        assert!(
            matches!(p, StringPattern::Contains(_)),
            "the first written applies"
        );
        let w = take_lenient_warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].reason
                .contains("more than one operator (contains, equalTo)")
        );
        let e = StringPattern::parse(&json!({"matches": "(unclosed"}), "h").unwrap_err();
        assert_eq!(e.path, "h.matches");
        assert!(e.reason.contains("invalid regular expression"));
        let e = StringPattern::parse(&json!({"matchesJsonPath": "$$["}), "b").unwrap_err();
        assert!(e.reason.contains("invalid JSONPath"));
    }
}
