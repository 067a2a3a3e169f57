#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MQTT virtual services against the machine's Mosquitto (127.0.0.1:1883, anonymous;
//! `DECOY_MQTT_URL` points elsewhere), with rumqttc as the system under test, MQTT 5
//! and 3.1.1. Each test uses topics of its own under `decoy-test/<uuid>/`. The broker
//! restart runs on a private Mosquitto started on a free port, never the shared one.
//! Every request is counted against its reply.

use std::collections::HashMap;
use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use serde_json::json;
use tokio::sync::mpsc;

use crate::common::brokers::Mosquitto;
use crate::common::mqtt::{Client5, Got, base, connection, host_port, until_served, url};
use crate::common::process::missing;

#[tokio::test]
async fn mqtt5_requests_are_answered_on_their_response_topic_with_their_correlation_data() {
    let b = base();
    let (req, replies, lost) = (
        format!("{b}/devices/+/cmd"),
        format!("{b}/replies"),
        format!("{b}/unmatched"),
    );
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connection("mosquitto", &url(), json!({"unmatched": {"queue": lost}})),
        ),
        (
            "mq-mappings/status.json",
            &json!({
                "mappingId": "mqtt-status",
                "request": {"destination": {"name": req, "type": "TOPIC"},
                            "bodyMatcher": {"matchesJsonPath": "$.cmd"},
                            "properties": {"tenant": {"equalTo": "acme"}}},
                "response": {"text": "{\"device\": \"{{regexExtract request.destination 'devices/([^/]+)/cmd' 'p'}}{{p.[0]}}\", \"cmd\": \"{{jsonPath request.body '$.cmd'}}\"}",
                             "properties": {"served-by": "decoy"},
                             "transformers": ["response-template"]},
                "receiveThreads": 3,
                "sendThreads": 2
            })
            .to_string(),
        ),
        (
            "mq-mappings/probe.json",
            &json!({"request": {"destination": {"name": req, "type": "TOPIC"}, "bodyMatcher": {"equalTo": "probe"}},
                    "response": {"text": "ready"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let mut c = Client5::connect_sut(&url(), true, &[&replies, &lost]).await;
    until_served(&mut c, &format!("{b}/devices/0/cmd"), &replies).await;

    // QoS 0, 1 and 2, each answered at the QoS it was asked with.
    let n = 60;
    for i in 0..n {
        let qos = [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce][i % 3];
        c.request(
            &format!("{b}/devices/d{i}/cmd"),
            &format!("{{\"cmd\": \"reboot-{i}\"}}"),
            qos,
            Some(&replies),
            &format!("c-{i}"),
            &[("tenant", "acme")],
        )
        .await;
    }
    let seen = c.collect(n, Duration::from_secs(30)).await;
    assert_eq!(seen.len(), n, "every request answered: {seen:?}");
    for i in 0..n {
        let got = &seen[&format!("c-{i}")];
        if got.len() != 1 {
            let m = crate::common::get(server.http_addr, "/__admin/metrics")
                .await
                .body;
            let line: Vec<&str> = m
                .lines()
                .filter(|l| l.contains("mqtt-status") || l.contains("transport=\"mqtt\""))
                .collect();
            panic!("answered {} times: {got:?}; {line:?}", got.len());
        }
        assert_eq!(got[0].topic, replies);
        assert_eq!(
            got[0].body,
            format!("{{\"device\": \"d{i}\", \"cmd\": \"reboot-{i}\"}}")
        );
        assert_eq!(
            got[0].properties,
            [("served-by".to_owned(), "decoy".to_owned())]
        );
        assert_eq!(got[0].qos, (i % 3) as u8, "the request's QoS");
    }

    // Another tenant matches nothing: published on the unmatched topic as it came.
    c.request(
        &format!("{b}/devices/x/cmd"),
        "{\"cmd\": \"reboot\"}",
        QoS::AtLeastOnce,
        Some(&replies),
        "stranger",
        &[("tenant", "other")],
    )
    .await;
    let moved = c.next(Duration::from_secs(10)).await.expect("moved");
    assert_eq!(moved.topic, lost, "{moved:?}");
    assert_eq!(moved.body, "{\"cmd\": \"reboot\"}");
    assert_eq!(
        moved.properties,
        [("tenant".to_owned(), "other".to_owned())]
    );

    let metrics = crate::common::get(server.http_addr, "/__admin/metrics")
        .await
        .body;
    // The probes are counted too.
    assert!(
        metrics.contains(r#"decoy_requests_total{transport="mqtt",outcome="matched"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"decoy_requests_total{transport="mqtt",outcome="unmatched"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"decoy_mapping_requests_total{mapping_id="mqtt-status",mapping_name=""} 60"#
        ),
        "{metrics}"
    );
    server.shutdown().await;
}

/// An MQTT 3.1.1 client and connection: no response topic in 3.1.1, so the mapping
/// names the reply topic, templated from the request's; the reply is retained.
#[tokio::test]
async fn mqtt311_requests_get_a_retained_reply_on_a_topic_templated_from_the_request_topic() {
    let b = base();
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connection("m311", &url(), json!({"protocolVersion": "3.1.1", "clientId": format!("decoy-{}", uuid::Uuid::new_v4().simple())})),
        ),
        (
            "mq-mappings/ack.json",
            &json!({
                "request": {"destination": {"name": format!("{b}/devices/+/cmd"), "type": "TOPIC"},
                            "bodyMatcher": {"contains": "on"}},
                "response": {"destination": {"name": format!("{b}/devices/{{{{regexExtract request.destination 'devices/([^/]+)/cmd' 'p'}}}}{{{{p.[0]}}}}/ack"), "type": "TOPIC"},
                             "text": "ack {{request.body}}",
                             "retain": true,
                             "transformers": ["response-template"]}
            })
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    let (host, port) = host_port(&url());
    let mut o = rumqttc::MqttOptions::new(
        format!("sut311-{}", uuid::Uuid::new_v4().simple()),
        host.clone(),
        port,
    );
    o.set_keep_alive(Duration::from_secs(10));
    let (client, mut events) = rumqttc::AsyncClient::new(o, 100);
    let (tx, mut got) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            match events.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) => {
                    let _ = tx.send((
                        p.topic.clone(),
                        String::from_utf8_lossy(&p.payload).into_owned(),
                        p.retain,
                        p.qos as u8,
                    ));
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    });
    client
        .subscribe(format!("{b}/devices/+/ack"), rumqttc::QoS::ExactlyOnce)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let first = loop {
        client
            .publish(
                format!("{b}/devices/lamp-7/cmd"),
                rumqttc::QoS::ExactlyOnce,
                false,
                "on",
            )
            .await
            .unwrap();
        if let Ok(Some(g)) = tokio::time::timeout(Duration::from_millis(700), got.recv()).await {
            break g;
        }
        assert!(tokio::time::Instant::now() < deadline, "no reply");
    };
    assert_eq!(first.0, format!("{b}/devices/lamp-7/ack"));
    assert_eq!(first.1, "ack on");
    assert_eq!(first.3, 2, "a QoS 2 request gets a QoS 2 reply");
    task.abort();

    // A client that subscribes later gets the retained reply.
    let mut o = rumqttc::MqttOptions::new(
        format!("late-{}", uuid::Uuid::new_v4().simple()),
        host,
        port,
    );
    o.set_keep_alive(Duration::from_secs(10));
    let (late, mut events) = rumqttc::AsyncClient::new(o, 10);
    late.subscribe(format!("{b}/devices/lamp-7/ack"), rumqttc::QoS::AtLeastOnce)
        .await
        .unwrap();
    let retained = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) = events.poll().await {
                return p;
            }
        }
    })
    .await
    .expect("the retained reply");
    assert!(retained.retain);
    assert_eq!(&retained.payload[..], b"ack on");
    // Clear the retained message.
    late.publish(
        format!("{b}/devices/lamp-7/ack"),
        rumqttc::QoS::AtLeastOnce,
        true,
        "",
    )
    .await
    .unwrap();
    for _ in 0..4 {
        let _ = tokio::time::timeout(Duration::from_millis(200), events.poll()).await;
    }
    server.shutdown().await;
}

