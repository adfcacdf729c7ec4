use super::*;
use crate::test_ops::{self, Harness, Op, op};
use crate::{AnyController, MAX_WINDOW_LIMIT, OneWayDelay};
use proptest::prelude::*;

const MSS: u64 = 1_452;
const MS: Duration = Duration::from_millis(1);
const RTT: Duration = Duration::from_millis(50);

/// A CUBIC controller on a mock clock, the connection's part played by the
/// shared harness; CUBIC's tests speak in packets and round trips.
type Path = Harness<Cubic>;

impl Path {
    fn with(config: CubicConfig) -> Self {
        Harness::new(Cubic::new(config).unwrap())
    }

    fn send(&mut self, packets: u64) {
        self.send_bytes(packets * MSS);
    }

    /// Acknowledges `bytes` up to the newest packet; `rtt` is the latest
    /// and the smoothed RTT.
    fn ack(&mut self, bytes: u64, rtt: Duration) {
        self.ack_bytes(bytes, None, &Rtt::new(rtt, rtt, rtt));
    }

    /// Loss detection declares `packets` lost, the newest sent at `sent_at`.
    fn lose(&mut self, packets: u64, sent_at: Instant) {
        self.lose_bytes(packets, packets * MSS, sent_at, &Rtt::new(RTT, RTT, RTT));
    }

    /// One round trip: a full window sent at once, then acknowledged in
    /// `chunks` equal ACKs after `rtt`.
    fn round_trip(&mut self, rtt: Duration, chunks: u64) {
        let packets = self.cc.window() / MSS;
        self.send(packets);
        self.advance(rtt);
        let per_ack = (packets / chunks).max(1);
        let mut left = packets;
        while left > 0 {
            let now = per_ack.min(left);
            self.ack(now * MSS, rtt);
            left -= now;
        }
    }

    /// Slow start up to `packets`, then a loss: congestion avoidance after
    /// a congestion event at `packets`, 1 ms after the reduction (packets
    /// sent from then on are outside the recovery period).
    fn enter_avoidance(&mut self, packets: u64) {
        let grow = packets * MSS - self.cc.window();
        self.send(1);
        self.ack(grow, RTT);
        assert_eq!(self.cc.window(), packets * MSS);
        self.send(1);
        let sent = self.now();
        self.advance(MS);
        self.lose(1, sent);
        self.advance(MS);
        assert!(!self.cc.in_slow_start());
    }

    /// The window in bytes, with its fraction.
    fn exact_window(&self) -> f64 {
        self.cc.window as f64 / ONE as f64
    }
}

fn close(value: f64, expected: f64, tolerance: f64) {
    assert!(
        (value - expected).abs() <= tolerance,
        "{value} is not {expected} ± {tolerance}"
    );
}

fn no_hystart() -> CubicConfig {
    CubicConfig {
        hystart: None,
        ..CubicConfig::default()
    }
}

#[test]
fn configurations_out_of_range_are_refused() {
    let cases = [
        (
            CubicConfig {
                max_datagram_size: 0,
                ..CubicConfig::default()
            },
            CubicConfigError::MaxDatagramSize,
        ),
        (
            CubicConfig {
                initial_window_packets: 1,
                ..CubicConfig::default()
            },
            CubicConfigError::Window,
        ),
        (
            CubicConfig {
                max_window: MAX_WINDOW_LIMIT + 1,
                ..CubicConfig::default()
            },
            CubicConfigError::Window,
        ),
        (
            CubicConfig {
                c: 0.0,
                ..CubicConfig::default()
            },
            CubicConfigError::C,
        ),
        (
            CubicConfig {
                c: f64::INFINITY,
                ..CubicConfig::default()
            },
            CubicConfigError::C,
        ),
        (
            CubicConfig {
                beta: 1.0,
                ..CubicConfig::default()
            },
            CubicConfigError::Beta,
        ),
        (
            CubicConfig {
                beta: f64::NAN,
                ..CubicConfig::default()
            },
            CubicConfigError::Beta,
        ),
        (
            CubicConfig {
                hystart: Some(HyStartConfig {
                    css_rounds: 0,
                    ..HyStartConfig::default()
                }),
                ..CubicConfig::default()
            },
            CubicConfigError::HyStart,
        ),
    ];
    for (config, error) in cases {
        assert_eq!(Cubic::new(config).unwrap_err(), error, "{config:?}");
    }
}

