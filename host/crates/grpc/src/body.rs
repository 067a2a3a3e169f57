//! The response body of a call: its messages (the first at once, each later one
//! `interval` after the one before), then the trailers with the status; or messages
//! as a task produces them (bidirectional calls); or a reset stream (a fault).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use std::sync::Arc;

use crate::metrics::MethodCalls;
use crate::status::Code;

/// What a call's answer body sends.
#[derive(Debug)]
pub struct GrpcBody {
    kind: Kind,
    /// Dropped once hyper is done with the body (the answer is out): what a stub's
    /// webhooks wait for.
    _done: Option<tokio::sync::oneshot::Sender<()>>,
    /// The call's method's counters, until the status it ends with is counted.
    counter: Option<Arc<MethodCalls>>,
}

impl Drop for GrpcBody {
    fn drop(&mut self) {
        // Dropped before its status went out: the client left.
        if let Some(c) = self.counter.take() {
            c.ended(Some(Code::CANCELLED));
        }
    }
}

#[derive(Debug)]
enum Kind {
    /// Nothing (a trailers-only answer: the status is in the head).
    Empty,
    Frames {
        frames: VecDeque<Bytes>,
        interval: Duration,
        /// Waiting for the next frame's time.
        sleep: Option<Pin<Box<Sleep>>>,
        /// The client's deadline: a message due after it is not sent, and the call
        /// ends with DEADLINE_EXCEEDED.
        deadline: Option<Instant>,
        trailers: Option<HeaderMap>,
    },
    /// Frames produced by a task; the task sends the trailers last. An `Err` resets
    /// the stream.
    Channel(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>),
    /// A fault: the stream is reset (RST_STREAM) instead of answered.
    Reset,
}

impl GrpcBody {
    pub fn empty() -> Self {
        GrpcBody {
            kind: Kind::Empty,
            _done: None,
            counter: None,
        }
    }

    pub fn reset() -> Self {
        GrpcBody {
            kind: Kind::Reset,
            _done: None,
            counter: None,
        }
    }

    pub fn frames(
        frames: VecDeque<Bytes>,
        interval: Duration,
        deadline: Option<Instant>,
        trailers: HeaderMap,
    ) -> Self {
        GrpcBody {
            kind: Kind::Frames {
                frames,
                interval,
                sleep: None,
                deadline,
                trailers: Some(trailers),
            },
            _done: None,
            counter: None,
        }
    }

    pub fn channel(rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>) -> Self {
        GrpcBody {
            kind: Kind::Channel(rx),
            _done: None,
            counter: None,
        }
    }

    /// The status the body ends with (its trailers', or a reset) is counted in
    /// `counter`.
    pub fn counted(mut self, counter: Arc<MethodCalls>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// `done` is dropped when hyper drops the body.
    pub fn then(mut self, done: tokio::sync::oneshot::Sender<()>) -> Self {
        self._done = Some(done);
        self
    }
}

/// The trailers of a call that ends with `code` and `message`, plus `extra`.
pub fn trailers(
    code: Code,
    message: &str,
    extra: &[(http::HeaderName, http::HeaderValue)],
) -> HeaderMap {
    let mut t = HeaderMap::with_capacity(2 + extra.len());
    t.insert("grpc-status", code.as_header());
    if !message.is_empty() {
        t.insert("grpc-message", crate::status::encode_message(message));
    }
    for (k, v) in extra {
        t.append(k.clone(), v.clone());
    }
    t
}

impl Body for GrpcBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let me = self.get_mut();
        let polled = me.poll_kind(cx);
        if me.counter.is_some() {
            match &polled {
                Poll::Ready(Some(Ok(f))) if f.is_trailers() => {
                    let code = f
                        .trailers_ref()
                        .and_then(|t| t.get("grpc-status"))
                        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
                        .and_then(|v| v.parse::<u8>().ok())
                        .map_or(Code::UNKNOWN, Code);
                    if let Some(c) = me.counter.take() {
                        c.ended(Some(code));
                    }
                }
                Poll::Ready(Some(Err(_))) => {
                    if let Some(c) = me.counter.take() {
                        c.ended(None);
                    }
                }
                _ => {}
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Empty)
    }

    fn size_hint(&self) -> SizeHint {
        match self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

impl GrpcBody {
    fn poll_kind(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match &mut self.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Reset => Poll::Ready(Some(Err(std::io::Error::other("simulated fault")))),
            Kind::Channel(rx) => rx.poll_recv(cx),
            Kind::Frames {
                frames,
                interval,
                sleep,
                deadline,
                trailers,
            } => {
                if frames.is_empty() {
                    return Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))));
                }
                if let Some(s) = sleep {
                    if s.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    *sleep = None;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        frames.clear();
                        *trailers = Some(self::trailers(
                            Code::DEADLINE_EXCEEDED,
                            "deadline exceeded",
                            &[],
                        ));
                        return Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))));
                    }
                }
                let frame = frames.pop_front();
                if !frames.is_empty() && !interval.is_zero() {
                    let due = Instant::now() + *interval;
                    // Woken at the deadline if it comes first.
                    let at = deadline.map_or(due, |d| d.min(due));
                    *sleep = Some(Box::pin(tokio::time::sleep_until(at)));
                }
                Poll::Ready(frame.map(|f| Ok(Frame::data(f))))
            }
        }
    }
}
