//! Flow-control updates repeated for a round trip, so that one lost on a
//! lossy way back does not leave the sender blocked.

use std::time::Duration;

use quanta::Instant;

use super::carried::{Carried, CarriedRecord};
use super::streams::Streams;
use crate::StreamId;

/// Flow-control limits an update raised go again with the ACKs of the
/// next smoothed round trip, at most this many times (RFC 9000 §4.2: a
/// receiver "MAY send a MAX_STREAM_DATA or MAX_DATA frame multiple times
/// within a round trip" so that its loss does not block the sender). Sent
/// once, an update lost on a lossy way back was repaired only at this
/// side's probe timeout: by then the sender had used the rest of its
/// credit, and the two sides fell silent but for backed-off probes
/// (LEDBAT, ACKs losing 30 % in bursts, 10 ms, seed 34: 4.15 s without
/// progress). The repeats ride in ACKs that go anyway, a few bytes each,
/// and make them ack-eliciting: the count bounds what they add to the
/// bytes in flight when the peer does not acknowledge them.
const LIMIT_REPEATS: u8 = 32;

/// Until when an update goes again, how many repeats are left, and the
/// streams whose limits it raised (the first two: a busy connection's).
type Due = (Instant, u8, [Option<StreamId>; 2]);

/// The limits of the last flow-control update, while they are repeated
/// (see [`LIMIT_REPEATS`]).
#[derive(Debug, Clone, Default)]
pub(super) struct LimitsRepeat {
    /// The last update's repeats, boxed at the first update and kept for
    /// the next ones until the quiet release
    /// ([`LimitsRepeat::release_memory`]): 8 bytes on a connection that
    /// sends none, rather than 48.
    due: Option<Box<Due>>,
}

impl LimitsRepeat {
    /// Marks the limits of the last update to go again in the packet
    /// being built, within a round trip of it; returns whether it did.
    pub(super) fn repeat(&mut self, now: Instant, streams: &mut Streams) -> bool {
        let Some((until, left, ids)) = self.due.as_deref_mut() else {
            return false;
        };
        if now >= *until || *left == 0 {
            *left = 0;
            return false;
        }
        *left -= 1;
        streams.on_max_data_lost();
        for id in ids.iter().flatten() {
            streams.on_max_stream_data_lost(*id);
        }
        true
    }

    /// Gives back the box, unless repeats are still due at `now`: the
    /// connection is quiet.
    pub(super) fn release_memory(&mut self, now: Instant) {
        if self
            .due
            .as_deref()
            .is_some_and(|&(until, left, _)| now >= until || left == 0)
        {
            self.due = None;
        }
    }

    /// A packet that was no repeat carried `record`: if it raised limits,
    /// they go again with the ACKs of the next `rtt`.
    pub(super) fn on_sent(&mut self, now: Instant, rtt: Duration, record: &CarriedRecord) {
        let (mut raised, mut ids) = (false, [None; 2]);
        for item in record.iter() {
            match item {
                Carried::MaxData => raised = true,
                Carried::MaxStreamData(id) => {
                    raised = true;
                    if let Some(slot) = ids.iter_mut().find(|s| s.is_none()) {
                        *slot = Some(id);
                    }
                }
                _ => {}
            }
        }
        if raised {
            let due = (now + rtt, LIMIT_REPEATS, ids);
            match self.due.as_deref_mut() {
                // The next update of a busy connection reuses the box.
                Some(repeat) => *repeat = due,
                None => self.due = Some(Box::new(due)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update() -> CarriedRecord {
        let mut record = CarriedRecord::new();
        record.push(Carried::MaxData);
        record
    }

    #[test]
    fn the_box_is_made_by_an_update_and_given_back_once_its_repeats_are_over() {
        let (clock, mock) = quanta::Clock::mock();
        let rtt = Duration::from_millis(10);
        let mut repeat = LimitsRepeat::default();
        repeat.on_sent(clock.now(), rtt, &CarriedRecord::new());
        assert!(repeat.due.is_none(), "a packet raising no limit");
        repeat.on_sent(clock.now(), rtt, &update());
        assert!(repeat.due.is_some());
        // Not while repeats are due.
        repeat.release_memory(clock.now());
        assert!(repeat.due.is_some());
        mock.increment(rtt);
        repeat.release_memory(clock.now());
        assert!(repeat.due.is_none());
    }
}
