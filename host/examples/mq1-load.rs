//! Load for AMQP 1.0 virtual services, and the bare responder they are compared
//! with, both on `fe2o3-amqp` (the client decoy's `amqp1` transport uses). Used by
//! `bench/mq_amqp1.py`; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example mq1-load -- setup    --prefix b --queues 20
//! cargo run --release --features bench --example mq1-load -- respond  --prefix b --queues 20
//! cargo run --release --features bench --example mq1-load -- drive    --prefix b --queues 20 --seconds 10
//! cargo run --release --features bench --example mq1-load -- teardown --prefix b --queues 20
//! ```
//!
//! Queues are `PREFIX.req.NN` and `PREFIX.reply`, made and deleted over AMQP 0-9-1
//! and addressed as `/amq/queue/NAME`. `drive` keeps `--window` requests in flight
//! per queue, each with a reply-to address and a message id, takes the replies
//! (matched by correlation id) and prints one JSON line: transactions per second and
//! round-trip latency percentiles over `--seconds` after a `--warmup`. `respond` is
//! what a hand-written service on the same client would do, with nothing decoy adds
//! (no files, no matching, no metrics): a receiving link per request queue with 100
//! credit, a fixed reply to the request's reply-to with its message id as
//! correlation id, sent unsettled, and the request accepted once the broker accepted
//! the reply (up to 8 replies awaited at once per queue), as decoy does: the ceiling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::{AmqpValue, Body, Message, MessageId, Properties, Source};
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;

const AMQP1: &str = "amqp://guest:guest@127.0.0.1:5672";
const AMQP091: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const REPLY: &str =
    "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>";

struct Args {
    cmd: String,
    prefix: String,
    queues: usize,
    seconds: u64,
    warmup: u64,
    size: usize,
    window: usize,
    connections: usize,
}

