//! How HTTP/1 header names were spelled on the wire, read beside hyper.
//!
//! hyper 1 lower-cases HTTP/1 header names and keeps their original case only in a
//! private record (hyperium/hyper#2695), while WireMock's journal, near misses and
//! recorded stubs show them as the client or the real service wrote them. So the
//! bytes of a connection are read twice: by hyper, and by a [`Scanner`] that follows
//! the same stream of messages (each head parsed with `httparse`, the parser hyper
//! uses, with hyper's settings; each body skipped by its framing) and notes the
//! spellings a [`HeaderCase`] needs.
//!
//! - Server side, [`HeadIo`] wraps a client connection; the heads that need a
//!   spelling are queued in the connection's [`RequestHeads`], numbered, and each
//!   request claims its own in the order hyper hands them over (pipelined requests
//!   included). A claim checks the method and target length, so a scanner that lost
//!   its way yields the default spelling, never another request's.
//! - Client side, [`CaseConnector`] wraps the proxy client's connections after TLS;
//!   each answer carries its connection's [`UpstreamHeads`] (hyper-util hands a
//!   connection's "extra" to every response read on it), which holds the last head
//!   read there. The client sends one request at a time on a connection, so the
//!   scanner needs no body framing: what follows a head belongs to its body until
//!   the next request is written.
//!
//! Cost: one `httparse` pass over each head and a look at each name; nothing is
//! allocated for a head whose names need no spelling (all lower case, or well-known
//! names that WireMock would show in its own spelling anyway). The server wraps no
//! connection at all when the journal is off (no journal, nothing to show), nor an
//! HTTP/2 one (names are lower case by protocol); a scanner meeting anything it does
//! not follow (the HTTP/2 preface, a CONNECT, a 101 answer, a message hyper refuses)
//! stops for good, and the requests after it show the default spelling.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use decoy_spec::header_case::{HeaderCase, jetty_spelling};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes a head may take: hyper's default read buffer limit, past which
/// hyper refuses the message itself.
const MAX_HEAD: usize = 8192 + 4096 * 100;
/// hyper's default limit on the headers of one head.
const MAX_HEADERS: usize = 100;
/// Heads noted ahead of hyper (pipelined) past which a connection stops noting: a
/// client piling up requests does not pile up memory here.
const MAX_QUEUED: usize = 1024;

/// Which messages a scanner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Requests, as a server reads them (names shown as WireMock's Jetty shows them).
    Requests,
    /// Answers, as a client reads them (names shown as sent).
    Answers,
}

/// A head whose names were read.
#[derive(Debug)]
pub struct Seen {
    /// The head's number on its connection, from 0 (requests).
    pub seq: u64,
    /// The lengths of the request's method and target, to check a claim against.
    pub method_len: usize,
    pub target_len: usize,
    /// The answer's status.
    pub status: u16,
    pub case: HeaderCase,
}

/// Where a scanner is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// At or inside a head (its start kept in `pending`).
    Head,
    /// Inside a body of known length: this many bytes left.
    Sized(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// (answers) After a head: what is read is its body, until a request is written.
    UntilWrite,
    /// Stopped for good.
    Off,
}

