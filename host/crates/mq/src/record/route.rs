//! One route's two tasks: requests from where the system under test sends them to
//! the real back end, and the back end's replies back to the requesters.
//!
//! - **Requests**: each is admitted (room among the outstanding requests, in number
//!   and bytes; otherwise receiving waits), given the route's reply destination and
//!   a pairing key, entered in the book, forwarded, and acknowledged once the broker
//!   confirmed the forward (a forward that fails puts the request back).
//! - **Replies**: each is paired with its request by the key (the reply's correlation
//!   id, or the subject or topic it came on), passed on to the requester unchanged
//!   but for its correlation id (the requester's), acknowledged once that was
//!   confirmed, and recorded. A reply that pairs with nothing (late, or not for a
//!   forwarded request) is logged, counted and refused; nothing is written for it.
//!
//! Both reconnect with the runtime's back-off ([`Backoff`]) and report ongoing
//! failures through [`Trouble`], naming the connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::book::{Book, Exchange};
use super::spec::{RecordSpec, ReplyMode, Route};
use super::stubs::request_part;
use crate::config::Correlation;
use crate::retry::{Backoff, Trouble, sleep_or_stop};
use crate::transport::{Broker, Delivery, Destination, Message, Put, ReplyPoint, Sender, Settle};

/// What a route's tasks share.
pub struct RouteTasks {
    pub index: usize,
    pub spec: Arc<RecordSpec>,
    pub broker: Arc<dyn Broker>,
    pub book: Arc<Book>,
    pub trouble: Arc<Trouble>,
    /// The route's reply destination of decoy's own, once there is one.
    pub point: watch::Sender<Option<ReplyPoint>>,
}

impl std::fmt::Debug for RouteTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteTasks")
            .field("index", &self.index)
            .field("broker", &self.broker.describe())
            .finish_non_exhaustive()
    }
}

impl RouteTasks {
    fn route(&self) -> &Route {
        &self.spec.routes[self.index]
    }

    fn key(&self, id: &str) -> String {
        format!("{}:{id}", self.index)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// A short, printable view of a body, for notes.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(80)]).replace(['\n', '\r'], " ");
    if body.len() > 80 {
        format!("{text:?}...")
    } else {
        format!("{text:?}")
    }
}

/// Forwards (or replies passed on) one route has in flight at once: a publisher
/// confirm is a broker round trip, and waiting for each in turn would cap a route at
/// one message per round trip.
const IN_FLIGHT: usize = 32;

/// A route's sender, shared by the sends in flight, opened again after a failure.
#[derive(Default)]
struct SharedSender {
    slot: tokio::sync::Mutex<Option<Arc<dyn Sender>>>,
}

/// Sends `message` to `to`; retries a failed send with back-off (a new sender) until
/// it is done, the destination does not exist (`Some(false)`), or `stop` (`None`).
async fn send(
    t: &RouteTasks,
    shared: &SharedSender,
    to: &Destination,
    message: &Message,
    what: &str,
    stop: &mut watch::Receiver<bool>,
) -> Option<bool> {
    let mut backoff = Backoff::default();
    loop {
        let sender = {
            // Opening is serialised, so a failure opens one sender, not one per send.
            let mut slot = shared.slot.lock().await;
            match &*slot {
                Some(s) => Ok(s.clone()),
                None => t.broker.sender(t.index).await.map(|s| {
                    let s: Arc<dyn Sender> = Arc::from(s);
                    *slot = Some(s.clone());
                    s
                }),
            }
        };
        let sender = match sender {
            Ok(s) => s,
            Err(e) => {
                t.trouble.failed(what, &e, None);
                if sleep_or_stop(backoff.next_pause(), stop).await {
                    return None;
                }
                continue;
            }
        };
        match sender.send(to, message.clone()).await {
            Ok(Put::Done) => {
                t.trouble.ok(what);
                return Some(true);
            }
            Ok(Put::NoSuchQueue) => return Some(false),
            Err(e) => {
                t.trouble.failed(what, &e, None);
                let mut slot = shared.slot.lock().await;
                if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &sender)) {
                    *slot = None;
                }
                drop(slot);
                if sleep_or_stop(backoff.next_pause(), stop).await {
                    return None;
                }
            }
        }
    }
}

