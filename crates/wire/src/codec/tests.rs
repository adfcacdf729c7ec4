use super::*;
use crate::frame::{
    Close, CloseKind, DataBlocked, Datagram, Identity, MAX_ACK_RANGES, MaxData, MaxMessageSize,
    MaxStreamData, MaxStreams, Message, NewTicket, ResetStream, StopSending, Stream,
    StreamDataBlocked,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// An owned frame, so proptest can generate what `Frame` borrows.
#[derive(Debug, Clone)]
pub(crate) enum OwnedFrame {
    Padding(usize),
    Ping,
    Ack {
        ranges: Vec<RangeInclusive<u64>>,
        delay_us: u64,
        receive_us: u64,
    },
    Stream {
        id: u64,
        offset: u64,
        fin: bool,
        data: Vec<u8>,
    },
    Message {
        id: u64,
        data: Vec<u8>,
    },
    MaxData(u64),
    MaxStreamData {
        id: u64,
        max: u64,
    },
    Close {
        kind: CloseKind,
        code: u64,
        reason: Vec<u8>,
    },
    ResetStream(ResetStream),
    StopSending(StopSending),
    DataBlocked(DataBlocked),
    StreamDataBlocked(StreamDataBlocked),
    MaxStreams(MaxStreams),
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    Datagram(Vec<u8>),
    AckFrequency(AckFrequency),
    Identity {
        public_key: Vec<u8>,
        signature: Vec<u8>,
    },
    ObservedAddress(crate::ObservedAddress),
    MaxMessageSize(MaxMessageSize),
    Rendezvous(RendezvousFrame),
    NewTicket(u64, Box<crate::Ticket>),
}

/// The rendezvous frames, which borrow nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RendezvousFrame {
    Register(crate::Register),
    ConnectVia(crate::ConnectVia),
    Introduce(crate::Introduce),
    Refused(crate::IntroductionRefused),
    RelayRequest(crate::RelayRequest),
    RelayGrant(crate::RelayGrant),
    RelayRefused(crate::RelayRefused),
}

impl OwnedFrame {
    pub(crate) fn as_frame(&self) -> Frame<'_> {
        match self {
            Self::Padding(len) => Frame::Padding(Padding { len: *len }),
            Self::Ping => Frame::Ping,
            Self::Ack {
                ranges,
                delay_us,
                receive_us,
            } => Frame::Ack(Ack {
                ranges: AckFrameRanges::new(ranges).expect("generated ranges are valid"),
                ack_delay: Duration::from_micros(*delay_us),
                receive_time: Duration::from_micros(*receive_us),
            }),
            Self::Stream {
                id,
                offset,
                fin,
                data,
            } => Frame::Stream(Stream {
                id: *id,
                offset: *offset,
                fin: *fin,
                data,
            }),
            Self::Message { id, data } => Frame::Message(Message { id: *id, data }),
            Self::MaxData(max) => Frame::MaxData(MaxData { max: *max }),
            Self::MaxStreamData { id, max } => {
                Frame::MaxStreamData(MaxStreamData { id: *id, max: *max })
            }
            Self::Close { kind, code, reason } => Frame::Close(Close {
                kind: *kind,
                code: *code,
                reason,
            }),
            Self::ResetStream(r) => Frame::ResetStream(*r),
            Self::StopSending(s) => Frame::StopSending(*s),
            Self::DataBlocked(d) => Frame::DataBlocked(*d),
            Self::StreamDataBlocked(d) => Frame::StreamDataBlocked(*d),
            Self::MaxStreams(m) => Frame::MaxStreams(*m),
            Self::PathChallenge(data) => Frame::PathChallenge(PathChallenge { data: *data }),
            Self::PathResponse(data) => Frame::PathResponse(PathResponse { data: *data }),
            Self::Datagram(data) => Frame::Datagram(Datagram { data }),
            Self::AckFrequency(a) => Frame::AckFrequency(*a),
            Self::Identity {
                public_key,
                signature,
            } => Frame::Identity(Identity {
                public_key,
                signature,
            }),
            Self::ObservedAddress(o) => Frame::ObservedAddress(*o),
            Self::MaxMessageSize(m) => Frame::MaxMessageSize(*m),
            Self::Rendezvous(RendezvousFrame::Register(r)) => Frame::Register(*r),
            Self::Rendezvous(RendezvousFrame::ConnectVia(c)) => Frame::ConnectVia(*c),
            Self::Rendezvous(RendezvousFrame::Introduce(i)) => Frame::Introduce(*i),
            Self::Rendezvous(RendezvousFrame::Refused(r)) => Frame::IntroductionRefused(*r),
            Self::Rendezvous(RendezvousFrame::RelayRequest(r)) => Frame::RelayRequest(*r),
            Self::Rendezvous(RendezvousFrame::RelayGrant(g)) => Frame::RelayGrant(*g),
            Self::Rendezvous(RendezvousFrame::RelayRefused(r)) => Frame::RelayRefused(*r),
            Self::NewTicket(lifetime_s, ticket) => Frame::NewTicket(NewTicket {
                lifetime_s: *lifetime_s,
                ticket,
            }),
        }
    }
}

