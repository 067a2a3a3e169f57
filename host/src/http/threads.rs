//! Which threads serve the HTTP ports' connections (`--thread-layout`).
//!
//! A request's latency through decoy is mostly the time it waits for a thread, so
//! the layout decides the tail. On tokio's multi-thread runtime (work stealing), a
//! connection's task can run on any worker: a worker that parks wakes another (a
//! syscall and tens of microseconds) to steal its queued tasks, and a task woken by
//! one worker's I/O driver may be run by another. On a machine whose cores are also
//! busy with other work (a load generator) those hops and wake-ups are where the
//! 99th percentile goes; with one worker thread decoy's tail matched nginx's. So the
//! stub ports can be served by threads that each own their connections:
//!
//! - [`Layout::ReusePort`] (the default): a thread per worker, each with its own
//!   runtime and its own listening socket on the port (`SO_REUSEPORT`). The kernel
//!   spreads new connections over the sockets by a hash of their addresses, and a
//!   connection is accepted, read, answered and timed (delays, the idle timeout) on
//!   that thread for its whole life. This is nginx's shape. With few connections the
//!   hash may spread them unevenly.
//! - [`Layout::Dealt`]: a thread per worker, each with its own runtime; one acceptor
//!   (on the shared runtime) accepts every connection and deals them round-robin, so
//!   threads get even shares. One hand-off per connection, none per request.
//! - [`Layout::Shared`]: every connection on the shared multi-thread runtime, as
//!   decoy did before; work stealing evens out uneven work (a slow plugin call
//!   holds up only its own request) at the cost of the tail.
//!
//! Each serving thread's runtime is tokio's multi-thread runtime with one worker,
//! not the current-thread runtime (`decoy_core::threads::one_worker_runtime`, as
//! the MQ side's): with one worker nothing is stolen or handed over, and
//! `block_in_place` still works, which a plugin's sleep and a plugin's shared-state
//! `kv` call need (the current-thread runtime refuses them). Such a call then moves
//! the thread's other connections to a fresh thread while it waits. How many there
//! are by default, one per core but one, is `decoy_core::threads::default_threads`.
//!
//! Whatever the layout, the admin port (`--admin-port`), webhooks, message queues,
//! the watcher, the dashboard's sampler and shared state run on the shared runtime
//! `decoy serve` starts with; `--max-connections` counts connections across every
//! thread and port ([`super::conns::ConnLimit`]); a shutdown stops every thread's
//! accepting and drains each thread's connections.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use decoy_core::threads::one_worker_runtime;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::conns::{AcceptBackoff, ConnSlot};
use super::{Port, Role, Services, Source, serve};

/// The environment variable that sets the default layout (for `decoy serve` and
/// for servers started in-process); `--thread-layout` wins over it.
pub const LAYOUT_ENV: &str = "DECOY_THREAD_LAYOUT";

/// How the stub ports' connections are spread over threads (see the module's
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// A runtime per thread, each with its own `SO_REUSEPORT` listener.
    #[default]
    ReusePort,
    /// A runtime per thread, connections dealt round-robin by one acceptor.
    Dealt,
    /// One multi-thread (work-stealing) runtime for every connection.
    Shared,
}

impl Layout {
    pub const NAMES: [&'static str; 3] = ["reuseport", "dealt", "shared"];

    /// The layout `DECOY_THREAD_LAYOUT` names, or the default when it is unset (or
    /// names none, which is logged).
    pub fn from_env() -> Layout {
        match std::env::var(LAYOUT_ENV) {
            Ok(v) => v.parse().unwrap_or_else(|e| {
                tracing::warn!("{LAYOUT_ENV}: {e}; using {}", Layout::default());
                Layout::default()
            }),
            Err(_) => Layout::default(),
        }
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Layout, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "reuseport" => Ok(Layout::ReusePort),
            "dealt" => Ok(Layout::Dealt),
            "shared" => Ok(Layout::Shared),
            other => Err(format!(
                "{other:?} is not a thread layout (one of {})",
                Layout::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::ReusePort => "reuseport",
            Layout::Dealt => "dealt",
            Layout::Shared => "shared",
        })
    }
}

/// A connection the dealer accepted for a serving thread. It counts against
/// `--max-connections` from accept: the channels to the threads hold no more than
/// the cap allows.
#[derive(Debug)]
pub struct Dealt {
    pub(super) stream: std::net::TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) slot: ConnSlot,
}

