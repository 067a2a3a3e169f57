//! `decoy serve`: flags follow WireMock's standalone runner where one exists.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use decoy::http::via::ProxyVia;
use decoy::http::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY, HttpConfig, tls};
use decoy::server::{ServeOptions, start};

#[derive(Debug, Args)]
#[command(
    after_help = "Options are also read from the environment variables WIREMOCK_OPTIONS and DECOY_OPTIONS \
                  (as the wiremock/wiremock image reads WIREMOCK_OPTIONS), wherever decoy serve runs, \
                  container or not; an option given on the command line wins over both."
)]
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
        hide_env_values = true,
        value_parser = admin_token
    )]
    admin_token: Option<TokenArg>,
    /// Keep at most this many requests in the journal (oldest dropped first).
    #[arg(long, default_value_t = decoy_core::journal::DEFAULT_MAX_ENTRIES, value_name = "N")]
    max_request_journal_entries: usize,
    /// Keep at most this many bytes in the journal, estimated (oldest dropped first).
    #[arg(long, default_value_t = decoy_core::journal::DEFAULT_MAX_BYTES, value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_request_journal_bytes: usize,
    /// Keep request bodies (and answers built for the request) longer than this
    /// truncated in the journal, flagged `bodyTruncated` (proxied exchanges whole).
    #[arg(long, default_value_t = decoy_core::journal::DEFAULT_MAX_BODY, value_name = "BYTES")]
    max_request_journal_body_size: usize,
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
    /// Share scenario states, admin-API stubs, the request journal and plugin `kv`
    /// with every instance pointed at the same Redis 7 or Valkey (for several
    /// instances behind a load balancer; docs/scale-out.md).
    #[arg(long, value_name = "redis://HOST:PORT/DB", env = "DECOY_STATE")]
    state: Option<String>,
    /// With --state: how long one call to Redis may take before it fails (a 503 for
    /// the request or admin call that needed it), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = decoy_state::DEFAULT_TIMEOUT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    state_timeout: u64,
    /// With --state: start even when Redis cannot be reached, and keep trying
    /// (default: refuse to start, with the reason).
    #[arg(long, requires = "state")]
    state_retry: bool,
    /// With --state: the deployment these instances form. Instances share state only
    /// with instances of the same name; every Redis key and channel starts with
    /// `NAME:`, so several deployments can share one Redis.
    #[arg(long, value_name = "NAME", env = "DECOY_STATE_NAME", default_value = decoy_state::DEFAULT_NAME, value_parser = state_name)]
    state_name: String,
    /// WireMock's flag for per-stub templating, which decoy always does.
    #[arg(long, hide = true)]
    local_response_templating: bool,

    // ---- WireMock 3 options decoy carries out (docs/lifecycle.md, "Command line") ----
    /// Do not listen for plain HTTP (needs --https-port).
    #[arg(long, conflicts_with = "port")]
    disable_http: bool,
    /// Answer CORS preflights and add CORS headers to stub answers, as WireMock does.
    #[arg(long)]
    enable_stub_cors: bool,
    /// Admin requests need HTTP Basic credentials `user:password`; others get 401.
    #[arg(long, value_name = "USER:PASSWORD", value_parser = basic_auth)]
    admin_api_basic_auth: Option<String>,
    /// Admin requests over plain HTTP get 403.
    #[arg(long)]
    admin_api_require_https: bool,
    /// Forward every request no stub answers (a priority-10 stub) to this base URL.
    #[arg(long, value_name = "URL")]
    proxy_all: Option<String>,
    /// Send proxied requests through this HTTP proxy (CONNECT for https targets).
    #[arg(long, value_name = "[USER:PASSWORD@]HOST:PORT", value_parser = ProxyVia::parse)]
    proxy_via: Option<ProxyVia>,
    /// Proxied requests keep the client's Host header instead of the target's.
    #[arg(long)]
    preserve_host_header: bool,
    /// Write every proxied exchange into mappings/ and __files/ as it happens.
    #[arg(long)]
    record_mappings: bool,
    /// With --record-mappings: request headers (comma-separated) to record as matches.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    match_headers: Vec<String>,
    /// Handlebars template naming the stub files that save and recordings write, as
    /// WireMock's (extension included): e.g. '{{{method}}}-{{{url}}}-{{{id}}}.json'.
    #[arg(long, value_name = "TEMPLATE", value_parser = filename_template)]
    filename_template: Option<decoy_core::filenames::FilenameMaker>,
    /// Keystore with the HTTPS certificate and key: JKS, PKCS#12 or PEM.
    #[arg(long, value_name = "FILE")]
    https_keystore: Option<PathBuf>,
    /// Password of --https-keystore.
    #[arg(long, value_name = "PASSWORD", requires = "https_keystore", default_value = tls::DEFAULT_PASSWORD, hide_default_value = true)]
    keystore_password: String,
    /// Password of the private key in --https-keystore (JKS).
    #[arg(long, value_name = "PASSWORD", default_value = tls::DEFAULT_PASSWORD, hide_default_value = true)]
    key_manager_password: String,
    /// Type of --https-keystore (jks, pkcs12, pem); read from the file when absent.
    #[arg(long, value_name = "TYPE")]
    keystore_type: Option<String>,
    /// Certificates client certificates must be issued by: JKS, PKCS#12 or PEM.
    #[arg(long, value_name = "FILE")]
    https_truststore: Option<PathBuf>,
    /// Password of --https-truststore.
    #[arg(long, value_name = "PASSWORD", requires = "https_truststore", default_value = tls::DEFAULT_PASSWORD, hide_default_value = true)]
    truststore_password: String,
    /// Type of --https-truststore (jks, pkcs12, pem); read from the file when absent.
    #[arg(long, value_name = "TYPE")]
    truststore_type: Option<String>,
    /// HTTPS clients must present a certificate issued by one in --https-truststore.
    #[arg(long, requires = "https_truststore")]
    https_require_client_cert: bool,
    /// Close a connection idle this long, in milliseconds (default 30000): no request
    /// in flight and no traffic, counted from accept (HTTP/1 and HTTP/2).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    jetty_idle_timeout: Option<u64>,
    /// Threads serving the stub ports (default: one per core but one, at least one,
    /// leaving a core for a load generator or the rest of the machine). Where decoy
    /// has the machine to itself, one per core (docs/performance.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    container_threads: Option<u32>,
    /// Threads serving MQ mappings (default: one per core but one, at least one).
    /// Each queue's receivers are dealt over them; a message, its reply and the
    /// broker connections its receiver opened stay on one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    mq_threads: Option<u32>,
    /// Which threads serve the stub ports: reuseport (a runtime per worker thread,
    /// each with its own listener on the port), dealt (a runtime per worker thread,
    /// connections dealt round-robin by one acceptor) or shared (one work-stealing
    /// runtime for all). Default: reuseport.
    #[arg(long, value_name = "LAYOUT", env = decoy::http::threads::LAYOUT_ENV, value_parser = |s: &str| s.parse::<decoy::http::threads::Layout>())]
    thread_layout: Option<decoy::http::threads::Layout>,
    /// Most client connections open at once, across ports; past it a new connection
    /// is closed at once (default: 16384, or less when the open-file limit is lower).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// Webhooks sent at once (default 10, as WireMock's pool); more wait their turn.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    webhook_threadpool_size: Option<u32>,
    /// Bytes that webhooks waiting to be sent may hold in all (the requests kept to
    /// render them, the rendered requests); past it new webhooks are dropped, counted.
    #[arg(long, default_value_t = decoy::webhooks::DEFAULT_MAX_PENDING_BYTES, value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_pending_webhook_bytes: usize,
    /// Largest file a stub's bodyFileName may name (stubs keep their bodies in
    /// memory); a stub naming a larger one is rejected with the file's size. Files
    /// served from __files as a web root are streamed and have no such limit.
    #[arg(long, default_value_t = decoy_core::mapping::DEFAULT_MAX_BODY_FILE_SIZE, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_body_file_size: u64,
    /// No HTTP/2 on the plain port (h2c); HTTP/1.1 only.
    #[arg(long)]
    disable_http2_plain: bool,
    /// No HTTP/2 on the HTTPS port (ALPN offers http/1.1 only).
    #[arg(long)]
    disable_http2_tls: bool,

    // ---- WireMock options accepted so existing scripts keep working; each one given
    // is named at start with why it changes nothing here (see `ignored`). ----
    #[arg(long, hide = true)]
    disable_banner: bool,
    #[arg(long, hide = true)]
    disable_request_logging: bool,
    #[arg(long, hide = true)]
    disable_gzip: bool,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    async_response_enabled: Option<String>,
    #[arg(long, hide = true)]
    async_response_threads: Option<String>,
    #[arg(long, hide = true)]
    jetty_acceptor_threads: Option<String>,
    #[arg(long, hide = true)]
    jetty_accept_queue_size: Option<String>,
    #[arg(long, hide = true)]
    jetty_header_buffer_size: Option<String>,
    #[arg(long, hide = true)]
    jetty_header_request_size: Option<String>,
    #[arg(long, hide = true)]
    jetty_header_response_size: Option<String>,
    #[arg(long, hide = true)]
    jetty_stop_timeout: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "")]
    timeout: Option<String>,
    #[arg(long, hide = true)]
    extensions: Option<String>,
    #[arg(long, hide = true)]
    disable_extensions_scanning: bool,
    #[arg(long, hide = true)]
    disable_response_templating: bool,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "")]
    max_template_cache_entries: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "")]
    permitted_system_keys: Option<String>,
    #[arg(long, hide = true)]
    disable_optimize_xml_factories_loading: bool,
    #[arg(long, hide = true)]
    disable_strict_http_headers: bool,
    #[arg(long, hide = true)]
    use_chunked_encoding: Option<String>,
    #[arg(long, hide = true)]
    print_all_network_traffic: bool,
    #[arg(long, hide = true)]
    logged_response_body_size_limit: Option<String>,
    #[arg(long, hide = true)]
    load_resources_from_classpath: Option<String>,
    #[arg(long, hide = true)]
    preserve_user_agent_proxy_header: bool,
    #[arg(long, hide = true)]
    supported_proxy_encodings: Option<String>,
    #[arg(long, hide = true)]
    max_http_client_connections: Option<String>,
    #[arg(long, hide = true)]
    disable_connection_reuse: Option<String>,
    /// Proxy stubs, --proxy-all, recording and webhooks may reach only these targets:
    /// comma-separated IPv4 addresses, ranges (A-B) and host name wildcards (*.x.com).
    #[arg(long, value_name = "LIST")]
    allow_proxy_targets: Option<String>,
    /// Proxy stubs, --proxy-all, recording and webhooks may not reach these targets
    /// (same syntax).
    #[arg(long, value_name = "LIST")]
    deny_proxy_targets: Option<String>,
    #[arg(long, hide = true)]
    enable_browser_proxying: bool,
    #[arg(long, hide = true)]
    proxy_pass_through: Option<String>,
    #[arg(long, hide = true)]
    trust_all_proxy_targets: bool,
    #[arg(long, hide = true)]
    trust_proxy_target: Vec<String>,
    #[arg(long, hide = true)]
    ca_keystore: Option<String>,
    #[arg(long, hide = true)]
    ca_keystore_password: Option<String>,
    #[arg(long, hide = true)]
    ca_keystore_type: Option<String>,
}

