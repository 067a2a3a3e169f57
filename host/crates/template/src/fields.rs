//! The request fields a template can name, and what each one holds.
//!
//! `{{request.query.q}}` is the first value of query parameter `q`,
//! `{{request.pathSegments.[1]}}` the second path segment percent-decoded,
//! `{{request.clientIp}}` the `X-Forwarded-For` header or the client's address as
//! Jetty writes it... These meanings are WireMock's, and they are written here once:
//! the plugin's Handlebars model, its direct renderer and the host's [`Plain`]
//! templates all read a request through [`Field::text`], over whatever holds the
//! request ([`RequestFields`]: the plugin's WIT record, the host's snapshot).
//!
//! [`Plain`]: crate::Plain

use std::borrow::Cow;

use handlebars::template::Parameter;
use handlebars::{Path, PathSeg};

/// A request as templates read it. An HTTP request answers every method; a message
/// from a queue answers [`message`](Self::message), [`header`](Self::header) (its
/// properties) and [`body`](Self::body), and what it returns elsewhere is not read.
pub trait RequestFields {
    /// `Some` for a message from a queue, `None` for an HTTP request.
    fn message(&self) -> Option<Message<'_>>;
    /// Upper case: `GET`.
    fn method(&self) -> &str;
    /// Path and query as received, still percent-encoded.
    fn url(&self) -> &str;
    /// The path part of the URL, still percent-encoded.
    fn path(&self) -> &str;
    fn body(&self) -> &[u8];
    /// `http://host:port` of this server, as WireMock's `request.baseUrl`.
    fn base_url(&self) -> &str;
    /// The first decoded value of query parameter `name`.
    fn query(&self, name: &str) -> Option<&str>;
    /// The first header (of a message: property) whose name, in ASCII lower case, is
    /// `lower`, as text (bytes that are not UTF-8 replaced).
    fn header(&self, lower: &str) -> Option<Cow<'_, str>>;
    fn cookie(&self, name: &str) -> Option<&str>;
    /// The `urlPathTemplate` variable `name`.
    fn path_param(&self, name: &str) -> Option<&str>;
    /// The address of the client decoy is connected to: `127.0.0.1`, `::1`.
    fn peer_ip(&self) -> Option<Cow<'_, str>>;
}

/// What a message from a queue has that an HTTP request has not.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub destination: &'a str,
    pub reply_to: Option<&'a str>,
    pub message_id: Option<&'a str>,
    pub correlation_id: Option<&'a str>,
}

/// One leaf of the request model that holds a string or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Url,
    Path,
    Method,
    Body,
    BaseUrl,
    Scheme,
    Host,
    Port,
    ClientIp,
    Destination,
    ReplyTo,
    MessageId,
    CorrelationId,
    Segment(usize),
    Query(String),
    /// By lower-case name (paths to headers are lower-cased by the rewrites).
    Header(String),
    Cookie(String),
    PathParam(String),
}

impl Field {
    /// The field a compiled template's parameter names (`request.query.q`), when it
    /// is a plain path to a leaf.
    pub fn of_parameter(p: &Parameter) -> Option<Field> {
        let Parameter::Path(Path::Relative((segs, _))) = p else {
            return None;
        };
        let mut names = Vec::with_capacity(segs.len());
        for s in segs {
            match s {
                PathSeg::Named(n) => names.push(n.as_str()),
                _ => return None,
            }
        }
        Field::of_path(&names)
    }

    /// The field a path (after [`crate::rewrite_paths`]) names, when it is a leaf
    /// holding a string or a number.
    pub fn of_path(path: &[&str]) -> Option<Field> {
        let (&"request", rest) = path.split_first()? else {
            return None;
        };
        Some(match rest {
            ["url"] => Field::Url,
            ["path"] => Field::Path,
            ["method"] => Field::Method,
            ["body"] => Field::Body,
            ["baseUrl"] => Field::BaseUrl,
            ["scheme"] => Field::Scheme,
            ["host"] => Field::Host,
            ["port"] => Field::Port,
            ["clientIp"] => Field::ClientIp,
            ["destination"] => Field::Destination,
            ["replyTo"] => Field::ReplyTo,
            ["messageId"] => Field::MessageId,
            ["correlationId"] => Field::CorrelationId,
            // As Handlebars indexes a list (a path that is no number fails there).
            ["pathSegments", i] => Field::Segment(i.parse().ok()?),
            // A parameter's first value, however it is asked for (WireMock's
            // `first` and Handlebars' index agree with the bare name).
            ["query", k] | ["query", k, "first" | "0"] => Field::Query((*k).to_owned()),
            ["headers", k] => Field::Header((*k).to_owned()),
            ["cookies", k] => Field::Cookie((*k).to_owned()),
            ["pathParams", k] => Field::PathParam((*k).to_owned()),
            _ => return None,
        })
    }

