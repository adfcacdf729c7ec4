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
}
