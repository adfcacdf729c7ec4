use std::collections::{BTreeMap, HashSet};

use proptest::collection::vec;
use proptest::prelude::*;
use rand_core::OsRng;

use super::*;
use crate::aead::{Backend, PACKET_LIMIT};
use crate::codec::tests::{OwnedFrame, any_frame};
use crate::error::{HeaderError, OpenError};
use crate::frame::{Message, Stream};
use crate::header::PacketType;

const SECRET: [u8; SECRET_LEN] = [0x5a; SECRET_LEN];
const INDEX: u32 = 0x0102_0304;

pub(crate) fn pair_with(config: KeyConfig) -> (PacketSealer, PacketOpener) {
    (
        PacketSealer::new(TrafficSecret::from_bytes(SECRET), INDEX, config),
        PacketOpener::new(TrafficSecret::from_bytes(SECRET), INDEX, config),
    )
}

fn pair() -> (PacketSealer, PacketOpener) {
    pair_with(KeyConfig::default())
}

fn seal(sealer: &mut PacketSealer, frames: &[OwnedFrame]) -> Vec<u8> {
    let mut buf = vec![0u8; 1452];
    let mut packet = sealer.start(&mut buf).unwrap();
    for frame in frames {
        packet.push(&frame.as_frame()).unwrap();
    }
    let (len, _) = packet.finish().unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn packets_open_in_order_with_consecutive_numbers_and_their_frames() {
    let (mut sealer, mut opener) = pair();
    for expected_number in 0..5u64 {
        let mut buf = [0u8; 200];
        let mut packet = sealer.start(&mut buf).unwrap();
        assert_eq!(packet.packet_number(), expected_number);
        packet.push(&Frame::Ping).unwrap();
        packet
            .push(&Frame::Message(Message {
                id: 0,
                data: b"abc",
            }))
            .unwrap();
        let (len, number) = packet.finish().unwrap();
        assert_eq!(number, expected_number);
        let opened = opener.open(&mut buf[..len]).unwrap();
        assert_eq!(opened.packet_number(), expected_number);
        assert_eq!(opened.header().receiver_index(), Some(INDEX));
        let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            frames,
            [
                Frame::Ping,
                Frame::Message(Message {
                    id: 0,
                    data: b"abc"
                })
            ]
        );
    }
    assert_eq!(sealer.next_packet_number(), 5);
}

#[test]
fn each_fresh_pair_opens_its_own_packets_and_no_other_pairs() {
    let config = KeyConfig::default();
    let mut pairs = [
        PacketSealer::with_opener(&mut OsRng, INDEX, config),
        PacketSealer::with_opener(&mut OsRng, INDEX, config),
    ];
    // Both sealers start at packet number 0, under different keys.
    let packets = pairs
        .each_mut()
        .map(|(sealer, _)| seal(sealer, &[OwnedFrame::Ping]));
    assert_ne!(packets[0], packets[1]);
    for (i, packet) in packets.iter().enumerate() {
        let other = &mut pairs[1 - i].1;
        assert_eq!(
            other.open(&mut packet.clone()).map(|_| ()),
            Err(OpenError::Authentication)
        );
        let own = &mut pairs[i].1;
        assert_eq!(
            own.open(&mut packet.clone()).map(|o| o.packet_number()),
            Ok(0)
        );
    }
}

#[test]
fn nonces_never_repeat_over_2_pow_20_packets_in_either_direction() {
    const PACKETS: u64 = 1 << 20;
    let mut seen = HashSet::with_capacity(2 * PACKETS as usize);
    for secret in [[1u8; SECRET_LEN], [2u8; SECRET_LEN]] {
        let mut sealer =
            PacketSealer::new(TrafficSecret::from_bytes(secret), 0, KeyConfig::default());
        let mut opener =
            PacketOpener::new(TrafficSecret::from_bytes(secret), 0, KeyConfig::default());
        let mut buf = [0u8; 32];
        for expected in 0..PACKETS {
            let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
            assert_eq!(number, expected);
            // The number is rebuilt from the sealed bytes, not the counter.
            assert_eq!(
                opener.open(&mut buf[..len]).unwrap().packet_number(),
                expected
            );
            sealer.on_ack(expected);
            assert!(
                seen.insert(sealer.key.get(Backend::default()).nonce(expected)),
                "nonce reused at {expected}"
            );
        }
    }
    assert_eq!(seen.len(), 2 * PACKETS as usize);
}

