//! NATS with `async-nats`: core request-reply and JetStream durable consumers.
//!
//! A connection entry opens `readConnectionsToOpen` clients for receiving and
//! `writeConnectionsToOpen` for sending; receiver and sender number `i` use client
//! `i % n`. A client is one socket and a tokio task (no OS thread); once connected it
//! reconnects by itself, with decoy's back-off ([`crate::retry`]), and subscribes its
//! subscriptions again. Losing and regaining the server is logged per connection.
//!
//! - **Core NATS.** A mapping's subject (wildcards `*` and `>` allowed) is subscribed
//!   in a queue group (`queueGroup`, `decoy` by default), so its receivers, and several
//!   decoys, share the requests: each is answered once. The reply goes to the request's
//!   reply subject (the inbox of `nc.request()`) unless the mapping names one. Core
//!   NATS has no acknowledgement: a request is delivered at most once, and settling it
//!   does nothing.
//! - **JetStream** (`request.jetstream`): requests are pulled from a stream through a
//!   durable consumer (created when missing, with explicit acks, filtered on the
//!   mapping's subject), and each is acknowledged only after its reply was kept: for
//!   a reply subject a stream holds (from JetStream's list of streams, listed again
//!   every few seconds), a JetStream publish that stream acknowledged; for any
//!   other subject, a publish the server confirmed it had (a flush), handed to its
//!   subscribers. So a request decoy did not answer (decoy stopped, the server
//!   restarted, the reply's stream refused it) is delivered again. A stored message
//!   has no reply inbox (a JetStream publish's inbox gets the stream's ack), so its
//!   reply goes to the subject its `reply-to` header names, or to the mapping's
//!   `response.destination`.
//!
//! Headers are the message's properties (each value of a header a property). The
//! `Nats-Msg-Id` header is the message id, `Correlation-Id` the correlation id; a reply
//! carries its correlation id as `Correlation-Id`.

pub mod config;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::{Client, ConnectOptions, Event, HeaderMap};
use futures_util::StreamExt as _;
use tokio::sync::Mutex as AsyncMutex;

use self::config::{JetStreamSource, NatsAuth, NatsConfig};
use super::config::MqMapping;
use super::retry::{BACKOFF_MAX, BACKOFF_START};
use super::transport::PrivateReplies;
use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, ReplyPoint,
    Sender, Settle,
};

/// The header a JetStream request names its reply subject in.
pub const REPLY_TO_HEADER: &str = "reply-to";
/// The header carrying a message's correlation id.
pub const CORRELATION_HEADER: &str = "Correlation-Id";
/// JetStream's de-duplication id, read as the message id.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// How long a flush or a JetStream call may take before it counts as failed.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// One `nats` connection entry and its two pools.
pub struct NatsBroker {
    config: NatsConfig,
    id: String,
    shown: String,
    /// Subjects read from JetStream, from the mappings of this connection.
    jetstream: HashMap<String, JetStreamSource>,
    read: Vec<AsyncMutex<Option<Client>>>,
    write: Vec<AsyncMutex<Option<Client>>>,
    /// The subjects JetStream's streams hold, as it listed them lately; shared by the
    /// connection's senders.
    streams: Arc<StreamSubjects>,
}

impl std::fmt::Debug for NatsBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBroker")
            .field("uri", &self.shown)
            .finish_non_exhaustive()
    }
}

/// The pause before reconnect attempt `n` (from 1): [`crate::retry`]'s steps, 0.1 s
/// doubling to 5 s, each drawn between half and all of its step.
fn reconnect_pause(attempts: usize) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let doublings = (attempts - 2).min(16) as u32;
    let step = BACKOFF_START
        .saturating_mul(1 << doublings)
        .min(BACKOFF_MAX);
    step.mul_f64(rand::random_range(0.5..=1.0))
}

impl NatsBroker {
    /// The broker for connection `id`, reading from JetStream the subjects whose
    /// mappings (of this connection, among `mappings`) say `request.jetstream`.
    pub fn new(config: NatsConfig, id: &str, mappings: &[MqMapping]) -> NatsBroker {
        let jetstream = mappings
            .iter()
            .filter(|m| m.connection_id == id)
            .filter_map(|m| Some((m.queue.name.clone(), m.jetstream.clone()?)))
            .collect();
        let slots = |n: usize| (0..n).map(|_| AsyncMutex::new(None)).collect();
        NatsBroker {
            shown: config.shown(),
            id: id.to_owned(),
            read: slots(config.read_connections),
            write: slots(config.write_connections),
            jetstream,
            streams: Arc::default(),
            config,
        }
    }

