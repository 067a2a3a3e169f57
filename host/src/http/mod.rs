//! The HTTP transport: hyper 1 on tokio, HTTP/1.1 keep-alive and HTTP/2 (h2c with prior
//! knowledge on the plain port, ALPN on the TLS port).
//!
//! A stubbed request goes through the serve step every transport shares
//! ([`decoy_core::serve`]); [`handle`] names its steps. This module does the HTTP
//! parts around it: it **decodes** (the body read whole, up to `max_body` bytes, else
//! 413; `/__admin` to the [`Admin`] API unless it moved to its own port; CORS
//! preflights; then a [`RequestSnapshot`]), **forwards** what a stub proxies through
//! its outbound [`ProxyClient`], and **encodes** the answer: CORS headers, the web root
//! for a GET no stub matched, the delay as a `tokio::time::sleep` (a timer, not a
//! thread, so 10,000 delayed requests cost only memory), a timed body for dribbles,
//! and [`fault::FaultIo`] for faults. No lock is held across any await.
//!
//! [`serve`] runs one port's connections, each in a task of the runtime that took it
//! ([`Source`]: its own listener, or a dealer's channel); [`threads`] decides which
//! threads and runtimes those are (`--thread-layout`).
//!
//! While the journal is on, HTTP/1 connections are read through [`heads::HeadIo`],
//! which notes how header names were spelled for the journal to show. A stub's
//! webhooks are handed off with the request, and wait until hyper is done with the
//! body.

pub mod body;
pub mod client;
pub mod conns;
pub mod cors;
pub mod fault;
pub mod heads;
pub mod jks;
pub mod proxy;
pub mod recorder;
pub mod targets;
pub mod threads;
pub mod tls;
pub mod via;
pub mod webroot;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::admin::{Admin, AdminRequest};
use body::ResponseBody;
use decoy_core::serve::{Arrival, Forwarded, Recorded, Serve};
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::{ProxySpec, ResponsePlan, text_plan};
use decoy_spec::request::RequestSnapshot;
use fault::{FaultIo, FaultSlot};
use proxy::ProxyClient;

/// The transport's name: the `transport` label of its metrics.
pub const TRANSPORT: &str = "http";

/// Default request body limit (16 MiB).
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Request bodies larger than this get 413.
    pub max_body: usize,
    /// Log every request and its outcome.
    pub verbose: bool,
    /// `--enable-stub-cors`: answer CORS preflights and add CORS headers to stub answers.
    pub stub_cors: bool,
    /// `--admin-api-basic-auth`: the `user:password` admin requests must send.
    pub admin_basic_auth: Option<String>,
    /// `--admin-api-require-https`: admin requests over plain HTTP get a 403.
    pub admin_require_https: bool,
    /// How long a kept-alive HTTP/1 connection may sit idle (and a client may take to
    /// send a request's headers) before it is closed (`--jetty-idle-timeout`).
    pub idle_timeout: Duration,
    /// HTTP/2 with prior knowledge on the plain port (`--disable-http2-plain` turns it off).
    pub http2_plain: bool,
    /// HTTP/2 by ALPN on the HTTPS port (`--disable-http2-tls` turns it off).
    pub http2_tls: bool,
    /// The most connections open at once, across listeners (`--max-connections`;
    /// `None`: [`conns::default_max_connections`] for the open-file limit).
    pub max_connections: Option<usize>,
    /// Which threads serve the stub ports' connections (`--thread-layout`; by
    /// default what `DECOY_THREAD_LAYOUT` names, else [`threads::Layout::default`]).
    pub layout: threads::Layout,
    /// How many threads serve them in a per-thread layout (`--container-threads`;
    /// `None`: [`decoy_core::threads::default_threads`], one per core but one).
    pub threads: Option<usize>,
}

/// Jetty's default idle timeout, which WireMock keeps.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body: DEFAULT_MAX_BODY,
            verbose: false,
            stub_cors: false,
            admin_basic_auth: None,
            admin_require_https: false,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            http2_plain: true,
            http2_tls: true,
            max_connections: None,
            layout: threads::Layout::from_env(),
            threads: None,
        }
    }
}

