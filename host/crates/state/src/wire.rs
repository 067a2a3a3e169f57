//! The messages instances exchange on Redis channels, and their checks.
//!
//! Anyone who can reach Redis can PUBLISH anything on any channel, so nothing heard
//! on one is applied as it comes:
//!
//! - an announcement on the events channel says only "change N exists" (format
//!   version, deployment, sending instance, N); the listener then reads the changes
//!   it lacks from the stored change log, so a forged announcement can at most cause
//!   a read that finds nothing new;
//! - a journal query on the control channel is checked field by field (format
//!   version, deployment, asking instance, a reply key inside this deployment's reply
//!   namespace, a known operation, bounded ids), and acted on only while the asker's
//!   "open" key for that reply exists (see `journal`), which a replayed or stray
//!   query lacks.
//!
//! A message that fails a check is logged through a [`Throttle`] and ignored.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Keys;

/// The first line of every announcement and the `v` of every query: a message of
/// another format (another decoy version) is ignored, never guessed at.
pub const FORMAT: &str = "decoy-state/1";

/// The largest announcement read; real ones are under 150 bytes.
const MAX_ANNOUNCEMENT: usize = 512;

/// The largest query read (a `remove` of many journal entries: about 40 bytes an id).
pub const MAX_QUERY: usize = 64 << 20;

/// The most journal entries one query may name.
pub const MAX_IDS: usize = 1_000_000;

/// "Change `seq` was made by `instance`", as published by the change script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub instance: uuid::Uuid,
    pub seq: u64,
}

/// The announcement's text up to its number; the change script appends the number.
pub fn announcement_head(keys: &Keys, instance: &str) -> String {
    format!("{FORMAT}\n{}\n{instance}\n", keys.name)
}

/// Reads an announcement heard on `keys.events`.
pub fn parse_announcement(keys: &Keys, payload: &[u8]) -> Result<Announcement, String> {
    if payload.len() > MAX_ANNOUNCEMENT {
        return Err(format!(
            "{} bytes, longer than any announcement",
            payload.len()
        ));
    }
    let text = std::str::from_utf8(payload).map_err(|_| "not UTF-8".to_owned())?;
    let mut lines = text.split('\n');
    let format = lines.next().unwrap_or("");
    if format != FORMAT {
        return Err(format!("format {format:?}, expected {FORMAT:?}"));
    }
    let deployment = lines.next().ok_or("no deployment name")?;
    if deployment != keys.name {
        return Err(format!(
            "deployment {deployment:?}, this one is {:?}",
            keys.name
        ));
    }
    let instance = lines
        .next()
        .and_then(|i| uuid::Uuid::parse_str(i).ok())
        .ok_or("no instance id")?;
    let seq = lines
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .ok_or("no change number")?;
    if lines.next().is_some() {
        return Err("more lines than an announcement has".into());
    }
    Ok(Announcement { instance, seq })
}

/// What a fan-in query asks every instance to do with its journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Collect,
    Remove,
    Clear,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Collect => "collect",
            Op::Remove => "remove",
            Op::Clear => "clear",
        }
    }
}

/// A fan-in query, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub from: uuid::Uuid,
    /// The query's id: the reply key is `keys.reply(&id)`.
    pub id: uuid::Uuid,
    pub op: Op,
    pub ids: Vec<uuid::Uuid>,
}

/// A query as published on `keys.control`.
pub fn query(keys: &Keys, from: &str, id: &uuid::Uuid, op: Op, ids: &[uuid::Uuid]) -> String {
    json!({
        "v": FORMAT,
        "deployment": keys.name,
        "from": from,
        "reply": keys.reply(id),
        "op": op.name(),
        "ids": ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
    })
    .to_string()
}

/// Reads a query heard on `keys.control`.
pub fn parse_query(keys: &Keys, payload: &[u8]) -> Result<Query, String> {
    if payload.len() > MAX_QUERY {
        return Err(format!(
            "{} bytes, more than the {MAX_QUERY} a query may have",
            payload.len()
        ));
    }
    let v: Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no {k:?} string"))
    };
    let format = text("v")?;
    if format != FORMAT {
        return Err(format!("format {format:?}, expected {FORMAT:?}"));
    }
    let deployment = text("deployment")?;
    if deployment != keys.name {
        return Err(format!(
            "deployment {deployment:?}, this one is {:?}",
            keys.name
        ));
    }
    let from = uuid::Uuid::parse_str(text("from")?).map_err(|_| "\"from\" is no instance id")?;
    let reply = text("reply")?;
    let id = keys.reply_id(reply).ok_or_else(|| {
        format!(
            "reply key {reply:?} is not one of this deployment's ({}reply:<uuid>)",
            keys.prefix
        )
    })?;
    let op = match text("op")? {
        "collect" => Op::Collect,
        "remove" => Op::Remove,
        "clear" => Op::Clear,
        other => return Err(format!("unknown operation {other:?}")),
    };
    let ids = match v.get("ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() <= MAX_IDS => a
            .iter()
            .map(|i| i.as_str().and_then(|s| uuid::Uuid::parse_str(s).ok()))
            .collect::<Option<Vec<_>>>()
            .ok_or("\"ids\" holds something other than entry ids")?,
        Some(Value::Array(a)) => {
            return Err(format!("{} ids, more than {MAX_IDS}", a.len()));
        }
        Some(_) => return Err("\"ids\" is not a list".into()),
    };
    Ok(Query { from, id, op, ids })
}

