#![allow(clippy::unwrap_used, clippy::expect_used)]
//! WASM plugins served through real servers on port 0: the bundled response-template,
//! a Rust custom matcher, and a hostile plugin (infinite loop, memory bomb, trap,
//! panic, malformed answers) that must not take the server down. The plugins are
//! built from the workspace for wasm32-wasip2 on first use.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::{get, send};
use serde_json::{Value, json};
use std::sync::atomic::Ordering::Relaxed;

/// Builds a workspace crate for wasm32-wasip2 (once per test run) and returns the
/// `.wasm` file.
fn build_plugin(crate_dir: &str, artifact: &str) -> PathBuf {
    static LOCK: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    let _guard = LOCK.get_or_init(Default::default).lock().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = root.join("target/test-plugins");
    let out = target.join(format!("wasm32-wasip2/release/{artifact}.wasm"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .current_dir(root.join(crate_dir))
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building {crate_dir} for wasm32-wasip2 failed (rustup target add wasm32-wasip2)"
    );
    out
}

pub(crate) fn hostile() -> PathBuf {
    build_plugin("tests/plugins/hostile", "decoy_test_hostile")
}

pub(crate) fn json_matcher() -> PathBuf {
    build_plugin("plugins/examples/rust-matcher", "json_field_matcher")
}

/// A plugin built against `decoy:plugin@0.1.0` as first published (its own frozen
/// copy of the WIT, no guest SDK).
fn old_wit() -> PathBuf {
    build_plugin("tests/plugins/old-wit", "decoy_test_old_wit")
}

pub(crate) fn install(root: &Path, name: &str, wasm: &Path) {
    std::fs::create_dir_all(root.join("plugins")).unwrap();
    std::fs::copy(wasm, root.join(format!("plugins/{name}.wasm"))).unwrap();
}

fn hostile_stub(url: &str, mode: &str) -> Value {
    json!({"request": {"urlPath": url},
           "response": {"status": 200, "body": "unchanged",
                        "transformers": ["hostile"], "transformerParameters": {"mode": mode}}})
}

/// A warm instance is kept in its plugin's pool; had it a handle back to the plugin,
/// the two would keep each other, and the wasm engine with its address-space
/// reservations (terabytes), alive for ever after the server and its runtime are gone.
#[test]
fn a_stopped_server_lets_go_of_its_plugins_and_their_warm_instances() {
    let dir = crate::common::root(&[(
        "mappings/t.json",
        &json!({"mappings": [
            {"request": {"urlPath": "/t"},
             "response": {"body": "{{upper request.path}}", "transformers": ["response-template"]}}
        ]})
        .to_string(),
    )]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let plugin = runtime.block_on(async {
        let server = crate::common::serve(dir.path()).await;
        let a = send(server.http_addr, "GET", "/t", &[], "").await;
        // A helper: the plugin renders it (a plain template the host renders alone).
        assert_eq!((a.status, a.body.as_str()), (200, "/T"));
        let plugins = server.store.context().plugins.as_ref().unwrap();
        let plugin = plugins.get("response-template").unwrap();
        assert!(
            plugin.warm_instances() >= 1,
            "the call left a warm instance"
        );
        let plugin = std::sync::Arc::downgrade(&plugin);
        server.shutdown().await;
        plugin
    });
    drop(runtime);
    assert_eq!(plugin.strong_count(), 0, "the plugin outlived its server");
}

#[tokio::test]
async fn response_template_is_bundled_and_templates_bodies_files_and_headers() {
    let dir = crate::common::root(&[
        (
            "mappings/t.json",
            &json!({"mappings": [
                {"request": {"urlPathTemplate": "/users/{id}"},
                 "response": {"status": 201,
                              "headers": {"Location": "/users/{{request.path.id}}"},
                              "jsonBody": {"id": "{{request.path.id}}", "q": "{{request.query.q}}",
                                           "who": "{{jsonPath request.body '$.name'}}"},
                              "transformers": ["response-template"]}},
                {"request": {"urlPath": "/file"},
                 "response": {"bodyFileName": "t.xml", "transformers": ["response-template"],
                              "transformerParameters": {"env": "test"}}},
                {"request": {"urlPath": "/plain"}, "response": {"body": "{{request.path}}"}}
            ]})
            .to_string(),
        ),
        (
            "__files/t.xml",
            "<r env=\"{{parameters.env}}\">{{xPath request.body '/a/b/text()'}}</r>",
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let a = send(addr, "POST", "/users/7?q=x", &[], r#"{"name":"Ada"}"#).await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.header("location"), Some("/users/7"));
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v, json!({"id": "7", "q": "x", "who": "Ada"}));
    let a = send(addr, "POST", "/file", &[], "<a><b>42</b></a>").await;
    assert_eq!(a.body, r#"<r env="test">42</r>"#);
    // Without the transformer, braces are literal text, as in WireMock.
    assert_eq!(get(addr, "/plain").await.body, "{{request.path}}");
    server.shutdown().await;
}

/// Stubs from users' roots that WireMock 3.13.2 answers 200: `randomValue` with a
/// type it does not define (printable ASCII, lower-cased), a name that is no helper
/// and has no arguments (nothing), and a section over it (its `else`); and a
/// `matchesJsonPath` filter with Jayway's `in`, picked over the fallback stub.
#[tokio::test]
async fn lenient_helpers_and_jayway_word_operators_answer_as_wiremock_does() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/random"},
         "response": {"body": "{{randomValue length=40 type='number'}}\n{{randomValue length=8 type='string'}}",
                      "transformers": ["response-template"]}},
        {"request": {"urlPath": "/unknown"},
         "response": {"body": "[{{foo}}][{{#bar}}x{{else}}y{{/bar}}]",
                      "transformers": ["response-template"]}},
        {"priority": 1,
         "request": {"urlPath": "/refdata/judicial/users", "method": "POST",
                     "bodyPatterns": [{"matchesJsonPath":
                        "$.personal_code[?(@ in [\"7007496\", \"4927250\"])]"}]},
         "response": {"body": "known"}},
        {"priority": 2, "request": {"urlPath": "/refdata/judicial/users", "method": "POST"},
         "response": {"body": "other"}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let a = get(addr, "/random").await;
    assert_eq!(a.status, 200, "{}", a.body);
    // Printable ASCII has no line break: the two values are split at the one written.
    let (number, string) = a.body.split_once('\n').unwrap();
    assert_eq!((number.chars().count(), string.chars().count()), (40, 8));
    assert!(
        (number.chars().chain(string.chars()))
            .all(|c| (' '..='~').contains(&c) && !c.is_ascii_uppercase()),
        "{}",
        a.body
    );
    let a = get(addr, "/unknown").await;
    assert_eq!((a.status, a.body.as_str()), (200, "[][y]"));
    let users = "/refdata/judicial/users";
    let known = send(
        addr,
        "POST",
        users,
        &[],
        r#"{"personal_code": ["4927250"]}"#,
    )
    .await;
    assert_eq!(known.body, "known");
    let other = send(addr, "POST", users, &[], r#"{"personal_code": ["1"]}"#).await;
    assert_eq!(other.body, "other");
    let scalar = send(addr, "POST", users, &[], r#"{"personal_code": "4927250"}"#).await;
    assert_eq!(scalar.body, "other", "a filter on a string selects nothing");
    server.shutdown().await;
}

#[tokio::test]
async fn global_response_templating_applies_to_every_stub() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/plain"}, "response": {"body": "{{request.method}} {{request.path}}"}}
    ]));
    let mut opts = crate::common::options(dir.path());
    opts.global_templating = true;
    let server = decoy::server::start(opts).await.unwrap();
    assert_eq!(get(server.http_addr, "/plain").await.body, "GET /plain");
    server.shutdown().await;
}

/// A `jsonBody` of about 250 KB with 540 `{{request.requestLine.baseUrl}}` in it,
/// as mobile apps' UI-test mocks have (image links pointing back at the mock). Its
/// template used to take longer to compile than a call's deadline, so every
/// request answered 500; now it is compiled when the stub loads, and the first
/// request, and every one after it, answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_250_kb_template_answers_200_from_its_first_request_with_the_default_deadline() {
    let feed = big_feed(|_| "{{request.requestLine.baseUrl}}".into());
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/feed"},
         "response": {"status": 200, "jsonBody": feed,
                      "transformers": ["response-template"]}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let check = |a: crate::common::Answer| {
        assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(2000)]);
        let v: Value = serde_json::from_str(&a.body).expect("JSON");
        let items = v["items"].as_array().expect("items");
        let urls: Vec<&str> = items
            .iter()
            .filter_map(|i| i["imageUrl"].as_str())
            .collect();
        assert_eq!(urls.len(), 540);
        assert_eq!(urls[7], format!("http://{addr}/images/7.png"));
    };
    check(get(addr, "/feed").await);
    // Many at once: new instances are made, and each answers its first call.
    let calls: Vec<_> = (0..12)
        .map(|_| tokio::spawn(async move { get(addr, "/feed").await }))
        .collect();
    for c in calls {
        check(c.await.unwrap());
    }
    let metrics = get(addr, "/__admin/metrics").await.body;
    for counter in ["decoy_plugin_failures_total", "decoy_plugin_timeouts_total"] {
        let line = format!("{counter}{{plugin=\"response-template\"}} ");
        for l in metrics.lines().filter(|l| l.starts_with(&line)) {
            assert_eq!(l, format!("{line}0"), "{metrics}");
        }
    }
    server.shutdown().await;
}

