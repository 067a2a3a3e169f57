//! Load for gRPC virtual services, and the plain tonic server they are compared with.
//! Used by `bench/grpc.py`; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example grpc-load -- root  --dir /tmp/r --stub static --methods 1
//! cargo run --release --features bench --example grpc-load -- serve --port 50051
//! cargo run --release --features bench --example grpc-load -- drive --addr 127.0.0.1:50051 --call say --seconds 10
//! ```
//!
//! `serve` is a hand-written tonic server (the service `rec.v1.Echo`, written as
//! tonic-build writes one; the same code the gRPC tests stand decoy in front of):
//! the ceiling. `root` writes a decoy root answering the same calls alike: the
//! service's `.proto`, a `Say` stub (`static`: a fixed message; `templated`: the
//! request's text through `response-template`), a `Count` stub answering a server
//! stream of `--stream` messages, and with `--methods N` as many more methods, each
//! with its own stub, in a second service.
//!
//! `drive` keeps `--concurrency` calls in flight over `--connections` HTTP/2
//! connections with a tonic client and prints one JSON line: calls a second, messages
//! a second and latency percentiles over `--seconds` after a `--warmup`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../tests/it/common/grpc_echo.rs"]
mod grpc_echo;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use common::{Flags, JsonLine, Latencies, Window};
use grpc_echo::{ECHO_PROTO, Echo, Line};
use http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;

struct Args {
    cmd: String,
    addr: String,
    port: u16,
    dir: String,
    stub: String,
    methods: usize,
    stream: i64,
    call: String,
    seconds: u64,
    warmup: u64,
    concurrency: usize,
    connections: usize,
}

fn args() -> Args {
    let (cmd, mut f) = Flags::command_line(&[]);
    let a = Args {
        cmd,
        addr: f.string("--addr", "127.0.0.1:50051"),
        port: f.value("--port", 50051),
        dir: f.string("--dir", ""),
        stub: f.string("--stub", "static"),
        methods: f.value("--methods", 0),
        stream: f.value("--stream", 100),
        call: f.string("--call", "say"),
        seconds: f.value("--seconds", 10),
        warmup: f.value("--warmup", 3),
        concurrency: f.value("--concurrency", 64),
        connections: f.value("--connections", 4),
    };
    f.finish();
    a
}

#[tokio::main]
async fn main() {
    let a = args();
    match a.cmd.as_str() {
        "root" => root(&a),
        "serve" => serve(&a).await,
        "drive" => drive(&a).await,
        other => panic!("unknown command {other:?}: root, serve or drive"),
    }
}

/// The text both sides answer `Say` with: the tonic server's `echo: <text>`.
const TEXT: &str = "bench";

fn root(a: &Args) {
    let dir = std::path::Path::new(&a.dir);
    std::fs::create_dir_all(dir.join("grpc")).unwrap();
    std::fs::create_dir_all(dir.join("mappings")).unwrap();
    let mut proto = ECHO_PROTO.to_owned();
    if a.methods > 0 {
        proto.push_str("\nservice Many {\n");
        for i in 0..a.methods {
            writeln!(proto, "  rpc M{i}(Line) returns (Line);").unwrap();
        }
        proto.push_str("}\n");
    }
    std::fs::write(dir.join("grpc/echo.proto"), proto).unwrap();
    let say = match a.stub.as_str() {
        "static" => serde_json::json!({
            "request": {"urlPath": "/rec.v1.Echo/Say", "method": "POST"},
            "response": {"jsonBody": {"text": format!("echo: {TEXT}"), "seq": "1"},
                         "headers": {"x-real": "yes"}}
        }),
        "templated" => serde_json::json!({
            "request": {"urlPath": "/rec.v1.Echo/Say", "method": "POST"},
            "response": {"jsonBody": {"text": "echo: {{jsonPath request.body '$.text'}}", "seq": "1"},
                         "headers": {"x-real": "yes"},
                         "transformers": ["response-template"]}
        }),
        other => panic!("--stub static or templated, not {other}"),
    };
    let lines: Vec<_> = (1..=a.stream)
        .map(|i| serde_json::json!({"text": i.to_string(), "seq": i.to_string()}))
        .collect();
    let mut stubs = vec![
        say,
        serde_json::json!({
            "request": {"urlPath": "/rec.v1.Echo/Count", "method": "POST"},
            "response": {"jsonBody": lines}
        }),
    ];
    for i in 0..a.methods {
        stubs.push(serde_json::json!({
            "request": {"urlPath": format!("/rec.v1.Many/M{i}"), "method": "POST",
                        "bodyPatterns": [{"equalToJson": {"text": format!("m{i}")}}]},
            "response": {"jsonBody": {"text": format!("many {i}")}}
        }));
    }
    std::fs::write(
        dir.join("mappings/bench.json"),
        serde_json::to_string_pretty(&serde_json::json!({ "mappings": stubs })).unwrap(),
    )
    .unwrap();
}

