//! [`PreciseTimer`]: a one-shot `timerfd` on `CLOCK_MONOTONIC`, registered
//! with tokio's reactor.
//!
//! tokio's own timer counts whole milliseconds and parks the thread with a
//! millisecond timeout: a wait of 30 µs lasts about a millisecond. A
//! `timerfd` is armed to the nanosecond and wakes the reactor like a
//! readable socket, so a driver that parks on its sockets and this timer
//! wakes at the instant it asked for.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A one-shot timer to the nanosecond: armed for a time from now, ready
/// once that time has passed, then disarmed until armed again.
#[derive(Debug)]
pub struct PreciseTimer(AsyncFd<Fd>);

/// What the reactor registers: the descriptor, by its number.
#[derive(Debug)]
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl PreciseTimer {
    /// A disarmed timer. Must be called inside a tokio runtime with I/O
    /// enabled; fails where the kernel refuses a `timerfd`.
    pub fn new() -> io::Result<Self> {
        let flags = TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC;
        let fd = Fd(TimerFd::new(ClockId::CLOCK_MONOTONIC, flags)?);
        // SAFETY: the descriptor is owned by `fd`, which the `AsyncFd`
        // owns from here on and never replaces: it stays open, and the
        // same, until the `AsyncFd` is dropped.
        let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
        Ok(Self(registered?))
    }

    /// Arms it to expire `wait` from now, replacing any earlier arming
    /// (`None`: disarms it). A zero wait expires at once.
    pub fn set(&self, wait: Option<Duration>) -> io::Result<()> {
        let timer = &self.0.get_ref().0;
        match wait {
            // A zero time would disarm a timerfd: one nanosecond instead.
            Some(wait) => {
                let wait = TimeSpec::from_duration(wait.max(Duration::from_nanos(1)));
                timer.set(Expiration::OneShot(wait), TimerSetTimeFlags::empty())?;
            }
            None => timer.unset()?,
        }
        Ok(())
    }

    /// How long until it expires, as the kernel reads it back
    /// (`timerfd_gettime`); `None` while it is disarmed.
    pub fn remaining(&self) -> io::Result<Option<Duration>> {
        Ok(match self.0.get_ref().0.get()? {
            Some(Expiration::OneShot(left)) => Some(left.into()),
            // Never armed to repeat.
            Some(_) | None => None,
        })
    }

    /// Ready once it expired; reading its count makes it unready until it
    /// is armed and expires again. Arming clears the count too, so a
    /// readiness seen before an arming is stale: the read finds nothing
    /// and it waits on.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            if let Ok(read) = guard.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
                return Poll::Ready(read);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Waker;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    fn is_ready(timer: &PreciseTimer) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        timer.poll_expired(&mut cx).is_ready()
    }

    #[test]
    fn it_is_armed_to_the_time_asked_re_armed_and_disarmed() {
        runtime().block_on(async {
            let timer = PreciseTimer::new().expect("a timerfd");
            assert_eq!(timer.remaining().expect("gettime"), None);

            let far = Duration::from_secs(60);
            timer.set(Some(far)).expect("armed");
            let left = timer.remaining().expect("gettime").expect("armed");
            assert!(
                left <= far && left > far - Duration::from_secs(10),
                "{left:?}"
            );

            // Re-armed nearer, to the microsecond: the kernel keeps it.
            let nearer = Duration::from_secs(30) + Duration::from_micros(250);
            timer.set(Some(nearer)).expect("re-armed");
            let left = timer.remaining().expect("gettime").expect("armed");
            assert!(
                left <= nearer && left > nearer - Duration::from_secs(10),
                "{left:?}"
            );
            assert!(!is_ready(&timer));

            timer.set(None).expect("disarmed");
            assert_eq!(timer.remaining().expect("gettime"), None);
        });
    }

    #[test]
    fn it_fires_once_per_arming_and_a_re_arming_clears_a_stale_expiry() {
        runtime().block_on(async {
            let timer = PreciseTimer::new().expect("a timerfd");
            timer.set(Some(Duration::ZERO)).expect("armed");
            poll_fn(|cx| timer.poll_expired(cx)).await.expect("fired");
            assert!(!is_ready(&timer), "its expiry was read");
            assert_eq!(timer.remaining().expect("gettime"), None);

            // Expired, then re-armed far off before anyone looked: the
            // expiry is gone with the re-arming.
            timer.set(Some(Duration::ZERO)).expect("armed");
            while timer.remaining().expect("gettime").is_some() {
                std::thread::yield_now();
            }
            timer.set(Some(Duration::from_secs(60))).expect("re-armed");
            assert!(!is_ready(&timer), "a stale expiry");

            timer.set(Some(Duration::ZERO)).expect("moved to now");
            poll_fn(|cx| timer.poll_expired(cx)).await.expect("fired");
        });
    }
}
