//! MQ record and playback against the real brokers of the machine (RabbitMQ over
//! AMQP 0-9-1 and AMQP 1.0, Mosquitto, NATS). For each: a small echo back end of the
//! test's own answers on the "real" destination; a requester sends requests where
//! the system under test would, through decoy recording, and gets the back end's
//! replies; the recording is written; the back end is stopped; `decoy serve` on
//! the recorded files gives the requester the same replies (bodies and correlation
//! ids). A request the back end ignores times out: the requester gets nothing and
//! nothing is written for it. The back end and the requester speak through
//! decoy-mq's broker adapters; `tests/mq-record.py` does the same with pika,
//! paho-mqtt and nats-py.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use decoy_mq::config::{self, Correlation};
use decoy_mq::record::{Recording, brokers_for, spec};
use decoy_mq::transport::{Broker, Destination, Message, Receiver, Settle};

/// The requests: a JSON one, an XML one, the JSON one again (a repeat: one mapping),
/// and text.
const REQUESTS: [&str; 4] = [
    r#"{"symbol":"ACME","qty":3}"#,
    "<quote><symbol>XYZ</symbol></quote>",
    r#"{"symbol":"ACME","qty":3}"#,
    "plain text",
];
/// The echo back end never answers this one.
const IGNORED: &str = "please IGNORE me";

fn echo_of(body: &[u8]) -> Bytes {
    Bytes::from(format!("echo:{}", String::from_utf8_lossy(body)))
}

/// The echo back end: replies `echo:<body>` to each request's reply-to, with the
/// correlation id `rule` says, and ignores requests containing `IGNORE`.
fn echo_back_end(
    broker: Arc<dyn Broker>,
    from: Destination,
    rule: Correlation,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let sender = broker.sender(7).await.expect("back end sender");
        let mut rx: Box<dyn Receiver> = broker.receiver(&from, 7).await.expect("back end receiver");
        while let Ok(Some(d)) = rx.next().await {
            let req = d.message().clone();
            if !String::from_utf8_lossy(&req.body).contains("IGNORE")
                && let Some(to) = req.reply_to.clone()
            {
                let correlation_id = match rule {
                    Correlation::MsgIdToCorrelId => req.message_id.clone(),
                    _ => req.correlation_id.clone().or(req.message_id.clone()),
                };
                let reply = Message {
                    body: echo_of(&req.body),
                    correlation_id,
                    properties: vec![("served-by".into(), "echo".into())],
                    format: Some("MQSTR".into()),
                    message_type: Some("reply".into()),
                    reply_to_manager: req.reply_to_manager.clone(),
                    ..Message::default()
                };
                let dest = if from.topic {
                    Destination::topic(to)
                } else {
                    Destination::queue(to)
                };
                sender.send(&dest, reply).await.expect("echo reply");
            }
            let _ = d.settle(Settle::Ack).await;
        }
    })
}

/// Sends `body` to `to` with reply-to `reply` and correlation id `corr`, until a
/// reply with that correlation id comes (decoy subscribes in the background, and a
/// core NATS or MQTT publication made before that reaches nobody). `None` when
/// none came within `patience`.
async fn ask(
    sender: &dyn decoy_mq::transport::Sender,
    rx: &mut Box<dyn Receiver>,
    to: &Destination,
    reply: &str,
    body: &str,
    corr: &str,
    patience: Duration,
) -> Option<Message> {
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        let m = Message {
            body: Bytes::from(body.to_owned()),
            correlation_id: Some(corr.as_bytes().to_vec()),
            message_id: Some(format!("m-{corr}").into_bytes()),
            reply_to: Some(reply.to_owned()),
            format: Some("MQSTR".into()),
            message_type: Some("request".into()),
            qos: Some(1),
            ..Message::default()
        };
        sender.send(to, m).await.expect("request sent");
        let until = (tokio::time::Instant::now() + Duration::from_secs(2)).min(deadline);
        while let Ok(Ok(Some(d))) = tokio::time::timeout_at(until, rx.next()).await {
            let m = d.message().clone();
            let _ = d.settle(Settle::Ack).await;
            if m.correlation_id.as_deref() == Some(corr.as_bytes()) {
                return Some(m);
            }
        }
    }
    None
}

