//! A peer that lies (issue #23), receive side: an authenticated attacker
//! must not make the endpoint hold memory beyond what flow control grants.
//! `allocation_counter` installs a counting global allocator in this test
//! binary: the bytes the test's own thread leaves on the heap while the
//! attacker sends are what the attack pins (the endpoint runs on that
//! thread); the connection's own accounting (`receive_memory`) must agree.

mod support;

use std::time::Duration;

use support::attacker::{Attacker, Limits};
use tern_proto::{
    ConnectionError, Direction, EndpointConfig, Event, INITIAL_CONNECTION_WINDOW,
    INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW, ProtocolError, ReadError, Side, StreamId,
};
use tern_reliability::DEFAULT_MAX_RANGES;
use tern_wire::{Ack, AckFrameRanges, Frame, MAX_ACK_RANGES, Message, ResetStream, Stream};

/// Runs `attack` and returns the bytes it left allocated.
fn pinned(attack: impl FnOnce()) -> u64 {
    allocation_counter::measure(attack).bytes_current.max(0) as u64
}

fn receive_memory(attacker: &mut Attacker) -> u64 {
    attacker.connection().expect("open").stats().receive_memory as u64
}

fn bi(index: u64) -> StreamId {
    StreamId::new(Side::Initiator, Direction::Bi, index)
}

fn reset(id: StreamId, error_code: u64) -> Frame<'static> {
    Frame::ResetStream(ResetStream {
        id: id.0,
        error_code,
        final_size: 1,
    })
}

fn stream(id: StreamId, offset: u64, data: &[u8]) -> Frame<'_> {
    Frame::Stream(Stream {
        id: id.0,
        offset,
        fin: false,
        data,
    })
}

/// Before its first window update, the connection lets the peer send this
/// much (the initial connection window, 256 KiB), whatever the streams.
const EARLY: u64 = 200 * 1024;

#[test]
fn a_byte_far_ahead_holds_a_page_not_the_distance() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let held = pinned(|| {
        attacker.send(&[stream(bi(0), EARLY, b"x")]);
    });
    assert!(attacker.connection().expect("open").error().is_none());
    assert!(held < 32 * 1024, "a byte pinned {held} bytes");
    let accounted = receive_memory(&mut attacker);
    assert!(accounted <= 8 * 1024, "accounted {accounted}");
}

#[test]
fn data_refused_by_flow_control_takes_no_memory() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let window = EndpointConfig::default().connection.stream_receive_window;
    // Within the stream's window (announced whole), past the connection's.
    let held = pinned(|| {
        attacker.send(&[stream(bi(0), window - 1, b"x")]);
    });
    assert!(attacker.connection().expect("open").error().is_some());
    assert!(held < 64 * 1024, "a refused byte pinned {held} bytes");
    assert_eq!(receive_memory(&mut attacker), 0);
}

#[test]
fn a_reset_lets_go_of_the_bytes_it_credits() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let window = EndpointConfig::default().connection.stream_receive_window;
    let mut limits = Limits::default();
    let mut credited = 0;
    // Each stream: a byte at each end of what the connection lets in (at
    // most the stream's window), then a reset that credits all of it to
    // the connection's window; the application does not read, so the
    // streams stay until it looks. Each reset counts as read, so the
    // connection's window doubles with each stream.
    let held = pinned(|| {
        for index in 0..8 {
            attacker.turn();
            attacker.take_limits(&mut limits);
            let allowed = limits.data.max(INITIAL_CONNECTION_WINDOW) - credited;
            let end = allowed.min(window) - 1;
            let id = bi(index);
            attacker.send(&[stream(id, 0, b"x"), stream(id, end, b"x")]);
            attacker.send(&[Frame::ResetStream(ResetStream {
                id: id.0,
                error_code: 1,
                final_size: end + 1,
            })]);
            credited += end + 1;
        }
    });
    assert!(attacker.connection().expect("open").error().is_none());
    assert!(credited > 16 << 20, "resets credited only {credited} bytes");
    assert!(held < 256 * 1024, "reset streams pinned {held} bytes");
    let accounted = receive_memory(&mut attacker);
    assert!(accounted <= 64 * 1024, "accounted {accounted}");
}

