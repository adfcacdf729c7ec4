//! How the driver waits between turns: parked until the socket, its timer
//! or a handle wakes it, or polling instead while a busy poll or an
//! expected answer lasts.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use super::Driver;
use super::timer::Timer;
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

/// Polling for an expected answer instead of parking
/// ([`DriverConfig::answer_wait`](crate::driver::DriverConfig::answer_wait)),
/// either from the turn that sent, for one window, when the answer is due
/// within it; or, when it is due further off, from one window before it
/// is due until half a window after, the driver's timer waking it for
/// that: the thread's wake-up (tens of microseconds on a virtual machine)
/// is paid before the answer comes, not after it, and the answer's
/// arrival ends the polling.
pub(super) struct AnswerWait {
    window: Duration,
    /// Until when the driver polls.
    until: Option<Instant>,
    /// A further answer the driver wakes early for.
    due: Option<Instant>,
    /// The polling is for a further answer: its arrival ends it.
    early: bool,
}

impl AnswerWait {
    /// Windows of `window` (zero: never polls for an answer).
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            until: None,
            due: None,
            early: false,
        }
    }

    /// After a turn at `now` that received datagrams or not (`arrived`)
    /// and sent what asks for an answer `expected` then.
    ///
    /// Datagrams arriving before a further answer's window started cancel
    /// it: the peer is talking (a bulk transfer's acknowledgements, most
    /// likely), so the driver is not waiting on it and wakes for those
    /// anyway. Only a further answer not already waited for sets one: one
    /// window per answer waited for, however many turns sent before it.
    pub(super) fn after_turn(&mut self, now: Instant, arrived: bool, expected: Option<Instant>) {
        if self.window.is_zero() {
            return;
        }
        if arrived {
            self.due = None;
            if std::mem::take(&mut self.early) {
                self.until = None;
            }
        }
        if let Some(due) = self.due
            && due - self.window <= now
        {
            self.poll_until(due + self.window / 2);
            self.early = true;
            self.due = None;
        }
        match expected {
            Some(at) if at <= now + self.window => {
                self.poll_until(now + self.window);
                self.early = false;
            }
            Some(at) if self.due.is_none() => self.due = Some(at),
            _ => {}
        }
    }

    fn poll_until(&mut self, until: Instant) {
        self.until = Some(self.until.map_or(until, |u| u.max(until)));
    }

    /// When the driver's timer wakes it for a further answer.
    pub(super) fn wake_at(&self) -> Option<Instant> {
        self.due.map(|due| due - self.window)
    }

    /// Until when the driver polls for an answer.
    pub(super) fn until(&self) -> Option<Instant> {
        self.until
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
        timer: &mut Timer,
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
            // While it polls, the clock stands for the timer: armed only
            // for parking, it costs a system call per park, not per turn.
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
                    return Poll::Pending;
                }
            }
            timer.poll_expired(cx).map_ok(|()| Woken::Timer)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_micros(100);

    fn us(micros: u64) -> Duration {
        Duration::from_micros(micros)
    }

    #[test]
    fn an_answer_due_within_the_window_is_polled_for_from_the_turn_that_sent() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        answer.after_turn(t0, false, Some(t0 + us(40)));
        assert_eq!(answer.until(), Some(t0 + WINDOW));
        assert_eq!(answer.wake_at(), None);
        // A later turn that sent again renews it.
        answer.after_turn(t0 + us(30), true, Some(t0 + us(70)));
        assert_eq!(answer.until(), Some(t0 + us(30) + WINDOW));
    }

    #[test]
    fn a_further_answer_is_polled_for_from_a_window_before_it_until_it_comes() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        let due = t0 + us(2_000);
        answer.after_turn(t0, false, Some(due));
        assert_eq!(
            (answer.wake_at(), answer.until()),
            (Some(due - WINDOW), None)
        );
        // A turn that sent more before it (a paced message's next
        // datagrams) keeps the first answer.
        answer.after_turn(t0 + us(20), false, Some(due + us(20)));
        assert_eq!(answer.wake_at(), Some(due - WINDOW));
        // A turn before the wake-up (the timer of a pacer, say) starts
        // nothing; the wake-up's turn starts the window.
        answer.after_turn(t0 + us(1_000), false, None);
        assert_eq!(answer.until(), None);
        answer.after_turn(due - WINDOW, false, None);
        assert_eq!(
            (answer.wake_at(), answer.until()),
            (None, Some(due + us(50)))
        );
        // The answer ends it; the next request sent sets the next one.
        answer.after_turn(due - us(10), true, Some(due + us(1_990)));
        assert_eq!(answer.until(), None);
        assert_eq!(answer.wake_at(), Some(due + us(1_890)));
    }

    #[test]
    fn an_answer_ends_only_the_polling_for_a_further_answer() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        answer.after_turn(t0, false, Some(t0 + us(40)));
        answer.after_turn(t0 + us(40), true, None);
        assert_eq!(answer.until(), Some(t0 + WINDOW));
    }

    #[test]
    fn datagrams_before_the_window_cancel_it_as_the_bulk_of_a_transfer_does() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        answer.after_turn(t0, false, Some(t0 + us(2_000)));
        // Acknowledgements arrive, more is sent: each turn moves the
        // answer on, and no window ever starts.
        for turn in 1..=10 {
            let now = t0 + us(turn * 500);
            answer.after_turn(now, true, Some(now + us(2_000)));
            assert_eq!(answer.wake_at(), Some(now + us(2_000) - WINDOW));
            assert_eq!(answer.until(), None);
        }
        // Arrivals that sent nothing leave nothing to wait for.
        answer.after_turn(t0 + us(6_000), true, None);
        assert_eq!((answer.wake_at(), answer.until()), (None, None));
    }

    #[test]
    fn a_zero_window_never_polls() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(Duration::ZERO);
        answer.after_turn(t0, false, Some(t0));
        answer.after_turn(t0, false, Some(t0 + us(2_000)));
        assert_eq!((answer.wake_at(), answer.until()), (None, None));
    }
}
