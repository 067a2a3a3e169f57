//! Regexes as WireMock means them: Java-style patterns that must match the whole value.
//!
//! Most patterns are plain, and run on `regex-automata`'s Thompson NFA with its two
//! small engines: the bounded backtracker (fast on the short values a URL or a header
//! is) and, for values too long for it, the PikeVM. Neither is given a cache of its
//! own: each thread keeps one cache per engine and resets it for the regex at hand,
//! so a compiled pattern is its NFA alone. Measured on 2,500 URL patterns, that is
//! about 1 KB per pattern against 7 KB for `regex-automata`'s meta engine (itself
//! configured small, and 14 KB with the `regex` crate's defaults), at the same
//! matching speed within noise (0.4-0.5 µs a call): with thousands of regex stubs,
//! 15 MB less. Patterns that need Java features `regex` lacks (look-around,
//! backreferences) fall back to `fancy-regex`, with a backtracking limit of
//! [`REGEX_BACKTRACK_LIMIT`] steps; one that gives up on it counts as no match (with a
//! warning in the log), never as a hang.
//!
//! A plain pattern is checked when its mapping loads (its syntax tree parsed by
//! `regex-syntax`, which catches every syntax error) but compiled on its first use, so a root with
//! thousands of regex stubs starts in milliseconds and only the stubs that are
//! actually hit cost memory.

use std::sync::OnceLock;

use crate::limits::{REGEX_BACKTRACK_LIMIT, past_deadline};
use decoy_spec::fields::{FieldError, FieldResult};
use std::cell::RefCell;

use regex_automata::nfa::thompson::{self, backtrack, pikevm};

/// WireMock's `matches` is Java's `Matcher.matches()`: the whole value must match.
pub fn full_regex(pattern: &str, path: &str) -> FieldResult<Regex> {
    Regex::whole(pattern).map_err(|reason| {
        FieldError::new(
            path,
            format!("invalid regular expression {pattern:?}: {reason}"),
        )
    })
}

#[derive(Debug)]
pub struct Regex {
    /// The pattern as the user wrote it (unanchored).
    source: String,
    engine: Engine,
}

/// Kept small (a mapping holds several of these inline): the anchored text of a
/// plain pattern is rebuilt from `source` when it is compiled, and the rarer
/// look-around engine is boxed.
#[derive(Debug)]
enum Engine {
    /// Compiled on first use; `None` if compiling failed after all (a size limit).
    Plain(OnceLock<Option<Box<Compiled>>>),
    Fancy(Box<fancy_regex::Regex>),
}

/// One NFA, shared by both engines.
#[derive(Debug)]
struct Compiled {
    backtracker: backtrack::BoundedBacktracker,
    pikevm: pikevm::PikeVM,
}

thread_local! {
    /// Each thread's search state, reset for whichever regex it runs next.
    static CACHES: RefCell<Option<(backtrack::Cache, pikevm::Cache)>> = const { RefCell::new(None) };
}

fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})$")
}

/// Is this a pattern the plain engines take? The syntax tree is enough to know, and
/// is a fraction of the cost of the full translation (which builds every Unicode
/// class), paid by every regex stub when a root loads. Only a Unicode property
/// (`\p{...}`) can be well-formed yet unknown, so those patterns get the full check;
/// anything else the translation could still refuse is reported when the regex is
/// first used (and it then never matches).
fn check_syntax(anchored: &str) -> Result<(), ()> {
    regex_syntax::ast::parse::Parser::new()
        .parse(anchored)
        .map_err(|_| ())?;
    if anchored.contains("\\p") || anchored.contains("\\P") {
        regex_syntax::Parser::new()
            .parse(anchored)
            .map_err(|_| ())?;
    }
    Ok(())
}

fn build_plain(anchored: &str) -> Result<Box<Compiled>, String> {
    // Only "does it match" is ever asked: no capture groups in the NFA.
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .which_captures(thompson::WhichCaptures::None)
                .nfa_size_limit(Some(1 << 20)),
        )
        .build(anchored)
        .map_err(|e| e.to_string())?;
    let backtracker =
        backtrack::BoundedBacktracker::new_from_nfa(nfa.clone()).map_err(|e| e.to_string())?;
    let pikevm = pikevm::PikeVM::new_from_nfa(nfa).map_err(|e| e.to_string())?;
    Ok(Box::new(Compiled {
        backtracker,
        pikevm,
    }))
}