#[test]
fn streams_opened_and_reset_reach_the_application_once_each_as_resets() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    while attacker.endpoint.poll_event().is_some() {}
    let mut readable = Vec::new();
    let mut take_events = |attacker: &mut Attacker| {
        while let Some((handle, event)) = attacker.endpoint.poll_event() {
            assert_eq!(handle, attacker.handle);
            if let Event::StreamReadable(id) = event {
                readable.push(id);
            }
        }
    };
    // Each stream: a byte and its reset in one packet; the frames for
    // each come again before the application looks, and once after.
    for index in 0..20 {
        let id = bi(index);
        attacker.send(&[stream(id, 0, b"x"), reset(id, 100 + index)]);
        attacker.send(&[stream(id, 0, b"x"), reset(id, 100 + index)]);
    }
    take_events(&mut attacker);
    for index in 0..20 {
        let id = bi(index);
        attacker.send(&[stream(id, 0, b"x"), reset(id, 100 + index)]);
    }
    take_events(&mut attacker);
    let expected: Vec<StreamId> = (0..20).map(bi).collect();
    readable.sort_unstable_by_key(|id| id.0);
    assert_eq!(readable, expected, "one readable event a stream");
    let connection = attacker.connection().expect("open");
    for index in 0..20 {
        assert_eq!(connection.accept_stream(), Some(bi(index)));
        let mut out = [0; 8];
        assert_eq!(
            connection.read(bi(index), &mut out),
            Err(ReadError::Reset(100 + index))
        );
    }
    assert_eq!(connection.accept_stream(), None);
    assert!(connection.error().is_none());
}

/// Stream churn is bounded by the application: a peer's stream counts
/// toward the streams it may open anew only once the application is done
/// with it, so an attacker that opens and resets every stream it was
/// granted can make the endpoint do that much per connection and no more,
/// until the application takes its streams (and then one stream for each
/// taken). What the churn costs per stream is the cost of an honest
/// stream; what bounds it is the application's pace, as for honest
/// streams.
#[test]
fn streams_opened_and_reset_come_back_only_as_the_application_takes_them() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let one_way = |index| StreamId::new(Side::Initiator, Direction::OneWay, index);
    let mut limits = attacker.granted.clone();
    let granted = limits.one_way_streams.max(INITIAL_MAX_STREAMS);
    let churn = |attacker: &mut Attacker, indices: std::ops::Range<u64>| {
        for index in indices {
            let id = one_way(index);
            attacker.send(&[stream(id, 0, b"x"), reset(id, 7)]);
        }
        attacker.turn();
    };
    churn(&mut attacker, 0..granted);
    attacker.take_limits(&mut limits);
    assert_eq!(
        limits.one_way_streams.max(INITIAL_MAX_STREAMS),
        granted,
        "no stream comes back before the application takes one"
    );
    assert!(violation(&mut attacker).is_none());

    let taken = 3;
    let connection = attacker.connection().expect("open");
    for index in 0..taken {
        assert_eq!(connection.accept_uni(), Some(one_way(index)));
        let mut out = [0; 8];
        assert_eq!(
            connection.read(one_way(index), &mut out),
            Err(ReadError::Reset(7))
        );
    }
    attacker.turn();
    attacker.take_limits(&mut limits);
    assert_eq!(
        limits.one_way_streams,
        granted + taken,
        "one for each taken"
    );

    churn(&mut attacker, granted..granted + taken);
    assert!(violation(&mut attacker).is_none());
    churn(&mut attacker, granted + taken..granted + taken + 1);
    assert!(
        matches!(violation(&mut attacker), Some(ProtocolError::Stream(_))),
        "{:?}",
        attacker.error()
    );
}

