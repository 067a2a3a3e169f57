//! A guest's stdout and stderr, captured in memory and forwarded to decoy's log, and
//! WASI's "blocking" stream and poll functions made safe to call on an async worker.
//!
//! wasmtime-wasi's synchronous bindings run every blocking WASI function
//! (`blocking-write-and-flush`, dropping a stream, `poll`...) through
//! `Handle::block_on`, which panics on a thread that is running async tasks, as
//! decoy's request workers are. Here those functions are re-linked: the future is
//! polled once, and since the streams a plugin has (the capture below, an empty
//! stdin) are always ready, that is where it ends. Only a future that is really
//! pending (a guest sleeping on a clock) waits, and it waits where waiting is
//! allowed: under `block_in_place` on a multi-threaded runtime, on wasmtime-wasi's
//! own runtime outside any, and never on a current-thread runtime (the call fails
//! with the reason instead). Nothing panics and no call is made twice.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::{DynPollable, OutputStream, StreamError, StreamResult};
use wasmtime_wasi_io::bindings::wasi::io::poll as async_poll;
use wasmtime_wasi_io::bindings::wasi::io::streams as async_streams;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

/// Bytes kept per stream between two drains (one call); more is dropped and counted.
const CAPTURE_LIMIT: usize = 64 << 10;
/// Lines of stderr kept for a failure's reason, and their total length.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 4 << 10;
/// Output lines forwarded to the log per plugin: a burst of this many, refilled at
/// this many per second; the rest are counted and reported as suppressed.
const LINES_BURST: f64 = 200.0;
const LINES_PER_SECOND: f64 = 100.0;

#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    dropped: usize,
}

/// One captured stream of one instance. Writing never blocks and never fails.
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Buffer>>);

impl Capture {
    fn lock(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, b: &[u8]) {
        let mut buf = self.lock();
        let room = CAPTURE_LIMIT.saturating_sub(buf.bytes.len());
        let n = b.len().min(room);
        buf.bytes.extend_from_slice(&b[..n]);
        buf.dropped += b.len() - n;
    }

    /// Takes the complete lines written so far (everything with `all`), and how many
    /// bytes were dropped for lack of room.
    fn take(&self, all: bool) -> Option<(Vec<u8>, usize)> {
        let mut buf = self.lock();
        if buf.bytes.is_empty() && buf.dropped == 0 {
            return None;
        }
        let end = if all {
            buf.bytes.len()
        } else {
            match buf.bytes.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                // A partial line is kept for the next call, unless it fills the buffer.
                None if buf.bytes.len() < CAPTURE_LIMIT => 0,
                None => buf.bytes.len(),
            }
        };
        let lines: Vec<u8> = buf.bytes.drain(..end).collect();
        let dropped = std::mem::take(&mut buf.dropped);
        Some((lines, dropped))
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(CAPTURE_LIMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// An instance's stdout and stderr, and the last stderr lines (for a failure's reason).
#[derive(Debug, Default)]
pub(crate) struct Stdio {
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    tail: VecDeque<String>,
}

/// Per plugin: how many output lines may still be logged now.
#[derive(Debug)]
pub(crate) struct LineBudget {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

impl Default for LineBudget {
    fn default() -> Self {
        LineBudget {
            tokens: LINES_BURST,
            at: Instant::now(),
            suppressed: 0,
        }
    }
}

impl Stdio {
    /// Forwards what the guest wrote to the log, line by line, tagged with the plugin
    /// and the mapping; `all` also takes an unfinished last line (the instance ends).
    pub(crate) fn forward(
        &mut self,
        plugin: &str,
        mapping: &str,
        budget: &Mutex<LineBudget>,
        all: bool,
    ) {
        for (stream, capture) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let Some((bytes, dropped)) = capture.take(all) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let mut budget = budget.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            budget.tokens = (budget.tokens
                + now.duration_since(budget.at).as_secs_f64() * LINES_PER_SECOND)
                .min(LINES_BURST);
            budget.at = now;
            if budget.suppressed > 0 && budget.tokens >= 1.0 {
                tracing::warn!(target: "plugin", plugin, "{} lines of plugin output were not logged (over {LINES_PER_SECOND} lines a second)", budget.suppressed);
                budget.suppressed = 0;
            }
            for line in text.lines() {
                let line = line.trim_end_matches('\r');
                if stream == "stderr" {
                    if self.tail.len() == TAIL_LINES {
                        self.tail.pop_front();
                    }
                    self.tail.push_back(line.to_owned());
                }
                if budget.tokens >= 1.0 {
                    budget.tokens -= 1.0;
                    tracing::info!(target: "plugin", plugin, mapping, stream, "{line}");
                } else {
                    budget.suppressed += 1;
                }
            }
            if dropped > 0 {
                tracing::warn!(target: "plugin", plugin, mapping, stream, "{dropped} bytes of output were dropped (more than {CAPTURE_LIMIT} in one call)");
            }
        }
    }

    /// The last lines the guest wrote to stderr, oldest first, at most `TAIL_BYTES`.
    pub(crate) fn stderr_tail(&self) -> String {
        let mut out: Vec<&str> = Vec::new();
        let mut len = 0;
        for line in self.tail.iter().rev() {
            if len + line.len() > TAIL_BYTES {
                break;
            }
            len += line.len() + 1;
            out.push(line);
        }
        out.reverse();
        out.join("\n")
    }

    pub(crate) fn clear_tail(&mut self) {
        self.tail.clear();
    }
}

/// Runs a WASI future to completion without `block_on` on an async worker (see the
/// module's documentation).
fn run_now<F: Future>(f: F) -> wasmtime::Result<F::Output> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let mut f = std::pin::pin!(f);
    if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        return Ok(v);
    }
    match Handle::try_current() {
        Err(_) => Ok(wasmtime_wasi::runtime::in_tokio(f)),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(f)))
        }
        Ok(_) => Err(wasmtime::Error::msg(
            "the plugin waits (a sleep or a poll on a clock), which decoy cannot do on a single-threaded runtime",
        )),
    }
}

