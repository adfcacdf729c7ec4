//! End-to-end workloads (level 2): one client and one server in this
//! process, each on its own thread with a current-thread tokio runtime, over
//! loopback with a maximum UDP payload of 1452 bytes.
//!
//! The workloads are written once against [`Workloads`] and run on every
//! transport that implements it, so each row compares like with like: the
//! same sizes, the same runtime flavour, the same measurement. quinn is the
//! comparison, built only with the `quinn` feature, which CI never enables;
//! Tern always runs.
//!
//! | workload | what it measures |
//! |---|---|
//! | `bulk` | one connection, one stream, N bytes written in 64 KiB chunks until the server has read them all: B/s and MB per CPU-second (both threads) |
//! | `bulk/cost` | one more `bulk` run with allocations counted: allocations and context switches per MB, and (Tern) system calls per MB, datagrams per call, allocations per datagram |
//! | `rr64` | 64-byte request, 64-byte response, one at a time: requests/s and p50/p95/p99, beside a bare UDP echo between two runtimes (`rr64/udp`, the ceiling) |
//! | `rr64x32` | the same with 32 requests in flight |
//! | `rr64busy` | (Tern) `rr64` with busy polling on in both endpoints, beside the same echo on two threads that spin instead of parking (`rr64busy/udp`) |
//! | `connect` | a cold connect (full handshake, no resumption) until the connection is usable: median and p99 |
//! | `connect_x25519` | (Tern) the same with X25519 identities on both sides: the client's proven in its intro |
//! | `message_<N>k/rtt<0\|2>ms` | one message of 1, 4, 16 or 32 KiB at a time, direct or through the [delay relay](crate::relay) (1 ms each way): send until the server's 64-byte answer, p50 and p99 |
//! | `msgs1k` | 1 KiB messages one way as fast as the transport takes them, until the server has counted them all: messages/s |
//! | `streams4` | the same bytes on one stream, then on 4 streams of one connection at once: the 4's aggregate B/s, and degradation = one stream's rate ÷ that aggregate |
//! | `bidir` | one stream the server echoes, so the bytes flow both ways at once: B/s of both directions together |
//! | `clients50` | 50 client endpoints each writing one stream to one server endpoint at once: aggregate B/s, and (Tern) the server's datagrams per receive system call |
//!
//! The workloads of the reference transport's manual suite and the many
//! clients live in [`suite`].

mod busy_poll;
mod cost;
mod ping_pong;
mod pipeline;
#[cfg(feature = "quinn")]
mod quinn;
#[cfg(feature = "quinn")]
mod quinn_tls;
mod rate_cap;
mod suite;
mod tern;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::cli::{Args, Mode};
use crate::report::{Better, Metric, emit_wanted, median, process_cpu_time};

const LEVEL: u8 = 2;
/// Size of a request and of its response in the `rr64` workloads.
pub(crate) const REQUEST_LEN: usize = 64;
/// Requests in flight in `rr64x32`.
const IN_FLIGHT: usize = 32;
/// Maximum UDP payload of every transport and of the ceiling.
const PAYLOAD: usize = 1452;
/// Bytes of each application write in `bulk`.
pub(crate) const WRITE_LEN: usize = 64 * 1024;
/// Messages sent on a fresh connection before `messages` starts timing.
pub(crate) const WARM_UP: usize = 10;

/// What the first byte of a stream or of a message asks of the servers the
/// transports run: anything but the bytes below reads the stream (or takes
/// the message) whole and answers with its first 64 bytes (a stream: with
/// 64 bytes). The requests and `bulk` data are filled with 0xa5.
pub(crate) mod ask {
    /// Echo the stream's bytes back as they come; finish at its end.
    pub(crate) const ECHO: u8 = 0xec;
    /// Count the message (quinn: the unidirectional stream); answer nothing.
    pub(crate) const COUNT: u8 = 0xc0;
    /// Once the connection has counted the little-endian `u64` in bytes 1
    /// to 9, answer with the first 64 bytes.
    pub(crate) const TALLY: u8 = 0x7a;
}

