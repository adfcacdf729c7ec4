//! Nodes behind simulated NATs: what the public side sees, what the NAT
//! lets in, hole punching by crossing datagrams, hairpinning and expiry.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use quanta::Instant;
use tern_sim::{
    DropReason, LinkConfig, NatConfig, NatId, Node, NodeId, Sim, SimConfig, TraceKind, Transmit,
};

/// Sends what it is told to; a reflector answers every datagram with the
/// address it came from (as a STUN server does).
#[derive(Default)]
struct Host {
    reflect: bool,
    /// (leave from, to, bytes): `None` leaves from the first address.
    outbox: Vec<(Option<SocketAddr>, SocketAddr, Vec<u8>)>,
    /// (from, to, bytes) of every arrival.
    got: Vec<(SocketAddr, SocketAddr, Vec<u8>)>,
}

impl Host {
    fn reflector() -> Self {
        Self {
            reflect: true,
            ..Self::default()
        }
    }

    /// The addresses reflectors reported back.
    fn reflected(&self) -> Vec<SocketAddr> {
        self.got
            .iter()
            .filter_map(|(_, _, bytes)| std::str::from_utf8(bytes).ok()?.parse().ok())
            .collect()
    }

    fn senders(&self) -> Vec<SocketAddr> {
        self.got.iter().map(|(from, _, _)| *from).collect()
    }
}

impl Node for Host {
    fn handle_datagram(&mut self, _: Instant, local: SocketAddr, from: SocketAddr, d: &mut [u8]) {
        self.got.push((from, local, d.to_vec()));
        if self.reflect {
            self.outbox
                .push((Some(local), from, from.to_string().into_bytes()));
        }
    }

    fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.outbox.is_empty() {
            return None;
        }
        let (source, destination, bytes) = self.outbox.remove(0);
        buf[..bytes.len()].copy_from_slice(&bytes);
        Some(Transmit {
            source,
            destination,
            len: bytes.len(),
            segment_size: None,
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("an address in the test")
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address in the test")
}

const NAT_IP: &str = "203.0.113.1";
const CLIENT: &str = "192.168.1.2:5000";
const SERVER: &str = "198.51.100.7:443";
const SERVER_OTHER_PORT: &str = "198.51.100.7:8443";
const STRANGER: &str = "198.51.100.99:443";

/// A client behind a NAT, a reflecting server with two ports, a stranger.
struct Net {
    sim: Sim<Host>,
    nat: NatId,
    client: NodeId,
    server: NodeId,
    stranger: NodeId,
}

impl Net {
    fn new(config: NatConfig) -> Self {
        let link = LinkConfig {
            delay: Duration::from_millis(10),
            ..LinkConfig::default()
        };
        let mut sim = Sim::new(SimConfig::seeded(11).with_default_link(link).with_trace());
        let nat = sim.add_nat(config, ip(NAT_IP));
        let client = sim
            .add_node_behind(nat, Host::default(), &[addr(CLIENT)])
            .expect("a free address");
        let server = sim
            .add_node(Host::reflector(), &[addr(SERVER), addr(SERVER_OTHER_PORT)])
            .expect("a free address");
        let stranger = sim
            .add_node(Host::default(), &[addr(STRANGER)])
            .expect("a free address");
        Self {
            sim,
            nat,
            client,
            server,
            stranger,
        }
    }

    fn send(&mut self, node: NodeId, to: &str, what: &str) {
        self.send_from(node, None, to, what);
    }

    /// Sends and lets it arrive; whether the client received something.
    fn send_from(&mut self, node: NodeId, from: Option<&str>, to: &str, what: &str) -> bool {
        let before = self.sim.node(self.client).got.len();
        self.sim
            .node_mut(node)
            .outbox
            .push((from.map(addr), addr(to), what.as_bytes().to_vec()));
        self.sim.run_for(Duration::from_millis(100));
        self.sim.node(self.client).got.len() > before
    }

    /// The client's public address, as the server reflects it.
    fn learn(&mut self) -> SocketAddr {
        self.send(self.client, SERVER, "who am I");
        *self
            .sim
            .node(self.client)
            .reflected()
            .last()
            .expect("the reflector answered")
    }

    fn drops(&self, reason: DropReason) -> usize {
        let trace = self.sim.trace().expect("trace on");
        trace
            .iter()
            .filter(|e| e.kind == TraceKind::Dropped(reason))
            .count()
    }
}

#[test]
fn the_server_sees_the_nats_public_address_and_its_answer_reaches_the_private_host() {
    for config in [
        NatConfig::full_cone(),
        NatConfig::restricted_cone(),
        NatConfig::port_restricted_cone(),
        NatConfig::symmetric(),
    ] {
        let mut net = Net::new(config);
        let public = net.learn();
        assert_eq!(public.ip(), ip(NAT_IP));
        assert_eq!(net.sim.node(net.server).senders(), [public]);
        let (from, to, _) = &net.sim.node(net.client).got[0];
        assert_eq!((*from, *to), (addr(SERVER), addr(CLIENT)));
    }
}

/// Whether, once the client sent to the server's first port, the server's
/// other port and a stranger get through to the client.
fn admitted(config: NatConfig) -> (bool, bool) {
    let mut net = Net::new(config);
    let public = net.learn().to_string();
    let server = net.server;
    let other_port = net.send_from(server, Some(SERVER_OTHER_PORT), &public, "other port");
    let stranger = net.send_from(net.stranger, None, &public, "a stranger");
    assert_eq!(
        net.drops(DropReason::NatFiltered),
        usize::from(!other_port) + usize::from(!stranger)
    );
    (other_port, stranger)
}

#[test]
fn each_filtering_behaviour_admits_exactly_whom_rfc_4787_says() {
    assert_eq!(admitted(NatConfig::full_cone()), (true, true));
    assert_eq!(admitted(NatConfig::restricted_cone()), (true, false));
    assert_eq!(admitted(NatConfig::port_restricted_cone()), (false, false));
    assert_eq!(admitted(NatConfig::symmetric()), (false, false));
}

#[test]
fn a_symmetric_nat_shows_each_destination_another_public_port() {
    let mut net = Net::new(NatConfig::symmetric());
    net.send(net.client, SERVER, "a");
    net.send(net.client, SERVER_OTHER_PORT, "b");
    let seen = net.sim.node(net.server).senders();
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0], seen[1]);
    assert!(seen.iter().all(|a| a.ip() == ip(NAT_IP)));

