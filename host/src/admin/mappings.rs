//! `/__admin/mappings`: stubs listed, created, edited, removed, imported, saved and
//! found by metadata. Changes go through the store, and so through the file parser;
//! the store also writes and deletes the files of persistent stubs, and a file it
//! could not write or delete is WireMock's 500, with the reason and what was done in
//! memory all the same.

use super::{Admin, AdminReply, AdminRequest, json};
use std::sync::Arc;

use serde_json::Value;

use decoy_core::mapping::Mapping;
use decoy_core::shared::Unavailable;
use decoy_core::store::PersistError;
use decoy_matching::pattern::{Actual, StringPattern};
use decoy_spec::fields::FieldError;

impl Admin {
    /// `/__admin/mappings/...`; `rest` is the path after `mappings`.
    pub(super) fn mappings_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        Some(match (req.method.as_str(), rest) {
            ("GET", []) => self.list_mappings(req),
            ("POST", []) => self.create_mapping(req),
            ("DELETE", []) => match self.store.remove_all() {
                Ok(()) => AdminReply::ok(),
                Err(e) => super::unavailable(&e),
            },
            // WireMock's resetToDefaultMappings clears the request journal too.
            ("POST", ["reset"]) => {
                match self
                    .store
                    .reset()
                    .map(drop)
                    .and_then(|()| self.journal.clear())
                {
                    Ok(()) => AdminReply::empty(200),
                    Err(e) => super::unavailable(&e),
                }
            }
            ("POST", ["save"]) => match self.store.save() {
                Ok(_) => AdminReply::empty(200),
                Err(e) => {
                    tracing::warn!("admin API: save: {e}");
                    AdminReply::json(500, json::error("Save failed", &e.to_string()))
                }
            },
            ("POST", ["import"]) => self.import(req),
            ("POST", ["remove"]) => self.remove_matching(req),
            ("POST", ["find-by-metadata"]) => self.find_by_metadata(req, false),
            ("POST", ["remove-by-metadata"]) => self.find_by_metadata(req, true),
            ("GET", ["unmatched"]) => match self.unmatched_mappings() {
                Ok(unmatched) => {
                    let total = unmatched.len();
                    AdminReply::json(200, json::mappings(unmatched.iter(), total))
                }
                Err(e) => super::unavailable(&e),
            },
            ("DELETE", ["unmatched"]) => {
                let unmatched = match self.unmatched_mappings() {
                    Ok(unmatched) => unmatched,
                    Err(e) => return Some(super::unavailable(&e)),
                };
                for m in unmatched {
                    if let Err(e) = self.store.remove(&m.id) {
                        return Some(not_removed(&e));
                    }
                }
                AdminReply::ok()
            }
            ("GET", [id]) => match self.mapping_at(id) {
                Ok(m) => AdminReply::json(200, json::mapping(&m)),
                Err(r) => r,
            },
            ("PUT", [id]) => match self.mapping_at(id) {
                Ok(m) => self.edit_mapping(req, &m.id),
                Err(r) => r,
            },
            ("DELETE", [id]) => match self.mapping_at(id) {
                Ok(m) => match self.store.remove(&m.id) {
                    Ok(true) => AdminReply::ok(),
                    Ok(false) => AdminReply::not_found(&format!("no mapping with id {}", m.id)),
                    Err(e) => not_removed(&e),
                },
                Err(r) => r,
            },
            _ => return None,
        })
    }

    fn find_mapping(&self, id: &str) -> Option<Arc<Mapping>> {
        self.engine()
            .mappings()
            .iter()
            .find(|m| &*m.id == id)
            .cloned()
    }

    /// The stub a `/mappings/{id}` path names. A file stub may have any id (decoy
    /// loads those WireMock would refuse), so an exact match comes first; otherwise
    /// the id must be a UUID, in any case, as WireMock requires (400 with its error
    /// document), and a UUID no stub has is a 404.
    fn mapping_at(&self, id: &str) -> Result<Arc<Mapping>, AdminReply> {
        if let Some(m) = self.find_mapping(id) {
            return Ok(m);
        }
        let Some(canonical) = parse_stub_id(id) else {
            return Err(AdminReply::json(
                400,
                json::coded(10, &format!("{id} is not a valid UUID")),
            ));
        };
        self.find_mapping(&canonical)
            .ok_or_else(|| AdminReply::not_found(&format!("no mapping with id {id}")))
    }

    fn list_mappings(&self, req: &AdminRequest) -> AdminReply {
        let set = self.engine().mappings();
        // WireMock lists stubs as it tries them: by priority, then the most recently
        // added first.
        let all: Vec<&Arc<Mapping>> = set.iter().collect();
        let total = all.len();
        let offset = req
            .query("offset")
            .and_then(|o| o.parse().ok())
            .unwrap_or(0);
        let limit = req
            .query("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(usize::MAX);
        AdminReply::json(
            200,
            json::mappings(all.into_iter().skip(offset).take(limit), total),
        )
    }

    /// Parses a stub posted to the API, giving it a fresh random id when it has none
    /// (as WireMock does), and validating it exactly like a file. An `id` (or `uuid`)
    /// given must be a UUID, as in WireMock, and is kept in its canonical lower-case
    /// form: ids end up in file names (`save`), so nothing else may get that far.
    fn parse_api_mapping(
        &self,
        mut v: Value,
        forced_id: Option<&str>,
    ) -> Result<(Mapping, Vec<FieldError>), Vec<FieldError>> {
        if let Value::Object(obj) = &mut v {
            if let Some(id) = forced_id {
                obj.insert("id".into(), Value::String(id.to_owned()));
            } else {
                let given = ["id", "uuid"]
                    .into_iter()
                    .find_map(|k| obj.get(k).and_then(Value::as_str).map(|s| (k, s)));
                let id = match given {
                    Some((key, s)) => {
                        parse_stub_id(s).ok_or_else(|| vec![FieldError::new(key, not_a_uuid(s))])?
                    }
                    None if obj.contains_key("id") => String::new(),
                    None => uuid::Uuid::new_v4().to_string(),
                };
                if !id.is_empty() {
                    obj.insert("id".into(), Value::String(id));
                }
            }
            obj.remove("uuid");
        }
        let mut warnings = Vec::new();
        let parsed = Mapping::parse(&v, self.store.context(), None, &mut warnings);
        for w in &warnings {
            tracing::warn!("admin API mapping: {w}");
        }
        Ok((parsed?, warnings))
    }

    /// Adds or replaces the stub, then keeps its warnings for `GET /__admin/problems`.
    fn upsert(
        &self,
        (m, warnings): (Mapping, Vec<FieldError>),
    ) -> Result<decoy_core::store::Upserted, Unavailable> {
        let done = self.store.upsert(m)?;
        self.store.note_api_warnings(&done.mapping.id, warnings);
        Ok(done)
    }

    fn create_mapping(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        match self.parse_api_mapping(v, None) {
            Err(errs) => AdminReply::json(422, json::errors(&errs)),
            Ok((m, _)) if self.find_mapping(&m.id).is_some() => AdminReply::json(
                422,
                json!({ "errors": [ {
                    "code": 109,
                    "title": "Duplicate stub mapping ID",
                    "detail": format!(
                        "ID of the provided stub mapping '{}' is already taken by another stub mapping",
                        m.id
                    ),
                } ] }),
            ),
            Ok(parsed) => match self.upsert(parsed) {
                Ok(done) => match &done.not_saved {
                    Some(e) => not_saved(e),
                    None => AdminReply::json(201, json::mapping(&done.mapping)),
                },
                Err(e) => super::unavailable(&e),
            },
        }
    }

    fn edit_mapping(&self, req: &AdminRequest, id: &str) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        match self.parse_api_mapping(v, Some(id)) {
            Ok(parsed) => match self.upsert(parsed) {
                Ok(done) => match &done.not_saved {
                    Some(e) => not_saved(e),
                    None => AdminReply::json(200, json::mapping(&done.mapping)),
                },
                Err(e) => super::unavailable(&e),
            },
            Err(errs) => AdminReply::json(422, json::errors(&errs)),
        }
    }

    fn import(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let Some(list) = v.get("mappings").and_then(Value::as_array) else {
            return AdminReply::json(
                422,
                json::error("Error parsing JSON", "expected {\"mappings\": [...]}"),
            );
        };
        let options = v.get("importOptions");
        let policy = options
            .and_then(|o| o.get("duplicatePolicy"))
            .and_then(Value::as_str)
            .unwrap_or("OVERWRITE");
        if policy != "OVERWRITE" && policy != "IGNORE" {
            return AdminReply::json(
                422,
                json::error(
                    "Error parsing JSON",
                    "duplicatePolicy must be OVERWRITE or IGNORE",
                ),
            );
        }
        let delete_others = options
            .and_then(|o| o.get("deleteAllNotInImport"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Validate everything first: an import with a bad stub changes nothing.
        let mut parsed = Vec::new();
        let mut errors: Vec<FieldError> = Vec::new();
        for (i, item) in list.iter().enumerate() {
            match self.parse_api_mapping(item.clone(), None) {
                Ok(m) => parsed.push(m),
                Err(errs) => {
                    errors.extend(
                        errs.into_iter().map(|e| {
                            FieldError::new(format!("mappings[{i}].{}", e.path), e.reason)
                        }),
                    );
                }
            }
        }
        if !errors.is_empty() {
            return AdminReply::json(422, json::errors(&errors));
        }
        let existing: std::collections::HashSet<Arc<str>> = self
            .engine()
            .mappings()
            .iter()
            .map(|m| m.id.clone())
            .collect();
        let imported: std::collections::HashSet<Arc<str>> =
            parsed.iter().map(|(m, _)| m.id.clone()).collect();
        // WireMock adds the stubs from the last to the first (so the first wins a tie,
        // as the newest), then removes the others, and stops at the first file it
        // cannot write or delete.
        for m in parsed.into_iter().rev() {
            if policy == "IGNORE" && existing.contains(&m.0.id) {
                continue;
            }
            match self.upsert(m) {
                Ok(done) => {
                    if let Some(e) = &done.not_saved {
                        return not_saved(e);
                    }
                }
                Err(e) => return super::unavailable(&e),
            }
        }
        if delete_others {
            for id in existing.difference(&imported) {
                if let Err(e) = self.store.remove(id) {
                    return not_removed(&e);
                }
            }
        }
        AdminReply::empty(200)
    }

    /// `POST /mappings/remove` with a stub: WireMock removes the stub with its id
    /// (with its file, when persistent), or, when there is none, every stub whose
    /// request pattern equals the posted one, leaving their files on disk.
    fn remove_matching(&self, req: &AdminRequest) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let Some(obj) = v.as_object() else {
            return AdminReply::json(
                422,
                json::error("Error parsing JSON", "expected a stub mapping object"),
            );
        };
        let id = ["id", "uuid"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str));
        if let Some(id) = id {
            match self.store.remove(id) {
                Ok(true) => return AdminReply::empty(200),
                Ok(false) => {}
                Err(e) => return not_removed(&e),
            }
        }
        let wanted = without_nulls(obj.get("request").cloned().unwrap_or(Value::Null));
        let same: Vec<Arc<str>> = self
            .engine()
            .mappings()
            .in_insertion_order()
            .filter(|m| {
                let request = serde_json::from_str::<Value>(&m.json)
                    .ok()
                    .and_then(|v| v.get("request").cloned())
                    .unwrap_or(Value::Null);
                without_nulls(request) == wanted
            })
            .map(|m| m.id.clone())
            .collect();
        for id in same {
            if let Err(e) = self.store.forget(&id) {
                return not_removed(&e);
            }
        }
        AdminReply::empty(200)
    }

    /// The string pattern posted to the metadata endpoints.
    pub(super) fn metadata_pattern(&self, req: &AdminRequest) -> Result<StringPattern, AdminReply> {
        let v = req.json_body()?;
        StringPattern::parse(&v, "").map_err(|e| AdminReply::json(422, json::errors(&[e])))
    }

    fn find_by_metadata(&self, req: &AdminRequest, remove: bool) -> AdminReply {
        let pattern = match self.metadata_pattern(req) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let set = self.engine().mappings();
        let found: Vec<Arc<Mapping>> = set
            .in_insertion_order()
            .filter(|m| metadata_matches(m, &pattern))
            .cloned()
            .collect();
        if remove {
            for m in &found {
                if let Err(e) = self.store.remove(&m.id) {
                    return not_removed(&e);
                }
            }
            return AdminReply::ok();
        }
        let total = found.len();
        AdminReply::json(200, json::mappings(found.iter(), total))
    }

    fn unmatched_mappings(&self) -> Result<Vec<Arc<Mapping>>, Unavailable> {
        let set = self.engine().mappings();
        let hit: std::collections::HashSet<Arc<str>> = self
            .journal
            .newest_first()?
            .iter()
            .filter_map(|e| e.mapping.as_ref().map(|m| m.id.clone()))
            .collect();
        Ok(set
            .in_insertion_order()
            .filter(|m| !hit.contains(&m.id))
            .cloned()
            .collect())
    }
}

