#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Broker connections as resources: a connect that never completes leaves nothing
//! behind, SIGTERM stops decoy whatever the broker does, failures are logged once and
//! summarised, and a request queue that does not exist is said once. These run the
//! `decoy` binary (threads and descriptors are counted from its `/proc` entry) against
//! a listener that accepts and never answers, and against the machine's RabbitMQ
//! (see `amqp.rs`).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use serde_json::json;

use crate::amqp::{ONE_AT_A_TIME, channel, declare_queue, drop_queues, get, publish, unique, url};
use crate::common::mq::connections;
use crate::common::process::{exit_within, lines_with, serve_logged as serve, sigterm};

/// A listener that accepts connections and never says a word: a broker that is
/// starting, or a port that is not a broker. Keeps every accepted socket, with when.
struct Silent {
    port: u16,
    accepted: Arc<Mutex<Vec<(Instant, TcpStream)>>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let kept = accepted.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                match s {
                    Ok(s) => kept.lock().unwrap().push((Instant::now(), s)),
                    Err(_) => return,
                }
            }
        });
        Silent { port, accepted }
    }

    fn count(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }
}

/// A root whose one connection is `data` and whose one mapping listens on `queue`
/// with `receivers` receivers.
fn mq_root(data: serde_json::Value, queue: &str, receivers: usize) -> tempfile::TempDir {
    crate::common::root(&[
        ("mq-connections.json", &connections("broker", data)),
        (
            "mq-mappings/answer.json",
            &json!({
                "mappingId": "answer",
                "request": {"destination": queue},
                "response": {"text": "pong"},
                "receiveThreads": receivers,
            })
            .to_string(),
        ),
    ])
}

/// Threads and open descriptors of process `pid`.
fn threads_and_fds(pid: u32) -> (usize, usize) {
    let count = |dir: String| std::fs::read_dir(dir).map_or(0, |d| d.count());
    (
        count(format!("/proc/{pid}/task")),
        count(format!("/proc/{pid}/fd")),
    )
}

/// Sends `ping` on `req_q` with `reply_q` as its reply-to and takes the reply (30 s
/// at most), stops decoy with SIGTERM (40 s at most) and deletes both queues: the
/// reply, decoy's exit status and its log.
async fn ping_then_stop(
    ch: &lapin::Channel,
    [req_q, reply_q]: [&String; 2],
    child: &mut std::process::Child,
    stderr: &Mutex<String>,
) -> (
    Option<(String, BasicProperties)>,
    Option<std::process::ExitStatus>,
    String,
) {
    publish(
        ch,
        req_q,
        "ping",
        BasicProperties::default().with_reply_to(reply_q.clone().into()),
    )
    .await;
    let reply = get(ch, reply_q, Duration::from_secs(30)).await;
    sigterm(child);
    let status = exit_within(child, Duration::from_secs(40));
    drop_queues(ch, &[req_q.clone(), reply_q.clone()]).await;
    let log = stderr.lock().unwrap().clone();
    (reply, status, log)
}

#[test]
fn connects_given_up_on_a_silent_listener_close_their_sockets_and_end_their_threads() {
    let silent = Silent::start();
    let receivers = 50;
    let dir = mq_root(
        json!({"type": "amqp", "uri": format!("amqp://guest:guest@127.0.0.1:{}/%2f", silent.port),
               "readConnectionsToOpen": receivers, "connectTimeoutMilliseconds": 500}),
        "never.answered",
        receivers,
    );
    let (mut child, stderr) = serve(dir.path());
    let pid = child.id();
    // Sample while the connects time out again and again (0.5 s each, then a pause of
    // up to 5 s). Leaked, each round would add `receivers` threads and descriptors.
    let started = Instant::now();
    let (mut early, mut late) = ((0, 0), (0, 0));
    while started.elapsed() < Duration::from_secs(16) {
        let (t, f) = threads_and_fds(pid);
        let slot = if started.elapsed() < Duration::from_secs(4) {
            &mut early
        } else {
            &mut late
        };
        *slot = (slot.0.max(t), slot.1.max(f));
        std::thread::sleep(Duration::from_millis(100));
    }
    let rounds = silent.count() / receivers;
    sigterm(&child);
    let status = exit_within(&mut child, Duration::from_secs(60));
    let log = stderr.lock().unwrap().clone();
    assert!(
        rounds >= 4,
        "only {} connects reached the listener; the test needs several rounds to mean anything\n{log}",
        silent.count()
    );
    assert!(
        late.0 <= early.0 + 10 && late.1 <= early.1 + 10,
        "threads and descriptors grew over {rounds} rounds of connects given up: \
         first 4 s at most {early:?}, after at most {late:?}\n{log}"
    );
    // Each socket given up was closed by decoy: the listener's end reads the protocol
    // header lapin sent, then the end of the stream (a socket left open would block).
    let accepted = std::mem::take(&mut *silent.accepted.lock().unwrap());
    for (_, mut s) in accepted.into_iter().take(2 * receivers) {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .expect("a socket decoy gave up on is closed");
    }
    // Logged once, then summarised: not a line per receiver per attempt.
    assert!(
        lines_with(&log, "receiving from never.answered") <= 3,
        "{log}"
    );
    assert!(
        status.is_some(),
        "decoy still running 60 s after SIGTERM\n{log}"
    );
}

