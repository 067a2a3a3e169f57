//! Webhooks (`serveEventListeners` naming `webhook`) sent by a real server on port 0 to
//! a small HTTP receiver on port 0 that records every callback; and an MQ mapping's
//! webhook, through the machine's RabbitMQ.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::mpsc;

use crate::common;

/// A request the receiver got.
#[derive(Debug)]
struct Callback {
    method: String,
    uri: String,
    headers: http::HeaderMap,
    body: String,
    at: Instant,
}

impl Callback {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// An HTTP server on 127.0.0.1:0 that records each request and answers 202 (or, when
/// it was given a gate, holds each answer until the gate lets one through).
struct Receiver {
    addr: SocketAddr,
    got: mpsc::UnboundedReceiver<Callback>,
}

impl Receiver {
    async fn start() -> Receiver {
        Receiver::start_gated(None).await
    }

    /// Listening on `ip` (a loopback address) rather than 127.0.0.1.
    async fn start_on(ip: &str) -> Receiver {
        Receiver::listen(ip, None).await
    }

    /// Each answer waits for one message on `gate` (when given).
    async fn start_gated(gate: Option<mpsc::UnboundedReceiver<()>>) -> Receiver {
        Receiver::listen("127.0.0.1", gate).await
    }

    async fn listen(ip: &str, gate: Option<mpsc::UnboundedReceiver<()>>) -> Receiver {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, got) = mpsc::unbounded_channel();
        let gate = std::sync::Arc::new(tokio::sync::Mutex::new(gate));
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (tx, gate) = (tx.clone(), gate.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (tx, gate) = (tx.clone(), gate.clone());
                        async move {
                            let at = Instant::now();
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let _ = tx.send(Callback {
                                method: parts.method.to_string(),
                                uri: parts.uri.to_string(),
                                headers: parts.headers,
                                body: String::from_utf8_lossy(&body).into_owned(),
                                at,
                            });
                            if let Some(g) = gate.lock().await.as_mut() {
                                g.recv().await;
                            }
                            let mut resp = http::Response::new(Full::new(Bytes::from("ok")));
                            *resp.status_mut() = http::StatusCode::ACCEPTED;
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver { addr, got }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next callback, waiting up to 20 s.
    async fn next(&mut self) -> Callback {
        tokio::time::timeout(Duration::from_secs(20), self.got.recv())
            .await
            .expect("a callback within 20 s")
            .expect("the receiver is running")
    }

    /// Whether a callback arrives within `wait`.
    async fn any_within(&mut self, wait: Duration) -> Option<Callback> {
        tokio::time::timeout(wait, self.got.recv())
            .await
            .ok()
            .flatten()
    }
}

/// `decoy_webhooks_total{outcome}` once it reaches `n` (waiting up to 20 s), else the
/// metrics text in the panic.
async fn wait_for_count(addr: SocketAddr, outcome: &str, n: u64) {
    let line = format!("decoy_webhooks_total{{outcome=\"{outcome}\"}} {n}\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = common::get(addr, "/__admin/metrics").await.body;
        if metrics.contains(&line) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {line:?} within 20 s:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stubs_webhook_is_sent_after_the_answer_with_its_templates_rendered_from_the_original_request()
 {
    let mut rx = Receiver::start().await;
    let dir = common::root_with_stubs(json!([{
        "request": {"method": "POST", "urlPath": "/orders"},
        "response": {"status": 201, "body": "accepted"},
        "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "{{originalRequest.headers.X-Callback-Method}}",
            "url": rx.url("/callback/{{jsonPath originalRequest.body '$.id'}}?q={{originalRequest.query.tag}}"),
            "headers": {"Content-Type": "application/json", "X-Order": "{{originalRequest.headers.x-order-id}}",
                        "X-Multi": ["one", "two"]},
            "body": "{\"id\": {{jsonPath originalRequest.body '$.id'}}, \"path\": \"{{originalRequest.path}}\", \"extra\": \"{{parameters.extra}}\", \"request\": \"{{request.url}}\"}",
            "extra": "E"
        }}]
    }]));
    let server = common::serve(dir.path()).await;
    assert!(
        server.report.warnings.is_empty(),
        "{:?}",
        server.report.warnings
    );
    let answer = common::send(
        server.http_addr,
        "POST",
        "/orders?tag=t1",
        &[("X-Order-Id", "A-1"), ("X-Callback-Method", "PUT")],
        r#"{"id": 42}"#,
    )
    .await;
    assert_eq!((answer.status, answer.body.as_str()), (201, "accepted"));
    let cb = rx.next().await;
    assert_eq!(cb.method, "PUT");
    assert_eq!(cb.uri, "/callback/42?q=t1");
    assert_eq!(cb.header("content-type"), Some("application/json"));
    assert_eq!(cb.header("x-order"), Some("A-1"));
    let multi: Vec<&str> = cb
        .headers
        .get_all("x-multi")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(multi, ["one", "two"]);
    // `request` is not in a webhook's model (WireMock calls it `originalRequest`).
    assert_eq!(
        cb.body,
        r#"{"id": 42, "path": "/orders", "extra": "E", "request": ""}"#
    );
    wait_for_count(server.http_addr, "sent", 1).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_webhook_waits_for_its_fixed_or_uniform_delay_and_a_get_carries_no_body() {
    let mut rx = Receiver::start().await;
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/fixed"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": rx.url("/fixed"), "body": "late",
            "delay": {"type": "fixed", "milliseconds": 300}}}]},
        {"request": {"urlPath": "/uniform"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "url": rx.url("/uniform"), "body": "not sent with GET",
            "delay": {"type": "uniform", "lower": 200, "upper": 250}}}]}
    ]));
    let server = common::serve(dir.path()).await;
    for (path, at_least) in [("/fixed", 300), ("/uniform", 200)] {
        let sent = Instant::now();
        assert_eq!(common::get(server.http_addr, path).await.status, 200);
        let cb = rx.next().await;
        assert_eq!(cb.uri, path);
        assert!(
            cb.at.duration_since(sent) >= Duration::from_millis(at_least),
            "{path}: the callback came {:?} after the request",
            cb.at.duration_since(sent)
        );
        if path == "/fixed" {
            assert_eq!((cb.method.as_str(), cb.body.as_str()), ("POST", "late"));
        } else {
            assert_eq!((cb.method.as_str(), cb.body.as_str()), ("GET", ""));
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_dead_or_hanging_target_never_changes_or_holds_up_the_stubbed_answer() {
    // A port nothing listens on any more.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // A target that takes requests and holds every answer while `_held` lives.
    let (_held, gate) = mpsc::unbounded_channel::<()>();
    let hanging = Receiver::start_gated(Some(gate)).await;
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/dead"}, "response": {"status": 200, "body": "still here"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": format!("http://{closed}/gone"), "body": "x"}}]},
        {"request": {"urlPath": "/hanging"}, "response": {"status": 200, "body": "not held"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": hanging.url("/hang"), "body": "x"}}]}
    ]));
    let server = common::serve(dir.path()).await;
    for _ in 0..3 {
        let a = common::get(server.http_addr, "/dead").await;
        assert_eq!((a.status, a.body.as_str()), (200, "still here"));
    }
    wait_for_count(server.http_addr, "failed", 3).await;
    // If the answer waited for the webhook it would take the 30 s send timeout.
    let a = tokio::time::timeout(
        Duration::from_secs(10),
        common::get(server.http_addr, "/hanging"),
    )
    .await
    .expect("the answer does not wait for a hanging webhook target");
    assert_eq!((a.status, a.body.as_str()), (200, "not held"));
    server.shutdown().await;
}

