//! Reading a root directory: every `*.json` under `mappings/`, bodies from `__files/`.
//!
//! Loading never stops at a bad file: each file is read on its own, valid stubs are kept
//! and every problem is reported with the file, the stub (position, id, name), the JSON
//! path of the field and the reason. Files are read in WireMock's order (each folder
//! as the file system lists it, depth first; see [`json_files`]), which fixes the
//! "most recently added wins" order between stubs of equal priority: a stub later in
//! that order wins, as it does in WireMock. Files are parsed on all cores, because a
//! root with 10,000 one-stub files is common and start-up time counts.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use decoy_spec::fields::{FieldError, Fields};
use serde_json::Value;

use super::{Mapping, ParseContext, Source, stubs_in_file};

/// Which entry of a file a problem is about: a mapping (stub), or a connection of
/// `mq-connections.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubRef {
    pub kind: EntryKind,
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
}

/// What kind of entry a [`StubRef`] names, as problems spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Mapping,
    Connection,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Mapping => "mapping",
            EntryKind::Connection => "connection",
        }
    }
}

impl StubRef {
    /// The mapping at `index` in its file.
    pub fn mapping(index: usize, id: Option<String>, name: Option<String>) -> StubRef {
        StubRef {
            kind: EntryKind::Mapping,
            index,
            id,
            name,
        }
    }

    /// The connection at `index` in `mq-connections.json`.
    pub fn connection(index: usize, id: Option<String>, name: Option<String>) -> StubRef {
        StubRef {
            kind: EntryKind::Connection,
            index,
            id,
            name,
        }
    }

    /// A mapping: at its place in its file, or 0 for one posted through the admin
    /// API (which has no file).
    pub fn for_mapping(m: &Mapping) -> StubRef {
        match &m.source {
            Some(src) => StubRef::of(m, src),
            None => StubRef::mapping(
                0,
                Some(m.id.to_string()),
                m.name.as_deref().map(str::to_owned),
            ),
        }
    }

    /// A loaded mapping, at `src`.
    pub fn of(m: &Mapping, src: &Source) -> StubRef {
        StubRef::mapping(
            src.index,
            Some(m.id.to_string()),
            m.name.as_deref().map(str::to_owned),
        )
    }
}

/// One problem (or warning) found while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Relative to the root directory; empty for a stub posted through the admin API.
    pub file: PathBuf,
    pub stub: Option<StubRef>,
    pub error: FieldError,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.stub {
            // A stub posted through the admin API has no file.
            Some(s) if self.file.as_os_str().is_empty() => {
                write!(f, "admin API: {}", s.kind.as_str())?
            }
            Some(s) => write!(
                f,
                "{}: {} #{}",
                self.file.display(),
                s.kind.as_str(),
                s.index
            )?,
            None => write!(f, "{}", self.file.display())?,
        }
        if let Some(s) = &self.stub {
            match (&s.id, &s.name) {
                (Some(id), Some(name)) => write!(f, " (id {id}, name {name:?})")?,
                (Some(id), None) => write!(f, " (id {id})")?,
                (None, Some(name)) => write!(f, " (name {name:?})")?,
                (None, None) => {}
            }
        }
        write!(f, ": {}", self.error)
    }
}

/// The outcome of loading one file of stubs ([`Mapping`]s by default; a transport
/// with a mapping format of its own loads its type with the same code).
#[derive(Debug)]
pub struct FileLoad<T = Arc<Mapping>> {
    /// Hash of the bytes read (0 when the file could not be read), so a watcher can
    /// tell a changed file from one rewritten with the same content.
    pub hash: u64,
    pub mappings: Vec<T>,
    /// Stubs (or whole files) that were rejected.
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
    /// Number of stubs rejected.
    pub rejected: usize,
}

impl<T> Default for FileLoad<T> {
    fn default() -> Self {
        FileLoad {
            hash: 0,
            mappings: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            rejected: 0,
        }
    }
}

/// The outcome of loading a root directory.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub mappings: Vec<Arc<Mapping>>,
    /// Every mapping file read, relative to the root, with the hash of its content.
    pub file_hashes: Vec<(PathBuf, u64)>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
    pub rejected: usize,
    pub files: usize,
}

/// `root/mappings`, `root/__files`.
pub fn mappings_dir(root: &Path) -> PathBuf {
    root.join("mappings")
}

pub fn files_dir(root: &Path) -> PathBuf {
    root.join("__files")
}

/// Every `*.json` below `root/mappings`, relative to `root`, in WireMock's reading
/// order (see [`json_files`]).
pub fn mapping_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    json_files(root, &mappings_dir(root))
}

