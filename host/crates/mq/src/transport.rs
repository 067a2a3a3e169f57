//! The small interface a broker implements: receive, settle, send.
//!
//! The runtime ([`super::runtime`]) knows nothing about AMQP or the MQI: it asks a
//! [`Broker`] for receivers on a queue and for senders, takes [`Delivery`]s from a
//! receiver, sends replies with a [`Sender`] (which returns only once the broker has
//! confirmed the message), and then settles the delivery. A third broker is one module
//! implementing these traits. Futures are boxed so the traits stay object-safe: one
//! allocation per call is nothing next to a network round trip.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A broker failure: the connection dropped, a queue is missing, a put was refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BrokerError {
    message: String,
    /// The queue the broker says does not exist, when that is the failure: the
    /// runtime then says so once, calmly, instead of logging every retry.
    missing_queue: Option<String>,
    /// Sending this message again as it is could not succeed (see [`BrokerError::refused`]).
    lasting: bool,
}

impl BrokerError {
    pub fn new(s: impl Into<String>) -> Self {
        BrokerError {
            message: s.into(),
            missing_queue: None,
            lasting: false,
        }
    }

    /// The broker says `queue` does not exist.
    pub fn missing_queue(queue: impl Into<String>, s: impl Into<String>) -> Self {
        BrokerError {
            message: s.into(),
            missing_queue: Some(queue.into()),
            lasting: false,
        }
    }

    /// A message that cannot be sent as it is, however often it is tried: its
    /// destination is no name the protocol allows (a rendered MQTT topic with a
    /// wildcard, a NATS subject with a space). A reply refused so is dropped and its
    /// request acknowledged, rather than the request coming back for ever.
    pub fn refused(s: impl Into<String>) -> Self {
        BrokerError {
            message: s.into(),
            missing_queue: None,
            lasting: true,
        }
    }

    /// Whether trying again could not help ([`BrokerError::refused`]).
    pub fn is_lasting(&self) -> bool {
        self.lasting
    }

    /// The queue that does not exist, when that is what failed.
    pub fn missing(&self) -> Option<&str> {
        self.missing_queue.as_deref()
    }
}

/// A message, as received or to be sent, independent of the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub body: Bytes,
    /// Application properties (AMQP headers, MQ message properties), as text.
    pub properties: Vec<(String, String)>,
    pub message_id: Option<Vec<u8>>,
    pub correlation_id: Option<Vec<u8>>,
    /// The queue a reply should go to.
    pub reply_to: Option<String>,
    /// IBM MQ: the queue manager of `reply_to` (a request's ReplyToQMgr).
    pub reply_to_manager: Option<String>,
    /// MQ format (`MQSTR`), or for AMQP the content type.
    pub format: Option<String>,
    /// MQ: MQMT_REQUEST, MQMT_REPLY...; AMQP: the `type` property. Informational.
    pub message_type: Option<String>,
    /// Kept across a broker restart: AMQP delivery mode 2, MQ MQPER_PERSISTENT. A
    /// reply has its request's, so a persistent request never gets a reply that a
    /// restart can lose.
    pub persistent: bool,
    /// The topic a message was published on, when the broker says it (MQTT): a
    /// mapping may listen on a filter with wildcards, and templates see this one.
    pub topic: Option<String>,
    /// MQTT: the quality of service a request came with, which its reply gets.
    pub qos: Option<u8>,
    /// MQTT: the broker keeps the message as its topic's last one.
    pub retain: bool,
}

/// A queue, or a topic (publish/subscribe), by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Destination {
    pub name: String,
    pub topic: bool,
}

impl Destination {
    pub fn queue(name: impl Into<String>) -> Destination {
        Destination {
            name: name.into(),
            topic: false,
        }
    }

    pub fn topic(name: impl Into<String>) -> Destination {
        Destination {
            name: name.into(),
            topic: true,
        }
    }
}

/// `ORDERS` for a queue, `topic prices/ACME` for a topic: for messages.
impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.topic {
            write!(f, "topic {}", self.name)
        } else {
            f.write_str(&self.name)
        }
    }
}

/// What to do with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Done: remove it from the queue (AMQP ack, MQ commit).
    Ack,
    /// Put it back to be delivered again (AMQP nack with requeue, MQ backout).
    Requeue,
    /// Refuse it for good (AMQP reject without requeue: the queue's dead-letter
    /// exchange, if any, gets it).
    Reject,
}

