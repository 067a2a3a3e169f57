//! Proxying and recording gRPC calls: a real tonic server on port 0 behind decoy,
//! called with a tonic client for every call kind, recorded through the recording
//! API, then stopped, and the recording played back with the same answers.

use std::net::SocketAddr;
use std::time::Duration;

use http::uri::PathAndQuery;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_prost::ProstCodec;

use crate::common;
use crate::common::grpc_echo::{ECHO_PROTO, EchoServer, Line, line};

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn grpc(ch: &Channel) -> tonic::client::Grpc<Channel> {
    let mut c = tonic::client::Grpc::new(ch.clone());
    c.ready().await.unwrap();
    c
}

/// What the client sees of one call: messages, then the status, its message, and
/// the metadata named `x-*` (head and trailers).
#[derive(Debug, PartialEq)]
struct Seen {
    texts: Vec<String>,
    code: Code,
    message: String,
    meta: Vec<(String, String)>,
}

fn meta_of(m: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
    let h = m.clone().into_headers();
    let mut out: Vec<(String, String)> = h
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("x-"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    out.sort();
    out
}

fn failed(s: tonic::Status) -> Seen {
    Seen {
        texts: vec![],
        code: s.code(),
        message: s.message().to_owned(),
        meta: meta_of(s.metadata()),
    }
}

async fn say(ch: &Channel, text: &str) -> Seen {
    let r = grpc(ch)
        .await
        .unary::<_, Line, _>(
            Request::new(line(text)),
            PathAndQuery::from_static("/rec.v1.Echo/Say"),
            ProstCodec::default(),
        )
        .await;
    match r {
        Ok(r) => Seen {
            meta: meta_of(r.metadata()),
            texts: vec![r.into_inner().text],
            code: Code::Ok,
            message: String::new(),
        },
        Err(s) => failed(s),
    }
}

async fn drain(r: Result<tonic::Response<tonic::Streaming<Line>>, tonic::Status>) -> Seen {
    let r = match r {
        Ok(r) => r,
        Err(s) => return failed(s),
    };
    let mut meta = meta_of(r.metadata());
    let mut stream = r.into_inner();
    let mut texts = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(l)) => texts.push(l.text),
            Ok(None) => break,
            Err(s) => {
                let mut f = failed(s);
                f.texts = texts;
                return f;
            }
        }
    }
    if let Ok(Some(t)) = stream.trailers().await {
        meta.extend(meta_of(&t));
    }
    meta.sort();
    Seen {
        texts,
        code: Code::Ok,
        message: String::new(),
        meta,
    }
}

async fn count(ch: &Channel, n: i64) -> Seen {
    let r = grpc(ch)
        .await
        .server_streaming::<_, Line, _>(
            Request::new(Line {
                text: "count".into(),
                seq: n,
            }),
            PathAndQuery::from_static("/rec.v1.Echo/Count"),
            ProstCodec::default(),
        )
        .await;
    drain(r).await
}

async fn gather(ch: &Channel, texts: &[&str]) -> Seen {
    let lines: Vec<Line> = texts.iter().map(|t| line(t)).collect();
    let r = grpc(ch)
        .await
        .client_streaming::<_, Line, Line, _>(
            Request::new(futures_util::stream::iter(lines)),
            PathAndQuery::from_static("/rec.v1.Echo/Gather"),
            ProstCodec::default(),
        )
        .await;
    match r {
        Ok(r) => Seen {
            meta: meta_of(r.metadata()),
            texts: vec![r.into_inner().text],
            code: Code::Ok,
            message: String::new(),
        },
        Err(s) => failed(s),
    }
}

/// A bidirectional call sending `texts` all at once.
async fn talk(ch: &Channel, texts: &[&str]) -> Seen {
    let lines: Vec<Line> = texts.iter().map(|t| line(t)).collect();
    let r = grpc(ch)
        .await
        .streaming::<_, Line, Line, _>(
            Request::new(futures_util::stream::iter(lines)),
            PathAndQuery::from_static("/rec.v1.Echo/Talk"),
            ProstCodec::default(),
        )
        .await;
    drain(r).await
}

