//! The limits that keep one request from costing the process more than a bounded
//! amount of stack, memory or time in a matcher, and the scoring deadline.
//!
//! Request bodies are whatever a client sends, so every matcher that parses, walks
//! or searches one is bounded: a document nested deeper than a limit, a JSONPath
//! that would select more nodes than its budget, a comparison that would take more
//! steps than its budget, or a regex that backtracks past its limit counts as **no
//! match**, with a warning in the log naming the limit, never as a crash or a hang.
//!
//! The "not matched" report scores many stubs for one request; it runs under a
//! deadline ([`with_deadline`]): once it has passed, the expensive matchers (regexes
//! that backtrack, XML and XPath, JSONPath, JSON Schema, JSON equality) answer "no
//! match" at once instead of running. Ordinary matching never sets a deadline.
//!
//! The limits, with their defaults (docs/matching.md lists them for users):
//!
//! | limit | default | what it bounds |
//! |---|---|---|
//! | [`MAX_JSON_DEPTH`] | 128 | nesting of a JSON body (serde_json's own parser limit) |
//! | [`MAX_XML_DEPTH`] | 256 | nesting of an XML body or expected document |
//! | [`COMPARE_STEP_BUDGET`] | 1,000,000 | node comparisons of one `equalToJson` / `equalToXml` |
//! | [`JSONPATH_NODE_BUDGET`] | 1,000,000 | nodes one JSONPath evaluation may select or copy along the way |
//! | [`REGEX_BACKTRACK_LIMIT`] | 100,000 | backtracking steps of a look-around / backreference regex |

use std::cell::Cell;
use std::time::Instant;

/// How deeply a JSON body may nest. This is serde_json's own recursion limit (its
/// parser refuses deeper documents), stated here so every limit is in one place: a
/// body nested deeper is not JSON to the matchers, so JSON matchers do not match it.
pub const MAX_JSON_DEPTH: usize = 128;

/// How deeply an XML document (a request body, or a mapping's expected document)
/// may nest elements. Deeper bodies are not matched by XML matchers; a deeper
/// expected document is refused when the mapping loads.
pub const MAX_XML_DEPTH: usize = 256;

/// How many node comparisons one `equalToJson` or `equalToXml` evaluation may make.
/// Comparisons that ignore order try pairs of children, which multiplies across
/// levels; past the budget the evaluation stops and counts as no match.
pub const COMPARE_STEP_BUDGET: u64 = 1_000_000;

/// How many nodes one JSONPath evaluation may select across its steps (a `..` step
/// after another multiplies them: `$..a..a..a` on a 100-deep body would select
/// millions). Past the budget the evaluation stops and counts as no match.
pub const JSONPATH_NODE_BUDGET: usize = 1_000_000;

/// Backtracking steps a regex with look-around or backreferences may take on one
/// value (fancy-regex's `backtrack_limit`; its default is 1,000,000, about 50 ms).
/// Plain regexes run in linear time and need no limit.
pub const REGEX_BACKTRACK_LIMIT: usize = 100_000;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static SKIPPED: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with a deadline on this thread: once `deadline` has passed, expensive
/// matchers called from `f` answer "no match" without running. Returns `f`'s result
/// and how many evaluations were skipped that way.
pub fn with_deadline<R>(deadline: Instant, f: impl FnOnce() -> R) -> (R, u32) {
    let previous = DEADLINE.with(|d| d.replace(Some(deadline)));
    let skipped_before = SKIPPED.with(|s| s.replace(0));
    // Restores the previous state even if `f` unwinds.
    struct Restore(Option<Instant>, u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
            SKIPPED.with(|s| s.set(self.1));
        }
    }
    let restore = Restore(previous, skipped_before);
    let out = f();
    let skipped = SKIPPED.with(Cell::get);
    drop(restore);
    (out, skipped)
}

/// Whether an expensive evaluation should be skipped: a deadline is set on this
/// thread and has passed. Counts the skip for [`with_deadline`]'s caller.
pub fn past_deadline() -> bool {
    let past = DEADLINE.with(|d| d.get().is_some_and(|d| Instant::now() >= d));
    if past {
        SKIPPED.with(|s| s.set(s.get().saturating_add(1)));
    }
    past
}

/// A budget of steps for one evaluation: [`Budget::spend`] answers `false` once it
/// is exhausted, and keeps answering `false`.
#[derive(Debug)]
pub struct Budget {
    left: Cell<u64>,
}

impl Budget {
    pub fn new(steps: u64) -> Budget {
        Budget {
            left: Cell::new(steps),
        }
    }

    /// Takes `n` steps; `false` when fewer than `n` were left (the budget is then empty).
    pub fn spend(&self, n: u64) -> bool {
        match self.left.get().checked_sub(n) {
            Some(left) => {
                self.left.set(left);
                true
            }
            None => {
                self.left.set(0);
                false
            }
        }
    }

    pub fn exhausted(&self) -> bool {
        self.left.get() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_passed_deadline_is_seen_only_inside_its_scope_and_counted() {
        assert!(!past_deadline());
        let (seen, skipped) = with_deadline(Instant::now() - Duration::from_millis(1), || {
            past_deadline() && past_deadline()
        });
        assert!(seen);
        assert_eq!(skipped, 2);
        assert!(!past_deadline());
        let (seen, skipped) =
            with_deadline(Instant::now() + Duration::from_secs(60), past_deadline);
        assert!(!seen);
        assert_eq!(skipped, 0);
    }

    #[test]
    fn a_budget_refuses_once_spent() {
        let b = Budget::new(3);
        assert!(b.spend(2));
        assert!(!b.spend(2));
        assert!(b.exhausted());
        assert!(!b.spend(1));
    }
}

/// The limits seen from the matchers: hostile bodies and patterns are no match.
#[cfg(test)]
mod hostile_inputs {
    use crate::pattern::{Actual, StringPattern};
    use serde_json::{Value, json};