/// HTTP's serve step: the engine, the journal, this transport's counters, webhooks
/// and `--record-mappings`.
pub type HttpServe = Serve<crate::webhooks::WebhookSender, Arc<recorder::Recorder>>;

/// What every listener shares: the serve step and what the transport itself needs.
#[derive(Debug)]
pub struct Services {
    pub serve: HttpServe,
    /// The outbound client proxied requests go through.
    pub proxy: ProxyClient,
    /// The admin API (`None` in the few tests that run without one).
    pub admin: Option<Arc<Admin>>,
    /// `__files`, served as a web root to GETs no stub matches (`None`: not served).
    pub web_root: Option<webroot::WebRoot>,
    pub cfg: HttpConfig,
    /// Open connections across every listener, against `--max-connections`.
    pub connections: Arc<conns::ConnLimit>,
    /// gRPC calls (HTTP/2, `application/grpc`) go here (`None`: served as HTTP).
    pub grpc: Option<Arc<crate::grpc::GrpcServe>>,
}

/// What a listener answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Stubs, and the admin API under `/__admin` (WireMock's default).
    StubsAndAdmin,
    /// Stubs only (`--admin-port` moved the admin API elsewhere).
    Stubs,
    /// The admin API only, on `--admin-port`.
    Admin,
}

/// Everything a request handler needs; one per connection.
struct Conn {
    services: Arc<Services>,
    role: Role,
    scheme: &'static str,
    peer: SocketAddr,
    local_port: u16,
    fault: Arc<FaultSlot>,
    /// Traffic and requests in flight, for the idle timeout.
    activity: Arc<conns::Activity>,
    /// How the HTTP/1 request heads spelled their header names (`None`: not read,
    /// when the journal is off or the connection speaks HTTP/2).
    heads: Option<Arc<heads::RequestHeads>>,
}

/// Where a serving loop gets its connections: its own listener, or the connections
/// a dealer accepted for it (see [`threads`]).
#[derive(Debug)]
pub enum Source {
    Listener(TcpListener),
    Dealt(tokio::sync::mpsc::UnboundedReceiver<threads::Dealt>),
}

impl Source {
    /// The next connection, with its slot under `--max-connections`. A listener's
    /// accept errors (out of file descriptors, most often) are waited out with a
    /// back-off, and a connection past the cap is closed at once (dropped). `None`:
    /// the dealer has stopped.
    async fn next(
        &mut self,
        limit: &Arc<conns::ConnLimit>,
        backoff: &mut conns::AcceptBackoff,
    ) -> Option<(TcpStream, SocketAddr, conns::ConnSlot)> {
        match self {
            Source::Listener(listener) => loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        backoff.succeeded();
                        if let Some(slot) = limit.acquire() {
                            return Some((stream, peer, slot));
                        }
                    }
                    Err(e) => tokio::time::sleep(backoff.failed(&e)).await,
                }
            },
            Source::Dealt(rx) => loop {
                let dealt = rx.recv().await?;
                // Registered with this thread's runtime from here on.
                match TcpStream::from_std(dealt.stream) {
                    Ok(stream) => return Some((stream, dealt.peer, dealt.slot)),
                    Err(e) => {
                        tracing::debug!("cannot take over the connection from {}: {e}", dealt.peer)
                    }
                }
            },
        }
    }
}

/// How one port serves a connection: its role, TLS, and hyper's settings. Shared by
/// every serving loop of the port.
#[derive(Clone)]
pub struct Port {
    services: Arc<Services>,
    role: Role,
    tls: Option<tokio_rustls::TlsAcceptor>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    local_port: u16,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("role", &self.role)
            .field("tls", &self.tls.is_some())
            .field("local_port", &self.local_port)
            .finish_non_exhaustive()
    }
}

