//! LEDBAT++'s periodic slowdowns.

use super::*;

#[test]
fn periodic_slowdowns_drain_the_queue_then_restore_the_window() {
    let mut path = Path::new(LedbatConfig::default());
    path.round_trip(0);
    let (exited, srtt_at_exit) = path.until(80, |cc| !cc.in_slow_start());
    let before = path.cc.window();
    // The initial slowdown comes two (smoothed) round trips after slow
    // start.
    let (started, srtt) = path.until(100, Ledbat::in_slowdown);
    let after_exit = started.duration_since(exited);
    assert!(after_exit >= srtt_at_exit * 2, "{after_exit:?}");
    // (It begins with the first ACK after that instant.)
    assert!(
        after_exit <= srtt_at_exit * 2 + Duration::from_millis(140),
        "{after_exit:?}"
    );
    assert_eq!(path.cc.window(), 2 * MSS);
    let held_window = path.cc.ssthresh;
    assert!(
        held_window.abs_diff(before) <= 3 * MSS,
        "{held_window} vs {before}"
    );
    // The hold lasts one round trip (as measured when it began, with the
    // queue in it), then the window restarts at the share of the old one
    // that was on the wire: min RTT / RTT.
    while path.cc.in_slowdown() {
        path.round_trip(0);
    }
    let held = path.now().duration_since(started);
    assert!(held >= srtt, "{held:?}");
    assert!(
        held <= srtt + Duration::from_millis(BASE_RTT_MS),
        "{held:?}"
    );
    assert!(path.cc.in_slow_start());
    let restart = held_window * BASE_RTT_MS / u64::try_from(srtt.as_millis()).unwrap();
    assert!(
        path.cc.window() >= restart - 2 * MSS,
        "{} vs {restart}",
        path.cc.window()
    );
    // ... and slow start climbs back to the window held before.
    let (ramped, _) = path.until(0, |cc| !cc.in_slow_start());
    assert_eq!(path.cc.window(), held_window);
    // The next one comes `slowdown_interval` slowdown-durations later.
    let interval = LedbatConfig::default().slowdown_interval;
    let slowdown = ramped.duration_since(started);
    let (next, _) = path.until(100, Ledbat::in_slowdown);
    let gap = next.duration_since(ramped);
    assert!(
        gap >= slowdown * interval,
        "{gap:?} after a slowdown of {slowdown:?}"
    );
    assert!(
        gap <= slowdown * interval + Duration::from_millis(140),
        "{gap:?} after {slowdown:?}"
    );
}

#[test]
fn with_slowdowns_disabled_the_window_is_never_dropped() {
    let mut path = Path::new(config());
    path.round_trip(0);
    path.round_trip(80);
    let window = path.cc.window();
    for _ in 0..100 {
        path.round_trip(100);
        assert!(!path.cc.in_slowdown());
    }
    assert!(
        path.cc.window() >= window - 2 * MSS,
        "{} from {window}",
        path.cc.window()
    );
}

#[test]
fn after_a_slowdown_the_climb_back_ignores_a_queue_at_the_target() {
    let mut path = Path::new(LedbatConfig::default());
    path.round_trip(0);
    path.until(80, |cc| !cc.in_slow_start());
    path.until(100, Ledbat::in_slowdown);
    let held_window = path.cc.ssthresh;
    // Another flow keeps the queue at the target meanwhile.
    path.until(100, |cc| !cc.in_slowdown() && !cc.in_slow_start());
    assert_eq!(path.cc.window(), held_window);
}

#[test]
fn after_a_slowdown_the_climb_back_stops_at_twice_the_target() {
    let mut path = Path::new(LedbatConfig::default());
    path.round_trip(0);
    path.until(80, |cc| !cc.in_slow_start());
    path.until(100, Ledbat::in_slowdown);
    let held_window = path.cc.ssthresh;
    path.until(200, |cc| !cc.in_slowdown() && !cc.in_slow_start());
    assert!(path.cc.window() < held_window);
}
