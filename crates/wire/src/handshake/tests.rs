//! The handshake's tests: both sides, replays, forgeries and bounds.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use rand_core::OsRng;

use rsa::Oaep;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use super::body::{INTRO_BODY_LEN, IntroBody};
use super::rsa_intro::RSA_CIPHERTEXT_LEN;
use super::schedule::derive_secrets;
use super::*;
use crate::error::{AcceptError, IntroError, OpenError, ReplyBuildError, ReplyError};
use crate::frame::{Frame, Message, Padding};
use crate::header::PacketType;
use crate::identity::{IdentityKey, IdentityKind};
use crate::keys::KeyConfig;
use crate::replay::ReplayGuard;
use crate::test_support::{identity, other_identity, other_x25519_identity, t0, x25519_identity};

const INITIATOR_INDEX: u32 = 0x1111_1111;
const RESPONDER_INDEX: u32 = 0x2222_2222;

/// One identity of each kind: every test of both intros runs on both.
fn kinds() -> [&'static IdentityKey; 2] {
    [identity(), x25519_identity()]
}

/// Another identity of the same kind as `key`.
fn other(key: &IdentityKey) -> &'static IdentityKey {
    match key.kind() {
        IdentityKind::Rsa => other_identity(),
        IdentityKind::X25519 => other_x25519_identity(),
    }
}

fn responder(identity: &IdentityKey) -> Responder {
    Responder::new(
        identity.clone(),
        ReplayGuard::default(),
        KeyConfig::default(),
    )
}

fn intro(to: &IdentityKey, now: SystemTime) -> (PendingIntro, [u8; INTRO_LEN]) {
    let mut buf = [0u8; INTRO_LEN];
    let pending = PendingIntro::write(
        &to.public(),
        INITIATOR_INDEX,
        KeyConfig::default(),
        now,
        &mut OsRng,
        &mut buf,
    )
    .unwrap();
    (pending, buf)
}

fn reply(accepted: Accepted, frames: &[Frame<'_>]) -> (Vec<u8>, ConnectionKeys) {
    let mut buf = vec![0u8; 1452];
    let (len, keys) = accepted.reply(RESPONDER_INDEX, frames, &mut buf).unwrap();
    buf.truncate(len);
    (buf, keys)
}

/// A data packet with one message, sealed by `keys`.
fn data(keys: &mut ConnectionKeys, message: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 200];
    let mut packet = keys.sealer.start(&mut buf).unwrap();
    packet
        .push(&Frame::Message(Message {
            id: 0,
            data: message,
        }))
        .unwrap();
    let (len, _) = packet.finish().unwrap();
    buf.truncate(len);
    buf
}

/// A whole handshake: initiator's keys, responder's keys, reply bytes.
fn handshake(key: &IdentityKey) -> (ConnectionKeys, ConnectionKeys, Vec<u8>, [u8; INTRO_LEN]) {
    let (pending, intro_bytes) = intro(key, t0());
    let accepted = responder(key)
        .accept(&intro_bytes, t0(), &mut OsRng)
        .unwrap();
    let (reply_bytes, responder_keys) = reply(accepted, &[]);
    let mut copy = reply_bytes.clone();
    let established = pending.open_reply(&mut copy).unwrap();
    (established.keys, responder_keys, reply_bytes, intro_bytes)
}

