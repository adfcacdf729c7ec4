//! Connects to X25519 identities on tern-sim: the intro's kind follows the
//! key the client names, an initiator's X25519 identity is proven in the
//! intro, the Retry path validates the new intro's address too, and its
//! reply never outgrows it.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{
    Pair, drive, exchange, identity, other_x25519_identity, seed_bytes, wall_start, x25519_identity,
};
use tern_proto::{Endpoint, EndpointConfig, Event, Node, TransmitLimits};
use tern_sim::{LinkConfig, Seed};
use tern_wire::{INTRO_LEN, PacketType};

fn link() -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    }
}

#[test]
fn an_x25519_server_is_reached_and_messages_flow_both_ways() {
    let seed = Seed::from_env_or(25_519);
    let config = EndpointConfig::default();
    let mut pair = Pair::with_identities(
        seed.value(),
        link(),
        (config, None),
        (config, x25519_identity()),
    );
    let (client, server) = exchange(&mut pair, &[10, 1000, 5000], Duration::from_secs(5));
    let named = pair.client().connection(client).expect("open");
    assert_eq!(named.peer_identity(), Some(&x25519_identity().public()));
    let accepted = pair.server().connection(server).expect("open");
    assert_eq!(accepted.peer_identity(), None, "the client is anonymous");
    let stats = pair.server().stats();
    assert_eq!(stats.intros_accepted, 1);
    assert_eq!(stats.intros_refused, 0);
}

#[test]
fn an_x25519_client_identity_is_proven_in_the_intro_to_a_server_that_requires_one() {
    let seed = Seed::from_env_or(25_520);
    let client_config = EndpointConfig::default();
    let mut server_config = EndpointConfig::default();
    server_config.connection.require_identity = true;
    let mut pair = Pair::with_identities(
        seed.value(),
        link(),
        (client_config, Some(other_x25519_identity())),
        (server_config, x25519_identity()),
    );
    let (_, server) = exchange(&mut pair, &[10, 2000], Duration::from_secs(5));
    let accepted = pair.server().connection(server).expect("open");
    assert_eq!(
        accepted.peer_identity(),
        Some(&other_x25519_identity().public())
    );
}

#[test]
fn an_x25519_client_identity_proves_itself_after_the_reply_to_an_rsa_server_that_requires_one() {
    let seed = Seed::from_env_or(25_521);
    let mut server_config = EndpointConfig::default();
    server_config.connection.require_identity = true;
    let mut pair = Pair::with_identities(
        seed.value(),
        link(),
        (EndpointConfig::default(), Some(other_x25519_identity())),
        (server_config, identity()),
    );
    let (_, server) = exchange(&mut pair, &[10, 2000], Duration::from_secs(5));
    let accepted = pair.server().connection(server).expect("open");
    assert_eq!(
        accepted.peer_identity(),
        Some(&other_x25519_identity().public())
    );
    assert_eq!(pair.server().stats().identities_unproven, 0);
}

#[test]
fn one_endpoint_reaches_an_rsa_server_and_an_x25519_server() {
    for (salt, server_identity) in [(1, identity()), (2, x25519_identity())] {
        let seed = Seed::from_env_or(25_530 + salt);
        let kind = server_identity.kind();
        let config = EndpointConfig::default();
        let mut pair = Pair::with_identities(
            seed.value(),
            link(),
            (config, Some(other_x25519_identity())),
            (config, server_identity),
        );
        let (client, _) = exchange(&mut pair, &[100], Duration::from_secs(5));
        let connection = pair.client().connection(client).expect("open");
        let named = connection.peer_identity().expect("the server's key");
        assert_eq!(named.kind(), kind);
    }
}

/// Two endpoints outside the sim, to look at single datagrams.
fn endpoints(server_config: EndpointConfig) -> (Endpoint, Endpoint, quanta::Instant) {
    let (clock, _mock) = quanta::Clock::mock();
    let now = clock.now();
    let client = Endpoint::new(
        EndpointConfig::default(),
        None,
        seed_bytes(7, 1),
        now,
        wall_start(),
    )
    .expect("config");
    let server = Endpoint::new(
        server_config,
        Some(x25519_identity()),
        seed_bytes(7, 2),
        now,
        wall_start(),
    )
    .expect("config");
    (client, server, now)
}

fn transmit(endpoint: &mut Endpoint, now: quanta::Instant) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 2048];
    let sent = endpoint.poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf)?;
    buf.truncate(sent.len);
    Some(buf)
}

#[test]
fn the_x25519_intro_is_never_smaller_than_its_reply() {
    let (mut client, mut server, now) = endpoints(EndpointConfig::default());
    let client_addr: SocketAddr = "10.0.0.1:4000".parse().expect("address");
    let server_addr: SocketAddr = "10.0.0.2:5000".parse().expect("address");
    client
        .connect(now, server_addr, &x25519_identity().public())
        .expect("connect");
    let mut intro = transmit(&mut client, now).expect("the intro");
    assert_eq!(intro[0], PacketType::IntroX25519 as u8);
    assert_eq!(intro.len(), INTRO_LEN);
    server.handle_datagram(now, server_addr, client_addr, &mut intro);
    let reply = transmit(&mut server, now).expect("the reply");
    assert_eq!(reply[0] & 0xf0, PacketType::IntroReply as u8);
    assert!(
        reply.len() <= intro.len(),
        "{} > {}",
        reply.len(),
        intro.len()
    );
}

#[test]
fn an_x25519_intro_over_its_source_budget_is_validated_by_a_retry_and_gets_in() {
    let seed = Seed::from_env_or(25_540);
    // One intro per source at once, one a minute after: the second
    // connect from the client's address is answered with a Retry.
    let mut server_config = EndpointConfig::default();
    server_config.intro_limits.per_source_rate = 1;
    server_config.intro_limits.per_source_burst = 1;
    let mut pair = Pair::with_identities(
        seed.value(),
        link(),
        (EndpointConfig::default(), None),
        (server_config, x25519_identity()),
    );
    let public = x25519_identity().public();
    let now = pair.sim.now();
    let server_addr = pair.server_addr;
    let first = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let second = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let mut connected = Vec::new();
    let client = pair.client;
    drive(&mut pair.sim, Duration::from_secs(5), |sim| {
        let endpoint = &mut sim.node_mut(client).0;
        while let Some((handle, event)) = endpoint.poll_event() {
            match event {
                Event::Connected => connected.push(handle),
                Event::Closed(e) => panic!("closed: {e}"),
                _ => {}
            }
        }
        connected.len() == 2
    });
    connected.sort_by_key(|handle| handle.0);
    let mut expected = vec![first, second];
    expected.sort_by_key(|handle| handle.0);
    assert_eq!(connected, expected);
    let stats = pair.server().stats();
    assert!(stats.intros_retried >= 1, "{stats:?}");
    assert!(stats.tokens_accepted >= 1, "{stats:?}");
    assert_eq!(stats.intros_accepted, 2);
}
