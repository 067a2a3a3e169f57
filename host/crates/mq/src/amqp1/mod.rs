//! AMQP 1.0 (RabbitMQ's `rabbitmq_amqp1_0` plugin, ActiveMQ Artemis, Qpid, Azure
//! Service Bus, Solace) with `fe2o3-amqp` on tokio.
//!
//! A connection entry opens `readConnectionsToOpen` connections for receiving and
//! `writeConnectionsToOpen` for sending, each with one session; receiver and sender
//! number `i` use connection `i % n`. A mapping's `request.destination` is a node
//! address, passed to the broker as it is (`/queue/orders` on RabbitMQ, `orders` on
//! Artemis); a `TOPIC` destination without a leading `/` is `/topic/NAME`.
//!
//! - A receiver is a receiving link with `prefetch` credit, refilled as deliveries
//!   are settled, so the broker never sends it more than `prefetch` unsettled
//!   messages. Settlement is the runtime's: accepted once the reply was accepted,
//!   released (the broker delivers it again) after a failed reply, rejected for an
//!   unmatched message when the connection says `reject`. One task owns the link
//!   ([`link_task`]) and receives; a request is accepted or released by its reply,
//!   through the link's disposer (fe2o3's settling handle, which needs no lock on
//!   the link), so settling costs no hop to that task and back. A rejection, and the
//!   release of a request dropped unsettled, go through the link's task. Each
//!   receiving link has a session of its own
//!   on the pooled connection: RabbitMQ answers an attach to a queue that does not
//!   exist by ending the session (`amqp:not-found`), which is then said once as a
//!   missing queue, and leaves the other receivers' links alone.
//! - A sender keeps a sending link per reply address (at most [`LINKS_PER_SENDER`],
//!   the least recently used closed first), sends unsettled and waits for the
//!   broker's outcome: only `accepted` counts as sent.
//! - A connection lost is noticed by its links (their receive or send fails); the
//!   runtime asks for a new receiver or sender, which connects again (with the
//!   runtime's back-off). What was not settled is delivered again by the broker.
//!
//! TLS (`amqps://`) is rustls with the *ring* provider and the system's trust store
//! (plus `caCertificateFile`), set up here rather than by fe2o3's own `rustls`
//! feature, which would bring in a second crypto provider (aws-lc) beside lapin's.
//! A certificate refused in the handshake and a login the broker refused are said
//! in words a user acts on ([`tls_failed`], [`open_failed`]): what fe2o3 and rustls
//! say alone (`SASL error code Auth`, `UnknownIssuer`) names neither the credentials
//! nor `caCertificateFile`.

pub mod config;
pub mod convert;

use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::connection::{ConnectionHandle, OpenError};
use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::{CreditMode, ReceiverDisposer};
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::{Body, Outcome, Source, Target};
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::types::sasl::SaslCode;
use fe2o3_amqp::{Connection, Sendable, Session};
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot};

pub use config::Amqp1Config;

use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, Sender, Settle,
};

/// How long an attach, a settlement or a link's close may take before it counts as
/// failed (and is retried with the back-off).
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a reply waits for the broker's outcome; past it the put counts as
/// failed and the request is released (delivered again).
const OUTCOME_TIMEOUT: Duration = Duration::from_secs(30);
/// Sending links one sender keeps open, one per reply address.
pub const LINKS_PER_SENDER: usize = 32;
/// How long a receiving link whose receiver was dropped waits for the replies of
/// the requests it handed out before it closes (the broker then delivers whatever
/// is still unsettled again).
const LINGER: Duration = Duration::from_secs(40);
/// The idle time-out decoy asks the broker to keep: a peer that stops sending for
/// twice this long is considered gone.
const IDLE_TIMEOUT_MS: u32 = 30_000;

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// The address of a destination: a queue's name as it is; a topic's as RabbitMQ
/// writes topics unless it is an address already.
pub fn address(d: &Destination) -> String {
    if d.topic && !d.name.starts_with('/') {
        format!("/topic/{}", d.name)
    } else {
        d.name.clone()
    }
}