#[tokio::test]
async fn the_older_post_serve_actions_form_is_sent_and_a_webhook_without_url_is_a_warning_not_a_lost_stub()
 {
    let mut rx = Receiver::start().await;
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/legacy"}, "response": {"body": "legacy"},
         "postServeActions": {"webhook": {"method": "POST", "url": rx.url("/legacy"), "body": "{{originalRequest.method}}"}}},
        {"request": {"urlPath": "/no-url"}, "response": {"body": "served anyway"},
         "serveEventListeners": [{"name": "webhook", "parameters": {"method": "POST"}}]}
    ]));
    let server = common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let warnings = format!("{:?}", server.report.warnings);
    assert!(
        warnings.contains("serveEventListeners[0].parameters.url") && warnings.contains("missing"),
        "{warnings}"
    );
    assert_eq!(
        common::get(server.http_addr, "/legacy").await.body,
        "legacy"
    );
    let cb = rx.next().await;
    assert_eq!((cb.uri.as_str(), cb.body.as_str()), ("/legacy", "GET"));
    assert_eq!(
        common::get(server.http_addr, "/no-url").await.body,
        "served anyway"
    );
    wait_for_count(server.http_addr, "invalid", 1).await;
    server.shutdown().await;
}

#[tokio::test]
async fn webhook_threadpool_size_caps_the_webhooks_sent_at_once() {
    let (open, gate) = mpsc::unbounded_channel();
    let mut rx = Receiver::start_gated(Some(gate)).await;
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/one"},
         "serveEventListeners": [{"name": "webhook", "parameters": {"url": rx.url("/one")}}]}
    ]));
    let mut opts = common::options(dir.path());
    opts.webhooks.concurrency = 1;
    let server = decoy::server::start(opts).await.unwrap();
    common::get(server.http_addr, "/one").await;
    common::get(server.http_addr, "/one").await;
    let first = rx.next().await;
    assert_eq!(first.uri, "/one");
    // The receiver holds the first answer: with one slot the second waits for it.
    assert!(
        rx.any_within(Duration::from_millis(500)).await.is_none(),
        "a second webhook was sent while the first one had no answer"
    );
    open.send(()).unwrap();
    let second = rx.next().await;
    assert_eq!(second.uri, "/one");
    open.send(()).unwrap();
    wait_for_count(server.http_addr, "sent", 2).await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_mq_reply_on_rabbitmq_triggers_the_mappings_webhook_templated_from_the_request_message()
{
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, ShortString};

    let _one = crate::amqp::ONE_AT_A_TIME.lock().await;
    let mut rx = Receiver::start().await;
    let (_conn, ch) = crate::amqp::channel().await;
    let names = crate::amqp::queues(&ch).await;
    let [req_q, reply_q, lost_q] = &names;
    let dir = common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "rabbit", "connectionData": {
                "type": "amqp", "uri": crate::amqp::url(), "unmatched": {"queue": lost_q}}}])
            .to_string(),
        ),
        (
            "mq-mappings/order.json",
            &json!({
                "request": {"destination": req_q, "bodyMatcher": {"contains": "<order"}},
                "response": {"text": "<accepted/>"},
                "serveEventListeners": [{"name": "webhook", "parameters": {
                    "method": "POST",
                    "url": rx.url("/orders/{{xPath originalRequest.body '/order/@id'}}"),
                    "headers": {"X-Source": "{{originalRequest.headers.source}}"},
                    "body": "queue={{originalRequest.destination}} correlation={{originalRequest.correlationId}}"
                }}]
            })
            .to_string(),
        ),
    ]);
    let server = common::serve(dir.path()).await;
    assert!(
        server.report.problems.is_empty() && server.report.warnings.is_empty(),
        "{:?} {:?}",
        server.report.problems,
        server.report.warnings
    );
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from("source"),
        AMQPValue::LongString("tests".into()),
    );
    let props = BasicProperties::default()
        .with_reply_to(reply_q.clone().into())
        .with_correlation_id("corr-7".into())
        .with_headers(headers);
    crate::amqp::publish(&ch, req_q, "<order id='17'/>", props).await;
    let (reply, _) = crate::amqp::get(&ch, reply_q, Duration::from_secs(20))
        .await
        .expect("a reply");
    assert_eq!(reply, "<accepted/>");
    let cb = rx.next().await;
    assert_eq!(
        (cb.method.as_str(), cb.uri.as_str()),
        ("POST", "/orders/17")
    );
    assert_eq!(cb.header("x-source"), Some("tests"));
    assert_eq!(cb.body, format!("queue={req_q} correlation=corr-7"));
    wait_for_count(server.http_addr, "sent", 1).await;
    server.shutdown().await;
    crate::amqp::drop_queues(&ch, &names).await;
}

