//! An in-memory [`Broker`], for testing the MQ runtime without a broker process.
//!
//! It is not offered to users as a broker: queues live in this process only. It keeps
//! what the runtime did (settlements, puts) so tests can check the delivery rules:
//! a request is acknowledged only after its reply was put; a failed put puts the
//! request back; an unmatched request is never dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Receiver, Sender, Settle,
};

#[derive(Debug, Default)]
struct Queues {
    ready: HashMap<String, VecDeque<Message>>,
    /// Every settlement, in order: (queue, message body, how).
    settled: Vec<(String, bytes::Bytes, Settle)>,
}

#[derive(Debug, Default)]
pub struct MemoryBroker {
    queues: Mutex<Queues>,
    arrived: Notify,
    /// The next this many sends fail (to test redelivery).
    pub fail_sends: AtomicUsize,
}

impl MemoryBroker {
    pub fn new() -> Arc<MemoryBroker> {
        Arc::new(MemoryBroker::default())
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn put(&self, queue: &str, message: Message) {
        self.lock()
            .ready
            .entry(queue.to_owned())
            .or_default()
            .push_back(message);
        self.arrived.notify_waiters();
    }

    /// Takes the next message of `queue`, waiting for it up to 10 s.
    pub async fn take(&self, queue: &str) -> Option<Message> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let notified = self.arrived.notified();
            if let Some(m) = self
                .lock()
                .ready
                .get_mut(queue)
                .and_then(VecDeque::pop_front)
            {
                return Some(m);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    pub fn depth(&self, queue: &str) -> usize {
        self.lock().ready.get(queue).map_or(0, VecDeque::len)
    }

    pub fn settlements(&self) -> Vec<(String, bytes::Bytes, Settle)> {
        self.lock().settled.clone()
    }
}

struct MemoryDelivery {
    broker: Arc<MemoryBroker>,
    queue: String,
    message: Message,
}

impl Delivery for MemoryDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        Box::pin(async move {
            let mut q = self.broker.lock();
            q.settled
                .push((self.queue.clone(), self.message.body.clone(), how));
            if how == Settle::Requeue {
                q.ready
                    .entry(self.queue.clone())
                    .or_default()
                    .push_front(self.message.clone());
                drop(q);
                self.broker.arrived.notify_waiters();
            }
            Ok(())
        })
    }
}

struct MemoryReceiver {
    broker: Arc<MemoryBroker>,
    queue: String,
}

impl Receiver for MemoryReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            loop {
                let notified = self.broker.arrived.notified();
                let next = self
                    .broker
                    .lock()
                    .ready
                    .get_mut(&self.queue)
                    .and_then(VecDeque::pop_front);
                if let Some(message) = next {
                    return Ok(Some(Box::new(MemoryDelivery {
                        broker: self.broker.clone(),
                        queue: self.queue.clone(),
                        message,
                    }) as Box<dyn Delivery>));
                }
                notified.await;
            }
        })
    }
}

struct MemorySender {
    broker: Arc<MemoryBroker>,
}

impl Sender for MemorySender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async move {
            let fail = self
                .broker
                .fail_sends
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                return Err(BrokerError::new("put refused (test)"));
            }
            // A topic is a queue named `topic NAME` here: one subscriber, no fan-out.
            self.broker.put(&to.to_string(), message);
            Ok(())
        })
    }
}

/// The runtime holds brokers as `Arc<dyn Broker>`; this wrapper shares one memory
/// broker between the runtime and the test that drives it.
#[derive(Debug, Clone)]
pub struct Shared(pub Arc<MemoryBroker>);

impl Broker for Shared {
    fn describe(&self) -> String {
        "in-memory test broker".into()
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        _index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            Ok(Box::new(MemoryReceiver {
                broker: self.0.clone(),
                queue: from.to_string(),
            }) as Box<dyn Receiver>)
        })
    }

    fn sender(&self, _index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            Ok(Box::new(MemorySender {
                broker: self.0.clone(),
            }) as Box<dyn Sender>)
        })
    }
}
