//! Level 2: how long an application call waits for the endpoint's lock
//! while the driver moves a bulk transfer, on the multi-thread runtime.
//!
//! Two endpoints on loopback in one process, on a tokio runtime with two
//! workers. A client task writes a stream as fast as the server reads it;
//! beside it a probe task calls `Connection::stats()` on the sending
//! connection every 200 µs. That call used to take the endpoint's one lock
//! (the one the driver holds for a whole turn); it now copies the figures
//! the driver publishes per connection behind a lock of its own (the
//! first call takes the endpoint's lock once, to have them published), so
//! its duration is the wait for either lock plus well under a microsecond
//! of work. The same probe runs on an idle connection first,
//! as the baseline. During the load the probe alternates with the same
//! call on a connection of a second, idle pair of endpoints (locks of
//! their own): the control, which waits for no lock held by the transfer,
//! only for the threads to be scheduled, so the difference between the
//! two is the lock's. A third call alternates with them: `Endpoint::stats()`
//! on the loaded client endpoint. Two calls that act on the loaded
//! connection alternate with them too: `send` of a 64-byte message (the
//! server receives them) and `write` of 64 bytes on a second stream (the
//! server reads it), each awaited to its end. Durations go to HDR
//! histograms (1 ns resolution); the percentiles are printed, with the
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
use tern_peer::{Config, Connection, Endpoint, IdentityKey, SendStream};

/// Time between two probes.
const PROBE_EVERY: Duration = Duration::from_micros(200);

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

    let (idle, ..) = probe(&connection, None, Duration::from_secs(1)).await;
    report("idle connection", &idle);
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
    let (mut small_stream, _) = connection.open_bi().await?;
    let others = Others {
        control: &control,
        endpoint: &client,
        stream: &mut small_stream,
    };
    let (loaded, control, locked, sent, written) = probe(&connection, Some(others), load).await;
    running.store(false, Ordering::Relaxed);
    let elapsed = writer.await??;
    let bytes = reader.await??;
    report("under bulk load", &loaded);
    report("control (another endpoint, idle) meanwhile", &control);
    report(
        "Endpoint::stats() of the loaded endpoint (takes its lock) meanwhile",
        &locked,
    );
    report("send of 64 bytes on the loaded connection meanwhile", &sent);
    report("write of 64 bytes on its second stream meanwhile", &written);
    println!(
        "transfer: {} MiB in {:.2} s, {:.0} MB/s",
        bytes >> 20,
        elapsed.as_secs_f64(),
        bytes as f64 / elapsed.as_secs_f64() / 1e6
    );
    Ok(())
}

/// What is probed between two probes of the loaded connection's `stats()`.
struct Others<'a> {
    /// A connection of another, idle pair of endpoints.
    control: &'a Connection,
    /// The loaded endpoint, whose `stats()` is timed.
    endpoint: &'a Endpoint,
    /// A second stream of the loaded connection, written to.
    stream: &'a mut SendStream,
}

type Histograms = (
    Histogram<u64>,
    Histogram<u64>,
    Histogram<u64>,
    Histogram<u64>,
    Histogram<u64>,
);

/// Times `stats()` on `connection` every [`PROBE_EVERY`] for `time`, and
/// if given, in between, `stats()` on the control connection and of the
/// loaded endpoint, a `send` on `connection` and a `write` on its second
/// stream.
async fn probe(
    connection: &Connection,
    mut others: Option<Others<'_>>,
    time: Duration,
) -> Histograms {
    let new = || Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("valid bounds");
    let (mut probed, mut controlled, mut locked) = (new(), new(), new());
    let (mut sent, mut written) = (new(), new());
    let end = quanta::Instant::now() + time;
    while quanta::Instant::now() < end {
        time_call(&mut probed, || connection.stats());
        tokio::time::sleep(PROBE_EVERY).await;
        if let Some(others) = &mut others {
            time_call(&mut controlled, || others.control.stats());
            tokio::time::sleep(PROBE_EVERY).await;
            time_call(&mut locked, || others.endpoint.stats());
            tokio::time::sleep(PROBE_EVERY).await;
            let start = quanta::Instant::now();
            let result = connection.send(&SMALL[..]).await;
            record(&mut sent, start, result);
            tokio::time::sleep(PROBE_EVERY).await;
            let start = quanta::Instant::now();
            let result = others.stream.write(&SMALL).await;
            record(&mut written, start, result);
            tokio::time::sleep(PROBE_EVERY).await;
        }
    }
    (probed, controlled, locked, sent, written)
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
