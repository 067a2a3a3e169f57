//! An in-memory [`Broker`], for testing the MQ runtime without a broker process.
//!
//! It is not offered to users as a broker: queues live in this process only. It keeps
//! what the runtime did (settlements, puts) so tests can check the delivery rules:
//! a request is acknowledged only after its reply was put; a failed put puts the
//! request back; an unmatched request is never dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, Sender, Settle,
};

#[derive(Debug, Default)]
struct Queues {
    ready: HashMap<String, VecDeque<Message>>,
    /// Every settlement, in order: (queue, message body, how).
    settled: Vec<(String, bytes::Bytes, Settle)>,
    /// Queues that do not exist: a message for one comes back [`Put::NoSuchQueue`].
    missing: HashSet<String>,
}

#[derive(Debug, Default)]
pub struct MemoryBroker {
    queues: Mutex<Queues>,
    arrived: Notify,
    /// The next this many sends fail (to test redelivery).
    pub fail_sends: AtomicUsize,
    /// The next this many sends are refused for good ([`BrokerError::refused`]), as
    /// a reply to a destination the protocol does not allow.
    pub refuse_sends: AtomicUsize,
    /// The next this many sends, receives and new senders panic (to test that the
    /// runtime's tasks survive a bug).
    pub panic_sends: AtomicUsize,
    pub panic_receives: AtomicUsize,
    pub panic_senders: AtomicUsize,
    /// `declare_queue` fails, as on a broker whose clients cannot create queues.
    pub refuse_declare: AtomicBool,
    /// Opening a receiver never finishes, as a connect to a broker that accepts the
    /// socket and never answers.
    pub hang_receivers: AtomicBool,
}

/// Takes one from `n` when it is not zero: whether this call should misbehave.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
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

    /// Makes `queue` exist again (as an operator creating it would).
    pub fn add_queue(&self, queue: &str) {
        self.lock().missing.remove(queue);
    }

    /// Makes `queue` not exist (until declared).
    pub fn remove_queue(&self, queue: &str) {
        let mut q = self.lock();
        q.ready.remove(queue);
        q.missing.insert(queue.to_owned());
    }
}

struct MemoryDelivery {
    broker: Arc<MemoryBroker>,
    queue: String,
    message: Message,
    settled: bool,
}

impl MemoryDelivery {
    fn record(&mut self, how: Settle) {
        self.settled = true;
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
    }
}

/// Dropped unsettled: put back, as the AMQP and IBM MQ adapters do.
impl Drop for MemoryDelivery {
    fn drop(&mut self) {
        if !self.settled {
            self.record(Settle::Requeue);
        }
    }
}

impl Delivery for MemoryDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        Box::pin(async move {
            self.record(how);
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
            if take_one(&self.broker.panic_receives) {
                panic!("a receive panicked (test)");
            }
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
                        settled: false,
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
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        Box::pin(async move {
            if take_one(&self.broker.panic_sends) {
                panic!("a send panicked (test)");
            }
            if take_one(&self.broker.fail_sends) {
                return Err(BrokerError::new("put refused (test)"));
            }
            if take_one(&self.broker.refuse_sends) {
                return Err(BrokerError::refused("no such name (test)"));
            }
            // A topic is a queue named `topic NAME` here: one subscriber, no fan-out.
            let name = to.to_string();
            if self.broker.lock().missing.contains(&name) {
                return Ok(Put::NoSuchQueue);
            }
            self.broker.put(&name, message);
            Ok(Put::Done)
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
            if self.0.hang_receivers.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            if !from.topic && self.0.lock().missing.contains(&from.name) {
                return Err(BrokerError::missing_queue(
                    &from.name,
                    format!("no queue {:?} (test)", from.name),
                ));
            }
            Ok(Box::new(MemoryReceiver {
                broker: self.0.clone(),
                queue: from.to_string(),
            }) as Box<dyn Receiver>)
        })
    }

    fn sender(&self, _index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        Box::pin(async move {
            if take_one(&self.0.panic_senders) {
                panic!("opening a sender panicked (test)");
            }
            Ok(Box::new(MemorySender {
                broker: self.0.clone(),
            }) as Box<dyn Sender>)
        })
    }

    fn declare_queue<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<(), BrokerError>> {
        Box::pin(async move {
            if self.0.refuse_declare.load(Ordering::SeqCst) {
                return Err(BrokerError::new("cannot create queues (test)"));
            }
            self.0.lock().missing.remove(queue);
            Ok(())
        })
    }
}