/// The connection's end, once it closed for a violation.
fn violation(attacker: &mut Attacker) -> Option<ProtocolError> {
    match attacker.connection().and_then(|c| c.error().cloned()) {
        Some(ConnectionError::Protocol(e)) => Some(e),
        _ => None,
    }
}

/// The attacker's connection was closed for breaking flow control.
fn assert_broke_flow_control(attacker: &mut Attacker) {
    let violation = violation(attacker);
    assert!(
        matches!(violation, Some(ProtocolError::FlowControl(_))),
        "{violation:?}"
    );
}

#[test]
fn empty_messages_the_application_does_not_take_are_bounded() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let mut next = 0u64;
    let held = pinned(|| {
        // 40 000 empty messages, 100 a packet; the application takes none.
        for _ in 0..400 {
            let frames: Vec<Frame<'_>> = (next..next + 100)
                .map(|id| Frame::Message(Message { id, data: &[] }))
                .collect();
            next += 100;
            attacker.send(&frames);
        }
    });
    // Each message counts against the connection window until taken:
    // past the 256 KiB the peer was allowed, it broke flow control.
    assert_broke_flow_control(&mut attacker);
    let connection = attacker.connection().expect("still held");
    let mut taken = 0;
    while connection.recv_message().is_some() {
        taken += 1;
    }
    assert!(taken <= 4096, "{taken} messages held");
    assert!(held < 512 * 1024, "empty messages pinned {held} bytes");
}

#[test]
fn messages_taken_by_the_application_free_their_charge() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    // Ten times what the window would hold untaken, taken as they come.
    for batch in 0..400u64 {
        let frames: Vec<Frame<'_>> = (batch * 100..batch * 100 + 100)
            .map(|id| Frame::Message(Message { id, data: b"m" }))
            .collect();
        attacker.send(&frames);
        let connection = attacker.connection().expect("open");
        while connection.recv_message().is_some() {}
        // The window update the taking earned reaches the attacker.
        attacker.turn();
    }
    assert_eq!(violation(&mut attacker), None);
    assert_eq!(receive_memory(&mut attacker), 0);
}

/// Large messages whose ends never come hold their bytes against the
/// connection window. When they fill it the window grows (an honest
/// sender of many large messages would otherwise wait for good), but no
/// further than what the messages the peer may have open at once can
/// hold: each waits at the 64 KiB every message's stream starts with.
#[test]
fn unfinished_large_messages_grow_the_window_only_as_far_as_they_can_hold() {
    let config = EndpointConfig::default();
    let configured = config.connection.receive_window;
    let mut attacker = Attacker::connect(config);
    let mut limits = Limits::default();
    let message = |index| StreamId::new(Side::Initiator, Direction::Uni, index);
    let chunk = [5u8; 1000];
    let (mut sent, mut index) = (0, 0);
    let held = pinned(|| {
        // As many messages as the endpoint lets the attacker open.
        while index < limits.message_streams.max(INITIAL_MAX_STREAMS) {
            let mut offset = 0;
            while offset < INITIAL_STREAM_WINDOW {
                attacker.turn();
                attacker.take_limits(&mut limits);
                let room = limits.data.max(INITIAL_CONNECTION_WINDOW) - sent;
                let len = (chunk.len() as u64)
                    .min(room)
                    .min(INITIAL_STREAM_WINDOW - offset);
                assert!(len > 0, "stuck after {sent} bytes, at {limits:?}");
                attacker.send(&[stream(message(index), offset, &chunk[..len as usize])]);
                (offset, sent) = (offset + len, sent + len);
            }
            index += 1;
        }
    });
    assert_eq!(violation(&mut attacker), None);
    assert_eq!(sent, index * INITIAL_STREAM_WINDOW);
    assert!(sent >= 2 * INITIAL_CONNECTION_WINDOW, "only {sent} bytes");
    // The window in force doubled while more than half of it was held:
    // it lets in at most four times what is held, far below its size.
    assert!(
        limits.data <= 4 * sent,
        "{} granted for {sent} held",
        limits.data
    );
    assert!(limits.data < configured / 2, "{} granted", limits.data);
    assert!(
        held < 2 * sent,
        "{sent} bytes of messages pinned {held} bytes"
    );
    let accounted = receive_memory(&mut attacker);
    assert!(accounted < 2 * sent, "accounted {accounted}");
}

