//! Jayway JSONPath's regex operator, rewritten into RFC 9535.
//!
//! WireMock evaluates JSONPath with Jayway, whose filters accept
//! `@.query =~ /.*CVE-.*/i`; decoy evaluates it with `serde_json_path`, which follows
//! RFC 9535 and has no `=~`, only the functions `match()` (the whole value) and
//! `search()` (anywhere in it). Both the request matchers (`matchesJsonPath`) and the
//! `response-template` plugin's `jsonPath` helper read users' Jayway paths, so the
//! rewrite lives here, once: [`rewrite_regex_operator`] turns `LEFT =~ /RE/FLAGS`
//! (or `/RE/FLAGS =~ RIGHT`) into `match(LEFT, 'RE')`, because Jayway's
//! `PatternMatchEvaluator` asks for a full match (`Matcher.matches()`).
//!
//! - Flags become an inline group at the start of the regex: `i`, `m`, `s` and `x`
//!   as `(?ims)`. Java's `d` (only `\n` ends a line) is already how the `regex` crate
//!   reads `.` and `$`, and `u`/`U` (Unicode case folding and classes) are its
//!   defaults, so those three are dropped.
//! - `\/` in the regex (a `/` that does not end it) becomes `/`; the regex is then
//!   written as an RFC 9535 string literal (`\` and `'` escaped).
//! - Jayway also matches each element when the left side is a list. When the left
//!   side is a query (`@...` or `$...`), the rewrite says so too:
//!   `(match(L, 'RE') || (L[0] && L[?match(@, 'RE')]))`, where `L[0]` keeps an
//!   object's values out (Jayway does not look into objects).
//! - Not reproduced: Jayway matches a number or a boolean by its text (`@.id =~ /4.*/`
//!   for `"id": 42`); `match()` is true for strings only.
//!
//! Quoted names and string literals are copied untouched, so `'a =~ /b/'` in a
//! string stays a string. The regexes are returned too, so a caller can check each
//! with the engine that will run it (the `regex` crate, without look-around or
//! back-references) and refuse a path whose regex would silently never match.
//!
//! It has no dependencies, so it builds for the host and for `wasm32-wasip2` alike.
//! May depend on: nothing.

/// A path with every `=~` rewritten, and the regexes it now hands to `match()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub expression: String,
    /// Each regex as `match()` receives it (inline flags first), before the string
    /// literal's escaping.
    pub regexes: Vec<String>,
}

/// A `=~` or `/regex/` this rewrite cannot read, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// A regex on the left of `=~` (`/RE/ =~ @.a`), waiting for its right side to end.
struct Pending {
    /// The bracket depth it was met at: its right side ends at `&&`, `||` or `,` at
    /// this depth, or where this depth's bracket closes.
    depth: usize,
    regex: String,
    /// Where the regex began in the output.
    begin: usize,
    /// Where the right side begins in the output, once `=~` was met.
    right: Option<usize>,
}

/// Rewrites every `=~` of a Jayway path (see the module documentation). A path
/// without `=~` is returned as it is.
pub fn rewrite_regex_operator(expr: &str) -> Result<Rewritten, Error> {
    if !expr.contains("=~") {
        return Ok(Rewritten {
            expression: expr.to_owned(),
            regexes: Vec::new(),
        });
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + 32);
    let mut regexes = Vec::new();
    // Where the operand being read began in `out`, and the same for every bracket
    // level we are inside of.
    let mut start = 0usize;
    let mut levels: Vec<usize> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                let end = string_end(&chars, i);
                out.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '=' if chars.get(i + 1) == Some(&'~') => {
                i += 2;
                if let Some(p) = pending
                    .last_mut()
                    .filter(|p| p.right.is_none() && p.depth == levels.len())
                {
                    if !out[p.begin..].trim().is_empty() {
                        return Err(Error(format!(
                            "unexpected {:?} between a /regex/ and =~ in {expr:?}",
                            out[p.begin..].trim()
                        )));
                    }
                    p.right = Some(out.len());
                    continue;
                }
                let left = &out[start..];
                if left.trim().is_empty() {
                    return Err(Error(format!("=~ has nothing on its left in {expr:?}")));
                }
                while chars.get(i).is_some_and(|c| c.is_whitespace()) {
                    i += 1;
                }
                if chars.get(i) != Some(&'/') {
                    return Err(Error(format!(
                        "=~ needs a /regex/ on one side, as in @.name =~ /a.*/i, in {expr:?}"
                    )));
                }
                let (regex, next) = pattern(&chars, i, expr)?;
                i = next;
                let operand = left.trim().to_owned();
                let lead = left.len() - left.trim_start().len();
                out.truncate(start + lead);
                out.push_str(&match_call(&operand, &regex));
                regexes.push(regex);
                continue;
            }
            '/' => {
                // A regex first: `/RE/ =~ @.a`; its right side is read on.
                let (regex, next) = pattern(&chars, i, expr)?;
                pending.push(Pending {
                    depth: levels.len(),
                    regex,
                    begin: out.len(),
                    right: None,
                });
                i = next;
                continue;
            }
            '&' | '|' | ',' => {
                finish(&mut out, &mut pending, levels.len(), &mut regexes, expr)?;
                out.push(c);
                start = out.len();
            }
            '(' | '[' => {
                out.push(c);
                levels.push(start);
                start = out.len();
            }
            ')' | ']' => {
                finish(&mut out, &mut pending, levels.len(), &mut regexes, expr)?;
                out.push(c);
                start = levels.pop().unwrap_or(0);
            }
            '?' | '!' | '=' | '<' | '>' => {
                out.push(c);
                start = out.len();
            }
            c => out.push(c),
        }
        i += 1;
    }
    while !pending.is_empty() {
        let depth = pending.last().map_or(0, |p| p.depth);
        finish(&mut out, &mut pending, depth, &mut regexes, expr)?;
    }
    Ok(Rewritten {
        expression: out,
        regexes,
    })
}

