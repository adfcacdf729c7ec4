//! The relay, on the peers' side: the slots rendezvous granted this side
//! (wire format §5.15), and the connections carried through them.
//!
//! A connection carried by a relay is an ordinary connection whose peer
//! address is the rendezvous's: the endpoint wraps each of its datagrams
//! in a relay packet with the slot (so the connection is given 5 bytes
//! less room per datagram, and no runs), and unwraps what comes back. A
//! relay packet is taken only on a slot this side was granted, from the
//! address of the rendezvous that granted it, and a carried datagram only
//! for the connection on that slot (or an intro, which makes it):
//! anything else is dropped and counted.
//!
//! While a connection is carried, this side probes the peer's direct
//! address (the one its introduction named) in the background, on a
//! backed-off schedule: once a probe is answered, the connection moves
//! there (see the connection's path probing), the other side follows, and
//! each side stops carrying it. Its slot stays a while for the packets
//! still on their way through the relay, then goes; the relay forgets
//! the pair when it idles.

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use rustc_hash::FxHashMap;
use tern_wire::{
    PacketType, RELAY_HEADER_LEN, RelayGrant, peek_receiver_index, write_relay_header,
};

use super::{ConnectionHandle, Endpoint};
use crate::{Transmit, TransmitLimits};

/// How long a slot granted to the side asked for waits for the asker's
/// intro.
const GRANT_LIFETIME: Duration = Duration::from_secs(10);

/// Slots one rendezvous may have waiting for an intro here at once: past
/// it a grant is dropped (and counted), so a rendezvous cannot make this
/// side hold slots without end.
const MAX_WAITING_PER_RENDEZVOUS: usize = 16;

/// The first wait between two probes of a carried connection's direct
/// address; it doubles up to [`MAX_PROBE_INTERVAL`].
const FIRST_PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// The longest wait between two probes: a connection that stays relayed
/// (a symmetric NAT) sends about one small probe per this.
const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(4);

/// Which way a connection's packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionPath {
    /// Straight to the peer at this address.
    Direct(SocketAddr),
    /// Through the relay at this address (the peer's rendezvous), which
    /// forwards them sealed.
    Relayed {
        /// The relay's address.
        via: SocketAddr,
    },
}

/// A slot granted to this side.
#[derive(Debug)]
struct Granted {
    /// The connection to the rendezvous that granted it.
    rendezvous: u32,
    /// The connection it carries, once there is one.
    connection: Option<u32>,
    /// When it is dropped if it carries nothing (or no longer does).
    expires: Instant,
    /// The peer's direct address to probe while the slot carries a
    /// connection.
    candidate: Option<SocketAddr>,
}

/// The background probing of a carried connection's direct address.
#[derive(Debug)]
struct Probe {
    to: SocketAddr,
    next: Instant,
    interval: Duration,
}

/// This side's slots and the connections they carry.
#[derive(Debug, Default)]
pub(super) struct Relayed {
    granted: FxHashMap<u32, Granted>,
    /// Connections carried, to their slot.
    carried: FxHashMap<u32, u32>,
    /// Carried connections probing a direct path.
    probes: FxHashMap<u32, Probe>,
    /// Connections that went direct, and how long after they started.
    went_direct: FxHashMap<u32, Duration>,
}

impl Relayed {
    /// When the next slot that carries nothing is due to go.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let idle = self
            .granted
            .values()
            .filter(|granted| {
                granted
                    .connection
                    .is_none_or(|index| !self.carried.contains_key(&index))
            })
            .map(|granted| granted.expires);
        let probes = self.probes.values().map(|probe| probe.next);
        idle.chain(probes).min()
    }

    /// Whether `slot` was granted to this side.
    pub(super) fn is_granted(&self, slot: u32) -> bool {
        self.granted.contains_key(&slot)
    }

    /// The slot carrying connection `index`, if a relay carries it.
    pub(super) fn slot_of(&self, index: u32) -> Option<u32> {
        if self.carried.is_empty() {
            return None;
        }
        self.carried.get(&index).copied()
    }
}

/// Writes what `fill` puts into `buf` after a relay header for the
/// carrier's slot: one datagram, at most `limits`' size less the header.
/// A datagram that is not for the relay (a probe of the direct path) goes
/// as it is.
pub(super) fn wrapped(
    carrier: Carrier,
    limits: TransmitLimits,
    buf: &mut [u8],
    fill: impl FnOnce(TransmitLimits, &mut [u8]) -> Option<Transmit>,
) -> Option<Transmit> {
    let inner_limits =
        TransmitLimits::new(1, limits.max_datagram_size.saturating_sub(RELAY_HEADER_LEN));
    let mut transmit = fill(inner_limits, buf.get_mut(RELAY_HEADER_LEN..)?)?;
    if transmit.destination != carrier.relay {
        buf.copy_within(RELAY_HEADER_LEN..RELAY_HEADER_LEN + transmit.len, 0);
        return Some(transmit);
    }
    write_relay_header(buf, carrier.slot)?;
    transmit.len += RELAY_HEADER_LEN;
    transmit.segment_size = None;
    Some(transmit)
}

