//! Calls per method: `decoy_grpc_calls_total{method, code}`, the status each call of
//! a declared method ended with (`RST_STREAM` for a reset stream, `CANCELLED` for an
//! answer the client left before its end), and calls of undeclared methods under
//! `method=""`. The transport's own figures (`transport="grpc"` in
//! `decoy_requests_total`) count request messages through the serve step; these count
//! calls, by how they ended.
//!
//! The counters of the methods served now are one map swapped whole when `grpc/` is
//! read again (a method that stays keeps its counters), so a call looks its counters
//! up without a lock, and their number is bounded by the descriptors'.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::catalog::Catalog;
use crate::status::{Code, NAMES};

/// The index of a reset stream among a method's counters.
const RESET: usize = NAMES.len();

/// One method's calls by the status they ended with.
#[derive(Debug, Default)]
pub struct MethodCalls {
    codes: [AtomicU64; NAMES.len() + 1],
}

impl MethodCalls {
    /// A call that ended with `code` (`None`: its stream was reset).
    pub fn ended(&self, code: Option<Code>) {
        let i = code.map_or(RESET, |c| (c.0 as usize).min(RESET - 1));
        self.codes[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The calls that ended with `code` so far.
    pub fn count(&self, code: Code) -> u64 {
        self.codes
            .get(code.0 as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// The counters of every method served, and of calls to undeclared ones.
#[derive(Debug, Default)]
pub struct MethodMetrics {
    by_path: ArcSwap<HashMap<String, Arc<MethodCalls>>>,
    undeclared: Arc<MethodCalls>,
}

impl MethodMetrics {
    /// Counters for the methods `catalog` declares, keeping those of methods that stay.
    pub fn sync(&self, catalog: &Catalog) {
        let old = self.by_path.load();
        let map = catalog
            .method_paths()
            .map(|p| {
                let c = old.get(p).cloned().unwrap_or_default();
                (p.to_owned(), c)
            })
            .collect();
        self.by_path.store(Arc::new(map));
    }

    /// The counters of the method at `path` (those of undeclared methods if none).
    pub fn of(&self, path: &str) -> Arc<MethodCalls> {
        self.by_path
            .load()
            .get(path)
            .cloned()
            .unwrap_or_else(|| self.undeclared.clone())
    }
}

impl decoy_core::metrics::Section for MethodMetrics {
    fn render(&self, out: &mut String) {
        out.push_str("# HELP decoy_grpc_calls_total gRPC calls by method and the status they ended with (method=\"\": undeclared methods).\n");
        out.push_str("# TYPE decoy_grpc_calls_total counter\n");
        let map = self.by_path.load();
        let mut paths: Vec<&String> = map.keys().collect();
        paths.sort();
        let rows = paths
            .into_iter()
            .map(|p| (p.as_str(), &map[p]))
            .chain([("", &self.undeclared)]);
        for (path, calls) in rows {
            for (i, n) in calls.codes.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                // Every declared method shows its OK row, even at zero.
                let always = i == 0 && !path.is_empty();
                if n == 0 && !always {
                    continue;
                }
                let code = NAMES.get(i).copied().unwrap_or("RST_STREAM");
                let _ = writeln!(
                    out,
                    "decoy_grpc_calls_total{{method=\"{path}\",code=\"{code}\"}} {n}"
                );
            }
        }
    }
}
