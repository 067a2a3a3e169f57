//! Patterns for a field that may occur several times (headers, query parameters, form
//! fields, a multipart part's headers): one pattern for any of the values, or
//! `hasExactly` / `includes` over all of them; how they match, score and print.

use std::marker::PhantomData;

use serde_json::{Map, Value};

use super::part::Part;
use crate::near_miss::{ReportRow, Score, aggregate, best};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldResult, Fields as _, as_array, as_object, join};
use decoy_spec::request::RequestSnapshot;

#[derive(Debug)]
pub enum MultiValuePattern {
    /// Matches when any value matches (or, with no value, when the pattern accepts absence).
    Single(StringPattern),
    /// Every pattern matches a distinct value and there are no other values.
    HasExactly(Vec<StringPattern>),
    /// Every pattern matches some value.
    Includes(Vec<StringPattern>),
}

impl MultiValuePattern {
    fn parse(v: &Value, path: &str) -> FieldResult<Self> {
        let obj = as_object(v, path)?;
        for (key, ctor) in [("hasExactly", true), ("includes", false)] {
            if let Some(list) = obj.field(key) {
                let lpath = join(path, key);
                let items = as_array(list, &lpath)?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| StringPattern::parse(p, &format!("{lpath}[{i}]")))
                    .collect::<FieldResult<Vec<_>>>()?;
                return Ok(if ctor {
                    MultiValuePattern::HasExactly(items)
                } else {
                    MultiValuePattern::Includes(items)
                });
            }
        }
        StringPattern::parse(v, path).map(MultiValuePattern::Single)
    }

    pub fn matches(&self, values: &[&str]) -> bool {
        match self {
            MultiValuePattern::Single(p) => {
                if values.is_empty() {
                    p.matches_opt(None)
                } else {
                    values.iter().any(|v| p.matches(&Actual::new(v)))
                }
            }
            MultiValuePattern::Includes(ps) => ps
                .iter()
                .all(|p| values.iter().any(|v| p.matches(&Actual::new(v)))),
            MultiValuePattern::HasExactly(ps) => {
                if values.len() != ps.len() {
                    return false;
                }
                let mut used = vec![false; values.len()];
                ps.iter().all(|p| {
                    let hit = values
                        .iter()
                        .enumerate()
                        .position(|(i, v)| !used[i] && p.matches(&Actual::new(v)));
                    if let Some(i) = hit {
                        used[i] = true;
                    }
                    hit.is_some()
                })
            }
        }
    }

    /// WireMock's `MultiValuePattern.match`: a single pattern takes the closest of
    /// the values (or the missing value); `hasExactly` / `includes` need a value and
    /// average their patterns' best scores (`hasExactly` also scores the count).
    pub fn score(&self, values: &[&str]) -> Score {
        match self {
            MultiValuePattern::Single(p) => {
                if values.is_empty() {
                    p.score(None)
                } else {
                    best(values.iter().map(|v| p.score(Some(&Actual::new(v))))).unwrap_or(Score::NO)
                }
            }
            MultiValuePattern::HasExactly(ps) | MultiValuePattern::Includes(ps) => {
                if values.is_empty() {
                    return Score::NO;
                }
                let each: Vec<Score> = ps
                    .iter()
                    .map(|p| {
                        best(values.iter().map(|v| p.score(Some(&Actual::new(v)))))
                            .unwrap_or(Score::NO)
                    })
                    .collect();
                let all = aggregate(&each);
                match self {
                    MultiValuePattern::HasExactly(_) => {
                        aggregate(&[Score::of(ps.len() == values.len()), all])
                    }
                    _ => all,
                }
            }
        }
    }

    /// `generateOperatorStringForMultiValuePattern`.
    pub(super) fn operator(&self, default: &str) -> String {
        match self {
            MultiValuePattern::Single(p) => p.operator(default),
            MultiValuePattern::HasExactly(ps) => format!(" exactly [{}]", list_name(ps)),
            MultiValuePattern::Includes(ps) => format!(" including [{}]", list_name(ps)),
        }
    }

    /// `getExpected()`: the single pattern's operand; nothing for a list.
    pub(super) fn expected(&self) -> String {
        match self {
            MultiValuePattern::Single(p) => p.wm_expected(),
            _ => String::new(),
        }
    }
}

