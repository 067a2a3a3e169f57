#![allow(clippy::unwrap_used, clippy::expect_used)]
//! TLS and credentials against brokers the tests start themselves (never the
//! machine's shared ones): a private Mosquitto with a TLS listener that wants a user
//! from its password file, and private nats-servers, one with TLS and users, one
//! with a token. AMQP 1.0 reaches the machine's RabbitMQ (whose configuration stays
//! as it is) through an HAProxy of the test's own that terminates TLS in front of it.
//! The certificates are made for the test with the `openssl` CLI (a CA and a server
//! certificate for 127.0.0.1), and decoy trusts them through `caFile` / `tlsCaFile` /
//! `caCertificateFile`; an AMQP 1.0 connection without it must be refused. Each
//! broker is also given wrong credentials by a second connection, which must be
//! refused and said, naming the connection.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use fe2o3_amqp::types::messaging::MessageId;
use rumqttc::v5::mqttbytes::QoS;
use serde_json::json;

use crate::amqp::{ONE_AT_A_TIME, channel, drop_queues, queues};
use crate::amqp1::{client, replies, request, text_of, within};
use crate::common::brokers::{Mosquitto, NatsServer, TlsTerminator};
use crate::common::certificates::certificates;
use crate::common::mqtt::{Client5, base, until_served};
use crate::common::process::{
    exit_within, http_get, lines_with, serve_logged as serve, serve_logged_with_port, sigterm,
    succeeds,
};

/// Waits until decoy's log has a line with all of `parts`; that line.
async fn said(log: &std::sync::Mutex<String>, parts: &[&str]) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = log
            .lock()
            .unwrap()
            .lines()
            .find(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_owned);
        if found.is_some() || tokio::time::Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn mqtt_over_tls_with_a_password_is_served_and_a_wrong_password_is_refused_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let Some(certs) = certificates(dir.path()) else {
        crate::common::skip("the openssl CLI is not installed here (apt-get install openssl)");
        return;
    };
    let passwords = dir.path().join("passwords");
    if !succeeds(
        Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&passwords)
            .args(["decoy", "s3cret pass"]),
    ) {
        crate::common::skip("mosquitto_passwd is not installed here (apt-get install mosquitto)");
        return;
    }
    let (tls_port, plain_port) = (crate::common::free_port(), crate::common::free_port());
    // The TLS listener wants a user of the password file; the plain one, anonymous,
    // is the system under test's.
    let conf = format!(
        "per_listener_settings true\nuser root\n\
         listener {tls_port} 127.0.0.1\ncertfile {}\nkeyfile {}\n\
         allow_anonymous false\npassword_file {}\n\
         listener {plain_port} 127.0.0.1\nallow_anonymous true\n",
        certs.cert.display(),
        certs.key.display(),
        passwords.display()
    );
    let Some(_broker) = Mosquitto::configured(dir.path(), &conf, &[tls_port, plain_port]).await
    else {
        crate::common::skip("mosquitto is not installed here (tests/run.sh installs it)");
        return;
    };

    let b = base();
    let (req, bad_req, replies) = (
        format!("{b}/orders"),
        format!("{b}/never"),
        format!("{b}/replies"),
    );
    let tls_uri = format!("mqtts://127.0.0.1:{tls_port}");
    let root = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([
                {"connectionId": "secured", "connectionData": {"type": "mqtt", "uri": tls_uri,
                  "username": "decoy", "password": "s3cret pass", "caFile": certs.ca}},
                {"connectionId": "wrong-password", "connectionData": {"type": "mqtt", "uri": tls_uri,
                  "username": "decoy", "password": "guess", "caFile": certs.ca}}
            ])
            .to_string(),
        ),
        (
            "mq-mappings/orders.json",
            &json!({"connectionId": "secured",
                    "request": {"destination": {"name": req, "type": "TOPIC"}},
                    "response": {"text": "accepted {{request.correlationId}}",
                                 "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mq-mappings/never.json",
            &json!({"connectionId": "wrong-password",
                    "request": {"destination": {"name": bad_req, "type": "TOPIC"}},
                    "response": {"text": "never"}})
            .to_string(),
        ),
    ]);
    let (mut decoy, log) = serve(root.path());
    let plain = format!("mqtt://127.0.0.1:{plain_port}");
    let mut c = Client5::connect_sut(&plain, true, &[&replies]).await;
    until_served(&mut c, &req, &replies).await;
    let n = 50;
    c.orders(&req, &replies, 0..n).await;
    let seen = c.collect(n, Duration::from_secs(30)).await;
    // Nothing answers on the connection the broker refused.
    c.request(
        &bad_req,
        "x",
        QoS::AtLeastOnce,
        Some(&replies),
        "refused",
        &[],
    )
    .await;
    let stray = c.next(Duration::from_secs(2)).await;
    let refusal = said(&log, &["wrong-password", "refused"]).await;
    sigterm(&decoy);
    let status = exit_within(&mut decoy, Duration::from_secs(40));
    let log = log.lock().unwrap().clone();
    for i in 0..n {
        let got = seen
            .get(&format!("o-{i}"))
            .unwrap_or_else(|| panic!("o-{i} not answered\n{log}"));
        assert_eq!(got[0].body, format!("accepted o-{i}"));
    }
    assert!(stray.is_none(), "{stray:?}");
    let refusal = refusal.unwrap_or_else(|| panic!("the refusal was not said\n{log}"));
    assert!(
        !refusal.contains("s3cret") && !refusal.contains("guess"),
        "no password in the log: {refusal}"
    );
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
}