/// One pooled broker connection and its session.
struct Pooled {
    connection: ConnectionHandle<()>,
    session: SessionHandle<()>,
}

impl Pooled {
    fn alive(&self) -> bool {
        !self.connection.is_closed() && !self.session.is_ended()
    }
}

type Slot = Arc<AsyncMutex<Option<Pooled>>>;

/// One `amqp1` connection entry and its two pools.
pub struct Amqp1Broker {
    config: Amqp1Config,
    tls: Option<tokio_rustls::TlsConnector>,
    /// The slot's lock is held while connecting or attaching a link (never while a
    /// message is sent), so receivers and senders starting together share the slot's
    /// one connection.
    read: Vec<Slot>,
    write: Vec<Slot>,
}

impl std::fmt::Debug for Amqp1Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Amqp1Broker")
            .field("uri", &self.config.shown)
            .finish_non_exhaustive()
    }
}

impl Amqp1Broker {
    /// Fails only when `amqps://` cannot be set up (an unreadable
    /// `caCertificateFile`).
    pub fn new(config: Amqp1Config) -> anyhow::Result<Amqp1Broker> {
        let tls = if config.tls {
            Some(tls_connector(&config)?)
        } else {
            None
        };
        let slots = |n: usize| (0..n).map(|_| Arc::new(AsyncMutex::new(None))).collect();
        Ok(Amqp1Broker {
            tls,
            read: slots(config.read_connections),
            write: slots(config.write_connections),
            config,
        })
    }

    /// Opens a connection and its session within `connectTimeoutMilliseconds`.
    async fn connect(&self, role: &str, n: usize) -> Result<Pooled, BrokerError> {
        let failed =
            |e: &dyn std::fmt::Display| err(&format!("cannot connect to {}", self.config.shown), e);
        let open = async {
            let tcp = tokio::net::TcpStream::connect((self.config.host.as_str(), self.config.port))
                .await
                .map_err(|e| failed(&e))?;
            tcp.set_nodelay(true).map_err(|e| failed(&e))?;
            let builder = Connection::builder()
                .container_id(format!("{}-{role}-{n}", self.config.container_id))
                .hostname(self.config.hostname.as_str())
                .idle_time_out(IDLE_TIMEOUT_MS)
                .scheme("amqp");
            let builder = match &self.config.sasl {
                config::Sasl::Plain { username, password } => {
                    builder.sasl_profile(SaslProfile::Plain {
                        username: username.clone(),
                        password: password.clone(),
                    })
                }
                config::Sasl::Anonymous => builder.sasl_profile(SaslProfile::Anonymous),
                config::Sasl::None => builder,
            };
            let mut connection = match &self.tls {
                Some(tls) => {
                    let name = rustls::pki_types::ServerName::try_from(self.config.host.clone())
                        .map_err(|e| failed(&e))?;
                    let stream = tls
                        .connect(name, tcp)
                        .await
                        .map_err(|e| failed(&tls_failed(&e, self.config.ca_file.as_deref())))?;
                    builder.open_with_stream(stream).await
                }
                None => builder.open_with_stream(tcp).await,
            }
            .map_err(|e| failed(&open_failed(&e, &self.config.sasl)))?;
            let session = match Session::begin(&mut connection).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = connection.close().await;
                    return Err(err("cannot begin a session", e));
                }
            };
            Ok(Pooled {
                connection,
                session,
            })
        };
        match tokio::time::timeout(self.config.connect_timeout, open).await {
            Ok(r) => r,
            Err(_) => Err(failed(&format_args!(
                "no answer from the broker in {:?}",
                self.config.connect_timeout
            ))),
        }
    }

    /// The locked `slot`, holding a live connection (connecting when it had none);
    /// the slot stays locked while the caller attaches its link.
    async fn session<'s>(
        &self,
        slot: &'s Slot,
        role: &str,
        n: usize,
    ) -> Result<tokio::sync::MutexGuard<'s, Option<Pooled>>, BrokerError> {
        let mut guard = slot.lock().await;
        if !guard.as_ref().is_some_and(Pooled::alive) {
            // A connection dropped here is closed (its handle's drop says so).
            *guard = None;
            *guard = Some(self.connect(role, n).await?);
        }
        Ok(guard)
    }

    fn read_slot(&self, index: usize) -> (&Slot, usize) {
        let n = index % self.read.len();
        (&self.read[n], n)
    }

    fn write_slot(&self, index: usize) -> (Slot, usize) {
        let n = index % self.write.len();
        (self.write[n].clone(), n)
    }
}

