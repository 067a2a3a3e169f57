//! MQTT 3.1.1 and 5 (Mosquitto, EMQX, HiveMQ...) with `rumqttc`.
//!
//! A mapping's `request.destination` is a topic filter (`devices/+/cmd`,
//! `sensors/#`). Each receiver is an MQTT connection of its own with a persistent
//! session (unless the connection says `cleanSession`), subscribed at QoS 2 so every
//! request keeps the QoS it was published with. Several receivers of one filter
//! (`receiveThreads` above 1) subscribe through a shared subscription
//! (`$share/decoy/FILTER`), so they split the requests rather than each answering
//! every one; a mapping may name its own group (`$share/GROUP/FILTER`), which is how
//! several decoy instances split the load.
//!
//! Acknowledgements are decoy's (rumqttc's manual acks): a request's PUBACK (or
//! PUBREC) is sent only once its reply was published and the broker confirmed it, so
//! a request is not lost when decoy, its connection or the broker goes away before
//! answering: the broker sends what was not acknowledged again when the session
//! resumes. MQTT has no negative acknowledgement, so a request that must come again
//! (its reply could not be published) ends its receiver's connection; the runtime
//! reconnects, the session resumes and the broker redelivers.
//!
//! Replies go out on `writeConnectionsToOpen` connections shared by the senders.
//! rumqttc's publish returns once the request is queued, so each connection's event
//! loop pairs publishes with the packet ids it reports in order, then with their
//! PUBACK (QoS 1) or PUBREC (QoS 2: the broker holds the message from then on). A
//! reply at QoS 0 is done once it is queued to its connection: nothing is waited for,
//! as nothing would be learnt (QoS 0 is at most once), and a connection already lost
//! still fails it.
//!
//! Client ids are `CLIENTID-HASH-rN` for receiver `N` (`HASH` from the connection id
//! and the filter, so a resumed session always holds the same subscription) and
//! `CLIENTID-HASH-wN-RANDOM` for senders.

mod client;
pub mod config;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

use self::client::{Client, Event, Raw, Refused};
use self::config::MqttConfig;
use super::config::{Connection, ConnectionKind, MqMapping};
use super::transport::PrivateReplies;
use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, ReplyPoint,
    Sender, Settle,
};

/// The shared-subscription group receivers join unless the mapping names one.
pub const SHARE_GROUP: &str = "decoy";
/// How long a reply waits for the broker's PUBACK or PUBREC. After it the put
/// counts as failed and the request comes again.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// QoS 0 requests a receiver holds before it drops further ones (QoS 1 and 2 are
/// bounded by the broker's in-flight window, `prefetch` on MQTT 5).
const QOS0_BACKLOG: usize = 10_000;

/// The broker connections the MQTT receivers of `mappings` open: one per receiver
/// (the largest `receiveThreads` of each filter of a connection).
pub fn receiver_connections(connections: &[Connection], mappings: &[MqMapping]) -> u64 {
    let mut filters: Vec<(&str, &str, usize)> = Vec::new();
    for m in mappings {
        let on_mqtt = connections
            .iter()
            .any(|c| c.id == m.connection_id && matches!(c.kind, ConnectionKind::Mqtt(_)));
        if !on_mqtt {
            continue;
        }
        match filters
            .iter_mut()
            .find(|f| f.0 == m.connection_id && f.1 == m.queue.name)
        {
            Some(f) => f.2 = f.2.max(m.receive_threads),
            None => filters.push((&m.connection_id, &m.queue.name, m.receive_threads)),
        }
    }
    filters.iter().map(|f| f.2 as u64).sum()
}

/// The subscription a receiver makes for `filter`: a shared one when several
/// receivers take from it.
pub fn subscription(filter: &str, receivers: usize) -> String {
    if filter.starts_with("$share/") || receivers <= 1 {
        filter.to_owned()
    } else {
        format!("$share/{SHARE_GROUP}/{filter}")
    }
}

