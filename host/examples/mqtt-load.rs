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

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PublishProperties};
use rumqttc::v5::{AsyncClient, Event, MqttOptions};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

fn qos(q: u8) -> QoS {
    match q {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

fn options(id: &str, host: &str, port: u16) -> MqttOptions {
    let mut o = MqttOptions::new(id, host, port);
    o.set_keep_alive(Duration::from_secs(30))
        .set_max_packet_size(Some(1 << 20));
    o
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let host = arg(&args, "--host", "127.0.0.1");
    let port: u16 = arg(&args, "--port", "1883").parse().expect("--port");
    match args.get(1).map(String::as_str) {
        Some("respond") => respond(&host, port, &arg(&args, "--filter", "bench/#")).await,
        Some("drive") => drive(&args, &host, port).await,
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
                let c = client.clone();
                tokio::spawn(async move {
                    let _ = c
                        .publish_with_properties(to, p.qos, false, p.payload, reply)
                        .await;
                });
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("echo: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn drive(args: &[String], host: &str, port: u16) {
    let topic = arg(args, "--topic", "bench/req");
    let seconds: f64 = arg(args, "--seconds", "10").parse().expect("--seconds");
    let warmup: f64 = arg(args, "--warmup", "2").parse().expect("--warmup");
    let window: usize = arg(args, "--window", "100").parse().expect("--window");
    let size: usize = arg(args, "--size", "256").parse().expect("--size");
    let q = qos(arg(args, "--qos", "1").parse().expect("--qos"));
    let id = format!("drive-{}", std::process::id());
    let replies = format!("{topic}-replies/{id}");
    let (client, mut events) = AsyncClient::new(options(&id, host, port), 10_000);
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
    let mut latencies: Vec<f64> = Vec::new();
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(warmup);
    let end = measure_from + Duration::from_secs_f64(seconds);
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
                        if now >= measure_from && now < end {
                            measured += 1;
                            latencies.push(now.duration_since(at).as_secs_f64() * 1000.0);
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
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        if latencies.is_empty() {
            f64::NAN
        } else {
            latencies[((latencies.len() as f64 - 1.0) * p) as usize]
        }
    };
    println!(
        "{{\"msgs_per_s\": {:.1}, \"p50_ms\": {:.2}, \"p99_ms\": {:.2}, \"sent\": {sent}, \"answered\": {answered}, \"unanswered\": {}, \"mismatched\": {mismatched}}}",
        measured as f64 / seconds,
        pct(0.5),
        pct(0.99),
        in_flight.len()
    );
}
