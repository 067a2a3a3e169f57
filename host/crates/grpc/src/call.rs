//! One call, from the HTTP/2 request to the answer's trailers.
//!
//! The request body is read message by message as it arrives (`Reader`), never
//! whole, so streams of any length cost one message of memory. Each request message
//! goes through the serve step as its own [`RequestSnapshot`]:
//!
//! - **unary, server streaming**: the one request message is matched; the stub's
//!   answer is one message (a JSON object) or, for a server stream, a JSON array of
//!   messages sent `chunkedDribbleDelay.totalDuration / n` apart; then the status.
//! - **client streaming**: each message is matched as it comes, and the first that a
//!   stub answers decides the answer, sent once the client has finished sending
//!   (the WireMock extension's rule).
//! - **bidirectional**: each message is matched as it comes and the stub's messages
//!   are sent at once; a stub that ends with a status other than OK ends the call.
//!
//! A stub's delay is a timer; a client's `grpc-timeout` shorter than it ends the call
//! with DEADLINE_EXCEEDED at the deadline, as a real server's would.

use std::collections::VecDeque;
use std::fmt::Display;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use decoy_core::serve::{Arrival, Exchange, Forwarded, NoRecording, Recorded, Recording, Serve};
use decoy_core::webhooks::WebhookSink;
use decoy_spec::header_case::HeaderCase;
use decoy_spec::plan::{ProxySpec, ResponsePlan};
use decoy_spec::request::RequestSnapshot;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body::{Body, Frame};
use prost::Message as _;
use prost_reflect::MethodDescriptor;
use tokio::time::Instant;

use crate::body::{GrpcBody, trailers};
use crate::builtin::{self, Builtin};
use crate::catalog::Catalog;
use crate::json;
use crate::metrics::MethodMetrics;
use crate::proxy::{Forward, OutBody};
use crate::status::{self, Code};
use crate::wire::{self, Decoder, Encoding, FrameError};

/// The largest request message read by default (gRPC's own default is 4 MiB).
pub const DEFAULT_MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The gRPC transport: the services the root declares and the serve step its calls
/// go through. One per server, shared by every connection.
#[derive(Debug)]
pub struct GrpcServer<W, R = NoRecording> {
    root: PathBuf,
    catalog: ArcSwap<Catalog>,
    serve: Serve<W, R>,
    max_message: usize,
    /// The transport's outbound client for proxy stubs (`None`: a proxy stub's call
    /// ends with UNIMPLEMENTED, saying so).
    forward: Option<Arc<dyn Forward>>,
    /// Calls per method, by the status they ended with.
    methods: Arc<MethodMetrics>,
}

/// Where a call came in.
#[derive(Debug, Clone, Copy)]
pub struct CallInfo {
    pub scheme: &'static str,
    pub peer: Option<SocketAddr>,
    pub local_port: u16,
}

/// A status a call ends with.
#[derive(Debug, Clone)]
pub struct Status {
    pub code: Code,
    pub message: String,
}

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }
}

/// What a stub's answer means for a call.
#[derive(Debug)]
enum Answer {
    /// Messages (encoded), then OK, or the status the stub names.
    Messages(Vec<Vec<u8>>, Status),
    /// A fault: the stream is reset.
    Reset,
}

impl<W: WebhookSink + 'static, R: Recording + 'static> GrpcServer<W, R> {
    /// Serves the services `catalog` declares (read from `root`'s `grpc/`), answering
    /// through `serve`.
    pub fn new(root: &Path, catalog: Catalog, serve: Serve<W, R>) -> Self {
        let methods = Arc::new(MethodMetrics::default());
        methods.sync(&catalog);
        GrpcServer {
            methods,
            root: root.to_path_buf(),
            catalog: ArcSwap::from_pointee(catalog),
            serve,
            max_message: DEFAULT_MAX_MESSAGE,
            forward: None,
        }
    }

    /// Proxy stubs' calls go out through `forward`.
    pub fn with_forward(mut self, forward: Arc<dyn Forward>) -> Self {
        self.forward = Some(forward);
        self
    }

    /// Request messages larger than `max` bytes end the call with RESOURCE_EXHAUSTED.
    pub fn with_max_message(mut self, max: usize) -> Self {
        self.max_message = max;
        self
    }

    /// Calls per method (a section of `/__admin/metrics`).
    pub fn method_metrics(&self) -> Arc<MethodMetrics> {
        self.methods.clone()
    }

