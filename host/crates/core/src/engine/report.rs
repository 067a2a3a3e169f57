//! The "Request was not matched" report, in WireMock's plain-text layout.
//!
//! It is built only for unmatched requests. The closest mapping is the one with the
//! smallest mean distance over its parts (method, URL, each header, query, body
//! pattern...). With a large set only the index's candidates for the path are scored
//! (they share its URL prefix), so an unmatched request never costs a full scan of
//! thousands of mappings.

use super::MappingSet;
use decoy_matching::request_pattern::DiffLine;
use decoy_spec::plan::ResponsePlan;
use decoy_spec::plan::text_plan;
use decoy_spec::request::RequestSnapshot;

const WIDTH: usize = 119;
const LEFT: usize = 58;
const FULL_SCAN_LIMIT: usize = 2000;

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
    let mut candidates = Vec::new();
    let pool: Vec<u32> = if set.len() <= FULL_SCAN_LIMIT {
        (0..set.len() as u32).collect()
    } else {
        set.index.candidates(req.path(), &mut candidates);
        if candidates.is_empty() {
            (0..FULL_SCAN_LIMIT as u32).collect()
        } else {
            candidates
        }
    };
    let closest = pool
        .iter()
        .map(|&rank| {
            let m = &set.ranked[rank as usize];
            let mut lines = m.request.diagnose(req);
            if let Some(s) = &m.scenario
                && let Some(required) = &s.required_state
            {
                let current = scenario_state(&s.name);
                lines.push(DiffLine {
                    expected: format!("[Scenario '{}' state: {required}]", s.name),
                    actual: format!("[Scenario '{}' state: {current}]", s.name),
                    note: "Scenario state does not match",
                    distance: if *required == current { 0.0 } else { 1.0 },
                    weight: 1.0,
                });
            }
            let weights: f64 = lines.iter().map(|l| l.weight).sum();
            let score = lines.iter().map(|l| l.distance * l.weight).sum::<f64>() / weights.max(1.0);
            (score, m, lines)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let Some((_, mapping, lines)) = closest else {
        return text_plan(404, "Request was not matched\n".into());
    };
    text_plan(
        404,
        render(mapping.name.as_deref().unwrap_or(&mapping.id), &lines),
    )
}

fn render(title: &str, lines: &[DiffLine]) -> String {
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
    let blank = format!("{:<w$} |\n", "", w = LEFT);
    out.push_str(&blank);
    out.push_str(&format!("{:<w$} |\n", title, w = LEFT));
    out.push_str(&blank);
    // Method and URL form the first group; each other kind of part (headers, query,
    // body...) its own, with a blank row after every group, as WireMock lays it out.
    for (i, l) in lines.iter().enumerate() {
        if i >= 2 && lines[i - 1].note != l.note {
            out.push_str(&blank);
        }
        if l.distance == 0.0 {
            out.push_str(&format!("{:<w$} | {}\n", l.expected, l.actual, w = LEFT));
        } else {
            out.push_str(&format!(
                "{:<w$} | {:<r$}<<<<< {}\n",
                l.expected,
                l.actual,
                l.note,
                w = LEFT,
                r = 52
            ));
        }
    }
    out.push_str(&blank);
    out.push_str(&blank);
    out.push_str(&rule);
    out.push('\n');
    out
}
