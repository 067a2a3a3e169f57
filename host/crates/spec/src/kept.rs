//! A request kept after it was answered (the journal's), in one allocation.
//!
//! A [`RequestSnapshot`] as a transport builds it is several allocations (method,
//! URL, the header map's two tables, its values' buffer), and its header values are
//! slices of the connection's read buffer, which keeping would keep alive. The
//! journal keeps 10,000 of them and drops the oldest for every request it records,
//! long after they left the CPU's caches: each allocation is one more cold line to
//! touch. So a kept request is written flat instead, its method, URL, authority,
//! header names and values, and a body up to [`INLINE_BODY`], into one exact-size
//! buffer: one allocation to make and one to free, and nothing shared with the
//! connection.
//!
//! Readers (the admin API, verification, near misses) see a [`RequestSnapshot`]
//! through `Deref`: it is built from the buffer the first time one is asked for and
//! kept beside it, so a request never read costs nothing more, and one read often
//! (the dashboard, repeated verifications) is built once.

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::header_case::HeaderCase;
use crate::request::RequestSnapshot;

/// Bodies up to this size are copied into the request's buffer; a larger one has an
/// allocation of its own anyway and is shared as it is.
pub const INLINE_BODY: usize = 64 * 1024;

/// What each header costs in [`KeptRequest::cost`] besides its name and value (its
/// entry in a header map), roughly.
const HEADER_OVERHEAD: usize = 32;

/// A request kept after it was answered; reads as a [`RequestSnapshot`].
#[derive(Debug)]
pub struct KeptRequest {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// Recorded by [`KeptRequest::keep`]; the snapshot is built on first read.
    Flat {
        flat: Flat,
        whole: OnceLock<Box<RequestSnapshot>>,
    },
    /// A snapshot built elsewhere (another instance's entry, read from its JSON);
    /// boxed, so that the flat form, the common one, sets the size of every entry.
    Whole(Box<RequestSnapshot>),
}

/// The flat form: `bytes` holds the method, the URL, the authority, then each header
/// as a name length and a value length (4 bytes each, little-endian), a sensitivity
/// byte, the name and the value, then the body when it is inline.
#[derive(Debug)]
struct Flat {
    bytes: Box<[u8]>,
    method_len: u32,
    url_len: u32,
    /// `None`: no authority (HTTP/1 reads the `Host` header instead).
    authority_len: Option<u32>,
    headers: u32,
    /// Where the headers end in `bytes`: an inline body follows.
    headers_end: u32,
    /// A body longer than [`INLINE_BODY`], shared; `None`: the body is inline.
    body: Option<Bytes>,
    scheme: &'static str,
    header_case: HeaderCase,
    client_addr: Option<SocketAddr>,
}

impl KeptRequest {
    /// Keeps `req`, flat. Its derived views (decoded query, cookies...) are left
    /// behind: a reader computes them again if it needs them.
    pub fn keep(req: RequestSnapshot) -> KeptRequest {
        let authority = req.authority.as_deref().map(str::as_bytes);
        let header_bytes: usize = req
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len())
            .sum();
        let inline_body = req.body.len() <= INLINE_BODY;
        let len = req.method.len()
            + req.url.len()
            + authority.map_or(0, <[u8]>::len)
            + req.headers.len() * HEADER_PREFIX
            + header_bytes
            + if inline_body { req.body.len() } else { 0 };
        let mut bytes = Vec::with_capacity(len);
        bytes.extend_from_slice(req.method.as_bytes());
        bytes.extend_from_slice(req.url.as_bytes());
        bytes.extend_from_slice(authority.unwrap_or_default());
        for (name, value) in &req.headers {
            let name = name.as_str().as_bytes();
            bytes.extend_from_slice(&(name.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&(value.len() as u32).to_le_bytes());
            bytes.push(value.is_sensitive() as u8);
            bytes.extend_from_slice(name);
            bytes.extend_from_slice(value.as_bytes());
        }
        let headers_end = bytes.len() as u32;
        let body = if inline_body {
            bytes.extend_from_slice(&req.body);
            None
        } else {
            Some(req.body)
        };
        debug_assert_eq!(bytes.len(), len);
        KeptRequest {
            inner: Inner::Flat {
                flat: Flat {
                    bytes: bytes.into_boxed_slice(),
                    method_len: req.method.len() as u32,
                    url_len: req.url.len() as u32,
                    authority_len: authority.map(|a| a.len() as u32),
                    headers: req.headers.len() as u32,
                    headers_end,
                    body,
                    scheme: req.scheme,
                    header_case: req.header_case,
                    client_addr: req.client_addr,
                },
                whole: OnceLock::new(),
            },
        }
    }

