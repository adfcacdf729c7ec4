//! Connections through simulated NATs (RFC 4787 behaviours in tern-sim):
//! each side learns the address the other sees it at, learns it again when
//! its NAT mapping changes, and a keep-alive holds a mapping open through
//! minutes of silence.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{EndpointSim, OnSim, drive, identity, seed_bytes, wall_start};
use tern_proto::{ConnectionHandle, Endpoint, EndpointConfig, Event};
use tern_sim::{LinkConfig, NatConfig, NatId, NodeId, Seed, Sim, SimConfig};

const NAT_IP: &str = "203.0.113.1";
const CLIENT: &str = "192.168.1.2:4000";
const SERVER: &str = "198.51.100.2:5000";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("an address")
}

/// A client endpoint behind a NAT, connected to a public server endpoint.
struct Behind {
    sim: EndpointSim,
    nat: NatId,
    client: NodeId,
    server: NodeId,
    client_conn: ConnectionHandle,
    server_conn: ConnectionHandle,
}

impl Behind {
    fn connect(seed: u64, nat: NatConfig, client: EndpointConfig, server: EndpointConfig) -> Self {
        let link = LinkConfig {
            delay: Duration::from_millis(15),
            ..LinkConfig::default()
        };
        let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
        let now = sim.now();
        let server_endpoint = Endpoint::new(
            server,
            Some(identity()),
            seed_bytes(seed, 2),
            now,
            wall_start(),
        )
        .expect("config");
        let key = server_endpoint.public().expect("identity");
        let mut client_endpoint =
            Endpoint::new(client, None, seed_bytes(seed, 1), now, wall_start()).expect("config");
        let client_conn = client_endpoint
            .connect(now, addr(SERVER), &key)
            .expect("connect");
        let nat = sim.add_nat(nat, NAT_IP.parse().expect("an address"));
        let client = sim
            .add_node_behind(nat, OnSim(client_endpoint), &[addr(CLIENT)])
            .expect("address");
        let server = sim
            .add_node(OnSim(server_endpoint), &[addr(SERVER)])
            .expect("address");
        let mut server_conn = None;
        drive(&mut sim, Duration::from_secs(10), |sim| {
            server_conn = server_conn.or_else(|| sim.node_mut(server).0.accept());
            server_conn.is_some()
        });
        Self {
            sim,
            nat,
            client,
            server,
            client_conn,
            server_conn: server_conn.expect("accepted"),
        }
    }

    fn client_observed(&mut self) -> Option<SocketAddr> {
        let handle = self.client_conn;
        let connection = self.sim.node_mut(self.client).0.connection(handle)?;
        connection.observed_address()
    }

    /// The client's public address for the server, as the NAT maps it now.
    fn mapping(&mut self) -> Option<SocketAddr> {
        let now = self.sim.now();
        self.sim
            .nat_mut(self.nat)
            .mapped(now, addr(CLIENT), addr(SERVER))
    }

    /// How often the client was told its address changed.
    fn client_changes(&mut self) -> usize {
        let mut changes = 0;
        while let Some((handle, event)) = self.sim.node_mut(self.client).0.poll_event() {
            if handle == self.client_conn && event == Event::ObservedAddressChanged {
                changes += 1;
            }
        }
        changes
    }

    fn client_sends(&mut self, message: &'static [u8]) {
        let handle = self.client_conn;
        self.sim
            .node_mut(self.client)
            .0
            .connection(handle)
            .expect("open")
            .send_message(message.into())
            .expect("room");
    }

    fn server_sends(&mut self, message: &'static [u8]) {
        let handle = self.server_conn;
        self.sim
            .node_mut(self.server)
            .0
            .connection(handle)
            .expect("open")
            .send_message(message.into())
            .expect("room");
    }

    fn received(&mut self, node: NodeId, handle: ConnectionHandle) -> Vec<bytes::Bytes> {
        let endpoint = &mut self.sim.node_mut(node).0;
        let connection = endpoint.connection(handle).expect("open");
        std::iter::from_fn(|| connection.recv_message()).collect()
    }
}

