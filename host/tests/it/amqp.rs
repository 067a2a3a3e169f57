#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MQ virtual services against the real RabbitMQ of the machine (127.0.0.1:5672,
//! guest/guest; `DECOY_AMQP_URL` points elsewhere). Each test declares its own
//! uniquely named queues and deletes them. `tests/run.sh` (and CI) start RabbitMQ
//! when it is not running.

use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use serde_json::json;

use crate::common::mq::connections;

/// The tests run one at a time: one of them makes the broker drop every connection,
/// which would break the others' connections mid-test (`amqp_restart` takes it too).
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(crate) fn url() -> String {
    std::env::var("DECOY_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

pub(crate) async fn channel() -> (Connection, Channel) {
    let conn = Connection::connect(&url(), ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "RabbitMQ is not reachable at {}: {e} (start it with `rabbitmq-server -detached`)",
                url()
            )
        });
    let ch = conn.create_channel().await.unwrap();
    (conn, ch)
}

pub(crate) fn unique(what: &str) -> String {
    format!("decoy-test.{what}.{}", uuid::Uuid::new_v4().simple())
}

/// Declares queue `q` (not durable, as a test's queues are).
pub(crate) async fn declare_queue(ch: &Channel, q: &str) {
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Fresh request, reply and unmatched queues for one test.
pub(crate) async fn queues(ch: &Channel) -> [String; 3] {
    let names = [unique("req"), unique("reply"), unique("unmatched")];
    for q in &names {
        declare_queue(ch, q).await;
    }
    names
}

pub(crate) async fn drop_queues(ch: &Channel, names: &[String]) {
    for q in names {
        ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

pub(crate) async fn publish(ch: &Channel, q: &str, body: &str, props: BasicProperties) {
    ch.basic_publish(
        "".into(),
        q.into(),
        BasicPublishOptions::default(),
        body.as_bytes(),
        props,
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The next message on `q`, polled for up to `wait`.
pub(crate) async fn get(
    ch: &Channel,
    q: &str,
    wait: Duration,
) -> Option<(String, BasicProperties)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(m) = ch
            .basic_get(q.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let d = m.delivery;
            return Some((String::from_utf8_lossy(&d.data).into_owned(), d.properties));
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A root directory serving one queue through RabbitMQ.
fn root(request_q: &str, unmatched_q: &str) -> tempfile::TempDir {
    crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{
                "connectionId": "rabbit",
                "connectionName": "local RabbitMQ",
                "connectionData": {"type": "amqp", "uri": url(), "readConnectionsToOpen": 2,
                                   "writeConnectionsToOpen": 2, "prefetch": 50,
                                   "unmatched": {"queue": unmatched_q}}
            }])
            .to_string(),
        ),
        (
            "mq-mappings/quote.json",
            &json!({
                "mappingId": "3bc18f0b-9d95-4af1-a2f8-848210b2d8a1",
                "connectionId": "rabbit",
                "request": {"destination": {"name": request_q, "type": "QUEUE"},
                            "bodyMatcher": {"matchesXPath": "/quoteRequest[symbol='ACME']"}},
                "response": {"text": "<quote><symbol>ACME</symbol><price>42.00</price></quote>",
                             "format": "MQFMT_STRING", "properties": {"served-by": "decoy"}},
                "receiveThreads": 2,
                "sendThreads": 2
            })
            .to_string(),
        ),
    ])
}

#[tokio::test]
async fn a_request_on_rabbitmq_gets_its_mapped_reply_on_its_reply_to_queue() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    let props = BasicProperties::default()
        .with_reply_to(reply_q.clone().into())
        .with_message_id("msg-1".into())
        .with_correlation_id("corr-1".into());
    publish(
        &ch,
        &req_q,
        "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
        props,
    )
    .await;
    let (body, p) = get(&ch, &reply_q, Duration::from_secs(20))
        .await
        .expect("a reply");
    assert_eq!(
        body,
        "<quote><symbol>ACME</symbol><price>42.00</price></quote>"
    );
    assert_eq!(
        p.correlation_id().as_ref().map(|c| c.as_str()),
        Some("msg-1"),
        "MSGID_TO_CORRELID"
    );
    let header = p
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("served-by").cloned());
    match &header {
        Some(lapin::types::AMQPValue::LongString(s)) => assert_eq!(s.as_bytes(), b"decoy"),
        other => panic!("served-by header: {other:?}"),
    }

    // Not matched: moved to the unmatched queue, not lost, and not answered.
    let props = BasicProperties::default().with_reply_to(reply_q.clone().into());
    publish(
        &ch,
        &req_q,
        "<quoteRequest><symbol>OTHER</symbol></quoteRequest>",
        props,
    )
    .await;
    let (moved, _) = get(&ch, &lost_q, Duration::from_secs(20))
        .await
        .expect("moved to the unmatched queue");
    assert!(moved.contains("OTHER"), "{moved}");
    assert!(
        get(&ch, &reply_q, Duration::from_millis(300))
            .await
            .is_none()
    );

    let metrics = crate::common::get(server.http_addr, "/__admin/metrics")
        .await
        .body;
    assert!(
        metrics.contains(r#"decoy_requests_total{transport="amqp",outcome="matched"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"decoy_requests_total{transport="amqp",outcome="unmatched"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"decoy_mapping_requests_total{mapping_id="3bc18f0b-9d95-4af1-a2f8-848210b2d8a1",mapping_name=""} 1"#),
        "{metrics}"
    );
    server.shutdown().await;
    // Nothing left unacknowledged on the request queue.
    assert!(get(&ch, &req_q, Duration::from_millis(300)).await.is_none());
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

#[tokio::test]
async fn the_service_keeps_answering_after_the_broker_drops_every_connection() {
    let _one = ONE_AT_A_TIME.lock().await;
    let rabbitmqctl = std::process::Command::new("rabbitmqctl")
        .arg("--help")
        .output();
    if rabbitmqctl.is_err() {
        crate::common::skip("rabbitmqctl is not installed here (it is on CI, with the broker)");
        return;
    }
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q);
    let server = crate::common::serve(dir.path()).await;
    let ask = |n: u32| {
        BasicProperties::default()
            .with_reply_to(reply_q.clone().into())
            .with_message_id(format!("m-{n}").into())
    };
    publish(
        &ch,
        &req_q,
        "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
        ask(1),
    )
    .await;
    assert!(get(&ch, &reply_q, Duration::from_secs(20)).await.is_some());

    // Drop every connection (decoy's and this test's), as a broker restart would.
    let closed = std::process::Command::new("rabbitmqctl")
        .args(["close_all_connections", "decoy test: simulated outage"])
        .output()
        .unwrap();
    assert!(
        closed.status.success(),
        "{}",
        String::from_utf8_lossy(&closed.stderr)
    );
    let (_conn, ch) = channel().await;
    publish(
        &ch,
        &req_q,
        "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
        ask(2),
    )
    .await;
    let (_, p) = get(&ch, &reply_q, Duration::from_secs(30))
        .await
        .expect("answered after reconnecting");
    assert_eq!(p.correlation_id().as_ref().map(|c| c.as_str()), Some("m-2"));
    server.shutdown().await;
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

#[tokio::test]
async fn an_edited_mq_mapping_is_served_without_a_restart_and_a_broken_one_keeps_the_last_good() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q);
    let server = crate::common::serve(dir.path()).await;
    let mapping = |text: &str| {
        json!({"connectionId": "rabbit",
               "request": {"destination": {"name": req_q, "type": "QUEUE"}},
               "response": {"text": text}})
        .to_string()
    };
    let file = dir.path().join("mq-mappings/quote.json");
    // Ask until the answer is `want` (the reload takes a moment), for up to 10 s.
    let answer_becomes = |want: &'static str| {
        let (ch, req_q, reply_q) = (ch.clone(), req_q.clone(), reply_q.clone());
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let props = BasicProperties::default().with_reply_to(reply_q.clone().into());
                publish(
                    &ch,
                    &req_q,
                    "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
                    props,
                )
                .await;
                let got = get(&ch, &reply_q, Duration::from_secs(5))
                    .await
                    .map(|(b, _)| b);
                if got.as_deref() == Some(want) || tokio::time::Instant::now() > deadline {
                    return got;
                }
            }
        }
    };
    std::fs::write(&file, mapping("version two")).unwrap();
    assert_eq!(
        answer_becomes("version two").await.as_deref(),
        Some("version two")
    );

    // A broken edit: reported, and the running mapping keeps answering.
    std::fs::write(
        &file,
        r#"{"request": {"destination": {"name": "Q", "type": "BOGUS"}}}"#,
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let problems = loop {
        let p = crate::common::get(server.http_addr, "/__admin/problems")
            .await
            .body;
        if p.contains("BOGUS") || tokio::time::Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        problems.contains("mq-mappings/quote.json: mapping #0: request.destination.type: \\\"BOGUS\\\": expected QUEUE or TOPIC"),
        "{problems}"
    );
    assert_eq!(
        answer_becomes("version two").await.as_deref(),
        Some("version two")
    );
    server.shutdown().await;
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

#[tokio::test]
async fn a_publication_on_a_topic_gets_its_reply_published_on_another_topic() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (request_topic, reply_topic) = (
        format!("decoy-test.{id}.prices.*"),
        format!("decoy-test.{id}.quotes"),
    );
    // The test subscribes to the reply topic with a queue of its own.
    let replies = unique("quotes");
    ch.queue_declare(
        replies.as_str().into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        replies.as_str().into(),
        "amq.topic".into(),
        reply_topic.as_str().into(),
        lapin::options::QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connections("rabbit", json!({"type": "amqp", "uri": url()})),
        ),
        (
            "mq-mappings/prices.json",
            &json!({
                "request": {"destination": {"name": request_topic, "type": "TOPIC"}},
                "response": {"destination": {"name": reply_topic, "type": "TOPIC"},
                             "text": "{\"price\": 42}"},
                "receiveThreads": 2
            })
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    // The subscription is made in the background once serving starts: publish until
    // it is there (a publication nobody subscribed to is dropped, as on any topic).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let reply = loop {
        ch.basic_publish(
            "amq.topic".into(),
            format!("decoy-test.{id}.prices.ACME").as_str().into(),
            BasicPublishOptions::default(),
            b"{\"symbol\": \"ACME\"}",
            BasicProperties::default().with_message_id("pub-1".into()),
        )
        .await
        .unwrap()
        .await
        .unwrap();
        if let Some(r) = get(&ch, &replies, Duration::from_millis(500)).await {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reply on {reply_topic}"
        );
    };
    assert_eq!(reply.0, "{\"price\": 42}");
    assert_eq!(
        reply.1.correlation_id().as_ref().map(|c| c.as_str()),
        Some("pub-1")
    );
    server.shutdown().await;
    drop_queues(&ch, &[replies]).await;
}
