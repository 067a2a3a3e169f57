//! The message-queue files of a root directory.
//!
//! - `mq-connections.json`: a list of `{connectionId, connectionName, connectionData}`;
//!   `connectionData.type` is `amqp`, `ibm-mq` or `mqtt`.
//! - `mq-mappings/*.json`: one mapping per file (or `{"mappings": [...]}`).
//!
//! Traffic Parrot's names are read too (`ibm-mq-connections.json`, `ibm-mq-mappings/`,
//! `ibmMqVersion`, `ibmMqResponseTransformerClassName`), so its users' files carry
//! over. Parsing walks the JSON by hand, as for HTTP mappings, so every problem names
//! the file, the mapping, the JSON path of the field and the reason; a bad file is
//! reported and skipped, the others are served.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

pub use super::transport::Destination;
use decoy_core::mapping::load::{Problem, StubRef, json_files, load_stub_file};
use decoy_core::mapping::{BodyFiles, DEFAULT_PRIORITY, parse_body_field};
use decoy_matching::pattern::StringPattern;
use decoy_plugin_host::{AnswerKey, wit};
use decoy_spec::fields::{
    FieldError, FieldResult, as_bool, as_i64, as_object, as_str, as_u64, join, kind, show,
    warn_unknown,
};
use decoy_spec::plan::DelayDistribution;
use decoy_spec::plan::parse_distribution;

/// Files read, in the order tried: decoy's name, then Traffic Parrot's.
pub const CONNECTION_FILES: [&str; 2] = ["mq-connections.json", "ibm-mq-connections.json"];
pub const MAPPING_DIRS: [&str; 2] = ["mq-mappings", "ibm-mq-mappings"];

/// Most `readConnectionsToOpen` or `writeConnectionsToOpen` of one connection, and
/// most `receiveThreads` or `sendThreads` of one mapping.
pub const MAX_PER_FIELD: u64 = 1000;
/// Most broker connections all of `mq-connections.json` may open (read and write,
/// every connection). Each costs the broker a connection and its descriptors, and
/// decoy an OS thread (AMQP: lapin's; IBM MQ: the connection's own), a socket and
/// several MiB of buffers: per field, 1,000 + 1,000 connections once reached 5.9 GB
/// and exhausted RabbitMQ's default 1,024 descriptors, for every client of it.
pub const MAX_CONNECTIONS: u64 = 256;
/// Most receivers, and most senders, all MQ mappings may start together (each queue
/// starts the largest `receiveThreads` and `sendThreads` among its mappings). They are
/// tasks, but each receiver holds a channel and up to `prefetch` messages.
pub const MAX_RECEIVERS: u64 = 1000;
pub const MAX_SENDERS: u64 = 1000;
/// How long opening an AMQP connection may take unless `connectTimeoutMilliseconds`
/// says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// AMQP 0-9-1 carries a queue name as a short string: at most 255 bytes.
pub const AMQP_NAME_MAX: usize = 255;
/// On AMQP 0-9-1, the queue a topic mapping's receivers share: this prefix and the
/// topic pattern (so a topic's length is checked here against what is left).
pub const TOPIC_QUEUE_PREFIX: &str = "decoy.topic.";
/// IBM MQ object names: at most 48 characters.
pub const IBM_MQ_NAME_MAX: usize = 48;

/// A broker connection, as configured.
#[derive(Debug, Clone)]
pub struct Connection {
    pub id: String,
    pub name: Option<String>,
    pub kind: ConnectionKind,
    /// What to do with a message no mapping matches.
    pub unmatched: Unmatched,
}

#[derive(Debug, Clone)]
pub enum ConnectionKind {
    Amqp(AmqpConfig),
    IbmMq(IbmMqConfig),
    Nats(super::nats::config::NatsConfig),
    Mqtt(super::mqtt::config::MqttConfig),
    Amqp1(super::amqp1::Amqp1Config),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpConfig {
    /// `amqp://user:pass@host:port/vhost`.
    pub uri: String,
    pub read_connections: usize,
    pub write_connections: usize,
    /// Unacknowledged messages a receiver may hold (`basic.qos`).
    pub prefetch: u16,
    /// Declare (durable) a queue a mapping listens on when it does not exist
    /// (`declareQueues`; off by default: a mock does not create queues on a shared
    /// broker unless told to).
    pub declare_queues: bool,
    /// How long opening a connection may take (`connectTimeoutMilliseconds`, 10 s by
    /// default); past it the attempt is given up, its socket closed, and retried.
    pub connect_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbmMqConfig {
    pub hostname: String,
    pub port: u16,
    pub queue_manager: String,
    pub channel: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub use_mqcsp: bool,
    pub read_connections: usize,
    pub write_connections: usize,
    pub ssl_cipher_suite: Option<String>,
    pub ssl_peer_name: Option<String>,
}

/// Where an unmatched message goes. It is never dropped silently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmatched {
    /// Put it on this queue (then acknowledge the original).
    Queue(String),
    /// Reject it back to the broker without requeueing (RabbitMQ then applies the
    /// queue's dead-letter exchange, if it has one).
    Reject,
}

/// The queue unmatched messages go to unless a connection says otherwise.
pub const DEFAULT_UNMATCHED_QUEUE: &str = "decoy.unmatched";

/// How the reply's correlation id is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Correlation {
    /// The request's message id becomes the reply's correlation id (the IBM MQ
    /// convention); a request without a message id has its correlation id copied.
    MsgIdToCorrelId,
    /// The request's correlation id is copied (the usual AMQP RPC convention).
    CopyCorrelId,
    /// The request's correlation id, or its message id when it has none (the AMQP
    /// 1.0 default: a JMS requester correlates by message id).
    CorrelIdOrMsgId,
}

/// One message-queue mapping: which messages it answers and with what.
#[derive(Debug)]
pub struct MqMapping {
    pub id: Arc<str>,
    pub name: Option<Arc<str>>,
    pub connection_id: String,
    pub priority: i64,
    /// The queue it listens on (or the topic it subscribes to).
    pub queue: Destination,
    pub body: Option<StringPattern>,
    /// Message properties (AMQP headers, MQ message properties) and their patterns.
    pub properties: Vec<(String, StringPattern)>,
    pub response: MqResponse,
    pub receive_threads: usize,
    pub send_threads: usize,
    pub correlation: Correlation,
    /// NATS: the stream and durable consumer requests are read from
    /// (`request.jetstream`); `None` reads the subject from core NATS.
    pub jetstream: Option<super::nats::config::JetStreamSource>,
    /// WireMock-style webhooks (`serveEventListeners`), sent once the reply is confirmed.
    pub webhooks: Option<decoy_core::webhooks::Webhooks>,
    /// File and position, for messages.
    pub file: PathBuf,
    pub index: usize,
}

impl MqMapping {
    /// Which mapping a problem about this one names.
    pub fn stub_ref(&self) -> StubRef {
        StubRef::mapping(
            self.index,
            Some(self.id.to_string()),
            self.name.as_deref().map(str::to_owned),
        )
    }

    /// `mq-mappings/orders.json [0] (id …)`, for messages.
    pub fn label(&self) -> String {
        format!("{} [{}] (id {})", self.file.display(), self.index, self.id)
    }
}

#[derive(Debug, Clone)]
pub struct MqResponse {
    /// `None`: the request's reply-to destination.
    pub destination: Option<Destination>,
    pub body: Bytes,
    /// MQ format (`MQSTR`, `MQHRF2  `...); for AMQP, the content type when set.
    pub format: String,
    pub properties: Vec<(String, String)>,
    pub fixed_delay: Duration,
    pub delay_distribution: Option<DelayDistribution>,
    /// Plugins that build the reply from the request (`transformers`).
    pub transformers: decoy_core::plugins::Transformers,
    /// What a transformer's instance is prepared by for this reply's own body and
    /// properties, and for a templated destination's name: the answers are the same
    /// on every message, so each key is made once, when the mapping loads (`None`
    /// without transformers; see `decoy_plugin_host::AnswerKey`).
    pub reply_key: Option<AnswerKey>,
    pub destination_key: Option<AnswerKey>,
    /// MQTT: the broker keeps the reply as its topic's last message (`retain`).
    pub retain: bool,
}