    async fn options(&self) -> Result<ConnectOptions, BrokerError> {
        let c = &self.config;
        let mut o = match &c.auth {
            NatsAuth::None => ConnectOptions::new(),
            NatsAuth::UserPassword(u, p) => {
                ConnectOptions::with_user_and_password(u.clone(), p.clone())
            }
            NatsAuth::Token(t) => ConnectOptions::with_token(t.clone()),
            NatsAuth::Nkey(seed) => ConnectOptions::with_nkey(seed.clone()),
            NatsAuth::CredentialsFile(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|e| {
                    err(
                        &format!("cannot read the credentials file {}", path.display()),
                        e,
                    )
                })?,
        };
        if c.tls_required {
            o = o.require_tls(true);
        }
        if let Some(ca) = &c.tls_ca_file {
            o = o.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &c.tls_client {
            o = o.add_client_certificate(cert.clone(), key.clone());
        }
        let (id, shown) = (self.id.clone(), self.shown.clone());
        Ok(o.name(format!("decoy ({})", self.id))
            .connection_timeout(c.connect_timeout)
            .subscription_capacity(c.prefetch)
            .max_reconnects(None::<usize>)
            .reconnect_delay_callback(reconnect_pause)
            .event_callback(move |event| {
                let (id, shown) = (id.clone(), shown.clone());
                async move {
                    match event {
                        Event::Disconnected => tracing::warn!(
                            "lost the NATS server {shown} (connection {id:?}); reconnecting with back-off ({BACKOFF_START:?} to {BACKOFF_MAX:?})"
                        ),
                        Event::Connected => {
                            tracing::info!("connected to the NATS server {shown} (connection {id:?})")
                        }
                        Event::SlowConsumer(sid) => tracing::warn!(
                            "NATS connection {id:?}: subscription {sid} holds more than prefetch messages; the client drops new ones (raise prefetch, receiveThreads or readConnectionsToOpen)"
                        ),
                        other => tracing::info!("NATS connection {id:?} ({shown}): {other}"),
                    }
                }
            }))
    }

    /// The client at `index` of `pool`, connecting when it has none yet. Once made, a
    /// client reconnects by itself and is kept.
    async fn client(
        &self,
        pool: &[AsyncMutex<Option<Client>>],
        index: usize,
    ) -> Result<Client, BrokerError> {
        let mut slot = pool[index % pool.len()].lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let options = self.options().await?;
        let connect = options.connect(self.config.servers.clone());
        let client = match tokio::time::timeout(
            self.config.connect_timeout + Duration::from_secs(1),
            connect,
        )
        .await
        {
            Ok(c) => c.map_err(|e| err(&format!("cannot connect to {}", self.shown), e))?,
            Err(_) => {
                return Err(BrokerError::new(format!(
                    "cannot connect to {}: no answer in {:?}",
                    self.shown, self.config.connect_timeout
                )));
            }
        };
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn jetstream_receiver(
        &self,
        client: Client,
        subject: &str,
        source: &JetStreamSource,
    ) -> Result<Box<dyn Receiver>, BrokerError> {
        let js = jetstream::new(client);
        let stream = match tokio::time::timeout(BROKER_TIMEOUT, js.get_stream(&source.stream)).await
        {
            Err(_) => {
                return Err(BrokerError::new(format!(
                    "JetStream did not answer in {BROKER_TIMEOUT:?} (is JetStream enabled on the server, `nats-server -js`?)"
                )));
            }
            Ok(Err(e)) => {
                if let jetstream::context::GetStreamErrorKind::JetStream(j) = e.kind()
                    && j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
                {
                    return Err(BrokerError::missing_queue(
                        &source.stream,
                        format!("stream {:?} does not exist: {e}", source.stream),
                    ));
                }
                return Err(err(
                    &format!(
                        "cannot look up stream {:?} (is JetStream enabled on the server?)",
                        source.stream
                    ),
                    e,
                ));
            }
            Ok(Ok(s)) => s,
        };
        let wanted = pull::Config {
            durable_name: Some(source.durable.clone()),
            filter_subject: subject.to_owned(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: source.ack_wait,
            description: Some(format!("decoy: requests on {subject}")),
            ..pull::Config::default()
        };
        let consumer: PullConsumer = tokio::time::timeout(
            BROKER_TIMEOUT,
            stream.get_or_create_consumer(&source.durable, wanted),
        )
        .await
        .map_err(|_| BrokerError::new("JetStream did not answer"))?
        .map_err(|e| {
            err(
                &format!(
                    "cannot create the durable consumer {:?} on stream {:?} for {subject:?}",
                    source.durable, source.stream
                ),
                e,
            )
        })?;
        let info = consumer.cached_info();
        let filter = info.config.filter_subject.as_str();
        if filter != subject {
            return Err(BrokerError::new(format!(
                "the consumer {:?} of stream {:?} exists and reads {}, not {subject:?}; name another `durable` in request.jetstream, or delete it (`nats consumer rm {} {}`)",
                source.durable,
                source.stream,
                if filter.is_empty() {
                    "the whole stream".to_owned()
                } else {
                    format!("{filter:?}")
                },
                source.stream,
                source.durable
            )));
        }
        if info.config.ack_policy != AckPolicy::Explicit {
            return Err(BrokerError::new(format!(
                "the consumer {:?} of stream {:?} exists without explicit acks, so a request could be lost; name another `durable` in request.jetstream",
                source.durable, source.stream
            )));
        }
        let messages = consumer
            .stream()
            .max_messages_per_batch(self.config.prefetch)
            .messages()
            .await
            .map_err(|e| {
                err(
                    &format!("cannot pull from consumer {:?}", source.durable),
                    e,
                )
            })?;
        Ok(Box::new(JetStreamReceiver {
            messages,
            queue: subject.into(),
        }))
    }
}

impl Broker for NatsBroker {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            let client = self.client(&self.read, index).await?;
            if let Some(source) = self.jetstream.get(&from.name) {
                return self.jetstream_receiver(client, &from.name, source).await;
            }
            let subscriber = client
                .queue_subscribe(from.name.clone(), self.config.queue_group.clone())
                .await
                .map_err(|e| err(&format!("cannot subscribe to {:?}", from.name), e))?;
            Ok(Box::new(CoreReceiver {
                subscriber,
                queue: from.name.as_str().into(),
                subjects: false,
            }) as Box<dyn Receiver>)
        })
    }

