//! A peer's stream its reader stopped: what it buffered goes at once, and
//! it is retired (its count back to the peer) as soon as its end is known,
//! since nobody will ever read that end.

use super::*;
use crate::connection::error::ReadError;

fn streams() -> Streams {
    Streams::new(Side::Initiator, &ConnectionConfig::default())
}

fn theirs(direction: Direction, index: u64) -> StreamId {
    StreamId::new(Side::Responder, direction, index)
}

/// Streams of `direction` the peer opened that are done with.
fn retired(streams: &Streams, direction: Direction) -> u64 {
    streams.retired_remote[slot(direction)]
}

fn stops_due(streams: &Streams) -> Vec<(StreamId, u64)> {
    streams.tables.get().stops_due.clone()
}

fn reset(id: StreamId, final_size: u64) -> ResetStream {
    ResetStream {
        id: id.0,
        error_code: 7,
        final_size,
    }
}

/// The peer's first one-way stream, of which 5 bytes came, stopped with
/// code 3 before its end.
fn stopped_before_its_end() -> (Streams, StreamId) {
    let mut streams = streams();
    let id = theirs(Direction::OneWay, 0);
    streams
        .on_stream_frame(id, 0, b"first", false)
        .expect("valid");
    streams.stop_sending(id, 3).expect("a stream of the peer's");
    (streams, id)
}

#[test]
fn a_stream_stopped_after_its_end_arrived_is_retired_at_once() {
    let mut streams = streams();
    let id = theirs(Direction::OneWay, 0);
    streams.on_stream_frame(id, 0, b"x", true).expect("valid");
    assert_eq!(streams.accept_one_way(), Some(id));
    streams.stop_sending(id, 0).expect("a stream of the peer's");
    assert_eq!(retired(&streams, Direction::OneWay), 1);
    assert!(stops_due(&streams).is_empty(), "the peer sent it all");
    assert!(!streams.has_unread(), "its byte is let go");
    let mut buf = [0u8; 4];
    assert_eq!(
        streams.read(id, &mut buf),
        Err(ReadError::UnknownStream(id))
    );
    // A late repeat of its frame opens nothing anew.
    streams.on_stream_frame(id, 0, b"x", true).expect("valid");
    assert_eq!(streams.accept_one_way(), None);
    assert_eq!(retired(&streams, Direction::OneWay), 1);
}

#[test]
fn a_stream_stopped_before_its_end_keeps_nothing_and_is_retired_when_it_ends() {
    let (mut streams, id) = stopped_before_its_end();
    assert_eq!(stops_due(&streams), vec![(id, 3)]);
    assert_eq!(
        retired(&streams, Direction::OneWay),
        0,
        "its end is unknown"
    );
    assert!(!streams.has_unread());
    // What the peer sent before it heard of the stop is not kept.
    streams
        .on_stream_frame(id, 5, b"more", false)
        .expect("valid");
    assert!(!streams.has_unread());
    assert_eq!(streams.tables.get().incoming[&id].data.memory(), 0);
    streams.on_stream_frame(id, 9, b"end", true).expect("valid");
    assert_eq!(retired(&streams, Direction::OneWay), 1);
    // Its end contradicted is refused as ever before it is retired.
    let other = theirs(Direction::OneWay, 1);
    streams
        .on_stream_frame(other, 0, b"abc", false)
        .expect("valid");
    streams
        .stop_sending(other, 0)
        .expect("a stream of the peer's");
    assert!(streams.on_stream_frame(other, 0, b"a", true).is_err());
}

#[test]
fn a_stopped_stream_is_retired_by_the_reset_that_answers_the_stop() {
    let (mut streams, id) = stopped_before_its_end();
    streams.on_reset(&reset(id, 20)).expect("valid");
    assert_eq!(retired(&streams, Direction::OneWay), 1);
    assert!(!streams.has_unread());
    // The reset repeated (its acknowledgement lost) changes nothing.
    streams.on_reset(&reset(id, 20)).expect("valid");
    assert_eq!(retired(&streams, Direction::OneWay), 1);
}

#[test]
fn a_reset_stream_left_unread_is_retired_when_its_reader_stops_it() {
    let mut streams = streams();
    let id = theirs(Direction::OneWay, 0);
    streams.on_reset(&reset(id, 20)).expect("valid");
    assert_eq!(
        retired(&streams, Direction::OneWay),
        0,
        "its reader may read the reset"
    );
    streams.stop_sending(id, 0).expect("a stream of the peer's");
    assert_eq!(retired(&streams, Direction::OneWay), 1);
    assert!(stops_due(&streams).is_empty());
}

#[test]
fn a_stopped_two_way_stream_is_retired_once_this_side_is_done_sending_too() {
    let mut streams = streams();
    let id = theirs(Direction::Bi, 0);
    streams.on_stream_frame(id, 0, b"x", true).expect("valid");
    streams.stop_sending(id, 0).expect("a stream of the peer's");
    assert_eq!(retired(&streams, Direction::Bi), 0, "this side still sends");
    streams.finish(id).expect("open");
    streams.on_stream_acked(StreamRun {
        id,
        offset: 0,
        len: 0,
        fin: true,
    });
    assert_eq!(retired(&streams, Direction::Bi), 1);
}
