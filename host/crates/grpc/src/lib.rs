//! decoy's gRPC edge: the services a root declares in `grpc/` (descriptor sets and
//! `.proto` files, [`catalog`]), a call's messages as proto3 JSON ([`json`]), gRPC's
//! framing and compression ([`wire`]), status codes and the WireMock gRPC extension's
//! conventions for them ([`status`]), the answer's body with its trailers ([`body`]),
//! and the checks of stubs against the descriptors ([`check`]).
//!
//! A call is served by the serve step every transport shares
//! ([`decoy_core::serve`]): each request message becomes a [`RequestSnapshot`] (method
//! `POST`, URL `/<package>.<Service>/<Method>`, the metadata as headers, the message
//! as JSON text as body), so every matcher, template, plugin, scenario and the
//! journal work on it unchanged; the stub's answer is turned back into messages,
//! metadata and a status here. See [`call`].
//!
//! This crate depends on `decoy-core` and `decoy-spec`; it never imports the `decoy`
//! crate (HTTP, admin, watch). The HTTP server hands it the HTTP/2 requests whose
//! content type is `application/grpc`.

pub mod body;
pub mod builtin;
pub mod call;
pub mod catalog;
pub mod check;
pub mod json;
pub mod metrics;
pub mod proxy;
pub mod status;
pub mod wire;

pub use body::GrpcBody;
pub use call::{CallInfo, GrpcServer};
pub use catalog::Catalog;

/// The transport's name: the `transport` label of its metrics.
pub const TRANSPORT: &str = "grpc";

/// Whether an HTTP request is a gRPC call: HTTP/2 with content type `application/grpc`
/// (or `application/grpc+proto`, `application/grpc;...`), not gRPC-Web.
pub fn is_grpc<B>(req: &http::Request<B>) -> bool {
    req.version() == http::Version::HTTP_2
        && req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| is_grpc_content_type(v.as_bytes()))
}

fn is_grpc_content_type(v: &[u8]) -> bool {
    match v.strip_prefix(b"application/grpc") {
        Some(rest) => rest.is_empty() || rest[0] == b'+' || rest[0] == b';',
        None => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn content_types() {
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc;x=y",
        ] {
            assert!(super::is_grpc_content_type(yes.as_bytes()), "{yes}");
        }
        for no in [
            "application/grpc-web",
            "application/json",
            "application/grpcx",
        ] {
            assert!(!super::is_grpc_content_type(no.as_bytes()), "{no}");
        }
    }
}
