//! Per-socket counters: how Tern shows datagrams per syscall live instead of
//! tracing syscalls after the fact.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The live counters of one socket. Atomics so that a [`CountersHandle`] on
/// another thread can read them while the driver updates them; every update
/// is one relaxed add per batch, not per datagram.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) send_syscalls: AtomicU64,
    pub(crate) recv_syscalls: AtomicU64,
    pub(crate) datagrams_sent: AtomicU64,
    pub(crate) datagrams_received: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) send_batches: AtomicU64,
    pub(crate) recv_batches: AtomicU64,
    pub(crate) gso_sends: AtomicU64,
    pub(crate) gro_receives: AtomicU64,
    pub(crate) kernel_drops: AtomicU64,
    pub(crate) fallbacks: AtomicU64,
    pub(crate) send_errors: AtomicU64,
    pub(crate) recv_truncated: AtomicU64,
}

/// Adds `n` to a counter.
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    /// Records the kernel's cumulative drop count from `SO_RXQ_OVFL`.
    pub(crate) fn note_kernel_drops(&self, total: u64) {
        self.kernel_drops.fetch_max(total, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> CounterSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CounterSnapshot {
            send_syscalls: get(&self.send_syscalls),
            recv_syscalls: get(&self.recv_syscalls),
            datagrams_sent: get(&self.datagrams_sent),
            datagrams_received: get(&self.datagrams_received),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            send_batches: get(&self.send_batches),
            recv_batches: get(&self.recv_batches),
            gso_sends: get(&self.gso_sends),
            gro_receives: get(&self.gro_receives),
            kernel_drops: get(&self.kernel_drops),
            fallbacks: get(&self.fallbacks),
            send_errors: get(&self.send_errors),
            recv_truncated: get(&self.recv_truncated),
        }
    }
}

/// A copy of a socket's counters at one moment. All counts since bind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterSnapshot {
    /// System calls that sent (`sendto`, `sendmsg`, `sendmmsg`, or `io_uring_enter` for sends).
    pub send_syscalls: u64,
    /// System calls that received, including those that found nothing.
    pub recv_syscalls: u64,
    /// Datagrams handed to the kernel (each GSO segment counts).
    pub datagrams_sent: u64,
    /// Datagrams received (each GRO segment counts).
    pub datagrams_received: u64,
    /// Payload bytes handed to the kernel.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Send calls that moved at least one datagram.
    pub send_batches: u64,
    /// Receive calls that returned at least one datagram.
    pub recv_batches: u64,
    /// GSO super-datagrams sent (messages of more than one segment).
    pub gso_sends: u64,
    /// GRO super-datagrams received (messages of more than one segment).
    pub gro_receives: u64,
    /// Datagrams the kernel dropped because the receive queue was full (`SO_RXQ_OVFL`).
    pub kernel_drops: u64,
    /// Times a feature was refused at run time (or unavailable when forced) and the socket fell back.
    pub fallbacks: u64,
    /// Messages refused for their destination alone (e.g. ICMP unreachable), skipped so the rest went on.
    pub send_errors: u64,
    /// Messages that did not fit their receive slot and were cut short.
    pub recv_truncated: u64,
}

impl CounterSnapshot {
    /// Datagrams per send system call (0 before the first send).
    pub fn datagrams_per_send_syscall(&self) -> f64 {
        ratio(self.datagrams_sent, self.send_syscalls)
    }

    /// Datagrams per receive system call (0 before the first receive).
    pub fn datagrams_per_recv_syscall(&self) -> f64 {
        ratio(self.datagrams_received, self.recv_syscalls)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// A cheap, cloneable reader of one socket's counters, for a metrics task on
/// another thread while the driver owns the socket.
#[derive(Clone, Debug)]
pub struct CountersHandle(pub(crate) Arc<Counters>);

impl CountersHandle {
    /// The counters now.
    pub fn snapshot(&self) -> CounterSnapshot {
        self.0.snapshot()
    }
}
