//! Message-queue virtual services: a request message put on a queue gets the mapped
//! reply on its reply-to queue, as a real back end would send it.
//!
//! - [`config`]: `mq-connections.json` and `mq-mappings/` (and Traffic Parrot's
//!   names), parsed with the same error style as HTTP mappings.
//! - [`transport`]: the small broker interface (receive, settle, send).
//! - [`runtime`]: receivers, the bounded hand-off, senders; matching, delays,
//!   at-least-once settlement, reconnects, supervised tasks, draining on shutdown.
//! - [`retry`]: back-off with jitter, and failures logged once then summarised.
//! - [`incidents`]: what went wrong while serving (a task that panicked, an
//!   unmatched queue that cannot be created), for `/__admin/problems`.
//! - [`amqp`]: RabbitMQ and other AMQP 0-9-1 brokers, with `lapin`.
//! - [`amqp1`]: AMQP 1.0 brokers (RabbitMQ's plugin, Artemis, Azure Service Bus),
//!   with `fe2o3-amqp`.
//! - [`ibmmq`]: IBM MQ through the MQI, with `mqi` and the client library loaded at
//!   run time.
//! - [`nats`]: NATS core request-reply and JetStream durable consumers, with
//!   `async-nats`.
//! - [`mqtt`]: MQTT 3.1.1 and 5 brokers (Mosquitto...), with `rumqttc`.
//! - [`record`]: recording a real back end (`decoy record-mq`): requests forwarded,
//!   replies paired and passed back, exchanges written as `mq-mappings`.
//! - [`memory`]: an in-process broker for the runtime's own tests.
//! - [`publish`]: publishing on the configured connections for stubs' `message`
//!   listeners and the admin API (`decoy-core`'s `MessagePublisher`).
//!
//! A transport beside HTTP: MQ mappings are matched here (their own format), and
//! answered requests are recorded through the serve step's
//! [`Outcomes`](decoy_core::serve::Outcomes) (counters, mapping counters, webhooks), as
//! HTTP's are. The MQ transports register their metrics under `amqp`, `ibm-mq`,
//! `nats`, `mqtt` and `amqp1`.
//!
//! May depend on: `decoy-spec`, `decoy-matching`, `decoy-plugin-host`, `decoy-core`.
//! Must not import: the `decoy` crate (HTTP, the admin API, the watcher, the server
//! wiring) or `decoy-state`; it learns of changes when the binary calls
//! [`MqService::reload`], and reaches webhooks only through the `WebhookSink` it is
//! given.

pub mod amqp;
pub mod amqp1;
pub mod config;
#[cfg(feature = "ibmmq")]
pub mod ibmmq;
pub mod incidents;
pub mod memory;
pub mod mqtt;
pub mod nats;
pub mod publish;
pub mod record;
pub mod retry;
pub mod runtime;
pub mod threads;
pub mod transport;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};

use config::{ConnectionKind, MqLoad};
use decoy_core::mapping::load::Problem;
use decoy_core::metrics::{MappingStats, Metrics, TransportMetrics};
use incidents::{Incidents, Panics, PanicsSection};
use runtime::MqRuntime;
use transport::Broker;

/// The MQ transports' names: the `transport` label of their metrics.
pub const TRANSPORTS: [&str; 5] = ["amqp", "ibm-mq", "nats", "mqtt", "amqp1"];

/// Under which name the MQ mappings' counters are listed in the metrics.
const METRICS_OWNER: &str = "mq";

/// Which of [`TRANSPORTS`] serves a connection of this kind.
fn transport_index(kind: &ConnectionKind) -> usize {
    match kind {
        ConnectionKind::Amqp(_) => 0,
        ConnectionKind::IbmMq(_) => 1,
        ConnectionKind::Nats(_) => 2,
        ConnectionKind::Mqtt(_) => 3,
        ConnectionKind::Amqp1(_) => 4,
    }
}

/// A served MQ mapping and its counters.
pub type LiveMqMapping = (Arc<config::MqMapping>, Arc<MappingStats>);

