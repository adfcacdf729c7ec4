//! What the level-3 workloads share: a server of one or more Tern endpoints
//! on one port (each on a thread of its own with a current-thread runtime,
//! sharing one identity), and clients that send 64-byte messages to it as
//! fast as the endpoints take them.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tern_peer::proto::EndpointConfig;
use tern_peer::{Config, Connection, ConnectionStats, Endpoint, IdentityKey, PublicIdentity};

use crate::report::{median, process_cpu_time};
use crate::server_thread::ServerThread;
use crate::sockio_matrix::runtime;

/// Bytes of every message the level-3 workloads send: small enough that
/// the per-datagram cost, not the bytes, is what is measured.
pub(super) const MESSAGE_LEN: usize = 64;

pub(super) fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A client endpoint's configuration: what the level-2 workloads use.
pub(super) fn client_config() -> Config {
    Config::default().max_udp_payload(1452)
}

/// A server endpoint's configuration. Every connect of the benchmark comes
/// from 127.0.0.1, which the default intro limits allow 10 per second; the
/// limits are raised so the server's RSA work, not the limiter, bounds the
/// connect rate.
/// The most connections a level-3 server holds: the `idle` workload's
/// 100 000 with room.
const IDLE_MAX_CONNECTIONS: usize = 131_072;

pub(super) fn server_config(identity: &IdentityKey) -> Config {
    let mut protocol = EndpointConfig::default();
    protocol.intro_limits.per_source_rate = 100_000;
    protocol.intro_limits.per_source_burst = 100_000;
    protocol.intro_limits.total_rate = 100_000;
    protocol.intro_limits.total_burst = 100_000;
    // Every client of a level-3 run is on 127.0.0.1: the caps per source
    // address and network would stop `idle` at 1 024 connections, and the
    // table and the memory budget (which charges each connection the
    // credit it grants at its start, 256 KiB) at 16 384. Raised so the
    // workloads measure the endpoint, not its admission policy.
    protocol.max_connections = IDLE_MAX_CONNECTIONS;
    protocol.max_connections_per_address = IDLE_MAX_CONNECTIONS;
    protocol.max_connections_per_prefix = IDLE_MAX_CONNECTIONS;
    protocol.memory_budget = IDLE_MAX_CONNECTIONS as u64 * (512 << 10);
    client_config()
        .protocol(protocol)
        .identity(identity.clone())
}

/// A 64-byte message.
pub(super) fn message() -> Bytes {
    Bytes::from_static(&[0xa5; MESSAGE_LEN])
}

/// What a server does with each message it receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Counts it.
    None,
    /// Counts it and sends it back.
    Echo,
}

/// Server endpoints bound to one port, running until dropped.
pub(super) struct Servers {
    /// The port they share, on 127.0.0.1.
    pub(super) addr: SocketAddr,
    pub(super) public: PublicIdentity,
    /// Messages received by all the endpoints' connections so far.
    pub(super) received: Arc<AtomicU64>,
    threads: Vec<ServerThread>,
}

impl Servers {
    /// Starts `count` endpoints; more than one needs `reuse_port`.
    pub(super) fn start(
        identity: &IdentityKey,
        count: usize,
        reuse_port: bool,
        reply: Reply,
    ) -> io::Result<Self> {
        let mut servers = Self {
            addr: loopback(),
            public: identity.public(),
            received: Arc::new(AtomicU64::new(0)),
            threads: Vec::new(),
        };
        for _ in 0..count {
            let config = server_config(identity).reuse_port(reuse_port);
            let received = Arc::clone(&servers.received);
            let thread = ServerThread::start(
                "tern-level3-server",
                servers.addr,
                config,
                None,
                move |endpoint| async move { serve(&endpoint, reply, &received).await },
            )?;
            servers.addr = thread.addr();
            servers.threads.push(thread);
        }
        Ok(servers)
    }

