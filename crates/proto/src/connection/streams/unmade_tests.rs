//! A two-way stream the peer opened: its sending half is made at its
//! first use (a write, a finish or a reset from the application, the
//! peer's MaxStreamData or StopSending), or when its receiving half goes.
//! Until then every question about it has the answer a fresh half gives.

use tern_wire::{MaxStreamData, StopSending};

use super::*;
use crate::connection::error::WriteError;

fn streams() -> Streams {
    Streams::new(Side::Initiator, &ConnectionConfig::default())
}

/// The peer's two-way stream `index`, opened by one byte and reset.
fn opened_and_reset(streams: &mut Streams, index: u64) -> StreamId {
    let id = StreamId::new(Side::Responder, Direction::Bi, index);
    streams.on_stream_frame(id, 0, b"x", false).expect("valid");
    let reset = ResetStream {
        id: id.0,
        error_code: 7,
        final_size: 1,
    };
    streams.on_reset(&reset).expect("valid");
    id
}

fn made(streams: &Streams, id: StreamId) -> bool {
    streams.tables.get().outgoing.contains_key(&id)
}

fn retired(streams: &Streams) -> u64 {
    streams.retired_remote[slot(Direction::Bi)]
}

#[test]
fn a_stream_opened_and_reset_by_the_peer_makes_no_sending_half_yet_reads_as_a_fresh_one() {
    let mut streams = streams();
    let id = opened_and_reset(&mut streams, 0);
    assert!(!made(&streams, id));
    assert_eq!(streams.accept(), Some(id));
    assert_eq!(streams.stop_code(id), Ok(None));
    assert!(!streams.credit_announced(id));
    assert_eq!(streams.memory(), 0);
    // As much room as a stream this side opens.
    let own = streams.open().expect("the peer allows one");
    assert!(streams.writable(own) > 0);
    assert_eq!(streams.writable(id), streams.writable(own));
    // A stream this side never had reads as unknown still.
    let unknown = StreamId::new(Side::Responder, Direction::Bi, 5);
    assert_eq!(streams.writable(unknown), 0);
    assert_eq!(
        streams.stop_code(unknown),
        Err(WriteError::UnknownStream(unknown))
    );
}

#[test]
fn the_first_write_makes_the_half_and_sends() {
    let mut streams = streams();
    let id = opened_and_reset(&mut streams, 0);
    assert_eq!(streams.write(id, b"answer"), Ok(6));
    assert!(made(&streams, id));
    assert_eq!(streams.memory(), 6);
    assert_eq!(streams.next_turn(), Some(Turn::Stream(id)));
    streams.finish(id).expect("open");
    assert_eq!(streams.tables.get().outgoing[&id].data.written(), 6);
}

#[test]
fn a_finish_or_a_reset_alone_makes_the_half() {
    let mut streams = streams();
    let finished = opened_and_reset(&mut streams, 0);
    streams.finish(finished).expect("open");
    assert!(made(&streams, finished));
    assert_eq!(streams.next_turn(), Some(Turn::Stream(finished)));

    let reset = opened_and_reset(&mut streams, 1);
    streams.reset(reset, 9).expect("open");
    let out = &streams.tables.get().outgoing[&reset];
    assert_eq!((out.reset_code, out.data.reset_at()), (Some(9), Some(0)));
    assert_eq!(streams.tables.get().resets_due, vec![reset]);
    assert_eq!(streams.write(reset, b"late"), Err(WriteError::Stopped(9)));
}

#[test]
fn the_peers_stop_sending_makes_the_half_stopped() {
    let mut streams = streams();
    let id = opened_and_reset(&mut streams, 0);
    let stop = StopSending {
        id: id.0,
        error_code: 4,
    };
    streams
        .on_stop_sending(&stop)
        .expect("a stream of the peer's");
    assert_eq!(streams.stop_code(id), Ok(Some(4)));
    assert_eq!(streams.tables.get().resets_due, vec![id]);
    assert_eq!(streams.poll_writable(), Some(id), "a writer learns of it");
    assert_eq!(streams.write(id, b"no"), Err(WriteError::Stopped(4)));
    assert_eq!(streams.writable(id), 0);
}

#[test]
fn the_peers_stream_limit_makes_the_half_and_bounds_the_writes() {
    let mut streams = streams();
    let id = opened_and_reset(&mut streams, 0);
    let limit = INITIAL_STREAM_WINDOW + 3;
    let max = MaxStreamData {
        id: id.0,
        max: limit,
    };
    streams
        .on_max_stream_data(&max)
        .expect("a stream of the peer's");
    assert!(streams.credit_announced(id));
    assert_eq!(streams.tables.get().outgoing[&id].credit.limit(), limit);
    assert!(streams.writable(id) as u64 <= limit);
}

#[test]
fn a_stream_read_to_its_end_lives_on_in_its_sending_half() {
    let mut streams = streams();
    let id = StreamId::new(Side::Responder, Direction::Bi, 0);
    streams.on_stream_frame(id, 0, b"ask", true).expect("valid");
    let mut buf = [0u8; 8];
    assert_eq!(streams.read(id, &mut buf), Ok(ReadOutcome::Read(3)));
    assert_eq!(streams.read(id, &mut buf), Ok(ReadOutcome::Finished));
    assert_eq!(retired(&streams), 0, "this side may still answer");
    assert_eq!(streams.write(id, b"reply"), Ok(5));
    streams.finish(id).expect("open");
    streams.on_stream_acked(StreamRun {
        id,
        offset: 0,
        len: 5,
        fin: true,
    });
    assert_eq!(retired(&streams), 1);
}
