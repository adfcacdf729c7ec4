//! Rendezvous and hole punching through simulated NATs (RFC 4787
//! behaviours in tern-sim): a public endpoint introduces two peers behind
//! NATs; the asker connects to the address it is given, the other side
//! punches, and the pair connects directly wherever its two NATs allow it.
//! Every pair of NAT kinds at 0 and 2 % loss connects and carries 1 MB
//! intact: directly where the two NATs allow it, through the rendezvous's
//! relay otherwise (a symmetric NAT against a port-restricted or
//! symmetric one), which then forwards ciphertext it holds no key for.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::rendezvous::{ASKER, RENDEZVOUS, World, addr, direct_possible, key, kinds};
use support::{seed_bytes, wall_start};
use tern_proto::{
    ConnectionHandle, ConnectionPath, Endpoint, EndpointConfig, EndpointStats, Event, Node,
    PathPolicy, PublicIdentity, RefusalReason, RelayConfig, TransmitLimits,
};
use tern_sim::{NatConfig, NodeId, Seed};

#[test]
fn every_pair_of_nat_kinds_connects_directly_where_the_nats_allow_it_and_relayed_otherwise() {
    let seed = Seed::from_env_or(2501);
    let mut table = Vec::new();
    for loss in [0.0, 0.02] {
        for (a_name, a_nat) in kinds() {
            for (b_name, b_nat) in kinds() {
                let cell = format!("{a_name} -> {b_name}, loss {loss}");
                let mut world = World::new(seed.value(), a_nat.clone(), b_nat.clone(), loss);
                let (outcome, connected_in) = world.introduce(Duration::from_secs(30));
                let Event::Introduced { peer, connection } = outcome else {
                    panic!("{cell}: {outcome:?}");
                };
                assert_eq!(peer, world.target_key.fingerprint(), "{cell}");
                let proved = world
                    .endpoint(world.asker)
                    .connection(connection)
                    .and_then(|c| c.peer_identity().cloned());
                assert_eq!(proved.as_ref(), Some(&world.target_key), "{cell}");
                let path = world.endpoint(world.asker).path(connection);
                let relayed = matches!(path, Some(ConnectionPath::Relayed { via }) if via == addr(RENDEZVOUS));
                assert_eq!(
                    relayed,
                    !direct_possible(a_name, b_name),
                    "{cell}: {path:?}"
                );
                let (first_byte, all) = world.transfer(connection, 1 << 20);
                let how = if relayed { "relayed" } else { "direct" };
                // A relayed cell probes the direct way while it moves its
                // MB, and finds none: a symmetric NAT's port toward the
                // peer is one nobody saw.
                let went_direct = world.endpoint(world.asker).went_direct_after(connection);
                assert_eq!(went_direct, None, "{cell}");
                let direct_after = if relayed {
                    "no direct path".to_owned()
                } else {
                    format!("direct path after {connected_in:?}")
                };
                table.push(format!(
                    "{cell}: {how} in {connected_in:?}, {direct_after}, first byte {first_byte:?} \
                     after the stream opened ({:?} after the ask), 1 MB in {all:?}",
                    connected_in + first_byte
                ));
                let stats = world.endpoint(world.rendezvous).stats();
                assert_eq!(stats.introductions_made, 1, "{cell}");
                assert_eq!(stats.relay_pairs_made, u64::from(relayed), "{cell}");
                if relayed {
                    assert!(stats.relay_bytes_forwarded > 1 << 20, "{cell}: {stats:?}");
                }
            }
        }
    }
    println!("{}", table.join("\n"));
}

#[test]
fn an_unknown_key_is_refused_by_type_and_asking_too_often_is_capped() {
    let seed = Seed::from_env_or(2502);
    let mut world = World::new(
        seed.value(),
        NatConfig::full_cone(),
        NatConfig::full_cone(),
        0.0,
    );
    let asker_to_r = world.asker_to_r;
    // Not registered yet.
    let key = world.target_key.clone();
    world
        .endpoint(world.asker)
        .connect_via(asker_to_r, &key)
        .expect("asked");
    match world.introduction(Duration::from_secs(5)) {
        Event::IntroductionFailed { peer, reason } => {
            assert_eq!(peer, key.fingerprint());
            assert_eq!(reason, Some(RefusalReason::UnknownPeer));
        }
        other => panic!("{other:?}"),
    }
    // A burst of asks for keys nobody registered: past the rate, refused
    // as such.
    let mut reasons = Vec::new();
    for salt in 100..120 {
        let nobody = super_key(salt);
        world
            .endpoint(world.asker)
            .connect_via(asker_to_r, &nobody)
            .expect("asked");
    }
    let handle = world.asker_to_r;
    world.until(Duration::from_secs(5), |w| {
        while let Some((h, event)) = w.endpoint(w.asker).poll_event() {
            if let (true, Event::IntroductionFailed { reason, .. }) = (h == handle, event) {
                reasons.push(reason);
            }
        }
        reasons.len() == 20
    });
    let limited = reasons
        .iter()
        .filter(|r| **r == Some(RefusalReason::RateLimited))
        .count();
    assert!(limited >= 20 - 8, "{reasons:?}");
    let stats = world.endpoint(world.rendezvous).stats();
    assert_eq!(stats.introductions_made, 0);
    assert_eq!(stats.introductions_refused, 21);
}

