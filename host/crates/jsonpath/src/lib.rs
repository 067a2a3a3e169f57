//! Jayway JSONPath's filter operators that RFC 9535 lacks, rewritten into RFC 9535.
//!
//! WireMock evaluates JSONPath with Jayway; decoy evaluates it with
//! `serde_json_path`, which follows RFC 9535. Both the request matchers
//! (`matchesJsonPath`) and the `response-template` plugin's `jsonPath` helper read
//! users' Jayway paths, so the rewrite lives here, once: [`rewrite`] turns the word
//! operators into function calls, then the regex operator into `match()`.
//!
//! **Word operators** (`LEFT op RIGHT`, the operator between spaces, any case):
//! `in`, `nin`, `subsetof`, `anyof`, `noneof`, `size` and `empty`, as in
//! `$[?(@.personal_code in ["7007496", "4927250"])]` or `$[?(@.tags size 2)]`. Each
//! becomes a call to a function extension registered by [`functions`] (which says
//! how Jayway evaluates them), with the operator's name, each side as a query or as
//! the JSON text of a literal (Jayway's permissive literals, `['S', M]`, read here),
//! and whether Jayway reads a query as one value or as a list.
//!
//! **The regex operator**: [`rewrite_regex_operator`] turns `LEFT =~ /RE/FLAGS`
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
//! Quoted names and string literals are copied untouched, so `'a =~ /b/'` or
//! `'x in y'` in a string stays a string. The regexes are returned too, so a caller
//! can check each with the engine that will run it (the `regex` crate, without
//! look-around or back-references) and refuse a path whose regex would silently
//! never match.
//!
//! It builds for the host and for `wasm32-wasip2` alike; the function extensions are
//! registered when the crate is linked (`serde_json_path`'s registry), so a program
//! that calls [`rewrite`] can parse what it returns.
//! May depend on: `serde_json`, `serde_json_path` (and its macros). Nothing of decoy's.

pub mod functions;

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

/// Every Jayway operator rewritten: the word operators, then `=~` (see the module
/// documentation). A path with neither is returned as it is.
pub fn rewrite(expr: &str) -> Result<Rewritten, Error> {
    let words = rewrite_word_operators(expr)?;
    rewrite_regex_operator(&words)
}

/// Jayway's word operators, lower case, as the functions receive them.
const WORD_OPERATORS: [&str; 7] = ["in", "nin", "subsetof", "anyof", "noneof", "size", "empty"];

