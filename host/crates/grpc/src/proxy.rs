//! Proxying a call to a real gRPC server: a stub that answers a call's first
//! message with `proxyBaseUrl` (a user's, or the recording's proxy stub) sends the
//! whole call there. The client's messages are forwarded as they come, the server's
//! messages, metadata, status and trailers come back as they come, so a long stream
//! or a bidirectional conversation is proxied live.
//!
//! The outbound side is the transport's ([`Forward`]): the `decoy` crate carries the
//! call through its one outbound client, with the proxy target rules, `--proxy-via`
//! and the header rules of every proxied request. This module reads both streams,
//! and when the call ends hands the serve step one answer in the stub format the
//! loader reads (the request as proto3 JSON, an array of messages for a client
//! stream; the answer's messages as JSON, an array for a server stream; the status
//! as the WireMock extension's `grpc-status-name`/`grpc-status-reason` headers; the
//! trailing metadata as `grpc-trailer-<name>`), which the journal keeps and the
//! recorder turns into stubs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Response};
use http_body::{Body, Frame};

use decoy_spec::plan::ProxySpec;

/// A proxied call's request body: the client's messages, framed, as they come. An
/// `Err` resets the stream (the client went away).
#[derive(Debug)]
pub struct OutBody {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl OutBody {
    pub fn new(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Self {
        OutBody { rx }
    }
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.get_mut()
            .rx
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(Frame::data)))
    }
}

/// The real server's answer body, as it comes.
pub type UpstreamBody = Pin<Box<dyn Body<Data = Bytes, Error = String> + Send>>;

/// What the transport's outbound client got for a call it was asked to open.
pub type Opened = Result<Response<UpstreamBody>, String>;

/// The transport's outbound client for gRPC calls.
pub trait Forward: Send + Sync + std::fmt::Debug {
    /// Opens the call `path` on the server `spec` names, with the client's metadata
    /// `metadata` and `body` as its request messages; `Err` says why it could not
    /// (refused by the target rules, unreachable, not HTTP/2).
    fn open<'a>(
        &'a self,
        spec: &'a ProxySpec,
        path: &'a str,
        metadata: &'a HeaderMap,
        body: OutBody,
    ) -> Pin<Box<dyn Future<Output = Opened> + Send + 'a>>;
}