    /// An inbox of decoy's own (`_INBOX.<id>`), subscribed with a wildcard: each
    /// forwarded request names `_INBOX.<id>.<token>`, as `nc.request()` gives each
    /// request an inbox, so a back end needs no header to be paired.
    fn private_replies(&self, index: usize) -> BoxFuture<'_, Result<PrivateReplies, BrokerError>> {
        Box::pin(async move {
            let client = self.client(&self.read, index).await?;
            let inbox = client.new_inbox();
            let subscriber = client
                .subscribe(format!("{inbox}.*"))
                .await
                .map_err(|e| err(&format!("cannot subscribe to {inbox:?}"), e))?;
            Ok((
                ReplyPoint {
                    name: inbox.clone(),
                    per_request: Some('.'),
                },
                Box::new(CoreReceiver {
                    subscriber,
                    queue: inbox.into(),
                    subjects: true,
                }) as Box<dyn Receiver>,
            ))
        })
    }

    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            let client = self.client(&self.write, index).await?;
            // Its own JetStream context: a stored request's reply waits for the
            // stream's ack through it.
            let jetstream = jetstream::ContextBuilder::new()
                .timeout(BROKER_TIMEOUT)
                .build(client.clone());
            Ok(Box::new(NatsSender {
                client,
                jetstream,
                streams: self.streams.clone(),
            }) as Box<dyn Sender>)
        })
    }

    fn listened_kind(&self) -> &'static str {
        "stream"
    }

    /// The command names the subjects this connection's mappings read from `stream`.
    fn how_to_create(&self, stream: &str) -> String {
        let mut subjects: Vec<&str> = self
            .jetstream
            .iter()
            .filter(|(_, source)| source.stream == stream)
            .map(|(subject, _)| subject.as_str())
            .collect();
        subjects.sort_unstable();
        let subjects = match subjects.is_empty() {
            true => "orders.>".to_owned(),
            false => subjects.join(","),
        };
        format!(
            "create the stream with the subjects the system publishes requests on (for example `nats stream add {stream} --subjects '{subjects}' --defaults`)"
        )
    }

    /// A core NATS publish does not wait for the server; a JetStream request's reply
    /// waits for the stream's ack.
    fn in_flight(&self) -> usize {
        256
    }

    /// A subject needs no creating: a message nobody subscribes to is dropped by the
    /// server, and one a stream captures is kept.
    fn declare_queue<'a>(&'a self, _subject: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async { Ok(()) })
    }
}

