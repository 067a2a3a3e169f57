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
    BoxFuture, Broker, BrokerError, Delivery, Destination, Message, Receiver, Sender, Settle,
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

/// What the adapter needs of an MQ library: the real one loaded with dlopen, or
/// `mqi`'s mock in tests.
pub trait MqLibrary: Library<MQ: Mqi> + Clone + Send + Sync + 'static {}
impl<T: Library<MQ: Mqi> + Clone + Send + Sync + 'static> MqLibrary for T {}

/// The loaded client library, shared by every IBM MQ connection of the process.
pub type ClientLibrary = Arc<libmqm_sys::dlopen2::MqmContainer>;

/// Loads `libmqm_r.so` from `path` once per process.
pub fn load_client(path: &Path) -> Result<ClientLibrary, String> {
    static LOADED: OnceLock<Result<ClientLibrary, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            #[allow(unsafe_code)]
            // SAFETY: loading a shared library runs its initialisers. The path is IBM's
            // client library, found in the directories the operator configured
            // (MQ_INSTALLATION_PATH, /opt/mqm/lib64, LD_LIBRARY_PATH); loading it is
            // what linking against it would do. Its functions are called only through
            // `mqi`, with the signatures of IBM's cmqc.h that `libmqm-sys` declares.
            let c = unsafe { dlopen2::wrapper::Container::load(path) };
            c.map(Arc::new)
                .map_err(|e| format!("cannot load {}: {e}", path.display()))
        })
        .clone()
}

/// Where the IBM MQ client library is looked for, in order: `$MQ_INSTALLATION_PATH`
/// (as IBM's `setmqenv` sets it), `/opt/mqm` (the default install), and the
/// directories of `LD_LIBRARY_PATH`.
pub fn library_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os("MQ_INSTALLATION_PATH") {
        let p = PathBuf::from(p);
        dirs.push(p.join("lib64"));
        dirs.push(p.join("lib"));
    }
    dirs.push(PathBuf::from("/opt/mqm/lib64"));
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&ld).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs
}

/// The first `libmqm_r.so` in `dirs`.
pub fn find_client(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .map(|d| d.join("libmqm_r.so"))
        .find(|p| p.is_file())
}

/// The message `decoy serve` gives when an `ibm-mq` connection is configured and
/// the client library is not installed.
pub fn missing_client_message(connection: &str, dirs: &[PathBuf]) -> String {
    format!(
        "connection {connection:?} is an IBM MQ connection, and the IBM MQ client library \
         (libmqm_r.so) was not found; looked in {}. Install IBM's MQ redistributable client \
         (https://ibm.biz/mq94redistclients), unpack it and set MQ_INSTALLATION_PATH to where \
         it is (or install it in /opt/mqm)",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn mq_err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::new(format!("{what}: {e}"))
}

/// `SSLPEER`: the distinguished name the queue manager's certificate must match.
/// `mqi` 0.4 has no option for it, so it is set on the client channel definition
/// here.
struct PeerName<'a>(&'a str);

#[allow(unsafe_code)]
// SAFETY: the channel definition keeps a pointer to the name's bytes and their
// length; the bytes are borrowed for 'a, the lifetime `mqi` binds the connect call's
// structures to, so they outlive the MQCONNX that reads them. Nothing else is set.
unsafe impl<'a> ConnectOption<'a> for PeerName<'a> {
    fn apply_param(&self, s: &mut ConnectStructs<'a>) -> ConnectStructFlags {
        s.cd.set_min_version(libmqm_sys::MQCD_VERSION_7);
        s.cd.SSLPeerNamePtr = self.0.as_ptr().cast_mut().cast();
        s.cd.SSLPeerNameLength = i32::try_from(self.0.len()).unwrap_or(i32::MAX);
        CONNECT_HAS_CD
    }
}

/// A connection handle, used only on the thread that made it.
pub type Conn<L> = mqi::Connection<L, ThreadNone>;

