//! `/__admin/scenarios`: scenario states listed, reset and set.

use super::{Admin, AdminReply, AdminRequest, json};
use decoy_core::shared::Unavailable;
use serde_json::Value;

use decoy_core::engine::STARTED;

impl Admin {
    /// `/__admin/scenarios/...`.
    pub(super) fn scenarios_route(&self, req: &AdminRequest, rest: &[&str]) -> Option<AdminReply> {
        Some(match (req.method.as_str(), rest) {
            ("GET", []) => match self.scenarios() {
                Ok(list) => AdminReply::json(200, list),
                Err(e) => super::unavailable(&e),
            },
            ("POST", ["reset"]) => match self.engine().reset_scenarios() {
                Ok(()) => AdminReply::ok(),
                Err(e) => super::unavailable(&e),
            },
            ("PUT", [name, "state"]) => self.set_scenario(req, name),
            ("POST", [name, "state"]) => self.set_scenario(req, name),
            _ => return None,
        })
    }

    fn scenarios(&self) -> Result<Value, Unavailable> {
        let set = self.engine().mappings();
        let mut by_name: std::collections::BTreeMap<&str, (Vec<&str>, Vec<Value>)> =
            Default::default();
        for m in set.in_insertion_order() {
            if let Some(s) = &m.scenario {
                let entry = by_name.entry(s.name.as_str()).or_default();
                for st in [
                    Some(STARTED),
                    s.required_state.as_deref(),
                    s.new_state.as_deref(),
                ]
                .into_iter()
                .flatten()
                {
                    if !entry.0.contains(&st) {
                        entry.0.push(st);
                    }
                }
                entry.1.push(json::mapping(m));
            }
        }
        let list = by_name
            .into_iter()
            .map(|(name, (states, mappings))| {
                Ok(json!({
                    "id": name,
                    "name": name,
                    "state": self.engine().scenario_state(name)?,
                    "possibleStates": states,
                    "mappings": mappings,
                }))
            })
            .collect::<Result<Vec<Value>, Unavailable>>()?;
        Ok(json!({ "scenarios": list }))
    }

    fn set_scenario(&self, req: &AdminRequest, name: &str) -> AdminReply {
        let v = match req.json_body() {
            Ok(v) => v,
            Err(r) => return r,
        };
        let exists = self
            .engine()
            .mappings()
            .iter()
            .any(|m| m.scenario.as_ref().is_some_and(|s| s.name == name));
        if !exists {
            return AdminReply::json(
                404,
                json!({ "errors": [ { "code": 404, "title": format!("Scenario {name} does not exist") } ] }),
            );
        }
        // An empty body resets the scenario; a state it cannot reach is refused, as
        // WireMock does (`{}` asks for state null).
        if req.body.iter().all(|b| b.is_ascii_whitespace()) {
            return match self.engine().set_scenario_state(name, STARTED) {
                Ok(()) => AdminReply::ok(),
                Err(e) => super::unavailable(&e),
            };
        }
        let state = v.get("state").and_then(Value::as_str);
        let possible = self.engine().mappings().iter().any(|m| {
            m.scenario.as_ref().is_some_and(|s| {
                s.name == name
                    && state.is_some_and(|st| {
                        st == STARTED
                            || s.required_state.as_deref() == Some(st)
                            || s.new_state.as_deref() == Some(st)
                    })
            })
        });
        match state {
            Some(state) if possible => match self.engine().set_scenario_state(name, state) {
                Ok(()) => AdminReply::ok(),
                Err(e) => super::unavailable(&e),
            },
            _ => AdminReply::json(
                422,
                json::coded(
                    11,
                    &format!(
                        "Scenario {name} does not support state {}",
                        state.unwrap_or("null")
                    ),
                ),
            ),
        }
    }
}
