//! The front door under attack, on tern-sim: intros spoofed from many
//! addresses and from an honest peer's own address, many honest clients
//! behind one address, tokens forged, expired or stolen, and an impostor's
//! simultaneous open. Honest initiators must get in, the work the intros
//! cost (an RSA decryption, or an X25519 intro's exchanges) must stay
//! within the configured budget, and a connect must end with the peer it
//! named or a typed error. The flood tests run on both kinds of server
//! identity, with floods of the intro type each one reads.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use support::{
    EndpointSim, OnSim, client_connecting, identity, many_clients_server, other_identity,
    seed_bytes, server_on_sim_with, third_identity, wall_start, x25519_identity,
};
use tern_proto::{
    ConnectionError, ConnectionHandle, Endpoint, EndpointConfig, EndpointStats, Event,
    IntroLimiterConfig, Node, TransmitLimits,
};
use tern_sim::{LinkConfig, NodeId, Seed, Sim, SimConfig};
use tern_wire::{INTRO_LEN, IdentityKey, IdentityKind, PacketType, PublicIdentity, parse_retry};

/// A server and honest clients on one simulated network.
struct Door {
    sim: EndpointSim,
    server: NodeId,
    public: PublicIdentity,
    clients: Vec<(NodeId, ConnectionHandle)>,
}

/// The server identities the flood tests run with: RSA-2048 and X25519.
fn server_keys() -> [IdentityKey; 2] {
    [identity(), x25519_identity()]
}

impl Door {
    fn new(seed: u64, server_config: EndpointConfig) -> Self {
        Self::with_key(seed, server_config, identity())
    }

    fn with_key(seed: u64, server_config: EndpointConfig, key: IdentityKey) -> Self {
        let (sim, server, public) = server_on_sim_with(seed, server_config, key);
        Self {
            sim,
            server,
            public,
            clients: Vec::new(),
        }
    }

    /// The intro type this server reads.
    fn intro_type(&self) -> u8 {
        match self.public.kind() {
            IdentityKind::X25519 => PacketType::IntroX25519 as u8,
            _ => PacketType::Intro as u8,
        }
    }

    /// A new client endpoint at `addr` that connects to the server now.
    fn connect_from(&mut self, addr: SocketAddr) {
        let salt = 100 + self.clients.len() as u64;
        let (node, handle) = client_connecting(
            &mut self.sim,
            addr,
            salt,
            EndpointConfig::default(),
            &self.public,
        );
        self.clients.push((node, handle));
    }

    /// One more connect from the endpoint of client `i` (to the server).
    fn connect_again(&mut self, i: usize) {
        let node = self.clients[i].0;
        let now = self.sim.now();
        let public = self.public.clone();
        let endpoint = &mut self.sim.node_mut(node).0;
        let handle = endpoint
            .connect(now, many_clients_server(), &public)
            .expect("connect");
        self.clients.push((node, handle));
    }

    /// Runs in steps of one millisecond for `length`, calling `each_ms`
    /// before every step (to inject a flood), and counts the clients that
    /// connected; a client whose connect ends in an error is counted as
    /// failed at once.
    fn run(&mut self, length: Duration, mut each_ms: impl FnMut(&mut Self)) -> (usize, usize) {
        let mut connected = vec![false; self.clients.len()];
        let mut failed = vec![false; self.clients.len()];
        let end = self.sim.elapsed() + length;
        while self.sim.elapsed() < end {
            each_ms(self);
            self.sim.run_for(Duration::from_millis(1));
            for &(node, _) in &self.clients {
                let endpoint = &mut self.sim.node_mut(node).0;
                while let Some((h, event)) = endpoint.poll_event() {
                    let i = self
                        .clients
                        .iter()
                        .position(|&c| c == (node, h))
                        .expect("a client's connect");
                    match event {
                        Event::Connected => connected[i] = true,
                        Event::Closed(_) => failed[i] = true,
                        _ => {}
                    }
                }
            }
            if !connected.is_empty() && connected.iter().all(|&c| c) {
                break;
            }
        }
        let ok = connected.iter().filter(|&&c| c).count();
        (ok, failed.iter().filter(|&&f| f).count())
    }

