//! IBM MQ with the `mqi` crate, the MQ client library (`libmqm_r.so`) loaded at run
//! time, so decoy builds and runs where IBM's client is not installed.
//!
//! ## How connections, threads and units of work fit
//!
//! An MQ connection handle belongs to the thread that made it (decoy connects with
//! no handle sharing), a waiting MQGET holds it, and a unit of work (syncpoint)
//! belongs to it. So each pooled connection is one OS thread that owns one handle:
//!
//! - A *read* connection (`readConnectionsToOpen` of them) opens the queues of the
//!   receivers assigned to it (receiver `i` uses read connection `i % n`) and gets
//!   from them in turn, each MQGET under syncpoint, converting to CCSID 1208. With
//!   one queue it waits on it (MQGMO_WAIT); with several it takes what is there from
//!   each in turn and, after a round that found nothing, waits 20 ms on each.
//! - A received message goes to its receiver (the runtime's task) as a
//!   [`Delivery`]; settling it tells the connection's thread. The unit of work is
//!   committed (MQCMIT) once every message got in it has been settled, that is once
//!   every reply was put. A unit of work holds at most [`MAX_UNCOMMITTED`] messages
//!   (the queue manager's MAXUMSGS is 10,000 by default): at that size the thread
//!   stops getting until the replies are out, so delayed replies (a timer each in the
//!   runtime) do not cap throughput at one message per delay. A request settled
//!   `Requeue` (its reply could not be put) backs the unit of work out (MQBACK): every
//!   message in it is delivered again, which at-least-once allows.
//! - A *write* connection (`writeConnectionsToOpen`) puts replies outside syncpoint,
//!   so a reply is on its queue (MQPUT completed) before its request is committed.
//!   Sender `i` uses write connection `i % n`; open output queues are kept per
//!   connection. A reply's descriptor is built field by field (MsgType MQMT_REPLY,
//!   CorrelId, Format, CCSID 1208, native encoding), never copied from the request's
//!   descriptor, which would carry the request's Format and CCSID into the reply.
//!
//! A failed connection ends its thread; the runtime asks for a new receiver or
//! sender with backoff and the thread is started again. What was not committed is
//! backed out by the queue manager and delivered again.
//!
//! A topic is a managed, non-durable subscription (MQSUB) read like a queue, and a
//! reply to a topic is published by topic string. A request's user properties
//! (`usr.*`) are read through a message handle filled by each MQGET; a reply's are
//! set on a handle of its own (MQSETMP).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use libmqm_sys::Mqi;
use mqi::connection::{
    CONNECT_HAS_CD, ConnectOption, ConnectStructFlags, ConnectStructs, Credentials, MqServer,
    ThreadNone,
};
use mqi::get::{GetConvert, GetWait};
use mqi::header::TextEnc;
use mqi::open::ObjectString;
use mqi::properties::{INQUIRE_ALL_USR, Name, Value};
use mqi::string::{CCSID, EncodedString as _};
use mqi::types::MQCMHO;
use mqi::types::{
    ApplName, CipherSpec, CorrelationId, MessageFormat, MessageId, QueueManagerName, QueueName,
    ReplyToQueueManagerName, ReplyToQueueName,
};
use mqi::{Library, Object, Properties, Subscription, Syncpoint, constants, structs};
use tokio::sync::{mpsc, oneshot};

use super::config::IbmMqConfig;
use super::transport::{
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Put, Receiver, Sender, Settle,
};

/// Messages one read connection may hold in an uncommitted unit of work.
pub const MAX_UNCOMMITTED: usize = 1000;
/// The largest message first expected; a larger one grows the buffer (up to
/// [`MAX_MESSAGE`]), as IBM MQ's default MAXMSGL is 4 MiB.
const FIRST_BUFFER: usize = 64 * 1024;
const MAX_MESSAGE: usize = 100 * 1024 * 1024;
/// How long a read connection waits on its one queue before looking at settlements.
const WAIT_ONE: i32 = 200;
/// Wait per queue after an empty round over several.
const WAIT_MANY: i32 = 20;
/// The pause before a unit of work whose reply failed is backed out.
const BACKOUT_PAUSE: Duration = Duration::from_millis(100);
/// How long a closing read connection waits for its last replies.
const CLOSE_WAIT: Duration = Duration::from_secs(15);
/// Output queues a write connection keeps open.
const OPEN_OUTPUTS: usize = 64;

