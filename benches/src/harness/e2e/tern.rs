//! Tern in the end-to-end workloads, configured as a user would: one
//! [`Endpoint`] per side, each on its own thread's current-thread runtime
//! (what Tern recommends), the best tern-sockio backend the kernel has,
//! maximum UDP payload 1 452 bytes, the default AEAD backend of this build.
//!
//! - `bulk`: one bidirectional stream; the client writes the bytes in
//!   64 KiB writes and finishes, the server reads to the end and answers
//!   with 64 bytes on the same stream.
//! - requests: Tern's idiom is the message. The client sends 64-byte
//!   messages carrying a request number, up to `in_flight` at once, and the
//!   server answers each with a 64-byte message carrying the same number,
//!   so every round trip is timed exactly.
//! - `connect`: a cold connect (RSA-2048 intro, X25519, one round trip)
//!   until the connection is usable, from a client without identity. The
//!   server's intro rate limits are raised for the benchmark (all connects
//!   come from 127.0.0.1, which the defaults allow 10 per second).
//! - `connect_x25519`: the same to a server with an X25519 identity (the
//!   intro in the manner of Noise IK, no RSA on either side).
//! - `connect_resumed`: the same pair, each connect resuming with the
//!   ticket the one before left (which the client waits for, untimed).
//! - `messages` and `message_flood`: whole messages of the given size
//!   ([`Connection::send`]); the server answers a message with its first
//!   64 bytes, counts `COUNT` messages, and answers a `TALLY` once it has
//!   counted that many.
//! - `bulk` on several streams: one task per stream on the client's
//!   runtime; `bidirectional`: one stream the server echoes, written and
//!   read by the client at once through `tokio::io::split`.
//! - `clients`: each client is an [`Endpoint`] of its own (its own socket
//!   and driver) on the client's runtime; the server's datagrams per
//!   receive call come from its [`Endpoint::stats`].

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rand_core::OsRng;
use tern_peer::proto::EndpointConfig;
use tern_peer::{
    Config, Connection, Endpoint, IdentityKey, PublicIdentity, RecvStream, SendStream,
};
use tokio::task::JoinSet;

use crate::server_thread::ServerThread;

use super::{
    ClientsSample, ConnectRow, REQUEST_LEN, SocketTotals, WARM_UP, WRITE_LEN, Workloads, ask,
};

/// Tern's connect rows beyond `connect`.
pub(crate) const CONNECT_ROWS: [ConnectRow; 2] = [
    ConnectRow {
        workload: "connect_x25519",
        start: || {
            let pair = Tern::start_as(config(), Identities::x25519(), None)?;
            Ok(Box::new(pair))
        },
    },
    ConnectRow {
        workload: "connect_resumed",
        start: || {
            let mut pair = Tern::start_as(config().ticket_cache(1), Identities::x25519(), None)?;
            pair.resume = true;
            Ok(Box::new(pair))
        },
    },
];

/// Who the two ends of a [`Tern`] pair are.
pub(crate) struct Identities {
    /// The server's identity, which the client connects to.
    server: IdentityKey,
    /// The client's, proven in its intros; `None`: the client has none.
    client: Option<IdentityKey>,
}

impl Identities {
    /// An RSA-2048 server and a client without identity: every workload
    /// but the connect rows.
    fn rsa() -> io::Result<Self> {
        Ok(Self {
            server: IdentityKey::generate(&mut OsRng).map_err(other)?,
            client: None,
        })
    }

    /// An X25519 server and, as for RSA, a client without identity (the
    /// cold connect quinn's is set against proves no client either).
    fn x25519() -> Self {
        Self {
            server: IdentityKey::generate_x25519(&mut OsRng),
            client: None,
        }
    }
}

/// A Tern server on its own thread and a client endpoint on this one.
pub(crate) struct Tern {
    client: tokio::runtime::Runtime,
    endpoint: Endpoint,
    server: ServerThread,
    server_addr: SocketAddr,
    public: PublicIdentity,
    /// Whether `connects` times resumed connects (each with the ticket of
    /// the connect before) rather than cold ones.
    resume: bool,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The client keeps no resumption tickets: every connect of the
/// `connect` rows and every workload's connection is a cold one (the
/// `connect_resumed` row asks for tickets).
pub(crate) fn config() -> Config {
    Config::default().max_udp_payload(1452).ticket_cache(0)
}

impl Tern {
    pub(crate) fn start() -> io::Result<Self> {
        Self::start_with(config(), None)
    }