/// `--admin-token`, read straight into its digest so the command line's `Debug`
/// never shows it; empty (an unset variable in a compose file) means none.
#[derive(Debug, Clone)]
struct TokenArg(Option<decoy::admin::auth::AdminToken>);

fn admin_token(v: &str) -> Result<TokenArg, String> {
    Ok(TokenArg(
        (!v.is_empty()).then(|| decoy::admin::auth::AdminToken::new(v)),
    ))
}

/// Where a `decoy serve` listens, as its options say (for `decoy health`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    pub bind_address: String,
    /// `None` with `--disable-http`.
    pub port: Option<u16>,
    pub https_port: Option<u16>,
    pub admin_port: Option<u16>,
}

impl ServeArgs {
    pub fn listening(&self) -> Listening {
        Listening {
            bind_address: self.bind_address.clone(),
            port: (!self.disable_http).then_some(self.port),
            https_port: self.https_port,
            admin_port: self.admin_port,
        }
    }
}

/// `--state-name`: checked before anything starts.
fn state_name(v: &str) -> Result<String, String> {
    decoy_state::check_name(v).map(|()| v.to_owned())
}

/// `--filename-template`: checked and compiled before anything starts, so a template
/// WireMock refuses, or one that names no file inside `mappings/`, stops the start.
fn filename_template(v: &str) -> Result<decoy_core::filenames::FilenameMaker, String> {
    decoy_core::filenames::FilenameMaker::from_option(v)
}

