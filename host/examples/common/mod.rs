//! What the load drivers in `examples/` share: their command lines, the clock of a
//! run (a warm-up, then the measured seconds), latency percentiles, the one JSON line
//! each prints for `bench/*.py`, and the quote request and reply the MQ drivers and
//! their bare responders exchange.
//!
//! A module the drivers include (`mod common;`), not a library: it is benchmark
//! code, built only with `--features bench`, and a directory without a `main.rs` is
//! not an example of its own. Each driver uses a part of it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::fmt::{Display, Write as _};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A driver's `--name value` flags (and `--name` switches, which take no value), read
/// one by one into its settings; [`Flags::finish`] refuses any the driver did not
/// read. A driver takes every flag whatever its command, so a script can pass one
/// set to all of them.
#[derive(Debug)]
pub struct Flags {
    given: Vec<(String, Option<String>)>,
}

impl Flags {
    /// The process's command line: its first argument (the command: `drive`,
    /// `respond`, ...) and the flags after it.
    pub fn command_line(switches: &[&str]) -> (String, Flags) {
        let mut args = std::env::args().skip(1);
        let command = args.next().unwrap_or_default();
        (command, Flags::new(args, switches))
    }

    /// `args`, all flags: each `--name value`, or a name of `switches` alone.
    pub fn new(args: impl IntoIterator<Item = String>, switches: &[&str]) -> Flags {
        let mut args = args.into_iter();
        let mut given = Vec::new();
        while let Some(flag) = args.next() {
            let value = if switches.contains(&flag.as_str()) {
                None
            } else {
                Some(
                    args.next()
                        .unwrap_or_else(|| panic!("{flag} needs a value")),
                )
            };
            given.push((flag, value));
        }
        Flags { given }
    }

    /// The last value given to `name`, taken out (so that `finish` knows it was read).
    fn take(&mut self, name: &str) -> Option<String> {
        let mut value = None;
        self.given.retain(|(flag, v)| {
            if flag == name {
                value = v.clone();
                false
            } else {
                true
            }
        });
        value
    }

    /// `name`'s value parsed, or `default` when it was not given.
    pub fn value<T: FromStr>(&mut self, name: &str, default: T) -> T
    where
        T::Err: Display,
    {
        self.take(name).map_or(default, |v| {
            v.parse().unwrap_or_else(|e| panic!("{name} {v:?}: {e}"))
        })
    }

    /// `name`'s value, or `default` when it was not given.
    pub fn string(&mut self, name: &str, default: &str) -> String {
        self.take(name).unwrap_or_else(|| default.to_owned())
    }

    /// Whether the switch `name` was given.
    pub fn switch(&mut self, name: &str) -> bool {
        let given = self.given.iter().any(|(flag, _)| flag == name);
        self.given.retain(|(flag, _)| flag != name);
        given
    }

    /// Panics naming the first flag that was given and never read: a typo would
    /// otherwise measure something else than asked, silently.
    pub fn finish(self) {
        if let Some((flag, _)) = self.given.first() {
            panic!("unknown flag {flag}");
        }
    }
}

/// A run's clock: from now, `warmup`, then the measured `seconds`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub measure_from: Instant,
    pub end: Instant,
}

impl Window {
    pub fn new(warmup: Duration, seconds: Duration) -> Window {
        let start = Instant::now();
        Window {
            start,
            measure_from: start + warmup,
            end: start + warmup + seconds,
        }
    }

    /// Whether what happened at `t` is measured: after the warm-up, before the end.
    pub fn counts(&self, t: Instant) -> bool {
        t >= self.measure_from && t < self.end
    }

    pub fn over(&self) -> bool {
        Instant::now() >= self.end
    }
}

/// Round trips, sorted once for their percentiles.
#[derive(Debug)]
pub struct Latencies(Vec<Duration>);

impl Latencies {
    pub fn new(mut samples: Vec<Duration>) -> Latencies {
        samples.sort_unstable();
        Latencies(samples)
    }

