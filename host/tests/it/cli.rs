#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `decoy` binary as a user runs it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use crate::common::process::{exit_within, http_get, port_of, ready_line, sigterm};

const TEN_SECONDS: std::time::Duration = std::time::Duration::from_secs(10);

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
fn validate_checks_body_files_against_the_size_serve_will_allow() {
    let dir = root(&[
        (
            "mappings/big.json",
            r#"{"id": "7c1d5b02-0000-4000-8000-000000000001", "request": {"urlPath": "/big"}, "response": {"bodyFileName": "big.txt"}}"#,
        ),
        ("__files/big.txt", "twelve bytes"),
    ]);
    let run = |limit: &str| {
        decoy()
            .args(["validate", "--max-body-file-size", limit, "--root-dir"])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = run("12");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run("11");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("mappings/big.json")
            && text.contains("big.txt: it is 12 bytes, more than the limit of 11 bytes"),
        "{text}"
    );
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
    assert!(text.contains("warning: hello.json: this file is directly in the root directory, where mappings are not read: move it into mappings/ if it is a stub; otherwise keep it outside the root directory"), "{text}");
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
    let line = ready_line(&mut child);
    assert!(line.contains("listening on"), "{line}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn serve_stops_on_sigterm_when_whoever_read_its_stderr_has_gone() {
    // `decoy serve 2>&1 | tee log`, then Ctrl-C: tee dies first. The start-up
    // problems and the "shutting down" line then go to a closed pipe, which must
    // neither end decoy early nor keep it running after the signal.
    let dir = root(&[("mappings/good.json", GOOD), ("mappings/bad.json", BAD)]);
    let mut child = decoy()
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--root-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(http_get(port_of(&line), "/hi").ends_with("hello"));
    sigterm(&child);
    let status =
        exit_within(&mut child, TEN_SECONDS).expect("decoy still running 10 s after SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn serve_goes_on_when_whoever_read_its_stdout_has_gone() {
    // `decoy serve | true`: the ready line goes to a closed pipe.
    let port = crate::common::free_port();
    let dir = root(&[("mappings/good.json", GOOD)]);
    let mut child = decoy()
        .args(["serve", "--bind-address", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg("--root-dir")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut answered = false;
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("decoy exited ({status}) when its stdout was closed: {err}");
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            answered = http_get(port, "/hi").ends_with("hello");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The ready line is written after the listener opens: give it time to be written.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "decoy exited after its ready line"
    );
    assert!(answered, "decoy never answered on port {port}");
    sigterm(&child);
    let status =
        exit_within(&mut child, TEN_SECONDS).expect("decoy still running 10 s after SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn with_json_logs_the_start_up_problems_are_json_lines_too() {
    let dir = root(&[
        ("mappings/good.json", GOOD),
        ("mappings/bad.json", BAD),
        ("stray.json", GOOD),
    ]);
    let (mut child, _port, _line) =
        spawn_on_port_zero(&["serve", "--log-format", "json"], dir.path());
    sigterm(&child);
    exit_within(&mut child, TEN_SECONDS).expect("decoy stops on SIGTERM");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let lines: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let has = |level: &str, text: &str| {
        lines.iter().any(|v| {
            v["level"] == level
                && v["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(text))
        })
    };
    assert!(has("ERROR", "rejected: mappings/bad.json"), "{err}");
    assert!(has("WARN", "stray.json"), "{err}");
    assert!(has("INFO", "decoy: shutting down"), "{err}");
}

#[test]
fn health_quiet_prints_nothing_when_unhealthy_either() {
    let port = crate::common::free_port();
    let out = decoy()
        .args(["health", "-q", "--port"])
        .arg(port.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let out = decoy()
        .args(["health", "--port"])
        .arg(port.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("unhealthy: "),
        "{out:?}"
    );
}

/// `decoy health` with no port, finding the one `pid` serves on; its exit code and
/// output. DECOY_OPTIONS and friends are cleared so only the server's options count.
fn health_of(pid: u32) -> (Option<i32>, String) {
    let out = decoy()
        .args(["health", "--pid", &pid.to_string()])
        .env_remove("DECOY_OPTIONS")
        .env_remove("WIREMOCK_OPTIONS")
        .env_remove("DECOY_HEALTH_PORT")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Starts `decoy serve` with `args` (and `env`) and waits for its ready line.
fn serve_with(args: &[&str], env: &[(&str, &str)], root: &std::path::Path) -> std::process::Child {
    let mut child = decoy()
        .arg("serve")
        .args(args)
        .arg("--root-dir")
        .arg(root)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = ready_line(&mut child);
    assert!(line.contains("listening on"), "{line}");
    child
}

#[test]
fn health_without_a_port_finds_the_one_the_server_was_started_with() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    // As `docker run IMAGE --port N` starts it: the port as an argument.
    let port = crate::common::free_port();
    let mut child = serve_with(
        &["--port", &port.to_string(), "--bind-address", "127.0.0.1"],
        &[],
        dir.path(),
    );
    let (code, out) = health_of(child.id());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with(&format!("healthy: 127.0.0.1:{port} ")),
        "{out}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // `--port=N` from the server's own DECOY_OPTIONS, with an --admin-port that wins.
    let (port, admin) = (crate::common::free_port(), crate::common::free_port());
    let options = format!("--port={port} --admin-port {admin}");
    let mut child = serve_with(
        &["--bind-address", "127.0.0.1"],
        &[("DECOY_OPTIONS", &options)],
        dir.path(),
    );
    let (code, out) = health_of(child.id());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with(&format!("healthy: 127.0.0.1:{admin} ")),
        "{out}"
    );
    // An explicit --port still wins (here: the stub port, which has no admin API).
    let out = decoy()
        .args([
            "health",
            "--pid",
            &child.id().to_string(),
            "--port",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let _ = child.kill();
    let _ = child.wait();
    // HTTPS only: asked over TLS on the HTTPS port (its self-signed certificate).
    let https = crate::common::free_port();
    let mut child = serve_with(
        &[
            "--disable-http",
            "--https-port",
            &https.to_string(),
            "--bind-address",
            "127.0.0.1",
        ],
        &[],
        dir.path(),
    );
    let (code, out) = health_of(child.id());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with(&format!("healthy: 127.0.0.1:{https} ")),
        "{out}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // A server on port 0 cannot be found from its options: said so, exit 1.
    let mut child = serve_with(
        &["--port", "0", "--bind-address", "127.0.0.1"],
        &[],
        dir.path(),
    );
    let (code, out) = health_of(child.id());
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("port 0"), "{out}");
    let _ = child.kill();
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
    let line = ready_line(&mut child);
    let port = port_of(&line);
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
    // Said once: as the error that stops the start, not first as a warning too.
    let said = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(said.matches("was not found").count(), 1, "{said}");

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
    let said = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(said.matches("cannot load").count(), 1, "{said}");
}

// ---- WireMock 3.13.2's command line ----

/// `java -jar wiremock-standalone-3.13.2.jar --help`, with the two defaults that name
/// paths of the machine it ran on shortened.
const WIREMOCK_HELP: &str = include_str!("../../../tests/cli/wiremock-3.13.2-help.txt");

#[derive(Debug, Clone, Copy, PartialEq)]
enum Takes {
    Nothing,
    Value,
    OptionalValue,
}

/// Every option of WireMock's `--help`: its name and whether it takes a value.
fn wiremock_options() -> Vec<(String, Takes)> {
    let mut columns: Vec<String> = Vec::new();
    for line in WIREMOCK_HELP.lines() {
        // The option column is 40 characters wide; a long one goes on below, indented.
        let first: String = line.chars().take(40).collect();
        if first.starts_with("--") && first[2..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            columns.push(first.trim().to_owned());
        } else if first.starts_with("  ")
            && !first.trim().is_empty()
            && let Some(last) = columns.last_mut()
        {
            if !last.ends_with('-') {
                last.push(' ');
            }
            last.push_str(first.trim());
        }
    }
    columns
        .iter()
        .map(|c| {
            let name = c[2..].split_whitespace().next().unwrap().to_owned();
            let takes = if c.contains("<String>") {
                Takes::Value
            } else if c.contains("[String]") {
                Takes::OptionalValue
            } else {
                Takes::Nothing
            };
            (name, takes)
        })
        .collect()
}

/// A value decoy accepts for a WireMock option that takes one.
fn sample_value(name: &str) -> &'static str {
    match name {
        "port" | "https-port" => "0",
        "bind-address" => "127.0.0.1",
        "admin-api-basic-auth" => "user:secret",
        "proxy-all" => "http://127.0.0.1:9",
        "proxy-via" => "127.0.0.1:9",
        "match-headers" => "Accept,X-Tenant",
        "container-threads" => "2",
        "jetty-idle-timeout" | "proxy-timeout" => "30000",
        "max-request-journal-entries" => "100",
        "keystore-type" | "truststore-type" => "pkcs12",
        "filename-template" => "{{{method}}}-{{{url}}}",
        "extensions" => "com.example.Transformer",
        "allow-proxy-targets" | "deny-proxy-targets" => {
            "10.1.2.3,192.168.0.1-192.168.0.9,*.example.com"
        }
        _ => "10",
    }
}

/// Options decoy carries out (the others must say at start that they are ignored).
const CARRIED_OUT: &[&str] = &[
    "port",
    "https-port",
    "bind-address",
    "root-dir",
    "verbose",
    "no-request-journal",
    "max-request-journal-entries",
    "proxy-timeout",
    "global-response-templating",
    "local-response-templating",
    "disable-http",
    "enable-stub-cors",
    "admin-api-basic-auth",
    "admin-api-require-https",
    "proxy-all",
    "preserve-host-header",
    "proxy-via",
    "record-mappings",
    "filename-template",
    "keystore-password",
    "key-manager-password",
    "keystore-type",
    "truststore-password",
    "truststore-type",
    "jetty-idle-timeout",
    "container-threads",
    "webhook-threadpool-size",
    "allow-proxy-targets",
    "deny-proxy-targets",
    "disable-http2-plain",
    "disable-http2-tls",
];

/// Runs `decoy serve ARGS`, waits for its ready line and stops it; returns the ready
/// line and what it printed on stderr, or why it did not start.
fn start_and_stop(args: &[String]) -> Result<(String, String), String> {
    let mut child = decoy()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = ready_line(&mut child);
    let _ = child.kill();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = child.wait();
    if line.contains("listening on") {
        Ok((line, err))
    } else {
        Err(err)
    }
}

#[test]
fn every_wiremock_option_is_accepted_with_wiremock_syntax() {
    let options = wiremock_options();
    assert!(options.len() >= 70, "{options:?}");
    let dir = root(&[("mappings/good.json", GOOD)]);
    let root_dir = dir.path().to_str().unwrap().to_owned();
    // Each option alone, as `--opt value` and as `--opt=value` (bare and `=value`
    // for those whose value is optional), on top of what starts a server on port 0.
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    for (name, takes) in &options {
        if name == "help" || name == "version" {
            continue;
        }
        let value = if name == "root-dir" {
            root_dir.as_str()
        } else {
            sample_value(name)
        };
        let forms: Vec<Vec<String>> = match takes {
            Takes::Nothing => vec![vec![format!("--{name}")]],
            Takes::Value => vec![
                vec![format!("--{name}"), value.to_owned()],
                vec![format!("--{name}={value}")],
            ],
            Takes::OptionalValue => {
                vec![vec![format!("--{name}")], vec![format!("--{name}={value}")]]
            }
        };
        for form in forms {
            let mut args = form;
            for (base, v) in [
                ("port", "0"),
                ("bind-address", "127.0.0.1"),
                ("root-dir", root_dir.as_str()),
            ] {
                if base == name || (base == "port" && name == "disable-http") {
                    continue;
                }
                args.extend([format!("--{base}"), v.to_owned()]);
            }
            // What WireMock's parser requires alongside (the stores are not read
            // without --https-port).
            match name.as_str() {
                "disable-http" => args.extend(["--https-port".into(), "0".into()]),
                "keystore-password" => args.extend(["--https-keystore".into(), "ks.jks".into()]),
                "truststore-password" | "https-require-client-cert" => {
                    args.extend(["--https-truststore".into(), "ts.jks".into()])
                }
                _ => {}
            }
            runs.push((name.clone(), args));
        }
    }
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, args)) = runs.get(i) else {
                        break;
                    };
                    match start_and_stop(args) {
                        Err(err) => failures
                            .lock()
                            .unwrap()
                            .push(format!("decoy serve {}: did not start: {err}", args.join(" "))),
                        Ok((_, err)) => {
                            if !CARRIED_OUT.contains(&name.as_str())
                                && !err.contains(&format!("--{name} is ignored: "))
                            {
                                failures.lock().unwrap().push(format!(
                                    "decoy serve {}: neither carried out nor said to be ignored; stderr: {err}",
                                    args.join(" ")
                                ));
                            }
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn version_and_help_exit_at_once() {
    let out = decoy().args(["serve", "--version"]).output().unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("0."),
        "{out:?}"
    );
    let out = decoy().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--enable-stub-cors",
        "--https-keystore",
        "--proxy-all",
        "--record-mappings",
        "--filename-template",
    ] {
        assert!(text.contains(flag), "{flag} missing from:\n{text}");
    }
}

#[test]
fn bad_option_values_are_refused_naming_the_option_and_the_reason() {
    for (args, expected) in [
        (
            vec!["--admin-api-basic-auth", "no-colon"],
            "--admin-api-basic-auth",
        ),
        (vec!["--container-threads", "0"], "--container-threads"),
        (
            vec!["--max-request-journal-entries", "-5"],
            "--max-request-journal-entries",
        ),
        (vec!["--jetty-idle-timeout", "soon"], "--jetty-idle-timeout"),
        (vec!["--proxy-all", "not a url"], "--proxy-all"),
        (vec!["--proxy-via", "no-port"], "--proxy-via"),
        (vec!["--disable-http"], "--https-port"),
        (
            vec![
                "--https-port",
                "0",
                "--https-keystore",
                "/nonexistent/ks.jks",
            ],
            "--https-keystore",
        ),
        (
            vec!["--record-mappings", "--no-request-journal"],
            "--record-mappings",
        ),
    ] {
        let out = decoy()
            .arg("serve")
            .args(&args)
            .args(["--bind-address", "127.0.0.1", "--root-dir"])
            .arg(root(&[]).path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // WireMock: "The HTTP listener can't have a port set and be disabled".
    let out = decoy()
        .args([
            "serve",
            "--port",
            "1",
            "--disable-http",
            "--https-port",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--disable-http"));
}

#[test]
fn a_filename_template_that_cannot_name_a_file_in_mappings_stops_the_start() {
    for (template, reason) in [
        // WireMock's own check: each part between dashes holds a {{{value}}}.
        ("stub-{{{id}}}.json", "\"stub\" does not"),
        ("{{{id}}}{{#if name}}", "not a valid Handlebars template"),
        // Only dots are left: the folder above mappings/.
        ("{{{nothing}}}..", "\"..\""),
    ] {
        let out = decoy()
            .args(["serve", "--port", "0", "--bind-address", "127.0.0.1"])
            .args(["--filename-template", template, "--root-dir"])
            .arg(root(&[]).path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{template}: {err}");
        assert!(
            err.contains("--filename-template") && err.contains(reason),
            "{template}: {err}"
        );
    }
}

fn raw_request(port: u16, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn header_of<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next().unwrap_or("");
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

#[test]
fn stub_cors_answers_preflights_and_decorates_answers_as_wiremock() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let (mut child, port, _) = spawn_on_port_zero(&["serve", "--enable-stub-cors"], dir.path());
    let pre = raw_request(
        port,
        "OPTIONS /hi HTTP/1.1\r\nHost: x\r\nOrigin: http://ex.com\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: X-Foo, Content-Type\r\nConnection: close\r\n\r\n",
    );
    assert!(pre.starts_with("HTTP/1.1 200 OK"), "{pre}");
    for (name, value) in [
        ("vary", "Origin"),
        ("access-control-allow-origin", "http://ex.com"),
        ("access-control-allow-credentials", "true"),
        ("access-control-max-age", "1800"),
        (
            "access-control-allow-methods",
            "OPTIONS,GET,POST,PUT,PATCH,DELETE",
        ),
        ("access-control-allow-headers", "X-Foo,Content-Type"),
        ("content-length", "0"),
    ] {
        assert_eq!(header_of(&pre, name), Some(value), "{name} in {pre}");
    }
    // A method outside the list: 200 with only Vary.
    let refused = raw_request(
        port,
        "OPTIONS /hi HTTP/1.1\r\nHost: x\r\nOrigin: http://ex.com\r\nAccess-Control-Request-Method: TRACE\r\nConnection: close\r\n\r\n",
    );
    assert!(refused.starts_with("HTTP/1.1 200 OK"), "{refused}");
    assert_eq!(header_of(&refused, "access-control-allow-origin"), None);
    let got = raw_request(
        port,
        "GET /hi HTTP/1.1\r\nHost: x\r\nOrigin: http://ex.com\r\nConnection: close\r\n\r\n",
    );
    assert!(got.ends_with("hello"), "{got}");
    assert_eq!(
        header_of(&got, "access-control-allow-origin"),
        Some("http://ex.com")
    );
    assert_eq!(
        header_of(&got, "access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(header_of(&got, "vary"), Some("Origin"));
    // No origin: no CORS headers but Vary; no preflight: OPTIONS goes to the stubs.
    let plain = http_get(port, "/hi");
    assert_eq!(header_of(&plain, "access-control-allow-origin"), None);
    let options = raw_request(
        port,
        "OPTIONS /hi HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(options.starts_with("HTTP/1.1 404"), "{options}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn admin_basic_auth_and_require_https() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let (mut child, port, _) = spawn_on_port_zero(
        &["serve", "--admin-api-basic-auth", "user:secret"],
        dir.path(),
    );
    let none = http_get(port, "/__admin/health");
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert_eq!(header_of(&none, "content-length"), Some("0"));
    // user:wrong, then user:secret, in base64.
    let wrong = raw_request(
        port,
        "GET /__admin/health HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dXNlcjp3cm9uZw==\r\nConnection: close\r\n\r\n",
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let right = raw_request(
        port,
        "GET /__admin/health HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dXNlcjpzZWNyZXQ=\r\nConnection: close\r\n\r\n",
    );
    assert!(right.starts_with("HTTP/1.1 200"), "{right}");
    // Stubs need no credentials.
    assert!(http_get(port, "/hi").ends_with("hello"));
    child.kill().unwrap();
    let _ = child.wait();

    let (mut child, port, _) = spawn_on_port_zero(
        &["serve", "--admin-api-require-https", "--https-port", "0"],
        dir.path(),
    );
    let plain = http_get(port, "/__admin/health");
    assert!(plain.starts_with("HTTP/1.1 403"), "{plain}");
    assert!(
        plain.contains("\"title\" : \"HTTPS is required for accessing the admin API\""),
        "{plain}"
    );
    child.kill().unwrap();
    let _ = child.wait();
}

/// Waits until `dir` holds a file whose name starts with `prefix`, and returns it.
fn wait_for_file(dir: &std::path::Path, prefix: &str) -> std::path::PathBuf {
    for _ in 0..100 {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    // Written whole before the mapping: give the write a moment.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    return e.path();
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no {prefix}* in {}", dir.display());
}

#[test]
fn proxy_all_forwards_and_record_mappings_writes_what_went_through() {
    let upstream_root = root(&[("mappings/hi.json", GOOD)]);
    let (mut upstream, up_port, _) = spawn_on_port_zero(&["serve"], upstream_root.path());
    let rec = root(&[]);
    let target = format!("http://127.0.0.1:{up_port}");
    let (mut proxy, port, _) = spawn_on_port_zero(
        &[
            "serve",
            "--no-watch",
            "--proxy-all",
            &target,
            "--preserve-host-header",
            "--record-mappings",
            "--match-headers",
            "X-Tenant,Accept",
        ],
        rec.path(),
    );
    let answer = raw_request(
        port,
        "GET /hi HTTP/1.1\r\nHost: original.example:81\r\nX-Tenant: t1\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    // A path the upstream has no stub for: its 404 comes back (and is recorded).
    let missing = http_get(port, "/nothing");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");

    // --preserve-host-header: the upstream saw the client's Host.
    let journal = http_get(up_port, "/__admin/requests");
    assert!(journal.contains("original.example:81"), "{journal}");

    let mapping = wait_for_file(&rec.path().join("mappings"), "mapping-hi-");
    let text = std::fs::read_to_string(&mapping).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(m["request"]["url"], "/hi", "{text}");
    assert_eq!(m["request"]["method"], "GET", "{text}");
    assert_eq!(
        m["request"]["headers"]["X-Tenant"]["equalTo"], "t1",
        "{text}"
    );
    assert!(m["request"]["headers"].get("Accept").is_none(), "{text}");
    assert_eq!(m["response"]["status"], 200, "{text}");
    let body_file = m["response"]["bodyFileName"].as_str().unwrap();
    assert!(body_file.starts_with("body-hi-"), "{text}");
    let body = std::fs::read_to_string(rec.path().join("__files").join(body_file)).unwrap();
    assert_eq!(body, "hello");
    wait_for_file(&rec.path().join("mappings"), "mapping-nothing-");
    // The same request again is not recorded twice.
    raw_request(
        port,
        "GET /hi HTTP/1.1\r\nHost: original.example:81\r\nX-Tenant: t1\r\nConnection: close\r\n\r\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let n = std::fs::read_dir(rec.path().join("mappings"))
        .unwrap()
        .count();
    assert_eq!(n, 2);
    proxy.kill().unwrap();
    upstream.kill().unwrap();
    let _ = (proxy.wait(), upstream.wait());

    // What was recorded serves the same answer without the upstream.
    let (mut replay, port, _) = spawn_on_port_zero(&["serve"], rec.path());
    let again = raw_request(
        port,
        "GET /hi HTTP/1.1\r\nHost: x\r\nX-Tenant: t1\r\nConnection: close\r\n\r\n",
    );
    assert!(again.ends_with("hello"), "{again}");
    replay.kill().unwrap();
    let _ = replay.wait();
}

type ClientIdentity = (
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// `GET /hi` over TLS to `localhost:port`, trusting the PEM certificates `roots`.
fn tls_get(port: u16, roots: &[u8], client: Option<ClientIdentity>) -> Result<String, String> {
    use std::sync::Arc;
    let mut store = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut &roots[..]) {
        store.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store);
    let cfg = match client {
        Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), "localhost".try_into().unwrap()).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"GET /hi HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // A peer that closes without close_notify: what came is still the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn https_port_of(line: &str) -> u16 {
    line.split("https://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no HTTPS port in {line:?}"))
}

fn keytool(args: &[&str]) -> bool {
    match Command::new("keytool").args(args).output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!("keytool {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => false,
    }
}

/// Keystores made by Java's `keytool` (skipped where there is no Java): JKS with a key
/// password of its own, PKCS#12, RSA and EC keys; and a JKS truststore.
#[test]
fn https_keystores_in_jks_and_pkcs12_serve_https() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let stores = [
        ("rsa.jks", "JKS", "RSA", "storepw", "keypass1"),
        ("ec.jks", "JKS", "EC", "storepw", "storepw"),
        ("rsa.p12", "PKCS12", "RSA", "storepw", "storepw"),
        ("ec.p12", "PKCS12", "EC", "storepw", "storepw"),
    ];
    for (file, kind, alg, storepass, keypass) in stores {
        let made = keytool(&[
            "-genkeypair",
            "-alias",
            "server",
            "-keyalg",
            alg,
            "-dname",
            "CN=localhost",
            "-ext",
            "SAN=dns:localhost,ip:127.0.0.1",
            "-validity",
            "3650",
            "-storetype",
            kind,
            "-keystore",
            &p(file),
            "-storepass",
            storepass,
            "-keypass",
            keypass,
        ]);
        if !made {
            crate::common::skip("keytool (Java) is not installed");
            return;
        }
        let cert = p(&format!("{file}.pem"));
        keytool(&[
            "-exportcert",
            "-rfc",
            "-alias",
            "server",
            "-keystore",
            &p(file),
            "-storepass",
            storepass,
            "-file",
            &cert,
        ]);
        let roots = std::fs::read(&cert).unwrap();
        let (mut child, _, line) = spawn_on_port_zero(
            &[
                "serve",
                "--https-port",
                "0",
                "--https-keystore",
                &p(file),
                "--keystore-password",
                storepass,
                "--key-manager-password",
                keypass,
                "--keystore-type",
                kind,
            ],
            dir.path(),
        );
        let answer = tls_get(https_port_of(&line), &roots, None).unwrap();
        assert!(answer.ends_with("hello"), "{file}: {answer}");
        child.kill().unwrap();
        let _ = child.wait();
    }
    // Wrong passwords are named.
    for (args, expected) in [
        (vec!["--keystore-password", "nope"], "--keystore-password"),
        (
            vec!["--keystore-password", "storepw"],
            "--key-manager-password",
        ),
    ] {
        let out = decoy()
            .args([
                "serve",
                "--port",
                "0",
                "--https-port",
                "0",
                "--https-keystore",
                &p("rsa.jks"),
            ])
            .args(&args)
            .args(["--root-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{args:?}: {err}"
        );
    }
}

/// `--https-require-client-cert`: a client certificate issued by one in the truststore
/// (PEM here, and JKS and PKCS#12 made by `keytool` where Java is installed) gets in,
/// a client without one does not.
#[test]
fn https_require_client_cert_checks_against_the_truststore() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let server = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(p("server.pem"), server.cert.pem()).unwrap();
    std::fs::write(p("server.key"), server.key_pair.serialize_pem()).unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    std::fs::write(p("ca.pem"), ca.pem()).unwrap();
    let client_key = rcgen::KeyPair::generate().unwrap();
    let mut client = rcgen::CertificateParams::new(vec!["client".to_owned()]).unwrap();
    client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client = client.signed_by(&client_key, &ca, &ca_key).unwrap();
    let identity = || -> ClientIdentity {
        (
            client.der().clone(),
            rustls::pki_types::PrivateKeyDer::Pkcs8(client_key.serialize_der().into()),
        )
    };
    let mut truststores = vec![(p("ca.pem"), "password")];
    for (file, kind) in [("trust.jks", "JKS"), ("trust.p12", "PKCS12")] {
        if keytool(&[
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            &p("ca.pem"),
            "-storetype",
            kind,
            "-keystore",
            &p(file),
            "-storepass",
            "trustpw",
        ]) {
            truststores.push((p(file), "trustpw"));
        }
    }
    let roots = std::fs::read(p("server.pem")).unwrap();
    for (store, password) in truststores {
        let (mut child, _, line) = spawn_on_port_zero(
            &[
                "serve",
                "--https-port",
                "0",
                "--https-cert",
                &p("server.pem"),
                "--https-key",
                &p("server.key"),
                "--https-require-client-cert",
                "--https-truststore",
                &store,
                "--truststore-password",
                password,
            ],
            dir.path(),
        );
        let port = https_port_of(&line);
        let answer = tls_get(port, &roots, Some(identity())).unwrap();
        assert!(answer.ends_with("hello"), "{store}: {answer}");
        let refused = tls_get(port, &roots, None);
        assert!(
            refused.as_ref().is_err() || refused.as_ref().is_ok_and(|a| !a.contains("hello")),
            "{store}: {refused:?}"
        );
        child.kill().unwrap();
        let _ = child.wait();
    }
}

#[test]
fn disable_http_serves_https_only() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let mut child = decoy()
        .args([
            "serve",
            "--disable-http",
            "--https-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--root-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = ready_line(&mut child);
    assert!(line.contains("listening on https://127.0.0.1:"), "{line}");
    assert!(!line.contains("http://"), "{line}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn jetty_idle_timeout_closes_idle_connections() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    let (mut child, port, _) =
        spawn_on_port_zero(&["serve", "--jetty-idle-timeout", "300"], dir.path());
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /hi HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("hello"));
    // Kept alive, then closed by decoy once idle for 300 ms (well before 5 s).
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let started = std::time::Instant::now();
    assert_eq!(s.read(&mut buf).unwrap(), 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    child.kill().unwrap();
    let _ = child.wait();
}

/// `--proxy-via`: a plain-HTTP target is asked of the proxy in absolute form. decoy
/// itself stands in for the proxy here: it answers an absolute-form request by its path.
#[test]
fn proxy_via_sends_proxied_requests_through_the_proxy() {
    let proxy_root = root(&[("mappings/hi.json", GOOD)]);
    let (mut proxy, proxy_port, _) = spawn_on_port_zero(&["serve"], proxy_root.path());
    let dir = root(&[]);
    let via = format!("user:pw@127.0.0.1:{proxy_port}");
    let (mut child, port, _) = spawn_on_port_zero(
        &[
            "serve",
            "--proxy-all",
            "http://target.invalid:81",
            "--proxy-via",
            &via,
        ],
        dir.path(),
    );
    let answer = http_get(port, "/hi");
    assert!(answer.ends_with("hello"), "{answer}");
    let journal = http_get(proxy_port, "/__admin/requests");
    assert!(journal.contains("target.invalid:81"), "{journal}");
    // user:pw
    assert!(journal.contains("Basic dXNlcjpwdw=="), "{journal}");
    child.kill().unwrap();
    proxy.kill().unwrap();
    let _ = (child.wait(), proxy.wait());
}

/// With its open-file limit used up, decoy backs off accepting, says why, and serves
/// again once descriptors are free.
#[cfg(target_os = "linux")]
#[test]
fn running_out_of_file_descriptors_is_logged_and_survived() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    // A hard limit of 96 descriptors, and a cap above it so accept itself fails.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -n 96 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_decoy"))
        .args(["serve", "--max-connections", "1000", "--no-watch"])
        .args(["--port", "0", "--bind-address", "127.0.0.1", "--root-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = ready_line(&mut child);
    let port = port_of(&line);
    let held: Vec<std::net::TcpStream> = (0..150)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
            write!(
                s,
                "GET /hi HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        });
        if answer.as_deref().is_ok_and(|a| a.ends_with("hello")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "decoy serves again: {answer:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = child.wait();
    assert!(err.contains("out of file descriptors"), "{err}");
}

#[test]
fn the_thread_layout_comes_from_the_option_or_the_environment_and_a_bad_one_is_refused() {
    let dir = root(&[("mappings/good.json", GOOD)]);
    for (args, env) in [
        (vec!["--thread-layout", "stealing"], None),
        (vec![], Some("stealing")),
    ] {
        let mut cmd = decoy();
        cmd.arg("serve")
            .args(&args)
            .args(["--port", "0", "--bind-address", "127.0.0.1", "--root-dir"])
            .arg(dir.path())
            .env_remove("DECOY_THREAD_LAYOUT");
        if let Some(v) = env {
            cmd.env("DECOY_THREAD_LAYOUT", v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} {env:?} started");
        assert!(err.contains("--thread-layout"), "{err}");
        assert!(err.contains("reuseport, dealt, shared"), "{err}");
    }
    // The option wins over the environment.
    for (args, env, expected) in [
        (
            vec!["--thread-layout", "dealt"],
            Some("shared"),
            "on 2 thread(s) (--thread-layout dealt)",
        ),
        (vec![], Some("shared"), "on the shared runtime"),
        (
            vec!["--container-threads", "3"],
            None,
            "on 3 thread(s) (--thread-layout reuseport)",
        ),
    ] {
        let mut cmd = decoy();
        cmd.arg("serve")
            .args(&args)
            .args([
                "--log-level",
                "info",
                "--port",
                "0",
                "--bind-address",
                "127.0.0.1",
            ])
            .arg("--root-dir")
            .arg(dir.path())
            .env_remove("DECOY_THREAD_LAYOUT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if args.is_empty() || args[0] != "--container-threads" {
            cmd.args(["--container-threads", "2"]);
        }
        if let Some(v) = env {
            cmd.env("DECOY_THREAD_LAYOUT", v);
        }
        let mut child = cmd.spawn().unwrap();
        let line = ready_line(&mut child);
        let answer = http_get(port_of(&line), "/hi");
        assert!(answer.ends_with("hello"), "{args:?}: {answer}");
        child.kill().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let _ = child.wait();
        assert!(err.contains(expected), "{args:?} {env:?}: {err}");
    }
}
