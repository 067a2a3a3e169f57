//! NATS faults on a private `nats-server` (started by the test on a free port, with
//! JetStream and a store of its own; never the machine's shared server): the server
//! down when decoy starts, killed and restarted while decoy works through stored
//! requests, and decoy itself stopped while requests arrive. Every JetStream request
//! is counted against its reply.

use std::collections::HashSet;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use futures_util::StreamExt as _;

use crate::common::brokers::NatsServer;
use crate::nats::{prefix, root, until_served};

/// Collects distinct reply ids from the replies stream through an ordered consumer.
async fn reply_ids(
    js: &jetstream::Context,
    stream: &str,
    want: usize,
    wait: Duration,
) -> HashSet<u32> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = HashSet::new();
    while seen.len() < want && tokio::time::Instant::now() < deadline {
        let Ok(s) = js.get_stream(stream).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let Ok(consumer) = s
            .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
            .await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let Ok(mut messages) = consumer.messages().await else {
            continue;
        };
        while seen.len() < want {
            match tokio::time::timeout(Duration::from_secs(2), messages.next()).await {
                Ok(Some(Ok(m))) => {
                    let text = String::from_utf8_lossy(&m.payload).into_owned();
                    if let Some(id) = text.strip_prefix("stored ").and_then(|s| s.parse().ok()) {
                        seen.insert(id);
                    }
                }
                _ => break,
            }
        }
    }
    seen
}

async fn connect_retrying(url: &str) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(url)
        .await
        .unwrap()
}

async fn publish_requests(
    js: &jetstream::Context,
    p: &str,
    reply: &str,
    ids: std::ops::RangeInclusive<u32>,
) {
    for i in ids {
        let mut h = HeaderMap::new();
        h.insert("reply-to", reply);
        js.publish_with_headers(
            format!("{p}.js.orders"),
            h,
            format!(r#"{{"id": {i}}}"#).into(),
        )
        .await
        .unwrap()
        .await
        .expect("stored");
    }
}

#[tokio::test]
async fn nothing_is_lost_with_jetstream_across_server_and_decoy_restarts() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("decoy_mq=info")
        .with_test_writer()
        .try_init();
    let mut server = NatsServer::jetstream();
    let p = prefix();
    let requests = "REQUESTS";
    let dir = root(&server.url(), &p, Some(requests));

    // The server is down when decoy starts: decoy starts anyway and keeps trying.
    let decoy = crate::common::serve(dir.path()).await;
    assert_eq!(decoy.report.rejected, 0, "{:?}", decoy.report.problems);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        server.start().await,
        "nats-server runs (tests/run.sh installs Debian's nats-server)"
    );
    let nc = connect_retrying(&server.url()).await;
    let js = jetstream::new(nc.clone());
    for (name, subject) in [
        (requests, format!("{p}.js.>")),
        ("REPLIES", format!("{p}.replies")),
    ] {
        js.create_stream(jetstream::stream::Config {
            name: name.into(),
            subjects: vec![subject],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let mut web = HeaderMap::new();
    web.insert("channel", "web");
    until_served(
        &nc,
        &format!("{p}.quote.1"),
        r#"{"id": 1, "symbol": "ACME"}"#,
        web.clone(),
    )
    .await;

    // Stored requests, then the server killed while decoy works through them, and
    // started again on the same store: every one is answered (some maybe twice).
    let reply = format!("{p}.replies");
    const N: u32 = 300;
    publish_requests(&js, &p, &reply, 1..=N).await;
    server.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        server.start().await,
        "nats-server runs (tests/run.sh installs Debian's nats-server)"
    );
    let nc = connect_retrying(&server.url()).await;
    let js = jetstream::new(nc.clone());
    let seen = reply_ids(&js, "REPLIES", N as usize, Duration::from_secs(60)).await;
    assert_eq!(seen.len(), N as usize, "answered across the server restart");
    // Core request-reply works again too.
    until_served(
        &nc,
        &format!("{p}.quote.2"),
        r#"{"id": 2, "symbol": "ACME"}"#,
        web.clone(),
    )
    .await;

    // decoy stopped: a core request finds no responder at once, a stored one waits.
    decoy.shutdown().await;
    let r = nc
        .request_with_headers(
            format!("{p}.quote.3"),
            web.clone(),
            r#"{"id": 3, "symbol": "ACME"}"#.into(),
        )
        .await;
    assert!(
        matches!(&r, Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders),
        "{r:?}"
    );
    publish_requests(&js, &p, &reply, N + 1..=N + 20).await;
    let decoy = crate::common::serve(dir.path()).await;
    let seen = reply_ids(&js, "REPLIES", N as usize + 20, Duration::from_secs(60)).await;
    assert_eq!(
        (N + 1..=N + 20).filter(|i| !seen.contains(i)).count(),
        0,
        "the requests sent while decoy was down were answered after it came back"
    );
    until_served(
        &nc,
        &format!("{p}.quote.4"),
        r#"{"id": 4, "symbol": "ACME"}"#,
        web,
    )
    .await;
    decoy.shutdown().await;
}