fn list_name(ps: &[StringPattern]) -> String {
    ps.iter()
        .map(|p| format!("{} {}", p.wm_name(), p.wm_expected()))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// An object of one multi-valued pattern per name (`"headers": {"Accept": {...}}`), in
/// the order written.
pub(super) fn multi_patterns(
    v: &Value,
    path: &str,
) -> FieldResult<Vec<(String, MultiValuePattern)>> {
    let obj: &Map<String, Value> = as_object(v, path)?;
    obj.iter()
        .map(|(k, p)| Ok((k.clone(), MultiValuePattern::parse(p, &join(path, k))?)))
        .collect()
}

/// `key: value` per value, one per line (WireMock's `MultiValue.toString`).
pub(super) fn values_text(key: &str, values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{key}: {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A part made of named, multi-valued fields ([`query`](super::query) parameters,
/// [`form`](super::form) fields): where it is written in the stub, how the report
/// names it, and where a request keeps a name's values.
pub(super) trait Fields {
    /// The stub's field (`queryParameters`).
    const FIELD: &'static str;
    /// The part's name in the report's notes (`Query`, `Form data`).
    const ATTRIBUTE: &'static str;
    /// The label before each name on the stub's side (`Query: q`).
    const LABEL: &'static str;

    /// The values `req` has for `name`, in order.
    fn values<'a>(req: &'a RequestSnapshot, name: &'a str) -> Vec<&'a str>;
}

/// A pattern per name, over the values [`Fields::values`] finds.
pub struct Named<F> {
    list: Vec<(String, MultiValuePattern)>,
    fields: PhantomData<F>,
}

impl<F> std::fmt::Debug for Named<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Named").field(&self.list).finish()
    }
}

impl<F: Fields> Named<F> {
    pub(super) fn parse(obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        Ok(Named {
            list: match obj.field(F::FIELD) {
                Some(q) => multi_patterns(q, &join(path, F::FIELD))?,
                None => Vec::new(),
            },
            fields: PhantomData,
        })
    }
}

impl<F: Fields> Part for Named<F> {
    fn constrains(&self) -> bool {
        !self.list.is_empty()
    }

    fn matches(&self, req: &RequestSnapshot) -> bool {
        self.list
            .iter()
            .all(|(name, p)| p.matches(&F::values(req, name)))
    }

    /// Exact for none, else the mean of each name's score.
    fn score(&self, req: &RequestSnapshot) -> Score {
        if self.list.is_empty() {
            return Score::EXACT;
        }
        let scores: Vec<Score> = self
            .list
            .iter()
            .map(|(name, p)| p.score(&F::values(req, name)))
            .collect();
        aggregate(&scores)
    }

    /// A row per name, `{label}: {name}` and the operator on the stub's side, then
    /// a blank row.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>) {
        for (name, p) in &self.list {
            let values = F::values(req, name);
            rows.push(ReportRow::part(
                F::ATTRIBUTE,
                format!("{}: {name}{}{}", F::LABEL, p.operator(" = "), p.expected()),
                values_text(name, &values),
                p.score(&values).exact,
            ));
        }
        if !self.list.is_empty() {
            rows.push(ReportRow::spacer());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> MultiValuePattern {
        MultiValuePattern::parse(&v, "p").unwrap()
    }

    #[test]
    fn has_exactly_needs_each_pattern_on_its_own_value_and_no_other_value() {
        let p = parse(json!({"hasExactly": [{"equalTo": "a"}, {"matches": "[a-z]"}]}));
        assert!(p.matches(&["b", "a"]));
        assert!(!p.matches(&["a"]));
        assert!(!p.matches(&["a", "b", "c"]));
        assert!(!p.matches(&["a", "1"]));
        // The count is scored beside the patterns' mean.
        assert!(!p.score(&["a"]).exact);
        assert_eq!(p.score(&[]).distance, 1.0);
    }

    #[test]
    fn a_single_pattern_takes_the_closest_value_or_the_missing_one() {
        let p = parse(json!({"equalTo": "abcd"}));
        assert!(p.matches(&["x", "abcd"]));
        assert_eq!(p.score(&["abcf", "zzzz"]).distance, 0.25);
        assert!(parse(json!({"absent": true})).score(&[]).exact);
        assert_eq!(p.operator(": "), ": ");
        assert_eq!(
            parse(json!({"includes": [{"equalTo": "a"}, {"contains": "b"}]})).operator(""),
            " including [equalTo a AND contains b]"
        );
    }
}
