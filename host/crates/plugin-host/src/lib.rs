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
//! - a transformer that exports `prepare` has it called on an instance before that
//!   instance first transforms a mapping's answer (and again when the answer
//!   changes, told by its [`AnswerKey`], which a caller with a fixed answer makes
//!   once), under a budget of seconds rather than the call's deadline: what it
//!   compiles for the mapping then costs the calls nothing;
//! - compiled code is cached on disk under the hash of the `.wasm` and of the engine's
//!   configuration, so a restart deserializes instead of compiling;
//! - replacing the `.wasm` file swaps in new code; calls already running finish on the
//!   old code, which they hold by `Arc`. Compilations of one plugin may overlap (a
//!   file replaced while it compiles): each is numbered as it reads the files, and
//!   only the newest read's result is published, whichever ends last; the files are
//!   read again when it ends, and compiled again if they changed.
//!
//! Sandbox: WASI with no preopened directory, no environment, no arguments, no
//! sockets and empty stdio; clocks and random are allowed. Per call a CPU deadline
//! (epoch ticks) and per instance a memory cap (a `ResourceLimiter`).
//!
//! What a plugin may ask the host is `log`, `kv`, `request-info` (the client's
//! address, which a [`PluginRequest`] carries beside the WIT record, and the
//! machine's name) and `cache` (values shared by the instances of one version of
//! the plugin: see `cache.rs`). This crate sees those as plain data: it knows
//! nothing of HTTP.

mod cache;
mod call;
mod cpu_clock;
mod host_api;
mod load;
mod stdio;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;

pub use call::{AnswerKey, PluginFailure};
pub use load::{CheckReport, PluginSettings, check_file};

wasmtime::component::bindgen!({
    path: "../../../wit",
    world: "any-plugin",
});

pub use self::decoy::plugin::types as wit;

/// A request as a plugin call sees it: the WIT record it is passed, and what the
/// host answers through `request-info` during that call. The client's address is
/// not a field of the record because a record cannot change within `0.1` without
/// breaking every plugin built against it; a new interface can be added instead,
/// and plugins built before it simply do not import it.
#[derive(Debug, Clone)]
pub struct PluginRequest {
    pub request: wit::Request,
    /// The client's IP address as text (`request-info.client-ip`): `None` for a
    /// message from a queue.
    pub client_ip: Option<String>,
}

impl From<wit::Request> for PluginRequest {
    /// A request with nothing for `request-info` to tell (a message).
    fn from(request: wit::Request) -> PluginRequest {
        PluginRequest {
            request,
            client_ip: None,
        }
    }
}

/// The machine's name as `request-info.hostname` gives it, which is what WireMock's
/// `{{hostname}}` writes (Java's `InetAddress.getLocalHost().getHostName()`): the
/// host name when it resolves to an address, else `localhost`. It is looked up once
/// per process, as Java does; the plugin runtime starts the look-up on a thread of
/// its own (a name missing from the hosts file may wait on DNS), and a call that
/// asks before it ended waits for it.
pub fn machine_hostname() -> &'static str {
    static HOSTNAME: OnceLock<String> = OnceLock::new();
    HOSTNAME.get_or_init(|| {
        let name = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        if name.is_empty() || name == "localhost" {
            return "localhost".to_owned();
        }
        use std::net::ToSocketAddrs;
        let resolves = (name.as_str(), 0)
            .to_socket_addrs()
            .is_ok_and(|mut addrs| addrs.next().is_some());
        if resolves {
            name
        } else {
            tracing::warn!(
                "this machine's name {name:?} does not resolve to an address; plugins asking for the host name get \"localhost\", as WireMock's {{{{hostname}}}} writes then"
            );
            "localhost".to_owned()
        }
    })
}

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

/// Called with a plugin's name when a load that outlived [`Plugins::set_load_wait`]
/// ends (mappings accepted while it compiled may now be checked against it).
pub type LoadedHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Sees every compilation of a plugin's files. Tests use it to hold a compilation
/// while a file changes, so that two compilations end in the order a slow machine
/// might end them.
pub trait LoadObserver: Send + Sync {
    /// On the compiling thread, once the files are read (`sha256`: of the `.wasm`
    /// bytes) and before they are compiled. It may block.
    fn compiling(&self, _plugin: &str, _sha256: &str) {}
    /// Once that compilation's result has been published, kept from use, or dropped.
    fn finished(&self, _plugin: &str, _sha256: &str) {}
}

