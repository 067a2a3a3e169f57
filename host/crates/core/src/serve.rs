//! The serve step: what happens to a request between the transport that decoded it
//! and the transport that encodes its answer, the same for every transport.
//!
//! mini-redis's `Handler::run` reads a frame, parses a command and applies it, each
//! step named and handed off. A request here goes through these steps:
//!
//! 1. **decode** (the transport): the wire's request becomes a [`RequestSnapshot`]
//!    (HTTP, gRPC), or a message for the brokers.
//! 2. **answer** ([`Serve::answer`]): the engine matches it, plans the answer and runs
//!    the mapping's transformers; the result is an [`Exchange`].
//! 3. **forward** (the transport, only when [`Exchange::take_proxy`] says "proxy
//!    this"): the transport carries the request to the real service with its
//!    outbound client and reports what came back ([`Serve::forwarded`]), which also
//!    hands a proxied answer to the recording hook.
//! 4. **record** ([`Serve::record`], or [`Outcomes::answered`] for a transport whose
//!    mappings are not the engine's): the transport's counters, the mapping's
//!    counters, the journal, and the webhooks to send, in one place.
//! 5. **encode, delay, fault** (the transport): the plan's status, headers and body on
//!    the wire, after its delay, or its fault instead.
//! 6. **hand off** ([`Outcomes::hand_off`]): once the answer is out, the mapping's
//!    webhooks go to the [`WebhookSink`].
//!
//! A transport owns steps 1, 3 (its outbound client), and 5; everything else is here.
//! The message brokers match their own mapping format (`bodyMatcher`, properties)
//! in their crate, and meet this module at steps 4 and 6 through [`Outcomes`].
//!
//! Nothing here allocates, clones an `Arc` or takes a lock per request beyond what
//! the engine and the journal do themselves, and the hooks are generic parameters,
//! not trait objects: this is the path decoy's throughput is measured on.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use decoy_plugin_host::PluginRequest;
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::{ProxySpec, ResponsePlan};
use decoy_spec::request::RequestSnapshot;
use http::{HeaderName, HeaderValue};

use crate::engine::{Engine, Outcome};
use crate::journal::{Journal, ServeEvent};
use crate::mapping::Mapping;
use crate::metrics::{MappingStats, Metrics, TransportMetrics};
use crate::webhooks::{Fired, WebhookSink, Webhooks};

/// Where one transport's answered requests are counted and its webhooks go: steps 4
/// and 6 for every transport. Made once, when the transport registers.
#[derive(Debug)]
pub struct Outcomes<W> {
    metrics: Arc<TransportMetrics>,
    /// `None`: webhooks are not sent (and not even rendered).
    webhooks: Option<W>,
}

impl<W: WebhookSink> Outcomes<W> {
    /// Registers the transport named `transport` (the `transport` label of its
    /// metrics) with `metrics`.
    pub fn register(metrics: &Metrics, transport: &'static str, webhooks: Option<W>) -> Self {
        Outcomes::new(metrics.transport(transport), webhooks)
    }

    /// Counts into `metrics`, already registered (or a test's own).
    pub fn new(metrics: Arc<TransportMetrics>, webhooks: Option<W>) -> Self {
        Outcomes { metrics, webhooks }
    }

    /// The transport's counters.
    pub fn metrics(&self) -> &Arc<TransportMetrics> {
        &self.metrics
    }

    /// The webhooks `hooks` (a mapping's) to send for the request `request` builds,
    /// or `None` when it has none or webhooks are not sent.
    pub fn webhooks(
        &self,
        hooks: Option<&Webhooks>,
        mapping_id: &Arc<str>,
        label: impl FnOnce() -> String,
        request: impl FnOnce() -> PluginRequest,
    ) -> Option<Fired> {
        let hooks = hooks?;
        self.webhooks.as_ref()?;
        Some(Fired {
            hooks: hooks.clone(),
            mapping_id: mapping_id.clone(),
            mapping: label(),
            request: request(),
            after: None,
            journal: None,
            answer: None,
        })
    }

