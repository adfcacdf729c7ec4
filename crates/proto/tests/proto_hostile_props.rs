//! A peer that lies (issue #23), at random: an authenticated attacker
//! sends random sequences of every kind of frame with hostile values
//! (offsets, ids and limits up to 2^62, duplicates, resets, stops, key
//! updates, ACKs of packets never sent, empty and oversized messages and
//! datagrams, forged source addresses), interleaved with the endpoint's
//! timers and an application that sometimes takes what arrived. After
//! every step: nothing panicked; the connection holds no more receive
//! memory than its window and the slack `ConnectionStats::receive_memory`
//! documents; the endpoint is charged no more than its budget; a
//! connection closed for a violation stays closed, counted once; and no
//! address that never proved it receives was sent more than three times
//! what came from it.

mod support;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use support::attacker::Attacker;
use tern_proto::{ConnectionError, Direction, EndpointConfig, ReadOutcome, Side, StreamId};
use tern_wire::{
    Ack, AckFrameRanges, AckFrequency, Close, CloseKind, DataBlocked, Datagram, Frame, Identity,
    MaxData, MaxStreamData, MaxStreams, Message, Padding, PathChallenge, PathResponse, ResetStream,
    StopSending, Stream, StreamDataBlocked,
};

/// The largest value a varint carries.
const VARINT_MAX: u64 = (1 << 62) - 1;

/// Bytes the frames' data is cut from.
static DATA: [u8; 1500] = [0x5a; 1500];

/// A stream's receive window and the connection's, the largest message and
/// the datagram queue: small, so that a few hundred frames reach them.
const STREAM_WINDOW: u64 = 64 * 1024;
const WINDOW: u64 = 256 * 1024;
const MAX_MESSAGE: u64 = 128 * 1024;
const DATAGRAM_QUEUE: usize = 16;
/// Streams the attacker may have open at once: two-way and one-way.
const STREAMS: u64 = 8 + 4;
const BUDGET: u64 = 4 << 20;

/// The bytes of a receive page and what recording one run of bytes costs
/// (`streams::pages::PAGE`, `streams::RUN_COST`).
const PAGE: u64 = 4096;
const RUN_COST: u64 = 32;

fn config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.connection.stream_receive_window = STREAM_WINDOW;
    config.connection.receive_window = WINDOW;
    config.connection.max_message_size = MAX_MESSAGE;
    config.connection.max_concurrent_streams = 8;
    config.connection.max_concurrent_messages = STREAMS - 8;
    config.connection.datagram_receive_queue = DATAGRAM_QUEUE;
    config.memory_budget = BUDGET;
    config
}

/// A stream the attacker may send on: one of the first few it opens of
/// each kind (a one-way stream carries a large message).
fn own_stream() -> impl Strategy<Value = u64> {
    (any::<bool>(), 0..4u64).prop_map(|(bi, index)| {
        let direction = if bi { Direction::Bi } else { Direction::Uni };
        StreamId::new(Side::Initiator, direction, index).0
    })
}

/// A two-way stream the attacker opens: the endpoint sends on it too.
fn own_bi() -> impl Strategy<Value = u64> {
    (0..4u64).prop_map(|index| StreamId::new(Side::Initiator, Direction::Bi, index).0)
}

/// Any stream id: the endpoint's own streams, opened or not, streams past
/// the limits, any number at all.
fn any_stream() -> impl Strategy<Value = u64> {
    prop_oneof![
        (any::<bool>(), any::<bool>(), 0..64u64).prop_map(|(mine, bi, index)| {
            let side = if mine {
                Side::Initiator
            } else {
                Side::Responder
            };
            let direction = if bi { Direction::Bi } else { Direction::Uni };
            StreamId::new(side, direction, index).0
        }),
        0..=VARINT_MAX,
    ]
}

/// An offset within the stream windows, and low enough that the streams
/// together stay within the connection's.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![0..4096u64, 0..WINDOW / STREAMS - 1500]
}

/// Any offset or limit: near the windows, near 2^62, anywhere.
fn any_offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..4 * WINDOW,
        (VARINT_MAX - 4096)..=VARINT_MAX,
        0..=VARINT_MAX,
    ]
}

/// A length of data: empty, small, or about a packet.
fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => Just(0usize),
        4 => 1..64usize,
        3 => 64..1100usize,
    ]
}

