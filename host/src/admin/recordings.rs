//! `/__admin/recordings`: recording through the proxy, and snapshots of the journal
//! as stubs (the stub making itself is in [`record`](super::record)).

use super::{Admin, AdminReply, AdminRequest, json, record};

impl Admin {
    /// `/__admin/recordings/...`: start, stop, status, snapshot.
    pub(super) fn recordings_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        Some(match (req.method.as_str(), rest) {
            ("POST", ["start"]) => match req.json_body().map(|v| record::Spec::parse(&v)) {
                Ok(Ok(spec)) => match self.recorder.start(&self.store, spec) {
                    Ok(()) => AdminReply::ok(),
                    Err((status, why)) => {
                        AdminReply::json(status, json::error("Recording not started", &why))
                    }
                },
                Ok(Err((status, why))) => {
                    AdminReply::json(status, json::error("Error parsing JSON", &why))
                }
                Err(r) => r,
            },
            ("POST", ["stop"]) => {
                match self
                    .journal
                    .newest_first()
                    .map_err(shared_failure)
                    .and_then(|events| self.recorder.stop(&self.store, &events))
                {
                    Ok(v) => AdminReply::json(200, v),
                    // WireMock's NotRecordingException, which its client maps by code.
                    Err((400, why)) => AdminReply::json(400, json::coded(30, &why)),
                    Err((status, why)) => {
                        AdminReply::json(status, json::error("Recording not stopped", &why))
                    }
                }
            }
            ("GET", ["status"]) => {
                AdminReply::json(200, json!({ "status": self.recorder.status() }))
            }
            ("POST", ["snapshot"]) => match req.json_body().map(|v| record::Spec::parse(&v)) {
                Ok(Ok(spec)) => {
                    match self
                        .journal
                        .newest_first()
                        .map_err(shared_failure)
                        .and_then(|events| record::make_stubs(&self.store, &spec, &events))
                    {
                        Ok(v) => AdminReply::json(200, v),
                        Err((status, why)) => {
                            AdminReply::json(status, json::error("Snapshot failed", &why))
                        }
                    }
                }
                Ok(Err((status, why))) => {
                    AdminReply::json(status, json::error("Error parsing JSON", &why))
                }
                Err(r) => r,
            },
            _ => return None,
        })
    }
}

/// The journal could not be read whole: the shared state (`--state`) is unavailable.
fn shared_failure(e: decoy_core::shared::Unavailable) -> (u16, String) {
    (503, e.to_string())
}