#[test]
fn point_7_the_key_limit_counts_packets_under_the_key_and_an_update_restores_it() {
    let config = KeyConfig {
        key_limit: 4,
        ..KeyConfig::default()
    };
    let (mut sealer, mut opener) = pair_with(config);
    let mut buf = [0u8; 64];
    for _ in 0..4 {
        let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
        opener.open(&mut buf[..len]).unwrap();
        sealer.on_ack(number);
    }
    assert!(sealer.key_update_due());
    assert_eq!(sealer.remaining_packets(), 0);
    assert!(matches!(
        sealer.start(&mut buf),
        Err(SealError::PacketLimitReached { limit: 4 })
    ));
    sealer.update_key().unwrap();
    assert_eq!(sealer.remaining_packets(), 4);
    // Numbers continue across the key: the sequence outlives it.
    let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
    assert_eq!(number, 4);
    let opened = opener.open(&mut buf[..len]).unwrap();
    assert!(opened.key_updated());
    assert_eq!(opened.packet_number(), 4);
    assert_eq!(PACKET_LIMIT, 1 << 23);
}

#[test]
fn a_key_not_confirmed_keeps_its_last_quarter_from_new_data_and_its_last_packet_for_a_close() {
    let config = KeyConfig {
        key_limit: 64,
        ..KeyConfig::default()
    };
    let (mut sealer, _) = pair_with(config);
    let mut buf = [0u8; 64];
    let mut seal = |sealer: &mut PacketSealer| sealer.start(&mut buf).unwrap().finish().unwrap();
    for _ in 0..48 {
        assert!(sealer.may_seal_new_data() && !sealer.key_spent());
        seal(&mut sealer);
    }
    assert!(sealer.key_update_due());
    assert!(!sealer.may_seal_new_data(), "the last quarter waits");
    for _ in 48..63 {
        assert!(!sealer.key_spent());
        seal(&mut sealer);
    }
    assert!(sealer.key_spent(), "one packet left, for the Close");
    assert_eq!(sealer.remaining_packets(), 1);
    // The peer's ACK of a packet under the key: neither limit holds, the
    // key is updated.
    sealer.on_ack(62);
    assert!(sealer.may_seal_new_data() && !sealer.key_spent());
    sealer.update_key().unwrap();
    assert_eq!(sealer.remaining_packets(), 64);
}

#[test]
fn an_update_is_refused_until_the_peer_acknowledges_the_current_key() {
    let (mut sealer, _) = pair();
    assert_eq!(sealer.update_key(), Err(KeyUpdateError::NotConfirmed));
    let mut buf = [0u8; 64];
    let (_, first) = sealer.start(&mut buf).unwrap().finish().unwrap();
    // An ACK for a number never sent confirms nothing.
    sealer.on_ack(first + 10);
    assert!(!sealer.key_update_confirmed());
    sealer.on_ack(first);
    sealer.update_key().unwrap();
    // The ACK was for the old key: the new one is not confirmed yet.
    assert_eq!(sealer.update_key(), Err(KeyUpdateError::NotConfirmed));
}

