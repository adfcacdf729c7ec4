//! Tests of the resumed intro: a ticket from a full handshake resumes the
//! session's peer in one round trip, once, before it expires, only at the
//! responder that issued it; anything altered is refused, never a panic.

use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use rand_core::OsRng;

use super::*;
use crate::error::AcceptError;
use crate::identity::IdentityKey;
use crate::keys::KeyConfig;
use crate::replay::ReplayGuard;
use crate::test_support::{
    assert_keys_agree, identity, other_x25519_identity, t0, x25519_identity,
};
use crate::ticket::{ResumptionSecret, Ticket};

const INITIATOR_INDEX: u32 = 7;
const RESPONDER_INDEX: u32 = 9;

fn responder(key: &IdentityKey) -> Responder {
    Responder::new(key.clone(), ReplayGuard::default(), KeyConfig::default())
        .with_tickets(TicketPolicy::default(), &mut OsRng)
}

/// A full handshake with `responder` from an initiator proving `me`; the
/// ticket the responder issues for it and the initiator's resumption
/// secret.
fn full_handshake(
    responder: &mut Responder,
    me: Option<&IdentityKey>,
) -> (Ticket, ResumptionSecret) {
    let mut intro = [0u8; INTRO_LEN];
    let pending = PendingIntro::write_as(
        me,
        EphemeralKey::random(&mut OsRng),
        &responder.public(),
        INITIATOR_INDEX,
        KeyConfig::default(),
        t0(),
        &mut OsRng,
        &mut intro,
    )
    .unwrap();
    let accepted = responder.accept(&intro, t0(), &mut OsRng).unwrap();
    let initiator = accepted.initiator_identity().cloned();
    let mut reply = vec![0u8; 1452];
    let (len, keys) = accepted.reply(RESPONDER_INDEX, &[], &mut reply).unwrap();
    let established = pending.open_reply(&mut reply[..len]).unwrap();
    assert_eq!(keys.resumption, established.keys.resumption);
    let ticket = responder
        .issue_ticket(&keys.resumption, initiator.as_ref(), t0(), &mut OsRng)
        .unwrap();
    (ticket, established.keys.resumption)
}

fn resumed_intro(
    ticket: &Ticket,
    secret: &ResumptionSecret,
    now: SystemTime,
) -> (PendingIntro, [u8; INTRO_LEN]) {
    let mut intro = [0u8; INTRO_LEN];
    let pending = PendingIntro::write_resumed(
        ticket,
        secret,
        EphemeralKey::random(&mut OsRng),
        INITIATOR_INDEX,
        KeyConfig::default(),
        now,
        &mut intro,
    )
    .unwrap();
    (pending, intro)
}

#[test]
fn a_ticket_resumes_in_one_round_trip_with_fresh_keys_and_carries_an_x25519_identity() {
    for (key, me) in [
        (x25519_identity(), Some(other_x25519_identity())),
        (x25519_identity(), None),
        (identity(), Some(identity())),
    ] {
        let mut responder = responder(key);
        let (ticket, secret) = full_handshake(&mut responder, me);
        let (pending, intro) = resumed_intro(&ticket, &secret, t0());
        assert_eq!(intro[0], 0x60);
        let accepted = responder.accept(&intro, t0(), &mut OsRng).unwrap();
        // An X25519 identity proven in the first intro carries over; an
        // RSA one proves itself again.
        let carried = me
            .filter(|k| k.kind() == crate::IdentityKind::X25519)
            .map(IdentityKey::public);
        assert_eq!(accepted.initiator_identity(), carried.as_ref());
        let mut reply = vec![0u8; 1452];
        let (len, mut keys) = accepted.reply(RESPONDER_INDEX, &[], &mut reply).unwrap();
        let mut established = pending.open_reply(&mut reply[..len]).unwrap();
        // A new session: a new resumption secret, and the keys agree.
        assert_ne!(established.keys.resumption, secret);
        assert_keys_agree(&mut established.keys, &mut keys);
    }
}