#[test]
fn a_new_connection_starts_in_slow_start_with_the_initial_window() {
    let path = Path::with(CubicConfig::default());
    assert_eq!(path.cc.window(), 10 * MSS);
    assert!(path.cc.in_slow_start());
    assert!(!path.cc.in_conservative_slow_start());
    path.cc.invariants().unwrap();
}

#[test]
fn slow_start_doubles_the_window_per_round_trip_while_the_rtt_is_steady() {
    let mut path = Path::with(CubicConfig::default());
    for expected in [20, 40, 80, 160] {
        path.round_trip(RTT, u64::MAX);
        assert_eq!(path.cc.window(), expected * MSS);
    }
    assert!(path.cc.in_slow_start());
}

#[test]
fn a_loss_multiplies_the_window_by_beta_and_remembers_w_max() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    // RFC 9438, section 4.6: ssthresh = cwnd × 0.7, cwnd = ssthresh.
    assert_eq!(path.cc.window(), 70 * MSS);
    assert_eq!(path.cc.ssthresh, 70 * MSS);
    assert_eq!(path.cc.cwnd_prior, 100 * MSS);
    assert_eq!(path.cc.w_max, Some(100 * MSS));
    assert!(path.cc.hystart.is_none());
}

#[test]
fn k_and_w_cubic_follow_the_rfc_formulas() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    // The first ACK of the stage opens it.
    path.send(1);
    path.ack(MSS, RTT);
    let epoch = path.cc.epoch.expect("the stage began");
    // K = cbrt((W_max − cwnd_epoch) / C) = cbrt((100 − 70) / 0.4)
    //   = cbrt(75) = 4.217163 s.
    close(epoch.k, 4.217_163, 1e-6);
    // W_cubic(t) = C × (t − K)³ + W_max, in packets:
    //   t = 0:     0.4 × (−4.217163)³ + 100 = 0.4 × (−75) + 100 = 70
    //   t = 2 s:   0.4 × (−2.217163)³ + 100 = 0.4 × (−10.899161) + 100
    //              = 95.640336 (concave: below W_max, rising ever slower)
    //   t = K:     100 (the plateau)
    //   t = K + 1: 0.4 × 1³ + 100 = 100.4
    //   t = 8 s:   0.4 × 3.782837³ + 100 = 0.4 × 54.131838 + 100
    //              = 121.652735 (convex: above W_max, ever faster)
    let w = |secs: f64| {
        path.cc
            .w_cubic(Duration::from_secs_f64(secs), epoch.k, 100 * MSS)
            / MSS as f64
    };
    close(w(0.0), 70.0, 1e-6);
    close(w(2.0), 95.640_336, 1e-6);
    close(w(4.217_163), 100.0, 1e-6);
    close(w(5.217_163), 100.4, 1e-6);
    close(w(8.0), 121.652_735, 1e-6);
}

#[test]
fn each_ack_moves_the_window_towards_w_cubic_one_round_trip_ahead() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    path.send(1);
    path.ack(MSS, RTT);
    let before = path.exact_window();
    // An ACK of one packet 1.95 s into the stage, smoothed RTT 50 ms:
    // target = W_cubic(2 s) = 95.640336 packets = 138 869.77 bytes, and
    // cwnd += (target − cwnd) × acked / cwnd.
    path.advance(Duration::from_millis(1_950));
    path.send(1);
    path.ack(MSS, RTT);
    let target = 95.640_336 * MSS as f64;
    let expected = before + (target - before) * MSS as f64 / before.floor();
    close(path.exact_window(), expected, 0.05);
    // Far ahead of the curve, the target is capped at 1.5 × cwnd: an ACK
    // of one packet adds half a packet.
    path.advance(Duration::from_secs(100));
    let before = path.exact_window();
    path.send(1);
    path.ack(MSS, RTT);
    close(path.exact_window(), before + MSS as f64 / 2.0, 1.0);
}

