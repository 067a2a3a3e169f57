//! Where plugins meet the HTTP side: `customMatcher` in a request pattern,
//! `transformers` on a response, and the 500 a failed call turns into.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde_json::Value;

use super::call::header_fields;
use super::{Plugin, PluginFailure, Plugins, http_request_for, wit};
use crate::mapping::Mapping;
use crate::mapping::fields::{FieldError, FieldResult, as_object, as_str, join};
use crate::matching::request::{RequestPattern, UrlMatcher};
use crate::plan::ResponsePlan;
use crate::request::RequestSnapshot;

thread_local! {
    /// A matcher plugin that failed while the engine was matching on this thread:
    /// the engine answers the request with a 500 instead of trying other mappings.
    static MATCH_FAILURE: RefCell<Option<PluginFailure>> = const { RefCell::new(None) };
}

/// Takes the failure of a matcher plugin called on this thread, if any.
pub fn take_match_failure() -> Option<PluginFailure> {
    MATCH_FAILURE.with(|f| f.borrow_mut().take())
}

pub fn match_failure_pending() -> bool {
    MATCH_FAILURE.with(|f| f.borrow().is_some())
}

/// `request.customMatcher`: `{"name": "...", "parameters": {...}}`.
#[derive(Debug)]
pub struct CustomMatcher {
    pub plugin: Arc<Plugin>,
    /// JSON text of `parameters` (`{}` when absent).
    pub parameters: Arc<str>,
    /// The call context (mapping id, name, parameters), built once the mapping's id
    /// is known, so a call allocates none of it.
    context: std::sync::OnceLock<wit::CallContext>,
}

impl CustomMatcher {
    pub fn parse(v: &Value, path: &str, plugins: Option<&Plugins>) -> FieldResult<CustomMatcher> {
        let obj = as_object(v, path)?;
        for k in obj.keys() {
            if k != "name" && k != "parameters" {
                return Err(FieldError::new(
                    join(path, k),
                    "unknown field (a customMatcher has name and parameters)",
                ));
            }
        }
        let name_path = join(path, "name");
        let name = as_str(
            obj.get("name")
                .ok_or_else(|| FieldError::new(&name_path, "missing: the plugin's name"))?,
            &name_path,
        )?;
        let Some(plugins) = plugins else {
            return Err(FieldError::new(
                path,
                "customMatcher is only supported in stub mappings",
            ));
        };
        let plugin = plugins
            .get(name)
            .map_err(|e| FieldError::new(&name_path, e))?;
        if !plugin.has_matcher() {
            return Err(FieldError::new(
                &name_path,
                format!("plugin {name:?} has no matcher (it exports only a transformer)"),
            ));
        }
        let parameters = parameters_json(obj.get("parameters"), &join(path, "parameters"))?;
        Ok(CustomMatcher {
            plugin,
            parameters,
            context: std::sync::OnceLock::new(),
        })
    }

    pub fn set_mapping(&self, id: &str, name: Option<&str>) {
        let _ = self.context.set(call_context(id, name, &self.parameters));
    }

    /// Asks the plugin. A failure is kept for the engine (see [`take_match_failure`])
    /// and counts as no match.
    pub fn matches(&self, pattern: &RequestPattern, req: &RequestSnapshot) -> bool {
        let ctx = self
            .context
            .get_or_init(|| call_context("", None, &self.parameters));
        let request = http_request_for(req, path_parameters(pattern, req));
        match self.plugin.matches(ctx, &request) {
            Ok(m) => m,
            Err(f) => {
                MATCH_FAILURE.with(|slot| *slot.borrow_mut() = Some(f));
                false
            }
        }
    }
}

/// What a plugin call is told about its mapping.
pub fn call_context(id: &str, name: Option<&str>, parameters: &str) -> wit::CallContext {
    wit::CallContext {
        mapping_id: id.to_owned(),
        mapping_name: name.map(str::to_owned),
        parameters: parameters.to_owned(),
    }
}

fn parameters_json(v: Option<&Value>, path: &str) -> FieldResult<Arc<str>> {
    match v {
        None | Some(Value::Null) => Ok(Arc::from("{}")),
        Some(v @ Value::Object(_)) => Ok(Arc::from(v.to_string())),
        Some(_) => Err(FieldError::new(path, "must be a JSON object")),
    }
}

/// `urlPathTemplate` variables of `req`.
fn path_parameters(pattern: &RequestPattern, req: &RequestSnapshot) -> Vec<(String, String)> {
    match &pattern.url {
        UrlMatcher::PathTemplate(t) => t
            .capture(req.path())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        _ => Vec::new(),
    }
}

/// `response.transformers` and `response.transformerParameters`, resolved.
#[derive(Debug, Default, Clone)]
pub struct Transformers {
    pub plugins: Vec<Arc<Plugin>>,
    pub parameters: Arc<str>,
    /// The call context, built on the first call (these belong to one mapping).
    context: std::sync::OnceLock<wit::CallContext>,
}

