//! The subscriber connection: stub-change announcements and the journal's fan-in
//! queries, one connection per instance.
//!
//! On every (re)connection it subscribes first, then reads the whole stub list (so
//! no change falls between the two), applies it, and from then on applies each
//! announcement newer than that list in the order Redis published them. When the
//! connection drops, the instance stops accepting stub changes and journal queries
//! (they answer 503) and reconnects with backoff; static stubs keep answering.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt as _;

use crate::SharedState;

/// Keeps the subscription alive for as long as the process runs.
pub(crate) async fn run(state: Arc<SharedState>) {
    let mut backoff = Duration::from_millis(50);
    let mut failures = 0u32;
    loop {
        let result = listen(&state).await;
        let was_up = state.subscribed.swap(false, Ordering::AcqRel);
        decoy_core::shared::set_connected(false);
        if was_up {
            backoff = Duration::from_millis(50);
            failures = 0;
        }
        if let Err(e) = result {
            // One line per outage, not one per retry.
            if failures == 0 {
                tracing::warn!(
                    "shared state: {e}; retrying (scenario requests, stub changes and journal queries answer 503 meanwhile)"
                );
            }
            failures += 1;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn listen(state: &Arc<SharedState>) -> Result<(), String> {
    let timeout = state.timeout;
    let mut pubsub = tokio::time::timeout(timeout, state.client.get_async_pubsub())
        .await
        .map_err(|_| format!("no subscriber connection within {timeout:?}"))?
        .map_err(|e| format!("subscriber connection: {e}"))?;
    for channel in [&state.keys.events, &state.keys.control] {
        tokio::time::timeout(timeout, pubsub.subscribe(channel))
            .await
            .map_err(|_| format!("SUBSCRIBE {channel}: no answer within {timeout:?}"))?
            .map_err(|e| format!("SUBSCRIBE {channel}: {e}"))?;
    }
    let (seq, stubs, removed) = state.snapshot().await.map_err(|e| e.to_string())?;
    {
        let state = state.clone();
        tokio::task::spawn_blocking(move || state.apply_snapshot(stubs, removed))
            .await
            .map_err(|e| format!("applying the shared stub list: {e}"))?;
    }
    let mut last = seq;
    state.subscribed.store(true, Ordering::Release);
    decoy_core::shared::set_connected(true);
    // The stored number, not the larger of it and the last one: a Redis that came
    // back empty numbers its changes from 1 again. (This also wakes `attach`.)
    state.applied.send_modify(|n| *n = seq);
    tracing::info!("shared state: subscribed, {seq} stub change(s) so far");
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let payload = String::from_utf8_lossy(msg.get_payload_bytes()).into_owned();
        if msg.get_channel_name() == state.keys.control {
            let state = state.clone();
            tokio::spawn(async move { state.answer(&payload).await });
            continue;
        }
        let mut parts = payload.splitn(3, '\n');
        let (Some(n), Some(kind)) = (
            parts.next().and_then(|n| n.parse::<u64>().ok()),
            parts.next(),
        ) else {
            tracing::warn!("shared state: unreadable announcement ignored");
            continue;
        };
        if n <= last {
            continue;
        }
        let (kind, body) = (kind.to_owned(), parts.next().unwrap_or("").to_owned());
        let applier = state.clone();
        tokio::task::spawn_blocking(move || applier.apply(&kind, &body))
            .await
            .map_err(|e| format!("applying stub change {n}: {e}"))?;
        last = n;
        state.applied.send_modify(|a| *a = n);
    }
    Err("the subscriber connection closed".into())
}