/// A reply as a transformer is given it.
pub(crate) fn reply_record(body: &[u8], properties: Vec<(String, String)>) -> wit::Response {
    wit::Response::Mq(wit::MqReply {
        body: body.to_vec(),
        properties,
        destination: None,
        delay_ms: None,
    })
}

impl Default for MqResponse {
    /// An empty text reply to the request's reply-to queue, at once.
    fn default() -> Self {
        MqResponse {
            destination: None,
            body: Bytes::new(),
            format: "MQSTR".into(),
            properties: Vec::new(),
            fixed_delay: Duration::ZERO,
            delay_distribution: None,
            transformers: Default::default(),
            reply_key: None,
            destination_key: None,
            retain: false,
        }
    }
}

impl MqResponse {
    pub fn delay(&self) -> Duration {
        // Capped at MAX_DELAY, as HTTP delays are.
        decoy_spec::plan::add_delay(
            self.fixed_delay,
            self.delay_distribution
                .as_ref()
                .map_or(Duration::ZERO, |d| d.sample()),
        )
    }
}

/// Everything read from a root directory's MQ files.
#[derive(Debug, Default)]
pub struct MqLoad {
    pub connections: Vec<Connection>,
    pub mappings: Vec<MqMapping>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
    /// Mappings rejected.
    pub rejected: usize,
}

impl MqLoad {
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty() && self.mappings.is_empty()
    }
}

fn problem(file: &Path, stub: Option<StubRef>, error: FieldError) -> Problem {
    Problem {
        file: file.to_path_buf(),
        stub,
        error,
    }
}

/// Reads the MQ files of `root`; a root without them gives an empty load.
pub fn load(root: &Path) -> MqLoad {
    let ctx = decoy_core::mapping::ParseContext::for_root(root);
    load_with(root, ctx.plugins.as_deref(), ctx.max_body_file_size)
}

/// [`load`], resolving plugin names (`response.transformers`) in `plugins`.
pub fn load_with(
    root: &Path,
    plugins: Option<&decoy_plugin_host::Plugins>,
    max_body_file_size: u64,
) -> MqLoad {
    let mut out = MqLoad::default();
    let files_dir = decoy_core::mapping::load::files_dir(root);
    let body_files = BodyFiles {
        dir: &files_dir,
        max_size: max_body_file_size,
    };
    let found = CONNECTION_FILES.iter().find(|n| root.join(n).is_file());
    let connection_file = Path::new(found.unwrap_or(&CONNECTION_FILES[0]));
    let mut read = ConnectionFile {
        name: found.copied(),
        ..ConnectionFile::default()
    };
    if let Some(name) = found {
        let rel = PathBuf::from(name);
        let tp_ibm = *name == "ibm-mq-connections.json";
        match read_json(&root.join(name)) {
            Ok(v) => parse_connections(&v, &rel, tp_ibm, &mut out, &mut read),
            Err(e) => {
                read.unreadable = true;
                out.problems
                    .push(problem(&rel, None, FieldError::new("", e)));
            }
        }
    }
    let mut files = Vec::new();
    for dir in MAPPING_DIRS {
        match json_files(root, &root.join(dir)) {
            Ok(f) => files.extend(f),
            Err(e) => out.problems.push(problem(
                Path::new(dir),
                None,
                FieldError::new("", format!("cannot list the folder: {e}")),
            )),
        }
    }
    files.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    for rel in files {
        let connections = &out.connections;
        let read = &read;
        let file = load_stub_file(
            root,
            &rel,
            &["mappingId", "id"],
            |index, stub, _, warnings| {
                parse_mapping(
                    stub,
                    &rel,
                    index,
                    body_files,
                    plugins,
                    (connections, read),
                    warnings,
                )
            },
        );
        out.mappings.extend(file.mappings);
        out.problems.extend(file.problems);
        out.warnings.extend(file.warnings);
        out.rejected += file.rejected;
    }
    super::nats::config::check_sources(&mut out);
    check_totals(&mut out, connection_file);
    out
}

