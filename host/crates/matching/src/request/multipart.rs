//! `multipartPatterns`: patterns over the parts of a `multipart/*` body, each with
//! header and body patterns, met by any part (`ANY`, the default) or every part
//! (`ALL`).

use serde_json::{Map, Value};

use super::body::body_patterns;
use super::multi_value::{MultiValuePattern, multi_patterns};
use super::part::Part;
use crate::near_miss::{ReportRow, Score, aggregate};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_array, as_object, as_str, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["multipartPatterns"];

#[derive(Debug)]
pub struct MultipartPattern {
    /// `matchingType`: `ANY` (default: some part matches) or `ALL` (every part does).
    all: bool,
    headers: Vec<(String, MultiValuePattern)>,
    body: Vec<StringPattern>,
}

#[derive(Debug)]
pub struct Multipart(Vec<MultipartPattern>);

impl Multipart {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Multipart(match obj.field("multipartPatterns") {
            Some(m) => {
                let mpath = join(path, "multipartPatterns");
                as_array(m, &mpath)?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| MultipartPattern::parse(p, &format!("{mpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?
            }
            None => Vec::new(),
        }))
    }
}

impl MultipartPattern {
    fn parse(v: &Value, path: &str) -> FieldResult<MultipartPattern> {
        let obj = as_object(v, path)?;
        let all = match obj.field("matchingType") {
            None => false,
            Some(t) => match as_str(t, &join(path, "matchingType"))? {
                "ANY" => false,
                "ALL" => true,
                other => {
                    return Err(FieldError::new(
                        join(path, "matchingType"),
                        format!("{other:?} is not a matching type; use ANY or ALL"),
                    ));
                }
            },
        };
        let headers = match obj.field("headers") {
            Some(h) => multi_patterns(h, &join(path, "headers"))?
                .into_iter()
                .map(|(k, p)| (k.to_ascii_lowercase(), p))
                .collect(),
            None => Vec::new(),
        };
        let body = match obj.field("bodyPatterns") {
            Some(b) => body_patterns(b, &join(path, "bodyPatterns"))?,
            None => Vec::new(),
        };
        Ok(MultipartPattern { all, headers, body })
    }

    /// Whether `req`'s parts satisfy this pattern.
    fn matches(&self, req: &RequestSnapshot) -> bool {
        let parts = req.parts();
        if parts.is_empty() {
            return false;
        }
        let part_ok = |part: &decoy_spec::request::Part| {
            self.headers.iter().all(|(name, p)| {
                let values: Vec<std::borrow::Cow<'_, str>> = part
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()))
                    .collect();
                let refs: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
                p.matches(&refs)
            }) && {
                let text = String::from_utf8_lossy(&part.body);
                let actual = Actual::body(&text, &part.body);
                self.body.iter().all(|p| p.matches(&actual))
            }
        };
        if self.all {
            parts.iter().all(part_ok)
        } else {
            parts.iter().any(part_ok)
        }
    }
}

impl Part for Multipart {
    fn constrains(&self) -> bool {
        !self.0.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0.iter().all(|mp| mp.matches(req))
    }

    /// 0 or 1 per pattern, as WireMock scores them.
    fn score(&self, req: &RequestSnapshot) -> Score {
        if self.0.is_empty() {
            return Score::EXACT;
        }
        if req.parts().is_empty() {
            return Score::NO;
        }
        let scores: Vec<Score> = self.0.iter().map(|mp| Score::of(mp.matches(req))).collect();
        aggregate(&scores)
    }

    /// WireMock shows a row per pattern only for a request with no parts at all.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        if self.0.is_empty() || !req.parts().is_empty() {
            return;
        }
        for _ in &self.0 {
            rows.push(ReportRow::part(
                "[Multipart request body]",
                "[Multipart request body]".into(),
                String::new(),
                true,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn multipart(v: Value) -> Multipart {
        Multipart::parse(v.as_object().unwrap(), "request").unwrap()
    }

    const CT: (&str, &str) = ("content-type", "multipart/form-data; boundary=XX");

    fn body(parts: &[(&str, &str)]) -> String {
        let mut out = String::new();
        for (name, text) in parts {
            out.push_str(&format!(
                "--XX\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{text}\r\n"
            ));
        }
        out.push_str("--XX--\r\n");
        out
    }

    #[test]
    fn any_takes_one_part_and_all_needs_every_part() {
        let any = multipart(json!({"multipartPatterns": [
            {"headers": {"Content-Disposition": {"contains": "name=\"a\""}},
             "bodyPatterns": [{"equalTo": "one"}]}
        ]}));
        let all = multipart(json!({"multipartPatterns": [
            {"matchingType": "ALL", "bodyPatterns": [{"equalTo": "one"}]}
        ]}));
        let req = request("POST", "/", &[CT], &body(&[("a", "one"), ("b", "two")]));
        assert!(any.matches(&req) && any.score(&req).exact);
        assert!(!all.matches(&req));
        assert!(rows_of(&all, &req).is_empty());
    }

    #[test]
    fn a_request_without_parts_is_as_far_as_it_gets_and_gets_a_row_per_pattern() {
        let m = multipart(json!({"multipartPatterns": [{}, {"matchingType": "ANY"}]}));
        let req = request("POST", "/", &[], "plain");
        assert!(!m.matches(&req));
        assert_eq!(m.score(&req).distance, 1.0);
        let shown = row(
            "[Multipart request body]",
            "",
            Some("[Multipart request body] is not present"),
        );
        assert_eq!(rows_of(&m, &req), [shown.clone(), shown]);
    }

    #[test]
    fn an_unknown_matching_type_is_refused_with_its_path() {
        let e = Multipart::parse(
            json!({"multipartPatterns": [{"matchingType": "SOME"}]})
                .as_object()
                .unwrap(),
            "request",
        )
        .unwrap_err();
        assert_eq!(e.path, "request.multipartPatterns[0].matchingType");
    }
}
