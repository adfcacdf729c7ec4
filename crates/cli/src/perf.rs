//! `tern perf`: a throughput test between a client and a server, one line
//! per interval while it runs and a summary from both ends.
//!
//! The client tells the server what to run ([`Control::PerfStart`]); the
//! data goes on streams, each end counting what it wrote and what it read;
//! then each end sends its counts ([`Control::PerfReport`]), so the
//! summary shows both and checks that what one end sent is what the other
//! received, byte for byte.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use tern_peer::{Connection, Endpoint, RecvStream, SendStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::control::{self, Control, Direction, Limit, PerfParams};
use crate::error::{CliError, read_error, write_error};
use crate::net::{self, NetOptions};
use crate::rendezvous::{self, PathOptions, RendezvousOptions};
use crate::{keys, units};

mod report;

use report::{Interval, JsonReport, Sample, agreement, side_report, summary_line};

/// How long a server waits for a new client to say what it wants.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long past its length a timed run may take to drain.
const RUN_GRACE: Duration = Duration::from_secs(30);

/// Bytes read per call on the receiving side.
const READ_SIZE: usize = 256 << 10;

/// `tern perf server`.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Address and UDP port to listen on.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The server's private key (tern.key).
    #[arg(long, value_name = "PRIVATE_KEY_FILE")]
    key: std::path::PathBuf,
    #[command(flatten)]
    rendezvous: RendezvousOptions,
    #[command(flatten)]
    net: NetOptions,
}

/// `tern perf client`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// The server's address, HOST:PORT (omitted with --rendezvous: the
    /// server is found there by its --key).
    #[arg(value_name = "ADDR", required_unless_present = "rendezvous")]
    addr: Option<String>,
    /// The server's public key: its tern.pub file, or the line `tern pubkey`
    /// printed (`tern-x25519:…`, or `tern-pub:…` for RSA).
    #[arg(long, value_name = "PUBLIC_KEY_FILE")]
    key: String,
    /// How long to send (e.g. 10s, 1m; 10s unless --bytes is given).
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration, conflicts_with = "bytes")]
    time: Option<Duration>,
    /// How much to send per direction instead (e.g. 500M, 1G, 4GiB).
    #[arg(long, value_name = "SIZE", value_parser = units::parse_size)]
    bytes: Option<u64>,
    /// Parallel streams per direction.
    #[arg(long, value_name = "N", default_value_t = 1)]
    streams: u32,
    /// Bytes per write (e.g. 128K).
    #[arg(long, value_name = "BYTES", default_value = "128K", value_parser = units::parse_size)]
    size: u64,
    /// The server sends, the client receives.
    #[arg(long, conflicts_with = "bidir")]
    reverse: bool,
    /// Both send at once.
    #[arg(long)]
    bidir: bool,
    /// Cap each direction's rate, in Mbit/s.
    #[arg(long, value_name = "MBIT")]
    rate: Option<f64>,
    /// Time between report lines.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = units::parse_duration)]
    interval: Duration,
    /// Print one JSON document at the end instead of lines.
    #[arg(long)]
    json: bool,
    /// How long to wait for the server's answer to the handshake.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = units::parse_duration)]
    connect_timeout: Duration,
    #[command(flatten)]
    rendezvous: RendezvousOptions,
    #[command(flatten)]
    paths: PathOptions,
    #[command(flatten)]
    net: NetOptions,
}

impl ClientArgs {
    fn params(&self) -> Result<PerfParams, CliError> {
        let limit = match (self.time, self.bytes) {
            (_, Some(bytes)) => Limit::Bytes(bytes),
            (Some(time), None) => Limit::Millis(time.as_millis().try_into().unwrap_or(u64::MAX)),
            (None, None) => Limit::Millis(10_000),
        };
        let rate_bits = match self.rate {
            None => None,
            Some(mbit) if mbit.is_finite() && mbit > 0.0 => Some((mbit * 1e6) as u64),
            Some(_) => return Err(CliError::Usage("--rate must be above zero".to_owned())),
        };
        let direction = match (self.reverse, self.bidir) {
            (_, true) => Direction::Both,
            (true, false) => Direction::Download,
            (false, false) => Direction::Upload,
        };
        let params = PerfParams {
            streams: self.streams,
            direction,
            limit,
            write_size: self.size,
            rate_bits,
        };
        params.validate().map_err(CliError::Usage)?;
        if self.interval.is_zero() {
            return Err(CliError::Usage("--interval must be above zero".to_owned()));
        }
        Ok(params)
    }
}

