//! An `mqtt` connection of `mq-connections.json`, and what MQTT accepts as a topic.
//!
//! Read with the same helpers as the other connections (`config.rs`), so a problem
//! names the file, the connection, the field and the reason.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{DEFAULT_CONNECT_TIMEOUT, count, opt_str, whole};
use decoy_spec::fields::{FieldError, FieldResult, as_bool, join, show, warn_unknown};

/// The fields of an `mqtt` connection's `connectionData`.
pub const FIELDS: &[&str] = &[
    "type",
    "uri",
    "username",
    "password",
    "clientId",
    "protocolVersion",
    "keepAliveSeconds",
    "cleanSession",
    "sessionExpirySeconds",
    "writeConnectionsToOpen",
    "prefetch",
    "connectTimeoutMilliseconds",
    "caFile",
    "unmatched",
];

/// The longest topic MQTT carries: a UTF-8 string with a 16-bit length.
pub const TOPIC_MAX: usize = 65_535;
/// The client id prefix unless `clientId` says otherwise.
pub const DEFAULT_CLIENT_ID: &str = "decoy";
/// How long an MQTT 5 session outlives its connection unless `sessionExpirySeconds`
/// says otherwise.
pub const DEFAULT_SESSION_EXPIRY: u32 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V311,
    V5,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Version::V311 => "3.1.1",
            Version::V5 => "5",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    /// `mqtts://`: TLS, checked against the system's roots (or `caFile`).
    pub tls: bool,
    pub username: Option<String>,
    pub password: Option<String>,
    /// The prefix of every client id decoy connects with (`clientId`).
    pub client_id: String,
    pub version: Version,
    pub keep_alive: Duration,
    /// `cleanSession`: receivers start a new session on every connect, so the broker
    /// forgets what they had not acknowledged. Off by default.
    pub clean_session: bool,
    /// MQTT 5: how long the broker keeps a receiver's session after it disconnected.
    pub session_expiry: u32,
    pub write_connections: usize,
    /// MQTT 5: the receive maximum, QoS 1 and 2 requests a receiver may hold at once.
    pub prefetch: u16,
    pub connect_timeout: Duration,
    pub ca_file: Option<PathBuf>,
}

impl MqttConfig {
    /// `mqtt://user@host:port`, without the password, for messages.
    pub fn shown(&self) -> String {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        match &self.username {
            Some(u) => format!("{scheme}://{u}@{}:{}", self.host, self.port),
            None => format!("{scheme}://{}:{}", self.host, self.port),
        }
    }
}