/// Eight hex digits of a stable hash (FNV-1a: the same across runs and builds).
fn short_hash(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:08x}", h as u32)
}

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// One `mqtt` connection entry: its receivers' connections are made on demand, its
/// senders share `writeConnectionsToOpen` publishers.
pub struct MqttBroker {
    id: String,
    config: MqttConfig,
    shown: String,
    write: Vec<AsyncMutex<Option<Arc<Publisher>>>>,
    /// Receivers (by client id) whose connection the broker ended with a QoS 2
    /// release rumqttc cannot take after a reconnect, and how often in a row; the
    /// second time, the next connect starts a new session (see `receiver`).
    unsolicited: Arc<Mutex<HashMap<String, u32>>>,
    /// Receivers per filter (the largest `receiveThreads` of its mappings).
    receivers: HashMap<String, usize>,
    /// The numbers of a filter's live receivers (the `rN` of their client ids).
    numbers: Arc<Mutex<HashMap<String, std::collections::BTreeSet<usize>>>>,
    /// Receiver client ids already logged as subscribed: each is said once, not at
    /// every reconnect.
    announced: Mutex<HashSet<String>>,
}

/// A receiver's number among its filter's receivers: the lowest free one, given
/// back when the receiver ends. So a filter's receivers are `r0` to `rN-1` whatever
/// other filters the connection serves, and reconnect (and, after a reload, a new
/// broker's receivers take over) with the same client ids: their sessions, and the
/// requests the broker keeps in them, are never left behind under an id no receiver
/// uses any more.
struct Number {
    numbers: Arc<Mutex<HashMap<String, std::collections::BTreeSet<usize>>>>,
    filter: String,
    n: usize,
}

impl Number {
    fn take(
        numbers: &Arc<Mutex<HashMap<String, std::collections::BTreeSet<usize>>>>,
        filter: &str,
    ) -> Number {
        let mut all = numbers.lock().unwrap_or_else(|p| p.into_inner());
        let taken = all.entry(filter.to_owned()).or_default();
        let n = (0..).find(|n| !taken.contains(n)).unwrap_or(0);
        taken.insert(n);
        Number {
            numbers: numbers.clone(),
            filter: filter.to_owned(),
            n,
        }
    }
}

impl Drop for Number {
    fn drop(&mut self) {
        let mut all = self.numbers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(taken) = all.get_mut(&self.filter) {
            taken.remove(&self.n);
            if taken.is_empty() {
                all.remove(&self.filter);
            }
        }
    }
}

impl std::fmt::Debug for MqttBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttBroker")
            .field("uri", &self.shown)
            .finish_non_exhaustive()
    }
}

impl MqttBroker {
    pub fn new(id: &str, config: MqttConfig, mappings: &[MqMapping]) -> MqttBroker {
        let mut receivers: HashMap<String, usize> = HashMap::new();
        for m in mappings.iter().filter(|m| m.connection_id == id) {
            let n = receivers.entry(m.queue.name.clone()).or_default();
            *n = (*n).max(m.receive_threads);
        }
        MqttBroker {
            receivers,
            id: id.to_owned(),
            shown: format!("{} (MQTT {})", config.shown(), config.version),
            write: (0..config.write_connections)
                .map(|_| AsyncMutex::new(None))
                .collect(),
            unsolicited: Arc::default(),
            numbers: Arc::default(),
            announced: Mutex::default(),
            config,
        }
    }

    fn client_id(&self, filter: &str, suffix: &str) -> String {
        format!(
            "{}-{}-{suffix}",
            self.config.client_id,
            short_hash(&[&self.id, filter])
        )
    }

    /// A connected client, within `connectTimeoutMilliseconds`.
    async fn connect(
        &self,
        client_id: String,
        receiver: bool,
        fresh: bool,
    ) -> Result<(Client, client::EventLoop), BrokerError> {
        let failed = |e: &dyn std::fmt::Display| {
            err(
                &format!("cannot connect to {} as {client_id:?}", self.shown),
                e,
            )
        };
        let (c, mut l) = client::new(&self.config, client_id.clone(), receiver, fresh)
            .map_err(|e| failed(&e))?;
        client::connect(&mut l, self.config.connect_timeout)
            .await
            .map_err(|e| failed(&e))?;
        Ok((c, l))
    }

    async fn publisher(&self, index: usize) -> Result<Arc<Publisher>, BrokerError> {
        let mut slot = self.write[index % self.write.len()].lock().await;
        if let Some(p) = slot.as_ref().filter(|p| p.alive.load(Ordering::Relaxed)) {
            return Ok(p.clone());
        }
        let id = self.client_id(
            "",
            &format!(
                "w{}-{:04x}",
                index % self.write.len(),
                rand::random::<u16>()
            ),
        );
        let (client, events) = self.connect(id, false, false).await?;
        let p = Publisher::start(client, events, self.shown.clone());
        *slot = Some(p.clone());
        Ok(p)
    }
}

