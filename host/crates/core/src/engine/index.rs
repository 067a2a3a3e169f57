//! The candidate index: which mappings could match a path, without scanning them all.
//!
//! WireMock scans every stub for every request, so its throughput falls linearly with
//! the number of stubs. Here each mapping is filed once, at load time, under what its
//! URL matcher pins down:
//!
//! - `url` / `urlPath`: the exact path, in a hash map;
//! - `urlPattern` / `urlPathPattern` / `urlPathTemplate`: the literal prefix the regex or
//!   template starts with (`/api/users/` for `/api/users/[0-9]+`), in a second hash map,
//!   probed with each prefix length that occurs;
//! - anything else (no URL, a regex starting with a class or an alternation): a short
//!   "unindexed" list that is always a candidate.
//!
//! Mappings are identified by their rank (position in priority order), so merging the
//! candidate lists and sorting them restores exactly WireMock's order: lowest priority
//! number first, then the most recently added. The index only narrows the set; the
//! full matcher still decides, so a conservative prefix is always correct.

use std::collections::HashMap;

use decoy_matching::request_pattern::UrlMatcher;

#[derive(Debug, Default)]
pub struct Index {
    exact: HashMap<Box<str>, Vec<u32>>,
    prefixed: HashMap<Box<str>, Vec<u32>>,
    /// The distinct lengths of the keys of `prefixed`, ascending.
    prefix_lens: Vec<usize>,
    unindexed: Vec<u32>,
}

enum Key {
    Exact(String),
    Prefix(String),
    None,
}

impl Index {
    /// Builds the index over URL matchers given in rank order.
    pub fn build<'a>(urls: impl Iterator<Item = &'a UrlMatcher>) -> Index {
        let mut index = Index::default();
        for (rank, url) in urls.enumerate() {
            let rank = rank as u32;
            match key_of(url) {
                Key::Exact(p) => index.exact.entry(p.into()).or_default().push(rank),
                Key::Prefix(p) if !p.is_empty() => {
                    index.prefixed.entry(p.into()).or_default().push(rank)
                }
                _ => index.unindexed.push(rank),
            }
        }
        let mut lens: Vec<usize> = index.prefixed.keys().map(|k| k.len()).collect();
        lens.sort_unstable();
        lens.dedup();
        index.prefix_lens = lens;
        index
    }

    /// Ranks of the mappings that may match `path`, best first.
    pub fn candidates(&self, path: &str, out: &mut Vec<u32>) {
        out.clear();
        let mut sources = 0;
        if let Some(list) = self.exact.get(path) {
            out.extend_from_slice(list);
            sources += 1;
        }
        for &len in &self.prefix_lens {
            if len > path.len() {
                break;
            }
            if !path.is_char_boundary(len) {
                continue;
            }
            if let Some(list) = self.prefixed.get(&path[..len]) {
                out.extend_from_slice(list);
                sources += 1;
            }
        }
        if !self.unindexed.is_empty() {
            out.extend_from_slice(&self.unindexed);
            sources += 1;
        }
        // Each list is already in rank order, and a mapping is filed in one list only.
        if sources > 1 {
            out.sort_unstable();
        }
    }
}

fn key_of(url: &UrlMatcher) -> Key {
    match url {
        UrlMatcher::Any => Key::None,
        UrlMatcher::Url(u) => Key::Exact(u.split('?').next().unwrap_or(u).to_owned()),
        UrlMatcher::Path(p) => Key::Exact(p.clone()),
        UrlMatcher::UrlPattern(re) | UrlMatcher::PathPattern(re) => {
            Key::Prefix(path_part(regex_literal_prefix(re.as_str())))
        }
        UrlMatcher::PathTemplate(t) => Key::Prefix(t.literal_prefix()),
    }
}

/// The part of a URL prefix that a path can start with: candidates are looked up by
/// the request's path, so a `urlPattern` prefix such as `/authorize?response_type=`
/// (from `/authorize\?response_type=.+`) is filed under `/authorize`.
fn path_part(mut prefix: String) -> String {
    if let Some(q) = prefix.find('?') {
        prefix.truncate(q);
    }
    prefix
}

/// The literal text every match of `pattern` must start with. Conservative: it stops
/// at the first construct it does not fully understand, and gives up on alternation.
pub fn regex_literal_prefix(pattern: &str) -> String {
    if pattern.contains('|') {
        return String::new();
    }
    let s = pattern.strip_prefix('^').unwrap_or(pattern);
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let (lit, width) = match chars[i] {
            '\\' => match chars.get(i + 1) {
                Some(&c) if c.is_ascii_punctuation() => (c, 2),
                _ => break,
            },
            '.' | '[' | ']' | '(' | ')' | '{' | '}' | '*' | '+' | '?' | '$' | '^' => break,
            c => (c, 1),
        };
        // A quantifier that allows zero occurrences makes this character optional.
        match chars.get(i + width) {
            Some('?' | '*' | '{') => break,
            Some('+') => {
                out.push(lit);
                break;
            }
            _ => out.push(lit),
        }
        i += width;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use decoy_matching::regex::full_regex;

    #[test]
    fn literal_prefixes_are_conservative() {
        assert_eq!(regex_literal_prefix("/api/users/[0-9]+"), "/api/users/");
        assert_eq!(regex_literal_prefix("^/api/v1/.*"), "/api/v1/");
        assert_eq!(regex_literal_prefix("/a\\.b/c"), "/a.b/c");
        assert_eq!(regex_literal_prefix("/items?"), "/item");
        assert_eq!(regex_literal_prefix("/x+y"), "/x");
        assert_eq!(regex_literal_prefix("/a{2}"), "/");
        assert_eq!(regex_literal_prefix("/a|/b"), "");
        assert_eq!(regex_literal_prefix("(?i)/api"), "");
        assert_eq!(regex_literal_prefix("\\d+/x"), "");
    }

    #[test]
    fn a_url_pattern_with_an_escaped_question_mark_is_filed_under_its_path() {
        let re = full_regex("/auth/oauth/authorize\\?response_type=code&.+", "t").unwrap();
        assert_eq!(
            regex_literal_prefix(re.as_str()),
            "/auth/oauth/authorize?response_type=code&"
        );
        let urls = [UrlMatcher::UrlPattern(re)];
        let index = Index::build(urls.iter());
        let mut out = Vec::new();
        index.candidates("/auth/oauth/authorize", &mut out);
        assert_eq!(out, [0]);
        index.candidates("/auth/other", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn candidates_merge_buckets_in_rank_order() {
        let urls = [
            UrlMatcher::PathPattern(full_regex("/api/.*", "t").unwrap()),
            UrlMatcher::Path("/api/x".into()),
            UrlMatcher::Any,
            UrlMatcher::Path("/other".into()),
            UrlMatcher::Url("/api/x?y=1".into()),
        ];
        let index = Index::build(urls.iter());
        let mut out = Vec::new();
        index.candidates("/api/x", &mut out);
        assert_eq!(out, [0, 1, 2, 4]);
        index.candidates("/nothing", &mut out);
        assert_eq!(out, [2]);
        index.candidates("/other", &mut out);
        assert_eq!(out, [2, 3]);
    }
}