/// The steps of a chunked body, as hyper's decoder takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Before the first digit of a chunk size.
    Start,
    Size(u64),
    SizeLws(u64),
    Extension(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk's line or a trailer line: `\r` ends the body.
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

/// Follows one direction of an HTTP/1 connection and reports each head's spellings.
#[derive(Debug)]
pub struct Scanner {
    role: Role,
    phase: Phase,
    /// The start of a head split across reads.
    pending: Vec<u8>,
    /// Heads read so far.
    seq: u64,
    /// (requests) After this head the connection may leave HTTP/1 (CONNECT: hyper
    /// hands the connection over when it is answered 2xx). An `Upgrade` header
    /// changes nothing: decoy never answers 101, so hyper goes on reading HTTP/1.
    last: bool,
}

impl Scanner {
    pub fn new(role: Role) -> Scanner {
        Scanner {
            role,
            phase: Phase::Head,
            pending: Vec::new(),
            seq: 0,
            last: false,
        }
    }

    /// True once the scanner stopped for good.
    pub fn is_off(&self) -> bool {
        self.phase == Phase::Off
    }

    /// The client wrote (part of) a request: the next bytes read start an answer.
    pub fn written(&mut self) {
        if self.phase == Phase::UntilWrite {
            self.phase = Phase::Head;
        }
    }

    /// Reads the next bytes of the stream; `seen` gets each head that needs a
    /// spelling (requests) or every final head (answers).
    pub fn feed(&mut self, mut bytes: &[u8], seen: &mut dyn FnMut(Seen)) {
        while !bytes.is_empty() {
            match self.phase {
                Phase::Off => return,
                Phase::UntilWrite => return,
                Phase::Sized(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(bytes.len());
                    bytes = &bytes[n..];
                    self.phase = match left - n as u64 {
                        0 => self.after_body(),
                        left => Phase::Sized(left),
                    };
                }
                Phase::Chunked(step) => {
                    let (used, next) = chunked(step, bytes);
                    bytes = &bytes[used..];
                    self.phase = match next {
                        Some(step) => Phase::Chunked(step),
                        None if used == 0 => Phase::Off,
                        None => self.after_body(),
                    };
                }
                Phase::Head if self.pending.is_empty() => match self.head(bytes, seen) {
                    Parsed::Done(n) => bytes = &bytes[n..],
                    Parsed::Partial => {
                        if bytes.len() > MAX_HEAD {
                            self.phase = Phase::Off;
                        } else {
                            self.pending.extend_from_slice(bytes);
                        }
                        return;
                    }
                    Parsed::Refused => self.phase = Phase::Off,
                },
                Phase::Head => {
                    let from = self.pending.len().saturating_sub(3);
                    self.pending.extend_from_slice(bytes);
                    if self.pending.len() > MAX_HEAD {
                        self.phase = Phase::Off;
                        self.pending = Vec::new();
                        return;
                    }
                    // Parse again only once the head can be complete: a head sent
                    // byte by byte costs a scan of each byte, not a parse per byte.
                    if !ends_head(&self.pending[from..]) {
                        return;
                    }
                    let buf = std::mem::take(&mut self.pending);
                    match self.head(&buf, seen) {
                        Parsed::Done(n) => self.feed(&buf[n..], seen),
                        Parsed::Partial => self.pending = buf,
                        Parsed::Refused => self.phase = Phase::Off,
                    }
                    return;
                }
            }
        }
    }

    /// The phase after a request's body.
    fn after_body(&self) -> Phase {
        if self.last { Phase::Off } else { Phase::Head }
    }

    fn head(&mut self, buf: &[u8], seen: &mut dyn FnMut(Seen)) -> Parsed {
        match self.role {
            Role::Requests => self.request_head(buf, seen),
            Role::Answers => self.answer_head(buf, seen),
        }
    }

    fn request_head(&mut self, buf: &[u8], seen: &mut dyn FnMut(Seen)) -> Parsed {
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
            &mut req,
            buf,
            &mut headers,
        ) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Parsed::Partial,
            Err(_) => return Parsed::Refused,
        };
        let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version)
        else {
            return Parsed::Refused;
        };
        // The body's framing, as hyper reads a request's (RFC 9112 §6.3): a
        // Transfer-Encoding wins over any Content-Length and must end in chunked;
        // Content-Lengths must agree; HTTP/1.0 has no Transfer-Encoding.
        let mut te = None;
        let mut length = None;
        self.last = method == "CONNECT";
        let mut case = HeaderCase::jetty();
        for (i, h) in req.headers.iter().enumerate() {
            let name = h.name;
            if name.eq_ignore_ascii_case("transfer-encoding") {
                if version == 0 {
                    return Parsed::Refused;
                }
                te = Some(is_chunked(h.value));
            } else if name.eq_ignore_ascii_case("content-length") && te.is_none() {
                match digits(h.value) {
                    Some(n) if length.is_none_or(|l| l == n) => length = Some(n),
                    _ => return Parsed::Refused,
                }
            }
            if jetty_would_differ(buf, name)
                && !req.headers[..i]
                    .iter()
                    .any(|e| e.name.eq_ignore_ascii_case(name))
            {
                case.note(name);
            }
        }
        let body = match (te, length) {
            (Some(false), _) => return Parsed::Refused,
            (Some(true), _) => Phase::Chunked(Chunk::Start),
            (None, Some(n)) if n > 0 => Phase::Sized(n),
            _ => Phase::Head,
        };
        let seq = self.seq;
        self.seq += 1;
        if !case.is_empty() {
            seen(Seen {
                seq,
                method_len: method.len(),
                target_len: target.len(),
                status: 0,
                case,
            });
        }
        self.phase = match body {
            Phase::Head => self.after_body(),
            body => body,
        };
        Parsed::Done(len)
    }

    fn answer_head(&mut self, buf: &[u8], seen: &mut dyn FnMut(Seen)) -> Parsed {
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
        let mut res = httparse::Response::new(&mut []);
        let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut res,
            buf,
            &mut headers,
        ) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Parsed::Partial,
            Err(_) => return Parsed::Refused,
        };
        let Some(status) = res.code else {
            return Parsed::Refused;
        };
        match status {
            // The connection leaves HTTP/1.
            101 => return Parsed::Refused,
            // An interim answer (100 Continue): the final one follows.
            100..=199 => return Parsed::Done(len),
            _ => {}
        }
        let mut case = HeaderCase::as_sent();
        for (i, h) in res.headers.iter().enumerate() {
            if h.name.bytes().any(|b| b.is_ascii_uppercase())
                && !res.headers[..i]
                    .iter()
                    .any(|e| e.name.eq_ignore_ascii_case(h.name))
            {
                case.note(h.name);
            }
        }
        self.seq += 1;
        seen(Seen {
            seq: self.seq - 1,
            method_len: 0,
            target_len: 0,
            status,
            case,
        });
        self.phase = Phase::UntilWrite;
        Parsed::Done(len)
    }
}

