//! Resumption tickets (wire format §6.6): what a responder gives a peer
//! that connected so that its next intro needs no asymmetric operation.
//!
//! A ticket is opaque to the initiator: the responder's own AES-128-GCM
//! seal, under a key drawn when the responder started and never written
//! anywhere, over the session's resumption secret, the time it was issued
//! and the initiator's X25519 identity if it proved one. Associated data
//! binds it to the responder's identity. So only the responder that issued
//! it can open it, a restarted responder (a new key) refuses every old
//! one, and a ticket altered in any bit does not open.
//!
//! Expiry and single use are the responder's business
//! ([`crate::Responder`] checks both); this module seals and opens.

use core::fmt;

use aes_gcm::Aes128Gcm;
use aes_gcm::aead::{AeadInOut, KeyInit};
use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::aead::{IV_LEN, KEY_LEN, TAG_LEN};
use crate::header::X25519_KEY_LEN;
use crate::identity::PublicIdentity;
use crate::keys::SECRET_LEN;

/// Length of the sealed contents: resumption secret (32), issue time (8),
/// initiator's X25519 identity or zeros (32).
const CONTENTS_LEN: usize = SECRET_LEN + 8 + X25519_KEY_LEN;
/// Length of a ticket: nonce (12), sealed contents (72), tag (16).
pub const TICKET_LEN: usize = IV_LEN + CONTENTS_LEN + TAG_LEN;
/// Prefixed to the responder identity's hash in the associated data.
const LABEL: &[u8] = b"tern v2 ticket";

/// A resumption ticket, as carried on the wire.
pub type Ticket = [u8; TICKET_LEN];

/// The secret a resumed intro is sealed with: derived by both sides from
/// the session that issued the ticket (wire format §6.3), never sent.
#[derive(Clone, PartialEq, Eq)]
pub struct ResumptionSecret(pub(crate) Zeroizing<[u8; SECRET_LEN]>);

impl ResumptionSecret {
    /// A secret from its bytes (tests, examples).
    #[must_use]
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(Zeroizing::new(bytes))
    }
}

impl fmt::Debug for ResumptionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResumptionSecret(..)")
    }
}

/// What a ticket carries, readable only by the responder that sealed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketContents {
    /// The resumption secret of the session that issued it.
    pub secret: ResumptionSecret,
    /// When it was issued: ms since the UNIX epoch, on the responder's clock.
    pub issued_ms: u64,
    /// The initiator's X25519 identity, if it proved one in that session's
    /// intro; the resumed session inherits the proof.
    pub initiator: Option<[u8; X25519_KEY_LEN]>,
}

impl TicketContents {
    fn to_bytes(&self) -> Zeroizing<[u8; CONTENTS_LEN]> {
        let mut out = Zeroizing::new([0u8; CONTENTS_LEN]);
        out[..SECRET_LEN].copy_from_slice(&self.secret.0[..]);
        out[SECRET_LEN..SECRET_LEN + 8].copy_from_slice(&self.issued_ms.to_be_bytes());
        out[SECRET_LEN + 8..].copy_from_slice(&self.initiator.unwrap_or_default());
        out
    }

    fn from_bytes(bytes: &[u8; CONTENTS_LEN]) -> Option<Self> {
        let (secret, rest) = bytes.split_first_chunk::<SECRET_LEN>()?;
        let (issued, initiator) = rest.split_first_chunk::<8>()?;
        let initiator: [u8; X25519_KEY_LEN] = initiator.try_into().ok()?;
        Some(Self {
            secret: ResumptionSecret::from_bytes(*secret),
            issued_ms: u64::from_be_bytes(*issued),
            initiator: (initiator != [0; X25519_KEY_LEN]).then_some(initiator),
        })
    }
}

/// The responder's ticket key and the identity its tickets are bound to.
pub struct TicketKey {
    cipher: Aes128Gcm,
    /// SHA-256 of the label and the responder's public identity.
    aad: [u8; 32],
}

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketKey(..)")
    }
}

impl TicketKey {
    /// A fresh key for the responder whose identity is `responder`.
    pub fn random(responder: &PublicIdentity, rng: &mut impl CryptoRngCore) -> Self {
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        rng.fill_bytes(&mut key[..]);
        Self::from_bytes(&key, responder)
    }

    /// A key from its bytes (tests, examples).
    #[must_use]
    pub fn from_bytes(key: &[u8; KEY_LEN], responder: &PublicIdentity) -> Self {
        Self {
            cipher: Aes128Gcm::new(&(*key).into()),
            aad: Sha256::new()
                .chain_update(LABEL)
                .chain_update(responder.binding())
                .finalize()
                .into(),
        }
    }

