//! Load for NATS virtual services, and the bare responder they are compared with.
//! Used by `bench/nats.py`; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example nats-load -- respond --subject bench.req
//! cargo run --release --features bench --example nats-load -- drive   --subject bench.req --seconds 10 --window 200
//! ```
//!
//! `respond` is what a hand-written NATS service on `async-nats` (the client decoy
//! uses) would do, with nothing decoy adds (no files, no matching, no metrics): it
//! subscribes to `--subject` in the queue group `decoy` and publishes a fixed reply
//! to each request's reply subject: the ceiling.
//!
//! `drive` keeps `--window` core requests in flight (each published with a reply
//! subject under one inbox subscription, and an id in a header), matches each reply to
//! its request, and prints one JSON line: requests answered a second and round-trip
//! latency percentiles over `--seconds` after a `--warmup`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Flags, JsonLine, Latencies, QUOTE_REPLY, Window};
use futures_util::StreamExt as _;

struct Args {
    cmd: String,
    url: String,
    subject: String,
    seconds: u64,
    warmup: u64,
    size: usize,
    window: usize,
}

fn args() -> Args {
    let (cmd, mut f) = Flags::command_line(&[]);
    let url = std::env::var("DECOY_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let a = Args {
        cmd,
        url: f.string("--url", &url),
        subject: f.string("--subject", "decoy-bench.req"),
        seconds: f.value("--seconds", 10),
        warmup: f.value("--warmup", 3),
        size: f.value("--size", 490),
        window: f.value("--window", 200),
    };
    f.finish();
    a
}

#[tokio::main]
async fn main() {
    let a = args();
    match a.cmd.as_str() {
        "respond" => respond(&a).await,
        "drive" => drive(&a).await,
        other => panic!("unknown command {other:?}: respond or drive"),
    }
}

async fn respond(a: &Args) {
    let nc = async_nats::connect(&a.url).await.unwrap();
    let mut sub = nc
        .queue_subscribe(a.subject.clone(), "decoy".into())
        .await
        .unwrap();
    nc.flush().await.unwrap();
    println!("ready");
    let reply = bytes::Bytes::from_static(QUOTE_REPLY.as_bytes());
    while let Some(m) = sub.next().await {
        if let Some(to) = m.reply {
            nc.publish(to, reply.clone()).await.unwrap();
        }
    }
}

async fn drive(a: &Args) {
    let nc = async_nats::connect(&a.url).await.unwrap();
    let inbox = nc.new_inbox();
    let mut replies = nc.subscribe(format!("{inbox}.*")).await.unwrap();
    nc.flush().await.unwrap();
    let body = bytes::Bytes::from("x".repeat(a.size));
    let window = Arc::new(tokio::sync::Semaphore::new(a.window));
    let sent: Arc<std::sync::Mutex<HashMap<u64, Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (nc, window, sent, stop, subject, inbox) = (
            nc.clone(),
            window.clone(),
            sent.clone(),
            stop.clone(),
            a.subject.clone(),
            inbox.clone(),
        );
        tokio::spawn(async move {
            let mut id = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok(permit) = window.acquire().await else {
                    return;
                };
                permit.forget();
                id += 1;
                sent.lock().unwrap().insert(id, Instant::now());
                nc.publish_with_reply(subject.clone(), format!("{inbox}.{id}"), body.clone())
                    .await
                    .unwrap();
            }
        })
    };
    let run = Window::new(
        Duration::from_secs(a.warmup),
        Duration::from_secs(a.seconds),
    );
    let mut latencies = Vec::new();
    let mut counted_from = None;
    let mut wrong = 0u64;
    while !run.over() {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(10), replies.next()).await
        else {
            panic!("no reply for 10 s");
        };
        let id: u64 = m.subject.rsplit('.').next().unwrap().parse().unwrap();
        let Some(at) = sent.lock().unwrap().remove(&id) else {
            continue;
        };
        window.add_permits(1);
        if &m.payload[..] != QUOTE_REPLY.as_bytes() {
            wrong += 1;
        }
        if run.counts(Instant::now()) {
            counted_from.get_or_insert_with(Instant::now);
            latencies.push(at.elapsed());
        }
    }
    stop.store(true, Ordering::Relaxed);
    window.close();
    let _ = publisher.await;
    let elapsed = counted_from.map_or(Duration::ZERO, |t| t.elapsed());
    let latencies = Latencies::new(latencies);
    let pct = |p: f64| latencies.ms(p).unwrap_or(0.0);
    JsonLine::new()
        .fixed(
            "tps",
            latencies.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            1,
        )
        .field("replies", latencies.len())
        .field("wrong", wrong)
        .fixed("p50_ms", pct(0.50), 3)
        .fixed("p99_ms", pct(0.99), 3)
        .fixed("elapsed_s", elapsed.as_secs_f64(), 2)
        .print();
}
