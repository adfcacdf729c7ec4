//! Who is at the other end: the initiator's proof of identity, what each
//! side reports as its peer's proven key, a responder that requires a
//! proof, an invalid proof, a simultaneous open, and the application
//! refusing a connection after seeing who opened it.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quanta::{Clock, Mock};
use support::attacker::Attacker;
use support::{Pair, drive, exchange, identity, message, other_identity, seed_bytes, wall_start};
use tern_proto::{
    CloseKind, ConnectionError, ConnectionHandle, Endpoint, EndpointConfig, Event, Node,
    ProtocolError, TransmitLimits,
};
use tern_sim::{LinkConfig, Seed};
use tern_wire::{Frame, Identity};

fn link(delay_ms: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        ..LinkConfig::default()
    }
}

fn requiring() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.connection.require_identity = true;
    config
}

#[test]
fn an_initiator_with_an_identity_proves_it_and_each_side_reports_the_other() {
    let seed = Seed::from_env_or(81);
    let config = EndpointConfig::default();
    let mut pair = Pair::with_client_identity(seed.value(), link(10), config, config);
    let (client, server) = exchange(&mut pair, &[100, 5_000], Duration::from_secs(10));
    let proven_client = pair
        .server()
        .connection(server)
        .and_then(|c| c.peer_identity().cloned());
    assert_eq!(proven_client, Some(other_identity().public()));
    let proven_server = pair
        .client()
        .connection(client)
        .and_then(|c| c.peer_identity().cloned());
    assert_eq!(proven_server, Some(identity().public()));
}

#[test]
fn an_initiator_without_an_identity_or_that_does_not_prove_it_stays_anonymous() {
    let seed = Seed::from_env_or(82);
    let config = EndpointConfig::default();
    let mut anonymous = Pair::new(seed.value(), link(10), config);
    let (client, server) = exchange(&mut anonymous, &[100], Duration::from_secs(10));
    let server_side = anonymous.server().connection(server).expect("open");
    assert_eq!(server_side.peer_identity(), None);
    let client_side = anonymous.client().connection(client).expect("open");
    assert_eq!(client_side.peer_identity(), Some(&identity().public()));

    let mut silent = EndpointConfig::default();
    silent.connection.prove_identity = false;
    let mut pair = Pair::with_client_identity(seed.value(), link(10), silent, config);
    let (_, server) = exchange(&mut pair, &[100], Duration::from_secs(10));
    let server_side = pair.server().connection(server).expect("open");
    assert_eq!(server_side.peer_identity(), None);
}

#[test]
fn a_required_proof_lets_the_initiator_in_and_data_flows_exactly_once_over_a_lossy_path() {
    for value in 0..4 {
        let seed = Seed::from_env_or(83 + value);
        let lossy = LinkConfig {
            loss: 0.1,
            reorder: 0.05,
            ..link(10)
        };
        let client_config = EndpointConfig::default();
        let mut pair = Pair::with_client_identity(seed.value(), lossy, client_config, requiring());
        let (_, server) = exchange(&mut pair, &[100, 5_000, 200_000], Duration::from_secs(60));
        let proven = pair
            .server()
            .connection(server)
            .and_then(|c| c.peer_identity().cloned());
        assert_eq!(
            proven,
            Some(other_identity().public()),
            "{}",
            seed.replay_hint()
        );
    }
}

#[test]
fn a_responder_that_requires_a_proof_closes_an_anonymous_initiator_and_delivers_nothing() {
    let seed = Seed::from_env_or(87);
    let mut pair = Pair::with_configs(
        seed.value(),
        link(10),
        EndpointConfig::default(),
        requiring(),
    );
    let now = pair.sim.now();
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    let client = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    // Data rides with the client's first packets.
    pair.client()
        .connection(client)
        .expect("connecting")
        .send_message(message(1, 3_000))
        .expect("room");
    let (client_node, server_node) = (pair.client, pair.server);
    let mut closed = None;
    drive(&mut pair.sim, Duration::from_secs(20), |sim| {
        let server = &mut sim.node_mut(server_node).0;
        while let Some((_, event)) = server.poll_event() {
            assert!(
                matches!(event, Event::Closed(ConnectionError::IdentityNotProven)),
                "the application hears nothing of it: {event:?}"
            );
        }
        assert_eq!(server.accept(), None, "never announced");
        let client_ep = &mut sim.node_mut(client_node).0;
        while let Some((_, event)) = client_ep.poll_event() {
            if let Event::Closed(error) = event {
                closed = Some(error);
            }
        }
        closed.is_some()
    });
    // The close comes when the handshake timeout runs out on the server.
    assert!(pair.sim.elapsed() >= Duration::from_secs(10));
    match closed {
        Some(ConnectionError::PeerClosed { kind, code, .. }) => {
            assert_eq!((kind, code), (CloseKind::Transport, 4));
        }
        other => panic!("closed by the responder, not {other:?}"),
    }
    let stats = pair.server().stats();
    assert_eq!(stats.identities_unproven, 1);
    assert_eq!(stats.protocol_violations, 0);
}

