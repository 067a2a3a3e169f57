//! Admin-API stubs shared by every instance.
//!
//! Redis holds the list: a hash of stub id → `"<change number>\n<stub JSON>"`, a set
//! of file stubs removed through the API, a counter of changes, and a log of the last
//! [`LOG_LENGTH`] or so changes (a stream whose entry ids are the change numbers).
//! One Lua script per change updates them all and publishes an announcement ("change
//! N", [`crate::wire`]) on the events channel, so the numbers, the stored list, the
//! log and the announcements agree.
//!
//! An announcement is a doorbell, not the change: the listener reads the changes it
//! lacks from the log (with the counter, at one instant) and applies them in order,
//! the instance that made the change too (which waits until it has, so the admin API
//! reads its own writes). When the log does not hold every change it lacks (it
//! missed more than the log keeps), or the counter went backwards (a Redis that came
//! back empty), or a change in the log is unreadable, it rereads the whole list
//! instead. So a forged, lost or out-of-order announcement never makes an instance
//! apply something that is not stored, nor skip something that is, and no two
//! instances apply two changes in a different order.

use std::sync::Arc;

use decoy_core::mapping::{Mapping, ParseContext};
use decoy_core::shared::{StubReplica, Unavailable};
use decoy_core::store::Replicated;

use crate::SharedState;
use crate::health::Operation;

/// About how many changes the log keeps (Redis trims it approximately): an instance
/// that falls further behind rereads the whole list.
pub const LOG_LENGTH: u64 = 256;

/// KEYS: stubs hash, removed set, counter, log, events channel. ARGV[1]: the
/// announcement's text before the number; ARGV[2]: kind; then what the kind needs
/// (put: id, JSON; remove: id; remove-all: ids; reset: nothing); last, the log's
/// length. Returns the change's number.
const CHANGE: &str = r#"
local seq = redis.call('INCR', KEYS[3])
local kind = ARGV[2]
local payload = ''
if kind == 'put' then
  redis.call('HSET', KEYS[1], ARGV[3], seq .. '\n' .. ARGV[4])
  redis.call('SREM', KEYS[2], ARGV[3])
  payload = ARGV[4]
elseif kind == 'remove' then
  redis.call('HDEL', KEYS[1], ARGV[3])
  redis.call('SADD', KEYS[2], ARGV[3])
  payload = ARGV[3]
elseif kind == 'remove-all' then
  redis.call('DEL', KEYS[1])
  for i = 3, #ARGV - 1 do
    redis.call('SADD', KEYS[2], ARGV[i])
  end
elseif kind == 'reset' then
  redis.call('DEL', KEYS[1], KEYS[2])
else
  return redis.error_reply('unknown stub change ' .. kind)
end
-- A log ahead of the counter (the counter was deleted or set back): start it again.
local top = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
if top[1] and tonumber(string.match(top[1][1], '^(%d+)')) >= seq then
  redis.call('DEL', KEYS[4])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[#ARGV], seq .. '-0', 'kind', kind, 'payload', payload)
redis.call('PUBLISH', KEYS[5], ARGV[1] .. seq)
return seq
"#;

/// KEYS: counter, log. ARGV[1]: the first change wanted; ARGV[2]: how many at most.
/// Returns the counter and the log's changes from the first wanted on, read at one
/// instant.
const SINCE: &str = r#"
return { redis.call('GET', KEYS[1]) or '0', redis.call('XRANGE', KEYS[2], ARGV[1] .. '-0', '+', 'COUNT', ARGV[2]) }
"#;

/// KEYS: counter, stubs hash, removed set. Returns them read at one instant.
const SNAPSHOT: &str = r#"
return { redis.call('GET', KEYS[1]) or '0', redis.call('HGETALL', KEYS[2]), redis.call('SMEMBERS', KEYS[3]) }
"#;

static CHANGE_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(CHANGE));
static SINCE_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(SINCE));
static SNAPSHOT_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(SNAPSHOT));

