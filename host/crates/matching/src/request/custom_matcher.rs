//! `customMatcher`: a matcher the stub names and something else provides (decoy's
//! plugins), resolved while the stub is parsed through [`CustomMatchers`] and asked
//! last. It is not a [`Part`](super::part::Part): it can fail, it sees the path
//! parameters, and WireMock weighs it against all the other parts together.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::custom::{CustomMatch, CustomMatchers, MatchFailure};
use crate::near_miss::ReportRow;
use decoy_spec::fields::{FieldError, FieldResult, Fields, join};
use decoy_spec::request::RequestSnapshot;

pub(super) const FIELDS: &[&str] = &["customMatcher"];

#[derive(Debug)]
pub struct CustomMatcher(Option<Arc<dyn CustomMatch>>);

impl CustomMatcher {
    /// `resolver` is `None` outside stub mappings (journal queries, recording
    /// filters), where a `customMatcher` is refused.
    pub(super) fn parse(
        obj: &Map<String, Value>,
        path: &str,
        resolver: Option<&dyn CustomMatchers>,
        warnings: &mut Vec<FieldError>,
    ) -> FieldResult<Self> {
        Ok(CustomMatcher(
            match (obj.field("customMatcher"), resolver) {
                (None, _) => None,
                (Some(_), None) => {
                    return Err(FieldError::new(
                        join(path, "customMatcher"),
                        "customMatcher is only supported in stub mappings",
                    ));
                }
                (Some(cm), Some(resolver)) => {
                    Some(resolver.resolve(cm, &join(path, "customMatcher"), warnings)?)
                }
            },
        ))
    }

    pub(super) fn get(&self) -> Option<&dyn CustomMatch> {
        self.0.as_deref()
    }

    /// Whether `req` matches (true with no custom matcher); `path_parameters` are
    /// asked for only when there is one.
    pub(super) fn try_matches(
        &self,
        req: &RequestSnapshot,
        path_parameters: impl FnOnce() -> Vec<(String, String)>,
    ) -> Result<bool, MatchFailure> {
        match &self.0 {
            None => Ok(true),
            Some(c) => c.matches(req, &path_parameters()),
        }
    }

    /// WireMock's distance with a custom matcher: the mean of the other parts'
    /// `distance` and the custom matcher's (0 or 1; a failure is 1), asked only when
    /// every other part matched (`rest_exact`).
    pub(super) fn distance(
        &self,
        distance: f64,
        rest_exact: bool,
        req: &RequestSnapshot,
        path_parameters: impl FnOnce() -> Vec<(String, String)>,
    ) -> f64 {
        match &self.0 {
            Some(custom) if rest_exact => {
                let ok = custom.matches(req, &path_parameters()).unwrap_or(false);
                (distance + if ok { 0.0 } else { 1.0 }) / 2.0
            }
            _ => distance,
        }
    }

    /// The custom matcher's row, as WireMock's `Diff` writes it: for a matcher it has,
    /// `[custom matcher: NAME]` against the request shown as one blank (its
    /// `EmptyToStringRequestWrapper`), noted when the matcher says no (it is asked even
    /// when other parts already differ); for one it does not have (an extension it was
    /// started without), a section title `[custom matcher: NAME]` on both sides.
    pub(super) fn report(
        &self,
        req: &RequestSnapshot,
        path_parameters: impl FnOnce() -> Vec<(String, String)>,
        rows: &mut Vec<ReportRow>,
    ) {
        let Some(custom) = &self.0 else { return };
        let title = format!("[custom matcher: {}]", custom.name());
        if !custom.installed() {
            rows.push(ReportRow {
                left: title.clone(),
                right: title,
                message: None,
            });
            return;
        }
        let exact = custom.matches(req, &path_parameters()).unwrap_or(false);
        rows.push(ReportRow::part("custom matcher", title, " ".into(), exact));
    }
}
