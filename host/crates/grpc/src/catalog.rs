//! The services a root declares: every descriptor set (`*.dsc`, `*.desc`: `protoc
//! --descriptor_set_out`, as the WireMock gRPC extension reads them) and every
//! `.proto` file (compiled here with protox, imports resolved under `grpc/` and
//! Google's well-known types built in) under the root's `grpc/` folder, in one
//! descriptor pool, and the method table calls are routed by.
//!
//! Loading never stops at a bad file: a descriptor set that does not decode, a
//! `.proto` that does not compile, a file that clashes with one read before, each is
//! reported with its file (and line and column for a `.proto`) and left out; the
//! services of every other file are served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use decoy_core::mapping::load::Problem;
use decoy_spec::fields::FieldError;
use prost::Message as _;
use prost_reflect::prost_types::{FileDescriptorProto, FileDescriptorSet};
use prost_reflect::{DescriptorPool, MethodDescriptor, ServiceDescriptor};

/// The folder of a root that holds descriptors and protos.
pub const DIR: &str = "grpc";

/// What a root's `grpc/` folder declares.
#[derive(Debug, Clone)]
pub struct Catalog {
    pool: DescriptorPool,
    /// `/<package>.<Service>/<Method>` → the method.
    methods: HashMap<String, MethodDescriptor>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
    /// Descriptor and proto files read.
    pub files: usize,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            pool: DescriptorPool::new(),
            methods: HashMap::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            files: 0,
        }
    }
}

/// The kind of file a path under `grpc/` is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    DescriptorSet,
    Proto,
}

pub fn file_kind(path: &Path) -> Option<FileKind> {
    match path.extension()?.to_str()? {
        "dsc" | "desc" => Some(FileKind::DescriptorSet),
        "proto" => Some(FileKind::Proto),
        _ => None,
    }
}