mod connection;
mod read;
mod write;

pub use connection::{
    ClientLibrary, MqLibrary, connect, describe, find_client, library_dirs, load_client,
    missing_client_message,
};
use connection::{Conn, connection_lost, mq_err, unknown_destination};
use read::read_thread;
use write::write_thread;

/// A pooled connection's thread, as the broker sees it.
pub(super) struct Worker<C> {
    commands: std_mpsc::Sender<C>,
    alive: Arc<AtomicBool>,
}

/// What a read connection's thread is asked to do.
pub(super) enum ReadCommand {
    /// Open `queue` and deliver its messages to `deliveries`.
    Open {
        from: Destination,
        deliveries: mpsc::Sender<Result<Box<dyn Delivery>, BrokerError>>,
        opened: oneshot::Sender<Result<(), BrokerError>>,
    },
    /// A message got in unit of work `uow` was settled.
    Settled { uow: u64, how: Settle },
    /// The broker is gone: finish the unit of work and disconnect.
    Close,
}

pub(super) enum WriteCommand {
    Put {
        to: Destination,
        message: Message,
        done: oneshot::Sender<Result<Put, BrokerError>>,
    },
    Close,
}

impl<C> Worker<C> {
    fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }
}

/// One `ibm-mq` connection entry and its two pools of connection threads.
pub struct IbmMqBroker<L: MqLibrary> {
    lib: L,
    config: Arc<IbmMqConfig>,
    read: Vec<Mutex<Option<Worker<ReadCommand>>>>,
    write: Vec<Mutex<Option<Worker<WriteCommand>>>>,
}

impl<L: MqLibrary> std::fmt::Debug for IbmMqBroker<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IbmMqBroker")
            .field("connection", &describe(&self.config))
            .finish_non_exhaustive()
    }
}

impl<L: MqLibrary> IbmMqBroker<L> {
    pub fn new(lib: L, config: IbmMqConfig) -> IbmMqBroker<L> {
        IbmMqBroker {
            lib,
            read: slots(config.read_connections),
            write: slots(config.write_connections),
            config: Arc::new(config),
        }
    }

    /// The command channel of read connection `index`, starting its thread when it
    /// is not running.
    fn read_worker(&self, index: usize) -> std_mpsc::Sender<ReadCommand> {
        let (lib, config) = (self.lib.clone(), self.config.clone());
        worker(&self.read, index, "read", move |rx, me, alive| {
            read_thread(lib, &config, &rx, me, &alive);
        })
    }

    fn write_worker(&self, index: usize) -> std_mpsc::Sender<WriteCommand> {
        let (lib, config) = (self.lib.clone(), self.config.clone());
        worker(&self.write, index, "write", move |rx, _, alive| {
            write_thread(lib, &config, &rx, &alive);
        })
    }
}

/// The command channel of `pool`'s connection `index`, starting its thread (`run`,
/// given its commands, a sender to itself and its liveness flag) when it is not
/// running.
pub(super) fn worker<C: Send + 'static>(
    pool: &[Mutex<Option<Worker<C>>>],
    index: usize,
    kind: &str,
    run: impl FnOnce(std_mpsc::Receiver<C>, std_mpsc::Sender<C>, Arc<AtomicBool>) + Send + 'static,
) -> std_mpsc::Sender<C> {
    let mut slot = lock(&pool[index % pool.len()]);
    if let Some(w) = slot.as_ref().filter(|w| w.alive()) {
        return w.commands.clone();
    }
    let (tx, rx) = std_mpsc::channel();
    let alive = Arc::new(AtomicBool::new(true));
    let (me, flag) = (tx.clone(), alive.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("ibmmq-{kind}-{index}"))
        .spawn(move || run(rx, me, flag));
    if spawned.is_err() {
        alive.store(false, Ordering::Release);
    }
    *slot = Some(Worker {
        commands: tx.clone(),
        alive,
    });
    tx
}

pub(super) fn slots<T>(n: usize) -> Vec<Mutex<Option<T>>> {
    (0..n.max(1)).map(|_| Mutex::new(None)).collect()
}