fn no_connection() -> BrokerError {
    BrokerError::new("the connection closed")
}

/// Whether the broker said the node does not exist.
fn not_found(e: &impl std::fmt::Debug) -> bool {
    format!("{e:?}").contains("NotFound")
}

/// Why the TLS handshake failed, saying which authorities decoy trusts when the
/// broker's certificate was signed by another (a private CA not given in
/// `caCertificateFile`), which rustls alone says as `UnknownIssuer`.
fn tls_failed(e: &std::io::Error, ca_file: Option<&std::path::Path>) -> String {
    use rustls::{CertificateError, Error as TlsError};
    match e.get_ref().and_then(|e| e.downcast_ref::<TlsError>()) {
        Some(TlsError::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            let trusted = match ca_file {
                Some(path) => format!(
                    "neither in the system's trust store nor in caCertificateFile {}",
                    path.display()
                ),
                None => "not in the system's trust store; name its PEM file in caCertificateFile"
                    .to_owned(),
            };
            format!(
                "the broker's certificate was refused in the TLS handshake ({e}): the authority that signed it is {trusted}"
            )
        }
        Some(TlsError::InvalidCertificate(_)) => {
            format!("the broker's certificate was refused in the TLS handshake: {e}")
        }
        _ => format!("the TLS handshake failed: {e}"),
    }
}

/// Why the AMQP connection could not be opened. A login the broker refused is said
/// as such, naming the user: RabbitMQ answers a wrong password with the SASL outcome
/// `auth` and no other word, which fe2o3 shows as `SASL error code Auth`.
fn open_failed(e: &OpenError, sasl: &config::Sasl) -> String {
    match e {
        OpenError::SaslError {
            code,
            additional_data,
        } => {
            let said = additional_data
                .as_ref()
                .map(|d| format!(": {}", String::from_utf8_lossy(d)))
                .unwrap_or_default();
            match (code, sasl) {
                (SaslCode::Auth, config::Sasl::Plain { username, .. }) => format!(
                    "the broker refused the credentials of user {username:?} (SASL PLAIN, outcome auth{said}): check the user and password in the uri"
                ),
                (SaslCode::Auth, config::Sasl::Anonymous) => format!(
                    "the broker refused an anonymous login (SASL ANONYMOUS, outcome auth{said}): put a user and password in the uri"
                ),
                _ => format!("the broker's SASL login failed (outcome {code:?}{said})"),
            }
        }
        OpenError::Io(e) => e.to_string(),
        other => other.to_string(),
    }
}

