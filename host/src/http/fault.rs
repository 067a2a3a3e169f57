//! Simulated network faults, done below HTTP.
//!
//! hyper owns the connection, so a handler cannot reset a socket or write garbage on
//! it. Instead each HTTP/1 connection's stream is wrapped in [`FaultIo`], which shares a
//! [`FaultSlot`] with the request handler: the handler arms the slot and returns an
//! empty response, and when hyper then writes that response, `FaultIo` carries out the
//! fault in its place (nothing, garbage, or a reset) and fails the write, which makes
//! hyper drop the connection.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use decoy_spec::plan::Fault;

/// What the wrapped stream should do on its next write.
#[derive(Debug, Default)]
pub struct FaultSlot(AtomicU8);

impl FaultSlot {
    pub fn arm(&self, f: Fault) {
        let code = match f {
            Fault::ConnectionResetByPeer => 1,
            Fault::EmptyResponse => 2,
            Fault::MalformedResponseChunk => 3,
            Fault::RandomDataThenClose => 4,
        };
        self.0.store(code, Ordering::Release);
    }

    fn get(&self) -> Option<Fault> {
        match self.0.load(Ordering::Acquire) {
            1 => Some(Fault::ConnectionResetByPeer),
            2 => Some(Fault::EmptyResponse),
            3 => Some(Fault::MalformedResponseChunk),
            4 => Some(Fault::RandomDataThenClose),
            _ => None,
        }
    }
}

/// Gives access to the TCP socket under a (possibly TLS) stream, to set `SO_LINGER`.
pub trait TcpSocket {
    fn tcp(&self) -> &TcpStream;
}

impl TcpSocket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl TcpSocket for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
}

#[derive(Debug)]
pub struct FaultIo<S> {
    inner: S,
    slot: std::sync::Arc<FaultSlot>,
    /// Garbage still to write, and how much of it is written.
    garbage: Option<(Vec<u8>, usize)>,
}

impl<S> FaultIo<S> {
    pub fn new(inner: S, slot: std::sync::Arc<FaultSlot>) -> Self {
        FaultIo {
            inner,
            slot,
            garbage: None,
        }
    }
}

fn closed(f: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        format!("simulated fault {f}"),
    )
}

impl<S: AsyncWrite + TcpSocket + Unpin> FaultIo<S> {
    /// Runs the armed fault; `None` when no fault is armed.
    fn poll_fault(&mut self, cx: &mut Context<'_>) -> Option<Poll<io::Result<usize>>> {
        let fault = self.slot.get()?;
        Some(match fault {
            Fault::EmptyResponse => Poll::Ready(Err(closed("EMPTY_RESPONSE"))),
            Fault::ConnectionResetByPeer => {
                // Linger 0 turns the close that follows into a TCP RST.
                let _ = socket2::SockRef::from(self.inner.tcp())
                    .set_linger(Some(std::time::Duration::ZERO));
                Poll::Ready(Err(closed("CONNECTION_RESET_BY_PEER")))
            }
            Fault::MalformedResponseChunk | Fault::RandomDataThenClose => {
                let (buf, done) = self.garbage.get_or_insert_with(|| (garbage(fault), 0));
                while *done < buf.len() {
                    match Pin::new(&mut self.inner).poll_write(cx, &buf[*done..]) {
                        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => break,
                        Poll::Ready(Ok(n)) => *done += n,
                        Poll::Pending => return Some(Poll::Pending),
                    }
                }
                if Pin::new(&mut self.inner).poll_flush(cx).is_pending() {
                    return Some(Poll::Pending);
                }
                Poll::Ready(Err(closed("garbage sent")))
            }
        })
    }
}

fn garbage(f: Fault) -> Vec<u8> {
    match f {
        Fault::MalformedResponseChunk => {
            let mut v = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            v.extend_from_slice(b"lskdu018973t09sylgasjkfg1][]'./.sdlv");
            v
        }
        _ => {
            use rand::Rng as _;
            let mut v = vec![0u8; 2048];
            rand::rng().fill_bytes(&mut v);
            v
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FaultIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + TcpSocket + Unpin> AsyncWrite for FaultIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(p) = this.poll_fault(cx) {
            return p;
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(p) = this.poll_fault(cx) {
            return p;
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
