//! The response body: the whole body at once, a dribble of chunks on a timer, pieces
//! arriving on a channel (a long admin answer built on a blocking thread, or the
//! dashboard's live events), a web-root file read as it is sent, or a stream that
//! fails (how an HTTP/2 fault resets its stream); any of them can say when hyper is
//! done with it (a stub's webhooks wait for that).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use decoy_spec::plan::ChunkedDribble;

#[derive(Debug)]
pub enum ResponseBody {
    Full(Option<Bytes>),
    Dribble {
        chunks: VecDeque<Bytes>,
        interval: Duration,
        sleep: Option<Pin<Box<Sleep>>>,
    },
    /// Pieces sent by a producer; the body ends when the producer drops its sender.
    Channel(tokio::sync::mpsc::Receiver<Bytes>),
    Fail,
    /// `body`, then the sender is dropped when hyper drops the body (written, or the
    /// connection gone), which is what a stub's webhooks wait for.
    Then(Box<ResponseBody>, tokio::sync::oneshot::Sender<()>),
    /// Chunks sent as a task produces them; ends when the task drops its sender.
    Events(tokio::sync::mpsc::Receiver<Bytes>),
    /// A gRPC call's answer: its messages, then the status in trailers.
    Grpc(decoy_grpc::GrpcBody),
    /// A file from the web root, read as it is sent.
    File(super::webroot::FileBody),
}

impl ResponseBody {
    pub fn full(b: Bytes) -> Self {
        ResponseBody::Full((!b.is_empty()).then_some(b))
    }

    pub fn is_empty_full(&self) -> bool {
        matches!(self, ResponseBody::Full(None))
    }

    /// Splits `body` into `d.chunks` pieces sent `d.total / d.chunks` apart.
    pub fn dribble(body: Bytes, d: ChunkedDribble) -> Self {
        let n = (d.chunks as usize).clamp(1, body.len().max(1));
        let size = body.len().div_ceil(n).max(1);
        let mut chunks = VecDeque::with_capacity(n);
        let mut rest = body;
        while !rest.is_empty() {
            let take = size.min(rest.len());
            chunks.push_back(rest.split_to(take));
        }
        ResponseBody::Dribble {
            chunks,
            interval: d.total / n as u32,
            sleep: None,
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ResponseBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Fail => Poll::Ready(Some(Err(std::io::Error::other("simulated fault")))),
            ResponseBody::Channel(rx) => rx
                .poll_recv(cx)
                .map(|piece| piece.map(|b| Ok(Frame::data(b)))),
            ResponseBody::Then(body, _) => Pin::new(&mut **body).poll_frame(cx),
            ResponseBody::Events(rx) => rx.poll_recv(cx).map(|c| c.map(|c| Ok(Frame::data(c)))),
            ResponseBody::Grpc(b) => Pin::new(b).poll_frame(cx),
            ResponseBody::File(b) => Pin::new(b).poll_frame(cx),
            ResponseBody::Dribble {
                chunks,
                interval,
                sleep,
            } => {
                if chunks.is_empty() {
                    return Poll::Ready(None);
                }
                // The first chunk goes at once; each later one waits `interval`.
                if let Some(s) = sleep
                    && s.as_mut().poll(cx).is_pending()
                {
                    return Poll::Pending;
                }
                let chunk = chunks.pop_front();
                *sleep = (!chunks.is_empty()).then(|| Box::pin(tokio::time::sleep(*interval)));
                Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(b) => b.is_none(),
            ResponseBody::Dribble { chunks, .. } => chunks.is_empty(),
            ResponseBody::Fail | ResponseBody::Channel(_) | ResponseBody::Events(_) => false,
            ResponseBody::Then(body, _) => body.is_end_stream(),
            ResponseBody::Grpc(b) => b.is_end_stream(),
            ResponseBody::File(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::Then(body, _) => body.size_hint(),
            ResponseBody::Grpc(b) => b.size_hint(),
            ResponseBody::File(b) => b.size_hint(),
            _ => SizeHint::default(),
        }
    }
}
