//! `basicAuthCredentials` (or `basicAuth`): a username and password, which WireMock
//! matches as one more header pattern, `Authorization` equal to `Basic` and the
//! base64 of `username:password`. The report prints that header with the `[prefix]`
//! operator, and WireMock's copying the headers into a `java.util.HashMap` to add it
//! reorders the header rows (see [`report_order`]).

use base64::Engine as _;
use serde_json::{Map, Value};

use super::multi_value::MultiValuePattern;
use crate::pattern::StringPattern;
use decoy_spec::fields::{FieldError, FieldResult, Fields, as_object, as_str, join};

pub(super) const FIELDS: &[&str] = &["basicAuthCredentials", "basicAuth"];

/// The operator the report prints for the credentials' header.
pub(super) const OPERATOR: &str = " [prefix] ";

/// The `Authorization` header pattern of each credentials field given (WireMock's
/// name and the older one).
pub(super) fn parse(
    obj: &Map<String, Value>,
    path: &str,
) -> FieldResult<Vec<(String, MultiValuePattern)>> {
    let mut out = Vec::new();
    for key in FIELDS {
        if let Some(auth) = obj.field(key) {
            let apath = join(path, key);
            let a = as_object(auth, &apath)?;
            let field = |k: &str| -> FieldResult<&str> {
                as_str(
                    a.field(k)
                        .ok_or_else(|| FieldError::new(&apath, format!("missing \"{k}\"")))?,
                    &join(&apath, k),
                )
            };
            let token = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                field("username")?,
                field("password")?
            ));
            out.push((
                "Authorization".to_owned(),
                MultiValuePattern::Single(StringPattern::EqualTo {
                    value: format!("Basic {token}"),
                    case_insensitive: false,
                }),
            ));
        }
    }
    Ok(out)
}

/// The order in which a `java.util.HashMap` built from `keys` (a copy of a map of
/// `keys.len() - 1` entries, then one more put) iterates them: by bucket, then by
/// insertion within a bucket.
pub(super) fn report_order(keys: &[&str]) -> Vec<usize> {
    let copied = keys.len().saturating_sub(1);
    // HashMap(Map) sizes its table for the copied entries; the last put may grow it.
    let mut capacity = ((copied as f64 / 0.75) + 1.0).ceil() as usize;
    capacity = capacity.next_power_of_two().max(1);
    if copied == 0 {
        capacity = 16;
    }
    if keys.len() as f64 > capacity as f64 * 0.75 {
        capacity *= 2;
    }
    let bucket = |k: &str| {
        let h = k
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & (capacity - 1)
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| bucket(keys[i]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_become_an_authorization_header_pattern() {
        let v = json!({"basicAuthCredentials": {"username": "user", "password": "pass"}});
        let list = parse(v.as_object().unwrap(), "request").unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].0, "Authorization");
        assert!(list[0].1.matches(&["Basic dXNlcjpwYXNz"]));
        let e = parse(
            json!({"basicAuth": {"username": "user"}})
                .as_object()
                .unwrap(),
            "request",
        )
        .unwrap_err();
        assert_eq!(e.path, "request.basicAuth");
        assert!(e.reason.contains("missing \"password\""));
    }

    #[test]
    fn a_hash_map_with_basic_auth_iterates_in_java_bucket_order() {
        // java.util.HashMap: "Authorization" (bucket 13 of 16) after "Accept" (11).
        assert_eq!(report_order(&["Accept", "Authorization"]), vec![0, 1]);
        // "X-Token" lands in bucket 14 of 16, after "Authorization" (13).
        assert_eq!(report_order(&["X-Token", "Authorization"]), vec![1, 0]);
        assert_eq!(
            report_order(&["Content-Type", "Accept", "X-Request-Id", "Authorization"]),
            vec![3, 1, 2, 0]
        );
    }
}
