//! A fine latency histogram for percentiles (p50, p95, p99) over short windows.
//!
//! The Prometheus histogram in [`metrics`](crate::metrics) has fourteen wide buckets,
//! right for a scraper but too coarse to say "p99 went from 80 µs to 120 µs". This one
//! has logarithmic buckets with eight steps per doubling (each bucket is at most 12.5%
//! wide), from 64 ns up to about a minute: recording is one relaxed atomic increment,
//! and the live dashboard computes percentiles from the difference of two snapshots
//! taken a second apart, so nothing per request depends on who is watching.

use std::sync::atomic::{AtomicU64, Ordering};

/// Values are counted in units of 64 ns.
const UNIT_SHIFT: u32 = 6;
/// Eight sub-buckets per doubling.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Enough buckets for 2^30 units (about 68 s); slower requests share the last one.
pub const BUCKETS: usize = (30 - SUB_BITS as usize + 1) * SUB + SUB;

/// The bucket of a duration in nanoseconds.
pub fn bucket(nanos: u64) -> usize {
    let v = nanos >> UNIT_SHIFT;
    if v < SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    (((e - SUB_BITS + 1) as usize) * SUB + sub).min(BUCKETS - 1)
}

/// The smallest duration (in nanoseconds) that falls in bucket `i`.
pub fn lower_nanos(i: usize) -> u64 {
    let units = if i < SUB {
        i as u64
    } else {
        let e = (i / SUB) as u32 + SUB_BITS - 1;
        ((SUB + i % SUB) as u64) << (e - SUB_BITS)
    };
    units << UNIT_SHIFT
}

/// Counts per bucket; shared by the threads that record.
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Histogram {
    pub fn record(&self, nanos: u64) {
        self.counts[bucket(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds this histogram's counts to `out` (`BUCKETS` long).
    pub fn add_to(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.counts.iter()) {
            *o += c.load(Ordering::Relaxed);
        }
    }
}

/// The `q` quantile (0 < q ≤ 1) of the counts, in nanoseconds: the middle of the
/// bucket holding it. `None` when there are no counts.
pub fn quantile(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let lo = lower_nanos(i);
            let hi = if i + 1 < BUCKETS {
                lower_nanos(i + 1)
            } else {
                lo
            };
            return Some(lo + (hi - lo) / 2);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_each_holds_its_own_lower_bound() {
        for i in 0..BUCKETS {
            assert_eq!(bucket(lower_nanos(i)), i, "bucket {i}");
            if i + 1 < BUCKETS {
                assert!(lower_nanos(i + 1) > lower_nanos(i));
                assert_eq!(bucket(lower_nanos(i + 1) - 1), i, "end of bucket {i}");
            }
        }
    }

    #[test]
    fn a_bucket_is_at_most_an_eighth_of_its_values_wide() {
        for i in SUB..BUCKETS - 1 {
            let (lo, hi) = (lower_nanos(i), lower_nanos(i + 1));
            assert!((hi - lo) * 8 <= lo, "bucket {i}: {lo}..{hi}");
        }
    }

    #[test]
    fn quantiles_come_from_the_bucket_that_holds_the_rank() {
        let h = Histogram::default();
        for _ in 0..90 {
            h.record(10_000);
        }
        for _ in 0..10 {
            h.record(1_000_000);
        }
        let mut counts = vec![0; BUCKETS];
        h.add_to(&mut counts);
        let p50 = quantile(&counts, 0.5).unwrap();
        let p99 = quantile(&counts, 0.99).unwrap();
        assert!((9_000..=11_300).contains(&p50), "{p50}");
        assert!((900_000..=1_130_000).contains(&p99), "{p99}");
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
    }

    #[test]
    fn very_slow_requests_share_the_last_bucket() {
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(3_600_000_000_000), BUCKETS - 1);
    }
}
