//! Rendezvous: the frames with which an endpoint introduces two of its
//! peers to each other, the fingerprint that names a peer in them, and the
//! punch packet that opens a NAT's filter for the peer's first packet.
//!
//! A peer that wants to be found sends [`Register`] to a rendezvous it is
//! connected to (having proved its identity there). Another peer asks for
//! it by fingerprint with [`ConnectVia`]; the rendezvous answers with an
//! [`Introduce`] to each side — the other's address as it sees it, a shared
//! nonce, when to start, and the other's local addresses (the
//! [`Candidates`] it registered) — or with an [`IntroductionRefused`]. The
//! initiator then connects to the address it was given; the other side
//! sends punches ([`write_punch`]) toward the initiator's, so that its own
//! NAT lets the initiator's intro in.
//!
//! When no direct path opens, the pair's connection runs through the
//! rendezvous instead: the asker sends [`RelayRequest`], and the rendezvous
//! answers each side with a [`RelayGrant`] naming a slot of its own (or
//! with a [`RelayRefused`]). Each side then wraps every datagram of that
//! connection in a relay packet ([`write_relay_header`]) carrying its slot;
//! the rendezvous swaps in the other side's slot and forwards it. The inner
//! datagram stays sealed under the pair's keys. Byte layouts:
//! `docs/wire-format.md`.

use core::net::SocketAddr;
use core::time::Duration;

use sha2::{Digest, Sha256};

use crate::identity::{PublicIdentity, PublicKind};

/// Bytes of a [`KeyFingerprint`].
pub const FINGERPRINT_LEN: usize = 32;

/// Names a public identity in the rendezvous frames: SHA-256 over a label
/// of the key's kind and its key bytes (`"tern rsa"`, the modulus and the
/// exponent, big-endian, each with a 4-byte length; or `"tern x25519"`
/// and the 32 key bytes), so no key's encoding travels in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyFingerprint(pub [u8; FINGERPRINT_LEN]);

impl PublicIdentity {
    /// This key's fingerprint.
    #[must_use]
    pub fn fingerprint(&self) -> KeyFingerprint {
        use rsa::traits::PublicKeyParts;
        let mut hash = Sha256::new();
        match &self.0 {
            PublicKind::Rsa(key) => {
                hash.update(b"tern rsa");
                for part in [key.key().n().to_bytes_be(), key.key().e().to_bytes_be()] {
                    hash.update((part.len() as u32).to_be_bytes());
                    hash.update(&part);
                }
            }
            PublicKind::X25519(key) => {
                hash.update(b"tern x25519");
                hash.update(key);
            }
        }
        KeyFingerprint(hash.finalize().into())
    }
}

/// Local candidates a frame carries at most.
pub const MAX_CANDIDATES: usize = 4;

/// A peer's local addresses (those of its own interfaces, as opposed to
/// the address a rendezvous sees it at): at most [`MAX_CANDIDATES`],
/// each one an address packets can come from, none twice. Two peers behind
/// the same NAT reach each other at these when the NAT does not hairpin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Candidates {
    slots: [Option<SocketAddr>; MAX_CANDIDATES],
}

impl Candidates {
    /// Adds `address`; returns `false` (and adds nothing) if the list is
    /// full, holds it already, or no packet can come from it (unspecified,
    /// multicast, broadcast, port 0).
    pub fn push(&mut self, address: SocketAddr) -> bool {
        if !is_unicast_source(&address) || self.iter().any(|held| held == address) {
            return false;
        }
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.is_none()) else {
            return false;
        };
        *slot = Some(address);
        true
    }

    /// The addresses, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.slots.iter().map_while(|slot| *slot)
    }

    /// How many there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots[0].is_none()
    }
}

/// Whether packets can come from `address`: a unicast, specified address
/// and a port other than 0.
#[must_use]
pub fn is_unicast_source(address: &SocketAddr) -> bool {
    use core::net::IpAddr;
    let unicast = match address.ip() {
        IpAddr::V4(ip) => !ip.is_unspecified() && !ip.is_multicast() && !ip.is_broadcast(),
        IpAddr::V6(ip) => !ip.is_unspecified() && !ip.is_multicast(),
    };
    unicast && address.port() != 0
}

/// A peer asks to be introduced to whoever asks for it by fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Register {
    /// Its local addresses, handed to those it is introduced to.
    pub candidates: Candidates,
}

/// A peer asks the rendezvous to introduce it to the peer with this key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectVia {
    /// Whom to reach.
    pub peer: KeyFingerprint,
}