impl Transformers {
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// The context every call of these transformers gets, for mapping `id`.
    pub fn context(&self, id: &str, name: Option<&str>) -> &wit::CallContext {
        self.context
            .get_or_init(|| call_context(id, name, &self.parameters))
    }

    /// Reads the two fields from `response` (`obj`). With `global_templating`,
    /// `response-template` runs first on every stub.
    pub fn parse(
        obj: &serde_json::Map<String, Value>,
        plugins: Option<&Plugins>,
        global_templating: bool,
    ) -> Result<Transformers, Vec<FieldError>> {
        let mut names: Vec<(String, String)> = Vec::new();
        let mut errors = Vec::new();
        if global_templating {
            names.push((
                "response-template".into(),
                "--global-response-templating".into(),
            ));
        }
        match obj.get("transformers") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("response.transformers[{i}]");
                    match item.as_str() {
                        Some(n) if global_templating && n == "response-template" => {}
                        Some(n) => names.push((n.to_owned(), path)),
                        None => {
                            errors.push(FieldError::new(path, "must be a plugin name (a string)"))
                        }
                    }
                }
            }
            Some(_) => errors.push(FieldError::new(
                "response.transformers",
                "must be a list of plugin names",
            )),
        }
        let parameters = parameters_json(
            obj.get("transformerParameters"),
            "response.transformerParameters",
        )
        .map_err(|e| errors.push(e))
        .unwrap_or_else(|()| Arc::from("{}"));
        let mut out = Vec::new();
        if !names.is_empty() {
            match plugins {
                None => errors.push(FieldError::new(
                    "response.transformers",
                    "plugins are not available here",
                )),
                Some(plugins) => {
                    for (name, path) in names {
                        match plugins.get(&name) {
                            Ok(p) if p.has_transformer() => out.push(p),
                            Ok(_) => errors.push(FieldError::new(
                                path,
                                format!(
                                    "plugin {name:?} has no transformer (it exports only a matcher)"
                                ),
                            )),
                            Err(e) => errors.push(FieldError::new(path, e)),
                        }
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(Transformers {
                plugins: out,
                parameters,
                context: std::sync::OnceLock::new(),
            })
        } else {
            Err(errors)
        }
    }
}

/// Runs the mapping's transformers over `plan`, in order.
pub fn transform_http(
    mapping: &Mapping,
    req: &RequestSnapshot,
    plan: &mut ResponsePlan,
) -> Result<(), PluginFailure> {
    let t = &mapping.response.transformers;
    let ctx = t.context(&mapping.id, mapping.name.as_deref());
    let request = http_request_for(req, path_parameters(&mapping.request, req));
    let mut response = wit::Response::Http(wit::HttpResponse {
        status: plan.status,
        headers: header_fields(plan.headers.iter().map(|(k, v)| (k, v))),
        body: plan.body.to_vec(),
        delay_ms: None,
    });
    for plugin in &t.plugins {
        response = plugin.transform(ctx, &request, &response)?;
    }
    // A malformed answer counts against the plugin that gave it (the last one).
    let bad = |reason: String| {
        let last = t.plugins.last();
        if let Some(p) = last {
            p.stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(plugin = %p.name, "plugin call failed: {reason}");
        }
        PluginFailure {
            plugin: last.map(|p| p.name.clone()).unwrap_or_default(),
            reason,
        }
    };
    let wit::Response::Http(r) = response else {
        return Err(bad("it returned an MQ reply for an HTTP request".into()));
    };
    if !(100..=999).contains(&r.status) {
        return Err(bad(format!(
            "it returned status {}, which is not an HTTP status",
            r.status
        )));
    }
    let mut headers = Vec::with_capacity(r.headers.len());
    for (k, v) in r.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| bad(format!("it returned an invalid header name {k:?}")))?;
        let value = HeaderValue::from_str(&v).map_err(|_| {
            bad(format!(
                "it returned an invalid value for header {k}: {v:?}"
            ))
        })?;
        headers.push((name, value));
    }
    plan.status = r.status;
    plan.headers = Arc::from(headers);
    plan.body = Bytes::from(r.body);
    if let Some(ms) = r.delay_ms {
        plan.delay += std::time::Duration::from_millis(u64::from(ms));
    }
    Ok(())
}

/// The 500 for a request whose plugin failed: JSON naming the plugin, the mapping
/// and the reason.
pub fn failure_plan(mapping: &Mapping, failure: &PluginFailure) -> ResponsePlan {
    let body = serde_json::json!({
        "error": "plugin failed",
        "plugin": failure.plugin,
        "mapping": mapping.id.as_ref(),
        "mappingName": mapping.name.as_deref(),
        "reason": failure.reason,
    });
    let mut plan = crate::engine::text_plan(500, format!("{body:#}\n"));
    plan.headers = Arc::from(vec![(
        HeaderName::from_static("content-type"),
        HeaderValue::from_static("application/json"),
    )]);
    plan.mapping_id = Some(mapping.id.clone());
    plan.mapping_name = mapping.name.clone();
    plan
}