    pub fn from_micros(samples: impl IntoIterator<Item = u64>) -> Latencies {
        Latencies::new(samples.into_iter().map(Duration::from_micros).collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `p` quantile (`0 < p <= 1`) in milliseconds, by the nearest-rank rule: the
    /// smallest sample that at least a fraction `p` of them do not exceed. `None`
    /// with no samples (each driver prints that as it always did: 0 or NaN).
    pub fn ms(&self, p: f64) -> Option<f64> {
        let n = self.0.len();
        if n == 0 {
            return None;
        }
        let rank = (p * n as f64).ceil() as usize;
        Some(millis(self.0[rank.clamp(1, n) - 1]))
    }

    pub fn max_ms(&self) -> Option<f64> {
        self.0.last().copied().map(millis)
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The one JSON object a driver prints on one line (the last line of its output is
/// what `bench/*.py` read), its fields in the order they are added.
#[derive(Debug, Default)]
pub struct JsonLine(String);

impl JsonLine {
    pub fn new() -> JsonLine {
        JsonLine::default()
    }

    /// A field as Rust displays `value`: an integer, or a float in full (a float
    /// that is not a number is `NaN`, which Python's `json` reads).
    pub fn field(mut self, key: &str, value: impl Display) -> JsonLine {
        let sep = if self.0.is_empty() { "" } else { ", " };
        write!(self.0, "{sep}\"{key}\": {value}").expect("writing to a String");
        self
    }

    /// A float with `decimals` decimals.
    pub fn fixed(self, key: &str, value: f64, decimals: usize) -> JsonLine {
        self.field(key, format_args!("{value:.decimals$}"))
    }

    pub fn print(self) {
        println!("{{{}}}", self.0);
    }
}

/// A closed-loop MQ driver's count, shared by its publishers and the task that takes
/// the replies: the requests in flight by id, with when each was sent, and while
/// counting (after the warm-up, for the measured seconds) the right replies with
/// their round trips. A wrong reply, or one to no request in flight, counts always.
#[derive(Debug, Default)]
pub struct Tally {
    in_flight: Mutex<HashMap<u64, Instant>>,
    counting: AtomicBool,
    done: AtomicBool,
    replies: AtomicU64,
    wrong: AtomicU64,
    /// Round trips in µs (4 bytes each: a fast run keeps millions).
    latencies: Mutex<Vec<u32>>,
}

impl Tally {
    /// Request `id` is being sent now.
    pub fn sent(&self, id: u64) {
        self.in_flight.lock().unwrap().insert(id, Instant::now());
    }

    /// Request `id` is answered: when it was sent, if it was in flight.
    pub fn take(&self, id: u64) -> Option<Instant> {
        self.in_flight.lock().unwrap().remove(&id)
    }

    /// A right reply to a request sent at `sent`.
    pub fn right(&self, sent: Instant) {
        if self.counting.load(Ordering::Relaxed) {
            self.replies.fetch_add(1, Ordering::Relaxed);
            self.latencies
                .lock()
                .unwrap()
                .push(sent.elapsed().as_micros() as u32);
        }
    }

    pub fn wrong(&self) {
        self.wrong.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the publishers should stop.
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Lets `warmup` pass, counts for `seconds`, then tells the publishers to stop;
    /// the seconds counted.
    pub async fn measure(&self, warmup: u64, seconds: u64) -> f64 {
        tokio::time::sleep(Duration::from_secs(warmup)).await;
        self.counting.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        self.counting.store(false, Ordering::Relaxed);
        let elapsed = t0.elapsed().as_secs_f64();
        self.done.store(true, Ordering::Relaxed);
        elapsed
    }

    /// The line `bench/mq.py` and `bench/mq_amqp1.py` read: transactions a second,
    /// replies, wrong replies, p50/p95/p99 round trips (0 with none), the seconds
    /// counted and the seconds since `start`.
    pub fn report(&self, elapsed: f64, start: Instant) -> JsonLine {
        let n = self.replies.load(Ordering::Relaxed);
        let l = Latencies::from_micros(self.latencies.lock().unwrap().iter().map(|&us| us.into()));
        let pct = |p: f64| l.ms(p).unwrap_or(0.0);
        JsonLine::new()
            .fixed("tps", n as f64 / elapsed, 1)
            .field("replies", n)
            .field("wrong", self.wrong.load(Ordering::Relaxed))
            .fixed("p50_ms", pct(0.50), 2)
            .fixed("p95_ms", pct(0.95), 2)
            .fixed("p99_ms", pct(0.99), 2)
            .fixed("elapsed_s", elapsed, 2)
            .fixed("since_start_s", start.elapsed().as_secs_f64(), 1)
    }
}

/// The reply of every bare responder (and of decoy's mappings in the MQ benchmarks).
pub const QUOTE_REPLY: &str =
    "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>";

/// A request of `size` bytes asking for a quote, with two values an XPath can take.
pub fn quote_request(i: u64, size: usize) -> String {
    let head = format!(
        "<quoteRequest><id>{i}</id><symbol>ACME</symbol><account>ACC-{:06}</account><pad>",
        i % 1_000_000
    );
    let tail = "</pad></quoteRequest>";
    let pad = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

/// The `i`-th request queue of the MQ benchmarks' queues named `prefix`.
pub fn request_queue(prefix: &str, i: usize) -> String {
    format!("{prefix}.req.{i:02}")
}

/// Declares (`create`) or deletes `queues` over AMQP 0-9-1 at `url` (a deletion
/// of a queue that is not there is no error).
pub async fn declare_queues(url: &str, queues: impl IntoIterator<Item = String>, create: bool) {
    use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
    use lapin::types::FieldTable;
    let conn = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
        .await
        .expect("RabbitMQ is reachable");
    let ch = conn.create_channel().await.unwrap();
    for q in queues {
        if create {
            ch.queue_declare(
                q.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        } else {
            let _ = ch
                .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
    }
}
