//! `multipart/*` bodies (RFC 2046) split into parts: the one parser decoy has.
//!
//! Two rooms need it: the request snapshot (`decoy-spec`), whose parts
//! `multipartPatterns` match, and the `response-template` plugin, whose model has
//! WireMock's `request.parts`. The plugin is a WebAssembly guest built on its own, so
//! the parser lives here, below both, with no dependencies: it works on bytes and
//! gives header names as they were sent (the snapshot turns them into an HTTP header
//! map; WireMock's template model keeps their case).
//!
//! It is lenient, as a mock must be with what clients send: a part without headers
//! or without the blank line after them is still a part, text before the first
//! delimiter is skipped, a missing closing delimiter ends the parts read so far. It
//! never panics.
//!
//! It has no dependencies, so it builds for the host and for `wasm32-wasip2` alike.
//! May depend on: nothing.

/// One part of a multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    /// Header names as sent and values trimmed, in order; a line without `:` is
    /// left out.
    pub headers: Vec<(String, String)>,
    pub body: &'a [u8],
}

impl Part<'_> {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The field of a form this part holds (RFC 7578): the `name` parameter of a
    /// `form-data` `Content-Disposition` (`form-data; name="file"`). Another
    /// disposition (`attachment; name="x"`) names no field, as commons-fileupload,
    /// which WireMock uses, reads it.
    pub fn name(&self) -> Option<String> {
        let disposition = self.header("content-disposition")?;
        let kind = disposition.split(';').next().unwrap_or_default().trim();
        if !kind.eq_ignore_ascii_case("form-data") {
            return None;
        }
        disposition_parameter(disposition, "name")
    }
}

/// The boundary of a `multipart/*` content type; `None` for any other type, or one
/// without a boundary.
pub fn boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let mime = params.next()?.trim();
    if !mime
        .get(..10)
        .is_some_and(|m| m.eq_ignore_ascii_case("multipart/"))
    {
        return None;
    }
    params.find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// The parts of `body`, delimited by `--boundary` lines.
pub fn parse<'a>(body: &'a [u8], boundary: &str) -> Vec<Part<'a>> {
    let delimiter = format!("--{boundary}");
    let delim = delimiter.as_bytes();
    let mut parts = Vec::new();
    let mut rest = match find(body, delim) {
        Some(i) => &body[i + delim.len()..],
        None => return parts,
    };
    loop {
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        let Some(end) = find(rest, delim) else { break };
        let mut chunk = &rest[..end];
        chunk = chunk.strip_suffix(b"\r\n").unwrap_or(chunk);
        let (head, content) = match find(chunk, b"\r\n\r\n") {
            Some(i) => (&chunk[..i], &chunk[i + 4..]),
            None if chunk.starts_with(b"\r\n") => (&chunk[..0], &chunk[2..]),
            None => (chunk, &chunk[chunk.len()..]),
        };
        let headers = String::from_utf8_lossy(head)
            .split("\r\n")
            .filter_map(|line| {
                let (k, v) = line.split_once(':')?;
                Some((k.trim().to_owned(), v.trim().to_owned()))
            })
            .collect();
        parts.push(Part {
            headers,
            body: content,
        });
        rest = &rest[end + delim.len()..];
    }
    parts
}

/// Parameter `key` (any case) of a header value such as `form-data; name="a";
/// filename="b.txt"`: a quoted value is unquoted (`\"` and `\\` escapes too), so a
/// `;` inside quotes does not end it.
pub fn disposition_parameter(value: &str, key: &str) -> Option<String> {
    let mut chars = value.chars().peekable();
    // Skip the disposition type.
    for c in chars.by_ref() {
        if c == ';' {
            break;
        }
    }
    while chars.peek().is_some() {
        let mut name = String::new();
        let mut has_value = false;
        for c in chars.by_ref() {
            match c {
                '=' => {
                    has_value = true;
                    break;
                }
                ';' => break,
                c => name.push(c),
            }
        }
        if !has_value {
            continue;
        }
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut v = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => v.extend(chars.next()),
                    c => v.push(c),
                }
            }
            for c in chars.by_ref() {
                if c == ';' {
                    break;
                }
            }
        } else {
            for c in chars.by_ref() {
                if c == ';' {
                    break;
                }
                v.push(c);
            }
            v = v.trim().to_owned();
        }
        if name.trim().eq_ignore_ascii_case(key) {
            return Some(v);
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"info\"\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n--XyZ\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a;b.txt\"\r\n\r\nhello\r\nworld\r\n--XyZ--\r\n";

    #[test]
    fn splits_parts_keeping_header_names_as_sent() {
        let parts = parse(BODY.as_bytes(), "XyZ");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0].headers,
            [
                (
                    "Content-Disposition".to_owned(),
                    "form-data; name=\"info\"".to_owned()
                ),
                ("Content-Type".to_owned(), "application/json".to_owned()),
            ]
        );
        assert_eq!(parts[0].body, b"{\"a\":1}");
        assert_eq!(parts[0].name().as_deref(), Some("info"));
        assert_eq!(parts[1].header("Content-Disposition").map(|_| ()), Some(()));
        assert_eq!(parts[1].name().as_deref(), Some("file"));
        assert_eq!(parts[1].body, b"hello\r\nworld");
        let attachment = Part {
            headers: vec![(
                "Content-Disposition".into(),
                "attachment; name=\"doc\"".into(),
            )],
            body: b"",
        };
        assert_eq!(attachment.name(), None);
    }

    #[test]
    fn finds_the_boundary_of_multipart_types_only() {
        assert_eq!(
            boundary("multipart/form-data; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(
            boundary("Multipart/Mixed;charset=x; BOUNDARY=q").as_deref(),
            Some("q")
        );
        assert_eq!(boundary("application/json; boundary=q"), None);
        assert_eq!(boundary("multipart/form-data"), None);
        assert_eq!(boundary(""), None);
    }

    #[test]
    fn reads_disposition_parameters_quoted_or_not() {
        let v = r#"form-data; filename="x\"y;z.txt"; NAME = plain ; other="1""#;
        assert_eq!(disposition_parameter(v, "name").as_deref(), Some("plain"));
        assert_eq!(
            disposition_parameter(v, "filename").as_deref(),
            Some("x\"y;z.txt")
        );
        assert_eq!(disposition_parameter(v, "other").as_deref(), Some("1"));
        assert_eq!(disposition_parameter(v, "missing"), None);
        assert_eq!(disposition_parameter("form-data", "name"), None);
        assert_eq!(
            disposition_parameter("form-data; name=\"unterminated", "name").as_deref(),
            Some("unterminated")
        );
    }

    #[test]
    fn survives_garbage() {
        for body in [
            "",
            "--b",
            "--b\r\n",
            "--b\r\nno-end",
            "--b--",
            "x--b\r\n\r\n--b",
            "--b\r\n\r\n--b\r\nheader-only\r\n--b",
        ] {
            let _ = parse(body.as_bytes(), "b");
        }
        for v in ["", ";", "a;=", "a; name", "a; name=\"", "a; =\"x\"; name=1"] {
            let _ = disposition_parameter(v, "name");
        }
        assert_eq!(
            disposition_parameter("a; name; x=1; name=2", "name").as_deref(),
            Some("2")
        );
        assert_eq!(parse(b"--b\r\n\r\nx\r\n--b--", "b")[0].body, b"x");
    }
}