fn tls_connector(c: &Amqp1Config) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = &c.ca_file {
        use rustls::pki_types::pem::PemObject as _;
        let bad = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("caCertificateFile {}: {e}", path.display())
        };
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))?;
        let mut added = 0;
        for cert in certs {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            added += 1;
        }
        // A key or some other PEM file given by mistake would otherwise trust
        // nothing more, and be noticed only as refused handshakes.
        if added == 0 {
            anyhow::bail!(
                "caCertificateFile {} holds no certificate (a PEM file of \"BEGIN CERTIFICATE\" blocks)",
                path.display()
            );
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

impl Broker for Amqp1Broker {
    fn describe(&self) -> String {
        self.config.shown.clone()
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            let addr = address(from);
            let (slot, n) = self.read_slot(index);
            let mut guard = self.session(slot, "read", n).await?;
            let pooled = guard.as_mut().ok_or_else(no_connection)?;
            // A session of its own: RabbitMQ refuses an attach to a node that does not
            // exist by ending the session, which would end the other links on it too.
            let mut session =
                match tokio::time::timeout(BROKER_TIMEOUT, Session::begin(&mut pooled.connection))
                    .await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        *guard = None;
                        return Err(err("cannot begin a session", e));
                    }
                    Err(_) => {
                        *guard = None;
                        return Err(BrokerError::new(format!(
                            "cannot begin a session: no answer in {BROKER_TIMEOUT:?}"
                        )));
                    }
                };
            drop(guard);
            let attach = fe2o3_amqp::Receiver::builder()
                .name(format!("decoy-receiver-{index}-{}", uuid::Uuid::new_v4()))
                .source(Source::builder().address(addr.clone()).build())
                .receiver_settle_mode(ReceiverSettleMode::First)
                .credit_mode(CreditMode::Auto(self.config.prefetch))
                .auto_accept(false)
                .attach(&mut session);
            let attached = tokio::time::timeout(BROKER_TIMEOUT, attach).await;
            let link = match attached {
                Ok(Ok(link)) => link,
                Ok(Err(e)) => {
                    if not_found(&e) {
                        return Err(BrokerError::missing_queue(
                            from.name.clone(),
                            format!("address {addr:?} does not exist: {e}"),
                        ));
                    }
                    return Err(err(&format!("cannot receive from {addr:?}"), e));
                }
                Err(_) => {
                    // The session ended (dropping it says so to the broker): a broker
                    // that ended it without a word is not asked on it again.
                    return Err(BrokerError::new(format!(
                        "cannot receive from {addr:?}: no answer to the attach in {BROKER_TIMEOUT:?} (does the address exist?)"
                    )));
                }
            };
            let (deliveries_tx, deliveries) = mpsc::unbounded_channel();
            let (settle, commands) = mpsc::unbounded_channel();
            let disposer = Arc::new(link.disposer());
            tokio::spawn(link_task(session, link, deliveries_tx, commands));
            Ok(Box::new(Amqp1Receiver {
                deliveries,
                settle,
                disposer,
                queue: addr.into(),
            }) as Box<dyn Receiver>)
        })
    }

    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            let (slot, n) = self.write_slot(index);
            // Connect now, so a broker that is down is said here.
            drop(self.session(&slot, "write", n).await?);
            Ok(Box::new(Amqp1Sender {
                slot,
                index,
                links: AsyncMutex::new(Vec::new()),
            }) as Box<dyn Sender>)
        })
    }

    fn how_to_create(&self, queue: &str) -> String {
        format!(
            "create it on the broker, or on RabbitMQ listen on \"/queue/{}\", which the broker declares when it is missing",
            queue
                .trim_start_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(queue)
        )
    }

    /// As many replies as a receiver may hold requests (`prefetch`): each waits for
    /// its own outcome on the link, which costs nothing while it waits.
    fn in_flight(&self) -> usize {
        (self.config.prefetch as usize).clamp(8, 1000)
    }

    /// RabbitMQ declares a queue named `/queue/NAME` when a link is attached to it:
    /// an unmatched queue that is missing is made so.
    fn declare_queue<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async move {
            let (slot, n) = self.write_slot(0);
            let mut guard = self.session(&slot, "write", n).await?;
            let pooled = guard.as_mut().ok_or_else(no_connection)?;
            let addr = format!("/queue/{}", queue.rsplit('/').next().unwrap_or(queue));
            let attach = fe2o3_amqp::Sender::attach(
                &mut pooled.session,
                format!("decoy-declare-{}", uuid::Uuid::new_v4()),
                addr.as_str(),
            );
            match tokio::time::timeout(BROKER_TIMEOUT, attach).await {
                Ok(Ok(link)) => {
                    drop(guard);
                    let _ = tokio::time::timeout(BROKER_TIMEOUT, link.close()).await;
                    Ok(())
                }
                Ok(Err(e)) => Err(err(&format!("cannot declare {addr:?}"), e)),
                Err(_) => Err(BrokerError::new(format!(
                    "cannot declare {addr:?}: no answer in {BROKER_TIMEOUT:?}"
                ))),
            }
        })
    }
}

