//! Streams an application side allots ahead of the connection: it hands
//! out this side's stream ids itself, in order and within the peer's
//! limit as it last read it ([`stream_limit`](Connection::stream_limit)),
//! and opens each here when it first acts on it
//! ([`open_stream_through`](Connection::open_stream_through)). An id
//! allotted but never acted on was never opened: it shows nowhere on the
//! wire and holds none of the peer's credit. (The endpoint's driver allots
//! so that `open_bi` and `open_uni` need not wait for its lock.)

use super::Connection;
use crate::{Direction, StreamId};

impl Connection {
    /// How many of this side's application streams of `direction` (`Bi`
    /// or `OneWay`) may have been opened in all, counted from the first:
    /// the peer's limit ([`Event::StreamsAvailable`](crate::Event::StreamsAvailable)
    /// when it rises), or only those opened already once the connection
    /// takes no more data (a graceful close began, or it is over).
    /// `StreamId::new(self.side(), direction, i)` for each `i` below it
    /// may be opened with [`open_stream_through`](Self::open_stream_through).
    pub fn stream_limit(&self, direction: Direction) -> u64 {
        if self.is_open_for_data() {
            self.streams.local_limit(direction)
        } else {
            self.streams.opened(direction)
        }
    }

    /// Opens this side's streams of `id`'s kind in order up to `id`, each
    /// as [`open_stream`](Self::open_stream) or [`open_uni`](Self::open_uni)
    /// would have; whether `id` has been opened (now or before). `false`
    /// beyond the peer's limit, for an id this side does not open, and
    /// once the connection takes no more data.
    pub fn open_stream_through(&mut self, id: StreamId) -> bool {
        let may_open = self.is_open_for_data();
        self.streams.open_through(id, may_open)
    }
}
