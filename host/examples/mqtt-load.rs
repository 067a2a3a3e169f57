//! MQTT request-reply load, and the bare echo service that is its ceiling, both with
//! rumqttc (the client library decoy's MQTT transport uses).
//!
//! - `mqtt-load drive --host H --port P --topic T --seconds S --window W --size B
//!   --qos Q`: keeps `W` MQTT 5 requests in flight on topic `T/<n>` (a response topic
//!   of its own and correlation data per request), counts each reply against its
//!   request, and prints one JSON line: replies per second, p50/p99 round trip in
//!   ms, requests sent, replies, mismatched replies.
//! - `mqtt-load respond --host H --port P --filter F`: answers every request on `F`
//!   on its response topic with its correlation data, at its QoS, and nothing else:
//!   no matching, no files, no metrics.
//!
//! Run by bench/mqtt.py.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Flags, JsonLine, Latencies, Window};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PublishProperties};
use rumqttc::v5::{AsyncClient, Event, MqttOptions};

struct Args {
    host: String,
    port: u16,
    /// `respond`: the topic filter it answers on.
    filter: String,
    topic: String,
    seconds: f64,
    warmup: f64,
    window: usize,
    size: usize,
    qos: QoS,
}

fn args() -> (String, Args) {
    let (cmd, mut f) = Flags::command_line(&[]);
    let a = Args {
        host: f.string("--host", "127.0.0.1"),
        port: f.value("--port", 1883),
        filter: f.string("--filter", "bench/#"),
        topic: f.string("--topic", "bench/req"),
        seconds: f.value("--seconds", 10.0),
        warmup: f.value("--warmup", 2.0),
        window: f.value("--window", 100),
        size: f.value("--size", 256),
        qos: qos(f.value("--qos", 1)),
    };
    f.finish();
    (cmd, a)
}

fn qos(q: u8) -> QoS {
    match q {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

/// The driver's and the echo's options; `TCP_NODELAY` as decoy sets it, so the
/// echo is the ceiling of the same library configured the same way.
fn options(id: &str, host: &str, port: u16) -> MqttOptions {
    let mut o = MqttOptions::new(id, host, port);
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(true);
    o.set_keep_alive(Duration::from_secs(30))
        .set_max_packet_size(Some(1 << 20))
        .set_network_options(n);
    o
}

fn main() {
    let (cmd, a) = args();
    // The echo runs on one thread, replying inline: the tightest ceiling this
    // library gives (a task spawned per reply on a work-stealing runtime was beaten
    // by decoy itself). The driver keeps tokio's default runtime.
    let runtime = match cmd.as_str() {
        "respond" => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build()
    .expect("a tokio runtime");
    runtime.block_on(run(cmd, a));
}

async fn run(cmd: String, a: Args) {
    match cmd.as_str() {
        "respond" => respond(&a.host, a.port, &a.filter).await,
        "drive" => drive(&a).await,
        _ => {
            eprintln!("usage: mqtt-load drive|respond [--host H] [--port P] ...");
            std::process::exit(2);
        }
    }
}

async fn respond(host: &str, port: u16, filter: &str) {
    let id = format!("echo-{}", std::process::id());
    let (client, mut events) = AsyncClient::new(options(&id, host, port), 10_000);
    client
        .subscribe(filter, QoS::ExactlyOnce)
        .await
        .expect("subscribe");
    loop {
        match events.poll().await {
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let props = p.properties.unwrap_or_default();
                let Some(to) = props.response_topic else {
                    continue;
                };
                let reply = PublishProperties {
                    correlation_data: props.correlation_data,
                    ..Default::default()
                };
                // Queued without waiting (the queue holds 10,000; the driver's window
                // is far smaller), for this loop's next poll to write.
                let _ = client.try_publish_with_properties(to, p.qos, false, p.payload, reply);
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("echo: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn drive(a: &Args) {
    let (topic, seconds, window, size, q) = (&a.topic, a.seconds, a.window, a.size, a.qos);
    let id = format!("drive-{}", std::process::id());
    let replies = format!("{topic}-replies/{id}");
    let (client, mut events) = AsyncClient::new(options(&id, &a.host, a.port), 10_000);
    client
        .subscribe(&replies, QoS::ExactlyOnce)
        .await
        .expect("subscribe");
    let body = Bytes::from(format!(
        "{{\"pad\": \"{}\"}}",
        "x".repeat(size.saturating_sub(11))
    ));
    let mut in_flight: HashMap<u64, Instant> = HashMap::new();
    let mut next = 0u64;
    let (mut sent, mut answered, mut mismatched) = (0u64, 0u64, 0u64);
    let mut latencies = Vec::new();
    let run = Window::new(
        Duration::from_secs_f64(a.warmup),
        Duration::from_secs_f64(seconds),
    );
    let end = run.end;
    let mut measured = 0u64;
    let mut subscribed = false;
    loop {
        if subscribed && Instant::now() < end {
            while in_flight.len() < window {
                let props = PublishProperties {
                    response_topic: Some(replies.clone()),
                    correlation_data: Some(Bytes::from(next.to_string())),
                    ..Default::default()
                };
                client
                    .publish_with_properties(
                        format!("{topic}/{}", next % 16),
                        q,
                        false,
                        body.clone(),
                        props,
                    )
                    .await
                    .expect("publish");
                in_flight.insert(next, Instant::now());
                next += 1;
                sent += 1;
            }
        }
        if Instant::now() >= end
            && (in_flight.is_empty() || Instant::now() > end + Duration::from_secs(10))
        {
            break;
        }
        let polled = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
        match polled {
            Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => subscribed = true,
            Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                let corr = p
                    .properties
                    .and_then(|pr| pr.correlation_data)
                    .and_then(|c| {
                        std::str::from_utf8(&c)
                            .ok()
                            .and_then(|s| s.parse::<u64>().ok())
                    });
                match corr.and_then(|c| in_flight.remove(&c)) {
                    Some(at) => {
                        answered += 1;
                        let now = Instant::now();
                        if run.counts(now) {
                            measured += 1;
                            latencies.push(now.duration_since(at));
                        }
                    }
                    None => mismatched += 1,
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                eprintln!("drive: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => {}
        }
    }
    let latencies = Latencies::new(latencies);
    let pct = |p: f64| latencies.ms(p).unwrap_or(f64::NAN);
    JsonLine::new()
        .fixed("msgs_per_s", measured as f64 / seconds, 1)
        .fixed("p50_ms", pct(0.5), 2)
        .fixed("p99_ms", pct(0.99), 2)
        .field("sent", sent)
        .field("answered", answered)
        .field("unanswered", in_flight.len())
        .field("mismatched", mismatched)
        .print();
}
