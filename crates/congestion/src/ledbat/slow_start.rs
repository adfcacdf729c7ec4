//! Slow start: the window doubles per round trip until the queue grows, a
//! loss, or the threshold; and what leaving it schedules.

use super::{Ledbat, Phase};
use crate::time::add_saturating;
use quanta::Instant;
use std::time::Duration;

impl Ledbat {
    pub(super) fn exit_slow_start(&mut self, now: Instant, srtt: Duration) {
        self.phase = Phase::CongestionAvoidance;
        if !self.periodic_slowdowns {
            return;
        }
        match self.slowdown_started.take() {
            Some(started) => {
                // The next slowdown comes `slowdown_interval` times the length
                // of this one later, so slowdowns cost about 1/(interval + 1)
                // of the time.
                let duration = now.saturating_duration_since(started);
                let wait = duration.saturating_mul(self.slowdown_interval);
                self.next_slowdown = Some(add_saturating(now, wait));
            }
            None if self.next_slowdown.is_none() => {
                // LEDBAT++'s initial slowdown, two round trips after the first
                // slow start.
                self.next_slowdown = Some(add_saturating(now, srtt.saturating_mul(2)));
            }
            None => {}
        }
    }

    /// Slow start: the window grows by the bytes acknowledged, as long as the
    /// queue stays short.
    pub(super) fn slow_start(
        &mut self,
        now: Instant,
        acked: u64,
        flight_used: u64,
        may_grow: bool,
        srtt: Duration,
    ) {
        // After a slowdown the flow climbs back to the window it held, which
        // was its share before it yielded: others' queue (at the target, if
        // they are LEDBAT flows) must not stop it at 3/4 of the target, or
        // every slowdown would hand the share of a small flow to a large
        // one. Only a queue twice the target — someone else's congestion —
        // ends the climb early.
        let exit_at = if self.slowdown_started.is_some() {
            self.target_nanos.saturating_mul(2)
        } else {
            self.slow_start_exit_nanos
        };
        if self.queuing_delay_nanos >= exit_at {
            self.exit_slow_start(now, srtt);
            return;
        }
        if !may_grow {
            return;
        }
        let old = self.window_bytes();
        // Only a window that was used grows: to at most twice what was in
        // flight in the last round trip (as a doubling per round trip needs).
        let allowed = flight_used
            .saturating_mul(2)
            .max(flight_used.saturating_add(self.allowed_increase));
        let grown = old.saturating_add(acked).min(allowed).max(old);
        let ceiling = self.ssthresh.min(self.max_window);
        self.set_window_bytes(grown.min(ceiling));
        if grown >= ceiling {
            self.exit_slow_start(now, srtt);
        }
    }
}
