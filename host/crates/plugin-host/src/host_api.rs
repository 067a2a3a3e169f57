//! What a plugin instance's `Store` holds, and the host functions it may import:
//! WASI (sandboxed) and decoy's `log`, `kv`, `request-info` and `cache`.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Guest;
use super::cache::ValueCache;
use super::decoy::plugin::{cache, kv, log, request_info, types};
use super::stdio::Stdio;

/// Limits of the `kv` store, per plugin.
const KV_MAX_KEY: usize = 1024;
const KV_MAX_VALUE: usize = 1 << 20;
const KV_MAX_KEYS: usize = 100_000;

pub(crate) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: Limits,
    /// What the guest writes to stdout and stderr (forwarded to the log per call).
    pub(crate) stdio: Stdio,
    /// The plugin this instance belongs to (for `kv` and log tags).
    plugin: Arc<Guest>,
    /// The `cache` of the code this instance runs.
    cache: Arc<ValueCache>,
    /// The mapping of the call under way (for log tags).
    pub(crate) mapping: String,
    /// The client's address for the call under way (`request-info.client-ip`); set
    /// before every call, so an instance never answers with an earlier call's.
    pub(crate) client_ip: Option<String>,
    /// Whether the call under way changed the `kv` store (such a call is not retried).
    pub(crate) side_effects: bool,
    /// When the call under way started, for its CPU deadline.
    pub(crate) clock: super::cpu_clock::CallClock,
    /// The CPU time the call under way may take: the plugin's timeout, or the
    /// budget of a `prepare` (see `call.rs`).
    pub(crate) budget: std::time::Duration,
}

/// The memory cap of one instance, and how much it has grown to (a
/// `ResourceLimiter`: wasmtime asks it before any linear memory grows).
#[derive(Debug)]
pub(crate) struct Limits {
    cap: usize,
    /// The largest linear memory of this instance, in bytes.
    pub(crate) peak: usize,
    /// A growth was refused because it would pass the cap.
    pub(crate) hit_cap: bool,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit_cap = true;
            return Err(wasmtime::Error::msg(format!(
                "growing memory to {desired} bytes would pass its limit of {} bytes",
                self.cap
            )));
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

impl State {
    pub(crate) fn new(
        plugin: Arc<Guest>,
        cache: Arc<ValueCache>,
        memory_limit: usize,
        budget: std::time::Duration,
    ) -> State {
        // Nothing from the host: no preopened directories, no environment, no
        // arguments, no sockets, stdin empty; stdout and stderr are captured in
        // memory (see `stdio.rs`).
        let stdio = Stdio::default();
        let wasi = WasiCtx::builder()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stdout(stdio.stdout.clone())
            .stderr(stdio.stderr.clone())
            .build();
        State {
            wasi,
            table: ResourceTable::new(),
            limits: Limits {
                cap: memory_limit,
                peak: 0,
                hit_cap: false,
            },
            stdio,
            plugin,
            cache,
            mapping: String::new(),
            client_ip: None,
            side_effects: false,
            clock: Default::default(),
            budget,
        }
    }

