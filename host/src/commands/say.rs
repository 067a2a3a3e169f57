//! The lines decoy's commands print themselves, beside the log: reports, the ready
//! line, start-up problems, "shutting down".
//!
//! `println!` and `eprintln!` panic when the other end of a pipe has gone (`decoy
//! serve 2>&1 | tee log`, then Ctrl-C: `tee` dies first). A panic there would end a
//! command mid-way, or, in the task that waits for SIGTERM, keep the server running
//! with nothing left to stop it. These write and ignore a closed pipe, as the log's
//! own writer does. With `--log-format json`, a serving command's notices are JSON
//! lines shaped as the log's, so a collector reading stderr gets one format.

use std::fmt::Display;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Whether [`notice`] writes JSON lines (`--log-format json`).
pub fn json_notices(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// A line on standard output.
pub fn out(line: impl Display) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// A line on standard error, as it is.
pub fn err(line: impl Display) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// A serving command's notice on standard error: the line as it is, or, with
/// `--log-format json`, a JSON object as the log writes one (`level` is `WARN`,
/// `ERROR` or `INFO`; the message is the line).
pub fn notice(level: &str, line: impl Display) {
    if JSON.load(Ordering::Relaxed) {
        let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        err(serde_json::json!({
            "timestamp": timestamp,
            "level": level,
            "fields": { "message": line.to_string() },
            "target": "decoy",
        }));
    } else {
        err(line);
    }
}