    fn server_stats(&self) -> EndpointStats {
        self.sim.node(self.server).0.stats()
    }

    /// Delivers a datagram to the server as if it came from `from`.
    fn inject(&mut self, from: SocketAddr, datagram: &mut [u8]) {
        let now = self.sim.now();
        let server = &mut self.sim.node_mut(self.server).0;
        server.handle_datagram(now, many_clients_server(), from, datagram);
    }
}

/// A cheap source of noise for spoofed addresses and intro bytes.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 16
    }

    /// An intro of type `kind` and the right length whose body is noise:
    /// it costs an RSA decryption, or an X25519 intro's first exchange, if
    /// it gets that far.
    fn intro(&mut self, kind: u8) -> [u8; INTRO_LEN] {
        let mut intro = [0u8; INTRO_LEN];
        for chunk in intro.chunks_mut(6) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        intro[0] = kind;
        intro
    }
}

/// The budget the flood tests give the server: RSA operations per second.
fn budget() -> IntroLimiterConfig {
    let mut limits = IntroLimiterConfig::default();
    limits.total_rate = 100;
    limits.total_burst = 20;
    limits
}

fn config_with(limits: IntroLimiterConfig) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.intro_limits = limits;
    config
}

#[test]
fn honest_connects_succeed_during_a_spoofed_flood_and_intro_work_stays_in_budget() {
    for (salt, key) in (0u64..).zip(server_keys()) {
        let seed = Seed::from_env_or(2401);
        let mut door = Door::with_key(seed.value() + salt, config_with(budget()), key);
        let mut noise = Noise(seed.value());
        // 10 000 intros a second from ever-new addresses, for three seconds
        // before the honest clients start and for as long as they take.
        let flood = |door: &mut Door, noise: &mut Noise| {
            for _ in 0..10 {
                let ip = Ipv4Addr::from(0x0b00_0000 | (noise.next() as u32 & 0x00ff_ffff));
                let from = SocketAddr::new(IpAddr::V4(ip), 1024 + noise.next() as u16 % 60_000);
                door.inject(from, &mut noise.intro(door.intro_type()));
            }
        };
        door.run(Duration::from_secs(3), |door| flood(door, &mut noise));
        for i in 0..8u8 {
            door.connect_from(SocketAddr::from(([10, 0, 1, i], 4000)));
        }
        let start = door.sim.elapsed();
        let (connected, failed) = door.run(Duration::from_secs(8), |door| flood(door, &mut noise));
        let stats = door.server_stats();
        let seconds = door.sim.elapsed().as_secs_f64();
        let per_second = stats.intros_decrypted as f64 / seconds;
        let kind = door.public.kind();
        println!(
            "{} {kind} intros opened in {seconds:.1} s ({per_second:.0}/s), {} intros retried, \
             {connected} of 8 honest clients connected in {:?}",
            stats.intros_decrypted,
            stats.intros_retried,
            door.sim.elapsed() - start,
        );
        assert_eq!((connected, failed), (8, 0), "every honest client connects");
        let budget = budget();
        let ceiling = budget.total_rate as f64 * seconds + budget.total_burst as f64;
        assert!(
            (stats.intros_decrypted as f64) <= ceiling,
            "{} intros opened, budget {ceiling}",
            stats.intros_decrypted
        );
        assert!(
            stats.intros_retried > 10_000,
            "the flood was answered with Retries"
        );
        assert_eq!(
            stats.tokens_accepted, 8,
            "each client came back once, validated"
        );
    }
}