/// A relay carrying a connection: its slot, and the relay's address.
#[derive(Debug, Clone, Copy)]
pub(super) struct Carrier {
    slot: u32,
    relay: SocketAddr,
}

impl Endpoint {
    /// The relay carrying connection `index`, if one does.
    pub(super) fn carrier(&self, index: u32) -> Option<Carrier> {
        let slot = self.relayed.slot_of(index)?;
        let granted = self.relayed.granted.get(&slot)?;
        let relay = self.relay_address(granted.rendezvous)?;
        Some(Carrier { slot, relay })
    }

    /// Which way connection `handle`'s packets go; `None` if there is no
    /// such connection.
    pub fn path(&self, handle: ConnectionHandle) -> Option<ConnectionPath> {
        let remote = self.connections.get(handle.0)?.remote();
        Some(match self.relayed.slot_of(handle.0) {
            Some(_) => ConnectionPath::Relayed { via: remote },
            None => ConnectionPath::Direct(remote),
        })
    }

    /// How long after it started connection `handle`, first carried by a
    /// relay, moved to a direct path; `None` if it did not (or there is no
    /// such connection).
    pub fn went_direct_after(&self, handle: ConnectionHandle) -> Option<Duration> {
        self.relayed.went_direct.get(&handle.0).copied()
    }

    /// A RelayGrant from the rendezvous on connection `from`.
    pub(super) fn on_relay_grant(&mut self, now: Instant, from: u32, grant: RelayGrant) {
        if self.relayed.granted.contains_key(&grant.slot) {
            return; // A repeat: the slot is known.
        }
        let waiting = self
            .relayed
            .granted
            .values()
            .filter(|granted| granted.rendezvous == from && granted.connection.is_none())
            .count();
        let expected = if grant.initiator {
            self.relay_asked(from, &grant.peer)
        } else {
            self.registered_with(from) && waiting < MAX_WAITING_PER_RENDEZVOUS
        };
        if !expected {
            self.stats.signals_unexpected += 1;
            return;
        }
        self.relayed.granted.insert(
            grant.slot,
            Granted {
                rendezvous: from,
                connection: None,
                expires: now + GRANT_LIFETIME,
                candidate: None,
            },
        );
        if grant.initiator {
            self.connect_relayed(now, from, grant.peer, grant.slot);
        } else if let Some(to) = self.rendezvous.punching_toward(from, &grant.peer) {
            self.set_candidate(grant.slot, to);
        }
    }

    /// Marks connection `index` as carried on `slot`; it probes the peer's
    /// direct address from `now` on, if the slot knows one.
    pub(super) fn carry(&mut self, now: Instant, index: u32, slot: u32) {
        let relayed = &mut self.relayed;
        let Some(granted) = relayed.granted.get_mut(&slot) else {
            return;
        };
        granted.connection = Some(index);
        relayed.carried.insert(index, slot);
        if let Some(to) = granted.candidate {
            let probe = Probe {
                to,
                next: now + FIRST_PROBE_INTERVAL,
                interval: FIRST_PROBE_INTERVAL,
            };
            relayed.probes.insert(index, probe);
        }
    }

    /// The peer's direct address that a connection carried on `slot` is
    /// to probe.
    pub(super) fn set_candidate(&mut self, slot: u32, to: SocketAddr) {
        if let Some(granted) = self.relayed.granted.get_mut(&slot) {
            granted.candidate = Some(to);
        }
    }

    /// Has the carried connections whose probe is due probe their direct
    /// address.
    pub(super) fn probe_direct_paths(&mut self, now: Instant) {
        if self.relayed.probes.is_empty() {
            return;
        }
        let due: Vec<(u32, SocketAddr)> = self
            .relayed
            .probes
            .iter_mut()
            .filter(|(_, probe)| probe.next <= now)
            .map(|(&index, probe)| {
                probe.next = now + probe.interval;
                probe.interval = (probe.interval * 2).min(MAX_PROBE_INTERVAL);
                (index, probe.to)
            })
            .collect();
        for (index, to) in due {
            if let Some(connection) = self.connections.get_mut(index)
                && connection.probe_path(now, to)
            {
                self.stats.direct_probes += 1;
                self.touch(index);
            }
        }
    }

    /// After a datagram for connection `index`: if a relay carries it and
    /// it now runs on a validated path elsewhere, it went direct, and the
    /// relay carries it no more (its slot stays a while, for the packets
    /// still on their way through the relay).
    pub(super) fn check_went_direct(&mut self, now: Instant, index: u32) {
        let Some(slot) = self.relayed.slot_of(index) else {
            return;
        };
        let Some(granted) = self.relayed.granted.get(&slot) else {
            return;
        };
        let relay = self.relay_address(granted.rendezvous);
        let Some(connection) = self.connections.get(index) else {
            return;
        };
        if Some(connection.remote()) == relay || !connection.path_is_validated() {
            return;
        }
        let after = connection.since_start(now);
        let relayed = &mut self.relayed;
        relayed.carried.remove(&index);
        relayed.probes.remove(&index);
        relayed.went_direct.insert(index, after);
        if let Some(granted) = relayed.granted.get_mut(&slot) {
            granted.expires = now + GRANT_LIFETIME;
        }
        self.stats.relayed_went_direct += 1;
    }

