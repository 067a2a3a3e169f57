#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The stub files decoy writes and deletes (persistent stubs, `POST
//! /__admin/mappings/save`), against real servers on port 0: nothing is written or
//! deleted outside `mappings/` through a symbolic link (a linked file, a linked
//! folder), while reading through links keeps working; a new stub file never replaces
//! another file (a stub's, a list file, a file that is no stub) whatever
//! `--filename-template` says; links that stay inside (a Kubernetes ConfigMap) are
//! read and written through; and the client is told what was not done, a save that
//! stops halfway included. The recorded-stub case is in `filenames.rs`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use crate::common::{admin, get};
use decoy::server::{Running, ServeOptions, start};
use decoy_core::filenames::FilenameMaker;
use serde_json::{Value, json};

fn files(root: &Path) -> BTreeSet<String> {
    crate::common::file_names(&root.join("mappings"))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn stub_in(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap()
}

async fn serve_with(root: &Path, template: Option<&str>) -> Running {
    let filenames = template.map_or_else(FilenameMaker::default, |t| {
        FilenameMaker::from_option(t).unwrap()
    });
    start(ServeOptions {
        filenames,
        ..crate::common::options(root)
    })
    .await
    .unwrap()
}

fn stub(id: &str, url: &str, body: &str, persistent: bool) -> Value {
    json!({"id": id, "persistent": persistent,
           "request": {"method": "GET", "url": url}, "response": {"body": body}})
}

/// The `detail` of an admin error answer.
fn detail(v: &Value) -> String {
    v["errors"][0]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn total(addr: SocketAddr) -> u64 {
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    list["meta"]["total"].as_u64().unwrap()
}

const LINKED: &str = "11111111-0000-4000-8000-00000000000a";
const IN_FOLDER: &str = "11111111-0000-4000-8000-00000000000b";

/// A root whose `mappings/link.json` links to a stub file elsewhere and whose
/// `mappings/sub` links to a folder elsewhere holding `a.json`; returns the root and
/// the folder elsewhere.
#[cfg(unix)]
fn linked_root(persistent: bool) -> (tempfile::TempDir, tempfile::TempDir) {
    let elsewhere = tempfile::tempdir().unwrap();
    let ext = elsewhere.path();
    std::fs::write(
        ext.join("t.json"),
        stub(LINKED, "/l", "outside file", persistent).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(ext.join("folder")).unwrap();
    std::fs::write(
        ext.join("folder/a.json"),
        stub(IN_FOLDER, "/s", "outside folder", persistent).to_string(),
    )
    .unwrap();
    let dir = crate::common::root(&[]);
    let mappings = dir.path().join("mappings");
    std::os::unix::fs::symlink(ext.join("t.json"), mappings.join("link.json")).unwrap();
    std::os::unix::fs::symlink(ext.join("folder"), mappings.join("sub")).unwrap();
    (dir, elsewhere)
}

#[cfg(unix)]
#[tokio::test]
async fn stubs_read_through_links_leading_outside_are_served_but_their_files_are_never_written_or_deleted()
 {
    let (dir, elsewhere) = linked_root(true);
    let outside_file = elsewhere.path().join("t.json");
    let outside_in_folder = elsewhere.path().join("folder/a.json");
    let (before_file, before_folder) = (read(&outside_file), read(&outside_in_folder));
    let server = serve_with(dir.path(), None).await;
    let addr = server.http_addr;
    // Reading through links works.
    assert_eq!(get(addr, "/l").await.body, "outside file");
    assert_eq!(get(addr, "/s").await.body, "outside folder");

    // An edit of the stub from the linked file: refused on disk, with the file and
    // the reason; served from memory, as for any file that cannot be written.
    let (status, v) = admin(
        addr,
        "PUT",
        &format!("/mappings/{LINKED}"),
        stub(LINKED, "/l", "edited", true),
    )
    .await;
    assert_eq!(status, 500, "{v}");
    let d = detail(&v);
    assert!(d.contains("mappings/link.json"), "{d}");
    assert!(d.contains("resolves outside mappings/"), "{d}");
    assert!(d.contains("served all the same"), "{d}");
    assert_eq!(read(&outside_file), before_file);
    assert_eq!(get(addr, "/l").await.body, "edited");

    // The same through the linked folder.
    let (status, v) = admin(
        addr,
        "PUT",
        &format!("/mappings/{IN_FOLDER}"),
        stub(IN_FOLDER, "/s", "edited", true),
    )
    .await;
    assert_eq!(status, 500, "{v}");
    assert!(detail(&v).contains("mappings/sub/a.json"), "{v}");
    assert_eq!(read(&outside_in_folder), before_folder);

    // Deleting either: refused, the file outside stays, and so does the stub.
    for (id, file) in [
        (LINKED, "mappings/link.json"),
        (IN_FOLDER, "mappings/sub/a.json"),
    ] {
        let (status, v) = admin(addr, "DELETE", &format!("/mappings/{id}"), Value::Null).await;
        assert_eq!(status, 500, "{v}");
        let d = detail(&v);
        assert!(d.contains(file), "{d}");
        assert!(d.contains("does not delete"), "{d}");
        assert!(d.contains("still served"), "{d}");
    }
    assert_eq!(read(&outside_file), before_file);
    assert_eq!(read(&outside_in_folder), before_folder);
    assert_eq!(get(addr, "/s").await.body, "edited");
    // DELETE /__admin/mappings removes every stub from what is served, and still
    // deletes nothing outside.
    let (status, _) = admin(addr, "DELETE", "/mappings", Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(total(addr).await, 0);
    assert_eq!(read(&outside_file), before_file);
    assert_eq!(read(&outside_in_folder), before_folder);
    assert!(dir.path().join("mappings/link.json").exists());
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn save_checks_every_stub_first_and_writes_nothing_outside_mappings() {
    let (dir, elsewhere) = linked_root(false);
    let root = dir.path();
    let outside_file = elsewhere.path().join("t.json");
    let outside_in_folder = elsewhere.path().join("folder/a.json");
    let (before_file, before_folder) = (read(&outside_file), read(&outside_in_folder));
    let server = serve_with(root, Some("{{{name}}}")).await;
    let addr = server.http_addr;
    let one = "11111111-0000-4000-8000-000000000001";
    let (status, v) = admin(
        addr,
        "POST",
        "/mappings",
        json!({"id": one, "name": "one", "request": {"url": "/one"}, "response": {"body": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{v}");

    // Unedited stubs whose files lead outside are on disk as they are served: save
    // leaves them, and writes the API stub inside.
    let (status, v) = admin(addr, "POST", "/mappings/save", Value::Null).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(files(root), set(&["link.json", "one", "sub"]));
    assert_eq!(stub_in(&root.join("mappings/one"))["persistent"], true);
    assert_eq!(read(&outside_file), before_file);
    assert_eq!(read(&outside_in_folder), before_folder);

    // An edit of the linked stub (in memory), and a stub the template names no file
    // for: the save is refused as a whole, naming both, and writes nothing.
    let (status, _) = admin(
        addr,
        "PUT",
        &format!("/mappings/{LINKED}"),
        stub(LINKED, "/l", "edited", false),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = admin(
        addr,
        "POST",
        "/mappings",
        json!({"request": {"url": "/nameless"}, "response": {"body": "n"}}),
    )
    .await;
    assert_eq!(status, 201);
    let (status, v) = admin(addr, "POST", "/mappings/save", Value::Null).await;
    assert_eq!(status, 500, "{v}");
    let d = detail(&v);
    assert!(d.starts_with("nothing was written"), "{d}");
    assert!(d.contains("mappings/link.json"), "{d}");
    assert!(d.contains("no file name"), "{d}");
    assert_eq!(files(root), set(&["link.json", "one", "sub"]));
    assert_eq!(read(&outside_file), before_file);
    assert_eq!(read(&outside_in_folder), before_folder);
    // Everything is still served as it was.
    assert_eq!(get(addr, "/l").await.body, "edited");
    assert_eq!(get(addr, "/nameless").await.body, "n");
    assert_eq!(get(addr, "/one").await.body, "1");
    server.shutdown().await;
}

#[tokio::test]
async fn two_persistent_stubs_given_the_same_file_name_each_keep_a_file_of_their_own() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let template = Some("{{{method}}}-{{{url}}}.json");
    let server = serve_with(root, template).await;
    let addr = server.http_addr;
    let first = "11111111-0000-4000-8000-000000000001";
    let second = "11111111-0000-4000-8000-000000000002";
    // A scenario's two states: the same method and URL.
    for (id, state, next, body) in [
        (first, "Started", Some("done"), "to do"),
        (second, "done", None, "done"),
    ] {
        let mut s = json!({"id": id, "persistent": true, "scenarioName": "todo",
            "requiredScenarioState": state,
            "request": {"method": "GET", "url": "/todo"}, "response": {"body": body}});
        if let Some(n) = next {
            s["newScenarioState"] = json!(n);
        }
        let (status, v) = admin(addr, "POST", "/mappings", s).await;
        assert_eq!(status, 201, "{v}");
    }
    assert_eq!(files(root), set(&["get-todo.json", "get-todo-2.json"]));
    assert_eq!(stub_in(&root.join("mappings/get-todo.json"))["id"], first);
    assert_eq!(
        stub_in(&root.join("mappings/get-todo-2.json"))["id"],
        second
    );
    assert_eq!(get(addr, "/todo").await.body, "to do");
    assert_eq!(get(addr, "/todo").await.body, "done");
    server.shutdown().await;

    // Both are there after a restart.
    let server = serve_with(root, template).await;
    let addr = server.http_addr;
    assert_eq!(total(addr).await, 2);
    assert_eq!(get(addr, "/todo").await.body, "to do");
    assert_eq!(get(addr, "/todo").await.body, "done");
    // Each takes its own file with it.
    let (status, _) = admin(addr, "DELETE", &format!("/mappings/{second}"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&["get-todo.json"]));
    assert_eq!(stub_in(&root.join("mappings/get-todo.json"))["id"], first);
    server.shutdown().await;
}

#[tokio::test]
async fn a_persistent_stub_never_replaces_a_list_file_of_the_same_name() {
    let list = json!({"mappings": [
        {"request": {"url": "/l1"}, "response": {"body": "l1"}},
        {"request": {"url": "/l2"}, "response": {"body": "l2"}}
    ]})
    .to_string();
    let dir = crate::common::root(&[("mappings/list.json", &list)]);
    let root = dir.path();
    let server = serve_with(root, Some("{{{name}}}.json")).await;
    let addr = server.http_addr;
    let (status, v) = admin(
        addr,
        "POST",
        "/mappings",
        json!({"name": "list", "persistent": true,
               "request": {"url": "/l3"}, "response": {"body": "l3"}}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(read(&root.join("mappings/list.json")), list);
    assert_eq!(files(root), set(&["list.json", "list-2.json"]));
    assert_eq!(stub_in(&root.join("mappings/list-2.json"))["name"], "list");
    for path in ["/l1", "/l2", "/l3"] {
        assert_eq!(get(addr, path).await.status, 200, "{path}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_persistent_stub_never_replaces_or_deletes_a_file_that_is_no_stub() {
    let dir = crate::common::root(&[("mappings/notes.txt", "my notes")]);
    let root = dir.path();
    let server = serve_with(root, Some("{{{name}}}")).await;
    let addr = server.http_addr;
    let id = "11111111-0000-4000-8000-000000000003";
    let (status, v) = admin(
        addr,
        "POST",
        "/mappings",
        json!({"id": id, "name": "notes.txt", "persistent": true,
               "request": {"url": "/n"}, "response": {"body": "n"}}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(read(&root.join("mappings/notes.txt")), "my notes");
    assert_eq!(files(root), set(&["notes.txt", "notes-2.txt"]));
    assert_eq!(stub_in(&root.join("mappings/notes-2.txt"))["id"], id);
    // An edit rewrites the stub's own file, not the one its name would give.
    let (status, _) = admin(
        addr,
        "PUT",
        &format!("/mappings/{id}"),
        json!({"name": "notes.txt", "persistent": true,
               "request": {"url": "/n"}, "response": {"body": "edited"}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&["notes.txt", "notes-2.txt"]));
    assert_eq!(
        stub_in(&root.join("mappings/notes-2.txt"))["response"]["body"],
        "edited"
    );
    let (status, _) = admin(addr, "DELETE", &format!("/mappings/{id}"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&["notes.txt"]));
    assert_eq!(read(&root.join("mappings/notes.txt")), "my notes");
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn stubs_mounted_as_a_kubernetes_configmap_are_read_and_written_through_their_links() {
    // The kubelet's layout: `a.json -> ..data/a.json`, `..data -> ..2026_01_01/`, all
    // inside mappings/.
    let id = "11111111-0000-4000-8000-00000000000c";
    let dir = crate::common::root(&[(
        "mappings/..2026_01_01/a.json",
        &stub(id, "/cm", "from the configmap", true).to_string(),
    )]);
    let mappings = dir.path().join("mappings");
    std::os::unix::fs::symlink("..2026_01_01", mappings.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/a.json", mappings.join("a.json")).unwrap();
    let server = serve_with(dir.path(), None).await;
    let addr = server.http_addr;
    assert_eq!(get(addr, "/cm").await.body, "from the configmap");
    assert_eq!(total(addr).await, 1);
    let (status, v) = admin(
        addr,
        "PUT",
        &format!("/mappings/{id}"),
        stub(id, "/cm", "edited", true),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(get(addr, "/cm").await.body, "edited");
    // Written through the links, which stay as they were.
    let real = mappings.join("..2026_01_01/a.json");
    assert_eq!(stub_in(&real)["response"]["body"], "edited");
    assert!(
        std::fs::symlink_metadata(mappings.join("a.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_save_stopped_by_a_failed_write_keeps_and_serves_what_it_wrote_and_says_so() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = serve_with(root, None).await;
    let addr = server.http_addr;
    let first = "11111111-0000-4000-8000-000000000001";
    let second = "11111111-0000-4000-8000-000000000002";
    // The second's name is longer than a file name may be (255 bytes): its write
    // fails whoever runs the test.
    for (id, name) in [(first, "first".to_owned()), (second, "long".repeat(70))] {
        let (status, v) = admin(
            addr,
            "POST",
            "/mappings",
            json!({"id": id, "name": name, "request": {"url": format!("/{id}")},
                   "response": {"body": id}}),
        )
        .await;
        assert_eq!(status, 201, "{v}");
    }
    let (status, v) = admin(addr, "POST", "/mappings/save", Value::Null).await;
    assert_eq!(status, 500, "{v}");
    let d = detail(&v);
    assert!(d.starts_with("1 of 2 stub files were written"), "{d}");
    assert!(d.contains(second), "{d}");
    assert_eq!(files(root), set(&[&format!("first-{first}.json")]));
    // Both still served; the first from its file, which a restart reads.
    assert_eq!(get(addr, &format!("/{first}")).await.body, first);
    assert_eq!(get(addr, &format!("/{second}")).await.body, second);
    server.shutdown().await;
    let server = serve_with(root, None).await;
    assert_eq!(total(server.http_addr).await, 1);
    server.shutdown().await;
}