type Received = Result<fe2o3_amqp::link::delivery::Delivery<Body<Value>>, String>;

/// A settlement for the link task: which delivery, how, and who waits for it.
struct Command {
    info: DeliveryInfo,
    how: Settle,
    done: Option<oneshot::Sender<Result<(), String>>>,
}

/// Owns a receiving link: hands its deliveries to the receiver and settles them
/// as the runtime says. Ends when the link fails, or when the receiver and every
/// delivery it handed out are gone (or [`LINGER`] after the receiver went), then
/// closes the link.
async fn link_task(
    mut session: SessionHandle<()>,
    mut link: fe2o3_amqp::Receiver,
    deliveries: mpsc::UnboundedSender<Received>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    loop {
        if deliveries.is_closed() {
            break;
        }
        tokio::select! {
            biased;
            c = commands.recv() => {
                let Some(c) = c else { break };
                settle_one(&link, c).await;
            }
            // Cancel-safe: a message not yet taken stays with the link.
            d = link.recv::<Body<Value>>() => {
                let failed = d.is_err();
                if deliveries.send(d.map_err(|e| e.to_string())).is_err() || failed {
                    break;
                }
            }
        }
    }
    // The receiver is gone: settle what is still out, for a while.
    let linger = async {
        while let Some(c) = commands.recv().await {
            settle_one(&link, c).await;
        }
    };
    let _ = tokio::time::timeout(LINGER, linger).await;
    let _ = tokio::time::timeout(BROKER_TIMEOUT, link.close()).await;
    let _ = tokio::time::timeout(BROKER_TIMEOUT, session.end()).await;
}

async fn settle_one(link: &fe2o3_amqp::Receiver, c: Command) {
    use fe2o3_amqp::types::messaging::{Accepted, Rejected, Released};
    let state: fe2o3_amqp::link::receiver::TerminalDeliveryState = match c.how {
        Settle::Ack => Accepted {}.into(),
        Settle::Requeue => Released {}.into(),
        Settle::Reject => Rejected { error: None }.into(),
    };
    let r = tokio::time::timeout(BROKER_TIMEOUT, link.dispose(c.info, state)).await;
    let r = match r {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer in {BROKER_TIMEOUT:?}")),
    };
    if let Some(done) = c.done {
        let _ = done.send(r);
    }
}

struct Amqp1Receiver {
    deliveries: mpsc::UnboundedReceiver<Received>,
    settle: mpsc::UnboundedSender<Command>,
    disposer: Arc<ReceiverDisposer>,
    queue: Arc<str>,
}

impl Receiver for Amqp1Receiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.deliveries.recv().await {
                Some(Ok(d)) => {
                    let (info, message) = d.into_parts();
                    Ok(Some(Box::new(Amqp1Delivery {
                        info: Some(info),
                        settle: self.settle.clone(),
                        disposer: self.disposer.clone(),
                        queue: self.queue.clone(),
                        message: convert::from_amqp(message),
                    }) as Box<dyn Delivery>))
                }
                Some(Err(e)) => Err(err(&format!("receiving from {:?} failed", self.queue), e)),
                None => Err(BrokerError::new(format!(
                    "the link from {:?} or its connection closed",
                    self.queue
                ))),
            }
        })
    }
}

struct Amqp1Delivery {
    /// `None` once settled.
    info: Option<DeliveryInfo>,
    /// To the link's task: rejections, and releases on drop.
    settle: mpsc::UnboundedSender<Command>,
    /// Accepts and releases without the link's task.
    disposer: Arc<ReceiverDisposer>,
    queue: Arc<str>,
    message: Message,
}

/// A delivery dropped unsettled (its handling panicked) is released now, so the
/// broker delivers it again, instead of staying out until its link closes.
impl Drop for Amqp1Delivery {
    fn drop(&mut self) {
        if let Some(info) = self.info.take() {
            tracing::warn!(
                "a request on {} was dropped before it was settled; it is released to be delivered again",
                self.queue
            );
            let _ = self.settle.send(Command {
                info,
                how: Settle::Requeue,
                done: None,
            });
        }
    }
}