#[test]
fn a_peer_whose_address_a_flood_spoofs_still_connects() {
    for (salt, key) in (0u64..).zip(server_keys()) {
        let seed = Seed::from_env_or(2402);
        let mut door = Door::with_key(seed.value() + salt, EndpointConfig::default(), key);
        let mut noise = Noise(seed.value());
        let victim: SocketAddr = "10.0.3.3:4000".parse().expect("address");
        // 1 000 intros a second from the victim's address: from its very
        // port, and from the others of its IP.
        let flood = |door: &mut Door, noise: &mut Noise| {
            let port = match noise.next() % 2 {
                0 => victim.port(),
                _ => 1024 + noise.next() as u16 % 60_000,
            };
            door.inject(
                SocketAddr::new(victim.ip(), port),
                &mut noise.intro(door.intro_type()),
            );
        };
        door.run(Duration::from_secs(1), |door| flood(door, &mut noise));
        door.connect_from(victim);
        let (connected, _) = door.run(Duration::from_secs(9), |door| flood(door, &mut noise));
        assert_eq!(connected, 1, "the victim connects through the flood");
        let stats = door.server_stats();
        assert!(stats.intros_rate_limited > 1_000, "{stats:?}");
        assert_eq!(stats.tokens_accepted, 1);
    }
}

#[test]
fn every_connect_of_one_endpoint_to_one_server_gets_its_own_retry() {
    for (salt, key) in (0u64..).zip(server_keys()) {
        let seed = Seed::from_env_or(2406);
        let mut door = Door::with_key(seed.value() + salt, EndpointConfig::default(), key);
        let mut noise = Noise(seed.value());
        let client: SocketAddr = "10.0.5.5:4000".parse().expect("address");
        // A flood spoofed from the client's address keeps its source limit
        // spent: each of its connects gets in only with its own token.
        let flood = |door: &mut Door, noise: &mut Noise| {
            let from = SocketAddr::new(client.ip(), 1024 + noise.next() as u16 % 60_000);
            door.inject(from, &mut noise.intro(door.intro_type()));
        };
        door.run(Duration::from_millis(500), |door| flood(door, &mut noise));
        door.connect_from(client);
        door.connect_again(0);
        door.connect_again(0);
        let (connected, _) = door.run(Duration::from_secs(9), |door| flood(door, &mut noise));
        assert_eq!(connected, 3, "each connect is validated and gets in");
        assert_eq!(door.server_stats().tokens_accepted, 3);
    }
}

#[test]
fn five_hundred_clients_behind_one_address_all_connect() {
    for (salt, key) in (0u64..).zip(server_keys()) {
        let seed = Seed::from_env_or(2403);
        let mut door = Door::with_key(seed.value() + salt, EndpointConfig::default(), key);
        let nat = Ipv4Addr::new(10, 0, 9, 9);
        for i in 0..500u16 {
            door.connect_from(SocketAddr::new(IpAddr::V4(nat), 10_000 + i));
        }
        let (connected, failed) = door.run(Duration::from_secs(10), |_| {});
        let stats = door.server_stats();
        println!(
            "{connected} of 500 connected in {:?}; {} retried, {} intros opened",
            door.sim.elapsed(),
            stats.intros_retried,
            stats.intros_decrypted
        );
        assert_eq!((connected, failed), (500, 0));
        assert_eq!(stats.intros_accepted, 500);
    }
}

/// The server's next transmitted datagram, if any.
fn server_transmit(door: &mut Door) -> Option<(SocketAddr, Vec<u8>)> {
    let now = door.sim.now();
    let server = &mut door.sim.node_mut(door.server).0;
    let mut buf = vec![0u8; 2048];
    let transmit = server.poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf)?;
    buf.truncate(transmit.len);
    Some((transmit.destination, buf))
}

