//! The admin API's bearer token (`--admin-token`): how a request's `Authorization`
//! header is checked, and how the token is kept so it never ends up in a log.
//!
//! The header is read as RFC 7235 defines credentials: an auth scheme, compared
//! case-insensitively (`Bearer`, `bearer` and `BEARER` are the same scheme), one or
//! more spaces, then the token exactly as sent (no trimming: `"Bearer  tok "` is the
//! token `"tok "`, which is not `"tok"`). The comparison is in constant time: both the
//! expected and the presented token are hashed with SHA-256 and the two digests are
//! compared with `subtle`, so neither the length of the token nor how many of its
//! leading bytes a guess got right shows in the time an answer takes.
//!
//! [`AdminToken`] holds only the digest of the token, and its `Debug` prints
//! `AdminToken(<redacted>)`, so printing the options of a server (or of the command
//! line) never shows it.

use ring::digest::{SHA256, digest};
use subtle::ConstantTimeEq as _;

/// The token admin requests must present as `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl AdminToken {
    pub fn new(token: &str) -> AdminToken {
        AdminToken {
            digest: sha256(token.as_bytes()),
        }
    }

    /// Whether an `Authorization` header value carries this token as bearer
    /// credentials.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        let Some(token) = authorization.and_then(bearer_credentials) else {
            return false;
        };
        bool::from(sha256(token.as_bytes()).ct_eq(&self.digest))
    }
}

impl From<&str> for AdminToken {
    fn from(token: &str) -> Self {
        AdminToken::new(token)
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// The credentials of a `Bearer` authorization (`credentials = auth-scheme 1*SP
/// token68`, the scheme case-insensitive), or `None` for any other scheme.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::AdminToken;

    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_exact() {
        let t = AdminToken::new("s3cret");
        assert!(t.accepts(Some("Bearer s3cret")));
        assert!(t.accepts(Some("bearer s3cret")));
        assert!(t.accepts(Some("BEARER   s3cret")));
        assert!(!t.accepts(Some("Bearer s3cret ")));
        assert!(!t.accepts(Some("Bearer  s3cre")));
        assert!(!t.accepts(Some("Bearer S3CRET")));
        assert!(!t.accepts(Some("Basic s3cret")));
        assert!(!t.accepts(Some("Bearers3cret")));
        assert!(!t.accepts(Some("Bearer ")));
        assert!(!t.accepts(None));
    }

    #[test]
    fn debug_output_never_shows_the_token() {
        let t = AdminToken::new("s3cret");
        let shown = format!("{t:?} {:?}", Some(t.clone()));
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
