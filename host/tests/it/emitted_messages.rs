#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Messages a virtual service emits: `message` listeners on HTTP stubs and MQ mappings
//! (published once the answer is out), and `POST /__admin/channels/send`, against the
//! machine's RabbitMQ, Mosquitto and NATS (see `amqp.rs`, `mqtt.rs`, `nats.rs` for the
//! addresses). Each test uses queues, topics and subjects of its own and removes its
//! queues.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt as _;
use rumqttc::v5;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Packet;
use serde_json::{Value, json};

use crate::amqp::{ONE_AT_A_TIME, channel, drop_queues, get, publish, unique};

const WAIT: Duration = Duration::from_secs(20);

fn mqtt_url() -> String {
    std::env::var("DECOY_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".into())
}

async fn declare(ch: &lapin::Channel, names: &[&String]) {
    for q in names {
        ch.queue_declare(
            q.as_str().into(),
            lapin::options::QueueDeclareOptions::default(),
            lapin::types::FieldTable::default(),
        )
        .await
        .unwrap();
    }
}

/// The connections every test may use: RabbitMQ, Mosquitto, NATS, and one nothing
/// listens on.
fn connections(down_port: u16) -> String {
    json!([
        {"connectionId": "rabbit", "connectionData": {"type": "amqp", "uri": crate::amqp::url()}},
        {"connectionId": "mosquitto", "connectionData": {"type": "mqtt", "uri": mqtt_url()}},
        {"connectionId": "nats", "connectionData": {"type": "nats", "uri": crate::nats::url()}},
        {"connectionId": "amqp1", "connectionData": {"type": "amqp1", "uri": "amqp://guest:guest@127.0.0.1:5672"}},
        {"connectionId": "down", "connectionData": {"type": "amqp",
            "uri": format!("amqp://guest:guest@127.0.0.1:{down_port}/%2f"),
            "connectTimeoutMilliseconds": 2000}}
    ])
    .to_string()
}

/// A `decoy_published_messages_total` row.
/// Serves a root of [`connections`] and one
/// file, `path`, holding `file`; the file must load without a rejection. The root
/// lives as long as the returned directory.
async fn serve_with_connections(
    path: &str,
    file: &Value,
) -> (tempfile::TempDir, decoy::server::Running) {
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connections(crate::common::free_port()),
        ),
        (path, &file.to_string()),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    (dir, server)
}

