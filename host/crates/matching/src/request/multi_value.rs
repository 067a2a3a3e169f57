//! Patterns for a field that may occur several times (headers, query parameters, form
//! fields, a multipart part's headers): one pattern for any of the values, or
//! `hasExactly` / `includes` over all of them; how they match, score and print.

use serde_json::{Map, Value};

use crate::near_miss::{ReportRow, Score, aggregate, best};
use crate::pattern::{Actual, StringPattern};
use decoy_spec::fields::{FieldResult, Fields, as_array, as_object, join};

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

/// The score of a list of named patterns: exact for none, else the mean of each
/// name's score over the values `values_of` finds for it.
pub(super) fn score_named<'a>(
    list: &'a [(String, MultiValuePattern)],
    values_of: impl Fn(&'a str) -> Vec<&'a str>,
) -> Score {
    if list.is_empty() {
        return Score::EXACT;
    }
    let scores: Vec<Score> = list
        .iter()
        .map(|(name, p)| p.score(&values_of(name)))
        .collect();
    aggregate(&scores)
}

/// The report section of a list of named patterns (query parameters, form fields): a
/// row per name, `{label}: {name}` and the operator on the stub's side, then a blank
/// row; `attribute` names the part in the notes.
pub(super) fn report_named<'a>(
    rows: &mut Vec<ReportRow>,
    attribute: &str,
    label: &str,
    list: &'a [(String, MultiValuePattern)],
    values_of: impl Fn(&'a str) -> Vec<&'a str>,
) {
    for (name, p) in list {
        let values = values_of(name);
        rows.push(ReportRow::part(
            attribute,
            format!("{label}: {name}{}{}", p.operator(" = "), p.expected()),
            values_text(name, &values),
            p.score(&values).exact,
        ));
    }
    if !list.is_empty() {
        rows.push(ReportRow::spacer());
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
