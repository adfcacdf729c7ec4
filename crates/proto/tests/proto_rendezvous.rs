//! Rendezvous and hole punching through simulated NATs (RFC 4787
//! behaviours in tern-sim): a public endpoint introduces two peers behind
//! NATs; the asker connects to the address it is given, the other side
//! punches, and the pair connects directly wherever its two NATs allow it.
//! Every pair of NAT kinds at 0 and 2 % loss: the cells that allow a
//! direct path connect and carry 1 MB intact; the others (a symmetric NAT
//! against a port-restricted or symmetric one) end in a typed failure, in
//! bounded time — the relay's cases.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use support::{EndpointSim, OnSim, seed_bytes, wall_start};
use tern_proto::{
    ConnectionHandle, Endpoint, EndpointConfig, Event, IdentityKey, PublicIdentity, ReadOutcome,
    RefusalReason,
};
use tern_sim::{LinkConfig, NatConfig, NodeId, Seed, Sim, SimConfig};

const RENDEZVOUS: &str = "198.51.100.10:7000";
const ASKER: &str = "192.168.1.2:4000";
const TARGET: &str = "192.168.2.2:4000";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("an address")
}

fn key(seed: u64) -> IdentityKey {
    IdentityKey::generate_x25519(&mut ChaCha20Rng::seed_from_u64(seed))
}

/// A rendezvous on the public side, the asker and the target each behind
/// a NAT of its own, both connected to the rendezvous.
struct World {
    sim: EndpointSim,
    rendezvous: NodeId,
    asker: NodeId,
    target: NodeId,
    /// The asker's and the target's connections to the rendezvous.
    asker_to_r: ConnectionHandle,
    target_to_r: ConnectionHandle,
    target_key: PublicIdentity,
}

impl World {
    fn new(seed: u64, asker_nat: NatConfig, target_nat: NatConfig, loss: f64) -> Self {
        let link = LinkConfig {
            delay: Duration::from_millis(10),
            loss,
            ..LinkConfig::default()
        };
        let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
        let now = sim.now();
        let config = EndpointConfig::default();
        let endpoint = |identity: IdentityKey, salt| {
            Endpoint::new(
                config,
                Some(identity),
                seed_bytes(seed, salt),
                now,
                wall_start(),
            )
            .expect("config")
        };
        let r_key = key(1).public();
        let target_key = key(3).public();
        let mut asker = endpoint(key(2), 2);
        let mut target = endpoint(key(3), 3);
        let asker_to_r = asker
            .connect(now, addr(RENDEZVOUS), &r_key)
            .expect("connect");
        let target_to_r = target
            .connect(now, addr(RENDEZVOUS), &r_key)
            .expect("connect");
        let rendezvous = sim
            .add_node(OnSim(endpoint(key(1), 1)), &[addr(RENDEZVOUS)])
            .expect("address");
        let nat_a = sim.add_nat(asker_nat, "203.0.113.1".parse().expect("ip"));
        let nat_b = sim.add_nat(target_nat, "203.0.113.2".parse().expect("ip"));
        let asker = sim
            .add_node_behind(nat_a, OnSim(asker), &[addr(ASKER)])
            .expect("address");
        let target = sim
            .add_node_behind(nat_b, OnSim(target), &[addr(TARGET)])
            .expect("address");
        let mut world = Self {
            sim,
            rendezvous,
            asker,
            target,
            asker_to_r,
            target_to_r,
            target_key,
        };
        world.until(Duration::from_secs(10), |w| {
            w.connected(w.asker, w.asker_to_r) && w.connected(w.target, w.target_to_r)
        });
        world
    }

    fn endpoint(&mut self, node: NodeId) -> &mut Endpoint {
        &mut self.sim.node_mut(node).0
    }

    fn connected(&mut self, node: NodeId, handle: ConnectionHandle) -> bool {
        self.endpoint(node)
            .connection(handle)
            .is_some_and(|c| c.peer_identity().is_some() && c.is_established())
    }

    fn until(&mut self, deadline: Duration, mut done: impl FnMut(&mut Self) -> bool) {
        let end = self.sim.elapsed() + deadline;
        while !done(self) {
            assert!(self.sim.elapsed() <= end, "not done in {deadline:?}");
            assert!(self.sim.step(), "the simulation went quiet");
        }
    }

    /// The next introduction outcome on the asker's rendezvous connection.
    fn introduction(&mut self, deadline: Duration) -> Event {
        let mut outcome = None;
        let handle = self.asker_to_r;
        self.until(deadline, |w| {
            while let Some((h, event)) = w.endpoint(w.asker).poll_event() {
                if h == handle
                    && matches!(
                        event,
                        Event::Introduced { .. } | Event::IntroductionFailed { .. }
                    )
                {
                    outcome = Some(event);
                }
            }
            outcome.is_some()
        });
        outcome.expect("an outcome")
    }

