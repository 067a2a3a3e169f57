//! How a helper's value is written into the output: as Java's `toString` of the
//! object WireMock's helper returns (`[1, a]`, `{a=1, b=[1, 2]}`, `5.0`), as Jackson
//! pretty-prints it (`toJson`, an object `jsonPath` selects) or as json-smart writes
//! it (a list `jsonPath` selects).
//!
//! Jackson's printer and Java's number text come from `decoy-jsonfmt`, shared with
//! decoy's not-matched report. Imports nothing of the helpers: the table, the glue
//! and every family write values through this file.

use serde_json::Value;

/// How a helper's value is written, as the Java object WireMock's helper returns
/// would print itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Java's `toString`: a list `[1, a]`, a map `{a=1, b=[1, 2]}`.
    Java,
    /// `jsonPath`'s result: an object as pretty JSON (Jackson), a list as compact
    /// JSON (json-smart).
    JsonPath,
}

/// How a helper of `kind` writes `v`.
pub(crate) fn text_of(kind: Kind, v: &Value) -> String {
    match (kind, v) {
        (Kind::JsonPath, Value::Object(_)) => jackson_pretty(v),
        (Kind::JsonPath, Value::Array(_)) => json_smart(v),
        _ => to_text(v),
    }
}

/// How a value is written into the output: as Java's `String.valueOf` would write
/// the object WireMock holds (null is empty at the top level).
pub(super) fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => java_string(other),
    }
}

/// Java's `toString` of the value as a Java object (`List`, `Map`, `Double`...).
pub(super) fn java_string(v: &Value) -> String {
    let mut out = String::new();
    java_into(v, &mut out);
    out
}

fn java_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                java_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push('=');
                java_into(x, out);
            }
            out.push('}');
        }
    }
}

/// A JSON number as Java prints it: integers as they are, doubles as
/// `Double.toString` (`5.0`, `0.3`, `1.0E20`).
pub(super) fn number_text(n: &serde_json::Number) -> String {
    decoy_jsonfmt::number(n, decoy_jsonfmt::Numbers::Double)
}

/// Jackson's default pretty printer, as WireMock's `Json.write` (null members left
/// out): `{\n  "a" : 1,\n  "b" : [ 1, 2 ]\n}`.
pub(super) fn jackson_pretty(v: &Value) -> String {
    decoy_jsonfmt::Pretty::OBJECT.print(v)
}

/// json-smart's compact JSON (how `jsonPath` writes a list): `/` is escaped.
fn json_smart(v: &Value) -> String {
    fn into(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    decoy_jsonfmt::quote_into(k, true, out);
                    out.push(':');
                    into(x, out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    into(x, out);
                }
                out.push(']');
            }
            Value::String(s) => decoy_jsonfmt::quote_into(s, true, out),
            Value::Number(n) => out.push_str(&number_text(n)),
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    into(v, &mut out);
    out
}
