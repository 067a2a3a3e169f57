//! What every recorder decides the same way, whatever it records (HTTP exchanges,
//! MQ request and reply messages): which body pattern a recorded request gets, the
//! sizes its options are given in, and the extension of a body file.
//!
//! As WireMock's recorder: a body that parses as JSON is matched with `equalToJson`
//! (array order and extra elements ignored), XML with `equalToXml`, anything else
//! with `equalTo`. A recording may instead match on chosen fields: JSONPaths for a
//! JSON body, XPaths for an XML one, each with the value the request had there.

use decoy_matching::pattern::json_path_values;
use decoy_matching::xml::{XPathSpec, parse_document};
use serde_json::{Value, json};

/// The whole-body pattern for a recorded request body. `content_type` may be empty
/// (a message with no content type): the body is then looked at, JSON first, then
/// XML. With a content type, JSON needs the type to say JSON (or a body that parses
/// and a type that says nothing else), XML the type to say XML.
pub fn body_pattern(body: &[u8], content_type: &str) -> Value {
    let ct = content_type.to_ascii_lowercase();
    let text = String::from_utf8_lossy(body);
    let parses_as_json = || serde_json::from_slice::<Value>(body).is_ok();
    if (ct.contains("json") || ct.is_empty()) && parses_as_json() {
        json!({ "equalToJson": text, "ignoreArrayOrder": true, "ignoreExtraElements": true })
    } else if ct.contains("xml") || (ct.is_empty() && looks_like_xml(&text)) {
        json!({ "equalToXml": text })
    } else {
        json!({ "equalTo": text })
    }
}

/// A body that parses as an XML document with a root element.
pub fn looks_like_xml(text: &str) -> bool {
    text.trim_start().starts_with('<') && parse_document(text).is_ok()
}

/// Fields a recorded request is matched on instead of its whole body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchFields {
    /// JSONPaths (Jayway's syntax), for JSON bodies.
    pub json_paths: Vec<String>,
    /// XPaths, for XML bodies.
    pub xpaths: Vec<String>,
}

impl MatchFields {
    pub fn is_empty(&self) -> bool {
        self.json_paths.is_empty() && self.xpaths.is_empty()
    }

    /// Checks every expression, so a bad one is refused before recording starts.
    pub fn check(&self) -> Result<(), String> {
        for p in &self.json_paths {
            json_path_values(p, &Value::Null)?;
        }
        for x in &self.xpaths {
            XPathSpec::new(x.clone(), Vec::new())?;
        }
        Ok(())
    }
}

/// The body pattern of a recorded request: on the chosen fields when the body has
/// them (`matchesJsonPath` / `matchesXPath` with the value found, several joined
/// with `and`), else on the whole body ([`body_pattern`]).
pub fn request_body_pattern(body: &[u8], content_type: &str, fields: &MatchFields) -> Value {
    let whole = body_pattern(body, content_type);
    if fields.is_empty() {
        return whole;
    }
    let mut parts = Vec::new();
    if whole.get("equalToJson").is_some()
        && let Ok(doc) = serde_json::from_slice::<Value>(body)
    {
        for p in &fields.json_paths {
            let Ok(values) = json_path_values(p, &doc) else {
                continue;
            };
            match values.as_slice() {
                [] => {}
                [Value::String(s)] => {
                    parts.push(json!({ "matchesJsonPath": { "expression": p, "equalTo": s } }))
                }
                [v @ (Value::Number(_) | Value::Bool(_))] => parts.push(
                    json!({ "matchesJsonPath": { "expression": p, "equalTo": v.to_string() } }),
                ),
                [v] => parts.push(json!({ "matchesJsonPath": {
                    "expression": p, "equalToJson": v.to_string() } })),
                many => parts.push(json!({ "matchesJsonPath": {
                    "expression": p, "equalToJson": Value::Array(many.to_vec()).to_string() } })),
            }
        }
    } else if whole.get("equalToXml").is_some()
        && let Ok(pkg) = parse_document(&String::from_utf8_lossy(body))
    {
        for x in &fields.xpaths {
            let Ok(spec) = XPathSpec::new(x.clone(), Vec::new()) else {
                continue;
            };
            if let Some(first) = spec.evaluate(&pkg).and_then(|v| v.into_iter().next()) {
                parts.push(json!({ "matchesXPath": { "expression": x, "equalTo": first } }));
            }
        }
    }
    match parts.len() {
        0 => whole,
        1 => parts.pop().unwrap_or(whole),
        _ => json!({ "and": parts }),
    }
}

