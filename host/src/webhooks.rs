//! Sending webhooks: the [`WebhookSink`] both transports hand served requests to.
//!
//! Each webhook of a served request is a tokio task: it waits until the answer is out
//! (the HTTP response written, the MQ reply confirmed), then its own `delay`, renders
//! its templates, takes one of `--webhook-threadpool-size` sending slots (10 by
//! default, WireMock's pool size) and sends the request through one pooled hyper
//! client (HTTP/1.1 and HTTP/2, plain or TLS), with a bounded wait for the answer.
//! Nothing it does reaches the answer it follows: the answer was already sent. The
//! outcome is logged (info when the target answered, warn with the reason when it did
//! not) and counted in `decoy_webhooks_total{outcome}`. At most [`MAX_PENDING`]
//! webhooks wait at once (delays included); beyond that they are dropped, counted and
//! logged, so a flood of delayed webhooks cannot exhaust memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;

use decoy_core::metrics::Metrics;
use decoy_core::webhooks::{Fired, Webhook, WebhookCall, WebhookSink, check_url};

/// WireMock's default `--webhook-threadpool-size`.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// How long a webhook may take, from connecting to the end of the answer.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Webhooks waiting (for their delay or a sending slot) beyond which new ones are
/// dropped.
pub const MAX_PENDING: usize = 10_000;
/// How much of the target's answer is read (the rest is dropped with the connection).
const MAX_ANSWER: usize = 1024 * 1024;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The sender shared by every listener and the MQ runtime.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Built on first use (loading the CA roots takes tens of milliseconds).
    client: std::sync::OnceLock<HttpsClient>,
    slots: Arc<Semaphore>,
    pending: AtomicUsize,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

fn build_client() -> HttpsClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    };
    let connector = builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

impl WebhookSender {
    /// At most `concurrency` webhooks are sent at once (at least 1).
    pub fn new(concurrency: usize, metrics: Arc<Metrics>) -> WebhookSender {
        WebhookSender::with_timeout(concurrency, SEND_TIMEOUT, metrics)
    }

    pub fn with_timeout(
        concurrency: usize,
        timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> WebhookSender {
        WebhookSender {
            inner: Arc::new(Inner {
                client: std::sync::OnceLock::new(),
                slots: Arc::new(Semaphore::new(concurrency.max(1))),
                pending: AtomicUsize::new(0),
                timeout,
                metrics,
            }),
        }
    }
}

impl WebhookSink for WebhookSender {
    fn fire(&self, fired: Fired) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "webhooks of {} not sent: no async runtime to send them on",
                fired.mapping
            );
            return;
        };
        let n = fired.hooks.len();
        let inner = &self.inner;
        if inner.pending.fetch_add(n, Ordering::Relaxed) + n > MAX_PENDING {
            inner.pending.fetch_sub(n, Ordering::Relaxed);
            inner
                .metrics
                .webhooks
                .dropped
                .fetch_add(n as u64, Ordering::Relaxed);
            tracing::warn!(
                "webhooks of {} dropped: {MAX_PENDING} webhooks are already waiting to be sent",
                fired.mapping
            );
            return;
        }
        let inner = self.inner.clone();
        runtime.spawn(async move {
            if let Some(after) = fired.after {
                after.await;
            }
            let fired = Arc::new((fired.hooks, fired.mapping_id, fired.mapping, fired.request));
            for i in 0..n {
                let (inner, fired) = (inner.clone(), fired.clone());
                tokio::spawn(async move {
                    let (hooks, id, mapping, request) = &*fired;
                    let hook = &hooks[i];
                    inner.run(hook, id, mapping, request).await;
                    inner.pending.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
    }
}

impl Inner {
    /// One webhook: its delay, its rendering, its sending, its outcome.
    async fn run(
        &self,
        hook: &Webhook,
        mapping_id: &str,
        mapping: &str,
        request: &decoy_plugin_host::PluginRequest,
    ) {
        if let Some(d) = &hook.delay {
            tokio::time::sleep(d.sample()).await;
        }
        // Just after start `response-template` may still be compiling; a webhook
        // can wait for it (bounded) where an answer could not.
        let waited = std::time::Instant::now();
        while hook.templater_loading() && waited.elapsed() < self.timeout {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let counters = &self.metrics.webhooks;
        let call = match hook.render(mapping_id, request) {
            Ok(c) => c,
            Err(reason) => {
                counters.invalid.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("webhook {} of {mapping} not sent: {reason}", hook.at);
                return;
            }
        };
        let outgoing = match to_request(&call) {
            Ok(r) => r,
            Err(reason) => {
                counters.invalid.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "webhook {} {} of {mapping} not sent: {reason}",
                    call.method,
                    call.url
                );
                return;
            }
        };
        let Ok(_slot) = self.slots.acquire().await else {
            return;
        };
        let client = self.client.get_or_init(build_client);
        let exchange = async {
            let resp = client
                .request(outgoing)
                .await
                .map_err(|e| error_chain(&e))?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Ok::<_, String>((status, body))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok((status, body))) => {
                counters.sent.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    "webhook {} {} of {mapping} returned status {status}",
                    call.method,
                    call.url
                );
                tracing::debug!(
                    "webhook {} {} answered: {}",
                    call.method,
                    call.url,
                    String::from_utf8_lossy(&body[..body.len().min(2048)])
                );
            }
            Ok(Err(reason)) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "webhook {} {} of {mapping} failed: {reason}",
                    call.method,
                    call.url
                );
            }
            Err(_) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "webhook {} {} of {mapping} failed: no answer within {} ms",
                    call.method,
                    call.url,
                    self.timeout.as_millis()
                );
            }
        }
    }
}

/// The hyper request for a rendered webhook; the error says what is not valid.
fn to_request(call: &WebhookCall) -> Result<http::Request<Full<Bytes>>, String> {
    let uri = check_url(&call.url)?;
    let method = http::Method::from_bytes(call.method.as_bytes())
        .map_err(|_| format!("{:?} is not an HTTP method", call.method))?;
    let mut req = http::Request::builder().method(method).uri(uri);
    for (name, value) in &call.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a valid header name"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("header {name}: {value:?} is not a valid header value"))?;
        req = req.header(name, value);
    }
    req.body(Full::new(call.body.clone().unwrap_or_default()))
        .map_err(|e| e.to_string())
}

/// A client error with its causes ("client error (Connect): tcp connect error:
/// Connection refused"), which hyper's top-level message leaves out.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}
