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

use std::hash::BuildHasher;

use decoy_matching::request::UrlMatcher;

/// Set on a candidate whose URL matcher the index has already decided: a `urlPath`
/// (or a `url` without a query, for a request without one) equal to the request's
/// path. The engine then skips comparing the URL again ([`Index::rank`] strips it).
/// With 10,000 stubs that comparison reads a string the CPU's caches no longer hold.
pub const URL_CHECKED: u32 = 1 << 31;
/// At build time only: the `url` without a query is decided when the request has
/// none either.
const URL_CHECKED_IF_NO_QUERY: u32 = 1 << 30;
const RANK: u32 = URL_CHECKED_IF_NO_QUERY - 1;

/// foldhash rather than SipHash: the keys come from stub files, not from requests,
/// so there is no one to flood the table, and a lookup hashes up to a few prefixes.
type Hasher = foldhash::fast::RandomState;

/// The ranks filed under one key; almost always one, kept inline.
#[derive(Debug)]
enum Ranks {
    One(u32),
    Many(Vec<u32>),
}

impl Ranks {
    fn push(&mut self, rank: u32) {
        match self {
            Ranks::One(first) => *self = Ranks::Many(vec![*first, rank]),
            Ranks::Many(v) => v.push(rank),
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Ranks::One(r) => std::slice::from_ref(r),
            Ranks::Many(v) => v,
        }
    }
}

/// A hash map from path (or path prefix) to ranks whose keys are kept side by side
/// in one string. A lookup that finds its key compares the path with bytes among
/// the other keys (10,000 paths are a few hundred KiB, which stay in cache) rather
/// than with a string allocated on its own when that stub was read, which the
/// CPU's caches have long lost when requests are spread over thousands of stubs.
#[derive(Debug, Default)]
struct KeyMap {
    keys: String,
    table: hashbrown::HashTable<Slot>,
    hasher: Hasher,
}

/// One key: its place in [`KeyMap::keys`] and its ranks.
#[derive(Debug)]
struct Slot {
    start: u32,
    len: u32,
    ranks: Ranks,
}

impl Slot {
    fn key<'k>(&self, keys: &'k str) -> &'k str {
        &keys[self.start as usize..(self.start + self.len) as usize]
    }
}

impl KeyMap {
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The ranks under `key`, whose [`KeyMap::hash`] is `hash`.
    fn get(&self, key: &str, hash: u64) -> Option<&Ranks> {
        self.table
            .find(hash, |s| s.key(&self.keys) == key)
            .map(|s| &s.ranks)
    }

    fn push(&mut self, key: &str, rank: u32) {
        let hash = self.hash(key);
        let KeyMap {
            keys,
            table,
            hasher,
        } = self;
        if let Some(slot) = table.find_mut(hash, |s| s.key(keys) == key) {
            slot.ranks.push(rank);
            return;
        }
        let start = u32::try_from(keys.len()).expect("under 4 GiB of stub paths");
        keys.push_str(key);
        let slot = Slot {
            start,
            len: key.len() as u32,
            ranks: Ranks::One(rank),
        };
        table.insert_unique(hash, slot, |s| hasher.hash_one(s.key(keys)));
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.table.iter().map(|s| s.key(&self.keys))
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        let hasher = &self.hasher;
        let keys = &self.keys;
        self.table.shrink_to_fit(|s| hasher.hash_one(s.key(keys)));
    }
}

