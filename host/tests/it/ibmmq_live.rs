#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The IBM MQ adapter against a real queue manager. It runs only where
//! `DECOY_IBMMQ_TEST` names one, as `HOST(PORT)/QMGR/CHANNEL` (for IBM's developer
//! container: `127.0.0.1(1414)/QM1/DEV.APP.SVRCONN`), with the client library
//! installed (`MQ_INSTALLATION_PATH` or `/opt/mqm`). `DECOY_IBMMQ_USER` and
//! `DECOY_IBMMQ_PASSWORD` default to the container's `app` / `passw0rd`. It uses the
//! container's queues DEV.QUEUE.1 (requests) and DEV.QUEUE.2 (replies).
//! docs/mq.md says how to start the container. Everywhere else the adapter is
//! tested against mqi's mock of the MQI (`host/crates/mq/src/ibmmq/tests.rs`).

use std::str::FromStr as _;

use decoy_mq::config::IbmMqConfig;
use decoy_mq::ibmmq;
use mqi::get::GetWait;
use mqi::types::{CorrelationId, MessageId, QueueName, ReplyToQueueName};
use mqi::{Object, constants, structs};
use serde_json::json;

fn target() -> Option<IbmMqConfig> {
    let spec = std::env::var("DECOY_IBMMQ_TEST").ok()?;
    let mut parts = spec.splitn(3, '/');
    let (server, qm, channel) = (parts.next()?, parts.next()?, parts.next()?);
    let (host, port) = server.trim_end_matches(')').split_once('(')?;
    Some(IbmMqConfig {
        hostname: host.to_owned(),
        port: port
            .parse()
            .expect("DECOY_IBMMQ_TEST: HOST(PORT)/QMGR/CHANNEL"),
        queue_manager: qm.to_owned(),
        channel: channel.to_owned(),
        username: Some(std::env::var("DECOY_IBMMQ_USER").unwrap_or_else(|_| "app".into())),
        password: Some(std::env::var("DECOY_IBMMQ_PASSWORD").unwrap_or_else(|_| "passw0rd".into())),
        use_mqcsp: true,
        read_connections: 1,
        write_connections: 1,
        ssl_cipher_suite: None,
        ssl_peer_name: None,
    })
}

// Ignored (reported as such, never as a pass) unless asked for: `DECOY_IBMMQ_TEST=...
// cargo test -p decoy --test it -- --ignored ibmmq_live`. Asked for without a queue
// manager named, it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real IBM MQ queue manager: set DECOY_IBMMQ_TEST=HOST(PORT)/QMGR/CHANNEL and run with --ignored (docs/mq.md)"]
async fn a_request_put_on_a_real_queue_manager_gets_its_reply() {
    let c = target().expect(
        "DECOY_IBMMQ_TEST must name a queue manager as HOST(PORT)/QMGR/CHANNEL (docs/mq.md)",
    );
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "qm", "connectionData": {
                "type": "ibm-mq", "hostname": c.hostname, "port": c.port,
                "queueManager": c.queue_manager, "channel": c.channel,
                "username": c.username, "password": c.password,
                "unmatched": {"queue": "DEV.DEAD.LETTER.QUEUE"}}}])
            .to_string(),
        ),
        (
            "mq-mappings/quote.json",
            &json!({"request": {"destination": {"name": "DEV.QUEUE.1", "type": "QUEUE"},
                                "bodyMatcher": {"contains": "<quoteRequest"}},
                    "response": {"text": "<quote>42</quote>", "format": "MQFMT_STRING"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    let reply = tokio::task::spawn_blocking(move || {
        let dirs = ibmmq::library_dirs();
        let path = ibmmq::find_client(&dirs).expect("the IBM MQ client library");
        let lib = ibmmq::load_client(&path).unwrap();
        let conn = ibmmq::connect(lib, &c).unwrap();
        let msg_id = conn
            .put_message_with::<MessageId>(
                &QueueName::from_str("DEV.QUEUE.1").unwrap(),
                &(
                    constants::MQMT_REQUEST,
                    ReplyToQueueName::from_str("DEV.QUEUE.2").unwrap(),
                ),
                "<quoteRequest symbol='ACME'/>",
            )
            .unwrap()
            .discard_warning();
        let replies = Object::open(
            &conn,
            &(
                QueueName::from_str("DEV.QUEUE.2").unwrap(),
                constants::MQOO_INPUT_AS_Q_DEF,
            ),
        )
        .unwrap()
        .discard_warning();
        let mut buffer = vec![0u8; 64 * 1024];
        let got = replies
            .get_data_with::<structs::MQMD, u8>(
                &(GetWait::Wait(20_000), CorrelationId(msg_id.0)),
                &mut buffer,
            )
            .unwrap()
            .discard_warning()
            .map(|(data, md)| (String::from_utf8_lossy(data).into_owned(), *md));
        drop(replies);
        let _ = conn.disconnect();
        got
    })
    .await
    .unwrap();
    let (body, md) = reply.expect("a reply on DEV.QUEUE.2 within 20 s");
    assert_eq!(body, "<quote>42</quote>");
    assert_eq!(md.MsgType, 2, "MQMT_REPLY");
    assert_eq!(md.CodedCharSetId, 1208);
    server.shutdown().await;
}
