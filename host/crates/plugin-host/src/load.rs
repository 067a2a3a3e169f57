//! Finding, compiling (or reading from the cache) and checking plugin components.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::{CACHE_MAX_BYTES, ValueCache};
use super::exports::decoy::plugin::{matcher, prepare, transformer};
use super::host_api::State;
use super::{Code, Runtime, TICK, bundled};

/// Per-plugin settings, from an optional `<plugins dir>/<name>.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSettings {
    /// `pooled` (default): warm instances are reused. `per-request`: a fresh
    /// instance for every call, so no state survives a call.
    pub isolation: Isolation,
    /// CPU time one call may take.
    pub timeout_milliseconds: u64,
    /// Linear memory one instance may use.
    pub memory_limit_mib: u64,
    /// Warm instances kept between calls.
    pub max_idle_instances: usize,
    /// A pooled instance whose linear memory has reached this share of
    /// `memory_limit_mib` is retired after its call (100: never for memory).
    pub retire_at_memory_percent: u64,
    /// A pooled instance is retired after this many calls (0: no limit).
    pub max_calls_per_instance: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    Pooled,
    PerRequest,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            isolation: Isolation::Pooled,
            timeout_milliseconds: 100,
            memory_limit_mib: 64,
            max_idle_instances: 16,
            retire_at_memory_percent: 75,
            max_calls_per_instance: 0,
        }
    }
}