impl Delivery for Amqp1Delivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        let info = self.info.take();
        let settle = self.settle.clone();
        let disposer = self.disposer.clone();
        Box::pin(async move {
            let Some(info) = info else {
                return Ok(());
            };
            let disposed = match how {
                Settle::Ack => tokio::time::timeout(BROKER_TIMEOUT, disposer.accept(info)).await,
                Settle::Requeue => {
                    tokio::time::timeout(BROKER_TIMEOUT, disposer.release(info)).await
                }
                Settle::Reject => return settle_by_link(&settle, info, how).await,
            };
            match disposed {
                Ok(r) => r.map_err(|e| err("settling a delivery", e)),
                Err(_) => Err(BrokerError::new(format!(
                    "settling a delivery: no answer in {BROKER_TIMEOUT:?}"
                ))),
            }
        })
    }
}

/// Settles a delivery through its link's task, and waits until it did.
async fn settle_by_link(
    settle: &mpsc::UnboundedSender<Command>,
    info: DeliveryInfo,
    how: Settle,
) -> Result<(), BrokerError> {
    let (done, wait) = oneshot::channel();
    settle
        .send(Command {
            info,
            how,
            done: Some(done),
        })
        .map_err(|_| BrokerError::new("settling a delivery: its link is closed"))?;
    match wait.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(err("settling a delivery", e)),
        Err(_) => Err(BrokerError::new("settling a delivery: its link is closed")),
    }
}

type Link = Arc<AsyncMutex<fe2o3_amqp::Sender>>;

/// Sends replies on links attached on one write connection, one link per address.
struct Amqp1Sender {
    slot: Slot,
    index: usize,
    /// Most recently used last.
    links: AsyncMutex<Vec<(String, Link)>>,
}

impl Amqp1Sender {
    /// The link to `addr`, attached when there is none.
    async fn link(&self, addr: &str) -> Result<Link, BrokerError> {
        let mut links = self.links.lock().await;
        if let Some(i) = links.iter().position(|(a, _)| a == addr) {
            let entry = links.remove(i);
            let link = entry.1.clone();
            links.push(entry);
            return Ok(link);
        }
        let mut guard = self.slot.lock().await;
        let Some(pooled) = guard.as_mut().filter(|p| p.alive()) else {
            return Err(BrokerError::new("the connection for sending closed"));
        };
        let attach = fe2o3_amqp::Sender::builder()
            .name(format!(
                "decoy-sender-{}-{}",
                self.index,
                uuid::Uuid::new_v4()
            ))
            .target(Target::builder().address(addr.to_owned()).build())
            .sender_settle_mode(SenderSettleMode::Unsettled)
            .attach(&mut pooled.session);
        let link = match tokio::time::timeout(BROKER_TIMEOUT, attach).await {
            Ok(Ok(l)) => Arc::new(AsyncMutex::new(l)),
            Ok(Err(e)) if not_found(&e) => {
                // RabbitMQ ends the session with it: the next attach opens afresh.
                *guard = None;
                return Err(BrokerError::missing_queue(
                    addr,
                    format!("cannot send to {addr:?}: no such node on the broker ({e:?})"),
                ));
            }
            Ok(Err(e)) => return Err(err(&format!("cannot send to {addr:?}"), e)),
            Err(_) => {
                *guard = None;
                return Err(BrokerError::new(format!(
                    "cannot send to {addr:?}: no answer to the attach in {BROKER_TIMEOUT:?}"
                )));
            }
        };
        drop(guard);
        links.push((addr.to_owned(), link.clone()));
        if links.len() > LINKS_PER_SENDER {
            // Closed when the replies still under way on it are out (a link's drop
            // detaches it).
            links.remove(0);
        }
        Ok(link)
    }

    async fn forget(&self, addr: &str) {
        self.links.lock().await.retain(|(a, _)| a != addr);
    }

