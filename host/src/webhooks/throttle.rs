//! Warnings about webhooks that were not sent, throttled: a flood of them (a dead
//! target, a full queue, a client hammering a stub whose webhooks are refused) must
//! not become a flood of log lines. In each 10-second window the first few warnings
//! of each kind are logged whole, with the mapping, the URL and the reason; the rest
//! are only counted, and one line at the end of the window sums them up by kind. The
//! metrics (`decoy_webhooks_total`) count every one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How long a window lasts.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Warnings of one kind logged whole in a window; the rest are summed up.
pub const WHOLE_LINES: u32 = 3;

/// What became of a webhook that was not sent, or got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Dropped: the pending webhooks were at their count limit.
    DroppedCount,
    /// Dropped: the pending webhooks were at their byte limit.
    DroppedBytes,
    /// Dropped: the target had its share of pending webhooks (count or bytes).
    DroppedTarget,
    /// `--allow-proxy-targets` / `--deny-proxy-targets` refused the target.
    Denied,
    /// The request came from a chain of webhooks at its hop limit.
    Looped,
    /// Sent, but no answer came.
    Failed,
    /// Never a valid request (its definition or its rendering).
    Invalid,
    /// A `message` listener's message the broker did not take.
    NotPublished,
}

const KINDS: usize = 8;

impl Kind {
    fn index(self) -> usize {
        self as usize
    }

    /// How the summary line names the kind.
    fn summary(self) -> &'static str {
        match self {
            Kind::DroppedCount => "dropped (too many webhooks waiting)",
            Kind::DroppedBytes => "dropped (too many bytes waiting)",
            Kind::DroppedTarget => "dropped (their target had its share waiting)",
            Kind::Denied => "refused by --allow-proxy-targets / --deny-proxy-targets",
            Kind::Looped => "refused (webhook loop)",
            Kind::Failed => "failed",
            Kind::Invalid => "invalid",
            Kind::NotPublished => "messages not published",
        }
    }
}

const ALL: [Kind; KINDS] = [
    Kind::DroppedCount,
    Kind::DroppedBytes,
    Kind::DroppedTarget,
    Kind::Denied,
    Kind::Looped,
    Kind::Failed,
    Kind::Invalid,
    Kind::NotPublished,
];

#[derive(Debug, Default)]
struct Window {
    /// When the current window ends (`None`: no window open).
    ends: Option<Instant>,
    /// Warnings logged whole in it, by kind.
    whole: [u32; KINDS],
    /// Webhooks only counted in it, by kind.
    counted: [u64; KINDS],
    /// A task will log the summary when the window ends.
    summary_due: bool,
}

/// The throttle; shared by every webhook of the process.
#[derive(Debug)]
pub struct Throttle {
    window: Mutex<Window>,
    length: Duration,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::with_window(WINDOW)
    }
}

impl Throttle {
    pub fn with_window(length: Duration) -> Throttle {
        Throttle {
            window: Mutex::new(Window::default()),
            length,
        }
    }

    /// Logs `message()` as a warning about `n` webhooks of `kind`, unless this
    /// window already logged its share of them; then they are counted for the
    /// window's summary. `message` is only built when it is logged.
    pub fn warn(self: &Arc<Self>, kind: Kind, n: u64, message: impl FnOnce() -> String) {
        let k = kind.index();
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if !w.summary_due && w.ends.is_none_or(|ends| now >= ends) {
            w.ends = Some(now + self.length);
            w.whole = [0; KINDS];
        }
        if w.whole[k] < WHOLE_LINES {
            w.whole[k] += 1;
            drop(w);
            tracing::warn!(target: "decoy::webhooks", "{}", message());
            return;
        }
        w.counted[k] += n;
        if w.summary_due {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        w.summary_due = true;
        let ends = w.ends.unwrap_or(now);
        drop(w);
        let this = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep_until(ends).await;
            this.summarise();
        });
    }

    /// Logs the window's summary line and closes the window.
    fn summarise(&self) {
        let counted = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            let counted = std::mem::take(&mut w.counted);
            w.summary_due = false;
            w.ends = None;
            counted
        };
        if let Some(line) = summary_line(&counted, self.length) {
            tracing::warn!(target: "decoy::webhooks", "{line}");
        }
    }
}

/// "webhooks not logged one by one in the last 10 s: 4,512 dropped (...), 3 failed;
/// every outcome is counted in decoy_webhooks_total (/__admin/metrics)".
fn summary_line(counted: &[u64; KINDS], window: Duration) -> Option<String> {
    let parts: Vec<String> = ALL
        .iter()
        .filter(|k| counted[k.index()] > 0)
        .map(|k| format!("{} {}", thousands(counted[k.index()]), k.summary()))
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "webhooks not logged one by one in the last {} s: {}; every outcome is counted in decoy_webhooks_total (/__admin/metrics)",
        window.as_secs(),
        parts.join(", ")
    ))
}

/// `4512` as `4,512`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_kind_that_was_only_counted() {
        let mut counted = [0; KINDS];
        counted[Kind::DroppedBytes.index()] = 4512;
        counted[Kind::Failed.index()] = 3;
        assert_eq!(
            summary_line(&counted, WINDOW).unwrap(),
            "webhooks not logged one by one in the last 10 s: 4,512 dropped (too many bytes waiting), 3 failed; every outcome is counted in decoy_webhooks_total (/__admin/metrics)"
        );
        assert_eq!(summary_line(&[0; KINDS], WINDOW), None);
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_share_a_kind_is_counted_and_summed_up_when_the_window_ends() {
        let t = Arc::new(Throttle::default());
        for _ in 0..100 {
            t.warn(Kind::Failed, 1, || "failed".into());
        }
        t.warn(Kind::Denied, 2, || "denied".into());
        {
            let w = t.window.lock().unwrap();
            assert_eq!(w.whole[Kind::Failed.index()], WHOLE_LINES);
            assert_eq!(
                w.counted[Kind::Failed.index()],
                100 - u64::from(WHOLE_LINES)
            );
            assert_eq!(w.whole[Kind::Denied.index()], 1);
            assert!(w.summary_due);
        }
        tokio::time::sleep(WINDOW + Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        let w = t.window.lock().unwrap();
        assert!(!w.summary_due && w.ends.is_none(), "{w:?}");
        assert_eq!(w.counted, [0; KINDS]);
    }
}