/// Reads an `mqtt` connection's `connectionData` (at `at`).
pub fn parse(
    data: &Map<String, Value>,
    at: &str,
    warnings: &mut Vec<FieldError>,
) -> FieldResult<MqttConfig> {
    warn_unknown(data, at, FIELDS, &[], warnings);
    let uri_at = join(at, "uri");
    let uri = opt_str(data, "uri", at)?.unwrap_or_else(|| "mqtt://127.0.0.1:1883".into());
    let (tls, rest) = if let Some(r) = uri.strip_prefix("mqtt://") {
        (false, r)
    } else if let Some(r) = uri.strip_prefix("mqtts://") {
        (true, r)
    } else {
        return Err(FieldError::new(
            uri_at,
            format!("{uri:?} is not an mqtt:// or mqtts:// URI (such as mqtt://127.0.0.1:1883)"),
        ));
    };
    let rest = rest.trim_end_matches('/');
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let (mut username, mut password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((u, p)) => (Some(decode(u)), Some(decode(p))),
            None => (Some(decode(u)), None),
        },
        None => (None, None),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (h.to_owned(), p.strip_prefix(':')),
            None => {
                return Err(FieldError::new(
                    uri_at,
                    format!("{uri:?}: unclosed [ in the host"),
                ));
            }
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (hostport.to_owned(), None),
        }
    };
    if host.is_empty() || host.contains('/') {
        return Err(FieldError::new(
            uri_at,
            format!("{uri:?}: expected mqtt://host:port (a broker URI has no path)"),
        ));
    }
    let port = match port {
        None => {
            if tls {
                8883
            } else {
                1883
            }
        }
        Some(p) => whole(&Value::from(p), &uri_at, 1, 65535)? as u16,
    };
    if let Some(u) = opt_str(data, "username", at)? {
        username = Some(u);
    }
    if let Some(p) = opt_str(data, "password", at)? {
        password = Some(p);
    }
    if password.is_some() && username.is_none() {
        return Err(FieldError::new(
            join(at, "password"),
            "a password needs a username (MQTT sends no password alone)",
        ));
    }
    let client_id = opt_str(data, "clientId", at)?.unwrap_or_else(|| DEFAULT_CLIENT_ID.into());
    if client_id.trim().is_empty() || client_id.len() > 128 {
        return Err(FieldError::new(
            join(at, "clientId"),
            format!(
                "{}: expected 1 to 128 bytes (decoy adds a suffix per connection)",
                show(&Value::from(client_id.as_str()))
            ),
        ));
    }
    let version = match data.get("protocolVersion") {
        None | Some(Value::Null) => Version::V5,
        Some(v) => match v {
            Value::String(s) if s == "5" || s == "5.0" => Version::V5,
            Value::String(s) if s == "3.1.1" || s == "4" => Version::V311,
            Value::Number(n) if n.as_u64() == Some(5) => Version::V5,
            Value::Number(n) if n.as_u64() == Some(4) => Version::V311,
            other => {
                return Err(FieldError::new(
                    join(at, "protocolVersion"),
                    format!("{}: expected \"5\" or \"3.1.1\"", show(other)),
                ));
            }
        },
    };
    let secs = |key: &str, default: u64, min: u64, max: u64| -> FieldResult<u64> {
        match data.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => whole(v, &join(at, key), min, max),
        }
    };
    let keep_alive = Duration::from_secs(secs("keepAliveSeconds", 30, 5, 65_535)?);
    let session_expiry = secs(
        "sessionExpirySeconds",
        u64::from(DEFAULT_SESSION_EXPIRY),
        0,
        u64::from(u32::MAX),
    )? as u32;
    if version == Version::V311 && data.contains_key("sessionExpirySeconds") {
        warnings.push(FieldError::new(
            join(at, "sessionExpirySeconds"),
            "MQTT 3.1.1 has no session expiry (the broker's own setting decides); ignored",
        ));
    }
    let clean_session = match data.get("cleanSession") {
        None | Some(Value::Null) => false,
        Some(v) => as_bool(v, &join(at, "cleanSession"))?,
    };
    let prefetch = secs("prefetch", 100, 1, 65_535)? as u16;
    let connect_timeout = match data.get("connectTimeoutMilliseconds") {
        None | Some(Value::Null) => DEFAULT_CONNECT_TIMEOUT,
        Some(v) => Duration::from_millis(whole(
            v,
            &join(at, "connectTimeoutMilliseconds"),
            100,
            600_000,
        )?),
    };
    let ca_file = opt_str(data, "caFile", at)?.map(PathBuf::from);
    if let Some(f) = &ca_file {
        if !tls {
            warnings.push(FieldError::new(
                join(at, "caFile"),
                "only used with an mqtts:// URI; ignored",
            ));
        } else if !f.is_file() {
            return Err(FieldError::new(
                join(at, "caFile"),
                format!("{} is not a readable file", f.display()),
            ));
        }
    }
    Ok(MqttConfig {
        host,
        port,
        tls,
        username,
        password,
        client_id,
        version,
        keep_alive,
        clean_session,
        session_expiry,
        write_connections: count(data, "writeConnectionsToOpen", at, 1)?,
        prefetch,
        connect_timeout,
        ca_file,
    })
}

/// Checks a topic decoy publishes on (`subscribes` false) or a topic filter it
/// subscribes to, with MQTT's rules: not empty, at most 65,535 bytes, no NUL; a
/// filter's `+` and `#` stand alone in their level and `#` comes last; a topic to
/// publish on has no wildcard. A shared subscription is `$share/GROUP/FILTER`.
pub fn check_topic(name: &str, subscribes: bool, path: &str) -> FieldResult<()> {
    let shown = || show(&Value::from(name));
    let bad = |why: &str| Err(FieldError::new(path, format!("{}: {why}", shown())));
    if name.is_empty() {
        return Err(FieldError::new(path, "must not be empty"));
    }
    if name.len() > TOPIC_MAX {
        return bad(&format!(
            "{} bytes; an MQTT topic is at most {TOPIC_MAX}",
            name.len()
        ));
    }
    if name.contains('\0') {
        return bad("an MQTT topic has no NUL character");
    }
    if !subscribes {
        if name.contains(['+', '#']) && !name.contains("{{") {
            return bad(
                "a topic to publish on has no wildcard (+ and # are for the topics a mapping listens on)",
            );
        }
        return Ok(());
    }
    let filter = match name.strip_prefix("$share/") {
        Some(rest) => match rest.split_once('/') {
            Some((group, filter)) if !group.is_empty() && !group.contains(['+', '#']) => {
                if filter.is_empty() {
                    return bad(
                        "a shared subscription is $share/GROUP/FILTER; the filter is missing",
                    );
                }
                filter
            }
            _ => {
                return bad(
                    "a shared subscription is $share/GROUP/FILTER, the group without + or #",
                );
            }
        },
        None => name,
    };
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i + 1 != levels.len()) {
            return bad("# stands alone in the last level of a filter (sensors/#)");
        }
        if level.contains('+') && *level != "+" {
            return bad("+ stands alone in its level of a filter (devices/+/cmd)");
        }
    }
    Ok(())
}

