//! `queryParameters`: a pattern per query parameter name, over its decoded values.

use serde_json::{Map, Value};

use super::multi_value::{MultiValuePattern, multi_patterns, report_named, score_named};
use super::part::Part;
use crate::near_miss::{ReportRow, Score};
use decoy_spec::fields::{FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["queryParameters"];

#[derive(Debug)]
pub struct Query(Vec<(String, MultiValuePattern)>);

impl Query {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Query(match obj.field("queryParameters") {
            Some(q) => multi_patterns(q, &join(path, "queryParameters"))?,
            None => Vec::new(),
        }))
    }
}

fn values<'a>(req: &'a RequestSnapshot, name: &'a str) -> Vec<&'a str> {
    req.query_values(name).collect()
}

impl Part for Query {
    fn constrains(&self) -> bool {
        !self.0.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0.iter().all(|(name, p)| p.matches(&values(req, name)))
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        score_named(&self.0, |name| values(req, name))
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        report_named(rows, "Query", "Query", &self.0, |name| values(req, name));
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    #[test]
    fn query_values_are_decoded_and_rows_name_the_parameter() {
        let v = json!({"queryParameters": {
            "q": {"equalTo": "hello world"},
            "page": {"matches": "[0-9]+"}
        }});
        let q = Query::parse(v.as_object().unwrap(), "request").unwrap();
        assert!(q.matches(&request("GET", "/f?q=hello%20world&page=2", &[], "")));
        let near = request("GET", "/f?q=hello%20world&page=x&page=y", &[], "");
        assert!(!q.matches(&near));
        assert_eq!(q.score(&near).distance, 0.5);
        assert_eq!(
            rows_of(&q, &near),
            [
                row("Query: q = hello world", "q: hello world", None),
                row(
                    "Query: page [matches] [0-9]+",
                    "page: x\npage: y",
                    Some("Query does not match")
                ),
                ReportRow::spacer(),
            ]
        );
    }
}