fn kinds() -> [(&'static str, NatConfig); 4] {
    [
        ("full cone", NatConfig::full_cone()),
        ("restricted cone", NatConfig::restricted_cone()),
        ("port-restricted cone", NatConfig::port_restricted_cone()),
        ("symmetric", NatConfig::symmetric()),
    ]
}

#[test]
fn a_client_behind_each_kind_of_nat_learns_its_public_address_from_the_server() {
    let seed = Seed::from_env_or(251);
    for (kind, nat) in kinds() {
        let config = EndpointConfig::default();
        let mut behind = Behind::connect(seed.value(), nat, config, config);
        let mut learned = None;
        drive(&mut behind.sim, Duration::from_secs(10), |sim| {
            let handle = behind.client_conn;
            learned = sim
                .node_mut(behind.client)
                .0
                .connection(handle)
                .and_then(|c| c.observed_address());
            learned.is_some()
        });
        let mapped = behind.mapping().expect("a mapping");
        assert_eq!(learned, Some(mapped), "{kind}");
        assert_eq!(
            mapped.ip(),
            NAT_IP.parse::<std::net::IpAddr>().expect("ip"),
            "{kind}"
        );
        assert_eq!(behind.client_changes(), 1, "{kind}: told once");
        // And the server learns the address the client sees it at: its own.
        behind.sim.run_for(Duration::from_millis(200));
        let server_conn = behind.server_conn;
        let server = behind
            .sim
            .node_mut(behind.server)
            .0
            .connection(server_conn)
            .expect("open");
        assert_eq!(server.observed_address(), Some(addr(SERVER)), "{kind}");
        assert_eq!(server.remote(), mapped, "{kind}");
    }
}

#[test]
fn after_the_mapping_expires_and_the_client_sends_again_it_learns_its_new_address() {
    let seed = Seed::from_env_or(252);
    // No keep-alive, and patience: the connection outlives the mapping.
    let mut config = EndpointConfig::default();
    config.connection.keep_alive = None;
    config.connection.idle_timeout = Duration::from_secs(300);
    for (kind, nat) in kinds() {
        let mut behind = Behind::connect(seed.value(), nat, config, config);
        behind.sim.run_for(Duration::from_secs(1));
        let before = behind.client_observed().expect("learned");
        assert_eq!(behind.client_changes(), 1, "{kind}");
        behind.sim.run_for(Duration::from_secs(40));
        assert_eq!(behind.mapping(), None, "{kind}: the mapping expired");
        assert_eq!(
            behind.sim.nat(behind.nat).stats().mappings_expired,
            1,
            "{kind}"
        );

        behind.client_sends(b"still here");
        behind.sim.run_for(Duration::from_secs(2));
        let after = behind.client_observed().expect("learned");
        assert_ne!(after, before, "{kind}");
        assert_eq!(Some(after), behind.mapping(), "{kind}: the new mapping");
        assert_eq!(behind.client_changes(), 1, "{kind}: told of the change");
        let (server, server_conn) = (behind.server, behind.server_conn);
        assert_eq!(
            behind.received(server, server_conn),
            [&b"still here"[..]],
            "{kind}"
        );
        // The server moved to the new address and answers there.
        behind.server_sends(b"welcome back");
        behind.sim.run_for(Duration::from_secs(2));
        let (client, client_conn) = (behind.client, behind.client_conn);
        assert_eq!(
            behind.received(client, client_conn),
            [&b"welcome back"[..]],
            "{kind}"
        );
    }
}

/// A client idle for three minutes behind a NAT that forgets mappings after
/// 30 s, with the client's keep-alive at `keep_alive`; the server (which
/// sends no keep-alives of its own) then sends a message. Whether the
/// client got it within a second.
fn idle_then_server_sends(keep_alive: Option<Duration>) -> (bool, u64) {
    let seed = Seed::from_env_or(253);
    let mut server = EndpointConfig::default();
    server.connection.keep_alive = None;
    server.connection.idle_timeout = Duration::from_secs(600);
    let mut client = server;
    client.connection.keep_alive = keep_alive;
    let mut behind = Behind::connect(
        seed.value(),
        NatConfig::port_restricted_cone(),
        client,
        server,
    );
    behind.sim.run_for(Duration::from_secs(180));
    behind.server_sends(b"news");
    behind.sim.run_for(Duration::from_secs(1));
    let (node, handle) = (behind.client, behind.client_conn);
    let got = behind.received(node, handle) == [&b"news"[..]];
    (got, behind.sim.nat(behind.nat).stats().filtered)
}

#[test]
fn a_keep_alive_below_the_mapping_timeout_holds_the_mapping_through_minutes_of_silence() {
    assert_eq!(
        idle_then_server_sends(Some(Duration::from_secs(20))),
        (true, 0),
        "received, nothing refused by the NAT"
    );
    let (got, filtered) = idle_then_server_sends(None);
    assert!(!got, "without a keep-alive the NAT forgot the client");
    assert!(filtered > 0);
}
