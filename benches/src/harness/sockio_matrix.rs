//! Level 2, sockio: every backend over loopback, payload × batch, beside the
//! raw-syscall ceiling of its pattern.
//!
//! A sender thread and a receiver thread (each with its own current-thread
//! tokio runtime for the Tern backends) move datagrams for a fixed time; the
//! figures count what ARRIVES: delivered datagrams/s and B/s over the time
//! from start to the last datagram received, datagrams per send system call,
//! the share lost on the way (`drop_ratio`), and delivered MB per CPU-second
//! of the whole process.
//!
//! The matrix is the reference suite's: payload 512, 1400, 1452, 4096, 8192
//! bytes × batch 1, 10, 50, 100, 500, plus 64-byte datagrams at batch 64 (1
//! for the unbatched). "Batch" is the number of datagrams handed to one send
//! call. Portable and raw `sendto` do not batch and run batch 1 only. Mmsg
//! and IoUring send a batch in one `sendmmsg` / one `io_uring_enter` (the
//! kernel takes up to 1024 messages per call, more than any batch here).
//! Offload cuts a batch into GSO messages of at most 64 segments and 65 507
//! bytes (45 × 1452, 7 × 8192) and sends them in one `sendmmsg`. Receivers
//! read up to 64 messages per call. The whole matrix runs in every mode;
//! quick mode takes one 150 ms sample per cell (about a minute for level 2).
//!
//! Each backend is measured beside its ceiling: a cell runs the raw pattern
//! and the backends it limits back to back, sample by sample, so the ratio of
//! their medians compares runs made under the same machine load.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tern_sockio::{Backend, Capabilities, SocketConfig, Transmit, UdpSocket};

use crate::cli::Args;
use crate::raw::{self, Pattern};
use crate::report::{Better, Metric, emit, median, process_cpu_time};

/// Payload sizes of the reference matrix, in bytes.
const PAYLOADS: [usize; 5] = [512, 1400, 1452, 4096, 8192];
/// Batch sizes of the reference matrix, in datagrams per send call.
const BATCHES: [usize; 5] = [1, 10, 50, 100, 500];
/// The small-datagram cell: 64-byte datagrams, batch 64 where the backend batches.
const SMALL: (usize, usize) = (64, 64);
/// Receive messages per call (and slots) for every receiver.
pub(crate) const RECV_SLOTS: usize = 64;
/// A receiver stops after the sender is done and nothing arrived for this long.
pub(crate) const IDLE: Duration = Duration::from_millis(30);
/// No sample runs longer than this, whatever happens.
const HARD_STOP: Duration = Duration::from_secs(20);
const LEVEL: u8 = 2;

/// What one sample measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SampleResult {
    /// Datagrams handed to the kernel.
    pub(crate) sent: u64,
    /// Send system calls made.
    pub(crate) send_syscalls: u64,
    /// Datagrams that arrived.
    pub(crate) delivered: u64,
    /// Payload bytes that arrived.
    pub(crate) delivered_bytes: u64,
    /// From the start to the last datagram received.
    pub(crate) elapsed: Duration,
}

/// Whether a receiver may stop: the sender is done (the caller saw nothing
/// for `IDLE`), or the sample ran into the hard stop.
pub(crate) fn receiver_done(done: &AtomicBool, start: Instant) -> bool {
    done.load(Ordering::Acquire) || start.elapsed() > HARD_STOP
}

/// Segments of `payload` bytes in one GSO message: at most the kernel's 64
/// and at most 65 507 bytes of payload (45 for 1452-byte datagrams).
pub(crate) fn gso_segments(payload: usize) -> usize {
    (65_507 / payload.max(1)).clamp(1, 64)
}

/// Who moves the datagrams in a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mover {
    Tern(Backend),
    Raw(Pattern),
}