#[test]
fn a_forged_phase_flip_does_not_move_the_opener() {
    let (mut sealer, mut opener) = pair();
    let mut buf = [0u8; 64];
    let (len, _) = sealer.start(&mut buf).unwrap().finish().unwrap();
    let mut forged = buf[..len].to_vec();
    forged[0] ^= 0x04;
    assert_eq!(
        opener.open(&mut forged).map(|_| ()),
        Err(OpenError::Authentication)
    );
    assert_eq!(opener.key_phase(), KeyPhase(false));
    // The genuine packet still opens under the current key.
    assert!(!opener.open(&mut buf[..len]).unwrap().key_updated());
}

#[test]
fn a_skipped_number_is_never_sent_and_the_next_packet_jumps_it() {
    let (mut sealer, mut opener) = pair();
    let mut buf = [0u8; 64];
    assert_eq!(sealer.skip_packet_number(), Ok(0));
    let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
    assert_eq!(number, 1);
    assert_eq!(sealer.packets_sealed_under_key(), 1);
    assert_eq!(opener.open(&mut buf[..len]).unwrap().packet_number(), 1);
}

/// Many key phases with a lowered limit; each flip surrounded by loss and
/// reordering. Every payload arrives exactly once (lost packets are
/// resent under new numbers, as the reliability layer does), and every
/// packet delivered opens.
#[test]
fn many_key_updates_with_loss_and_reordering_lose_and_duplicate_nothing() {
    const LIMIT: u64 = 16;
    const MESSAGES: u32 = 2_000;
    let config = KeyConfig {
        key_limit: LIMIT,
        ..KeyConfig::default()
    };
    let (mut sealer, mut opener) = pair_with(config);
    let mut in_flight: Vec<(u64, u32, Vec<u8>)> = Vec::new();
    let mut to_send: std::collections::VecDeque<u32> = (0..MESSAGES).collect();
    let mut delivered: BTreeMap<u32, u64> = BTreeMap::new();
    let mut opened_numbers = HashSet::new();
    let mut flips = 0;
    let mut step = 0u64;
    while delivered.len() < MESSAGES as usize {
        // Send a few packets, updating the key as soon as it is allowed
        // and due.
        for _ in 0..3 {
            let Some(message) = to_send.pop_front() else {
                break;
            };
            if sealer.key_update_due() && sealer.key_update_confirmed() {
                sealer.update_key().unwrap();
            }
            let mut buf = vec![0u8; 64];
            let Ok(mut packet) = sealer.start(&mut buf) else {
                // Limit reached, update not yet confirmed: wait for ACKs.
                to_send.push_front(message);
                break;
            };
            packet
                .push(&Frame::Message(Message {
                    id: u64::from(message),
                    data: &message.to_be_bytes(),
                }))
                .unwrap();
            let (len, number) = packet.finish().unwrap();
            buf.truncate(len);
            in_flight.push((number, message, buf));
        }
        // The network: every 7th packet is lost, the rest arrive with the
        // newest two swapped every other step.
        step += 1;
        if step.is_multiple_of(2) && in_flight.len() >= 2 {
            let n = in_flight.len();
            in_flight.swap(n - 1, n - 2);
        }
        let keep_back = usize::from(step.is_multiple_of(3)).min(in_flight.len());
        let arriving: Vec<_> = in_flight.drain(..in_flight.len() - keep_back).collect();
        let mut largest_acked = None;
        for (number, message, mut bytes) in arriving {
            if number % 7 == 3 {
                to_send.push_back(message);
                continue;
            }
            let opened = opener
                .open(&mut bytes)
                .unwrap_or_else(|e| panic!("packet {number} did not open: {e}"));
            flips += usize::from(opened.key_updated());
            assert_eq!(opened.packet_number(), number);
            assert!(
                opened_numbers.insert(number),
                "packet {number} opened twice"
            );
            let Some(Ok(Frame::Message(m))) = opened.frames().next() else {
                panic!("no message in {number}")
            };
            let got = u32::from_be_bytes(m.data.try_into().unwrap());
            assert_eq!(got, message);
            assert!(
                delivered.insert(got, number).is_none(),
                "message {got} twice"
            );
            largest_acked = largest_acked.max(Some(number));
        }
        if let Some(acked) = largest_acked {
            sealer.on_ack(acked);
        }
    }
    assert_eq!(delivered.len(), MESSAGES as usize);
    assert!(flips > 50, "only {flips} key updates");
    assert_eq!(opener.key_phase(), sealer.key_phase());
}

