//! Admin calls that a web page on another site makes through its visitor's browser.
//!
//! A browser lets any page send a POST to any address, without asking that address
//! first, as long as the body is typed `text/plain`, `application/x-www-form-urlencoded`
//! or `multipart/form-data` (what a plain HTML form sends); it attaches the basic-auth
//! credentials it remembers for that address, and only keeps the answer from the
//! page. So without a check, a page on the internet opened by someone who can reach
//! decoy could create stubs, change settings or shut decoy down (an
//! `<form enctype=text/plain>` whose field name and value spell a stub's JSON is
//! enough). Two checks, both here and both made before any handler runs, keep that
//! out:
//!
//! - **Where the call comes from** ([`cross_site`]). A call that can change
//!   something (any method but GET, HEAD and OPTIONS; no admin GET changes state) is
//!   refused with 403 when the browser says it comes from a page of another origin.
//!   `Sec-Fetch-Site` is the browser's own verdict, so when it is sent it decides:
//!   `cross-site` and `same-site` (another port or subdomain is still another origin)
//!   are refused, `same-origin` and `none` (typed or bookmarked) pass. Because it is
//!   the browser comparing the page with the address it fetched, a reverse proxy that
//!   rewrites `Host` or ends TLS in front of decoy does not make the dashboard's own
//!   calls look foreign. Older browsers without it still send `Origin` on such calls:
//!   its scheme, host and port must then be those the request was sent to (`:authority`
//!   or `Host`, and the listener's scheme), and `Origin: null` (a sandboxed frame, a
//!   local file) is refused.
//! - **What a browser's body is** ([`form_body`]). From a browser, a call with a
//!   body typed as one of the three form types above is refused with 415: every
//!   admin endpoint that reads a body reads JSON, and a browser sends JSON typed as
//!   `application/json` unless a form sends it. This catches the browsers that state
//!   no origin at all (Firefox before version 70 sent no `Origin` with a form). A
//!   request is a browser's when it carries `Origin` or a `Sec-Fetch-*` header, or a
//!   `User-Agent` starting with `Mozilla/` (every browser's; a cross-site request
//!   cannot change it without the browser asking decoy first). The rule cannot
//!   apply to other clients: WireMock's Java client of the 2.x line and of some 3.x
//!   releases sends its JSON typed `text/plain; charset=UTF-8` (Apache HttpClient's
//!   `StringEntity` given only a charset; 3.13.2's sends `application/json`), and
//!   `curl -d` types it as a form. The one
//!   exception is `PUT /__admin/files/{name}`, which stores its body as sent.
//!
//! Clients that are not browsers (WireMock's Java client, the `wiremock` Python
//! package, curl) send neither `Origin` nor `Sec-Fetch-Site` nor a browser's
//! `User-Agent`, so neither check concerns them.
//!
//! With `--admin-token` neither check applies: every admin call must then carry
//! `Authorization: Bearer <token>`, a header a page on another site cannot add
//! without the browser asking decoy first (a CORS preflight, which the admin API
//! never grants).

use super::{AdminReply, AdminRequest, json};

/// Methods that only read (a refused GET would also break a link to the dashboard
/// from another site, which browsers send as `Sec-Fetch-Site: cross-site`).
fn changes_state(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// 403 for a state-changing call a browser says comes from another origin.
pub(super) fn cross_site(req: &AdminRequest) -> Option<AdminReply> {
    if !changes_state(&req.method) {
        return None;
    }
    let why = match header(req, "sec-fetch-site").map(str::to_ascii_lowercase) {
        Some(site) if site == "same-origin" || site == "none" => return None,
        Some(site) if site == "cross-site" || site == "same-site" => format!(
            "the browser that sent it says it comes from a page of another origin \
             (Sec-Fetch-Site: {site})"
        ),
        // A value this does not know: decided by Origin, as without one.
        _ => {
            let origin = header(req, "origin")?;
            let own = own_origin(req);
            if own.is_some() && origin_of(origin) == own {
                return None;
            }
            let own = own.map_or_else(
                || "no Host header".to_owned(),
                |(scheme, host, port)| format!("{scheme}://{host}:{port}"),
            );
            format!(
                "the browser that sent it says it comes from a page at {origin}, \
                 not from this server ({own})"
            )
        }
    };
    tracing::debug!(
        "admin API: refused {} /__admin{}: {why}",
        req.method,
        req.path
    );
    Some(AdminReply::json(
        403,
        json::error(
            "Cross-site admin request refused",
            &format!(
                "{} /__admin{} changes decoy's state, and {why}. The admin API takes such \
                 calls from its own pages (the dashboard), from clients that are not \
                 browsers, or with --admin-token",
                req.method, req.path
            ),
        ),
    ))
}

/// The types a browser sends across sites without asking the server first.
const FORM_TYPES: [&str; 3] = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
];