/// `--admin-api-basic-auth`: exactly `user:password`, as WireMock requires.
fn basic_auth(v: &str) -> Result<String, String> {
    if v.split(':').count() != 2 {
        return Err("credentials must be in the format username:password".into());
    }
    Ok(v.to_owned())
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

    /// `--container-threads`: the runtime's worker threads.
    pub fn worker_threads(&self) -> Option<usize> {
        self.container_threads.map(|n| n as usize)
    }

    /// One line for each WireMock option given that changes nothing in decoy, saying
    /// why or what takes its place.
    pub fn ignored(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |given: bool, flag: &str, why: &str| {
            if given {
                out.push(format!("{flag} is ignored: {why}"));
            }
        };
        let jetty = "decoy is not built on Jetty; its tokio runtime and hyper size themselves";
        note(
            self.disable_banner,
            "--disable-banner",
            "decoy prints no banner",
        );
        note(
            self.disable_request_logging,
            "--disable-request-logging",
            "decoy logs each request only with --verbose",
        );
        note(
            self.disable_gzip,
            "--disable-gzip",
            "decoy never gzips answers itself",
        );
        note(
            self.async_response_enabled.is_some(),
            "--async-response-enabled",
            "decoy always answers asynchronously (a delay is a timer, not a thread)",
        );
        note(
            self.async_response_threads.is_some(),
            "--async-response-threads",
            "decoy always answers asynchronously; --container-threads sets its worker threads",
        );
        note(
            self.jetty_acceptor_threads.is_some(),
            "--jetty-acceptor-threads",
            jetty,
        );
        note(
            self.jetty_accept_queue_size.is_some(),
            "--jetty-accept-queue-size",
            "decoy's listen backlog is 4096",
        );
        note(
            self.jetty_header_buffer_size.is_some(),
            "--jetty-header-buffer-size",
            jetty,
        );
        note(
            self.jetty_header_request_size.is_some(),
            "--jetty-header-request-size",
            jetty,
        );
        note(
            self.jetty_header_response_size.is_some(),
            "--jetty-header-response-size",
            jetty,
        );
        note(
            self.jetty_stop_timeout.is_some(),
            "--jetty-stop-timeout",
            "on shutdown decoy lets requests in flight finish for up to 5 s",
        );
        note(
            self.timeout.is_some(),
            "--timeout",
            "it is Jetty's timeout for asynchronous servlet requests; decoy's delays are timers, and --proxy-timeout bounds proxied calls",
        );
        note(
            self.extensions.is_some(),
            "--extensions",
            "Java extensions cannot run in decoy; write the extension as a WebAssembly plugin (docs/plugins.md)",
        );
        note(
            self.disable_extensions_scanning,
            "--disable-extensions-scanning",
            "decoy loads only the plugins mappings name (docs/plugins.md)",
        );
        note(
            self.disable_response_templating,
            "--disable-response-templating",
            "decoy templates only stubs that name the response-template transformer (or all with --global-response-templating)",
        );
        note(
            self.max_template_cache_entries.is_some(),
            "--max-template-cache-entries",
            "the response-template plugin keeps its own bounded cache of compiled templates",
        );
        note(
            self.permitted_system_keys.is_some(),
            "--permitted-system-keys",
            "the sandboxed response-template plugin has no systemValue helper and reads no environment, so there is nothing to permit",
        );
        note(
            self.disable_optimize_xml_factories_loading,
            "--disable-optimize-xml-factories-loading",
            "decoy does not use Java's XML factories",
        );
        note(
            self.disable_strict_http_headers,
            "--disable-strict-http-headers",
            jetty,
        );
        note(
            self.use_chunked_encoding.is_some(),
            "--use-chunked-encoding",
            "decoy sends a Content-Length with every whole body and chunks only dribbled ones",
        );
        note(
            self.print_all_network_traffic,
            "--print-all-network-traffic",
            "use --verbose to log every request and the stub that answered it",
        );
        note(
            self.logged_response_body_size_limit.is_some(),
            "--logged-response-body-size-limit",
            "the journal shares each answer's body with the stub instead of copying it; bound it with --max-request-journal-body-size and --max-request-journal-bytes",
        );
        note(
            self.load_resources_from_classpath.is_some(),
            "--load-resources-from-classpath",
            "there is no classpath; use --root-dir",
        );
        note(
            self.preserve_user_agent_proxy_header,
            "--preserve-user-agent-proxy-header",
            "decoy always forwards the client's User-Agent",
        );
        note(
            self.supported_proxy_encodings.is_some(),
            "--supported-proxy-encodings",
            "decoy forwards the client's Accept-Encoding as sent",
        );
        note(
            self.max_http_client_connections.is_some(),
            "--max-http-client-connections",
            "decoy's proxy client pools connections without a fixed limit",
        );
        note(
            self.disable_connection_reuse.is_some(),
            "--disable-connection-reuse",
            "decoy's proxy client always reuses upstream connections",
        );
        let browser =
            "decoy is not a browser (forward) proxy; use proxyBaseUrl stubs or --proxy-all";
        note(
            self.enable_browser_proxying,
            "--enable-browser-proxying",
            browser,
        );
        note(
            self.proxy_pass_through.is_some(),
            "--proxy-pass-through",
            browser,
        );
        note(
            self.trust_all_proxy_targets,
            "--trust-all-proxy-targets",
            browser,
        );
        note(
            !self.trust_proxy_target.is_empty(),
            "--trust-proxy-target",
            browser,
        );
        note(self.ca_keystore.is_some(), "--ca-keystore", browser);
        note(
            self.ca_keystore_password.is_some(),
            "--ca-keystore-password",
            browser,
        );
        note(
            self.ca_keystore_type.is_some(),
            "--ca-keystore-type",
            browser,
        );
        let no_https = "no --https-port is given";
        note(
            self.https_port.is_none() && self.https_keystore.is_some(),
            "--https-keystore",
            no_https,
        );
        note(
            self.https_port.is_none() && self.https_truststore.is_some(),
            "--https-truststore",
            no_https,
        );
        note(
            self.https_port.is_none() && self.https_require_client_cert,
            "--https-require-client-cert",
            no_https,
        );
        note(
            !self.record_mappings && !self.match_headers.is_empty(),
            "--match-headers",
            "it applies to --record-mappings, which is not given",
        );
        out
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
                stub_cors: self.enable_stub_cors,
                admin_basic_auth: self.admin_api_basic_auth,
                admin_require_https: self.admin_api_require_https,
                idle_timeout: self
                    .jetty_idle_timeout
                    .map_or(DEFAULT_IDLE_TIMEOUT, std::time::Duration::from_millis),
                http2_plain: !self.disable_http2_plain,
                http2_tls: !self.disable_http2_tls,
                max_connections: self
                    .max_connections
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                layout: self.thread_layout.unwrap_or_default(),
                threads: self.container_threads.map(|n| n as usize),
            },
            strict: self.strict,
            watch: !self.no_watch,
            admin_port: self.admin_port,
            admin_token: self.admin_token.and_then(|t| t.0),
            journal_entries: if self.no_request_journal {
                0
            } else {
                self.max_request_journal_entries
            },
            journal_max_bytes: self.max_request_journal_bytes,
            journal_max_body: self.max_request_journal_body_size,
            proxy_timeout: std::time::Duration::from_millis(self.proxy_timeout),
            plugins_dir: self.plugins_dir,
            plugin_cache_dir: if self.no_plugin_cache {
                None
            } else {
                self.plugin_cache_dir
                    .or_else(decoy_plugin_host::Plugins::default_cache_dir)
            },
            global_templating: self.global_response_templating,
            state: self.state.map(|url| decoy_state::Options {
                url,
                timeout: std::time::Duration::from_millis(self.state_timeout),
                retry: self.state_retry,
                name: self.state_name,
            }),
            tls: tls::TlsSettings {
                cert: None,
                key: None,
                keystore: self.https_keystore,
                keystore_password: self.keystore_password,
                key_password: self.key_manager_password,
                keystore_type: self.keystore_type,
                truststore: self.https_truststore,
                truststore_password: self.truststore_password,
                truststore_type: self.truststore_type,
                require_client_cert: self.https_require_client_cert,
            },
            disable_http: self.disable_http,
            proxy_all: self.proxy_all,
            preserve_host_header: self.preserve_host_header,
            proxy_via: self.proxy_via,
            allow_proxy_targets: self.allow_proxy_targets,
            deny_proxy_targets: self.deny_proxy_targets,
            record_mappings: self.record_mappings,
            filenames: self.filename_template.unwrap_or_default(),
            match_headers: self
                .match_headers
                .into_iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            webhooks: decoy::webhooks::WebhookLimits {
                concurrency: self
                    .webhook_threadpool_size
                    .map_or(decoy::webhooks::DEFAULT_CONCURRENCY, |n| n as usize),
                max_pending_bytes: self.max_pending_webhook_bytes,
                ..Default::default()
            },
            max_body_file_size: self.max_body_file_size,
            mq_threads: self.mq_threads.map(|n| n as usize),
        }
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    decoy_logging(&args.logging());
    for line in args.ignored() {
        super::say::notice("WARN", format_args!("decoy: {line}"));
    }
    let workers = args.worker_threads();
    let opts = args.options();
    runtime(workers)?.block_on(async move {
        // Listen for SIGTERM before loading: as a container's PID 1, a signal without
        // a handler is ignored, so one sent while mappings load must still count.
        let signal = Signals::listen();
        let running = start(opts).await?;
        announce(&running);
        let stop = running.stopper();
        tokio::spawn(async move {
            signal.wait().await;
            // Stop first: whatever happens to the line, the server stops.
            let _ = stop.send(true);
            super::say::notice("INFO", "decoy: shutting down");
        });
        running.wait().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// The multi-threaded tokio runtime every serving command runs on, with `workers`
/// worker threads (`--container-threads`; default tokio's, one per core).
pub fn runtime(workers: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n);
    }
    b.enable_all().build().context("starting the async runtime")
}