/// Values spread over every varint length up to `VARINT_MAX`.
fn varint() -> impl Strategy<Value = u64> {
    (0u32..62, any::<u64>()).prop_map(|(bits, v)| v & ((1u64 << bits) | ((1u64 << bits) - 1)))
}

/// Valid ACK ranges: descending, gaps of at least one.
pub(crate) fn ack_ranges() -> impl Strategy<Value = Vec<RangeInclusive<u64>>> {
    (varint(), vec((0u64..300, 0u64..300), 0..MAX_ACK_RANGES)).prop_map(|(largest, steps)| {
        let mut ranges = Vec::new();
        let mut end = largest.max(1 << 20);
        for (gap, len) in std::iter::once((0, 5)).chain(steps) {
            let Some(start) = end.checked_sub(len) else {
                break;
            };
            ranges.push(start..=end);
            match start.checked_sub(gap + 2) {
                Some(next_end) => end = next_end,
                None => break,
            }
        }
        ranges
    })
}

pub(crate) fn any_frame() -> impl Strategy<Value = OwnedFrame> {
    prop_oneof![
        (1usize..40).prop_map(OwnedFrame::Padding),
        Just(OwnedFrame::Ping),
        (ack_ranges(), varint(), varint()).prop_map(|(ranges, delay_us, receive_us)| {
            OwnedFrame::Ack {
                ranges,
                delay_us,
                receive_us,
            }
        }),
        (
            varint(),
            0u64..1 << 61,
            any::<bool>(),
            vec(any::<u8>(), 0..300)
        )
            .prop_map(|(id, offset, fin, data)| OwnedFrame::Stream {
                id,
                offset,
                fin,
                data
            }),
        (varint(), vec(any::<u8>(), 0..300))
            .prop_map(|(id, data)| OwnedFrame::Message { id, data }),
        varint().prop_map(OwnedFrame::MaxData),
        (varint(), varint()).prop_map(|(id, max)| OwnedFrame::MaxStreamData { id, max }),
        (any::<bool>(), varint(), vec(any::<u8>(), 0..64)).prop_map(|(app, code, reason)| {
            let kind = if app {
                CloseKind::Application
            } else {
                CloseKind::Transport
            };
            OwnedFrame::Close { kind, code, reason }
        }),
        (varint(), varint(), varint()).prop_map(|(id, error_code, final_size)| {
            OwnedFrame::ResetStream(ResetStream {
                id,
                error_code,
                final_size,
            })
        }),
        (varint(), varint())
            .prop_map(|(id, error_code)| OwnedFrame::StopSending(StopSending { id, error_code })),
        varint().prop_map(|limit| OwnedFrame::DataBlocked(DataBlocked { limit })),
        (varint(), varint())
            .prop_map(|(id, limit)| OwnedFrame::StreamDataBlocked(StreamDataBlocked { id, limit })),
        varint().prop_map(|max| OwnedFrame::MaxStreams(MaxStreams { max })),
        any::<[u8; 8]>().prop_map(OwnedFrame::PathChallenge),
        any::<[u8; 8]>().prop_map(OwnedFrame::PathResponse),
        vec(any::<u8>(), 0..300).prop_map(OwnedFrame::Datagram),
        (varint(), 1..=u32::MAX, 0..=MAX_REQUESTED_ACK_DELAY_US).prop_map(
            |(sequence, ack_eliciting_threshold, delay_us)| {
                OwnedFrame::AckFrequency(AckFrequency {
                    sequence,
                    ack_eliciting_threshold,
                    max_ack_delay: Duration::from_micros(delay_us),
                })
            }
        ),
        (vec(any::<u8>(), 0..300), vec(any::<u8>(), 0..300)).prop_map(|(public_key, signature)| {
            OwnedFrame::Identity {
                public_key,
                signature,
            }
        }),
        (varint(), any::<[u8; 4]>(), 1..=u16::MAX)
            .prop_filter("a unicast address", |(_, ip, _)| ip[0] != 0 && ip[0] < 224)
            .prop_map(|(sequence, ip, port)| {
                OwnedFrame::ObservedAddress(crate::ObservedAddress {
                    sequence,
                    address: core::net::SocketAddr::from((ip, port)),
                })
            }),
        varint().prop_map(|max| OwnedFrame::MaxMessageSize(MaxMessageSize { max })),
        (varint(), any::<[u8; 32]>(), any::<u8>()).prop_map(|(lifetime, seed, fill)| {
            let mut ticket = [fill; TICKET_LEN];
            ticket[..32].copy_from_slice(&seed);
            OwnedFrame::NewTicket(lifetime, Box::new(ticket))
        }),
        rendezvous_frame().prop_map(OwnedFrame::Rendezvous),
    ]
}

