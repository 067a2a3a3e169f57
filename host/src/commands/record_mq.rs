//! `decoy record-mq`: record real MQ back ends into `mq-mappings/` (forward each
//! request, pass the reply back, and on Ctrl-C write one mapping per distinct
//! request). The routes come from a JSON file (`--routes`) or, for one route, from
//! flags; both go through the same checks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};

use super::serve::{Logging, decoy_logging, runtime, wait_for_signal};
use decoy_mq::record::{self, Recording, spec};

#[derive(Debug, Args)]
pub struct RecordMqArgs {
    /// Root directory: `mq-connections.json` is read from it, `mq-mappings/` and
    /// `__files/` written into it.
    #[arg(long, default_value = ".", value_name = "DIR")]
    root_dir: PathBuf,
    /// The recording description (routes and options), a JSON file; see docs/mq.md.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["listen", "forward"])]
    routes: Option<PathBuf>,
    /// One route: the connection (may be left out when there is one).
    #[arg(long, value_name = "ID")]
    connection: Option<String>,
    /// One route: where the system under test sends requests (`NAME`, or
    /// `topic:NAME`).
    #[arg(long, value_name = "DEST", requires = "forward")]
    listen: Option<String>,
    /// One route: where the real back end takes them.
    #[arg(long, value_name = "DEST", requires = "listen")]
    forward: Option<String>,
    /// One route: the back end replies on this fixed queue (paired by correlation
    /// id) instead of a reply destination of decoy's own.
    #[arg(long, value_name = "DEST")]
    reply_queue: Option<String>,
    /// With --reply-queue: MSGID_TO_CORRELID (default) or COPY_CORRELID.
    #[arg(long, value_name = "RULE", requires = "reply_queue")]
    pair_by: Option<String>,
    /// With --reply-queue: where requesters read replies, when not their reply-to.
    #[arg(long, value_name = "DEST", requires = "reply_queue")]
    pass_to: Option<String>,
    /// How long a forwarded request waits for its reply (default 30000).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Match recorded JSON requests on this JSONPath's value (repeatable).
    #[arg(long = "match-json-path", value_name = "PATH")]
    match_json_paths: Vec<String>,
    /// Match recorded XML requests on this XPath's value (repeatable).
    #[arg(long = "match-xpath", value_name = "XPATH")]
    match_xpaths: Vec<String>,
    /// Record this request property as an `equalTo` match (repeatable).
    #[arg(long = "match-property", value_name = "NAME")]
    match_properties: Vec<String>,
    /// Reply bodies larger than this go into __files/.
    #[arg(long, value_name = "BYTES")]
    text_size_threshold: Option<String>,
    /// Requests forwarded and not yet answered, at most (default 10000).
    #[arg(long, value_name = "N")]
    max_outstanding: Option<u64>,
    /// Stop by itself after this many seconds (as Ctrl-C does).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<u64>,
    /// Log at info level.
    #[arg(long)]
    verbose: bool,
    /// Log filter (`debug`, `decoy_mq=debug`...).
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
}

fn destination(s: &str) -> Value {
    match s.strip_prefix("topic:") {
        Some(t) => json!({ "name": t, "type": "TOPIC" }),
        None => json!({ "name": s, "type": "QUEUE" }),
    }
}

