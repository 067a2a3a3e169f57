//! The journal's fan-in: a query through any instance's admin API covers every
//! instance's requests.
//!
//! Why fan-in rather than every instance appending to one capped Redis stream:
//! recording stays in process (a request to a static stub costs exactly what it
//! did, with no Redis write on its path and nothing to lose when Redis is slow), each
//! instance keeps its own bound (`--max-request-journal-entries`), and a query sees
//! every request an instance answered before it was asked (an entry is recorded
//! before the answer is sent), with no flush delay. The price is paid by queries,
//! which are rare: the asker publishes a query on the control channel, every
//! subscribed instance pushes its entries onto a reply list, and the asker waits for
//! as many replies as Redis says it delivered the query to (bounded by the timeout;
//! an instance that does not answer makes the query a 503, never a silently partial
//! count). An instance that stopped takes its journal with it.
//!
//! A query names its reply key, which must be one of this deployment's reply keys,
//! and is acted on (entries collected, removed or cleared) only while the asker's
//! "open" key for that reply exists: a query replayed later, or published by a stray
//! client that did not also open a reply, changes nothing. The reply is pushed by a
//! script that stops at the first failed step, so a reply key that holds something
//! else is never given a lifetime.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use decoy_core::journal::JournalPeers;
use decoy_core::journal::ServeEvent;
use decoy_core::mapping::Mapping;
use decoy_core::shared::Unavailable;
use decoy_spec::header_case::HeaderCase;
use decoy_spec::request::RequestSnapshot;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::SharedState;
use crate::health::Operation;
use crate::wire::{self, Op, Query};

/// KEYS: the reply list, its "open" key. ARGV: the reply, the list's lifetime in
/// seconds. Pushes the reply only while the query is open and only onto a list (or
/// nothing): a failed step ends the script, so nothing after it runs.
const REPLY: &str = r#"
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'list' then
  return redis.error_reply('the reply key holds a ' .. t)
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"#;

static REPLY_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(REPLY));

