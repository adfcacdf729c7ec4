//! [`Accepts`]: the connections peers opened, queued by the driver for
//! `Endpoint::accept`, which takes them without the endpoint's lock.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use super::{Peer, SlotId, Wakers};

/// Connections peers opened, not yet taken by `accept`, shared by the
/// endpoint's state (the driver's side) and its handles. Its lock is held
/// only to push or pop one.
#[derive(Debug, Default)]
pub(crate) struct Accepts(Mutex<Queue>);

#[derive(Debug, Default)]
struct Queue {
    /// Each connection, with who is at the other end as it was queued.
    ready: VecDeque<(SlotId, Peer)>,
    /// The endpoint refuses new connections: `accept` returns `None`.
    closed: bool,
    waiters: Wakers,
}

impl Accepts {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next connection; `None` once the endpoint refuses connections;
    /// else `Pending`, the task of `cx` woken when one comes.
    pub(crate) fn poll_next(&self, cx: &Context<'_>) -> Poll<Option<(SlotId, Peer)>> {
        let mut queue = self.lock();
        if let Some(next) = queue.ready.pop_front() {
            return Poll::Ready(Some(next));
        }
        if queue.closed {
            return Poll::Ready(None);
        }
        queue.waiters.register(cx);
        Poll::Pending
    }

    /// Queues the connection of `id`, from `peer`, and wakes a waiter.
    pub(super) fn push(&self, id: SlotId, peer: Peer) {
        let mut queue = self.lock();
        queue.ready.push_back((id, peer));
        queue.waiters.wake_all();
    }

    /// No more connections: the waiters learn it, and the connections
    /// still queued are given back (nobody will take them).
    pub(super) fn close(&self) -> Vec<SlotId> {
        let mut queue = self.lock();
        queue.closed = true;
        queue.waiters.wake_all();
        queue.ready.drain(..).map(|(id, _)| id).collect()
    }

    /// Wakes the waiters without a connection: the endpoint stopped.
    pub(super) fn wake(&self) {
        self.lock().waiters.wake_all();
    }
}
