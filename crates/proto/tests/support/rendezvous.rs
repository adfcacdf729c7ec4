//! A rendezvous world in tern-sim: a public rendezvous, and two peers
//! each behind a NAT of its own, connected to it; introductions, and
//! transfers between the two.

use std::net::SocketAddr;
use std::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use tern_proto::{
    ConnectionHandle, Endpoint, EndpointConfig, Event, IdentityKey, PathPolicy, PublicIdentity,
    ReadOutcome, RelayConfig,
};
use tern_sim::{LinkConfig, NatConfig, NatId, NodeId, Sim, SimConfig};

use super::{EndpointSim, OnSim, seed_bytes, wall_start};

pub const RENDEZVOUS: &str = "198.51.100.10:7000";
pub const ASKER: &str = "192.168.1.2:4000";
pub const TARGET: &str = "192.168.2.2:4000";
/// The target's address when it sits behind the asker's NAT.
pub const NEIGHBOUR: &str = "192.168.1.3:4000";

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("an address")
}

pub fn key(seed: u64) -> IdentityKey {
    IdentityKey::generate_x25519(&mut ChaCha20Rng::seed_from_u64(seed))
}

/// A rendezvous on the public side, the asker and the target each behind
/// a NAT of its own, both connected to the rendezvous.
pub struct World {
    pub sim: EndpointSim,
    pub rendezvous: NodeId,
    pub asker: NodeId,
    pub target: NodeId,
    /// The asker's and the target's connections to the rendezvous.
    pub asker_to_r: ConnectionHandle,
    pub target_to_r: ConnectionHandle,
    pub target_key: PublicIdentity,
    /// The asker's NAT and the target's.
    pub nats: [NatId; 2],
}

impl World {
    pub fn new(seed: u64, asker_nat: NatConfig, target_nat: NatConfig, loss: f64) -> Self {
        Self::with_relay(seed, asker_nat, target_nat, loss, RelayConfig::default())
    }

    /// [`new`](Self::new), the rendezvous relaying as `relay` says.
    pub fn with_relay(
        seed: u64,
        asker_nat: NatConfig,
        target_nat: NatConfig,
        loss: f64,
        relay: RelayConfig,
    ) -> Self {
        Self::build(seed, asker_nat, Some(target_nat), loss, relay, false)
    }

    /// The asker and the target behind one NAT (the target at
    /// [`NEIGHBOUR`]), each naming its own address as its local candidate
    /// if `candidates`.
    pub fn behind_one_nat(seed: u64, nat: NatConfig, loss: f64, candidates: bool) -> Self {
        Self::build(seed, nat, None, loss, RelayConfig::default(), candidates)
    }

    /// A world: the target behind a NAT of its own, or the asker's if
    /// `target_nat` is `None`; each peer names its own address as its
    /// local candidate if `candidates`.
    pub fn build(
        seed: u64,
        asker_nat: NatConfig,
        target_nat: Option<NatConfig>,
        loss: f64,
        relay: RelayConfig,
        candidates: bool,
    ) -> Self {
        let mut rendezvous = EndpointConfig::default();
        rendezvous.relay = relay;
        Self::build_with(seed, asker_nat, target_nat, loss, rendezvous, candidates)
    }

