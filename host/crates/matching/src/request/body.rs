//! `bodyPatterns`: value patterns that the request body must all meet.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::part::Part;
use crate::near_miss::{ReportRow, Score, aggregate, jackson_pretty, xml_pretty};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldResult, Fields, as_array, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["bodyPatterns"];

#[derive(Debug)]
pub struct Body(Vec<StringPattern>);

impl Body {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Body(match obj.field("bodyPatterns") {
            Some(b) => body_patterns(b, &join(path, "bodyPatterns"))?,
            None => Vec::new(),
        }))
    }
}

/// A list of body patterns (the request's, or a multipart part's).
pub(super) fn body_patterns(v: &Value, path: &str) -> FieldResult<Vec<StringPattern>> {
    as_array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, p)| StringPattern::parse(p, &format!("{path}[{i}]")))
        .collect()
}

impl Part for Body {
    fn constrains(&self) -> bool {
        !self.0.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let text = req.body_text();
        let actual = Actual::body(&text, &req.body);
        self.0.iter().all(|p| p.matches(&actual))
    }

    /// An empty body is a missing value; `binaryEqualTo` is 0 or 1.
    fn score(&self, req: &RequestSnapshot) -> Score {
        if self.0.is_empty() {
            return Score::EXACT;
        }
        let text = req.body_text();
        let actual = Actual::body(&text, &req.body);
        let present = (!text.is_empty()).then_some(&actual);
        let scores: Vec<Score> = self
            .0
            .iter()
            .map(|p| match p {
                StringPattern::BinaryEqualTo(b) => Score::of(b[..] == req.body[..]),
                _ => p.score(present),
            })
            .collect();
        aggregate(&scores)
    }

    /// A row for each pattern the body fails, as WireMock shows it: a JSONPath or
    /// XPath with a sub-pattern against what it selected, an equality against the
    /// body pretty-printed like the expected value.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        if self.0.is_empty() {
            return;
        }
        let text = req.body_text();
        for p in &self.0 {
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

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Body {
        Body::parse(v.as_object().unwrap(), "request").unwrap()
    }

    #[test]
    fn body_rows_pretty_print_json_and_show_only_failing_patterns() {
        let b = body(json!({
            "bodyPatterns": [
                {"equalToJson": {"id": 1, "tags": []}},
                {"matchesJsonPath": "$.id"},
                {"matchesJsonPath": {"expression": "$.tags[0]", "equalToJson": {"name": "x"}}}
            ]
        }));
        let rows = rows_of(
            &b,
            &request(
                "POST",
                "/pets",
                &[],
                r#"{"id": 2, "tags": [{"name": "y"}]}"#,
            ),
        );
        assert_eq!(
            rows,
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
        let b = body(json!({
            "bodyPatterns": [{"matchesJsonSchema": "{\"type\": \"object\", \"required\": [\"name\"]}"}]
        }));
        let rows = rows_of(
            &b,
            &request("POST", "/schema-match", &[], r#"{"nothing": "matches"}"#),
        );
        assert_eq!(
            rows,
            [row(
                "[matchesJsonSchema]\n{\n  \"type\" : \"object\",\n  \"required\" : [ \"name\" ]\n}",
                "\n{\"nothing\": \"matches\"}",
                Some("Body does not match")
            )]
        );
    }

    #[test]
    fn an_absent_body_is_not_present_for_a_path_pattern() {
        let b = body(json!({"bodyPatterns": [{"matchesJsonPath": "$.a"}]}));
        let req = request("GET", "/q", &[], "");
        assert_eq!(
            rows_of(&b, &req),
            [row("$.a", "", Some("Body is not present"))]
        );
        // An empty body is a missing value: as far as it gets.
        assert_eq!(b.score(&req).distance, 1.0);
    }

    #[test]
    fn binary_bodies_compare_bytes_and_print_base64() {
        let b = body(json!({"bodyPatterns": [{"binaryEqualTo": "AQID"}]}));
        assert!(b.matches(&request("POST", "/", &[], "\u{1}\u{2}\u{3}")));
        let req = request("POST", "/", &[], "abc");
        assert!(!b.score(&req).exact);
        assert_eq!(
            rows_of(&b, &req),
            [row("AQID", "YWJj", Some("Body does not match"))]
        );
    }
}