/// What parsing a head gave.
enum Parsed {
    /// A head of this many bytes.
    Done(usize),
    /// Not complete yet.
    Partial,
    /// Not a head hyper accepts: hyper answers 400 or closes, and so the scanner stops.
    Refused,
}

/// Whether WireMock shows a request header name otherwise than [`HeaderCase::jetty`]
/// would with nothing noted. Jetty spells a name it knows its own way only when the
/// name is followed by `": "`, and `Host` always; it keeps every other name as sent.
fn jetty_would_differ(buf: &[u8], name: &str) -> bool {
    if name.eq_ignore_ascii_case("host") {
        return false;
    }
    match jetty_spelling(name.as_bytes()) {
        Some(own) => {
            // httparse hands out slices of `buf`: the name is followed by its colon.
            let end = (name.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize) + name.len();
            let spaced = buf.get(end + 1) == Some(&b' ');
            !spaced && own != name
        }
        None => name.bytes().any(|b| b.is_ascii_uppercase()),
    }
}

/// hyper's test for a chunked request: `chunked` ends the last Transfer-Encoding.
fn is_chunked(value: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(value) else {
        return false;
    };
    s.rsplit(',')
        .next()
        .is_some_and(|e| e.trim().eq_ignore_ascii_case("chunked"))
}

/// A Content-Length as hyper's server reads it: digits only.
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

