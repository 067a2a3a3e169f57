//! decoy-state: state shared by several decoy instances behind a load balancer, in
//! Redis 7 or Valkey (`decoy serve --state redis://HOST:PORT/DB`). docs/scale-out.md
//! is the user's view.
//!
//! One [`SharedState`] per process implements the seams of `decoy_core::shared` and
//! the plugin runtime's `SharedKv`:
//!
//! - [`scenarios`]: every scenario's state in one Redis hash; the engine's choice
//!   among a request's candidate stubs and the move to the next state are one Lua
//!   script, so they are atomic across instances;
//! - [`stubs`]: admin-API stubs in a hash, each change numbered, kept in a short
//!   change log and announced on a pub/sub channel in the same script; every
//!   instance (the one that made the change too) reads the changes it lacks from the
//!   log and applies them in that order, and a (re)connected one, or one that finds a
//!   gap, first reads the whole hash;
//! - [`journal`]: the journal stays in each process (recording a request costs what
//!   it did); a query through the admin API fans in: it is published on a control
//!   channel, every instance pushes its entries onto a reply list, and the asker
//!   merges them;
//! - [`kv`]: each plugin's `kv` store is a hash.
//!
//! [`listener`] holds the one subscriber connection (announcements and fan-in
//! queries), reconnecting with backoff. [`wire`] holds the messages' formats and
//! checks: anything can PUBLISH on a Redis channel, so a message is only a hint to
//! read the stored state, or a query checked field by field; a malformed or foreign
//! one is logged (throttled) and ignored. Every key and channel is named after the
//! deployment (`--state-name`), so two deployments on one Redis never meet. Commands go through the `redis` crate's
//! `ConnectionManager` (multiplexed, reconnects by itself); every call is bounded by
//! `--state-timeout`. Nothing on a request's path touches Redis unless the request
//! reaches a scenario stub or a plugin's `kv`.
//!
//! May depend on: `decoy-spec`, `decoy-core`, `decoy-plugin-host`. Must not depend on:
//! transports (HTTP, MQ), the admin API, the binary.

mod health;
pub mod journal;
pub mod kv;
pub mod listener;
pub mod scenarios;
pub mod stubs;
pub(crate) mod wire;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use decoy_core::journal::Journal;
use decoy_core::shared::Unavailable;
use decoy_core::store::Store;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Default bound of one shared-state call (`--state-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// Default deployment name (`--state-name`): the prefix of every key and channel.
pub const DEFAULT_NAME: &str = "decoy";

/// How `decoy serve` connects.
#[derive(Debug, Clone)]
pub struct Options {
    /// `redis://[user:password@]HOST:PORT/DB` (or `rediss://` is refused: no TLS here).
    pub url: String,
    /// Bound of each call to Redis; past it the call fails (a 503 for its request).
    pub timeout: Duration,
    /// Start even when Redis cannot be reached, and keep trying (`--state-retry`);
    /// otherwise a failed first connection stops `decoy serve` with the reason.
    pub retry: bool,
    /// The deployment (`--state-name`): instances share state with the instances of
    /// the same name only; every key and channel starts with `<name>:`.
    pub name: String,
}

/// Checks a deployment name: 1 to 64 letters, digits, `_`, `-` or `.`. No `:`, so one
/// deployment's keys are never inside another's (`a` and `a:reply` would be).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err("a deployment name is 1 to 64 letters, digits, '_', '-' or '.'".to_owned())
    }
}

/// Redis key and channel names, all under the deployment's prefix (`<name>:`).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// The deployment name, as messages carry it.
    pub name: String,
    pub scenarios: String,
    pub stubs: String,
    pub removed: String,
    pub seq: String,
    /// The last changes, for instances catching up (a stream, ids `<change>-0`).
    pub log: String,
    pub events: String,
    pub control: String,
    pub prefix: String,
}

impl Keys {
    pub(crate) fn new(name: &str) -> Keys {
        let prefix = format!("{name}:");
        Keys {
            name: name.to_owned(),
            scenarios: format!("{prefix}scenarios"),
            stubs: format!("{prefix}stubs"),
            removed: format!("{prefix}stubs:removed"),
            seq: format!("{prefix}stubs:seq"),
            log: format!("{prefix}stubs:log"),
            events: format!("{prefix}events"),
            control: format!("{prefix}control"),
            prefix,
        }
    }

    pub fn kv(&self, plugin: &str) -> String {
        format!("{}kv:{plugin}", self.prefix)
    }

    /// Where the instances answer fan-in query `id`.
    pub fn reply(&self, id: &uuid::Uuid) -> String {
        format!("{}reply:{id}", self.prefix)
    }

