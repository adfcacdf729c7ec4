//! The receiver index: each peer picks the 32-bit index the other side puts
//! in every packet sent to it (as WireGuard does), so an endpoint finds the
//! connection from the packet itself — a peer whose address changed (NAT
//! rebinding, roaming) is still found, and the source address is never
//! trusted for it.
//!
//! An index is the connection's slot in a table in its low 20 bits (up to
//! 1 048 576 connections) and a random tag above them: a lookup is an array
//! access and one comparison, with no hashing, and an index forged, guessed or left over
//! from a closed connection finds nothing unless its tag matches (one chance
//! in 4 095; the packet must then still authenticate under that
//! connection's keys, which it cannot). A slot's next tag always differs
//! from its last, so the packets of a connection just closed never reach
//! the one that takes its slot.

use std::collections::VecDeque;

use rand_core::RngCore;

/// Bits of an index that name the slot: up to 2²⁰ (1 048 576) connections
/// per endpoint.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Tags are 1..=4095: index 0 is never handed out.
const TAG_MAX: u32 = u32::MAX >> SLOT_BITS;

/// The table is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no receiver index left: the endpoint holds its maximum of {0} connections")]
pub struct IndexFull(pub usize);

#[derive(Debug)]
struct Slot<T> {
    /// The index last handed out for this slot (0 before the first).
    index: u32,
    /// The owner's marks on the slot (see [`ReceiverIndex::mark`]), kept
    /// when the slot is handed out again; they fill what would be padding
    /// beside `index`.
    marks: u8,
    value: Option<T>,
}

/// An index picked by [`ReceiverIndex::vacant`], not yet in use.
#[derive(Debug)]
pub struct VacantIndex<'a, T> {
    table: &'a mut ReceiverIndex<T>,
    index: u32,
}

impl<T> VacantIndex<'_, T> {
    /// The index the value will have.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Stores `value` under the index and returns it.
    pub fn insert(self, value: T) -> u32 {
        let table = self.table;
        let slot = self.index & SLOT_MASK;
        if table.free.front() == Some(&slot) {
            table.free.pop_front();
        } else {
            table.slots.push(Slot {
                index: 0,
                marks: 0,
                value: None,
            });
        }
        let entry = &mut table.slots[slot as usize];
        entry.index = self.index;
        entry.value = Some(value);
        table.len += 1;
        self.index
    }
}

/// Connections (or anything) by receiver index.
#[derive(Debug)]
pub struct ReceiverIndex<T> {
    slots: Vec<Slot<T>>,
    /// Vacated slots, oldest first: reusing the longest-free slot gives a
    /// closed connection's stragglers the most time to drain.
    free: VecDeque<u32>,
    capacity: usize,
    len: usize,
}

