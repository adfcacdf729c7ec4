//! The streams of one connection, driven as the connection drives them:
//! the send budget shared by the writers, writable events, announced
//! windows, large messages, and acknowledged runs.

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::connection::error::WriteError;

/// Streams of a connection whose streams may each hold `stream` bytes
/// and together `connection`.
fn streams(stream: usize, connection: usize) -> Streams {
    let config = ConnectionConfig {
        stream_send_buffer: stream,
        send_buffer: connection,
        ..ConnectionConfig::default()
    };
    Streams::new(Side::Initiator, &config)
}

/// Opens a stream the peer lets send as much as it likes.
fn open(streams: &mut Streams) -> StreamId {
    let id = streams.open().expect("the peer allows it");
    streams
        .on_max_stream_data(&MaxStreamData {
            id: id.0,
            max: u64::MAX / 2,
        })
        .expect("own stream");
    id
}

/// Acknowledges `len` bytes of `id` from `offset`, then hands out the
/// writable events that follow.
fn ack(streams: &mut Streams, id: StreamId, offset: u64, len: u32) -> Vec<StreamId> {
    streams.on_stream_acked(StreamRun {
        id,
        offset,
        len: u64::from(len),
        fin: false,
    });
    woken(streams)
}

fn woken(streams: &mut Streams) -> Vec<StreamId> {
    streams.wake_writers();
    let mut woken = std::mem::take(&mut streams.tables.get_mut().writable);
    woken.sort_by_key(|id| id.0);
    woken
}

const DATA: [u8; 10_000] = [9; 10_000];

#[test]
fn one_stream_alone_fills_its_buffer_and_the_next_one_finds_the_budget_spent() {
    let mut streams = streams(4000, 4000);
    let (a, b) = (open(&mut streams), open(&mut streams));
    assert_eq!(streams.writable(a), 4000);
    assert_eq!(streams.write(a, &DATA), Ok(4000));
    assert_eq!(streams.writable(b), 0);
    assert_eq!(streams.write(b, &DATA), Ok(0));
    assert_eq!(streams.send_buffered(), 4000);
}

#[test]
fn acknowledged_bytes_wake_the_stream_below_its_share_and_go_to_it() {
    let mut streams = streams(4000, 4000);
    let (a, b) = (open(&mut streams), open(&mut streams));
    streams.write(a, &DATA).expect("open");
    streams.write(b, &DATA).expect("open");
    // `a` holds more than its half: what its acknowledgements free is `b`'s.
    assert_eq!(ack(&mut streams, a, 0, 1000), vec![b]);
    assert_eq!(streams.writable(a), 0);
    assert_eq!(streams.write(b, &DATA), Ok(1000));
    assert_eq!(ack(&mut streams, a, 1000, 1000), vec![b]);
    assert_eq!(streams.write(b, &DATA), Ok(1000));
    // Now each holds its half; freed bytes are the acknowledged stream's.
    assert_eq!(ack(&mut streams, b, 0, 500), vec![b]);
    assert_eq!(ack(&mut streams, a, 2000, 500), vec![a]);
    assert_eq!(streams.write(a, &DATA), Ok(500));
    assert_eq!(streams.write(b, &DATA), Ok(500));
    assert_eq!(streams.send_buffered(), 4000);
}

#[test]
fn every_blocked_stream_is_woken_when_the_budget_frees_up() {
    let mut streams = streams(8000, 8000);
    let ids: Vec<StreamId> = (0..4).map(|_| open(&mut streams)).collect();
    assert_eq!(streams.write(ids[0], &DATA), Ok(8000));
    for &id in &ids[1..] {
        assert_eq!(streams.write(id, &DATA), Ok(0));
    }
    assert_eq!(ack(&mut streams, ids[0], 0, 8000), ids);
    for &id in &ids {
        assert_eq!(streams.write(id, &DATA), Ok(2000));
    }
    assert_eq!(streams.send_buffered(), 8000);
}

