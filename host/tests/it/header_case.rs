//! Header names keep their spelling where WireMock shows them: the journal (requests
//! read over HTTP/1) and recorded stubs (an upstream's answer), while matching stays
//! case-insensitive. The expected spellings were checked against WireMock 3.13.2.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{get, options, root, root_with_stubs, send};

/// Writes `raw` on one connection and reads until the server closes it.
async fn raw(addr: SocketAddr, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

async fn admin(addr: SocketAddr, method: &str, path: &str, body: Value) -> Value {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let a = send(addr, method, &format!("/__admin{path}"), &[], &text).await;
    serde_json::from_str(&a.body).unwrap_or(Value::Null)
}

/// The header names of the journal's requests, oldest first, by URL.
async fn journal_names(addr: SocketAddr) -> Vec<(String, Vec<String>)> {
    let v = admin(addr, "GET", "/requests", Value::Null).await;
    let mut out: Vec<(String, Vec<String>)> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let r = &e["request"];
            let names = r["headers"].as_object().unwrap().keys().cloned().collect();
            (r["url"].as_str().unwrap().to_owned(), names)
        })
        .collect();
    out.reverse();
    out
}

#[tokio::test]
async fn the_journal_shows_request_header_names_as_wiremock_does() {
    let dir = root_with_stubs(json!([
        {"request": {"url": "/hello", "headers": {"x-custom-header": {"equalTo": "a"}}},
         "response": {"status": 200, "body": "hi"}},
    ]));
    let server = crate::common::serve(dir.path()).await;
    let answer = raw(
        server.http_addr,
        b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Custom-Header: a\r\nx-lower: b\r\nACCEPT: */*\r\n\
          content-type: text/plain\r\nX-A: 1\r\nx-a: 2\r\nConnection: close\r\n\r\n",
    )
    .await;
    // Matching ignores the case, as before.
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let journal = journal_names(server.http_addr).await;
    assert_eq!(
        journal,
        [(
            "/hello".to_owned(),
            // Jetty spells the names it knows its own way, keeps the others as sent,
            // and shows a repeated name as first spelled.
            [
                "Host",
                "X-Custom-Header",
                "x-lower",
                "Accept",
                "Content-Type",
                "X-A",
                "Connection"
            ]
            .map(String::from)
            .to_vec()
        )]
    );
    // `find` (what WireMock's Java client calls) shows them alike.
    let found = admin(
        server.http_addr,
        "POST",
        "/requests/find",
        json!({"method": "GET", "url": "/hello"}),
    )
    .await;
    assert_eq!(found["requests"][0]["headers"]["X-Custom-Header"], "a");
    assert_eq!(found["requests"][0]["headers"]["X-A"], json!(["1", "2"]));
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_shows_a_stubs_answer_header_names_as_the_stub_writes_them() {
    let dir = root_with_stubs(json!([
        {"request": {"url": "/stubbed"},
         "response": {"status": 200, "headers": {"Content-Type": "text/plain", "X-Stub-Thing": "1", "x-lower": "2"}}},
    ]));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/stubbed").await.status, 200);
    let journal = admin(server.http_addr, "GET", "/requests", Value::Null).await;
    let names: Vec<&String> = journal["requests"][0]["response"]["headers"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        names,
        ["Content-Type", "X-Stub-Thing", "x-lower", "Matched-Stub-Id"]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_each_keep_their_own_header_names() {
    let server = crate::common::serve(root(&[]).path()).await;
    let answer = raw(
        server.http_addr,
        b"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-First: 1\r\n\r\nhello\
          POST /two HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Second: 2\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
          GET /three HTTP/1.1\r\nHost: x\r\nx-third: 3\r\n\r\n\
          GET /four HTTP/1.1\r\nHost: x\r\nX-Fourth: 4\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 404").count(), 4, "{answer}");
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        journal_names(server.http_addr).await,
        [
            ("/one".into(), names(&["Host", "Content-Length", "X-First"])),
            (
                "/two".into(),
                names(&["Host", "Transfer-Encoding", "X-Second"])
            ),
            ("/three".into(), names(&["Host", "x-third"])),
            ("/four".into(), names(&["Host", "X-Fourth", "Connection"])),
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_http2_request_shows_its_names_in_lower_case_as_sent() {
    let server = crate::common::serve(root(&[]).path()).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    crate::common::send_with(
        client,
        server.http_addr,
        "GET",
        "/h2",
        &[("X-Custom", "a")],
        "",
    )
    .await;
    assert_eq!(
        journal_names(server.http_addr).await,
        [("/h2".to_owned(), vec!["x-custom".to_owned()])]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn with_the_journal_off_requests_are_answered_as_before() {
    let dir = root_with_stubs(json!([
        {"request": {"url": "/a", "headers": {"X-Custom": {"equalTo": "1"}}},
         "response": {"status": 200, "body": "ok"}},
    ]));
    let mut opts = options(dir.path());
    opts.journal_entries = 0;
    let server = decoy::server::start(opts).await.unwrap();
    let answer = raw(
        server.http_addr,
        b"GET /a HTTP/1.1\r\nHost: x\r\nX-Custom: 1\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\nx-custom: 1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
    server.shutdown().await;
}

/// A service that answers every request with header names in mixed case, over
/// keep-alive connections.
async fn mixed_case_service() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        X-Upstream-Thing: one\r\nx-lower-thing: two\r\nETAG: \"e1\"\r\n\
                        Content-Length: 7\r\n\r\n{\"a\":1}";
                    if s.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

const UPSTREAM_NAMES: [&str; 4] = ["Content-Type", "X-Upstream-Thing", "x-lower-thing", "ETAG"];

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// The file of `dir` whose name starts with `prefix`, once written.
async fn wait_for_file(dir: &std::path::Path, prefix: &str) -> std::path::PathBuf {
    for _ in 0..100 {
        let found = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| {
                e.file_name().to_string_lossy().starts_with(prefix)
                    && std::fs::read_to_string(e.path()).is_ok_and(|t| t.ends_with('}'))
            });
        if let Some(e) = found {
            return e.path();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {prefix}* in {}", dir.display());
}

#[tokio::test]
async fn a_stub_file_recorded_from_a_proxy_keeps_the_upstreams_header_names() {
    let service = mixed_case_service().await;
    let dir = root(&[]);
    let mut opts = options(dir.path());
    opts.proxy_all = Some(format!("http://{service}"));
    opts.record_mappings = true;
    opts.watch = false;
    let server = decoy::server::start(opts).await.unwrap();
    // Two requests: the second goes over the pooled upstream connection.
    for path in ["/rec/one", "/rec/two"] {
        let a = get(server.http_addr, path).await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    for slug in ["rec-one", "rec-two"] {
        let mappings = dir.path().join("mappings");
        let file = wait_for_file(&mappings, &format!("mapping-{slug}-")).await;
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            sorted_keys(&m["response"]["headers"]),
            sorted(&UPSTREAM_NAMES),
            "{m}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn recordings_and_snapshots_keep_the_upstreams_header_names() {
    let service = mixed_case_service().await;
    let server = crate::common::serve(root(&[]).path()).await;
    let addr = server.http_addr;
    admin(
        addr,
        "POST",
        "/recordings/start",
        json!({"targetBaseUrl": format!("http://{service}")}),
    )
    .await;
    assert_eq!(get(addr, "/rec/one").await.status, 200);
    let stopped = admin(addr, "POST", "/recordings/stop", Value::Null).await;
    let headers = &stopped["mappings"][0]["response"]["headers"];
    assert_eq!(sorted_keys(headers), sorted(&UPSTREAM_NAMES), "{stopped}");
    let snapshot = admin(addr, "POST", "/recordings/snapshot", json!({})).await;
    let headers = &snapshot["mappings"][0]["response"]["headers"];
    assert_eq!(sorted_keys(headers), sorted(&UPSTREAM_NAMES), "{snapshot}");
    // The journal shows the proxied answer's names as the service sent them too.
    let journal = admin(addr, "GET", "/requests", Value::Null).await;
    let names = sorted_keys(&journal["requests"][0]["response"]["headers"]);
    assert_eq!(names, sorted(&UPSTREAM_NAMES), "{journal}");
    server.shutdown().await;
}
