//! The admin API's changes: stubs created, edited and removed, `reset` and `save`.
//! A persistent stub's file is written or deleted through [`StubFiles`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::{file_ids, file_of, is_single_stub_file, live_file_stub};
use super::{Counts, State, Store, counts};
use crate::mapping::Mapping;
use crate::mapping::load;
use crate::shared::Unavailable;
use crate::stub_files::{PersistError, StubFiles};

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
    pub fn upsert(&self, m: Mapping) -> Result<Upserted, Unavailable> {
        match self.replicate(|r| r.put(&m)) {
            None => Ok(self.upsert_here(m)),
            Some(done) => done.map(|()| Upserted {
                mapping: Arc::new(m),
                not_saved: None,
            }),
        }
    }

    pub(super) fn upsert_here(&self, m: Mapping) -> Upserted {
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
                .is_some_and(|f| f.problems().is_empty())
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
                && f.problems().is_empty()
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
            if let Some(done) = self.replicate(|r| r.remove(id)) {
                done?;
            }
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
    pub(super) fn remove_here(&self, id: &str, files: bool) -> Result<bool, PersistError> {
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
    pub fn remove_all(&self) -> Result<(), Unavailable> {
        if self.replica.get().is_some() {
            let ids: Vec<Arc<str>> = self
                .engine
                .mappings()
                .iter()
                .map(|m| m.id.clone())
                .collect();
            return self.replicate(|r| r.remove_all(&ids)).unwrap_or(Ok(()));
        }
        self.remove_all_here();
        Ok(())
    }

    pub(super) fn remove_all_here(&self) {
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
    pub fn reset(&self) -> Result<Counts, Unavailable> {
        if let Some(done) = self.replicate(|r| r.reset()) {
            return done.map(|()| counts(&self.lock()));
        }
        Ok(self.reset_here())
    }

    /// Under one lock, and always published: the API stubs it drops must go even when
    /// the disk has no file to re-read (an empty root, JUnit's usual case).
    pub(super) fn reset_here(&self) -> Counts {
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
