//! A stream's two halves over a hostile network model: chunks cut at
//! random, lost, duplicated, reordered and acknowledged in any order — the
//! reader gets exactly the bytes written, once, in order.

use proptest::prelude::*;

use super::pages::{PAGE, PagePool};
use super::recv_stream::{RecvStream, StreamError};
use super::send_stream::SendStream;

/// What the network does next.
#[derive(Debug, Clone)]
enum Net {
    /// The application writes up to this many bytes.
    Write(usize),
    /// The sender fills a packet of this size.
    Send(usize),
    /// A packet in flight arrives (index mod count), and is acknowledged.
    Deliver(usize),
    /// A packet in flight arrives twice, and is acknowledged.
    Duplicate(usize),
    /// A packet in flight arrives but its acknowledgement is lost.
    DeliverUnacked(usize),
    /// A packet in flight is lost.
    Lose(usize),
    /// The reader reads up to this many bytes.
    Read(usize),
}

fn net() -> impl Strategy<Value = Net> {
    prop_oneof![
        2 => (1usize..3000).prop_map(Net::Write),
        3 => (1usize..1500).prop_map(Net::Send),
        3 => any::<usize>().prop_map(Net::Deliver),
        1 => any::<usize>().prop_map(Net::Duplicate),
        1 => any::<usize>().prop_map(Net::DeliverUnacked),
        1 => any::<usize>().prop_map(Net::Lose),
        2 => (1usize..4000).prop_map(Net::Read),
    ]
}

/// A packet's stream chunk.
#[derive(Debug, Clone)]
struct Packet {
    offset: u64,
    data: Vec<u8>,
    fin: bool,
}

const WINDOW: u64 = 8192;