impl<T> ReceiverIndex<T> {
    /// A table for up to `capacity` entries (at most 2²⁰); memory grows
    /// with what is held, not with the capacity.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: Vec::new(),
            free: VecDeque::new(),
            capacity: capacity.min(1 << SLOT_BITS),
            len: 0,
        }
    }

    /// Stores `value` under a fresh index, its tag drawn from `rng`.
    pub fn insert(&mut self, value: T, rng: &mut impl RngCore) -> Result<u32, IndexFull> {
        Ok(self.vacant(rng)?.insert(value))
    }

    /// Picks a fresh index without storing anything yet, for a value that
    /// must know its own index to be built (a connection's handshake reply
    /// carries it); nothing changes until [`VacantIndex::insert`].
    pub fn vacant(&mut self, rng: &mut impl RngCore) -> Result<VacantIndex<'_, T>, IndexFull> {
        let slot = match self.free.front() {
            Some(&slot) => slot,
            None if self.slots.len() < self.capacity => self.slots.len() as u32,
            None => return Err(IndexFull(self.capacity)),
        };
        let old_tag = self
            .slots
            .get(slot as usize)
            .map_or(0, |entry| entry.index >> SLOT_BITS);
        let tag = loop {
            let tag = rng.next_u32() % TAG_MAX + 1;
            if tag != old_tag {
                break tag;
            }
        };
        Ok(VacantIndex {
            table: self,
            index: (tag << SLOT_BITS) | slot,
        })
    }

    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        self.slots
            .get((index & SLOT_MASK) as usize)
            .filter(|s| s.index == index && s.value.is_some())
    }

    /// The entry under `index`, if `index` is live.
    pub fn get(&self, index: u32) -> Option<&T> {
        self.slot(index)?.value.as_ref()
    }

    /// The entry under `index`, mutably, if `index` is live.
    pub fn get_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slot_of_mut(index)?.value.as_mut()
    }

    /// Removes and returns the entry under `index`; the index is dead from
    /// now on.
    pub fn remove(&mut self, index: u32) -> Option<T> {
        let slot = self.slot_of_mut(index)?;
        let value = slot.value.take()?;
        self.free.push_back(index & SLOT_MASK);
        self.len -= 1;
        Some(value)
    }

    /// Sets the owner's marks `marks` (bits) on `index`'s slot; returns
    /// those of them that were not set. An owner that keeps lists of work
    /// to do for its entries marks an index when it puts it on a list and
    /// unmarks it when it takes it off, so each slot is on a list once: the
    /// mark is an array access where a set beside the table costs a hash
    /// and a probe, and every datagram received and sent checks one.
    ///
    /// The marks are the slot's, not the index's: an entry removed while
    /// on a list leaves its slot marked, and a value the slot takes then
    /// is already on that list, through the earlier index
    /// ([`occupant_mut`](Self::occupant_mut) finds it). A mark that went
    /// with the index would list the slot twice once it is handed out
    /// again, even under the same index (its tag differs from the last
    /// one only). An index whose slot has moved on to another is marked
    /// with nothing (this returns 0): what it named is gone.
    pub fn mark(&mut self, index: u32, marks: u8) -> u8 {
        match self.slot_of_mut(index) {
            Some(slot) => {
                let fresh = marks & !slot.marks;
                slot.marks |= marks;
                fresh
            }
            None => 0,
        }
    }

    /// Clears the marks `marks` of the slot a list's entry `index` stands
    /// for, taken off that list (see [`mark`](Self::mark)): whatever index
    /// the slot holds now.
    pub fn unmark(&mut self, index: u32, marks: u8) {
        if let Some(slot) = self.slots.get_mut((index & SLOT_MASK) as usize) {
            slot.marks &= !marks;
        }
    }

    /// What a list's entry `index` stands for: the index and the value its
    /// slot holds now, if it holds one (see [`mark`](Self::mark)).
    pub fn occupant_mut(&mut self, index: u32) -> Option<(u32, &mut T)> {
        let slot = self.slots.get_mut((index & SLOT_MASK) as usize)?;
        Some((slot.index, slot.value.as_mut()?))
    }

    /// The slot `index` was handed out for, live or not, while it is the
    /// slot's last index.
    fn slot_of_mut(&mut self, index: u32) -> Option<&mut Slot<T>> {
        self.slots
            .get_mut((index & SLOT_MASK) as usize)
            .filter(|s| s.index == index)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every live (index, entry).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> + '_ {
        self.slots
            .iter()
            .filter_map(|s| s.value.as_ref().map(|v| (s.index, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    use crate::test_rng::SplitMix;

    #[test]
    fn a_closed_connections_index_never_reaches_the_next_one_in_its_slot() {
        let mut table = ReceiverIndex::with_capacity(1);
        let mut rng = SplitMix(7);
        for round in 0..10_000u32 {
            let old = table.insert(round, &mut rng).expect("room");
            assert_ne!(old, 0);
            assert_eq!(table.remove(old), Some(round));
            let new = table.insert(round + 1, &mut rng).expect("room");
            assert_ne!(new, old);
            assert_eq!(table.get(old), None);
            assert_eq!(table.remove(new), Some(round + 1));
        }
    }

    #[test]
    fn marks_set_together_say_which_were_not_set() {
        let mut table = ReceiverIndex::with_capacity(4);
        let index = table.insert((), &mut SplitMix(7)).expect("room");
        assert_eq!(table.mark(index, 0b01), 0b01);
        assert_eq!(table.mark(index, 0b11), 0b10);
        assert_eq!(table.mark(index, 0b11), 0);
        table.unmark(index, 0b01);
        assert_eq!(table.mark(index, 0b11), 0b01);
        // A removed index's slot keeps its marks.
        table.remove(index);
        assert_eq!(table.mark(index, 0b11), 0);
    }

    #[test]
    fn a_slot_handed_out_again_is_on_the_lists_its_last_index_was_on() {
        let mut table = ReceiverIndex::with_capacity(1);
        let mut rng = SplitMix(3);
        let old = table.insert("old", &mut rng).expect("room");
        assert_eq!(table.mark(old, 0b01), 0b01);
        table.remove(old);
        let new = table.insert("new", &mut rng).expect("room");
        // Listed already, through the old index, which now stands for it.
        assert_eq!(table.mark(new, 0b11), 0b10);
        assert_eq!(table.occupant_mut(old), Some((new, &mut "new")));
        // The old index names nothing to list any more.
        assert_eq!(table.mark(old, 0b100), 0);
        table.unmark(old, 0b11);
        assert_eq!(table.mark(new, 0b11), 0b11);
        table.remove(new);
        assert_eq!(table.occupant_mut(new), None);
    }

    #[test]
    fn a_full_table_refuses_and_frees_a_slot_on_removal() {
        let mut table = ReceiverIndex::with_capacity(2);
        let mut rng = SplitMix(1);
        let a = table.insert("a", &mut rng).expect("room");
        table.insert("b", &mut rng).expect("room");
        assert_eq!(table.insert("c", &mut rng), Err(IndexFull(2)));
        table.remove(a);
        assert!(table.insert("c", &mut rng).is_ok());
        assert_eq!(table.len(), 2);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert,
        Remove(usize),
        Probe(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Insert),
            2 => any::<usize>().prop_map(Op::Remove),
            2 => any::<u32>().prop_map(Op::Probe),
        ]
    }

    #[derive(Debug, Clone)]
    enum ListOp {
        Insert,
        Remove(usize),
        /// Put an index handed out before (live or not) on the list.
        Touch(usize),
        /// Take everything off the list.
        Drain,
    }

    fn list_op() -> impl Strategy<Value = ListOp> {
        prop_oneof![
            3 => Just(ListOp::Insert),
            2 => any::<usize>().prop_map(ListOp::Remove),
            4 => any::<usize>().prop_map(ListOp::Touch),
            1 => Just(ListOp::Drain),
        ]
    }

    proptest! {
        /// A list kept with a mark, as the endpoint keeps its lists of
        /// connections to look at: a live index is on it once at most
        /// (itself, or an earlier index of its slot standing for it), and
        /// on it after every touch until the list is drained, whatever was
        /// removed and handed out in between, under new indices or the
        /// same ones again.
        #[test]
        fn a_list_kept_with_a_mark_holds_each_live_index_once(
            seed in any::<u64>(),
            ops in proptest::collection::vec(list_op(), 0..400),
        ) {
            const ON_LIST: u8 = 1;
            let mut table = ReceiverIndex::with_capacity(8);
            let mut rng = SplitMix(seed);
            let mut issued: Vec<u32> = Vec::new();
            let mut list: Vec<u32> = Vec::new();
            for op in ops {
                match op {
                    ListOp::Insert => {
                        if let Ok(index) = table.insert((), &mut rng) {
                            issued.push(index);
                        }
                    }
                    ListOp::Remove(pick) if !issued.is_empty() => {
                        table.remove(issued[pick % issued.len()]);
                    }
                    ListOp::Touch(pick) if !issued.is_empty() => {
                        let index = issued[pick % issued.len()];
                        if table.mark(index, ON_LIST) != 0 {
                            list.push(index);
                        }
                        if table.get(index).is_some() {
                            let listed = list
                                .iter()
                                .any(|&e| table.occupant_mut(e).map(|(i, _)| i) == Some(index));
                            prop_assert!(listed);
                        }
                    }
                    ListOp::Drain => {
                        for index in list.drain(..) {
                            table.unmark(index, ON_LIST);
                        }
                    }
                    ListOp::Remove(_) | ListOp::Touch(_) => {}
                }
                let live: Vec<u32> = table.iter().map(|(index, _)| index).collect();
                for index in live {
                    let entries = list
                        .iter()
                        .filter(|&&e| table.occupant_mut(e).map(|(i, _)| i) == Some(index))
                        .count();
                    prop_assert!(entries <= 1);
                }
            }
        }

        /// Against a map model: live indices find their entry, dead and
        /// forged ones find nothing, no index is 0 or handed out twice
        /// while live.
        #[test]
        fn behaves_like_a_map_whose_keys_are_never_guessable_twice(
            seed in any::<u64>(),
            ops in proptest::collection::vec(op(), 0..400),
        ) {
            let mut table = ReceiverIndex::with_capacity(16);
            let mut model: HashMap<u32, u64> = HashMap::new();
            let mut rng = SplitMix(seed);
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert => match table.insert(n as u64, &mut rng) {
                        Ok(index) => {
                            prop_assert_ne!(index, 0);
                            prop_assert!(model.insert(index, n as u64).is_none());
                        }
                        Err(IndexFull(cap)) => prop_assert_eq!(model.len(), cap),
                    },
                    Op::Remove(pick) => {
                        let keys: Vec<u32> = model.keys().copied().collect();
                        if !keys.is_empty() {
                            let index = keys[pick % keys.len()];
                            prop_assert_eq!(table.remove(index), model.remove(&index));
                            prop_assert_eq!(table.remove(index), None);
                        }
                    }
                    Op::Probe(index) => {
                        prop_assert_eq!(table.get(index), model.get(&index));
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                for (index, value) in &model {
                    prop_assert_eq!(table.get(*index), Some(value));
                }
            }
        }
    }
}
