//! `decoy record`: serve a root directory as a recording proxy to a real service, and
//! write what went through as mappings when stopped (Ctrl-C).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use decoy::server::start;
use serde_json::json;

use super::serve::{ServeArgs, announce, decoy_logging, runtime, wait_for_signal};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The real service to record, such as `https://api.example.com`.
    #[arg(long, value_name = "URL")]
    target: String,
    /// Record this request header too (repeatable), as an `equalTo` match.
    #[arg(long = "capture-header", value_name = "NAME")]
    capture_headers: Vec<String>,
    /// Keep response bodies up to this size inline; larger ones go to __files/.
    #[arg(long, value_name = "BYTES")]
    text_size_threshold: Option<u64>,
    /// Record repeated identical requests once instead of as a scenario.
    #[arg(long)]
    no_scenarios: bool,
    #[command(flatten)]
    serve: ServeArgs,
}

pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    decoy_logging(&args.serve.logging());
    for line in args.serve.ignored() {
        super::say::notice("WARN", format_args!("decoy: {line}"));
    }
    let workers = args.serve.worker_threads();
    let mut spec = json!({
        "targetBaseUrl": args.target,
        "repeatsAsScenarios": !args.no_scenarios,
        "persist": true,
    });
    if !args.capture_headers.is_empty() {
        spec["captureHeaders"] = args
            .capture_headers
            .iter()
            .map(|h| (h.clone(), json!({})))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    if let Some(t) = args.text_size_threshold {
        spec["extractBodyCriteria"] = json!({ "textSizeThreshold": t, "binarySizeThreshold": t });
    }
    let spec = decoy::admin::record::Spec::parse(&spec)
        .map_err(|(_, why)| anyhow::anyhow!("invalid recording options: {why}"))?;
    let mut opts = args.serve.options();
    // A new recording folder is made, as WireMock's recorder makes its own.
    std::fs::create_dir_all(opts.root_dir.join("mappings"))
        .with_context(|| format!("cannot create {}", opts.root_dir.join("mappings").display()))?;
    if opts.journal_entries == 0 {
        anyhow::bail!("recording reads the request journal: drop --no-request-journal");
    }
    opts.journal_entries = opts.journal_entries.max(100_000);
    // Every proxied exchange is needed when the recording stops: no byte budget.
    opts.journal_max_bytes = usize::MAX;
    runtime(workers)?.block_on(async move {
        let running = start(opts).await?;
        let admin = running.admin.clone();
        admin
            .recorder
            .start(&running.store, spec)
            .map_err(|(_, why)| anyhow::anyhow!("cannot start recording: {why}"))?;
        announce(&running);
        super::say::notice(
            "INFO",
            format_args!(
                "recording: requests to http://{} are forwarded to {}; press Ctrl-C to stop and write the mappings",
                running.http_addr, args.target
            ),
        );
        wait_for_signal().await;
        let store = running.store.clone();
        let result = tokio::task::spawn_blocking(move || {
            let events = admin.journal.newest_first().map_err(|e| (503, e.to_string()))?;
            admin.recorder.stop(&store, &events)
        })
        .await
        .context("writing the recording")?
        .map_err(|(_, why)| anyhow::anyhow!("cannot stop recording: {why}"))?;
        let n = result["mappings"].as_array().map_or(0, Vec::len);
        super::say::notice(
            "INFO",
            format_args!(
                "decoy: recorded {n} mapping(s) into {}",
                running.store.root().join("mappings").display()
            ),
        );
        running.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