/// `2048`, `"2048"`, `"10 kb"`, `"1mb"`: a size as recording options give it.
pub fn parse_size(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let s = v.as_str()?.trim().to_ascii_lowercase();
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = s[digits.len()..].trim();
    let mult = match unit {
        "" | "b" => 1,
        "kb" | "k" => 1024,
        "mb" | "m" => 1024 * 1024,
        "gb" | "g" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// The extension of a recorded body file: from the content type when it says, else
/// from the body (`json`, `xml`, `txt`), `bin` for bytes that are not text.
pub fn body_extension(content_type: &str, body: &[u8]) -> &'static str {
    let ct = content_type.to_ascii_lowercase();
    let text = std::str::from_utf8(body).ok();
    if ct.contains("json") {
        "json"
    } else if ct.contains("xml") {
        "xml"
    } else if ct.contains("html") {
        "html"
    } else if let Some(t) = text {
        if !ct.is_empty() {
            "txt"
        } else if serde_json::from_str::<Value>(t).is_ok() {
            "json"
        } else if looks_like_xml(t) {
            "xml"
        } else {
            "txt"
        }
    } else {
        "bin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_get_the_pattern_of_what_they_parse_as() {
        assert!(body_pattern(br#"{"a":1}"#, "").get("equalToJson").is_some());
        assert!(body_pattern(b"<a>1</a>", "").get("equalToXml").is_some());
        assert!(body_pattern(b"<a>1", "").get("equalTo").is_some());
        assert!(body_pattern(b"hello", "").get("equalTo").is_some());
        assert!(
            body_pattern(br#"{"a":1}"#, "text/plain")
                .get("equalTo")
                .is_some()
        );
        assert!(
            body_pattern(b"x", "application/xml")
                .get("equalToXml")
                .is_some()
        );
    }

    #[test]
    fn chosen_fields_match_on_the_values_the_request_had() {
        let fields = MatchFields {
            json_paths: vec!["$.symbol".into(), "$.qty".into(), "$.absent".into()],
            xpaths: vec!["/quote/symbol/text()".into()],
        };
        let p = request_body_pattern(br#"{"symbol":"ACME","qty":3,"at":"now"}"#, "", &fields);
        assert_eq!(
            p,
            json!({"and": [
                {"matchesJsonPath": {"expression": "$.symbol", "equalTo": "ACME"}},
                {"matchesJsonPath": {"expression": "$.qty", "equalTo": "3"}}
            ]})
        );
        let p = request_body_pattern(b"<quote><symbol>ACME</symbol></quote>", "", &fields);
        assert_eq!(
            p,
            json!({"matchesXPath": {"expression": "/quote/symbol/text()", "equalTo": "ACME"}})
        );
        // No chosen field in the body: the whole body.
        let p = request_body_pattern(br#"{"other":1}"#, "", &fields);
        assert!(p.get("equalToJson").is_some());
    }

    #[test]
    fn bad_expressions_are_refused() {
        let f = MatchFields {
            json_paths: vec!["$[".into()],
            xpaths: vec![],
        };
        assert!(f.check().is_err());
        let f = MatchFields {
            json_paths: vec![],
            xpaths: vec!["//[".into()],
        };
        assert!(f.check().is_err());
    }

    #[test]
    fn sizes_accept_numbers_and_units() {
        assert_eq!(parse_size(&json!(2048)), Some(2048));
        assert_eq!(parse_size(&json!("10 kb")), Some(10240));
        assert_eq!(parse_size(&json!("1mb")), Some(1024 * 1024));
        assert_eq!(parse_size(&json!("ten")), None);
    }
}
