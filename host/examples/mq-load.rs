//! Load for MQ virtual services on RabbitMQ, and the bare responder they are compared
//! with. Used by `bench/mq.py`; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example mq-load -- setup     --prefix bench --queues 20
//! cargo run --release --features bench --example mq-load -- respond   --prefix bench --queues 20 [--delay-ms 100]
//! cargo run --release --features bench --example mq-load -- drive     --prefix bench --queues 20 --seconds 10 --size 490
//! cargo run --release --features bench --example mq-load -- teardown  --prefix bench --queues 20
//! cargo run --release --features bench --example mq-load -- soak      --prefix soak --queues 2 --seconds 1800 --rate 50
//! ```
//!
//! `soak` (for `bench/soak.py`) sends `--rate` persistent requests a second for
//! `--seconds`, each with its own message id, counts one as sent once the broker has
//! confirmed it, takes the replies from a queue of its own, waits up to `--grace`
//! seconds for the last ones, and prints one JSON line: sent, answered, lost (sent and
//! never answered), duplicates (answered twice: allowed, at-least-once) and publish
//! errors.
//!
//! `drive` keeps `--window` requests in flight per queue, each with a reply-to queue
//! and a message id, takes the replies (matched by correlation id), and prints one
//! JSON line: transactions per second and round-trip latency percentiles, counted
//! over `--seconds` after a `--warmup`. `respond` is what a hand-written service on
//! `lapin` would do, with nothing decoy adds (no files, no matching, no metrics): it
//! consumes every request queue, waits `--delay-ms`, puts a fixed reply, and
//! acknowledges the request once the reply's publisher confirm arrives (up to 8
//! confirms awaited at once per queue), as decoy does: the ceiling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Flags, JsonLine, QUOTE_REPLY, Tally, declare_queues, quote_request, request_queue};
use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

struct Args {
    cmd: String,
    url: String,
    prefix: String,
    queues: usize,
    seconds: u64,
    warmup: u64,
    size: usize,
    window: usize,
    delay_ms: u64,
    connections: usize,
    /// `soak`: requests a second, and how long to wait for the last replies.
    rate: u64,
    grace: u64,
    /// `drive`: a reply counts as right only if it carries the request's account
    /// (it was templated from the request, not fixed).
    expect_account: bool,
}

fn args() -> Args {
    let (cmd, mut f) = Flags::command_line(&["--expect-account"]);
    let url = std::env::var("DECOY_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let a = Args {
        cmd,
        url: f.string("--url", &url),
        prefix: f.string("--prefix", "decoy-bench"),
        queues: f.value("--queues", 20),
        seconds: f.value("--seconds", 10),
        warmup: f.value("--warmup", 3),
        size: f.value("--size", 490),
        window: f.value("--window", 50),
        delay_ms: f.value("--delay-ms", 0),
        connections: f.value("--connections", 5),
        rate: f.value("--rate", 50),
        grace: f.value("--grace", 60),
        expect_account: f.switch("--expect-account"),
    };
    f.finish();
    a
}

fn queue(a: &Args, i: usize) -> String {
    request_queue(&a.prefix, i)
}

async fn connect(url: &str) -> Connection {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("RabbitMQ is reachable")
}

fn request_body(i: u64, size: usize) -> Vec<u8> {
    quote_request(i, size).into_bytes()
}

#[tokio::main]
async fn main() {
    let a = args();
    match a.cmd.as_str() {
        "setup" => setup(&a, true).await,
        "teardown" => setup(&a, false).await,
        "respond" => respond(&a).await,
        "drive" => drive(&a).await,
        "soak" => soak(&a).await,
        _ => {
            eprintln!(
                "usage: mq-load setup|teardown|respond|drive|soak [--url U] [--prefix P] [--queues N] ..."
            );
            std::process::exit(2);
        }
    }
}

async fn setup(a: &Args, create: bool) {
    declare_queues(&a.url, (0..a.queues).map(|i| queue(a, i)), create).await;
}