/// One change read from the log.
#[derive(Debug)]
pub(crate) struct Change {
    pub seq: u64,
    pub kind: String,
    pub payload: String,
}

/// What the log says about the changes after the last one applied here.
#[derive(Debug)]
pub(crate) enum Since {
    /// Nothing newer is stored.
    Nothing,
    /// These changes, in order, bring this instance to the stored counter.
    Changes(Vec<Change>),
    /// The log cannot bring this instance up to date (why): reread the whole list.
    Gap(String),
}

impl SharedState {
    /// Stores and announces one change, then waits until this instance applied it.
    fn change(&self, args: Vec<String>) -> Result<(), Unavailable> {
        self.require_subscribed()?;
        self.block_on(async {
            let mut invocation = CHANGE_SCRIPT.key(&self.keys.stubs);
            invocation
                .key(&self.keys.removed)
                .key(&self.keys.seq)
                .key(&self.keys.log)
                .key(&self.keys.events)
                .arg(crate::wire::announcement_head(&self.keys, &self.instance));
            for a in &args {
                invocation.arg(a);
            }
            invocation.arg(LOG_LENGTH);
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

    /// The stored changes after `last`, checked to follow on from it without a gap.
    pub(crate) async fn since(&self, last: u64) -> Result<Since, Unavailable> {
        let keys = (self.keys.seq.clone(), self.keys.log.clone());
        type Entry = (String, Vec<(String, String)>);
        let (stored, entries): (String, Vec<Entry>) = self
            .call(|mut c| async move {
                SINCE_SCRIPT
                    .key(keys.0)
                    .key(keys.1)
                    .arg(last.saturating_add(1))
                    .arg(LOG_LENGTH * 2)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let Ok(stored) = stored.parse::<u64>() else {
            return Ok(Since::Gap(format!("the change counter holds {stored:?}")));
        };
        if stored == last {
            return Ok(Since::Nothing);
        }
        if stored < last {
            return Ok(Since::Gap(format!(
                "the change counter went back from {last} to {stored} (Redis emptied or restarted?)"
            )));
        }
        let mut changes = Vec::with_capacity(entries.len());
        let mut next = last + 1;
        for (id, fields) in entries {
            let seq = id.strip_suffix("-0").and_then(|n| n.parse::<u64>().ok());
            if seq != Some(next) {
                return Ok(Since::Gap(format!(
                    "the change log holds {id:?} where change {next} belongs"
                )));
            }
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            };
            let (Some(kind), Some(payload)) = (field("kind"), field("payload")) else {
                return Ok(Since::Gap(format!(
                    "change {next} in the log is incomplete"
                )));
            };
            if !matches!(kind.as_str(), "put" | "remove" | "remove-all" | "reset") {
                return Ok(Since::Gap(format!(
                    "change {next} in the log is of an unknown kind {kind:?}"
                )));
            }
            changes.push(Change {
                seq: next,
                kind,
                payload,
            });
            if next == stored {
                return Ok(Since::Changes(changes));
            }
            next += 1;
        }
        Ok(Since::Gap(format!(
            "changes {next} to {stored} are no longer in the log"
        )))
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
            .map_err(|e| self.failed(Operation::Stubs, e))
    }

    fn remove(&self, id: &str) -> Result<(), Unavailable> {
        self.change(vec!["remove".into(), id.to_owned()])
            .map_err(|e| self.failed(Operation::Stubs, e))
    }

    fn remove_all(&self, ids: &[Arc<str>]) -> Result<(), Unavailable> {
        let mut args = vec!["remove-all".to_owned()];
        args.extend(ids.iter().map(|id| id.to_string()));
        self.change(args)
            .map_err(|e| self.failed(Operation::Stubs, e))
    }

    fn reset(&self) -> Result<(), Unavailable> {
        self.change(vec!["reset".into()])
            .map_err(|e| self.failed(Operation::Stubs, e))
    }

    fn problem(&self) -> Option<String> {
        SharedState::problem(self)
    }
}
