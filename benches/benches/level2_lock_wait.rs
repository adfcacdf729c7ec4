//! Level 2: how long an application call waits for the endpoint's lock
//! while the driver moves a bulk transfer, on the multi-thread runtime.
//!
//! Two endpoints on loopback in one process, on a tokio runtime with two
//! workers. A client task writes a stream as fast as the server reads it;
//! beside it a probe task times one call every 200 µs, in turn:
//! `Connection::stats()` of the loaded connection (published figures, no
//! endpoint lock), the same call on a connection of a second, idle pair of
//! endpoints (the control: it waits for no lock the transfer holds, only
//! for the threads to be scheduled, so the difference between the two is
//! the lock's), `Endpoint::stats()` of the loaded endpoint, and the calls
//! that act. Those on the loaded connection (`send` of a 64-byte message,
//! `write` of 64 bytes on a second stream) include waiting for room in
//! buffers the transfer keeps full: flow control, not the lock. The same
//! calls on a second connection of the loaded endpoint, whose buffers have
//! room, time the lock: `send`, `write` and `send_datagram` of 64 bytes,
//! and, a round later, `recv`, `read` and `recv_datagram` of what its peer
//! echoed, and `accept_bi` and `accept_uni` of the streams its peer opened
//! for each message; `open_bi` and `open_uni` on the quiet connection,
//! and the drop of what they gave (which finishes the empty stream; the
//! peer accepts each and drops it unread, which gives its credit back); `Endpoint::accept` on the loaded
//! server of a connection a third endpoint opens every [`DIAL_EVERY`]
//! rounds; and one
//! poll of `closed()` of the quiet connection (it is open: the poll only
//! registers, under the lock). A read or an accept is timed in one of two
//! rows: "delivered" when what it takes had arrived (its first poll was
//! ready: the row that says whether it waits for the lock), "waited" when
//! it had not (that row's time is mostly the echo's way back). Every call
//! that is a future is awaited to its end. Before the load, the loaded
//! connection's `stats()` is timed idle, as the baseline. Durations go to
//! HDR histograms (1 ns resolution); the percentiles are printed, with the
//! transfer's throughput.
//!
//! `cargo bench -p tern-benches --bench level2_lock_wait` (add
//! `-- <seconds>` for a longer load phase, default 5, and a second number
//! for the datagrams the transfer's drivers gather per turn, default 256:
//! shorter turns hold the lock for less at a time).

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use tern_peer::driver::DriverConfig;
use tern_peer::{Config, Connection, Endpoint, IdentityKey, RecvStream, SendStream};

/// Time between two probes.
const PROBE_EVERY: Duration = Duration::from_micros(200);

/// How long a probe waits for an echoed datagram.
const DATAGRAM_PATIENCE: Duration = Duration::from_millis(20);

/// Rounds of probes between two connections the dialer opens to the
/// loaded server (each costs a handshake's work to both).
const DIAL_EVERY: u64 = 8;

/// Bytes per stream write.
const CHUNK: usize = 64 << 10;

/// Bytes of each probing `send` and `write`.
static SMALL: [u8; 64] = [0xa5; 64];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let numbers: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seconds = numbers.first().copied().unwrap_or(5);
    let per_turn = numbers.get(1).map_or(256, |&n| n as usize);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(Duration::from_secs(seconds), per_turn))
}