#[test]
fn the_window_is_concave_up_to_w_max_then_convex() {
    // W_max = 1 000 packets on a 50 ms round trip: K = cbrt(300 / 0.4) =
    // 9.0856 s, and W_est (+0.53 packets per round trip) stays below the
    // cubic, so the cubic rules.
    let mut path = Path::with(no_hystart());
    path.enter_avoidance(1_000);
    let k = 9.085_603;
    let mut samples = Vec::new();
    path.send(1);
    path.ack(MSS, RTT);
    let start = path.cc.epoch.expect("the stage began").start;
    for _ in 0..300 {
        path.round_trip(RTT, 50);
        let t = path.now().duration_since(start).as_secs_f64();
        let window = path.cc.window() as f64 / MSS as f64;
        let cubic = path.cc.w_cubic(Duration::from_secs_f64(t), k, 1_000 * MSS) / MSS as f64;
        // The window trails W_cubic(t + RTT) by a little.
        close(window, cubic, 6.0);
        samples.push((t, window));
    }
    let at = |secs: f64| {
        samples
            .iter()
            .find(|(t, _)| *t >= secs)
            .map(|(_, w)| *w)
            .expect("the run is long enough")
    };
    // Concave: half way to K it has come most of the way, then it slows.
    assert!(at(k / 2.0) - at(0.1) > at(k) - at(k / 2.0));
    close(at(k), 1_000.0, 5.0);
    // Convex: each second beyond K adds more than the one before.
    assert!(at(k + 3.0) - at(k + 2.0) > at(k + 1.0) - at(k));
    assert!(at(k + 5.0) > 1_050.0);
}

#[test]
fn on_short_round_trips_the_window_follows_renos_estimate() {
    // W_max = 100 packets, RTT 1 ms: in 50 ms the cubic climbs about a
    // packet (its slope at t = 0 is 3 × C × K² = 21.3 packets/s), while
    // W_est adds α_cubic = 3 × 0.3 / 1.7 = 0.529 packet per round trip.
    let rtt = MS;
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    for _ in 0..50 {
        path.round_trip(rtt, u64::MAX);
    }
    let epoch = path.cc.epoch.expect("the stage began");
    let t = path.now().duration_since(epoch.start);
    let cubic = path.cc.w_cubic(t, epoch.k, 100 * MSS) / MSS as f64;
    assert!(cubic < 71.5, "{cubic}");
    // 70 + 50 × 0.529 = 96.5, a little less as each round acknowledges
    // the window's whole packets only.
    let window = path.cc.window() as f64 / MSS as f64;
    close(window, 96.0, 1.0);
    // Past cwnd_prior (100 packets), α_cubic is 1: one packet per round
    // trip, as Reno.
    for _ in 0..20 {
        path.round_trip(rtt, u64::MAX);
    }
    let before = path.cc.window() as f64 / MSS as f64;
    for _ in 0..20 {
        path.round_trip(rtt, u64::MAX);
    }
    let after = path.cc.window() as f64 / MSS as f64;
    close(after - before, 20.0, 0.5);
}

#[test]
fn fast_convergence_lowers_the_plateau_of_a_flow_whose_share_fell() {
    for (fast_convergence, w_max, k) in [(true, 59.5, 2.971_961), (false, 70.0, 3.744_436)] {
        let mut path = Path::with(CubicConfig {
            fast_convergence,
            ..CubicConfig::default()
        });
        path.enter_avoidance(100);
        // A second congestion event at 70 packets, below W_max = 100.
        path.send(1);
        let sent = path.now();
        path.advance(MS);
        path.lose(1, sent);
        // W_max = 70 × (1 + 0.7) / 2 = 59.5 packets with fast convergence,
        // 70 without; cwnd = 70 × 0.7 = 49 either way.
        assert_eq!(path.cc.w_max, Some((w_max * MSS as f64) as u64));
        assert_eq!(path.cc.window(), 49 * MSS);
        // K = cbrt((59.5 − 49) / 0.4) = 2.971961 s, or cbrt((70 − 49) /
        // 0.4) = 3.744436 s.
        path.advance(MS);
        path.send(1);
        path.ack(MSS, RTT);
        close(path.cc.epoch.expect("the stage began").k, k, 1e-5);
    }
}