#[test]
fn forged_expired_stolen_and_truncated_tokens_are_refused_and_counted() {
    let seed = Seed::from_env_or(2404);
    // One unvalidated intro a second, in bursts of one, from anywhere.
    let mut limits = IntroLimiterConfig::default();
    limits.total_rate = 2;
    limits.total_burst = 2;
    limits.per_source_burst = 1;
    let mut door = Door::new(seed.value(), config_with(limits));
    let mut noise = Noise(seed.value());
    let from: SocketAddr = "192.0.2.10:777".parse().expect("address");
    // The first intro uses the unvalidated burst; the second gets a Retry.
    door.inject(from, &mut noise.intro(door.intro_type()));
    let intro = noise.intro(door.intro_type());
    door.inject(from, &mut intro.clone());
    let retry = std::iter::from_fn(|| server_transmit(&mut door))
        .find(|(to, d)| *to == from && d[0] == 0x40)
        .expect("a Retry to the source");
    let (id, token) = parse_retry(&retry.1).expect("a Retry");
    assert_eq!(id, tern_wire::intro_id(&intro));
    let before = door.server_stats();
    assert_eq!(before.intros_decrypted, 1);

    let with = |intro: &[u8], token: &[u8]| [intro, token].concat();
    let mut forged = token;
    forged[20] ^= 1;
    // Forged, for another intro, from another address, truncated.
    door.inject(from, &mut with(&intro, &forged));
    door.inject(from, &mut with(&noise.intro(door.intro_type()), &token));
    let thief: SocketAddr = "192.0.2.11:777".parse().expect("address");
    door.inject(thief, &mut with(&intro, &token));
    door.inject(from, &mut with(&intro, &token[..31]));
    let after = door.server_stats();
    assert_eq!(after.tokens_refused, 3, "{after:?}");
    assert_eq!(after.dropped_unroutable - before.dropped_unroutable, 1);
    assert_eq!(after.tokens_accepted, 0);
    assert_eq!(after.intros_decrypted, 1, "no RSA work for any of them");
    assert_eq!(after.intros_retried, 4, "each answered with a fresh Retry");

    // The genuine token, in time: decrypted (the noise then fails RSA).
    door.inject(from, &mut with(&intro, &token));
    let stats = door.server_stats();
    assert_eq!(stats.tokens_accepted, 1);
    assert_eq!(stats.intros_decrypted, 2);

    // Past its lifetime the token is refused, though it was good: the
    // source's refilled burst is spent first, so it is not let in anyway.
    let late = door.sim.now() + Duration::from_secs(11);
    let server = &mut door.sim.node_mut(door.server).0;
    server.handle_datagram(late, many_clients_server(), from, &mut noise.intro(0x10));
    server.handle_datagram(late, many_clients_server(), from, &mut with(&intro, &token));
    let stats = server.stats();
    assert_eq!(stats.tokens_refused, 4, "{stats:?}");
    assert_eq!(stats.intros_decrypted, 3);
}

/// An endpoint at `addr` with `identity`, seeded by `salt`.
fn endpoint(
    seed: u64,
    salt: u64,
    identity: tern_wire::IdentityKey,
    now: quanta::Instant,
) -> Endpoint {
    Endpoint::new(
        EndpointConfig::default(),
        Some(identity),
        seed_bytes(seed, salt),
        now,
        wall_start(),
    )
    .expect("config")
}

/// The first datagram `endpoint` sends (its intro).
fn first_transmit(endpoint: &mut Endpoint, now: quanta::Instant) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let sent = endpoint
        .poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf)
        .expect("the intro");
    buf.truncate(sent.len);
    buf
}

