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
    limit: usize,
    held: usize,
    contenders: usize,
}

impl SendBudget {
    /// A budget of `limit` bytes (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            held: 0,
            contenders: 0,
        }
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
        let mut budget = SendBudget::new(LIMIT);
        assert_eq!(budget.room(Charge::default()), LIMIT);
        budget.recharge(Charge::default(), charge(LIMIT - 10, true));
        assert_eq!(budget.room(charge(LIMIT - 10, true)), 10);
    }

    #[test]
    fn streams_share_the_budget_and_a_late_one_gets_its_share() {
        let mut budget = SendBudget::new(LIMIT);
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
        let mut budget = SendBudget::new(LIMIT);
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
    fn more_streams_than_bytes_still_get_a_byte_each() {
        let budget = SendBudget::new(2);
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
            let mut budget = SendBudget::new(limit);
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
