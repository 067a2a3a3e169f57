//! Hot reload: watch the root directory and feed changes to the [`Store`].
//!
//! `notify` delivers file-system events on its own thread; they are forwarded to a
//! tokio task that debounces them (a burst ends after 40 ms of quiet, or 200 ms at
//! most, so a `git checkout` of 1,000 files is a few reloads, and one edit is live
//! well within 250 ms) and then reloads on a blocking thread:
//!
//! - changes to `*.json` files under `mappings/` reload just those files;
//! - a new, removed or renamed directory, or an overflowed event queue, rescans
//!   `mappings/` for added and removed files (unchanged files are not parsed again);
//! - a body file under `__files/` re-reads every mapping file, since any may use it;
//! - `mq-connections.json` or a file under `mq-mappings/` (or a body file) reloads
//!   the MQ side ([`MqService::reload`]);
//! - a descriptor set or `.proto` under `grpc/` reads the gRPC descriptors again;
//! - `<name>.wasm` (or its settings, `<name>.json`) in the plugins directory reloads
//!   that plugin when a mapping uses it (calls in flight finish on the old code), and
//!   otherwise re-reads the mappings, so a stub served without it (it did not exist) now uses it.
//!
//! Editors that write a temporary file and rename it over the original produce a
//! rename event naming the original, which is all that is needed.
//!
//! `mappings/` or `__files/` may be a symbolic link, made or re-pointed while decoy
//! runs (a deployment swapping folders). A watch on the root sees the link itself,
//! not the folder it leads to, so new files there were never loaded. After every
//! batch of events the watcher resolves both again ([`LinkTargets`]): a folder they
//! lead to outside the root gets a watch of its own (the previous one is dropped),
//! its events are read as if under `root/mappings` or `root/__files`, and a change of
//! target re-reads everything.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use decoy_core::store::Store;
use decoy_mq::MqService;

const QUIET: Duration = Duration::from_millis(40);
const MAX_WAIT: Duration = Duration::from_millis(200);

/// Keeps the watcher alive; dropping it stops watching.
#[derive(Debug)]
pub struct WatchHandle {
    _watcher: Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

/// Where `root/mappings` and `root/__files` lead when they are symbolic links (their
/// canonical targets); `None` for a plain folder or one that does not exist.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct LinkTargets {
    mappings: Option<PathBuf>,
    files: Option<PathBuf>,
}

impl LinkTargets {
    fn of(root: &Path) -> LinkTargets {
        let target = |name: &str| {
            let p = root.join(name);
            p.canonicalize().ok().filter(|c| *c != p)
        };
        LinkTargets {
            mappings: target("mappings"),
            files: target("__files"),
        }
    }

