//! `pathParameters`: patterns for the variables of a `urlPathTemplate`, by name.

use serde_json::{Map, Value};

use super::part::{Part, string_patterns};
use super::url::{PathTemplate, UrlMatcher};
use crate::near_miss::{ReportRow, Score, aggregate};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldError, FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["pathParameters"];

/// The patterns, with a copy of the template whose variables they check: a stub
/// without path parameters (nearly all) pays one null pointer, not a list and a
/// template.
#[derive(Debug)]
pub struct PathParams(Option<Box<Params>>);

#[derive(Debug)]
struct Params {
    template: PathTemplate,
    patterns: Vec<(String, StringPattern)>,
}

impl PathParams {
    /// `url` is the stub's URL matcher: path parameters need a template, and each
    /// must name one of its variables.
    pub(super) fn parse(
        obj: &Map<String, Value>,
        path: &str,
        url: &UrlMatcher,
    ) -> FieldResult<Self> {
        let Some(pp) = obj.field("pathParameters") else {
            return Ok(PathParams(None));
        };
        let pppath = join(path, "pathParameters");
        let UrlMatcher::PathTemplate(t) = url else {
            return Err(FieldError::new(
                pppath,
                "pathParameters need urlPathTemplate (a URL with {variables})",
            ));
        };
        let patterns = string_patterns(pp, &pppath)?;
        for (name, _) in &patterns {
            if !t.variables().any(|v| v == name) {
                return Err(FieldError::new(
                    join(&pppath, name),
                    format!("the template {:?} has no variable {{{name}}}", t.text),
                ));
            }
        }
        if patterns.is_empty() {
            return Ok(PathParams(None));
        }
        Ok(PathParams(Some(Box::new(Params {
            template: t.clone(),
            patterns,
        }))))
    }
}

impl Part for PathParams {
    fn constrains(&self) -> bool {
        self.0.is_some()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        let Some(params) = &self.0 else {
            return true;
        };
        let Some(vars) = params.template.capture(req.path()) else {
            return false;
        };
        params.patterns.iter().all(|(name, p)| {
            vars.iter()
                .find(|(n, _)| n == name)
                .is_some_and(|(_, v)| p.matches(&Actual::new(v)))
        })
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        let Some(params) = &self.0 else {
            return Score::EXACT;
        };
        let Some(vars) = params.template.capture(req.path()) else {
            return Score::NO;
        };
        let scores: Vec<Score> = params
            .patterns
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

    /// A row per variable the stub checks, in the template's order, shown only when
    /// the path fits the template.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        let Some(params) = &self.0 else {
            return;
        };
        let Some(vars) = params.template.capture(req.path()) else {
            return;
        };
        for (name, value) in &vars {
            let Some((_, p)) = params.patterns.iter().find(|(n, _)| n == name) else {
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
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> FieldResult<PathParams> {
        let obj = v.as_object().unwrap();
        let url = UrlMatcher::parse(obj, "request")?;
        PathParams::parse(obj, "request", &url)
    }

    #[test]
    fn path_templates_capture_and_check_parameters() {
        let p = parse(json!({
            "urlPathTemplate": "/contacts/{contactId}/addresses/{addressId}",
            "pathParameters": {"contactId": {"equalTo": "12"}, "addressId": {"matches": "[0-9]+"}}
        }))
        .unwrap();
        assert!(p.matches(&request("GET", "/contacts/12/addresses/99?x", &[], "")));
        assert!(!p.matches(&request("GET", "/contacts/13/addresses/99", &[], "")));
        assert!(!p.matches(&request("GET", "/contacts/12/addresses/abc", &[], "")));
        assert!(!p.matches(&request("GET", "/contacts/12/addresses", &[], "")));
        let near = request("GET", "/contacts/12/addresses/x", &[], "");
        assert_eq!(p.score(&near).distance, 0.5);
        assert_eq!(
            rows_of(&p, &near),
            [
                row("Path parameter: contactId = 12", "12", None),
                row(
                    "Path parameter: addressId [matches] [0-9]+",
                    "x",
                    Some("Path parameter does not match")
                ),
                ReportRow::spacer(),
            ]
        );
        // A path the template does not fit gets no rows: the URL row says it.
        assert!(rows_of(&p, &request("GET", "/elsewhere", &[], "")).is_empty());
    }

    #[test]
    fn parameters_need_a_template_that_names_them() {
        let e = parse(json!({"urlPath": "/a", "pathParameters": {"id": {"equalTo": "1"}}}))
            .err()
            .unwrap();
        assert_eq!(e.path, "request.pathParameters");
        let e = parse(
            json!({"urlPathTemplate": "/a/{id}", "pathParameters": {"idd": {"equalTo": "1"}}}),
        )
        .err()
        .unwrap();
        assert_eq!(e.path, "request.pathParameters.idd");
    }
}
