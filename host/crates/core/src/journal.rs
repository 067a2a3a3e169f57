//! The request journal: a bounded record of served requests, for the admin API.
//!
//! Bounded (`--max-request-journal-entries`, default 10,000): a long load test drops
//! its oldest entries instead of growing without limit. Recording moves the request
//! snapshot the engine already built (compacted, see
//! [`RequestSnapshot::into_compact`]) into an `Arc`; the work added to a request is
//! an atomic increment for its id, that copy, and an uncontended lock on one slot of
//! a ring.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;
use decoy_spec::request::RequestSnapshot;

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

/// A ring of slots, one per entry, written without a shared lock: an event's id is
/// `prefix` and a sequence number, and the number picks its slot, so the newest
/// `capacity` events are always the ones kept and concurrent requests write to
/// different slots (each slot's own mutex is uncontended). Listing sorts by the
/// sequence number; that is admin-API work, not request work.
#[derive(Debug)]
pub struct Journal {
    /// Empty when the journal is disabled.
    slots: Box<[Mutex<Option<Arc<ServeEvent>>>]>,
    /// Event ids are this prefix and a sequence number.
    prefix: u64,
    sequence: AtomicU64,
}

impl Journal {
    pub fn new(capacity: usize) -> Journal {
        Journal {
            slots: (0..capacity).map(|_| Mutex::new(None)).collect(),
            prefix: uuid::Uuid::new_v4().as_u64_pair().0,
            sequence: AtomicU64::new(0),
        }
    }

    pub fn disabled() -> Journal {
        Journal::new(0)
    }

    pub fn enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    fn slot(&self, seq: u64) -> MutexGuard<'_, Option<Arc<ServeEvent>>> {
        let i = (seq % self.slots.len() as u64) as usize;
        self.slots[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sequence_of(id: &uuid::Uuid) -> u64 {
        id.as_u64_pair().1
    }

    /// A fresh id for an event to record: unique within this process and across
    /// processes (a random prefix chosen at start), for one atomic increment.
    pub fn next_id(&self) -> uuid::Uuid {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        uuid::Uuid::from_u64_pair(self.prefix, n)
    }

    /// How many ids were handed out so far: it changes when a request is recorded,
    /// so the dashboard can tell cheaply whether there is anything new.
    pub fn recorded(&self) -> u64 {
        self.sequence.load(Ordering::Relaxed)
    }

    /// An event's sequence number (its place in arrival order).
    pub fn sequence(event: &ServeEvent) -> u64 {
        Self::sequence_of(&event.id)
    }

    /// Records `event`, whose id must come from [`Journal::next_id`].
    pub fn record(&self, event: ServeEvent) {
        if self.slots.is_empty() {
            return;
        }
        let seq = Self::sequence_of(&event.id);
        let evicted = self.slot(seq).replace(Arc::new(event));
        // Freeing the oldest entry touches cold memory: done after the slot's lock.
        drop(evicted);
    }

    /// Newest first, as WireMock lists them.
    pub fn newest_first(&self) -> Vec<Arc<ServeEvent>> {
        let mut all: Vec<Arc<ServeEvent>> = self
            .slots
            .iter()
            .filter_map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect();
        all.sort_by_key(|e| std::cmp::Reverse(Self::sequence_of(&e.id)));
        all
    }

    fn parse(&self, id: &str) -> Option<uuid::Uuid> {
        uuid::Uuid::parse_str(id).ok().filter(|_| self.enabled())
    }

    pub fn get(&self, id: &str) -> Option<Arc<ServeEvent>> {
        let id = self.parse(id)?;
        self.slot(Self::sequence_of(&id))
            .clone()
            .filter(|e| e.id == id)
    }

    pub fn remove_by_id(&self, id: &str) -> bool {
        let Some(id) = self.parse(id) else {
            return false;
        };
        let mut slot = self.slot(Self::sequence_of(&id));
        if slot.as_ref().is_some_and(|e| e.id == id) {
            *slot = None;
            true
        } else {
            false
        }
    }

    /// Removes the events for which `pred` is true; returns them, newest first.
    pub fn remove_where(&self, pred: impl Fn(&ServeEvent) -> bool) -> Vec<Arc<ServeEvent>> {
        let mut gone = Vec::new();
        for s in self.slots.iter() {
            let mut slot = s.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_some_and(|e| pred(e)) {
                gone.extend(slot.take());
            }
        }
        gone.sort_by_key(|e| std::cmp::Reverse(Self::sequence_of(&e.id)));
        gone
    }

    pub fn clear(&self) {
        for s in self.slots.iter() {
            s.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
    }

    pub fn len(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.lock().unwrap_or_else(|p| p.into_inner()).is_some())
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(j: &Journal, url: &str) -> ServeEvent {
        ServeEvent {
            id: j.next_id(),
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
            j.record(event(&j, &format!("/{i}")));
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
        j.record(event(&j, "/x"));
        assert!(j.is_empty());
    }

    #[test]
    fn removes_by_id_and_by_predicate() {
        let j = Journal::new(10);
        j.record(event(&j, "/a"));
        j.record(event(&j, "/b"));
        let id = j.newest_first()[0].id.to_string();
        assert!(j.remove_by_id(&id));
        assert!(!j.remove_by_id(&id));
        let gone = j.remove_where(|e| e.request.url == "/a");
        assert_eq!(gone.len(), 1);
        assert!(j.is_empty());
    }
}
