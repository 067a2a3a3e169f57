#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Persistent stubs (`"persistent": true`) created, edited and removed through the
//! admin API, against real servers on port 0: their files in `mappings/` are written,
//! rewritten and deleted as WireMock 3.13.2 did for the same calls (its root was
//! inspected after each), they are served once after a restart, and the file watcher
//! does not load them a second time. `POST /__admin/mappings/save` has its tests in
//! `lifecycle.rs` and `filenames.rs`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::common::{admin, get};
use serde_json::{Value, json};

/// The file names in `mappings/` (none when it does not exist).
fn files(root: &Path) -> BTreeSet<String> {
    crate::common::file_names(&root.join("mappings"))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn read(root: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(root.join("mappings").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn total(addr: SocketAddr) -> u64 {
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    list["meta"]["total"].as_u64().unwrap()
}

/// Lets the file watcher see the files the server wrote (its debounce is far
/// shorter), so that a stub it loaded a second time would show in the count.
async fn let_the_watcher_run() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

fn persistent(id: &str, name: &str, url: &str, body: &str) -> Value {
    json!({"id": id, "name": name, "persistent": true,
           "request": {"method": "GET", "url": url}, "response": {"body": body}})
}

#[tokio::test]
async fn a_persistent_stub_is_written_when_created_rewritten_in_place_when_edited_and_deleted_with_its_file()
 {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let id = "8e4045d3-ec7f-4ff2-b441-4a4d18660f4a";
    let file = format!("my-stub-{id}.json");

    let (status, created) = admin(
        addr,
        "POST",
        "/mappings",
        persistent(id, "My Stub!", "/a", "one"),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["persistent"], true, "{created}");
    // WireMock's default file name, from the stub's name and id.
    assert_eq!(files(root), set(&[&file]));
    let on_disk = read(root, &file);
    assert_eq!(on_disk["id"], id, "{on_disk}");
    assert_eq!(on_disk["persistent"], true, "{on_disk}");
    assert_eq!(on_disk["response"]["body"], "one", "{on_disk}");
    assert_eq!(get(addr, "/a").await.body, "one");

    // An edit that keeps it persistent rewrites the same file, even under a new name.
    let (status, _) = admin(
        addr,
        "PUT",
        &format!("/mappings/{id}"),
        persistent(id, "Renamed", "/a", "two"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&[&file]));
    assert_eq!(read(root, &file)["response"]["body"], "two");
    assert_eq!(read(root, &file)["name"], "Renamed");
    assert_eq!(get(addr, "/a").await.body, "two");

    // An edit that drops `persistent` changes the stub in memory only: the file keeps
    // the last persistent version, as WireMock's does.
    let plain = json!({"request": {"method": "GET", "url": "/a"}, "response": {"body": "three"}});
    let (status, _) = admin(addr, "PUT", &format!("/mappings/{id}"), plain).await;
    assert_eq!(status, 200);
    assert_eq!(read(root, &file)["response"]["body"], "two");
    assert_eq!(get(addr, "/a").await.body, "three");

    // Persistent again: written again.
    let (status, _) = admin(
        addr,
        "PUT",
        &format!("/mappings/{id}"),
        persistent(id, "Renamed", "/a", "four"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(read(root, &file)["response"]["body"], "four");
    let_the_watcher_run().await;
    assert_eq!(total(addr).await, 1);

    let (status, _) = admin(addr, "DELETE", &format!("/mappings/{id}"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&[]));
    assert_eq!(get(addr, "/a").await.status, 404);
    let_the_watcher_run().await;
    assert_eq!(total(addr).await, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_stub_posted_without_persistent_writes_no_file_until_an_edit_makes_it_persistent() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let id = "8909241f-9d3b-48f7-b281-8c07f3577f1b";
    let plain =
        json!({"id": id, "request": {"method": "GET", "url": "/np"}, "response": {"body": "np"}});
    assert_eq!(admin(addr, "POST", "/mappings", plain).await.0, 201);
    assert_eq!(files(root), set(&[]));

    // Made persistent by an edit: a file of its own, named after its new name.
    let (status, _) = admin(
        addr,
        "PUT",
        &format!("/mappings/{id}"),
        persistent(id, "Now Persistent", "/np", "np2"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(files(root), set(&[&format!("now-persistent-{id}.json")]));
    let_the_watcher_run().await;
    assert_eq!(total(addr).await, 1);
    assert_eq!(get(addr, "/np").await.body, "np2");
    server.shutdown().await;
}

#[tokio::test]
async fn the_watcher_does_not_load_a_persistent_stub_a_second_time() {
    let dir = crate::common::root(&[(
        "mappings/file.json",
        &json!({"request": {"url": "/file"}, "response": {}}).to_string(),
    )]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    for i in 0..5 {
        let id = format!("11111111-0000-4000-8000-00000000000{i}");
        let (status, v) = admin(
            addr,
            "POST",
            "/mappings",
            persistent(&id, &format!("stub {i}"), &format!("/s/{i}"), "x"),
        )
        .await;
        assert_eq!(status, 201, "{v}");
    }
    assert_eq!(files(root).len(), 6);
    // Counted several times while the watcher sees the five new files.
    for _ in 0..4 {
        let_the_watcher_run().await;
        assert_eq!(total(addr).await, 6);
    }
    let (_, problems) = admin(addr, "GET", "/problems", Value::Null).await;
    assert!(
        !problems.to_string().contains("11111111-0000-4000-8000"),
        "{problems}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn persistent_stubs_are_served_once_after_a_restart_and_after_a_reset() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let kept = "22222222-0000-4000-8000-000000000001";
    let (status, _) = admin(
        addr,
        "POST",
        "/mappings",
        persistent(kept, "kept", "/kept", "kept"),
    )
    .await;
    assert_eq!(status, 201);
    let gone = json!({"request": {"method": "GET", "url": "/gone"}, "response": {"body": "gone"}});
    assert_eq!(admin(addr, "POST", "/mappings", gone).await.0, 201);
    server.shutdown().await;

    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    assert_eq!(total(addr).await, 1);
    assert_eq!(get(addr, "/kept").await.body, "kept");
    assert_eq!(get(addr, "/gone").await.status, 404);
    admin(addr, "POST", "/mappings/reset", Value::Null).await;
    assert_eq!(total(addr).await, 1);
    assert_eq!(get(addr, "/kept").await.body, "kept");
    server.shutdown().await;
}

#[tokio::test]
async fn a_persistent_stub_is_written_even_when_the_mappings_folder_is_gone() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    std::fs::remove_dir(root.join("mappings")).unwrap();
    let id = "33333333-0000-4000-8000-000000000001";
    let stub = json!({"id": id, "persistent": true,
                      "request": {"method": "GET", "url": "/nodir"}, "response": {}});
    assert_eq!(admin(addr, "POST", "/mappings", stub).await.0, 201);
    assert_eq!(files(root), set(&[&format!("get-nodir-{id}.json")]));
    let_the_watcher_run().await;
    assert_eq!(total(addr).await, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_persistent_stub_whose_file_cannot_be_written_is_a_500_naming_the_file_and_is_served_from_memory()
 {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let id = "11111111-2222-4333-8444-555555555555";
    // A name longer than a file name may be (255 bytes): the write fails whoever runs
    // the test. (A file or folder already there would not do: the stub's file would
    // get a numbered name beside it.)
    let name = "blocked".repeat(40);
    let file = format!("{name}-{id}.json");
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let (status, v) = admin(
        addr,
        "POST",
        "/mappings",
        persistent(id, &name, "/blocked", "in memory"),
    )
    .await;
    assert_eq!(status, 500, "{v}");
    let detail = v["errors"][0]["detail"].as_str().unwrap();
    assert!(detail.contains(&file), "{detail}");
    assert!(detail.contains(id), "{detail}");
    assert!(detail.contains("served all the same"), "{detail}");
    // As in WireMock, the stub was added before its file failed.
    assert_eq!(get(addr, "/blocked").await.body, "in memory");
    assert_eq!(total(addr).await, 1);
    // It can still be removed.
    let (status, _) = admin(addr, "DELETE", &format!("/mappings/{id}"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(total(addr).await, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_persistent_stub_of_a_list_file_is_neither_rewritten_nor_removed_as_in_wiremock() {
    let list = json!({"mappings": [
        {"id": "aaaaaaaa-0000-4000-8000-000000000001", "persistent": true,
         "request": {"method": "GET", "url": "/m1"}, "response": {"body": "m1"}},
        {"id": "aaaaaaaa-0000-4000-8000-000000000002",
         "request": {"method": "GET", "url": "/m2"}, "response": {"body": "m2"}}
    ]})
    .to_string();
    let dir = crate::common::root(&[("mappings/multi.json", &list)]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;

    // WireMock answers 500 ("read-only") but has made the edit in memory.
    let edit = json!({"persistent": true,
                      "request": {"method": "GET", "url": "/m2"}, "response": {"body": "edited"}});
    let (status, v) = admin(
        addr,
        "PUT",
        "/mappings/aaaaaaaa-0000-4000-8000-000000000002",
        edit,
    )
    .await;
    assert_eq!(status, 500, "{v}");
    let detail = v["errors"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("multi.json"), "{detail}");
    assert!(detail.contains("read-only"), "{detail}");
    assert_eq!(get(addr, "/m2").await.body, "edited");
    assert_eq!(
        std::fs::read_to_string(root.join("mappings/multi.json")).unwrap(),
        list
    );

    // Removing a persistent stub of it is refused, and the stub stays.
    let (status, v) = admin(
        addr,
        "DELETE",
        "/mappings/aaaaaaaa-0000-4000-8000-000000000001",
        Value::Null,
    )
    .await;
    assert_eq!(status, 500, "{v}");
    assert_eq!(get(addr, "/m1").await.body, "m1");
    assert!(root.join("mappings/multi.json").exists());
    server.shutdown().await;
}

#[tokio::test]
async fn removing_by_id_deletes_a_persistent_stubs_file_and_removing_by_request_leaves_it() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let by_id = "44444444-0000-4000-8000-000000000001";
    let by_request = "44444444-0000-4000-8000-000000000002";
    admin(
        addr,
        "POST",
        "/mappings",
        persistent(by_id, "rm by id", "/rm1", "1"),
    )
    .await;
    admin(
        addr,
        "POST",
        "/mappings",
        persistent(by_request, "rm by req", "/rm2", "2"),
    )
    .await;
    let by_request_file = format!("rm-by-req-{by_request}.json");
    assert_eq!(files(root).len(), 2);

    let posted = json!({"id": by_id, "request": {"method": "GET", "url": "/elsewhere"}});
    assert_eq!(admin(addr, "POST", "/mappings/remove", posted).await.0, 200);
    assert_eq!(files(root), set(&[&by_request_file]));

    // Found by its request, the stub goes but its file stays (and comes back at a reset).
    let posted = json!({"request": {"method": "GET", "url": "/rm2"}});
    assert_eq!(admin(addr, "POST", "/mappings/remove", posted).await.0, 200);
    assert_eq!(get(addr, "/rm2").await.status, 404);
    assert_eq!(files(root), set(&[&by_request_file]));
    admin(addr, "POST", "/mappings/reset", Value::Null).await;
    assert_eq!(get(addr, "/rm2").await.body, "2");
    server.shutdown().await;
}

#[tokio::test]
async fn imported_persistent_stubs_are_written_and_those_deleted_by_the_import_lose_their_files() {
    let dir = crate::common::root(&[]);
    let root = dir.path();
    let server = crate::common::serve(root).await;
    let addr = server.http_addr;
    let one = "cccccccc-0000-4000-8000-000000000001";
    let two = "cccccccc-0000-4000-8000-000000000002";
    let import = json!({"mappings": [
        {"id": one, "persistent": true, "request": {"method": "GET", "url": "/i1"}, "response": {}},
        {"id": two, "request": {"method": "GET", "url": "/i2"}, "response": {}}
    ]});
    assert_eq!(admin(addr, "POST", "/mappings/import", import).await.0, 200);
    assert_eq!(files(root), set(&[&format!("get-i1-{one}.json")]));

    let import = json!({
        "mappings": [{"id": two, "persistent": true,
                      "request": {"method": "GET", "url": "/i2"}, "response": {}}],
        "importOptions": {"duplicatePolicy": "OVERWRITE", "deleteAllNotInImport": true}
    });
    assert_eq!(admin(addr, "POST", "/mappings/import", import).await.0, 200);
    assert_eq!(files(root), set(&[&format!("get-i2-{two}.json")]));
    let_the_watcher_run().await;
    assert_eq!(total(addr).await, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn imported_stubs_are_added_last_to_first_so_the_first_wins_a_tie_as_in_wiremock() {
    let dir = crate::common::root(&[]);
    let server = crate::common::serve(dir.path()).await;
    let addr = server.http_addr;
    let import = json!({"mappings": [
        {"request": {"method": "GET", "url": "/ord"}, "response": {"body": "first in the list"}},
        {"request": {"method": "GET", "url": "/ord"}, "response": {"body": "second in the list"}}
    ]});
    assert_eq!(admin(addr, "POST", "/mappings/import", import).await.0, 200);
    assert_eq!(get(addr, "/ord").await.body, "first in the list");
    server.shutdown().await;
}
