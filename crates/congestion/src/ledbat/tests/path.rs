//! A path that gets longer: announced by the connection (a migration), or
//! found after a quiet period.

use super::*;

/// One way, how much longer the new path is than the old: above the
/// target, so to the old base it is a queue that forbids any growth.
const LONGER_MS: u64 = 150;

/// A flow in congestion avoidance on the 40 ms path for a while.
fn settled() -> Path {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    for _ in 0..10 {
        path.round_trip(0);
    }
    path
}

#[test]
fn after_a_move_to_a_longer_path_the_window_grows_within_a_few_round_trips() {
    // Told nothing, the flow reads the longer path as a standing queue and
    // sits at its minimum window (for `base_history` minutes).
    let mut stale = settled();
    for _ in 0..20 {
        stale.round_trip(LONGER_MS);
    }
    assert!(stale.cc.window() < 3 * MSS, "{}", stale.cc.window());
    assert_eq!(stale.cc.queuing_delay(), Duration::from_millis(LONGER_MS));

    // Told of the move, it measures the new path from its first samples
    // and slow-starts there.
    let mut moved = settled();
    moved.change_path();
    let initial = moved.cc.window();
    assert_eq!(initial, 26 * MSS);
    assert!(moved.cc.in_slow_start());
    for _ in 0..4 {
        moved.round_trip(LONGER_MS);
    }
    assert!(moved.cc.queuing_delay() < Duration::from_millis(1));
    assert!(
        moved.cc.window() >= 8 * initial,
        "{} after four round trips",
        moved.cc.window()
    );
}

#[test]
fn after_a_move_what_is_said_of_packets_sent_on_the_old_path_is_ignored() {
    let mut path = settled();
    let sent_on_old_path = path.last_sent;
    path.advance(Duration::from_millis(1));
    path.change_path();
    let window = path.cc.window();
    // A loss on the old path does not halve the new path's window.
    path.lose(MSS, sent_on_old_path);
    assert_eq!(path.cc.window(), window);
    // An old packet's ACK, with the old path's short one-way delay, sets
    // no base: the new path's samples then show no queue.
    let old_ack = Acked {
        bytes: MSS,
        largest_sent_at: sent_on_old_path,
        bytes_in_flight: 0,
        one_way_delay: Some(OneWayDelay::from_nanos(
            i64::try_from(BASE_OWD_MS * 1_000_000).unwrap(),
        )),
        app_limited: false,
    };
    let (now, rtt) = (path.now(), path.rtt);
    path.cc.on_ack(now, &old_ack, &rtt);
    assert_eq!(path.cc.window(), window);
    path.round_trip(LONGER_MS);
    assert!(path.cc.queuing_delay() < Duration::from_millis(1));
    assert!(path.cc.window() > window);
}

#[test]
fn after_a_quiet_minute_a_longer_path_is_measured_afresh() {
    // Quiet for half a bucket: the history is kept, and a longer path
    // still reads as a queue.
    let mut brief = settled();
    brief.advance(QUIET_PERIOD / 2);
    brief.round_trip(LONGER_MS);
    assert_eq!(brief.cc.queuing_delay(), Duration::from_millis(LONGER_MS));

    // Quiet for longer than a bucket: the route may have changed, and the
    // first samples after it are the base.
    let mut quiet = settled();
    let window = quiet.cc.window();
    quiet.advance(QUIET_PERIOD + Duration::from_secs(1));
    for _ in 0..3 {
        quiet.round_trip(LONGER_MS);
    }
    assert!(quiet.cc.queuing_delay() < Duration::from_millis(1));
    assert!(
        quiet.cc.window() >= window,
        "{} < {window}",
        quiet.cc.window()
    );
}