/// The limits of the whole configuration, not of one field: broker connections over
/// every connection, receivers and senders over every mapping. Past one, nothing of
/// the MQ files is served (each part may be fine; together they are too much), and
/// the problem names the file, the total and the limit.
fn check_totals(out: &mut MqLoad, connection_file: &Path) {
    let connections: u64 = out
        .connections
        .iter()
        .map(|c| match &c.kind {
            ConnectionKind::Amqp(a) => (a.read_connections + a.write_connections) as u64,
            ConnectionKind::IbmMq(m) => (m.read_connections + m.write_connections) as u64,
            ConnectionKind::Nats(n) => (n.read_connections + n.write_connections) as u64,
            ConnectionKind::Mqtt(m) => m.write_connections as u64,
            ConnectionKind::Amqp1(a) => (a.read_connections + a.write_connections) as u64,
        })
        .sum();
    // An MQTT receiver is a broker connection of its own (its session holds its
    // subscription and what it has not acknowledged).
    let mqtt_receivers = super::mqtt::receiver_connections(&out.connections, &out.mappings);
    let connections = connections + mqtt_receivers;
    let mut over = Vec::new();
    if connections > MAX_CONNECTIONS {
        over.push(problem(
            connection_file,
            None,
            FieldError::new(
                "",
                format!(
                    "the connections open {connections} broker connections in total \
                     (readConnectionsToOpen + writeConnectionsToOpen over {} connections{}), \
                     more than the limit of {MAX_CONNECTIONS}: each is a connection on the \
                     broker and an OS thread, a socket and buffers in decoy; lower them (one \
                     connection carries many receivers and senders on channels of their own)",
                    out.connections.len(),
                    if mqtt_receivers > 0 {
                        format!(", and one per MQTT receiver: {mqtt_receivers}")
                    } else {
                        String::new()
                    }
                ),
            ),
        ));
    }
    // What the runtime starts: per queue of a connection, the largest value among its
    // mappings.
    let mut queues: Vec<(&str, &Destination, u64, u64)> = Vec::new();
    for m in &out.mappings {
        let (r, s) = (m.receive_threads as u64, m.send_threads as u64);
        match queues
            .iter_mut()
            .find(|q| q.0 == m.connection_id && *q.1 == m.queue)
        {
            Some(q) => {
                q.2 = q.2.max(r);
                q.3 = q.3.max(s);
            }
            None => queues.push((&m.connection_id, &m.queue, r, s)),
        }
    }
    let dir = out
        .mappings
        .first()
        .and_then(|m| m.file.components().next())
        .map_or_else(
            || PathBuf::from(MAPPING_DIRS[0]),
            |c| PathBuf::from(c.as_os_str()),
        );
    let receivers = queues.iter().map(|q| q.2).sum::<u64>();
    let senders = queues.iter().map(|q| q.3).sum::<u64>();
    for (total, field, what, max, why) in [
        (
            receivers,
            "receiveThreads",
            "receivers",
            MAX_RECEIVERS,
            "a receiver takes up to prefetch messages at once, so a few keep a queue busy",
        ),
        (
            senders,
            "sendThreads",
            "senders",
            MAX_SENDERS,
            "a sender keeps 8 replies waiting for their confirms at once",
        ),
    ] {
        if total > max {
            over.push(problem(
                &dir,
                None,
                FieldError::new(
                    "",
                    format!(
                        "the mappings start {total} {what} in total ({field}, the largest per \
                         queue, over {} queues), more than the limit of {max}; lower {field} \
                         ({why})",
                        queues.len()
                    ),
                ),
            ));
        }
    }
    if !over.is_empty() {
        out.rejected += out.mappings.len();
        out.mappings.clear();
        out.problems.extend(over);
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read the file: {e}"))?;
    serde_json::from_slice(&text).map_err(|e| format!("not valid JSON: {e}"))
}

const CONNECTION_FIELDS: &[&str] = &["connectionId", "connectionName", "connectionData"];
const AMQP_FIELDS: &[&str] = &[
    "type",
    "uri",
    "host",
    "port",
    "vhost",
    "username",
    "password",
    "readConnectionsToOpen",
    "writeConnectionsToOpen",
    "prefetch",
    "declareQueues",
    "connectTimeoutMilliseconds",
    "unmatched",
];
const IBM_FIELDS: &[&str] = &[
    "type",
    "hostname",
    "port",
    "queueManager",
    "channel",
    "username",
    "password",
    "useMQCSPAuthenticationMode",
    "readConnectionsToOpen",
    "writeConnectionsToOpen",
    "sslCipherSuite",
    "sslPeerName",
    "unmatched",
];

/// What reading the connection file gave besides its connections, so that a mapping
/// naming a connection that is not there can say why.
#[derive(Debug, Default)]
struct ConnectionFile {
    /// Its name, when there is one.
    name: Option<&'static str>,
    /// It could not be read as a list of connections (a problem of the file says why).
    unreadable: bool,
    /// How many connections it lists, rejected ones too.
    entries: usize,
    /// The connections rejected (each is a problem): position and `connectionId`.
    rejected: Vec<(usize, Option<String>)>,
}

impl ConnectionFile {
    fn name(&self) -> &str {
        self.name.unwrap_or(CONNECTION_FILES[0])
    }

    /// `[1] (connectionId "m") in mq-connections.json`: a rejected connection, by its
    /// position in the file, as the path in its problem shows it.
    fn rejected_one(&self, i: usize, id: Option<&str>) -> String {
        match id {
            Some(id) => format!("[{i}] (connectionId {id:?}) in {}", self.name()),
            None => format!("[{i}] in {}", self.name()),
        }
    }

    /// Why a mapping that names no connection has none to use (`connections` is empty).
    fn why_none(&self) -> String {
        let file = self.name();
        match (&self.name, self.unreadable, self.rejected.as_slice()) {
            (None, ..) => "no broker connection is defined: add mq-connections.json".to_owned(),
            (Some(_), true, _) => {
                format!("{file} could not be read, so no connection is defined: see its problem")
            }
            (Some(_), false, []) => format!("{file} defines no connection: add one"),
            (Some(_), false, [(i, id)]) if self.entries == 1 => format!(
                "the only connection, {}, was rejected: see its problem",
                self.rejected_one(*i, id.as_deref())
            ),
            (Some(_), false, _) => {
                format!("every connection in {file} was rejected: see their problems")
            }
        }
    }

    /// Why connection `id`, which a mapping names, is not among the connections; `None`
    /// when the file does not mention it.
    fn why_missing(&self, id: &str) -> Option<String> {
        if self.unreadable {
            return Some(format!(
                "{id:?}: {} could not be read, so no connection is defined: see its problem",
                self.name()
            ));
        }
        let (i, _) = self
            .rejected
            .iter()
            .find(|(_, r)| r.as_deref() == Some(id))?;
        Some(format!(
            "the connection {} was rejected: see its problem",
            self.rejected_one(*i, Some(id))
        ))
    }
}

fn parse_connections(
    v: &Value,
    rel: &Path,
    tp_ibm: bool,
    out: &mut MqLoad,
    read: &mut ConnectionFile,
) {
    // A single connection object is accepted as well as a list.
    let list: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => vec![v],
        other => {
            out.problems.push(problem(
                rel,
                None,
                FieldError::new(
                    "",
                    format!("expected a list of connections, found {}", kind(other)),
                ),
            ));
            read.unreadable = true;
            return;
        }
    };
    read.entries = list.len();
    for (i, c) in list.into_iter().enumerate() {
        let at = format!("[{i}]");
        let stub = StubRef::connection(
            i,
            c.get("connectionId").map(id_text),
            c.get("connectionName")
                .and_then(Value::as_str)
                .map(str::to_owned),
        );
        let mut warnings = Vec::new();
        match parse_connection(c, &at, tp_ibm, &mut warnings) {
            Ok(conn) => {
                if out.connections.iter().any(|x| x.id == conn.id) {
                    out.problems.push(problem(
                        rel,
                        Some(stub.clone()),
                        FieldError::new(
                            join(&at, "connectionId"),
                            format!("{:?} is used by an earlier connection", conn.id),
                        ),
                    ));
                } else {
                    out.connections.push(conn);
                }
            }
            Err(e) => {
                read.rejected.push((i, stub.id.clone()));
                out.problems.push(problem(rel, Some(stub.clone()), e));
            }
        }
        out.warnings.extend(
            warnings
                .into_iter()
                .map(|e| problem(rel, Some(stub.clone()), e)),
        );
    }
}

/// Traffic Parrot writes ids as strings or numbers.
fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn opt_str(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> FieldResult<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => as_str(v, &join(path, key)).map(|s| Some(s.to_owned())),
    }
}

/// A whole number in `min..=max`. A fraction (`1.9999`) is an error rather than
/// truncated, and a number out of range is quoted as it was given (`1e30`), not as
/// what a conversion made of it.
pub(crate) fn whole(v: &Value, path: &str, min: u64, max: u64) -> FieldResult<u64> {
    let out_of_range =
        |shown: &str| FieldError::new(path, format!("{shown} is out of range ({min}-{max})"));
    let n = match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(n), _, _) => n,
            (None, Some(_), _) => return Err(out_of_range(&n.to_string())),
            (None, None, Some(f)) if f.fract() != 0.0 => {
                return Err(FieldError::new(path, format!("{n} is not a whole number")));
            }
            // `2.0`: whole, written as a float.
            (None, None, Some(f)) if (0.0..=max as f64).contains(&f) => f as u64,
            _ => return Err(out_of_range(&n.to_string())),
        },
        // Traffic Parrot's files sometimes quote numbers.
        Value::String(s) => match s.trim().parse::<u64>() {
            Ok(n) => n,
            Err(_) => match s.trim().parse::<f64>() {
                Ok(f) if f.is_finite() && f.fract() != 0.0 => {
                    return Err(FieldError::new(
                        path,
                        format!("{s:?} is not a whole number"),
                    ));
                }
                Ok(_) => return Err(out_of_range(&format!("{s:?}"))),
                Err(_) => {
                    return Err(FieldError::new(
                        path,
                        format!("expected a whole number, found {}", show(v)),
                    ));
                }
            },
        },
        other => {
            return Err(FieldError::new(
                path,
                format!("expected a whole number, found {}", kind(other)),
            ));
        }
    };
    if n < min || n > max {
        return Err(out_of_range(&n.to_string()));
    }
    Ok(n)
}

pub(crate) fn count(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
    default: usize,
) -> FieldResult<usize> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => Ok(whole(v, &join(path, key), 1, MAX_PER_FIELD)? as usize),
    }
}

