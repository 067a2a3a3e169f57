//! NATS virtual services against the machine's NATS server (127.0.0.1:4222, with
//! JetStream; `DECOY_NATS_URL` points elsewhere), driven by the `async-nats` client.
//! Each test uses subjects under a prefix of its own, and deletes the streams it
//! creates. Restarts (of decoy and of the server) run against a private `nats-server`
//! on a free port (`nats_restart.rs`), as does the server without JetStream here.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use futures_util::StreamExt as _;
use serde_json::json;

pub(crate) fn url() -> String {
    std::env::var("DECOY_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

pub(crate) async fn client(url: &str) -> async_nats::Client {
    async_nats::connect(url).await.unwrap_or_else(|e| {
        panic!("the NATS server is not reachable at {url}: {e} (start it with `nats-server -js`)")
    })
}

/// A subject prefix nobody else uses.
pub(crate) fn prefix() -> String {
    format!("decoy-test.{}", uuid::Uuid::new_v4().simple())
}

/// A stream name nobody else uses.
pub(crate) fn stream_name() -> String {
    format!("DECOYTEST_{}", uuid::Uuid::new_v4().simple())
}

/// Deletes a stream when dropped, however the test ends.
pub(crate) struct StreamGuard {
    pub js: jetstream::Context,
    pub name: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let (js, name) = (self.js.clone(), self.name.clone());
        // Dropped inside the test's runtime: delete on a thread of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), js.delete_stream(&name)).await;
            });
        })
        .join();
    }
}

pub(crate) async fn stream(
    js: &jetstream::Context,
    name: &str,
    subjects: Vec<String>,
) -> StreamGuard {
    js.create_stream(jetstream::stream::Config {
        name: name.to_owned(),
        subjects,
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    })
    .await
    .expect("stream created (is JetStream enabled on the server? `nats-server -js`)");
    StreamGuard {
        js: js.clone(),
        name: name.to_owned(),
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, *v);
    }
    h
}