#[test]
fn a_stream_that_finishes_leaves_its_share_to_the_others() {
    let mut streams = streams(4000, 4000);
    let (a, b) = (open(&mut streams), open(&mut streams));
    assert_eq!(streams.write(a, &DATA[..1000]), Ok(1000));
    assert_eq!(streams.write(b, &DATA), Ok(2000));
    assert_eq!(streams.writable(b), 0);
    streams.finish(a).expect("open");
    assert_eq!(woken(&mut streams), vec![b]);
    assert_eq!(streams.write(b, &DATA), Ok(1000));
    assert_eq!(streams.send_buffered(), 4000);
}

#[test]
fn reset_and_stopped_streams_release_their_bytes_at_once() {
    let mut streams = streams(4000, 4000);
    let (a, b, c) = (open(&mut streams), open(&mut streams), open(&mut streams));
    streams.write(a, &DATA).expect("open");
    streams.write(b, &DATA).expect("open");
    streams.write(c, &DATA).expect("open");
    streams.reset(a, 7).expect("open");
    assert_eq!(streams.send_buffered(), 0);
    assert_eq!(woken(&mut streams), vec![b, c]);
    assert_eq!(streams.write(b, &DATA), Ok(2000));
    assert_eq!(streams.write(c, &DATA), Ok(2000));
    // The peer stops `b`: its bytes go, and `c` (above its half no
    // more) is woken for them.
    assert_eq!(streams.write(c, &DATA), Ok(0));
    streams
        .on_stop_sending(&StopSending {
            id: b.0,
            error_code: 9,
        })
        .expect("own stream");
    assert_eq!(streams.send_buffered(), 2000);
    assert_eq!(woken(&mut streams), vec![b, c]);
    assert_eq!(streams.write(b, &DATA), Err(WriteError::Stopped(9)));
    assert_eq!(streams.write(c, &DATA), Ok(2000));
    // A late acknowledgement of a reset stream's bytes changes nothing.
    streams.on_stream_acked(StreamRun {
        id: a,
        offset: 0,
        len: 4000,
        fin: false,
    });
    assert_eq!(streams.send_buffered(), 4000);
}

#[test]
fn once_the_peer_announced_its_limit_a_stream_buffers_no_further() {
    let mut streams = streams(1 << 20, 1 << 20);
    let (a, b) = (
        streams.open().expect("allowed"),
        streams.open().expect("allowed"),
    );
    let big = vec![1u8; 100_000];
    // Before the announcement, the stream's buffer is the bound.
    assert_eq!(streams.write(a, &big), Ok(100_000));
    let limit = |id: StreamId, max: u64| MaxStreamData { id: id.0, max };
    streams.on_max_stream_data(&limit(b, 150_000)).expect("own");
    assert_eq!(streams.write(b, &big), Ok(100_000));
    assert_eq!(streams.write(b, &big), Ok(50_000));
    assert!(woken(&mut streams).is_empty());
    streams.on_max_stream_data(&limit(b, 180_000)).expect("own");
    assert_eq!(woken(&mut streams), vec![b]);
    assert_eq!(streams.write(b, &big), Ok(30_000));
}

#[test]
fn each_side_announces_a_bidirectional_streams_window_as_soon_as_it_knows_it() {
    let mut streams = streams(4000, 4000);
    let own = streams.open().expect("allowed");
    let theirs = StreamId::new(Side::Responder, Direction::Bi, 0);
    streams
        .on_stream_frame(theirs, 0, b"hello", false)
        .expect("a valid frame");
    let mut due = streams.tables.get().max_stream_data_due.clone();
    due.sort_by_key(|id| id.0);
    assert_eq!(due, vec![own, theirs]);
    let window = ConnectionConfig::default().stream_receive_window;
    assert_eq!(
        streams.tables.get().incoming[&theirs].window.limit(),
        window
    );
    assert_eq!(streams.tables.get().incoming[&own].data.limit(), window);
}