    /// Seals `contents` with a fresh random nonce from `rng`.
    pub fn seal(&self, contents: &TicketContents, rng: &mut impl CryptoRngCore) -> Ticket {
        let mut nonce = [0u8; IV_LEN];
        rng.fill_bytes(&mut nonce);
        self.seal_with_nonce(contents, nonce)
    }

    fn seal_with_nonce(&self, contents: &TicketContents, nonce: [u8; IV_LEN]) -> Ticket {
        let mut ticket = [0u8; TICKET_LEN];
        ticket[..IV_LEN].copy_from_slice(&nonce);
        let (body, tag) = ticket[IV_LEN..].split_at_mut(CONTENTS_LEN);
        body.copy_from_slice(&contents.to_bytes()[..]);
        // Sealing a 72-byte buffer under a valid key cannot fail; if it
        // did, the all-zero tag would never open.
        if let Ok(t) = self
            .cipher
            .encrypt_inout_detached(&nonce.into(), &self.aad, body.into())
        {
            tag.copy_from_slice(&t);
        }
        ticket
    }

    /// The contents of a ticket this key sealed; `None` for anything else
    /// (another key, another responder identity, a changed bit).
    #[must_use]
    pub fn open(&self, ticket: &Ticket) -> Option<TicketContents> {
        let (nonce, rest) = ticket.split_first_chunk::<IV_LEN>()?;
        let (body, tag) = rest.split_first_chunk::<CONTENTS_LEN>()?;
        let tag: [u8; TAG_LEN] = tag.try_into().ok()?;
        let mut plain = Zeroizing::new(*body);
        self.cipher
            .decrypt_inout_detached(
                &(*nonce).into(),
                &self.aad,
                (&mut plain[..]).into(),
                &tag.into(),
            )
            .ok()?;
        TicketContents::from_bytes(&plain)
    }
}

/// The id the responder's single-use set remembers a ticket by: its tag,
/// unique per ticket (a fresh nonce each).
pub(crate) fn ticket_id(ticket: &Ticket) -> [u8; TAG_LEN] {
    let mut id = [0u8; TAG_LEN];
    id.copy_from_slice(&ticket[TICKET_LEN - TAG_LEN..]);
    id
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand_core::OsRng;

    use super::*;
    use crate::identity::IdentityKey;

    fn responder() -> PublicIdentity {
        IdentityKey::generate_x25519(&mut OsRng).public()
    }

    proptest! {
        /// open ∘ seal = id, for any contents; any one-bit change of the
        /// sealed ticket, and another key or responder, is refused.
        #[test]
        fn tickets_round_trip_and_refuse_any_change(
            secret in any::<[u8; 32]>(),
            issued_ms in any::<u64>(),
            initiator in proptest::option::of(any::<[u8; 32]>()
                .prop_filter("not the anonymous encoding", |k| *k != [0; 32])),
            key in any::<[u8; 16]>(),
            nonce in any::<[u8; 12]>(),
            at in 0..TICKET_LEN,
            bit in 0u8..8,
        ) {
            let me = responder();
            let sealer = TicketKey::from_bytes(&key, &me);
            let contents = TicketContents {
                secret: ResumptionSecret::from_bytes(secret),
                issued_ms,
                initiator,
            };
            let mut ticket = sealer.seal_with_nonce(&contents, nonce);
            prop_assert_eq!(sealer.open(&ticket), Some(contents));
            let mut other_key = key;
            other_key[0] ^= 1;
            prop_assert_eq!(TicketKey::from_bytes(&other_key, &me).open(&ticket), None);
            prop_assert_eq!(TicketKey::from_bytes(&key, &responder()).open(&ticket), None);
            ticket[at] ^= 1 << bit;
            prop_assert_eq!(sealer.open(&ticket), None);
        }

        /// Arbitrary bytes never open (and never panic).
        #[test]
        fn arbitrary_bytes_do_not_open(bytes in any::<[u8; TICKET_LEN]>()) {
            let sealer = TicketKey::random(&responder(), &mut OsRng);
            prop_assert_eq!(sealer.open(&bytes), None);
        }
    }

    #[test]
    fn the_ticket_is_laid_out_as_the_wire_format_says() {
        assert_eq!(TICKET_LEN, 100);
        assert_eq!(LABEL.len(), 14);
    }
}
