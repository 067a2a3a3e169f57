//! `queryParameters`: a pattern per query parameter name, over its decoded values.

use super::multi_value::{Fields, Named};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &[QueryParameters::FIELD];

pub type Query = Named<QueryParameters>;

#[derive(Debug)]
pub struct QueryParameters;

impl Fields for QueryParameters {
    const FIELD: &'static str = "queryParameters";
    const ATTRIBUTE: &'static str = "Query";
    const LABEL: &'static str = "Query";

    fn values<'a>(req: &'a RequestSnapshot, name: &'a str) -> Vec<&'a str> {
        req.query_values(name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{Part, request, row, rows_of};
    use super::*;
    use crate::near_miss::ReportRow;
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
