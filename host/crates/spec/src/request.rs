//! The owned request snapshot that every matcher reads.
//!
//! A transport (HTTP today, MQ later) turns what it received into a [`RequestSnapshot`]
//! once; matching is then synchronous code over plain data, with no borrow of the
//! connection and no `await`. Derived views (decoded query, cookies, form fields,
//! multipart parts) are computed on first use and cached, because most requests never
//! need them and the ones that do usually need them for several candidate mappings.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::OnceLock;

use bytes::Bytes;
use http::HeaderMap;

use crate::header_case::HeaderCase;

/// One received request, owned, transport-neutral.
#[derive(Debug)]
pub struct RequestSnapshot {
    /// Upper-case method (`GET`); for a message transport, a verb such as `PUBLISH`.
    pub method: String,
    /// Path and query exactly as received, still percent-encoded (`/a%20b?x=1`).
    pub url: String,
    /// Length of the path part of `url` (everything before `?`).
    path_len: usize,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The authority of an absolute request URI (HTTP/2 `:authority`); when absent,
    /// [`RequestSnapshot::host_port`] reads the `Host` header instead, so HTTP/1
    /// requests pay nothing for it unless a mapping asks.
    pub authority: Option<String>,
    /// Names are lower case here; this says how they were spelled, for the journal
    /// (matching never reads it: header names match ignoring case).
    pub header_case: HeaderCase,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub client_addr: Option<SocketAddr>,
    /// Boxed and built on first use: most requests never need these, and each of the
    /// journal's entries that was read holds a snapshot, which would otherwise carry
    /// four empty cells (112 bytes more an entry).
    derived: OnceLock<Box<Derived>>,
}

/// The views of a request that are computed on first use (see [`RequestSnapshot`]).
#[derive(Debug, Default)]
struct Derived {
    query: OnceLock<Vec<(String, String)>>,
    cookies: OnceLock<Vec<(String, String)>>,
    form: OnceLock<Vec<(String, String)>>,
    multipart: OnceLock<Vec<Part>>,
}

/// One part of a `multipart/*` body.
#[derive(Debug, Clone)]
pub struct Part {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RequestSnapshot {
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        let url = url.into();
        let path_len = url.find('?').unwrap_or(url.len());
        RequestSnapshot {
            method: method.into(),
            url,
            path_len,
            scheme: "http",
            authority: None,
            header_case: HeaderCase::as_sent(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
            client_addr: None,
            derived: OnceLock::new(),
        }
    }

    fn derived(&self) -> &Derived {
        self.derived.get_or_init(Box::default)
    }

    pub fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Host and port the client addressed; the port defaults from the scheme. An
    /// IPv6 host keeps its brackets (`[::1]`), as WireMock's `request.host` shows it.
    /// The host is borrowed from the request where it can be (no allocation).
    pub fn host_port(&self) -> Option<(Cow<'_, str>, u16)> {
        let authority: Cow<'_, str> = match &self.authority {
            Some(a) => Cow::Borrowed(a),
            None => self.header("host")?,
        };
        let default = default_port(self.scheme);
        let split = |a: &str| -> (std::ops::Range<usize>, Option<u16>) {
            // `[::1]:8080`, `host:8080`, `host`
            if let Some(rest) = a.strip_prefix('[')
                && let Some((h, p)) = rest.split_once(']')
            {
                return (
                    0..h.len() + 2,
                    p.strip_prefix(':').and_then(|p| p.parse().ok()),
                );
            }
            match a.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => {
                    (0..h.len(), Some(p.parse().unwrap_or(default)))
                }
                _ => (0..a.len(), None),
            }
        };
        let (host, port) = split(&authority);
        let port = port.unwrap_or(default);
        Some(match authority {
            Cow::Borrowed(a) => (Cow::Borrowed(&a[host]), port),
            Cow::Owned(a) if host == (0..a.len()) => (Cow::Owned(a), port),
            Cow::Owned(a) => (Cow::Owned(a[host].to_owned()), port),
        })
    }

    /// The path, still percent-encoded, as WireMock matches it.
    pub fn path(&self) -> &str {
        &self.url[..self.path_len]
    }

    /// The raw query string without `?`, if there is one.
    pub fn raw_query(&self) -> Option<&str> {
        self.url.get(self.path_len + 1..)
    }

    /// Decoded query parameters in order of appearance (a name may repeat).
    pub fn query(&self) -> &[(String, String)] {
        self.derived().query.get_or_init(|| match self.raw_query() {
            Some(q) => form_urlencoded::parse(q.as_bytes()).into_owned().collect(),
            None => Vec::new(),
        })
    }

    pub fn query_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.query()
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// All values of a header, in order; a value that is not UTF-8 is read lossily.
    pub fn header_values<'a>(&'a self, name: &str) -> Vec<std::borrow::Cow<'a, str>> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<std::borrow::Cow<'_, str>> {
        self.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
    }

    /// Cookies from every `Cookie` header.
    pub fn cookies(&self) -> &[(String, String)] {
        self.derived().cookies.get_or_init(|| {
            let mut out = Vec::new();
            for value in self.headers.get_all(http::header::COOKIE) {
                let text = String::from_utf8_lossy(value.as_bytes());
                for pair in text.split(';') {
                    let pair = pair.trim();
                    if pair.is_empty() {
                        continue;
                    }
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    out.push((k.trim().to_owned(), v.trim().to_owned()));
                }
            }
            out
        })
    }

    /// Fields of an `application/x-www-form-urlencoded` body.
    pub fn form(&self) -> &[(String, String)] {
        self.derived()
            .form
            .get_or_init(|| form_urlencoded::parse(&self.body).into_owned().collect())
    }

    /// Parts of a `multipart/*` body; empty when the request is not multipart.
    pub fn parts(&self) -> &[Part] {
        self.derived().multipart.get_or_init(|| {
            let Some(ct) = self.header("content-type") else {
                return Vec::new();
            };
            match decoy_multipart::boundary(&ct) {
                Some(boundary) => parse_multipart(&self.body, &boundary),
                None => Vec::new(),
            }
        })
    }

    pub fn body_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }
}