    /// What the model holds at this field, as Handlebars writes it (`None` renders
    /// nothing).
    pub fn text<'a, R: RequestFields + ?Sized>(&self, req: &'a R) -> Option<Cow<'a, str>> {
        let borrowed = |s: &'a str| Some(Cow::Borrowed(s));
        if let Some(m) = req.message() {
            return match self {
                Field::Url | Field::Path | Field::Destination => borrowed(m.destination),
                Field::ReplyTo => m.reply_to.map(Cow::Borrowed),
                Field::MessageId => m.message_id.map(Cow::Borrowed),
                Field::CorrelationId => m.correlation_id.map(Cow::Borrowed),
                Field::Header(k) => req.header(k),
                Field::Method => borrowed(""),
                Field::Body => Some(String::from_utf8_lossy(req.body())),
                Field::BaseUrl
                | Field::Scheme
                | Field::Host
                | Field::Port
                | Field::ClientIp
                | Field::Segment(_)
                | Field::Query(_)
                | Field::Cookie(_)
                | Field::PathParam(_) => None,
            };
        }
        match self {
            Field::Url => borrowed(req.url()),
            Field::Path => borrowed(req.path()),
            Field::Method => borrowed(req.method()),
            Field::Body => Some(String::from_utf8_lossy(req.body())),
            Field::BaseUrl => borrowed(req.base_url()),
            Field::Scheme => borrowed(base_url_parts(req.base_url()).0),
            Field::Host => borrowed(base_url_parts(req.base_url()).1),
            Field::Port => base_url_parts(req.base_url())
                .2
                .map(|p| Cow::Owned(p.to_string())),
            Field::ClientIp => client_ip(req).map(Cow::Owned),
            Field::Segment(i) => segments(req.path())
                .nth(*i)
                .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy()),
            Field::Query(k) => req.query(k).map(Cow::Borrowed),
            Field::Header(k) => req.header(k),
            Field::Cookie(k) => req.cookie(k).map(Cow::Borrowed),
            Field::PathParam(k) => req.path_param(k).map(Cow::Borrowed),
            Field::Destination | Field::ReplyTo | Field::MessageId | Field::CorrelationId => None,
        }
    }
}

/// WireMock's `request.pathSegments`, still percent-encoded: the path split at `/`,
/// empty segments left out.
pub fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

/// WireMock's `request.clientIp`: the request's `X-Forwarded-For` header when it has
/// a non-empty one (its first, whole, as WireMock takes it: every address a proxy
/// chain added), else the address of the client decoy was connected to, as Jetty
/// writes it (an IPv6 address in full and in brackets: `[0:0:0:0:0:0:0:1]`).
pub fn client_ip<R: RequestFields + ?Sized>(req: &R) -> Option<String> {
    match req.header("x-forwarded-for") {
        Some(v) if !v.is_empty() => Some(v.into_owned()),
        _ => req.peer_ip().map(|ip| jetty_address(&ip)),
    }
}

/// An address as Jetty's `getRemoteAddr` gives it: IPv4 as it is, IPv6 as Java's
/// `getHostAddress` (eight groups of hex without leading zeros, nothing compressed)
/// in brackets.
pub fn jetty_address(ip: &str) -> String {
    match ip.parse::<std::net::Ipv6Addr>() {
        Ok(v6) => {
            let groups: Vec<String> = v6.segments().iter().map(|g| format!("{g:x}")).collect();
            format!("[{}]", groups.join(":"))
        }
        Err(_) => ip.to_owned(),
    }
}

/// `request.scheme`, `request.host` and `request.port` from `request.baseUrl`, which
/// leaves out the scheme's default port (`http://example.com` is port 80) and keeps
/// an IPv6 host in brackets (`http://[::1]:8080`), as WireMock's does.
pub fn base_url_parts(base_url: &str) -> (&str, &str, Option<u16>) {
    let (scheme, rest) = base_url.split_once("://").unwrap_or(("http", base_url));
    let default = match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    match rest.rsplit_once(':') {
        Some((host, port)) if !port.ends_with(']') => (scheme, host, port.parse::<u16>().ok()),
        _ => (scheme, rest, default),
    }
}

/// The first value named `key` in a list of fields (a query, cookies, path
/// parameters), for implementations of [`RequestFields`] over such lists.
pub fn first<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The first value whose name, in ASCII lower case, is `key` (the model's header and
/// property names are lower case, as template paths to them are).
pub fn first_lower<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| {
            n.len() == key.len()
                && n.bytes()
                    .zip(key.bytes())
                    .all(|(a, b)| a.to_ascii_lowercase() == b)
        })
        .map(|(_, v)| v.as_str())
}
