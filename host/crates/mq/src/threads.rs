//! The threads the MQ side serves on: `--mq-threads` runtimes of one worker each,
//! on threads of their own (`decoy-mq-N`), with the queues' receivers dealt over
//! them in turn.
//!
//! A request message goes from the broker connection's I/O task to its receiver,
//! to a reply put through a sender's connection, and to the acknowledgement: four
//! tasks, each woken by the one before. On a work-stealing runtime of several
//! workers each of those wake-ups may land on another thread, which is then woken
//! through the kernel, and on a machine the broker and the load generator share
//! that costs more than the message's own work (measured with `bench/mqtt.py` on
//! two cores: QoS 0 on two workers answered 0.6 to 0.8 times the messages a second
//! that one did). Here a receiver,
//! its replies, and the connections it opens (their I/O tasks are spawned where
//! they are opened) stay on one thread, as the HTTP side's serving threads keep a
//! connection on the thread that accepted it.
//!
//! Each runtime is tokio's multi-threaded one with a single worker rather than the
//! current-thread one (`decoy_core::threads::one_worker_runtime`, as the HTTP side's):
//! a plugin that waits on a clock is run with `block_in_place`, which the
//! current-thread runtime does not allow. The default count is the HTTP side's too
//! (`decoy_core::threads::default_threads`).
//!
//! The threads end when the [`MqThreads`] is dropped, or when the runtime that
//! started them shuts down (a test dropping its runtime without stopping the
//! server), so they never outlive either.

use std::future::Future;
use std::time::Duration;

use decoy_core::threads::one_worker_runtime;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The MQ side's serving threads.
#[derive(Debug)]
pub struct MqThreads {
    handles: Vec<Handle>,
    /// Dropping these ends the threads.
    _stops: Vec<oneshot::Sender<()>>,
}

impl MqThreads {
    /// Starts `n` threads (at least one). Called on a tokio runtime: the threads
    /// also end when it shuts down.
    pub fn start(n: usize) -> std::io::Result<MqThreads> {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for i in 0..n.max(1) {
            let (stop, stopped) = oneshot::channel::<()>();
            // Held by a task of the calling runtime: dropped when that runtime is.
            let (gone_tx, gone) = oneshot::channel::<()>();
            if let Ok(h) = Handle::try_current() {
                h.spawn(async move {
                    let _held = gone_tx;
                    std::future::pending::<()>().await;
                });
            }
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let name = format!("decoy-mq-{i}");
            let runtime_name = name.clone();
            std::thread::Builder::new().name(name).spawn(move || {
                let runtime = match one_worker_runtime(&runtime_name) {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(runtime.handle().clone()));
                runtime.block_on(async {
                    tokio::select! {
                        _ = stopped => {}
                        _ = gone => {}
                    }
                });
                // What still runs (replies past the drain, connections) is dropped.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
            let handle = ready
                .recv()
                .map_err(|_| std::io::Error::other("an MQ thread ended while starting"))??;
            handles.push(handle);
            stops.push(stop);
        }
        Ok(MqThreads {
            handles,
            _stops: stops,
        })
    }

    /// The current runtime alone, started nothing: for tests that drive the
    /// receivers on their own runtime (with its clock paused, say).
    pub fn current() -> MqThreads {
        MqThreads {
            handles: vec![Handle::current()],
            _stops: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Runs `task` on thread `turn` (modulo their number).
    pub fn spawn<F>(&self, turn: usize, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handles[turn % self.handles.len()].spawn(task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_run_on_the_threads_in_turn_and_the_threads_end_when_dropped() {
        let threads = MqThreads::start(2).unwrap();
        let mut names = Vec::new();
        for turn in 0..4 {
            let name = threads
                .spawn(turn, async {
                    std::thread::current().name().map(str::to_owned)
                })
                .await
                .unwrap();
            names.push(name.unwrap());
        }
        assert_eq!(
            names,
            ["decoy-mq-0", "decoy-mq-1", "decoy-mq-0", "decoy-mq-1"]
        );
        let (tx, rx) = oneshot::channel::<()>();
        let held = threads.spawn(0, async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(threads);
        // The thread's runtime shut down and dropped the task holding the sender.
        assert!(rx.await.is_err());
        assert!(held.await.unwrap_err().is_cancelled());
    }
}