/// Rewrites every word operator of a Jayway path into a function call (see
/// [`functions`]). A path without one is returned as it is.
pub fn rewrite_word_operators(expr: &str) -> Result<String, Error> {
    if !expr.contains(char::is_whitespace) {
        return Ok(expr.to_owned());
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + 32);
    let mut start = 0usize;
    let mut levels: Vec<usize> = Vec::new();
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
            '/' => {
                // A regex literal (of `=~`): copied as it is, flags included.
                let end = regex_end(&chars, i);
                out.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '(' | '[' => {
                out.push(c);
                levels.push(start);
                start = out.len();
            }
            ')' | ']' => {
                out.push(c);
                start = levels.pop().unwrap_or(0);
            }
            '?' | '!' | '=' | '<' | '>' | '~' | '&' | '|' | ',' => {
                out.push(c);
                start = out.len();
            }
            c if c.is_whitespace() => {
                if let Some((op, after)) = word_operator(&chars, i)
                    && !out[start..].trim().is_empty()
                {
                    let left = out[start..].trim().to_owned();
                    let lead = out[start..].len() - out[start..].trim_start().len();
                    let (right, next) = right_operand(&chars, after, expr, op)?;
                    let call = operator_call(op, &left, &right, expr)?;
                    out.truncate(start + lead);
                    out.push_str(&call);
                    i = next;
                    continue;
                }
                out.push(c);
            }
            c => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

/// The word operator that the whitespace at `at` begins (`" in "`), with the index
/// after the whitespace that follows it.
fn word_operator(chars: &[char], at: usize) -> Option<(&'static str, usize)> {
    let mut i = at;
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    let begin = i;
    while chars.get(i).is_some_and(|c| c.is_ascii_alphabetic()) {
        i += 1;
    }
    if i == begin || !chars.get(i).is_some_and(|c| c.is_whitespace()) {
        return None;
    }
    let word: String = chars[begin..i]
        .iter()
        .collect::<String>()
        .to_ascii_lowercase();
    let op = WORD_OPERATORS.into_iter().find(|o| *o == word)?;
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    Some((op, i))
}

/// One side of a word operator: a query (its text) or a literal (its JSON value).
enum Operand {
    Query(String),
    Literal(serde_json::Value),
}

/// Reads the right side starting at `at`: a JSON literal (`[...]`, `{...}`), a
/// string, a query, or a bare literal (`3`, `true`); returns it and the index after.
fn right_operand(
    chars: &[char],
    at: usize,
    expr: &str,
    op: &str,
) -> Result<(Operand, usize), Error> {
    let missing = || Error(format!("`{op}` has nothing on its right in {expr:?}"));
    let first = *chars.get(at).ok_or_else(missing)?;
    let mut i = at;
    match first {
        '[' | '{' => {
            let mut depth = 0usize;
            while i < chars.len() {
                match chars[i] {
                    '\'' | '"' => {
                        i = string_end(chars, i);
                        continue;
                    }
                    '[' | '{' => depth += 1,
                    ']' | '}' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            if depth != 0 {
                return Err(Error(format!(
                    "the list on the right of `{op}` is not closed in {expr:?}"
                )));
            }
        }
        '\'' | '"' => i = string_end(chars, i),
        '@' | '$' => {
            let mut depth = 0usize;
            while i < chars.len() {
                match chars[i] {
                    '\'' | '"' => {
                        i = string_end(chars, i);
                        continue;
                    }
                    '[' | '(' => depth += 1,
                    ']' | ')' if depth == 0 => break,
                    ']' | ')' => depth -= 1,
                    c if depth == 0 && (c.is_whitespace() || "&|,".contains(c)) => break,
                    _ => {}
                }
                i += 1;
            }
            let text: String = chars[at..i].iter().collect();
            return Ok((Operand::Query(text), i));
        }
        ')' | ']' | '&' | '|' => return Err(missing()),
        _ => {
            while i < chars.len() && !chars[i].is_whitespace() && !")]&|,".contains(chars[i]) {
                i += 1;
            }
        }
    }
    let text: String = chars[at..i].iter().collect();
    let value = permissive(&text).map_err(|e| {
        Error(format!(
            "the right side of `{op}` ({text}) is not a JSON literal: {e}, in {expr:?}"
        ))
    })?;
    Ok((Operand::Literal(value), i))
}

/// The function call for `left op right`.
fn operator_call(op: &str, left: &str, right: &Operand, expr: &str) -> Result<String, Error> {
    let op_lit = string_literal(op);
    let literal = |v: &serde_json::Value| string_literal(&v.to_string());
    let left = if left.starts_with(['@', '$']) {
        Operand::Query(left.to_owned())
    } else if !left.starts_with(['\'', '"']) && left.contains(['@', '$', '(']) {
        // A function of a path (`length(@.a)`): Jayway's word operators take a path
        // or a literal on their left, and the loose reading below would take this
        // text for an unquoted string.
        return Err(Error(format!(
            "the left side of `{op}` ({left}) must be a path (@... or $...) or a literal, in {expr:?}"
        )));
    } else {
        Operand::Literal(permissive(left).map_err(|e| {
            Error(format!(
                "the left side of `{op}` ({left}) must be a path (@... or $...) or a literal: {e}, in {expr:?}"
            ))
        })?)
    };
    Ok(match (&left, right) {
        (Operand::Query(l), Operand::Query(r)) => format!(
            "jayway_qq({op_lit}, {l}, {}, {r}, {})",
            definite(l),
            definite(r)
        ),
        (Operand::Query(l), Operand::Literal(r)) => {
            format!("jayway_ql({op_lit}, {l}, {}, {})", definite(l), literal(r))
        }
        (Operand::Literal(l), Operand::Query(r)) => {
            format!("jayway_lq({op_lit}, {}, {r}, {})", literal(l), definite(r))
        }
        (Operand::Literal(l), Operand::Literal(r)) => {
            format!("jayway_ll({op_lit}, {}, {})", literal(l), literal(r))
        }
    })
}

/// Whether Jayway reads a path as definite (one value): no `..`, no `*`, no filter,
/// and no bracket with several names, indexes or a slice.
fn definite(path: &str) -> bool {
    if path.contains("..") || path.contains('*') {
        return false;
    }
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    let mut depth = 0usize;
    while i < chars.len() {
        match chars[i] {
            '\'' | '"' => {
                i = string_end(&chars, i);
                continue;
            }
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '?' | ',' | ':' if depth > 0 => return false,
            _ => {}
        }
        i += 1;
    }
    true
}

/// A literal as Jayway's permissive JSON reader (json-smart) takes it: strict JSON,
/// and also strings in single quotes, bare words as strings, trailing commas.
fn permissive(text: &str) -> Result<serde_json::Value, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let v = permissive_value(&chars, &mut i)?;
    skip_ws(&chars, &mut i);
    if i < chars.len() {
        return Err(format!(
            "unexpected {:?}",
            chars[i..].iter().collect::<String>()
        ));
    }
    Ok(v)
}

fn skip_ws(chars: &[char], i: &mut usize) {
    while chars.get(*i).is_some_and(|c| c.is_whitespace()) {
        *i += 1;
    }
}

fn permissive_value(chars: &[char], i: &mut usize) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    skip_ws(chars, i);
    match chars.get(*i) {
        None => Err("a value is missing".into()),
        Some('[') => {
            *i += 1;
            let mut items = Vec::new();
            loop {
                skip_ws(chars, i);
                match chars.get(*i) {
                    Some(']') => {
                        *i += 1;
                        return Ok(Value::Array(items));
                    }
                    None => return Err("a list is not closed".into()),
                    _ => {}
                }
                items.push(permissive_value(chars, i)?);
                skip_ws(chars, i);
                match chars.get(*i) {
                    Some(',') => *i += 1,
                    Some(']') => {}
                    _ => return Err("expected , or ] in a list".into()),
                }
            }
        }
        Some('{') => {
            *i += 1;
            let mut map = serde_json::Map::new();
            loop {
                skip_ws(chars, i);
                match chars.get(*i) {
                    Some('}') => {
                        *i += 1;
                        return Ok(Value::Object(map));
                    }
                    None => return Err("an object is not closed".into()),
                    _ => {}
                }
                let key = match permissive_value(chars, i)? {
                    Value::String(k) => k,
                    other => other.to_string(),
                };
                skip_ws(chars, i);
                if chars.get(*i) != Some(&':') {
                    return Err("expected : in an object".into());
                }
                *i += 1;
                let v = permissive_value(chars, i)?;
                map.insert(key, v);
                skip_ws(chars, i);
                match chars.get(*i) {
                    Some(',') => *i += 1,
                    Some('}') => {}
                    _ => return Err("expected , or } in an object".into()),
                }
            }
        }
        Some(&q) if q == '\'' || q == '"' => {
            let end = string_end(chars, *i);
            if end > chars.len() || chars.get(end - 1) != Some(&q) || end - *i < 2 {
                return Err("a string is not closed".into());
            }
            let body: String = chars[*i + 1..end - 1].iter().collect();
            *i = end;
            Ok(Value::String(unescape_literal(&body)))
        }
        Some(_) => {
            let begin = *i;
            while chars
                .get(*i)
                .is_some_and(|c| !",:]}".contains(*c) && !c.is_whitespace())
            {
                *i += 1;
            }
            let word: String = chars[begin..*i].iter().collect();
            Ok(match word.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "null" => Value::Null,
                w => match serde_json::from_str::<serde_json::Number>(w) {
                    Ok(n) => Value::Number(n),
                    Err(_) => match w.parse::<f64>() {
                        Ok(f)
                            if w.bytes()
                                .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
                        {
                            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
                        }
                        _ => Value::String(w.to_owned()),
                    },
                },
            })
        }
    }
}

/// The escapes of a string literal, as Jayway's `Utils.unescape`: `\\`, `\'`, `\"`, `\n`,
/// `\t`, `\r`, `\b`, `\f`, `\/` and `\uXXXX`; any other escaped character stands for itself.
pub(crate) fn unescape_literal(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(u) => out.push(u),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The index after the regex literal opening at `at` (its flags included; the end of
/// the text when it is not closed).
fn regex_end(chars: &[char], at: usize) -> usize {
    let mut i = at + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '/' => {
                i += 1;
                while chars.get(i).is_some_and(|c| c.is_ascii_alphabetic()) {
                    i += 1;
                }
                return i;
            }
            _ => i += 1,
        }
    }
    chars.len()
}

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
    fn word_operators_become_calls_with_each_side_as_query_or_json() {
        assert_eq!(
            rewrite_word_operators(r#"$.personal_code[?(@ in ["7007496", "4927250"])]"#).unwrap(),
            r#"$.personal_code[?(jayway_ql('in', @, true, '["7007496","4927250"]'))]"#
        );
        assert_eq!(
            rewrite_word_operators("$[?(@.size IN ['S', M] && @.tags[*] subsetof @.allowed)]")
                .unwrap(),
            r#"$[?(jayway_ql('in', @.size, true, '["S","M"]') && jayway_qq('subsetof', @.tags[*], false, @.allowed, true))]"#
        );
        assert_eq!(
            rewrite_word_operators("$[?('x' in @.l)]").unwrap(),
            r#"$[?(jayway_lq('in', '"x"', @.l, true))]"#
        );
        assert_eq!(
            rewrite_word_operators("$[?(@.a size 2 || @.b empty false)]").unwrap(),
            "$[?(jayway_ql('size', @.a, true, '2') || jayway_ql('empty', @.b, true, 'false'))]"
        );
        // Names, strings and regexes that hold an operator word are left alone.
        for untouched in [
            "$.in",
            "$['a in b']",
            "$[?(@.a == 'x in y')]",
            "$[?(@.a =~ /x in y/)]",
        ] {
            assert_eq!(rewrite_word_operators(untouched).unwrap(), untouched);
        }
        let both = rewrite("$[?(@.a in ['x'] && @.b =~ /y.*/)]").unwrap();
        assert_eq!(both.regexes, vec!["y.*".to_owned()]);
        assert!(
            both.expression
                .starts_with("$[?(jayway_ql('in', @.a, true, '[\"x\"]') && (match(@.b"),
            "{}",
            both.expression
        );
    }

    #[test]
    fn word_operators_with_a_missing_or_unreadable_side_are_refused() {
        let e = rewrite_word_operators("$[?(@.a in )]").unwrap_err();
        assert!(e.0.contains("nothing on its right"), "{e}");
        let e = rewrite_word_operators("$[?(@.a in ['x')]").unwrap_err();
        assert!(e.0.contains("not a JSON literal"), "{e}");
        let e = rewrite_word_operators("$[?(length(@.a) in [1])]").unwrap_err();
        assert!(e.0.contains("must be a path"), "{e}");
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