impl Mover {
    fn name(self) -> &'static str {
        match self {
            Self::Tern(b) => b.name(),
            Self::Raw(Pattern::Sendto) => "raw_sendto",
            Self::Raw(Pattern::Mmsg) => "raw_mmsg",
            Self::Raw(Pattern::Gso) => "raw_gso",
        }
    }

    fn batches(self) -> bool {
        !matches!(
            self,
            Self::Tern(Backend::Portable) | Self::Raw(Pattern::Sendto)
        )
    }

    /// The raw pattern that is this backend's limit. IoUring uses GSO/GRO
    /// where the kernel has them, like Offload.
    fn ceiling(self, caps: Capabilities) -> Option<Pattern> {
        let offload = caps.gso && caps.gro;
        match self {
            Self::Tern(Backend::Portable) => Some(Pattern::Sendto),
            Self::Tern(Backend::Offload | Backend::IoUring) if offload => Some(Pattern::Gso),
            Self::Tern(_) => Some(Pattern::Mmsg),
            Self::Raw(_) => None,
        }
    }

    fn cells(self) -> Vec<(usize, usize)> {
        let batches: &[usize] = if self.batches() { &BATCHES } else { &[1] };
        let mut cells: Vec<(usize, usize)> = PAYLOADS
            .iter()
            .flat_map(|p| batches.iter().map(move |b| (*p, *b)))
            .collect();
        cells.push((SMALL.0, if self.batches() { SMALL.1 } else { 1 }));
        cells
    }

    fn measure(self, payload: usize, batch: usize, duration: Duration) -> io::Result<SampleResult> {
        match self {
            Self::Tern(backend) => run_tern(backend, payload, batch, duration),
            Self::Raw(pattern) => raw::run(pattern, payload, batch, duration),
        }
    }
}

fn prefix(mover: Mover, payload: usize, batch: usize) -> String {
    format!("sockio/{}/{payload}B/batch{batch}", mover.name())
}

/// Metric suffixes of a cell, with unit, direction and whether the ceiling applies.
const METRICS: [(&str, &str, Better, bool); 5] = [
    ("datagrams_per_s", "datagrams/s", Better::Higher, true),
    ("bytes_per_s", "B/s", Better::Higher, true),
    (
        "datagrams_per_syscall",
        "datagrams/syscall",
        Better::Higher,
        true,
    ),
    ("drop_ratio", "ratio", Better::Lower, false),
    ("mb_per_cpu_s", "MB/cpu-s", Better::Higher, true),
];

fn cell_selected(args: &Args, mover: Mover, payload: usize, batch: usize) -> bool {
    let p = prefix(mover, payload, batch);
    METRICS
        .iter()
        .any(|(m, ..)| args.wants(&format!("{p}/{m}")))
}

/// One raw pattern and the Tern backends it is the ceiling of, measured
/// together: each cell runs every mover back to back, one sample each in
/// turn, the order rotating from sample to sample. A backend and its ceiling
/// thus see the same machine load, and a ratio between them means something
/// even while other work competes for the cores.
struct SockioGroup {
    name: String,
    /// The ceiling (when this kernel can run it) first, then the backends.
    movers: Vec<Mover>,
    caps: Capabilities,
}

/// The level-2 sockio groups: one per raw pattern, with the backends it limits.
pub(crate) fn groups(_args: &Args) -> Vec<Box<dyn crate::Group>> {
    let caps = Capabilities::get();
    [Pattern::Sendto, Pattern::Mmsg, Pattern::Gso]
        .into_iter()
        .filter_map(|pattern| {
            let raw_available = match pattern {
                Pattern::Gso => caps.gso && caps.gro,
                Pattern::Sendto => true,
                Pattern::Mmsg => caps.mmsg,
            };
            let mut movers: Vec<Mover> = Backend::ALL
                .into_iter()
                .filter(|b| caps.supports(*b))
                .map(Mover::Tern)
                .filter(|m| m.ceiling(caps) == Some(pattern))
                .collect();
            if raw_available {
                movers.insert(0, Mover::Raw(pattern));
            }
            (!movers.is_empty()).then(|| {
                Box::new(SockioGroup {
                    name: format!("sockio/{}", Mover::Raw(pattern).name()),
                    movers,
                    caps,
                }) as Box<dyn crate::Group>
            })
        })
        .collect()
}