/// The shared parser's parts (`decoy-multipart`) with their headers as an HTTP
/// header map; a header whose name or value HTTP cannot carry is left out.
fn parse_multipart(body: &[u8], boundary: &str) -> Vec<Part> {
    decoy_multipart::parse(body, boundary)
        .into_iter()
        .map(|p| {
            let mut headers = HeaderMap::new();
            for (k, v) in &p.headers {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    http::HeaderValue::from_str(v),
                ) {
                    headers.append(name, value);
                }
            }
            Part {
                headers,
                body: Bytes::copy_from_slice(p.body),
            }
        })
        .collect()
}

/// The port a URL of `scheme` means when it names none: 443 for `https`, else 80.
fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// `scheme://host:port`, without the port when it is the scheme's default (80 for
/// `http`, 443 for `https`), as Jetty writes a request's URL for WireMock.
pub fn base_url(scheme: &str, host: &str, port: u16) -> String {
    let mut out = String::new();
    write_base_url(&mut out, scheme, host, port);
    out
}

/// [`base_url`], appended to `out`.
pub fn write_base_url(out: &mut String, scheme: &str, host: &str, port: u16) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = if port == default_port(scheme) {
        write!(out, "{scheme}://{host}")
    } else {
        write!(out, "{scheme}://{host}:{port}")
    };
}

/// `content-type` -> `Content-Type`, word by word: how a name is shown where its
/// spelling is not known (diff reports; `--record-mappings` over HTTP/2).
pub fn title_case_header(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_path_and_decodes_query() {
        let r = RequestSnapshot::new("GET", "/a%20b?x=1&y=hello%20world&x=2");
        assert_eq!(r.path(), "/a%20b");
        assert_eq!(r.query_values("x").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(r.query_values("y").collect::<Vec<_>>(), ["hello world"]);
    }

    #[test]
    fn host_and_port_come_from_the_authority_or_the_host_header() {
        let mut h = HeaderMap::new();
        h.insert("host", "api.example.com:8443".parse().unwrap());
        let r = RequestSnapshot::new("GET", "/").with_headers(h);
        assert_eq!(r.host_port(), Some(("api.example.com".into(), 8443)));
        let mut r = RequestSnapshot::new("GET", "/");
        r.authority = Some("[::1]".into());
        assert_eq!(r.host_port(), Some(("[::1]".into(), 80)));
        r.authority = Some("[::1]:8080".into());
        assert_eq!(r.host_port(), Some(("[::1]".into(), 8080)));
        assert_eq!(base_url("http", "[::1]", 8080), "http://[::1]:8080");
        assert_eq!(RequestSnapshot::new("GET", "/").host_port(), None);
    }

    #[test]
    fn base_urls_leave_out_the_schemes_default_port() {
        assert_eq!(base_url("http", "a", 80), "http://a");
        assert_eq!(base_url("http", "a", 443), "http://a:443");
        assert_eq!(base_url("https", "a", 443), "https://a");
        assert_eq!(base_url("https", "a", 80), "https://a:80");
    }

    #[test]
    fn parses_cookies_from_several_headers() {
        let mut h = HeaderMap::new();
        h.append("cookie", "a=1; b=2".parse().unwrap());
        h.append("cookie", "c=3".parse().unwrap());
        let r = RequestSnapshot::new("GET", "/").with_headers(h);
        assert_eq!(r.cookies().len(), 3);
        assert_eq!(r.cookies()[2], ("c".into(), "3".into()));
    }

    #[test]
    fn parses_multipart_parts_with_headers() {
        let body = "--XyZ\r\nContent-Disposition: form-data; name=\"info\"\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nhello\r\n--XyZ--\r\n";
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            "multipart/form-data; boundary=XyZ".parse().unwrap(),
        );
        let r = RequestSnapshot::new("POST", "/up")
            .with_headers(h)
            .with_body(body);
        let parts = r.parts();
        assert_eq!(parts.len(), 2);
        assert_eq!(&parts[0].body[..], b"{\"a\":1}");
        assert_eq!(
            parts[1].headers["content-disposition"],
            "form-data; name=\"file\""
        );
        assert_eq!(&parts[1].body[..], b"hello");
    }
}