/// A root serving `p` (the subject prefix) through `nats_url`.
pub(crate) fn root(nats_url: &str, p: &str, stream: Option<&str>) -> tempfile::TempDir {
    let mut files = vec![
        (
            "mq-connections.json".to_owned(),
            json!([{
                "connectionId": "nats",
                "connectionName": "local NATS",
                "connectionData": {"type": "nats", "uri": nats_url, "readConnectionsToOpen": 2,
                                   "unmatched": {"queue": format!("{p}.unmatched")}}
            }])
            .to_string(),
        ),
        (
            "mq-mappings/quote.json".to_owned(),
            json!({
                "mappingId": "nats-quote",
                "request": {"destination": {"name": format!("{p}.quote.*"), "type": "TOPIC"},
                            "bodyMatcher": {"matchesJsonPath": "$[?(@.symbol == 'ACME')]"},
                            "headers": {"channel": {"equalTo": "web"}}},
                "response": {"text": "{\"id\": {{jsonPath request.body '$.id'}}, \"price\": 42, \"subject\": \"{{request.destination}}\"}",
                             "properties": {"served-by": "decoy", "echo": "{{request.headers.channel}}"},
                             "transformers": ["response-template"]},
                "receiveThreads": 3,
                "sendThreads": 2
            })
            .to_string(),
        ),
        (
            "mq-mappings/fixed.json".to_owned(),
            json!({
                "mappingId": "nats-fixed",
                "request": {"destination": format!("{p}.fixed"), "bodyMatcher": {"equalToJson": {"ping": true}}},
                "response": {"destination": format!("{p}.out"), "text": "pong", "fixedDelayMilliseconds": 20}
            })
            .to_string(),
        ),
    ];
    if let Some(stream) = stream {
        files.push((
            "mq-mappings/stored.json".to_owned(),
            json!({
                "mappingId": "nats-stored",
                "request": {"destination": format!("{p}.js.orders"),
                            "jetstream": {"stream": stream, "durable": "decoy-it"}},
                "response": {"text": "stored {{jsonPath request.body '$.id'}}",
                             "transformers": ["response-template"]},
                "receiveThreads": 2
            })
            .to_string(),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    crate::common::root(&refs)
}

/// Waits until `subject` has a subscriber behind decoy: a request answered, or the
/// deadline. decoy subscribes in the background after it starts.
pub(crate) async fn until_served(nc: &async_nats::Client, subject: &str, body: &str, h: HeaderMap) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            nc.request_with_headers(subject.to_owned(), h.clone(), body.to_owned().into()),
        )
        .await;
        if let Ok(Ok(_)) = r {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "decoy never answered on {subject}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (up to 20 s) until decoy's durable consumer `decoy-it` on `stream` has
/// nothing pending or unacknowledged, and returns its info.
async fn all_acknowledged(js: &jetstream::Context, stream: &str) -> jetstream::consumer::Info {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let stream = js.get_stream(stream).await.unwrap();
        let mut consumer: jetstream::consumer::PullConsumer =
            stream.get_consumer("decoy-it").await.unwrap();
        let info = consumer.info().await.unwrap().clone();
        if info.num_ack_pending == 0 && info.num_pending == 0 {
            return info;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still pending: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn metric(text: &str, line_start: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn core_requests_get_their_replies_with_headers_wildcards_and_unmatched_handling() {
    let p = prefix();
    let dir = root(&url(), &p, None);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let nc = client(&url()).await;
    let web = headers(&[("channel", "web")]);
    until_served(
        &nc,
        &format!("{p}.quote.warmup"),
        r#"{"id": 0, "symbol": "ACME"}"#,
        web.clone(),
    )
    .await;

    // Many requests at once on subjects the wildcard matches, each counted against its
    // own reply (its id comes back in the body).
    let mut tasks = tokio::task::JoinSet::new();
    for i in 1..=300u32 {
        let (nc, web, p) = (nc.clone(), web.clone(), p.clone());
        tasks.spawn(async move {
            let r = tokio::time::timeout(
                Duration::from_secs(20),
                nc.request_with_headers(
                    format!("{p}.quote.{}", i % 7),
                    web,
                    format!(r#"{{"id": {i}, "symbol": "ACME"}}"#).into(),
                ),
            )
            .await
            .expect("a reply in time")
            .expect("a reply");
            (i, r)
        });
    }
    let mut seen = HashSet::new();
    while let Some(r) = tasks.join_next().await {
        let (i, reply) = r.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(body["id"], i, "{body}");
        // `{{request.destination}}` is the subject the request came on, not the
        // mapping's wildcard.
        assert_eq!(body["subject"], format!("{p}.quote.{}", i % 7), "{body}");
        let h = reply.headers.expect("reply headers");
        assert_eq!(h.get("served-by").map(|v| v.as_str()), Some("decoy"));
        assert_eq!(h.get("echo").map(|v| v.as_str()), Some("web"));
        assert!(seen.insert(i));
    }
    assert_eq!(seen.len(), 300);

    // The fixed reply subject, after its delay.
    let mut out = nc.subscribe(format!("{p}.out")).await.unwrap();
    let mut lost = nc.subscribe(format!("{p}.unmatched")).await.unwrap();
    nc.flush().await.unwrap();
    nc.publish(format!("{p}.fixed"), r#"{"ping": true}"#.into())
        .await
        .unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(20), out.next())
        .await
        .expect("the reply on the fixed subject")
        .unwrap();
    assert_eq!(&pong.payload[..], b"pong");

    // Not matched (a header differs; a payload that is not UTF-8, let alone JSON):
    // moved to the unmatched subject with its reply subject, and not answered.
    let inbox = nc.new_inbox();
    let mut answers = nc.subscribe(inbox.clone()).await.unwrap();
    nc.publish_with_reply_and_headers(
        format!("{p}.quote.x"),
        inbox.clone(),
        headers(&[("channel", "batch")]),
        r#"{"id": 1, "symbol": "ACME"}"#.into(),
    )
    .await
    .unwrap();
    let moved = tokio::time::timeout(Duration::from_secs(20), lost.next())
        .await
        .expect("moved to the unmatched subject")
        .unwrap();
    assert_eq!(
        moved.reply.as_deref(),
        Some(inbox.as_str()),
        "keeps its reply subject"
    );
    assert_eq!(
        moved.headers.unwrap().get("channel").map(|v| v.as_str()),
        Some("batch")
    );
    nc.publish_with_reply(
        format!("{p}.fixed"),
        inbox.clone(),
        vec![0xff, 0xfe, 0x00, b'{'].into(),
    )
    .await
    .unwrap();
    let moved = tokio::time::timeout(Duration::from_secs(20), lost.next())
        .await
        .expect("the malformed payload moved too")
        .unwrap();
    assert_eq!(&moved.payload[..], &[0xff, 0xfe, 0x00, b'{']);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), answers.next())
            .await
            .is_err(),
        "an unmatched request gets no reply"
    );
    // And decoy goes on serving.
    until_served(
        &nc,
        &format!("{p}.quote.after"),
        r#"{"id": 9, "symbol": "ACME"}"#,
        web,
    )
    .await;

    let metrics = crate::common::get(server.http_addr, "/__admin/metrics")
        .await
        .body;
    assert!(
        metric(
            &metrics,
            r#"decoy_requests_total{transport="nats",outcome="matched"} "#
        ) >= 303,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            r#"decoy_requests_total{transport="nats",outcome="unmatched"} "#
        ),
        2,
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn two_decoys_in_one_queue_group_answer_each_request_once() {
    let p = prefix();
    let dir = root(&url(), &p, None);
    let a = crate::common::serve(dir.path()).await;
    let b = crate::common::serve(dir.path()).await;
    let nc = client(&url()).await;
    let web = headers(&[("channel", "web")]);
    // Both subscribed: each answers a request for a subject of its own? No: both share
    // the group, so wait until each has served one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let served = |s: &decoy::server::Running| {
        let addr = s.http_addr;
        async move {
            metric(
                &crate::common::get(addr, "/__admin/metrics").await.body,
                r#"decoy_requests_total{transport="nats",outcome="matched"} "#,
            )
        }
    };
    while served(&a).await == 0 || served(&b).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "both decoys never served"
        );
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            nc.request_with_headers(
                format!("{p}.quote.w"),
                web.clone(),
                r#"{"id": 0, "symbol": "ACME"}"#.into(),
            ),
        )
        .await;
    }
    let (before_a, before_b) = (served(&a).await, served(&b).await);

    // Requests to one inbox of our own: every reply is counted, so a request answered
    // by both decoys would show twice.
    let inbox = nc.new_inbox();
    let mut replies = nc.subscribe(inbox.clone()).await.unwrap();
    nc.flush().await.unwrap();
    const N: u32 = 400;
    for i in 1..=N {
        nc.publish_with_reply_and_headers(
            format!("{p}.quote.{i}"),
            inbox.clone(),
            web.clone(),
            format!(r#"{{"id": {i}, "symbol": "ACME"}}"#).into(),
        )
        .await
        .unwrap();
    }
    let mut count: HashMap<u64, u32> = HashMap::new();
    while count.len() < N as usize {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(20), replies.next()).await
        else {
            panic!("{} of {N} answered", count.len());
        };
        let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        *count.entry(body["id"].as_u64().unwrap()).or_default() += 1;
    }
    // Anything answered twice would have come by now.
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), replies.next()).await {
        let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        *count.entry(body["id"].as_u64().unwrap()).or_default() += 1;
    }
    assert!(
        count.values().all(|&n| n == 1),
        "answered more than once: {count:?}"
    );
    let (by_a, by_b) = (served(&a).await - before_a, served(&b).await - before_b);
    assert_eq!(by_a + by_b, u64::from(N));
    assert!(
        by_a > 0 && by_b > 0,
        "the group split the load: {by_a} and {by_b}"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn jetstream_requests_are_answered_and_acknowledged_after_their_replies() {
    let p = prefix();
    let nc = client(&url()).await;
    let js = jetstream::new(nc.clone());
    let name = stream_name();
    let _guard = stream(&js, &name, vec![format!("{p}.js.>")]).await;
    let dir = root(&url(), &p, Some(&name));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    let replies_subject = format!("{p}.replies");
    let mut replies = nc.subscribe(replies_subject.clone()).await.unwrap();
    nc.flush().await.unwrap();
    const N: u32 = 200;
    for i in 1..=N {
        js.publish_with_headers(
            format!("{p}.js.orders"),
            headers(&[
                ("reply-to", &replies_subject),
                ("Nats-Msg-Id", &format!("m-{i}")),
            ]),
            format!(r#"{{"id": {i}}}"#).into(),
        )
        .await
        .unwrap()
        .await
        .expect("stored");
    }
    let mut seen = HashSet::new();
    while seen.len() < N as usize {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(30), replies.next()).await
        else {
            panic!("{} of {N} answered", seen.len());
        };
        let text = String::from_utf8_lossy(&m.payload).into_owned();
        let id: u32 = text.strip_prefix("stored ").unwrap().parse().unwrap();
        // MSGID_TO_CORRELID: the request's Nats-Msg-Id comes back as Correlation-Id.
        assert_eq!(
            m.headers
                .unwrap()
                .get("Correlation-Id")
                .map(|v| v.as_str().to_owned()),
            Some(format!("m-{id}"))
        );
        seen.insert(id);
    }
    // Acknowledged: nothing pending on decoy's durable consumer.
    let info = all_acknowledged(&js, &name).await;
    assert_eq!(info.config.filter_subject, format!("{p}.js.orders"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_subjects_and_stream_names_are_refused_naming_file_field_and_reason() {
    let p = prefix();
    // A subject with a wildcard cannot be a reply subject; a stream name cannot hold a dot.
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "n", "connectionData": {"type": "nats", "uri": url()}}])
                .to_string(),
        ),
        (
            "mq-mappings/bad.json",
            &json!({"request": {"destination": format!("{p}.a")},
                    "response": {"destination": format!("{p}.*"), "text": "x"}})
            .to_string(),
        ),
        (
            "mq-mappings/bad-stream.json",
            &json!({"request": {"destination": format!("{p}.b"), "jetstream": {"stream": "A.B"}}})
                .to_string(),
        ),
    ]);
    let server = crate::common::serve(dir.path()).await;
    let problems: Vec<String> = server
        .report
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().any(|s| s.contains("mq-mappings/bad.json")
            && s.contains("response.destination")
            && s.contains("a message is published to one subject, without wildcards")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|s| s.contains("mq-mappings/bad-stream.json")
                && s.contains("request.jetstream.stream")
                && s.contains("may not contain")),
        "{problems:?}"
    );
    server.shutdown().await;
}

