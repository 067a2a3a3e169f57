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

    /// Each answer waits for one message on `gate` (when given).
    async fn start_gated(gate: Option<mpsc::UnboundedReceiver<()>>) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
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
    opts.webhook_concurrency = 1;
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
