//! Java date-time patterns (`SimpleDateFormat`, `DateTimeFormatter`), as WireMock's
//! users write them (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`), lexed in one place.
//!
//! Both the date matchers (`actualFormat`, reading a request's dates) and the
//! `response-template` plugin (`{{now format=...}}`, writing dates) need to read these
//! patterns. They used to do it with two copies of the same loop, which had already
//! drifted apart (one knew `''` as an escaped quote, the other did not). This crate
//! is the one lexer: a pattern becomes [`Token`]s (runs of one pattern letter, and
//! literal text), and each caller maps the letters it supports to what it runs on.
//!
//! It has no dependencies, so it builds for the host and for `wasm32-wasip2` alike.
//! May depend on: nothing.

/// One piece of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A run of one pattern letter (`yyyy` is `Field('y', 4)`).
    Field(char, usize),
    /// Text to copy as is: quoted text (`'T'`), `''` (a quote), and every character
    /// that is not an ASCII letter.
    Literal(String),
}

/// Splits a Java pattern into tokens. Quoted text is literal, `''` is a quote (inside
/// or outside quotes), an unclosed quote runs to the end, as Java reads it.
pub fn lex(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out: Vec<Token> = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\'') {
                literal.push('\'');
                i += 2;
                continue;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        literal.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                literal.push(chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            literal.push(c);
            i += 1;
            continue;
        }
        let mut n = 1;
        while chars.get(i + n) == Some(&c) {
            n += 1;
        }
        if !literal.is_empty() {
            out.push(Token::Literal(std::mem::take(&mut literal)));
        }
        out.push(Token::Field(c, n));
        i += n;
    }
    if !literal.is_empty() {
        out.push(Token::Literal(literal));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Token::{Field, Literal};

    fn lit(s: &str) -> Token {
        Literal(s.to_owned())
    }

    #[test]
    fn splits_letters_runs_and_literals() {
        assert_eq!(
            lex("yyyy-MM-dd'T'HH:mm:ss.SSSZ"),
            vec![
                Field('y', 4),
                lit("-"),
                Field('M', 2),
                lit("-"),
                Field('d', 2),
                lit("T"),
                Field('H', 2),
                lit(":"),
                Field('m', 2),
                lit(":"),
                Field('s', 2),
                lit("."),
                Field('S', 3),
                Field('Z', 1),
            ]
        );
    }

    #[test]
    fn two_quotes_are_one_quote_inside_and_outside_quoted_text() {
        assert_eq!(
            lex("hh 'o''clock' a"),
            vec![Field('h', 2), lit(" o'clock "), Field('a', 1)]
        );
        assert_eq!(lex("''yy"), vec![lit("'"), Field('y', 2)]);
    }

    #[test]
    fn an_unclosed_quote_runs_to_the_end() {
        assert_eq!(lex("yy'abc"), vec![Field('y', 2), lit("abc")]);
    }
}
