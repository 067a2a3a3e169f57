//! Starting a server from options: load the root, start watching it, bind the ports,
//! spawn the listeners.
//!
//! This is what `decoy serve` runs, as a library function so tests can start a real
//! server on port 0 in-process and stop it again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use tokio::sync::watch;

use crate::admin::Admin;
use crate::http::proxy::ProxyClient;
use crate::http::{self, HttpConfig, Role, Services};
use decoy_core::engine::Engine;
use decoy_core::journal::Journal;
use decoy_core::mapping::load::{LoadReport, load_root_with};
use decoy_core::metrics::Metrics;
use decoy_core::serve::{Outcomes, Serve};
use decoy_core::store::Store;

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
    /// Watch `mappings/` and `__files/` and reload on change (`--no-watch` turns it off).
    pub watch: bool,
    /// Serve the admin API on its own port instead of under `/__admin` on `port`.
    pub admin_port: Option<u16>,
    /// Admin requests need `Authorization: Bearer <token>` (kept as a digest, never logged).
    pub admin_token: Option<crate::admin::auth::AdminToken>,
    /// Journal capacity; 0 turns the journal off.
    pub journal_entries: usize,
    /// The journal's byte budget (`--max-request-journal-bytes`).
    pub journal_max_bytes: usize,
    /// Bodies kept truncated past this size (`--max-request-journal-body-size`).
    pub journal_max_body: usize,
    /// How long a proxied request may take.
    pub proxy_timeout: std::time::Duration,
    /// Where `<name>.wasm` plugins are looked for (default `<root-dir>/plugins`).
    pub plugins_dir: Option<PathBuf>,
    /// Compiled plugin code kept between runs (`None`: compile on every start).
    pub plugin_cache_dir: Option<PathBuf>,
    /// `--global-response-templating`: every stub goes through `response-template`.
    pub global_templating: bool,
    /// `--state`: share scenarios, API stubs, the journal and plugin `kv` in Redis.
    pub state: Option<decoy_state::Options>,
    /// Keystore, truststore and client certificates for the HTTPS port (the PEM
    /// `https_cert`/`https_key` above take the place of its `cert`/`key`).
    pub tls: crate::http::tls::TlsSettings,
    /// `--disable-http`: no plain HTTP listener (then `https_port` is required).
    pub disable_http: bool,
    /// `--proxy-all URL`: a stub at priority 10 forwarding every request to URL.
    pub proxy_all: Option<String>,
    /// `--preserve-host-header`: proxied requests keep the client's `Host`.
    pub preserve_host_header: bool,
    /// `--proxy-via`: the forward proxy proxied requests go through.
    pub proxy_via: Option<crate::http::via::ProxyVia>,
    /// `--allow-proxy-targets` / `--deny-proxy-targets`, as written.
    pub allow_proxy_targets: Option<String>,
    pub deny_proxy_targets: Option<String>,
    /// `--record-mappings`: proxied answers are written into `mappings/` and `__files/`.
    pub record_mappings: bool,
    /// `--match-headers`: request headers recorded as `equalTo` matches.
    pub match_headers: Vec<String>,
    /// `--filename-template`: how saved and recorded stub files are named.
    pub filenames: decoy_core::filenames::FilenameMaker,
    /// `--webhook-threadpool-size`, `--max-pending-webhook-bytes`: webhooks sent at
    /// once, and how many may wait.
    pub webhooks: crate::webhooks::WebhookLimits,
    /// `--max-body-file-size`: the largest file a stub's `bodyFileName` may name.
    pub max_body_file_size: u64,
    /// `--mq-threads`: the threads MQ mappings are served on (default: one per core
    /// but one, at least one).
    pub mq_threads: Option<usize>,
}