fn source(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_reader_gets_exactly_what_was_written(
        len in 0usize..20_000,
        seed in any::<u8>(),
        script in proptest::collection::vec(net(), 0..400),
    ) {
        let data = source(len, seed);
        let mut tx = SendStream::new(4096);
        let mut rx = RecvStream::new(WINDOW);
        let mut written = 0;
        let mut flight: Vec<Packet> = Vec::new();
        let mut out = Vec::new();
        let mut buf = [0u8; 4000];
        let mut pool = PagePool::new(WINDOW);
        let deliver = |rx: &mut RecvStream, pool: &mut PagePool, p: &Packet| -> Result<(), StreamError> {
            rx.insert(pool, p.offset, &p.data, p.fin).map(|_| ())
        };
        // The script, then a clean finish: everything delivered and read.
        let finale = (0..2000).flat_map(|_| [Net::Write(4096), Net::Send(1200), Net::Deliver(0), Net::Read(4000)]);
        for step in script.into_iter().chain(finale) {
            match step {
                Net::Write(n) => {
                    let n = n.min(len - written);
                    written += tx.write(&data[written..written + n]);
                    if written == len {
                        tx.finish();
                    }
                }
                Net::Send(max) => {
                    if let Some(chunk) = tx.poll_chunk(max, rx.limit(), true) {
                        prop_assert!(chunk.data.len() <= max);
                        prop_assert!(chunk.offset + chunk.data.len() as u64 <= rx.limit());
                        flight.push(Packet { offset: chunk.offset, data: chunk.data.to_vec(), fin: chunk.fin });
                    }
                }
                Net::Deliver(i) | Net::Duplicate(i) | Net::DeliverUnacked(i) if !flight.is_empty() => {
                    let p = flight.remove(i % flight.len());
                    deliver(&mut rx, &mut pool, &p).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    if matches!(step, Net::Duplicate(_)) {
                        deliver(&mut rx, &mut pool, &p).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                    if matches!(step, Net::DeliverUnacked(_)) {
                        tx.on_lost(p.offset, p.data.len() as u64, p.fin);
                    } else {
                        tx.on_acked(p.offset, p.data.len() as u64, p.fin);
                    }
                }
                Net::Lose(i) if !flight.is_empty() => {
                    let p = flight.remove(i % flight.len());
                    tx.on_lost(p.offset, p.data.len() as u64, p.fin);
                }
                Net::Read(n) => {
                    let got = rx.read(&mut pool, &mut buf[..n.min(4000)]);
                    out.extend_from_slice(&buf[..got]);
                    // The reader's window slides as it reads.
                    rx.set_limit(rx.read_offset() + WINDOW);
                }
                _ => {}
            }
            prop_assert!(tx.buffered() <= 4096);
            prop_assert!(rx.buffered() <= WINDOW);
            // Memory follows the bytes held: their pages, and at most a
            // partly filled page at each end of each run and the reader's.
            let pages = rx.buffered() as usize / PAGE + 2 * rx.runs() + 1;
            prop_assert!(pool.live_memory() <= pages * PAGE, "{} bytes held in {} runs", rx.buffered(), rx.runs());
            prop_assert_eq!(pool.live_memory(), rx.memory());
            if tx.is_done() && rx.is_finished() {
                break;
            }
        }
        prop_assert_eq!(out.len(), data.len());
        prop_assert!(out == data, "bytes differ");
        prop_assert!(rx.is_finished());
        prop_assert!(tx.is_done());
    }
}

#[test]
fn a_peer_that_breaks_the_window_or_the_final_size_is_refused() {
    let mut pool = PagePool::new(1 << 20);
    let mut rx = RecvStream::new(100);
    assert_eq!(
        rx.insert(&mut pool, 90, &[0; 11], false),
        Err(StreamError::FlowControl { limit: 100 })
    );
    assert_eq!(
        rx.insert(&mut pool, u64::MAX - 1, &[0; 4], false),
        Err(StreamError::FlowControl { limit: 100 })
    );
    assert_eq!(rx.insert(&mut pool, 0, &[1; 10], false), Ok(10));
    assert_eq!(rx.insert(&mut pool, 20, &[2; 10], true), Ok(20));
    assert_eq!(
        rx.insert(&mut pool, 25, &[2; 10], false),
        Err(StreamError::FinalSize)
    );
    assert_eq!(
        rx.insert(&mut pool, 0, &[1; 5], true),
        Err(StreamError::FinalSize)
    );
    assert_eq!(rx.insert(&mut pool, 10, &[3; 10], false), Ok(0));
    let mut out = [0; 64];
    assert_eq!(rx.read(&mut pool, &mut out), 30);
    assert!(rx.is_finished());
    let mut early = RecvStream::new(100);
    early
        .insert(&mut pool, 50, &[0; 10], false)
        .expect("within the window");
    assert_eq!(
        early.insert(&mut pool, 0, &[0; 10], true),
        Err(StreamError::FinalSize),
        "a fin below data already seen"
    );
}

#[test]
fn a_reset_fixes_the_final_size_and_a_different_one_is_refused() {
    let mut pool = PagePool::new(1 << 20);
    let mut rx = RecvStream::new(100);
    rx.insert(&mut pool, 0, &[1; 30], false)
        .expect("within the window");
    assert_eq!(rx.reset(20), Err(StreamError::FinalSize), "below data seen");
    assert_eq!(rx.reset(101), Err(StreamError::FlowControl { limit: 100 }));
    assert_eq!(rx.reset(50), Ok(20), "the window is charged up to the end");
    assert_eq!(rx.reset(50), Ok(0), "a repeat charges nothing");
    assert_eq!(rx.reset(60), Err(StreamError::FinalSize));
    assert_eq!(
        rx.insert(&mut pool, 50, &[1; 1], false),
        Err(StreamError::FinalSize)
    );
    let mut finished = RecvStream::new(100);
    finished
        .insert(&mut pool, 0, &[1; 10], true)
        .expect("a fin");
    assert_eq!(finished.reset(10), Ok(0));
    assert_eq!(finished.reset(11), Err(StreamError::FinalSize));
}

#[test]
fn a_full_buffer_takes_nothing_until_the_peer_acknowledges() {
    let mut tx = SendStream::new(10);
    assert_eq!(tx.write(&[7; 25]), 10);
    assert_eq!(tx.write(&[7; 5]), 0);
    let chunk = tx.poll_chunk(4, u64::MAX, true).expect("a chunk");
    assert_eq!((chunk.offset, chunk.data.len()), (0, 4));
    assert_eq!(tx.write(&[7; 5]), 0, "sent is not acknowledged");
    tx.on_acked(0, 4, false);
    assert_eq!(tx.free_space(), 4);
    assert!(tx.blocked_at(4), "new bytes wait for the peer's limit");
    assert_eq!(tx.poll_chunk(100, 4, true), None);
    assert_eq!(tx.reset(), 4);
    assert_eq!(
        tx.poll_chunk(100, u64::MAX, true),
        None,
        "a reset stream sends nothing more"
    );
}

/// The offsets of the next `n` chunks of at most 10 bytes below `limit`
/// (`None` once there is nothing to send), on a long path.
fn next_offsets(tx: &mut SendStream, n: usize, limit: u64) -> Vec<Option<u64>> {
    next_offsets_copying(tx, n, limit, true)
}

/// As [`next_offsets`], with blocking retransmissions copied or not.
fn next_offsets_copying(
    tx: &mut SendStream,
    n: usize,
    limit: u64,
    copy_blocking: bool,
) -> Vec<Option<u64>> {
    (0..n)
        .map(|_| {
            tx.poll_chunk(10, limit, copy_blocking)
                .map(|chunk| chunk.offset)
        })
        .collect()
}

/// A stream of 100 bytes whose first four chunks of 10 went out.
fn four_chunks_sent() -> SendStream {
    let mut tx = SendStream::new(100);
    assert_eq!(tx.write(&[7; 100]), 100);
    let sent = next_offsets(&mut tx, 4, u64::MAX);
    assert_eq!(sent, [Some(0), Some(10), Some(20), Some(30)]);
    tx
}

#[test]
fn a_retransmission_that_blocks_delivery_goes_again_after_the_other_lost_bytes() {
    let mut tx = four_chunks_sent();
    tx.on_acked(10, 10, false);
    tx.on_lost(0, 10, false);
    tx.on_lost(20, 10, false);
    assert_eq!(
        next_offsets(&mut tx, 6, u64::MAX),
        [Some(0), Some(20), Some(0), Some(40), Some(50), Some(60)],
        "only the bytes at the oldest unacknowledged offset go twice"
    );
}

#[test]
fn on_a_short_path_a_blocking_retransmission_goes_once() {
    let mut tx = four_chunks_sent();
    tx.on_lost(0, 10, false);
    assert_eq!(
        next_offsets_copying(&mut tx, 3, u64::MAX, false),
        [Some(0), Some(40), Some(50)]
    );
}

#[test]
fn a_copy_whose_bytes_were_acknowledged_meanwhile_is_not_sent() {
    let mut tx = four_chunks_sent();
    tx.on_lost(0, 10, false);
    assert_eq!(next_offsets(&mut tx, 1, u64::MAX), [Some(0)]);
    tx.on_acked(0, 10, false);
    assert_eq!(
        next_offsets(&mut tx, 3, u64::MAX),
        [Some(40), Some(50), Some(60)]
    );
}

#[test]
fn the_copy_goes_when_the_peer_allows_nothing_new() {
    let mut tx = four_chunks_sent();
    tx.on_lost(0, 10, false);
    assert_eq!(
        next_offsets(&mut tx, 3, 40),
        [Some(0), Some(0), None],
        "the peer allows nothing new"
    );
    assert!(!tx.wants_to_send(40));
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, usize),
    Read(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..40_000, 1usize..6_000).prop_map(|(at, len)| Op::Insert(at, len)),
        1 => (1usize..9_000).prop_map(Op::Read),
    ]
}

