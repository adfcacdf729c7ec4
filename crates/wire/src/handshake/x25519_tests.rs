//! Tests of what only the X25519 intro has: the initiator's identity
//! proven in the intro, forged claims of it, low-order keys and the kinds
//! kept apart. (The tests in `tests.rs` run every other check on both
//! kinds.)

use std::time::SystemTime;

use rand_core::OsRng;
use x25519_dalek::{PublicKey, StaticSecret};

use super::x25519_intro::{
    BODY_AT, BODY_LEN, Fields, LABEL_BODY, LABEL_STATIC, STATIC_AT, mix, seal, start,
};
use super::*;
use crate::aead::TAG_LEN;
use crate::crypto::x25519::SharedSecret;
use crate::error::{AcceptError, IntroError, ReplyError};
use crate::header::{Header, PacketType, X25519_KEY_LEN};
use crate::identity::{IdentityKey, PublicIdentity};
use crate::keys::KeyConfig;
use crate::replay::ReplayGuard;
use crate::test_support::{
    assert_keys_agree, identity, other_x25519_identity, t0, x25519_identity,
};

const INITIATOR_INDEX: u32 = 7;
const RESPONDER_INDEX: u32 = 9;

fn responder(key: &IdentityKey) -> Responder {
    Responder::new(key.clone(), ReplayGuard::default(), KeyConfig::default())
}

fn responder_key() -> [u8; X25519_KEY_LEN] {
    *x25519_identity()
        .public()
        .x25519_bytes()
        .expect("an X25519 identity")
}

fn fields(version: u32, now: SystemTime) -> Fields {
    Fields {
        version,
        timestamp_ms: unix_millis(now).expect("after the epoch"),
        initiator_index: INITIATOR_INDEX,
    }
}

/// The exchange of `key` with `public`, made with x25519-dalek whatever the
/// backend: the intros made with it are a dalek initiator's.
/// An intro to the shared X25519 identity from `me` (anonymous if `None`)
/// with the ephemeral key `key`, written at [`t0`].
fn write_intro(me: Option<&IdentityKey>, key: EphemeralKey) -> (PendingIntro, [u8; INTRO_LEN]) {
    let mut intro = [0u8; INTRO_LEN];
    let pending = PendingIntro::write_as(
        me,
        key,
        &x25519_identity().public(),
        INITIATOR_INDEX,
        KeyConfig::default(),
        t0(),
        &mut OsRng,
        &mut intro,
    )
    .unwrap();
    (pending, intro)
}

fn dalek_shared(key: &StaticSecret, public: [u8; X25519_KEY_LEN]) -> SharedSecret {
    SharedSecret::from_bytes(key.diffie_hellman(&PublicKey::from(public)).to_bytes())
}

/// An intro whose static-key field is `claimed`, sealed correctly under
/// `es`, and whose body is sealed under the chaining key that mixing
/// `claimed` with the exchange of `ss_from` and the responder's key
/// gives: what an initiator holding `ss_from` makes.
fn forged(claimed: [u8; X25519_KEY_LEN], ss_from: &StaticSecret, version: u32) -> [u8; INTRO_LEN] {
    let responder = responder_key();
    let ephemeral = StaticSecret::random_from_rng(OsRng);
    let ephemeral_public = PublicKey::from(&ephemeral).to_bytes();
    let mut dst = [0u8; INTRO_LEN];
    dst[0] = PacketType::IntroX25519 as u8;
    dst[1..STATIC_AT].copy_from_slice(&ephemeral_public);
    let es = dalek_shared(&ephemeral, responder);
    let ck1 = mix(&start(&responder), &ephemeral_public, &es).expect("contributory");
    let (head, rest) = dst.split_at_mut(STATIC_AT);
    let (static_key, tag) = rest[..X25519_KEY_LEN + TAG_LEN].split_at_mut(X25519_KEY_LEN);
    static_key.copy_from_slice(&claimed);
    seal(&ck1, LABEL_STATIC, head, static_key, tag).expect("sealed");
    let ss = dalek_shared(ss_from, responder);
    // An anonymous intro (no claimed key) mixes nothing in.
    let ck2 = if claimed == [0; X25519_KEY_LEN] {
        ck1
    } else {
        mix(&ck1, &claimed, &ss).unwrap_or(ck1)
    };
    let (head, rest) = dst.split_at_mut(BODY_AT);
    let (body, tag) = rest.split_at_mut(BODY_LEN);
    fields(version, t0()).write(body);
    seal(&ck2, LABEL_BODY, head, body, tag).expect("sealed");
    dst
}

