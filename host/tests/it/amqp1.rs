#![allow(clippy::unwrap_used, clippy::expect_used)]
//! AMQP 1.0 virtual services against the machine's RabbitMQ with its
//! `rabbitmq_amqp1_0` plugin (`tests/run.sh` and CI enable it). The client here is
//! `fe2o3-amqp`; `tests/amqp1-compat.py` does the same with Qpid Proton, a client of
//! other authors. Queues are made and deleted over AMQP 0-9-1 (lapin), each test's
//! own, and the tests hold the AMQP tests' lock, since one of these makes the broker
//! drop every connection. `broker_auth` uses the client here for AMQP 1.0 over TLS.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fe2o3_amqp::types::messaging::{
    AmqpValue, ApplicationProperties, Body, Message, MessageId, Properties,
};
use fe2o3_amqp::types::primitives::{SimpleValue, Value};
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use serde_json::json;

use crate::amqp::{ONE_AT_A_TIME, channel, drop_queues, queues};

const URI: &str = "amqp://guest:guest@127.0.0.1:5672";

/// Runs a test's steps with a deadline, so a broker that stops answering (another
/// test suite restarting it) fails the test instead of hanging it.
pub(crate) async fn within(limit: Duration, steps: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(limit, steps).await.is_err() {
        panic!("the test did not finish in {limit:?}: is the broker answering?");
    }
}

/// A client connection: a session with a sender to the request queue and a
/// receiver on the reply queue.
pub(crate) struct Client {
    _conn: fe2o3_amqp::connection::ConnectionHandle<()>,
    _session: fe2o3_amqp::session::SessionHandle<()>,
    pub sender: Sender,
    receiver: Receiver,
}

pub(crate) async fn client(req_q: &str, reply_q: &str) -> Client {
    let mut conn = Connection::open(format!("decoy-test-{}", uuid::Uuid::new_v4()), URI)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "RabbitMQ's AMQP 1.0 plugin is not reachable at {URI}: {e} \
                 (enable it with `rabbitmq-plugins enable rabbitmq_amqp1_0`)"
            )
        });
    let mut session = Session::begin(&mut conn).await.unwrap();
    let sender = Sender::attach(&mut session, "requests", format!("/amq/queue/{req_q}"))
        .await
        .unwrap();
    let receiver = Receiver::attach(&mut session, "replies", format!("/amq/queue/{reply_q}"))
        .await
        .unwrap();
    Client {
        _conn: conn,
        _session: session,
        sender,
        receiver,
    }
}

/// A request: a text body, a reply-to address, ids and application properties.
pub(crate) fn request(
    body: &str,
    reply_q: &str,
    id: Option<MessageId>,
    correlation: Option<MessageId>,
    props: &[(&str, &str)],
) -> Message<Body<Value>> {
    Message {
        header: None,
        delivery_annotations: None,
        message_annotations: None,
        properties: Some(Properties {
            message_id: id,
            correlation_id: correlation,
            reply_to: Some(format!("/amq/queue/{reply_q}")),
            ..Properties::default()
        }),
        application_properties: (!props.is_empty()).then(|| {
            ApplicationProperties(
                props
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), SimpleValue::String((*v).to_owned())))
                    .collect(),
            )
        }),
        body: Body::Value(AmqpValue(Value::String(body.to_owned()))),
        footer: None,
    }
}

pub(crate) fn text_of(body: &Body<Value>) -> String {
    match body {
        Body::Value(AmqpValue(Value::String(s))) => s.clone(),
        Body::Data(batch) => batch
            .iter()
            .map(|d| String::from_utf8_lossy(&d.0).into_owned())
            .collect(),
        other => format!("{other:?}"),
    }
}

/// The next message on `receiver`, within `wait`; accepted.
async fn next(receiver: &mut Receiver, wait: Duration) -> Option<Message<Body<Value>>> {
    let d = tokio::time::timeout(wait, receiver.recv::<Body<Value>>())
        .await
        .ok()?
        .unwrap();
    receiver.accept(&d).await.unwrap();
    Some(d.into_message())
}

