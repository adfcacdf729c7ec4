//! [`StreamTable`]: what the application side keeps of a connection's
//! streams ([`StreamWaiters`]), by stream.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::delivery::StreamDelivery;
use super::hand_off::Writes;
use super::wakers::Wakers;
use crate::proto::StreamId;

/// What the application side keeps of one stream while it holds a half
/// of it: who waits on it (its reader and its writer), and the peer's stop
/// code once it asked to stop, which the protocol forgets once the reset
/// that answers it is acknowledged.
#[derive(Debug, Default)]
pub(crate) struct StreamWaiters {
    pub(crate) read: Wakers,
    pub(crate) write: Wakers,
    pub(crate) stopped: Option<u64>,
    /// Halves the application holds (one or two).
    pub(super) halves: u8,
    /// What the lock's side keeps of the writes, while this side writes.
    pub(super) writes: Option<Box<Writes>>,
    /// What the driver moved for the reader, once it took the lock.
    pub(super) delivery: Option<Arc<StreamDelivery>>,
}

/// The [`StreamWaiters`] of a connection's streams: a map made at the
/// first stream a handle holds or waits on, and given back once the last
/// record goes (8 bytes a connection without streams, not 48).
#[derive(Debug, Default)]
#[expect(
    clippy::box_collection,
    reason = "the box is the point: 8 bytes inline rather than 48 while unused"
)]
pub(crate) struct StreamTable(Option<Box<HashMap<StreamId, StreamWaiters>>>);

impl StreamTable {
    pub(crate) fn get(&self, id: &StreamId) -> Option<&StreamWaiters> {
        self.0.as_ref()?.get(id)
    }

    pub(crate) fn get_mut(&mut self, id: &StreamId) -> Option<&mut StreamWaiters> {
        self.0.as_mut()?.get_mut(id)
    }

    /// The record of stream `id`, making the map if it is the first.
    pub(crate) fn entry(&mut self, id: StreamId) -> Entry<'_, StreamId, StreamWaiters> {
        self.0.get_or_insert_with(Box::default).entry(id)
    }

    /// Drops the record of stream `id`, and the map with the last one.
    pub(crate) fn remove(&mut self, id: &StreamId) -> Option<StreamWaiters> {
        let map = self.0.as_mut()?;
        let removed = map.remove(id);
        if map.is_empty() {
            self.0 = None;
        }
        removed
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &StreamWaiters> {
        self.0.iter().flat_map(|map| map.values())
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut StreamWaiters> {
        self.0.iter_mut().flat_map(|map| map.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_is_made_by_the_first_record_and_goes_with_the_last() {
        let mut table = StreamTable::default();
        let (a, b) = (StreamId(0), StreamId(4));
        assert!(table.get(&a).is_none() && table.remove(&a).is_none());
        table.entry(a).or_default().halves = 1;
        table.entry(b).or_default().halves = 2;
        assert!(table.0.is_some());
        assert_eq!(table.values_mut().count(), 2);
        assert_eq!(table.remove(&a).map(|w| w.halves), Some(1));
        assert!(table.0.is_some(), "one record left");
        assert_eq!(table.get_mut(&b).map(|w| w.halves), Some(2));
        assert_eq!(table.remove(&b).map(|w| w.halves), Some(2));
        assert!(table.0.is_none(), "given back with the last record");
        assert_eq!(table.values_mut().count(), 0);
    }
}
