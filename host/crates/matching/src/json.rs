//! `equalToJson`: semantic JSON equality with WireMock's options and JsonUnit placeholders.
//!
//! Placeholders are strings in the expected document: `${json-unit.ignore}`,
//! `${json-unit.any-string}`, `${json-unit.any-number}`, `${json-unit.any-boolean}`,
//! `${json-unit.regex}<pattern>`, and `${json-unit.ignore-element}`-style array members.
//! Regex placeholders are compiled when the mapping loads.
//!
//! Both documents are at most [`MAX_JSON_DEPTH`](crate::limits::MAX_JSON_DEPTH) deep
//! (serde_json's parser limit), so the recursive comparison is bounded in depth; it
//! is bounded in work by [`COMPARE_STEP_BUDGET`] (order-free array comparison tries
//! pairs, which multiplies across levels).

use std::collections::HashMap;

use super::limits::{Budget, COMPARE_STEP_BUDGET};
use super::regex::Regex;
use serde_json::{Map, Value};

use decoy_spec::fields::{FieldError, FieldResult, as_bool, join};

#[derive(Debug)]
pub struct JsonEquality {
    pub expected: Value,
    ignore_array_order: bool,
    ignore_extra_elements: bool,
    regexes: HashMap<String, Regex>,
}

const REGEX_PREFIX: &str = "${json-unit.regex}";

impl JsonEquality {
    /// `value` is the operand of `equalToJson` (a JSON string or inline JSON); `obj` the
    /// pattern object holding the modifiers.
    pub fn parse(value: &Value, obj: &Map<String, Value>, path: &str) -> FieldResult<Self> {
        let expected = match value {
            Value::String(s) => serde_json::from_str(s).map_err(|e| {
                FieldError::new(path, format!("the expected value is not valid JSON: {e}"))
            })?,
            other => other.clone(),
        };
        let opt = |key: &str| -> FieldResult<bool> {
            let parent = path.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
            obj.get(key)
                .map(|v| as_bool(v, &join(parent, key)))
                .transpose()
                .map(|b| b.unwrap_or(false))
        };
        let mut regexes = HashMap::new();
        collect_regexes(&expected, path, &mut regexes)?;
        Ok(JsonEquality {
            ignore_array_order: opt("ignoreArrayOrder")?,
            ignore_extra_elements: opt("ignoreExtraElements")?,
            expected,
            regexes,
        })
    }

    /// Whether `actual` equals the expected document; past [`COMPARE_STEP_BUDGET`]
    /// comparisons it does not (logged).
    pub fn matches(&self, actual: &Value) -> bool {
        if crate::limits::past_deadline() {
            return false;
        }
        let budget = Budget::new(COMPARE_STEP_BUDGET);
        let equal = self.eq(&self.expected, actual, &budget);
        if budget.exhausted() {
            tracing::warn!(
                "equalToJson stopped after {COMPARE_STEP_BUDGET} node comparisons: counted as no match"
            );
            return false;
        }
        equal
    }

    /// How far `actual` is from the expected document, as WireMock scores a near
    /// miss: each difference counts the size of the larger side (at least 1), over
    /// the size of the larger document (JsonUnit's differences, walked here
    /// directly). Only for the "not matched" report.
    pub fn distance(&self, actual: &Value) -> f64 {
        let mut count = 0;
        let budget = Budget::new(COMPARE_STEP_BUDGET);
        self.count_differences(&self.expected, actual, &mut count, &budget);
        count as f64 / deep_size(&self.expected).max(deep_size(actual)) as f64
    }