/// A port to listen on and how to serve it.
#[derive(Debug)]
pub struct PortSpec {
    pub ip: std::net::IpAddr,
    /// 0: a free port, chosen once for every thread's listener.
    pub port: u16,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub role: Role,
    /// Said after "cannot listen on ADDRESS:PORT" when binding fails (" for HTTPS").
    pub purpose: &'static str,
}

/// The started ports: their addresses (in the order given) and the tasks, on the
/// current runtime, that end once every thread serving them has drained and
/// stopped.
#[derive(Debug)]
pub struct Started {
    pub addrs: Vec<SocketAddr>,
    pub tasks: Vec<JoinHandle<()>>,
}

/// Binds `ports` and serves them in `layout` on `threads` threads (one in
/// [`Layout::Shared`], which uses the current runtime's workers) until `stop`
/// turns true. Must run on the shared runtime, which keeps the dealer (and, for the
/// serving threads, the stop signal: they also stop if it shuts down).
pub async fn start(
    layout: Layout,
    threads: usize,
    services: &Arc<Services>,
    ports: Vec<PortSpec>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Started> {
    let threads = threads.max(1);
    let mut addrs = Vec::with_capacity(ports.len());
    let mut tasks = Vec::new();
    // What each serving thread runs: one serving loop per port.
    let mut work: Vec<Vec<(Pending, Port)>> = (0..threads).map(|_| Vec::new()).collect();
    for spec in ports {
        let (ip, purpose) = (spec.ip, spec.purpose);
        let failed = move || format!("cannot listen on {ip}:{}{purpose}", spec.port);
        let listen = |reuse_port| {
            bind_socket(SocketAddr::new(ip, spec.port), reuse_port).with_context(failed)
        };
        match layout {
            Layout::Shared => {
                let listener = listen(false)?;
                let addr = listener.local_addr()?;
                let port = Port::new(services.clone(), spec.tls, spec.role, addr.port());
                tasks.push(tokio::spawn(serve(
                    Source::Listener(listener),
                    port,
                    stop.clone(),
                )));
                addrs.push(addr);
            }
            Layout::ReusePort => {
                if spec.port != 0 {
                    // SO_REUSEPORT would share the port with another process that
                    // set it too (another decoy): make sure nobody listens there.
                    drop(listen(false)?);
                }
                let first = listen(true)?;
                let addr = first.local_addr()?;
                let port = Port::new(services.clone(), spec.tls, spec.role, addr.port());
                let mut listeners = vec![first];
                for _ in 1..threads {
                    listeners.push(bind_socket(addr, true).with_context(failed)?);
                }
                for (w, listener) in work.iter_mut().zip(listeners) {
                    w.push((Pending::Listener(listener.into_std()?), port.clone()));
                }
                addrs.push(addr);
            }
            Layout::Dealt => {
                let listener = listen(false)?;
                let addr = listener.local_addr()?;
                let port = Port::new(services.clone(), spec.tls, spec.role, addr.port());
                let mut senders = Vec::with_capacity(threads);
                for w in &mut work {
                    let (tx, rx) = mpsc::unbounded_channel();
                    senders.push(tx);
                    w.push((Pending::Dealt(rx), port.clone()));
                }
                tasks.push(tokio::spawn(deal(
                    listener,
                    senders,
                    services.clone(),
                    stop.clone(),
                )));
                addrs.push(addr);
            }
        }
    }
    if layout != Layout::Shared {
        let stop = follow(stop);
        for (i, loops) in work.into_iter().enumerate() {
            let stop = stop.clone();
            let serving = async move {
                let mut running = Vec::with_capacity(loops.len());
                for (pending, port) in loops {
                    let source = match pending {
                        Pending::Listener(l) => match TcpListener::from_std(l) {
                            Ok(l) => Source::Listener(l),
                            Err(e) => {
                                tracing::error!("cannot serve a listener on this thread: {e}");
                                continue;
                            }
                        },
                        Pending::Dealt(rx) => Source::Dealt(rx),
                    };
                    running.push(tokio::spawn(serve(source, port, stop.clone())));
                }
                for r in running {
                    let _ = r.await;
                }
            };
            tasks.push(spawn_thread(i, serving).await?);
        }
    }
    Ok(Started { addrs, tasks })
}

/// A serving loop's source before it is moved onto its thread's runtime.
#[derive(Debug)]
enum Pending {
    Listener(std::net::TcpListener),
    Dealt(mpsc::UnboundedReceiver<Dealt>),
}

/// A listening socket (a backlog of 4096) on `addr`, registered with the current
/// runtime; `reuse_port`: `SO_REUSEPORT`, so that each serving thread has one.
pub fn bind_socket(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Accepts `listener`'s connections and deals them round-robin to the serving
/// threads, until `stop` turns true; the threads' loops end when their channel
/// closes.
async fn deal(
    listener: TcpListener,
    threads: Vec<mpsc::UnboundedSender<Dealt>>,
    services: Arc<Services>,
    mut stop: watch::Receiver<bool>,
) {
    let mut source = Source::Listener(listener);
    let mut backoff = AcceptBackoff::default();
    let limit = &services.connections;
    for turn in (0..threads.len()).cycle() {
        let next = tokio::select! {
            next = source.next(limit, &mut backoff) => next,
            _ = stop.changed() => None,
        };
        let Some((stream, peer, slot)) = next else {
            break;
        };
        // Taken off this runtime's I/O driver; the thread registers it with its own.
        match stream.into_std() {
            Ok(stream) => {
                // A thread's loop ends only at shutdown: then the connection is closed.
                let _ = threads[turn].send(Dealt { stream, peer, slot });
            }
            Err(e) => tracing::debug!("cannot hand over the connection from {peer}: {e}"),
        }
    }
}

/// A stop signal for the serving threads: it turns true when `stop` does, and also
/// when the shared runtime shuts down (its sender, held by a task there, is then
/// dropped), so threads never outlive the runtime that started them (in tests,
/// which drop their runtime without stopping the server).
fn follow(mut stop: watch::Receiver<bool>) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let _ = stop.wait_for(|s| *s).await;
        let _ = tx.send(true);
    });
    rx
}

