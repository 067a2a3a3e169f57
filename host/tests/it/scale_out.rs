//! Several decoy instances sharing state in Redis (`decoy serve --state`), behind
//! HAProxy round-robin, as a team scales a mock out: every part is real and started
//! here on free ports (`redis-server --save ''`, three `decoy serve` processes,
//! `haproxy`). They need the Debian packages `redis-server` and `haproxy`, so they
//! are ignored by a plain `cargo test`; `tests/run.sh` runs them with `--ignored`.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::brokers::{Redis, redis_url};
use crate::common::free_port;
use crate::common::process::{Process, http_get, port_of, ready_line, wait_for_port};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// Starts `decoy serve` and returns it with the port it printed.
fn decoy(root: &Path, args: &[&str]) -> (Process, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--no-watch",
        ])
        .arg("--root-dir")
        .arg(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("decoy starts");
    let port = port_of(&ready_line(&mut child));
    (Process(child), port)
}

fn haproxy(dir: &Path, port: u16, backends: &[u16]) -> Process {
    let mut cfg = format!(
        "global\n  maxconn 4096\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
         frontend lb\n  bind 127.0.0.1:{port}\n  default_backend decoys\n\
         backend decoys\n  balance roundrobin\n"
    );
    for (i, b) in backends.iter().enumerate() {
        cfg.push_str(&format!("  server d{i} 127.0.0.1:{b}\n"));
    }
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg).expect("haproxy.cfg");
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    wait_for_port(port, "haproxy");
    Process(child)
}

/// Redis, three decoys sharing it, HAProxy in front (dropped in this order: the
/// balancer and the decoys before Redis).
struct Cluster {
    _haproxy: Process,
    decoys: Vec<(Process, u16)>,
    lb: u16,
    redis_port: u16,
    redis: Option<Redis>,
    root: tempfile::TempDir,
}

impl Cluster {
    fn start(files: &[(&str, &str)]) -> Cluster {
        Cluster::start_in(crate::common::root(files))
    }

    fn start_in(root: tempfile::TempDir) -> Cluster {
        let redis = Redis::start(free_port());
        let (redis_port, url) = (redis.port, redis.url());
        let decoys: Vec<(Process, u16)> = (0..3)
            .map(|_| decoy(root.path(), &["--state", &url, "--state-timeout", "500"]))
            .collect();
        let lb = free_port();
        let ports: Vec<u16> = decoys.iter().map(|(_, p)| *p).collect();
        let haproxy = haproxy(root.path(), lb, &ports);
        Cluster {
            redis_port,
            redis: Some(redis),
            decoys,
            lb,
            _haproxy: haproxy,
            root,
        }
    }

    fn lb(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.lb))
    }

    /// Instance `i` (1-based, as the tests name them).
    fn instance(&self, i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.decoys[i - 1].1))
    }
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .build_http()
}

