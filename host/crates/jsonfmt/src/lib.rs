//! JSON text as WireMock's Java side writes it: Jackson's default pretty printer and
//! Java's text of numbers, in one place.
//!
//! Two places print JSON the way WireMock does: the "Request was not matched" report
//! (expected bodies and schemas, `decoy-matching`) and the `response-template` plugin
//! (`toJson`, `formatJson`, `jsonPath` results). They used to carry two copies of the
//! printer, which had drifted: one printed floats as `BigDecimal`s do, the other as
//! `Double`s do, so `formatJson` wrote `1e20` as `1.0E20` where WireMock writes
//! `100000000000000000000`. Both habits are right somewhere, because WireMock holds
//! JSON in two ways:
//!
//! - a tree read from text by WireMock's `ObjectMapper` (`Json.prettyPrint`, used by
//!   the report and by `formatJson`): floats are `BigDecimal`s written plain
//!   (`USE_BIG_DECIMAL_FOR_FLOATS`, `WRITE_BIGDECIMAL_AS_PLAIN`), and null members
//!   are kept (serialisation inclusion does not apply to trees): [`Pretty::TREE`];
//! - Java objects (maps, lists, `Double`s from Jayway's json-smart) written by
//!   `Json.write` (`toJson`, an object `jsonPath` selects): floats as
//!   `Double.toString` writes them, null members left out (`NON_NULL`):
//!   [`Pretty::OBJECT`].
//!
//! Jackson's `DefaultPrettyPrinter` puts each object member on its own line indented by
//! two spaces with ` : ` between name and value, keeps arrays on one line (`[ 1, 2 ]`)
//! and writes empty containers as `{ }` and `[ ]`.
//!
//! Plain Rust over `serde_json` only, so it builds for the host and for `wasm32-wasip2`.
//! May depend on: serde_json.

use serde_json::{Number, Value};

/// How numbers that are not integers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbers {
    /// As Java's `BigDecimal.toPlainString`: plain decimal notation (`1e20` is
    /// `100000000000000000000`, `1e-7` is `0.0000001`).
    BigDecimal,
    /// As Java's `Double.toString`: `5.0`, `0.3`, `1.0E20`, `1.0E-4`.
    Double,
}

/// What happens to object members whose value is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// Written (`"a" : null`), as Jackson writes a tree.
    Keep,
    /// Left out, as WireMock's mapper (`NON_NULL`) writes a Java map.
    Skip,
}

/// Jackson's default pretty printer, with the number and null habits of what is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pretty {
    pub numbers: Numbers,
    pub nulls: Nulls,
}

impl Pretty {
    /// WireMock's `Json.prettyPrint` of JSON text: a tree with `BigDecimal` floats.
    pub const TREE: Pretty = Pretty {
        numbers: Numbers::BigDecimal,
        nulls: Nulls::Keep,
    };
    /// WireMock's `Json.write` of Java objects: `Double` floats, null members left out.
    pub const OBJECT: Pretty = Pretty {
        numbers: Numbers::Double,
        nulls: Nulls::Skip,
    };

    /// `v` pretty-printed.
    pub fn print(self, v: &Value) -> String {
        let mut out = String::new();
        self.print_into(v, 0, &mut out);
        out
    }

    fn print_into(self, v: &Value, level: usize, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut members = m
                    .iter()
                    .filter(|(_, x)| self.nulls == Nulls::Keep || !x.is_null())
                    .peekable();
                if members.peek().is_none() {
                    out.push_str("{ }");
                    return;
                }
                out.push('{');
                for (i, (k, x)) in members.enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('\n');
                    indent(level + 1, out);
                    quote_into(k, false, out);
                    out.push_str(" : ");
                    self.print_into(x, level + 1, out);
                }
                out.push('\n');
                indent(level, out);
                out.push('}');
            }
            Value::Array(a) if a.is_empty() => out.push_str("[ ]"),
            Value::Array(a) => {
                out.push_str("[ ");
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.print_into(x, level, out);
                }
                out.push_str(" ]");
            }
            Value::String(s) => quote_into(s, false, out),
            Value::Number(n) => out.push_str(&number(n, self.numbers)),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Null => out.push_str("null"),
        }
    }
}

fn indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// A JSON number's text: integers as they are, other numbers as `numbers` says.
pub fn number(n: &Number, numbers: Numbers) -> String {
    match (n.as_f64(), numbers) {
        (Some(f), Numbers::Double) if n.is_f64() => java_double(f),
        (_, Numbers::BigDecimal) if n.is_f64() => big_decimal_plain(&n.to_string()),
        _ => n.to_string(),
    }
}

