//! Level 1: the protocol's own cost. Two tern-proto endpoints, connected,
//! on tern-sim with a perfect link (no delay, no loss): every figure is the
//! sans-IO state machines' work per second of the benchmark thread — seal
//! and open, frames, ACKs, loss detection, LEDBAT, flow control, streams —
//! with no socket in the way. The handshake happens in the setup, outside
//! the measurement.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use rand_core::OsRng;
use tern_proto::{ConnectionHandle, Endpoint, EndpointConfig, Event, ReadOutcome, SendError};
use tern_sim::{NodeId, Sim, SimConfig};
use tern_wire::IdentityKey;

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

/// The same adapter tern-proto's simulation tests use.
#[path = "../../crates/proto/tests/support/on_sim.rs"]
#[allow(unreachable_pub)]
mod on_sim;

use on_sim::OnSim;

fn main() {
    divan::main();
}

fn identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    let der = DER.get_or_init(|| {
        let key = IdentityKey::generate(&mut OsRng).expect("RSA key generation");
        key.to_pkcs8_der().expect("encodes").to_vec()
    });
    IdentityKey::from_pkcs8_der(der).expect("decodes")
}

/// Two endpoints, connected: the sim and the client's and server's
/// handles of the connection.
struct Connected {
    sim: Sim<OnSim<Endpoint>>,
    client: (NodeId, ConnectionHandle),
    server: (NodeId, ConnectionHandle),
}

fn connected() -> Connected {
    connected_beside_idle(0)
}

/// [`connected`], with `idle` more connections between the same two
/// endpoints that stay idle.
fn connected_beside_idle(idle: usize) -> Connected {
    let mut sim = Sim::new(SimConfig::seeded(1));
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1".parse().expect("address"),
        "10.0.0.2:2".parse().expect("address"),
    );
    let mut config = EndpointConfig::default();
    config.intro_limits.total_burst = 1 + idle as u64;
    config.intro_limits.per_source_burst = 1 + idle as u64;
    let now = sim.now();
    let mut client = Endpoint::new(config, None, [1; 32], now, wall).expect("config");
    let server = Endpoint::new(config, Some(identity()), [2; 32], now, wall).expect("config");
    let public = server.public().expect("identity");
    let handle = client.connect(now, b, &public).expect("connect");
    for _ in 0..idle {
        client.connect(now, b, &public).expect("connect");
    }
    let client_node = sim.add_node(OnSim(client), &[a]).expect("address");
    let server_node = sim.add_node(OnSim(server), &[b]).expect("address");
    let mut accepted = None;
    let mut count = 0;
    while count <= idle {
        assert!(sim.step(), "handshake");
        while let Some(h) = sim.node_mut(server_node).0.accept() {
            accepted = accepted.or(Some(h));
            count += 1;
        }
    }
    while sim.node_mut(server_node).0.poll_event().is_some() {}
    // Which of the server's connections is the client's first: the one a
    // probe message arrives on.
    if idle > 0 {
        sim.node_mut(client_node)
            .0
            .connection(handle)
            .expect("client")
            .send_message(Bytes::from_static(b"probe"))
            .expect("room");
        accepted = None;
        while accepted.is_none() {
            assert!(sim.step(), "probe");
            let server = &mut sim.node_mut(server_node).0;
            while let Some((h, event)) = server.poll_event() {
                if event == Event::MessageReceived {
                    accepted = Some(h);
                }
            }
        }
        let server = &mut sim.node_mut(server_node).0;
        let probe = accepted.and_then(|h| server.connection(h)?.recv_message());
        assert_eq!(probe.as_deref(), Some(&b"probe"[..]));
    }
    while !sim
        .node_mut(client_node)
        .0
        .connection(handle)
        .is_some_and(|c| c.is_established())
    {
        assert!(sim.step(), "handshake");
    }
    Connected {
        sim,
        client: (client_node, handle),
        server: (server_node, accepted.expect("accepted")),
    }
}

