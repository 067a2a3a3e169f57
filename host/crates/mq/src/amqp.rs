//! AMQP 0-9-1 (RabbitMQ) with `lapin` on tokio.
//!
//! A connection entry opens `readConnectionsToOpen` connections for receiving and
//! `writeConnectionsToOpen` for sending; receiver and sender number `i` use
//! connection `i % n`, each on its own channel. Receivers consume with manual
//! acknowledgement and `basic.qos(prefetch)`, so the broker never hands one receiver
//! more than `prefetch` unacknowledged requests. Senders publish on channels in
//! confirm mode and wait for the broker's confirm before the request is acknowledged.
//! A dropped connection is replaced on the next receiver or sender request (the
//! runtime retries with backoff); RabbitMQ redelivers whatever was not acknowledged.
//!
//! lapin runs each connection on an OS thread of its own, which waits on the socket
//! and knows nothing of the future that asked for the connection. A connect decoy
//! gives up on (its deadline passed, or decoy is stopping) would leave that thread
//! and its socket waiting for as long as the peer keeps the socket open: forever
//! against a listener that accepts and never answers, one thread and one descriptor
//! per attempt. So decoy opens the TCP socket itself ([`Connection::connector`]) and
//! keeps a second descriptor of it ([`Socket`]): a connect dropped before it
//! finished, and a pooled connection dropped because it stopped answering, shut the
//! socket down, which wakes lapin's thread with an end of file; it ends and closes
//! its descriptor.

use std::net::Shutdown;
use std::os::fd::AsFd as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    BasicRejectOptions, ConfirmSelectOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::tcp::{AsyncTcpStream, OwnedTLSConfig};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::config::{AmqpConfig, TOPIC_QUEUE_PREFIX};
use super::transport::PrivateReplies;
use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, ReplyPoint,
    Sender, Settle,
};

/// The exchange topics are published on and subscribed to (RabbitMQ's MQTT and STOMP
/// plugins use it too).
pub const TOPIC_EXCHANGE: &str = "amq.topic";

/// AMQP delivery mode 2: the broker keeps the message across a restart (when its queue
/// is durable). Mode 1, or none, is transient.
const PERSISTENT: u8 = 2;

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// How long an operation on a channel may take before it counts as failed (and is
/// retried with backoff); connecting has its own deadline, `connectTimeoutMilliseconds`
/// (10 s by default). A broker that is starting, or a network that drops packets, can
/// accept a socket and never answer, and a connect without a deadline would then hold
/// its pool slot, and every receiver and sender on it, for good.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a reply waits for its publisher confirm. After it the put counts as
/// failed: the request goes back to its queue (its reply may then be sent twice,
/// never lost) and the sender opens a new channel.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker operation that failed, or did not finish in time.
enum Late<E> {
    Failed(E),
    After(Duration),
}

impl<E: std::fmt::Display> std::fmt::Display for Late<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Late::Failed(e) => e.fmt(f),
            Late::After(d) => write!(f, "no answer from the broker in {d:?}"),
        }
    }
}

/// `op.timed().await.or_late()`: `op` with [`BROKER_TIMEOUT`] as its deadline.
trait Deadline: IntoFuture + Sized {
    fn timed(self) -> tokio::time::Timeout<Self::IntoFuture> {
        tokio::time::timeout(BROKER_TIMEOUT, self)
    }
}

impl<F: IntoFuture> Deadline for F {}

trait OrLate<T, E> {
    fn or_late(self) -> Result<T, Late<E>>;
}

impl<T, E> OrLate<T, E> for Result<Result<T, E>, tokio::time::error::Elapsed> {
    fn or_late(self) -> Result<T, Late<E>> {
        match self {
            Ok(r) => r.map_err(Late::Failed),
            Err(_) => Err(Late::After(BROKER_TIMEOUT)),
        }
    }
}

/// The TCP socket under one lapin connection, as a second descriptor, so decoy can
/// shut it down (see the module's doc). `None` until the socket is open.
#[derive(Debug, Default)]
struct Socket(Mutex<SocketState>);

#[derive(Debug, Default)]
struct SocketState {
    dup: Option<std::net::TcpStream>,
    /// The connect was given up before the socket opened: it must not be used.
    closed: bool,
}

impl Socket {
    fn state(&self) -> std::sync::MutexGuard<'_, SocketState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a descriptor of the socket lapin is about to use; fails when the connect
    /// was already given up, so lapin drops the socket at once.
    fn keep(&self, dup: std::net::TcpStream) -> std::io::Result<()> {
        let mut state = self.state();
        if state.closed {
            let _ = dup.shutdown(Shutdown::Both);
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "the connect was given up",
            ));
        }
        state.dup = Some(dup);
        Ok(())
    }

    /// Shuts the socket down: lapin's thread sees the end of the stream and ends.
    fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        if let Some(dup) = state.dup.take() {
            let _ = dup.shutdown(Shutdown::Both);
        }
    }
}