proptest! {
    /// Chunks anywhere, overlapping, in any order, read at random: the
    /// reader gets exactly the bytes written, and the pages held follow the
    /// bytes buffered (a partly filled page at each end of each run, and
    /// the reader's), never the offsets seen.
    #[test]
    fn pages_deliver_what_was_written_and_follow_the_bytes(
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        const LEN: usize = 48_000;
        let data = source(LEN, 3);
        let mut pool = PagePool::new(1 << 20);
        let mut rx = RecvStream::new(LEN as u64);
        let mut model = vec![false; LEN];
        let mut out = Vec::new();
        let mut buf = vec![0u8; 9_000];
        let fin = [Op::Insert(0, LEN), Op::Read(LEN)];
        for op in ops.into_iter().chain(fin) {
            match op {
                Op::Insert(at, len) => {
                    let at = at as usize;
                    let end = (at + len).min(LEN);
                    if at >= end {
                        continue;
                    }
                    rx.insert(&mut pool, at as u64, &data[at..end], end == LEN)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    model[at..end].fill(true);
                }
                Op::Read(n) => {
                    while out.len() < LEN {
                        let n = n.min(buf.len());
                        let got = rx.read(&mut pool, &mut buf[..n]);
                        if got == 0 {
                            break;
                        }
                        out.extend_from_slice(&buf[..got]);
                    }
                }
            }
            let held = model[out.len()..].iter().filter(|b| **b).count() as u64;
            prop_assert_eq!(rx.buffered(), held);
            let pages = rx.buffered() as usize / PAGE + 2 * rx.runs() + 1;
            prop_assert!(pool.live_memory() <= pages * PAGE);
            prop_assert_eq!(pool.live_memory(), rx.memory());
        }
        prop_assert!(out == data, "bytes differ");
        prop_assert!(rx.is_finished());
        prop_assert!(pool.live_memory() <= PAGE, "one page at most after the last read");
    }
}
