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
//!
//! A persistent stub (`"persistent": true`) has a file of its own in `mappings/`, as in
//! WireMock: creating or editing one through the API writes that file, deleting it
//! deletes the file. Where that file goes and whether it may be touched is
//! [`crate::stub_files`]'s: only a stub's own file, only inside `mappings/` (links
//! followed), and a new file never replaces an existing one. The store writes the
//! file, reads it back as a file stub and records its hash while it holds the lock, so
//! the watcher, seeing content it already has, does not load it a second time. A file that cannot be written leaves the
//! change made in memory (WireMock changes the stub first, then writes) and is
//! reported to the caller as a [`PersistError`].
//!
//! With state shared between instances (`--state`), a change made through the admin
//! API is written to the shared [`StubReplica`] first and applied here only once that
//! succeeded; other instances apply it through [`Store::apply_replicated`]. Files stay
//! local (every instance reads the same folder).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::engine::Engine;
use crate::filenames::FilenameMaker;
use crate::mapping::load::{self, Problem};
use crate::mapping::{Mapping, ParseContext};
use crate::shared::{self, StubReplica};
pub use crate::stub_files::PersistError;
use crate::stub_files::StubFiles;

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
    /// Files written for persistent API stubs whose file name
    /// (`--filename-template`) is not a mapping file's, so that they stay API stubs:
    /// deleting the stub deletes its file all the same, as in WireMock.
    api_files: HashMap<Arc<str>, PathBuf>,
    /// API stubs that came from the shared store (`--state`); the others (such as
    /// `--proxy-all`'s) belong to this instance and survive a resynchronisation.
    replicated: HashSet<Arc<str>>,
    /// File stubs left out because a stub read earlier has their id (recomputed on
    /// every publish).
    duplicates: Vec<Problem>,
    /// Warnings of stubs posted through the admin API (a plugin they name is
    /// missing, ...), by id; listed while such a stub is an API stub or an edit.
    api_warnings: HashMap<Arc<str>, Vec<decoy_spec::fields::FieldError>>,
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
    /// Where API changes are written first when state is shared (`--state`).
    replica: OnceLock<Arc<dyn StubReplica>>,
    /// How the stub files `save` and recordings write are named (`--filename-template`).
    filenames: FilenameMaker,
}

/// An admin-API change made on another instance, to apply here as it was there.
#[derive(Debug)]
pub enum Replicated {
    Put(Mapping),
    Remove(String),
    RemoveAll,
    Reset,
    /// The whole shared list after a (re)connection: these API stubs (in the order
    /// they were added) replace this instance's, and these file stubs are removed.
    Sync {
        stubs: Vec<Mapping>,
        removed: Vec<String>,
    },
}

/// Counts after a (re)load, for logs and the ready line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub loaded: usize,
    pub rejected: usize,
}

