//! The relay, on the rendezvous's side: it forwards the packets of two of
//! its peers that found no direct path, without their keys (wire format
//! §5.15).
//!
//! A peer that proved its identity asks with a RelayRequest naming a key
//! registered here; the rendezvous grants each side a slot of its own, a
//! random 32-bit number it tells only that side. A relay packet is
//! forwarded only if its slot is live and it came from the address of the
//! connection that slot was granted on; the slot is then swapped for the
//! other side's and the packet goes to the other side's address, the
//! carried datagram untouched (it is sealed under keys the rendezvous
//! never sees). Each pair has a byte rate: what comes faster waits in the
//! pair's own queue, up to [`BACKLOG`] of its rate, so that a sender above
//! it first sees delay (which LEDBAT backs off from) and only then loss.
//! Pairs are capped in number ([`RelayConfig`]), and a pair is forgotten
//! when it was idle for `idle_timeout` or when either side's connection
//! here closes. Whatever is not forwarded is counted by why.
//!
//! What the relay holds is charged to the endpoint's memory budget
//! (`budget`), with its connections: each pair the packets it holds
//! (waiting for its rate or in the shared queue: their buffers and queue
//! entries), but at least its smallest backlog ([`MIN_BACKLOG`]), kept for
//! it from the moment it is granted, plus the spare buffers. A pair is
//! granted only if that smallest backlog fits below the budget's high
//! water, or refused as when the relay is full; a packet past it is
//! forwarded only if the budget has room for it, or dropped and counted,
//! as a full router drops. So a pair flooding past its rate takes the
//! budget's room, never the smallest backlog of another pair.

use std::collections::VecDeque;
use std::net::SocketAddr;

use quanta::Instant;
use rand_core::RngCore;
use rustc_hash::FxHashMap;
use tern_congestion::{Take, TokenBucket};
use tern_wire::{KeyFingerprint, RELAY_HEADER_LEN, RefusalReason, RelayGrant, RelayRefused};

use super::Endpoint;
#[cfg(doc)]
use crate::RelayConfig;
use crate::Transmit;
use crate::connection::signals::Signal;

/// Packets waiting to be forwarded, at most: past it the driver is behind,
/// and the packet is dropped (its sender's loss recovery resends).
const MAX_QUEUED: usize = 1024;

/// How long a pair's packets may wait for its rate, as a share of a
/// second: 100 ms, LEDBAT's target delay (at the default rate, 400 kB per
/// pair). At least [`MIN_BACKLOG`] bytes.
const BACKLOG: u64 = 10;

/// The smallest queue a pair gets, in bytes; the memory budget keeps it
/// for the pair while it lives.
const MIN_BACKLOG: u64 = 64 * 1024;

/// A packet to forward: its pair (the asker's slot), destination and
/// bytes.
type Queued = (u32, SocketAddr, Vec<u8>);

/// What holding `packet` costs: its buffer and its queue entry.
fn packet_charge(packet: &Vec<u8>) -> u64 {
    (packet.capacity() + size_of::<Queued>()) as u64
}

/// One side of a relayed pair.
#[derive(Debug, Clone, Copy)]
struct End {
    /// The slot this side wraps its packets with.
    slot: u32,
    /// Its connection to the rendezvous.
    connection: u32,
}

#[derive(Debug)]
struct Pair {
    ends: [End; 2],
    bucket: TokenBucket,
    last_active: Instant,
    /// Packets waiting for the pair's rate, and their bytes.
    backlog: VecDeque<Queued>,
    backlog_bytes: u64,
    /// When the first of them may go.
    release_at: Option<Instant>,
    /// What its packets cost, waiting here or in the shared queue
    /// ([`packet_charge`]).
    held: u64,
}

impl Pair {
    /// What the pair is charged against the memory budget: what it holds,
    /// but at least its smallest backlog.
    fn charge(&self) -> u64 {
        self.held.max(MIN_BACKLOG)
    }