    /// The key that exists while query `id` waits for answers: an instance answers
    /// (and clears or removes entries) only while it does.
    pub fn reply_open(&self, id: &uuid::Uuid) -> String {
        format!("{}reply:{id}:open", self.prefix)
    }

    /// The query id of one of this deployment's reply keys, or `None` for any other
    /// key (a stub hash, another deployment's key, anything).
    pub fn reply_id(&self, key: &str) -> Option<uuid::Uuid> {
        let id = key.strip_prefix(&self.prefix)?.strip_prefix("reply:")?;
        let id = uuid::Uuid::parse_str(id).ok()?;
        // Only the canonical spelling, so that the key is the one the asker waits on.
        (self.reply(&id) == key).then_some(id)
    }
}

/// The connection to the shared store and everything this instance shares.
pub struct SharedState {
    client: redis::Client,
    conn: ConnectionManager,
    /// This process, in announcements and fan-in replies.
    pub(crate) instance: String,
    pub(crate) timeout: Duration,
    pub(crate) keys: Keys,
    /// The runtime calls made outside it (tests, a plain thread) are run on.
    handle: tokio::runtime::Handle,
    /// The subscriber connection is up and this instance has read the whole stub list.
    pub(crate) subscribed: AtomicBool,
    /// Why this instance is not in step with the shared stubs, and since when (for
    /// `/__admin/problems`); `None` while it is.
    pub(crate) trouble: Mutex<Option<(SystemTime, String)>>,
    /// Ignored messages, logged at most one line per interval with a count.
    pub(crate) ignored: wire::Throttle,
    /// The number of the last stub change applied here.
    pub(crate) applied: tokio::sync::watch::Sender<u64>,
    pub(crate) store: OnceLock<Arc<Store>>,
    pub(crate) journal: OnceLock<Arc<Journal>>,
    /// Calls that failed, by what they were for (see `health.rs`).
    pub(crate) failures: health::Failures,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState")
            .field("instance", &self.instance)
            .field("timeout", &self.timeout)
            .field("subscribed", &self.subscribed)
            .finish_non_exhaustive()
    }
}

impl SharedState {
    /// Connects (inside a tokio runtime). Fails with the reason when Redis cannot be
    /// reached, unless `opts.retry`: then the first call connects, and the listener
    /// keeps trying.
    pub async fn connect(opts: &Options) -> Result<Arc<SharedState>, String> {
        check_name(&opts.name).map_err(|e| format!("--state-name {:?}: {e}", opts.name))?;
        if !opts.url.starts_with("redis://") {
            return Err(format!(
                "--state {:?}: expected redis://HOST:PORT/DB (Redis 7 or Valkey)",
                opts.url
            ));
        }
        let client = redis::Client::open(opts.url.as_str())
            .map_err(|e| format!("--state {:?}: {e}", opts.url))?;
        // Reconnection is bounded by the call timeout: a request never waits longer
        // than --state-timeout for Redis, and the next call tries again.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(opts.timeout))
            .set_response_timeout(Some(opts.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = if opts.retry {
            ConnectionManager::new_lazy_with_config(client.clone(), config)
                .map_err(|e| format!("--state {}: {e}", redacted(&opts.url)))?
        } else {
            let connecting = ConnectionManager::new_with_config(client.clone(), config);
            match tokio::time::timeout(opts.timeout, connecting).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return Err(format!(
                        "cannot connect to the shared state at {}: {e}",
                        redacted(&opts.url)
                    ));
                }
                Err(_) => {
                    return Err(format!(
                        "cannot connect to the shared state at {}: no answer within {:?}",
                        redacted(&opts.url),
                        opts.timeout
                    ));
                }
            }
        };
        let state = Arc::new(SharedState {
            client,
            conn,
            instance: uuid::Uuid::new_v4().to_string(),
            timeout: opts.timeout,
            keys: Keys::new(&opts.name),
            handle: tokio::runtime::Handle::current(),
            subscribed: AtomicBool::new(false),
            trouble: Mutex::new(None),
            ignored: wire::Throttle::new(Duration::from_secs(10)),
            applied: tokio::sync::watch::channel(0).0,
            store: OnceLock::new(),
            journal: OnceLock::new(),
            failures: Default::default(),
        });
        if !opts.retry {
            // Redis answers, and is one decoy can use (Lua scripts: Redis 2.6+).
            let pong: String = state
                .call(|mut c| async move { redis::cmd("PING").query_async(&mut c).await })
                .await
                .map_err(|e| e.to_string())?;
            if pong != "PONG" {
                return Err(format!("the shared state answered PING with {pong:?}"));
            }
        }
        Ok(state)
    }

