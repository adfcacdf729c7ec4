//! The window in congestion avoidance: RFC 6817's update below the target,
//! LEDBAT++'s multiplicative decrease above it, and the flight it is
//! allowed to grow beyond.

use super::{FRAC_BITS, Ledbat, MAX_ACKED};
use quanta::Instant;
use std::time::Duration;

impl Ledbat {
    /// The most bytes in flight during the last round trip or so: RFC
    /// 6817's `flightsize`, taken over the previous round trip as its
    /// section 2.5 describes, so a window that was used is not mistaken for
    /// an unused one while its ACKs drain the flight.
    pub(super) fn flight_used(&mut self, now: Instant, flight: u64, srtt: Duration) -> u64 {
        let period_over = self
            .flight_period_start
            .is_none_or(|start| now.saturating_duration_since(start) >= srtt);
        if period_over {
            self.flight_peak_previous = self.flight_peak;
            self.flight_peak = flight;
            self.flight_period_start = Some(now);
        }
        self.flight_peak = self.flight_peak.max(flight);
        self.flight_peak.max(self.flight_peak_previous)
    }

    /// `acked` bytes with `flight_used` bytes in flight in the last round
    /// trip. Decreases always apply; increases only if `may_grow`.
    pub(super) fn congestion_avoidance(&mut self, acked: u64, flight_used: u64, may_grow: bool) {
        let acked = i128::from(acked.min(MAX_ACKED));
        let target = i128::from(self.target_nanos);
        // Beyond 16 × target the decrease is at its cap of W/2 anyway.
        let queuing = i128::from(
            self.queuing_delay_nanos
                .min(self.target_nanos.saturating_mul(16)),
        );
        let window = i128::from(self.window_bytes().max(1));
        let mss = i128::from(self.mss);
        let gain = i128::from(self.gain);
        let delta = if queuing < target || self.decrease_constant == 0 {
            // RFC 6817, section 2.4.2 (also above the target when the
            // LEDBAT++ decrease is off):
            //   off_target = (TARGET - queuing_delay) / TARGET
            //   cwnd += GAIN * off_target * bytes_newly_acked * MSS / cwnd
            gain * (target - queuing) * acked * mss / (target * window)
        } else {
            // LEDBAT++: at or above the target the window changes by
            // GAIN − C × W × (delay/target − 1) packets per round trip, i.e.
            // per ACK GAIN × acked × MSS / W − C × (delay/target − 1) × acked
            // bytes, and never by more than −W/2 per round trip (−acked/2
            // per ACK). Each flow gives back in proportion to its window, so
            // the only equilibrium, at a delay just above the target, is the
            // one where the windows are equal.
            let increase = gain * acked * mss / window;
            let decrease = i128::from(self.decrease_constant) * (queuing - target) * acked / target;
            (increase - decrease).max(-(acked << FRAC_BITS) / 2)
        };

        let old = i128::from(self.window);
        let mut new = old + delta;
        if delta > 0 && !may_grow {
            return;
        }
        if delta > 0 {
            // RFC 6817, section 2.4.2:
            //   max_allowed_cwnd = flightsize + ALLOWED_INCREASE * MSS
            //   cwnd = min(cwnd, max_allowed_cwnd)
            // Section 2.5: "an ALLOWED_INCREASE of 1 allows and limits the
            // cwnd increase based on flightsize in the previous RTT": the cap
            // stops growth, it does not shrink a window an application left
            // unused.
            let allowed =
                i128::from(flight_used.saturating_add(self.allowed_increase)) << FRAC_BITS;
            new = new.min(allowed).max(old);
        }
        //   cwnd = max(cwnd, MIN_CWND * MSS)
        let min = i128::from(self.min_window) << FRAC_BITS;
        let max = i128::from(self.max_window) << FRAC_BITS;
        self.window = u64::try_from(new.clamp(min, max)).unwrap_or(self.min_window << FRAC_BITS);
    }
}