/// Bytes one end moved, updated by its stream tasks as they go.
#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    received: AtomicU64,
}

/// Which streams this end writes and which it reads.
#[derive(Clone, Copy, Debug)]
struct Role {
    sends: bool,
    receives: bool,
}

impl Role {
    fn client(direction: Direction) -> Self {
        Self {
            sends: direction != Direction::Download,
            receives: direction != Direction::Upload,
        }
    }

    fn server(direction: Direction) -> Self {
        Self {
            sends: direction != Direction::Upload,
            receives: direction != Direction::Download,
        }
    }
}

/// Runs this end's half of the data phase: opens and writes its streams,
/// accepts and reads the peer's, until every one is done.
async fn exchange(
    connection: &Connection,
    params: PerfParams,
    role: Role,
    counters: &Arc<Counters>,
    start: Instant,
) -> Result<(), CliError> {
    let streams = u64::from(params.streams);
    let mut tasks = JoinSet::new();
    if role.sends {
        let rate = params.rate_bits.map(|bits| (bits / 8 / streams).max(1));
        for i in 0..streams {
            let (budget, deadline) = match params.limit {
                Limit::Bytes(total) => (
                    Some(total / streams + if i == 0 { total % streams } else { 0 }),
                    None,
                ),
                Limit::Millis(ms) => (None, Some(start + Duration::from_millis(ms))),
            };
            // The peer sends nothing back on it.
            let (stream, _) = connection
                .open_bi()
                .await
                .map_err(|e| CliError::connection(connection, &e))?;
            let writer = Writer {
                write_size: usize::try_from(params.write_size).unwrap_or(usize::MAX),
                budget,
                deadline,
                rate,
            };
            tasks.spawn(writer.run(stream, Arc::clone(counters)));
        }
    }
    if role.receives {
        for _ in 0..streams {
            let (_, stream) = connection
                .accept_bi()
                .await
                .map_err(|e| CliError::connection(connection, &e))?;
            tasks.spawn(read_stream(stream, Arc::clone(counters)));
        }
    }
    while let Some(done) = tasks.join_next().await {
        let ended = |reason: String| CliError::Connection {
            peer: Some(connection.remote_address()),
            reason,
        };
        match done {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(ended(reason)),
            Err(e) => return Err(ended(e.to_string())),
        }
    }
    Ok(())
}

/// One sending stream of a perf run.
#[derive(Clone, Copy, Debug)]
struct Writer {
    write_size: usize,
    /// With `--bytes`: this stream's share, written in all.
    budget: Option<u64>,
    /// With `--time`: when to stop writing.
    deadline: Option<Instant>,
    /// Bytes per second at most.
    rate: Option<u64>,
}

impl Writer {
    /// Writes until the budget or deadline; why it could not, in words.
    async fn run(self, mut stream: SendStream, counters: Arc<Counters>) -> Result<(), String> {
        self.write(&mut stream, &counters)
            .await
            .map_err(|e| write_error(&e))?;
        stream.finish().map_err(|e| e.to_string())
    }

    async fn write(
        self,
        stream: &mut SendStream,
        counters: &Counters,
    ) -> Result<(), tern_peer::WriteError> {
        let buf = vec![0x5a_u8; self.write_size];
        let began = Instant::now();
        let mut written: u64 = 0;
        loop {
            let len = match self.budget {
                Some(budget) => {
                    let left = budget - written;
                    if left == 0 {
                        break;
                    }
                    usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()))
                }
                None => buf.len(),
            };
            if let Some(rate) = self.rate {
                let due = began + Duration::from_secs_f64(written as f64 / rate as f64);
                tokio::time::sleep_until(self.deadline.map_or(due, |d| d.min(due))).await;
            }
            let n = match self.deadline {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, stream.write(&buf[..len])).await {
                        Ok(n) => n?,
                        Err(_) => break,
                    }
                }
                None => stream.write(&buf[..len]).await?,
            };
            written += n as u64;
            counters.sent.fetch_add(n as u64, Ordering::Relaxed);
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        Ok(())
    }
}

