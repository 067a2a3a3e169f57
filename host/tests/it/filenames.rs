#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The names of the stub files decoy writes, against the names WireMock 3.13.2 wrote
//! for the same stubs and options (its `FilenameMaker`, `--filename-template`):
//! `POST /__admin/mappings/save` and recording snapshots, on real servers on port 0.
//! The expected names were read from a WireMock 3.13.2 root after the same calls.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::{admin, get};
use decoy::server::start;
use decoy_core::filenames::FilenameMaker;
use serde_json::{Value, json};

fn names(dir: &Path) -> BTreeSet<String> {
    crate::common::file_names(dir)
}

/// The stubs WireMock saved: with and without a name, a URL with a query, a
/// `urlPattern` without a method, a `urlPathTemplate`, no URL at all, and a name with
/// accents, a slash and trailing spaces.
fn stubs() -> Vec<Value> {
    vec![
        json!({"id": "11111111-0000-4000-8000-000000000001", "name": "Get User One",
               "request": {"method": "GET", "url": "/users/1"}, "response": {"body": "a"}}),
        json!({"id": "11111111-0000-4000-8000-000000000002",
               "request": {"method": "GET", "url": "/users/1"}, "response": {"body": "b"}}),
        json!({"id": "11111111-0000-4000-8000-000000000003",
               "request": {"method": "GET", "url": "/users?page=2&size=10"}, "response": {"body": "c"}}),
        json!({"id": "11111111-0000-4000-8000-000000000004",
               "request": {"urlPattern": "/users/[0-9]+"}, "response": {"body": "d"}}),
        json!({"id": "11111111-0000-4000-8000-000000000005",
               "request": {"method": "POST", "urlPathTemplate": "/users/{id}"}, "response": {"body": "e"}}),
        json!({"id": "11111111-0000-4000-8000-000000000006", "request": {}, "response": {"body": "f"}}),
        json!({"id": "11111111-0000-4000-8000-000000000007", "name": "Café Ünï / x  ", "priority": 3,
               "metadata": {"team": "Blue"},
               "request": {"method": "GET", "urlPath": "/a b"}, "response": {"status": 201}}),
    ]
}

