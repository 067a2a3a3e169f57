//! Where a stub's file goes in `mappings/`, and whether decoy may write or delete it.
//!
//! Every stub file decoy writes or deletes (persistent stubs created, edited and
//! removed through the admin API, `POST /__admin/mappings/save`, recording snapshots)
//! goes through [`StubFiles`], which keeps three rules:
//!
//! - **Inside `mappings/`, links followed.** A file is rewritten or deleted only when
//!   its real path (every symbolic link on the way resolved, the file's own included)
//!   is below `mappings/` ([`crate::paths`]). A stub read from a link to a file
//!   elsewhere, or from a linked folder leading elsewhere, is served like any other,
//!   but its file is never written or deleted: the caller gets a [`PersistError::Outside`]
//!   naming the file and the reason. Links that stay inside (a Kubernetes ConfigMap's
//!   `..data/`) are written through as usual. Reading is not constrained here.
//! - **A new file never replaces one.** A stub without a file gets the name its
//!   template gives; when a file (or link) of that name exists already, whatever it
//!   holds (another stub, a `"mappings"` list, a file that is no stub), the stub gets
//!   the first free name with `-2`, `-3`... before the extension (`get-todo-2.json`).
//!   The file is created exclusively (`O_EXCL`), so one that appears meanwhile is not
//!   replaced either, and a link of that name is never followed. WireMock writes over
//!   whatever has the name; the suffix keeps both, and the name still says what the
//!   template said.
//! - **Own files only.** What is rewritten or deleted is only ever a file the store
//!   tracks for that stub: the one it was read from, or the one decoy created for it.
//!   The store never looks a file up by the name a template gives.
//!
//! A check followed by a write is not atomic (see [`crate::paths`]): swapping a folder
//! for a link in between needs write access to the root, which already allows anything.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::mapping::load;
use crate::paths;

/// How many numbered names (`-2` ... `-1000`) a new file may try before giving up
/// (also the MQ recorder's limit).
pub const MAX_NUMBER: u32 = 1000;

/// Why a persistent stub's file in `mappings/` was not written or deleted. What
/// happened in memory is said by the operation that returns it.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot write {} for stub {id}: {source}", file.display())]
    Write {
        id: Arc<str>,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot delete {} for stub {id}: {source}", file.display())]
    Delete {
        id: Arc<str>,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("no file name for stub {id}: {reason}")]
    Name { id: Arc<str>, reason: String },
    #[error(
        "stub {id} comes from {}, a file holding a \"mappings\" list, which WireMock \
         treats as read-only: a persistent stub of it cannot be {action} there",
        file.display()
    )]
    ReadOnly {
        id: Arc<str>,
        file: PathBuf,
        action: &'static str,
    },
    #[error(
        "stub {id} comes from {}, which decoy does not {action}: {reason}; decoy writes \
         and deletes only files whose real path is inside mappings/ (the file outside \
         is left as it is)",
        file.display()
    )]
    Outside {
        id: Arc<str>,
        file: PathBuf,
        action: &'static str,
        reason: String,
    },
    /// State is shared between instances (`--state`) and the shared store could not
    /// take the change: nothing changed, here or elsewhere.
    #[error("{0}")]
    Shared(#[from] crate::shared::Unavailable),
}

/// The stub files of one root (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct StubFiles<'a> {
    root: &'a Path,
}

impl<'a> StubFiles<'a> {
    pub fn new(root: &'a Path) -> StubFiles<'a> {
        StubFiles { root }
    }

    /// The full path of `rel` (a file the store tracks for stub `id`, relative to the
    /// root: `mappings/...`) when decoy may `action` it (`"write"`, `"delete"`): its
    /// real path is inside `mappings/`.
    pub fn own(
        &self,
        id: &Arc<str>,
        rel: &Path,
        action: &'static str,
    ) -> Result<PathBuf, PersistError> {
        let outside = |reason: String| PersistError::Outside {
            id: id.clone(),
            file: rel.to_path_buf(),
            action,
            reason,
        };
        let below = rel
            .strip_prefix("mappings")
            .map_err(|_| outside("it is not below mappings/".to_owned()))?;
        paths::inside_path(&load::mappings_dir(self.root), below, "mappings/").map_err(outside)
    }

    /// Rewrites `rel`, the file of stub `id`, with `text`.
    pub fn rewrite(&self, id: &Arc<str>, rel: &Path, text: &str) -> Result<(), PersistError> {
        let full = self.own(id, rel, "write")?;
        std::fs::write(full, text).map_err(|source| PersistError::Write {
            id: id.clone(),
            file: rel.to_path_buf(),
            source,
        })
    }

    /// Deletes `rel`, the file of stub `id`; a file already gone is no error.
    pub fn delete(&self, id: &Arc<str>, rel: &Path) -> Result<(), PersistError> {
        let full = self.own(id, rel, "delete")?;
        match std::fs::remove_file(full) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(PersistError::Delete {
                id: id.clone(),
                file: rel.to_path_buf(),
                source,
            }),
        }
    }