#[test]
fn streams_allotted_ahead_open_in_order_up_to_the_one_first_used() {
    let mut streams = streams(4000, 4000);
    let ours = |direction, index| StreamId::new(Side::Initiator, direction, index);
    let limit = streams.local_limit(Direction::Bi);
    assert_eq!(limit, INITIAL_MAX_STREAMS);
    // Nothing is opened (nor announced) until an id is used.
    assert_eq!(streams.opened(Direction::Bi), 0);
    assert!(!streams.open_through(ours(Direction::Bi, 2), false));
    assert_eq!(
        streams.opened(Direction::Bi),
        0,
        "the connection takes no data"
    );
    // The third id used first opens the two before it too, in order.
    assert!(streams.open_through(ours(Direction::Bi, 2), true));
    assert_eq!(streams.opened(Direction::Bi), 3);
    let mut due = streams.tables.get().max_stream_data_due.clone();
    due.sort_by_key(|id| id.0);
    assert_eq!(
        due,
        (0..3).map(|i| ours(Direction::Bi, i)).collect::<Vec<_>>()
    );
    // Used later, an earlier one is open already; the next is `open`'s.
    assert!(streams.open_through(ours(Direction::Bi, 1), false));
    assert_eq!(streams.open(), Some(ours(Direction::Bi, 3)));
    // Not beyond the peer's limit, which stops at what it allows.
    assert!(!streams.open_through(ours(Direction::Bi, limit), true));
    assert_eq!(streams.opened(Direction::Bi), limit);
    // Neither the peer's streams nor the large messages' are allotted.
    assert!(!streams.open_through(StreamId::new(Side::Responder, Direction::Bi, 0), true));
    assert!(!streams.open_through(ours(Direction::Uni, 0), true));
    // One-way streams are counted apart.
    assert!(streams.open_through(ours(Direction::OneWay, 0), true));
    assert_eq!(streams.opened(Direction::OneWay), 1);
}

/// Hands the peer's large message `len` bytes long to `streams` in
/// packet-sized Stream frames; whether it was delivered whole (and then
/// taken by the application).
fn receive_message(streams: &mut Streams, index: u64, len: usize) -> bool {
    let id = StreamId::new(Side::Responder, Direction::Uni, index);
    let data = vec![7u8; len];
    let mut delivered = None;
    for (i, chunk) in data.chunks(1400).enumerate() {
        let offset = (i * 1400) as u64;
        let fin = offset as usize + chunk.len() == len;
        delivered = streams
            .on_stream_frame(id, offset, chunk, fin)
            .expect("a valid frame");
    }
    let Some(delivered) = delivered else {
        return false;
    };
    streams.on_large_message_taken(delivered.held);
    delivered.message.len() == len
}

#[test]
fn a_message_within_half_the_initial_stream_window_asks_for_no_more_room() {
    let mut streams = streams(4000, 4000);
    let half = (INITIAL_STREAM_WINDOW / 2) as usize;
    assert!(receive_message(&mut streams, 0, 16 * 1024));
    assert!(receive_message(&mut streams, 1, half));
    assert!(streams.tables.get().max_stream_data_due.is_empty());
    // A larger one asks, once it has taken half: the sender would
    // otherwise stop at the initial limit.
    let id = StreamId::new(Side::Responder, Direction::Uni, 2);
    streams
        .on_stream_frame(id, 0, &vec![7u8; half], false)
        .expect("a valid frame");
    assert!(streams.tables.get().max_stream_data_due.is_empty());
    streams
        .on_stream_frame(id, half as u64, &[7u8; 100], false)
        .expect("a valid frame");
    assert_eq!(streams.tables.get().max_stream_data_due, vec![id]);
    assert!(streams.tables.get().incoming[&id].window.limit() > INITIAL_STREAM_WINDOW);
}

#[test]
fn large_messages_count_nothing_against_the_budget() {
    let mut streams = streams(4000, 4000);
    streams
        .send_message(Bytes::from(vec![3u8; 10_000]))
        .expect("allowed");
    let a = open(&mut streams);
    assert_eq!(streams.send_buffered(), 0);
    assert_eq!(streams.write(a, &DATA), Ok(4000));
}