/// MQCONNX as a client: channel, host and port as an MQSERVER string would give
/// them, the queue manager's name, user and password in an MQCSP, and TLS when a
/// cipher is named (the key repository is the client's: `MQSSLKEYR`).
pub fn connect<L: MqLibrary>(lib: L, c: &IbmMqConfig) -> Result<Conn<L>, BrokerError> {
    let server = format!("{}/TCP/{}({})", c.channel, c.hostname, c.port);
    let server = MqServer::try_from(server.as_str())
        .map_err(|e| mq_err(format!("channel {:?} on {}", c.channel, c.hostname), e))?;
    let qm = QueueManagerName::from_str(&c.queue_manager)
        .map_err(|e| mq_err(format!("queue manager name {:?}", c.queue_manager), e))?;
    let cipher = c
        .ssl_cipher_suite
        .as_deref()
        .map(CipherSpec::from_str)
        .transpose()
        .map_err(|e| mq_err("sslCipherSuite", e))?;
    let password = c.password.clone().unwrap_or_default();
    let creds = c
        .username
        .as_deref()
        .map(|u| Credentials::User(u, password.as_str().into()));
    let peer = c.ssl_peer_name.as_deref().map(PeerName);
    let options = (
        ApplName(mqi::mqstr!("decoy")),
        qm,
        server,
        creds,
        cipher,
        peer,
    );
    mqi::connect_lib::<ThreadNone, L>(lib, &options)
        .map(|c| c.discard_warning())
        .map_err(|e| mq_err(format!("cannot connect to {}", describe(c)), e))
}

/// `QM1 via DEV.APP.SVRCONN on mq.example.com(1414)`: no password.
pub fn describe(c: &IbmMqConfig) -> String {
    format!(
        "{} via {} on {}({})",
        c.queue_manager, c.channel, c.hostname, c.port
    )
}

/// A pooled connection's thread, as the broker sees it.
struct Worker<C> {
    commands: std_mpsc::Sender<C>,
    alive: Arc<AtomicBool>,
}