    fn count_differences(
        &self,
        expected: &Value,
        actual: &Value,
        count: &mut usize,
        budget: &Budget,
    ) {
        // Past the budget, what is left counts as equal: the score is for the
        // report only, and stays bounded on a hostile body.
        if self.eq(expected, actual, budget) || budget.exhausted() {
            return;
        }
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                for (k, ev) in e {
                    match a.get(k) {
                        Some(av) => self.count_differences(ev, av, count, budget),
                        None if is_ignore(ev) => {}
                        None => *count += deep_size(ev),
                    }
                }
                if !self.ignore_extra_elements {
                    for (k, av) in a {
                        if !e.contains_key(k) {
                            *count += deep_size(av);
                        }
                    }
                }
            }
            (Value::Array(e), Value::Array(a))
                if e.len() == a.len() && !self.ignore_array_order =>
            {
                for (ev, av) in e.iter().zip(a) {
                    self.count_differences(ev, av, count, budget);
                }
            }
            _ => *count += deep_size(expected).max(deep_size(actual)).max(1),
        }
    }

    fn eq(&self, expected: &Value, actual: &Value, budget: &Budget) -> bool {
        if !budget.spend(1) {
            return false;
        }
        match expected {
            Value::String(s) if s.starts_with("${json-unit.") => self.placeholder(s, actual),
            Value::Object(e) => {
                let Value::Object(a) = actual else {
                    return false;
                };
                if !self.ignore_extra_elements && a.keys().any(|k| !e.contains_key(k)) {
                    return false;
                }
                e.iter().all(|(k, ev)| match a.get(k) {
                    Some(av) => self.eq(ev, av, budget),
                    None => is_ignore(ev),
                })
            }
            Value::Array(e) => {
                let Value::Array(a) = actual else {
                    return false;
                };
                let e: Vec<&Value> = e.iter().filter(|v| !is_ignore_element(v)).collect();
                if a.len() < e.len() || (!self.ignore_extra_elements && a.len() != e.len()) {
                    return false;
                }
                if self.ignore_array_order {
                    self.unordered(&e, a, budget)
                } else {
                    e.iter().zip(a).all(|(ev, av)| self.eq(ev, av, budget))
                }
            }
            Value::Number(en) => match actual {
                Value::Number(an) => match (en.as_i64(), an.as_i64()) {
                    (Some(x), Some(y)) => x == y,
                    _ => en.as_f64() == an.as_f64(),
                },
                _ => false,
            },
            other => other == actual,
        }
    }

    fn placeholder(&self, p: &str, actual: &Value) -> bool {
        match p {
            "${json-unit.ignore}" | "${json-unit.any}" => true,
            "${json-unit.any-string}" => actual.is_string(),
            "${json-unit.any-number}" => actual.is_number(),
            "${json-unit.any-boolean}" => actual.is_boolean(),
            _ if p.starts_with(REGEX_PREFIX) => match (self.regexes.get(p), actual) {
                (Some(re), Value::String(s)) => re.is_match(s),
                (Some(re), Value::Number(n)) => re.is_match(&n.to_string()),
                _ => false,
            },
            // An unknown `${json-unit.…}` string is compared literally.
            _ => actual.as_str() == Some(p),
        }
    }

    /// Bipartite matching of expected to actual elements (small arrays: simple
    /// augmenting paths are plenty).
    fn unordered(&self, expected: &[&Value], actual: &[Value], budget: &Budget) -> bool {
        let mut owner: Vec<Option<usize>> = vec![None; actual.len()];
        for ei in 0..expected.len() {
            let mut seen = vec![false; actual.len()];
            if !self.augment(ei, expected, actual, &mut owner, &mut seen, budget) {
                return false;
            }
        }
        true
    }

    fn augment(
        &self,
        ei: usize,
        expected: &[&Value],
        actual: &[Value],
        owner: &mut Vec<Option<usize>>,
        seen: &mut Vec<bool>,
        budget: &Budget,
    ) -> bool {
        for ai in 0..actual.len() {
            if budget.exhausted() {
                return false;
            }
            if seen[ai] || !self.eq(expected[ei], &actual[ai], budget) {
                continue;
            }
            seen[ai] = true;
            let free = match owner[ai] {
                None => true,
                Some(other) => self.augment(other, expected, actual, owner, seen, budget),
            };
            if free {
                owner[ai] = Some(ei);
                return true;
            }
        }
        false
    }
}

