//! `__files` as a web root: a GET that no stub matches is answered with the file at
//! that path under `__files`, as WireMock's servlet container does.
//!
//! Checked against WireMock 3.13.2: only GET (HEAD and other methods get the
//! not-matched report); the query is ignored; the path is percent-decoded; the
//! content type comes from the extension (case-insensitive), `application/json` when
//! the extension is unknown or missing; a folder is answered with its first welcome
//! file (`index.json`, `index.html`, `index.xml`, `index.txt`), or a 403 page when it
//! has none; a missing file is the not-matched report. WireMock's journal records
//! such a request as not matched, and so does decoy's.
//!
//! Nothing outside `__files` is ever served: `..` may not climb above it, and a path
//! that resolves (through a link) outside it is treated as missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;

use decoy_spec::plan::{ResponsePlan, text_plan};

/// Welcome files, in the order WireMock tries them, with the content type it sends
/// for a folder answered with one.
const WELCOME: [(&str, &str); 4] = [
    ("index.json", "application/json"),
    ("index.html", "text/html;charset=utf-8"),
    ("index.xml", "application/xml;charset=utf-8"),
    ("index.txt", "text/plain;charset=utf-8"),
];

/// WireMock's answer when the extension is unknown or missing.
const DEFAULT_TYPE: &str = "application/json";

/// The answer for `GET raw_path` from `files_dir`, or `None` when there is no such
/// file (the request stays unmatched).
pub fn answer(files_dir: &Path, raw_path: &str) -> Option<ResponsePlan> {
    let rel = relative_path(raw_path)?;
    let root = files_dir.canonicalize().ok()?;
    let target = root.join(&rel);
    let meta = std::fs::metadata(&target).ok()?;
    if meta.is_dir() {
        for (name, content_type) in WELCOME {
            let file = target.join(name);
            if let Some(plan) = file_plan(&root, &file, content_type) {
                return Some(plan);
            }
        }
        // Inside __files? Then the folder exists and lists nothing: 403.
        inside(&root, &target)?;
        return Some(forbidden(raw_path));
    }
    file_plan(&root, &target, content_type_for(&target))
}

/// The decoded path below the web root, without `.` and with `..` applied; `None`
/// when it would climb above the root or is not valid UTF-8.
fn relative_path(raw_path: &str) -> Option<PathBuf> {
    let decoded = percent_encoding::percent_decode_str(raw_path)
        .decode_utf8()
        .ok()?;
    let mut parts: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s if s.contains('\\') || s.contains('\0') => return None,
            s => parts.push(s),
        }
    }
    Some(parts.iter().collect())
}

/// `path` canonicalised, when it is inside `root` (already canonical).
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let canon = path.canonicalize().ok()?;
    canon.starts_with(root).then_some(canon)
}

fn file_plan(root: &Path, file: &Path, content_type: &str) -> Option<ResponsePlan> {
    let canon = inside(root, file)?;
    let meta = std::fs::metadata(&canon).ok()?;
    if !meta.is_file() {
        return None;
    }
    let body = std::fs::read(&canon).ok()?;
    let mut headers = vec![(
        http::header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).ok()?,
    )];
    if let Ok(modified) = meta.modified()
        && let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(modified))
    {
        headers.push((http::header::LAST_MODIFIED, v));
    }
    headers.push((
        http::header::ACCEPT_RANGES,
        HeaderValue::from_static("bytes"),
    ));
    let mut plan = text_plan(200, String::new());
    plan.headers = Arc::from(headers);
    plan.body = Bytes::from(body);
    Some(plan)
}

/// The servlet container's page for a folder without a welcome file.
fn forbidden(raw_path: &str) -> ResponsePlan {
    let uri = escape_html(raw_path);
    let body = format!(
        "<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n<title>Error 403 Forbidden</title>\n</head>\n<body><h2>HTTP ERROR 403 Forbidden</h2>\n<table>\n<tr><th>URI:</th><td>{uri}</td></tr>\n<tr><th>STATUS:</th><td>403</td></tr>\n<tr><th>MESSAGE:</th><td>Forbidden</td></tr>\n</table>\n\n</body>\n</html>\n"
    );
    let mut plan = text_plan(403, body);
    plan.headers = Arc::from(vec![
        (
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("must-revalidate,no-cache,no-store"),
        ),
        (
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/html;charset=ISO-8859-1"),
        ),
    ]);
    plan
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The content type WireMock sends for a file, by its extension.
pub fn content_type_for(file: &Path) -> &'static str {
    let Some(ext) = file.extension().and_then(|e| e.to_str()) else {
        return DEFAULT_TYPE;
    };
    let ext = ext.to_ascii_lowercase();
    MIME_TYPES
        .iter()
        .find(|(e, _)| *e == ext)
        .map(|(_, t)| *t)
        .unwrap_or(DEFAULT_TYPE)
}

