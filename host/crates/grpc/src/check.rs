//! Stubs checked against the descriptors: a stub on a gRPC path names a method some
//! descriptor declares, its `grpc-status-name` is a gRPC status, and its body fits
//! the method's response message. Run at start, by `decoy validate` and for
//! `/__admin/problems`, always against the stubs and descriptors served now.

use decoy_core::mapping::Mapping;
use decoy_core::mapping::load::{Problem, StubRef};
use decoy_spec::fields::{FieldError, Fields};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::status::{self, Code};

/// `(service, method)` of a path shaped like a gRPC call's (`/a.b.Service/Method`).
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    let (service, method) = rest.split_once('/')?;
    let ident = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    (ident(service) && ident(method) && !method.contains('.')).then_some((service, method))
}

/// The problems (stubs that cannot answer right) and warnings of `mappings` against
/// `catalog`. Stubs on paths that are not a gRPC call's are left alone.
pub fn check<'a>(
    catalog: &Catalog,
    mappings: impl Iterator<Item = &'a std::sync::Arc<Mapping>>,
    global_templating: bool,
) -> (Vec<Problem>, Vec<Problem>) {
    let mut problems = Vec::new();
    let warnings = Vec::new();
    if catalog.files == 0 {
        return (problems, warnings);
    }
    for m in mappings {
        let Ok(written) = serde_json::from_str::<Value>(&m.json) else {
            continue;
        };
        let request = written.field("request");
        let (field, path) = match (
            request
                .and_then(|r| r.field("urlPath"))
                .and_then(Value::as_str),
            request.and_then(|r| r.field("url")).and_then(Value::as_str),
        ) {
            (Some(p), _) => ("request.urlPath", p),
            (None, Some(p)) => ("request.url", p),
            _ => continue,
        };
        let Some((service, method)) = split_path(path) else {
            continue;
        };
        let report = |into: &mut Vec<Problem>, field: &str, reason: String| {
            into.push(Problem {
                file: m
                    .source
                    .as_ref()
                    .map(|s| s.file.clone())
                    .unwrap_or_default(),
                stub: Some(StubRef::for_mapping(m)),
                error: FieldError::new(field, reason),
            });
        };
        let Some(svc) = catalog.service(service) else {
            let package = service.rsplit_once('.').map_or("", |(p, _)| p);
            if catalog.has_package(package) {
                let declared: Vec<String> = catalog
                    .services()
                    .filter(|s| s.package_name() == package)
                    .map(|s| s.full_name().to_owned())
                    .collect();
                report(
                    &mut problems,
                    field,
                    format!(
                        "no descriptor under grpc/ declares the service {service} (package {package} declares {})",
                        declared.join(", ")
                    ),
                );
            }
            continue;
        };
        let Some(md) = svc.methods().find(|x| x.name() == method) else {
            let names: Vec<String> = svc.methods().map(|x| x.name().to_owned()).collect();
            report(
                &mut problems,
                field,
                format!(
                    "the service {service} declares no method {method:?} (it declares {})",
                    names.join(", ")
                ),
            );
            continue;
        };
        let response = &m.response;
        // The stub's headers live in `served_headers` once it is built (with
        // Matched-Stub-Id and -Name after them).
        let named = m
            .served_headers
            .iter()
            .find(|(k, _)| k.as_str() == status::STATUS_NAME)
            .map(|(_, v)| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let mut ok = true;
        if let Some(name) = &named {
            match Code::from_name(name.trim()) {
                Some(c) => ok = c == Code::OK,
                None => {
                    report(
                        &mut problems,
                        "response.headers.grpc-status-name",
                        format!(
                            "{name:?} is not a gRPC status (one of {})",
                            status::NAMES.join(", ")
                        ),
                    );
                    continue;
                }
            }
        } else if status::from_http(response.status).is_some() {
            ok = false;
        }
        let templated = global_templating || !response.transformers.is_empty();
        if response.proxy.is_some() || response.fault.is_some() || templated {
            continue;
        }
        if !ok && (response.body.is_empty() || !md.is_server_streaming()) {
            continue;
        }
        if let Err(reason) = crate::call::messages_of(&response.body, &md) {
            let resp = written.field("response");
            let field = ["jsonBody", "body", "bodyFileName", "base64Body"]
                .into_iter()
                .find(|f| resp.and_then(|r| r.field(f)).is_some())
                .unwrap_or("body");
            report(
                &mut problems,
                &format!("response.{field}"),
                format!("the answer of {} {reason}", md.full_name()),
            );
        }
    }
    (problems, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            split_path("/com.example.grpc.GreetingService/greeting"),
            Some(("com.example.grpc.GreetingService", "greeting"))
        );
        assert_eq!(split_path("/Svc/M"), Some(("Svc", "M")));
        assert_eq!(split_path("/a/b/c"), None);
        assert_eq!(split_path("/users/7?x=1"), None);
        assert_eq!(split_path("/hello"), None);
    }
}
