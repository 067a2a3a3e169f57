//! The thread layouts (`--thread-layout`): every one serves HTTP/1.1, h2c and HTTPS
//! with ALPN, counts `--max-connections` across its threads, waits delays and drains
//! on shutdown. The rest of the suite runs in whichever layout `DECOY_THREAD_LAYOUT`
//! names (`DECOY_THREAD_LAYOUT=dealt cargo test -p decoy --test it`).

use std::sync::Arc;
use std::time::Duration;

use decoy::http::threads::Layout;
use decoy::server::{ServeOptions, start};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::common::{get, options, root};

const LAYOUTS: [Layout; 3] = [Layout::ReusePort, Layout::Dealt, Layout::Shared];

fn stubs() -> String {
    json!({"mappings": [
        {"request": {"urlPath": "/hello"}, "response": {"body": "hi"}},
        {"request": {"urlPath": "/slow"}, "response": {"body": "late", "fixedDelayMilliseconds": 300}},
    ]})
    .to_string()
}

fn in_layout(dir: &std::path::Path, layout: Layout) -> ServeOptions {
    let mut opts = options(dir);
    opts.http.layout = layout;
    opts.http.threads = Some(2);
    opts
}

/// One HTTP/1.1 request on a new connection, read to the end; the raw answer.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    try_raw_get(addr, path).await.expect("an answer")
}

/// [`raw_get`], or `None` when the connection fails (closed past the cap).
async fn try_raw_get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(out)
}

#[tokio::test]
async fn every_layout_serves_http1_h2c_and_https_by_alpn() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = root(&[
        ("cert.pem", &cert.cert.pem()),
        ("key.pem", &cert.key_pair.serialize_pem()),
        ("mappings/s.json", &stubs()),
    ]);
    for layout in LAYOUTS {
        let mut opts = in_layout(dir.path(), layout);
        opts.https_port = Some(0);
        opts.https_cert = Some(dir.path().join("cert.pem"));
        opts.https_key = Some(dir.path().join("key.pem"));
        let server = start(opts).await.unwrap();
        let addr = server.http_addr;
        if layout != Layout::Shared {
            assert!(
                thread_names().iter().any(|n| n == "decoy-http-1"),
                "{layout}: the second serving thread runs"
            );
        }

        // Enough connections at once that every thread gets some.
        let answers: Vec<_> = (0..40)
            .map(|_| tokio::spawn(async move { raw_get(addr, "/hello").await }))
            .collect();
        for a in answers {
            let a = a.await.unwrap();
            assert!(
                a.starts_with("HTTP/1.1 200") && a.ends_with("hi"),
                "{layout}: {a}"
            );
        }
        // A kept-alive connection answers request after request.
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<bytes::Bytes>>();
        for _ in 0..5 {
            let a = crate::common::send_with(client.clone(), addr, "GET", "/hello", &[], "").await;
            assert_eq!(a.body, "hi", "{layout}");
        }

        let h2c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http::<http_body_util::Full<bytes::Bytes>>();
        let a = crate::common::send_with(h2c, addr, "GET", "/hello", &[], "").await;
        assert_eq!((a.status, a.body.as_str()), (200, "hi"), "{layout}: h2c");

        let https = server.https_addr.unwrap();
        assert_ne!(https.port(), addr.port());
        for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
            let body = tls_get(https, &cert.cert, alpn, "/hello").await;
            assert_eq!(
                body,
                "hi",
                "{layout}: HTTPS over {}",
                String::from_utf8_lossy(alpn)
            );
        }
        server.shutdown().await;
    }
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