#[test]
fn a_packet_reordered_across_a_flip_opens_under_the_previous_key() {
    let config = KeyConfig {
        key_limit: 2,
        ..KeyConfig::default()
    };
    let (mut sealer, mut opener) = pair_with(config);
    let mut old = [0u8; 64];
    let mut first = [0u8; 64];
    let (len0, n0) = sealer.start(&mut first).unwrap().finish().unwrap();
    let (old_len, _) = sealer.start(&mut old).unwrap().finish().unwrap();
    let old_copy = old;
    opener.open(&mut first[..len0]).unwrap();
    sealer.on_ack(n0);
    sealer.update_key().unwrap();
    let mut new = [0u8; 64];
    let (new_len, _) = sealer.start(&mut new).unwrap().finish().unwrap();
    assert!(opener.open(&mut new[..new_len]).unwrap().key_updated());
    // The old-phase packet arrives late: the previous key opens it.
    let late = opener.open(&mut old[..old_len]).unwrap();
    assert!(!late.key_updated());
    assert_eq!(opener.key_phase(), KeyPhase(true));
    // Once discarded, the previous key no longer does, and the late
    // packet is not taken for yet another update.
    opener.discard_previous_key();
    let mut again = old_copy;
    assert_eq!(
        opener.open(&mut again[..old_len]).map(|_| ()),
        Err(OpenError::Authentication)
    );
    assert_eq!(opener.key_phase(), KeyPhase(true));
}

#[test]
fn released_keys_expand_again_and_packet_numbers_run_on() {
    let (mut sealer, mut opener) = pair();
    assert!(!sealer.key_expanded() && !opener.keys_expanded());
    let mut buf = [0u8; 64];
    for expected in 0..4 {
        let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
        assert_eq!(number, expected, "a release does not reset the counter");
        assert!(sealer.key_expanded());
        assert_eq!(
            opener.open(&mut buf[..len]).unwrap().packet_number(),
            number
        );
        assert!(opener.keys_expanded());
        sealer.release_key();
        opener.release_keys();
        assert!(!sealer.key_expanded() && !opener.keys_expanded());
    }
    // A forged phase flip expands the next key; a release gives it back.
    let (len, _) = sealer.start(&mut buf).unwrap().finish().unwrap();
    buf[0] ^= 0x04;
    assert!(opener.open(&mut buf[..len]).is_err());
    opener.release_keys();
    assert!(!opener.keys_expanded());
}

#[test]
fn a_key_update_across_releases_opens_both_phases() {
    let config = KeyConfig {
        key_limit: 2,
        ..KeyConfig::default()
    };
    let (mut sealer, mut opener) = pair_with(config);
    let mut first = [0u8; 64];
    let mut old = [0u8; 64];
    let (len0, n0) = sealer.start(&mut first).unwrap().finish().unwrap();
    let (old_len, _) = sealer.start(&mut old).unwrap().finish().unwrap();
    opener.open(&mut first[..len0]).unwrap();
    sealer.on_ack(n0);
    // Both sides go quiet before the update, and again after it.
    sealer.release_key();
    opener.release_keys();
    sealer.update_key().unwrap();
    sealer.release_key();
    let mut new = [0u8; 64];
    let (new_len, _) = sealer.start(&mut new).unwrap().finish().unwrap();
    let opened = opener.open(&mut new[..new_len]).unwrap();
    assert!(opened.key_updated());
    assert_eq!(opener.key_phase(), KeyPhase(true));
    opener.release_keys();
    // The old phase's packet arrives late: the previous key, expanded at
    // the update although a release had given it back, opens it.
    assert!(!opener.open(&mut old[..old_len]).unwrap().key_updated());
    // And the new phase runs on after another release each side.
    sealer.release_key();
    opener.release_keys();
    let (len, _) = sealer.start(&mut new).unwrap().finish().unwrap();
    let opened = opener.open(&mut new[..len]).unwrap();
    assert!(!opened.key_updated());
    assert_eq!(opener.key_phase(), KeyPhase(true));
}

