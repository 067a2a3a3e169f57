//! Sending webhooks: the [`WebhookSink`] both transports hand served requests to.
//!
//! A served request's webhooks wait until the answer is out (the HTTP response
//! written, the MQ reply confirmed), are rendered, then each waits its own `delay`,
//! takes a sending slot and goes through the one outbound client
//! ([`crate::http::client::Outbound`]: pooled, HTTP/1.1 and HTTP/2, plain or TLS, with
//! `--allow-proxy-targets` / `--deny-proxy-targets` and `--proxy-via` applied to the
//! rendered URL, so a client cannot template a webhook into a denied address).
//! Nothing a webhook does reaches the answer it follows: the answer was already sent.
//!
//! Bounded as a whole, so that no target and no client can exhaust decoy:
//!
//! - **Waiting.** At most [`MAX_PENDING`] webhooks and `--max-pending-webhook-bytes`
//!   bytes (64 MiB by default: the request kept for rendering, with the answer when
//!   a template names `originalResponse`, then the rendered request) wait at once,
//!   from the moment the request is served until the webhook is answered or given
//!   up. Past either limit new webhooks are dropped.
//! - **Per target** (scheme, host and port), at most half of everything: half of the
//!   `--webhook-threadpool-size` sending slots (at least one), half of the pending
//!   webhooks and half of their bytes. A target that accepts connections and never
//!   answers fills its half and no more, so webhooks to the other targets still go.
//! - **Per request**, [`SEND_TIMEOUT`] from connecting to the end of the answer, of
//!   which at most [`MAX_ANSWER`] bytes are read.
//! - **Loops.** Each webhook carries [`HOPS_HEADER`]: one more than the request that
//!   fired it carried (0 when it carried none). A request arriving with
//!   [`MAX_HOPS`] or more fires no webhook, so a webhook that calls its own stub, or
//!   two instances calling each other, stop after a few rounds.
//!
//! Every outcome is counted in `decoy_webhooks_total{outcome}` (drops also by the
//! limit reached, and the pending count and bytes as gauges); warnings about webhooks
//! not sent are throttled ([`throttle`]): a few whole lines per kind and window, then
//! one summary line.

mod throttle;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use tokio::sync::Semaphore;

use crate::http::client::{Outbound, SendError};
use decoy_core::metrics::Metrics;
use decoy_core::publish::{MessagePublisher, OutgoingMessage, PublishError, SubEvents};
use decoy_core::webhooks::{Fired, WebhookCall, WebhookSink, check_url};
use decoy_plugin_host::{PluginRequest, wit};
use throttle::{Kind, Throttle};

/// WireMock's default `--webhook-threadpool-size`.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// How long a webhook may take, from connecting to the end of the answer.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Webhooks waiting (to be rendered, for their delay, for a slot, for an answer)
/// beyond which new ones are dropped.
pub const MAX_PENDING: usize = 10_000;
/// The default of `--max-pending-webhook-bytes`.
pub const DEFAULT_MAX_PENDING_BYTES: usize = 64 * 1024 * 1024;
/// The header each webhook carries: how many webhooks led to it.
pub const HOPS_HEADER: &str = "decoy-webhook-hops";
/// A request that arrived carrying this many hops (or more) fires no webhook.
pub const MAX_HOPS: u32 = 5;
/// How much of the target's answer is read (the rest is dropped with the connection).
pub const MAX_ANSWER: usize = 1024 * 1024;
/// Messages published at once on one connection, awaiting the broker's confirm.
pub const MESSAGES_IN_FLIGHT: usize = 256;
/// What a pending webhook costs beyond the bytes of its request (its task, its
/// bookkeeping), so that a flood of tiny webhooks counts too.
const OVERHEAD: usize = 512;

/// How many webhooks may wait and go at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookLimits {
    /// Sent at once (`--webhook-threadpool-size`).
    pub concurrency: usize,
    /// Waiting at once.
    pub max_pending: usize,
    /// Bytes waiting at once (`--max-pending-webhook-bytes`).
    pub max_pending_bytes: usize,
    /// From connecting to the end of the answer.
    pub timeout: Duration,
}

