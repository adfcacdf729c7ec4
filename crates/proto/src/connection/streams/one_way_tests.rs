//! The application's one-way streams beside the ones that carry large
//! messages: ids, counts, acceptance and directions of their own.

use bytes::Bytes;

use super::*;
use crate::connection::error::{ReadError, WriteError};

fn streams(side: Side) -> Streams {
    Streams::new(side, &ConnectionConfig::default())
}

fn theirs(direction: Direction, index: u64) -> StreamId {
    StreamId::new(Side::Responder, direction, index)
}

#[test]
fn a_peers_one_way_stream_is_accepted_and_read_never_taken_for_a_message() {
    let mut streams = streams(Side::Initiator);
    let id = theirs(Direction::OneWay, 0);
    let delivered = streams
        .on_stream_frame(id, 0, b"one way", true)
        .expect("a valid frame");
    assert!(delivered.is_none(), "an application stream is no message");
    assert!(streams.take_opened_by_peer());
    assert_eq!(streams.accept(), None, "not a bidirectional stream");
    assert_eq!(streams.accept_one_way(), Some(id));
    assert_eq!(streams.poll_readable(), Some(id));
    let mut buf = [0u8; 32];
    assert_eq!(streams.read(id, &mut buf), Ok(ReadOutcome::Read(7)));
    assert_eq!(&buf[..7], b"one way");
    assert_eq!(streams.read(id, &mut buf), Ok(ReadOutcome::Finished));
    // Nothing goes back on it.
    assert_eq!(streams.write(id, b"x"), Err(WriteError::UnknownStream(id)));
    // A large message with the same index is a stream of its own.
    let message = theirs(Direction::Uni, 0);
    assert_ne!(message, id);
    let delivered = streams
        .on_stream_frame(message, 0, b"a message", true)
        .expect("a valid frame")
        .expect("delivered whole");
    assert_eq!(&delivered.message[..], b"a message");
    assert_eq!(streams.accept_one_way(), None);
    assert_eq!(
        streams.read(message, &mut buf),
        Err(ReadError::UnknownStream(message)),
        "a message's stream is not the application's to read"
    );
}

#[test]
fn an_own_one_way_stream_is_written_never_read_and_refuses_the_peers_data() {
    let mut streams = streams(Side::Initiator);
    let id = streams.open_one_way().expect("the peer allows it");
    assert_eq!(id.direction(), Direction::OneWay);
    assert_eq!(streams.write(id, b"hello"), Ok(5));
    let mut buf = [0u8; 8];
    assert_eq!(
        streams.read(id, &mut buf),
        Err(ReadError::UnknownStream(id))
    );
    let refused = streams.on_stream_frame(id, 0, b"back", false);
    assert!(
        matches!(
            refused,
            Err(ProtocolError::Stream(
                stream_id::StreamIdError::WrongDirection(_)
            ))
        ),
        "{refused:?}"
    );
}

#[test]
fn one_way_streams_and_large_messages_count_against_separate_limits() {
    let mut streams = streams(Side::Initiator);
    let mut opened = 0;
    while streams.open_one_way().is_some() {
        opened += 1;
    }
    assert_eq!(opened, INITIAL_MAX_STREAMS);
    // Every one-way stream is taken: a large message still goes.
    streams
        .send_message(Bytes::from(vec![1u8; 5000]))
        .expect("a message stream is free");
    // The peer raises the one-way limit: one more opens.
    let raised = StreamId::new(Side::Initiator, Direction::OneWay, INITIAL_MAX_STREAMS + 1);
    assert_eq!(
        streams.on_max_streams(&MaxStreams { max: raised.0 }),
        Some(Direction::OneWay)
    );
    assert!(streams.open_one_way().is_some());
}

#[test]
fn a_finished_one_way_stream_says_when_it_is_done_with() {
    let mut streams = streams(Side::Initiator);
    let id = streams.open_one_way().expect("allowed");
    streams.write(id, b"abc").expect("open");
    streams.finish(id).expect("open");
    assert_eq!(streams.stop_code(id), Ok(None));
    streams.on_stream_acked(StreamRun {
        id,
        offset: 0,
        len: 3,
        fin: true,
    });
    assert_eq!(streams.poll_writable(), Some(id), "a writable event");
    assert_eq!(streams.stop_code(id), Err(WriteError::UnknownStream(id)));
}

#[test]
fn a_peers_stop_reaches_the_one_way_writer_with_its_code() {
    let mut streams = streams(Side::Initiator);
    let id = streams.open_one_way().expect("allowed");
    streams.write(id, b"abc").expect("open");
    streams
        .on_stop_sending(&StopSending {
            id: id.0,
            error_code: 5,
        })
        .expect("a stream of ours");
    assert_eq!(streams.stop_code(id), Ok(Some(5)));
    assert_eq!(streams.write(id, b"more"), Err(WriteError::Stopped(5)));
}
