//! HyStart++ (RFC 9406): a slow start that leaves when the round trip
//! starts to grow, before the queue overflows, instead of at the first loss.
//!
//! Slow start doubles the window every round trip; on a path with a large
//! buffer the first loss comes only once the window is far above the path's
//! capacity, and a whole window of packets is then lost. HyStart++ watches
//! the minimum RTT of each round: when it rises by a threshold over the
//! previous round's, the queue has started to build, and the window grows
//! by only a quarter of the bytes acknowledged (Conservative Slow Start,
//! CSS) for a few rounds before congestion avoidance. If the RTT falls back
//! during CSS, the rise was noise and slow start resumes.
//!
//! A round is a round trip of sequence space: RFC 9406 §4.2 ends it when
//! the first packet sent after it began (its `windowEnd`) is acknowledged.
//! Tern numbers packets by send time instead, so a round that began at
//! instant `s` ends with the first ACK whose largest acknowledged packet was
//! sent at or after `s` (packets are sent after the ACK that began the round
//! was processed, even at the same instant of a mock clock).

use quanta::Instant;
use std::time::Duration;

/// The constants of HyStart++; the defaults are RFC 9406 §4.3's
/// recommendations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HyStartConfig {
    /// MIN_RTT_THRESH: the smallest rise of the round's minimum RTT that
    /// ends slow start, in time (default 4 ms; at most `max_rtt_thresh`).
    pub min_rtt_thresh: Duration,
    /// MAX_RTT_THRESH: the largest such rise, in time (default 16 ms).
    pub max_rtt_thresh: Duration,
    /// MIN_RTT_DIVISOR: the rise that ends slow start is the last round's
    /// minimum RTT divided by this, between the two thresholds
    /// (dimensionless, default 8; at least 1).
    pub min_rtt_divisor: u32,
    /// N_RTT_SAMPLE: RTT samples a round needs before its minimum is
    /// compared, in samples (default 8; at least 1).
    pub n_rtt_sample: u32,
    /// CSS_GROWTH_DIVISOR: Conservative Slow Start grows the window by the
    /// bytes acknowledged divided by this (dimensionless, default 4; at
    /// least 2).
    pub css_growth_divisor: u32,
    /// CSS_ROUNDS: how many rounds Conservative Slow Start lasts at most
    /// before congestion avoidance, in rounds (default 5; at least 1).
    pub css_rounds: u32,
}

impl Default for HyStartConfig {
    fn default() -> Self {
        // RFC 9406, section 4.3: "It is RECOMMENDED that a HyStart++
        // implementation use the following constants".
        Self {
            min_rtt_thresh: Duration::from_millis(4),
            max_rtt_thresh: Duration::from_millis(16),
            min_rtt_divisor: 8,
            n_rtt_sample: 8,
            css_growth_divisor: 4,
            css_rounds: 5,
        }
    }
}

impl HyStartConfig {
    /// Whether every constant is in its documented range.
    pub(crate) fn is_valid(&self) -> bool {
        self.min_rtt_thresh <= self.max_rtt_thresh
            && self.min_rtt_divisor >= 1
            && self.n_rtt_sample >= 1
            && self.css_growth_divisor >= 2
            && self.css_rounds >= 1
    }
}

/// Where HyStart++ has the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Standard slow start: the window grows by the bytes acknowledged.
    SlowStart,
    /// Conservative Slow Start since round trips grew to `baseline`; this is
    /// its `round`-th round (the partial round it began in is the first).
    Css { baseline: Duration, round: u32 },
}

/// What slow start does with one ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Grow the window by the bytes acknowledged divided by this.
    Grow { divisor: u64 },
    /// CSS is over: enter congestion avoidance with the current window.
    Exit,
}

/// HyStart++ state of the initial slow start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HyStart {
    config: HyStartConfig,
    phase: Phase,
    /// When the current round began; `None` before the first ACK.
    round_start: Option<Instant>,
    /// lastRoundMinRTT (`None`: infinity).
    last_round_min_rtt: Option<Duration>,
    /// currentRoundMinRTT (`None`: infinity).
    current_round_min_rtt: Option<Duration>,
    /// rttSampleCount: samples taken in the current round.
    rtt_sample_count: u32,
}

impl HyStart {
    pub(crate) fn new(config: HyStartConfig) -> Self {
        Self {
            config,
            phase: Phase::SlowStart,
            round_start: None,
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            rtt_sample_count: 0,
        }
    }

    /// Whether Conservative Slow Start is under way.
    pub(crate) fn in_css(&self) -> bool {
        matches!(self.phase, Phase::Css { .. })
    }