/// One frame the attacker sends, its data described by length.
#[derive(Debug, Clone)]
enum F {
    Padding(usize),
    Ping,
    Ack(RangeInclusive<u64>),
    Stream(u64, u64, bool, usize),
    Message(u64, usize),
    MaxData(u64),
    MaxStreamData(u64, u64),
    Close(bool, u64),
    Reset(u64, u64, u64),
    Stop(u64, u64),
    DataBlocked(u64),
    StreamDataBlocked(u64, u64),
    MaxStreams(u64),
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    Datagram(usize),
    AckFrequency(u64, u32, u64),
    Identity(usize, usize),
}

/// A frame the protocol allows, with hostile values where it allows
/// them: duplicates, out of order, empty, credit near 2^62, resets and
/// stops, window updates.
fn allowed_frame() -> impl Strategy<Value = F> {
    prop_oneof![
        1 => (1..64usize).prop_map(F::Padding),
        1 => Just(F::Ping),
        12 => (own_stream(), offset(), prop::bool::weighted(0.01), len())
            .prop_map(|(id, offset, fin, len)| F::Stream(id, offset, fin, len)),
        8 => (0..400u64, len()).prop_map(|(id, len)| F::Message(id, len)),
        2 => prop_oneof![0..4 * WINDOW, VARINT_MAX - 4096..=VARINT_MAX].prop_map(F::MaxData),
        2 => (own_bi(), any_offset()).prop_map(|(id, max)| F::MaxStreamData(id, max)),
        2 => (own_bi(), 0..=VARINT_MAX).prop_map(|(id, code)| F::Stop(id, code)),
        1 => any_offset().prop_map(F::DataBlocked),
        1 => (own_stream(), any_offset()).prop_map(|(id, limit)| F::StreamDataBlocked(id, limit)),
        1 => any_offset().prop_map(F::MaxStreams),
        1 => any::<[u8; 8]>().prop_map(F::PathChallenge),
        1 => any::<[u8; 8]>().prop_map(F::PathResponse),
        4 => len().prop_map(F::Datagram),
        1 => (0..=VARINT_MAX, 1..100u32, 0..20_000u64)
            .prop_map(|(sequence, threshold, micros)| F::AckFrequency(sequence, threshold, micros)),
    ]
}

/// A frame the protocol may refuse: ACKs of packets never sent, streams
/// and offsets past every limit, messages numbered past the window,
/// oversized datagrams, resets with any final size, a close, an identity
/// out of place.
fn hostile_frame() -> impl Strategy<Value = F> {
    prop_oneof![
        (prop_oneof![0..64u64, 0..=VARINT_MAX], 0..64u64)
            .prop_map(|(largest, span)| F::Ack(largest.saturating_sub(span)..=largest)),
        (any_stream(), any_offset(), any::<bool>(), len())
            .prop_map(|(id, offset, fin, len)| F::Stream(id, offset, fin, len)),
        (0..=VARINT_MAX, len()).prop_map(|(id, len)| F::Message(id, len)),
        (0..400u64, 1100..1500usize).prop_map(|(id, len)| F::Message(id, len)),
        (any_stream(), 0..=VARINT_MAX, any_offset())
            .prop_map(|(id, code, size)| F::Reset(id, code, size)),
        (own_stream(), 0..=VARINT_MAX, offset())
            .prop_map(|(id, code, size)| F::Reset(id, code, size)),
        (any::<bool>(), 0..=VARINT_MAX).prop_map(|(transport, code)| F::Close(transport, code)),
        (1100..1500usize).prop_map(F::Datagram),
        (0..=VARINT_MAX, 0..100u32, 0..2_000_000u64)
            .prop_map(|(sequence, threshold, micros)| F::AckFrequency(sequence, threshold, micros)),
        (0..600usize, 0..600usize).prop_map(|(key, signature)| F::Identity(key, signature)),
    ]
}

fn frame() -> impl Strategy<Value = F> {
    prop_oneof![40 => allowed_frame(), 1 => hostile_frame()]
}