/// Two endpoints joined directly on a mock clock, so a test can drop the
/// exact datagrams it wants.
struct Wire {
    clock: Clock,
    mock: Arc<Mock>,
    client: Endpoint,
    server: Endpoint,
}

const CLIENT: &str = "10.0.0.1:4000";
const SERVER: &str = "10.0.0.2:5000";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

impl Wire {
    fn new(server_config: EndpointConfig) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let now = clock.now();
        let client = Endpoint::new(
            EndpointConfig::default(),
            Some(other_identity()),
            seed_bytes(88, 1),
            now,
            wall_start(),
        )
        .expect("config");
        let server = Endpoint::new(
            server_config,
            Some(identity()),
            seed_bytes(88, 2),
            now,
            wall_start(),
        )
        .expect("config");
        Self {
            clock,
            mock,
            client,
            server,
        }
    }

    /// One turn of both sides at the next deadline (at most 5 ms on), the
    /// client's datagrams to the server passing `keep`.
    fn step(&mut self, keep: &mut dyn FnMut(&[u8]) -> bool) {
        let now = self.clock.now();
        for endpoint in [&mut self.client, &mut self.server] {
            if endpoint.poll_timeout().is_some_and(|at| at <= now) {
                endpoint.handle_timeout(now);
            }
        }
        let limits = TransmitLimits::new(1, 1452);
        let mut buf = vec![0u8; 1452];
        while let Some(t) = self.client.poll_transmit(now, limits, &mut buf) {
            if keep(&buf[..t.len]) {
                let datagram = &mut buf[..t.len];
                self.server
                    .handle_datagram(now, addr(SERVER), addr(CLIENT), datagram);
            }
        }
        while let Some(t) = self.server.poll_transmit(now, limits, &mut buf) {
            self.client
                .handle_datagram(now, addr(CLIENT), addr(SERVER), &mut buf[..t.len]);
        }
        let next = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now)
            .min(now + Duration::from_millis(5));
        let wait = next.saturating_duration_since(now);
        self.mock.increment(wait.max(Duration::from_micros(100)));
    }
}

#[test]
fn a_lost_proof_is_sent_again_and_data_behind_it_is_held_back_until_it_verifies() {
    let mut wire = Wire::new(requiring());
    let public = wire.server.public().expect("identity");
    let now = wire.clock.now();
    let client = wire
        .client
        .connect(now, addr(SERVER), &public)
        .expect("connect");
    // A large message: the proof and its first bytes fill one packet, the
    // rest follows in others.
    let sent = message(7, 6_000);
    wire.client
        .connection(client)
        .expect("connecting")
        .send_message(sent.clone())
        .expect("room");
    // The client's first packet after the intro carries the proof: it is
    // lost.
    let mut intro_seen = false;
    let mut dropped = false;
    let mut keep = |_: &[u8]| {
        if !intro_seen {
            intro_seen = true;
            return true;
        }
        if !dropped {
            dropped = true;
            return false;
        }
        true
    };
    let mut accepted: Option<ConnectionHandle> = None;
    let mut got = Vec::new();
    let mut held_seen = 0;
    for _ in 0..20_000 {
        wire.step(&mut keep);
        while let Some((_, event)) = wire.server.poll_event() {
            assert!(!matches!(event, Event::Closed(_)), "{event:?}");
        }
        if accepted.is_none()
            && let Some(handle) = wire.server.accept()
        {
            let connection = wire.server.connection(handle).expect("open");
            assert_eq!(
                connection.peer_identity(),
                Some(&other_identity().public()),
                "announced only once proven"
            );
            held_seen = connection.stats().held_before_proof;
            accepted = Some(handle);
        }
        if let Some(connection) = accepted.and_then(|h| wire.server.connection(h)) {
            while let Some(m) = connection.recv_message() {
                got.push(m);
            }
        }
        if !got.is_empty() {
            break;
        }
    }
    assert!(dropped, "the proof's packet was lost");
    assert!(
        held_seen > 0,
        "data that came before the proof was held back"
    );
    assert_eq!(got, vec![sent], "delivered whole and once");
}

#[test]
fn an_invalid_proof_is_a_protocol_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let proof = attacker
        .transcript
        .prove(&other_identity(), &mut rand_core::OsRng)
        .expect("signs");
    let genuine = proof.identity();
    let mut signature = genuine.signature.to_vec();
    signature[100] ^= 0x01;
    attacker.send(&[Frame::Identity(Identity {
        public_key: genuine.public_key,
        signature: &signature,
    })]);
    attacker.turn();
    let handle = attacker.handle;
    let mut closed = None;
    while let Some((h, event)) = attacker.endpoint.poll_event() {
        if let (true, Event::Closed(error)) = (h == handle, event) {
            closed = Some(error);
        }
    }
    assert_eq!(
        closed,
        Some(ConnectionError::Protocol(ProtocolError::IdentityProof))
    );
    assert_eq!(attacker.endpoint.stats().protocol_violations, 1);
}