#[tokio::test]
async fn nats_over_tls_with_a_user_and_with_a_token_is_served_and_wrong_credentials_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let Some(certs) = certificates(dir.path()) else {
        crate::common::skip("the openssl CLI is not installed here (apt-get install openssl)");
        return;
    };
    let mut tls_server = NatsServer::configured(
        dir.path(),
        "tls",
        &format!(
            "listen: 127.0.0.1:PORT\ntls {{ cert_file: \"{}\", key_file: \"{}\" }}\n\
             authorization {{ users = [ {{ user: decoy, password: \"s3cret\" }}, {{ user: sut, password: \"sut\" }} ] }}\n",
            certs.cert.display(),
            certs.key.display()
        ),
    );
    if !tls_server.start().await {
        crate::common::skip("nats-server is not installed here (tests/run.sh installs it)");
        return;
    }
    let mut token_server = NatsServer::configured(
        dir.path(),
        "token",
        "listen: 127.0.0.1:PORT\nauthorization { token: \"t0ken-for-decoy\" }\n",
    );
    assert!(token_server.start().await, "nats-server started");
    let (tls_port, token_port) = (tls_server.port, token_server.port);
    let p = crate::nats::prefix();
    let tls_url = format!("tls://127.0.0.1:{tls_port}");
    let token_url = format!("nats://127.0.0.1:{token_port}");
    let root = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([
                {"connectionId": "tls-user", "connectionData": {"type": "nats", "uri": tls_url,
                  "username": "decoy", "password": "s3cret", "tlsCaFile": certs.ca}},
                {"connectionId": "token", "connectionData": {"type": "nats", "uri": token_url,
                  "token": "t0ken-for-decoy"}},
                {"connectionId": "wrong-token", "connectionData": {"type": "nats", "uri": token_url,
                  "token": "guess"}}
            ])
            .to_string(),
        ),
        (
            "mq-mappings/tls.json",
            &json!({"connectionId": "tls-user", "request": {"destination": format!("{p}.tls.*")},
                    "response": {"text": "tls {{request.destination}}",
                                 "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mq-mappings/token.json",
            &json!({"connectionId": "token", "request": {"destination": format!("{p}.token")},
                    "response": {"text": "token"}})
            .to_string(),
        ),
        (
            "mq-mappings/never.json",
            &json!({"connectionId": "wrong-token", "request": {"destination": format!("{p}.never")},
                    "response": {"text": "never"}})
            .to_string(),
        ),
    ]);
    let (mut decoy, log) = serve(root.path());
    let tls_client = async_nats::ConnectOptions::with_user_and_password("sut".into(), "sut".into())
        .add_root_certificates(certs.ca.clone())
        .require_tls(true)
        .connect(&tls_url)
        .await
        .expect("the test's client connects over TLS");
    let token_client = async_nats::ConnectOptions::with_token("t0ken-for-decoy".into())
        .connect(&token_url)
        .await
        .expect("the test's client connects with the token");
    let h = async_nats::HeaderMap::new();
    crate::nats::until_served(&tls_client, &format!("{p}.tls.warmup"), "{}", h.clone()).await;
    crate::nats::until_served(&token_client, &format!("{p}.token"), "{}", h).await;
    let mut answers = Vec::new();
    for i in 0..20 {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            tls_client.request(format!("{p}.tls.{i}"), "{}".into()),
        )
        .await;
        answers.push(r.ok().and_then(Result::ok).map(|m| m.payload));
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            token_client.request(format!("{p}.token"), "{}".into()),
        )
        .await;
        answers.push(r.ok().and_then(Result::ok).map(|m| m.payload));
    }
    // Nobody serves the subject of the connection with the wrong token.
    let never = tokio::time::timeout(
        Duration::from_secs(5),
        token_client.request(format!("{p}.never"), "{}".into()),
    )
    .await;
    let refusal = said(&log, &["wrong-token", "authorization violation"]).await;
    sigterm(&decoy);
    let status = exit_within(&mut decoy, Duration::from_secs(40));
    let log = log.lock().unwrap().clone();
    for (i, pair) in answers.chunks(2).enumerate() {
        let want = format!("tls {p}.tls.{i}");
        assert_eq!(pair[0].as_deref(), Some(want.as_bytes()), "{log}");
        assert_eq!(pair[1].as_deref(), Some(&b"token"[..]), "{log}");
    }
    assert!(
        !matches!(never, Ok(Ok(_))),
        "answered on the refused connection: {never:?}"
    );
    let refusal = refusal.unwrap_or_else(|| panic!("the refusal was not said\n{log}"));
    assert!(!refusal.contains("guess"), "no token in the log: {refusal}");
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
}

