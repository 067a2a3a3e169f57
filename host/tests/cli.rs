#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `decoy` binary as a user runs it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

fn decoy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_decoy"))
}

fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

const GOOD: &str = r#"{"request": {"method": "GET", "url": "/hi"}, "response": {"body": "hello"}}"#;
const BAD: &str = r#"{"name": "broken", "request": {"urlPattern": "([a-z"}}"#;

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_on_port_zero_prints_the_address_and_counts_then_answers() {
    let dir = root(&[("mappings/good.json", GOOD), ("mappings/sub/bad.json", BAD)]);
    let (mut child, port, line) = spawn_on_port_zero(&["serve"], dir.path());
    assert!(line.contains("listening on http://127.0.0.1:"), "{line}");
    assert!(line.contains("(mappings: 1 loaded, 1 rejected)"), "{line}");
    let answer = http_get(port, "/hi");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    child.kill().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("rejected: mappings/sub/bad.json: mapping #0 (name \"broken\"): request.urlPattern: invalid regular expression"),
        "{err}"
    );
    let _ = child.wait();
}

#[test]
fn strict_serve_refuses_to_start_with_a_rejected_mapping() {
    let dir = root(&[("mappings/good.json", GOOD), ("mappings/bad.json", BAD)]);
    let out = decoy()
        .args(["serve", "--strict", "--port", "0", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 mapping(s) rejected and --strict is set"),
        "{err}"
    );
    assert!(err.contains("mappings/bad.json"), "{err}");
}

#[test]
fn validate_exits_non_zero_and_lists_every_problem() {
    let dir = root(&[
        ("mappings/good.json", GOOD),
        ("mappings/bad.json", BAD),
        ("mappings/not-json.json", "{ nope"),
        (
            "mappings/typo.json",
            r#"{"request": {"urlPath": "/t", "hedaers": {}}}"#,
        ),
    ]);
    let out = decoy()
        .args(["validate", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error: mappings/bad.json: mapping #0 (name \"broken\"): request.urlPattern"),
        "{text}"
    );
    assert!(
        text.contains(
            "error: mappings/not-json.json: not valid JSON: key must be a string at line 1 column 3"
        ),
        "{text}"
    );
    assert!(text.contains("warning: mappings/typo.json: mapping #0: request.hedaers: unknown field, ignored (did you mean \"headers\"?)"), "{text}");
    assert!(
        text.contains("4 file(s): 2 mapping(s) valid, 2 rejected, 1 warning(s)"),
        "{text}"
    );
}

#[test]
fn validate_passes_a_clean_root_and_strict_fails_on_warnings() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let out = decoy()
        .args(["validate", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dir = root(&[(
        "mappings/typo.json",
        r#"{"request": {"urlPath": "/t"}, "respons": {}}"#,
    )]);
    let out = decoy()
        .args(["validate", "--strict", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn validate_fails_when_it_finds_no_mapping_at_all() {
    // Files put directly in the root, not in mappings/: nothing is read.
    let dir = root(&[("hello.json", GOOD)]);
    let out = decoy()
        .args(["validate", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("warning: hello.json: this file is directly in the root directory, where mappings are not read: move it to mappings/hello.json"), "{text}");
    assert!(text.contains("error: no mapping files found"), "{text}");
}

#[test]
fn a_missing_root_directory_is_a_clear_error() {
    let out = decoy()
        .args(["validate", "--root-dir", "/nonexistent/decoy-root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("root directory /nonexistent/decoy-root does not exist"),
        "{err}"
    );
}

#[test]
fn help_explains_the_flags() {
    let out = decoy().args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--root-dir",
        "--port",
        "--bind-address",
        "--https-port",
        "--verbose",
        "--strict",
    ] {
        assert!(text.contains(flag), "{flag} missing from:\n{text}");
    }
}

#[test]
fn wiremock_runner_flags_are_accepted() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let mut child = decoy()
        .args([
            "serve",
            "--port",
            "0",
            "--no-request-journal",
            "--disable-request-logging",
            "--async-response-enabled=true",
            "--disable-banner",
            "--root-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "{line}");
    child.kill().unwrap();
    let _ = child.wait();
}

/// Starts `decoy ARGS --port 0 --bind-address 127.0.0.1`; returns the process, the
/// port it chose and its ready line.
fn spawn_on_port_zero(args: &[&str], root: &std::path::Path) -> (std::process::Child, u16, String) {
    let mut child = decoy()
        .args(args)
        .args(["--port", "0", "--bind-address", "127.0.0.1", "--root-dir"])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (child, port, line)
}

#[test]
fn record_forwards_to_the_target_and_writes_mappings_when_stopped() {
    let upstream_root = root(&[("mappings/hi.json", GOOD)]);
    let (mut upstream, up_port, _) = spawn_on_port_zero(&["serve"], upstream_root.path());
    let parent = root(&[]);
    // A recording folder that does not exist yet is made.
    let recorded = parent.path().join("recorded");
    let target = format!("http://127.0.0.1:{up_port}");
    let (mut recorder, port, _) = spawn_on_port_zero(&["record", "--target", &target], &recorded);
    let through = http_get(port, "/hi");
    assert!(through.ends_with("hello"), "{through}");
    // A graceful stop (SIGTERM, as from Ctrl-C or a process manager) writes the files.
    let status = Command::new("kill")
        .args(["-TERM", &recorder.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(recorder.wait().unwrap().success());
    let mut err = String::new();
    recorder
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("recorded 1 mapping(s)"), "{err}");
    upstream.kill().unwrap();
    // The recorded stub replays the target's headers (with its Date, as WireMock
    // records it), not decoy's own or the framing.
    let files: Vec<_> = std::fs::read_dir(recorded.join("mappings"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(
        files[0].to_ascii_lowercase().contains("\"date\""),
        "{}",
        files[0]
    );
    for header in ["matched-stub-id", "content-length"] {
        assert!(
            !files[0].to_ascii_lowercase().contains(header),
            "{header} in {}",
            files[0]
        );
    }

    let (mut replay, port, _) = spawn_on_port_zero(&["serve"], &recorded);
    let answer = http_get(port, "/hi");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    replay.kill().unwrap();
}

#[test]
fn validate_checks_mq_files_with_the_file_mapping_field_and_reason() {
    let dir = root(&[
        ("mappings/good.json", GOOD),
        (
            "mq-connections.json",
            r#"[{"connectionId": "rabbit", "connectionData": {"type": "amqp", "uri": "amqp://guest:guest@127.0.0.1:5672/%2f"}}]"#,
        ),
        (
            "mq-mappings/ok.json",
            r#"{"request": {"destination": {"name": "Q1", "type": "QUEUE"}}, "response": {"text": "ok"}}"#,
        ),
        (
            "mq-mappings/bad.json",
            r#"{"mappingId": "m-2", "connectionId": "nope", "request": {"destination": {"name": "Q2"}, "bodyMatcher": {"equalsTo": "x"}}}"#,
        ),
    ]);
    let out = decoy()
        .args(["validate", "--root-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: mq-mappings/bad.json: mapping #0 (id m-2): connectionId: \"nope\" is not a connection in mq-connections.json (known: rabbit)"),
        "{text}"
    );
    assert!(
        text.contains("error: mq-mappings/bad.json: mapping #0 (id m-2): request.bodyMatcher.equalsTo: unknown operator"),
        "{text}"
    );
    assert!(
        text.contains("MQ: 1 connection(s), 1 mapping(s) valid, 1 rejected"),
        "{text}"
    );
}

/// `decoy serve` of `root` with `MQ_INSTALLATION_PATH` at `root/mq` (and no
/// `LD_LIBRARY_PATH`), run until it exits.
fn serve_with_mq_installation(root: &std::path::Path, mq: &str) -> std::process::Output {
    decoy()
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--no-watch",
            "--root-dir",
        ])
        .arg(root)
        .env("MQ_INSTALLATION_PATH", root.join(mq))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap()
}

#[test]
fn serve_with_an_ibm_mq_connection_says_where_it_looked_for_the_client_library() {
    let dir = root(&[
        (
            "ibm-mq-connections.json",
            r#"[{"connectionId": "1", "connectionName": "Local Docker MQ 9",
                 "connectionData": {"ibmMqVersion": "IBM_MQ_9", "hostname": "localhost", "port": 1414,
                                    "queueManager": "QM1", "channel": "DEV.APP.SVRCONN", "username": "app",
                                    "password": "", "useMQCSPAuthenticationMode": false,
                                    "readConnectionsToOpen": 5, "writeConnectionsToOpen": 5,
                                    "sslCipherSuite": null, "sslPeerName": null}}]"#,
        ),
        (
            "ibm-mq-mappings/quote.json",
            r#"{"mappingId": "3bc18f0b-9d95-4af1-a2f8-848210b2d8a1",
                "request": {"destination": {"name": "DEV.QUEUE.1", "type": "QUEUE"}, "bodyMatcher": {"anything": "anything"}},
                "response": {"destination": {"name": "DEV.QUEUE.2", "type": "QUEUE"},
                             "ibmMqResponseTransformerClassName": "NO_TRANSFORMER",
                             "format": "MQFMT_STRING", "text": "", "fixedDelayMilliseconds": 0},
                "receiveThreads": 5, "sendThreads": 5}"#,
        ),
    ]);
    let out = serve_with_mq_installation(dir.path(), "no-mq-here");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the IBM MQ client library (libmqm_r.so) was not found"),
        "{err}"
    );
    assert!(err.contains("no-mq-here/lib64"), "{err}");
    assert!(err.contains("/opt/mqm/lib64"), "{err}");
    assert!(err.contains("MQ_INSTALLATION_PATH"), "{err}");

    // A file of that name that is not a loadable library: said as plainly.
    let lib = dir.path().join("bad-mq/lib64");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libmqm_r.so"), "not a library").unwrap();
    let out = serve_with_mq_installation(dir.path(), "bad-mq");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is an IBM MQ connection: cannot load")
            && err.contains("bad-mq/lib64/libmqm_r.so"),
        "{err}"
    );
}
