//! The request journal: a bounded record of served requests, for the admin API.
//!
//! Bounded by count (`--max-request-journal-entries`, default 10,000) and by bytes
//! (`--max-request-journal-bytes`, default 256 MiB): a long load test drops its
//! oldest entries instead of growing without limit, and 10,000 requests of 16 MiB no
//! longer mean 160 GB. A request body (and an answer's body built for the request,
//! by a template or a plugin) longer than `--max-request-journal-body-size` (default
//! 1 MiB) is kept truncated to that size, with its full size noted
//! ([`ServeEvent::request_body_size`]), which the admin API shows as `bodyTruncated`
//! and `bodySize`. Proxied exchanges are kept whole: recording turns them into
//! stubs. An answer's body shared with its stub costs nothing and is never copied.
//!
//! The byte count of an entry is an estimate of what it holds (URL, headers and
//! bodies plus a fixed overhead), not the allocator's view; the budget keeps the
//! journal's memory within a small factor of it. Recording writes the request the
//! engine matched flat, into one buffer ([`KeptRequest`]), and moves the event into
//! an `Arc`; the work added to a request is an atomic increment for its id, that
//! copy, and an uncontended lock on one slot of a ring. Dropping the oldest entry
//! then frees two allocations, long out of the CPU's caches.
//!
//! With state shared between instances (`--state`), recording stays exactly this:
//! local. The admin API's queries fan in instead ([`JournalPeers`]): listing, finding
//! and counting add the other instances' entries, and clearing or removing reaches
//! them too.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;
use crate::shared::Unavailable;
use decoy_spec::header_case::HeaderCase;
use decoy_spec::kept::KeptRequest;

pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
/// The default byte budget of the whole journal (256 MiB).
pub const DEFAULT_MAX_BYTES: usize = 256 * 1024 * 1024;
/// The default size past which a body is kept truncated (1 MiB).
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;
/// What an entry costs besides its URL, headers and bodies (the event, the `Arc`,
/// the header map's tables), roughly.
const ENTRY_OVERHEAD: usize = 512;

/// The other instances' journals. Blocking: called by the journal on the admin API's
/// threads.
pub trait JournalPeers: Send + Sync + std::fmt::Debug {
    /// Every entry the other instances hold.
    fn collect(&self) -> Result<Vec<ServeEvent>, Unavailable>;
    /// Drops these entries wherever they are.
    fn remove(&self, ids: &[uuid::Uuid]) -> Result<(), Unavailable>;
    /// Empties every other instance's journal.
    fn clear(&self) -> Result<(), Unavailable>;
}

/// How much the journal keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalLimits {
    /// The most entries kept (0: no journal).
    pub max_entries: usize,
    /// The most bytes kept, estimated (`usize::MAX`: no byte limit).
    pub max_bytes: usize,
    /// Bodies longer than this are kept truncated to it (proxied ones excepted).
    pub max_body: usize,
}

