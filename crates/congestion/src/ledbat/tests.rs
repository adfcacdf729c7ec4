use super::*;
use crate::AnyController;
use crate::test_ops::{self, Op, op};
use proptest::prelude::*;
use quanta::{Clock, Mock};
use std::sync::Arc;

const MSS: u64 = 1_452;
const BASE_OWD_MS: u64 = 20;
const BASE_RTT_MS: u64 = 40;

/// A LEDBAT controller on a mock clock, with helpers that play a path of
/// 20 ms one-way delay (40 ms round trip) plus a chosen queuing delay. The
/// path also plays the connection's part: one RTT estimate and one count of
/// bytes in flight, handed to the controller with every call.
struct Path {
    clock: Clock,
    mock: Arc<Mock>,
    cc: Ledbat,
    /// Offset of the receiver's clock, in nanoseconds.
    offset: i64,
    /// The connection's RTT estimate: RFC 9002's first sample, then 7/8
    /// smoothing (the ACKs here carry no ACK delay).
    rtt: Rtt,
    sampled: bool,
    /// Bytes in flight, as the connection's tracker counts them.
    flight: u64,
    /// Send time of the newest packet.
    last_sent: Instant,
    /// What the next ACKs say about the sender's use of the window.
    app_limited: bool,
}

impl Path {
    fn new(config: LedbatConfig) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let last_sent = clock.now();
        Self {
            clock,
            mock,
            cc: Ledbat::new(config).unwrap(),
            offset: 0,
            rtt: Rtt::initial(Duration::from_millis(333)),
            sampled: false,
            flight: 0,
            last_sent,
            app_limited: false,
        }
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn advance(&self, by: Duration) {
        self.mock.increment(by);
    }

    /// The connection's estimator takes one sample.
    fn sample(&mut self, latest: Duration) {
        let (smoothed, min) = if self.sampled {
            (
                (self.rtt.smoothed() * 7 + latest) / 8,
                self.rtt.min().min(latest),
            )
        } else {
            (latest, latest)
        };
        self.sampled = true;
        self.rtt = Rtt::new(smoothed, min, latest);
    }

    fn send(&mut self, bytes: u64) {
        let now = self.now();
        self.flight = self.flight.saturating_add(bytes);
        self.last_sent = now;
        self.cc.on_sent(now, self.flight);
    }

    /// Acknowledges `bytes` with samples showing `queuing_ms` of queue.
    fn ack(&mut self, bytes: u64, queuing_ms: u64) {
        let owd = i64::try_from((BASE_OWD_MS + queuing_ms) * 1_000_000).unwrap() + self.offset;
        self.ack_with(bytes, queuing_ms, Some(OneWayDelay::from_nanos(owd)));
    }

    fn ack_with(&mut self, bytes: u64, queuing_ms: u64, owd: Option<OneWayDelay>) {
        let now = self.now();
        self.sample(Duration::from_millis(BASE_RTT_MS + queuing_ms));
        self.flight = self.flight.saturating_sub(bytes);
        let acked = Acked {
            bytes,
            largest_sent_at: self.last_sent,
            bytes_in_flight: self.flight,
            one_way_delay: owd,
            app_limited: self.app_limited,
        };
        self.cc.on_ack(now, &acked, &self.rtt);
        self.cc.invariants().unwrap();
    }

    /// Loss detection declares `bytes` lost, the newest sent at `sent_at`.
    fn lose(&mut self, bytes: u64, sent_at: Instant) {
        let now = self.now();
        self.flight = self.flight.saturating_sub(bytes);
        let lost = Lost {
            packets: 1,
            bytes,
            largest_sent_at: sent_at,
        };
        self.cc.on_loss(now, &lost, &self.rtt);
        self.cc.invariants().unwrap();
    }

    /// One round trip: a full window sent, then acknowledged packet by
    /// packet with `queuing_ms` of queue.
    fn round_trip(&mut self, queuing_ms: u64) {
        let packets = self.cc.window() / MSS;
        for _ in 0..packets {
            self.send(MSS);
        }
        self.advance(Duration::from_millis(BASE_RTT_MS + queuing_ms));
        for _ in 0..packets {
            self.ack(MSS, queuing_ms);
        }
    }

    /// Round trips with `queuing_ms` of queue, ACK by ACK 1 ms apart, until
    /// `event` holds after an ACK; returns the time, and the smoothed RTT
    /// the controller acted on (the estimate with that ACK's sample).
    fn until(&mut self, queuing_ms: u64, event: impl Fn(&Ledbat) -> bool) -> (Instant, Duration) {
        loop {
            let packets = self.cc.window() / MSS;
            for _ in 0..packets {
                self.send(MSS);
            }
            self.advance(Duration::from_millis(
                BASE_RTT_MS + queuing_ms - packets.min(BASE_RTT_MS),
            ));
            for _ in 0..packets {
                self.advance(Duration::from_millis(1));
                self.ack(MSS, queuing_ms);
                if event(&self.cc) {
                    return (self.now(), self.rtt.smoothed());
                }
            }
        }
    }

    /// Round trips with an empty queue until slow start ends by a loss;
    /// a millisecond later, so the packets sent from then on are outside
    /// the recovery period (RFC 9002 counts a packet sent at the very
    /// instant of the reduction as inside).
    fn enter_congestion_avoidance(&mut self) {
        self.round_trip(0);
        let sent = self.now();
        self.lose(0, sent);
        self.advance(Duration::from_millis(1));
        assert!(!self.cc.in_slow_start());
    }
}

