//! File tracking: per mapping file, the last version that loaded cleanly, its
//! current problems and warnings, and the hash of its content, so that a file decoy
//! wrote itself is recognised when the watcher reports it and not loaded twice.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Counts, State, Store, counts};
use crate::mapping::Mapping;
use crate::mapping::load::{self, Problem};

/// What one mapping file contributes.
///
/// Kept small: a root of 10,000 one-stub files has 10,000 of these in the store's
/// map (whose table has room for more), so what few files have, problems and
/// warnings, is boxed: 48 bytes where it was 88, 0.6 MB less for that root (its
/// table has 16,384 slots).
#[derive(Debug, Default)]
pub(super) struct FileState {
    /// When the file was first read, on the store's clock: its place in the order
    /// stubs were added (see [`State::clock`]).
    pub(super) added: u64,
    /// Hash of the content last read, to skip events for unchanged files (such as
    /// the ones `save` writes itself).
    pub(super) hash: u64,
    /// The last version that loaded cleanly (or, on the very first load, its valid stubs).
    pub(super) mappings: Vec<Arc<Mapping>>,
    /// Its current problems and warnings; `None` when it has neither.
    notes: Option<Box<Notes>>,
}

#[derive(Debug, Default)]
struct Notes {
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl FileState {
    fn new(
        added: u64,
        hash: u64,
        mappings: Vec<Arc<Mapping>>,
        problems: Vec<Problem>,
        warnings: Vec<Problem>,
    ) -> FileState {
        let notes = (!problems.is_empty() || !warnings.is_empty())
            .then(|| Box::new(Notes { problems, warnings }));
        FileState {
            added,
            hash,
            mappings,
            notes,
        }
    }

    /// Why the file (or some of its stubs) did not load.
    pub(super) fn problems(&self) -> &[Problem] {
        self.notes.as_deref().map_or(&[], |n| &n.problems)
    }

    pub(super) fn warnings(&self) -> &[Problem] {
        self.notes.as_deref().map_or(&[], |n| &n.warnings)
    }

    fn notes(&mut self) -> &mut Notes {
        self.notes.get_or_insert_with(Box::default)
    }
}

/// A mapping file's path relative to the root, hashed and compared by its bytes
/// (far cheaper than `Path`'s component by component, for 10,000 files), so the map
/// can be probed with an `&OsStr`.
#[derive(Debug, Clone)]
pub(super) struct FileKey(pub(super) PathBuf);

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

impl Store {
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
            if let Some(state) = states.get_mut(at) {
                // Most files hold one stub: room for one, not the four a first
                // push makes.
                state.mappings.reserve_exact(1);
                state.mappings.push(m);
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
                    states[i].notes().problems.push(p);
                }
            }
            for w in report.warnings {
                if let Some(i) = slot(&w.file) {
                    states[i].notes().warnings.push(w);
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
    pub(super) fn rescan_into(&self, st: &mut State, force: bool) -> bool {
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
    pub(super) fn refresh_file(&self, st: &mut State, rel: &Path, force: bool) -> bool {
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
        // Warnings are said as they appear, like those of the first load (which the
        // server prints): one this file's previous version had is not said again.
        let said = previous.as_ref().map_or(&[][..], FileState::warnings);
        for w in loaded.warnings.iter().filter(|w| !said.contains(w)) {
            tracing::warn!("{w}");
        }
        // A rewritten file keeps its place; a new one is the newest stub.
        let added = match &previous {
            Some(p) => p.added,
            None => st.tick(),
        };
        let state = if loaded.problems.is_empty() {
            FileState::new(added, hash, loaded.mappings, Vec::new(), loaded.warnings)
        } else {
            let kept = if previous.is_some() {
                "the last good version of the file stays live"
            } else {
                "a new file: its valid stubs are served, the others skipped"
            };
            for p in &loaded.problems {
                tracing::warn!("{p} ({kept})");
            }
            let mappings = match previous {
                Some(prev) => prev.mappings,
                None => loaded.mappings,
            };
            FileState::new(added, hash, mappings, loaded.problems, loaded.warnings)
        };
        st.files.insert(FileKey(rel.to_path_buf()), state);
        true
    }
}

pub(super) fn file_ids(st: &State) -> HashSet<Arc<str>> {
    st.files
        .values()
        .flat_map(|f| f.mappings.iter().map(|m| m.id.clone()))
        .collect()
}

fn hash_file(path: &Path) -> Option<u64> {
    load::hash_file(path).ok()
}

/// The file holding file stub `id` (the first read, should two have it), and whether
/// it is a list file, which WireMock neither rewrites nor deletes.
pub(super) fn file_of(st: &State, id: &str) -> Option<(PathBuf, bool)> {
    st.files_in_order().into_iter().find_map(|(key, f)| {
        let m = f.mappings.iter().find(|m| &*m.id == id)?;
        let in_list = f.mappings.len() > 1 || m.source.as_ref().is_some_and(|s| s.in_list);
        Some((key.0.clone(), in_list))
    })
}

/// The live (not deleted) stub `id` among the file stubs, with an edit applied.
pub(super) fn live_file_stub(st: &State, id: &str) -> Option<Arc<Mapping>> {
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
pub(super) fn is_single_stub_file(st: &State, rel: &Path) -> bool {
    st.files
        .get(rel.as_os_str())
        .is_some_and(|f| f.mappings.len() <= 1 && f.problems().is_empty())
        && !st
            .files
            .get(rel.as_os_str())
            .and_then(|f| f.mappings.first())
            .and_then(|m| m.source.as_ref())
            .is_some_and(|src| src.in_list)
}