/// Prints load problems and the ready line (which tests and scripts wait for).
pub fn announce(running: &decoy::server::Running) {
    for w in &running.report.warnings {
        super::say::notice("WARN", format_args!("warning: {w}"));
    }
    for p in &running.report.problems {
        super::say::notice("ERROR", format_args!("rejected: {p}"));
    }
    let mut line = format!("decoy {} listening on ", env!("CARGO_PKG_VERSION"));
    if !running.http_disabled {
        line.push_str(&format!("http://{}", running.http_addr));
    }
    if let Some(a) = running.https_addr {
        if !running.http_disabled {
            line.push_str(" and ");
        }
        line.push_str(&format!("https://{a}"));
    }
    if let Some(a) = running.admin_addr {
        line.push_str(&format!(", admin API on http://{a}/__admin"));
    }
    line.push_str(&format!(
        " (mappings: {} loaded, {} rejected)",
        running.report.loaded, running.report.rejected
    ));
    super::say::out(line);
}

/// Ctrl-C and SIGTERM, listened for from the moment this is made.
#[derive(Debug)]
pub struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts listening (inside a tokio runtime).
    pub fn listen() -> Signals {
        Signals {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    /// Resolves on the first Ctrl-C or SIGTERM.
    pub async fn wait(self) {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        if let Some(mut term) = self.term {
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

pub async fn wait_for_signal() {
    Signals::listen().wait().await
}

/// Logging choices from the command line.
#[derive(Debug, Clone, Default)]
pub struct Logging {
    pub verbose: bool,
    pub level: Option<String>,
    pub json: bool,
}

pub fn decoy_logging(opts: &Logging) {
    super::say::json_notices(opts.json);
    // decoy says every broker failure itself, once and then summarised, with the
    // queue, the connection and what to do. lapin logs them too, at ERROR, once per
    // attempt and per channel (a channel a missing queue closed, an abandoned
    // connect), and every message the broker returns at WARN with its whole
    // content: its lines are off unless asked for by name (`RUST_LOG`, or a
    // `--log-level` that names lapin).
    // Plugins' `log` calls and their stdout/stderr (target `plugin`) show at info.
    const LAPIN: &str = "lapin=off";
    let default = match (&opts.level, opts.verbose) {
        (Some(l), _) if l.contains("lapin") => l.clone(),
        (Some(l), _) => format!("{l},{LAPIN}"),
        (None, true) => format!("info,{LAPIN}"),
        (None, false) => format!("warn,plugin=info,{LAPIN}"),
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