async fn published(addr: SocketAddr, outcome: &str) -> u64 {
    let text = crate::common::get(addr, "/__admin/metrics").await.body;
    let row = format!("decoy_published_messages_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&row))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// The journal's sub-events of the newest request, once there are `n` of them.
async fn sub_events(addr: SocketAddr, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, v) = crate::common::admin(addr, "GET", "/requests", Value::Null).await;
        let subs = v["requests"][0]["subEvents"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if subs.len() >= n || tokio::time::Instant::now() > deadline {
            return subs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An MQTT 5 subscriber on `topic`, SUBACK seen; its messages come on the channel.
async fn mqtt_subscriber(
    topic: &str,
) -> (
    v5::AsyncClient,
    tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    tokio::task::JoinHandle<()>,
) {
    let rest = mqtt_url().trim_start_matches("mqtt://").to_owned();
    let (host, port) = rest.rsplit_once(':').unwrap();
    let mut o = v5::MqttOptions::new(
        format!("decoy-test-{}", uuid::Uuid::new_v4().simple()),
        host,
        port.parse::<u16>().unwrap(),
    );
    o.set_keep_alive(Duration::from_secs(10));
    let (client, mut events) = v5::AsyncClient::new(o, 100);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (subacked, mut suback) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Ok(e) = events.poll().await {
            match e {
                v5::Event::Incoming(Packet::Publish(p)) => {
                    let _ = tx.send((
                        String::from_utf8_lossy(&p.topic).into_owned(),
                        String::from_utf8_lossy(&p.payload).into_owned(),
                    ));
                }
                v5::Event::Incoming(Packet::SubAck(_)) => {
                    let _ = subacked.send(());
                }
                _ => {}
            }
        }
    });
    client.subscribe(topic, QoS::AtLeastOnce).await.unwrap();
    tokio::time::timeout(WAIT, suback.recv())
        .await
        .expect("SUBACK from Mosquitto")
        .unwrap();
    (client, rx, task)
}

#[tokio::test]
async fn an_http_hit_publishes_templated_messages_to_rabbitmq_mqtt_and_nats_after_its_answer() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let events_q = unique("order-events");
    declare(&ch, &[&events_q]).await;
    let base = format!("decoy-test/{}", uuid::Uuid::new_v4().simple());
    let subject = format!("{}.orders.created", crate::nats::prefix());
    let stub = json!({
        "id": "6f1c8c9e-7d4e-4d6a-9a43-0d0e5f6a7b10",
        "request": {"method": "POST", "url": "/orders"},
        "response": {"status": 201, "jsonBody": {"status": "accepted"}},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit", "queue": events_q,
                "body": "{\"event\":\"order.created\",\"id\":\"{{jsonPath originalRequest.body '$.id'}}\"}",
                "properties": {"event-type": "order.created", "order": "{{jsonPath originalRequest.body '$.id'}}"}}},
            {"name": "message", "parameters": {"connection": "mosquitto", "topic": format!("{base}/orders"),
                "bodyFileName": "events/created.json"}},
            {"name": "message", "parameters": {"connection": "nats", "subject": subject,
                "body": "created {{jsonPath originalRequest.body '$.id'}}", "delay": {"type": "fixed", "milliseconds": 50}}}
        ]
    });
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connections(crate::common::free_port()),
        ),
        ("mappings/orders.json", &stub.to_string()),
        (
            "__files/events/created.json",
            r#"{"event":"order.created","id":"{{jsonPath originalRequest.body '$.id'}}"}"#,
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let (mqtt, mut mqtt_got, mqtt_task) = mqtt_subscriber(&format!("{base}/#")).await;
    let nc = crate::nats::client(&crate::nats::url()).await;
    let mut nats_sub = nc.subscribe(subject.clone()).await.unwrap();
    nc.flush().await.unwrap();

    let answer = crate::common::send(
        server.http_addr,
        "POST",
        "/orders",
        &[("content-type", "application/json")],
        r#"{"id": "A-17"}"#,
    )
    .await;
    assert_eq!(answer.status, 201);
    assert_eq!(answer.body, r#"{"status":"accepted"}"#);

    let (body, props) = get(&ch, &events_q, WAIT).await.expect("the RabbitMQ event");
    assert_eq!(body, r#"{"event":"order.created","id":"A-17"}"#);
    let headers = props.headers().clone().unwrap();
    let header = |k: &str| match headers.inner().get(k) {
        Some(lapin::types::AMQPValue::LongString(s)) => {
            String::from_utf8_lossy(s.as_bytes()).into_owned()
        }
        other => panic!("header {k}: {other:?}"),
    };
    assert_eq!(header("event-type"), "order.created");
    assert_eq!(header("order"), "A-17");
    let (topic, body) = tokio::time::timeout(WAIT, mqtt_got.recv())
        .await
        .expect("the MQTT event")
        .unwrap();
    assert_eq!(
        (topic.as_str(), body.as_str()),
        (
            format!("{base}/orders").as_str(),
            r#"{"event":"order.created","id":"A-17"}"#
        )
    );
    let m = tokio::time::timeout(WAIT, nats_sub.next())
        .await
        .expect("the NATS event")
        .unwrap();
    assert_eq!(&m.payload[..], b"created A-17");

    let subs = sub_events(server.http_addr, 3).await;
    let kinds: Vec<&str> = subs.iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["MESSAGE_PUBLISHED"; 3], "{subs:?}");
    let mut where_to: Vec<&str> = subs
        .iter()
        .map(|s| s["data"]["connection"].as_str().unwrap())
        .collect();
    where_to.sort();
    assert_eq!(where_to, ["mosquitto", "nats", "rabbit"]);
    assert_eq!(published(server.http_addr, "published").await, 3);
    assert_eq!(published(server.http_addr, "failed").await, 0);

    server.shutdown().await;
    let _ = mqtt.disconnect().await;
    mqtt_task.abort();
    drop(nats_sub);
    drop_queues(&ch, &[events_q]).await;
}

#[tokio::test]
async fn an_mq_request_gets_its_reply_and_two_events_on_other_destinations() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, audit_q] = [unique("pay-req"), unique("pay-reply"), unique("audit")];
    declare(&ch, &[&req_q, &reply_q, &audit_q]).await;
    let subject = format!("{}.payments.done", crate::nats::prefix());
    let mapping = json!({
        "mappingId": "a5d1f0c2-3b4e-4c5d-8e9f-0a1b2c3d4e5f",
        "connectionId": "rabbit",
        "request": {"destination": {"name": req_q, "type": "QUEUE"}},
        "response": {"text": "{\"paid\": true}"},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit", "queue": audit_q,
                "body": "audit {{jsonPath originalRequest.body '$.payment'}}"}},
            {"name": "message", "parameters": {"connection": "nats", "subject": subject,
                "body": "done {{jsonPath originalRequest.body '$.payment'}}",
                "delay": {"type": "fixed", "milliseconds": 100}}}
        ]
    });
    let (_dir, server) = serve_with_connections("mq-mappings/pay.json", &mapping).await;
    let nc = crate::nats::client(&crate::nats::url()).await;
    let mut nats_sub = nc.subscribe(subject.clone()).await.unwrap();
    nc.flush().await.unwrap();

    publish(
        &ch,
        &req_q,
        r#"{"payment": "P-9"}"#,
        lapin::BasicProperties::default()
            .with_reply_to(reply_q.clone().into())
            .with_correlation_id("c-1".into()),
    )
    .await;
    let (reply, _) = get(&ch, &reply_q, WAIT).await.expect("the reply");
    assert_eq!(reply, r#"{"paid": true}"#);
    let (audit, _) = get(&ch, &audit_q, WAIT).await.expect("the audit event");
    assert_eq!(audit, "audit P-9");
    let m = tokio::time::timeout(WAIT, nats_sub.next())
        .await
        .expect("the NATS event")
        .unwrap();
    assert_eq!(&m.payload[..], b"done P-9");
    assert_eq!(published(server.http_addr, "published").await, 2);

    server.shutdown().await;
    drop(nats_sub);
    drop_queues(&ch, &[req_q, reply_q, audit_q]).await;
}