/// Asserts that an introduction failed because the relay was full.
fn assert_relay_full(outcome: &Event) {
    assert!(
        matches!(
            outcome,
            Event::IntroductionFailed {
                reason: Some(RefusalReason::RelayFull),
                ..
            }
        ),
        "{outcome:?}"
    );
}

fn super_key(salt: u64) -> PublicIdentity {
    key(salt).public()
}

#[test]
fn a_punch_for_no_introduction_is_dropped_and_counted() {
    let seed = Seed::from_env_or(2503);
    let mut world = World::new(
        seed.value(),
        NatConfig::full_cone(),
        NatConfig::full_cone(),
        0.0,
    );
    let before = world.endpoint(world.asker).stats();
    let mut punch = tern_wire::write_punch(&[9; 8]);
    let now = world.sim.now();
    tern_proto::Node::handle_datagram(
        world.endpoint(world.asker),
        now,
        addr(ASKER),
        addr(RENDEZVOUS),
        &mut punch,
    );
    let after = world.endpoint(world.asker).stats();
    assert_eq!(after.punches_unknown, before.punches_unknown + 1);
    assert_eq!(after.punches_sent, 0);
}

/// A world whose asker and target are connected through the relay at
/// once ([`PathPolicy::RelayOnly`]), with the rendezvous relaying as
/// `relay` says; the asker's connection to the target.
fn relayed_world(seed: u64, relay: RelayConfig) -> (World, ConnectionHandle) {
    let full = NatConfig::full_cone();
    let mut world = World::with_relay(seed, full.clone(), full, 0.0, relay);
    let (outcome, _) = world.introduce_with(Duration::from_secs(10), PathPolicy::RelayOnly);
    let Event::Introduced { connection, .. } = outcome else {
        panic!("{outcome:?}");
    };
    (world, connection)
}

impl World {
    /// Has the asker send a message on `handle` and takes its datagram off
    /// the network before the simulation carries it: a relay packet.
    fn steal_relay_packet(&mut self, handle: ConnectionHandle) -> Vec<u8> {
        let now = self.sim.now();
        let endpoint = self.endpoint(self.asker);
        endpoint
            .connection(handle)
            .expect("open")
            .send_message(vec![7; 1000].into())
            .expect("room");
        let mut buf = vec![0; 1452];
        let limits = TransmitLimits::new(1, 1452);
        loop {
            let transmit = endpoint
                .poll_transmit(now, limits, &mut buf)
                .expect("a datagram");
            if buf[0] == tern_wire::RELAY_TYPE {
                return buf[..transmit.len].to_vec();
            }
        }
    }

    /// Hands `datagram` to `node` as if it came from `from`.
    fn deliver(&mut self, node: NodeId, from: SocketAddr, datagram: &[u8]) {
        let now = self.sim.now();
        let mut copy = datagram.to_vec();
        self.endpoint(node)
            .handle_datagram(now, addr(RENDEZVOUS), from, &mut copy);
    }

    /// The asker's address as the rendezvous sees it.
    fn asker_public(&mut self) -> SocketAddr {
        let handle = self.asker_to_r;
        let connection = self.endpoint(self.asker).connection(handle).expect("open");
        connection.observed_address().expect("learned")
    }

    fn relay_stats(&mut self) -> EndpointStats {
        self.endpoint(self.rendezvous).stats()
    }
}