#[test]
fn sigterm_stops_decoy_while_its_receivers_wait_on_connects_that_never_finish() {
    let silent = Silent::start();
    // One connection slot shared by 20 receivers: before the fix, each waited its turn
    // for a 10 s connect, and SIGTERM waited for all of them.
    let dir = mq_root(
        json!({"type": "amqp", "uri": format!("amqp://guest:guest@127.0.0.1:{}/%2f", silent.port)}),
        "never.answered",
        20,
    );
    let (mut child, stderr) = serve(dir.path());
    let deadline = Instant::now() + Duration::from_secs(10);
    while silent.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(silent.count() > 0, "decoy never connected");
    sigterm(&child);
    // Generous: the MQ side drains for up to 10 s (the HTTP side, 5 s, at the same time).
    let status = exit_within(&mut child, Duration::from_secs(40));
    let log = stderr.lock().unwrap().clone();
    let status = status.unwrap_or_else(|| panic!("decoy still running 40 s after SIGTERM\n{log}"));
    assert!(status.success(), "{status}\n{log}");
}

#[tokio::test]
async fn a_missing_request_queue_is_said_once_and_served_once_it_is_created() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let (req_q, reply_q) = (unique("missing-req"), unique("missing-reply"));
    let dir = mq_root(
        json!({"type": "amqp", "uri": url(), "readConnectionsToOpen": 4}),
        &req_q,
        4,
    );
    let (mut child, stderr) = serve(dir.path());
    // Let the receivers find it missing a few times.
    let said = |n: &str| lines_with(&stderr.lock().unwrap(), n);
    let deadline = Instant::now() + Duration::from_secs(20);
    while said("does not exist") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for q in [&req_q, &reply_q] {
        declare_queue(&ch, q).await;
    }
    let (reply, status, log) = ping_then_stop(&ch, [&req_q, &reply_q], &mut child, &stderr).await;
    assert_eq!(reply.map(|r| r.0).as_deref(), Some("pong"), "{log}");
    assert!(status.is_some(), "decoy still running after SIGTERM\n{log}");
    let missing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("does not exist"))
        .collect();
    assert_eq!(
        missing.len(),
        1,
        "said once, for 4 receivers retrying:\n{log}"
    );
    for part in [
        format!("queue {req_q:?} does not exist"),
        "(connection \"broker\")".to_owned(),
        "mapping mq-mappings/answer.json [0] (id answer) listens on it".to_owned(),
        format!("rabbitmqadmin declare queue name={req_q} durable=true"),
        "\"declareQueues\": true".to_owned(),
    ] {
        assert!(
            missing[0].contains(&part),
            "{part:?} not in {:?}",
            missing[0]
        );
    }
    assert!(!log.contains("NOT_FOUND"), "no raw broker error:\n{log}");
}

#[tokio::test]
async fn with_declare_queues_decoy_creates_a_missing_request_queue_and_answers() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_conn, ch) = channel().await;
    let (req_q, reply_q) = (unique("declared-req"), unique("declared-reply"));
    declare_queue(&ch, &reply_q).await;
    let dir = mq_root(
        json!({"type": "amqp", "uri": url(), "declareQueues": true}),
        &req_q,
        1,
    );
    let (mut child, stderr) = serve(dir.path());
    // The queue appears (durable) without anyone else declaring it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let passive = QueueDeclareOptions {
        passive: true,
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let (_probe_conn, probe) = channel().await;
    let mut probe = probe;
    loop {
        match probe
            .queue_declare(req_q.as_str().into(), passive, FieldTable::default())
            .await
        {
            Ok(_) => break,
            Err(_) if Instant::now() < deadline => {
                // A failed passive declare closes its channel.
                probe = channel().await.1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!(
                "decoy did not declare {req_q}: {e}\n{}",
                stderr.lock().unwrap()
            ),
        }
    }
    let (reply, status, log) = ping_then_stop(&ch, [&req_q, &reply_q], &mut child, &stderr).await;
    assert_eq!(reply.map(|r| r.0).as_deref(), Some("pong"), "{log}");
    assert!(status.is_some(), "{log}");
    assert!(!log.contains("does not exist"), "{log}");
}