/// The bundled `response-template` plugin of a running server.
fn template_plugin(server: &decoy::server::Running) -> std::sync::Arc<decoy_plugin_host::Plugin> {
    let plugins = server.store.context().plugins.clone().unwrap();
    plugins.get("response-template").unwrap()
}

/// A 250 KB `jsonBody` whose 540 expressions are `expr(i)`, as in users' UI-test mocks.
fn big_feed(expr: impl Fn(usize) -> String) -> Value {
    let mut items = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < 250_000 {
        let item = if i < 540 {
            json!({"id": i, "title": format!("Item {i}"),
                   "imageUrl": format!("{}/images/{i}.png", expr(i)),
                   "description": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua",
                   "price": i as f64 + 0.99, "tags": ["a", "b"]})
        } else {
            json!({"id": i, "title": format!("Item {i}")})
        };
        size += item.to_string().len() + 1;
        items.push(item);
        i += 1;
    }
    json!({"items": items})
}

/// Templates of text and plain request fields are rendered by the host, with no
/// plugin call; each form must come out as the plugin writes it. Every template is
/// served twice: by a stub the host renders, and by a stub that also has a header
/// needing a helper, which sends its whole answer through the plugin.
#[tokio::test]
async fn plain_templates_rendered_by_the_host_are_byte_for_byte_what_the_plugin_renders() {
    let templates = [
        "segment {{request.pathSegments.[1]}} q {{request.query.q}}",
        "{{request.url}}|{{request.path}}|{{request.method}}",
        "{{request.requestLine.baseUrl}} {{request.baseUrl}} {{request.scheme}} {{request.host}} {{request.port}}",
        "{{request.requestLine.path}} {{request.requestLine.method}} {{request.requestLine.pathSegments.[0]}}",
        "[{{request.pathSegments.[0]}}][{{request.pathSegments.[2]}}][{{request.pathSegments.[3]}}][{{request.pathSegments.[9]}}] {{request.path.[1]}}",
        "{{request.query.q}} {{request.query.enc}} [{{request.query.empty}}] [{{request.query.none}}] {{request.query.q.first}} {{request.query.q.[0]}}",
        "{{request.headers.X-Trace}} {{request.headers.[x-trace]}} {{request.headers.x-multi}} [{{request.headers.none}}] {{request.headers.Content-Type}}",
        "{{request.cookies.session}} [{{request.cookies.none}}]",
        "{{request.path.id}} [{{request.pathParams.none}}]",
        "{{request.body}}",
        "{{request.clientIp}}",
        "a {{!-- a comment --}} b {{! another }}c {{{request.url}}}",
        "  {{~request.method~}}  \n x {{~request.url}}",
        "\\{{request.url}} escaped, { braces } and }} closers",
        "{{ request.query.q }}{{request.destination}}[{{request.messageId}}]",
    ];
    // The two stubs of a template take the same requests but for `X-Via`, which no
    // template reads.
    let mut stubs = Vec::new();
    for (i, t) in templates.iter().enumerate() {
        for (via, extra) in [
            (json!({"absent": true}), None),
            (json!({"equalTo": "plugin"}), Some("{{upper 'x'}}")),
        ] {
            let mut headers = json!({"X-Template": t.replace('\n', " ")});
            if let Some(e) = extra {
                headers["X-Helper"] = json!(e);
            }
            stubs.push(json!({
                "request": {"urlPathTemplate": format!("/t/{i}/{{id}}/{{a}}/{{b}}"),
                            "headers": {"X-Via": via}},
                "response": {"body": t, "headers": headers, "transformers": ["response-template"]}
            }));
        }
    }
    let dir = crate::common::root_with_stubs(json!(stubs));
    let server = crate::common::serve(dir.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    // Each request: its query, its headers and its body.
    type Sent<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let requests: [Sent; 3] = [
        (
            "?q=a%20b%26c&q=second&enc=%E2%82%AC&empty=",
            &[
                ("X-Trace", "t-1"),
                ("x-multi", "one"),
                ("x-multi", "two"),
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Cookie", "session=abc; other=1"),
            ],
            "caf\u{e9} body {{not a template}}",
        ),
        ("", &[("X-Forwarded-For", "203.0.113.7, 10.0.0.1")], ""),
        ("?q=", &[("x-forwarded-for", "")], "x"),
    ];
    for (i, t) in templates.iter().enumerate() {
        for (query, headers, body) in &requests {
            let path = format!("/t/{i}/42/caf%C3%A9/x%2Fy{query}");
            let calls = plugin.stats.calls.load(Relaxed);
            let host = send(addr, "POST", &path, headers, body).await;
            assert_eq!(
                plugin.stats.calls.load(Relaxed),
                calls,
                "{t:?} was rendered by a plugin call"
            );
            let mut via_plugin = headers.to_vec();
            via_plugin.push(("X-Via", "plugin"));
            let through_plugin = send(addr, "POST", &path, &via_plugin, body).await;
            assert!(plugin.stats.calls.load(Relaxed) > calls, "{t:?}");
            assert_eq!(
                (host.status, through_plugin.status),
                (200, 200),
                "{t:?}: {}",
                through_plugin.body
            );
            assert_eq!(
                host.body, through_plugin.body,
                "{t:?} with {query:?} {headers:?}"
            );
            assert_eq!(
                host.header("x-template"),
                through_plugin.header("x-template"),
                "{t:?} as a header, with {query:?} {headers:?}"
            );
            assert_eq!(through_plugin.header("x-helper"), Some("X"));
        }
    }
    // A few answers spelled out, so that both sides agreeing on a wrong value fails.
    let a = send(addr, "POST", "/t/0/42/caf%C3%A9/x%2Fy?q=a%20b", &[], "").await;
    assert_eq!(a.body, "segment 0 q a b");
    let a = send(addr, "POST", "/t/4/42/caf%C3%A9/x%2Fy", &[], "").await;
    assert_eq!(a.body, "[t][42][caf\u{e9}][] 4");
    let a = send(addr, "POST", "/t/2/42/caf%C3%A9/x%2Fy", &[], "").await;
    let port = addr.port();
    assert_eq!(
        a.body,
        format!("http://{addr} http://{addr} http 127.0.0.1 {port}")
    );
    server.shutdown().await;
}

/// A plain template is compiled once, when its stub loads, and never again however
/// many requests and threads serve it; no plugin instance is made for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_250_kb_template_is_compiled_once_at_load_and_served_without_a_plugin_call() {
    let feed = big_feed(|_| "{{request.requestLine.baseUrl}}".into());
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/feed"},
         "response": {"jsonBody": feed, "headers": {"X-Base": "{{request.baseUrl}}"},
                      "transformers": ["response-template"]}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    assert_eq!(
        plugin.stats.host_compiled.load(Relaxed),
        2,
        "body and header"
    );
    let calls: Vec<_> = (0..16)
        .map(|_| tokio::spawn(async move { get(addr, "/feed").await }))
        .collect();
    for c in calls {
        let a = c.await.unwrap();
        assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(500)]);
        assert_eq!(a.header("x-base"), Some(format!("http://{addr}").as_str()));
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            v["items"][7]["imageUrl"],
            json!(format!("http://{addr}/images/7.png"))
        );
    }
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 2);
    assert_eq!(plugin.stats.host_rendered.load(Relaxed), 16);
    assert_eq!(plugin.stats.calls.load(Relaxed), 0);
    assert_eq!(plugin.stats.instances_created.load(Relaxed), 0);
    server.shutdown().await;
}