/// Every `*.json` below `dir` (following symlinked folders, skipping hidden files),
/// relative to `root`, in the order WireMock reads them: each folder in the order the
/// file system lists it (not sorted: Java's `File.listFiles()`, `readdir` on Linux,
/// the order `std::fs::read_dir` gives), depth first, a subfolder's files read where
/// the subfolder appears in its parent's listing. Ties between stubs of equal
/// priority go to the one read last, so this order is what WireMock would answer
/// with. A missing `dir` has none; a symlink back to a folder already being read is
/// not followed again.
pub fn json_files(root: &Path, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    json_files_each(root, dir, &mut |rel| out.push(rel))?;
    Ok(out)
}

/// [`json_files`], each file handed to `found` as the walk comes to it.
pub fn json_files_each(
    root: &Path,
    dir: &Path,
    found: &mut dyn FnMut(PathBuf),
) -> std::io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut open: Vec<PathBuf> = Vec::new();
    walk(root, dir, found, &mut open)
}

/// Whether a file at `path` is read as a mapping file: `*.json`, not hidden.
pub fn is_mapping_file_name(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        && !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
}

fn walk(
    root: &Path,
    dir: &Path,
    found: &mut dyn FnMut(PathBuf),
    open: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let ty = entry.file_type()?;
        if ty.is_dir() {
            walk(root, &path, found, open)?;
        } else if ty.is_symlink() && path.is_dir() {
            // Only followed links are canonicalised (cheap for the usual tree), and a
            // link to a folder being read already would loop.
            let Ok(target) = path.canonicalize() else {
                continue;
            };
            let dir_canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            if dir_canon.starts_with(&target) || open.contains(&target) {
                tracing::warn!(
                    "{}: a link to a folder that contains it, not followed",
                    path.display()
                );
                continue;
            }
            open.push(target);
            let r = walk(root, &path, found, open);
            open.pop();
            r?;
        } else if is_mapping_file_name(&path) {
            found(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

/// Makes `out` WireMock's answer for a stub whose `bodyFileName` does not exist: a
/// 500 from its servlet container naming the missing file (WireMock's page also
/// carries a Java stack trace, left out here), with the container's headers instead
/// of the stub's, and no transformers.
pub(crate) fn serve_missing_body_file(out: &mut super::ResponseDef, name: &str) {
    use http::{HeaderName, HeaderValue};
    let message = format!(
        "com.github.tomakehurst.wiremock.admin.NotFoundException: Not found in blob store: {}",
        html_escape(name)
    );
    out.status = 500;
    out.status_message = Some("Server Error".into());
    out.body = bytes::Bytes::from(format!(
        "<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n<title>Error 500 {message}</title>\n</head>\n<body><h2>HTTP ERROR 500 {message}</h2>\n<table>\n<tr><th>STATUS:</th><td>500</td></tr>\n<tr><th>MESSAGE:</th><td>{message}</td></tr>\n</table>\n\n</body>\n</html>\n"
    ));
    out.headers = Box::from(vec![
        (
            HeaderName::from_static("cache-control"),
            HeaderValue::from_static("must-revalidate,no-cache,no-store"),
        ),
        (
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("text/html;charset=ISO-8859-1"),
        ),
    ]);
    out.transformers = Default::default();
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Loads one mapping file (`rel` is relative to `root`).
pub fn load_file(root: &Path, rel: &Path, ctx: &ParseContext) -> FileLoad<Arc<Mapping>> {
    load_stub_file(root, rel, &["id", "uuid"], |index, stub, text, warnings| {
        let source = Source {
            file: rel.to_path_buf(),
            index,
            in_list: text.is_none(),
        };
        // Shared from here on (the store and the engine hold the same mapping): moved
        // into its `Arc` on the loading thread, not copied again once loaded.
        Mapping::parse_with_text(stub, text, ctx, Some(source), warnings).map(Arc::new)
    })
}

/// Reads a file of stubs (one stub, or `{"mappings": [...]}`) and parses each with
/// `parse`, for stubs and transports' own mappings alike. A file that cannot be read or is not JSON
/// is one problem; otherwise each stub is parsed on its own, and its problems and
/// warnings name it (position, the first of `id_keys` it has, name). `parse` gets
/// the stub's index, its JSON, the file's text when the file is that one stub (kept
/// as written), and where to put warnings.
pub fn load_stub_file<T>(
    root: &Path,
    rel: &Path,
    id_keys: &[&str],
    mut parse: impl FnMut(
        usize,
        &Value,
        Option<&str>,
        &mut Vec<FieldError>,
    ) -> Result<T, Vec<FieldError>>,
) -> FileLoad<T> {
    let mut out = FileLoad::default();
    let whole_file = |reason: String| Problem {
        file: rel.to_path_buf(),
        stub: None,
        error: FieldError::new("", reason),
    };
    // This thread's read buffer, taken rather than borrowed so that nothing `parse`
    // does can find it in use; put back at the end.
    let mut buf = READ_BUF.take();
    let read = match read_json(&root.join(rel), &mut buf) {
        Ok((len, parsed)) => {
            out.hash = content_hash(&buf[..len]);
            parsed
                .map(|p| (len, p))
                .map_err(|e| format!("not valid JSON: {e}"))
        }
        Err(e) => Err(format!("cannot read the file: {e}")),
    };
    let (len, parsed) = match read {
        Ok(r) => r,
        Err(reason) => {
            out.problems.push(whole_file(reason));
            out.rejected += 1;
            keep_read_buf(buf);
            return out;
        }
    };
    let text = &buf[..len];
    let mut one = |index: usize, stub: &Value, as_written: Option<&str>, out: &mut FileLoad<T>| {
        let stub_ref = || {
            StubRef::mapping(
                index,
                id_keys
                    .iter()
                    .find_map(|k| stub.field(k))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                stub.field("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            )
        };
        let mut warnings = Vec::new();
        match parse(index, stub, as_written, &mut warnings) {
            Ok(m) => out.mappings.push(m),
            Err(errors) => {
                out.rejected += 1;
                out.problems.extend(errors.into_iter().map(|error| Problem {
                    file: rel.to_path_buf(),
                    stub: Some(stub_ref()),
                    error,
                }));
            }
        }
        out.warnings
            .extend(warnings.into_iter().map(|error| Problem {
                file: rel.to_path_buf(),
                stub: Some(stub_ref()),
                error,
            }));
    };
    match parsed {
        Parsed::List(spans) => {
            // Exact capacity: a `Mapping` is large, and growing a vector doubles
            // what a file of many stubs holds while it loads.
            out.mappings.reserve_exact(spans.len());
            for (index, span) in spans.into_iter().enumerate() {
                // The file's syntax was checked whole; a stub that still does not
                // parse on its own is nested past serde_json's depth limit, which
                // the whole file is too: the file is refused, as it was when it
                // was parsed in one piece.
                let stub = match serde_json::from_slice::<Value>(&text[span]) {
                    Ok(stub) => stub,
                    Err(e) => {
                        let e = serde_json::from_slice::<Value>(text).err().unwrap_or(e);
                        out = FileLoad {
                            hash: out.hash,
                            ..FileLoad::default()
                        };
                        out.problems
                            .push(whole_file(format!("not valid JSON: {e}")));
                        out.rejected += 1;
                        break;
                    }
                };
                one(index, &stub, None, &mut out);
            }
        }
        Parsed::Whole(value) => {
            let single_stub = value.field("mappings").is_none();
            let stubs = match stubs_in_file(&value) {
                Ok(s) => s,
                Err(e) => {
                    out.problems.push(Problem {
                        file: rel.to_path_buf(),
                        stub: None,
                        error: e,
                    });
                    out.rejected += 1;
                    keep_read_buf(buf);
                    return out;
                }
            };
            out.mappings.reserve_exact(stubs.len());
            // A one-stub file keeps its text as written (no re-serialising).
            let as_written = single_stub
                .then(|| std::str::from_utf8(text).ok().map(str::trim))
                .flatten();
            for (index, stub) in stubs.into_iter().enumerate() {
                one(index, stub, as_written, &mut out);
            }
        }
    }
    keep_read_buf(buf);
    out
}

/// A mapping file, parsed.
enum Parsed {
    /// The whole file as one value: a stub, or anything [`list_spans`] leaves alone.
    Whole(Value),
    /// A `{"mappings": [...]}` list: where each stub's text is in the file, so that
    /// each is parsed, compiled and dropped in turn. Parsed whole, a file of 10,000
    /// stubs held all of them at once as `serde_json` values (objects keep their
    /// order here, so each is an `IndexMap`), several times the file's size, and
    /// that peak stayed in the resident set for the life of the process.
    List(Vec<std::ops::Range<usize>>),
}

/// Parses a mapping file: a list of stubs as [`Parsed::List`], anything else whole.
fn parse_file(text: &[u8]) -> serde_json::Result<Parsed> {
    match list_spans(text) {
        Some(spans) => Ok(Parsed::List(spans)),
        None => serde_json::from_slice(text).map(Parsed::Whole),
    }
}

/// Where each stub of a `{"mappings": [...]}` file is in `text`, when it is one:
/// an object with an array `mappings` and no `request` (the reading
/// [`stubs_in_file`] makes). Reading the spans checks the whole file's syntax.
/// `None` for anything else, including a file that does not parse, which is then
/// parsed whole, as before, for its error.
fn list_spans(text: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
    use serde_json::value::RawValue;
    const KEY: &[u8] = b"\"mappings\"";
    // A one-stub file (most of them) is not parsed twice.
    if !text.windows(KEY.len()).any(|w| w == KEY) {
        return None;
    }
    // Names as `serde_json` reads them (escapes decoded), the last of equal names
    // winning, as in a parsed object.
    let top: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(text).ok()?;
    if top.contains_key("request") {
        return None;
    }
    let list: Vec<&RawValue> = serde_json::from_str(top.get("mappings")?.get()).ok()?;
    let start = text.as_ptr() as usize;
    Some(
        list.iter()
            .map(|stub| {
                let at = stub.get().as_ptr() as usize - start;
                at..at + stub.get().len()
            })
            .collect(),
    )
}

thread_local! {
    /// Each thread's buffer for reading mapping files: a root of 10,000 small files
    /// would otherwise allocate and free one per file.
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The first size of a thread's read buffer; it grows for a larger file.
const READ_BUF_START: usize = 64 * 1024;
/// A buffer grown past this (for a large file) is freed after use, not kept.
const READ_BUF_KEEP: usize = 1024 * 1024;

fn keep_read_buf(buf: Vec<u8>) {
    if buf.len() <= READ_BUF_KEEP {
        READ_BUF.set(buf);
    }
}

/// Reads the file at `path` into `buf` and parses it as JSON: the length read, and
/// the parse. `buf` is kept initialised to its full length (its content past the
/// length read is stale).
///
/// Loading a root of thousands of small files is mostly the kernel's work per file,
/// so this makes three system calls where `std::fs::read` makes five: open, one read
/// as large as the buffer, close. (`std::fs::read` also asks for the size first and
/// reads once more to see the end.) A read of a regular file that returns less than
/// was asked for has reached the end on local file systems; where a network or FUSE
/// file system returns less without being at the end, the text read does not parse,
/// and only then is the rest read and the whole parsed again.
fn read_json(
    path: &Path,
    buf: &mut Vec<u8>,
) -> std::io::Result<(usize, serde_json::Result<Parsed>)> {
    read_json_from(&mut std::fs::File::open(path)?, buf)
}

fn read_json_from(
    file: &mut impl std::io::Read,
    buf: &mut Vec<u8>,
) -> std::io::Result<(usize, serde_json::Result<Parsed>)> {
    let (len, at_end) = read_into(file, buf, 0, true)?;
    let parsed = parse_file(&buf[..len]);
    if parsed.is_err() && !at_end {
        let (all, _) = read_into(file, buf, len, false)?;
        if all > len {
            return Ok((all, parse_file(&buf[..all])));
        }
    }
    Ok((len, parsed))
}

/// The content hash of the file at `path`, read as [`read_json`] reads it (so the
/// two agree), with this thread's buffer.
pub fn hash_file(path: &Path) -> std::io::Result<u64> {
    let mut buf = READ_BUF.take();
    let read = std::fs::File::open(path).and_then(|mut f| read_into(&mut f, &mut buf, 0, true));
    let hash = read.map(|(len, _)| content_hash(&buf[..len]));
    keep_read_buf(buf);
    hash
}

/// Reads `file` into `buf` from `buf[from..]`, growing `buf` when it fills, until a
/// read returns nothing or, with `stop_short`, fewer bytes than asked for. Returns
/// the length read in all and whether the end was seen (a read returned nothing).
fn read_into(
    file: &mut impl std::io::Read,
    buf: &mut Vec<u8>,
    from: usize,
    stop_short: bool,
) -> std::io::Result<(usize, bool)> {
    if buf.len() < READ_BUF_START {
        buf.resize(READ_BUF_START, 0);
    }
    let mut len = from;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => return Ok((len, true)),
            Ok(n) => {
                len += n;
                if stop_short && len < buf.len() {
                    return Ok((len, false));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A fast, non-cryptographic hash of a file's content.
pub fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// `*.json` files directly in the root directory, which are not read (a common first
/// mistake: mappings go in `mappings/`), except the `claimed` ones, which other parts
/// of decoy read there (a transport's configuration).
fn stray_json_files(root: &Path, claimed: &[&str]) -> Vec<Problem> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<Problem> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.to_ascii_lowercase().ends_with(".json")
                && !n.starts_with('.')
                && !claimed.contains(&n.as_str())
        })
        .map(|n| Problem {
            error: FieldError::new(
                "",
                "this file is directly in the root directory, where mappings are not read: \
                 move it into mappings/ if it is a stub; otherwise keep it outside the root directory",
            ),
            file: PathBuf::from(n),
            stub: None,
        })
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// Which of `mappings` (in reading order) are served when stubs share an id: the
/// first read, as the admin API finds stubs by id. WireMock refuses to start with
/// such a root; decoy serves what is valid and says which stub was left out and
/// which file holds the one kept. Returns a keep flag per mapping and the problems.
pub fn first_of_each_id<'a, M>(mappings: impl Iterator<Item = &'a M>) -> (Vec<bool>, Vec<Problem>)
where
    M: std::borrow::Borrow<Mapping> + 'a,
{
    let expected = mappings.size_hint().0;
    let mut seen: std::collections::HashMap<&str, Option<&Source>> =
        std::collections::HashMap::with_capacity(expected);
    let mut keep = Vec::with_capacity(expected);
    let mut problems = Vec::new();
    for m in mappings {
        let m: &Mapping = m.borrow();
        match seen.get(&*m.id) {
            None => {
                seen.insert(&m.id, m.source.as_ref());
                keep.push(true);
            }
            Some(first) => {
                keep.push(false);
                let Some(src) = &m.source else { continue };
                let first = match first {
                    Some(f) => format!("{} mapping #{}", f.file.display(), f.index),
                    None => "a stub added through the admin API".to_owned(),
                };
                problems.push(Problem {
                    file: src.file.clone(),
                    stub: Some(StubRef::of(m, src)),
                    error: FieldError::new(
                        "id",
                        format!(
                            "duplicate stub id: {first}, read earlier, has the same id and is served; this one is not (WireMock refuses to start with such a root: \"Duplicate stub mapping ID\", error 109)"
                        ),
                    ),
                });
            }
        }
    }
    (keep, problems)
}

/// Stubs that can never answer: another stub of the same priority, with the same
/// request pattern (and scenario state), was read later and so always wins the tie.
/// One warning per hidden stub, naming the file of the one that wins.
pub fn shadowed_stubs(mappings: &[Arc<Mapping>]) -> Vec<Problem> {
    let key = |m: &Mapping| -> Option<String> {
        let v: Value = serde_json::from_str(&m.json).ok()?;
        let request = v.field("request")?;
        let scenario = m
            .scenario
            .as_ref()
            .map(|s| (s.name.as_str(), s.required_state.as_deref()));
        Some(format!(
            "{}\u{0}{scenario:?}\u{0}{}",
            m.priority,
            sorted_json(request)
        ))
    };
    let mut last: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let keys: Vec<Option<String>> = mappings.iter().map(|m| key(m)).collect();
    for (i, k) in keys.iter().enumerate() {
        if let Some(k) = k {
            last.insert(k.clone(), i);
        }
    }
    let mut out = Vec::new();
    for (i, (m, k)) in mappings.iter().zip(&keys).enumerate() {
        let (Some(k), Some(src)) = (k, &m.source) else {
            continue;
        };
        let winner = &mappings[last[k]];
        if last[k] == i {
            continue;
        }
        let Some(wsrc) = &winner.source else { continue };
        out.push(Problem {
            file: src.file.clone(),
            stub: Some(StubRef::of(m, src)),
            error: FieldError::new(
                "request",
                format!(
                    "this stub can never answer: {} mapping #{} has the same priority and request pattern and, read later, always wins the tie",
                    wsrc.file.display(),
                    wsrc.index
                ),
            ),
        });
    }
    out
}

/// `v` written with object keys sorted, so equal patterns compare equal however
/// their fields were ordered.
fn sorted_json(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), sorted_json(&o[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(sorted_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// Loads every mapping file of `root`, in parallel, keeping the reading order.
pub fn load_root(root: &Path) -> std::io::Result<LoadReport> {
    load_root_with(root, &ParseContext::for_root(root), &[])
}

/// [`load_root`] with the given parse context (plugins, global templating). The
/// `claimed` names are `*.json` files directly in `root` that the transports read
/// (their configuration), so they are not reported as misplaced mappings.
pub fn load_root_with(
    root: &Path,
    ctx: &ParseContext,
    claimed: &[&str],
) -> std::io::Result<LoadReport> {
    if !root.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("root directory {} does not exist", root.display()),
        ));
    }
    // The folder walk hands out files in batches as it finds them, and one thread
    // per core parses batches as they come: the walk (about 10 ms for 10,000 files)
    // overlaps the parsing, and a thread the machine slows down takes fewer batches.
    // The batches are numbered, so the reading order is kept.
    const BATCH: usize = 128;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Vec<PathBuf>)>();
    let rx = std::sync::Mutex::new(rx);
    let (walked, mut batches) = std::thread::scope(|s| {
        let loaders: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = rx
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        let Ok((seq, part)) = next else { break };
                        let loads: Vec<FileLoad> =
                            part.iter().map(|rel| load_file(root, rel, ctx)).collect();
                        done.push((seq, part, loads));
                    }
                    done
                })
            })
            .collect();
        let mut batch = Vec::with_capacity(BATCH);
        let mut seq = 0;
        let walked = json_files_each(root, &mappings_dir(root), &mut |rel| {
            batch.push(rel);
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                let _ = tx.send((seq, full));
                seq += 1;
            }
        });
        if !batch.is_empty() {
            let _ = tx.send((seq, batch));
        }
        drop(tx);
        let batches: Vec<_> = loaders
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        (walked, batches)
    });
    walked?;
    batches.sort_unstable_by_key(|(seq, _, _)| *seq);
    let files = batches.iter().map(|(_, part, _)| part.len()).sum();
    let mut report = LoadReport {
        warnings: stray_json_files(root, claimed),
        files,
        mappings: Vec::with_capacity(files),
        ..LoadReport::default()
    };
    report.file_hashes.reserve_exact(files);
    let loaded = batches
        .into_iter()
        .flat_map(|(_, part, loads)| part.into_iter().zip(loads));
    for (rel, l) in loaded {
        report.file_hashes.push((rel, l.hash));
        report.mappings.extend(l.mappings);
        report.problems.extend(l.problems);
        report.warnings.extend(l.warnings);
        report.rejected += l.rejected;
    }
    let (keep, duplicates) = first_of_each_id(report.mappings.iter());
    if !duplicates.is_empty() {
        report.rejected += duplicates.len();
        report.problems.extend(duplicates);
        let mut keep = keep.into_iter();
        report.mappings.retain(|_| keep.next().unwrap_or(true));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(files: &[(impl AsRef<str>, impl AsRef<str>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.as_ref());
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text.as_ref()).unwrap();
        }
        dir
    }

    /// A reader that hands out at most `step` bytes a call, as a network or FUSE
    /// file system may.
    struct Trickle<'a> {
        rest: &'a [u8],
        step: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.rest.len());
            out[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_file_that_reads_short_before_its_end_is_read_to_the_end_when_it_does_not_parse() {
        let text = br#"{"request": {"url": "/a"}, "response": {"status": 201}}"#;
        let mut buf = Vec::new();
        let mut src = Trickle {
            rest: text,
            step: 10,
        };
        let (len, parsed) = read_json_from(&mut src, &mut buf).unwrap();
        assert_eq!(&buf[..len], text);
        let Ok(Parsed::Whole(v)) = parsed else {
            panic!("one stub, parsed whole")
        };
        assert_eq!(v["response"]["status"], 201);
    }

    /// What the loader made of one file: ids, texts kept and problems.
    fn loaded(text: &str) -> (Vec<(String, String)>, Vec<String>, usize) {
        let dir = root_with(&[("mappings/f.json", text)]);
        let r = load_root(dir.path()).unwrap();
        let stubs = r
            .mappings
            .iter()
            .map(|m| (m.id.to_string(), m.json.to_string()))
            .collect();
        let problems = r.problems.iter().map(|p| p.to_string()).collect();
        (stubs, problems, r.rejected)
    }

    #[test]
    fn a_list_is_read_stub_by_stub_as_its_parsed_values_would_be() {
        let stubs = [
            serde_json::json!({"id": "a", "request": {"url": "/a"}, "response": {"body": "x\"y\u{e9}", "status": 201}}),
            serde_json::json!({"id": "b", "request": {"urlPattern": "(["}}),
            serde_json::json!({"request": {"url": "/c"}, "name": "c"}),
        ];
        // Spaces, escapes and a name given twice (the last wins) in the text itself.
        let text = format!(
            "{{ \"meta\": {{\"total\": 3}},\n  \"mappings\" : [ {} ,\n {},{} ], \"mappings\": [{}, {}, {}] }}",
            "{\"id\": \"gone\", \"request\": {}}", "1", "[]", stubs[0], stubs[1], stubs[2]
        );
        let (got, problems, rejected) = loaded(&text);
        assert_eq!(got.len(), 2, "{problems:?}");
        assert_eq!(got[0], ("a".to_owned(), stubs[0].to_string()));
        assert_eq!(got[1].1, stubs[2].to_string());
        assert_eq!(rejected, 1);
        assert!(
            problems[0].starts_with("mappings/f.json: mapping #1 (id b): request.urlPattern"),
            "{problems:?}"
        );
        // Each span is the text of the stub a whole parse finds at its place.
        let spans = list_spans(text.as_bytes()).unwrap();
        let whole: Value = serde_json::from_str(&text).unwrap();
        let listed = stubs_in_file(&whole).unwrap();
        assert_eq!(spans.len(), listed.len());
        for (span, stub) in spans.into_iter().zip(listed) {
            let alone: Value = serde_json::from_str(&text[span]).unwrap();
            assert_eq!(&alone, stub);
        }
    }

    #[test]
    fn files_that_are_not_lists_of_stubs_are_parsed_whole_as_before() {
        for text in [
            r#"{"request": {"url": "/x"}, "mappings": []}"#,
            r#"{"mappings": {"request": {}}}"#,
            r#"["mappings"]"#,
            r#"{"mappings": [{"request": {}}] "#,
            r#"{"response": {"body": "\"mappings\""}, "request": {"url": "/y"}}"#,
        ] {
            assert!(list_spans(text.as_bytes()).is_none(), "{text}");
        }
        let (_, problems, _) = loaded(r#"{"mappings": {"request": {}}}"#);
        assert_eq!(
            problems,
            ["mappings/f.json: mappings: expected an array, found an object"]
        );
        let (_, problems, _) = loaded(r#"{"mappings": [{"request": {}}] "#);
        assert!(
            problems[0].starts_with("mappings/f.json: not valid JSON: EOF while parsing"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_list_with_a_stub_nested_too_deep_is_refused_whole_as_a_whole_parse_refuses_it() {
        let deep = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        let text = format!(
            r#"{{"mappings": [{{"request": {{"url": "/ok"}}}}, {{"request": {{}}, "metadata": {{"d": {deep}}}}}]}}"#
        );
        let whole = serde_json::from_str::<Value>(&text)
            .unwrap_err()
            .to_string();
        let (got, problems, rejected) = loaded(&text);
        assert!(got.is_empty());
        assert_eq!(rejected, 1);
        assert_eq!(
            problems,
            [format!("mappings/f.json: not valid JSON: {whole}")]
        );
    }

    #[test]
    fn a_file_larger_than_the_read_buffer_loads_whole() {
        let body = "x".repeat(3 * READ_BUF_START + 17);
        let stub = serde_json::json!({"request": {"url": "/big"}, "response": {"body": body}});
        let dir = root_with(&[("mappings/big.json", &stub.to_string())]);
        let r = load_root(dir.path()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.mappings[0].response.body.len(), body.len());
    }

    #[test]
    fn many_files_parsed_in_batches_keep_the_reading_order() {
        let texts: Vec<(String, String)> = (0..700)
            .map(|i| {
                let dir = ["", "a/", "a/b/", "c/"][i % 4];
                (
                    format!("mappings/{dir}s{i}.json"),
                    format!(r#"{{"id": "id-{i}", "request": {{"url": "/{i}"}}}}"#),
                )
            })
            .collect();
        let dir = root_with(&texts);
        let order = mapping_files(dir.path()).unwrap();
        let r = load_root(dir.path()).unwrap();
        let read: Vec<&PathBuf> = r.file_hashes.iter().map(|(p, _)| p).collect();
        assert_eq!(read, order.iter().collect::<Vec<_>>());
        let by_stub: Vec<&PathBuf> = r
            .mappings
            .iter()
            .map(|m| &m.source.as_ref().unwrap().file)
            .collect();
        assert_eq!(by_stub, read);
    }

    #[test]
    fn loads_nested_files_and_multi_stub_files() {
        let dir = root_with(&[
            ("mappings/b.json", r#"{"request": {"urlPath": "/b"}}"#),
            (
                "mappings/a/x.json",
                r#"{"mappings": [{"request": {"urlPath": "/a1"}}, {"request": {"urlPath": "/a2"}}]}"#,
            ),
            ("mappings/notes.txt", "ignored"),
        ]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.files, 2);
        assert_eq!(r.mappings.len(), 3);
        let from_x: Vec<usize> = r
            .mappings
            .iter()
            .filter_map(|m| m.source.as_ref())
            .filter(|s| s.file == Path::new("mappings/a/x.json"))
            .map(|s| s.index)
            .collect();
        assert_eq!(from_x, [0, 1]);
        assert!(r.problems.is_empty());
    }

    /// What WireMock's `File.listFiles()` recursion gives: each folder as listed,
    /// a subfolder's files where the subfolder is listed.
    fn listing_order(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                listing_order(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }

    #[test]
    fn files_are_read_in_the_directory_listing_order_depth_first_not_sorted() {
        let mut files = Vec::new();
        for i in 0..40 {
            files.push((
                format!("mappings/f{i:02}.json"),
                r#"{"request": {}}"#.to_owned(),
            ));
            if i % 10 == 0 {
                for j in 0..5 {
                    files.push((
                        format!("mappings/d{i}/g{j}.json"),
                        r#"{"request": {}}"#.to_owned(),
                    ));
                }
            }
        }
        let dir = root_with(&files);
        let got = mapping_files(dir.path()).unwrap();
        let mut want = Vec::new();
        listing_order(dir.path(), &dir.path().join("mappings"), &mut want);
        assert_eq!(got, want);
        // Each subfolder's files are read together, where the subfolder is listed.
        for d in ["d0", "d10", "d20", "d30"] {
            let at: Vec<usize> = got
                .iter()
                .enumerate()
                .filter(|(_, p)| p.starts_with(Path::new("mappings").join(d)))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(at.len(), 5);
            assert_eq!(at[4] - at[0], 4, "{d} read in one run: {got:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_back_to_a_containing_folder_is_not_followed_forever() {
        let dir = root_with(&[("mappings/sub/a.json", r#"{"request": {}}"#)]);
        std::os::unix::fs::symlink(
            dir.path().join("mappings"),
            dir.path().join("mappings/sub/loop"),
        )
        .unwrap();
        let got = mapping_files(dir.path()).unwrap();
        assert_eq!(got, [PathBuf::from("mappings/sub/a.json")]);
    }

    #[test]
    fn a_bad_file_does_not_stop_the_others() {
        let dir = root_with(&[
            ("mappings/bad.json", "{ not json"),
            ("mappings/good.json", r#"{"request": {"urlPath": "/ok"}}"#),
            (
                "mappings/mixed.json",
                r#"{"mappings": [{"request": {"urlPath": "/fine"}}, {"id": "x1", "name": "broken", "request": {"urlPattern": "(["}}]}"#,
            ),
        ]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.mappings.len(), 2);
        assert_eq!(r.rejected, 2);
        let text: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
        assert!(
            text[0].starts_with("mappings/bad.json: not valid JSON"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("mappings/mixed.json: mapping #1 (id x1, name \"broken\"): request.urlPattern: invalid regular expression"),
            "{text:?}"
        );
    }

    #[test]
    fn json_files_directly_in_the_root_are_warned_about_not_loaded() {
        let dir = root_with(&[
            ("hello.json", r#"{"request": {"urlPath": "/h"}}"#),
            ("brokers.json", "[]"),
            ("mappings/ok.json", r#"{"request": {"urlPath": "/ok"}}"#),
        ]);
        let ctx = ParseContext::for_root(dir.path());
        let r = load_root_with(dir.path(), &ctx, &["brokers.json"]).unwrap();
        assert_eq!(r.mappings.len(), 1);
        let text: Vec<String> = r.warnings.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            text,
            [
                "hello.json: this file is directly in the root directory, where mappings are not read: \
                 move it into mappings/ if it is a stub; otherwise keep it outside the root directory"
            ]
        );
    }

    #[test]
    fn a_stub_whose_id_was_read_earlier_is_rejected_naming_both_files() {
        let dir = root_with(&[
            (
                "mappings/one.json",
                r#"{"id": "8d4a2c0e-0000-4000-8000-000000000001", "request": {"urlPath": "/a"}}"#,
            ),
            (
                "mappings/two.json",
                r#"{"id": "8d4a2c0e-0000-4000-8000-000000000001", "request": {"urlPath": "/b"}}"#,
            ),
        ]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.mappings.len(), 1);
        assert_eq!(r.rejected, 1);
        let served = r.mappings[0].source.as_ref().unwrap().file.clone();
        let other = if served.ends_with("one.json") {
            "mappings/two.json"
        } else {
            "mappings/one.json"
        };
        let text = r.problems[0].to_string();
        assert!(text.starts_with(other), "{text}");
        assert!(
            text.contains(&format!(
                "duplicate stub id: {} mapping #0, read earlier",
                served.display()
            )),
            "{text}"
        );
    }

    #[test]
    fn a_stub_hidden_by_an_identical_one_read_later_is_named_with_the_winner() {
        let dir = root_with(&[
            (
                "mappings/a.json",
                r#"{"request": {"method": "GET", "urlPath": "/x"}, "response": {"body": "a"}}"#,
            ),
            (
                "mappings/b.json",
                r#"{"request": {"urlPath": "/x", "method": "GET"}, "response": {"body": "b"}}"#,
            ),
            (
                "mappings/c.json",
                r#"{"priority": 1, "request": {"urlPath": "/x", "method": "GET"}}"#,
            ),
        ]);
        let r = load_root(dir.path()).unwrap();
        let w = shadowed_stubs(&r.mappings);
        assert_eq!(w.len(), 1, "{w:?}");
        let text = w[0].to_string();
        let (hidden, winner) = if text.starts_with("mappings/a.json") {
            ("mappings/a.json", "mappings/b.json")
        } else {
            ("mappings/b.json", "mappings/a.json")
        };
        assert!(text.starts_with(&format!("{hidden}: mapping #0")), "{text}");
        assert!(
            text.contains(&format!("this stub can never answer: {winner} mapping #0")),
            "{text}"
        );
    }

    #[test]
    fn a_missing_body_file_loads_the_stub_with_a_warning_naming_it() {
        let dir = root_with(&[(
            "mappings/f.json",
            r#"{"request": {"urlPath": "/f"}, "response": {"bodyFileName": "nope.json", "headers": {"Content-Type": "application/json"}}}"#,
        )]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.rejected, 0);
        assert_eq!(r.mappings.len(), 1);
        assert_eq!(r.mappings[0].response.status, 500);
        let w: Vec<String> = r.warnings.iter().map(|p| p.to_string()).collect();
        assert!(
            w[0].starts_with("mappings/f.json: mapping #0: response.bodyFileName: body file \"nope.json\" not found"),
            "{w:?}"
        );
        // A name that leaves __files is still refused.
        let dir = root_with(&[(
            "mappings/f.json",
            r#"{"request": {"urlPath": "/f"}, "response": {"bodyFileName": "../secret"}}"#,
        )]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.rejected, 1);
    }
}
