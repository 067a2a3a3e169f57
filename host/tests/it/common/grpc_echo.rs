//! A real gRPC server built on tonic, with its service written as tonic-build writes
//! one (`rec.v1.Echo`, [`ECHO_PROTO`]): what the gRPC proxy and recording tests stand
//! in front of, and the ceiling of the gRPC benchmark (host/examples/grpc-load.rs).
//!
//! - `Say`: `"echo: <text>"`, with the metadata `x-real: yes`; the text `fail` ends
//!   with NOT_FOUND and the trailing metadata `x-why: asked`.
//! - `Count`: a server stream of the lines `1`..=`seq`.
//! - `Gather`: the client stream's texts joined with `+`.
//! - `Talk`: each message answered at once with its text and `!`.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use tonic::server::{
    ClientStreamingService, Grpc, NamedService, ServerStreamingService, StreamingService,
    UnaryService,
};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

pub const ECHO_PROTO: &str = r#"
syntax = "proto3";
package rec.v1;

message Line {
  string text = 1;
  int64 seq = 2;
}

service Echo {
  rpc Say(Line) returns (Line);
  rpc Count(Line) returns (stream Line);
  rpc Gather(stream Line) returns (Line);
  rpc Talk(stream Line) returns (stream Line);
}
"#;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(string, tag = "1")]
    pub text: String,
    #[prost(int64, tag = "2")]
    pub seq: i64,
}

pub fn line(text: &str) -> Line {
    Line {
        text: text.into(),
        seq: 0,
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Lines = Pin<Box<dyn Stream<Item = Result<Line, Status>> + Send>>;

/// The `rec.v1.Echo` service.
#[derive(Debug, Clone, Default)]
pub struct Echo;

impl NamedService for Echo {
    const NAME: &'static str = "rec.v1.Echo";
}

struct Say;
impl UnaryService<Line> for Say {
    type Response = Line;
    type Future = BoxFuture<Result<Response<Line>, Status>>;
    fn call(&mut self, req: Request<Line>) -> Self::Future {
        Box::pin(async move {
            let text = req.into_inner().text;
            if text == "fail" {
                let mut meta = tonic::metadata::MetadataMap::new();
                meta.insert("x-why", "asked".parse().unwrap());
                return Err(Status::with_metadata(
                    tonic::Code::NotFound,
                    "no such line",
                    meta,
                ));
            }
            let mut resp = Response::new(Line {
                text: format!("echo: {text}"),
                seq: 1,
            });
            resp.metadata_mut().insert("x-real", "yes".parse().unwrap());
            Ok(resp)
        })
    }
}

struct Count;
impl ServerStreamingService<Line> for Count {
    type Response = Line;
    type ResponseStream = Lines;
    type Future = BoxFuture<Result<Response<Lines>, Status>>;
    fn call(&mut self, req: Request<Line>) -> Self::Future {
        Box::pin(async move {
            let n = req.into_inner().seq;
            let lines = futures_util::stream::iter((1..=n).map(|i| {
                Ok(Line {
                    text: i.to_string(),
                    seq: i,
                })
            }));
            Ok(Response::new(Box::pin(lines) as Lines))
        })
    }
}

struct Gather;
impl ClientStreamingService<Line> for Gather {
    type Response = Line;
    type Future = BoxFuture<Result<Response<Line>, Status>>;
    fn call(&mut self, req: Request<Streaming<Line>>) -> Self::Future {
        Box::pin(async move {
            let mut stream = req.into_inner();
            let mut texts = Vec::new();
            while let Some(l) = stream.message().await? {
                texts.push(l.text);
            }
            Ok(Response::new(Line {
                seq: texts.len() as i64,
                text: texts.join("+"),
            }))
        })
    }
}

struct Talk;
impl StreamingService<Line> for Talk {
    type Response = Line;
    type ResponseStream = Lines;
    type Future = BoxFuture<Result<Response<Lines>, Status>>;
    fn call(&mut self, req: Request<Streaming<Line>>) -> Self::Future {
        Box::pin(async move {
            let answers = req.into_inner().map(|m| {
                m.map(|l| Line {
                    text: format!("{}!", l.text),
                    seq: l.seq,
                })
            });
            Ok(Response::new(Box::pin(answers) as Lines))
        })
    }
}

impl<B> tower_service::Service<http::Request<B>> for Echo
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let codec = ProstCodec::<Line, Line>::default;
        match req.uri().path() {
            "/rec.v1.Echo/Say" => {
                Box::pin(async move { Ok(Grpc::new(codec()).unary(Say, req).await) })
            }
            "/rec.v1.Echo/Count" => {
                Box::pin(async move { Ok(Grpc::new(codec()).server_streaming(Count, req).await) })
            }
            "/rec.v1.Echo/Gather" => {
                Box::pin(async move { Ok(Grpc::new(codec()).client_streaming(Gather, req).await) })
            }
            "/rec.v1.Echo/Talk" => {
                Box::pin(async move { Ok(Grpc::new(codec()).streaming(Talk, req).await) })
            }
            _ => Box::pin(async move { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// A running echo server; [`EchoServer::stop`] ends it and waits for it.
pub struct EchoServer {
    pub addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    /// Serves `Echo` on 127.0.0.1, port 0.
    pub async fn start() -> EchoServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(
                    Echo,
                    tonic::transport::server::TcpIncoming::from(listener),
                    async {
                        let _ = stopped.await;
                    },
                )
                .await
                .unwrap();
        });
        EchoServer { addr, stop, task }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