impl Port {
    pub fn new(
        services: Arc<Services>,
        tls: Option<Arc<rustls::ServerConfig>>,
        role: Role,
        local_port: u16,
    ) -> Port {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            // A timer per request; the connection's watchdog does this job (see conns.rs).
            .header_read_timeout(None);
        builder.http2().timer(TokioTimer::new());
        let http2 = if tls.is_some() {
            services.cfg.http2_tls
        } else {
            services.cfg.http2_plain
        };
        if !http2 {
            builder = builder.http1_only();
        }
        Port {
            services,
            role,
            tls: tls.map(tokio_rustls::TlsAcceptor::from),
            builder: Arc::new(builder),
            local_port,
        }
    }

    /// Serves one connection in a task of the current runtime (the thread that
    /// accepted it, or was dealt it), watched by `graceful` for the drain.
    fn spawn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: conns::ConnSlot,
        graceful: &GracefulShutdown,
    ) {
        let services = &self.services;
        let idle_timeout = services.cfg.idle_timeout;
        let _ = stream.set_nodelay(true);
        let activity = conns::Activity::new();
        let conn = |scheme, fault| Conn {
            services: services.clone(),
            role: self.role,
            scheme,
            peer,
            local_port: self.local_port,
            fault,
            activity: activity.clone(),
            heads: None,
        };
        let builder = self.builder.clone();
        match &self.tls {
            None => {
                let fault = Arc::new(FaultSlot::default());
                let mut conn = conn("http", fault.clone());
                conn.heads = services.serve.journal().enabled().then(Arc::default);
                let io = TokioIo::new(heads::HeadIo::new(
                    conns::Tracked::new(FaultIo::new(stream, fault), activity.clone()),
                    conn.heads.clone(),
                ));
                let conn = Arc::new(conn);
                let served = builder.serve_connection(io, service(conn)).into_owned();
                let watched = graceful.watch(served);
                tokio::spawn(async move {
                    let _slot = slot;
                    // Dropped (closed) once idle, counted from accept: a client that
                    // never sends a byte no longer holds its socket forever.
                    tokio::select! {
                        // In this order: no random pick on every wake-up.
                        biased;
                        _ = watched => {}
                        _ = activity.idle(idle_timeout) => {
                            tracing::debug!("closing the idle connection from {peer}");
                        }
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let mut conn = conn("https", Arc::new(FaultSlot::default()));
                let graceful_watch = graceful.watcher();
                tokio::spawn(async move {
                    let _slot = slot;
                    let tls = match tokio::time::timeout(
                        Duration::from_secs(10),
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake with {peer} failed: {e}");
                            return;
                        }
                        Err(_) => return,
                    };
                    // Names are lower case on an HTTP/2 connection: nothing to read.
                    let scan = conn.services.serve.journal().enabled()
                        && tls.get_ref().1.alpn_protocol() != Some(b"h2");
                    conn.heads = scan.then(Arc::default);
                    let io = TokioIo::new(heads::HeadIo::new(
                        conns::Tracked::new(
                            FaultIo::new(tls, conn.fault.clone()),
                            activity.clone(),
                        ),
                        conn.heads.clone(),
                    ));
                    let served = builder
                        .serve_connection(io, service(Arc::new(conn)))
                        .into_owned();
                    tokio::select! {
                        _ = graceful_watch.watch(served) => {}
                        _ = activity.idle(idle_timeout) => {
                            tracing::debug!("closing the idle connection from {peer}");
                        }
                    }
                });
            }
        }
    }
}

/// Serves the connections `source` gives, each in a task of the current runtime,
/// until `shutdown` turns true (or its sender is gone); then lets open connections
/// finish their current request (up to 5 s).
pub async fn serve(mut source: Source, port: Port, mut shutdown: watch::Receiver<bool>) {
    let graceful = GracefulShutdown::new();
    let mut backoff = conns::AcceptBackoff::default();
    let limit = port.services.connections.clone();
    loop {
        let next = tokio::select! {
            next = source.next(&limit, &mut backoff) => next,
            _ = shutdown.changed() => None,
        };
        let Some((stream, peer, slot)) = next else {
            break;
        };
        port.spawn(stream, peer, slot, &graceful);
    }
    drop(source);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still busy after 5 s and were closed");
    }
}