#[test]
fn relay_only_skips_punching_and_the_relay_sees_only_what_it_forwards() {
    let seed = Seed::from_env_or(2504);
    let (mut world, connection) = relayed_world(seed.value(), RelayConfig::default());
    let path = world.endpoint(world.asker).path(connection);
    assert_eq!(
        path,
        Some(ConnectionPath::Relayed {
            via: addr(RENDEZVOUS)
        })
    );
    assert_eq!(world.endpoint(world.target).stats().punches_sent, 0);
    assert_eq!(world.relay_stats().introductions_made, 0);
    let (first_byte, _) = world.transfer(connection, 256 << 10);
    assert!(first_byte < Duration::from_millis(100), "{first_byte:?}");
    let stats = world.relay_stats();
    assert_eq!((stats.relay_pairs_made, stats.relay_pairs), (1, 1));
    assert!(stats.relay_bytes_forwarded > 256 << 10, "{stats:?}");
}

#[test]
fn a_relay_packet_from_another_address_than_its_slot_owner_is_dropped_and_counted() {
    let seed = Seed::from_env_or(2505);
    let (mut world, connection) = relayed_world(seed.value(), RelayConfig::default());
    let packet = world.steal_relay_packet(connection);
    let before = world.relay_stats();
    // Another peer (or a spoofer) names the asker's slot.
    world.deliver(world.rendezvous, addr("203.0.113.99:5555"), &packet);
    // A slot nobody was granted, from the owner's address.
    let owner = world.asker_public();
    let mut forged = packet.clone();
    forged[4] ^= 1;
    world.deliver(world.rendezvous, owner, &forged);
    // Short, slot 0, nested: not relay packets at all.
    for junk in [
        &[0x81, 0, 0, 0][..],
        &[0x81, 0, 0, 0, 0, 0x20],
        &[0x81, 0, 0, 0, 1, 0x81, 1],
    ] {
        world.deliver(world.rendezvous, owner, junk);
    }
    let after = world.relay_stats();
    assert_eq!(
        after.relay_dropped_not_owner,
        before.relay_dropped_not_owner + 1
    );
    assert_eq!(
        after.relay_dropped_unknown_slot,
        before.relay_dropped_unknown_slot + 4
    );
    assert_eq!(
        after.relay_packets_forwarded, before.relay_packets_forwarded,
        "nothing forwarded"
    );
    // The control: the same packet from its owner is forwarded.
    world.deliver(world.rendezvous, owner, &packet);
    let control = world.relay_stats();
    assert_eq!(
        control.relay_packets_forwarded,
        after.relay_packets_forwarded + 1
    );
    // And a peer drops a relay packet on a slot not granted to it.
    let target_before = world.endpoint(world.target).stats();
    world.deliver(world.target, addr(RENDEZVOUS), &forged);
    let target_after = world.endpoint(world.target).stats();
    assert_eq!(
        target_after.relay_dropped_unknown_slot,
        target_before.relay_dropped_unknown_slot + 1
    );
}

#[test]
fn a_flood_over_the_pairs_rate_is_dropped_and_counted_and_its_replays_are_taken_once() {
    let seed = Seed::from_env_or(2506);
    let mut relay = RelayConfig::default();
    relay.bytes_per_second = 200_000;
    let (mut world, connection) = relayed_world(seed.value(), relay);
    let packet = world.steal_relay_packet(connection);
    let owner = world.asker_public();
    world.sim.run_for(Duration::from_secs(1));
    let before = world.relay_stats();
    for _ in 0..1000 {
        world.deliver(world.rendezvous, owner, &packet);
    }
    let after = world.relay_stats();
    let forwarded = after.relay_packets_forwarded - before.relay_packets_forwarded;
    let dropped = after.relay_dropped_over_cap - before.relay_dropped_over_cap;
    assert_eq!(forwarded + dropped, 1000);
    // At most the bucket's burst (64 KiB) went on at once, and the pair's
    // queue (100 ms of the rate, at least 64 KiB) took what follows.
    let bytes = after.relay_bytes_forwarded - before.relay_bytes_forwarded;
    assert!(
        bytes <= 2 * 64 * 1024 + packet.len() as u64,
        "{bytes} bytes forwarded"
    );
    assert!(dropped > 850, "{dropped} dropped");
    // The target saw the replays of one packet, and took it once.
    world.sim.run_for(Duration::from_millis(200));
    let target = world.endpoint(world.target);
    let mut got = 0;
    while let Some(handle) = target.accept() {
        let connection = target.connection(handle).expect("open");
        got += std::iter::from_fn(|| connection.recv_message()).count();
    }
    assert_eq!(got, 1, "the message, once");
}

