//! An `amqp1` connection's `connectionData`: where the AMQP 1.0 broker is and how to
//! log in (SASL PLAIN or ANONYMOUS, TLS with `amqps://`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{DEFAULT_CONNECT_TIMEOUT, count, opt_str, whole};
use decoy_spec::fields::{FieldError, FieldResult, as_str, join, warn_unknown};

/// The fields of an `amqp1` connection.
pub const FIELDS: &[&str] = &[
    "type",
    "uri",
    "containerId",
    "hostname",
    "sasl",
    "caCertificateFile",
    "readConnectionsToOpen",
    "writeConnectionsToOpen",
    "prefetch",
    "connectTimeoutMilliseconds",
    "unmatched",
];

/// How decoy logs in (the SASL layer of AMQP 1.0).
#[derive(Clone, PartialEq, Eq)]
pub enum Sasl {
    Plain {
        username: String,
        password: String,
    },
    Anonymous,
    /// No SASL layer at all (a broker that does not ask for one).
    None,
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sasl::Plain { username, .. } => write!(f, "PLAIN({username})"),
            Sasl::Anonymous => f.write_str("ANONYMOUS"),
            Sasl::None => f.write_str("none"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amqp1Config {
    /// The URI without its password, for messages.
    pub shown: String,
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub sasl: Sasl,
    /// The `hostname` of the AMQP open frame (RabbitMQ picks the virtual host from
    /// `vhost:NAME`); the URI's host unless `hostname` says otherwise.
    pub hostname: String,
    /// Each broker connection's container id is this, `-read-N` or `-write-N`.
    pub container_id: String,
    pub read_connections: usize,
    pub write_connections: usize,
    /// Link credit of a receiver: messages the broker may send it unsettled.
    pub prefetch: u32,
    pub connect_timeout: Duration,
    /// PEM file of the certificate authorities trusted for `amqps://`, besides the
    /// system's.
    pub ca_file: Option<PathBuf>,
}

/// Reads an `amqp1` connection's `connectionData` (`data`, at `at`).
pub fn parse(
    data: &Map<String, Value>,
    at: &str,
    warnings: &mut Vec<FieldError>,
) -> FieldResult<Amqp1Config> {
    warn_unknown(data, at, FIELDS, &[], warnings);
    let uri_at = join(at, "uri");
    let uri = opt_str(data, "uri", at)?.unwrap_or_else(|| "amqp://127.0.0.1:5672".into());
    let url = url::Url::parse(&uri)
        .map_err(|e| FieldError::new(&uri_at, format!("{:?} is not a URI: {e}", shown(&uri))))?;
    let tls = match url.scheme() {
        "amqp" => false,
        "amqps" => true,
        other => {
            return Err(FieldError::new(
                &uri_at,
                format!(
                    "{other:?} is not an AMQP 1.0 scheme; expected amqp://host:port or amqps://host:port"
                ),
            ));
        }
    };
    let host = match url.host_str() {
        Some(h) if !h.is_empty() => h.trim_matches(['[', ']']).to_owned(),
        _ => {
            return Err(FieldError::new(
                &uri_at,
                format!("{:?} names no host", shown(&uri)),
            ));
        }
    };
    let port = url.port().unwrap_or(if tls { 5671 } else { 5672 });
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let from_uri = if url.username().is_empty() {
        Sasl::Anonymous
    } else {
        Sasl::Plain {
            username: decode(url.username()),
            password: decode(url.password().unwrap_or("")),
        }
    };
    let sasl = match opt_str(data, "sasl", at)?.as_deref() {
        None => from_uri,
        Some("PLAIN") => match from_uri {
            Sasl::Plain { .. } => from_uri,
            _ => {
                return Err(FieldError::new(
                    join(at, "sasl"),
                    "PLAIN needs a user in the URI (amqp://user:password@host:port)",
                ));
            }
        },
        Some("ANONYMOUS") => Sasl::Anonymous,
        Some("NONE") => Sasl::None,
        Some(other) => {
            return Err(FieldError::new(
                join(at, "sasl"),
                format!("{other:?}: expected PLAIN, ANONYMOUS or NONE"),
            ));
        }
    };
    let hostname = opt_str(data, "hostname", at)?
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| host.clone());
    let container_id = match data.get("containerId") {
        None | Some(Value::Null) => format!("decoy-{}", uuid::Uuid::new_v4()),
        Some(v) => {
            let s = as_str(v, &join(at, "containerId"))?;
            if s.trim().is_empty() {
                return Err(FieldError::new(
                    join(at, "containerId"),
                    "must not be empty",
                ));
            }
            s.to_owned()
        }
    };
    let prefetch = match data.get("prefetch") {
        None | Some(Value::Null) => 100,
        Some(p) => whole(p, &join(at, "prefetch"), 1, 65535)? as u32,
    };
    let connect_timeout = match data.get("connectTimeoutMilliseconds") {
        None | Some(Value::Null) => DEFAULT_CONNECT_TIMEOUT,
        Some(v) => Duration::from_millis(whole(
            v,
            &join(at, "connectTimeoutMilliseconds"),
            100,
            600_000,
        )?),
    };
    let ca_file = opt_str(data, "caCertificateFile", at)?
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    if ca_file.is_some() && !tls {
        warnings.push(FieldError::new(
            join(at, "caCertificateFile"),
            "is used with amqps:// only; this connection is amqp:// (no TLS)",
        ));
    }
    Ok(Amqp1Config {
        shown: shown(&uri),
        tls,
        host,
        port,
        sasl,
        hostname,
        container_id,
        read_connections: count(data, "readConnectionsToOpen", at, 1)?,
        write_connections: count(data, "writeConnectionsToOpen", at, 1)?,
        prefetch,
        connect_timeout,
        ca_file,
    })
}

/// `amqp://guest:secret@host` → `amqp://guest@host`.
pub fn shown(uri: &str) -> String {
    match (uri.find("://"), uri.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &uri[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}@{}", &uri[..s + 3], user, &uri[at + 1..])
        }
        _ => uri.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> (FieldResult<Amqp1Config>, Vec<String>) {
        let mut warnings = Vec::new();
        let r = parse(v.as_object().unwrap(), "[0].connectionData", &mut warnings);
        (r, warnings.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_uri_gives_host_port_tls_and_the_login() {
        let (c, w) = read(
            json!({"type": "amqp1", "uri": "amqps://us%40er:p%3Ass@broker.example:5999",
                                  "containerId": "svc", "prefetch": 10}),
        );
        let c = c.unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert!(c.tls);
        assert_eq!((c.host.as_str(), c.port), ("broker.example", 5999));
        assert_eq!(
            c.sasl,
            Sasl::Plain {
                username: "us@er".into(),
                password: "p:ss".into()
            }
        );
        assert_eq!(c.shown, "amqps://us%40er@broker.example:5999");
        assert_eq!(c.hostname, "broker.example");
        assert_eq!(c.container_id, "svc");
        assert_eq!(c.prefetch, 10);

        let (c, _) =
            read(json!({"type": "amqp1", "uri": "amqp://127.0.0.1", "hostname": "vhost:/"}));
        let c = c.unwrap();
        assert_eq!((c.port, c.tls), (5672, false));
        assert_eq!(c.sasl, Sasl::Anonymous);
        assert_eq!(c.hostname, "vhost:/");
    }

    #[test]
    fn a_bad_uri_or_mechanism_names_the_field_and_the_reason() {
        let err = |v: Value| read(v).0.unwrap_err().to_string();
        assert_eq!(
            err(json!({"uri": "mqtt://127.0.0.1"})),
            "[0].connectionData.uri: \"mqtt\" is not an AMQP 1.0 scheme; expected amqp://host:port or amqps://host:port"
        );
        let e = err(json!({"uri": "amqp://guest:secret@"}));
        assert!(
            e.contains("\"amqp://guest@\"") && !e.contains("secret"),
            "the password is not shown: {e}"
        );
        assert_eq!(
            err(json!({"uri": "amqp://h", "sasl": "PLAIN"})),
            "[0].connectionData.sasl: PLAIN needs a user in the URI (amqp://user:password@host:port)"
        );
        assert_eq!(
            err(json!({"uri": "amqp://h", "sasl": "GSSAPI"})),
            "[0].connectionData.sasl: \"GSSAPI\": expected PLAIN, ANONYMOUS or NONE"
        );
        assert_eq!(
            err(json!({"uri": "amqp://h", "prefetch": 0})),
            "[0].connectionData.prefetch: 0 is out of range (1-65535)"
        );
    }
}
