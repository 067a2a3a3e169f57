//! `headers`: a pattern per header name (looked up without case, printed as the stub
//! wrote it), with the `Authorization` pattern of [`basic_auth`](super::basic_auth)
//! last.

use serde_json::{Map, Value};

use super::basic_auth;
use super::multi_value::{MultiValuePattern, multi_patterns, values_text};
use super::part::Part;
use crate::near_miss::{ReportRow, Score, aggregate};
use decoy_spec::fields::{FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["headers"];

#[derive(Debug)]
pub struct Headers {
    /// Names as the stub wrote them (the not-matched report prints them so; looking
    /// a name up in a request's `HeaderMap` ignores case, at the same cost).
    list: Vec<(String, MultiValuePattern)>,
    /// The last entry of `list` is `basicAuthCredentials`' `Authorization`.
    basic_auth: bool,
}

impl Headers {
    /// `headers`, then the credentials of `basicAuthCredentials`.
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        let mut list = match obj.field("headers") {
            Some(h) => multi_patterns(h, &join(path, "headers"))?,
            None => Vec::new(),
        };
        let auth = basic_auth::parse(obj, path)?;
        let basic_auth = !auth.is_empty();
        list.extend(auth);
        Ok(Headers { list, basic_auth })
    }

    /// The header patterns in the order WireMock walks them: as written, except that
    /// `basicAuthCredentials` makes WireMock copy them into a `java.util.HashMap`
    /// with the `Authorization` pattern, which then iterates in hash order.
    fn in_wiremock_order(&self) -> Vec<(usize, &(String, MultiValuePattern))> {
        let list: Vec<(usize, &(String, MultiValuePattern))> =
            self.list.iter().enumerate().collect();
        if !self.basic_auth {
            return list;
        }
        let names: Vec<&str> = list.iter().map(|(_, (name, _))| name.as_str()).collect();
        basic_auth::report_order(&names)
            .into_iter()
            .map(|i| list[i])
            .collect()
    }
}

/// The values of header `name` in `req`, and the same as `&str`s.
fn with_values<T>(req: &RequestSnapshot, name: &str, f: impl FnOnce(&[&str]) -> T) -> T {
    let values = req.header_values(name);
    let refs: Vec<&str> = values.iter().map(|c| c.as_ref()).collect();
    f(&refs)
}

impl Part for Headers {
    fn constrains(&self) -> bool {
        !self.list.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.list
            .iter()
            .all(|(name, p)| with_values(req, name, |values| p.matches(values)))
    }

    fn score(&self, req: &RequestSnapshot) -> Score {
        if self.list.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .list
            .iter()
            .map(|(name, p)| with_values(req, name, |values| p.score(values)))
            .collect();
        aggregate(&scores)
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        if self.list.is_empty() {
            return;
        }
        for (i, (name, p)) in self.in_wiremock_order() {
            let expected = p.expected();
            let operator = if self.basic_auth && i == self.list.len() - 1 {
                basic_auth::OPERATOR.to_owned()
            } else {
                p.operator("")
            };
            let printed = format!(
                "{name}{operator}{}",
                if expected.is_empty() {
                    String::new()
                } else {
                    format!(": {expected}")
                }
            );
            let (shown, exact) = with_values(req, name, |values| {
                (values_text(name, values), p.score(values).exact)
            });
            rows.push(ReportRow::part("Header", printed, shown, exact));
        }
        rows.push(ReportRow::spacer());
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    fn headers(v: Value) -> Headers {
        Headers::parse(v.as_object().unwrap(), "request").unwrap()
    }

    #[test]
    fn headers_are_case_insensitive_by_name_and_multi_valued() {
        let r = request("GET", "/", &[("X-Tag", "a"), ("x-tag", "b")], "");
        assert!(headers(json!({"headers": {"x-TAG": {"equalTo": "b"}}})).matches(&r));
        assert!(
            headers(
                json!({"headers": {"X-Tag": {"hasExactly": [{"equalTo": "b"}, {"equalTo": "a"}]}}})
            )
            .matches(&r)
        );
        assert!(
            !headers(json!({"headers": {"X-Tag": {"hasExactly": [{"equalTo": "a"}]}}})).matches(&r)
        );
        assert!(
            headers(json!({"headers": {"X-Tag": {"includes": [{"equalTo": "a"}]}}})).matches(&r)
        );
        assert!(headers(json!({"headers": {"X-Other": {"absent": true}}})).matches(&r));
    }

    #[test]
    fn header_rows_use_the_stubs_spelling_and_say_when_a_header_is_missing() {
        let h = headers(json!({
            "headers": {
                "content-type": {"equalTo": "application/json", "caseInsensitive": true},
                "Accept": {"equalTo": "application/json"},
                "X-Id": {"matches": "[0-9]+"}
            }
        }));
        let rows = rows_of(
            &h,
            &request(
                "GET",
                "/pet",
                &[("content-type", "APPLICATION/json"), ("x-id", "abc")],
                "",
            ),
        );
        assert_eq!(
            rows,
            [
                row(
                    "content-type: application/json",
                    "content-type: APPLICATION/json",
                    None
                ),
                row(
                    "Accept: application/json",
                    "",
                    Some("Header is not present")
                ),
                row(
                    "X-Id [matches] : [0-9]+",
                    "X-Id: abc",
                    Some("Header does not match")
                ),
                ReportRow::spacer(),
            ]
        );
    }

    #[test]
    fn basic_auth_is_the_last_header_shown_as_a_prefix_in_hash_order() {
        let h = headers(json!({
            "headers": {"X-Token": {"equalTo": "t"}},
            "basicAuthCredentials": {"username": "user", "password": "pass"}
        }));
        let req = request(
            "GET",
            "/",
            &[("authorization", "Basic dXNlcjpwYXNz"), ("x-token", "t")],
            "",
        );
        assert!(h.matches(&req));
        assert_eq!(
            rows_of(&h, &req),
            [
                row(
                    "Authorization [prefix] : Basic dXNlcjpwYXNz",
                    "Authorization: Basic dXNlcjpwYXNz",
                    None
                ),
                row("X-Token: t", "X-Token: t", None),
                ReportRow::spacer(),
            ]
        );
        let wrong = headers(json!({"basicAuth": {"username": "user", "password": "nope"}}));
        assert!(!wrong.matches(&req));
        // "Basic dXNlcjpub3Bl" against "Basic dXNlcjpwYXNz": five edits in 18.
        assert_eq!(wrong.score(&req).distance, 5.0 / 18.0);
    }
}
