//! `--enable-stub-cors`: what WireMock's Jetty `CrossOriginFilter` does for stub
//! requests (any origin, any header, methods `OPTIONS,GET,POST,PUT,PATCH,DELETE`,
//! credentials allowed, preflights answered without reaching the stubs).
//!
//! Checked against WireMock 3.13.2: a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`) gets `200` with an empty body, `Vary: Origin`, the
//! origin echoed, `Access-Control-Allow-Credentials: true`, `Access-Control-Max-Age:
//! 1800`, the allowed methods and the requested headers (or only `Vary: Origin` when
//! the requested method is not allowed); a stub answer to a request with `Origin`
//! carries `Access-Control-Allow-Origin` (echoed) and `-Allow-Credentials: true`; a
//! matched answer carries `Vary: Origin` whether or not the request had an origin, an
//! unmatched one does not.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, Method, header};

use decoy_spec::plan::{ResponsePlan, text_plan};

const METHODS: &str = "OPTIONS,GET,POST,PUT,PATCH,DELETE";

/// The answer to a CORS preflight, or `None` when the request is not one.
pub fn preflight(method: &Method, headers: &HeaderMap) -> Option<ResponsePlan> {
    if method != Method::OPTIONS {
        return None;
    }
    let origin = headers.get(header::ORIGIN)?;
    let requested = headers.get(header::ACCESS_CONTROL_REQUEST_METHOD)?;
    let mut out = vec![(header::VARY, HeaderValue::from_static("Origin"))];
    let allowed = requested
        .to_str()
        .is_ok_and(|m| METHODS.split(',').any(|a| a == m.trim()));
    if allowed {
        let asked: Vec<&str> = headers
            .get_all(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        out.extend([
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone()),
            (
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            ),
            (
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("1800"),
            ),
            (
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(METHODS),
            ),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_str(&asked.join(",")).unwrap_or(HeaderValue::from_static("")),
            ),
        ]);
    }
    let mut plan = text_plan(200, String::new());
    plan.headers = Arc::from(out);
    Some(plan)
}

/// Adds the CORS headers to a stub's answer.
pub fn decorate(plan: &mut ResponsePlan, origin: Option<HeaderValue>, matched: bool) {
    let mut add: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(3);
    if matched {
        add.push((header::VARY, HeaderValue::from_static("Origin")));
    }
    if let Some(origin) = origin {
        add.push((header::ACCESS_CONTROL_ALLOW_ORIGIN, origin));
        add.push((
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        ));
    }
    if add.is_empty() {
        return;
    }
    // The stub's own CORS headers win, as the filter's are set before the stub's.
    let own: Vec<(HeaderName, HeaderValue)> = plan
        .headers
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("access-control-") || *n == header::VARY)
        .cloned()
        .collect();
    add.retain(|(n, _)| !own.iter().any(|(o, _)| o == n));
    add.extend(plan.headers.iter().cloned());
    plan.headers = Arc::from(add);
}
