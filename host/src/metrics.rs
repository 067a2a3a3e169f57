//! Counters and latency histograms, rendered in the Prometheus text format.
//!
//! Everything is a relaxed atomic: recording a request is a handful of uncontended
//! increments, cheap enough to leave on. Per-mapping counters live in
//! [`MappingStats`], shared by a mapping and its reloaded successors (same id), so a
//! reload does not reset them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BOUNDS: [f64; 14] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0,
];

#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BOUNDS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BOUNDS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, b) in BOUNDS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Counters of one transport.
#[derive(Debug, Default)]
pub struct TransportMetrics {
    pub matched: AtomicU64,
    pub unmatched: AtomicU64,
    /// Request read to response handed to the transport, configured delays excluded.
    pub processing: Histogram,
}

/// Runtime counters of one mapping.
#[derive(Debug, Default)]
pub struct MappingStats {
    pub served: AtomicU64,
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub http: TransportMetrics,
}

impl Metrics {
    /// The Prometheus text exposition; `mappings` yields (id, name, stats).
    pub fn render<'a>(
        &self,
        mappings: impl Iterator<Item = (&'a str, Option<&'a str>, &'a MappingStats)>,
    ) -> String {
        let mut out = String::new();
        out.push_str("# HELP decoy_requests_total Requests answered, by transport and outcome.\n");
        out.push_str("# TYPE decoy_requests_total counter\n");
        let transports = [("http", &self.http)];
        for (transport, m) in transports {
            for (outcome, n) in [("matched", &m.matched), ("unmatched", &m.unmatched)] {
                let _ = writeln!(
                    out,
                    "decoy_requests_total{{transport=\"{transport}\",outcome=\"{outcome}\"}} {}",
                    n.load(Ordering::Relaxed)
                );
            }
        }
        out.push_str("# HELP decoy_mapping_requests_total Requests answered by each mapping.\n");
        out.push_str("# TYPE decoy_mapping_requests_total counter\n");
        for (id, name, stats) in mappings {
            let _ = writeln!(
                out,
                "decoy_mapping_requests_total{{mapping_id=\"{}\",mapping_name=\"{}\"}} {}",
                escape(id),
                escape(name.unwrap_or("")),
                stats.served.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP decoy_processing_seconds Time from request read to response written, without configured delays.\n",
        );
        out.push_str("# TYPE decoy_processing_seconds histogram\n");
        for (transport, m) in transports {
            m.processing.render(
                &mut out,
                "decoy_processing_seconds",
                &format!("transport=\"{transport}\""),
            );
        }
        out
    }
}

/// The mapping set's own figures: how often it was swapped, how big it is, and how
/// many problems the files have now.
pub fn render_store(out: &mut String, swaps: u64, live: usize, problems: usize) {
    for (name, kind, help, value) in [
        (
            "decoy_mapping_set_swaps_total",
            "counter",
            "Mapping sets published (start, reloads, admin API changes).",
            swaps,
        ),
        (
            "decoy_mappings_live",
            "gauge",
            "Mappings being served.",
            live as u64,
        ),
        (
            "decoy_mapping_problems",
            "gauge",
            "Problems in mapping files now (their last good version is served).",
            problems as u64,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {value}");
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.http.processing.observe(Duration::from_micros(10));
        m.http.processing.observe(Duration::from_micros(300));
        m.http.processing.observe(Duration::from_secs(5));
        let stats = MappingStats::default();
        stats.served.fetch_add(2, Ordering::Relaxed);
        let text = m.render([("id-1", Some("a \"b\""), &stats)].into_iter());
        assert!(
            text.contains("decoy_processing_seconds_bucket{transport=\"http\",le=\"0.000025\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("decoy_processing_seconds_bucket{transport=\"http\",le=\"0.0005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("decoy_processing_seconds_bucket{transport=\"http\",le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains(
                "decoy_mapping_requests_total{mapping_id=\"id-1\",mapping_name=\"a \\\"b\\\"\"} 2"
            ),
            "{text}"
        );
    }
}