/// Closes the socket of a connect that is dropped before it finished, whether its
/// deadline passed or its task was stopped; defused once the connection is made.
struct CloseUnlessConnected(Option<Arc<Socket>>);

impl Drop for CloseUnlessConnected {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.close();
        }
    }
}

/// Opens the TCP (and TLS) stream for a connection as lapin's own connector would,
/// keeping a descriptor of the socket in `socket`.
async fn open_stream(
    uri: AMQPUri,
    socket: &Socket,
) -> lapin::Result<AsyncTcpStream<async_compat::Compat<tokio::net::TcpStream>>> {
    let host = uri.authority.host.as_str();
    let tcp = tokio::net::TcpStream::connect((host, uri.authority.port)).await?;
    tcp.set_nodelay(true)?;
    socket.keep(std::net::TcpStream::from(tcp.as_fd().try_clone_to_owned()?))?;
    let stream = AsyncTcpStream::Plain(async_compat::CompatExt::compat(tcp));
    if matches!(uri.scheme, AMQPScheme::AMQPS) {
        Ok(stream
            .into_tls(host, OwnedTLSConfig::default().as_ref())
            .await?)
    } else {
        Ok(stream)
    }
}

/// A pooled connection and its socket.
struct Pooled {
    conn: Arc<Connection>,
    socket: Arc<Socket>,
}

type Slot = AsyncMutex<Option<Pooled>>;

/// One `amqp` connection entry and its two pools.
pub struct AmqpBroker {
    config: AmqpConfig,
    /// The URI without its password, for messages.
    shown: String,
    /// A slot per pooled connection. The slot's async lock is held while connecting,
    /// so receivers and senders starting together share the slot's one connection
    /// instead of each opening their own (it guards a connect, never a message).
    read: Vec<Slot>,
    write: Vec<Slot>,
}

impl std::fmt::Debug for AmqpBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpBroker")
            .field("uri", &self.shown)
            .finish_non_exhaustive()
    }
}

/// `amqp://guest:secret@host/vh` → `amqp://guest@host/vh`.
fn without_password(uri: &str) -> String {
    match (uri.find("://"), uri.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &uri[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}@{}", &uri[..s + 3], user, &uri[at + 1..])
        }
        _ => uri.to_owned(),
    }
}

impl AmqpBroker {
    pub fn new(config: AmqpConfig) -> AmqpBroker {
        let slots = |n: usize| (0..n).map(|_| AsyncMutex::new(None)).collect();
        AmqpBroker {
            shown: without_password(&config.uri),
            read: slots(config.read_connections),
            write: slots(config.write_connections),
            config,
        }
    }

    /// Connects, within `connectTimeoutMilliseconds`. A connect that fails, times out or is
    /// dropped closes its socket, so lapin's thread for it ends.
    async fn connect(&self) -> Result<Pooled, BrokerError> {
        let failed =
            |e: &dyn std::fmt::Display| err(&format!("cannot connect to {}", self.shown), e);
        let uri: AMQPUri = self.config.uri.parse().map_err(|e: String| failed(&e))?;
        let runtime = lapin::runtime::default_runtime().map_err(|e| failed(&e))?;
        let socket = Arc::new(Socket::default());
        let mut unless_connected = CloseUnlessConnected(Some(socket.clone()));
        let for_lapin = socket.clone();
        let conn = Connection::connector(
            uri,
            runtime,
            async move |uri, _runtime| open_stream(uri, &for_lapin).await,
            ConnectionProperties::default().with_connection_name("decoy".into()),
        );
        let conn = match tokio::time::timeout(self.config.connect_timeout, conn).await {
            Ok(c) => c.map_err(|e| failed(&e))?,
            Err(_) => {
                return Err(failed(&format_args!(
                    "no answer from the broker in {:?}",
                    self.config.connect_timeout
                )));
            }
        };
        unless_connected.0 = None;
        Ok(Pooled {
            conn: Arc::new(conn),
            socket,
        })
    }

    /// The pooled connection at `slot`, reconnecting when it was lost.
    async fn connection(
        &self,
        pool: &[Slot],
        index: usize,
    ) -> Result<Arc<Connection>, BrokerError> {
        let mut slot = pool[index % pool.len()].lock().await;
        if let Some(p) = slot.as_ref().filter(|p| p.conn.status().connected()) {
            return Ok(p.conn.clone());
        }
        if let Some(lost) = slot.take() {
            lost.socket.close();
        }
        let pooled = self.connect().await?;
        let conn = pooled.conn.clone();
        *slot = Some(pooled);
        Ok(conn)
    }