    /// Records an answered request: matched by the mapping counting into `stats`, or
    /// (`None`) answered as not matched; `process` is request read to answer handed
    /// to the transport, configured delays excluded.
    pub fn answered(&self, stats: Option<&MappingStats>, process: Duration, now: SystemTime) {
        self.metrics.count(stats.is_some());
        self.metrics.observe(process);
        if let Some(stats) = stats {
            stats.record(process, now);
        }
    }

    /// Records a request no mapping matched that gets no answer of its own (a
    /// message moved to an unmatched queue, or rejected).
    pub fn unmatched(&self) {
        self.metrics.count(false);
    }

    /// Hands `fired` to the webhook sink: call it once the answer is out (or with
    /// `fired.after` set to what resolves when it is).
    pub fn hand_off(&self, fired: Fired) {
        if let Some(sink) = &self.webhooks {
            sink.fire(fired);
        }
    }
}

/// What the serve step hands a proxied answer to: `--record-mappings` writes it as a
/// stub. Called once per proxied request, with the answer as the client gets it.
pub trait Recording: Send + Sync {
    fn proxied(&self, req: &RequestSnapshot, plan: &ResponsePlan, case: Option<&HeaderCase>);
}

impl<T: Recording + ?Sized> Recording for Arc<T> {
    fn proxied(&self, req: &RequestSnapshot, plan: &ResponsePlan, case: Option<&HeaderCase>) {
        (**self).proxied(req, plan, case)
    }
}

/// No recording (the type for a transport that never records).
#[derive(Debug, Clone, Copy)]
pub enum NoRecording {}

impl Recording for NoRecording {
    fn proxied(&self, _: &RequestSnapshot, _: &ResponsePlan, _: Option<&HeaderCase>) {
        match *self {}
    }
}

/// The serve step of a transport whose requests are [`RequestSnapshot`]s answered by
/// the engine's mappings (HTTP; gRPC next). One per transport, shared by all its
/// connections.
#[derive(Debug)]
pub struct Serve<W, R = NoRecording> {
    engine: Arc<Engine>,
    journal: Arc<Journal>,
    outcomes: Outcomes<W>,
    /// `--record-mappings` (`None`: proxied answers are not written).
    recording: Option<R>,
    /// Log every request and its outcome.
    verbose: bool,
}

/// One request between its answer and its record: the mapping that answered (if
/// any) and the plan, which the transport may adjust before it is recorded (CORS
/// headers, for instance).
#[derive(Debug)]
pub struct Exchange {
    mapping: Option<Arc<Mapping>>,
    stats: Option<Arc<MappingStats>>,
    pub plan: ResponsePlan,
    proxied: bool,
    /// How the real service spelled its answer's header names, when known.
    upstream_case: Option<HeaderCase>,
}

impl Exchange {
    /// The mapping that answered; `None`: no mapping matched (the plan is the
    /// not-matched report).
    pub fn mapping(&self) -> Option<&Arc<Mapping>> {
        self.mapping.as_ref()
    }

    pub fn matched(&self) -> bool {
        self.mapping.is_some()
    }

    /// "Proxy this": the real service the request goes to, when the stub says so.
    /// The transport forwards it through its outbound client and reports back with
    /// [`Serve::forwarded`]. `None` once taken.
    pub fn take_proxy(&mut self) -> Option<Arc<ProxySpec>> {
        let spec = self.plan.proxy.take()?;
        self.proxied = true;
        Some(spec)
    }
}

/// What the transport's outbound client got for a "proxy this".
#[derive(Debug)]
pub enum Forwarded {
    /// The real service's answer.
    Answer {
        status: u16,
        headers: Vec<(HeaderName, HeaderValue)>,
        body: bytes::Bytes,
        /// How the service spelled its header names (`None`: not known).
        header_case: Option<HeaderCase>,
    },
    /// No answer (unreachable, refused by the target checks...): what the client
    /// gets instead. The stub's delay still applies.
    Failed(ResponsePlan),
}

/// Where a request came in, for the journal.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// When the request was read whole: processing time counts from here.
    pub read_at: Instant,
    /// The protocol as the journal shows it (`HTTP/1.1`).
    pub protocol: &'static str,
    /// The local port it came in on.
    pub local_port: u16,
}

