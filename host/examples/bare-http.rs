//! The floor of decoy's HTTP stack: hyper 1 on one current-thread tokio runtime,
//! answering every request with a fixed 200 "hello", nothing else (no matching, no
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
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            _ => {
                eprintln!("usage: bare-http [--port N]");
                std::process::exit(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
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
    });
}
