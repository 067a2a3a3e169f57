#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every response feature, through a real server on port 0.

use std::time::Duration;

use crate::common::{get, root, root_with_stubs, send, serve};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn status_status_message_and_multi_valued_headers() {
    let dir = root_with_stubs(json!([{
        "request": {"urlPath": "/s"},
        "response": {"status": 418, "statusMessage": "Short and stout", "headers": {"X-One": "1", "Set-Cookie": ["a=1", "b=2"]}}
    }]));
    let server = serve(dir.path()).await;
    let a = get(server.http_addr, "/s").await;
    assert_eq!(a.status, 418);
    assert_eq!(a.reason.as_deref(), Some("Short and stout"));
    assert_eq!(a.header("x-one"), Some("1"));
    let cookies: Vec<_> = a
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert!(a.header("matched-stub-id").is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn body_json_body_base64_body_and_body_file_name() {
    let dir = root(&[
        ("__files/nested/page.html", "<h1>from a file</h1>"),
        (
            "mappings/bodies.json",
            &json!({"mappings": [
                {"request": {"urlPath": "/body"}, "response": {"body": "plain"}},
                {"request": {"urlPath": "/json"}, "response": {"jsonBody": {"a": [1, 2]}}},
                {"request": {"urlPath": "/b64"}, "response": {"base64Body": "aGVsbG8="}},
                {"request": {"urlPath": "/file"}, "response": {"bodyFileName": "nested/page.html"}}
            ]})
            .to_string(),
        ),
    ]);
    let server = serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/body").await.body, "plain");
    assert_eq!(get(server.http_addr, "/json").await.body, r#"{"a":[1,2]}"#);
    assert_eq!(get(server.http_addr, "/b64").await.body, "hello");
    let f = get(server.http_addr, "/file").await;
    assert_eq!(f.body, "<h1>from a file</h1>");
    assert_eq!(f.header("content-length"), Some("20"));
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn fixed_delays_wait_before_answering() {
    let dir = root_with_stubs(
        json!([{"request": {"urlPath": "/slow"}, "response": {"body": "late", "fixedDelayMilliseconds": 1500}}]),
    );
    let server = crate::common::serve_on_test_runtime(dir.path()).await;
    let t0 = tokio::time::Instant::now();
    let a = get(server.http_addr, "/slow").await;
    // Virtual time (the clock is paused and auto-advances), so this cannot flake.
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(a.body, "late");
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn delay_distributions_are_sampled_per_request() {
    let dir = root_with_stubs(json!([
        {"request": {"urlPath": "/u"}, "response": {"delayDistribution": {"type": "uniform", "lower": 200, "upper": 300}}},
        {"request": {"urlPath": "/f"}, "response": {"delayDistribution": {"type": "fixed", "milliseconds": 700}}},
        {"request": {"urlPath": "/l"}, "response": {"delayDistribution": {"type": "lognormal", "median": 100, "sigma": 0.1, "maxValue": 400}}}
    ]));
    let server = crate::common::serve_on_test_runtime(dir.path()).await;
    for (path, min, max) in [("/u", 200, 300), ("/f", 700, 700), ("/l", 1, 400)] {
        let t0 = tokio::time::Instant::now();
        assert_eq!(get(server.http_addr, path).await.status, 200);
        let ms = t0.elapsed().as_millis();
        assert!(ms >= min && ms <= max + 5, "{path}: {ms} ms");
    }
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn chunked_dribble_delay_spreads_the_body_over_time() {
    let dir = root_with_stubs(
        json!([{"request": {"urlPath": "/drip"}, "response": {"body": "0123456789", "chunkedDribbleDelay": {"numberOfChunks": 5, "totalDuration": 1000}}}]),
    );
    let server = crate::common::serve_on_test_runtime(dir.path()).await;
    let t0 = tokio::time::Instant::now();
    let a = get(server.http_addr, "/drip").await;
    assert_eq!(a.body, "0123456789");
    assert!(
        t0.elapsed() >= Duration::from_millis(800),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(a.header("transfer-encoding"), Some("chunked"));
    server.shutdown().await;
}

/// Sends a raw HTTP/1.1 request and reads until the server closes.
async fn raw(addr: std::net::SocketAddr, path: &str) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    Ok(buf)
}

#[tokio::test]
async fn faults_break_the_connection_as_named() {
    let dir = root_with_stubs(json!([
        {"request": {"urlPath": "/reset"}, "response": {"fault": "CONNECTION_RESET_BY_PEER"}},
        {"request": {"urlPath": "/empty"}, "response": {"fault": "EMPTY_RESPONSE"}},
        {"request": {"urlPath": "/malformed"}, "response": {"fault": "MALFORMED_RESPONSE_CHUNK"}},
        {"request": {"urlPath": "/random"}, "response": {"fault": "RANDOM_DATA_THEN_CLOSE"}},
        {"request": {"urlPath": "/ok"}, "response": {"body": "still here"}}
    ]));
    let server = serve(dir.path()).await;
    let reset = raw(server.http_addr, "/reset").await;
    assert_eq!(
        reset.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset)
    );
    assert_eq!(raw(server.http_addr, "/empty").await.unwrap(), b"");
    let malformed = raw(server.http_addr, "/malformed").await.unwrap();
    let text = String::from_utf8_lossy(&malformed);
    assert!(
        text.starts_with("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        "{text}"
    );
    assert!(
        text.ends_with("lskdu018973t09sylgasjkfg1][]'./.sdlv"),
        "{text}"
    );
    let random = raw(server.http_addr, "/random").await.unwrap();
    assert!(!random.is_empty() && !random.starts_with(b"HTTP/"));
    // The server itself is unharmed.
    assert_eq!(get(server.http_addr, "/ok").await.body, "still here");
    server.shutdown().await;
}

#[tokio::test]
async fn http2_with_prior_knowledge_is_served_on_the_plain_port() {
    let dir =
        root_with_stubs(json!([{"request": {"urlPath": "/h2"}, "response": {"body": "over h2"}}]));
    let server = serve(dir.path()).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = http::Request::get(format!("http://{}/h2", server.http_addr))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"over h2");
    server.shutdown().await;
}

#[tokio::test]
async fn https_negotiates_h2_by_alpn_with_a_given_certificate() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = root(&[
        ("cert.pem", &cert.cert.pem()),
        ("key.pem", &cert.key_pair.serialize_pem()),
        (
            "mappings/s.json",
            &json!({"request": {"urlPath": "/tls"}, "response": {"body": "secure"}}).to_string(),
        ),
    ]);
    let mut opts = crate::common::options(dir.path());
    opts.https_port = Some(0);
    opts.https_cert = Some(dir.path().join("cert.pem"));
    opts.https_key = Some(dir.path().join("key.pem"));
    let server = decoy::server::start(opts).await.unwrap();
    let addr = server.https_addr.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("https://localhost:{}/tls", addr.port()))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"secure");
    server.shutdown().await;
}

#[tokio::test]
async fn https_starts_with_a_generated_certificate_when_none_is_given() {
    let dir = root_with_stubs(json!([]));
    let mut opts = crate::common::options(dir.path());
    opts.https_port = Some(0);
    let server = decoy::server::start(opts).await.unwrap();
    assert!(server.https_addr.is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn request_bodies_over_the_limit_get_413_and_the_server_goes_on() {
    let dir = root_with_stubs(
        json!([{"request": {"method": "POST", "urlPath": "/up"}, "response": {"body": "took it"}}]),
    );
    let mut opts = crate::common::options(dir.path());
    opts.http.max_body = 1024;
    let server = decoy::server::start(opts).await.unwrap();
    let big = "x".repeat(5000);
    assert_eq!(
        send(server.http_addr, "POST", "/up", &[], &big)
            .await
            .status,
        413
    );
    // Without a content-length (chunked), the limit still holds. The request goes in
    // one write: the server may answer and close as soon as the limit is passed, and
    // a write after that would fail (a broken pipe), which is not what is tested.
    let mut s = TcpStream::connect(server.http_addr).await.unwrap();
    let mut request =
        b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        request.extend_from_slice(format!("{:x}\r\n{}\r\n", 600, "y".repeat(600)).as_bytes());
    }
    request.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&request).await.unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    assert_eq!(
        send(server.http_addr, "POST", "/up", &[], "small")
            .await
            .body,
        "took it"
    );
    server.shutdown().await;
}

/// The threads of process `pid`, from `/proc`.
fn thread_count(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Threads:")
                .map(|n| n.trim().parse().unwrap())
        })
        .unwrap()
}

