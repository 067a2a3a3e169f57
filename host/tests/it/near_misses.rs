#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The "Request was not matched" report and the near-miss admin endpoints name the
//! same closest stub: both score with WireMock's `NearMissCalculator` distance.

use crate::common::{admin, root_with_stubs, send, serve};
use serde_json::{Value, json};

/// The closest stub's name as the 404 report prints it: the title row under the
/// "Closest stub | Request" header.
fn reported_closest(report: &str) -> String {
    let lines: Vec<&str> = report.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("| Closest stub"))
        .unwrap_or_else(|| panic!("no report header in {report}"));
    let title = lines[header + 3];
    title
        .split('|')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn names(near_misses: &Value) -> Vec<String> {
    near_misses["nearMisses"]
        .as_array()
        .expect("a nearMisses list")
        .iter()
        .map(|n| n["stubMapping"]["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn distances(near_misses: &Value) -> Vec<f64> {
    near_misses["nearMisses"]
        .as_array()
        .expect("a nearMisses list")
        .iter()
        .map(|n| n["matchResult"]["distance"].as_f64().expect("a distance"))
        .collect()
}

/// A request's method, path, headers and body, and the stub WireMock names closest.
struct Case {
    stubs: Value,
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    closest: &'static str,
}

fn cases() -> Vec<Case> {
    vec![
        // Many missing headers against a wrong method: WireMock counts the headers
        // only once the method and URL match, as one part (their mean).
        Case {
            stubs: json!([
                {"name": "many-headers", "request": {"method": "GET", "urlPath": "/api/items", "headers": {
                    "X-A": {"equalTo": "a"}, "X-B": {"equalTo": "b"},
                    "X-C": {"equalTo": "c"}, "X-D": {"equalTo": "d"}}}},
                {"name": "wrong-method", "request": {"method": "POST", "urlPath": "/api/items"}}
            ]),
            method: "GET",
            path: "/api/items",
            headers: &[],
            body: "",
            closest: "many-headers",
        },
        // Missing query parameters against a path one letter off.
        Case {
            stubs: json!([
                {"name": "one-letter-off", "request": {"method": "GET", "urlPath": "/searcx"}},
                {"name": "many-query", "request": {"method": "GET", "urlPath": "/search", "queryParameters": {
                    "a": {"equalTo": "1"}, "b": {"equalTo": "2"}, "c": {"equalTo": "3"}}}}
            ]),
            method: "GET",
            path: "/search?q=x",
            headers: &[],
            body: "",
            closest: "many-query",
        },
        // A cookie, a body and headers that all differ, against a wrong method.
        Case {
            stubs: json!([
                {"name": "get-login", "request": {"method": "GET", "url": "/login"}},
                {"name": "cookies-and-body", "request": {"method": "POST", "url": "/login",
                    "cookies": {"session": {"equalTo": "s-1"}},
                    "headers": {"X-A": {"equalTo": "a"}, "X-B": {"equalTo": "b"}, "X-C": {"equalTo": "c"}},
                    "bodyPatterns": [{"equalToJson": {"user": "ada"}}]}}
            ]),
            method: "POST",
            path: "/login",
            headers: &[("content-type", "application/json")],
            body: "{}",
            closest: "cookies-and-body",
        },
        // The plain case both models always agreed on: the header that differs.
        Case {
            stubs: json!([
                {"name": "orders", "request": {"method": "GET", "urlPath": "/orders", "headers": {"Accept": {"equalTo": "application/json"}}}},
                {"name": "health", "request": {"method": "GET", "urlPath": "/health"}}
            ]),
            method: "GET",
            path: "/orders",
            headers: &[("accept", "text/html")],
            body: "",
            closest: "orders",
        },
    ]
}

#[tokio::test]
async fn the_404_report_and_every_near_miss_endpoint_name_the_same_closest_stub() {
    for case in cases() {
        let dir = root_with_stubs(case.stubs.clone());
        let server = serve(dir.path()).await;
        let a = send(
            server.http_addr,
            case.method,
            case.path,
            case.headers,
            case.body,
        )
        .await;
        assert_eq!(a.status, 404, "{}", a.body);
        assert_eq!(reported_closest(&a.body), case.closest, "{}", a.body);

        let mut logged = json!({"url": case.path, "method": case.method, "body": case.body});
        for (k, v) in case.headers {
            logged["headers"][*k] = json!(v);
        }
        let (status, posted) =
            admin(server.http_addr, "POST", "/near-misses/request", logged).await;
        assert_eq!(status, 200, "{posted}");
        assert_eq!(names(&posted)[0], case.closest, "{posted}");

        let (status, unmatched) = admin(
            server.http_addr,
            "GET",
            "/requests/unmatched/near-misses",
            Value::Null,
        )
        .await;
        assert_eq!(status, 200, "{unmatched}");
        assert_eq!(names(&unmatched)[0], case.closest, "{unmatched}");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn near_misses_are_at_most_three_sorted_by_distance_with_wiremocks_shape() {
    let stubs: Vec<Value> = (0..5)
        .map(|i| json!({"name": format!("s{i}"), "request": {"method": "GET", "urlPath": format!("/p{}", "x".repeat(i))}}))
        .collect();
    let dir = root_with_stubs(Value::Array(stubs));
    let server = serve(dir.path()).await;
    let (status, v) = admin(
        server.http_addr,
        "POST",
        "/near-misses/request",
        json!({"url": "/pxx", "method": "POST"}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let d = distances(&v);
    assert_eq!(d.len(), 3, "{v}");
    assert!(d.windows(2).all(|w| w[0] <= w[1]), "{v}");
    assert_eq!(names(&v)[0], "s2", "{v}");
    let first = &v["nearMisses"][0];
    assert_eq!(first["request"]["url"], "/pxx", "{v}");
    assert_eq!(first["stubMapping"]["request"]["urlPath"], "/pxx", "{v}");
    server.shutdown().await;
}

#[tokio::test]
async fn request_pattern_near_misses_rank_journal_requests_by_wiremocks_distance() {
    let dir = root_with_stubs(json!([
        {"request": {"method": "GET", "urlPath": "/never"}}
    ]));
    let server = serve(dir.path()).await;
    // Right method and URL, every header missing: WireMock's closest.
    send(server.http_addr, "GET", "/api/items", &[], "").await;
    // Every header present, wrong method.
    send(
        server.http_addr,
        "POST",
        "/api/items",
        &[("x-a", "a"), ("x-b", "b"), ("x-c", "c"), ("x-d", "d")],
        "",
    )
    .await;
    let (status, v) = admin(
        server.http_addr,
        "POST",
        "/near-misses/request-pattern",
        json!({"method": "GET", "urlPath": "/api/items", "headers": {
            "X-A": {"equalTo": "a"}, "X-B": {"equalTo": "b"},
            "X-C": {"equalTo": "c"}, "X-D": {"equalTo": "d"}}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let list = v["nearMisses"].as_array().expect("a list");
    assert_eq!(list.len(), 2, "{v}");
    assert_eq!(list[0]["request"]["method"], "GET", "{v}");
    assert_eq!(list[1]["request"]["method"], "POST", "{v}");
    let d = distances(&v);
    assert!(d[0] < d[1], "{v}");
    server.shutdown().await;
}