/// GET `path` over TLS, speaking what ALPN agreed (`alpn` offered alone).
async fn tls_get(
    addr: std::net::SocketAddr,
    cert: &rcgen::Certificate,
    alpn: &[u8],
    path: &str,
) -> String {
    use http_body_util::BodyExt as _;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    let io = hyper_util::rt::TokioIo::new(tls);
    let req = http::Request::get(format!("https://localhost:{}{path}", addr.port()))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = if alpn == b"h2" {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// Whether the server closed `s` (end of stream or reset) before `within`.
async fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(within, s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn the_connection_cap_counts_the_connections_of_every_thread() {
    let dir = root(&[("mappings/s.json", &stubs())]);
    for layout in LAYOUTS {
        let mut opts = in_layout(dir.path(), layout);
        opts.http.max_connections = Some(4);
        let server = start(opts).await.unwrap();
        let addr = server.http_addr;
        // Four kept-alive connections, each answered (so each is surely counted);
        // dealt round-robin, they are on both threads.
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{layout}");
            held.push(s);
        }
        for _ in 0..3 {
            let mut extra = TcpStream::connect(addr).await.unwrap();
            assert!(
                closed_by_server(&mut extra, Duration::from_secs(20)).await,
                "{layout}: a connection past the cap is closed, whichever thread takes it"
            );
        }
        drop(held.pop());
        // The freed slot is taken again (the close is noticed asynchronously).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got =
                tokio::time::timeout(Duration::from_secs(5), try_raw_get(addr, "/hello")).await;
            if let Ok(Some(a)) = got
                && a.starts_with("HTTP/1.1 200")
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{layout}: a connection is served again once one closed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server.shutdown().await;
    }
}

#[tokio::test]
async fn a_delayed_answer_in_flight_at_shutdown_is_still_sent_in_every_layout() {
    let dir = root(&[("mappings/s.json", &stubs())]);
    for layout in LAYOUTS {
        let server = start(in_layout(dir.path(), layout)).await.unwrap();
        let addr = server.http_addr;
        let slow = tokio::spawn(async move { raw_get(addr, "/slow").await });
        // The request is in (it is waiting its delay) before the shutdown starts.
        tokio::time::sleep(Duration::from_millis(100)).await;
        tokio::time::timeout(Duration::from_secs(10), server.shutdown())
            .await
            .expect("the shutdown drains and ends");
        let answer = slow.await.unwrap();
        assert!(answer.ends_with("late"), "{layout}: {answer}");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "{layout}: nothing listens after the shutdown"
        );
    }
}

#[test]
fn serving_threads_stop_when_the_runtime_that_started_them_is_dropped() {
    let dir = root(&[("mappings/s.json", &stubs())]);
    for layout in [Layout::ReusePort, Layout::Dealt] {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = runtime.block_on(async {
            let server = start(in_layout(dir.path(), layout)).await.unwrap();
            let addr = server.http_addr;
            assert!(raw_get(addr, "/hello").await.ends_with("hi"));
            // Not shut down: dropped with the runtime, as a test's server is.
            std::mem::forget(server);
            addr
        });
        drop(runtime);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "{layout}: the serving threads still listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[tokio::test]
async fn the_web_root_answers_more_requests_at_once_than_it_reads_files() {
    let mut files = vec![("mappings/s.json".to_owned(), stubs())];
    for i in 0..8 {
        files.push((format!("__files/f{i}.txt"), format!("file {i}")));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let dir = root(&files);
    for layout in LAYOUTS {
        let server = start(in_layout(dir.path(), layout)).await.unwrap();
        let addr = server.http_addr;
        let n = decoy::http::webroot::MAX_READS * 4;
        let answers: Vec<_> = (0..n)
            .map(|i| {
                tokio::spawn(async move {
                    let path = if i % 3 == 2 {
                        "/missing.txt".to_owned()
                    } else {
                        format!("/f{}.txt", i % 8)
                    };
                    (i, get(addr, &path).await)
                })
            })
            .collect();
        for a in answers {
            let (i, a) = a.await.unwrap();
            if i % 3 == 2 {
                assert_eq!(a.status, 404, "{layout}");
            } else {
                assert_eq!(
                    (a.status, a.body),
                    (200, format!("file {}", i % 8)),
                    "{layout}"
                );
            }
        }
        server.shutdown().await;
    }
}