/// A `TALLY` message carrying `count`.
pub(crate) fn tally(count: u64) -> Vec<u8> {
    let mut tally = vec![ask::TALLY; REQUEST_LEN];
    tally[1..9].copy_from_slice(&count.to_le_bytes());
    tally
}

/// The count in a `TALLY` message (`None` if it is too short).
pub(crate) fn tally_count(message: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = message.get(1..9)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// One `clients` sample.
pub(crate) struct ClientsSample {
    /// Bytes the clients wrote, all read by the server.
    pub(crate) bytes: u64,
    /// From the first write until the last client had its answer.
    pub(crate) elapsed: Duration,
    /// The server socket's datagrams per receive system call over the
    /// sample, where the transport counts them.
    pub(crate) datagrams_per_recv_call: Option<f64>,
}

/// What a transport offers the workloads. Each call runs one sample to
/// completion on the transport's own client runtime; the server runs on a
/// thread of its own for the transport's lifetime.
pub(crate) trait Workloads {
    /// The server's address (a relay in front of it forwards there).
    fn server_addr(&self) -> SocketAddr;
    /// Sends `bytes` on each of `streams` streams of one connection, all at
    /// once, until the server has read them all; returns how long that
    /// took.
    fn bulk(&mut self, streams: usize, bytes: u64) -> io::Result<Duration>;
    /// Runs requests, `in_flight` at a time, for `duration`; records each
    /// round trip (ns) in `latencies` and returns how many completed and in
    /// how long (the last ones finish after `duration`).
    fn requests(
        &mut self,
        in_flight: usize,
        duration: Duration,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<(u64, Duration)>;
    /// Connects cold `count` times, one after the other, recording each
    /// connect's duration (ns) in `latencies`.
    fn connects(&mut self, count: usize, latencies: &mut Histogram<u64>) -> io::Result<()>;
    /// On one connection to `to` (the server, or a relay in front of it),
    /// sends a few `len`-byte messages to warm up, then `count` more, one
    /// at a time, each answered once the server has it whole; records each
    /// round trip of the `count` (ns) in `latencies`.
    fn messages(
        &mut self,
        to: SocketAddr,
        len: usize,
        count: usize,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<()>;
    /// Sends `len`-byte messages one way, as fast as the transport takes
    /// them, for `duration`, then waits until the server has counted them
    /// all; returns how many and how long it took.
    fn message_flood(&mut self, len: usize, duration: Duration) -> io::Result<(u64, Duration)>;
    /// Writes `bytes` on one stream the server echoes, reading the echo at
    /// the same time; returns how long until the last byte came back.
    fn bidirectional(&mut self, bytes: u64) -> io::Result<Duration>;
    /// `clients` client endpoints, connected first, each write on one
    /// stream to the server at once for `duration`, then wait for its
    /// answer.
    fn clients(&mut self, clients: usize, duration: Duration) -> io::Result<ClientsSample>;
    /// What the sockets of both ends have done so far, where the transport
    /// counts it.
    fn socket_totals(&self) -> Option<SocketTotals> {
        None
    }
}

/// System calls and datagrams of both ends' sockets together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SocketTotals {
    pub(crate) send_calls: u64,
    pub(crate) recv_calls: u64,
    pub(crate) datagrams_sent: u64,
    pub(crate) datagrams_received: u64,
}

impl std::ops::Sub for SocketTotals {
    type Output = Self;

    fn sub(self, before: Self) -> Self {
        Self {
            send_calls: self.send_calls.saturating_sub(before.send_calls),
            recv_calls: self.recv_calls.saturating_sub(before.recv_calls),
            datagrams_sent: self.datagrams_sent.saturating_sub(before.datagrams_sent),
            datagrams_received: self
                .datagrams_received
                .saturating_sub(before.datagrams_received),
        }
    }
}

/// The end-to-end groups of this build: one per transport compiled in.
pub(crate) fn groups(_args: &Args) -> Vec<Box<dyn crate::Group>> {
    let tern: Box<dyn crate::Group> = Box::new(E2e {
        prefix: "e2e/tern",
        start: || tern::Tern::start().map(|t| Box::new(t) as Box<dyn Workloads>),
        connect_rows: &tern::CONNECT_ROWS,
    });
    #[cfg(not(feature = "quinn"))]
    let quinn: Option<Box<dyn crate::Group>> = None;
    #[cfg(feature = "quinn")]
    let quinn: Option<Box<dyn crate::Group>> = Some(Box::new(E2e {
        prefix: "e2e/quinn",
        start: || quinn::Quinn::start().map(|q| Box::new(q) as Box<dyn Workloads>),
        connect_rows: &[],
    }));
    [tern, busy_poll::group(), rate_cap::group()]
        .into_iter()
        .chain(quinn)
        .collect()
}

/// One transport's end-to-end group.
struct E2e {
    /// `e2e/<transport>`: the group's name and its metrics' prefix.
    prefix: &'static str,
    start: fn() -> io::Result<Box<dyn Workloads>>,
    /// Connect rows of this transport beyond `connect`, each measured
    /// right after it.
    connect_rows: &'static [ConnectRow],
}

/// A connect row of its own: the same measurement as `connect`, on a pair
/// of endpoints set up the way the row needs (other identities, a ticket
/// from an earlier connect).
pub(crate) struct ConnectRow {
    /// The row's workload name (`connect_x25519`).
    pub(crate) workload: &'static str,
    /// Starts the server and client whose `connects` the row times.
    pub(crate) start: fn() -> io::Result<Box<dyn Workloads>>,
}

/// Bytes moved per `bulk` sample.
fn bulk_bytes(mode: Mode) -> u64 {
    match mode {
        Mode::Quick => 128 << 20,
        Mode::Normal => 512 << 20,
        Mode::Full => 1 << 30,
    }
}

/// Connects per `connect` sample.
fn connects_per_sample(mode: Mode) -> usize {
    match mode {
        Mode::Quick => 20,
        Mode::Normal => 50,
        Mode::Full => 200,
    }
}

fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("1 ns to 100 s at 3 digits is valid")
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl crate::Group for E2e {
    fn name(&self) -> &str {
        self.prefix
    }

    fn level(&self) -> u8 {
        LEVEL
    }

    fn selected(&self, args: &Args) -> bool {
        let prefix = self.prefix;
        ["bulk", "bulk/cost", "rr64", "rr64x32", "connect"]
            .iter()
            .chain(self.connect_rows.iter().map(|row| &row.workload))
            .any(|w| args.wants(&format!("{prefix}/{w}/")))
            || suite::selected(prefix, args)
    }

    fn run(&self, args: &Args) {
        let mut transport = match (self.start)() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("   {}: cannot start: {e}", self.prefix);
                return;
            }
        };
        let prefix = self.prefix;
        let samples = args.mode.samples();
        if args.wants(&format!("{prefix}/bulk/")) {
            run_bulk(prefix, transport.as_mut(), args, samples);
        }
        if args.wants(&format!("{prefix}/bulk/cost/")) {
            cost::run(prefix, transport.as_mut(), args);
        }
        for (workload, in_flight) in [("rr64", 1), ("rr64x32", IN_FLIGHT)] {
            if args.wants(&format!("{prefix}/{workload}/")) {
                run_requests(
                    prefix,
                    workload,
                    in_flight,
                    transport.as_mut(),
                    args,
                    ping_pong::run,
                );
            }
        }
        if args.wants(&format!("{prefix}/connect/")) {
            run_connects(prefix, "connect", transport.as_mut(), args, samples);
        }
        for row in self.connect_rows {
            if !args.wants(&format!("{prefix}/{}/", row.workload)) {
                continue;
            }
            match (row.start)() {
                Ok(mut pair) => run_connects(prefix, row.workload, pair.as_mut(), args, samples),
                Err(e) => eprintln!("   {prefix}/{}: cannot start: {e}", row.workload),
            }
        }
        suite::run(prefix, transport.as_mut(), args);
    }
}