/// Ends the regex-first `=~` waiting at `depth`, if there is one: its right side is
/// what was written since the operator.
fn finish(
    out: &mut String,
    pending: &mut Vec<Pending>,
    depth: usize,
    regexes: &mut Vec<String>,
    expr: &str,
) -> Result<(), Error> {
    if pending.last().is_none_or(|p| p.depth != depth) {
        return Ok(());
    }
    let Some(p) = pending.pop() else {
        return Ok(());
    };
    let Some(right) = p.right else {
        return Err(Error(format!(
            "a /regex/ is only understood with =~ (as in @.name =~ /a.*/), in {expr:?}"
        )));
    };
    let operand = out[right..].trim().to_owned();
    if operand.is_empty() {
        return Err(Error(format!("=~ has nothing on its right in {expr:?}")));
    }
    let trail = out[right..].len() - out[right..].trim_end().len();
    let trailing = out[out.len() - trail..].to_owned();
    out.truncate(p.begin);
    out.push_str(&match_call(&operand, &p.regex));
    out.push_str(&trailing);
    regexes.push(p.regex);
    Ok(())
}

/// `match(OPERAND, 'REGEX')`, and for a query also any of its elements.
fn match_call(operand: &str, regex: &str) -> String {
    let lit = string_literal(regex);
    if operand.starts_with('@') || operand.starts_with('$') {
        // `[0]` selects nothing from an object, so only a list's elements are tried
        // (Jayway matches an object as the empty text, never its values).
        format!("(match({operand}, {lit}) || ({operand}[0] && {operand}[?match(@, {lit})]))")
    } else {
        format!("match({operand}, {lit})")
    }
}

/// Reads the Jayway regex literal starting with the `/` at `at`: the regex (flags as
/// an inline group, `\/` unescaped) and the index after its flags.
fn pattern(chars: &[char], at: usize, expr: &str) -> Result<(String, usize), Error> {
    let mut body = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None => {
                return Err(Error(format!(
                    "the regex that starts at character {} has no closing / in {expr:?}",
                    at + 1
                )));
            }
            Some('\\') => {
                match chars.get(i + 1) {
                    Some('/') => body.push('/'),
                    Some(&n) => {
                        body.push('\\');
                        body.push(n);
                    }
                    None => body.push('\\'),
                }
                i += 2;
            }
            Some('/') => {
                i += 1;
                break;
            }
            Some(&c) => {
                body.push(c);
                i += 1;
            }
        }
    }
    let mut inline = String::new();
    while let Some(&f) = chars.get(i) {
        if !"dixmsuU".contains(f) {
            break;
        }
        if "imsx".contains(f) && !inline.contains(f) {
            inline.push(f);
        }
        i += 1;
    }
    let regex = if inline.is_empty() {
        body
    } else {
        format!("(?{inline}){body}")
    };
    Ok((regex, i))
}

