//! The helpers whose values come from outside their arguments or go into the
//! template's variables: random values (`randomValue`, `randomInt`,
//! `randomDecimal`), dates (`now`, `date`, `parseDate`, `dateFormat`, over
//! [`crate::dates`]), a form body's fields (`formData`), `neq`, variables (`val`,
//! `assign`) and the system (`hostname`, `systemValue`).

use rand::RngExt as _;
use serde_json::{Map, Value, json};

use super::print::to_text;
use super::{arg, error, int, is_true, java_first_values, number, opt_text, set_var, text, truthy};
use crate::dates;

/// WireMock's `randomValue`: `length` characters (36 by default) of `type`'s set,
/// then lower-cased, or upper-cased with `uppercase=true` (a UUID too). A `type`
/// WireMock does not define (`'number'`, `'string'`, a lower-case `'numeric'`) is
/// printable ASCII, space to `~`, as WireMock's fallback; `ALPHANUMERIC_AND_SYMBOLS`
/// is `!` to `}` (checked against 3.13.2).
pub(super) fn random_value(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    const LETTERS_DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let kind = opt_text(h, "type").unwrap_or_else(|| "ALPHANUMERIC".into());
    let s = if kind == "UUID" {
        uuid::Uuid::new_v4().to_string()
    } else {
        let length = match h.get("length") {
            Some(v) => int(v)?,
            None => 36,
        };
        if !(0..=100_000).contains(&length) {
            return Err(format!("length {length} is out of range"));
        }
        let ascii = |from: u8, to: u8| (from..=to).collect::<Vec<u8>>();
        let alphabet: std::borrow::Cow<'static, [u8]> = match kind.as_str() {
            "ALPHANUMERIC" => LETTERS_DIGITS.into(),
            "ALPHABETIC" => LETTERS_DIGITS[..52].into(),
            "NUMERIC" => b"0123456789".as_slice().into(),
            "HEXADECIMAL" => b"ABCDEF0123456789".as_slice().into(),
            "ALPHANUMERIC_AND_SYMBOLS" => ascii(b'!', b'}').into(),
            _ => ascii(b' ', b'~').into(),
        };
        let mut rng = rand::rng();
        (0..length)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
            .collect()
    };
    Ok(Value::String(if truthy(h.get("uppercase")) {
        s.to_uppercase()
    } else {
        s.to_lowercase()
    }))
}

pub(super) fn random_int(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let lower = h
        .get("lower")
        .map(int)
        .transpose()?
        .unwrap_or(i64::from(i32::MIN));
    let upper = h
        .get("upper")
        .map(int)
        .transpose()?
        .unwrap_or(i64::from(i32::MAX));
    if lower > upper {
        return Err(format!("lower {lower} is above upper {upper}"));
    }
    Ok(json!(rand::rng().random_range(lower..=upper)))
}

pub(super) fn random_decimal(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let lower = h
        .get("lower")
        .map(number)
        .transpose()?
        .unwrap_or(f64::MIN / 2.0);
    let upper = h
        .get("upper")
        .map(number)
        .transpose()?
        .unwrap_or(f64::MAX / 2.0);
    if lower > upper {
        return Err(format!("lower {lower} is above upper {upper}"));
    }
    let f = rand::rng().random_range(lower..=upper);
    Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
}

pub(super) fn now(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    dates::render(chrono::Utc::now(), &date_style(h))
}

pub(super) fn date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let d = dates::parse_value(arg(p, 0)?, None)?;
    dates::render(d, &date_style(h))
}

pub(super) fn parse_date(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let format = opt_text(h, "format");
    let d = dates::parse_value(arg(p, 0)?, format.as_deref())?;
    Ok(Value::String(dates::iso(d)))
}

pub(super) fn date_format(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let d = dates::parse_value(arg(p, 0)?, None)?;
    let mut style = date_style(h);
    if let Some(f) = p.get(1) {
        style.format = Some(to_text(f));
    }
    match style.format.as_deref() {
        None | Some("medium") => style.format = Some("MMM d, yyyy, h:mm:ss a".into()),
        Some("short") => style.format = Some("M/d/yy, h:mm a".into()),
        _ => {}
    }
    dates::render(d, &style)
}

/// The `offset`, `timezone` and `format` of a date helper's hash, as text (a
/// missing or null one is `None`).
fn date_style(h: &Map<String, Value>) -> dates::Style {
    let text = |key| h.get(key).filter(|v| !v.is_null()).map(to_text);
    dates::Style {
        offset: text("offset"),
        timezone: text("timezone"),
        format: text("format"),
    }
}

/// `formData`: an `application/x-www-form-urlencoded` body as fields (each a list,
/// written as its first value).
pub(super) fn form_data(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let body = text(p, 0)?;
    let decode = is_true(h.get("urlDecode"));
    let mut fields: Map<String, Value> = Map::new();
    for pair in body.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let dec = |s: &str| {
            if decode {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            } else {
                s.to_owned()
            }
        };
        let k = dec(k.trim());
        if let Value::Array(a) = fields.entry(k).or_insert_with(|| json!([])) {
            a.push(Value::String(dec(v.trim())));
        }
    }
    let fields = Value::Object(fields);
    match p.get(1) {
        Some(name) => {
            set_var(&to_text(name), fields, true);
            Ok(Value::Null)
        }
        None => Ok(Value::String(java_first_values(&fields))),
    }
}

/// Handlebars.java's `neq`.
pub(super) fn neq(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let a = p.first().unwrap_or(&Value::Null);
    let b = p.get(1).unwrap_or(&Value::Null);
    Ok(Value::Bool(a != b))
}

pub(super) fn val(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let v = match p.first() {
        Some(v) if !v.is_null() => v.clone(),
        _ => h
            .get("or")
            .filter(|v| !v.is_null())
            .or_else(|| h.get("default"))
            .cloned()
            .unwrap_or(Value::Null),
    };
    match h.get("assign").filter(|v| !v.is_null()) {
        Some(name) => {
            set_var(&to_text(name), v, false);
            Ok(Value::Null)
        }
        None => Ok(v),
    }
}

pub(super) fn assign(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let name = text(p, 0)?;
    let value = text(p, 1).unwrap_or_default();
    set_var(&name, Value::String(value.trim().to_owned()), false);
    Ok(Value::Null)
}

/// The machine's name, as WireMock's helper writes it; decoy looks it up (once)
/// the way Java's `InetAddress.getLocalHost().getHostName()` does.
pub(super) fn hostname(_: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(decoy_plugin::request_info::hostname()))
}

/// WireMock permits no system key unless it is configured to; neither does this.
pub(super) fn system_value(_: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    match opt_text(h, "key").filter(|k| !k.is_empty()) {
        None => error("The key cannot be empty"),
        Some(k) => error(format!("Access to {k} is denied")),
    }
}