    /// [`build`](Self::build), the rendezvous configured as `r_config`
    /// says.
    pub fn build_with(
        seed: u64,
        asker_nat: NatConfig,
        target_nat: Option<NatConfig>,
        loss: f64,
        r_config: EndpointConfig,
        candidates: bool,
    ) -> Self {
        let target_address = addr(if target_nat.is_some() {
            TARGET
        } else {
            NEIGHBOUR
        });
        let link = LinkConfig {
            delay: Duration::from_millis(10),
            loss,
            ..LinkConfig::default()
        };
        let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
        let now = sim.now();
        let config = EndpointConfig::default();
        let endpoint = |identity: IdentityKey, salt, local: SocketAddr| {
            let mut config = config;
            if candidates {
                config.local_candidates.push(local);
            }
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
        let mut asker = endpoint(key(2), 2, addr(ASKER));
        let mut target = endpoint(key(3), 3, target_address);
        let asker_to_r = asker
            .connect(now, addr(RENDEZVOUS), &r_key)
            .expect("connect");
        let target_to_r = target
            .connect(now, addr(RENDEZVOUS), &r_key)
            .expect("connect");
        let r_endpoint = Endpoint::new(
            r_config,
            Some(key(1)),
            seed_bytes(seed, 1),
            now,
            wall_start(),
        )
        .expect("config");
        let rendezvous = sim
            .add_node(OnSim(r_endpoint), &[addr(RENDEZVOUS)])
            .expect("address");
        let nat_a = sim.add_nat(asker_nat, "203.0.113.1".parse().expect("ip"));
        let nat_b = match target_nat {
            Some(nat) => sim.add_nat(nat, "203.0.113.2".parse().expect("ip")),
            None => nat_a,
        };
        let asker = sim
            .add_node_behind(nat_a, OnSim(asker), &[addr(ASKER)])
            .expect("address");
        let target = sim
            .add_node_behind(nat_b, OnSim(target), &[target_address])
            .expect("address");
        let mut world = Self {
            sim,
            rendezvous,
            asker,
            target,
            asker_to_r,
            target_to_r,
            target_key,
            nats: [nat_a, nat_b],
        };
        world.until(Duration::from_secs(10), |w| {
            w.connected(w.asker, w.asker_to_r) && w.connected(w.target, w.target_to_r)
        });
        world
    }

    /// Another peer with key `key(salt)`, on the public side at `address`
    /// (no NAT), connected to the rendezvous: its node, its connection to
    /// the rendezvous and its key.
    pub fn add_peer(
        &mut self,
        salt: u64,
        address: &str,
    ) -> (NodeId, ConnectionHandle, PublicIdentity) {
        let now = self.sim.now();
        let mut endpoint = Endpoint::new(
            EndpointConfig::default(),
            Some(key(salt)),
            seed_bytes(salt, salt),
            now,
            wall_start(),
        )
        .expect("config");
        let r_key = key(1).public();
        let to_r = endpoint
            .connect(now, addr(RENDEZVOUS), &r_key)
            .expect("connect");
        let node = self
            .sim
            .add_node(OnSim(endpoint), &[addr(address)])
            .expect("address");
        self.until(Duration::from_secs(10), |w| w.connected(node, to_r));
        (node, to_r, key(salt).public())
    }

    pub fn endpoint(&mut self, node: NodeId) -> &mut Endpoint {
        &mut self.sim.node_mut(node).0
    }

    pub fn connected(&mut self, node: NodeId, handle: ConnectionHandle) -> bool {
        self.endpoint(node)
            .connection(handle)
            .is_some_and(|c| c.peer_identity().is_some() && c.is_established())
    }

    pub fn until(&mut self, deadline: Duration, mut done: impl FnMut(&mut Self) -> bool) {
        let end = self.sim.elapsed() + deadline;
        while !done(self) {
            assert!(self.sim.elapsed() <= end, "not done in {deadline:?}");
            assert!(self.sim.step(), "the simulation went quiet");
        }
    }

    /// The next introduction outcome on the asker's rendezvous connection.
    pub fn introduction(&mut self, deadline: Duration) -> Event {
        self.introduction_on(self.asker, self.asker_to_r, deadline)
    }

    /// The next introduction outcome on `node`'s rendezvous connection
    /// `handle`.
    pub fn introduction_on(
        &mut self,
        node: NodeId,
        handle: ConnectionHandle,
        deadline: Duration,
    ) -> Event {
        let mut outcome = None;
        self.until(deadline, |w| {
            while let Some((h, event)) = w.endpoint(node).poll_event() {
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
    pub fn introduce(&mut self, deadline: Duration) -> (Event, Duration) {
        self.introduce_with(deadline, PathPolicy::default())
    }

    /// [`introduce`](Self::introduce) on the paths `policy` allows.
    pub fn introduce_with(&mut self, deadline: Duration, policy: PathPolicy) -> (Event, Duration) {
        let (target_to_r, asker_to_r) = (self.target_to_r, self.asker_to_r);
        assert!(self.endpoint(self.target).register(target_to_r));
        self.sim.run_for(Duration::from_millis(100));
        let asked_at = self.sim.elapsed();
        let key = self.target_key.clone();
        self.endpoint(self.asker)
            .connect_via_with(asker_to_r, &key, policy)
            .expect("asked");
        let outcome = self.introduction(deadline);
        (outcome, self.sim.elapsed() - asked_at)
    }

    /// Sends `len` bytes on a stream from the asker's `handle` and reads
    /// them on the target; returns the virtual time to the first and to
    /// the last.
    pub fn transfer(&mut self, handle: ConnectionHandle, len: usize) -> (Duration, Duration) {
        self.transfer_between([self.asker, self.target], handle, len, |_| {})
    }

    /// [`transfer`](Self::transfer) from `nodes[0]`'s `handle` to
    /// `nodes[1]`, calling `each_step` before each step of the simulation.
    pub fn transfer_between(
        &mut self,
        [from, to]: [NodeId; 2],
        handle: ConnectionHandle,
        len: usize,
        mut each_step: impl FnMut(&mut Self),
    ) -> (Duration, Duration) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + (i >> 10)) as u8).collect();
        let stream = self
            .endpoint(from)
            .connection(handle)
            .and_then(|c| c.open_stream())
            .expect("a stream");
        let (start, mut first) = (self.sim.elapsed(), None);
        let (mut sent, mut got, mut incoming) = (0, Vec::new(), None);
        let mut buf = vec![0; 64 * 1024];
        self.until(Duration::from_secs(60), |w| {
            each_step(w);
            let connection = w.endpoint(from).connection(handle).expect("open");
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
            let target = w.endpoint(to);
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
        assert_eq!(got, data, "intact");
        (first.unwrap_or_default(), self.sim.elapsed() - start)
    }
}

pub fn kinds() -> [(&'static str, NatConfig); 4] {
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
pub fn direct_possible(asker: &str, target: &str) -> bool {
    !matches!(
        (asker, target),
        ("symmetric", "port-restricted" | "symmetric") | ("port-restricted", "symmetric")
    )
}