#[test]
fn the_window_shrinks_once_per_congestion_event() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    let first_sent = path.now() - 2 * MS;
    // Losses of packets sent before the reduction are the same event.
    path.lose(3, first_sent);
    assert_eq!(path.cc.window(), 70 * MSS);
    assert_eq!(path.cc.w_max, Some(100 * MSS));
    // A loss of a packet sent after it is a new one.
    path.send(1);
    let sent = path.now();
    path.advance(RTT);
    path.lose(1, sent);
    assert_eq!(path.cc.window(), 49 * MSS);
}

#[test]
fn acks_of_packets_sent_before_the_reduction_do_not_grow_the_window() {
    let mut path = Path::with(CubicConfig::default());
    path.send(10);
    let sent = path.now();
    path.advance(RTT);
    path.lose(1, sent);
    let window = path.cc.window();
    for _ in 0..9 {
        path.ack(MSS, RTT);
    }
    assert_eq!(path.cc.window(), window);
    assert!(path.cc.epoch.is_none(), "the stage has not begun");
    path.advance(MS);
    path.send(1);
    path.ack(MSS, RTT);
    assert!(path.cc.window() >= window);
    assert!(path.cc.epoch.is_some());
}

#[test]
fn an_application_limited_sender_neither_grows_nor_advances_the_cubic_clock() {
    let mut busy = Path::with(CubicConfig::default());
    let mut idle = Path::with(CubicConfig::default());
    for path in [&mut busy, &mut idle] {
        path.enter_avoidance(100);
        path.send(1);
        path.ack(MSS, RTT);
    }
    // The idle one spends 10 s application-limited, ACK after ACK.
    let window = idle.cc.window();
    idle.app_limited = true;
    for _ in 0..100 {
        idle.advance(Duration::from_millis(100));
        idle.send(1);
        idle.ack(MSS, RTT);
    }
    assert_eq!(idle.cc.window(), window);
    idle.app_limited = false;
    // Then both take 1 s of use: the same t, the same window.
    for path in [&mut busy, &mut idle] {
        path.advance(Duration::from_secs(1));
        path.send(1);
        path.ack(MSS, RTT);
    }
    assert_eq!(idle.cc.window, busy.cc.window);
    assert_eq!(idle.cc.epoch.map(|e| e.k), busy.cc.epoch.map(|e| e.k));
}

#[test]
fn hystart_leaves_slow_start_when_the_round_trip_rises_without_a_loss() {
    let mut path = Path::with(CubicConfig::default());
    path.round_trip(40 * MS, u64::MAX);
    path.round_trip(40 * MS, u64::MAX);
    assert_eq!(path.cc.window(), 40 * MSS);
    // 50 ms ≥ 40 ms + 40/8 ms: after eight samples, CSS.
    path.round_trip(50 * MS, u64::MAX);
    assert!(path.cc.in_conservative_slow_start());
    assert!(path.cc.in_slow_start());
    // Eight packets at full growth, 32 at a quarter.
    assert_eq!(path.cc.window(), (40 + 8 + 8) * MSS);
    // CSS grows 1.25 times per round trip for four more rounds...
    for _ in 0..4 {
        let window = path.cc.window();
        path.round_trip(50 * MS, u64::MAX);
        assert_eq!(path.cc.window(), window + window / MSS * (MSS / 4));
        assert!(path.cc.in_slow_start());
    }
    // ... and the next round begins congestion avoidance, W_max at the
    // window, K = 0.
    let window = path.cc.window();
    path.send(1);
    path.ack(MSS, 50 * MS);
    assert!(!path.cc.in_slow_start());
    assert_eq!(path.cc.ssthresh, window);
    assert_eq!(path.cc.cwnd_prior, window);
    assert_eq!(path.cc.w_max, Some(window));
    assert_eq!(path.cc.epoch.expect("the stage began").k, 0.0);
    assert!(path.cc.hystart.is_none());
}

