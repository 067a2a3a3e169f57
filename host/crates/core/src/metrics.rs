//! Counters and latency histograms, rendered in the Prometheus text format.
//!
//! Everything is a relaxed atomic, and the per-transport counters are sharded by
//! worker thread: recording a request is a handful of uncontended increments, cheap
//! enough to leave on (measured in docs/performance.md). Per-mapping counters live in
//! [`MappingStats`], shared by a mapping and its reloaded successors (same id), so a
//! reload does not reset them.
//!
//! [`Metrics`] knows no transport by name: a transport registers under its name
//! ([`Metrics::transport`]) and gets its [`TransportMetrics`], which it keeps and
//! counts into without a lookup; the name is the `transport` label. A transport with
//! mappings of its own format lists their counters with [`Metrics::set_mappings`],
//! and one with figures of its own adds a [`Section`] to the exposition.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (as rendered) and nanoseconds.
const BOUNDS: [f64; 14] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0,
];
const BOUND_NANOS: [u64; 14] = [
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
];

/// Latency buckets of one shard: counts per bucket, total count, sum.
#[derive(Debug, Default)]
struct Buckets {
    buckets: [AtomicU64; BOUNDS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

/// What one worker thread counts for one transport. Aligned to its own cache lines
/// so two threads counting at once never touch the same line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    matched: AtomicU64,
    unmatched: AtomicU64,
    processing: Buckets,
    /// The same times, finely bucketed for the dashboard's percentiles.
    fine: crate::latency::Histogram,
}

/// Counter shards: requests on different worker threads increment different
/// cache lines; rendering adds the shards up.
const SHARDS: usize = 8;

thread_local! {
    static SHARD_INDEX: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        (NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS as u64) as usize
    };
}

/// Counters of one transport: requests matched and unmatched, and the histogram of
/// processing time (request read to response handed to the transport, configured
/// delays excluded).
#[derive(Debug, Default)]
pub struct TransportMetrics {
    shards: [Shard; SHARDS],
}

impl TransportMetrics {
    fn shard(&self) -> &Shard {
        &self.shards[SHARD_INDEX.with(|i| *i)]
    }

    pub fn count(&self, matched: bool) {
        let s = self.shard();
        let c = if matched { &s.matched } else { &s.unmatched };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe(&self, d: Duration) {
        let shard = self.shard();
        let h = &shard.processing;
        let nanos = d.as_nanos().min(u64::MAX as u128) as u64;
        if let Some(i) = BOUND_NANOS.iter().position(|b| nanos <= *b) {
            h.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        h.count.fetch_add(1, Ordering::Relaxed);
        h.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        shard.fine.record(nanos);
    }

    /// The fine latency histogram's counts so far, all shards added up.
    pub fn latency_counts(&self) -> Vec<u64> {
        let mut out = vec![0; crate::latency::BUCKETS];
        for s in &self.shards {
            s.fine.add_to(&mut out);
        }
        out
    }

    pub fn matched_total(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.matched.load(Ordering::Relaxed))
            .sum()
    }

    pub fn unmatched_total(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.unmatched.load(Ordering::Relaxed))
            .sum()
    }

    fn render_histogram(&self, out: &mut String, name: &str, labels: &str) {
        let sum_of = |f: &dyn Fn(&Buckets) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|s| f(&s.processing).load(Ordering::Relaxed))
                .sum()
        };
        let mut cumulative = 0;
        for (i, b) in BOUNDS.iter().enumerate() {
            cumulative += sum_of(&|h| &h.buckets[i]);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cumulative}");
        }
        let count = sum_of(&|h| &h.count);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = sum_of(&|h| &h.sum_nanos) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Runtime counters of one mapping.
#[derive(Debug, Default)]
pub struct MappingStats {
    pub served: AtomicU64,
    /// Processing time of its answers, added up (for a mean), in nanoseconds.
    pub latency_nanos: AtomicU64,
    /// When it last answered, in milliseconds since the Unix epoch (0: never).
    pub last_hit_millis: AtomicU64,
}

impl MappingStats {
    /// Notes one answer, which took `process` and was given at `now`.
    pub fn record(&self, process: Duration, now: std::time::SystemTime) {
        self.served.fetch_add(1, Ordering::Relaxed);
        let nanos = process.as_nanos().min(u64::MAX as u128) as u64;
        self.latency_nanos.fetch_add(nanos, Ordering::Relaxed);
        let millis = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.last_hit_millis.store(millis, Ordering::Relaxed);
    }
}