#[test]
fn intro_reply_and_data_round_trip_in_one_round_trip() {
    for key in kinds() {
        let (pending, intro_bytes) = intro(key, t0());
        assert_eq!(pending.id(), intro_id(&intro_bytes));
        let accepted = responder(key)
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        assert_eq!(accepted.intro_id(), pending.id());
        assert_eq!(accepted.initiator_index(), INITIATOR_INDEX);
        let (mut reply_bytes, mut responder_keys) = reply(
            accepted,
            &[Frame::Message(Message {
                id: 0,
                data: b"welcome",
            })],
        );
        let established = pending.open_reply(&mut reply_bytes).unwrap();
        let frames: Vec<_> = established
            .reply
            .frames()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            frames,
            [Frame::Message(Message {
                id: 0,
                data: b"welcome"
            })]
        );
        let mut initiator = established.keys;
        assert_eq!(initiator.sealer.peer_index(), RESPONDER_INDEX);

        // Both directions carry data; the reply used the responder's packet 0.
        let mut packet = data(&mut initiator, b"hi");
        let opened = responder_keys.opener.open(&mut packet).unwrap();
        assert_eq!(opened.packet_number(), 0);
        let mut packet = data(&mut responder_keys, b"hello");
        let opened = initiator.opener.open(&mut packet).unwrap();
        assert_eq!(opened.packet_number(), 1);
    }
}

#[test]
fn point_1_a_replayed_intro_to_a_restarted_responder_gets_keys_that_open_nothing_captured() {
    for key in kinds() {
        let (mut initiator, _, _, intro_bytes) = handshake(key);
        let captured = data(&mut initiator, b"secret");
        // The responder restarted (fresh guard) and its clock stepped back.
        for now in [t0(), t0() - Duration::from_secs(20)] {
            let accepted = responder(key)
                .accept(&intro_bytes, now, &mut OsRng)
                .unwrap();
            let (_, mut replayed_session) = reply(accepted, &[]);
            assert_eq!(
                replayed_session
                    .opener
                    .open(&mut captured.clone())
                    .map(|_| ()),
                Err(OpenError::Authentication)
            );
        }
    }
}

#[test]
fn point_2_the_identity_key_and_the_recording_do_not_open_the_session() {
    for key in kinds() {
        let (mut initiator, _, reply_bytes, intro_bytes) = handshake(key);
        let recorded = data(&mut initiator, b"recorded");
        // The attacker holds the RSA key: it decrypts the intro, runs the
        // responder's side on it and even sees the genuine reply header, but
        // lacks both X25519 private keys.
        let accepted = Responder::new(key.clone(), ReplayGuard::default(), KeyConfig::default())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        let (attacker_reply, mut attacker) = reply(accepted, &[]);
        assert_ne!(attacker_reply[5..38], reply_bytes[5..38]);
        assert_eq!(
            attacker.opener.open(&mut recorded.clone()).map(|_| ()),
            Err(OpenError::Authentication)
        );
    }
}

#[test]
fn point_3_a_repeated_reply_is_recognised_and_yields_no_second_key_set() {
    for key in kinds() {
        let (pending, intro_bytes) = intro(key, t0());
        let accepted = responder(key)
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        // The responder's transcript keeps no intro hash: it never takes
        // its own reply for a repeat.
        let responder_transcript = accepted.transcript(RESPONDER_INDEX).unwrap();
        let (reply_bytes, _) = reply(accepted, &[]);
        assert!(!responder_transcript.is_repeated_reply(&reply_bytes));
        let mut copy = reply_bytes.clone();
        let established = pending.open_reply(&mut copy).unwrap();
        // `pending` is consumed; the only thing a repeat can do is be
        // recognised as one.
        assert!(established.transcript.is_repeated_reply(&reply_bytes));
        let mut other = reply_bytes.clone();
        other[10] ^= 1;
        assert!(!established.transcript.is_repeated_reply(&other));
        assert!(!established.transcript.is_repeated_reply(&[]));
    }
}