fn parse_connection(
    c: &Value,
    at: &str,
    tp_ibm: bool,
    warnings: &mut Vec<FieldError>,
) -> FieldResult<Connection> {
    let obj = as_object(c, at)?;
    warn_unknown(obj, at, CONNECTION_FIELDS, &[], warnings);
    let id = obj
        .get("connectionId")
        .map(id_text)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            FieldError::new(
                join(at, "connectionId"),
                "missing; every connection needs an id that mappings refer to",
            )
        })?;
    let name = opt_str(obj, "connectionName", at)?;
    let data_at = join(at, "connectionData");
    let data = as_object(
        obj.get("connectionData").ok_or_else(|| {
            FieldError::new(
                &data_at,
                "missing; it says which broker to connect to and how",
            )
        })?,
        &data_at,
    )?;
    let ty = match opt_str(data, "type", &data_at)? {
        Some(t) => t,
        // Traffic Parrot's IBM MQ connections have no type field.
        None if tp_ibm || data.contains_key("queueManager") => "ibm-mq".to_owned(),
        None => {
            return Err(FieldError::new(
                join(&data_at, "type"),
                "missing; expected \"amqp\", \"ibm-mq\", \"nats\" or \"mqtt\"",
            ));
        }
    };
    let unmatched = match data.get("unmatched") {
        None | Some(Value::Null) => Unmatched::Queue(DEFAULT_UNMATCHED_QUEUE.to_owned()),
        Some(v) => {
            let path = join(&data_at, "unmatched");
            let u = as_object(v, &path)?;
            match (u.get("queue"), u.get("reject")) {
                (Some(q), None) => Unmatched::Queue(as_str(q, &join(&path, "queue"))?.to_owned()),
                (None, Some(r)) if as_bool(r, &join(&path, "reject"))? => Unmatched::Reject,
                _ => {
                    return Err(FieldError::new(
                        path,
                        "expected {\"queue\": \"NAME\"} or {\"reject\": true}",
                    ));
                }
            }
        }
    };
    let kind = match ty.as_str() {
        "amqp" => {
            warn_unknown(data, &data_at, AMQP_FIELDS, &[], warnings);
            let uri = match opt_str(data, "uri", &data_at)? {
                Some(u) => {
                    if !(u.starts_with("amqp://") || u.starts_with("amqps://")) {
                        return Err(FieldError::new(
                            join(&data_at, "uri"),
                            format!("{u:?} is not an amqp:// or amqps:// URI"),
                        ));
                    }
                    u
                }
                None => {
                    let host =
                        opt_str(data, "host", &data_at)?.unwrap_or_else(|| "127.0.0.1".into());
                    let port = match data.get("port") {
                        Some(p) => whole(p, &join(&data_at, "port"), 1, 65535)?,
                        None => 5672,
                    };
                    let user =
                        opt_str(data, "username", &data_at)?.unwrap_or_else(|| "guest".into());
                    let pass =
                        opt_str(data, "password", &data_at)?.unwrap_or_else(|| "guest".into());
                    let vhost = opt_str(data, "vhost", &data_at)?.unwrap_or_else(|| "/".into());
                    let enc = |s: &str| {
                        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
                            .to_string()
                    };
                    format!(
                        "amqp://{}:{}@{host}:{port}/{}",
                        enc(&user),
                        enc(&pass),
                        enc(&vhost)
                    )
                }
            };
            let prefetch = match data.get("prefetch") {
                None | Some(Value::Null) => 100,
                Some(p) => whole(p, &join(&data_at, "prefetch"), 1, 65535)? as u16,
            };
            ConnectionKind::Amqp(AmqpConfig {
                uri,
                read_connections: count(data, "readConnectionsToOpen", &data_at, 1)?,
                write_connections: count(data, "writeConnectionsToOpen", &data_at, 1)?,
                prefetch,
                declare_queues: match data.get("declareQueues") {
                    None | Some(Value::Null) => false,
                    Some(v) => as_bool(v, &join(&data_at, "declareQueues"))?,
                },
                connect_timeout: match data.get("connectTimeoutMilliseconds") {
                    None | Some(Value::Null) => DEFAULT_CONNECT_TIMEOUT,
                    Some(v) => Duration::from_millis(whole(
                        v,
                        &join(&data_at, "connectTimeoutMilliseconds"),
                        100,
                        600_000,
                    )?),
                },
            })
        }
        "ibm-mq" => {
            // `ibmMqVersion` is Traffic Parrot's and changes nothing here.
            warn_unknown(data, &data_at, IBM_FIELDS, &["ibmMqVersion"], warnings);
            let need = |key: &str| -> FieldResult<String> {
                opt_str(data, key, &data_at)?
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        FieldError::new(
                            join(&data_at, key),
                            "missing; an IBM MQ client connection needs it",
                        )
                    })
            };
            let port = match data.get("port") {
                Some(p) => whole(p, &join(&data_at, "port"), 1, 65535)? as u16,
                None => 1414,
            };
            if unmatched == Unmatched::Reject {
                return Err(FieldError::new(
                    join(&data_at, "unmatched"),
                    "IBM MQ has no reject: a message got under syncpoint can only be committed \
                     or backed out (and then comes back); name a queue instead, such as \
                     {\"queue\": \"DEV.DEAD.LETTER.QUEUE\"}",
                ));
            }
            let limited = |key: &str, value: String, max: usize| -> FieldResult<String> {
                if value.len() > max {
                    return Err(FieldError::new(
                        join(&data_at, key),
                        format!("{value:?} is longer than IBM MQ's {max} characters"),
                    ));
                }
                Ok(value)
            };
            ConnectionKind::IbmMq(IbmMqConfig {
                hostname: need("hostname")?,
                port,
                queue_manager: limited("queueManager", need("queueManager")?, 48)?,
                channel: limited("channel", need("channel")?, 20)?,
                username: opt_str(data, "username", &data_at)?.filter(|s| !s.is_empty()),
                password: opt_str(data, "password", &data_at)?.filter(|s| !s.is_empty()),
                use_mqcsp: match data.get("useMQCSPAuthenticationMode") {
                    None | Some(Value::Null) => false,
                    Some(v) => as_bool(v, &join(&data_at, "useMQCSPAuthenticationMode"))?,
                },
                read_connections: count(data, "readConnectionsToOpen", &data_at, 1)?,
                write_connections: count(data, "writeConnectionsToOpen", &data_at, 1)?,
                ssl_cipher_suite: opt_str(data, "sslCipherSuite", &data_at)?
                    .filter(|s| !s.is_empty()),
                ssl_peer_name: opt_str(data, "sslPeerName", &data_at)?.filter(|s| !s.is_empty()),
            })
        }
        "nats" => ConnectionKind::Nats(super::nats::config::parse_connection(
            data, &data_at, warnings,
        )?),
        "mqtt" => {
            if unmatched == Unmatched::Reject {
                return Err(FieldError::new(
                    join(&data_at, "unmatched"),
                    "MQTT has no reject: a message is acknowledged or redelivered; name a \
                     topic to publish unmatched messages on instead, such as \
                     {\"queue\": \"decoy/unmatched\"}",
                ));
            }
            ConnectionKind::Mqtt(super::mqtt::config::parse(data, &data_at, warnings)?)
        }
        "amqp1" => ConnectionKind::Amqp1(super::amqp1::config::parse(data, &data_at, warnings)?),
        other => {
            return Err(FieldError::new(
                join(&data_at, "type"),
                format!(
                    "unknown broker type {other:?}; expected \"amqp\", \"ibm-mq\", \"nats\" or \"mqtt\""
                ),
            ));
        }
    };
    if let Unmatched::Queue(q) = &unmatched {
        check_name(
            q,
            false,
            false,
            &join(&join(&data_at, "unmatched"), "queue"),
            &kind,
        )?;
    }
    Ok(Connection {
        id,
        name,
        kind,
        unmatched,
    })
}