#[test]
fn a_valid_proof_is_checked_once_and_later_ones_change_nothing() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    assert_eq!(attacker.connection().and_then(|c| c.peer_identity()), None);
    let proof = attacker
        .transcript
        .prove(&other_identity(), &mut rand_core::OsRng)
        .expect("signs");
    attacker.send(&[proof.frame()]);
    attacker.turn();
    let proven = attacker
        .connection()
        .and_then(|c| c.peer_identity().cloned());
    assert_eq!(proven, Some(other_identity().public()));
    // A later proof, valid or not, is not even looked at.
    attacker.send(&[Frame::Identity(Identity {
        public_key: b"not a key",
        signature: &[0; 256],
    })]);
    attacker.turn();
    let connection = attacker.connection().expect("still open");
    assert!(connection.error().is_none());
    assert_eq!(connection.peer_identity(), Some(&other_identity().public()));
    assert_eq!(attacker.endpoint.stats().protocol_violations, 0);
}

#[test]
fn a_proof_after_the_handshake_timeout_is_not_checked_and_the_responder_keeps_no_transcript() {
    let config = EndpointConfig::default();
    let mut attacker = Attacker::connect(config);
    let proof = attacker
        .transcript
        .prove(&other_identity(), &mut rand_core::OsRng)
        .expect("signs");
    // The attacker keeps the connection alive with pings while the
    // responder's wait for a proof runs out.
    let step = Duration::from_secs(1);
    let waited = config.connection.handshake_timeout + step;
    let mut passed = Duration::ZERO;
    while passed < waited {
        attacker.send(&[Frame::Ping]);
        attacker.run_for(step, Duration::from_millis(100));
        passed += step;
    }
    attacker.send(&[proof.frame()]);
    attacker.turn();
    let connection = attacker.connection().expect("still open");
    assert!(connection.error().is_none());
    assert_eq!(connection.peer_identity(), None, "too late to be checked");
    assert_eq!(attacker.endpoint.stats().protocol_violations, 0);
}

#[test]
fn a_simultaneous_open_reports_the_key_each_connection_proved() {
    let seed = Seed::from_env_or(89);
    let mut pair = Pair::symmetric(seed.value(), link(20));
    let (a, b) = pair.open_both_ways();
    let server_key = pair.server().public().expect("identity");
    let client_key = pair.client().public().expect("identity");
    let (client_node, server_node) = (pair.client, pair.server);
    let mut incoming = [None, None];
    drive(&mut pair.sim, Duration::from_secs(20), |sim| {
        for (i, node) in [client_node, server_node].into_iter().enumerate() {
            let endpoint = &mut sim.node_mut(node).0;
            while let Some((_, event)) = endpoint.poll_event() {
                assert!(!matches!(event, Event::Closed(_)), "{event:?}");
            }
            if let Some(accepted) = endpoint.accept() {
                incoming[i] = Some(accepted);
            }
        }
        incoming.iter().all(Option::is_some)
    });
    // Each connect proved the key it named; each accepted connection the
    // key its initiator proved: the same peer either way.
    let checks = [(client_node, a, &server_key), (server_node, b, &client_key)];
    for (i, (node, connect, peer)) in checks.into_iter().enumerate() {
        let endpoint = &mut pair.sim.node_mut(node).0;
        let outgoing = endpoint.connection(connect).expect("open");
        assert_eq!(outgoing.peer_identity(), Some(peer));
        let accepted = incoming[i].expect("accepted");
        let accepted = endpoint.connection(accepted).expect("open");
        assert_eq!(accepted.peer_identity(), Some(peer));
    }
}

#[test]
fn a_refused_connection_is_closed_with_the_applications_code_and_counted() {
    let seed = Seed::from_env_or(90);
    let config = EndpointConfig::default();
    let mut pair = Pair::with_client_identity(seed.value(), link(10), config, config);
    let (client, server) = exchange(&mut pair, &[100], Duration::from_secs(10));
    let now = pair.sim.now();
    pair.server().refuse(now, server, 42);
    assert_eq!(pair.server().stats().connections_refused, 1);
    let client_node = pair.client;
    let mut closed = None;
    drive(&mut pair.sim, Duration::from_secs(20), |sim| {
        let endpoint = &mut sim.node_mut(client_node).0;
        while let Some((h, event)) = endpoint.poll_event() {
            if let (true, Event::Closed(error)) = (h == client, event) {
                closed = Some(error);
            }
        }
        closed.is_some()
    });
    match closed {
        Some(ConnectionError::PeerClosed { kind, code, .. }) => {
            assert_eq!((kind, code), (CloseKind::Application, 42));
        }
        other => panic!("refused by the server, not {other:?}"),
    }
}
