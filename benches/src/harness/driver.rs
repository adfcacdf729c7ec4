//! Level 2, tern-peer's endpoint driver: what the driver costs over the
//! socket it drives.
//!
//! A toy blaster node on one endpoint sends 1452-byte datagrams, in GSO runs
//! as large as the driver allows, to a toy sink node on another; each
//! endpoint is a [`Driver`] on its own thread with a current-thread runtime.
//! The nodes do almost nothing (the blaster writes an 8-byte sequence number,
//! the sink reads it), so the figures are the driver's own overhead: loop
//! turns, the node's lock, the send arena, timers, wake-ups.
//!
//! The ceiling is the raw tern-sockio mover of the sockio group, same
//! backend, same payload, sending as many datagrams per call as the driver
//! gathers per turn (256 by default; 1 for Portable), measured sample by
//! sample beside it. Metrics per backend, under `driver/<backend>/1452B/`:
//! `datagrams_per_s` and `mb_per_cpu_s` (delivered; CPU of the whole
//! process, both threads), `datagrams_per_send_syscall` and
//! `datagrams_per_recv_syscall` (from sockio's counters), `drop_ratio`; the
//! ceiling's under `driver/<backend>/1452B/sockio/`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tern_peer::driver::{Driver, DriverConfig};
use tern_peer::proto::{Node, Transmit, TransmitLimits};
use tern_sockio::{Backend, Capabilities};

use crate::cli::Args;
use crate::report::{Better, Metric, emit, median, process_cpu_time};
use crate::sockio_matrix::{IDLE, run_tern, runtime};

const LEVEL: u8 = 2;
const PAYLOAD: usize = 1452;

/// Sends numbered datagrams of `PAYLOAD` bytes to `to` until `end`.
struct Blaster {
    to: SocketAddr,
    seq: u64,
    end: Option<quanta::Instant>,
    duration: Duration,
}

impl Node for Blaster {
    fn handle_datagram(&mut self, _: quanta::Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}

    fn poll_transmit(
        &mut self,
        now: quanta::Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let end = *self.end.get_or_insert(now + self.duration);
        if now >= end {
            return None;
        }
        let count = (buf.len() / PAYLOAD).min(limits.max_segments);
        for datagram in buf.chunks_mut(PAYLOAD).take(count) {
            datagram[..8].copy_from_slice(&self.seq.to_le_bytes());
            self.seq += 1;
        }
        (count > 0).then(|| Transmit {
            destination: self.to,
            len: count * PAYLOAD,
            segment_size: (count > 1).then_some(PAYLOAD),
            ttl: None,
        })
    }

    fn poll_timeout(&mut self) -> Option<quanta::Instant> {
        None
    }

    fn handle_timeout(&mut self, _: quanta::Instant) {}
}

/// Counts what arrives and when the last of it did.
struct Sink {
    datagrams: u64,
    bytes: u64,
    checksum: u64,
    last: Option<quanta::Instant>,
    /// Datagrams so far, for the harness thread to see when arrivals stop.
    progress: Arc<AtomicU64>,
}

impl Node for Sink {
    fn handle_datagram(
        &mut self,
        now: quanta::Instant,
        _: SocketAddr,
        _: SocketAddr,
        d: &mut [u8],
    ) {
        self.datagrams += 1;
        self.bytes += d.len() as u64;
        self.checksum ^= d.first().copied().map_or(0, u64::from);
        self.last = Some(now);
    }

    fn poll_transmit(
        &mut self,
        _: quanta::Instant,
        _: TransmitLimits,
        _: &mut [u8],
    ) -> Option<Transmit> {
        None
    }

    fn poll_timeout(&mut self) -> Option<quanta::Instant> {
        self.progress.store(self.datagrams, Ordering::Relaxed);
        None
    }

    fn handle_timeout(&mut self, _: quanta::Instant) {}
}

/// What one driver sample measured.
struct Sample {
    sent: u64,
    send_syscalls: u64,
    delivered: u64,
    delivered_bytes: u64,
    recv_syscalls: u64,
    elapsed: Duration,
}

fn config(backend: Backend) -> DriverConfig {
    DriverConfig::default()
        .backend(Some(backend))
        .max_udp_payload(PAYLOAD)
}

/// Which tokio runtime each endpoint's thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// `new_current_thread`: the driver runs on the endpoint's own thread.
    CurrentThread,
    /// `new_multi_thread` with two workers: the driver task may move
    /// between them, and wakes cross threads.
    MultiThread,
}

