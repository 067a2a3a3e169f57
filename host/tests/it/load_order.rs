#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Which stub wins a tie, and how `GET /__admin/mappings` lists stubs: the order
//! mapping files are read in (the directory's own order, depth first), and what hot
//! reload does to it. One test compares with real WireMock; it is `#[ignore]`d because
//! it needs `java` and WireMock's jar (the `WIREMOCK_JAR` environment variable), and
//! tests/run.sh runs it with `--ignored` once it has both.

use std::path::Path;
use std::time::Duration;

use crate::common::{get, serve};

/// A few hundred stubs over nested folders, many sharing a URL and a priority.
fn overlapping_root() -> tempfile::TempDir {
    let mut files: Vec<(String, String)> = Vec::new();
    for i in 0..240 {
        let folder = match i % 7 {
            0 => "mappings/zeta/",
            1 => "mappings/alpha/deeper/",
            2 => "mappings/",
            3 => "mappings/m/",
            _ => "mappings/",
        };
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let stub = serde_json::json!({
            "id": id,
            "priority": 1 + i % 3,
            "request": {"method": "GET", "urlPath": format!("/shared/{}", i % 5)},
            "response": {"body": format!("stub {i}")}
        });
        files.push((
            format!("{folder}s-{:x}.json", (i * 2_654_435_761u64) % 100_000),
            stub.to_string(),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    crate::common::root(&refs)
}

fn ids(listing: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(listing).unwrap();
    v["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// WireMock's listing of `root` and its answers to the tied requests.
fn wiremock_listing(root: &Path) -> (String, Vec<String>) {
    let jar = std::env::var_os("WIREMOCK_JAR")
        .filter(|j| Path::new(j).is_file())
        .expect("WIREMOCK_JAR names wiremock-standalone-3.13.2.jar (tests/run.sh sets it when java and npm are available)");
    assert!(
        std::process::Command::new("java")
            .arg("-version")
            .output()
            .is_ok(),
        "java is not installed"
    );
    let port = crate::common::free_port();
    let mut child = std::process::Command::new("java")
        .arg("-jar")
        .arg(&jar)
        .args(["--port", &port.to_string(), "--bind-address", "127.0.0.1"])
        .arg("--root-dir")
        .arg(root)
        .arg("--disable-banner")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("java starts");
    let fetch = |path: &str| -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        // Chunked: WireMock's listing is one chunk or several; join them.
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let mut out = String::new();
            let mut rest = body;
            while let Some((size, after)) = rest.split_once("\r\n") {
                let n = usize::from_str_radix(size.trim(), 16).ok()?;
                if n == 0 {
                    break;
                }
                out.push_str(after.get(..n)?);
                rest = after.get(n + 2..)?;
            }
            return Some(out);
        }
        Some(body.to_owned())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let listing = loop {
        if let Some(l) = fetch("/__admin/mappings") {
            break Some(l);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let answers = (0..5)
        .map(|k| fetch(&format!("/shared/{k}")).unwrap_or_default())
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    (listing.expect("WireMock answered within 90 s"), answers)
}

#[ignore = "runs WireMock 3.13.2: needs java and WIREMOCK_JAR; tests/run.sh sets it and runs this with --ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mappings_listing_and_every_tie_match_real_wiremock_on_the_same_folder() {
    let dir = overlapping_root();
    let server = serve(dir.path()).await;
    let ours = get(server.http_addr, "/__admin/mappings").await;
    assert_eq!(ours.status, 200);
    let our_ids = ids(&ours.body);
    assert_eq!(our_ids.len(), 240);
    let mut our_answers = Vec::new();
    for k in 0..5 {
        our_answers.push(get(server.http_addr, &format!("/shared/{k}")).await.body);
    }
    server.shutdown().await;
    let root = dir.path().to_path_buf();
    let (theirs, their_answers) = tokio::task::spawn_blocking(move || wiremock_listing(&root))
        .await
        .unwrap();
    assert_eq!(our_ids, ids(&theirs), "GET /__admin/mappings order");
    assert_eq!(our_answers, their_answers, "the stub that wins each tie");
}

#[tokio::test]
async fn a_rewritten_file_keeps_its_place_and_a_new_file_is_the_newest_stub() {
    let stub = |body: &str| {
        format!(r#"{{"request": {{"urlPath": "/tie"}}, "response": {{"body": "{body}"}}}}"#)
    };
    let dir = crate::common::root(&[
        ("mappings/a.json", &stub("a")),
        ("mappings/b.json", &stub("b")),
    ]);
    let server = serve(dir.path()).await;
    // Which of the two is read last depends on the directory; that one answers.
    let first = get(server.http_addr, "/tie").await.body;
    let (winner, loser) = if first == "a" { ("a", "b") } else { ("b", "a") };
    // Rewriting the loser does not move it after the winner.
    std::fs::write(
        dir.path().join(format!("mappings/{loser}.json")),
        stub(&format!("{loser}2")),
    )
    .unwrap();
    server
        .store
        .reload_files(&[format!("mappings/{loser}.json").into()]);
    assert_eq!(get(server.http_addr, "/tie").await.body, winner);
    // A new file is the newest stub, and wins.
    std::fs::write(dir.path().join("mappings/0-new.json"), stub("new")).unwrap();
    server.store.rescan(false);
    assert_eq!(get(server.http_addr, "/tie").await.body, "new");
    // ...until a stub is added through the API, which is newer still.
    let posted = crate::common::send(
        server.http_addr,
        "POST",
        "/__admin/mappings",
        &[("Content-Type", "application/json")],
        &stub("api"),
    )
    .await;
    assert_eq!(posted.status, 201);
    assert_eq!(get(server.http_addr, "/tie").await.body, "api");
    server.shutdown().await;
}

#[tokio::test]
async fn a_second_file_with_an_id_already_read_is_not_served_and_is_a_problem() {
    let id = "11111111-2222-4333-8444-555555555555";
    let dir = crate::common::root(&[
        (
            "mappings/one.json",
            &format!(r#"{{"id": "{id}", "request": {{"urlPath": "/one"}}}}"#),
        ),
        (
            "mappings/two.json",
            &format!(r#"{{"id": "{id}", "request": {{"urlPath": "/two"}}}}"#),
        ),
    ]);
    let server = serve(dir.path()).await;
    let listing = get(server.http_addr, "/__admin/mappings").await;
    assert_eq!(ids(&listing.body), [id]);
    let problems = get(server.http_addr, "/__admin/problems").await.body;
    assert!(problems.contains("duplicate stub id"), "{problems}");
    assert!(problems.contains("read earlier"), "{problems}");
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_transformers_missing_body_files_and_two_operators_load_as_in_wiremock() {
    let dir = crate::common::root(&[
        (
            "mappings/t.json",
            r#"{"request": {"urlPath": "/t"}, "response": {"body": "plain", "transformers": ["body-transformer"]}}"#,
        ),
        (
            "mappings/f.json",
            r#"{"request": {"urlPath": "/f"}, "response": {"bodyFileName": "gone.json"}}"#,
        ),
        (
            "mappings/o.json",
            r#"{"request": {"method": "POST", "urlPath": "/o", "bodyPatterns": [{"contains": "zzz", "matchesJsonPath": "$.a"}]}, "response": {"body": "two"}}"#,
        ),
    ]);
    let server = serve(dir.path()).await;
    let t = get(server.http_addr, "/t").await;
    assert_eq!((t.status, t.body.as_str()), (200, "plain"));
    let f = get(server.http_addr, "/f").await;
    assert_eq!(f.status, 500);
    assert!(
        f.body.contains("Not found in blob store: gone.json"),
        "{}",
        f.body
    );
    // The first operator written applies: `contains`.
    let o = crate::common::send(server.http_addr, "POST", "/o", &[], "xzzz").await;
    assert_eq!(o.body, "two");
    let problems = get(server.http_addr, "/__admin/problems").await.body;
    for part in [
        "mappings/t.json: mapping #0: response.transformers[0]: no plugin named \\\"body-transformer\\\"",
        "response-template",
        "mappings/f.json: mapping #0: response.bodyFileName",
        "mappings/o.json: mapping #0: request.bodyPatterns[0]: more than one operator",
    ] {
        assert!(problems.contains(part), "{part} in {problems}");
    }
    let metrics = get(server.http_addr, "/__admin/metrics").await.body;
    assert!(metrics.contains("decoy_mapping_warnings 3"), "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_get_no_stub_matches_is_answered_from_the_files_folder_and_nothing_else() {
    let dir = crate::common::root(&[
        ("__files/page.html", "<p>hi</p>"),
        ("__files/docs/index.html", "index"),
        ("secret.txt", "no"),
        ("mappings/s.json", r#"{"request": {"urlPath": "/stubbed"}}"#),
    ]);
    let server = serve(dir.path()).await;
    let page = get(server.http_addr, "/page.html?x=1").await;
    assert_eq!((page.status, page.body.as_str()), (200, "<p>hi</p>"));
    assert_eq!(page.header("content-type"), Some("text/html"));
    assert_eq!(get(server.http_addr, "/docs/").await.body, "index");
    let head = crate::common::send(server.http_addr, "HEAD", "/page.html", &[], "").await;
    assert_eq!(head.status, 404);
    let post = crate::common::send(server.http_addr, "POST", "/page.html", &[], "").await;
    assert_eq!(post.status, 404);
    assert_eq!(
        get(server.http_addr, "/%2e%2e/secret.txt").await.status,
        404
    );
    assert_eq!(get(server.http_addr, "/missing.html").await.status, 404);
    // A request ending in an empty query is the URL without it.
    assert_eq!(get(server.http_addr, "/stubbed?").await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_names_the_stubs_a_tie_was_decided_against() {
    let dir = crate::common::root(&[
        (
            "mappings/a.json",
            r#"{"name": "broad", "request": {"urlPathPattern": "/tie/.*"}, "response": {"body": "a"}}"#,
        ),
        (
            "mappings/b.json",
            r#"{"request": {"urlPath": "/tie/x"}, "response": {"body": "b"}}"#,
        ),
        (
            "mappings/c.json",
            r#"{"priority": 1, "request": {"urlPath": "/alone"}, "response": {"body": "c"}}"#,
        ),
        (
            "mappings/d.json",
            r#"{"request": {"urlPath": "/alone"}, "response": {"body": "d"}}"#,
        ),
    ]);
    let server = serve(dir.path()).await;
    let tied = get(server.http_addr, "/tie/x").await;
    assert_eq!(tied.status, 200);
    let alone = get(server.http_addr, "/alone").await;
    assert_eq!(alone.body, "c", "priority 1 wins without a tie");
    let journal: serde_json::Value =
        serde_json::from_str(&get(server.http_addr, "/__admin/requests").await.body).unwrap();
    let events = journal["requests"].as_array().unwrap();
    let by_url = |url: &str| {
        events
            .iter()
            .find(|e| e["request"]["url"] == url)
            .unwrap_or_else(|| panic!("{url} in {journal}"))
    };
    let tie = by_url("/tie/x");
    // Only fields of WireMock's own ServeEvent: the tie is a sub-event.
    let fields: Vec<&str> = tie
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    for field in &fields {
        assert!(
            [
                "id",
                "request",
                "responseDefinition",
                "response",
                "wasMatched",
                "timing",
                "subEvents",
                "stubMapping"
            ]
            .contains(field),
            "{field} is not in WireMock's ServeEvent: {tie}"
        );
    }
    let subs = tie["subEvents"].as_array().unwrap();
    assert_eq!(subs.len(), 1, "{tie}");
    assert_eq!(subs[0]["type"], "TIE", "{tie}");
    assert!(subs[0]["timeOffsetNanos"].is_u64(), "{tie}");
    assert!(
        subs[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("also match"),
        "{tie}"
    );
    let losers = subs[0]["data"]["tiedWith"]
        .as_array()
        .expect("tiedWith in the TIE sub-event");
    assert_eq!(losers.len(), 1, "{tie}");
    let loser_file = losers[0]["file"].as_str().unwrap();
    let winner_body = tied.body.as_str();
    // Whichever file the directory listed last won; the other is named.
    let expected_loser = if winner_body == "a" {
        "b.json"
    } else {
        "a.json"
    };
    assert!(loser_file.ends_with(expected_loser), "{tie}");
    assert_eq!(
        by_url("/alone")["subEvents"],
        serde_json::json!([]),
        "a lower priority stub is no tie"
    );
    // The same sub-event when the entry is read by its id.
    let id = tie["id"].as_str().unwrap();
    let one: serde_json::Value = serde_json::from_str(
        &get(server.http_addr, &format!("/__admin/requests/{id}"))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(one["subEvents"], tie["subEvents"], "{one}");
    server.shutdown().await;
}
