#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end fixture folders under `tests/` at the repository root.
//!
//! - `tests/fixtures/<name>/`: a root directory (`mappings/`, `__files/`) and
//!   `requests.json`, a list of `{request, expect}` pairs sent in order to a real
//!   server. The same folders are replayed against WireMock by
//!   `tests/wiremock-compat.py`, which is how the expected answers are known to be
//!   WireMock's. In an expected body or header, `@HOSTNAME@` stands for this
//!   machine's name (what `{{hostname}}` writes differs from machine to machine).
//! - `tests/invalid/<name>.json`: one bad mapping file; `<name>.err` holds exactly what
//!   loading it reports. Set `DECOY_BLESS=1` to rewrite the `.err` files after an
//!   intended change of wording (and read the diff).
//! - `tests/invalid-mq/<name>/`: a root with bad MQ files (`mq-connections.json`,
//!   `mq-mappings/`); `<name>.err` beside it holds what loading them reports.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn every_fixture_folder_gets_its_expected_answers() {
    let mut ran = 0;
    for dir in sorted_entries(&repo_tests().join("fixtures")) {
        if !dir.is_dir() {
            continue;
        }
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("requests.json")).unwrap())
                .unwrap();
        let server = crate::common::serve(&dir).await;
        assert_eq!(
            server.report.rejected,
            0,
            "{}: {:?}",
            dir.display(),
            server.report.problems
        );
        for (i, case) in cases.iter().enumerate() {
            let req = &case["request"];
            let headers: Vec<(String, String)> = req["headers"]
                .as_object()
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let mut headers = headers;
            let json_body = req.get("json").map(|j| j.to_string());
            if json_body.is_some() {
                headers.push(("content-type", "application/json"));
            }
            let a = crate::common::send(
                server.http_addr,
                req["method"].as_str().unwrap_or("GET"),
                req["url"].as_str().unwrap(),
                &headers,
                json_body
                    .as_deref()
                    .unwrap_or(req["body"].as_str().unwrap_or("")),
            )
            .await;
            let at = format!(
                "{} case {i} ({} {})",
                dir.display(),
                req["method"],
                req["url"]
            );
            let expect = &case["expect"];
            let expected = |v: &Value| {
                v.as_str()
                    .map(|s| s.replace("@HOSTNAME@", decoy_plugin_host::machine_hostname()))
            };
            assert_eq!(
                a.status,
                expect["status"].as_u64().unwrap() as u16,
                "{at}: {}",
                a.body
            );
            if let Some(h) = expect["headers"].as_object() {
                for (k, v) in h {
                    assert_eq!(a.header(k), expected(v).as_deref(), "{at}: header {k}");
                }
            }
            if let Some(body) = expected(&expect["body"]) {
                assert_eq!(a.body, body, "{at}");
            }
            if let Some(expected) = expect.get("json") {
                let actual: Value = serde_json::from_str(&a.body)
                    .unwrap_or_else(|e| panic!("{at}: body is not JSON ({e}): {}", a.body));
                let mut problems = Vec::new();
                json_subset(expected, &actual, "$", &mut problems);
                assert!(problems.is_empty(), "{at}: {problems:?}\n{}", a.body);
            }
            if let Some(parts) = expect["bodyContains"].as_array() {
                for p in parts {
                    assert!(
                        a.body.contains(&expected(p).unwrap()),
                        "{at}: {p} not in\n{}",
                        a.body
                    );
                }
            }
            ran += 1;
        }
        server.shutdown().await;
    }
    assert!(ran > 10, "only {ran} fixture cases ran");
}

/// Where `actual` lacks something `expected` has: objects may have more keys, lists
/// must have the same length (as `subset_problems` in tests/wiremock-compat.py).
fn json_subset(expected: &Value, actual: &Value, at: &str, problems: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                match a.get(k) {
                    Some(av) => json_subset(v, av, &format!("{at}.{k}"), problems),
                    None => problems.push(format!("{at}.{k}: missing")),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                json_subset(ev, av, &format!("{at}[{i}]"), problems);
            }
        }
        (e, a) if e == a => {}
        (e, a) => problems.push(format!("{at}: {a}, expected {e}")),
    }
}

#[test]
fn every_invalid_mapping_is_reported_exactly_as_recorded() {
    let bless = std::env::var_os("DECOY_BLESS").is_some();
    let mut checked = 0;
    for file in sorted_entries(&repo_tests().join("invalid")) {
        if file.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let root = crate::common::root(&[]);
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        std::fs::copy(&file, root.path().join("mappings").join(&name)).unwrap();
        let report = decoy_core::mapping::load::load_root(root.path()).unwrap();
        let mut text = String::new();
        for p in &report.problems {
            text.push_str(&format!("error: {p}\n"));
        }
        for w in &report.warnings {
            text.push_str(&format!("warning: {w}\n"));
        }
        text.push_str(&format!(
            "loaded {}, rejected {}\n",
            report.mappings.len(),
            report.rejected
        ));
        let err_file = file.with_extension("err");
        if bless {
            std::fs::write(&err_file, &text).unwrap();
        }
        let expected = std::fs::read_to_string(&err_file).unwrap_or_else(|_| {
            panic!(
                "{} is missing (run with DECOY_BLESS=1 to create it)",
                err_file.display()
            )
        });
        assert_eq!(text, expected, "{}", file.display());
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} invalid cases");
}

#[test]
fn every_invalid_mq_root_is_reported_exactly_as_recorded() {
    let bless = std::env::var_os("DECOY_BLESS").is_some();
    let mut checked = 0;
    for dir in sorted_entries(&repo_tests().join("invalid-mq")) {
        if !dir.is_dir() {
            continue;
        }
        let load = decoy_mq::config::load(&dir);
        let mut text = String::new();
        for p in &load.problems {
            text.push_str(&format!("error: {p}\n"));
        }
        for w in &load.warnings {
            text.push_str(&format!("warning: {w}\n"));
        }
        text.push_str(&format!(
            "loaded {}, rejected {}\n",
            load.mappings.len(),
            load.rejected
        ));
        let err_file = dir.with_extension("err");
        if bless {
            std::fs::write(&err_file, &text).unwrap();
        }
        let expected = std::fs::read_to_string(&err_file).unwrap_or_else(|_| {
            panic!(
                "{} is missing (run with DECOY_BLESS=1 to create it)",
                err_file.display()
            )
        });
        assert_eq!(text, expected, "{}", dir.display());
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} invalid MQ roots");
}