impl ServeOptions {
    /// How mappings are parsed for these options (plugins, templating).
    pub fn parse_context(&self) -> decoy_core::mapping::ParseContext {
        decoy_core::mapping::ParseContext {
            files_dir: decoy_core::mapping::load::files_dir(&self.root_dir),
            max_body_file_size: self.max_body_file_size,
            plugins: Some(Arc::new(decoy_plugin_host::Plugins::new(
                Some(
                    self.plugins_dir
                        .clone()
                        .unwrap_or_else(|| self.root_dir.join("plugins")),
                ),
                self.plugin_cache_dir.clone(),
            ))),
            global_templating: self.global_templating,
        }
    }
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
            watch: true,
            admin_port: None,
            admin_token: None,
            journal_entries: decoy_core::journal::DEFAULT_MAX_ENTRIES,
            journal_max_bytes: decoy_core::journal::DEFAULT_MAX_BYTES,
            journal_max_body: decoy_core::journal::DEFAULT_MAX_BODY,
            proxy_timeout: crate::http::proxy::DEFAULT_TIMEOUT,
            plugins_dir: None,
            plugin_cache_dir: decoy_plugin_host::Plugins::default_cache_dir(),
            global_templating: false,
            state: None,
            tls: Default::default(),
            disable_http: false,
            proxy_all: None,
            preserve_host_header: false,
            proxy_via: None,
            allow_proxy_targets: None,
            deny_proxy_targets: None,
            record_mappings: false,
            match_headers: Vec::new(),
            filenames: Default::default(),
            webhooks: Default::default(),
            max_body_file_size: decoy_core::mapping::DEFAULT_MAX_BODY_FILE_SIZE,
            mq_threads: None,
        }
    }
}

/// The `*.json` files directly in the root that transports read (their
/// configuration): the stub loader leaves them alone.
pub const TRANSPORT_ROOT_FILES: &[&str] = &decoy_mq::config::CONNECTION_FILES;

/// A started server. Dropping it does not stop it; call [`Running::shutdown`].
#[derive(Debug)]
pub struct Running {
    /// The stub port: plain HTTP, or the HTTPS port under `--disable-http`.
    pub http_addr: SocketAddr,
    /// `--disable-http` was given: `http_addr` is the HTTPS listener.
    pub http_disabled: bool,
    pub https_addr: Option<SocketAddr>,
    /// Where the admin API listens when `--admin-port` was given.
    pub admin_addr: Option<SocketAddr>,
    pub engine: Arc<Engine>,
    pub store: Arc<Store>,
    pub admin: Arc<Admin>,
    /// What loading the root found (rejected mappings, warnings).
    pub report: LoadSummary,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Keeps the file watcher alive.
    _watcher: Option<crate::watch::WatchHandle>,
    /// Message-queue virtual services, when the root has MQ mappings.
    mq: Arc<decoy_mq::MqService>,
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
        self.wait().await;
    }

    /// Resolves when every listener has stopped (after a shutdown signal) and the
    /// MQ side has sent the replies it had in flight. The two drain at once, so
    /// stopping takes the longer of their drains (5 s, 10 s), not their sum.
    pub async fn wait(self) {
        let mut stopped = self.stop.subscribe();
        let listeners = async {
            for t in self.tasks {
                let _ = t.await;
            }
        };
        tokio::pin!(listeners);
        let listeners_ended = tokio::select! {
            _ = &mut listeners => true,
            _ = stopped.wait_for(|s| *s) => false,
        };
        if listeners_ended {
            self.mq.shutdown().await;
        } else {
            tokio::join!(listeners, self.mq.shutdown());
        }
    }

    pub fn stopper(&self) -> watch::Sender<bool> {
        self.stop.clone()
    }
}

/// WireMock's `--proxy-all` stub: any request, priority 10, proxied to `url`.
fn proxy_all_stub(url: &str) -> anyhow::Result<serde_json::Value> {
    let parsed: ::http::Uri = url
        .parse()
        .map_err(|e| anyhow::anyhow!("--proxy-all {url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.authority().is_none() {
        bail!("--proxy-all {url:?} is not an http:// or https:// URL");
    }
    Ok(serde_json::json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "name": "--proxy-all",
        "priority": 10,
        "request": { "method": "ANY" },
        "response": { "proxyBaseUrl": url.trim_end_matches('/') },
    }))
}

