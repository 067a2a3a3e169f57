//! The JSON helpers: `jsonPath` (Jayway's paths and functions, over
//! `serde_json_path`), `parseJson`, `toJson`, `formatJson`, `jsonMerge`,
//! `jsonRemove` and `jsonArrayAdd`.

use serde_json::{Map, Value, json};

use super::print::{jackson_pretty, to_text};
use super::{arg, error, format_option, is_true, set_var};

/// Jayway's functions, at the end of a path: `$.items.length()`.
const PATH_FUNCTIONS: &[&str] = &[
    "length", "size", "min", "max", "sum", "avg", "stddev", "first", "last", "keys",
];

pub(super) fn json_path(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let input = arg(p, 0).unwrap_or(&Value::Null);
    if input.is_null() || input.as_str() == Some("") {
        return Ok(Value::String(String::new()));
    }
    let Some(path) = p.get(1).filter(|v| !v.is_null()).map(to_text) else {
        return error("The JSONPath cannot be empty");
    };
    let default = h.get("default").cloned();
    let doc = match input {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(d) => d,
            // json-smart, which WireMock's JSONPath reads with, takes text that does
            // not open an object or a list as a plain string.
            Err(_) if !s.trim_start().starts_with(['{', '[']) => Value::String(s.clone()),
            Err(_) => return error(format!("{s} is not valid JSON")),
        },
        other => other.clone(),
    };
    let mut expr = path.trim().to_owned();
    if !expr.starts_with('$') {
        expr = format!("$.{}", expr.trim_start_matches('.'));
    }
    let mut function = None;
    if let Some(base) = expr.strip_suffix("()")
        && let Some((head, name)) = base.rsplit_once('.')
        && PATH_FUNCTIONS.contains(&name)
    {
        function = Some(name.to_owned());
        expr = head.to_owned();
    }
    // Jayway's operators RFC 9535 lacks become function calls and `match()`, as in
    // decoy's matchers (`[?(@.size in ['S', 'M'])]`, `[?(@.name =~ /a.*/i)]`); a regex
    // the `regex` crate cannot run is a bad path, as a regex Java cannot compile is
    // in WireMock.
    let expr = match decoy_jsonpath::rewrite(&expr) {
        Ok(r)
            if r.regexes
                .iter()
                .all(|re| regex::Regex::new(&format!("(?R)^({re})$")).is_ok()) =>
        {
            r.expression
        }
        _ => return error(format!("{path} is not a valid JSONPath expression")),
    };
    let Ok(jp) = serde_json_path::JsonPath::parse(&expr) else {
        return error(format!("{path} is not a valid JSONPath expression"));
    };
    let found = jp.query(&doc).all();
    let indefinite = expr.contains("[*]")
        || expr.contains("..")
        || expr.contains("[?")
        || expr.contains(':')
        || expr.contains(',')
        || expr.contains(".*");
    let value = if indefinite {
        Some(Value::Array(found.into_iter().cloned().collect()))
    } else {
        found.first().map(|v| (*v).clone())
    };
    let value = match (function.as_deref(), value) {
        (Some(f), Some(v)) => path_function(f, &v),
        (None, v) => v,
        (Some(_), None) => None,
    };
    Ok(match value {
        Some(Value::Null) | None => default.unwrap_or_else(|| Value::String(String::new())),
        Some(v) => v,
    })
}

fn path_function(f: &str, v: &Value) -> Option<Value> {
    let nums = || -> Option<Vec<f64>> {
        match v {
            Value::Array(a) if !a.is_empty() => a.iter().map(Value::as_f64).collect(),
            _ => None,
        }
    };
    let double = |x: f64| serde_json::Number::from_f64(x).map(Value::Number);
    match f {
        "length" | "size" => match v {
            Value::Array(a) => Some(json!(a.len())),
            Value::Object(o) => Some(json!(o.len())),
            _ => None,
        },
        "min" => double(nums()?.into_iter().fold(f64::INFINITY, f64::min)),
        "max" => double(nums()?.into_iter().fold(f64::NEG_INFINITY, f64::max)),
        "sum" => double(nums()?.into_iter().sum()),
        "avg" => {
            let n = nums()?;
            double(n.iter().sum::<f64>() / n.len() as f64)
        }
        "stddev" => {
            let n = nums()?;
            let len = n.len() as f64;
            let mean = n.iter().sum::<f64>() / len;
            let var = n.iter().map(|x| x * x).sum::<f64>() / len - mean * mean;
            double(var.sqrt())
        }
        "first" => v.as_array().and_then(|a| a.first().cloned()),
        "last" => v.as_array().and_then(|a| a.last().cloned()),
        "keys" => v
            .as_object()
            .map(|o| Value::Array(o.keys().map(|k| json!(k)).collect())),
        _ => None,
    }
}

pub(super) fn parse_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let Some(input) = p.first() else {
        return error("Missing required JSON string parameter");
    };
    if input.is_null() {
        return Ok(json!({}));
    }
    let text = to_text(input);
    let text = text.trim();
    let result = if text
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        == "{}"
        || text.is_empty()
    {
        json!({})
    } else {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if !(v.is_object() || v.is_array()) {
            return Err(format!("{text} is not a JSON object"));
        }
        v
    };
    match p.get(1) {
        Some(name) => {
            set_var(&to_text(name), result, false);
            Ok(Value::Null)
        }
        None => Ok(result),
    }
}

pub(super) fn to_json(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(match p.first() {
        None | Some(Value::Null) => String::new(),
        Some(v) => jackson_pretty(v),
    }))
}

