#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Helpers for integration tests: a real server on 127.0.0.1:0 and a small client.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

pub mod brokers;
pub mod certificates;
pub mod grpc_echo;
pub mod mq;
pub mod mqtt;
pub mod process;

use bytes::Bytes;
use decoy::server::{Running, ServeOptions, start};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A port nobody listens on now (for a server told its port up front, or a client
/// that must find nothing there).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A test (or a part of one) that cannot run on this machine, for `reason`. Under
/// the README's test command (`tests/run.sh` sets `DECOY_TESTS_REQUIRE_ALL`, and
/// installs everything the tests use) that is a failure, so nothing counts as passed
/// for want of a tool; in a plain `cargo test` elsewhere the test says it skipped.
pub fn skip(reason: &str) {
    if std::env::var_os("DECOY_TESTS_REQUIRE_ALL").is_some() {
        panic!("cannot run here: {reason} (DECOY_TESTS_REQUIRE_ALL is set)");
    }
    eprintln!("skipped: {reason}");
}

/// A root directory built from `(relative path, contents)` pairs.
pub fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    std::fs::create_dir_all(dir.path().join("mappings")).expect("mkdir");
    dir
}

/// A root with one mapping file holding `stubs`.
pub fn root_with_stubs(stubs: serde_json::Value) -> tempfile::TempDir {
    root(&[(
        "mappings/stubs.json",
        &serde_json::json!({ "mappings": stubs }).to_string(),
    )])
}

pub fn options(root: &Path) -> ServeOptions {
    ServeOptions {
        root_dir: root.to_path_buf(),
        bind_address: "127.0.0.1".into(),
        port: 0,
        ..ServeOptions::default()
    }
}

pub async fn serve(root: &Path) -> Running {
    start(options(root)).await.expect("server starts")
}

/// A server whose connections are served on the test's own runtime (the `shared`
/// thread layout), for tests that measure delays in virtual time
/// (`start_paused`): the server's timers must be that runtime's.
pub async fn serve_on_test_runtime(root: &Path) -> Running {
    let mut opts = options(root);
    opts.http.layout = decoy::http::threads::Layout::Shared;
    start(opts).await.expect("server starts")
}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub reason: Option<String>,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One HTTP/1.1 request.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    send_with(
        Client::builder(TokioExecutor::new()).build_http(),
        addr,
        method,
        path,
        headers,
        body,
    )
    .await
}

pub async fn get(addr: SocketAddr, path: &str) -> Answer {
    send(addr, "GET", path, &[], "").await
}

pub async fn send_with(
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("request");
    let resp = client.request(req).await.expect("response");
    let status = resp.status().as_u16();
    let reason = resp
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Answer {
        status,
        reason,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// An admin API call with a JSON body (none for `Value::Null`): the status and the
/// answer as JSON (`Null` when it is not JSON).
pub async fn admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let a = send(addr, method, &format!("/__admin{path}"), &[], &text).await;
    let v = serde_json::from_str(&a.body).unwrap_or(serde_json::Value::Null);
    (a.status, v)
}

/// The names of the files in `dir` (none when it does not exist).
pub fn file_names(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