/// The warning logged at start when anyone who can reach the machine can use the
/// admin API: it listens on a non-loopback address and needs neither `--admin-token`
/// nor `--admin-api-basic-auth`. `None` when it is protected or local only.
pub fn open_admin_warning(opts: &ServeOptions) -> Option<String> {
    if opts.admin_token.is_some() || opts.http.admin_basic_auth.is_some() {
        return None;
    }
    let ip: std::net::IpAddr = opts.bind_address.parse().ok()?;
    if ip.is_loopback() {
        return None;
    }
    Some(format!(
        "the admin API is reachable on {} without --admin-token: anyone who can reach this \
         address can read the request journal and change, save or delete stubs and files; \
         set --admin-token (or DECOY_ADMIN_TOKEN) or --bind-address 127.0.0.1",
        opts.bind_address
    ))
}

/// How long a mapping reload waits for a plugin it names to compile, once serving.
pub const PLUGIN_LOAD_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// Loads `opts.root_dir` and starts listening. Must run inside a tokio runtime.
pub async fn start(opts: ServeOptions) -> anyhow::Result<Running> {
    if opts.disable_http && opts.https_port.is_none() {
        bail!("--disable-http needs --https-port: HTTPS must be enabled if HTTP is not");
    }
    if opts.record_mappings && opts.journal_entries == 0 {
        bail!(
            "--record-mappings cannot be used with --no-request-journal: the request journal must be enabled to record stubs"
        );
    }
    let proxy_targets = crate::http::targets::ProxyTargets::parse(
        opts.allow_proxy_targets.as_deref(),
        opts.deny_proxy_targets.as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    let proxy_all = match &opts.proxy_all {
        Some(url) => Some(proxy_all_stub(url)?),
        None => None,
    };
    // Read the keystores before anything is loaded, so a bad one fails fast.
    let tls = match opts.https_port {
        Some(_) => {
            let mut settings = opts.tls.clone();
            settings.cert = opts.https_cert.clone();
            settings.key = opts.https_key.clone();
            let mut cfg = http::tls::server_config_from(&settings)?;
            if !opts.http.http2_tls {
                Arc::make_mut(&mut cfg).alpn_protocols = vec![b"http/1.1".to_vec()];
            }
            Some(cfg)
        }
        None => None,
    };
    if let Some(w) = open_admin_warning(&opts) {
        tracing::warn!("{w}");
    }
    // Shared state first: plugins loaded with the mappings use its `kv`.
    let shared = match &opts.state {
        Some(o) => Some(
            decoy_state::SharedState::connect(o)
                .await
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let root = opts.root_dir.clone();
    let ctx = opts.parse_context();
    if let (Some(s), Some(p)) = (&shared, &ctx.plugins) {
        p.set_shared_kv(s.clone());
    }
    let load_ctx = ctx.clone();
    let report =
        tokio::task::spawn_blocking(move || load_root_with(&root, &load_ctx, TRANSPORT_ROOT_FILES))
            .await
            .context("loading mappings")?
            .with_context(|| format!("cannot load mappings from {}", opts.root_dir.display()))?;
    let mq_root = opts.root_dir.clone();
    let plugins = ctx.plugins.clone();
    let mq_plugins = plugins.clone();
    let max_body_file_size = opts.max_body_file_size;
    let mq_load = tokio::task::spawn_blocking(move || {
        decoy_mq::config::load_with(&mq_root, mq_plugins.as_deref(), max_body_file_size)
    })
    .await
    .context("loading MQ mappings")?;
    let grpc_root = opts.root_dir.clone();
    let grpc_catalog = tokio::task::spawn_blocking(move || decoy_grpc::Catalog::load(&grpc_root))
        .await
        .context("loading gRPC descriptors")?;
    let mut summary = LoadSummary::from(&report);
    summary.loaded += mq_load.mappings.len();
    summary.rejected += mq_load.rejected;
    summary
        .problems
        .extend(mq_load.problems.iter().map(|p| p.to_string()));
    summary
        .warnings
        .extend(mq_load.warnings.iter().map(|p| p.to_string()));
    summary
        .problems
        .extend(grpc_catalog.problems.iter().map(|p| p.to_string()));
    summary
        .warnings
        .extend(grpc_catalog.warnings.iter().map(|p| p.to_string()));
    if opts.strict && (summary.rejected > 0 || !grpc_catalog.problems.is_empty()) {
        bail!(
            "{} mapping(s) rejected and --strict is set:\n  {}",
            summary.rejected,
            summary.problems.join("\n  ")
        );
    }
    // From now on a mapping (re)load never waits long for a plugin to compile: a
    // plugin still compiling after this is served as 503 until it is ready.
    if let Some(p) = &plugins {
        p.set_load_wait(Some(PLUGIN_LOAD_WAIT));
    }
    let engine = Arc::new(match &shared {
        Some(s) => Engine::with_shared_scenarios(s.clone()),
        None => Engine::new(Vec::new()),
    });
    let store = Arc::new(
        Store::with_context(&opts.root_dir, engine.clone(), ctx)
            .with_filenames(opts.filenames.clone()),
    );
    store.install_initial(report);
    release_freed_memory();
    if let Some(stub) = proxy_all {
        let mapping =
            decoy_core::mapping::Mapping::parse(&stub, store.context(), None, &mut Vec::new())
                .map_err(|errs| {
                    anyhow::anyhow!(
                        "--proxy-all: {}",
                        errs.iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                })?;
        store
            .upsert(mapping)
            .map_err(|e| anyhow::anyhow!("--proxy-all: {e}"))?;
    }
    let metrics = Arc::new(Metrics::default());
    // Registered first: the metrics list HTTP's rows before the brokers'.
    let http_metrics = metrics.transport(http::TRANSPORT);
    if let Some(s) = &shared {
        metrics.add_section(s.clone());
    }
    // One outbound client for proxy stubs, recording and webhooks: one pool, and the
    // target rules applied to every request decoy makes of its own.
    let outbound = Arc::new(crate::http::client::Outbound::new(
        proxy_targets,
        opts.proxy_via.clone(),
    ));
    let webhooks =
        crate::webhooks::WebhookSender::new(opts.webhooks, outbound.clone(), metrics.clone());
    let mq = decoy_mq::MqService::start(
        &opts.root_dir,
        mq_load,
        opts.mq_threads
            .unwrap_or_else(decoy_core::threads::default_threads),
        &metrics,
        plugins,
        opts.max_body_file_size,
        Some(Arc::new(webhooks.clone())),
    )?;
    // `message` listeners publish on the MQ side's connections.
    webhooks.set_publisher(mq.publisher());
    let journal = Arc::new(Journal::with_limits(decoy_core::journal::JournalLimits {
        max_entries: opts.journal_entries,
        max_bytes: opts.journal_max_bytes,
        max_body: opts.journal_max_body,
    }));
    // `--record-mappings`: proxied HTTP answers and gRPC calls written as stubs.
    let recorder = opts.record_mappings.then(|| {
        Arc::new(crate::http::recorder::Recorder::new(
            &opts.root_dir,
            opts.match_headers.clone(),
        ))
    });
    let grpc = crate::grpc::start(
        &opts.root_dir,
        grpc_catalog,
        decoy_core::serve::Serve::new(
            engine.clone(),
            journal.clone(),
            decoy_core::serve::Outcomes::register(
                &metrics,
                decoy_grpc::TRANSPORT,
                Some(webhooks.clone()),
            ),
            recorder.clone(),
            opts.http.verbose,
        ),
        ProxyClient::new(outbound.clone(), opts.proxy_timeout)
            .preserving_host(opts.preserve_host_header),
    );
    metrics.add_section(grpc.method_metrics());
    // Start watching in the background while the listeners come up (setting up the
    // watches on a large tree takes tens of milliseconds); `start` returns only once
    // it is in place, and a rescan then catches what changed on disk in between.
    let watcher = opts.watch.then(|| {
        let store = store.clone();
        let mq = mq.clone();
        let root = opts.root_dir.clone();
        let grpc = grpc.clone();
        tokio::task::spawn_blocking(move || {
            match crate::watch::spawn(store.clone(), mq, Some(grpc)) {
                Ok(w) => {
                    store.rescan(false);
                    // The rescan read and hashed every file on this thread after the
                    // start's trim: its lists and buffers (1.4 MiB with 10,000 files)
                    // would stay in this thread's arena.
                    release_freed_memory();
                    // Plugin files changed after their first compilation checked them
                    // and before the watch was in place (in the background: it
                    // compiles).
                    if let Some(p) = store.context().plugins.clone() {
                        tokio::task::spawn_blocking(move || p.reload_changed());
                    }
                    Some(w)
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot watch {} for changes ({e}); serving without hot reload",
                        root.display()
                    );
                    None
                }
            }
        })
    });
    let (stop, stop_rx) = watch::channel(false);

    if let Some(s) = &shared {
        // From here on API changes and journal queries go through the shared state;
        // `attach` returns once the shared stub list is live here.
        store.set_replica(s.clone());
        journal.set_peers(s.clone());
        s.attach(store.clone(), journal.clone()).await;
    }
    let proxy =
        ProxyClient::new(outbound, opts.proxy_timeout).preserving_host(opts.preserve_host_header);
    let admin = Arc::new(Admin {
        store: store.clone(),
        journal: journal.clone(),
        metrics: metrics.clone(),
        shutdown: stop.clone(),
        token: opts.admin_token.clone(),
        started: std::time::Instant::now(),
        recorder: Default::default(),
        mq: Some(mq.clone()),
        grpc: Some(grpc.clone()),
        live: Default::default(),
    });
    // Every connection is a file descriptor: use all the process may have, and cap
    // connections below that so mapping files, plugins and proxied calls still open.
    let fd_limit = http::conns::raise_fd_limit();
    let max_connections = opts
        .http
        .max_connections
        .unwrap_or_else(|| http::conns::default_max_connections(fd_limit));
    if let Some(limit) = fd_limit
        && max_connections as u64 >= limit
    {
        tracing::warn!(
            "--max-connections {max_connections} is not below the open-file limit of {limit}: \
             connections may use up every file descriptor"
        );
    }
    tracing::info!("accepting at most {max_connections} connections at once");
    let services = Arc::new(Services {
        connections: http::conns::ConnLimit::new(max_connections),
        serve: Serve::new(
            engine.clone(),
            journal,
            Outcomes::new(http_metrics, Some(webhooks)),
            recorder,
            opts.http.verbose,
        ),
        proxy,
        admin: Some(admin.clone()),
        web_root: Some(http::webroot::WebRoot::new(
            decoy_core::mapping::load::files_dir(&opts.root_dir),
        )),
        cfg: opts.http.clone(),
        grpc: Some(grpc),
    });
    let stub_role = if opts.admin_port.is_some() {
        Role::Stubs
    } else {
        Role::StubsAndAdmin
    };

    // The dashboard's per-second figures, kept whether or not a page is open.
    let mut tasks = vec![tokio::spawn(crate::admin::dashboard::sample(admin.clone()))];
    // The stub ports, served on the threads `--thread-layout` says; the admin port
    // on this (the shared) runtime, as everything but the stub ports is.
    let ip: std::net::IpAddr = opts.bind_address.parse().map_err(|_| {
        anyhow::anyhow!(
            "cannot listen on {}: {:?} is not an IP address",
            opts.bind_address,
            opts.bind_address
        )
    })?;
    let mut stub_ports = Vec::new();
    if !opts.disable_http {
        stub_ports.push(http::threads::PortSpec {
            ip,
            port: opts.port,
            tls: None,
            role: stub_role,
            purpose: "",
        });
    }
    if let (Some(port), Some(tls)) = (opts.https_port, tls) {
        stub_ports.push(http::threads::PortSpec {
            ip,
            port,
            tls: Some(tls),
            role: stub_role,
            purpose: " for HTTPS",
        });
    }
    let layout = opts.http.layout;
    let threads = match layout {
        http::threads::Layout::Shared => 1,
        _ => opts
            .http
            .threads
            .unwrap_or_else(decoy_core::threads::default_threads),
    };
    let stubs =
        http::threads::start(layout, threads, &services, stub_ports, stop_rx.clone()).await?;
    if layout == http::threads::Layout::Shared {
        tracing::info!("serving HTTP on the shared runtime (--thread-layout shared)");
    } else {
        tracing::info!("serving HTTP on {threads} thread(s) (--thread-layout {layout})");
    }
    tasks.extend(stubs.tasks);
    let mut stub_addrs = stubs.addrs.into_iter();
    let http_addr = if opts.disable_http {
        None
    } else {
        stub_addrs.next()
    };
    let https_addr = stub_addrs.next();
    let mut admin_addr = None;
    if let Some(port) = opts.admin_port {
        let admin_port = http::threads::PortSpec {
            ip,
            port,
            tls: None,
            role: Role::Admin,
            purpose: " for the admin API",
        };
        let started = http::threads::start(
            http::threads::Layout::Shared,
            1,
            &services,
            vec![admin_port],
            stop_rx,
        )
        .await?;
        admin_addr = started.addrs.first().copied();
        tasks.extend(started.tasks);
    }
    let watcher = match watcher {
        Some(task) => task.await.context("starting the file watcher")?,
        None => None,
    };
    let Some(http_addr) = http_addr.or(https_addr) else {
        bail!("no listener was started");
    };
    Ok(Running {
        http_addr,
        http_disabled: opts.disable_http,
        https_addr,
        admin_addr,
        engine,
        store,
        admin,
        report: summary,
        stop,
        tasks,
        _watcher: watcher,
        mq,
    })
}

/// An HTTP stub's serve-event listeners with the file and stub they belong to, for
/// [`decoy_mq::check_listeners`].
pub fn listeners_of(
    m: &Arc<decoy_core::mapping::Mapping>,
) -> Option<(
    std::path::PathBuf,
    Option<decoy_core::mapping::load::StubRef>,
    &decoy_core::webhooks::Webhooks,
)> {
    let hooks = m.webhooks.as_ref()?;
    let file = m
        .source
        .as_ref()
        .map(|s| s.file.clone())
        .unwrap_or_default();
    let stub = decoy_core::mapping::load::StubRef::for_mapping(m);
    Some((file, Some(stub), hooks))
}

/// Gives the memory that loading the root freed back to the system.
///
/// The root is parsed on one thread per core, and glibc's malloc gives each thread
/// an arena of its own: what a loading thread freed (each file's text and parsed
/// JSON, the loader's lists) stays in its arena, where only a thread later attached
/// to that arena can reuse it, while the serving threads allocate in theirs, so it
/// stayed resident for the life of the process. `malloc_trim` hands the free pages
/// of every arena back (about 2 MiB with 10,000 one-stub files); the watcher's first
/// rescan, which reads every file again, calls it once more. Fewer arenas
/// (`M_ARENA_MAX=1`) would let the serving threads reuse that memory instead, and
/// measured 4 MiB less, but cost 11-14% of the throughput (`bench/ab.py`): every
/// serving thread then waits for one arena's lock. musl's allocator has no arenas
/// and no such call.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer and only returns free memory; it takes
    // each arena's lock itself, so other threads may allocate meanwhile.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
