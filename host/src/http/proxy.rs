//! Forwarding a request to a real service: `proxyBaseUrl` stubs and recording.
//!
//! The request is sent through the one outbound client ([`Outbound`]), which applies
//! `--allow-proxy-targets` / `--deny-proxy-targets` and `--proxy-via`; this module
//! says which of the client's headers go along, as WireMock forwards them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use http_body_util::Full;

use super::client::{Outbound, SendError};
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::ProxySpec;
use decoy_spec::request::RequestSnapshot;

/// WireMock's default `--proxy-timeout` is 300 s; a mock that hangs that long hides
/// the problem, so decoy waits 60 s unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a proxied request got no answer from the real service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    /// `--allow-proxy-targets` / `--deny-proxy-targets` refuse the target.
    Denied,
    /// The message for the 500 answer (the upstream is down, slow, or answered
    /// something unreadable).
    Failed(String),
}

/// What the real service answered.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub status: u16,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// How the service spelled the header names (`None`: not known, as over HTTP/2).
    pub header_case: Option<HeaderCase>,
    pub body: Bytes,
}

/// Proxy stubs' view of the outbound client: its deadline and header rules.
#[derive(Debug, Clone)]
pub struct ProxyClient {
    outbound: Arc<Outbound>,
    timeout: Duration,
    /// `--preserve-host-header`: send the client's `Host` instead of the target's.
    preserve_host: bool,
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) are for one connection only, and `host` is
/// set from the target, as WireMock does by default.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

impl ProxyClient {
    /// Proxied requests go through `outbound` and may take `timeout`.
    pub fn new(outbound: Arc<Outbound>, timeout: Duration) -> ProxyClient {
        ProxyClient {
            outbound,
            timeout,
            preserve_host: false,
        }
    }

    /// Forward the client's `Host` header (WireMock's `--preserve-host-header`).
    pub fn preserving_host(mut self, yes: bool) -> ProxyClient {
        self.preserve_host = yes;
        self
    }

    /// The client's headers that go along to the service `spec` names, with the
    /// stub's `additionalProxyRequestHeaders` and without its `removeProxyRequestHeaders`.
    fn headers(&self, spec: &ProxySpec, from: &HeaderMap) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(from.len() + spec.add_headers.len());
        for (name, value) in from {
            if is_hop_by_hop(name)
                || (name == header::HOST && !self.preserve_host)
                || name == header::CONTENT_LENGTH
                || spec.remove_headers.contains(name)
            {
                continue;
            }
            headers.append(name.clone(), value.clone());
        }
        for (name, value) in &spec.add_headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }

    /// Opens the gRPC call `path` on the service `spec` names, with the client's
    /// metadata `from` (the same header rules as any proxied request, plus gRPC's
    /// `te: trailers`): its answer's head, and its body as it comes.
    pub async fn open_grpc(
        &self,
        spec: &ProxySpec,
        path: &str,
        from: &HeaderMap,
        body: super::client::GrpcOut,
    ) -> Result<http::Response<hyper::body::Incoming>, ProxyError> {
        let target = spec.target(path);
        let uri: http::Uri = target
            .parse()
            .map_err(|e| ProxyError::Failed(format!("{target} is not a valid URL: {e}")))?;
        let mut headers = self.headers(spec, from);
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        let mut out = http::Request::builder()
            .method(http::Method::POST)
            .version(http::Version::HTTP_2)
            .uri(uri)
            .body(body)
            .map_err(|e| ProxyError::Failed(e.to_string()))?;
        *out.headers_mut() = headers;
        self.outbound
            .open_grpc(out, self.timeout)
            .await
            .map_err(|e| match e {
                SendError::Denied => ProxyError::Denied,
                other => ProxyError::Failed(format!(
                    "Network failure trying to make a proxied gRPC call from decoy to {target}: {other}"
                )),
            })
    }

    /// Sends `req` to the service `spec` names.
    pub async fn forward(
        &self,
        spec: &ProxySpec,
        req: &RequestSnapshot,
    ) -> Result<Upstream, ProxyError> {
        let target = spec.target(&req.url);
        let uri: http::Uri = target
            .parse()
            .map_err(|e| ProxyError::Failed(format!("{target} is not a valid URL: {e}")))?;
        let headers = self.headers(spec, &req.headers);
        let method = http::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| ProxyError::Failed(format!("{:?} is not an HTTP method", req.method)))?;
        let mut out = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(req.body.clone()))
            .map_err(|e| ProxyError::Failed(e.to_string()))?;
        *out.headers_mut() = headers;
        let answer = self
            .outbound
            .send(out, self.timeout, None)
            .await
            .map_err(|e| match e {
                SendError::Denied => ProxyError::Denied,
                other => ProxyError::Failed(format!(
                    "Network failure trying to make a proxied request from decoy to {target}\r\n{other}"
                )),
            })?;
        let headers = answer
            .headers
            .iter()
            .filter(|(n, _)| !is_hop_by_hop(n) && *n != header::CONTENT_LENGTH)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        Ok(Upstream {
            status: answer.status,
            headers,
            header_case: answer.header_case,
            body: answer.body,
        })
    }
}
