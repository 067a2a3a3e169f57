//! The number and list helpers: `math` (on decimals, as Java's `BigDecimal`),
//! `size`, `array`, `arrayAdd`, `arrayRemove`, `range`, `join`, `arrayJoin`,
//! `contains`, `isEven`, `isOdd`, `stripes` and `pickRandom`.

use rand::RngExt as _;
use serde_json::{Map, Value, json};

use super::print::{java_string, number_text, to_text};
use super::{arg, coerce_int, error, int, opt_text, text};

/// A decimal number as Java's `BigDecimal`: digits and a scale.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    digits: i128,
    scale: u32,
}

impl Decimal {
    fn parse(s: &str) -> Option<Decimal> {
        let s = s.trim();
        let (mantissa, exp) = match s.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i32>().ok()?),
            None => (s, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.trim_start_matches(['-', '+']).is_empty() && frac.is_empty() {
            return None;
        }
        if !frac.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits: i128 = format!("{int}{frac}").parse().ok()?;
        let scale = frac.len() as i32 - exp;
        if scale < 0 {
            Some(Decimal {
                digits: digits.checked_mul(10i128.checked_pow((-scale) as u32)?)?,
                scale: 0,
            })
        } else {
            Some(Decimal {
                digits,
                scale: scale as u32,
            })
        }
    }

    /// WireMock's `coerceToBigDecimal`: a number, else its text, else 0.
    fn of(v: &Value) -> Decimal {
        let text = match v {
            Value::Number(n) => number_text(n),
            other => to_text(other),
        };
        Decimal::parse(&text).unwrap_or(Decimal {
            digits: 0,
            scale: 0,
        })
    }

    fn rescale(self, scale: u32) -> Option<i128> {
        self.digits
            .checked_mul(10i128.checked_pow(scale - self.scale)?)
    }

