//! Small Stream frames of one stream, each continuing the last, are handed
//! to the stream joined, once per packet (`connection/joined.rs`). At
//! random, that fast path must agree with the frames taken one at a time:
//! the same frames sent many to a packet and one to a packet leave the same
//! bytes to read, the same receive memory (pages and runs), the same
//! streams finished, and the same error when a frame breaks a rule (a
//! flow-control error's count aside: a run counts up to its end).

mod support;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use support::attacker::Attacker;
use tern_proto::{
    ConnectionError, Direction, EndpointConfig, INITIAL_STREAM_WINDOW, ProtocolError, ReadOutcome,
    Side, StreamId,
};
use tern_wire::{Frame, Message, Stream};

/// The streams the frames go to: the first few two-way streams, and one
/// past the limit the endpoint grants.
const STREAMS: u64 = 3;
const PAST_LIMIT: u64 = 1_000;

/// Bytes the frames' data is cut from: each offset has its own byte, so
/// data at a wrong offset would read back wrong.
fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// One frame: to stream `stream` (an index), `gap` bytes past where that
/// stream's last frame ended (or from `back` bytes before it), `len`
/// bytes, with `fin`; or a message of `len` bytes.
#[derive(Debug, Clone)]
enum F {
    Stream {
        stream: u64,
        gap: u64,
        back: u64,
        len: u64,
        fin: bool,
    },
    /// Data at the end of the stream's window (over it when `over`).
    AtLimit {
        stream: u64,
        over: bool,
    },
    Message(u64),
}

/// A frame; one in about `1 / faults` breaks a rule (a stream past the
/// limit, data past the window), so that most cases run long.
fn frame(faults: u32) -> impl Strategy<Value = F> {
    let stream = prop_oneof![faults => 0..STREAMS, 1 => Just(PAST_LIMIT)];
    let gap = prop_oneof![6 => Just(0u64), 1 => 1..40u64];
    let back = prop_oneof![8 => Just(0u64), 1 => 1..40u64];
    let len = prop_oneof![3 => Just(1u64), 2 => 0..8u64, 1 => 8..300u64];
    prop_oneof![
        40 => (stream, gap, back, len, prop::bool::weighted(0.01))
            .prop_map(|(stream, gap, back, len, fin)| F::Stream { stream, gap, back, len, fin }),
        1 => (0..STREAMS, prop::bool::weighted(1.0 / f64::from(faults)))
            .prop_map(|(stream, over)| F::AtLimit { stream, over }),
        2 => (0..100u64).prop_map(F::Message),
    ]
}

/// Frames with faults rare, or none, or frequent.
fn frames() -> impl Strategy<Value = Vec<F>> {
    prop_oneof![Just(100_000u32), Just(300), Just(20)]
        .prop_flat_map(|faults| prop::collection::vec(frame(faults), 1..200))
}

fn stream_id(index: u64) -> u64 {
    StreamId::new(Side::Initiator, Direction::Bi, index).0
}

/// Where a frame's data goes: a stream (id, offset, fin), or a message.
type To = Option<(u64, u64, bool)>;

/// The frames' data, kept for the frames to borrow.
struct Frames {
    list: Vec<(To, Vec<u8>)>,
}

impl Frames {
    fn new(ops: &[F]) -> Self {
        let mut ends = [0u64; STREAMS as usize + 1];
        let mut list = Vec::new();
        for op in ops {
            match *op {
                F::Stream {
                    stream,
                    gap,
                    back,
                    len,
                    fin,
                } => {
                    let slot = stream.min(STREAMS) as usize;
                    let offset = (ends[slot] + gap).saturating_sub(back);
                    ends[slot] = ends[slot].max(offset + len);
                    let data = (offset..offset + len).map(byte_at).collect();
                    list.push((Some((stream_id(stream), offset, fin)), data));
                }
                F::AtLimit { stream, over } => {
                    let end = INITIAL_STREAM_WINDOW + u64::from(over);
                    let offset = end - 4;
                    let data = (offset..end).map(byte_at).collect();
                    list.push((Some((stream_id(stream), offset, false)), data));
                }
                F::Message(len) => list.push((None, vec![7; len as usize])),
            }
        }
        Self { list }
    }

    fn frames(&self) -> Vec<Frame<'_>> {
        let mut message = 0;
        self.list
            .iter()
            .map(|(stream, data)| match *stream {
                Some((id, offset, fin)) => Frame::Stream(Stream {
                    id,
                    offset,
                    fin,
                    data,
                }),
                None => {
                    message += 1;
                    Frame::Message(Message {
                        id: message - 1,
                        data,
                    })
                }
            })
            .collect()
    }
}

/// What the endpoint made of the frames: its error, or per stream the
/// bytes it lets the application read and whether they end the stream,
/// with the receive memory it held before the reads.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Failed(String),
    Open {
        receive_memory: usize,
        streams: Vec<(Vec<u8>, bool)>,
    },
}

/// An error as this test compares it: a flow-control error without the
/// bytes it counted.
fn error_kind(error: &ConnectionError) -> String {
    match error {
        ConnectionError::Protocol(ProtocolError::FlowControl(e)) => {
            format!("flow control, limit {}", e.limit)
        }
        other => format!("{other:?}"),
    }
}

fn outcome(attacker: &mut Attacker) -> Outcome {
    let connection = attacker.connection().expect("still held");
    if let Some(error) = connection.error() {
        return Outcome::Failed(error_kind(error));
    }
    let receive_memory = connection.stats().receive_memory;
    let streams = (0..STREAMS)
        .map(|index| {
            let id = StreamId(stream_id(index));
            let mut bytes = Vec::new();
            let mut buf = [0u8; 512];
            loop {
                match connection.read(id, &mut buf) {
                    Ok(ReadOutcome::Read(0)) => return (bytes, false),
                    Ok(ReadOutcome::Read(n)) => bytes.extend_from_slice(&buf[..n]),
                    Ok(ReadOutcome::Finished) => return (bytes, true),
                    Err(_) => return (bytes, false),
                }
            }
        })
        .collect();
    Outcome::Open {
        receive_memory,
        streams,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: RngSeed::Fixed(23),
        ..ProptestConfig::default()
    })]

    #[test]
    fn frames_joined_agree_with_frames_one_by_one(
        ops in frames(),
        cuts in prop::collection::vec(1..40usize, 1..20),
    ) {
        let data = Frames::new(&ops);
        let frames = data.frames();
        let mut packed = Attacker::connect(EndpointConfig::default());
        let mut cuts = cuts.into_iter().cycle();
        let mut rest = &frames[..];
        while !rest.is_empty() {
            let want = cuts.next().unwrap_or(1).min(rest.len());
            let (mut datagram, pushed) = packed.seal(&rest[..want]);
            prop_assert!(pushed > 0, "a frame fits a packet");
            let from = packed.addr;
            packed.deliver(from, &mut datagram);
            rest = &rest[pushed..];
        }
        let mut single = Attacker::connect(EndpointConfig::default());
        for frame in &frames {
            single.send(std::slice::from_ref(frame));
        }
        let (packed, single) = (outcome(&mut packed), outcome(&mut single));
        prop_assert_eq!(packed, single);
    }
}