impl Broker for MqttBroker {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        _index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            let receivers = self.receivers.get(&from.name).copied().unwrap_or(1);
            let filter = subscription(&from.name, receivers);
            let number = Number::take(&self.numbers, &filter);
            let client_id = self.client_id(&filter, &format!("r{}", number.n));
            let fresh = {
                let mut u = self.unsolicited.lock().unwrap_or_else(|p| p.into_inner());
                let again = u.get(&client_id).is_some_and(|n| *n >= 2);
                if again {
                    u.remove(&client_id);
                }
                again
            };
            if fresh {
                tracing::warn!(
                    "{}: receiver {client_id:?} starts a new session: the broker resent the \
                     release of a QoS 2 request it had already been sent (answered), which the \
                     MQTT client cannot take after a reconnect; requests it held unacknowledged \
                     are not redelivered",
                    self.shown
                );
            }
            let (client, mut events) = self.connect(client_id.clone(), true, fresh).await?;
            client
                .subscribe(&filter)
                .await
                .map_err(|e| err(&format!("cannot subscribe to {filter:?}"), e))?;
            // Wait for the broker's answer; a resumed session may deliver requests
            // before it, which are kept.
            let mut early = Vec::new();
            let answer = tokio::time::timeout(self.config.connect_timeout, async {
                loop {
                    match events.poll().await? {
                        Event::SubAck(codes) => return Ok::<_, String>(codes),
                        Event::Publish(p) => early.push(p),
                        _ => {}
                    }
                }
            })
            .await;
            let codes: Vec<Result<u8, String>> = match answer {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(err(&format!("cannot subscribe to {filter:?}"), e)),
                Err(_) => {
                    return Err(BrokerError::new(format!(
                        "cannot subscribe to {filter:?}: no answer from the broker in {:?}",
                        self.config.connect_timeout
                    )));
                }
            };
            if let Some(Err(why)) = codes.into_iter().next() {
                return Err(BrokerError::new(format!(
                    "cannot subscribe to {filter:?}: {why} (may this user read it? does the \
                     broker allow shared subscriptions?)"
                )));
            }
            let first = self
                .announced
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(client_id.clone());
            if first {
                tracing::info!(
                    "{}: receiver {client_id:?} subscribed to {filter:?} (connection {:?}, {})",
                    self.shown,
                    self.id,
                    if self.config.clean_session {
                        "clean session"
                    } else {
                        "persistent session"
                    }
                );
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let shared = Arc::new(ReceiverShared {
                client,
                again: Notify::new(),
                queued: AtomicUsize::new(0),
                filter: from.name.clone(),
            });
            for p in early {
                if p.qos() == 0 {
                    shared.queued.fetch_add(1, Ordering::Relaxed);
                }
                let _ = tx.send(Ok(delivery(&shared, p)));
            }
            let task = tokio::spawn(drive_receiver(
                events,
                tx,
                shared.clone(),
                self.shown.clone(),
                client_id,
                self.unsolicited.clone(),
            ));
            Ok(Box::new(MqttReceiver {
                rx,
                shared,
                _task: AbortOnDrop(task),
                _number: number,
            }) as Box<dyn Receiver>)
        })
    }

    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            let p = self.publisher(index).await?;
            Ok(Box::new(MqttSender { publisher: p }) as Box<dyn Sender>)
        })
    }

    fn how_to_create(&self, queue: &str) -> String {
        format!("MQTT topics need no creating; check that this user may use {queue:?}")
    }

    /// A response topic of decoy's own, `CLIENTID/replies/<random>`, subscribed with
    /// `+` on a clean session (nothing is left on the broker once it ends): each
    /// forwarded request names `.../<token>` as its response topic (MQTT 5), so a
    /// reply is paired by the topic it comes on.
    fn private_replies(&self, index: usize) -> BoxFuture<'_, Result<PrivateReplies, BrokerError>> {
        Box::pin(async move {
            let base = format!(
                "{}/replies/{}",
                self.config.client_id,
                uuid::Uuid::new_v4().simple()
            );
            let mut config = self.config.clone();
            config.clean_session = true;
            config.session_expiry = 0;
            let own = MqttBroker::new(&self.id, config, &[]);
            let rx = own
                .receiver(&Destination::topic(format!("{base}/+")), index)
                .await?;
            Ok((
                ReplyPoint {
                    name: base,
                    per_request: Some('/'),
                },
                rx,
            ))
        })
    }

    /// Each reply waits for its PUBACK or PUBREC on a oneshot: a receiver's window of
    /// requests (`prefetch`, at least 100) may all be answered at once.
    fn in_flight(&self) -> usize {
        usize::from(self.config.prefetch).max(100)
    }

    /// Topics need no creating: a publication nobody subscribes to is accepted.
    fn declare_queue<'a>(&'a self, _queue: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async { Ok(()) })
    }
}

