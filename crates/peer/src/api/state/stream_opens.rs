//! [`StreamOpens`]: the stream ids `open_bi` and `open_uni` allot without
//! the endpoint's lock.
//!
//! Ids, not streams opened ahead: tern-proto announces a two-way stream's
//! receive window as it opens it, so a stream opened ahead of the
//! application would show on the wire (and in the peer's accept queue)
//! before anyone asked for it, and would hold one of the peer's stream
//! credits while nobody took it. An id costs nothing until it is used.
//! The lock's side publishes how many streams of each kind the protocol
//! allows in all (tern-proto's `stream_limit`): when a handle first opens
//! under the lock, when the peer raises its limit (`StreamsAvailable`),
//! and when the connection stops taking data (it closes). A handle takes
//! the next id below that limit with one atomic step and hands off the
//! command that opens the stream in the protocol (with any allotted
//! before it, in order: `open_stream_through`) and holds its halves;
//! hand-offs run before whatever takes the lock next, so that command
//! runs before any later call on the stream, all of which take the lock
//! or hand off too. An opener that finds no id left takes the lock, reads
//! the limit afresh, and waits there for the peer's credit as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Credit, EndpointState, Slot, SlotId};
use crate::proto::{Connection as ProtoConnection, Direction, Side, StreamId};

/// The ids of the streams one connection's handles open, shared by its
/// slot (the lock's side) and its handles. Made on the first `open_bi` or
/// `open_uni`, under the endpoint's lock.
#[derive(Debug)]
pub(crate) struct StreamOpens {
    /// This side of the connection: the opener its ids name.
    side: Side,
    two_way: Allotment,
    one_way: Allotment,
}

/// The ids of one kind of stream given out so far, and how many may be.
#[derive(Debug, Default)]
struct Allotment {
    /// Ids given out: the next one's index.
    allotted: AtomicU64,
    /// How many the protocol allowed in all at the lock's side's last
    /// look (what were given out included).
    limit: AtomicU64,
}

impl Allotment {
    /// The next id's index, if the limit allows one more.
    fn next(&self) -> Option<u64> {
        self.allotted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |allotted| {
                (allotted < self.limit.load(Ordering::Acquire)).then_some(allotted + 1)
            })
            .ok()
    }
}

impl StreamOpens {
    fn new(side: Side) -> Self {
        Self {
            side,
            two_way: Allotment::default(),
            one_way: Allotment::default(),
        }
    }

    /// The next stream of `direction` (`Bi` or `OneWay`) this side
    /// opens, without the endpoint's lock; `None` if the protocol allowed
    /// no more at the lock's side's last look.
    pub(crate) fn next(&self, direction: Direction) -> Option<StreamId> {
        let allotment = match direction {
            Direction::Bi => &self.two_way,
            _ => &self.one_way,
        };
        let index = allotment.next()?;
        Some(StreamId::new(self.side, direction, index))
    }

    /// Publishes the protocol's limits (under the endpoint's lock): none
    /// once the `connection` is gone.
    fn refresh(&self, connection: Option<&ProtoConnection>) {
        for (direction, allotment) in [
            (Direction::Bi, &self.two_way),
            (Direction::OneWay, &self.one_way),
        ] {
            let limit = connection.map_or(0, |c| c.stream_limit(direction));
            allotment.limit.store(limit, Ordering::Release);
        }
    }
}

impl Slot {
    /// The ids of the streams the `connection`'s handles open, made now if
    /// they were not (under the endpoint's lock), with the protocol's
    /// limits as they are now.
    pub(crate) fn stream_opens(&mut self, connection: &ProtoConnection) -> Arc<StreamOpens> {
        let opens = self
            .stream_opens
            .get_or_insert_with(|| Arc::new(StreamOpens::new(connection.side())));
        opens.refresh(Some(connection));
        Arc::clone(opens)
    }

    /// Publishes the protocol's stream limits for the handles' opens, if
    /// one opened a stream: the peer raised them, or the `connection`
    /// (`None`: freed) takes no more data.
    pub(super) fn refresh_opens(&self, connection: Option<&ProtoConnection>) {
        if let Some(opens) = &self.stream_opens {
            opens.refresh(connection);
        }
    }

    /// The application opened stream `id`, allotted by [`StreamOpens`]:
    /// it is opened in the protocol (with the ids before it, in order),
    /// and its halves are held, the sending one handing off within
    /// `credit`. On a connection that takes no more data it stays
    /// unopened: its halves' calls learn why.
    pub(crate) fn open_allotted(
        &mut self,
        mut connection: Option<&mut ProtoConnection>,
        id: StreamId,
        credit: Arc<Credit>,
    ) {
        if let Some(connection) = connection.as_deref_mut() {
            connection.open_stream_through(id);
        }
        if id.direction() == Direction::Bi {
            self.hold_stream(id);
        }
        self.hold_send_stream(connection.as_deref(), id, credit);
    }
}

impl EndpointState {
    /// Runs the open of stream `id` on the connection of `slot`, which a
    /// handle allotted and handed off (see [`Slot::open_allotted`]).
    pub(crate) fn open_handed_off(&mut self, slot: SlotId, id: StreamId, credit: Arc<Credit>) {
        if let Some((slot, connection)) = self.connection(slot) {
            slot.open_allotted(connection, id, credit);
        }
    }
}
