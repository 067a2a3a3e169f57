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
//!
//! The parts, one file each: `files` tracks the mapping files (per file, the last
//! version that loaded cleanly, its problems and the hash of its content); `api`
//! holds the admin API's changes (stubs created, edited, removed, reset and saved);
//! `publish` rebuilds the list in the order of the shared clock, leaves out
//! duplicate ids and swaps the result into the engine; `replication` is what the
//! shared-state crate calls. File writing itself is [`crate::stub_files`]'s.

mod api;
mod files;
mod publish;
mod replication;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::engine::Engine;
use crate::filenames::FilenameMaker;
use crate::mapping::load::{self, Problem};
use crate::mapping::{Mapping, ParseContext};
use crate::shared::StubReplica;
pub use crate::stub_files::PersistError;
pub use api::{SaveError, Upserted};
use files::{FileKey, FileState};
pub use replication::Replicated;

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

    /// Current problems and warnings of every file, then the warnings of stubs
    /// posted through the admin API (see [`Store::note_api_warnings`]).
    pub fn problems(&self) -> (Vec<Problem>, Vec<Problem>) {
        let st = self.lock();
        let files = st.files_in_order();
        let problems = files
            .iter()
            .flat_map(|(_, f)| f.problems().iter().cloned())
            .chain(st.duplicates.iter().cloned())
            .collect();
        let api = st.api.iter().map(|(_, m)| m).chain(st.overrides.values());
        let api_warnings = api.flat_map(|m| {
            let errors = st.api_warnings.get(&m.id).map_or(&[][..], Vec::as_slice);
            errors.iter().map(|e| Problem {
                file: PathBuf::new(),
                stub: Some(load::StubRef::mapping(
                    0,
                    Some(m.id.to_string()),
                    m.name.as_deref().map(str::to_owned),
                )),
                error: e.clone(),
            })
        });
        let warnings = files
            .iter()
            .flat_map(|(_, f)| f.warnings().iter().cloned())
            .chain(api_warnings)
            .collect();
        (problems, warnings)
    }
}