#[test]
fn a_frame_that_does_not_fit_is_not_appended() {
    let (mut sealer, mut opener) = pair();
    let mut buf = [0u8; 48];
    let mut packet = sealer.start(&mut buf).unwrap();
    // A Data header of 7 bytes: its number takes two (`encode_data`).
    assert_eq!(packet.remaining(), 48 - 7 - TAG_LEN);
    let big = Frame::Stream(Stream {
        id: 1,
        offset: 0,
        fin: false,
        data: &[7; 30],
    });
    assert!(matches!(
        packet.push(&big),
        Err(EncodeError::BufferTooSmall { .. })
    ));
    assert_eq!(packet.payload_len(), 0);
    packet.push(&Frame::Ping).unwrap();
    let (len, _) = packet.finish().unwrap();
    assert_eq!(opener.open(&mut buf[..len]).unwrap().payload(), &[0x01]);
}

#[test]
fn capacity_helpers_fill_what_is_left_of_the_packet_exactly() {
    let (mut sealer, _) = pair();
    let mut buf = [0u8; 1452];
    let mut packet = sealer.start(&mut buf).unwrap();
    packet.push(&Frame::Ping).unwrap();
    let data = [0xab; 1452];
    let capacity = packet.stream_capacity(9, 1 << 20);
    let frame = |len: usize| {
        Frame::Stream(Stream {
            id: 9,
            offset: 1 << 20,
            fin: false,
            data: &data[..len],
        })
    };
    assert!(packet.push(&frame(capacity + 1)).is_err());
    packet.push(&frame(capacity)).unwrap();
    assert!(packet.remaining() <= 1);
    let mut packet = sealer.start(&mut buf).unwrap();
    let capacity = packet.message_capacity(300);
    assert!(
        packet
            .push(&Frame::Message(Message {
                id: 300,
                data: &data[..capacity + 1]
            }))
            .is_err()
    );
    packet
        .push(&Frame::Message(Message {
            id: 300,
            data: &data[..capacity],
        }))
        .unwrap();
    assert!(packet.remaining() <= 1);
}

#[test]
fn padding_reaches_the_requested_datagram_size_exactly() {
    let (mut sealer, mut opener) = pair();
    let mut buf = [0u8; 1200];
    let mut packet = sealer.start(&mut buf).unwrap();
    packet.push(&Frame::Ping).unwrap();
    packet.pad_to(1200).unwrap();
    let (len, _) = packet.finish().unwrap();
    assert_eq!(len, 1200);
    let opened = opener.open(&mut buf[..len]).unwrap();
    let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
    assert_eq!(
        frames,
        [
            Frame::Ping,
            Frame::Padding(Padding {
                len: 1200 - 7 - 1 - TAG_LEN
            })
        ]
    );
}

#[test]
fn a_buffer_without_room_for_header_and_tag_is_refused() {
    let (mut sealer, _) = pair();
    let mut buf = [0u8; 21];
    assert_eq!(
        sealer.start(&mut buf).map(|_| ()),
        Err(SealError::BufferTooSmall {
            needed: 23,
            available: 21
        })
    );
}

