//! Private brokers: a Mosquitto, a nats-server or a Redis of the test's own, on a
//! free port, for the tests that stop, restart or configure a broker (TLS, users),
//! which they must never do to the machine's shared ones; and an HAProxy of the
//! test's own that puts TLS in front of a shared broker, which stays as it is. Each is
//! killed when the test drops it. They need the Debian packages `mosquitto`,
//! `nats-server`, `redis-server` and `haproxy`, which `tests/run.sh` installs; a test
//! that finds one missing says it skipped (`common::skip`).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use super::certificates::Certificates;
use super::process::{Process, collected, sigterm, until_listening, wait_for_port};

/// Runs `cmd` with its output thrown away; `None` when it cannot be run here.
fn spawn(cmd: &mut Command) -> Option<Process> {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
        .map(Process)
}

/// A private Mosquitto with persistence, so a restart keeps the sessions and the
/// requests not yet acknowledged.
pub struct Mosquitto {
    process: Process,
    port: u16,
    dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Anonymous, on `port`, persisting in `dir`; `None` when mosquitto cannot be
    /// run here.
    pub async fn start(port: u16, dir: tempfile::TempDir) -> Option<Mosquitto> {
        let conf = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location {}/\nuser root\n",
            dir.path().display()
        );
        let process = Mosquitto::configured(dir.path(), &conf, &[port]).await?;
        Some(Mosquitto { process, port, dir })
    }

    /// One from a configuration file's text (written in `dir`), once every one of
    /// `ports` listens; `None` when mosquitto cannot be run here.
    pub async fn configured(dir: &Path, conf: &str, ports: &[u16]) -> Option<Process> {
        let path = dir.join("mosquitto.conf");
        std::fs::write(&path, conf).unwrap();
        let process = spawn(Command::new("mosquitto").arg("-c").arg(&path))?;
        for port in ports {
            until_listening(*port, "mosquitto").await;
        }
        Some(process)
    }

    /// Stops it (SIGTERM: it saves its sessions) and gives back its port and
    /// directory, to start it again with.
    pub fn stop(self) -> (u16, tempfile::TempDir) {
        let Mosquitto {
            mut process,
            port,
            dir,
        } = self;
        sigterm(&process.0);
        let _ = process.0.wait();
        (port, dir)
    }
}

/// A private nats-server on a free port, started (and started again on the same port
/// and store) when the test says.
pub struct NatsServer {
    pub port: u16,
    args: Vec<OsString>,
    // Dropped in this order: the server before its store.
    process: Option<Process>,
    store: Option<tempfile::TempDir>,
}

impl NatsServer {
    /// With JetStream, keeping its store in a directory of its own across restarts.
    pub fn jetstream() -> NatsServer {
        let port = super::free_port();
        let store = tempfile::tempdir().unwrap();
        let args: Vec<OsString> = ["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"]
            .into_iter()
            .map(OsString::from)
            .chain([store.path().as_os_str().to_owned()])
            .collect();
        NatsServer {
            port,
            args,
            process: None,
            store: Some(store),
        }
    }

    /// From a configuration file's text, `PORT` standing for its port, written in
    /// `dir` as `NAME.conf`.
    pub fn configured(dir: &Path, name: &str, conf: &str) -> NatsServer {
        let port = super::free_port();
        let path = dir.join(format!("{name}.conf"));
        std::fs::write(&path, conf.replace("PORT", &port.to_string())).unwrap();
        NatsServer {
            port,
            args: vec!["-c".into(), path.into_os_string()],
            process: None,
            store: None,
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts it and waits until it listens; `false` when nats-server cannot be run
    /// here.
    pub async fn start(&mut self) -> bool {
        let Some(p) = spawn(Command::new("nats-server").args(&self.args)) else {
            return false;
        };
        self.process = Some(p);
        until_listening(self.port, "nats-server").await;
        true
    }

    /// SIGKILL: no goodbye to the clients, as a crash.
    pub fn kill(&mut self) {
        self.process = None;
    }
}

/// The URL of a Redis on 127.0.0.1:`port` (whether one runs there or not).
pub fn redis_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/0")
}

/// A private `redis-server` that persists nothing (`--save ''`): started again on
/// its port, it is empty.
pub struct Redis {
    pub port: u16,
    process: Process,
}

impl Redis {
    /// Started on `port` and listening.
    pub fn start(port: u16) -> Redis {
        let process = spawn(
            Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"]),
        )
        .expect("redis-server starts");
        wait_for_port(port, "redis-server");
        Redis { port, process }
    }

    pub fn url(&self) -> String {
        redis_url(self.port)
    }

    pub fn id(&self) -> u32 {
        self.process.id()
    }
}

/// A private HAProxy on a free port, terminating TLS with the test's certificate and
/// passing the bytes on to a broker on 127.0.0.1 (`mode tcp`): TLS in front of the
/// machine's RabbitMQ without touching its configuration.
pub struct TlsTerminator {
    pub port: u16,
    /// HAProxy's log: a line per connection, `SSL handshake failure` for each
    /// handshake a client gave up.
    log: Arc<Mutex<String>>,
    _process: Process,
}

impl TlsTerminator {
    /// In front of 127.0.0.1:`backend`, its files written in `dir`; `None` when
    /// haproxy cannot be run here.
    pub async fn start(dir: &Path, certs: &Certificates, backend: u16) -> Option<TlsTerminator> {
        // HAProxy wants the certificate and its key in one PEM file.
        let pem = dir.join("haproxy.pem");
        let mut both = std::fs::read(&certs.cert).unwrap();
        both.extend(std::fs::read(&certs.key).unwrap());
        std::fs::write(&pem, both).unwrap();
        let port = super::free_port();
        let conf = dir.join("haproxy.cfg");
        let lines = [
            "global",
            "  log stderr format raw local0",
            "defaults",
            "  mode tcp",
            "  log global",
            "  option tcplog",
            "  timeout connect 5s",
            "  timeout client 10m",
            "  timeout server 10m",
            "frontend tls",
            &format!("  bind 127.0.0.1:{port} ssl crt {}", pem.display()),
            "  default_backend broker",
            "backend broker",
            &format!("  server broker 127.0.0.1:{backend}"),
        ];
        std::fs::write(&conf, lines.join("\n") + "\n").unwrap();
        // `-db`: in the foreground, logging to its stderr.
        let mut child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let log = collected(child.stderr.take().unwrap());
        let process = Process(child);
        until_listening(port, "haproxy").await;
        Some(TlsTerminator {
            port,
            log,
            _process: process,
        })
    }

    /// Handshakes a client gave up so far (one refusing the certificate).
    pub fn handshake_failures(&self) -> usize {
        super::process::lines_with(&self.log.lock().unwrap(), "SSL handshake failure")
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}