impl crate::Group for SockioGroup {
    fn name(&self) -> &str {
        &self.name
    }

    fn level(&self) -> u8 {
        LEVEL
    }

    fn selected(&self, args: &Args) -> bool {
        self.movers.iter().any(|m| {
            m.cells()
                .iter()
                .any(|(p, b)| cell_selected(args, *m, *p, *b))
        })
    }

    fn run(&self, args: &Args) {
        let names: Vec<&str> = self.movers.iter().map(|m| m.name()).collect();
        eprintln!("   {} measured in turn, sample by sample", names.join(", "));
        match self.movers[0] {
            Mover::Raw(Pattern::Gso) => eprintln!(
                "   batch = datagrams per send call, cut into GSO messages of <= 64 segments and <= 65 507 B, all in one sendmmsg"
            ),
            m if m.batches() => eprintln!(
                "   batch = datagrams per send call (one sendmmsg / io_uring_enter; the kernel caps a call at 1024)"
            ),
            _ => eprintln!("   one datagram per system call: batch 1 only"),
        }
        for (payload, batch) in self.movers[0].cells() {
            self.run_cell(args, payload, batch);
        }
    }
}

/// The five metric rows of one mover in one cell, one value per sample.
#[derive(Default)]
struct Rows([Vec<f64>; 5]);

impl Rows {
    fn push(&mut self, r: &SampleResult, cpu: f64) {
        let secs = r.elapsed.as_secs_f64().max(1e-9);
        let delivered = r.delivered as f64;
        self.0[0].push(delivered / secs);
        self.0[1].push(r.delivered_bytes as f64 / secs);
        self.0[2].push(if r.send_syscalls == 0 {
            0.0
        } else {
            r.sent as f64 / r.send_syscalls as f64
        });
        self.0[3].push(if r.sent == 0 {
            0.0
        } else {
            (1.0 - delivered / r.sent as f64).max(0.0)
        });
        self.0[4].push(if cpu > 0.0 {
            r.delivered_bytes as f64 / 1e6 / cpu
        } else {
            0.0
        });
    }
}

impl SockioGroup {
    fn run_cell(&self, args: &Args, payload: usize, batch: usize) {
        let movers: Vec<Mover> = self
            .movers
            .iter()
            .copied()
            .filter(|m| cell_selected(args, *m, payload, batch))
            .collect();
        if movers.is_empty() {
            return;
        }
        let mut rows: Vec<Option<Rows>> = movers.iter().map(|_| Some(Rows::default())).collect();
        for sample in 0..args.mode.samples() {
            for turn in 0..movers.len() {
                let i = (turn + sample) % movers.len();
                let Some(row) = rows[i].as_mut() else {
                    continue;
                };
                let cpu_before = process_cpu_time();
                let result = movers[i].measure(payload, batch, args.mode.sample_time());
                let cpu = (process_cpu_time() - cpu_before).as_secs_f64();
                match result {
                    Ok(r) => row.push(&r, cpu),
                    Err(e) => {
                        eprintln!("   {}: failed: {e}", prefix(movers[i], payload, batch));
                        rows[i] = None;
                    }
                }
            }
        }
        for (mover, rows) in movers.iter().zip(rows) {
            if let Some(rows) = rows {
                self.emit_cell(args, *mover, payload, batch, rows);
            }
        }
    }