/// The MQ side of a server: the running runtime, and what reloading needs.
///
/// A reload (the watcher saw `mq-connections.json` or `mq-mappings/` change) reads the
/// files again. When they have problems, the running mappings stay live and the
/// problems are kept for `/__admin/problems`, as for HTTP files. Otherwise a new
/// runtime starts, then the old one stops receiving and sends what it had in flight,
/// so no request is lost across the switch (each is answered by the old mappings or
/// the new ones). Per-mapping counters carry over by mapping id.
#[derive(Debug)]
pub struct MqService {
    root: PathBuf,
    metrics: Arc<Metrics>,
    running: Mutex<Option<MqRuntime>>,
    stats: Mutex<HashMap<Arc<str>, Arc<MappingStats>>>,
    problems: Mutex<(Vec<Problem>, Vec<Problem>)>,
    /// What went wrong while serving (listed with the file problems).
    incidents: Arc<Incidents>,
    /// Each MQ transport's counters, registered once at start (runtimes a reload
    /// starts count on into them), in the order of [`TRANSPORTS`].
    counters: [(Arc<TransportMetrics>, Arc<Panics>); TRANSPORTS.len()],
    /// The mappings being served, with their counters (for the dashboard).
    live: Mutex<Vec<LiveMqMapping>>,
    /// Where `response.transformers` names resolve (shared with the HTTP side).
    plugins: Option<Arc<decoy_plugin_host::Plugins>>,
    /// The largest file `bodyFileName` may name on reload (`--max-body-file-size`).
    max_body_file_size: u64,
    /// Sends mappings' webhooks (shared with the HTTP side).
    webhooks: Option<Arc<dyn decoy_core::webhooks::WebhookSink>>,
    /// Publishes `message` listeners' messages and the admin API's on the
    /// connections (whether or not any MQ mapping is served).
    publishers: Arc<publish::Publishers>,
    /// How many threads a runtime serves on (`--mq-threads`).
    threads: usize,
}

/// A broker for connection `c`, knowing the mappings it serves (NATS and MQTT
/// subscribe by them; none for publishing alone, or for recording).
pub fn broker_for(
    c: &config::Connection,
    mappings: &[config::MqMapping],
) -> anyhow::Result<Arc<dyn Broker>> {
    Ok(match &c.kind {
        ConnectionKind::Amqp(a) => Arc::new(amqp::AmqpBroker::new(a.clone())),
        ConnectionKind::Mqtt(m) => Arc::new(mqtt::MqttBroker::new(&c.id, m.clone(), mappings)),
        ConnectionKind::Amqp1(a) => Arc::new(
            amqp1::Amqp1Broker::new(a.clone())
                .map_err(|e| anyhow::anyhow!("connection {:?}: {e:#}", c.id))?,
        ),
        #[cfg(not(feature = "ibmmq"))]
        ConnectionKind::IbmMq(_) => bail!(
            "connection {:?} is an IBM MQ connection, but this decoy was built without IBM MQ support (the `ibmmq` cargo feature, on by default)",
            c.id
        ),
        #[cfg(feature = "ibmmq")]
        ConnectionKind::IbmMq(m) => {
            let dirs = ibmmq::library_dirs();
            let Some(path) = ibmmq::find_client(&dirs) else {
                bail!("{}", ibmmq::missing_client_message(&c.id, &dirs));
            };
            let lib = ibmmq::load_client(&path).map_err(|e| {
                anyhow::anyhow!("connection {:?} is an IBM MQ connection: {e}", c.id)
            })?;
            Arc::new(ibmmq::IbmMqBroker::new(lib, m.clone()))
        }
        ConnectionKind::Nats(n) => Arc::new(nats::NatsBroker::new(n.clone(), &c.id, mappings)),
    })
}

/// The brokers `message` listeners and the admin API publish through, made once per
/// connection of `load`. Without MQ mappings, a connection whose broker cannot be made
/// (IBM MQ without its client library) is only left out of publishing, with a
/// warning. With MQ mappings the runtime cannot serve it either, which stops the start
/// (or the reload): that error is returned here, before the warning is logged, so
/// the reason is said once rather than as a warning and then again as the error.
fn publishing_brokers(load: &MqLoad) -> anyhow::Result<MadeBrokers> {
    let mut made = HashMap::new();
    for c in &load.connections {
        match broker_for(c, &[]) {
            Ok(b) => made.insert(c.id.clone(), Ok(b)),
            Err(e) if load.mappings.is_empty() => made.insert(c.id.clone(), Err(format!("{e:#}"))),
            Err(e) => return Err(e),
        };
    }
    Ok(MadeBrokers(made))
}

