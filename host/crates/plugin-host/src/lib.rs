//! WebAssembly plugins: custom matchers and response transformers, sandboxed.
//!
//! A plugin is a WebAssembly component built against `wit/plugin.wit`. A mapping names
//! it (`response.transformers`, `request.customMatcher.name`); the name resolves to
//! `<plugins dir>/<name>.wasm`, else to a plugin bundled in this binary. Nothing is
//! read or compiled until a loaded mapping names a plugin: a root without plugin
//! references never creates a wasm engine.
//!
//! How a call runs:
//! - one [`wasmtime::Engine`] for the process (pooling allocator, epoch interruption),
//!   created on the first load;
//! - per plugin, an [`InstancePre`] (imports resolved once) and a pool of warm
//!   instances, each in its own `Store`; a call takes one, sets a CPU deadline, calls,
//!   and gives it back. An instance whose call failed is dropped, never reused.
//!   `isolation: per-request` makes a fresh instance for every call;
//! - compiled code is cached on disk under the hash of the `.wasm` and of the engine's
//!   configuration, so a restart deserializes instead of compiling;
//! - replacing the `.wasm` file swaps in new code; calls already running finish on the
//!   old code, which they hold by `Arc`.
//!
//! Sandbox: WASI with no preopened directory, no environment, no arguments, no
//! sockets and empty stdio; clocks and random are allowed. Per call a CPU deadline
//! (epoch ticks) and per instance a memory cap (a `ResourceLimiter`).

mod call;
mod host_api;
mod load;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;

pub use call::PluginFailure;
pub use load::{PluginSettings, check_file};

wasmtime::component::bindgen!({
    path: "../../../wit",
    world: "transformer-and-matcher",
});

pub use self::decoy::plugin::types as wit;

/// How often the epoch ticker advances; deadlines are counted in these ticks.
const TICK: Duration = Duration::from_millis(5);

/// Plugins bundled in the binary: name → component bytes.
pub fn bundled() -> &'static [(&'static str, &'static [u8])] {
    &[(
        "response-template",
        include_bytes!(concat!(env!("OUT_DIR"), "/response-template.wasm")),
    )]
}

/// The process-wide wasm runtime, made on first use.
struct Runtime {
    engine: wasmtime::Engine,
    linker: wasmtime::component::Linker<host_api::State>,
}

/// Every plugin a loaded mapping has named, by name.
#[derive(Debug)]
pub struct Plugins {
    dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    runtime: OnceLock<Result<Runtime, String>>,
    loaded: Mutex<HashMap<String, Arc<Plugin>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

/// One plugin, as mappings hold it. Its code can be replaced (hot reload); its
/// key-value store and counters stay.
#[derive(Debug)]
pub struct Plugin {
    pub name: String,
    code: ArcSwap<Code>,
    pub(crate) kv: Mutex<BTreeMap<String, Vec<u8>>>,
    pub stats: PluginStats,
    /// It makes blocking WASI calls: call it off the async worker (see `call.rs`).
    pub(crate) needs_blocking: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
pub struct PluginStats {
    pub calls: AtomicU64,
    pub failures: AtomicU64,
    pub timeouts: AtomicU64,
    pub instances_created: AtomicU64,
}

/// Compiled code of one version of a plugin, and its pool of warm instances.
pub(crate) struct Code {
    pub(crate) origin: String,
    pub(crate) settings: PluginSettings,
    pub(crate) pre: wasmtime::component::InstancePre<host_api::State>,
    pub(crate) transformer: Option<exports::decoy::plugin::transformer::GuestIndices>,
    pub(crate) matcher: Option<exports::decoy::plugin::matcher::GuestIndices>,
    pub(crate) pool: Mutex<Vec<call::Warm>>,
    pub(crate) engine: wasmtime::Engine,
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code")
            .field("origin", &self.origin)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Plugins {
    /// `dir` holds `<name>.wasm` files (it need not exist); `cache_dir` keeps compiled
    /// code between runs (`None`: compile every time).
    pub fn new(dir: Option<PathBuf>, cache_dir: Option<PathBuf>) -> Plugins {
        Plugins {
            dir,
            cache_dir,
            runtime: OnceLock::new(),
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The default compiled-code cache: `$XDG_CACHE_HOME/decoy/plugins`, else
    /// `~/.cache/decoy/plugins`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("decoy").join("plugins"))
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether any plugin has been loaded (and so the engine created).
    pub fn engine_started(&self) -> bool {
        self.runtime.get().is_some()
    }

    fn runtime(&self) -> Result<&Runtime, String> {
        self.runtime
            .get_or_init(load::runtime)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether there is a plugin called `name` (loaded, a `<name>.wasm` in the plugins
    /// directory, or bundled), without loading it.
    pub fn exists(&self, name: &str) -> bool {
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        valid
            && (self.lock().contains_key(name)
                || bundled().iter().any(|(n, _)| *n == name)
                || self
                    .dir
                    .as_ref()
                    .is_some_and(|d| d.join(format!("{name}.wasm")).is_file()))
    }

    /// The plugin called `name`, loading and compiling it on first use. The error
    /// says what was looked for and why it cannot be used.
    pub fn get(&self, name: &str) -> Result<Arc<Plugin>, String> {
        if let Some(p) = self.lock().get(name) {
            return Ok(p.clone());
        }
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            || name.starts_with('.')
        {
            return Err(format!(
                "{name:?} is not a plugin name (letters, digits, '-', '_' and '.')"
            ));
        }
        let runtime = self.runtime()?;
        let code = load::load(
            runtime,
            self.dir.as_deref(),
            self.cache_dir.as_deref(),
            name,
        )?;
        let mut loaded = self.lock();
        // Another thread may have loaded it meanwhile: keep the first one.
        let plugin = loaded
            .entry(name.to_owned())
            .or_insert_with(|| {
                tracing::info!(plugin = name, origin = %code.origin, "plugin loaded");
                Arc::new(Plugin {
                    name: name.to_owned(),
                    code: ArcSwap::from_pointee(code),
                    kv: Mutex::new(BTreeMap::new()),
                    stats: PluginStats::default(),
                    needs_blocking: Default::default(),
                })
            })
            .clone();
        Ok(plugin)
    }

    /// Reloads `name` after its file changed, if it is loaded. Calls already running
    /// finish on the old code. On failure the old code stays and the error is returned.
    pub fn reload(&self, name: &str) -> Option<Result<(), String>> {
        let plugin = self.lock().get(name).cloned()?;
        let runtime = match self.runtime() {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(
            load::load(
                runtime,
                self.dir.as_deref(),
                self.cache_dir.as_deref(),
                name,
            )
            .map(|code| {
                tracing::info!(plugin = name, origin = %code.origin, "plugin reloaded");
                plugin.code.store(Arc::new(code));
            }),
        )
    }

    /// The loaded plugins, sorted by name.
    pub fn loaded(&self) -> Vec<Arc<Plugin>> {
        let mut v: Vec<_> = self.lock().values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Plugin>>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Plugin {
    pub fn has_transformer(&self) -> bool {
        self.code.load().transformer.is_some()
    }

    pub fn has_matcher(&self) -> bool {
        self.code.load().matcher.is_some()
    }
}
