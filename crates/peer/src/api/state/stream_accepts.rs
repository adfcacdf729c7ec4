//! [`StreamAccepts`]: the streams a peer opened on one connection, which
//! the driver accepts in the protocol and queues with their halves already
//! held, so that `accept_bi` and `accept_uni` take them without the
//! endpoint's lock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use super::{Credit, Slot, Wakers};
use crate::proto::{Connection as ProtoConnection, StreamId};

/// The streams the driver accepted for one connection, not yet taken,
/// shared by the connection's slot (the driver's side) and its handles.
/// Made on the first `accept_bi` or `accept_uni`, under the endpoint's
/// lock: until then the protocol keeps the streams. Its own lock is held
/// only to push or pop one.
#[derive(Debug, Default)]
pub(crate) struct StreamAccepts(Mutex<Queues>);

#[derive(Debug, Default)]
struct Queues {
    /// Each bidirectional stream, with the credit its writer hands off
    /// within.
    two_way: VecDeque<(StreamId, Arc<Credit>)>,
    one_way: VecDeque<StreamId>,
    two_way_waiters: Wakers,
    one_way_waiters: Wakers,
}

impl StreamAccepts {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next bidirectional stream; else `Pending`, the task of `cx`
    /// woken when one comes (the connection's end wakes it elsewhere).
    pub(crate) fn poll_two_way(&self, cx: &Context<'_>) -> Poll<(StreamId, Arc<Credit>)> {
        let mut queues = self.lock();
        match queues.two_way.pop_front() {
            Some(next) => Poll::Ready(next),
            None => {
                queues.two_way_waiters.register(cx);
                Poll::Pending
            }
        }
    }

    /// The next one-way stream, as [`Self::poll_two_way`].
    pub(crate) fn poll_one_way(&self, cx: &Context<'_>) -> Poll<StreamId> {
        let mut queues = self.lock();
        match queues.one_way.pop_front() {
            Some(next) => Poll::Ready(next),
            None => {
                queues.one_way_waiters.register(cx);
                Poll::Pending
            }
        }
    }
}

impl Slot {
    /// The connection's queue of accepted streams, made now if it was not
    /// (under the endpoint's lock): from now on the driver accepts the
    /// streams the peer opens, starting with those already waiting.
    pub(crate) fn stream_accepts(
        &mut self,
        connection: Option<&mut ProtoConnection>,
    ) -> Arc<StreamAccepts> {
        let accepts = Arc::clone(self.stream_accepts.get_or_insert_default());
        self.accept_streams(connection);
        accepts
    }

    /// Accepts the streams the peer opened, once a handle asked for the
    /// queue: each half is held for the application (as making it under
    /// the lock would), and the stream queued.
    pub(super) fn accept_streams(&mut self, connection: Option<&mut ProtoConnection>) {
        let (Some(accepts), Some(connection)) = (self.stream_accepts.clone(), connection) else {
            return;
        };
        let (mut two_way, mut one_way) = (Vec::new(), Vec::new());
        while let Some(id) = connection.accept_stream() {
            let credit = Arc::new(Credit::default());
            self.hold_stream(id);
            self.hold_send_stream(Some(connection), id, Arc::clone(&credit));
            two_way.push((id, credit));
        }
        while let Some(id) = connection.accept_uni() {
            self.hold_stream(id);
            one_way.push(id);
        }
        let mut queues = accepts.lock();
        if !two_way.is_empty() {
            queues.two_way.extend(two_way);
            queues.two_way_waiters.wake_all();
        }
        if !one_way.is_empty() {
            queues.one_way.extend(one_way);
            queues.one_way_waiters.wake_all();
        }
    }
}
