//! Options for `decoy serve` from the environment, as the `wiremock/wiremock` image
//! takes them: `DECOY_OPTIONS`, and `WIREMOCK_OPTIONS` for compatibility. Their words
//! go before the command line's arguments, and a flag given twice keeps its last value,
//! so an argument given on the command line wins over the environment.

/// The environment variables read, in order.
pub const VARIABLES: [&str; 2] = ["WIREMOCK_OPTIONS", "DECOY_OPTIONS"];

/// `argv` with the environment's options put right after `serve` (only for `serve`),
/// and without empty arguments: Testcontainers' `WireMockContainer` passes its
/// options as one string split on spaces, which starts with an empty one.
pub fn with_env_options(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if argv.get(1).and_then(|a| a.to_str()) != Some("serve") {
        return argv;
    }
    with_options(argv, words_from_env())
}

/// `argv` (a `decoy serve` command line) with `words` put right after `serve`, and
/// without empty arguments.
pub fn with_options(
    mut argv: Vec<std::ffi::OsString>,
    words: Vec<String>,
) -> Vec<std::ffi::OsString> {
    argv.retain(|a| !a.is_empty());
    if words.is_empty() {
        return argv;
    }
    let rest = argv.split_off(2);
    argv.extend(words.into_iter().map(Into::into));
    argv.extend(rest);
    argv
}

/// Every word of `WIREMOCK_OPTIONS` then `DECOY_OPTIONS`.
pub fn words_from_env() -> Vec<String> {
    words_from(|v| std::env::var(v).ok())
}

/// Every word of `WIREMOCK_OPTIONS` then `DECOY_OPTIONS`, as `var` gives them.
pub fn words_from(var: impl Fn(&str) -> Option<String>) -> Vec<String> {
    VARIABLES
        .iter()
        .filter_map(|v| var(v))
        .flat_map(|s| split_words(&s))
        .collect()
}

/// Splits as a shell would for the simple cases: on whitespace, with single or
/// double quotes grouping words (`--admin-token 'a b'`) and a backslash escaping the
/// next character outside single quotes.
pub fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_on_whitespace_and_quotes_group_them() {
        assert_eq!(
            split_words("  --port 9000 --admin-token 'a b' --x \"c\\\"d\" e\\ f "),
            [
                "--port",
                "9000",
                "--admin-token",
                "a b",
                "--x",
                "c\"d",
                "e f"
            ]
        );
        assert!(split_words("   ").is_empty());
        assert_eq!(split_words("''"), [""]);
    }
}