/// A JetStream request whose `reply-to` is no subject at all: its reply could never
/// be published. It is dropped and listed, and the request acknowledged rather than
/// redelivered for ever; the requests beside it are answered once each.
#[tokio::test]
async fn a_jetstream_request_with_an_impossible_reply_subject_is_acknowledged_not_redelivered() {
    let p = prefix();
    let nc = client(&url()).await;
    let js = jetstream::new(nc.clone());
    let name = stream_name();
    let _guard = stream(&js, &name, vec![format!("{p}.js.>")]).await;
    let dir = root(&url(), &p, Some(&name));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    let replies_subject = format!("{p}.replies");
    let mut replies = nc.subscribe(replies_subject.clone()).await.unwrap();
    nc.flush().await.unwrap();
    for (i, reply_to) in [
        (1, "bad subject"),
        (2, replies_subject.as_str()),
        (3, replies_subject.as_str()),
    ] {
        js.publish_with_headers(
            format!("{p}.js.orders"),
            headers(&[("reply-to", reply_to)]),
            format!(r#"{{"id": {i}}}"#).into(),
        )
        .await
        .unwrap()
        .await
        .expect("stored");
    }
    // Three seconds: a request going round would be delivered thousands of times.
    let mut answered: HashMap<String, usize> = HashMap::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some(m)) = tokio::time::timeout_at(until, replies.next()).await {
        *answered
            .entry(String::from_utf8_lossy(&m.payload).into_owned())
            .or_default() += 1;
    }
    assert_eq!(
        answered,
        HashMap::from([("stored 2".to_owned(), 1), ("stored 3".to_owned(), 1)])
    );
    let stream = js.get_stream(&name).await.unwrap();
    let mut consumer: jetstream::consumer::PullConsumer =
        stream.get_consumer("decoy-it").await.unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!(
        (info.num_ack_pending, info.num_pending, info.num_redelivered),
        (0, 0, 0),
        "{info:?}"
    );
    let problems = crate::common::get(server.http_addr, "/__admin/problems")
        .await
        .body;
    assert!(
        problems.contains("could not be sent") && problems.contains("holds whitespace"),
        "{problems}"
    );
    server.shutdown().await;
}

