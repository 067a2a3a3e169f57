//! gRPC calls on the stub ports: the HTTP server hands every HTTP/2 request whose
//! content type is `application/grpc` to [`decoy_grpc`], which reads the root's
//! `grpc/` folder and answers through the same serve step, journal and metrics
//! (transport `grpc`) as HTTP stubs. This module wires it to the rest of the binary:
//! start-up, the HTTP handler's hand-over, the problems the admin API lists.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use decoy_core::engine::Engine;
use decoy_core::journal::Journal;
use decoy_core::mapping::load::Problem;
use decoy_core::metrics::Metrics;
use decoy_core::serve::{Outcomes, Serve};
use decoy_grpc::{CallInfo, Catalog, GrpcServer};

use crate::http::body::ResponseBody;
use crate::webhooks::WebhookSender;

/// The gRPC transport of a running server.
pub type GrpcServe = GrpcServer<WebhookSender>;

/// Reads `root/grpc` and registers the `grpc` transport's metrics.
pub fn start(
    root: &Path,
    catalog: Catalog,
    engine: Arc<Engine>,
    journal: Arc<Journal>,
    metrics: &Metrics,
    webhooks: Option<WebhookSender>,
    verbose: bool,
) -> Arc<GrpcServe> {
    if catalog.files > 0 {
        tracing::info!(
            "gRPC: {} method(s) from {} file(s) under {}",
            catalog.method_count(),
            catalog.files,
            root.join(decoy_grpc::catalog::DIR).display()
        );
    }
    let serve = Serve::new(
        engine,
        journal,
        Outcomes::register(metrics, decoy_grpc::TRANSPORT, webhooks),
        None,
        verbose,
    );
    Arc::new(GrpcServer::new(root, catalog, serve))
}

/// Answers a gRPC call the HTTP server received.
pub async fn call(
    grpc: &Arc<GrpcServe>,
    req: http::Request<hyper::body::Incoming>,
    scheme: &'static str,
    peer: SocketAddr,
    local_port: u16,
) -> http::Response<ResponseBody> {
    let info = CallInfo {
        scheme,
        peer: Some(peer),
        local_port,
    };
    grpc.call(req, info).await.map(ResponseBody::Grpc)
}

/// The descriptors' problems, then the stubs' against them.
pub fn problems(grpc: &GrpcServe, global_templating: bool) -> (Vec<Problem>, Vec<Problem>) {
    let catalog = grpc.catalog();
    let set = grpc.serve().engine().mappings();
    let (problems, warnings) = decoy_grpc::check::check(&catalog, set.iter(), global_templating);
    (
        catalog.problems.iter().cloned().chain(problems).collect(),
        catalog.warnings.iter().cloned().chain(warnings).collect(),
    )
}
