//! How a message's header names were spelled, so reports and recorded files show them
//! as WireMock does while every lookup stays case-insensitive.
//!
//! decoy's header maps hold lower-case names (hyper 1 lower-cases HTTP/1 names and
//! keeps the original case only in a private record, hyperium/hyper#2695). A
//! [`HeaderCase`] travels beside such a map with the spellings that differ from what
//! the map alone would show; the transport notes them as it reads the bytes. Most
//! messages need none, and then it holds nothing (an empty `String` allocates nothing).
//!
//! Two defaults for a name with no spelling noted, as WireMock 3.13.2 shows them
//! (checked against the jar):
//! - [`HeaderCase::as_sent`]: the lower-case name. Right for HTTP/2 (lower case on the
//!   wire), for an upstream's answer (WireMock's proxy client keeps its spelling) and
//!   for headers given as JSON.
//! - [`HeaderCase::jetty`]: for an HTTP/1 request. WireMock's server (Jetty) reports a
//!   name it knows ([`jetty_spelling`]: `Content-Type`, `User-Agent`, `ETag`, ...) in
//!   its own spelling whenever the name is followed by `": "`, and `Host` always;
//!   every other name as the client spelled it. A client that writes `accept: x` or
//!   `ACCEPT: x` is shown `Accept`, and `X-Custom` stays `X-Custom`.
//!
//! When a name comes several times, WireMock shows the first spelling for all of them.

/// The spellings of a message's header names that differ from the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderCase {
    /// The noted spellings, first per name, joined by `:` (which no header name
    /// contains): one allocation however many there are.
    spellings: String,
    /// Names with no spelling noted show as Jetty spells them (HTTP/1 requests).
    jetty: bool,
}

impl HeaderCase {
    /// Names show as noted, else in lower case.
    pub fn as_sent() -> HeaderCase {
        HeaderCase::default()
    }

    /// Names show as noted, else in Jetty's spelling when it knows the name, else in
    /// lower case: how WireMock reports an HTTP/1 request.
    pub fn jetty() -> HeaderCase {
        HeaderCase {
            spellings: String::new(),
            jetty: true,
        }
    }

    /// True when no spelling was noted.
    pub fn is_empty(&self) -> bool {
        self.spellings.is_empty()
    }

    /// Notes that a name was written `spelling`, unless a spelling of the same name
    /// (in any case) was noted before: the first one wins. A spelling that is not a
    /// header name (empty, or with a `:`) is ignored.
    pub fn note(&mut self, spelling: &str) {
        if spelling.is_empty() || spelling.contains(':') || self.noted(spelling).is_some() {
            return;
        }
        if !self.spellings.is_empty() {
            self.spellings.push(':');
        }
        self.spellings.push_str(spelling);
    }

    /// The spelling noted for `name` (compared ignoring case).
    fn noted(&self, name: &str) -> Option<&str> {
        if self.spellings.is_empty() {
            return None;
        }
        self.spellings
            .split(':')
            .find(|s| s.eq_ignore_ascii_case(name))
    }

    /// How `name` (as the header map holds it) is shown.
    pub fn name<'a>(&'a self, name: &'a str) -> &'a str {
        if let Some(s) = self.noted(name) {
            return s;
        }
        if self.jetty
            && let Some(s) = jetty_spelling(name.as_bytes())
        {
            return s;
        }
        name
    }

    /// The noted spellings, in the order they were noted.
    pub fn spellings(&self) -> impl Iterator<Item = &str> {
        self.spellings.split(':').filter(|s| !s.is_empty())
    }
}

/// The longest name [`jetty_spelling`] knows (`Strict-Transport-Security`).
const LONGEST_KNOWN: usize = 25;