impl Compiled {
    fn is_match(&self, text: &str) -> bool {
        CACHES.with(|c| {
            let mut c = c.borrow_mut();
            let (bt, vm) = c.get_or_insert_with(|| {
                (self.backtracker.create_cache(), self.pikevm.create_cache())
            });
            if text.len() <= self.backtracker.max_haystack_len() {
                bt.reset(&self.backtracker);
                if let Ok(m) = self.backtracker.try_is_match(bt, text) {
                    return m;
                }
            }
            vm.reset(&self.pikevm);
            self.pikevm.is_match(vm, text)
        })
    }
}

impl Regex {
    /// Compiles `pattern` to match whole values; the error is for the pattern as written.
    pub fn whole(pattern: &str) -> Result<Regex, String> {
        let anchored = anchored(pattern);
        let engine = match check_syntax(&anchored) {
            Ok(()) => Engine::Plain(OnceLock::new()),
            Err(_) => match fancy_regex::RegexBuilder::new(&anchored)
                .backtrack_limit(REGEX_BACKTRACK_LIMIT)
                .build()
            {
                Ok(re) => Engine::Fancy(Box::new(re)),
                Err(_) => {
                    // Report the error of the pattern as written, so positions are the user's.
                    return Err(match fancy_regex::Regex::new(pattern) {
                        Err(e) => e.to_string(),
                        Ok(_) => "it cannot be anchored to match a whole value".to_owned(),
                    });
                }
            },
        };
        Ok(Regex {
            source: pattern.to_owned(),
            engine,
        })
    }

    /// Whether `text` matches; a regex that gave up counts as no match.
    pub fn is_match(&self, text: &str) -> bool {
        self.try_is_match(text).unwrap_or(false)
    }

    /// Whether `text` matches, or `None` when the regex gave up: it reached its
    /// backtracking limit (logged), or the scoring deadline had passed before it started
    /// (see [`crate::limits::with_deadline`]).
    pub fn try_is_match(&self, text: &str) -> Option<bool> {
        /// Plain regexes run in linear time; only long values are worth skipping.
        const LONG: usize = 64 * 1024;
        Some(match &self.engine {
            Engine::Plain(compiled) => {
                let compiled =
                    compiled.get_or_init(|| match build_plain(&anchored(&self.source)) {
                        Ok(re) => Some(re),
                        Err(e) => {
                            tracing::warn!(
                                "regex {:?} cannot be compiled, it will never match: {e}",
                                self.source
                            );
                            None
                        }
                    });
                let Some(re) = compiled else {
                    return Some(false);
                };
                if text.len() > LONG && past_deadline() {
                    return None;
                }
                re.is_match(text)
            }
            Engine::Fancy(re) => {
                if past_deadline() {
                    return None;
                }
                match re.is_match(text) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(
                            "regex {:?} gave up on a {}-byte value ({e}; the limit is {REGEX_BACKTRACK_LIMIT} backtracking steps): counted as no match",
                            self.source,
                            text.len()
                        );
                        return None;
                    }
                }
            }
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_values_only() {
        let re = Regex::whole("/a/[0-9]+").unwrap();
        assert!(re.is_match("/a/12"));
        assert!(!re.is_match("/a/12/b"));
        assert!(!re.is_match("x/a/12"));
        assert!(Regex::whole("a|b").unwrap().is_match("b"));
    }

    #[test]
    fn java_look_around_falls_back_to_fancy_regex() {
        let re = Regex::whole("(?!admin).*").unwrap();
        assert!(re.is_match("user"));
        assert!(!re.is_match("admin"));
        assert!(Regex::whole("(a)\\1").unwrap().is_match("aa"));
    }

    #[test]
    fn unknown_unicode_properties_are_load_errors() {
        assert!(Regex::whole("\\p{Greek}+").unwrap().is_match("αβ"));
        assert!(Regex::whole("\\p{NoSuchScript}").is_err());
        assert!(Regex::whole("\\P{NoSuchScript}").is_err());
    }

    #[test]
    fn errors_describe_the_pattern_as_written() {
        let e = Regex::whole("([a-z").unwrap_err();
        assert!(e.contains("position"), "{e}");
    }
}
