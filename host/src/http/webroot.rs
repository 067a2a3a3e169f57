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
//! that resolves (through a link) outside it is treated as missing, as WireMock
//! does (a link to `/dev/zero` included). Only regular files are served: WireMock
//! never answers a request for a FIFO (its thread waits for a writer); decoy answers
//! 500 naming the file and what it is, and logs it.
//!
//! A file of any size is served, as WireMock serves it (with its `Content-Length`),
//! but never held whole: it is sent in [`CHUNK`]s read as the client takes them, and
//! the chunks read and not yet written to a connection hold at most
//! [`MAX_BYTES_IN_FLIGHT`] across every request; a read past that waits its turn. So
//! a 20 GB file, or a hundred clients asking for it at once, cost that much memory,
//! not the file's size times the requests.
//!
//! Finding, opening and reading the file are blocking calls, so they are made on
//! tokio's blocking threads, at most [`MAX_READS`] at once (a lookup or one chunk
//! each), never on a thread that serves connections (whose other connections would
//! wait, and which no other thread relieves in the per-thread layouts). The files
//! are read on every request, not cached: a cache would have to hear of every change
//! to `__files` (the watcher is off under `--no-watch`, and the admin API,
//! recordings and other tools write there too) and would hold the files' contents in
//! memory, and this is the fallback for a GET no stub matched, not the path a
//! stubbed request takes.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderValue;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use decoy_core::files::{FileError, open_regular};
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

/// The most web-root lookups and chunk reads running at once; more wait their turn.
pub const MAX_READS: usize = 16;

/// How much of a file is read at a time: large enough that a read is worth a
/// blocking thread's hop, small enough that a client that stops reading holds little.
pub const CHUNK: usize = 64 * 1024;

/// Bytes of web-root files read and not yet written to a connection, across every
/// request: 64 MiB, as `--max-pending-webhook-bytes`. A client that stops reading
/// holds what its connection buffers before the body waits (hyper's write buffer, a
/// few hundred KiB) and one chunk, so it takes a hundred or more such clients at once
/// before the others' reads wait their turn (stubbed requests never do).
pub const MAX_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;

/// `__files`, served as a web root from blocking threads.
#[derive(Debug, Clone)]
pub struct WebRoot {
    dir: Arc<Path>,
    reads: Arc<Semaphore>,
    /// One permit per byte read and not yet written out ([`MAX_BYTES_IN_FLIGHT`]).
    in_flight: Arc<Semaphore>,
}

/// The web root's answer: the status and headers, and the file's contents as they
/// are read (`None`: the plan's own body, a page or an empty file).
#[derive(Debug)]
pub struct Served {
    pub plan: ResponsePlan,
    pub body: Option<FileBody>,
}

/// What a path under `__files` leads to.
#[derive(Debug)]
enum Found {
    /// A page of its own (the folder's 403, a refusal).
    Page(ResponsePlan),
    /// A regular file, opened: its headers, and its contents still to be read.
    File {
        plan: ResponsePlan,
        file: File,
        len: u64,
        path: PathBuf,
    },
}

impl WebRoot {
    pub fn new(files_dir: PathBuf) -> WebRoot {
        WebRoot::with_bound(files_dir, MAX_BYTES_IN_FLIGHT)
    }

    /// As [`WebRoot::new`], holding at most `max_bytes_in_flight` bytes read.
    fn with_bound(files_dir: PathBuf, max_bytes_in_flight: usize) -> WebRoot {
        WebRoot {
            dir: Arc::from(files_dir),
            reads: Arc::new(Semaphore::new(MAX_READS)),
            in_flight: Arc::new(Semaphore::new(max_bytes_in_flight)),
        }
    }