    /// Moves what the rate lets go now to `queue` (while it has room),
    /// and notes when the next may go.
    fn release(&mut self, now: Instant, queue: &mut VecDeque<Queued>) {
        self.release_at = None;
        while let Some((_, _, packet)) = self.backlog.front() {
            let len = packet.len() as u64;
            match self.bucket.take(len, now) {
                Take::WaitUntil(at) => {
                    self.release_at = Some(at);
                    return;
                }
                Take::Now if queue.len() >= MAX_QUEUED => {
                    self.release_at = Some(now);
                    return;
                }
                Take::Now => {
                    if let Some(packet) = self.backlog.pop_front() {
                        self.backlog_bytes -= len;
                        queue.push_back(packet);
                    }
                }
            }
        }
    }
}

/// The pairs relayed here and the packets waiting to go.
#[derive(Debug, Default)]
pub(super) struct Relay {
    /// By the asker's slot.
    pairs: FxHashMap<u32, Pair>,
    /// Every live slot, to its pair (the asker's slot).
    slots: FxHashMap<u32, u32>,
    /// Packets to forward.
    queue: VecDeque<Queued>,
    /// Buffers of packets sent, for the next ones.
    spare: Vec<Vec<u8>>,
    /// What the relay is charged against the memory budget: each pair's
    /// [`Pair::charge`], and the spare buffers.
    charged: u64,
}

impl Relay {
    /// Pairs relayed now.
    pub(super) fn pairs(&self) -> usize {
        self.pairs.len()
    }

    /// Keeps `packet`'s buffer for the next packet, up to 64 of them,
    /// if it fits in `room`.
    fn keep_spare(&mut self, packet: Vec<u8>, room: u64) {
        if self.spare.len() < 64 && packet.capacity() as u64 <= room {
            self.charged += packet.capacity() as u64;
            self.spare.push(packet);
        }
    }

    /// When the idlest pair is due to be forgotten, or a waiting packet
    /// may go.
    pub(super) fn deadline(&self, idle_timeout: std::time::Duration) -> Option<Instant> {
        let oldest = self.pairs.values().map(|pair| pair.last_active).min()?;
        let release = self.pairs.values().filter_map(|pair| pair.release_at).min();
        Some(release.map_or(oldest + idle_timeout, |at| at.min(oldest + idle_timeout)))
    }

    /// Moves every pair's packets that may go now to the queue.
    pub(super) fn release(&mut self, now: Instant) {
        for pair in self.pairs.values_mut() {
            if pair.release_at.is_some_and(|at| at <= now) {
                pair.release(now, &mut self.queue);
            }
        }
    }

    /// Forgets pair `key`, and drops the packets it holds here.
    fn remove(&mut self, key: u32) {
        if let Some(pair) = self.pairs.remove(&key) {
            for end in pair.ends {
                self.slots.remove(&end.slot);
            }
            self.charged -= pair.charge();
            self.queue.retain(|(of, _, _)| *of != key);
        }
    }

    fn fresh_slot(&self, rng: &mut impl RngCore) -> u32 {
        loop {
            let slot = rng.next_u32();
            if slot != 0 && !self.slots.contains_key(&slot) {
                return slot;
            }
        }
    }
}

