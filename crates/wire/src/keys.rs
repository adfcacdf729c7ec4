//! The key schedule: HKDF-SHA256 (RFC 5869) from a direction's traffic
//! secret to its packet key and IV, and to the next traffic secret when the
//! sender updates its key.
//!
//! ```text
//! key         = HKDF-Expand(secret, "tern v2 key", 16)
//! iv          = HKDF-Expand(secret, "tern v2 iv", 12)
//! next secret = HKDF-Expand(secret, "tern v2 ku", 32)
//! ```
//!
//! The handshake ([`crate::handshake`]) produces the first secret of each
//! direction under distinct labels, so the two directions never share a key.
//! Secrets never leave this crate: a caller gets them already inside a
//! [`PacketSealer`](crate::PacketSealer) and its
//! [`PacketOpener`](crate::PacketOpener), from the handshake or from
//! [`PacketSealer::with_opener`](crate::PacketSealer::with_opener).

use core::fmt;

use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aead::{Backend, IV_LEN, KEY_LEN, PACKET_LIMIT, PacketKey};
use crate::packet::KeyMaterial;

/// Length of a traffic secret: SHA-256's output.
pub const SECRET_LEN: usize = 32;

/// HKDF label of the packet key.
pub(crate) const LABEL_KEY: &[u8] = b"tern v2 key";
/// HKDF label of the IV.
pub(crate) const LABEL_IV: &[u8] = b"tern v2 iv";
/// HKDF label of the next traffic secret (key update).
pub(crate) const LABEL_KEY_UPDATE: &[u8] = b"tern v2 ku";

/// One direction's current traffic secret, wiped from memory when dropped.
///
/// Deliberately not `Clone` and not public: a sealer owns its secret, so no
/// second sealer can start counting packet numbers from zero under the same
/// key. Outside this crate no secret can be named, made or copied:
///
/// ```compile_fail
/// let secret = tern_wire::keys::TrafficSecret::from_bytes([7; 32]); // error: private
/// ```
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct TrafficSecret([u8; SECRET_LEN]);

impl fmt::Debug for TrafficSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrafficSecret(..)")
    }
}

impl TrafficSecret {
    /// A secret from raw bytes: the handshake's output, a fresh random
    /// secret, or a known-answer test's.
    #[must_use]
    pub(crate) const fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// HKDF-Expand with `label`; the secret is a full-length PRK.
    fn expand(&self, label: &[u8], out: &mut [u8]) {
        // Cannot fail: the PRK is SHA-256 sized and every output is far below
        // HKDF's 255 * 32 byte limit.
        if let Ok(hkdf) = Hkdf::<Sha256>::from_prk(&self.0) {
            let _ = hkdf.expand(label, out);
        }
    }

    /// The packet key and IV this secret protects packets with.
    #[must_use]
    pub(crate) fn material(&self) -> KeyMaterial {
        let mut material = KeyMaterial::new([0; KEY_LEN], [0; IV_LEN]);
        let (key, iv) = material.parts_mut();
        self.expand(LABEL_KEY, key);
        self.expand(LABEL_IV, iv);
        material
    }

    /// The packet key this secret protects packets with, expanded.
    #[must_use]
    pub(crate) fn packet_key(&self, backend: Backend) -> PacketKey {
        self.material().expand(backend)
    }

    /// The secret of the next key phase.
    #[must_use]
    pub(crate) fn next(&self) -> Self {
        let mut next = Self([0; SECRET_LEN]);
        self.expand(LABEL_KEY_UPDATE, &mut next.0);
        next
    }

    /// The raw bytes, for tests in this crate.
    #[cfg(test)]
    pub(crate) const fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

/// How packets are protected: the AES-GCM backend and how many packets one
/// key may seal before the sender must update it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyConfig {
    /// The AES-GCM implementation.
    pub backend: Backend,
    /// Packets one key may seal, at most [`PACKET_LIMIT`] (larger values are
    /// clamped to it). Lowered only to exercise key updates in tests.
    pub key_limit: u64,
}

