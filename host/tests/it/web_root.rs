//! Files from `__files`: served as a web root to a GET no stub matches (streamed,
//! whatever their size, within one bound on the bytes in flight), and read for a
//! stub's `bodyFileName` when it loads (up to `--max-body-file-size`). A file that
//! is not a regular file (a FIFO, a device) is refused with its name and kind, never
//! waited on, and the server goes on serving the rest.

use decoy::server::start;
use serde_json::json;

use crate::common::{get, options, root};

/// `len` bytes of text, each line numbered, so a chunk out of place shows.
fn numbered_text(len: usize) -> String {
    let mut s = String::with_capacity(len + 32);
    let mut i = 0u64;
    while s.len() < len {
        s.push_str(&format!("line {i:012}\n"));
        i += 1;
    }
    s.truncate(len);
    s
}

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.expect("mkfifo runs").success(), "mkfifo {path:?}");
}

#[tokio::test]
async fn a_normal_file_is_served_with_the_headers_wiremock_sends() {
    let dir = root(&[("__files/a.json", r#"{"a":1}"#), ("__files/empty.txt", "")]);
    let server = start(options(dir.path())).await.unwrap();
    let a = get(server.http_addr, "/a.json").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body, r#"{"a":1}"#);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.header("content-length"), Some("7"));
    assert_eq!(a.header("accept-ranges"), Some("bytes"));
    assert!(a.header("last-modified").is_some());
    let a = get(server.http_addr, "/empty.txt").await;
    assert_eq!((a.status, a.body.as_str()), (200, ""));
    assert_eq!(a.header("content-length"), Some("0"));
    assert_eq!(get(server.http_addr, "/missing.txt").await.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn clients_asking_at_once_for_a_file_of_many_chunks_each_get_it_whole() {
    // Streamed a chunk at a time (the bound on bytes in flight is tested in
    // webroot.rs, with a bound smaller than one file).
    let size = 5 * decoy::http::webroot::CHUNK + 17;
    let text = numbered_text(size);
    let dir = root(&[("__files/big.txt", &text)]);
    let server = start(options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let clients: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { get(addr, "/big.txt").await }))
        .collect();
    for c in clients {
        let a = c.await.unwrap();
        assert_eq!(a.status, 200);
        assert_eq!(a.header("content-length"), Some(size.to_string().as_str()));
        assert_eq!(a.header("content-type"), Some("text/plain"));
        assert!(a.body == text, "the body differs from the file");
    }
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_under_files_is_refused_with_500_and_the_server_keeps_serving() {
    let dir = root(&[("__files/ok.txt", "ok")]);
    mkfifo(&dir.path().join("__files/pipe.txt"));
    let server = start(options(dir.path())).await.unwrap();
    // No writer ever comes: WireMock never answers this request.
    let a = get(server.http_addr, "/pipe.txt").await;
    assert_eq!(a.status, 500);
    assert_eq!(
        a.body,
        "__files/pipe.txt is a FIFO (named pipe), not a regular file: only regular files are served from __files"
    );
    let a = get(server.http_addr, "/ok.txt").await;
    assert_eq!((a.status, a.body.as_str()), (200, "ok"));
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_link_to_dev_zero_under_files_is_not_served() {
    let dir = root(&[]);
    std::fs::create_dir_all(dir.path().join("__files")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("__files/zero.bin")).unwrap();
    let server = start(options(dir.path())).await.unwrap();
    // It leads out of __files: not found, as in WireMock.
    assert_eq!(get(server.http_addr, "/zero.bin").await.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_file_over_the_limit_rejects_its_stub_by_name_and_the_others_load() {
    let stubs = json!({"mappings": [
        {"name": "big", "request": {"urlPath": "/big"}, "response": {"bodyFileName": "big.txt"}},
        {"request": {"urlPath": "/small"}, "response": {"bodyFileName": "small.txt"}},
    ]});
    let dir = root(&[
        ("mappings/s.json", &stubs.to_string()),
        ("__files/big.txt", "0123456789a"),
        ("__files/small.txt", "0123456789"),
    ]);
    let mut opts = options(dir.path());
    opts.max_body_file_size = 10;
    let server = start(opts).await.unwrap();
    assert_eq!(server.report.rejected, 1, "{:?}", server.report.problems);
    let problem = server.report.problems[0].to_string();
    assert!(
        problem.starts_with("mappings/s.json: mapping #0 (name \"big\"): response.bodyFileName: cannot read body file ")
            && problem.contains("big.txt: it is 11 bytes, more than the limit of 10 bytes; a stub keeps its body in memory: raise --max-body-file-size to load it"),
        "{problem}"
    );
    let a = get(server.http_addr, "/small").await;
    assert_eq!((a.status, a.body.as_str()), (200, "0123456789"));
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_body_file_that_is_a_fifo_rejects_its_stub_at_once_and_the_others_load() {
    let stubs = json!({"mappings": [
        {"request": {"urlPath": "/pipe"}, "response": {"bodyFileName": "pipe.txt"}},
        {"request": {"urlPath": "/ok"}, "response": {"body": "ok"}},
    ]});
    let dir = root(&[("mappings/s.json", &stubs.to_string())]);
    std::fs::create_dir_all(dir.path().join("__files")).unwrap();
    mkfifo(&dir.path().join("__files/pipe.txt"));
    // WireMock loads it and its thread waits forever on the first request.
    let server = start(options(dir.path())).await.unwrap();
    assert_eq!(server.report.rejected, 1, "{:?}", server.report.problems);
    let problem = server.report.problems[0].to_string();
    assert!(
        problem.starts_with(
            "mappings/s.json: mapping #0: response.bodyFileName: cannot read body file "
        ) && problem.ends_with("pipe.txt: it is a FIFO (named pipe), not a regular file"),
        "{problem}"
    );
    assert_eq!(get(server.http_addr, "/ok").await.body, "ok");
    server.shutdown().await;
}