/// Whether `topic` matches the subscription `filter` (`+` one level, `#` the rest);
/// a `$share/GROUP/` prefix is left out.
pub fn topic_matches(filter: &str, topic: &str) -> bool {
    let filter = match filter.strip_prefix("$share/") {
        Some(rest) => rest.split_once('/').map_or(rest, |(_, f)| f),
        None => filter,
    };
    // Filters starting with a wildcard do not match topics starting with `$`.
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut t = topic.split('/');
    for f in filter.split('/') {
        match (f, t.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (f, Some(level)) if f == level => {}
            _ => return false,
        }
    }
    t.next().is_none()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn parsed(data: Value) -> Result<MqttConfig, String> {
        let mut w = Vec::new();
        parse(data.as_object().unwrap(), "d", &mut w).map_err(|e| e.to_string())
    }

    #[test]
    fn a_uri_gives_host_port_credentials_and_tls() {
        let c = parsed(json!({"uri": "mqtts://dev%40x:s%3Acret@broker.local"})).unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.tls),
            ("broker.local", 8883, true)
        );
        assert_eq!(c.username.as_deref(), Some("dev@x"));
        assert_eq!(c.password.as_deref(), Some("s:cret"));
        assert_eq!(c.shown(), "mqtts://dev@x@broker.local:8883");
        let c =
            parsed(json!({"uri": "mqtt://127.0.0.1:1884", "protocolVersion": "3.1.1"})).unwrap();
        assert_eq!((c.port, c.version, c.tls), (1884, Version::V311, false));
        assert_eq!(
            parsed(json!({"uri": "tcp://x"})).unwrap_err(),
            "d.uri: \"tcp://x\" is not an mqtt:// or mqtts:// URI (such as mqtt://127.0.0.1:1883)"
        );
        assert_eq!(
            parsed(json!({"uri": "mqtt://x:99999"})).unwrap_err(),
            "d.uri: 99999 is out of range (1-65535)"
        );
        assert_eq!(
            parsed(json!({"protocolVersion": "3"})).unwrap_err(),
            "d.protocolVersion: \"3\": expected \"5\" or \"3.1.1\""
        );
    }

    #[test]
    fn filters_follow_mqtts_wildcard_rules() {
        for ok in [
            "a/b",
            "devices/+/cmd",
            "sensors/#",
            "#",
            "+",
            "$share/g/devices/+/cmd",
            "a//b",
        ] {
            assert_eq!(check_topic(ok, true, "p"), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("a/b#", "# stands alone"),
            ("a/#/b", "# stands alone"),
            ("a+/b", "+ stands alone"),
            ("$share/g", "$share/GROUP/FILTER"),
            ("$share//a", "$share/GROUP/FILTER"),
        ] {
            let e = check_topic(bad, true, "p").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(check_topic("replies/+", false, "p").is_err());
        assert!(check_topic("devices/{{request.destination}}/ack", false, "p").is_ok());
        assert!(check_topic("", false, "p").is_err());
    }

    #[test]
    fn topics_match_filters_level_by_level() {
        assert!(topic_matches("devices/+/cmd", "devices/7/cmd"));
        assert!(!topic_matches("devices/+/cmd", "devices/7/8/cmd"));
        assert!(topic_matches("sensors/#", "sensors"));
        assert!(topic_matches("sensors/#", "sensors/a/b"));
        assert!(topic_matches("$share/g/a/+", "a/b"));
        assert!(!topic_matches("#", "$SYS/x"));
        assert!(!topic_matches("a/b", "a/b/c"));
    }
}
