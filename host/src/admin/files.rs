//! `/__admin/files`: the `__files` folder, listed, read, written and deleted.

use super::{Admin, AdminReply, AdminRequest, json};
use base64::Engine as _;
use decoy_core::mapping::load;

impl Admin {
    /// `/__admin/files/...`.
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

    fn list_files(&self) -> AdminReply {
        let dir = self.files_dir();
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&dir) {
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        out.sort();
        AdminReply::json(200, json!(out))
    }

    fn file_op(&self, req: &AdminRequest, name: &str) -> AdminReply {
        let dir = self.files_dir();
        let name = percent_encoding::percent_decode_str(name)
            .decode_utf8_lossy()
            .into_owned();
        // The same containment rule as bodyFileName; a new file need not exist yet.
        let inside = std::path::Path::new(&name)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if name.is_empty() || !inside {
            return AdminReply::bad_request(&format!("{name:?} is not a path inside __files"));
        }
        let path = dir.join(&name);
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
