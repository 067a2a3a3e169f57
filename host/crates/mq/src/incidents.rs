//! What went wrong while serving MQ mappings, for `GET /__admin/problems`.
//!
//! Mapping files have their problems when they are read; a running service has its
//! own: a receiver task that panicked (a bug, which the runtime survives by
//! restarting the task), or a reply that panicked while it was put (its request goes
//! back to its queue), a reply or an unmatched message whose put failed (the broker's
//! connection, a timeout: it goes back to its queue), a reply that can never be sent
//! (dropped), or an unmatched queue that neither exists nor can be created.
//! Each kind of incident is kept once per queue, with how often it happened and the
//! last detail, and shown as a problem of the queue's first mapping (its file and
//! position), so it reads like the file problems beside it. The list is cleared when
//! the MQ files are reloaded; the `decoy_mq_panics_total` counters keep the totals.

use std::any::Any;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use decoy_core::mapping::load::{Problem, StubRef};
use decoy_spec::fields::FieldError;

use super::config::MqMapping;

/// Panics on one MQ transport: receiver tasks (or a message's handling in them) that
/// panicked and were restarted, and replies that panicked while put or while their
/// sender opened (`sender`). A bug; each is listed by `/__admin/problems` too.
#[derive(Debug, Default)]
pub struct Panics {
    pub receiver: AtomicU64,
    pub sender: AtomicU64,
}

/// `decoy_mq_panics_total{transport, task}`: the MQ transports' own metric family,
/// added to `/__admin/metrics` when the MQ service starts.
#[derive(Debug)]
pub struct PanicsSection(pub Vec<(&'static str, Arc<Panics>)>);

impl decoy_core::metrics::Section for PanicsSection {
    fn render(&self, out: &mut String) {
        out.push_str("# HELP decoy_mq_panics_total MQ receivers, and replies being put (task=sender), that panicked and were restarted or sent back (a bug: /__admin/problems says where).\n");
        out.push_str("# TYPE decoy_mq_panics_total counter\n");
        for (transport, p) in &self.0 {
            for (task, n) in [("receiver", &p.receiver), ("sender", &p.sender)] {
                let _ = writeln!(
                    out,
                    "decoy_mq_panics_total{{transport=\"{transport}\",task=\"{task}\"}} {}",
                    n.load(Ordering::Relaxed)
                );
            }
        }
    }
}

/// The longest detail kept (a panic message can be anything).
const DETAIL_MAX: usize = 500;

#[derive(Debug, Clone)]
struct Incident {
    file: PathBuf,
    stub: StubRef,
    /// What happened, without the detail: `a receiver of queue Q panicked`.
    what: String,
    /// What decoy did about it: `it was restarted`.
    outcome: String,
    count: u64,
    last: String,
}

/// The incidents of a running MQ service (shared by the runtimes a reload replaces).
#[derive(Debug, Default)]
pub struct Incidents {
    list: Mutex<Vec<Incident>>,
}

impl Incidents {
    /// Records that `what` happened again on the queue `mapping` listens on (its
    /// best mapping), with `detail`, and what decoy did (`outcome`).
    pub fn record(&self, mapping: &MqMapping, what: String, outcome: &str, detail: &str) {
        let mut last: String = detail.chars().take(DETAIL_MAX).collect();
        if last.len() < detail.len() {
            last.push('…');
        }
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        match list.iter_mut().find(|i| i.what == what) {
            Some(i) => {
                i.count += 1;
                i.last = last;
                i.outcome = outcome.to_owned();
            }
            None => list.push(Incident {
                file: mapping.file.clone(),
                stub: mapping.stub_ref(),
                what,
                outcome: outcome.to_owned(),
                count: 1,
                last,
            }),
        }
    }

    /// The incidents as problems: `mq-mappings/q.json: mapping #0 (id …): a receiver
    /// of queue Q panicked (2 times, last: "…"); it was restarted`.
    pub fn problems(&self) -> Vec<Problem> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .map(|i| {
                let times = if i.count == 1 {
                    "once".to_owned()
                } else {
                    format!("{} times", i.count)
                };
                Problem {
                    file: i.file.clone(),
                    stub: Some(i.stub.clone()),
                    error: FieldError::new(
                        "",
                        format!("{} ({times}, last: {:?}); {}", i.what, i.last, i.outcome),
                    ),
                }
            })
            .collect()
    }

    pub fn clear(&self) {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// The message of a caught panic (`panic!("…")` gives a `&str` or a `String`).
pub fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