    fn emit_cell(&self, args: &Args, mover: Mover, payload: usize, batch: usize, rows: Rows) {
        let name = prefix(mover, payload, batch);
        let rows = rows.0;
        let ceiling = mover
            .ceiling(self.caps)
            .map(Mover::Raw)
            .filter(|c| self.movers.contains(c) && cell_selected(args, *c, payload, batch));
        eprintln!(
            "   {name}: {:.3} M datagrams/s, {:.1} MB/s, {:.1} datagrams/syscall, drop {:.1} %, {:.0} MB/cpu-s",
            median(&rows[0]) / 1e6,
            median(&rows[1]) / 1e6,
            median(&rows[2]),
            median(&rows[3]) * 100.0,
            median(&rows[4]),
        );
        for ((suffix, unit, better, has_ceiling), samples) in METRICS.into_iter().zip(rows) {
            let metric_name = format!("{name}/{suffix}");
            if !args.wants(&metric_name) {
                continue;
            }
            emit(&Metric {
                name: metric_name,
                level: LEVEL,
                unit,
                better,
                samples,
                ceiling: ceiling
                    .filter(|_| has_ceiling)
                    .map(|c| format!("{}/{suffix}", prefix(c, payload, batch))),
            });
        }
    }
}

/// One sample through Tern's sockets (also the ceiling of the driver group): sender and receiver threads, each on
/// its own current-thread runtime, both on `backend`.
pub(crate) fn run_tern(
    backend: Backend,
    payload: usize,
    batch: usize,
    duration: Duration,
) -> io::Result<SampleResult> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let barrier = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let receiver = {
        let (barrier, done) = (Arc::clone(&barrier), Arc::clone(&done));
        std::thread::spawn(move || -> io::Result<(u64, u64, Duration)> {
            runtime()?.block_on(async {
                let mut config = SocketConfig::default();
                config.backend = Some(backend);
                config.batch_size = RECV_SLOTS;
                config.max_datagram_size = payload.max(1);
                let bound = UdpSocket::bind(loopback, config);
                let _ = addr_tx.send(match &bound {
                    Ok(rx) => rx.local_addr()?,
                    Err(_) => loopback,
                });
                barrier.wait();
                let mut rx = bound?;
                let mut bufs = rx.new_recv_buffers();
                let start = Instant::now();
                let mut last = start;
                loop {
                    // Read what is queued without arming a timer; only an
                    // empty queue waits, and only that wait is bounded.
                    match rx.try_recv(&mut bufs) {
                        Ok(_) => {
                            last = Instant::now();
                            continue;
                        }
                        Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                        Err(_) => {}
                    }
                    match tokio::time::timeout(IDLE, rx.recv(&mut bufs)).await {
                        Ok(result) => {
                            result?;
                            last = Instant::now();
                        }
                        Err(_) if receiver_done(&done, start) => break,
                        Err(_) => {}
                    }
                }
                let c = rx.counters();
                Ok((c.datagrams_received, c.bytes_received, last - start))
            })
        })
    };
    let to = addr_rx
        .recv()
        .map_err(|_| io::Error::other("receiver did not start"))?;
    let sent = runtime().and_then(|rt| {
        rt.block_on(async {
            let mut config = SocketConfig::default();
            config.backend = Some(backend);
            config.batch_size = batch;
            let bound = UdpSocket::bind(loopback, config);
            barrier.wait();
            let mut tx = bound?;
            let data = vec![0x5a_u8; payload * batch];
            let per_transmit = tx.max_transmit_segments().min(gso_segments(payload));
            let transmits: Vec<Transmit<'_>> = data
                .chunks(payload * per_transmit)
                .map(|c| Transmit::new(to, c).with_segment_size(payload))
                .collect();
            let end = Instant::now() + duration;
            while Instant::now() < end {
                tx.send_all(&transmits).await?;
            }
            Ok::<_, io::Error>(tx.counters())
        })
    });
    done.store(true, Ordering::Release);
    let received = receiver
        .join()
        .map_err(|_| io::Error::other("receiver thread panicked"))??;
    let sent = sent?;
    Ok(SampleResult {
        sent: sent.datagrams_sent,
        send_syscalls: sent.send_syscalls,
        delivered: received.0,
        delivered_bytes: received.1,
        elapsed: received.2,
    })
}

/// A current-thread runtime with I/O and timers: every harness thread runs one.
pub(crate) fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
