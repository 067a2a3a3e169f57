//! The admin API against calls a web page on another site makes through a browser
//! (each request here carries the headers such a browser sends), and admin paths
//! whose names and ids arrive percent-encoded, as the dashboard and most HTTP clients
//! send them.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::common::{admin, get, send};
use decoy::server::{ServeOptions, start};

const EVIL: &str = "http://evil.example";

/// A browser that sends no `Origin` with a form (Firefox before version 70).
const OLD_FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:68.0) Gecko/20100101 Firefox/68.0";

/// A stub as the attacking page would post it.
fn stub(url: &str) -> String {
    json!({
        "request": { "method": "GET", "url": url },
        "response": { "status": 200, "body": "planted" },
    })
    .to_string()
}

/// What `<form method=POST enctype=text/plain>` sends for one field whose name is
/// a stub's JSON up to an extra string field and whose value closes it.
fn form_spelled_stub(url: &str) -> String {
    let name = format!(
        r#"{{"request": {{"method": "GET", "url": "{url}"}}, "response": {{"status": 200, "body": "x"}}, "pad": ""#
    );
    format!("{name}={}\r\n", r#""}"#)
}

async fn stub_count(addr: SocketAddr) -> u64 {
    let (status, v) = admin(addr, "GET", "/mappings", Value::Null).await;
    assert_eq!(status, 200);
    v["meta"]["total"].as_u64().unwrap()
}

fn same_origin(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

#[tokio::test]
async fn a_cross_site_fetch_with_a_text_plain_body_is_refused_and_creates_nothing() {
    let dir = crate::common::root(&[]);
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    // fetch(decoy + '/__admin/mappings', {method: 'POST', mode: 'no-cors',
    //   headers: {'Content-Type': 'text/plain'}, body: JSON.stringify(stub)})
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[
            ("origin", EVIL),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
            ("content-type", "text/plain;charset=UTF-8"),
        ],
        &stub("/csrf-fetch"),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert!(
        a.body.contains("Cross-site admin request refused"),
        "{}",
        a.body
    );
    assert!(a.body.contains("Sec-Fetch-Site: cross-site"), "{}", a.body);
    // An older browser sends only Origin.
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[("origin", EVIL), ("content-type", "text/plain")],
        &stub("/csrf-fetch"),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        a.body.contains(EVIL),
        "the answer names the origin: {}",
        a.body
    );
    assert_eq!(stub_count(addr).await, 0);
    assert_eq!(get(addr, "/csrf-fetch").await.status, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn under_basic_auth_a_cross_site_form_carrying_the_credentials_is_refused() {
    let dir = crate::common::root(&[]);
    let mut opts = crate::common::options(dir.path());
    opts.http.admin_basic_auth = Some("tom:pw".into());
    let server = start(opts).await.unwrap();
    let addr = server.http_addr;
    // base64("tom:pw"): the browser remembers it from the dashboard and sends it.
    let creds = ("authorization", "Basic dG9tOnB3");
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[
            creds,
            ("origin", EVIL),
            ("sec-fetch-site", "cross-site"),
            ("content-type", "text/plain"),
        ],
        &form_spelled_stub("/csrf-form"),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    let list = send(addr, "GET", "/__admin/mappings", &[creds], "").await;
    assert_eq!(list.status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&list.body).unwrap()["meta"]["total"],
        0
    );
    // The same credentials from the dashboard's own page create the stub.
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[
            creds,
            ("origin", &same_origin(addr)),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ],
        &stub("/from-the-dashboard"),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(get(addr, "/from-the-dashboard").await.body, "planted");
    server.shutdown().await;
}

#[tokio::test]
async fn sec_fetch_site_cross_site_or_same_site_refuses_every_state_change_but_not_reads() {
    let dir = crate::common::root_with_stubs(json!([{
        "request": { "method": "GET", "url": "/kept" },
        "response": { "status": 200, "body": "kept" },
    }]));
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    for site in ["cross-site", "same-site"] {
        for (method, path) in [
            ("POST", "/__admin/shutdown"),
            ("POST", "/__admin/reset"),
            ("DELETE", "/__admin/mappings"),
            ("POST", "/__admin/settings"),
            ("POST", "/__admin/scenarios/reset"),
        ] {
            let a = send(addr, method, path, &[("sec-fetch-site", site)], "").await;
            assert_eq!(a.status, 403, "{method} {path} ({site}): {}", a.body);
        }
    }
    assert_eq!(get(addr, "/kept").await.body, "kept", "still up, stub kept");
    // Reads change nothing: a link to the dashboard from another site still opens it.
    let page = send(
        addr,
        "GET",
        "/__admin/dashboard",
        &[("sec-fetch-site", "cross-site")],
        "",
    )
    .await;
    assert_eq!(page.status, 200);
    let list = send(addr, "GET", "/__admin/mappings", &[("origin", EVIL)], "").await;
    assert_eq!(list.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn a_same_origin_call_is_accepted_and_origin_null_is_refused() {
    let dir = crate::common::root(&[]);
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let json_type = ("content-type", "application/json");
    let own = same_origin(addr);
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[("origin", &own), json_type],
        &stub("/one"),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let a = send(
        addr,
        "POST",
        "/__admin/mappings",
        &[
            ("origin", &own),
            ("sec-fetch-site", "same-origin"),
            json_type,
        ],
        &stub("/two"),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // Another port on the same host is another origin.
    let other_port = format!("http://{}:{}", addr.ip(), addr.port() + 1);
    for origin in ["null", other_port.as_str(), &format!("https://{addr}")] {
        let a = send(
            addr,
            "POST",
            "/__admin/mappings",
            &[("origin", origin), json_type],
            &stub("/three"),
        )
        .await;
        assert_eq!(a.status, 403, "Origin {origin}: {}", a.body);
    }
    assert_eq!(stub_count(addr).await, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn clients_that_are_not_browsers_keep_working_whatever_type_they_give_their_json() {
    let dir = crate::common::root(&[]);
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let clients: [&[(&str, &str)]; 7] = [
        &[],
        &[("content-type", "application/json")],
        &[("content-type", "application/json; charset=UTF-8")],
        &[("content-type", "application/vnd.wiremock+json")],
        // WireMock's Java client, 2.x and some 3.x, types its JSON this way.
        &[
            ("content-type", "text/plain; charset=UTF-8"),
            ("user-agent", "Apache-HttpClient/5.4.3 (Java/17.0.12)"),
        ],
        // curl -d, as WireMock's documentation writes it.
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("user-agent", "curl/8.5.0"),
        ],
        // Python's urllib given data and no type.
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("user-agent", "Python-urllib/3.12"),
        ],
    ];
    for (i, headers) in clients.into_iter().enumerate() {
        let url = format!("/client/{i}");
        let a = send(addr, "POST", "/__admin/mappings", headers, &stub(&url)).await;
        assert_eq!(a.status, 201, "{headers:?}: {}", a.body);
        assert_eq!(get(addr, &url).await.body, "planted");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_browsers_form_typed_body_is_refused_with_415_and_changes_nothing() {
    let dir = crate::common::root(&[]);
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    // An old browser's form sends neither Origin nor Sec-Fetch-Site: the type tells.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
    ] {
        let a = send(
            addr,
            "POST",
            "/__admin/mappings",
            &[("content-type", content_type), ("user-agent", OLD_FIREFOX)],
            &form_spelled_stub("/csrf-form"),
        )
        .await;
        assert_eq!(a.status, 415, "{content_type}: {}", a.body);
        assert!(
            a.body.contains("Content-Type: application/json"),
            "{}",
            a.body
        );
    }
    let a = send(
        addr,
        "POST",
        "/__admin/settings",
        &[("content-type", "text/plain"), ("user-agent", OLD_FIREFOX)],
        r#"{"fixedDelay": 5000, "pad": "="}"#,
    )
    .await;
    assert_eq!(a.status, 415, "{}", a.body);
    let (_, settings) = admin(addr, "GET", "/settings", Value::Null).await;
    assert!(
        settings["settings"].get("fixedDelay").is_none(),
        "{settings}"
    );
    assert_eq!(stub_count(addr).await, 0);
    assert_eq!(get(addr, "/csrf-form").await.status, 404);
    // Bodiless calls pass whatever their type.
    let a = send(
        addr,
        "POST",
        "/__admin/scenarios/reset",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("user-agent", OLD_FIREFOX),
        ],
        "",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    // A file's body is stored as sent, whatever its type.
    let a = send(
        addr,
        "PUT",
        "/__admin/files/note.txt",
        &[("content-type", "text/plain"), ("user-agent", OLD_FIREFOX)],
        "hello",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(get(addr, "/__admin/files/note.txt").await.body, "hello");
    server.shutdown().await;
}

#[tokio::test]
async fn with_the_admin_token_a_call_carrying_it_is_authorised_from_anywhere() {
    let dir = crate::common::root(&[]);
    let server = start(ServeOptions {
        admin_token: Some("s3cret".into()),
        ..crate::common::options(dir.path())
    })
    .await
    .unwrap();
    let addr = server.http_addr;
    let browser = [("origin", EVIL), ("sec-fetch-site", "cross-site")];
    let a = send(addr, "POST", "/__admin/mappings", &browser, &stub("/t")).await;
    assert_eq!(a.status, 401, "{}", a.body);
    let mut with_token = browser.to_vec();
    with_token.push(("authorization", "Bearer s3cret"));
    let a = send(addr, "POST", "/__admin/mappings", &with_token, &stub("/t")).await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(get(addr, "/t").await.body, "planted");
    server.shutdown().await;
}

#[tokio::test]
async fn a_scenario_named_with_spaces_is_set_and_reset_through_an_encoded_path() {
    let dir = crate::common::root_with_stubs(json!([
        {
            "scenarioName": "To do list", "requiredScenarioState": "Started",
            "newScenarioState": "done",
            "request": { "method": "GET", "url": "/todo" },
            "response": { "status": 200, "body": "first" },
        },
        {
            "scenarioName": "a/b", "requiredScenarioState": "Started",
            "newScenarioState": "next",
            "request": { "method": "GET", "url": "/ab" },
            "response": { "status": 200, "body": "ab" },
        },
    ]));
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let state = |name: &'static str| async move {
        let (_, v) = admin(addr, "GET", "/scenarios", Value::Null).await;
        v["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let (status, v) = admin(
        addr,
        "PUT",
        "/scenarios/To%20do%20list/state",
        json!({ "state": "done" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(state("To do list").await, "done");
    // What the dashboard's Reset sends: same origin, JSON typed as JSON.
    let a = send(
        addr,
        "PUT",
        "/__admin/scenarios/To%20do%20list/state",
        &[
            ("origin", &same_origin(addr)),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ],
        r#"{"state": "Started"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(state("To do list").await, "Started");
    // An encoded `/` stays part of the name.
    let (status, v) = admin(
        addr,
        "PUT",
        "/scenarios/a%2Fb/state",
        json!({ "state": "next" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(state("a/b").await, "next");
    // A name no scenario has is named decoded in the 404.
    let (status, v) = admin(addr, "PUT", "/scenarios/No%20such/state", json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(v["errors"][0]["title"], "Scenario No such does not exist");
    server.shutdown().await;
}

#[tokio::test]
async fn stub_ids_request_ids_and_file_names_are_read_from_encoded_paths() {
    // A file stub may have any id, spaces included.
    let dir = crate::common::root_with_stubs(json!([{
        "id": "my stub",
        "request": { "method": "GET", "url": "/mine" },
        "response": { "status": 200, "body": "mine" },
    }]));
    let server = start(crate::common::options(dir.path())).await.unwrap();
    let addr = server.http_addr;
    let (status, v) = admin(addr, "GET", "/mappings/my%20stub", Value::Null).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["id"], "my stub");
    let (status, _) = admin(
        addr,
        "GET",
        "/dashboard/api/mappings/my%20stub",
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);

    assert_eq!(get(addr, "/mine").await.body, "mine");
    let (_, v) = admin(addr, "GET", "/requests", Value::Null).await;
    let id = v["requests"][0]["id"].as_str().unwrap().to_owned();
    let (status, v) = admin(
        addr,
        "GET",
        &format!("/requests/{}", id.replace('-', "%2D")),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["request"]["url"], "/mine");

    let put = send(
        addr,
        "PUT",
        "/__admin/files/my%20notes/a%20b.txt",
        &[],
        "noted",
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("__files/my notes/a b.txt")).unwrap(),
        "noted"
    );
    assert_eq!(
        get(addr, "/__admin/files/my%20notes/a%20b.txt").await.body,
        "noted"
    );
    // Decoded once only: `%2520` is the name `%20`, not a space.
    assert_eq!(
        get(addr, "/__admin/files/my%2520notes/a%2520b.txt")
            .await
            .status,
        404
    );
    // Decoding does not open a way out of __files.
    for escape in [
        "/__admin/files/..%2F..%2Fsecret.txt",
        "/__admin/files/%2E%2E/x.txt",
    ] {
        let a = send(addr, "PUT", escape, &[], "x").await;
        assert_eq!(a.status, 400, "{escape}: {}", a.body);
    }
    assert!(!dir.path().join("secret.txt").exists());
    assert!(!dir.path().join("x.txt").exists());
    let nul = send(addr, "PUT", "/__admin/files/a%00b", &[], "x").await;
    assert!(
        nul.status >= 400,
        "a NUL in a file name: {} {}",
        nul.status,
        nul.body
    );
    let gone = send(
        addr,
        "DELETE",
        "/__admin/files/my%20notes/a%20b.txt",
        &[],
        "",
    )
    .await;
    assert_eq!(gone.status, 200);
    assert!(!dir.path().join("__files/my notes/a b.txt").exists());
    server.shutdown().await;
}
