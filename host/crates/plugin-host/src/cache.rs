//! The `cache` host interface: immutable values shared by every instance of one
//! loaded plugin.
//!
//! It exists so that work every instance would otherwise repeat is done once per
//! plugin: the bundled `response-template` stores each template it compiles here,
//! and an instance that needs a template another one compiled reads it instead
//! (with `isolation: per-request` every call is a fresh instance, which would
//! otherwise compile every template it renders). The host may put values too
//! ([`Plugin::cache_put`](super::Plugin::cache_put)): decoy-core puts each template
//! it compiled when a stub loaded, so that no instance compiles it at all.
//!
//! A [`ValueCache`] belongs to one version of a plugin's code ([`Code`](super::Code)):
//! another plugin never sees it, and a reload (new `.wasm` or settings) starts an
//! empty one, so a value is only read by the build that wrote it. It is bounded in
//! bytes (keys and values together) and drops its oldest entries first; a value
//! that cannot fit at all is not kept. Since a value is only a copy of something the
//! plugin can make again, dropping one costs time, never a wrong answer.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// What one plugin's cache holds at most, keys and values together.
pub(crate) const CACHE_MAX_BYTES: usize = 32 << 20;

/// One plugin's cache (see the module's documentation).
#[derive(Debug)]
pub(crate) struct ValueCache {
    max_bytes: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Values are shared so that a `get` copies one out after the lock is released.
    values: HashMap<String, Arc<[u8]>>,
    /// Keys in the order they were stored: the front is evicted first.
    order: VecDeque<String>,
    /// The bytes of every key and value held.
    bytes: usize,
}

impl ValueCache {
    pub(crate) fn new(max_bytes: usize) -> ValueCache {
        ValueCache {
            max_bytes,
            inner: Mutex::new(Entries::default()),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<Vec<u8>> {
        let value = super::lock(&self.inner).values.get(key).cloned();
        value.map(|v| v.to_vec())
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        super::lock(&self.inner).values.contains_key(key)
    }

    /// Stores `value` under `key` unless the key is there already (a key names one
    /// value) or the entry is larger than the whole cache; evicts the oldest entries
    /// until it fits.
    pub(crate) fn put(&self, key: String, value: Vec<u8>) {
        let size = key.len() + value.len();
        if size > self.max_bytes {
            return;
        }
        let value: Arc<[u8]> = value.into();
        let mut e = super::lock(&self.inner);
        if e.values.contains_key(&key) {
            return;
        }
        while e.bytes + size > self.max_bytes {
            let Some(old) = e.order.pop_front() else {
                break;
            };
            if let Some(v) = e.values.remove(&old) {
                e.bytes -= old.len() + v.len();
            }
        }
        e.bytes += size;
        e.order.push_back(key.clone());
        e.values.insert(key, value);
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        super::lock(&self.inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_put_is_read_back_and_a_key_keeps_its_first_value() {
        let c = ValueCache::new(1024);
        assert_eq!(c.get("k"), None);
        c.put("k".into(), b"one".to_vec());
        assert_eq!(c.get("k").as_deref(), Some(&b"one"[..]));
        c.put("k".into(), b"two".to_vec());
        assert_eq!(c.get("k").as_deref(), Some(&b"one"[..]));
        assert_eq!(c.bytes(), "k".len() + "one".len());
    }

    #[test]
    fn the_oldest_entries_are_dropped_first_to_stay_within_the_bound() {
        // Each entry is 1 + 9 = 10 bytes; 35 bytes hold three.
        let c = ValueCache::new(35);
        for k in ["a", "b", "c"] {
            c.put(k.into(), vec![0; 9]);
        }
        assert_eq!(c.bytes(), 30);
        // A read does not make an entry younger: the order is the order stored.
        assert!(c.get("a").is_some());
        c.put("d".into(), vec![0; 9]);
        assert_eq!(c.get("a"), None, "the oldest goes first");
        for k in ["b", "c", "d"] {
            assert!(c.get(k).is_some(), "{k} is kept");
        }
        // A bigger entry makes room for itself by dropping as many as it needs.
        c.put("e".into(), vec![0; 24]);
        assert_eq!(c.get("b"), None);
        assert_eq!(c.get("c"), None);
        assert!(c.get("d").is_some());
        assert!(c.get("e").is_some());
        assert_eq!(c.bytes(), 35);
    }

    #[test]
    fn a_value_larger_than_the_whole_cache_is_not_kept_and_evicts_nothing() {
        let c = ValueCache::new(35);
        c.put("a".into(), vec![0; 9]);
        c.put("big".into(), vec![0; 33]);
        assert_eq!(c.get("big"), None);
        assert!(c.get("a").is_some());
        assert_eq!(c.bytes(), 10);
    }
}
