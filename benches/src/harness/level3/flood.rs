//! The door under an intro flood, over real loopback sockets.
//!
//! One server endpoint with an intro budget of [`BUDGET`] RSA operations
//! per second (bursts of [`BURST`]); a thread sends it [`FLOOD_RATE`]
//! well-formed intros per second, encrypted to its key, from
//! [`SPOOFED_SOURCES`] addresses of 127.1.0.0/16 whose sockets never read:
//! sources that never answer a Retry, as spoofed ones cannot. Meanwhile a
//! client endpoint at 127.0.0.1 connects again and again, one connect
//! every [`HONEST_INTERVAL`] (within what one unvalidated source may bring),
//! each connection aborted once up.
//!
//! Each sample measures, on one server: honest connect times without the
//! flood, then with it (after [`FLOOD_WARM_UP`] of flood, so that every
//! limit it can drain is drained): p50 and p99; the server's RSA operations
//! per second under the flood (`EndpointStats::intros_decrypted`), in all
//! and less the honest connects' own (what the flood costs); the share of
//! a core the server's thread used in each phase, and the share of the
//! phase it waited for one (on a shared machine, what other processes cost
//! the connect times); the flood rate reached.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rand_core::{OsRng, RngCore};
use tern_peer::proto::KeyConfig;
use tern_peer::{Endpoint, IdentityKey, PublicIdentity};
use tern_wire::{INTRO_LEN, PendingIntro};
use tokio::sync::{mpsc, oneshot};

use super::servers::{client_config, other};
use crate::cli::Args;
use crate::report::{Better, median};
use crate::server_thread::ServerThread;
use crate::sockio_matrix::runtime;

const PREFIX: &str = "level3/flood";
/// The server's intro budget: RSA operations per second...
const BUDGET: u64 = 100;
/// ...and at once, after a quiet period (the virtual-time door tests'
/// figures, `crates/proto/tests/proto_door.rs`).
const BURST: u64 = 20;
/// Spoofed intros per second.
const FLOOD_RATE: u64 = 10_000;
/// Addresses the flood comes from (127.1.0.0 and up: four /24 networks).
const SPOOFED_SOURCES: u32 = 1_000;
/// Distinct intros the flood cycles through: more than the budget lets in
/// during a sample, so every one admitted costs a decryption and makes a
/// connection.
const FLOOD_INTROS: usize = 1_024;
/// One honest connect this often: 8 per second, below the 10 per second
/// one unvalidated source may bring, so without a flood none is retried.
const HONEST_INTERVAL: Duration = Duration::from_millis(125);
/// Flood before the honest connects are measured.
const FLOOD_WARM_UP: Duration = Duration::from_secs(1);

/// Every metric of the workload, after `PREFIX/`, with its unit and
/// which way is better. "cores": a share of one core's time.
const METRICS: [(&str, &str, Better); 11] = [
    ("quiet/connect_p50", "ns", Better::Lower),
    ("quiet/connect_p99", "ns", Better::Lower),
    ("quiet/server_cpu", "cores", Better::Lower),
    ("quiet/server_waiting", "cores", Better::Lower),
    ("flooded/connect_p50", "ns", Better::Lower),
    ("flooded/connect_p99", "ns", Better::Lower),
    ("flooded/server_cpu", "cores", Better::Lower),
    ("flooded/server_waiting", "cores", Better::Lower),
    ("flooded/rsa_ops_per_s", "operations/s", Better::Lower),
    ("flooded/flood_rsa_ops_per_s", "operations/s", Better::Lower),
    ("flooded/intros_per_s", "intros/s", Better::Higher),
];

pub(super) fn names() -> Vec<String> {
    METRICS
        .iter()
        .map(|(m, _, _)| format!("{PREFIX}/{m}"))
        .collect()
}

/// What one sample measured.
struct Sample {
    quiet: Phase,
    flooded: Phase,
    /// RSA operations per second while flooded, honest ones included.
    rsa_per_s: f64,
    /// Spoofed intros sent per second while measured.
    intros_per_s: f64,
    /// What the door did while measured, to read the figures by.
    door: Door,
}