/// Sends `bytes` of `id`'s unsent data in full packets (fewer if it
/// has less), then hands out the writable events that follow.
fn send(streams: &mut Streams, id: StreamId, bytes: usize) -> Vec<StreamId> {
    let (mut sealer, _) = tern_wire::PacketSealer::with_opener(
        &mut rand_core::OsRng,
        1,
        tern_wire::KeyConfig::default(),
    );
    let mut buf = [0u8; 1452];
    let target = streams.tables.get().outgoing[&id].data.sent_offset() + bytes as u64;
    while streams.tables.get().outgoing[&id].data.sent_offset() < target {
        let mut packet = sealer.start(&mut buf).expect("room for a packet");
        let mut record = CarriedRecord::new();
        if !streams.write_stream(id, &mut packet, &mut record, false) {
            break;
        }
    }
    woken(streams)
}

#[test]
fn a_stream_holds_no_more_unsent_bytes_than_the_limit_and_its_writer_wakes_at_half() {
    let mut streams = streams(4 * UNSENT_LIMIT, 4 * UNSENT_LIMIT);
    let a = open(&mut streams);
    let big = vec![5u8; 2 * UNSENT_LIMIT];
    assert_eq!(streams.write(a, &big), Ok(UNSENT_LIMIT));
    assert_eq!(streams.write(a, &big), Ok(0));
    assert_eq!(streams.writable(a), 0);
    // Sent but not acknowledged bytes count against the buffer only.
    assert!(send(&mut streams, a, UNSENT_LIMIT / 4).is_empty());
    assert_eq!(send(&mut streams, a, UNSENT_LIMIT / 4), vec![a]);
    let room = streams.writable(a);
    assert!(room >= UNSENT_LIMIT / 2, "{room}");
    assert_eq!(streams.write(a, &big), Ok(room));
    assert_eq!(streams.send_buffered(), UNSENT_LIMIT + room);
}

proptest! {
    /// Acknowledged chunks of two streams, in any order, merged into
    /// runs as the connection merges the packets of one ACK frame:
    /// the runs cover exactly the chunks' bytes, each once, stream by
    /// stream, and the fin comes with the run that ends the stream.
    #[test]
    fn acknowledged_runs_cover_exactly_their_chunks(
        chunks in proptest::collection::vec((0usize..2, 1u64..3000), 1..60)
            .prop_map(|cuts| {
                let mut next = [0u64; 2];
                let mut chunks: Vec<StreamRun> = cuts
                    .into_iter()
                    .map(|(s, len)| {
                        let id = StreamId::new(Side::Initiator, Direction::Bi, s as u64);
                        let offset = next[s];
                        next[s] += len;
                        StreamRun { id, offset, len, fin: false }
                    })
                    .collect();
                for (s, &end) in next.iter().enumerate() {
                    if let Some(last) = chunks
                        .iter_mut()
                        .find(|c| c.id.index() == s as u64 && c.offset + c.len == end)
                    {
                        last.fin = true;
                    }
                }
                (chunks, next)
            })
            .prop_flat_map(|(chunks, ends)| (Just(chunks).prop_shuffle(), Just(ends))),
    ) {
        let (chunks, ends) = chunks;
        let mut runs = Vec::new();
        let mut run: Option<StreamRun> = None;
        for chunk in &chunks {
            if !run.as_mut().is_some_and(|r| r.absorb(chunk))
                && let Some(done) = run.replace(*chunk)
            {
                runs.push(done);
            }
        }
        runs.extend(run);
        for s in 0..2u64 {
            let mine: Vec<&StreamRun> = runs.iter().filter(|r| r.id.index() == s).collect();
            let mut covered = super::range_set::RangeSet::new();
            for r in &mine {
                // Nothing of the run was covered before.
                let fresh: u64 = covered.gaps(r.offset..r.offset + r.len).map(|g| g.end - g.start).sum();
                prop_assert_eq!(fresh, r.len);
                covered.insert(r.offset..r.offset + r.len);
                prop_assert_eq!(r.fin, r.offset + r.len == ends[s as usize]);
            }
            let total: u64 = mine.iter().map(|r| r.len).sum();
            prop_assert_eq!(total, ends[s as usize]);
        }
        prop_assert!(runs.len() <= chunks.len());
    }
}