fn rendezvous_frame() -> impl Strategy<Value = RendezvousFrame> {
    let peer = any::<[u8; 32]>().prop_map(crate::KeyFingerprint);
    prop_oneof![
        crate::rendezvous::tests::candidates()
            .prop_map(|candidates| RendezvousFrame::Register(crate::Register { candidates })),
        peer.clone()
            .prop_map(|peer| RendezvousFrame::ConnectVia(crate::ConnectVia { peer })),
        (
            any::<[u8; 8]>(),
            peer.clone(),
            any::<bool>(),
            0..=crate::MAX_START_DELAY.as_micros() as u64,
            any::<[u8; 4]>(),
            1..=u16::MAX,
            crate::rendezvous::tests::candidates(),
        )
            .prop_filter("a unicast address", |v| v.4[0] != 0 && v.4[0] < 224)
            .prop_map(|(nonce, peer, initiator, delay_us, ip, port, candidates)| {
                RendezvousFrame::Introduce(crate::Introduce {
                    nonce,
                    peer,
                    initiator,
                    start_delay: Duration::from_micros(delay_us),
                    address: core::net::SocketAddr::from((ip, port)),
                    candidates,
                })
            }),
        (peer.clone(), 1u8..=4).prop_map(|(peer, reason)| {
            RendezvousFrame::Refused(crate::IntroductionRefused {
                peer,
                reason: crate::RefusalReason::from_byte(reason).expect("known"),
            })
        }),
        peer.clone()
            .prop_map(|peer| RendezvousFrame::RelayRequest(crate::RelayRequest { peer })),
        (1..=u32::MAX, peer.clone(), any::<bool>()).prop_map(|(slot, peer, initiator)| {
            RendezvousFrame::RelayGrant(crate::RelayGrant {
                slot,
                peer,
                initiator,
            })
        }),
        (peer, 1u8..=4).prop_map(|(peer, reason)| {
            RendezvousFrame::RelayRefused(crate::RelayRefused {
                peer,
                reason: crate::RefusalReason::from_byte(reason).expect("known"),
            })
        }),
    ]
}

