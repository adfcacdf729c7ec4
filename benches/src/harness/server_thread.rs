//! A server endpoint on a thread of its own with a current-thread runtime,
//! serving until dropped: how the end-to-end and level-3 workloads run
//! their servers, so that a server's work never shares a runtime (or, if
//! pinned, a CPU) with the client's.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use tern_peer::{Config, Endpoint};
use tokio::sync::oneshot;

use crate::affinity::pin_current_thread;
use crate::sockio_matrix::runtime;

/// An endpoint bound and served on a thread of its own; dropping it stops
/// the thread's runtime and joins the thread.
pub(crate) struct ServerThread {
    /// The server's endpoint, for its address and counters.
    pub(crate) endpoint: Endpoint,
    /// The server thread's CPU-time clock (none if the system gave none).
    cpu_clock: Option<libc::clockid_t>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// Starts a thread named `name`, pinned to `cpu` if one is given, that
    /// binds `addr` with `config` and runs `serve` on the endpoint until
    /// dropped (or until `serve` ends). Returns once the endpoint is bound.
    pub(crate) fn start<S, F>(
        name: &str,
        addr: SocketAddr,
        config: Config,
        cpu: Option<usize>,
        serve: S,
    ) -> io::Result<Self>
    where
        S: FnOnce(Endpoint) -> F + Send + 'static,
        F: Future<Output = ()>,
    {
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let started = cpu
                    .map(pin_current_thread)
                    .transpose()
                    .and_then(|pinned| Ok((pinned, runtime()?)));
                let (_pinned, runtime) = match started {
                    Ok(started) => started,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let endpoint = match Endpoint::bind(addr, config) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = bound_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = bound_tx.send(Ok((endpoint.clone(), this_thread_cpu_clock())));
                    tokio::select! {
                        () = serve(endpoint) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        let (endpoint, cpu_clock) = bound_rx.recv().map_err(io::Error::other)??;
        Ok(Self {
            endpoint,
            cpu_clock,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address the endpoint is bound to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    /// CPU time the server thread used so far (none if the system gave no
    /// thread clock).
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec for the call.
        let rc = unsafe { libc::clock_gettime(self.cpu_clock?, &mut now) };
        (rc == 0).then(|| {
            Duration::new(
                u64::try_from(now.tv_sec).unwrap_or(0),
                u32::try_from(now.tv_nsec).unwrap_or(0),
            )
        })
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The calling thread's CPU-time clock, which other threads can read
/// while it lives.
fn this_thread_cpu_clock() -> Option<libc::clockid_t> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `pthread_self` is always valid for the calling thread, and
    // `clock` is a valid place for the result.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    (rc == 0).then_some(clock)
}