#[test]
fn point_5_the_data_path_refuses_intro_replies_and_intros() {
    let (mut sealer, mut opener) = pair();
    let mut buf = [0u8; 200];
    let (len, _) = sealer
        .start_reply([9; X25519_KEY_LEN], 77, &mut buf)
        .unwrap()
        .finish()
        .unwrap();
    // Authentic under the opener's key, but an intro reply.
    assert_eq!(
        opener.open(&mut buf[..len].to_vec()).map(|_| ()),
        Err(OpenError::WrongType(PacketType::IntroReply))
    );
    assert!(
        opener
            .open_typed(&mut buf[..len], PacketType::IntroReply)
            .is_ok()
    );
    let mut intro = [0x10; 257];
    assert_eq!(
        opener.open(&mut intro).map(|_| ()),
        Err(OpenError::WrongType(PacketType::Intro))
    );
}

#[test]
fn wrong_key_index_truncation_and_empty_are_refused_with_typed_errors() {
    let (mut sealer, _) = pair();
    let packet = seal(&mut sealer, &[OwnedFrame::Ping]);
    let mut wrong = PacketOpener::new(
        TrafficSecret::from_bytes([0; SECRET_LEN]),
        INDEX,
        KeyConfig::default(),
    );
    assert_eq!(
        wrong.open(&mut packet.clone()).map(|_| ()),
        Err(OpenError::Authentication)
    );
    let mut elsewhere = PacketOpener::new(
        TrafficSecret::from_bytes(SECRET),
        INDEX + 1,
        KeyConfig::default(),
    );
    assert_eq!(
        elsewhere.open(&mut packet.clone()).map(|_| ()),
        Err(OpenError::WrongReceiverIndex(INDEX))
    );
    let (_, mut opener) = pair();
    assert_eq!(
        opener.open(&mut packet[..10].to_vec()).map(|_| ()),
        Err(OpenError::TooShort)
    );
    assert_eq!(
        opener.open(&mut []).map(|_| ()),
        Err(OpenError::Header(HeaderError::Empty))
    );
}

#[test]
fn every_single_bit_flip_of_a_sealed_packet_is_refused() {
    for backend in Backend::ALL {
        let config = KeyConfig {
            backend: *backend,
            ..KeyConfig::default()
        };
        let (mut sealer, mut opener) = pair_with(config);
        let packet = seal(
            &mut sealer,
            &[OwnedFrame::Message {
                id: 0,
                data: b"flip me".to_vec(),
            }],
        );
        for bit in 0..packet.len() * 8 {
            let mut copy = packet.clone();
            copy[bit / 8] ^= 1 << (bit % 8);
            assert!(opener.open(&mut copy).is_err(), "{backend:?} bit {bit}");
        }
        assert_eq!(opener.largest_received(), None);
        assert_eq!(opener.key_phase(), KeyPhase(false));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sealed_frames_open_to_the_same_frames(frames in vec(any_frame(), 1..4)) {
        let (mut sealer, mut opener) = pair();
        let mut packet = seal(&mut sealer, &frames);
        let opened = opener.open(&mut packet).unwrap();
        let mut expected = vec![0u8; 1452];
        let mut at = 0;
        for frame in &frames {
            at += frame.as_frame().encode(&mut expected[at..]).unwrap();
        }
        prop_assert_eq!(opened.payload(), &expected[..at]);
    }

    #[test]
    fn arbitrary_datagrams_never_panic_and_never_open(bytes in vec(any::<u8>(), 0..200)) {
        let (_, mut opener) = pair();
        let mut bytes = bytes;
        prop_assert!(opener.open(&mut bytes).is_err());
    }

    #[test]
    fn mutated_or_truncated_packets_never_panic_and_never_open(
        frames in vec(any_frame(), 1..4),
        mutations in vec((any::<prop::sample::Index>(), 1u8..), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let (mut sealer, mut opener) = pair();
        let packet = seal(&mut sealer, &frames);
        let mut mutated = packet.clone();
        for (index, xor) in mutations {
            let i = index.index(mutated.len());
            mutated[i] ^= xor;
        }
        if mutated != packet {
            prop_assert!(opener.open(&mut mutated).is_err());
        }
        let cut = cut.index(packet.len());
        prop_assert!(opener.open(&mut packet[..cut].to_vec()).is_err());
    }
}
