//! The collections only a connection with streams needs: every stream's
//! two halves and the lists of streams waiting for something. Empty, they
//! are still about 300 bytes of headers, in every connection; an idle
//! connection, or one that only sends messages, never opens a stream. So
//! they are kept out of line, and allocated at the first change.

use std::collections::VecDeque;

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::stream_id::StreamId;
use super::{Incoming, Outgoing};

/// Every stream's halves, and the streams waiting for something.
#[derive(Debug)]
pub(super) struct Tables {
    // Looked up for every packet sent, received and acknowledged, so they
    // hash with FxHash: the keys cannot be chosen to collide, since the
    // streams that exist are always the first ones of each kind, up to
    // the limits this side announced.
    pub(super) outgoing: FxHashMap<StreamId, Outgoing>,
    pub(super) incoming: FxHashMap<StreamId, Incoming>,
    /// Streams whose write took less than it was given, until they get
    /// their writable event.
    pub(super) waiting: Vec<StreamId>,
    /// Bidirectional streams the peer opened that the application has not
    /// accepted yet.
    pub(super) accept_queue: VecDeque<StreamId>,
    /// One-way application streams the peer opened, not accepted yet.
    pub(super) accept_one_way_queue: VecDeque<StreamId>,
    /// Streams whose MaxStreamData is to be sent.
    pub(super) max_stream_data_due: Vec<StreamId>,
    /// Streams whose reset is to be sent (or sent again).
    pub(super) resets_due: Vec<StreamId>,
    /// Stop-sending requests to send: stream and code.
    pub(super) stops_due: Vec<(StreamId, u64)>,
    /// Streams that became readable since the last look.
    pub(super) readable: Vec<StreamId>,
    /// Streams that gained room to write, or were stopped, since the last look.
    pub(super) writable: Vec<StreamId>,
}

impl Tables {
    fn is_empty(&self) -> bool {
        self.outgoing.is_empty()
            && self.incoming.is_empty()
            && self.waiting.is_empty()
            && self.accept_queue.is_empty()
            && self.accept_one_way_queue.is_empty()
            && self.max_stream_data_due.is_empty()
            && self.resets_due.is_empty()
            && self.stops_due.is_empty()
            && self.readable.is_empty()
            && self.writable.is_empty()
    }

    const EMPTY: Self = Self {
        outgoing: FxHashMap::with_hasher(FxBuildHasher),
        incoming: FxHashMap::with_hasher(FxBuildHasher),
        waiting: Vec::new(),
        accept_queue: VecDeque::new(),
        accept_one_way_queue: VecDeque::new(),
        max_stream_data_due: Vec::new(),
        resets_due: Vec::new(),
        stops_due: Vec::new(),
        readable: Vec::new(),
        writable: Vec::new(),
    };
}

/// Room to make for more in a list or table of streams found full with
/// `len`: three times as much again, so it grows fourfold rather than
/// twofold. A peer most often opens its streams one after another, and
/// every step costs the allocator a few hundred instructions and moves
/// all that is held: a hundred streams take a list three steps, not six.
/// (An empty one gets what a first push gives it.)
pub(super) fn more_room(len: usize) -> usize {
    3 * len
}

/// Pushes `id` onto `list`, which grows by [`more_room`].
#[inline]
pub(super) fn push(list: &mut Vec<StreamId>, id: StreamId) {
    if list.len() == list.capacity() {
        list.reserve(more_room(list.len()));
    }
    list.push(id);
}

/// Pushes `id` at the back of `queue`, which grows by [`more_room`].
#[inline]
pub(super) fn push_back(queue: &mut VecDeque<StreamId>, id: StreamId) {
    if queue.len() == queue.capacity() {
        queue.reserve(more_room(queue.len()));
    }
    queue.push_back(id);
}

/// What every connection without tables reads.
static EMPTY: Tables = Tables::EMPTY;

/// [`Tables`], allocated at the first change: until then they read as empty.
#[derive(Debug, Default)]
pub(super) struct LazyTables(Option<Box<Tables>>);

impl LazyTables {
    pub(super) fn get(&self) -> &Tables {
        self.0.as_deref().unwrap_or(&EMPTY)
    }

    /// The tables to change, allocated if this is the first change.
    pub(super) fn get_mut(&mut self) -> &mut Tables {
        self.0.get_or_insert_with(|| Box::new(Tables::EMPTY))
    }

    /// Gives the tables back once they are empty: no stream left, nothing
    /// waiting in any list (a quiet connection's release).
    pub(super) fn release_if_empty(&mut self) {
        if self.0.as_deref().is_some_and(Tables::is_empty) {
            self.0 = None;
        }
    }

    /// The tables if they were ever changed: for what takes from them
    /// (which empty tables never need) on paths every connection runs.
    pub(super) fn existing(&mut self) -> Option<&mut Tables> {
        self.0.as_deref_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Streams;
    use super::super::stream_id::Side;
    use crate::config::ConnectionConfig;

    #[test]
    fn streams_allocate_their_tables_at_the_first_stream_only() {
        let mut streams = Streams::new(Side::Responder, &ConnectionConfig::default());
        // What every connection's turns run, with no stream.
        for window in [1 << 20, 1 << 10, 1 << 24] {
            streams.follow_window(window);
            streams.wake_writers();
            assert_eq!(streams.poll_readable(), None);
            assert_eq!(streams.poll_writable(), None);
            assert_eq!(streams.accept(), None);
            assert_eq!(streams.accept_one_way(), None);
            assert!(!streams.has_unread());
            assert_eq!(streams.memory(), 0);
            assert_eq!(streams.receive_memory(), streams.pages.memory());
        }
        streams.discard_received();
        assert!(streams.tables.0.is_none());
        let id = streams.open().expect("the peer allows one");
        assert!(streams.tables.get().outgoing.contains_key(&id));
        assert!(streams.tables.0.is_some());
    }
}