/// What a receiver's deliveries share with its connection's task.
struct ReceiverShared {
    client: Client,
    /// Asks the task to end the connection, so the broker sends what was not
    /// acknowledged again (MQTT's only way to have a message redelivered).
    again: Notify,
    /// QoS 0 requests waiting to be taken.
    queued: AtomicUsize,
    filter: String,
}

/// Aborts a receiver's task (and so closes its connection) when it is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct MqttReceiver {
    rx: mpsc::UnboundedReceiver<Result<Box<dyn Delivery>, BrokerError>>,
    shared: Arc<ReceiverShared>,
    _task: AbortOnDrop,
    /// Dropped after the task (fields drop in order): the number is free once the
    /// connection that used it is closing.
    _number: Number,
}

impl Receiver for MqttReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.rx.recv().await {
                Some(Ok(d)) => {
                    if d.message().qos == Some(0) {
                        self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                    }
                    Ok(Some(d))
                }
                Some(Err(e)) => Err(e),
                None => Err(BrokerError::new("the receiver's connection ended")),
            }
        })
    }
}

fn delivery(shared: &Arc<ReceiverShared>, mut raw: Raw) -> Box<dyn Delivery> {
    let message = raw.take_message();
    Box::new(MqttDelivery {
        shared: shared.clone(),
        raw: Some(raw),
        message,
    })
}

/// Runs a receiver's connection: hands its requests over until the connection
/// fails or a request must come again.
async fn drive_receiver(
    mut events: client::EventLoop,
    tx: mpsc::UnboundedSender<Result<Box<dyn Delivery>, BrokerError>>,
    shared: Arc<ReceiverShared>,
    shown: String,
    client_id: String,
    unsolicited: Arc<Mutex<HashMap<String, u32>>>,
) {
    let mut dropped = 0u64;
    loop {
        let event = tokio::select! {
            e = events.poll() => e,
            () = shared.again.notified() => {
                let _ = tx.send(Err(BrokerError::new(
                    "reconnecting so the broker sends again a request whose reply could not be published",
                )));
                return;
            }
        };
        match event {
            Ok(Event::Publish(p)) => {
                let topic = p.topic();
                if !config::topic_matches(&shared.filter, &topic) {
                    // Left from an earlier subscription of this session.
                    tracing::warn!(
                        "{shown}: {client_id:?} got a message on {topic:?}, outside its filter {:?}; acknowledged and left",
                        shared.filter
                    );
                    let _ = shared.client.ack(&p).await;
                    continue;
                }
                if p.qos() == 0 {
                    if shared.queued.load(Ordering::Relaxed) >= QOS0_BACKLOG {
                        dropped += 1;
                        if dropped.is_power_of_two() {
                            tracing::warn!(
                                "{shown}: {dropped} QoS 0 requests on {:?} dropped: {QOS0_BACKLOG} were already waiting (QoS 0 is at most once; publish requests at QoS 1 to have them all answered)",
                                shared.filter
                            );
                        }
                        continue;
                    }
                    shared.queued.fetch_add(1, Ordering::Relaxed);
                }
                if tx.send(Ok(delivery(&shared, p))).is_err() {
                    return;
                }
            }
            Ok(Event::TakenOver) => {
                let _ = tx.send(Err(BrokerError::new(format!(
                    "another client connected with the client id {client_id:?} and the broker \
                     ended this one (a reload of the MQ files does this once, as the new \
                     receivers take over the sessions; if it goes on, another decoy serves the \
                     same files with the same clientId: give each instance its own)"
                ))));
                return;
            }
            Ok(_) => {}
            Err(e) => {
                if e.to_ascii_lowercase().contains("unsolicited") {
                    let mut u = unsolicited.lock().unwrap_or_else(|p| p.into_inner());
                    *u.entry(client_id.clone()).or_default() += 1;
                }
                let _ = tx.send(Err(BrokerError::new(format!("connection lost: {e}"))));
                return;
            }
        }
    }
}

