//! The queuing-delay estimate: one-way samples against the base-delay
//! history, bounded by what the round trip proves.

use super::{Ledbat, QUIET_PERIOD};
use crate::{OneWayDelay, Rtt};
use quanta::Instant;

impl Ledbat {
    /// Updates the delay estimates with one ACK's samples.
    pub(super) fn update_delays(
        &mut self,
        now: Instant,
        rtt: &Rtt,
        one_way_delay: Option<OneWayDelay>,
    ) {
        // The queuing delay the round trip proves: latest RTT − minimum RTT.
        let rtt_queuing =
            u64::try_from(rtt.latest().saturating_sub(rtt.min()).as_nanos()).unwrap_or(u64::MAX);
        let Some(sample) = one_way_delay.map(OneWayDelay::as_nanos) else {
            self.queuing_delay_nanos = rtt_queuing;
            return;
        };
        // RFC 6817, section 2.4.2 (on acknowledgement):
        let quiet = self
            .last_sample
            .replace(now)
            .is_some_and(|last| now.saturating_duration_since(last) > QUIET_PERIOD);
        if quiet {
            // Nothing measured the path for longer than a bucket: what the
            // history holds may describe a route that is gone (module docs).
            self.base.clear();
            self.current.clear();
        }
        //   for each delay sample in the acknowledgement:
        //       delay = acknowledgement.delay
        //       update_base_delay(delay)
        //       update_current_delay(delay)
        self.base.update(now, sample);
        self.current.push(now, sample);
        //   queuing_delay = FILTER(current_delays) - MIN(base_delays)
        let filtered = self.current.min(now, rtt.smoothed()).unwrap_or(sample);
        let base = self.base.base().unwrap_or(sample);
        let mut queuing = u64::try_from(filtered.saturating_sub(base)).unwrap_or(0);
        // Clock error: the forward queue cannot be longer than the whole
        // round trip grew. Beyond a quarter target of slack, the excess is a
        // clock that jumped or drifts, and the base moves up by it.
        let slack = self.target_nanos / 4;
        if queuing > rtt_queuing.saturating_add(slack) {
            let excess = queuing - rtt_queuing;
            let shift = i64::try_from(excess).unwrap_or(i64::MAX);
            self.base.raise(shift);
            queuing = rtt_queuing;
        }
        self.queuing_delay_nanos = queuing;
    }
}