/// The index after the string literal opening at `at` (its closing quote included;
/// the end of the text when it is not closed).
fn string_end(chars: &[char], at: usize) -> usize {
    let quote = chars[at];
    let mut i = at + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// `s` as an RFC 9535 single-quoted string literal.
fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(expr: &str) -> String {
        rewrite_regex_operator(expr).unwrap().expression
    }

    #[test]
    fn a_path_without_the_operator_is_left_alone() {
        let r = rewrite_regex_operator("$.a[?(@.b == 'x/y')]").unwrap();
        assert_eq!(r.expression, "$.a[?(@.b == 'x/y')]");
        assert!(r.regexes.is_empty());
    }

    #[test]
    fn the_operator_becomes_a_full_match_of_the_left_side() {
        assert_eq!(
            rw("$[?(@.query =~ /.*CVE-2021-44228.*/)]"),
            "$[?((match(@.query, '.*CVE-2021-44228.*') || (@.query[0] && @.query[?match(@, '.*CVE-2021-44228.*')])))]"
        );
        let r = rewrite_regex_operator("$.items[?(@.name=~/ab+c/)].id").unwrap();
        assert_eq!(
            r.expression,
            "$.items[?((match(@.name, 'ab+c') || (@.name[0] && @.name[?match(@, 'ab+c')])))].id"
        );
        assert_eq!(r.regexes, vec!["ab+c".to_owned()]);
    }

    #[test]
    fn flags_become_an_inline_group_and_java_only_ones_are_dropped() {
        let r = rewrite_regex_operator("$[?(@.a =~ /abc/i)]").unwrap();
        assert_eq!(r.regexes, vec!["(?i)abc".to_owned()]);
        let r = rewrite_regex_operator("$[?(@.a =~ /a.c/sidmuU)]").unwrap();
        assert_eq!(r.regexes, vec!["(?sim)a.c".to_owned()]);
        let r = rewrite_regex_operator("$[?(@.a =~ /x/d)]").unwrap();
        assert_eq!(r.regexes, vec!["x".to_owned()]);
    }

    #[test]
    fn an_escaped_slash_stays_in_the_regex_and_quotes_and_backslashes_are_escaped() {
        let r = rewrite_regex_operator(r"$[?(@.path =~ /\/api\/v[0-9]+\/.*/)]").unwrap();
        assert_eq!(r.regexes, vec![r"/api/v[0-9]+/.*".to_owned()]);
        let r = rewrite_regex_operator(r#"$[?(@.s =~ /it's \d "q"/)]"#).unwrap();
        assert_eq!(r.regexes, vec![r#"it's \d "q""#.to_owned()]);
        assert!(
            r.expression.contains(r#"match(@.s, 'it\'s \\d "q"')"#),
            "{}",
            r.expression
        );
    }

    #[test]
    fn strings_holding_the_operator_or_slashes_are_copied_untouched() {
        assert_eq!(
            rw("$[?(@['a =~ /b/'] =~ /c/ && @.d == 'e/f')]"),
            "$[?((match(@['a =~ /b/'], 'c') || (@['a =~ /b/'][0] && @['a =~ /b/'][?match(@, 'c')])) && @.d == 'e/f')]"
        );
    }

    #[test]
    fn each_side_of_logical_operators_and_nested_filters_is_its_own_operand() {
        assert_eq!(
            rw("$[?(@.a == 1 || !(@.b =~ /x/))]"),
            "$[?(@.a == 1 || !((match(@.b, 'x') || (@.b[0] && @.b[?match(@, 'x')]))))]"
        );
        assert_eq!(
            rw("$.o[?(@.tags[?(@ =~ /t.*/)])]"),
            "$.o[?(@.tags[?((match(@, 't.*') || (@[0] && @[?match(@, 't.*')])))])]"
        );
        assert_eq!(
            rw("$[?(@.list[0].name =~ /n/)]"),
            "$[?((match(@.list[0].name, 'n') || (@.list[0].name[0] && @.list[0].name[?match(@, 'n')])))]"
        );
        // A literal on the left: no list to look into.
        assert_eq!(rw("$[?('abc' =~ /a.*/)]"), "$[?(match('abc', 'a.*'))]");
    }

    #[test]
    fn the_regex_may_come_first() {
        assert_eq!(
            rw("$[?(/x+/i =~ @.a && @.b)]"),
            "$[?((match(@.a, '(?i)x+') || (@.a[0] && @.a[?match(@, '(?i)x+')])) && @.b)]"
        );
        assert_eq!(
            rw("$[?(/x/ =~ @.a)]"),
            "$[?((match(@.a, 'x') || (@.a[0] && @.a[?match(@, 'x')])))]"
        );
    }

    #[test]
    fn malformed_uses_are_refused_with_the_reason() {
        let e = rewrite_regex_operator("$[?(@.a =~ /abc)]").unwrap_err();
        assert!(e.0.contains("no closing /"), "{e}");
        let e = rewrite_regex_operator("$[?(@.a =~ 'abc')]").unwrap_err();
        assert!(e.0.contains("needs a /regex/"), "{e}");
        let e = rewrite_regex_operator("$[?( =~ /a/)]").unwrap_err();
        assert!(e.0.contains("nothing on its left"), "{e}");
        let e = rewrite_regex_operator("$[?(@.a =~ /a/ || /b/)]").unwrap_err();
        assert!(e.0.contains("only understood with =~"), "{e}");
    }
}