impl Default for WebhookLimits {
    fn default() -> WebhookLimits {
        WebhookLimits {
            concurrency: DEFAULT_CONCURRENCY,
            max_pending: MAX_PENDING,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            timeout: SEND_TIMEOUT,
        }
    }
}

/// The most one target may hold of the limits.
#[derive(Debug, Clone, Copy)]
struct Share {
    slots: usize,
    pending: usize,
    bytes: usize,
}

impl WebhookLimits {
    /// Half of each limit (at least one slot and one webhook).
    fn target_share(&self) -> Share {
        Share {
            slots: (self.concurrency / 2).max(1),
            pending: (self.max_pending / 2).max(1),
            bytes: self.max_pending_bytes / 2,
        }
    }
}

/// The sender shared by every listener and the MQ runtime.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    outbound: Arc<Outbound>,
    limits: WebhookLimits,
    share: Share,
    /// The `--webhook-threadpool-size` sending slots.
    slots: Semaphore,
    queue: Mutex<Queue>,
    metrics: Arc<Metrics>,
    log: Arc<Throttle>,
    /// The runtime the sender was made on (`decoy serve`'s shared one), where
    /// webhooks are rendered and sent: never on the threads serving the stub ports.
    runtime: Option<tokio::runtime::Handle>,
    /// Where `message` listeners publish: the MQ side's connections, set once they
    /// are read (`None` until then: such a message fails, counted).
    publisher: std::sync::OnceLock<Arc<dyn MessagePublisher>>,
}

/// What is waiting, in all and by target.
#[derive(Debug, Default)]
struct Queue {
    pending: usize,
    bytes: usize,
    /// Targets with a webhook waiting (removed once they have none).
    targets: HashMap<String, Lane>,
}

/// One target's share in use.
#[derive(Debug)]
struct Lane {
    pending: usize,
    bytes: usize,
    /// Its sending slots, taken before one of the shared ones.
    slots: Arc<Semaphore>,
}

/// The limit that refused a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Count,
    Bytes,
    TargetCount,
    TargetBytes,
}

/// Webhooks counted against the limits, released when dropped: the not yet rendered
/// webhooks of a served request (with its request's bytes), or one rendered webhook
/// (with its target).
#[derive(Debug)]
struct Held {
    inner: Arc<Inner>,
    count: usize,
    bytes: usize,
    /// The target's key and slots.
    target: Option<(String, Arc<Semaphore>)>,
}

impl Held {
    /// Waits out `delay`, then for one of the target's slots (held until the permit
    /// is dropped); `None` when there is no target or its slots are closed.
    async fn turn(&self, delay: Option<Duration>) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        let (_, lane) = self.target.as_ref()?;
        lane.clone().acquire_owned().await.ok()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut q = self.inner.lock_queue();
        q.pending -= self.count;
        q.bytes -= self.bytes;
        if let Some((key, _)) = &self.target
            && let Some(lane) = q.targets.get_mut(key)
        {
            lane.pending -= self.count;
            lane.bytes -= self.bytes;
            if lane.pending == 0 {
                q.targets.remove(key);
            }
        }
        self.inner.publish(&q);
    }
}