/// Jetty's own spelling of a header name it knows (compared ignoring case): the
/// names of `org.eclipse.jetty.http.HttpHeader` in WireMock 3.13.2's jar, less the
/// HTTP/2 pseudo-headers.
pub fn jetty_spelling(name: &[u8]) -> Option<&'static str> {
    if name.len() > LONGEST_KNOWN {
        return None;
    }
    let mut lower = [0u8; LONGEST_KNOWN];
    let lower = &mut lower[..name.len()];
    for (l, b) in lower.iter_mut().zip(name) {
        *l = b.to_ascii_lowercase();
    }
    Some(match &*lower {
        b"connection" => "Connection",
        b"cache-control" => "Cache-Control",
        b"date" => "Date",
        b"pragma" => "Pragma",
        b"proxy-connection" => "Proxy-Connection",
        b"trailer" => "Trailer",
        b"transfer-encoding" => "Transfer-Encoding",
        b"upgrade" => "Upgrade",
        b"via" => "Via",
        b"warning" => "Warning",
        b"negotiate" => "Negotiate",
        b"allow" => "Allow",
        b"content-encoding" => "Content-Encoding",
        b"content-language" => "Content-Language",
        b"content-length" => "Content-Length",
        b"content-location" => "Content-Location",
        b"content-md5" => "Content-MD5",
        b"content-range" => "Content-Range",
        b"content-type" => "Content-Type",
        b"expires" => "Expires",
        b"last-modified" => "Last-Modified",
        b"accept" => "Accept",
        b"accept-charset" => "Accept-Charset",
        b"accept-encoding" => "Accept-Encoding",
        b"accept-language" => "Accept-Language",
        b"authorization" => "Authorization",
        b"expect" => "Expect",
        b"forwarded" => "Forwarded",
        b"from" => "From",
        b"host" => "Host",
        b"if-match" => "If-Match",
        b"if-modified-since" => "If-Modified-Since",
        b"if-none-match" => "If-None-Match",
        b"if-range" => "If-Range",
        b"if-unmodified-since" => "If-Unmodified-Since",
        b"keep-alive" => "Keep-Alive",
        b"max-forwards" => "Max-Forwards",
        b"proxy-authorization" => "Proxy-Authorization",
        b"range" => "Range",
        b"request-range" => "Request-Range",
        b"referer" => "Referer",
        b"te" => "TE",
        b"user-agent" => "User-Agent",
        b"x-forwarded-for" => "X-Forwarded-For",
        b"x-forwarded-port" => "X-Forwarded-Port",
        b"x-forwarded-proto" => "X-Forwarded-Proto",
        b"x-forwarded-server" => "X-Forwarded-Server",
        b"x-forwarded-host" => "X-Forwarded-Host",
        b"accept-ranges" => "Accept-Ranges",
        b"age" => "Age",
        b"alt-svc" => "Alt-Svc",
        b"etag" => "ETag",
        b"link" => "Link",
        b"location" => "Location",
        b"proxy-authenticate" => "Proxy-Authenticate",
        b"retry-after" => "Retry-After",
        b"server" => "Server",
        b"servlet-engine" => "Servlet-Engine",
        b"vary" => "Vary",
        b"www-authenticate" => "WWW-Authenticate",
        b"origin" => "Origin",
        b"sec-websocket-key" => "Sec-WebSocket-Key",
        b"sec-websocket-version" => "Sec-WebSocket-Version",
        b"sec-websocket-extensions" => "Sec-WebSocket-Extensions",
        b"sec-websocket-protocol" => "Sec-WebSocket-Protocol",
        b"sec-websocket-accept" => "Sec-WebSocket-Accept",
        b"cookie" => "Cookie",
        b"set-cookie" => "Set-Cookie",
        b"set-cookie2" => "Set-Cookie2",
        b"mime-version" => "MIME-Version",
        b"identity" => "identity",
        b"x-powered-by" => "X-Powered-By",
        b"http2-settings" => "HTTP2-Settings",
        b"strict-transport-security" => "Strict-Transport-Security",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_nothing_noted_shows_in_lower_case_or_in_jettys_spelling() {
        let sent = HeaderCase::as_sent();
        assert_eq!(sent.name("content-type"), "content-type");
        assert_eq!(sent.name("x-custom"), "x-custom");
        let jetty = HeaderCase::jetty();
        assert_eq!(jetty.name("content-type"), "Content-Type");
        assert_eq!(jetty.name("etag"), "ETag");
        assert_eq!(jetty.name("x-custom"), "x-custom");
        assert!(jetty.is_empty());
    }

    #[test]
    fn the_first_spelling_noted_for_a_name_wins_whatever_its_case() {
        let mut case = HeaderCase::jetty();
        case.note("X-Custom");
        case.note("x-CUSTOM");
        case.note("ACCEPT");
        case.note("bad:name");
        case.note("");
        assert_eq!(case.name("x-custom"), "X-Custom");
        assert_eq!(case.name("accept"), "ACCEPT");
        assert_eq!(case.name("content-type"), "Content-Type");
        assert_eq!(case.spellings().collect::<Vec<_>>(), ["X-Custom", "ACCEPT"]);
    }

    #[test]
    fn jetty_spellings_are_found_in_any_case_and_only_for_known_names() {
        assert_eq!(jetty_spelling(b"USER-agent"), Some("User-Agent"));
        assert_eq!(
            jetty_spelling(b"www-authenticate"),
            Some("WWW-Authenticate")
        );
        assert_eq!(
            jetty_spelling(b"strict-transport-security"),
            Some("Strict-Transport-Security")
        );
        assert_eq!(jetty_spelling(b"accept-patch"), None);
        assert_eq!(jetty_spelling(b"x-a-name-longer-than-any-known-one"), None);
        assert_eq!(jetty_spelling(b""), None);
    }
}
