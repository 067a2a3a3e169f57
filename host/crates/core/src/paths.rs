//! Keeping file names that decoy builds or is given inside the folder they belong to.
//!
//! Every file the server reads, writes or deletes on request (stubs saved by the
//! admin API, recordings, `--record-mappings`, the `/__admin/files` API) goes through
//! [`inside`]: the name must be a relative path made of plain components (no `..`,
//! no root, no drive), and what it resolves to on disk (following any symlink on the
//! way: a linked folder, a linked file) must still be below the folder. A name that
//! does not exist yet is resolved through its deepest existing ancestor, so a new
//! file under a linked folder pointing elsewhere is refused before anything is
//! created.
//!
//! A check followed by a write is not atomic: someone able to swap a folder for a
//! link between the two can still win the race. That needs write access to the root
//! itself, which already lets them put anything there.

use std::path::{Component, Path, PathBuf};

/// `dir/name` when `name` stays inside `dir` (see the module documentation), or why
/// it does not, in words naming `what` the folder is (such as `"__files"`).
pub fn inside(dir: &Path, name: &str, what: &str) -> Result<PathBuf, String> {
    inside_path(dir, Path::new(name), what)
}

/// [`inside`] for a name that is already a path (one read from the disk, which need
/// not be UTF-8).
pub fn inside_path(dir: &Path, rel: &Path, what: &str) -> Result<PathBuf, String> {
    let name = rel.display().to_string();
    let plain = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if rel.as_os_str().is_empty()
        || !plain
        || !rel.components().any(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!(
            "{name:?} is not a path inside {what}: it must be a relative path without `..`"
        ));
    }
    let full = dir.join(rel);
    let Ok(root) = dir.canonicalize() else {
        // The folder does not exist yet: nothing below it can be a link elsewhere.
        return Ok(full);
    };
    if !resolved(&full).starts_with(&root) {
        return Err(format!(
            "{name:?} resolves outside {what} (through a symbolic link)"
        ));
    }
    Ok(full)
}

/// Where `path` leads on disk: the path itself canonicalised when it exists (a link
/// followed, even a dangling one's parent), else its deepest existing ancestor
/// canonicalised with the rest appended.
fn resolved(path: &Path) -> PathBuf {
    let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
    let mut at = path;
    loop {
        // A dangling link is no "existing" file, but is still a link to elsewhere:
        // resolve what it points to lexically through its parent.
        if let Ok(meta) = std::fs::symlink_metadata(at) {
            let canon = match at.canonicalize() {
                Ok(c) => c,
                Err(_) if meta.file_type().is_symlink() => match std::fs::read_link(at) {
                    Ok(target) if target.is_absolute() => target,
                    Ok(target) => at.parent().map(resolved).unwrap_or_default().join(target),
                    Err(_) => return PathBuf::new(),
                },
                Err(_) => return PathBuf::new(),
            };
            let mut out = canon;
            for part in tail.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name);
                at = parent;
            }
            _ => return PathBuf::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inside;

    #[test]
    fn plain_relative_names_are_inside() {
        let dir = tempfile::tempdir().unwrap();
        assert!(inside(dir.path(), "a.json", "mappings").is_ok());
        assert!(inside(dir.path(), "sub/new/b.txt", "__files").is_ok());
    }

    #[test]
    fn parent_steps_and_absolute_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", ".", "../x", "a/../../x", "/etc/passwd", "a/../b"] {
            let err = inside(dir.path(), bad, "__files").unwrap_err();
            assert!(err.contains("not a path inside __files"), "{bad}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_that_lead_outside_are_refused_even_for_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let files = dir.path().join("__files");
        std::fs::create_dir_all(files.join("real")).unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), files.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), files.join("f")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("gone"), files.join("dangling")).unwrap();
        std::os::unix::fs::symlink(files.join("real"), files.join("inner")).unwrap();
        for bad in ["link/secret", "link/new/deeper.txt", "f", "dangling"] {
            let err = inside(&files, bad, "__files").unwrap_err();
            assert!(err.contains("resolves outside __files"), "{bad}: {err}");
        }
        assert!(inside(&files, "inner/x.txt", "__files").is_ok());
        assert!(inside(&files, "real/x.txt", "__files").is_ok());
    }
}