async fn run(load: Duration, per_turn: usize) -> Result<(), Box<dyn std::error::Error>> {
    let identity = IdentityKey::random()?;
    let public = identity.public();
    let localhost = "127.0.0.1:0".parse()?;
    let config =
        Config::default().driver(DriverConfig::default().send_datagrams_per_turn(per_turn));
    println!("{per_turn} datagrams per driver turn");
    let server = Endpoint::bind(localhost, config.clone().identity(identity))?;
    let client = Endpoint::bind(localhost, config)?;
    let (connection, accepted) = tokio::join!(
        client.connect(server.local_addr(), &public),
        server.accept_connection()
    );
    let (connection, accepted) = (connection?, accepted.ok_or("the server stopped")?);
    let (quiet, quiet_accepted) = tokio::join!(
        client.connect(server.local_addr(), &public),
        server.accept_connection()
    );
    let (quiet, quiet_accepted) = (quiet?, quiet_accepted.ok_or("the server stopped")?);
    echo(quiet_accepted);
    let dialer = Endpoint::bind(localhost, Config::default())?;

    let mut idle = Histogram::new_with_bounds(1, 10_000_000_000, 3)?;
    let end = quanta::Instant::now() + Duration::from_secs(1);
    while quanta::Instant::now() < end {
        time_call(&mut idle, || connection.stats());
        tokio::time::sleep(PROBE_EVERY).await;
    }
    report("idle connection: Connection::stats()", &idle);
    let control_server = Endpoint::bind(
        localhost,
        Config::default().identity(IdentityKey::random()?),
    )?;
    let control_client = Endpoint::bind(localhost, Config::default())?;
    let control_public = control_server.public().ok_or("identity")?.clone();
    let (control, control_accepted) = tokio::join!(
        control_client.connect(control_server.local_addr(), &control_public),
        control_server.accept_connection()
    );
    let (control, _control_accepted) = (control?, control_accepted.ok_or("stopped")?);

    let running = Arc::new(AtomicBool::new(true));
    // The probes' messages are taken as they come.
    tokio::spawn({
        let accepted = accepted.clone();
        async move { while accepted.recv().await.is_ok() {} }
    });
    let reader = tokio::spawn(async move {
        let (_, mut download) = accepted.accept_bi().await?;
        // The probes' stream, opened after the transfer's, is read too.
        tokio::spawn(async move {
            let (_, mut stream) = accepted.accept_bi().await?;
            let mut buf = vec![0u8; 4096];
            while stream.read(&mut buf).await?.is_some() {}
            Ok::<_, tern_peer::ReadError>(())
        });
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        while let Some(n) = download.read(&mut buf).await? {
            total += n as u64;
        }
        Ok::<_, tern_peer::ReadError>(total)
    });
    let writer = {
        let connection = connection.clone();
        let running = Arc::clone(&running);
        tokio::spawn(async move {
            let (mut upload, _) = connection.open_bi().await?;
            let chunk = vec![0x5a; CHUNK];
            let start = quanta::Instant::now();
            while running.load(Ordering::Relaxed) {
                upload.write_all(&chunk).await?;
            }
            upload
                .finish()
                .map_err(|_| tern_peer::WriteError::ClosedStream)?;
            Ok::<_, tern_peer::WriteError>(start.elapsed())
        })
    };
    // Let the transfer reach its pace before probing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (loaded_stream, _) = connection.open_bi().await?;
    let (quiet_send, quiet_recv) = quiet.open_bi().await?;
    let mut probes = Probes {
        server: &server,
        dialer: &dialer,
        public: &public,
        loaded: &connection,
        control: &control,
        endpoint: &client,
        loaded_stream,
        quiet: &quiet,
        quiet_send,
        quiet_recv,
        times: std::array::from_fn(|_| {
            Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("valid bounds")
        }),
    };
    probes.run(load).await;
    running.store(false, Ordering::Relaxed);
    let elapsed = writer.await??;
    let bytes = reader.await??;
    for (name, histogram) in PROBES.iter().zip(&probes.times) {
        report(name, histogram);
    }
    println!(
        "transfer: {} MiB in {:.2} s, {:.0} MB/s",
        bytes >> 20,
        elapsed.as_secs_f64(),
        bytes as f64 / elapsed.as_secs_f64() / 1e6
    );
    Ok(())
}

/// Sends back every message, datagram and stream byte of `connection`,
/// and opens a two-way and a one-way stream (one byte each) for every
/// message; the streams opened to it after the first are accepted and
/// dropped unread.
fn echo(connection: Connection) {
    tokio::spawn({
        let connection = connection.clone();
        async move {
            while let Ok(message) = connection.recv().await {
                if connection.send(message).await.is_err() {
                    break;
                }
                tokio::spawn(open_streams(connection.clone()));
            }
        }
    });
    tokio::spawn({
        let connection = connection.clone();
        async move {
            while let Ok(datagram) = connection.recv_datagram().await {
                let _ = connection.send_datagram(datagram);
            }
        }
    });
    tokio::spawn({
        let connection = connection.clone();
        async move {
            while let Ok(stream) = connection.accept_uni().await {
                drop(stream);
            }
        }
    });
    tokio::spawn(async move {
        let (mut send, mut recv) = connection.accept_bi().await?;
        // The streams the probe opens after this one are dropped unread.
        tokio::spawn({
            let connection = connection.clone();
            async move {
                while let Ok(halves) = connection.accept_bi().await {
                    drop(halves);
                }
            }
        });
        let mut buf = vec![0u8; 4096];
        while let Some(n) = recv.read(&mut buf).await? {
            send.write_all(&buf[..n])
                .await
                .map_err(|_| tern_peer::ReadError::ClosedStream)?;
        }
        Ok::<_, tern_peer::ReadError>(())
    });
}

/// Opens a two-way and a one-way stream on `connection`, with a byte each,
/// for the other side's `accept_bi` and `accept_uni` probes.
async fn open_streams(connection: Connection) -> Result<(), tern_peer::WriteError> {
    for mut stream in [connection.open_bi().await?.0, connection.open_uni().await?] {
        stream.write_all(&SMALL[..1]).await?;
        stream
            .finish()
            .map_err(|_| tern_peer::WriteError::ClosedStream)?;
    }
    Ok(())
}