impl Endpoint {
    /// A RelayRequest from connection `asker` for the peer `peer`.
    pub(super) fn on_relay_request(&mut self, now: Instant, asker: u32, peer: KeyFingerprint) {
        let refuse = |endpoint: &mut Self, reason| {
            if let Some(connection) = endpoint.connections.get_mut(asker) {
                connection.send_signal(Signal::RelayRefused(RelayRefused { peer, reason }));
                endpoint.touch(asker);
            }
            endpoint.stats.relay_refused += 1;
        };
        let Some(asker_key) = self.peer_fingerprint(asker) else {
            return refuse(self, RefusalReason::NotIdentified);
        };
        if !self.may_ask(now, asker) {
            return refuse(self, RefusalReason::RateLimited);
        }
        let Some(target) = self.registered_peer(asker, &peer) else {
            return refuse(self, RefusalReason::UnknownPeer);
        };
        let existing = self.relay.pairs.iter().find_map(|(&key, pair)| {
            let [a, b] = pair.ends;
            (a.connection == asker && b.connection == target).then_some(key)
        });
        let (asker_slot, target_slot) = match existing {
            // Asked again (its first grant's packet was lost and it gave
            // up, or it connects anew): the same slots.
            Some(key) => {
                let pair = &mut self.relay.pairs.get_mut(&key).expect("found").ends;
                (pair[0].slot, pair[1].slot)
            }
            // Full, or the memory budget has no room for its smallest
            // backlog: refused alike, and the asker falls back.
            None if self.relay.pairs.len() >= self.config.relay.max_pairs
                || self.budget.room() < MIN_BACKLOG =>
            {
                return refuse(self, RefusalReason::RelayFull);
            }
            None => {
                // The bucket first: a rate it refuses leaves no slot behind.
                let rate = self.config.relay.bytes_per_second.max(1);
                let Ok(bucket) = TokenBucket::new(rate, (rate / 10).max(64 * 1024)) else {
                    return refuse(self, RefusalReason::RelayFull);
                };
                let asker_slot = self.relay.fresh_slot(&mut self.rng);
                self.relay.slots.insert(asker_slot, asker_slot);
                let target_slot = self.relay.fresh_slot(&mut self.rng);
                self.relay.slots.insert(target_slot, asker_slot);
                let ends = [
                    End {
                        slot: asker_slot,
                        connection: asker,
                    },
                    End {
                        slot: target_slot,
                        connection: target,
                    },
                ];
                let pair = Pair {
                    ends,
                    bucket,
                    last_active: now,
                    backlog: VecDeque::new(),
                    backlog_bytes: 0,
                    release_at: None,
                    held: 0,
                };
                self.relay.charged += pair.charge();
                self.budget.set_relay(self.relay.charged);
                self.relay.pairs.insert(asker_slot, pair);
                self.stats.relay_pairs_made += 1;
                (asker_slot, target_slot)
            }
        };
        let grants = [
            (asker, asker_slot, peer, true),
            (target, target_slot, asker_key, false),
        ];
        for (index, slot, peer, initiator) in grants {
            if let Some(connection) = self.connections.get_mut(index) {
                connection.send_signal(Signal::RelayGrant(RelayGrant {
                    slot,
                    peer,
                    initiator,
                }));
                self.touch(index);
            }
        }
    }

    /// A relay packet from `from` for slot `slot`: forwarded to the other
    /// side of its pair, or dropped and counted.
    pub(super) fn forward_relayed(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let backlog = (self.config.relay.bytes_per_second / BACKLOG).max(MIN_BACKLOG);
        let Some((slot, _)) = tern_wire::parse_relay(datagram) else {
            self.stats.relay_dropped_unknown_slot += 1;
            return;
        };
        let Some(pair) = self
            .relay
            .slots
            .get(&slot)
            .and_then(|key| self.relay.pairs.get_mut(key))
        else {
            self.stats.relay_dropped_unknown_slot += 1;
            return;
        };
        let (sender, receiver) = if pair.ends[0].slot == slot {
            (pair.ends[0], pair.ends[1])
        } else {
            (pair.ends[1], pair.ends[0])
        };
        // The slot is its owner's: it must come from where that owner's
        // connection is now.
        let owner = self.connections.get(sender.connection).map(|c| c.remote());
        let to = self
            .connections
            .get(receiver.connection)
            .map(|c| c.remote());
        let (Some(owner), Some(to)) = (owner, to) else {
            self.stats.relay_dropped_unknown_slot += 1;
            return;
        };
        if owner != from {
            self.stats.relay_dropped_not_owner += 1;
            return;
        }
        let len = datagram.len();
        // The pair's key: the asker's slot.
        let key = pair.ends[0].slot;
        let now_ok = self.relay.queue.len() < MAX_QUEUED
            && pair.backlog.is_empty()
            && pair.bucket.take(len as u64, now) == Take::Now;
        if !now_ok && pair.backlog_bytes + len as u64 > backlog {
            self.stats.relay_dropped_over_cap += 1;
            return;
        }
        let mut packet = self.relay.spare.pop().unwrap_or_default();
        self.relay.charged -= packet.capacity() as u64;
        packet.clear();
        packet.extend_from_slice(datagram);
        // Past its smallest backlog, kept for it, a pair's packet takes
        // the budget's room.
        let cost = packet_charge(&packet);
        let more = (pair.held + cost).max(MIN_BACKLOG) - pair.charge();
        let over_budget = more > self.budget.room();
        if over_budget || tern_wire::write_relay_header(&mut packet, receiver.slot).is_none() {
            self.stats.relay_dropped_over_budget += u64::from(over_budget);
            self.keep_relay_buffer(packet);
            return;
        }
        pair.last_active = now;
        pair.held += cost;
        self.relay.charged += more;
        self.budget.set_relay(self.relay.charged);
        if now_ok {
            self.relay.queue.push_back((key, to, packet));
        } else {
            pair.backlog.push_back((key, to, packet));
            pair.backlog_bytes += len as u64;
            if pair.release_at.is_none() {
                pair.release(now, &mut self.relay.queue);
            }
        }
        self.stats.relay_packets_forwarded += 1;
        self.stats.relay_bytes_forwarded += len as u64;
    }