/// Reads one of the peer's streams to its end, counting; why it could
/// not, in words.
async fn read_stream(mut stream: RecvStream, counters: Arc<Counters>) -> Result<(), String> {
    let mut buf = vec![0u8; READ_SIZE];
    while let Some(n) = stream.read(&mut buf).await.map_err(|e| read_error(&e))? {
        counters.received.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// `tern perf client`.
pub(crate) async fn client(args: ClientArgs) -> Result<(), CliError> {
    let params = args.params()?;
    let public = keys::read_public(&args.key)?;
    let connecting = Instant::now();
    let (endpoint, _rendezvous, connection) = rendezvous::reach(
        &args.rendezvous,
        &args.paths,
        args.addr.as_deref(),
        &public,
        &args.net,
        args.connect_timeout,
    )
    .await?;
    let addr = connection.remote_address();
    let path = Path {
        started: connecting,
        connect: connecting.elapsed(),
    };
    let run = run_client(&args, params, &path, addr, &endpoint, &connection).await;
    net::close_on_error(&connection, run).await
}

/// How the client reached the server.
struct Path {
    /// When the connect started.
    started: Instant,
    /// How long the connect took.
    connect: Duration,
}

/// The client's run on an established connection.
async fn run_client(
    args: &ClientArgs,
    params: PerfParams,
    path: &Path,
    addr: SocketAddr,
    endpoint: &Endpoint,
    connection: &Connection,
) -> Result<(), CliError> {
    if !args.json {
        println!(
            "tern perf: {addr}, {} stream{}, {}, {}, backend {}, congestion {}",
            params.streams,
            if params.streams == 1 { "" } else { "s" },
            match params.direction {
                Direction::Upload => "client sends",
                Direction::Download => "server sends (reverse)",
                Direction::Both => "both send",
            },
            match params.limit {
                Limit::Millis(ms) => format!("{:.1} s", ms as f64 / 1e3),
                Limit::Bytes(b) => units::bytes(b),
            },
            endpoint.backend(),
            args.net.congestion.name(),
        );
    }
    control::send(connection, &Control::PerfStart(params)).await?;
    match control::recv(connection).await? {
        Control::PerfReady => {}
        other => {
            return Err(CliError::Protocol {
                peer: Some(addr),
                reason: format!("expected the server's answer to the parameters, got {other:?}"),
            });
        }
    }
    let first_byte = path.started.elapsed();
    let counters = Arc::new(Counters::default());
    let first = Sample::take(endpoint, connection, &counters);
    let start = first.at;
    let data = exchange(
        connection,
        params,
        Role::client(params.direction),
        &counters,
        start,
    );
    tokio::pin!(data);
    let mut ticker = tokio::time::interval_at(start + args.interval, args.interval);
    // After a stall, carry on from now rather than print a burst of
    // empty intervals.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut intervals = Vec::new();
    let mut last = first;
    loop {
        tokio::select! {
            done = &mut data => {
                done?;
                break;
            }
            _ = ticker.tick() => {
                let now = Sample::take(endpoint, connection, &counters);
                let interval = Interval::between(start, &last, &now);
                if !args.json {
                    println!("{}", interval.line());
                }
                intervals.push(interval);
                last = now;
            }
        }
    }
    let end = Sample::take(endpoint, connection, &counters);
    // The last, partial interval, unless it is a sliver.
    if end.at - last.at > args.interval / 10 {
        let interval = Interval::between(start, &last, &end);
        if !args.json {
            println!("{}", interval.line());
        }
        intervals.push(interval);
    }
    let mine = side_report(&first, &end, start);
    tracing::info!(report = ?mine, stats = ?endpoint.stats(), "perf data phase over");
    control::send(connection, &Control::PerfReport(mine.clone())).await?;
    let theirs = match control::recv(connection).await? {
        Control::PerfReport(report) => report,
        other => {
            return Err(CliError::Protocol {
                peer: Some(addr),
                reason: format!("expected the server's report, got {other:?}"),
            });
        }
    };
    // Read at the end: a relayed connection may have gone direct.
    let route = rendezvous::path_of(connection);
    let went_direct = connection.went_direct_after();
    connection.close(0, Bytes::from_static(b"done")).await;
    let (agree, lines) = agreement(&mine, &theirs);
    if args.json {
        let document = JsonReport {
            address: addr,
            path: route,
            connect_ms: path.connect.as_secs_f64() * 1e3,
            first_byte_ms: first_byte.as_secs_f64() * 1e3,
            went_direct_ms: went_direct.map(|after| after.as_secs_f64() * 1e3),
            backend: endpoint.backend().to_string(),
            params,
            intervals: &intervals,
            client: mine,
            server: theirs,
            bytes_agree: agree,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&document).unwrap_or_default()
        );
    } else {
        println!(
            "{}; path: {}, connected in {}, first byte after {}",
            summary_line("client", &mine),
            route,
            units::millis(path.connect),
            units::millis(first_byte),
        );
        println!("{}", summary_line("server", &theirs));
        for line in &lines {
            println!("{line}");
        }
    }
    if agree {
        Ok(())
    } else {
        Err(CliError::Mismatch(
            "the two ends' byte counts differ".to_owned(),
        ))
    }
}

/// `tern perf server`: serves clients, several at once, until interrupted.
pub(crate) async fn server(args: ServerArgs) -> Result<(), CliError> {
    let key = keys::read_private(&args.key)?;
    let endpoint = net::listen(args.listen, key, &args.net)?;
    // Watched before the first line, which tells a script it may signal.
    let interrupted = crate::interrupted();
    tokio::pin!(interrupted);
    println!(
        "tern perf server on {} (backend {}, congestion {}); Ctrl-C to stop",
        endpoint.local_addr(),
        endpoint.backend(),
        args.net.congestion.name()
    );
    // After the first line, which a script reads for the address.
    if let Some((addr, key)) = args.rendezvous.target().await? {
        tokio::spawn(rendezvous::stay_registered(endpoint.clone(), addr, key));
    }
    loop {
        tokio::select! {
            accepted = endpoint.accept_connection() => {
                let Some(connection) = accepted else { break };
                tracing::info!(peer = %connection.remote_address(), "client connected");
                let endpoint = endpoint.clone();
                tokio::spawn(async move {
                    let who = connection.remote_address().to_string();
                    let served = serve(&endpoint, &connection).await;
                    match net::close_on_error(&connection, served).await {
                        Ok(lines) => {
                            for line in lines {
                                println!("{who}: {line}");
                            }
                        }
                        Err(e) => eprintln!("tern: client {who}: {e}"),
                    }
                });
            }
            _ = &mut interrupted => {
                net::shut_down(&endpoint).await;
                break;
            }
        }
    }
    Ok(())
}

/// Serves one perf client; returns the summary lines.
async fn serve(endpoint: &Endpoint, connection: &Connection) -> Result<Vec<String>, CliError> {
    let peer = Some(connection.remote_address());
    let first = tokio::time::timeout(START_TIMEOUT, control::recv(connection))
        .await
        .map_err(|_| CliError::Protocol {
            peer,
            reason: "no test parameters within 10 s".to_owned(),
        })??;
    let Control::PerfStart(params) = first else {
        connection.abort(1, Bytes::from_static(b"expected the test parameters"));
        return Err(CliError::Protocol {
            peer,
            reason: "the first message was not the test parameters".to_owned(),
        });
    };
    if let Err(reason) = params.validate() {
        tracing::warn!(?peer, %reason, "refused perf parameters");
        connection.close(1, Bytes::from(reason.clone())).await;
        return Err(CliError::Protocol { peer, reason });
    }
    tracing::info!(?peer, ?params, "perf run starts");
    control::send(connection, &Control::PerfReady).await?;
    let counters = Arc::new(Counters::default());
    let first = Sample::take(endpoint, connection, &counters);
    let start = first.at;
    let data = exchange(
        connection,
        params,
        Role::server(params.direction),
        &counters,
        start,
    );
    // A client that keeps the connection alive but never finishes its
    // streams does not hold the server for ever: a timed run ends by its
    // length and a grace period.
    match params.limit {
        Limit::Millis(ms) => {
            tokio::time::timeout(Duration::from_millis(ms) + RUN_GRACE, data)
                .await
                .map_err(|_| CliError::Protocol {
                    peer,
                    reason: "the run did not finish in its time".to_owned(),
                })??;
        }
        Limit::Bytes(_) => data.await?,
    }
    let end = Sample::take(endpoint, connection, &counters);
    let mine = side_report(&first, &end, start);
    tracing::info!(?peer, report = ?mine, "perf data phase over");
    control::send(connection, &Control::PerfReport(mine.clone())).await?;
    let theirs = match control::recv(connection).await? {
        Control::PerfReport(report) => report,
        other => {
            return Err(CliError::Protocol {
                peer,
                reason: format!("expected the client's report, got {other:?}"),
            });
        }
    };
    let _ = connection.closed().await;
    let (_, agreement) = agreement(&theirs, &mine);
    let mut lines = vec![
        summary_line("server", &mine),
        summary_line("client", &theirs),
    ];
    lines.extend(agreement);
    let dropped = endpoint.stats().protocol;
    lines.push(format!(
        "endpoint so far: {} datagrams dropped as unroutable, {} intros refused, {} intros rate-limited",
        dropped.dropped_unroutable, dropped.intros_refused, dropped.intros_rate_limited
    ));
    Ok(lines)
}
