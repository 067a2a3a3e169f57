//! The one outbound HTTP client: proxy stubs, `--proxy-all`, recording and webhooks
//! all send through [`Outbound`], so every request decoy makes of its own passes the
//! same checks, as in WireMock 3, whose proxy and webhook clients are built alike.
//!
//! - **Targets.** `--allow-proxy-targets` / `--deny-proxy-targets` ([`ProxyTargets`])
//!   are checked twice: the host as written in the URL before anything is sent, and
//!   every address a name resolves to when the connection is made (so a name cannot
//!   be used to reach a denied address). A refusal is [`SendError::Denied`].
//! - **One pool.** A pooled hyper client (HTTP/1.1 and HTTP/2, plain or TLS with the
//!   system's and Mozilla's roots) is shared by every caller, so load reuses upstream
//!   connections instead of opening one per request. It is built on first use:
//!   loading the system's CA certificates takes tens of milliseconds, which a server
//!   that never sends anything should not pay at start.
//! - **`--proxy-via`.** Every request goes through the forward proxy when one is set
//!   (WireMock's webhooks use it too).
//! - **Bounded.** Each call has a deadline from connecting to the end of the answer,
//!   and a caller may cap how much of the answer is read.
//!
//! What is specific to a caller stays with it: which headers a proxied request
//! forwards (`proxy.rs`), how many webhooks wait and go at once (`crate::webhooks`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::heads::{CaseConnector, UpstreamCase};
use super::targets::{CheckedResolver, ProxyTargets, is_prohibited};
use super::via::{ProxyVia, ViaConnector};
use decoy_spec::header_case::HeaderCase;

type Pool = Client<CaseConnector<hyper_rustls::HttpsConnector<ViaConnector>>, Full<Bytes>>;
/// gRPC calls: HTTP/2 only (prior knowledge on `http://`, ALPN `h2` on `https://`),
/// their request bodies streamed.
/// (No header-case scanner: HTTP/2 names are lower case, and an h2c connection's
/// bytes are no HTTP/1 heads.)
type GrpcPool = Client<hyper_rustls::HttpsConnector<ViaConnector>, GrpcOut>;
/// A proxied gRPC call's request body: the client's messages as they come.
pub type GrpcOut = decoy_grpc::proxy::OutBody;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// `--allow-proxy-targets` / `--deny-proxy-targets` refuse the target (its host
    /// as written, or an address it resolves to).
    Denied,
    /// No answer within the deadline.
    TimedOut(Duration),
    /// The target is down, or answered something unreadable: the error with its
    /// causes ("client error (Connect): tcp connect error: Connection refused").
    Failed(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Denied => f.write_str(super::targets::DENIED),
            SendError::TimedOut(t) => write!(f, "no answer within {} ms", t.as_millis()),
            SendError::Failed(reason) => f.write_str(reason),
        }
    }
}

/// What the target answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// How the target spelled the header names (`None`: not known, as over HTTP/2).
    pub header_case: Option<HeaderCase>,
    /// The body, or its first bytes when the caller capped it.
    pub body: Bytes,
}

/// The client every outbound request goes through; see the module's doc.
#[derive(Debug)]
pub struct Outbound {
    pool: OnceLock<Pool>,
    grpc_pool: OnceLock<GrpcPool>,
    /// `--proxy-via`: a forward proxy every request goes through.
    via: Option<Arc<ProxyVia>>,
    /// `--allow-proxy-targets` / `--deny-proxy-targets`.
    targets: Arc<ProxyTargets>,
}

impl Default for Outbound {
    /// Every target allowed, no forward proxy.
    fn default() -> Outbound {
        Outbound::new(ProxyTargets::default(), None)
    }
}

fn build_pool(via: Option<Arc<ProxyVia>>, targets: Arc<ProxyTargets>) -> Pool {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(CaseConnector {
            inner: connector(via, targets),
        })
}

fn build_grpc_pool(via: Option<Arc<ProxyVia>>, targets: Arc<ProxyTargets>) -> GrpcPool {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .http2_only(true)
        .build(connector(via, targets))
}

