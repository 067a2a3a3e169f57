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

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{Flags, QUOTE_REPLY, Tally, declare_queues, quote_request, request_queue};
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::{AmqpValue, Body, Message, MessageId, Properties, Source};
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};

const AMQP1: &str = "amqp://guest:guest@127.0.0.1:5672";
const AMQP091: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

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
    let (cmd, mut f) = Flags::command_line(&[]);
    let a = Args {
        cmd,
        prefix: f.string("--prefix", "decoy-bench1"),
        queues: f.value("--queues", 1),
        seconds: f.value("--seconds", 10),
        warmup: f.value("--warmup", 3),
        size: f.value("--size", 490),
        window: f.value("--window", 50),
        connections: f.value("--connections", 2),
    };
    f.finish();
    a
}

fn queue(a: &Args, i: usize) -> String {
    request_queue(&a.prefix, i)
}

fn reply_queue(a: &Args) -> String {
    format!("{}.reply", a.prefix)
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
    let names = (0..a.queues).map(|i| queue(a, i)).chain([reply_queue(a)]);
    declare_queues(AMQP091, names, create).await;
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
                        .body(text(QUOTE_REPLY.to_owned()))
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
    let tally = Arc::new(Tally::default());
    let slots: Vec<Arc<tokio::sync::Semaphore>> = (0..a.queues)
        .map(|_| Arc::new(tokio::sync::Semaphore::new(a.window)))
        .collect();
    {
        let (tally, slots) = (tally.clone(), slots.clone());
        tokio::spawn(async move {
            while let Ok(d) = replies_link.recv::<Body<Value>>().await {
                let m = d.into_message();
                let id = match m.properties.and_then(|p| p.correlation_id) {
                    Some(MessageId::String(s)) => s.parse::<u64>().ok(),
                    _ => None,
                };
                let at = id.and_then(|id| tally.take(id));
                let ok = matches!(&m.body, Body::Value(AmqpValue(Value::String(s))) if s.starts_with("<quote>"));
                match (at, id) {
                    (Some(t), Some(id)) if ok => {
                        tally.right(t);
                        slots[(id % slots.len() as u64) as usize].add_permits(1);
                    }
                    _ => tally.wrong(),
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
        let (tally, slot, reply_to) = (tally.clone(), slot.clone(), reply_to.clone());
        let (queues, size) = (a.queues as u64, a.size);
        publishers.push(tokio::spawn(async move {
            let mut round = 0u64;
            while !tally.done() {
                let Ok(permit) = slot.acquire().await else {
                    break;
                };
                permit.forget();
                let id = round * queues + i as u64;
                round += 1;
                tally.sent(id);
                let m = Message::builder()
                    .properties(Properties {
                        message_id: Some(MessageId::String(id.to_string())),
                        reply_to: Some(reply_to.clone()),
                        ..Properties::default()
                    })
                    .body(text(quote_request(id, size)))
                    .build();
                // The broker's outcome is not awaited: the reply is what counts.
                if link.send_batchable(m).await.is_err() {
                    break;
                }
            }
        }));
    }
    let elapsed = tally.measure(a.warmup, a.seconds).await;
    for s in &slots {
        s.close();
    }
    tally.report(elapsed, start).print();
    std::process::exit(0);
}
