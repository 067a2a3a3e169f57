//! The shared state's own figures, for `/__admin/metrics`: whether this instance is
//! subscribed (and so hears every change), and the calls to Redis that failed, by
//! what they were for. The callers (engine, store, journal, plugins) get each failure
//! as a `Result`; it is counted here, where it happens.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use decoy_core::shared::Unavailable;

use crate::SharedState;

/// What a failed call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A request to a scenario stub (answered 503), or a scenario read or change
    /// through the admin API.
    Scenario,
    /// An admin API stub change.
    Stubs,
    /// A journal query or change.
    Journal,
    /// A plugin's `kv` call.
    Kv,
}

impl Operation {
    const ALL: [Operation; 4] = [
        Operation::Scenario,
        Operation::Stubs,
        Operation::Journal,
        Operation::Kv,
    ];

    fn label(self) -> &'static str {
        match self {
            Operation::Scenario => "scenario",
            Operation::Stubs => "stubs",
            Operation::Journal => "journal",
            Operation::Kv => "kv",
        }
    }
}

/// Failed calls so far, by [`Operation`].
#[derive(Debug, Default)]
pub(crate) struct Failures([AtomicU64; 4]);

impl SharedState {
    /// Counts `e` as a failure of `op` and hands it back (for `map_err`).
    pub(crate) fn failed(&self, op: Operation, e: Unavailable) -> Unavailable {
        self.failures.0[op as usize].fetch_add(1, Ordering::Relaxed);
        e
    }

    fn failures_of(&self, op: Operation) -> u64 {
        self.failures.0[op as usize].load(Ordering::Relaxed)
    }
}

impl decoy_core::metrics::Section for SharedState {
    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP decoy_shared_state_connected Whether the shared state (--state) is connected and subscribed."
        );
        let _ = writeln!(out, "# TYPE decoy_shared_state_connected gauge");
        let _ = writeln!(
            out,
            "decoy_shared_state_connected {}",
            u8::from(self.is_subscribed())
        );
        let name = "decoy_shared_state_failures_total";
        let _ = writeln!(
            out,
            "# HELP {name} Calls to the shared state that failed (Redis down or slower than --state-timeout): scenario requests answered 503, admin changes and journal queries refused, plugin kv calls failed."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for op in Operation::ALL {
            let _ = writeln!(
                out,
                "{name}{{operation=\"{}\"}} {}",
                op.label(),
                self.failures_of(op)
            );
        }
    }
}