/// What the application does to one of four streams.
#[derive(Debug, Clone)]
enum Op {
    Write(usize, usize),
    /// The oldest `n` unacknowledged bytes of a stream are acknowledged.
    Ack(usize, usize),
    Finish(usize),
    Reset(usize),
    Stop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4, 1usize..6000).prop_map(|(s, n)| Op::Write(s, n)),
        4 => (0usize..4, 1usize..6000).prop_map(|(s, n)| Op::Ack(s, n)),
        1 => (0usize..4).prop_map(Op::Finish),
        1 => (0usize..4).prop_map(Op::Reset),
        1 => (0usize..4).prop_map(Op::Stop),
    ]
}

proptest! {
    /// Whatever four streams do, they never hold more than the budget
    /// together; a writable event comes only with room; and once every
    /// byte is acknowledged, no stream whose write came up short is
    /// still waiting for its event.
    #[test]
    fn the_budget_holds_and_no_writer_waits_forever(
        stream in 1usize..8000,
        budget in 1usize..12_000,
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let mut streams = streams(stream, budget);
        let ids: Vec<StreamId> = (0..4).map(|_| open(&mut streams)).collect();
        let mut written = [0u64; 4];
        let mut acked = [0u64; 4];
        let mut waits = [false; 4];
        let mut over = [false; 4];
        for op in ops.into_iter().chain((0..4).map(|s| Op::Ack(s, usize::MAX))) {
            match op {
                Op::Write(s, n) => {
                    if let Ok(took) = streams.write(ids[s], &vec![0u8; n]) {
                        written[s] += took as u64;
                        waits[s] = took < n;
                    }
                }
                Op::Ack(s, n) => {
                    let len = (written[s] - acked[s]).min(n as u64).min(u64::from(u32::MAX));
                    streams.on_stream_acked(StreamRun {
                        id: ids[s],
                        offset: acked[s],
                        len,
                        fin: false,
                    });
                    acked[s] += len;
                }
                Op::Finish(s) => {
                    if streams.finish(ids[s]).is_ok() {
                        over[s] = true;
                    }
                }
                Op::Reset(s) => {
                    if streams.reset(ids[s], 1).is_ok() {
                        over[s] = true;
                    }
                }
                Op::Stop(s) => {
                    streams
                        .on_stop_sending(&StopSending { id: ids[s].0, error_code: 2 })
                        .expect("own stream");
                    over[s] = true;
                }
            }
            for id in woken(&mut streams) {
                let s = ids.iter().position(|&i| i == id).expect("one of ours");
                prop_assert!(over[s] || streams.writable(id) > 0);
                waits[s] = false;
            }
            prop_assert!(streams.send_buffered() <= budget);
        }
        for s in 0..4 {
            prop_assert!(!waits[s] || over[s], "stream {s} waits forever");
        }
    }
}

#[test]
fn a_window_update_waits_for_room_in_the_memory_budget() {
    let mut streams = streams(1 << 20, 4 << 20);
    // The whole initial window was read: the update lets in twice as much.
    let window = 2 * INITIAL_CONNECTION_WINDOW;
    streams.max_data_due = false;
    streams
        .window
        .on_received(INITIAL_CONNECTION_WINDOW)
        .expect("within the initial window");
    // The application read everything, but the budget lends too little
    // for the update: it waits, and the peer has no credit left.
    streams.lend_credit_room(1000);
    streams.on_consumed(INITIAL_CONNECTION_WINDOW);
    assert!(streams.credit_wanted());
    assert!(!streams.max_data_due);
    assert_eq!(streams.take_granted(), 0);
    assert_eq!(streams.unused_credit(), 0);
    // Room enough: the update is granted as soon as it is lent.
    streams.lend_credit_room(window);
    assert!(!streams.credit_wanted());
    assert!(streams.max_data_due);
    assert_eq!(streams.take_granted(), window);
    assert_eq!(streams.take_granted(), 0);
    assert_eq!(streams.unused_credit(), window);
}