fn root(req_q: &str, unmatched_q: &str, extra: serde_json::Value) -> tempfile::TempDir {
    use crate::common::mq::{connections, with};
    let data = with(
        json!({"type": "amqp1", "uri": URI, "readConnectionsToOpen": 2,
               "writeConnectionsToOpen": 2, "prefetch": 50,
               "containerId": "decoy-it",
               "unmatched": {"queue": format!("/amq/queue/{unmatched_q}")}}),
        extra,
    );
    crate::common::root(&[
        ("mq-connections.json", &connections("artemis-like", data)),
        (
            "mq-mappings/quote.json",
            &json!({
                "mappingId": "amqp1-quote",
                "request": {"destination": format!("/amq/queue/{req_q}"),
                            "bodyMatcher": {"matchesXPath": "/quoteRequest[symbol='ACME']"},
                            "properties": {"channel": {"equalTo": "web"}}},
                "response": {"text": "<quote id=\"{{xPath request.body '/quoteRequest/@id'}}\">42.00</quote>",
                             "properties": {"served-by": "decoy", "asked": "{{request.headers.channel}}"},
                             "transformers": ["response-template"]},
                "receiveThreads": 2,
                "sendThreads": 2
            })
            .to_string(),
        ),
    ])
}

/// Asks until `want` replies are in, collecting them by correlation id.
pub(crate) async fn replies(
    c: &mut Client,
    want: usize,
    wait: Duration,
) -> BTreeMap<String, Message<Body<Value>>> {
    let mut got = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + wait;
    while got.len() < want && tokio::time::Instant::now() < deadline {
        let Some(m) = next(&mut c.receiver, Duration::from_secs(1)).await else {
            continue;
        };
        let corr = m
            .properties
            .as_ref()
            .and_then(|p| p.correlation_id.clone())
            .map(|c| format!("{c:?}"))
            .unwrap_or_default();
        got.insert(corr, m);
    }
    got
}

#[tokio::test]
async fn amqp_1_0_requests_get_their_replies_correlated_with_properties_and_strays_are_kept() {
    within(
        Duration::from_secs(240),
        amqp_1_0_requests_get_their_replies_correlated_with_properties_and_strays_are_kept_steps(),
    )
    .await;
}

