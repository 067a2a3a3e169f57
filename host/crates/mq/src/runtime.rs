//! Serving MQ mappings: receivers, and the replies each runs.
//!
//! For each queue that mappings listen on, `receiveThreads` receiver tasks take
//! messages from the broker (dealt over the MQ side's threads, [`MqThreads`]), and the queue has `sendThreads` senders (lanes) that
//! put replies (the largest value among the queue's mappings; tasks and lanes, not
//! OS threads). A receiver matches a message against the queue's mappings in
//! priority order and runs its reply on its own task, beside its next receive
//! ([`Replies`]): the reply is put through one of the queue's lanes, taken in turn,
//! and its request settled. No task is spawned and no channel crossed per message
//! (each of those was a wake-up, and on a busy machine a context switch, per reply).
//! A receiver holds at most 256 replies under way before it takes no further
//! message, so slow puts push back on receiving (and the broker's prefetch limit
//! then holds further messages). A delayed reply waits on a timer, not a thread. A
//! lane keeps several replies waiting for their confirms at once (8 on RabbitMQ and
//! IBM MQ, more on the transports whose clients wait for confirms cheaply:
//! [`Broker::in_flight`]), so a broker round trip does not cap a queue's throughput.
//!
//! Delivery is at-least-once: a request is acknowledged only after its reply was
//! confirmed by the broker. A failed put puts the request back after the lane's
//! back-off (so a reply that keeps failing is not tried as fast as the broker can
//! redeliver); a lost connection is re-established with backoff (1/10 s doubling to
//! 5 s, with jitter) and the broker redelivers what was not acknowledged. A reply
//! that could never be sent as it is (no such queue, a rendered destination the
//! protocol does not allow) is dropped, said and listed by `/__admin/problems`, and
//! its request acknowledged. Failures that go on are logged once and then
//! summarised ([`Trouble`]); a request queue that does not exist is said once, with
//! how to create it. An unmatched message goes to the connection's unmatched
//! queue (through the same confirmed path; the queue is declared when the broker says
//! it does not exist, and when it cannot be, the message goes back to its queue after
//! a pause) or is rejected, never dropped.
//!
//! Tasks are supervised, so a bug cannot stop a queue for good. A message's handling
//! (matching, building the reply, its delay, transformer plugins) runs under
//! `catch_unwind`: a panic there sends that message the unmatched way. A receiver
//! task that panics elsewhere is started again after a pause (backoff as for
//! reconnects), its replies under way going on meanwhile; a lane whose sender panics
//! while it opens waits the same pause; a reply whose put panicked is dropped
//! unsettled, which puts its request back on its queue. Each panic is counted
//! (`decoy_mq_panics_total`) and listed by `/__admin/problems` ([`Incidents`]).
//!
//! A mapping's webhooks (`serveEventListeners`) are handed to the [`WebhookSink`] once
//! its reply was confirmed, with the request message as their templates' request.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt as _};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use super::config::{Connection, Correlation, MqMapping, Unmatched};
use super::incidents::{Incidents, Panics, panic_message};
use super::retry::{BACKOFF_MAX, BACKOFF_START, Backoff, Trouble, sleep_or_stop};
use super::threads::MqThreads;
use super::transport::{
    BoxFuture, Broker, Delivery, Destination, Message, Put, Receiver, Sender, Settle,
};
use decoy_core::metrics::{MappingStats, TransportMetrics};
use decoy_core::serve::Outcomes;
use decoy_core::webhooks::{Fired, WebhookSink};
use decoy_matching::pattern::Actual;

/// Replies a receiver has under way (being put, waiting for a lane or its confirm)
/// before it takes no further message.
const UNDER_WAY: usize = 256;
/// How long shutdown waits for in-flight replies; past it, what is left is stopped
/// (connects under way included) and the broker redelivers its requests.
const DRAIN: Duration = Duration::from_secs(10);
/// How long an unmatched message whose queue neither exists nor can be declared is
/// held before it goes back to its queue (so it does not circle at full speed).
const UNMATCHED_RETRY: Duration = Duration::from_secs(1);
/// A task that ran this long before panicking restarts after the shortest pause.
const STABLE: Duration = Duration::from_secs(60);

/// The mappings listening on one queue, best first.
#[derive(Debug)]
struct QueueService {
    queue: Destination,
    mappings: Vec<(Arc<MqMapping>, Arc<MappingStats>)>,
    unmatched: Unmatched,
    /// The serve step's record and hand-off: this transport's counters, and where
    /// mappings' webhooks go (`None`: they are not sent).
    outcomes: Outcomes<Arc<dyn WebhookSink>>,
    /// This transport's panicked tasks (`decoy_mq_panics_total`).
    panics: Arc<Panics>,
    incidents: Arc<Incidents>,
    /// What keeps failing on the queue's connection (shared by its queues).
    trouble: Arc<Trouble>,
}

/// Which task of a queue panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Receiver,
    Sender,
}

impl QueueService {
    /// Counts and reports a panic caught in one of this queue's tasks.
    fn panicked(&self, task: Task, panic: &(dyn std::any::Any + Send), outcome: &str) {
        let detail = panic_message(panic);
        let (name, counter) = match task {
            Task::Receiver => ("receiver", &self.panics.receiver),
            Task::Sender => ("sender", &self.panics.sender),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            "a {name} of {} panicked: {detail:?}; {outcome} (a bug in decoy: please report it)",
            self.queue
        );
        if let Some((m, _)) = self.mappings.first() {
            self.incidents.record(
                m,
                format!("a {name} of queue {} panicked", self.queue),
                outcome,
                &detail,
            );
        }
    }

    fn find(&self, m: &Message) -> Option<&(Arc<MqMapping>, Arc<MappingStats>)> {
        let text = String::from_utf8_lossy(&m.body);
        let body = Actual::body(&text, &m.body);
        self.mappings.iter().find(|(mapping, _)| {
            mapping.body.as_ref().is_none_or(|p| p.matches(&body))
                && mapping.properties.iter().all(|(name, p)| {
                    let value = m
                        .properties
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.as_str());
                    p.matches_opt(value.map(Actual::new).as_ref())
                })
        })
    }
}

/// The reply for `request` from `mapping`.
pub fn reply_for(mapping: &MqMapping, request: &Message) -> Message {
    let correlation_id = match mapping.correlation {
        Correlation::MsgIdToCorrelId => request
            .message_id
            .clone()
            .or_else(|| request.correlation_id.clone()),
        Correlation::CopyCorrelId => request.correlation_id.clone(),
        Correlation::CorrelIdOrMsgId => request
            .correlation_id
            .clone()
            .or_else(|| request.message_id.clone()),
    };
    Message {
        body: mapping.response.body.clone(),
        properties: mapping.response.properties.clone(),
        message_id: None,
        correlation_id,
        reply_to: None,
        reply_to_manager: None,
        format: Some(mapping.response.format.clone()),
        message_type: Some("reply".into()),
        persistent: request.persistent,
        topic: None,
        qos: request.qos,
        retain: mapping.response.retain,
    }
}

/// The request message as plugins (and webhook templates) see it.
fn plugin_request(mapping: &MqMapping, request: &Message) -> decoy_plugin_host::PluginRequest {
    let id_text = |b: &Option<Vec<u8>>| {
        b.as_ref().map(|b| match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => b.iter().map(|x| format!("{x:02X}")).collect(),
        })
    };
    message_request(
        request.topic.as_deref().unwrap_or(&mapping.queue.name),
        request.reply_to.as_deref(),
        id_text(&request.message_id).as_deref(),
        id_text(&request.correlation_id).as_deref(),
        request.properties.clone(),
        &request.body,
    )
}

