//! `decoy serve`: flags follow WireMock's standalone runner where one exists.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use decoy::http::{DEFAULT_MAX_BODY, HttpConfig};
use decoy::server::{ServeOptions, start};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory holding `mappings/` (every *.json below it) and `__files/`.
    #[arg(long, default_value = ".", value_name = "DIR")]
    root_dir: PathBuf,
    /// HTTP port; 0 picks a free one (printed when ready). HTTP/1.1 and h2c.
    #[arg(long, default_value_t = 8080, value_name = "N")]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    bind_address: String,
    /// Also serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) on this port.
    #[arg(long, value_name = "N")]
    https_port: Option<u16>,
    /// PEM certificate chain for HTTPS (default: a self-signed one for localhost).
    #[arg(long, value_name = "FILE", requires = "https_key")]
    https_cert: Option<PathBuf>,
    /// PEM private key for --https-cert.
    #[arg(long, value_name = "FILE", requires = "https_cert")]
    https_key: Option<PathBuf>,
    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    max_request_body_size: usize,
    /// Refuse to start if any mapping is rejected.
    #[arg(long)]
    strict: bool,
    /// Log every request and which mapping answered it.
    #[arg(long)]
    verbose: bool,

    // WireMock flags accepted so existing scripts keep working; they change nothing
    // here, because decoy is always asynchronous and never logs per request unless
    // --verbose is given.
    #[arg(long, hide = true)]
    disable_banner: bool,
    #[arg(long, hide = true)]
    disable_request_logging: bool,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    async_response_enabled: Option<String>,
    #[arg(long, hide = true)]
    async_response_threads: Option<u32>,
    #[arg(long, hide = true)]
    container_threads: Option<u32>,
    #[arg(long, hide = true)]
    jetty_acceptor_threads: Option<u32>,
    #[arg(long, hide = true)]
    jetty_accept_queue_size: Option<u32>,
    #[arg(long, hide = true)]
    disable_gzip: bool,
    #[arg(long, hide = true)]
    no_request_journal: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    decoy_logging(args.verbose);
    let opts = ServeOptions {
        root_dir: args.root_dir,
        bind_address: args.bind_address,
        port: args.port,
        https_port: args.https_port,
        https_cert: args.https_cert,
        https_key: args.https_key,
        http: HttpConfig {
            max_body: args.max_request_body_size,
            verbose: args.verbose,
        },
        strict: args.strict,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let running = start(opts).await?;
        for w in &running.report.warnings {
            eprintln!("warning: {w}");
        }
        for p in &running.report.problems {
            eprintln!("rejected: {p}");
        }
        let mut line = format!(
            "decoy {} listening on http://{}",
            env!("CARGO_PKG_VERSION"),
            running.http_addr
        );
        if let Some(a) = running.https_addr {
            line.push_str(&format!(" and https://{a}"));
        }
        line.push_str(&format!(
            " (mappings: {} loaded, {} rejected)",
            running.report.loaded, running.report.rejected
        ));
        println!("{line}");
        let _ = std::io::stdout().flush();

        let stop = running.stopper();
        tokio::spawn(async move {
            wait_for_signal().await;
            eprintln!("decoy: shutting down");
            let _ = stop.send(true);
        });
        running.wait().await;
        Ok(ExitCode::SUCCESS)
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn decoy_logging(verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
