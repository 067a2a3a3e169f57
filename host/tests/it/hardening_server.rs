//! Hardening of the server itself: the admin API and the files it touches, the admin
//! token, connections that never speak, the journal's memory, hot reload through a
//! symlinked `mappings/`. Each test is a regression test for a way decoy once broke,
//! run against a real server on a free port.

use std::time::Duration;

use decoy::server::{ServeOptions, start};
use serde_json::{Value, json};

use crate::common::{get, options, root, send};

const STUB: &str = r#"{"request": {"url": "/a"}, "response": {"body": "a"}}"#;

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test]
async fn the_admin_api_refuses_stub_ids_that_are_not_uuids_as_wiremock_does() {
    let dir = root(&[("mappings/a.json", STUB)]);
    let outside = tempfile::tempdir().unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let evil = format!("/../../../../../{}/evil", outside.path().display());
    for key in ["id", "uuid"] {
        let posted = json!({ key: evil, "request": { "url": "/x" }, "response": {} });
        let answer = send(addr, "POST", "/__admin/mappings", &[], &posted.to_string()).await;
        assert_eq!(answer.status, 422, "{}", answer.body);
        let err = &parse(&answer.body)["errors"][0];
        assert_eq!(err["code"], 10, "{}", answer.body);
        assert_eq!(err["title"], "Error parsing JSON", "{}", answer.body);
        assert_eq!(
            err["source"]["pointer"],
            format!("/{key}"),
            "{}",
            answer.body
        );
        assert!(
            err["detail"].as_str().unwrap().contains("is not a UUID"),
            "{}",
            answer.body
        );
    }
    let import = json!({ "mappings": [ { "id": "zzz", "request": {}, "response": {} } ] });
    let answer = send(
        addr,
        "POST",
        "/__admin/mappings/import",
        &[],
        &import.to_string(),
    )
    .await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    // A path id that is not a UUID: WireMock's 400 with its title.
    for method in ["GET", "PUT", "DELETE"] {
        let answer = send(addr, method, "/__admin/mappings/not-a-uuid", &[], "{}").await;
        assert_eq!(answer.status, 400, "{method}: {}", answer.body);
        assert_eq!(
            parse(&answer.body)["errors"][0]["title"],
            "not-a-uuid is not a valid UUID"
        );
    }
    // Upper case is a UUID too, kept in its canonical lower-case form.
    let upper = json!({ "id": "ABCDEF00-0000-0000-0000-00000000000A",
                        "request": { "url": "/x" }, "response": { "body": "x" } });
    let answer = send(addr, "POST", "/__admin/mappings", &[], &upper.to_string()).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(
        parse(&answer.body)["id"],
        "abcdef00-0000-0000-0000-00000000000a"
    );
    let found = get(
        addr,
        "/__admin/mappings/ABCDEF00-0000-0000-0000-00000000000A",
    )
    .await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(
        get(
            addr,
            "/__admin/mappings/abcdef00-0000-0000-0000-00000000000b"
        )
        .await
        .status,
        404
    );
    // Saving writes inside mappings/ only.
    let answer = send(addr, "POST", "/__admin/mappings/save", &[], "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(
        std::fs::read_dir(dir.path().join("mappings"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("abcdef00")),
        "the saved stub is in mappings/"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_file_stub_with_a_non_uuid_id_can_still_be_read_edited_and_removed() {
    let dir = root(&[(
        "mappings/a.json",
        r#"{"id": "cart", "request": {"url": "/a"}, "response": {"body": "a"}}"#,
    )]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/__admin/mappings/cart").await.status, 200);
    let edit = r#"{"request": {"url": "/a"}, "response": {"body": "b"}}"#;
    let answer = send(addr, "PUT", "/__admin/mappings/cart", &[], edit).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(get(addr, "/a").await.body, "b");
    let answer = send(addr, "DELETE", "/__admin/mappings/cart", &[], "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(get(addr, "/a").await.status, 404);
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn the_files_api_refuses_paths_that_lead_outside_files_through_links() {
    let dir = root(&[("mappings/a.json", STUB), ("__files/ok.txt", "ok")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let files = dir.path().join("__files");
    std::os::unix::fs::symlink(outside.path(), files.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), files.join("s.txt")).unwrap();
    // Two links to each other's folders: listing must not walk them forever.
    std::fs::create_dir_all(files.join("x")).unwrap();
    std::fs::create_dir_all(files.join("y")).unwrap();
    std::os::unix::fs::symlink(files.join("y"), files.join("x/to-y")).unwrap();
    std::os::unix::fs::symlink(files.join("x"), files.join("y/to-x")).unwrap();
    std::os::unix::fs::symlink(&files, files.join("self")).unwrap();
    std::fs::write(files.join("x/in-x.txt"), "x").unwrap();
    std::os::unix::fs::symlink(files.join("ok.txt"), files.join("inner.txt")).unwrap();

    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    for (method, path) in [
        ("GET", "/__admin/files/link/secret.txt"),
        ("GET", "/__admin/files/s.txt"),
        ("PUT", "/__admin/files/link/planted.txt"),
        ("PUT", "/__admin/files/link/new/dir/planted.txt"),
        ("DELETE", "/__admin/files/link/secret.txt"),
        ("DELETE", "/__admin/files/s.txt"),
        ("GET", "/__admin/files/..%2F..%2Fetc%2Fpasswd"),
    ] {
        let answer = send(addr, method, path, &[], "planted").await;
        assert_eq!(answer.status, 400, "{method} {path}: {}", answer.body);
        assert!(!answer.body.contains("secret\""), "{}", answer.body);
    }
    let mut left: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["secret.txt"], "nothing written or deleted outside");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret"
    );

    let listing = tokio::time::timeout(Duration::from_secs(20), get(addr, "/__admin/files"))
        .await
        .expect("listing __files ends");
    assert_eq!(listing.status, 200);
    let names: Vec<String> = serde_json::from_str(&listing.body).unwrap();
    assert_eq!(names, ["inner.txt", "ok.txt", "x/in-x.txt"], "{names:?}");
    // A link that stays inside still works.
    assert_eq!(get(addr, "/__admin/files/inner.txt").await.body, "ok");
    server.shutdown().await;
}

#[tokio::test]
async fn the_admin_token_scheme_is_case_insensitive_and_the_token_exact() {
    let dir = root(&[("mappings/a.json", STUB)]);
    let opts = ServeOptions {
        admin_token: Some("s3cret".into()),
        ..options(dir.path())
    };
    let shown = format!("{opts:?}");
    assert!(
        !shown.contains("s3cret"),
        "the token is never printed: {shown}"
    );
    let server = start(opts).await.unwrap();
    let addr = server.http_addr;
    for (header, status) in [
        ("Bearer s3cret", 200),
        ("bearer s3cret", 200),
        ("BEARER s3cret", 200),
        // (Trailing spaces are not part of a header's value on the wire.)
        ("Bearer s3cret x", 401),
        ("Bearer s3cretx", 401),
        ("Bearer  s3cre", 401),
        ("Bearer S3CRET", 401),
        ("Basic s3cret", 401),
        ("Bearer", 401),
    ] {
        let answer = send(
            addr,
            "GET",
            "/__admin/mappings",
            &[("authorization", header)],
            "",
        )
        .await;
        assert_eq!(answer.status, status, "{header:?}");
    }
    server.shutdown().await;
}

#[test]
fn an_open_admin_api_on_a_non_loopback_address_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path());
    assert_eq!(decoy::server::open_admin_warning(&opts), None, "loopback");
    opts.bind_address = "0.0.0.0".into();
    let warning = decoy::server::open_admin_warning(&opts).expect("a warning");
    assert!(warning.contains("without --admin-token"), "{warning}");
    opts.admin_token = Some("t".into());
    assert_eq!(decoy::server::open_admin_warning(&opts), None, "a token");
}

/// Reads until the server closes the connection (EOF or reset); false if it is
/// still open after `within`.
async fn closed_by_server(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_all).await.is_ok()
}

fn with_http(dir: &std::path::Path, f: impl FnOnce(&mut decoy::http::HttpConfig)) -> ServeOptions {
    let mut opts = options(dir);
    f(&mut opts.http);
    opts
}

#[tokio::test]
async fn silent_connections_and_bare_h2_prefaces_are_closed_after_the_idle_timeout() {
    use tokio::io::AsyncWriteExt as _;
    let dir = root(&[(
        "mappings/a.json",
        r#"{"request": {"url": "/slow"}, "response": {"body": "late", "fixedDelayMilliseconds": 1500}}"#,
    )]);
    let server = start(with_http(dir.path(), |h| {
        h.idle_timeout = Duration::from_millis(300)
    }))
    .await
    .unwrap();
    let addr = server.http_addr;
    // Sends nothing at all.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Sends the HTTP/2 preface and its SETTINGS, then no request.
    let mut h2 = tokio::net::TcpStream::connect(addr).await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut silent, Duration::from_secs(20)).await,
        "a silent connection is closed"
    );
    assert!(
        closed_by_server(&mut h2, Duration::from_secs(20)).await,
        "an HTTP/2 connection with no request is closed"
    );
    // A request in flight longer than the idle timeout is still answered.
    let slow = get(addr, "/slow").await;
    assert_eq!((slow.status, slow.body.as_str()), (200, "late"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_request_head_trickled_in_slower_than_the_idle_timeout_is_cut_off() {
    use tokio::io::AsyncWriteExt as _;
    let dir = root(&[("mappings/a.json", STUB)]);
    let server = start(with_http(dir.path(), |h| {
        h.idle_timeout = Duration::from_millis(300)
    }))
    .await
    .unwrap();
    let stream = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    let (mut read, mut write) = stream.into_split();
    // A slowloris: a header byte every 50 ms, never the blank line ending the head.
    let trickle = tokio::spawn(async move {
        write.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n").await?;
        for _ in 0..400 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            write.write_all(b"X").await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let closed = tokio::time::timeout(Duration::from_secs(15), async {
        use tokio::io::AsyncReadExt as _;
        let mut buf = [0u8; 256];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "a head still unfinished after the idle timeout closes its connection, however steadily its bytes arrive"
    );
    trickle.abort();
    // The server still answers a well-behaved client.
    assert_eq!(get(server.http_addr, "/a").await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn past_the_connection_cap_new_connections_are_closed_until_one_ends() {
    let dir = root(&[("mappings/a.json", STUB)]);
    let server = start(with_http(dir.path(), |h| h.max_connections = Some(3)))
        .await
        .unwrap();
    let addr = server.http_addr;
    let mut held = Vec::new();
    for _ in 0..3 {
        // Answered once, so decoy has surely accepted and counted it: with a listener
        // per serving thread, connections made in turn may be accepted out of turn.
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        s.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while !answer.ends_with(b"\r\n\r\na") {
            let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
                .await
                .expect("a held connection is answered")
                .unwrap();
            assert!(n > 0, "a held connection is answered, not closed");
            answer.extend_from_slice(&buf[..n]);
        }
        held.push(s);
    }
    // The kernel completes the handshake; decoy then closes it at once.
    let mut fourth = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_by_server(&mut fourth, Duration::from_secs(20)).await,
        "the connection past the cap is closed"
    );
    drop(held.pop());
    // The freed slot is taken again (the server notices the close asynchronously).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            s.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut out = String::new();
            s.read_to_string(&mut out).await.ok()?;
            Some(out)
        })
        .await;
        if let Ok(Some(out)) = attempt
            && out.starts_with("HTTP/1.1 200")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a connection is served again once one closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn starting_raises_the_open_file_soft_limit_to_the_hard_limit() {
    use rustix::process::{Resource, getrlimit};
    let dir = root(&[("mappings/a.json", STUB)]);
    let server = crate::common::serve(dir.path()).await;
    let after = getrlimit(Resource::Nofile);
    assert_eq!(after.current, after.maximum);
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_keeps_to_its_byte_budget_and_flags_truncated_bodies() {
    let dir = root(&[(
        "mappings/a.json",
        r#"{"request": {"method": "POST", "url": "/up"}, "response": {"body": "ok"}}"#,
    )]);
    let server = start(ServeOptions {
        journal_max_bytes: 1024 * 1024,
        journal_max_body: 64 * 1024,
        ..options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    let body = "b".repeat(300 * 1024);
    for _ in 0..20 {
        assert_eq!(send(addr, "POST", "/up", &[], &body).await.status, 200);
        assert!(
            server.admin.journal.bytes() <= 1024 * 1024,
            "{} bytes kept",
            server.admin.journal.bytes()
        );
    }
    let listed = parse(&get(addr, "/__admin/requests").await.body);
    let requests = listed["requests"].as_array().unwrap();
    // 64 KiB bodies in a 1 MiB budget: the newest dozen or so, far fewer than 20.
    assert!(
        (5..20).contains(&requests.len()),
        "{} entries kept",
        requests.len()
    );
    assert_eq!(listed["meta"]["total"], requests.len());
    assert_eq!(listed["requestJournalDisabled"], false);
    for r in requests {
        let logged = &r["request"];
        assert_eq!(logged["bodyTruncated"], true);
        assert_eq!(logged["bodySize"], 300 * 1024);
        assert_eq!(logged["body"].as_str().unwrap().len(), 64 * 1024);
        assert_eq!(r["response"]["body"], "ok");
        assert!(r["response"].get("bodyTruncated").is_none());
    }
    // The other listings stream the same way and stay valid JSON.
    let found = send(
        addr,
        "POST",
        "/__admin/requests/find",
        &[],
        r#"{"method": "POST"}"#,
    )
    .await;
    assert_eq!(
        parse(&found.body)["requests"].as_array().unwrap().len(),
        requests.len()
    );
    let unmatched = parse(&get(addr, "/__admin/requests/unmatched").await.body);
    assert_eq!(unmatched["requests"], json!([]));
    server.shutdown().await;
}

/// Polls `path` until it answers `body` (a reload is asynchronous); false after 15 s.
async fn eventually_serves(addr: std::net::SocketAddr, path: &str, body: &str) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::time::Instant::now() < deadline {
        let answer = get(addr, path).await;
        if answer.status == 200 && answer.body == body {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn stub_for(path: &str, body: &str) -> String {
    json!({ "request": { "url": path }, "response": { "body": body } }).to_string()
}

/// A Kubernetes ConfigMap mounted as `mappings/`: each key is a link
/// `NAME -> ..data/NAME`, `..data` a link to a hidden, timestamped folder, and an
/// update writes a new such folder and renames a fresh `..data` link over the old
/// one (the kubelet's atomic writer). The new content is served, a removed key's
/// stubs are gone, and nothing is restarted.
#[cfg(unix)]
#[tokio::test]
async fn a_configmap_style_swap_of_a_linked_folder_inside_mappings_is_reloaded() {
    use std::os::unix::fs::symlink;
    let dir = root(&[]);
    let mappings = dir.path().join("mappings");
    let first = mappings.join("..2026_12_06_01_00_00.1");
    std::fs::create_dir_all(&first).unwrap();
    std::fs::write(first.join("a.json"), stub_for("/a", "one")).unwrap();
    std::fs::write(first.join("b.json"), stub_for("/b", "b")).unwrap();
    symlink("..2026_12_06_01_00_00.1", mappings.join("..data")).unwrap();
    for key in ["a.json", "b.json"] {
        symlink(format!("..data/{key}"), mappings.join(key)).unwrap();
    }
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/a").await.body, "one");
    assert_eq!(get(addr, "/b").await.body, "b");

    // The update: a.json changed, b.json removed from the ConfigMap.
    let second = mappings.join("..2026_12_06_01_05_00.2");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("a.json"), stub_for("/a", "two")).unwrap();
    symlink("..2026_12_06_01_05_00.2", mappings.join("..data_tmp")).unwrap();
    std::fs::rename(mappings.join("..data_tmp"), mappings.join("..data")).unwrap();
    std::fs::remove_file(mappings.join("b.json")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();
    assert!(
        eventually_serves(addr, "/a", "two").await,
        "the swapped content is served"
    );
    assert_eq!(get(addr, "/b").await.status, 404, "a removed key is gone");
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn hot_reload_follows_mappings_replaced_by_a_symlink_at_run_time() {
    let dir = root(&[("mappings/a.json", &stub_for("/a", "a"))]);
    let elsewhere = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("b.json"), stub_for("/b", "b")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/a").await.body, "a");

    let mappings = dir.path().join("mappings");
    std::fs::rename(&mappings, dir.path().join("old-mappings")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &mappings).unwrap();
    assert!(
        eventually_serves(addr, "/b", "b").await,
        "the linked folder is loaded"
    );
    // A file added to the linked folder afterwards is loaded too.
    std::fs::write(elsewhere.path().join("c.json"), stub_for("/c", "c")).unwrap();
    assert!(
        eventually_serves(addr, "/c", "c").await,
        "a new file in the linked folder is loaded"
    );
    std::fs::write(elsewhere.path().join("c.json"), stub_for("/c", "c2")).unwrap();
    assert!(
        eventually_serves(addr, "/c", "c2").await,
        "an edit is loaded"
    );

    // The link pointed somewhere else: that folder is watched instead.
    std::fs::write(other.path().join("d.json"), stub_for("/d", "d")).unwrap();
    let tmp_link = dir.path().join("mappings.new");
    std::os::unix::fs::symlink(other.path(), &tmp_link).unwrap();
    std::fs::rename(&tmp_link, &mappings).unwrap();
    assert!(
        eventually_serves(addr, "/d", "d").await,
        "the new target is loaded"
    );
    std::fs::write(other.path().join("e.json"), stub_for("/e", "e")).unwrap();
    assert!(eventually_serves(addr, "/e", "e").await, "and watched");
    assert_eq!(get(addr, "/b").await.status, 404, "the old target is gone");
    server.shutdown().await;
}