    /// Starts sharing this instance's stubs and journal: subscribes, reads the
    /// shared stub list into `store`, then keeps listening. Returns once the first
    /// read is done, or after the timeout when Redis cannot be reached (with
    /// `--state-retry`; the listener keeps trying).
    pub async fn attach(self: &Arc<Self>, store: Arc<Store>, journal: Arc<Journal>) {
        let _ = self.store.set(store);
        let _ = self.journal.set(journal);
        let mut ready = self.applied.subscribe();
        tokio::spawn(listener::run(self.clone()));
        let subscribed = async {
            while !self.subscribed.load(Ordering::Acquire) {
                if ready.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(self.timeout * 3, subscribed).await;
    }

    /// Whether the subscriber connection is up (announcements are being heard).
    pub fn is_subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Acquire)
    }

    /// Runs one call on a clone of the managed connection, bounded by the timeout.
    pub(crate) async fn call<T, F, Fut>(&self, f: F) -> Result<T, Unavailable>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(self.timeout, f(self.conn.clone())).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if !e.is_timeout() => Err(Unavailable(format!("Redis: {e}"))),
            _ => Err(Unavailable(format!(
                "Redis did not answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// A connection of its own, for blocking commands (BLPOP) that must not hold up
    /// the shared multiplexed one.
    pub(crate) async fn dedicated(&self) -> Result<redis::aio::MultiplexedConnection, Unavailable> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(None);
        match tokio::time::timeout(
            self.timeout,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(Unavailable(format!("Redis: {e}"))),
            Err(_) => Err(Unavailable(format!(
                "Redis did not accept a connection within {:?}",
                self.timeout
            ))),
        }
    }

    /// Runs `f` to completion from synchronous code: the admin API's blocking
    /// threads, or a plugin call on an async worker (which tokio is told of, so its
    /// other tasks move elsewhere meanwhile).
    pub(crate) fn block_on<T>(
        &self,
        f: impl Future<Output = Result<T, Unavailable>>,
    ) -> Result<T, Unavailable> {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => match h.runtime_flavor() {
                tokio::runtime::RuntimeFlavor::CurrentThread => Err(Unavailable(
                    "a shared-state call from a single-threaded runtime cannot wait".into(),
                )),
                _ => tokio::task::block_in_place(|| h.block_on(f)),
            },
            Err(_) => self.handle.block_on(f),
        }
    }

    /// Notes why this instance is out of step with the shared stubs (`None`: back in
    /// step), for [`SharedState::problem`].
    pub(crate) fn set_trouble(&self, why: Option<String>) {
        let mut t = self.trouble.lock().unwrap_or_else(|p| p.into_inner());
        match why {
            None => *t = None,
            // The first reason of an outage, with its start, is the useful one.
            Some(why) if t.is_none() => *t = Some((SystemTime::now(), why)),
            Some(_) => {}
        }
    }

    /// Why this instance is not in step with the other instances, if it is not: the
    /// shared state's line in `/__admin/problems`.
    pub fn problem(&self) -> Option<String> {
        let t = self.trouble.lock().unwrap_or_else(|p| p.into_inner());
        let (since, why) = t.as_ref()?;
        let secs = since.elapsed().map(|d| d.as_secs()).unwrap_or(0);
        Some(format!(
            "shared state (--state-name {}): not in step with the other instances for {secs} s ({why}); stub changes and journal queries answer 503 until it reconnects and rereads the shared stubs",
            self.keys.name
        ))
    }

    /// Unavailable unless the subscriber connection is up: a change this instance
    /// could not hear announced would fork its state.
    pub(crate) fn require_subscribed(&self) -> Result<(), Unavailable> {
        if self.is_subscribed() {
            Ok(())
        } else {
            Err(Unavailable(
                "not subscribed to the shared state's announcements (reconnecting)".into(),
            ))
        }
    }
}

/// The URL without its password, for messages.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_name_is_a_short_word_without_a_colon() {
        for good in ["decoy", "team-a", "ci_42", "v1.2", &"x".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a:reply", "a b", "a*", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_deployments_own_reply_keys_are_reply_keys() {
        let keys = Keys::new("blue");
        let id = uuid::Uuid::new_v4();
        assert_eq!(keys.reply_id(&keys.reply(&id)), Some(id));
        for other in [
            keys.stubs.clone(),
            keys.reply_open(&id),
            Keys::new("green").reply(&id),
            format!("blue:reply:{}", id.simple()),
            format!("blue:reply:{}", id.to_string().to_uppercase()),
            "blue:reply:".to_owned(),
        ] {
            assert_eq!(keys.reply_id(&other), None, "{other}");
        }
    }

    #[test]
    fn a_url_is_shown_without_its_credentials() {
        assert_eq!(
            redacted("redis://u:secret@h:6379/0"),
            "redis://***@h:6379/0"
        );
        assert_eq!(redacted("redis://h:6379/2"), "redis://h:6379/2");
    }
}