/// Sends in flight on one of a route's loops, at most [`IN_FLIGHT`].
struct InFlight {
    set: JoinSet<()>,
    room: Arc<Semaphore>,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            set: JoinSet::new(),
            room: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }

    /// Runs `job` once there is room (`false`: stopping first).
    async fn spawn(
        &mut self,
        job: impl std::future::Future<Output = ()> + Send + 'static,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        while self.set.try_join_next().is_some() {}
        let permit = tokio::select! {
            p = self.room.clone().acquire_owned() => p.ok(),
            _ = stop.wait_for(|s| *s) => None,
        };
        let Some(permit) = permit else { return false };
        self.set.spawn(async move {
            job.await;
            drop(permit);
        });
        true
    }

    /// Waits for the sends in flight (they end promptly once stopping).
    async fn finish(mut self) {
        while self.set.join_next().await.is_some() {}
    }
}

/// Forwards requests, until `stop`.
pub async fn requests(t: Arc<RouteTasks>, stop: watch::Receiver<bool>) {
    let mut flight = InFlight::new();
    receive_requests(&t, stop, &mut flight).await;
    flight.finish().await;
}

async fn receive_requests(
    t: &Arc<RouteTasks>,
    mut stop: watch::Receiver<bool>,
    flight: &mut InFlight,
) {
    let route = t.route();
    let receiving = format!("receiving requests from {}", route.listen);
    let forwarding: Arc<str> = format!("forwarding to {}", route.forward).into();
    let sender = Arc::new(SharedSender::default());
    let mut point_rx = t.point.subscribe();
    let mut backoff = Backoff::default();
    'connect: loop {
        if *stop.borrow() {
            return;
        }
        let opened = tokio::select! {
            r = t.broker.receiver(&route.listen, t.index) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut rx = match opened {
            Ok(rx) => {
                backoff.reset();
                t.trouble.ok(&receiving);
                rx
            }
            Err(e) => {
                let calm = e.missing().map(|q| {
                    format!(
                        "route {}: {} on connection {:?} does not exist: {}",
                        t.index,
                        q,
                        route.connection_id,
                        t.broker.how_to_create(q)
                    )
                });
                t.trouble.failed(&receiving, &e, calm);
                if sleep_or_stop(backoff.next_pause(), &mut stop).await {
                    return;
                }
                continue 'connect;
            }
        };
        loop {
            let next = tokio::select! {
                n = rx.next() => n,
                _ = stop.wait_for(|s| *s) => return,
            };
            let delivery = match next {
                Ok(Some(d)) => d,
                Ok(None) => return,
                Err(e) => {
                    t.trouble.failed(&receiving, &e, None);
                    if sleep_or_stop(backoff.next_pause(), &mut stop).await {
                        return;
                    }
                    continue 'connect;
                }
            };
            if !forward(
                t,
                delivery,
                &sender,
                &mut point_rx,
                &forwarding,
                &mut stop,
                flight,
            )
            .await
            {
                return;
            }
        }
    }
}

/// Forwards one request; `false` when stopping.
async fn forward(
    t: &Arc<RouteTasks>,
    delivery: Box<dyn Delivery>,
    sender: &Arc<SharedSender>,
    point_rx: &mut watch::Receiver<Option<ReplyPoint>>,
    forwarding: &Arc<str>,
    stop: &mut watch::Receiver<bool>,
    flight: &mut InFlight,
) -> bool {
    let route = t.route();
    let request = delivery.message().clone();
    let mut out = request.clone();
    out.topic = None;
    let id = match &route.reply {
        ReplyMode::ReplyTo => {
            // The reply destination of decoy's own, once the replies task has it.
            let point = tokio::select! {
                p = point_rx.wait_for(Option::is_some) => p.ok().and_then(|p| p.clone()),
                _ = stop.wait_for(|s| *s) => None,
            };
            let Some(point) = point else {
                let _ = delivery.settle(Settle::Requeue).await;
                return false;
            };
            let token = uuid::Uuid::new_v4().simple().to_string();
            out.reply_to = Some(point.reply_to(&token));
            out.reply_to_manager = None;
            if point.per_request.is_none() {
                // Paired by correlation id: whichever id the back end copies.
                out.message_id = Some(token.clone().into_bytes());
                out.correlation_id = Some(token.clone().into_bytes());
            }
            token
        }
        ReplyMode::Fixed { queue, pair_by, .. } => {
            out.reply_to = Some(queue.name.clone());
            out.reply_to_manager = None;
            let slot = match pair_by {
                Correlation::CopyCorrelId => &mut out.correlation_id,
                _ => &mut out.message_id,
            };
            // A request without the id its reply is paired by gets one.
            let id =
                slot.get_or_insert_with(|| uuid::Uuid::new_v4().simple().to_string().into_bytes());
            hex(id)
        }
    };
    if out.reply_to.is_some() {
        out.message_type = Some("request".into());
    }
    let permits = tokio::select! {
        p = t.book.admit(request.body.len()) => p,
        _ = stop.wait_for(|s| *s) => None,
    };
    let Some(permits) = permits else {
        let _ = delivery.settle(Settle::Requeue).await;
        return false;
    };
    let key = t.key(&id);
    t.book
        .wait_for(key.clone(), t.index, request, t.spec.timeout, permits);
    let (t, sender, forwarding, mut job_stop) =
        (t.clone(), sender.clone(), forwarding.clone(), stop.clone());
    let job = async move {
        let route = t.route();
        match send(
            &t,
            &sender,
            &route.forward,
            &out,
            &forwarding,
            &mut job_stop,
        )
        .await
        {
            Some(true) => {
                t.book.counts.forwarded.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = delivery.settle(Settle::Ack).await {
                    tracing::warn!(
                        "route {}: acknowledging a forwarded request failed: {e}",
                        t.index
                    );
                }
            }
            Some(false) => {
                t.book.take(&key);
                t.book.counts.not_forwarded.fetch_add(1, Ordering::Relaxed);
                let line = format!(
                    "route {}: {} does not exist on connection {:?}: the request goes back to {} ({})",
                    t.index,
                    route.forward,
                    route.connection_id,
                    route.listen,
                    t.broker.how_to_create(&route.forward.name)
                );
                tracing::warn!("{line}");
                t.book.note(line);
                sleep_or_stop(Duration::from_secs(1), &mut job_stop).await;
                let _ = delivery.settle(Settle::Requeue).await;
            }
            None => {
                t.book.take(&key);
                let _ = delivery.settle(Settle::Requeue).await;
            }
        }
    };
    flight.spawn(job, stop).await
}