#[test]
fn a_ticket_is_single_use_expires_and_dies_with_its_responder() {
    let mut first = responder(x25519_identity());
    let (ticket, secret) = full_handshake(&mut first, None);
    let (_, intro) = resumed_intro(&ticket, &secret, t0());
    first.accept(&intro, t0(), &mut OsRng).unwrap();
    // The same ticket in a new intro (a new timestamp, a new key).
    let later = t0() + Duration::from_secs(1);
    let (_, again) = resumed_intro(&ticket, &secret, later);
    let refused = first.accept(&again, later, &mut OsRng).map(|_| ());
    assert_eq!(refused, Err(AcceptError::TicketReused));
    assert!(AcceptError::TicketReused.is_ticket_refusal());

    let (ticket, secret) = full_handshake(&mut first, None);
    let expired = t0() + TicketPolicy::default().lifetime + Duration::from_secs(1);
    let (_, intro) = resumed_intro(&ticket, &secret, expired);
    let refused = first.accept(&intro, expired, &mut OsRng).map(|_| ());
    assert_eq!(refused, Err(AcceptError::TicketExpired));

    // A restarted responder, same identity: a new ticket key.
    let (ticket, secret) = full_handshake(&mut first, None);
    let mut restarted = responder(x25519_identity());
    let (_, intro) = resumed_intro(&ticket, &secret, t0());
    let refused = restarted.accept(&intro, t0(), &mut OsRng).map(|_| ());
    assert_eq!(refused, Err(AcceptError::TicketRefused));
    // And one that issues no tickets refuses it the same way.
    let mut plain = Responder::new(
        x25519_identity().clone(),
        ReplayGuard::default(),
        KeyConfig::default(),
    );
    let refused = plain.accept(&intro, t0(), &mut OsRng).map(|_| ());
    assert_eq!(refused, Err(AcceptError::TicketRefused));
}

#[test]
fn a_ticket_without_its_secret_opens_nothing_and_is_not_spent() {
    let mut responder = responder(x25519_identity());
    let (ticket, secret) = full_handshake(&mut responder, None);
    let wrong = ResumptionSecret::from_bytes([7; 32]);
    let (_, intro) = resumed_intro(&ticket, &wrong, t0());
    let refused = responder.accept(&intro, t0(), &mut OsRng).map(|_| ());
    assert_eq!(refused, Err(AcceptError::Decryption));
    // The holder of the secret still resumes with it.
    let (_, intro) = resumed_intro(&ticket, &secret, t0());
    assert!(responder.accept(&intro, t0(), &mut OsRng).is_ok());
}

#[test]
fn a_resumed_intro_out_of_the_timestamp_window_is_refused_and_does_not_spend_its_ticket() {
    let mut responder = responder(x25519_identity());
    let (ticket, secret) = full_handshake(&mut responder, None);
    let skewed = t0() - Duration::from_secs(60);
    let (_, intro) = resumed_intro(&ticket, &secret, skewed);
    let refused = responder.accept(&intro, t0(), &mut OsRng).map(|_| ());
    assert!(matches!(refused, Err(AcceptError::StaleTimestamp { .. })));
    let (_, intro) = resumed_intro(&ticket, &secret, t0());
    assert!(responder.accept(&intro, t0(), &mut OsRng).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any one-bit change of a genuine resumed intro is refused, without a
    /// panic, and without spending the ticket.
    #[test]
    fn any_mutation_of_a_resumed_intro_is_refused(at in 0..INTRO_LEN, bit in 0u8..8) {
        let mut responder = responder(x25519_identity());
        let (ticket, secret) = full_handshake(&mut responder, None);
        let (_, intro) = resumed_intro(&ticket, &secret, t0());
        let mut mutated = intro;
        mutated[at] ^= 1 << bit;
        prop_assert!(responder.accept(&mutated, t0(), &mut OsRng).is_err());
        prop_assert!(responder.accept(&intro, t0(), &mut OsRng).is_ok());
    }
}