/// The same size of template, but with a helper in each expression: it is the
/// plugin's to render, in the sandbox, and every instance's first call answers 200
/// within the default deadline (each instance reads it compiled from the plugin's
/// `cache`, where decoy put it when the stub loaded, before that call, outside the
/// deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_250_kb_handlebars_template_answers_200_from_its_first_request_with_the_default_deadline()
{
    let feed = big_feed(|_| {
        "{{upper request.scheme}}://{{lower request.requestLine.host}}:{{request.port}}".into()
    });
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/feed"},
         "response": {"jsonBody": feed, "transformers": ["response-template"]}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 1);
    let calls: Vec<_> = (0..8)
        .map(|_| tokio::spawn(async move { get(addr, "/feed").await }))
        .collect();
    for c in calls {
        let a = c.await.unwrap();
        assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(2000)]);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            v["items"][7]["imageUrl"],
            json!(format!("HTTP://127.0.0.1:{}/images/7.png", addr.port()))
        );
    }
    assert!(plugin.stats.calls.load(Relaxed) >= 8);
    assert_eq!(plugin.stats.failures.load(Relaxed), 0);
    assert_eq!(plugin.stats.timeouts.load(Relaxed), 0);
    assert_eq!(
        plugin.stats.host_compiled.load(Relaxed),
        1,
        "compiled at load only"
    );
    assert_eq!(
        plugin.stats.compilations.load(Relaxed),
        0,
        "not by the plugin"
    );
    server.shutdown().await;
}

/// A 250 KB body of JSON text and helpers (`jsonPath`, `{{#each}}` blocks) is the
/// plugin's to render. decoy compiles it once, when the stub loads, and puts it in
/// the plugin's `cache`; every instance, the first one included, reads it from
/// there when decoy prepares it for the stub: every request answers 200 from the
/// first, and however many requests and instances serve the stub, the plugin
/// compiles nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_250_kb_helper_template_is_compiled_once_at_load_and_never_by_the_plugin_however_many_instances_serve_it()
 {
    let mut body = String::from("[");
    let mut n = 0;
    while body.len() < 250_000 {
        if n > 0 {
            body.push_str(",\n");
        }
        body.push_str(&format!(
            "{{\"n\": {n}, \"id\": \"{{{{jsonPath request.body '$.id'}}}}\", \"tags\": [{{{{#each (jsonPath request.body '$.tags')}}}}\"{{{{this}}}}\"{{{{#unless @last}}}}, {{{{/unless}}}}{{{{/each}}}}], \"text\": \"{}\"}}",
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(6)
        ));
        n += 1;
    }
    body.push(']');
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/feed"},
         "response": {"body": body, "transformers": ["response-template"]}}
    ]));
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    let order = r#"{"id": "A-7", "tags": ["x", "y"]}"#;
    let check = |a: crate::common::Answer| {
        assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(2000)]);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v.as_array().map(Vec::len), Some(n));
        assert_eq!(
            v[n - 1],
            json!({"n": n - 1, "id": "A-7", "tags": ["x", "y"],
            "text": "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(6)})
        );
    };
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 1);
    // The very first request, alone: no instance has compiled the template, and
    // the first one to serve it compiles nothing either.
    check(send(addr, "POST", "/feed", &[], order).await);
    assert_eq!(plugin.stats.calls.load(Relaxed), 1);
    assert_eq!(plugin.stats.compilations.load(Relaxed), 0);
    let calls: Vec<_> = (0..16)
        .map(|_| tokio::spawn(async move { send(addr, "POST", "/feed", &[], order).await }))
        .collect();
    for c in calls {
        check(c.await.unwrap());
    }
    for _ in 0..8 {
        check(send(addr, "POST", "/feed", &[], order).await);
    }
    assert_eq!(plugin.stats.calls.load(Relaxed), 25);
    assert_eq!(plugin.stats.failures.load(Relaxed), 0);
    let instances = plugin.stats.instances_created.load(Relaxed);
    assert!(instances >= 1);
    assert_eq!(
        plugin.stats.compilations.load(Relaxed),
        0,
        "none, however many calls and instances ({instances})"
    );
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 1);
    // The count is the one /__admin/metrics shows.
    let m = get(addr, "/__admin/metrics").await.body;
    assert!(
        m.contains("decoy_plugin_compilations_total{plugin=\"response-template\"} 0"),
        "{m}"
    );
    server.shutdown().await;
}