impl F {
    fn frame(&self) -> Frame<'_> {
        match *self {
            Self::Padding(len) => Frame::Padding(Padding { len }),
            Self::Ping => Frame::Ping,
            Self::Ack(ref range) => Frame::Ack(Ack {
                ranges: AckFrameRanges::new(std::slice::from_ref(range)).expect("one range"),
                ack_delay: Duration::from_micros(range.start() % 100_000),
                receive_time: Duration::ZERO,
            }),
            Self::Stream(id, offset, fin, len) => Frame::Stream(Stream {
                id,
                offset,
                fin,
                data: &DATA[..len],
            }),
            Self::Message(id, len) => Frame::Message(Message {
                id,
                data: &DATA[..len],
            }),
            Self::MaxData(max) => Frame::MaxData(MaxData { max }),
            Self::MaxStreamData(id, max) => Frame::MaxStreamData(MaxStreamData { id, max }),
            Self::Close(transport, code) => Frame::Close(Close {
                kind: if transport {
                    CloseKind::Transport
                } else {
                    CloseKind::Application
                },
                code,
                reason: b"",
            }),
            Self::Reset(id, error_code, final_size) => Frame::ResetStream(ResetStream {
                id,
                error_code,
                final_size,
            }),
            Self::Stop(id, error_code) => Frame::StopSending(StopSending { id, error_code }),
            Self::DataBlocked(limit) => Frame::DataBlocked(DataBlocked { limit }),
            Self::StreamDataBlocked(id, limit) => {
                Frame::StreamDataBlocked(StreamDataBlocked { id, limit })
            }
            Self::MaxStreams(max) => Frame::MaxStreams(MaxStreams { max }),
            Self::PathChallenge(data) => Frame::PathChallenge(PathChallenge { data }),
            Self::PathResponse(data) => Frame::PathResponse(PathResponse { data }),
            Self::Datagram(len) => Frame::Datagram(Datagram { data: &DATA[..len] }),
            Self::AckFrequency(sequence, ack_eliciting_threshold, micros) => {
                Frame::AckFrequency(AckFrequency {
                    sequence,
                    ack_eliciting_threshold,
                    max_ack_delay: Duration::from_micros(micros),
                })
            }
            Self::Identity(key, signature) => Frame::Identity(Identity {
                public_key: &DATA[..key],
                signature: &DATA[..signature],
            }),
        }
    }
}

/// One step of the attack.
#[derive(Debug, Clone)]
enum Op {
    /// A packet of these frames (those that fit), from the attacker's
    /// address or, with `Some(k)`, from forged address `k`.
    Packet(Option<u8>, Vec<F>),
    /// A packet sent before, delivered again.
    Replay(usize),
    /// The attacker moves to its next key, acknowledged or not.
    KeyUpdate,
    /// The attacker skips a packet number.
    Skip,
    /// Mock time passes, the endpoint's timers run.
    Wait(u16),
    /// The application takes what arrived: messages, datagrams, streams.
    Take,
    /// The attacker acknowledges what the endpoint sent it.
    Acknowledge,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        120 => (prop::option::weighted(0.05, 0..4u8), prop::collection::vec(frame(), 1..6))
            .prop_map(|(from, frames)| Op::Packet(from, frames)),
        10 => any::<usize>().prop_map(Op::Replay),
        2 => Just(Op::KeyUpdate),
        10 => Just(Op::Skip),
        20 => (1..2_000u16).prop_map(Op::Wait),
        20 => Just(Op::Take),
        30 => Just(Op::Acknowledge),
    ]
}

fn forged(k: u8) -> SocketAddr {
    SocketAddr::from(([203, 0, 113, 10 + k], 443))
}

/// What the test remembers across steps.
#[derive(Default)]
struct Seen {
    /// Every packet sent so far, to replay.
    sent: Vec<(SocketAddr, Vec<u8>)>,
    /// Stream frames with data sent: each can add at most one run of bytes.
    stream_frames: u64,
    /// The violation the connection was closed for, once it was.
    violation: Option<ConnectionError>,
}

/// The most receive memory the connection may hold after `stream_frames`
/// frames of stream data, as `ConnectionStats::receive_memory` documents:
/// the bytes its window counts (stream bytes, messages with their charge),
/// one large message past it, what the large messages' chunks hold
/// beyond their bytes (an eighth, plus 4 KiB each), the pages in use
/// (a page at each end of each run of bytes, one run per frame at most,
/// and no more than the pages each stream's window spans) and those the
/// pool keeps (within the pages the connection window spans), the
/// records of the runs (256 per stream, then one per 16 bytes), and the
/// datagram queue.
fn receive_bound(stream_frames: u64) -> u64 {
    let bytes = WINDOW + MAX_MESSAGE;
    let buffers = (WINDOW + MAX_MESSAGE) / 8 + STREAMS * 4096;
    let pages_in_use = (2 * stream_frames).min(STREAMS * (STREAM_WINDOW / PAGE + 1));
    let pages = pages_in_use * PAGE + WINDOW.div_ceil(PAGE) * PAGE;
    let runs = stream_frames.min(STREAMS * 256 + WINDOW / 16);
    bytes + buffers + pages + runs * RUN_COST + DATAGRAM_QUEUE as u64 * 1500
}