/// What each probe times, in the order they run during the load. A read
/// (`recv`, `read`, `recv_datagram`) of what the quiet connection's peer
/// echoed a round earlier is timed in one of two rows: "delivered" when
/// its first poll was ready (what it reads had arrived: the call's own
/// time, its wait for the endpoint's lock included), "waited" when the
/// echo was not there yet (its time is mostly the echo's way back).
const PROBES: [&str; 25] = [
    "under bulk load: Connection::stats() of the loaded connection",
    "control (another endpoint, idle): Connection::stats()",
    "Endpoint::stats() of the loaded endpoint",
    "send of 64 B on the loaded connection (waits for room in its buffers)",
    "write of 64 B on the loaded connection's second stream (waits for room in its buffers)",
    "recv of an echoed message, delivered",
    "recv of an echoed message, waited for the echo",
    "read of echoed bytes, delivered",
    "read of echoed bytes, waited for the echo",
    "recv_datagram of an echoed datagram, delivered",
    "recv_datagram of an echoed datagram, waited for the echo",
    "send of 64 B on a quiet connection of the loaded endpoint",
    "write of 64 B on a quiet connection of the loaded endpoint",
    "send_datagram of 64 B on the quiet connection",
    "accept_bi of a stream the quiet connection's peer opened, delivered",
    "accept_bi of a stream the quiet connection's peer opened, waited",
    "accept_uni of a stream the quiet connection's peer opened, delivered",
    "accept_uni of a stream the quiet connection's peer opened, waited",
    "open_bi on the quiet connection",
    "open_uni on the quiet connection",
    "drop of open_bi's two halves",
    "drop of open_uni's half",
    "Endpoint::accept on the loaded server of a dialled connection, delivered",
    "Endpoint::accept on the loaded server of a dialled connection, waited",
    "closed() of the quiet connection, one poll (open: pending)",
];

/// The calls timed under load, and their durations (in [`PROBES`] order).
struct Probes<'a> {
    /// The endpoint that reads the transfer, where `accept` is timed.
    server: &'a Endpoint,
    /// An idle endpoint that opens a connection to the server every
    /// [`DIAL_EVERY`] rounds.
    dialer: &'a Endpoint,
    /// The server's identity.
    public: &'a tern_peer::PublicIdentity,
    /// The connection that carries the transfer.
    loaded: &'a Connection,
    /// A connection of another, idle pair of endpoints.
    control: &'a Connection,
    /// The loaded endpoint, whose `stats()` is timed.
    endpoint: &'a Endpoint,
    /// A second stream of the loaded connection, written to.
    loaded_stream: SendStream,
    /// A second connection of the loaded endpoint, whose buffers have
    /// room: its peer echoes what it sends.
    quiet: &'a Connection,
    quiet_send: SendStream,
    quiet_recv: RecvStream,
    times: [Histogram<u64>; PROBES.len()],
}