#[test]
fn one_byte_fragments_at_alternate_offsets_are_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let held = pinned(|| {
        for packet in 0..200u64 {
            let frames: Vec<Frame<'_>> = (0..100u64)
                .map(|k| stream(bi(0), 2 * (packet * 100 + k) + 1, b"x"))
                .collect();
            attacker.send(&frames);
        }
    });
    assert!(
        matches!(
            violation(&mut attacker),
            Some(ProtocolError::StreamData(e)) if e.to_string().contains("fragmented")
        ),
        "{:?}",
        violation(&mut attacker)
    );
    assert!(held < 256 * 1024, "fragments pinned {held} bytes");
    while attacker.endpoint.poll_event().is_some() {}
    assert_eq!(attacker.endpoint.stats().protocol_violations, 1);
}

#[test]
fn holes_of_whole_packets_are_never_excessive_fragmentation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    // 1 100 runs of 100 bytes (small packets, every other one lost), and
    // 18 of a full packet's data on a second stream (all within the 256 KiB
    // the connection allows before its first update).
    let small = [3u8; 100];
    for k in 0..1100u64 {
        attacker.send(&[stream(bi(0), 200 * k + 1, &small)]);
    }
    let full = [4u8; 1100];
    for k in 0..18u64 {
        attacker.send(&[stream(bi(1), 2200 * k + 1, &full)]);
    }
    assert_eq!(violation(&mut attacker), None);
    let accounted = receive_memory(&mut attacker);
    assert!(accounted < 1 << 20, "accounted {accounted}");
}

#[test]
fn partial_large_messages_count_against_the_connection_window() {
    let mut config = EndpointConfig::default();
    config.connection.receive_window = 256 * 1024;
    let mut attacker = Attacker::connect(config);
    let uni = |index| StreamId::new(Side::Initiator, Direction::Uni, index);
    let chunk = [5u8; 1000];
    let held = pinned(|| {
        // Eight messages, 60 KiB of each and never the end: 480 KiB, past
        // the connection's 256 KiB window. One message may grow past the
        // window (the first, whose bytes are credited as they arrive); the
        // others hold theirs until the application takes them.
        'attack: for index in 0..8 {
            for k in 0..60 {
                attacker.send(&[stream(uni(index), k * 1000, &chunk)]);
                if violation(&mut attacker).is_some() {
                    break 'attack;
                }
            }
        }
    });
    assert_broke_flow_control(&mut attacker);
    assert!(held < 512 * 1024, "partial messages pinned {held} bytes");
}

/// How many PINGs later the attacker acknowledges what the endpoint sent
/// in answer to one: late enough that the endpoint, which forgets the
/// ranges an acknowledged ACK of its own covered, still remembers more
/// than `DEFAULT_MAX_RANGES`, and soon enough that its sent-packet ring
/// stays below the bound that closes a peer acknowledging too little.
const ACK_LAG: usize = DEFAULT_MAX_RANGES + 16;