struct MqttDelivery {
    shared: Arc<ReceiverShared>,
    /// `None` once settled. Its payload and properties were moved to `message`: what
    /// an acknowledgement needs is its packet id and QoS.
    raw: Option<Raw>,
    message: Message,
}

impl MqttDelivery {
    /// Has the broker send it again: by ending the connection (its session keeps it).
    fn again(&self, raw: &Raw) {
        if raw.qos() == 0 {
            tracing::warn!(
                "a QoS 0 request on {} could not be answered and cannot be redelivered (QoS 0 is at most once)",
                self.shared.filter
            );
        } else {
            self.shared.again.notify_one();
        }
    }
}

/// A delivery dropped unsettled (its handling panicked) is redelivered.
impl Drop for MqttDelivery {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            tracing::warn!(
                "a request on {} was dropped before it was settled; it will be delivered again",
                self.shared.filter
            );
            self.again(&raw);
        }
    }
}

impl Delivery for MqttDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.shared.filter
    }

    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        let raw = self.raw.take();
        Box::pin(async move {
            let Some(raw) = raw else { return Ok(()) };
            match how {
                // MQTT has no reject: done is done.
                Settle::Ack | Settle::Reject => self
                    .shared
                    .client
                    .ack(&raw)
                    .await
                    .map_err(|e| err("acknowledging a request", e)),
                Settle::Requeue => {
                    self.again(&raw);
                    Ok(())
                }
            }
        })
    }
}

/// Publishes that went out, waiting for the broker's confirmation.
#[derive(Default)]
struct Waiting {
    /// Queued to the client, in order, not yet given a packet id by the event loop
    /// (QoS 1 and 2 only: a QoS 0 publish waits for nothing, and the event loop
    /// reports it with packet id 0, which pairs with no waiter).
    queued: VecDeque<oneshot::Sender<Result<bool, Refused>>>,
    /// Sent with a packet id, waiting for its PUBACK or PUBREC.
    sent: HashMap<u16, oneshot::Sender<Result<bool, Refused>>>,
    /// Set when the connection failed: later publishes fail at once.
    failed: Option<String>,
}

/// One write connection, shared by the senders that use its slot.
struct Publisher {
    client: Client,
    waiting: Arc<Mutex<Waiting>>,
    /// Held while a QoS 1 or 2 publish is queued, so those reach the event loop in
    /// the order their waiters were queued.
    order: AsyncMutex<()>,
    alive: Arc<AtomicBool>,
    task: JoinHandle<()>,
    shown: String,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(w: &Mutex<Waiting>) -> std::sync::MutexGuard<'_, Waiting> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

impl Publisher {
    fn start(client: Client, mut events: client::EventLoop, shown: String) -> Arc<Publisher> {
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let alive = Arc::new(AtomicBool::new(true));
        let (w, a) = (waiting.clone(), alive.clone());
        let task = tokio::spawn(async move {
            let reason = loop {
                match events.poll().await {
                    // A QoS 0 publish (packet id 0) has no waiter.
                    Ok(Event::Sent(0)) => {}
                    Ok(Event::Sent(pkid)) => {
                        let mut w = lock(&w);
                        if let Some(tx) = w.queued.pop_front() {
                            w.sent.insert(pkid, tx);
                        }
                    }
                    Ok(Event::Confirmed(pkid, r)) => {
                        if let Some(tx) = lock(&w).sent.remove(&pkid) {
                            let _ = tx.send(r);
                        }
                    }
                    Ok(Event::TakenOver) => break "another client took its client id".to_owned(),
                    Ok(_) => {}
                    Err(e) => break e,
                }
            };
            a.store(false, Ordering::Relaxed);
            let mut w = lock(&w);
            w.failed = Some(reason);
            // Dropping the waiters fails their publishes.
            w.queued.clear();
            w.sent.clear();
        });
        Arc::new(Publisher {
            client,
            waiting,
            order: AsyncMutex::new(()),
            alive,
            task,
            shown,
        })
    }

