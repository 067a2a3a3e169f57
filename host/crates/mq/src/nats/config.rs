//! The NATS parts of the MQ files: a `"type": "nats"` connection in
//! `mq-connections.json`, a mapping's `request.jetstream`, and what a NATS subject may
//! be. Called from [`crate::config`], with its error style (file, mapping, JSON path,
//! reason).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{
    Connection, ConnectionKind, DEFAULT_CONNECT_TIMEOUT, MqLoad, count, opt_str, whole,
};
use decoy_core::mapping::load::Problem;
use decoy_spec::fields::{FieldError, FieldResult, as_bool, as_object, join, show, warn_unknown};

/// The queue group decoy's subscribers join unless the connection names another, so
/// the receivers of one decoy, and several decoys, share each message.
pub const DEFAULT_QUEUE_GROUP: &str = "decoy";
/// Messages one subscription may hold before the client drops further ones (core
/// NATS), and the pull batch of a JetStream receiver, unless `prefetch` says otherwise.
pub const DEFAULT_PREFETCH: u64 = 1000;
/// How long JetStream waits for decoy's ack before it delivers a request again, unless
/// `request.jetstream.ackWaitMilliseconds` says otherwise.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);

pub(crate) const FIELDS: &[&str] = &[
    "type",
    "uri",
    "username",
    "password",
    "token",
    "nkeySeed",
    "credentialsFile",
    "tlsRequired",
    "tlsCaFile",
    "tlsCertFile",
    "tlsKeyFile",
    "readConnectionsToOpen",
    "writeConnectionsToOpen",
    "prefetch",
    "queueGroup",
    "connectTimeoutMilliseconds",
    "unmatched",
];

