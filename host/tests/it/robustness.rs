#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests: no mapping text and no request can make decoy panic.
//!
//! Mapping parsing is fed arbitrary JSON and arbitrary operator operands (regexes,
//! JSONPaths, XPaths, dates); the engine is fed arbitrary requests against a set that
//! uses every operator. Each must return a value (a mapping or an error, a plan) and
//! never unwind.

use decoy_core::engine::Engine;
use decoy_core::mapping::{Mapping, ParseContext};
use decoy_spec::request::RequestSnapshot;
use proptest::prelude::*;
use serde_json::{Value, json};

fn ctx() -> ParseContext {
    ParseContext {
        files_dir: "/nonexistent/__files".into(),
        max_body_file_size: decoy_core::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
        plugins: None,
        global_templating: false,
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9${}\\[\\]().*?+|^/@:= -]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("request"),
            Just("response"),
            Just("url"),
            Just("urlPathPattern"),
            Just("equalTo"),
            Just("matchesJsonPath"),
            Just("matchesXPath"),
            Just("bodyPatterns"),
            Just("headers"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        let key = prop_oneof![
            Just("request"),
            Just("response"),
            Just("method"),
            Just("url"),
            Just("urlPattern"),
            Just("urlPath"),
            Just("urlPathTemplate"),
            Just("pathParameters"),
            Just("headers"),
            Just("queryParameters"),
            Just("bodyPatterns"),
            Just("equalTo"),
            Just("matches"),
            Just("equalToJson"),
            Just("matchesJsonPath"),
            Just("matchesXPath"),
            Just("and"),
            Just("not"),
            Just("status"),
            Just("body"),
            Just("jsonBody"),
            Just("fault"),
            Just("delayDistribution"),
            Just("chunkedDribbleDelay"),
            Just("priority"),
            Just("scenarioName"),
            Just("hasExactly"),
            Just("expression"),
            Just("type"),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..5).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

/// A mapping set that exercises every operator, for request fuzzing.
fn rich_engine() -> Engine {
    let stubs = json!([
        {"request": {"urlPathTemplate": "/t/{id}", "pathParameters": {"id": {"matches": "[0-9]+"}}}},
        {"request": {"urlPattern": "/r/.*", "headers": {"X": {"hasExactly": [{"contains": "a"}]}}}},
        {"request": {"method": "POST", "urlPath": "/b", "bodyPatterns": [
            {"equalToJson": {"a": "${json-unit.any-number}"}, "ignoreArrayOrder": true},
            {"matchesJsonPath": {"expression": "$.a[?(@ > 1)]", "absent": true}},
            {"matchesJsonSchema": {"type": "object"}}
        ]}},
        {"request": {"urlPath": "/x", "bodyPatterns": [{"matchesXPath": {"expression": "//a/text()", "equalToXml": "<a/>"}}, {"equalToXml": "<a><b/></a>"}]}},
        {"request": {"urlPath": "/d", "headers": {"D": {"before": "now +1 days", "actualFormat": "dd/MM/yyyy"}}, "cookies": {"c": {"after": "2020-01-01"}}}},
        {"request": {"urlPath": "/f", "formParameters": {"a": {"or": [{"equalTo": "1"}, {"not": {"absent": true}}]}}, "multipartPatterns": [{"bodyPatterns": [{"binaryEqualTo": "AA=="}]}]}},
        {"scenarioName": "s", "requiredScenarioState": "Started", "newScenarioState": "x", "request": {"urlPath": "/s"}},
        {"request": {"url": "/exact?q=1", "basicAuth": {"username": "u", "password": "p"}}}
    ]);
    let mappings = stubs
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Mapping::parse(v, &ctx(), None, &mut Vec::new()).expect("rich stub parses"))
        .collect();
    Engine::new(mappings)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parsing_any_json_as_a_mapping_never_panics(v in arb_json()) {
        let _ = Mapping::parse(&v, &ctx(), None, &mut Vec::new());
        let _ = Mapping::parse(&json!({"request": v.clone()}), &ctx(), None, &mut Vec::new());
        let _ = Mapping::parse(&json!({"request": {"bodyPatterns": [v.clone()]}, "response": v}), &ctx(), None, &mut Vec::new());
    }

    #[test]
    fn any_operand_for_any_operator_compiles_or_fails_cleanly_then_matches_safely(
        op in prop::sample::select(vec![
            "equalTo", "contains", "matches", "doesNotMatch", "equalToJson", "matchesJsonPath",
            "matchesXPath", "equalToXml", "before", "after", "equalToDateTime", "binaryEqualTo",
            "matchesJsonSchema",
        ]),
        operand in "[ -~]{0,24}",
        body in "[ -~]{0,48}",
    ) {
        let stub = json!({"request": {"urlPath": "/p", "bodyPatterns": [{op: operand}], "headers": {"H": {op: operand}}}});
        if let Ok(m) = Mapping::parse(&stub, &ctx(), None, &mut Vec::new()) {
            let engine = Engine::new(vec![m]);
            let mut h = http::HeaderMap::new();
            if let Ok(v) = http::HeaderValue::from_str(&body) {
                h.insert("h", v);
            }
            let req = RequestSnapshot::new("POST", "/p").with_headers(h).with_body(body.clone());
            let status = engine.respond(&req).plan().status;
            prop_assert!(status == 200 || status == 404);
        }
    }

    #[test]
    fn any_request_gets_a_plan_and_never_a_panic(
        method in prop::sample::select(vec!["GET", "POST", "PUT", "X-WEIRD"]),
        path in prop::sample::select(vec!["/t/", "/r/", "/b", "/x", "/d", "/f", "/s", "/exact", "/", "/%", "/t/%ff"]),
        tail in "[ -~]{0,16}",
        headers in prop::collection::vec((prop::sample::select(vec!["x", "d", "cookie", "content-type", "authorization"]), "[ -~]{0,30}"), 0..4),
        body in prop::collection::vec(any::<u8>(), 0..64),
        json_body in arb_json(),
        use_json in any::<bool>(),
    ) {
        let engine = rich_engine();
        let mut h = http::HeaderMap::new();
        for (k, v) in headers {
            if let Ok(v) = http::HeaderValue::from_str(&v) {
                h.append(k, v);
            }
        }
        let body = if use_json { json_body.to_string().into_bytes() } else { body };
        let req = RequestSnapshot::new(method, format!("{path}{tail}")).with_headers(h).with_body(body);
        let status = engine.respond(&req).plan().status;
        prop_assert!(status == 200 || status == 404);
    }
}
