//! A custom matcher: the request matches when the JSON body has, at `pointer` (a
//! JSON Pointer such as `/account/tier`), one of the values in `oneOf`.
//!
//! ```json
//! "request": {"method": "POST", "urlPath": "/orders",
//!             "customMatcher": {"name": "json-field-matcher",
//!                               "parameters": {"pointer": "/account/tier", "oneOf": ["gold", "platinum"]}}}
//! ```

use decoy_plugin::{Context, Error, Matcher, Request};
use serde_json::Value;

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    pointer: String,
    one_of: Vec<Value>,
}

#[derive(Debug)]
struct JsonFieldMatcher;

impl Matcher for JsonFieldMatcher {
    fn matches(ctx: &Context, req: &Request) -> Result<bool, Error> {
        let p: Params = ctx.parameters()?;
        // A body that is not JSON simply does not match.
        let Ok(body) = req.json::<Value>() else {
            return Ok(false);
        };
        Ok(body
            .pointer(&p.pointer)
            .is_some_and(|v| p.one_of.contains(v)))
    }
}

decoy_plugin::export!(matcher = JsonFieldMatcher);
