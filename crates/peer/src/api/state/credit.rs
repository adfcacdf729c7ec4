//! [`Credit`]: how much the handles of a stream or a connection may hand
//! off while the driver's turn holds the endpoint's lock
//! ([`DriverHandle::hand_off`](crate::driver::DriverHandle::hand_off)).
//!
//! Both counts run from the start: `granted` is what the lock's side took
//! of the handed-off commands plus the room the protocol had when it last
//! looked (stored under the lock), `handed` what the handles reserved for
//! their commands. Whatever the commands still queued, `granted - handed`
//! is then the room left for more: handles never hand off beyond the room
//! the protocol had, and a stale grant only errs on the small side (room
//! grows between two looks, except when a call under the lock takes it,
//! which the lock's side handles: parked bytes, or a dropped datagram).

use std::sync::atomic::{AtomicU64, Ordering};

/// Room to hand off without the endpoint's lock, shared by the handles and
/// the lock's side.
#[derive(Debug, Default)]
pub(crate) struct Credit {
    /// What the lock's side took of the handed-off commands plus the room
    /// the protocol had, as last granted (0: none, take the lock).
    granted: AtomicU64,
    /// What the handles reserved in all.
    handed: AtomicU64,
}

impl Credit {
    /// Reserves room for `want` (a datagram counts 1, bytes their number):
    /// all of it, or with `partial` as much as is left; how much.
    pub(crate) fn take(&self, want: u64, partial: bool) -> u64 {
        let mut taken = 0;
        let _ = self
            .handed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |handed| {
                let left = self.granted.load(Ordering::Acquire).saturating_sub(handed);
                taken = match (want.min(left), partial) {
                    (n, true) => n,
                    (n, false) if n == want => n,
                    _ => 0,
                };
                (taken > 0).then_some(handed + taken)
            });
        taken
    }

    /// Grants room up to `granted` in all (under the endpoint's lock).
    pub(crate) fn grant(&self, granted: u64) {
        self.granted.store(granted, Ordering::Release);
    }

    /// Grants no room: the handles' calls take the lock.
    pub(crate) fn revoke(&self) {
        self.granted.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_reserve_no_more_than_was_granted() {
        let credit = Credit::default();
        assert_eq!(credit.take(1, false), 0, "nothing granted yet");
        credit.grant(10);
        assert_eq!(credit.take(4, false), 4);
        assert_eq!(credit.take(7, false), 0, "only 6 left: all or nothing");
        assert_eq!(credit.take(7, true), 6, "as much as is left");
        assert_eq!(credit.take(1, true), 0);
        // The lock's side took the 10 handed off, and had room for 3 more.
        credit.grant(13);
        assert_eq!(credit.take(5, true), 3);
        credit.revoke();
        assert_eq!(credit.take(1, true), 0);
    }
}
