//! The "Request was not matched" report, in WireMock's plain-text layout.
//!
//! It is built only for unmatched requests. The closest mapping is the one WireMock
//! would name: the smallest near-miss distance (`decoy_matching::near_miss`), the
//! first in match order among equals, by the same model [`near_misses`] lists for
//! the admin API; its rows are WireMock's `Diff`, laid out as
//! its `PlainTextDiffRenderer` does. With a large set only the index's candidates for
//! the path are scored (they share its URL prefix), so an unmatched request never
//! costs a full scan of thousands of mappings.
//!
//! Scoring is bounded, because a stub's parts can be expensive (a regex that
//! backtracks, an XPath over a large body): past [`SCORING_DEADLINE`] the expensive
//! matchers are skipped, so the stubs left are scored on their cheap parts (method,
//! URL, headers), and the stub shown is the closest on what was scored.

use std::time::{Duration, Instant};

use super::MappingSet;
use std::sync::Arc;

use crate::mapping::Mapping;
use decoy_matching::limits::with_deadline;
use decoy_matching::near_miss::{NEAR_MISS_COUNT, ReportRow, nearest};
use decoy_spec::plan::ResponsePlan;
use decoy_spec::plan::text_plan;
use decoy_spec::request::RequestSnapshot;

const WIDTH: usize = 119;
const LEFT: usize = 58;
const FULL_SCAN_LIMIT: usize = 2000;

/// How long scoring the stubs for one report may take: past it, the expensive matchers (backtracking regexes, XML, XPath, JSONPath,
/// JSON Schema, JSON equality) of the stub being scored answer "no match" without
/// running. Ordinary reports take microseconds and never reach it.
pub const SCORING_DEADLINE: Duration = Duration::from_millis(20);

pub fn not_matched_plan(
    set: &MappingSet,
    req: &RequestSnapshot,
    scenario_state: impl Fn(&str) -> String,
) -> ResponsePlan {
    if set.is_empty() {
        return text_plan(
            404,
            "No response could be served as there are no stub mappings in this WireMock instance."
                .into(),
        );
    }
    // The index's candidates for the path: a stub outside them cannot match the URL.
    let mut candidates = Vec::new();
    set.index.candidates(req.path(), &req.url, &mut candidates);
    for c in candidates.iter_mut() {
        *c = super::index::Index::rank(*c) as u32;
    }
    let pool: Vec<u32> = if set.len() <= FULL_SCAN_LIMIT {
        (0..set.len() as u32).collect()
    } else if candidates.is_empty() {
        (0..FULL_SCAN_LIMIT as u32).collect()
    } else {
        candidates.clone()
    };
    // WireMock's near-miss order: the smallest distance, the first in match order
    // among equals.
    let started = Instant::now();
    let deadline = started + SCORING_DEADLINE;
    let (closest, skipped) = with_deadline(deadline, || {
        let pool = pool.iter().map(|&rank| &set.ranked[rank as usize].mapping);
        nearest(pool, 1, |m| m.request.near_miss_distance(req)).pop()
    });
    if skipped > 0 {
        tracing::debug!(
            "not-matched report for {} {}: {} stubs scored in {:?}; past {SCORING_DEADLINE:?}, {skipped} expensive matcher runs were skipped, so the closest stub shown is the closest on what was scored",
            req.method,
            req.url,
            pool.len(),
            started.elapsed()
        );
    }
    let Some((_, mapping)) = closest else {
        return text_plan(404, "Request was not matched\n".into());
    };
    let mut rows = mapping.request.report_rows(req);
    if let Some(s) = &mapping.scenario
        && let Some(required) = &s.required_state
    {
        // As WireMock words it: the stub's state on the left, the scenario's on the
        // right, and (WireMock compares the whole right cell with the state name)
        // always "does not match".
        rows.push(ReportRow {
            left: format!("[Scenario '{}' state: {required}]", s.name),
            right: format!("[Scenario '{}' state: {}]", s.name, scenario_state(&s.name)),
            message: Some("Scenario does not match".into()),
        });
    }
    text_plan(404, render(mapping.name.as_deref(), &rows))
}

/// WireMock's near misses of `req` (`NearMissCalculator.findNearestTo`): the
/// [`NEAR_MISS_COUNT`] stubs closest to it, by the distance and order that choose the
/// report's closest stub, over every stub in match order. Scored until `deadline`;
/// past it, the expensive matchers count as not matching.
pub fn near_misses<'a>(
    set: &'a MappingSet,
    req: &RequestSnapshot,
    deadline: Instant,
) -> Vec<(f64, &'a Arc<Mapping>)> {
    with_deadline(deadline, || {
        nearest(set.iter(), NEAR_MISS_COUNT, |m| {
            m.request.near_miss_distance(req)
        })
    })
    .0
}

/// Half the width, less the frame: the widest a cell's text may be before it wraps.
const COLUMN: usize = WIDTH / 2 - 2;