struct CoreReceiver {
    subscriber: async_nats::Subscriber,
    queue: Arc<str>,
    /// Each message says the subject it came on as its topic (a recording's inbox).
    subjects: bool,
}

impl Receiver for CoreReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.subscriber.next().await {
                Some(m) => {
                    let mut message = from_nats(&m, false);
                    if self.subjects {
                        message.topic = Some(m.subject.to_string());
                    }
                    Ok(Some(Box::new(CoreDelivery {
                        message,
                        queue: self.queue.clone(),
                    }) as Box<dyn Delivery>))
                }
                None => Err(BrokerError::new("the subscription was closed")),
            }
        })
    }
}

/// A core NATS request: nothing to settle (core NATS has no acknowledgement).
struct CoreDelivery {
    message: Message,
    queue: Arc<str>,
}

impl Delivery for CoreDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        if how == Settle::Requeue {
            tracing::warn!(
                "a request on {} could not be answered, and core NATS cannot deliver it again: its requester gets no reply (read the subject from JetStream, request.jetstream, to have it redelivered)",
                self.queue
            );
        }
        Box::pin(async { Ok(()) })
    }
}

struct JetStreamReceiver {
    messages: pull::Stream,
    queue: Arc<str>,
}

impl Receiver for JetStreamReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.messages.next().await {
                Some(Ok(m)) => {
                    let message = from_nats(&m.message, true);
                    Ok(Some(Box::new(JetStreamDelivery {
                        message,
                        inner: Some(m),
                        queue: self.queue.clone(),
                    }) as Box<dyn Delivery>))
                }
                Some(Err(e)) => Err(err("pulling from the consumer failed", e)),
                None => Err(BrokerError::new("the consumer's message stream ended")),
            }
        })
    }
}

struct JetStreamDelivery {
    message: Message,
    /// `None` once settled.
    inner: Option<jetstream::Message>,
    queue: Arc<str>,
}

/// A request dropped unsettled (its handling panicked) is handed back (a nak), so it
/// is delivered again now rather than after the consumer's ack wait.
impl Drop for JetStreamDelivery {
    fn drop(&mut self) {
        let Some(m) = self.inner.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracing::warn!(
            "a request on {} was dropped before it was settled; JetStream delivers it again",
            self.queue
        );
        runtime.spawn(async move {
            let _ = m.ack_with(jetstream::AckKind::Nak(None)).await;
        });
    }
}

impl Delivery for JetStreamDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        let inner = self.inner.take();
        Box::pin(async move {
            let Some(m) = inner else {
                return Ok(());
            };
            let kind = match how {
                Settle::Ack => jetstream::AckKind::Ack,
                Settle::Requeue => jetstream::AckKind::Nak(None),
                Settle::Reject => jetstream::AckKind::Term,
            };
            match tokio::time::timeout(BROKER_TIMEOUT, m.ack_with(kind)).await {
                Ok(r) => r.map_err(|e| err("acknowledging a JetStream request", e)),
                Err(_) => Err(BrokerError::new(format!(
                    "acknowledging a JetStream request took over {BROKER_TIMEOUT:?}"
                ))),
            }
        })
    }
}

/// What a failed listing of the streams says.
const LISTING: &str = "listing JetStream's streams, to know whether one stores the reply (the user needs $JS.API.STREAM.LIST)";
/// How long JetStream's list of streams is believed before it is asked again.
const STREAM_LIST_TTL: Duration = Duration::from_secs(5);

