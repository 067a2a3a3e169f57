//! Jayway's word operators (`in`, `nin`, `subsetof`, `anyof`, `noneof`, `size`,
//! `empty`) as RFC 9535 function extensions of `serde_json_path`.
//!
//! [`crate::rewrite`] turns `LEFT op RIGHT` into one of four calls, by whether each
//! side is a query or a literal: `jayway_qq('op', LEFT, definite, RIGHT, definite)`,
//! `jayway_ql('op', LEFT, definite, 'JSON')`, `jayway_lq('op', 'JSON', RIGHT,
//! definite)` and `jayway_ll('op', 'JSON', 'JSON')`. A query is passed as a node list
//! with whether Jayway reads it as a definite path (one value, or nothing when it
//! selects nothing) or not (a list of what it selects); a literal is passed as its
//! JSON text (Jayway's permissive literals, `['S', 'M']`, made strict by the
//! rewrite).
//!
//! The evaluation follows Jayway 2.9's `EvaluatorFactory` and `ValueNode`s, checked
//! case by case against WireMock 3.13.2 (see the tests):
//! - equality is `left.equals(element)`: a string equals a string, or a number whose
//!   Java text (`BigDecimal.toString`) it is; a number equals a number of the same
//!   value, or a string that parses to that value (so `"1"` is in `[1]`, `1` is in
//!   `['1.0']`, but `"1.0"` is not in `[1]`); booleans and nulls equal their like; a
//!   missing value and a list or object equal nothing;
//! - a list's string element wrapped in quotes is unwrapped (`["'x'"]` holds `x`),
//!   and one that reads as a path (`'$.b'`) equals nothing;
//! - a list or object element in a list makes Jayway throw, and the filter item is
//!   then not selected: the comparison is false, whatever the operator;
//! - `in`/`nin` need a list on the right (anything else: false for both);
//!   `subsetof`, `anyof`, `noneof` need lists on both sides;
//! - `size N` compares a string's length in UTF-16 units or a list's length (an
//!   object's counts as -1) with `N` truncated to an integer; `empty true|false`
//!   holds for a string or a list whose emptiness is that (an object: never).
//!
//! Not reproduced: where Jayway throws, it drops the filter item however the
//! comparison is combined (`!(...)`, `||`); here only the comparison is false.

use serde_json::Value;
use serde_json_path::functions::{LogicalType, NodesType, ValueType};

/// A Jayway value node, as the operators see it.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// A definite path that selected nothing.
    Undefined,
    Null,
    Bool(bool),
    /// A number, as Java's `BigDecimal.toString` writes it.
    Num(String),
    Str(String),
    /// A list or an object (Jayway's `JsonNode`).
    Json(Value),
    /// A value that equals nothing (a path written in a list, say).
    Opaque,
}

/// What an operator gives: `None` where Jayway throws (the item is not selected).
type Outcome = Option<bool>;

/// `op` applied to two nodes.
fn apply(op: &str, left: &Node, right: &Node) -> bool {
    let outcome: Outcome = match op {
        "in" => list_of(right).map(|l| contains(&l, left)),
        "nin" => list_of(right).map(|l| !contains(&l, left)),
        "subsetof" => lists(left, right).map(|(l, r)| l.iter().all(|e| contains(&r, e))),
        "anyof" => lists(left, right).map(|(l, r)| l.iter().any(|e| contains(&r, e))),
        "noneof" => lists(left, right).map(|(l, r)| !l.iter().any(|e| contains(&r, e))),
        "size" => Some(size(left, right)),
        "empty" => match right {
            Node::Bool(b) => Some(empty(left) == Some(*b)),
            _ => None,
        },
        _ => None,
    };
    outcome.unwrap_or(false)
}

/// Whether `list` holds a node `node` equals (Java's `List.contains`).
fn contains(list: &[Node], node: &Node) -> bool {
    list.iter().any(|e| equals(node, e))
}

/// Both sides as lists (`None`: Jayway throws or gives up).
fn lists(left: &Node, right: &Node) -> Option<(Vec<Node>, Vec<Node>)> {
    let r = list_of(right)?;
    let l = list_of(left)?;
    Some((l, r))
}