/// The server's and the honest client's door counters over the flooded
/// phase.
struct Door {
    retries_sent: u64,
    tokens_accepted: u64,
    /// Datagrams the server's kernel receive queue dropped.
    kernel_drops: u64,
    /// Retries the honest client took.
    retries_taken: u64,
}

/// The honest connects of one phase, and the server's CPU meanwhile.
struct Phase {
    connects: Histogram<u64>,
    failed: u64,
    elapsed: Duration,
    /// Share of one core the server's thread used.
    server_cpu: f64,
    /// Share of the phase the server's thread waited for a core while it
    /// had work (none where the kernel does not say).
    server_waiting: Option<f64>,
}

impl Phase {
    fn quantile(&self, q: f64) -> f64 {
        self.connects.value_at_quantile(q) as f64
    }

    /// Honest connects per second: their share of the RSA work.
    fn connects_per_s(&self) -> f64 {
        self.connects.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    let quiet_length = args.mode.sample_time() * 16;
    let flood_length = args.mode.sample_time() * 32;
    let mut figures: [Vec<f64>; METRICS.len()] = Default::default();
    for _ in 0..args.mode.samples() {
        let sample = match sample(identity, quiet_length, flood_length) {
            Ok(sample) => sample,
            Err(e) => {
                eprintln!("   {PREFIX}: sample failed: {e}");
                continue;
            }
        };
        sample.describe();
        let (quiet, flooded) = (&sample.quiet, &sample.flooded);
        let values = [
            Some(quiet.quantile(0.50)),
            Some(quiet.quantile(0.99)),
            Some(quiet.server_cpu),
            quiet.server_waiting,
            Some(flooded.quantile(0.50)),
            Some(flooded.quantile(0.99)),
            Some(flooded.server_cpu),
            flooded.server_waiting,
            Some(sample.rsa_per_s),
            Some((sample.rsa_per_s - flooded.connects_per_s()).max(0.0)),
            Some(sample.intros_per_s),
        ];
        for (figure, value) in figures.iter_mut().zip(values) {
            figure.extend(value);
        }
    }
    let m = |i: usize| median(&figures[i]);
    eprintln!(
        "   {PREFIX}: honest connect p50 {:.2} ms, p99 {:.2} ms without a flood (server {:.1} % of a core); \
         under {:.0} spoofed intros/s p50 {:.2} ms, p99 {:.2} ms; server {:.0} RSA ops/s \
         ({:.0} for the flood; budget {BUDGET}/s), {:.1} % of a core, waited for one {:.1} % of the time",
        m(0) / 1e6,
        m(1) / 1e6,
        m(2) * 100.0,
        m(10),
        m(4) / 1e6,
        m(5) / 1e6,
        m(8),
        m(9),
        m(6) * 100.0,
        m(7) * 100.0,
    );
    for ((metric, unit, better), samples) in METRICS.into_iter().zip(figures) {
        super::emit_metric(
            args,
            format!("{PREFIX}/{metric}"),
            unit,
            better,
            samples,
            None,
        );
    }
}

impl Sample {
    /// One line on what the door did, to read the sample's figures by.
    fn describe(&self) {
        let (quiet, flooded, door) = (&self.quiet, &self.flooded, &self.door);
        eprintln!(
            "   {PREFIX}: sample: {} honest connects under the flood (slowest {:.1} ms, {} failed; \
             {} failed without it), {} of them retried; the server sent {} Retries, took {} tokens, \
             its kernel dropped {} datagrams",
            flooded.connects.len(),
            flooded.connects.max() as f64 / 1e6,
            flooded.failed,
            quiet.failed,
            door.retries_taken,
            door.retries_sent,
            door.tokens_accepted,
            door.kernel_drops
        );
    }
}

fn sample(
    identity: &IdentityKey,
    quiet_length: Duration,
    flood_length: Duration,
) -> io::Result<Sample> {
    let server = Server::start(identity)?;
    let public = identity.public();
    let client = runtime()?;
    let endpoint = client.block_on(async {
        Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), client_config())
    })?;
    let quiet = server.phase(&client, &endpoint, &public, quiet_length)?;

    let flood = Flood::start(server.thread.addr(), &public)?;
    std::thread::sleep(FLOOD_WARM_UP);
    let (sent, before, retries) = (
        flood.sent(),
        server.thread.endpoint.stats(),
        endpoint.stats().protocol.retries_received,
    );
    let flooded = server.phase(&client, &endpoint, &public, flood_length)?;
    let seconds = flooded.elapsed.as_secs_f64().max(1e-9);
    let after = server.thread.endpoint.stats();
    let intros = flood.sent() - sent;
    flood.stop()?;
    let (p, q) = (&after.protocol, &before.protocol);
    Ok(Sample {
        quiet,
        flooded,
        rsa_per_s: (p.intros_decrypted - q.intros_decrypted) as f64 / seconds,
        intros_per_s: intros as f64 / seconds,
        door: Door {
            retries_sent: p.intros_retried - q.intros_retried,
            tokens_accepted: p.tokens_accepted - q.tokens_accepted,
            kernel_drops: after
                .socket
                .kernel_drops
                .saturating_sub(before.socket.kernel_drops),
            retries_taken: endpoint.stats().protocol.retries_received - retries,
        },
    })
}

