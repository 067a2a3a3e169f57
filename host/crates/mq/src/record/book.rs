//! The recording's books: requests forwarded and waiting for their reply (bounded in
//! number and bytes), the exchanges recorded (one per distinct request, bounded in
//! bytes), what went wrong, and the counts the summary reports.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::transport::Message;

/// Notes kept for the summary, at most (further ones are counted only).
const NOTES: usize = 1000;
/// Outstanding bytes are counted in units of this many bytes (a semaphore counts
/// in `u32`).
const UNIT: u64 = 1024;

/// A request forwarded to the back end, waiting for its reply.
#[derive(Debug)]
pub struct Pending {
    pub route: usize,
    /// As the requester sent it.
    pub request: Message,
    pub deadline: Instant,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

/// A request and the reply the back end gave it.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub route: usize,
    pub request: Message,
    pub reply: Message,
    /// The stub's `request` part, as JSON text: what makes requests distinct.
    pub key: String,
}

/// What happened, for the summary.
#[derive(Debug, Default)]
pub struct Counts {
    pub forwarded: AtomicU64,
    pub passed_on: AtomicU64,
    pub recorded: AtomicU64,
    /// Same request again (not recorded twice).
    pub repeats: AtomicU64,
    /// ... with a reply unlike the first one's.
    pub differing: AtomicU64,
    pub timed_out: AtomicU64,
    pub unpaired: AtomicU64,
    pub not_forwarded: AtomicU64,
    pub not_passed_on: AtomicU64,
    /// Past `maxRecordedBytes`.
    pub over_budget: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    pending: HashMap<String, Pending>,
    exchanges: Vec<Exchange>,
    seen: HashMap<String, usize>,
    recorded_bytes: u64,
    notes: Vec<String>,
}

#[derive(Debug)]
pub struct Book {
    inner: Mutex<Inner>,
    pub counts: Counts,
    outstanding: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    byte_units: u32,
    max_recorded_bytes: u64,
}

impl Book {
    pub fn new(max_outstanding: usize, max_bytes: u64, max_recorded_bytes: u64) -> Book {
        let byte_units = u32::try_from(max_bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        Book {
            inner: Mutex::default(),
            counts: Counts::default(),
            outstanding: Arc::new(Semaphore::new(max_outstanding.max(1))),
            bytes: Arc::new(Semaphore::new(byte_units as usize)),
            byte_units,
            max_recorded_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for room for one more outstanding request of `len` bytes (a request
    /// larger than the whole budget waits for all of it).
    pub async fn admit(&self, len: usize) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let units = u32::try_from((len as u64).div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.byte_units);
        // Neither semaphore is ever closed, so these do not fail.
        let one = self.outstanding.clone().acquire_owned().await.ok()?;
        let bytes = self.bytes.clone().acquire_many_owned(units).await.ok()?;
        Some((one, bytes))
    }

    pub fn wait_for(
        &self,
        key: String,
        route: usize,
        request: Message,
        timeout: Duration,
        permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
    ) {
        self.lock().pending.insert(
            key,
            Pending {
                route,
                request,
                deadline: Instant::now() + timeout,
                _permits: permits,
            },
        );
    }

    /// The request waiting under `key`, taken out (its permits go with it).
    pub fn take(&self, key: &str) -> Option<Pending> {
        self.lock().pending.remove(key)
    }

    /// Puts back a request whose reply could not be passed on yet.
    pub fn put_back(&self, key: String, p: Pending) {
        self.lock().pending.insert(key, p);
    }

    pub fn outstanding(&self) -> usize {
        self.lock().pending.len()
    }

    /// Requests whose reply did not come in time: noted, not recorded, and no
    /// longer waited for (a reply arriving later is unpaired).
    pub fn expire(&self, describe: impl Fn(&Pending) -> String) {
        self.expire_before(Instant::now(), describe);
    }

    /// Every request still waiting, as [`Book::expire`] (at the end).
    pub fn expire_all(&self, describe: impl Fn(&Pending) -> String) {
        self.expire_before(Instant::now() + Duration::from_secs(86_400 * 365), describe);
    }

    fn expire_before(&self, now: Instant, describe: impl Fn(&Pending) -> String) {
        let mut g = self.lock();
        let expired: Vec<String> = g
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(p) = g.pending.remove(&k) {
                let line = describe(&p);
                tracing::warn!("{line}");
                self.counts.timed_out.fetch_add(1, Ordering::Relaxed);
                if g.notes.len() < NOTES {
                    g.notes.push(line);
                }
            }
        }
    }

    pub fn note(&self, line: String) {
        let mut g = self.lock();
        if g.notes.len() < NOTES {
            g.notes.push(line);
        }
    }

    /// Keeps an exchange, unless its request was recorded already or the budget is
    /// spent.
    pub fn record(&self, exchange: Exchange) {
        let size = (exchange.request.body.len() + exchange.reply.body.len()) as u64;
        let mut g = self.lock();
        if let Some(&i) = g.seen.get(&exchange.key) {
            self.counts.repeats.fetch_add(1, Ordering::Relaxed);
            if g.exchanges[i].reply.body != exchange.reply.body {
                self.counts.differing.fetch_add(1, Ordering::Relaxed);
                let line = format!(
                    "a repeated request on route {} got a reply unlike the first one's; the first is kept",
                    exchange.route
                );
                tracing::info!("{line}");
                if g.notes.len() < NOTES {
                    g.notes.push(line);
                }
            }
            return;
        }
        if g.recorded_bytes + size > self.max_recorded_bytes {
            if self.counts.over_budget.fetch_add(1, Ordering::Relaxed) == 0 {
                let line = format!(
                    "the recording holds {} bytes, its maxRecordedBytes: further new requests are forwarded and answered but not recorded",
                    g.recorded_bytes
                );
                tracing::warn!("{line}");
                g.notes.push(line);
            }
            return;
        }
        g.recorded_bytes += size;
        let i = g.exchanges.len();
        g.seen.insert(exchange.key.clone(), i);
        g.exchanges.push(exchange);
        self.counts.recorded.fetch_add(1, Ordering::Relaxed);
    }

    /// The exchanges recorded and the notes, taken out (at the end).
    pub fn take_all(&self) -> (Vec<Exchange>, Vec<String>) {
        let mut g = self.lock();
        g.seen.clear();
        (
            std::mem::take(&mut g.exchanges),
            std::mem::take(&mut g.notes),
        )
    }
}