/// WireMock's 500 for a persistent stub created or edited whose file was not
/// written: the change is served all the same.
fn not_saved(e: &PersistError) -> AdminReply {
    let detail = format!("{e}; the change is served all the same, but only until the server stops");
    tracing::warn!("admin API: {detail}");
    AdminReply::json(500, json::error("Stub file not written", &detail))
}

/// WireMock's 500 for a persistent stub whose file could not be deleted: the stub
/// stays.
fn not_removed(e: &PersistError) -> AdminReply {
    if let PersistError::Shared(e) = e {
        return super::unavailable(e);
    }
    let detail = format!("{e}; the stub is still served");
    tracing::warn!("admin API: {detail}");
    AdminReply::json(500, json::error("Stub not removed", &detail))
}

/// A stub id as WireMock reads one (Jackson's `UUID`): the standard 36-character form
/// in any case, or the 16 bytes in 24 characters of base64; returned in the canonical
/// lower-case form. Anything else is not an id.
pub(super) fn parse_stub_id(s: &str) -> Option<String> {
    use base64::Engine as _;
    let uuid = match s.len() {
        36 if [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-') => {
            uuid::Uuid::try_parse(s).ok()?
        }
        24 => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
            uuid::Uuid::from_slice(&bytes).ok()?
        }
        _ => return None,
    };
    Some(uuid.hyphenated().to_string())
}

fn not_a_uuid(s: &str) -> String {
    format!(
        "{s:?} is not a UUID: a stub id must be a UUID in its standard 36-character form \
         (such as 3f1c7e2a-9b1d-4c55-8e0f-2a6b1d9c0e47)"
    )
}

/// Whether a stub's `metadata` (as JSON text) matches `pattern`; a stub without
/// metadata never does.
pub(super) fn metadata_matches(m: &Mapping, pattern: &StringPattern) -> bool {
    serde_json::from_str::<Value>(&m.json)
        .ok()
        .and_then(|v| v.get("metadata").cloned())
        .is_some_and(|meta| pattern.matches(&Actual::new(&meta.to_string())))
}

/// A JSON value with `null` members dropped (a client writes absent fields either way).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(obj) => Value::Object(
            obj.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        other => other,
    }
}