/// What [`publishing_brokers`] made: a broker, or why there is none, per connection id.
struct MadeBrokers(HashMap<String, Result<Arc<dyn Broker>, String>>);

impl MadeBrokers {
    /// The broker made for `c`, for [`publish::Publishers::replace`].
    fn broker(&self, c: &config::Connection) -> anyhow::Result<Arc<dyn Broker>> {
        match self.0.get(&c.id) {
            Some(Ok(b)) => Ok(b.clone()),
            Some(Err(e)) => Err(anyhow::anyhow!("{e}")),
            None => broker_for(c, &[]),
        }
    }
}

/// Problems of `message` listeners that name a connection not among `connections`, for
/// the stubs `listeners` lists: (file, stub, the listeners). Each names the file, the
/// stub, the field and the connections there are.
pub fn check_listeners<'a>(
    connections: &[String],
    listeners: impl Iterator<
        Item = (
            std::path::PathBuf,
            Option<decoy_core::mapping::load::StubRef>,
            &'a decoy_core::webhooks::Webhooks,
        ),
    >,
) -> Vec<Problem> {
    let known: Vec<&str> = connections.iter().map(String::as_str).collect();
    let mut problems = Vec::new();
    for (file, stub, hooks) in listeners {
        for hook in hooks.iter() {
            let Some(target) = &hook.message else {
                continue;
            };
            if known.contains(&target.connection.as_str()) {
                continue;
            }
            problems.push(Problem {
                file: file.clone(),
                stub: stub.clone(),
                error: decoy_spec::fields::FieldError::new(
                    decoy_spec::fields::join(&hook.at, "connection"),
                    format!(
                        "no connection {:?} in mq-connections.json (connectionId: {}); its messages are not published",
                        target.connection,
                        if known.is_empty() {
                            "none is configured".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ),
            });
        }
    }
    problems
}

impl MqService {
    /// Starts serving `load` (already read from `root`). Brokers that cannot be
    /// reached yet are retried in the background, so an HTTP mock still starts
    /// while RabbitMQ is restarting. The mappings are served on `threads` threads
    /// of their own ([`threads::MqThreads`]), started when there are mappings.
    pub fn start(
        root: &Path,
        load: MqLoad,
        threads: usize,
        metrics: &Arc<Metrics>,
        plugins: Option<Arc<decoy_plugin_host::Plugins>>,
        max_body_file_size: u64,
        webhooks: Option<Arc<dyn decoy_core::webhooks::WebhookSink>>,
    ) -> anyhow::Result<Arc<MqService>> {
        // Registered whatever the files say, so the metrics show every MQ transport.
        let counters =
            TRANSPORTS.map(|name| (metrics.transport(name), Arc::new(Panics::default())));
        metrics.add_section(Arc::new(PanicsSection(
            TRANSPORTS
                .iter()
                .zip(&counters)
                .map(|(name, (_, p))| (*name, p.clone()))
                .collect(),
        )));
        let service = Arc::new(MqService {
            counters,
            plugins,
            max_body_file_size,
            webhooks,
            root: root.to_path_buf(),
            metrics: metrics.clone(),
            running: Mutex::new(None),
            stats: Mutex::new(HashMap::new()),
            problems: Mutex::new((load.problems.clone(), load.warnings.clone())),
            incidents: Arc::default(),
            live: Mutex::new(Vec::new()),
            publishers: Arc::default(),
            threads,
        });
        let made = publishing_brokers(&load)?;
        service
            .publishers
            .replace(&load.connections, |c| made.broker(c));
        let runtime = service.runtime_for(load)?;
        *lock(&service.running) = runtime;
        Ok(service)
    }

    fn runtime_for(&self, load: MqLoad) -> anyhow::Result<Option<MqRuntime>> {
        if load.mappings.is_empty() {
            self.metrics.set_mappings(METRICS_OWNER, Vec::new());
            lock(&self.live).clear();
            return Ok(None);
        }
        let mut brokers: Vec<Arc<dyn Broker>> = Vec::new();
        for c in &load.connections {
            brokers.push(broker_for(c, &load.mappings)?);
        }
        let mappings: Vec<(Arc<config::MqMapping>, Arc<MappingStats>)> = {
            let mut stats = lock(&self.stats);
            load.mappings
                .into_iter()
                .map(|m| {
                    let s = stats.entry(m.id.clone()).or_default().clone();
                    (Arc::new(m), s)
                })
                .collect()
        };
        self.metrics.set_mappings(
            METRICS_OWNER,
            mappings
                .iter()
                .map(|(m, s)| (m.id.clone(), m.name.clone(), s.clone()))
                .collect(),
        );
        *lock(&self.live) = mappings.clone();
        let counters = &self.counters;
        Ok(Some(MqRuntime::start(
            &load.connections,
            brokers,
            mappings,
            |c| {
                let (requests, panics) = &counters[transport_index(&c.kind)];
                (requests.clone(), panics.clone())
            },
            self.webhooks.clone(),
            self.incidents.clone(),
            threads::MqThreads::start(self.threads)
                .context("starting the threads MQ mappings are served on")?,
        )))
    }

    /// Re-reads the MQ files and switches to them when they are clean.
    pub async fn reload(&self) {
        let root = self.root.clone();
        let (plugins, max_file) = (self.plugins.clone(), self.max_body_file_size);
        let Ok(load) = tokio::task::spawn_blocking(move || {
            config::load_with(&root, plugins.as_deref(), max_file)
        })
        .await
        else {
            return;
        };
        let (_, said) = std::mem::replace(
            &mut *lock(&self.problems),
            (load.problems.clone(), load.warnings.clone()),
        );
        // Warnings are said as they appear, like those of the first load: one the
        // previous load had is not repeated by every later reload (an edit of
        // another file, a body file, a plugin loaded).
        for w in load.warnings.iter().filter(|w| !said.contains(w)) {
            tracing::warn!("{w}");
        }
        if !load.problems.is_empty() {
            for p in &load.problems {
                tracing::warn!("{p} (the running MQ mappings stay live)");
            }
            return;
        }
        let count = load.mappings.len();
        let made = match publishing_brokers(&load) {
            Ok(made) => made,
            Err(e) => {
                tracing::warn!("MQ mappings not reloaded: {e}");
                return;
            }
        };
        self.publishers
            .replace(&load.connections, |c| made.broker(c));
        let new = match self.runtime_for(load) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("MQ mappings not reloaded: {e}");
                return;
            }
        };
        // What went wrong with the old mappings is not said of the new ones.
        self.incidents.clear();
        let old = std::mem::replace(&mut *lock(&self.running), new);
        // The old runtime drains in the background (delayed replies may take a
        // while), so the watcher goes on with HTTP reloads meanwhile.
        if let Some(old) = old {
            tokio::spawn(old.shutdown());
        }
        tracing::info!("MQ mappings reloaded: {count} live");
    }

    /// The root directory the MQ files are read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The MQ mappings being served, with their counters.
    pub fn mappings(&self) -> Vec<LiveMqMapping> {
        lock(&self.live).clone()
    }

    /// Current problems and warnings of the MQ files, and what went wrong while
    /// serving them since they were last loaded.
    pub fn problems(&self) -> (Vec<Problem>, Vec<Problem>) {
        let (mut problems, warnings) = lock(&self.problems).clone();
        problems.extend(self.incidents.problems());
        let live = lock(&self.live).clone();
        problems.extend(check_listeners(
            &self.publishers.connections(),
            live.iter().filter_map(|(m, _)| {
                let stub = m.stub_ref();
                m.webhooks.as_ref().map(|w| (m.file.clone(), Some(stub), w))
            }),
        ));
        (problems, warnings)
    }

    /// Stops receiving and sends the replies in flight; then closes the publishing
    /// connections.
    pub async fn shutdown(&self) {
        let running = lock(&self.running).take();
        if let Some(r) = running {
            r.shutdown().await;
        }
        self.publishers.clear();
    }

    /// Where stubs' `message` listeners and the admin API publish.
    pub fn publisher(&self) -> Arc<publish::Publishers> {
        self.publishers.clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