#[derive(Debug, Default)]
pub struct Index {
    exact: KeyMap,
    prefixed: KeyMap,
    /// The distinct lengths of the keys of `prefixed`, ascending.
    prefix_lens: Vec<usize>,
    /// One bit per hash of a key of `prefixed` (16 bits a key, so about one probe in
    /// 16 of a prefix that is not there reaches the map): with thousands of patterns a
    /// request probes a few prefix lengths, and most probes end here, in a few KiB
    /// that stay in cache, instead of in the map's buckets.
    prefix_filter: Box<[u64]>,
    /// The filter's size in bits, less one (a power of two).
    filter_mask: usize,
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
            assert!(rank <= RANK, "more than 2^30 mappings");
            let map = match key_of(url) {
                Key::Exact(p) => {
                    let flagged = match url {
                        UrlMatcher::Path(_) => rank | URL_CHECKED,
                        UrlMatcher::Url(u) if !u.contains('?') => rank | URL_CHECKED_IF_NO_QUERY,
                        _ => rank,
                    };
                    Some((&mut index.exact, p, flagged))
                }
                Key::Prefix(p) if !p.is_empty() => Some((&mut index.prefixed, p, rank)),
                _ => None,
            };
            match map {
                Some((map, key, rank)) => map.push(&key, rank),
                None => index.unindexed.push(rank),
            }
        }
        index.exact.shrink_to_fit();
        index.prefixed.shrink_to_fit();
        let mut lens: Vec<usize> = index.prefixed.keys().map(|k| k.len()).collect();
        lens.sort_unstable();
        lens.dedup();
        index.prefix_lens = lens;
        let words = (index.prefixed.len() * 16).div_ceil(64).next_power_of_two();
        index.filter_mask = words * 64 - 1;
        let mut filter = vec![0u64; words];
        for key in index.prefixed.keys() {
            let bit = index.prefixed.hash(key) as usize & index.filter_mask;
            filter[bit / 64] |= 1 << (bit % 64);
        }
        index.prefix_filter = filter.into();
        index
    }

    /// A candidate's rank, without the [`URL_CHECKED`] flag.
    pub fn rank(candidate: u32) -> usize {
        (candidate & RANK) as usize
    }

    /// The mappings that may match a request for `path` (`url` is the whole
    /// request URL, path and query), best first; each is a rank, flagged with
    /// [`URL_CHECKED`] when the index has already decided its URL matcher.
    pub fn candidates(&self, path: &str, url: &str, out: &mut Vec<u32>) {
        out.clear();
        let mut sources = 0;
        if let Some(list) = self.exact.get(path, self.exact.hash(path)) {
            let no_query = url.len() == path.len();
            out.extend(list.as_slice().iter().map(|&r| {
                if r & URL_CHECKED_IF_NO_QUERY != 0 {
                    (r & RANK) | if no_query { URL_CHECKED } else { 0 }
                } else {
                    r
                }
            }));
            sources += 1;
        }
        for &len in &self.prefix_lens {
            if len > path.len() {
                break;
            }
            if !path.is_char_boundary(len) {
                continue;
            }
            let prefix = &path[..len];
            let hash = self.prefixed.hash(prefix);
            let bit = hash as usize & self.filter_mask;
            if self.prefix_filter[bit / 64] & (1 << (bit % 64)) == 0 {
                continue;
            }
            if let Some(list) = self.prefixed.get(prefix, hash) {
                out.extend_from_slice(list.as_slice());
                sources += 1;
            }
        }
        if !self.unindexed.is_empty() {
            out.extend_from_slice(&self.unindexed);
            sources += 1;
        }
        // Each list is already in rank order, and a mapping is filed in one list only.
        if sources > 1 {
            out.sort_unstable_by_key(|&c| c & RANK);
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
        index.candidates("/auth/oauth/authorize", "/auth/oauth/authorize", &mut out);
        assert_eq!(out, [0]);
        index.candidates("/auth/other", "/auth/other", &mut out);
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
        index.candidates("/api/x", "/api/x", &mut out);
        assert_eq!(out, [0, 1 | URL_CHECKED, 2, 4]);
        index.candidates("/nothing", "/nothing", &mut out);
        assert_eq!(out, [2]);
        index.candidates("/other", "/other", &mut out);
        assert_eq!(out, [2, 3 | URL_CHECKED]);
    }

    #[test]
    fn the_index_decides_only_the_urls_it_compared_whole() {
        let urls = [
            UrlMatcher::Url("/a".into()),
            UrlMatcher::Path("/a".into()),
            UrlMatcher::Url("/a?x=1".into()),
            UrlMatcher::PathPattern(full_regex("/a.*", "t").unwrap()),
        ];
        let index = Index::build(urls.iter());
        let mut out = Vec::new();
        // No query: `url` "/a" and `urlPath` "/a" are decided; the `url` with a query
        // and the pattern are left to the matcher.
        index.candidates("/a", "/a", &mut out);
        assert_eq!(out, [URL_CHECKED, 1 | URL_CHECKED, 2, 3]);
        // With a query, `url` "/a" cannot be decided from the path (it does not match).
        index.candidates("/a", "/a?x=1", &mut out);
        assert_eq!(out, [0, 1 | URL_CHECKED, 2, 3]);
        assert_eq!(
            out.iter().map(|&c| Index::rank(c)).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn keys_filed_more_than_once_keep_every_rank_in_order() {
        let urls = [
            UrlMatcher::Path("/same".into()),
            UrlMatcher::Path("/other".into()),
            UrlMatcher::Url("/same".into()),
            UrlMatcher::Path("/same".into()),
            UrlMatcher::Path("/sam".into()),
        ];
        let index = Index::build(urls.iter());
        let mut out = Vec::new();
        index.candidates("/same", "/same", &mut out);
        assert_eq!(out, [URL_CHECKED, 2 | URL_CHECKED, 3 | URL_CHECKED]);
        index.candidates("/sam", "/sam", &mut out);
        assert_eq!(out, [4 | URL_CHECKED]);
        index.candidates("/samex", "/samex", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn thousands_of_prefixes_are_all_found_through_the_filter() {
        let urls: Vec<UrlMatcher> = (0..5000)
            .map(|i| {
                UrlMatcher::PathPattern(full_regex(&format!("/v2/res{i}/[0-9]+"), "t").unwrap())
            })
            .collect();
        let index = Index::build(urls.iter());
        let mut out = Vec::new();
        for i in 0..5000u32 {
            let path = format!("/v2/res{i}/42");
            index.candidates(&path, &path, &mut out);
            assert_eq!(out, [i], "{path}");
        }
        index.candidates("/v2/other/1", "/v2/other/1", &mut out);
        assert!(out.is_empty());
    }
}
