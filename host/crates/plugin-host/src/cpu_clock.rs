//! A plugin call's CPU deadline, measured in CPU time rather than wall time.
//!
//! wasmtime interrupts a guest through epochs: a thread advances a process-wide
//! counter every [`TICK`](super::TICK) and a store traps, or asks its callback, once
//! the counter passes the store's deadline. Epochs count wall time, so on a machine
//! that is also running the system under test and the load generator, a call that
//! waited for a core could be stopped without having used its time: a spurious 500,
//! which is what a load test must never see from a virtual service. So when a call's
//! epoch deadline passes, [`CallClock::on_deadline`] looks at the CPU time the call's
//! thread has actually used: under the timeout, the call goes on for what is left;
//! at or over it, the call is stopped. A call also stops once it has taken
//! [`WALL_FACTOR`] times its timeout in wall time, whatever its CPU time (a guest
//! that waits in WASI calls uses no CPU, and an overloaded machine should still
//! answer).
//!
//! Reading a thread's CPU clock is a system call (about 0.3-0.7 µs here, a sixth of a
//! warm call's whole cost), so a call's start is not read from it: each thread keeps
//! its last reading and when it was taken, refreshed at most every [`REFRESH`], and
//! a call's starting CPU time is that reading plus the wall time since. That is an
//! upper bound of the true figure (the thread used at most the wall time that passed),
//! so a call is never charged more CPU than it used, and at most `REFRESH` less.
//! Plugin calls are synchronous, so a call's epoch callbacks run on the thread it
//! started on.

use std::cell::Cell;
use std::time::{Duration, Instant};

use wasmtime::UpdateDeadline;

/// How stale a thread's CPU reading may be before a call's start refreshes it.
const REFRESH: Duration = Duration::from_millis(1);

/// A call is stopped after this many times its timeout in wall time.
pub(crate) const WALL_FACTOR: u32 = 10;

thread_local! {
    /// This thread's last CPU clock reading, and the wall time it was taken.
    static LAST_READING: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

/// The CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Why a call was stopped, once it has been.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It used its timeout in CPU time.
    Cpu,
    /// It took [`WALL_FACTOR`] times its timeout in wall time.
    Wall,
}

/// When the call under way started, in wall and (an upper bound of) CPU time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallClock {
    wall: Instant,
    cpu: Duration,
    /// Set when the callback stops the call, for the failure's reason.
    pub(crate) stopped: Option<Stopped>,
}

impl CallClock {
    /// Marks the start of a call (or of an instantiation) on this thread.
    pub(crate) fn start() -> CallClock {
        let now = Instant::now();
        let cpu = LAST_READING.with(|last| match last.get() {
            Some((at, cpu)) if now.duration_since(at) < REFRESH => cpu + now.duration_since(at),
            _ => {
                let cpu = thread_cpu_time();
                last.set(Some((now, cpu)));
                cpu
            }
        });
        CallClock {
            wall: now,
            cpu,
            stopped: None,
        }
    }

    /// Called by wasmtime when the call's epoch deadline passes: stop it (a trap,
    /// seen as [`wasmtime::Trap::Interrupt`]) or let it run for the CPU time it has left.
    pub(crate) fn on_deadline(
        &mut self,
        timeout: Duration,
        tick: Duration,
    ) -> wasmtime::Result<UpdateDeadline> {
        let used = thread_cpu_time().saturating_sub(self.cpu);
        let stop = if used >= timeout {
            Some(Stopped::Cpu)
        } else if self.wall.elapsed() >= timeout * WALL_FACTOR {
            Some(Stopped::Wall)
        } else {
            None
        };
        if let Some(why) = stop {
            self.stopped = Some(why);
            return Err(wasmtime::Trap::Interrupt.into());
        }
        let left = timeout - used;
        let ticks = (left.as_nanos() / tick.as_nanos().max(1)) as u64 + 1;
        Ok(UpdateDeadline::Continue(ticks))
    }
}

impl Default for CallClock {
    fn default() -> CallClock {
        CallClock::start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_spins_is_charged_the_cpu_it_used() {
        let mut clock = CallClock::start();
        let begun = thread_cpu_time();
        while thread_cpu_time() - begun < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        // 30 ms of CPU (minus at most REFRESH) is under a 100 ms timeout...
        let r = clock.on_deadline(Duration::from_millis(100), Duration::from_millis(5));
        assert!(matches!(r, Ok(UpdateDeadline::Continue(_))));
        assert_eq!(clock.stopped, None);
        // ...and over a 10 ms one.
        let r = clock.on_deadline(Duration::from_millis(10), Duration::from_millis(5));
        assert!(r.is_err());
        assert_eq!(clock.stopped, Some(Stopped::Cpu));
    }

    #[test]
    fn a_call_that_waits_is_not_charged_for_the_wait_until_the_wall_cap() {
        let mut clock = CallClock::start();
        std::thread::sleep(Duration::from_millis(25));
        // 25 ms asleep is past a 20 ms timeout in wall time, but not in CPU time.
        let r = clock.on_deadline(Duration::from_millis(20), Duration::from_millis(5));
        assert!(matches!(r, Ok(UpdateDeadline::Continue(_))));
        // Past WALL_FACTOR times a 2 ms timeout, it is stopped all the same.
        let r = clock.on_deadline(Duration::from_millis(2), Duration::from_millis(5));
        assert!(r.is_err());
        assert_eq!(clock.stopped, Some(Stopped::Wall));
    }
}
