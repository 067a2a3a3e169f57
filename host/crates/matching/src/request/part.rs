//! What every part of a request pattern answers, and the parsing the parts that name
//! their items (cookies, path parameters) share.

use serde_json::{Map, Value};

use crate::near_miss::{ReportRow, Score};
use crate::pattern::StringPattern;
use decoy_spec::fields::{FieldResult, as_object, join};
use decoy_spec::request::RequestSnapshot;

/// One part of a request a stub may constrain (its method, URL, headers, body...),
/// compiled. A part the stub leaves out matches every request, scores as exact and
/// adds no report row.
pub trait Part {
    /// Whether the stub says anything about this part.
    fn constrains(&self) -> bool;

    /// Whether `req` meets this part: the hot path.
    fn matches(&self, req: &RequestSnapshot) -> bool;

    /// How close `req` came to this part, as WireMock's `MatchResult` for it.
    fn score(&self, req: &RequestSnapshot) -> Score;

    /// This part's rows of the not-matched report, as WireMock's `Diff` writes them;
    /// a section of named items ends with a blank row.
    fn report(&self, req: &RequestSnapshot, rows: &mut Vec<ReportRow>);
}

/// An object of one pattern per name (`"cookies": {"session": {"equalTo": "x"}}`),
/// in the order written.
pub(super) fn string_patterns(v: &Value, path: &str) -> FieldResult<Vec<(String, StringPattern)>> {
    let obj: &Map<String, Value> = as_object(v, path)?;
    obj.iter()
        .map(|(k, p)| Ok((k.clone(), StringPattern::parse(p, &join(path, k))?)))
        .collect()
}

/// A request for the parts' unit tests.
#[cfg(test)]
pub(super) fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RequestSnapshot {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    RequestSnapshot::new(method, url)
        .with_headers(map)
        .with_body(body.to_owned())
}

/// The report rows of one part, for the parts' unit tests.
#[cfg(test)]
pub(super) fn rows_of(part: &dyn Part, req: &RequestSnapshot) -> Vec<ReportRow> {
    let mut rows = Vec::new();
    part.report(req, &mut rows);
    rows
}

/// A report row, for the parts' unit tests.
#[cfg(test)]
pub(super) fn row(left: &str, right: &str, message: Option<&str>) -> ReportRow {
    ReportRow {
        left: left.into(),
        right: right.into(),
        message: message.map(str::to_owned),
    }
}