/// The rendezvous introduces the receiver to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Introduce {
    /// The same on both sides' frames, carried by the punches: links a
    /// punch to its introduction. Chosen by the rendezvous at random.
    pub nonce: [u8; 8],
    /// The peer's fingerprint.
    pub peer: KeyFingerprint,
    /// Whether the receiver connects (it asked) or punches (it was asked for).
    pub initiator: bool,
    /// How long after this frame arrives the receiver starts, so both
    /// sides start together. Carried in whole microseconds, at most
    /// [`MAX_START_DELAY`].
    pub start_delay: Duration,
    /// The peer's address, as the rendezvous sees its packets come from.
    pub address: SocketAddr,
    /// The peer's local addresses, as it registered them (none if it
    /// did not register).
    pub candidates: Candidates,
}

/// The most an [`Introduce`] may ask the receiver to wait.
pub const MAX_START_DELAY: Duration = Duration::from_secs(10);

/// The rendezvous will not introduce the receiver to the peer it named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntroductionRefused {
    /// The peer asked for.
    pub peer: KeyFingerprint,
    /// Why.
    pub reason: RefusalReason,
}

/// Why a rendezvous refused an introduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum RefusalReason {
    /// No peer with that key is registered here.
    UnknownPeer = 1,
    /// The asker asked for more introductions than the rendezvous grants.
    RateLimited = 2,
    /// The asker did not prove an identity: the other side could not
    /// tell who is coming.
    NotIdentified = 3,
    /// The rendezvous relays as many pairs as it will (a [`RelayRefused`]).
    RelayFull = 4,
}

impl RefusalReason {
    /// The reason for a byte, if Tern knows it.
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::UnknownPeer,
            2 => Self::RateLimited,
            3 => Self::NotIdentified,
            4 => Self::RelayFull,
            _ => return None,
        })
    }
}

/// A peer asks the rendezvous to relay its connection to the peer with
/// this key (which must be registered there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayRequest {
    /// Whom to reach.
    pub peer: KeyFingerprint,
}

/// The rendezvous relays the receiver's connection with a peer: the
/// receiver wraps that connection's datagrams with `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayGrant {
    /// The receiver's slot: random, never 0, and told to nobody else.
    pub slot: u32,
    /// The peer at the other end of the slot.
    pub peer: KeyFingerprint,
    /// Whether the receiver asked (it connects) or was asked for.
    pub initiator: bool,
}

/// The rendezvous will not relay toward the peer the receiver named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayRefused {
    /// The peer asked for.
    pub peer: KeyFingerprint,
    /// Why.
    pub reason: RefusalReason,
}

/// The first byte of a relay packet: a packet type of its own (`0x81`).
pub const RELAY_TYPE: u8 = 0x81;

/// Bytes a relay packet adds before the datagram it carries: its type and
/// the slot.
pub const RELAY_HEADER_LEN: usize = 1 + 4;

/// Writes a relay packet's header for `slot` into the first
/// [`RELAY_HEADER_LEN`] bytes of `buf` (the carried datagram follows).
/// Returns `None` if `buf` is shorter.
pub fn write_relay_header(buf: &mut [u8], slot: u32) -> Option<()> {
    let header = buf.get_mut(..RELAY_HEADER_LEN)?;
    header[0] = RELAY_TYPE;
    header[1..].copy_from_slice(&slot.to_be_bytes());
    Some(())
}

/// The slot of a relay packet and the datagram it carries; `None` if
/// `datagram` is not one: shorter than a header and one byte, slot 0, or
/// carrying a punch or another relay packet (a relay never nests).
#[must_use]
pub fn parse_relay(datagram: &[u8]) -> Option<(u32, &[u8])> {
    let (&ty, rest) = datagram.split_first()?;
    let (slot, inner) = rest.split_first_chunk::<4>()?;
    let slot = u32::from_be_bytes(*slot);
    let first = *inner.first()?;
    (ty == RELAY_TYPE && slot != 0 && first != PUNCH_TYPE && first != RELAY_TYPE)
        .then_some((slot, inner))
}

/// The first byte of a punch: a packet type of its own (`0x80`).
pub const PUNCH_TYPE: u8 = 0x80;

/// Bytes of a punch: its type and the introduction's nonce.
pub const PUNCH_LEN: usize = 1 + 8;

/// A punch for the introduction `nonce`.
#[must_use]
pub fn write_punch(nonce: &[u8; 8]) -> [u8; PUNCH_LEN] {
    let mut punch = [0; PUNCH_LEN];
    punch[0] = PUNCH_TYPE;
    punch[1..].copy_from_slice(nonce);
    punch
}

