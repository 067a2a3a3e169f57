//! Keeping connections from exhausting the process: an idle timeout counted from
//! accept, a cap on open connections, back-off on accept errors, and the open-file
//! limit raised at start.
//!
//! A client that connects and sends nothing (or only the HTTP/2 preface), or sends a
//! request head a byte at a time, must not hold its socket forever: about a thousand
//! of them would use up the usual 1,024 file descriptors. Here every connection's
//! stream is wrapped in [`Tracked`], which notes the time of its last write, and every
//! request holds an [`InFlight`] guard until its answer's body is finished (through a
//! delay or a dribble). A watchdog per connection ([`Activity::idle`]) resolves once
//! the connection has had no request in flight for the idle timeout
//! (`--jetty-idle-timeout`, 30 s by default), counted from accept or from its last
//! write (the end of an answer is one), whichever is latest, and the connection is
//! then dropped: a silent socket, an idle keep-alive connection, an HTTP/2 connection
//! with no open stream, a request head trickled in slower than the timeout. Bytes the
//! client sends do not count as activity, which is what cuts off that trickle (a
//! slowloris); a slow request body, a long delay or a slow reader of a large answer
//! keeps its connection.
//!
//! This takes the place of hyper's `header_read_timeout`, which is turned off: it
//! arms a timer for every request a keep-alive connection waits for (a clock read, an
//! allocation, and an insert into and removal from the runtime's timer wheel), about
//! a tenth of decoy's CPU time for a static stub. The watchdog's one timer per
//! connection is re-armed only when it fires.
//!
//! [`ConnLimit`] counts open connections across every listener; past the cap
//! (`--max-connections`) a new connection is accepted and closed at once, so clients
//! fail fast instead of waiting in the kernel's queue, with one log line when the cap
//! is reached and one when there is room again.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The default cap on open connections, when the open-file limit allows it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;

/// File descriptors kept for everything but client connections (mapping files,
/// plugins, proxied calls, the broker, the watcher).
const FD_RESERVE: u64 = 256;

/// Raises the soft open-file limit to the hard one, logs what it did, and returns the
/// limit now in force (`None` when it cannot be read).
pub fn raise_fd_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (soft, hard) = (limit.current, limit.maximum);
    match (soft, hard) {
        (Some(s), Some(h)) if s < h => {
            let raised = rustix::process::Rlimit {
                current: Some(h),
                maximum: Some(h),
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => {
                    tracing::info!("open-file limit raised from {s} to {h} (the hard limit)");
                    Some(h)
                }
                Err(e) => {
                    tracing::warn!("cannot raise the open-file limit from {s} to {h}: {e}");
                    Some(s)
                }
            }
        }
        (Some(s), _) => Some(s),
        // Unlimited.
        (None, _) => Some(u64::MAX),
    }
}

/// The cap on open connections when none is given: [`DEFAULT_MAX_CONNECTIONS`], or
/// less when the open-file limit would be reached first.
pub fn default_max_connections(fd_limit: Option<u64>) -> usize {
    let by_fds = fd_limit.map_or(u64::MAX, |l| l.saturating_sub(FD_RESERVE).max(64));
    DEFAULT_MAX_CONNECTIONS.min(usize::try_from(by_fds).unwrap_or(usize::MAX))
}

/// Open connections, counted across every listener, against a cap.
#[derive(Debug)]
pub struct ConnLimit {
    max: usize,
    open: AtomicUsize,
    /// Whether the "limit reached" line was logged and the "room again" one not yet.
    full: AtomicBool,
}

impl ConnLimit {
    pub fn new(max: usize) -> Arc<ConnLimit> {
        Arc::new(ConnLimit {
            max,
            open: AtomicUsize::new(0),
            full: AtomicBool::new(false),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// A slot for a new connection, or `None` at the cap (logged once per episode).
    pub fn acquire(self: &Arc<Self>) -> Option<ConnSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if taken {
            return Some(ConnSlot(self.clone()));
        }
        if !self.full.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                "connection limit reached: {} connections are open (--max-connections); \
                 new connections are closed at once until some finish",
                self.max
            );
        }
        None
    }
}

/// One open connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnSlot(Arc<ConnLimit>);

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let before = self.0.open.fetch_sub(1, Ordering::AcqRel);
        // Back under 90 % of the cap: say so once.
        if before <= self.0.max - self.0.max / 10 && self.0.full.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                "connections are below the limit of {} again; accepting new ones",
                self.0.max
            );
        }
    }
}