    async fn publish(&self, topic: &str, message: &Message) -> Result<Put, BrokerError> {
        // A topic rendered from a request (a template naming a user property) may
        // hold a wildcard or be empty: the broker would end the connection for it,
        // every time.
        if let Err(e) = config::check_topic(topic, false, "the topic") {
            return Err(BrokerError::refused(format!(
                "cannot publish on {topic:?}: {e}"
            )));
        }
        if message.qos == Some(0) {
            if let Some(f) = &lock(&self.waiting).failed {
                return Err(err("the connection for replies was lost", f));
            }
            self.client
                .publish(topic, message)
                .await
                .map_err(|e| err(&format!("cannot publish on {topic:?}"), e))?;
            return Ok(Put::Done);
        }
        let (tx, rx) = oneshot::channel();
        {
            let _order = self.order.lock().await;
            {
                let mut w = lock(&self.waiting);
                if let Some(f) = &w.failed {
                    return Err(err("the connection for replies was lost", f));
                }
                w.queued.push_back(tx);
            }
            if let Err(e) = self.client.publish(topic, message).await {
                lock(&self.waiting).queued.pop_back();
                return Err(err(&format!("cannot publish on {topic:?}"), e));
            }
        }
        match tokio::time::timeout(CONFIRM_TIMEOUT, rx).await {
            Ok(Ok(Ok(no_subscribers))) => {
                if no_subscribers {
                    tracing::debug!(
                        "{}: published on {topic:?}, which no client subscribes to",
                        self.shown
                    );
                }
                Ok(Put::Done)
            }
            Ok(Ok(Err(refused))) if refused.lasting => {
                tracing::warn!(
                    "{}: the broker refused a message on {topic:?}: {}",
                    self.shown,
                    refused.reason
                );
                Ok(Put::NoSuchQueue)
            }
            Ok(Ok(Err(refused))) => Err(err(&format!("publishing on {topic:?}"), refused.reason)),
            Ok(Err(_)) => {
                let why = lock(&self.waiting)
                    .failed
                    .clone()
                    .unwrap_or_else(|| "the connection ended".into());
                Err(err(&format!("publishing on {topic:?}"), why))
            }
            Err(_) => {
                // The connection is no longer trusted: the next reply opens another.
                self.alive.store(false, Ordering::Relaxed);
                Err(BrokerError::new(format!(
                    "publishing on {topic:?}: no confirmation from the broker in {CONFIRM_TIMEOUT:?}"
                )))
            }
        }
    }
}

struct MqttSender {
    publisher: Arc<Publisher>,
}

impl Sender for MqttSender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(async move { self.publisher.publish(&to.name, &message).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_share_their_subscription_and_keep_a_named_group() {
        assert_eq!(
            subscription("devices/+/cmd", 2),
            "$share/decoy/devices/+/cmd"
        );
        assert_eq!(subscription("devices/+/cmd", 1), "devices/+/cmd");
        assert_eq!(subscription("$share/g/a/#", 1), "$share/g/a/#");
    }

    #[test]
    fn receivers_are_numbered_within_their_filter_and_numbers_are_reused() {
        let numbers = Arc::default();
        let (a0, a1) = (Number::take(&numbers, "a/+"), Number::take(&numbers, "a/+"));
        let z0 = Number::take(&numbers, "z/+");
        assert_eq!(
            (a0.n, a1.n, z0.n),
            (0, 1, 0),
            "another filter does not shift them"
        );
        drop(a0);
        let again = Number::take(&numbers, "a/+");
        assert_eq!(again.n, 0, "a reconnecting receiver gets its number back");
        drop((a1, again, z0));
        assert!(numbers.lock().unwrap().is_empty());
    }

    #[test]
    fn client_ids_are_stable_per_connection_and_filter() {
        assert_eq!(short_hash(&["c", "a/b"]), short_hash(&["c", "a/b"]));
        assert_ne!(short_hash(&["c", "a/b"]), short_hash(&["c", "a/c"]));
        assert_ne!(short_hash(&["ca", "/b"]), short_hash(&["c", "a/b"]));
    }
}