/// Whether mosquitto is missing here (the test says it skipped, and returns).
fn mosquitto_missing() -> bool {
    missing(
        "mosquitto",
        "-h",
        "mosquitto is not installed here (tests/run.sh installs it)",
    )
}

/// A private Mosquitto on a free port, and its URL; `None` (the test says it
/// skipped) where mosquitto cannot be run.
async fn private_broker() -> Option<(Mosquitto, String)> {
    if mosquitto_missing() {
        return None;
    }
    let port = crate::common::free_port();
    let Some(broker) = Mosquitto::start(port, tempfile::tempdir().unwrap()).await else {
        crate::common::skip("mosquitto could not be started");
        return None;
    };
    Some((broker, format!("mqtt://127.0.0.1:{port}")))
}

#[tokio::test]
async fn requests_at_qos_1_are_all_answered_across_a_broker_restart() {
    let Some((broker, url)) = private_broker().await else {
        return;
    };
    let b = base();
    let (req, replies) = (format!("{b}/orders"), format!("{b}/replies"));
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connection("private", &url, json!({})),
        ),
        (
            "mq-mappings/orders.json",
            &json!({"request": {"destination": {"name": req, "type": "TOPIC"}},
                    "response": {"text": "accepted", "fixedDelayMilliseconds": 1000}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let mut c = Client5::connect_sut(&url, false, &[&replies]).await;
    until_served(&mut c, &req, &replies).await;

    let n = 400;
    c.orders(&req, &replies, 0..n / 2).await;
    // Restart the broker while decoy holds those, unacknowledged, for their delay.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (port, data) = broker.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _broker = Mosquitto::start(port, data).await.expect("restarted");
    c.orders(&req, &replies, n / 2..n).await;
    let seen = c.collect(n, Duration::from_secs(60)).await;
    let missing: Vec<usize> = (0..n)
        .filter(|i| !seen.contains_key(&format!("o-{i}")))
        .collect();
    assert!(missing.is_empty(), "not answered: {missing:?}");
    server.shutdown().await;
}

/// Probes `req` until both decoy instances (answering `a` and `b`) have answered one:
/// both are subscribed. Replies to other requests seen meanwhile are kept in `kept`;
/// answers to later probes are drained.
async fn both_subscribed(c: &mut Client5, req: &str, replies: &str, kept: &mut Vec<Got>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut answered_by = std::collections::HashSet::new();
    let is_probe = |g: &Got| g.correlation.as_deref() == Some(&b"probe"[..]);
    while answered_by.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {answered_by:?} answered the probes"
        );
        c.request(req, "probe", QoS::AtLeastOnce, Some(replies), "probe", &[])
            .await;
        let until = tokio::time::Instant::now() + Duration::from_secs(1);
        while let Some(g) = c
            .next(until.saturating_duration_since(tokio::time::Instant::now()))
            .await
        {
            if is_probe(&g) {
                answered_by.insert(g.body);
                break;
            }
            kept.push(g);
        }
    }
    while let Some(g) = c.next(Duration::from_millis(500)).await {
        if !is_probe(&g) {
            kept.push(g);
        }
    }
}