#[test]
fn conservative_slow_start_returns_to_slow_start_when_the_round_trip_falls_back() {
    let mut path = Path::with(CubicConfig::default());
    path.round_trip(40 * MS, u64::MAX);
    path.round_trip(40 * MS, u64::MAX);
    path.round_trip(50 * MS, u64::MAX);
    assert!(path.cc.in_conservative_slow_start());
    let window = path.cc.window() / MSS;
    // Below the 50 ms baseline: eight ACKs at a quarter, then full growth.
    path.round_trip(45 * MS, u64::MAX);
    assert!(!path.cc.in_conservative_slow_start());
    assert_eq!(path.cc.window() / MSS, window + 2 + (window - 8));
    // Slow start including HyStart++: growth doubles again.
    let window = path.cc.window();
    path.round_trip(45 * MS, u64::MAX);
    assert_eq!(path.cc.window(), 2 * window);
}

#[test]
fn without_hystart_slow_start_ignores_the_round_trip() {
    let mut path = Path::with(no_hystart());
    for rtt in [40, 40, 50, 80, 200] {
        path.round_trip(rtt * MS, u64::MAX);
    }
    assert_eq!(path.cc.window(), 320 * MSS);
    assert!(path.cc.in_slow_start());
}

#[test]
fn a_reduction_whose_losses_all_proved_spurious_is_undone() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    for _ in 0..20 {
        path.round_trip(RTT, 10);
    }
    let prior = path.cc.undo_state();
    path.send(1);
    let sent = path.now();
    path.advance(RTT);
    let declared = path.now();
    path.lose(1, sent);
    assert!(path.cc.window() < 70 * MSS);
    path.advance(5 * MS);
    let now = path.now();
    path.cc.on_spurious_loss(now, declared);
    // cwnd, ssthresh, W_max, K, t_epoch and W_est all come back.
    assert_eq!(path.cc.window, prior.window);
    assert_eq!(path.cc.ssthresh, prior.ssthresh);
    assert_eq!(path.cc.cwnd_prior, prior.cwnd_prior);
    assert_eq!(path.cc.w_max, prior.w_max);
    assert_eq!(path.cc.epoch, prior.epoch);
    assert_eq!(path.cc.undone_reductions(), 1);
    path.cc.invariants().unwrap();
    // Once is enough.
    path.cc.on_spurious_loss(now, declared);
    assert_eq!(path.cc.undone_reductions(), 1);
}

#[test]
fn a_spurious_loss_next_to_a_genuine_one_keeps_the_reduction() {
    let mut path = Path::with(CubicConfig::default());
    path.send(10);
    let sent = path.now();
    path.advance(RTT);
    let declared = path.now();
    path.lose(2, sent);
    path.cc.on_spurious_loss(declared, declared);
    assert_eq!(path.cc.window(), 7 * MSS);
    assert!(!path.cc.in_slow_start());
    assert_eq!(path.cc.undone_reductions(), 0);
}

#[test]
fn undoing_a_loss_in_slow_start_resumes_slow_start_and_hystart() {
    let mut path = Path::with(CubicConfig::default());
    path.round_trip(40 * MS, u64::MAX);
    path.send(1);
    let sent = path.now();
    path.advance(40 * MS);
    let declared = path.now();
    path.lose(1, sent);
    assert!(!path.cc.in_slow_start());
    path.cc.on_spurious_loss(declared, declared);
    assert_eq!(path.cc.window(), 20 * MSS);
    assert!(path.cc.in_slow_start());
    assert!(path.cc.hystart.is_some());
    // And HyStart++ still works.
    path.round_trip(40 * MS, u64::MAX);
    path.round_trip(50 * MS, u64::MAX);
    assert!(path.cc.in_conservative_slow_start());
}

#[test]
fn a_window_already_grown_back_is_kept_when_the_loss_proves_spurious() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    let declared = path.now() - MS;
    // A huge ACK after the reduction: W_est, then the window, jump to the
    // maximum.
    path.send(1);
    path.ack(1 << 40, RTT);
    let window = path.cc.window();
    assert!(window > 100 * MSS);
    path.cc.on_spurious_loss(path.now(), declared);
    assert_eq!(path.cc.window(), window);
    assert_eq!(path.cc.ssthresh, 70 * MSS, "the current values stay");
}