/// The nonce of a punch; `None` if `datagram` is not exactly one.
#[must_use]
pub fn parse_punch(datagram: &[u8]) -> Option<[u8; 8]> {
    match datagram {
        [PUNCH_TYPE, nonce @ ..] => nonce.try_into().ok(),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::test_support::{identity, other_identity};

    /// Any candidate list: up to [`MAX_CANDIDATES`] unicast v4 and v6
    /// addresses (a duplicate drawn is left out).
    pub(crate) fn candidates() -> impl Strategy<Value = Candidates> {
        let v4 = (any::<[u8; 4]>(), 1..=u16::MAX)
            .prop_filter("unicast", |(ip, _)| ip[0] != 0 && ip[0] < 224)
            .prop_map(|(ip, port)| SocketAddr::from((ip, port)));
        let v6 = (any::<[u16; 8]>(), 1..=u16::MAX)
            .prop_filter("unicast", |(ip, _)| {
                ip[0] >> 8 != 0xff && ip != &[0; 8] && ip[..7] != [0; 7]
            })
            .prop_map(|(ip, port)| SocketAddr::from((ip, port)));
        prop::collection::vec(prop_oneof![v4, v6], 0..=MAX_CANDIDATES).prop_map(|addresses| {
            let mut candidates = Candidates::default();
            for address in addresses {
                candidates.push(address);
            }
            candidates
        })
    }

    #[test]
    fn a_candidate_list_holds_four_distinct_sources() {
        let mut candidates = Candidates::default();
        assert!(candidates.is_empty());
        for bad in [
            "0.0.0.0:1",
            "224.0.0.1:1",
            "255.255.255.255:1",
            "[::]:1",
            "[ff02::1]:1",
            "192.0.2.1:0",
        ] {
            assert!(!candidates.push(bad.parse().expect("an address")), "{bad}");
        }
        let a: SocketAddr = "192.168.1.2:4000".parse().expect("an address");
        assert!(candidates.push(a));
        assert!(!candidates.push(a), "a duplicate");
        for port in 1..=3 {
            assert!(candidates.push(SocketAddr::new(a.ip(), port)));
        }
        assert!(
            !candidates.push("10.0.0.1:1".parse().expect("an address")),
            "full"
        );
        assert_eq!(candidates.len(), MAX_CANDIDATES);
        assert_eq!(candidates.iter().next(), Some(a));
    }

    #[test]
    fn fingerprints_tell_keys_apart_and_are_stable() {
        let (a, b) = (identity().public(), other_identity().public());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let x = PublicIdentity::from_x25519_bytes([7; 32]);
        let y = PublicIdentity::from_x25519_bytes([8; 32]);
        assert_ne!(x.fingerprint(), y.fingerprint());
        assert_ne!(x.fingerprint(), a.fingerprint());
    }

    #[test]
    fn a_punch_is_its_type_and_nonce() {
        let punch = write_punch(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(punch, [0x80, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(parse_punch(&punch), Some([1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(parse_punch(&punch[..8]), None);
        assert_eq!(parse_punch(&[0x80; 10]), None);
        assert_eq!(parse_punch(&[0x61, 1, 2, 3, 4, 5, 6, 7, 8]), None);
    }

    #[test]
    fn a_relay_packet_is_its_type_slot_and_datagram() {
        let mut packet = [0u8; 8];
        assert_eq!(write_relay_header(&mut packet[..4], 7), None);
        write_relay_header(&mut packet, 0x0102_0304).expect("room");
        packet[5..].copy_from_slice(&[0x20, 9, 9]);
        assert_eq!(packet[..5], [0x81, 1, 2, 3, 4]);
        assert_eq!(parse_relay(&packet), Some((0x0102_0304, &[0x20, 9, 9][..])));
        assert_eq!(parse_relay(&packet[..5]), None, "nothing carried");
        let mut zero = packet;
        zero[1..5].fill(0);
        assert_eq!(parse_relay(&zero), None, "slot 0");
        for nested in [RELAY_TYPE, PUNCH_TYPE] {
            let mut nest = packet;
            nest[5] = nested;
            assert_eq!(parse_relay(&nest), None, "no nesting");
        }
        packet[0] = 0x80;
        assert_eq!(parse_relay(&packet), None);
    }

    proptest! {
        #[test]
        fn a_relay_packet_round_trips(slot in 1..=u32::MAX, inner in prop::collection::vec(0u8..0x80, 1..64)) {
            let mut packet = vec![0; RELAY_HEADER_LEN + inner.len()];
            write_relay_header(&mut packet, slot).expect("room");
            packet[RELAY_HEADER_LEN..].copy_from_slice(&inner);
            prop_assert_eq!(parse_relay(&packet), Some((slot, &inner[..])));
        }

        #[test]
        fn only_a_punch_parses_as_one(bytes in prop::collection::vec(any::<u8>(), 0..16)) {
            let parsed = parse_punch(&bytes);
            prop_assert_eq!(parsed.is_some(), bytes.len() == PUNCH_LEN && bytes[0] == PUNCH_TYPE);
            if let Some(nonce) = parsed {
                prop_assert_eq!(&write_punch(&nonce)[..], &bytes[..]);
            }
        }
    }
}