impl Probes<'_> {
    /// Runs the probes in turn, [`PROBE_EVERY`] apart, for `time`. The
    /// quiet connection's message, bytes and datagram are sent at the end
    /// of a round, and their echoes read in the next one, a dozen probes
    /// later (see [`PROBES`]).
    async fn run(&mut self, time: Duration) {
        let end = quanta::Instant::now() + time;
        let mut buf = [0u8; 4096];
        self.send_to_echo().await;
        let mut round = 0u64;
        while quanta::Instant::now() < end {
            round += 1;
            let [
                stats,
                control,
                endpoint,
                sent,
                written,
                received,
                received_late,
                read,
                read_late,
                datagram_received,
                datagram_late,
                quiet_sent,
                quiet_written,
                datagram,
                accepted_bi,
                accepted_bi_late,
                accepted_uni,
                accepted_uni_late,
                opened_bi,
                opened_uni,
                dropped_bi,
                dropped_uni,
                accepted,
                accepted_late,
                closed,
            ] = &mut self.times;
            time_call(stats, || self.loaded.stats());
            pause().await;
            time_call(control, || self.control.stats());
            pause().await;
            time_call(endpoint, || self.endpoint.stats());
            pause().await;
            let start = quanta::Instant::now();
            let result = self.loaded.send(&SMALL[..]).await;
            record(sent, start, result);
            pause().await;
            let start = quanta::Instant::now();
            let result = self.loaded_stream.write(&SMALL).await;
            record(written, start, result);
            pause().await;
            time_read(received, received_late, self.quiet.recv()).await;
            pause().await;
            time_read(read, read_late, self.quiet_recv.read(&mut buf)).await;
            pause().await;
            // A datagram may be lost, and nothing more is sent before
            // the round ends: the wait is cut short.
            let echoed = tokio::time::timeout(DATAGRAM_PATIENCE, self.quiet.recv_datagram());
            time_read(datagram_received, datagram_late, echoed).await;
            pause().await;
            let start = quanta::Instant::now();
            let result = self.quiet.send(&SMALL[..]).await;
            record(quiet_sent, start, result);
            pause().await;
            let start = quanta::Instant::now();
            let result = self.quiet_send.write(&SMALL).await;
            record(quiet_written, start, result);
            pause().await;
            time_call(datagram, || self.quiet.send_datagram(&SMALL[..]));
            pause().await;
            // The streams its peer opened for the last round's message.
            let streams = tokio::time::timeout(DATAGRAM_PATIENCE, self.quiet.accept_bi());
            time_read(accepted_bi, accepted_bi_late, streams).await;
            pause().await;
            let streams = tokio::time::timeout(DATAGRAM_PATIENCE, self.quiet.accept_uni());
            time_read(accepted_uni, accepted_uni_late, streams).await;
            pause().await;
            let start = quanta::Instant::now();
            let halves = self.quiet.open_bi().await;
            record(opened_bi, start, ());
            pause().await;
            time_call(dropped_bi, || drop(halves));
            pause().await;
            let start = quanta::Instant::now();
            let half = self.quiet.open_uni().await;
            record(opened_uni, start, ());
            pause().await;
            time_call(dropped_uni, || drop(half));
            pause().await;
            if round % DIAL_EVERY == 1 {
                dial(self.dialer, self.server, self.public);
            } else if round % DIAL_EVERY == 2 {
                let incoming = tokio::time::timeout(DATAGRAM_PATIENCE, self.server.accept());
                time_read(accepted, accepted_late, incoming).await;
                pause().await;
            }
            time_poll(closed, self.quiet.closed());
            pause().await;
        }
    }

    /// The quiet connection's first message, bytes and datagram, whose
    /// echoes the first round reads.
    async fn send_to_echo(&mut self) {
        let _ = self.quiet.send(&SMALL[..]).await;
        let _ = self.quiet_send.write(&SMALL).await;
        let _ = self.quiet.send_datagram(&SMALL[..]);
        pause().await;
    }
}

/// Opens a connection from `dialer` to `server`, in a task of its own, and
/// keeps it until the server refuses it.
fn dial(dialer: &Endpoint, server: &Endpoint, public: &tern_peer::PublicIdentity) {
    let (dialer, server, public) = (dialer.clone(), server.local_addr(), public.clone());
    tokio::spawn(async move {
        if let Ok(connection) = dialer.connect(server, &public).await {
            let _ = connection.closed().await;
        }
    });
}

/// Awaits `read`, timed into `delivered` if its first poll was ready
/// (what it reads had arrived), else into `waited`.
async fn time_read<T>(
    delivered: &mut Histogram<u64>,
    waited: &mut Histogram<u64>,
    read: impl Future<Output = T>,
) {
    let start = quanta::Instant::now();
    let mut read = std::pin::pin!(read);
    let mut first = None;
    let result = std::future::poll_fn(|cx| {
        let poll = read.as_mut().poll(cx);
        first.get_or_insert(poll.is_ready());
        poll
    })
    .await;
    let histogram = if first == Some(true) {
        delivered
    } else {
        waited
    };
    record(histogram, start, result);
}

/// Times one poll of `future` into `histogram`, then drops it.
fn time_poll<T>(histogram: &mut Histogram<u64>, future: impl Future<Output = T>) {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    time_call(histogram, || future.as_mut().poll(&mut cx).is_ready());
}

/// The time between two probes.
async fn pause() {
    tokio::time::sleep(PROBE_EVERY).await;
}

/// Times one call of `f` into `histogram`.
fn time_call<T>(histogram: &mut Histogram<u64>, f: impl FnOnce() -> T) {
    let start = quanta::Instant::now();
    let result = f();
    record(histogram, start, result);
}

/// Records into `histogram` the time since `start` of a call that gave
/// `result`.
fn record<T>(histogram: &mut Histogram<u64>, start: quanta::Instant, result: T) {
    let took = start.elapsed();
    std::hint::black_box(result);
    let _ = histogram.record(took.as_nanos().max(1) as u64);
}

fn report(phase: &str, histogram: &Histogram<u64>) {
    let us = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{phase}: {} calls, p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs, max {:.2} µs",
        histogram.len(),
        us(0.5),
        us(0.9),
        us(0.99),
        us(0.999),
        histogram.max() as f64 / 1000.0
    );
}