/// Every plugin a loaded mapping has named, by name.
#[derive(Debug)]
pub struct Plugins {
    inner: Arc<Inner>,
}

struct Inner {
    dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    runtime: OnceLock<Result<Arc<Runtime>, String>>,
    loaded: Mutex<HashMap<String, Arc<Plugin>>>,
    /// Loads that failed after their caller stopped waiting, with the state of the
    /// files then: the same files fail at once, changed ones are tried again.
    failures: Mutex<HashMap<String, (FilesStamp, String)>>,
    /// How long `get` waits for a compilation (`None`: until it ends).
    wait: Mutex<Option<Duration>>,
    on_loaded: Mutex<Option<LoadedHook>>,
    observer: Mutex<Option<Arc<dyn LoadObserver>>>,
    /// The `kv` store shared by several decoy instances (`--state`), when set.
    shared_kv: OnceLock<Arc<dyn SharedKv>>,
}

/// A `kv` store outside the process, shared by every decoy instance (`decoy serve
/// --state`); without it each plugin's store is an in-memory map. Calls come from a
/// plugin call on an async worker: an implementation that waits must say so to its
/// runtime (tokio's `block_in_place`). A failure is the text a plugin sees (or, for
/// `get`, `delete` and `keys`, which cannot fail in the WIT, is logged).
pub trait SharedKv: Send + Sync + std::fmt::Debug {
    fn get(&self, plugin: &str, key: &str) -> Result<Option<Vec<u8>>, String>;
    fn set(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), String>;
    fn delete(&self, plugin: &str, key: &str) -> Result<bool, String>;
    fn increment(&self, plugin: &str, key: &str, delta: i64) -> Result<i64, String>;
    fn keys(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, String>;
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("dir", &self.dir)
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

/// Sizes and modification times of a plugin's `.wasm` and settings files.
type FilesStamp = [Option<(u64, std::time::SystemTime)>; 2];

/// Where a plugin's load stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    /// Compiling on a background thread; `waited_out`: a caller stopped waiting.
    Loading {
        waited_out: bool,
    },
    Ready,
    Failed(String),
}

/// One plugin, as mappings hold it. Its code can be replaced (hot reload); its
/// key-value store and counters stay.
#[derive(Debug)]
pub struct Plugin {
    pub name: String,
    /// `None` while the first load is still compiling.
    code: ArcSwapOption<Code>,
    /// How many times its files have been read for a compilation. Each compilation
    /// takes the next number as it reads them; only the one holding the latest
    /// number may publish its result, so a compilation of older files that ends
    /// after a newer one is dropped (see [`Inner::compile`]).
    reads: AtomicU64,
    status: Mutex<Status>,
    loaded: Condvar,
    /// What its instances reach through the host interfaces.
    pub(crate) guest: Arc<Guest>,
    pub stats: PluginStats,
}

/// The part of a plugin its instances call back into through the host interfaces:
/// its name, its `kv` store and its log budget. An instance holds this and never the
/// [`Plugin`]: warm instances are kept in their plugin's pool, so a handle from an
/// instance back to its plugin would be a cycle keeping both, and the wasm engine
/// under them, alive after the plugin is dropped.
#[derive(Debug)]
pub(crate) struct Guest {
    pub(crate) name: String,
    pub(crate) kv: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Used instead of `kv` when state is shared between instances.
    pub(crate) shared_kv: Option<Arc<dyn SharedKv>>,
    /// How many lines of guest output may be logged now (see `stdio.rs`).
    pub(crate) line_budget: Mutex<stdio::LineBudget>,
}

#[derive(Debug, Default)]
pub struct PluginStats {
    pub calls: AtomicU64,
    pub failures: AtomicU64,
    pub timeouts: AtomicU64,
    pub instances_created: AtomicU64,
    /// Pooled instances dropped before their memory or call count reached a limit.
    pub instances_retired: AtomicU64,
    /// Calls made again on a fresh instance after their instance hit its memory cap.
    pub retries: AtomicU64,
    /// Calls answered "still loading" (the plugin was compiling).
    pub loading: AtomicU64,
    /// Work the host does for this plugin without calling it, counted by whoever does
    /// it (decoy-core for the bundled `response-template`): templates compiled when
    /// their stubs loaded...
    pub host_compiled: AtomicU64,
    /// ...and answers rendered by the host from them, with no call (not counted in
    /// `calls`).
    pub host_rendered: AtomicU64,
    /// Calls of its `prepare` (an instance made ready for a mapping's answer, see
    /// `call.rs`) that succeeded: once per instance and answer, not per call.
    pub prepares: AtomicU64,
    /// Compilations made inside its instances (templates, for `response-template`),
    /// as each instance reports them in `prepare` (see `call.rs`): the sum over its
    /// instances, each counting since it started. Plugins without `prepare` report
    /// none.
    pub compilations: AtomicU64,
    /// The last failure's time and reason (written only when a call fails).
    pub last_error: Mutex<Option<(std::time::SystemTime, String)>>,
}

/// Compiled code of one version of a plugin, and its pool of warm instances.
pub(crate) struct Code {
    pub(crate) origin: String,
    /// What it was compiled from.
    pub(crate) fingerprint: load::Fingerprint,
    pub(crate) settings: PluginSettings,
    pub(crate) pre: wasmtime::component::InstancePre<host_api::State>,
    pub(crate) transformer: Option<exports::decoy::plugin::transformer::GuestIndices>,
    pub(crate) matcher: Option<exports::decoy::plugin::matcher::GuestIndices>,
    /// `prepare`, when the plugin exports it beside its transformer.
    pub(crate) prepare: Option<exports::decoy::plugin::prepare::GuestIndices>,
    pub(crate) pool: Mutex<Vec<call::Warm>>,
    pub(crate) engine: wasmtime::Engine,
    /// The `cache` its instances share: of this code, so a reload starts empty.
    pub(crate) cache: Arc<cache::ValueCache>,
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code")
            .field("origin", &self.origin)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Plugins {
    /// `dir` holds `<name>.wasm` files (it need not exist); `cache_dir` keeps compiled
    /// code between runs (`None`: compile every time).
    pub fn new(dir: Option<PathBuf>, cache_dir: Option<PathBuf>) -> Plugins {
        Plugins {
            inner: Arc::new(Inner {
                dir,
                cache_dir,
                runtime: OnceLock::new(),
                loaded: Mutex::new(HashMap::new()),
                failures: Mutex::new(HashMap::new()),
                wait: Mutex::new(None),
                on_loaded: Mutex::new(None),
                observer: Mutex::new(None),
                shared_kv: OnceLock::new(),
            }),
        }
    }

    /// Plugins loaded from now on keep their `kv` entries in `kv` (set once, before
    /// any mapping is loaded, when state is shared between instances).
    pub fn set_shared_kv(&self, kv: Arc<dyn SharedKv>) {
        let _ = self.inner.shared_kv.set(kv);
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
        self.inner.dir.as_deref()
    }

    /// Whether any plugin has been loaded (and so the engine created).
    pub fn engine_started(&self) -> bool {
        self.inner.runtime.get().is_some()
    }

    /// How long [`get`](Self::get) waits for a plugin to compile. `None` (the
    /// default: `validate`, the first load of `serve`) waits until it is done. With a
    /// bound, a plugin still compiling when it passes is returned anyway: calls then
    /// fail with [`PluginFailure::loading`] until it is ready, and the hook of
    /// [`on_loaded`](Self::on_loaded) runs when it is.
    pub fn set_load_wait(&self, wait: Option<Duration>) {
        *lock(&self.inner.wait) = wait;
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
            && (lock(&self.inner.loaded).contains_key(name)
                || bundled().iter().any(|(n, _)| *n == name)
                || self
                    .inner
                    .dir
                    .as_ref()
                    .is_some_and(|d| d.join(format!("{name}.wasm")).is_file()))
    }

    /// Whether `name` is a plugin bundled in this binary that no `<name>.wasm` in the
    /// plugins directory replaces.
    pub fn is_bundled(&self, name: &str) -> bool {
        bundled().iter().any(|(n, _)| *n == name)
            && !self
                .inner
                .dir
                .as_ref()
                .is_some_and(|d| d.join(format!("{name}.wasm")).is_file())
    }

    /// Sets what sees each compilation (see [`LoadObserver`]).
    pub fn observe_loads(&self, observer: Arc<dyn LoadObserver>) {
        *lock(&self.inner.observer) = Some(observer);
    }

    /// Sets what runs when a load that outlived the wait ends.
    pub fn on_loaded(&self, hook: LoadedHook) {
        *lock(&self.inner.on_loaded) = Some(hook);
    }

    fn runtime(&self) -> Result<Arc<Runtime>, String> {
        self.inner
            .runtime
            .get_or_init(|| load::runtime().map(Arc::new))
            .clone()
    }

    /// The plugin called `name`, loading and compiling it on first use (on a
    /// thread of its own; see [`set_load_wait`](Self::set_load_wait)). The error
    /// says what was looked for and why it cannot be used.
    pub fn get(&self, name: &str) -> Result<Arc<Plugin>, String> {
        if let Some(p) = lock(&self.inner.loaded).get(name) {
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
        if let Some((s, e)) = lock(&self.inner.failures).get(name)
            && *s == self.inner.stamp(name)
        {
            return Err(e.clone());
        }
        let runtime = self.runtime()?;
        let plugin = {
            let mut loaded = lock(&self.inner.loaded);
            if let Some(p) = loaded.get(name) {
                // Another thread started it meanwhile.
                return Ok(p.clone());
            }
            let p = Arc::new(Plugin {
                name: name.to_owned(),
                code: ArcSwapOption::empty(),
                reads: AtomicU64::new(0),
                status: Mutex::new(Status::Loading { waited_out: false }),
                loaded: Condvar::new(),
                guest: Arc::new(Guest {
                    name: name.to_owned(),
                    kv: Mutex::new(BTreeMap::new()),
                    shared_kv: self.inner.shared_kv.get().cloned(),
                    line_budget: Default::default(),
                }),
                stats: PluginStats::default(),
            });
            loaded.insert(name.to_owned(), p.clone());
            p
        };
        let inner = self.inner.clone();
        let p = plugin.clone();
        let started = std::thread::Builder::new()
            .name("decoy-plugin-load".into())
            .spawn(move || {
                let _ = inner.compile(&runtime, &p);
            });
        if let Err(e) = started {
            lock(&self.inner.loaded).remove(name);
            return Err(format!("cannot start loading plugin {name:?}: {e}"));
        }
        let wait = *lock(&self.inner.wait);
        let mut status = lock(&plugin.status);
        let deadline = wait.map(|w| std::time::Instant::now() + w);
        while matches!(*status, Status::Loading { .. }) {
            match deadline {
                None => {
                    status = plugin
                        .loaded
                        .wait(status)
                        .unwrap_or_else(|p| p.into_inner())
                }
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        *status = Status::Loading { waited_out: true };
                        tracing::info!(
                            plugin = name,
                            "plugin still compiling; its mappings answer 503 until it is ready"
                        );
                        return Ok(plugin.clone());
                    }
                    status = plugin
                        .loaded
                        .wait_timeout(status, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
        match &*status {
            Status::Failed(e) => Err(e.clone()),
            _ => Ok(plugin.clone()),
        }
    }

    /// Whether `name` has been asked for (loaded, or loading).
    pub fn is_loaded(&self, name: &str) -> bool {
        lock(&self.inner.loaded).contains_key(name)
    }

    /// Forgets that `name` failed to load (its files changed).
    pub fn forget_failure(&self, name: &str) {
        lock(&self.inner.failures).remove(name);
    }

    /// Reloads `name` after its file changed, if it is loaded. Calls already running
    /// finish on the old code. On failure the old code stays (the failure is logged
    /// and returned). This compiles on the calling thread; when several reloads (or
    /// the first load) run at once, the code of the newest files wins, whichever
    /// ends last.
    pub fn reload(&self, name: &str) -> Option<Result<(), String>> {
        let plugin = lock(&self.inner.loaded).get(name).cloned()?;
        let runtime = match self.runtime() {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.inner.compile(&runtime, &plugin))
    }

    /// Reloads every loaded plugin whose files are no longer those its code was
    /// compiled from (changes made while nothing watched them, such as during the
    /// first load at start). Returns the names it reloaded.
    pub fn reload_changed(&self) -> Vec<String> {
        let mut changed = Vec::new();
        for p in self.loaded() {
            let Some(code) = p.code.load_full() else {
                // Still compiling: its compilation checks the files when it ends.
                continue;
            };
            if load::read(self.inner.dir.as_deref(), &p.name).fingerprint != code.fingerprint {
                let _ = self.reload(&p.name);
                changed.push(p.name.clone());
            }
        }
        changed
    }

    /// The loaded plugins, sorted by name.
    pub fn loaded(&self) -> Vec<Arc<Plugin>> {
        let mut v: Vec<_> = lock(&self.inner.loaded).values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}

impl Inner {
    /// Compiles `p`'s files as they are now, on the calling thread, and publishes
    /// the result unless the files were read again meanwhile (a newer compilation
    /// then decides). Files that changed while they compiled (the watcher may not
    /// have reported it: it is not running yet during the first load at start) are
    /// read and compiled again, up to three times in all. A panic in the compiler
    /// fails this compilation, so a plugin never stays "loading". The error is the
    /// newest files' reason, when they cannot be used.
    fn compile(&self, runtime: &Runtime, p: &Arc<Plugin>) -> Result<(), String> {
        /// Reads of files that keep changing while they compile, before the last
        /// read is published anyway (a later change has a watcher event of its own).
        const ROUNDS: usize = 3;
        let mut round = 1;
        loop {
            let read = p.reads.fetch_add(1, Ordering::SeqCst) + 1;
            let stamp = self.stamp(&p.name);
            let files = load::read(self.dir.as_deref(), &p.name);
            let fingerprint = files.fingerprint.clone();
            let unchanged = p
                .code
                .load()
                .as_ref()
                .is_some_and(|c| c.fingerprint == fingerprint);
            let result = if unchanged {
                Ok(None)
            } else {
                let observer = lock(&self.observer).clone();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if let Some(o) = &observer {
                        o.compiling(&p.name, &fingerprint.wasm);
                    }
                    load::build(runtime, self.cache_dir.as_deref(), files)
                }))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic");
                    Err(format!("compiling it failed in the host: {what}"))
                })
                .map(Some)
            };
            let newest = p.reads.load(Ordering::SeqCst) == read;
            let again = newest
                && round < ROUNDS
                && load::read(self.dir.as_deref(), &p.name).fingerprint != fingerprint;
            let outcome = if !newest {
                tracing::debug!(plugin = %p.name, "dropping a compilation of files replaced meanwhile");
                Ok(())
            } else if again {
                tracing::info!(plugin = %p.name, "the plugin's files changed while they compiled; compiling them again");
                Ok(())
            } else {
                self.settle(p, read, result, stamp)
            };
            self.finished(&p.name, &fingerprint.wasm);
            if !again {
                return outcome;
            }
            round += 1;
        }
    }