/// 415 for a browser's body typed as a form where the admin API reads JSON.
pub(super) fn form_body(req: &AdminRequest) -> Option<AdminReply> {
    if !changes_state(&req.method)
        || req.body.iter().all(u8::is_ascii_whitespace)
        || req.path.starts_with("/files/")
        || !from_a_browser(req)
    {
        return None;
    }
    let sent = req
        .headers
        .get_all(http::header::CONTENT_TYPE)
        .iter()
        .find_map(|v| {
            let v = v.to_str().ok()?;
            // A list (two headers joined, or a comma) counts if any of its types is one.
            v.split(',').find_map(|t| {
                let essence = t
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                FORM_TYPES.contains(&essence.as_str()).then_some(essence)
            })
        })?;
    tracing::debug!(
        "admin API: refused {} /__admin{}: body typed {sent}",
        req.method,
        req.path
    );
    Some(AdminReply::json(
        415,
        json::error(
            "Unsupported media type",
            &format!(
                "{} /__admin{} reads its body as JSON, but this browser sent it as {sent}, \
                 the way a form on a web page of another site can make it send one; a \
                 browser's JSON must be sent as Content-Type: application/json",
                req.method, req.path
            ),
        ),
    ))
}

/// Whether a browser sent the request (see the module documentation).
fn from_a_browser(req: &AdminRequest) -> bool {
    req.headers.contains_key(http::header::ORIGIN)
        || req
            .headers
            .keys()
            .any(|k| k.as_str().starts_with("sec-fetch-"))
        || header(req, "user-agent").is_some_and(|ua| ua.starts_with("Mozilla/"))
}

fn header<'a>(req: &'a AdminRequest, name: &str) -> Option<&'a str> {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Scheme, host and port, lowercased, the port filled in from the scheme.
type Origin = (String, String, u16);

/// The origin an `Origin` header names (`None` for `null` or anything unreadable).
fn origin_of(value: &str) -> Option<Origin> {
    let uri: http::Uri = value.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let port = authority.port_u16().or_else(|| default_port(&scheme))?;
    Some((scheme, authority.host().to_ascii_lowercase(), port))
}