fn render(title: Option<&str>, rows: &[ReportRow]) -> String {
    let rule = "-".repeat(WIDTH);
    let mut out = String::new();
    out.push('\n');
    out.push_str(&format!("{:>70}\n", "Request was not matched"));
    out.push_str(&format!("{:>70}\n\n", "======================="));
    out.push_str(&rule);
    out.push('\n');
    out.push_str(&format!(
        "| {:<width$}| {:<width$}|\n",
        "Closest stub",
        "Request",
        width = LEFT - 1
    ));
    out.push_str(&rule);
    out.push('\n');
    write_single(&mut out, "", "", None);
    // An unnamed stub has no title row, as in WireMock.
    if let Some(title) = title {
        write_cells(&mut out, title, "", None);
        write_single(&mut out, "", "", None);
    }
    for row in rows {
        write_cells(&mut out, &row.left, &row.right, row.message.as_deref());
    }
    write_single(&mut out, "", "", None);
    out.push_str(&rule);
    out.push('\n');
    out
}

/// One row of the table, over as many lines as its longer cell needs: each cell is
/// wrapped at [`COLUMN`] when one of its lines is longer, and the note goes on the
/// first line only (WireMock's `PlainTextDiffRenderer.writeLine`).
fn write_cells(out: &mut String, left: &str, right: &str, note: Option<&str>) {
    let left = cell_lines(left);
    let right = cell_lines(right);
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map(String::as_str).unwrap_or("");
        let r = right.get(i).map(String::as_str).unwrap_or("");
        write_single(out, l, r, if i == 0 { note } else { None });
    }
}

fn write_single(out: &mut String, left: &str, right: &str, note: Option<&str>) {
    let pad = |out: &mut String, s: &str, width: usize| {
        out.push_str(s);
        for _ in s.chars().count()..width {
            out.push(' ');
        }
    };
    pad(out, left, LEFT + 1);
    out.push('|');
    let note = note.filter(|n| !n.is_empty());
    if !right.is_empty() {
        out.push(' ');
        match note {
            Some(n) => {
                pad(out, right, LEFT - 6);
                out.push_str("<<<<< ");
                out.push_str(n);
            }
            None => out.push_str(right),
        }
    } else if let Some(n) = note {
        pad(out, "", LEFT - 5);
        out.push_str("<<<<< ");
        out.push_str(n);
    }
    out.push('\n');
}

/// A cell's text as lines: wrapped when its longest line exceeds [`COLUMN`], then
/// split at line breaks, dropping trailing empty lines (Java's `String.split`).
fn cell_lines(s: &str) -> Vec<String> {
    let text = wrap_if_longest_line_exceeds(s, COLUMN);
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    while lines.len() > 1 && lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    if lines.len() == 1 && lines[0].is_empty() && !text.is_empty() {
        // Only line breaks: nothing to show.
        lines[0].clear();
    }
    lines
}

/// WireMock's `Strings.wrapIfLongestLineExceedsLimit`: when a line is longer than
/// `width`, the whole text is word-wrapped at spaces (a word longer than the width
/// is cut), and lines left holding only blanks are removed.
pub fn wrap_if_longest_line_exceeds(s: &str, width: usize) -> String {
    if s.split('\n').all(|l| l.chars().count() <= width) {
        return s.to_owned();
    }
    let wrapped = word_wrap(s, width);
    let mut out = String::with_capacity(wrapped.len());
    let mut rest = wrapped.as_str();
    while let Some(nl) = rest.find('\n') {
        let line = &rest[..nl];
        let content = line.strip_suffix('\r').unwrap_or(line);
        if !content.chars().all(|c| c == ' ' || c == '\t') {
            out.push_str(&rest[..=nl]);
        }
        rest = &rest[nl + 1..];
    }
    out.push_str(rest);
    out
}

