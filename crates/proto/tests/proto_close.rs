//! A graceful close has a deadline (issue #27): a peer that keeps the path
//! alive but never acknowledges what was sent cannot hold a closing
//! connection; and stream ids an application side allots ahead open only
//! when used, none once a close began. Played by the attacker harness on
//! a mock clock.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::attacker::{Attacker, Limits};
use tern_proto::{ConnectionError, Direction, EndpointConfig, INITIAL_MAX_STREAMS, StreamId};
use tern_wire::{Frame, FrameType};

/// Whether the endpoint sent the attacker an application Close since the
/// inbox was last emptied.
fn sent_application_close(attacker: &mut Attacker) -> bool {
    let inbox = std::mem::take(&mut attacker.inbox);
    inbox.into_iter().any(|mut datagram| {
        attacker
            .open(&mut datagram)
            .is_some_and(|(_, types)| types.contains(&FrameType::ApplicationClose))
    })
}

/// Queues a message and closes gracefully, then plays a peer that sends a
/// Ping every 100 ms (so the idle timeout never ends it) and acknowledges
/// nothing, for `duration`.
fn close_to_a_silent_reader(attacker: &mut Attacker, duration: Duration) {
    let now = attacker.now();
    let connection = attacker.connection().expect("open");
    connection
        .send_message(Bytes::from(vec![7u8; 100_000]))
        .expect("queued");
    connection.close(now, 9, Bytes::from_static(b"bye"));
    ping_for(attacker, duration);
}

fn ping_for(attacker: &mut Attacker, duration: Duration) {
    let step = Duration::from_millis(100);
    let end = attacker.now() + duration;
    while attacker.now() < end {
        attacker.send(&[Frame::Ping]);
        attacker.run_for(step, Duration::from_millis(10));
    }
}

#[test]
fn a_graceful_close_to_a_peer_that_never_acknowledges_gives_up_and_is_freed() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    // Longer than the idle timeout: only the pings keep the path alive.
    close_to_a_silent_reader(&mut attacker, Duration::from_secs(40));
    assert!(
        sent_application_close(&mut attacker),
        "the peer is told the connection closed"
    );
    assert!(attacker.connection().is_none(), "the connection is freed");
    assert!(attacker.endpoint.is_empty());
}

#[test]
fn the_drain_timeout_is_configurable() {
    let mut config = EndpointConfig::default();
    config.connection.close_drain_timeout = Some(Duration::from_secs(5));
    let mut attacker = Attacker::connect(config);
    close_to_a_silent_reader(&mut attacker, Duration::from_millis(4_500));
    assert!(
        !sent_application_close(&mut attacker),
        "still waiting for the peer within the drain timeout"
    );
    let connection = attacker.connection().expect("still draining");
    assert_eq!(connection.error(), None);
    ping_for(&mut attacker, Duration::from_secs(1));
    assert!(sent_application_close(&mut attacker), "gave up after 5 s");
    let error = attacker.connection().and_then(|c| c.error().cloned());
    assert_eq!(error, Some(ConnectionError::LocallyClosed { code: 9 }));
}

#[test]
fn a_close_after_a_long_silence_is_not_stretched_by_the_backed_off_probe_timeout() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let connection = attacker.connection().expect("open");
    connection
        .send_message(Bytes::from(vec![7u8; 100_000]))
        .expect("queued");
    // Twenty seconds of probes nobody acknowledges back the probe timeout
    // off to seconds.
    ping_for(&mut attacker, Duration::from_secs(20));
    let now = attacker.now();
    let connection = attacker.connection().expect("open");
    connection.close(now, 9, Bytes::new());
    ping_for(&mut attacker, Duration::from_secs(10));
    assert!(sent_application_close(&mut attacker), "gave up");
    assert!(
        attacker.connection().is_none(),
        "and its closing period ended"
    );
}

#[test]
fn stream_ids_allotted_ahead_show_on_the_wire_only_once_used_and_none_open_after_a_close() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let step = Duration::from_millis(10);
    attacker.run_for(Duration::from_millis(200), step);
    attacker.inbox.clear();
    let connection = attacker.connection().expect("open");
    let side = connection.side();
    let two_way = |i| StreamId::new(side, Direction::Bi, i);
    assert_eq!(connection.stream_limit(Direction::Bi), INITIAL_MAX_STREAMS);
    // Ids 0 to 2 allotted by the application side and never used:
    // nothing of them goes out.
    attacker.run_for(Duration::from_millis(200), step);
    let mut announced = Limits::default();
    attacker.take_limits(&mut announced);
    assert!(announced.streams.is_empty(), "{announced:?}");
    // Id 1 used first: it and the one before it are opened (each
    // two-way stream announces its receive window), not id 2.
    let connection = attacker.connection().expect("open");
    assert!(connection.open_stream_through(two_way(1)));
    attacker.run_for(Duration::from_millis(200), step);
    attacker.take_limits(&mut announced);
    let mut ids: Vec<u64> = announced.streams.keys().copied().collect();
    ids.sort_unstable();
    assert_eq!(ids, [two_way(0).0, two_way(1).0]);
    // Once a graceful close began, no more are opened.
    let now = attacker.now();
    let connection = attacker.connection().expect("open");
    connection.close(now, 0, Bytes::new());
    assert_eq!(connection.stream_limit(Direction::Bi), 2);
    assert!(connection.open_stream_through(two_way(1)), "open before");
    assert!(!connection.open_stream_through(two_way(2)));
}