/// Counted in a `decoy serve` process of its own: the threads of this test process
/// also grow and shrink with every other test's server running beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_delayed_requests_wait_on_timers_not_threads() {
    use std::io::BufRead;
    let dir = root_with_stubs(
        json!([{"request": {"urlPath": "/wait"}, "response": {"body": "done", "fixedDelayMilliseconds": 1500}}]),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--no-watch",
            "--root-dir",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in decoy's ready line {line:?}"));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(get(addr, "/nothing").await.status, 404);
    let before = thread_count(child.id());
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            tokio::spawn(async move {
                let mut s = TcpStream::connect(addr).await.unwrap();
                s.write_all(b"GET /wait HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await
                    .unwrap();
                let mut buf = Vec::new();
                s.read_to_end(&mut buf).await.unwrap();
                String::from_utf8_lossy(&buf).ends_with("done")
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let during = thread_count(child.id());
    let mut answered = 0;
    for t in tasks {
        answered += usize::from(t.await.unwrap());
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        during <= before + 4,
        "decoy's threads grew from {before} to {during} while 1,000 requests waited"
    );
    assert_eq!(answered, 1000, "every delayed request is answered");
}

#[tokio::test]
async fn garbage_on_the_wire_never_takes_the_server_down() {
    let dir =
        root_with_stubs(json!([{"request": {"urlPath": "/ok"}, "response": {"body": "fine"}}]));
    let server = serve(dir.path()).await;
    let inputs: [&[u8]; 6] = [
        b"\x00\x01\x02garbage\r\n\r\n",
        b"GET /ok HTTP/9.9\r\n\r\n",
        b"GET /ok HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff",
        b"GET /%zz%%?a=%ff HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /ok HTTP/1.1\r\nHost: x\r\nCookie: ;;;=;=a\r\nContent-Type: multipart/form-data; boundary=\r\n\r\n",
    ];
    for input in inputs {
        let mut s = TcpStream::connect(server.http_addr).await.unwrap();
        let _ = s.write_all(input).await;
        let _ = s.shutdown().await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut sink)).await;
    }
    assert_eq!(get(server.http_addr, "/ok").await.body, "fine");
    server.shutdown().await;
}
