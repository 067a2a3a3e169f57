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
    /// Log level: error, warn, info, debug or trace (default: warn, with plugin
    /// output and plugin `log` calls at info; RUST_LOG overrides both).
    #[arg(long, value_name = "LEVEL", value_parser = ["error", "warn", "info", "debug", "trace"])]
    log_level: Option<String>,
    /// Log line format on stderr.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Do not watch mappings/ and __files/ for changes (hot reload is on by default).
    #[arg(long)]
    no_watch: bool,
    /// Serve the admin API on this port only (and not under /__admin on --port).
    #[arg(long, value_name = "N")]
    admin_port: Option<u16>,
    /// Require `Authorization: Bearer TOKEN` on admin requests; others get 401.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "DECOY_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// Keep at most this many requests in the journal (oldest dropped first).
    #[arg(long, default_value_t = decoy_core::journal::DEFAULT_MAX_ENTRIES, value_name = "N")]
    max_request_journal_entries: usize,
    /// Keep no request journal (the admin API's request endpoints then list nothing).
    #[arg(long)]
    no_request_journal: bool,
    /// How long a proxied request (proxyBaseUrl, recording) may take, in milliseconds.
    #[arg(long, default_value_t = decoy::http::proxy::DEFAULT_TIMEOUT.as_millis() as u64, value_name = "MS")]
    proxy_timeout: u64,
    /// Where plugins named by mappings are looked for, as <name>.wasm
    /// (default: <root-dir>/plugins; bundled plugins need no file).
    #[arg(long, value_name = "DIR")]
    plugins_dir: Option<PathBuf>,
    /// Where compiled plugin code is kept between runs
    /// (default: $XDG_CACHE_HOME/decoy/plugins or ~/.cache/decoy/plugins).
    #[arg(long, value_name = "DIR")]
    plugin_cache_dir: Option<PathBuf>,
    /// Compile plugins on every start; keep nothing on disk.
    #[arg(long, conflicts_with = "plugin_cache_dir")]
    no_plugin_cache: bool,
    /// Template every stub's response (as if each named the response-template
    /// transformer), as WireMock's flag does.
    #[arg(long)]
    global_response_templating: bool,
    /// WireMock's flag for per-stub templating, which decoy always does.
    #[arg(long, hide = true)]
    local_response_templating: bool,

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
}

impl ServeArgs {
    /// What `decoy_logging` needs.
    pub fn logging(&self) -> Logging {
        Logging {
            verbose: self.verbose,
            level: self.log_level.clone(),
            json: self.log_format == "json",
        }
    }

    pub fn options(self) -> ServeOptions {
        ServeOptions {
            root_dir: self.root_dir,
            bind_address: self.bind_address,
            port: self.port,
            https_port: self.https_port,
            https_cert: self.https_cert,
            https_key: self.https_key,
            http: HttpConfig {
                max_body: self.max_request_body_size,
                verbose: self.verbose,
            },
            strict: self.strict,
            watch: !self.no_watch,
            admin_port: self.admin_port,
            admin_token: self.admin_token.filter(|t| !t.is_empty()),
            journal_entries: if self.no_request_journal {
                0
            } else {
                self.max_request_journal_entries
            },
            proxy_timeout: std::time::Duration::from_millis(self.proxy_timeout),
            plugins_dir: self.plugins_dir,
            plugin_cache_dir: if self.no_plugin_cache {
                None
            } else {
                self.plugin_cache_dir
                    .or_else(decoy_plugin_host::Plugins::default_cache_dir)
            },
            global_templating: self.global_response_templating,
        }
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    decoy_logging(&args.logging());
    let opts = args.options();
    runtime()?.block_on(async move {
        let running = start(opts).await?;
        announce(&running);
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

/// The multi-threaded tokio runtime every serving command runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Prints load problems and the ready line (which tests and scripts wait for).
pub fn announce(running: &decoy::server::Running) {
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
    if let Some(a) = running.admin_addr {
        line.push_str(&format!(", admin API on http://{a}/__admin"));
    }
    line.push_str(&format!(
        " (mappings: {} loaded, {} rejected)",
        running.report.loaded, running.report.rejected
    ));
    println!("{line}");
    let _ = std::io::stdout().flush();
}

pub async fn wait_for_signal() {
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

/// Logging choices from the command line.
#[derive(Debug, Clone, Default)]
pub struct Logging {
    pub verbose: bool,
    pub level: Option<String>,
    pub json: bool,
}

pub fn decoy_logging(opts: &Logging) {
    // lapin logs every message the broker returns (a reply to a queue that no
    // longer exists) at WARN with its whole content; decoy says it in one line.
    // Plugins' `log` calls and their stdout/stderr (target `plugin`) show at info.
    let default = match (&opts.level, opts.verbose) {
        (Some(l), _) => format!("{l},lapin::returned_messages=error"),
        (None, true) => "info,lapin::returned_messages=error".to_owned(),
        (None, false) => "warn,plugin=info,lapin::returned_messages=error".to_owned(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if opts.json {
        builder.json().try_init()
    } else {
        // Colours only on a terminal: redirected logs stay plain text.
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}