/// One request; `Err` when there was no HTTP answer.
async fn call(
    c: &HttpClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(Full::new(Bytes::from(body.to_owned())))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(Duration::from_secs(10), c.request(req))
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

async fn ok(
    c: &HttpClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    call(c, addr, method, path, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path} on {addr}: {e}"))
}

fn stub(path: &str, body: &str) -> String {
    json!({ "request": { "method": "GET", "urlPath": path }, "response": { "body": body } })
        .to_string()
}

/// A scenario of `n` states in a cycle: `Started` → `s1` → … → `s{n-1}` → `Started`,
/// each stub answering the state it was in.
fn cycle(n: usize) -> String {
    let state = |i: usize| {
        if i == 0 {
            "Started".to_owned()
        } else {
            format!("s{i}")
        }
    };
    let stubs: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "scenarioName": "cycle",
                "requiredScenarioState": state(i),
                "newScenarioState": state((i + 1) % n),
                "request": { "method": "GET", "urlPath": "/cycle" },
                "response": { "body": state(i) },
            })
        })
        .collect();
    json!({ "mappings": stubs }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn a_scenario_walked_through_the_load_balancer_1000_times_at_once_answers_as_one_wiremock() {
    const STATES: usize = 7;
    const REQUESTS: usize = 1000;
    let cluster = Cluster::start(&[("mappings/cycle.json", &cycle(STATES))]);
    let c = client();
    let lb = cluster.lb();
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::new();
    for _ in 0..REQUESTS {
        let (c, gate) = (c.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            ok(&c, lb, "GET", "/cycle", "").await
        }));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200, "{body}");
        *seen.entry(body).or_default() += 1;
    }
    // One WireMock takes the transitions one at a time: 1000 requests walk the cycle
    // 142 times and 6 steps more, so each state answers 142 or 143 times, in order.
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..REQUESTS {
        let s = i % STATES;
        let name = if s == 0 {
            "Started".to_owned()
        } else {
            format!("s{s}")
        };
        *expected.entry(name).or_default() += 1;
    }
    assert_eq!(seen, expected);
    // And the scenario ends where one WireMock's would, seen through any instance.
    let end = format!("s{}", REQUESTS % STATES);
    for i in 1..=3 {
        let (_, body) = ok(&c, cluster.instance(i), "GET", "/__admin/scenarios", "").await;
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["scenarios"][0]["state"],
            json!(end),
            "instance {i}: {body}"
        );
    }
    // A reset through one instance is seen by all.
    ok(
        &c,
        cluster.instance(2),
        "POST",
        "/__admin/scenarios/reset",
        "",
    )
    .await;
    assert_eq!(
        ok(&c, cluster.instance(3), "GET", "/cycle", "").await.1,
        "Started"
    );
    assert_eq!(
        ok(&c, cluster.instance(1), "GET", "/cycle", "").await.1,
        "s1"
    );
    ok(
        &c,
        cluster.instance(1),
        "PUT",
        "/__admin/scenarios/cycle/state",
        r#"{"state": "s5"}"#,
    )
    .await;
    assert_eq!(
        ok(&c, cluster.instance(3), "GET", "/cycle", "").await.1,
        "s5"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn a_stub_created_edited_and_removed_through_instance_1_follows_on_instance_3() {
    let cluster = Cluster::start(&[("mappings/static.json", &stub("/static", "file"))]);
    let c = client();
    let (one, three) = (cluster.instance(1), cluster.instance(3));
    let created = ok(
        &c,
        one,
        "POST",
        "/__admin/mappings",
        &json!({ "id": "7d2a4c1e-0000-4000-8000-000000000001", "request": { "urlPath": "/api-stub" }, "response": { "body": "v1" } }).to_string(),
    )
    .await;
    assert_eq!(created.0, 201, "{}", created.1);
    // Announced by pub/sub and applied before the admin call returned on instance 1;
    // instance 3 applies it as it hears it (milliseconds; polled up to 5 s).
    let started = Instant::now();
    let answer = poll(&c, three, "/api-stub", "v1").await;
    eprintln!("stub live on instance 3 after {:?}", started.elapsed());
    assert_eq!(answer, "v1");
    let edited = ok(
        &c,
        one,
        "PUT",
        "/__admin/mappings/7d2a4c1e-0000-4000-8000-000000000001",
        &json!({ "request": { "urlPath": "/api-stub" }, "response": { "body": "v2" } }).to_string(),
    )
    .await;
    assert_eq!(edited.0, 200, "{}", edited.1);
    assert_eq!(poll(&c, three, "/api-stub", "v2").await, "v2");
    let (_, list) = ok(&c, cluster.instance(2), "GET", "/__admin/mappings", "").await;
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list["meta"]["total"], json!(2), "{list}");
    ok(
        &c,
        three,
        "DELETE",
        "/__admin/mappings/7d2a4c1e-0000-4000-8000-000000000001",
        "",
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, _) = ok(&c, one, "GET", "/api-stub", "").await;
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the removal did not reach instance 1"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // File stubs stay local files: every instance still has its own.
    for i in 1..=3 {
        assert_eq!(
            ok(&c, cluster.instance(i), "GET", "/static", "").await.1,
            "file"
        );
    }
    // A fourth instance started now reads the shared list: create, then start it.
    ok(
        &c,
        one,
        "POST",
        "/__admin/mappings",
        &stub("/late", "shared before it started"),
    )
    .await;
    let url = format!("redis://127.0.0.1:{}/0", cluster.redis_port);
    let (_late, port) = decoy(cluster.root.path(), &["--state", &url]);
    let four = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(
        ok(&c, four, "GET", "/late", "").await.1,
        "shared before it started"
    );
}