    /// A new channel on the pooled connection at `slot`. When the connection cannot
    /// open one (it says it is connected but does not answer, as after a broker
    /// restart), it is dropped from the pool, so the next attempt connects afresh.
    async fn channel(&self, pool: &[Slot], index: usize) -> Result<Channel, BrokerError> {
        let conn = self.connection(pool, index).await?;
        match conn.create_channel().timed().await.or_late() {
            Ok(c) => Ok(c),
            Err(e) => {
                let mut slot = pool[index % pool.len()].lock().await;
                if slot.as_ref().is_some_and(|p| Arc::ptr_eq(&p.conn, &conn))
                    && let Some(lost) = slot.take()
                {
                    lost.socket.close();
                }
                Err(err("cannot open a channel", e))
            }
        }
    }
}

impl AmqpBroker {
    /// Consumes `queue` on `channel` (with the connection's prefetch) as `tag`: the
    /// receiver of a mapping's queue and of decoy's own reply queue alike.
    async fn consume(
        &self,
        channel: Channel,
        queue: String,
        tag: String,
    ) -> Result<AmqpReceiver, BrokerError> {
        channel
            .basic_qos(self.config.prefetch, BasicQosOptions::default())
            .timed()
            .await
            .or_late()
            .map_err(|e| err("basic.qos", e))?;
        let consumer = channel
            .basic_consume(
                queue.as_str().into(),
                tag.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .timed()
            .await
            .or_late()
            .map_err(|e| err(&format!("cannot consume from {queue:?}"), e))?;
        Ok(AmqpReceiver {
            _channel: channel,
            consumer,
            queue,
        })
    }

    /// Checks that `queue` exists (a passive declare): decoy does not create the
    /// system's queues unless the connection says `declareQueues`, so a missing one is
    /// reported rather than silently made, empty, on a shared broker. With
    /// `declareQueues` a missing queue is declared durable, on the same terms as the
    /// unmatched queue. Returns whether it did (the channel is then closed).
    async fn ensure_queue(&self, channel: &Channel, queue: &str) -> Result<bool, BrokerError> {
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let found = channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .timed()
            .await
            .or_late();
        let missing = match found {
            Ok(_) => return Ok(false),
            Err(Late::Failed(e)) if not_found(&e) => e,
            Err(e) => return Err(err(&format!("queue {queue:?} is not available"), e)),
        };
        if !self.config.declare_queues {
            return Err(BrokerError::missing_queue(
                queue,
                format!("queue {queue:?} does not exist: {missing}"),
            ));
        }
        // On a channel of its own: the 404 closed this one.
        self.declare_queue(queue).await?;
        tracing::info!(
            "declared queue {queue:?} on {} (the connection says declareQueues)",
            self.shown
        );
        Ok(true)
    }
}

/// The broker's 404: the queue (or exchange) does not exist.
fn not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(p) if p.get_id() == 404)
}

