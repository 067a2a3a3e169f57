//! The request journal: a bounded record of served requests, for the admin API.
//!
//! Bounded (`--max-request-journal-entries`, default 10,000): a long load test drops
//! its oldest entries instead of growing without limit. Recording moves the request
//! snapshot the engine already built (compacted, see
//! [`RequestSnapshot::into_compact`]) into an `Arc`; the work added to a request is
//! an atomic increment for its id, that copy, and a short lock to push onto a ring.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;
use crate::request::RequestSnapshot;

pub const DEFAULT_MAX_ENTRIES: usize = 10_000;

/// One served request and what it got.
#[derive(Debug)]
pub struct ServeEvent {
    pub id: uuid::Uuid,
    pub logged_at: SystemTime,
    pub request: RequestSnapshot,
    /// `HTTP/1.1`, `HTTP/2`.
    pub protocol: &'static str,
    /// The local port the request came in on (for `absoluteUrl`).
    pub local_port: u16,
    pub mapping: Option<Arc<Mapping>>,
    /// The answer came from a real service (`proxyBaseUrl`); recording turns these
    /// into stubs.
    pub proxied: bool,
    pub status: u16,
    pub response_headers: Arc<[(HeaderName, HeaderValue)]>,
    pub response_body: Bytes,
    pub added_delay: Duration,
    /// Request read to response handed to the transport, without the added delay.
    pub process_time: Duration,
}

impl ServeEvent {
    pub fn was_matched(&self) -> bool {
        self.mapping.is_some()
    }
}

#[derive(Debug)]
pub struct Journal {
    /// 0 when the journal is disabled.
    capacity: usize,
    entries: Mutex<VecDeque<Arc<ServeEvent>>>,
    /// Event ids are this prefix and a counter.
    prefix: u64,
    counter: AtomicU64,
}

impl Journal {
    pub fn new(capacity: usize) -> Journal {
        Journal {
            capacity,
            entries: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
            prefix: uuid::Uuid::new_v4().as_u64_pair().0,
            counter: AtomicU64::new(0),
        }
    }

    pub fn disabled() -> Journal {
        Journal::new(0)
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<ServeEvent>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record(&self, event: ServeEvent) {
        if self.capacity == 0 {
            return;
        }
        let event = Arc::new(event);
        let evicted = {
            let mut entries = self.lock();
            let evicted = if entries.len() >= self.capacity {
                entries.pop_front()
            } else {
                None
            };
            entries.push_back(event);
            evicted
        };
        // Freeing the oldest entry touches cold memory: do it outside the lock.
        drop(evicted);
    }

    /// A fresh id for an event: unique within this process and across processes
    /// (a random prefix chosen at start), for the cost of one atomic increment
    /// instead of drawing 122 random bits per request.
    pub fn next_id(&self) -> uuid::Uuid {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        uuid::Uuid::from_u64_pair(self.prefix, n)
    }

    /// Newest first, as WireMock lists them.
    pub fn newest_first(&self) -> Vec<Arc<ServeEvent>> {
        self.lock().iter().rev().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<Arc<ServeEvent>> {
        self.lock().iter().find(|e| e.id.to_string() == id).cloned()
    }

    pub fn remove_by_id(&self, id: &str) -> bool {
        let mut entries = self.lock();
        let before = entries.len();
        entries.retain(|e| e.id.to_string() != id);
        entries.len() != before
    }

    /// Removes the events for which `pred` is true; returns them.
    pub fn remove_where(&self, pred: impl Fn(&ServeEvent) -> bool) -> Vec<Arc<ServeEvent>> {
        let mut entries = self.lock();
        let (gone, kept): (Vec<_>, Vec<_>) = entries.drain(..).partition(|e| pred(e));
        entries.extend(kept);
        gone
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(url: &str) -> ServeEvent {
        ServeEvent {
            id: uuid::Uuid::new_v4(),
            logged_at: SystemTime::now(),
            request: RequestSnapshot::new("GET", url),
            protocol: "HTTP/1.1",
            local_port: 8080,
            mapping: None,
            proxied: false,
            status: 404,
            response_headers: Arc::from(Vec::new()),
            response_body: Bytes::new(),
            added_delay: Duration::ZERO,
            process_time: Duration::ZERO,
        }
    }

    #[test]
    fn keeps_only_the_newest_entries_up_to_its_capacity() {
        let j = Journal::new(3);
        for i in 0..5 {
            j.record(event(&format!("/{i}")));
        }
        let urls: Vec<String> = j
            .newest_first()
            .iter()
            .map(|e| e.request.url.clone())
            .collect();
        assert_eq!(urls, ["/4", "/3", "/2"]);
    }

    #[test]
    fn a_disabled_journal_records_nothing() {
        let j = Journal::disabled();
        j.record(event("/x"));
        assert!(j.is_empty());
    }

    #[test]
    fn removes_by_id_and_by_predicate() {
        let j = Journal::new(10);
        j.record(event("/a"));
        j.record(event("/b"));
        let id = j.newest_first()[0].id.to_string();
        assert!(j.remove_by_id(&id));
        assert!(!j.remove_by_id(&id));
        let gone = j.remove_where(|e| e.request.url == "/a");
        assert_eq!(gone.len(), 1);
        assert!(j.is_empty());
    }
}