    /// Publishes what compilation number `read` of `p` gave (`Ok(None)`: the files
    /// are those of the live code), unless a newer read began; wakes the caller
    /// waiting for the first load; and runs the hook when the first load outlived
    /// the wait, whichever compilation ended it.
    fn settle(
        &self,
        p: &Arc<Plugin>,
        read: u64,
        result: Result<Option<Code>, String>,
        stamp: FilesStamp,
    ) -> Result<(), String> {
        let mut status = lock(&p.status);
        if p.reads.load(Ordering::SeqCst) != read {
            return Ok(());
        }
        let first = matches!(*status, Status::Loading { .. });
        let waited_out = matches!(*status, Status::Loading { waited_out: true });
        let outcome = match result {
            Ok(code) => {
                if let Some(code) = code {
                    let sha = &code.fingerprint.wasm;
                    if first {
                        tracing::info!(plugin = %p.name, origin = %code.origin, sha256 = %sha, "plugin loaded");
                    } else {
                        tracing::info!(plugin = %p.name, origin = %code.origin, sha256 = %sha, "plugin reloaded");
                    }
                    p.code.store(Some(Arc::new(code)));
                }
                *status = Status::Ready;
                Ok(())
            }
            Err(e) if p.code.load().is_some() => {
                tracing::error!(
                    plugin = %p.name,
                    "the plugin changed but cannot be used; the previous version stays live: {e}"
                );
                return Err(e);
            }
            Err(e) if !first => {
                // A plugin whose first load already failed (no longer listed).
                return Err(e);
            }
            Err(e) => {
                if waited_out {
                    tracing::error!(plugin = %p.name, "the plugin cannot be used: {e}");
                    lock(&self.failures).insert(p.name.clone(), (stamp, e.clone()));
                }
                let mut loaded = lock(&self.loaded);
                if loaded.get(&p.name).is_some_and(|q| Arc::ptr_eq(q, p)) {
                    loaded.remove(&p.name);
                }
                *status = Status::Failed(e.clone());
                Err(e)
            }
        };
        drop(status);
        p.loaded.notify_all();
        if waited_out {
            let hook = lock(&self.on_loaded).clone();
            if let Some(hook) = hook {
                hook(&p.name);
            }
        }
        outcome
    }

