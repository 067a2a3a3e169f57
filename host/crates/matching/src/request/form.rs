//! `formParameters`: a pattern per field of an `application/x-www-form-urlencoded`
//! body, over its decoded values.

use super::multi_value::{Fields, Named};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &[FormParameters::FIELD];

pub type Form = Named<FormParameters>;

#[derive(Debug)]
pub struct FormParameters;

impl Fields for FormParameters {
    const FIELD: &'static str = "formParameters";
    const ATTRIBUTE: &'static str = "Form data";
    const LABEL: &'static str = "Form";

    fn values<'a>(req: &'a RequestSnapshot, name: &'a str) -> Vec<&'a str> {
        req.form()
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{Part, request, row, rows_of};
    use super::*;
    use crate::near_miss::ReportRow;
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