/// The subjects every stream holds (their filters, wildcards included), as JetStream
/// listed them at most [`STREAM_LIST_TTL`] ago; `None` in it when the server has no
/// JetStream. One listing serves every subject a reply goes to, so a reply subject of
/// its own for each request (an inbox) costs JetStream nothing more. A send reads the
/// listing under a short lock; one send at a time lists again when it is stale.
#[derive(Debug, Default)]
struct StreamSubjects {
    listed: std::sync::Mutex<Option<(std::time::Instant, Filters)>>,
    listing: AsyncMutex<()>,
}

/// Every stream's subject filters; `None`: the server has no JetStream.
type Filters = Option<Arc<[String]>>;

impl StreamSubjects {
    fn fresh(&self) -> Option<Filters> {
        let listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        match &*listed {
            Some((at, filters)) if at.elapsed() < STREAM_LIST_TTL => Some(filters.clone()),
            _ => None,
        }
    }

    /// The filters, listed again when they are older than the TTL.
    async fn get(&self, client: &Client, js: &jetstream::Context) -> Result<Filters, BrokerError> {
        if let Some(filters) = self.fresh() {
            return Ok(filters);
        }
        let _one = self.listing.lock().await;
        if let Some(filters) = self.fresh() {
            return Ok(filters);
        }
        let filters = match client.server_info().jetstream {
            false => None,
            true => {
                let mut filters = Vec::new();
                let mut streams = js.streams();
                let listing = async {
                    while let Some(info) = streams.next().await {
                        filters.extend(info?.config.subjects);
                    }
                    Ok::<(), jetstream::context::StreamsError>(())
                };
                match tokio::time::timeout(BROKER_TIMEOUT, listing).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(err(LISTING, e)),
                    Err(_) => {
                        return Err(BrokerError::new(format!(
                            "{LISTING}: no answer in {BROKER_TIMEOUT:?}"
                        )));
                    }
                }
                Some(Arc::from(filters))
            }
        };
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), filters.clone()));
        Ok(filters)
    }

    /// Lists the streams again at the next send (one may have gone or changed).
    fn forget(&self) {
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Whether the subject filter `filter` (`*` one token, `>` the rest) takes `subject`.
fn filter_takes(filter: &str, subject: &str) -> bool {
    let mut subject = subject.split('.');
    for f in filter.split('.') {
        match (f, subject.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (f, Some(t)) if f == t => {}
            _ => return false,
        }
    }
    subject.next().is_none()
}

struct NatsSender {
    client: Client,
    jetstream: jetstream::Context,
    streams: Arc<StreamSubjects>,
}

impl Sender for NatsSender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(async move {
            // A subject rendered from a request (its reply-to, a template) may be no
            // subject at all: publishing it could never succeed.
            if let Err(e) = config::check_subject(&to.name, false, "the subject") {
                return Err(BrokerError::refused(format!(
                    "cannot publish to {:?}: {e}",
                    to.name
                )));
            }
            let headers = to_headers(&message);
            // A JetStream request is acknowledged after its reply, so the reply must be
            // kept first: where a stream holds its subject, that is the stream's ack
            // of a JetStream publish. (A moved request keeps its own reply subject,
            // which a JetStream publish would replace: it is flushed below.)
            if message.persistent
                && message.reply_to.is_none()
                && self.held_by_a_stream(&to.name).await?
            {
                return self.stored(&to.name, headers, message.body).await;
            }
            let subject = to.name.clone();
            // A moved (unmatched) request keeps its reply subject, so it can still be
            // answered by hand.
            let published = match (message.reply_to, headers) {
                (None, None) => self.client.publish(subject, message.body).await,
                (None, Some(h)) => {
                    self.client
                        .publish_with_headers(subject, h, message.body)
                        .await
                }
                (Some(r), None) => {
                    self.client
                        .publish_with_reply(subject, r, message.body)
                        .await
                }
                (Some(r), Some(h)) => {
                    self.client
                        .publish_with_reply_and_headers(subject, r, h, message.body)
                        .await
                }
            };
            published.map_err(|e| err(&format!("cannot publish to {:?}", to.name), e))?;
            // No stream keeps it: a persistent message counts as sent once the server
            // has it (a round trip behind every message published before), handed
            // to its subscribers.
            if message.persistent {
                match tokio::time::timeout(BROKER_TIMEOUT, self.client.flush()).await {
                    Ok(r) => r.map_err(|e| err("flushing the reply", e))?,
                    Err(_) => {
                        return Err(BrokerError::new(format!(
                            "the server did not confirm the reply in {BROKER_TIMEOUT:?}"
                        )));
                    }
                }
            }
            Ok(Put::Done)
        })
    }
}