#[test]
fn an_initiator_proves_its_x25519_identity_in_the_intro_and_both_sides_agree_on_the_keys() {
    let me = other_x25519_identity();
    let (pending, intro) = write_intro(Some(me), EphemeralKey::random(&mut OsRng));
    assert_eq!(intro[0], 0x50);
    let accepted = responder(x25519_identity())
        .accept(&intro, t0(), &mut OsRng)
        .unwrap();
    assert_eq!(accepted.initiator_identity(), Some(&me.public()));
    let mut reply = vec![0u8; 1452];
    let (len, mut responder_keys) = accepted.reply(RESPONDER_INDEX, &[], &mut reply).unwrap();
    // The reply is no larger than the intro: it never amplifies.
    assert!(len <= INTRO_LEN);
    let mut established = pending.open_reply(&mut reply[..len]).unwrap();
    assert_keys_agree(&mut established.keys, &mut responder_keys);
}

#[test]
fn an_anonymous_initiator_proves_nothing_and_an_rsa_identity_is_not_put_in_the_intro() {
    for me in [None, Some(identity())] {
        let (_, intro) = write_intro(me, EphemeralKey::random(&mut OsRng));
        let accepted = responder(x25519_identity())
            .accept(&intro, t0(), &mut OsRng)
            .unwrap();
        assert_eq!(accepted.initiator_identity(), None);
    }
}

#[test]
fn a_claimed_identity_without_its_private_key_does_not_open() {
    // The attacker names the victim's key but can only make the exchange
    // of its own key with the responder's.
    let victim = other_x25519_identity().public();
    let claimed = *victim.x25519_bytes().unwrap();
    let attacker = StaticSecret::random_from_rng(OsRng);
    let intro = forged(claimed, &attacker, PROTOCOL_VERSION);
    let mut responder = responder(x25519_identity());
    assert_eq!(
        responder.accept(&intro, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::Decryption)
    );
    assert!(responder.replay_guard().is_empty());
    // The same construction with the real key is accepted: the forgery
    // failed for the key alone.
    let holder = StaticSecret::from(
        *other_x25519_identity()
            .x25519()
            .expect("an X25519 identity")
            .to_bytes(),
    );
    let genuine = forged(claimed, &holder, PROTOCOL_VERSION);
    let accepted = responder.accept(&genuine, t0(), &mut OsRng).unwrap();
    assert_eq!(accepted.initiator_identity(), Some(&victim));
}

#[test]
fn keys_drawn_ahead_serve_one_handshake_each_and_a_refused_intro_spends_none() {
    let mut stock = EphemeralKeys::new(2);
    stock.refill(&mut OsRng);
    let mut responder = responder(x25519_identity());
    // A forged intro (its body sealed with the wrong key) does not open:
    // the responder's key stays in stock for a real one.
    let attacker = StaticSecret::random_from_rng(OsRng);
    let forged = forged([7; X25519_KEY_LEN], &attacker, PROTOCOL_VERSION);
    assert!(
        responder
            .accept_from(&forged, t0(), &mut stock, &mut OsRng)
            .is_err()
    );
    assert_eq!(stock.len(), 2);

    let initiator_key = stock.take(&mut OsRng);
    let initiator_public = *initiator_key.public();
    let (pending, intro) = write_intro(None, initiator_key);
    assert_eq!(
        intro[1..STATIC_AT],
        initiator_public,
        "the intro carries it"
    );
    let accepted = responder
        .accept_from(&intro, t0(), &mut stock, &mut OsRng)
        .unwrap();
    assert!(stock.is_empty(), "the responder took the other");
    let mut reply = vec![0u8; 1452];
    let (len, mut responder_keys) = accepted.reply(RESPONDER_INDEX, &[], &mut reply).unwrap();
    let Ok((Header::IntroReply { ephemeral, .. }, _)) = Header::parse(&reply[..len]) else {
        panic!("an intro reply");
    };
    assert_ne!(
        ephemeral, initiator_public,
        "each side has a key of its own"
    );
    let mut established = pending.open_reply(&mut reply[..len]).unwrap();
    assert_keys_agree(&mut established.keys, &mut responder_keys);
}