    /// The targets outside `root`, which the root's watch does not cover.
    fn outside<'a>(&'a self, root: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        [&self.mappings, &self.files]
            .into_iter()
            .flatten()
            .filter(move |t| !t.starts_with(root))
    }

    /// `path` as it would be under the root: a path in a linked target becomes the
    /// same path under `root/mappings` or `root/__files`.
    fn through_links(&self, root: &Path, path: &Path) -> PathBuf {
        for (target, name) in [(&self.mappings, "mappings"), (&self.files, "__files")] {
            if let Some(t) = target
                && let Ok(rest) = path.strip_prefix(t)
            {
                return root.join(name).join(rest);
            }
        }
        path.to_path_buf()
    }

    /// Watches the targets outside the root; a failure is logged (hot reload of that
    /// folder is then off, and said so).
    fn watch(&self, root: &Path, watcher: &mut notify::RecommendedWatcher) {
        for t in self.outside(root) {
            match watcher.watch(t, RecursiveMode::Recursive) {
                Ok(()) => tracing::info!("watching {} (a linked folder of the root)", t.display()),
                Err(e) => tracing::warn!(
                    "cannot watch {} for changes ({e}); files added there are not loaded until a restart",
                    t.display()
                ),
            }
        }
    }

    fn unwatch(&self, root: &Path, watcher: &mut notify::RecommendedWatcher) {
        for t in self.outside(root) {
            let _ = watcher.unwatch(t);
        }
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the watcher's task receives.
enum Msg {
    Fs(notify::Result<notify::Event>),
    /// A plugin finished loading after a reload stopped waiting for it.
    PluginLoaded(String),
}

enum Change {
    /// These mapping files changed.
    Files(Vec<PathBuf>),
    /// Directories changed (or events were lost): look for added and removed files.
    Rescan,
    /// A body file changed: re-read every mapping (any may use it).
    Everything,
}

/// Starts watching `store.root()`. Must run inside a tokio runtime.
pub fn spawn(
    store: Arc<Store>,
    mq: Arc<MqService>,
    grpc: Option<Arc<crate::grpc::GrpcServe>>,
) -> notify::Result<WatchHandle> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let fs_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |ev| {
        let _ = fs_tx.send(Msg::Fs(ev));
    })?;
    let root = store
        .root()
        .canonicalize()
        .unwrap_or_else(|_| store.root().to_path_buf());
    watcher.watch(&root, RecursiveMode::Recursive)?;
    let mut links = LinkTargets::of(&root);
    links.watch(&root, &mut watcher);
    let plugins = store.context().plugins.clone();
    if let Some(p) = &plugins {
        // A plugin that was still compiling when a reload stopped waiting for it:
        // re-read the mappings, so those naming it are checked against it.
        let tx = std::sync::Mutex::new(tx);
        p.on_loaded(Arc::new(move |name: &str| {
            let tx = tx.lock().unwrap_or_else(|p| p.into_inner());
            let _ = tx.send(Msg::PluginLoaded(name.to_owned()));
        }));
    }
    let plugins_dir = plugins.as_ref().and_then(|p| p.dir()).map(|d| {
        // It may not exist yet (created later under the root): canonicalize its parent.
        d.canonicalize().unwrap_or_else(|_| {
            match (
                d.parent().and_then(|p| p.canonicalize().ok()),
                d.file_name(),
            ) {
                (Some(p), Some(n)) => p.join(n),
                _ => d.to_path_buf(),
            }
        })
    });
    if let Some(d) = &plugins_dir
        && !d.starts_with(&root)
        && d.is_dir()
        && let Err(e) = watcher.watch(d, RecursiveMode::NonRecursive)
    {
        tracing::warn!("cannot watch {} for plugin changes: {e}", d.display());
    }
    let watcher = Arc::new(std::sync::Mutex::new(watcher));
    let task_watcher = watcher.clone();
    let task = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            let started = tokio::time::Instant::now();
            loop {
                let left = MAX_WAIT.saturating_sub(started.elapsed());
                match tokio::time::timeout(QUIET.min(left), rx.recv()).await {
                    Ok(Some(ev)) if !left.is_zero() => batch.push(ev),
                    Ok(None) => return,
                    _ => break,
                }
            }
            // `mappings/` or `__files/` may have become (or stopped being) a link,
            // or lead somewhere else now: watch what they lead to, and re-read all.
            let now = LinkTargets::of(&root);
            let relinked = now != links;
            if relinked {
                let mut w = task_watcher.lock().unwrap_or_else(|p| p.into_inner());
                links.unwatch(&root, &mut w);
                now.watch(&root, &mut w);
                links = now;
                tracing::info!("mappings/ or __files/ now lead elsewhere; re-reading them");
            }
            let grpc_dir = root.join(decoy_grpc::catalog::DIR);
            let grpc_changed = batch.iter().any(|m| match m {
                Msg::Fs(Ok(ev)) => {
                    ev.need_rescan() || ev.paths.iter().any(|p| p.starts_with(&grpc_dir))
                }
                Msg::Fs(Err(_)) => true,
                Msg::PluginLoaded(_) => false,
            });
            if grpc_changed && let Some(grpc) = &grpc {
                let grpc = grpc.clone();
                let _ = tokio::task::spawn_blocking(move || grpc.reload()).await;
            }
            let (mut change, mut mq_changed, plugin_files) =
                classify(&root, &links, plugins_dir.as_deref(), batch);
            if relinked {
                change = Some(Change::Everything);
                mq_changed = true;
            }
            if let Some(plugins) = &plugins
                && !plugin_files.is_empty()
            {
                // A plugin in use is recompiled in the background (calls go on with
                // the old code meanwhile); nothing here waits for a compilation.
                // Reloads of one plugin may overlap (a file replaced again while it
                // compiles): the newest files' code wins, whichever ends last, and
                // the plugin host logs a failure.
                let mut unknown = false;
                for name in plugin_files {
                    plugins.forget_failure(&name);
                    if plugins.is_loaded(&name) {
                        let plugins = plugins.clone();
                        tokio::task::spawn_blocking(move || {
                            let _ = plugins.reload(&name);
                        });
                    } else {
                        unknown = true;
                    }
                }
                if unknown && change.is_none() {
                    change = Some(Change::Everything);
                }
            }
            if mq_changed || matches!(change, Some(Change::Everything)) {
                mq.reload().await;
            }
            let Some(change) = change else {
                continue;
            };
            let store = store.clone();
            let t0 = std::time::Instant::now();
            let result = tokio::task::spawn_blocking(move || match change {
                Change::Files(files) => store.reload_files(&files),
                Change::Rescan => store.rescan(false),
                Change::Everything => store.reload_all(),
            })
            .await;
            if let Ok(counts) = result {
                tracing::info!(
                    "reloaded in {:?}: {} mappings live, {} rejected",
                    t0.elapsed(),
                    counts.loaded,
                    counts.rejected
                );
            }
        }
    });
    Ok(WatchHandle {
        _watcher: watcher,
        task,
    })
}

