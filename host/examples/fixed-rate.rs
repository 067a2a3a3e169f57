//! An open-loop HTTP/1.1 load generator: requests at a fixed rate, latency measured
//! without coordinated omission. Used by `bench/tail.py`; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example fixed-rate -- \
//!     --url http://127.0.0.1:8080/static --rate 20000 --connections 32 --seconds 10 --warmup 2
//! ```
//!
//! wrk sends a connection's next request when the last answer arrives, so while the
//! server stalls it sends nothing and the stall is counted once, not once for every
//! request that should have been sent meanwhile (coordinated omission): its
//! percentiles flatter a server with pauses. Here, as in wrk2, each of the
//! `--connections` keep-alive connections has a schedule (the rate spread evenly,
//! connection k sending at `k / rate` plus multiples of `connections / rate`), and a
//! request that could not be sent on time because its connection was still waiting
//! for the previous answer is measured from when it should have been sent. A request
//! sent late only because this driver's timer woke late (tokio's timers tick in
//! milliseconds, and the machine may be busy) while its connection was idle is
//! measured from when it was really sent: that lateness is not the server's.
//!
//! Prints one JSON line: the rate asked and achieved, requests, errors (a status
//! other than 2xx, a broken connection: reconnected), unsent (requests a server too
//! slow for the rate was still behind on 5 s after the end: counted with the wait
//! until then, a lower bound), and latency percentiles in
//! milliseconds (p50, p90, p99, p99.9, p99.99, max) of the requests sent after the
//! warm-up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;

use common::{Flags, JsonLine, Latencies};

#[derive(Debug, Clone)]
struct Args {
    host: String,
    port: u16,
    path: String,
    rate: f64,
    connections: usize,
    seconds: f64,
    warmup: f64,
    threads: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: fixed-rate --url http://HOST:PORT/PATH --rate REQ_PER_S [--connections 32] \
         [--seconds 10] [--warmup 2] [--threads 1]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut f = Flags::new(std::env::args().skip(1), &[]);
    let url = f.string("--url", "");
    let mut args = Args {
        host: String::new(),
        port: 80,
        path: "/".into(),
        rate: f.value("--rate", 0.0),
        connections: f.value("--connections", 32),
        seconds: f.value("--seconds", 10.0),
        warmup: f.value("--warmup", 2.0),
        threads: f.value("--threads", 1),
    };
    f.finish();
    let rest = url.strip_prefix("http://").unwrap_or_else(|| usage());
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
    args.host = host.to_owned();
    args.port = port.parse().unwrap_or_else(|_| usage());
    args.path = path.to_owned();
    if args.host.is_empty() || args.rate <= 0.0 || args.connections == 0 {
        usage()
    }
    args
}

fn main() {
    let args = parse_args();
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    }
    .expect("a runtime");
    runtime.block_on(run(args));
}

/// What every connection adds to.
#[derive(Debug, Default)]
struct Totals {
    errors: AtomicU64,
    /// Requests answered (after the warm-up), for the achieved rate.
    answered: AtomicU64,
    /// Requests never sent: the server was too far behind when the run ended.
    unsent: AtomicU64,
}

async fn run(args: Args) {
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: decoy-fixed-rate\r\n\r\n",
        args.path, args.host, args.port
    );
    let request: Arc<[u8]> = Arc::from(request.into_bytes());
    let addr = format!("{}:{}", args.host, args.port);
    let period = Duration::from_secs_f64(args.connections as f64 / args.rate);
    let totals = Arc::new(Totals::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Connections are opened before the clock starts.
    let mut streams = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        streams.push(connect(&addr).await.expect("connecting to the server"));
    }
    let t0 = Instant::now() + Duration::from_millis(50);
    let measure_from = t0 + Duration::from_secs_f64(args.warmup);
    let end = measure_from + Duration::from_secs_f64(args.seconds);
    let mut tasks = Vec::with_capacity(args.connections);
    for (k, stream) in streams.into_iter().enumerate() {
        let first = t0 + Duration::from_secs_f64(k as f64 / args.rate);
        tasks.push(tokio::spawn(connection(
            stream,
            addr.clone(),
            request.clone(),
            Schedule {
                first,
                period,
                measure_from,
                end,
            },
            totals.clone(),
            stop.clone(),
        )));
    }
    let mut latencies: Vec<u64> = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("a connection task"));
    }
    stop.store(true, Ordering::Relaxed);
    let latencies = Latencies::from_micros(latencies);
    let pct = |p: f64| latencies.ms(p).unwrap_or(f64::NAN);
    let answered = totals.answered.load(Ordering::Relaxed);
    JsonLine::new()
        .field("rate", args.rate)
        .fixed("achieved", answered as f64 / args.seconds, 1)
        .field("connections", args.connections)
        .field("requests", latencies.len())
        .field("errors", totals.errors.load(Ordering::Relaxed))
        .field("unsent", totals.unsent.load(Ordering::Relaxed))
        .fixed("p50_ms", pct(0.50), 3)
        .fixed("p90_ms", pct(0.90), 3)
        .fixed("p99_ms", pct(0.99), 3)
        .fixed("p999_ms", pct(0.999), 3)
        .fixed("p9999_ms", pct(0.9999), 3)
        .fixed("max_ms", latencies.max_ms().unwrap_or(f64::NAN), 3)
        .print();
}

async fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

#[derive(Debug, Clone, Copy)]
struct Schedule {
    first: Instant,
    period: Duration,
    measure_from: Instant,
    end: Instant,
}

/// One connection's requests on its schedule; returns the latencies (µs) of those
/// meant to be sent after the warm-up.
async fn connection(
    mut stream: TcpStream,
    addr: String,
    request: Arc<[u8]>,
    s: Schedule,
    totals: Arc<Totals>,
    stop: Arc<AtomicBool>,
) -> Vec<u64> {
    let mut latencies = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    let mut intended = s.first;
    // When the previous answer arrived.
    let mut free_at = Instant::now();
    // A server slower than the rate falls ever further behind its schedule: past
    // this, the requests not sent yet are counted as waiting until then (a lower
    // bound of their latency), so a saturated server cannot make a run last for ever.
    let give_up = s.end + Duration::from_secs(5);
    while intended < s.end && !stop.load(Ordering::Relaxed) {
        if Instant::now() >= give_up {
            let now = Instant::now();
            while intended < s.end {
                if intended >= s.measure_from {
                    latencies.push(now.duration_since(intended).as_micros() as u64);
                    totals.unsent.fetch_add(1, Ordering::Relaxed);
                }
                intended += s.period;
            }
            break;
        }
        tokio::time::sleep_until(intended).await;
        let sent = Instant::now();
        // Late because the connection was busy: the server's doing, counted from
        // the intended time. Late because the timer was: counted from the send.
        let start = if free_at > intended { intended } else { sent };
        let ok = exchange(&mut stream, &request, &mut buf).await;
        let done = Instant::now();
        free_at = done;
        match ok {
            Ok(true) => {}
            Ok(false) => {
                totals.errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                totals.errors.fetch_add(1, Ordering::Relaxed);
                match connect(&addr).await {
                    Ok(s) => stream = s,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
        if intended >= s.measure_from {
            latencies.push(done.duration_since(start).as_micros() as u64);
            totals.answered.fetch_add(1, Ordering::Relaxed);
        }
        intended += s.period;
    }
    latencies
}

/// Sends one request and reads its answer whole; `Ok(false)` for a status other
/// than 2xx.
async fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    stream.write_all(request).await?;
    buf.clear();
    let mut chunk = [0u8; 8192];
    // The head.
    let (status, head_len, framing) = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let mut framing = Framing::Length(0);
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        let n = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse().ok())
                            .ok_or(std::io::ErrorKind::InvalidData)?;
                        framing = Framing::Length(n);
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding")
                        && h.value.eq_ignore_ascii_case(b"chunked")
                    {
                        framing = Framing::Chunked;
                    }
                }
                break (resp.code.unwrap_or(0), len, framing);
            }
            Ok(httparse::Status::Partial) => continue,
            Err(_) => return Err(std::io::ErrorKind::InvalidData.into()),
        }
    };
    buf.drain(..head_len);
    match framing {
        Framing::Length(n) => {
            while buf.len() < n {
                let got = stream.read(&mut chunk).await?;
                if got == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buf.extend_from_slice(&chunk[..got]);
            }
        }
        Framing::Chunked => {
            // Enough for the short answers benchmarked: read until the last chunk.
            while !buf.ends_with(b"0\r\n\r\n") {
                let got = stream.read(&mut chunk).await?;
                if got == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buf.extend_from_slice(&chunk[..got]);
            }
        }
    }
    Ok((200..300).contains(&status))
}

#[derive(Debug, Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
}