/// Polls `path` on `addr` until it answers `want` (5 s at most); returns the last body.
async fn poll(c: &HttpClient, addr: SocketAddr, path: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, body) = ok(c, addr, "GET", path, "").await;
        if body == want || Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn the_journal_counted_through_instance_2_covers_every_request_sent_through_the_load_balancer()
 {
    let cluster = Cluster::start(&[("mappings/item.json", &stub("/items/1", "one"))]);
    let c = client();
    let lb = cluster.lb();
    ok(&c, lb, "DELETE", "/__admin/requests", "").await;
    const MATCHED: usize = 300;
    const UNMATCHED: usize = 7;
    for i in 0..MATCHED {
        let (status, _) = ok(&c, lb, "GET", &format!("/items/1?n={i}"), "").await;
        assert_eq!(status, 200);
    }
    for i in 0..UNMATCHED {
        ok(&c, lb, "GET", &format!("/itemz/{i}"), "").await;
    }
    let two = cluster.instance(2);
    let (status, body) = ok(
        &c,
        two,
        "POST",
        "/__admin/requests/count",
        r#"{"method": "GET", "urlPath": "/items/1"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["count"], json!(MATCHED), "{body}");
    // Each instance answered a third; only the fan-in sees them all.
    for i in 1..=3 {
        let (_, all) = ok(&c, cluster.instance(i), "GET", "/__admin/requests", "").await;
        let all: Value = serde_json::from_str(&all).unwrap();
        assert_eq!(
            all["requests"].as_array().map(Vec::len),
            Some(MATCHED + UNMATCHED),
            "instance {i}"
        );
    }
    let (_, found) = ok(
        &c,
        cluster.instance(3),
        "POST",
        "/__admin/requests/find",
        r#"{"method": "GET", "urlPath": "/items/1", "queryParameters": {"n": {"equalTo": "299"}}}"#,
    )
    .await;
    let found: Value = serde_json::from_str(&found).unwrap();
    assert_eq!(
        found["requests"].as_array().map(Vec::len),
        Some(1),
        "{found}"
    );
    let (_, unmatched) = ok(
        &c,
        cluster.instance(1),
        "GET",
        "/__admin/requests/unmatched",
        "",
    )
    .await;
    let unmatched: Value = serde_json::from_str(&unmatched).unwrap();
    assert_eq!(
        unmatched["requests"].as_array().map(Vec::len),
        Some(UNMATCHED)
    );
    let (_, near) = ok(
        &c,
        cluster.instance(2),
        "GET",
        "/__admin/requests/unmatched/near-misses",
        "",
    )
    .await;
    let near: Value = serde_json::from_str(&near).unwrap();
    assert_eq!(
        near["nearMisses"].as_array().map(Vec::len),
        Some(UNMATCHED),
        "{near}"
    );
    // Clearing through one instance clears them all.
    ok(&c, cluster.instance(3), "DELETE", "/__admin/requests", "").await;
    let (_, body) = ok(
        &c,
        two,
        "POST",
        "/__admin/requests/count",
        r#"{"method": "ANY"}"#,
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["count"], json!(0), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn when_redis_restarts_under_load_static_stubs_keep_answering_and_scenarios_answer_503_then_recover()
 {
    let mut cluster = Cluster::start(&[
        ("mappings/static.json", &stub("/static", "static")),
        ("mappings/cycle.json", &cycle(2)),
    ]);
    let c = client();
    let lb = cluster.lb();
    assert_eq!(
        ok(&c, lb, "GET", "/cycle", "").await,
        (200, "Started".into())
    );
    // Load on the static stub for the whole test.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut answered, mut failed) = (0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match call(&c, lb, "GET", "/static", "").await {
                    Ok((200, _)) => answered += 1,
                    other => failed.push(format!("{other:?}")),
                }
            }
            (answered, failed)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(cluster.redis.take()); // killed
    // A scenario request now gets a clear 503 (after at most --state-timeout).
    let (status, body) = ok(&c, cluster.instance(1), "GET", "/cycle", "").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("shared state unavailable"), "{body}");
    // So does an admin change, rather than a stub only this instance would serve.
    let (status, _) = ok(
        &c,
        cluster.instance(2),
        "POST",
        "/__admin/mappings",
        &stub("/x", "x"),
    )
    .await;
    assert_eq!(status, 503);
    // And every admin call that needs the shared state: the journal (all instances'
    // requests), the scenarios, a reset; each failure is counted by what it was for.
    for (method, path, body) in [
        ("GET", "/__admin/requests", ""),
        ("POST", "/__admin/requests/count", r#"{"url": "/cycle"}"#),
        ("GET", "/__admin/scenarios", ""),
        (
            "PUT",
            "/__admin/scenarios/cycle/state",
            r#"{"state": "Started"}"#,
        ),
        ("POST", "/__admin/reset", ""),
    ] {
        let (status, answer) = ok(&c, cluster.instance(2), method, path, body).await;
        assert_eq!(status, 503, "{method} {path}: {answer}");
        assert!(answer.contains("Shared state unavailable"), "{answer}");
    }
    let (_, metrics) = ok(&c, cluster.instance(2), "GET", "/__admin/metrics", "").await;
    for op in ["scenario", "stubs", "journal"] {
        let line = format!("decoy_shared_state_failures_total{{operation=\"{op}\"}} ");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line:?} in {metrics}"));
        assert!(n >= 1, "{line}{n}");
    }
    let (_, metrics) = ok(&c, cluster.instance(1), "GET", "/__admin/metrics", "").await;
    assert!(
        metrics.contains("decoy_shared_state_failures_total{operation=\"scenario\"}"),
        "{metrics}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Redis comes back (empty: --save ''), on the same port.
    cluster.redis = Some(Redis::start(cluster.redis_port));
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 1..=3 {
        loop {
            let (status, body) = ok(&c, cluster.instance(i), "GET", "/__admin/metrics", "").await;
            if status == 200 && body.contains("decoy_shared_state_connected 1") {
                break;
            }
            assert!(Instant::now() < deadline, "instance {i} did not reconnect");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The scenario answers again, from Started (the restarted Redis is empty).
    assert_eq!(
        ok(&c, lb, "GET", "/cycle", "").await,
        (200, "Started".into())
    );
    assert_eq!(ok(&c, lb, "GET", "/cycle", "").await, (200, "s1".into()));
    // And stub changes reach every instance again.
    let (status, _) = ok(
        &c,
        cluster.instance(1),
        "POST",
        "/__admin/mappings",
        &stub("/after", "after"),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(
        poll(&c, cluster.instance(3), "/after", "after").await,
        "after"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (answered, failed) = load.await.unwrap();
    assert!(failed.is_empty(), "static requests failed: {failed:?}");
    assert!(answered > 0);
}

#[test]
#[ignore = "needs redis-server (Debian package); tests/run.sh runs it"]
fn with_redis_down_at_start_decoy_refuses_with_the_reason_unless_told_to_retry() {
    let root = crate::common::root(&[("mappings/s.json", &stub("/s", "s"))]);
    let port = free_port();
    let url = redis_url(port);
    let out = Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--state",
            &url,
        ])
        .arg("--root-dir")
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot connect to the shared state at {url}")),
        "{err}"
    );
    // With --state-retry it serves static stubs meanwhile and connects once Redis is up.
    let (_d, p) = decoy(root.path(), &["--state", &url, "--state-retry"]);
    let get = |path: &str| http_get(p, path);
    assert!(get("/s").ends_with("\r\n\r\ns"), "{}", get("/s"));
    let _redis = Redis::start(port);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !get("/__admin/metrics").contains("decoy_shared_state_connected 1") {
        assert!(
            Instant::now() < deadline,
            "did not connect once Redis was up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn a_plugin_counting_in_kv_counts_the_calls_of_every_instance() {
    let stub = json!({ "request": { "urlPath": "/count" }, "response": {
        "body": "unchanged", "transformers": ["hostile"], "transformerParameters": { "mode": "count" } } });
    let root = crate::common::root(&[("mappings/count.json", &stub.to_string())]);
    crate::plugins::install(root.path(), "hostile", &crate::plugins::hostile());
    let cluster = Cluster::start_in(root);
    let c = client();
    // The plugin answers `shared=<its kv counter> instance=<calls in its memory>`:
    // the kv counter goes up by one per call, whichever instance served it.
    let mut shared = Vec::new();
    for n in 0..9 {
        let (status, body) = ok(&c, cluster.instance(n % 3 + 1), "GET", "/count", "").await;
        assert_eq!(status, 200, "{body}");
        shared.push(
            body.split_whitespace()
                .next()
                .and_then(|w| w.strip_prefix("shared="))
                .map(str::to_owned)
                .unwrap_or(body),
        );
    }
    let expected: Vec<String> = (1..=9).map(|n| n.to_string()).collect();
    assert_eq!(shared, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy (Debian packages); tests/run.sh runs it"]
async fn a_hung_redis_makes_scenario_requests_answer_503_after_the_timeout_and_static_ones_answer()
{
    let cluster = Cluster::start(&[
        ("mappings/static.json", &stub("/static", "static")),
        ("mappings/cycle.json", &cycle(2)),
    ]);
    let c = client();
    let one = cluster.instance(1);
    assert_eq!(
        ok(&c, one, "GET", "/cycle", "").await,
        (200, "Started".into())
    );
    let pid = cluster.redis.as_ref().map(Redis::id).unwrap().to_string();
    let signal = |sig: &str| {
        let status = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(status.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    // Redis holds the connection open and never answers: the call gives up after
    // --state-timeout (500 ms here) and the request gets a 503, not a hang.
    let (status, body) = ok(&c, one, "GET", "/cycle", "").await;
    let (static_status, _) = ok(&c, one, "GET", "/static", "").await;
    signal("-CONT");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("did not answer within"), "{body}");
    assert_eq!(static_status, 200);
    // Once Redis answers again, so do scenario requests. The request that got the
    // 503 had sent its script, which Redis runs when it resumes: that transition
    // happened (docs/scale-out.md says so), so the state is `Started` again unless
    // the script never left this process.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = ok(&c, one, "GET", "/cycle", "").await;
        if status == 200 {
            assert!(body == "Started" || body == "s1", "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "scenario requests did not recover: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs one Redis command over a fresh connection (RESP, as any client would) and
/// returns the reply: a simple string, error (`-ERR ...`), integer or bulk string as
/// text, nil as `(nil)`, an array as its items joined by newlines.
fn redis_cmd(port: u16, args: &[&str]) -> String {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("redis answers");
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    fn reply(r: &mut impl std::io::BufRead) -> String {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" | ":" => rest.to_owned(),
            "-" => format!("-{rest}"),
            "$" if rest == "-1" => "(nil)".to_owned(),
            "$" => {
                let mut body = vec![0; rest.parse::<usize>().unwrap() + 2];
                r.read_exact(&mut body).unwrap();
                String::from_utf8_lossy(&body[..body.len() - 2]).into_owned()
            }
            "*" if rest == "-1" => "(nil)".to_owned(),
            "*" => (0..rest.parse::<usize>().unwrap())
                .map(|_| reply(r))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => panic!("unexpected reply {line:?}"),
        }
    }
    reply(&mut r)
}

/// Polls `path` on `addr` until it answers `want`, for up to `secs`; returns the last body.
async fn poll_for(c: &HttpClient, addr: SocketAddr, path: &str, want: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (_, body) = ok(c, addr, "GET", path, "").await;
        if body == want || Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The number of journal entries for `url_path`, asked through `addr` (fan-in).
async fn count(c: &HttpClient, addr: SocketAddr, url_path: &str) -> u64 {
    let (status, body) = ok(
        c,
        addr,
        "POST",
        "/__admin/requests/count",
        &json!({ "method": "GET", "urlPath": url_path }).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package); tests/run.sh runs it"]
async fn hostile_messages_on_the_shared_channels_neither_wipe_nor_fork_the_instances() {
    let root = crate::common::root(&[("mappings/static.json", &stub("/static", "file"))]);
    let redis_server = Redis::start(free_port());
    let (redis_port, url) = (redis_server.port, redis_server.url());
    let decoys: Vec<(Process, SocketAddr)> = (0..3)
        .map(|_| {
            let (p, port) = decoy(root.path(), &["--state", &url, "--state-timeout", "500"]);
            (p, SocketAddr::from(([127, 0, 0, 1], port)))
        })
        .collect();
    let instance = |i: usize| decoys[i - 1].1;
    let c = client();
    let (one, two, three) = (instance(1), instance(2), instance(3));
    let redis = |args: &[&str]| redis_cmd(redis_port, args);
    let (status, body) = ok(&c, one, "POST", "/__admin/mappings", &stub("/kept", "kept")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(poll(&c, three, "/kept", "kept").await, "kept");
    ok(&c, one, "DELETE", "/__admin/requests", "").await;
    for i in 1..=3 {
        assert_eq!(ok(&c, instance(i), "GET", "/journaled", "").await.0, 404);
    }
    assert_eq!(count(&c, two, "/journaled").await, 3);

    // The messages that wiped and forked every instance: a change numbered past
    // anything stored, in the old format and in the current one.
    let stranger = "6b2b7c1e-0000-4000-8000-0000000000ff";
    let hostile_events = [
        "18446744073709551615\nremove-all\n".to_owned(),
        format!("decoy-state/1\ndecoy\n{stranger}\n18446744073709551615"),
        format!("decoy-state/1\ndecoy\n{stranger}\n3\nremove-all"),
        "x".repeat(100_000),
    ];
    for e in &hostile_events {
        // Each reaches the three instances (the third check below: they heard it).
        assert_eq!(redis(&["PUBLISH", "decoy:events", e]), "3");
    }
    // Journal queries replying into the stubs hash, or clearing with no asker waiting.
    let reply = "decoy:reply:6b2b7c1e-0000-4000-8000-0000000000fe";
    let hostile_queries = [
        json!({ "reply": "decoy:stubs", "op": "collect" }),
        json!({ "v": "decoy-state/1", "deployment": "decoy", "from": stranger, "reply": "decoy:stubs", "op": "collect" }),
        json!({ "v": "decoy-state/1", "deployment": "decoy", "from": stranger, "reply": reply, "op": "clear" }),
        json!({ "op": "clear" }),
    ];
    for q in &hostile_queries {
        assert_eq!(redis(&["PUBLISH", "decoy:control", &q.to_string()]), "3");
    }
    // A real change made after them is heard after them, in order, by every instance:
    // once instance 3 serves it, it has dealt with every message above.
    let (status, body) = ok(
        &c,
        one,
        "POST",
        "/__admin/mappings",
        &stub("/after", "after"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(ok(&c, one, "GET", "/after", "").await.1, "after");
    for i in 1..=3 {
        let addr = instance(i);
        assert_eq!(
            poll(&c, addr, "/after", "after").await,
            "after",
            "instance {i}"
        );
        assert_eq!(
            ok(&c, addr, "GET", "/kept", "").await.1,
            "kept",
            "instance {i}"
        );
        assert_eq!(
            ok(&c, addr, "GET", "/static", "").await.1,
            "file",
            "instance {i}"
        );
    }
    // The stubs hash is untouched and has no lifetime; no reply list was made.
    assert_eq!(redis(&["TYPE", "decoy:stubs"]), "hash");
    assert_eq!(redis(&["TTL", "decoy:stubs"]), "-1");
    assert_eq!(redis(&["HLEN", "decoy:stubs"]), "2");
    assert_eq!(redis(&["EXISTS", reply]), "0");
    // Every journal still holds its request.
    assert_eq!(count(&c, two, "/journaled").await, 3);
    // Nothing out of step, nothing disconnected.
    for i in 1..=3 {
        let (_, problems) = ok(&c, instance(i), "GET", "/__admin/problems", "").await;
        let problems: Value = serde_json::from_str(&problems).unwrap();
        assert_eq!(problems["problems"], json!([]), "instance {i}");
        let (_, metrics) = ok(&c, instance(i), "GET", "/__admin/metrics", "").await;
        assert!(
            metrics.contains("decoy_shared_state_connected 1"),
            "instance {i}"
        );
    }
    // And the journal's own queries still work: a clear through instance 3 clears all.
    assert_eq!(
        ok(&c, three, "DELETE", "/__admin/requests", "").await.0,
        200
    );
    assert_eq!(count(&c, one, "/journaled").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package); tests/run.sh runs it"]
async fn two_deployments_on_one_redis_never_see_each_others_stubs_or_requests() {
    let root = crate::common::root(&[("mappings/static.json", &stub("/static", "file"))]);
    let redis_server = Redis::start(free_port());
    let (redis_port, url) = (redis_server.port, redis_server.url());
    let start = |name: &str| {
        let (p, port) = decoy(root.path(), &["--state", &url, "--state-name", name]);
        (p, SocketAddr::from(([127, 0, 0, 1], port)))
    };
    let ((_b1, blue1), (_b2, blue2)) = (start("blue"), start("blue"));
    let (_g1, green) = start("green");
    let c = client();
    assert_eq!(
        ok(
            &c,
            blue1,
            "POST",
            "/__admin/mappings",
            &stub("/mine", "blue")
        )
        .await
        .0,
        201
    );
    assert_eq!(
        ok(
            &c,
            green,
            "POST",
            "/__admin/mappings",
            &stub("/mine", "green")
        )
        .await
        .0,
        201
    );
    // Shared within a deployment, not across.
    assert_eq!(poll(&c, blue2, "/mine", "blue").await, "blue");
    assert_eq!(ok(&c, green, "GET", "/mine", "").await.1, "green");
    assert_eq!(ok(&c, blue1, "GET", "/mine", "").await.1, "blue");
    assert_eq!(
        ok(
            &c,
            blue1,
            "POST",
            "/__admin/mappings",
            &stub("/blue-only", "b")
        )
        .await
        .0,
        201
    );
    assert_eq!(poll(&c, blue2, "/blue-only", "b").await, "b");
    assert_eq!(ok(&c, green, "GET", "/blue-only", "").await.0, 404);
    // A reset of one deployment leaves the other's stubs.
    assert_eq!(
        ok(&c, green, "POST", "/__admin/mappings/reset", "").await.0,
        200
    );
    assert_eq!(ok(&c, green, "GET", "/mine", "").await.0, 404);
    assert_eq!(ok(&c, blue2, "GET", "/mine", "").await.1, "blue");
    // Journals: each deployment's queries fan in over its own instances only.
    for _ in 0..2 {
        ok(&c, blue1, "GET", "/counted", "").await;
    }
    ok(&c, green, "GET", "/counted", "").await;
    assert_eq!(count(&c, blue2, "/counted").await, 2);
    assert_eq!(count(&c, green, "/counted").await, 1);
    assert_eq!(
        ok(&c, green, "DELETE", "/__admin/requests", "").await.0,
        200
    );
    assert_eq!(count(&c, blue2, "/counted").await, 2);
    // Every key is under its deployment's name; none under the default one.
    let keys = redis_cmd(redis_port, &["KEYS", "*"]);
    assert!(keys.lines().any(|k| k == "blue:stubs"), "{keys}");
    assert!(keys.lines().any(|k| k == "green:stubs:seq"), "{keys}");
    assert!(
        keys.lines()
            .all(|k| k.starts_with("blue:") || k.starts_with("green:")),
        "{keys}"
    );
    // A name that could reach into another deployment's keys is refused at start.
    let out = Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args([
            "serve",
            "--port",
            "0",
            "--state",
            &url,
            "--state-name",
            "blue:reply",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--state-name"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package); tests/run.sh runs it"]
async fn an_instance_behind_the_stored_stubs_catches_up_and_one_cut_off_says_so() {
    let root = crate::common::root(&[("mappings/static.json", &stub("/static", "file"))]);
    let mut redis = Some(Redis::start(free_port()));
    let redis_port = redis.as_ref().unwrap().port;
    let url = redis_url(redis_port);
    let start = || {
        let (p, port) = decoy(root.path(), &["--state", &url, "--state-timeout", "500"]);
        (p, SocketAddr::from(([127, 0, 0, 1], port)))
    };
    let ((_d1, one), (_d2, two)) = (start(), start());
    let c = client();
    let r = |args: &[&str]| redis_cmd(redis_port, args);
    assert_eq!(
        ok(&c, one, "POST", "/__admin/mappings", &stub("/first", "1"))
            .await
            .0,
        201
    );
    assert_eq!(poll(&c, two, "/first", "1").await, "1");
    // A stub stored five changes on, the changes between missing from the log, and
    // its announcement: both instances reread the whole list rather than skip it.
    let seq: u64 = r(&["GET", "decoy:stubs:seq"]).parse().unwrap();
    let stored = |seq: u64, path: &str, body: &str| {
        let id = uuid_for(path);
        let json =
            json!({ "id": id, "request": { "urlPath": path }, "response": { "body": body } });
        assert_eq!(
            r(&["HSET", "decoy:stubs", &id, &format!("{seq}\n{json}")]),
            "1"
        );
        assert_eq!(r(&["SET", "decoy:stubs:seq", &seq.to_string()]), "OK");
    };
    stored(seq + 5, "/gap", "gap");
    let announcement = format!("decoy-state/1\ndecoy\n{}\n{}", uuid_for("someone"), seq + 5);
    r(&["PUBLISH", "decoy:events", &announcement]);
    for addr in [one, two] {
        assert_eq!(poll(&c, addr, "/gap", "gap").await, "gap", "{addr}");
        assert_eq!(ok(&c, addr, "GET", "/first", "").await.1, "1", "{addr}");
    }
    // One stored with no announcement at all is found by the periodic check.
    stored(seq + 6, "/quiet", "quiet");
    for addr in [one, two] {
        assert_eq!(
            poll_for(&c, addr, "/quiet", "quiet", 20).await,
            "quiet",
            "{addr}"
        );
    }
    // Changes made through the API after that follow as usual.
    assert_eq!(
        ok(&c, two, "POST", "/__admin/mappings", &stub("/later", "l"))
            .await
            .0,
        201
    );
    assert_eq!(poll(&c, one, "/later", "l").await, "l");
    // Cut off from Redis, an instance says so: metrics, and a line in problems.
    drop(redis.take());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, problems) = ok(&c, one, "GET", "/__admin/problems", "").await;
        let (_, metrics) = ok(&c, one, "GET", "/__admin/metrics", "").await;
        if problems.contains("shared state") && metrics.contains("decoy_shared_state_connected 0") {
            assert!(problems.contains("not in step"), "{problems}");
            break;
        }
        assert!(Instant::now() < deadline, "no problem listed: {problems}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        ok(&c, one, "POST", "/__admin/mappings", &stub("/x", "x"))
            .await
            .0,
        503
    );
    // Back (empty), it rereads the list and the problem goes away.
    redis = Some(Redis::start(redis_port));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, problems) = ok(&c, one, "GET", "/__admin/problems", "").await;
        let problems: Value = serde_json::from_str(&problems).unwrap();
        if problems["problems"] == json!([]) {
            break;
        }
        assert!(Instant::now() < deadline, "still listed: {problems}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ok(&c, one, "GET", "/gap", "").await.0, 404);
    assert_eq!(ok(&c, one, "GET", "/static", "").await.1, "file");
    drop(redis);
}

/// A stable stub id for a name.
fn uuid_for(name: &str) -> String {
    let mut hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    hex.truncate(12);
    format!("6b2b7c1e-0000-4000-8000-{hex:0<12}")
}
