//! Publishing on the configured connections, for stubs' `message` listeners and the
//! admin API: `decoy-core`'s [`MessagePublisher`] on the broker interface, so every
//! transport (AMQP 0-9-1, AMQP 1.0, IBM MQ, MQTT, NATS) publishes the same way.
//!
//! Each connection of `mq-connections.json` gets a broker of its own here, apart from
//! the runtime's (which exists only while MQ mappings are served, and is swapped on
//! reload): an HTTP-only root with a connection file publishes too. Its sender is
//! opened on the first message and kept; a send that fails drops it, and the next
//! message opens a new one. The set is replaced whole when the connections are
//! reloaded; a message in flight finishes on the sender it took.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use decoy_core::publish::{MessagePublisher, OutgoingMessage, PublishError, PublishFuture};

use crate::config::Connection;
use crate::transport::{Broker, Destination, Message, Put, Sender};

/// The publishing side of every configured connection.
#[derive(Debug, Default)]
pub struct Publishers {
    /// By `connectionId`; swapped whole on reload, read under a short lock.
    lanes: Mutex<Arc<HashMap<String, Arc<Lane>>>>,
}

struct Lane {
    broker: Arc<dyn Broker>,
    /// The open sender. A `tokio` mutex, held across opening one, so that a burst of
    /// messages on a cold connection opens one connection, not one each; once open,
    /// it is held only to clone the `Arc`.
    sender: tokio::sync::Mutex<Option<Arc<dyn Sender>>>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("broker", &self.broker.describe())
            .finish_non_exhaustive()
    }
}

impl Lane {
    async fn sender(&self) -> Result<Arc<dyn Sender>, crate::transport::BrokerError> {
        let mut slot = self.sender.lock().await;
        if let Some(s) = &*slot {
            return Ok(s.clone());
        }
        let s: Arc<dyn Sender> = Arc::from(self.broker.sender(0).await?);
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Drops `failed` (unless a newer sender already replaced it).
    async fn forget(&self, failed: &Arc<dyn Sender>) {
        let mut slot = self.sender.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, failed)) {
            *slot = None;
        }
    }
}

impl Publishers {
    /// Publishes on `connections`, through brokers made by `broker_for`; connections
    /// whose broker cannot be made are left out (their problem is reported where the
    /// runtime reports it).
    pub fn replace(
        &self,
        connections: &[Connection],
        broker_for: impl Fn(&Connection) -> anyhow::Result<Arc<dyn Broker>>,
    ) {
        let mut lanes = HashMap::new();
        for c in connections {
            match broker_for(c) {
                Ok(broker) => {
                    lanes.insert(
                        c.id.clone(),
                        Arc::new(Lane {
                            broker,
                            sender: tokio::sync::Mutex::new(None),
                        }),
                    );
                }
                Err(e) => tracing::warn!("connection {:?} cannot publish messages: {e:#}", c.id),
            }
        }
        *self.lock() = Arc::new(lanes);
    }

    /// Drops every connection (shutdown): their brokers close once the messages in
    /// flight are done with them.
    pub fn clear(&self) {
        *self.lock() = Arc::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Arc<HashMap<String, Arc<Lane>>>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The configured connection ids, sorted (for messages).
    pub fn connections(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().keys().cloned().collect();
        ids.sort();
        ids
    }
}

impl MessagePublisher for Publishers {
    fn publish(&self, out: OutgoingMessage) -> PublishFuture {
        let lane = self.lock().get(&out.target.connection).cloned();
        Box::pin(async move {
            let Some(lane) = lane else {
                return Err(PublishError::UnknownConnection(out.target.connection));
            };
            let to = if out.target.topic {
                Destination::topic(out.target.destination.clone())
            } else {
                Destination::queue(out.target.destination.clone())
            };
            let message = Message {
                body: out.body,
                properties: out.properties,
                format: Some("MQSTR".into()),
                // IBM MQ: an event, not a reply to anything (MQMT_DATAGRAM); the
                // other brokers carry no message type of decoy's.
                message_type: Some("datagram".into()),
                persistent: true,
                // MQTT: at least once, as the runtime's replies.
                qos: Some(1),
                ..Message::default()
            };
            let describe = || lane.broker.describe();
            let sender = lane
                .sender()
                .await
                .map_err(|e| PublishError::Broker(format!("{}: {e}", describe())))?;
            match sender.send(&to, message).await {
                Ok(Put::Done) => Ok(()),
                // Not `how_to_create`: its `declareQueues` covers only the queues
                // decoy listens on, never one it publishes to.
                Ok(Put::NoSuchQueue) => Err(PublishError::Broker(format!(
                    "{} has no queue {:?}: it must exist before decoy publishes to it \
                     (its consumer, or the system's set-up, usually declares it; \
                     \"declareQueues\" covers only the queues decoy listens on)",
                    describe(),
                    to.name,
                ))),
                Err(e) => {
                    lane.forget(&sender).await;
                    Err(PublishError::Broker(format!("{}: {e}", describe())))
                }
            }
        })
    }

    fn has_connection(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }
}
