//! `method`: the HTTP method, compared exactly; `ANY` (or no method) takes every one.

use serde_json::{Map, Value};

use super::part::Part;
use crate::near_miss::{ReportRow, Score};
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_str, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["method"];

/// The method a request must have; `None` is `ANY`.
#[derive(Debug)]
pub struct Method(Option<String>);

impl Method {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        let Some(m) = obj.field("method") else {
            return Ok(Method(None));
        };
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
        Ok(Method((m != "ANY").then_some(m)))
    }

    /// The method (upper case) a request must have; `None` for any.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl Part for Method {
    fn constrains(&self) -> bool {
        self.0.is_some()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0.as_ref().is_none_or(|m| *m == req.method)
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        Score::of(self.matches(req))
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        rows.push(ReportRow::part(
            "HTTP method",
            self.0.clone().unwrap_or_else(|| "ANY".into()),
            req.method.clone(),
            self.matches(req),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn method(v: Value) -> FieldResult<Method> {
        Method::parse(v.as_object().unwrap(), "request")
    }

    #[test]
    fn any_or_no_method_takes_every_method_and_a_name_is_upper_cased() {
        let post = request("POST", "/", &[], "");
        assert!(method(json!({"method": "ANY"})).unwrap().matches(&post));
        assert!(method(json!({})).unwrap().matches(&post));
        let get = method(json!({"method": " get "})).unwrap();
        assert_eq!(get.name(), Some("GET"));
        assert!(!get.matches(&post));
        assert_eq!(
            rows_of(&get, &post),
            [row("GET", "POST", Some("HTTP method does not match"))]
        );
        assert_eq!(
            rows_of(&method(json!({})).unwrap(), &post),
            [row("ANY", "POST", None)]
        );
    }

    #[test]
    fn a_method_with_spaces_or_symbols_is_refused_with_its_path() {
        let e = method(json!({"method": "GE T"})).unwrap_err();
        assert_eq!(e.path, "request.method");
        assert!(e.reason.contains("is not an HTTP method"), "{}", e.reason);
    }
}
