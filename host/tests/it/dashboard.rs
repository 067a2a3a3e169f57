//! The live dashboard's server side: the page served without the token and its API
//! behind it (on the admin port too), the event stream, the per-second figures, and
//! the paged, filtered lists of mappings and journal entries. The page itself is
//! driven in a real browser by tests/dashboard/test_dashboard.py.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{get, send};
use decoy::server::{ServeOptions, start};

const TOKEN: &str = "s3cret";

async fn api(addr: std::net::SocketAddr, path: &str) -> Value {
    let auth = format!("Bearer {TOKEN}");
    let a = send(addr, "GET", path, &[("authorization", &auth)], "").await;
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    serde_json::from_str(&a.body).unwrap()
}

fn stubs(n: usize) -> Value {
    let mut list: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("generated {i}"),
                "request": { "method": "GET", "url": format!("/gen/{i}") },
                "response": { "status": 200, "body": "gen" },
                "metadata": { "batch": "load" },
            })
        })
        .collect();
    list.push(json!({
        "name": "hello",
        "request": { "method": "GET", "url": "/hello" },
        "response": { "status": 200, "body": "hi" },
        "metadata": { "team": "payments" },
    }));
    json!({ "mappings": list })
}

fn with_token(dir: &std::path::Path) -> ServeOptions {
    ServeOptions {
        admin_token: Some(TOKEN.into()),
        ..crate::common::options(dir)
    }
}

#[tokio::test]
async fn the_page_is_served_without_the_token_and_its_api_only_with_it() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(1).to_string())]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let page = get(addr, "/__admin/dashboard").await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        page.body.contains("/__admin/dashboard/app.js"),
        "{}",
        page.body
    );
    for asset in ["/__admin/dashboard/app.js", "/__admin/dashboard/style.css"] {
        let a = get(addr, asset).await;
        assert_eq!(a.status, 200, "{asset}");
        assert!(!a.body.is_empty(), "{asset}");
    }
    for path in [
        "/__admin/dashboard/events",
        "/__admin/dashboard/api/live",
        "/__admin/dashboard/api/mappings",
        "/__admin/dashboard/api/journal",
        "/__admin/dashboard/api/plugins",
        "/__admin/dashboard/api/problems",
    ] {
        assert_eq!(
            get(addr, path).await.status,
            401,
            "{path} without the token"
        );
    }
    api(addr, "/__admin/dashboard/api/mappings").await;
    server.shutdown().await;
}

#[tokio::test]
async fn under_basic_auth_a_browser_is_asked_for_the_credentials_on_the_dashboard_only() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(1).to_string())]);
    let mut opts = crate::common::options(dir.path());
    opts.http.admin_basic_auth = Some("tom:pw".into());
    let server = start(opts).await.unwrap();
    let addr = server.http_addr;
    let page = get(addr, "/__admin/dashboard").await;
    assert_eq!(page.status, 401);
    assert_eq!(
        page.header("www-authenticate"),
        Some("Basic realm=\"decoy admin\"")
    );
    let api = get(addr, "/__admin/mappings").await;
    assert_eq!(api.status, 401);
    assert_eq!(
        api.header("www-authenticate"),
        None,
        "WireMock's answer unchanged"
    );
    // base64("tom:pw")
    let ok = send(
        addr,
        "GET",
        "/__admin/dashboard/api/live",
        &[("authorization", "Basic dG9tOnB3")],
        "",
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    server.shutdown().await;
}

#[tokio::test]
async fn with_an_admin_port_the_dashboard_is_there_and_not_on_the_stub_port() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(1).to_string())]);
    let server = start(ServeOptions {
        admin_port: Some(0),
        ..with_token(dir.path())
    })
    .await
    .unwrap();
    let admin = server.admin_addr.unwrap();
    assert_eq!(get(admin, "/__admin/dashboard").await.status, 200);
    assert_eq!(get(admin, "/__admin/dashboard/api/live").await.status, 401);
    api(admin, "/__admin/dashboard/api/live").await;
    assert_eq!(
        get(server.http_addr, "/__admin/dashboard").await.status,
        404
    );
    server.shutdown().await;
}