impl NatsSender {
    /// Whether a stream holds `subject`, from JetStream's list of streams (listed
    /// again every few seconds). A JetStream that cannot list them (not ready after
    /// a restart, a cluster electing leaders) fails the send, so the request is
    /// delivered again rather than its reply published where it may be lost.
    async fn held_by_a_stream(&self, subject: &str) -> Result<bool, BrokerError> {
        // A server without JetStream stores nothing.
        let Some(filters) = self.streams.get(&self.client, &self.jetstream).await? else {
            return Ok(false);
        };
        Ok(filters.iter().any(|f| filter_takes(f, subject)))
    }

    /// Publishes to a subject a stream holds, and waits for the stream's ack: the
    /// message is stored. A stream that refuses it (full, discarding new messages)
    /// or does not answer fails the send.
    async fn stored(
        &self,
        subject: &str,
        headers: Option<HeaderMap>,
        body: bytes::Bytes,
    ) -> Result<Put, BrokerError> {
        let mut publish = jetstream::message::PublishMessage::build().payload(body);
        if let Some(h) = headers {
            publish = publish.headers(h);
        }
        let acked = match self
            .jetstream
            .send_publish(subject.to_owned(), publish)
            .await
        {
            // The context's own timeout (BROKER_TIMEOUT) bounds the wait.
            Ok(ack) => ack.await.map(|_| Put::Done),
            Err(e) => Err(e),
        };
        if acked.is_err() {
            // The stream may be gone or changed: list them again next time.
            self.streams.forget();
        }
        acked.map_err(|e| {
            err(
                &format!("the stream holding {subject:?} did not store it"),
                e,
            )
        })
    }
}

/// A received NATS message as decoy's [`Message`]. `stored`: read from JetStream (its
/// reply subject is the ack subject, not a requester's inbox).
fn from_nats(m: &async_nats::Message, stored: bool) -> Message {
    let mut properties = Vec::new();
    let (mut message_id, mut correlation_id, mut reply_header) = (None, None, None);
    if let Some(h) = &m.headers {
        for (name, values) in h.iter() {
            let name: &str = name.as_ref();
            for v in values {
                let v = v.as_str();
                if name.eq_ignore_ascii_case(MSG_ID_HEADER) && message_id.is_none() {
                    message_id = Some(v.as_bytes().to_vec());
                } else if name.eq_ignore_ascii_case(CORRELATION_HEADER) && correlation_id.is_none()
                {
                    correlation_id = Some(v.as_bytes().to_vec());
                } else if name.eq_ignore_ascii_case(REPLY_TO_HEADER) && reply_header.is_none() {
                    reply_header = Some(v.to_owned());
                }
                properties.push((name.to_owned(), v.to_owned()));
            }
        }
    }
    let reply_to = if stored {
        reply_header
    } else {
        m.reply.as_ref().map(|r| r.as_str().to_owned())
    };
    Message {
        body: m.payload.clone(),
        properties,
        message_id,
        correlation_id,
        reply_to,
        reply_to_manager: None,
        format: None,
        message_type: None,
        persistent: stored,
        // The subject it came on: `{{request.destination}}` for a mapping whose subject
        // has wildcards, and the journal's destination.
        topic: Some(m.subject.as_str().to_owned()),
        ..Message::default()
    }
}