async fn amqp_1_0_requests_get_their_replies_correlated_with_properties_and_strays_are_kept_steps()
{
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q, json!({}));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let mut c = client(&req_q, &reply_q).await;

    // 50 requests: even ones carry a correlation id (copied to the reply), odd ones
    // only a message id, of several AMQP types (the reply's correlation id is the
    // message id, of the same type, as a JMS requester expects).
    let n = 50u64;
    let mut expected = BTreeSet::new();
    for i in 0..n {
        let (id, corr) = match i % 4 {
            0 => (
                Some(MessageId::String(format!("m-{i}"))),
                Some(MessageId::String(format!("c-{i}"))),
            ),
            1 => (Some(MessageId::Ulong(1000 + i)), None),
            2 => (
                None,
                Some(MessageId::Uuid(
                    uuid::Uuid::from_u128(u128::from(i)).into_bytes().into(),
                )),
            ),
            _ => (Some(MessageId::Binary(vec![0xAB, i as u8].into())), None),
        };
        let want = corr.clone().or(id.clone()).unwrap();
        expected.insert(format!("{want:?}"));
        let body = format!("<quoteRequest id='{i}'><symbol>ACME</symbol></quoteRequest>");
        let outcome = c
            .sender
            .send(request(&body, &reply_q, id, corr, &[("channel", "web")]))
            .await
            .unwrap();
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    let got = replies(&mut c, n as usize, Duration::from_secs(30)).await;
    assert_eq!(
        got.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "every request answered once, correlated"
    );
    let one = got.values().next().unwrap();
    assert!(
        text_of(&one.body).starts_with("<quote id=\"")
            && text_of(&one.body).ends_with("\">42.00</quote>"),
        "{:?}",
        one.body
    );
    assert!(matches!(one.body, Body::Value(_)), "text replies as text");
    let props = &one.application_properties.as_ref().unwrap().0;
    assert_eq!(
        props.get("served-by"),
        Some(&SimpleValue::String("decoy".into()))
    );
    assert_eq!(props.get("asked"), Some(&SimpleValue::String("web".into())));

    // A property that does not match, and a message with no reply-to: both kept on
    // the unmatched queue, neither answered.
    c.sender
        .send(request(
            "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
            &reply_q,
            Some(MessageId::String("stray-1".into())),
            None,
            &[("channel", "fax")],
        ))
        .await
        .unwrap();
    let mut no_reply_to = request(
        "<quoteRequest><symbol>ACME</symbol></quoteRequest>",
        &reply_q,
        Some(MessageId::String("stray-2".into())),
        None,
        &[("channel", "web")],
    );
    no_reply_to.properties.as_mut().unwrap().reply_to = None;
    c.sender.send(no_reply_to).await.unwrap();
    let mut lost = client(&req_q, &lost_q).await;
    let mut strays = BTreeSet::new();
    for _ in 0..2 {
        let m = next(&mut lost.receiver, Duration::from_secs(20))
            .await
            .expect("moved to the unmatched queue");
        strays.insert(format!(
            "{:?}",
            m.properties.and_then(|p| p.message_id).unwrap()
        ));
    }
    assert_eq!(
        strays,
        BTreeSet::from([
            format!("{:?}", MessageId::String("stray-1".into())),
            format!("{:?}", MessageId::String("stray-2".into()))
        ])
    );
    assert!(
        next(&mut c.receiver, Duration::from_millis(300))
            .await
            .is_none()
    );

    let metrics = crate::common::get(server.http_addr, "/__admin/metrics")
        .await
        .body;
    for line in [
        r#"decoy_requests_total{transport="amqp1",outcome="matched"} 50"#,
        r#"decoy_requests_total{transport="amqp1",outcome="unmatched"} 2"#,
        r#"decoy_mapping_requests_total{mapping_id="amqp1-quote",mapping_name=""} 50"#,
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    server.shutdown().await;
    drop(c);
    drop(lost);
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

#[tokio::test]
async fn every_amqp_1_0_request_is_answered_when_the_broker_drops_every_connection_mid_run() {
    within(
        Duration::from_secs(240),
        every_amqp_1_0_request_is_answered_when_the_broker_drops_every_connection_mid_run_steps(),
    )
    .await;
}

async fn every_amqp_1_0_request_is_answered_when_the_broker_drops_every_connection_mid_run_steps() {
    let _one = ONE_AT_A_TIME.lock().await;
    if std::process::Command::new("rabbitmqctl")
        .arg("--help")
        .output()
        .is_err()
    {
        crate::common::skip("rabbitmqctl is not installed here (it is on CI, with the broker)");
        return;
    }
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q, json!({}));
    let server = crate::common::serve(dir.path()).await;
    let ask = |i: u64| {
        request(
            &format!("<quoteRequest id='{i}'><symbol>ACME</symbol></quoteRequest>"),
            &reply_q,
            Some(MessageId::String(format!("r-{i}"))),
            None,
            &[("channel", "web")],
        )
    };
    let mut c = client(&req_q, &reply_q).await;
    for i in 0..200 {
        c.sender.send(ask(i)).await.unwrap();
    }
    // Some are answered, others are still on the request queue or in decoy's hands.
    let mut got: BTreeSet<String> = replies(&mut c, 1, Duration::from_secs(20))
        .await
        .into_keys()
        .collect();
    assert!(!got.is_empty(), "answering before the outage");
    drop(c);
    let closed = std::process::Command::new("rabbitmqctl")
        .args(["close_all_connections", "decoy test: simulated outage"])
        .output()
        .unwrap();
    assert!(
        closed.status.success(),
        "{}",
        String::from_utf8_lossy(&closed.stderr)
    );
    // Requests sent while decoy reconnects wait on the queue.
    let (_conn, ch) = channel().await;
    let mut c = client(&req_q, &reply_q).await;
    for i in 200..300 {
        c.sender.send(ask(i)).await.unwrap();
    }
    let want: BTreeSet<String> = (0..300)
        .map(|i| format!("{:?}", MessageId::String(format!("r-{i}"))))
        .collect();
    // Replies may come twice (a request answered but not yet accepted when its
    // connection dropped is delivered again): counted by id, until all are in.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !want.is_subset(&got) && tokio::time::Instant::now() < deadline {
        got.extend(
            replies(
                &mut c,
                want.difference(&got).count(),
                Duration::from_secs(5),
            )
            .await
            .into_keys(),
        );
    }
    let missing: Vec<_> = want.difference(&got).collect();
    assert!(missing.is_empty(), "unanswered: {missing:?}");
    let problems = crate::common::get(server.http_addr, "/__admin/problems")
        .await
        .body;
    assert!(!problems.contains("panicked"), "{problems}");
    server.shutdown().await;
    drop(c);
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

/// A TCP relay from a port of its own to the broker, started when the test says:
/// until then the port refuses connections, as a broker that is down does.
async fn relay_to_broker(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect("127.0.0.1:5672").await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test]
async fn a_broker_down_at_start_is_retried_and_served_once_it_is_up() {
    within(
        Duration::from_secs(240),
        a_broker_down_at_start_is_retried_and_served_once_it_is_up_steps(),
    )
    .await;
}

async fn a_broker_down_at_start_is_retried_and_served_once_it_is_up_steps() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let port = crate::common::free_port();
    let dir = root(
        &req_q,
        &lost_q,
        json!({"uri": format!("amqp://guest:guest@127.0.0.1:{port}")}),
    );
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "starts while the broker is down");
    let mut c = client(&req_q, &reply_q).await;
    c.sender
        .send(request(
            "<quoteRequest id='1'><symbol>ACME</symbol></quoteRequest>",
            &reply_q,
            Some(MessageId::String("early".into())),
            None,
            &[("channel", "web")],
        ))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        next(&mut c.receiver, Duration::from_millis(100))
            .await
            .is_none(),
        "nothing answers while the broker is down"
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let relay = tokio::spawn(relay_to_broker(listener));
    let reply = next(&mut c.receiver, Duration::from_secs(30))
        .await
        .expect("answered once the broker is reachable");
    assert_eq!(
        reply.properties.and_then(|p| p.correlation_id),
        Some(MessageId::String("early".into()))
    );
    server.shutdown().await;
    relay.abort();
    drop(c);
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
}

