//! gRPC calls on the stub ports: the HTTP server hands every HTTP/2 request whose
//! content type is `application/grpc` to [`decoy_grpc`], which reads the root's
//! `grpc/` folder and answers through the same serve step, journal and metrics
//! (transport `grpc`) as HTTP stubs. This module wires it to the rest of the binary:
//! start-up, the HTTP handler's hand-over, the problems the admin API lists.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use decoy_core::mapping::load::Problem;
use decoy_core::serve::Serve;
use decoy_grpc::{CallInfo, Catalog, GrpcServer};

use crate::http::body::ResponseBody;
use crate::http::proxy::{ProxyClient, ProxyError};
use crate::http::recorder::Recorder;
use crate::webhooks::WebhookSender;

/// The gRPC transport of a running server.
pub type GrpcServe = GrpcServer<WebhookSender, Arc<Recorder>>;

/// Serves the services `catalog` read from `root/grpc` through `serve` (its outcomes
/// registered as [`decoy_grpc::TRANSPORT`]; its recording `--record-mappings`'),
/// proxying through `proxy`.
pub fn start(
    root: &Path,
    catalog: Catalog,
    serve: Serve<WebhookSender, Arc<Recorder>>,
    proxy: ProxyClient,
) -> Arc<GrpcServe> {
    if catalog.files > 0 {
        tracing::info!(
            "gRPC: {} method(s) from {} file(s) under {}",
            catalog.method_count(),
            catalog.files,
            root.join(decoy_grpc::catalog::DIR).display()
        );
    }
    Arc::new(GrpcServer::new(root, catalog, serve).with_forward(Arc::new(Upstream(proxy))))
}

/// Proxy stubs' gRPC calls go out through the one outbound client, with the header
/// and target rules of every proxied request.
#[derive(Debug)]
struct Upstream(ProxyClient);

impl decoy_grpc::proxy::Forward for Upstream {
    fn open<'a>(
        &'a self,
        spec: &'a decoy_spec::plan::ProxySpec,
        path: &'a str,
        metadata: &'a http::HeaderMap,
        body: decoy_grpc::proxy::OutBody,
    ) -> std::pin::Pin<Box<dyn Future<Output = decoy_grpc::proxy::Opened> + Send + 'a>> {
        Box::pin(async move {
            match self.0.open_grpc(spec, path, metadata, body).await {
                Ok(resp) => Ok(resp.map(|b| {
                    let b: decoy_grpc::proxy::UpstreamBody =
                        Box::pin(http_body_util::BodyExt::map_err(b, |e| e.to_string()));
                    b
                })),
                Err(ProxyError::Failed(why)) => Err(why),
                Err(ProxyError::Denied) => Err(format!(
                    "a proxied gRPC call to {} was refused by --allow-proxy-targets / --deny-proxy-targets",
                    spec.target(path)
                )),
            }
        })
    }
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