impl RecordMqArgs {
    /// The flags as a recording description, merged over the file's options.
    fn description(&self) -> anyhow::Result<(Value, String)> {
        let (mut v, shown) = match &self.routes {
            Some(file) => {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                let v: Value = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not JSON", file.display()))?;
                (v, file.display().to_string())
            }
            None => {
                let (Some(listen), Some(forward)) = (&self.listen, &self.forward) else {
                    anyhow::bail!(
                        "say what to record: --routes FILE, or --listen DEST --forward DEST"
                    );
                };
                let mut route = json!({
                    "listen": destination(listen),
                    "forward": destination(forward),
                });
                if let Some(c) = &self.connection {
                    route["connectionId"] = json!(c);
                }
                if let Some(q) = &self.reply_queue {
                    let mut reply = json!({ "queue": destination(q) });
                    if let Some(p) = &self.pair_by {
                        reply["pairBy"] = json!(p);
                    }
                    if let Some(p) = &self.pass_to {
                        reply["passTo"] = destination(p);
                    }
                    route["reply"] = reply;
                }
                (json!({ "routes": [route] }), "the command line".to_owned())
            }
        };
        if let Some(obj) = v.as_object_mut() {
            let mut set = |k: &str, x: Value| {
                obj.insert(k.to_owned(), x);
            };
            if let Some(t) = self.timeout_ms {
                set("timeoutMilliseconds", json!(t));
            }
            if !self.match_json_paths.is_empty() {
                set("matchJsonPaths", json!(self.match_json_paths));
            }
            if !self.match_xpaths.is_empty() {
                set("matchXPaths", json!(self.match_xpaths));
            }
            if !self.match_properties.is_empty() {
                set("matchProperties", json!(self.match_properties));
            }
            if let Some(t) = &self.text_size_threshold {
                set(
                    "textSizeThreshold",
                    t.parse::<u64>().map_or_else(|_| json!(t), |n| json!(n)),
                );
            }
            if let Some(n) = self.max_outstanding {
                set("maxOutstanding", json!(n));
            }
        }
        Ok((v, shown))
    }
}

pub fn run(args: RecordMqArgs) -> anyhow::Result<ExitCode> {
    decoy_logging(&Logging {
        verbose: args.verbose,
        level: args.log_level.clone(),
        json: false,
    });
    let root = args.root_dir.clone();
    let load = decoy_mq::config::load(&root);
    let connection_problems: Vec<String> = load
        .problems
        .iter()
        .filter(|p| {
            p.file
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("connections.json"))
        })
        .map(ToString::to_string)
        .collect();
    if !connection_problems.is_empty() {
        anyhow::bail!(
            "the broker connections have problems:\n  {}",
            connection_problems.join("\n  ")
        );
    }
    if load.connections.is_empty() {
        anyhow::bail!(
            "no broker connection in {}: add mq-connections.json (see docs/mq.md)",
            root.display()
        );
    }
    let (v, shown) = args.description()?;
    let spec = spec::parse(&v, &load.connections).map_err(|errors| {
        anyhow::anyhow!(
            "the recording description has problems:\n  {}",
            errors
                .iter()
                .map(|e| format!("{shown}: {e}"))
                .collect::<Vec<_>>()
                .join("\n  ")
        )
    })?;
    let brokers = record::brokers_for(&load.connections, &spec)?;
    let routes = spec.routes.len();
    let duration = args.duration.map(Duration::from_secs);
    runtime(None)?.block_on(async move {
        let recording = Recording::start(&root, spec, &brokers)?;
        super::say::out(format!(
            "decoy {} recording {routes} MQ route(s) into {}; press Ctrl-C to stop and write the mappings",
            env!("CARGO_PKG_VERSION"),
            root.join("mq-mappings").display()
        ));
        match duration {
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {},
                    _ = wait_for_signal() => {},
                }
            }
            None => wait_for_signal().await,
        }
        let summary = recording
            .stop()
            .await
            .map_err(|e| anyhow::anyhow!("cannot write the recording: {e}"))?;
        for n in &summary.notes {
            super::say::notice("WARN", format_args!("note: {n}"));
        }
        super::say::out(format!(
            "decoy: recorded {} mapping(s) into {} ({} forwarded, {} replies passed on, {} repeats, {} without a reply in time, {} replies unpaired, {} replies for a requester whose reply queue was gone)",
            summary.files.len(),
            root.join("mq-mappings").display(),
            summary.forwarded,
            summary.passed_on,
            summary.repeats,
            summary.timed_out,
            summary.unpaired,
            summary.not_passed_on
        ));
        Ok(ExitCode::SUCCESS)
    })
}
