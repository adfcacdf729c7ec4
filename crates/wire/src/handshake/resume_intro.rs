//! The resumed intro (wire format §6.6): an intro that carries a ticket
//! from an earlier session with the same responder, sealed with that
//! session's resumption secret, so neither side does an asymmetric
//! operation but the exchange of fresh ephemeral keys.
//!
//! ```text
//! ck1  = HKDF-Extract(salt = resumption secret, ikm = E_i || ticket)
//! body seal = AES-128-GCM(HKDF-Expand(ck1, "tern v2 resume body", 16),
//!                         nonce 0, aad = bytes 0..133, body)
//! prk  = HKDF-Extract(salt = ck1, ikm = X25519(e_r, E_i))            ee
//! secrets: as for the other intros, from prk and the transcript hash
//! ```
//!
//! Only the holder of the resumption secret can seal the body, so opening
//! it proves the initiator is the peer of the ticket's session (and holds
//! any identity that session proved); `ee` gives forward secrecy and
//! responder participation. The ticket is single-use and expires: the
//! responder checks both ([`super::Responder`]).

use super::INTRO_LEN;
use super::ephemeral::EphemeralKey;
use super::x25519_intro::{ChainingKey, Fields, mix_bytes, open, seal};
use crate::aead::TAG_LEN;
use crate::error::{AcceptError, IntroError};
use crate::header::{PacketType, X25519_KEY_LEN};
use crate::replay::{INTRO_ID_LEN, IntroId};
use crate::ticket::{ResumptionSecret, TICKET_LEN, Ticket};

/// Where the initiator's ephemeral key starts.
const EPHEMERAL_AT: usize = 1;
/// Where the ticket starts.
const TICKET_AT: usize = EPHEMERAL_AT + X25519_KEY_LEN;
/// Where the sealed body starts.
const BODY_AT: usize = TICKET_AT + TICKET_LEN;
/// Length of the body's plaintext: the rest of the intro but the tag, so
/// the resumed intro is as long as the others.
const BODY_LEN: usize = INTRO_LEN - BODY_AT - TAG_LEN;
/// HKDF label of the body's seal.
const LABEL_BODY: &[u8] = b"tern v2 resume body";

/// Length of a ResumeRefused packet: the type and the intro id.
pub const RESUME_REFUSED_LEN: usize = 1 + INTRO_ID_LEN;

// A refusal goes to an address nobody validated: it must not amplify.
const _: () = assert!(RESUME_REFUSED_LEN < INTRO_LEN);

/// The chaining key the body is sealed under: the resumption secret with
/// the initiator's ephemeral key and the ticket mixed in.
fn chain(
    secret: &ResumptionSecret,
    ephemeral: &[u8; X25519_KEY_LEN],
    ticket: &Ticket,
) -> ChainingKey {
    mix_bytes(&secret.0, &[ephemeral, ticket])
}

/// Writes a resumed intro carrying `ticket` into `dst`; returns the chaining key the session secrets
/// start from.
pub(super) fn write(
    secret: &ResumptionSecret,
    ticket: &Ticket,
    ephemeral: &EphemeralKey,
    fields: Fields,
    dst: &mut [u8; INTRO_LEN],
) -> Result<ChainingKey, IntroError> {
    let ephemeral_public = ephemeral.public();
    dst[0] = PacketType::IntroResume as u8;
    dst[EPHEMERAL_AT..TICKET_AT].copy_from_slice(ephemeral_public);
    dst[TICKET_AT..BODY_AT].copy_from_slice(ticket);
    let ck1 = chain(secret, ephemeral_public, ticket);
    let (head, rest) = dst.split_at_mut(BODY_AT);
    let (body, tag) = rest.split_at_mut(BODY_LEN);
    fields.write(body);
    seal(&ck1, LABEL_BODY, head, body, tag).ok_or(IntroError::Sealing)?;
    Ok(ck1)
}

/// The ticket a resumed intro of the right length carries.
pub(super) fn ticket(datagram: &[u8; INTRO_LEN]) -> Ticket {
    let mut ticket = [0u8; TICKET_LEN];
    ticket.copy_from_slice(&datagram[TICKET_AT..BODY_AT]);
    ticket
}

/// What the responder learns from a resumed intro whose ticket opened.
pub(super) struct Opened {
    pub(super) fields: Fields,
    pub(super) ephemeral: [u8; X25519_KEY_LEN],
    pub(super) chain: ChainingKey,
}

/// Opens the body of a resumed intro with the `secret` its ticket held.
pub(super) fn open_body(
    secret: &ResumptionSecret,
    datagram: &[u8; INTRO_LEN],
) -> Result<Opened, AcceptError> {
    let mut ephemeral = [0u8; X25519_KEY_LEN];
    ephemeral.copy_from_slice(&datagram[EPHEMERAL_AT..TICKET_AT]);
    let ck1 = chain(secret, &ephemeral, &ticket(datagram));
    let mut body = [0u8; BODY_LEN];
    body.copy_from_slice(&datagram[BODY_AT..BODY_AT + BODY_LEN]);
    open(
        &ck1,
        LABEL_BODY,
        &datagram[..BODY_AT],
        &mut body,
        &datagram[BODY_AT + BODY_LEN..],
    )
    .ok_or(AcceptError::Decryption)?;
    let fields = Fields::read(&body).ok_or(AcceptError::Malformed)?;
    Ok(Opened {
        fields,
        ephemeral,
        chain: ck1,
    })
}

/// A ResumeRefused answering the resumed intro `intro`: the responder will
/// not resume (its ticket did not open, expired, or was used), and the
/// initiator should send a full intro.
#[must_use]
pub fn write_resume_refused(intro: &IntroId) -> [u8; RESUME_REFUSED_LEN] {
    let mut packet = [0u8; RESUME_REFUSED_LEN];
    packet[0] = PacketType::ResumeRefused as u8;
    packet[1..].copy_from_slice(intro);
    packet
}

/// The intro id a ResumeRefused names; `None` for anything but a
/// ResumeRefused of exactly [`RESUME_REFUSED_LEN`] bytes.
#[must_use]
pub fn parse_resume_refused(datagram: &[u8]) -> Option<IntroId> {
    let packet: &[u8; RESUME_REFUSED_LEN] = datagram.try_into().ok()?;
    let (&first, id) = packet.split_first()?;
    (first == PacketType::ResumeRefused as u8).then(|| id.try_into().ok())?
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_intro_is_laid_out_as_the_wire_format_says() {
        assert_eq!((EPHEMERAL_AT, TICKET_AT, BODY_AT), (1, 33, 133));
        assert_eq!(BODY_LEN, 108);
        assert_eq!(RESUME_REFUSED_LEN, 17);
    }

    proptest! {
        /// parse ∘ write = id; any other length or type is refused.
        #[test]
        fn refusals_round_trip(id in any::<IntroId>(), first in any::<u8>(), len in 0usize..40) {
            let packet = write_resume_refused(&id);
            prop_assert_eq!(parse_resume_refused(&packet), Some(id));
            let mut other = packet;
            other[0] = first;
            prop_assert_eq!(
                parse_resume_refused(&other).is_some(),
                first == PacketType::ResumeRefused as u8
            );
            let bytes = vec![PacketType::ResumeRefused as u8; len];
            prop_assert_eq!(parse_resume_refused(&bytes).is_some(), len == RESUME_REFUSED_LEN);
        }
    }
}
