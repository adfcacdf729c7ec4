//! Level 1: what an authenticated attacker costs an endpoint per byte it
//! sends (issue #23: within 3x of honest bulk data). An attacker that
//! finished a real handshake (tern-proto's test support, mock clock) hands
//! the endpoint a batch of packets sealed beforehand; each benchmark is
//! the endpoint's work on them — open, decode, act, and its own turn after
//! (ACKs, window updates) — counted in bytes of the datagrams received.
//! `honest_bulk` is the yardstick: full packets of stream data in order,
//! read by the application. Each attack class keeps to the rules (an
//! attacker closed for a violation costs nothing more), so it is the most
//! work a class can buy: tiny stream fragments, empty messages, empty
//! datagrams, pings (in a batch, and one per turn), ACKs of everything
//! (as many ranges as a frame holds),
//! resets (one stream a packet, and packed, each weighed against honest
//! small requests on as many streams), and ACKs of every 8th packet with small messages queued behind
//! (each one costs the endpoint the losses it declares).

#![forbid(unsafe_code)]

use std::time::Duration;

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use tern_proto::{
    Direction, EndpointConfig, INITIAL_CONNECTION_WINDOW, INITIAL_STREAM_WINDOW, Node, ReadOutcome,
    Side, StreamId, TransmitLimits,
};
use tern_wire::{
    Ack, AckFrameRanges, Datagram, Frame, MAX_ACK_RANGES, Message, ResetStream, Stream,
};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

/// The attacker of tern-proto's hostile-peer tests.
#[path = "../../crates/proto/tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use support::attacker::{Attacker, MAX_DATAGRAM};

fn main() {
    divan::main();
}

/// An endpoint under attack and the packets to hand it.
struct Batch {
    attacker: Attacker,
    packets: Vec<Vec<u8>>,
    bytes: usize,
}

/// An attacker connected to a fresh endpoint, and `packets` made by
/// `seal` from it (sealed ahead, outside the measurement).
fn batch(mut seal: impl FnMut(&mut Attacker, usize) -> Vec<u8>, packets: usize) -> Batch {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let packets = (0..packets).map(|k| seal(&mut attacker, k)).collect();
    sealed(attacker, packets)
}

/// The endpoint's work on a batch: every packet, then its turn, as the
/// driver takes it (everything it sends, then its next deadline). The
/// attacker's own records of what went where are left out: they are the
/// harness's work, not the endpoint's. Never inlined, so a profiler can
/// count its instructions alone (`--toggle-collect` in callgrind).
#[inline(never)]
fn deliver(mut batch: Batch) -> Batch {
    let a = &mut batch.attacker;
    let now = a.now();
    for packet in &mut batch.packets {
        a.endpoint
            .handle_datagram(now, a.endpoint_addr, a.addr, packet);
    }
    turn(a);
    batch
}

/// As [`deliver`], with a turn after every packet: a driver that receives
/// the attacker's datagrams one at a time.
#[inline(never)]
fn deliver_each(mut batch: Batch) -> Batch {
    let a = &mut batch.attacker;
    let now = a.now();
    for packet in &mut batch.packets {
        a.endpoint
            .handle_datagram(now, a.endpoint_addr, a.addr, packet);
        turn(a);
    }
    batch
}

/// The endpoint's turn as the driver takes it: everything it sends, then
/// its next deadline.
fn turn(a: &mut Attacker) {
    let now = a.now();
    let limits = TransmitLimits::new(1, MAX_DATAGRAM);
    let mut buf = [0u8; MAX_DATAGRAM];
    while a.endpoint.poll_transmit(now, limits, &mut buf).is_some() {}
    black_box(a.endpoint.poll_timeout());
}

/// The attacker's connection is still open after the batch: the class kept
/// to the rules, so what was measured is the endpoint acting on it.
fn still_open(batch: &mut Batch) {
    let connection = batch.attacker.connection().expect("open");
    assert_eq!(connection.error(), None, "the attack broke a rule");
}

fn run(bencher: Bencher, make: fn() -> Batch, after: fn(&mut Batch)) {
    run_with(bencher, make, deliver, after);
}

fn run_with(
    bencher: Bencher,
    make: fn() -> Batch,
    deliver: fn(Batch) -> Batch,
    after: fn(&mut Batch),
) {
    bencher
        .with_inputs(make)
        .input_counter(|b: &Batch| BytesCount::new(b.bytes))
        .bench_local_values(|b| {
            let mut b = deliver(b);
            after(&mut b);
            black_box(b)
        });
}