/// Extensions and the types WireMock 3.13.2 sends for them (its servlet container's
/// table; each one checked against WireMock). Others, `yaml`, `md`, `ttf`, `docx`
/// among them, get [`DEFAULT_TYPE`], as there.
const MIME_TYPES: &[(&str, &str)] = &[
    ("json", "application/json"),
    ("html", "text/html"),
    ("htm", "text/html"),
    ("xml", "application/xml"),
    ("txt", "text/plain"),
    ("css", "text/css"),
    ("js", "text/javascript"),
    ("png", "image/png"),
    ("gif", "image/gif"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("svg", "image/svg+xml"),
    ("ico", "image/x-icon"),
    ("pdf", "application/pdf"),
    ("csv", "text/csv"),
    ("wasm", "application/wasm"),
    ("apk", "application/vnd.android.package-archive"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bin", "application/octet-stream"),
    ("bmp", "image/bmp"),
    ("class", "application/java-vm"),
    ("doc", "application/msword"),
    ("dtd", "application/xml-dtd"),
    ("eot", "application/vnd.ms-fontobject"),
    ("exe", "application/octet-stream"),
    ("gz", "application/gzip"),
    ("jar", "application/java-archive"),
    ("java", "text/plain"),
    ("jpe", "image/jpeg"),
    ("jsp", "text/html"),
    ("mjs", "text/javascript"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("ogg", "application/ogg"),
    ("otf", "application/vnd.oasis.opendocument.formula-template"),
    ("ppt", "application/vnd.ms-powerpoint"),
    ("rtf", "application/rtf"),
    ("sh", "application/x-sh"),
    ("svgz", "image/svg+xml"),
    ("tar", "application/x-tar"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tsv", "text/tab-separated-values"),
    ("wav", "audio/x-wav"),
    ("webp", "image/webp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xhtml", "application/xhtml+xml"),
    ("xls", "application/vnd.ms-excel"),
    ("xsd", "application/xml"),
    ("xsl", "application/xml"),
    ("zip", "application/zip"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn content_type_of(plan: &ResponsePlan) -> Option<&str> {
        plan.headers
            .iter()
            .find(|(n, _)| n == http::header::CONTENT_TYPE)
            .and_then(|(_, v)| v.to_str().ok())
    }

    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("__files");
        std::fs::create_dir_all(f.join("docs")).unwrap();
        std::fs::create_dir_all(f.join("empty")).unwrap();
        std::fs::write(f.join("a.html"), "<h1>a</h1>").unwrap();
        std::fs::write(f.join("data"), "x").unwrap();
        std::fs::write(f.join("sp ace.TXT"), "s").unwrap();
        std::fs::write(f.join("docs/index.html"), "idx").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        dir
    }

    #[test]
    fn a_file_is_served_with_the_type_its_extension_gives() {
        let dir = root();
        let files = dir.path().join("__files");
        let p = answer(&files, "/a.html").unwrap();
        assert_eq!(p.status, 200);
        assert_eq!(&p.body[..], b"<h1>a</h1>");
        assert_eq!(content_type_of(&p), Some("text/html"));
        let p = answer(&files, "/data").unwrap();
        assert_eq!(content_type_of(&p), Some("application/json"));
        let p = answer(&files, "/sp%20ace.TXT").unwrap();
        assert_eq!(content_type_of(&p), Some("text/plain"));
    }

    #[test]
    fn a_folder_answers_with_its_welcome_file_or_403() {
        let dir = root();
        let files = dir.path().join("__files");
        let p = answer(&files, "/docs/").unwrap();
        assert_eq!(&p.body[..], b"idx");
        assert_eq!(content_type_of(&p), Some("text/html;charset=utf-8"));
        assert_eq!(answer(&files, "/docs").unwrap().status, 200);
        assert_eq!(answer(&files, "/empty").unwrap().status, 403);
        assert!(answer(&files, "/missing.txt").is_none());
    }

    #[test]
    fn nothing_outside_the_web_root_is_served() {
        let dir = root();
        let files = dir.path().join("__files");
        assert!(answer(&files, "/../secret.txt").is_none());
        assert!(answer(&files, "/%2e%2e/secret.txt").is_none());
        assert!(answer(&files, "/docs/../../secret.txt").is_none());
        assert_eq!(answer(&files, "/docs/../a.html").unwrap().status, 200);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), files.join("link.txt"))
                .unwrap();
            std::os::unix::fs::symlink(dir.path(), files.join("up")).unwrap();
            assert!(answer(&files, "/link.txt").is_none());
            assert!(answer(&files, "/up/secret.txt").is_none());
            assert!(answer(&files, "/up").is_none());
        }
    }
}