    /// UDP datagrams and their payload bytes the endpoints' sockets
    /// received so far, and the datagrams their kernel queues dropped, all
    /// endpoints together.
    fn socket_received(&self) -> [u64; 3] {
        self.threads.iter().fold([0; 3], |[d, b, k], t| {
            let socket = t.endpoint.stats().socket;
            [
                d + socket.datagrams_received,
                b + socket.bytes_received,
                k + socket.kernel_drops,
            ]
        })
    }

    /// CPU time the server threads used so far, all together (none if the
    /// system gave no thread clocks).
    pub(super) fn cpu_time(&self) -> Option<Duration> {
        self.threads.iter().map(ServerThread::cpu_time).sum()
    }

    /// Connections each endpoint holds now.
    pub(super) fn connections(&self) -> Vec<usize> {
        self.threads
            .iter()
            .map(|t| t.endpoint.stats().connections)
            .collect()
    }
}

/// Accepts connections and handles every message they bring.
async fn serve(endpoint: &Endpoint, reply: Reply, received: &Arc<AtomicU64>) {
    while let Some(connection) = endpoint.accept_connection().await {
        let received = Arc::clone(received);
        tokio::spawn(async move {
            while let Ok(message) = connection.recv().await {
                received.fetch_add(1, Ordering::Relaxed);
                if reply == Reply::Echo && connection.send(message).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// What the servers received over a measured window.
#[derive(Clone, Debug)]
pub(super) struct Window {
    /// Messages delivered to the servers' application.
    pub(super) messages: u64,
    /// UDP datagrams the servers' sockets received.
    pub(super) datagrams: u64,
    /// Their payload bytes.
    pub(super) datagram_bytes: u64,
    /// Datagrams the servers' kernel receive queues dropped (full).
    pub(super) kernel_drops: u64,
    /// CPU time the server threads used (none without thread clocks).
    pub(super) server_cpu: Option<Duration>,
    /// CPU time the whole process used: servers and clients.
    pub(super) process_cpu: Duration,
    /// The client connections' figures when they stopped (counts since
    /// they connected, warm-up included).
    pub(super) clients: Vec<ConnectionStats>,
    pub(super) elapsed: Duration,
}

impl Window {
    pub(super) fn messages_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(super) fn datagrams_per_s(&self) -> f64 {
        self.datagrams as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Messages per second of the server threads' CPU time.
    pub(super) fn messages_per_server_cpu_s(&self) -> Option<f64> {
        self.server_cpu
            .map(|cpu| self.messages as f64 / cpu.as_secs_f64().max(1e-9))
    }

    /// The share of the window the server threads were on a CPU (1.0: one
    /// core's worth).
    pub(super) fn server_busy(&self) -> Option<f64> {
        self.server_cpu
            .map(|cpu| cpu.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9))
    }

    /// The share of the window the clients were on a CPU (the process's
    /// CPU time less the servers'; 1.0: one core's worth).
    pub(super) fn clients_busy(&self) -> Option<f64> {
        self.server_cpu.map(|cpu| {
            self.process_cpu.saturating_sub(cpu).as_secs_f64()
                / self.elapsed.as_secs_f64().max(1e-9)
        })
    }

    /// The client connections' packets declared lost, as a share of those
    /// they sent.
    pub(super) fn clients_loss(&self) -> f64 {
        let lost: u64 = self.clients.iter().map(|c| c.lost_packets).sum();
        let sent: u64 = self.clients.iter().map(|c| c.sent_packets).sum();
        lost as f64 / sent.max(1) as f64
    }

    /// The client connections' median congestion window, in bytes.
    pub(super) fn clients_window(&self) -> f64 {
        let windows: Vec<f64> = self.clients.iter().map(|c| c.window as f64).collect();
        median(&windows)
    }

    /// The client connections' median smoothed round-trip time.
    pub(super) fn clients_rtt(&self) -> Duration {
        let rtts: Vec<f64> = self.clients.iter().map(|c| c.rtt.as_secs_f64()).collect();
        Duration::from_secs_f64(median(&rtts))
    }

    /// The mean UDP payload of the datagrams received, in bytes.
    pub(super) fn mean_datagram(&self) -> usize {
        usize::try_from(self.datagram_bytes / self.datagrams.max(1)).unwrap_or(usize::MAX)
    }
}

/// Connects `threads` × `endpoints_per_thread` client endpoints (one
/// connection each, each thread a current-thread runtime) to `servers`;
/// they send 64-byte messages as fast as Tern takes them. After `warm_up`,
/// counts what the servers receive for `length`.
pub(super) fn blast(
    servers: &Servers,
    threads: usize,
    endpoints_per_thread: usize,
    warm_up: Duration,
    length: Duration,
) -> io::Result<Window> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    let mut clients = Vec::new();
    for _ in 0..threads {
        let (stop, ready) = (Arc::clone(&stop), ready_tx.clone());
        let (to, public) = (servers.addr, servers.public.clone());
        clients.push(std::thread::spawn(
            move || -> io::Result<Vec<ConnectionStats>> {
                runtime()?.block_on(async move {
                    let mut connections = Vec::new();
                    for _ in 0..endpoints_per_thread {
                        let connected = async {
                            let endpoint = Endpoint::bind(loopback(), client_config())?;
                            let connection = endpoint.connect(to, &public).await.map_err(other)?;
                            io::Result::Ok((endpoint, connection))
                        }
                        .await;
                        match connected {
                            Ok(c) => connections.push(c),
                            Err(e) => {
                                let _ = ready.send(Err(other(&e)));
                                return Err(e);
                            }
                        }
                    }
                    let _ = ready.send(Ok(()));
                    let senders: Vec<_> = connections
                        .iter()
                        .map(|(_, c)| tokio::spawn(send_until(c.clone(), Arc::clone(&stop))))
                        .collect();
                    for sender in senders {
                        sender.await.map_err(other)??;
                    }
                    let stats = connections.iter().filter_map(|(_, c)| c.stats()).collect();
                    for (_, connection) in &connections {
                        connection.abort(0, Bytes::new());
                    }
                    Ok(stats)
                })
            },
        ));
    }
    drop(ready_tx);
    let mut started = Ok(());
    for _ in 0..threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => started = Err(e),
            Err(e) => started = Err(other(e)),
        }
    }
    let mut measured = started.map(|()| {
        std::thread::sleep(warm_up);
        let messages = servers.received.load(Ordering::Relaxed);
        let [datagrams, bytes, drops] = servers.socket_received();
        let cpu = servers.cpu_time();
        let process_cpu = process_cpu_time();
        let start = Instant::now();
        std::thread::sleep(length);
        let [datagrams_after, bytes_after, drops_after] = servers.socket_received();
        Window {
            messages: servers.received.load(Ordering::Relaxed) - messages,
            datagrams: datagrams_after - datagrams,
            datagram_bytes: bytes_after - bytes,
            kernel_drops: drops_after.saturating_sub(drops),
            elapsed: start.elapsed(),
            server_cpu: cpu
                .zip(servers.cpu_time())
                .map(|(b, a)| a.saturating_sub(b)),
            process_cpu: process_cpu_time().saturating_sub(process_cpu),
            clients: Vec::new(),
        }
    });
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let stats = client
            .join()
            .map_err(|_| other("client thread panicked"))??;
        if let Ok(window) = &mut measured {
            window.clients.extend(stats);
        }
    }
    measured
}

/// Sends messages on `connection` until `stop` (`send` waits only while
/// the send buffer is full, which is when the client's driver gets to run).
async fn send_until(connection: Connection, stop: Arc<AtomicBool>) -> io::Result<()> {
    let message = message();
    while !stop.load(Ordering::Relaxed) {
        connection.send(message.clone()).await.map_err(other)?;
    }
    Ok(())
}