impl Flavour {
    fn runtime(self) -> io::Result<tokio::runtime::Runtime> {
        match self {
            Flavour::CurrentThread => runtime(),
            Flavour::MultiThread => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build(),
        }
    }
}

/// One sample: sink and blaster drivers on threads of their own, each
/// driver a spawned task on its thread's runtime.
fn run_driver(backend: Backend, flavour: Flavour, duration: Duration) -> io::Result<Sample> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let progress = Arc::new(AtomicU64::new(0));
    let clock = quanta::Clock::new();
    let (handles_tx, handles_rx) = std::sync::mpsc::channel();
    let sink_thread = {
        let progress = Arc::clone(&progress);
        std::thread::spawn(move || {
            flavour.runtime()?.block_on(async {
                let sink = Sink {
                    datagrams: 0,
                    bytes: 0,
                    checksum: 0,
                    last: None,
                    progress,
                };
                let (driver, handle) = Driver::bind(loopback, sink, &config(backend))?;
                let _ = handles_tx.send(handle);
                tokio::spawn(driver.run()).await.map_err(io::Error::other)?
            })
        })
    };
    let sink = handles_rx
        .recv()
        .map_err(|_| io::Error::other("sink did not start"))?;
    let to = sink.local_addr();
    let start = clock.now();
    let blaster = Blaster {
        to,
        seq: 0,
        end: None,
        duration,
    };
    let sent = flavour.runtime()?.block_on(async {
        let (driver, handle) = Driver::bind(loopback, blaster, &config(backend))?;
        // The blaster stops producing at its end; the driver then idles
        // until told to stop.
        let task = tokio::spawn(driver.run());
        tokio::time::sleep(duration).await;
        while handle.with_node(|b| b.end.is_none_or(|end| clock.now() < end))? {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        handle.stop();
        let stopped = task.await.map_err(io::Error::other)??;
        Ok::<_, io::Error>(stopped.socket.counters())
    })?;
    // The sink stops once nothing has arrived for a while.
    let mut seen = progress.load(Ordering::Relaxed);
    loop {
        std::thread::sleep(IDLE);
        let now = progress.load(Ordering::Relaxed);
        if now == seen {
            break;
        }
        seen = now;
    }
    sink.stop();
    let stopped = sink_thread
        .join()
        .map_err(|_| io::Error::other("sink thread panicked"))??;
    let received = stopped.socket.counters();
    let elapsed = stopped
        .node
        .last
        .map_or(Duration::ZERO, |last| last.saturating_duration_since(start));
    std::hint::black_box(stopped.node.checksum);
    Ok(Sample {
        sent: sent.datagrams_sent,
        send_syscalls: sent.send_syscalls,
        delivered: stopped.node.datagrams,
        delivered_bytes: stopped.node.bytes,
        recv_syscalls: received.recv_syscalls,
        elapsed,
    })
}

/// Metric suffixes: unit, direction, whether the sockio ceiling has it.
const METRICS: [(&str, &str, Better, bool); 5] = [
    ("datagrams_per_s", "datagrams/s", Better::Higher, true),
    ("mb_per_cpu_s", "MB/cpu-s", Better::Higher, true),
    (
        "datagrams_per_send_syscall",
        "datagrams/syscall",
        Better::Higher,
        true,
    ),
    (
        "datagrams_per_recv_syscall",
        "datagrams/syscall",
        Better::Higher,
        false,
    ),
    ("drop_ratio", "ratio", Better::Lower, true),
];

struct DriverGroup {
    /// Each backend Auto could pick, with the runtime flavour to run it on.
    cells: Vec<(Backend, Flavour)>,
}

/// The driver group: every backend Auto could pick here (io_uring is only
/// ever forced, so it is left out).
pub(crate) fn groups(_args: &Args) -> Vec<Box<dyn crate::Group>> {
    let caps = Capabilities::get();
    let backends = [Backend::Portable, Backend::Mmsg, Backend::Offload]
        .into_iter()
        .filter(|b| caps.supports(*b));
    // The multi-thread runtime is measured on the backend Auto picks.
    let best = caps.best();
    let cells = backends
        .map(|b| (b, Flavour::CurrentThread))
        .chain(caps.supports(best).then_some((best, Flavour::MultiThread)))
        .collect();
    vec![Box::new(DriverGroup { cells })]
}

fn prefix(backend: Backend, flavour: Flavour) -> String {
    match flavour {
        Flavour::CurrentThread => format!("driver/{}/{PAYLOAD}B", backend.name()),
        Flavour::MultiThread => format!("driver/{}-multi-thread/{PAYLOAD}B", backend.name()),
    }
}