    /// Registers the target, then asks for it from the asker: the outcome,
    /// and the virtual time from the ask to it.
    fn introduce(&mut self, deadline: Duration) -> (Event, Duration) {
        let (target_to_r, asker_to_r) = (self.target_to_r, self.asker_to_r);
        assert!(self.endpoint(self.target).register(target_to_r));
        self.sim.run_for(Duration::from_millis(100));
        let asked_at = self.sim.elapsed();
        let key = self.target_key.clone();
        self.endpoint(self.asker)
            .connect_via(asker_to_r, &key)
            .expect("asked");
        let outcome = self.introduction(deadline);
        (outcome, self.sim.elapsed() - asked_at)
    }

    /// Sends `len` bytes on a stream from the asker's `handle` and reads
    /// them on the target; returns them and the virtual time to the first.
    fn transfer(&mut self, handle: ConnectionHandle, len: usize) -> (Vec<u8>, Duration) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + (i >> 10)) as u8).collect();
        let stream = self
            .endpoint(self.asker)
            .connection(handle)
            .and_then(|c| c.open_stream())
            .expect("a stream");
        let (start, mut first) = (self.sim.elapsed(), None);
        let (mut sent, mut got, mut incoming) = (0, Vec::new(), None);
        let mut buf = vec![0; 64 * 1024];
        self.until(Duration::from_secs(60), |w| {
            let connection = w.endpoint(w.asker).connection(handle).expect("open");
            while sent < len {
                match connection.write(stream, &data[sent..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sent += n,
                }
            }
            if sent == len {
                let _ = connection.finish(stream);
            }
            let elapsed = w.sim.elapsed();
            let target = w.endpoint(w.target);
            while incoming.is_none() {
                let Some(accepted) = target.accept() else {
                    break;
                };
                incoming = Some(accepted);
            }
            let Some(conn) = incoming.and_then(|h| target.connection(h)) else {
                return false;
            };
            let _ = conn.accept_stream();
            while let Ok(ReadOutcome::Read(n)) = conn.read(stream, &mut buf) {
                if n == 0 {
                    break;
                }
                first = first.or(Some(elapsed - start));
                got.extend_from_slice(&buf[..n]);
            }
            got.len() >= len
        });
        assert_eq!(got, data, "1 MB intact");
        (got, first.unwrap_or_default())
    }
}

fn kinds() -> [(&'static str, NatConfig); 4] {
    [
        ("full cone", NatConfig::full_cone()),
        ("restricted cone", NatConfig::restricted_cone()),
        ("port-restricted", NatConfig::port_restricted_cone()),
        ("symmetric", NatConfig::symmetric()),
    ]
}

/// Whether the asker behind `asker` can reach the target behind `target`
/// directly: a symmetric NAT's new port for the peer passes only a filter
/// that does not look at ports, on the other side.
fn direct_possible(asker: &str, target: &str) -> bool {
    !matches!(
        (asker, target),
        ("symmetric", "port-restricted" | "symmetric") | ("port-restricted", "symmetric")
    )
}

#[test]
fn every_pair_of_nat_kinds_connects_directly_where_the_nats_allow_it() {
    let seed = Seed::from_env_or(2501);
    let mut table = Vec::new();
    for loss in [0.0, 0.02] {
        for (a_name, a_nat) in kinds() {
            for (b_name, b_nat) in kinds() {
                let cell = format!("{a_name} -> {b_name}, loss {loss}");
                let mut world = World::new(seed.value(), a_nat.clone(), b_nat.clone(), loss);
                let (outcome, connected_in) = world.introduce(Duration::from_secs(30));
                match outcome {
                    Event::Introduced { peer, connection } => {
                        assert!(
                            direct_possible(a_name, b_name),
                            "{cell}: unexpectedly direct"
                        );
                        assert_eq!(peer, world.target_key.fingerprint(), "{cell}");
                        let proved = world
                            .endpoint(world.asker)
                            .connection(connection)
                            .and_then(|c| c.peer_identity().cloned());
                        assert_eq!(proved.as_ref(), Some(&world.target_key), "{cell}");
                        let (_, first_byte) = world.transfer(connection, 1 << 20);
                        table.push(format!(
                            "{cell}: direct in {connected_in:?}, first byte {first_byte:?} later"
                        ));
                    }
                    Event::IntroductionFailed { reason, .. } => {
                        assert!(!direct_possible(a_name, b_name), "{cell}: failed");
                        assert_eq!(reason, None, "{cell}: the rendezvous did introduce");
                        table.push(format!("{cell}: no direct path ({connected_in:?})"));
                    }
                    other => panic!("{cell}: {other:?}"),
                }
                let stats = world.endpoint(world.rendezvous).stats();
                assert_eq!(stats.introductions_made, 1, "{cell}");
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