/// Java's `BigDecimal.toPlainString` of a decimal number's text (`1.5e3` is `1500`,
/// `-2.5E-3` is `-0.0025`); text without an exponent is returned as it is.
fn big_decimal_plain(text: &str) -> String {
    let Some((mantissa, exp)) = text.split_once(['e', 'E']) else {
        return text.to_owned();
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return text.to_owned();
    };
    let negative = mantissa.starts_with('-');
    let digits_part = mantissa.trim_start_matches('-');
    let (int, frac) = digits_part.split_once('.').unwrap_or((digits_part, ""));
    let digits = format!("{int}{frac}");
    let point = int.len() as i32 + exp;
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-point) as usize));
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        out.push_str(&"0".repeat(point as usize - digits.len()));
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    out
}

/// Java's `Double.toString`: plain from 10⁻³ up to 10⁷ (always with a fraction,
/// `5.0`), scientific outside (`1.0E20`, `1.0E-4`).
pub fn java_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = f.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{f}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.to_owned()
        } else {
            format!("{m}.0")
        };
        format!("{m}E{e}")
    }
}

/// `s` as a JSON string, escaped as Jackson escapes it: `"` and `\`, the short forms
/// of `\b \t \n \f \r`, other control characters as `\u00XX` (upper-case hex), and
/// nothing else. `escape_slash` also writes `/` as `\/`, as json-smart does.
pub fn quote_into(s: &str, escape_slash: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if escape_slash => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xF] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("test JSON parses")
    }

    #[test]
    fn objects_put_each_member_on_its_own_line_and_arrays_stay_on_one() {
        let v = parse(r#"{"a":1,"b":[1,2],"c":{"d":"x"},"e":{},"f":[],"g":true}"#);
        assert_eq!(
            Pretty::TREE.print(&v),
            "{\n  \"a\" : 1,\n  \"b\" : [ 1, 2 ],\n  \"c\" : {\n    \"d\" : \"x\"\n  },\n  \"e\" : { },\n  \"f\" : [ ],\n  \"g\" : true\n}"
        );
    }

    #[test]
    fn objects_inside_arrays_indent_from_the_arrays_level() {
        let v = parse(r#"{"list":[{"id":1},{"id":2}]}"#);
        assert_eq!(
            Pretty::TREE.print(&v),
            "{\n  \"list\" : [ {\n    \"id\" : 1\n  }, {\n    \"id\" : 2\n  } ]\n}"
        );
        assert_eq!(Pretty::TREE.print(&json!([])), "[ ]");
        assert_eq!(Pretty::TREE.print(&json!({})), "{ }");
    }

    #[test]
    fn a_tree_keeps_null_members_and_java_objects_leave_them_out() {
        let v = parse(r#"{"a":null,"b":1,"c":[null]}"#);
        assert_eq!(
            Pretty::TREE.print(&v),
            "{\n  \"a\" : null,\n  \"b\" : 1,\n  \"c\" : [ null ]\n}"
        );
        assert_eq!(
            Pretty::OBJECT.print(&v),
            "{\n  \"b\" : 1,\n  \"c\" : [ null ]\n}"
        );
        assert_eq!(Pretty::OBJECT.print(&parse(r#"{"a":null}"#)), "{ }");
    }

    #[test]
    fn a_trees_floats_are_plain_big_decimals_and_java_objects_floats_are_doubles() {
        let v = parse(r#"[1e20,-2.5E-3,1e-7,0.0001,5.0,0.3,42,-7]"#);
        assert_eq!(
            Pretty::TREE.print(&v),
            "[ 100000000000000000000, -0.0025, 0.0000001, 0.0001, 5.0, 0.3, 42, -7 ]"
        );
        assert_eq!(
            Pretty::OBJECT.print(&v),
            "[ 1.0E20, -0.0025, 1.0E-7, 1.0E-4, 5.0, 0.3, 42, -7 ]"
        );
    }

    #[test]
    fn java_double_follows_double_to_string() {
        assert_eq!(java_double(1e20), "1.0E20");
        assert_eq!(java_double(1.25e-5), "1.25E-5");
        assert_eq!(java_double(0.3), "0.3");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(9_999_999.0), "9999999.0");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(-2.0), "-2.0");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        let v = json!({"k\"ey": "a\\b\n\t\r\u{8}\u{c}\u{1}\u{1f}/é"});
        assert_eq!(
            Pretty::TREE.print(&v),
            "{\n  \"k\\\"ey\" : \"a\\\\b\\n\\t\\r\\b\\f\\u0001\\u001F/é\"\n}"
        );
        let mut out = String::new();
        quote_into("a/b", true, &mut out);
        assert_eq!(out, "\"a\\/b\"");
    }
}
