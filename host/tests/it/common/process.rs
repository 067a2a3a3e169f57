//! Processes the tests start: the `decoy` binary (for what only a process shows:
//! its exit on SIGTERM, its log, its threads) and the brokers of `brokers.rs`. Each is
//! waited for by connecting to its port, and killed when the test drops it, passed or
//! failed, so no test leaves one behind.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child process of the test's, killed when dropped.
pub struct Process(pub Child);

impl Process {
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Blocks until something listens on 127.0.0.1:`port` (20 s at most; past that the
/// test fails, naming `what`).
pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`wait_for_port`] for an async test: the test's runtime, which may be serving a
/// decoy of the test's, is not blocked meanwhile.
pub async fn until_listening(port: u16, what: &str) {
    let what = what.to_owned();
    tokio::task::spawn_blocking(move || wait_for_port(port, &what))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
}

/// Whether `program` cannot be run here (`probe` is an argument it answers at once,
/// such as `--help`); if so the test says it skipped, for `reason` (see
/// [`super::skip`]), and should return.
pub fn missing(program: &str, probe: &str, reason: &str) -> bool {
    let missing = Command::new(program)
        .arg(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err();
    if missing {
        super::skip(reason);
    }
    missing
}

/// Whether `cmd` ran and succeeded, its output thrown away.
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What `stream` says, line by line, collected by a thread of its own until it
/// closes.
pub fn collected(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let into = text.clone();
    let mut stream = BufReader::new(stream);
    std::thread::spawn(move || {
        let mut line = String::new();
        while stream.read_line(&mut line).is_ok_and(|n| n > 0) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    text
}

/// `decoy serve` on port 0 for `root`; returns once it printed its ready line. Its
/// stderr is collected in the background.
pub fn serve_logged(root: &Path) -> (Child, Arc<Mutex<String>>) {
    let (child, stderr, _) = serve_logged_with_port(root);
    (child, stderr)
}

/// [`serve_logged`], and the HTTP port decoy listens on.
pub fn serve_logged_with_port(root: &Path) -> (Child, Arc<Mutex<String>>, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_decoy"))
        .args([
            "serve",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--root-dir",
        ])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = collected(child.stderr.take().unwrap());
    let ready = ready_line(&mut child);
    assert!(
        ready.contains("listening on"),
        "no ready line: {ready:?}; stderr: {}",
        stderr.lock().unwrap()
    );
    let port = port_of(&ready);
    (child, stderr, port)
}

/// The first line `child` prints on stdout (decoy's ready line); stdout is closed after.
pub fn ready_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

/// The port in decoy's ready line (`... listening on http://127.0.0.1:PORT ...`).
pub fn port_of(line: &str) -> u16 {
    line.split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"))
}

pub fn sigterm(child: &Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// Waits up to `bound` for `child` to exit; kills it and returns `None` past it.
pub fn exit_within(child: &mut Child, bound: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// How many lines of `text` contain `needle`.
pub fn lines_with(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

/// Waits (up to 10 s, else fails showing the log) until a line of `log` holds `text`.
pub fn until_said(log: &Mutex<String>, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while lines_with(&log.lock().unwrap(), text) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "never said {text:?}:\n{}",
            log.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `GET path` on 127.0.0.1:`port` over a connection of its own (closed after): the
/// whole answer, head and body, as text.
pub fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// `decoy validate [flags] --root-dir root`: its exit code and what it printed.
pub fn validate(root: &Path, flags: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_decoy"))
        .arg("validate")
        .args(flags)
        .arg("--root-dir")
        .arg(root)
        .output()
        .expect("running decoy validate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
