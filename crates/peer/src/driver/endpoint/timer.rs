//! [`Timer`]: wakes the driver at an instant of the node's clock.
//!
//! tokio's timer wheel counts whole milliseconds and parks the thread with
//! a millisecond timeout, so a wake-up set one window before an answer
//! would come after it. For that wake-up the driver has tern-sockio's
//! [`PreciseTimer`] on Linux (a `timerfd` the reactor waits on beside the
//! socket). The node's own deadlines (pacing, loss, ACK delay) stay on
//! tokio's sleep: woken to the microsecond at each short pacing wait, a
//! bulk sender took twice as many system calls per megabyte and moved 7 %
//! fewer bytes per CPU-second, where a millisecond's sleep lets datagrams
//! gather into fuller batches.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

#[cfg(target_os = "linux")]
use tern_sockio::PreciseTimer;

use crate::proto::Instant;

/// One of the driver's two timers: set to an [`Instant`] of the node's clock each
/// turn, armed when the driver waits on it, and re-armed then only when
/// that instant changed or it fired since.
pub(super) struct Timer {
    clock: Clock,
    /// What it is to be armed to when next waited on.
    wanted: Option<Instant>,
    /// What it is armed to; `None`: disarmed, or fired since.
    armed: Option<Instant>,
}

enum Clock {
    #[cfg(target_os = "linux")]
    Precise(PreciseTimer),
    /// tokio's sleep, to the millisecond.
    Coarse(Pin<Box<tokio::time::Sleep>>),
}

impl Timer {
    /// A precise timer where the system has one, else tokio's sleep. Must
    /// be called inside a tokio runtime with I/O and time enabled.
    pub(super) fn new() -> Self {
        #[cfg(target_os = "linux")]
        if let Ok(timer) = PreciseTimer::new() {
            return Self::with(Clock::Precise(timer));
        }
        Self::coarse()
    }

    /// tokio's sleep, whatever the system has.
    pub(super) fn coarse() -> Self {
        let sleep = tokio::time::sleep(std::time::Duration::ZERO);
        Self::with(Clock::Coarse(Box::pin(sleep)))
    }

    fn with(clock: Clock) -> Self {
        Self {
            clock,
            wanted: None,
            armed: None,
        }
    }

    /// Whether it wakes the driver at the instant asked, not rounded up to
    /// the next millisecond.
    pub(super) fn is_precise(&self) -> bool {
        !matches!(self.clock, Clock::Coarse(_))
    }

    /// Sets it to `deadline` (`None`: never), to be armed when next waited
    /// on ([`poll_expired`](Self::poll_expired)). A deadline already past
    /// fires at once.
    pub(super) fn set(&mut self, deadline: Option<Instant>) {
        self.wanted = deadline;
    }

    /// Arms it to what it was set to, unless it is armed to that already:
    /// a system call only when the deadline moved or the timer fired
    /// since.
    ///
    /// The wait is measured on the node's clock, read now, and handed to
    /// the timer's clock as a time from now: the two clocks need no
    /// mapping, and a timer that fires a hair before the node's clock
    /// reaches the deadline is armed again for the hair.
    fn arm(&mut self) -> io::Result<()> {
        let deadline = self.wanted;
        if deadline == self.armed {
            return Ok(());
        }
        let wait = deadline.map(|at| at.saturating_duration_since(Instant::now()));
        match &mut self.clock {
            #[cfg(target_os = "linux")]
            Clock::Precise(timer) => timer.set(wait)?,
            Clock::Coarse(sleep) => {
                if let Some(wait) = wait {
                    sleep.as_mut().reset(tokio::time::Instant::now() + wait);
                }
            }
        }
        self.armed = deadline;
        Ok(())
    }

    /// Arms it to what it was set to, then: ready once that instant has
    /// come, and unset then. Pending while it is unset.
    pub(super) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.arm()?;
        if self.armed.is_none() {
            return Poll::Pending;
        }
        let expired = match &mut self.clock {
            #[cfg(target_os = "linux")]
            Clock::Precise(timer) => timer.poll_expired(cx),
            Clock::Coarse(sleep) => sleep.as_mut().poll(cx).map(Ok),
        };
        if expired.is_ready() {
            self.armed = None;
            self.wanted = None;
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Waker;
    use std::time::Duration;

    use super::*;

    /// Whether the timer is ready now, without waiting (arming it to what
    /// it was set to, as any poll does).
    fn is_ready(timer: &mut Timer) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match timer.poll_expired(&mut cx) {
            Poll::Ready(result) => {
                result.expect("armed");
                true
            }
            Poll::Pending => false,
        }
    }

    /// The kernel's reading of how long the precise timer has left.
    #[cfg(target_os = "linux")]
    fn remaining(timer: &Timer) -> Option<Duration> {
        let Clock::Precise(precise) = &timer.clock else {
            panic!("a coarse timer");
        };
        precise.remaining().expect("gettime")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn on_linux_it_is_precise_and_armed_when_waited_on_if_the_deadline_moved() {
        runtime().block_on(async {
            let mut timer = Timer::new();
            assert!(timer.is_precise());
            let at = Instant::now() + Duration::from_secs(60);
            timer.set(Some(at));
            assert_eq!(remaining(&timer), None, "set, not armed before a wait");
            assert!(!is_ready(&mut timer));
            let left = remaining(&timer).expect("armed");
            assert!(left <= Duration::from_secs(60), "{left:?}");
            // Disarmed behind its back: waiting on the same deadline leaves
            // it so (no system call), a new one arms it.
            let Clock::Precise(precise) = &timer.clock else {
                unreachable!("precise above");
            };
            precise.set(None).expect("disarmed");
            timer.set(Some(at));
            assert!(!is_ready(&mut timer));
            assert_eq!(remaining(&timer), None);
            timer.set(Some(at - Duration::from_secs(30)));
            assert!(!is_ready(&mut timer));
            let now_left = remaining(&timer).expect("armed");
            assert!(now_left < left - Duration::from_secs(29), "{now_left:?}");
            timer.set(None);
            assert!(!is_ready(&mut timer));
            assert_eq!(remaining(&timer), None);
        });
    }

    /// Waits for a timer set to a deadline already past (which fires at
    /// once), then for the same deadline again after it fired.
    async fn fires_once_per_setting(timer: &mut Timer) {
        assert!(!is_ready(timer), "a timer never set never fires");
        let past = Instant::now();
        timer.set(Some(past));
        poll_fn(|cx| timer.poll_expired(cx)).await.expect("fired");
        assert!(!is_ready(timer), "fired once, then unset");
        timer.set(Some(past));
        poll_fn(|cx| timer.poll_expired(cx))
            .await
            .expect("fired again");
        timer.set(Some(Instant::now() + Duration::from_secs(60)));
        assert!(!is_ready(timer));
    }

    #[test]
    fn it_fires_once_per_setting_precise_or_coarse() {
        runtime().block_on(async {
            fires_once_per_setting(&mut Timer::new()).await;
            let mut coarse = Timer::coarse();
            assert!(!coarse.is_precise());
            fires_once_per_setting(&mut coarse).await;
        });
    }
}
