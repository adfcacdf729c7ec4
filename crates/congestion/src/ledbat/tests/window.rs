//! The window in congestion avoidance, on losses and on losses that proved
//! spurious; pacing from the window.

use super::*;

/// The window of a path that just entered congestion avoidance under
/// `config`, before and after one round trip with `queuing_ms` of queue.
fn across_a_round_trip(config: LedbatConfig, queuing_ms: u64) -> (u64, u64) {
    let mut path = Path::new(config);
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(queuing_ms);
    (window, path.cc.window())
}

/// The window grew by `grown` bytes in a round trip: `expected`, or a
/// little less, as the window grows during the round trip.
fn assert_grew_about(grown: u64, expected: u64) {
    assert!(
        (expected - MSS / 20..=expected).contains(&grown),
        "grew {grown} bytes, not about {expected}"
    );
}

#[test]
fn below_the_target_the_window_grows_at_most_one_packet_per_round_trip() {
    let (window, after) = across_a_round_trip(config(), 0);
    assert_grew_about(after - window, MSS);
    // Half way to the target, half as fast.
    let (window, after) = across_a_round_trip(config(), 50);
    assert_grew_about(after - window, MSS / 2);
}

#[test]
fn growth_stops_one_packet_beyond_what_was_in_flight() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    // 13 packets in flight per round trip, whatever the window says.
    let mut round_trip = || {
        for _ in 0..13 {
            path.send(MSS);
        }
        path.advance(Duration::from_millis(BASE_RTT_MS));
        for _ in 0..13 {
            path.ack(MSS, 0);
        }
        path.cc.window()
    };
    // The round trip before still counts (the RFC's "flightsize in the
    // previous RTT"), then growth stops; an unused window is kept.
    round_trip();
    let grown = round_trip();
    assert!(grown <= window + MSS);
    for _ in 0..10 {
        assert_eq!(round_trip(), grown);
    }
}

#[test]
fn at_the_target_the_window_still_grows_a_packet_per_round_trip() {
    // LEDBAT++: GAIN − C × W × (delay/target − 1) packets per round trip,
    // which is GAIN at the target itself.
    let (window, after) = across_a_round_trip(config(), 100);
    assert_grew_about(after - window, MSS);
}

#[test]
fn just_above_the_target_growth_and_decrease_balance() {
    // 26 packets: the balance is at 1 + 1/26 times the target, 103.8 ms.
    let (window, after) = across_a_round_trip(config(), 103);
    assert_eq!(window, 26 * MSS);
    assert!(after > window);
    let (window, after) = across_a_round_trip(config(), 105);
    assert!(after < window);
}

#[test]
fn above_the_target_the_window_shrinks_in_proportion_to_itself() {
    let mut path = Path::new(config());
    path.round_trip(0);
    path.round_trip(0);
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    // 10 % over the target: about a tenth of the window per round trip.
    path.round_trip(110);
    let shrunk = window - path.cc.window();
    let expected = window / 10;
    assert!(
        shrunk.abs_diff(expected) < expected / 5,
        "shrank {shrunk}, expected ~{expected}"
    );
}

#[test]
fn far_above_the_target_the_window_at_most_halves_per_round_trip() {
    let mut path = Path::new(config());
    path.round_trip(0);
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(5_000);
    assert!(
        path.cc.window() >= window / 2 - MSS,
        "{} from {window}",
        path.cc.window()
    );
    for _ in 0..20 {
        path.round_trip(5_000);
    }
    assert_eq!(path.cc.window(), 2 * MSS, "the floor is MIN_CWND");
}

#[test]
fn without_the_multiplicative_decrease_the_window_shrinks_as_in_rfc_6817() {
    let config = LedbatConfig {
        decrease_constant: 0.0,
        ..config()
    };
    // off_target = -1: one packet less per round trip.
    let (window, after) = across_a_round_trip(config, 200);
    let shrunk = window - after;
    // (A little more, as the window shrinks during the round trip.)
    assert!((MSS..=MSS + 40).contains(&shrunk), "shrank {shrunk}");
}

#[test]
fn losses_halve_the_window_once_per_round_trip() {
    let mut path = Path::new(config());
    let first_sent = path.now();
    path.send(10 * MSS);
    path.advance(Duration::from_millis(10));
    let second_sent = path.now();
    path.send(MSS);
    path.advance(Duration::from_millis(40));
    path.lose(MSS, first_sent);
    assert_eq!(path.cc.window(), 13 * MSS);
    // Sent before the reduction: the same congestion event.
    path.lose(MSS, second_sent);
    assert_eq!(path.cc.window(), 13 * MSS);
    path.advance(Duration::from_millis(1));
    path.send(MSS);
    let third_sent = path.now();
    path.advance(Duration::from_millis(40));
    path.lose(MSS, third_sent);
    assert_eq!(path.cc.window(), 13 * MSS / 2);
    path.cc.invariants().unwrap();
}