fn counts(st: &State) -> Counts {
    Counts {
        loaded: st.files.values().map(|f| f.mappings.len()).sum::<usize>() + st.api.len(),
        rejected: st
            .files
            .values()
            .map(|f| {
                f.problems()
                    .iter()
                    .map(|p| p.stub.as_ref().map(|s| s.index))
                    .collect::<HashSet<_>>()
                    .len()
            })
            .sum::<usize>()
            + st.duplicates.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store over a fresh root, with `files` (name, content) in `mappings/`, loaded
    /// as at start.
    fn store_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mappings = load::mappings_dir(dir.path());
        std::fs::create_dir_all(&mappings).unwrap();
        for (name, text) in files {
            std::fs::write(mappings.join(name), text).unwrap();
        }
        let store = Store::new(dir.path(), Arc::new(Engine::new(Vec::new())));
        let report = load::load_root_with(dir.path(), store.context(), &[]).unwrap();
        store.install_initial(report);
        (dir, store)
    }

    fn stub(id: &str, url: &str) -> String {
        format!(r#"{{"id": "{id}", "request": {{"url": "{url}"}}, "response": {{"status": 200}}}}"#)
    }

    /// A stub as the admin API would hand it to the store.
    fn api_stub(store: &Store, json: &str) -> Mapping {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        Mapping::parse(&v, store.context(), None, &mut Vec::new()).unwrap()
    }

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        std::fs::write(load::mappings_dir(dir.path()).join(name), text).unwrap();
        PathBuf::from("mappings").join(name)
    }

    /// The ids served, in the order they were added.
    fn served(store: &Store) -> Vec<String> {
        let set = store.engine().mappings();
        set.in_insertion_order().map(|m| m.id.to_string()).collect()
    }

    fn url_of(store: &Store, id: &str) -> String {
        let m = store.engine().mappings().get(id).cloned().unwrap();
        serde_json::from_str::<serde_json::Value>(&m.json).unwrap()["request"]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn files_then_api_stubs_are_served_in_the_order_they_came() {
        let (dir, store) =
            store_with(&[("a.json", &stub("a", "/a")), ("b.json", &stub("b", "/b"))]);
        store.upsert(api_stub(&store, &stub("c", "/c"))).unwrap();
        let rel = write(&dir, "d.json", &stub("d", "/d"));
        store.reload_files(&[rel]);
        store.upsert(api_stub(&store, &stub("e", "/e"))).unwrap();
        assert_eq!(served(&store), ["a", "b", "c", "d", "e"]);
        // A rewritten file keeps its place.
        let rel = write(&dir, "a.json", &stub("a", "/a2"));
        store.reload_files(&[rel]);
        assert_eq!(served(&store), ["a", "b", "c", "d", "e"]);
        assert_eq!(url_of(&store, "a"), "/a2");
    }

    #[test]
    fn a_later_file_stub_with_an_id_already_read_is_left_out_and_reported() {
        let (dir, store) = store_with(&[("a.json", &stub("same", "/first"))]);
        let rel = write(&dir, "b.json", &stub("same", "/second"));
        let counts = store.reload_files(&[rel]);
        assert_eq!(served(&store), ["same"]);
        assert_eq!(url_of(&store, "same"), "/first");
        assert_eq!(counts.rejected, 1);
        let (problems, _) = store.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].file.ends_with("b.json"), "{problems:?}");
    }

    #[test]
    fn a_file_that_breaks_keeps_its_last_good_version_until_it_is_fixed() {
        let (dir, store) = store_with(&[("a.json", &stub("a", "/good"))]);
        let rel = write(&dir, "a.json", "{ not json");
        store.reload_files(std::slice::from_ref(&rel));
        assert_eq!(served(&store), ["a"]);
        assert_eq!(url_of(&store, "a"), "/good");
        let (problems, _) = store.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].file.ends_with("a.json"), "{problems:?}");

        write(&dir, "a.json", &stub("a", "/fixed"));
        store.reload_files(&[rel]);
        assert_eq!(url_of(&store, "a"), "/fixed");
        assert!(store.problems().0.is_empty());
    }

    #[test]
    fn a_new_file_that_is_broken_has_no_last_good_version() {
        let (dir, store) = store_with(&[("a.json", &stub("a", "/a"))]);
        let rel = write(&dir, "b.json", "{ not json");
        let counts = store.reload_files(&[rel]);
        assert_eq!(served(&store), ["a"]);
        assert_eq!(counts.loaded, 1);
        let (problems, _) = store.problems();
        assert!(
            problems.iter().any(|p| p.file.ends_with("b.json")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_file_decoy_wrote_itself_is_not_loaded_a_second_time() {
        let (dir, store) = store_with(&[]);
        let m = api_stub(
            &store,
            r#"{"id": "p", "name": "kept", "persistent": true,
            "request": {"url": "/p"}, "response": {"status": 200}}"#,
        );
        let done = store.upsert(m).unwrap();
        assert!(done.not_saved.is_none(), "{:?}", done.not_saved);
        let written: Vec<PathBuf> = load::mapping_files(dir.path()).unwrap();
        assert_eq!(written.len(), 1, "{written:?}");
        // The stub is now a file stub, read back from what was written.
        assert!(store.engine().mappings().get("p").unwrap().source.is_some());
        let swaps = store.swaps();
        // The watcher then reports the file: its content is known, nothing is published.
        store.reload_files(&written);
        assert_eq!(store.swaps(), swaps);
        assert_eq!(served(&store), ["p"]);
    }

    #[test]
    fn reset_drops_api_stubs_and_edits_and_reads_the_files_again() {
        let (dir, store) = store_with(&[("a.json", &stub("a", "/a"))]);
        store
            .upsert(api_stub(&store, &stub("api", "/api")))
            .unwrap();
        store
            .upsert(api_stub(&store, &stub("a", "/edited")))
            .unwrap();
        assert_eq!(url_of(&store, "a"), "/edited");
        // A change on disk the watcher has not reported yet.
        write(&dir, "b.json", &stub("b", "/b"));
        let counts = store.reset().unwrap();
        assert_eq!(served(&store), ["a", "b"]);
        assert_eq!(url_of(&store, "a"), "/a");
        assert_eq!(
            counts,
            Counts {
                loaded: 2,
                rejected: 0
            }
        );
    }

    #[test]
    fn reset_on_a_root_with_no_stub_file_drops_the_api_stubs() {
        let (_dir, store) = store_with(&[]);
        store
            .upsert(api_stub(&store, &stub("api", "/api")))
            .unwrap();
        assert_eq!(served(&store), ["api"]);
        let counts = store.reset().unwrap();
        assert!(served(&store).is_empty());
        assert_eq!(counts, Counts::default());
    }

    #[test]
    fn removing_an_api_stub_stops_serving_it() {
        let (_dir, store) = store_with(&[("a.json", &stub("a", "/a"))]);
        store
            .upsert(api_stub(&store, &stub("api", "/api")))
            .unwrap();
        assert_eq!(served(&store), ["a", "api"]);
        assert!(store.remove("api").unwrap());
        assert_eq!(served(&store), ["a"]);
        assert!(!store.remove("api").unwrap());
    }

    #[test]
    fn editing_a_file_stub_serves_the_edit_in_its_place_and_leaves_the_file() {
        let (dir, store) =
            store_with(&[("a.json", &stub("a", "/a")), ("b.json", &stub("b", "/b"))]);
        store
            .upsert(api_stub(&store, &stub("a", "/edited")))
            .unwrap();
        assert_eq!(served(&store), ["a", "b"]);
        assert_eq!(url_of(&store, "a"), "/edited");
        let on_disk = std::fs::read_to_string(load::mappings_dir(dir.path()).join("a.json"));
        assert_eq!(on_disk.unwrap(), stub("a", "/a"));
        // Removing the edited stub takes it out of what is served; its file stays.
        assert!(store.remove("a").unwrap());
        assert_eq!(served(&store), ["b"]);
        assert!(load::mappings_dir(dir.path()).join("a.json").exists());
    }
}