/// What [`Store::upsert`] did.
#[derive(Debug)]
pub struct Upserted {
    /// The stub as it is now served.
    pub mapping: Arc<Mapping>,
    /// Set when the stub is persistent and its file could not be written: it is
    /// served all the same (as in WireMock), but only until the server stops.
    pub not_saved: Option<PersistError>,
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
            replica: OnceLock::new(),
            filenames: FilenameMaker::default(),
        }
    }

    /// The same store, naming the stub files it writes with `filenames`.
    pub fn with_filenames(mut self, filenames: FilenameMaker) -> Store {
        self.filenames = filenames;
        self
    }

    /// How stub files written into `mappings/` are named.
    pub fn filenames(&self) -> &FilenameMaker {
        &self.filenames
    }

    /// From now on, API changes go to `replica`, which applies them here (set once,
    /// when state is shared).
    pub fn set_replica(&self, replica: Arc<dyn StubReplica>) {
        let _ = self.replica.set(replica);
    }

    /// Why the shared stubs are not in step here, if state is shared and they are not.
    pub fn replica_problem(&self) -> Option<String> {
        self.replica.get()?.problem()
    }

    /// Hands a change to the replica, if there is one: `None` when there is none (the
    /// caller applies it here), else whether it succeeded. The replica applies it
    /// here itself, through [`Store::apply_replicated`], in the order the shared
    /// store gave all changes, so every instance applies the same changes in the same
    /// order. A failure is noted for the admin reply ([`shared::take_failure`]).
    fn replicate(
        &self,
        write: impl FnOnce(&dyn StubReplica) -> Result<(), shared::Unavailable>,
    ) -> Option<bool> {
        let r = self.replica.get()?;
        Some(match write(r.as_ref()) {
            Ok(()) => true,
            Err(e) => {
                shared::note_failure(shared::Operation::Stubs, e);
                false
            }
        })
    }

    /// Applies a change made through the admin API of this or another instance, as
    /// the shared store ordered it.
    pub fn apply_replicated(&self, change: Replicated) {
        match change {
            Replicated::Put(m) => {
                let done = self.upsert_here(m);
                if let Some(e) = &done.not_saved {
                    tracing::warn!("{e}");
                }
                self.lock().replicated.insert(done.mapping.id.clone());
            }
            Replicated::Remove(id) => {
                if let Err(e) = self.remove_here(&id, true) {
                    tracing::warn!("{e}");
                }
                self.lock().replicated.remove(id.as_str());
            }
            Replicated::RemoveAll => {
                self.remove_all_here();
                self.lock().replicated.clear();
            }
            Replicated::Reset => {
                self.reset_here();
                self.lock().replicated.clear();
            }
            Replicated::Sync { stubs, removed } => {
                let mut st = self.lock();
                let replicated = std::mem::take(&mut st.replicated);
                st.api.retain(|(_, m)| !replicated.contains(&m.id));
                st.overrides.clear();
                st.deleted.clear();
                let files = file_ids(&st);
                for m in stubs {
                    let m = Arc::new(m);
                    st.replicated.insert(m.id.clone());
                    if files.contains(&m.id) {
                        st.overrides.insert(m.id.clone(), m);
                    } else if let Some(slot) = st.api.iter_mut().find(|x| x.1.id == m.id) {
                        slot.1 = m;
                    } else {
                        let added = st.tick();
                        st.api.push((added, m));
                    }
                }
                for id in removed {
                    if files.contains(id.as_str()) {
                        st.deleted.insert(Arc::from(id));
                    }
                }
                self.publish(&mut st);
            }
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
        // The mappings are in the same order as the files: each is found by moving
        // forward, without a map of 10,000 paths.
        let mut at = 0;
        for m in report.mappings {
            let Some(src) = &m.source else { continue };
            while at < keys.len() && keys[at] != src.file {
                at += 1;
            }
            if at < keys.len() {
                states[at].mappings.push(m);
            }
        }
        if !report.problems.is_empty() || !report.warnings.is_empty() {
            let position: HashMap<&std::ffi::OsStr, usize> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.as_os_str(), i))
                .collect();
            let slot = |file: &Path| position.get(file.as_os_str()).copied();
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
        }
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
        let mut st = self.lock();
        if self.rescan_into(&mut st, force) {
            self.publish(&mut st)
        } else {
            counts(&st)
        }
    }

    /// Brings `st.files` in line with the disk; returns whether anything changed.
    fn rescan_into(&self, st: &mut State, force: bool) -> bool {
        let files = load::mapping_files(&self.root).unwrap_or_default();
        let present: HashSet<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
        let before = st.files.len();
        st.files.retain(|f, _| present.contains(f.0.as_os_str()));
        let mut changed = st.files.len() != before;
        for rel in &files {
            changed |= self.refresh_file(st, rel, force);
        }
        changed
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
                mappings: loaded.mappings,
                problems: Vec::new(),
                warnings: loaded.warnings,
            }
        } else {
            let kept = if previous.is_some() {
                "the last good version of the file stays live"
            } else {
                "a new file: its valid stubs are served, the others skipped"
            };
            for p in &loaded.problems {
                tracing::warn!("{p} ({kept})");
            }
            FileState {
                added,
                hash,
                mappings: match previous {
                    Some(prev) => prev.mappings,
                    None => loaded.mappings,
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

    /// Current problems and warnings of every file, then the warnings of stubs
    /// posted through the admin API (see [`Store::note_api_warnings`]).
    pub fn problems(&self) -> (Vec<Problem>, Vec<Problem>) {
        let st = self.lock();
        let files = st.files_in_order();
        let problems = files
            .iter()
            .flat_map(|(_, f)| f.problems.iter().cloned())
            .chain(st.duplicates.iter().cloned())
            .collect();
        let api = st.api.iter().map(|(_, m)| m).chain(st.overrides.values());
        let api_warnings = api.flat_map(|m| {
            let errors = st.api_warnings.get(&m.id).map_or(&[][..], Vec::as_slice);
            errors.iter().map(|e| Problem {
                file: PathBuf::new(),
                stub: Some(load::StubRef {
                    index: 0,
                    id: Some(m.id.to_string()),
                    name: m.name.as_deref().map(str::to_owned),
                }),
                error: e.clone(),
            })
        });
        let warnings = files
            .iter()
            .flat_map(|(_, f)| f.warnings.iter().cloned())
            .chain(api_warnings)
            .collect();
        (problems, warnings)
    }

    /// Keeps the warnings found when stub `id` was posted through the admin API, in
    /// place of any it had, for [`Store::problems`]. Only this instance lists them
    /// when state is shared: the others were handed the stub, not its warnings.
    pub fn note_api_warnings(&self, id: &Arc<str>, warnings: Vec<decoy_spec::fields::FieldError>) {
        let mut st = self.lock();
        if warnings.is_empty() {
            st.api_warnings.remove(id);
        } else {
            st.api_warnings.insert(id.clone(), warnings);
        }
    }

    /// Adds or replaces (by id) a stub through the API. A persistent stub is written
    /// to its file (see the module documentation). When state is shared, every
    /// instance applies the change, and so writes the file, as the shared store hands
    /// it on; a failure to write is logged there.
    pub fn upsert(&self, m: Mapping) -> Upserted {
        match self.replicate(|r| r.put(&m)) {
            None => self.upsert_here(m),
            Some(_) => Upserted {
                mapping: Arc::new(m),
                not_saved: None,
            },
        }
    }

    fn upsert_here(&self, m: Mapping) -> Upserted {
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
        // WireMock changes the stub first, then writes its file: a failed write
        // leaves the change made.
        let not_saved = if m.is_persistent() {
            self.persist(&mut st, &m).err()
        } else {
            None
        };
        self.publish(&mut st);
        Upserted {
            mapping: m,
            not_saved,
        }
    }

    /// Writes persistent stub `m`, already placed in `st`, to its file: a file stub
    /// to its own file (under the name it has, as WireMock keeps it even when the
    /// stub's name changed), an API stub to a new file named by the file-name
    /// template; the file is then read back, so the stub becomes a file stub, in the
    /// place it had, and the watcher knows the content. A stub of a list file is not
    /// written: WireMock refuses to.
    fn persist(&self, st: &mut State, m: &Arc<Mapping>) -> Result<(), PersistError> {
        let text = persistent_json(&m.json);
        let files = StubFiles::new(&self.root);
        if let Some((rel, in_list)) = file_of(st, &m.id) {
            if in_list {
                return Err(PersistError::ReadOnly {
                    id: m.id.clone(),
                    file: rel,
                    action: "saved",
                });
            }
            files.rewrite(&m.id, &rel, &text)?;
            self.refresh_file(st, &rel, true);
            if st
                .files
                .get(rel.as_os_str())
                .is_some_and(|f| f.problems.is_empty())
            {
                st.overrides.remove(&m.id);
            }
            return Ok(());
        }
        // An API stub that has a file already (not a mapping file) keeps it.
        if let Some(rel) = st.api_files.get(&m.id) {
            return files.rewrite(&m.id, rel, &text);
        }
        let v: serde_json::Value = serde_json::from_str(&m.json).unwrap_or_default();
        let name = self
            .filenames
            .file_name(&v, &m.id)
            .map_err(|reason| PersistError::Name {
                id: m.id.clone(),
                reason,
            })?;
        let rel = files.create(&m.id, &name, &text)?;
        self.adopt_own_file(st, &m.id, rel);
        Ok(())
    }

    /// Makes API stub `id` the stub of `rel`, the file just created for it: read back,
    /// in the place the stub had. A file that is no mapping file (a template without
    /// `.json`) would be dropped at the next rescan, so its stub stays an API stub
    /// that knows its file (deleting the stub deletes it, as in WireMock), as does one
    /// whose file did not read back as that stub.
    fn adopt_own_file(&self, st: &mut State, id: &Arc<str>, rel: PathBuf) {
        let Some(pos) = st.api.iter().position(|(_, x)| x.id == *id) else {
            return;
        };
        if load::is_mapping_file_name(&rel) {
            let added = st.api[pos].0;
            self.refresh_file(st, &rel, true);
            if let Some(f) = st.files.get_mut(rel.as_os_str())
                && f.problems.is_empty()
                && f.mappings.iter().any(|x| x.id == *id)
            {
                f.added = added;
                st.api.remove(pos);
                return;
            }
        }
        st.api_files.insert(id.clone(), rel);
    }

    /// Removes a stub by id; `Ok(false)` when there is none. As in WireMock, a
    /// persistent stub (`"persistent": true`) takes its file with it; when the file
    /// cannot be deleted, or holds several stubs (read-only to WireMock), the stub
    /// stays and the error says why.
    pub fn remove(&self, id: &str) -> Result<bool, PersistError> {
        if self.replica.get().is_some() {
            {
                let st = self.lock();
                if !st.api.iter().any(|(_, m)| &*m.id == id) {
                    let Some(m) = live_file_stub(&st, id) else {
                        return Ok(false);
                    };
                    if m.is_persistent()
                        && let Some((file, true)) = file_of(&st, &m.id)
                    {
                        return Err(PersistError::ReadOnly {
                            id: m.id.clone(),
                            file,
                            action: "removed",
                        });
                    }
                }
            }
            self.replicate(|r| r.remove(id));
            return Ok(true);
        }
        self.remove_here(id, true)
    }

    /// Removes a stub from what is served and leaves its file, if it has one, on
    /// disk (back at the next start or reset): WireMock's `POST
    /// /__admin/mappings/remove` for the stubs it finds by their request. With state
    /// shared, the change goes through the shared store as [`Store::remove`] does.
    pub fn forget(&self, id: &str) -> Result<bool, PersistError> {
        if self.replica.get().is_some() {
            return self.remove(id);
        }
        self.remove_here(id, false)
    }

    /// Removes stub `id`, and, when `files` and it is persistent, its file.
    fn remove_here(&self, id: &str, files: bool) -> Result<bool, PersistError> {
        let mut st = self.lock();
        if let Some(pos) = st.api.iter().position(|(_, m)| &*m.id == id) {
            let own = st
                .api_files
                .get(id)
                .filter(|_| files && st.api[pos].1.is_persistent())
                .cloned();
            if let Some(rel) = own {
                self.delete_file(&st.api[pos].1.id, &rel)?;
            }
            st.api_files.remove(id);
            st.api.remove(pos);
            self.publish(&mut st);
            return Ok(true);
        }
        let Some(m) = live_file_stub(&st, id) else {
            return Ok(false);
        };
        match file_of(&st, &m.id).filter(|_| files && m.is_persistent()) {
            Some((file, true)) => {
                return Err(PersistError::ReadOnly {
                    id: m.id.clone(),
                    file,
                    action: "removed",
                });
            }
            Some((rel, false)) => {
                self.delete_file(&m.id, &rel)?;
                st.files.remove(rel.as_os_str());
                st.overrides.remove(&m.id);
            }
            None => {
                st.overrides.remove(&m.id);
                st.deleted.insert(m.id.clone());
            }
        }
        self.publish(&mut st);
        Ok(true)
    }

    /// Deletes the file of stub `id` that decoy is about to stop tracking (only
    /// inside `mappings/`, see [`StubFiles::delete`]); a file already gone is no error.
    fn delete_file(&self, id: &Arc<str>, rel: &Path) -> Result<(), PersistError> {
        StubFiles::new(&self.root).delete(id, rel)
    }

    /// Removes every stub and, as WireMock's `DELETE /__admin/mappings` does, deletes
    /// the mapping files they were loaded from or saved to. A file holding several
    /// stubs (`"mappings": [...]`, read-only to WireMock) is left on disk; its stubs are
    /// removed from what is served until a reset.
    pub fn remove_all(&self) {
        if self.replica.get().is_some() {
            let ids: Vec<Arc<str>> = self
                .engine
                .mappings()
                .iter()
                .map(|m| m.id.clone())
                .collect();
            self.replicate(|r| r.remove_all(&ids));
            return;
        }
        self.remove_all_here()
    }

    fn remove_all_here(&self) {
        let mut st = self.lock();
        st.api.clear();
        st.overrides.clear();
        st.api_warnings.clear();
        for (id, rel) in std::mem::take(&mut st.api_files) {
            if let Err(e) = self.delete_file(&id, &rel) {
                tracing::warn!("{e}");
            }
        }
        let files: Vec<(PathBuf, Option<Arc<str>>)> = st
            .files
            .iter()
            .map(|(k, f)| (k.0.clone(), f.mappings.first().map(|m| m.id.clone())))
            .collect();
        for (rel, id) in files {
            if !is_single_stub_file(&st, &rel) {
                continue;
            }
            match self.delete_file(&id.unwrap_or_default(), &rel) {
                Ok(()) => {
                    st.files.remove(rel.as_os_str());
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        st.deleted = file_ids(&st);
        self.publish(&mut st);
    }

    /// Back to what is on disk: drops API stubs, edits and deletions, re-reads files
    /// in the loader's order, as at start.
    pub fn reset(&self) -> Counts {
        if self.replicate(|r| r.reset()).is_some() {
            return counts(&self.lock());
        }
        self.reset_here()
    }

    /// Under one lock, and always published: the API stubs it drops must go even when
    /// the disk has no file to re-read (an empty root, JUnit's usual case).
    fn reset_here(&self) -> Counts {
        let mut st = self.lock();
        st.api.clear();
        st.overrides.clear();
        st.api_warnings.clear();
        st.deleted.clear();
        st.files.clear();
        st.api_files.clear();
        self.rescan_into(&mut st, true);
        self.publish(&mut st)
    }

    /// WireMock's save: every stub becomes persistent (`"persistent": true`) and is
    /// written into `mappings/`, a file stub over its own file, an API stub into a new
    /// file named as WireMock names it; from then on they are all file stubs. Stubs of
    /// a list file are left as they are, an edit of one staying in memory (WireMock
    /// cannot write those either); an unedited file stub that is already persistent is
    /// not rewritten, nor is an unedited one whose file leads outside `mappings/`
    /// through a symbolic link (it is on disk already, as it is served). An API stub
    /// whose file name (`--filename-template`) does not end in `.json` is written but
    /// stays an API stub that knows its file: it is not a mapping file, so it would be
    /// dropped at the next rescan, and neither engine reads it at start.
    ///
    /// Every target is checked before anything is written: an edited stub whose file
    /// leads outside `mappings/`, or a stub the template names no file for, makes the
    /// save write nothing and say why for each. A write that then fails (a full disk)
    /// stops the save; the files written before it are kept and adopted, and the
    /// error says how many. Returns the files written.
    pub fn save(&self) -> Result<Vec<PathBuf>, SaveError> {
        let mut st = self.lock();
        // As before any file existed: a save makes `mappings/` (a failure to is
        // reported by the first write).
        let _ = std::fs::create_dir_all(load::mappings_dir(&self.root));
        let files = StubFiles::new(&self.root);
        let mut refused = Vec::new();
        // (the stub, its own file or else the name of a new one)
        let mut plan: Vec<(Arc<Mapping>, Result<PathBuf, String>)> = Vec::new();
        for (key, f) in st.files_in_order() {
            if f.mappings.len() != 1 || !is_single_stub_file(&st, &key.0) {
                continue;
            }
            let m = &f.mappings[0];
            if st.deleted.contains(&m.id) {
                continue;
            }
            let edited = st.overrides.get(&m.id);
            if edited.is_none() && m.is_persistent() {
                continue;
            }
            match files.own(&m.id, &key.0, "write") {
                Ok(_) => plan.push((edited.unwrap_or(m).clone(), Ok(key.0.clone()))),
                Err(e) if edited.is_some() => refused.push(e),
                // Served as it is on disk: nothing of it would be lost.
                Err(_) => {}
            }
        }
        // An edited stub of a list file stays an in-memory edit (WireMock refuses to
        // save those); API stubs go to files of their own.
        for (_, m) in &st.api {
            let target = match st.api_files.get(&m.id) {
                Some(rel) => files.own(&m.id, rel, "write").map(|_| Ok(rel.clone())),
                None => {
                    let v: serde_json::Value = serde_json::from_str(&m.json).unwrap_or_default();
                    self.filenames
                        .file_name(&v, &m.id)
                        .map(Err)
                        .map_err(|reason| PersistError::Name {
                            id: m.id.clone(),
                            reason,
                        })
                }
            };
            match target {
                Ok(t) => plan.push((m.clone(), t)),
                Err(e) => refused.push(e),
            }
        }
        if !refused.is_empty() {
            return Err(SaveError {
                planned: plan.len() + refused.len(),
                written: Vec::new(),
                problems: refused,
            });
        }
        let planned = plan.len();
        let mut written: Vec<PathBuf> = Vec::new();
        let mut failed = None;
        for (m, target) in plan {
            let text = persistent_json(&m.json);
            let done = match target {
                Ok(rel) => files.rewrite(&m.id, &rel, &text).map(|()| (rel, false)),
                Err(name) => files.create(&m.id, &name, &text).map(|rel| (rel, true)),
            };
            match done {
                Ok((rel, true)) => {
                    self.adopt_own_file(&mut st, &m.id, rel.clone());
                    written.push(rel);
                }
                Ok((rel, false)) => {
                    if st.files.contains_key(rel.as_os_str()) {
                        st.overrides.remove(&m.id);
                        self.refresh_file(&mut st, &rel, true);
                    }
                    written.push(rel);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.publish(&mut st);
        match failed {
            None => Ok(written),
            Some(e) => Err(SaveError {
                planned,
                written,
                problems: vec![e],
            }),
        }
    }
}

/// Why `POST /__admin/mappings/save` did not write every stub: the stubs refused
/// before anything was written, or the write that failed after `written`.
#[derive(Debug)]
pub struct SaveError {
    /// How many stub files the save meant to write.
    pub planned: usize,
    /// The files written before a write failed (none when stubs were refused).
    pub written: Vec<PathBuf>,
    pub problems: Vec<PersistError>,
}

impl std::fmt::Display for SaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let problems: Vec<String> = self.problems.iter().map(|p| p.to_string()).collect();
        if self.written.is_empty() {
            write!(f, "nothing was written: {}", problems.join("; "))
        } else {
            write!(
                f,
                "{} of {} stub files were written and are kept, then: {}; the other stubs \
                 are served as they were, from memory only",
                self.written.len(),
                self.planned,
                problems.join("; ")
            )
        }
    }
}

impl std::error::Error for SaveError {}

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
    load::hash_file(path).ok()
}

fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_owned())
        + "\n"
}

/// A stub's JSON with `"persistent": true`, pretty-printed, as `save` writes it.
fn persistent_json(json: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(mut obj)) => {
            obj.insert("persistent".into(), serde_json::Value::Bool(true));
            serde_json::to_string_pretty(&obj).unwrap_or_else(|_| json.to_owned()) + "\n"
        }
        _ => pretty(json),
    }
}

/// The file holding file stub `id` (the first read, should two have it), and whether
/// it is a list file, which WireMock neither rewrites nor deletes.
fn file_of(st: &State, id: &str) -> Option<(PathBuf, bool)> {
    st.files_in_order().into_iter().find_map(|(key, f)| {
        let m = f.mappings.iter().find(|m| &*m.id == id)?;
        let in_list = f.mappings.len() > 1 || m.source.as_ref().is_some_and(|s| s.in_list);
        Some((key.0.clone(), in_list))
    })
}

/// The live (not deleted) stub `id` among the file stubs, with an edit applied.
fn live_file_stub(st: &State, id: &str) -> Option<Arc<Mapping>> {
    if st.deleted.contains(id) {
        return None;
    }
    if let Some(m) = st.overrides.get(id) {
        return Some(m.clone());
    }
    st.files
        .values()
        .flat_map(|f| f.mappings.iter())
        .find(|m| &*m.id == id)
        .cloned()
}

/// Whether the mapping file `rel` holds one stub object, not a `"mappings"` list
/// (WireMock treats a list file as read-only: it neither rewrites nor deletes it).
fn is_single_stub_file(st: &State, rel: &Path) -> bool {
    st.files
        .get(rel.as_os_str())
        .is_some_and(|f| f.mappings.len() <= 1 && f.problems.is_empty())
        && !st
            .files
            .get(rel.as_os_str())
            .and_then(|f| f.mappings.first())
            .and_then(|m| m.source.as_ref())
            .is_some_and(|src| src.in_list)
}