/// The headers of a message to publish: its properties and its correlation id. `None`
/// when it has neither (a plain publish, no header section).
fn to_headers(m: &Message) -> Option<HeaderMap> {
    if m.properties.is_empty() && m.correlation_id.is_none() {
        return None;
    }
    let mut h = HeaderMap::new();
    for (k, v) in &m.properties {
        // A name or value NATS cannot carry (a line break) is left out rather than
        // breaking the message.
        if k.is_empty() || k.contains([':', '\r', '\n', ' ']) || v.contains(['\r', '\n']) {
            tracing::warn!("property {k:?} cannot be a NATS header; left out of the message");
            continue;
        }
        h.append(k.as_str(), v.as_str());
    }
    if let Some(c) = &m.correlation_id
        && !m
            .properties
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(CORRELATION_HEADER))
    {
        let c = String::from_utf8_lossy(c);
        if !c.contains(['\r', '\n']) {
            h.insert(CORRELATION_HEADER, c.as_ref());
        }
    }
    Some(h)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_missing_stream_hint_names_the_subjects_its_mappings_read() {
        let conn = serde_json::json!({"connectionId": "n", "connectionData": {"type": "nats", "uri": "nats://127.0.0.1:4222"}});
        let mapping = |subject: &str| {
            serde_json::json!({"request": {"destination": subject, "jetstream": {"stream": "ORDERS"}},
                               "response": {"text": "ok"}})
        };
        let load =
            crate::config::load_for_test(&conn, &[mapping("shop.b.req"), mapping("shop.a.req")]);
        let crate::config::ConnectionKind::Nats(config) = &load.connections[0].kind else {
            panic!("a NATS connection");
        };
        let broker = NatsBroker::new(config.clone(), "n", &load.mappings);
        assert_eq!(
            broker.how_to_create("ORDERS"),
            "create the stream with the subjects the system publishes requests on (for example `nats stream add ORDERS --subjects 'shop.a.req,shop.b.req' --defaults`)"
        );
    }

    #[test]
    fn subject_filters_take_subjects_as_nats_matches_them() {
        for (filter, subject, takes) in [
            ("orders.replies", "orders.replies", true),
            ("orders.replies", "orders.replies.1", false),
            ("orders.replies.1", "orders.replies", false),
            ("orders.*", "orders.replies", true),
            ("orders.*", "orders.replies.1", false),
            ("orders.*.1", "orders.replies.1", true),
            ("orders.>", "orders.replies.1", true),
            ("orders.>", "orders", false),
            (">", "anything.at.all", true),
            ("*", "one", true),
            ("*", "one.two", false),
            ("orders", "ordersx", false),
        ] {
            assert_eq!(filter_takes(filter, subject), takes, "{filter} / {subject}");
        }
    }

    #[test]
    fn reconnect_pauses_follow_the_backoff_steps() {
        assert_eq!(reconnect_pause(1), Duration::ZERO);
        for (attempt, step) in [(2, 100), (3, 200), (4, 400), (8, 5000), (100, 5000)] {
            let p = reconnect_pause(attempt);
            let step = Duration::from_millis(step);
            assert!(p >= step / 2 && p <= step, "{attempt}: {p:?}");
        }
    }

    #[test]
    fn headers_are_properties_and_ids() {
        let mut h = HeaderMap::new();
        h.insert("kind", "vip");
        h.append("kind", "gold");
        h.insert("Nats-Msg-Id", "m-1");
        h.insert("reply-to", "replies.1");
        let m = async_nats::Message {
            subject: "orders.new".into(),
            reply: Some("_INBOX.x".into()),
            payload: "{}".into(),
            headers: Some(h),
            status: None,
            description: None,
            length: 0,
        };
        let core = from_nats(&m, false);
        assert_eq!(core.reply_to.as_deref(), Some("_INBOX.x"));
        assert_eq!(core.topic.as_deref(), Some("orders.new"));
        assert_eq!(core.message_id.as_deref(), Some(&b"m-1"[..]));
        assert!(!core.persistent);
        let kinds: Vec<&str> = core
            .properties
            .iter()
            .filter(|(k, _)| k == "kind")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(kinds, ["vip", "gold"]);
        let stored = from_nats(&m, true);
        assert_eq!(stored.reply_to.as_deref(), Some("replies.1"));
        assert!(stored.persistent);

        let reply = Message {
            properties: vec![
                ("served-by".into(), "decoy".into()),
                ("bad\nname".into(), "x".into()),
            ],
            correlation_id: Some(b"m-1".to_vec()),
            ..Message::default()
        };
        let h = to_headers(&reply).unwrap();
        assert_eq!(h.get("served-by").map(|v| v.as_str()), Some("decoy"));
        assert_eq!(h.get(CORRELATION_HEADER).map(|v| v.as_str()), Some("m-1"));
        assert_eq!(h.iter().count(), 2);
        assert!(to_headers(&Message::default()).is_none());
    }
}