async fn respond(a: &Args) {
    let reply_body: Arc<Vec<u8>> = Arc::new(QUOTE_REPLY.as_bytes().to_vec());
    let mut read = Vec::new();
    let mut write = Vec::new();
    for _ in 0..a.connections {
        read.push(connect(&a.url).await);
        write.push(connect(&a.url).await);
    }
    let mut tasks = Vec::new();
    for i in 0..a.queues {
        let rx = read[i % read.len()].create_channel().await.unwrap();
        rx.basic_qos(100, BasicQosOptions::default()).await.unwrap();
        let tx = write[i % write.len()].create_channel().await.unwrap();
        tx.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let mut consumer = rx
            .basic_consume(
                queue(a, i).as_str().into(),
                "bare".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let (jobs, mut pending) = tokio::sync::mpsc::channel::<lapin::message::Delivery>(256);
        let delay = Duration::from_millis(a.delay_ms);
        // Receive, wait on a timer, hand to the sender: the same shape as decoy.
        tasks.push(tokio::spawn(async move {
            while let Some(Ok(d)) = consumer.next().await {
                let jobs = jobs.clone();
                if delay.is_zero() {
                    let _ = jobs.send(d).await;
                } else {
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = jobs.send(d).await;
                    });
                }
            }
        }));
        let body = reply_body.clone();
        let tx = Arc::new(tx);
        // Up to 8 replies per queue waiting for their confirms, as decoy's senders.
        let window = Arc::new(tokio::sync::Semaphore::new(8));
        tasks.push(tokio::spawn(async move {
            while let Some(d) = pending.recv().await {
                let permit = window.clone().acquire_owned().await.unwrap();
                let (tx, body) = (tx.clone(), body.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let Some(reply_to) = d.properties.reply_to().clone() else {
                        let _ = d.ack(BasicAckOptions::default()).await;
                        return;
                    };
                    let mut props = BasicProperties::default();
                    if let Some(id) = d.properties.message_id().clone() {
                        props = props.with_correlation_id(id);
                    }
                    let confirm = tx
                        .basic_publish(
                            "".into(),
                            reply_to,
                            BasicPublishOptions::default(),
                            &body,
                            props,
                        )
                        .await
                        .unwrap()
                        .await
                        .unwrap();
                    assert!(confirm.is_ack());
                    d.ack(BasicAckOptions::default()).await.unwrap();
                });
            }
        }));
    }
    println!("bare responder ready on {} queues", a.queues);
    tokio::signal::ctrl_c().await.ok();
    for t in tasks {
        t.abort();
    }
}