/// The table, with the blocking functions re-implemented.
pub(crate) struct NoBlock<'a>(pub(crate) &'a mut ResourceTable);

struct HasNoBlock;

impl HasData for HasNoBlock {
    type Data<'a> = NoBlock<'a>;
}

/// Replaces `wasi:io/poll` and `wasi:io/streams` in `linker` (which must already hold
/// wasmtime-wasi's synchronous versions) with the ones here.
pub(crate) fn relink_io<T: wasmtime_wasi::WasiView>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    poll::add_to_linker::<T, HasNoBlock>(l, |t| NoBlock(t.ctx().table))?;
    streams::add_to_linker::<T, HasNoBlock>(l, |t| NoBlock(t.ctx().table))?;
    l.allow_shadowing(false);
    Ok(())
}

fn flat<T>(r: wasmtime::Result<StreamResult<T>>) -> StreamResult<T> {
    r.map_err(StreamError::Trap)?
}

impl poll::Host for NoBlock<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        run_now(async_poll::Host::poll(self.0, pollables))?
    }
}

impl poll::HostPollable for NoBlock<'_> {
    fn ready(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<bool> {
        run_now(async_poll::HostPollable::ready(self.0, p))?
    }
    fn block(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
        run_now(async_poll::HostPollable::block(self.0, p))?
    }
    fn drop(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.0, p)
    }
}

impl streams::Host for NoBlock<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        streams::Host::convert_stream_error(self.0, err)
    }
}

impl streams::HostOutputStream for NoBlock<'_> {
    fn drop(&mut self, s: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        run_now(async_streams::HostOutputStream::drop(self.0, s))?
    }
    fn check_write(&mut self, s: Resource<DynOutputStream>) -> StreamResult<u64> {
        streams::HostOutputStream::check_write(self.0, s)
    }
    fn write(&mut self, s: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        streams::HostOutputStream::write(self.0, s, bytes)
    }
    fn blocking_write_and_flush(
        &mut self,
        s: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        flat(run_now(
            async_streams::HostOutputStream::blocking_write_and_flush(self.0, s, bytes),
        ))
    }
    fn blocking_write_zeroes_and_flush(
        &mut self,
        s: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        flat(run_now(
            async_streams::HostOutputStream::blocking_write_zeroes_and_flush(self.0, s, len),
        ))
    }
    fn subscribe(
        &mut self,
        s: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        streams::HostOutputStream::subscribe(self.0, s)
    }
    fn write_zeroes(&mut self, s: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        streams::HostOutputStream::write_zeroes(self.0, s, len)
    }
    fn flush(&mut self, s: Resource<DynOutputStream>) -> StreamResult<()> {
        streams::HostOutputStream::flush(self.0, s)
    }
    fn blocking_flush(&mut self, s: Resource<DynOutputStream>) -> StreamResult<()> {
        let borrowed = Resource::new_borrow(s.rep());
        flat(run_now(async_streams::HostOutputStream::blocking_flush(
            self.0, borrowed,
        )))
    }
    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        streams::HostOutputStream::splice(self.0, dst, src, len)
    }
    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        flat(run_now(async_streams::HostOutputStream::blocking_splice(
            self.0, dst, src, len,
        )))
    }
}

impl streams::HostInputStream for NoBlock<'_> {
    fn drop(&mut self, s: Resource<DynInputStream>) -> wasmtime::Result<()> {
        run_now(async_streams::HostInputStream::drop(self.0, s))?
    }
    fn read(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        streams::HostInputStream::read(self.0, s, len)
    }
    fn blocking_read(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        flat(run_now(async_streams::HostInputStream::blocking_read(
            self.0, s, len,
        )))
    }
    fn skip(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        streams::HostInputStream::skip(self.0, s, len)
    }
    fn blocking_skip(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        flat(run_now(async_streams::HostInputStream::blocking_skip(
            self.0, s, len,
        )))
    }
    fn subscribe(
        &mut self,
        s: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        streams::HostInputStream::subscribe(self.0, s)
    }
}
