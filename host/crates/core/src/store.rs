//! The mapping store: where mappings come from, and how a change becomes a new live set.
//!
//! Mappings come from two places: files under `mappings/` and the admin API. The store
//! keeps, per file, the last version that loaded cleanly, and, for the API, the stubs
//! it created plus the file stubs it edited or deleted. Any change rebuilds the full
//! list in the order the stubs were added and publishes it to the [`Engine`] in one
//! atomic swap. That order decides ties between equal priorities (the stub added last
//! wins, as in WireMock): files in the order the loader read them (the directory's own
//! order, see `load::json_files`), then whatever came later, file or API stub, in the
//! order it came. A rewritten file keeps its place; a new file is the newest stub, as
//! one added through the API would be.
//!
//! A file that fails to load keeps its last good version live; its problems are kept
//! here so the admin API can show them, and fixing the file clears them. The lock is
//! held while a rebuild runs (milliseconds, no await), so rebuilds never interleave.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::Engine;
use crate::mapping::load::{self, Problem};
use crate::mapping::{Mapping, ParseContext};

/// What one mapping file contributes.
#[derive(Debug, Default)]
struct FileState {
    /// When the file was first read, on the store's clock: its place in the order
    /// stubs were added (see [`State::clock`]).
    added: u64,
    /// Hash of the content last read, to skip events for unchanged files (such as
    /// the ones `save` writes itself).
    hash: u64,
    /// The last version that loaded cleanly (or, on the very first load, its valid stubs).
    mappings: Vec<Arc<Mapping>>,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

/// A mapping file's path relative to the root, hashed and compared by its bytes
/// (far cheaper than `Path`'s component by component, for 10,000 files), so the map
/// can be probed with an `&OsStr`.
#[derive(Debug, Clone)]
struct FileKey(PathBuf);

impl PartialEq for FileKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_os_str() == other.0.as_os_str()
    }
}

impl Eq for FileKey {}

impl std::hash::Hash for FileKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.as_os_str().hash(state)
    }
}

impl std::borrow::Borrow<std::ffi::OsStr> for FileKey {
    fn borrow(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Files by path, for lookups; published in the order of their `added`.
    files: HashMap<FileKey, FileState>,
    /// Stubs created through the admin API, in creation order, with when they came.
    api: Vec<(u64, Arc<Mapping>)>,
    /// File stubs replaced through the admin API, by id.
    overrides: HashMap<Arc<str>, Arc<Mapping>>,
    /// File stubs deleted through the admin API.
    deleted: HashSet<Arc<str>>,
    /// File stubs left out because a stub read earlier has their id (recomputed on
    /// every publish).
    duplicates: Vec<Problem>,
    /// The next `added` value: files and API stubs share one clock, so a stub that
    /// came later (a new file, or one posted to the API) wins ties, as in WireMock.
    clock: u64,
}

impl State {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The files in the order they were added.
    fn files_in_order(&self) -> Vec<(&FileKey, &FileState)> {
        let mut v: Vec<_> = self.files.iter().collect();
        v.sort_unstable_by_key(|(_, f)| f.added);
        v
    }
}

#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    ctx: ParseContext,
    engine: Arc<Engine>,
    state: Mutex<State>,
    /// How many mapping sets have been published (start-up, reloads, API changes),
    /// for metrics: a burst of file changes should add few.
    swaps: AtomicU64,
}

/// Counts after a (re)load, for logs and the ready line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub loaded: usize,
    pub rejected: usize,
}

impl Store {
    pub fn new(root: &Path, engine: Arc<Engine>) -> Store {
        Store::with_context(root, engine, ParseContext::for_root(root))
    }