/// Logs at most one line per interval, counting the ones it held back: a flood of
/// bad messages costs a line every few seconds, not a line each.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Mutex<Option<Instant>>,
    held: AtomicU64,
}

impl Throttle {
    pub fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            last: Mutex::new(None),
            held: AtomicU64::new(0),
        }
    }

    /// Logs `what` as a warning now, or counts it for the next line.
    pub fn warn(&self, what: impl std::fmt::Display) {
        if !self.due() {
            self.held.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let held = self.held.swap(0, Ordering::Relaxed);
        if held == 0 {
            tracing::warn!("shared state: {what}");
        } else {
            tracing::warn!(
                "shared state: {what} ({held} more like it ignored since the last line)"
            );
        }
    }

    /// Whether a line may be written now (and, if so, that it was).
    fn due(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match *last {
            Some(t) if now.duration_since(t) < self.every => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::new("blue")
    }

    const INSTANCE: &str = "6b2b7c1e-0000-4000-8000-000000000001";

    #[test]
    fn an_announcement_reads_back_as_it_was_written() {
        let k = keys();
        let text = format!("{}42", announcement_head(&k, INSTANCE));
        let a = parse_announcement(&k, text.as_bytes()).expect("reads");
        assert_eq!(a.seq, 42);
        assert_eq!(a.instance.to_string(), INSTANCE);
    }

    #[test]
    fn announcements_of_another_format_deployment_or_shape_are_refused() {
        let k = keys();
        for bad in [
            "18446744073709551615\nremove-all\n".to_owned(),
            format!("{FORMAT}\ngreen\n{INSTANCE}\n5"),
            format!("decoy-state/2\nblue\n{INSTANCE}\n5"),
            format!("{FORMAT}\nblue\nnot-an-id\n5"),
            format!("{FORMAT}\nblue\n{INSTANCE}\n0"),
            format!("{FORMAT}\nblue\n{INSTANCE}\n-1"),
            format!("{FORMAT}\nblue\n{INSTANCE}\n18446744073709551616"),
            format!("{FORMAT}\nblue\n{INSTANCE}\n5\nremove-all"),
            format!("{FORMAT}\nblue\n{INSTANCE}\n{}", "9".repeat(600)),
        ] {
            assert!(
                parse_announcement(&k, bad.as_bytes()).is_err(),
                "accepted {bad:?}"
            );
        }
        assert!(parse_announcement(&k, &[0xff, 0xfe]).is_err());
    }

    #[test]
    fn a_query_reads_back_as_it_was_written() {
        let k = keys();
        let id = uuid::Uuid::new_v4();
        let entries = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
        let text = query(&k, INSTANCE, &id, Op::Remove, &entries);
        let q = parse_query(&k, text.as_bytes()).expect("reads");
        assert_eq!(
            (q.id, q.op, q.ids.as_slice()),
            (id, Op::Remove, &entries[..])
        );
        assert_eq!(q.from.to_string(), INSTANCE);
    }

    #[test]
    fn queries_replying_outside_the_deployments_reply_keys_or_malformed_are_refused() {
        let k = keys();
        let id = uuid::Uuid::new_v4();
        let good = || -> serde_json::Map<String, Value> {
            match serde_json::from_str(&query(&k, INSTANCE, &id, Op::Clear, &[])).unwrap() {
                Value::Object(m) => m,
                _ => unreachable!(),
            }
        };
        let with = |field: &str, v: Value| {
            let mut m = good();
            m.insert(field.into(), v);
            Value::Object(m).to_string()
        };
        let without = |field: &str| {
            let mut m = good();
            m.remove(field);
            Value::Object(m).to_string()
        };
        for bad in [
            r#"{"reply":"decoy:stubs","op":"collect"}"#.to_owned(),
            r#"{"reply":"blue:stubs","op":"clear"}"#.to_owned(),
            with("reply", json!("blue:stubs")),
            with("reply", json!("blue:scenarios")),
            with("reply", json!(format!("green:reply:{id}"))),
            with("reply", json!(format!("blue:reply:{id}:open"))),
            with("reply", json!(format!("blue:reply:{}", id.simple()))),
            with("reply", json!(format!("blue:reply:{id}x"))),
            with("deployment", json!("green")),
            with("v", json!("decoy-state/0")),
            with("v", json!(1)),
            with("from", json!("someone")),
            with("op", json!("flushall")),
            with("ids", json!(["not-an-id"])),
            with("ids", json!("all")),
            without("v"),
            without("deployment"),
            without("from"),
            without("reply"),
            "[]".to_owned(),
            "not json".to_owned(),
        ] {
            assert!(parse_query(&k, bad.as_bytes()).is_err(), "accepted {bad}");
        }
        assert!(parse_query(&k, with("op", json!("collect")).as_bytes()).is_ok());
    }

    #[test]
    fn a_throttle_writes_the_first_line_then_holds_the_next_ones_back() {
        let t = Throttle::new(Duration::from_secs(3600));
        assert!(t.due());
        t.warn("x");
        t.warn("y");
        assert_eq!(t.held.load(Ordering::Relaxed), 2);
        assert!(!t.due());
    }
}