/// Checks a queue or topic name against what the connection's broker accepts: not
/// empty, and at most 255 bytes on AMQP (a short string in AMQP 0-9-1; the queue of a
/// topic decoy `subscribes` to is `decoy.topic.` and the topic) or 48 characters for
/// an IBM MQ queue.
fn check_name(
    name: &str,
    topic: bool,
    subscribes: bool,
    path: &str,
    kind: &ConnectionKind,
) -> FieldResult<()> {
    if name.trim().is_empty() {
        return Err(FieldError::new(path, "must not be empty"));
    }
    match kind {
        ConnectionKind::Amqp(_) => {
            let prefixed = topic && subscribes;
            let max = if prefixed {
                AMQP_NAME_MAX - TOPIC_QUEUE_PREFIX.len()
            } else {
                AMQP_NAME_MAX
            };
            if name.len() > max {
                let what = if prefixed {
                    format!(
                        "a topic is at most {max} bytes on AMQP (its queue, {:?} and the topic, \
                         is a short string of at most {AMQP_NAME_MAX})",
                        TOPIC_QUEUE_PREFIX
                    )
                } else {
                    format!("a queue name is at most {AMQP_NAME_MAX} bytes on AMQP 0-9-1")
                };
                return Err(FieldError::new(
                    path,
                    format!(
                        "{} is {} bytes long; {what}",
                        show(&Value::from(name)),
                        name.len()
                    ),
                ));
            }
        }
        // An IBM MQ topic string may be long; only queue names have the limit.
        ConnectionKind::IbmMq(_) if !topic && name.chars().count() > IBM_MQ_NAME_MAX => {
            return Err(FieldError::new(
                path,
                format!(
                    "{} is longer than IBM MQ's {IBM_MQ_NAME_MAX} characters",
                    show(&Value::from(name))
                ),
            ));
        }
        ConnectionKind::IbmMq(_) => {}
        ConnectionKind::Nats(_) => super::nats::config::check_subject(name, subscribes, path)?,
        ConnectionKind::Mqtt(_) => super::mqtt::config::check_topic(name, subscribes, path)?,
        // An AMQP 1.0 address is a string of any length.
        ConnectionKind::Amqp1(_) => {}
    }
    Ok(())
}

/// Where a destination's name is, for messages: `request.destination` when it was
/// given as a string, `request.destination.name` when as an object.
fn name_path(obj: &Map<String, Value>, parent: &str) -> String {
    let (key, at) = parent.rsplit_once('.').unwrap_or(("", parent));
    let holder = if key.is_empty() {
        obj.get(at)
    } else {
        obj.get(key).and_then(|r| r.get(at))
    };
    match holder {
        Some(Value::Object(_)) => join(parent, "name"),
        _ => parent.to_owned(),
    }
}

const MAPPING_FIELDS: &[&str] = &[
    "mappingId",
    "id",
    "name",
    "connectionId",
    "priority",
    "request",
    "response",
    "receiveThreads",
    "sendThreads",
    "correlation",
    "serveEventListeners",
    "postServeActions",
];
const REQUEST_FIELDS: &[&str] = &[
    "destination",
    "bodyMatcher",
    "properties",
    "headers",
    "jetstream",
];
const RESPONSE_FIELDS: &[&str] = &[
    "destination",
    "text",
    "base64Body",
    "bodyFileName",
    "format",
    "properties",
    "fixedDelayMilliseconds",
    "delayDistribution",
    "transformers",
    "transformerParameters",
    "retain",
];