#[tokio::test]
async fn the_admin_api_publishes_now_and_says_why_it_cannot() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let q = unique("sent");
    declare(&ch, &[&q]).await;
    let dir = crate::common::root(&[(
        "mq-connections.json",
        &connections(crate::common::free_port()),
    )]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let send = |body: Value| crate::common::admin(addr, "POST", "/channels/send", body);

    let (status, v) = send(json!({"type": "mq", "connection": "rabbit", "queue": q,
        "message": {"body": {"data": {"id": 1}}, "properties": {"kind": "test"}}}))
    .await;
    assert_eq!((status, &v), (200, &json!({"sentCount": 1})));
    let (body, props) = get(&ch, &q, WAIT).await.expect("the message");
    assert_eq!(body, r#"{"id":1}"#);
    assert!(
        props
            .headers()
            .as_ref()
            .unwrap()
            .inner()
            .contains_key("kind")
    );

    let (status, v) = send(json!({"connection": "nope", "queue": q})).await;
    assert_eq!(status, 422, "{v}");
    let detail = v["errors"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("\"nope\"") && detail.contains("rabbit"),
        "{detail}"
    );
    let (status, v) = send(json!({"connection": "rabbit"})).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["errors"][0]["detail"].as_str().unwrap().contains("queue"),
        "{v}"
    );
    let (status, v) = send(json!({"type": "websocket", "connection": "rabbit", "queue": q})).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = send(json!({"connection": "rabbit", "queue": q, "topic": "t"})).await;
    assert_eq!(status, 400, "{v}");
    // RabbitMQ returns a message for a queue that does not exist.
    let missing = unique("missing");
    let (status, v) = send(json!({"connection": "rabbit", "queue": missing,
        "message": {"body": {"data": "x"}}}))
    .await;
    assert_eq!(status, 502, "{v}");
    assert!(
        v["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains(&missing),
        "{v}"
    );
    // The same through AMQP 1.0 (RabbitMQ's plugin), to the existing queue.
    let (status, v) = send(
        json!({"connection": "amqp1", "queue": format!("/amq/queue/{q}"),
        "message": {"body": {"data": "over AMQP 1.0"}}}),
    )
    .await;
    assert_eq!((status, &v), (200, &json!({"sentCount": 1})));
    let (body, _) = get(&ch, &q, WAIT).await.expect("the AMQP 1.0 message");
    // RabbitMQ 3's plugin gives an AMQP 0-9-1 consumer the message's encoded body
    // section (text goes as an amqp-value string): the text is its end.
    assert!(body.ends_with("over AMQP 1.0"), "{body:?}");
    assert_eq!(published(addr, "published").await, 2);
    assert_eq!(published(addr, "failed").await, 1);

    server.shutdown().await;
    drop_queues(&ch, &[q]).await;
}

#[tokio::test]
async fn a_publish_to_a_connection_that_is_down_leaves_the_answer_alone_and_is_counted() {
    let dir = crate::common::root(&[
        ("mq-connections.json", &connections(crate::common::free_port())),
        (
            "mappings/stubs.json",
            &json!({"mappings": [
                {"request": {"url": "/down"}, "response": {"status": 200, "body": "still here"},
                 "serveEventListeners": [{"name": "message", "parameters": {"connection": "down", "queue": "events", "body": "lost"}}]},
                {"request": {"url": "/typo"}, "response": {"status": 200},
                 "serveEventListeners": [{"name": "message", "parameters": {"connection": "rabit", "queue": "events"}}]}
            ]})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let addr = server.http_addr;

    let answer = crate::common::get(addr, "/down").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "still here"));
    let subs = sub_events(addr, 1).await;
    assert_eq!(subs.len(), 1, "{subs:?}");
    assert_eq!(subs[0]["type"], "MESSAGE_NOT_PUBLISHED");
    assert_eq!(subs[0]["data"]["connection"], "down");
    assert!(!subs[0]["data"]["reason"].as_str().unwrap().is_empty());
    assert_eq!(published(addr, "failed").await, 1);

    // A connection name that is not configured: a problem naming file, stub and field,
    // and the stub still answers.
    let (_, problems) = crate::common::admin(addr, "GET", "/problems", Value::Null).await;
    let listed = problems["problems"].to_string();
    assert!(
        listed.contains("stubs.json")
            && listed.contains("serveEventListeners[0].parameters.connection")
            && listed.contains("\\\"rabit\\\""),
        "{listed}"
    );
    let answer = crate::common::get(addr, "/typo").await;
    assert_eq!(answer.status, 200);
    let subs = sub_events(addr, 1).await;
    assert_eq!(subs[0]["type"], "MESSAGE_NOT_PUBLISHED", "{subs:?}");
    assert_eq!(published(addr, "failed").await, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn a_message_listener_without_a_destination_is_refused_naming_the_field() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"url": "/x"}, "response": {"status": 200},
         "serveEventListeners": [{"name": "message", "parameters": {"connection": "rabbit", "body": "x"}}]}
    ]));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 1);
    let problems = server.report.problems.join("\n");
    assert!(
        problems.contains("serveEventListeners[0].parameters")
            && problems.contains("no destination"),
        "{problems}"
    );
    server.shutdown().await;
}