/// The plugin's view of a message (it has no client address).
pub fn message_request(
    destination: &str,
    reply_to: Option<&str>,
    message_id: Option<&str>,
    correlation_id: Option<&str>,
    properties: Vec<(String, String)>,
    body: &[u8],
) -> decoy_plugin_host::PluginRequest {
    decoy_plugin_host::PluginRequest::from(decoy_plugin_host::wit::Request::Mq(
        decoy_plugin_host::wit::MqMessage {
            destination: destination.to_owned(),
            reply_to: reply_to.map(str::to_owned),
            message_id: message_id.map(str::to_owned),
            correlation_id: correlation_id.map(str::to_owned),
            properties,
            body: body.to_vec(),
        },
    ))
}

/// Runs the mapping's transformer plugins over `reply`: they may change its body,
/// properties and destination, and add to its delay.
fn transform_reply(
    mapping: &MqMapping,
    request: &Message,
    reply: &mut Message,
    to: &mut Destination,
    delay: &mut Duration,
) -> Result<(), decoy_plugin_host::PluginFailure> {
    use crate::config::reply_record;
    use decoy_plugin_host::wit;
    let t = &mapping.response.transformers;
    let ctx = t.context(&mapping.id, mapping.name.as_deref());
    let req = plugin_request(mapping, request);
    let response = reply_record(&reply.body, reply.properties.clone());
    // The mapping's own body and properties (`reply_for`) are keyed since it loaded.
    let own = reply.body.as_ptr() == mapping.response.body.as_ptr()
        && reply.body.len() == mapping.response.body.len()
        && reply.properties == mapping.response.properties;
    let key = mapping.response.reply_key.filter(|_| own);
    let r = t.run(ctx, &req, &response, key, |r| match r {
        wit::Response::Mq(r) => Ok(r),
        wit::Response::Http(_) => Err("it returned an HTTP response for a message".into()),
    })?;
    reply.body = bytes::Bytes::from(r.body);
    reply.properties = r.properties;
    if let Some(d) = r.destination.filter(|d| !d.is_empty()) {
        *to = Destination::queue(d);
    } else if let Some(d) = mapping
        .response
        .destination
        .as_ref()
        .filter(|d| d.name.contains("{{"))
    {
        // A templated destination (`devices/{{...}}/ack`) is rendered by the same
        // transformers as the body, with the name as the body to render, under a
        // context of its own so that neither prepares again for the other.
        let name = reply_record(d.name.as_bytes(), Vec::new());
        let r = t.run(
            t.destination_context(&mapping.id, mapping.name.as_deref()),
            &req,
            &name,
            mapping.response.destination_key,
            |r| match r {
                wit::Response::Mq(r) => Ok(r),
                wit::Response::Http(_) => Err("it returned an HTTP response for a message".into()),
            },
        )?;
        let rendered = String::from_utf8_lossy(&r.body).trim().to_owned();
        if rendered.is_empty() {
            return Err(decoy_plugin_host::PluginFailure {
                plugin: "transformers".into(),
                reason: format!("response.destination {:?} rendered empty", d.name),
                loading: false,
            });
        }
        *to = Destination {
            name: rendered,
            topic: d.topic,
        };
    }
    if let Some(ms) = r.delay_ms {
        *delay = decoy_spec::plan::add_delay(*delay, Duration::from_millis(u64::from(ms)));
    }
    Ok(())
}

/// A reply on its way.
struct Job {
    delivery: Box<dyn Delivery>,
    to: Destination,
    reply: Message,
    read_at: Instant,
    delay: Duration,
    /// `None` for an unmatched message being moved to the unmatched queue.
    stats: Option<Arc<MappingStats>>,
    /// The mapping's webhooks, fired once the reply is confirmed.
    webhooks: Option<Box<Fired>>,
}

/// The running MQ side. Dropping it does not stop it; call [`MqRuntime::shutdown`].
#[derive(Debug)]
pub struct MqRuntime {
    /// One per receiver: a receiver looks at its own on every message, and a shared
    /// one would be a lock all receivers take.
    stops: Vec<watch::Sender<bool>>,
    receivers: Vec<JoinHandle<()>>,
    /// What the receivers run on; dropped last, ending what is left on them.
    _threads: MqThreads,
}

impl MqRuntime {
    /// Starts serving `mappings` through `brokers` (one per connection, same order);
    /// what goes wrong while serving is kept in `incidents`.
    pub fn start(
        connections: &[Connection],
        brokers: Vec<Arc<dyn Broker>>,
        mappings: Vec<(Arc<MqMapping>, Arc<MappingStats>)>,
        metrics_for: impl Fn(&Connection) -> (Arc<TransportMetrics>, Arc<Panics>),
        webhooks: Option<Arc<dyn WebhookSink>>,
        incidents: Arc<Incidents>,
        threads: MqThreads,
    ) -> MqRuntime {
        let mut stops = Vec::new();
        let mut receivers = Vec::new();
        for (conn, broker) in connections.iter().zip(brokers) {
            let trouble = Arc::new(Trouble::new(&broker.describe(), &conn.id));
            // Group by queue, keeping file order; then best first: lowest priority
            // number, and among equals the mapping added last (as on the HTTP side).
            let mut queues: Vec<QueueService> = Vec::new();
            let (metrics, panics) = metrics_for(conn);
            for (m, s) in mappings.iter().filter(|(m, _)| m.connection_id == conn.id) {
                match queues.iter_mut().find(|q| q.queue == m.queue) {
                    Some(q) => q.mappings.push((m.clone(), s.clone())),
                    None => queues.push(QueueService {
                        queue: m.queue.clone(),
                        mappings: vec![(m.clone(), s.clone())],
                        unmatched: conn.unmatched.clone(),
                        outcomes: Outcomes::new(metrics.clone(), webhooks.clone()),
                        panics: panics.clone(),
                        incidents: incidents.clone(),
                        trouble: trouble.clone(),
                    }),
                }
            }
            // Receivers and senders are numbered across the whole connection, so they
            // spread over its read and write pools (not only over one queue's tasks).
            let (mut recv_n, mut send_n) = (0, 0);
            for mut q in queues {
                q.mappings.reverse();
                q.mappings.sort_by_key(|(m, _)| m.priority);
                let n_recv = q
                    .mappings
                    .iter()
                    .map(|(m, _)| m.receive_threads)
                    .max()
                    .unwrap_or(1);
                let n_send = q
                    .mappings
                    .iter()
                    .map(|(m, _)| m.send_threads)
                    .max()
                    .unwrap_or(1);
                let q = Arc::new(q);
                let lanes: Arc<[Arc<Lane>]> = (0..n_send.max(1))
                    .map(|_| {
                        send_n += 1;
                        Arc::new(Lane::new(send_n - 1, broker.in_flight()))
                    })
                    .collect();
                for _ in 0..n_recv {
                    let (stop, stop_rx) = watch::channel(false);
                    stops.push(stop);
                    // Dealt over the threads across connections and queues.
                    receivers.push(threads.spawn(
                        receivers.len(),
                        supervise_receiver(
                            broker.clone(),
                            q.clone(),
                            recv_n,
                            lanes.clone(),
                            stop_rx,
                        ),
                    ));
                    recv_n += 1;
                }
            }
        }
        MqRuntime {
            stops,
            receivers,
            _threads: threads,
        }
    }

    /// Stops receiving, lets replies already on their way be sent, and returns within
    /// 10 s whatever the brokers do: what is still running then (a reply waiting for
    /// a broker that does not answer, a connect) is stopped, and the broker redelivers
    /// the requests that were not acknowledged.
    pub async fn shutdown(mut self) {
        for stop in &self.stops {
            let _ = stop.send(true);
        }
        let drain = async {
            for t in self.receivers.iter_mut() {
                let _ = t.await;
            }
        };
        if tokio::time::timeout(DRAIN, drain).await.is_err() {
            for t in &self.receivers {
                t.abort();
            }
            tracing::warn!(
                "MQ replies still pending after {DRAIN:?} were abandoned; the broker will redeliver their requests"
            );
        }
    }
}