#[test]
fn a_forged_or_foreign_reply_leaves_the_intro_pending() {
    for key in kinds() {
        let (pending, intro_bytes) = intro(key, t0());
        let accepted = responder(key)
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        let (reply_bytes, mut responder_keys) = reply(accepted, &[]);
        let mut forged = reply_bytes.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        let refused = pending.open_reply(&mut forged).unwrap_err();
        assert_eq!(refused.error, ReplyError::Open(OpenError::Authentication));
        // A data packet is not a reply (point 5, handshake side).
        let mut packet = data(&mut responder_keys, b"x");
        let refused = refused.pending.open_reply(&mut packet).unwrap_err();
        assert_eq!(
            refused.error,
            ReplyError::Open(OpenError::WrongType(PacketType::Data))
        );
        // A reply to somebody else's intro does not open.
        let (other, other_intro) = intro(key, t0());
        let other_accepted = responder(key)
            .accept(&other_intro, t0(), &mut OsRng)
            .unwrap();
        let (other_reply, _) = reply(other_accepted, &[]);
        let refused = refused
            .pending
            .open_reply(&mut other_reply.clone())
            .unwrap_err();
        assert!(other.open_reply(&mut other_reply.clone()).is_ok());
        // The pending intro still accepts the genuine reply.
        assert!(refused.pending.open_reply(&mut reply_bytes.clone()).is_ok());
    }
}

#[test]
fn point_4_degenerate_key_material_is_refused_and_reflection_does_not_open() {
    let body = |secret: [u8; 32], ephemeral: [u8; 32]| IntroBody {
        version: PROTOCOL_VERSION,
        timestamp_ms: unix_millis(t0()).unwrap(),
        secret: Zeroizing::new(secret),
        ephemeral,
        initiator_index: 1,
    };
    let good_ephemeral = PublicKey::from(&StaticSecret::random_from_rng(OsRng)).to_bytes();
    let mut responder = responder(identity());
    // All-zero initiator secret.
    let zero_secret = raw_intro(&body([0; 32], good_ephemeral).to_bytes()[..]);
    assert_eq!(
        responder.accept(&zero_secret, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::DegenerateKey)
    );
    // A low-order X25519 point: the shared secret would be all zeros.
    let zero_point = raw_intro(&body([7; 32], [0; 32]).to_bytes()[..]);
    assert_eq!(
        responder.accept(&zero_point, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::DegenerateKey)
    );
    assert!(derive_secrets(&[7; 32], &[0; 32], &[1; 32]).is_none());
    // The responder's own packets, reflected back to it, do not open:
    // the two directions' keys come from distinct labels.
    let (_, mut responder_keys, _, _) = handshake(identity());
    let mut reflected = data(&mut responder_keys, b"mirror");
    reflected[1..5].copy_from_slice(&RESPONDER_INDEX.to_be_bytes());
    assert_eq!(
        responder_keys.opener.open(&mut reflected).map(|_| ()),
        Err(OpenError::Authentication)
    );
}

#[test]
fn point_6_the_reply_is_bounded_by_three_times_the_intro() {
    for key in kinds() {
        let (_, intro_bytes) = intro(key, t0());
        let big = [0u8; 1400];
        let accepted = responder(key)
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        assert_eq!(accepted.max_reply_len(), 3 * INTRO_LEN);
        let mut buf = [0u8; 1452];
        assert!(matches!(
            accepted.reply(
                1,
                &[Frame::Message(Message { id: 0, data: &big })],
                &mut buf
            ),
            Err(ReplyBuildError::Encode(_))
        ));
        // Padding to the whole buffer stops at the bound.
        let accepted = responder(key)
            .accept(&intro(key, t0()).1, t0(), &mut OsRng)
            .unwrap();
        let padding = Frame::Padding(Padding {
            len: MAX_REPLY_LEN - 1 - 4 - 1 - 32 - 4 - 16,
        });
        let (len, _) = accepted.reply(1, &[padding], &mut buf).unwrap();
        assert_eq!(len, MAX_REPLY_LEN);
    }
}