#[tokio::test]
async fn a_missing_queue_is_said_once_with_how_to_create_it_and_the_other_mappings_go_on() {
    within(
        Duration::from_secs(240),
        a_missing_queue_is_said_once_with_how_to_create_it_and_the_other_mappings_go_on_steps(),
    )
    .await;
}

async fn a_missing_queue_is_said_once_with_how_to_create_it_and_the_other_mappings_go_on_steps() {
    use crate::common::process::{exit_within, lines_with, serve_logged as serve, sigterm};
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let missing_q = crate::amqp::unique("missing");
    // One read connection, so the missing queue's receivers share it with the
    // mapping whose queue exists.
    let dir = root(&req_q, &lost_q, json!({"readConnectionsToOpen": 1}));
    std::fs::write(
        dir.path().join("mq-mappings/missing.json"),
        json!({"mappingId": "amqp1-missing",
               "request": {"destination": format!("/amq/queue/{missing_q}")},
               "response": {"text": "found"},
               "receiveThreads": 3})
        .to_string(),
    )
    .unwrap();
    let (mut child, stderr) = serve(dir.path());
    let said = |n: &str| lines_with(&stderr.lock().unwrap(), n);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while said("does not exist") == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The other mapping, on the same connection, answers while the missing queue's
    // receivers retry.
    let mut c = client(&req_q, &reply_q).await;
    for i in 0..20 {
        c.sender
            .send(request(
                &format!("<quoteRequest id='{i}'><symbol>ACME</symbol></quoteRequest>"),
                &reply_q,
                Some(MessageId::String(format!("m-{i}"))),
                None,
                &[("channel", "web")],
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let got = replies(&mut c, 20, Duration::from_secs(60)).await;
    let log = stderr.lock().unwrap().clone();
    assert_eq!(
        got.len(),
        20,
        "answered while the other queue is missing\n{log}"
    );
    sigterm(&child);
    let status = exit_within(&mut child, Duration::from_secs(40));
    drop(c);
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
    let log = stderr.lock().unwrap().clone();
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
    let missing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("does not exist"))
        .collect();
    assert_eq!(
        missing.len(),
        1,
        "said once, for 3 receivers retrying:\n{log}"
    );
    for part in [
        format!("queue \"/amq/queue/{missing_q}\" does not exist"),
        "mapping mq-mappings/missing.json [0] (id amqp1-missing) listens on it".to_owned(),
        format!("listen on \"/queue/{missing_q}\", which the broker declares"),
    ] {
        assert!(
            missing[0].contains(&part),
            "{part:?} not in {:?}",
            missing[0]
        );
    }
    // Said as a missing queue, not as an attach the broker never answered.
    assert_eq!(lines_with(&log, "no answer to the attach"), 0, "{log}");
}

#[tokio::test]
async fn a_reply_to_an_address_that_does_not_exist_is_dropped_once_not_sent_round_again() {
    within(
        Duration::from_secs(240),
        a_reply_to_an_address_that_does_not_exist_is_dropped_once_not_sent_round_again_steps(),
    )
    .await;
}

/// A request whose `reply-to` names an exchange that does not exist: RabbitMQ
/// refuses the link, every time. The reply is dropped, said once and listed; the
/// request is acknowledged (not released to come back at once, for ever), and the
/// requests after it are answered once each.
async fn a_reply_to_an_address_that_does_not_exist_is_dropped_once_not_sent_round_again_steps() {
    use crate::common::process::{
        exit_within, http_get, lines_with, serve_logged_with_port, sigterm,
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, lost_q] = queues(&ch).await;
    let dir = root(&req_q, &lost_q, json!({}));
    let (mut child, stderr, port) = serve_logged_with_port(dir.path());
    let mut c = client(&req_q, &reply_q).await;
    let ask = |i: usize| {
        request(
            &format!("<quoteRequest id='{i}'><symbol>ACME</symbol></quoteRequest>"),
            &reply_q,
            Some(MessageId::String(format!("m-{i}"))),
            None,
            &[("channel", "web")],
        )
    };
    // Served once the first answer comes.
    c.sender.send(ask(0)).await.unwrap();
    assert_eq!(replies(&mut c, 1, Duration::from_secs(60)).await.len(), 1);

    let mut lost = ask(1);
    lost.properties.as_mut().unwrap().reply_to = Some(format!(
        "/exchange/decoy-test-missing-{}/k",
        uuid::Uuid::new_v4().simple()
    ));
    c.sender.send(lost).await.unwrap();
    for i in 2..5 {
        c.sender.send(ask(i)).await.unwrap();
    }
    let got = replies(&mut c, 3, Duration::from_secs(60)).await;
    // Three seconds more: a request going round would be answered again and again.
    let again = replies(&mut c, 1, Duration::from_secs(3)).await;
    let problems = http_get(port, "/__admin/problems");
    sigterm(&child);
    let status = exit_within(&mut child, Duration::from_secs(40));
    drop(c);
    drop_queues(&ch, &[req_q.clone(), reply_q, lost_q]).await;
    let log = stderr.lock().unwrap().clone();
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
    assert_eq!(got.len(), 3, "{:?}\n{log}", got.keys());
    assert!(
        again.is_empty(),
        "answered again: {:?}\n{log}",
        again.keys()
    );
    assert_eq!(
        lines_with(&log, "a reply that cannot be sent"),
        1,
        "said once\n{log}"
    );
    assert!(
        problems.contains("could not be sent") && problems.contains("no such queue"),
        "{problems}"
    );
}