impl Broker for AmqpBroker {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            let mut channel = self.channel(&self.read, index).await?;
            let queue = if from.topic {
                // A topic is a binding pattern on `amq.topic`. The mapping's receivers
                // share one queue bound to it (each publication is answered once), which
                // RabbitMQ deletes when the last of them goes.
                let queue = format!("{TOPIC_QUEUE_PREFIX}{}", from.name);
                channel
                    .queue_declare(
                        queue.as_str().into(),
                        QueueDeclareOptions {
                            auto_delete: true,
                            ..QueueDeclareOptions::default()
                        },
                        FieldTable::default(),
                    )
                    .timed()
                    .await
                    .or_late()
                    .map_err(|e| err(&format!("cannot declare {queue:?} for {from}"), e))?;
                channel
                    .queue_bind(
                        queue.as_str().into(),
                        TOPIC_EXCHANGE.into(),
                        from.name.as_str().into(),
                        QueueBindOptions::default(),
                        FieldTable::default(),
                    )
                    .timed()
                    .await
                    .or_late()
                    .map_err(|e| err(&format!("cannot bind {queue:?} to {from}"), e))?;
                queue
            } else {
                if self.ensure_queue(&channel, &from.name).await? {
                    // The passive declare's 404 closed its channel.
                    channel = self.channel(&self.read, index).await?;
                }
                from.name.clone()
            };
            let rx = self
                .consume(channel, queue, format!("decoy-{index}"))
                .await?;
            Ok(Box::new(rx) as Box<dyn Receiver>)
        })
    }

    fn how_to_create(&self, queue: &str) -> String {
        format!(
            "create it (for example `rabbitmqadmin declare queue name={queue} durable=true`), \
             or set \"declareQueues\": true on the connection to let decoy declare the queues \
             it listens on"
        )
    }

    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            let mut channels = Vec::with_capacity(2);
            for _ in 0..2 {
                let channel = self.channel(&self.write, index).await?;
                channel
                    .confirm_select(ConfirmSelectOptions::default())
                    .timed()
                    .await
                    .or_late()
                    .map_err(|e| err("confirm.select", e))?;
                channels.push(channel);
            }
            let (Some(alone), Some(channel)) = (channels.pop(), channels.pop()) else {
                return Err(BrokerError::new("no channel"));
            };
            Ok(Box::new(AmqpSender {
                channel,
                alone: AsyncMutex::new(alone),
            }) as Box<dyn Sender>)
        })
    }

    /// A server-named, exclusive, auto-deleted queue (what RPC clients declare for
    /// their replies): RabbitMQ deletes it when its channel closes.
    fn private_replies(&self, index: usize) -> BoxFuture<'_, Result<PrivateReplies, BrokerError>> {
        Box::pin(async move {
            let channel = self.channel(&self.read, index).await?;
            let declared = channel
                .queue_declare(
                    "".into(),
                    QueueDeclareOptions {
                        exclusive: true,
                        auto_delete: true,
                        ..QueueDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .timed()
                .await
                .or_late()
                .map_err(|e| err("cannot declare a reply queue", e))?;
            let queue = declared.name().as_str().to_owned();
            let point = ReplyPoint {
                name: queue.clone(),
                per_request: None,
            };
            let rx = self
                .consume(channel, queue, format!("decoy-replies-{index}"))
                .await?;
            Ok((point, Box::new(rx) as Box<dyn Receiver>))
        })
    }

    /// Declares `queue` durable (a classic queue, no arguments) on a channel of its
    /// own. Called when a message for it came back unroutable, so it does not exist;
    /// declaring an existing queue with the same settings is a no-op.
    fn declare_queue<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async move {
            let channel = self.channel(&self.write, 0).await?;
            channel
                .queue_declare(
                    queue.into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..QueueDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .timed()
                .await
                .or_late()
                .map_err(|e| err(&format!("cannot declare queue {queue:?}"), e))?;
            let _ = channel.close(200, "declared".into()).timed().await;
            Ok(())
        })
    }
}

struct AmqpReceiver {
    _channel: Channel,
    consumer: lapin::Consumer,
    queue: String,
}

impl Receiver for AmqpReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.consumer.next().await {
                Some(Ok(d)) => {
                    let message = from_amqp(&d.properties, d.data);
                    Ok(Some(Box::new(AmqpDelivery {
                        acker: d.acker,
                        queue: self.queue.clone(),
                        message,
                        settled: false,
                    }) as Box<dyn Delivery>))
                }
                Some(Err(e)) => Err(err("consumer failed", e)),
                None => Err(BrokerError::new(
                    "the consumer was cancelled or its connection closed",
                )),
            }
        })
    }
}

struct AmqpDelivery {
    acker: lapin::Acker,
    queue: String,
    message: Message,
    settled: bool,
}

/// A delivery dropped unsettled (its handling panicked) goes back to its queue now,
/// instead of staying unacknowledged until its channel closes.
impl Drop for AmqpDelivery {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracing::warn!(
            "a request on {} was dropped before it was settled; it goes back to its queue",
            self.queue
        );
        let acker = self.acker.clone();
        runtime.spawn(async move {
            let requeue = BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            };
            let _ = acker.nack(requeue).await;
        });
    }
}

impl Delivery for AmqpDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        self.settled = true;
        Box::pin(async move {
            let settle = async {
                match how {
                    Settle::Ack => self.acker.ack(BasicAckOptions::default()).await,
                    Settle::Requeue => {
                        self.acker
                            .nack(BasicNackOptions {
                                requeue: true,
                                ..BasicNackOptions::default()
                            })
                            .await
                    }
                    Settle::Reject => {
                        self.acker
                            .reject(BasicRejectOptions { requeue: false })
                            .await
                    }
                }
            };
            let done = settle.timed().await.or_late();
            done.map(|_| ()).map_err(|e| err("settling a delivery", e))
        })
    }
}