/// How long to wait after a failed `accept` (out of file descriptors, most often):
/// doubling from 10 ms up to 1 s while it keeps failing, so a full process neither
/// spins nor stays deaf for long once descriptors are free again.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    delay: Option<Duration>,
    failures: u64,
}

impl AcceptBackoff {
    pub const FIRST: Duration = Duration::from_millis(10);
    pub const MAX: Duration = Duration::from_secs(1);

    /// The delay before the next attempt after `e`; logs the first failure of a run
    /// and then one in a hundred.
    pub fn failed(&mut self, e: &io::Error) -> Duration {
        let next = self.delay.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        self.delay = Some(next);
        if self.failures.is_multiple_of(100) {
            tracing::warn!(
                "accepting a connection failed: {e} (failure {} in a row; retrying in {} ms{})",
                self.failures + 1,
                next.as_millis(),
                if e.raw_os_error() == Some(24) {
                    "; out of file descriptors: see --max-connections and ulimit -n"
                } else {
                    ""
                }
            );
        }
        self.failures += 1;
        next
    }

    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::warn!(
                "accepting connections again after {} failures",
                self.failures
            );
        }
        self.delay = None;
        self.failures = 0;
    }
}

/// When a connection last wrote bytes, and how many of its requests are unanswered.
#[derive(Debug)]
pub struct Activity {
    since: Instant,
    /// Milliseconds after `since` of the last write (or of a look by the watchdog
    /// that found a request in flight).
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            since: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        })
    }

    fn touch(&self) {
        let ms = self.since.elapsed().as_millis() as u64;
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    /// A request starts; it counts until the guard (moved into its answer's body)
    /// is dropped.
    pub fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// Resolves once the connection has had nothing in flight for `timeout`, counted
    /// from accept or its last write.
    pub async fn idle(&self, timeout: Duration) {
        loop {
            let last = self.since + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + timeout;
            if Instant::now() >= deadline {
                if self.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
                // Busy (a delay, a slow answer): look again later.
                tokio::time::sleep(timeout.min(Duration::from_secs(1))).await;
                self.touch_if_busy();
                continue;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }

    /// A request in flight counts as activity: its connection's idle time starts
    /// when it is answered, not when it arrived.
    fn touch_if_busy(&self) {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            self.touch();
        }
    }
}

/// A request not yet fully answered (see [`Activity::request`]).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // No touch: an answer's end is its last write, which touched already (a
        // clock read a request saved). One that wrote nothing (a fault) closes its
        // connection, and while it was in flight the watchdog kept it fresh.
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in flight until it is dropped.
#[derive(Debug)]
pub struct TrackedBody<B> {
    inner: B,
    _guard: Option<InFlight>,
}

impl<B> TrackedBody<B> {
    pub fn new(inner: B, guard: Option<InFlight>) -> Self {
        TrackedBody {
            inner,
            _guard: guard,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for TrackedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A stream that notes every write in its [`Activity`].
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // What the client sends is not activity (see the module's comment).
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_room_under_a_low_open_file_limit() {
        assert_eq!(default_max_connections(Some(1024)), 768);
        assert_eq!(
            default_max_connections(Some(1 << 20)),
            DEFAULT_MAX_CONNECTIONS
        );
        assert_eq!(default_max_connections(None), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(default_max_connections(Some(10)), 64);
    }

    #[test]
    fn the_cap_refuses_past_its_limit_and_frees_slots_on_drop() {
        let limit = ConnLimit::new(2);
        let a = limit.acquire().unwrap();
        let _b = limit.acquire().unwrap();
        assert!(limit.acquire().is_none());
        drop(a);
        assert!(limit.acquire().is_some());
    }

    #[test]
    fn accept_back_off_doubles_up_to_a_second_and_resets() {
        let mut b = AcceptBackoff::default();
        let e = io::Error::from_raw_os_error(24);
        let delays: Vec<u128> = (0..10).map(|_| b.failed(&e).as_millis()).collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(&e), AcceptBackoff::FIRST);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_nothing_in_flight() {
        let a = Activity::new();
        let guard = a.request();
        let timeout = Duration::from_secs(30);
        let idle = tokio::time::timeout(Duration::from_secs(120), a.idle(timeout)).await;
        assert!(idle.is_err(), "a request in flight keeps the connection");
        // The answer goes out (its write is the activity), then its guard goes.
        a.touch();
        drop(guard);
        let started = Instant::now();
        a.idle(timeout).await;
        assert!(started.elapsed() >= timeout);
    }
}