    /// Both endpoints built from `config` (the server adds its RSA-2048
    /// identity and raised intro limits); the server's thread pinned to
    /// `server_cpu` if one is given.
    pub(crate) fn start_with(config: Config, server_cpu: Option<usize>) -> io::Result<Self> {
        Self::start_as(config, Identities::rsa()?, server_cpu)
    }

    /// Both endpoints built from `config` with `identities`; the server
    /// with raised intro limits, its thread pinned to `server_cpu` if one
    /// is given.
    fn start_as(
        config: Config,
        identities: Identities,
        server_cpu: Option<usize>,
    ) -> io::Result<Self> {
        let Identities {
            server: identity,
            client: client_identity,
        } = identities;
        let public = identity.public();
        let mut protocol = EndpointConfig::default();
        protocol.intro_limits.per_source_rate = 100_000;
        protocol.intro_limits.per_source_burst = 1_000;
        protocol.intro_limits.total_rate = 100_000;
        protocol.intro_limits.total_burst = 1_000;
        let server_config = config.clone().protocol(protocol).identity(identity);
        let server = ServerThread::start(
            "tern-server",
            SocketAddr::from(([127, 0, 0, 1], 0)),
            server_config,
            server_cpu,
            |endpoint| async move { serve(&endpoint).await },
        )?;
        let server_addr = server.addr();
        let client = crate::sockio_matrix::runtime()?;
        let config = match client_identity {
            Some(key) => config.identity(key),
            None => config,
        };
        let endpoint = client
            .block_on(async { Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config) })?;
        Ok(Self {
            client,
            endpoint,
            server,
            server_addr,
            public,
            resume: false,
        })
    }

    async fn connect(&self) -> io::Result<Connection> {
        self.endpoint
            .connect(self.server_addr, &self.public)
            .await
            .map_err(other)
    }

    /// Waits (untimed) until the client holds more than `received`
    /// tickets in all.
    async fn ticket_after(&self, received: u64) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.endpoint.stats().protocol.tickets_received <= received {
            if Instant::now() > deadline {
                return Err(other("no ticket came"));
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        Ok(())
    }

    /// `count` resumed connects, each with the ticket the one before left
    /// (a first, untimed connect leaves the first ticket).
    fn resumed_connects(&mut self, count: usize, latencies: &mut Histogram<u64>) -> io::Result<()> {
        self.client.block_on(async {
            let received = self.endpoint.stats().protocol.tickets_received;
            let first = self.connect().await?;
            self.ticket_after(received).await?;
            first.close(0, Bytes::new()).await;
            for _ in 0..count {
                let stats = self.endpoint.stats().protocol;
                let start = Instant::now();
                let connection = self.connect().await?;
                latencies.saturating_record(super::nanos(start.elapsed()));
                if self.endpoint.stats().protocol.connects_resumed != stats.connects_resumed + 1 {
                    return Err(other("the connect did not resume"));
                }
                self.ticket_after(stats.tickets_received).await?;
                connection.close(0, Bytes::new()).await;
            }
            Ok(())
        })
    }
}

/// Accepts connections; serves their messages and their streams.
async fn serve(endpoint: &Endpoint) {
    while let Some(connection) = endpoint.accept_connection().await {
        let streams = connection.clone();
        tokio::spawn(async move {
            while let Ok((send, recv)) = streams.accept_bi().await {
                tokio::spawn(serve_stream(send, recv));
            }
        });
        tokio::spawn(serve_messages(connection));
    }
}

/// Echoes an `ECHO` stream; reads any other to its end and answers with
/// 64 bytes.
async fn serve_stream(mut send: SendStream, mut recv: RecvStream) {
    let mut buf = vec![0u8; WRITE_LEN];
    let Ok(Some(mut n)) = recv.read(&mut buf).await else {
        return;
    };
    if buf[..n].first() == Some(&ask::ECHO) {
        loop {
            if send.write_all(&buf[..n]).await.is_err() {
                return;
            }
            n = match recv.read(&mut buf).await {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(_) => return,
            };
        }
        let _ = send.finish();
        return;
    }
    while matches!(recv.read(&mut buf).await, Ok(Some(_))) {}
    if send.write_all(&[0x5a; REQUEST_LEN]).await.is_ok() {
        let _ = send.finish();
    }
}

/// Answers every message with its first 64 bytes, but counts `COUNT`
/// messages and answers a `TALLY` once it has counted as many.
async fn serve_messages(connection: Connection) {
    let (mut counted, mut tally) = (0u64, None::<Bytes>);
    while let Ok(message) = connection.recv().await {
        let answer = match message.first() {
            Some(&ask::COUNT) => {
                counted += 1;
                None
            }
            Some(&ask::TALLY) => {
                tally = Some(message);
                None
            }
            _ => Some(message),
        };
        let tallied = tally
            .as_deref()
            .is_some_and(|t| super::tally_count(t).is_none_or(|n| counted >= n));
        let answer = if tallied { tally.take() } else { answer };
        if let Some(answer) = answer {
            let head = answer.slice(..answer.len().min(REQUEST_LEN));
            if connection.send(head).await.is_err() {
                break;
            }
        }
    }
}

/// Writes `bytes` on a new stream of `connection`, finishes it and waits
/// for the server's answer.
async fn send_stream(connection: Connection, bytes: u64) -> io::Result<()> {
    let chunk = vec![0xa5u8; WRITE_LEN];
    let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(WRITE_LEN as u64) as usize;
        send.write_all(&chunk[..n]).await?;
        left -= n as u64;
    }
    send.finish().map_err(other)?;
    let answer = recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
    if answer.len() != REQUEST_LEN {
        return Err(other("no answer"));
    }
    Ok(())
}