    fn finished(&self, name: &str, sha: &str) {
        let observer = lock(&self.observer).clone();
        if let Some(o) = observer {
            o.finished(name, sha);
        }
    }

    fn stamp(&self, name: &str) -> FilesStamp {
        let of = |ext: &str| {
            let f = self.dir.as_ref()?.join(format!("{name}.{ext}"));
            let m = std::fs::metadata(f).ok()?;
            Some((m.len(), m.modified().ok()?))
        };
        [of("wasm"), of("json")]
    }
}

impl Plugin {
    /// Whether it exports a transformer (assumed while it is still compiling; a call
    /// then says if it does not).
    pub fn has_transformer(&self) -> bool {
        self.code
            .load()
            .as_ref()
            .is_none_or(|c| c.transformer.is_some())
    }

    /// Whether it exports a matcher (assumed while it is still compiling).
    pub fn has_matcher(&self) -> bool {
        self.code
            .load()
            .as_ref()
            .is_none_or(|c| c.matcher.is_some())
    }

    /// Whether its first load is still compiling.
    pub fn is_loading(&self) -> bool {
        self.code.load().is_none() && self.load_failure().is_none()
    }

    /// Why its first load failed, if it did.
    pub fn load_failure(&self) -> Option<String> {
        match &*lock(&self.status) {
            Status::Failed(e) if self.code.load().is_none() => Some(e.clone()),
            _ => None,
        }
    }

