//! gRPC status codes, and how a stub's answer says which one it ends with: the WireMock
//! gRPC extension's `grpc-status-name` / `grpc-status-reason` response headers, or an
//! HTTP error status mapped as the extension maps it.

/// A gRPC status code (the numbers of `google.rpc.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code(pub u8);

/// The codes by name, in number order.
pub const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Code {
    pub const OK: Code = Code(0);
    pub const CANCELLED: Code = Code(1);
    pub const UNKNOWN: Code = Code(2);
    pub const INVALID_ARGUMENT: Code = Code(3);
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    pub const NOT_FOUND: Code = Code(5);
    pub const PERMISSION_DENIED: Code = Code(7);
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    pub const UNIMPLEMENTED: Code = Code(12);
    pub const INTERNAL: Code = Code(13);
    pub const UNAVAILABLE: Code = Code(14);
    pub const UNAUTHENTICATED: Code = Code(16);

    /// A code by its name (`NOT_FOUND`), as the extension's `grpc-status-name` holds
    /// it; case-sensitive, as Java's `Status.valueOf`.
    pub fn from_name(name: &str) -> Option<Code> {
        NAMES.iter().position(|n| *n == name).map(|i| Code(i as u8))
    }

    pub fn name(self) -> &'static str {
        NAMES.get(self.0 as usize).copied().unwrap_or("UNKNOWN")
    }

    /// The number as the `grpc-status` trailer writes it.
    pub fn as_header(self) -> http::HeaderValue {
        http::HeaderValue::from(self.0 as u16)
    }
}

/// The response header naming the status a stub ends with (the extension's).
pub const STATUS_NAME: &str = "grpc-status-name";
/// The response header holding the status message (the extension's).
pub const STATUS_REASON: &str = "grpc-status-reason";

/// The status and message a stub answering with HTTP status `http` and no
/// `grpc-status-name` gets: the extension's table, after gRPC's own
/// HTTP-to-gRPC mapping (`None`: not an error, the body is the message).
pub fn from_http(http: u16) -> Option<(Code, &'static str)> {
    Some(match http {
        400 => (Code::INTERNAL, "Bad Request"),
        401 => (
            Code::UNAUTHENTICATED,
            "You are not authorized to access this resource",
        ),
        403 => (
            Code::PERMISSION_DENIED,
            "You are not authorized to access this resource",
        ),
        404 => (Code::UNIMPLEMENTED, NOT_MATCHED),
        429 => (Code::UNAVAILABLE, "Too many requests"),
        502 => (Code::UNAVAILABLE, "Bad Gateway"),
        503 => (Code::UNAVAILABLE, "Service Unavailable"),
        504 => (Code::UNAVAILABLE, "Gateway Timeout"),
        _ => return None,
    })
}

/// The message of a call no stub matched, as the extension words it.
pub const NOT_MATCHED: &str = "No matching stub mapping found for gRPC request";

/// The HTTP status a recorded stub gets for a gRPC status the real service ended
/// with: the extension's reverse table, else 200 with `grpc-status-name`.
pub fn to_http(code: Code) -> u16 {
    match code {
        Code::INTERNAL => 400,
        Code::UNAUTHENTICATED => 401,
        Code::PERMISSION_DENIED => 403,
        Code::UNIMPLEMENTED => 404,
        Code::UNAVAILABLE => 504,
        _ => 200,
    }
}

/// `grpc-message` is percent-encoded: everything outside printable ASCII, and `%`.
pub fn encode_message(msg: &str) -> http::HeaderValue {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');
    let text = percent_encoding::utf8_percent_encode(msg, SET).to_string();
    http::HeaderValue::from_str(&text).unwrap_or_else(|_| http::HeaderValue::from_static(""))
}

/// A `grpc-message` as sent, decoded.
pub fn decode_message(v: &[u8]) -> String {
    percent_encoding::percent_decode(v)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(Code::from_name("FAILED_PRECONDITION"), Some(Code(9)));
        assert_eq!(Code::from_name("failed_precondition"), None);
        assert_eq!(Code(16).name(), "UNAUTHENTICATED");
        assert_eq!(from_http(404), Some((Code::UNIMPLEMENTED, NOT_MATCHED)));
        assert_eq!(from_http(200), None);
    }

    #[test]
    fn messages_round_trip() {
        let v = encode_message("bad name: 100% «x»\nline");
        assert_eq!(decode_message(v.as_bytes()), "bad name: 100% «x»\nline");
        assert!(v.to_str().is_ok());
    }
}