    /// The answer for `GET raw_path`, or `None` when there is no such file (the
    /// request stays unmatched). A turn is held until the lookup ends, even if the
    /// client has gone.
    pub async fn answer(&self, raw_path: &str) -> Option<Served> {
        let turn = self.reads.clone().acquire_owned().await.ok()?;
        let (dir, raw) = (self.dir.clone(), raw_path.to_owned());
        let found = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            find(&dir, &raw)
        })
        .await
        .ok()??;
        Some(match found {
            Found::Page(plan) => Served { plan, body: None },
            Found::File { plan, len: 0, .. } => Served { plan, body: None },
            Found::File {
                plan,
                file,
                len,
                path,
            } => {
                let (tx, rx) = mpsc::channel(1);
                let pump = Pump {
                    file,
                    left: len,
                    path,
                    reads: self.reads.clone(),
                    in_flight: self.in_flight.clone(),
                };
                tokio::spawn(pump.run(tx));
                Served {
                    plan,
                    body: Some(FileBody { rx, len }),
                }
            }
        })
    }
}

/// A web-root file's contents, as its [`Pump`] reads them. Its length is known, so
/// the answer has the file's `Content-Length`, as WireMock's.
#[derive(Debug)]
pub struct FileBody {
    rx: mpsc::Receiver<std::io::Result<Bytes>>,
    len: u64,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| c.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// Reads a file a chunk at a time, as the connection takes them. Ends when the file
/// is read, or when the body is dropped (the client went away).
struct Pump {
    file: File,
    left: u64,
    path: PathBuf,
    reads: Arc<Semaphore>,
    in_flight: Arc<Semaphore>,
}

/// A chunk of a file, holding its share of [`MAX_BYTES_IN_FLIGHT`] until the
/// connection has written it and dropped it.
struct Chunk {
    bytes: Vec<u8>,
    _share: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Pump {
    async fn run(self, tx: mpsc::Sender<std::io::Result<Bytes>>) {
        let Pump {
            file,
            mut left,
            path,
            reads,
            in_flight,
        } = self;
        let mut file = Some(file);
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            // Room to send it first: a client that stops reading then holds one
            // chunk, not a share of the budget waiting for room.
            let Ok(slot) = tx.reserve().await else { return };
            let Ok(share) = in_flight.clone().acquire_many_owned(n as u32).await else {
                return;
            };
            let Ok(turn) = reads.clone().acquire_owned().await else {
                return;
            };
            let Some(mut f) = file.take() else { return };
            let read = tokio::task::spawn_blocking(move || {
                let _turn = turn;
                let mut bytes = vec![0; n];
                let got = f.read_exact(&mut bytes).map(|()| bytes);
                (f, got)
            })
            .await;
            let Ok((f, got)) = read else { return };
            match got {
                Ok(bytes) => {
                    slot.send(Ok(Bytes::from_owner(Chunk {
                        bytes,
                        _share: share,
                    })));
                    file = Some(f);
                    left -= n as u64;
                }
                Err(e) => {
                    // Shorter than when it was opened (or unreadable): the length
                    // promised cannot be kept, so the answer is cut off.
                    tracing::warn!(
                        "web root: reading {} failed part way, the answer is cut off: {e}",
                        path.display()
                    );
                    slot.send(Err(e));
                    return;
                }
            }
        }
    }
}

/// What `GET raw_path` finds under `files_dir`, or `None` when there is no such
/// file (the request stays unmatched). Blocks (see [`WebRoot::answer`]).
fn find(files_dir: &Path, raw_path: &str) -> Option<Found> {
    let rel = relative_path(raw_path)?;
    let root = files_dir.canonicalize().ok()?;
    let target = root.join(&rel);
    let meta = std::fs::metadata(&target).ok()?;
    if meta.is_dir() {
        for (name, content_type) in WELCOME {
            let file = target.join(name);
            // A welcome name that is not a regular file is passed over.
            if let Some(found @ Found::File { .. }) = open_file(&root, &file, content_type) {
                return Some(found);
            }
        }
        // Inside __files? Then the folder exists and lists nothing: 403.
        inside(&root, &target)?;
        return Some(Found::Page(forbidden(raw_path)));
    }
    open_file(&root, &target, content_type_for(&target))
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

/// `file` opened with its headers; a page refusing it when it is not a regular file;
/// `None` when it is missing, outside the root or cannot be opened.
fn open_file(root: &Path, file: &Path, content_type: &str) -> Option<Found> {
    let canon = inside(root, file)?;
    let (opened, meta) = match open_regular(&canon) {
        Ok(f) => f,
        Err(FileError::NotRegular(what)) => return Some(Found::Page(refused(root, &canon, what))),
        Err(_) => return None,
    };
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
    Some(Found::File {
        plan,
        file: opened,
        len: meta.len(),
        path: canon,
    })
}

/// The answer for a path naming a FIFO, a device or a socket under `__files`: 500,
/// naming it and what it is, and a log line saying the same.
fn refused(root: &Path, file: &Path, what: &str) -> ResponsePlan {
    let name = file.strip_prefix(root).unwrap_or(file).display();
    let message = format!(
        "__files/{name} is {what}, not a regular file: only regular files are served from __files"
    );
    tracing::warn!("web root: {message}");
    text_plan(500, message)
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
        .binary_search_by(|(e, _)| (*e).cmp(ext.as_str()))
        .map_or(DEFAULT_TYPE, |i| MIME_TYPES[i].1)
}

/// Extensions and the types WireMock 3.13.2 sends for them: its servlet container's
/// whole table (Jetty's `mime.properties`, as the standalone jar ships it), sorted
/// by extension for a binary search. Others, `yaml`, `md`, `ttf`, `docx` among them,
/// get [`DEFAULT_TYPE`], as there.
const MIME_TYPES: &[(&str, &str)] = &[
    ("ai", "application/postscript"),
    ("aif", "audio/x-aiff"),
    ("aifc", "audio/x-aiff"),
    ("aiff", "audio/x-aiff"),
    ("apk", "application/vnd.android.package-archive"),
    ("apng", "image/apng"),
    ("asc", "text/plain"),
    ("asf", "video/x.ms.asf"),
    ("asx", "video/x.ms.asx"),
    ("au", "audio/basic"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bcpio", "application/x-bcpio"),
    ("bin", "application/octet-stream"),
    ("bmp", "image/bmp"),
    ("br", "application/brotli"),
    ("cab", "application/x-cabinet"),
    ("cdf", "application/x-netcdf"),
    ("chm", "application/vnd.ms-htmlhelp"),
    ("class", "application/java-vm"),
    ("cpio", "application/x-cpio"),
    ("cpt", "application/mac-compactpro"),
    ("crt", "application/x-x509-ca-cert"),
    ("csh", "application/x-csh"),
    ("css", "text/css"),
    ("csv", "text/csv"),
    ("dcr", "application/x-director"),
    ("dir", "application/x-director"),
    ("dll", "application/x-msdownload"),
    ("dms", "application/octet-stream"),
    ("doc", "application/msword"),
    ("dtd", "application/xml-dtd"),
    ("dvi", "application/x-dvi"),
    ("dxr", "application/x-director"),
    ("eot", "application/vnd.ms-fontobject"),
    ("eps", "application/postscript"),
    ("etx", "text/x-setext"),
    ("exe", "application/octet-stream"),
    ("ez", "application/andrew-inset"),
    ("gif", "image/gif"),
    ("gtar", "application/x-gtar"),
    ("gz", "application/gzip"),
    ("gzip", "application/gzip"),
    ("hdf", "application/x-hdf"),
    ("hqx", "application/mac-binhex40"),
    ("htc", "text/x-component"),
    ("htm", "text/html"),
    ("html", "text/html"),
    ("ice", "x-conference/x-cooltalk"),
    ("ico", "image/x-icon"),
    ("ief", "image/ief"),
    ("iges", "model/iges"),
    ("igs", "model/iges"),
    ("jad", "text/vnd.sun.j2me.app-descriptor"),
    ("jar", "application/java-archive"),
    ("java", "text/plain"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("jp2", "image/jpeg2000"),
    ("jpe", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "text/javascript"),
    ("json", "application/json"),
    ("jsp", "text/html"),
    ("kar", "audio/midi"),
    ("latex", "application/x-latex"),
    ("lha", "application/octet-stream"),
    ("lzh", "application/octet-stream"),
    ("man", "application/x-troff-man"),
    ("mathml", "application/mathml+xml"),
    ("me", "application/x-troff-me"),
    ("mesh", "model/mesh"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("mif", "application/vnd.mif"),
    ("mjs", "text/javascript"),
    ("mol", "chemical/x-mdl-molfile"),
    ("mov", "video/quicktime"),
    ("movie", "video/x-sgi-movie"),
    ("mp2", "audio/mpeg"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpe", "video/mpeg"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("mpga", "audio/mpeg"),
    ("ms", "application/x-troff-ms"),
    ("msh", "model/mesh"),
    ("msi", "application/octet-stream"),
    ("nc", "application/x-netcdf"),
    ("oda", "application/oda"),
    ("odb", "application/vnd.oasis.opendocument.database"),
    ("odc", "application/vnd.oasis.opendocument.chart"),
    ("odf", "application/vnd.oasis.opendocument.formula"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odi", "application/vnd.oasis.opendocument.image"),
    ("odm", "application/vnd.oasis.opendocument.text-master"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("ogg", "application/ogg"),
    ("otc", "application/vnd.oasis.opendocument.chart-template"),
    ("otf", "application/vnd.oasis.opendocument.formula-template"),
    (
        "otg",
        "application/vnd.oasis.opendocument.graphics-template",
    ),
    ("oth", "application/vnd.oasis.opendocument.text-web"),
    ("oti", "application/vnd.oasis.opendocument.image-template"),
    (
        "otp",
        "application/vnd.oasis.opendocument.presentation-template",
    ),
    (
        "ots",
        "application/vnd.oasis.opendocument.spreadsheet-template",
    ),
    ("ott", "application/vnd.oasis.opendocument.text-template"),
    ("pbm", "image/x-portable-bitmap"),
    ("pdb", "chemical/x-pdb"),
    ("pdf", "application/pdf"),
    ("pgm", "image/x-portable-graymap"),
    ("pgn", "application/x-chess-pgn"),
    ("png", "image/png"),
    ("pnm", "image/x-portable-anymap"),
    ("ppm", "image/x-portable-pixmap"),
    ("pps", "application/vnd.ms-powerpoint"),
    ("ppt", "application/vnd.ms-powerpoint"),
    ("ps", "application/postscript"),
    ("qml", "text/x-qml"),
    ("qt", "video/quicktime"),
    ("ra", "audio/x-pn-realaudio"),
    ("ram", "audio/x-pn-realaudio"),
    ("rar", "application/x-rar-compressed"),
    ("ras", "image/x-cmu-raster"),
    ("rdf", "application/rdf+xml"),
    ("rgb", "image/x-rgb"),
    ("rm", "audio/x-pn-realaudio"),
    ("roff", "application/x-troff"),
    ("rpm", "application/x-rpm"),
    ("rtf", "application/rtf"),
    ("rtx", "text/richtext"),
    ("rv", "video/vnd.rn-realvideo"),
    ("ser", "application/java-serialized-object"),
    ("sgm", "text/sgml"),
    ("sgml", "text/sgml"),
    ("sh", "application/x-sh"),
    ("shar", "application/x-shar"),
    ("silo", "model/mesh"),
    ("sit", "application/x-stuffit"),
    ("skd", "application/x-koan"),
    ("skm", "application/x-koan"),
    ("skp", "application/x-koan"),
    ("skt", "application/x-koan"),
    ("smi", "application/smil"),
    ("smil", "application/smil"),
    ("snd", "audio/basic"),
    ("spl", "application/x-futuresplash"),
    ("src", "application/x-wais-source"),
    ("sv4cpio", "application/x-sv4cpio"),
    ("sv4crc", "application/x-sv4crc"),
    ("svg", "image/svg+xml"),
    ("svgz", "image/svg+xml"),
    ("swf", "application/x-shockwave-flash"),
    ("t", "application/x-troff"),
    ("tar", "application/x-tar"),
    ("tar.gz", "application/x-gtar"),
    ("tcl", "application/x-tcl"),
    ("tex", "application/x-tex"),
    ("texi", "application/x-texinfo"),
    ("texinfo", "application/x-texinfo"),
    ("tgz", "application/x-gtar"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tr", "application/x-troff"),
    ("tsv", "text/tab-separated-values"),
    ("txt", "text/plain"),
    ("ustar", "application/x-ustar"),
    ("vcd", "application/x-cdlink"),
    ("vrml", "model/vrml"),
    ("vxml", "application/voicexml+xml"),
    ("wasm", "application/wasm"),
    ("wav", "audio/x-wav"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("webp", "image/webp"),
    ("wml", "text/vnd.wap.wml"),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wmls", "text/vnd.wap.wmlscript"),
    ("wmlsc", "application/vnd.wap.wmlscriptc"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("wrl", "model/vrml"),
    (
        "wtls-ca-certificate",
        "application/vnd.wap.wtls-ca-certificate",
    ),
    ("xbm", "image/x-xbitmap"),
    ("xcf", "image/xcf"),
    ("xht", "application/xhtml+xml"),
    ("xhtml", "application/xhtml+xml"),
    ("xls", "application/vnd.ms-excel"),
    ("xml", "application/xml"),
    ("xpm", "image/x-xpixmap"),
    ("xsd", "application/xml"),
    ("xsl", "application/xml"),
    ("xslt", "application/xslt+xml"),
    ("xul", "application/vnd.mozilla.xul+xml"),
    ("xwd", "image/x-xwindowdump"),
    ("xyz", "chemical/x-xyz"),
    ("xz", "application/x-xz"),
    ("z", "application/compress"),
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

    /// What a client gets for `GET path`: the plan and the body, the file read whole.
    fn answer(files: &Path, path: &str) -> Option<(ResponsePlan, Vec<u8>)> {
        Some(match find(files, path)? {
            Found::Page(plan) => {
                let body = plan.body.to_vec();
                (plan, body)
            }
            Found::File { plan, mut file, .. } => {
                let mut body = Vec::new();
                file.read_to_end(&mut body).unwrap();
                (plan, body)
            }
        })
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
    fn the_type_table_is_jettys_whole_and_sorted_for_its_binary_search() {
        assert!(MIME_TYPES.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(MIME_TYPES.len(), 200);
        // Seen in a real user's root: WireMock 3.13.2 sends these, decoy sent JSON's.
        assert_eq!(content_type_for(Path::new("a/blob.mp2")), "audio/mpeg");
        assert_eq!(content_type_for(Path::new("mol.XYZ")), "chemical/x-xyz");
        assert_eq!(content_type_for(Path::new("notes.yaml")), DEFAULT_TYPE);
    }

    #[test]
    fn a_file_is_served_with_the_type_its_extension_gives() {
        let dir = root();
        let files = dir.path().join("__files");
        let (p, body) = answer(&files, "/a.html").unwrap();
        assert_eq!(p.status, 200);
        assert_eq!(body, b"<h1>a</h1>");
        assert_eq!(content_type_of(&p), Some("text/html"));
        let (p, _) = answer(&files, "/data").unwrap();
        assert_eq!(content_type_of(&p), Some("application/json"));
        let (p, _) = answer(&files, "/sp%20ace.TXT").unwrap();
        assert_eq!(content_type_of(&p), Some("text/plain"));
    }

    #[test]
    fn a_folder_answers_with_its_welcome_file_or_403() {
        let dir = root();
        let files = dir.path().join("__files");
        let (p, body) = answer(&files, "/docs/").unwrap();
        assert_eq!(body, b"idx");
        assert_eq!(content_type_of(&p), Some("text/html;charset=utf-8"));
        assert_eq!(answer(&files, "/docs").unwrap().0.status, 200);
        assert_eq!(answer(&files, "/empty").unwrap().0.status, 403);
        assert!(answer(&files, "/missing.txt").is_none());
    }

    #[test]
    fn nothing_outside_the_web_root_is_served() {
        let dir = root();
        let files = dir.path().join("__files");
        assert!(answer(&files, "/../secret.txt").is_none());
        assert!(answer(&files, "/%2e%2e/secret.txt").is_none());
        assert!(answer(&files, "/docs/../../secret.txt").is_none());
        assert_eq!(answer(&files, "/docs/../a.html").unwrap().0.status, 200);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), files.join("link.txt"))
                .unwrap();
            std::os::unix::fs::symlink(dir.path(), files.join("up")).unwrap();
            assert!(answer(&files, "/link.txt").is_none());
            assert!(answer(&files, "/up/secret.txt").is_none());
            assert!(answer(&files, "/up").is_none());
            // What WireMock does too: a link to a device is a link out of the root.
            std::os::unix::fs::symlink("/dev/zero", files.join("zero.bin")).unwrap();
            assert!(answer(&files, "/zero.bin").is_none());
        }
    }

    /// Waits (a while at most) until `done` holds.
    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "still not {what}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The body read to its end, each chunk dropped once copied, as a connection
    /// drops it once written (collecting the chunks would keep their shares).
    async fn read_whole(mut body: FileBody) -> Vec<u8> {
        use http_body_util::BodyExt as _;
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            out.extend_from_slice(frame.unwrap().data_ref().unwrap());
        }
        out
    }

    /// A root holding `big.bin`, ten chunks and a bit, each byte different from its
    /// neighbours; and its contents.
    fn big_root() -> (tempfile::TempDir, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("__files");
        std::fs::create_dir_all(&files).unwrap();
        let content: Vec<u8> = (0..10 * CHUNK + 5).map(|i| (i % 251) as u8).collect();
        std::fs::write(files.join("big.bin"), &content).unwrap();
        (dir, content)
    }

    #[tokio::test]
    async fn the_bytes_read_for_answers_not_yet_sent_stay_within_the_bound_and_go_with_them() {
        let (dir, content) = big_root();
        let bound = 4 * CHUNK;
        let web = WebRoot::with_bound(dir.path().join("__files"), bound);
        let mut bodies = Vec::new();
        for _ in 0..6 {
            let served = web.answer("/big.bin").await.unwrap();
            assert_eq!(
                served.body.as_ref().unwrap().size_hint().exact(),
                Some(content.len() as u64)
            );
            bodies.push(served.body.unwrap());
        }
        // Nobody reads: four answers hold a chunk each, and the rest wait for room.
        until("all of the bound in use", || {
            web.in_flight.available_permits() == 0
        })
        .await;
        let last = bodies.pop().unwrap();
        drop(bodies);
        // With the others gone, the last answer is read whole through the bound.
        assert!(read_whole(last).await == content);
        until("every chunk freed", || {
            web.in_flight.available_permits() == bound
        })
        .await;
    }

    #[tokio::test]
    async fn answers_read_at_once_share_a_bound_smaller_than_one_file() {
        let (dir, content) = big_root();
        let web = WebRoot::with_bound(dir.path().join("__files"), 2 * CHUNK);
        let mut readers = Vec::new();
        for _ in 0..3 {
            let body = web.answer("/big.bin").await.unwrap().body.unwrap();
            readers.push(tokio::spawn(read_whole(body)));
        }
        for r in readers {
            assert!(r.await.unwrap() == content);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_with_500_naming_it_and_a_fifo_welcome_file_is_passed_over() {
        let dir = root();
        let files = dir.path().join("__files");
        let mkfifo = |p: PathBuf| {
            let made = std::process::Command::new("mkfifo").arg(p).status();
            assert!(made.unwrap().success());
        };
        mkfifo(files.join("pipe.txt"));
        mkfifo(files.join("empty/index.html"));
        // No writer ever comes: a plain open would never return.
        let (p, body) = answer(&files, "/pipe.txt").unwrap();
        assert_eq!(p.status, 500);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "__files/pipe.txt is a FIFO (named pipe), not a regular file: only regular files are served from __files"
        );
        assert_eq!(answer(&files, "/empty/").unwrap().0.status, 403);
    }
}
