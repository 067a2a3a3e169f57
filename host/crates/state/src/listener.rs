//! The subscriber connection: stub-change announcements and the journal's fan-in
//! queries, one connection per instance.
//!
//! On every (re)connection it subscribes first, then reads the whole stub list (so
//! no change falls between the two) and applies it. From then on an announcement of
//! a change newer than the last one applied here, and a check every
//! [`CHECK_EVERY`] (in case an announcement was lost), make it read the changes it
//! lacks from the stored log and apply them in order; a gap the log cannot fill
//! makes it reread the whole list. A message that fails its checks
//! ([`crate::wire`]) is logged (throttled) and ignored. When the connection drops or
//! the shared state cannot be read, the instance stops accepting stub changes and
//! journal queries (they answer 503), shows `decoy_shared_state_connected 0` and a
//! line in `/__admin/problems`, and reconnects with backoff; static stubs keep
//! answering.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt as _;

use crate::SharedState;
use crate::stubs::Since;
use crate::wire;

/// How often an instance checks the stored change counter without an announcement.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Journal queries answered at once; more are ignored (logged) until one ends.
const MAX_ANSWERING: usize = 16;

/// Keeps the subscription alive for as long as the process runs.
pub(crate) async fn run(state: Arc<SharedState>) {
    let mut backoff = Duration::from_millis(50);
    let mut failures = 0u32;
    loop {
        let result = listen(&state).await;
        let was_up = state.subscribed.swap(false, Ordering::AcqRel);
        if was_up {
            backoff = Duration::from_millis(50);
            failures = 0;
        }
        if let Err(e) = result {
            state.set_trouble(Some(e.clone()));
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
    let mut last = resync(state).await?;
    state.subscribed.store(true, Ordering::Release);
    state.set_trouble(None);
    // The stored number, not the larger of it and the last one: a Redis that came
    // back empty numbers its changes from 1 again. (This also wakes `attach`.)
    state.applied.send_modify(|n| *n = last);
    tracing::info!(
        "shared state: subscribed as deployment {:?}, {last} stub change(s) so far",
        state.keys.name
    );
    let answering = Arc::new(tokio::sync::Semaphore::new(MAX_ANSWERING));
    let mut check =
        tokio::time::interval_at(tokio::time::Instant::now() + CHECK_EVERY, CHECK_EVERY);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut messages = pubsub.on_message();
    loop {
        let msg = tokio::select! {
            msg = messages.next() => match msg {
                Some(msg) => msg,
                None => return Err("the subscriber connection closed".into()),
            },
            _ = check.tick() => {
                last = catch_up(state, last, None).await?;
                continue;
            }
        };
        let channel = msg.get_channel_name();
        let payload = msg.get_payload_bytes();
        if channel == state.keys.control {
            match wire::parse_query(&state.keys, payload) {
                Ok(q) => match answering.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let state = state.clone();
                        tokio::spawn(async move {
                            state.answer(q).await;
                            drop(permit);
                        });
                    }
                    Err(_) => state.ignored.warn(format_args!(
                        "more than {MAX_ANSWERING} journal queries at once on {channel}; one ignored"
                    )),
                },
                Err(e) => state
                    .ignored
                    .warn(format_args!("a message on {channel} ignored: {e}")),
            }
            continue;
        }
        match wire::parse_announcement(&state.keys, payload) {
            // Applied already, or covered by the list read at (re)connection.
            Ok(a) if a.seq <= last => {}
            Ok(a) => last = catch_up(state, last, Some(a.seq)).await?,
            Err(e) => state
                .ignored
                .warn(format_args!("a message on {channel} ignored: {e}")),
        }
    }
}

/// Applies the stored changes after `last` (the ones `announced` rang for, and any
/// other); rereads the whole list when the log cannot bring this instance up to
/// date. Returns the number of the last change applied.
async fn catch_up(
    state: &Arc<SharedState>,
    last: u64,
    announced: Option<u64>,
) -> Result<u64, String> {
    match state.since(last).await.map_err(|e| e.to_string())? {
        Since::Nothing => {
            if let Some(n) = announced {
                // A stray or forged announcement: nothing stored goes with it.
                state.ignored.warn(format_args!(
                    "change {n} was announced, but the stored changes end at {last}; ignored"
                ));
            }
            Ok(last)
        }
        Since::Changes(changes) => {
            let mut last = last;
            for c in changes {
                let applier = state.clone();
                let seq = c.seq;
                tokio::task::spawn_blocking(move || applier.apply(&c.kind, &c.payload))
                    .await
                    .map_err(|e| format!("applying stub change {seq}: {e}"))?;
                last = seq;
                state.applied.send_modify(|a| *a = seq);
            }
            Ok(last)
        }
        Since::Gap(why) => {
            tracing::warn!("shared state: {why}; rereading the whole stub list");
            let seq = resync(state).await?;
            state.applied.send_modify(|a| *a = seq);
            Ok(seq)
        }
    }
}

/// Reads the whole shared list and makes this instance's API stubs exactly it.
/// Returns the number of the last change it covers.
async fn resync(state: &Arc<SharedState>) -> Result<u64, String> {
    let (seq, stubs, removed) = state.snapshot().await.map_err(|e| e.to_string())?;
    let applier = state.clone();
    tokio::task::spawn_blocking(move || applier.apply_snapshot(stubs, removed))
        .await
        .map_err(|e| format!("applying the shared stub list: {e}"))?;
    Ok(seq)
}
