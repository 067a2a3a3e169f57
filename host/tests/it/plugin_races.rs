#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A plugin's files replaced while a compilation of them is still running. A test
//! hook ([`decoy_plugin_host::LoadObserver`]) holds one compilation until the test
//! lets it go, so two compilations end in the order a slow machine might end them:
//! the older file's compilation last. Whatever the order, the live code must be the
//! newest file's, a plugin must never stay "loading" once its compilations ended, and
//! the mappings accepted while it compiled must be checked against it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use decoy_plugin_host::{LoadObserver, Plugins};
use serde_json::json;

use crate::common::get;
use crate::plugins::{hostile, json_matcher};

/// Holds the compilations of chosen `.wasm` contents until released, and counts
/// the compilations that began and ended, by SHA-256 of the `.wasm`.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct GateState {
    held: std::collections::HashSet<String>,
    compiling: HashMap<String, usize>,
    finished: HashMap<String, usize>,
}

impl Gate {
    fn hold(&self, sha: &str) {
        self.state.lock().unwrap().held.insert(sha.to_owned());
    }

    fn release(&self, sha: &str) {
        self.state.lock().unwrap().held.remove(sha);
        self.changed.notify_all();
    }

    fn compiling(&self, sha: &str) -> usize {
        *self.state.lock().unwrap().compiling.get(sha).unwrap_or(&0)
    }

    fn finished(&self, sha: &str) -> usize {
        *self.state.lock().unwrap().finished.get(sha).unwrap_or(&0)
    }
}

impl LoadObserver for Gate {
    fn compiling(&self, _plugin: &str, sha256: &str) {
        let mut s = self.state.lock().unwrap();
        *s.compiling.entry(sha256.to_owned()).or_default() += 1;
        while s.held.contains(sha256) {
            s = self.changed.wait(s).unwrap();
        }
    }

    fn finished(&self, _plugin: &str, sha256: &str) {
        *self
            .state
            .lock()
            .unwrap()
            .finished
            .entry(sha256.to_owned())
            .or_default() += 1;
    }
}

fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `wasm` with a custom section appended: another file (another SHA-256) with the
/// same code.
fn with_custom_section(wasm: &[u8], tag: &str) -> Vec<u8> {
    let name = b"decoy-test";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    assert!(payload.len() < 128, "one LEB128 byte");
    let mut out = wasm.to_vec();
    out.push(0);
    out.push(payload.len() as u8);
    out.extend_from_slice(&payload);
    out
}

