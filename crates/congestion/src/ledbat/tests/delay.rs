//! The queuing-delay estimate: hostile samples, receiver clocks, paths.

use super::*;

#[test]
fn forged_extreme_samples_neither_panic_nor_break_the_window() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let forged = [
        (Duration::MAX, OneWayDelay::from_nanos(i64::MAX)),
        (Duration::MAX, OneWayDelay::from_nanos(i64::MIN)),
        (Duration::ZERO, OneWayDelay::from_nanos(i64::MAX)),
        (Duration::MAX, OneWayDelay::from_nanos(-1)),
    ];
    for (rtt, owd) in forged {
        path.send(MSS);
        path.advance(Duration::from_millis(1));
        let now = path.now();
        let acked = Acked {
            bytes: u64::MAX,
            largest_sent_at: now,
            bytes_in_flight: u64::MAX,
            one_way_delay: Some(owd),
            app_limited: false,
        };
        let snapshot = Rtt::new(rtt, Duration::from_millis(BASE_RTT_MS), rtt);
        path.cc.on_ack(now, &acked, &snapshot);
        path.cc.invariants().unwrap();
        assert!(path.cc.window() >= 2 * MSS);
        assert!(path.cc.pacing_rate(&snapshot) >= 1);
    }
    // An honest path afterwards still gets a usable window back.
    for _ in 0..5 {
        path.round_trip(0);
    }
    path.cc.invariants().unwrap();
    assert!(path.cc.window() >= 2 * MSS);
}

#[test]
fn the_receiver_clock_offset_does_not_change_anything() {
    let mut near = Path::new(config());
    let mut far = Path::new(config());
    far.offset = -3_600_000_000_000;
    for queuing_ms in [0, 0, 30, 80, 120, 90, 100, 10, 0] {
        near.round_trip(queuing_ms);
        far.round_trip(queuing_ms);
        assert_eq!(near.cc.window(), far.cc.window());
        assert_eq!(near.cc.queuing_delay(), far.cc.queuing_delay());
    }
}

#[test]
fn a_receiver_clock_that_jumps_forward_is_recognised_by_the_round_trip() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    path.round_trip(0);
    let window = path.cc.window();
    // The receiver's clock steps 5 s ahead; the path is unchanged.
    path.offset += 5_000_000_000;
    path.round_trip(0);
    path.round_trip(0);
    assert!(path.cc.queuing_delay() < Duration::from_millis(1));
    assert!(
        path.cc.window() >= window,
        "{} < {window}",
        path.cc.window()
    );
}

#[test]
fn a_drifting_receiver_clock_does_not_look_like_a_queue() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    // 200 ppm fast: 12 ms more every minute, for 20 minutes.
    for _ in 0..20 * 60 * 25 {
        path.offset += 200 * 40_000;
        path.send(MSS);
        path.advance(Duration::from_millis(BASE_RTT_MS));
        path.ack(MSS, 0);
    }
    assert!(
        path.cc.queuing_delay() < Duration::from_millis(30),
        "{:?}",
        path.cc.queuing_delay()
    );
}

#[test]
fn a_shorter_path_lowers_the_base_delay_at_once() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    path.round_trip(0);
    // The path loses 10 ms each way and a queue of 30 ms appears: the
    // samples are 20 ms above the old base, 30 ms above the new one.
    path.offset -= 10_000_000;
    path.send(MSS);
    path.advance(Duration::from_millis(BASE_RTT_MS));
    path.ack(MSS, 0);
    path.round_trip(30);
    assert_eq!(path.cc.queuing_delay(), Duration::from_millis(30));
}

#[test]
fn without_one_way_samples_the_round_trip_gives_the_queuing_delay() {
    let mut path = Path::new(config());
    path.send(MSS);
    path.ack_with(MSS, 0, None);
    path.send(MSS);
    path.ack_with(MSS, 80, None);
    assert_eq!(path.cc.queuing_delay(), Duration::from_millis(80));
    assert!(!path.cc.in_slow_start());
    path.cc.invariants().unwrap();
}
