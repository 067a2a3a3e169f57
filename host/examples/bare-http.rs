//! The floor of decoy's HTTP stack: hyper 1 on one current-thread tokio runtime
//! (`--one-worker`: tokio's multi-thread runtime with one worker, as each of decoy's
//! serving threads runs), answering every request with a fixed 200 "hello", nothing else (no matching, no
//! journal, no metrics). Used by `bench/tail.py` beside nginx, to tell what decoy
//! adds from what its HTTP library costs; not part of decoy.
//!
//! ```sh
//! cargo run --release --features bench --example bare-http -- --port 8080
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut port = 8080u16;
    let mut one_worker = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            "--one-worker" => one_worker = true,
            _ => {
                eprintln!("usage: bare-http [--port N] [--one-worker]");
                std::process::exit(2);
            }
        }
    }
    let rt = if one_worker {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .expect("runtime");
    // The accept loop is a task of the runtime, as decoy's are: with `--one-worker`,
    // `block_on` would otherwise run it on this thread rather than on the worker.
    let serving = async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        println!("listening on {port}");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "text/plain")
                            .body(Full::new(Bytes::from_static(b"hello")))
                            .unwrap(),
                    )
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    rt.block_on(async move { tokio::spawn(serving).await.expect("serving") });
}