    /// The body's length, without building the snapshot.
    pub fn body_len(&self) -> usize {
        match &self.inner {
            Inner::Whole(r) => r.body.len(),
            Inner::Flat { flat, .. } => flat.body_len(),
        }
    }

    /// Keeps at most `max` bytes of the body (a copy, so the full one is freed);
    /// returns the full size when it was longer.
    pub fn truncate_body(&mut self, max: usize) -> Option<usize> {
        let full = self.body_len();
        if full <= max {
            return None;
        }
        match &mut self.inner {
            Inner::Whole(r) => r.body = Bytes::copy_from_slice(&r.body[..max]),
            Inner::Flat { flat, whole } => {
                match &mut flat.body {
                    Some(body) if max > INLINE_BODY => *body = Bytes::copy_from_slice(&body[..max]),
                    Some(body) => {
                        let mut bytes = Vec::with_capacity(flat.headers_end as usize + max);
                        bytes.extend_from_slice(&flat.bytes);
                        bytes.extend_from_slice(&body[..max]);
                        flat.bytes = bytes.into_boxed_slice();
                        flat.body = None;
                    }
                    None => {
                        let end = flat.headers_end as usize + max;
                        flat.bytes = Box::from(&flat.bytes[..end]);
                    }
                }
                // Built from the full body: built again from the kept one.
                whole.take();
            }
        }
        Some(full)
    }

    /// The bytes this request is counted for in the journal's budget: its URL, each
    /// header's name and value and a header map entry's overhead, and its body.
    pub fn cost(&self) -> usize {
        match &self.inner {
            Inner::Whole(r) => {
                let headers: usize = r
                    .headers
                    .iter()
                    .map(|(k, v)| k.as_str().len() + v.len() + HEADER_OVERHEAD)
                    .sum();
                r.url.len() + headers + r.body.len()
            }
            Inner::Flat { flat, .. } => {
                flat.url_len as usize
                    + flat.header_bytes()
                    + flat.headers as usize * HEADER_OVERHEAD
                    + flat.body_len()
            }
        }
    }
}

/// What each header takes in `bytes` besides its name and value: two lengths and
/// the sensitivity byte.
const HEADER_PREFIX: usize = 9;

impl Flat {
    /// The headers' names and values, in bytes: what the headers take in `bytes`
    /// less their prefixes.
    fn header_bytes(&self) -> usize {
        let start = self.method_len as usize
            + self.url_len as usize
            + self.authority_len.unwrap_or(0) as usize;
        self.headers_end as usize - start - self.headers as usize * HEADER_PREFIX
    }

    fn body_len(&self) -> usize {
        match &self.body {
            Some(b) => b.len(),
            None => self.bytes.len() - self.headers_end as usize,
        }
    }

    /// The snapshot this request was kept from (its derived views aside).
    fn snapshot(&self) -> RequestSnapshot {
        let b = &self.bytes;
        let text = |range: std::ops::Range<usize>| String::from_utf8_lossy(&b[range]).into_owned();
        let method_end = self.method_len as usize;
        let url_end = method_end + self.url_len as usize;
        let mut at = url_end + self.authority_len.unwrap_or(0) as usize;
        let mut req = RequestSnapshot::new(text(0..method_end), text(method_end..url_end));
        req.scheme = self.scheme;
        req.authority = self.authority_len.map(|_| text(url_end..at));
        req.header_case = self.header_case.clone();
        req.client_addr = self.client_addr;
        let mut headers = HeaderMap::with_capacity(self.headers as usize);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
        for _ in 0..self.headers {
            let (name_len, value_len, sensitive) = (u32_at(at), u32_at(at + 4), b[at + 8] == 1);
            let name_at = at + HEADER_PREFIX;
            let name = &b[name_at..name_at + name_len];
            let value = &b[name_at + name_len..name_at + name_len + value_len];
            at = name_at + name_len + value_len;
            // Both were a header map's own, so both are valid again.
            if let (Ok(name), Ok(mut value)) =
                (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
            {
                value.set_sensitive(sensitive);
                headers.append(name, value);
            }
        }
        req.headers = headers;
        req.body = match &self.body {
            Some(body) => body.clone(),
            None => Bytes::copy_from_slice(&b[self.headers_end as usize..]),
        };
        req
    }
}

impl Deref for KeptRequest {
    type Target = RequestSnapshot;

