//! Reconnecting without flooding the broker or the log.
//!
//! - [`Backoff`]: the pause before the next attempt grows from 0.1 s, doubling, to
//!   5 s, and each pause is drawn between half and all of its step, so hundreds of
//!   receivers that lost their broker together do not all come back at one instant.
//! - [`Trouble`]: what keeps failing on one connection (receiving from a queue,
//!   sending) is logged once when it starts, then at most once every 30 s with the
//!   number of attempts that failed meanwhile and the last error, and once (INFO) when
//!   it works again. Hundreds of receivers of a queue share one line. A queue that does
//!   not exist is said once, with how to create it, and not again while it stays
//!   missing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::transport::BrokerError;

/// The first pause after a failure, and the longest.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often a failure that goes on is summarised.
pub const SUMMARY: Duration = Duration::from_secs(30);

/// The pauses between attempts: doubling steps, each with jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    step: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            step: BACKOFF_START,
        }
    }
}

impl Backoff {
    /// Back to the shortest pause (after a success).
    pub fn reset(&mut self) {
        self.step = BACKOFF_START;
    }

    /// The pause before the next attempt: between half and all of the current step;
    /// the step then doubles, up to [`BACKOFF_MAX`].
    pub fn next_pause(&mut self) -> Duration {
        let pause = self.step.mul_f64(rand::random_range(0.5..=1.0));
        self.step = (self.step * 2).min(BACKOFF_MAX);
        pause
    }
}

/// Failures going on for one broker connection, by what failed.
#[derive(Debug)]
pub struct Trouble {
    /// `amqp://guest@127.0.0.1:5672/%2f (connection "rabbit")`, for every line.
    place: String,
    /// `connection "rabbit"`.
    connection: String,
    ongoing: Mutex<HashMap<String, Ongoing>>,
}

#[derive(Debug)]
struct Ongoing {
    since: Instant,
    said_at: Instant,
    failures: u64,
    /// Failures since the last line.
    unsaid: u64,
    last: String,
    /// Said once, never summarised (a missing queue).
    quiet: bool,
}

impl Trouble {
    /// For the broker `describe`d so, configured as connection `id`.
    pub fn new(describe: &str, id: &str) -> Trouble {
        Trouble {
            place: format!("{describe} (connection {id:?})"),
            connection: format!("connection {id:?}"),
            ongoing: Mutex::default(),
        }
    }

    /// `connection "rabbit"`, for messages.
    pub fn connection(&self) -> &str {
        &self.connection
    }

    fn ongoing(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ongoing>> {
        self.ongoing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `what` (`receiving from ORDERS`, `sending`) failed with `error`. The first
    /// failure is logged; later ones are counted and summarised every [`SUMMARY`].
    /// `calm` is the line to say instead, once, for a failure that is a state of the
    /// broker rather than an error (a queue not created yet): it is not repeated.
    pub fn failed(&self, what: &str, error: &BrokerError, calm: Option<String>) {
        let quiet = calm.is_some();
        let first = calm.unwrap_or_else(|| {
            format!(
                "{what} on {} failed: {error}; retrying with back-off ({BACKOFF_START:?} \
                 to {BACKOFF_MAX:?}); while it goes on, one line every {SUMMARY:?} counts \
                 the attempts",
                self.place
            )
        });
        self.note(what, error, first, quiet);
    }

    /// A message was given up for good with `error` (a reply no broker could take
    /// as it is): the first is logged, later ones counted and summarised every
    /// [`SUMMARY`], as for [`Trouble::failed`].
    pub fn dropped(&self, what: &str, error: &BrokerError) {
        let first = format!(
            "{what} on {}: {error}; sending it again could not succeed, so it is dropped and \
             its request acknowledged; while it goes on, one line every {SUMMARY:?} counts them",
            self.place
        );
        self.note(what, error, first, false);
    }

    /// Something that goes wrong now and then and is not retried by decoy itself (an
    /// acknowledgement lost with its connection): `first` is said, later ones are
    /// counted and summarised every [`SUMMARY`].
    pub fn happened(&self, what: &str, error: &BrokerError, first: String) {
        self.note(what, error, first, false);
    }

    /// Says `first` for a new failure of `what`, or counts (and now and then
    /// summarises) one going on; `quiet`: never summarised.
    fn note(&self, what: &str, error: &BrokerError, first: String, quiet: bool) {
        let now = Instant::now();
        let mut ongoing = self.ongoing();
        let Some(o) = ongoing.get_mut(what) else {
            tracing::warn!("{first}");
            ongoing.insert(
                what.to_owned(),
                Ongoing {
                    since: now,
                    said_at: now,
                    failures: 1,
                    unsaid: 0,
                    last: error.to_string(),
                    quiet,
                },
            );
            return;
        };
        o.failures += 1;
        o.unsaid += 1;
        o.last = error.to_string();
        if !o.quiet && now.duration_since(o.said_at) >= SUMMARY {
            tracing::warn!(
                "{what} on {} still fails: {} failed attempts in the last {:?} ({} since it \
                 started {:?} ago), the last: {}",
                self.place,
                o.unsaid,
                round(now.duration_since(o.said_at)),
                o.failures,
                round(now.duration_since(o.since)),
                o.last
            );
            o.said_at = now;
            o.unsaid = 0;
        }
    }

    /// `what` works (again): says so when it had failed.
    pub fn ok(&self, what: &str) {
        let Some(o) = self.ongoing().remove(what) else {
            return;
        };
        tracing::info!(
            "{what} on {} works again, after {} failed attempts in {:?}",
            self.place,
            o.failures,
            round(o.since.elapsed())
        );
    }

    /// Failed attempts of `what` so far (0 when it works), for tests.
    pub fn failures(&self, what: &str) -> u64 {
        self.ongoing().get(what).map_or(0, |o| o.failures)
    }
}

/// Whole seconds (or milliseconds under one), for log lines.
fn round(d: Duration) -> Duration {
    if d < Duration::from_secs(1) {
        Duration::from_millis(d.as_millis() as u64)
    } else {
        Duration::from_secs(d.as_secs())
    }
}

/// Waits `d`, or less when `stop` turns true; says whether it did (time to stop).
pub async fn sleep_or_stop(d: Duration, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_maximum_and_each_has_jitter_below_its_step() {
        let mut b = Backoff::default();
        let mut step = BACKOFF_START;
        for _ in 0..20 {
            let pause = b.next_pause();
            assert!(
                pause >= step / 2 && pause <= step,
                "{pause:?} for a step of {step:?}"
            );
            step = (step * 2).min(BACKOFF_MAX);
        }
        b.reset();
        assert!(b.next_pause() <= BACKOFF_START);
    }

    #[test]
    fn repeated_failures_are_counted_and_forgotten_once_it_works() {
        let t = Trouble::new("test broker", "c");
        let e = BrokerError::new("refused");
        for _ in 0..500 {
            t.failed("sending", &e, None);
        }
        assert_eq!(t.failures("sending"), 500);
        t.ok("sending");
        assert_eq!(t.failures("sending"), 0);
        t.failed("sending", &e, None);
        assert_eq!(t.failures("sending"), 1);
    }
}