#[test]
fn a_simultaneous_open_from_an_impostor_does_not_take_over_the_connect() {
    let seed = Seed::from_env_or(2405);
    let a_addr: SocketAddr = "10.0.4.1:4000".parse().expect("address");
    let m_addr: SocketAddr = "10.0.4.2:5000".parse().expect("address");
    let mut sim: EndpointSim = Sim::new(SimConfig::seeded(seed.value()).with_default_link(
        LinkConfig {
            delay: Duration::from_millis(10),
            ..LinkConfig::default()
        },
    ));
    let now = sim.now();
    // A believes B, holding `expected`, is at `m_addr`; M is there, with
    // another key, and opens a connection to A at the same moment. M's
    // intro is chosen to have the smaller id: the one that would win a
    // tie-break between the two opens.
    let expected = third_identity().public();
    let (mut a, mut m, a_intro, m_intro, a_handle) = (0..64u64)
        .find_map(|salt| {
            let mut a = endpoint(seed.value(), salt, identity(), now);
            let mut m = endpoint(seed.value(), 1_000 + salt, other_identity(), now);
            let a_handle = a.connect(now, m_addr, &expected).expect("connect");
            let a_public = a.public().expect("identity");
            m.connect(now, a_addr, &a_public).expect("connect");
            let a_intro = first_transmit(&mut a, now);
            let m_intro = first_transmit(&mut m, now);
            (tern_wire::intro_id(&m_intro) < tern_wire::intro_id(&a_intro))
                .then_some((a, m, a_intro, m_intro, a_handle))
        })
        .expect("an impostor intro with the smaller id");
    a.handle_datagram(now, a_addr, m_addr, &mut m_intro.clone());
    m.handle_datagram(now, m_addr, a_addr, &mut a_intro.clone());
    let a_node = sim.add_node(OnSim(a), &[a_addr]).expect("address");
    sim.add_node(OnSim(m), &[m_addr]).expect("address");
    let mut outcome = None;
    let mut accepted = 0;
    while outcome.is_none() && sim.elapsed() < Duration::from_secs(15) {
        sim.run_for(Duration::from_millis(10));
        let a = &mut sim.node_mut(a_node).0;
        while let Some((handle, event)) = a.poll_event() {
            if handle == a_handle {
                match event {
                    Event::Connected => outcome = Some(Ok(())),
                    Event::Closed(e) => outcome = Some(Err(e)),
                    _ => {}
                }
            }
        }
        while a.accept().is_some() {
            accepted += 1;
        }
    }
    assert_eq!(
        outcome,
        Some(Err(ConnectionError::HandshakeTimedOut)),
        "the connect ends in a typed error, never in the impostor's connection"
    );
    assert_eq!(
        accepted, 1,
        "the impostor's own connection is an incoming one"
    );
}

/// A repeated intro (its reply was lost, or a forger replays it) is
/// answered with two copies of the stored reply, a second chance for a
/// way back that loses replies in bursts, and never with more than three
/// times the bytes the intro's address sent: one intro replayed 20 times
/// from a forged address gets at most 3 x 21 x 257 bytes.
#[test]
fn a_repeated_intro_gets_two_replies_within_three_times_its_bytes() {
    let (clock, mock) = quanta::Clock::mock();
    mock.increment(Duration::from_secs(1));
    let now = clock.now();
    let server_addr: SocketAddr = "10.0.5.1:4000".parse().expect("address");
    let forged: SocketAddr = "10.0.5.2:5000".parse().expect("address");
    let mut server = endpoint(2606, 1, identity(), now);
    let mut client = endpoint(2606, 2, other_identity(), now);
    let public = server.public().expect("identity");
    client.connect(now, server_addr, &public).expect("connect");
    let intro = first_transmit(&mut client, now);
    assert_eq!(intro.len(), INTRO_LEN);
    let (mut received, mut replies, mut reply_bytes) = (0, Vec::new(), 0);
    for _ in 0..21 {
        let mut datagram = intro.clone();
        server.handle_datagram(now, server_addr, forged, &mut datagram);
        received += intro.len();
        let mut buf = vec![0u8; 2048];
        let mut copies = 0;
        while let Some(t) = server.poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf) {
            assert_eq!(t.destination, forged);
            reply_bytes += t.len;
            copies += 1;
        }
        replies.push(copies);
        assert!(
            reply_bytes <= 3 * received,
            "{reply_bytes} bytes of replies for {received} bytes of intros"
        );
    }
    assert_eq!(replies[0], 1, "the first intro is answered once");
    assert_eq!(replies[1], 2, "a repeated intro twice: {replies:?}");
    assert_eq!(server.stats().intros_decrypted, 1);
}