async fn serve(a: &Args) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", a.port))
        .await
        .unwrap();
    println!("ready");
    tonic::transport::Server::builder()
        .serve_with_incoming(Echo, tonic::transport::server::TcpIncoming::from(listener))
        .await
        .unwrap();
}

async fn drive(a: &Args) {
    let mut channels = Vec::new();
    for _ in 0..a.connections.max(1) {
        channels.push(
            Channel::from_shared(format!("http://{}", a.addr))
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
    }
    let run = Window::new(
        Duration::from_secs(a.warmup),
        Duration::from_secs(a.seconds),
    );
    let stream = a.call == "count";
    let expect = a.stream;
    let mut tasks = Vec::new();
    for i in 0..a.concurrency.max(1) {
        let ch = channels[i % channels.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut messages = 0u64;
            let mut wrong = 0u64;
            let mut c = tonic::client::Grpc::new(ch);
            loop {
                let now = Instant::now();
                if now >= run.end {
                    break;
                }
                c.ready().await.unwrap();
                let got = if stream {
                    let resp = c
                        .server_streaming::<_, Line, _>(
                            tonic::Request::new(Line {
                                text: "count".into(),
                                seq: expect,
                            }),
                            PathAndQuery::from_static("/rec.v1.Echo/Count"),
                            ProstCodec::default(),
                        )
                        .await
                        .unwrap();
                    let mut s = resp.into_inner();
                    let mut n = 0;
                    while s.message().await.unwrap().is_some() {
                        n += 1;
                    }
                    if n != expect {
                        wrong += 1;
                    }
                    n as u64
                } else {
                    let resp = c
                        .unary::<_, Line, _>(
                            tonic::Request::new(grpc_echo::line(TEXT)),
                            PathAndQuery::from_static("/rec.v1.Echo/Say"),
                            ProstCodec::default(),
                        )
                        .await
                        .unwrap();
                    if resp.get_ref().text != "echo: bench" {
                        wrong += 1;
                    }
                    1
                };
                if run.counts(now) {
                    latencies.push(now.elapsed());
                    messages += got;
                }
            }
            (latencies, messages, wrong)
        }));
    }
    let mut latencies = Vec::new();
    let mut messages = 0;
    let mut wrong = 0;
    for t in tasks {
        let (l, m, w) = t.await.unwrap();
        latencies.extend(l);
        messages += m;
        wrong += w;
    }
    let elapsed = Instant::now()
        .saturating_duration_since(run.measure_from)
        .min(Duration::from_secs(a.seconds + 60))
        .as_secs_f64()
        .max(1e-9);
    let lat = Latencies::new(latencies);
    let pct = |p: f64| lat.ms(p).unwrap_or(0.0);
    JsonLine::new()
        .fixed("calls_per_s", lat.len() as f64 / elapsed, 1)
        .fixed("messages_per_s", messages as f64 / elapsed, 1)
        .field("calls", lat.len())
        .field("wrong", wrong)
        .fixed("p50_ms", pct(0.50), 3)
        .fixed("p99_ms", pct(0.99), 3)
        .fixed("elapsed_s", elapsed, 2)
        .print();
}