fn is_ignore(v: &Value) -> bool {
    matches!(v.as_str(), Some("${json-unit.ignore}"))
}

fn is_ignore_element(v: &Value) -> bool {
    matches!(v.as_str(), Some("${json-unit.ignore-element}"))
}

fn collect_regexes(v: &Value, path: &str, out: &mut HashMap<String, Regex>) -> FieldResult<()> {
    match v {
        Value::String(s) => {
            if let Some(pattern) = s.strip_prefix(REGEX_PREFIX) {
                let re = super::regex::full_regex(pattern, path)?;
                out.insert(s.clone(), re);
            }
        }
        Value::Array(a) => {
            for item in a {
                collect_regexes(item, path, out)?;
            }
        }
        Value::Object(o) => {
            for item in o.values() {
                collect_regexes(item, path, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// WireMock's `Json.deepSize`: a node counts 1, plus 1 for each child, plus the
/// size of each child that is itself an object or array.
fn deep_size(v: &Value) -> usize {
    let children: Box<dyn Iterator<Item = &Value>> = match v {
        Value::Object(m) => Box::new(m.values()),
        Value::Array(a) => Box::new(a.iter()),
        _ => return 1,
    };
    1 + children
        .map(|c| {
            1 + if c.is_object() || c.is_array() {
                deep_size(c)
            } else {
                0
            }
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eq(expected: Value, opts: Value, actual: Value) -> bool {
        let mut obj = opts.as_object().cloned().unwrap_or_default();
        obj.insert("equalToJson".into(), expected.clone());
        JsonEquality::parse(&expected, &obj, "b.equalToJson")
            .unwrap()
            .matches(&actual)
    }

    #[test]
    fn compares_objects_regardless_of_key_order() {
        assert!(eq(
            json!({"a": 1, "b": [1, 2]}),
            json!({}),
            json!({"b": [1, 2], "a": 1})
        ));
        assert!(!eq(json!({"a": 1}), json!({}), json!({"a": 1, "b": 2})));
        assert!(eq(json!({"a": 1.0}), json!({}), json!({"a": 1})));
    }

    #[test]
    fn options_relax_array_order_and_extra_elements() {
        assert!(!eq(json!([1, 2]), json!({}), json!([2, 1])));
        assert!(eq(
            json!([1, 2]),
            json!({"ignoreArrayOrder": true}),
            json!([2, 1])
        ));
        assert!(eq(
            json!({"a": [1]}),
            json!({"ignoreExtraElements": true}),
            json!({"a": [1, 2], "b": 3})
        ));
        assert!(eq(
            json!([{"id": 2}, {"id": 1}]),
            json!({"ignoreArrayOrder": true, "ignoreExtraElements": true}),
            json!([{"id": 1, "x": 0}, {"id": 3}, {"id": 2}])
        ));
    }

    #[test]
    fn json_unit_placeholders_match_by_type_or_regex() {
        let expected = json!({
            "id": "${json-unit.any-number}",
            "name": "${json-unit.any-string}",
            "when": "${json-unit.ignore}",
            "code": "${json-unit.regex}[A-Z]{3}",
            "ok": "${json-unit.any-boolean}"
        });
        assert!(eq(
            expected.clone(),
            json!({}),
            json!({"id": 7, "name": "x", "when": [1], "code": "ABC", "ok": true})
        ));
        assert!(eq(
            expected.clone(),
            json!({}),
            json!({"id": 7, "name": "x", "code": "ABC", "ok": false})
        ));
        assert!(!eq(
            expected,
            json!({}),
            json!({"id": "7", "name": "x", "when": 1, "code": "ABCD", "ok": true})
        ));
    }

    #[test]
    fn rejects_an_expected_value_that_is_not_json() {
        let obj = Map::new();
        let e = JsonEquality::parse(&json!("{nope"), &obj, "request.bodyPatterns[0].equalToJson")
            .unwrap_err();
        assert!(e.reason.contains("not valid JSON"));
    }
}