struct Case {
    connection: Value,
    listen: Destination,
    forward: Destination,
    /// The requester's reply destination.
    reply: Destination,
    /// `None`: decoy's own reply destination; else the back end's fixed reply queue.
    fixed: Option<(Destination, Correlation)>,
}

fn dest_json(d: &Destination) -> Value {
    json!({"name": d.name, "type": if d.topic { "TOPIC" } else { "QUEUE" }})
}

async fn record_and_play_back(case: Case) {
    let dir =
        crate::common::root(&[("mq-connections.json", &json!([case.connection]).to_string())]);
    let load = config::load(dir.path());
    assert!(load.problems.is_empty(), "{:?}", load.problems);
    let mut route = json!({
        "listen": dest_json(&case.listen),
        "forward": dest_json(&case.forward),
    });
    let echo_rule = match &case.fixed {
        Some((q, rule)) => {
            route["reply"] = json!({"queue": dest_json(q), "pairBy": match rule {
                Correlation::CopyCorrelId => "COPY_CORRELID",
                _ => "MSGID_TO_CORRELID",
            }});
            *rule
        }
        None => Correlation::CopyCorrelId,
    };
    let spec = spec::parse(
        &json!({"routes": [route], "timeoutMilliseconds": 1500}),
        &load.connections,
    )
    .expect("a good description");
    let brokers: HashMap<String, Arc<dyn Broker>> =
        brokers_for(&load.connections, &spec).expect("brokers");
    let broker = brokers.values().next().expect("one broker").clone();

    let back_end = echo_back_end(broker.clone(), case.forward.clone(), echo_rule);
    let recording = Recording::start(dir.path(), spec, &brokers).expect("recording starts");
    let sender = broker.sender(9).await.expect("requester sender");
    let mut replies = broker
        .receiver(&case.reply, 9)
        .await
        .expect("requester receiver");

    let mut recorded = Vec::new();
    for (i, body) in REQUESTS.iter().enumerate() {
        let corr = format!("rec-{i}");
        let r = ask(
            &*sender,
            &mut replies,
            &case.listen,
            &case.reply.name,
            body,
            &corr,
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|| panic!("no reply through the recorder for {body:?}"));
        assert_eq!(
            r.body,
            echo_of(body.as_bytes()),
            "the back end's reply, unchanged"
        );
        recorded.push(r);
    }
    // The back end never answers: the requester gets nothing.
    assert!(
        ask(
            &*sender,
            &mut replies,
            &case.listen,
            &case.reply.name,
            IGNORED,
            "ignored",
            Duration::from_secs(3)
        )
        .await
        .is_none()
    );
    let summary = recording.stop().await.expect("the recording is written");
    back_end.abort();
    let _ = back_end.await;
    assert_eq!(summary.recorded, 3, "{summary:?}");
    assert_eq!(summary.files.len(), 3, "{summary:?}");
    assert!(summary.repeats >= 1, "{summary:?}");
    assert!(summary.timed_out >= 1, "{summary:?}");
    assert!(
        summary.notes.iter().any(|n| n.contains("IGNORE")),
        "the timeout is noted: {:?}",
        summary.notes
    );
    let texts: Vec<String> = summary
        .files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(texts.iter().any(|t| t.contains("equalToJson")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("equalToXml")), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("IGNORE")), "{texts:?}");

    // Playback: the back end is gone; decoy serves the recorded mappings.
    let server = crate::common::serve(dir.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    for (i, body) in REQUESTS.iter().enumerate() {
        let corr = format!("play-{i}");
        let r = ask(
            &*sender,
            &mut replies,
            &case.listen,
            &case.reply.name,
            body,
            &corr,
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|| panic!("no reply in playback for {body:?}"));
        assert_eq!(r.body, recorded[i].body, "the same reply as recorded");
        assert_eq!(
            r.properties.iter().find(|(k, _)| k == "served-by"),
            recorded[i]
                .properties
                .iter()
                .find(|(k, _)| k == "served-by"),
        );
    }
    server.shutdown().await;
    drop(replies);
}

