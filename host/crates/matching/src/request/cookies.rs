//! `cookies`: a pattern per cookie name, over the `Cookie` headers' values.

use serde_json::{Map, Value};

use super::part::{Part, string_patterns};
use crate::near_miss::{ReportRow, Score, aggregate, best};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["cookies"];

#[derive(Debug)]
pub struct Cookies(Vec<(String, StringPattern)>);

impl Cookies {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Cookies(match obj.field("cookies") {
            Some(c) => string_patterns(c, &join(path, "cookies"))?,
            None => Vec::new(),
        }))
    }
}

/// The first value of cookie `name`: what matching and the report read.
fn first<'r>(req: &'r RequestSnapshot, name: &str) -> Option<&'r str> {
    req.cookies()
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl Part for Cookies {
    fn constrains(&self) -> bool {
        !self.0.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.0
            .iter()
            .all(|(name, p)| p.matches_opt(first(req, name).map(Actual::new).as_ref()))
    }

    /// As WireMock scores a cookie: the closest of all the values of that name.
    fn score(&self, req: &RequestSnapshot) -> Score {
        if self.0.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .0
            .iter()
            .map(|(name, p)| {
                let values: Vec<&str> = req
                    .cookies()
                    .iter()
                    .filter(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
                    .collect();
                if values.is_empty() {
                    Score::of(p.matches_opt(None))
                } else {
                    best(values.iter().map(|v| p.score(Some(&Actual::new(v))))).unwrap_or(Score::NO)
                }
            })
            .collect();
        aggregate(&scores)
    }

    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        for (name, p) in &self.0 {
            let value = first(req, name);
            // WireMock prints the cookie pattern's raw value here, not `getExpected`.
            let raw = match p {
                StringPattern::Absent => "null".to_owned(),
                other => other.wm_expected(),
            };
            rows.push(ReportRow::part(
                "Cookie",
                format!("Cookie: {name}{}{raw}", p.operator("=")),
                value.unwrap_or_default().to_owned(),
                p.matches_opt(value.map(Actual::new).as_ref()),
            ));
        }
        if !self.0.is_empty() {
            rows.push(ReportRow::spacer());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::part::{request, row, rows_of};
    use super::*;
    use serde_json::json;

    #[test]
    fn cookies_match_by_name_and_rows_print_the_raw_operand() {
        let v = json!({"cookies": {
            "session": {"equalTo": "abc"},
            "theme": {"absent": true},
            "id": {"matches": "[0-9]+"}
        }});
        let c = Cookies::parse(v.as_object().unwrap(), "request").unwrap();
        let hit = request("GET", "/", &[("cookie", "session=abc; id=7")], "");
        assert!(c.matches(&hit));
        assert!(c.score(&hit).exact);
        let near = request("GET", "/", &[("cookie", "session=abd; theme=dark")], "");
        assert!(!c.matches(&near));
        assert_eq!(
            rows_of(&c, &near),
            [
                row("Cookie: session=abc", "abd", Some("Cookie does not match")),
                row(
                    "Cookie: theme [absent] null",
                    "dark",
                    Some("Cookie does not match")
                ),
                row(
                    "Cookie: id [matches] [0-9]+",
                    "",
                    Some("Cookie is not present")
                ),
                ReportRow::spacer(),
            ]
        );
    }

    #[test]
    fn a_cookie_scores_its_closest_value() {
        let v = json!({"cookies": {"k": {"equalTo": "abcd"}}});
        let c = Cookies::parse(v.as_object().unwrap(), "request").unwrap();
        let req = request("GET", "/", &[("cookie", "k=zzzz; k=abce")], "");
        assert_eq!(c.score(&req).distance, 0.25);
    }
}