fn connector(
    via: Option<Arc<ProxyVia>>,
    targets: Arc<ProxyTargets>,
) -> hyper_rustls::HttpsConnector<ViaConnector> {
    // Resolved addresses are checked where names are resolved. Through `--proxy-via`
    // the only name resolved here is the proxy's own, which the rules are not about:
    // the target's host is then checked as written (see `send`).
    let rules = if via.is_some() {
        Arc::new(ProxyTargets::default())
    } else {
        targets
    };
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new_with_resolver(
        CheckedResolver::new(rules),
    );
    http.enforce_http(false);
    let tcp = ViaConnector { http, via };
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    };
    builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp)
}

impl Outbound {
    pub fn new(targets: ProxyTargets, via: Option<ProxyVia>) -> Outbound {
        Outbound {
            pool: OnceLock::new(),
            grpc_pool: OnceLock::new(),
            via: via.map(Arc::new),
            targets: Arc::new(targets),
        }
    }

    /// Whether the rules allow `uri`'s host as written (its resolved addresses are
    /// checked again when it is sent).
    pub fn allows(&self, uri: &http::Uri) -> bool {
        self.targets.allows_host(uri.host().unwrap_or_default())
    }

    /// Sends `req` (an absolute URI) and reads the answer, all within `deadline`;
    /// with `max_answer`, only that many bytes of the body are read (the rest is
    /// dropped with the connection).
    pub async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
        deadline: Duration,
        max_answer: Option<usize>,
    ) -> Result<Answer, SendError> {
        if !self.allows(req.uri()) {
            return Err(SendError::Denied);
        }
        // A plain request through the forward proxy carries its credentials; an
        // `https://` one sends them on the CONNECT instead (via.rs).
        if let Some(auth) = self.via.as_ref().and_then(|v| v.auth.clone())
            && req.uri().scheme_str() != Some("https")
        {
            req.headers_mut().insert(header::PROXY_AUTHORIZATION, auth);
        }
        let pool = self
            .pool
            .get_or_init(|| build_pool(self.via.clone(), self.targets.clone()));
        let exchange = async {
            let resp = pool.request(req).await.map_err(|e| {
                if is_prohibited(&e) {
                    SendError::Denied
                } else {
                    SendError::Failed(error_chain(&e))
                }
            })?;
            let status = resp.status().as_u16();
            let header_case = resp
                .extensions()
                .get::<UpstreamCase>()
                .and_then(|heads| heads.0.take(status));
            let (parts, body) = resp.into_parts();
            let body = match max_answer {
                None => body
                    .collect()
                    .await
                    .map_err(|e| SendError::Failed(error_chain(&e)))?
                    .to_bytes(),
                Some(max) => first_bytes(body, max).await,
            };
            Ok(Answer {
                status,
                headers: parts.headers,
                header_case,
                body,
            })
        };
        match tokio::time::timeout(deadline, exchange).await {
            Ok(r) => r,
            Err(_) => Err(SendError::TimedOut(deadline)),
        }
    }

    /// Opens a gRPC call (an absolute URI, HTTP/2): the answer's head within
    /// `deadline`, its body streamed to the caller as it comes.
    pub async fn open_grpc(
        &self,
        mut req: Request<GrpcOut>,
        deadline: Duration,
    ) -> Result<http::Response<hyper::body::Incoming>, SendError> {
        if !self.allows(req.uri()) {
            return Err(SendError::Denied);
        }
        if let Some(auth) = self.via.as_ref().and_then(|v| v.auth.clone())
            && req.uri().scheme_str() != Some("https")
        {
            req.headers_mut().insert(header::PROXY_AUTHORIZATION, auth);
        }
        let pool = self
            .grpc_pool
            .get_or_init(|| build_grpc_pool(self.via.clone(), self.targets.clone()));
        match tokio::time::timeout(deadline, pool.request(req)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) if is_prohibited(&e) => Err(SendError::Denied),
            Ok(Err(e)) => Err(SendError::Failed(error_chain(&e))),
            Err(_) => Err(SendError::TimedOut(deadline)),
        }
    }
}

/// At most `max` bytes of `body`; a body that breaks off keeps what came.
async fn first_bytes(mut body: hyper::body::Incoming, max: usize) -> Bytes {
    let mut out = BytesMut::new();
    while out.len() < max {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = max - out.len();
                    out.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            _ => break,
        }
    }
    out.freeze()
}

/// An error with its causes, which hyper's top-level message leaves out.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}
