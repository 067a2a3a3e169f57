//! Per-call cost of a plugin, measured in-process (no HTTP): a trivial Rust
//! transformer on a warm, reused instance and on a fresh instance per call, and the
//! bundled response-template rendering a small template.
//!
//! `cargo run --release --features bench --example plugin-calls -- PLUGINS_DIR` where PLUGINS_DIR holds
//! `trivial.wasm` (tests/plugins/hostile built for wasm32-wasip2; its `noop` mode).
//! Prints one JSON object: microseconds per call, medians of 5 rounds.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use common::JsonLine;
use decoy_core::plugins::http_request_for;
use decoy_mq::runtime::message_request;
use decoy_plugin_host::{Plugins, wit};
use decoy_spec::request::RequestSnapshot;

fn per_call_us(rounds: usize, calls: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..calls.min(1000) {
        f();
    }
    let mut t: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: plugin-calls PLUGINS_DIR"),
    );
    let cache = tempdir_like();
    let run = |settings: Option<&str>| {
        if let Some(s) = settings {
            std::fs::write(dir.join("trivial.json"), s).expect("write settings");
        } else {
            let _ = std::fs::remove_file(dir.join("trivial.json"));
        }
        let plugins = Plugins::new(Some(dir.clone()), Some(cache.clone()));
        plugins.get("trivial").expect("trivial.wasm loads")
    };
    let mut snap = RequestSnapshot::new("GET", "/things/abc?q=xyz");
    snap.headers
        .insert("host", "localhost:8080".parse().expect("valid"));
    let request = http_request_for(&snap, Vec::new());
    let response = wit::Response::Http(wit::HttpResponse {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: b"hello".to_vec(),
        delay_ms: None,
    });
    let ctx = |params: &str| wit::CallContext {
        mapping_id: "bench".into(),
        mapping_name: None,
        parameters: params.into(),
    };
    let noop = ctx(r#"{"mode":"noop"}"#);

    let warm = run(None);
    let warm_us = per_call_us(5, 20_000, || {
        warm.transform(&noop, &request, &response).expect("call");
    });
    let fresh = run(Some(r#"{"isolation": "per-request"}"#));
    let fresh_us = per_call_us(5, 1_000, || {
        fresh.transform(&noop, &request, &response).expect("call");
    });
    let _ = std::fs::remove_file(dir.join("trivial.json"));

    let plugins = Plugins::new(Some(dir.clone()), Some(cache.clone()));
    let template = plugins.get("response-template").expect("bundled");
    let templated = wit::Response::Http(wit::HttpResponse {
        status: 200,
        headers: Vec::new(),
        body: b"segment {{request.pathSegments.[1]}} q {{request.query.q}}".to_vec(),
        delay_ms: None,
    });
    let t = ctx("{}");
    let out = template
        .transform(&t, &request, &templated)
        .expect("renders");
    let wit::Response::Http(h) = out else {
        panic!("http")
    };
    assert_eq!(String::from_utf8_lossy(&h.body), "segment abc q xyz");
    let template_us = per_call_us(5, 20_000, || {
        template.transform(&t, &request, &templated).expect("call");
    });
    // Traffic Parrot's MQ reply: two values taken from a 490-byte request by XPath.
    let mut body =
        String::from("<quoteRequest><symbol>ACME</symbol><account>ACC-000042</account><note>");
    while body.len() < 490 - "</note></quoteRequest>".len() {
        body.push('x');
    }
    body.push_str("</note></quoteRequest>");
    let mq = message_request(
        "REQ",
        Some("REPLY"),
        Some("ID1"),
        None,
        Vec::new(),
        body.as_bytes(),
    );
    let xpath_reply = wit::Response::Mq(wit::MqReply {
        body: b"<quote><symbol>{{xPath request.body '/quoteRequest/symbol/text()'}}</symbol><account>{{xPath request.body '/quoteRequest/account/text()'}}</account></quote>".to_vec(),
        properties: Vec::new(),
        destination: None,
        delay_ms: None,
    });
    let out = template.transform(&t, &mq, &xpath_reply).expect("renders");
    let wit::Response::Mq(m) = out else {
        panic!("mq")
    };
    assert_eq!(
        String::from_utf8_lossy(&m.body),
        "<quote><symbol>ACME</symbol><account>ACC-000042</account></quote>"
    );
    let xpath_us = per_call_us(5, 5_000, || {
        template.transform(&t, &mq, &xpath_reply).expect("call");
    });
    JsonLine::new()
        .fixed("trivial_warm_us", warm_us, 2)
        .fixed("trivial_fresh_us", fresh_us, 2)
        .fixed("template_warm_us", template_us, 2)
        .fixed("xpath_template_warm_us", xpath_us, 2)
        .print();
    let _ = std::fs::remove_dir_all(&cache);
}

fn tempdir_like() -> PathBuf {
    let p = std::env::temp_dir().join(format!("decoy-plugin-calls-{}", std::process::id()));
    std::fs::create_dir_all(&p).expect("temp dir");
    p
}