/// A response body that keeps its request counted as in flight until it is sent.
type Tracked = conns::TrackedBody<ResponseBody>;

fn service(
    conn: Arc<Conn>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, Infallible>> + Send,
> + Clone {
    service_fn(move |req| {
        let conn = conn.clone();
        async move {
            let guard = conn.activity.request();
            let resp = handle(req, &conn).await;
            Ok(resp.map(|body| conns::TrackedBody::new(body, Some(guard))))
        }
    })
}

/// One request: decode, answer, forward (a proxy stub), record, encode, delay or
/// fault, hand off the webhooks.
async fn handle(req: Request<Incoming>, conn: &Conn) -> Response<ResponseBody> {
    let services = &conn.services;
    if let Some(grpc) = &services.grpc
        && conn.role != Role::Admin
        && decoy_grpc::is_grpc(&req)
    {
        // This branch and the admin API, a proxied forward and the web root below are
        // boxed: their state would otherwise size every request's future, which is
        // moved (copied) several times on its way through hyper.
        return Box::pin(crate::grpc::call(
            grpc,
            req,
            conn.scheme,
            conn.peer,
            conn.local_port,
        ))
        .await;
    }
    let version = req.version();
    // Claimed first: every HTTP/1 request on the connection claims its head, in order.
    let header_case = match (version, &conn.heads) {
        (Version::HTTP_10 | Version::HTTP_11, Some(heads)) => {
            heads.claim(req.method().as_str(), origin_target_len(req.uri()))
        }
        (Version::HTTP_10 | Version::HTTP_11, None) => HeaderCase::jetty(),
        _ => HeaderCase::as_sent(),
    };
    let (parts, incoming) = req.into_parts();
    let too_big = || {
        render(
            text_plan(
                413,
                format!(
                    "request body larger than the limit of {} bytes\n",
                    services.cfg.max_body
                ),
            ),
            version,
        )
    };
    if parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > services.cfg.max_body as u64)
    {
        return too_big();
    }
    // A request with no body (most GETs) skips collecting one: hyper knows it is
    // empty from the head.
    let body = match Limited::new(incoming, services.cfg.max_body) {
        none if http_body::Body::is_end_stream(&none) => Ok(Bytes::new()),
        some => some.collect().await.map(|b| b.to_bytes()),
    };
    let body = match body {
        Ok(b) => b,
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_big(),
        Err(e) => {
            return render(
                text_plan(400, format!("could not read the request body: {e}\n")),
                version,
            );
        }
    };
    let read_at = Instant::now();

    // A request ending in `?` with nothing after it is the URL without the `?`, as
    // WireMock sees it (its servlet container reports no query string).
    let url = match parts.uri.path_and_query() {
        Some(pq) if pq.query() == Some("") => pq.path(),
        Some(pq) => pq.as_str(),
        None => "/",
    };
    let admin_path = parts.uri.path().strip_prefix("/__admin");
    let admin_path = admin_path.filter(|rest| rest.is_empty() || rest.starts_with('/'));
    match (conn.role, admin_path, &services.admin) {
        (Role::StubsAndAdmin | Role::Admin, Some(rest), Some(admin)) => {
            if let Some(mut refused) = admin_refusal(&services.cfg, conn.scheme, &parts.headers) {
                // Under --admin-api-basic-auth a browser opening the dashboard is
                // asked for the credentials (WireMock's API answers stay as they are).
                if refused.status == 401 && rest.starts_with("/dashboard") {
                    refused.headers = Arc::from(vec![(
                        http::header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"decoy admin\""),
                    )]);
                }
                return render(refused, version);
            }
            return Box::pin(admin_reply(admin, &parts, conn.scheme, rest, body, version)).await;
        }
        (Role::Admin, _, _) => {
            return render(
                text_plan(
                    404,
                    "this port serves only the admin API, under /__admin\n".into(),
                ),
                version,
            );
        }
        _ => {}
    }

    if services.cfg.stub_cors
        && let Some(preflight) = cors::preflight(&parts.method, &parts.headers)
    {
        return render(preflight, version);
    }
    let cors_origin = services
        .cfg
        .stub_cors
        .then(|| parts.headers.get(http::header::ORIGIN).cloned());

    // Decode: the request as the serve step sees it.
    let mut snap = RequestSnapshot::new(parts.method.as_str(), url);
    snap.scheme = conn.scheme;
    snap.client_addr = Some(conn.peer);
    snap.authority = parts.uri.authority().map(|a| a.as_str().to_owned());
    snap.header_case = header_case;
    snap.headers = parts.headers;
    snap.body = body;

    // Answer: match, plan, transformers. Forward what a stub proxies.
    let serve = &services.serve;
    let mut exchange = serve.answer(&snap).await;
    if let Some(spec) = exchange.take_proxy() {
        let got = Box::pin(forward(&services.proxy, &spec, &snap)).await;
        serve.forwarded(&mut exchange, &snap, got);
    }
    // Record (CORS headers first: the journal shows what the client got).
    if let Some(origin) = cors_origin {
        let matched = exchange.matched();
        cors::decorate(&mut exchange.plan, origin, matched);
    }
    let Recorded {
        mut plan,
        matched,
        webhooks,
    } = serve.record(
        exchange,
        snap,
        Arrival {
            read_at,
            protocol: protocol_name(version),
            local_port: conn.local_port,
        },
    );

    // Encode. A GET no stub matched may name a file under `__files`. It stays an unmatched
    // request in the journal and metrics, as in WireMock.
    let mut file_body = None;
    if !matched
        && parts.method == http::Method::GET
        && let Some(root) = &services.web_root
        && let Some(served) = Box::pin(root.answer(parts.uri.path())).await
    {
        plan = served.plan;
        file_body = served.body;
    }
    if !plan.delay.is_zero() {
        tokio::time::sleep(plan.delay).await;
    }
    let resp = match plan.fault {
        // No socket tricks on a shared HTTP/2 connection: reset just this stream.
        Some(_) if version == Version::HTTP_2 => {
            let mut resp = Response::new(ResponseBody::Fail);
            *resp.status_mut() = StatusCode::OK;
            resp
        }
        Some(f) => {
            conn.fault.arm(f);
            Response::new(ResponseBody::Full(None))
        }
        None => {
            let mut resp = render(plan, version);
            if let Some(file) = file_body {
                *resp.body_mut() = ResponseBody::File(file);
            }
            resp
        }
    };
    // Hand off: the webhooks go once hyper is done with the body (the answer is out).
    match webhooks {
        Some(mut fired) => {
            let (done, out) = tokio::sync::oneshot::channel::<()>();
            fired.after = Some(Box::pin(async move {
                let _ = out.await;
            }));
            serve.hand_off(fired);
            resp.map(|body| ResponseBody::Then(Box::new(body), done))
        }
        None => resp,
    }
}

