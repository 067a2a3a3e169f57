//! gRPC calls against a real server on port 0, with tonic as the client (prost
//! messages written as tonic-build writes them), on a root in the WireMock gRPC
//! extension's layout (`tests/grpc/wiremock-grpc-extension`, its own descriptors)
//! and on roots of `.proto` files compiled at start.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::uri::PathAndQuery;
use serde_json::json;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

use crate::common;

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "2")]
    pub age: i32,
    #[prost(string, repeated, tag = "3")]
    pub hobbies: Vec<String>,
    #[prost(map = "string, string", tag = "4")]
    pub bag_of_tricks: HashMap<String, String>,
    #[prost(int32, tag = "5")]
    pub sentiment: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloResponse {
    #[prost(string, tag = "1")]
    pub greeting: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

fn hello(name: &str) -> HelloRequest {
    HelloRequest {
        name: name.into(),
        ..Default::default()
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/grpc/wiremock-grpc-extension")
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn client(ch: &Channel) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(ch.clone())
}

async fn unary<Q, A>(
    ch: &Channel,
    path: &'static str,
    req: Request<Q>,
) -> Result<tonic::Response<A>, Status>
where
    Q: prost::Message + Send + Sync + 'static,
    A: prost::Message + Default + Send + Sync + 'static,
{
    let mut c = client(ch);
    c.ready().await.unwrap();
    c.unary(req, PathAndQuery::from_static(path), ProstCodec::default())
        .await
}

const GREETING: &str = "/com.example.grpc.GreetingService/greeting";

async fn greet(ch: &Channel, name: &str) -> Result<String, Status> {
    unary::<_, HelloResponse>(ch, GREETING, Request::new(hello(name)))
        .await
        .map(|r| r.into_inner().greeting)
}

#[tokio::test]
async fn unary_calls_follow_the_extensions_conventions() {
    let server = common::serve(&fixture()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let ch = channel(server.http_addr).await;

    // The extension's documented stub: equalToJson on the request, `body` answer.
    assert_eq!(greet(&ch, "Tom").await.unwrap(), "Hi Tom");
    // response-template sees the request message as JSON.
    assert_eq!(greet(&ch, "Alice").await.unwrap(), "Hello Alice");
    // grpc-status-name / grpc-status-reason.
    let s = greet(&ch, "Prereq failure").await.unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert_eq!(s.message(), "Failed on some prerequisite");
    // An HTTP status, mapped as the extension maps it.
    let s = greet(&ch, "Forbidden").await.unwrap_err();
    assert_eq!(s.code(), Code::PermissionDenied);
    assert_eq!(
        s.message(),
        "You are not authorized to access this resource"
    );
    // No stub matches: the extension's UNIMPLEMENTED.
    let s = greet(&ch, "Nobody").await.unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    assert_eq!(
        s.message(),
        "No matching stub mapping found for gRPC request"
    );
    // A method no descriptor declares.
    let s = unary::<_, HelloResponse>(
        &ch,
        "/com.example.grpc.GreetingService/nope",
        Request::new(hello("Tom")),
    )
    .await
    .unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    // An imported type (google.protobuf.Empty) and an Any built from JSON.
    unary::<_, Empty>(
        &ch,
        "/com.example.grpc.GreetingService/oneGreetingEmptyReply",
        Request::new(hello("Tom")),
    )
    .await
    .unwrap();
    let any: Any = unary(
        &ch,
        "/com.example.grpc.GreetingService/greetingAnyResponse",
        Request::new(hello("Tom")),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        any.type_url,
        "type.googleapis.com/com.example.grpc.response.HelloResponse"
    );
    let inner: HelloResponse = prost::Message::decode(&any.value[..]).unwrap();
    assert_eq!(inner.greeting, "Hiya");
    // The second descriptor set of the root.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Booking {
        #[prost(string, tag = "1")]
        id: String,
    }
    let b: Booking = unary(
        &ch,
        "/com.example.grpc.BookingService/booking",
        Request::new(Booking { id: "b-1".into() }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(b.id, "b-1-confirmed");
    server.shutdown().await;
}

#[tokio::test]
async fn metadata_deadlines_faults_and_gzip() {
    let server = common::serve(&fixture()).await;
    let ch = channel(server.http_addr).await;

    // Request metadata is matched as headers; the stub's headers are the answer's
    // metadata, `grpc-trailer-*` its trailing metadata.
    let mut req = Request::new(hello("Meta"));
    req.metadata_mut()
        .insert("x-tenant", "acme".parse().unwrap());
    let resp = unary::<_, HelloResponse>(&ch, GREETING, req).await.unwrap();
    assert_eq!(resp.metadata().get("x-served-by").unwrap(), "decoy");
    assert_eq!(resp.get_ref().greeting, "Hi acme");
    let mut req = Request::new(hello("Meta"));
    req.metadata_mut()
        .insert("x-tenant", "other".parse().unwrap());
    let s = unary::<_, HelloResponse>(&ch, GREETING, req)
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);

    // A delay longer than the client's deadline: DEADLINE_EXCEEDED, from the server
    // (tonic's own timer, `set_timeout`, would cancel the call on the client side).
    let mut req = Request::new(hello("Slow"));
    req.metadata_mut()
        .insert("grpc-timeout", "200m".parse().unwrap());
    let s = unary::<_, HelloResponse>(&ch, GREETING, req)
        .await
        .unwrap_err();
    // tonic also times the call out itself from the header: either side may end it.
    assert!(
        s.code() == Code::DeadlineExceeded || s.message() == "Timeout expired",
        "{s:?}"
    );
    // The server's own answer, seen by a client that does not time out.
    let (status, trailers, _) = raw(
        server.http_addr,
        GREETING,
        &[("grpc-timeout", "200m")],
        frame(&prost::Message::encode_to_vec(&hello("Slow"))),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(trailers.get("grpc-status").unwrap(), "4", "{trailers:?}");
    // ... and within it, the answer.
    let mut req = Request::new(hello("Slow"));
    req.set_timeout(Duration::from_secs(20));
    let resp = unary::<_, HelloResponse>(&ch, GREETING, req).await.unwrap();
    assert_eq!(resp.get_ref().greeting, "Delayed hello");

    // A fault resets the stream; the connection keeps serving.
    let s = greet(&ch, "Alan").await.unwrap_err();
    assert_ne!(s.code(), Code::Ok);
    assert_eq!(greet(&ch, "Tom").await.unwrap(), "Hi Tom");

    // gzip both ways.
    let mut c = client(&ch)
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Gzip);
    c.ready().await.unwrap();
    let resp: tonic::Response<HelloResponse> = c
        .unary(
            Request::new(hello("Tom")),
            PathAndQuery::from_static(GREETING),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    assert_eq!(resp.get_ref().greeting, "Hi Tom");
    assert_eq!(resp.metadata().get("grpc-encoding").unwrap(), "gzip");
    server.shutdown().await;
}

#[tokio::test]
async fn the_journal_shows_calls_as_json() {
    let server = common::serve(&fixture()).await;
    let ch = channel(server.http_addr).await;
    let mut req = hello("Nobody");
    req.age = 42;
    req.hobbies = vec!["chess".into(), "go".into()];
    req.sentiment = 2;
    let s = unary::<_, HelloResponse>(&ch, GREETING, Request::new(req))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    assert_eq!(greet(&ch, "Tom").await.unwrap(), "Hi Tom");
    let (status, v) = common::admin(server.http_addr, "GET", "/requests", json!(null)).await;
    assert_eq!(status, 200);
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    // Newest first.
    let first = &reqs[1]["request"];
    assert_eq!(first["url"], GREETING);
    assert_eq!(first["method"], "POST");
    // As protobuf-java's printer writes it: what the extension matches against.
    assert_eq!(
        first["body"],
        "{\n  \"name\": \"Nobody\",\n  \"age\": 42,\n  \"hobbies\": [\"chess\", \"go\"],\n  \"sentiment\": \"ANGRY\"\n}"
    );
    assert_eq!(reqs[1]["wasMatched"], false);
    assert_eq!(reqs[0]["wasMatched"], true);
    // The unmatched call's near misses name the stubs of its method.
    let (_, near) = common::admin(
        server.http_addr,
        "GET",
        "/requests/unmatched/near-misses",
        json!(null),
    )
    .await;
    let misses = near["nearMisses"].as_array().unwrap();
    assert!(!misses.is_empty(), "{near}");
    assert_eq!(misses[0]["stubMapping"]["request"]["urlPath"], GREETING);
    let (_, count) = common::admin(
        server.http_addr,
        "POST",
        "/requests/count",
        json!({"method": "POST", "urlPath": GREETING, "bodyPatterns": [{"equalToJson": {"name": "Tom"}}]}),
    )
    .await;
    assert_eq!(count["count"], 1);
    let metrics = common::get(server.http_addr, "/__admin/metrics").await.body;
    assert!(
        metrics.contains("decoy_requests_total{transport=\"grpc\",outcome=\"matched\"} 1"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn server_and_client_streams_from_the_extension_root() {
    let server = common::serve(&fixture()).await;
    let ch = channel(server.http_addr).await;
    let mut c = client(&ch);
    c.ready().await.unwrap();
    let resp = c
        .server_streaming::<_, HelloResponse, _>(
            Request::new(hello("Tom")),
            PathAndQuery::from_static("/com.example.grpc.GreetingService/oneGreetingManyReplies"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    let mut stream = resp.into_inner();
    let mut got = Vec::new();
    while let Some(m) = stream.message().await.unwrap() {
        got.push(m.greeting);
    }
    assert_eq!(got, ["Hi", "Hi again", "Bye"]);

    // Client streaming: the first message a stub answers decides (the extension's rule).
    let names = ["Tom", "Uri", "Rob", "Mark"].map(hello);
    let mut c = client(&ch);
    c.ready().await.unwrap();
    let resp: tonic::Response<HelloResponse> = c
        .client_streaming(
            Request::new(futures_util::stream::iter(names)),
            PathAndQuery::from_static("/com.example.grpc.GreetingService/manyGreetingsOneReply"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    assert_eq!(resp.get_ref().greeting, "Hi Rob");
    let mut c = client(&ch);
    c.ready().await.unwrap();
    let s = c
        .client_streaming::<_, _, HelloResponse, _>(
            Request::new(futures_util::stream::iter(["Tom", "Uri"].map(hello))),
            PathAndQuery::from_static("/com.example.grpc.GreetingService/manyGreetingsOneReply"),
            ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    assert_eq!(
        s.message(),
        "No matching stub mapping found for gRPC request"
    );
    server.shutdown().await;
}

const CHAT_PROTO: &str = r#"
syntax = "proto3";
package chat.v1;
import "google/protobuf/timestamp.proto";

message Line {
  string text = 1;
  int64 seq = 2;
  google.protobuf.Timestamp at = 3;
}

service Chat {
  rpc Say(Line) returns (Line);
  rpc Talk(stream Line) returns (stream Line);
}
"#;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(string, tag = "1")]
    pub text: String,
    #[prost(int64, tag = "2")]
    pub seq: i64,
}

fn line(text: &str) -> Line {
    Line {
        text: text.into(),
        seq: 0,
    }
}

fn chat_root() -> tempfile::TempDir {
    common::root(&[
        ("grpc/chat/v1/chat.proto", CHAT_PROTO),
        (
            "mappings/chat.json",
            &json!({"mappings": [
                {
                    "request": {"urlPath": "/chat.v1.Chat/Say", "method": "POST",
                                "bodyPatterns": [{"matchesJsonPath": "$.text"}]},
                    "response": {"jsonBody": {"text": "you said {{jsonPath request.body '$.text'}}", "seq": "9007199254740993"},
                                 "transformers": ["response-template"]}
                },
                {
                    "request": {"urlPath": "/chat.v1.Chat/Talk", "method": "POST",
                                "bodyPatterns": [{"equalToJson": {"text": "hello"}}]},
                    "response": {"jsonBody": [{"text": "hi"}, {"text": "how are you?"}]}
                },
                {
                    "request": {"urlPath": "/chat.v1.Chat/Talk", "method": "POST",
                                "bodyPatterns": [{"equalToJson": {"text": "bye"}}]},
                    "response": {"jsonBody": [{"text": "see you"}],
                                 "headers": {"grpc-status-name": "ABORTED", "grpc-status-reason": "conversation over"}}
                }
            ]})
            .to_string(),
        ),
    ])
}

#[tokio::test]
async fn proto_files_compile_at_start_and_bidi_streams_answer_each_message() {
    let root = chat_root();
    let server = common::serve(root.path()).await;
    assert!(
        server.report.problems.is_empty(),
        "{:?}",
        server.report.problems
    );
    let ch = channel(server.http_addr).await;
    let said: Line = unary(&ch, "/chat.v1.Chat/Say", Request::new(line("ping")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(said.text, "you said ping");
    assert_eq!(said.seq, 9007199254740993);

    // Interactive: each message is answered before the next is sent.
    let (tx, rx) = tokio::sync::mpsc::channel::<Line>(4);
    let mut c = client(&ch);
    c.ready().await.unwrap();
    tx.send(line("hello")).await.unwrap();
    let resp = c
        .streaming::<_, _, Line, _>(
            Request::new(tokio_stream(rx)),
            PathAndQuery::from_static("/chat.v1.Chat/Talk"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    let mut answers = resp.into_inner();
    assert_eq!(answers.message().await.unwrap().unwrap().text, "hi");
    assert_eq!(
        answers.message().await.unwrap().unwrap().text,
        "how are you?"
    );
    tx.send(line("unmatched")).await.unwrap();
    tx.send(line("bye")).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().text, "see you");
    let s = answers.message().await.unwrap_err();
    assert_eq!(s.code(), Code::Aborted);
    assert_eq!(s.message(), "conversation over");

    // The client ends first: OK.
    let mut c = client(&ch);
    c.ready().await.unwrap();
    let resp = c
        .streaming::<_, _, Line, _>(
            Request::new(futures_util::stream::iter([line("hello")])),
            PathAndQuery::from_static("/chat.v1.Chat/Talk"),
            ProstCodec::default(),
        )
        .await
        .unwrap();
    let mut answers = resp.into_inner();
    let mut n = 0;
    while answers.message().await.unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
    server.shutdown().await;
}

/// A stream of what `rx` receives.
fn tokio_stream<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn bad_descriptors_and_stubs_are_reported_and_the_rest_serves() {
    let root = common::root(&[
        ("grpc/chat/v1/chat.proto", CHAT_PROTO),
        ("grpc/broken.proto", "syntax = \"proto3\";\npackage b;\nmessage M {\n  strin x = 1;\n}\n"),
        ("grpc/garbage.dsc", "this is not a descriptor set"),
        (
            "mappings/chat.json",
            &json!({"mappings": [
                {"name": "fine", "request": {"urlPath": "/chat.v1.Chat/Say", "method": "POST"},
                 "response": {"jsonBody": {"text": "ok"}}},
                {"name": "no such method", "request": {"urlPath": "/chat.v1.Chat/Shout", "method": "POST"},
                 "response": {"jsonBody": {"text": "ok"}}},
                {"name": "wrong field", "request": {"urlPath": "/chat.v1.Chat/Say", "method": "PUT"},
                 "response": {"jsonBody": {"txt": "ok"}}},
                {"name": "bad status", "request": {"urlPath": "/chat.v1.Chat/Say", "method": "PATCH"},
                 "response": {"headers": {"grpc-status-name": "NOPE"}}}
            ]})
            .to_string(),
        ),
    ]);
    let server = common::serve(root.path()).await;
    let (_, v) = common::admin(server.http_addr, "GET", "/problems", json!(null)).await;
    let problems: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(
        has("grpc/broken.proto: does not compile: broken.proto:4:3"),
        "{problems:#?}"
    );
    assert!(
        has("grpc/garbage.dsc: is not a descriptor set"),
        "{problems:#?}"
    );
    assert!(
        has("mappings/chat.json: mapping #1 (id ")
            && has(
                "request.urlPath: the service chat.v1.Chat declares no method \"Shout\" (it declares Say, Talk)"
            ),
        "{problems:#?}"
    );
    assert!(
        has("response.jsonBody: the answer of chat.v1.Chat.Say does not fit chat.v1.Line"),
        "{problems:#?}"
    );
    assert!(
        has("response.headers.grpc-status-name: \"NOPE\" is not a gRPC status"),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), 5, "{problems:#?}");
    // The rest serves.
    let ch = channel(server.http_addr).await;
    let said: Line = unary(&ch, "/chat.v1.Chat/Say", Request::new(line("x")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(said.text, "ok");
    server.shutdown().await;

    // decoy validate says the same and fails.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args(["validate", "--root-dir"])
        .arg(root.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("error: grpc/broken.proto: does not compile"),
        "{text}"
    );
    assert!(text.contains("declares no method \"Shout\""), "{text}");
    assert!(
        text.contains("gRPC: 3 file(s), 2 method(s), 5 problem(s)"),
        "{text}"
    );
}

#[tokio::test]
async fn protos_added_while_serving_are_served() {
    let root = common::root(&[(
        "mappings/chat.json",
        &json!({"request": {"urlPath": "/chat.v1.Chat/Say", "method": "POST"},
                "response": {"jsonBody": {"text": "late"}}})
        .to_string(),
    )]);
    let server = common::serve(root.path()).await;
    let ch = channel(server.http_addr).await;
    let s = unary::<_, Line>(&ch, "/chat.v1.Chat/Say", Request::new(line("x")))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    std::fs::create_dir_all(root.path().join("grpc")).unwrap();
    std::fs::write(root.path().join("grpc/chat.proto"), CHAT_PROTO).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match unary::<_, Line>(&ch, "/chat.v1.Chat/Say", Request::new(line("x"))).await {
            Ok(r) => {
                assert_eq!(r.get_ref().text, "late");
                break;
            }
            Err(s) if std::time::Instant::now() < deadline => {
                assert_eq!(s.code(), Code::Unimplemented);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(s) => panic!("the new proto was not served within 10 s: {s:?}"),
        }
    }
    server.shutdown().await;
}

/// A gRPC message framed by hand.
fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// A call made by hand over HTTP/2 (no gRPC library): the HTTP status, the
/// trailers (or the head, for a trailers-only answer) and the body.
async fn raw(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, http::HeaderMap, bytes::Bytes) {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(req.body(http_body_util::Full::new(body.into())).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let head = resp.headers().clone();
    let collected = resp.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or(head);
    (status, trailers, collected.to_bytes())
}

#[tokio::test]
async fn hostile_calls_get_a_status_and_the_server_keeps_serving() {
    let server = common::serve(&fixture()).await;
    let addr = server.http_addr;
    let code = |t: &http::HeaderMap| t.get("grpc-status").map(|v| v.to_str().unwrap().to_owned());
    // Bytes that are not a HelloRequest.
    let (_, t, _) = raw(addr, GREETING, &[], frame(&[0xff, 0xff, 0xff])).await;
    assert_eq!(code(&t).as_deref(), Some("13"), "{t:?}");
    // A message cut short.
    let mut cut = frame(b"\x0a\x03Tom");
    cut.truncate(6);
    let (_, t, _) = raw(addr, GREETING, &[], cut).await;
    assert_eq!(code(&t).as_deref(), Some("13"), "{t:?}");
    // A length prefix past the limit (4 MiB): RESOURCE_EXHAUSTED, nothing buffered.
    let (_, t, _) = raw(addr, GREETING, &[], vec![0, 0x7f, 0xff, 0xff, 0xff]).await;
    assert_eq!(code(&t).as_deref(), Some("8"), "{t:?}");
    // A compressed message with no encoding named, and an unknown encoding.
    let (_, t, _) = raw(addr, GREETING, &[], vec![1, 0, 0, 0, 1, 0]).await;
    assert_eq!(code(&t).as_deref(), Some("13"), "{t:?}");
    let (_, t, _) = raw(addr, GREETING, &[("grpc-encoding", "snappy")], frame(b"")).await;
    assert_eq!(code(&t).as_deref(), Some("12"), "{t:?}");
    // No message at all, and two for a unary method.
    let (_, t, _) = raw(addr, GREETING, &[], Vec::new()).await;
    assert_eq!(code(&t).as_deref(), Some("13"), "{t:?}");
    let two = [frame(b"\x0a\x03Tom"), frame(b"\x0a\x03Tom")].concat();
    let (_, t, _) = raw(addr, GREETING, &[], two).await;
    assert_eq!(code(&t).as_deref(), Some("13"), "{t:?}");
    // A well-formed call still answers, with its message framed.
    let (status, t, body) = raw(addr, GREETING, &[], frame(b"\x0a\x03Tom")).await;
    assert_eq!((status, code(&t).as_deref()), (200, Some("0")));
    let answer: HelloResponse = prost::Message::decode(&body[5..]).unwrap();
    assert_eq!(answer.greeting, "Hi Tom");
    server.shutdown().await;
}

#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

#[tokio::test]
async fn health_and_reflection_v1_and_v1alpha() {
    use decoy_grpc::builtin::{
        Request as Ask, Response as Told, ServerReflectionRequest, ServerReflectionResponse,
    };
    let server = common::serve(&fixture()).await;
    let ch = channel(server.http_addr).await;
    let ok: HealthCheckResponse = unary(
        &ch,
        "/grpc.health.v1.Health/Check",
        Request::new(HealthCheckRequest {
            service: String::new(),
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(ok.status, 1);
    let s = unary::<_, HealthCheckResponse>(
        &ch,
        "/grpc.health.v1.Health/Check",
        Request::new(HealthCheckRequest {
            service: "no.Such".into(),
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(s.code(), Code::NotFound);

    for path in [
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ] {
        let ask = |q| ServerReflectionRequest {
            host: String::new(),
            message_request: Some(q),
        };
        let asks = vec![
            ask(Ask::ListServices(String::new())),
            ask(Ask::FileContainingSymbol(
                "com.example.grpc.GreetingService.greeting".into(),
            )),
            ask(Ask::FileByFilename("nope.proto".into())),
        ];
        let mut c = client(&ch);
        c.ready().await.unwrap();
        let resp = c
            .streaming::<_, _, ServerReflectionResponse, _>(
                Request::new(futures_util::stream::iter(asks)),
                PathAndQuery::from_static(path),
                ProstCodec::default(),
            )
            .await
            .unwrap();
        let mut answers = resp.into_inner();
        let Some(Told::ListServicesResponse(list)) =
            answers.message().await.unwrap().unwrap().message_response
        else {
            panic!("no service list")
        };
        let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert!(
            names.contains(&"com.example.grpc.GreetingService"),
            "{names:?}"
        );
        assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
        let Some(Told::FileDescriptorResponse(files)) =
            answers.message().await.unwrap().unwrap().message_response
        else {
            panic!("no file")
        };
        // The file first, then what it imports: each a FileDescriptorProto.
        let first: prost_reflect::prost_types::FileDescriptorProto =
            prost::Message::decode(&files.file_descriptor_proto[0][..]).unwrap();
        assert_eq!(first.service[0].name(), "GreetingService");
        assert!(files.file_descriptor_proto.len() >= 4);
        let Some(Told::ErrorResponse(e)) =
            answers.message().await.unwrap().unwrap().message_response
        else {
            panic!("no error")
        };
        assert_eq!(e.error_code, 5);
        assert!(answers.message().await.unwrap().is_none());
    }
    server.shutdown().await;
}