impl Default for JournalLimits {
    fn default() -> Self {
        JournalLimits {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// One served request and what it got.
#[derive(Debug)]
pub struct ServeEvent {
    pub id: uuid::Uuid,
    pub logged_at: SystemTime,
    /// Reads as a [`RequestSnapshot`](decoy_spec::request::RequestSnapshot), built
    /// on first read.
    pub request: KeptRequest,
    /// `HTTP/1.1`, `HTTP/2`.
    pub protocol: &'static str,
    /// The local port the request came in on (for `absoluteUrl`).
    pub local_port: u16,
    pub mapping: Option<Arc<Mapping>>,
    /// The answer came from a real service (`proxyBaseUrl`); recording turns these
    /// into stubs.
    pub proxied: bool,
    pub status: u16,
    /// The answer's headers and body as sent; the journal sets them to `None` when
    /// they are the stub's own (shared, the usual case): read them through
    /// [`ServeEvent::response_headers`] and [`ServeEvent::response_body`]. With
    /// 10,000 stubs, an entry leaving the ring then drops no reference into a stub's
    /// memory that has long left the CPU's caches (two cache misses per request
    /// fewer, measured in docs/performance.md).
    pub response_headers: Option<Arc<[(HeaderName, HeaderValue)]>>,
    /// How the real service spelled the answer's header names, for a proxied answer
    /// read over HTTP/1 (`None`: not known, the names show as they are held). Boxed:
    /// only proxied entries have one, and every entry carries the field.
    pub response_header_case: Option<Box<HeaderCase>>,
    pub response_body: Option<Bytes>,
    pub added_delay: Duration,
    /// Request read to response handed to the transport, without the added delay.
    pub process_time: Duration,
    /// Set by the journal when it kept the request body truncated: its full size.
    pub request_body_size: Option<usize>,
    /// Set by the journal when it kept the answer's body truncated: its full size.
    pub response_body_size: Option<usize>,
    /// What the mapping's serve-event listeners did after the answer (messages
    /// published or not), appended to as it happens.
    pub sub_events: Option<Arc<crate::publish::SubEvents>>,
}

impl ServeEvent {
    pub fn was_matched(&self) -> bool {
        self.mapping.is_some()
    }

    /// The answer's headers.
    pub fn response_headers(&self) -> &[(HeaderName, HeaderValue)] {
        match (&self.response_headers, &self.mapping) {
            (Some(h), _) => h,
            (None, Some(m)) => &m.served_headers,
            (None, None) => &[],
        }
    }

    /// How the answer's header names are spelled: as the real service sent them (a
    /// proxied answer read over HTTP/1), else as the stub writes them (read from its
    /// JSON: for the admin API, not for serving); `None`: as the header list holds
    /// them (lower case).
    pub fn response_case(&self) -> Option<Cow<'_, HeaderCase>> {
        match (&self.response_header_case, &self.mapping) {
            (Some(case), _) => Some(Cow::Borrowed(&**case)),
            (None, Some(m)) if !self.proxied => Some(Cow::Owned(m.header_case())),
            _ => None,
        }
    }

    /// The answer's body (kept truncated past the journal's body limit).
    pub fn response_body(&self) -> &[u8] {
        match (&self.response_body, &self.mapping) {
            (Some(b), _) => b,
            (None, Some(m)) => &m.response.body,
            (None, None) => &[],
        }
    }

    /// Forgets the answer's headers and body where they are the stub's own.
    fn share_with_stub(&mut self) {
        let Some(m) = &self.mapping else { return };
        if self
            .response_headers
            .as_ref()
            .is_some_and(|h| Arc::ptr_eq(h, &m.served_headers))
        {
            self.response_headers = None;
        }
        if self.response_body.as_ref().is_some_and(|b| {
            b.as_ptr() == m.response.body.as_ptr() && b.len() == m.response.body.len()
        }) {
            self.response_body = None;
        }
    }

    /// Keeps at most `max` bytes of each body this event owns (not a proxied
    /// exchange's, not a body shared with the stub), as a copy so the full one is
    /// freed.
    fn truncate_bodies(&mut self, max: usize) {
        if self.proxied {
            return;
        }
        if let Some(full) = self.request.truncate_body(max) {
            self.request_body_size = Some(full);
        }
        if let Some(body) = &mut self.response_body
            && body.len() > max
        {
            self.response_body_size = Some(body.len());
            *body = Bytes::copy_from_slice(&body[..max]);
        }
    }

    /// The bytes this entry is counted for in the journal's budget.
    fn cost(&self) -> usize {
        let response = self.response_body.as_ref().map_or(0, Bytes::len);
        ENTRY_OVERHEAD + self.request.cost() + response
    }
}

/// A kept event and what it counts for.
#[derive(Debug)]
struct Entry {
    event: Arc<ServeEvent>,
    cost: usize,
}

/// A ring of slots, one per entry, written without a shared lock: an event's id is
/// `prefix` and a sequence number, and the number picks its slot, so the newest
/// `capacity` events are always the ones kept and concurrent requests write to
/// different slots (each slot's own mutex is uncontended). Listing sorts by the
/// sequence number; that is admin-API work, not request work.
///
/// The byte budget is kept by a second cursor: when the estimated total passes it,
/// the oldest entries are dropped, in sequence order, until it fits again (the newest
/// entry is always kept).
#[derive(Debug)]
pub struct Journal {
    /// Empty when the journal is disabled.
    slots: Box<[Mutex<Option<Entry>>]>,
    /// Event ids are this prefix and a sequence number.
    prefix: u64,
    sequence: AtomicU64,
    limits: JournalLimits,
    /// The estimated bytes of every kept entry.
    bytes: AtomicUsize,
    /// The sequence number from which entries may still be kept: below it, each was
    /// dropped for the byte budget (or overwritten by the ring).
    oldest: Mutex<u64>,
    /// The other instances' journals, when state is shared.
    peers: OnceLock<Arc<dyn JournalPeers>>,
}

impl Journal {
    /// A journal of at most `capacity` entries, with the default byte limits.
    pub fn new(capacity: usize) -> Journal {
        Journal::with_limits(JournalLimits {
            max_entries: capacity,
            ..JournalLimits::default()
        })
    }

    pub fn with_limits(limits: JournalLimits) -> Journal {
        Journal {
            slots: (0..limits.max_entries).map(|_| Mutex::new(None)).collect(),
            prefix: uuid::Uuid::new_v4().as_u64_pair().0,
            sequence: AtomicU64::new(0),
            limits,
            bytes: AtomicUsize::new(0),
            oldest: Mutex::new(0),
            peers: OnceLock::new(),
        }
    }

    /// From now on, queries also cover `peers` (set once, when state is shared).
    pub fn set_peers(&self, peers: Arc<dyn JournalPeers>) {
        let _ = self.peers.set(peers);
    }

    /// The other instances' entries; empty without peers.
    fn peer_events(&self) -> Result<Vec<Arc<ServeEvent>>, Unavailable> {
        let Some(peers) = self.peers.get() else {
            return Ok(Vec::new());
        };
        Ok(peers.collect()?.into_iter().map(Arc::new).collect())
    }

    /// Runs a change on the peers, if there are any.
    fn tell_peers(
        &self,
        change: impl FnOnce(&dyn JournalPeers) -> Result<(), Unavailable>,
    ) -> Result<(), Unavailable> {
        match self.peers.get() {
            Some(peers) => change(peers.as_ref()),
            None => Ok(()),
        }
    }

    pub fn limits(&self) -> JournalLimits {
        self.limits
    }

    /// The estimated bytes the journal holds (what its byte budget counts).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn disabled() -> Journal {
        Journal::new(0)
    }

    pub fn enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    fn slot(&self, seq: u64) -> MutexGuard<'_, Option<Entry>> {
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
    pub fn record(&self, mut event: ServeEvent) {
        if self.slots.is_empty() {
            return;
        }
        event.share_with_stub();
        event.truncate_bodies(self.limits.max_body);
        let cost = event.cost();
        let seq = Self::sequence_of(&event.id);
        self.bytes.fetch_add(cost, Ordering::AcqRel);
        let evicted = self.slot(seq).replace(Entry {
            event: Arc::new(event),
            cost,
        });
        self.forget(evicted);
        if self.bytes.load(Ordering::Acquire) > self.limits.max_bytes {
            self.evict_for_budget(seq);
        }
    }

    /// Takes an entry out of the byte count (freeing it touches cold memory: done
    /// after the slot's lock).
    fn forget(&self, entry: Option<Entry>) {
        if let Some(e) = entry {
            self.bytes.fetch_sub(e.cost, Ordering::AcqRel);
        }
    }

    /// Drops the oldest entries until the byte budget holds again, never `newest`.
    fn evict_for_budget(&self, newest: u64) {
        let mut oldest = self.oldest.lock().unwrap_or_else(|p| p.into_inner());
        // Whatever the ring overwrote since is gone already.
        let ring_start = newest.saturating_sub(self.slots.len() as u64 - 1);
        *oldest = (*oldest).max(ring_start);
        while *oldest < newest && self.bytes.load(Ordering::Acquire) > self.limits.max_bytes {
            let seq = *oldest;
            let taken = {
                let mut slot = self.slot(seq);
                if slot
                    .as_ref()
                    .is_some_and(|e| Self::sequence_of(&e.event.id) == seq)
                {
                    slot.take()
                } else {
                    None
                }
            };
            self.forget(taken);
            *oldest += 1;
        }
    }

    /// This instance's kept events, in slot order.
    fn kept(&self) -> Vec<Arc<ServeEvent>> {
        self.slots
            .iter()
            .filter_map(|s| {
                s.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map(|e| e.event.clone())
            })
            .collect()
    }

    /// Newest first, as WireMock lists them. With peers (`--state`) their entries
    /// too; that fails when they cannot be asked.
    pub fn newest_first(&self) -> Result<Vec<Arc<ServeEvent>>, Unavailable> {
        let mut all = self.kept();
        if self.peers.get().is_some() {
            // Several instances' sequences: ordered by time, then by sequence.
            all.extend(self.peer_events()?);
            all.sort_by_key(|e| std::cmp::Reverse((e.logged_at, Self::sequence_of(&e.id))));
            return Ok(all);
        }
        all.sort_by_key(|e| std::cmp::Reverse(Self::sequence_of(&e.id)));
        Ok(all)
    }

    fn parse(&self, id: &str) -> Option<uuid::Uuid> {
        uuid::Uuid::parse_str(id).ok().filter(|_| self.enabled())
    }

    pub fn get(&self, id: &str) -> Result<Option<Arc<ServeEvent>>, Unavailable> {
        let Some(id) = self.parse(id) else {
            return Ok(None);
        };
        let here = self
            .slot(Self::sequence_of(&id))
            .as_ref()
            .map(|e| e.event.clone())
            .filter(|e| e.id == id);
        if here.is_none() && self.peers.get().is_some() {
            return Ok(self.peer_events()?.into_iter().find(|e| e.id == id));
        }
        Ok(here)
    }

    pub fn remove_by_id(&self, id: &str) -> Result<bool, Unavailable> {
        let Some(id) = self.parse(id) else {
            return Ok(false);
        };
        let taken = {
            let mut slot = self.slot(Self::sequence_of(&id));
            if slot.as_ref().is_some_and(|e| e.event.id == id) {
                slot.take()
            } else {
                None
            }
        };
        let found = taken.is_some();
        self.forget(taken);
        if !found {
            self.tell_peers(|p| p.remove(&[id]))?;
        }
        Ok(found)
    }

    /// Removes the events for which `pred` is true; returns them, newest first. With
    /// peers, theirs are read first, so a failure to reach them removes nothing.
    pub fn remove_where(
        &self,
        pred: impl Fn(&ServeEvent) -> bool,
    ) -> Result<Vec<Arc<ServeEvent>>, Unavailable> {
        let theirs: Vec<Arc<ServeEvent>> = self
            .peer_events()?
            .into_iter()
            .filter(|e| pred(e))
            .collect();
        let mut gone = Vec::new();
        for s in self.slots.iter() {
            let taken = {
                let mut slot = s.lock().unwrap_or_else(|p| p.into_inner());
                if slot.as_ref().is_some_and(|e| pred(&e.event)) {
                    slot.take()
                } else {
                    None
                }
            };
            if let Some(e) = taken {
                gone.push(e.event.clone());
                self.forget(Some(e));
            }
        }
        if self.peers.get().is_some() {
            let ids: Vec<uuid::Uuid> = theirs.iter().map(|e| e.id).collect();
            if !ids.is_empty() {
                self.tell_peers(|p| p.remove(&ids))?;
            }
            gone.extend(theirs);
            gone.sort_by_key(|e| std::cmp::Reverse((e.logged_at, Self::sequence_of(&e.id))));
            return Ok(gone);
        }
        gone.sort_by_key(|e| std::cmp::Reverse(Self::sequence_of(&e.id)));
        Ok(gone)
    }

    /// Empties the journal, the peers' first: when they cannot be told, nothing is
    /// cleared.
    pub fn clear(&self) -> Result<(), Unavailable> {
        self.tell_peers(|p| p.clear())?;
        self.clear_here();
        Ok(())
    }

    /// Empties this instance's journal only (a peer asked: the asker clears the rest).
    pub fn clear_here(&self) {
        for s in self.slots.iter() {
            let taken = s.lock().unwrap_or_else(|p| p.into_inner()).take();
            self.forget(taken);
        }
    }

    /// This instance's entries only, oldest first (what a peer's query is sent).
    pub fn local_entries(&self) -> Vec<Arc<ServeEvent>> {
        let mut all = self.kept();
        all.sort_by_key(|e| Self::sequence_of(&e.id));
        all
    }

    /// Drops these entries from this instance's journal only (asked by a peer).
    pub fn remove_here(&self, ids: &[uuid::Uuid]) {
        for id in ids {
            let taken = {
                let mut slot = self.slot(Self::sequence_of(id));
                if slot.as_ref().is_some_and(|e| e.event.id == *id) {
                    slot.take()
                } else {
                    None
                }
            };
            self.forget(taken);
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
    use decoy_spec::request::RequestSnapshot;

    fn event(j: &Journal, url: &str) -> ServeEvent {
        with_body(j, url, "")
    }

    fn with_body(j: &Journal, url: &str, body: impl Into<Bytes>) -> ServeEvent {
        ServeEvent {
            id: j.next_id(),
            logged_at: SystemTime::now(),
            request: KeptRequest::keep(RequestSnapshot::new("GET", url).with_body(body)),
            protocol: "HTTP/1.1",
            local_port: 8080,
            mapping: None,
            proxied: false,
            status: 404,
            response_headers: None,
            response_header_case: None,
            response_body: None,
            added_delay: Duration::ZERO,
            process_time: Duration::ZERO,
            request_body_size: None,
            response_body_size: None,
            sub_events: None,
        }
    }

    fn urls(j: &Journal) -> Vec<String> {
        j.newest_first()
            .unwrap()
            .iter()
            .map(|e| e.request.url.clone())
            .collect()
    }

    #[test]
    fn large_bodies_are_kept_truncated_with_their_size() {
        let j = Journal::with_limits(JournalLimits {
            max_body: 4,
            ..JournalLimits::default()
        });
        let mut e = with_body(&j, "/big", "0123456789");
        e.response_body = Some(Bytes::from_static(b"abcdefgh"));
        j.record(e);
        let kept = &j.newest_first().unwrap()[0];
        assert_eq!(&kept.request.body[..], b"0123");
        assert_eq!(kept.request_body_size, Some(10));
        assert_eq!(kept.response_body(), b"abcd");
        assert_eq!(kept.response_body_size, Some(8));
        let mut proxied = with_body(&j, "/proxied", "0123456789");
        proxied.proxied = true;
        j.record(proxied);
        let kept = &j.newest_first().unwrap()[0];
        assert_eq!(
            kept.request.body.len(),
            10,
            "a proxied exchange is kept whole"
        );
        assert_eq!(kept.request_body_size, None);
    }

    #[test]
    fn the_byte_budget_drops_the_oldest_entries_and_keeps_the_newest() {
        let body = "x".repeat(1000);
        let cost = {
            let j = Journal::new(10);
            with_body(&j, "/0", body.clone()).cost()
        };
        let j = Journal::with_limits(JournalLimits {
            max_entries: 100,
            max_bytes: cost * 3,
            max_body: DEFAULT_MAX_BODY,
        });
        for i in 0..10 {
            j.record(with_body(&j, &format!("/{i}"), body.clone()));
            assert!(j.bytes() <= cost * 3, "{} > {}", j.bytes(), cost * 3);
        }
        assert_eq!(urls(&j), ["/9", "/8", "/7"]);
        j.clear().unwrap();
        assert_eq!(j.bytes(), 0);
        // One entry over the whole budget is still kept, alone.
        j.record(with_body(&j, "/huge", "y".repeat(cost * 5)));
        assert_eq!(urls(&j), ["/huge"]);
    }

    #[test]
    fn keeps_only_the_newest_entries_up_to_its_capacity() {
        let j = Journal::new(3);
        for i in 0..5 {
            j.record(event(&j, &format!("/{i}")));
        }
        let urls: Vec<String> = j
            .newest_first()
            .unwrap()
            .iter()
            .map(|e| e.request.url.clone())
            .collect();
        assert_eq!(urls, ["/4", "/3", "/2"]);
    }

    #[test]
    fn an_entry_a_reader_holds_is_left_whole_when_the_ring_overwrites_its_slot() {
        let body = "x".repeat(100);
        let j = Journal::new(2);
        for i in 0..2 {
            j.record(with_body(&j, &format!("/{i}"), body.clone()));
        }
        let cost = j.bytes() / 2;
        // An admin request reading the journal holds its entries...
        let held = j.newest_first().unwrap();
        // ...while the ring overwrites their slots.
        for i in 2..4 {
            j.record(with_body(&j, &format!("/{i}"), body.clone()));
        }
        let held_urls: Vec<&str> = held.iter().map(|e| e.request.url.as_str()).collect();
        assert_eq!(held_urls, ["/1", "/0"]);
        assert_eq!(&held[0].request.body[..], body.as_bytes());
        drop(held);
        for i in 4..7 {
            j.record(with_body(&j, &format!("/{i}"), body.clone()));
            assert_eq!(j.bytes(), cost * 2, "each entry counted once");
        }
        assert_eq!(urls(&j), ["/6", "/5"]);
        assert_eq!(j.len(), 2);
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
        let id = j.newest_first().unwrap()[0].id.to_string();
        assert!(j.remove_by_id(&id).unwrap());
        assert!(!j.remove_by_id(&id).unwrap());
        let gone = j.remove_where(|e| e.request.url == "/a").unwrap();
        assert_eq!(gone.len(), 1);
        assert!(j.is_empty());
    }
}