/// The per-mapping counters of mappings served outside the engine (a transport's
/// own mapping format): (id, name, counters).
pub type MappingStatsList = Vec<(Arc<str>, Option<Arc<str>>, Arc<MappingStats>)>;

/// Lines a transport adds to the exposition (its own metric families), rendered
/// after the per-mapping counters.
pub trait Section: Send + Sync + std::fmt::Debug {
    fn render(&self, out: &mut String);
}

/// What became of webhooks, by outcome, and what is waiting now.
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    /// The target answered (with any status).
    pub sent: AtomicU64,
    /// Sent, but no answer came: connection refused, timeout, broken connection.
    pub failed: AtomicU64,
    /// Never sent: the definition or its rendering gave no valid request (no `url`,
    /// a template that failed, a URL that is not absolute...).
    pub invalid: AtomicU64,
    /// Never sent: `--allow-proxy-targets` / `--deny-proxy-targets` refuse the target.
    pub denied: AtomicU64,
    /// Never sent: the request came through too many webhooks in a row (a loop).
    pub looped: AtomicU64,
    /// Never sent: a limit on waiting webhooks was reached (by limit below).
    pub dropped: AtomicU64,
    /// Dropped: too many webhooks waiting in all.
    pub dropped_pending: AtomicU64,
    /// Dropped: too many bytes waiting in all.
    pub dropped_bytes: AtomicU64,
    /// Dropped: the target had its share of webhooks waiting.
    pub dropped_target_pending: AtomicU64,
    /// Dropped: the target had its share of bytes waiting.
    pub dropped_target_bytes: AtomicU64,
    /// Webhooks waiting now (to be rendered, for their delay, for a slot, for an answer).
    pub pending: AtomicU64,
    /// The bytes they hold (the requests kept for rendering, the rendered requests).
    pub pending_bytes: AtomicU64,
}