    /// Sends what the guest wrote to the log (`all`: an unfinished line too).
    pub(crate) fn forward_output(&mut self, all: bool) {
        self.stdio.forward(
            &self.plugin.name,
            &self.mapping,
            &self.plugin.line_budget,
            all,
        );
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for State {}

impl log::Host for State {
    fn log(&mut self, level: log::Level, message: String, fields: Vec<(String, String)>) {
        let plugin = self.plugin.name.as_str();
        let mapping = self.mapping.as_str();
        let fields = fields
            .iter()
            .map(|(k, v)| format!(" {k}={v:?}"))
            .collect::<String>();
        match level {
            log::Level::Trace => {
                tracing::trace!(target: "plugin", plugin, mapping, "{message}{fields}")
            }
            log::Level::Debug => {
                tracing::debug!(target: "plugin", plugin, mapping, "{message}{fields}")
            }
            log::Level::Info => {
                tracing::info!(target: "plugin", plugin, mapping, "{message}{fields}")
            }
            log::Level::Warn => {
                tracing::warn!(target: "plugin", plugin, mapping, "{message}{fields}")
            }
            log::Level::Error => {
                tracing::error!(target: "plugin", plugin, mapping, "{message}{fields}")
            }
        }
    }
}

impl request_info::Host for State {
    fn client_ip(&mut self) -> Option<String> {
        self.client_ip.clone()
    }

    fn hostname(&mut self) -> String {
        super::machine_hostname().to_owned()
    }
}

/// Not a side effect (see `side_effects`): a value is a copy of what the plugin
/// can make again, so a call that stored one may still be made again.
impl cache::Host for State {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        self.cache.get(&key)
    }

    fn put(&mut self, key: String, value: Vec<u8>) {
        self.cache.put(key, value);
    }
}

impl kv::Host for State {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        if let Some(shared) = &self.plugin.shared_kv {
            return shared.get(&self.plugin.name, &key).unwrap_or_else(|e| {
                tracing::warn!(target: "plugin", plugin = %self.plugin.name, "kv get {key:?}: {e}");
                None
            });
        }
        self.kv().get(&key).cloned()
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        if key.len() > KV_MAX_KEY {
            return Err(format!(
                "key is {} bytes; the limit is {KV_MAX_KEY}",
                key.len()
            ));
        }
        if value.len() > KV_MAX_VALUE {
            return Err(format!(
                "value is {} bytes; the limit is {KV_MAX_VALUE}",
                value.len()
            ));
        }
        if let Some(shared) = &self.plugin.shared_kv {
            self.side_effects = true;
            return shared.set(&self.plugin.name, &key, &value);
        }
        let mut kv = self.kv();
        if kv.len() >= KV_MAX_KEYS && !kv.contains_key(&key) {
            return Err(format!("the store is full ({KV_MAX_KEYS} keys)"));
        }
        kv.insert(key, value);
        drop(kv);
        self.side_effects = true;
        Ok(())
    }

    fn delete(&mut self, key: String) -> bool {
        self.side_effects = true;
        if let Some(shared) = &self.plugin.shared_kv {
            return shared.delete(&self.plugin.name, &key).unwrap_or_else(|e| {
                tracing::warn!(target: "plugin", plugin = %self.plugin.name, "kv delete {key:?}: {e}");
                false
            });
        }
        self.kv().remove(&key).is_some()
    }

    fn increment(&mut self, key: String, delta: i64) -> Result<i64, String> {
        if key.len() > KV_MAX_KEY {
            return Err(format!(
                "key is {} bytes; the limit is {KV_MAX_KEY}",
                key.len()
            ));
        }
        if let Some(shared) = &self.plugin.shared_kv {
            self.side_effects = true;
            return shared.increment(&self.plugin.name, &key, delta);
        }
        let mut kv = self.kv();
        let current = match kv.get(&key) {
            None => 0,
            Some(v) => std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| format!("the value at {key:?} is not a decimal integer"))?,
        };
        let next = current
            .checked_add(delta)
            .ok_or_else(|| format!("{current} + {delta} overflows"))?;
        if kv.len() >= KV_MAX_KEYS && !kv.contains_key(&key) {
            return Err(format!("the store is full ({KV_MAX_KEYS} keys)"));
        }
        kv.insert(key, next.to_string().into_bytes());
        drop(kv);
        self.side_effects = true;
        Ok(next)
    }

    fn keys(&mut self, prefix: String) -> Vec<String> {
        if let Some(shared) = &self.plugin.shared_kv {
            return shared.keys(&self.plugin.name, &prefix).unwrap_or_else(|e| {
                tracing::warn!(target: "plugin", plugin = %self.plugin.name, "kv keys {prefix:?}: {e}");
                Vec::new()
            });
        }
        self.kv()
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

impl State {
    fn kv(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Vec<u8>>> {
        self.plugin.kv.lock().unwrap_or_else(|p| p.into_inner())
    }
}
