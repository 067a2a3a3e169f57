//! What the transports' serving threads have in common: how many to start by
//! default, and the runtime each one runs.
//!
//! The HTTP stub ports (`--container-threads`) and the MQ side (`--mq-threads`) each
//! serve on threads of their own, a runtime per thread, so that a connection (or a
//! queue's receiver), its answers and its timers stay on one thread with no wake-up
//! across threads (the transports' `threads.rs` say what each keeps there and why).
//! Each runtime is tokio's multi-thread runtime with a single worker rather than the
//! current-thread runtime: with one worker nothing is stolen or handed over, and
//! `block_in_place` still works, which a plugin's sleep and a plugin's shared-state
//! `kv` call need (the current-thread runtime refuses them).

/// The threads to serve with when none are given: one per core but one, and at
/// least one.
///
/// The core left over is for whatever else the machine runs beside them: in a
/// performance test, usually the load generator (and, for MQ, the broker);
/// otherwise the kernel's network work and decoy's shared runtime (admin API,
/// webhooks, the watcher). Measured with `bench/tail.py` on a two-core machine
/// shared with the load generator, one HTTP serving thread had a closed-loop p99 at
/// 32 connections of 1.5 times nginx's (one worker) against 6.2 times with two, at
/// about the same throughput: a second serving thread there only takes turns with
/// the load generator for a core. `--container-threads` and `--mq-threads` set the
/// counts where decoy has the machine to itself.
pub fn default_threads() -> usize {
    default_threads_for(std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn default_threads_for(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// A runtime for one serving thread: tokio's multi-thread runtime with one worker
/// (see the module's documentation), its threads named `name`, with I/O and timers.
/// Built on the thread it will serve on, which is named `name` too.
pub fn one_worker_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_leaves_a_core_for_the_rest_of_the_machine() {
        assert_eq!(default_threads_for(1), 1);
        assert_eq!(default_threads_for(2), 1);
        assert_eq!(default_threads_for(4), 3);
        assert_eq!(default_threads_for(16), 15);
    }

    #[test]
    fn a_serving_runtime_runs_its_tasks_on_its_one_named_worker() {
        let runtime = one_worker_runtime("decoy-test-serving").unwrap();
        let names = runtime.block_on(async {
            let mut names = Vec::new();
            for _ in 0..4 {
                let name = tokio::spawn(async { std::thread::current().name().map(str::to_owned) })
                    .await
                    .unwrap();
                names.push(name);
            }
            names
        });
        assert_eq!(names, vec![Some("decoy-test-serving".to_owned()); 4]);
        // Timers are enabled.
        runtime.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        });
    }
}