/// The origin this request was sent to: the listener's scheme, and the authority
/// the client addressed (HTTP/2's `:authority` or an absolute URI, else `Host`).
fn own_origin(req: &AdminRequest) -> Option<Origin> {
    let authority: http::uri::Authority = match &req.authority {
        Some(a) => a.parse().ok()?,
        None => header(req, "host")?.parse().ok()?,
    };
    let scheme = req.scheme.to_ascii_lowercase();
    let port = authority.port_u16().or_else(|| default_port(&scheme))?;
    Some((scheme, authority.host().to_ascii_lowercase(), port))
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> AdminRequest {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        AdminRequest {
            method: method.into(),
            path: path.into(),
            query: Vec::new(),
            authorization: None,
            scheme: "http",
            authority: None,
            headers: map,
            body: Bytes::from(body.to_owned()),
        }
    }

    fn refused(headers: &[(&str, &str)]) -> bool {
        cross_site(&request("POST", "/mappings", headers, "{}")).is_some()
    }

    #[test]
    fn origin_is_compared_by_scheme_host_and_port_with_default_ports_filled_in() {
        let host = ("host", "Decoy.test");
        assert!(!refused(&[host, ("origin", "http://decoy.test")]));
        assert!(!refused(&[host, ("origin", "http://decoy.test:80")]));
        assert!(refused(&[host, ("origin", "https://decoy.test")]));
        assert!(refused(&[host, ("origin", "http://decoy.test:8080")]));
        assert!(refused(&[host, ("origin", "http://evil.test")]));
        assert!(refused(&[host, ("origin", "null")]));
        assert!(refused(&[host, ("origin", "garbage")]));
        assert!(
            refused(&[("origin", "http://decoy.test")]),
            "no Host to compare with"
        );
        let v6 = ("host", "[::1]:8080");
        assert!(!refused(&[v6, ("origin", "http://[::1]:8080")]));
        assert!(refused(&[v6, ("origin", "http://[::2]:8080")]));
    }

    #[test]
    fn sec_fetch_site_decides_when_sent() {
        let host = ("host", "decoy.test");
        assert!(refused(&[host, ("sec-fetch-site", "cross-site")]));
        assert!(refused(&[host, ("sec-fetch-site", "Same-Site")]));
        assert!(!refused(&[host, ("sec-fetch-site", "same-origin")]));
        assert!(!refused(&[host, ("sec-fetch-site", "none")]));
        // Behind a proxy that rewrote Host, the browser's own verdict still holds.
        let proxied = [
            host,
            ("sec-fetch-site", "same-origin"),
            ("origin", "https://public.test"),
        ];
        assert!(!refused(&proxied));
        assert!(refused(&[
            host,
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://decoy.test")
        ]));
        assert!(refused(&[
            host,
            ("sec-fetch-site", "what"),
            ("origin", "http://evil.test")
        ]));
    }

    #[test]
    fn reads_and_clients_that_are_not_browsers_pass() {
        assert!(!refused(&[("host", "decoy.test")]));
        let get = request("GET", "/mappings", &[("sec-fetch-site", "cross-site")], "");
        assert!(cross_site(&get).is_none());
    }

    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:68.0) Gecko/20100101 Firefox/68.0";

    #[test]
    fn a_browsers_form_typed_bodies_are_refused_except_for_files() {
        let typed = |ct: &str, path: &str, body: &str| {
            let headers = [("content-type", ct), ("user-agent", FIREFOX)];
            form_body(&request("POST", path, &headers, body)).map(|r| r.status)
        };
        assert_eq!(typed("text/plain", "/mappings", "{}"), Some(415));
        assert_eq!(
            typed("Text/Plain; charset=UTF-8", "/mappings", "{}"),
            Some(415)
        );
        assert_eq!(
            typed("application/x-www-form-urlencoded", "/mappings", "{}"),
            Some(415)
        );
        assert_eq!(
            typed("multipart/form-data; boundary=x", "/mappings", "{}"),
            Some(415)
        );
        assert_eq!(
            typed("application/json, text/plain", "/mappings", "{}"),
            Some(415)
        );
        assert_eq!(typed("application/json", "/mappings", "{}"), None);
        assert_eq!(typed("application/vnd.api+json", "/mappings", "{}"), None);
        assert_eq!(typed("text/plain", "/reset", ""), None, "no body");
        assert_eq!(typed("text/plain", "/files/a.txt", "hello"), None);
        assert!(form_body(&request("POST", "/mappings", &[], "{}")).is_none());
    }

    #[test]
    fn other_clients_may_type_their_json_as_they_do() {
        let typed = |headers: &[(&str, &str)]| {
            form_body(&request("POST", "/mappings", headers, "{}")).map(|r| r.status)
        };
        // WireMock's Java client, 2.x and some 3.x (a StringEntity given only a charset).
        let java = [
            ("content-type", "text/plain; charset=UTF-8"),
            ("user-agent", "Apache-HttpClient/5.4.3 (Java/17.0.12)"),
        ];
        assert_eq!(typed(&java), None);
        let curl = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("user-agent", "curl/8.5.0"),
        ];
        assert_eq!(typed(&curl), None);
        assert_eq!(
            typed(&[("content-type", "text/plain")]),
            None,
            "no User-Agent"
        );
        // A browser says so in more ways than its User-Agent.
        assert_eq!(
            typed(&[("content-type", "text/plain"), ("origin", "null")]),
            Some(415)
        );
        let fetch = [
            ("content-type", "text/plain"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert_eq!(typed(&fetch), Some(415));
    }
}