#[test]
fn point_8_packets_name_their_connection_by_the_receivers_index() {
    for key in kinds() {
        let (mut initiator, mut responder_keys, reply_bytes, _) = handshake(key);
        assert_eq!(
            crate::header::peek_receiver_index(&reply_bytes),
            Some(INITIATOR_INDEX)
        );
        // The responder's table maps its index to the connection; a packet
        // from any address finds it, and only opens if authentic.
        let table: HashMap<u32, usize> = HashMap::from([(RESPONDER_INDEX, 0), (9, 1)]);
        let mut packet = data(&mut initiator, b"after rebinding");
        let index = crate::header::peek_receiver_index(&packet).unwrap();
        assert_eq!(table.get(&index), Some(&0));
        assert!(responder_keys.opener.open(&mut packet).is_ok());
    }
}

#[test]
fn malformed_intros_are_refused_with_typed_errors() {
    for key in kinds() {
        let (_, intro_bytes) = intro(key, t0());
        let mut responder = responder(key);
        let mut flipped = intro_bytes;
        flipped[100] ^= 0x01;
        assert_eq!(
            responder.accept(&flipped, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Decryption)
        );
        assert_eq!(
            responder
                .accept(&intro_bytes[..INTRO_LEN - 1], t0(), &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::WrongLength(INTRO_LEN - 1))
        );
        let mut data_type = intro_bytes;
        data_type[0] = PacketType::Data as u8;
        assert_eq!(
            responder.accept(&data_type, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::NotAnIntro)
        );
        assert_eq!(
            responder.accept(&[], t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::NotAnIntro)
        );
        assert_eq!(
            responder
                .accept(
                    &intro_bytes,
                    UNIX_EPOCH - Duration::from_secs(1),
                    &mut OsRng
                )
                .map(|_| ()),
            Err(AcceptError::ClockBeforeEpoch)
        );
        let mut wrong = Responder::new(
            other(key).clone(),
            ReplayGuard::default(),
            KeyConfig::default(),
        );
        assert_eq!(
            wrong.accept(&intro_bytes, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Decryption)
        );
        assert!(wrong.replay_guard().is_empty());
    }
}

#[test]
fn a_repeated_intro_is_refused_as_a_replay_naming_its_id() {
    for key in kinds() {
        let (pending, intro_bytes) = intro(key, t0());
        let mut responder = responder(key);
        responder.accept(&intro_bytes, t0(), &mut OsRng).unwrap();
        assert_eq!(
            responder
                .accept(&intro_bytes, t0() + Duration::from_secs(5), &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::Replayed {
                intro_id: pending.id()
            })
        );
        let late = t0() + Duration::from_secs(31);
        assert!(matches!(
            responder.accept(&intro_bytes, late, &mut OsRng),
            Err(AcceptError::StaleTimestamp { skew_ms: 31_000 })
        ));
    }
}

/// Encrypts an arbitrary plaintext as an intro, bypassing `PendingIntro`.
fn raw_intro(plaintext: &[u8]) -> Vec<u8> {
    let public = identity().public();
    let mut out = vec![PacketType::Intro as u8];
    out.extend(
        public
            .rsa()
            .unwrap()
            .key()
            .encrypt(&mut OsRng, Oaep::new::<Sha256>(), plaintext)
            .unwrap(),
    );
    out
}

#[test]
fn another_protocol_version_or_body_length_is_refused() {
    let mut body = IntroBody {
        version: 1,
        timestamp_ms: unix_millis(t0()).unwrap(),
        secret: Zeroizing::new([3; 32]),
        ephemeral: [9; 32],
        initiator_index: 1,
    };
    let mut responder = responder(identity());
    let version_1 = raw_intro(&body.to_bytes()[..]);
    assert_eq!(
        responder.accept(&version_1, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::UnsupportedVersion(1))
    );
    body.version = PROTOCOL_VERSION;
    let short = raw_intro(&body.to_bytes()[..INTRO_BODY_LEN - 1]);
    assert_eq!(
        responder.accept(&short, t0(), &mut OsRng).map(|_| ()),
        Err(AcceptError::Malformed)
    );
}