#[test]
fn low_order_keys_are_refused_on_both_sides() {
    let mut responder = responder(x25519_identity());
    // An all-zero ephemeral key: the exchange with it is all zeros.
    let mut zero_ephemeral = [0u8; INTRO_LEN];
    zero_ephemeral[0] = PacketType::IntroX25519 as u8;
    assert_eq!(
        responder
            .accept(&zero_ephemeral, t0(), &mut OsRng)
            .map(|_| ()),
        Err(AcceptError::DegenerateKey)
    );
    // A static key of order 4 (u = 1), correctly sealed.
    let mut order_four = [0u8; X25519_KEY_LEN];
    order_four[0] = 1;
    let intro = forged(
        order_four,
        &StaticSecret::random_from_rng(OsRng),
        PROTOCOL_VERSION,
    );
    assert_eq!(
        responder.accept(&intro, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::DegenerateKey)
    );
    // The initiator refuses a low-order responder key.
    let low = PublicIdentity::from_x25519_bytes(order_four);
    let mut buf = [0u8; INTRO_LEN];
    assert!(matches!(
        PendingIntro::write(&low, 1, KeyConfig::default(), t0(), &mut OsRng, &mut buf),
        Err(IntroError::DegenerateKey)
    ));
}

#[test]
fn a_reply_with_a_low_order_ephemeral_key_is_refused_and_the_intro_stays_pending() {
    let mut intro = [0u8; INTRO_LEN];
    let pending = PendingIntro::write(
        &x25519_identity().public(),
        INITIATOR_INDEX,
        KeyConfig::default(),
        t0(),
        &mut OsRng,
        &mut intro,
    )
    .unwrap();
    let header = crate::header::Header::IntroReply {
        receiver_index: INITIATOR_INDEX,
        packet_number: crate::header::PacketNumber::encode(0, None).unwrap(),
        ephemeral: [0; X25519_KEY_LEN],
        sender_index: RESPONDER_INDEX,
    };
    let mut reply = [0u8; 80];
    let len = header.emit(&mut reply).unwrap();
    let refused = pending.open_reply(&mut reply[..len + 20]).unwrap_err();
    assert_eq!(refused.error, ReplyError::DegenerateKey);
}

#[test]
fn an_intro_of_the_other_kind_or_version_is_refused() {
    let rsa_intro = {
        let mut buf = [0u8; INTRO_LEN];
        let public = identity().public();
        PendingIntro::write(&public, 1, KeyConfig::default(), t0(), &mut OsRng, &mut buf).unwrap();
        buf
    };
    let x25519_intro = {
        let mut buf = [0u8; INTRO_LEN];
        let public = x25519_identity().public();
        PendingIntro::write(&public, 1, KeyConfig::default(), t0(), &mut OsRng, &mut buf).unwrap();
        buf
    };
    assert_eq!(
        responder(x25519_identity())
            .accept(&rsa_intro, t0(), &mut OsRng)
            .map(|_| ()),
        Err(AcceptError::WrongKind)
    );
    assert_eq!(
        responder(identity())
            .accept(&x25519_intro, t0(), &mut OsRng)
            .map(|_| ()),
        Err(AcceptError::WrongKind)
    );
    let version_1 = forged(
        [0; X25519_KEY_LEN],
        &StaticSecret::random_from_rng(OsRng),
        1,
    );
    assert_eq!(
        responder(x25519_identity())
            .accept(&version_1, t0(), &mut OsRng)
            .map(|_| ()),
        Err(AcceptError::UnsupportedVersion(1))
    );
}