/// With `isolation: per-request` every call is a fresh instance, and every fresh
/// instance is prepared for the stub's answer before its call: each one, the first
/// included, one after another and at once, reads the templates (with helpers and
/// blocks, so the plugin renders them, not decoy) from the plugin's `cache`, where
/// decoy put them compiled when the stub loaded. Every answer is right, and the
/// plugin compiled nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_is_compiled_once_however_many_fresh_instances_serve_it() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/order"},
         "response": {
             "body": "{\"id\": \"{{jsonPath request.body '$.id'}}\", \"tags\": [{{#each (jsonPath request.body '$.tags')}}\"{{upper this}}\"{{#unless @last}}, {{/unless}}{{/each}}], \"n\": {{request.query.n}}}",
             "headers": {"x-first-tag": "{{jsonPath request.body '$.tags[0]'}}"},
             "transformers": ["response-template"]}}
    ]));
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::write(
        dir.path().join("plugins/response-template.json"),
        r#"{"isolation": "per-request"}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    let check = |a: crate::common::Answer, n: usize| {
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {}", a.body));
        assert_eq!(
            v,
            json!({"id": format!("A-{n}"), "tags": ["X", format!("Y{n}")], "n": n})
        );
        assert_eq!(a.header("x-first-tag"), Some("x"));
    };
    let order = |n: usize| format!(r#"{{"id": "A-{n}", "tags": ["x", "y{n}"]}}"#);
    for n in 0..10 {
        check(
            send(addr, "POST", &format!("/order?n={n}"), &[], &order(n)).await,
            n,
        );
    }
    let calls: Vec<_> = (10..20)
        .map(|n| {
            let body = order(n);
            tokio::spawn(async move {
                (
                    n,
                    send(addr, "POST", &format!("/order?n={n}"), &[], &body).await,
                )
            })
        })
        .collect();
    for c in calls {
        let (n, a) = c.await.unwrap();
        check(a, n);
    }
    assert_eq!(plugin.stats.calls.load(Relaxed), 20);
    assert_eq!(plugin.stats.failures.load(Relaxed), 0);
    assert_eq!(plugin.stats.instances_created.load(Relaxed), 20);
    assert_eq!(
        plugin.stats.compilations.load(Relaxed),
        0,
        "the body and the header, compiled by decoy for twenty instances"
    );
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 2);
    server.shutdown().await;
}

