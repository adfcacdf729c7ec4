//! The X25519 intro: an intro to an X25519 identity, sealed with
//! Diffie-Hellman exchanges only (wire format §6.5).
//!
//! The pattern is that of Noise IK (the Noise Protocol Framework, rev. 34,
//! §7.5) and of WireGuard's first message: the initiator knows the
//! responder's static key `S_r`; it sends a fresh ephemeral key `E_i` in
//! the clear, and its exchange with `S_r` (`es`) keys the seal of
//! everything else, so only the holder of `S_r` can read the intro. An
//! initiator that proves an X25519 identity `S_i` puts it under that seal,
//! and the exchange of its static key with `S_r` (`ss`) keys the seal of
//! the body that follows: the responder opens that body only if the
//! initiator holds the private half of `S_i` (or the responder's own), so
//! opening it is the proof. An anonymous initiator leaves the static key
//! all zeros, which no exchange accepts.
//!
//! ```text
//! ck0 = SHA-256("tern v2 x25519 intro" || S_r)
//! ck1 = HKDF-Extract(salt = ck0, ikm = E_i || X25519(e_i, S_r))       es
//! static seal = AES-128-GCM(HKDF-Expand(ck1, "tern v2 x25519 static", 16),
//!                           nonce 0, aad = bytes 0..33, S_i or 32 zeros)
//! ck2 = HKDF-Extract(salt = ck1, ikm = S_i || X25519(s_i, S_r))       ss, if S_i
//!     = ck1                                                            otherwise
//! body seal   = AES-128-GCM(HKDF-Expand(ck2, "tern v2 x25519 body", 16),
//!                           nonce 0, aad = bytes 0..81, body)
//! ```
//!
//! Each key seals one message, so the all-zero nonce never repeats under a
//! key. The reply is the RSA intro's (the responder's fresh ephemeral key
//! `E_r` in its header); the responder's exchanges with the initiator's
//! keys then join the derivation of the session secrets:
//!
//! ```text
//! ck3  = HKDF-Extract(salt = ck2, ikm = X25519(e_r, S_i))             se, if S_i
//!      = ck2                                                           otherwise
//! prk  = HKDF-Extract(salt = ck3, ikm = X25519(e_r, E_i))             ee
//! secrets: as for the RSA intro, from prk and the transcript hash
//! ```
//!
//! Forward secrecy comes from `ee` (both ephemeral keys are gone after the
//! handshake), responder participation from `E_r`, and a replayed intro is
//! refused by the same timestamp and replay guard as the RSA intro. Every
//! exchange whose result is all zeros (a low-order point) is refused.

use crate::crypto::x25519::{SecretKey, SharedSecret};
use aes_gcm::Aes128Gcm;
use aes_gcm::aead::{AeadInOut, KeyInit};
use hkdf::{Hkdf, HkdfExtract};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::INTRO_LEN;
use super::ephemeral::EphemeralKey;
use crate::aead::{IV_LEN, KEY_LEN, TAG_LEN};
use crate::error::{AcceptError, IntroError};
use crate::header::{PacketType, X25519_KEY_LEN};

/// Where the initiator's ephemeral key starts.
const EPHEMERAL_AT: usize = 1;
/// Where the sealed static key starts.
pub(super) const STATIC_AT: usize = EPHEMERAL_AT + X25519_KEY_LEN;
/// Where the sealed body starts.
pub(super) const BODY_AT: usize = STATIC_AT + X25519_KEY_LEN + TAG_LEN;
/// Length of the body's plaintext: the rest of the intro but the tag, so
/// the intro is as long as the RSA intro.
pub(super) const BODY_LEN: usize = INTRO_LEN - BODY_AT - TAG_LEN;
/// The body's fields: version (4), timestamp (8), initiator index (4); the
/// rest is zero padding.
pub(super) const FIELDS_LEN: usize = 4 + 8 + 4;

/// Prefixed to the responder's key in the first chaining key.
const LABEL_PROTOCOL: &[u8] = b"tern v2 x25519 intro";
/// HKDF label of the static key's seal.
pub(super) const LABEL_STATIC: &[u8] = b"tern v2 x25519 static";
/// HKDF label of the body's seal.
pub(super) const LABEL_BODY: &[u8] = b"tern v2 x25519 body";

/// A chaining key: each exchange is mixed into the one before.
pub(super) type ChainingKey = Zeroizing<[u8; 32]>;

/// The fields an X25519 intro's body carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) version: u32,
    pub(super) timestamp_ms: u64,
    pub(super) initiator_index: u32,
}

