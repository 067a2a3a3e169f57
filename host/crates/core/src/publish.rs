//! The seam between stubs that publish messages and the brokers that carry them.
//!
//! A stub (HTTP or MQ) may name the `message` serve-event listener: once its answer
//! is out, a message goes to a queue, topic or subject of a connection of
//! `mq-connections.json`. Reading and rendering those listeners is
//! [`crate::webhooks`]'s (they share the webhooks' templating, delays and limits);
//! putting a rendered message on a broker is behind [`MessagePublisher`], which
//! `decoy-mq` implements with its brokers and the `decoy` binary hands to the webhook
//! sender and the admin API. `decoy-core` never names a broker.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Where a `message` listener publishes, as written in the stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTarget {
    /// The `connectionId` of a connection in `mq-connections.json`.
    pub connection: String,
    /// The queue, topic or subject name.
    pub destination: String,
    /// Published on a topic (publish/subscribe) rather than put on a queue.
    pub topic: bool,
}

impl fmt::Display for MessageTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.topic { "topic" } else { "queue" };
        write!(
            f,
            "{kind} {:?} of connection {:?}",
            self.destination, self.connection
        )
    }
}

/// A message to publish now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub target: MessageTarget,
    pub body: Bytes,
    /// Application properties (AMQP headers, MQTT 5 user properties, NATS headers).
    pub properties: Vec<(String, String)>,
}

/// Why a message was not published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishError {
    /// No connection of that name is configured (now).
    UnknownConnection(String),
    /// The broker refused it, or could not be reached.
    Broker(String),
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::UnknownConnection(c) => write!(
                f,
                "no connection {c:?} in mq-connections.json (connectionId)"
            ),
            PublishError::Broker(e) => f.write_str(e),
        }
    }
}

pub type PublishFuture = Pin<Box<dyn Future<Output = Result<(), PublishError>> + Send>>;

/// Publishes messages on the configured MQ connections. `publish` resolves once the
/// broker has taken the message (confirmed, where the protocol confirms).
pub trait MessagePublisher: Send + Sync + fmt::Debug {
    fn publish(&self, message: OutgoingMessage) -> PublishFuture;
    /// Whether a connection named `id` is configured now.
    fn has_connection(&self, id: &str) -> bool;
}

/// Most sub-events one served request keeps (a stub with more listeners shows the
/// first ones).
pub const MAX_SUB_EVENTS: usize = 32;

/// What became of a served request's listeners after its answer, for the journal
/// (WireMock's serve-event `subEvents`). Shared between the journal entry and the
/// sender; appended to once per listener, read by the admin API.
#[derive(Debug)]
pub struct SubEvents {
    started: Instant,
    events: Mutex<Vec<SubEvent>>,
}

#[derive(Debug, Clone)]
pub struct SubEvent {
    /// `MESSAGE_PUBLISHED`, `MESSAGE_NOT_PUBLISHED`.
    pub kind: &'static str,
    /// From when the request was recorded.
    pub offset: Duration,
    pub data: serde_json::Value,
}

impl Default for SubEvents {
    fn default() -> Self {
        SubEvents {
            started: Instant::now(),
            events: Mutex::default(),
        }
    }
}

impl SubEvents {
    pub fn push(&self, kind: &'static str, data: serde_json::Value) {
        let offset = self.started.elapsed();
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() < MAX_SUB_EVENTS {
            events.push(SubEvent { kind, offset, data });
        }
    }

    pub fn list(&self) -> Vec<SubEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
