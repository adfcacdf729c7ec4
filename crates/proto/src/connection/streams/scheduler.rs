//! Which sender goes next: round-robin over the streams (and the message
//! lane) that have something to send, those with lost data first.
//!
//! Each call to [`Scheduler::next_turn`] hands out one sender; the connection
//! sends one chunk from it and, if it still has data, schedules it again,
//! which puts it at the back. So concurrent transfers take turns chunk by
//! chunk, and a small message is never held behind a large transfer.
//! Senders with lost data to resend go in a queue of their own that is
//! served first: the peer is waiting on those bytes.
//!
//! Every operation is O(1) amortised. A sender moved from the new-data
//! queue to the resend queue, or removed, leaves a stale entry behind that
//! is skipped when reached (each entry carries the generation it was queued
//! under); the queues are compacted when stale entries outnumber live ones,
//! so memory stays bounded by the number of live senders.

use std::collections::VecDeque;
use std::hash::Hash;

use rustc_hash::FxHashMap;

use super::super::lazy::{IsEmpty, Lazy};

/// Which queue a sender waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// Lost data to send again: served before any new data.
    Resend,
    /// Only new data.
    New,
}

/// Where a scheduled sender is: its queue and the generation of its live entry.
#[derive(Debug, Clone, Copy)]
struct Slot {
    urgency: Urgency,
    generation: u64,
}

/// The senders waiting, out of line (see [`Scheduler`]).
#[derive(Debug)]
struct Queues<K> {
    live: FxHashMap<K, Slot>,
    resend: VecDeque<(K, u64)>,
    new: VecDeque<(K, u64)>,
    generation: u64,
}

impl<K> Default for Queues<K> {
    fn default() -> Self {
        Self {
            live: FxHashMap::default(),
            resend: VecDeque::new(),
            new: VecDeque::new(),
            generation: 0,
        }
    }
}

/// Empty while no sender waits: the stale entries left behind are not
/// worth keeping (they go with the memory, and the generations start
/// again).
impl<K> IsEmpty for Queues<K> {
    #[inline]
    fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

/// Round-robin over senders identified by `K` (a stream id, or a lane for
/// messages), resends first. Empty, its map and queues are about 100
/// bytes of headers, in every connection: they are kept in a box made at
/// the first sender scheduled and given back by
/// [`release_if_empty`](Self::release_if_empty) (a quiet connection's
/// release), so an idle connection holds a pointer.
#[derive(Debug)]
pub(crate) struct Scheduler<K>(Lazy<Queues<K>>);

impl<K: Copy + Eq + Hash> Default for Scheduler<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Copy + Eq + Hash> Scheduler<K> {
    /// No sender scheduled.
    pub(crate) fn new() -> Self {
        Self(Lazy::new())
    }

    /// `key` has something to send. A sender already waiting keeps its
    /// place, unless it now has lost data and waited for new data only:
    /// then it moves to the resend queue.
    pub(crate) fn schedule(&mut self, key: K, urgency: Urgency) {
        self.0.get_or_default().schedule(key, urgency);
    }

    /// The next sender to serve, taken off the schedule: resends first,
    /// then new data, each in the order they were scheduled.
    pub(crate) fn next_turn(&mut self) -> Option<K> {
        self.0.get_mut()?.next_turn()
    }

    /// `key` has nothing left to send (finished, reset, or stopped by the peer).
    pub(crate) fn remove(&mut self, key: K) {
        if let Some(queues) = self.0.get_mut() {
            queues.live.remove(&key);
            queues.compact_if_stale();
        }
    }

    /// Whether `key` is waiting for its turn.
    #[cfg(test)]
    pub(crate) fn is_scheduled(&self, key: K) -> bool {
        self.0.get().is_some_and(|q| q.live.contains_key(&key))
    }

    /// How many senders wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.get().map_or(0, |q| q.live.len())
    }

    /// Whether no sender waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Gives the memory back while no sender waits (the stale entries go
    /// with it, and the generations start again).
    pub(crate) fn release_if_empty(&mut self) {
        self.0.release_if_empty();
    }

    /// Whether it holds memory.
    #[cfg(test)]
    pub(crate) fn holds_memory(&self) -> bool {
        self.0.holds_memory()
    }

    #[cfg(test)]
    fn entries(&self) -> usize {
        self.0.get().map_or(0, |q| q.resend.len() + q.new.len())
    }
}

impl<K: Copy + Eq + Hash> Queues<K> {
    fn schedule(&mut self, key: K, urgency: Urgency) {
        if let Some(slot) = self.live.get(&key)
            && (slot.urgency == Urgency::Resend || urgency == Urgency::New)
        {
            return;
        }
        self.generation += 1;
        let generation = self.generation;
        self.live.insert(
            key,
            Slot {
                urgency,
                generation,
            },
        );
        match urgency {
            Urgency::Resend => self.resend.push_back((key, generation)),
            Urgency::New => self.new.push_back((key, generation)),
        }
        self.compact_if_stale();
    }

    fn next_turn(&mut self) -> Option<K> {
        let key = Self::pop_live(&mut self.resend, &mut self.live)
            .or_else(|| Self::pop_live(&mut self.new, &mut self.live));
        // A served sender leaves the live set: the stale entries left
        // behind may now outnumber the live ones.
        self.compact_if_stale();
        key
    }