/// Whether `tail` holds the end of a head (an empty line, with or without `\r`).
fn ends_head(tail: &[u8]) -> bool {
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

/// Takes chunked-body bytes from `step`: how many were used, and the step after them
/// (`None`: the body ended, or, with nothing used, the bytes are not a chunked body).
fn chunked(mut step: Chunk, bytes: &[u8]) -> (usize, Option<Chunk>) {
    let mut i = 0;
    while i < bytes.len() {
        if let Chunk::Data(left) = step {
            let n = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(bytes.len() - i);
            i += n;
            step = match left - n as u64 {
                0 => Chunk::DataCr,
                left => Chunk::Data(left),
            };
            continue;
        }
        let b = bytes[i];
        i += 1;
        let next = match (step, b) {
            (Chunk::Start, b) => hex(b).map(Chunk::Size),
            (Chunk::Size(n), b) if hex(b).is_some() => n
                .checked_mul(16)
                .and_then(|n| n.checked_add(hex(b).unwrap_or(0)))
                .map(Chunk::Size),
            (Chunk::Size(n) | Chunk::SizeLws(n), b' ' | b'\t') => Some(Chunk::SizeLws(n)),
            (Chunk::Size(n) | Chunk::SizeLws(n), b';') => Some(Chunk::Extension(n)),
            (Chunk::Size(n) | Chunk::SizeLws(n) | Chunk::Extension(n), b'\r') => {
                Some(Chunk::SizeLf(n))
            }
            (Chunk::Extension(_), b'\n') => None,
            (Chunk::Extension(n), _) => Some(Chunk::Extension(n)),
            (Chunk::SizeLf(0), b'\n') => Some(Chunk::EndCr),
            (Chunk::SizeLf(n), b'\n') => Some(Chunk::Data(n)),
            (Chunk::DataCr, b'\r') => Some(Chunk::DataLf),
            (Chunk::DataLf, b'\n') => Some(Chunk::Start),
            (Chunk::EndCr, b'\r') => Some(Chunk::EndLf),
            (Chunk::Trailer, b'\r') => Some(Chunk::TrailerLf),
            (Chunk::EndCr | Chunk::Trailer, _) => Some(Chunk::Trailer),
            (Chunk::TrailerLf, b'\n') => Some(Chunk::EndCr),
            (Chunk::EndLf, b'\n') => return (i, None),
            _ => None,
        };
        match next {
            Some(s) => step = s,
            // Not a chunked body hyper would read: stop.
            None => return (0, None),
        }
    }
    (i, Some(step))
}

fn hex(b: u8) -> Option<u64> {
    (b as char).to_digit(16).map(u64::from)
}

/// The spellings of a server connection's request heads, waiting for their requests.
#[derive(Debug, Default)]
pub struct RequestHeads {
    /// Heads that need a spelling, in order, not yet claimed.
    noted: Mutex<VecDeque<Seen>>,
    /// `noted`'s length, so that most requests never take the lock.
    waiting: AtomicUsize,
    /// Requests claimed so far: the number of the next one.
    claimed: AtomicU64,
}

impl RequestHeads {
    fn push(&self, seen: Seen) -> bool {
        let mut noted = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        if noted.len() >= MAX_QUEUED {
            noted.clear();
            self.waiting.store(0, Ordering::Release);
            return false;
        }
        noted.push_back(seen);
        self.waiting.store(noted.len(), Ordering::Release);
        true
    }

    /// The spellings of the next HTTP/1 request hyper hands over on this connection
    /// (every one must be claimed, in order). `target_len` is the length of its
    /// request target when known (origin form): with its method, it must be that of
    /// the head noted, else the request gets the default.
    pub fn claim(&self, method: &str, target_len: Option<usize>) -> HeaderCase {
        let seq = self.claimed.fetch_add(1, Ordering::AcqRel);
        if self.waiting.load(Ordering::Acquire) == 0 {
            return HeaderCase::jetty();
        }
        let mut noted = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        while noted.front().is_some_and(|s| s.seq < seq) {
            noted.pop_front();
        }
        let case = match noted.front() {
            Some(s) if s.seq == seq => noted.pop_front().and_then(|s| {
                let same = s.method_len == method.len()
                    && target_len.is_none_or(|len| len == s.target_len);
                same.then_some(s.case)
            }),
            _ => None,
        };
        self.waiting.store(noted.len(), Ordering::Release);
        case.unwrap_or_else(HeaderCase::jetty)
    }
}

/// A server connection's stream, read by a request [`Scanner`] on the way to hyper.
#[derive(Debug)]
pub struct HeadIo<S> {
    inner: S,
    /// `None`: not scanning (the journal is off, HTTP/2, or the scanner stopped).
    scanner: Option<(Scanner, Arc<RequestHeads>)>,
}

impl<S> HeadIo<S> {
    /// Without `heads` the bytes pass through untouched.
    pub fn new(inner: S, heads: Option<Arc<RequestHeads>>) -> HeadIo<S> {
        HeadIo {
            inner,
            scanner: heads.map(|h| (Scanner::new(Role::Requests), h)),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let HeadIo { inner, scanner } = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(inner).poll_read(cx, buf))?;
        if let Some((s, heads)) = scanner {
            let mut full = false;
            s.feed(&buf.filled()[before..], &mut |seen| {
                full |= !heads.push(seen);
            });
            if full || s.is_off() {
                *scanner = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
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

/// The last answer head read on an upstream connection; every response read there
/// carries it (as the connection's "extra").
#[derive(Debug, Default)]
pub struct UpstreamHeads {
    last: Mutex<Option<(u16, HeaderCase)>>,
}

impl UpstreamHeads {
    /// The spellings of the answer just read, when its status is `status` (else the
    /// scanner lost its way, and nothing is known).
    pub fn take(&self, status: u16) -> Option<HeaderCase> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.take() {
            Some((s, case)) if s == status => Some(case),
            _ => None,
        }
    }
}

/// What a proxied response carries in its extensions: its connection's heads.
#[derive(Debug, Clone)]
pub struct UpstreamCase(pub Arc<UpstreamHeads>);

/// Wraps the proxy client's connector: every connection it opens is read by an
/// answer [`Scanner`] (after TLS, so it reads the plain HTTP/1 bytes).
#[derive(Debug, Clone)]
pub struct CaseConnector<C> {
    pub inner: C,
}

impl<C> tower_service::Service<http::Uri> for CaseConnector<C>
where
    C: tower_service::Service<http::Uri>,
    C::Response: Connection,
    C::Future: Send + 'static,
{
    type Response = CaseIo<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: http::Uri) -> Self::Future {
        let connecting = self.inner.call(dst);
        Box::pin(async move {
            let io = connecting.await?;
            // HTTP/2 names are lower case by protocol: nothing to read.
            let scan = !io.connected().is_negotiated_h2();
            Ok(CaseIo {
                inner: io,
                scanner: scan.then(|| Scanner::new(Role::Answers)),
                heads: Arc::default(),
                scratch: Vec::new(),
            })
        })
    }
}

/// An upstream connection read by an answer [`Scanner`].
#[derive(Debug)]
pub struct CaseIo<T> {
    inner: T,
    scanner: Option<Scanner>,
    heads: Arc<UpstreamHeads>,
    /// hyper's read cursor cannot be looked into once filled: the bytes are read
    /// here first, then copied into it.
    scratch: Vec<u8>,
}

/// The most bytes one read through [`CaseIo`] takes.
const SCRATCH: usize = 16 * 1024;

impl<T: Connection> Connection for CaseIo<T> {
    fn connected(&self) -> Connected {
        let connected = self.inner.connected();
        if self.scanner.is_some() {
            connected.extra(UpstreamCase(self.heads.clone()))
        } else {
            connected
        }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for CaseIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let CaseIo {
            inner,
            scanner,
            heads,
            scratch,
        } = self.get_mut();
        let Some(s) = scanner else {
            return Pin::new(inner).poll_read(cx, buf);
        };
        let want = buf.remaining().min(SCRATCH);
        if want == 0 {
            return Pin::new(inner).poll_read(cx, buf);
        }
        if scratch.len() < want {
            scratch.resize(want, 0);
        }
        let mut tmp = hyper::rt::ReadBuf::new(&mut scratch[..want]);
        ready!(Pin::new(inner).poll_read(cx, tmp.unfilled()))?;
        let got = tmp.filled();
        s.feed(got, &mut |seen| {
            let mut last = heads.last.lock().unwrap_or_else(|e| e.into_inner());
            *last = Some((seen.status, seen.case));
        });
        buf.put_slice(got);
        if s.is_off() {
            *scanner = None;
            *scratch = Vec::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for CaseIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if n > 0
            && let Some(s) = &mut this.scanner
        {
            s.written();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        if n > 0
            && let Some(s) = &mut this.scanner
        {
            s.written();
        }
        Poll::Ready(Ok(n))
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

    /// Feeds `reads` to a request scanner: the heads it noted, and whether it stopped.
    fn requests(reads: &[&[u8]]) -> (Vec<Seen>, bool) {
        let mut scanner = Scanner::new(Role::Requests);
        let mut seen = Vec::new();
        for r in reads {
            scanner.feed(r, &mut |s| seen.push(s));
        }
        (seen, scanner.is_off())
    }

    fn names(s: &Seen) -> Vec<&str> {
        s.case.spellings().collect()
    }

    #[test]
    fn only_names_that_jetty_would_not_respell_are_noted() {
        let head = b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: curl\r\nACCEPT: */*\r\n\
            X-Custom-Header: a\r\nx-lower: b\r\ncontent-type: text/plain\r\n\r\n";
        let (seen, off) = requests(&[head]);
        assert!(!off);
        assert_eq!(seen.len(), 1);
        assert_eq!(names(&seen[0]), ["X-Custom-Header"]);
        assert_eq!(
            (seen[0].seq, seen[0].method_len, seen[0].target_len),
            (0, 3, 6)
        );
        let case = &seen[0].case;
        assert_eq!(case.name("accept"), "Accept");
        assert_eq!(case.name("content-type"), "Content-Type");
        assert_eq!(case.name("x-lower"), "x-lower");
    }

    #[test]
    fn a_head_with_only_lower_case_or_well_known_names_notes_nothing() {
        let (seen, off) = requests(&[
            b"GET / HTTP/1.1\r\nhost: x\r\naccept: */*\r\nx-a: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nUser-Agent: u\r\n\r\n",
        ]);
        assert!(seen.is_empty());
        assert!(!off);
    }

    #[test]
    fn a_known_name_without_a_space_after_its_colon_keeps_its_spelling_as_in_jetty() {
        let (seen, _) = requests(&[
            b"GET / HTTP/1.1\r\nHOST:x\r\nACCEPT:x/y\r\naccept-encoding:gzip\r\nContent-Type:a/b\r\n\r\n",
        ]);
        assert_eq!(names(&seen[0]), ["ACCEPT", "accept-encoding"]);
        assert_eq!(seen[0].case.name("host"), "Host");
        assert_eq!(seen[0].case.name("content-type"), "Content-Type");
    }

    #[test]
    fn the_first_spelling_of_a_repeated_name_is_the_one_shown() {
        let (seen, _) =
            requests(&[b"GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\nx-b: 1\r\nX-B: 2\r\n\r\n"]);
        assert_eq!(names(&seen[0]), ["X-A"]);
        assert_eq!(seen[0].case.name("x-b"), "x-b");
    }

    #[test]
    fn pipelined_requests_with_sized_and_chunked_bodies_are_told_apart() {
        let stream: &[u8] = b"POST /one HTTP/1.1\r\nContent-Length: 5\r\nX-One: 1\r\n\r\nX-Two\
            POST /two HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
            3;ext=1\r\nGET\r\n4 \r\n /x \r\n0\r\nX-Trailer: t\r\n\r\n\
            GET /three HTTP/1.1\r\nX-Three: 3\r\n\r\n\
            GET /four HTTP/1.1\r\nx-four: 4\r\n\r\n\
            GET /fifth HTTP/1.1\r\nX-Five: 5\r\n\r\n";
        let (seen, off) = requests(&[stream]);
        assert!(!off);
        let got: Vec<(u64, Vec<&str>)> = seen.iter().map(|s| (s.seq, names(s))).collect();
        assert_eq!(
            got,
            [
                (0, vec!["X-One"]),
                (2, vec!["X-Three"]),
                (4, vec!["X-Five"])
            ]
        );
        // The same bytes one at a time give the same heads.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        let (one_by_one, off) = requests(&bytes);
        assert!(!off);
        let again: Vec<(u64, Vec<&str>)> = one_by_one.iter().map(|s| (s.seq, names(s))).collect();
        assert_eq!(again, got);
    }

    #[test]
    fn a_head_split_across_reads_is_put_together() {
        let (seen, off) = requests(&[b"GET /a HTTP/1.1\r\nX-Sp", b"lit: 1\r\n", b"\r", b"\n"]);
        assert!(!off);
        assert_eq!(names(&seen[0]), ["X-Split"]);
        // A read that ends a head and starts the next one.
        let (seen, _) = requests(&[
            b"GET /a HTTP/1.1\r\nX-A: 1\r",
            b"\n\r\nGET /b HTTP/1.1\r\nX-B",
            b": 2\r\n\r\n",
        ]);
        let got: Vec<Vec<&str>> = seen.iter().map(names).collect();
        assert_eq!(got, [vec!["X-A"], vec!["X-B"]]);
    }

    #[test]
    fn obs_fold_and_other_heads_hyper_refuses_stop_the_scanner_without_a_panic() {
        let (seen, off) = requests(&[b"GET / HTTP/1.1\r\nX-Fold: a\r\n  b\r\n\r\n"]);
        assert!(seen.is_empty() && off);
        for refused in [
            &b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"\x00\x01\x02\xff garbage\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            let (_, off) = requests(&[refused]);
            assert!(off, "{:?}", String::from_utf8_lossy(refused));
        }
        // Bytes past ASCII in a value are fine (obs-text).
        let (seen, off) = requests(&[b"GET / HTTP/1.1\r\nX-Odd: caf\xc3\xa9 \xff\r\n\r\n"]);
        assert!(!off);
        assert_eq!(names(&seen[0]), ["X-Odd"]);
    }

    #[test]
    fn a_head_larger_than_hyper_accepts_stops_the_scanner() {
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        while head.len() <= MAX_HEAD {
            head.extend_from_slice(b"x-filler: 0123456789012345678901234567890123456789\r\n");
        }
        let (seen, off) = requests(&[&head]);
        assert!(seen.is_empty() && off);
        let pieces: Vec<&[u8]> = head.chunks(1000).collect();
        let (seen, off) = requests(&pieces);
        assert!(seen.is_empty() && off);
        // A large head within the limit (100 headers) is read.
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..99 {
            head.extend_from_slice(format!("X-H{i}: {}\r\n", "v".repeat(2000)).as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        let pieces: Vec<&[u8]> = head.chunks(4096).collect();
        let (seen, off) = requests(&pieces);
        assert!(!off);
        assert_eq!(seen[0].case.spellings().count(), 99);
    }

    #[test]
    fn after_a_connect_request_the_scanner_stops() {
        let (seen, off) = requests(&[
            b"CONNECT a:443 HTTP/1.1\r\nX-A: 1\r\n\r\nGET / HTTP/1.1\r\nX-B: 2\r\n\r\n",
        ]);
        assert_eq!(seen.len(), 1);
        assert!(off);
        // An Upgrade header does not: decoy never answers 101.
        let (seen, off) = requests(&[
            b"GET / HTTP/1.1\r\nUpgrade: h2c\r\nX-A: 1\r\n\r\nGET / HTTP/1.1\r\nX-B: 2\r\n\r\n",
        ]);
        assert_eq!(seen.len(), 2);
        assert!(!off);
    }

    #[test]
    fn each_request_claims_its_own_head_in_order_and_a_mismatch_gets_the_default() {
        let heads = RequestHeads::default();
        let (seen, _) = requests(&[
            b"GET /a HTTP/1.1\r\nX-A: 1\r\n\r\nGET /bb HTTP/1.1\r\n\r\nPUT /c HTTP/1.1\r\nX-C: 1\r\n\r\nGET /d HTTP/1.1\r\nX-D: 1\r\n\r\n",
        ]);
        for s in seen {
            assert!(heads.push(s));
        }
        assert_eq!(heads.claim("GET", Some(2)).name("x-a"), "X-A");
        assert!(heads.claim("GET", Some(3)).is_empty());
        assert_eq!(heads.claim("PUT", None).name("x-c"), "X-C");
        // Not the head noted for this request: the default, not another's names.
        assert!(heads.claim("DELETE", Some(2)).is_empty());
        assert!(heads.claim("GET", Some(2)).is_empty());
        assert_eq!(heads.waiting.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn answers_are_read_after_interim_ones_and_their_bodies_skipped_until_the_next_request() {
        let mut scanner = Scanner::new(Role::Answers);
        let mut seen = Vec::new();
        let mut feed = |s: &mut Scanner, b: &[u8]| s.feed(b, &mut |x| seen.push(x));
        scanner.written();
        feed(
            &mut scanner,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: a\r\nx-low: b\r\nETAG: c\r\nContent-Length: 20\r\n\r\nHTTP/1.1 500 Not a head",
        );
        feed(&mut scanner, b"more body");
        scanner.written();
        feed(
            &mut scanner,
            b"HTTP/1.1 404 Not Found\r\nX-Second: 1\r\n\r\n",
        );
        assert!(!scanner.is_off());
        let got: Vec<(u16, Vec<&str>)> = seen.iter().map(|s| (s.status, names(s))).collect();
        assert_eq!(
            got,
            [
                (200, vec!["Content-Type", "ETAG", "Content-Length"]),
                (404, vec!["X-Second"])
            ]
        );
        assert_eq!(seen[0].case.name("x-low"), "x-low");
    }

    #[test]
    fn chunked_bodies_follow_hypers_decoder() {
        assert_eq!(chunked(Chunk::Start, b"0\r\n\r\nrest"), (5, None));
        assert_eq!(
            chunked(
                Chunk::Start,
                b"A\r\n0123456789\r\n0\r\nT: 1\r\nU: 2\r\n\r\n"
            )
            .0,
            32
        );
        assert_eq!(chunked(Chunk::Start, b"5\r\nab"), (5, Some(Chunk::Data(3))));
        assert_eq!(chunked(Chunk::Start, b"\r\n"), (0, None));
        assert_eq!(chunked(Chunk::Start, b"1;a\nb"), (0, None));
        assert_eq!(chunked(Chunk::Start, b"ffffffffffffffffff"), (0, None));
    }
}
