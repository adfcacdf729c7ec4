//! [`Wakers`]: the tasks that wait for one thing of a connection.

use std::task::{Context, Waker};

/// Tasks waiting for the same thing; all are woken when it happens.
///
/// A connection's slot has six of these and most are never waited on
/// (an idle connection's, none): the list lives in a box made when a task
/// first waits, and kept for the next (8 bytes each until then, not 24).
#[derive(Debug, Default)]
#[expect(
    clippy::box_collection,
    reason = "the box is the point: 8 bytes inline rather than 24 while unused"
)]
pub(crate) struct Wakers(Option<Box<Vec<Waker>>>);

impl Wakers {
    /// Remembers the task of `cx` (once, however often it polls).
    pub(crate) fn register(&mut self, cx: &Context<'_>) {
        let wakers = self.0.get_or_insert_with(Box::default);
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
    }

    /// Wakes every waiting task; whether there was one.
    pub(crate) fn wake_all(&mut self) -> bool {
        let mut any = false;
        for waker in self.0.iter_mut().flat_map(|wakers| wakers.drain(..)) {
            waker.wake();
            any = true;
        }
        any
    }
}