fn args() -> Args {
    let mut a = Args {
        cmd: String::new(),
        prefix: "decoy-bench1".into(),
        queues: 1,
        seconds: 10,
        warmup: 3,
        size: 490,
        window: 50,
        connections: 2,
    };
    let mut it = std::env::args().skip(1);
    a.cmd = it.next().unwrap_or_default();
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--prefix" => a.prefix = value(),
            "--queues" => a.queues = value().parse().unwrap(),
            "--seconds" => a.seconds = value().parse().unwrap(),
            "--warmup" => a.warmup = value().parse().unwrap(),
            "--size" => a.size = value().parse().unwrap(),
            "--window" => a.window = value().parse().unwrap(),
            "--connections" => a.connections = value().parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn queue(a: &Args, i: usize) -> String {
    format!("{}.req.{i:02}", a.prefix)
}

fn reply_queue(a: &Args) -> String {
    format!("{}.reply", a.prefix)
}

fn request_body(i: u64, size: usize) -> String {
    let head = format!(
        "<quoteRequest><id>{i}</id><symbol>ACME</symbol><account>ACC-{:06}</account><pad>",
        i % 1_000_000
    );
    let tail = "</pad></quoteRequest>";
    let pad = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

fn text(s: String) -> Body<Value> {
    Body::Value(AmqpValue(Value::String(s)))
}

#[tokio::main]
async fn main() {
    let a = args();
    match a.cmd.as_str() {
        "setup" => setup(&a, true).await,
        "teardown" => setup(&a, false).await,
        "respond" => respond(&a).await,
        "drive" => drive(&a).await,
        _ => {
            eprintln!("usage: mq1-load setup|teardown|respond|drive [--prefix P] [--queues N] ...");
            std::process::exit(2);
        }
    }
}

async fn setup(a: &Args, create: bool) {
    let conn = lapin::Connection::connect(AMQP091, lapin::ConnectionProperties::default())
        .await
        .expect("RabbitMQ is reachable");
    let ch = conn.create_channel().await.unwrap();
    let names: Vec<String> = (0..a.queues)
        .map(|i| queue(a, i))
        .chain([reply_queue(a)])
        .collect();
    for q in names {
        if create {
            ch.queue_declare(
                q.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        } else {
            let _ = ch
                .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
    }
}

async fn open(
    name: String,
) -> (
    fe2o3_amqp::connection::ConnectionHandle<()>,
    fe2o3_amqp::session::SessionHandle<()>,
) {
    let mut conn = Connection::open(name, AMQP1)
        .await
        .expect("RabbitMQ's AMQP 1.0 plugin is reachable");
    let session = Session::begin(&mut conn).await.unwrap();
    (conn, session)
}

async fn respond(a: &Args) {
    let mut tasks = Vec::new();
    let mut read = Vec::new();
    let mut write = Vec::new();
    for c in 0..a.connections.max(1) {
        read.push(open(format!("bare-read-{c}")).await);
        write.push(open(format!("bare-write-{c}")).await);
    }
    for i in 0..a.queues {
        let (_, rs) = &mut read[i % a.connections.max(1)];
        let mut receiver = Receiver::builder()
            .name(format!("bare-in-{i}"))
            .source(
                Source::builder()
                    .address(format!("/amq/queue/{}", queue(a, i)))
                    .build(),
            )
            .credit_mode(CreditMode::Auto(100))
            .auto_accept(false)
            .attach(rs)
            .await
            .unwrap();
        let (_, ws) = &mut write[i % a.connections.max(1)];
        // One link to the driver's reply queue (the only reply-to it sees).
        let reply_to = format!("/amq/queue/{}", reply_queue(a));
        let sender = Sender::attach(ws, format!("bare-out-{i}"), reply_to.clone())
            .await
            .unwrap();
        let sender = Arc::new(tokio::sync::Mutex::new(sender));
        let disposer = receiver.disposer();
        let window = Arc::new(tokio::sync::Semaphore::new(8));
        tasks.push(tokio::spawn(async move {
            while let Ok(d) = receiver.recv::<Body<Value>>().await {
                let permit = window.clone().acquire_owned().await.unwrap();
                let (sender, disposer) = (sender.clone(), disposer.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let (info, m) = d.into_parts();
                    let props = m.properties.unwrap_or_default();
                    let reply = Message::builder()
                        .properties(Properties {
                            correlation_id: props.message_id,
                            ..Properties::default()
                        })
                        .body(text(REPLY.to_owned()))
                        .build();
                    let fut = sender.lock().await.send_batchable(reply).await.unwrap();
                    let outcome = fut.await.unwrap();
                    assert!(outcome.is_accepted());
                    disposer.accept(info).await.unwrap();
                });
            }
        }));
    }
    println!("bare responder ready on {} queues", a.queues);
    tokio::signal::ctrl_c().await.ok();
    for t in tasks {
        t.abort();
    }
    drop((read, write));
}

async fn drive(a: &Args) {
    let (_conn, mut session) = open(format!("driver-{}", uuid::Uuid::new_v4())).await;
    let reply_to = format!("/amq/queue/{}", reply_queue(a));
    let mut replies_link = Receiver::builder()
        .name("driver-replies")
        .source(Source::builder().address(reply_to.clone()).build())
        .credit_mode(CreditMode::Auto(2000))
        .auto_accept(true)
        .attach(&mut session)
        .await
        .unwrap();
    let start = Instant::now();
    let sent: Arc<std::sync::Mutex<HashMap<u64, Instant>>> = Arc::default();
    let counting = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let replies = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    let latencies: Arc<std::sync::Mutex<Vec<u32>>> = Arc::default();
    let slots: Vec<Arc<tokio::sync::Semaphore>> = (0..a.queues)
        .map(|_| Arc::new(tokio::sync::Semaphore::new(a.window)))
        .collect();
    {
        let (sent, counting, replies, wrong, latencies, slots) = (
            sent.clone(),
            counting.clone(),
            replies.clone(),
            wrong.clone(),
            latencies.clone(),
            slots.clone(),
        );
        tokio::spawn(async move {
            while let Ok(d) = replies_link.recv::<Body<Value>>().await {
                let m = d.into_message();
                let id = match m.properties.and_then(|p| p.correlation_id) {
                    Some(MessageId::String(s)) => s.parse::<u64>().ok(),
                    _ => None,
                };
                let at = id.and_then(|id| sent.lock().unwrap().remove(&id));
                let ok = matches!(&m.body, Body::Value(AmqpValue(Value::String(s))) if s.starts_with("<quote>"));
                match (at, id) {
                    (Some(t), Some(id)) if ok => {
                        if counting.load(Ordering::Relaxed) {
                            replies.fetch_add(1, Ordering::Relaxed);
                            latencies
                                .lock()
                                .unwrap()
                                .push(t.elapsed().as_micros() as u32);
                        }
                        slots[(id % slots.len() as u64) as usize].add_permits(1);
                    }
                    _ => {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    // One sender link per request queue; request ids are spread so that id % queues
    // names the queue (and its window).
    let mut publishers = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let mut link = Sender::attach(
            &mut session,
            format!("driver-{i}"),
            format!("/amq/queue/{}", queue(a, i)),
        )
        .await
        .unwrap();
        let (sent, done, slot, reply_to) =
            (sent.clone(), done.clone(), slot.clone(), reply_to.clone());
        let (queues, size) = (a.queues as u64, a.size);
        publishers.push(tokio::spawn(async move {
            let mut round = 0u64;
            while !done.load(Ordering::Relaxed) {
                let Ok(permit) = slot.acquire().await else {
                    break;
                };
                permit.forget();
                let id = round * queues + i as u64;
                round += 1;
                sent.lock().unwrap().insert(id, Instant::now());
                let m = Message::builder()
                    .properties(Properties {
                        message_id: Some(MessageId::String(id.to_string())),
                        reply_to: Some(reply_to.clone()),
                        ..Properties::default()
                    })
                    .body(text(request_body(id, size)))
                    .build();
                // The broker's outcome is not awaited: the reply is what counts.
                if link.send_batchable(m).await.is_err() {
                    break;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(a.warmup)).await;
    counting.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    counting.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    for s in &slots {
        s.close();
    }
    let n = replies.load(Ordering::Relaxed);
    let mut l = latencies.lock().unwrap().clone();
    l.sort_unstable();
    let pct = |p: f64| {
        if l.is_empty() {
            0.0
        } else {
            l[((l.len() as f64 * p) as usize).min(l.len() - 1)] as f64 / 1000.0
        }
    };
    println!(
        "{{\"tps\": {:.1}, \"replies\": {n}, \"wrong\": {}, \"p50_ms\": {:.2}, \"p95_ms\": {:.2}, \"p99_ms\": {:.2}, \"elapsed_s\": {:.2}, \"since_start_s\": {:.1}}}",
        n as f64 / elapsed,
        wrong.load(Ordering::Relaxed),
        pct(0.50),
        pct(0.95),
        pct(0.99),
        elapsed,
        start.elapsed().as_secs_f64()
    );
    std::process::exit(0);
}
