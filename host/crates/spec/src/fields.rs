//! Reading a JSON mapping with a path to every field, so an error can say exactly where.
//!
//! Mapping files are parsed in two steps: `serde_json` turns the text into a `Value`
//! (and reports line and column when it is not JSON), then the code in this module and
//! its callers walk the `Value` by hand. Walking by hand, rather than deriving
//! `Deserialize`, is what lets a message name the JSON path of the offending field, list
//! the alternatives that would be accepted, and treat unknown keys as warnings.

use serde_json::{Map, Value};

/// One problem in one field of a mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, such as `request.headers.Accept.equalTo`.
    pub path: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

pub type FieldResult<T> = Result<T, FieldError>;

/// Looking up a field of a parsed JSON object by name, without hashing the name.
///
/// `serde_json`'s ordered map hashes the name with SipHash on every `get`. A stub's
/// objects hold a handful of fields, and parsing asks for every field it knows, most
/// of them absent: about sixty questions per stub. Comparing the few names present,
/// in order, answers the same for a fraction of the cost; a large object (a JSON
/// body, a long header list) still goes through the hash table. Measured on a root
/// of 10,000 stubs, see docs/performance.md.
pub trait Fields {
    /// The field `key`, as `serde_json`'s `get` would find it.
    fn field(&self, key: &str) -> Option<&Value>;

    /// Whether the field `key` is present (even as `null`).
    fn has_field(&self, key: &str) -> bool {
        self.field(key).is_some()
    }
}

/// Objects up to this many fields are searched in order rather than hashed: below it
/// a few length checks cost less than one SipHash of the name.
const SCAN_MAX: usize = 16;

impl Fields for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        if self.len() <= SCAN_MAX {
            // A JSON object's names are unique once parsed (the last duplicate wins,
            // in the first one's place), so the first equal name is the one `get` finds.
            self.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
        } else {
            self.get(key)
        }
    }
}

impl Fields for Value {
    /// `None` for anything but an object, as `Value::get` answers.
    fn field(&self, key: &str) -> Option<&Value> {
        self.as_object()?.field(key)
    }
}

/// `parent.child`, or `child` at the root.
pub fn join(parent: &str, child: &str) -> String {
    // Built by hand rather than with `format!`: every field of every stub gets its
    // path this way while a root loads, and the formatting machinery was a tenth of
    // the load's instructions.
    if parent.is_empty() {
        return child.to_owned();
    }
    let mut out = String::with_capacity(parent.len() + 1 + child.len());
    out.push_str(parent);
    out.push('.');
    out.push_str(child);
    out
}

pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub fn as_object<'a>(v: &'a Value, path: &str) -> FieldResult<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| FieldError::new(path, format!("expected an object, found {}", kind(v))))
}

pub fn as_array<'a>(v: &'a Value, path: &str) -> FieldResult<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| FieldError::new(path, format!("expected an array, found {}", kind(v))))
}

pub fn as_str<'a>(v: &'a Value, path: &str) -> FieldResult<&'a str> {
    v.as_str()
        .ok_or_else(|| FieldError::new(path, format!("expected a string, found {}", kind(v))))
}

pub fn as_bool(v: &Value, path: &str) -> FieldResult<bool> {
    v.as_bool()
        .ok_or_else(|| FieldError::new(path, format!("expected true or false, found {}", kind(v))))
}

/// A non-negative integer; WireMock files sometimes quote numbers, so `"100"` is accepted.
pub fn as_u64(v: &Value, path: &str) -> FieldResult<u64> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        FieldError::new(
            path,
            format!("expected a non-negative whole number, found {}", show(v)),
        )
    })
}

pub fn as_i64(v: &Value, path: &str) -> FieldResult<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| FieldError::new(path, format!("expected a whole number, found {}", show(v))))
}

pub fn as_f64(v: &Value, path: &str) -> FieldResult<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|f: &f64| f.is_finite())
    .ok_or_else(|| FieldError::new(path, format!("expected a number, found {}", show(v))))
}

/// A short rendering of a value for messages.
pub fn show(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// "did you mean" for a misspelt key, from a list of accepted ones.
pub fn suggest(unknown: &str, accepted: &[&str]) -> String {
    let best = accepted
        .iter()
        .map(|a| {
            (
                strsim::jaro_winkler(&unknown.to_ascii_lowercase(), &a.to_ascii_lowercase()),
                a,
            )
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, a)) => format!("did you mean \"{a}\"?"),
        None => format!("accepted: {}", accepted.join(", ")),
    }
}

/// Reports keys of `obj` that are in neither `known` nor `ignored` as warnings.
pub fn warn_unknown(
    obj: &Map<String, Value>,
    path: &str,
    known: &[&str],
    ignored: &[&str],
    warnings: &mut Vec<FieldError>,
) {
    for key in obj.keys() {
        if !known.contains(&key.as_str()) && !ignored.contains(&key.as_str()) {
            warnings.push(FieldError::new(
                join(path, key),
                format!("unknown field, ignored ({})", suggest(key, known)),
            ));
        }
    }
}