/// A recorded request: what the transport encodes, and the webhooks to hand off
/// once it is out.
#[derive(Debug)]
pub struct Recorded {
    pub plan: ResponsePlan,
    pub matched: bool,
    pub webhooks: Option<Fired>,
}

impl<W: WebhookSink, R: Recording> Serve<W, R> {
    pub fn new(
        engine: Arc<Engine>,
        journal: Arc<Journal>,
        outcomes: Outcomes<W>,
        recording: Option<R>,
        verbose: bool,
    ) -> Self {
        Serve {
            engine,
            journal,
            outcomes,
            recording,
            verbose,
        }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    pub fn outcomes(&self) -> &Outcomes<W> {
        &self.outcomes
    }

    /// Step 2: matches `req`, plans the answer and runs the mapping's transformers.
    pub async fn answer(&self, req: &RequestSnapshot) -> Exchange {
        let outcome = self.engine.respond_async(req).await;
        if self.verbose {
            match &outcome {
                Outcome::Matched { mapping, plan, .. } => {
                    tracing::info!(
                        "{} {} -> {} {}",
                        req.method,
                        req.url,
                        plan.status,
                        mapping.label()
                    )
                }
                Outcome::NotMatched { .. } => {
                    tracing::info!("{} {} -> 404 (no mapping matched)", req.method, req.url)
                }
            }
        }
        let (mapping, plan, stats) = match outcome {
            Outcome::Matched {
                mapping,
                plan,
                stats,
            } => (Some(mapping), plan, Some(stats)),
            Outcome::NotMatched { plan } => (None, plan, None),
        };
        Exchange {
            mapping,
            stats,
            plan,
            proxied: false,
            upstream_case: None,
        }
    }

    /// Step 3's report: what the transport's outbound client got for the request
    /// `ex` was told to proxy. The answer replaces the plan (its delay stays), and
    /// goes to the recording hook.
    pub fn forwarded(&self, ex: &mut Exchange, req: &RequestSnapshot, got: Forwarded) {
        match got {
            Forwarded::Answer {
                status,
                headers,
                body,
                header_case,
            } => {
                ex.plan.status = status;
                ex.plan.headers = Arc::from(headers);
                ex.plan.body = body;
                ex.upstream_case = header_case;
            }
            Forwarded::Failed(mut plan) => {
                plan.delay = ex.plan.delay;
                ex.plan = plan;
            }
        }
        if let Some(r) = &self.recording {
            r.proxied(req, &ex.plan, ex.upstream_case.as_ref());
        }
    }

    /// Step 4: counts the request (transport and mapping), keeps it in the journal
    /// and renders the mapping's webhooks. Returns what the transport encodes.
    pub fn record(&self, ex: Exchange, req: RequestSnapshot, at: Arrival) -> Recorded {
        let Exchange {
            mapping,
            stats,
            plan,
            proxied,
            upstream_case,
        } = ex;
        // The request as the webhooks' templates see it, taken before the journal
        // keeps it.
        let mut webhooks = mapping.as_ref().and_then(|m| {
            self.outcomes.webhooks(
                m.webhooks.as_ref(),
                &m.id,
                || m.label(),
                || crate::plugins::http_request_for(&req, m.request.path_parameters(&req)),
            )
        });
        // The answer, for listeners whose templates name `originalResponse` (it
        // shares the plan's buffers).
        if let Some(fired) = &mut webhooks
            && crate::webhooks::wants_answer(&fired.hooks)
        {
            fired.answer = Some(crate::webhooks::Answer::http(
                plan.status,
                plan.headers.clone(),
                plan.body.clone(),
            ));
        }
        let process_time = at.read_at.elapsed();
        let now = SystemTime::now();
        self.outcomes.answered(stats.as_deref(), process_time, now);
        let matched = mapping.is_some();
        // What the listeners do after the answer shows in the entry (`subEvents`).
        let sub_events = match &mut webhooks {
            Some(fired) if self.journal.enabled() => {
                let s = Arc::new(crate::publish::SubEvents::default());
                fired.journal = Some(s.clone());
                Some(s)
            }
            _ => None,
        };
        if self.journal.enabled() {
            self.journal.record(ServeEvent {
                id: self.journal.next_id(),
                logged_at: now,
                request: decoy_spec::kept::KeptRequest::keep(req),
                protocol: at.protocol,
                local_port: at.local_port,
                mapping,
                proxied,
                status: plan.status,
                response_headers: Some(plan.headers.clone()),
                response_header_case: upstream_case.map(Box::new),
                response_body: Some(plan.body.clone()),
                added_delay: plan.delay,
                process_time,
                request_body_size: None,
                response_body_size: None,
                sub_events,
            });
        }
        Recorded {
            plan,
            matched,
            webhooks,
        }
    }

    /// Step 4 for a request the transport answered itself without asking the engine
    /// (a gRPC call to a method no descriptor declares): counted and journaled as not
    /// matched, so near misses and `/__admin/requests/unmatched` show it.
    pub fn record_unmatched(
        &self,
        req: RequestSnapshot,
        plan: ResponsePlan,
        at: Arrival,
    ) -> Recorded {
        let ex = Exchange {
            mapping: None,
            stats: None,
            plan,
            proxied: false,
            upstream_case: None,
        };
        self.record(ex, req, at)
    }

    /// Step 6: see [`Outcomes::hand_off`].
    pub fn hand_off(&self, fired: Fired) {
        self.outcomes.hand_off(fired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::ParseContext;
    use serde_json::json;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Keeps what it is handed.
    #[derive(Debug, Default)]
    struct Sink(Mutex<Vec<String>>);

    impl WebhookSink for Sink {
        fn fire(&self, fired: Fired) {
            self.0.lock().unwrap().push(fired.mapping);
        }
    }

    #[derive(Debug, Default)]
    struct Recorder(AtomicUsize);

    impl Recording for Recorder {
        fn proxied(&self, _: &RequestSnapshot, plan: &ResponsePlan, _: Option<&HeaderCase>) {
            assert_eq!(plan.status, 201, "the recording sees the real answer");
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn serve(
        stubs: &[serde_json::Value],
        sink: Option<Arc<Sink>>,
        recording: Option<Arc<Recorder>>,
    ) -> (Serve<Arc<Sink>, Arc<Recorder>>, Arc<Metrics>) {
        let ctx = ParseContext {
            files_dir: "/nonexistent".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        };
        let engine = Engine::new(
            stubs
                .iter()
                .map(|v| Mapping::parse(v, &ctx, None, &mut Vec::new()).unwrap())
                .collect(),
        );
        let metrics = Arc::new(Metrics::default());
        let serve = Serve::new(
            Arc::new(engine),
            Arc::new(Journal::new(16)),
            Outcomes::register(&metrics, "test", sink),
            recording,
            false,
        );
        (serve, metrics)
    }

    fn arrival() -> Arrival {
        Arrival {
            read_at: Instant::now(),
            protocol: "HTTP/1.1",
            local_port: 8080,
        }
    }

    /// Runs a future that never waits (the engine's, with scenario states local).
    fn now<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the engine waited"),
        }
    }

    fn get(url: &str) -> RequestSnapshot {
        RequestSnapshot::new("GET", url)
    }

    #[test]
    fn a_matched_request_is_counted_journaled_and_its_webhooks_handed_off() {
        let sink = Arc::new(Sink::default());
        let (serve, metrics) = serve(
            &[
                json!({"name": "hooked", "request": {"url": "/a"}, "response": {"status": 202},
                "serveEventListeners": [{"name": "webhook", "parameters": {"url": "http://127.0.0.1:1/x"}}]}),
            ],
            Some(sink.clone()),
            None,
        );
        let req = get("/a");
        let ex = now(serve.answer(&req));
        assert!(ex.matched());
        let recorded = serve.record(ex, req, arrival());
        assert_eq!(recorded.plan.status, 202);
        assert!(recorded.matched);
        let fired = recorded.webhooks.expect("the stub's webhooks");
        serve.hand_off(fired);
        assert_eq!(sink.0.lock().unwrap().len(), 1);
        let t = metrics.transport("test");
        assert_eq!((t.matched_total(), t.unmatched_total()), (1, 0));
        let set = serve.engine().mappings();
        let stats = set.with_stats_iter().next().unwrap().1;
        assert_eq!(stats.served.load(Ordering::Relaxed), 1);
        let events = serve.journal().newest_first().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].status, 202);
        assert_eq!(events[0].local_port, 8080);
    }

    #[test]
    fn without_a_sink_no_webhook_is_rendered() {
        let (serve, _) = serve(
            &[json!({"request": {"url": "/a"},
                "serveEventListeners": [{"name": "webhook", "parameters": {"url": "http://127.0.0.1:1/x"}}]})],
            None,
            None,
        );
        let req = get("/a");
        let ex = now(serve.answer(&req));
        assert!(serve.record(ex, req, arrival()).webhooks.is_none());
    }

    #[test]
    fn an_unmatched_request_is_counted_as_unmatched_and_journaled_with_the_report() {
        let (serve, metrics) = serve(&[json!({"request": {"url": "/a"}})], None, None);
        let req = get("/b");
        let ex = now(serve.answer(&req));
        assert!(!ex.matched());
        let recorded = serve.record(ex, req, arrival());
        assert_eq!(recorded.plan.status, 404);
        assert!(!recorded.matched && recorded.webhooks.is_none());
        let t = metrics.transport("test");
        assert_eq!((t.matched_total(), t.unmatched_total()), (0, 1));
        assert!(!serve.journal().newest_first().unwrap()[0].was_matched());
    }

    #[test]
    fn a_proxied_answer_replaces_the_plan_keeps_the_delay_and_is_recorded_once() {
        let recorder = Arc::new(Recorder::default());
        let (serve, _) = serve(
            &[json!({"request": {"url": "/p"},
                "response": {"proxyBaseUrl": "http://127.0.0.1:1", "fixedDelayMilliseconds": 30}})],
            None,
            Some(recorder.clone()),
        );
        let req = get("/p");
        let mut ex = now(serve.answer(&req));
        let spec = ex.take_proxy().expect("proxy this");
        assert_eq!(spec.target(&req.url), "http://127.0.0.1:1/p");
        assert!(ex.take_proxy().is_none(), "taken once");
        serve.forwarded(
            &mut ex,
            &req,
            Forwarded::Answer {
                status: 201,
                headers: Vec::new(),
                body: bytes::Bytes::from_static(b"real"),
                header_case: None,
            },
        );
        assert_eq!(recorder.0.load(Ordering::Relaxed), 1);
        let recorded = serve.record(ex, req, arrival());
        assert_eq!(recorded.plan.status, 201);
        assert_eq!(&recorded.plan.body[..], b"real");
        assert_eq!(recorded.plan.delay, Duration::from_millis(30));
        assert!(serve.journal().newest_first().unwrap()[0].proxied);
    }

    #[test]
    fn a_failed_proxy_answers_the_transports_plan_with_the_stubs_delay() {
        let (serve, _) = serve(
            &[json!({"request": {"url": "/p"},
                "response": {"proxyBaseUrl": "http://127.0.0.1:1", "fixedDelayMilliseconds": 30}})],
            None,
            None,
        );
        let req = get("/p");
        let mut ex = now(serve.answer(&req));
        ex.take_proxy().expect("proxy this");
        let failure = decoy_spec::plan::text_plan(500, "unreachable".into());
        serve.forwarded(&mut ex, &req, Forwarded::Failed(failure));
        let recorded = serve.record(ex, req, arrival());
        assert_eq!(recorded.plan.status, 500);
        assert_eq!(recorded.plan.delay, Duration::from_millis(30));
    }

    #[test]
    fn a_message_transport_records_answers_and_unmatched_messages() {
        let metrics = Metrics::default();
        let sink = Arc::new(Sink::default());
        let outcomes = Outcomes::register(&metrics, "broker", Some(sink.clone()));
        let stats = MappingStats::default();
        outcomes.answered(Some(&stats), Duration::from_micros(5), SystemTime::now());
        outcomes.unmatched();
        let t = metrics.transport("broker");
        assert_eq!((t.matched_total(), t.unmatched_total()), (1, 1));
        assert_eq!(stats.served.load(Ordering::Relaxed), 1);
        let text = metrics.render(std::iter::empty());
        assert!(
            text.contains("decoy_processing_seconds_count{transport=\"broker\"} 1"),
            "only the answer is timed: {text}"
        );
    }
}
