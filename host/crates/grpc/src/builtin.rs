//! The services every gRPC server of decoy's answers itself, built from the services
//! the root declares: server reflection (`grpc.reflection.v1` and `v1alpha`, so
//! `grpcurl list/describe` and Postman need no `.proto` on their side) and the gRPC
//! health checking protocol (`grpc.health.v1.Health`). A root that declares one of
//! these services itself answers it from its stubs instead.

use prost::Message as _;
use prost_reflect::DescriptorPool;
use prost_reflect::prost_types::FileDescriptorProto;

use crate::catalog::Catalog;

pub const REFLECTION_V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
pub const REFLECTION_V1ALPHA: &str =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
pub const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";
pub const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";

/// Which built-in method a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Reflection,
    HealthCheck,
    HealthWatch,
}

pub fn builtin(path: &str) -> Option<Builtin> {
    match path {
        REFLECTION_V1 | REFLECTION_V1ALPHA => Some(Builtin::Reflection),
        HEALTH_CHECK => Some(Builtin::HealthCheck),
        HEALTH_WATCH => Some(Builtin::HealthWatch),
        _ => None,
    }
}

const HEALTH_PROTO: &str = r#"syntax = "proto3";
package grpc.health.v1;
option java_package = "io.grpc.health.v1";
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
message HealthListRequest {}
message HealthListResponse { map<string, HealthCheckResponse> statuses = 1; }
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc List(HealthListRequest) returns (HealthListResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"#;

/// grpc.reflection.v1's messages; v1alpha's are the same with another package.
const REFLECTION_MESSAGES: &str = r#"
message ServerReflectionRequest {
  string host = 1;
  oneof message_request {
    string file_by_filename = 3;
    string file_containing_symbol = 4;
    ExtensionRequest file_containing_extension = 5;
    string all_extension_numbers_of_type = 6;
    string list_services = 7;
  }
}
message ExtensionRequest { string containing_type = 1; int32 extension_number = 2; }
message ServerReflectionResponse {
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {
    FileDescriptorResponse file_descriptor_response = 4;
    ExtensionNumberResponse all_extension_numbers_response = 5;
    ListServiceResponse list_services_response = 6;
    ErrorResponse error_response = 7;
  }
}
message FileDescriptorResponse { repeated bytes file_descriptor_proto = 1; }
message ExtensionNumberResponse { string base_type_name = 1; repeated int32 extension_number = 2; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ServiceResponse { string name = 1; }
message ErrorResponse { int32 error_code = 1; string error_message = 2; }
service ServerReflection {
  rpc ServerReflectionInfo(stream ServerReflectionRequest) returns (stream ServerReflectionResponse);
}
"#;

/// The built-in services' own descriptors (what reflection tells of them), compiled
/// once.
pub fn builtin_files() -> Vec<FileDescriptorProto> {
    static FILES: std::sync::OnceLock<Vec<FileDescriptorProto>> = std::sync::OnceLock::new();
    FILES
        .get_or_init(|| {
            let sources = Sources(vec![
                ("grpc/health/v1/health.proto", HEALTH_PROTO.to_owned()),
                (
                    "grpc/reflection/v1/reflection.proto",
                    format!("syntax = \"proto3\";\npackage grpc.reflection.v1;\n{REFLECTION_MESSAGES}"),
                ),
                (
                    "grpc/reflection/v1alpha/reflection.proto",
                    format!(
                        "syntax = \"proto3\";\npackage grpc.reflection.v1alpha;\n{REFLECTION_MESSAGES}"
                    ),
                ),
            ]);
            let names: Vec<&'static str> = sources.0.iter().map(|(n, _)| *n).collect();
            let mut c = protox::Compiler::with_file_resolver(sources);
            match c.open_files(names) {
                Ok(_) => c.file_descriptor_set().file,
                Err(e) => {
                    tracing::error!("the built-in gRPC services do not compile: {e}");
                    Vec::new()
                }
            }
        })
        .clone()
}

/// Proto sources held in memory.
#[derive(Debug)]
struct Sources(Vec<(&'static str, String)>);

impl protox::file::FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match self.0.iter().find(|(n, _)| *n == name) {
            Some((n, src)) => protox::file::File::from_source(n, src),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

pub const SERVING: i32 = 1;
pub const SERVICE_UNKNOWN: i32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerReflectionRequest {
    #[prost(string, tag = "1")]
    pub host: String,
    #[prost(oneof = "Request", tags = "3, 4, 5, 6, 7")]
    pub message_request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
    #[prost(message, tag = "5")]
    FileContainingExtension(ExtensionRequest),
    #[prost(string, tag = "6")]
    AllExtensionNumbersOfType(String),
    #[prost(string, tag = "7")]
    ListServices(String),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExtensionRequest {
    #[prost(string, tag = "1")]
    pub containing_type: String,
    #[prost(int32, tag = "2")]
    pub extension_number: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerReflectionResponse {
    #[prost(string, tag = "1")]
    pub valid_host: String,
    #[prost(message, optional, tag = "2")]
    pub original_request: Option<ServerReflectionRequest>,
    #[prost(oneof = "Response", tags = "4, 5, 6, 7")]
    pub message_response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Response {
    #[prost(message, tag = "4")]
    FileDescriptorResponse(FileDescriptorResponse),
    #[prost(message, tag = "5")]
    AllExtensionNumbersResponse(ExtensionNumberResponse),
    #[prost(message, tag = "6")]
    ListServicesResponse(ListServiceResponse),
    #[prost(message, tag = "7")]
    ErrorResponse(ErrorResponse),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FileDescriptorResponse {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExtensionNumberResponse {
    #[prost(string, tag = "1")]
    pub base_type_name: String,
    #[prost(int32, repeated, tag = "2")]
    pub extension_number: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    pub service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceResponse {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorResponse {
    #[prost(int32, tag = "1")]
    pub error_code: i32,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// The pool reflection answers from: the root's files, then the built-in services'.
pub fn reflection_pool(catalog: &Catalog) -> DescriptorPool {
    let mut pool = catalog.pool().clone();
    for f in builtin_files() {
        if pool.get_file_by_name(f.name()).is_none() {
            let _ = pool.add_file_descriptor_proto(f);
        }
    }
    pool
}

/// The answer to one reflection request.
pub fn reflect(pool: &DescriptorPool, req: ServerReflectionRequest) -> ServerReflectionResponse {
    let not_found = |what: String| {
        Response::ErrorResponse(ErrorResponse {
            error_code: 5,
            error_message: what,
        })
    };
    let response = match &req.message_request {
        Some(Request::ListServices(_)) => {
            let mut names: Vec<String> =
                pool.services().map(|s| s.full_name().to_owned()).collect();
            names.sort();
            names.dedup();
            Response::ListServicesResponse(ListServiceResponse {
                service: names
                    .into_iter()
                    .map(|name| ServiceResponse { name })
                    .collect(),
            })
        }
        Some(Request::FileByFilename(name)) => match pool.get_file_by_name(name) {
            Some(f) => files_with_deps(&f),
            None => not_found(format!("file not found: {name}")),
        },
        Some(Request::FileContainingSymbol(symbol)) => match file_of_symbol(pool, symbol) {
            Some(f) => files_with_deps(&f),
            None => not_found(format!("symbol not found: {symbol}")),
        },
        Some(Request::FileContainingExtension(ext)) => {
            let found = pool
                .get_message_by_name(&ext.containing_type)
                .and_then(|m| m.get_extension(ext.extension_number as u32));
            match found {
                Some(e) => files_with_deps(&e.parent_file()),
                None => not_found(format!(
                    "extension not found: {}({})",
                    ext.containing_type, ext.extension_number
                )),
            }
        }
        Some(Request::AllExtensionNumbersOfType(t)) => match pool.get_message_by_name(t) {
            Some(m) => Response::AllExtensionNumbersResponse(ExtensionNumberResponse {
                base_type_name: t.clone(),
                extension_number: m.extensions().map(|e| e.number() as i32).collect(),
            }),
            None => not_found(format!("type not found: {t}")),
        },
        None => Response::ErrorResponse(ErrorResponse {
            error_code: 3,
            error_message: "the request names no question".into(),
        }),
    };
    ServerReflectionResponse {
        valid_host: req.host.clone(),
        original_request: Some(req),
        message_response: Some(response),
    }
}

/// A file and every file it imports, transitively, the file first.
fn files_with_deps(f: &prost_reflect::FileDescriptor) -> Response {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut todo = vec![f.clone()];
    while let Some(f) = todo.pop() {
        if !seen.insert(f.name().to_owned()) {
            continue;
        }
        out.push(f.file_descriptor_proto().encode_to_vec());
        todo.extend(f.dependencies());
    }
    Response::FileDescriptorResponse(FileDescriptorResponse {
        file_descriptor_proto: out,
    })
}

fn file_of_symbol(pool: &DescriptorPool, symbol: &str) -> Option<prost_reflect::FileDescriptor> {
    let symbol = symbol.trim_start_matches('.');
    if let Some(s) = pool.get_service_by_name(symbol) {
        return Some(s.parent_file());
    }
    if let Some(m) = pool.get_message_by_name(symbol) {
        return Some(m.parent_file());
    }
    if let Some(e) = pool.get_enum_by_name(symbol) {
        return Some(e.parent_file());
    }
    if let Some(e) = pool.get_extension_by_name(symbol) {
        return Some(e.parent_file());
    }
    // A method (`pkg.Service.Method`) or a field (`pkg.Message.field`).
    let (parent, child) = symbol.rsplit_once('.')?;
    if let Some(s) = pool.get_service_by_name(parent)
        && s.methods().any(|m| m.name() == child)
    {
        return Some(s.parent_file());
    }
    if let Some(m) = pool.get_message_by_name(parent)
        && m.get_field_by_name(child).is_some()
    {
        return Some(m.parent_file());
    }
    // A package name.
    pool.files().find(|f| f.package_name() == symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_files_compile_and_list() {
        let files = builtin_files();
        assert_eq!(files.len(), 3);
        let pool = reflection_pool(&Catalog::default());
        let resp = reflect(
            &pool,
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(Request::ListServices(String::new())),
            },
        );
        let Some(Response::ListServicesResponse(l)) = resp.message_response else {
            panic!("{resp:?}")
        };
        let names: Vec<_> = l.service.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection"
            ]
        );
        let resp = reflect(
            &pool,
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(Request::FileContainingSymbol(
                    "grpc.health.v1.Health.Check".into(),
                )),
            },
        );
        assert!(matches!(
            resp.message_response,
            Some(Response::FileDescriptorResponse(ref f)) if f.file_descriptor_proto.len() == 1
        ));
    }
}