impl Fields {
    /// Writes the fields at the start of `out` and zeros the rest.
    pub(super) fn write(self, out: &mut [u8]) {
        out.fill(0);
        out[..4].copy_from_slice(&self.version.to_be_bytes());
        out[4..12].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        out[12..FIELDS_LEN].copy_from_slice(&self.initiator_index.to_be_bytes());
    }

    /// The fields of a body whose padding is all zeros.
    pub(super) fn read(bytes: &[u8]) -> Option<Self> {
        let (fields, padding) = bytes.split_first_chunk::<FIELDS_LEN>()?;
        if padding.iter().any(|&b| b != 0) {
            return None;
        }
        let (version, rest) = fields.split_first_chunk::<4>()?;
        let (timestamp, index) = rest.split_first_chunk::<8>()?;
        let index: &[u8; 4] = index.try_into().ok()?;
        Some(Self {
            version: u32::from_be_bytes(*version),
            timestamp_ms: u64::from_be_bytes(*timestamp),
            initiator_index: u32::from_be_bytes(*index),
        })
    }
}

/// The first chaining key: binds everything after to the responder's key.
pub(super) fn start(responder: &[u8; X25519_KEY_LEN]) -> ChainingKey {
    Zeroizing::new(
        Sha256::new()
            .chain_update(LABEL_PROTOCOL)
            .chain_update(responder)
            .finalize()
            .into(),
    )
}

/// Mixes an exchange's result (after the public key it was made with, if
/// any) into the chaining key; `None` if the result is all zeros.
pub(super) fn mix(ck: &[u8; 32], public: &[u8], shared: &SharedSecret) -> Option<ChainingKey> {
    if !shared.was_contributory() {
        return None;
    }
    Some(mix_bytes(ck, &[public, shared.as_bytes()]))
}

/// HKDF-Extract with `ck` as the salt and `parts`, concatenated, as the
/// input keying material.
pub(super) fn mix_bytes(ck: &[u8; 32], parts: &[&[u8]]) -> ChainingKey {
    let mut extract = HkdfExtract::<Sha256>::new(Some(ck));
    for part in parts {
        extract.input_ikm(part);
    }
    let (prk, _) = extract.finalize();
    Zeroizing::new(prk.into())
}

/// The AEAD key that `label` names under the chaining key.
fn seal_key(ck: &[u8; 32], label: &[u8]) -> Option<Aes128Gcm> {
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    Hkdf::<Sha256>::from_prk(ck)
        .ok()?
        .expand(label, &mut key[..])
        .ok()?;
    Some(Aes128Gcm::new(&(*key).into()))
}

/// Seals `payload` in place under the key `label` names, the tag in `tag`.
pub(super) fn seal(
    ck: &[u8; 32],
    label: &[u8],
    aad: &[u8],
    payload: &mut [u8],
    tag: &mut [u8],
) -> Option<()> {
    let tag_bytes = seal_key(ck, label)?
        .encrypt_inout_detached(&[0u8; IV_LEN].into(), aad, payload.into())
        .ok()?;
    tag.copy_from_slice(&tag_bytes);
    Some(())
}

/// Opens `payload` in place under the key `label` names.
pub(super) fn open(
    ck: &[u8; 32],
    label: &[u8],
    aad: &[u8],
    payload: &mut [u8],
    tag: &[u8],
) -> Option<()> {
    let tag: [u8; TAG_LEN] = tag.try_into().ok()?;
    seal_key(ck, label)?
        .decrypt_inout_detached(&[0u8; IV_LEN].into(), aad, payload.into(), &tag.into())
        .ok()
}

/// Writes an X25519 intro to `responder` into `dst` from the initiator's `ephemeral` key and, if it
/// proves an identity, its `initiator` key; returns the chaining key the
/// session secrets start from.
pub(super) fn write(
    responder: &[u8; X25519_KEY_LEN],
    initiator: Option<&SecretKey>,
    ephemeral: &EphemeralKey,
    fields: Fields,
    dst: &mut [u8; INTRO_LEN],
) -> Result<ChainingKey, IntroError> {
    let ephemeral_public = ephemeral.public();
    dst[0] = PacketType::IntroX25519 as u8;
    dst[EPHEMERAL_AT..STATIC_AT].copy_from_slice(ephemeral_public);
    let es = ephemeral.secret().diffie_hellman(responder);
    let ck1 = mix(&start(responder), ephemeral_public, &es).ok_or(IntroError::DegenerateKey)?;

    let static_public = initiator.map(SecretKey::public_key);
    let (head, rest) = dst.split_at_mut(STATIC_AT);
    let (static_key, static_tag) = rest[..X25519_KEY_LEN + TAG_LEN].split_at_mut(X25519_KEY_LEN);
    static_key.copy_from_slice(&static_public.unwrap_or_default());
    seal(&ck1, LABEL_STATIC, head, static_key, static_tag).ok_or(IntroError::Sealing)?;

    let ck2 = match (initiator, static_public) {
        (Some(key), Some(public)) => {
            let ss = key.diffie_hellman(responder);
            mix(&ck1, &public, &ss).ok_or(IntroError::DegenerateKey)?
        }
        _ => ck1,
    };
    let (head, rest) = dst.split_at_mut(BODY_AT);
    let (body, body_tag) = rest.split_at_mut(BODY_LEN);
    fields.write(body);
    seal(&ck2, LABEL_BODY, head, body, body_tag).ok_or(IntroError::Sealing)?;
    Ok(ck2)
}