#[test]
fn a_short_buffer_or_pre_epoch_clock_is_refused_when_writing_an_intro() {
    for key in kinds() {
        let public = key.public();
        let write = |now, buf: &mut [u8]| {
            PendingIntro::write(&public, 1, KeyConfig::default(), now, &mut OsRng, buf)
        };
        assert!(matches!(
            write(t0(), &mut [0u8; INTRO_LEN - 1]),
            Err(IntroError::BufferTooSmall {
                needed: INTRO_LEN,
                ..
            })
        ));
        assert!(matches!(
            write(UNIX_EPOCH - Duration::from_secs(1), &mut [0u8; INTRO_LEN]),
            Err(IntroError::ClockBeforeEpoch)
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The intro plaintext codec: decode ∘ encode = id, and every other
    /// length is refused.
    #[test]
    fn intro_bodies_round_trip_and_every_truncation_is_refused(
        version in any::<u32>(),
        timestamp_ms in any::<u64>(),
        secret in any::<[u8; 32]>(),
        ephemeral in any::<[u8; 32]>(),
        initiator_index in any::<u32>(),
    ) {
        let body = IntroBody { version, timestamp_ms, secret: Zeroizing::new(secret), ephemeral, initiator_index };
        let bytes = body.to_bytes();
        let back = IntroBody::from_bytes(&bytes[..]).unwrap();
        prop_assert_eq!(back.to_bytes()[..].to_vec(), bytes[..].to_vec());
        for cut in 0..INTRO_BODY_LEN {
            prop_assert!(IntroBody::from_bytes(&bytes[..cut]).is_none());
        }
    }
}

proptest! {
    // Each case costs an RSA decryption or an X25519 exchange: few cases.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn arbitrary_intro_sized_datagrams_never_panic_and_are_refused(body in proptest::collection::vec(any::<u8>(), RSA_CIPHERTEXT_LEN)) {
        for (key, packet_type) in kinds().into_iter().zip([PacketType::Intro, PacketType::IntroX25519]) {
            let mut datagram = vec![packet_type as u8];
            datagram.extend(&body);
            let mut responder = responder(key);
            prop_assert!(responder.accept(&datagram, t0(), &mut OsRng).is_err());
            prop_assert!(responder.replay_guard().is_empty());
        }
    }

    /// A genuine X25519 intro with bits flipped anywhere is refused.
    #[test]
    fn mutated_x25519_intros_are_refused(
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 1..4),
    ) {
        let (_, intro_bytes) = intro(x25519_identity(), t0());
        let mut mutated = intro_bytes;
        for (index, xor) in mutations {
            let i = index.index(mutated.len());
            mutated[i] ^= xor;
        }
        // Two flips of one byte may cancel out.
        prop_assume!(mutated != intro_bytes);
        let mut responder = responder(x25519_identity());
        prop_assert!(responder.accept(&mutated, t0(), &mut OsRng).is_err());
        prop_assert!(responder.accept(&intro_bytes, t0(), &mut OsRng).is_ok());
    }

    #[test]
    fn mutated_or_truncated_replies_never_panic_and_never_establish(
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        for key in kinds() {
            let (pending, intro_bytes) = intro(key, t0());
            let accepted = responder(key).accept(&intro_bytes, t0(), &mut OsRng).unwrap();
            let (reply_bytes, _) = reply(accepted, &[Frame::Ping]);
            let mut mutated = reply_bytes.clone();
            for &(index, xor) in &mutations {
                let i = index.index(mutated.len());
                mutated[i] ^= xor;
            }
            // Two flips of one byte may cancel out.
            prop_assume!(mutated != reply_bytes);
            let refused = pending.open_reply(&mut mutated).unwrap_err();
            let cut = cut.index(reply_bytes.len());
            let refused = refused.pending.open_reply(&mut reply_bytes[..cut].to_vec()).unwrap_err();
            prop_assert!(refused.pending.open_reply(&mut reply_bytes.clone()).is_ok());
        }
    }
}