    fn value(self) -> Value {
        if self.scale == 0 {
            return json!(self.digits as i64);
        }
        let f = self.digits as f64 / 10f64.powi(self.scale as i32);
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

pub(super) fn math(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() != 3 {
        return error(
            "All maths functions require two operands and an operator as parameters e.g. 3 '+' 2",
        );
    }
    let (a, op, b) = (Decimal::of(&p[0]), to_text(&p[1]), Decimal::of(&p[2]));
    let overflow = || "the result is out of range".to_owned();
    let scale = a.scale.max(b.scale);
    let r = match op.as_str() {
        "+" | "-" => {
            let (x, y) = (
                a.rescale(scale).ok_or_else(overflow)?,
                b.rescale(scale).ok_or_else(overflow)?,
            );
            let digits = if op == "+" {
                x.checked_add(y)
            } else {
                x.checked_sub(y)
            };
            Decimal {
                digits: digits.ok_or_else(overflow)?,
                scale,
            }
        }
        "*" | "x" => Decimal {
            digits: a.digits.checked_mul(b.digits).ok_or_else(overflow)?,
            scale: a.scale + b.scale,
        },
        "/" => {
            if b.digits == 0 {
                return Err("/ by zero".into());
            }
            // BigDecimal.divide(right, HALF_UP): the left operand's scale.
            let num = a
                .digits
                .checked_mul(10i128.checked_pow(b.scale).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            let (q, rem) = (num / b.digits, num % b.digits);
            let q = if rem.abs() * 2 >= b.digits.abs() {
                q + if (num < 0) != (b.digits < 0) { -1 } else { 1 }
            } else {
                q
            };
            Decimal {
                digits: q,
                scale: a.scale,
            }
        }
        "%" => {
            if b.digits == 0 {
                return Err("Division by zero".into());
            }
            let (x, y) = (
                a.rescale(scale).ok_or_else(overflow)?,
                b.rescale(scale).ok_or_else(overflow)?,
            );
            Decimal {
                digits: x % y,
                scale,
            }
        }
        _ => return error(format!("{op} is not a valid mathematical operator")),
    };
    Ok(r.value())
}

pub(super) fn size(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(match p.first() {
        Some(Value::String(s)) => json!(s.encode_utf16().count()),
        Some(Value::Array(a)) => json!(a.len()),
        Some(Value::Object(o)) => json!(o.len()),
        Some(Value::Null) | None => return Err("null has no size".into()),
        _ => Value::Null,
    })
}

pub(super) fn array(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::Array(p.to_vec()))
}

/// `position=` of `arrayAdd`/`arrayRemove`: `Ok(None)` is the end.
fn position(h: &Map<String, Value>) -> Result<Option<i64>, ()> {
    match h.get("position") {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or(()),
        Some(v) => {
            let s = to_text(v);
            if s.eq_ignore_ascii_case("start") {
                Ok(Some(0))
            } else if s.eq_ignore_ascii_case("end") {
                Ok(None)
            } else {
                s.parse::<i32>().map(|i| Some(i64::from(i))).map_err(|_| ())
            }
        }
    }
}

const POSITION_RANGE: &str =
    "position must be greater than or equal to 0 and less than or equal to the size of the list";

fn list_arg(v: Option<&Value>) -> Result<Vec<Value>, String> {
    match v {
        Some(Value::Array(a)) => Ok(a.clone()),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(other) => Err(format!("{} is not a list", to_text(other))),
    }
}

pub(super) fn array_add(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    if p.first().is_none_or(Value::is_null) {
        return Ok(json!([]));
    }
    let mut list = list_arg(p.first())?;
    let Some(item) = p.get(1) else {
        return error("Missing required parameter: additional value to add to list");
    };
    match position(h) {
        Err(()) => error("position must be 'start', 'end' or an integer"),
        Ok(None) => {
            list.push(item.clone());
            Ok(Value::Array(list))
        }
        Ok(Some(i)) if i < 0 || i as usize > list.len() => error(POSITION_RANGE),
        Ok(Some(i)) => {
            list.insert(i as usize, item.clone());
            Ok(Value::Array(list))
        }
    }
}

pub(super) fn array_remove(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let mut list = list_arg(p.first())?;
    let at = match position(h) {
        Err(()) => return error("position must be 'start', 'end' or an integer"),
        Ok(Some(i)) if i < 0 || i as usize > list.len() => return error(POSITION_RANGE),
        Ok(Some(i)) => i as usize,
        Ok(None) => list.len().wrapping_sub(1),
    };
    if at >= list.len() {
        return Err(format!(
            "Index {at} out of bounds for length {}",
            list.len()
        ));
    }
    list.remove(at);
    Ok(Value::Array(list))
}

pub(super) fn range(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let lower = p.first().map(coerce_int).transpose()?.flatten();
    let upper = p.get(1).map(coerce_int).transpose()?.flatten();
    let (Some(a), Some(b)) = (lower, upper) else {
        return error(
            "The range helper requires both lower and upper bounds as integer parameters",
        );
    };
    if b < a - 1 {
        return Err(format!("{}", b - a + 1));
    }
    if b - a > 100_000 {
        return Err("a range of more than 100,000 numbers".into());
    }
    Ok(Value::Array((a..=b).map(|i| json!(i)).collect()))
}

/// Handlebars.java's `join`: the last argument is the separator; lists are joined
/// item by item.
pub(super) fn join(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some((sep, items)) = p.split_last() else {
        return Ok(Value::String(String::new()));
    };
    if items.is_empty() {
        return Ok(Value::String(to_text(sep)));
    }
    let mut parts = Vec::new();
    for i in items {
        match i {
            Value::Array(a) => parts.extend(a.iter().map(to_text)),
            other => parts.push(to_text(other)),
        }
    }
    let joined = parts.join(&to_text(sep));
    let prefix = opt_text(h, "prefix").unwrap_or_default();
    let suffix = opt_text(h, "suffix").unwrap_or_default();
    Ok(Value::String(format!("{prefix}{joined}{suffix}")))
}

pub(super) fn array_join(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(sep)) = p.first() else {
        return error("Separator parameter must be a String");
    };
    let items: Vec<Value> = match p.get(1) {
        None | Some(Value::Null) => return error("The parameter must be list"),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => p[1..].to_vec(),
    };
    if items.is_empty() {
        return Ok(Value::String(String::new()));
    }
    let prefix = opt_text(h, "prefix").unwrap_or_default();
    let suffix = opt_text(h, "suffix").unwrap_or_default();
    let joined: Vec<String> = items.iter().map(java_string).collect();
    Ok(Value::String(format!(
        "{prefix}{}{suffix}",
        joined.join(sep)
    )))
}

pub(super) fn contains(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() < 2 {
        return error(
            "You must specify the string or array to be matched and the regular expression",
        );
    }
    let needle = match &p[1] {
        Value::Null => return Ok(Value::Bool(false)),
        Value::String(s) => s.clone(),
        other => {
            return Err(format!(
                "class of {} cannot be cast to class java.lang.String",
                to_text(other)
            ));
        }
    };
    Ok(Value::Bool(match &p[0] {
        Value::Null => false,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(needle.as_str())),
        other => to_text(other).contains(&needle),
    }))
}

fn parity(p: &[Value], even: bool, word: &str) -> Result<Value, String> {
    let n = int(arg(p, 0)?)?;
    Ok(Value::String(if (n % 2 == 0) == even {
        p.get(1).map_or_else(|| word.to_owned(), to_text)
    } else {
        String::new()
    }))
}

pub(super) fn is_even(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    parity(p, true, "even")
}

pub(super) fn is_odd(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    parity(p, false, "odd")
}

pub(super) fn stripes(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let n = int(arg(p, 0)?)?;
    Ok(Value::String(if n % 2 == 0 {
        text(p, 1)?
    } else {
        text(p, 2)?
    }))
}

pub(super) fn pick_random(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let mut items: Vec<Value> = match p {
        [] | [Value::Null, ..] => {
            return error(
                "Must specify either a single list argument or a set of single value arguments.",
            );
        }
        [Value::Array(a), ..] => a.clone(),
        other => other.to_vec(),
    };
    if items.is_empty() {
        return Err("bound must be positive".into());
    }
    let mut rng = rand::rng();
    if let Some(count) = h.get("count").and_then(Value::as_i64).filter(|c| *c > 0) {
        let n = items.len().min(count as usize);
        for i in 0..n {
            let j = rng.random_range(i..items.len());
            items.swap(i, j);
        }
        items.truncate(n);
        return Ok(Value::Array(items));
    }
    Ok(items[rng.random_range(0..items.len())].clone())
}
