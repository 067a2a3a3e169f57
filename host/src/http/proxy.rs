//! Forwarding a request to a real service: `proxyBaseUrl` stubs and recording.
//!
//! One pooled hyper client (HTTP/1.1 and HTTP/2, plain or TLS with the system's and
//! Mozilla's roots) is shared by every connection, so proxied load reuses upstream
//! connections instead of opening one per request.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::heads::{CaseConnector, UpstreamCase};
use super::targets::{CheckedResolver, ProxyTargets};
use super::via::{ProxyVia, ViaConnector};
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

type Inner = Client<CaseConnector<hyper_rustls::HttpsConnector<ViaConnector>>, Full<Bytes>>;

/// The client is built on first use: loading the system's CA certificates takes
/// tens of milliseconds, which a server without proxy stubs should not pay at start.
#[derive(Debug)]
pub struct ProxyClient {
    client: std::sync::OnceLock<Inner>,
    timeout: Duration,
    /// `--preserve-host-header`: send the client's `Host` instead of the target's.
    preserve_host: bool,
    /// `--proxy-via`: a forward proxy every proxied request goes through.
    via: Option<Arc<ProxyVia>>,
    /// `--allow-proxy-targets` / `--deny-proxy-targets`.
    targets: Arc<ProxyTargets>,
}

fn build_client(via: Option<Arc<ProxyVia>>, targets: Arc<ProxyTargets>) -> Inner {
    // Resolved addresses are checked where names are resolved. Through `--proxy-via`
    // the only name resolved here is the proxy's own, which the rules are not about:
    // the target's host is then checked as written (see `forward`).
    let rules = if via.is_some() {
        Arc::new(ProxyTargets::default())
    } else {
        targets
    };
    let mut http = HttpConnector::new_with_resolver(CheckedResolver::new(rules));
    http.enforce_http(false);
    let tcp = ViaConnector { http, via };
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    };
    let connector = builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(CaseConnector { inner: connector })
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
    pub fn new(timeout: Duration) -> ProxyClient {
        ProxyClient {
            client: std::sync::OnceLock::new(),
            timeout,
            preserve_host: false,
            via: None,
            targets: Arc::default(),
        }
    }

    /// Which targets may be reached (WireMock's `--allow-proxy-targets` and
    /// `--deny-proxy-targets`).
    pub fn targets(mut self, targets: ProxyTargets) -> ProxyClient {
        self.targets = Arc::new(targets);
        self
    }

    /// Send proxied requests through a forward proxy (WireMock's `--proxy-via`).
    pub fn via(mut self, via: Option<ProxyVia>) -> ProxyClient {
        self.via = via.map(Arc::new);
        self
    }

    /// Forward the client's `Host` header (WireMock's `--preserve-host-header`).
    pub fn preserving_host(mut self, yes: bool) -> ProxyClient {
        self.preserve_host = yes;
        self
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
        if !self.targets.allows_host(uri.host().unwrap_or_default()) {
            return Err(ProxyError::Denied);
        }
        let mut headers = HeaderMap::with_capacity(req.headers.len() + spec.add_headers.len());
        for (name, value) in &req.headers {
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
        if let Some(auth) = self.via.as_ref().and_then(|v| v.auth.clone())
            && uri.scheme_str() != Some("https")
        {
            headers.insert(header::PROXY_AUTHORIZATION, auth);
        }
        let method = http::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| ProxyError::Failed(format!("{:?} is not an HTTP method", req.method)))?;
        let mut out = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(req.body.clone()))
            .map_err(|e| ProxyError::Failed(e.to_string()))?;
        *out.headers_mut() = headers;
        let failure = |e: &dyn std::fmt::Display| {
            ProxyError::Failed(format!(
                "Network failure trying to make a proxied request from decoy to {target}\r\n{e}"
            ))
        };
        let call = async {
            let resp = self
                .client
                .get_or_init(|| build_client(self.via.clone(), self.targets.clone()))
                .request(out)
                .await
                .map_err(|e| {
                    if super::targets::is_prohibited(&e) {
                        ProxyError::Denied
                    } else {
                        failure(&e)
                    }
                })?;
            let status = resp.status().as_u16();
            let header_case = resp
                .extensions()
                .get::<UpstreamCase>()
                .and_then(|heads| heads.0.take(status));
            let headers: Vec<(HeaderName, HeaderValue)> = resp
                .headers()
                .iter()
                .filter(|(n, _)| !is_hop_by_hop(n) && *n != header::CONTENT_LENGTH)
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| failure(&e))?
                .to_bytes();
            Ok(Upstream {
                status,
                headers,
                header_case,
                body,
            })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(failure(&format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }
}