#[test]
fn validate_fails_on_a_message_listener_naming_a_connection_that_is_not_configured() {
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "rabbit", "connectionData": {"type": "amqp", "uri": crate::amqp::url()}}])
                .to_string(),
        ),
        (
            "mappings/orders.json",
            &json!({"request": {"url": "/orders"}, "response": {"status": 201},
                "serveEventListeners": [{"name": "message", "parameters": {"connection": "rabit", "queue": "orders.created"}}]})
            .to_string(),
        ),
    ]);
    let (code, text) = crate::common::process::validate(dir.path(), &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("error: mappings/orders.json: mapping #0")
            && text.contains("serveEventListeners[0].parameters.connection: no connection \"rabit\" in mq-connections.json (connectionId: rabbit)"),
        "{text}"
    );
}

/// A `LongString` AMQP header as text.
fn amqp_header(props: &lapin::BasicProperties, k: &str) -> String {
    match props.headers().as_ref().and_then(|h| h.inner().get(k)) {
        Some(lapin::types::AMQPValue::LongString(s)) => {
            String::from_utf8_lossy(s.as_bytes()).into_owned()
        }
        other => panic!("header {k}: {other:?}"),
    }
}

#[tokio::test]
async fn a_message_carries_what_the_stub_answered_to_a_queue_the_request_names() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    // The shop's name in the path picks the queue: `events.<shop>`.
    let shop = unique("shop").replace('.', "-");
    let events_q = format!("events.{shop}");
    declare(&ch, &[&events_q]).await;
    let stub = json!({
        "request": {"method": "POST", "urlPathPattern": "/shops/[^/]+/orders"},
        "response": {"status": 201,
            "headers": {"Location": "/orders/ORD-{{jsonPath request.body '$.id'}}"},
            "body": "{\"orderId\": \"ORD-{{jsonPath request.body '$.id'}}\"}",
            "transformers": ["response-template"]},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit",
                "queue": "events.{{originalRequest.pathSegments.[1]}}",
                "body": "{\"order\": \"{{jsonPath originalResponse.body '$.orderId'}}\", \"status\": {{originalResponse.status}}}",
                "properties": {"location": "{{originalResponse.headers.Location}}"}}}
        ]
    });
    let (_dir, server) = serve_with_connections("mappings/orders.json", &stub).await;
    let answer = crate::common::send(
        server.http_addr,
        "POST",
        &format!("/shops/{shop}/orders"),
        &[("content-type", "application/json")],
        r#"{"id": "A-17"}"#,
    )
    .await;
    assert_eq!(answer.status, 201);
    assert_eq!(answer.body, r#"{"orderId": "ORD-A-17"}"#);

    let (body, props) = get(&ch, &events_q, WAIT)
        .await
        .expect("the event on the queue the path named");
    assert_eq!(body, r#"{"order": "ORD-A-17", "status": 201}"#);
    assert_eq!(amqp_header(&props, "location"), "/orders/ORD-A-17");
    let subs = sub_events(server.http_addr, 1).await;
    assert_eq!(subs[0]["type"], "MESSAGE_PUBLISHED", "{subs:?}");
    assert_eq!(subs[0]["data"]["destination"], events_q.as_str());
    assert_eq!(published(server.http_addr, "published").await, 1);

    server.shutdown().await;
    drop_queues(&ch, &[events_q]).await;
}

#[tokio::test]
async fn a_destination_that_renders_as_no_name_is_counted_and_logged_and_the_answer_stands() {
    let stub = json!({
        "request": {"urlPath": "/notify"},
        "response": {"status": 202, "body": "queued"},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit",
                "queue": "{{originalRequest.query.to}}", "body": "x"}}
        ]
    });
    let (_dir, server) = serve_with_connections("mappings/notify.json", &stub).await;
    let addr = server.http_addr;
    for (path, why) in [
        ("/notify", "rendered empty"),
        ("/notify?to=orders.%2A", "'*'"),
        ("/notify?to=a%20b", "' '"),
    ] {
        let answer = crate::common::get(addr, path).await;
        assert_eq!((answer.status, answer.body.as_str()), (202, "queued"));
        let subs = sub_events(addr, 1).await;
        assert_eq!(subs[0]["type"], "MESSAGE_NOT_PUBLISHED", "{path}: {subs:?}");
        assert_eq!(
            subs[0]["data"]["destination"],
            "{{originalRequest.query.to}}"
        );
        let reason = subs[0]["data"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("queue") && reason.contains(why),
            "{path}: {reason}"
        );
    }
    assert_eq!(published(addr, "invalid").await, 3);
    assert_eq!(published(addr, "published").await, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn an_mq_mappings_events_carry_its_reply_to_a_queue_the_request_names() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let shop = unique("shop").replace('.', "-");
    let [req_q, reply_q] = [unique("pay-req"), unique("pay-reply")];
    let audit_q = format!("audit.{shop}");
    declare(&ch, &[&req_q, &reply_q, &audit_q]).await;
    let mapping = json!({
        "connectionId": "rabbit",
        "request": {"destination": {"name": req_q, "type": "QUEUE"}},
        "response": {"text": "{\"paid\": true}", "properties": {"kind": "receipt"}},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit",
                "queue": "audit.{{jsonPath originalRequest.body '$.shop'}}",
                "body": "paid {{jsonPath originalRequest.body '$.payment'}}: {{{originalResponse.body}}}",
                "properties": {"reply-kind": "{{originalResponse.headers.kind}}"}}}
        ]
    });
    let (_dir, server) = serve_with_connections("mq-mappings/pay.json", &mapping).await;
    publish(
        &ch,
        &req_q,
        &format!(r#"{{"payment": "P-9", "shop": "{shop}"}}"#),
        lapin::BasicProperties::default()
            .with_reply_to(reply_q.clone().into())
            .with_correlation_id("c-1".into()),
    )
    .await;
    let (reply, _) = get(&ch, &reply_q, WAIT).await.expect("the reply");
    assert_eq!(reply, r#"{"paid": true}"#);
    let (audit, props) = get(&ch, &audit_q, WAIT).await.expect("the audit event");
    assert_eq!(audit, r#"paid P-9: {"paid": true}"#);
    assert_eq!(amqp_header(&props, "reply-kind"), "receipt");
    server.shutdown().await;
    drop_queues(&ch, &[req_q, reply_q, audit_q]).await;
}