/// Forwards a request its stub proxies through the outbound client, and says what
/// came back as the serve step takes it.
async fn forward(proxy: &ProxyClient, spec: &ProxySpec, snap: &RequestSnapshot) -> Forwarded {
    match proxy.forward(spec, snap).await {
        Ok(up) => Forwarded::Answer {
            status: up.status,
            headers: up.headers,
            body: up.body,
            header_case: up.header_case,
        },
        Err(proxy::ProxyError::Failed(message)) => {
            tracing::warn!("{message}");
            Forwarded::Failed(text_plan(500, message))
        }
        Err(proxy::ProxyError::Denied) => {
            tracing::warn!(
                "a proxied request to {} was refused by --allow-proxy-targets / --deny-proxy-targets",
                spec.target(&snap.url)
            );
            let mut plan = text_plan(500, targets::DENIED.to_owned());
            // WireMock's exact header for this answer.
            plan.headers = Arc::from(vec![(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            )]);
            Forwarded::Failed(plan)
        }
    }
}

/// The length of an origin-form request target (`/path?query`, `*`) as received;
/// `None` for the absolute and authority forms, which hyper's `Uri` may respell.
fn origin_target_len(uri: &http::Uri) -> Option<usize> {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return None;
    }
    uri.path_and_query().map(|p| p.as_str().len())
}