impl PluginSettings {
    pub fn memory_limit_bytes(&self) -> usize {
        usize::try_from(self.memory_limit_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// The memory at which a pooled instance is retired rather than reused.
    pub fn retire_at_bytes(&self) -> usize {
        let cap = self.memory_limit_bytes();
        if self.retire_at_memory_percent >= 100 {
            usize::MAX
        } else {
            cap / 100 * self.retire_at_memory_percent as usize
        }
    }

    /// Epoch ticks for the deadline (at least one whole tick past the timeout).
    pub fn deadline_ticks(&self) -> u64 {
        (self.timeout_milliseconds / TICK.as_millis() as u64).max(1) + 1
    }
}

/// The most memory a plugin may be allowed (`memoryLimitMiB` above it is refused).
const MAX_MEMORY_MIB: u64 = 1024;

/// Creates the engine and the linker with WASI and decoy's host interfaces, and
/// starts the epoch ticker.
pub(super) fn runtime() -> Result<Runtime, String> {
    let engine = engine(true).or_else(|e| {
        tracing::warn!(
            "the pooling allocator is not available here ({e}); plugins use on-demand allocation"
        );
        engine(false)
    })?;
    let mut linker = Linker::<State>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
        .and_then(|()| super::stdio::relink_io(&mut linker))
        .map_err(|e| format!("cannot set up WASI for plugins: {e}"))?;
    super::AnyPlugin::add_to_linker::<State, wasmtime::component::HasSelf<State>>(
        &mut linker,
        |s| s,
    )
    .map_err(|e| format!("cannot set up the plugin host interfaces: {e}"))?;
    let ticker = engine.weak();
    std::thread::Builder::new()
        .name("decoy-plugin-epoch".into())
        .spawn(move || {
            while let Some(engine) = ticker.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .map_err(|e| format!("cannot start the plugin deadline thread: {e}"))?;
    // Looked up now, off every request's path; a thread that cannot start only
    // moves the look-up to the first plugin that asks.
    let _ = std::thread::Builder::new()
        .name("decoy-hostname".into())
        .spawn(|| {
            super::machine_hostname();
        });
    Ok(Runtime { engine, linker })
}

fn engine(pooling: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    // Plugins are called synchronously. With concurrency support on (the default),
    // every call also sets up and tears down the component model's async task
    // bookkeeping, which plugins never use.
    config.concurrency_support(false);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        // Room for large guests (Python and JavaScript interpreters bring several
        // modules, big tables and tens of MiB of memory). These are address-space
        // reservations; memory is only used as instances touch it.
        pool.total_component_instances(256)
            .total_core_instances(1024)
            .total_memories(512)
            .total_tables(1024)
            .max_memories_per_module(2)
            .max_tables_per_module(8)
            .table_elements(200_000)
            .max_core_instance_size(8 << 20)
            .max_component_instance_size(8 << 20)
            .max_memory_size((MAX_MEMORY_MIB << 20) as usize)
            // Calls run on the caller's stack (no async wasm): no fiber stacks. The
            // default reserves 1,000 of them, each with a guard page, which is 2,000
            // of the process's memory mappings (64k by default) for nothing.
            .total_stacks(0);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config).map_err(|e| format!("cannot create the wasm engine: {e}"))
}

/// A plugin's files as read for one compilation (what could not be read is the
/// reason, to be reported if they are compiled).
pub(crate) struct Files {
    /// What was read, to tell whether the files changed since.
    pub(crate) fingerprint: Fingerprint,
    origin: String,
    wasm: Result<std::borrow::Cow<'static, [u8]>, String>,
    settings: Result<PluginSettings, String>,
}

/// SHA-256 (hex) of a plugin's `.wasm` (or of its bundled bytes) and of its settings
/// file (`None`: there is none); a file that cannot be read counts by the reason.
/// Equal fingerprints mean the same code and settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) wasm: String,
    pub(crate) settings: Option<String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads `name`'s `.wasm` (or its bundled bytes) and settings as they are now.
pub(super) fn read(dir: Option<&Path>, name: &str) -> Files {
    let file = dir.map(|d| d.join(format!("{name}.wasm")));
    type Bytes = std::borrow::Cow<'static, [u8]>;
    let (origin, wasm): (String, Result<Bytes, String>) = match &file {
        Some(f) if f.is_file() => (
            f.display().to_string(),
            std::fs::read(f)
                .map(Into::into)
                .map_err(|e| format!("cannot read {}: {e}", f.display())),
        ),
        _ => match bundled().iter().find(|(n, _)| *n == name) {
            Some((_, bytes)) => (format!("bundled:{name}"), Ok((*bytes).into())),
            None => {
                let looked = match &file {
                    Some(f) => format!("{} does not exist", f.display()),
                    None => "no plugins directory is set".to_owned(),
                };
                let names: Vec<&str> = bundled().iter().map(|(n, _)| *n).collect();
                let e = format!(
                    "no plugin named {name:?}: {looked}, and the bundled plugins are {}",
                    names.join(", ")
                );
                (String::new(), Err(e))
            }
        },
    };
    let (settings, settings_fingerprint) = match dir.map(|d| d.join(format!("{name}.json"))) {
        Some(f) if f.is_file() => match std::fs::read_to_string(&f) {
            Ok(text) => (parse_settings(&f, &text), Some(sha256_hex(text.as_bytes()))),
            Err(e) => {
                let e = format!("cannot read {}: {e}", f.display());
                (Err(e.clone()), Some(e))
            }
        },
        _ => (Ok(PluginSettings::default()), None),
    };
    let fingerprint = Fingerprint {
        wasm: match &wasm {
            Ok(bytes) => sha256_hex(bytes),
            Err(e) => e.clone(),
        },
        settings: settings_fingerprint,
    };
    Files {
        fingerprint,
        origin,
        wasm,
        settings,
    }
}

/// Compiles (or loads from the cache) and links what [`read`] read.
pub(super) fn build(
    runtime: &Runtime,
    cache_dir: Option<&Path>,
    files: Files,
) -> Result<Code, String> {
    let Files {
        fingerprint,
        origin,
        wasm,
        settings,
    } = files;
    let bytes = wasm?;
    let settings = settings?;
    let component = compile(&runtime.engine, cache_dir, &bytes)
        .map_err(|e| format!("{origin} is not a usable plugin: {e}"))?;
    let pre = runtime
        .linker
        .instantiate_pre(&component)
        .map_err(|e| format!("{origin} {}", explain_link_error(&e)))?;
    let transformer = transformer::GuestIndices::new(&pre).ok();
    let matcher = matcher::GuestIndices::new(&pre).ok();
    // `prepare` only serves a transformer.
    let prepare = transformer
        .as_ref()
        .and_then(|_| prepare::GuestIndices::new(&pre).ok());
    if transformer.is_none() && matcher.is_none() {
        return Err(format!(
            "{origin} exports neither decoy:plugin/transformer nor decoy:plugin/matcher (version 0.1); build it against wit/plugin.wit"
        ));
    }
    Ok(Code {
        origin,
        fingerprint,
        settings,
        pre,
        transformer,
        matcher,
        prepare,
        pool: Mutex::new(Vec::new()),
        engine: runtime.engine.clone(),
        cache: Arc::new(ValueCache::new(CACHE_MAX_BYTES)),
    })
}

fn parse_settings(f: &Path, text: &str) -> Result<PluginSettings, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Partial {
        isolation: Option<Isolation>,
        timeout_milliseconds: Option<u64>,
        #[serde(rename = "memoryLimitMiB")]
        memory_limit_mib: Option<u64>,
        max_idle_instances: Option<usize>,
        retire_at_memory_percent: Option<u64>,
        max_calls_per_instance: Option<u64>,
    }
    let p: Partial = serde_json::from_str(text).map_err(|e| {
        format!(
            "{}: {e} (fields: isolation \"pooled\"|\"per-request\", timeoutMilliseconds, memoryLimitMiB, maxIdleInstances, retireAtMemoryPercent, maxCallsPerInstance)",
            f.display()
        )
    })?;
    let d = PluginSettings::default();
    let s = PluginSettings {
        isolation: p.isolation.unwrap_or(d.isolation),
        timeout_milliseconds: p.timeout_milliseconds.unwrap_or(d.timeout_milliseconds),
        memory_limit_mib: p.memory_limit_mib.unwrap_or(d.memory_limit_mib),
        max_idle_instances: p.max_idle_instances.unwrap_or(d.max_idle_instances),
        retire_at_memory_percent: p
            .retire_at_memory_percent
            .unwrap_or(d.retire_at_memory_percent),
        max_calls_per_instance: p.max_calls_per_instance.unwrap_or(d.max_calls_per_instance),
    };
    if s.retire_at_memory_percent == 0 || s.retire_at_memory_percent > 100 {
        return Err(format!(
            "{}: retireAtMemoryPercent must be 1 to 100, not {}",
            f.display(),
            s.retire_at_memory_percent
        ));
    }
    if s.timeout_milliseconds == 0 || s.timeout_milliseconds > 60_000 {
        return Err(format!(
            "{}: timeoutMilliseconds must be 1 to 60000, not {}",
            f.display(),
            s.timeout_milliseconds
        ));
    }
    if s.memory_limit_mib == 0 || s.memory_limit_mib > MAX_MEMORY_MIB {
        return Err(format!(
            "{}: memoryLimitMiB must be 1 to {MAX_MEMORY_MIB}, not {}",
            f.display(),
            s.memory_limit_mib
        ));
    }
    Ok(s)
}

/// Compiles `bytes`, or reads the compiled form from `cache_dir` when an earlier run
/// left it there. A cache that cannot be read or written only costs a compilation.
fn compile(engine: &Engine, cache_dir: Option<&Path>, bytes: &[u8]) -> Result<Component, String> {
    if !bytes.starts_with(b"\0asm") {
        return Err("it is not a WebAssembly file (no \\0asm header)".into());
    }
    let Some(cache_dir) = cache_dir else {
        return Component::new(engine, bytes).map_err(|e| describe_compile_error(&e));
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let key: String = digest
        .as_ref()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = cache_dir.join(format!("{key}-{:016x}.cwasm", h.finish()));
    if path.is_file() {
        // SAFETY: the file is in decoy's own cache directory, named by the hash of the
        // source and of this engine's configuration, and was written by `serialize`
        // below (atomically, through a rename). Wasmtime checks its header against the
        // engine before using it and refuses a mismatch, which falls back to compiling.
        #[allow(unsafe_code)]
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => tracing::debug!(file = %path.display(), "ignoring a cached plugin: {e}"),
        }
    }
    let component = Component::new(engine, bytes).map_err(|e| describe_compile_error(&e))?;
    if let Err(e) = write_cache(&component, &path) {
        tracing::debug!(file = %path.display(), "cannot cache a compiled plugin: {e}");
    }
    Ok(component)
}

fn write_cache(component: &Component, path: &Path) -> Result<(), String> {
    let bytes = component.serialize().map_err(|e| e.to_string())?;
    let dir = path.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    // Unique per process and file: plugins compile on several threads at once.
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("plugin");
    let tmp = dir.join(format!(".{}-{name}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

fn describe_compile_error(e: &wasmtime::Error) -> String {
    let text = format!("{e:#}");
    if text.contains("core module")
        || text.contains("expected a component")
        || text.contains("wasm module with a component parser")
    {
        format!(
            "it is a core WebAssembly module, not a component ({text}); wrap it with `wasm-tools component new`"
        )
    } else {
        text
    }
}

fn explain_link_error(e: &wasmtime::Error) -> String {
    let text = format!("{e:#}");
    format!(
        "needs an import decoy does not give plugins ({text}); plugins may import decoy:plugin/log, decoy:plugin/kv, decoy:plugin/request-info, decoy:plugin/cache and WASI 0.2 (without file system, network or environment)"
    )
}

/// What `decoy plugin check` reports about a file.
#[derive(Debug)]
pub struct CheckReport {
    pub worlds: Vec<&'static str>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

/// Checks that `file` is a plugin decoy can run: a component that compiles, links
/// against what decoy provides, and exports the transformer or matcher interface.
/// `cache_dir` is the compiled-code cache `serve` uses: a file compiled before loads
/// from it, and one compiled here is kept there.
pub fn check_file(file: &Path, cache_dir: Option<&Path>) -> Result<CheckReport, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let runtime = runtime()?;
    let component = compile(&runtime.engine, cache_dir, &bytes)
        .map_err(|e| format!("{} is not a usable plugin: {e}", file.display()))?;
    let ty = component.component_type();
    let imports: Vec<String> = ty
        .imports(&runtime.engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    let exports: Vec<String> = ty
        .exports(&runtime.engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    let pre = runtime
        .linker
        .instantiate_pre(&component)
        .map_err(|e| format!("{} {}", file.display(), explain_link_error(&e)))?;
    let t = transformer::GuestIndices::new(&pre).is_ok();
    let m = matcher::GuestIndices::new(&pre).is_ok();
    let worlds = match (t, m) {
        (true, true) => vec![
            "transformer-and-matcher",
            "transformer-plugin",
            "matcher-plugin",
        ],
        (true, false) if prepare::GuestIndices::new(&pre).is_ok() => {
            vec!["prepared-transformer-plugin", "transformer-plugin"]
        }
        (true, false) => vec!["transformer-plugin"],
        (false, true) => vec!["matcher-plugin"],
        (false, false) => {
            return Err(format!(
                "{} exports neither decoy:plugin/transformer@0.1.0 nor decoy:plugin/matcher@0.1.0 (it exports: {}); build it against wit/plugin.wit",
                file.display(),
                if exports.is_empty() {
                    "nothing".to_owned()
                } else {
                    exports.join(", ")
                }
            ));
        }
    };
    Ok(CheckReport {
        worlds,
        imports,
        exports,
    })
}
