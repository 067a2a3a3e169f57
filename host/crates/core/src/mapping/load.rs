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

use decoy_spec::fields::{FieldError, Fields};
use serde_json::Value;

use super::{Mapping, ParseContext, Source, stubs_in_file};

/// Which stub a problem is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubRef {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
}

impl StubRef {
    /// A loaded mapping, at `src`.
    pub fn of(m: &Mapping, src: &Source) -> StubRef {
        StubRef {
            index: src.index,
            id: Some(m.id.to_string()),
            name: m.name.as_deref().map(str::to_owned),
        }
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
            Some(_) if self.file.as_os_str().is_empty() => write!(f, "admin API: mapping")?,
            Some(s) => write!(f, "{}: mapping #{}", self.file.display(), s.index)?,
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

/// The outcome of loading one file of stubs (HTTP [`Mapping`]s by default; the MQ
/// side loads its own mapping type with the same code).
#[derive(Debug)]
pub struct FileLoad<T = Mapping> {
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
    pub mappings: Vec<Mapping>,
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
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut open: Vec<PathBuf> = Vec::new();
    walk(root, dir, &mut out, &mut open)?;
    Ok(out)
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
    out: &mut Vec<PathBuf>,
    open: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let ty = entry.file_type()?;
        if ty.is_dir() {
            walk(root, &path, out, open)?;
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
            let r = walk(root, &path, out, open);
            open.pop();
            r?;
        } else if is_mapping_file_name(&path) {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
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
    out.headers = std::sync::Arc::from(vec![
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
pub fn load_file(root: &Path, rel: &Path, ctx: &ParseContext) -> FileLoad {
    load_stub_file(root, rel, &["id", "uuid"], |index, stub, text, warnings| {
        let source = Source {
            file: rel.to_path_buf(),
            index,
            in_list: text.is_none(),
        };
        Mapping::parse_with_text(stub, text, ctx, Some(source), warnings)
    })
}

/// Reads a file of stubs (one stub, or `{"mappings": [...]}`) and parses each with
/// `parse`, for HTTP and MQ mappings alike. A file that cannot be read or is not JSON
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
    let text = match std::fs::read(root.join(rel)) {
        Ok(t) => {
            out.hash = content_hash(&t);
            t
        }
        Err(e) => {
            out.problems
                .push(whole_file(format!("cannot read the file: {e}")));
            out.rejected += 1;
            return out;
        }
    };
    let value: Value = match serde_json::from_slice(&text) {
        Ok(v) => v,
        Err(e) => {
            out.problems
                .push(whole_file(format!("not valid JSON: {e}")));
            out.rejected += 1;
            return out;
        }
    };
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
            return out;
        }
    };
    // Exact capacity: a `Mapping` is large, and growing a vector per file doubles
    // what a root of many small files holds while it loads.
    out.mappings.reserve_exact(stubs.len());
    // A one-stub file keeps its text as written (no re-serialising).
    let as_written = single_stub
        .then(|| std::str::from_utf8(&text).ok().map(str::trim))
        .flatten();
    for (index, stub) in stubs.into_iter().enumerate() {
        let stub_ref = || StubRef {
            index,
            id: id_keys
                .iter()
                .find_map(|k| stub.field(k))
                .and_then(Value::as_str)
                .map(str::to_owned),
            name: stub
                .field("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
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
    }
    out
}

/// A fast, non-cryptographic hash of a file's content.
pub fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// `*.json` files directly in the root directory, which are not read (a common first
/// mistake: mappings go in `mappings/`). The MQ connection files belong there.
fn stray_json_files(root: &Path) -> Vec<Problem> {
    const ROOT_FILES: [&str; 2] = ["mq-connections.json", "ibm-mq-connections.json"];
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
                && !ROOT_FILES.contains(&n.as_str())
        })
        .map(|n| Problem {
            error: FieldError::new(
                "",
                format!(
                    "this file is directly in the root directory, where mappings are not read: move it to mappings/{n}"
                ),
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
    let mut seen: std::collections::HashMap<&str, Option<&Source>> =
        std::collections::HashMap::new();
    let mut keep = Vec::new();
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
pub fn shadowed_stubs(mappings: &[Mapping]) -> Vec<Problem> {
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
    let keys: Vec<Option<String>> = mappings.iter().map(key).collect();
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
    load_root_with(root, &ParseContext::for_root(root))
}

/// [`load_root`] with the given parse context (plugins, global templating).
pub fn load_root_with(root: &Path, ctx: &ParseContext) -> std::io::Result<LoadReport> {
    if !root.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("root directory {} does not exist", root.display()),
        ));
    }
    let files = mapping_files(root)?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().div_ceil(64).max(1));
    let chunk = files.len().div_ceil(threads).max(1);
    let loads: Vec<FileLoad> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|rel| load_file(root, rel, ctx))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut report = LoadReport {
        warnings: stray_json_files(root),
        files: files.len(),
        mappings: Vec::with_capacity(loads.iter().map(|l| l.mappings.len()).sum()),
        ..LoadReport::default()
    };
    report.file_hashes.reserve_exact(files.len());
    for (rel, l) in files.into_iter().zip(loads) {
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

    fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
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
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let dir = root_with(&refs);
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
            ("mq-connections.json", "[]"),
            ("mappings/ok.json", r#"{"request": {"urlPath": "/ok"}}"#),
        ]);
        let r = load_root(dir.path()).unwrap();
        assert_eq!(r.mappings.len(), 1);
        let text: Vec<String> = r.warnings.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            text,
            [
                "hello.json: this file is directly in the root directory, where mappings are not read: move it to mappings/hello.json"
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