/// A target that accepts every connection and never answers (nor reads), counting
/// the connections it holds.
struct DeadTarget {
    addr: SocketAddr,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl DeadTarget {
    async fn start() -> DeadTarget {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(stream);
            }
        });
        DeadTarget { addr, accepted }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The value of the metric line that starts with `name` (with its labels), 0 when
/// it is not there.
async fn metric(addr: SocketAddr, name: &str) -> u64 {
    let text = common::get(addr, "/__admin/metrics").await.body;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

/// Waits (up to 20 s) until `what` holds of the metrics, each read by [`metric`];
/// panics with the metrics text otherwise.
async fn wait_for_metrics(addr: SocketAddr, names: &[&str], what: impl Fn(&[u64]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut values = Vec::new();
        for n in names {
            values.push(metric(addr, n).await);
        }
        if what(&values) {
            return;
        }
        if Instant::now() > deadline {
            let text = common::get(addr, "/__admin/metrics").await.body;
            panic!("the metrics {names:?} = {values:?} never got there in 20 s:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_target_that_never_answers_takes_half_the_slots_and_a_healthy_target_still_gets_its_webhooks()
 {
    let dead = DeadTarget::start().await;
    let mut rx = Receiver::start().await;
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/dead"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": dead.url("/hang"), "body": "x"}}]},
        {"request": {"urlPath": "/healthy"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": rx.url("/ok/{{originalRequest.query.n}}"), "body": "y"}}]}
    ]));
    let mut opts = common::options(dir.path());
    // Longer than any wait below: a webhook to the dead target never gives its slot
    // back during the test, so a healthy webhook arrives only if it has slots of its own.
    opts.webhooks.timeout = Duration::from_secs(3600);
    let server = decoy::server::start(opts).await.unwrap();
    for _ in 0..40 {
        assert_eq!(common::get(server.http_addr, "/dead").await.status, 200);
    }
    // Half of the 10 slots are in use by the dead target, the rest of its webhooks
    // wait for them.
    wait_for_metrics(server.http_addr, &["decoy_webhooks_pending"], |v| {
        v[0] == 40
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while dead.accepted() < 5 {
        assert!(Instant::now() < deadline, "{} connections", dead.accepted());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for n in 0..5 {
        let path = format!("/healthy?n={n}");
        assert_eq!(common::get(server.http_addr, &path).await.status, 200);
    }
    let mut got: Vec<String> = Vec::new();
    for _ in 0..5 {
        got.push(rx.next().await.uri);
    }
    got.sort();
    assert_eq!(got, ["/ok/0", "/ok/1", "/ok/2", "/ok/3", "/ok/4"]);
    wait_for_count(server.http_addr, "sent", 5).await;
    assert_eq!(
        dead.accepted(),
        5,
        "the dead target holds its half of the slots, no more"
    );
    assert_eq!(metric(server.http_addr, "decoy_webhooks_pending").await, 40);
    server.shutdown().await;
}

#[tokio::test]
async fn big_webhooks_to_dead_targets_are_dropped_past_the_byte_limits_and_counted() {
    let targets = [
        DeadTarget::start().await,
        DeadTarget::start().await,
        DeadTarget::start().await,
    ];
    let stubs: Vec<_> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"request": {"method": "POST", "urlPath": format!("/big/{i}")},
             "serveEventListeners": [{"name": "webhook", "parameters": {
                "method": "POST", "url": t.url("/big"), "body": "{{{originalRequest.body}}}"}}]})
        })
        .collect();
    let dir = common::root_with_stubs(json!(stubs));
    let mut opts = common::options(dir.path());
    opts.webhooks.timeout = Duration::from_secs(3600);
    let limit: u64 = 1024 * 1024;
    opts.webhooks.max_pending_bytes = limit as usize;
    let server = decoy::server::start(opts).await.unwrap();
    let body = "b".repeat(100 * 1024);
    for target in 0..3 {
        for _ in 0..10 {
            let path = format!("/big/{target}");
            let a = common::send(server.http_addr, "POST", &path, &[], &body).await;
            assert_eq!(a.status, 200);
        }
    }
    // Each webhook holds about 100 KiB twice over until it is rendered, then once:
    // a target may hold half of the 1 MiB (five of them), and the third target
    // finds the whole of it taken.
    let names = [
        "decoy_webhooks_pending",
        "decoy_webhooks_total{outcome=\"dropped\"}",
        "decoy_webhooks_dropped_total{limit=\"target-bytes\"}",
        "decoy_webhooks_dropped_total{limit=\"bytes\"}",
        "decoy_webhooks_pending_bytes",
    ];
    wait_for_metrics(server.http_addr, &names, |v| {
        v[0] + v[1] == 30 && v[4] < v[0] * 110 * 1024
    })
    .await;
    let values = {
        let mut v = Vec::new();
        for n in names {
            v.push(metric(server.http_addr, n).await);
        }
        v
    };
    let [pending, dropped, by_target, by_total, bytes] = values[..] else {
        unreachable!()
    };
    assert!(bytes <= limit, "{bytes} bytes pending");
    assert!(pending >= 5, "{values:?}");
    assert_eq!(dropped, by_target + by_total, "{values:?}");
    assert!(
        by_target >= 5,
        "the first target's sixth and later: {values:?}"
    );
    assert!(
        by_total >= 1,
        "the third target found the limit reached: {values:?}"
    );
    assert_eq!(
        metric(
            server.http_addr,
            "decoy_webhooks_dropped_total{limit=\"pending\"}"
        )
        .await,
        0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn deny_proxy_targets_refuses_a_webhook_url_templated_from_the_request() {
    let mut rx = Receiver::start().await;
    let stub = json!([{"request": {"urlPath": "/notify"},
        "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": "http://{{originalRequest.query.host}}/internal-admin", "body": "x"}}]}]);
    let dir = common::root_with_stubs(stub);
    let mut opts = common::options(dir.path());
    opts.deny_proxy_targets = Some("127.0.0.1,localhost".into());
    let server = decoy::server::start(opts).await.unwrap();
    let port = rx.addr.port();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let a = common::get(server.http_addr, &format!("/notify?host={host}")).await;
        assert_eq!(a.status, 200, "the stub still answers");
    }
    wait_for_count(server.http_addr, "denied", 2).await;
    assert!(rx.got.try_recv().is_err(), "a denied target got a webhook");
    // Another address is allowed: the rule, not every webhook, refused them.
    match tokio::net::TcpListener::bind("127.0.0.2:0").await {
        Err(e) => crate::common::skip(&format!(
            "the allowed-address half: 127.0.0.2 cannot be bound ({e})"
        )),
        Ok(probe) => {
            drop(probe);
            let mut other = Receiver::start_on("127.0.0.2").await;
            let host = other.addr.to_string();
            common::get(server.http_addr, &format!("/notify?host={host}")).await;
            assert_eq!(other.next().await.uri, "/internal-admin");
        }
    }
    server.shutdown().await;

    // A name allowed as written is still refused when it resolves to a denied address.
    let dir = common::root_with_stubs(json!([{"request": {"urlPath": "/notify"},
        "serveEventListeners": [{"name": "webhook", "parameters": {
            "url": "http://{{originalRequest.query.host}}/internal-admin"}}]}]));
    let mut opts = common::options(dir.path());
    opts.deny_proxy_targets = Some("127.0.0.1".into());
    let server = decoy::server::start(opts).await.unwrap();
    common::get(server.http_addr, &format!("/notify?host=localhost:{port}")).await;
    wait_for_count(server.http_addr, "denied", 1).await;
    assert!(rx.got.try_recv().is_err(), "localhost got a webhook");
    server.shutdown().await;
}