/// The application's turn: it takes every message and datagram, accepts
/// and reads every stream.
fn take(attacker: &mut Attacker) {
    let Some(connection) = attacker.connection() else {
        return;
    };
    while connection.recv_message().is_some() {}
    while connection.recv_datagram().is_some() {}
    while connection.accept_stream().is_some() {}
    let mut buf = [0u8; 4096];
    for side in [Side::Initiator, Side::Responder] {
        for index in 0..6 {
            let id = StreamId::new(side, Direction::Bi, index);
            while let Ok(ReadOutcome::Read(1..)) = connection.read(id, &mut buf) {}
        }
    }
}

fn step(attacker: &mut Attacker, seen: &mut Seen, op: &Op) {
    match op {
        Op::Packet(from, frames) => {
            let frames_out: Vec<Frame<'_>> = frames.iter().map(F::frame).collect();
            let (mut datagram, pushed) = attacker.seal(&frames_out);
            seen.stream_frames += frames[..pushed]
                .iter()
                .filter(|f| matches!(f, F::Stream(_, _, _, 1..)))
                .count() as u64;
            let from = from.map_or(attacker.addr, forged);
            seen.sent.push((from, datagram.clone()));
            attacker.deliver(from, &mut datagram);
        }
        Op::Replay(pick) => {
            if !seen.sent.is_empty() {
                let (from, mut datagram) = seen.sent[pick % seen.sent.len()].clone();
                attacker.deliver(from, &mut datagram);
            }
        }
        Op::KeyUpdate => {
            attacker.force_key_update();
        }
        Op::Skip => {
            attacker.sealer().skip_packet_number().expect("a number");
        }
        Op::Wait(ms) => {
            attacker.run_for(
                Duration::from_millis(u64::from(*ms)),
                Duration::from_millis(5),
            );
        }
        Op::Take => take(attacker),
        Op::Acknowledge => {
            let ranges = attacker.received_ranges();
            for ranges in ranges.chunks(32) {
                let ack = Frame::Ack(Ack {
                    ranges: AckFrameRanges::new(ranges).expect("ranges"),
                    ack_delay: Duration::ZERO,
                    receive_time: Duration::ZERO,
                });
                attacker.send(&[ack]);
            }
        }
    }
    attacker.turn();
}

/// Checks the invariants after a step.
fn check(attacker: &mut Attacker, seen: &mut Seen) -> Result<(), TestCaseError> {
    while attacker.endpoint.poll_event().is_some() {}
    let stats = attacker.endpoint.stats();
    prop_assert!(
        stats.memory_charged <= BUDGET,
        "the endpoint is charged {} past its budget",
        stats.memory_charged
    );
    let stream_frames = seen.stream_frames;
    if let Some(connection) = attacker.connection() {
        let held = connection.stats().receive_memory as u64;
        let bound = receive_bound(stream_frames);
        prop_assert!(held <= bound, "receive memory {held} > {bound}");
        let error = connection.error().cloned();
        match (&seen.violation, error) {
            (Some(before), now) => prop_assert_eq!(Some(before), now.as_ref(), "reopened"),
            (None, Some(e @ ConnectionError::Protocol(_))) => seen.violation = Some(e),
            (None, _) => {}
        }
    }
    let violations = u64::from(seen.violation.is_some());
    prop_assert_eq!(stats.protocol_violations, violations);
    for (addr, sent) in &attacker.sent_to {
        if *addr == attacker.addr {
            continue;
        }
        let received = attacker
            .received_from
            .get(addr)
            .copied()
            .unwrap_or_default();
        prop_assert!(
            sent.bytes <= 3 * received.bytes,
            "{addr}: sent {sent:?} for {received:?} received"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: RngSeed::Fixed(23),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_authenticated_frames_keep_every_bound(ops in prop::collection::vec(op(), 1..200)) {
        let mut attacker = Attacker::connect(config());
        let mut seen = Seen::default();
        for op in &ops {
            step(&mut attacker, &mut seen, op);
            check(&mut attacker, &mut seen)?;
        }
        // Time for the endpoint to finish whatever it started.
        attacker.run_for(Duration::from_secs(60), Duration::from_millis(50));
        check(&mut attacker, &mut seen)?;
    }
}
