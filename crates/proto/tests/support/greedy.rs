//! Eight greedy peers against one endpoint's memory budget (issue #23):
//! each sends a large message the application never takes, an honest peer
//! on the same endpoint streams bytes its application reads. Shared by the
//! budget tests (`proto_budget.rs`) and the level-3 harness's `budget`
//! workload, which reports the same run's figures.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tern_proto::{
    ConnectionError, ConnectionHandle, Endpoint, EndpointConfig, Event, ReadOutcome, StreamId,
};
use tern_sim::{LinkConfig, NodeId, Sim, SimConfig};

use super::{EndpointSim, OnSim, Outbox, drive, message, seed_bytes, wall_start};

/// Greedy peers, each against the same endpoint.
pub const GREEDY: usize = 8;
/// The endpoint's memory budget: 8 MiB, two greedy messages' worth.
pub const BUDGET: u64 = 8 << 20;
/// What each greedy peer sends: half the budget, in one message.
pub const GREEDY_MESSAGE: usize = 4 << 20;
/// What the honest peer sends on a stream the application reads.
pub const HONEST_BYTES: u64 = 4 << 20;

/// The endpoint under test: a small budget, and a receive window well
/// within it.
fn server_config(budget: u64) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.connection.receive_window = 1 << 20;
    config.memory_budget = budget;
    config
}

struct Net {
    sim: EndpointSim,
    server: NodeId,
    /// Each client's node and its connection; the honest one is last.
    clients: Vec<(NodeId, ConnectionHandle, SocketAddr)>,
}

fn net(seed: u64, budget: u64) -> Net {
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
    let now = sim.now();
    let server_addr: SocketAddr = "10.0.0.1:5000".parse().expect("address");
    let endpoint = Endpoint::new(
        server_config(budget),
        Some(super::identity()),
        seed_bytes(seed, 100),
        now,
        wall_start(),
    )
    .expect("valid config");
    let public = endpoint.public().expect("identity");
    let server = sim
        .add_node(OnSim(endpoint), &[server_addr])
        .expect("address");
    let clients = (0..=GREEDY)
        .map(|k| {
            let addr: SocketAddr = format!("10.0.1.{}:4000", k + 1).parse().expect("address");
            let mut endpoint = Endpoint::new(
                EndpointConfig::default(),
                None,
                seed_bytes(seed, k as u64),
                now,
                wall_start(),
            )
            .expect("valid config");
            let handle = endpoint
                .connect(now, server_addr, &public)
                .expect("connect");
            let node = sim.add_node(OnSim(endpoint), &[addr]).expect("address");
            (node, handle, addr)
        })
        .collect();
    Net {
        sim,
        server,
        clients,
    }
}

/// What the run saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The most the server's connections held together (receive and send
    /// memory), after any step.
    pub peak_held: u64,
    /// The most the server's budget charged, after any step.
    pub peak_charged: u64,
    /// The greedy peers (by number) whose connection the server closed for
    /// its budget, in order.
    pub closed: Vec<usize>,
    /// For each close, whether the peer closed held the most at the step
    /// before (of the connections still open).
    pub closed_greediest: Vec<bool>,
    /// Bytes the honest peer's stream delivered.
    pub honest_read: u64,
}

/// Once every handshake is done, greedy peer `k` starts sending 100 ms
/// after the one before it, so the earlier ones hold more; the honest peer
/// starts 2 s later, once they all hold what they can. Runs until the honest transfer is read whole, or `deadline`.
pub fn run(seed: u64, budget: u64, deadline: Duration) -> Outcome {
    let mut net = net(seed, budget);
    let mut outcome = Outcome::default();
    let mut outboxes: Vec<Outbox> = (0..GREEDY).map(|_| Outbox::default()).collect();
    let mut started = [false; GREEDY];
    let mut honest_stream: Option<StreamId> = None;
    let mut honest_written = 0u64;
    let mut server_stream: Option<StreamId> = None;
    let mut peers: HashMap<ConnectionHandle, usize> = HashMap::new();
    let mut held_before: HashMap<usize, u64> = HashMap::new();
    let chunk = vec![0x42u8; 16 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    // When every client's handshake is done: the clock of the attack.
    let mut all_up: Option<Duration> = None;
    drive(&mut net.sim, deadline, |sim| {
        if all_up.is_none()
            && net.clients.iter().all(|&(node, handle, _)| {
                let endpoint = &mut sim.node_mut(node).0;
                endpoint
                    .connection(handle)
                    .is_some_and(|c| c.is_established())
            })
        {
            all_up = Some(sim.elapsed());
        }
        let Some(up) = all_up else {
            return false;
        };
        let elapsed = sim.elapsed() - up;
        for (k, &(node, handle, _)) in net.clients.iter().enumerate() {
            let endpoint = &mut sim.node_mut(node).0;
            while endpoint.poll_event().is_some() {}
            let Some(connection) = endpoint.connection(handle) else {
                continue;
            };
            if !connection.is_established() {
                continue;
            }
            if k < GREEDY {
                if !started[k] && elapsed >= Duration::from_millis(100 * k as u64) {
                    outboxes[k].push(message(k as u32, GREEDY_MESSAGE));
                    started[k] = true;
                }
                outboxes[k].pump(connection);
            } else if elapsed >= Duration::from_secs(2) {
                let id = *honest_stream
                    .get_or_insert_with(|| connection.open_stream().expect("a stream"));
                while honest_written < HONEST_BYTES {
                    let left = (HONEST_BYTES - honest_written).min(chunk.len() as u64);
                    let n = connection.write(id, &chunk[..left as usize]).expect("open");
                    if n == 0 {
                        break;
                    }
                    honest_written += n as u64;
                }
            }
        }
        let server = &mut sim.node_mut(net.server).0;
        while let Some(handle) = server.accept() {
            let remote = server.connection(handle).expect("accepted").remote();
            let k = net
                .clients
                .iter()
                .position(|&(_, _, addr)| addr == remote)
                .expect("a client");
            peers.insert(handle, k);
        }
        while let Some((handle, event)) = server.poll_event() {
            if let Event::Closed(error) = event {
                let k = peers[&handle];
                assert_eq!(error, ConnectionError::MemoryBudget, "peer {k}");
                assert!(k < GREEDY, "the honest peer was closed");
                let own = held_before.get(&k).copied().unwrap_or(0);
                let most = held_before.values().copied().max().unwrap_or(0);
                outcome.closed.push(k);
                outcome.closed_greediest.push(own == most);
                held_before.remove(&k);
            }
        }
        let mut held = 0;
        for (&handle, &k) in &peers {
            let Some(connection) = server.connection(handle) else {
                continue;
            };
            if k == GREEDY {
                if let Some(id) = connection.accept_stream() {
                    server_stream = Some(id);
                }
                if let Some(id) = server_stream {
                    while let Ok(ReadOutcome::Read(n @ 1..)) = connection.read(id, &mut buf) {
                        outcome.honest_read += n as u64;
                    }
                }
            }
            let stats = connection.stats();
            let bytes = (stats.receive_memory + stats.send_memory) as u64;
            if connection.error().is_none() {
                held_before.insert(k, bytes);
            }
            held += bytes;
        }
        outcome.peak_held = outcome.peak_held.max(held);
        outcome.peak_charged = outcome.peak_charged.max(server.stats().memory_charged);
        outcome.honest_read >= HONEST_BYTES
    });
    outcome
}