/// Apache Commons' `WordUtils.wrap(s, width, "\n", true)` as WireMock copies it:
/// break at the last space within `width + 1` characters, skip a space that starts
/// a line, and cut a longer word at `width`. Existing line breaks are ordinary
/// characters to it.
fn word_wrap(s: &str, width: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    let width = width.max(1);
    let mut out = String::with_capacity(s.len() + 16);
    let mut offset = 0;
    while offset < n {
        let window = &chars[offset..(offset + width + 1).min(n)];
        let first = window.iter().position(|&c| c == ' ');
        if first == Some(0) {
            offset += 1;
            continue;
        }
        if n - offset <= width {
            break;
        }
        match window.iter().rposition(|&c| c == ' ') {
            Some(last) => {
                out.extend(&chars[offset..offset + last]);
                out.push('\n');
                offset += last + 1;
            }
            None => {
                out.extend(&chars[offset..offset + width]);
                out.push('\n');
                offset += width;
            }
        }
    }
    out.extend(&chars[offset..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closest stub as an exhaustive scan without a deadline finds it: the
    /// smallest near-miss distance, the first in match order among equals.
    fn exhaustive(set: &MappingSet, req: &RequestSnapshot) -> String {
        let mut best: Option<(f64, &Mapping)> = None;
        for m in set.iter() {
            let d = m.request.near_miss_distance(req);
            if best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, m));
            }
        }
        let (_, m) = best.unwrap();
        render(m.name.as_deref(), &m.request.report_rows(req))
    }

    #[test]
    fn bounded_scoring_names_the_stub_an_exhaustive_scan_names() {
        use crate::mapping::ParseContext;
        use serde_json::json;
        let ctx = ParseContext {
            files_dir: "/nonexistent".into(),
            max_body_file_size: crate::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            plugins: None,
            global_templating: false,
        };
        let mut stubs = Vec::new();
        for i in 0..60 {
            let method = ["GET", "POST", "PUT"][i % 3];
            let request = match i % 6 {
                0 => json!({"method": method, "urlPath": format!("/api/v{}/items/{i}", i % 4)}),
                1 => json!({"method": method, "url": format!("/api/items?id={i}")}),
                2 => {
                    json!({"method": method, "urlPathPattern": format!("/api/v{}/[a-z]+/{i}", i % 4)})
                }
                3 => json!({"method": method, "urlPathTemplate": format!("/api/t{i}/{{id}}"),
                    "headers": {"X-Id": {"equalTo": format!("h{i}")}}}),
                4 => json!({"method": method, "urlPath": format!("/api/v1/items/{i}"),
                    "bodyPatterns": [{"matchesJsonPath": "$.a"}, {"contains": format!("c{i}")}]}),
                _ => {
                    json!({"urlPath": "/api/v1/items", "queryParameters": {"q": {"matches": format!("[0-9]{{{}}}", i % 5 + 1)}}})
                }
            };
            stubs.push(json!({"name": format!("stub {i}"), "request": request}));
        }
        // Two identical stubs: the tie must go to the same one.
        stubs.push(json!({"name": "twin a", "request": {"urlPath": "/twin"}}));
        stubs.push(json!({"name": "twin b", "request": {"urlPath": "/twin"}}));
        let set = MappingSet::new(
            stubs
                .iter()
                .map(|v| {
                    std::sync::Arc::new(Mapping::parse(v, &ctx, None, &mut Vec::new()).unwrap())
                })
                .collect(),
        );
        let requests = [
            ("GET", "/api/v1/items/7"),
            ("POST", "/api/v1/items/4"),
            ("DELETE", "/api/v2/abc/14"),
            ("GET", "/api/items?id=13"),
            ("PUT", "/api/t9/5"),
            ("GET", "/api/v1/items?q=12345678"),
            ("GET", "/twin/x"),
            ("GET", "/"),
            (
                "PATCH",
                "/entirely/elsewhere/and/much/longer/than/any/stub/path",
            ),
        ];
        for (method, url) in requests {
            let mut req = RequestSnapshot::new(method, url);
            req.body = bytes::Bytes::from_static(br#"{"a": 1, "c": "c4"}"#);
            let plan = not_matched_plan(&set, &req, |_| "Started".to_owned());
            assert_eq!(
                String::from_utf8_lossy(&plan.body),
                exhaustive(&set, &req),
                "{method} {url}"
            );
        }
    }

    #[test]
    fn text_wraps_as_wiremock_wraps_it() {
        // WireMock's own cases for Strings.wrapIfLongestLineExceedsLimit.
        assert_eq!(wrap_if_longest_line_exceeds("abc", 1), "a\nb\nc");
        assert_eq!(wrap_if_longest_line_exceeds("abc", 2), "ab\nc");
        assert_eq!(wrap_if_longest_line_exceeds("abc", 3), "abc");
        assert_eq!(
            wrap_if_longest_line_exceeds("abc\nabcd\nabcd", 3),
            "abc\nab\ncd\nabc\nd"
        );
        assert_eq!(
            wrap_if_longest_line_exceeds(
                "[path] /ResponseTransformerExtensionWithDependenciesKotlin",
                57
            ),
            "[path]\n/ResponseTransformerExtensionWithDependenciesKotlin"
        );
        assert_eq!(
            wrap_if_longest_line_exceeds(
                "/ResponseTransformerExtensionNoDependenciesKotlin/corpus-compat-extra",
                57
            ),
            "/ResponseTransformerExtensionNoDependenciesKotlin/corpus-\ncompat-extra"
        );
    }

    #[test]
    fn a_long_request_line_continues_on_the_next_row_without_its_note() {
        let mut out = String::new();
        write_cells(
            &mut out,
            "[path] /ResponseTransformerExtensionNoDependenciesKotlin",
            "/ResponseTransformerExtensionNoDependenciesKotlin/corpus-compat-extra",
            Some("URL does not match"),
        );
        let want = format!(
            "{:<59}| {:<52}<<<<< URL does not match\n{:<59}| compat-extra\n",
            "[path] /ResponseTransformerExtensionNoDependenciesKotlin",
            "/ResponseTransformerExtensionNoDependenciesKotlin/corpus-",
            ""
        );
        assert_eq!(out, want);
    }
}
