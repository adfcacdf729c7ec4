//! The send buffer budget of a connection, shared by its streams.
//!
//! Each stream keeps the bytes it was given until the peer acknowledges
//! them. Were each stream allowed its whole buffer, four busy streams would
//! hold four buffers, and copying from that much memory into packets runs
//! out of cache. So the connection has one budget: its streams together
//! hold at most the budget's limit in bytes, and one stream alone may use
//! all of it.
//!
//! While several streams want room, each is entitled to an equal share of
//! the budget: a stream that holds its share or more gets no room until its
//! own bytes are acknowledged, so room that frees up goes to the streams
//! below their share, and a stream that joins late is never starved by
//! those that came first. The budget only counts; the connection keeps
//! track of which streams wait for room and wakes them when some frees up.
//!
//! # The limits follow the congestion window
//!
//! A lost packet holds every byte sent after it until its repair is
//! acknowledged: a round trip to find the hole and one more to fill it, at
//! the rate the window allows. With a window of several megabytes the
//! configured 4 MiB filled up behind the hole, and the sender stopped
//! until the repair came (CUBIC at 100 Mbit/s and 150 ms: less than half
//! its window in flight for up to 169 ms at a time). So both limits, the
//! connection's (`send_buffer`) and each stream's (`stream_send_buffer`),
//! are twice the congestion window when that is more than configured, and
//! at most [`GROWTH`] times what was configured: still a bound this side
//! sets on what its peer can make it hold, and what the streams hold is
//! charged to the endpoint's memory budget as before.
//!
//! The connection follows the window only outside slow start. A window
//! that doubles every round trip is no measure of the path yet, and on a
//! long path it doubles well past it before the first delay or loss
//! arrives: LEDBAT at 100 Mbit/s and 300 ms, let past 4 MiB in its first
//! slow start, overshot to a 6 MB window, lost 274 packets and fell back
//! to 33 Mbit/s, where the 4 MiB limit had held it at 90. A window past
//! slow start is what the path carried; a slow start after a slowdown or
//! an undo leaves the limits where they were.

use super::Streams;

/// How many times its configured value a limit may grow to with the
/// congestion window.
pub(crate) const GROWTH: usize = 4;

/// The limit configured as `configured` bytes, for a congestion window of
/// `window` bytes: twice the window, within `configured ..= GROWTH ×
/// configured`. It moves in eighths of `configured`, so a window that
/// changes by a few bytes with every ACK does not touch every stream.
pub(crate) fn following_window(configured: usize, window: u64) -> usize {
    let step = (configured / 8).max(1);
    let wanted = usize::try_from(window.saturating_mul(2)).unwrap_or(usize::MAX);
    let wanted = wanted.min(configured.saturating_mul(GROWTH));
    (wanted / step * step).max(configured)
}

/// What one stream counts against the budget.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Charge {
    /// Bytes the stream holds until they are acknowledged.
    pub held: usize,
    /// Whether the stream takes part in the sharing: it is still open for
    /// writes and holds bytes or waits for room.
    pub contending: bool,
}

/// Bytes all streams of a connection may hold together, and how they split.
#[derive(Debug, Clone)]
pub(crate) struct SendBudget {
    /// The connection's limit as configured, and as the window grew it.
    configured: usize,
    limit: usize,
    /// Each stream's limit as configured, and as the window grew it.
    stream_configured: usize,
    stream_limit: usize,
    held: usize,
    contenders: usize,
}

impl SendBudget {
    /// A budget of `limit` bytes for the streams together and
    /// `stream_limit` for each (at least one), until the congestion window
    /// grows them.
    pub(crate) fn new(limit: usize, stream_limit: usize) -> Self {
        Self {
            configured: limit.max(1),
            limit: limit.max(1),
            stream_configured: stream_limit.max(1),
            stream_limit: stream_limit.max(1),
            held: 0,
            contenders: 0,
        }
    }

    /// Bytes one stream may hold until acknowledged.
    pub(crate) fn stream_limit(&self) -> usize {
        self.stream_limit
    }

    /// Sets both limits for a congestion window of `window` bytes (see the
    /// module docs). Returns whether the streams' limit changed, and
    /// whether room grew.
    fn follow_window(&mut self, window: u64) -> (bool, bool) {
        let limit = following_window(self.configured, window);
        let stream_limit = following_window(self.stream_configured, window);
        let grew = limit > self.limit || stream_limit > self.stream_limit;
        let stream_changed = stream_limit != self.stream_limit;
        self.limit = limit;
        self.stream_limit = stream_limit;
        (stream_changed, grew)
    }

    /// Bytes the streams may hold together.
    #[cfg(test)]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes the streams hold together.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Streams counted as contending.
    #[cfg(test)]
    pub(crate) fn contenders(&self) -> usize {
        self.contenders
    }