fn parse_mapping(
    v: &Value,
    rel: &Path,
    index: usize,
    files: BodyFiles<'_>,
    plugins: Option<&decoy_plugin_host::Plugins>,
    (connections, read): (&[Connection], &ConnectionFile),
    warnings: &mut Vec<FieldError>,
) -> Result<MqMapping, Vec<FieldError>> {
    let obj = as_object(v, "").map_err(|e| vec![e])?;
    warn_unknown(obj, "", MAPPING_FIELDS, &[], warnings);
    let mut errors = Vec::new();
    let mut check = |r: FieldResult<()>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    let id: Arc<str> = match obj.get("mappingId").or_else(|| obj.get("id")) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().into(),
        Some(other) => {
            check(Err(FieldError::new(
                "mappingId",
                format!("expected a non-empty string, found {}", kind(other)),
            )));
            "".into()
        }
        // Stable across restarts: derived from where the mapping is.
        None => uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_URL,
            format!("mq:{}#{index}", rel.display()).as_bytes(),
        )
        .to_string()
        .into(),
    };
    let mut name = None;
    check((|| {
        name = opt_str(obj, "name", "")?.map(Arc::from);
        Ok(())
    })());
    let mut connection_id = String::new();
    check((|| {
        connection_id = match obj.get("connectionId") {
            Some(c) => id_text(c),
            // The only connection the file lists; with another one rejected, which
            // was meant is not known: the mapping must say, as with two valid ones.
            None if connections.len() == 1 && read.rejected.is_empty() => connections[0].id.clone(),
            None if connections.is_empty() => {
                return Err(FieldError::new("connectionId", read.why_none()));
            }
            None if !read.rejected.is_empty() => {
                return Err(FieldError::new(
                    "connectionId",
                    format!(
                        "missing; {} lists {} connections ({} rejected), say which one",
                        read.name(),
                        read.entries,
                        read.rejected.len()
                    ),
                ));
            }
            None => {
                return Err(FieldError::new(
                    "connectionId",
                    format!(
                        "missing; {} defines several connections, say which one",
                        read.name()
                    ),
                ));
            }
        };
        if !connections.iter().any(|c| c.id == connection_id) {
            if let Some(why) = read.why_missing(&connection_id) {
                return Err(FieldError::new("connectionId", why));
            }
            let known: Vec<&str> = connections.iter().map(|c| c.id.as_str()).collect();
            return Err(FieldError::new(
                "connectionId",
                format!(
                    "{connection_id:?} is not a connection in {} (known: {})",
                    read.name(),
                    known.join(", ")
                ),
            ));
        }
        Ok(())
    })());
    let mut priority = DEFAULT_PRIORITY;
    check((|| {
        if let Some(p) = obj.get("priority") {
            priority = as_i64(p, "priority")?;
        }
        Ok(())
    })());
    let mut receive_threads = 1;
    let mut send_threads = 1;
    check((|| {
        receive_threads = count(obj, "receiveThreads", "", 1)?;
        send_threads = count(obj, "sendThreads", "", 1)?;
        Ok(())
    })());
    // AMQP 1.0 requesters correlate by correlation id, or (JMS) by message id.
    let mut correlation = if connections
        .iter()
        .any(|c| c.id == connection_id && matches!(c.kind, ConnectionKind::Amqp1(_)))
    {
        Correlation::CorrelIdOrMsgId
    } else {
        Correlation::MsgIdToCorrelId
    };
    check((|| {
        if let Some(c) = obj.get("correlation") {
            correlation = match as_str(c, "correlation")? {
                "MSGID_TO_CORRELID" => Correlation::MsgIdToCorrelId,
                "COPY_CORRELID" => Correlation::CopyCorrelId,
                "CORRELID_OR_MSGID" => Correlation::CorrelIdOrMsgId,
                other => {
                    return Err(FieldError::new(
                        "correlation",
                        format!(
                            "{other:?}: expected MSGID_TO_CORRELID, COPY_CORRELID or CORRELID_OR_MSGID"
                        ),
                    ));
                }
            };
        }
        Ok(())
    })());

    let mut queue = Destination::queue("");
    let mut queue_given = false;
    let mut body = None;
    let mut properties = Vec::new();
    let mut jetstream = None;
    let mut request_obj = None;
    match obj.get("request") {
        None => errors.push(FieldError::new(
            "request",
            "missing; it says which queue to listen on",
        )),
        Some(r) => match as_object(r, "request") {
            Err(e) => errors.push(e),
            Ok(req) => {
                request_obj = Some(req);
                warn_unknown(req, "request", REQUEST_FIELDS, &[], warnings);
                match req.get("destination") {
                    None => errors.push(FieldError::new(
                        "request.destination",
                        "missing; it names the queue to listen on",
                    )),
                    Some(d) => match parse_destination(d, "request.destination") {
                        Ok(q) => {
                            queue = q;
                            queue_given = true;
                        }
                        Err(e) => errors.push(e),
                    },
                }
                if let Some(b) = req.get("bodyMatcher") {
                    match StringPattern::parse(b, "request.bodyMatcher") {
                        Ok(p) => body = Some(p),
                        Err(e) => errors.push(e),
                    }
                }
                for key in ["properties", "headers"] {
                    if let Some(p) = req.get(key) {
                        let path = join("request", key);
                        match as_object(p, &path) {
                            Err(e) => errors.push(e),
                            Ok(map) => {
                                for (k, pat) in map {
                                    match StringPattern::parse(pat, &join(&path, k)) {
                                        Ok(p) => properties.push((k.clone(), p)),
                                        Err(e) => errors.push(e),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    }
    let response = match obj.get("response") {
        None => Some(MqResponse::default()),
        Some(r) => parse_response(r, files, plugins, warnings)
            .map_err(|e| errors.extend(e))
            .ok(),
    };
    let webhooks = decoy_core::webhooks::parse(obj, plugins, files, warnings)
        .map_err(|e| errors.extend(e))
        .ok()
        .flatten();
    if let Some(c) = connections.iter().find(|c| c.id == connection_id) {
        if let Some(req) = request_obj.filter(|r| r.contains_key("jetstream")) {
            if matches!(c.kind, ConnectionKind::Nats(_)) {
                match super::nats::config::parse_jetstream(req, &queue.name, warnings) {
                    Ok(j) => jetstream = j,
                    Err(e) => errors.push(e),
                }
            } else {
                errors.push(FieldError::new(
                    "request.jetstream",
                    format!(
                        "connection {connection_id:?} is not a NATS connection; JetStream is NATS's"
                    ),
                ));
            }
        }
        if queue_given {
            let path = name_path(obj, "request.destination");
            if let Err(e) = check_name(&queue.name, queue.topic, true, &path, &c.kind) {
                errors.push(e);
            }
        }
        if let Some(d) = response.as_ref().and_then(|r| r.destination.as_ref()) {
            let path = name_path(obj, "response.destination");
            if let Err(e) = check_name(&d.name, d.topic, false, &path, &c.kind) {
                errors.push(e);
            }
        }
    }
    let subscriber_per_receiver =
        connections
            .iter()
            .find(|c| c.id == connection_id)
            .and_then(|c| match c.kind {
                ConnectionKind::IbmMq(_) => Some("an IBM MQ topic"),
                ConnectionKind::Amqp1(_) => Some("an AMQP 1.0 topic"),
                _ => None,
            });
    if let Some(on) = subscriber_per_receiver.filter(|_| queue.topic && receive_threads > 1) {
        // Each subscriber gets every publication: more receivers would answer each
        // one several times.
        warnings.push(FieldError::new(
            "receiveThreads",
            format!(
                "{receive_threads} receivers on {on} would each get every \
                 publication; 1 is used"
            ),
        ));
        receive_threads = 1;
    }
    match (response, errors.is_empty()) {
        (Some(response), true) => Ok(MqMapping {
            id,
            name,
            connection_id,
            priority,
            queue,
            body,
            properties,
            response,
            receive_threads,
            send_threads,
            correlation,
            jetstream,
            webhooks,
            file: rel.to_path_buf(),
            index,
        }),
        _ => Err(errors),
    }
}

/// `{"name": "Q", "type": "QUEUE"}` (or just `"Q"`, a queue), or a `TOPIC`.
pub(crate) fn parse_destination(v: &Value, path: &str) -> FieldResult<Destination> {
    if let Value::String(s) = v {
        return Ok(Destination::queue(s.clone()));
    }
    let d = as_object(v, path)?;
    let name = as_str(
        d.get("name")
            .ok_or_else(|| FieldError::new(join(path, "name"), "missing"))?,
        &join(path, "name"),
    )?;
    if name.trim().is_empty() {
        return Err(FieldError::new(join(path, "name"), "must not be empty"));
    }
    match d
        .get("type")
        .map(|t| as_str(t, &join(path, "type")))
        .transpose()?
    {
        None | Some("QUEUE") => Ok(Destination::queue(name)),
        Some("TOPIC") => Ok(Destination::topic(name)),
        Some(other) => Err(FieldError::new(
            join(path, "type"),
            format!("{other:?}: expected QUEUE or TOPIC"),
        )),
    }
}

/// MQ's format names as written in Traffic Parrot's files, to the 8-character MQMD
/// values.
fn format_name(s: &str) -> Option<&'static str> {
    Some(match s {
        "MQFMT_STRING" | "MQSTR" => "MQSTR",
        "MQFMT_NONE" | "" => "",
        "MQFMT_RF_HEADER_2" | "MQHRF2" => "MQHRF2",
        _ => return None,
    })
}

/// The fields a reply's body may come from, in the order they are looked for.
const BODY_KEYS: [&str; 3] = ["text", "base64Body", "bodyFileName"];

fn parse_response(
    v: &Value,
    files: BodyFiles<'_>,
    plugins: Option<&decoy_plugin_host::Plugins>,
    warnings: &mut Vec<FieldError>,
) -> Result<MqResponse, Vec<FieldError>> {
    let obj = as_object(v, "response").map_err(|e| vec![e])?;
    warn_unknown(
        obj,
        "response",
        RESPONSE_FIELDS,
        &["ibmMqResponseTransformerClassName"],
        warnings,
    );
    let mut errors = Vec::new();
    let mut out = MqResponse::default();
    match decoy_core::plugins::Transformers::parse(obj, plugins, false, warnings) {
        Ok(t) => out.transformers = t,
        Err(e) => errors.extend(e),
    }
    let mut check = |r: FieldResult<()>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    if let Some(t) = obj
        .get("ibmMqResponseTransformerClassName")
        .and_then(Value::as_str)
        && t != "NO_TRANSFORMER"
    {
        check(Err(FieldError::new(
            "response.ibmMqResponseTransformerClassName",
            format!("{t:?}: Java transformers cannot run here; use NO_TRANSFORMER"),
        )));
    }
    check((|| {
        if let Some(d) = obj.get("destination").filter(|d| !d.is_null()) {
            out.destination = Some(parse_destination(d, "response.destination")?);
        }
        Ok(())
    })());
    check((|| {
        if let Some(body) = parse_body_field(obj, files, &BODY_KEYS)? {
            out.body = body;
        }
        Ok(())
    })());
    check((|| {
        if let Some(f) = obj.get("format").filter(|f| !f.is_null()) {
            let s = as_str(f, "response.format")?;
            out.format = format_name(s).map(str::to_owned).ok_or_else(|| {
                FieldError::new(
                    "response.format",
                    format!("{s:?}: expected MQFMT_STRING, MQFMT_NONE or MQFMT_RF_HEADER_2"),
                )
            })?;
        }
        Ok(())
    })());
    check((|| {
        if let Some(p) = obj.get("properties") {
            for (k, v) in as_object(p, "response.properties")? {
                let at = join("response.properties", k);
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(_) | Value::Bool(_) => v.to_string(),
                    other => {
                        return Err(FieldError::new(
                            at,
                            format!(
                                "expected a string, number or boolean, found {}",
                                kind(other)
                            ),
                        ));
                    }
                };
                out.properties.push((k.clone(), text));
            }
        }
        Ok(())
    })());
    check((|| {
        if let Some(r) = obj.get("retain").filter(|r| !r.is_null()) {
            out.retain = as_bool(r, "response.retain")?;
        }
        Ok(())
    })());
    check((|| {
        if let Some(ms) = obj.get("fixedDelayMilliseconds") {
            out.fixed_delay = Duration::from_millis(as_u64(ms, "response.fixedDelayMilliseconds")?);
        }
        if let Some(d) = obj.get("delayDistribution") {
            out.delay_distribution = Some(parse_distribution(d, "response.delayDistribution")?);
        }
        Ok(())
    })());
    if !errors.is_empty() {
        return Err(errors);
    }
    // A template that does not compile is reported now, with its field and
    // position, as an HTTP stub's is, and the mapping stays as it does: the plugin
    // fails on it when a request comes, which then goes the unmatched way.
    let mut values: Vec<(String, &str)> = out
        .properties
        .iter()
        .map(|(k, text)| (join("response.properties", k), text.as_str()))
        .collect();
    if let Some(d) = &out.destination {
        let path = match obj.get("destination") {
            Some(Value::Object(_)) => "response.destination.name",
            _ => "response.destination",
        };
        values.push((path.to_owned(), &d.name));
    }
    if let Err(e) =
        out.transformers
            .check_templates(Some(v), &BODY_KEYS, &out.body, &values, plugins)
    {
        warnings.extend(e);
    }
    if !out.transformers.is_empty() {
        out.reply_key = Some(AnswerKey::of(&reply_record(
            &out.body,
            out.properties.clone(),
        )));
        out.destination_key = out
            .destination
            .as_ref()
            .filter(|d| d.name.contains("{{"))
            .map(|d| AnswerKey::of(&reply_record(d.name.as_bytes(), Vec::new())));
    }
    Ok(out)
}

/// Reads MQ files written for a test: one connection and `mappings` (one file each).
/// Panics on a problem, so a test's own files are always clean.
#[cfg(test)]
pub(crate) fn load_for_test(
    connection: &serde_json::Value,
    mappings: &[serde_json::Value],
) -> MqLoad {
    #![allow(clippy::unwrap_used)]
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, v: &serde_json::Value| {
        std::fs::write(dir.path().join(rel), v.to_string()).unwrap();
    };
    write("mq-connections.json", &serde_json::json!([connection]));
    std::fs::create_dir(dir.path().join("mq-mappings")).unwrap();
    for (i, m) in mappings.iter().enumerate() {
        write(&format!("mq-mappings/{i:02}.json"), m);
    }
    let load = load(dir.path());
    assert!(load.problems.is_empty(), "{:?}", load.problems);
    load
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Loads a root holding `connections` and `mappings` (one file each); the
    /// problems as they would be printed.
    fn problems_of(connections: Value, mappings: &[Value]) -> (MqLoad, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mq-connections.json"),
            connections.to_string(),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("mq-mappings")).unwrap();
        for (i, m) in mappings.iter().enumerate() {
            std::fs::write(
                dir.path().join(format!("mq-mappings/{i:02}.json")),
                m.to_string(),
            )
            .unwrap();
        }
        let load = load(dir.path());
        let shown = load.problems.iter().map(|p| p.to_string()).collect();
        (load, shown)
    }

    fn amqp(id: &str, data: Value) -> Value {
        let mut d = json!({"type": "amqp", "uri": "amqp://127.0.0.1"});
        d.as_object_mut()
            .unwrap()
            .extend(data.as_object().unwrap().clone());
        json!({"connectionId": id, "connectionData": d})
    }

    fn listening_on(queue: &str, extra: Value) -> Value {
        let mut m = json!({"request": {"destination": queue}, "response": {"text": "ok"}});
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        m
    }

    #[test]
    fn a_template_that_does_not_compile_is_a_warning_naming_its_field_and_the_mapping_stays() {
        let templated = |response: Value| {
            let mut r = json!({"transformers": ["response-template"]});
            r.as_object_mut()
                .unwrap()
                .extend(response.as_object().unwrap().clone());
            json!({"request": {"destination": {"name": "Q", "type": "QUEUE"}}, "response": r})
        };
        let (load, problems) = problems_of(
            json!([amqp("a", json!({}))]),
            &[
                templated(json!({"text": "{{#if}}"})),
                templated(json!({"text": "ok {{request.body}}",
                                 "properties": {"trace": "{{request..x}}", "plain": "{{request.body}}"},
                                 "destination": {"name": "R{{", "type": "QUEUE"}})),
                templated(json!({"base64Body": "e3sjZWFjaH19", "destination": "R{{"})),
                // Without response-template, braces are text.
                json!({"request": {"destination": "Q"}, "response": {"text": "{{#if}}"}}),
            ],
        );
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(load.mappings.len(), 4, "the mappings stay");
        let warnings: Vec<String> = load.warnings.iter().map(ToString::to_string).collect();
        let unclosed = "the template ends before a {{...}} or a {{#block}} is closed";
        assert_eq!(
            warnings,
            [
                format!(
                    "mq-mappings/00.json: mapping #0: response.text: bad template: invalid \
                     Handlebars syntax at line 1, column 8: {unclosed}"
                ),
                "mq-mappings/01.json: mapping #0: response.properties.trace: bad template: \
                 invalid Handlebars syntax at line 1, column 11, near \".x}}\""
                    .to_owned(),
                format!(
                    "mq-mappings/01.json: mapping #0: response.destination.name: bad template: \
                     invalid Handlebars syntax at line 1, column 4: {unclosed}"
                ),
                format!(
                    "mq-mappings/02.json: mapping #0: response.base64Body: bad template: \
                     invalid Handlebars syntax at line 1, column 10: {unclosed}"
                ),
                format!(
                    "mq-mappings/02.json: mapping #0: response.destination: bad template: \
                     invalid Handlebars syntax at line 1, column 4: {unclosed}"
                ),
            ]
        );
    }

    #[test]
    fn a_mapping_whose_connection_was_rejected_says_so_and_points_at_its_problem() {
        let bad = amqp("m", json!({"prefetch": 0}));
        let rejected = "mq-connections.json: connection #0 (id m): [0].connectionData.prefetch: 0 \
                        is out of range (1-65535)";
        // The only connection, which mappings use without naming it.
        let (load, problems) = problems_of(json!([bad]), &[listening_on("Q", json!({}))]);
        assert_eq!(
            problems,
            [
                rejected,
                "mq-mappings/00.json: mapping #0: connectionId: the only connection, [0] \
                 (connectionId \"m\") in mq-connections.json, was rejected: see its problem"
            ]
        );
        assert_eq!(load.rejected, 1);
        // One named among others.
        let (_, problems) = problems_of(
            json!([bad, amqp("ok", json!({}))]),
            &[listening_on("Q", json!({"connectionId": "m"}))],
        );
        assert_eq!(
            problems,
            [
                rejected,
                "mq-mappings/00.json: mapping #0: connectionId: the connection [0] \
                 (connectionId \"m\") in mq-connections.json was rejected: see its problem"
            ]
        );
        // One valid beside a rejected one, none named: which was meant is not known.
        let (_, problems) = problems_of(
            json!([bad, amqp("ok", json!({}))]),
            &[listening_on("Q", json!({}))],
        );
        assert_eq!(
            problems,
            [
                rejected,
                "mq-mappings/00.json: mapping #0: connectionId: missing; mq-connections.json \
                 lists 2 connections (1 rejected), say which one"
            ]
        );
        // Each of several, none named.
        let (_, problems) = problems_of(
            json!([bad, amqp("n", json!({"prefetch": 0}))]),
            &[listening_on("Q", json!({}))],
        );
        assert_eq!(
            problems[2],
            "mq-mappings/00.json: mapping #0: connectionId: every connection in \
             mq-connections.json was rejected: see their problems"
        );
        // A file that is not a list, and one that lists none.
        let (_, problems) = problems_of(json!("amqp"), &[listening_on("Q", json!({}))]);
        assert_eq!(
            problems,
            [
                "mq-connections.json: expected a list of connections, found a string",
                "mq-mappings/00.json: mapping #0: connectionId: mq-connections.json could not \
                 be read, so no connection is defined: see its problem"
            ]
        );
        let (_, problems) = problems_of(json!([]), &[listening_on("Q", json!({}))]);
        assert_eq!(
            problems,
            [
                "mq-mappings/00.json: mapping #0: connectionId: mq-connections.json defines no \
              connection: add one"
            ]
        );
    }

    #[test]
    fn whole_numbers_refuse_fractions_and_quote_the_number_given() {
        let at = |v: Value| whole(&v, "f", 1, 1000).map_err(|e| e.to_string());
        assert_eq!(at(json!(7)), Ok(7));
        assert_eq!(at(json!("7")), Ok(7));
        assert_eq!(at(json!(2.0)), Ok(2));
        assert_eq!(
            at(json!(1.9999)),
            Err("f: 1.9999 is not a whole number".into())
        );
        assert_eq!(
            at(json!("2.5")),
            Err("f: \"2.5\" is not a whole number".into())
        );
        assert_eq!(
            at(json!(1e30)),
            Err("f: 1e+30 is out of range (1-1000)".into())
        );
        assert_eq!(
            at(json!(18446744073709551615u64)),
            Err("f: 18446744073709551615 is out of range (1-1000)".into())
        );
        assert_eq!(at(json!(-3)), Err("f: -3 is out of range (1-1000)".into()));
        assert_eq!(at(json!(0)), Err("f: 0 is out of range (1-1000)".into()));
        assert_eq!(
            at(json!(true)),
            Err("f: expected a whole number, found a boolean".into())
        );
    }

    #[test]
    fn broker_connections_are_limited_over_the_whole_file() {
        let each = json!({"readConnectionsToOpen": 100, "writeConnectionsToOpen": 100});
        let (load, problems) = problems_of(
            json!([amqp("a", each.clone()), amqp("b", each)]),
            &[listening_on("Q", json!({"connectionId": "a"}))],
        );
        assert_eq!(
            problems,
            [format!(
                "mq-connections.json: the connections open 400 broker connections in total \
                 (readConnectionsToOpen + writeConnectionsToOpen over 2 connections), more than \
                 the limit of {MAX_CONNECTIONS}: each is a connection on the broker and an OS \
                 thread, a socket and buffers in decoy; lower them (one connection carries many \
                 receivers and senders on channels of their own)"
            )]
        );
        assert!(load.mappings.is_empty(), "nothing is served");
        assert_eq!(load.rejected, 1);

        // Up to the limit, it loads.
        let (load, problems) = problems_of(
            json!([amqp(
                "a",
                json!({"readConnectionsToOpen": 200, "writeConnectionsToOpen": 56})
            )]),
            &[listening_on("Q", json!({}))],
        );
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(load.mappings.len(), 1);
    }

    #[test]
    fn each_mqtt_receiver_counts_as_a_broker_connection_in_the_total() {
        let conn = |write: u64| {
            json!([{"connectionId": "m", "connectionData": {"type": "mqtt",
                    "uri": "mqtt://127.0.0.1", "writeConnectionsToOpen": write}}])
        };
        let mappings: Vec<Value> = (0..5)
            .map(|i| {
                json!({"request": {"destination": {"name": format!("t/{i}/+"), "type": "TOPIC"}},
                       "receiveThreads": 50})
            })
            .collect();
        let (load, problems) = problems_of(conn(6), &mappings);
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(load.mappings.len(), 5);
        let (load, problems) = problems_of(conn(7), &mappings);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "mq-connections.json: the connections open 257 broker connections in total \
                 (readConnectionsToOpen + writeConnectionsToOpen over 1 connections, and one \
                 per MQTT receiver: 250), more than the limit of 256"
            ),
            "{problems:?}"
        );
        assert!(load.mappings.is_empty());
    }

    #[test]
    fn receivers_and_senders_are_limited_over_every_mapping() {
        let mappings: Vec<Value> = (0..3)
            .map(|i| {
                listening_on(
                    &format!("Q{i}"),
                    json!({"receiveThreads": 400, "sendThreads": 2}),
                )
            })
            .collect();
        let (load, problems) = problems_of(json!([amqp("a", json!({}))]), &mappings);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "mq-mappings: the mappings start 1200 receivers in total (receiveThreads, the \
                 largest per queue, over 3 queues), more than the limit of 1000"
            ),
            "{problems:?}"
        );
        assert!(load.mappings.is_empty());

        // Mappings sharing a queue share its receivers: counted once.
        let same: Vec<Value> = (0..3)
            .map(|_| listening_on("Q", json!({"receiveThreads": 400})))
            .collect();
        let (load, problems) = problems_of(json!([amqp("a", json!({}))]), &same);
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(load.mappings.len(), 3);
    }

    #[test]
    fn amqp_queue_names_must_be_short_strings_and_not_empty() {
        let long = "q".repeat(256);
        let (_, problems) = problems_of(
            json!([amqp("a", json!({}))]),
            &[
                listening_on("", json!({})),
                listening_on(&"q".repeat(255), json!({})),
                json!({"request": {"destination": {"name": long, "type": "QUEUE"}}}),
                json!({"request": {"destination": {"name": "t".repeat(250), "type": "TOPIC"}}}),
                json!({"request": {"destination": "Q"}, "response": {"destination": {"name": "t".repeat(250), "type": "TOPIC"}}}),
            ],
        );
        assert_eq!(
            problems,
            [
                "mq-mappings/00.json: mapping #0: request.destination: must not be empty"
                    .to_owned(),
                format!(
                    "mq-mappings/02.json: mapping #0: request.destination.name: \"{}... is \
                     256 bytes long; a queue name is at most 255 bytes on AMQP 0-9-1",
                    "q".repeat(56)
                ),
                format!(
                    "mq-mappings/03.json: mapping #0: request.destination.name: \"{}... is \
                     250 bytes long; a topic is at most 243 bytes on AMQP (its queue, \
                     \"decoy.topic.\" and the topic, is a short string of at most 255)",
                    "t".repeat(56)
                ),
            ]
        );
        let (_, problems) =
            problems_of(json!([amqp("a", json!({"unmatched": {"queue": ""}}))]), &[]);
        assert_eq!(
            problems,
            [
                "mq-connections.json: connection #0 (id a): [0].connectionData.unmatched.queue: must not be empty"
            ]
        );
    }

    #[test]
    fn connection_numbers_are_whole_and_in_range() {
        let (_, problems) = problems_of(
            json!([amqp("a", json!({"readConnectionsToOpen": 1.9999}))]),
            &[],
        );
        assert_eq!(
            problems,
            [
                "mq-connections.json: connection #0 (id a): [0].connectionData.readConnectionsToOpen: 1.9999 is not a whole number"
            ]
        );
        let (_, problems) = problems_of(json!([amqp("a", json!({"prefetch": 70000}))]), &[]);
        assert_eq!(
            problems,
            [
                "mq-connections.json: connection #0 (id a): [0].connectionData.prefetch: 70000 is out of range (1-65535)"
            ]
        );
        let (load, problems) = problems_of(
            json!([amqp(
                "a",
                json!({"declareQueues": true, "connectTimeoutMilliseconds": 500})
            )]),
            &[],
        );
        assert_eq!(problems, Vec::<String>::new());
        let ConnectionKind::Amqp(a) = &load.connections[0].kind else {
            panic!("{:?}", load.connections);
        };
        assert!(a.declare_queues);
        assert_eq!(a.connect_timeout, Duration::from_millis(500));
    }
}
