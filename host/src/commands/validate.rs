//! `decoy validate`: load like `serve`, report every problem, fail if any mapping is rejected.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use decoy_core::mapping::ParseContext;
use decoy_core::mapping::load::{load_root_with, shadowed_stubs};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Directory holding `mappings/` and `__files/`.
    #[arg(long, default_value = ".", value_name = "DIR")]
    root_dir: PathBuf,
    /// Treat warnings as failures too (unknown fields, unknown transformers, missing
    /// body files, body patterns with two operators, stubs that can never answer).
    #[arg(long)]
    strict: bool,
    /// Largest file a stub's bodyFileName may name, as `decoy serve
    /// --max-body-file-size` will allow it: a stub naming a larger one is an error.
    #[arg(long, default_value_t = decoy_core::mapping::DEFAULT_MAX_BODY_FILE_SIZE, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_body_file_size: u64,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut ctx = ParseContext::for_root(&args.root_dir);
    ctx.max_body_file_size = args.max_body_file_size;
    let mut report = load_root_with(&args.root_dir, &ctx, decoy::server::TRANSPORT_ROOT_FILES)
        .with_context(|| format!("cannot load mappings from {}", args.root_dir.display()))?;
    // Beyond WireMock, which serves such roots silently: stubs that can never answer.
    let shadowed = shadowed_stubs(&report.mappings);
    report.warnings.extend(shadowed);
    for w in &report.warnings {
        super::say::out(format_args!("warning: {w}"));
    }
    for p in &report.problems {
        super::say::out(format_args!("error: {p}"));
    }
    super::say::out(format_args!(
        "{} file(s): {} mapping(s) valid, {} rejected, {} warning(s)",
        report.files,
        report.mappings.len(),
        report.rejected,
        report.warnings.len()
    ));
    let mq = decoy_mq::config::load_with(
        &args.root_dir,
        ctx.plugins.as_deref(),
        args.max_body_file_size,
    );
    if !mq.is_empty() || !mq.problems.is_empty() {
        for w in &mq.warnings {
            super::say::out(format_args!("warning: {w}"));
        }
        for p in &mq.problems {
            super::say::out(format_args!("error: {p}"));
        }
        super::say::out(format_args!(
            "MQ: {} connection(s), {} mapping(s) valid, {} rejected, {} problem(s), {} warning(s)",
            mq.connections.len(),
            mq.mappings.len(),
            mq.rejected,
            mq.problems.len(),
            mq.warnings.len()
        ));
    }
    // `message` listeners of HTTP stubs and MQ mappings naming no connection.
    let connections: Vec<String> = mq.connections.iter().map(|c| c.id.clone()).collect();
    let listener_problems = decoy_mq::check_listeners(
        &connections,
        report
            .mappings
            .iter()
            .filter_map(decoy::server::listeners_of)
            .chain(mq.mappings.iter().filter_map(|m| {
                let stub = m.stub_ref();
                m.webhooks.as_ref().map(|w| (m.file.clone(), Some(stub), w))
            })),
    );
    for p in &listener_problems {
        super::say::out(format_args!("error: {p}"));
    }
    // gRPC: the descriptors under grpc/, and the stubs on gRPC paths against them.
    let grpc = decoy_grpc::Catalog::load(&args.root_dir);
    let (stub_problems, grpc_warnings) =
        decoy_grpc::check::check(&grpc, report.mappings.iter(), ctx.global_templating);
    let grpc_problems: Vec<_> = grpc.problems.iter().cloned().chain(stub_problems).collect();
    if grpc.files > 0 || !grpc_problems.is_empty() {
        for w in grpc.warnings.iter().chain(&grpc_warnings) {
            super::say::out(format_args!("warning: {w}"));
        }
        for p in &grpc_problems {
            super::say::out(format_args!("error: {p}"));
        }
        super::say::out(format_args!(
            "gRPC: {} file(s), {} method(s), {} problem(s)",
            grpc.files,
            grpc.method_count(),
            grpc_problems.len()
        ));
    }
    // A check that passes on nothing is a trap in CI (a wrong --root-dir, or files
    // put directly in the root instead of under mappings/).
    let nothing = report.files == 0 && mq.is_empty() && mq.problems.is_empty();
    if nothing {
        super::say::out(format_args!(
            "error: no mapping files found: decoy reads every *.json file under {} (and MQ mappings under {})",
            args.root_dir.join("mappings").display(),
            args.root_dir.join("mq-mappings").display()
        ));
    }
    let failed = nothing
        || report.rejected > 0
        || !mq.problems.is_empty()
        || !listener_problems.is_empty()
        || !grpc_problems.is_empty()
        || (args.strict && !(report.warnings.is_empty() && mq.warnings.is_empty()));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