    async fn put(&self, to: &Destination, message: Message) -> Result<Put, BrokerError> {
        let addr = address(to);
        let link = match self.link(&addr).await {
            Ok(l) => l,
            // An address that does not exist (a reply-to naming a missing exchange):
            // as a message returned unroutable.
            Err(e) if e.missing().is_some() => return Ok(Put::NoSuchQueue),
            Err(e) => return Err(e),
        };
        let sendable = Sendable::builder()
            .message(convert::to_amqp(message))
            .build();
        let transfer = async {
            let mut l = link.lock().await;
            l.send_batchable(sendable).await
        };
        let outcome = match tokio::time::timeout(BROKER_TIMEOUT, transfer).await {
            Ok(Ok(fut)) => tokio::time::timeout(OUTCOME_TIMEOUT, fut).await,
            Ok(Err(e)) => {
                self.forget(&addr).await;
                return Err(err(&format!("sending to {addr:?}"), e));
            }
            Err(_) => {
                self.forget(&addr).await;
                return Err(BrokerError::new(format!(
                    "sending to {addr:?}: no credit from the broker in {BROKER_TIMEOUT:?}"
                )));
            }
        };
        match outcome {
            Ok(Ok(Outcome::Accepted(_))) => Ok(Put::Done),
            Ok(Ok(Outcome::Rejected(r))) if not_found(&r) => Ok(Put::NoSuchQueue),
            Ok(Ok(other)) => Err(BrokerError::new(format!(
                "the broker did not accept the message for {addr:?}: {other:?}"
            ))),
            Ok(Err(e)) => {
                self.forget(&addr).await;
                Err(err(&format!("sending to {addr:?}"), e))
            }
            Err(_) => {
                self.forget(&addr).await;
                Err(BrokerError::new(format!(
                    "no outcome for the message to {addr:?} in {OUTCOME_TIMEOUT:?}"
                )))
            }
        }
    }
}

impl Sender for Amqp1Sender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(self.put(to, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_login_names_the_user_and_says_what_to_check_without_the_password() {
        let refused = OpenError::SaslError {
            code: SaslCode::Auth,
            additional_data: None,
        };
        let plain = config::Sasl::Plain {
            username: "guest".into(),
            password: "hunter2".into(),
        };
        let said = open_failed(&refused, &plain);
        assert_eq!(
            said,
            "the broker refused the credentials of user \"guest\" (SASL PLAIN, outcome auth): check the user and password in the uri"
        );
        let anonymous = open_failed(&refused, &config::Sasl::Anonymous);
        assert!(anonymous.contains("anonymous login"), "{anonymous}");
    }

    #[test]
    fn a_certificate_of_an_unknown_authority_says_which_authorities_are_trusted() {
        let unknown = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let said = tls_failed(&unknown, None);
        assert!(
            said.contains("UnknownIssuer")
                && said.ends_with(
                    "not in the system's trust store; name its PEM file in caCertificateFile"
                ),
            "{said}"
        );
        let said = tls_failed(&unknown, Some(std::path::Path::new("ca.pem")));
        assert!(said.ends_with("nor in caCertificateFile ca.pem"), "{said}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("server.key");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let mut warnings = Vec::new();
        let data = serde_json::json!({"uri": "amqps://127.0.0.1", "caCertificateFile": key});
        let config = config::parse(data.as_object().unwrap(), "[0]", &mut warnings).unwrap();
        let e = Amqp1Broker::new(config).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "caCertificateFile {} holds no certificate (a PEM file of \"BEGIN CERTIFICATE\" blocks)",
                key.display()
            )
        );
    }

    #[test]
    fn a_topic_is_addressed_as_rabbitmq_writes_topics_unless_it_is_an_address() {
        assert_eq!(
            address(&Destination::queue("/queue/orders")),
            "/queue/orders"
        );
        assert_eq!(address(&Destination::queue("orders")), "orders");
        assert_eq!(address(&Destination::topic("prices.*")), "/topic/prices.*");
        assert_eq!(
            address(&Destination::topic("/exchange/amq.topic/prices.*")),
            "/exchange/amq.topic/prices.*"
        );
    }
}
