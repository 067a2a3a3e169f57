//! `formParameters`: a pattern per field of an `application/x-www-form-urlencoded`
//! body, over its decoded values.

use serde_json::{Map, Value};

use super::multi_value::{MultiValuePattern, multi_patterns, report_named, score_named};
use super::part::Part;
use crate::near_miss::{ReportRow, Score};
use decoy_spec::fields::{FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["formParameters"];

#[derive(Debug)]
pub struct Form(Vec<(String, MultiValuePattern)>);

impl Form {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Form(match obj.field("formParameters") {
            Some(q) => multi_patterns(q, &join(path, "formParameters"))?,
            None => Vec::new(),
        }))
    }
}

fn values<'a>(req: &'a RequestSnapshot, name: &str) -> Vec<&'a str> {
    req.form()
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

impl Part for Form {
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
        report_named(rows, "Form data", "Form", &self.0, |name| values(req, name));
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    #[test]
    fn form_fields_are_decoded_and_a_missing_one_is_not_present() {
        let v = json!({"formParameters": {
            "name": {"equalTo": "Ann Lee"},
            "age": {"equalTo": "30"}
        }});
        let f = Form::parse(v.as_object().unwrap(), "request").unwrap();
        let ct = [("content-type", "application/x-www-form-urlencoded")];
        assert!(f.matches(&request("POST", "/f", &ct, "name=Ann+Lee&age=30")));
        let near = request("POST", "/f", &ct, "name=Ann+Lee");
        assert!(!f.matches(&near));
        assert_eq!(
            rows_of(&f, &near),
            [
                row("Form: name = Ann Lee", "name: Ann Lee", None),
                row("Form: age = 30", "", Some("Form data is not present")),
                ReportRow::spacer(),
            ]
        );
    }
}
