//! Seams for state shared between instances (`decoy serve --state redis://...`).
//!
//! Without `--state` none of this is used: scenario states live in the engine's own
//! map, API stubs in the store, the journal in its ring, and the request path pays
//! nothing new (each is an enum or an empty `OnceLock` checked where it was already
//! touched). With it, a crate above this one (`decoy-state`, Redis) implements three
//! traits (two here, the journal's in [`crate::journal`]) and the engine, store and
//! journal call them:
//!
//! - [`SharedScenarios`]: scenario states, with the check-and-move of a state done
//!   atomically in the shared store (so of two instances racing from `Started`, one
//!   wins);
//! - [`StubReplica`]: stubs created, edited or removed through the admin API, written
//!   to the shared store, announced, and applied by every instance (this one too)
//!   through [`crate::store::Store::apply_replicated`] in the store's order;
//! - [`crate::journal::JournalPeers`]: the other instances' journals, fetched when
//!   the admin API queries the journal (fan-in), and told to clear or drop entries
//!   (beside the journal it serves).
//!
//! A shared-state call that fails (the store is down or too slow) never changes local
//! state on its own: it returns [`Unavailable`], which the engine, store and journal
//! hand back to their caller as a `Result`; the admin API answers 503 with it, and a
//! request to a scenario stub gets a 503. The implementation counts its failures
//! (`decoy_shared_state_failures_total`, rendered by `decoy-state`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use crate::mapping::Mapping;

/// A boxed future, as the traits below return (this crate has no async runtime).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The shared store could not be used; the text says why (for logs and 503 bodies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shared state unavailable: {}", self.0)
    }
}

impl std::error::Error for Unavailable {}

/// One candidate stub of a scenario, in the order the engine would try it.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub scenario: &'a str,
    /// The state the scenario must be in (`None`: any).
    pub required: Option<&'a str>,
    /// The state it moves to when this stub answers (`None`: it stays).
    pub new_state: Option<&'a str>,
}

/// Scenario states kept outside the process.
pub trait SharedScenarios: Send + Sync + std::fmt::Debug {
    /// In one atomic step: the first of `steps` whose scenario is in its required
    /// state wins and moves its scenario on. Returns the winner's index, or `None`.
    fn choose<'a>(
        &'a self,
        steps: &'a [Step<'a>],
    ) -> BoxFuture<'a, Result<Option<usize>, Unavailable>>;

    /// Every scenario not in `Started`, with its state.
    fn states(&self) -> BoxFuture<'_, Result<HashMap<String, String>, Unavailable>>;

    /// As [`SharedScenarios::states`], blocking (called on the admin API's blocking
    /// threads, never on an async worker).
    fn states_blocking(&self) -> Result<HashMap<String, String>, Unavailable>;

    /// Sets one scenario's state (blocking, as above).
    fn set_state(&self, name: &str, state: &str) -> Result<(), Unavailable>;

    /// Every scenario back to `Started` (blocking, as above).
    fn reset(&self) -> Result<(), Unavailable>;
}

/// Where stubs changed through this instance's admin API go, so every instance
/// serves them. Each method returns once the change is stored and has been applied
/// here (the replica applies every change, this instance's too, through
/// [`crate::store::Store::apply_replicated`], in the shared store's order). Blocking:
/// called by the store on the admin API's threads.
pub trait StubReplica: Send + Sync + std::fmt::Debug {
    /// A stub was created or replaced through the API.
    fn put(&self, m: &Mapping) -> Result<(), Unavailable>;
    /// A stub was removed through the API.
    fn remove(&self, id: &str) -> Result<(), Unavailable>;
    /// Every API stub was removed (`ids`: the stubs that were live, files' included).
    fn remove_all(&self, ids: &[std::sync::Arc<str>]) -> Result<(), Unavailable>;
    /// Back to the files: every API stub, edit and removal forgotten.
    fn reset(&self) -> Result<(), Unavailable>;
    /// Why this instance is not in step with the shared stubs, if it is not (listed
    /// by `/__admin/problems`, so a degraded instance is never silently so).
    fn problem(&self) -> Option<String> {
        None
    }
}