#[test]
fn a_relay_full_or_off_refuses_by_type_and_direct_only_fails_without_a_relay() {
    let seed = Seed::from_env_or(2507);
    let mut off = RelayConfig::default();
    off.max_pairs = 0;
    let full = NatConfig::full_cone();
    let mut world = World::with_relay(seed.value(), full.clone(), full, 0.0, off);
    let (outcome, _) = world.introduce_with(Duration::from_secs(5), PathPolicy::RelayOnly);
    assert_relay_full(&outcome);
    assert_eq!(world.relay_stats().relay_refused, 1);
    // A symmetric pair, direct only: no relay is asked for, and it fails.
    let symmetric = NatConfig::symmetric();
    let mut world = World::new(seed.value(), symmetric.clone(), symmetric, 0.0);
    let (outcome, took) = world.introduce_with(Duration::from_secs(30), PathPolicy::DirectOnly);
    assert!(
        matches!(outcome, Event::IntroductionFailed { reason: None, .. }),
        "{outcome:?}"
    );
    assert_eq!(world.relay_stats().relay_pairs_made, 0, "took {took:?}");
}

#[test]
fn an_idle_pair_is_forgotten_and_a_side_leaving_the_rendezvous_ends_its_pair() {
    let seed = Seed::from_env_or(2508);
    let mut relay = RelayConfig::default();
    relay.idle_timeout = Duration::from_secs(5);
    let (mut world, connection) = relayed_world(seed.value(), relay);
    assert_eq!(world.relay_stats().relay_pairs, 1);
    let now = world.sim.now();
    world.endpoint(world.asker).release(now, connection, 0);
    world.sim.run_for(Duration::from_secs(8));
    let stats = world.relay_stats();
    assert_eq!((stats.relay_pairs, stats.relay_pairs_expired), (0, 1));

    let (mut world, _) = relayed_world(seed.value(), RelayConfig::default());
    let (now, handle) = (world.sim.now(), world.asker_to_r);
    world.endpoint(world.asker).release(now, handle, 0);
    world.sim.run_for(Duration::from_secs(3));
    let stats = world.relay_stats();
    assert_eq!((stats.relay_pairs, stats.relay_pairs_expired), (0, 0));
}

#[test]
fn one_rendezvous_takes_at_most_a_quarter_of_a_peers_introductions() {
    let seed = Seed::from_env_or(2509);
    let full = NatConfig::full_cone();
    let mut world = World::new(seed.value(), full.clone(), full, 0.0);
    let (target_to_r, asker_to_r) = (world.target_to_r, world.asker_to_r);
    assert!(world.endpoint(world.target).register(target_to_r));
    world.sim.run_for(Duration::from_millis(100));
    // 24 introductions to the target within its introductions' lifetime,
    // at the rate the rendezvous grants (8 a second).
    let key = world.target_key.clone();
    for _ in 0..3 {
        for _ in 0..8 {
            world
                .endpoint(world.asker)
                .connect_via_with(asker_to_r, &key, PathPolicy::DirectOnly)
                .expect("asked");
            world.sim.run_for(Duration::from_millis(100));
        }
        world.sim.run_for(Duration::from_millis(300));
    }
    assert_eq!(world.relay_stats().introductions_made, 24);
    let target = world.endpoint(world.target).stats();
    assert_eq!(target.signals_unexpected, 24 - 16, "{target:?}");
}

#[test]
fn grants_a_rendezvous_sends_unasked_are_bounded_and_counted() {
    let mut attacker = support::attacker::Attacker::connect(EndpointConfig::default());
    // The endpoint registered with the attacker: it takes grants from it.
    let handle = attacker.handle;
    assert!(attacker.endpoint.register(handle));
    for slot in 1..=40u32 {
        attacker.send(&[tern_wire::Frame::RelayGrant(tern_wire::RelayGrant {
            slot,
            peer: tern_proto::KeyFingerprint([slot as u8; 32]),
            initiator: false,
        })]);
    }
    // And grants as if it had asked, which it did not.
    for slot in 100..110u32 {
        attacker.send(&[tern_wire::Frame::RelayGrant(tern_wire::RelayGrant {
            slot,
            peer: tern_proto::KeyFingerprint([1; 32]),
            initiator: true,
        })]);
    }
    attacker.turn();
    let stats = attacker.endpoint.stats();
    assert_eq!(stats.signals_unexpected, (40 - 16) + 10, "{stats:?}");
    assert_eq!(attacker.endpoint.len(), 1, "no connect started");
}