#[tokio::test]
async fn a_webhook_calling_its_own_stub_stops_at_the_hop_limit() {
    let dir = common::root(&[]);
    let server = common::serve(dir.path()).await;
    let addr = server.http_addr;
    // Its own hop header is replaced by decoy's count, so it cannot reset the count.
    let (status, _) = common::admin(
        addr,
        "POST",
        "/mappings",
        json!({
            "request": {"urlPath": "/loop"},
            "serveEventListeners": [{"name": "webhook", "parameters": {
                "url": format!("http://{addr}/loop"), "headers": {"Decoy-Webhook-Hops": "0"}}}]
        }),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(common::get(addr, "/loop").await.status, 200);
    wait_for_count(addr, "looped", 1).await;
    wait_for_count(addr, "sent", 5).await;
    wait_for_metrics(addr, &["decoy_webhooks_pending"], |v| v[0] == 0).await;
    let (_, journal) = common::admin(addr, "GET", "/requests", serde_json::Value::Null).await;
    let mut hops: Vec<String> = journal["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let headers = &e["request"]["headers"];
            let h = headers
                .as_object()
                .and_then(|h| {
                    h.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("decoy-webhook-hops"))
                })
                .map(|(_, v)| v.as_str().unwrap_or_default().to_owned());
            h.unwrap_or_else(|| "-".into())
        })
        .collect();
    hops.sort();
    assert_eq!(hops, ["-", "1", "2", "3", "4", "5"]);
    assert_eq!(
        metric(addr, "decoy_webhooks_total{outcome=\"sent\"}").await,
        5
    );
    server.shutdown().await;
}