/// How decoy signs in to the NATS server: at most one way.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NatsAuth {
    /// None, or a `user:password@` in the URI.
    #[default]
    None,
    UserPassword(String, String),
    Token(String),
    /// An nkey seed (`SU...`).
    Nkey(String),
    /// A `.creds` file (a user JWT and its nkey seed).
    CredentialsFile(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsConfig {
    /// The servers, from `uri` (comma-separated: `nats://a:4222,nats://b:4222`).
    pub servers: Vec<String>,
    pub auth: NatsAuth,
    /// TLS even when the URI says `nats://` (`tls://` requires it anyway).
    pub tls_required: bool,
    /// A PEM file of certificates to trust besides the system's.
    pub tls_ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for servers that verify clients.
    pub tls_client: Option<(PathBuf, PathBuf)>,
    pub read_connections: usize,
    pub write_connections: usize,
    /// Core: messages a subscription may hold (then the client drops new ones, as a
    /// NATS slow consumer). JetStream: the pull batch.
    pub prefetch: usize,
    pub queue_group: String,
    pub connect_timeout: Duration,
}

impl NatsConfig {
    /// The URI as shown in messages: no password, no token.
    pub fn shown(&self) -> String {
        self.servers
            .iter()
            .map(|s| without_credentials(s))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `nats://user:secret@host:4222` → `nats://user@host:4222`; `nats://TOKEN@host` →
/// `nats://***@host` (a token alone is a secret).
pub fn without_credentials(uri: &str) -> String {
    match (uri.find("://"), uri.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &uri[s + 3..at];
            let user = match creds.split_once(':') {
                Some((user, _)) => user,
                None => "***",
            };
            format!("{}{}@{}", &uri[..s + 3], user, &uri[at + 1..])
        }
        _ => uri.to_owned(),
    }
}

/// A mapping's JetStream source: requests come from a stream through a durable pull
/// consumer, and each is acknowledged once its reply was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetStreamSource {
    pub stream: String,
    pub durable: String,
    pub ack_wait: Duration,
}

/// The durable consumer named after a subject when the mapping names none:
/// `decoy-` and the subject, with `.` as `_`, `*` as `any` and `>` as `all`
/// (`orders.*` → `decoy-orders_any`), since a consumer name may hold none of them.
pub fn default_durable(subject: &str) -> String {
    let mut out = String::from("decoy-");
    for c in subject.chars() {
        match c {
            '.' => out.push('_'),
            '*' => out.push_str("any"),
            '>' => out.push_str("all"),
            c if c.is_whitespace() || c == '/' || c == '\\' => out.push('_'),
            c => out.push(c),
        }
    }
    out
}

/// A stream or consumer name: not empty, none of ` . * > / \`.
fn check_js_name(name: &str, path: &str, what: &str) -> FieldResult<()> {
    if name.is_empty() {
        return Err(FieldError::new(path, "must not be empty"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
    {
        return Err(FieldError::new(
            path,
            format!(
                "{} holds {c:?}; a JetStream {what} name may not contain whitespace, '.', '*', '>', '/' or '\\'",
                show(&Value::from(name))
            ),
        ));
    }
    Ok(())
}

const JETSTREAM_FIELDS: &[&str] = &["stream", "durable", "ackWaitMilliseconds"];

/// `request.jetstream` of a mapping listening on `subject`, when given.
pub fn parse_jetstream(
    req: &Map<String, Value>,
    subject: &str,
    warnings: &mut Vec<FieldError>,
) -> FieldResult<Option<JetStreamSource>> {
    let path = "request.jetstream";
    let Some(v) = req.get("jetstream").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let obj = as_object(v, path)?;
    warn_unknown(obj, path, JETSTREAM_FIELDS, &[], warnings);
    let stream = opt_str(obj, "stream", path)?.ok_or_else(|| {
        FieldError::new(
            join(path, "stream"),
            "missing; it names the stream the requests are read from",
        )
    })?;
    check_js_name(&stream, &join(path, "stream"), "stream")?;
    let durable = match opt_str(obj, "durable", path)? {
        Some(d) => {
            check_js_name(&d, &join(path, "durable"), "consumer")?;
            d
        }
        None => default_durable(subject),
    };
    let ack_wait = match obj.get("ackWaitMilliseconds") {
        None | Some(Value::Null) => DEFAULT_ACK_WAIT,
        Some(v) => Duration::from_millis(whole(
            v,
            &join(path, "ackWaitMilliseconds"),
            100,
            3_600_000,
        )?),
    };
    Ok(Some(JetStreamSource {
        stream,
        durable,
        ack_wait,
    }))
}

/// Checks a subject: tokens separated by `.`, none empty, no whitespace; a
/// subscription (`subscribes`) may use `*` for one token and `>` for the rest as its
/// last token, a publication neither.
pub fn check_subject(name: &str, subscribes: bool, path: &str) -> FieldResult<()> {
    let shown = || show(&Value::from(name));
    if name.trim().is_empty() {
        return Err(FieldError::new(path, "must not be empty"));
    }
    if name.chars().any(char::is_whitespace) {
        return Err(FieldError::new(
            path,
            format!("{} holds whitespace, which a NATS subject cannot", shown()),
        ));
    }
    let tokens: Vec<&str> = name.split('.').collect();
    for (i, t) in tokens.iter().enumerate() {
        if t.is_empty() {
            return Err(FieldError::new(
                path,
                format!(
                    "{} has an empty token; a NATS subject is tokens separated by single dots (orders.created)",
                    shown()
                ),
            ));
        }
        let wild = *t == "*" || *t == ">";
        if wild && !subscribes {
            return Err(FieldError::new(
                path,
                format!(
                    "{} has the wildcard {t:?}: a message is published to one subject, without wildcards",
                    shown()
                ),
            ));
        }
        if *t == ">" && i + 1 != tokens.len() {
            return Err(FieldError::new(
                path,
                format!(
                    "{} has \">\" before its last token; \">\" matches the rest of a subject, so it comes last",
                    shown()
                ),
            ));
        }
        if !wild && (t.contains('*') || t.contains('>')) && subscribes {
            return Err(FieldError::new(
                path,
                format!(
                    "{} has {t:?}: a wildcard ('*' or '>') stands for a whole token (orders.*.created)",
                    shown()
                ),
            ));
        }
    }
    Ok(())
}

/// The `connectionData` of a `"type": "nats"` connection.
pub fn parse_connection(
    data: &Map<String, Value>,
    data_at: &str,
    warnings: &mut Vec<FieldError>,
) -> FieldResult<NatsConfig> {
    warn_unknown(data, data_at, FIELDS, &[], warnings);
    let uri = opt_str(data, "uri", data_at)?.unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let mut servers = Vec::new();
    for s in uri.split(',').map(str::trim) {
        let scheme_ok = ["nats://", "tls://"].iter().any(|p| s.starts_with(p));
        let host = s.split_once("://").map_or("", |(_, rest)| rest);
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        if !scheme_ok || host.is_empty() {
            return Err(FieldError::new(
                join(data_at, "uri"),
                format!(
                    "{:?} is not a nats:// or tls:// URI (nats://127.0.0.1:4222; several servers separated by commas)",
                    without_credentials(s)
                ),
            ));
        }
        if s.parse::<async_nats::ServerAddr>().is_err() {
            return Err(FieldError::new(
                join(data_at, "uri"),
                format!("{:?} is not a valid server address", without_credentials(s)),
            ));
        }
        servers.push(s.to_owned());
    }
    let user = opt_str(data, "username", data_at)?;
    let password = opt_str(data, "password", data_at)?;
    let token = opt_str(data, "token", data_at)?;
    let nkey = opt_str(data, "nkeySeed", data_at)?;
    let creds = opt_str(data, "credentialsFile", data_at)?;
    let given: Vec<&str> = [
        ("username", user.is_some() || password.is_some()),
        ("token", token.is_some()),
        ("nkeySeed", nkey.is_some()),
        ("credentialsFile", creds.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    if given.len() > 1 {
        return Err(FieldError::new(
            data_at,
            format!(
                "{} are given; a NATS client signs in one way: choose one",
                given.join(" and ")
            ),
        ));
    }
    let auth = match (user, password, token, nkey, creds) {
        (Some(u), p, _, _, _) => NatsAuth::UserPassword(u, p.unwrap_or_default()),
        (None, Some(_), _, _, _) => {
            return Err(FieldError::new(
                join(data_at, "username"),
                "missing; a password goes with a username",
            ));
        }
        (_, _, Some(t), _, _) => NatsAuth::Token(t),
        (_, _, _, Some(seed), _) => {
            if !seed.starts_with('S') || nkeys::KeyPair::from_seed(&seed).is_err() {
                return Err(FieldError::new(
                    join(data_at, "nkeySeed"),
                    "not an nkey seed (it starts with S, as `nk -gen user` prints: SUA...)",
                ));
            }
            NatsAuth::Nkey(seed)
        }
        (_, _, _, _, Some(path)) => NatsAuth::CredentialsFile(PathBuf::from(path)),
        _ => NatsAuth::None,
    };
    let file = |key: &str| -> FieldResult<Option<PathBuf>> {
        Ok(opt_str(data, key, data_at)?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from))
    };
    let tls_client = match (file("tlsCertFile")?, file("tlsKeyFile")?) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(FieldError::new(
                join(data_at, "tlsKeyFile"),
                "missing; a client certificate needs its key",
            ));
        }
        (None, Some(_)) => {
            return Err(FieldError::new(
                join(data_at, "tlsCertFile"),
                "missing; a client key needs its certificate",
            ));
        }
    };
    let queue_group = match opt_str(data, "queueGroup", data_at)? {
        None => DEFAULT_QUEUE_GROUP.to_owned(),
        Some(g) if g.is_empty() || g.chars().any(char::is_whitespace) => {
            return Err(FieldError::new(
                join(data_at, "queueGroup"),
                format!(
                    "{} is not a queue group name: it must be one word (receivers always share \
                     a queue group, or each would answer every request)",
                    show(&Value::from(g))
                ),
            ));
        }
        Some(g) => g,
    };
    Ok(NatsConfig {
        servers,
        auth,
        tls_required: match data.get("tlsRequired") {
            None | Some(Value::Null) => false,
            Some(v) => as_bool(v, &join(data_at, "tlsRequired"))?,
        },
        tls_ca_file: file("tlsCaFile")?,
        tls_client,
        read_connections: count(data, "readConnectionsToOpen", data_at, 1)?,
        write_connections: count(data, "writeConnectionsToOpen", data_at, 1)?,
        prefetch: match data.get("prefetch") {
            None | Some(Value::Null) => DEFAULT_PREFETCH as usize,
            Some(p) => whole(p, &join(data_at, "prefetch"), 1, 65_536)? as usize,
        },
        queue_group,
        connect_timeout: match data.get("connectTimeoutMilliseconds") {
            None | Some(Value::Null) => DEFAULT_CONNECT_TIMEOUT,
            Some(v) => Duration::from_millis(whole(
                v,
                &join(data_at, "connectTimeoutMilliseconds"),
                100,
                600_000,
            )?),
        },
    })
}

/// Mappings that listen on one subject of one NATS connection share its receivers, so
/// they must read it the same way: all from core NATS, or all from the same stream and
/// durable consumer. Two that disagree are both refused, and neither is served.
pub fn check_sources(out: &mut MqLoad) {
    let mut bad = Vec::new();
    for (i, m) in out.mappings.iter().enumerate() {
        let Some(c) = out.connections.iter().find(|c| c.id == m.connection_id) else {
            continue;
        };
        if !is_nats(c) {
            continue;
        }
        if let Some(other) = out.mappings[..i].iter().find(|o| {
            o.connection_id == m.connection_id
                && o.queue.name == m.queue.name
                && o.jetstream != m.jetstream
        }) {
            let how = |j: &Option<JetStreamSource>| match j {
                None => "core NATS".to_owned(),
                Some(j) => format!("stream {:?}, consumer {:?}", j.stream, j.durable),
            };
            bad.push((
                i,
                Problem {
                    file: m.file.clone(),
                    stub: Some(m.stub_ref()),
                    error: FieldError::new(
                        "request.jetstream",
                        format!(
                            "subject {:?} is read from {} here, but from {} by {}; mappings on one subject share its receivers, so they must agree",
                            m.queue.name,
                            how(&m.jetstream),
                            how(&other.jetstream),
                            other.label()
                        ),
                    ),
                },
            ));
        }
    }
    for (i, p) in bad.into_iter().rev() {
        out.mappings.remove(i);
        out.rejected += 1;
        out.problems.push(p);
    }
}

pub(crate) fn is_nats(c: &Connection) -> bool {
    matches!(c.kind, ConnectionKind::Nats(_))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn subjects_take_wildcards_only_where_nats_does() {
        let ok = |s: &str, sub: bool| check_subject(s, sub, "p").map_err(|e| e.to_string());
        assert_eq!(ok("orders.created", false), Ok(()));
        assert_eq!(ok("orders.*.created", true), Ok(()));
        assert_eq!(ok("orders.>", true), Ok(()));
        assert_eq!(ok(">", true), Ok(()));
        assert!(
            ok("orders.>", false)
                .unwrap_err()
                .contains("without wildcards")
        );
        assert!(ok("orders.>.x", true).unwrap_err().contains("comes last"));
        assert!(ok("orders..x", true).unwrap_err().contains("empty token"));
        assert!(ok("orders.x*", true).unwrap_err().contains("whole token"));
        assert!(ok("orders x", true).unwrap_err().contains("whitespace"));
        assert!(ok(" ", true).unwrap_err().contains("must not be empty"));
    }

    #[test]
    fn uris_are_nats_or_tls_with_a_host() {
        let parse = |uri: &str| {
            let data = serde_json::json!({"type": "nats", "uri": uri});
            parse_connection(data.as_object().unwrap(), "d", &mut Vec::new())
                .map(|c| c.servers)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            parse("nats://127.0.0.1:4222"),
            Ok(vec!["nats://127.0.0.1:4222".to_owned()])
        );
        assert_eq!(
            parse("nats://u:p@a:4222, tls://b:4222"),
            Ok(vec![
                "nats://u:p@a:4222".to_owned(),
                "tls://b:4222".to_owned()
            ])
        );
        assert!(
            parse("http://127.0.0.1:4222")
                .unwrap_err()
                .contains("is not a nats:// or tls:// URI")
        );
        assert!(
            parse("nats://u:secret@")
                .unwrap_err()
                .contains("\"nats://u@\"")
        );
    }

    #[test]
    fn credentials_are_not_shown() {
        assert_eq!(
            without_credentials("nats://u:secret@127.0.0.1:4222"),
            "nats://u@127.0.0.1:4222"
        );
        assert_eq!(
            without_credentials("nats://s3cr3t@127.0.0.1:4222"),
            "nats://***@127.0.0.1:4222"
        );
        assert_eq!(
            without_credentials("nats://127.0.0.1:4222"),
            "nats://127.0.0.1:4222"
        );
    }

    #[test]
    fn default_durables_are_valid_consumer_names() {
        assert_eq!(default_durable("orders.*"), "decoy-orders_any");
        assert_eq!(default_durable("orders.>"), "decoy-orders_all");
        assert!(check_js_name(&default_durable("a.*.b.>"), "p", "consumer").is_ok());
    }
}