impl SharedState {
    /// Publishes a query and gathers one reply per instance that received it
    /// (`instance id`, body), this instance's own included.
    async fn fan_in(
        &self,
        op: Op,
        ids: &[uuid::Uuid],
    ) -> Result<Vec<(String, Vec<u8>)>, Unavailable> {
        self.require_subscribed()?;
        let id = uuid::Uuid::new_v4();
        let reply = self.keys.reply(&id);
        let open = self.keys.reply_open(&id);
        let message = wire::query(&self.keys, &self.instance, &id, op, ids);
        // The connection that waits is opened before the query goes out.
        let mut waiter = self.dedicated().await?;
        // The query is open (instances act on it) while this key lives: a query
        // replayed later, or published by anything but an instance, finds none.
        let lifetime = (self.timeout * 2).max(Duration::from_secs(1));
        let channel = self.keys.control.clone();
        let opened = open.clone();
        // Two calls, not a pipeline: no query goes out unless it was opened.
        self.call(|mut c| async move {
            redis::cmd("SET")
                .arg(opened)
                .arg(1)
                .arg("PX")
                .arg(lifetime.as_millis() as u64)
                .query_async::<()>(&mut c)
                .await
        })
        .await?;
        let receivers: usize = self
            .call(|mut c| async move {
                redis::cmd("PUBLISH")
                    .arg(channel)
                    .arg(message)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut replies = Vec::with_capacity(receivers);
        while replies.len() < receivers {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let got: Option<(String, Vec<u8>)> = redis::cmd("BLPOP")
                .arg(&reply)
                .arg(left.as_secs_f64().max(0.01))
                .query_async(&mut waiter)
                .await
                .map_err(|e| Unavailable(format!("Redis: {e}")))?;
            match got {
                Some((_, body)) => replies.push(body),
                None => break,
            }
        }
        let _: Result<(), _> = redis::cmd("DEL")
            .arg(&reply)
            .arg(&open)
            .query_async(&mut waiter)
            .await;
        if replies.len() < receivers {
            return Err(Unavailable(format!(
                "{} of {receivers} instance(s) answered the journal {} within {:?}",
                replies.len(),
                op.name(),
                self.timeout
            )));
        }
        Ok(replies
            .into_iter()
            .map(|body| match body.iter().position(|&b| b == b'\n') {
                Some(i) => (
                    String::from_utf8_lossy(&body[..i]).into_owned(),
                    body[i + 1..].to_vec(),
                ),
                None => (String::new(), body),
            })
            .collect())
    }

    /// Answers a query another instance (or this one) published, checked by
    /// [`wire::parse_query`]: only while the asker waits for it.
    pub(crate) async fn answer(&self, q: Query) {
        let Some(journal) = self.journal.get().cloned() else {
            return;
        };
        let (reply, open) = (self.keys.reply(&q.id), self.keys.reply_open(&q.id));
        let key = open.clone();
        let waiting: Result<bool, Unavailable> = self
            .call(|mut c| async move { redis::cmd("EXISTS").arg(key).query_async(&mut c).await })
            .await;
        match waiting {
            Ok(true) => {}
            Ok(false) => {
                self.ignored.warn(format_args!(
                    "a journal {} from {} ignored: nobody waits for its reply (a replayed or stray query)",
                    q.op.name(),
                    q.from
                ));
                return;
            }
            Err(e) => {
                tracing::warn!("shared state: could not answer a journal query: {e}");
                return;
            }
        }
        let Query { op, ids, .. } = q;
        let body = tokio::task::spawn_blocking(move || match op {
            Op::Collect => encode_all(&journal.local_entries()),
            Op::Remove => {
                journal.remove_here(&ids);
                b"ok".to_vec()
            }
            Op::Clear => {
                journal.clear_here();
                b"ok".to_vec()
            }
        })
        .await
        .unwrap_or_default();
        let mut payload = format!("{}\n", self.instance).into_bytes();
        payload.extend_from_slice(&body);
        let pushed: Result<i64, Unavailable> = self
            .call(|mut c| async move {
                REPLY_SCRIPT
                    .key(reply)
                    .key(open)
                    .arg(payload)
                    .arg(60)
                    .invoke_async(&mut c)
                    .await
            })
            .await;
        if let Err(e) = pushed {
            tracing::warn!("shared state: could not answer a journal query: {e}");
        }
    }

    /// The mapping an entry names, as this instance knows it (all instances serve the
    /// same stubs); a stand-in with that id when it does not.
    fn mapping(&self, id: &str) -> Option<Arc<Mapping>> {
        let store = self.store.get()?;
        if let Some(m) = store.engine().mappings().get(id) {
            return Some(m.clone());
        }
        let stand_in = json!({ "id": id, "request": {}, "response": {} });
        Mapping::parse(&stand_in, store.context(), None, &mut Vec::new())
            .ok()
            .map(Arc::new)
    }
}

impl SharedState {
    fn peer_events(&self) -> Result<Vec<ServeEvent>, Unavailable> {
        let replies = self.block_on(self.fan_in(Op::Collect, &[]))?;
        let mut events = Vec::new();
        for (instance, body) in replies {
            if instance == self.instance {
                continue;
            }
            let list: Vec<Value> = serde_json::from_slice(&body).map_err(|e| {
                Unavailable(format!(
                    "instance {instance} sent an unreadable journal: {e}"
                ))
            })?;
            events.extend(list.iter().filter_map(|v| decode(v, |id| self.mapping(id))));
        }
        Ok(events)
    }

    fn remove_peer_events(&self, ids: &[uuid::Uuid]) -> Result<(), Unavailable> {
        self.block_on(self.fan_in(Op::Remove, ids)).map(drop)
    }

    fn clear_peers(&self) -> Result<(), Unavailable> {
        self.block_on(self.fan_in(Op::Clear, &[])).map(drop)
    }
}

/// Each failure is counted as a journal one.
impl JournalPeers for SharedState {
    fn collect(&self) -> Result<Vec<ServeEvent>, Unavailable> {
        self.peer_events()
            .map_err(|e| self.failed(Operation::Journal, e))
    }

    fn remove(&self, ids: &[uuid::Uuid]) -> Result<(), Unavailable> {
        self.remove_peer_events(ids)
            .map_err(|e| self.failed(Operation::Journal, e))
    }

    fn clear(&self) -> Result<(), Unavailable> {
        self.clear_peers()
            .map_err(|e| self.failed(Operation::Journal, e))
    }
}

fn headers_json(h: impl Iterator<Item = (String, Vec<u8>)>) -> Value {
    Value::Array(
        h.map(|(n, v)| json!([n, String::from_utf8_lossy(&v)]))
            .collect(),
    )
}

fn encode_all(events: &[Arc<ServeEvent>]) -> Vec<u8> {
    let list: Vec<Value> = events.iter().map(|e| encode(e)).collect();
    serde_json::to_vec(&list).unwrap_or_default()
}

/// One entry as JSON, everything the admin API renders.
pub fn encode(e: &ServeEvent) -> Value {
    let r = &e.request;
    json!({
        "id": e.id.to_string(),
        "at": e.logged_at.duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0),
        "method": r.method,
        "url": r.url,
        "scheme": r.scheme,
        "authority": r.authority,
        "client": r.client_addr.map(|a| a.to_string()),
        // Names as the admin API shows them; read back, they are noted as sent.
        "headers": headers_json(r.headers.iter().map(|(n, v)| (r.header_case.name(n.as_str()).to_owned(), v.as_bytes().to_vec()))),
        "body": B64.encode(&r.body),
        "protocol": e.protocol,
        "port": e.local_port,
        "mapping": e.mapping.as_ref().map(|m| m.id.to_string()),
        "proxied": e.proxied,
        "status": e.status,
        "responseHeaders": headers_json(e.response_headers().iter().map(|(n, v)| {
            let name = match &e.response_header_case {
                Some(case) => case.name(n.as_str()),
                None => n.as_str(),
            };
            (name.to_owned(), v.as_bytes().to_vec())
        })),
        // A stub's own spelling is read from the stub where the entry is read back.
        "responseCaseKnown": e.response_header_case.is_some(),
        "responseBody": B64.encode(e.response_body()),
        "delayMicros": e.added_delay.as_micros() as u64,
        "processMicros": e.process_time.as_micros() as u64,
        "requestBodySize": e.request_body_size,
        "responseBodySize": e.response_body_size,
    })
}

/// The pairs of [`headers_json`], and their names' spellings noted as sent.
fn header_pairs(v: Option<&Value>) -> (Vec<(HeaderName, HeaderValue)>, HeaderCase) {
    let mut case = HeaderCase::as_sent();
    let pairs = v
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|pair| {
                    let name = pair.get(0)?.as_str()?;
                    let value = pair.get(1)?.as_str()?;
                    let pair = (
                        HeaderName::from_bytes(name.as_bytes()).ok()?,
                        HeaderValue::from_bytes(value.as_bytes()).ok()?,
                    );
                    if name.bytes().any(|b| b.is_ascii_uppercase()) {
                        case.note(name);
                    }
                    Some(pair)
                })
                .collect()
        })
        .unwrap_or_default();
    (pairs, case)
}

