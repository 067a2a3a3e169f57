//! `decoy health`: asks a running decoy for `GET /__admin/health` and exits 0 when it
//! answers 200, 1 otherwise. A server started with `--admin-token` is asked with the
//! token in `DECOY_ADMIN_TOKEN`. It is the container image's `HEALTHCHECK` (a `FROM
//! scratch` image has no curl), so it is plain blocking std networking: no runtime,
//! no TLS, a bounded wait.

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Port of the admin API. Default: `--admin-port`, else `--port`, from
    /// DECOY_OPTIONS / WIREMOCK_OPTIONS when they set one, else 8080.
    #[arg(long, value_name = "N", env = "DECOY_HEALTH_PORT")]
    port: Option<u16>,
    /// Host to ask.
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    host: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    timeout: u64,
    /// Print nothing; the exit code says it all.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let port = args.port.unwrap_or_else(port_from_env_options);
    let timeout = Duration::from_millis(args.timeout.max(1));
    match ask(&args.host, port, timeout) {
        Ok(line) if line.split_whitespace().nth(1) == Some("200") => {
            if !args.quiet {
                super::say::out(format_args!(
                    "healthy: {}:{port} answered {line}",
                    args.host
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Ok(line) => {
            if !args.quiet {
                super::say::err(format_args!(
                    "unhealthy: {}:{port} answered {line:?} to GET /__admin/health{}",
                    args.host,
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
                    "unhealthy: GET http://{}:{port}/__admin/health failed: {e}",
                    args.host
                ));
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// Sends the request and returns the status line.
fn ask(host: &str, port: u16, timeout: Duration) -> std::io::Result<String> {
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the host")
    })?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
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
    stream.write_all(request.as_bytes())?;
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

/// The admin port `decoy serve` gets from the environment's options, if they name one.
fn port_from_env_options() -> u16 {
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
    value_of("--admin-port")
        .or_else(|| value_of("--port"))
        .unwrap_or(8080)
}
