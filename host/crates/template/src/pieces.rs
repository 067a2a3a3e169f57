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
//! them. A block cannot be cut at its top level, so the inside of each block is
//! set aside and compiled on its own, in pieces likewise (see `Aside`).
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
use handlebars::template::{TemplateElement, TemplateMapping};

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

/// `text` compiled piece by piece, the inside of its blocks apart (see [`Aside`]);
/// `None` when it is short, cannot be cut safely, or a piece fails (compile it
/// whole then).
pub fn compile(text: &str, piece: usize) -> Option<Template> {
    let aside = Aside::of(text, piece)?;
    if aside.parts.is_empty() {
        return compile_cut(text, piece);
    }
    let mut t = compile_cut(&aside.text, piece).or_else(|| Template::compile(&aside.text).ok())?;
    aside.put_back(&mut t)?;
    Some(t)
}

/// `text` compiled piece by piece (see [`cuts`]).
fn compile_cut(text: &str, piece: usize) -> Option<Template> {
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

/// Marks where a part set aside goes (see [`Aside`]); a template holding it is not
/// compiled this way.
const MARK: char = '\u{E000}';

/// A template with the inside of each of its blocks (each branch of it, between
/// `{{#...}}`, `{{else}}` and `{{/...}}`) set aside and compiled on its own, in
/// pieces too, while the template keeps a short mark, `\u{E000}<n>\u{E000}`, in
/// its place. A block is otherwise compiled whole, and the parser's cost grows with
/// its text's length times its tokens: a `{{#each}}` or `{{#if}}` around most of a
/// large body would cost what the whole body did before it was cut. The part set
/// aside starts and ends between two characters a cut may go between (see the
/// module's documentation), so white space control and standalone tags see the
/// same neighbours either way; its elements go where the mark ended up, in a text
/// element of the block, joined to the text on each side.
struct Aside {
    text: String,
    parts: Vec<Template>,
}

impl Aside {
    /// `None` for a form the lexer does not follow, or a part that fails.
    fn of(text: &str, piece: usize) -> Option<Aside> {
        if text.contains("\\{{") || text.contains("{{{{") || text.contains(MARK) {
            return None;
        }
        let b = text.as_bytes();
        let plain = |p: usize| {
            let ok = |c: u8| c.is_ascii_graphic() && !matches!(c, b'{' | b'}' | b'\\' | b'~');
            ok(b[p - 1]) && ok(b[p])
        };
        let mut out = String::new();
        let mut parts = Vec::new();
        // `text[..done]` is in `out`.
        let mut done = 0;
        // In a branch of a block at the top level: where the branch's text first
        // and last allows a cut.
        let mut branch: (Option<usize>, Option<usize>) = (None, None);
        let mut depth = 0usize;
        let mut i = 0;
        loop {
            let tag = text[i..].find("{{").map_or(text.len(), |t| i + t);
            if depth == 1 && tag > i + 1 {
                if branch.0.is_none() {
                    branch.0 = (i + 1..tag).find(|&p| plain(p));
                }
                if let Some(last) = (i + 1..tag).rev().find(|&p| plain(p)) {
                    branch.1 = Some(last);
                }
            }
            if tag == text.len() {
                break;
            }
            let (end, step) = tag_end(text, tag)?;
            let ends_branch = match step {
                Step::Close => depth == 1,
                Step::Same => depth == 1 && is_inverse(&text[tag..end]),
                Step::Open => false,
            };
            if ends_branch {
                if let (Some(from), Some(to)) = branch
                    && to > from + PLAIN_RUN
                {
                    let part = &text[from..to];
                    parts.push(compile(part, piece).or_else(|| Template::compile(part).ok())?);
                    out.push_str(&text[done..from]);
                    out.push(MARK);
                    out.push_str(&(parts.len() - 1).to_string());
                    out.push(MARK);
                    done = to;
                }
                branch = (None, None);
            }
            depth = match step {
                Step::Open => depth + 1,
                Step::Close => depth.checked_sub(1)?,
                Step::Same => depth,
            };
            i = end;
        }
        out.push_str(&text[done..]);
        Some(Aside { text: out, parts })
    }

    /// Puts the parts where their marks are in `t`; `None` unless each mark is
    /// found once, in text.
    fn put_back(self, t: &mut Template) -> Option<()> {
        let mut parts: Vec<Option<Template>> = self.parts.into_iter().map(Some).collect();
        put_back(t, &mut parts)?;
        parts.iter().all(Option::is_none).then_some(())
    }
}

/// Whether a tag (`{{...}}`) is `{{else}}`, `{{else if ...}}` or `{{^}}`, which end a
/// branch of their block. (A name that starts with `else` is taken for one too: it
/// only makes one more branch.)
fn is_inverse(tag: &str) -> bool {
    let inner = tag[2..].trim_start().trim_start_matches('~').trim_start();
    inner.starts_with("else") || inner.starts_with('^')
}

fn put_back(t: &mut Template, parts: &mut [Option<Template>]) -> Option<()> {
    let elements = std::mem::take(&mut t.elements);
    let mut mapping = std::mem::take(&mut t.mapping).into_iter();
    for mut e in elements {
        let at = mapping.next();
        match &mut e {
            TemplateElement::RawString(s) if s.contains(MARK) => {
                let mut pieces = s.split(MARK);
                push_text(t, pieces.next()?, at.clone());
                while let Some(n) = pieces.next() {
                    let part = parts.get_mut(n.parse::<usize>().ok()?)?.take()?;
                    splice(t, part);
                    push_text(t, pieces.next()?, at.clone());
                }
                continue;
            }
            TemplateElement::HelperBlock(ht) => {
                for t in [&mut ht.template, &mut ht.inverse].into_iter().flatten() {
                    put_back(t, parts)?;
                }
            }
            TemplateElement::DecoratorBlock(dt) | TemplateElement::PartialBlock(dt) => {
                if let Some(t) = &mut dt.template {
                    put_back(t, parts)?;
                }
            }
            // No template of its own (a kind added later that held one would leave
            // its marks unfound: the template is then compiled whole).
            _ => {}
        }
        t.elements.push(e);
        t.mapping.extend(at);
    }
    Some(())
}

/// Appends text to `t`, joined to the text it ends with.
fn push_text(t: &mut Template, s: &str, at: Option<TemplateMapping>) {
    if s.is_empty() {
        return;
    }
    match t.elements.last_mut() {
        Some(TemplateElement::RawString(head)) => head.push_str(s),
        _ => {
            t.elements.push(TemplateElement::RawString(s.to_owned()));
            t.mapping.extend(at);
        }
    }
}

/// Appends a part's elements to `t`, joining text at the seams.
fn splice(t: &mut Template, part: Template) {
    let mut mapping = part.mapping.into_iter();
    for e in part.elements {
        let at = mapping.next();
        match e {
            TemplateElement::RawString(s) => push_text(t, &s, at),
            e => {
                t.elements.push(e);
                t.mapping.extend(at);
            }
        }
    }
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