/// The texts a stream holds, oldest first.
async fn stream_texts(js: &jetstream::Context, name: &str) -> Vec<String> {
    let stream = js.get_stream(name).await.unwrap();
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
        .await
        .unwrap();
    let mut messages = consumer.messages().await.unwrap();
    let mut texts = Vec::new();
    while let Ok(Some(Ok(m))) =
        tokio::time::timeout(Duration::from_millis(500), messages.next()).await
    {
        texts.push(String::from_utf8_lossy(&m.payload).into_owned());
    }
    texts
}

/// A JetStream request's reply goes to a subject a stream holds, and that stream
/// refuses it (full, discarding new messages). The request is not acknowledged, so
/// nothing is lost: it comes again, and once the stream has room its reply is stored.
/// (A reply that only reached the server, a flush, would have had its request
/// acknowledged and been lost.)
#[tokio::test]
async fn a_reply_its_stream_refuses_is_not_lost_the_request_comes_again() {
    let p = prefix();
    let nc = client(&url()).await;
    let js = jetstream::new(nc.clone());
    let name = stream_name();
    let _guard = stream(&js, &name, vec![format!("{p}.js.>")]).await;
    let replies_subject = format!("{p}.kept-replies");
    let replies_name = stream_name();
    js.create_stream(jetstream::stream::Config {
        name: replies_name.clone(),
        subjects: vec![replies_subject.clone()],
        max_messages: 1,
        discard: jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .unwrap();
    let _replies_guard = StreamGuard {
        js: js.clone(),
        name: replies_name.clone(),
    };
    let dir = root(&url(), &p, Some(&name));
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);

    for i in 1..=2 {
        js.publish_with_headers(
            format!("{p}.js.orders"),
            headers(&[("reply-to", &replies_subject)]),
            format!(r#"{{"id": {i}}}"#).into(),
        )
        .await
        .unwrap()
        .await
        .expect("stored");
    }
    // One reply stored; the other refused, its request handed back (redelivered).
    // `None` until decoy has made its consumer.
    let consumer_info = || async {
        let stream = js.get_stream(&name).await.unwrap();
        let mut consumer: jetstream::consumer::PullConsumer =
            stream.get_consumer("decoy-it").await.ok()?;
        Some(consumer.info().await.unwrap().clone())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let info = consumer_info().await;
        // One request acknowledged, the other going round.
        if let Some(i) = &info
            && i.num_redelivered > 0
            && i.num_ack_pending as u64 + i.num_pending == 1
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refused reply's request was never delivered again, or both were: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = stream_texts(&js, &replies_name).await;
    assert_eq!(first.len(), 1, "{first:?}");

    // Room again: the request that comes next is answered, and acknowledged.
    js.get_stream(&replies_name)
        .await
        .unwrap()
        .purge()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let second = loop {
        let texts = stream_texts(&js, &replies_name).await;
        if !texts.is_empty() {
            break texts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refused reply was never stored once the stream had room"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut all = [first, second].concat();
    all.sort();
    assert_eq!(all, ["stored 1", "stored 2"]);
    all_acknowledged(&js, &name).await;
    server.shutdown().await;
}

/// A message decoy emits is persistent, so it waits for a stream's ack; a server
/// without JetStream has no stream to give one, and the message is published all the
/// same (its subscribers get it, and it counts as published, not failed).
#[tokio::test]
async fn an_emitted_message_reaches_a_server_without_jetstream() {
    let conf_dir = tempfile::tempdir().unwrap();
    let mut core_only = crate::common::brokers::NatsServer::configured(
        conf_dir.path(),
        "core",
        "listen: 127.0.0.1:PORT\n",
    );
    assert!(
        core_only.start().await,
        "nats-server runs (tests/run.sh installs Debian's nats-server)"
    );
    let subject = format!("{}.events", prefix());
    let stub = json!({
        "request": {"method": "POST", "url": "/orders"},
        "response": {"status": 201},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "core", "subject": subject,
                "body": "created"}}
        ]
    });
    let dir = crate::common::root(&[
        (
            "mq-connections.json",
            &json!([{"connectionId": "core", "connectionData": {"type": "nats", "uri": core_only.url()}}])
                .to_string(),
        ),
        ("mappings/orders.json", &stub.to_string()),
    ]);
    let server = crate::common::serve(dir.path()).await;
    assert_eq!(server.report.rejected, 0, "{:?}", server.report.problems);
    let nc = client(&core_only.url()).await;
    assert!(!nc.server_info().jetstream);
    let mut events = nc.subscribe(subject.clone()).await.unwrap();
    nc.flush().await.unwrap();

    let answer = crate::common::send(server.http_addr, "POST", "/orders", &[], "").await;
    assert_eq!(answer.status, 201);
    let m = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("the event")
        .unwrap();
    assert_eq!(&m.payload[..], b"created");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = crate::common::get(server.http_addr, "/__admin/metrics")
            .await
            .body;
        let published = metric(
            &text,
            "decoy_published_messages_total{outcome=\"published\"} ",
        );
        let failed = metric(&text, "decoy_published_messages_total{outcome=\"failed\"} ");
        if published + failed > 0 {
            assert_eq!((published, failed), (1, 0), "{text}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the message was never counted: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}