async fn drive(a: &Args) {
    let conn = connect(&a.url).await;
    let ch = conn.create_channel().await.unwrap();
    let reply_q = ch
        .queue_declare(
            "".into(),
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap()
        .name()
        .clone();
    let start = Instant::now();
    let tally = Arc::new(Tally::default());
    let slots = Arc::new(tokio::sync::Semaphore::new(a.window * a.queues));

    // Replies: match by correlation id, record the round trip, free a window slot.
    let rch = conn.create_channel().await.unwrap();
    let mut consumer = rch
        .basic_consume(
            reply_q.clone(),
            "driver".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    {
        let (tally, slots) = (tally.clone(), slots.clone());
        let expect_account = a.expect_account;
        tokio::spawn(async move {
            while let Some(Ok(d)) = consumer.next().await {
                let id = d
                    .properties
                    .correlation_id()
                    .as_ref()
                    .and_then(|c| c.as_str().parse::<u64>().ok());
                let at = id.and_then(|id| tally.take(id));
                let account_ok = !expect_account
                    || id.is_some_and(|id| {
                        let want = format!("<account>ACC-{:06}</account>", id % 1_000_000);
                        d.data.windows(want.len()).any(|w| w == want.as_bytes())
                    });
                match at {
                    Some(t) if d.data.starts_with(b"<quote>") && account_ok => tally.right(t),
                    _ => tally.wrong(),
                }
                slots.add_permits(1);
            }
        });
    }

    // Requests: one publisher per connection share, spread over the queues.
    let next = Arc::new(AtomicU64::new(0));
    let mut publishers = Vec::new();
    for p in 0..a.connections.max(1) {
        let ch = conn.create_channel().await.unwrap();
        let (tally, slots, next, reply_q) =
            (tally.clone(), slots.clone(), next.clone(), reply_q.clone());
        let queues: Vec<String> = (0..a.queues).map(|i| queue(a, i)).collect();
        let size = a.size;
        let step = a.connections.max(1);
        publishers.push(tokio::spawn(async move {
            let mut k = p;
            while !tally.done() {
                let Ok(permit) = slots.acquire().await else {
                    break;
                };
                permit.forget();
                let id = next.fetch_add(1, Ordering::Relaxed);
                let q = &queues[k % queues.len()];
                k += step;
                tally.sent(id);
                let props = BasicProperties::default()
                    .with_reply_to(reply_q.clone())
                    .with_message_id(id.to_string().into());
                if ch
                    .basic_publish(
                        "".into(),
                        q.as_str().into(),
                        BasicPublishOptions::default(),
                        &request_body(id, size),
                        props,
                    )
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }));
    }
    let elapsed = tally.measure(a.warmup, a.seconds).await;
    slots.close();
    tally.report(elapsed, start).print();
}

/// `soak`'s connection: a publisher in confirm mode and a consumer of the replies,
/// which count into `answered`. Made again when the broker drops it (on a shared
/// broker other clients may close every connection).
async fn soak_session(
    a: &Args,
    reply_q: &str,
    answered: &Arc<std::sync::Mutex<HashMap<u64, u32>>>,
) -> Result<(Connection, lapin::Channel), lapin::Error> {
    let conn = Connection::connect(&a.url, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    ch.queue_declare(
        reply_q.into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await?;
    let mut consumer = ch
        .basic_consume(
            reply_q.into(),
            "soak".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    let answered = answered.clone();
    tokio::spawn(async move {
        while let Some(Ok(d)) = consumer.next().await {
            if let Some(id) = d
                .properties
                .correlation_id()
                .as_ref()
                .and_then(|c| c.as_str().parse::<u64>().ok())
            {
                *answered.lock().unwrap().entry(id).or_default() += 1;
            }
        }
    });
    let pch = conn.create_channel().await?;
    pch.confirm_select(ConfirmSelectOptions::default()).await?;
    Ok((conn, pch))
}

async fn soak(a: &Args) {
    use std::collections::HashSet;
    let reply_q = format!("{}.replies", a.prefix);
    // Ids confirmed by the broker, and ids answered (with how often).
    let sent: Arc<std::sync::Mutex<HashSet<u64>>> = Arc::default();
    let answered: Arc<std::sync::Mutex<HashMap<u64, u32>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let reconnects = Arc::new(AtomicU64::new(0));
    let mut session = None;
    let queues: Vec<String> = (0..a.queues).map(|i| queue(a, i)).collect();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / a.rate.max(1) as f64));
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let mut confirms = tokio::task::JoinSet::new();
    let mut id = 0u64;
    while Instant::now() < end {
        tick.tick().await;
        if session.is_none() {
            match soak_session(a, &reply_q, &answered).await {
                Ok(s) => session = Some(s),
                Err(_) => {
                    reconnects.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
        }
        let Some((_, pch)) = &session else { continue };
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_reply_to(reply_q.clone().into())
            .with_message_id(id.to_string().into());
        let q = &queues[id as usize % queues.len()];
        match pch
            .basic_publish(
                "".into(),
                q.as_str().into(),
                BasicPublishOptions::default(),
                &request_body(id, a.size),
                props,
            )
            .await
        {
            Ok(confirm) => {
                let (sent, errors) = (sent.clone(), errors.clone());
                confirms.spawn(async move {
                    match confirm.await {
                        Ok(c) if c.is_ack() => {
                            sent.lock().unwrap().insert(id);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
                while confirms.try_join_next().is_some() {}
            }
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
                reconnects.fetch_add(1, Ordering::Relaxed);
                session = None;
            }
        }
        id += 1;
    }
    while confirms.join_next().await.is_some() {}
    // The last replies (a reconnecting decoy may still be catching up); the replies
    // queue keeps what arrives while this side reconnects.
    let grace_end = Instant::now() + Duration::from_secs(a.grace);
    loop {
        let missing = {
            let (s, r) = (sent.lock().unwrap(), answered.lock().unwrap());
            s.iter().filter(|i| !r.contains_key(i)).count()
        };
        if missing == 0 || Instant::now() > grace_end {
            break;
        }
        if session
            .as_ref()
            .is_none_or(|(c, _)| !c.status().connected())
        {
            session = soak_session(a, &reply_q, &answered).await.ok();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    {
        let (s, r) = (sent.lock().unwrap(), answered.lock().unwrap());
        let lost = s.iter().filter(|i| !r.contains_key(i)).count();
        let duplicates: u32 = r.values().map(|n| n - 1).sum();
        JsonLine::new()
            .field("sent", s.len())
            .field("answered", r.keys().filter(|i| s.contains(i)).count())
            .field("lost", lost)
            .field("duplicates", duplicates)
            .field("publish_errors", errors.load(Ordering::Relaxed))
            .field("driver_reconnects", reconnects.load(Ordering::Relaxed))
            .print();
    }
    if let Ok(conn) = Connection::connect(&a.url, ConnectionProperties::default()).await
        && let Ok(ch) = conn.create_channel().await
    {
        let _ = ch
            .queue_delete(reply_q.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
}
