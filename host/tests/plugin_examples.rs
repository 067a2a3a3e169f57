#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The example plugins in Python, JavaScript and C (plugins/examples/), each serving a
//! mapping end to end. They need their languages' toolchains, so tests/run.sh builds
//! them (plugins/examples/build-all.sh) and names the folder in
//! DECOY_EXAMPLE_PLUGINS; without it these tests say so and do nothing. The Rust
//! example (a matcher) is built and tested in tests/plugins.rs.

mod common;

use std::path::PathBuf;

use common::send;
use serde_json::{Value, json};

fn example(name: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("DECOY_EXAMPLE_PLUGINS") else {
        eprintln!(
            "SKIPPED: DECOY_EXAMPLE_PLUGINS is not set; tests/run.sh builds the example plugins and sets it"
        );
        return None;
    };
    let file = PathBuf::from(dir).join(format!("{name}.wasm"));
    assert!(file.is_file(), "{} was not built", file.display());
    Some(file)
}

fn root_with(name: &str, wasm: &std::path::Path, stubs: Value) -> tempfile::TempDir {
    let dir = common::root_with_stubs(stubs);
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::copy(wasm, dir.path().join(format!("plugins/{name}.wasm"))).unwrap();
    dir
}

#[tokio::test]
async fn python_transformer_prices_orders_and_counts_them_in_the_kv_store() {
    let Some(wasm) = example("python-pricing") else {
        return;
    };
    let dir = root_with(
        "python-pricing",
        &wasm,
        json!([{"request": {"method": "POST", "urlPath": "/orders"},
                "response": {"status": 201, "transformers": ["python-pricing"],
                             "transformerParameters": {"taxRate": 0.2, "currency": "GBP"}}}]),
    );
    let server = common::serve(dir.path()).await;
    let order = r#"{"items": [{"sku": "A1", "price": 9.5, "qty": 2}, {"sku": "B2", "price": 1}]}"#;
    for n in 1..=2 {
        let a = send(server.http_addr, "POST", "/orders", &[], order).await;
        assert_eq!(a.status, 201, "{}", a.body);
        assert_eq!(a.header("content-type"), Some("application/json"));
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            v,
            json!({"orderNumber": n, "items": 2, "total": 24.0, "currency": "GBP"})
        );
    }
    // A plugin error (raised Err) is a 500 naming the plugin and the reason.
    let a = send(server.http_addr, "POST", "/orders", &[], "{}").await;
    assert_eq!(a.status, 500);
    assert!(
        a.body.contains("python-pricing") && a.body.contains("not priceable"),
        "{}",
        a.body
    );
    server.shutdown().await;
}

#[tokio::test]
async fn javascript_transformer_describes_the_request() {
    let Some(wasm) = example("js-echo") else {
        return;
    };
    let dir = root_with(
        "js-echo",
        &wasm,
        json!([{"name": "anything", "request": {"urlPathPattern": "/anything/.*"},
                "response": {"status": 200, "transformers": ["js-echo"],
                             "transformerParameters": {"extra": {"env": "test"}}}}]),
    );
    let server = common::serve(dir.path()).await;
    let a = send(
        server.http_addr,
        "PUT",
        "/anything/x?a=1",
        &[("x-trace", "t1")],
        "hello",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["method"], "PUT");
    assert_eq!(v["path"], "/anything/x");
    assert_eq!(v["query"], json!({"a": "1"}));
    assert_eq!(v["headers"]["x-trace"], "t1");
    assert_eq!(v["body"], "hello");
    assert_eq!(v["mapping"], "anything");
    assert_eq!(v["extra"], json!({"env": "test"}));
    server.shutdown().await;
}

#[tokio::test]
async fn c_transformer_adds_checksum_headers() {
    let Some(wasm) = example("c-checksum") else {
        return;
    };
    let dir = root_with(
        "c-checksum",
        &wasm,
        json!([
            {"request": {"urlPath": "/sum"},
             "response": {"status": 202, "body": "kept", "headers": {"x-kept": "yes"},
                          "transformers": ["c-checksum"]}},
            {"request": {"urlPath": "/echo"},
             "response": {"transformers": ["c-checksum"], "transformerParameters": {"echo": true}}}
        ]),
    );
    let server = common::serve(dir.path()).await;
    let a = send(server.http_addr, "POST", "/sum", &[], "hello").await;
    assert_eq!(a.status, 202);
    assert_eq!(a.body, "kept");
    assert_eq!(a.header("x-kept"), Some("yes"));
    assert_eq!(a.header("x-body-length"), Some("5"));
    assert_eq!(a.header("x-body-crc32"), Some("3610a686"));
    let a = send(server.http_addr, "POST", "/echo", &[], "round trip").await;
    assert_eq!(a.body, "round trip");
    server.shutdown().await;
}