fn ceiling_prefix(backend: Backend, flavour: Flavour) -> String {
    format!("{}/sockio", prefix(backend, flavour))
}

impl DriverGroup {
    fn wanted(&self, args: &Args, backend: Backend, flavour: Flavour) -> bool {
        METRICS.iter().any(|(m, ..)| {
            args.wants(&format!("{}/{m}", prefix(backend, flavour)))
                || args.wants(&format!("{}/{m}", ceiling_prefix(backend, flavour)))
        })
    }

    fn run_backend(&self, args: &Args, backend: Backend, flavour: Flavour) {
        let batch = if backend == Backend::Portable {
            1
        } else {
            DriverConfig::default().datagrams_per_turn()
        };
        let mut driver: [Vec<f64>; 5] = Default::default();
        let mut raw: [Vec<f64>; 5] = Default::default();
        for sample in 0..args.mode.samples() {
            for turn in 0..2 {
                let duration = args.mode.sample_time();
                let cpu_before = process_cpu_time();
                let on_driver = (turn + sample) % 2 == 0;
                let result = if on_driver {
                    run_driver(backend, flavour, duration)
                } else {
                    run_tern(backend, PAYLOAD, batch, duration).map(|r| Sample {
                        sent: r.sent,
                        send_syscalls: r.send_syscalls,
                        delivered: r.delivered,
                        delivered_bytes: r.delivered_bytes,
                        recv_syscalls: 0,
                        elapsed: r.elapsed,
                    })
                };
                let cpu = (process_cpu_time() - cpu_before).as_secs_f64();
                match result {
                    Ok(s) => push(if on_driver { &mut driver } else { &mut raw }, &s, cpu),
                    Err(e) => {
                        eprintln!("   {}: failed: {e}", prefix(backend, flavour));
                        return;
                    }
                }
            }
        }
        eprintln!(
            "   {}: {:.3} M datagrams/s ({:.0} % of sockio's {:.3} M), {:.0} MB/cpu-s (sockio {:.0}), {:.1} datagrams/send syscall, {:.1}/recv syscall, drop {:.1} %",
            prefix(backend, flavour),
            median(&driver[0]) / 1e6,
            100.0 * median(&driver[0]) / median(&raw[0]).max(1e-9),
            median(&raw[0]) / 1e6,
            median(&driver[1]),
            median(&raw[1]),
            median(&driver[2]),
            median(&driver[3]),
            median(&driver[4]) * 100.0,
        );
        for (i, (suffix, unit, better, has_ceiling)) in METRICS.into_iter().enumerate() {
            let name = format!("{}/{suffix}", prefix(backend, flavour));
            let ceiling = format!("{}/{suffix}", ceiling_prefix(backend, flavour));
            let ceiling_wanted = has_ceiling && args.wants(&ceiling);
            if ceiling_wanted {
                emit(&Metric {
                    name: ceiling.clone(),
                    level: LEVEL,
                    unit,
                    better,
                    samples: raw[i].clone(),
                    ceiling: None,
                });
            }
            if args.wants(&name) {
                emit(&Metric {
                    name,
                    level: LEVEL,
                    unit,
                    better,
                    samples: driver[i].clone(),
                    ceiling: ceiling_wanted.then_some(ceiling),
                });
            }
        }
    }
}

/// One sample's values, in the order of [`METRICS`].
fn push(rows: &mut [Vec<f64>; 5], s: &Sample, cpu: f64) {
    let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    rows[0].push(s.delivered as f64 / s.elapsed.as_secs_f64().max(1e-9));
    rows[1].push(if cpu > 0.0 {
        s.delivered_bytes as f64 / 1e6 / cpu
    } else {
        0.0
    });
    rows[2].push(per(s.sent, s.send_syscalls));
    rows[3].push(per(s.delivered, s.recv_syscalls));
    rows[4].push(if s.sent == 0 {
        0.0
    } else {
        (1.0 - s.delivered as f64 / s.sent as f64).max(0.0)
    });
}

impl crate::Group for DriverGroup {
    fn name(&self) -> &str {
        "driver"
    }

    fn level(&self) -> u8 {
        LEVEL
    }

    fn selected(&self, args: &Args) -> bool {
        self.cells.iter().any(|(b, f)| self.wanted(args, *b, *f))
    }

    fn run(&self, args: &Args) {
        eprintln!(
            "   a blaster node and a sink node, each on a driver on its own thread; beside raw tern-sockio, sample by sample"
        );
        for &(backend, flavour) in &self.cells {
            if self.wanted(args, backend, flavour) {
                self.run_backend(args, backend, flavour);
            }
        }
    }
}