    /// Creates a new file for stub `id` in `mappings/` holding `text`, named `name`
    /// (one file name, as [`crate::filenames::FilenameMaker`] gives) or, when that is
    /// taken, the first free numbered form of it ([`numbered`]). Returns the file,
    /// relative to the root. `mappings/` is created if it is missing.
    ///
    /// The file is written whole under a hidden temporary name and then hard-linked
    /// into place, which fails rather than replace anything, so no one ever sees it
    /// half-written (where hard links are not supported, it is created exclusively and
    /// written). A file that holds exactly `text` already is taken as this stub's:
    /// instances sharing a folder (`--state`) each write the same persistent stub, and
    /// must end up with one file, not one each.
    pub fn create(&self, id: &Arc<str>, name: &str, text: &str) -> Result<PathBuf, PersistError> {
        let dir = load::mappings_dir(self.root);
        let failed = |rel: &Path| {
            let (id, file) = (id.clone(), rel.to_path_buf());
            move |source| PersistError::Write { id, file, source }
        };
        std::fs::create_dir_all(&dir).map_err(failed(Path::new("mappings")))?;
        let mut temp = Temp::write(&dir, text);
        for n in 1..=MAX_NUMBER {
            let candidate = numbered(name, n);
            let rel = Path::new("mappings").join(&candidate);
            let full = dir.join(&candidate);
            // Taken, even by a link leading nowhere (never followed).
            if std::fs::symlink_metadata(&full).is_ok() {
                if holds_exactly(&full, text) {
                    return Ok(rel);
                }
                continue;
            }
            paths::inside(&dir, &candidate, "mappings/").map_err(|reason| PersistError::Name {
                id: id.clone(),
                reason,
            })?;
            let placed = match temp.as_ref().map(|t| std::fs::hard_link(&t.0, &full)) {
                Some(Ok(())) => Ok(()),
                Some(Err(e)) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
                // No hard links here: the same rule, one step less atomic.
                Some(Err(_)) | None => {
                    temp = None;
                    create_exclusively(&full, text)
                }
            };
            match placed {
                Ok(()) => return Ok(rel),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if holds_exactly(&full, text) {
                        return Ok(rel);
                    }
                }
                Err(e) => return Err(failed(&rel)(e)),
            }
        }
        Err(PersistError::Name {
            id: id.clone(),
            reason: format!(
                "mappings/ already has files named {name:?} and {:?} to {:?}",
                numbered(name, 2),
                numbered(name, MAX_NUMBER)
            ),
        })
    }
}

/// A hidden file in `mappings/` holding a new stub file's text until it is linked
/// into place (the loader and the watcher skip hidden files); removed when dropped.
struct Temp(PathBuf);

impl Temp {
    /// `None` when it cannot be written: the caller then creates the file directly.
    fn write(dir: &Path, text: &str) -> Option<Temp> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!(".decoy-new-{}-{n}.tmp", std::process::id()));
        create_exclusively(&path, text).ok()?;
        Some(Temp(path))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Creates `path`, which must not exist (not even as a link: `AlreadyExists`), and
/// writes `bytes`; a file left half-written is removed. For files decoy names itself
/// and must never write over (`--record-mappings`' files too).
pub fn create_exclusively(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    if let Err(e) = file.write_all(bytes.as_ref()) {
        drop(file);
        // The file is the one just created: nothing else is lost by removing it.
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}

/// Whether `path` is a plain file (not a link) holding exactly `text`.
fn holds_exactly(path: &Path, text: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == text.len() as u64)
        && std::fs::read(path).is_ok_and(|b| b == text.as_bytes())
}