#[tokio::test]
async fn each_second_keeps_the_requests_counted_in_it_and_their_percentiles() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(1).to_string())]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    for _ in 0..3 {
        assert_eq!(get(addr, "/hello").await.status, 200);
    }
    assert_eq!(get(addr, "/nowhere").await.status, 404);
    // The sampler runs by itself each second; one more sample now makes sure the
    // requests above are in some second, whenever the last tick was.
    server.admin.sample_once();
    // With no page connected the seconds are kept but no tick is rendered: its
    // totals walk every stub file.
    assert!(!server.admin.tick_rendered());
    let live = api(addr, "/__admin/dashboard/api/live").await;
    let seconds = live["seconds"].as_array().unwrap();
    let sum = |side: &str, what: &str| -> u64 {
        seconds
            .iter()
            .map(|s| s[side][what].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("http", "matched"), 3, "{live:#}");
    assert_eq!(sum("http", "unmatched"), 1, "{live:#}");
    assert_eq!(sum("mq", "matched"), 0);
    let busy = seconds
        .iter()
        .find(|s| s["http"]["matched"].as_u64().unwrap() > 0)
        .unwrap();
    let (p50, p99) = (
        busy["http"]["p50"].as_f64().unwrap(),
        busy["http"]["p99"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{busy}");
    server.shutdown().await;
}

/// Reads the event stream until `done` holds for what arrived (or 30 s pass).
async fn read_events(
    stream: &mut tokio::net::TcpStream,
    seen: &mut String,
    done: impl Fn(&str) -> bool,
) {
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done(seen) {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("the event stream went quiet")
            .unwrap();
        assert!(n > 0, "the event stream ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[tokio::test]
async fn the_event_stream_sends_the_history_then_ticks_and_ends_with_the_server() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(1).to_string())]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /__admin/dashboard/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut seen = String::new();
    read_events(&mut stream, &mut seen, |s| s.contains("event: history")).await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
    get(addr, "/hello").await;
    // A tick whose totals include the request above.
    read_events(&mut stream, &mut seen, |s| {
        s.contains("\"http\":{\"matched\":1,\"unmatched\":0}")
    })
    .await;
    let tick = seen
        .split("event: tick\ndata: ")
        .last()
        .unwrap()
        .lines()
        .next()
        .unwrap();
    let tick: Value = serde_json::from_str(tick).unwrap();
    assert_eq!(tick["totals"]["mappings"]["http"], 2, "{tick}");
    assert_eq!(tick["totals"]["journal"]["recorded"], 1, "{tick}");
    // While the page is connected, each second renders a tick for it.
    server.admin.sample_once();
    assert!(server.admin.tick_rendered());
    // Stopping the server ends the stream (an open page must not hold it up).
    server.shutdown().await;
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the stream stayed open after shutdown");
}

#[tokio::test]
async fn mappings_are_listed_a_page_at_a_time_with_their_hits_and_found_by_metadata() {
    let dir = crate::common::root(&[
        ("mappings/a.json", &stubs(250).to_string()),
        (
            "mappings/broken.json",
            r#"{"request":{"url":"/b","headers":{"Accept":{"equalTO":"x"}}},"response":{"status":200}}"#,
        ),
    ]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    for _ in 0..2 {
        get(addr, "/hello").await;
    }
    let page = api(addr, "/__admin/dashboard/api/mappings?offset=100&limit=50").await;
    assert_eq!(page["total"], 251);
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 50);
    assert_eq!(items[0]["name"], "generated 100");
    assert_eq!(items[0]["file"], "mappings/a.json");
    assert_eq!(items[0]["hits"], 0);
    let found = api(addr, "/__admin/dashboard/api/mappings?q=PAYMENTS").await;
    assert_eq!(found["total"], 1, "{found:#}");
    let hello = &found["items"][0];
    assert_eq!(hello["url"], "/hello");
    assert_eq!(hello["hits"], 2);
    assert!(hello["meanLatencyMicros"].as_f64().unwrap() > 0.0);
    assert!(hello["lastHit"].as_str().unwrap().ends_with('Z'));
    let id = hello["id"].as_str().unwrap();
    let detail = api(addr, &format!("/__admin/dashboard/api/mappings/{id}")).await;
    assert_eq!(detail["json"]["metadata"]["team"], "payments");
    let problems = api(addr, "/__admin/dashboard/api/problems").await;
    let p = &problems["problems"][0];
    assert_eq!(p["file"], "mappings/broken.json");
    assert_eq!(p["mapping"]["index"], 0);
    assert_eq!(p["field"], "request.headers.Accept.equalTO");
    assert!(
        p["reason"].as_str().unwrap().contains("did you mean"),
        "{p}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_is_paged_filtered_and_explains_a_miss_against_the_current_stubs() {
    let dir = crate::common::root(&[("mappings/a.json", &stubs(3).to_string())]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    for i in 0..3 {
        get(addr, &format!("/gen/{i}")).await;
    }
    get(addr, "/gen/x").await;
    let all = api(addr, "/__admin/dashboard/api/journal?limit=2").await;
    assert_eq!(all["total"], 4);
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    assert_eq!(all["items"][0]["url"], "/gen/x", "newest first");
    let matched = api(addr, "/__admin/dashboard/api/journal?filter=matched").await;
    assert_eq!(matched["total"], 3);
    assert_eq!(matched["items"][0]["mapping"]["name"], "generated 2");
    let missed = api(addr, "/__admin/dashboard/api/journal?filter=unmatched").await;
    assert_eq!(missed["total"], 1);
    let id = missed["items"][0]["id"].as_str().unwrap().to_owned();
    let report = api(
        addr,
        &format!("/__admin/dashboard/api/journal/{id}/near-miss"),
    )
    .await;
    let text = report["report"].as_str().unwrap();
    assert!(text.contains("Request was not matched"), "{text}");
    assert!(text.contains("/gen/x"), "{text}");
    assert_eq!(report["matchesNow"], false);
    let auth = format!("Bearer {TOKEN}");
    let made = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[("authorization", &auth)],
        r#"{"request":{"method":"GET","url":"/gen/x"},"response":{"status":202}}"#,
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let report = api(
        addr,
        &format!("/__admin/dashboard/api/journal/{id}/near-miss"),
    )
    .await;
    assert_eq!(report["matchesNow"], true);
    assert_eq!(get(addr, "/gen/x").await.status, 202);
    server.shutdown().await;
}

#[tokio::test]
async fn mq_mappings_are_listed_beside_http_ones_with_their_json_from_the_file() {
    // A broker that is not there: decoy serves HTTP and keeps retrying it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = crate::common::root(&[
        ("mappings/a.json", &stubs(1).to_string()),
        (
            "mq-connections.json",
            &crate::common::mq::connections(
                "rabbit",
                json!({"type": "amqp", "uri": format!("amqp://guest:guest@127.0.0.1:{port}/%2f")}),
            ),
        ),
        (
            "mq-mappings/quote.json",
            &json!({
                "mappingId": "3bc18f0b-9d95-4af1-a2f8-848210b2d8a1",
                "connectionId": "rabbit",
                "request": {"destination": {"name": "quotes", "type": "QUEUE"}},
                "response": {"text": "<quote/>"}
            })
            .to_string(),
        ),
    ]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let list = api(addr, "/__admin/dashboard/api/mappings?q=quotes").await;
    assert_eq!(list["total"], 1, "{list:#}");
    assert_eq!(list["all"], 3);
    let row = &list["items"][0];
    assert_eq!(row["kind"], "mq");
    assert_eq!(row["url"], "quotes");
    assert_eq!(row["file"], "mq-mappings/quote.json");
    let detail = api(
        addr,
        "/__admin/dashboard/api/mappings/3bc18f0b-9d95-4af1-a2f8-848210b2d8a1",
    )
    .await;
    assert_eq!(detail["json"]["response"]["text"], "<quote/>", "{detail:#}");
    server.shutdown().await;
}

#[tokio::test]
async fn grpc_problems_are_in_the_dashboards_count_and_list() {
    let dir = crate::common::root(&[
        ("mappings/a.json", &stubs(1).to_string()),
        (
            "grpc/rec/v1/echo.proto",
            crate::common::grpc_echo::ECHO_PROTO,
        ),
        (
            "grpc/broken.proto",
            "syntax = \"proto3\";\nmessage M {\n  strin x = 1;\n}\n",
        ),
        (
            "mappings/grpc.json",
            &json!({"request": {"urlPath": "/rec.v1.Echo/Shout", "method": "POST"},
                    "response": {"jsonBody": {"text": "x"}}})
            .to_string(),
        ),
    ]);
    let server = start(with_token(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let problems = api(addr, "/__admin/dashboard/api/problems").await;
    let files: Vec<&str> = problems["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["file"].as_str().unwrap())
        .collect();
    assert!(files.contains(&"grpc/broken.proto"), "{problems}");
    assert!(files.contains(&"mappings/grpc.json"), "{problems}");
    // The count the page shows is the same list's.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /__admin/dashboard/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut seen = String::new();
    read_events(&mut stream, &mut seen, |s| s.contains("event: tick")).await;
    let tick = seen
        .split("event: tick\ndata: ")
        .last()
        .unwrap()
        .lines()
        .next()
        .unwrap();
    let tick: Value = serde_json::from_str(tick).unwrap();
    assert_eq!(
        tick["totals"]["mappings"]["problems"],
        problems["problems"].as_array().unwrap().len(),
        "{tick}"
    );
    assert_eq!(tick["totals"]["mappings"]["problems"], 2, "{tick}");
    drop(stream);
    server.shutdown().await;
}
