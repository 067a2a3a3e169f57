//! Admin-API stubs shared by every instance.
//!
//! Redis holds the list: a hash of stub id → `"<change number>\n<stub JSON>"`, a set
//! of file stubs removed through the API, and a counter of changes. One Lua script
//! per change updates them and publishes `"<number>\n<kind>\n<payload>"` on the
//! events channel, so the numbers, the stored list and the announcements agree.
//! Every instance applies announcements in the order Redis published them, the one
//! that made the change too (it waits until it has, so the admin API reads its own
//! writes); a (re)connected instance first reads the whole list and skips the
//! announcements it already covers. So no two instances apply two changes in a
//! different order.

use std::sync::Arc;

use decoy_core::mapping::{Mapping, ParseContext};
use decoy_core::shared::{StubReplica, Unavailable};
use decoy_core::store::Replicated;

use crate::SharedState;

/// KEYS: stubs hash, removed set, counter, events channel. ARGV[1]: kind; the rest
/// depends on it (put: id, JSON; remove: id; remove-all: ids; reset: nothing).
/// Returns the change's number.
const CHANGE: &str = r#"
local seq = redis.call('INCR', KEYS[3])
local kind = ARGV[1]
local payload = ''
if kind == 'put' then
  redis.call('HSET', KEYS[1], ARGV[2], seq .. '\n' .. ARGV[3])
  redis.call('SREM', KEYS[2], ARGV[2])
  payload = ARGV[3]
elseif kind == 'remove' then
  redis.call('HDEL', KEYS[1], ARGV[2])
  redis.call('SADD', KEYS[2], ARGV[2])
  payload = ARGV[2]
elseif kind == 'remove-all' then
  redis.call('DEL', KEYS[1])
  for i = 2, #ARGV do
    redis.call('SADD', KEYS[2], ARGV[i])
  end
elseif kind == 'reset' then
  redis.call('DEL', KEYS[1], KEYS[2])
end
redis.call('PUBLISH', KEYS[4], seq .. '\n' .. kind .. '\n' .. payload)
return seq
"#;

/// KEYS: counter, stubs hash, removed set. Returns them read at one instant.
const SNAPSHOT: &str = r#"
return { redis.call('GET', KEYS[1]) or '0', redis.call('HGETALL', KEYS[2]), redis.call('SMEMBERS', KEYS[3]) }
"#;

static CHANGE_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(CHANGE));
static SNAPSHOT_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(SNAPSHOT));

impl SharedState {
    /// Stores and announces one change, then waits until this instance applied it.
    fn change(&self, args: Vec<String>) -> Result<(), Unavailable> {
        self.require_subscribed()?;
        self.block_on(async {
            let mut invocation = CHANGE_SCRIPT.key(&self.keys.stubs);
            invocation
                .key(&self.keys.removed)
                .key(&self.keys.seq)
                .key(&self.keys.events);
            for a in &args {
                invocation.arg(a);
            }
            let seq: u64 = self
                .call(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            let mut applied = self.applied.subscribe();
            let caught_up = applied.wait_for(|&n| n >= seq);
            match tokio::time::timeout(self.timeout, caught_up).await {
                Ok(Ok(_)) => Ok(()),
                _ => Err(Unavailable(format!(
                    "change {seq} was stored but not heard back within {:?}; it is applied when the subscription recovers",
                    self.timeout
                ))),
            }
        })
    }

    /// The whole shared list: the last change number, the stubs in the order they
    /// were last changed, the removed file stubs.
    pub(crate) async fn snapshot(&self) -> Result<(u64, Vec<String>, Vec<String>), Unavailable> {
        let keys = (
            self.keys.seq.clone(),
            self.keys.stubs.clone(),
            self.keys.removed.clone(),
        );
        let (seq, stubs, removed): (String, Vec<(String, String)>, Vec<String>) = self
            .call(|mut c| async move {
                SNAPSHOT_SCRIPT
                    .key(keys.0)
                    .key(keys.1)
                    .key(keys.2)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let mut numbered: Vec<(u64, String)> = stubs
            .into_iter()
            .filter_map(|(_, v)| {
                let (n, json) = v.split_once('\n')?;
                Some((n.parse().ok()?, json.to_owned()))
            })
            .collect();
        numbered.sort_by_key(|(n, _)| *n);
        Ok((
            seq.parse().unwrap_or(0),
            numbered.into_iter().map(|(_, j)| j).collect(),
            removed,
        ))
    }

    /// Applies one announcement (`kind`, `payload`) to the store.
    pub(crate) fn apply(&self, kind: &str, payload: &str) {
        let Some(store) = self.store.get() else {
            return;
        };
        let change = match kind {
            "put" => match parse(payload, store.context()) {
                Some(m) => Replicated::Put(m),
                None => return,
            },
            "remove" => Replicated::Remove(payload.to_owned()),
            "remove-all" => Replicated::RemoveAll,
            "reset" => Replicated::Reset,
            other => {
                tracing::warn!("shared state: unknown stub change {other:?} ignored");
                return;
            }
        };
        store.apply_replicated(change);
    }

    /// Replaces this instance's API stubs with the shared list.
    pub(crate) fn apply_snapshot(&self, stubs: Vec<String>, removed: Vec<String>) {
        let Some(store) = self.store.get() else {
            return;
        };
        let stubs = stubs
            .iter()
            .filter_map(|json| parse(json, store.context()))
            .collect();
        store.apply_replicated(Replicated::Sync { stubs, removed });
    }
}

/// A shared stub, parsed as the admin API parses one; a stub this instance cannot
/// load (a plugin missing here) is logged and left out.
fn parse(json: &str, ctx: &ParseContext) -> Option<Mapping> {
    let v: serde_json::Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("shared state: a stored stub is not JSON ({e}); left out");
            return None;
        }
    };
    match Mapping::parse(&v, ctx, None, &mut Vec::new()) {
        Ok(m) => Some(m),
        Err(errs) => {
            let id = v.get("id").and_then(|i| i.as_str()).unwrap_or("?");
            let reasons: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            tracing::error!(
                "shared state: stub {id} cannot be served by this instance: {}",
                reasons.join("; ")
            );
            None
        }
    }
}

impl StubReplica for SharedState {
    fn put(&self, m: &Mapping) -> Result<(), Unavailable> {
        self.change(vec!["put".into(), m.id.to_string(), m.json.to_string()])
    }

    fn remove(&self, id: &str) -> Result<(), Unavailable> {
        self.change(vec!["remove".into(), id.to_owned()])
    }

    fn remove_all(&self, ids: &[Arc<str>]) -> Result<(), Unavailable> {
        let mut args = vec!["remove-all".to_owned()];
        args.extend(ids.iter().map(|id| id.to_string()));
        self.change(args)
    }

    fn reset(&self) -> Result<(), Unavailable> {
        self.change(vec!["reset".into()])
    }
}