/// Publishes on channels in confirm mode.
///
/// A message published with `mandatory` to a queue that does not exist comes back
/// (basic.return) before its confirm, and lapin hands it to whichever confirm of the
/// channel completes next, which with several publishes in flight may be another
/// message's (a persistent message's confirm waits for the disk, a return does not).
/// For replies that does not matter (returned or not, the request is acknowledged),
/// so they share `channel`, several in flight. A message whose fate depends on it
/// (a move to the unmatched queue, kept when returned) goes on `alone`, one at a time,
/// so its return is its own.
struct AmqpSender {
    channel: Channel,
    alone: AsyncMutex<Channel>,
}

impl Sender for AmqpSender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(publish(&self.channel, to, message))
    }

    fn send_alone<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(async move {
            let alone = self.alone.lock().await;
            publish(&alone, to, message).await
        })
    }
}

/// Publishes `message` to `to` and waits for its confirm.
async fn publish(
    channel: &Channel,
    to: &Destination,
    message: Message,
) -> Result<Put, BrokerError> {
    // A queue through the default exchange; a topic through `amq.topic`, where a
    // publication nobody subscribed to is normal rather than an error.
    let (exchange, queue) = if to.topic {
        (TOPIC_EXCHANGE, to.name.as_str())
    } else {
        ("", to.name.as_str())
    };
    let confirm = channel
        .basic_publish(
            exchange.into(),
            queue.into(),
            BasicPublishOptions {
                mandatory: !to.topic,
                ..BasicPublishOptions::default()
            },
            &message.body,
            to_amqp(&message),
        )
        .timed()
        .await
        .or_late()
        .map_err(|e| err("basic.publish", e))?;
    let confirm = match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
        Ok(c) => c.map_err(|e| err("waiting for the publisher confirm", e))?,
        Err(_) => {
            return Err(BrokerError::new(format!(
                "no publisher confirm in {CONFIRM_TIMEOUT:?}"
            )));
        }
    };
    if confirm.is_nack() {
        return Err(BrokerError::new(format!(
            "the broker refused the message for {queue:?}"
        )));
    }
    if let Some(returned) = confirm.take_message() {
        // Unroutable: no queue of that name. The runtime decides (a reply is
        // dropped with a warning, an unmatched message is kept).
        tracing::debug!(
            "the broker returned a message for {:?}: {}",
            returned.delivery.routing_key.as_str(),
            returned.reply_text.as_str()
        );
        return Ok(Put::NoSuchQueue);
    }
    Ok(Put::Done)
}

fn text_of(v: &AMQPValue) -> String {
    match v {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Float(n) => n.to_string(),
        AMQPValue::Double(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn from_amqp(p: &BasicProperties, body: Vec<u8>) -> Message {
    let bytes = |s: &Option<ShortString>| s.as_ref().map(|s| s.as_str().as_bytes().to_vec());
    Message {
        body: body.into(),
        properties: p
            .headers()
            .as_ref()
            .map(|h| {
                h.inner()
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), text_of(v)))
                    .collect()
            })
            .unwrap_or_default(),
        message_id: bytes(p.message_id()),
        correlation_id: bytes(p.correlation_id()),
        reply_to: p.reply_to().as_ref().map(|s| s.as_str().to_owned()),
        reply_to_manager: None,
        format: p.content_type().as_ref().map(|s| s.as_str().to_owned()),
        message_type: p.kind().as_ref().map(|s| s.as_str().to_owned()),
        persistent: *p.delivery_mode() == Some(PERSISTENT),
        ..Message::default()
    }
}

fn to_amqp(m: &Message) -> BasicProperties {
    let mut p = BasicProperties::default();
    if m.persistent {
        p = p.with_delivery_mode(PERSISTENT);
    }
    if !m.properties.is_empty() {
        let mut headers = FieldTable::default();
        for (k, v) in &m.properties {
            headers.insert(k.clone().into(), AMQPValue::LongString(v.clone().into()));
        }
        p = p.with_headers(headers);
    }
    if let Some(c) = &m.correlation_id {
        p = p.with_correlation_id(String::from_utf8_lossy(c).into_owned().into());
    }
    if let Some(id) = &m.message_id {
        p = p.with_message_id(String::from_utf8_lossy(id).into_owned().into());
    }
    if let Some(r) = &m.reply_to {
        p = p.with_reply_to(r.clone().into());
    }
    // An MQ format name is not a content type; only a real one is passed on.
    if let Some(f) = m.format.as_ref().filter(|f| f.contains('/')) {
        p = p.with_content_type(f.clone().into());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            without_password("amqp://guest:secret@127.0.0.1:5672/%2f"),
            "amqp://guest@127.0.0.1:5672/%2f"
        );
        assert_eq!(without_password("amqp://127.0.0.1"), "amqp://127.0.0.1");
    }
}