#[tokio::test]
async fn amqp_1_0_over_tls_is_served_with_the_test_ca_and_refused_and_said_once_without_it() {
    within(Duration::from_secs(240), amqp_1_0_over_tls_steps()).await;
}

/// decoy's `amqps://` connections go through the TLS terminator to the machine's
/// RabbitMQ; the test's client asks over plain AMQP 1.0, straight to the broker.
async fn amqp_1_0_over_tls_steps() {
    let dir = tempfile::tempdir().unwrap();
    let Some(certs) = certificates(dir.path()) else {
        crate::common::skip("the openssl CLI is not installed here (apt-get install openssl)");
        return;
    };
    let Some(tls) = TlsTerminator::start(dir.path(), &certs, 5672).await else {
        crate::common::skip("haproxy is not installed here (tests/run.sh installs it)");
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, unserved_q] = queues(&ch).await;
    let uri = format!("amqps://guest:guest@127.0.0.1:{}", tls.port);
    let root = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([
                {"connectionId": "tls", "connectionData": {"type": "amqp1", "uri": uri,
                  "caCertificateFile": certs.ca}},
                {"connectionId": "tls-without-ca", "connectionData": {"type": "amqp1", "uri": uri}}
            ])
            .to_string(),
        ),
        (
            "mq-mappings/tls.json",
            &json!({"connectionId": "tls",
                    "request": {"destination": format!("/amq/queue/{req_q}")},
                    "response": {"text": "over TLS: {{request.body}}",
                                 "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mq-mappings/without-ca.json",
            &json!({"connectionId": "tls-without-ca",
                    "request": {"destination": format!("/amq/queue/{unserved_q}")},
                    "response": {"text": "never"}})
            .to_string(),
        ),
    ]);
    let (mut decoy, log, http_port) = serve_logged_with_port(root.path());
    let mut c = client(&req_q, &reply_q).await;
    // Even requests carry a correlation id, odd ones only a message id, which the
    // reply's correlation id then is.
    let n = 30;
    let mut expected = BTreeMap::new();
    for i in 0..n {
        let id = MessageId::String(format!("m-{i}"));
        let corr = (i % 2 == 0).then(|| MessageId::String(format!("c-{i}")));
        let key = format!("{:?}", corr.clone().unwrap_or(id.clone()));
        expected.insert(key, format!("over TLS: ask-{i}"));
        let outcome = c
            .sender
            .send(request(&format!("ask-{i}"), &reply_q, Some(id), corr, &[]))
            .await
            .unwrap();
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    let got = replies(&mut c, n, Duration::from_secs(60)).await;
    // The connection without the test's CA gives up every handshake, which HAProxy
    // logs; decoy says it once however often it tries again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tls.handshake_failures() < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let attempts = tls.handshake_failures();
    let refusal = said(&log, &["tls-without-ca", "UnknownIssuer"]).await;
    let health = http_get(http_port, "/__admin/health");
    sigterm(&decoy);
    let status = exit_within(&mut decoy, Duration::from_secs(40));
    drop(c);
    drop_queues(&ch, &[req_q, reply_q, unserved_q]).await;
    let log = log.lock().unwrap().clone();
    let answered: BTreeMap<String, String> = got
        .iter()
        .map(|(k, m)| (k.clone(), text_of(&m.body)))
        .collect();
    assert_eq!(
        answered, expected,
        "every request answered once, correlated\n{log}"
    );
    assert!(
        attempts >= 3,
        "HAProxy saw {attempts} refused handshakes\n{}",
        tls.log()
    );
    let refusal = refusal.unwrap_or_else(|| panic!("the refusal was not said\n{log}"));
    assert!(
        refusal.contains("not in the system's trust store")
            && refusal.contains("caCertificateFile"),
        "says what to do: {refusal}"
    );
    assert_eq!(
        lines_with(&log, "(connection \"tls-without-ca\") failed"),
        1,
        "said once, for {attempts} or more attempts\n{log}"
    );
    assert_eq!(
        lines_with(&log, "(connection \"tls\")"),
        0,
        "the connection with the CA never failed\n{log}"
    );
    assert!(health.contains("\"healthy\""), "{health}");
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
}

#[tokio::test]
async fn a_wrong_amqp_1_0_password_is_refused_and_said_naming_the_connection_and_decoy_goes_on() {
    within(Duration::from_secs(240), a_wrong_amqp_1_0_password_steps()).await;
}

/// RabbitMQ's AMQP 1.0 plugin answers a wrong password with the SASL outcome `auth`
/// and nothing more.
async fn a_wrong_amqp_1_0_password_steps() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let [req_q, reply_q, other_q] = queues(&ch).await;
    let root = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "bad-login", "connectionData": {"type": "amqp1",
                     "uri": "amqp://guest:wrong@127.0.0.1:5672"}}])
            .to_string(),
        ),
        (
            "mq-mappings/never.json",
            &json!({"connectionId": "bad-login",
                    "request": {"destination": format!("/amq/queue/{req_q}")},
                    "response": {"text": "never"}})
            .to_string(),
        ),
    ]);
    let (mut decoy, log, http_port) = serve_logged_with_port(root.path());
    let refusal = said(&log, &["bad-login", "refused the credentials"]).await;
    // Nothing serves the queue of the refused connection.
    let mut c = client(&req_q, &reply_q).await;
    c.sender
        .send(request(
            "ask",
            &reply_q,
            Some(MessageId::String("refused".into())),
            None,
            &[],
        ))
        .await
        .unwrap();
    let stray = replies(&mut c, 1, Duration::from_secs(2)).await;
    let health = http_get(http_port, "/__admin/health");
    sigterm(&decoy);
    let status = exit_within(&mut decoy, Duration::from_secs(40));
    drop(c);
    drop_queues(&ch, &[req_q, reply_q, other_q]).await;
    let log = log.lock().unwrap().clone();
    let refusal = refusal.unwrap_or_else(|| panic!("the refusal was not said\n{log}"));
    assert!(
        refusal.contains("connection \"bad-login\"")
            && refusal.contains("user \"guest\"")
            && refusal.contains("check the user and password"),
        "names the connection and the user, says what to do: {refusal}"
    );
    assert!(
        !refusal.contains("wrong"),
        "no password in the log: {refusal}"
    );
    assert!(
        stray.is_empty(),
        "answered on the refused connection: {stray:?}"
    );
    assert!(health.contains("\"healthy\""), "{health}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
}