fn bi(index: u64) -> u64 {
    StreamId::new(Side::Initiator, Direction::Bi, index).0
}

/// Full packets of stream data in order, read by the application: the
/// yardstick.
#[divan::bench]
fn honest_bulk(bencher: Bencher) {
    const CHUNK: usize = 1_100;
    run(
        bencher,
        || {
            let data = [0x5au8; CHUNK];
            batch(
                |a, k| {
                    let frame = Frame::Stream(Stream {
                        id: bi(0),
                        offset: (k * CHUNK) as u64,
                        fin: false,
                        data: &data,
                    });
                    a.seal(&[frame]).0
                },
                // Within the 64 KiB every stream starts with.
                (INITIAL_STREAM_WINDOW as usize - CHUNK) / CHUNK,
            )
        },
        |b| {
            still_open(b);
            let connection = b.attacker.connection().expect("open");
            let id = connection.accept_stream().expect("the stream");
            let mut buf = [0u8; 4096];
            while let Ok(ReadOutcome::Read(1..)) = connection.read(id, &mut buf) {}
        },
    );
}

/// One-byte stream frames in order, as many as a packet holds.
#[divan::bench]
fn tiny_fragments(bencher: Bencher) {
    const PER_PACKET: usize = 100;
    run(
        bencher,
        || {
            batch(
                |a, k| {
                    let frames: Vec<Frame<'_>> = (0..PER_PACKET)
                        .map(|j| {
                            Frame::Stream(Stream {
                                id: bi(0),
                                offset: (k * PER_PACKET + j) as u64,
                                fin: false,
                                data: b"x",
                            })
                        })
                        .collect();
                    a.seal(&frames).0
                },
                200,
            )
        },
        still_open,
    );
}

/// Empty messages, as many as a packet holds, never taken (within the
/// connection window they count 64 bytes against).
#[divan::bench]
fn empty_messages(bencher: Bencher) {
    const PER_PACKET: u64 = 100;
    run(
        bencher,
        || {
            batch(
                |a, k| {
                    let first = k as u64 * PER_PACKET;
                    let frames: Vec<Frame<'_>> = (first..first + PER_PACKET)
                        .map(|id| Frame::Message(Message { id, data: &[] }))
                        .collect();
                    a.seal(&frames).0
                },
                30,
            )
        },
        still_open,
    );
}

/// Empty datagrams, as many as a packet holds, never taken.
#[divan::bench]
fn empty_datagrams(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(
                |a, _| {
                    let frames = [Frame::Datagram(Datagram { data: &[] }); 200];
                    a.seal(&frames).0
                },
                200,
            )
        },
        still_open,
    );
}

/// Packets holding one ping each: the cost of a packet and its ACK.
#[divan::bench]
fn pings(bencher: Bencher) {
    run(
        bencher,
        || batch(|a, _| a.seal(&[Frame::Ping]).0, 400),
        still_open,
    );
}

/// Pings again, each in a turn of its own: every one is answered (its ACK
/// sealed and sent) and the endpoint's deadline asked for, the fixed cost
/// of a turn per packet.
#[divan::bench]
fn pings_turn_each(bencher: Bencher) {
    run_with(
        bencher,
        || batch(|a, _| a.seal(&[Frame::Ping]).0, 400),
        deliver_each,
        still_open,
    );
}

/// Packets each acknowledging again every other packet the endpoint sent
/// (`RANGES` ranges: a few, and as many as a frame may hold,
/// [`MAX_ACK_RANGES`]) and asking for an ACK: the first one resolves them,
/// the rest repeat them.
#[divan::bench(consts = [4, MAX_ACK_RANGES])]
fn acks_of_everything<const RANGES: usize>(bencher: Bencher) {
    run(
        bencher,
        || {
            let mut ranges = Vec::new();
            batch(
                |a, k| {
                    if k == 0 {
                        ranges = sent_ranges(a, RANGES);
                    }
                    let ack = Frame::Ack(Ack {
                        ranges: AckFrameRanges::new(&ranges).expect("ranges"),
                        ack_delay: Duration::ZERO,
                        receive_time: Duration::ZERO,
                    });
                    a.seal(&[ack, Frame::Ping]).0
                },
                400,
            )
        },
        still_open,
    );
}