impl WebhookSender {
    /// Webhooks go through `outbound`, within `limits`, on the current runtime
    /// (or, made outside one, on the runtime of the request that fires them).
    pub fn new(
        limits: WebhookLimits,
        outbound: Arc<Outbound>,
        metrics: Arc<Metrics>,
    ) -> WebhookSender {
        let limits = WebhookLimits {
            concurrency: limits.concurrency.max(1),
            ..limits
        };
        WebhookSender {
            inner: Arc::new(Inner {
                outbound,
                share: limits.target_share(),
                slots: Semaphore::new(limits.concurrency),
                limits,
                queue: Mutex::default(),
                metrics,
                log: Arc::default(),
                runtime: tokio::runtime::Handle::try_current().ok(),
                publisher: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Where `message` listeners publish from now on (set once; later calls are
    /// ignored).
    pub fn set_publisher(&self, publisher: Arc<dyn MessagePublisher>) {
        let _ = self.inner.publisher.set(publisher);
    }
}

impl WebhookSink for WebhookSender {
    fn fire(&self, fired: Fired) {
        let runtime = self.inner.runtime.clone();
        let Some(runtime) = runtime.or_else(|| tokio::runtime::Handle::try_current().ok()) else {
            tracing::warn!(
                "webhooks of {} not sent: no async runtime to send them on",
                fired.mapping
            );
            return;
        };
        let n = fired.hooks.len();
        let inner = &self.inner;
        let counters = &inner.metrics.webhooks;
        let hops = hops_of(&fired.request);
        if hops >= MAX_HOPS {
            counters.looped.fetch_add(n as u64, Ordering::Relaxed);
            inner.log.warn(Kind::Looped, n as u64, || {
                format!(
                    "webhooks of {} not sent: the request came through {hops} webhooks in a row ({HOPS_HEADER}: {hops}), and decoy stops a chain at {MAX_HOPS}",
                    fired.mapping
                )
            });
            return;
        }
        let bytes = request_bytes(&fired.request)
            + fired.answer.as_ref().map_or(0, |a| a.bytes())
            + n * OVERHEAD;
        let held = match inner.hold(n, bytes) {
            Ok(h) => h,
            Err(full) => {
                inner.dropped(full, n, || format!("webhooks of {}", fired.mapping));
                return;
            }
        };
        runtime.spawn(inner.clone().render(fired, hops, held));
    }
}

impl Inner {
    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gauges, from the queue (under its lock, so they never go backwards in time).
    fn publish(&self, q: &Queue) {
        let m = &self.metrics.webhooks;
        m.pending.store(q.pending as u64, Ordering::Relaxed);
        m.pending_bytes.store(q.bytes as u64, Ordering::Relaxed);
    }

    /// Counts `count` webhooks holding `bytes` as waiting, unless a limit says no.
    fn hold(self: &Arc<Self>, count: usize, bytes: usize) -> Result<Held, Limit> {
        let mut q = self.lock_queue();
        if q.pending + count > self.limits.max_pending {
            return Err(Limit::Count);
        }
        if q.bytes + bytes > self.limits.max_pending_bytes {
            return Err(Limit::Bytes);
        }
        q.pending += count;
        q.bytes += bytes;
        self.publish(&q);
        Ok(Held {
            inner: self.clone(),
            count,
            bytes,
            target: None,
        })
    }

    /// One webhook of `from` leaves it: not sent, or about to be held on its own.
    fn leave(&self, from: &mut Held) {
        let mut q = self.lock_queue();
        from.count -= 1;
        q.pending -= 1;
        self.publish(&q);
    }

    /// One webhook of `from`, rendered into `bytes` for `target`, is held on its own
    /// (within the target's share), unless a limit says no.
    fn hand_over(
        self: &Arc<Self>,
        from: &mut Held,
        bytes: usize,
        target: String,
        slots: usize,
    ) -> Result<Held, Limit> {
        self.leave(from);
        let mut q = self.lock_queue();
        if q.bytes + bytes > self.limits.max_pending_bytes {
            return Err(Limit::Bytes);
        }
        if let Some(lane) = q.targets.get(&target) {
            if lane.pending + 1 > self.share.pending {
                return Err(Limit::TargetCount);
            }
            if lane.bytes + bytes > self.share.bytes {
                return Err(Limit::TargetBytes);
            }
        } else if bytes > self.share.bytes {
            return Err(Limit::TargetBytes);
        }
        let share = slots;
        let lane = q.targets.entry(target.clone()).or_insert_with(|| Lane {
            pending: 0,
            bytes: 0,
            slots: Arc::new(Semaphore::new(share)),
        });
        lane.pending += 1;
        lane.bytes += bytes;
        let slots = lane.slots.clone();
        q.pending += 1;
        q.bytes += bytes;
        self.publish(&q);
        Ok(Held {
            inner: self.clone(),
            count: 1,
            bytes,
            target: Some((target, slots)),
        })
    }

    /// Counts and logs (throttled) `n` webhooks dropped at `full`; `what` names them.
    fn dropped(&self, full: Limit, n: usize, what: impl FnOnce() -> String) {
        let m = &self.metrics.webhooks;
        m.dropped.fetch_add(n as u64, Ordering::Relaxed);
        let (by_limit, kind) = match full {
            Limit::Count => (&m.dropped_pending, Kind::DroppedCount),
            Limit::Bytes => (&m.dropped_bytes, Kind::DroppedBytes),
            Limit::TargetCount => (&m.dropped_target_pending, Kind::DroppedTarget),
            Limit::TargetBytes => (&m.dropped_target_bytes, Kind::DroppedTarget),
        };
        by_limit.fetch_add(n as u64, Ordering::Relaxed);
        let l = &self.limits;
        self.log.warn(kind, n as u64, || {
            let why = match full {
                Limit::Count => format!("{} webhooks are already waiting", l.max_pending),
                Limit::Bytes => format!(
                    "the webhooks waiting would hold more than {} bytes (--max-pending-webhook-bytes)",
                    l.max_pending_bytes
                ),
                Limit::TargetCount => format!(
                    "its target already has {} webhooks waiting, half of all it may have",
                    self.share.pending
                ),
                Limit::TargetBytes => format!(
                    "its target's webhooks waiting would hold more than {} bytes, half of --max-pending-webhook-bytes",
                    self.share.bytes
                ),
            };
            format!("{} dropped: {why}", what())
        });
    }

    /// A served request's webhooks, once its answer is out: each rendered, checked
    /// and handed to a task of its own.
    async fn render(self: Arc<Self>, fired: Fired, hops: u32, mut held: Held) {
        let Fired {
            hooks,
            mapping_id,
            mapping,
            request,
            after,
            journal,
            answer,
        } = fired;
        if let Some(after) = after {
            after.await;
        }
        // Just after start `response-template` may still be compiling; a webhook
        // can wait for it (bounded) where an answer could not.
        let waited = tokio::time::Instant::now();
        while hooks.iter().any(|h| h.templater_loading()) && waited.elapsed() < self.limits.timeout
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let counters = &self.metrics.webhooks;
        for hook in hooks.iter() {
            let call = match hook.render(&mapping_id, &request, answer.as_ref()) {
                Ok(c) => c,
                Err(reason) => {
                    self.leave(&mut held);
                    if let Some(target) = &hook.message {
                        self.metrics
                            .messages
                            .invalid
                            .fetch_add(1, Ordering::Relaxed);
                        not_published(journal.as_deref(), target, &reason);
                        self.log.warn(Kind::NotPublished, 1, || {
                            format!(
                                "message {} of {mapping} to {target} not published: {reason}",
                                hook.at
                            )
                        });
                    } else {
                        counters.invalid.fetch_add(1, Ordering::Relaxed);
                        self.log.warn(Kind::Invalid, 1, || {
                            format!("webhook {} of {mapping} not sent: {reason}", hook.at)
                        });
                    }
                    continue;
                }
            };
            if let Some(target) = call.message.clone() {
                let what = || format!("message {} of {mapping} to {target}", hook.at);
                let bytes = call_bytes(&call);
                let one = match self.hand_over(
                    &mut held,
                    bytes,
                    format!("mq:{}", target.connection),
                    MESSAGES_IN_FLIGHT,
                ) {
                    Ok(one) => one,
                    Err(full) => {
                        self.metrics
                            .messages
                            .dropped
                            .fetch_add(1, Ordering::Relaxed);
                        not_published(journal.as_deref(), &target, "dropped: too many waiting");
                        self.dropped(full, 1, what);
                        continue;
                    }
                };
                let mut properties = call.headers;
                // Carried as webhooks carry it, so a stub whose message reaches
                // itself (an MQ stub publishing to its own queue) stops after a few.
                properties.retain(|(k, _)| !k.eq_ignore_ascii_case(HOPS_HEADER));
                properties.push((HOPS_HEADER.to_owned(), (hops + 1).to_string()));
                let message = OutgoingMessage {
                    target: target.clone(),
                    body: call.body.unwrap_or_default(),
                    properties,
                };
                let delay = hook.delay.as_ref().map(|d| d.sample());
                tokio::spawn(self.clone().publish_message(
                    one,
                    delay,
                    message,
                    what(),
                    journal.clone(),
                ));
                continue;
            }
            let what = || format!("webhook {} {} of {mapping}", call.method, call.url);
            let outgoing = match to_request(&call, hops + 1) {
                Ok(r) => r,
                Err(reason) => {
                    self.leave(&mut held);
                    counters.invalid.fetch_add(1, Ordering::Relaxed);
                    self.log.warn(Kind::Invalid, 1, || {
                        format!("{} not sent: {reason}", what())
                    });
                    continue;
                }
            };
            if !self.outbound.allows(outgoing.uri()) {
                self.leave(&mut held);
                self.denied(what);
                continue;
            }
            let target = target_key(outgoing.uri());
            let one = match self.hand_over(&mut held, call_bytes(&call), target, self.share.slots) {
                Ok(one) => one,
                Err(full) => {
                    self.dropped(full, 1, what);
                    continue;
                }
            };
            let delay = hook.delay.as_ref().map(|d| d.sample());
            tokio::spawn(self.clone().send(one, delay, outgoing, what()));
        }
    }

    /// One rendered webhook: its delay, its target's slot and a shared one, its
    /// sending, its outcome. `what` names it in messages.
    async fn send(
        self: Arc<Self>,
        held: Held,
        delay: Option<Duration>,
        outgoing: http::Request<Full<Bytes>>,
        what: String,
    ) {
        let Some(_target_slot) = held.turn(delay).await else {
            return;
        };
        let Ok(_slot) = self.slots.acquire().await else {
            return;
        };
        let counters = &self.metrics.webhooks;
        match self
            .outbound
            .send(outgoing, self.limits.timeout, Some(MAX_ANSWER))
            .await
        {
            Ok(answer) => {
                counters.sent.fetch_add(1, Ordering::Relaxed);
                tracing::info!("{what} returned status {}", answer.status);
                tracing::debug!(
                    "{what} answered: {}",
                    String::from_utf8_lossy(&answer.body[..answer.body.len().min(2048)])
                );
            }
            Err(SendError::Denied) => self.denied(|| what),
            Err(e) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                self.log
                    .warn(Kind::Failed, 1, || format!("{what} failed: {e}"));
            }
        }
        // `held` goes last: the webhook waits until it is answered or given up.
    }

    /// One rendered message: its delay, its connection's slot and a shared one, its
    /// publishing (bounded by the webhooks' timeout), its outcome.
    async fn publish_message(
        self: Arc<Self>,
        held: Held,
        delay: Option<Duration>,
        message: OutgoingMessage,
        what: String,
        journal: Option<Arc<SubEvents>>,
    ) {
        // A connection's own slots only: a publish is one frame and a confirm on a
        // connection already open, pipelined, not an HTTP exchange that holds a
        // connection of the pool; the webhooks' slots stay theirs.
        let Some(_target_slot) = held.turn(delay).await else {
            return;
        };
        let target = message.target.clone();
        let size = message.body.len();
        let outcome = match self.publisher.get() {
            None => Err(PublishError::UnknownConnection(target.connection.clone())),
            Some(p) => match tokio::time::timeout(self.limits.timeout, p.publish(message)).await {
                Ok(r) => r,
                Err(_) => Err(PublishError::Broker(format!(
                    "the broker did not take it within {} s",
                    self.limits.timeout.as_secs()
                ))),
            },
        };
        let counters = &self.metrics.messages;
        match outcome {
            Ok(()) => {
                counters.published.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("{what} published");
                if let Some(j) = &journal {
                    j.push(
                        "MESSAGE_PUBLISHED",
                        serde_json::json!({
                            "connection": target.connection,
                            "destination": target.destination,
                            "topic": target.topic,
                            "bodySize": size,
                        }),
                    );
                }
            }
            Err(e) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                let reason = e.to_string();
                not_published(journal.as_deref(), &target, &reason);
                self.log.warn(Kind::NotPublished, 1, || {
                    format!("{what} not published: {reason}")
                });
            }
        }
        // `held` goes last: the message waits until the broker took it or it failed.
        drop(held);
    }

    /// Counts and logs (throttled) a webhook whose target the rules refuse.
    fn denied(&self, what: impl FnOnce() -> String) {
        self.metrics.webhooks.denied.fetch_add(1, Ordering::Relaxed);
        self.log.warn(Kind::Denied, 1, || {
            format!(
                "{} not sent: the target is denied by --allow-proxy-targets / --deny-proxy-targets",
                what()
            )
        });
    }
}

/// Notes in the journal entry that a message was not published, and why.
fn not_published(
    journal: Option<&SubEvents>,
    target: &decoy_core::publish::MessageTarget,
    reason: &str,
) {
    if let Some(j) = journal {
        j.push(
            "MESSAGE_NOT_PUBLISHED",
            serde_json::json!({
                "connection": target.connection,
                "destination": target.destination,
                "topic": target.topic,
                "reason": reason,
            }),
        );
    }
}

/// The hops the request that fired the webhooks carried in [`HOPS_HEADER`] (an HTTP
/// header or a message property): the largest value, 0 when none can be read.
fn hops_of(request: &PluginRequest) -> u32 {
    let fields = match &request.request {
        wit::Request::Http(r) => &r.headers,
        wit::Request::Mq(m) => &m.properties,
    };
    fields
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(HOPS_HEADER))
        .filter_map(|(_, value)| value.trim().parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

fn fields_bytes(fields: &[(String, String)]) -> usize {
    fields.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// What the request kept for rendering holds (its text and body).
fn request_bytes(request: &PluginRequest) -> usize {
    match &request.request {
        wit::Request::Http(r) => {
            r.method.len()
                + r.url.len()
                + r.path.len()
                + r.base_url.len()
                + fields_bytes(&r.query)
                + fields_bytes(&r.headers)
                + fields_bytes(&r.cookies)
                + fields_bytes(&r.path_parameters)
                + r.body.len()
        }
        wit::Request::Mq(m) => {
            m.destination.len()
                + m.reply_to.as_ref().map_or(0, String::len)
                + m.message_id.as_ref().map_or(0, String::len)
                + m.correlation_id.as_ref().map_or(0, String::len)
                + fields_bytes(&m.properties)
                + m.body.len()
        }
    }
}

/// What a rendered webhook holds until it is answered.
fn call_bytes(call: &WebhookCall) -> usize {
    OVERHEAD
        + call.method.len()
        + call.url.len()
        + fields_bytes(&call.headers)
        + call.body.as_ref().map_or(0, Bytes::len)
}

/// `scheme://host:port`: what webhooks share a target's share by.
fn target_key(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("http");
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    format!(
        "{scheme}://{}:{port}",
        uri.host().unwrap_or_default().to_ascii_lowercase()
    )
}

/// The hyper request for a rendered webhook, carrying `hops` in [`HOPS_HEADER`]
/// (in place of any value the webhook's own headers give it); the error says what is
/// not valid.
fn to_request(call: &WebhookCall, hops: u32) -> Result<http::Request<Full<Bytes>>, String> {
    let uri = check_url(&call.url)?;
    let method = http::Method::from_bytes(call.method.as_bytes())
        .map_err(|_| format!("{:?} is not an HTTP method", call.method))?;
    let mut req = http::Request::builder().method(method).uri(uri);
    for (name, value) in &call.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a valid header name"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("header {name}: {value:?} is not a valid header value"))?;
        req = req.header(name, value);
    }
    let mut req = req
        .body(Full::new(call.body.clone().unwrap_or_default()))
        .map_err(|e| e.to_string())?;
    req.headers_mut().insert(
        http::HeaderName::from_static(HOPS_HEADER),
        http::HeaderValue::from(hops),
    );
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http_request(headers: &[(&str, &str)], body: &[u8]) -> PluginRequest {
        PluginRequest::from(wit::Request::Http(wit::HttpRequest {
            method: "POST".into(),
            url: "/x".into(),
            path: "/x".into(),
            query: vec![],
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cookies: vec![],
            body: body.to_vec(),
            base_url: "http://localhost:1".into(),
            path_parameters: vec![],
        }))
    }

    #[test]
    fn hops_are_read_from_the_header_in_any_case_and_garbage_counts_as_none() {
        assert_eq!(hops_of(&http_request(&[], b"")), 0);
        assert_eq!(
            hops_of(&http_request(&[("Decoy-Webhook-Hops", " 3 ")], b"")),
            3
        );
        assert_eq!(
            hops_of(&http_request(
                &[(HOPS_HEADER, "2"), (HOPS_HEADER, "x"), (HOPS_HEADER, "4")],
                b""
            )),
            4
        );
        assert_eq!(hops_of(&http_request(&[(HOPS_HEADER, "-1")], b"")), 0);
        let mq = PluginRequest::from(wit::Request::Mq(wit::MqMessage {
            destination: "q".into(),
            reply_to: None,
            message_id: None,
            correlation_id: None,
            properties: vec![(HOPS_HEADER.into(), "5".into())],
            body: vec![],
        }));
        assert_eq!(hops_of(&mq), 5);
    }

    #[test]
    fn a_webhook_carries_one_hop_more_whatever_its_own_headers_say() {
        let call = WebhookCall {
            method: "POST".into(),
            url: "http://example.com/cb".into(),
            headers: vec![
                ("Decoy-Webhook-Hops".into(), "0".into()),
                ("X-Other".into(), "1".into()),
            ],
            body: Some(Bytes::from_static(b"hi")),
            message: None,
        };
        let req = to_request(&call, 3).unwrap();
        let hops: Vec<_> = req.headers().get_all(HOPS_HEADER).iter().collect();
        assert_eq!(hops, ["3"]);
        assert_eq!(req.headers()["x-other"], "1");
    }

    #[test]
    fn targets_are_keyed_by_scheme_host_and_port() {
        let key = |u: &str| target_key(&u.parse().unwrap());
        assert_eq!(key("http://Example.com/a"), "http://example.com:80");
        assert_eq!(key("http://example.com:80/b?x"), "http://example.com:80");
        assert_eq!(key("https://example.com/a"), "https://example.com:443");
        assert_eq!(key("http://127.0.0.1:9000/"), "http://127.0.0.1:9000");
    }

    fn sender(limits: WebhookLimits) -> Arc<Inner> {
        WebhookSender::new(limits, Arc::default(), Arc::default()).inner
    }

    #[test]
    fn a_target_gets_half_of_each_limit_and_everything_is_released_when_dropped() {
        let inner = sender(WebhookLimits {
            concurrency: 10,
            max_pending: 8,
            max_pending_bytes: 20_000,
            timeout: SEND_TIMEOUT,
        });
        assert_eq!(inner.share.slots, 5);
        let mut served = inner.hold(8, 1_000).unwrap();
        assert_eq!(inner.hold(1, 0).unwrap_err(), Limit::Count);
        let a = "http://a:80".to_owned();
        let mut to_a = Vec::new();
        for _ in 0..4 {
            to_a.push(inner.hand_over(&mut served, 100, a.clone(), 1).unwrap());
        }
        assert_eq!(
            inner.hand_over(&mut served, 100, a.clone(), 1).unwrap_err(),
            Limit::TargetCount
        );
        // Another target still has its half.
        let b = "http://b:80".to_owned();
        let to_b = inner.hand_over(&mut served, 9_000, b.clone(), 1).unwrap();
        assert_eq!(
            inner.hand_over(&mut served, 1_001, b, 1).unwrap_err(),
            Limit::TargetBytes
        );
        assert_eq!(served.count, 1);
        {
            let q = inner.lock_queue();
            assert_eq!((q.pending, q.bytes), (6, 1_000 + 400 + 9_000));
            assert_eq!(q.targets.len(), 2);
        }
        assert_eq!(inner.metrics.webhooks.pending.load(Ordering::Relaxed), 6);
        assert_eq!(
            inner
                .hand_over(&mut served, 9_700, "http://c:80".into(), 1)
                .unwrap_err(),
            Limit::Bytes
        );
        assert_eq!(served.count, 0);
        drop((served, to_a, to_b));
        let q = inner.lock_queue();
        assert_eq!((q.pending, q.bytes, q.targets.len()), (0, 0, 0));
        assert_eq!(
            inner.metrics.webhooks.pending_bytes.load(Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn the_request_kept_for_rendering_counts_its_body() {
        let r = http_request(&[("a", "bc")], &[0; 1000]);
        assert_eq!(request_bytes(&r), 4 + 2 + 2 + 18 + 3 + 1000);
    }
}