    /// The services served now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    pub fn serve(&self) -> &Serve<W, R> {
        &self.serve
    }

    /// Reads `grpc/` again and serves what it declares now. Calls in flight finish
    /// with the descriptors they started with.
    pub fn reload(&self) -> Arc<Catalog> {
        let cat = Catalog::load(&self.root);
        for p in &cat.problems {
            tracing::warn!("{p}");
        }
        // Warnings are said as they appear (those of the first load are printed at
        // start), not again by every later reload.
        let said = self.catalog.load();
        for w in cat.warnings.iter().filter(|w| !said.warnings.contains(w)) {
            tracing::warn!("{w}");
        }
        tracing::info!(
            "gRPC: {} method(s) from {} file(s) under {}",
            cat.method_count(),
            cat.files,
            self.root.join(crate::catalog::DIR).display()
        );
        self.methods.sync(&cat);
        let cat = Arc::new(cat);
        self.catalog.store(cat.clone());
        cat
    }

    /// Answers one call.
    pub async fn call<B>(
        self: &Arc<Self>,
        req: http::Request<B>,
        info: CallInfo,
    ) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        let catalog = self.catalog.load_full();
        let Some(method) = catalog.method(path).cloned() else {
            if let Some(b) = builtin::builtin(path) {
                return self.builtin(b, &catalog, parts, body).await;
            }
            let s = Status::new(
                Code::UNIMPLEMENTED,
                format!("Method not found: {}", path.trim_start_matches('/')),
            );
            // Journaled as not matched (its messages are not read: no descriptor says
            // what they are), so near misses name the stubs of a mistyped method.
            let snap = snapshot_of(path, &parts, &info, String::new());
            self.serve.record_unmatched(
                snap,
                failed_plan(&s),
                Arrival {
                    read_at: std::time::Instant::now(),
                    protocol: "HTTP/2.0",
                    local_port: info.local_port,
                },
            );
            self.methods.of("").ended(Some(s.code));
            return status_only(&s, &[]);
        };
        let counter = self.methods.of(path);
        let resp = self.declared(method, parts, body, info).await;
        // A trailers-only answer has its status in the head; any other, at its end.
        match resp.headers().get("grpc-status") {
            Some(code) => {
                counter.ended(Some(status_in(code, None).code));
                resp
            }
            None => resp.map(|b| b.counted(counter)),
        }
    }

    /// A call of a method the descriptors declare.
    async fn declared<B>(
        self: &Arc<Self>,
        method: MethodDescriptor,
        parts: http::request::Parts,
        body: B,
        info: CallInfo,
    ) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let path = parts.uri.path().to_owned();
        if parts.method != http::Method::POST {
            return status_only(
                &Status::new(Code::UNIMPLEMENTED, "a gRPC call is a POST"),
                &[],
            );
        }
        let encoding = match Encoding::from_header(parts.headers.get("grpc-encoding")) {
            Ok(e) => e,
            Err(m) => return status_only(&Status::new(Code::UNIMPLEMENTED, m), &[]),
        };
        let call = Call {
            answer_encoding: Encoding::answer(encoding, parts.headers.get("grpc-accept-encoding")),
            deadline: wire::timeout(parts.headers.get("grpc-timeout")).map(|t| Instant::now() + t),
            path,
            info,
            method,
            head: parts,
        };
        let reader = Reader {
            body: Box::pin(body),
            decoder: Decoder::new(self.max_message, encoding),
            ended: false,
        };
        match (
            call.method.is_client_streaming(),
            call.method.is_server_streaming(),
        ) {
            (false, _) => self.single(call, reader).await,
            (true, false) => self.client_stream(call, reader).await,
            (true, true) => self.bidi(call, reader).await,
        }
    }

    /// Unary and server streaming: one request message.
    async fn single<B>(self: &Arc<Self>, call: Call, mut reader: Reader<B>) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let msg = match reader.first().await {
            Ok(m) => m,
            Err(s) => return status_only(&s, &[]),
        };
        match reader.next().await {
            Ok(None) => {}
            Ok(Some(_)) => {
                return status_only(
                    &Status::new(
                        Code::INTERNAL,
                        "more than one request message for a method that takes one",
                    ),
                    &[],
                );
            }
            Err(s) => return status_only(&s, &[]),
        }
        let json = match decode(&call, &msg) {
            Ok(j) => j,
            Err(s) => return status_only(&s, &[]),
        };
        let mut attempt = self.attempt(&call, json.clone()).await;
        if let Some(spec) = attempt.ex.take_proxy() {
            let so_far = SoFar {
                raw: vec![msg],
                json: vec![json],
                bytes: 0,
                complete: true,
            };
            return self.proxy_call(call, reader, so_far, attempt, spec).await;
        }
        let Recorded {
            plan,
            matched,
            webhooks,
        } = self.finish(&call, attempt);
        let answer = answer_of(&plan, matched, &call.method);
        if let Some(s) = wait(&plan, call.deadline).await {
            return status_only(&s, &[]);
        }
        let resp = respond(&call, &plan, answer);
        hand_off(&self.serve, webhooks, resp)
    }

    /// Client streaming: the first message a stub answers decides the answer, sent
    /// once the client finished.
    async fn client_stream<B>(
        self: &Arc<Self>,
        call: Call,
        mut reader: Reader<B>,
    ) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let mut chosen: Option<Recorded> = None;
        let mut so_far = SoFar::default();
        let mut last_miss = None;
        loop {
            let msg = match reader.next().await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(s) => return status_only(&s, &[]),
            };
            if chosen.is_some() {
                continue;
            }
            let json = match decode(&call, &msg) {
                Ok(j) => j,
                Err(s) => return status_only(&s, &[]),
            };
            so_far.push(msg, json);
            let mut attempt = self.attempt_stream(&call, &so_far).await;
            if let Some(spec) = attempt.ex.take_proxy() {
                return self.proxy_call(call, reader, so_far, attempt, spec).await;
            }
            // A message no stub answers waits for the next (the extension's rule).
            if attempt.ex.matched() {
                chosen = Some(self.finish(&call, attempt));
                so_far = SoFar::default();
            } else {
                last_miss = Some(attempt);
            }
        }
        let Some(Recorded { plan, webhooks, .. }) = chosen else {
            // The call is journaled once, as not matched, with its last message.
            if let Some(a) = last_miss {
                self.finish(&call, a);
            }
            return status_only(&Status::new(Code::UNIMPLEMENTED, status::NOT_MATCHED), &[]);
        };
        let answer = answer_of(&plan, true, &call.method);
        if let Some(s) = wait(&plan, call.deadline).await {
            return status_only(&s, &[]);
        }
        let resp = respond(&call, &plan, answer);
        hand_off(&self.serve, webhooks, resp)
    }

    /// Bidirectional: each message's answer goes out as soon as its stub says. The
    /// answer's head goes out once the first message is served (with its stub's
    /// metadata when one answered it); a task serves the rest of the call.
    async fn bidi<B>(self: &Arc<Self>, call: Call, reader: Reader<B>) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let (head_tx, head_rx) = tokio::sync::oneshot::channel();
        let me = self.clone();
        tokio::spawn(async move { me.bidi_task(call, reader, head_tx).await });
        head_from_task(head_rx).await
    }

    async fn bidi_task<B>(
        &self,
        call: Call,
        mut reader: Reader<B>,
        head_tx: tokio::sync::oneshot::Sender<Response<GrpcBody>>,
    ) where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
        let mut out = Stream {
            head: Some((head_tx, rx)),
            tx,
        };
        let mut any_matched = false;
        let mut so_far = SoFar::default();
        let mut first = true;
        loop {
            let msg = match reader.next().await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(s) => return out.end(&s, &[]).await,
            };
            let json = match decode(&call, &msg) {
                Ok(j) => j,
                Err(s) => return out.end(&s, &[]).await,
            };
            so_far.push(msg, json);
            let mut attempt = self.attempt_stream(&call, &so_far).await;
            if let Some(spec) = attempt.ex.take_proxy() {
                if first {
                    return self
                        .proxy_task(&call, reader, so_far, attempt, spec, out)
                        .await;
                }
                let s = Status::new(
                    Code::UNIMPLEMENTED,
                    "a proxy stub must answer a bidirectional call's first message",
                );
                self.serve.forwarded(
                    &mut attempt.ex,
                    &attempt.snap,
                    Forwarded::Failed(failed_plan(&s)),
                );
                self.finish(&call, attempt);
                return out.end(&s, &[]).await;
            }
            first = false;
            let rec = self.finish(&call, attempt);
            if !rec.matched {
                out.head(&call, &[]);
                continue;
            }
            any_matched = true;
            let answer = answer_of(&rec.plan, true, &call.method);
            if let Some(s) = wait(&rec.plan, call.deadline).await {
                return out.end(&s, &[]).await;
            }
            let (meta, trailer_meta) = metadata(&rec.plan);
            let (messages, status) = match answer {
                Answer::Reset => return out.reset().await,
                Answer::Messages(m, s) => (m, s),
            };
            if messages.is_empty() && status.code != Code::OK {
                let mut meta = meta;
                meta.extend(trailer_meta);
                return out.end(&status, &meta).await;
            }
            out.head(&call, &meta);
            let interval = interval_of(&rec.plan, messages.len());
            for (i, m) in messages.iter().enumerate() {
                if i > 0 && !interval.is_zero() {
                    tokio::time::sleep(interval).await;
                }
                let frame = Frame::data(wire::frame(m, call.answer_encoding));
                if out.tx.send(Ok(frame)).await.is_err() {
                    return; // the client went away
                }
            }
            if let Some(f) = rec.webhooks {
                self.serve.hand_off(f);
            }
            if status.code != Code::OK {
                return out.end(&status, &trailer_meta).await;
            }
        }
        let end = if any_matched {
            Status::new(Code::OK, "")
        } else {
            Status::new(Code::UNIMPLEMENTED, status::NOT_MATCHED)
        };
        out.end(&end, &[]).await;
    }

    /// Reflection and health, answered from the descriptors served now.
    async fn builtin<B>(
        &self,
        which: Builtin,
        catalog: &Arc<Catalog>,
        head: http::request::Parts,
        body: B,
    ) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let encoding = match Encoding::from_header(head.headers.get("grpc-encoding")) {
            Ok(e) => e,
            Err(m) => return status_only(&Status::new(Code::UNIMPLEMENTED, m), &[]),
        };
        let mut reader = Reader {
            body: Box::pin(body),
            decoder: Decoder::new(self.max_message, encoding),
            ended: false,
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(8);
        let mut resp = Response::new(GrpcBody::channel(rx));
        grpc_head(&mut resp, Encoding::Identity, &[]);
        fn data(bytes: Vec<u8>) -> Result<Frame<Bytes>, std::io::Error> {
            Ok(Frame::data(wire::frame(&bytes, Encoding::Identity)))
        }
        match which {
            Builtin::Reflection => {
                let pool = builtin::reflection_pool(catalog);
                tokio::spawn(async move {
                    let end = loop {
                        let msg = match reader.next().await {
                            Ok(Some(m)) => m,
                            Ok(None) => break Status::new(Code::OK, ""),
                            Err(s) => break s,
                        };
                        let req = match <builtin::ServerReflectionRequest as prost::Message>::decode(
                            &msg[..],
                        ) {
                            Ok(r) => r,
                            Err(e) => {
                                break Status::new(
                                    Code::INVALID_ARGUMENT,
                                    format!("not a reflection request: {e}"),
                                );
                            }
                        };
                        let answer = builtin::reflect(&pool, req);
                        if tx.send(data(answer.encode_to_vec())).await.is_err() {
                            return;
                        }
                    };
                    let _ = tx
                        .send(Ok(Frame::trailers(trailers(end.code, &end.message, &[]))))
                        .await;
                });
                resp
            }
            Builtin::HealthCheck | Builtin::HealthWatch => {
                let req = match reader.first().await {
                    Ok(m) => m,
                    Err(s) => return status_only(&s, &[]),
                };
                let service =
                    match <builtin::HealthCheckRequest as prost::Message>::decode(&req[..]) {
                        Ok(r) => r.service,
                        Err(e) => {
                            return status_only(
                                &Status::new(
                                    Code::INVALID_ARGUMENT,
                                    format!("not a health check request: {e}"),
                                ),
                                &[],
                            );
                        }
                    };
                let known = service.is_empty() || catalog.service(&service).is_some();
                if which == Builtin::HealthCheck {
                    if !known {
                        return status_only(&Status::new(Code::NOT_FOUND, "unknown service"), &[]);
                    }
                    let answer = builtin::HealthCheckResponse {
                        status: builtin::SERVING,
                    };
                    let mut resp = Response::new(GrpcBody::frames(
                        VecDeque::from([wire::frame(&answer.encode_to_vec(), Encoding::Identity)]),
                        Duration::ZERO,
                        None,
                        trailers(Code::OK, "", &[]),
                    ));
                    grpc_head(&mut resp, Encoding::Identity, &[]);
                    return resp;
                }
                // Watch: the status now, then the stream stays open until the client
                // leaves (statuses never change while decoy serves).
                let status = if known {
                    builtin::SERVING
                } else {
                    builtin::SERVICE_UNKNOWN
                };
                tokio::spawn(async move {
                    if tx
                        .send(data(
                            builtin::HealthCheckResponse { status }.encode_to_vec(),
                        ))
                        .await
                        .is_ok()
                    {
                        tx.closed().await;
                    }
                });
                resp
            }
        }
    }

    /// A request message (as proto3 JSON) through the serve step's answer: matched,
    /// planned, not yet recorded.
    async fn attempt(&self, call: &Call, body: String) -> Attempt {
        let read_at = std::time::Instant::now();
        let snap = snapshot_of(&call.path, &call.head, &call.info, body);
        let ex = self.serve.answer(&snap).await;
        Attempt { ex, snap, read_at }
    }

    /// A message of a client or bidirectional stream: matched alone first (the
    /// extension's rule), then, when no stub answers it alone, as the JSON array of
    /// every message the call sent so far.
    async fn attempt_stream(&self, call: &Call, so_far: &SoFar) -> Attempt {
        let last = so_far.json.last().cloned().unwrap_or_default();
        let alone = self.attempt(call, last).await;
        if alone.ex.matched() || !so_far.complete {
            return alone;
        }
        let all = self.attempt(call, so_far.array()).await;
        if all.ex.matched() { all } else { alone }
    }

    /// The serve step's record: counters, journal, webhooks.
    fn finish(&self, call: &Call, a: Attempt) -> Recorded {
        self.serve.record(
            a.ex,
            a.snap,
            Arrival {
                read_at: a.read_at,
                protocol: "HTTP/2.0",
                local_port: call.info.local_port,
            },
        )
    }

    /// A unary, server-streaming or client-streaming call a proxy stub answers: the
    /// proxy runs in a task of its own and the answer's head is returned once known.
    async fn proxy_call<B>(
        self: &Arc<Self>,
        call: Call,
        reader: Reader<B>,
        so_far: SoFar,
        attempt: Attempt,
        spec: Arc<ProxySpec>,
    ) -> Response<GrpcBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let (head_tx, head_rx) = tokio::sync::oneshot::channel();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
        let out = Stream {
            head: Some((head_tx, rx)),
            tx,
        };
        let me = self.clone();
        tokio::spawn(async move {
            me.proxy_task(&call, reader, so_far, attempt, spec, out)
                .await
        });
        head_from_task(head_rx).await
    }

    /// Sends the call to the real server: the messages so far, then the rest as the
    /// client sends them; its answer goes to the client as it comes. Once it ends,
    /// the call is recorded once, with the whole exchange in the stub format.
    async fn proxy_task<B>(
        &self,
        call: &Call,
        mut reader: Reader<B>,
        so_far: SoFar,
        mut attempt: Attempt,
        spec: Arc<ProxySpec>,
        mut out: Stream,
    ) where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Display + Send,
    {
        let fail = |me: &Self, mut attempt: Attempt, s: &Status| {
            me.serve.forwarded(
                &mut attempt.ex,
                &attempt.snap,
                Forwarded::Failed(failed_plan(s)),
            );
            me.finish(call, attempt);
        };
        let Some(forward) = self.forward.clone() else {
            let s = Status::new(
                Code::UNIMPLEMENTED,
                "this server was started without an outbound client: gRPC calls are not proxied",
            );
            fail(self, attempt, &s);
            return out.end(&s, &[]).await;
        };
        if !so_far.complete {
            let s = Status::new(
                Code::RESOURCE_EXHAUSTED,
                "a proxy stub answered a stream after more messages than decoy keeps",
            );
            fail(self, attempt, &s);
            return out.end(&s, &[]).await;
        }
        if let Some(s) = wait(&attempt.ex.plan, call.deadline).await {
            fail(self, attempt, &s);
            return out.end(&s, &[]).await;
        }
        // The request side: the messages so far, then the client's as they come, each
        // also kept as JSON for the record.
        let (up_tx, up_rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
        let requests = Arc::new(std::sync::Mutex::new(Kept::of(so_far.json)));
        let input = call.method.input();
        let kept = requests.clone();
        let pump = tokio::spawn(async move {
            for m in so_far.raw {
                if up_tx
                    .send(Ok(wire::frame(&m, Encoding::Identity)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            loop {
                match reader.next().await {
                    Ok(Some(m)) => {
                        let json = match json::decode(&input, &m) {
                            Ok(d) => json::to_json(&d),
                            Err(e) => format!("{{\"@undecodable\": {:?}}}", e),
                        };
                        kept.lock().unwrap_or_else(|e| e.into_inner()).push(json);
                        if up_tx
                            .send(Ok(wire::frame(&m, Encoding::Identity)))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(s) => {
                        let _ = up_tx.send(Err(std::io::Error::other(s.message))).await;
                        return;
                    }
                }
            }
        });
        let opened = forward
            .open(&spec, &call.path, &call.head.headers, OutBody::new(up_rx))
            .await;
        let upstream = match opened {
            Ok(r) => r,
            Err(why) => {
                pump.abort();
                tracing::warn!("{why}");
                let s = Status::new(Code::UNAVAILABLE, why);
                fail(self, attempt, &s);
                return out.end(&s, &[]).await;
            }
        };
        let (parts, mut body) = upstream.into_parts();
        let head_meta = upstream_metadata(&parts.headers);
        let mut answers = Kept::default();
        let mut trailer_meta: Meta = Vec::new();
        let end = if parts.status != http::StatusCode::OK {
            let (code, _) = status::from_http(parts.status.as_u16()).unwrap_or((Code::UNKNOWN, ""));
            Status::new(
                code,
                format!("the real server answered HTTP {}", parts.status.as_u16()),
            )
        } else if let Some(code) = parts.headers.get("grpc-status") {
            // Trailers-only: the status is in the head.
            status_in(code, parts.headers.get("grpc-message"))
        } else {
            out.head(call, &head_meta);
            let output = call.method.output();
            let encoding = Encoding::from_header(parts.headers.get("grpc-encoding"));
            let mut decoder = Decoder::new(
                self.max_message.max(UPSTREAM_MAX_MESSAGE),
                encoding.unwrap_or(Encoding::Identity),
            );
            loop {
                let frame = match std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                    None => {
                        break Status::new(Code::INTERNAL, "the real server sent no status");
                    }
                    Some(Err(e)) => {
                        break Status::new(
                            Code::UNAVAILABLE,
                            format!("the real server's answer broke off: {e}"),
                        );
                    }
                    Some(Ok(f)) => f,
                };
                let frame = match frame.into_data() {
                    Ok(data) => {
                        decoder.push(&data);
                        let mut gone = false;
                        let mut bad = None;
                        loop {
                            match decoder.next_message() {
                                Ok(Some(m)) => {
                                    answers.push(match json::decode(&output, &m) {
                                        Ok(d) => json::to_json(&d),
                                        Err(e) => {
                                            tracing::warn!(
                                                "a proxied answer to {} does not decode: {e}",
                                                call.path
                                            );
                                            format!("{{\"@undecodable\": {e:?}}}")
                                        }
                                    });
                                    let f = Frame::data(wire::frame(&m, call.answer_encoding));
                                    if out.tx.send(Ok(f)).await.is_err() {
                                        gone = true;
                                        break;
                                    }
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    bad = Some(e);
                                    break;
                                }
                            }
                        }
                        if gone {
                            break Status::new(Code::CANCELLED, "the client went away");
                        }
                        if let Some(e) = bad {
                            break Status::new(
                                Code::INTERNAL,
                                format!("the real server's answer is not gRPC: {e}"),
                            );
                        }
                        continue;
                    }
                    Err(f) => f,
                };
                if let Ok(t) = frame.into_trailers() {
                    trailer_meta = upstream_metadata(&t);
                    break match t.get("grpc-status") {
                        Some(code) => status_in(code, t.get("grpc-message")),
                        None => Status::new(Code::INTERNAL, "the real server sent no status"),
                    };
                }
            }
        };
        if !pump.is_finished() {
            pump.abort();
        }
        let client_meta = if out.head.is_some() {
            // Trailers-only: the head's metadata goes with the status.
            let mut m = head_meta.clone();
            m.extend(trailer_meta.iter().cloned());
            m
        } else {
            trailer_meta.clone()
        };
        out.end(&end, &client_meta).await;

        // The record, in the stub format.
        let requests = std::mem::take(&mut *requests.lock().unwrap_or_else(|e| e.into_inner()));
        for (what, kept) in [("request", &requests), ("answer", &answers)] {
            if kept.dropped > 0 {
                tracing::warn!(
                    "the journal keeps the first {} {what} messages of a proxied call of {} ({} more were forwarded, not kept)",
                    kept.json.len(),
                    call.path,
                    kept.dropped
                );
            }
        }
        let request_body = if call.method.is_client_streaming() {
            format!("[{}]", requests.json.join(","))
        } else {
            requests.json.into_iter().next().unwrap_or_default()
        };
        let answer_body = if call.method.is_server_streaming() {
            format!("[{}]", answers.json.join(","))
        } else {
            answers.json.into_iter().next().unwrap_or_default()
        };
        let mut headers = head_meta;
        for (k, v) in &trailer_meta {
            if let Ok(name) = HeaderName::from_bytes(format!("grpc-trailer-{k}").as_bytes()) {
                headers.push((name, v.clone()));
            }
        }
        headers.extend(status_headers(&end));
        self.serve.forwarded(
            &mut attempt.ex,
            &attempt.snap,
            Forwarded::Answer {
                status: 200,
                headers,
                body: Bytes::from(answer_body),
                header_case: None,
            },
        );
        attempt.snap = attempt.snap.with_body(request_body);
        self.finish(call, attempt);
    }
}

/// The largest message read from a real server: at least this (a response is often
/// larger than the requests a server accepts).
const UPSTREAM_MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// A stream's messages kept for matching on all of them: at most this many, and
/// this many bytes of JSON; past either, messages are matched alone.
const SO_FAR_MESSAGES: usize = 1000;
const SO_FAR_BYTES: usize = 4 * 1024 * 1024;

/// A stream's messages so far: as received (for a proxy stub, which sends them all)
/// and as proto3 JSON (for matching on all of them).
#[derive(Debug)]
struct SoFar {
    raw: Vec<Bytes>,
    json: Vec<String>,
    bytes: usize,
    /// Every message is kept (none dropped past the limits).
    complete: bool,
}

impl Default for SoFar {
    fn default() -> Self {
        SoFar {
            raw: Vec::new(),
            json: Vec::new(),
            bytes: 0,
            complete: true,
        }
    }
}

impl SoFar {
    fn push(&mut self, raw: Bytes, json: String) {
        self.bytes += raw.len() + json.len();
        if !self.complete || self.json.len() >= SO_FAR_MESSAGES || self.bytes > SO_FAR_BYTES {
            // Past the limits only the last message is kept.
            self.complete = false;
            self.raw.clear();
            self.json.clear();
        }
        self.raw.push(raw);
        self.json.push(json);
    }

    /// The messages so far as one JSON array.
    fn array(&self) -> String {
        let mut s = String::with_capacity(self.json.iter().map(|j| j.len() + 1).sum::<usize>() + 2);
        s.push('[');
        for (i, j) in self.json.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(j);
        }
        s.push(']');
        s
    }
}

/// The messages of a proxied call kept for its record: the first
/// [`SO_FAR_MESSAGES`] (and [`SO_FAR_BYTES`] of JSON); the rest are forwarded and
/// counted, not kept, so a long-lived stream costs bounded memory.
#[derive(Debug, Default)]
struct Kept {
    json: Vec<String>,
    bytes: usize,
    dropped: usize,
}

impl Kept {
    fn of(json: Vec<String>) -> Self {
        let bytes = json.iter().map(String::len).sum();
        Kept {
            json,
            bytes,
            dropped: 0,
        }
    }

    fn push(&mut self, json: String) {
        if self.dropped > 0
            || self.json.len() >= SO_FAR_MESSAGES
            || self.bytes + json.len() > SO_FAR_BYTES
        {
            self.dropped += 1;
            return;
        }
        self.bytes += json.len();
        self.json.push(json);
    }
}

/// A request through the serve step's answer, not yet recorded.
struct Attempt {
    ex: Exchange,
    snap: RequestSnapshot,
    read_at: std::time::Instant,
}

/// A call's request as the matchers see it: `POST` on the method's path, the
/// metadata as headers, `body` (a message as proto3 JSON) as body.
fn snapshot_of(
    path: &str,
    head: &http::request::Parts,
    info: &CallInfo,
    body: String,
) -> RequestSnapshot {
    let mut snap = RequestSnapshot::new(head.method.as_str(), path.to_owned());
    snap.scheme = info.scheme;
    snap.client_addr = info.peer;
    snap.authority = head.uri.authority().map(|a| a.as_str().to_owned());
    snap.header_case = HeaderCase::as_sent();
    snap.with_headers(head.headers.clone()).with_body(body)
}

/// A request message as proto3 JSON.
fn decode(call: &Call, msg: &[u8]) -> Result<String, Status> {
    json::decode(&call.method.input(), msg)
        .map(|d| json::to_json(&d))
        .map_err(|m| Status::new(Code::INTERNAL, m))
}

/// A status as the extension's stub headers say it (none for OK).
fn status_headers(s: &Status) -> Vec<(HeaderName, HeaderValue)> {
    if s.code == Code::OK {
        return Vec::new();
    }
    let mut h = vec![(
        HeaderName::from_static(status::STATUS_NAME),
        HeaderValue::from_static(s.code.name()),
    )];
    if !s.message.is_empty()
        && let Ok(v) = HeaderValue::from_str(&s.message)
    {
        h.push((HeaderName::from_static(status::STATUS_REASON), v));
    }
    h
}

/// The plan a proxied call that got no answer is recorded with.
fn failed_plan(s: &Status) -> ResponsePlan {
    let mut plan = decoy_spec::plan::text_plan(200, String::new());
    plan.headers = Arc::from(status_headers(s));
    plan
}

/// A `grpc-status` and `grpc-message` as a real server sent them.
fn status_in(code: &HeaderValue, message: Option<&HeaderValue>) -> Status {
    let code = std::str::from_utf8(code.as_bytes())
        .ok()
        .and_then(|c| c.trim().parse::<u8>().ok())
        .filter(|c| (*c as usize) < status::NAMES.len())
        .map_or(Code::UNKNOWN, Code);
    Status::new(
        code,
        message
            .map(|m| status::decode_message(m.as_bytes()))
            .unwrap_or_default(),
    )
}

/// A real server's metadata: its headers less HTTP's, gRPC's own and `date`.
fn upstream_metadata(h: &HeaderMap) -> Meta {
    h.iter()
        .filter(|(k, _)| {
            !is_reserved(k) && *k != http::header::DATE && !k.as_str().starts_with("grpc-")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A bidirectional call's answer: its head until sent, then its frames.
struct Stream {
    head: Option<(HeadSender, FrameReceiver)>,
    tx: tokio::sync::mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
}

type HeadSender = tokio::sync::oneshot::Sender<Response<GrpcBody>>;
type FrameReceiver = tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>;
/// Metadata: header names and values.
type Meta = Vec<(HeaderName, HeaderValue)>;

impl Stream {
    /// Sends the head (once) with `meta`.
    fn head(&mut self, call: &Call, meta: &[(HeaderName, HeaderValue)]) {
        if let Some((head_tx, rx)) = self.head.take() {
            let mut resp = Response::new(GrpcBody::channel(rx));
            head_of(&mut resp, call, meta);
            let _ = head_tx.send(resp);
        }
    }

    /// Ends the call with `status`: trailers-only when no head went out yet.
    async fn end(mut self, status: &Status, meta: &[(HeaderName, HeaderValue)]) {
        match self.head.take() {
            Some((head_tx, _)) => {
                let _ = head_tx.send(status_only(status, meta));
            }
            None => {
                let t = trailers(status.code, &status.message, meta);
                let _ = self.tx.send(Ok(Frame::trailers(t))).await;
            }
        }
    }

    /// A fault: the stream is reset.
    async fn reset(mut self) {
        match self.head.take() {
            Some((head_tx, _)) => {
                let _ = head_tx.send(Response::new(GrpcBody::reset()));
            }
            None => {
                let _ = self
                    .tx
                    .send(Err(std::io::Error::other("simulated fault")))
                    .await;
            }
        }
    }
}

/// What a call is, once its head is read.
struct Call {
    path: String,
    method: MethodDescriptor,
    head: http::request::Parts,
    answer_encoding: Encoding,
    deadline: Option<Instant>,
    info: CallInfo,
}

/// The request body, read a message at a time.
struct Reader<B> {
    body: Pin<Box<B>>,
    decoder: Decoder,
    ended: bool,
}

impl<B> Reader<B>
where
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    async fn next(&mut self) -> Result<Option<Bytes>, Status> {
        loop {
            match self.decoder.next_message() {
                Ok(Some(m)) => return Ok(Some(m)),
                Ok(None) => {}
                Err(e) => return Err(frame_status(e)),
            }
            if self.ended {
                return if self.decoder.has_partial() {
                    Err(frame_status(FrameError::Truncated))
                } else {
                    Ok(None)
                };
            }
            match std::future::poll_fn(|cx| self.body.as_mut().poll_frame(cx)).await {
                None => self.ended = true,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.push(&data);
                    }
                }
                Some(Err(e)) => {
                    return Err(Status::new(
                        Code::CANCELLED,
                        format!("the request stream ended: {e}"),
                    ));
                }
            }
        }
    }

    /// The call's first message, which a call with one request message must send.
    async fn first(&mut self) -> Result<Bytes, Status> {
        self.next()
            .await?
            .ok_or_else(|| Status::new(Code::INTERNAL, "the call sent no request message"))
    }
}

fn frame_status(e: FrameError) -> Status {
    let code = match &e {
        FrameError::TooLarge { .. } => Code::RESOURCE_EXHAUSTED,
        FrameError::Compression(m) if m.contains("without") => Code::INTERNAL,
        FrameError::Compression(_) => Code::INTERNAL,
        FrameError::Truncated => Code::INTERNAL,
    };
    Status::new(code, e.to_string())
}

/// What the stub's plan means for this method.
fn answer_of(plan: &ResponsePlan, matched: bool, method: &MethodDescriptor) -> Answer {
    if plan.fault.is_some() {
        return Answer::Reset;
    }
    if !matched {
        return Answer::Messages(
            Vec::new(),
            Status::new(Code::UNIMPLEMENTED, status::NOT_MATCHED),
        );
    }
    let header = |name: &str| {
        plan.headers
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let named = header(status::STATUS_NAME);
    let status = match &named {
        Some(name) => match Code::from_name(name.trim()) {
            Some(code) => Status::new(code, header(status::STATUS_REASON).unwrap_or_default()),
            None => {
                return Answer::Messages(
                    Vec::new(),
                    Status::new(
                        Code::UNKNOWN,
                        format!("the stub's grpc-status-name {name:?} is not a gRPC status"),
                    ),
                );
            }
        },
        None => match status::from_http(plan.status) {
            Some((code, msg)) => return Answer::Messages(Vec::new(), Status::new(code, msg)),
            None => Status::new(Code::OK, ""),
        },
    };
    // A status other than OK with no body: no message (the extension sends none; a
    // stream stub may send its messages first).
    if status.code != Code::OK && (plan.body.is_empty() || !method.is_server_streaming()) {
        return Answer::Messages(Vec::new(), status);
    }
    match messages_of(&plan.body, method) {
        Ok(m) => Answer::Messages(m, status),
        Err(reason) => {
            tracing::warn!("a gRPC stub's answer to {} {reason}", method.full_name());
            Answer::Messages(
                Vec::new(),
                Status::new(Code::INTERNAL, format!("the stub's answer {reason}")),
            )
        }
    }
}

/// A stub's body as the response messages: one JSON object, or for a server stream a
/// JSON array of them.
pub fn messages_of(body: &[u8], method: &MethodDescriptor) -> Result<Vec<Vec<u8>>, String> {
    let output = method.output();
    let text = std::str::from_utf8(body).map_err(|_| "is not UTF-8 text".to_owned())?;
    if method.is_server_streaming() && text.trim_start().starts_with('[') {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
        return items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                json::from_value(&output, item)
                    .map(|m| json::encode(&m))
                    .map_err(|e| format!("[{i}] {e}"))
            })
            .collect();
    }
    json::from_json(&output, text).map(|m| vec![json::encode(&m)])
}

/// Waits the plan's delay, or until the deadline when that comes first (then the
/// call ends with DEADLINE_EXCEEDED).
async fn wait(plan: &ResponsePlan, deadline: Option<Instant>) -> Option<Status> {
    if plan.delay.is_zero() {
        return None;
    }
    let due = Instant::now() + plan.delay;
    match deadline {
        Some(d) if d <= due => {
            tokio::time::sleep_until(d).await;
            Some(Status::new(Code::DEADLINE_EXCEEDED, "deadline exceeded"))
        }
        _ => {
            tokio::time::sleep_until(due).await;
            None
        }
    }
}

/// The time between a stream's messages: `chunkedDribbleDelay.totalDuration` over
/// the messages.
fn interval_of(plan: &ResponsePlan, messages: usize) -> Duration {
    match plan.dribble {
        Some(d) if messages > 1 => d.total / messages as u32,
        _ => Duration::ZERO,
    }
}

/// Response headers that are not metadata: HTTP's own, gRPC's reserved ones, and the
/// extension's status headers.
fn is_reserved(name: &HeaderName) -> bool {
    let n = name.as_str();
    matches!(
        n,
        "content-type"
            | "content-length"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "upgrade"
    ) || (n.starts_with("grpc-") && !n.starts_with("grpc-trailer-"))
}

/// A plan's headers as the answer's metadata: (initial, trailing). A header
/// `grpc-trailer-<name>` is sent as the trailer `<name>`.
fn metadata(plan: &ResponsePlan) -> (Meta, Meta) {
    let mut head = Vec::new();
    let mut tail = Vec::new();
    for (k, v) in plan.headers.iter() {
        if is_reserved(k) {
            continue;
        }
        match k.as_str().strip_prefix("grpc-trailer-") {
            Some(rest) => {
                if let Ok(name) = HeaderName::from_bytes(rest.as_bytes()) {
                    tail.push((name, v.clone()));
                }
            }
            None => head.push((k.clone(), v.clone())),
        }
    }
    (head, tail)
}

fn head_of(resp: &mut Response<GrpcBody>, call: &Call, meta: &[(HeaderName, HeaderValue)]) {
    grpc_head(resp, call.answer_encoding, meta)
}

fn grpc_head(
    resp: &mut Response<GrpcBody>,
    encoding: Encoding,
    meta: &[(HeaderName, HeaderValue)],
) {
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    if encoding == Encoding::Gzip {
        h.insert("grpc-encoding", HeaderValue::from_static("gzip"));
    }
    h.insert(
        "grpc-accept-encoding",
        HeaderValue::from_static("gzip,identity"),
    );
    for (k, v) in meta {
        h.append(k.clone(), v.clone());
    }
}

/// The answer's head that a task serving the call sends once it knows it; an
/// internal error when the task ended without sending one.
async fn head_from_task(
    head: tokio::sync::oneshot::Receiver<Response<GrpcBody>>,
) -> Response<GrpcBody> {
    head.await.unwrap_or_else(|_| {
        status_only(
            &Status::new(Code::INTERNAL, "the call ended unanswered"),
            &[],
        )
    })
}

/// The answer of a call that ends now with `status` and no message (gRPC's
/// "trailers-only" answer: the status in the head).
pub fn status_only(status: &Status, meta: &[(HeaderName, HeaderValue)]) -> Response<GrpcBody> {
    let mut resp = Response::new(GrpcBody::empty());
    let h: &mut HeaderMap = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    for (k, v) in meta {
        h.append(k.clone(), v.clone());
    }
    for (k, v) in trailers(status.code, &status.message, &[]).iter() {
        h.insert(k.clone(), v.clone());
    }
    resp
}

/// The answer of a unary, server-streaming or client-streaming call.
fn respond(call: &Call, plan: &ResponsePlan, answer: Answer) -> Response<GrpcBody> {
    let (messages, status) = match answer {
        Answer::Reset => return Response::new(GrpcBody::reset()),
        Answer::Messages(m, s) => (m, s),
    };
    let (meta, trailer_meta) = metadata(plan);
    if messages.is_empty() {
        let mut meta = meta;
        meta.extend(trailer_meta);
        return status_only(&status, &meta);
    }
    let interval = interval_of(plan, messages.len());
    let frames: VecDeque<Bytes> = messages
        .iter()
        .map(|m| wire::frame(m, call.answer_encoding))
        .collect();
    let mut resp = Response::new(GrpcBody::frames(
        frames,
        interval,
        call.deadline,
        trailers(status.code, &status.message, &trailer_meta),
    ));
    head_of(&mut resp, call, &meta);
    resp
}

/// Hands the webhooks off once the answer's body is done with.
fn hand_off<W: WebhookSink, R: Recording>(
    serve: &Serve<W, R>,
    webhooks: Option<decoy_core::webhooks::Fired>,
    resp: Response<GrpcBody>,
) -> Response<GrpcBody> {
    match webhooks {
        Some(mut fired) => {
            let (done, out) = tokio::sync::oneshot::channel::<()>();
            fired.after = Some(Box::pin(async move {
                let _ = out.await;
            }));
            serve.hand_off(fired);
            resp.map(|b| b.then(done))
        }
        None => resp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxied_calls_record_keeps_a_bounded_number_of_messages() {
        let mut k = Kept::default();
        for i in 0..SO_FAR_MESSAGES + 5 {
            k.push(format!("{{\"n\": {i}}}"));
        }
        assert_eq!(k.json.len(), SO_FAR_MESSAGES);
        assert_eq!(k.dropped, 5);
        let mut k = Kept::default();
        k.push("x".repeat(SO_FAR_BYTES));
        k.push("y".into());
        k.push("z".into());
        assert_eq!((k.json.len(), k.dropped), (1, 2));
    }

    #[test]
    fn a_streams_messages_so_far_are_bounded_and_then_matched_alone() {
        let mut s = SoFar::default();
        for i in 0..SO_FAR_MESSAGES {
            s.push(Bytes::new(), format!("{i}"));
        }
        assert!(s.complete);
        assert_eq!(
            s.array().len(),
            s.json.iter().map(|j| j.len() + 1).sum::<usize>() + 1
        );
        s.push(Bytes::new(), "last".into());
        assert!(!s.complete);
        assert_eq!(s.json, ["last"]);
    }
}