    fn pop_live(queue: &mut VecDeque<(K, u64)>, live: &mut FxHashMap<K, Slot>) -> Option<K> {
        while let Some((key, generation)) = queue.pop_front() {
            if live.get(&key).is_some_and(|s| s.generation == generation) {
                live.remove(&key);
                return Some(key);
            }
        }
        None
    }

    /// Drop stale entries once they outnumber live ones (amortised O(1)).
    fn compact_if_stale(&mut self) {
        let entries = self.resend.len() + self.new.len();
        if entries <= 2 * self.live.len() + 8 {
            return;
        }
        let live = &self.live;
        let is_live = |&(key, generation): &(K, u64)| {
            live.get(&key).is_some_and(|s| s.generation == generation)
        };
        self.resend.retain(is_live);
        self.new.retain(is_live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn four_busy_streams_get_a_quarter_of_the_chunks_each() {
        let mut s = Scheduler::new();
        for key in 0..4u64 {
            s.schedule(key, Urgency::New);
        }
        let mut served = [0u32; 4];
        for _ in 0..10_000 {
            let key = s.next_turn().expect("four streams always have data");
            served[key as usize] += 1;
            s.schedule(key, Urgency::New);
        }
        assert_eq!(served, [2500; 4]);
    }

    #[test]
    fn a_small_message_waits_one_chunk_not_a_whole_transfer() {
        let mut s = Scheduler::new();
        s.schedule(1u64, Urgency::New);
        assert_eq!(s.next_turn(), Some(1));
        s.schedule(1, Urgency::New);
        s.schedule(99, Urgency::New);
        assert_eq!(s.next_turn(), Some(1));
        s.schedule(1, Urgency::New);
        assert_eq!(s.next_turn(), Some(99));
        assert_eq!(s.next_turn(), Some(1));
        assert_eq!(s.next_turn(), None);
    }

    #[test]
    fn resends_go_first_and_an_upgrade_moves_the_sender() {
        let mut s = Scheduler::new();
        s.schedule(1u64, Urgency::New);
        s.schedule(2, Urgency::New);
        s.schedule(2, Urgency::Resend);
        s.schedule(2, Urgency::New);
        assert_eq!(s.len(), 2);
        assert_eq!(s.next_turn(), Some(2));
        assert_eq!(s.next_turn(), Some(1));
        assert_eq!(s.next_turn(), None);
    }

    #[test]
    fn a_removed_sender_is_never_served() {
        let mut s = Scheduler::new();
        s.schedule(1u64, Urgency::Resend);
        s.schedule(2, Urgency::New);
        s.remove(1);
        assert!(!s.is_scheduled(1));
        assert_eq!(s.next_turn(), Some(2));
        assert_eq!(s.next_turn(), None);
        assert!(s.is_empty());
    }

    #[test]
    fn memory_is_made_at_the_first_sender_and_given_back_once_none_waits() {
        let mut s = Scheduler::new();
        assert_eq!(s.next_turn(), None);
        s.remove(1u64);
        assert!(!s.holds_memory(), "reading and removing allocate nothing");
        s.schedule(1, Urgency::New);
        s.schedule(2, Urgency::Resend);
        s.release_if_empty();
        assert!(s.holds_memory(), "kept while senders wait");
        assert_eq!(s.next_turn(), Some(2));
        assert_eq!(s.next_turn(), Some(1));
        s.release_if_empty();
        assert!(!s.holds_memory());
        s.schedule(3, Urgency::New);
        assert_eq!(s.next_turn(), Some(3), "served again after a release");
    }

    #[test]
    fn stale_entries_stay_bounded_under_repeated_upgrades() {
        let mut s = Scheduler::new();
        s.schedule(0u64, Urgency::New);
        for _ in 0..10_000 {
            s.schedule(1, Urgency::New);
            s.schedule(1, Urgency::Resend);
            assert_eq!(s.next_turn(), Some(1));
        }
        assert!(s.entries() <= 2 * s.len() + 9, "{} entries", s.entries());
        assert_eq!(s.next_turn(), Some(0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Schedule(u8, bool),
        Next,
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..8, any::<bool>()).prop_map(|(k, r)| Op::Schedule(k, r)),
            Just(Op::Next),
            (0u8..8).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Against a plain model (two ordered lists): every scheduled
        /// sender is served exactly once per turn, resends first, in
        /// scheduling order, and removed ones never.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec(op(), 0..400)) {
            let mut s = Scheduler::new();
            let mut resend: Vec<u8> = Vec::new();
            let mut new: Vec<u8> = Vec::new();
            for op in ops {
                match op {
                    Op::Schedule(k, r) => {
                        s.schedule(k, if r { Urgency::Resend } else { Urgency::New });
                        let waiting_resend = resend.contains(&k);
                        if r && !waiting_resend {
                            new.retain(|&x| x != k);
                            resend.push(k);
                        } else if !r && !waiting_resend && !new.contains(&k) {
                            new.push(k);
                        }
                    }
                    Op::Next => {
                        let want = if resend.is_empty() {
                            (!new.is_empty()).then(|| new.remove(0))
                        } else {
                            Some(resend.remove(0))
                        };
                        prop_assert_eq!(s.next_turn(), want);
                    }
                    Op::Remove(k) => {
                        s.remove(k);
                        resend.retain(|&x| x != k);
                        new.retain(|&x| x != k);
                    }
                }
                prop_assert_eq!(s.len(), resend.len() + new.len());
                prop_assert!(s.entries() <= 2 * s.len() + 9);
            }
        }
    }
}