/// Writes `plugins/<name>.wasm` at once, through a rename, as a deployment would.
fn replace(root: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(root.join("plugins")).unwrap();
    let tmp = root.join(format!("plugins/.{name}.tmp"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, root.join(format!("plugins/{name}.wasm"))).unwrap();
}

/// Waits (at most 30 s: a liveness bound, not a measurement) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Like [`until`], for a condition on an answer of the server.
async fn until_answer(
    addr: std::net::SocketAddr,
    path: &str,
    what: &str,
    ok: impl Fn(&crate::common::Answer) -> bool,
) -> crate::common::Answer {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let a = get(addr, path).await;
        if ok(&a) {
            return a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}; last answer {} {}",
            a.status,
            a.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn plugins_of(server: &decoy::server::Running) -> Arc<Plugins> {
    server.store.context().plugins.clone().unwrap()
}

fn template() -> &'static [u8] {
    decoy_plugin_host::bundled()[0].1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_hot_reload_that_finishes_last_is_not_swapped_in_over_a_newer_file() {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/p"},
         "response": {"body": "{{request.method}}", "transformers": ["swap"]}}
    ]));
    let v1 = std::fs::read(hostile()).unwrap();
    replace(dir.path(), "swap", &v1);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/p").await.body, "echo /p");
    let plugins = plugins_of(&server);
    let gate = Arc::new(Gate::default());
    plugins.observe_loads(gate.clone());

    // The second version's compilation is held...
    let v2 = template();
    gate.hold(&sha256(v2));
    replace(dir.path(), "swap", v2);
    until("the second version compiles", || {
        gate.compiling(&sha256(v2)) > 0
    })
    .await;
    // ...while a third version is written, compiled and published.
    let v3 = with_custom_section(&v1, "v3");
    replace(dir.path(), "swap", &v3);
    let plugin = plugins.get("swap").unwrap();
    until("the third version is live", || {
        plugin.sha256() == Some(sha256(&v3))
    })
    .await;
    assert_eq!(get(addr, "/p").await.body, "echo /p");

    // The second version's compilation ends last: it must not replace the third.
    gate.release(&sha256(v2));
    until("the second version's compilation ends", || {
        gate.finished(&sha256(v2)) > 0
    })
    .await;
    assert_eq!(plugin.sha256(), Some(sha256(&v3)));
    assert_eq!(get(addr, "/p").await.body, "echo /p");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_during_its_first_compilation_has_its_mappings_checked_against_the_newer_file()
 {
    // `late` does not exist at first: the stub is served without it.
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/p"},
         "response": {"body": "{{request.method}}", "transformers": ["late"]}}
    ]));
    // The folder exists before the watch starts: a file written into a folder made
    // after it can come before the watch on that folder (and go unseen).
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/p").await.body, "{{request.method}}");
    let plugins = plugins_of(&server);
    let gate = Arc::new(Gate::default());
    plugins.observe_loads(gate.clone());

    // A transformer arrives; its first compilation is held, so the mapping re-read
    // stops waiting for it and its stub answers 503.
    let v1 = std::fs::read(hostile()).unwrap();
    gate.hold(&sha256(&v1));
    replace(dir.path(), "late", &v1);
    until_answer(addr, "/p", "503 while the plugin compiles", |a| {
        a.status == 503
    })
    .await;
    // It is replaced by a plugin that has only a matcher, which compiles at once.
    let v2 = std::fs::read(json_matcher()).unwrap();
    replace(dir.path(), "late", &v2);
    let plugin = plugins.get("late").unwrap();
    until("the matcher is live", || {
        plugin.sha256() == Some(sha256(&v2))
    })
    .await;
    gate.release(&sha256(&v1));
    until("the first compilation ends", || {
        gate.finished(&sha256(&v1)) > 0
    })
    .await;

    // The mappings accepted while it compiled are checked against what it turned out
    // to be: the stub's file is reported (and its last good version stays live).
    until("the stub naming it as a transformer is reported", || {
        server
            .store
            .problems()
            .0
            .iter()
            .any(|p| p.to_string().contains("plugin \"late\" has no transformer"))
    })
    .await;
    assert_eq!(plugin.sha256(), Some(sha256(&v2)));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_by_a_broken_file_during_its_first_compilation_is_not_served_from_the_older_file()
 {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/p"},
         "response": {"body": "{{request.method}}", "transformers": ["late"]}}
    ]));
    // The folder exists before the watch starts: a file written into a folder made
    // after it can come before the watch on that folder (and go unseen).
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugins = plugins_of(&server);
    let gate = Arc::new(Gate::default());
    plugins.observe_loads(gate.clone());

    let v1 = std::fs::read(hostile()).unwrap();
    gate.hold(&sha256(&v1));
    replace(dir.path(), "late", &v1);
    until_answer(addr, "/p", "503 while the plugin compiles", |a| {
        a.status == 503
    })
    .await;
    let broken = b"\0asm but not a component".to_vec();
    replace(dir.path(), "late", &broken);
    until("the broken file's compilation ends", || {
        gate.finished(&sha256(&broken)) > 0
    })
    .await;
    gate.release(&sha256(&v1));
    until("the first compilation ends", || {
        gate.finished(&sha256(&v1)) > 0
    })
    .await;

    // The file on disk is broken: the stub answers that, never the older file's code,
    // and never "loading" for ever.
    let a = until_answer(addr, "/p", "a 500 naming the broken file", |a| {
        a.status == 500 && a.body.contains("is not a usable plugin")
    })
    .await;
    assert!(a.body.contains("late.wasm"), "{}", a.body);
    until("the stub's file is reported", || {
        server
            .store
            .problems()
            .0
            .iter()
            .any(|p| p.to_string().contains("is not a usable plugin"))
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_compilation_that_fails_after_the_reload_stopped_waiting_answers_500_not_503_for_ever()
 {
    let dir = crate::common::root_with_stubs(json!([
        {"request": {"urlPath": "/p"},
         "response": {"body": "{{request.method}}", "transformers": ["late"]}}
    ]));
    // The folder exists before the watch starts: a file written into a folder made
    // after it can come before the watch on that folder (and go unseen).
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let plugins = plugins_of(&server);
    let gate = Arc::new(Gate::default());
    plugins.observe_loads(gate.clone());

    // A file that fails only after a long compilation (held here).
    let broken = b"\0asm slow to fail".to_vec();
    gate.hold(&sha256(&broken));
    replace(dir.path(), "late", &broken);
    until_answer(addr, "/p", "503 while the plugin compiles", |a| {
        a.status == 503
    })
    .await;
    gate.release(&sha256(&broken));
    until("the compilation ends", || {
        gate.finished(&sha256(&broken)) > 0
    })
    .await;
    let a = until_answer(addr, "/p", "a 500 naming the broken file", |a| {
        a.status != 503
    })
    .await;
    assert_eq!(a.status, 500, "{}", a.body);
    assert!(a.body.contains("is not a usable plugin"), "{}", a.body);
    server.shutdown().await;
}

/// Replaces the file it sees compiled, once, from inside the compilation: a change
/// no watcher reports (as at start, before the watcher runs).
struct ReplaceWhileCompiling {
    file: std::path::PathBuf,
    with: Vec<u8>,
    done: Mutex<bool>,
}

impl LoadObserver for ReplaceWhileCompiling {
    fn compiling(&self, _plugin: &str, _sha256: &str) {
        let mut done = self.done.lock().unwrap();
        if !*done {
            *done = true;
            std::fs::write(&self.file, &self.with).unwrap();
        }
    }
}

#[test]
fn a_file_replaced_while_it_compiles_is_compiled_again_before_its_code_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.wasm");
    std::fs::copy(hostile(), &file).unwrap();
    let plugins = Plugins::new(Some(dir.path().to_path_buf()), None);
    plugins.observe_loads(Arc::new(ReplaceWhileCompiling {
        file,
        with: template().to_vec(),
        done: Mutex::new(false),
    }));
    let plugin = plugins.get("p").unwrap();
    assert_eq!(plugin.sha256(), Some(sha256(template())));
}

/// Panics in the compilation, as a bug in a compiler could.
struct PanicWhileCompiling;

impl LoadObserver for PanicWhileCompiling {
    fn compiling(&self, _plugin: &str, _sha256: &str) {
        panic!("a compiler bug");
    }
}

#[test]
fn a_compilation_that_panics_fails_the_plugin_instead_of_leaving_it_loading() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(hostile(), dir.path().join("p.wasm")).unwrap();
    let plugins = Arc::new(Plugins::new(Some(dir.path().to_path_buf()), None));
    plugins.observe_loads(Arc::new(PanicWhileCompiling));
    let (tx, rx) = std::sync::mpsc::channel();
    let p = plugins.clone();
    std::thread::spawn(move || {
        let _ = tx.send(p.get("p").map(|_| ()));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the load ends");
    let err = result.unwrap_err();
    assert!(err.contains("a compiler bug"), "{err}");
    // Asked again, the same files fail at once with the same reason.
    assert!(plugins.get("p").unwrap_err().contains("a compiler bug"));
}