/// What a read connection's thread is asked to do.
enum ReadCommand {
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

enum WriteCommand {
    Put {
        to: Destination,
        message: Message,
        done: oneshot::Sender<Result<(), BrokerError>>,
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
fn worker<C: Send + 'static>(
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

fn slots<T>(n: usize) -> Vec<Mutex<Option<T>>> {
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

struct MqReceiver {
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

struct MqDelivery {
    message: Message,
    queue: String,
    uow: u64,
    settle: std_mpsc::Sender<ReadCommand>,
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
    fn settle(self: Box<Self>, how: Settle) -> BoxFuture<'static, Result<(), BrokerError>> {
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

struct MqSender {
    commands: std_mpsc::Sender<WriteCommand>,
}

impl Sender for MqSender {
    fn send<'a>(
        &'a self,
        to: &'a Destination,
        message: Message,
    ) -> BoxFuture<'a, Result<(), BrokerError>> {
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
struct Input<'c, L: MqLibrary> {
    name: String,
    object: Object<&'c Conn<L>>,
    /// For a topic: the non-durable subscription, removed when this is dropped.
    _subscription: Option<Subscription<&'c Conn<L>>>,
    deliveries: mpsc::Sender<Result<Box<dyn Delivery>, BrokerError>>,
}

/// The current unit of work of a read connection.
#[derive(Default)]
struct UnitOfWork {
    id: u64,
    got: usize,
    settled: usize,
    back_out: bool,
}

fn read_thread<L: MqLibrary>(
    lib: L,
    config: &IbmMqConfig,
    commands: &std_mpsc::Receiver<ReadCommand>,
    me: std_mpsc::Sender<ReadCommand>,
    alive: &AtomicBool,
) {
    let conn = match connect(lib, config) {
        Ok(c) => c,
        Err(e) => {
            alive.store(false, Ordering::Release);
            refuse_opens(commands, &e);
            return;
        }
    };
    let properties = match Properties::new(&conn, MQCMHO::default()) {
        Ok(p) => p,
        Err(e) => {
            alive.store(false, Ordering::Release);
            refuse_opens(commands, &mq_err("MQCRTMH failed", e));
            return;
        }
    };
    let mut reader = Reader {
        properties,
        conn: &conn,
        inputs: Vec::new(),
        uow: UnitOfWork::default(),
        buffer: vec![0; FIRST_BUFFER],
        turn: 0,
        empty: 0,
        closing: None,
        me,
    };
    let ended = reader.run(commands);
    alive.store(false, Ordering::Release);
    if let Err(e) = &ended {
        tracing::warn!("IBM MQ read connection to {}: {e}", describe(config));
        for input in &reader.inputs {
            let _ = input.deliveries.try_send(Err(e.clone()));
        }
        refuse_opens(commands, e);
    }
    if reader.uow.got > 0 {
        // Unsettled messages go back to their queues, to be delivered again.
        let _ = Syncpoint::new(&conn).backout();
    }
    drop(reader);
    let _ = conn.disconnect();
}

/// Answers the `Open`s still queued to a thread that cannot serve them.
fn refuse_opens(commands: &std_mpsc::Receiver<ReadCommand>, e: &BrokerError) {
    while let Ok(c) = commands.try_recv() {
        if let ReadCommand::Open { opened, .. } = c {
            let _ = opened.send(Err(e.clone()));
        }
    }
}

struct Reader<'c, L: MqLibrary> {
    conn: &'c Conn<L>,
    inputs: Vec<Input<'c, L>>,
    uow: UnitOfWork,
    buffer: Vec<u8>,
    turn: usize,
    /// Queues found empty since the last message.
    empty: usize,
    closing: Option<Instant>,
    me: std_mpsc::Sender<ReadCommand>,
    /// The message handle each MQGET fills with the message's properties.
    properties: Properties<&'c Conn<L>>,
}

impl<'c, L: MqLibrary> Reader<'c, L> {
    fn run(&mut self, commands: &std_mpsc::Receiver<ReadCommand>) -> Result<(), BrokerError> {
        loop {
            let hold = self.inputs.is_empty()
                || self.uow.got >= MAX_UNCOMMITTED
                || self.uow.back_out
                || self.closing.is_some();
            let first = if hold {
                commands.recv_timeout(Duration::from_millis(100)).ok()
            } else {
                commands.try_recv().ok()
            };
            if let Some(c) = first {
                self.command(c);
                while let Ok(c) = commands.try_recv() {
                    self.command(c);
                }
            }
            self.finish_unit_of_work()?;
            if let Some(since) = self.closing {
                if self.uow.got == 0 || since.elapsed() > CLOSE_WAIT {
                    return Ok(());
                }
                continue;
            }
            // A receiver that went away (the runtime stopped or reconnected) closes
            // its queue.
            self.inputs.retain(|i| !i.deliveries.is_closed());
            if !hold {
                self.get_one()?;
            }
        }
    }

    fn command(&mut self, c: ReadCommand) {
        match c {
            ReadCommand::Open {
                from,
                deliveries,
                opened,
            } => match self.open(&from) {
                Ok((object, subscription)) => {
                    self.inputs.push(Input {
                        name: from.to_string(),
                        object,
                        _subscription: subscription,
                        deliveries,
                    });
                    let _ = opened.send(Ok(()));
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                }
            },
            ReadCommand::Settled { uow, how } => {
                // A settlement from a unit of work already backed out changes nothing.
                if uow == self.uow.id {
                    self.uow.settled += 1;
                    if how != Settle::Ack {
                        // MQ has no per-message reject: the message goes back, and the
                        // queue's backout threshold (BOTHRESH/BOQNAME) applies.
                        self.uow.back_out = true;
                    }
                }
            }
            ReadCommand::Close => self.closing = Some(Instant::now()),
        }
    }

    /// Opens a queue for input, or subscribes to a topic (a managed, non-durable
    /// subscription: publications while decoy is not running are not kept for it).
    #[allow(clippy::type_complexity)]
    fn open(
        &self,
        from: &Destination,
    ) -> Result<(Object<&'c Conn<L>>, Option<Subscription<&'c Conn<L>>>), BrokerError> {
        if from.topic {
            let (sub, object) = Subscription::subscribe_managed(
                self.conn,
                (
                    constants::MQSO_CREATE
                        | constants::MQSO_NON_DURABLE
                        | constants::MQSO_FAIL_IF_QUIESCING,
                    ObjectString(from.name.as_str()),
                ),
            )
            .map_err(|e| mq_err(format!("cannot subscribe to {from}"), e))?
            .discard_warning();
            return Ok((object, Some(sub)));
        }
        let name = QueueName::from_str(&from.name)
            .map_err(|e| mq_err(format!("queue name {:?}", from.name), e))?;
        let object = Object::open(
            self.conn,
            &(
                name,
                constants::MQOO_INPUT_AS_Q_DEF | constants::MQOO_FAIL_IF_QUIESCING,
            ),
        )
        .map_err(|e| mq_err(format!("cannot open {:?} for input", from.name), e))?
        .discard_warning();
        Ok((object, None))
    }

    /// Commits (or backs out) once every message of the unit of work is settled.
    fn finish_unit_of_work(&mut self) -> Result<(), BrokerError> {
        if self.uow.got == 0 || self.uow.settled < self.uow.got {
            return Ok(());
        }
        let sync = Syncpoint::new(self.conn);
        let result = if self.uow.back_out {
            // What made a reply fail (a full or put-inhibited queue) usually lasts a
            // while: pause before the requests come back, rather than spin.
            std::thread::sleep(BACKOUT_PAUSE);
            sync.backout().map_err(|e| mq_err("MQBACK failed", e))
        } else {
            sync.commit().map_err(|e| mq_err("MQCMIT failed", e))
        };
        self.uow = UnitOfWork {
            id: self.uow.id + 1,
            ..UnitOfWork::default()
        };
        result.map(|_| ())
    }

    /// One MQGET on the next queue in turn; a message goes to its receiver.
    fn get_one(&mut self) -> Result<(), BrokerError> {
        let n = self.inputs.len();
        if n == 0 {
            return Ok(());
        }
        let i = self.turn % n;
        // Milliseconds to wait; `None`: do not wait.
        let wait = if n == 1 {
            Some(if self.uow.got > 0 {
                WAIT_MANY
            } else {
                WAIT_ONE
            })
        } else if self.empty >= n {
            Some(WAIT_MANY)
        } else {
            None
        };
        let got = loop {
            let options = (
                wait.map_or(GetWait::NoWait, GetWait::Wait),
                constants::MQGMO_SYNCPOINT
                    | constants::MQGMO_FAIL_IF_QUIESCING
                    | constants::MQGMO_PROPERTIES_IN_HANDLE,
                GetConvert::ConvertTo(CCSID(1208), constants::MQENC_NATIVE),
                &mut self.properties,
            );
            let input = &self.inputs[i];
            let result = input
                .object
                .get_data_with::<structs::MQMD, u8>(&options, &mut self.buffer);
            match result {
                Ok(c)
                    if c.warning()
                        .is_some_and(|(rc, _)| rc == constants::MQRC_TRUNCATED_MSG_FAILED) =>
                {
                    // The message stays on the queue; get it again with room for it.
                    if self.buffer.len() >= MAX_MESSAGE {
                        return Err(BrokerError::new(format!(
                            "a message on {} is larger than {MAX_MESSAGE} bytes",
                            input.name
                        )));
                    }
                    let grown = (self.buffer.len() * 4).min(MAX_MESSAGE);
                    self.buffer.resize(grown, 0);
                }
                Ok(c) => {
                    break c
                        .discard_warning()
                        .map(|(data, md)| (Bytes::copy_from_slice(data), md));
                }
                Err(e) if e.2 == constants::MQRC_NO_MSG_AVAILABLE => break None,
                Err(e) => return Err(mq_err(format!("MQGET on {} failed", input.name), e)),
            }
        };
        self.turn = self.turn.wrapping_add(1);
        let Some((body, md)) = got else {
            self.empty += 1;
            return Ok(());
        };
        self.empty = 0;
        self.uow.got += 1;
        let input = &self.inputs[i];
        let mut message = message_from(body, &md);
        message.properties = user_properties(&self.properties);
        let delivery = MqDelivery {
            message,
            queue: input.name.clone(),
            uow: self.uow.id,
            settle: self.me.clone(),
        };
        if input
            .deliveries
            .blocking_send(Ok(Box::new(delivery)))
            .is_err()
        {
            // Its receiver went away meanwhile: the message goes back.
            self.uow.settled += 1;
            self.uow.back_out = true;
        }
        Ok(())
    }
}

/// The message's user properties (`usr.*`, where JMS application properties are),
/// as text, named without the `usr.` folder: what mapping property matchers see.
fn user_properties<C: mqi::connection::AsConnection>(p: &Properties<C>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let options = constants::MQIMPO_CONVERT_VALUE | constants::MQIMPO_CONVERT_TYPE;
    for item in p.property_iter::<(Value, Name<String>), _>(INQUIRE_ALL_USR, options) {
        let Ok(c) = item else { break };
        let (value, Name(name)) = c.discard_warning();
        let name = name.strip_prefix("usr.").unwrap_or(&name).to_owned();
        let value = match value {
            Value::Boolean(b) => b.to_string(),
            Value::Int8(n) => n.to_string(),
            Value::Int16(n) => n.to_string(),
            Value::Int32(n) => n.to_string(),
            Value::Int64(n) => n.to_string(),
            Value::Float32(n) => n.to_string(),
            Value::Float64(n) => n.to_string(),
            Value::ByteString(b) => b.iter().map(|x| format!("{x:02X}")).collect(),
            Value::String(s) => {
                // Values come in the client's CCSID: UTF-8 as is, another (ISO 8859-1
                // and its ASCII subsets, as a C locale gives) byte for byte.
                let bytes: Vec<u8> = s.data().iter().map(|&c| c as u8).collect();
                if s.ccsid() == 1208 {
                    String::from_utf8_lossy(&bytes).into_owned()
                } else {
                    bytes.iter().map(|&b| char::from(b)).collect()
                }
            }
            Value::Null => String::new(),
        };
        out.push((name, value));
    }
    out
}

fn text(chars: &[libmqm_sys::MQCHAR]) -> Option<String> {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    let s = String::from_utf8_lossy(&bytes);
    let s = s.trim_end_matches([' ', '\0']);
    (!s.is_empty()).then(|| s.to_owned())
}

/// The transport-neutral message for a received MQ message.
fn message_from(body: Bytes, md: &libmqm_sys::MQMD) -> Message {
    Message {
        body,
        properties: Vec::new(),
        message_id: Some(md.MsgId.to_vec()),
        correlation_id: (md.CorrelId != [0; 24]).then(|| md.CorrelId.to_vec()),
        reply_to: text(&md.ReplyToQ),
        reply_to_manager: text(&md.ReplyToQMgr),
        format: text(&md.Format),
        message_type: Some(
            match md.MsgType {
                1 => "request",
                2 => "reply",
                4 => "report",
                8 => "datagram",
                _ => "other",
            }
            .to_owned(),
        ),
    }
}

fn write_thread<L: MqLibrary>(
    lib: L,
    config: &IbmMqConfig,
    commands: &std_mpsc::Receiver<WriteCommand>,
    alive: &AtomicBool,
) {
    let conn = match connect(lib, config) {
        Ok(c) => c,
        Err(e) => {
            alive.store(false, Ordering::Release);
            while let Ok(WriteCommand::Put { done, .. }) = commands.try_recv() {
                let _ = done.send(Err(e.clone()));
            }
            return;
        }
    };
    let mut open: Outputs<'_, L> = HashMap::new();
    while let Ok(WriteCommand::Put { to, message, done }) = commands.recv() {
        let result = put(&conn, &mut open, &to, &message);
        let broken = matches!(&result, Err((_, true)));
        let _ = done.send(result.map_err(|(e, _)| e));
        if broken {
            alive.store(false, Ordering::Release);
            tracing::warn!(
                "IBM MQ write connection to {} lost; it will be opened again",
                describe(config)
            );
            break;
        }
    }
    alive.store(false, Ordering::Release);
    drop(open);
    let _ = conn.disconnect();
}

/// Reason codes after which a connection handle is of no more use.
fn connection_lost(rc: mqi::types::MQRC) -> bool {
    [
        constants::MQRC_CONNECTION_BROKEN,
        constants::MQRC_HCONN_ERROR,
        constants::MQRC_Q_MGR_QUIESCING,
        constants::MQRC_Q_MGR_STOPPING,
        constants::MQRC_CONNECTION_QUIESCING,
        constants::MQRC_CONNECTION_STOPPING,
        constants::MQRC_Q_MGR_NOT_AVAILABLE,
    ]
    .contains(&rc)
}

/// Reason codes for a destination that does not exist.
fn unknown_destination(rc: mqi::types::MQRC) -> bool {
    [
        constants::MQRC_UNKNOWN_OBJECT_NAME,
        constants::MQRC_UNKNOWN_REMOTE_Q_MGR,
        constants::MQRC_UNKNOWN_ALIAS_BASE_Q,
        constants::MQRC_UNKNOWN_XMIT_Q,
    ]
    .contains(&rc)
}

/// The 8-character MQMD format for a mapping's format name (`MQSTR` → `MQSTR   `).
fn format_field(name: Option<&str>) -> mqi::MqChar<8> {
    let mut f = [b' ' as libmqm_sys::MQCHAR; 8];
    for (to, from) in f.iter_mut().zip(name.unwrap_or("MQSTR").bytes()) {
        *to = from as libmqm_sys::MQCHAR;
    }
    f
}

fn id24(id: Option<&Vec<u8>>) -> Option<[u8; 24]> {
    id.map(|id| {
        let mut out = [0u8; 24];
        for (to, from) in out.iter_mut().zip(id) {
            *to = *from;
        }
        out
    })
}

/// The open output objects of a write connection, by destination and queue manager.
type Outputs<'c, L> = HashMap<(Destination, Option<String>), Object<&'c Conn<L>>>;

/// Puts (or publishes) `message` outside syncpoint. The error says whether the
/// connection is lost.
fn put<'c, L: MqLibrary>(
    conn: &'c Conn<L>,
    open: &mut Outputs<'c, L>,
    to: &Destination,
    message: &Message,
) -> Result<(), (BrokerError, bool)> {
    let not_lost = |e: BrokerError| (e, false);
    let message_type = match message.message_type.as_deref() {
        Some("request") => constants::MQMT_REQUEST,
        Some("datagram") => constants::MQMT_DATAGRAM,
        Some("report") => constants::MQMT_REPORT,
        _ => constants::MQMT_REPLY,
    };
    // A reply goes to the queue manager its request named (ReplyToQMgr); blank means
    // the one decoy is connected to.
    let target_qm = message
        .reply_to_manager
        .clone()
        .filter(|_| message_type == constants::MQMT_REPLY && !to.topic);
    let key = (to.clone(), target_qm);
    if !open.contains_key(&key) {
        if open.len() >= OPEN_OUTPUTS {
            open.clear();
        }
        let output = constants::MQOO_OUTPUT | constants::MQOO_FAIL_IF_QUIESCING;
        let opened = if to.topic {
            Object::open(conn, &(ObjectString(to.name.as_str()), output))
        } else {
            let name = QueueName::from_str(&to.name)
                .map_err(|e| not_lost(mq_err(format!("queue name {:?}", to.name), e)))?;
            let qm = key
                .1
                .as_deref()
                .map(QueueManagerName::from_str)
                .transpose()
                .map_err(|e| not_lost(mq_err("reply-to queue manager name", e)))?;
            Object::open(conn, &(name, qm, output))
        };
        let object = match opened {
            Ok(o) => o.discard_warning(),
            Err(e) if unknown_destination(e.2) => {
                // As RabbitMQ returns a message for a queue that does not exist: putting
                // it again could not succeed, so the request is not sent back to loop.
                tracing::warn!("a message for {to} was dropped: {e} (no such queue)");
                return Ok(());
            }
            Err(e) => {
                return Err((
                    mq_err(format!("cannot open {to} for output"), &e),
                    connection_lost(e.2),
                ));
            }
        };
        open.insert(key.clone(), object);
    }
    let correl = id24(message.correlation_id.as_ref()).map(CorrelationId);
    // A reply gets a new message id; a message moved to the unmatched queue keeps
    // its own, and its reply-to, so it can still be answered by hand.
    let msg_id = id24(message.message_id.as_ref()).map(MessageId);
    let new_id = msg_id.is_none().then_some(constants::MQPMO_NEW_MSG_ID);
    let reply_to = message
        .reply_to
        .as_deref()
        .filter(|_| message_type != constants::MQMT_REPLY)
        .and_then(|q| ReplyToQueueName::from_str(q).ok());
    let reply_to_qm = message
        .reply_to_manager
        .as_deref()
        .filter(|_| message_type != constants::MQMT_REPLY)
        .and_then(|q| ReplyToQueueManagerName::from_str(q).ok());
    // The reply's properties (`response.properties`) go in a message handle.
    let mut properties = if message.properties.is_empty() {
        None
    } else {
        let p = Properties::new(conn, MQCMHO::default())
            .map_err(|e| (mq_err("MQCRTMH failed", &e), connection_lost(e.2)))?;
        for (name, value) in &message.properties {
            p.set_property(name.as_str(), value.as_str(), constants::MQSMPO_SET_FIRST)
                .map_err(|e| {
                    (
                        mq_err(format!("cannot set the property {name:?}"), &e),
                        connection_lost(e.2),
                    )
                })?
                .discard_warning();
        }
        Some(p)
    };
    let options = (
        constants::MQPMO_NO_SYNCPOINT | constants::MQPMO_FAIL_IF_QUIESCING,
        new_id,
        message_type,
        correl,
        msg_id,
        reply_to,
        reply_to_qm,
        properties.as_mut(),
    );
    let format = MessageFormat {
        ccsid: CCSID(1208),
        encoding: constants::MQENC_NATIVE,
        fmt: TextEnc::Ascii(format_field(message.format.as_deref())),
    };
    let object = &open[&key];
    match object.put_message(&options, &(&message.body[..], format)) {
        Ok(_) => Ok(()),
        Err(e) => {
            // The queue may have been deleted or put-inhibited: open it afresh next time.
            open.remove(&key);
            Err((
                mq_err(format!("MQPUT to {to} failed"), &e),
                connection_lost(e.2),
            ))
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
#[path = "ibmmq_tests.rs"]
mod tests;
