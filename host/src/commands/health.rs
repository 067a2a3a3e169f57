//! `decoy health`: asks a running decoy for `GET /__admin/health` and exits 0 when it
//! answers 200, 1 otherwise. A server started with `--admin-token` is asked with the
//! token in `DECOY_ADMIN_TOKEN`. It is the container image's `HEALTHCHECK` (a `FROM
//! scratch` image has no curl), so it is plain blocking std networking: no runtime,
//! a bounded wait, and TLS (rustls) only for a server that serves HTTPS alone.
//!
//! Which port: `--port` when given; else the options of the `decoy serve` running as
//! `--pid` (default 1, which it is in the image), read from `/proc/PID/cmdline` and
//! the `DECOY_OPTIONS` / `WIREMOCK_OPTIONS` in `/proc/PID/environ` and parsed by
//! `decoy serve`'s own parser, so `docker run IMAGE --port 9090` is probed on 9090
//! however the options were spelled; else this command's own `DECOY_OPTIONS` /
//! `WIREMOCK_OPTIONS`; else 8080. The command line rather than a file the server
//! writes: it needs no writable folder (`--read-only` containers), cannot be stale,
//! and is there before the server has finished starting.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser as _};

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Port of the admin API. Default: the one the `decoy serve` running as --pid
    /// serves it on (--admin-port, else --port, else with --disable-http its
    /// --https-port, asked over TLS), else --admin-port or --port from
    /// DECOY_OPTIONS / WIREMOCK_OPTIONS, else 8080.
    #[arg(long, value_name = "N", env = "DECOY_HEALTH_PORT")]
    port: Option<u16>,
    /// Host to ask. Default: the server's --bind-address when it names one address,
    /// else 127.0.0.1.
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Without --port: the process whose options name the port (a `decoy serve`,
    /// directly or under an init such as tini). In the container image it is PID 1.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "PID",
        env = "DECOY_HEALTH_PID"
    )]
    pid: u32,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    timeout: u64,
    /// Print nothing; the exit code says it all.
    #[arg(long, short)]
    quiet: bool,
}

/// Where to ask, and how that was found (for the messages).
#[derive(Debug)]
struct Target {
    host: String,
    port: u16,
    /// Ask over HTTPS (a server started with `--disable-http` and no `--admin-port`).
    tls: bool,
    from: String,
}

pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let target = match target(&args) {
        Ok(t) => t,
        Err(e) => {
            if !args.quiet {
                super::say::err(format_args!("unhealthy: {e}"));
            }
            return Ok(ExitCode::from(1));
        }
    };
    let Target {
        host,
        port,
        tls,
        from,
    } = &target;
    let timeout = Duration::from_millis(args.timeout.max(1));
    match ask(host, *port, *tls, timeout) {
        Ok(line) if line.split_whitespace().nth(1) == Some("200") => {
            if !args.quiet {
                super::say::out(format_args!(
                    "healthy: {host}:{port} ({from}) answered {line}"
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Ok(line) => {
            if !args.quiet {
                super::say::err(format_args!(
                    "unhealthy: {host}:{port} ({from}) answered {line:?} to GET /__admin/health{}",
                    if line.split_whitespace().nth(1) == Some("401") {
                        " (the admin API asks for a token: set DECOY_ADMIN_TOKEN)"
                    } else {
                        ""
                    }
                ));
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            if !args.quiet {
                super::say::err(format_args!(
                    "unhealthy: GET {}://{host}:{port}/__admin/health ({from}) failed: {e}",
                    if *tls { "https" } else { "http" }
                ));
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// The host and port to ask, by the rules of the module's doc.
fn target(args: &HealthArgs) -> Result<Target, String> {
    let host = |bind: Option<&str>| match (&args.host, bind) {
        (Some(h), _) => h.clone(),
        (None, Some("0.0.0.0" | "") | None) => "127.0.0.1".to_owned(),
        (None, Some("::" | "[::]")) => "::1".to_owned(),
        (None, Some(addr)) => addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
    };
    if let Some(port) = args.port {
        return Ok(Target {
            host: host(None),
            port,
            tls: false,
            from: "--port".into(),
        });
    }
    let pid = args.pid;
    match serve_options_of(pid) {
        Some(Ok(l)) => {
            let from = format!("the options of decoy serve, PID {pid}");
            // The admin API: on --admin-port alone when given, else under /__admin on
            // the HTTP port, else (--disable-http) on the HTTPS one.
            let (port, tls) = match (l.admin_port, l.port, l.https_port) {
                (Some(p), _, _) => (p, false),
                (None, Some(p), _) => (p, false),
                (None, None, Some(p)) => (p, true),
                (None, None, None) => {
                    return Err(format!("{from} name no port to ask"));
                }
            };
            if port == 0 {
                return Err(format!(
                    "{from} give port 0 (a free port picked at start); run decoy health --port N with the port it printed"
                ));
            }
            Ok(Target {
                host: host(Some(&l.bind_address)),
                port,
                tls,
                from,
            })
        }
        Some(Err(e)) => Err(format!(
            "PID {pid} is decoy serve, but its options do not read back ({e}); run decoy health --port N"
        )),
        None => Ok(match port_from_env_options() {
            Some(port) => Target {
                host: host(None),
                port,
                tls: false,
                from: "DECOY_OPTIONS / WIREMOCK_OPTIONS".into(),
            },
            None => Target {
                host: host(None),
                port: 8080,
                tls: false,
                from: "the default port".into(),
            },
        }),
    }
}

/// Where the `decoy serve` running as `pid` listens: `None` when that process is not
/// one (or its command line cannot be read), an error when its options do not parse.
fn serve_options_of(pid: u32) -> Option<Result<super::serve::Listening, String>> {
    let dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let words: Vec<String> = nul_separated(&cmdline);
    // `decoy serve ...`, possibly after an init (`tini -- decoy serve ...`).
    let start = words.windows(2).position(|w| {
        let program = std::path::Path::new(&w[0])
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        program.starts_with("decoy") && w[1] == "serve"
    })?;
    // Its environment's options count as its own do (unreadable: none).
    let environ = std::fs::read(dir.join("environ")).unwrap_or_default();
    let vars = nul_separated(&environ);
    let var = |name: &str| {
        vars.iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
    };
    let argv = super::env_options::with_options(
        words[start..].iter().map(Into::into).collect(),
        super::env_options::words_from(var),
    );
    Some(match crate::Cli::try_parse_from(argv) {
        Ok(crate::Cli {
            command: crate::Command::Serve(serve),
        }) => Ok(serve.listening()),
        Ok(_) => Err("not a serve command".into()),
        Err(e) => Err(e
            .to_string()
            .lines()
            .next()
            .unwrap_or("unreadable")
            .trim_start_matches("error: ")
            .to_owned()),
    })
}

/// The words of a `/proc` file whose entries end with NUL.
fn nul_separated(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let mut words: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if bytes.last() == Some(&0) {
        words.pop();
    }
    words
}

/// Sends the request and returns the status line.
fn ask(host: &str, port: u16, tls: bool, timeout: Duration) -> std::io::Result<String> {
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the host")
    })?;
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request =
        format!("GET /__admin/health HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n");
    if let Some(token) = std::env::var("DECOY_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    if tls {
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(std::io::Error::other)?;
        let conn = rustls::ClientConnection::new(any_certificate()?, name)
            .map_err(std::io::Error::other)?;
        status_line(rustls::StreamOwned::new(conn, stream), &request)
    } else {
        status_line(stream, &request)
    }
}

/// Writes `request` and reads the answer's first line.
fn status_line(mut stream: impl Read + Write, request: &str) -> std::io::Result<String> {
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    Ok(text.lines().next().unwrap_or("").trim().to_owned())
}

/// A TLS client that takes any certificate: the health check asks its own server
/// (usually on loopback, often with a self-signed certificate) whether it answers,
/// not who it is. Signatures are still checked, so the handshake is a real one.
fn any_certificate() -> std::io::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The admin port `decoy serve` gets from the environment's options, if they name one.
fn port_from_env_options() -> Option<u16> {
    let words = super::env_options::words_from_env();
    let value_of = |flag: &str| {
        let mut found = None;
        for (i, w) in words.iter().enumerate() {
            if w == flag {
                found = words.get(i + 1).and_then(|v| v.parse().ok());
            } else if let Some(v) = w.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                found = v.parse().ok();
            }
        }
        found
    };
    value_of("--admin-port").or_else(|| value_of("--port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_file_splits_on_its_nuls_keeping_empty_arguments() {
        assert_eq!(
            nul_separated(b"decoy\0serve\0\0--port\09090\0"),
            ["decoy", "serve", "", "--port", "9090"]
        );
        assert!(nul_separated(b"").is_empty());
    }
}