#[test]
fn a_forged_or_replayed_packet_from_elsewhere_moves_no_relayed_connection() {
    let seed = Seed::from_env_or(2510);
    let (mut world, connection) = relayed_world(seed.value(), RelayConfig::default());
    world.sim.run_for(Duration::from_millis(200));
    let target_conn = world.endpoint(world.target).accept().expect("accepted");
    let relayed = Some(ConnectionPath::Relayed {
        via: addr(RENDEZVOUS),
    });
    let packet = world.steal_relay_packet(connection);
    let inner = packet[tern_wire::RELAY_HEADER_LEN..].to_vec();
    let elsewhere = addr("203.0.113.99:5555");
    // A forged packet for the target's connection, straight from elsewhere.
    let mut forged = inner.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    world.deliver(world.target, elsewhere, &forged);
    let opened = |w: &mut World| {
        let target = w.endpoint(w.target);
        let stats = target.connection(target_conn).expect("open").stats();
        (stats.dropped_unauthenticated, stats.dropped_duplicates)
    };
    assert_eq!(opened(&mut world).0, 1, "dropped as unauthenticated");
    assert_eq!(world.endpoint(world.target).path(target_conn), relayed);
    // The packet itself through the relay, then a replay of it from
    // elsewhere (an attacker that saw it pass).
    let owner = world.asker_public();
    world.deliver(world.rendezvous, owner, &packet);
    world.sim.run_for(Duration::from_millis(100));
    let duplicates = opened(&mut world).1;
    world.deliver(world.target, elsewhere, &inner);
    assert_eq!(opened(&mut world).1, duplicates + 1, "dropped as a replay");
    assert_eq!(world.endpoint(world.target).path(target_conn), relayed);
    let target = world.endpoint(world.target);
    assert_eq!(
        target.connection(target_conn).expect("open").remote(),
        addr(RENDEZVOUS)
    );
    assert_eq!(target.stats().relayed_went_direct, 0);
    // The message the packet carried arrived once.
    let target = world.endpoint(world.target);
    let connection = target.connection(target_conn).expect("open");
    let got: Vec<_> = std::iter::from_fn(|| connection.recv_message()).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].len(), 1000);
}