/// Writes on a new stream of `connection` until `deadline`, finishes it
/// and waits for the server's answer; returns the bytes written.
async fn send_until(connection: Connection, deadline: Instant) -> io::Result<u64> {
    let chunk = vec![0xa5u8; WRITE_LEN];
    let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
    let mut written = 0;
    while Instant::now() < deadline {
        send.write_all(&chunk).await?;
        written += WRITE_LEN as u64;
    }
    send.finish().map_err(other)?;
    let answer = recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
    if answer.len() != REQUEST_LEN {
        return Err(other("no answer"));
    }
    Ok(written)
}

/// A 64-byte request carrying its number.
fn request(number: u64) -> Bytes {
    let mut bytes = [0xa5u8; REQUEST_LEN];
    bytes[..8].copy_from_slice(&number.to_le_bytes());
    Bytes::copy_from_slice(&bytes)
}

fn number(answer: &[u8]) -> io::Result<u64> {
    let head = answer.get(..8).ok_or_else(|| other("short answer"))?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(head);
    Ok(u64::from_le_bytes(bytes))
}

impl Workloads for Tern {
    fn socket_totals(&self) -> Option<SocketTotals> {
        let (client, server) = (
            self.endpoint.stats().socket,
            self.server.endpoint.stats().socket,
        );
        Some(SocketTotals {
            send_calls: client.send_syscalls + server.send_syscalls,
            recv_calls: client.recv_syscalls + server.recv_syscalls,
            datagrams_sent: client.datagrams_sent + server.datagrams_sent,
            datagrams_received: client.datagrams_received + server.datagrams_received,
        })
    }

    fn server_addr(&self) -> SocketAddr {
        self.server_addr
    }

