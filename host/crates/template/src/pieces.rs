//! Compiling a large template in pieces, so that its size costs linear time.
//!
//! The handlebars crate asks its parser (pest) for the line and column of every
//! token it reads, and pest counts them from the start of the text each time: a
//! template's compile time grows with its length times its number of tokens. A
//! 250 KB JSON body with 540 `{{...}}` took over 100 ms to compile in the plugin,
//! more than a call's deadline. Cut into pieces of a few kilobytes, each piece
//! costs its own length times its own tokens, and the whole stays linear. Long
//! runs of plain text between tags (most of a JSON body) are not given to the
//! parser at all: they become the text they are, which is what it would make of
//! them.
//!
//! A cut is made only where it cannot change what the template means: inside text
//! at the top level (outside every tag, comment and block), between two characters
//! that are neither white space, braces, a backslash nor `~`. There, the text on
//! each side keeps what Handlebars does to it (white space trimmed by `~` or around
//! a standalone tag only reaches the nearest non-space character), and the two
//! text elements are joined again afterwards. A template with a form this lexer
//! does not follow exactly (an escaped `\{{`, a raw block `{{{{`, an object
//! literal or a quote inside `[...]` in a tag, a tag never closed, unbalanced
//! blocks) is compiled whole, as is a piece that fails to compile: the whole text
//! then gives the same template, or the error with its true position. (The
//! positions a compiled template keeps for its elements are counted from the
//! start of their piece; decoy's render errors do not show them.)

use handlebars::Template;
use handlebars::template::TemplateElement;

/// Pieces of at most about this many bytes (the cost of one piece grows with its
/// length times its tokens; the cost of a compilation call is a few microseconds).
pub const PIECE: usize = 2048;

/// Plain text between tags longer than this is taken as it is, without the parser.
const PLAIN_RUN: usize = 16;

/// A cut: where a piece starts, and whether that piece is only plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub at: usize,
    pub text: bool,
}

/// `text` compiled piece by piece, or `None` when it is short, cannot be cut
/// safely, or a piece fails (compile it whole then).
pub fn compile(text: &str, piece: usize) -> Option<Template> {
    let cuts = cuts(text, piece)?;
    let mut out = Template::new();
    let first = Cut { at: 0, text: false };
    let ends = cuts.iter().map(|c| c.at).chain([text.len()]);
    for (cut, end) in [first].into_iter().chain(cuts.iter().copied()).zip(ends) {
        let part = &text[cut.at..end];
        if cut.text {
            // Text between two cuts, with no `{{` in it: the parser would make
            // it one text element, joined to the text the piece before ends with.
            match out.elements.last_mut() {
                Some(TemplateElement::RawString(head)) => head.push_str(part),
                _ => return None,
            }
        } else {
            join(&mut out, Template::compile(part).ok()?);
        }
    }
    Some(out)
}

/// Appends `t`'s elements to `out`, joining the text cut in two at the seam.
fn join(out: &mut Template, t: Template) {
    let mut elements = t.elements.into_iter().peekable();
    let mut mapping = t.mapping.into_iter();
    if let (Some(TemplateElement::RawString(head)), Some(TemplateElement::RawString(_))) =
        (out.elements.last_mut(), elements.peek())
    {
        if let Some(TemplateElement::RawString(tail)) = elements.next() {
            head.push_str(&tail);
        }
        mapping.next();
    }
    out.elements.extend(elements);
    out.mapping.extend(mapping);
}

/// Where `text` may be cut (see the module's documentation): about every `piece`
/// bytes, and around each long run of plain text; `None` when it is not cut.
pub fn cuts(text: &str, piece: usize) -> Option<Vec<Cut>> {
    if text.len() <= PLAIN_RUN || text.contains("\\{{") || text.contains("{{{{") {
        return None;
    }
    let b = text.as_bytes();
    // Whether a cut may go between `p - 1` and `p`.
    let plain = |p: usize| {
        let ok = |c: u8| c.is_ascii_graphic() && !matches!(c, b'{' | b'}' | b'\\' | b'~');
        ok(b[p - 1]) && ok(b[p])
    };
    let mut cuts: Vec<Cut> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    loop {
        let tag = text[i..].find("{{").map_or(text.len(), |t| i + t);
        // Text from `i` to `tag`: cut around a long plain run, and where the piece
        // is long enough.
        if depth == 0 && tag > i + 1 {
            let from = (i + 1..tag).find(|&p| plain(p));
            let to = (i + 1..tag).rev().find(|&p| plain(p));
            if let (Some(from), Some(to)) = (from, to)
                && to - from > PLAIN_RUN
            {
                // `from` is past every earlier cut: those were before this text.
                cuts.push(Cut {
                    at: from,
                    text: true,
                });
                cuts.push(Cut {
                    at: to,
                    text: false,
                });
            } else {
                let last = cuts.last().map_or(0, |c| c.at);
                let mut p = (last + piece).max(i + 1);
                while p < tag {
                    if plain(p) {
                        cuts.push(Cut { at: p, text: false });
                        p += piece;
                    } else {
                        p += 1;
                    }
                }
            }
        }
        if tag == text.len() {
            break;
        }
        let (end, step) = tag_end(text, tag)?;
        depth = match step {
            Step::Open => depth + 1,
            Step::Close => depth.checked_sub(1)?,
            Step::Same => depth,
        };
        i = end;
    }
    (depth == 0 && !cuts.is_empty()).then_some(cuts)
}

/// What a tag does to the depth of blocks.
enum Step {
    Open,
    Close,
    Same,
}

/// Where the tag starting at `start` (at `{{`) ends, and what it is; `None` for a
/// form this lexer does not follow.
fn tag_end(text: &str, start: usize) -> Option<(usize, Step)> {
    let b = text.as_bytes();
    if text[start..].starts_with("{{!--") {
        // A long comment ends at `--}}`; without one it is a short comment.
        if let Some(e) = text[start + 5..].find("--}}") {
            return Some((start + 5 + e + 4, Step::Same));
        }
    }
    if text[start..].starts_with("{{!") {
        let e = text[start + 3..].find("}}")?;
        return Some((start + 3 + e + 2, Step::Same));
    }
    // Handlebars allows white space between `{{`, `~` and what the tag is.
    let mut j = start + 2;
    let skip_space = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_whitespace) {
            j += 1;
        }
        j
    };
    j = skip_space(j);
    if b.get(j) == Some(&b'~') {
        j = skip_space(j + 1);
    }
    let (step, triple) = match b.get(j) {
        Some(b'#') => (Step::Open, false),
        Some(b'/') => (Step::Close, false),
        Some(b'{') => (Step::Same, true),
        _ => (Step::Same, false),
    };
    if triple {
        j += 1;
    }
    while j < b.len() {
        match b[j] {
            q @ (b'"' | b'\'') => {
                j += 1;
                while j < b.len() && b[j] != q {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                j += 1;
            }
            b'[' => {
                let e = text[j..].find(']')?;
                if text[j..j + e].contains(['"', '\'']) {
                    return None;
                }
                j += e + 1;
            }
            b'{' => return None,
            b'}' if b.get(j + 1) == Some(&b'}') => {
                let mut end = j + 2;
                if triple && b.get(end) == Some(&b'}') {
                    end += 1;
                }
                return Some((end, step));
            }
            _ => j += 1,
        }
    }
    None
}
