//! How the driver waits between turns: parked until the socket, its timer
//! or a handle wakes it, or polling instead while a busy poll or an
//! expected answer lasts.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::task::Poll;

use super::Driver;
use crate::proto::{Instant, Node};

/// A busy poll: until when, the node's deadline meanwhile, and whether
/// the thread gives its CPU away between polls (waiting for an answer) or
/// keeps it (busy polling proper, on a CPU of its own).
#[derive(Clone, Copy)]
pub(super) struct Spin {
    until: Instant,
    deadline: Option<Instant>,
    share_cpu: bool,
}

impl Spin {
    /// The poll to make at `now` instead of parking: busy polling while
    /// `busy_until` lasts (keeping the CPU), else waiting for an answer
    /// while `answer_until` lasts (giving it away); `None` to park.
    pub(super) fn at(
        now: Instant,
        busy_until: Option<Instant>,
        answer_until: Option<Instant>,
        deadline: Option<Instant>,
    ) -> Option<Self> {
        let spin = |until, share_cpu| Self {
            until,
            deadline,
            share_cpu,
        };
        match (
            busy_until.filter(|&until| until > now),
            answer_until.filter(|&until| until > now),
        ) {
            (Some(until), _) => Some(spin(until, false)),
            (None, Some(until)) => Some(spin(until, true)),
            (None, None) => None,
        }
    }
}

/// Why the driver woke.
pub(super) enum Woken {
    /// A receive batch is in the buffers.
    Received,
    /// The socket took some of the pending sends.
    Sent,
    /// The timer expired.
    Timer,
    /// A handle woke it.
    Wake,
}

impl<N: Node> Driver<N> {
    /// Sleeps until something needs the driver; while `spin` lasts, polls
    /// for it instead: the socket by a system call of its own each time
    /// (the reactor only learns of datagrams when the thread parks), the
    /// deadline by the node's clock, yielding to the runtime in between.
    pub(super) async fn wait(
        &mut self,
        mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
        mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
        timer_armed: bool,
        spin: Option<Spin>,
    ) -> io::Result<Woken> {
        let Self {
            socket,
            recv,
            arena,
            ..
        } = self;
        // The turn just taken read the socket dry: the first spin only
        // yields, so that the tasks the turn woke run before the next read.
        let mut first_spin = true;
        poll_fn(|cx| {
            if notified.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(Woken::Wake));
            }
            if !arena.is_empty()
                && let Poll::Ready(result) = arena.poll_send(socket, cx)
            {
                return Poll::Ready(result.map(|()| Woken::Sent));
            }
            if let Poll::Ready(result) = socket.poll_recv(cx, recv) {
                return Poll::Ready(result.map(|_| Woken::Received));
            }
            if timer_armed && timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(Woken::Timer));
            }
            if let Some(spin) = spin {
                let now = Instant::now();
                if now < spin.until {
                    if spin.deadline.is_some_and(|d| d <= now) {
                        return Poll::Ready(Ok(Woken::Timer));
                    }
                    if spin.share_cpu {
                        std::thread::yield_now();
                    }
                    if !std::mem::take(&mut first_spin) {
                        match socket.try_recv_now(recv) {
                            Ok(_) => return Poll::Ready(Ok(Woken::Received)),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Poll::Ready(Err(e)),
                        }
                    }
                    // Polled again after tokio's yield: once the runtime
                    // has run its other ready tasks (a `block_on` future
                    // too) and polled its reactor and timers.
                    let _ = pin!(tokio::task::yield_now()).poll(cx);
                }
            }
            Poll::Pending
        })
        .await
    }
}