/// Sends `count` messages of `size` bytes from client to server and runs
/// until the server took them all.
fn send_messages(c: &mut Connected, size: usize, count: usize) -> usize {
    let message = Bytes::from(vec![0x5a; size]);
    let (mut sent, mut received) = (0, 0);
    while received < count {
        let connection = c
            .sim
            .node_mut(c.client.0)
            .0
            .connection(c.client.1)
            .expect("client");
        while sent < count {
            match connection.send_message(message.clone()) {
                Ok(()) => sent += 1,
                Err(SendError::Blocked(_)) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        let connection = c
            .sim
            .node_mut(c.server.0)
            .0
            .connection(c.server.1)
            .expect("server");
        while let Some(m) = connection.recv_message() {
            received += usize::from(m.len() == size);
        }
        assert!(c.sim.step(), "stalled at {received} of {count}");
    }
    received
}

/// Messages per second, small and packet-sized.
#[divan::bench(args = [64, 1024])]
fn messages(bencher: Bencher, size: usize) {
    const COUNT: usize = 20_000;
    bencher
        .counter(ItemsCount::new(COUNT))
        .with_inputs(connected)
        .bench_local_values(|mut c| black_box(send_messages(&mut c, size, COUNT)));
}

/// 64-byte messages on one connection while the endpoints hold 1 000 more
/// that are idle: what an endpoint's turn costs per connection it holds
/// (ideally nothing). The connections are made once (1 000 RSA handshakes)
/// and reused by every sample.
#[divan::bench(args = [0, 1000], sample_count = 20)]
fn messages_beside_idle_connections(bencher: Bencher, idle: usize) {
    const COUNT: usize = 2_000;
    let mut c = connected_beside_idle(idle);
    bencher
        .counter(ItemsCount::new(COUNT))
        .bench_local(|| black_box(send_messages(&mut c, 64, COUNT)));
}

/// 1 MB messages (each on a one-way stream of its own): MB per second.
#[divan::bench]
fn megabyte_messages(bencher: Bencher) {
    const COUNT: usize = 32;
    bencher
        .counter(BytesCount::new(COUNT << 20))
        .with_inputs(connected)
        .bench_local_values(|mut c| black_box(send_messages(&mut c, 1 << 20, COUNT)));
}

/// One stream of 1 GiB, written and read in 64 KiB pieces: MB per second.
#[divan::bench(sample_count = 10)]
fn stream(bencher: Bencher) {
    const TOTAL: usize = 1 << 30;
    let chunk = vec![0xa5u8; 65_536];
    bencher
        .counter(BytesCount::new(TOTAL))
        .with_inputs(connected)
        .bench_local_values(|mut c| {
            let id = c
                .sim
                .node_mut(c.client.0)
                .0
                .connection(c.client.1)
                .and_then(|conn| conn.open_stream())
                .expect("a stream");
            let (mut written, mut read, mut remote) = (0, 0, None);
            let mut buf = vec![0u8; 65_536];
            while read < TOTAL {
                let conn = c
                    .sim
                    .node_mut(c.client.0)
                    .0
                    .connection(c.client.1)
                    .expect("client");
                while written < TOTAL {
                    let n = conn
                        .write(id, &chunk[..chunk.len().min(TOTAL - written)])
                        .expect("open");
                    if n == 0 {
                        break;
                    }
                    written += n;
                }
                let conn = c
                    .sim
                    .node_mut(c.server.0)
                    .0
                    .connection(c.server.1)
                    .expect("server");
                if remote.is_none() {
                    remote = conn.accept_stream();
                }
                if let Some(remote) = remote {
                    while let Ok(ReadOutcome::Read(n @ 1..)) = conn.read(remote, &mut buf) {
                        read += n;
                    }
                }
                assert!(c.sim.step(), "stalled at {read}");
            }
            black_box(read)
        });
}