/// What a batch of events changed for HTTP mappings, whether MQ files changed, and
/// which plugins' files changed.
fn classify(
    root: &Path,
    links: &LinkTargets,
    plugins_dir: Option<&Path>,
    batch: Vec<Msg>,
) -> (Option<Change>, bool, Vec<String>) {
    let mut plugin_files = Vec::new();
    let mq_paths: Vec<PathBuf> = decoy_mq::config::CONNECTION_FILES
        .iter()
        .chain(decoy_mq::config::MAPPING_DIRS.iter())
        .map(|p| root.join(p))
        .collect();
    let mut mq_changed = false;
    let mappings = root.join("mappings");
    let files = root.join("__files");
    let mut changed = Vec::new();
    let mut everything = false;
    let mut rescan = false;
    for msg in batch {
        let ev = match msg {
            Msg::Fs(ev) => ev,
            Msg::PluginLoaded(name) => {
                tracing::debug!(plugin = name, "plugin ready; re-reading the mappings");
                everything = true;
                continue;
            }
        };
        let Ok(ev) = ev else {
            rescan = true;
            mq_changed = true;
            continue;
        };
        if ev.need_rescan() {
            // Events were lost: anything may have changed, the MQ files too.
            rescan = true;
            mq_changed = true;
        }
        if matches!(ev.kind, EventKind::Access(_)) {
            continue;
        }
        for path in &ev.paths {
            let path = &links.through_links(root, path);
            if let Some(d) = plugins_dir
                && path.parent() == Some(d)
            {
                let ext = path.extension().and_then(|e| e.to_str());
                if matches!(ext, Some("wasm") | Some("json"))
                    && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                    && !stem.starts_with('.')
                {
                    plugin_files.push(stem.to_owned());
                }
                continue;
            }
            if mq_paths.iter().any(|p| path.starts_with(p)) {
                mq_changed = true;
            } else if path.starts_with(&files) {
                everything = true;
            } else if let Ok(rel) = path.strip_prefix(root)
                && path.starts_with(&mappings)
            {
                let is_json = path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("json"));
                let hidden = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'));
                if is_json && !hidden {
                    changed.push(rel.to_path_buf());
                } else if path.is_dir() || path.extension().is_none() {
                    // A directory appeared, vanished or was renamed.
                    rescan = true;
                }
            }
        }
    }
    plugin_files.sort();
    plugin_files.dedup();
    if everything {
        return (Some(Change::Everything), mq_changed, plugin_files);
    }
    if rescan {
        return (Some(Change::Rescan), mq_changed, plugin_files);
    }
    changed.sort();
    changed.dedup();
    (
        (!changed.is_empty()).then_some(Change::Files(changed)),
        mq_changed,
        plugin_files,
    )
}