/// Two decoy instances sharing `$share/GROUP/...` on a private Mosquitto that is
/// restarted while they hold requests: every QoS 1 request they held is answered,
/// and so is every one published once they have subscribed again; both instances
/// take a share. (What Mosquitto drops in between, publications made after its
/// restart and before the instances subscribe again, is its limit: it does not
/// restore shared subscriptions from its persistence file; docs/mq.md.)
#[tokio::test]
async fn two_decoys_sharing_a_subscription_answer_every_qos_1_request_across_a_broker_restart() {
    let Some((broker, url)) = private_broker().await else {
        return;
    };
    let b = base();
    let (req, replies) = (format!("{b}/orders"), format!("{b}/replies"));
    let instance = |name: &str| {
        crate::common::root(&[
            (
                "mq-connections.json",
                &connection(
                    "private",
                    &url,
                    json!({"clientId": format!("decoy-{name}"), "prefetch": 20}),
                ),
            ),
            (
                "mq-mappings/orders.json",
                &json!({"request": {"destination": {"name": format!("$share/orders/{req}"), "type": "TOPIC"}},
                        "response": {"text": name, "fixedDelayMilliseconds": 300},
                        "receiveThreads": 2})
                .to_string(),
            ),
        ])
    };
    let (dir_a, dir_b) = (instance("a"), instance("b"));
    let server_a = crate::common::serve(dir_a.path()).await;
    let server_b = crate::common::serve(dir_b.path()).await;
    let mut c = Client5::connect_sut(&url, false, &[&replies]).await;
    let mut kept = Vec::new();
    both_subscribed(&mut c, &req, &replies, &mut kept).await;

    let n = 400;
    c.orders(&req, &replies, 0..n / 2).await;
    // Restart the broker while both instances hold requests, unacknowledged, for
    // their delay.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (port, data) = broker.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _broker = Mosquitto::start(port, data).await.expect("restarted");
    both_subscribed(&mut c, &req, &replies, &mut kept).await;
    c.orders(&req, &replies, n / 2..n).await;
    let mut seen: HashMap<String, Vec<Got>> = HashMap::new();
    for g in kept {
        let key =
            String::from_utf8_lossy(g.correlation.as_deref().unwrap_or_default()).into_owned();
        seen.entry(key).or_default().push(g);
    }
    let want = n - seen.len();
    for (k, v) in c.collect(want, Duration::from_secs(90)).await {
        seen.entry(k).or_default().extend(v);
    }
    let missing: Vec<usize> = (0..n)
        .filter(|i| !seen.contains_key(&format!("o-{i}")))
        .collect();
    let by: HashMap<String, usize> = seen.values().fold(HashMap::new(), |mut m, g| {
        *m.entry(g[0].body.clone()).or_default() += 1;
        m
    });
    server_a.shutdown().await;
    server_b.shutdown().await;
    assert!(
        missing.is_empty(),
        "not answered ({} of {n}): {missing:?}; answered by {by:?}",
        missing.len()
    );
    assert!(by.len() == 2, "both instances answer: {by:?}");
}