/// Makes the endpoint send packets (ACKs of pings, two pings a turn), of
/// which the attacker keeps every other one: `count` ranges of one packet
/// each, the newest first, what the oldest ones not kept hold tracked
/// (declared lost once the ranges are acknowledged).
fn sent_ranges(attacker: &mut Attacker, count: usize) -> Vec<std::ops::RangeInclusive<u64>> {
    let mut numbers = Vec::new();
    while numbers.len() < 2 * count + 8 {
        attacker.send(&[Frame::Ping]);
        attacker.send(&[Frame::Ping]);
        attacker.turn();
        numbers.extend(attacker.received_ranges().into_iter().flatten());
    }
    numbers.sort_unstable_by(|a, b| b.cmp(a));
    let ranges: Vec<_> = numbers
        .into_iter()
        .step_by(2)
        .take(count)
        .map(|pn| pn..=pn)
        .collect();
    assert_eq!(ranges.len(), count, "the ranges");
    ranges
}

/// A byte into a stream, then its reset: the bytes up to it credited to
/// the connection, per stream. As many streams as the endpoint granted
/// with the handshake (its MaxStreams, read back: 100 by default), each
/// byte as far in as the connection window lets them all go (a quarter of
/// the stream's first window at most), one stream a packet.
#[divan::bench]
fn resets(bencher: Bencher) {
    run(
        bencher,
        || one_stream_a_packet(opened_and_reset),
        still_open,
    );
}

/// As [`resets`], with the streams packed: as many frames of streams
/// opened and reset as fit a packet of [`PACKED_DATAGRAM`] bytes, so the
/// packet's own cost is shared by many streams, as an attacker filling
/// its packets would have it.
#[divan::bench]
fn resets_packed(bencher: Bencher) {
    run(bencher, || packed(opened_and_reset), still_open);
}

/// As [`resets_packed`] with no byte first: each stream opened by its
/// reset alone, at final size 0 (no credit taken), the fewest bytes a
/// stream can be had for.
#[divan::bench]
fn resets_alone_packed(bencher: Bencher) {
    run(bencher, || packed(reset_unopened), still_open);
}

/// The honest peer [`resets`] is weighed against: the same streams, each
/// carrying a small request ([`REQUEST`] bytes from offset 0, with its
/// end) rather than a byte and a reset, one stream a packet. The
/// application does what it does in [`resets`]: nothing, yet.
#[divan::bench]
fn honest_requests(bencher: Bencher) {
    run(bencher, || one_stream_a_packet(requests), still_open);
}

/// As [`honest_requests`], packed as [`resets_packed`] is.
#[divan::bench]
fn honest_requests_packed(bencher: Bencher) {
    run(bencher, || packed(requests), still_open);
}

/// The datagram [`resets_packed`] fills: the size every path carries.
const PACKED_DATAGRAM: usize = 1200;

/// The bytes of a request in [`honest_requests`]: a typical request
/// header.
const REQUEST: &[u8] = &[0x5a; 16];

/// An attacker connected to a fresh endpoint and the frames `frames` makes
/// for each stream it was granted, a stream's frames to a packet.
fn one_stream_a_packet(frames: fn(&mut Attacker) -> Vec<Frame<'static>>) -> Batch {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let frames = frames(&mut attacker);
    let packets = frames
        .chunks(frames.len() / RESET_STREAMS)
        .map(|stream| {
            let (packet, pushed) = attacker.seal(stream);
            assert_eq!(pushed, stream.len(), "the stream's frames fit");
            packet
        })
        .collect();
    sealed(attacker, packets)
}

/// As [`one_stream_a_packet`], the frames packed: as many as fit a packet
/// of [`PACKED_DATAGRAM`] bytes.
fn packed(frames: fn(&mut Attacker) -> Vec<Frame<'static>>) -> Batch {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let frames = frames(&mut attacker);
    let mut packets = Vec::new();
    let mut rest = &frames[..];
    while !rest.is_empty() {
        let (packet, pushed) = attacker.seal_within(rest, PACKED_DATAGRAM);
        packets.push(packet);
        rest = &rest[pushed..];
    }
    sealed(attacker, packets)
}

/// The two-way streams the endpoint granted (its MaxStreams, read back),
/// checked against [`RESET_STREAMS`].
fn granted_streams(attacker: &Attacker) -> u64 {
    let streams = attacker.granted.bi_streams;
    assert_eq!(streams, RESET_STREAMS as u64, "the streams granted");
    streams
}

