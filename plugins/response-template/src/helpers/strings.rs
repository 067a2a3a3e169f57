//! The string helpers: Handlebars.java's StringHelpers (`upper`, `lower`,
//! `capitalize`, `center`, `ljust`, `rjust`, `cut`, `slugify`, `stringFormat`,
//! `stripTags`, `abbreviate`, `wordWrap`, `yesno`...) and WireMock's (`trim`,
//! `substring`, `replace`, `base64`, `urlEncode`, `matches`, `regexExtract`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::print::to_text;
use super::{arg, error, int, number, opt_text, set_var, text, truthy};

/// A Handlebars.java string helper: null renders nothing.
fn string_helper(p: &[Value], f: impl Fn(&str) -> String) -> Result<Value, String> {
    match p.first() {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(v) => Ok(Value::String(f(&to_text(v)))),
    }
}

pub(super) fn upper(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| s.to_uppercase())
}

pub(super) fn lower(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| s.to_lowercase())
}

pub(super) fn capitalize(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let fully = truthy(h.get("fully"));
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start {
            out.extend(c.to_uppercase());
        } else if fully {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace();
    }
    Ok(Value::String(out))
}

pub(super) fn capitalize_first(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    })
}

fn pad_char(h: &Map<String, Value>) -> String {
    opt_text(h, "pad").unwrap_or_else(|| " ".into())
}

fn size_opt(p: &[Value], h: &Map<String, Value>) -> Result<usize, String> {
    let v = h.get("size").or_else(|| p.get(1));
    Ok(v.map(int).transpose()?.unwrap_or(0).max(0) as usize)
}

fn repeat_pad(pad: &str, n: usize) -> String {
    pad.chars().cycle().take(n).collect()
}

pub(super) fn center(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        if size <= len || pad.is_empty() {
            return s.to_owned();
        }
        let left = (size - len) / 2;
        format!(
            "{}{s}{}",
            repeat_pad(&pad, left),
            repeat_pad(&pad, size - len - left)
        )
    })
}

pub(super) fn ljust(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        format!("{s}{}", repeat_pad(&pad, size.saturating_sub(len)))
    })
}

pub(super) fn rjust(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let size = size_opt(p, h)?;
    let pad = pad_char(h);
    string_helper(p, |s| {
        let len = s.chars().count();
        format!("{}{s}", repeat_pad(&pad, size.saturating_sub(len)))
    })
}

pub(super) fn cut(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let what = p.get(1).map_or_else(|| " ".to_owned(), to_text);
    string_helper(p, |s| s.replace(&what, ""))
}

pub(super) fn default_if_empty(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let empty = match p.first() {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Bool(b)) => !b,
        _ => false,
    };
    Ok(if empty {
        p.get(1).cloned().unwrap_or(Value::Null)
    } else {
        p[0].clone()
    })
}

pub(super) fn slugify(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    string_helper(p, |s| {
        s.trim()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '_' || c.is_whitespace() || *c == '-')
            .collect::<String>()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_whitespace() { '-' } else { c })
            .collect()
    })
}

/// Java's `String.format`, for `%s`, `%d`, `%f`, `%x`, `%%` and `%n` with flags,
/// width and precision.
pub(super) fn string_format(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let fmt = text(p, 0)?;
    let mut args = p[1..].iter();
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        let conv = loop {
            match chars.next() {
                Some(c) if c.is_ascii_alphabetic() || c == '%' => break c,
                Some(c) => spec.push(c),
                None => return Err(format!("bad format {fmt:?}")),
            }
        };
        let left = spec.contains('-');
        let zero = spec.trim_start_matches('-').starts_with('0');
        let (width, precision) = match spec
            .trim_start_matches(['-', '0', '+', ','])
            .split_once('.')
        {
            Some((w, pr)) => (w.parse::<usize>().ok(), pr.parse::<usize>().ok()),
            None => (
                spec.trim_start_matches(['-', '0', '+', ','])
                    .parse::<usize>()
                    .ok(),
                None,
            ),
        };
        let body = match conv {
            '%' => "%".to_owned(),
            'n' => "\n".to_owned(),
            's' | 'S' => {
                let v = args.next().map(to_text).unwrap_or_else(|| "null".into());
                let v = match precision {
                    Some(pr) => v.chars().take(pr).collect(),
                    None => v,
                };
                if conv == 'S' { v.to_uppercase() } else { v }
            }
            'd' => int(args.next().ok_or("missing argument")?)?.to_string(),
            'x' | 'X' => {
                let s = format!("{:x}", int(args.next().ok_or("missing argument")?)?);
                if conv == 'X' { s.to_uppercase() } else { s }
            }
            'f' => format!(
                "{:.*}",
                precision.unwrap_or(6),
                number(args.next().ok_or("missing argument")?)?
            ),
            other => return Err(format!("unsupported conversion %{other}")),
        };
        let width = width.unwrap_or(0);
        let len = body.chars().count();
        if len >= width {
            out.push_str(&body);
        } else if left {
            out.push_str(&body);
            out.push_str(&" ".repeat(width - len));
        } else if zero {
            let (sign, digits) = body
                .strip_prefix('-')
                .map_or(("", body.as_str()), |d| ("-", d));
            out.push_str(sign);
            out.push_str(&"0".repeat(width - len));
            out.push_str(digits);
        } else {
            out.push_str(&" ".repeat(width - len));
            out.push_str(&body);
        }
    }
    Ok(Value::String(out))
}