/// The elements of a list node; `None` for anything else, or when an element is a
/// list or an object (Jayway cannot make a value node of one).
fn list_of(n: &Node) -> Option<Vec<Node>> {
    match n {
        Node::Json(Value::Array(items)) => items.iter().map(element).collect(),
        _ => None,
    }
}

/// A list element as Jayway's `ValueNode.toValueNode` makes it.
fn element(v: &Value) -> Option<Node> {
    Some(match v {
        Value::Array(_) | Value::Object(_) => return None,
        Value::String(s) => {
            let t = s.trim();
            let json_like = t.len() > 1
                && ((t.starts_with('[') && t.ends_with(']'))
                    || (t.starts_with('{') && t.ends_with('}')));
            if t.starts_with(['@', '$']) || json_like {
                Node::Opaque
            } else {
                Node::Str(unquoted(s))
            }
        }
        other => from_value(other),
    })
}

/// Jayway's `StringNode(text, escape = true)`: surrounding quotes dropped, escapes read.
fn unquoted(s: &str) -> String {
    let inner = if s.len() > 1
        && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"')))
    {
        &s[1..s.len() - 1]
    } else {
        s
    };
    crate::unescape_literal(inner)
}

/// A JSON value as a node (a literal's string was read, quotes and escapes, by the
/// rewrite already).
fn from_value(v: &Value) -> Node {
    match v {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Number(n) => Node::Num(java_number(n)),
        Value::String(s) => Node::Str(s.clone()),
        other => Node::Json(other.clone()),
    }
}

/// A query's result as Jayway's `PathNode.evaluate` gives it: the value of a
/// definite path (or undefined), else the list of what it selected.
fn from_nodes(nodes: &NodesType<'_>, definite: bool) -> Node {
    if definite {
        match nodes.first() {
            Some(v) => from_value(v),
            None => Node::Undefined,
        }
    } else {
        Node::Json(Value::Array(nodes.iter().map(|v| (*v).clone()).collect()))
    }
}

/// A literal's JSON text (as the rewrite wrote it) as a node.
fn from_literal(v: &ValueType<'_>) -> Node {
    match v.as_value() {
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(lit) => from_value(&lit),
            Err(_) => Node::Opaque,
        },
        _ => Node::Opaque,
    }
}

fn flag(v: &ValueType<'_>) -> bool {
    matches!(v.as_value(), Some(Value::Bool(true)))
}