fn config() -> LedbatConfig {
    LedbatConfig {
        periodic_slowdowns: false,
        ..LedbatConfig::default()
    }
}

#[test]
fn configurations_out_of_range_are_refused() {
    let cases: [(LedbatConfig, LedbatConfigError); 12] = [
        (
            LedbatConfig {
                target: Duration::ZERO,
                ..config()
            },
            LedbatConfigError::Target,
        ),
        (
            LedbatConfig {
                target: Duration::from_millis(101),
                ..config()
            },
            LedbatConfigError::Target,
        ),
        (
            LedbatConfig {
                gain: 0.0,
                ..config()
            },
            LedbatConfigError::Gain,
        ),
        (
            LedbatConfig {
                gain: f64::NAN,
                ..config()
            },
            LedbatConfigError::Gain,
        ),
        (
            LedbatConfig {
                allowed_increase_packets: 0,
                ..config()
            },
            LedbatConfigError::AllowedIncrease,
        ),
        (
            LedbatConfig {
                base_history: 1,
                ..config()
            },
            LedbatConfigError::BaseHistory,
        ),
        (
            LedbatConfig {
                current_filter: 17,
                ..config()
            },
            LedbatConfigError::CurrentFilter,
        ),
        (
            LedbatConfig {
                max_datagram_size: 70_000,
                ..config()
            },
            LedbatConfigError::MaxDatagramSize,
        ),
        (
            LedbatConfig {
                initial_window_packets: 1,
                ..config()
            },
            LedbatConfigError::Window,
        ),
        (
            LedbatConfig {
                max_window: MSS,
                ..config()
            },
            LedbatConfigError::MaxWindow,
        ),
        (
            LedbatConfig {
                slow_start_exit: 1.5,
                ..config()
            },
            LedbatConfigError::SlowStartExit,
        ),
        (
            LedbatConfig {
                decrease_constant: -1.0,
                ..config()
            },
            LedbatConfigError::DecreaseConstant,
        ),
    ];
    for (config, error) in cases {
        assert_eq!(Ledbat::new(config).unwrap_err(), error, "{config:?}");
    }
    let zero_interval = LedbatConfig {
        slowdown_interval: 0,
        ..config()
    };
    assert_eq!(
        Ledbat::new(zero_interval).unwrap_err(),
        LedbatConfigError::SlowdownInterval
    );
}

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
fn below_the_target_the_window_grows_at_most_one_packet_per_round_trip() {
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(0);
    let grown = path.cc.window() - window;
    // (A little less, as the window grows during the round trip.)
    assert!(
        (MSS - MSS / 20..=MSS).contains(&grown),
        "grew {grown} bytes"
    );
    // Half way to the target, half as fast.
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(50);
    let grown = path.cc.window() - window;
    assert!(
        (MSS / 2 - MSS / 20..=MSS / 2).contains(&grown),
        "grew {grown} bytes"
    );
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
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    path.round_trip(100);
    let grown = path.cc.window() - window;
    assert!(
        (MSS - MSS / 20..=MSS).contains(&grown),
        "grew {grown} bytes"
    );
}

#[test]
fn just_above_the_target_growth_and_decrease_balance() {
    // 26 packets: the balance is at 1 + 1/26 times the target, 103.8 ms.
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    assert_eq!(path.cc.window(), 26 * MSS);
    path.round_trip(103);
    assert!(path.cc.window() > 26 * MSS);
    let mut path = Path::new(config());
    path.enter_congestion_avoidance();
    path.round_trip(105);
    assert!(path.cc.window() < 26 * MSS);
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
    let mut path = Path::new(LedbatConfig {
        decrease_constant: 0.0,
        ..config()
    });
    path.enter_congestion_avoidance();
    let window = path.cc.window();
    // off_target = -1: one packet less per round trip.
    path.round_trip(200);
    let shrunk = window - path.cc.window();
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
    path.cc.on_loss(now, &two, &path.rtt.clone());
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

/// The controllers' shared random-operation test, on LEDBAT through the
/// `AnyController` enum.
fn run(config: LedbatConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cc = AnyController::from(Ledbat::new(config).unwrap());
    let min_window = u64::from(config.min_window_packets) * config.max_datagram_size;
    test_ops::run(cc, min_window, config.max_window, ops)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_operations_keep_every_ledbat_invariant(ops in proptest::collection::vec(op(4, 4), 1..200)) {
        run(LedbatConfig::default(), ops)?;
    }

    #[test]
    fn random_operations_keep_the_invariants_of_any_configuration(
        target_ms in 1..=100u64,
        min_window_packets in 1..4u32,
        max_window_packets in 26..2_000u64,
        decrease_constant in 0.0..16.0f64,
        slowdowns in any::<bool>(),
        ops in proptest::collection::vec(op(4, 4), 1..100),
    ) {
        let config = LedbatConfig {
            target: Duration::from_millis(target_ms),
            min_window_packets,
            max_window: max_window_packets * MSS,
            decrease_constant,
            periodic_slowdowns: slowdowns,
            ..LedbatConfig::default()
        };
        run(config, ops)?;
    }
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