impl Catalog {
    /// Reads `root/grpc`. A root with no such folder declares nothing.
    pub fn load(root: &Path) -> Catalog {
        let dir = root.join(DIR);
        let mut cat = Catalog::default();
        if !dir.is_dir() {
            return cat;
        }
        let mut files = Vec::new();
        walk(&dir, &mut files, &mut cat.problems, root);
        files.sort();
        let (sets, protos): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|p| file_kind(p) == Some(FileKind::DescriptorSet));
        cat.files = sets.len() + protos.len();
        let mut pool = DescriptorPool::new();
        for path in &sets {
            cat.add_set(&mut pool, root, path);
        }
        if !protos.is_empty() {
            cat.compile_protos(&mut pool, root, &dir, &protos);
        }
        cat.methods = pool
            .services()
            .flat_map(|s| s.methods().collect::<Vec<_>>())
            .map(|m| (path_of(&m), m))
            .collect();
        cat.pool = pool;
        cat
    }

    /// The method a request path names (`/<package>.<Service>/<Method>`).
    pub fn method(&self, path: &str) -> Option<&MethodDescriptor> {
        self.methods.get(path)
    }

    /// The paths of every method served (`/<package>.<Service>/<Method>`).
    pub fn method_paths(&self) -> impl Iterator<Item = &str> {
        self.methods.keys().map(String::as_str)
    }

    /// Whether some descriptor declares the service `name` (`package.Service`).
    pub fn service(&self, name: &str) -> Option<ServiceDescriptor> {
        self.pool.get_service_by_name(name)
    }

    /// Whether some descriptor declares the package `name`.
    pub fn has_package(&self, name: &str) -> bool {
        self.pool.files().any(|f| f.package_name() == name)
    }

    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    pub fn services(&self) -> impl Iterator<Item = ServiceDescriptor> + '_ {
        self.pool.services()
    }

    pub fn method_count(&self) -> usize {
        self.methods.len()
    }

    fn problem(&mut self, root: &Path, file: &Path, reason: String) {
        self.problems.push(Problem {
            file: rel(root, file),
            stub: None,
            error: FieldError::new("", reason),
        });
    }

    fn add_set(&mut self, pool: &mut DescriptorPool, root: &Path, path: &Path) {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => return self.problem(root, path, format!("cannot read it: {e}")),
        };
        let set = match FileDescriptorSet::decode(&bytes[..]) {
            Ok(s) if !s.file.is_empty() => s,
            Ok(_) => {
                return self.problem(
                    root,
                    path,
                    "holds no file descriptor: it is not a descriptor set (make one with \
                     protoc --descriptor_set_out=FILE --include_imports)"
                        .into(),
                );
            }
            Err(e) => {
                return self.problem(
                    root,
                    path,
                    format!(
                        "is not a descriptor set ({e}): make one with protoc \
                         --descriptor_set_out=FILE --include_imports"
                    ),
                );
            }
        };
        let in_set: Vec<String> = set.file.iter().map(|f| f.name().to_owned()).collect();
        for file in set.file {
            self.add_file(pool, root, path, file, &in_set);
        }
    }

    fn add_file(
        &mut self,
        pool: &mut DescriptorPool,
        root: &Path,
        path: &Path,
        file: FileDescriptorProto,
        in_set: &[String],
    ) {
        if let Some(have) = pool.get_file_by_name(file.name()) {
            if *have.file_descriptor_proto() != file && !file.name().starts_with("google/protobuf/")
            {
                self.warnings.push(Problem {
                    file: rel(root, path),
                    stub: None,
                    error: FieldError::new(
                        "",
                        format!(
                            "{} is also declared, differently, by a file read before: the first is kept",
                            file.name()
                        ),
                    ),
                });
            }
            return;
        }
        // A set made without --include_imports: the well-known types it imports are
        // built in (the extension accepts such sets too).
        for dep in &file.dependency {
            if pool.get_file_by_name(dep).is_none()
                && !in_set.contains(dep)
                && let Some(wkt) = well_known(dep)
            {
                for f in wkt.file {
                    if pool.get_file_by_name(f.name()).is_none() {
                        let _ = pool.add_file_descriptor_proto(f);
                    }
                }
            }
        }
        let name = file.name().to_owned();
        if let Err(e) = pool.add_file_descriptor_proto(file) {
            self.problem(
                root,
                path,
                format!("{name} is left out: {e} (a descriptor set made without --include_imports misses the files it imports)"),
            );
        }
    }

    fn compile_protos(
        &mut self,
        pool: &mut DescriptorPool,
        root: &Path,
        dir: &Path,
        protos: &[PathBuf],
    ) {
        for path in protos {
            let Ok(name) = path.strip_prefix(dir) else {
                continue;
            };
            // One compiler per file, so one file's error leaves the others in.
            let mut compiler = match protox::Compiler::new([dir]) {
                Ok(c) => c,
                Err(e) => return self.problem(root, dir, format!("cannot read it: {e}")),
            };
            compiler.include_imports(true);
            if let Err(e) = compiler.open_file(name) {
                let reason = proto_error(&e, dir);
                self.problem(root, path, reason);
                continue;
            }
            let set = compiler.file_descriptor_set();
            let in_set: Vec<String> = set.file.iter().map(|f| f.name().to_owned()).collect();
            for file in set.file {
                self.add_file(pool, root, path, file, &in_set);
            }
        }
    }
}

/// A protox error with the line and column it points at, when it has a span.
fn proto_error(e: &protox::Error, dir: &Path) -> String {
    use miette::Diagnostic as _;
    let mut text = e.to_string();
    let at = e.labels().and_then(|mut l| l.next()).map(|l| l.offset());
    if let (Some(offset), Some(file)) = (at, e.file())
        && let Ok(source) = std::fs::read_to_string(dir.join(file))
        && offset <= source.len()
    {
        let before = &source[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        text = format!("{file}:{line}:{col}: {text}");
    } else if let Some(file) = e.file() {
        text = format!("{file}: {text}");
    }
    format!("does not compile: {text}")
}

/// Google's well-known type `name` (`google/protobuf/empty.proto`) and what it imports.
fn well_known(name: &str) -> Option<FileDescriptorSet> {
    if !name.starts_with("google/protobuf/") {
        return None;
    }
    let mut c = protox::Compiler::with_file_resolver(protox::file::GoogleFileResolver::new());
    c.include_imports(true);
    c.open_file(name).ok()?;
    Some(c.file_descriptor_set())
}

/// `/<package>.<Service>/<Method>`.
pub fn path_of(m: &MethodDescriptor) -> String {
    format!("/{}/{}", m.parent_service().full_name(), m.name())
}

fn rel(root: &Path, p: &Path) -> PathBuf {
    p.strip_prefix(root).unwrap_or(p).to_path_buf()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, problems: &mut Vec<Problem>, root: &Path) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(Problem {
                file: rel(root, dir),
                stub: None,
                error: FieldError::new("", format!("cannot read the folder: {e}")),
            });
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            walk(&path, out, problems, root);
        } else if file_kind(&path).is_some() {
            out.push(path);
        }
    }
}
