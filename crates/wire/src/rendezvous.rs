//! Rendezvous: the frames with which an endpoint introduces two of its
//! peers to each other, the fingerprint that names a peer in them, and the
//! punch packet that opens a NAT's filter for the peer's first packet.
//!
//! A peer that wants to be found sends [`Register`] to a rendezvous it is
//! connected to (having proved its identity there). Another peer asks for
//! it by fingerprint with [`ConnectVia`]; the rendezvous answers with an
//! [`Introduce`] to each side — the other's address as it sees it, a shared
//! nonce, and when to start — or with an [`IntroductionRefused`]. The
//! initiator then connects to the address it was given; the other side
//! sends punches ([`write_punch`]) toward the initiator's, so that its own
//! NAT lets the initiator's intro in. Byte layouts: `docs/wire-format.md`.

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
                for part in [key.n().to_bytes_be(), key.e().to_bytes_be()] {
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

/// A peer asks to be introduced to whoever asks for it by fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register;

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
}

impl RefusalReason {
    /// The reason for a byte, if Tern knows it.
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::UnknownPeer,
            2 => Self::RateLimited,
            3 => Self::NotIdentified,
            _ => return None,
        })
    }
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
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::test_support::{identity, other_identity};

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

    proptest! {
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
