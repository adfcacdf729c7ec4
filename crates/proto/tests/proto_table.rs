//! The connection table under authenticated peers that hold on to it, on
//! tern-sim: a table filled by idle connections still admits a new honest
//! peer (the idlest makes room), a connection carrying traffic is never
//! evicted for a newcomer, and the caps per source address and network
//! refuse the connection past them while others get in.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use support::{EndpointSim, client_connecting, server_on_sim};
use tern_proto::{
    Bytes, CloseKind, ConnectionError, ConnectionHandle, Endpoint, EndpointConfig, EndpointStats,
    Event, IntroLimiterConfig,
};
use tern_sim::{NodeId, Seed};
use tern_wire::PublicIdentity;

/// The table's size in these tests: small, to stay fast.
const TABLE: usize = 64;

/// How a client's connect ended, if it did.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Pending,
    Connected,
    Closed(ConnectionError),
}

/// A server and clients, each a simulated endpoint of its own.
struct Table {
    sim: EndpointSim,
    server: NodeId,
    public: PublicIdentity,
    clients: Vec<(NodeId, ConnectionHandle)>,
    outcomes: Vec<Outcome>,
    /// The server's connections that ended evicted.
    evicted: usize,
}

impl Table {
    fn new(seed: u64, config: EndpointConfig) -> Self {
        let (sim, server, public) = server_on_sim(seed, config);
        Self {
            sim,
            server,
            public,
            clients: Vec::new(),
            outcomes: Vec::new(),
            evicted: 0,
        }
    }

    /// A new client at `addr` that connects to the server now; it gives up
    /// after two seconds without an answer. Returns its number.
    fn connect_from(&mut self, addr: SocketAddr) -> usize {
        let salt = 100 + self.clients.len() as u64;
        let mut config = EndpointConfig::default();
        config.connection.handshake_timeout = Duration::from_secs(2);
        let (node, handle) = client_connecting(&mut self.sim, addr, salt, config, &self.public);
        self.clients.push((node, handle));
        self.outcomes.push(Outcome::Pending);
        self.clients.len() - 1
    }

    /// Runs for `length` in steps of `step`, calling `each_step` before
    /// every one, and records how the clients' connects end. Stops early
    /// once no connect is pending, if `until_settled`.
    fn run(
        &mut self,
        length: Duration,
        step: Duration,
        until_settled: bool,
        mut each_step: impl FnMut(&mut Self),
    ) {
        let end = self.sim.elapsed() + length;
        while self.sim.elapsed() < end {
            each_step(self);
            self.sim.run_for(step);
            for (i, &(node, handle)) in self.clients.iter().enumerate() {
                let endpoint = &mut self.sim.node_mut(node).0;
                while let Some((h, event)) = endpoint.poll_event() {
                    assert_eq!(h, handle, "each client has one connection");
                    match event {
                        Event::Connected => self.outcomes[i] = Outcome::Connected,
                        Event::Closed(e) => self.outcomes[i] = Outcome::Closed(e),
                        _ => {}
                    }
                }
            }
            let server = &mut self.sim.node_mut(self.server).0;
            while server.accept().is_some() {}
            while let Some((_, event)) = server.poll_event() {
                if event == Event::Closed(ConnectionError::Evicted) {
                    self.evicted += 1;
                }
            }
            if until_settled && !self.outcomes.contains(&Outcome::Pending) {
                break;
            }
        }
    }

    /// Runs until every connect so far has ended (at most ten seconds).
    fn settle(&mut self) {
        self.run(
            Duration::from_secs(10),
            Duration::from_millis(1),
            true,
            |_| {},
        );
    }

    fn connected(&self, clients: std::ops::Range<usize>) -> usize {
        self.outcomes[clients]
            .iter()
            .filter(|o| **o == Outcome::Connected)
            .count()
    }

    fn server(&mut self) -> &mut Endpoint {
        &mut self.sim.node_mut(self.server).0
    }

    fn stats(&self) -> EndpointStats {
        self.sim.node(self.server).0.stats()
    }
}

/// A server config with a table of `TABLE` and intro limits that let a
/// test's connects through at once.
fn config() -> EndpointConfig {
    let mut limits = IntroLimiterConfig::default();
    limits.total_rate = 10_000;
    limits.total_burst = 1_000;
    limits.per_source_rate = 1_000;
    limits.per_source_burst = 1_000;
    let mut config = EndpointConfig::default();
    config.intro_limits = limits;
    config.max_connections = TABLE;
    config
}

/// Port `port` of the `i`th of twenty attacker addresses, each in a
/// network of its own.
fn attacker(i: usize, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 20, i as u8, 1)), port)
}

/// Fills the table with connections from twenty addresses, and checks
/// that each got in.
fn fill(table: &mut Table, count: usize) {
    for i in 0..count {
        table.connect_from(attacker(i % 20, 4000 + i as u16));
    }
    table.settle();
    assert_eq!(table.connected(0..count), count, "the table fills");
}

