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
    /// and sent what asks for an answer `expected` then, `opened` when what
    /// it sent opened an exchange ([`Node::take_exchange_opened`]).
    ///
    /// Only an exchange opened is woken for early: a connection that sends
    /// with packets already in flight (a bulk transfer) hears from its peer
    /// anyway, and a wake-up ahead of those acknowledgements would only
    /// read them in smaller batches. Datagrams arriving before a further
    /// answer's window started cancel it too: the peer is talking, so the
    /// driver wakes for that. Only a further answer not already waited for
    /// sets one: one window per answer waited for, however many turns sent
    /// before it.
    ///
    /// [`Node::take_exchange_opened`]: crate::proto::Node::take_exchange_opened
    pub(super) fn after_turn(
        &mut self,
        now: Instant,
        arrived: bool,
        expected: Option<Instant>,
        opened: Option<Instant>,
    ) {
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
        if expected.is_some_and(|at| at <= now + self.window) {
            self.poll_until(now + self.window);
            self.early = false;
        } else if self.due.is_none() {
            self.due = opened;
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
        timers: [&mut Timer; 2],
        spin: Option<Spin>,
    ) -> io::Result<Woken> {
        let Self {
            socket,
            recv,
            arena,
            ..
        } = self;
        let [timer, answer_timer] = timers;
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
            if let Poll::Ready(result) = answer_timer.poll_expired(cx) {
                return Poll::Ready(result.map(|()| Woken::Timer));
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
        answer.after_turn(t0, false, Some(t0 + us(40)), Some(t0 + us(40)));
        assert_eq!(answer.until(), Some(t0 + WINDOW));
        assert_eq!(answer.wake_at(), None);
        // A later turn that sent again renews it, whether what it sent
        // opened an exchange or followed others in flight.
        answer.after_turn(t0 + us(30), true, Some(t0 + us(70)), None);
        assert_eq!(answer.until(), Some(t0 + us(30) + WINDOW));
    }

    #[test]
    fn an_exchange_opened_is_polled_for_from_a_window_before_its_answer_until_it_comes() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        let due = t0 + us(2_000);
        answer.after_turn(t0, false, Some(due), Some(due));
        assert_eq!(
            (answer.wake_at(), answer.until()),
            (Some(due - WINDOW), None)
        );
        // A turn that sent more before it (a paced message's next
        // datagrams) keeps the first answer.
        answer.after_turn(t0 + us(20), false, Some(due + us(20)), None);
        assert_eq!(answer.wake_at(), Some(due - WINDOW));
        // A turn before the wake-up (the timer of a pacer, say) starts
        // nothing; the wake-up's turn starts the window.
        answer.after_turn(t0 + us(1_000), false, None, None);
        assert_eq!(answer.until(), None);
        answer.after_turn(due - WINDOW, false, None, None);
        assert_eq!(
            (answer.wake_at(), answer.until()),
            (None, Some(due + us(50)))
        );
        // The answer ends it; the next request sent sets the next one.
        let next = due + us(1_990);
        answer.after_turn(due - us(10), true, Some(next), Some(next));
        assert_eq!(answer.until(), None);
        assert_eq!(answer.wake_at(), Some(next - WINDOW));
    }

    #[test]
    fn an_answer_ends_only_the_polling_for_a_further_answer() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        answer.after_turn(t0, false, Some(t0 + us(40)), Some(t0 + us(40)));
        answer.after_turn(t0 + us(40), true, None, None);
        assert_eq!(answer.until(), Some(t0 + WINDOW));
    }

    #[test]
    fn sending_with_packets_in_flight_never_wakes_early_as_a_transfer_does() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        // Each turn reads acknowledgements and sends more behind the
        // packets still in flight: an answer is expected, no exchange
        // opened, and no wake-up is ever set.
        for turn in 0..10 {
            let now = t0 + us(turn * 500);
            answer.after_turn(now, turn > 0, Some(now + us(2_000)), None);
            assert_eq!((answer.wake_at(), answer.until()), (None, None));
        }
    }

    #[test]
    fn datagrams_before_the_window_cancel_it() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(WINDOW);
        let due = t0 + us(2_000);
        answer.after_turn(t0, false, Some(due), Some(due));
        assert_eq!(answer.wake_at(), Some(due - WINDOW));
        // The peer talks first (it sent on its own): the driver wakes for
        // that, and nothing is left to wake early for.
        answer.after_turn(t0 + us(500), true, None, None);
        assert_eq!((answer.wake_at(), answer.until()), (None, None));
    }

    #[test]
    fn a_zero_window_never_polls() {
        let t0 = Instant::now();
        let mut answer = AnswerWait::new(Duration::ZERO);
        answer.after_turn(t0, false, Some(t0), Some(t0));
        let later = t0 + us(2_000);
        answer.after_turn(t0, false, Some(later), Some(later));
        assert_eq!((answer.wake_at(), answer.until()), (None, None));
    }
}
