//! `/__admin/files`: the `__files` folder, listed, read, written and deleted.

use super::{Admin, AdminReply, AdminRequest, json};
use base64::Engine as _;
use decoy_core::mapping::load;
use decoy_core::paths;

/// The most files `GET /__admin/files` lists (a bound on the answer's size and on
/// the walk, whatever `__files` holds).
pub const MAX_LISTED_FILES: usize = 100_000;

impl Admin {
    /// `/__admin/files/...`; the name is the rest of the path, its segments already
    /// percent-decoded (an encoded `/` or `..` is then checked like any other).
    pub(super) fn files_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        Some(match (req.method.as_str(), rest) {
            ("GET", []) => self.list_files(),
            ("GET", rest) => self.file_op(req, &rest.join("/")),
            ("PUT", rest) => self.file_op(req, &rest.join("/")),
            ("DELETE", rest) => self.file_op(req, &rest.join("/")),
            _ => return None,
        })
    }

    fn files_dir(&self) -> std::path::PathBuf {
        load::files_dir(self.store.root())
    }

    /// Every file below `__files`, as paths relative to it, sorted. Symlinked folders
    /// are not entered (two links to each other would otherwise be walked forever)
    /// and a symlinked file is listed only when it resolves inside `__files`, so the
    /// list names exactly what `GET /__admin/files/{name}` serves. At most
    /// [`MAX_LISTED_FILES`] are listed.
    fn list_files(&self) -> AdminReply {
        let dir = self.files_dir();
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        'walk: while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(ty) = e.file_type() else { continue };
                let p = e.path();
                let Ok(rel) = p.strip_prefix(&dir) else {
                    continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                if ty.is_dir() {
                    stack.push(p);
                    continue;
                }
                let listed = ty.is_file()
                    || (ty.is_symlink()
                        && p.is_file()
                        && paths::inside(&dir, &rel, "__files").is_ok());
                if !listed {
                    continue;
                }
                if out.len() == MAX_LISTED_FILES {
                    tracing::warn!(
                        "GET /__admin/files: __files holds more than {MAX_LISTED_FILES} files; \
                         only the first {MAX_LISTED_FILES} found are listed"
                    );
                    break 'walk;
                }
                out.push(rel);
            }
        }
        out.sort();
        AdminReply::json(200, json!(out))
    }

    fn file_op(&self, req: &AdminRequest, name: &str) -> AdminReply {
        let dir = self.files_dir();
        // The same containment rule as bodyFileName, symlinks included; a new file
        // need not exist yet.
        let path = match paths::inside(&dir, name, "__files") {
            Ok(p) => p,
            Err(why) => return AdminReply::bad_request(&why),
        };
        match req.method.as_str() {
            "GET" => match std::fs::read(&path) {
                Ok(bytes) => AdminReply::text(200, "application/octet-stream", bytes),
                Err(_) => AdminReply::not_found(&format!("no file {name} in __files")),
            },
            "PUT" => {
                if let Some(parent) = path.parent()
                    && let Err(e) = std::fs::create_dir_all(parent)
                {
                    return AdminReply::json(500, json::error("Write failed", &e.to_string()));
                }
                match std::fs::write(&path, &req.body) {
                    // WireMock answers with the content, base64-encoded, as a JSON string.
                    Ok(()) => AdminReply::json(
                        200,
                        json!(base64::engine::general_purpose::STANDARD.encode(&req.body)),
                    ),
                    Err(e) => AdminReply::json(500, json::error("Write failed", &e.to_string())),
                }
            }
            _ => match std::fs::remove_file(&path) {
                Ok(()) => AdminReply::empty(200),
                Err(_) => AdminReply::not_found(&format!("no file {name} in __files")),
            },
        }
    }
}