    /// Accounts for one ACK that may grow the window, at `now`, whose
    /// largest acknowledged packet was sent at `largest_sent_at`, with
    /// `latest_rtt` the RTT sample it gave; says how slow start grows.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        largest_sent_at: Instant,
        latest_rtt: Duration,
    ) -> Step {
        if self
            .round_start
            .is_none_or(|start| largest_sent_at >= start)
        {
            // RFC 9406, section 4.2: "If CSS_ROUNDS rounds are complete,
            // enter congestion avoidance by setting the ssthresh to the
            // current cwnd." (the caller sets it.)
            if let Phase::Css { baseline, round } = self.phase {
                if round >= self.config.css_rounds {
                    return Step::Exit;
                }
                self.phase = Phase::Css {
                    baseline,
                    round: round + 1,
                };
            }
            self.start_round(now);
        }

        // RFC 9406, section 4.2: in slow start "cwnd = cwnd + min(N, L *
        // SMSS)", in CSS "cwnd = cwnd + (min(N, L * SMSS) /
        // CSS_GROWTH_DIVISOR)". Tern paces every packet, for which the RFC
        // lets L be infinite: N alone.
        let divisor = match self.phase {
            Phase::SlowStart => 1,
            Phase::Css { .. } => u64::from(self.config.css_growth_divisor),
        };

        // "currentRoundMinRTT = min(currentRoundMinRTT, currRTT)
        //  rttSampleCount += 1"
        self.current_round_min_rtt = Some(
            self.current_round_min_rtt
                .map_or(latest_rtt, |min| min.min(latest_rtt)),
        );
        self.rtt_sample_count = self.rtt_sample_count.saturating_add(1);
        if self.rtt_sample_count < self.config.n_rtt_sample {
            return Step::Grow { divisor };
        }
        let Some(current) = self.current_round_min_rtt else {
            return Step::Grow { divisor };
        };
        match self.phase {
            Phase::SlowStart => {
                // "For rounds where at least N_RTT_SAMPLE RTT samples have
                // been obtained and currentRoundMinRTT and lastRoundMinRTT
                // are valid, check to see if delay increase triggers slow
                // start exit"
                let Some(last) = self.last_round_min_rtt else {
                    return Step::Grow { divisor };
                };
                // "RttThresh = max(MIN_RTT_THRESH, min(lastRoundMinRTT /
                // MIN_RTT_DIVISOR, MAX_RTT_THRESH))"
                let thresh = (last / self.config.min_rtt_divisor)
                    .min(self.config.max_rtt_thresh)
                    .max(self.config.min_rtt_thresh);
                // "if (currentRoundMinRTT >= (lastRoundMinRTT + RttThresh))
                //  cssBaselineMinRtt = currentRoundMinRTT
                //  exit slow start and enter CSS"
                if current >= last.saturating_add(thresh) {
                    // "If the transition into CSS happens in the middle of a
                    // round, that partial round counts towards the limit."
                    self.phase = Phase::Css {
                        baseline: current,
                        round: 1,
                    };
                }
            }
            Phase::Css { baseline, .. } => {
                // "For CSS rounds where at least N_RTT_SAMPLE RTT samples
                // have been obtained, check to see if the current round's
                // minRTT drops below baseline (cssBaselineMinRtt) indicating
                // that slow start exit was spurious"
                if current < baseline {
                    // "resume slow start including HyStart++"
                    self.phase = Phase::SlowStart;
                }
            }
        }
        Step::Grow { divisor }
    }

    /// RFC 9406, section 4.2: "At the start of each round during standard
    /// slow start [RFC5681] and CSS, initialize the variables used to
    /// compute the last round's minRTT and current round's minRTT".
    fn start_round(&mut self, now: Instant) {
        self.round_start = Some(now);
        // "lastRoundMinRTT = currentRoundMinRTT
        //  currentRoundMinRTT = infinity
        //  rttSampleCount = 0"
        self.last_round_min_rtt = self.current_round_min_rtt;
        self.current_round_min_rtt = None;
        self.rtt_sample_count = 0;
    }

    /// Whether the CSS round count is within its limit.
    pub(crate) fn is_consistent(&self) -> bool {
        match self.phase {
            Phase::SlowStart => true,
            Phase::Css { round, .. } => (1..=self.config.css_rounds).contains(&round),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Plays rounds of `acks` ACKs each with the given RTT through a
    /// HyStart++, 1 ms apart, packets sent just after each round began.
    struct Rounds {
        clock: quanta::Clock,
        mock: std::sync::Arc<quanta::Mock>,
        hystart: HyStart,
        /// Send time of the packets of the current round.
        sent: Instant,
    }

    impl Rounds {
        fn new() -> Self {
            let (clock, mock) = quanta::Clock::mock();
            mock.increment(Duration::from_secs(1));
            let sent = clock.now();
            Self {
                clock,
                mock,
                hystart: HyStart::new(HyStartConfig::default()),
                sent,
            }
        }

        /// One round of `acks` ACKs with RTT `rtt`; the steps they got.
        fn round(&mut self, acks: u32, rtt: Duration) -> Vec<Step> {
            let steps = (0..acks)
                .map(|_| {
                    self.mock.increment(MS);
                    self.hystart.on_ack(self.clock.now(), self.sent, rtt)
                })
                .collect();
            // The next round's packets leave after the last ACK.
            self.mock.increment(MS);
            self.sent = self.clock.now();
            steps
        }
    }

    const GROW: Step = Step::Grow { divisor: 1 };
    const CSS: Step = Step::Grow { divisor: 4 };

    #[test]
    fn the_defaults_are_the_rfcs() {
        let config = HyStartConfig::default();
        assert_eq!(config.min_rtt_thresh, 4 * MS);
        assert_eq!(config.max_rtt_thresh, 16 * MS);
        assert_eq!(
            (
                config.min_rtt_divisor,
                config.n_rtt_sample,
                config.css_growth_divisor,
                config.css_rounds
            ),
            (8, 8, 4, 5)
        );
        assert!(config.is_valid());
    }

    #[test]
    fn a_steady_round_trip_keeps_slow_start() {
        let mut rounds = Rounds::new();
        for _ in 0..10 {
            assert!(rounds.round(16, 40 * MS).iter().all(|s| *s == GROW));
        }
        assert!(!rounds.hystart.in_css());
    }

    #[test]
    fn a_rise_of_the_threshold_enters_css_after_eight_samples() {
        // Last round's minimum 40 ms: the threshold is 40/8 = 5 ms.
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        let steps = rounds.round(16, 45 * MS);
        // The eighth sample triggers; its ACK still grows as slow start.
        assert!(steps[..8].iter().all(|s| *s == GROW), "{steps:?}");
        assert!(steps[8..].iter().all(|s| *s == CSS), "{steps:?}");
        assert!(rounds.hystart.in_css());
    }

    #[test]
    fn a_rise_below_the_threshold_does_not() {
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        rounds.round(16, 44 * MS);
        assert!(!rounds.hystart.in_css(), "4 ms < 5 ms");
        // The threshold is at least 4 ms on short paths...
        let mut rounds = Rounds::new();
        rounds.round(16, 8 * MS);
        rounds.round(16, 11 * MS);
        assert!(!rounds.hystart.in_css(), "3 ms < 4 ms");
        let mut rounds = Rounds::new();
        rounds.round(16, 8 * MS);
        rounds.round(16, 12 * MS);
        assert!(rounds.hystart.in_css(), "4 ms over 8 ms");
        // ... and at most 16 ms on long ones.
        let mut rounds = Rounds::new();
        rounds.round(16, 400 * MS);
        rounds.round(16, 416 * MS);
        assert!(rounds.hystart.in_css(), "16 ms < 400/8 ms");
    }

    #[test]
    fn a_round_with_fewer_than_eight_samples_is_not_judged() {
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        rounds.round(7, 80 * MS);
        assert!(!rounds.hystart.in_css());
    }

    #[test]
    fn css_lasts_five_rounds_counting_the_partial_one_then_exits() {
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        rounds.round(16, 50 * MS);
        assert!(rounds.hystart.in_css());
        for _ in 2..=5 {
            assert!(rounds.round(16, 50 * MS).iter().all(|s| *s == CSS));
        }
        let steps = rounds.round(16, 50 * MS);
        assert_eq!(steps[0], Step::Exit);
        assert!(rounds.hystart.is_consistent());
    }

    #[test]
    fn css_returns_to_slow_start_when_the_round_trip_falls_back() {
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        rounds.round(16, 50 * MS);
        assert!(rounds.hystart.in_css());
        // Below the 50 ms baseline: the exit was spurious.
        let steps = rounds.round(16, 49 * MS);
        assert!(steps[..8].iter().all(|s| *s == CSS), "{steps:?}");
        assert!(steps[8..].iter().all(|s| *s == GROW), "{steps:?}");
        assert!(!rounds.hystart.in_css());
        // ... including HyStart++: a new rise enters CSS again.
        rounds.round(16, 60 * MS);
        assert!(rounds.hystart.in_css());
    }

    #[test]
    fn a_round_ends_only_with_the_ack_of_a_packet_sent_after_it_began() {
        let mut rounds = Rounds::new();
        rounds.round(16, 40 * MS);
        // The first ACK of a packet sent after the round's end begins the
        // second round...
        let before_second = rounds.sent;
        rounds.mock.increment(MS);
        let now = rounds.clock.now();
        assert_eq!(rounds.hystart.on_ack(now, before_second, 40 * MS), GROW);
        // ... and ACKs of packets sent before it began belong to it: their
        // 80 ms samples never make a round of their own.
        for _ in 0..16 {
            rounds.mock.increment(MS);
            let now = rounds.clock.now();
            assert_eq!(rounds.hystart.on_ack(now, before_second, 80 * MS), GROW);
        }
        assert!(!rounds.hystart.in_css());
        assert_eq!(rounds.hystart.current_round_min_rtt, Some(40 * MS));
        assert_eq!(rounds.hystart.rtt_sample_count, 17);
    }

    #[test]
    fn invalid_constants_are_recognised() {
        let mut config = HyStartConfig {
            min_rtt_thresh: 20 * MS,
            ..HyStartConfig::default()
        };
        assert!(!config.is_valid());
        config = HyStartConfig {
            css_growth_divisor: 1,
            ..HyStartConfig::default()
        };
        assert!(!config.is_valid());
        config = HyStartConfig {
            n_rtt_sample: 0,
            ..HyStartConfig::default()
        };
        assert!(!config.is_valid());
    }
}