#[test]
fn repeated_losses_stop_at_two_packets() {
    let mut path = Path::new(config());
    for _ in 0..20 {
        path.advance(Duration::from_millis(1));
        let now = path.now();
        path.lose(MSS, now);
    }
    assert_eq!(path.cc.window(), 2 * MSS);
}

#[test]
fn packets_sent_before_the_recovery_period_do_not_grow_the_window() {
    let mut path = Path::new(config());
    let window = path.cc.window();
    for _ in 0..window / MSS {
        path.send(MSS);
    }
    let burst_sent = path.now();
    path.advance(Duration::from_millis(BASE_RTT_MS));
    path.lose(MSS, burst_sent);
    let reduced = path.cc.window();
    // The rest of the burst is acknowledged with an empty queue: all of it
    // was sent before the reduction.
    for _ in 1..window / MSS {
        path.ack(MSS, 0);
    }
    assert_eq!(path.cc.window(), reduced);
    // A packet sent after the reduction grows it again.
    path.advance(Duration::from_millis(1));
    path.send(MSS);
    path.advance(Duration::from_millis(BASE_RTT_MS));
    path.ack(MSS, 0);
    assert!(path.cc.window() > reduced);
}

#[test]
fn an_application_limited_sender_does_not_grow_the_window() {
    let mut path = Path::new(config());
    path.app_limited = true;
    path.round_trip(0);
    assert_eq!(path.cc.window(), 26 * MSS, "slow start does not grow");
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(0);
    assert_eq!(path.cc.window(), window, "nor does avoidance");
    // A queue above the target still shrinks it.
    path.round_trip(150);
    assert!(path.cc.window() < window);
    path.app_limited = false;
    let window = path.cc.window();
    path.round_trip(0);
    assert!(path.cc.window() > window);
}

#[test]
fn a_halving_whose_losses_all_proved_spurious_is_undone() {
    let mut path = Path::new(config());
    path.round_trip(0);
    let window = path.cc.window();
    path.send(MSS);
    let sent = path.now();
    path.advance(Duration::from_millis(BASE_RTT_MS));
    let declared = path.now();
    path.lose(MSS, sent);
    assert_eq!(path.cc.window(), window / 2);
    assert!(!path.cc.in_slow_start());
    // A late ACK of the packet, within the round trip.
    path.advance(Duration::from_millis(5));
    let now = path.now();
    path.cc.on_spurious_loss(now, declared);
    assert_eq!(path.cc.window(), window);
    assert_eq!(path.cc.undone_reductions(), 1);
    assert!(
        path.cc.in_slow_start(),
        "the slow start the loss ended goes on"
    );
    path.cc.invariants().unwrap();
    // Once is enough: a second report changes nothing.
    path.cc.on_spurious_loss(now, declared);
    assert_eq!(path.cc.undone_reductions(), 1);
}

#[test]
fn an_undone_halving_in_congestion_avoidance_stays_there() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.send(MSS);
    let sent = path.now();
    path.advance(Duration::from_millis(BASE_RTT_MS));
    let declared = path.now();
    path.lose(MSS, sent);
    path.advance(Duration::from_millis(5));
    let now = path.now();
    path.cc.on_spurious_loss(now, declared);
    assert_eq!(path.cc.window(), window);
    assert!(!path.cc.in_slow_start());
    path.cc.invariants().unwrap();
}

#[test]
fn a_spurious_loss_next_to_a_genuine_one_keeps_the_halving() {
    let mut path = Path::new(config());
    path.round_trip(0);
    let window = path.cc.window();
    path.send(2 * MSS);
    let sent = path.now();
    path.advance(Duration::from_millis(BASE_RTT_MS));
    let declared = path.now();
    let now = path.now();
    let two = Lost {
        packets: 2,
        bytes: 2 * MSS,
        largest_sent_at: sent,
    };
    let rtt = path.rtt;
    path.cc.on_loss(now, &two, &rtt);
    path.cc.on_spurious_loss(now, declared);
    assert_eq!(path.cc.window(), window / 2);
    assert_eq!(path.cc.undone_reductions(), 0);
}

#[test]
fn the_pacing_rate_spreads_the_window_over_the_connections_smoothed_round_trip() {
    let mut path = Path::new(config());
    // Before any sample: 26 packets over 333 ms, doubled in slow start.
    assert_eq!(
        path.cc.pacing_rate(&path.rtt),
        pacing_rate(26 * MSS, Duration::from_millis(333), 2_000)
    );
    path.enter_congestion_avoidance();
    let expected = pacing_rate(path.cc.window(), Duration::from_millis(40), 1_250);
    assert_eq!(path.cc.pacing_rate(&path.rtt), expected);
}