    let mut cone = Net::new(NatConfig::port_restricted_cone());
    cone.send(cone.client, SERVER, "a");
    cone.send(cone.client, SERVER_OTHER_PORT, "b");
    let seen = cone.sim.node(cone.server).senders();
    assert_eq!(seen[0], seen[1], "a cone keeps one mapping");
}

#[test]
fn after_the_mapping_expires_the_server_cannot_reach_the_client_and_a_new_send_shows_a_new_port() {
    let mut net = Net::new(NatConfig::port_restricted_cone());
    let before = net.learn();
    net.sim.run_for(Duration::from_secs(31));
    let server = net.server;
    assert!(!net.send_from(server, Some(SERVER), &before.to_string(), "late"));
    assert_eq!(net.sim.nat(net.nat).stats().mappings_expired, 1);
    let after = net.learn();
    assert_ne!(before, after);
    assert_eq!(after.ip(), before.ip());
}

#[test]
fn nothing_outside_reaches_a_private_address() {
    let mut net = Net::new(NatConfig::full_cone());
    assert!(!net.send_from(net.stranger, None, CLIENT, "direct"));
    assert_eq!(net.drops(DropReason::Unroutable), 1);
    assert_eq!(net.sim.stats().unroutable, 1);
}

/// Two hosts behind two NATs, each knowing the other's public address (from
/// the reflector), send to each other at the same instant.
fn punch(a: NatConfig, b: NatConfig) -> (bool, bool) {
    let mut sim = Sim::new(SimConfig::seeded(5).with_default_link(LinkConfig {
        delay: Duration::from_millis(20),
        ..LinkConfig::default()
    }));
    let nat_a = sim.add_nat(a, ip("203.0.113.1"));
    let nat_b = sim.add_nat(b, ip("203.0.113.2"));
    let host_a = sim
        .add_node_behind(nat_a, Host::default(), &[addr("192.168.1.2:5000")])
        .expect("a free address");
    let host_b = sim
        .add_node_behind(nat_b, Host::default(), &[addr("192.168.2.2:6000")])
        .expect("a free address");
    sim.add_node(Host::reflector(), &[addr(SERVER)])
        .expect("a free address");
    for host in [host_a, host_b] {
        sim.node_mut(host)
            .outbox
            .push((None, addr(SERVER), b"?".to_vec()));
    }
    sim.run_for(Duration::from_millis(100));
    let public_a = sim.node(host_a).reflected()[0];
    let public_b = sim.node(host_b).reflected()[0];
    sim.node_mut(host_a)
        .outbox
        .push((None, public_b, b"hello b".to_vec()));
    sim.node_mut(host_b)
        .outbox
        .push((None, public_a, b"hello a".to_vec()));
    sim.run_for(Duration::from_millis(100));
    let reached = |host: NodeId, want: &[u8]| sim.node(host).got.iter().any(|(_, _, d)| d == want);
    (reached(host_a, b"hello a"), reached(host_b, b"hello b"))
}