    fn m(v: Value, actual: &str) -> bool {
        StringPattern::parse(&v, "b")
            .unwrap()
            .matches(&Actual::new(actual))
    }

    fn nested_xml(depth: usize) -> String {
        format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth))
    }

    fn nested_json(depth: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }

    #[test]
    fn an_xml_body_nested_deeper_than_the_limit_matches_no_xml_matcher() {
        // 100,000 levels: far more than a thread's stack would take recursively.
        let body = nested_xml(100_000);
        assert!(!m(json!({"equalToXml": "<a><a/></a>"}), &body));
        assert!(!m(json!({"matchesXPath": "//a"}), &body));
        assert!(!m(
            json!({"matchesXPath": {"expression": "/a", "contains": "x"}}),
            &body
        ));
        // At the limit, it is an ordinary document.
        let at_limit = nested_xml(super::MAX_XML_DEPTH);
        assert!(m(json!({"equalToXml": at_limit.clone()}), &at_limit));
        assert!(m(json!({"matchesXPath": "/a/a"}), &at_limit));
    }

    #[test]
    fn an_expected_xml_document_deeper_than_the_limit_is_refused_at_load() {
        let e = StringPattern::parse(&json!({"equalToXml": nested_xml(300)}), "b").unwrap_err();
        assert!(e.reason.contains("nest deeper than 256"), "{}", e.reason);
    }

    #[test]
    fn a_json_body_deeper_than_serde_json_allows_is_not_json() {
        let body = nested_json(100_000);
        assert!(!m(json!({"equalToJson": "{\"a\": 1}"}), &body));
        assert!(!m(json!({"matchesJsonPath": "$..a"}), &body));
        assert!(!m(json!({"matchesJsonSchema": {"type": "object"}}), &body));
        assert!(m(json!({"matchesJsonPath": "$..a"}), &nested_json(100)));
    }

    #[test]
    fn a_json_path_with_several_descendant_steps_stops_at_its_node_budget() {
        // The issue's case: 100-deep, 601 bytes; $..a..a..a..a selects ~4 million nodes.
        let body = nested_json(100);
        assert!(!m(json!({"matchesJsonPath": "$..a..a..a..a..a"}), &body));
        // A small document still answers as before.
        let small = r#"{"a": {"a": {"a": {"b": 1}}}}"#;
        assert!(m(json!({"matchesJsonPath": "$..a..a..a.b"}), small));
        assert!(!m(json!({"matchesJsonPath": "$..a..a..a..a"}), small));
    }

    #[test]
    fn segment_by_segment_evaluation_selects_what_the_whole_path_selects() {
        let body = r#"{"store": {"book": [{"t": "a", "p": 8, "tags": ["x"]}, {"t": "b", "p": 20}],
            "bike": {"p": 19, "t": "c"}}, "n": [1, 2, 3], "k.y": {"z": 1}}"#;
        for (path, expect) in [
            ("$.store.book[0].t", true),
            ("$..book[?(@.p < 10)].t", true),
            ("$..book[?(@.p > 100)]", false),
            ("$.store..p", true),
            ("$..['t','p']", true),
            ("$['k.y'].z", true),
            ("$[\"k.y\"]['z']", true),
            ("$.n[1:]", true),
            ("$.n[5]", false),
            ("$..*", true),
            ("$.store.*.t", true),
            ("$.store.bike[?(@.p == 19)]", true),
            ("$..tags[?(@ == 'x')]", true),
            ("$[?(@.n)]", true),
        ] {
            assert_eq!(m(json!({"matchesJsonPath": path}), body), expect, "{path}");
        }
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$..book[?(@.p < 10)].t", "equalTo": "a"}}),
            body
        ));
        assert!(m(
            json!({"matchesJsonPath": {"expression": "$.store..t", "contains": "c"}}),
            body
        ));
    }

    #[test]
    fn a_regex_that_backtracks_past_its_limit_is_no_match_for_both_operators() {
        // A backreference forces fancy-regex's own backtracking VM.
        let catastrophic = "(a|a)*\\1b";
        let text = "a".repeat(40);
        assert!(!m(json!({"matches": catastrophic}), &text));
        assert!(!m(json!({"doesNotMatch": catastrophic}), &text));
        assert!(m(json!({"matches": "(a)\\1*"}), &text));
    }

    #[test]
    fn order_free_comparisons_stop_at_their_step_budget() {
        // 12 levels of two identical-looking children that differ only at the
        // bottom: with ignoreArrayOrder each level tries pairs, 4^12 = 16 million.
        fn tree(depth: usize, leaf: i64) -> Value {
            if depth == 0 {
                return json!(leaf);
            }
            json!([tree(depth - 1, leaf), tree(depth - 1, leaf)])
        }
        let expected = tree(12, 1).to_string();
        let actual = tree(12, 2).to_string();
        assert!(!m(
            json!({"equalToJson": expected, "ignoreArrayOrder": true}),
            &actual
        ));
        assert!(m(
            json!({"equalToJson": tree(3, 1).to_string(), "ignoreArrayOrder": true}),
            &tree(3, 1).to_string()
        ));
    }
}