/// The server endpoint on a thread of its own; it accepts every connection
/// and drops it.
struct Server {
    thread: ServerThread,
    /// Asks the server's thread for its times.
    times: mpsc::UnboundedSender<oneshot::Sender<ThreadTimes>>,
}

impl Server {
    fn start(identity: &IdentityKey) -> io::Result<Self> {
        let config = client_config()
            .identity(identity.clone())
            .intro_budget(BUDGET, BURST);
        let (times, mut asked) = mpsc::unbounded_channel::<oneshot::Sender<ThreadTimes>>();
        let thread = ServerThread::start(
            "tern-level3-flood-server",
            SocketAddr::from(([127, 0, 0, 1], 0)),
            config,
            None,
            move |endpoint| async move {
                let serve = async {
                    while let Some(connection) = endpoint.accept().await {
                        drop(connection);
                    }
                };
                let answer = async {
                    while let Some(reply) = asked.recv().await {
                        let _ = reply.send(ThreadTimes::now());
                    }
                };
                tokio::select! {
                    () = serve => {}
                    () = answer => {}
                }
            },
        )?;
        Ok(Self { thread, times })
    }

    /// The server thread's times so far.
    fn times(&self) -> io::Result<ThreadTimes> {
        let (reply, answer) = oneshot::channel();
        self.times.send(reply).map_err(other)?;
        answer.blocking_recv().map_err(other)
    }

    /// Honest connects from `endpoint`, one every [`HONEST_INTERVAL`], for
    /// `length`.
    fn phase(
        &self,
        client: &tokio::runtime::Runtime,
        endpoint: &Endpoint,
        public: &PublicIdentity,
        length: Duration,
    ) -> io::Result<Phase> {
        let before = self.times()?;
        let start = Instant::now();
        let (connects, failed) = client.block_on(honest_connects(
            endpoint,
            self.thread.addr(),
            public,
            length,
        ))?;
        let elapsed = start.elapsed();
        let after = self.times()?;
        let share = |d: Duration| d.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
        Ok(Phase {
            connects,
            failed,
            elapsed,
            server_cpu: share(after.cpu.saturating_sub(before.cpu)),
            server_waiting: after
                .waiting
                .zip(before.waiting)
                .map(|(a, b)| share(a.saturating_sub(b))),
        })
    }
}

/// What a thread's clocks say so far: the CPU time it used, and how long
/// it waited on a run queue for a core (on a shared machine, what the
/// other processes cost it).
#[derive(Clone, Copy, Debug)]
struct ThreadTimes {
    cpu: Duration,
    waiting: Option<Duration>,
}