/// decoy puts a stub's compiled templates in the plugin's `cache` whenever the stub
/// loads: a stub reloaded with a changed template is not compiled by the plugin
/// either. A reload of the plugin itself (here, of its settings) starts its cache
/// empty, and the stubs are not loaded again then: its instances compile the
/// template, once for all of them, as they did before decoy put templates there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_is_put_compiled_at_reload_and_the_plugin_compiles_it_once_after_its_own_reload()
 {
    let stub = |greeting: &str| {
        json!([{"request": {"urlPath": "/hi"},
                "response": {"body": format!("{{{{#each request.query.n}}}}{greeting} {{{{upper this}}}};{{{{/each}}}}"),
                             "transformers": ["response-template"]}}])
    };
    let dir = crate::common::root_with_stubs(stub("hello"));
    // The plugins folder is there from the start, so that the watcher watches it.
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugin = template_plugin(&server);
    assert_eq!(get(addr, "/hi?n=a&n=b").await.body, "hello A;hello B;");
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 1);
    assert_eq!(plugin.stats.compilations.load(Relaxed), 0);

    std::fs::write(
        dir.path().join("mappings/stubs.json"),
        json!({"mappings": stub("bye")}).to_string(),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let body = get(addr, "/hi?n=a").await.body;
        if body == "bye A;" || std::time::Instant::now() > deadline {
            assert_eq!(body, "bye A;");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 2);
    assert_eq!(
        plugin.stats.compilations.load(Relaxed),
        0,
        "read from the cache"
    );

    // New settings reload the plugin: every call is a fresh instance from then on,
    // and they share the new, empty cache.
    std::fs::write(
        dir.path().join("plugins/response-template.json"),
        r#"{"isolation": "per-request"}"#,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while plugin.stats.compilations.load(Relaxed) == 0 && std::time::Instant::now() < deadline {
        assert_eq!(get(addr, "/hi?n=c").await.body, "bye C;");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..5 {
        assert_eq!(get(addr, "/hi?n=d").await.body, "bye D;");
    }
    assert_eq!(
        plugin.stats.compilations.load(Relaxed),
        1,
        "once for every fresh instance after the plugin's reload"
    );
    assert_eq!(plugin.stats.host_compiled.load(Relaxed), 2);
    server.shutdown().await;
}

/// A template that does not compile is reported when its stub loads, with the
/// file, the stub, the field and the position; the stub stays and answers 500 when
/// hit, as under WireMock; `decoy validate` warns and `--strict` fails on it.
#[tokio::test]
async fn a_template_that_does_not_compile_is_reported_at_load_naming_file_stub_field_and_position()
{
    let dir = crate::common::root(&[
        (
            "mappings/bad-body.json",
            &json!({"name": "broken body", "request": {"urlPath": "/b"},
                    "response": {"body": "line one\nline {{#if request.url}} two",
                                 "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mappings/bad-header.json",
            &json!({"request": {"urlPath": "/h"},
                    "response": {"headers": {"X-Id": "{{request.query.id"},
                                 "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mappings/bad-file.json",
            &json!({"request": {"urlPath": "/f"},
                    "response": {"bodyFileName": "t.txt", "transformers": ["response-template"]}})
            .to_string(),
        ),
        ("__files/t.txt", "ok\n{{/each}}\n"),
        (
            "mappings/fine.json",
            &json!({"request": {"urlPath": "/fine"},
                    "response": {"body": "{{request.path}}", "transformers": ["response-template"]}})
            .to_string(),
        ),
        (
            "mappings/untemplated.json",
            &json!({"request": {"urlPath": "/braces"}, "response": {"body": "{{#if"}})
            .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let problems = server.report.warnings.join("\n");
    let expect = [
        (
            "mappings/bad-body.json",
            "mapping #0 (name \"broken body\"): response.body: bad template",
            "line 2, column",
        ),
        (
            "mappings/bad-header.json",
            "response.headers.X-Id: bad template",
            "line 1, column",
        ),
        (
            "mappings/bad-file.json",
            "response.bodyFileName: in __files/t.txt: bad template",
            "line 2, column",
        ),
    ];
    for (file, field, at) in expect {
        let line = problems
            .lines()
            .find(|l| l.contains(file))
            .unwrap_or_else(|| panic!("no problem for {file}: {problems}"));
        assert!(line.contains(field), "{line}");
        assert!(line.contains(at), "{line}");
    }
    assert_eq!(
        problems
            .lines()
            .filter(|l| l.contains("bad template"))
            .count(),
        3,
        "{problems}"
    );
    assert_eq!(get(server.http_addr, "/fine").await.body, "/fine");
    assert_eq!(get(server.http_addr, "/b").await.status, 500);
    assert_eq!(get(server.http_addr, "/h").await.status, 500);
    assert_eq!(get(server.http_addr, "/braces").await.body, "{{#if");
    server.shutdown().await;

    let (code, text) = crate::common::process::validate(dir.path(), &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("warning: mappings/bad-body.json: mapping #0 (name \"broken body\"): response.body: bad template: "),
        "{text}"
    );
    assert!(
        text.contains("response.headers.X-Id: bad template"),
        "{text}"
    );
    let (code, text) = crate::common::process::validate(dir.path(), &["--strict"]);
    assert_eq!(code, Some(1), "{text}");
}

#[tokio::test]
async fn a_root_without_plugin_references_never_starts_the_wasm_engine() {
    let mut files: Vec<(String, String)> = (0..100)
        .map(|i| {
            (
                format!("plugins/unused{i}.wasm"),
                "not even wasm".to_owned(),
            )
        })
        .collect();
    files.push((
        "mappings/a.json".into(),
        json!({"request": {"urlPath": "/a"}, "response": {"body": "a"}}).to_string(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let dir = crate::common::root(&refs);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(get(server.http_addr, "/a").await.body, "a");
    let plugins = server.store.context().plugins.clone().unwrap();
    assert!(!plugins.engine_started());
    assert!(plugins.loaded().is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_rust_custom_matcher_decides_which_stub_answers() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"method": "POST", "urlPath": "/orders",
                     "customMatcher": {"name": "json-field-matcher",
                                       "parameters": {"pointer": "/account/tier", "oneOf": ["gold", "platinum"]}}},
         "response": {"body": "priority lane"}},
        {"request": {"method": "POST", "urlPath": "/orders"}, "priority": 10,
         "response": {"body": "normal lane"}}
    ]));
    install(dir.path(), "json-field-matcher", &json_matcher());
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let gold = r#"{"account": {"tier": "gold"}}"#;
    let bronze = r#"{"account": {"tier": "bronze"}}"#;
    assert_eq!(
        send(addr, "POST", "/orders", &[], gold).await.body,
        "priority lane"
    );
    assert_eq!(
        send(addr, "POST", "/orders", &[], bronze).await.body,
        "normal lane"
    );
    assert_eq!(
        send(addr, "POST", "/orders", &[], "not json").await.body,
        "normal lane"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_custom_matcher_no_plugin_provides_is_loaded_never_matches_and_is_reported_as_wiremock_does()
 {
    // The WireMock state extension's matcher, in neither engine.
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"method": "GET", "urlPattern": "/api/v1/todolist",
                     "customMatcher": {"name": "state-matcher",
                                       "parameters": {"hasContext": "todolist"}}},
         "response": {"body": "from the state"}}
    ]));
    let report = decoy_core::mapping::load::load_root(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.mappings.len(), 1);
    let warnings: Vec<String> = report.warnings.iter().map(|p| p.to_string()).collect();
    assert!(
        warnings.iter().any(|w| w.contains("mappings/stubs.json")
            && w.contains("mapping #0")
            && w.contains("request.customMatcher.name: no plugin named \"state-matcher\": the stub is loaded but never matches")),
        "{warnings:?}"
    );

    let server = crate::common::serve(dir.path()).await;
    let a = get(server.http_addr, "/api/v1/todolist").await;
    assert_eq!(a.status, 404, "{}", a.body);
    // WireMock 3.13.2's report for this root and request, as it printed it: a section
    // title on both sides for the matcher it does not have.
    let rule = "-".repeat(119);
    let row = |l: &str, r: &str| {
        format!(
            "{l:<59}|{}",
            if r.is_empty() {
                String::new()
            } else {
                format!(" {r}")
            }
        )
    };
    let title = "[custom matcher: state-matcher]";
    let want = [
        String::new(),
        format!("{:>70}", "Request was not matched"),
        format!("{:>70}", "======================="),
        String::new(),
        rule.clone(),
        format!("| {:<57}| {:<57}|", "Closest stub", "Request"),
        rule.clone(),
        row("", ""),
        row("GET", "GET"),
        row("[regex] /api/v1/todolist", "/api/v1/todolist"),
        row("", ""),
        row(title, title),
        row("", ""),
        rule,
    ]
    .join("\n")
        + "\n";
    assert_eq!(a.body, want);
    server.shutdown().await;
}

#[tokio::test]
async fn a_stub_posted_through_the_admin_api_naming_a_missing_plugin_is_listed_in_problems_until_removed()
 {
    const ID: &str = "0d8f4e0a-5b4f-4a57-9d33-3f1f6a0e2b11";
    let at = format!("/__admin/mappings/{ID}");
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let stub = json!({
        "id": ID,
        "name": "todo list",
        "request": {"urlPath": "/todo", "customMatcher": {"name": "state-matcher"}},
        "response": {"body": "from the state"}
    });
    let created = send(addr, "POST", "/__admin/mappings", &[], &stub.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let problems = |body: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(body).unwrap();
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .collect()
    };
    let listed = problems(&get(addr, "/__admin/problems").await.body);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].starts_with(
            "admin API: mapping (id 0d8f4e0a-5b4f-4a57-9d33-3f1f6a0e2b11, name \"todo list\"): \
             request.customMatcher.name: no plugin named \"state-matcher\": the stub is loaded but never matches"
        ),
        "{listed:?}"
    );
    // Edited to need no plugin: nothing to say any more.
    let fixed = json!({"request": {"urlPath": "/todo"}, "response": {"body": "plain"}});
    let edited = send(addr, "PUT", &at, &[], &fixed.to_string()).await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    assert!(problems(&get(addr, "/__admin/problems").await.body).is_empty());
    // Posted again with the missing plugin, then removed: gone from the list too.
    send(addr, "PUT", &at, &[], &stub.to_string()).await;
    assert_eq!(
        problems(&get(addr, "/__admin/problems").await.body).len(),
        1
    );
    let removed = send(addr, "DELETE", &at, &[], "").await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert!(problems(&get(addr, "/__admin/problems").await.body).is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_custom_matcher_plugin_added_later_is_used_from_then_on() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"method": "POST", "urlPath": "/orders",
                     "customMatcher": {"name": "json-field-matcher",
                                       "parameters": {"pointer": "/tier", "oneOf": ["gold"]}}},
         "response": {"body": "priority lane"}},
        {"request": {"method": "POST", "urlPath": "/orders"}, "priority": 10,
         "response": {"body": "normal lane"}}
    ]));
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let gold = r#"{"tier": "gold"}"#;
    // Not installed: the stub is there, and never matches.
    assert_eq!(
        send(addr, "POST", "/orders", &[], gold).await.body,
        "normal lane"
    );
    // Written whole under a hidden name, then renamed into place.
    let tmp = dir.path().join("plugins/.json-field-matcher.tmp");
    std::fs::copy(json_matcher(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.path().join("plugins/json-field-matcher.wasm")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = send(addr, "POST", "/orders", &[], gold).await.body;
        if body == "priority lane" || std::time::Instant::now() > deadline {
            assert_eq!(body, "priority lane");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        send(addr, "POST", "/orders", &[], r#"{"tier": "bronze"}"#)
            .await
            .body,
        "normal lane"
    );
    server.shutdown().await;
}

// Multi-threaded: on a single-threaded runtime a guest that sleeps is refused at
// once (it would block the only worker), and `/sleep` is here for the wall-clock cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_fail_their_own_request_and_nothing_else() {
    let dir = crate::common::root_with_stubs(json!([
        hostile_stub("/loop", "loop"),
        // The memory bomb is the same guest under another name with a longer CPU
        // deadline, so that it can only fail by its memory cap.
        {"request": {"urlPath": "/memory"},
         "response": {"status": 200, "body": "unchanged",
                      "transformers": ["hostile-memory"], "transformerParameters": {"mode": "memory"}}},
        // A guest that waits without using CPU: stopped by the wall-clock cap (ten
        // times its 20 ms deadline), with a reason that says so. (Each of its 50 ms
        // sleeps costs the host some CPU, charged to the call: a short sleep in a
        // debug build would reach the CPU deadline first.)
        {"request": {"urlPath": "/sleep"},
         "response": {"status": 200, "body": "unchanged",
                      "transformers": ["hostile-sleep"], "transformerParameters": {"mode": "sleep"}}},
        hostile_stub("/trap", "trap"),
        hostile_stub("/panic", "panic"),
        hostile_stub("/status", "status"),
        hostile_stub("/header", "header"),
        hostile_stub("/error", "error"),
        hostile_stub("/echo", "echo"),
        {"request": {"urlPath": "/match-loop",
                     "customMatcher": {"name": "hostile", "parameters": {"mode": "loop"}}},
         "response": {"body": "never"}},
        {"request": {"urlPath": "/static"}, "response": {"body": "still here"}}
    ]));
    install(dir.path(), "hostile", &hostile());
    install(dir.path(), "hostile-memory", &hostile());
    std::fs::write(
        dir.path().join("plugins/hostile-memory.json"),
        r#"{"timeoutMilliseconds": 10000}"#,
    )
    .unwrap();
    install(dir.path(), "hostile-sleep", &hostile());
    std::fs::write(
        dir.path().join("plugins/hostile-sleep.json"),
        r#"{"timeoutMilliseconds": 20}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let cases = [
        ("/loop", "CPU deadline of 100 ms"),
        ("/memory", "memory limit of 64 MiB"),
        ("/sleep", "200 ms of wall time"),
        ("/trap", "trapped"),
        // The guest's panic message, from its stderr.
        ("/panic", "the hostile plugin panics on purpose"),
        ("/status", "status 7"),
        ("/header", "invalid header name"),
        ("/error", "the hostile plugin refuses"),
        ("/match-loop", "CPU deadline"),
    ];
    for (path, reason) in cases {
        let started = std::time::Instant::now();
        let a = get(addr, path).await;
        assert_eq!(a.status, 500, "{path}: {}", a.body);
        assert_eq!(a.header("content-type"), Some("application/json"));
        let v: Value = serde_json::from_str(&a.body).unwrap();
        let plugin = match path {
            "/memory" => "hostile-memory",
            "/sleep" => "hostile-sleep",
            _ => "hostile",
        };
        assert_eq!(v["plugin"], plugin, "{path}: {v}");
        assert!(v["mapping"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert!(
            v["reason"].as_str().unwrap().contains(reason),
            "{path}: {v}"
        );
        // Bounded, generously: a runaway guest is stopped, not waited for.
        assert!(started.elapsed() < Duration::from_secs(10), "{path}");
        // Everything else goes on: other stubs, and the same plugin on a good path.
        assert_eq!(get(addr, "/static").await.body, "still here");
        assert_eq!(get(addr, "/echo").await.body, "echo /echo");
    }
    let plugin = &server.store.context().plugins.clone().unwrap().loaded()[0];
    let failures = plugin
        .stats
        .failures
        .load(std::sync::atomic::Ordering::Relaxed);
    // Every case but the memory bomb and the sleeper is `hostile`'s (loaded first: by name).
    assert_eq!(failures, cases.len() as u64 - 2);
    assert_eq!(
        plugin
            .stats
            .timeouts
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    let metrics = get(addr, "/__admin/metrics").await.body;
    assert!(
        metrics.contains("decoy_plugin_failures_total{plugin=\"hostile\"} 7"),
        "{metrics}"
    );
    assert!(
        metrics.contains("decoy_plugin_failures_total{plugin=\"hostile-memory\"} 1"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_plugin_that_prints_on_its_first_call_increments_kv_once() {
    let dir = crate::common::root_with_stubs(json!([hostile_stub("/print", "print")]));
    install(dir.path(), "hostile", &hostile());
    let server = crate::common::serve(dir.path()).await;
    for n in 1..=3 {
        let a = get(server.http_addr, "/print").await;
        assert_eq!((a.status, a.body.as_str()), (200, &*format!("count={n}")));
    }
    let plugin = &server.store.context().plugins.clone().unwrap().loaded()[0];
    assert_eq!(plugin.stats.calls.load(Relaxed), 3);
    assert_eq!(plugin.stats.instances_created.load(Relaxed), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_prints_on_a_multi_threaded_runtime_runs_each_call_once() {
    let dir = crate::common::root_with_stubs(json!([hostile_stub("/print", "print")]));
    install(dir.path(), "hostile", &hostile());
    let server = crate::common::serve(dir.path()).await;
    let calls = (0..20).map(|_| get(server.http_addr, "/print"));
    let answers = futures_util::future::join_all(calls).await;
    let mut counts: Vec<u32> = answers
        .iter()
        .map(|a| a.body.trim_start_matches("count=").parse().unwrap())
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, (1..=20).collect::<Vec<_>>());
    server.shutdown().await;
}

#[tokio::test]
async fn a_warm_instance_whose_memory_grows_is_retired_before_its_cap_and_no_call_fails() {
    let dir = crate::common::root_with_stubs(json!([hostile_stub("/grow", "grow")]));
    install(dir.path(), "hostile", &hostile());
    std::fs::write(
        dir.path().join("plugins/hostile.json"),
        r#"{"memoryLimitMiB": 16}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    for i in 0..300 {
        let a = get(server.http_addr, "/grow").await;
        assert_eq!(a.status, 200, "call {i}: {}", a.body);
    }
    let plugin = &server.store.context().plugins.clone().unwrap().loaded()[0];
    assert!(plugin.stats.instances_retired.load(Relaxed) >= 3);
    assert_eq!(plugin.stats.retries.load(Relaxed), 0);
    assert_eq!(plugin.stats.failures.load(Relaxed), 0);
    let metrics = get(server.http_addr, "/__admin/metrics").await.body;
    assert!(
        metrics.contains("decoy_plugin_instances_retired_total{plugin=\"hostile\"}"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_call_that_hits_the_memory_cap_of_a_warm_instance_is_retried_once_on_a_fresh_one() {
    let dir = crate::common::root_with_stubs(json!([hostile_stub("/grow", "grow")]));
    install(dir.path(), "hostile", &hostile());
    // No retirement by memory: every instance grows until a call hits the cap.
    std::fs::write(
        dir.path().join("plugins/hostile.json"),
        r#"{"memoryLimitMiB": 16, "retireAtMemoryPercent": 100}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    for i in 0..200 {
        let a = get(server.http_addr, "/grow").await;
        assert_eq!(a.status, 200, "call {i}: {}", a.body);
    }
    let plugin = &server.store.context().plugins.clone().unwrap().loaded()[0];
    assert!(plugin.stats.retries.load(Relaxed) >= 2);
    assert_eq!(plugin.stats.failures.load(Relaxed), 0);
    let metrics = get(server.http_addr, "/__admin/metrics").await.body;
    assert!(
        metrics.contains("decoy_plugin_retries_total{plugin=\"hostile\"}"),
        "{metrics}"
    );
    // A call that fails on a fresh instance too still gets the 500 with the reason.
    server.shutdown().await;
}

#[tokio::test]
async fn an_instance_is_retired_after_max_calls_per_instance() {
    let dir = crate::common::root_with_stubs(json!([hostile_stub("/count", "count")]));
    install(dir.path(), "hostile", &hostile());
    std::fs::write(
        dir.path().join("plugins/hostile.json"),
        r#"{"maxCallsPerInstance": 2}"#,
    )
    .unwrap();
    let server = crate::common::serve(dir.path()).await;
    let mut bodies = Vec::new();
    for _ in 0..4 {
        bodies.push(get(server.http_addr, "/count").await.body);
    }
    assert_eq!(
        bodies,
        [
            "shared=1 instance=1",
            "shared=2 instance=2",
            "shared=3 instance=1",
            "shared=4 instance=2"
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn warm_instances_are_reused_unless_isolation_is_per_request() {
    for (settings, expect_instance_counts) in [
        (None, true),
        (Some(r#"{"isolation": "per-request"}"#), false),
    ] {
        let dir = crate::common::root_with_stubs(json!([hostile_stub("/count", "count")]));
        install(dir.path(), "hostile", &hostile());
        if let Some(s) = settings {
            std::fs::write(dir.path().join("plugins/hostile.json"), s).unwrap();
        }
        let server = crate::common::serve(dir.path()).await;
        let mut bodies = Vec::new();
        for _ in 0..3 {
            bodies.push(get(server.http_addr, "/count").await.body);
        }
        let want: Vec<String> = (1..=3)
            .map(|i| {
                let instance = if expect_instance_counts { i } else { 1 };
                format!("shared={i} instance={instance}")
            })
            .collect();
        assert_eq!(bodies, want, "settings {settings:?}");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn replacing_a_wasm_file_reloads_the_plugin_and_a_new_one_applies_to_the_stubs_naming_it() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/p"},
         "response": {"body": "{{request.method}}", "transformers": ["swap"]}},
        {"request": {"urlPath": "/later"},
         "response": {"body": "{{request.path}}", "transformers": ["later"]}}
    ]));
    install(dir.path(), "swap", &hostile());
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/p").await.body, "echo /p");
    // Served without the plugin it names until that plugin exists, as WireMock serves
    // a stub whose transformer is not installed.
    assert_eq!(get(addr, "/later").await.body, "{{request.path}}");

    // The bundled response-template, written over the file (through a rename).
    let bytes = decoy_plugin_host::bundled()[0].1;
    let tmp = dir.path().join("plugins/.swap.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.path().join("plugins/swap.wasm")).unwrap();
    std::fs::write(dir.path().join("plugins/later.wasm"), bytes).unwrap();

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let p = get(addr, "/p").await.body;
        let later = get(addr, "/later").await;
        if (p == "GET" && later.body == "/later") || std::time::Instant::now() > deadline {
            assert_eq!(p, "GET");
            assert_eq!(later.body, "/later");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A broken replacement keeps the working version live.
    std::fs::write(dir.path().join("plugins/swap.wasm"), b"garbage").unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(addr, "/p").await.body, "GET");
    server.shutdown().await;
}

#[tokio::test]
async fn mappings_naming_unusable_plugins_are_rejected_with_the_reason_and_unknown_ones_warned_about()
 {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/a"}, "response": {"transformers": ["missing"]}},
        {"request": {"urlPath": "/b"}, "response": {"transformers": ["garbage"]}},
        {"request": {"urlPath": "/c"}, "response": {"transformers": ["json-field-matcher"]}},
        {"request": {"urlPath": "/d", "customMatcher": {"name": "response-template"}}},
        {"request": {"urlPath": "/e"}, "response": {"transformers": "response-template"}},
        {"request": {"urlPath": "/f"}, "response": {"transformers": ["response-template"],
                                                   "transformerParameters": [1]}},
        {"request": {"urlPath": "/ok"}, "response": {"body": "ok"}}
    ]));
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::write(
        dir.path().join("plugins/garbage.wasm"),
        b"\0asm\x01\0\0\0junk",
    )
    .unwrap();
    install(dir.path(), "json-field-matcher", &json_matcher());
    let report = decoy_core::mapping::load::load_root(dir.path()).unwrap();
    let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    let text = problems.join("\n");
    // A name no plugin has is a warning, as WireMock serves such a stub without it.
    assert_eq!(report.mappings.len(), 2, "{text}");
    let warnings: Vec<String> = report.warnings.iter().map(|p| p.to_string()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("response.transformers[0]: no plugin named \"missing\": the stub is served without this transformer")),
        "{warnings:?}"
    );
    for needle in [
        "garbage.wasm is not a usable plugin",
        "plugin \"json-field-matcher\" has no transformer",
        "request.customMatcher.name: plugin \"response-template\" has no matcher",
        "response.transformers: must be a list of plugin names",
        "response.transformerParameters: must be a JSON object",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn plugin_check_reports_worlds_and_refuses_what_it_cannot_run() {
    let r = decoy_plugin_host::check_file(&hostile(), None).unwrap();
    assert!(r.worlds.contains(&"transformer-and-matcher"), "{r:?}");
    let r = decoy_plugin_host::check_file(&json_matcher(), None).unwrap();
    assert_eq!(r.worlds, vec!["matcher-plugin"]);
    assert!(r.imports.iter().any(|i| i.starts_with("wasi:")), "{r:?}");

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, "hello").unwrap();
    let e = decoy_plugin_host::check_file(&junk, None).unwrap_err();
    assert!(e.contains("not a WebAssembly file"), "{e}");
    // A core module (not a component).
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let e = decoy_plugin_host::check_file(&core, None).unwrap_err();
    assert!(e.contains("not a component"), "{e}");
    // A component that exports something else.
    let other = dir.path().join("other.wasm");
    std::fs::write(&other, b"\0asm\x0d\0\x01\0").unwrap();
    let e = decoy_plugin_host::check_file(&other, None).unwrap_err();
    assert!(e.contains("exports neither"), "{e}");
}

#[tokio::test]
async fn a_plugin_built_against_the_first_published_wit_links_and_runs_unchanged() {
    // It does not import what the package gained since (request-info, cache) ...
    let old = decoy_plugin_host::check_file(&old_wit(), None).unwrap();
    assert!(old.worlds.contains(&"transformer-and-matcher"), "{old:?}");
    assert!(
        old.imports.iter().any(|i| i == "decoy:plugin/kv@0.1.0")
            && !old.imports.iter().any(|i| i.contains("request-info"))
            && !old.imports.iter().any(|i| i.contains("cache")),
        "{old:?}"
    );
    // A Rust plugin built against today's WIT that never calls them does not
    // import them either ...
    let matcher = decoy_plugin_host::check_file(&json_matcher(), None).unwrap();
    assert!(
        !matcher
            .imports
            .iter()
            .any(|i| i.contains("request-info") || i.contains("cache")),
        "{matcher:?}"
    );
    // ... and one that uses it does.
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("response-template.wasm");
    let (_, bytes) = decoy_plugin_host::bundled()
        .iter()
        .find(|(n, _)| *n == "response-template")
        .unwrap();
    std::fs::write(&template, bytes).unwrap();
    let new = decoy_plugin_host::check_file(&template, None).unwrap();
    for import in ["request-info", "cache"] {
        assert!(
            new.imports
                .iter()
                .any(|i| *i == format!("decoy:plugin/{import}@0.1.0")),
            "{new:?}"
        );
    }

    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/old", "customMatcher": {"name": "old-wit"}},
         "response": {"status": 200, "body": "unchanged", "transformers": ["old-wit"]}}
    ]));
    install(dir.path(), "old-wit", &old_wit());
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let addr = server.http_addr;
    for n in 1..=2 {
        let a = send(addr, "GET", "/old", &[("x-old", "1")], "").await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (200, format!("old wit: GET /old call {n}").as_str())
        );
    }
    // Its matcher decides too.
    assert_eq!(get(addr, "/old").await.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn templates_get_the_client_address_and_the_machine_name_from_request_info() {
    let stubs = json!([
        {"request": {"urlPath": "/who"},
         "response": {"status": 200, "body": "{{request.clientIp}}|{{hostname}}",
                      "headers": {"X-Client": "{{request.clientIp}}"},
                      "transformers": ["response-template"]}}
    ]);
    let dir = crate::common::root_with_stubs(stubs);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let host = decoy_plugin_host::machine_hostname();
    let a = get(addr, "/who").await;
    assert_eq!(a.body, format!("127.0.0.1|{host}"));
    assert_eq!(a.header("x-client"), Some("127.0.0.1"));
    // WireMock takes a proxy's X-Forwarded-For whole, when there is one.
    let a = send(
        addr,
        "GET",
        "/who",
        &[("X-Forwarded-For", "203.0.113.7, 10.0.0.1")],
        "",
    )
    .await;
    assert_eq!(a.body, format!("203.0.113.7, 10.0.0.1|{host}"));
    server.shutdown().await;
}

#[tokio::test]
async fn an_ipv6_client_ip_is_written_as_wiremocks_jetty_writes_it_and_an_ipv4_one_on_a_dual_stack_listener_as_ipv4()
 {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("no IPv6 loopback here; nothing to check");
        return;
    }
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/who"},
         "response": {"status": 200, "body": "[{{request.clientIp}}]",
                      "transformers": ["response-template"]}}
    ]));
    let mut options = crate::common::options(dir.path());
    options.bind_address = "::".into();
    let server = decoy::server::start(options).await.unwrap();
    let port = server.http_addr.port();
    let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
    assert_eq!(get(v6, "/who").await.body, "[[0:0:0:0:0:0:0:1]]");
    let v4 = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
    if std::net::TcpStream::connect(v4).is_ok() {
        assert_eq!(get(v4, "/who").await.body, "[127.0.0.1]");
    }
    server.shutdown().await;
}
