//! LEDBAT++'s periodic slowdowns: when one begins, and when its hold ends.

use super::{Ledbat, Phase};
use crate::Rtt;
use crate::time::add_saturating;
use quanta::Instant;

impl Ledbat {
    /// Starts or ends a slowdown when its time has come.
    pub(super) fn advance_phase(&mut self, now: Instant, rtt: &Rtt) {
        match self.phase {
            Phase::SlowdownHold { until, restart } if now >= until => {
                // LEDBAT++: after the hold, slow start back up to the window
                // the flow had before the slowdown (kept in ssthresh).
                self.set_window_bytes(restart);
                self.phase = Phase::SlowStart;
            }
            Phase::CongestionAvoidance if self.next_slowdown.is_some_and(|at| now >= at) => {
                // LEDBAT++: the window drops to the minimum for long enough
                // for the queue to drain.
                self.next_slowdown = None;
                self.slowdown_started = Some(now);
                let window = self.window_bytes();
                self.ssthresh = window;
                // Of the window, the share min RTT / smoothed RTT was on the
                // wire and the rest in the queue: after the hold the ramp
                // restarts from the wire's share (a bandwidth-delay product
                // measured just now), not from 2 packets, so a slowdown costs
                // about one base round trip of idle link instead of a whole
                // slow start. The queue is drained either way, and the
                // restart's first packets measure the empty path.
                let srtt = rtt.smoothed();
                let share = u128::from(window) * rtt.min().as_nanos() / srtt.as_nanos().max(1);
                let restart = u64::try_from(share).unwrap_or(window);
                self.set_window_bytes(self.min_window);
                let hold = srtt.saturating_mul(self.slowdown_hold);
                self.phase = Phase::SlowdownHold {
                    until: add_saturating(now, hold),
                    restart: restart.clamp(self.min_window, window),
                };
            }
            _ => {}
        }
    }
}