#[tokio::test]
async fn warnings_about_webhooks_not_sent_are_throttled_to_a_few_lines_and_a_summary() {
    use std::io::BufRead as _;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dir = common::root_with_stubs(json!([
        {"request": {"urlPath": "/fail"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": format!("http://{closed}/gone"), "body": "x"}}]},
        {"request": {"method": "POST", "urlPath": "/drop"},
         "serveEventListeners": [{"name": "webhook", "parameters": {
            "method": "POST", "url": format!("http://{closed}/never"), "body": "x"}}]}
    ]));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args(["serve", "--port", "0", "--bind-address", "127.0.0.1"])
        // The request kept for rendering a /drop webhook alone is over this; a
        // /fail one takes under 1 KB of it, so even 100 of them waiting at once on
        // a loaded machine stay within their target's half.
        .args(["--max-pending-webhook-bytes", "200000", "--root-dir"])
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let port: u16 = ready
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {ready:?}"));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let big = "d".repeat(300_000);
    for _ in 0..200 {
        assert_eq!(common::get(addr, "/fail").await.status, 200);
        assert_eq!(
            common::send(addr, "POST", "/drop", &[], &big).await.status,
            200
        );
    }
    wait_for_count(addr, "failed", 200).await;
    wait_for_count(addr, "dropped", 200).await;
    // Every webhook is in a whole line or a summary's count, once the summaries are out.
    let mut webhook_lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    let counted = |lines: &[String], kind: &str, whole: &str| -> u64 {
        let mut n = 0;
        for l in lines {
            if l.contains("webhooks not logged one by one") {
                n += l
                    .split(", ")
                    .flat_map(|part| part.split(": "))
                    .filter(|p| p.contains(kind))
                    .filter_map(|p| p.split(' ').next()?.replace(',', "").parse::<u64>().ok())
                    .sum::<u64>();
            } else if l.contains(whole) {
                n += 1;
            }
        }
        n
    };
    loop {
        while let Ok(l) = lines.try_recv() {
            if l.contains("webhook") {
                webhook_lines.push(l);
            }
        }
        let failed = counted(&webhook_lines, "failed", "/gone of");
        let dropped = counted(&webhook_lines, "dropped", "dropped: the webhooks waiting");
        if failed == 200 && dropped == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{failed} failed and {dropped} dropped webhooks accounted for in 40 s:\n{}",
            webhook_lines.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    // 400 webhooks not sent: a few whole lines of each kind per 10-second window and
    // one summary line per window, not a line each.
    assert!(
        webhook_lines.len() <= 16,
        "{} lines:\n{}",
        webhook_lines.len(),
        webhook_lines.join("\n")
    );
    assert!(
        webhook_lines
            .iter()
            .any(|l| l.contains("webhooks not logged one by one")),
        "{}",
        webhook_lines.join("\n")
    );
}