pub(super) fn strip_tags(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let re = regex_for(r"<[^>]*>")?;
    string_helper(p, |s| re.replace_all(s, "").into_owned())
}

/// Apache Commons' `StringUtils.abbreviate(value, width)`.
pub(super) fn abbreviate(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let width = int(arg(p, 1)?)?;
    if width < 4 {
        return Err("Minimum abbreviation width is 4".into());
    }
    let width = width as usize;
    string_helper(p, |s| {
        if s.chars().count() <= width {
            s.to_owned()
        } else {
            format!("{}...", s.chars().take(width - 3).collect::<String>())
        }
    })
}

/// Apache Commons' `WordUtils.wrap(value, width)`.
pub(super) fn word_wrap(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let width = int(arg(p, 1)?)?.max(1) as usize;
    string_helper(p, |s| {
        let mut lines = Vec::new();
        let mut line = String::new();
        for word in s.split(' ').filter(|w| !w.is_empty()) {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
        lines.join("\n")
    })
}

pub(super) fn yes_no(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let pick = |k: &str, d: &str| opt_text(h, k).unwrap_or_else(|| d.to_owned());
    Ok(Value::String(match p.first() {
        Some(Value::Bool(true)) => pick("yes", "yes"),
        Some(Value::Bool(false)) => pick("no", "no"),
        _ => pick("maybe", "maybe"),
    }))
}

pub(super) fn trim(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    Ok(Value::String(text(p, 0)?.trim().to_owned()))
}

pub(super) fn substring(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let s: Vec<char> = text(p, 0)?.chars().collect();
    let start = int(arg(p, 1)?)?.clamp(0, s.len() as i64) as usize;
    let end = match p.get(2) {
        Some(e) => int(e)?.clamp(start as i64, s.len() as i64) as usize,
        None => s.len(),
    };
    Ok(Value::String(s[start..end].iter().collect()))
}

pub(super) fn replace(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    let (from, to) = (text(p, 1)?, text(p, 2)?);
    string_helper(p, |s| s.replace(&from, &to))
}

pub(super) fn base64_helper(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    use base64::Engine as _;
    let s = text(p, 0)?;
    if truthy(h.get("decode")) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(s.trim()))
            .map_err(|e| format!("not base64: {e}"))?;
        Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    } else if h.get("padding").is_some_and(|v| !truthy(Some(v))) {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(s.as_bytes()),
        ))
    } else {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(s.as_bytes()),
        ))
    }
}

pub(super) fn url_encode(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    if truthy(h.get("decode")) {
        let plus = s.replace('+', " ");
        Ok(Value::String(
            percent_encoding::percent_decode_str(&plus)
                .decode_utf8_lossy()
                .into_owned(),
        ))
    } else {
        // As Java's URLEncoder: space → '+', unreserved kept, the rest %XX.
        const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'*')
            .remove(b' ');
        Ok(Value::String(
            percent_encoding::utf8_percent_encode(&s, SET)
                .to_string()
                .replace(' ', "+"),
        ))
    }
}

pub(super) fn regex_matches(p: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
    if p.len() < 2 {
        return error("You must specify the string to be matched and the regular expression");
    }
    let s = to_text(&p[0]);
    let re = regex_for(&format!("^(?:{})$", text(p, 1)?))?;
    Ok(Value::Bool(re.is_match(&s)))
}

pub(super) fn regex_extract(p: &[Value], h: &Map<String, Value>) -> Result<Value, String> {
    let s = text(p, 0)?;
    let pattern = text(p, 1)?;
    let Ok(re) = regex_for(&pattern) else {
        return error(format!("Invalid regex string {pattern}"));
    };
    let Some(name) = p.get(2) else {
        return match re.find(&s) {
            Some(m) => Ok(Value::String(m.as_str().to_owned())),
            None => h
                .get("default")
                .cloned()
                .map_or_else(|| error(format!("Nothing matched {pattern}")), Ok),
        };
    };
    let groups: Vec<Value> = re
        .captures_iter(&s)
        .flat_map(|c| {
            c.iter()
                .skip(1)
                .map(|m| m.map_or(Value::Null, |m| Value::String(m.as_str().to_owned())))
                .collect::<Vec<_>>()
        })
        .collect();
    if groups.is_empty() {
        return h
            .get("default")
            .cloned()
            .map_or_else(|| error(format!("Nothing matched {pattern}")), Ok);
    }
    set_var(&to_text(name), Value::Array(groups), true);
    Ok(Value::Null)
}

fn regex_for(pattern: &str) -> Result<regex::Regex, String> {
    thread_local! {
        static CACHE: std::cell::RefCell<BTreeMap<String, regex::Regex>> = const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    CACHE.with(|c| {
        if let Some(r) = c.borrow().get(pattern) {
            return Ok(r.clone());
        }
        let r = regex::Regex::new(pattern).map_err(|e| format!("bad regex {pattern:?}: {e}"))?;
        let mut c = c.borrow_mut();
        if c.len() > 1000 {
            c.clear();
        }
        c.insert(pattern.to_owned(), r.clone());
        Ok(r)
    })
}