/// Pairs replies and passes them on, until `stop`.
pub async fn replies(t: Arc<RouteTasks>, stop: watch::Receiver<bool>) {
    let mut flight = InFlight::new();
    receive_replies(&t, stop, &mut flight).await;
    flight.finish().await;
}

async fn receive_replies(
    t: &Arc<RouteTasks>,
    mut stop: watch::Receiver<bool>,
    flight: &mut InFlight,
) {
    let route = t.route();
    let receiving = match &route.reply {
        ReplyMode::ReplyTo => format!("receiving replies for {}", route.forward),
        ReplyMode::Fixed { queue, .. } => format!("receiving replies from {queue}"),
    };
    let passing: Arc<str> = "passing replies on".into();
    let sender = Arc::new(SharedSender::default());
    let mut backoff = Backoff::default();
    'connect: loop {
        if *stop.borrow() {
            return;
        }
        let opened = tokio::select! {
            r = async {
                match &route.reply {
                    ReplyMode::ReplyTo => t.broker.private_replies(t.index).await.map(|(p, rx)| (Some(p), rx)),
                    ReplyMode::Fixed { queue, .. } => t.broker.receiver(queue, t.index).await.map(|rx| (None, rx)),
                }
            } => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let (point, mut rx) = match opened {
            Ok(x) => {
                backoff.reset();
                t.trouble.ok(&receiving);
                x
            }
            Err(e) => {
                let calm = e.missing().map(|q| {
                    format!(
                        "route {}: reply queue {q} on connection {:?} does not exist: {}",
                        t.index,
                        route.connection_id,
                        t.broker.how_to_create(q)
                    )
                });
                t.trouble.failed(&receiving, &e, calm);
                if sleep_or_stop(backoff.next_pause(), &mut stop).await {
                    return;
                }
                continue 'connect;
            }
        };
        if point.is_some() {
            t.point.send_replace(point.clone());
        }
        loop {
            let next = tokio::select! {
                n = rx.next() => n,
                _ = stop.wait_for(|s| *s) => return,
            };
            let delivery = match next {
                Ok(Some(d)) => d,
                Ok(None) => return,
                Err(e) => {
                    t.trouble.failed(&receiving, &e, None);
                    // Requests forwarded with the lost destination get no reply now;
                    // new ones wait for the next.
                    if point.is_some() {
                        t.point.send_replace(None);
                    }
                    if sleep_or_stop(backoff.next_pause(), &mut stop).await {
                        return;
                    }
                    continue 'connect;
                }
            };
            if !pass_on(
                t,
                point.as_ref(),
                delivery,
                &sender,
                &passing,
                &mut stop,
                flight,
            )
            .await
            {
                return;
            }
        }
    }
}