    /// The address of the rendezvous that granted `slot`.
    pub(super) fn relay_address(&self, rendezvous: u32) -> Option<SocketAddr> {
        self.connections.get(rendezvous).map(|c| c.remote())
    }

    /// A relay packet from `from`: what it carries goes on as if it came
    /// from the relay's address, if it is this side's to take.
    pub(super) fn handle_relayed(&mut self, now: Instant, from: SocketAddr, datagram: &mut [u8]) {
        let slot = tern_wire::parse_relay(datagram).map(|(slot, _)| slot);
        let granted = slot.and_then(|slot| Some((slot, self.relayed.granted.get(&slot)?)));
        let Some((slot, granted)) = granted else {
            self.stats.relayed_dropped += 1;
            return;
        };
        if self.relay_address(granted.rendezvous) != Some(from) {
            self.stats.relayed_dropped += 1;
            return;
        }
        let carrying = granted.connection;
        let inner = &mut datagram[RELAY_HEADER_LEN..];
        let first = inner[0];
        if first == PacketType::Intro as u8
            || first == PacketType::IntroX25519 as u8
            || first == PacketType::IntroResume as u8
        {
            if carrying.is_some_and(|index| self.connections.get(index).is_some()) {
                // Only a repeat of the intro that made it (answered with
                // the stored reply): a slot carries one connection.
                if self.is_repeated_intro(inner) {
                    self.handle_intro(now, from, inner, Some(slot));
                } else {
                    self.stats.relayed_dropped += 1;
                }
                return;
            }
            if let Some(index) = self.handle_intro(now, from, inner, Some(slot)) {
                self.carry(now, index, slot);
            }
            return;
        }
        if first == PacketType::Retry as u8 {
            return self.handle_retry(now, from, inner);
        }
        if first == PacketType::ResumeRefused as u8 {
            return self.handle_resume_refused(now, from, inner);
        }
        match peek_receiver_index(inner) {
            Some(index) if carrying == Some(index) => {
                self.handle_indexed(now, index, from, inner);
            }
            _ => self.stats.relayed_dropped += 1,
        }
    }

    /// Drops slots that waited too long for a connection, or were left
    /// by one that went direct a while ago.
    pub(super) fn expire_grants(&mut self, now: Instant) {
        let carried = &self.relayed.carried;
        self.relayed.granted.retain(|_, granted| {
            granted
                .connection
                .is_some_and(|index| carried.contains_key(&index))
                || granted.expires > now
        });
    }

    /// Connection `index` was freed: it carries nothing, and is no
    /// rendezvous any more.
    pub(super) fn forget_in_relayed(&mut self, index: u32) {
        let relayed = &mut self.relayed;
        if let Some(slot) = relayed.carried.remove(&index) {
            relayed.granted.remove(&slot);
        }
        relayed.probes.remove(&index);
        relayed.went_direct.remove(&index);
        relayed
            .granted
            .retain(|_, granted| granted.connection != Some(index));
        relayed
            .granted
            .retain(|_, granted| granted.rendezvous != index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_datagram_is_the_header_then_what_the_connection_wrote() {
        let mut buf = [0u8; 64];
        let limits = TransmitLimits::new(8, 40);
        let relay: SocketAddr = "192.0.2.1:7000".parse().expect("an address");
        let carrier = Carrier { slot: 7, relay };
        let transmit = wrapped(carrier, limits, &mut buf, |inner_limits, inner| {
            assert_eq!(inner_limits.max_segments, 1, "no runs");
            assert_eq!(inner_limits.max_datagram_size, 35, "room for the header");
            inner[..3].copy_from_slice(&[0x20, 1, 2]);
            Some(Transmit {
                destination: "192.0.2.1:7000".parse().expect("an address"),
                len: 3,
                segment_size: Some(3),
                ttl: None,
            })
        })
        .expect("a transmit");
        assert_eq!(transmit.len, 8);
        assert_eq!(transmit.segment_size, None);
        assert_eq!(buf[..8], [0x81, 0, 0, 0, 7, 0x20, 1, 2]);
        assert!(wrapped(carrier, limits, &mut buf, |_, _| None).is_none());
        // A probe of the direct path goes unwrapped.
        let direct: SocketAddr = "203.0.113.5:4000".parse().expect("an address");
        let transmit = wrapped(carrier, limits, &mut buf, |_, inner| {
            inner[..2].copy_from_slice(&[0x20, 9]);
            Some(Transmit {
                destination: direct,
                len: 2,
                segment_size: None,
                ttl: None,
            })
        })
        .expect("a transmit");
        assert_eq!((transmit.len, transmit.destination), (2, direct));
        assert_eq!(buf[..2], [0x20, 9]);
    }
}