fn protocol_name(v: Version) -> &'static str {
    match v {
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    }
}

/// `--admin-api-require-https` and `--admin-api-basic-auth`, checked as WireMock
/// checks them: HTTPS first (403 with WireMock's error document), then the
/// credentials (401 with no body).
fn admin_refusal(
    cfg: &HttpConfig,
    scheme: &str,
    headers: &http::HeaderMap,
) -> Option<ResponsePlan> {
    if cfg.admin_require_https && scheme != "https" {
        let mut plan = text_plan(
            403,
            "{\n  \"errors\" : [ {\n    \"code\" : 40,\n    \"title\" : \"HTTPS is required for accessing the admin API\"\n  } ]\n}".into(),
        );
        plan.headers = Arc::from(vec![(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )]);
        return Some(plan);
    }
    let expected = cfg.admin_basic_auth.as_deref()?;
    let given = headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (scheme, creds) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then_some(creds.trim())
        })
        .filter_map(|c| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(c).ok()
        })
        .any(|c| c == expected.as_bytes());
    if given {
        None
    } else {
        let mut plan = text_plan(401, String::new());
        plan.headers = Arc::from(Vec::new());
        Some(plan)
    }
}

/// Runs an admin request on a blocking thread (some endpoints read or write files).
async fn admin_reply(
    admin: &Arc<Admin>,
    parts: &http::request::Parts,
    scheme: &'static str,
    rest: &str,
    body: Bytes,
    version: Version,
) -> Response<ResponseBody> {
    let req = AdminRequest {
        method: parts.method.as_str().to_owned(),
        path: rest.to_owned(),
        query: parts
            .uri
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default(),
        authorization: parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        scheme,
        authority: parts.uri.authority().map(|a| a.as_str().to_owned()),
        headers: parts.headers.clone(),
        body,
    };
    let handler = admin.clone();
    let reply = match tokio::task::spawn_blocking(move || handler.handle(&req)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("admin request failed: {e}");
            return render(
                text_plan(500, format!("admin request failed: {e}\n")),
                version,
            );
        }
    };
    // The dashboard's live stream: the admin API said yes (token and all), and the
    // stream itself is fed by a task of its own.
    if reply.status == 200 && reply.content_type == crate::admin::dashboard::EVENT_STREAM {
        let mut resp = Response::new(ResponseBody::Events(crate::admin::dashboard::event_stream(
            admin,
        )));
        let headers = resp.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(crate::admin::dashboard::EVENT_STREAM),
        );
        headers.insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        return resp;
    }
    let body = match reply.stream {
        None => ResponseBody::full(reply.body),
        Some(crate::admin::Streamed(produce)) => {
            // A few pieces in flight at most: the producer waits for the client.
            let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
            let head = reply.body;
            tokio::task::spawn_blocking(move || {
                if !head.is_empty() && tx.blocking_send(head).is_err() {
                    return;
                }
                produce(&mut |piece| tx.blocking_send(piece).is_ok());
            });
            ResponseBody::Channel(rx)
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    if !resp.body().is_empty_full() {
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(reply.content_type),
        );
    }
    resp
}

/// Turns a plan into a hyper response.
fn render(plan: ResponsePlan, version: Version) -> Response<ResponseBody> {
    let body = match plan.dribble {
        Some(d) if !plan.body.is_empty() => ResponseBody::dribble(plan.body, d),
        _ => ResponseBody::full(plan.body),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() =
        StatusCode::from_u16(plan.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(msg) = plan.status_message
        && version != Version::HTTP_2
        && let Ok(reason) =
            hyper::ext::ReasonPhrase::try_from(Bytes::copy_from_slice(msg.as_bytes()))
    {
        resp.extensions_mut().insert(reason);
    }
    let headers = resp.headers_mut();
    for (name, value) in plan.headers.iter() {
        headers.append(name.clone(), value.clone());
    }
    resp
}