#[test]
fn crossing_datagrams_open_two_cones_but_not_two_symmetric_nats() {
    // Each datagram reaches the far NAT after that NAT's own host sent
    // toward it: the filter admits it, although it was sent before.
    assert_eq!(
        punch(
            NatConfig::port_restricted_cone(),
            NatConfig::port_restricted_cone()
        ),
        (true, true)
    );
    assert_eq!(
        punch(NatConfig::restricted_cone(), NatConfig::full_cone()),
        (true, true)
    );
    // A symmetric NAT gives the peer a port the reflector never saw.
    assert_eq!(
        punch(NatConfig::symmetric(), NatConfig::symmetric()),
        (false, false)
    );
    // The restricted cone admits the symmetric side's new port, since its
    // host sent to that address; the symmetric side refuses the cone's
    // datagram, sent to the mapping only the reflector may use.
    assert_eq!(
        punch(NatConfig::symmetric(), NatConfig::restricted_cone()),
        (false, true)
    );
}

#[test]
fn hairpinning_is_off_by_default_and_works_when_on() {
    for hairpinning in [false, true] {
        let mut sim = Sim::new(SimConfig::seeded(3).with_trace());
        let nat = sim.add_nat(
            NatConfig::full_cone().with_hairpinning(hairpinning),
            ip(NAT_IP),
        );
        let a = sim
            .add_node_behind(nat, Host::default(), &[addr("192.168.1.2:5000")])
            .expect("a free address");
        let b = sim
            .add_node_behind(nat, Host::default(), &[addr("192.168.1.3:5000")])
            .expect("a free address");
        sim.add_node(Host::reflector(), &[addr(SERVER)])
            .expect("a free address");
        for host in [a, b] {
            sim.node_mut(host)
                .outbox
                .push((None, addr(SERVER), b"?".to_vec()));
        }
        sim.run_for(Duration::from_millis(10));
        let public_a = sim.node(a).reflected()[0];
        let public_b = sim.node(b).reflected()[0];
        sim.node_mut(a)
            .outbox
            .push((None, public_b, b"neighbour".to_vec()));
        sim.run_for(Duration::from_millis(10));
        let got: Vec<_> = sim
            .node(b)
            .got
            .iter()
            .filter(|(_, _, d)| d == b"neighbour")
            .collect();
        let dropped = sim
            .trace()
            .expect("trace on")
            .iter()
            .filter(|e| e.kind == TraceKind::Dropped(DropReason::NatHairpin))
            .count();
        if hairpinning {
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].0, public_a, "it comes from A's public address");
            assert_eq!(dropped, 0);
        } else {
            assert!(got.is_empty());
            assert_eq!(dropped, 1);
        }
        // In their own realm they reach each other directly.
        sim.node_mut(a)
            .outbox
            .push((None, addr("192.168.1.3:5000"), b"lan".to_vec()));
        sim.run_for(Duration::from_millis(10));
        let lan = sim
            .node(b)
            .got
            .iter()
            .find(|(_, _, d)| d == b"lan")
            .expect("a free address");
        assert_eq!(lan.0, addr("192.168.1.2:5000"));
    }
}

#[test]
fn a_link_to_a_nat_has_its_own_impairments() {
    let mut net = Net::new(NatConfig::full_cone());
    let public = net.learn().to_string();
    let server = net.server;
    let nat = net.nat;
    net.sim.set_link_to_nat(
        server,
        nat,
        LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        },
    );
    assert!(!net.send_from(server, Some(SERVER), &public, "lost"));
    assert_eq!(net.drops(DropReason::Lost), 1);
    assert!(net.send_from(net.stranger, None, &public, "through"));
}
