//! Slow start, and the restart after persistent congestion.

use super::*;

#[test]
fn a_new_connection_starts_in_slow_start_with_the_initial_window() {
    let path = Path::new(config());
    assert_eq!(path.cc.window(), 26 * MSS);
    assert!(path.cc.in_slow_start());
    path.cc.invariants().unwrap();
}

#[test]
fn slow_start_doubles_the_window_per_round_trip_while_the_queue_is_empty() {
    let mut path = Path::new(config());
    path.round_trip(0);
    assert_eq!(path.cc.window(), 52 * MSS);
    path.round_trip(0);
    assert_eq!(path.cc.window(), 104 * MSS);
    assert!(path.cc.in_slow_start());
}

#[test]
fn slow_start_ends_when_the_queue_reaches_three_quarters_of_the_target() {
    let mut path = Path::new(config());
    path.round_trip(0);
    path.round_trip(74);
    assert!(path.cc.in_slow_start());
    // The filter is the minimum of the last four samples: three at 75 ms
    // still see the 74 ms one.
    for _ in 0..3 {
        path.send(MSS);
        path.ack(MSS, 75);
    }
    assert!(path.cc.in_slow_start());
    let window = path.cc.window();
    path.send(MSS);
    path.ack(MSS, 75);
    assert!(!path.cc.in_slow_start());
    assert_eq!(
        path.cc.window(),
        window,
        "the exiting ACK does not grow the window"
    );
}

#[test]
fn slow_start_ends_on_a_loss_with_the_window_halved() {
    let mut path = Path::new(config());
    path.send(MSS);
    let sent = path.now();
    path.advance(Duration::from_millis(50));
    path.lose(MSS, sent);
    assert!(!path.cc.in_slow_start());
    assert_eq!(path.cc.window(), 13 * MSS);
}

#[test]
fn a_window_the_application_does_not_use_does_not_grow() {
    let mut path = Path::new(config());
    for _ in 0..100 {
        path.send(MSS);
        path.advance(Duration::from_millis(BASE_RTT_MS));
        path.ack(MSS, 0);
    }
    // One packet in flight at a time: the window may exceed that by
    // ALLOWED_INCREASE, and the initial window is not shrunk.
    assert_eq!(path.cc.window(), 26 * MSS);
}

#[test]
fn persistent_congestion_restarts_from_the_minimum_window() {
    let mut path = Path::new(config());
    path.round_trip(0);
    let sent = path.now();
    path.advance(Duration::from_millis(300));
    path.lose(MSS, sent);
    let now = path.now();
    path.cc.on_persistent_congestion(now);
    assert_eq!(path.cc.window(), 2 * MSS);
    assert!(path.cc.in_slow_start());
    assert_eq!(
        path.cc.ssthresh,
        26 * MSS,
        "the halved window is the way back"
    );
    path.cc.invariants().unwrap();
    // A late ACK of the lost packet does not undo a collapse.
    path.cc.on_spurious_loss(now, now);
    assert_eq!(path.cc.window(), 2 * MSS);
}
