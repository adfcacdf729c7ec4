//! NATs in the simulated network: each owns a public IP address and keeps
//! a private realm of nodes behind it.
//!
//! A node behind a NAT reaches the nodes of its own realm directly, and
//! everything else through the NAT, which gives its datagrams a public
//! source address. Datagrams to a NAT's public address cross a link to the
//! NAT and are judged on arrival, so two datagrams that cross in flight
//! (a simultaneous open) see the mappings made meanwhile. Behind the NAT,
//! the realm is a perfect network without delay.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use rand_core_010::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::{AddressInUse, Hop, Kind, NodeId, Sim};
use crate::link::{DropReason, LinkConfig};
use crate::nat::{Nat, NatConfig};
use crate::node::Node;
use crate::trace::TraceKind;

/// A NAT's handle in its simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NatId(pub usize);

/// The index that stands for a NAT's public side as the far end of a link
/// (node indices count up from zero, these down from the top).
pub(super) fn link_end(nat: usize) -> usize {
    usize::MAX - nat
}

impl<N: Node> Sim<N> {
    /// Adds a NAT whose public side has the address `public_ip`: every
    /// datagram to that address, whatever its port, goes to the NAT (a node
    /// with an address on that IP is no longer reachable from outside).
    pub fn add_nat(&mut self, config: NatConfig, public_ip: IpAddr) -> NatId {
        let id = self.nats.len();
        let stream = 0x4e41_5400_u64 ^ id as u64;
        let rng =
            Pcg64Mcg::seed_from_u64(self.config.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        self.nats.push(Nat::new(config, public_ip, rng));
        self.nat_by_ip.insert(public_ip, id);
        NatId(id)
    }

    /// Adds `node` with its private addresses behind `nat`. Only the nodes
    /// behind the same NAT reach these addresses directly.
    ///
    /// # Panics
    /// If `nat` is not a NAT of this simulation.
    pub fn add_node_behind(
        &mut self,
        nat: NatId,
        node: N,
        addrs: &[SocketAddr],
    ) -> Result<NodeId, AddressInUse> {
        assert!(nat.0 < self.nats.len(), "tern-sim: no NAT {}", nat.0);
        self.add_node_in(Some(nat.0), node, addrs)
    }

    /// A NAT: its mappings, behaviour and counters.
    pub fn nat(&self, id: NatId) -> &Nat {
        &self.nats[id.0]
    }

    /// A NAT, to ask what it maps now ([`Nat::mapped`] forgets what expired).
    pub fn nat_mut(&mut self, id: NatId) -> &mut Nat {
        &mut self.nats[id.0]
    }

    /// The link from node `from` to the public side of `nat` goes down
    /// `after` from now, for `length` (one direction: a path that opens
    /// later).
    pub fn schedule_partition_to_nat(
        &mut self,
        from: NodeId,
        nat: NatId,
        after: Duration,
        length: Duration,
    ) {
        let (from, to) = (from.0, link_end(nat.0));
        let down = self.now() + after;
        for (at, down) in [(down, true), (down + length, false)] {
            self.schedule(at, Kind::LinkDown { from, to, down });
        }
    }

    /// Sets the link from node `from` to the public side of `nat` (one
    /// direction); the way back is the link from the nodes behind it.
    pub fn set_link_to_nat(&mut self, from: NodeId, nat: NatId, config: LinkConfig) {
        let key = (from.0, link_end(nat.0));
        self.link_configs.insert(key, config);
        if let Some(link) = self.links.get_mut(&key) {
            link.config = config;
        }
    }

    /// The address a datagram from node `id`, leaving from `source`, shows
    /// on the way to `destination`: translated by the node's NAT unless the
    /// destination is in its own realm.
    pub(super) fn through_nat(
        &mut self,
        id: usize,
        source: SocketAddr,
        destination: SocketAddr,
    ) -> Result<SocketAddr, DropReason> {
        let Some(nat) = self.nodes[id].nat else {
            return Ok(source);
        };
        let in_realm = self
            .routes
            .get(&destination)
            .is_some_and(|&(node, _)| self.nodes[node].nat == Some(nat));
        if in_realm && !self.nat_by_ip.contains_key(&destination.ip()) {
            return Ok(source);
        }
        let now = self.now();
        let nat = &mut self.nats[nat];
        // RFC 4787 §6: hairpinning lets "two endpoints on the internal side
        // of the NAT" talk "using each other's external IP addresses and ports".
        if destination.ip() == nat.public_ip() && !nat.config().hairpinning {
            return Err(DropReason::NatHairpin);
        }
        nat.outbound(now, source, destination)
            .ok_or(DropReason::NatPortsExhausted)
    }

    /// Where a datagram from node `id` to `destination` goes, if it may.
    pub(super) fn hop(&self, id: usize, destination: SocketAddr) -> Option<Hop> {
        if let Some(&nat) = self.nat_by_ip.get(&destination.ip()) {
            return Some(Hop::Nat {
                nat,
                port: destination.port(),
            });
        }
        let &(node, local) = self.routes.get(&destination)?;
        let realm = self.nodes[node].nat;
        (realm.is_none() || realm == self.nodes[id].nat).then_some(Hop::Node { node, local })
    }

    /// A datagram from `from` reached the public `port` of `nat`: it goes on
    /// to the private node the NAT admits it to, or is dropped.
    pub(super) fn arrive_at_nat(
        &mut self,
        nat: usize,
        port: u16,
        from: SocketAddr,
        datagram: Vec<u8>,
    ) {
        let now = self.now();
        let public = SocketAddr::new(self.nats[nat].public_ip(), port);
        let to = self.nats[nat]
            .inbound(now, port, from)
            .and_then(|private| self.routes.get(&private).copied())
            .filter(|&(node, _)| self.nodes[node].nat == Some(nat));
        match to {
            Some((node, local)) => self.deliver(node, local, public, from, datagram),
            None => {
                self.record(
                    TraceKind::Dropped(DropReason::NatFiltered),
                    from,
                    public,
                    datagram.len(),
                );
                self.pool.push(datagram);
            }
        }
    }
}