    /// Bytes a stream now charged with `charge` may add: what is left of
    /// the budget, and no more than takes it to an equal share among the
    /// contending streams (itself counted, even if it is not yet).
    pub(crate) fn room(&self, charge: Charge) -> usize {
        let others = self.contenders - usize::from(charge.contending);
        let share = (self.limit / (others + 1)).max(1);
        let left = self.limit.saturating_sub(self.held);
        left.min(share.saturating_sub(charge.held))
    }

    /// A stream's charge changes from `old` to `new`. Returns whether room
    /// was released: fewer bytes held, or one fewer stream sharing.
    pub(crate) fn recharge(&mut self, old: Charge, new: Charge) -> bool {
        self.held = self.held - old.held + new.held;
        self.contenders =
            self.contenders - usize::from(old.contending) + usize::from(new.contending);
        new.held < old.held || (old.contending && !new.contending)
    }
}

impl Streams {
    /// The congestion window is `window` bytes now: the send limits follow
    /// it (see the module docs), and writers wait for room again if it grew.
    pub(in crate::connection) fn follow_window(&mut self, window: u64) {
        let (stream_changed, grew) = self.budget.follow_window(window);
        if stream_changed {
            let capacity = self.budget.stream_limit();
            let outgoing = self.tables.existing().map(|t| &mut t.outgoing);
            for out in outgoing.into_iter().flat_map(|o| o.values_mut()) {
                out.data.set_capacity(capacity);
            }
        }
        self.room_released |= grew;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMIT: usize = 4 << 20;

    fn charge(held: usize, contending: bool) -> Charge {
        Charge { held, contending }
    }

    #[test]
    fn one_stream_alone_has_the_whole_budget() {
        let mut budget = SendBudget::new(LIMIT, LIMIT);
        assert_eq!(budget.room(Charge::default()), LIMIT);
        budget.recharge(Charge::default(), charge(LIMIT - 10, true));
        assert_eq!(budget.room(charge(LIMIT - 10, true)), 10);
    }

    #[test]
    fn streams_share_the_budget_and_a_late_one_gets_its_share() {
        let mut budget = SendBudget::new(LIMIT, LIMIT);
        // The first stream took everything while it was alone.
        budget.recharge(Charge::default(), charge(LIMIT, true));
        // A second one asks and finds nothing left: it now contends.
        assert_eq!(budget.room(Charge::default()), 0);
        budget.recharge(Charge::default(), charge(0, true));
        // The first one's acknowledgements free bytes: they are the
        // second's, since the first is above its half.
        assert!(budget.recharge(charge(LIMIT, true), charge(LIMIT - 1000, true)));
        assert_eq!(budget.room(charge(LIMIT - 1000, true)), 0);
        assert_eq!(budget.room(charge(0, true)), 1000);
        assert!(budget.recharge(charge(LIMIT - 1000, true), charge(LIMIT / 4, true)));
        assert_eq!(budget.room(charge(0, true)), LIMIT / 2);
        assert_eq!(budget.room(charge(LIMIT / 4, true)), LIMIT / 4);
    }

    #[test]
    fn a_stream_that_stops_contending_releases_its_share() {
        let mut budget = SendBudget::new(LIMIT, LIMIT);
        budget.recharge(Charge::default(), charge(LIMIT / 2, true));
        budget.recharge(Charge::default(), charge(0, true));
        assert_eq!(budget.room(charge(LIMIT / 2, true)), 0);
        // The second one finishes without holding anything.
        assert!(budget.recharge(charge(0, true), Charge::default()));
        assert_eq!(budget.room(charge(LIMIT / 2, true)), LIMIT / 2);
        // Finishing while holding bytes keeps them counted until acknowledged.
        assert!(budget.recharge(charge(LIMIT / 2, true), charge(LIMIT / 2, false)));
        assert_eq!(budget.held(), LIMIT / 2);
        assert_eq!(budget.contenders(), 0);
        assert!(!budget.recharge(charge(LIMIT / 2, false), charge(LIMIT / 2, false)));
    }

    #[test]
    fn the_limits_are_twice_the_window_within_one_to_four_times_the_configured() {
        const MIB: u64 = 1 << 20;
        let mib = 1 << 20;
        assert_eq!(following_window(4 * mib, 0), 4 * mib);
        assert_eq!(following_window(4 * mib, MIB), 4 * mib);
        assert_eq!(following_window(4 * mib, 3 * MIB), 6 * mib);
        // In eighths of the configured value: a few bytes more change nothing.
        assert_eq!(following_window(4 * mib, 3 * MIB + 1_000), 6 * mib);
        assert_eq!(following_window(4 * mib, 100 * MIB), GROWTH * 4 * mib);
        assert_eq!(following_window(1, u64::MAX), GROWTH);
        assert_eq!(following_window(usize::MAX, u64::MAX), usize::MAX);
    }

    #[test]
    fn a_stream_holding_more_than_a_shrunk_limit_waits_for_acknowledgements() {
        let mut budget = SendBudget::new(LIMIT, LIMIT);
        assert_eq!(budget.follow_window(4 * LIMIT as u64), (true, true));
        assert_eq!(
            (budget.limit(), budget.stream_limit()),
            (4 * LIMIT, 4 * LIMIT)
        );
        budget.recharge(Charge::default(), charge(3 * LIMIT, true));
        assert_eq!(budget.room(charge(3 * LIMIT, true)), LIMIT);
        // Persistent congestion: the window falls to two packets.
        assert_eq!(budget.follow_window(2 * 1_452), (true, false));
        assert_eq!(budget.limit(), LIMIT);
        assert_eq!(budget.room(charge(3 * LIMIT, true)), 0);
        assert!(budget.recharge(charge(3 * LIMIT, true), charge(LIMIT / 2, true)));
        assert_eq!(budget.room(charge(LIMIT / 2, true)), LIMIT / 2);
    }

    #[test]
    fn a_stream_follows_the_window_and_its_waiting_writer_hears_of_it() {
        use crate::config::ConnectionConfig;
        use crate::connection::streams::stream_id::Side;
        use tern_wire::MaxStreamData;

        // Below the unsent limit, so the send limits are what binds.
        const BUFFER: usize = 32 << 10;
        let config = ConnectionConfig {
            stream_send_buffer: BUFFER,
            send_buffer: BUFFER,
            ..ConnectionConfig::default()
        };
        let mut streams = Streams::new(Side::Initiator, &config);
        let id = streams.open().expect("the peer allows it");
        let max = MaxStreamData {
            id: id.0,
            max: u64::MAX / 2,
        };
        streams.on_max_stream_data(&max).expect("own stream");
        let chunk = vec![7u8; 1 << 20];
        assert_eq!(streams.write(id, &chunk), Ok(BUFFER));
        streams.wake_writers();
        assert_eq!(streams.poll_writable(), None, "full, and waiting");
        // A 40 KiB window: twice it, and the writer is told.
        streams.follow_window(40 << 10);
        streams.wake_writers();
        assert_eq!(streams.poll_writable(), Some(id));
        assert_eq!(streams.write(id, &chunk), Ok((80 << 10) - BUFFER));
        // No further than four times the buffer.
        streams.follow_window(u64::MAX);
        assert_eq!(streams.write(id, &chunk), Ok(GROWTH * BUFFER - (80 << 10)));
        // Back to the buffer: what is held stays, and nothing more is taken.
        streams.follow_window(0);
        assert_eq!(streams.writable(id), 0);
        assert_eq!(streams.send_buffered(), GROWTH * BUFFER);
    }

    #[test]
    fn more_streams_than_bytes_still_get_a_byte_each() {
        let budget = SendBudget::new(2, 2);
        let mut crowded = budget.clone();
        for _ in 0..5 {
            crowded.recharge(Charge::default(), charge(0, true));
        }
        assert_eq!(crowded.room(charge(0, true)), 1);
    }

    proptest! {
        /// Streams that write what the budget allows, and whose bytes are
        /// acknowledged in any order, never hold more than the budget
        /// together; and once every other stream's bytes are acknowledged,
        /// a contending stream has room (nobody waits forever).
        #[test]
        fn the_budget_is_never_exceeded_and_always_comes_back(
            limit in 1usize..100_000,
            steps in proptest::collection::vec((0usize..4, any::<bool>(), 0usize..200_000), 0..300),
        ) {
            let mut budget = SendBudget::new(limit, limit);
            let mut charges = [Charge::default(); 4];
            for (stream, write, n) in steps {
                let old = charges[stream];
                let new = if write {
                    let took = n.min(budget.room(old));
                    charge(old.held + took, true)
                } else {
                    charge(old.held - n.min(old.held), old.contending)
                };
                budget.recharge(old, new);
                charges[stream] = new;
                prop_assert!(budget.held() <= budget.limit());
                prop_assert_eq!(budget.held(), charges.iter().map(|c| c.held).sum::<usize>());
                prop_assert_eq!(
                    budget.contenders(),
                    charges.iter().filter(|c| c.contending).count()
                );
            }
            for waiting in 0..4 {
                let mut drained = budget.clone();
                for (other, c) in charges.iter().enumerate() {
                    if other != waiting {
                        drained.recharge(*c, charge(0, c.contending));
                    }
                }
                let own = charge(0, charges[waiting].contending);
                drained.recharge(charges[waiting], own);
                prop_assert!(drained.room(own) > 0);
            }
        }
    }
}