/// One of a queue's senders (`sendThreads`): a broker sender, opened when a reply
/// first needs it and again after a put failed, and the window of replies that may
/// wait for their confirms on it at once ([`Broker::in_flight`]). The queue's
/// receivers take its lanes in turn for their replies.
struct Lane {
    /// Numbered across the connection, so lanes spread over its write pool.
    index: usize,
    window: Semaphore,
    /// The open sender. Locked only to clone it, never across an await.
    current: std::sync::Mutex<Option<Arc<dyn Sender>>>,
    /// Set by a reply whose put failed: open another sender before the next one.
    broken: AtomicBool,
    /// The pause before a request whose reply could not be put goes back to its
    /// queue (so a reply that keeps failing does not go round as fast as the broker
    /// redelivers), and whether puts are failing (said once they work again).
    put_backoff: std::sync::Mutex<Backoff>,
    put_failing: AtomicBool,
    /// Held while a sender is opened, so a lane opens one at a time.
    opening: tokio::sync::Mutex<Opening>,
}

/// How a lane's sender is opened again after failures and panics.
struct Opening {
    backoff: Backoff,
    /// After a panic while opening: no sender before this instant.
    resume_at: Option<Instant>,
    /// The pause after the next panic, doubling; back to the shortest when the last
    /// panic was over [`STABLE`] ago.
    pause: Duration,
    panicked_at: Option<Instant>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lane {
    fn new(index: usize, in_flight: usize) -> Lane {
        Lane {
            index,
            window: Semaphore::new(in_flight.max(1)),
            current: std::sync::Mutex::new(None),
            broken: AtomicBool::new(false),
            put_backoff: std::sync::Mutex::new(Backoff::default()),
            put_failing: AtomicBool::new(false),
            opening: tokio::sync::Mutex::new(Opening {
                backoff: Backoff::default(),
                resume_at: None,
                pause: BACKOFF_START,
                panicked_at: None,
            }),
        }
    }

    /// The lane's sender, opened (with the back-off) when it has none. `None` when
    /// opening it panicked: the caller drops its reply, which puts the request back
    /// on its queue, and the lane pauses before it tries again.
    async fn sender(&self, broker: &dyn Broker, q: &QueueService) -> Option<Arc<dyn Sender>> {
        if self.broken.swap(false, Ordering::Relaxed) {
            *lock(&self.current) = None;
        }
        if let Some(s) = lock(&self.current).clone() {
            return Some(s);
        }
        let mut o = self.opening.lock().await;
        if let Some(at) = o.resume_at.take() {
            tokio::time::sleep(at.saturating_duration_since(Instant::now())).await;
        }
        loop {
            if let Some(s) = lock(&self.current).clone() {
                return Some(s);
            }
            // A reply waits for the broker, it is not dropped.
            match AssertUnwindSafe(broker.sender(self.index))
                .catch_unwind()
                .await
            {
                Ok(Ok(s)) => {
                    o.backoff.reset();
                    q.trouble.ok("sending");
                    *lock(&self.current) = Some(Arc::from(s));
                }
                Ok(Err(e)) => {
                    q.trouble.failed("sending", &e, None);
                    let pause = o.backoff.next_pause();
                    tokio::time::sleep(pause).await;
                }
                Err(panic) => {
                    if o.panicked_at.is_some_and(|t| t.elapsed() > STABLE) {
                        o.pause = BACKOFF_START;
                    }
                    q.panicked(
                        Task::Sender,
                        &*panic,
                        &format!(
                            "it was restarted after {:?}; the request it held went back to its queue",
                            o.pause
                        ),
                    );
                    let now = Instant::now();
                    o.resume_at = Some(now + o.pause);
                    o.panicked_at = Some(now);
                    o.pause = (o.pause * 2).min(BACKOFF_MAX);
                    return None;
                }
            }
        }
    }
}

/// The replies a receiver has under way. They run on the receiver's task, polled
/// beside its next receive: a reply costs no task of its own and no hand-off, and
/// the request's receiver stays open until its reply is settled.
#[derive(Default)]
struct Replies {
    /// Replies being put and settled; at most [`UNDER_WAY`] before the receiver
    /// waits, so slow puts push back on receiving (and the broker's prefetch limit
    /// then holds further messages).
    now: FuturesUnordered<BoxFuture<'static, ()>>,
    /// Delayed replies waiting on their timers (then put as the others): bounded by
    /// the broker's prefetch only, so thousands of them cost memory only.
    timers: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl Replies {
    /// Runs what is ready; wakes the task when more is.
    fn poll(&mut self, cx: &mut std::task::Context<'_>) {
        while let Poll::Ready(Some(())) = self.now.poll_next_unpin(cx) {}
        while let Poll::Ready(Some(())) = self.timers.poll_next_unpin(cx) {}
    }

    fn is_empty(&self) -> bool {
        self.now.is_empty() && self.timers.is_empty()
    }

    /// Runs the replies until every one is done.
    async fn drain(&mut self) {
        std::future::poll_fn(|cx| {
            self.poll(cx);
            if self.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Runs the replies, for ever: for a `select!` beside what the receiver waits
    /// for (a connect, a pause).
    async fn forever(&mut self) {
        std::future::poll_fn(|cx| {
            self.poll(cx);
            Poll::<()>::Pending
        })
        .await
    }

    /// Runs the replies until there is room for one more.
    async fn room(&mut self) {
        std::future::poll_fn(|cx| {
            self.poll(cx);
            if self.now.len() < UNDER_WAY {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Starts `reply`; a panic in it is counted as a sender's, and its request,
    /// dropped unsettled, goes back to its queue.
    fn push(&mut self, q: &Arc<QueueService>, delayed: bool, reply: BoxFuture<'static, ()>) {
        let q = q.clone();
        let guarded = Box::pin(async move {
            if let Err(panic) = AssertUnwindSafe(reply).catch_unwind().await {
                q.panicked(Task::Sender, &*panic, "its request went back to its queue");
            }
        });
        if delayed {
            self.timers.push(guarded);
        } else {
            self.now.push(guarded);
        }
    }
}

/// Runs a receiver, and runs it again after a pause when it panics. Its replies
/// under way are kept across the restart.
async fn supervise_receiver(
    broker: Arc<dyn Broker>,
    q: Arc<QueueService>,
    index: usize,
    lanes: Arc<[Arc<Lane>]>,
    mut stop: watch::Receiver<bool>,
) {
    let mut replies = Replies::default();
    let mut pause = BACKOFF_START;
    loop {
        let started = Instant::now();
        let run = receive_loop(&broker, &q, index, &lanes, stop.clone(), &mut replies);
        let Err(panic) = AssertUnwindSafe(run).catch_unwind().await else {
            break;
        };
        if started.elapsed() > STABLE {
            pause = BACKOFF_START;
        }
        q.panicked(
            Task::Receiver,
            &*panic,
            &format!("it was restarted after {pause:?}"),
        );
        let stopped = tokio::select! {
            s = sleep_or_stop(pause, &mut stop) => s,
            () = replies.forever() => false,
        };
        if stopped {
            break;
        }
        pause = (pause * 2).min(BACKOFF_MAX);
    }
    // Stopping: the replies under way still get their confirms and acks.
    replies.drain().await;
}

/// How serving one receiver ended.
enum Served {
    Stopped,
    /// The broker closed the receiver (shutdown).
    Closed,
    /// The connection was lost: open another receiver.
    Lost(super::transport::BrokerError),
}

async fn receive_loop(
    broker: &Arc<dyn Broker>,
    q: &Arc<QueueService>,
    index: usize,
    lanes: &[Arc<Lane>],
    mut stop: watch::Receiver<bool>,
    replies: &mut Replies,
) {
    let mut backoff = Backoff::default();
    let mut turn = index;
    let receiving = format!("receiving from {}", q.queue);
    // "stream missing for orders.new" on NATS JetStream (the stream, not the
    // subject, is what is missing).
    let missing = format!("{} missing for {}", broker.listened_kind(), q.queue);
    loop {
        if *stop.borrow() {
            return;
        }
        // Stopping ends a connect under way too (dropping it closes its socket).
        let opened = tokio::select! {
            r = broker.receiver(&q.queue, index) => r,
            _ = stop.wait_for(|s| *s) => return,
            () = replies.forever() => continue,
        };
        let mut rx = match opened {
            Ok(r) => {
                backoff.reset();
                q.trouble.ok(&receiving);
                q.trouble.ok(&missing);
                r
            }
            Err(e) => {
                match e.missing() {
                    Some(name) => {
                        let line = missing_queue_line(&**broker, q, name);
                        q.trouble.failed(&missing, &e, Some(line));
                    }
                    None => q.trouble.failed(&receiving, &e, None),
                }
                let stopped = tokio::select! {
                    s = sleep_or_stop(backoff.next_pause(), &mut stop) => s,
                    () = replies.forever() => false,
                };
                if stopped {
                    return;
                }
                continue;
            }
        };
        match serve(&mut *rx, broker, q, lanes, &mut turn, &mut stop, replies).await {
            Served::Stopped | Served::Closed => {
                // Settled through the receiver, which stays open meanwhile.
                replies.drain().await;
                return;
            }
            Served::Lost(e) => {
                // The consumer is lost, not a message: what was delivered and not
                // yet acknowledged goes back to the queue (at-least-once).
                q.trouble.failed(&receiving, &e, None);
            }
        }
    }
}

/// Takes messages from `rx` and starts their replies, until the receiver fails or
/// the runtime stops.
async fn serve(
    rx: &mut dyn Receiver,
    broker: &Arc<dyn Broker>,
    q: &Arc<QueueService>,
    lanes: &[Arc<Lane>],
    turn: &mut usize,
    stop: &mut watch::Receiver<bool>,
    replies: &mut Replies,
) -> Served {
    let stopped = stop.wait_for(|s| *s);
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => return Served::Stopped,
            () = replies.room() => {}
        }
        let mut next = rx.next();
        let got = std::future::poll_fn(|cx| {
            if stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            replies.poll(cx);
            next.as_mut().poll(cx).map(Some)
        })
        .await;
        drop(next);
        let delivery = match got {
            None => return Served::Stopped,
            Some(Ok(Some(d))) => d,
            Some(Ok(None)) => return Served::Closed,
            Some(Err(e)) => return Served::Lost(e),
        };
        match route(q, delivery) {
            Routed::Reply(job) => {
                *turn = turn.wrapping_add(1);
                let lane = lanes[*turn % lanes.len()].clone();
                let delayed = !job.delay.is_zero();
                let reply = answer(lane, broker.clone(), q.clone(), job);
                replies.push(q, delayed, Box::pin(reply));
            }
            Routed::Reject(delivery) => {
                let queue = q.queue.clone();
                replies.push(
                    q,
                    false,
                    Box::pin(async move {
                        if let Err(e) = delivery.settle(Settle::Reject).await {
                            tracing::warn!("could not reject a message on {queue}: {e}");
                        }
                    }),
                );
            }
        }
    }
}

/// Waits for a reply's delay, its lane's window and sender, then puts it and
/// settles its request.
async fn answer(lane: Arc<Lane>, broker: Arc<dyn Broker>, q: Arc<QueueService>, job: Job) {
    if !job.delay.is_zero() {
        // A timer, not a thread: thousands of delayed replies cost memory only.
        tokio::time::sleep(job.delay).await;
    }
    let Ok(_permit) = lane.window.acquire().await else {
        return;
    };
    let Some(s) = lane.sender(&*broker, &q).await else {
        return;
    };
    deliver(&*s, &*broker, &q, job, &lane).await;
}

/// The one line said when a queue mappings listen on does not exist: which queue,
/// on which connection, for which mappings, and how to create it.
fn missing_queue_line(broker: &dyn Broker, q: &QueueService, name: &str) -> String {
    let mappings: Vec<String> = q.mappings.iter().map(|(m, _)| m.label()).collect();
    let (noun, verb) = if mappings.len() == 1 {
        ("mapping", "listens")
    } else {
        ("mappings", "listen")
    };
    format!(
        "{} {name:?} does not exist on {} ({}): {noun} {} {verb} on it. To serve it, {}; \
         decoy checks again every few seconds and starts receiving once it exists",
        broker.listened_kind(),
        broker.describe(),
        q.trouble.connection(),
        mappings.join(", "),
        broker.how_to_create(name)
    )
}

/// What a received message gets, decided from the message alone.
enum Decision {
    Reply {
        reply: Message,
        to: Destination,
        delay: Duration,
        stats: Arc<MappingStats>,
        /// The mapping's webhooks, sent once the reply is confirmed.
        webhooks: Option<Box<Fired>>,
    },
    /// The unmatched queue, or a reject.
    Unmatched,
}

/// Matches `message` and builds its reply (with its delay and transformer plugins).
/// Synchronous and without the delivery, so a panic in it is caught per message.
fn decide(q: &QueueService, message: &Message) -> Decision {
    #[cfg(test)]
    if message
        .properties
        .iter()
        .any(|(k, _)| k == tests::PANIC_HOOK)
    {
        panic!("a message's handling panicked (test)");
    }
    let Some((mapping, stats)) = q.find(message) else {
        return Decision::Unmatched;
    };
    let to = mapping
        .response
        .destination
        .clone()
        .or_else(|| message.reply_to.clone().map(Destination::queue));
    let Some(mut to) = to else {
        tracing::warn!(
            "{} matched a message on {} that has no reply-to, and the mapping has no response.destination; treating it as unmatched",
            mapping.label(),
            q.queue
        );
        return Decision::Unmatched;
    };
    let mut reply = reply_for(mapping, message);
    if mapping.response.destination.is_none() {
        // IBM MQ: the reply goes to the queue manager the request names.
        reply.reply_to_manager = message.reply_to_manager.clone();
    }
    let mut delay = mapping.response.delay();
    if !mapping.response.transformers.is_empty()
        && let Err(f) = transform_reply(mapping, message, &mut reply, &mut to, &mut delay)
    {
        tracing::warn!(
            "{} on {}: {f}; the message goes the unmatched way",
            mapping.label(),
            q.queue
        );
        return Decision::Unmatched;
    }
    let webhooks = q
        .outcomes
        .webhooks(
            mapping.webhooks.as_ref(),
            &mapping.id,
            || mapping.label(),
            || plugin_request(mapping, message),
        )
        .map(|mut fired| {
            // The reply, for listeners whose templates name `originalResponse`.
            if decoy_core::webhooks::wants_answer(&fired.hooks) {
                fired.answer = Some(decoy_core::webhooks::Answer::reply(
                    reply.body.clone(),
                    reply.properties.clone(),
                ));
            }
            Box::new(fired)
        });
    Decision::Reply {
        reply,
        to,
        delay,
        stats: stats.clone(),
        webhooks,
    }
}

/// What a received message gets: a reply (or a move to the unmatched queue), or a
/// rejection.
enum Routed {
    Reply(Job),
    Reject(Box<dyn Delivery>),
}

/// Decides what happens to a received message. A panic while deciding sends the
/// message the unmatched way, as a failing plugin does.
fn route(q: &QueueService, delivery: Box<dyn Delivery>) -> Routed {
    let read_at = Instant::now();
    let decided = std::panic::catch_unwind(AssertUnwindSafe(|| decide(q, delivery.message())));
    match decided {
        Ok(Decision::Reply {
            reply,
            to,
            delay,
            stats,
            webhooks,
        }) => Routed::Reply(Job {
            reply,
            to,
            delay,
            read_at,
            stats: Some(stats),
            delivery,
            webhooks,
        }),
        Ok(Decision::Unmatched) => unmatched(q, delivery, read_at),
        Err(panic) => {
            q.panicked(
                Task::Receiver,
                &*panic,
                "the message went the unmatched way and the receiver went on",
            );
            unmatched(q, delivery, read_at)
        }
    }
}

fn unmatched(q: &QueueService, delivery: Box<dyn Delivery>, read_at: Instant) -> Routed {
    q.outcomes.unmatched();
    match &q.unmatched {
        Unmatched::Queue(to) => {
            tracing::info!(
                "a message on {} matched no mapping; moving it to {to}",
                q.queue
            );
            let reply = delivery.message().clone();
            Routed::Reply(Job {
                delivery,
                to: Destination::queue(to.clone()),
                reply,
                read_at,
                delay: Duration::ZERO,
                stats: None,
                webhooks: None,
            })
        }
        Unmatched::Reject => {
            tracing::info!("a message on {} matched no mapping; rejecting it", q.queue);
            Routed::Reject(delivery)
        }
    }
}

/// What [`Trouble`] calls failed puts and dropped replies.
const PUTTING: &str = "putting replies";
const DROPPING: &str = "a reply that cannot be sent";
const ACKING: &str = "acknowledging requests";

/// Puts one reply, then settles its request. A reply that cannot be sent as it is
/// (no such queue, a destination the protocol does not allow) is dropped, said and
/// listed by `/__admin/problems`, and its request acknowledged; one whose put failed
/// otherwise (the connection, a timeout) sends its request back to its queue after
/// the lane's back-off, so the broker redelivers it.
async fn deliver(s: &dyn Sender, broker: &dyn Broker, q: &QueueService, job: Job, lane: &Lane) {
    let Job {
        delivery,
        to,
        reply,
        read_at,
        delay,
        stats,
        webhooks,
    } = job;
    // An unmatched message keeps a copy, in case its queue must be declared first.
    let copy = stats.is_none().then(|| reply.clone());
    let mut put = if stats.is_none() {
        s.send_alone(&to, reply).await
    } else {
        s.send(&to, reply).await
    };
    if let (Ok(Put::NoSuchQueue), Some(copy)) = (&put, copy) {
        put = move_unmatched(s, broker, q, &to, copy).await;
    }
    // A reply returned for want of its queue can never be put either.
    if let (Ok(Put::NoSuchQueue), Some(_)) = (&put, &stats) {
        put = Err(super::transport::BrokerError::refused(
            "the broker returned it: no such queue",
        ));
    }
    match put {
        Ok(Put::Done) => {
            if lane.put_failing.swap(false, Ordering::Relaxed) {
                lock(&lane.put_backoff).reset();
                q.trouble.ok(PUTTING);
            }
            if let Err(e) = delivery.settle(Settle::Ack).await {
                // The reply went out but the ack did not: the request will be
                // redelivered and answered again (at-least-once). A connection lost
                // under a busy queue fails many at once: said once, then counted.
                let first = format!(
                    "could not acknowledge a request on {} ({}): {e}; it will be delivered \
                     and answered again (at-least-once); while it goes on, one line every \
                     {:?} counts them",
                    q.queue,
                    q.trouble.connection(),
                    super::retry::SUMMARY
                );
                q.trouble.happened(ACKING, &e, first);
            }
            // The serve step's record and hand-off, now the reply is out.
            if let Some(stats) = &stats {
                let process = read_at.elapsed().saturating_sub(delay);
                q.outcomes
                    .answered(Some(stats), process, std::time::SystemTime::now());
            }
            if let Some(fired) = webhooks {
                q.outcomes.hand_off(*fired);
            }
        }
        Err(e) if e.is_lasting() && stats.is_some() => {
            drop_reply(
                q,
                &to,
                &e,
                stats.as_deref(),
                read_at.elapsed().saturating_sub(delay),
            );
            let _ = delivery.settle(Settle::Ack).await;
        }
        Ok(Put::NoSuchQueue) => {
            // The unmatched queue is missing and could not be declared: the message
            // is kept on its own queue, and comes again after a pause.
            tokio::time::sleep(UNMATCHED_RETRY).await;
            let _ = delivery.settle(Settle::Requeue).await;
        }
        Err(e) => {
            let said = super::transport::BrokerError::new(format!(
                "could not put a message on {to}: {e}; the request goes back to {}",
                q.queue
            ));
            q.trouble.failed(PUTTING, &said, None);
            // Listed once per queue and kind (a reply subject of its own for each
            // request would otherwise list one per request), the destination in the
            // detail.
            if let Some((m, _)) = q.mappings.first() {
                let (what, outcome) = match &stats {
                    Some(_) => (
                        format!("a reply to a request on queue {} could not be put", q.queue),
                        format!(
                            "each such request went back to {} after a pause, to be answered again",
                            q.queue
                        ),
                    ),
                    None => (
                        format!(
                            "an unmatched message on queue {} could not be moved to its unmatched queue",
                            q.queue
                        ),
                        format!("each such message went back to {} after a pause", q.queue),
                    ),
                };
                q.incidents
                    .record(m, what, &outcome, &format!("to {to}: {e}"));
            }
            lane.put_failing.store(true, Ordering::Relaxed);
            lane.broken.store(true, Ordering::Relaxed);
            let pause = lock(&lane.put_backoff).next_pause();
            tokio::time::sleep(pause).await;
            let _ = delivery.settle(Settle::Requeue).await;
        }
    }
}

/// A reply that cannot be sent as it is: said (the first, then one line every 30 s
/// while it goes on) and counted among the queue's problems; its request still
/// counts as matched (its webhooks do not fire: there was no answer).
fn drop_reply(
    q: &QueueService,
    to: &Destination,
    e: &super::transport::BrokerError,
    stats: Option<&MappingStats>,
    process: Duration,
) {
    q.outcomes
        .answered(stats, process, std::time::SystemTime::now());
    let said = super::transport::BrokerError::new(format!("the reply to {to}: {e}"));
    q.trouble.dropped(DROPPING, &said);
    if let Some((m, _)) = q.mappings.first() {
        q.incidents.record(
            m,
            format!(
                "a reply to a request on queue {} could not be sent",
                q.queue
            ),
            "the replies were dropped and their requests acknowledged",
            &said.to_string(),
        );
    }
}

/// An unmatched message came back: its queue does not exist. Declares it (durable)
/// and puts the message again; when the broker cannot create it, says so in
/// `/__admin/problems` and returns [`Put::NoSuchQueue`].
async fn move_unmatched(
    s: &dyn Sender,
    broker: &dyn Broker,
    q: &QueueService,
    to: &Destination,
    message: Message,
) -> Result<Put, super::transport::BrokerError> {
    match broker.declare_queue(&to.name).await {
        Ok(()) => {
            tracing::info!(
                "the unmatched queue {to} did not exist on {}; declared it (durable)",
                broker.describe()
            );
            s.send_alone(to, message).await
        }
        Err(e) => {
            tracing::warn!(
                "a message on {} matched no mapping, and the unmatched queue {to} does not exist: {e}; it stays on {} (retried every {UNMATCHED_RETRY:?})",
                q.queue,
                q.queue
            );
            if let Some((m, _)) = q.mappings.first() {
                q.incidents.record(
                    m,
                    format!(
                        "the unmatched queue {to} of queue {} does not exist",
                        q.queue
                    ),
                    &format!("unmatched messages stay on {} until it does", q.queue),
                    &e.to_string(),
                );
            }
            Ok(Put::NoSuchQueue)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config;
    use crate::memory::{MemoryBroker, Shared};
    use serde_json::json;

    /// A message with this property panics while it is handled (see `decide`).
    pub(super) const PANIC_HOOK: &str = "decoy-test-panic";

    /// A runtime over the in-memory broker, from MQ mapping JSON.
    fn start(
        mappings: &[serde_json::Value],
        unmatched: serde_json::Value,
    ) -> (Arc<MemoryBroker>, MqRuntime, Arc<TransportMetrics>) {
        let (broker, rt, metrics, _, _) =
            start_with(MemoryBroker::new(), mappings, unmatched, None);
        (broker, rt, metrics)
    }

    /// `start` on a broker prepared by the test, with the incidents it reports.
    fn start_with(
        broker: Arc<MemoryBroker>,
        mappings: &[serde_json::Value],
        unmatched: serde_json::Value,
        webhooks: Option<Arc<dyn WebhookSink>>,
    ) -> (
        Arc<MemoryBroker>,
        MqRuntime,
        Arc<TransportMetrics>,
        Arc<Panics>,
        Arc<Incidents>,
    ) {
        let mut conn = json!({"connectionId": "mem", "connectionData": {"type": "amqp", "uri": "amqp://unused"}});
        if !unmatched.is_null() {
            conn["connectionData"]["unmatched"] = unmatched;
        }
        let load = config::load_for_test(&conn, mappings);
        let metrics = Arc::new(TransportMetrics::default());
        let panics = Arc::new(Panics::default());
        let incidents = Arc::new(Incidents::default());
        let (m, p) = (metrics.clone(), panics.clone());
        let rt = MqRuntime::start(
            &load.connections,
            vec![Arc::new(Shared(broker.clone())) as Arc<dyn Broker>],
            load.mappings
                .into_iter()
                .map(|m| (Arc::new(m), Arc::default()))
                .collect(),
            move |_| (m.clone(), p.clone()),
            webhooks,
            incidents.clone(),
            MqThreads::current(),
        );
        (broker, rt, metrics, panics, incidents)
    }

    /// The problems `incidents` would add to `/__admin/problems`, as text.
    fn listed(incidents: &Incidents) -> Vec<String> {
        incidents
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Asserts that exactly one problem is listed and that it says each of `parts`.
    fn one_problem_saying(incidents: &Incidents, parts: &[&str]) {
        let listed = listed(incidents);
        assert_eq!(listed.len(), 1, "{listed:?}");
        for part in parts {
            assert!(listed[0].contains(part), "{part:?} not in {:?}", listed[0]);
        }
    }

    #[test]
    fn plugins_are_told_no_client_address_for_a_message() {
        let req = message_request("Q", None, None, None, Vec::new(), b"x");
        assert_eq!(req.client_ip, None);
    }

    fn echo(queue: &str) -> serde_json::Value {
        json!({"mappingId": "echo", "request": {"destination": queue}, "response": {"text": "done"}})
    }

    fn request(body: &str, reply_to: &str) -> Message {
        Message {
            body: body.to_owned().into(),
            message_id: Some(b"ID:1".to_vec()),
            correlation_id: Some(b"CORR".to_vec()),
            reply_to: Some(reply_to.into()),
            ..Message::default()
        }
    }

    #[tokio::test]
    async fn a_matched_request_gets_its_reply_and_is_acknowledged_after_it() {
        let (broker, rt, metrics) = start(
            &[
                json!({"request": {"destination": {"name": "REQ", "type": "QUEUE"}, "bodyMatcher": {"contains": "<order"}},
                     "response": {"text": "<ok/>", "properties": {"source": "decoy"}}}),
            ],
            serde_json::Value::Null,
        );
        broker.put("REQ", request("<order id='1'/>", "REPLY"));
        let reply = broker.take("REPLY").await.unwrap();
        assert_eq!(&reply.body[..], b"<ok/>");
        assert_eq!(
            reply.correlation_id.as_deref(),
            Some(&b"ID:1"[..]),
            "message id to correlation id"
        );
        assert_eq!(
            reply.properties,
            [("source".to_owned(), "decoy".to_owned())]
        );
        rt.shutdown().await;
        let settled = broker.settlements();
        assert_eq!(settled.len(), 1);
        assert_eq!(settled[0].2, Settle::Ack);
        assert_eq!(metrics.matched_total(), 1);
    }

    #[tokio::test]
    async fn replies_are_templated_by_xpath_and_a_failing_template_sends_the_message_to_unmatched()
    {
        let (broker, rt, metrics) = start(
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"contains": "<order"}},
                       "response": {"text": "<ack id=\"{{xPath request.body '/order/@id'}}\" by=\"{{request.headers.source}}\">{{xPath request.body '/order/item/text()'}}</ack>",
                                    "properties": {"echo": "{{request.correlationId}}"},
                                    "transformers": ["response-template"]}}),
                json!({"request": {"destination": "Q", "bodyMatcher": {"contains": "broken"}},
                       // A division by zero fails the whole template, as in WireMock (a
                       // jsonPath on a body that is not JSON renders empty instead).
                       "response": {"text": "{{math 1 '/' 0}}", "transformers": ["response-template"]}}),
            ],
            json!({"queue": "UNMATCHED"}),
        );
        let mut m = request("<order id='17'><item>book</item></order>", "R");
        m.properties.push(("source".into(), "tests".into()));
        broker.put("Q", m);
        let reply = broker.take("R").await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&reply.body),
            "<ack id=\"17\" by=\"tests\">book</ack>"
        );
        assert_eq!(reply.properties, [("echo".to_owned(), "CORR".to_owned())]);
        broker.put("Q", request("broken, not JSON", "R"));
        let moved = broker.take("UNMATCHED").await.unwrap();
        assert_eq!(&moved.body[..], b"broken, not JSON");
        rt.shutdown().await;
        assert_eq!(metrics.matched_total(), 1);
    }

    /// The body and the templated destination of a reply are rendered by two calls;
    /// each is prepared once, not again on every message. Their templates were
    /// compiled when the mapping loaded, and put in the plugin's cache: the plugin
    /// compiles neither.
    #[test]
    fn a_templated_body_and_destination_are_compiled_once_not_per_message() {
        let conn = json!({"connectionId": "mem", "connectionData": {"type": "amqp", "uri": "amqp://unused"}});
        let load = config::load_for_test(
            &conn,
            &[json!({"request": {"destination": "Q"},
                     "response": {"text": "hello {{request.headers.who}}",
                                  "destination": {"name": "out.{{request.headers.who}}", "type": "QUEUE"},
                                  "transformers": ["response-template"]}})],
        );
        let m = &load.mappings[0];
        let plugin = &m.response.transformers.plugins[0];
        for who in ["ann", "bob", "cy", "ann"] {
            let mut req = request("x", "R");
            req.properties.push(("who".into(), who.into()));
            let mut reply = reply_for(m, &req);
            let mut to = m.response.destination.clone().unwrap();
            let mut delay = Duration::ZERO;
            transform_reply(m, &req, &mut reply, &mut to, &mut delay).unwrap();
            assert_eq!(String::from_utf8_lossy(&reply.body), format!("hello {who}"));
            assert_eq!(to.name, format!("out.{who}"));
        }
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            count(&plugin.stats.instances_created),
            1,
            "one thread, one instance"
        );
        assert_eq!(
            count(&plugin.stats.prepares),
            2,
            "for the body and for the destination, each once"
        );
        assert_eq!(count(&plugin.stats.host_compiled), 2, "at load");
        assert_eq!(count(&plugin.stats.compilations), 0);
    }

    /// A sink that keeps what it is handed.
    #[derive(Debug, Default)]
    struct Kept(std::sync::Mutex<Vec<(String, decoy_core::webhooks::WebhookCall)>>);

    impl WebhookSink for Kept {
        fn fire(&self, fired: Fired) {
            for hook in fired.hooks.iter() {
                let call = hook
                    .render(&fired.mapping_id, &fired.request, fired.answer.as_ref())
                    .unwrap();
                self.0.lock().unwrap().push((fired.mapping.clone(), call));
            }
        }
    }

    #[tokio::test]
    async fn a_confirmed_reply_hands_the_mappings_webhooks_to_the_sink_and_an_unmatched_message_does_not()
     {
        let kept = Arc::new(Kept::default());
        let (broker, rt, _, _, _) = start_with(
            MemoryBroker::new(),
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"equalTo": "ping"}}, "response": {"text": "pong"},
                     "serveEventListeners": [{"name": "webhook", "parameters": {"method": "POST", "url": "http://127.0.0.1:9/done", "body": "done"}}]}),
            ],
            json!({"queue": "LOST"}),
            Some(kept.clone()),
        );
        broker.put("Q", request("ping", "R"));
        assert_eq!(&broker.take("R").await.unwrap().body[..], b"pong");
        broker.put("Q", request("other", "R"));
        broker.take("LOST").await.unwrap();
        rt.shutdown().await;
        let kept = kept.0.lock().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].1.url, "http://127.0.0.1:9/done");
        assert_eq!(kept[0].1.body.as_deref(), Some(&b"done"[..]));
    }

    #[tokio::test]
    async fn the_best_mapping_on_a_queue_answers_and_properties_are_matched() {
        let (broker, rt, _) = start(
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"anything": "anything"}}, "response": {"text": "fallback"}, "priority": 10}),
                json!({"request": {"destination": "Q", "properties": {"kind": {"equalTo": "vip"}}}, "response": {"text": "vip"}, "priority": 1}),
                json!({"request": {"destination": "Q", "bodyMatcher": {"matchesXPath": "//order[@total > 100]"}}, "response": {"text": "big"}, "correlation": "COPY_CORRELID"}),
            ],
            serde_json::Value::Null,
        );
        let mut vip = request("<order total='5'/>", "R");
        vip.properties.push(("kind".into(), "vip".into()));
        broker.put("Q", vip);
        assert_eq!(&broker.take("R").await.unwrap().body[..], b"vip");
        broker.put("Q", request("<order total='500'/>", "R"));
        let big = broker.take("R").await.unwrap();
        assert_eq!(&big.body[..], b"big");
        assert_eq!(
            big.correlation_id.as_deref(),
            Some(&b"CORR"[..]),
            "correlation id copied"
        );
        broker.put("Q", request("<order total='5'/>", "R"));
        assert_eq!(&broker.take("R").await.unwrap().body[..], b"fallback");
        rt.shutdown().await;
    }

    #[tokio::test]
    async fn an_unmatched_message_is_moved_to_the_unmatched_queue_or_rejected() {
        let (broker, rt, metrics) = start(
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"equalTo": "ping"}}, "response": {"text": "pong"}}),
            ],
            json!({"queue": "LOST.AND.FOUND"}),
        );
        broker.put("Q", request("something else", "R"));
        let moved = broker.take("LOST.AND.FOUND").await.unwrap();
        assert_eq!(&moved.body[..], b"something else");
        assert_eq!(moved.reply_to.as_deref(), Some("R"), "moved as it was");
        rt.shutdown().await;
        assert_eq!(broker.settlements()[0].2, Settle::Ack);
        assert_eq!(broker.depth("R"), 0);
        assert_eq!(metrics.unmatched_total(), 1);

        let (broker, rt, _) = start(
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"equalTo": "ping"}}, "response": {"text": "pong"}}),
            ],
            json!({"reject": true}),
        );
        broker.put("Q", request("nope", "R"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while broker.settlements().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.shutdown().await;
        assert_eq!(broker.settlements()[0].2, Settle::Reject);
    }

    #[tokio::test]
    async fn a_failed_put_sends_the_request_back_and_it_is_answered_on_redelivery() {
        let (broker, rt, _, _, incidents) = start_with(
            MemoryBroker::new(),
            &[json!({"request": {"destination": "Q"}, "response": {"text": "done"}})],
            serde_json::Value::Null,
            None,
        );
        broker.fail_sends.store(1, Ordering::SeqCst);
        broker.put("Q", request("work", "R"));
        assert_eq!(&broker.take("R").await.unwrap().body[..], b"done");
        rt.shutdown().await;
        let how: Vec<Settle> = broker.settlements().into_iter().map(|s| s.2).collect();
        assert_eq!(how, [Settle::Requeue, Settle::Ack]);
        assert_eq!(broker.depth("R"), 0, "answered once");
        // The failure is listed, with where the reply was going and why.
        one_problem_saying(
            &incidents,
            &[
                "a reply to a request on queue Q could not be put (once",
                "to R: put refused (test)",
                "went back to Q after a pause",
            ],
        );
    }

    #[tokio::test]
    async fn an_unmatched_message_whose_move_failed_comes_again_and_is_listed() {
        let (broker, rt, _, _, incidents) = start_with(
            MemoryBroker::new(),
            &[
                json!({"request": {"destination": "Q", "bodyMatcher": {"equalTo": "ping"}}, "response": {"text": "pong"}}),
            ],
            json!({"queue": "LOST.AND.FOUND"}),
            None,
        );
        broker.fail_sends.store(1, Ordering::SeqCst);
        broker.put("Q", request("something else", "R"));
        let moved = broker.take("LOST.AND.FOUND").await.unwrap();
        assert_eq!(&moved.body[..], b"something else");
        rt.shutdown().await;
        let how: Vec<Settle> = broker.settlements().into_iter().map(|s| s.2).collect();
        assert_eq!(how, [Settle::Requeue, Settle::Ack]);
        one_problem_saying(
            &incidents,
            &[
                "an unmatched message on queue Q could not be moved to its unmatched queue (once",
                "to LOST.AND.FOUND: put refused (test)",
                "went back to Q after a pause",
            ],
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_that_keeps_failing_sends_its_request_back_after_a_growing_pause() {
        let (broker, rt, _) = start(
            &[json!({"request": {"destination": "Q"}, "response": {"text": "done"}})],
            serde_json::Value::Null,
        );
        // Three failures: pauses of at least 50, 100 and 200 ms (half of each step of
        // 100, 200 and 400 ms), on the paused clock, before the fourth put works.
        broker.fail_sends.store(3, Ordering::SeqCst);
        let start = tokio::time::Instant::now();
        broker.put("Q", request("work", "R"));
        assert_eq!(&broker.take("R").await.unwrap().body[..], b"done");
        let waited = start.elapsed();
        rt.shutdown().await;
        let how: Vec<Settle> = broker.settlements().into_iter().map(|s| s.2).collect();
        assert_eq!(
            how,
            [
                Settle::Requeue,
                Settle::Requeue,
                Settle::Requeue,
                Settle::Ack
            ]
        );
        assert!(waited >= Duration::from_millis(350), "{waited:?}");
    }

    #[tokio::test]
    async fn a_reply_that_can_never_be_sent_is_dropped_listed_and_its_request_acknowledged() {
        let (broker, rt, metrics, _, incidents) = start_with(
            MemoryBroker::new(),
            &[
                json!({"mappingId": "m-1", "request": {"destination": "Q"}, "response": {"text": "done"}}),
            ],
            serde_json::Value::Null,
            None,
        );
        broker.refuse_sends.store(2, Ordering::SeqCst);
        for body in ["one", "two", "three"] {
            broker.put("Q", request(body, "R"));
        }
        // The third is answered; the first two were acknowledged without a reply,
        // not sent back to go round again.
        broker.take("R").await.expect("the third is answered");
        rt.shutdown().await;
        let how: Vec<Settle> = broker.settlements().into_iter().map(|s| s.2).collect();
        assert_eq!(how, [Settle::Ack, Settle::Ack, Settle::Ack]);
        assert_eq!(broker.depth("Q"), 0);
        assert_eq!(broker.depth("R"), 0, "one reply only");
        assert_eq!(metrics.matched_total(), 3);
        one_problem_saying(
            &incidents,
            &[
                "a reply to a request on queue Q could not be sent",
                "no such name (test)",
                "the replies were dropped and their requests acknowledged",
            ],
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_replies_wait_on_timers_and_shutdown_drains_them() {
        let (broker, rt, metrics) = start(
            &[
                json!({"request": {"destination": "Q"}, "response": {"text": "late", "fixedDelayMilliseconds": 100}, "receiveThreads": 2, "sendThreads": 2}),
            ],
            serde_json::Value::Null,
        );
        for i in 0..1000 {
            broker.put("Q", request(&format!("m{i}"), "R"));
        }
        // Let the receivers take everything; the replies are all waiting on timers
        // (time is paused and this task never sleeps, so none has fired).
        for _ in 0..100_000 {
            if broker.depth("Q") == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(broker.depth("Q"), 0);
        assert_eq!(broker.depth("R"), 0, "no reply before its delay");
        rt.shutdown().await;
        assert_eq!(
            broker.depth("R"),
            1000,
            "shutdown sent every reply in flight"
        );
        assert_eq!(metrics.matched_total(), 1000);
        assert!(broker.settlements().iter().all(|s| s.2 == Settle::Ack));
    }

    #[tokio::test]
    async fn a_panic_while_handling_a_message_sends_it_the_unmatched_way_and_the_receiver_goes_on()
    {
        let (broker, rt, _, panics, incidents) = start_with(
            MemoryBroker::new(),
            &[echo("Q")],
            json!({"queue": "UNMATCHED"}),
            None,
        );
        let mut bad = request("boom", "R");
        bad.properties.push((PANIC_HOOK.into(), "yes".into()));
        broker.put("Q", bad);
        let moved = broker.take("UNMATCHED").await.expect("moved, not lost");
        assert_eq!(&moved.body[..], b"boom");
        broker.put("Q", request("fine", "R"));
        assert_eq!(
            &broker.take("R").await.expect("still served").body[..],
            b"done"
        );
        rt.shutdown().await;
        assert_eq!(panics.receiver.load(Ordering::Relaxed), 1);
        one_problem_saying(
            &incidents,
            &[
                "mapping #0 (id echo): a receiver of queue Q panicked (once, last: \"a message's handling panicked (test)\"); the message went the unmatched way",
            ],
        );
    }

    #[tokio::test]
    async fn a_receiver_that_panics_is_restarted_and_its_queue_is_served_again() {
        let broker = MemoryBroker::new();
        broker.panic_receives.store(2, Ordering::SeqCst);
        let (broker, rt, _, panics, incidents) =
            start_with(broker, &[echo("Q")], serde_json::Value::Null, None);
        broker.put("Q", request("work", "R"));
        assert_eq!(
            &broker
                .take("R")
                .await
                .expect("answered after the restarts")
                .body[..],
            b"done"
        );
        rt.shutdown().await;
        assert_eq!(panics.receiver.load(Ordering::Relaxed), 2);
        one_problem_saying(
            &incidents,
            &[
                "a receiver of queue Q panicked (2 times, last: \"a receive panicked (test)\"); it was restarted after 200ms",
            ],
        );
    }

    #[tokio::test]
    async fn a_sender_that_panics_is_restarted_and_the_request_it_held_is_answered_when_it_comes_again()
     {
        let broker = MemoryBroker::new();
        // One panic in the sender's loop (opening its sender), one in a reply's put.
        broker.panic_senders.store(1, Ordering::SeqCst);
        broker.panic_sends.store(1, Ordering::SeqCst);
        let (broker, rt, _, panics, incidents) =
            start_with(broker, &[echo("Q")], serde_json::Value::Null, None);
        broker.put("Q", request("work", "R"));
        assert_eq!(&broker.take("R").await.expect("answered").body[..], b"done");
        rt.shutdown().await;
        assert_eq!(panics.sender.load(Ordering::Relaxed), 2);
        let how: Vec<Settle> = broker.settlements().into_iter().map(|s| s.2).collect();
        assert_eq!(how, [Settle::Requeue, Settle::Requeue, Settle::Ack]);
        assert_eq!(broker.depth("R"), 0, "answered once");
        one_problem_saying(&incidents, &["a sender of queue Q panicked (2 times"]);
    }

    #[tokio::test]
    async fn a_missing_request_queue_is_checked_again_and_served_once_it_exists() {
        let broker = MemoryBroker::new();
        broker.remove_queue("Q");
        let (broker, rt, _, _, _) = start_with(
            broker,
            &[
                json!({"request": {"destination": "Q"}, "response": {"text": "done"}, "receiveThreads": 4}),
            ],
            serde_json::Value::Null,
            None,
        );
        broker.put("Q", request("work", "R"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(broker.depth("Q"), 1, "not received while it is missing");
        broker.add_queue("Q");
        assert_eq!(
            &broker.take("R").await.expect("served once it exists").body[..],
            b"done"
        );
        rt.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_within_its_drain_time_while_receivers_are_still_connecting() {
        let broker = MemoryBroker::new();
        broker.hang_receivers.store(true, Ordering::SeqCst);
        let (_broker, rt, _, _, _) = start_with(
            broker,
            &[
                json!({"request": {"destination": "Q"}, "response": {"text": "done"}, "receiveThreads": 20}),
            ],
            serde_json::Value::Null,
            None,
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Virtual time: a shutdown that waited on the connects would pass the bound.
        tokio::time::timeout(DRAIN * 2, rt.shutdown())
            .await
            .expect("shutdown returned");
    }

    #[tokio::test]
    async fn an_unmatched_message_whose_queue_is_missing_is_kept_declaring_the_queue_or_waiting() {
        let ping = json!({"request": {"destination": "Q", "bodyMatcher": {"equalTo": "ping"}}, "response": {"text": "pong"}});
        // The broker can create the queue: decoy declares it and moves the message.
        let broker = MemoryBroker::new();
        broker.remove_queue("LOST");
        let (broker, rt, _, _, incidents) = start_with(
            broker,
            std::slice::from_ref(&ping),
            json!({"queue": "LOST"}),
            None,
        );
        broker.put("Q", request("stray", "R"));
        let moved = broker
            .take("LOST")
            .await
            .expect("moved to the declared queue");
        assert_eq!(&moved.body[..], b"stray");
        rt.shutdown().await;
        assert!(listed(&incidents).is_empty());

        // It cannot (IBM MQ): the message stays on its queue and is reported.
        let broker = MemoryBroker::new();
        broker.remove_queue("LOST");
        broker.refuse_declare.store(true, Ordering::SeqCst);
        let (broker, rt, _, _, incidents) = start_with(
            broker,
            std::slice::from_ref(&ping),
            json!({"queue": "LOST"}),
            None,
        );
        broker.put("Q", request("stray", "R"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !broker.settlements().iter().any(|s| s.2 == Settle::Requeue)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.shutdown().await;
        assert!(
            broker.settlements().iter().all(|s| s.2 == Settle::Requeue),
            "never acknowledged: {:?}",
            broker.settlements()
        );
        assert_eq!(broker.depth("Q"), 1, "back on its queue");
        one_problem_saying(
            &incidents,
            &[
                "the unmatched queue LOST of queue Q does not exist",
                "unmatched messages stay on Q until it does",
            ],
        );
    }
}