/// Posts [`stubs`] to a server started with `filenames`, saves, and returns the names
/// of the files in `mappings/`.
async fn saved_names(filenames: FilenameMaker) -> BTreeSet<String> {
    let dir = crate::common::root(&[]);
    let server = start(decoy::server::ServeOptions {
        filenames,
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    for s in stubs() {
        let (status, v) = admin(addr, "POST", "/mappings", s).await;
        assert_eq!(status, 201, "{v}");
    }
    let (status, v) = admin(addr, "POST", "/mappings/save", Value::Null).await;
    assert_eq!(status, 200, "{v}");
    let out = names(&dir.path().join("mappings"));
    // Every stub is still there after the save, whatever its file is called.
    let (_, list) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(list["meta"]["total"], 7, "{list}");
    server.shutdown().await;
    out
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn saved_stubs_get_wiremocks_default_file_names() {
    assert_eq!(
        saved_names(FilenameMaker::default()).await,
        set(&[
            "get-user-one-11111111-0000-4000-8000-000000000001.json",
            "get-users1-11111111-0000-4000-8000-000000000002.json",
            "get-userspage2size10-11111111-0000-4000-8000-000000000003.json",
            "any-users0-9-11111111-0000-4000-8000-000000000004.json",
            "post-usersid-11111111-0000-4000-8000-000000000005.json",
            "any-always-11111111-0000-4000-8000-000000000006.json",
            "caf-n--x---11111111-0000-4000-8000-000000000007.json",
        ])
    );
}

#[tokio::test]
async fn saved_stubs_are_named_by_the_filename_template_as_wiremock_names_them() {
    let t = FilenameMaker::from_option("{{{method}}}-{{{url}}}-{{{id}}}.json").unwrap();
    assert_eq!(
        saved_names(t).await,
        set(&[
            "get-users1-11111111-0000-4000-8000-000000000001.json",
            "get-users1-11111111-0000-4000-8000-000000000002.json",
            "get-userspage2size10-11111111-0000-4000-8000-000000000003.json",
            "any-users0-9-11111111-0000-4000-8000-000000000004.json",
            "post-usersid-11111111-0000-4000-8000-000000000005.json",
            "any-always-11111111-0000-4000-8000-000000000006.json",
            "get-a-b-11111111-0000-4000-8000-000000000007.json",
        ])
    );
    // Without `.json` the name is taken as it is, as WireMock takes it.
    let t = FilenameMaker::from_option("{{{metadata.team}}}-{{{priority}}}-{{{id}}}").unwrap();
    assert_eq!(
        saved_names(t).await,
        set(&[
            "--11111111-0000-4000-8000-000000000001",
            "--11111111-0000-4000-8000-000000000002",
            "--11111111-0000-4000-8000-000000000003",
            "--11111111-0000-4000-8000-000000000004",
            "--11111111-0000-4000-8000-000000000005",
            "--11111111-0000-4000-8000-000000000006",
            "blue-3-11111111-0000-4000-8000-000000000007",
        ])
    );
}

/// Records, through a proxy stub, what another decoy answers for a JSON path asked
/// twice (a scenario), the root and a percent-encoded path, snapshots with bodies
/// extracted, and returns the stubs the snapshot gave and the names of the files in
/// `mappings/` and `__files/`.
async fn recorded(filenames: FilenameMaker) -> (Vec<Value>, BTreeSet<String>, BTreeSet<String>) {
    let up_dir = crate::common::root_with_stubs(json!([
        {"request": {"method": "GET", "urlPath": "/svc/Data"},
         "response": {"jsonBody": {"from": "upstream"}, "headers": {"Content-Type": "application/json"}}},
        {"request": {"method": "GET", "urlPath": "/"},
         "response": {"body": "root text", "headers": {"Content-Type": "text/plain"}}},
        {"request": {"method": "GET", "urlPathPattern": "/caf.*"},
         "response": {"body": "cafe text", "headers": {"Content-Type": "text/plain"}}}
    ]));
    let up = crate::common::serve(up_dir.path()).await;
    let dir = crate::common::root(&[(
        "mappings/proxy.json",
        &json!({"priority": 1, "request": {"urlPattern": ".*"},
                "response": {"proxyBaseUrl": format!("http://{}", up.http_addr)}})
        .to_string(),
    )]);
    let server = start(decoy::server::ServeOptions {
        filenames,
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    for path in ["/svc/Data?x=1", "/", "/caf%C3%A9/a%20b", "/svc/Data?x=1"] {
        assert_eq!(get(addr, path).await.status, 200, "{path}");
    }
    let (status, v) = admin(
        addr,
        "POST",
        "/recordings/snapshot",
        json!({"persist": true, "extractBodyCriteria": {"textSizeThreshold": "0"}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let stubs = v["mappings"].as_array().unwrap().clone();
    assert_eq!(stubs.len(), 4, "{v}");
    let out = (
        stubs,
        names(&dir.path().join("mappings")),
        names(&dir.path().join("__files")),
    );
    server.shutdown().await;
    up.shutdown().await;
    out
}

/// The recorded stub for `url` (its `url`, or `urlPath` when it had a query).
fn recorded_stub<'a>(stubs: &'a [Value], url: &str) -> Vec<&'a Value> {
    stubs
        .iter()
        .filter(|s| s["request"]["url"] == url || s["request"]["urlPath"] == url)
        .collect()
}

#[tokio::test]
async fn recorded_stubs_and_their_files_are_named_as_wiremock_names_them() {
    for template in [None, Some("{{{method}}}-{{{url}}}-{{{id}}}.json")] {
        let maker = template.map_or_else(FilenameMaker::default, |t| {
            FilenameMaker::from_option(t).unwrap()
        });
        let (stubs, mappings, files) = recorded(maker).await;
        let mut want_mappings = set(&["proxy.json"]);
        let mut want_files = BTreeSet::new();
        // (URL, the name WireMock 3.13.2 gave, the file-name stem with the template,
        // the body's extension)
        for (url, name, templated, ext) in [
            ("/svc/Data", "svc_data", "get-svcdata", "json"),
            ("/", "", "get-", "txt"),
            ("/caf%C3%A9/a%20b", "cafe_a-b", "get-cafc3a9a20b", "txt"),
        ] {
            for s in recorded_stub(&stubs, url) {
                assert_eq!(s["name"], name, "{s}");
                let id = s["id"].as_str().unwrap();
                // The body file keeps the default template: `<name>-<id>`, or
                // `<method>-<url>-<id>` for an empty name.
                let stem = if name.is_empty() { "get-" } else { name };
                let body = format!("{stem}-{id}.{ext}");
                assert_eq!(s["response"]["bodyFileName"], body.as_str(), "{s}");
                want_files.insert(body);
                want_mappings.insert(match template {
                    None => format!("{stem}-{id}.json"),
                    Some(_) => format!("{templated}-{id}.json"),
                });
            }
        }
        assert_eq!(mappings, want_mappings, "{template:?}");
        assert_eq!(files, want_files, "{template:?}");
        // The repeated request became a scenario named from its path's segments.
        let svc = recorded_stub(&stubs, "/svc/Data");
        assert_eq!(svc.len(), 2);
        assert!(
            svc.iter()
                .all(|s| s["scenarioName"] == "scenario-1-svc-Data")
        );
    }
}

#[tokio::test]
async fn recorded_stubs_given_the_same_file_name_each_keep_a_file_of_their_own() {
    // WireMock would write both states of the recorded scenario to `svc_data.json`,
    // the second over the first; decoy numbers the second.
    let maker = FilenameMaker::from_option("{{{name}}}.json").unwrap();
    let (stubs, mappings, _) = recorded(maker).await;
    assert!(mappings.contains("svc_data.json"), "{mappings:?}");
    assert!(mappings.contains("svc_data-2.json"), "{mappings:?}");
    assert!(mappings.contains("cafe_a-b.json"), "{mappings:?}");
    let svc: BTreeSet<&str> = recorded_stub(&stubs, "/svc/Data")
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(svc.len(), 2);
}
