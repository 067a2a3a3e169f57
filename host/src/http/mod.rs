//! The HTTP transport: hyper 1 on tokio, HTTP/1.1 keep-alive and HTTP/2 (h2c with prior
//! knowledge on the plain port, ALPN on the TLS port).
//!
//! A request is read whole (up to `max_body` bytes, else 413), snapshotted, handed to
//! the engine, and the returned plan is carried out: a `tokio::time::sleep` for delays
//! (a timer, not a thread, so 10,000 delayed requests cost only memory), a timed body
//! for dribbles, and [`fault::FaultIo`] for faults. No lock is held across any await.

pub mod body;
pub mod fault;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::engine::{Engine, Outcome, text_plan};
use crate::plan::ResponsePlan;
use crate::request::RequestSnapshot;
use body::ResponseBody;
use fault::{FaultIo, FaultSlot};

/// Default request body limit (16 MiB).
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Request bodies larger than this get 413.
    pub max_body: usize,
    /// Log every request and its outcome.
    pub verbose: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body: DEFAULT_MAX_BODY,
            verbose: false,
        }
    }
}

/// Everything a request handler needs; one per connection.
struct Conn {
    engine: Arc<Engine>,
    cfg: Arc<HttpConfig>,
    scheme: &'static str,
    peer: SocketAddr,
    fault: Arc<FaultSlot>,
}

/// Accepts connections on `listener` until `shutdown` turns true, then lets open
/// connections finish their current request (up to 5 s).
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    engine: Arc<Engine>,
    cfg: Arc<HttpConfig>,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = |scheme, fault| Conn {
            engine: engine.clone(),
            cfg: cfg.clone(),
            scheme,
            peer,
            fault,
        };
        let builder = builder.clone();
        match &acceptor {
            None => {
                let slot = Arc::new(FaultSlot::default());
                let io = TokioIo::new(FaultIo::new(stream, slot.clone()));
                let conn = Arc::new(conn("http", slot));
                let served = builder.serve_connection(io, service(conn)).into_owned();
                let watched = graceful.watch(served);
                tokio::spawn(async move {
                    let _ = watched.await;
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let conn = conn("https", Arc::new(FaultSlot::default()));
                let graceful_watch = graceful.watcher();
                tokio::spawn(async move {
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
                    let io = TokioIo::new(FaultIo::new(tls, conn.fault.clone()));
                    let served = builder
                        .serve_connection(io, service(Arc::new(conn)))
                        .into_owned();
                    let _ = graceful_watch.watch(served).await;
                });
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still busy after 5 s and were closed");
    }
}

fn service(
    conn: Arc<Conn>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<ResponseBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<ResponseBody>, Infallible>> + Send,
> + Clone {
    service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok(handle(req, &conn).await) }
    })
}

async fn handle(req: Request<Incoming>, conn: &Conn) -> Response<ResponseBody> {
    let version = req.version();
    let (parts, incoming) = req.into_parts();
    let too_big = || {
        render(
            text_plan(
                413,
                format!(
                    "request body larger than the limit of {} bytes\n",
                    conn.cfg.max_body
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
        .is_some_and(|n| n > conn.cfg.max_body as u64)
    {
        return too_big();
    }
    let body = match Limited::new(incoming, conn.cfg.max_body).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_big(),
        Err(e) => {
            return render(
                text_plan(400, format!("could not read the request body: {e}\n")),
                version,
            );
        }
    };

    let url = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/");
    let mut snap = RequestSnapshot::new(parts.method.as_str(), url);
    snap.scheme = conn.scheme;
    snap.client_addr = Some(conn.peer);
    snap.authority = parts.uri.authority().map(|a| a.as_str().to_owned());
    let snap = snap.with_headers(parts.headers).with_body(body);

    let outcome = conn.engine.respond(&snap);
    if conn.cfg.verbose {
        match &outcome {
            Outcome::Matched { mapping, plan } => {
                tracing::info!(
                    "{} {} -> {} {}",
                    snap.method,
                    snap.url,
                    plan.status,
                    mapping.label()
                )
            }
            Outcome::NotMatched { .. } => {
                tracing::info!("{} {} -> 404 (no mapping matched)", snap.method, snap.url)
            }
        }
    }
    let plan = outcome.into_plan();
    if !plan.delay.is_zero() {
        tokio::time::sleep(plan.delay).await;
    }
    if let Some(f) = plan.fault {
        if version == Version::HTTP_2 {
            // No socket tricks on a shared HTTP/2 connection: reset just this stream.
            let mut resp = Response::new(ResponseBody::Fail);
            *resp.status_mut() = StatusCode::OK;
            return resp;
        }
        conn.fault.arm(f);
        return Response::new(ResponseBody::Full(None));
    }
    render(plan, version)
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

/// Binds a listener; `port` 0 picks a free port.
pub async fn bind(addr: &str, port: u16) -> std::io::Result<TcpListener> {
    let ip: std::net::IpAddr = addr.parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr:?} is not an IP address"),
        )
    })?;
    let socket = match ip {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::new(ip, port))?;
    socket.listen(4096)
}