pub(super) fn format_json(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let (body, pretty) = match format_option("formatJson", "JSON", p, h) {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("not JSON: {e}"))?;
    Ok(Value::String(if pretty {
        decoy_jsonfmt::Pretty::TREE.print(&v)
    } else {
        v.to_string()
    }))
}

pub(super) fn json_merge(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(base_text)) = p.first() else {
        return error("Base JSON parameter must be a string");
    };
    let Ok(mut base) = serde_json::from_str::<Value>(base_text) else {
        return error(format!("Base JSON is not valid JSON ('{base_text}')"));
    };
    if !base.is_object() {
        return error(format!("Base JSON is not a JSON object ('{base_text}')"));
    }
    let Some(Value::String(other_text)) = p.get(1) else {
        return error("JSON to merge must be a string");
    };
    let Ok(other) = serde_json::from_str::<Value>(other_text) else {
        return error(format!("JSON to merge is not valid JSON ('{other_text}')"));
    };
    if !other.is_object() {
        return error(format!(
            "JSON to merge is not a JSON object ('{other_text}')"
        ));
    }
    fn merge(base: &mut Map<String, Value>, other: &Map<String, Value>, remove_nulls: bool) {
        for (k, v) in other {
            match (base.get_mut(k), v) {
                (Some(Value::Object(b)), Value::Object(o)) => merge(b, o, remove_nulls),
                (_, Value::Null) if remove_nulls => {
                    base.shift_remove(k);
                }
                _ => {
                    base.insert(k.clone(), v.clone());
                }
            }
        }
    }
    if let (Value::Object(b), Value::Object(o)) = (&mut base, &other) {
        merge(b, o, is_true(h.get("removeNulls")));
    }
    Ok(Value::String(base.to_string()))
}

pub(super) fn json_remove(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(input)) = p.first() else {
        return error("Input JSON must be a string");
    };
    if input == "null" {
        return Ok(Value::String(input.clone()));
    }
    if p.len() != 2 {
        return error("A single JSONPath expression parameter must be supplied");
    }
    let Value::String(path) = &p[1] else {
        return error("JSONPath parameter must be a string");
    };
    let Ok(mut doc) = serde_json::from_str::<Value>(input) else {
        return error(format!("Input JSON string is not valid JSON ('{input}')"));
    };
    let bad = || {
        error(format!(
            "JSONPath parameter is not a valid JSONPath expression ('{path}')"
        ))
    };
    let Ok(jp) = serde_json_path::JsonPath::parse(path) else {
        return bad();
    };
    let pointers: Vec<String> = jp
        .query_located(&doc)
        .locations()
        .map(|l| l.to_json_pointer())
        .collect();
    if pointers.iter().any(String::is_empty) {
        return error(format!(
            "Delete operation cannot be applied to JSONPath expression ('{path}')"
        ));
    }
    // Last first, so earlier pointers into the same list stay right.
    for ptr in pointers.iter().rev() {
        let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
        let key = key.replace("~1", "/").replace("~0", "~");
        match doc.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.shift_remove(&key);
            }
            Some(Value::Array(a)) => {
                if let Ok(i) = key.parse::<usize>()
                    && i < a.len()
                {
                    a.remove(i);
                }
            }
            _ => {}
        }
    }
    Ok(Value::String(doc.to_string()))
}

pub(super) fn json_array_add(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let Some(Value::String(input)) = p.first() else {
        return error("Base JSON must be a string");
    };
    let Ok(mut root) = serde_json::from_str::<Value>(input) else {
        return error(format!("Base JSON is not valid JSON ('{input}')"));
    };
    let path = match h.get("jsonPath") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return error("jsonPath option must be a string"),
    };
    let pointer = match &path {
        None => Some(String::new()),
        Some(s) => {
            let Ok(jp) = serde_json_path::JsonPath::parse(s) else {
                return error(format!(
                    "jsonPath option is not valid JSONPath expression ('{s}')"
                ));
            };
            jp.query_located(&root)
                .locations()
                .next()
                .map(|l| l.to_json_pointer())
        }
    };
    let target_ok = pointer
        .as_deref()
        .and_then(|ptr| root.pointer(ptr))
        .is_some_and(Value::is_array);
    if !target_ok {
        let detail = match &path {
            None => format!("'{input}'"),
            Some(s) => format!("root: '{input}', jsonPath: '{s}'"),
        };
        return error(format!("Target JSON is not a JSON array ({detail})"));
    }
    let Some(Value::String(item)) = p.get(1) else {
        return error("Item-to-add JSON must be a string");
    };
    let Ok(item_value) = serde_json::from_str::<Value>(item) else {
        return error(format!("Item-to-add JSON is not valid JSON ('{item}')"));
    };
    let flatten = match h.get("flatten") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return error("flatten option must be a boolean"),
    };
    let max_items = match h.get("maxItems") {
        None => None,
        Some(Value::Number(n)) if n.is_i64() => {
            let m = n.as_i64().unwrap_or_default();
            if m < 0 {
                return error("maxItems option integer must be positive");
            }
            Some(m as usize)
        }
        Some(_) => return error("maxItems option must be an integer"),
    };
    if let Some(Value::Array(list)) = pointer.as_deref().and_then(|ptr| root.pointer_mut(ptr)) {
        match item_value {
            Value::Array(items) if flatten => list.extend(items),
            v => list.push(v),
        }
        if let Some(m) = max_items
            && list.len() > m
        {
            list.drain(..list.len() - m);
        }
    }
    Ok(Value::String(root.to_string()))
}
