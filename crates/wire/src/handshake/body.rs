//! The intro's plaintext: what the initiator tells the responder, and its
//! fixed-length encoding.

use zeroize::Zeroizing;

use crate::header::X25519_KEY_LEN;
use crate::keys::SECRET_LEN;

/// Length of the intro's plaintext: version (4), timestamp (8), secret (32),
/// X25519 public key (32), initiator index (4).
pub(super) const INTRO_BODY_LEN: usize = 4 + 8 + SECRET_LEN + X25519_KEY_LEN + 4;

/// The decrypted contents of an intro; the secret is wiped on drop.
pub(super) struct IntroBody {
    pub(super) version: u32,
    pub(super) timestamp_ms: u64,
    pub(super) secret: Zeroizing<[u8; SECRET_LEN]>,
    pub(super) ephemeral: [u8; X25519_KEY_LEN],
    pub(super) initiator_index: u32,
}

impl IntroBody {
    pub(super) fn to_bytes(&self) -> Zeroizing<[u8; INTRO_BODY_LEN]> {
        let mut out = Zeroizing::new([0u8; INTRO_BODY_LEN]);
        let parts: [&[u8]; 5] = [
            &self.version.to_be_bytes(),
            &self.timestamp_ms.to_be_bytes(),
            &self.secret[..],
            &self.ephemeral,
            &self.initiator_index.to_be_bytes(),
        ];
        let mut at = 0;
        for part in parts {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        out
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; INTRO_BODY_LEN] = bytes.try_into().ok()?;
        let (version, rest) = bytes.split_first_chunk::<4>()?;
        let (timestamp, rest) = rest.split_first_chunk::<8>()?;
        let (secret, rest) = rest.split_first_chunk::<SECRET_LEN>()?;
        let (ephemeral, rest) = rest.split_first_chunk::<X25519_KEY_LEN>()?;
        let index: &[u8; 4] = rest.try_into().ok()?;
        Some(Self {
            version: u32::from_be_bytes(*version),
            timestamp_ms: u64::from_be_bytes(*timestamp),
            secret: Zeroizing::new(*secret),
            ephemeral: *ephemeral,
            initiator_index: u32::from_be_bytes(*index),
        })
    }
}