/// A received message that must be settled once. One dropped unsettled (its handling
/// panicked) is put back on its queue by the broker adapter, as a requeue, so it is
/// answered when it comes again rather than held until its connection closes.
pub trait Delivery: Send {
    fn message(&self) -> &Message;
    /// The queue (or topic subscription) it came from.
    fn queue(&self) -> &str;
    fn settle(self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>>;
}

/// Messages from one queue, one at a time. `Ok(None)` means the receiver was closed
/// (shutdown); an error means the connection was lost and a new receiver is needed.
pub trait Receiver: Send {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>>;
}

/// What became of a message the broker accepted to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// On its queue (confirmed).
    Done,
    /// Returned: no queue of that name (AMQP: unroutable with `mandatory`; MQ:
    /// MQRC_UNKNOWN_OBJECT_NAME). Putting it again as it is could not succeed.
    NoSuchQueue,
}

/// Puts messages on queues; `send` resolves once the broker has taken the message
/// (AMQP publisher confirm, MQ put completed) or said there is no such queue.
pub trait Sender: Send + Sync {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>>;
    /// As `send`, for a message whose [`Put::NoSuchQueue`] must be its own for
    /// certain (a move to the unmatched queue). AMQP puts it on a channel of its own,
    /// one at a time; brokers that answer each put separately just `send`.
    fn send_alone<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        self.send(to, message)
    }
}

/// A destination of decoy's own that a back end's replies come back to while decoy
/// records ([`Broker::private_replies`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyPoint {
    /// The queue, subject, topic or address replies are sent to.
    pub name: String,
    /// Each request gets a reply-to of its own, `name` + `separator` + a token (a
    /// NATS inbox, an MQTT response topic), and a reply is paired by the subject or
    /// topic it arrives on. Otherwise every request names `name` and replies are
    /// paired by correlation id.
    pub per_request: Option<char>,
}

impl ReplyPoint {
    /// The reply-to a forwarded request with pairing `token` names.
    pub fn reply_to(&self, token: &str) -> String {
        match self.per_request {
            Some(sep) => format!("{}{sep}{token}", self.name),
            None => self.name.clone(),
        }
    }

    /// The token of a reply that arrived on `topic` (per-request reply-tos only).
    pub fn token_of<'a>(&self, topic: &'a str) -> Option<&'a str> {
        let sep = self.per_request?;
        topic
            .strip_prefix(self.name.as_str())?
            .strip_prefix(sep)
            .filter(|t| !t.is_empty())
    }
}

/// A reply destination of decoy's own and the receiver on it.
pub type PrivateReplies = (ReplyPoint, Box<dyn Receiver>);

/// One configured broker connection (with its pools).
pub trait Broker: Send + Sync {
    /// A human-readable name for logs (`amqp://127.0.0.1:5672/%2f`, no password).
    fn describe(&self) -> String;
    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>>;
    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>>;
    /// What this broker calls what a mapping listens on, for messages about one
    /// that is missing ("queue"; NATS JetStream: "stream").
    fn listened_kind(&self) -> &'static str {
        "queue"
    }
    /// How a user creates `queue` on this broker (for the message that says it is
    /// missing): a command to run, or the setting that lets decoy declare it.
    fn how_to_create(&self, queue: &str) -> String {
        format!("define queue {queue:?} on the broker")
    }

    /// Replies one sender may have put and not yet seen confirmed. 8 suits a broker
    /// whose client tracks confirms in a shared structure (lapin: 64 was slower);
    /// transports whose confirms are cheap to wait for raise it, so the broker's
    /// round trip does not cap a queue's throughput.
    fn in_flight(&self) -> usize {
        8
    }
    /// Creates `queue`, durable, when it does not exist: for the unmatched queue,
    /// which is decoy's own, so an unmatched message is kept rather than returned.
    /// A broker whose clients cannot create queues (IBM MQ) says so.
    fn declare_queue<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async move {
            Err(BrokerError::new(format!(
                "{} cannot create queue {queue:?}: define it on the broker",
                self.describe()
            )))
        })
    }
    /// A reply destination of decoy's own and a receiver on it, for recording: a
    /// forwarded request names it as its reply-to, so the back end's reply comes to
    /// decoy, which passes it on to the requester. It lasts as long as the receiver
    /// (an exclusive queue, a subscription). A broker that has none says so; a
    /// recording then names a fixed reply queue.
    fn private_replies(&self, index: usize) -> BoxFuture<'_, Result<PrivateReplies, BrokerError>> {
        let _ = index;
        Box::pin(async move {
            Err(BrokerError::new(format!(
                "{} has no reply destination of decoy's own: give the route a fixed reply queue (\"reply\": {{\"queue\": ...}})",
                self.describe()
            )))
        })
    }
}
