//! Regexes as WireMock means them: Java-style patterns that must match the whole value.
//!
//! Most patterns are plain, and run on `regex-automata`'s meta engine configured for
//! small size: no one-pass DFA, no full DFA and no lazy DFA, leaving the PikeVM and
//! the bounded backtracker. Measured on 2,500 URL patterns, that takes 7 KB and 14 µs
//! to build per pattern instead of 14 KB and 100 µs with the `regex` crate's
//! defaults, at about 90 ns a match instead of 35-50 ns: the right trade when a root
//! holds thousands of stubs and a URL is a few dozen bytes. Patterns that need Java
//! features `regex` lacks (look-around, backreferences) fall back to `fancy-regex`; one
//! that gives up on its backtracking limit counts as no match, never as a hang.
//!
//! A plain pattern is checked when its mapping loads (parsed by `regex-syntax`, which
//! catches every syntax error) but compiled on its first use, so a root with
//! thousands of regex stubs starts in milliseconds and only the stubs that are
//! actually hit cost memory.

use std::sync::OnceLock;

use decoy_spec::fields::{FieldError, FieldResult};
use regex_automata::meta;

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

#[derive(Debug)]
enum Engine {
    /// Compiled on first use; `None` if compiling failed after all (a size limit).
    Plain {
        anchored: String,
        compiled: OnceLock<Option<meta::Regex>>,
    },
    Fancy(fancy_regex::Regex),
}

fn build_plain(anchored: &str) -> Result<meta::Regex, Box<meta::BuildError>> {
    let config = meta::Config::new()
        .onepass(false)
        .dfa(false)
        .hybrid(false)
        .nfa_size_limit(Some(1 << 20));
    meta::Regex::builder()
        .configure(config)
        .build(anchored)
        .map_err(Box::new)
}

impl Regex {
    /// Compiles `pattern` to match whole values; the error is for the pattern as written.
    pub fn whole(pattern: &str) -> Result<Regex, String> {
        let anchored = format!("^(?:{pattern})$");
        let engine = match regex_syntax::Parser::new().parse(&anchored) {
            Ok(_) => Engine::Plain {
                anchored,
                compiled: OnceLock::new(),
            },
            Err(_) => match fancy_regex::Regex::new(&anchored) {
                Ok(re) => Engine::Fancy(re),
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

    pub fn is_match(&self, text: &str) -> bool {
        match &self.engine {
            Engine::Plain { anchored, compiled } => compiled
                .get_or_init(|| match build_plain(anchored) {
                    Ok(re) => Some(re),
                    Err(e) => {
                        tracing::warn!(
                            "regex {anchored:?} cannot be compiled, it will never match: {e}"
                        );
                        None
                    }
                })
                .as_ref()
                .is_some_and(|re| re.is_match(text)),
            Engine::Fancy(re) => re.is_match(text).unwrap_or(false),
        }
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
    fn errors_describe_the_pattern_as_written() {
        let e = Regex::whole("([a-z").unwrap_err();
        assert!(e.contains("position"), "{e}");
    }
}