/// An entry read back; `mapping` resolves a stub id.
pub fn decode(v: &Value, mapping: impl Fn(&str) -> Option<Arc<Mapping>>) -> Option<ServeEvent> {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let bytes = |k: &str| Bytes::from(B64.decode(s(k).unwrap_or("")).unwrap_or_default());
    let mut headers = HeaderMap::new();
    let (pairs, header_case) = header_pairs(v.get("headers"));
    for (name, value) in pairs {
        headers.append(name, value);
    }
    let mut request = RequestSnapshot::new(s("method")?, s("url")?)
        .with_headers(headers)
        .with_body(bytes("body"));
    request.header_case = header_case;
    let (response_headers, response_case) = header_pairs(v.get("responseHeaders"));
    let response_case_known = v
        .get("responseCaseKnown")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    request.scheme = if s("scheme") == Some("https") {
        "https"
    } else {
        "http"
    };
    request.authority = s("authority").map(str::to_owned);
    request.client_addr = s("client").and_then(|a| a.parse::<SocketAddr>().ok());
    Some(ServeEvent {
        id: uuid::Uuid::parse_str(s("id")?).ok()?,
        logged_at: UNIX_EPOCH + Duration::from_micros(n("at")),
        request: request.into(),
        protocol: match s("protocol") {
            Some("HTTP/2.0") => "HTTP/2.0",
            Some("HTTP/1.0") => "HTTP/1.0",
            _ => "HTTP/1.1",
        },
        local_port: n("port") as u16,
        mapping: s("mapping").and_then(mapping),
        proxied: v.get("proxied").and_then(Value::as_bool).unwrap_or(false),
        status: n("status") as u16,
        response_headers: Some(Arc::from(response_headers)),
        response_header_case: response_case_known.then(|| Box::new(response_case)),
        response_body: Some(bytes("responseBody")),
        added_delay: Duration::from_micros(n("delayMicros")),
        process_time: Duration::from_micros(n("processMicros")),
        request_body_size: v
            .get("requestBodySize")
            .and_then(Value::as_u64)
            .map(|n| n as usize),
        response_body_size: v
            .get("responseBodySize")
            .and_then(Value::as_u64)
            .map(|n| n as usize),
        // Another instance's listeners report there, not here.
        sub_events: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn an_entry_reads_back_as_it_was_written() {
        let mut headers = HeaderMap::new();
        headers.insert("x-a", HeaderValue::from_static("1"));
        let mut request = RequestSnapshot::new("POST", "/a?b=c")
            .with_headers(headers)
            .with_body("hello");
        request.client_addr = "127.0.0.1:5000".parse().ok();
        request.header_case = HeaderCase::jetty();
        request.header_case.note("X-A");
        let mut upstream_case = HeaderCase::as_sent();
        upstream_case.note("CONTENT-type");
        let e = ServeEvent {
            id: uuid::Uuid::new_v4(),
            logged_at: SystemTime::now(),
            request: decoy_spec::kept::KeptRequest::keep(request),
            protocol: "HTTP/2.0",
            local_port: 8080,
            mapping: None,
            proxied: true,
            status: 201,
            response_headers: Some(Arc::from(vec![(
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("text/plain"),
            )])),
            response_header_case: Some(Box::new(upstream_case)),
            response_body: Some(Bytes::from_static(b"ok")),
            request_body_size: None,
            response_body_size: None,
            added_delay: Duration::from_millis(5),
            process_time: Duration::from_micros(42),
            sub_events: None,
        };
        let back = decode(&encode(&e), |_| None).expect("decodes");
        assert_eq!(back.id, e.id);
        assert_eq!(back.request.method, "POST");
        assert_eq!(back.request.url, "/a?b=c");
        assert_eq!(back.request.body, e.request.body);
        assert_eq!(
            back.request.headers.get("x-a").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        assert_eq!(back.request.client_addr, e.request.client_addr);
        assert_eq!(back.request.header_case.name("x-a"), "X-A");
        assert_eq!(
            back.response_header_case
                .as_ref()
                .map(|c| c.name("content-type")),
            Some("CONTENT-type")
        );
        assert_eq!(back.protocol, "HTTP/2.0");
        assert_eq!(
            (back.status, back.proxied, back.local_port),
            (201, true, 8080)
        );
        assert_eq!(back.response_headers(), e.response_headers());
        assert_eq!(back.response_body, e.response_body);
        assert_eq!(back.added_delay, e.added_delay);
        let micros = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0)
        };
        assert_eq!(micros(back.logged_at), micros(e.logged_at));
    }
}