impl WebhookMetrics {
    fn render(&self, out: &mut String) {
        out.push_str("# HELP decoy_webhooks_total Webhooks (serveEventListeners), by outcome.\n");
        out.push_str("# TYPE decoy_webhooks_total counter\n");
        for (outcome, n) in [
            ("sent", &self.sent),
            ("failed", &self.failed),
            ("invalid", &self.invalid),
            ("denied", &self.denied),
            ("looped", &self.looped),
            ("dropped", &self.dropped),
        ] {
            let _ = writeln!(
                out,
                "decoy_webhooks_total{{outcome=\"{outcome}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP decoy_webhooks_dropped_total Webhooks dropped, by the limit on waiting webhooks that was reached.\n",
        );
        out.push_str("# TYPE decoy_webhooks_dropped_total counter\n");
        for (limit, n) in [
            ("pending", &self.dropped_pending),
            ("bytes", &self.dropped_bytes),
            ("target-pending", &self.dropped_target_pending),
            ("target-bytes", &self.dropped_target_bytes),
        ] {
            let _ = writeln!(
                out,
                "decoy_webhooks_dropped_total{{limit=\"{limit}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        for (name, help, n) in [
            (
                "decoy_webhooks_pending",
                "Webhooks waiting to be rendered, for their delay, for a slot or for an answer.",
                &self.pending,
            ),
            (
                "decoy_webhooks_pending_bytes",
                "Bytes held by the webhooks waiting (requests kept for rendering, rendered requests).",
                &self.pending_bytes,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {}", n.load(Ordering::Relaxed));
        }
    }
}

/// What became of the messages stubs publish (`message` listeners) and the admin
/// API's `channels/send`.
#[derive(Debug, Default)]
pub struct MessageMetrics {
    /// The broker took it (confirmed, where the protocol confirms).
    pub published: AtomicU64,
    /// Not published: the broker refused it, could not be reached in time, or the
    /// connection is not configured (any more).
    pub failed: AtomicU64,
    /// Not published: its rendering failed (a template).
    pub invalid: AtomicU64,
    /// Not published: a limit on waiting listeners was reached.
    pub dropped: AtomicU64,
}

impl MessageMetrics {
    fn render(&self, out: &mut String) {
        out.push_str(
            "# HELP decoy_published_messages_total Messages published by stubs' message listeners and the admin API, by outcome.\n",
        );
        out.push_str("# TYPE decoy_published_messages_total counter\n");
        for (outcome, n) in [
            ("published", &self.published),
            ("failed", &self.failed),
            ("invalid", &self.invalid),
            ("dropped", &self.dropped),
        ] {
            let _ = writeln!(
                out,
                "decoy_published_messages_total{{outcome=\"{outcome}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
    }
}

/// Every transport's counters, the webhooks' outcomes, and what transports add.
#[derive(Debug, Default)]
pub struct Metrics {
    /// The registered transports, in registration order (the order they are
    /// rendered in). Read by the exposition and the dashboard's sampler, never on a
    /// request: a transport keeps its own `Arc`.
    transports: Mutex<Vec<(&'static str, Arc<TransportMetrics>)>>,
    pub webhooks: WebhookMetrics,
    pub messages: MessageMetrics,
    /// Counters of mappings served outside the engine, by the transport (or family
    /// of transports) that serves them; replaced on each of its reloads.
    mappings: Mutex<Vec<(&'static str, MappingStatsList)>>,
    /// Metric families transports add.
    sections: Mutex<Vec<Arc<dyn Section>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    /// The counters of the transport named `name` (the `transport` label), created
    /// the first time it is asked for. A transport asks once, when it starts, and
    /// keeps the `Arc`; its rows are rendered from then on, zero until it serves.
    pub fn transport(&self, name: &'static str) -> Arc<TransportMetrics> {
        let mut list = lock(&self.transports);
        if let Some((_, m)) = list.iter().find(|(n, _)| *n == name) {
            return m.clone();
        }
        let m = Arc::new(TransportMetrics::default());
        list.push((name, m.clone()));
        m
    }

    /// The registered transports and their counters, in registration order.
    pub fn transports(&self) -> Vec<(&'static str, Arc<TransportMetrics>)> {
        lock(&self.transports).clone()
    }

    /// Replaces the counters of the mappings `owner` serves outside the engine.
    pub fn set_mappings(&self, owner: &'static str, list: MappingStatsList) {
        let mut all = lock(&self.mappings);
        match all.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, l)) => *l = list,
            None => all.push((owner, list)),
        }
    }

    /// Adds a transport's own metric families to the exposition.
    pub fn add_section(&self, section: Arc<dyn Section>) {
        lock(&self.sections).push(section);
    }

    /// The Prometheus text exposition; `mappings` yields the engine's mappings as
    /// (id, name, stats).
    pub fn render<'a>(
        &self,
        mappings: impl Iterator<Item = (&'a str, Option<&'a str>, &'a MappingStats)>,
    ) -> String {
        let mut out = String::new();
        let transports = self.transports();
        out.push_str("# HELP decoy_requests_total Requests answered, by transport and outcome.\n");
        out.push_str("# TYPE decoy_requests_total counter\n");
        for (transport, m) in &transports {
            for (outcome, n) in [
                ("matched", m.matched_total()),
                ("unmatched", m.unmatched_total()),
            ] {
                let _ = writeln!(
                    out,
                    "decoy_requests_total{{transport=\"{transport}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP decoy_mapping_requests_total Requests answered by each mapping.\n");
        out.push_str("# TYPE decoy_mapping_requests_total counter\n");
        let line = |out: &mut String, id: &str, name: Option<&str>, stats: &MappingStats| {
            let _ = writeln!(
                out,
                "decoy_mapping_requests_total{{mapping_id=\"{}\",mapping_name=\"{}\"}} {}",
                escape(id),
                escape(name.unwrap_or("")),
                stats.served.load(Ordering::Relaxed)
            );
        };
        for (id, name, stats) in mappings {
            line(&mut out, id, name, stats);
        }
        for (_, list) in lock(&self.mappings).iter() {
            for (id, name, stats) in list {
                line(&mut out, id, name.as_deref(), stats);
            }
        }
        let sections = lock(&self.sections).clone();
        for s in sections {
            s.render(&mut out);
        }
        out.push_str(
            "# HELP decoy_processing_seconds Time from request read to response written, without configured delays.\n",
        );
        out.push_str("# TYPE decoy_processing_seconds histogram\n");
        for (transport, m) in &transports {
            m.render_histogram(
                &mut out,
                "decoy_processing_seconds",
                &format!("transport=\"{transport}\""),
            );
        }
        self.webhooks.render(&mut out);
        self.messages.render(&mut out);
        out
    }
}

/// The mapping set's own figures: how often it was swapped, how big it is, and how
/// many problems and warnings the files have now.
pub fn render_store(out: &mut String, swaps: u64, live: usize, problems: usize, warnings: usize) {
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
        (
            "decoy_mapping_warnings",
            "gauge",
            "Warnings about mapping files now: stubs served, but not entirely as written (an unknown transformer, a missing body file, a body pattern with two operators, an unknown field...).",
            warnings as u64,
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

/// Per-plugin call, failure, timeout, instance, retirement, retry and compilation
/// counters.
pub fn render_plugins(out: &mut String, plugins: &[std::sync::Arc<decoy_plugin_host::Plugin>]) {
    use std::sync::atomic::Ordering::Relaxed;
    if plugins.is_empty() {
        return;
    }
    type Get = fn(&decoy_plugin_host::PluginStats) -> u64;
    let series: [(&str, &str, Get); 8] = [
        (
            "decoy_plugin_calls_total",
            "Plugin calls (matchers and transformers).",
            |s| s.calls.load(Relaxed),
        ),
        (
            "decoy_plugin_failures_total",
            "Plugin calls that failed (trap, timeout, memory limit, error, malformed answer).",
            |s| s.failures.load(Relaxed),
        ),
        (
            "decoy_plugin_timeouts_total",
            "Plugin calls stopped at their CPU deadline.",
            |s| s.timeouts.load(Relaxed),
        ),
        (
            "decoy_plugin_instances_created_total",
            "Plugin instances created (a warm one is reused when it can be).",
            |s| s.instances_created.load(Relaxed),
        ),
        (
            "decoy_plugin_instances_retired_total",
            "Warm plugin instances retired before reaching a limit (memory high-water mark or maxCallsPerInstance).",
            |s| s.instances_retired.load(Relaxed),
        ),
        (
            "decoy_plugin_retries_total",
            "Plugin calls made again on a fresh instance because their warm instance hit its memory cap.",
            |s| s.retries.load(Relaxed),
        ),
        (
            "decoy_plugin_compilations_total",
            "Compilations made inside plugin instances, as the plugin reports them when prepared (response-template: templates, once per template however many instances serve it).",
            |s| s.compilations.load(Relaxed),
        ),
        (
            "decoy_plugin_loading_total",
            "Plugin calls answered 503 because the plugin was still compiling.",
            |s| s.loading.load(Relaxed),
        ),
    ];
    for (name, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for p in plugins {
            let _ = writeln!(out, "{name}{{plugin=\"{}\"}} {}", p.name, get(&p.stats));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        let http = m.transport("http");
        http.observe(Duration::from_micros(10));
        http.observe(Duration::from_micros(300));
        http.observe(Duration::from_secs(5));
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

    #[test]
    fn transports_are_rendered_by_the_name_they_registered_in_registration_order() {
        let m = Metrics::default();
        let http = m.transport("http");
        let grpc = m.transport("grpc");
        assert!(Arc::ptr_eq(&http, &m.transport("http")));
        http.count(true);
        grpc.count(false);
        grpc.count(false);
        let text = m.render(std::iter::empty());
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("decoy_requests_total"))
            .collect();
        assert_eq!(
            rows,
            [
                "decoy_requests_total{transport=\"http\",outcome=\"matched\"} 1",
                "decoy_requests_total{transport=\"http\",outcome=\"unmatched\"} 0",
                "decoy_requests_total{transport=\"grpc\",outcome=\"matched\"} 0",
                "decoy_requests_total{transport=\"grpc\",outcome=\"unmatched\"} 2",
            ]
        );
        assert!(text.contains("decoy_processing_seconds_count{transport=\"grpc\"} 0"));
    }

    #[test]
    fn a_transports_own_mappings_and_sections_are_rendered() {
        #[derive(Debug)]
        struct Panics;
        impl Section for Panics {
            fn render(&self, out: &mut String) {
                out.push_str("decoy_x_total 7\n");
            }
        }
        let m = Metrics::default();
        let stats = Arc::new(MappingStats::default());
        stats.served.fetch_add(3, Ordering::Relaxed);
        m.set_mappings("queues", vec![(Arc::from("q-1"), None, stats.clone())]);
        m.add_section(Arc::new(Panics));
        let text = m.render(std::iter::empty());
        assert!(
            text.contains("decoy_mapping_requests_total{mapping_id=\"q-1\",mapping_name=\"\"} 3"),
            "{text}"
        );
        assert!(text.contains("decoy_x_total 7\n"), "{text}");
        m.set_mappings("queues", Vec::new());
        assert!(!m.render(std::iter::empty()).contains("q-1"));
    }
}