fn op_of(v: &ValueType<'_>) -> String {
    match v.as_value() {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// Java's `Object.equals` between Jayway's value nodes, `left.equals(right)`.
fn equals(left: &Node, right: &Node) -> bool {
    match (left, right) {
        (Node::Str(s), Node::Str(t)) => s == t,
        (Node::Str(s), Node::Num(n)) => s == n,
        (Node::Num(n), Node::Num(m)) => decimal(n) == decimal(m),
        (Node::Num(n), Node::Str(t)) => decimal(t).is_some_and(|d| decimal(n) == Some(d)),
        (Node::Bool(a), Node::Bool(b)) => a == b,
        (Node::Null, Node::Null) => true,
        _ => false,
    }
}

/// `size N`: a string's length in UTF-16 units, a list's length, an object's -1.
fn size(left: &Node, right: &Node) -> bool {
    let Node::Num(n) = right else {
        return false;
    };
    let Some(expected) = int_value(n) else {
        return false;
    };
    match left {
        Node::Str(s) => s.encode_utf16().count() as i64 == expected,
        Node::Json(Value::Array(a)) => a.len() as i64 == expected,
        Node::Json(_) => expected == -1,
        _ => false,
    }
}

/// Whether a string or a list is empty; `None` for anything else.
fn empty(left: &Node) -> Option<bool> {
    match left {
        Node::Str(s) => Some(s.is_empty()),
        Node::Json(Value::Array(a)) => Some(a.is_empty()),
        _ => None,
    }
}

/// `BigDecimal.intValue()` for the sizes anyone writes: the integer part.
fn int_value(n: &str) -> Option<i64> {
    let (int_part, _) = n.split_once('.').unwrap_or((n, ""));
    if n.contains(['E', 'e']) {
        return n.parse::<f64>().ok().map(|f| f.trunc() as i64);
    }
    int_part.parse().ok()
}

/// A JSON number as Java holds it (an integer as its digits, any other as a
/// `Double`), written as `BigDecimal.toString` writes that.
fn java_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    big_decimal_string(&java_double(f))
}

/// Java's `Double.toString`: `1.0`, `0.001`, `1234567.0`, `1.0E7`, `1.0E-4`.
fn java_double(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let a = f.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{f}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

/// `new BigDecimal(text).toString()`: plain notation while the scale is not
/// negative and the exponent not below -6, else scientific (`1.0E+20`).
fn big_decimal_string(text: &str) -> String {
    let Some(d) = parse_parts(text) else {
        return text.to_owned();
    };
    let digits = d.unscaled.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let sign = if d.negative && digits != "0" { "-" } else { "" };
    let adjusted = -d.scale + digits.len() as i64 - 1;
    if d.scale >= 0 && adjusted >= -6 {
        let scale = d.scale as usize;
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        if digits.len() > scale {
            let (i, f) = digits.split_at(digits.len() - scale);
            format!("{sign}{i}.{f}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let e = if adjusted >= 0 { "+" } else { "" };
        format!("{sign}{first}{dot}{rest}E{e}{adjusted}")
    }
}

/// A decimal as `BigDecimal` reads it: sign, unscaled digits and scale.
struct Parts {
    negative: bool,
    unscaled: String,
    scale: i64,
}

fn parse_parts(text: &str) -> Option<Parts> {
    let t = text.trim();
    let (negative, t) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac.is_empty() {
        return None;
    }
    if !int_part
        .bytes()
        .chain(frac.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(Parts {
        negative,
        unscaled: format!("{int_part}{frac}"),
        scale: frac.len() as i64 - exp,
    })
}

/// A decimal reduced so that equal values compare equal (`BigDecimal.compareTo`):
/// its sign, significant digits and the power of ten of the last one.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let p = parse_parts(text)?;
    let digits = p.unscaled.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some((false, String::new(), 0));
    }
    let exp = (digits.len() - trimmed.len()) as i64 - p.scale;
    Some((p.negative, trimmed.to_owned(), exp))
}

/// A query on each side.
#[serde_json_path::function]
fn jayway_qq(
    op: ValueType,
    left: NodesType,
    left_definite: ValueType,
    right: NodesType,
    right_definite: ValueType,
) -> LogicalType {
    let l = from_nodes(&left, flag(&left_definite));
    let r = from_nodes(&right, flag(&right_definite));
    apply(&op_of(&op), &l, &r).into()
}

/// A query on the left, a literal on the right (the usual form).
#[serde_json_path::function]
fn jayway_ql(
    op: ValueType,
    left: NodesType,
    left_definite: ValueType,
    right: ValueType,
) -> LogicalType {
    let l = from_nodes(&left, flag(&left_definite));
    apply(&op_of(&op), &l, &from_literal(&right)).into()
}

/// A literal on the left, a query on the right.
#[serde_json_path::function]
fn jayway_lq(
    op: ValueType,
    left: ValueType,
    right: NodesType,
    right_definite: ValueType,
) -> LogicalType {
    let r = from_nodes(&right, flag(&right_definite));
    apply(&op_of(&op), &from_literal(&left), &r).into()
}

/// A literal on each side.
#[serde_json_path::function]
fn jayway_ll(op: ValueType, left: ValueType, right: ValueType) -> LogicalType {
    apply(&op_of(&op), &from_literal(&left), &from_literal(&right)).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_java_writes_them() {
        assert_eq!(java_double(100.0), "100.0");
        assert_eq!(java_double(1.5), "1.5");
        assert_eq!(java_double(1e20), "1.0E20");
        assert_eq!(big_decimal_string("1.0E20"), "1.0E+20");
        assert_eq!(big_decimal_string("100.0"), "100.0");
        assert_eq!(big_decimal_string("1.5E-5"), "0.000015");
        assert_eq!(big_decimal_string("1E-7"), "1E-7");
        assert_eq!(decimal("1"), decimal("1.0"));
        assert_eq!(decimal("1E+2"), decimal("100"));
        assert_ne!(decimal("1"), decimal("10"));
        assert_eq!(decimal("-0.0"), decimal("0"));
        assert!(decimal("abc").is_none());
    }
}

/// Each operator against what WireMock 3.13.2 (Jayway) answered for the same
/// document and filter: whether `$[?(FILTER)]` selects the one object of the list.
#[cfg(test)]
mod as_wiremock {
    use serde_json::{Value, json};

    fn selects(doc: Value, filter: &str) -> bool {
        let expr = format!("$[?({filter})]");
        let rewritten = crate::rewrite(&expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let path = serde_json_path::JsonPath::parse(&rewritten.expression)
            .unwrap_or_else(|e| panic!("{expr} -> {}: {e}", rewritten.expression));
        !path.query(&json!([doc])).is_empty()
    }

    fn check(cases: &[(Value, &str, bool)]) {
        for (doc, filter, want) in cases {
            assert_eq!(selects(doc.clone(), filter), *want, "{doc} {filter}");
        }
    }

    #[test]
    fn in_and_nin_compare_as_jayway_does() {
        check(&[
            (
                json!({"c": "7007496"}),
                r#"@.c in ["7007496", "123"]"#,
                true,
            ),
            (json!({"c": "999"}), r#"@.c in ["7007496", "123"]"#, false),
            (json!({"c": "7007496"}), r#"@.c IN ["7007496"]"#, true),
            (json!({"a": "x"}), "@.a in ['x','y']", true),
            (json!({"a": "x"}), "@.a in [x, y]", true),
            (json!({"a": "x"}), r#"@.a in ["x",]"#, true),
            (json!({"a": "x"}), r#"@.a in ["X"]"#, false),
            (json!({"a": "x"}), "@.a in []", false),
            (json!({"a": "x"}), "@.a nin []", true),
            (json!({"a": 1}), "@.a in ['1']", true),
            (json!({"a": "1"}), "@.a in [1]", true),
            (json!({"a": 1}), "@.a in [1.0]", true),
            (json!({"a": "1.0"}), "@.a in [1]", false),
            (json!({"a": 1.0}), "@.a in ['1']", true),
            (json!({"a": 2.5}), "@.a in ['2.5']", true),
            (json!({"a": 100}), "@.a in ['1E+2']", true),
            (json!({"a": "100"}), "@.a in [1E2]", false),
            (json!({"a": true}), "@.a in [true]", true),
            (json!({"a": true}), "@.a in ['true']", false),
            (json!({"a": null}), "@.a in [null]", true),
            (json!({"b": 1}), "@.a in [null]", false),
            (json!({"b": 1}), "@.a nin ['x']", true),
            (json!({"a": "x"}), "@.a nin ['x']", false),
            (json!({"a": "z"}), "@.a nin ['x']", true),
            (json!({"a": [1, 2]}), "@.a in [[1,2]]", false),
            (json!({"a": [1, 2]}), "@.a in [1,2]", false),
            (json!({"a": {"k": 1}}), "@.a in [1]", false),
            (json!({"a": {"k": 1}}), "@.a nin [1]", true),
            (json!({"a": "x"}), "@.a in 'x'", false),
            (json!({"a": "x", "l": ["x", "y"]}), "@.a in @.l", true),
            (json!({"a": "x", "l": ["z", "y"]}), "@.a in @.l", false),
            (json!({"a": "x", "l": "x"}), "@.a in @.l", false),
            (json!({"a": "'x'"}), r#"@.a in ["'x'"]"#, false),
            (json!({"a": "x"}), r#"@.a in ["'x'"]"#, true),
            (json!({"a": "$.b", "b": 1}), "@.a in ['$.b']", false),
            (json!({"a": "x"}), "'x' in ['x']", true),
            (json!({"a": "x"}), r#"@.a in ["x\"y", "x"]"#, true),
            (json!({"a": "x"}), r#"@['a'] in ["x"]"#, true),
            (json!({"a": "x", "b": 1}), "@.a in ['x'] && @.b == 1", true),
            (json!({"a": "x", "b": 2}), "@.a in ['x'] || @.b == 1", true),
            (json!({"a": "x"}), "!(@.a in ['x'])", false),
        ]);
    }

    #[test]
    fn list_operators_need_lists_on_both_sides() {
        check(&[
            (json!({"a": ["x", "y"]}), "@.a subsetof ['x','y','z']", true),
            (
                json!({"a": ["x", "w"]}),
                "@.a subsetof ['x','y','z']",
                false,
            ),
            (json!({"a": []}), "@.a subsetof ['x']", true),
            (json!({"a": "x"}), "@.a subsetof ['x']", false),
            (json!({"b": 1}), "@.a subsetof ['x']", false),
            (json!({"a": ["x", "y"]}), "@.a[*] subsetof ['x','y']", true),
            (
                json!({"a": ["x", "y"], "b": ["y"]}),
                "@.b subsetof @.a",
                true,
            ),
            (json!({"a": ["x", "w"]}), "@.a anyof ['x','y']", true),
            (json!({"a": ["q", "w"]}), "@.a anyof ['x','y']", false),
            (json!({"a": []}), "@.a anyof ['x','y']", false),
            (json!({"a": "x"}), "@.a anyof ['x','y']", false),
            (json!({"a": [{"k": 1}]}), r#"@.a anyof [{"k":1}]"#, false),
            (json!({"a": ["x", "y"]}), "@.a anyof @.a", true),
            (json!({"a": ["q", "w"]}), "@.a noneof ['x','y']", true),
            (json!({"a": ["x", "w"]}), "@.a noneof ['x','y']", false),
            (json!({"a": []}), "@.a noneof ['x','y']", true),
            (json!({"b": 1}), "@.a noneof ['x','y']", false),
        ]);
    }

    #[test]
    fn size_and_empty_read_strings_and_lists() {
        check(&[
            (json!({"a": [1, 2, 3]}), "@.a size 3", true),
            (json!({"a": [1, 2, 3]}), "@.a size 2", false),
            (json!({"a": "abc"}), "@.a size 3", true),
            (json!({"a": "héllo"}), "@.a size 5", true),
            (json!({"a": "😀"}), "@.a size 2", true),
            (json!({"a": {"x": 1}}), "@.a size 1", false),
            (json!({"a": {"x": 1}}), "@.a size -1", true),
            (json!({"a": 5}), "@.a size 1", false),
            (json!({"a": null}), "@.a size 0", false),
            (json!({"a": [1, 2, 3]}), "@.a size '3'", false),
            (json!({"a": [1, 2, 3]}), "@.a size 3.7", true),
            (json!({"a": []}), "@.a empty true", true),
            (json!({"a": [1]}), "@.a empty false", true),
            (json!({"a": ""}), "@.a empty true", true),
            (json!({"a": {}}), "@.a empty true", false),
            (json!({"a": {}}), "@.a empty false", false),
            (json!({"a": 5}), "@.a empty false", false),
            (json!({"a": 5}), "@.a empty true", false),
            (json!({"b": 5}), "@.a empty true", false),
            (json!({"b": 5}), "@.a empty false", false),
            (json!({"a": null}), "@.a empty true", false),
            (json!({"a": []}), "@.a empty 'x'", false),
        ]);
    }

    #[test]
    fn operators_apply_to_each_element_a_filter_visits() {
        let doc = json!({"items": [{"id": 1}, {"id": 2}], "a": [1, 2, 3], "n": [[1, 2], []]});
        let ids = |expr: &str| {
            let rewritten = crate::rewrite(expr).unwrap();
            serde_json_path::JsonPath::parse(&rewritten.expression)
                .unwrap()
                .query(&doc)
                .all()
                .into_iter()
                .cloned()
                .collect::<Vec<Value>>()
        };
        assert_eq!(ids("$.items[?(@.id in [2,3])].id"), vec![json!(2)]);
        assert_eq!(ids("$.items[?(@.id nin [2,3])].id"), vec![json!(1)]);
        assert_eq!(ids("$.a[?(@ in [2])]"), vec![json!(2)]);
        assert_eq!(ids("$.n[?(@ empty true)]"), vec![json!([])]);
        assert_eq!(ids("$.n[?(@ size 2)]"), vec![json!([1, 2])]);
    }
}
