//! Recording a real MQ back end into `mq-mappings` (`decoy record-mq`), as Traffic
//! Parrot records: decoy listens where the system under test sends its requests,
//! forwards each to the real back end, pairs the back end's reply with its request,
//! passes the reply back to the requester, and at the end writes one mapping per
//! distinct request. Playback is `decoy serve` on the files written.
//!
//! Built on the broker-neutral interface ([`crate::transport`]), so one recorder
//! serves every transport; a broker adds only a reply destination of its own
//! ([`Broker::private_replies`]: an exclusive queue on RabbitMQ, an inbox on NATS, a
//! response topic on MQTT 5). Where a back end answers on a fixed queue (IBM MQ
//! applications, AMQP 1.0 without one of decoy's own), the route names it and
//! replies are paired by correlation id.
//!
//! - [`spec`]: the recording description, checked whole before connecting.
//! - [`route`]: a route's tasks: forward requests, pair and pass on replies.
//! - [`book`]: requests waiting (bounded in number and bytes; a request whose reply
//!   does not come within `timeoutMilliseconds` is noted and not written), the
//!   exchanges recorded (one per distinct request, bounded in bytes), the counts.
//! - [`stubs`]: exchanges as mapping files.

pub mod book;
pub mod route;
pub mod spec;
pub mod stubs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Connection;
use crate::retry::Trouble;
use crate::transport::Broker;
use book::Book;
use route::{RouteTasks, excerpt};
use spec::RecordSpec;

/// What a recording did, when it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub forwarded: u64,
    pub passed_on: u64,
    /// Distinct requests recorded (one mapping each).
    pub recorded: u64,
    pub repeats: u64,
    pub differing: u64,
    /// Requests whose reply did not come in time (or before the end): not written.
    pub timed_out: u64,
    /// Replies that paired with no request: not written.
    pub unpaired: u64,
    pub not_forwarded: u64,
    pub not_passed_on: u64,
    pub over_budget: u64,
    /// The mapping files written.
    pub files: Vec<PathBuf>,
    /// What went wrong, one line each (at most 1000).
    pub notes: Vec<String>,
}

/// A recording under way. Stop it with [`Recording::stop`].
pub struct Recording {
    root: PathBuf,
    spec: Arc<RecordSpec>,
    book: Arc<Book>,
    stop_requests: watch::Sender<bool>,
    stop_replies: watch::Sender<bool>,
    requests: Vec<JoinHandle<()>>,
    replies: Vec<JoinHandle<()>>,
    sweeper: JoinHandle<()>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("root", &self.root)
            .field("routes", &self.spec.routes.len())
            .finish_non_exhaustive()
    }
}

/// The brokers of the connections `spec`'s routes use, by connection id.
pub fn brokers_for(
    connections: &[Connection],
    spec: &RecordSpec,
) -> anyhow::Result<HashMap<String, Arc<dyn Broker>>> {
    let mut out = HashMap::new();
    for r in &spec.routes {
        if out.contains_key(&r.connection_id) {
            continue;
        }
        let Some(c) = connections.iter().find(|c| c.id == r.connection_id) else {
            anyhow::bail!(
                "connection {:?} is not in mq-connections.json",
                r.connection_id
            );
        };
        out.insert(c.id.clone(), crate::broker_for(c, &[])?);
    }
    Ok(out)
}

impl Recording {
    /// Starts recording `spec`'s routes through `brokers`; files go under `root`.
    /// Connections that cannot be made yet are retried with back-off.
    pub fn start(
        root: &Path,
        spec: RecordSpec,
        brokers: &HashMap<String, Arc<dyn Broker>>,
    ) -> anyhow::Result<Recording> {
        let spec = Arc::new(spec);
        let book = Arc::new(Book::new(
            spec.max_outstanding,
            spec.max_outstanding_bytes,
            spec.max_recorded_bytes,
        ));
        let (stop_requests, req_rx) = watch::channel(false);
        let (stop_replies, rep_rx) = watch::channel(false);
        let mut requests = Vec::new();
        let mut replies = Vec::new();
        let mut troubles: HashMap<&str, Arc<Trouble>> = HashMap::new();
        for (index, r) in spec.routes.iter().enumerate() {
            let Some(broker) = brokers.get(&r.connection_id) else {
                anyhow::bail!("no broker for connection {:?}", r.connection_id);
            };
            let trouble = troubles
                .entry(&r.connection_id)
                .or_insert_with(|| Arc::new(Trouble::new(&broker.describe(), &r.connection_id)))
                .clone();
            let tasks = Arc::new(RouteTasks {
                index,
                spec: spec.clone(),
                broker: broker.clone(),
                book: book.clone(),
                trouble,
                point: watch::channel(None).0,
            });
            replies.push(tokio::spawn(route::replies(tasks.clone(), rep_rx.clone())));
            requests.push(tokio::spawn(route::requests(tasks, req_rx.clone())));
            tracing::info!(
                "recording route {index}: requests on {} (connection {:?}) are forwarded to {}",
                r.listen,
                r.connection_id,
                r.forward
            );
        }
        let sweeper = {
            let book = book.clone();
            let spec = spec.clone();
            let tick = (spec.timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(tick).await;
                    book.expire(|p| {
                        format!(
                            "route {}: no reply from {} within {:?} for the request {} on {}: the requester gets nothing, nothing is recorded for it",
                            p.route,
                            spec.routes[p.route].forward,
                            spec.timeout,
                            excerpt(&p.request.body),
                            spec.routes[p.route].listen,
                        )
                    });
                }
            })
        };
        Ok(Recording {
            root: root.to_path_buf(),
            spec,
            book,
            stop_requests,
            stop_replies,
            requests,
            replies,
            sweeper,
        })
    }

    /// Distinct requests recorded so far.
    pub fn recorded(&self) -> u64 {
        self.book.counts.recorded.load(Ordering::Relaxed)
    }

    /// Requests forwarded and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.book.outstanding()
    }

    /// Stops taking requests, waits (up to the reply timeout) for the replies still
    /// due, stops, and writes the mappings.
    pub async fn stop(self) -> Result<Summary, String> {
        let _ = self.stop_requests.send(true);
        for t in self.requests {
            let _ = t.await;
        }
        let deadline = Instant::now() + self.spec.timeout;
        while self.book.outstanding() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.stop_replies.send(true);
        for t in self.replies {
            let _ = t.await;
        }
        self.sweeper.abort();
        let spec = self.spec.clone();
        self.book.expire_all(|p| {
            format!(
                "route {}: no reply from {} before the recording stopped for the request {}: nothing is recorded for it",
                p.route,
                spec.routes[p.route].forward,
                excerpt(&p.request.body)
            )
        });
        let (exchanges, notes) = self.book.take_all();
        let root = self.root.clone();
        let files = tokio::task::spawn_blocking(move || stubs::write(&root, &spec, &exchanges))
            .await
            .map_err(|e| format!("writing the recording: {e}"))??;
        let c = &self.book.counts;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        Ok(Summary {
            forwarded: n(&c.forwarded),
            passed_on: n(&c.passed_on),
            recorded: n(&c.recorded),
            repeats: n(&c.repeats),
            differing: n(&c.differing),
            timed_out: n(&c.timed_out),
            unpaired: n(&c.unpaired),
            not_forwarded: n(&c.not_forwarded),
            not_passed_on: n(&c.not_passed_on),
            over_budget: n(&c.over_budget),
            files,
            notes,
        })
    }
}
