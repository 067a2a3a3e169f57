//! Starting a server from options: load the root, bind the ports, spawn the listeners.
//!
//! This is what `decoy serve` runs, as a library function so tests can start a real
//! server on port 0 in-process and stop it again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use tokio::sync::watch;

use crate::engine::Engine;
use crate::http::{self, HttpConfig};
use crate::mapping::load::{LoadReport, load_root};

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub root_dir: PathBuf,
    pub bind_address: String,
    pub port: u16,
    pub https_port: Option<u16>,
    pub https_cert: Option<PathBuf>,
    pub https_key: Option<PathBuf>,
    pub http: HttpConfig,
    /// Refuse to start when any mapping is rejected.
    pub strict: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            root_dir: PathBuf::from("."),
            bind_address: "0.0.0.0".into(),
            port: 8080,
            https_port: None,
            https_cert: None,
            https_key: None,
            http: HttpConfig::default(),
            strict: false,
        }
    }
}

/// A started server. Dropping it does not stop it; call [`Running::shutdown`].
#[derive(Debug)]
pub struct Running {
    pub http_addr: SocketAddr,
    pub https_addr: Option<SocketAddr>,
    pub engine: Arc<Engine>,
    /// What loading the root found (rejected mappings, warnings).
    pub report: LoadSummary,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The parts of a [`LoadReport`] worth keeping after start.
#[derive(Debug, Clone)]
pub struct LoadSummary {
    pub loaded: usize,
    pub rejected: usize,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

impl From<&LoadReport> for LoadSummary {
    fn from(r: &LoadReport) -> Self {
        LoadSummary {
            loaded: r.mappings.len(),
            rejected: r.rejected,
            problems: r.problems.iter().map(|p| p.to_string()).collect(),
            warnings: r.warnings.iter().map(|p| p.to_string()).collect(),
        }
    }
}

impl Running {
    /// Stops accepting, lets in-flight requests finish (up to 5 s), and returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// Resolves when every listener has stopped (after a shutdown signal).
    pub async fn wait(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }

    pub fn stopper(&self) -> watch::Sender<bool> {
        self.stop.clone()
    }
}

/// Loads `opts.root_dir` and starts listening. Must run inside a tokio runtime.
pub async fn start(opts: ServeOptions) -> anyhow::Result<Running> {
    let root = opts.root_dir.clone();
    let report = tokio::task::spawn_blocking(move || load_root(&root))
        .await
        .context("loading mappings")?
        .with_context(|| format!("cannot load mappings from {}", opts.root_dir.display()))?;
    let summary = LoadSummary::from(&report);
    if opts.strict && report.rejected > 0 {
        bail!(
            "{} mapping(s) rejected and --strict is set:\n  {}",
            report.rejected,
            summary.problems.join("\n  ")
        );
    }
    let engine = Arc::new(Engine::new(report.mappings));
    let cfg = Arc::new(opts.http.clone());
    let (stop, stop_rx) = watch::channel(false);

    let listener = http::bind(&opts.bind_address, opts.port)
        .await
        .with_context(|| format!("cannot listen on {}:{}", opts.bind_address, opts.port))?;
    let http_addr = listener.local_addr()?;
    let mut tasks = vec![tokio::spawn(http::serve(
        listener,
        None,
        engine.clone(),
        cfg.clone(),
        stop_rx.clone(),
    ))];

    let mut https_addr = None;
    if let Some(port) = opts.https_port {
        let tls = http::tls::server_config(opts.https_cert.as_deref(), opts.https_key.as_deref())?;
        let listener = http::bind(&opts.bind_address, port)
            .await
            .with_context(|| format!("cannot listen on {}:{port} for HTTPS", opts.bind_address))?;
        https_addr = Some(listener.local_addr()?);
        tasks.push(tokio::spawn(http::serve(
            listener,
            Some(tls),
            engine.clone(),
            cfg,
            stop_rx,
        )));
    }
    Ok(Running {
        http_addr,
        https_addr,
        engine,
        report: summary,
        stop,
        tasks,
    })
}