/// What the responder learns from an X25519 intro it opened.
pub(super) struct Opened {
    /// The body's fields.
    pub(super) fields: Fields,
    /// The initiator's ephemeral key.
    pub(super) ephemeral: [u8; X25519_KEY_LEN],
    /// The initiator's static key, proven by the body's seal; `None` for
    /// an anonymous initiator.
    pub(super) initiator: Option<[u8; X25519_KEY_LEN]>,
    /// The chaining key after `es` and `ss`.
    pub(super) chain: ChainingKey,
}

/// Opens an X25519 intro of the right type and length with the
/// responder's `identity` key (whose public half is `public`).
pub(super) fn accept(
    identity: &SecretKey,
    public: &[u8; X25519_KEY_LEN],
    datagram: &[u8],
) -> Result<Opened, AcceptError> {
    let datagram: &[u8; INTRO_LEN] = datagram
        .try_into()
        .map_err(|_| AcceptError::WrongLength(datagram.len()))?;
    let ephemeral_bytes: [u8; X25519_KEY_LEN] = datagram[EPHEMERAL_AT..STATIC_AT]
        .try_into()
        .map_err(|_| AcceptError::Malformed)?;
    let es = identity.diffie_hellman(&ephemeral_bytes);
    let ck1 = mix(&start(public), &ephemeral_bytes, &es).ok_or(AcceptError::DegenerateKey)?;

    let mut static_key = Zeroizing::new([0u8; X25519_KEY_LEN]);
    static_key.copy_from_slice(&datagram[STATIC_AT..STATIC_AT + X25519_KEY_LEN]);
    open(
        &ck1,
        LABEL_STATIC,
        &datagram[..STATIC_AT],
        &mut static_key[..],
        &datagram[STATIC_AT + X25519_KEY_LEN..BODY_AT],
    )
    .ok_or(AcceptError::Decryption)?;

    let initiator = (*static_key != [0u8; X25519_KEY_LEN]).then_some(*static_key);
    let ck2 = match initiator {
        Some(key) => {
            let ss = identity.diffie_hellman(&key);
            mix(&ck1, &key, &ss).ok_or(AcceptError::DegenerateKey)?
        }
        None => ck1,
    };
    let mut body = Zeroizing::new([0u8; BODY_LEN]);
    body.copy_from_slice(&datagram[BODY_AT..BODY_AT + BODY_LEN]);
    open(
        &ck2,
        LABEL_BODY,
        &datagram[..BODY_AT],
        &mut body[..],
        &datagram[BODY_AT + BODY_LEN..],
    )
    .ok_or(AcceptError::Decryption)?;
    let fields = Fields::read(&body[..]).ok_or(AcceptError::Malformed)?;
    Ok(Opened {
        fields,
        ephemeral: ephemeral_bytes,
        initiator,
        chain: ck2,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The body codec: decode ∘ encode = id, and a body whose padding
        /// is not all zeros is refused.
        #[test]
        fn bodies_round_trip_and_padding_must_be_zero(
            version in any::<u32>(),
            timestamp_ms in any::<u64>(),
            initiator_index in any::<u32>(),
            at in FIELDS_LEN..BODY_LEN,
            bit in 0u8..8,
        ) {
            let fields = Fields { version, timestamp_ms, initiator_index };
            let mut bytes = [0xff; BODY_LEN];
            fields.write(&mut bytes);
            prop_assert_eq!(Fields::read(&bytes), Some(fields));
            bytes[at] ^= 1 << bit;
            prop_assert_eq!(Fields::read(&bytes), None);
        }
    }

    #[test]
    fn the_intro_is_laid_out_as_the_wire_format_says() {
        assert_eq!((EPHEMERAL_AT, STATIC_AT, BODY_AT), (1, 33, 81));
        assert_eq!(BODY_LEN, 160);
        assert_eq!(BODY_AT + BODY_LEN + TAG_LEN, INTRO_LEN);
    }
}