    pub fn with_context(root: &Path, engine: Arc<Engine>, ctx: ParseContext) -> Store {
        Store {
            root: root.to_path_buf(),
            ctx,
            engine,
            state: Mutex::new(State::default()),
            swaps: AtomicU64::new(0),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn context(&self) -> &ParseContext {
        &self.ctx
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes mappings already loaded from `report` (the first load at start).
    pub fn install_initial(&self, report: load::LoadReport) {
        let mut st = self.lock();
        // The report lists files in the loader's reading order, which becomes the
        // order they were added.
        let (keys, hashes): (Vec<PathBuf>, Vec<u64>) = report.file_hashes.into_iter().unzip();
        let base = st.clock;
        let mut states: Vec<FileState> = hashes
            .into_iter()
            .enumerate()
            .map(|(i, hash)| FileState {
                added: base + 1 + i as u64,
                hash,
                ..FileState::default()
            })
            .collect();
        st.clock = base + states.len() as u64;
        let position: HashMap<&std::ffi::OsStr, usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_os_str(), i))
            .collect();
        let slot = |file: &Path| position.get(file.as_os_str()).copied();
        for m in report.mappings {
            if let Some(i) = m.source.as_ref().and_then(|s| slot(&s.file)) {
                states[i].mappings.push(Arc::new(m));
            }
        }
        for p in report.problems {
            if let Some(i) = slot(&p.file) {
                states[i].problems.push(p);
            }
        }
        for w in report.warnings {
            if let Some(i) = slot(&w.file) {
                states[i].warnings.push(w);
            }
        }
        drop(position);
        st.files = keys.into_iter().map(FileKey).zip(states).collect();
        self.publish(&mut st);
    }

    /// Re-reads every file below `mappings/` (after `__files/` changed, or on request)
    /// and publishes the result.
    pub fn reload_all(&self) -> Counts {
        self.rescan(true)
    }

    /// Finds added and removed mapping files (after a directory appeared, vanished or
    /// was renamed, or the watcher lost events). Files whose content is unchanged are
    /// not parsed again, unless `force` (their body files may have changed).
    pub fn rescan(&self, force: bool) -> Counts {
        let files = load::mapping_files(&self.root).unwrap_or_default();
        let mut st = self.lock();
        let present: HashSet<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
        let before = st.files.len();
        st.files.retain(|f, _| present.contains(f.0.as_os_str()));
        let mut changed = st.files.len() != before;
        for rel in &files {
            changed |= self.refresh_file(&mut st, rel, force);
        }
        if changed {
            self.publish(&mut st)
        } else {
            counts(&st)
        }
    }

    /// Re-reads the given mapping files (relative to the root) and publishes.
    pub fn reload_files(&self, rels: &[PathBuf]) -> Counts {
        let mut st = self.lock();
        let mut changed = false;
        for rel in rels {
            changed |= self.refresh_file(&mut st, rel, false);
        }
        if changed {
            self.publish(&mut st)
        } else {
            counts(&st)
        }
    }

    /// Loads files just written by decoy itself (recordings), so they are live at
    /// once; the watcher then sees content it already has and skips them.
    pub fn adopt_files(&self, rels: &[PathBuf]) -> Counts {
        self.reload_files(rels)
    }

    /// Returns whether anything changed. `force` re-parses even an unchanged file
    /// (its body files may have changed).
    fn refresh_file(&self, st: &mut State, rel: &Path, force: bool) -> bool {
        let full = self.root.join(rel);
        let Some(hash) = hash_file(&full) else {
            return st.files.remove(rel.as_os_str()).is_some();
        };
        if !force
            && st
                .files
                .get(rel.as_os_str())
                .is_some_and(|f| f.hash == hash)
        {
            return false;
        }
        let loaded = load::load_file(&self.root, rel, &self.ctx);
        // The hash of what was parsed (the file may have changed since it was hashed).
        let hash = loaded.hash;
        let previous = st.files.remove(rel.as_os_str());
        // A rewritten file keeps its place; a new one is the newest stub.
        let added = match &previous {
            Some(p) => p.added,
            None => st.tick(),
        };
        let state = if loaded.problems.is_empty() {
            FileState {
                added,
                hash,
                mappings: loaded.mappings.into_iter().map(Arc::new).collect(),
                problems: Vec::new(),
                warnings: loaded.warnings,
            }
        } else {
            for p in &loaded.problems {
                tracing::warn!("{p} (the last good version of the file stays live)");
            }
            FileState {
                added,
                hash,
                mappings: match previous {
                    Some(prev) => prev.mappings,
                    None => loaded.mappings.into_iter().map(Arc::new).collect(),
                },
                problems: loaded.problems,
                warnings: loaded.warnings,
            }
        };
        st.files.insert(FileKey(rel.to_path_buf()), state);
        true
    }

    /// Builds the full list, in the order the stubs were added, and swaps it in.
    fn publish(&self, st: &mut State) -> Counts {
        let files = st.files_in_order();
        let mut all: Vec<Arc<Mapping>> = Vec::with_capacity(
            files.iter().map(|(_, f)| f.mappings.len()).sum::<usize>() + st.api.len(),
        );
        let mut api = st.api.iter().peekable();
        for (_, f) in files {
            while let Some((_, m)) = api.next_if(|(added, _)| *added < f.added) {
                all.push(m.clone());
            }
            for m in &f.mappings {
                if st.deleted.contains(&m.id) {
                    continue;
                }
                all.push(
                    st.overrides
                        .get(&m.id)
                        .cloned()
                        .unwrap_or_else(|| m.clone()),
                );
            }
        }
        all.extend(api.map(|(_, m)| m.clone()));
        // A reloaded file may bring an id that a file read earlier has.
        let file_stubs = all.iter().filter(|m| m.source.is_some());
        let (keep, duplicates) = load::first_of_each_id(file_stubs);
        if !duplicates.is_empty() {
            let mut keep = keep.into_iter();
            all.retain(|m| m.source.is_none() || keep.next().unwrap_or(true));
            for p in &duplicates {
                if !st.duplicates.contains(p) {
                    tracing::warn!("{p}");
                }
            }
        }
        st.duplicates = duplicates;
        self.engine.replace_shared(all);
        self.swaps.fetch_add(1, Ordering::Relaxed);
        counts(st)
    }

    /// How many mapping sets have been published so far.
    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }

    /// Current problems and warnings of every file.
    pub fn problems(&self) -> (Vec<Problem>, Vec<Problem>) {
        let st = self.lock();
        let files = st.files_in_order();
        let problems = files
            .iter()
            .flat_map(|(_, f)| f.problems.iter().cloned())
            .chain(st.duplicates.iter().cloned())
            .collect();
        let warnings = files
            .iter()
            .flat_map(|(_, f)| f.warnings.iter().cloned())
            .collect();
        (problems, warnings)
    }

    /// Adds or replaces (by id) a stub through the API.
    pub fn upsert(&self, m: Mapping) -> Arc<Mapping> {
        let m = Arc::new(m);
        let mut st = self.lock();
        if let Some(slot) = st.api.iter_mut().find(|x| x.1.id == m.id) {
            slot.1 = m.clone();
        } else if file_ids(&st).contains(&m.id) {
            st.deleted.remove(&m.id);
            st.overrides.insert(m.id.clone(), m.clone());
        } else {
            let added = st.tick();
            st.api.push((added, m.clone()));
        }
        self.publish(&mut st);
        m
    }

    /// Removes a stub by id; false when there is none.
    pub fn remove(&self, id: &str) -> bool {
        let mut st = self.lock();
        let before = st.api.len();
        st.api.retain(|(_, m)| &*m.id != id);
        let mut found = st.api.len() != before;
        if !found
            && let Some(fid) = file_ids(&st).into_iter().find(|f| &**f == id)
            && !st.deleted.contains(&fid)
        {
            st.overrides.remove(&fid);
            st.deleted.insert(fid);
            found = true;
        }
        if found {
            self.publish(&mut st);
        }
        found
    }

    /// Removes every stub (files stay on disk; `reset` brings them back).
    pub fn remove_all(&self) {
        let mut st = self.lock();
        st.api.clear();
        st.overrides.clear();
        st.deleted = file_ids(&st);
        self.publish(&mut st);
    }

    /// Back to what is on disk: drops API stubs, edits and deletions, re-reads files
    /// in the loader's order, as at start.
    pub fn reset(&self) -> Counts {
        {
            let mut st = self.lock();
            st.api.clear();
            st.overrides.clear();
            st.deleted.clear();
            st.files.clear();
        }
        self.reload_all()
    }

    /// Writes the stubs created or edited through the API into `mappings/`, one file
    /// each, and from then on treats them as file stubs. Returns the files written.
    pub fn save(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut st = self.lock();
        let dir = load::mappings_dir(&self.root);
        std::fs::create_dir_all(&dir)?;
        let mut written = Vec::new();
        let edited: Vec<Arc<Mapping>> = st.overrides.values().cloned().collect();
        for m in st.api.iter().map(|(_, m)| m).chain(edited.iter()) {
            // An edited file stub is written back over its own file when that file
            // holds only it; otherwise (and for API stubs) into a new file.
            let rel = match &m.source {
                Some(src)
                    if st
                        .files
                        .get(src.file.as_os_str())
                        .is_some_and(|f| f.mappings.len() == 1) =>
                {
                    src.file.clone()
                }
                _ => PathBuf::from("mappings").join(file_name_for(m)),
            };
            let text = pretty(&m.json);
            let full = self.root.join(&rel);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&full, &text)?;
            written.push(rel);
        }
        st.api.clear();
        st.overrides.clear();
        for rel in &written {
            self.refresh_file(&mut st, rel, true);
        }
        self.publish(&mut st);
        Ok(written)
    }
}

fn counts(st: &State) -> Counts {
    Counts {
        loaded: st.files.values().map(|f| f.mappings.len()).sum::<usize>() + st.api.len(),
        rejected: st
            .files
            .values()
            .map(|f| {
                f.problems
                    .iter()
                    .map(|p| p.stub.as_ref().map(|s| s.index))
                    .collect::<HashSet<_>>()
                    .len()
            })
            .sum::<usize>()
            + st.duplicates.len(),
    }
}

fn file_ids(st: &State) -> HashSet<Arc<str>> {
    st.files
        .values()
        .flat_map(|f| f.mappings.iter().map(|m| m.id.clone()))
        .collect()
}

fn hash_file(path: &Path) -> Option<u64> {
    std::fs::read(path).ok().map(|b| load::content_hash(&b))
}

fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_owned())
        + "\n"
}

/// `get-user-<id>.json`, as WireMock names saved stubs (name slug, then id).
fn file_name_for(m: &Mapping) -> String {
    let slug: String = m
        .name
        .as_deref()
        .unwrap_or("mapping")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    format!(
        "{}-{}.json",
        if slug.is_empty() { "mapping" } else { slug },
        m.id
    )
}
