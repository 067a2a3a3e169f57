#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The example plugins in Python, JavaScript and C (plugins/examples/), each serving a
//! mapping end to end. They need their languages' toolchains, so tests/run.sh builds
//! them (plugins/examples/build-all.sh) and names the folder in
//! DECOY_EXAMPLE_PLUGINS, then runs these `#[ignore]`d tests with `--ignored`. The Rust
//! example (a matcher) is built and tested in plugins.rs beside this file.

use std::path::PathBuf;

use crate::common::send;
use serde_json::{Value, json};

fn example(name: &str) -> PathBuf {
    let Some(dir) = std::env::var_os("DECOY_EXAMPLE_PLUGINS") else {
        panic!(
            "DECOY_EXAMPLE_PLUGINS is not set: tests/run.sh builds the example plugins, sets it and runs these tests with --ignored"
        );
    };
    let file = PathBuf::from(dir).join(format!("{name}.wasm"));
    assert!(file.is_file(), "{} was not built", file.display());
    file
}

fn root_with(name: &str, wasm: &std::path::Path, stubs: Value) -> tempfile::TempDir {
    let dir = crate::common::root_with_stubs(stubs);
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::copy(wasm, dir.path().join(format!("plugins/{name}.wasm"))).unwrap();
    dir
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn python_transformer_prices_orders_and_counts_them_in_the_kv_store() {
    let wasm = example("python-pricing");
    let dir = root_with(
        "python-pricing",
        &wasm,
        json!([{"request": {"method": "POST", "urlPath": "/orders"},
                "response": {"status": 201, "transformers": ["python-pricing"],
                             "transformerParameters": {"taxRate": 0.2, "currency": "GBP"}}}]),
    );
    let server = crate::common::serve(dir.path()).await;
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

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn javascript_transformer_describes_the_request() {
    let wasm = example("js-echo");
    let dir = root_with(
        "js-echo",
        &wasm,
        json!([{"name": "anything", "request": {"urlPathPattern": "/anything/.*"},
                "response": {"status": 200, "transformers": ["js-echo"],
                             "transformerParameters": {"extra": {"env": "test"}}}}]),
    );
    let server = crate::common::serve(dir.path()).await;
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

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn c_transformer_adds_checksum_headers() {
    let wasm = example("c-checksum");
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
    let server = crate::common::serve(dir.path()).await;
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

// The test guests of tests/plugins/ (py-stdio, js-stdio), built into the same folder
// by tests/plugins/build.sh.

fn stub(url: &str, plugin: &str, mode: &str) -> Value {
    json!({"request": {"urlPath": url},
           "response": {"status": 200, "body": "unchanged", "transformers": [plugin],
                        "transformerParameters": {"mode": mode}}})
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn a_python_plugin_that_prints_on_its_first_call_increments_kv_once() {
    let wasm = example("py-stdio");
    let dir = root_with(
        "py-stdio",
        &wasm,
        json!([stub("/print", "py-stdio", "print")]),
    );
    // A first call on a fresh interpreter can take over 100 ms on a busy machine;
    // this test is about output and kv, not the deadline.
    std::fs::write(
        dir.path().join("plugins/py-stdio.json"),
        r#"{"timeoutMilliseconds": 5000}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    for n in 1..=3 {
        let a = send(server.http_addr, "GET", "/print", &[], "").await;
        assert_eq!((a.status, a.body.as_str()), (200, &*format!("count={n}")));
    }
    server.shutdown().await;
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn an_uncaught_python_exception_answers_500_naming_the_exception() {
    let wasm = example("py-stdio");
    let dir = root_with(
        "py-stdio",
        &wasm,
        json!([
            stub("/raise", "py-stdio", "raise"),
            stub("/ok", "py-stdio", "ok")
        ]),
    );
    // Formatting a traceback on a fresh interpreter takes tens of milliseconds: a
    // deadline that a busy machine cannot miss.
    std::fs::write(
        dir.path().join("plugins/py-stdio.json"),
        r#"{"timeoutMilliseconds": 5000}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    let a = send(server.http_addr, "GET", "/raise", &[], "").await;
    assert_eq!(a.status, 500, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("ZeroDivisionError"), "{reason}");
    assert!(reason.contains("Traceback"), "{reason}");
    assert!(reason.contains("wasm backtrace"), "{reason}");
    // The server and the plugin go on.
    assert_eq!(
        send(server.http_addr, "GET", "/ok", &[], "").await.body,
        "ok"
    );
    server.shutdown().await;
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn a_javascript_throw_answers_500_with_the_thrown_text_and_console_output_is_safe() {
    let wasm = example("js-stdio");
    let dir = root_with(
        "js-stdio",
        &wasm,
        json!([
            stub("/throw", "js-stdio", "throw"),
            stub("/print", "js-stdio", "print"),
            stub("/error", "js-stdio", "error")
        ]),
    );
    let server = crate::common::serve(dir.path()).await;
    for n in 1..=2 {
        let a = send(server.http_addr, "GET", "/print", &[], "").await;
        assert_eq!((a.status, a.body.as_str()), (200, &*format!("count={n}")));
    }
    // componentize-js turns a thrown value into the plugin-error record and traps
    // when it has no string `message`; what it wrote to stderr is in the reason.
    let a = send(server.http_addr, "GET", "/throw", &[], "").await;
    assert_eq!(a.status, 500, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("guest stderr:\nexpected a string"),
        "{reason}"
    );
    assert!(reason.contains("wasm backtrace"), "{reason}");
    // A thrown object with a message is the plugin-error value.
    let a = send(server.http_addr, "GET", "/error", &[], "").await;
    assert_eq!(a.status, 500, "{}", a.body);
    assert!(
        a.body
            .contains("it returned an error: js-stdio refuses on purpose"),
        "{}",
        a.body
    );
    server.shutdown().await;
}

/// How many calls the growth test makes (DECOY_GROWTH_CALLS may say otherwise).
/// Through HTTP a debug build managed 260-600 calls a second on a shared 2-core
/// machine, most of it the debug build's HTTP stack, so the test calls the engine
/// in-process instead: the same matching, transformer chain and failure rule
/// (`Transformers::run`, `failure_plan`) as a request, without the sockets.
/// bench/plugin-soak.sh runs 1,000,000 calls through HTTP and a release build.
fn growth_calls() -> usize {
    std::env::var("DECOY_GROWTH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_plugin_whose_memory_grows_per_call_never_answers_500() {
    let wasm = example("js-stdio");
    let dir = root_with(
        "js-stdio",
        &wasm,
        json!([stub("/grow", "js-stdio", "grow")]),
    );
    // A low cap, so an instance reaches it every few hundred calls (some 260
    // retirements in 100,000 calls, each a chance for a call to meet the cap); a
    // deadline a busy machine (and a garbage collection) cannot miss, so that only
    // memory is tested here.
    std::fs::write(
        dir.path().join("plugins/js-stdio.json"),
        r#"{"memoryLimitMiB": 40, "timeoutMilliseconds": 5000}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    // Through HTTP once, so the in-process calls below answer what a client gets.
    let a = crate::common::get(server.http_addr, "/grow").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body, "chunks=1");
    let total = growth_calls();
    let clients = 2;
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let engine = server.engine.clone();
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                for _ in (c..total).step_by(clients) {
                    let req = decoy_spec::request::RequestSnapshot::new("GET", "/grow");
                    let plan = engine.respond(&req).into_plan();
                    if plan.status != 200 && bad.len() < 5 {
                        bad.push(format!(
                            "{}: {}",
                            plan.status,
                            String::from_utf8_lossy(&plan.body)
                        ));
                    }
                }
                bad
            })
        })
        .collect();
    let mut bad = Vec::new();
    for t in threads {
        bad.extend(
            tokio::task::spawn_blocking(move || t.join().unwrap())
                .await
                .unwrap(),
        );
    }
    let plugin = &server.store.context().plugins.clone().unwrap().loaded()[0];
    let stats = &plugin.stats;
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "{total} calls in {:?}: {} instances created, {} retired, {} retries, {} failures",
        started.elapsed(),
        stats.instances_created.load(Relaxed),
        stats.instances_retired.load(Relaxed),
        stats.retries.load(Relaxed),
        stats.failures.load(Relaxed)
    );
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(stats.calls.load(Relaxed), total as u64 + 1);
    assert_eq!(stats.failures.load(Relaxed), 0);
    assert!(stats.instances_retired.load(Relaxed) > 0);
    server.shutdown().await;
}

#[ignore = "needs the example plugins: tests/run.sh builds them, sets DECOY_EXAMPLE_PLUGINS and runs these with --ignored"]
#[tokio::test]
async fn a_new_plugin_file_does_not_delay_a_concurrent_mapping_reload() {
    let wasm = example("py-stdio");
    // The stub naming the plugin comes with it: a stub naming a plugin that does not
    // exist yet would load without it (WireMock's lenient loading) and answer 200.
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/static"}, "response": {"body": "v1"}}
    ]));
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let mut opts = crate::common::options(dir.path());
    // No compile cache: the Python component takes seconds to compile.
    opts.plugin_cache_dir = None;
    let server = decoy::server::start(opts).await.unwrap();
    let addr = server.http_addr;
    assert_eq!(send(addr, "GET", "/late", &[], "").await.status, 404);

    // Drop the plugin in, then edit an unrelated mapping while it compiles.
    std::fs::copy(&wasm, dir.path().join("plugins/late.wasm")).unwrap();
    std::fs::write(
        dir.path().join("mappings/late.json"),
        stub("/late", "late", "ok").to_string(),
    )
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let edited = std::time::Instant::now();
    std::fs::write(
        dir.path().join("mappings/zz-edit.json"),
        json!({"request": {"urlPath": "/static"}, "response": {"body": "v2"}}).to_string(),
    )
    .unwrap();
    let live = loop {
        if send(addr, "GET", "/static", &[], "").await.body == "v2" {
            break edited.elapsed();
        }
        assert!(edited.elapsed() < std::time::Duration::from_secs(30));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // Meanwhile the mapping naming the plugin answers 503 "plugin loading".
    let a = send(addr, "GET", "/late", &[], "").await;
    let compiling = a.status == 503;
    if compiling {
        assert_eq!(a.header("retry-after"), Some("1"));
        assert!(a.body.contains("plugin loading"), "{}", a.body);
    }
    assert!(
        live < std::time::Duration::from_secs(2),
        "the edit took {live:?} to go live"
    );
    // Then it is served.
    let started = std::time::Instant::now();
    loop {
        let a = send(addr, "GET", "/late", &[], "").await;
        if a.status == 200 {
            assert_eq!(a.body, "ok");
            break;
        }
        assert_eq!(a.status, 503, "{}", a.body);
        assert!(started.elapsed() < std::time::Duration::from_secs(120));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        compiling,
        "the plugin was ready before the edit went live ({live:?})"
    );
    server.shutdown().await;
}