#[test]
fn a_table_filled_by_idle_connections_still_admits_an_honest_peer() {
    let seed = Seed::from_env_or(2501);
    let mut table = Table::new(seed.value(), config());
    fill(&mut table, TABLE);
    assert_eq!(table.server().len(), TABLE);
    // The attackers sit idle (their keep-alives go on) past the eviction
    // threshold; then an honest peer connects.
    table.run(
        Duration::from_secs(11),
        Duration::from_millis(10),
        false,
        |_| {},
    );
    let honest = table.connect_from("10.9.9.9:4000".parse().expect("address"));
    table.settle();
    let stats = table.stats();
    println!("{stats:?}");
    assert_eq!(table.outcomes[honest], Outcome::Connected, "{stats:?}");
    assert_eq!(stats.connections_evicted, 1);
    assert_eq!(table.evicted, 1, "the server's application is told why");
    assert_eq!(table.server().len(), TABLE);
    // The evicted peer is told at once, with a transport Close.
    table.run(
        Duration::from_millis(100),
        Duration::from_millis(10),
        false,
        |_| {},
    );
    let told = table.outcomes[..TABLE]
        .iter()
        .filter(|o| {
            matches!(
                o,
                Outcome::Closed(ConnectionError::PeerClosed {
                    kind: CloseKind::Transport,
                    ..
                })
            )
        })
        .count();
    assert_eq!(told, 1, "{:?}", table.outcomes);
}

#[test]
fn a_connection_carrying_traffic_is_never_evicted() {
    let seed = Seed::from_env_or(2502);
    let mut table = Table::new(seed.value(), config());
    // The busy connection is the oldest: eviction by age would pick it.
    table.connect_from("10.7.7.7:4000".parse().expect("address"));
    table.settle();
    fill_from(&mut table, 1);
    // A message a second from the busy client, while the rest sit idle.
    let send = |table: &mut Table| {
        if table.sim.elapsed().subsec_millis() < 10 {
            let (node, handle) = table.clients[0];
            let endpoint = &mut table.sim.node_mut(node).0;
            let connection = endpoint.connection(handle).expect("the busy connection");
            connection
                .send_message(Bytes::from_static(b"still here"))
                .expect("room for a small message");
        }
    };
    table.run(
        Duration::from_secs(2),
        Duration::from_millis(10),
        false,
        send,
    );
    // Too early: nobody has been idle long enough, so a newcomer is refused
    // before any RSA work.
    let decrypted = table.stats().intros_decrypted;
    let early = table.connect_from("10.9.9.1:4000".parse().expect("address"));
    table.run(
        Duration::from_secs(3),
        Duration::from_millis(10),
        true,
        send,
    );
    assert!(matches!(
        table.outcomes[early],
        Outcome::Closed(ConnectionError::HandshakeTimedOut)
    ));
    let stats = table.stats();
    assert!(stats.intros_table_full > 0, "{stats:?}");
    assert_eq!(stats.intros_decrypted, decrypted, "no RSA work for it");
    // Later, three newcomers each take an idle connection's place; the
    // busy one stays.
    table.run(
        Duration::from_secs(7),
        Duration::from_millis(10),
        false,
        send,
    );
    let first = table.clients.len();
    for i in 0..3u8 {
        table.connect_from(SocketAddr::from(([10, 9, 9, 10 + i], 4000)));
    }
    table.run(
        Duration::from_secs(3),
        Duration::from_millis(10),
        false,
        send,
    );
    let stats = table.stats();
    assert_eq!(table.connected(first..first + 3), 3, "{stats:?}");
    assert_eq!(stats.connections_evicted, 3);
    assert_eq!(
        table.outcomes[0],
        Outcome::Connected,
        "the busy one is never evicted"
    );
}

/// Fills the rest of the table (after `held` connections) from twenty
/// addresses.
fn fill_from(table: &mut Table, held: usize) {
    let first = table.clients.len();
    for i in 0..TABLE - held {
        table.connect_from(attacker(i % 20, 4000 + i as u16));
    }
    table.settle();
    assert_eq!(table.connected(first..first + TABLE - held), TABLE - held);
}

#[test]
fn the_caps_per_address_and_per_network_refuse_the_one_past_them() {
    let seed = Seed::from_env_or(2503);
    let mut config = config();
    config.max_connections_per_address = 4;
    config.max_connections_per_prefix = 6;
    let mut table = Table::new(seed.value(), config);
    // Five from one address: the fifth is past the address cap.
    for port in 0..5 {
        table.connect_from(SocketAddr::from(([10, 1, 1, 1], 4000 + port)));
    }
    table.settle();
    assert_eq!(table.connected(0..5), 4);
    let stats = table.stats();
    assert!(stats.intros_address_capped > 0, "{stats:?}");
    assert_eq!(stats.intros_prefix_capped, 0);
    // Three from a second address of the same /24: the third is past the
    // network's cap; an address of another network still gets in.
    for port in 0..3 {
        table.connect_from(SocketAddr::from(([10, 1, 1, 2], 4000 + port)));
    }
    table.connect_from(SocketAddr::from(([10, 1, 2, 1], 4000)));
    table.settle();
    assert_eq!(table.connected(5..8), 2);
    assert_eq!(table.outcomes[8], Outcome::Connected);
    let stats = table.stats();
    assert!(stats.intros_prefix_capped > 0, "{stats:?}");
    assert_eq!(stats.intros_decrypted, 7, "no RSA work past the caps");
    // A connection gone gives its place back.
    let one = (0..5)
        .find(|&i| table.outcomes[i] == Outcome::Connected)
        .expect("a connected client");
    let (node, handle) = table.clients[one];
    let now = table.sim.now();
    table.sim.node_mut(node).0.release(now, handle, 0);
    table.run(
        Duration::from_secs(1),
        Duration::from_millis(10),
        false,
        |_| {},
    );
    let again = table.connect_from(SocketAddr::from(([10, 1, 1, 1], 5000)));
    table.settle();
    assert_eq!(table.outcomes[again], Outcome::Connected);
}