/// A stream frame and its reset for each two-way stream the endpoint
/// granted (see [`resets`]).
fn opened_and_reset(attacker: &mut Attacker) -> Vec<Frame<'static>> {
    let streams = granted_streams(attacker);
    let window = attacker.granted.data.max(INITIAL_CONNECTION_WINDOW);
    let far = (window / streams - 1).min(INITIAL_STREAM_WINDOW / 4);
    (0..streams)
        .flat_map(|k| {
            let id = bi(k);
            [
                Frame::Stream(Stream {
                    id,
                    offset: far,
                    fin: false,
                    data: b"x",
                }),
                Frame::ResetStream(ResetStream {
                    id,
                    error_code: 1,
                    final_size: far + 1,
                }),
            ]
        })
        .collect()
}

/// A reset of each two-way stream the endpoint granted, at final size 0,
/// no byte sent (see [`resets_alone_packed`]).
fn reset_unopened(attacker: &mut Attacker) -> Vec<Frame<'static>> {
    (0..granted_streams(attacker))
        .map(|k| {
            Frame::ResetStream(ResetStream {
                id: bi(k),
                error_code: 1,
                final_size: 0,
            })
        })
        .collect()
}

/// A whole request ([`REQUEST`], with the stream's end) on each two-way
/// stream the endpoint granted (see [`honest_requests`]).
fn requests(attacker: &mut Attacker) -> Vec<Frame<'static>> {
    (0..granted_streams(attacker))
        .map(|k| {
            Frame::Stream(Stream {
                id: bi(k),
                offset: 0,
                fin: true,
                data: REQUEST,
            })
        })
        .collect()
}

/// A batch of `packets` sealed by `attacker` already.
fn sealed(attacker: Attacker, packets: Vec<Vec<u8>>) -> Batch {
    let bytes = packets.iter().map(Vec::len).sum();
    Batch {
        attacker,
        packets,
        bytes,
    }
}

/// The two-way streams an endpoint grants by default
/// (`ConnectionConfig::max_concurrent_streams`).
const RESET_STREAMS: usize = 100;

/// ACKs of every 8th packet of a flight of small messages, with `QUEUED`
/// of them waiting to be sent: the packets below each acknowledged one are
/// lost (the packet threshold), their messages queued again, and the
/// turn sends what the window allows. Per ACK packet, whatever the queue
/// behind (each lost message is queued again in O(1)).
#[divan::bench(consts = [1_000, 200_000])]
fn selective_acks<const QUEUED: usize>(bencher: Bencher) {
    run(bencher, selective_acks_batch::<QUEUED>, |b| {
        still_open(b);
        // The packets below each acknowledged one were declared lost.
        let connection = b.attacker.connection().expect("open");
        assert!(
            connection.stats().lost_packets >= 30,
            "{:?}",
            connection.stats()
        );
    });
}

/// An endpoint that sent a flight of messages, `QUEUED` more waiting, and
/// the attacker's ACK of every 8th packet of the flight, one a packet.
fn selective_acks_batch<const QUEUED: usize>() -> Batch {
    let mut every_8th = Vec::new();
    let mut batch = batch(
        |a, k| {
            if k == 0 {
                every_8th = flight_of_messages(a, QUEUED);
            }
            let pn = every_8th[k];
            a.seal(&[Frame::Ack(Ack {
                ranges: AckFrameRanges::new(&[pn..=pn]).expect("ranges"),
                ack_delay: Duration::ZERO,
                receive_time: Duration::ZERO,
            })])
            .0
        },
        SELECTIVE_ACKS,
    );
    let connection = batch.attacker.connection().expect("open");
    assert!(connection.stats().send_memory >= QUEUED * 8, "all queued");
    batch
}

/// Queues `queued` messages of 8 bytes beside the first flight's and has
/// the endpoint send that flight (the attacker granted it every byte);
/// the flight's packet numbers divisible by 8, oldest first.
fn flight_of_messages(attacker: &mut Attacker, queued: usize) -> Vec<u64> {
    attacker.grant_everything();
    let connection = attacker.connection().expect("open");
    let message = tern_proto::Bytes::from_static(&[0x33; 8]);
    for _ in 0..queued + FLIGHT_MESSAGES {
        connection.send_message(message.clone()).expect("room");
    }
    attacker.turn();
    let mut numbers: Vec<u64> = attacker.received_ranges().into_iter().flatten().collect();
    numbers.sort_unstable();
    numbers.retain(|pn| pn.is_multiple_of(8));
    assert!(numbers.len() >= SELECTIVE_ACKS, "a flight of {numbers:?}");
    numbers
}

/// More messages than the first flight holds (49 packets of a few hundred
/// messages), queued before the `QUEUED` ones that wait behind it.
const FLIGHT_MESSAGES: usize = 1_000;

/// The ACK packets of a batch: every 8th packet of the first flight.
const SELECTIVE_ACKS: usize = 6;