#[tokio::test]
async fn a_broker_that_is_down_at_start_is_connected_to_once_it_is_up() {
    if mosquitto_missing() {
        return;
    }
    let port = crate::common::free_port();
    let url = format!("mqtt://127.0.0.1:{port}");
    let b = base();
    let (req, replies) = (format!("{b}/ping"), format!("{b}/pong"));
    let dir = crate::common::root(&[
        ("mq-connections.json", &connection("later", &url, json!({"protocolVersion": "3.1.1"}))),
        (
            "mq-mappings/ping.json",
            &json!({"request": {"destination": {"name": req, "type": "TOPIC"}},
                    "response": {"destination": {"name": replies, "type": "TOPIC"}, "text": "pong"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _broker = Mosquitto::start(port, tempfile::tempdir().unwrap())
        .await
        .expect("started");
    let mut c = Client5::connect(&url, "sut-later", true, &[&replies]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        c.request(&req, "ping", QoS::AtLeastOnce, None, "p", &[])
            .await;
        if let Some(g) = c.next(Duration::from_millis(500)).await {
            assert_eq!(g.body, "pong");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never answered");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn an_edited_mqtt_mapping_is_served_without_a_restart() {
    let b = base();
    let (req, replies) = (format!("{b}/ask"), format!("{b}/answers"));
    let mapping = |text: &str| {
        json!({"request": {"destination": {"name": req, "type": "TOPIC"}}, "response": {"text": text}})
            .to_string()
    };
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connection(
                "reload",
                &url(),
                json!({"clientId": format!("decoy-{}", uuid::Uuid::new_v4().simple())}),
            ),
        ),
        ("mq-mappings/answer.json", &mapping("version one")),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let mut c = Client5::connect_sut(&url(), true, &[&replies]).await;
    // Ask until the answer is `want` (a reload takes a moment), for up to 20 s.
    async fn answer_becomes(
        c: &mut Client5,
        req: &str,
        replies: &str,
        want: &str,
    ) -> Option<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            c.request(req, "q", QoS::AtLeastOnce, Some(replies), "q", &[])
                .await;
            let got = c.next(Duration::from_millis(700)).await.map(|g| g.body);
            if got.as_deref() == Some(want) || tokio::time::Instant::now() > deadline {
                return got;
            }
        }
    }
    assert_eq!(
        answer_becomes(&mut c, &req, &replies, "version one")
            .await
            .as_deref(),
        Some("version one")
    );
    std::fs::write(
        dir.path().join("mq-mappings/answer.json"),
        mapping("version two"),
    )
    .unwrap();
    assert_eq!(
        answer_becomes(&mut c, &req, &replies, "version two")
            .await
            .as_deref(),
        Some("version two")
    );
    server.shutdown().await;
}

/// A reply topic templated from a user property that holds a wildcard: the broker
/// would end the connection for it every time. The reply is dropped and listed, its
/// request acknowledged; the requests beside it are answered once each, not again
/// and again as decoy reconnects.
#[tokio::test]
async fn a_reply_topic_rendered_with_a_wildcard_is_dropped_once_and_the_rest_answered_once() {
    let b = base();
    let (req, probe_replies) = (format!("{b}/in/+"), format!("{b}/probe-replies"));
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &connection(
                "mosquitto",
                &url(),
                json!({"clientId": format!("decoy-{}", uuid::Uuid::new_v4().simple())}),
            ),
        ),
        (
            "mq-mappings/out.json",
            &json!({
                "mappingId": "mqtt-out",
                "request": {"destination": {"name": req, "type": "TOPIC"}, "bodyMatcher": {"equalTo": "go"}},
                "response": {"destination": {"name": format!("{b}/out/{{{{request.headers.who}}}}"), "type": "TOPIC"},
                             "text": "for {{request.headers.who}}",
                             "transformers": ["response-template"]}
            })
            .to_string(),
        ),
        (
            "mq-mappings/probe.json",
            &json!({"request": {"destination": {"name": req, "type": "TOPIC"}, "bodyMatcher": {"equalTo": "probe"}},
                    "response": {"text": "ready"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let out = format!("{b}/out/+");
    let mut c = Client5::connect_sut(&url(), true, &[&probe_replies, &out]).await;
    until_served(&mut c, &format!("{b}/in/0"), &probe_replies).await;

    c.request(
        &format!("{b}/in/1"),
        "go",
        QoS::AtLeastOnce,
        None,
        "bad",
        &[("who", "#")],
    )
    .await;
    for who in ["ann", "bob"] {
        c.request(
            &format!("{b}/in/1"),
            "go",
            QoS::AtLeastOnce,
            None,
            who,
            &[("who", who)],
        )
        .await;
    }
    // Three seconds: a request going round would have been answered many times.
    let seen = c.collect(usize::MAX, Duration::from_secs(3)).await;
    let mut counts: Vec<(String, usize)> = seen.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    counts.sort();
    assert_eq!(
        counts,
        [("ann".to_owned(), 1), ("bob".to_owned(), 1)],
        "each good request answered once, the bad one not at all"
    );
    let problems = crate::common::get(server.http_addr, "/__admin/problems")
        .await
        .body;
    assert!(
        problems.contains("could not be sent")
            && problems.contains("a topic to publish on has no wildcard"),
        "{problems}"
    );
    server.shutdown().await;
}
