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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let mut a = Args {
        cmd: String::new(),
        url: std::env::var("DECOY_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into()),
        subject: "decoy-bench.req".into(),
        seconds: 10,
        warmup: 3,
        size: 490,
        window: 200,
    };
    let mut it = std::env::args().skip(1);
    a.cmd = it.next().unwrap_or_default();
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = v,
            "--subject" => a.subject = v,
            "--seconds" => a.seconds = v.parse().unwrap(),
            "--warmup" => a.warmup = v.parse().unwrap(),
            "--size" => a.size = v.parse().unwrap(),
            "--window" => a.window = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The reply both responders send (decoy's mapping in bench/nats.py has the same).
pub const REPLY: &str =
    "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>";

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
    let reply = bytes::Bytes::from_static(REPLY.as_bytes());
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
    let start = Instant::now();
    let warm = Duration::from_secs(a.warmup);
    let end = warm + Duration::from_secs(a.seconds);
    let mut latencies = Vec::new();
    let mut counted_from = None;
    let mut wrong = 0u64;
    while start.elapsed() < end {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(10), replies.next()).await
        else {
            panic!("no reply for 10 s");
        };
        let id: u64 = m.subject.rsplit('.').next().unwrap().parse().unwrap();
        let Some(at) = sent.lock().unwrap().remove(&id) else {
            continue;
        };
        window.add_permits(1);
        if &m.payload[..] != REPLY.as_bytes() {
            wrong += 1;
        }
        if start.elapsed() >= warm {
            counted_from.get_or_insert_with(Instant::now);
            latencies.push(at.elapsed());
        }
    }
    stop.store(true, Ordering::Relaxed);
    window.close();
    let _ = publisher.await;
    let elapsed = counted_from.map_or(Duration::ZERO, |t| t.elapsed());
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{{\"tps\": {:.1}, \"replies\": {}, \"wrong\": {wrong}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"elapsed_s\": {:.2}}}",
        latencies.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        latencies.len(),
        pct(0.50),
        pct(0.99),
        elapsed.as_secs_f64()
    );
}