    fn bulk(&mut self, streams: usize, bytes: u64) -> io::Result<Duration> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let start = Instant::now();
            let mut senders = JoinSet::new();
            for _ in 0..streams {
                senders.spawn(send_stream(connection.clone(), bytes));
            }
            while let Some(sent) = senders.join_next().await {
                sent.map_err(other)??;
            }
            let elapsed = start.elapsed();
            connection.close(0, Bytes::new()).await;
            Ok(elapsed)
        })
    }

    fn requests(
        &mut self,
        in_flight: usize,
        duration: Duration,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<(u64, Duration)> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let start = Instant::now();
            let deadline = start + duration;
            // One request in flight per slot; a request carries its slot's
            // number, and so does its answer.
            let mut sent_at = vec![start; in_flight];
            for (slot, at) in sent_at.iter_mut().enumerate() {
                *at = Instant::now();
                connection.send(request(slot as u64)).await.map_err(other)?;
            }
            let (mut done, mut outstanding) = (0u64, in_flight);
            while outstanding > 0 {
                let answer = connection.recv().await.map_err(other)?;
                let slot = usize::try_from(number(&answer)?)
                    .ok()
                    .filter(|&s| s < in_flight)
                    .ok_or_else(|| other("answer to no request"))?;
                let now = Instant::now();
                latencies.saturating_record(super::nanos(now - sent_at[slot]));
                done += 1;
                outstanding -= 1;
                if now < deadline {
                    sent_at[slot] = Instant::now();
                    connection.send(request(slot as u64)).await.map_err(other)?;
                    outstanding += 1;
                }
            }
            let elapsed = start.elapsed();
            connection.close(0, Bytes::new()).await;
            Ok((done, elapsed))
        })
    }

    fn connects(&mut self, count: usize, latencies: &mut Histogram<u64>) -> io::Result<()> {
        if self.resume {
            return self.resumed_connects(count, latencies);
        }
        self.client.block_on(async {
            for _ in 0..count {
                let start = Instant::now();
                let connection = self.connect().await?;
                latencies.saturating_record(super::nanos(start.elapsed()));
                connection.close(0, Bytes::new()).await;
            }
            Ok(())
        })
    }

    fn messages(
        &mut self,
        to: SocketAddr,
        len: usize,
        count: usize,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<()> {
        self.client.block_on(async {
            let connection = self
                .endpoint
                .connect(to, &self.public)
                .await
                .map_err(other)?;
            let message = Bytes::from(vec![0xa5u8; len]);
            for i in 0..WARM_UP + count {
                let start = Instant::now();
                connection.send(message.clone()).await.map_err(other)?;
                let answer = connection.recv().await.map_err(other)?;
                if answer.len() != len.min(REQUEST_LEN) {
                    return Err(other("wrong answer"));
                }
                if i >= WARM_UP {
                    latencies.saturating_record(super::nanos(start.elapsed()));
                }
            }
            connection.close(0, Bytes::new()).await;
            Ok(())
        })
    }

    fn message_flood(&mut self, len: usize, duration: Duration) -> io::Result<(u64, Duration)> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let mut message = vec![0xa5u8; len];
            if let Some(first) = message.first_mut() {
                *first = ask::COUNT;
            }
            let message = Bytes::from(message);
            let start = Instant::now();
            let deadline = start + duration;
            let mut sent = 0u64;
            while Instant::now() < deadline {
                connection.send(message.clone()).await.map_err(other)?;
                sent += 1;
            }
            let tally = Bytes::from(super::tally(sent));
            connection.send(tally.clone()).await.map_err(other)?;
            let answer = connection.recv().await.map_err(other)?;
            let elapsed = start.elapsed();
            if answer != tally {
                return Err(other("wrong tally"));
            }
            connection.close(0, Bytes::new()).await;
            Ok((sent, elapsed))
        })
    }

    fn bidirectional(&mut self, bytes: u64) -> io::Result<Duration> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let mut chunk = vec![0xa5u8; WRITE_LEN];
            chunk[0] = ask::ECHO;
            let start = Instant::now();
            let (mut writer, mut reader) = connection.open_bi().await.map_err(other)?;
            let write = async {
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(WRITE_LEN as u64) as usize;
                    writer.write_all(&chunk[..n]).await?;
                    left -= n as u64;
                }
                writer.finish().map_err(other)
            };
            let read = async {
                let mut buf = vec![0u8; WRITE_LEN];
                let mut echoed = 0u64;
                loop {
                    match reader.read(&mut buf).await? {
                        None => return io::Result::Ok(echoed),
                        Some(n) => echoed += n as u64,
                    }
                }
            };
            let (written, echoed) = tokio::join!(write, read);
            written?;
            let elapsed = start.elapsed();
            if echoed? != bytes {
                return Err(other("short echo"));
            }
            connection.close(0, Bytes::new()).await;
            Ok(elapsed)
        })
    }

    fn clients(&mut self, clients: usize, duration: Duration) -> io::Result<ClientsSample> {
        self.client.block_on(async {
            let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
            let mut connections = Vec::with_capacity(clients);
            for _ in 0..clients {
                let endpoint = Endpoint::bind(loopback, config())?;
                let connection = endpoint
                    .connect(self.server_addr, &self.public)
                    .await
                    .map_err(other)?;
                connections.push(connection);
            }
            let before = self.server.endpoint.stats().socket;
            let start = Instant::now();
            let deadline = start + duration;
            let mut senders = JoinSet::new();
            for connection in &connections {
                senders.spawn(send_until(connection.clone(), deadline));
            }
            let mut bytes = 0;
            while let Some(sent) = senders.join_next().await {
                bytes += sent.map_err(other)??;
            }
            let elapsed = start.elapsed();
            let after = self.server.endpoint.stats().socket;
            for connection in connections {
                connection.close(0, Bytes::new()).await;
            }
            let datagrams = after.datagrams_received - before.datagrams_received;
            let calls = after.recv_syscalls - before.recv_syscalls;
            Ok(ClientsSample {
                bytes,
                elapsed,
                datagrams_per_recv_call: Some(datagrams as f64 / calls.max(1) as f64),
            })
        })
    }
}