/// Pairs one reply and passes it on; `false` when stopping.
async fn pass_on(
    t: &Arc<RouteTasks>,
    point: Option<&ReplyPoint>,
    delivery: Box<dyn Delivery>,
    sender: &Arc<SharedSender>,
    passing: &Arc<str>,
    stop: &mut watch::Receiver<bool>,
    flight: &mut InFlight,
) -> bool {
    let route = t.route();
    let reply = delivery.message().clone();
    let id = match (&route.reply, point) {
        (ReplyMode::ReplyTo, Some(p)) if p.per_request.is_some() => reply
            .topic
            .as_deref()
            .and_then(|topic| p.token_of(topic))
            .map(str::to_owned),
        (ReplyMode::ReplyTo, _) => reply
            .correlation_id
            .as_deref()
            .and_then(|c| std::str::from_utf8(c).ok())
            .map(str::to_owned),
        (ReplyMode::Fixed { .. }, _) => reply.correlation_id.as_deref().map(hex),
    };
    let key = id.as_deref().map(|id| t.key(id));
    let Some(pending) = key.and_then(|k| t.book.take(&k)) else {
        t.book.counts.unpaired.fetch_add(1, Ordering::Relaxed);
        let line = format!(
            "route {}: a reply {} pairs with no request waiting (it came too late, or not for a request decoy forwarded): dropped, not recorded",
            t.index,
            excerpt(&reply.body)
        );
        tracing::warn!("{line}");
        t.book.note(line);
        // Taken off the reply queue, not rejected: IBM MQ has no per-message reject
        // (its adapter backs the unit of work out), so a rejected reply would come
        // back, pair with nothing again, and go round until the queue's backout
        // threshold, if it has one.
        let _ = delivery.settle(Settle::Ack).await;
        return true;
    };
    let request = &pending.request;
    let mut out = reply.clone();
    out.topic = None;
    out.reply_to = None;
    out.message_type = Some("reply".into());
    let to = match &route.reply {
        ReplyMode::Fixed {
            pass_to: Some(to), ..
        } => Some(to.clone()),
        ReplyMode::Fixed { .. } => request.reply_to.clone().map(Destination::queue),
        ReplyMode::ReplyTo => {
            // The requester's correlation id back (decoy's own went to the back end).
            let mine = request
                .correlation_id
                .clone()
                .or_else(|| request.message_id.clone());
            if point.is_some_and(|p| p.per_request.is_none()) || mine.is_some() {
                out.correlation_id = mine;
            }
            request.reply_to.clone().map(Destination::queue)
        }
    };
    if !matches!(
        route.reply,
        ReplyMode::Fixed {
            pass_to: Some(_),
            ..
        }
    ) {
        out.reply_to_manager = request.reply_to_manager.clone();
    } else {
        out.reply_to_manager = None;
    }
    if request.qos.is_some() {
        out.qos = request.qos;
    }
    let key_json = request_part(&t.spec, route, request);
    let exchange = Exchange {
        route: t.index,
        request: request.clone(),
        reply: reply.clone(),
        key: key_json.to_string(),
    };
    let Some(to) = to else {
        t.book.counts.not_passed_on.fetch_add(1, Ordering::Relaxed);
        let line = format!(
            "route {}: the request {} had no reply-to: its reply is recorded but passed on to no one",
            t.index,
            excerpt(&request.body)
        );
        tracing::warn!("{line}");
        t.book.note(line);
        t.book.record(exchange);
        let _ = delivery.settle(Settle::Ack).await;
        return true;
    };
    let (t, sender, passing, mut job_stop) =
        (t.clone(), sender.clone(), passing.clone(), stop.clone());
    let job = async move {
        match send(&t, &sender, &to, &out, &passing, &mut job_stop).await {
            Some(true) => {
                t.book.counts.passed_on.fetch_add(1, Ordering::Relaxed);
                t.book.record(exchange);
                let _ = delivery.settle(Settle::Ack).await;
            }
            Some(false) => {
                t.book.counts.not_passed_on.fetch_add(1, Ordering::Relaxed);
                let line = format!(
                    "route {}: the requester's reply queue {to} does not exist: a reply was recorded but not passed on",
                    t.index
                );
                tracing::warn!("{line}");
                t.book.note(line);
                t.book.record(exchange);
                let _ = delivery.settle(Settle::Ack).await;
            }
            None => {
                // Stopping: the reply stays on its queue; its request is not waited for.
                drop(pending);
                let _ = delivery.settle(Settle::Requeue).await;
            }
        }
    };
    flight.spawn(job, stop).await
}