/// `frames` encoded, then each `(index, value)` written over one byte.
pub(crate) fn encode_mutated(
    frames: &[OwnedFrame],
    mutations: &[(prop::sample::Index, u8)],
) -> Vec<u8> {
    let mut bytes = encode_all(frames);
    for (index, value) in mutations {
        let i = index.index(bytes.len());
        bytes[i] = *value;
    }
    bytes
}

pub(crate) fn encode_all(frames: &[OwnedFrame]) -> Vec<u8> {
    let mut out = vec![0u8; frames.iter().map(|f| f.as_frame().encoded_len()).sum()];
    let mut at = 0;
    for frame in frames {
        at += frame.as_frame().encode(&mut out[at..]).unwrap();
    }
    assert_eq!(at, out.len());
    out
}

/// Decoding must either fail with a typed error or give frames that
/// encode back to exactly the same bytes.
fn check_decode_is_canonical(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut rebuilt = vec![0u8; bytes.len()];
    let mut at = 0;
    for frame in Frames::new(bytes) {
        let Ok(frame) = frame else { return Ok(()) };
        at += frame
            .encode(&mut rebuilt[at..])
            .expect("a decoded frame re-encodes");
    }
    prop_assert_eq!(&rebuilt[..at], bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_frame_round_trips_and_its_predicted_size_is_what_is_written(owned in any_frame()) {
        let frame = owned.as_frame();
        let mut buf = vec![0u8; frame.encoded_len() + 8];
        let written = frame.encode(&mut buf).unwrap();
        prop_assert_eq!(written, frame.encoded_len());
        let decoded = Frame::decode_exact(&buf[..written]).unwrap();
        prop_assert_eq!(decoded, frame);
        prop_assert_eq!(decoded.encoded_len(), written);
        // A decoded frame (lazy ACK ranges included) encodes to the same bytes.
        let mut again = vec![0u8; written];
        prop_assert_eq!(decoded.encode(&mut again).unwrap(), written);
        prop_assert_eq!(&again[..], &buf[..written]);
    }

    #[test]
    fn a_buffer_one_byte_short_is_refused_without_writing_past_it(owned in any_frame()) {
        let frame = owned.as_frame();
        let len = frame.encoded_len();
        let mut buf = vec![0u8; len - 1];
        prop_assert_eq!(
            frame.encode(&mut buf),
            Err(EncodeError::BufferTooSmall { needed: len, available: len - 1 })
        );
    }

    #[test]
    fn a_sequence_of_frames_decodes_back_in_order(frames in vec(any_frame(), 1..12)) {
        // Adjacent padding runs are one run on the wire.
        let mut expected: Vec<OwnedFrame> = Vec::new();
        for frame in &frames {
            match (expected.last_mut(), frame) {
                (Some(OwnedFrame::Padding(a)), OwnedFrame::Padding(b)) => *a += b,
                _ => expected.push(frame.clone()),
            }
        }
        let bytes = encode_all(&frames);
        let decoded: Vec<Frame<'_>> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
        let expected: Vec<Frame<'_>> = expected.iter().map(OwnedFrame::as_frame).collect();
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn every_truncation_of_a_frame_is_refused(owned in any_frame(), cut in any::<prop::sample::Index>()) {
        let frame = owned.as_frame();
        let mut buf = vec![0u8; frame.encoded_len()];
        let len = frame.encode(&mut buf).unwrap();
        let cut = cut.index(len);
        // A shorter run of padding is still padding; every other frame
        // cut short is refused.
        if !matches!(frame, Frame::Padding(_)) {
            prop_assert!(Frame::decode_exact(&buf[..cut]).is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_what_decodes_is_canonical(bytes in vec(any::<u8>(), 0..200)) {
        check_decode_is_canonical(&bytes)?;
    }

    #[test]
    fn mutated_valid_frames_never_panic_and_what_decodes_is_canonical(
        frames in vec(any_frame(), 1..6),
        mutations in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = encode_mutated(&frames, &mutations);
        check_decode_is_canonical(&bytes)?;
        let cut = cut.index(bytes.len() + 1);
        check_decode_is_canonical(&bytes[..cut])?;
    }
}

fn decode_err(bytes: &[u8]) -> DecodeError {
    Frame::decode_exact(bytes).expect_err("must be refused")
}

/// A Message frame written by hand: the number as postcard writes any
/// u64, whatever its size, then the data with its length.
fn message_bytes(id: u64, data: &[u8]) -> Vec<u8> {
    let mut number = [0u8; 10];
    let number = postcard::to_slice(&id, &mut number).expect("10 bytes hold any u64");
    let mut bytes = vec![FrameType::Message as u8];
    bytes.extend_from_slice(number);
    bytes.push(u8::try_from(data.len()).expect("short data"));
    bytes.extend_from_slice(data);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A message number is a varint like any other: up to `VARINT_MAX`
    /// it round-trips, above it neither side accepts it.
    #[test]
    fn message_numbers_round_trip_up_to_varint_max_and_are_refused_above(
        below in 0u64..1 << 16,
        above in 0u64..1 << 16,
        far in VARINT_MAX + 1..=u64::MAX,
        data in vec(any::<u8>(), 0..64),
    ) {
        for id in [VARINT_MAX, VARINT_MAX - below] {
            let frame = Frame::Message(Message { id, data: &data });
            let mut buf = vec![0u8; frame.encoded_len()];
            prop_assert_eq!(frame.encode(&mut buf), Ok(buf.len()));
            prop_assert_eq!(&buf, &message_bytes(id, &data));
            prop_assert_eq!(Frame::decode_exact(&buf), Ok(frame));
        }
        for id in [VARINT_MAX + 1, VARINT_MAX + 1 + above, far] {
            let bytes = message_bytes(id, &data);
            prop_assert_eq!(
                Frame::decode_exact(&bytes),
                Err(DecodeError::ValueTooLarge(FrameType::Message))
            );
            let frame = Frame::Message(Message { id, data: &data });
            let mut buf = vec![0u8; frame.encoded_len()];
            prop_assert_eq!(
                frame.encode(&mut buf),
                Err(EncodeError::ValueTooLarge { field: "message number", value: id })
            );
        }
    }
}

#[test]
fn unknown_frame_types_are_refused() {
    assert_eq!(decode_err(&[0x1d]), DecodeError::UnknownFrameType(0x1d));
    assert_eq!(
        decode_err(&[0xff, 1, 2]),
        DecodeError::UnknownFrameType(0xff)
    );
    assert_eq!(Frame::decode(&[]), Err(DecodeError::Empty));
}

#[test]
fn lengths_past_the_end_are_refused() {
    // Message 7 claiming 5 bytes, carrying 2.
    assert_eq!(
        decode_err(&[0x04, 7, 5, 1, 2]),
        DecodeError::Truncated(FrameType::Message)
    );
    // Stream with a length varint claiming ~2^63 bytes.
    let bytes = [
        0x03, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ];
    assert!(matches!(
        decode_err(&bytes),
        DecodeError::Truncated(_) | DecodeError::Malformed(_)
    ));
    // Close cut in the middle of its code.
    assert_eq!(
        decode_err(&[0x07, 0x80]),
        DecodeError::Truncated(FrameType::TransportClose)
    );
}

#[test]
fn trailing_bytes_after_a_lone_frame_are_refused() {
    assert_eq!(decode_err(&[0x01, 0x01]), DecodeError::TrailingBytes(1));
    assert_eq!(
        decode_err(&[0x05, 0x07, 0xee, 0xee]),
        DecodeError::TrailingBytes(2)
    );
}

#[test]
fn absurd_values_are_refused() {
    // MaxData of 2^62 (one past VARINT_MAX): 9 bytes of LEB128.
    let mut bytes = vec![0x05];
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    assert_eq!(
        decode_err(&bytes),
        DecodeError::ValueTooLarge(FrameType::MaxData)
    );
    // A varint longer than any u64.
    let overlong = [
        0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    assert_eq!(
        decode_err(&overlong),
        DecodeError::Malformed(FrameType::MaxData)
    );
    // Stream ending past 2^62 - 1: offset VARINT_MAX with one byte of data.
    let frame = [0x03, 0x00];
    let mut stream = frame.to_vec();
    stream.extend_from_slice(&[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00, 0x01, 0xaa,
    ]);
    assert_eq!(
        decode_err(&stream),
        DecodeError::ValueTooLarge(FrameType::Stream)
    );
    // A bool that is neither 0 nor 1.
    assert_eq!(
        decode_err(&[0x03, 0, 0, 2, 0]),
        DecodeError::Malformed(FrameType::Stream)
    );
}

#[test]
fn non_minimal_encodings_are_refused() {
    // MaxData 1 written as two bytes.
    assert_eq!(
        decode_err(&[0x05, 0x81, 0x00]),
        DecodeError::NonCanonical(FrameType::MaxData)
    );
    // An ACK whose additional range has its gap 1 written as two bytes.
    assert_eq!(
        decode_err(&[0x02, 10, 0, 0, 1, 0, 0x81, 0x00, 0]),
        DecodeError::NonCanonical(FrameType::Ack)
    );
    // The same ACK written minimally is accepted.
    assert!(Frame::decode_exact(&[0x02, 10, 0, 0, 1, 0, 1, 0]).is_ok());
}

#[test]
fn ack_ranges_below_zero_or_too_many_are_refused() {
    // largest 3, first range 4: would start at -1.
    assert!(matches!(
        decode_err(&[0x02, 3, 0, 0, 0, 4]),
        DecodeError::InvalidAckRanges(_)
    ));
    // largest 10, first range 0, one more range with gap 9: 10 - 9 - 2 < 0.
    assert!(matches!(
        decode_err(&[0x02, 10, 0, 0, 1, 0, 9, 0]),
        DecodeError::InvalidAckRanges(_)
    ));
    // 64 additional ranges claimed: over MAX_ACK_RANGES.
    assert!(matches!(
        decode_err(&[0x02, 10, 0, 0, 64, 0]),
        DecodeError::InvalidAckRanges(_)
    ));
    // One additional range claimed, none present.
    assert_eq!(
        decode_err(&[0x02, 10, 0, 0, 1, 0]),
        DecodeError::Truncated(FrameType::Ack)
    );
}

#[test]
fn ack_wire_layout_matches_rfc_9000_gap_encoding() {
    let ranges = [100..=105, 90..=97, 0..=0];
    let frame = Frame::Ack(Ack {
        ranges: AckFrameRanges::new(&ranges).unwrap(),
        ack_delay: Duration::from_micros(25),
        receive_time: Duration::from_micros(1000),
    });
    let mut buf = [0u8; 32];
    let len = frame.encode(&mut buf).unwrap();
    // type, largest 105, delay 25, receive 1000 (0xe8 0x07), 2 more ranges, first 5,
    // then (gap 100-97-2 = 1, len 7) and (gap 90-0-2 = 88, len 0).
    assert_eq!(&buf[..len], &[0x02, 105, 25, 0xe8, 0x07, 2, 5, 1, 7, 88, 0]);
    let Frame::Ack(decoded) = Frame::decode_exact(&buf[..len]).unwrap() else {
        panic!()
    };
    assert_eq!(decoded.ranges.iter().collect::<Vec<_>>(), ranges.to_vec());
}

#[test]
fn ack_frequency_layout_and_bounds() {
    let request = Frame::AckFrequency(AckFrequency {
        sequence: 7,
        ack_eliciting_threshold: 10,
        max_ack_delay: Duration::from_millis(25),
    });
    let mut buf = [0u8; 32];
    let len = request.encode(&mut buf).unwrap();
    // type, sequence 7, threshold 10, 25 000 µs (a8 c3 01).
    assert_eq!(&buf[..len], &[0x11, 7, 10, 0xa8, 0xc3, 0x01]);
    assert_eq!(Frame::decode_exact(&buf[..len]).unwrap(), request);

    let limit = Frame::AckFrequency(AckFrequency {
        sequence: VARINT_MAX,
        ack_eliciting_threshold: u32::MAX,
        max_ack_delay: MAX_REQUESTED_ACK_DELAY,
    });
    let len = limit.encode(&mut buf).unwrap();
    assert_eq!(Frame::decode_exact(&buf[..len]).unwrap(), limit);

    let ty = FrameType::AckFrequency;
    // Threshold 0.
    assert_eq!(decode_err(&[0x11, 1, 0, 1]), DecodeError::Zero(ty));
    // Threshold 2^32: five bytes of LEB128.
    assert_eq!(
        decode_err(&[0x11, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1]),
        DecodeError::ValueTooLarge(ty)
    );
    // 16 384 001 µs, one past 2^14 ms: 81 80 e8 07.
    assert_eq!(
        decode_err(&[0x11, 1, 1, 0x81, 0x80, 0xe8, 0x07]),
        DecodeError::ValueTooLarge(ty)
    );
    assert!(Frame::decode_exact(&[0x11, 1, 1, 0x80, 0x80, 0xe8, 0x07]).is_ok());
    // Sequence 2^62.
    let mut too_far = vec![0x11];
    too_far.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    too_far.extend_from_slice(&[1, 1]);
    assert_eq!(decode_err(&too_far), DecodeError::ValueTooLarge(ty));
    // Cut inside the delay.
    assert_eq!(decode_err(&[0x11, 1, 1, 0x80]), DecodeError::Truncated(ty));

    let refused = |sequence, ack_eliciting_threshold, max_ack_delay| {
        Frame::AckFrequency(AckFrequency {
            sequence,
            ack_eliciting_threshold,
            max_ack_delay,
        })
        .encode(&mut [0u8; 32])
    };
    assert_eq!(
        refused(1, 0, Duration::ZERO),
        Err(EncodeError::Zero("ack-eliciting threshold"))
    );
    assert!(matches!(
        refused(1, 1, MAX_REQUESTED_ACK_DELAY + Duration::from_micros(1)),
        Err(EncodeError::ValueTooLarge { .. })
    ));
    assert!(matches!(
        refused(VARINT_MAX + 1, 1, Duration::ZERO),
        Err(EncodeError::ValueTooLarge { .. })
    ));
}

#[test]
fn refused_frames_on_encode() {
    let mut buf = [0u8; 64];
    assert_eq!(
        Frame::Padding(Padding { len: 0 }).encode(&mut buf),
        Err(EncodeError::EmptyPadding)
    );
    let too_far = Frame::Stream(Stream {
        id: 0,
        offset: VARINT_MAX,
        fin: false,
        data: b"x",
    });
    assert!(matches!(
        too_far.encode(&mut buf),
        Err(EncodeError::ValueTooLarge { .. })
    ));
    let huge_delay = Frame::Ack(Ack {
        ranges: AckFrameRanges::new(&[0..=0]).unwrap(),
        ack_delay: Duration::MAX,
        receive_time: Duration::ZERO,
    });
    assert!(matches!(
        huge_delay.encode(&mut buf),
        Err(EncodeError::ValueTooLarge { .. })
    ));
}
