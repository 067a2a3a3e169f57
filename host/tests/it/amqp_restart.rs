//! MQ delivery guarantees across a real RabbitMQ restart (docs/mq.md, *Delivery
//! guarantees*): persistent requests on durable queues are all answered, with replies
//! that survive the restart too, and unmatched ones are all kept, even when the
//! unmatched queue did not exist.
//!
//! The broker is the machine's (`rabbitmqctl stop_app`, a pause, `start_app`), so the
//! test takes the lock of the other RabbitMQ tests, and a guard runs `start_app`
//! however the test ends. Its queues are its own (uniquely named, durable) and are
//! deleted at the end.

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use serde_json::json;

use crate::amqp::{ONE_AT_A_TIME, channel, drop_queues, unique, url};

const MATCHED: usize = 2000;
const UNMATCHED: usize = 200;

fn rabbitmqctl(args: &[&str]) -> Result<(), String> {
    let out = Command::new("rabbitmqctl").args(args).output().map_err(|e| {
        format!(
            "cannot run rabbitmqctl {args:?}: {e} (this test restarts the local broker; rabbitmqctl comes with rabbitmq-server, which tests/run.sh installs)"
        )
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "rabbitmqctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// While it lives the broker may be stopped; dropping it starts the broker again
/// (also when the test panics).
struct BrokerOutage;

impl BrokerOutage {
    fn begin() -> BrokerOutage {
        let guard = BrokerOutage;
        rabbitmqctl(&["stop_app"]).unwrap();
        guard
    }
}

impl Drop for BrokerOutage {
    fn drop(&mut self) {
        if let Err(e) = rabbitmqctl(&["start_app"]) {
            eprintln!("could not start RabbitMQ again: {e}");
        }
        let _ = rabbitmqctl(&["await_startup"]);
    }
}

/// A channel in confirm mode, once the broker accepts connections again.
async fn confirm_channel() -> (Connection, Channel) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match Connection::connect(&url(), ConnectionProperties::default()).await {
            Ok(conn) => {
                let ch = conn.create_channel().await.unwrap();
                ch.confirm_select(ConfirmSelectOptions::default())
                    .await
                    .unwrap();
                return (conn, ch);
            }
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "RabbitMQ is not back: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn depth(ch: &Channel, q: &str) -> u32 {
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .map(|q| q.message_count())
    .unwrap_or(0)
}

/// Takes messages from `q` until `want` distinct ids (`id` of each message's
/// properties) were seen or `wait` passed; every one must be persistent.
/// On a connection of its own, made again if the broker closes it (RabbitMQ may still
/// be settling after its restart).
async fn take_ids(
    q: &str,
    want: usize,
    wait: Duration,
    id: fn(&BasicProperties) -> Option<String>,
) -> HashSet<String> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = HashSet::new();
    let (mut conn, mut ch) = confirm_channel().await;
    while seen.len() < want && tokio::time::Instant::now() < deadline {
        match ch
            .basic_get(q.into(), BasicGetOptions { no_ack: true })
            .await
        {
            Ok(Some(m)) => {
                let p = &m.delivery.properties;
                assert_eq!(*p.delivery_mode(), Some(2), "persistent, as its request");
                seen.extend(id(p));
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
            // Not there yet (an unmatched queue decoy has still to declare): the
            // broker closed the channel.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                match conn.create_channel().await {
                    Ok(c) => ch = c,
                    Err(_) => (conn, ch) = confirm_channel().await,
                }
            }
        }
    }
    seen
}

#[tokio::test]
async fn persistent_requests_are_all_answered_across_a_broker_restart_and_unmatched_ones_all_kept()
{
    let _one = ONE_AT_A_TIME.lock().await;
    // decoy's MQ log, shown if the test fails.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("decoy_mq=info")
        .with_test_writer()
        .try_init();
    let (_conn, ch) = confirm_channel().await;
    // The system's queues, durable. The unmatched queue does not exist: decoy
    // declares it (durable) when the first unmatched message comes back unroutable.
    let (req_q, reply_q, lost_q) = (unique("req"), unique("reply"), unique("unmatched"));
    // Deleted at the end; should the test stop half-way, RabbitMQ deletes them after
    // ten minutes unused (`x-expires`).
    let mut expires = FieldTable::default();
    expires.insert("x-expires".into(), AMQPValue::LongInt(600_000));
    for q in [&req_q, &reply_q] {
        ch.queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            expires.clone(),
        )
        .await
        .unwrap();
    }
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "rabbit",
                     "connectionData": {"type": "amqp", "uri": url(), "readConnectionsToOpen": 2,
                                        "writeConnectionsToOpen": 2, "prefetch": 50,
                                        "unmatched": {"queue": lost_q}}}])
            .to_string(),
        ),
        (
            "mq-mappings/work.json",
            &json!({"request": {"destination": req_q, "bodyMatcher": {"equalTo": "work"}},
                    "response": {"text": "done", "fixedDelayMilliseconds": 20},
                    "receiveThreads": 2, "sendThreads": 2})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    // Persistent requests, confirmed by the broker (so on disk) before the restart.
    let mut confirms = Vec::new();
    for i in 0..MATCHED + UNMATCHED {
        let body: &[u8] = if i < MATCHED { b"work" } else { b"stray" };
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_reply_to(reply_q.clone().into())
            .with_message_id(format!("m-{i}").into());
        let c = ch
            .basic_publish(
                "".into(),
                req_q.as_str().into(),
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await
            .unwrap();
        confirms.push(c);
    }
    for c in confirms {
        assert!(c.await.unwrap().is_ack());
    }
    // Restart while replies wait unconsumed in their queue and requests are still
    // being answered.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while (depth(&ch, &reply_q).await as usize) < MATCHED / 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "decoy did not start answering"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = depth(&ch, &reply_q).await;
    let outage = BrokerOutage::begin();
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(outage);
    eprintln!("{before} replies were waiting when the broker stopped");

    let id = |p: &BasicProperties| p.correlation_id().as_ref().map(|c| c.to_string());
    let answered = take_ids(&reply_q, MATCHED, Duration::from_secs(180), id).await;
    let id = |p: &BasicProperties| p.message_id().as_ref().map(|c| c.to_string());
    let kept = take_ids(&lost_q, UNMATCHED, Duration::from_secs(60), id).await;
    server.shutdown().await;
    let (_conn, ch) = confirm_channel().await;
    drop_queues(&ch, &[req_q, reply_q, lost_q]).await;
    assert_eq!(answered.len(), MATCHED, "requests answered");
    assert_eq!(kept.len(), UNMATCHED, "unmatched messages kept");
    assert!(
        (0..MATCHED).all(|i| answered.contains(&format!("m-{i}"))),
        "each request answered"
    );
}

#[tokio::test]
async fn an_unmatched_message_is_kept_when_its_queue_was_deleted_while_serving() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (conn, ch) = channel().await;
    let (req_q, lost_q) = (unique("req"), unique("unmatched"));
    for q in [&req_q, &lost_q] {
        ch.queue_declare(
            q.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    }
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "rabbit",
                     "connectionData": {"type": "amqp", "uri": url(), "unmatched": {"queue": lost_q}}}])
            .to_string(),
        ),
        (
            "mq-mappings/ping.json",
            &json!({"request": {"destination": req_q, "bodyMatcher": {"equalTo": "ping"}},
                    "response": {"text": "pong"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    crate::amqp::publish(&ch, &req_q, "first", BasicProperties::default()).await;
    let first = crate::amqp::get(&ch, &lost_q, Duration::from_secs(20)).await;
    assert_eq!(first.map(|m| m.0).as_deref(), Some("first"));
    // Someone deletes the unmatched queue: the next unmatched message is not lost.
    drop_queues(&ch, std::slice::from_ref(&lost_q)).await;
    crate::amqp::publish(&ch, &req_q, "second", BasicProperties::default()).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let second = loop {
        // A fresh channel each time: a get from a missing queue closes the channel.
        let probe = conn.create_channel().await.unwrap();
        if let Ok(Some(m)) = probe
            .basic_get(lost_q.as_str().into(), BasicGetOptions { no_ack: true })
            .await
        {
            break Some(String::from_utf8_lossy(&m.delivery.data).into_owned());
        }
        if tokio::time::Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    server.shutdown().await;
    drop_queues(&ch, &[req_q, lost_q]).await;
    assert_eq!(
        second.as_deref(),
        Some("second"),
        "moved to the declared queue"
    );
}