    /// The next packet to forward, written into `buf`.
    pub(super) fn poll_forward(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.relay.queue.is_empty() {
            self.relay.release(now);
        }
        while let Some((key, destination, packet)) = self.relay.queue.pop_front() {
            let len = packet.len();
            let copied = buf.get_mut(..len).map(|dst| dst.copy_from_slice(&packet));
            let relay = &mut self.relay;
            if let Some(pair) = relay.pairs.get_mut(&key) {
                let before = pair.charge();
                pair.held -= packet_charge(&packet);
                relay.charged = relay.charged - before + pair.charge();
            }
            self.keep_relay_buffer(packet);
            if copied.is_some() && len > RELAY_HEADER_LEN {
                return Some(Transmit {
                    destination,
                    len,
                    segment_size: None,
                    ttl: None,
                });
            }
        }
        None
    }

    /// Keeps `packet`'s buffer for the next relay packet, if the budget
    /// has room for it, and charges the relay what it holds now.
    fn keep_relay_buffer(&mut self, packet: Vec<u8>) {
        self.budget.set_relay(self.relay.charged);
        self.relay.keep_spare(packet, self.budget.room());
        self.budget.set_relay(self.relay.charged);
    }

    /// Forgets pairs idle for the configured time.
    pub(super) fn expire_relayed_pairs(&mut self, now: Instant) {
        let idle = self.config.relay.idle_timeout;
        let expired: Vec<u32> = self
            .relay
            .pairs
            .iter()
            .filter(|(_, pair)| pair.last_active + idle <= now)
            .map(|(&key, _)| key)
            .collect();
        self.stats.relay_pairs_expired += expired.len() as u64;
        for key in expired {
            self.relay.remove(key);
        }
        self.budget.set_relay(self.relay.charged);
    }

    /// Connection `index` was freed: the pairs it was a side of end.
    pub(super) fn forget_in_relay(&mut self, index: u32) {
        let ended: Vec<u32> = self
            .relay
            .pairs
            .iter()
            .filter(|(_, pair)| pair.ends.iter().any(|end| end.connection == index))
            .map(|(&key, _)| key)
            .collect();
        for key in ended {
            self.relay.remove(key);
        }
        self.budget.set_relay(self.relay.charged);
    }

    /// The peer registered here under `peer`, other than `asker`, with an
    /// open connection.
    pub(super) fn registered_peer(&self, asker: u32, peer: &KeyFingerprint) -> Option<u32> {
        self.rendezvous
            .registered(peer)
            .filter(|&target| target != asker && self.connections.get(target).is_some())
    }
}