impl ThreadTimes {
    /// The calling thread's.
    fn now() -> Self {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec for the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        let cpu = if rc == 0 {
            Duration::new(
                u64::try_from(now.tv_sec).unwrap_or(0),
                u32::try_from(now.tv_nsec).unwrap_or(0),
            )
        } else {
            Duration::ZERO
        };
        // Linux: "<on a core> <waiting for one> <time slices>", in ns.
        let waiting = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            .map(Duration::from_nanos);
        Self { cpu, waiting }
    }
}

/// Connects to `to` one at a time, one every [`HONEST_INTERVAL`], for
/// `length`: the connect times, and how many connects failed.
async fn honest_connects(
    endpoint: &Endpoint,
    to: SocketAddr,
    public: &PublicIdentity,
    length: Duration,
) -> io::Result<(Histogram<u64>, u64)> {
    let mut times = Histogram::new_with_bounds(1, 100_000_000_000, 3).map_err(other)?;
    let mut failed = 0;
    let end = Instant::now() + length;
    let mut next = Instant::now();
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        let began = Instant::now();
        match endpoint.connect(to, public).await {
            Ok(connection) => {
                let nanos = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
                times.saturating_record(nanos);
                connection.abort(0, Bytes::new());
            }
            Err(_) => failed += 1,
        }
        next = (next + HONEST_INTERVAL).max(Instant::now());
    }
    Ok((times, failed))
}

/// The flood's thread and its count of intros sent.
struct Flood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: JoinHandle<io::Result<()>>,
}

impl Flood {
    /// Makes the intros and the sockets, then floods `to` from a thread.
    fn start(to: SocketAddr, public: &PublicIdentity) -> io::Result<Self> {
        let mut intros = Vec::with_capacity(FLOOD_INTROS);
        for _ in 0..FLOOD_INTROS {
            let mut intro = [0u8; INTRO_LEN];
            PendingIntro::write(
                public,
                OsRng.next_u32(),
                KeyConfig::default(),
                std::time::SystemTime::now(),
                &mut OsRng,
                &mut intro,
            )
            .map_err(other)?;
            intros.push(intro);
        }
        let sockets = (0..SPOOFED_SOURCES)
            .map(spoofed_socket)
            .collect::<io::Result<Vec<_>>>()?;
        let (stop, sent) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (stopping, counting) = (Arc::clone(&stop), Arc::clone(&sent));
        let thread = std::thread::Builder::new()
            .name("tern-level3-flood".to_owned())
            .spawn(move || flood(to, &sockets, &intros, &stopping, &counting))?;
        Ok(Self { stop, sent, thread })
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| other("the flood's thread panicked"))?
    }
}

/// A socket at 127.1.0.0 + `i`, with the smallest receive buffer: it never
/// reads, and the Retries it is sent are dropped.
fn spoofed_socket(i: u32) -> io::Result<UdpSocket> {
    let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 1, 0, 0)) + i);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    socket.set_recv_buffer_size(1)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((ip, 0)).into())?;
    Ok(socket.into())
}

/// Sends the intros round the sockets at [`FLOOD_RATE`], in a burst each
/// millisecond, until `stop`. A full socket buffer drops an intro, as a
/// congested path would.
fn flood(
    to: SocketAddr,
    sockets: &[UdpSocket],
    intros: &[[u8; INTRO_LEN]],
    stop: &AtomicBool,
    sent: &AtomicU64,
) -> io::Result<()> {
    let start = Instant::now();
    let mut done: u64 = 0;
    let mut k = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let due =
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX) * FLOOD_RATE / 1_000_000;
        // Never more than 10 ms of intros at once, after a stall.
        let burst = due.saturating_sub(done).min(FLOOD_RATE / 100);
        for _ in 0..burst {
            let socket = &sockets[k % sockets.len()];
            match socket.send_to(&intros[k % intros.len()], to) {
                Ok(_) => {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            k += 1;
        }
        done = due.max(done + burst);
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
