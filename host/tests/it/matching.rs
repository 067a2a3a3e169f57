#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every request-matching feature, through a real server on port 0.

use crate::common::{get, root_with_stubs, send, serve};
use serde_json::json;

/// A request to try: method, path and query, headers, body.
type Probe<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

/// Serves one stub answering "hit"; returns whether each request got it.
async fn hits(request: serde_json::Value, probes: &[Probe<'_>]) -> Vec<bool> {
    let dir = root_with_stubs(json!([{ "request": request, "response": { "body": "hit" } }]));
    let server = serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let mut out = Vec::new();
    for (method, path, headers, body) in probes {
        let a = send(server.http_addr, method, path, headers, body).await;
        out.push(a.status == 200 && a.body == "hit");
    }
    server.shutdown().await;
    out
}

#[tokio::test]
async fn url_matches_path_and_query_exactly() {
    let r = hits(
        json!({"url": "/a?b=1"}),
        &[
            ("GET", "/a?b=1", &[], ""),
            ("GET", "/a", &[], ""),
            ("GET", "/a?b=2", &[], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn url_path_ignores_the_query() {
    let r = hits(
        json!({"urlPath": "/a"}),
        &[("GET", "/a?x=1", &[], ""), ("GET", "/a/b", &[], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn url_pattern_is_a_regex_over_path_and_query() {
    let r = hits(
        json!({"urlPattern": "/items/[0-9]+\\?page=.*"}),
        &[
            ("GET", "/items/12?page=2", &[], ""),
            ("GET", "/items/12", &[], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn url_path_pattern_is_a_regex_over_the_path() {
    let r = hits(
        json!({"urlPathPattern": "/items/[0-9]+"}),
        &[
            ("GET", "/items/12?page=2", &[], ""),
            ("GET", "/items/x", &[], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn url_path_template_checks_path_parameters() {
    let r = hits(
        json!({"urlPathTemplate": "/users/{id}/orders/{order}", "pathParameters": {"id": {"matches": "[0-9]+"}}}),
        &[("GET", "/users/7/orders/x", &[], ""), ("GET", "/users/ann/orders/x", &[], ""), ("GET", "/users/7/orders", &[], "")],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn method_any_and_specific_methods() {
    let r = hits(
        json!({"method": "ANY", "urlPath": "/m"}),
        &[("PATCH", "/m", &[], ""), ("GET", "/m", &[], "")],
    )
    .await;
    assert_eq!(r, [true, true]);
    let r = hits(
        json!({"method": "PUT", "urlPath": "/m"}),
        &[("PUT", "/m", &[], ""), ("GET", "/m", &[], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn header_equal_to_with_and_without_case_insensitivity() {
    let r = hits(
        json!({"headers": {"Accept": {"equalTo": "text/plain"}, "X-Mode": {"equalTo": "FAST", "caseInsensitive": true}}}),
        &[("GET", "/", &[("accept", "text/plain"), ("x-mode", "fast")], ""), ("GET", "/", &[("accept", "text/html"), ("x-mode", "fast")], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn header_contains_and_does_not_contain() {
    let r = hits(
        json!({"headers": {"User-Agent": {"contains": "curl"}, "X-A": {"doesNotContain": "bad"}}}),
        &[
            ("GET", "/", &[("user-agent", "curl/8"), ("x-a", "good")], ""),
            (
                "GET",
                "/",
                &[("user-agent", "curl/8"), ("x-a", "so bad")],
                "",
            ),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn header_matches_and_does_not_match() {
    let r = hits(
        json!({"headers": {"X-Id": {"matches": "[a-f0-9]{4}"}, "X-B": {"doesNotMatch": "x.*"}}}),
        &[
            ("GET", "/", &[("x-id", "beef"), ("x-b", "yes")], ""),
            ("GET", "/", &[("x-id", "beefy"), ("x-b", "yes")], ""),
            ("GET", "/", &[("x-id", "beef"), ("x-b", "xyz")], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn absent_requires_the_header_to_be_missing() {
    let r = hits(
        json!({"headers": {"X-Debug": {"absent": true}}}),
        &[("GET", "/", &[], ""), ("GET", "/", &[("x-debug", "1")], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn anything_matches_a_present_header() {
    let r = hits(
        json!({"headers": {"X-Any": {"anything": "anything"}}}),
        &[("GET", "/", &[("x-any", "")], ""), ("GET", "/", &[], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn multi_value_has_exactly_and_includes() {
    let r = hits(
        json!({"queryParameters": {"id": {"hasExactly": [{"equalTo": "1"}, {"equalTo": "2"}]}}}),
        &[
            ("GET", "/?id=2&id=1", &[], ""),
            ("GET", "/?id=1&id=2&id=3", &[], ""),
            ("GET", "/?id=1", &[], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false, false]);
    let r = hits(
        json!({"queryParameters": {"id": {"includes": [{"equalTo": "3"}]}}}),
        &[("GET", "/?id=1&id=3", &[], ""), ("GET", "/?id=1", &[], "")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn query_parameters_are_decoded_before_matching() {
    let r = hits(
        json!({"queryParameters": {"q": {"equalTo": "a b&c"}}}),
        &[
            ("GET", "/s?q=a%20b%26c", &[], ""),
            ("GET", "/s?q=a", &[], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn form_parameters_are_read_from_an_urlencoded_body() {
    let ct = [("content-type", "application/x-www-form-urlencoded")];
    let r = hits(
        json!({"method": "POST", "formParameters": {"user": {"equalTo": "Ann Lee"}}}),
        &[
            ("POST", "/", &ct, "user=Ann+Lee&x=1"),
            ("POST", "/", &ct, "user=Bob"),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn cookies_are_matched_by_name() {
    let r = hits(
        json!({"cookies": {"session": {"matches": "s-[0-9]+"}}}),
        &[
            ("GET", "/", &[("cookie", "a=1; session=s-42")], ""),
            ("GET", "/", &[("cookie", "session=nope")], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn basic_auth_credentials_and_the_basic_auth_alias() {
    for key in ["basicAuthCredentials", "basicAuth"] {
        let r = hits(
            json!({ key: {"username": "user", "password": "pass"} }),
            &[
                ("GET", "/", &[("authorization", "Basic dXNlcjpwYXNz")], ""),
                ("GET", "/", &[("authorization", "Basic eDp5")], ""),
            ],
        )
        .await;
        assert_eq!(r, [true, false], "{key}");
    }
}

#[tokio::test]
async fn body_equal_to_and_binary_equal_to() {
    let r = hits(
        json!({"bodyPatterns": [{"equalTo": "ping"}]}),
        &[("POST", "/", &[], "ping"), ("POST", "/", &[], "pong")],
    )
    .await;
    assert_eq!(r, [true, false]);
    let r = hits(
        json!({"bodyPatterns": [{"binaryEqualTo": "cGluZw=="}]}),
        &[("POST", "/", &[], "ping"), ("POST", "/", &[], "pin")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn equal_to_json_with_options_and_placeholders() {
    let r = hits(
        json!({"bodyPatterns": [{"equalToJson": {"id": "${json-unit.any-number}", "tags": ["a", "b"]}, "ignoreArrayOrder": true, "ignoreExtraElements": true}]}),
        &[("POST", "/", &[], r#"{"tags": ["b", "a"], "id": 3, "extra": true}"#), ("POST", "/", &[], r#"{"tags": ["a"], "id": 3}"#), ("POST", "/", &[], r#"{"tags": ["a", "b"], "id": "3"}"#)],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn matches_json_path_with_and_without_sub_pattern() {
    let r = hits(
        json!({"bodyPatterns": [{"matchesJsonPath": "$.order[?(@.qty > 1)]"}, {"matchesJsonPath": {"expression": "$.order.sku", "matches": "SKU-[0-9]+"}}]}),
        &[("POST", "/", &[], r#"{"order": {"qty": 2, "sku": "SKU-1"}}"#), ("POST", "/", &[], r#"{"order": {"qty": 1, "sku": "SKU-1"}}"#), ("POST", "/", &[], "not json")],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn matches_json_schema_validates_bodies() {
    let r = hits(
        json!({"bodyPatterns": [{"matchesJsonSchema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}, "schemaVersion": "V202012"}]}),
        &[("POST", "/", &[], r#"{"name": "x"}"#), ("POST", "/", &[], r#"{"name": 1}"#)],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn equal_to_xml_ignores_formatting() {
    let r = hits(
        json!({"bodyPatterns": [{"equalToXml": "<order id=\"1\"><item>pen</item></order>"}]}),
        &[
            (
                "POST",
                "/",
                &[],
                "<order  id='1'>\n  <item>pen</item>\n</order>",
            ),
            ("POST", "/", &[], "<order id='2'><item>pen</item></order>"),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn matches_xpath_with_namespaces_and_sub_pattern() {
    let r = hits(
        json!({"bodyPatterns": [{"matchesXPath": {"expression": "//q:symbol/text()", "equalTo": "ACME"}, "xPathNamespaces": {"q": "urn:quotes"}}]}),
        &[("POST", "/", &[], "<r xmlns:q='urn:quotes'><q:symbol>ACME</q:symbol></r>"), ("POST", "/", &[], "<r xmlns:q='urn:quotes'><q:symbol>XYZ</q:symbol></r>")],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn date_time_operators_compare_instants() {
    let r = hits(
        json!({"headers": {"X-When": {"after": "2021-01-01T00:00:00Z"}, "X-Until": {"before": "now +1 days"}, "X-At": {"equalToDateTime": "2021-06-01T10:00:00Z"}}}),
        &[
            ("GET", "/", &[("x-when", "2022-01-01T00:00:00Z"), ("x-until", "2020-01-01T00:00:00Z"), ("x-at", "2021-06-01T12:00:00+02:00")], ""),
            ("GET", "/", &[("x-when", "2020-01-01T00:00:00Z"), ("x-until", "2020-01-01T00:00:00Z"), ("x-at", "2021-06-01T10:00:00Z")], ""),
        ],
    )
    .await;
    assert_eq!(r, [true, false]);
}

#[tokio::test]
async fn and_or_not_combine_patterns() {
    let r = hits(
        json!({"headers": {"X-V": {"and": [{"matches": "[a-z]+"}, {"or": [{"contains": "ab"}, {"contains": "yz"}]}, {"not": {"equalTo": "abc"}}]}}}),
        &[("GET", "/", &[("x-v", "xyz")], ""), ("GET", "/", &[("x-v", "abc")], ""), ("GET", "/", &[("x-v", "qq")], "")],
    )
    .await;
    assert_eq!(r, [true, false, false]);
}

#[tokio::test]
async fn multipart_patterns_match_any_or_all_parts() {
    let body = "--B\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{\"kind\":\"invoice\"}\r\n--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nPDF...\r\n--B--\r\n";
    let ct = [("content-type", "multipart/form-data; boundary=B")];
    let r = hits(
        json!({"multipartPatterns": [{"matchingType": "ANY", "headers": {"Content-Disposition": {"contains": "name=\"meta\""}}, "bodyPatterns": [{"matchesJsonPath": "$[?(@.kind == 'invoice')]"}]}]}),
        &[("POST", "/", &ct, body), ("POST", "/", &[], "plain")],
    )
    .await;
    assert_eq!(r, [true, false]);
    let r = hits(
        json!({"multipartPatterns": [{"matchingType": "ALL", "headers": {"Content-Disposition": {"contains": "form-data"}}}]}),
        &[("POST", "/", &ct, body)],
    )
    .await;
    assert_eq!(r, [true]);
}

#[tokio::test]
async fn host_port_and_scheme_fields() {
    let dir = root_with_stubs(
        json!([{ "request": {"host": {"equalTo": "api.example.com"}, "scheme": "http"}, "response": { "body": "hit" } }]),
    );
    let server = serve(dir.path()).await;
    let a = send(
        server.http_addr,
        "GET",
        "/",
        &[("host", "api.example.com")],
        "",
    )
    .await;
    assert_eq!(a.body, "hit");
    let a = get(server.http_addr, "/").await;
    assert_eq!(a.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn lowest_priority_wins_then_the_most_recently_added() {
    let dir = root_with_stubs(json!([
        {"request": {"urlPath": "/p"}, "response": {"body": "first"}},
        {"request": {"urlPath": "/p"}, "response": {"body": "second"}},
        {"priority": 9, "request": {"urlPathPattern": "/.*"}, "response": {"body": "fallback"}},
        {"priority": 1, "request": {"urlPath": "/urgent"}, "response": {"body": "urgent"}},
        {"request": {"urlPath": "/urgent"}, "response": {"body": "not urgent"}}
    ]));
    let server = serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/p").await.body, "second");
    assert_eq!(get(server.http_addr, "/other").await.body, "fallback");
    assert_eq!(get(server.http_addr, "/urgent").await.body, "urgent");
    server.shutdown().await;
}

#[tokio::test]
async fn scenarios_start_in_started_and_follow_transitions() {
    let dir = root_with_stubs(json!([
        {"scenarioName": "cart", "requiredScenarioState": "Started", "request": {"method": "GET", "urlPath": "/cart"}, "response": {"body": "empty"}},
        {"scenarioName": "cart", "newScenarioState": "has-item", "request": {"method": "POST", "urlPath": "/cart"}, "response": {"status": 201}},
        {"scenarioName": "cart", "requiredScenarioState": "has-item", "request": {"method": "GET", "urlPath": "/cart"}, "response": {"body": "one item"}}
    ]));
    let server = serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/cart").await.body, "empty");
    assert_eq!(
        send(server.http_addr, "POST", "/cart", &[], "")
            .await
            .status,
        201
    );
    assert_eq!(get(server.http_addr, "/cart").await.body, "one item");
    assert_eq!(server.engine.scenario_state("cart").unwrap(), "has-item");
    server.shutdown().await;
}

#[tokio::test]
async fn unmatched_requests_get_404_naming_the_closest_mapping() {
    let dir = root_with_stubs(json!([
        {"name": "orders", "request": {"method": "GET", "urlPath": "/orders", "headers": {"Accept": {"equalTo": "application/json"}}}},
        {"name": "health", "request": {"method": "GET", "urlPath": "/health"}}
    ]));
    let server = serve(dir.path()).await;
    let a = send(
        server.http_addr,
        "GET",
        "/orders",
        &[("accept", "text/html")],
        "",
    )
    .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.header("content-type"), Some("text/plain;charset=UTF-8"));
    assert!(a.body.contains("Request was not matched"), "{}", a.body);
    assert!(a.body.contains("orders"), "{}", a.body);
    assert!(a.body.contains("<<<<< Header does not match"), "{}", a.body);
    assert!(!a.body.contains("<<<<< URL does not match"), "{}", a.body);
    server.shutdown().await;
}

#[tokio::test]
async fn an_empty_root_answers_404_saying_there_are_no_mappings() {
    let dir = crate::common::root(&[]);
    let server = serve(dir.path()).await;
    let a = get(server.http_addr, "/x").await;
    assert_eq!(a.status, 404);
    assert!(a.body.contains("no stub mappings"), "{}", a.body);
    server.shutdown().await;
}