#[test]
fn a_resumed_intro_refused_through_the_relay_is_told_so_and_falls_back_at_once() {
    let seed = Seed::from_env_or(2512);
    let (mut world, _first) = relayed_world(seed.value(), RelayConfig::default());
    world.sim.run_for(Duration::from_millis(500));
    // The rendezvous's ticket and the target's.
    assert_eq!(world.endpoint(world.asker).stats().tickets_received, 2);
    // The target restarts: the same key, a new ticket key; it connects to
    // the rendezvous and registers again.
    let now = world.sim.now();
    let mut restarted = Endpoint::new(
        EndpointConfig::default(),
        Some(key(3)),
        seed_bytes(seed.value(), 30),
        now,
        wall_start(),
    )
    .expect("config");
    let to_r = restarted
        .connect(now, addr(RENDEZVOUS), &key(1).public())
        .expect("connect");
    *world.endpoint(world.target) = restarted;
    world.target_to_r = to_r;
    world.until(Duration::from_secs(10), |w| w.connected(w.target, to_r));
    // The asker's relayed connect resumes with the old ticket; the
    // target refuses it, through the relay, and the asker sends a full
    // intro at once rather than waiting out its handshake timeout.
    let (outcome, took) = world.introduce_with(Duration::from_secs(5), PathPolicy::RelayOnly);
    assert!(matches!(outcome, Event::Introduced { .. }), "{outcome:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(world.endpoint(world.target).stats().resumptions_refused, 1);
    let asker = world.endpoint(world.asker).stats();
    assert_eq!((asker.connects_resumed, asker.resume_fallbacks), (1, 1));
}

/// The rendezvous's memory budget in the relay's budget tests: 1.5 MiB,
/// room for the credit of its four connections (256 KiB each), both
/// pairs' smallest backlogs (64 KiB each), and some 150 KiB more, less
/// than one pair's backlog at the default rate (400 kB).
const RELAY_BUDGET: u64 = 1536 * 1024;

/// A pair relaying as fast as a flood comes, past its rate, through a
/// rendezvous with a small memory budget: what the relay holds is
/// charged, the total never passes the budget, the packets
/// that do not fit are dropped and counted, and an honest pair relayed by
/// the same rendezvous still moves its data, within the smallest backlog
/// the budget keeps for it.
#[test]
fn a_flooding_pair_is_held_to_the_budget_and_an_honest_pair_still_moves_its_data() {
    let seed = Seed::from_env_or(2510);
    let mut r_config = EndpointConfig::default();
    r_config.memory_budget = RELAY_BUDGET;
    let full = NatConfig::full_cone();
    let mut world = World::build_with(seed.value(), full.clone(), Some(full), 0.0, r_config, false);
    let (outcome, _) = world.introduce_with(Duration::from_secs(10), PathPolicy::RelayOnly);
    let Event::Introduced {
        connection: flooder,
        ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    // The honest pair, on the public side, relayed by the same rendezvous.
    let (asker, asker_to_r, _) = world.add_peer(20, "203.0.113.20:4000");
    let (target, target_to_r, target_key) = world.add_peer(21, "203.0.113.21:4000");
    assert!(world.endpoint(target).register(target_to_r));
    world.sim.run_for(Duration::from_millis(100));
    world
        .endpoint(asker)
        .connect_via_with(asker_to_r, &target_key, PathPolicy::RelayOnly)
        .expect("asked");
    let outcome = world.introduction_on(asker, asker_to_r, Duration::from_secs(10));
    let Event::Introduced {
        connection: honest, ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(world.relay_stats().relay_pairs, 2);
    // A burst of a thousand copies of one of the flooder's packets, from
    // its address: what the relay takes in is held until it is sent.
    let packet = world.steal_relay_packet(flooder);
    let owner = world.asker_public();
    let before = world.relay_stats();
    for _ in 0..1000 {
        world.deliver(world.rendezvous, owner, &packet);
    }
    let after = world.relay_stats();
    let taken = after.relay_bytes_forwarded - before.relay_bytes_forwarded;
    let charged = after.memory_charged - before.memory_charged;
    let over_budget = after.relay_dropped_over_budget - before.relay_dropped_over_budget;
    eprintln!(
        "burst: took {taken} bytes, charged {charged} more ({} in all), {over_budget} dropped \
         over the budget, {} over the pair's backlog",
        after.memory_charged,
        after.relay_dropped_over_cap - before.relay_dropped_over_cap
    );
    assert!(after.memory_charged <= RELAY_BUDGET, "{after:?}");
    assert!(over_budget > 0, "nothing dropped for the budget");
    // Charged as it arrived, but for the smallest backlog kept for the
    // pair (and spare buffers taken back into use).
    assert!(
        taken <= charged + 2 * 64 * 1024,
        "took {taken}, charged {charged}"
    );
    // The honest pair moves 256 KiB while the flood goes on.
    let mut peak = 0;
    let (_, took) = world.transfer_between([asker, target], honest, 256 << 10, |w| {
        for _ in 0..20 {
            w.deliver(w.rendezvous, owner, &packet);
        }
        peak = peak.max(w.relay_stats().memory_charged);
    });
    let stats = world.relay_stats();
    eprintln!(
        "honest pair: 256 KiB in {took:?}; charged at most {peak}; dropped {} over the \
         budget, {} over the pair's backlog",
        stats.relay_dropped_over_budget, stats.relay_dropped_over_cap
    );
    assert!(peak <= RELAY_BUDGET, "charged {peak}");
    assert!(stats.relay_dropped_over_budget > after.relay_dropped_over_budget);
    assert_eq!(stats.memory_budget_closes, 0);
}

/// A rendezvous whose memory budget has no room for a new pair's smallest
/// backlog refuses it as a full relay does, and the asker is told so.
#[test]
fn a_relay_without_room_in_its_budget_refuses_a_new_pair_as_full() {
    let seed = Seed::from_env_or(2511);
    let mut r_config = EndpointConfig::default();
    // Seven eighths of it, 560 KiB, is about the credit its two
    // connections hold (256 KiB each): less than 64 KiB left.
    r_config.memory_budget = 640 * 1024;
    let full = NatConfig::full_cone();
    let mut world = World::build_with(seed.value(), full.clone(), Some(full), 0.0, r_config, false);
    let (outcome, _) = world.introduce_with(Duration::from_secs(5), PathPolicy::RelayOnly);
    assert_relay_full(&outcome);
    let stats = world.relay_stats();
    assert_eq!((stats.relay_refused, stats.relay_pairs_made), (1, 0));
    assert!(stats.memory_charged <= 640 * 1024, "{stats:?}");
}