impl Default for KeyConfig {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            key_limit: PACKET_LIMIT,
        }
    }
}

/// Packets at the end of a key's limit that new data never takes while the
/// key is not confirmed, however low the limit (but never more than half
/// of it): seven for ACKs, probes and PINGs, enough for a few round trips
/// of a peer that updates its own key each round trip, and the last one for
/// a Close.
const MIN_KEPT_BACK: u64 = 8;

impl KeyConfig {
    /// The effective per-key limit.
    #[must_use]
    pub const fn limit(&self) -> u64 {
        if self.key_limit < PACKET_LIMIT {
            self.key_limit
        } else {
            PACKET_LIMIT
        }
    }

    /// Packets sealed under a key after which the sender updates it, as
    /// soon as the peer confirmed it: half the limit. The other half is the
    /// margin for that confirmation, a round trip away: at the AEAD limit
    /// 2^22 packets, four seconds of a million packets a second.
    #[must_use]
    pub const fn update_at(&self) -> u64 {
        self.limit() / 2
    }

    /// Packets sealed under a key after which, while the peer has not
    /// confirmed it, the key seals no new data: three quarters of the
    /// limit (at most the limit less eight packets, at least
    /// [`update_at`](Self::update_at)). What is kept back goes to ACKs,
    /// probes and a PING, so that each side can still confirm the other's
    /// key when both wait for it, and the last packet to a Close.
    #[must_use]
    pub const fn new_data_until(&self) -> u64 {
        let limit = self.limit();
        let kept = if limit / 4 > MIN_KEPT_BACK {
            limit / 4
        } else {
            MIN_KEPT_BACK
        };
        let until = limit.saturating_sub(kept);
        if until > self.update_at() {
            until
        } else {
            self.update_at()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_derived_value_differs_and_the_chain_does_not_repeat() {
        let first = TrafficSecret::from_bytes([7; SECRET_LEN]);
        let mut seen = std::collections::HashSet::new();
        let mut secret = first.next();
        assert!(seen.insert(*first.bytes()));
        for _ in 0..64 {
            assert!(seen.insert(*secret.bytes()), "key update chain repeated");
            secret = secret.next();
        }
        let key = first.packet_key(Backend::default());
        // Key and IV come from distinct labels: sealing under one secret
        // does not open under the next one.
        let next_key = first.next().packet_key(Backend::default());
        let mut buf = *b"phase";
        let tag = key.seal_in_place(1, b"h", &mut buf).expect("seals");
        assert!(next_key.open_in_place(1, b"h", &mut buf, &tag).is_err());
    }

    #[test]
    fn the_key_limit_is_clamped_to_the_aead_limit() {
        let config = KeyConfig {
            key_limit: u64::MAX,
            ..KeyConfig::default()
        };
        assert_eq!(config.limit(), PACKET_LIMIT);
        let low = KeyConfig {
            key_limit: 10,
            ..KeyConfig::default()
        };
        assert_eq!(low.limit(), 10);
    }

    #[test]
    fn new_data_stops_short_of_the_limit_and_never_before_the_update() {
        let at = |key_limit| KeyConfig {
            key_limit,
            ..KeyConfig::default()
        };
        let full = KeyConfig::default();
        assert_eq!(full.update_at(), 1 << 22);
        assert_eq!(full.new_data_until(), 3 << 21);
        // Low limits keep eight packets back, but never new data from
        // before the update.
        assert_eq!((at(64).update_at(), at(64).new_data_until()), (32, 48));
        assert_eq!((at(32).update_at(), at(32).new_data_until()), (16, 24));
        assert_eq!((at(16).update_at(), at(16).new_data_until()), (8, 8));
        assert_eq!((at(8).update_at(), at(8).new_data_until()), (4, 4));
    }
}