    fn deref(&self) -> &RequestSnapshot {
        match &self.inner {
            Inner::Whole(r) => r,
            Inner::Flat { flat, whole } => whole.get_or_init(|| Box::new(flat.snapshot())),
        }
    }
}

impl From<RequestSnapshot> for KeptRequest {
    /// Kept as it is (not flat): for a snapshot that is read at once and then
    /// dropped, such as another instance's entry.
    fn from(req: RequestSnapshot) -> KeptRequest {
        KeptRequest {
            inner: Inner::Whole(Box::new(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &[u8]) -> RequestSnapshot {
        // Values sliced from one read buffer, as hyper hands them over.
        let read = Bytes::from_static(b"oneA/Btwosecret");
        let value =
            |r: std::ops::Range<usize>| HeaderValue::from_maybe_shared(read.slice(r)).unwrap();
        let mut headers = HeaderMap::new();
        headers.append("x-multi", value(0..3));
        headers.append("Accept", value(3..6));
        headers.append("x-multi", value(6..9));
        let mut secret = value(9..15);
        secret.set_sensitive(true);
        headers.append("authorization", secret);
        let mut r = RequestSnapshot::new("POST", "/p?q=1")
            .with_headers(headers)
            .with_body(Bytes::copy_from_slice(body));
        r.scheme = "https";
        r.authority = Some("example.com:8443".into());
        r.client_addr = "127.0.0.1:5000".parse().ok();
        r.header_case = HeaderCase::jetty();
        r.header_case.note("X-Multi");
        r
    }

    #[test]
    fn a_kept_request_reads_as_the_one_it_was_kept_from() {
        let original = request(b"body");
        let kept = KeptRequest::keep(request(b"body"));
        assert_eq!(kept.body_len(), 4);
        assert_eq!(
            (kept.method.as_str(), kept.url.as_str(), kept.scheme),
            ("POST", "/p?q=1", "https")
        );
        assert_eq!(kept.path(), "/p");
        assert_eq!(kept.query(), [("q".to_owned(), "1".to_owned())]);
        assert_eq!(kept.authority.as_deref(), Some("example.com:8443"));
        assert_eq!(kept.client_addr, original.client_addr);
        assert_eq!(kept.header_case.name("x-multi"), "X-Multi");
        // Every value, in the same order, repeated names included.
        let pairs = |r: &RequestSnapshot| {
            r.headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), v.is_sensitive()))
                .collect::<Vec<_>>()
        };
        assert_eq!(pairs(&kept), pairs(&original));
        assert!(kept.headers["authorization"].is_sensitive());
        assert_eq!(&kept.body[..], b"body");
        assert_eq!(
            kept.cost(),
            KeptRequest::from(request(b"body")).cost(),
            "the flat form is counted as the whole one"
        );
    }

    #[test]
    fn a_request_without_headers_authority_or_body_is_kept_too() {
        let kept = KeptRequest::keep(RequestSnapshot::new("GET", "/"));
        assert_eq!((kept.method.as_str(), kept.url.as_str()), ("GET", "/"));
        assert!(kept.headers.is_empty() && kept.body.is_empty());
        assert_eq!(kept.authority, None);
        assert_eq!(kept.cost(), 1);
    }

    #[test]
    fn a_large_body_is_shared_and_a_small_one_copied() {
        let big = Bytes::from(vec![7u8; INLINE_BODY + 1]);
        let kept = KeptRequest::keep(RequestSnapshot::new("POST", "/").with_body(big.clone()));
        assert_eq!(kept.body.as_ptr(), big.as_ptr());
        let small = Bytes::from(vec![7u8; 10]);
        let kept = KeptRequest::keep(RequestSnapshot::new("POST", "/").with_body(small.clone()));
        assert_ne!(kept.body.as_ptr(), small.as_ptr());
        assert_eq!(kept.body, small);
    }

    #[test]
    fn a_body_is_truncated_wherever_it_is_kept() {
        for (len, max) in [
            (100, 10),
            (INLINE_BODY + 100, 10),
            (INLINE_BODY + 100, INLINE_BODY + 1),
        ] {
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut kept = KeptRequest::keep(request(&body));
            // Read once before: the snapshot built then is not the one read after.
            assert_eq!(kept.body.len(), len);
            assert_eq!(kept.truncate_body(max), Some(len), "{len} / {max}");
            assert_eq!(kept.body_len(), max);
            assert_eq!(&kept.body[..], &body[..max]);
            assert_eq!(kept.header("accept").as_deref(), Some("A/B"));
            assert_eq!(kept.truncate_body(max), None);
            let mut whole = KeptRequest::from(request(&body));
            assert_eq!(whole.truncate_body(max), Some(len));
            assert_eq!(&whole.body[..], &body[..max]);
        }
    }
}