fn emit_all(args: &Args, metrics: Vec<(String, &'static str, Better, Vec<f64>)>) {
    for (name, unit, better, samples) in metrics {
        emit_wanted(
            args,
            Metric {
                name,
                level: LEVEL,
                unit,
                better,
                samples,
                ceiling: None,
            },
        );
    }
}

/// The raw tern-sockio mover with the backend Auto picks, the same payload,
/// and the driver's batch: what the socket alone moves, one way, in B/s.
fn sockio_ceiling(duration: Duration) -> io::Result<f64> {
    let backend = tern_sockio::Capabilities::get().best();
    let batch = tern_peer::driver::DriverConfig::default().datagrams_per_turn();
    let sample = crate::sockio_matrix::run_tern(backend, PAYLOAD, batch, duration)?;
    Ok(sample.delivered_bytes as f64 / sample.elapsed.as_secs_f64().max(1e-9))
}

fn run_bulk(prefix: &str, transport: &mut dyn Workloads, args: &Args, samples: usize) {
    let bytes = bulk_bytes(args.mode);
    let (mut rate, mut per_cpu, mut ceiling) = (Vec::new(), Vec::new(), Vec::new());
    let mut raw_pipeline = Vec::new();
    for _ in 0..samples {
        let cpu = process_cpu_time();
        match transport.bulk(1, bytes) {
            Ok(elapsed) => {
                let cpu = (process_cpu_time() - cpu).as_secs_f64().max(1e-9);
                rate.push(bytes as f64 / elapsed.as_secs_f64().max(1e-9));
                per_cpu.push(bytes as f64 / 1e6 / cpu);
                // The ceiling right after, for as long as the sample took.
                let length = elapsed.max(args.mode.sample_time());
                match sockio_ceiling(length) {
                    Ok(c) => ceiling.push(c),
                    Err(e) => eprintln!("   {prefix}/bulk/sockio: sample failed: {e}"),
                }
                match pipeline::run(length) {
                    Ok(c) => raw_pipeline.push(c),
                    Err(e) => eprintln!("   {prefix}/bulk/pipeline: sample failed: {e}"),
                }
            }
            Err(e) => eprintln!("   {prefix}/bulk: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {prefix}/bulk: {:.1} MB/s ({:.0} % of the raw pipeline's {:.1} MB/s; raw tern-sockio {:.1} MB/s), {:.0} MB/cpu-s ({} MiB per sample)",
        median(&rate) / 1e6,
        100.0 * median(&rate) / median(&raw_pipeline).max(1e-9),
        median(&raw_pipeline) / 1e6,
        median(&ceiling) / 1e6,
        median(&per_cpu),
        bytes >> 20
    );
    let sockio_name = format!("{prefix}/bulk/sockio/bytes_per_s");
    let ceiling_name = format!("{prefix}/bulk/pipeline/bytes_per_s");
    emit_wanted(
        args,
        Metric {
            name: format!("{prefix}/bulk/bytes_per_s"),
            level: LEVEL,
            unit: "B/s",
            better: Better::Higher,
            samples: rate,
            ceiling: (!raw_pipeline.is_empty()).then(|| ceiling_name.clone()),
        },
    );
    emit_all(
        args,
        vec![
            (ceiling_name, "B/s", Better::Higher, raw_pipeline),
            (sockio_name, "B/s", Better::Higher, ceiling),
            (
                format!("{prefix}/bulk/mb_per_cpu_s"),
                "MB/cpu-s",
                Better::Higher,
                per_cpu,
            ),
        ],
    );
}

/// A bare UDP echo run for a while: round trips recorded, how many in how long.
type Echo = fn(Duration, &mut Histogram<u64>) -> io::Result<(u64, Duration)>;

/// Requests `in_flight` at a time; one at a time, beside `echo`, its ceiling.
fn run_requests(
    prefix: &str,
    workload: &str,
    in_flight: usize,
    transport: &mut dyn Workloads,
    args: &Args,
    echo: Echo,
) {
    let samples = args.mode.samples();
    let duration = args.mode.sample_time() * 4;
    let (mut rate, mut p50, mut p95, mut p99) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // One at a time, the ceiling is a bare UDP echo between two runtimes,
    // measured right after each sample for as long.
    let with_ceiling = in_flight == 1;
    let (mut udp_rate, mut udp_p50) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let mut latencies = latency_histogram();
        match transport.requests(in_flight, duration, &mut latencies) {
            Ok((done, elapsed)) => {
                rate.push(done as f64 / elapsed.as_secs_f64().max(1e-9));
                p50.push(latencies.value_at_quantile(0.50) as f64);
                p95.push(latencies.value_at_quantile(0.95) as f64);
                p99.push(latencies.value_at_quantile(0.99) as f64);
            }
            Err(e) => eprintln!("   {prefix}/{workload}: sample failed: {e}"),
        }
        if with_ceiling {
            let mut latencies = latency_histogram();
            match echo(duration, &mut latencies) {
                Ok((done, elapsed)) => {
                    udp_rate.push(done as f64 / elapsed.as_secs_f64().max(1e-9));
                    udp_p50.push(latencies.value_at_quantile(0.50) as f64);
                }
                Err(e) => eprintln!("   {prefix}/{workload}/udp: sample failed: {e}"),
            }
        }
    }
    eprintln!(
        "   {prefix}/{workload}: {:.0} requests/s, p50 {:.1} µs, p99 {:.1} µs",
        median(&rate),
        median(&p50) / 1e3,
        median(&p99) / 1e3
    );
    let name = |m: &str| format!("{prefix}/{workload}/{m}");
    let ceiling = name("udp/requests_per_s");
    if with_ceiling {
        eprintln!(
            "   {prefix}/{workload}/udp: a bare 64-byte UDP echo: {:.0} round trips/s, p50 {:.1} µs",
            median(&udp_rate),
            median(&udp_p50) / 1e3
        );
    }
    emit_wanted(
        args,
        Metric {
            name: name("requests_per_s"),
            level: LEVEL,
            unit: "requests/s",
            better: Better::Higher,
            samples: rate,
            ceiling: (!udp_rate.is_empty()).then(|| ceiling.clone()),
        },
    );
    emit_all(
        args,
        vec![
            (ceiling, "requests/s", Better::Higher, udp_rate),
            (name("udp/p50"), "ns", Better::Lower, udp_p50),
            (name("p50"), "ns", Better::Lower, p50),
            (name("p95"), "ns", Better::Lower, p95),
            (name("p99"), "ns", Better::Lower, p99),
        ],
    );
}

fn run_connects(
    prefix: &str,
    workload: &str,
    transport: &mut dyn Workloads,
    args: &Args,
    samples: usize,
) {
    let count = connects_per_sample(args.mode);
    let (mut p50, mut p99) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let mut latencies = latency_histogram();
        match transport.connects(count, &mut latencies) {
            Ok(()) => {
                p50.push(latencies.value_at_quantile(0.50) as f64);
                p99.push(latencies.value_at_quantile(0.99) as f64);
            }
            Err(e) => eprintln!("   {prefix}/{workload}: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {prefix}/{workload}: median {:.0} µs, p99 {:.0} µs",
        median(&p50) / 1e3,
        median(&p99) / 1e3
    );
    emit_all(
        args,
        vec![
            (format!("{prefix}/{workload}/p50"), "ns", Better::Lower, p50),
            (format!("{prefix}/{workload}/p99"), "ns", Better::Lower, p99),
        ],
    );
}
