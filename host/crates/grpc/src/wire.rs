//! gRPC's framing over HTTP/2: each message is a 5-byte prefix (a compressed flag and
//! a big-endian length) and its bytes; `gzip` compression of single messages; the
//! `grpc-timeout` header.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};

/// Why a request's bytes are not a gRPC message stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A message longer than the limit (RESOURCE_EXHAUSTED).
    TooLarge { len: usize, limit: usize },
    /// A compressed message with no `grpc-encoding`, or one this server does not
    /// speak (UNIMPLEMENTED), or that does not inflate (INTERNAL).
    Compression(String),
    /// The stream ended inside a message (INTERNAL).
    Truncated,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge { len, limit } => write!(
                f,
                "a request message of {len} bytes is larger than the limit of {limit} bytes"
            ),
            FrameError::Compression(m) => f.write_str(m),
            FrameError::Truncated => f.write_str("the request ended inside a message"),
        }
    }
}

/// The message encodings this server reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
}

impl Encoding {
    /// The request's `grpc-encoding` (`Err`: one this server does not speak).
    pub fn from_header(v: Option<&http::HeaderValue>) -> Result<Encoding, String> {
        match v.map(|v| v.as_bytes()) {
            None | Some(b"identity") => Ok(Encoding::Identity),
            Some(b"gzip") => Ok(Encoding::Gzip),
            Some(other) => Err(format!(
                "message encoding {:?} is not supported (gzip and identity are)",
                String::from_utf8_lossy(other)
            )),
        }
    }

    /// What the answer is compressed with: gzip when the client accepts it
    /// (`grpc-accept-encoding`) and sent its own messages with it.
    pub fn answer(request: Encoding, accept: Option<&http::HeaderValue>) -> Encoding {
        let accepts_gzip = accept
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|e| e.trim() == "gzip"));
        if request == Encoding::Gzip && accepts_gzip {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }
}

/// Reads messages out of the request body's pieces as they come.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    limit: usize,
    encoding: Encoding,
}

impl Decoder {
    pub fn new(limit: usize, encoding: Encoding) -> Self {
        Decoder {
            buf: BytesMut::new(),
            limit,
            encoding,
        }
    }

    pub fn push(&mut self, piece: &[u8]) {
        self.buf.extend_from_slice(piece);
    }

    /// The next whole message, `Ok(None)` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let compressed = self.buf[0] != 0;
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.limit {
            return Err(FrameError::TooLarge {
                len,
                limit: self.limit,
            });
        }
        if self.buf.len() < 5 + len {
            self.buf.reserve(5 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(5);
        let body = self.buf.split_to(len).freeze();
        if !compressed {
            return Ok(Some(body));
        }
        match self.encoding {
            Encoding::Identity => Err(FrameError::Compression(
                "a compressed message arrived without a grpc-encoding".into(),
            )),
            Encoding::Gzip => gunzip(&body, self.limit).map(Some),
        }
    }

    /// Whether bytes of an unfinished message are left (at the end of the stream).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }
}

fn gunzip(body: &[u8], limit: usize) -> Result<Bytes, FrameError> {
    let mut out = Vec::new();
    let mut reader = flate2::read::GzDecoder::new(body).take(limit as u64 + 1);
    reader
        .read_to_end(&mut out)
        .map_err(|e| FrameError::Compression(format!("a gzip message does not inflate: {e}")))?;
    if out.len() > limit {
        return Err(FrameError::TooLarge {
            len: out.len(),
            limit,
        });
    }
    Ok(Bytes::from(out))
}

/// One message framed for the wire.
pub fn frame(msg: &[u8], encoding: Encoding) -> Bytes {
    let (flag, payload) = match encoding {
        Encoding::Identity => (0u8, std::borrow::Cow::Borrowed(msg)),
        Encoding::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            // Writing into a Vec cannot fail.
            let _ = gz.write_all(msg);
            (
                1u8,
                std::borrow::Cow::Owned(gz.finish().unwrap_or_default()),
            )
        }
    };
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.extend_from_slice(&[flag]);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out.freeze()
}

/// `grpc-timeout`: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
/// `None` when absent or malformed (a malformed one is ignored, as grpc-go does).
pub fn timeout(v: Option<&http::HeaderValue>) -> Option<Duration> {
    let s = v?.to_str().ok()?;
    if s.len() < 2 || s.len() > 9 {
        return None;
    }
    let (digits, unit) = s.split_at(s.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_in_pieces() {
        for enc in [Encoding::Identity, Encoding::Gzip] {
            let mut wire = Vec::new();
            wire.extend_from_slice(&frame(b"hello", enc));
            wire.extend_from_slice(&frame(b"", enc));
            wire.extend_from_slice(&frame(&[7u8; 1000], enc));
            let mut d = Decoder::new(4096, enc);
            let mut got = Vec::new();
            for piece in wire.chunks(3) {
                d.push(piece);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got.len(), 3);
            assert_eq!(&got[0][..], b"hello");
            assert!(got[1].is_empty());
            assert_eq!(got[2].len(), 1000);
            assert!(!d.has_partial());
        }
    }

    #[test]
    fn limits_hold() {
        let mut d = Decoder::new(10, Encoding::Identity);
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_message(), Err(FrameError::TooLarge { .. })));
        // A gzip bomb inflates no further than the limit.
        let bomb = frame(&vec![0u8; 1 << 20], Encoding::Gzip);
        let mut d = Decoder::new(1000, Encoding::Gzip);
        d.push(&bomb[..]);
        assert!(matches!(d.next_message(), Err(FrameError::TooLarge { .. })));
        let mut d = Decoder::new(1000, Encoding::Identity);
        d.push(&frame(b"x", Encoding::Gzip));
        assert!(matches!(d.next_message(), Err(FrameError::Compression(_))));
    }

    #[test]
    fn timeouts() {
        let t = |s: &str| timeout(Some(&http::HeaderValue::from_str(s).unwrap()));
        assert_eq!(t("100m"), Some(Duration::from_millis(100)));
        assert_eq!(t("2S"), Some(Duration::from_secs(2)));
        assert_eq!(t("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(t("123456789m"), None);
        assert_eq!(t("10x"), None);
        assert_eq!(t("m"), None);
    }
}