#[test]
fn persistent_congestion_collapses_then_restarts_the_cubic_at_k_zero() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    let now = path.now();
    path.cc.on_persistent_congestion(now);
    assert_eq!(path.cc.window(), 2 * MSS);
    assert!(path.cc.in_slow_start());
    assert!(path.cc.hystart.is_none(), "RFC 5681's slow start now");
    path.cc.invariants().unwrap();
    // A late ACK of the lost packet does not undo a collapse.
    path.cc.on_spurious_loss(now, now);
    assert_eq!(path.cc.window(), 2 * MSS);
    // Slow start up to ssthresh (70 packets), whatever the round trip
    // does: 2, 4, ... 64, then 70 six ACKs into the sixth round trip, whose
    // other ACKs begin congestion avoidance.
    for rtt in [50, 80, 120, 200, 300] {
        path.round_trip(rtt * MS, u64::MAX);
    }
    assert_eq!(path.cc.window(), 64 * MSS);
    path.round_trip(400 * MS, u64::MAX);
    assert!(!path.cc.in_slow_start());
    assert!(path.cc.window() > 70 * MSS);
    // RFC 9438, section 4.8: K = 0, W_max = the window at the stage's start.
    assert_eq!(path.cc.w_max, Some(70 * MSS));
    assert_eq!(path.cc.epoch.expect("the stage began").k, 0.0);
}

#[test]
fn the_pacing_rate_spreads_the_window_over_the_smoothed_round_trip() {
    let mut path = Path::with(CubicConfig::default());
    let rtt = Rtt::new(RTT, RTT, RTT);
    assert_eq!(
        path.cc.pacing_rate(&rtt),
        pacing_rate(10 * MSS, RTT, SLOW_START_PACING_GAIN_PERMILLE)
    );
    path.enter_avoidance(100);
    assert_eq!(
        path.cc.pacing_rate(&rtt),
        pacing_rate(70 * MSS, RTT, PACING_GAIN_PERMILLE)
    );
}

#[test]
fn forged_extreme_inputs_neither_panic_nor_break_the_window() {
    let mut path = Path::with(CubicConfig::default());
    path.enter_avoidance(100);
    let forged = [
        (u64::MAX, Duration::MAX),
        (u64::MAX, Duration::ZERO),
        (0, Duration::MAX),
        (1, Duration::from_nanos(1)),
    ];
    for (bytes, rtt) in forged {
        path.advance(Duration::from_secs(1_000_000));
        let now = path.now();
        let acked = Acked {
            bytes,
            largest_sent_at: now,
            bytes_in_flight: u64::MAX,
            one_way_delay: Some(OneWayDelay::from_nanos(i64::MIN)),
            app_limited: false,
        };
        let snapshot = Rtt::new(rtt, rtt, rtt);
        path.cc.on_ack(now, &acked, &snapshot);
        path.cc.invariants().unwrap();
        assert!(path.cc.pacing_rate(&snapshot) >= 1);
    }
    assert_eq!(path.cc.window(), CubicConfig::default().max_window);
    // A loss still brings it down.
    path.advance(MS);
    let now = path.now();
    path.lose(1, now);
    assert_eq!(
        path.cc.window(),
        mul_fixed(CubicConfig::default().max_window, path.cc.beta)
    );
}

/// The controllers' shared random-operation test, on CUBIC through the
/// `AnyController` enum.
fn run(config: CubicConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cc = AnyController::from(Cubic::new(config).unwrap());
    let min_window = u64::from(config.min_window_packets) * config.max_datagram_size;
    test_ops::run(cc, min_window, config.max_window, ops)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_operations_keep_every_cubic_invariant(ops in proptest::collection::vec(op(2, 6), 1..200)) {
        run(CubicConfig::default(), ops)?;
    }

    #[test]
    fn random_operations_keep_the_invariants_of_any_configuration(
        c in 0.01..100.0f64,
        beta in 0.01..0.99f64,
        fast_convergence in any::<bool>(),
        hystart in any::<bool>(),
        min_window_packets in 1..4u32,
        max_window_packets in 10..2_000u64,
        max_datagram_size in 1..=65_535u64,
        ops in proptest::collection::vec(op(2, 6), 1..100),
    ) {
        let config = CubicConfig {
            c,
            beta,
            fast_convergence,
            hystart: hystart.then(HyStartConfig::default),
            min_window_packets,
            max_window: max_window_packets * max_datagram_size,
            max_datagram_size,
            ..CubicConfig::default()
        };
        run(config, ops)?;
    }
}