    /// Warm instances waiting in its pool now.
    pub fn warm_instances(&self) -> usize {
        self.code.load().as_ref().map_or(0, |c| lock(&c.pool).len())
    }

    /// SHA-256 (hex) of the `.wasm` its live code was compiled from, once loaded.
    pub fn sha256(&self) -> Option<String> {
        self.code
            .load()
            .as_ref()
            .map(|c| c.fingerprint.wasm.clone())
    }

    /// Where its code was read from (a file, the cache, bundled), once loaded.
    pub fn origin(&self) -> Option<String> {
        self.code.load().as_ref().map(|c| c.origin.clone())
    }

    /// Puts a value in the `cache` its instances share, as an instance's `put`
    /// does, from outside: the host does there work that every instance would
    /// otherwise do once (decoy-core puts the templates it compiled when a stub
    /// loaded, for the bundled `response-template`). The value goes to the live
    /// version of its code, and is lost with it when the plugin is reloaded.
    /// `value` is made only when it would be stored: the plugin is loaded (not still
    /// compiling its first load) and `key` is not there yet. Returns whether it was
    /// made.
    pub fn cache_put(&self, key: String, value: impl FnOnce() -> Option<Vec<u8>>) -> bool {
        let Some(code) = self.code.load_full() else {
            return false;
        };
        if code.cache.contains(&key) {
            return false;
        }
        match value() {
            Some(v) => {
                code.cache.put(key, v);
                true
            }
            None => false,
        }
    }
}
