//! Messages as proto3 JSON: what matchers, templates, plugins and the journal see of a
//! request, and what a stub's body is read as.
//!
//! The text is written as protobuf-java's `JsonFormat` printer writes it (what the
//! WireMock gRPC extension hands WireMock): lowerCamelCase names, fields left out at
//! their default, 64-bit integers as strings, enums by name, two-space indentation,
//! `"name": value` and repeated fields on one line (`[1, 2]`).

use prost::Message as _;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor};
use serde_json::Value;

/// A message's bytes, decoded as `desc`.
pub fn decode(desc: &MessageDescriptor, bytes: &[u8]) -> Result<DynamicMessage, String> {
    DynamicMessage::decode(desc.clone(), bytes)
        .map_err(|e| format!("the message does not decode as {}: {e}", desc.full_name()))
}

/// A message as proto3 JSON text, in `JsonFormat`'s layout.
pub fn to_json(msg: &DynamicMessage) -> String {
    match serde_json::to_value(msg) {
        Ok(v) => {
            let mut out = String::with_capacity(64);
            write_value(&mut out, &v, 0);
            out
        }
        // Only a map key or float serde_json cannot write (NaN is written as a string
        // by the proto3 mapping, so this does not happen in practice).
        Err(e) => format!("{{\n  \"decoyError\": {:?}\n}}", e.to_string()),
    }
}

/// A JSON value (a message's, or a list of them) as `JsonFormat` lays it out.
pub fn to_json_value(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0);
    out
}

fn write_value(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Object(map) if map.is_empty() => out.push_str("{\n}"),
        Value::Object(map) => {
            out.push_str("{\n");
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_value(out, v, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item, depth);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// A stub's body read as a message of type `desc` (an empty body is the empty
/// message). The reason names the field that does not fit.
pub fn from_json(desc: &MessageDescriptor, text: &str) -> Result<DynamicMessage, String> {
    if text.trim().is_empty() {
        return Ok(DynamicMessage::new(desc.clone()));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let msg =
        DynamicMessage::deserialize_with_options(desc.clone(), &mut de, &DeserializeOptions::new())
            .map_err(|e| format!("does not fit {}: {e}", desc.full_name()))?;
    de.end()
        .map_err(|e| format!("does not fit {}: {e}", desc.full_name()))?;
    Ok(msg)
}

/// A JSON value read as a message of type `desc`.
pub fn from_value(desc: &MessageDescriptor, v: &Value) -> Result<DynamicMessage, String> {
    DynamicMessage::deserialize_with_options(desc.clone(), v, &DeserializeOptions::new())
        .map_err(|e| format!("does not fit {}: {e}", desc.full_name()))
}

/// A message's wire bytes.
pub fn encode(msg: &DynamicMessage) -> Vec<u8> {
    msg.encode_to_vec()
}