impl<L: MqLibrary> Drop for IbmMqBroker<L> {
    /// Each thread finishes what it holds (the last replies, a commit) and
    /// disconnects.
    fn drop(&mut self) {
        for slot in &self.read {
            if let Some(w) = lock(slot).take() {
                let _ = w.commands.send(ReadCommand::Close);
            }
        }
        for slot in &self.write {
            if let Some(w) = lock(slot).take() {
                let _ = w.commands.send(WriteCommand::Close);
            }
        }
    }
}

impl<L: MqLibrary> Broker for IbmMqBroker<L> {
    fn describe(&self) -> String {
        describe(&self.config)
    }

    fn how_to_create(&self, queue: &str) -> String {
        format!(
            "define it on queue manager {} (for example `DEFINE QLOCAL('{queue}')` in runmqsc) \
             and let the connection's user get from it",
            self.config.queue_manager
        )
    }

    fn receiver<'a>(
        &'a self,
        from: &'a Destination,
        index: usize,
    ) -> BoxFuture<'a, Result<Box<dyn Receiver>, BrokerError>> {
        Box::pin(async move {
            let (deliveries, rx) = mpsc::channel(64);
            let (opened, is_open) = oneshot::channel();
            let command = ReadCommand::Open {
                from: from.clone(),
                deliveries,
                opened,
            };
            self.read_worker(index)
                .send(command)
                .map_err(|_| BrokerError::new("the read connection's thread ended"))?;
            match is_open.await {
                Ok(Ok(())) => Ok(Box::new(MqReceiver { rx }) as Box<dyn Receiver>),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(BrokerError::new("the read connection's thread ended")),
            }
        })
    }

    fn sender(&self, index: usize) -> BoxFuture<'_, Result<Box<dyn Sender>, BrokerError>> {
        let commands = self.write_worker(index);
        Box::pin(async move { Ok(Box::new(MqSender { commands }) as Box<dyn Sender>) })
    }
}

pub(super) struct MqReceiver {
    rx: mpsc::Receiver<Result<Box<dyn Delivery>, BrokerError>>,
}

impl Receiver for MqReceiver {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Box<dyn Delivery>>, BrokerError>> {
        Box::pin(async move {
            match self.rx.recv().await {
                Some(Ok(d)) => Ok(Some(d)),
                Some(Err(e)) => Err(e),
                None => Err(BrokerError::new("the read connection's thread ended")),
            }
        })
    }
}

pub(super) struct MqDelivery {
    message: Message,
    queue: String,
    uow: u64,
    settle: std_mpsc::Sender<ReadCommand>,
    settled: bool,
}

/// A delivery dropped unsettled (its handling panicked) is settled as a backout, so
/// its unit of work can end and the message comes again.
impl Drop for MqDelivery {
    fn drop(&mut self) {
        if !self.settled {
            let _ = self.settle.send(ReadCommand::Settled {
                uow: self.uow,
                how: Settle::Requeue,
            });
        }
    }
}

impl Delivery for MqDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn queue(&self) -> &str {
        &self.queue
    }

    /// Tells the connection's thread, which commits when the whole unit of work is
    /// settled. Returns once told: a commit that then fails means the queue manager
    /// delivers the request again (at-least-once).
    fn settle(mut self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
        self.settled = true;
        let sent = self
            .settle
            .send(ReadCommand::Settled { uow: self.uow, how });
        Box::pin(async move {
            sent.map_err(|_| {
                BrokerError::new(
                    "its connection was lost; the queue manager delivers the message again",
                )
            })
        })
    }
}

pub(super) struct MqSender {
    commands: std_mpsc::Sender<WriteCommand>,
}

impl Sender for MqSender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<Put, BrokerError>> {
        let (done, is_done) = oneshot::channel();
        let sent = self.commands.send(WriteCommand::Put {
            to: to.clone(),
            message,
            done,
        });
        Box::pin(async move {
            sent.map_err(|_| BrokerError::new("the write connection's thread ended"))?;
            is_done
                .await
                .map_err(|_| BrokerError::new("the write connection's thread ended"))?
        })
    }
}

/// One open input queue (or a topic subscription's managed queue) of a read
/// connection.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