/// Runs `serving` on a new thread `decoy-http-<i>` with a runtime of its own (one
/// worker; see the module's documentation), and returns a task of the current
/// runtime that ends when the thread has finished serving and shut its runtime
/// down (tasks still running then, connections past the drain, are dropped).
async fn spawn_thread(
    i: usize,
    serving: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<JoinHandle<()>> {
    let name = format!("decoy-http-{i}");
    let (ready_tx, ready_rx) = oneshot::channel::<std::io::Result<()>>();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let runtime_name = name.clone();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let runtime = match one_worker_runtime(&runtime_name) {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            // Spawned, not run by `block_on`: the loop and the connections it spawns
            // then all run on the runtime's one worker.
            let _ = runtime.block_on(runtime.spawn(serving));
            runtime.shutdown_timeout(Duration::from_secs(1));
            drop(done_tx);
        })
        .with_context(|| format!("cannot start the serving thread {name}"))?;
    ready_rx
        .await
        .context("a serving thread ended while starting")?
        .with_context(|| format!("cannot start the runtime of the serving thread {i}"))?;
    Ok(tokio::spawn(async move {
        let _ = done_rx.await;
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_named_as_the_option_takes_them() {
        for name in Layout::NAMES {
            let layout: Layout = name.parse().unwrap();
            assert_eq!(layout.to_string(), name);
        }
        assert_eq!(" Dealt ".parse::<Layout>(), Ok(Layout::Dealt));
        let err = "stealing".parse::<Layout>().unwrap_err();
        assert!(err.contains("reuseport, dealt, shared"), "{err}");
    }

    #[tokio::test]
    async fn reuseport_listeners_share_a_port_that_a_plain_listener_then_cannot_take() {
        let first = bind_socket("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = first.local_addr().unwrap();
        let second = bind_socket(addr, true).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
        assert!(
            bind_socket(addr, false).is_err(),
            "the check before binding SO_REUSEPORT listeners finds the port taken"
        );
    }
}