fn nats_url() -> String {
    std::env::var("DECOY_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

fn mqtt_url() -> String {
    std::env::var("DECOY_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".into())
}

fn unique() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_is_recorded_through_an_exclusive_reply_queue_and_played_back() {
    let _one = crate::amqp::ONE_AT_A_TIME.lock().await;
    let p = format!("decoy-rec.{}", unique());
    let case = Case {
        connection: json!({"connectionId": "rabbit", "connectionData": {
            "type": "amqp", "uri": crate::amqp::url(), "declareQueues": true,
            "unmatched": {"queue": format!("{p}.unmatched")}}}),
        listen: Destination::queue(format!("{p}.listen")),
        forward: Destination::queue(format!("{p}.real")),
        reply: Destination::queue(format!("{p}.reply")),
        fixed: None,
    };
    let names: Vec<String> = ["listen", "real", "reply", "unmatched"]
        .iter()
        .map(|s| format!("{p}.{s}"))
        .collect();
    record_and_play_back(case).await;
    let (_c, ch) = crate::amqp::channel().await;
    crate::amqp::drop_queues(&ch, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_is_recorded_through_an_inbox_and_played_back() {
    let p = format!("decoy-rec.{}", unique());
    record_and_play_back(Case {
        connection: json!({"connectionId": "n", "connectionData": {
            "type": "nats", "uri": nats_url(), "unmatched": {"queue": format!("{p}.unmatched")}}}),
        listen: Destination::queue(format!("{p}.listen")),
        forward: Destination::queue(format!("{p}.real")),
        reply: Destination::queue(format!("{p}.reply")),
        fixed: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_5_is_recorded_through_a_response_topic_and_played_back() {
    let p = format!("decoy-rec/{}", unique());
    record_and_play_back(Case {
        connection: json!({"connectionId": "m", "connectionData": {
            "type": "mqtt", "uri": mqtt_url(), "cleanSession": true,
            "clientId": format!("rec{}", unique()),
            "unmatched": {"queue": format!("{p}/unmatched")}}}),
        listen: Destination::topic(format!("{p}/listen")),
        forward: Destination::topic(format!("{p}/real")),
        reply: Destination::topic(format!("{p}/reply")),
        fixed: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_1_0_is_recorded_through_a_fixed_reply_queue_and_played_back() {
    let _one = crate::amqp::ONE_AT_A_TIME.lock().await;
    let p = format!("decoy-rec.{}", unique());
    let uri = crate::amqp::url().replace("/%2f", "");
    record_and_play_back(Case {
        connection: json!({"connectionId": "a1", "connectionData": {
            "type": "amqp1", "uri": uri,
            "unmatched": {"queue": format!("/queue/{p}.unmatched")}}}),
        listen: Destination::queue(format!("/queue/{p}.listen")),
        forward: Destination::queue(format!("/queue/{p}.real")),
        reply: Destination::queue(format!("/queue/{p}.reply")),
        fixed: Some((
            Destination::queue(format!("/queue/{p}.backend-replies")),
            Correlation::CopyCorrelId,
        )),
    })
    .await;
    let (_c, ch) = crate::amqp::channel().await;
    let names: Vec<String> = ["listen", "real", "reply", "unmatched", "backend-replies"]
        .iter()
        .map(|s| format!("{p}.{s}"))
        .collect();
    crate::amqp::drop_queues(&ch, &names).await;
}

#[test]
fn a_bad_recording_description_names_the_field_and_the_reason() {
    let dir = crate::common::root(&[(
        "mq-connections.json",
        &json!([{"connectionId": "rabbit", "connectionData": {"type": "amqp"}}]).to_string(),
    )]);
    let load = config::load(dir.path());
    let errs = spec::parse(
        &json!({"routes": [
            {"connectionId": "nope", "listen": "A", "forward": "B"},
            {"listen": "C", "forward": "C", "reply": {"queue": "R", "pairBy": "BY_MAGIC"}},
            {"listen": "D"}
        ], "timeoutMilliseconds": 0, "matchJsonPaths": ["$["], "colour": "blue"}),
        &load.connections,
    )
    .unwrap_err();
    let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
    let has = |s: &str| assert!(text.iter().any(|t| t.contains(s)), "{s:?} in {text:#?}");
    has("routes[0].connectionId: \"nope\" is not a connection");
    has("routes[1].reply.pairBy: expected MSGID_TO_CORRELID");
    has("routes[2].forward: missing");
    has("timeoutMilliseconds: 0: expected a whole number");
    has("matchJsonPaths[0]: ");
    has("colour: unknown field");
}
