//! Matchers beyond WireMock's built-in ones: the seam where plugins plug in.
//!
//! A stub's `customMatcher` is resolved while the stub is parsed, by whatever the
//! caller passes as [`CustomMatchers`] (decoy's engine core passes its WebAssembly
//! plugins). The compiled [`RequestPattern`](crate::request::RequestPattern)
//! then holds a [`CustomMatch`] and asks it last. This crate knows nothing of how a
//! custom matcher works, which keeps matching below the plugin runtime: the
//! dependency runs from the plugin adapter to here, never the reverse.

use std::sync::Arc;

use decoy_spec::fields::{FieldError, FieldResult};
use decoy_spec::request::RequestSnapshot;
use serde_json::Value;

/// A custom matcher that could not answer: the request gets an error, not some other
/// stub's answer, so the engine stops searching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchFailure {
    /// Who failed (a plugin's name).
    pub matcher: String,
    pub reason: String,
    /// The matcher is not ready yet (a plugin still compiling): try again shortly.
    pub loading: bool,
}

impl std::fmt::Display for MatchFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "custom matcher {:?} failed: {}",
            self.matcher, self.reason
        )
    }
}

/// One compiled `customMatcher`.
pub trait CustomMatch: Send + Sync + std::fmt::Debug {
    /// The name the stub gave (`customMatcher.name`), for the not-matched report.
    fn name(&self) -> &str;

    /// Whether something provides this matcher; `false` for a [`MissingMatcher`],
    /// which the not-matched report shows as WireMock shows an extension it does
    /// not have.
    fn installed(&self) -> bool {
        true
    }

    /// Whether `req` matches; `path_parameters` are its `urlPathTemplate` variables.
    fn matches(
        &self,
        req: &RequestSnapshot,
        path_parameters: &[(String, String)],
    ) -> Result<bool, MatchFailure>;

    /// Tells the matcher which mapping it belongs to, once the mapping's id is known.
    fn bind(&self, _mapping_id: &str, _mapping_name: Option<&str>) {}
}

/// Resolves a stub's `customMatcher` object (at JSON path `path`) while it is parsed;
/// what is worth telling but does not stop the stub goes to `warnings`.
pub trait CustomMatchers {
    fn resolve(
        &self,
        v: &Value,
        path: &str,
        warnings: &mut Vec<FieldError>,
    ) -> FieldResult<Arc<dyn CustomMatch>>;
}

/// A `customMatcher` naming a matcher nothing provides. WireMock loads such a stub
/// (the matcher may be an extension it was started without) and it never matches;
/// so does this. Its not-matched report row is `[custom matcher: NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingMatcher {
    pub name: String,
}

impl CustomMatch for MissingMatcher {
    fn name(&self) -> &str {
        &self.name
    }

    fn installed(&self) -> bool {
        false
    }

    fn matches(&self, _: &RequestSnapshot, _: &[(String, String)]) -> Result<bool, MatchFailure> {
        Ok(false)
    }
}
