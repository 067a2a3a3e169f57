#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The mapping lifecycle against real servers on port 0: hot reload of the root
//! directory, the admin API's writes (save, reset, files), its protection, the
//! journal's bounds, metrics, proxying and recording.
//!
//! Waiting for the file watcher polls with a generous bound (10 s) instead of asserting
//! a latency: how fast a reload is is measured by the benchmark, not here.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::common::{Answer, admin, get, send};
use decoy::server::{ServeOptions, start};
use serde_json::{Value, json};

/// Polls `GET path` until `want` holds for the answer, for up to 10 s.
async fn eventually(addr: SocketAddr, path: &str, want: impl Fn(&Answer) -> bool) -> Answer {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let a = get(addr, path).await;
        if want(&a) || tokio::time::Instant::now() > deadline {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stub(url: &str, body: &str) -> String {
    json!({"request": {"method": "GET", "url": url}, "response": {"body": body}}).to_string()
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Writes as editors do: a temporary file renamed over the original.
fn write_via_rename(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    let tmp = p.with_extension("json.tmp~");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, p).unwrap();
}

#[tokio::test]
async fn new_changed_renamed_and_deleted_files_are_served_without_a_restart() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "one"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/a").await.body, "one");

    write(dir.path(), "mappings/b.json", &stub("/b", "new file"));
    assert_eq!(
        eventually(addr, "/b", |a| a.status == 200).await.body,
        "new file"
    );

    write_via_rename(dir.path(), "mappings/a.json", &stub("/a", "two"));
    assert_eq!(
        eventually(addr, "/a", |a| a.body == "two").await.body,
        "two"
    );

    write(
        dir.path(),
        "mappings/deeper/new/c.json",
        &stub("/c", "in a new folder"),
    );
    assert_eq!(
        eventually(addr, "/c", |a| a.status == 200).await.body,
        "in a new folder"
    );

    std::fs::rename(
        dir.path().join("mappings/b.json"),
        dir.path().join("mappings/b2.json"),
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("mappings/a.json")).unwrap();
    assert_eq!(
        eventually(addr, "/a", |a| a.status == 404).await.status,
        404
    );
    assert_eq!(get(addr, "/b").await.body, "new file");
    server.shutdown().await;
}

#[tokio::test]
async fn a_changed_body_file_is_served_after_a_reload() {
    let dir = crate::common::root(&[
        (
            "mappings/a.json",
            r#"{"request": {"url": "/f"}, "response": {"bodyFileName": "f.txt"}}"#,
        ),
        ("__files/f.txt", "old body"),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/f").await.body, "old body");
    write(dir.path(), "__files/f.txt", "new body");
    let a = eventually(server.http_addr, "/f", |a| a.body == "new body").await;
    assert_eq!(a.body, "new body");
    server.shutdown().await;
}

#[tokio::test]
async fn a_broken_edit_keeps_the_last_good_version_live_and_is_reported_until_fixed() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "good"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    write(
        dir.path(),
        "mappings/a.json",
        r#"{"name": "a", "request": {"urlPattern": "([oops"}, "response": {"body": "bad"}}"#,
    );
    let reported = eventually(addr, "/__admin/problems", |a| {
        a.body.contains("invalid regular")
    })
    .await;
    let problems: Value = serde_json::from_str(&reported.body).unwrap();
    let text = problems["problems"][0].as_str().unwrap_or_default();
    assert!(
        text.starts_with("mappings/a.json: mapping #0 (name \"a\"): request.urlPattern: invalid regular expression"),
        "{problems}"
    );
    assert_eq!(
        get(addr, "/a").await.body,
        "good",
        "the last good version stays live"
    );

    write(dir.path(), "mappings/a.json", &stub("/a", "fixed"));
    assert_eq!(
        eventually(addr, "/a", |a| a.body == "fixed").await.body,
        "fixed"
    );
    let (_, v) = admin(addr, "GET", "/problems", Value::Null).await;
    assert_eq!(
        v["problems"],
        json!([]),
        "fixing the file clears its problem"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn scenario_states_survive_a_reload() {
    let scenario = |body: &str| {
        json!({"mappings": [
            {"scenarioName": "s", "requiredScenarioState": "Started", "newScenarioState": "second",
             "request": {"url": "/s"}, "response": {"body": "first"}},
            {"scenarioName": "s", "requiredScenarioState": "second",
             "request": {"url": "/s"}, "response": {"body": body}},
        ]})
        .to_string()
    };
    let dir = crate::common::root(&[
        ("mappings/s.json", &scenario("second")),
        ("mappings/x.json", &stub("/x", "x")),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/s").await.body, "first");
    write(dir.path(), "mappings/s.json", &scenario("second, reloaded"));
    let a = eventually(addr, "/s", |a| a.body == "second, reloaded").await;
    assert_eq!(
        a.body, "second, reloaded",
        "the scenario stayed in state 'second'"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn with_watching_off_files_change_nothing_until_a_reset() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "one"))]);
    let server = start(ServeOptions {
        watch: false,
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    write(dir.path(), "mappings/a.json", &stub("/a", "two"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(get(addr, "/a").await.body, "one");
    assert_eq!(
        admin(addr, "POST", "/mappings/reset", Value::Null).await.0,
        200
    );
    assert_eq!(get(addr, "/a").await.body, "two");
    server.shutdown().await;
}

#[tokio::test]
async fn save_writes_api_mappings_as_files_that_are_not_loaded_twice() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "file"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let (status, created) = admin(
        addr,
        "POST",
        "/mappings",
        json!({"name": "Made By API", "request": {"url": "/api"}, "response": {"body": "api"}}),
    )
    .await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        admin(addr, "POST", "/mappings/save", Value::Null).await.0,
        200
    );
    let saved = dir.path().join(format!("mappings/made-by-api-{id}.json"));
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(text.contains("\"/api\""), "{text}");
    // Give the watcher time to see the file it did not write, then count.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(list["meta"]["total"], 2, "{list}");
    // A reset now keeps it: it is on disk.
    admin(addr, "POST", "/mappings/reset", Value::Null).await;
    assert_eq!(get(addr, "/api").await.body, "api");
    server.shutdown().await;
}

/// WireMock's `resetToDefaultMappings`: every stub goes, then the files are read
/// again. JUnit's usual setup is an empty root with stubs posted per test.
#[tokio::test]
async fn a_reset_drops_api_stubs_whether_the_root_has_no_stub_file_or_one() {
    let file = stub("/a", "file");
    for files in [&[][..], &[("mappings/a.json", file.as_str())][..]] {
        let dir = crate::common::root(files);
        let server = crate::common::serve(dir.path()).await;
        let addr = server.http_addr;
        for (url, body) in [("/api/1", "one"), ("/api/2", "two")] {
            let (status, _) = admin(
                addr,
                "POST",
                "/mappings",
                json!({"request": {"url": url}, "response": {"body": body}}),
            )
            .await;
            assert_eq!(status, 201);
        }
        assert_eq!(get(addr, "/api/1").await.body, "one");
        assert_eq!(
            admin(addr, "POST", "/mappings/reset", Value::Null).await.0,
            200
        );
        let case = format!("{} stub file(s)", files.len());
        assert_eq!(get(addr, "/api/1").await.status, 404, "{case}");
        assert_eq!(get(addr, "/api/2").await.status, 404, "{case}");
        let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
        assert_eq!(list["meta"]["total"], files.len(), "{case}: {list}");
        if !files.is_empty() {
            assert_eq!(get(addr, "/a").await.body, "file", "{case}");
        }
        server.shutdown().await;
    }
}

#[tokio::test]
async fn api_mappings_are_validated_with_the_same_messages_as_files() {
    let bad =
        json!({"name": "bad", "request": {"urlPathPattern": "/x/[a-"}, "response": {"status": 42}});
    let dir = crate::common::root(&[("mappings/bad.json", &bad.to_string())]);
    let server = crate::common::serve(dir.path()).await;
    let from_file: Vec<String> = server
        .report
        .problems
        .iter()
        .map(|p| p.split_once("(name \"bad\"): ").unwrap().1.to_owned())
        .collect();
    let (status, v) = admin(server.http_addr, "POST", "/mappings", bad).await;
    assert_eq!(status, 422);
    let from_api: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["detail"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(from_api, from_file);
    assert_eq!(from_api.len(), 2, "{from_api:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn files_can_be_managed_only_inside_the_files_directory() {
    let dir = crate::common::root(&[
        ("mappings/a.json", &stub("/a", "a")),
        ("secret.txt", "secret"),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let put = send(addr, "PUT", "/__admin/files/docs/one.txt", &[], "content").await;
    assert_eq!(put.status, 200);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("__files/docs/one.txt")).unwrap(),
        "content"
    );
    assert_eq!(
        get(addr, "/__admin/files/docs/one.txt").await.body,
        "content"
    );
    assert_eq!(
        admin(addr, "GET", "/files", Value::Null).await.1,
        json!(["docs/one.txt"])
    );
    for escape in [
        "/__admin/files/..%2Fsecret.txt",
        "/__admin/files/docs/..%2F..%2Fsecret.txt",
    ] {
        assert_eq!(get(addr, escape).await.status, 400, "{escape}");
    }
    assert_eq!(
        send(addr, "DELETE", "/__admin/files/docs/one.txt", &[], "")
            .await
            .status,
        200
    );
    assert!(!dir.path().join("__files/docs/one.txt").exists());
    server.shutdown().await;
}

#[tokio::test]
async fn the_admin_api_needs_the_token_when_one_is_set() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = start(ServeOptions {
        admin_token: Some("s3cret".into()),
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    assert_eq!(get(addr, "/__admin/mappings").await.status, 401);
    let wrong = send(
        addr,
        "GET",
        "/__admin/mappings",
        &[("authorization", "Bearer nope")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 401);
    let right = send(
        addr,
        "GET",
        "/__admin/mappings",
        &[("authorization", "Bearer s3cret")],
        "",
    )
    .await;
    assert_eq!(right.status, 200);
    assert_eq!(get(addr, "/a").await.status, 200, "stubs need no token");
    server.shutdown().await;
}

#[tokio::test]
async fn an_admin_port_serves_only_the_admin_api_and_the_stub_port_only_stubs() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = start(ServeOptions {
        admin_port: Some(0),
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let admin_addr = server.admin_addr.unwrap();
    assert_eq!(get(admin_addr, "/__admin/mappings").await.status, 200);
    assert_eq!(get(admin_addr, "/__admin/metrics").await.status, 200);
    assert_eq!(get(admin_addr, "/a").await.status, 404);
    let on_stub_port = get(server.http_addr, "/__admin/mappings").await;
    assert_eq!(on_stub_port.status, 404);
    assert!(
        on_stub_port.body.contains("Request was not matched"),
        "{}",
        on_stub_port.body
    );
    assert_eq!(get(server.http_addr, "/a").await.body, "a");
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_keeps_only_the_newest_entries_and_can_be_turned_off() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = start(ServeOptions {
        journal_entries: 3,
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    for i in 0..5 {
        get(server.http_addr, &format!("/a?i={i}")).await;
    }
    let (_, v) = admin(server.http_addr, "GET", "/requests", Value::Null).await;
    let urls: Vec<&str> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["request"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["/a?i=4", "/a?i=3", "/a?i=2"]);
    server.shutdown().await;

    let server = start(ServeOptions {
        journal_entries: 0,
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    get(server.http_addr, "/a").await;
    let (_, v) = admin(server.http_addr, "GET", "/requests", Value::Null).await;
    assert_eq!(v["requests"], json!([]));
    assert_eq!(v["requestJournalDisabled"], true);
    server.shutdown().await;
}

#[tokio::test]
async fn metrics_list_every_transport_by_its_label_in_the_same_families_as_ever() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    get(addr, "/a").await;
    get(addr, "/missing").await;
    let m = get(addr, "/__admin/metrics").await;
    let rows = |family: &str| -> Vec<String> {
        m.body
            .lines()
            .filter(|l| l.starts_with(family) && !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    // Every transport is listed (the brokers and gRPC too, with nothing configured),
    // HTTP first.
    assert_eq!(
        rows("decoy_requests_total{"),
        [
            r#"decoy_requests_total{transport="http",outcome="matched"} 1"#,
            r#"decoy_requests_total{transport="http",outcome="unmatched"} 1"#,
            r#"decoy_requests_total{transport="amqp",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="amqp",outcome="unmatched"} 0"#,
            r#"decoy_requests_total{transport="ibm-mq",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="ibm-mq",outcome="unmatched"} 0"#,
            r#"decoy_requests_total{transport="nats",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="nats",outcome="unmatched"} 0"#,
            r#"decoy_requests_total{transport="mqtt",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="mqtt",outcome="unmatched"} 0"#,
            r#"decoy_requests_total{transport="amqp1",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="amqp1",outcome="unmatched"} 0"#,
            r#"decoy_requests_total{transport="grpc",outcome="matched"} 0"#,
            r#"decoy_requests_total{transport="grpc",outcome="unmatched"} 0"#,
        ],
        "{}",
        m.body
    );
    assert_eq!(
        rows("decoy_mq_panics_total{"),
        [
            r#"decoy_mq_panics_total{transport="amqp",task="receiver"} 0"#,
            r#"decoy_mq_panics_total{transport="amqp",task="sender"} 0"#,
            r#"decoy_mq_panics_total{transport="ibm-mq",task="receiver"} 0"#,
            r#"decoy_mq_panics_total{transport="ibm-mq",task="sender"} 0"#,
            r#"decoy_mq_panics_total{transport="nats",task="receiver"} 0"#,
            r#"decoy_mq_panics_total{transport="nats",task="sender"} 0"#,
            r#"decoy_mq_panics_total{transport="mqtt",task="receiver"} 0"#,
            r#"decoy_mq_panics_total{transport="mqtt",task="sender"} 0"#,
            r#"decoy_mq_panics_total{transport="amqp1",task="receiver"} 0"#,
            r#"decoy_mq_panics_total{transport="amqp1",task="sender"} 0"#,
        ],
        "{}",
        m.body
    );
    assert_eq!(
        rows("decoy_processing_seconds_count{"),
        [
            r#"decoy_processing_seconds_count{transport="http"} 2"#,
            r#"decoy_processing_seconds_count{transport="amqp"} 0"#,
            r#"decoy_processing_seconds_count{transport="ibm-mq"} 0"#,
            r#"decoy_processing_seconds_count{transport="nats"} 0"#,
            r#"decoy_processing_seconds_count{transport="mqtt"} 0"#,
            r#"decoy_processing_seconds_count{transport="amqp1"} 0"#,
            r#"decoy_processing_seconds_count{transport="grpc"} 0"#,
        ],
        "{}",
        m.body
    );
    // Each family's help and type once, families in the order they always came.
    let families: Vec<&str> = m
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .take(6)
        .collect();
    assert_eq!(
        families,
        [
            "decoy_requests_total",
            "decoy_mapping_requests_total",
            "decoy_mq_panics_total",
            "decoy_grpc_calls_total",
            "decoy_processing_seconds",
            "decoy_webhooks_total",
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn metrics_count_requests_per_mapping_and_transport_across_reloads() {
    let dir = crate::common::root(&[(
        "mappings/a.json",
        r#"{"id": "5e6b0e9c-0000-4000-8000-000000000001", "name": "the a", "request": {"url": "/a"}, "response": {"body": "a"}}"#,
    )]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    for _ in 0..3 {
        get(addr, "/a").await;
    }
    get(addr, "/missing").await;
    let before = get(addr, "/__admin/metrics").await;
    assert!(
        before
            .body
            .lines()
            .any(|l| l == r#"decoy_requests_total{transport="http",outcome="unmatched"} 1"#),
        "{}",
        before.body
    );
    // Another file appears: the set is rebuilt, the counter carries over.
    write(dir.path(), "mappings/b.json", &stub("/b", "b"));
    eventually(addr, "/b", |a| a.status == 200).await;
    let m = get(addr, "/__admin/metrics").await;
    assert_eq!(m.status, 200);
    assert!(m.header("content-type").unwrap().starts_with("text/plain"));
    let has = |line: &str| m.body.lines().any(|l| l == line);
    assert!(
        has(
            r#"decoy_mapping_requests_total{mapping_id="5e6b0e9c-0000-4000-8000-000000000001",mapping_name="the a"} 3"#
        ),
        "{}",
        m.body
    );
    assert!(
        m.body
            .contains(r#"decoy_processing_seconds_count{transport="http"}"#),
        "{}",
        m.body
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_global_fixed_delay_applies_to_stubbed_answers() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = crate::common::serve(dir.path()).await;
    admin(
        server.http_addr,
        "POST",
        "/settings",
        json!({"fixedDelay": 250}),
    )
    .await;
    let (_, s) = admin(server.http_addr, "GET", "/settings", Value::Null).await;
    assert_eq!(s["settings"]["fixedDelay"], 250);
    get(server.http_addr, "/a").await;
    let (_, v) = admin(server.http_addr, "GET", "/requests?limit=1", Value::Null).await;
    assert_eq!(v["requests"][0]["timing"]["addedDelay"], 250);
    server.shutdown().await;
}

/// A real service for proxying and recording: another decoy with its own stubs.
async fn upstream() -> (tempfile::TempDir, decoy::server::Running) {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"method": "GET", "url": "/svc/data",
                     "headers": {"X-Added": {"equalTo": "yes"}, "X-Secret": {"absent": true}}},
         "response": {"status": 200, "body": "{\"from\":\"upstream\"}", "headers": {"Content-Type": "application/json", "X-Up": "1"}}},
        {"scenarioName": "c", "requiredScenarioState": "Started", "newScenarioState": "2",
         "request": {"method": "GET", "url": "/svc/counter"}, "response": {"body": "first"}},
        {"scenarioName": "c", "requiredScenarioState": "2",
         "request": {"method": "GET", "url": "/svc/counter"}, "response": {"body": "second"}},
        {"request": {"method": "POST", "url": "/svc/orders", "bodyPatterns": [{"equalToJson": {"item": "tea"}}]},
         "response": {"status": 201, "body": "ordered", "headers": {"Content-Type": "text/plain"}}},
    ]));
    let server = crate::common::serve(dir.path()).await;
    (dir, server)
}

#[tokio::test]
async fn a_proxy_stub_forwards_with_prefix_removed_and_headers_edited() {
    let (_up_dir, up) = upstream().await;
    let dir = crate::common::root(&[(
        "mappings/proxy.json",
        &json!({"request": {"urlPathPattern": "/api/.*"},
                "response": {"proxyBaseUrl": format!("http://{}", up.http_addr),
                             "proxyUrlPrefixToRemove": "/api",
                             "additionalProxyRequestHeaders": {"X-Added": "yes"},
                             "removeProxyRequestHeaders": ["X-Secret"]}})
        .to_string(),
    )]);
    let server = crate::common::serve(dir.path()).await;
    let a = send(
        server.http_addr,
        "GET",
        "/api/svc/data",
        &[("x-secret", "hide me")],
        "",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body, "{\"from\":\"upstream\"}");
    assert_eq!(a.header("x-up"), Some("1"));
    server.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_proxy_stub_whose_service_is_down_answers_500_naming_it() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let dir = crate::common::root(&[(
        "mappings/proxy.json",
        &json!({"request": {"url": "/down"}, "response": {"proxyBaseUrl": format!("http://127.0.0.1:{port}")}})
            .to_string(),
    )]);
    let server = crate::common::serve(dir.path()).await;
    let a = get(server.http_addr, "/down").await;
    assert_eq!(a.status, 500);
    assert!(
        a.body.contains(&format!("http://127.0.0.1:{port}/down")),
        "{}",
        a.body
    );
    server.shutdown().await;
}

#[tokio::test]
async fn recording_turns_proxied_traffic_into_mapping_files_that_are_then_served() {
    let (_up_dir, up) = upstream().await;
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let (status, _) = admin(
        addr,
        "POST",
        "/recordings/start",
        json!({"targetBaseUrl": format!("http://{}", up.http_addr),
               "captureHeaders": {"X-Added": {}},
               "extractBodyCriteria": {"textSizeThreshold": "15"}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        admin(addr, "GET", "/recordings/status", Value::Null)
            .await
            .1["status"],
        "Recording"
    );
    let data = send(addr, "GET", "/svc/data", &[("x-added", "yes")], "").await;
    assert_eq!(data.body, "{\"from\":\"upstream\"}");
    assert_eq!(get(addr, "/svc/counter").await.body, "first");
    assert_eq!(get(addr, "/svc/counter").await.body, "second");
    let ordered = send(
        addr,
        "POST",
        "/svc/orders",
        &[("content-type", "application/json")],
        r#"{"item":"tea"}"#,
    )
    .await;
    assert_eq!(ordered.status, 201);

    let (status, result) = admin(addr, "POST", "/recordings/stop", Value::Null).await;
    assert_eq!(status, 200, "{result}");
    let recorded = result["mappings"].as_array().unwrap();
    assert_eq!(recorded.len(), 4, "{result}");
    let data_stub = recorded
        .iter()
        .find(|m| m["request"]["url"] == "/svc/data")
        .unwrap();
    assert_eq!(data_stub["request"]["headers"]["X-Added"]["equalTo"], "yes");
    // 19 bytes > the 15-byte threshold: into __files.
    let body_file = data_stub["response"]["bodyFileName"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("__files").join(body_file)).unwrap(),
        "{\"from\":\"upstream\"}"
    );
    let order_stub = recorded
        .iter()
        .find(|m| m["request"]["url"] == "/svc/orders")
        .unwrap();
    assert_eq!(
        order_stub["request"]["bodyPatterns"][0]["equalToJson"],
        r#"{"item":"tea"}"#
    );
    assert_eq!(order_stub["response"]["body"], "ordered");
    let files = std::fs::read_dir(dir.path().join("mappings"))
        .unwrap()
        .count();
    assert_eq!(files, 4);

    // The real service goes away; the recording answers, repeats in order.
    up.shutdown().await;
    assert_eq!(
        admin(addr, "GET", "/recordings/status", Value::Null)
            .await
            .1["status"],
        "Stopped"
    );
    let replay = send(addr, "GET", "/svc/data", &[("x-added", "yes")], "").await;
    assert_eq!(replay.body, "{\"from\":\"upstream\"}");
    assert_eq!(replay.header("x-up"), Some("1"));
    assert_eq!(get(addr, "/svc/counter").await.body, "first");
    assert_eq!(get(addr, "/svc/counter").await.body, "second");
    let again = send(addr, "POST", "/svc/orders", &[], r#"{ "item": "tea" }"#).await;
    assert_eq!((again.status, again.body.as_str()), (201, "ordered"));
    // Written once, served once: the watcher does not add the files a second time.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        admin(addr, "GET", "/mappings", Value::Null).await.1["meta"]["total"],
        4
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_snapshot_turns_proxied_journal_entries_into_stubs_without_persisting() {
    let (_up_dir, up) = upstream().await;
    let dir = crate::common::root(&[(
        "mappings/proxy.json",
        &json!({"request": {"urlPathPattern": "/svc/.*"},
                "response": {"proxyBaseUrl": format!("http://{}", up.http_addr)}})
        .to_string(),
    )]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    get(addr, "/svc/counter").await;
    get(addr, "/svc/counter").await;
    let (status, v) = admin(
        addr,
        "POST",
        "/recordings/snapshot",
        json!({"persist": false, "repeatsAsScenarios": false, "filters": {"urlPathPattern": "/svc/counter"}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let stubs = v["mappings"].as_array().unwrap();
    assert_eq!(stubs.len(), 1, "{v}");
    assert_eq!(stubs[0]["response"]["body"], "first");
    assert_eq!(
        std::fs::read_dir(dir.path().join("mappings"))
            .unwrap()
            .count(),
        1
    );
    // The recorded stub (priority 5, added last) now answers instead of the proxy.
    up.shutdown().await;
    assert_eq!(get(addr, "/svc/counter").await.body, "first");
    server.shutdown().await;
}

/// The value of an unlabelled metric line.
async fn metric(addr: SocketAddr, name: &str) -> u64 {
    let m = get(addr, "/__admin/metrics").await;
    m.body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{}", m.body))
}

#[tokio::test]
async fn a_burst_of_a_thousand_new_files_is_loaded_in_a_few_swaps() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let before = metric(addr, "decoy_mapping_set_swaps_total").await;
    // As a `git checkout` would: many files, as fast as the disk takes them.
    for i in 0..1000 {
        write(
            dir.path(),
            &format!("mappings/burst/{i:04}.json"),
            &stub(&format!("/burst/{i}"), "b"),
        );
    }
    let last = eventually(addr, "/burst/999", |a| a.status == 200).await;
    assert_eq!(last.status, 200);
    assert_eq!(get(addr, "/burst/0").await.status, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let swaps = metric(addr, "decoy_mapping_set_swaps_total").await - before;
    assert!(swaps <= 50, "{swaps} swaps for one burst of 1,000 files");
    assert_eq!(metric(addr, "decoy_mappings_live").await, 1001);
    server.shutdown().await;
}

#[tokio::test]
async fn a_request_waiting_on_its_delay_finishes_with_the_set_it_matched_during_a_reload() {
    let delayed = |body: &str| {
        json!({"request": {"url": "/slow"}, "response": {"body": body, "fixedDelayMilliseconds": 800}}).to_string()
    };
    let dir = crate::common::root(&[("mappings/slow.json", &delayed("old"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let in_flight = tokio::spawn(async move { get(addr, "/slow").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    write_via_rename(dir.path(), "mappings/slow.json", &delayed("new"));
    let answer = in_flight.await.unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "old"));
    assert_eq!(
        eventually(addr, "/slow", |a| a.body == "new").await.body,
        "new"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn requests_since_a_time_and_shutdown_through_the_admin_api() {
    let dir = crate::common::root(&[("mappings/a.json", &stub("/a", "a"))]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    get(addr, "/a?early").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cut = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    tokio::time::sleep(Duration::from_millis(20)).await;
    get(addr, "/a?late").await;
    let (_, v) = admin(addr, "GET", &format!("/requests?since={cut}"), Value::Null).await;
    let urls: Vec<&str> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["request"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["/a?late"]);

    assert_eq!(admin(addr, "POST", "/shutdown", Value::Null).await.0, 200);
    // The listeners stop: `wait` returns on its own, without a signal.
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("the server stopped after POST /__admin/shutdown");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn a_stub_posted_to_mappings_remove_is_removed_by_its_id_or_else_by_an_equal_request() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let one = json!({"id": "11111111-0000-0000-0000-000000000001",
        "request": {"method": "GET", "url": "/one"}, "response": {"body": "1"}});
    let two = json!({"id": "11111111-0000-0000-0000-000000000002",
        "request": {"method": "GET", "url": "/two"}, "response": {"body": "2"}});
    assert_eq!(admin(addr, "POST", "/mappings", one.clone()).await.0, 201);
    assert_eq!(admin(addr, "POST", "/mappings", two).await.0, 201);
    // By id: the posted request does not even have to match.
    let by_id = json!({"id": "11111111-0000-0000-0000-000000000001",
        "request": {"url": "/elsewhere"}, "response": {}});
    let a = send(
        addr,
        "POST",
        "/__admin/mappings/remove",
        &[],
        &by_id.to_string(),
    )
    .await;
    assert_eq!((a.status, a.body.as_str()), (200, ""));
    assert_eq!(get(addr, "/one").await.status, 404);
    // An unknown id: every stub whose request equals the posted one goes.
    let by_request = json!({"id": "99999999-9999-9999-9999-999999999999",
        "request": {"url": "/two", "method": "GET", "headers": null}, "response": {"body": "x"}});
    let a = send(
        addr,
        "POST",
        "/__admin/mappings/remove",
        &[],
        &by_request.to_string(),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(get(addr, "/two").await.status, 404);
    // Nothing matches: still 200, nothing removed.
    assert_eq!(admin(addr, "POST", "/mappings", one).await.0, 201);
    let other = json!({"request": {"url": "/nope"}, "response": {}});
    let a = send(
        addr,
        "POST",
        "/__admin/mappings/remove",
        &[],
        &other.to_string(),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(get(addr, "/one").await.body, "1");
    let a = send(addr, "POST", "/__admin/mappings/remove", &[], "[1]").await;
    assert_eq!(a.status, 422, "{}", a.body);
    server.shutdown().await;
}

#[tokio::test]
async fn a_stub_id_that_is_taken_is_refused_with_wiremocks_duplicate_error() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let s = json!({"id": "11111111-0000-0000-0000-000000000001",
        "request": {"url": "/a"}, "response": {"body": "first"}});
    assert_eq!(admin(addr, "POST", "/mappings", s.clone()).await.0, 201);
    let mut again = s;
    again["response"]["body"] = json!("second");
    let (status, body) = admin(addr, "POST", "/mappings", again).await;
    assert_eq!(status, 422);
    assert_eq!(body["errors"][0]["code"], 109, "{body}");
    assert_eq!(body["errors"][0]["title"], "Duplicate stub mapping ID");
    assert_eq!(get(addr, "/a").await.body, "first");
    server.shutdown().await;
}

#[tokio::test]
async fn unmatched_serve_events_carry_wiremocks_placeholder_stub_and_the_report() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let s = json!({"id": "11111111-0000-0000-0000-000000000001",
        "request": {"urlPath": "/hit"}, "response": {"body": "ok"}});
    admin(addr, "POST", "/mappings", s).await;
    get(addr, "/miss").await;
    get(addr, "/hit?n=1").await;
    get(addr, "/hit?n=2").await;
    get(addr, "/miss2").await;

    let (_, all) = admin(addr, "GET", "/requests?unmatched=true", Value::Null).await;
    let events = all["requests"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{all}");
    let e = &events[0];
    assert_eq!(e["request"]["url"], "/miss2");
    assert_eq!(e["wasMatched"], false);
    assert_eq!(
        e["responseDefinition"],
        json!({"status": 404, "fromConfiguredStub": false})
    );
    assert_eq!(
        e["response"],
        json!({"status": 404, "bodyAsBase64": "", "body": ""})
    );
    assert_eq!(e["subEvents"][0]["type"], "REQUEST_NOT_MATCHED");
    let report = e["subEvents"][0]["data"]["report"].as_str().unwrap();
    assert!(report.contains("Request was not matched"), "{report}");
    let placeholder = &e["stubMapping"];
    assert_eq!(placeholder["request"], json!({"method": "ANY"}));
    assert_eq!(placeholder["id"], events[1]["stubMapping"]["id"]);

    let (_, hits) = admin(
        addr,
        "GET",
        "/requests?unmatched=false&matchingStub=11111111-0000-0000-0000-000000000001",
        Value::Null,
    )
    .await;
    let urls: Vec<&str> = hits["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["request"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["/hit?n=2", "/hit?n=1"]);
    let (status, bad) = admin(addr, "GET", "/requests?matchingStub=nope", Value::Null).await;
    assert_eq!((status, &bad["errors"][0]["code"]), (400, &json!(15)));

    // `find` lists oldest first, as WireMock does.
    let (_, found) = admin(addr, "POST", "/requests/find", json!({"urlPath": "/hit"})).await;
    let urls: Vec<&str> = found["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["/hit?n=1", "/hit?n=2"]);
    server.shutdown().await;
}

#[tokio::test]
async fn serve_events_are_removed_by_the_metadata_of_the_stub_that_answered() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    for (url, team) in [("/a", "alpha"), ("/b", "beta")] {
        let s = json!({"request": {"url": url}, "response": {}, "metadata": {"team": team}});
        admin(addr, "POST", "/mappings", s).await;
    }
    for url in ["/a", "/b", "/a", "/none"] {
        get(addr, url).await;
    }
    let pattern = json!({"matchesJsonPath": {"expression": "$.team", "equalTo": "alpha"}});
    let (status, gone) = admin(
        addr,
        "POST",
        "/requests/remove-by-metadata",
        pattern.clone(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(gone["serveEvents"].as_array().unwrap().len(), 2, "{gone}");
    assert_eq!(gone["serveEvents"][0]["request"]["url"], "/a");
    let (_, left) = admin(addr, "GET", "/requests", Value::Null).await;
    assert_eq!(left["meta"]["total"], 2, "{left}");
    let (_, none) = admin(addr, "POST", "/requests/remove-by-metadata", pattern).await;
    assert_eq!(none, json!({"serveEvents": []}));
    let (status, _) = admin(
        addr,
        "POST",
        "/requests/remove-by-metadata",
        json!({"x": 1}),
    )
    .await;
    assert_eq!(status, 422);
    server.shutdown().await;
}

#[tokio::test]
async fn saved_stubs_are_persistent_and_removing_them_deletes_their_files() {
    let dir = crate::common::root(&[
        ("mappings/file.json", &stub("/file", "file")),
        (
            "mappings/list.json",
            &json!({"mappings": [{"request": {"url": "/list"}, "response": {}}]}).to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let id = "11111111-0000-0000-0000-000000000003";
    let s = json!({"id": id, "request": {"method": "GET", "url": "/imp/3"}, "response": {}});
    admin(addr, "POST", "/mappings", s).await;
    assert_eq!(
        admin(addr, "POST", "/mappings/save", Value::Null).await.0,
        200
    );
    // WireMock's file name: method and URL when there is no name, sanitised.
    let saved = dir.path().join(format!("mappings/get-imp3-{id}.json"));
    assert!(saved.exists());
    let (_, one) = admin(addr, "GET", &format!("/mappings/{id}"), Value::Null).await;
    assert_eq!(one["persistent"], true, "{one}");
    let file_text = std::fs::read_to_string(dir.path().join("mappings/file.json")).unwrap();
    assert!(file_text.contains("\"persistent\": true"), "{file_text}");

    assert_eq!(
        admin(addr, "DELETE", &format!("/mappings/{id}"), Value::Null)
            .await
            .0,
        200
    );
    assert!(!saved.exists());
    // DELETE /mappings takes the files along, but not a list file (read-only to WireMock).
    assert_eq!(admin(addr, "DELETE", "/mappings", Value::Null).await.0, 200);
    assert!(!dir.path().join("mappings/file.json").exists());
    assert!(dir.path().join("mappings/list.json").exists());
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(list["meta"]["total"], 0, "{list}");
    // A reset brings back what is left on disk, and clears the journal.
    get(addr, "/x").await;
    admin(addr, "POST", "/mappings/reset", Value::Null).await;
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(list["meta"]["total"], 1, "{list}");
    let (_, journal) = admin(addr, "GET", "/requests", Value::Null).await;
    assert_eq!(journal["meta"]["total"], 0, "{journal}");
    server.shutdown().await;
}

#[tokio::test]
async fn scenarios_settings_and_recordings_answer_as_wiremock_does() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let s = json!({"request": {"url": "/flow"}, "response": {}, "scenarioName": "flow",
        "requiredScenarioState": "Started", "newScenarioState": "two"});
    admin(addr, "POST", "/mappings", s).await;
    assert_eq!(
        admin(
            addr,
            "PUT",
            "/scenarios/flow/state",
            json!({"state": "two"})
        )
        .await
        .0,
        200
    );
    let (status, body) = admin(
        addr,
        "PUT",
        "/scenarios/flow/state",
        json!({"state": "three"}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body,
        json!({"errors": [{"code": 11, "title": "Scenario flow does not support state three"}]})
    );

    let (_, settings) = admin(addr, "GET", "/settings", Value::Null).await;
    assert_eq!(settings, json!({"settings": {"proxyPassThrough": true}}));
    admin(
        addr,
        "POST",
        "/settings",
        json!({"fixedDelay": 0, "unknown": 1}),
    )
    .await;
    let (_, settings) = admin(addr, "GET", "/settings", Value::Null).await;
    assert_eq!(
        settings,
        json!({"settings": {"fixedDelay": 0, "proxyPassThrough": false}})
    );

    let (status, body) = admin(addr, "POST", "/recordings/stop", Value::Null).await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"][0]["code"], 30);
    assert_eq!(
        admin(addr, "POST", "/recordings/start", json!({})).await.0,
        200
    );
    let target = json!({"targetBaseUrl": "http://127.0.0.1:9"});
    assert_eq!(
        admin(addr, "POST", "/recordings/start", target).await.0,
        200
    );
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(
        list["meta"]["total"], 1,
        "a start while recording adds no proxy: {list}"
    );
    let (status, stopped) = admin(addr, "POST", "/recordings/stop", Value::Null).await;
    assert_eq!((status, stopped), (200, json!({"mappings": []})));
    server.shutdown().await;
}

#[tokio::test]
async fn proxy_targets_are_refused_by_address_by_resolved_name_and_by_wildcard() {
    let (_up_dir, up) = upstream().await;
    let port = up.http_addr.port();
    let dir = crate::common::root(&[(
        "mappings/proxy.json",
        &json!({"mappings": [
            {"request": {"urlPath": "/by-address/svc/counter"},
             "response": {"proxyBaseUrl": format!("http://127.0.0.1:{port}"), "proxyUrlPrefixToRemove": "/by-address"}},
            {"request": {"urlPath": "/by-name/svc/counter"},
             "response": {"proxyBaseUrl": format!("http://localhost:{port}"), "proxyUrlPrefixToRemove": "/by-name"}}
        ]})
        .to_string(),
    )]);
    let start_with = |allow: Option<&str>, deny: Option<&str>| {
        let mut opts = crate::common::options(dir.path());
        opts.allow_proxy_targets = allow.map(str::to_owned);
        opts.deny_proxy_targets = deny.map(str::to_owned);
        decoy::server::start(opts)
    };
    let denied = "The target proxy address is denied in WireMock's configuration.";

    // Denied by address: both the literal address and a name resolving to it.
    let server = start_with(None, Some("10.0.0.1,127.0.0.1-127.0.0.9"))
        .await
        .unwrap();
    for path in ["/by-address/svc/counter", "/by-name/svc/counter"] {
        let a = get(server.http_addr, path).await;
        assert_eq!(a.status, 500, "{path}: {}", a.body);
        assert_eq!(a.body, denied, "{path}");
        assert_eq!(a.header("content-type"), Some("text/plain"));
    }
    server.shutdown().await;

    // Denied by name wildcard: the address itself is not a name.
    let server = start_with(None, Some("local*")).await.unwrap();
    assert_eq!(
        get(server.http_addr, "/by-name/svc/counter").await.body,
        denied
    );
    let a = get(server.http_addr, "/by-address/svc/counter").await;
    assert_eq!(a.status, 200, "{}", a.body);
    server.shutdown().await;

    // An allow list lets through only what it names.
    let server = start_with(Some("127.0.0.1"), None).await.unwrap();
    let a = get(server.http_addr, "/by-address/svc/counter").await;
    assert_eq!(a.status, 200, "{}", a.body);
    server.shutdown().await;
    let server = start_with(Some("10.0.0.0-10.255.255.255"), None)
        .await
        .unwrap();
    assert_eq!(
        get(server.http_addr, "/by-address/svc/counter").await.body,
        denied
    );
    server.shutdown().await;

    // A bad entry stops the start, naming the flag and the entry.
    let Err(err) = start_with(Some("10.0.0.256"), None).await else {
        panic!("a bad entry must stop the start");
    };
    assert_eq!(
        err.to_string(),
        "--allow-proxy-targets: 10.0.0.256 is not a valid IP address"
    );
    up.shutdown().await;
}

#[tokio::test]
async fn the_journal_writes_the_host_and_absolute_url_as_wiremock_does() {
    // Checked against WireMock 3.13.2: an IPv6 host keeps its brackets, and the
    // absolute URL leaves out the scheme's default port.
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/b"}, "response": {"status": 200}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let cases = [
        ("[::1]:9", "http://[::1]:9/b?x=1", "[::1]", 9),
        ("[::1]", "http://[::1]/b?x=1", "[::1]", 80),
        ("example.com", "http://example.com/b?x=1", "example.com", 80),
        (
            "example.com:80",
            "http://example.com/b?x=1",
            "example.com",
            80,
        ),
        (
            "example.com:81",
            "http://example.com:81/b?x=1",
            "example.com",
            81,
        ),
    ];
    for (host, ..) in cases {
        let a = send(server.http_addr, "GET", "/b?x=1", &[("host", host)], "").await;
        assert_eq!(a.status, 200, "{host}");
    }
    let (_, journal) = admin(server.http_addr, "GET", "/requests", Value::Null).await;
    let mut seen: Vec<(String, String, String, u64)> = journal["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let r = &e["request"];
            (
                r["headers"]["Host"].as_str().unwrap_or_default().to_owned(),
                r["absoluteUrl"].as_str().unwrap_or_default().to_owned(),
                r["host"].as_str().unwrap_or_default().to_owned(),
                r["port"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    seen.reverse();
    let want: Vec<(String, String, String, u64)> = cases
        .iter()
        .map(|(h, url, host, port)| (h.to_string(), url.to_string(), host.to_string(), *port))
        .collect();
    assert_eq!(seen, want);
    server.shutdown().await;
}

#[test]
fn a_reload_of_the_mq_files_prints_its_new_warnings_once() {
    use crate::common::process::{Process, lines_with, serve_logged, until_said};
    // Nothing listens there: the receivers retry in the background, which is all
    // this needs.
    let uri = format!("amqp://127.0.0.1:{}", crate::common::free_port());
    let topic = |threads: u64| {
        json!({"request": {"destination": {"name": "prices", "type": "TOPIC"}},
               "response": {"text": "ok"}, "receiveThreads": threads})
        .to_string()
    };
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "a1", "connectionData": {"type": "amqp1", "uri": uri}}])
                .to_string(),
        ),
        ("mq-mappings/topic.json", &topic(1)),
    ]);
    let (child, log) = serve_logged(dir.path());
    let _child = Process(child);
    let threads = "mq-mappings/topic.json: mapping #0: receiveThreads: 3 receivers on an \
                   AMQP 1.0 topic would each get every publication; 1 is used";

    write(dir.path(), "mq-mappings/topic.json", &topic(3));
    until_said(&log, threads);

    // Another file changes, with a warning of its own: the first is still there, and
    // not said again.
    write(
        dir.path(),
        "mq-mappings/queue.json",
        &json!({"request": {"destination": "Q"}, "colour": "red"}).to_string(),
    );
    let colour = "mq-mappings/queue.json: mapping #0: colour: unknown field, ignored";
    until_said(&log, colour);
    let log = log.lock().unwrap().clone();
    assert_eq!(lines_with(&log, threads), 1, "{log}");
    assert_eq!(lines_with(&log, colour), 1, "{log}");
}

#[test]
fn a_reload_of_a_mapping_file_prints_its_new_warnings_once() {
    use crate::common::process::{Process, lines_with, serve_logged, until_said};
    let stub = |extra: &str| {
        let mut m = json!({"request": {"urlPath": "/w"}, "response": {"status": 200}});
        if !extra.is_empty() {
            m[extra] = json!(1);
        }
        m.to_string()
    };
    let dir = crate::common::root(&[("mappings/w.json", &stub(""))]);
    let (child, log) = serve_logged(dir.path());
    let _child = Process(child);
    // A typo'd field written while decoy runs is said, as it would be at start.
    write(dir.path(), "mappings/w.json", &stub("priorty"));
    let typo = "mappings/w.json: mapping #0: priorty: unknown field, ignored";
    until_said(&log, typo);
    // Another file changes, and this one is read again (a body file changed): the
    // warning still holds and is not said again.
    write(dir.path(), "mappings/x.json", &stub("colour"));
    let colour = "mappings/x.json: mapping #0: colour: unknown field, ignored";
    until_said(&log, colour);
    write(dir.path(), "__files/body.txt", "changed");
    write(dir.path(), "mappings/y.json", &stub("flavour"));
    until_said(
        &log,
        "mappings/y.json: mapping #0: flavour: unknown field, ignored",
    );
    let log = log.lock().unwrap().clone();
    assert_eq!(lines_with(&log, typo), 1, "{log}");
    assert_eq!(lines_with(&log, colour), 1, "{log}");
}