/// `name` for `n` = 1, else `name` with `-n` before its extension: `get-todo.json`,
/// `get-todo-2.json`; `notes` gives `notes-2`, and a leading dot is no extension
/// (`.hidden-2`).
pub fn numbered(name: &str, n: u32) -> String {
    if n <= 1 {
        return name.to_owned();
    }
    match name.rfind('.').filter(|&i| i > 0) {
        Some(i) => format!("{}-{n}{}", &name[..i], &name[i..]),
        None => format!("{name}-{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`, sorted (no temporary file is ever left behind).
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn id() -> Arc<str> {
        Arc::from("8e4045d3-ec7f-4ff2-b441-4a4d18660f4a")
    }

    #[test]
    fn numbered_names_keep_the_extension() {
        assert_eq!(numbered("get-todo.json", 1), "get-todo.json");
        assert_eq!(numbered("get-todo.json", 2), "get-todo-2.json");
        assert_eq!(numbered("notes.txt", 3), "notes-3.txt");
        assert_eq!(numbered("notes", 2), "notes-2");
        assert_eq!(numbered(".hidden", 2), ".hidden-2");
        assert_eq!(numbered("a.b.json", 2), "a.b-2.json");
    }

    #[test]
    fn a_new_file_never_replaces_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let files = StubFiles::new(dir.path());
        let first = files.create(&id(), "list.json", "one").unwrap();
        assert_eq!(first, Path::new("mappings/list.json"));
        let second = files.create(&id(), "list.json", "two").unwrap();
        assert_eq!(second, Path::new("mappings/list-2.json"));
        std::fs::write(dir.path().join("mappings/notes.txt"), "not a stub").unwrap();
        let third = files.create(&id(), "notes.txt", "three").unwrap();
        assert_eq!(third, Path::new("mappings/notes-2.txt"));
        let read = |rel: &str| std::fs::read_to_string(dir.path().join(rel)).unwrap();
        assert_eq!(read("mappings/list.json"), "one");
        assert_eq!(read("mappings/list-2.json"), "two");
        assert_eq!(read("mappings/notes.txt"), "not a stub");
        assert_eq!(read("mappings/notes-2.txt"), "three");
        assert_eq!(
            names(&dir.path().join("mappings")),
            ["list-2.json", "list.json", "notes-2.txt", "notes.txt"]
        );
    }

    #[test]
    fn a_file_holding_exactly_the_same_text_is_taken_as_the_stubs_own() {
        // Two instances sharing a folder each write the same persistent stub.
        let dir = tempfile::tempdir().unwrap();
        let files = StubFiles::new(dir.path());
        let first = files.create(&id(), "a.json", "same").unwrap();
        let second = files.create(&id(), "a.json", "same").unwrap();
        assert_eq!(first, second);
        assert_eq!(names(&dir.path().join("mappings")), ["a.json"]);
    }

    #[test]
    fn a_name_taken_by_every_number_is_an_error_naming_the_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("mappings")).unwrap();
        for n in 1..=MAX_NUMBER {
            std::fs::write(dir.path().join("mappings").join(numbered("a.json", n)), "").unwrap();
        }
        let e = StubFiles::new(dir.path())
            .create(&id(), "a.json", "x")
            .unwrap_err();
        assert!(matches!(e, PersistError::Name { .. }), "{e}");
        assert!(e.to_string().contains("\"a-1000.json\""), "{e}");
    }

    #[test]
    fn own_files_are_rewritten_and_deleted_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let files = StubFiles::new(dir.path());
        std::fs::create_dir_all(dir.path().join("mappings/sub")).unwrap();
        let rel = Path::new("mappings/sub/a.json");
        std::fs::write(dir.path().join(rel), "old").unwrap();
        files.rewrite(&id(), rel, "new").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(rel)).unwrap(),
            "new"
        );
        files.delete(&id(), rel).unwrap();
        assert!(!dir.path().join(rel).exists());
        // Already gone: no error.
        files.delete(&id(), rel).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn files_whose_real_path_is_outside_are_neither_written_nor_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let mappings = dir.path().join("mappings");
        std::fs::create_dir_all(&mappings).unwrap();
        let target = elsewhere.path().join("t.json");
        std::fs::write(&target, "outside").unwrap();
        std::fs::write(elsewhere.path().join("a.json"), "outside too").unwrap();
        std::os::unix::fs::symlink(&target, mappings.join("link.json")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), mappings.join("sub")).unwrap();
        let files = StubFiles::new(dir.path());
        for rel in ["mappings/link.json", "mappings/sub/a.json"] {
            let e = files.rewrite(&id(), Path::new(rel), "new").unwrap_err();
            assert!(
                matches!(
                    e,
                    PersistError::Outside {
                        action: "write",
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(rel), "{e}");
            assert!(e.to_string().contains("resolves outside mappings/"), "{e}");
            let e = files.delete(&id(), Path::new(rel)).unwrap_err();
            assert!(
                matches!(
                    e,
                    PersistError::Outside {
                        action: "delete",
                        ..
                    }
                ),
                "{e}"
            );
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "outside");
        assert_eq!(
            std::fs::read_to_string(elsewhere.path().join("a.json")).unwrap(),
            "outside too"
        );
        assert!(mappings.join("link.json").exists());
        // A new file is never created through a link of its name.
        let made = files.create(&id(), "link.json", "fresh").unwrap();
        assert_eq!(made, Path::new("mappings/link-2.json"));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "outside");
    }

    #[cfg(unix)]
    #[test]
    fn links_that_stay_inside_are_written_through() {
        // A Kubernetes ConfigMap: `a.json -> ..data/a.json`, `..data -> ..2026_01/`.
        let dir = tempfile::tempdir().unwrap();
        let mappings = dir.path().join("mappings");
        std::fs::create_dir_all(mappings.join("..2026_01")).unwrap();
        std::fs::write(mappings.join("..2026_01/a.json"), "old").unwrap();
        std::os::unix::fs::symlink("..2026_01", mappings.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.json", mappings.join("a.json")).unwrap();
        StubFiles::new(dir.path())
            .rewrite(&id(), Path::new("mappings/a.json"), "new")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(mappings.join("..2026_01/a.json")).unwrap(),
            "new"
        );
    }
}
