//! Private brokers: a Mosquitto, a nats-server or a Redis of the test's own, on a
//! free port, for the tests that stop, restart or configure a broker (TLS, users),
//! which they must never do to the machine's shared ones. Each is killed when the
//! test drops it. They need the Debian packages `mosquitto`, `nats-server` and
//! `redis-server`, which `tests/run.sh` installs; a test that finds one missing says
//! it skipped (`common::skip`).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use super::process::{Process, sigterm, until_listening, wait_for_port};

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