/// The bytes `pings` PINGs leave allocated, each after a skipped packet
/// number when `gaps`; every ACK the endpoint sends meanwhile must carry
/// at most `MAX_ACK_RANGES` ranges. The attacker acknowledges the
/// endpoint's packets `ACK_LAG` PINGs late (one that never does is closed:
/// see `a_peer_that_never_acknowledges_pins_at_most_the_tracked_bound`).
/// Returns the bytes and the most ranges one ACK carried.
fn pinned_by_pings(pings: usize, gaps: bool) -> (u64, usize) {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let mut most = 0;
    let mut unacknowledged = std::collections::VecDeque::from([attacker.handshake_ranges.clone()]);
    let held = pinned(|| {
        for _ in 0..pings {
            if gaps {
                attacker.sealer().skip_packet_number().expect("a number");
            }
            attacker.send(&[Frame::Ping]);
            attacker.turn();
            let inbox = attacker.inbox.clone();
            unacknowledged.push_back(attacker.received_ranges());
            for mut datagram in inbox {
                if let Some((_, ranges)) = attacker.open_ack(&mut datagram) {
                    most = most.max(ranges);
                }
            }
            if unacknowledged.len() > ACK_LAG
                && let Some(ranges) = unacknowledged.pop_front()
                && !ranges.is_empty()
            {
                attacker.send(&[Frame::Ack(Ack {
                    ranges: AckFrameRanges::new(&ranges).expect("ranges"),
                    ack_delay: Duration::ZERO,
                    receive_time: Duration::ZERO,
                })]);
            }
        }
    });
    assert!(attacker.connection().expect("open").error().is_none());
    (held, most)
}

/// A peer that leaves a gap after every packet it sends (issue #23): the
/// receiver remembers at most `DEFAULT_MAX_RANGES` ranges of 16 bytes
/// (16 KiB) to refuse duplicates, whatever the number of gaps, and its ACK
/// frames carry only the newest `MAX_ACK_RANGES`.
#[test]
fn a_gap_after_every_packet_pins_at_most_the_remembered_ranges() {
    let pings = 4 * DEFAULT_MAX_RANGES;
    let (in_order, one_range) = pinned_by_pings(pings, false);
    let (gapped, most) = pinned_by_pings(pings, true);
    assert_eq!(one_range, 1);
    assert_eq!(most, MAX_ACK_RANGES, "ACK frames are full, never larger");
    let ranges = 16 * DEFAULT_MAX_RANGES as u64;
    eprintln!("in order: {in_order} bytes; a gap after each: {gapped} bytes");
    assert!(
        gapped <= in_order + ranges + 4 * 1024,
        "{gapped} bytes pinned with gaps, {in_order} without"
    );
}

/// A peer that makes the endpoint answer (a PING each time) and never
/// acknowledges anything (issue #23): the endpoint's sent-packet ring,
/// held from its oldest unacknowledged packet, would grow by a record per
/// answer. It is closed once the ring spans twice its congestion window in
/// 64-byte packets plus 2 048 numbers, having pinned no more than that.
#[test]
fn a_peer_that_never_acknowledges_pins_at_most_the_tracked_bound() {
    let pings = 4 * DEFAULT_MAX_RANGES;
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let window = attacker.connection().expect("open").stats().window;
    let mut sent = 0;
    let held = pinned(|| {
        while sent < pings && attacker.connection().is_some_and(|c| c.error().is_none()) {
            attacker.send(&[Frame::Ping]);
            attacker.turn();
            attacker.inbox.clear();
            sent += 1;
        }
    });
    let error = attacker.connection().and_then(|c| c.error().cloned());
    assert_eq!(
        error,
        Some(ConnectionError::Protocol(
            ProtocolError::TooLittleAcknowledged
        ))
    );
    let bound = 2 * (window / 64) + 2048;
    // A ring slot (a sent packet's record) is 184 bytes; the ring doubles.
    let ring = bound.next_power_of_two() * 184;
    eprintln!("closed after {sent} PINGs, {held} bytes pinned; ring bound {ring} bytes");
    assert!(
        sent as u64 <= bound,
        "{sent} PINGs answered before the close"
    );
    assert!(held <= ring + 64 * 1024, "{held} bytes pinned");
}