fn echo_root() -> tempfile::TempDir {
    common::root(&[("grpc/rec/v1/echo.proto", ECHO_PROTO)])
}

#[tokio::test]
async fn calls_of_every_kind_are_recorded_from_a_real_server_and_played_back() {
    let real = EchoServer::start().await;
    let root = echo_root();
    let server = common::serve(root.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let (status, _) = common::admin(
        server.http_addr,
        "POST",
        "/recordings/start",
        json!({"targetBaseUrl": format!("http://{}", real.addr)}),
    )
    .await;
    assert_eq!(status, 200);
    let ch = channel(server.http_addr).await;

    // Every call kind, through decoy to the real server.
    let said = say(&ch, "hi").await;
    assert_eq!(said.texts, ["echo: hi"]);
    assert_eq!(said.meta, [("x-real".to_owned(), "yes".to_owned())]);
    let fail = say(&ch, "fail").await;
    assert_eq!(fail.code, Code::NotFound);
    assert_eq!(fail.message, "no such line");
    assert_eq!(fail.meta, [("x-why".to_owned(), "asked".to_owned())]);
    let counted = count(&ch, 3).await;
    assert_eq!(counted.texts, ["1", "2", "3"]);
    assert_eq!(counted.code, Code::Ok);
    let gathered = gather(&ch, &["a", "b", "c"]).await;
    assert_eq!(gathered.texts, ["a+b+c"]);

    // Bidirectional, live: each answer comes back before the next message is sent.
    let (tx, rx) = tokio::sync::mpsc::channel::<Line>(4);
    tx.send(line("x")).await.unwrap();
    let resp = grpc(&ch)
        .await
        .streaming::<_, Line, Line, _>(
            Request::new(futures_util::stream::poll_fn({
                let mut rx = rx;
                move |cx| rx.poll_recv(cx)
            })),
            PathAndQuery::from_static("/rec.v1.Echo/Talk"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    let mut answers = resp.into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("the first answer comes before the client sends more")
        .unwrap()
        .unwrap();
    assert_eq!(first.text, "x!");
    tx.send(line("y")).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().text, "y!");
    drop(tx);
    assert!(answers.message().await.unwrap().is_none());
    let talked = talk(&ch, &["x", "y"]).await;
    assert_eq!(talked.texts, ["x!", "y!"]);

    // The journal shows proxied calls as JSON, once per call.
    let (_, reqs) = common::admin(server.http_addr, "GET", "/requests", json!(null)).await;
    let reqs = reqs["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 6, "{reqs:?}");
    assert!(reqs.iter().all(|r| r["wasMatched"] == true));

    let (status, stopped) =
        common::admin(server.http_addr, "POST", "/recordings/stop", json!(null)).await;
    assert_eq!(status, 200, "{stopped}");
    let stubs = stopped["mappings"].as_array().unwrap();
    // Say twice, Count, Gather, Talk (the same x, y conversation twice: a scenario).
    let by_path = |p: &str| -> Vec<&Value> {
        stubs
            .iter()
            .filter(|s| s["request"]["urlPath"] == p)
            .collect()
    };
    assert_eq!(by_path("/rec.v1.Echo/Say").len(), 2, "{stopped}");
    let count_stub = by_path("/rec.v1.Echo/Count")[0];
    assert_eq!(
        count_stub["response"]["jsonBody"],
        json!([{"text": "1", "seq": "1"}, {"text": "2", "seq": "2"}, {"text": "3", "seq": "3"}])
    );
    let gather_stub = by_path("/rec.v1.Echo/Gather")[0];
    let pattern: Value = serde_json::from_str(
        gather_stub["request"]["bodyPatterns"][0]["equalToJson"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        pattern,
        json!([{"text": "a"}, {"text": "b"}, {"text": "c"}])
    );
    let fail_stub = by_path("/rec.v1.Echo/Say")
        .into_iter()
        .find(|s| s["response"]["headers"]["grpc-status-name"] == "NOT_FOUND")
        .expect("the failed call is recorded with its status");
    assert_eq!(
        fail_stub["response"]["headers"]["grpc-status-reason"],
        "no such line"
    );
    // A trailers-only answer: its metadata came in the head, and is played back there.
    assert_eq!(fail_stub["response"]["headers"]["x-why"], "asked");
    let files = common::file_names(&root.path().join("mappings"));
    assert_eq!(files.len(), stubs.len(), "{files:?}");

    // The real server is gone: the recording answers alike.
    real.stop().await;
    assert_eq!(say(&ch, "hi").await, said);
    assert_eq!(say(&ch, "fail").await, fail);
    assert_eq!(count(&ch, 3).await, counted);
    assert_eq!(gather(&ch, &["a", "b", "c"]).await, gathered);
    assert_eq!(talk(&ch, &["x", "y"]).await, talked);
    // What was not recorded is not matched.
    assert_eq!(gather(&ch, &["a", "b"]).await.code, Code::Unimplemented);
    assert_eq!(say(&ch, "other").await.code, Code::Unimplemented);

    // The stubs load from their files alike on a fresh start.
    server.shutdown().await;
    let again = common::serve(root.path()).await;
    assert!(
        again.report.problems.is_empty(),
        "{:?}",
        again.report.problems
    );
    let ch = channel(again.http_addr).await;
    assert_eq!(say(&ch, "hi").await, said);
    assert_eq!(count(&ch, 3).await, counted);
    again.shutdown().await;
}

#[tokio::test]
async fn a_proxy_stub_forwards_calls_and_an_unreachable_server_is_unavailable() {
    let real = EchoServer::start().await;
    let dead = common::free_port();
    let root = common::root(&[
        ("grpc/rec/v1/echo.proto", ECHO_PROTO),
        (
            "mappings/proxy.json",
            &json!({"mappings": [
                {"request": {"urlPath": "/rec.v1.Echo/Say", "method": "POST",
                             "bodyPatterns": [{"equalToJson": {"text": "down"}}]},
                 "priority": 1,
                 "response": {"proxyBaseUrl": format!("http://127.0.0.1:{dead}")}},
                {"request": {"urlPathPattern": "/rec\\.v1\\.Echo/.*", "method": "POST"},
                 "response": {"proxyBaseUrl": format!("http://{}", real.addr)}}
            ]})
            .to_string(),
        ),
    ]);
    let server = common::serve(root.path()).await;
    let ch = channel(server.http_addr).await;
    assert_eq!(say(&ch, "hi").await.texts, ["echo: hi"]);
    assert_eq!(count(&ch, 2).await.texts, ["1", "2"]);
    assert_eq!(gather(&ch, &["p", "q"]).await.texts, ["p+q"]);
    assert_eq!(talk(&ch, &["z"]).await.texts, ["z!"]);
    let down = say(&ch, "down").await;
    assert_eq!(down.code, Code::Unavailable, "{down:?}");
    assert!(down.message.contains("127.0.0.1"), "{down:?}");
    // Proxied calls go to the journal, and nothing is written without a recording.
    let (_, reqs) = common::admin(server.http_addr, "GET", "/requests", json!(null)).await;
    assert_eq!(reqs["requests"].as_array().unwrap().len(), 5);
    assert_eq!(common::file_names(&root.path().join("mappings")).len(), 1);
    server.shutdown().await;
    real.stop().await;
}

#[tokio::test]
async fn streams_match_on_each_message_then_on_all_the_messages_so_far() {
    let root = common::root(&[
        ("grpc/rec/v1/echo.proto", ECHO_PROTO),
        (
            "mappings/streams.json",
            &json!({"mappings": [
                {"request": {"urlPath": "/rec.v1.Echo/Gather", "method": "POST",
                             "bodyPatterns": [{"equalToJson": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}]},
                 "response": {"jsonBody": {"text": "abc"}}},
                {"request": {"urlPath": "/rec.v1.Echo/Gather", "method": "POST",
                             "bodyPatterns": [{"equalToJson": {"text": "solo"}}]},
                 "response": {"jsonBody": {"text": "solo alone"}}},
                {"request": {"urlPath": "/rec.v1.Echo/Talk", "method": "POST",
                             "bodyPatterns": [{"equalToJson": {"text": "p"}}]},
                 "response": {"jsonBody": [{"text": "p1"}]}},
                {"request": {"urlPath": "/rec.v1.Echo/Talk", "method": "POST",
                             "bodyPatterns": [{"matchesJsonPath": "$[?(@.text == 'q')]"},
                                              {"matchesJsonPath": "$[1]"}]},
                 "response": {"jsonBody": [{"text": "pq"}]}}
            ]})
            .to_string(),
        ),
    ]);
    let server = common::serve(root.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let ch = channel(server.http_addr).await;
    assert_eq!(gather(&ch, &["a", "b", "c"]).await.texts, ["abc"]);
    // The first match decides: at `c`.
    assert_eq!(gather(&ch, &["a", "b", "c", "d"]).await.texts, ["abc"]);
    // A message alone still matches a stub written for one message.
    assert_eq!(gather(&ch, &["x", "solo", "y"]).await.texts, ["solo alone"]);
    let (_, before) = common::admin(server.http_addr, "GET", "/requests", json!(null)).await;
    let before = before["requests"].as_array().unwrap().len();
    let missed = gather(&ch, &["a", "b"]).await;
    assert_eq!(missed.code, Code::Unimplemented);
    // An unmatched client stream is one journal entry, with its last message.
    let (_, unmatched) =
        common::admin(server.http_addr, "GET", "/requests/unmatched", json!(null)).await;
    let unmatched = unmatched["requests"].as_array().unwrap();
    assert_eq!(unmatched.len(), 1, "{unmatched:?}");
    let body: Value = serde_json::from_str(unmatched[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body, json!({"text": "b"}));
    let (_, after) = common::admin(server.http_addr, "GET", "/requests", json!(null)).await;
    assert_eq!(after["requests"].as_array().unwrap().len(), before + 1);

    // Bidirectional: `p` alone, then `q` as the second of [p, q].
    let (tx, rx) = tokio::sync::mpsc::channel::<Line>(4);
    tx.send(line("p")).await.unwrap();
    let resp = grpc(&ch)
        .await
        .streaming::<_, Line, Line, _>(
            Request::new(futures_util::stream::poll_fn({
                let mut rx = rx;
                move |cx| rx.poll_recv(cx)
            })),
            PathAndQuery::from_static("/rec.v1.Echo/Talk"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    let mut answers = resp.into_inner();
    assert_eq!(answers.message().await.unwrap().unwrap().text, "p1");
    tx.send(line("q")).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().text, "pq");
    drop(tx);
    assert!(answers.message().await.unwrap().is_none());
    // `q` first: not the second message, so no answer.
    assert_eq!(talk(&ch, &["q"]).await.code, Code::Unimplemented);
    server.shutdown().await;
}

#[tokio::test]
async fn calls_are_counted_per_method_and_undeclared_methods_are_journaled() {
    let root = common::root(&[
        ("grpc/rec/v1/echo.proto", ECHO_PROTO),
        (
            "mappings/say.json",
            &json!({"mappings": [
                {"request": {"urlPath": "/rec.v1.Echo/Say", "method": "POST",
                             "bodyPatterns": [{"equalToJson": {"text": "hi"}}]},
                 "response": {"jsonBody": {"text": "hello"}}},
                {"request": {"urlPath": "/rec.v1.Echo/Count", "method": "POST"},
                 "response": {"jsonBody": [{"text": "1"}, {"text": "2"}]}}
            ]})
            .to_string(),
        ),
    ]);
    let server = common::serve(root.path()).await;
    let ch = channel(server.http_addr).await;
    assert_eq!(say(&ch, "hi").await.texts, ["hello"]);
    assert_eq!(say(&ch, "hi").await.texts, ["hello"]);
    assert_eq!(say(&ch, "other").await.code, Code::Unimplemented);
    assert_eq!(count(&ch, 2).await.texts, ["1", "2"]);
    // A method no descriptor declares (a typo of Say).
    let typo = grpc(&ch)
        .await
        .unary::<_, Line, _>(
            Request::new(line("hi")),
            PathAndQuery::from_static("/rec.v1.Echo/Sya"),
            ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(typo.code(), Code::Unimplemented);
    assert_eq!(typo.message(), "Method not found: rec.v1.Echo/Sya");

    let metrics = common::get(server.http_addr, "/__admin/metrics").await.body;
    for row in [
        "decoy_grpc_calls_total{method=\"/rec.v1.Echo/Say\",code=\"OK\"} 2",
        "decoy_grpc_calls_total{method=\"/rec.v1.Echo/Say\",code=\"UNIMPLEMENTED\"} 1",
        "decoy_grpc_calls_total{method=\"/rec.v1.Echo/Count\",code=\"OK\"} 1",
        "decoy_grpc_calls_total{method=\"/rec.v1.Echo/Talk\",code=\"OK\"} 0",
        "decoy_grpc_calls_total{method=\"\",code=\"UNIMPLEMENTED\"} 1",
    ] {
        assert!(metrics.contains(row), "{row} in {metrics}");
    }

    // The undeclared call is in the journal as unmatched, and its near misses name
    // the stubs of the method it meant.
    let (_, unmatched) =
        common::admin(server.http_addr, "GET", "/requests/unmatched", json!(null)).await;
    let urls: Vec<&str> = unmatched["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    assert!(urls.contains(&"/rec.v1.Echo/Sya"), "{unmatched}");
    let (_, near) = common::admin(
        server.http_addr,
        "POST",
        "/near-misses/request",
        json!({"url": "/rec.v1.Echo/Sya", "method": "POST"}),
    )
    .await;
    assert_eq!(
        near["nearMisses"][0]["stubMapping"]["request"]["urlPath"], "/rec.v1.Echo/Say",
        "{near}"
    );
    let (_, count) = common::admin(
        server.http_addr,
        "POST",
        "/requests/count",
        json!({"urlPath": "/rec.v1.Echo/Sya"}),
    )
    .await;
    assert_eq!(count["count"], 1);
    server.shutdown().await;
}

#[tokio::test]
async fn record_mappings_writes_proxied_grpc_calls_as_grpc_stubs() {
    let real = EchoServer::start().await;
    let root = common::root(&[
        ("grpc/rec/v1/echo.proto", ECHO_PROTO),
        (
            "mappings/proxy.json",
            &json!({"request": {"urlPathPattern": "/rec\\.v1\\.Echo/.*", "method": "POST"},
                    "response": {"proxyBaseUrl": format!("http://{}", real.addr)}})
            .to_string(),
        ),
    ]);
    let mut opts = common::options(root.path());
    opts.record_mappings = true;
    opts.watch = false;
    let server = decoy::server::start(opts).await.unwrap();
    let ch = channel(server.http_addr).await;
    let said = say(&ch, "hi").await;
    assert_eq!(said.texts, ["echo: hi"]);
    let counted = count(&ch, 2).await;
    assert_eq!(counted.texts, ["1", "2"]);
    // Written off the call's path: wait for both files.
    let dir = root.path().join("mappings");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while common::file_names(&dir).len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            common::file_names(&dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
    real.stop().await;
    std::fs::remove_file(dir.join("proxy.json")).unwrap();
    let count_file = common::file_names(&dir)
        .into_iter()
        .find(|n| n.to_lowercase().contains("count"))
        .unwrap_or_else(|| panic!("a file for Count in {:?}", common::file_names(&dir)));
    let stub: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(count_file)).unwrap()).unwrap();
    assert_eq!(stub["request"]["urlPath"], "/rec.v1.Echo/Count");
    assert_eq!(
        stub["response"]["jsonBody"],
        json!([{"text": "1", "seq": "1"}, {"text": "2", "seq": "2"}])
    );
    // Played back with the real server gone.
    let again = common::serve(root.path()).await;
    assert!(
        again.report.problems.is_empty(),
        "{:?}",
        again.report.problems
    );
    let ch = channel(again.http_addr).await;
    assert_eq!(say(&ch, "hi").await, said);
    assert_eq!(count(&ch, 2).await, counted);
    again.shutdown().await;
}
