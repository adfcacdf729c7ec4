//! A driver's counters: relaxed atomics it bumps once per turn, and the
//! [`DriverStats`] copy its handles read.

use std::sync::atomic::{AtomicU64, Ordering};

/// The driver's own counters (one relaxed add per turn each).
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) turns: AtomicU64,
    pub(super) datagrams_in: AtomicU64,
    pub(super) datagrams_out: AtomicU64,
    pub(super) send_waits: AtomicU64,
    pub(super) timeouts: AtomicU64,
    pub(super) wakes: AtomicU64,
    pub(super) refusals: AtomicU64,
}

/// A copy of a driver's counters at one moment, all since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverStats {
    /// Loop turns.
    pub turns: u64,
    /// Datagrams handed to the node's `handle_datagram`.
    pub datagrams_in: u64,
    /// Datagrams the node wrote in `poll_transmit` (each segment of a run counts).
    pub datagrams_out: u64,
    /// Times the socket was full and the driver waited for it to be writable.
    pub send_waits: u64,
    /// Calls of the node's `handle_timeout`.
    pub timeouts: u64,
    /// Wake-ups from a [`DriverHandle`](super::DriverHandle).
    pub wakes: u64,
    /// Datagrams the kernel refused for their destination or size, reported
    /// to the node.
    pub refusals: u64,
}

impl Stats {
    pub(super) fn snapshot(&self) -> DriverStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DriverStats {
            turns: get(&self.turns),
            datagrams_in: get(&self.datagrams_in),
            datagrams_out: get(&self.datagrams_out),
            send_waits: get(&self.send_waits),
            timeouts: get(&self.timeouts),
            wakes: get(&self.wakes),
            refusals: get(&self.refusals),
        }
    }
}

pub(super) fn bump(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
