//! IoUring: a batch of `SENDMSG` or `RECVMSG` operations per `io_uring_enter`.
//!
//! Each batch is pushed as one chain of linked operations, submitted with one
//! `io_uring_enter` that also waits for every completion. The operations carry
//! `MSG_DONTWAIT`, so none of them parks in the kernel: each completes during
//! the enter with data or `EAGAIN`, and a failure cancels the rest of the
//! chain, which keeps "the first k went out" (or "the first k slots are
//! filled") true, as with `sendmmsg`. Readiness comes from the socket itself
//! through tokio, like the other backends. GSO and GRO use the same control
//! messages as Offload.
//!
//! # Buffer ownership
//! While an operation is in the kernel, it reads or writes through the
//! `msghdr` in the scratch, its iovec, address and control space, and the
//! caller's transmit contents or receive slot. Every call waits for all the
//! completions it submitted before it returns, so the kernel's access ends
//! inside the borrow of those buffers: nothing is left in flight between
//! calls. If `io_uring_enter` fails before consuming the entries, they were
//! never seen by the kernel and the socket drops the ring (closing it without
//! entering it again), so they never will be. If it fails with operations
//! already in flight, the call does not return while the kernel may still
//! touch those buffers: it cancels them (`IORING_REGISTER_SYNC_CANCEL`, which
//! needs no `io_uring_enter`) and reaps the completion queue, which is shared
//! memory, until every consumed operation has posted its completion. Then it
//! reports what completed, exactly as after a normal batch, and refuses the
//! backend so the socket falls back and carries on from there. Only a kernel
//! that keeps an operation past [`DRAIN_LIMIT`] after cancelling it would end
//! the process: returning then would hand memory the kernel may still write
//! back to the caller.

use std::io;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};
use tokio::net::UdpSocket as TokioUdp;

use crate::backend::Stop;
use crate::backend::msg::{self, BatchSender, GsoGate, MsgScratch};
use crate::config::MAX_UDP_PAYLOAD;
use crate::counters::{Counters, bump};
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::{Refusals, Transmit};

/// How long a failed batch waits for the kernel to give back operations it
/// consumed before the process gives up (see the module docs).
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Whether an io_uring can be set up here and supports the operations used.
pub(crate) fn probe() -> bool {
    let Ok(ring) = IoUring::<squeue::Entry>::new(4) else {
        return false;
    };
    let mut probe = io_uring::Probe::new();
    if ring.submitter().register_probe(&mut probe).is_err() {
        return false;
    }
    probe.is_supported(opcode::SendMsg::CODE) && probe.is_supported(opcode::RecvMsg::CODE)
}

pub(crate) struct Uring {
    ring: IoUring,
    pub(crate) scratch: MsgScratch,
    /// Completion result of operation `i` of the last batch.
    results: Box<[i32]>,
    /// Segments per message now.
    gso: GsoGate,
    /// Receive operations to chain next time: twice what the last receive
    /// got (at least 4), so a trickle does not pay for a full batch of
    /// operations that would only be cancelled.
    recv_window: usize,
    /// `io_uring_enter` failed with operations in flight; they were drained
    /// and their results reported, and the next call refuses the backend.
    broken: Option<io::Error>,
    /// Test hook: the next `io_uring_enter` fails with `EPERM` as a
    /// seccomp or container policy would make it.
    #[cfg(test)]
    pub(crate) fail_next_enter: bool,
    /// Test hook: the next `io_uring_enter` submits the batch, then fails
    /// with `EBUSY` before waiting, leaving its operations in flight.
    #[cfg(test)]
    pub(crate) fail_next_wait: bool,
}

impl Uring {
    pub(crate) fn new(batch: usize, v6: bool, max_segments: usize) -> io::Result<Self> {
        let scratch = MsgScratch::new(batch, v6);
        let entries = scratch.capacity().next_power_of_two() as u32;
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)?;
        Ok(Self {
            ring,
            results: vec![0; scratch.capacity()].into_boxed_slice(),
            scratch,
            gso: GsoGate::new(max_segments),
            recv_window: 4,
            broken: None,
            #[cfg(test)]
            fail_next_enter: false,
            #[cfg(test)]
            fail_next_wait: false,
        })
    }

    pub(crate) fn max_segments(&self) -> usize {
        self.gso.max_segments()
    }

    /// Submits headers `0..n` as one linked chain of sends or receives with a
    /// single `io_uring_enter` and waits for all of them; results land in
    /// `self.results` (`-ECANCELED` for an operation the kernel never ran).
    /// If the enter fails after the kernel consumed operations, they are
    /// drained and `self.broken` is set: the results still say exactly what
    /// happened, and the caller refuses the backend once it has used them.
    fn run(
        &mut self,
        fd: RawFd,
        n: usize,
        recv: bool,
        syscalls: &std::sync::atomic::AtomicU64,
    ) -> Result<(), Stop> {
        {
            let mut sq = self.ring.submission();
            if sq.capacity() - sq.len() < n {
                return Err(Stop::Failed(io::Error::other(
                    "io_uring submission queue smaller than the batch",
                )));
            }
            self.results[..n].fill(-libc::ECANCELED);
            for i in 0..n {
                let hdr = self.scratch.msghdr_mut(i);
                let entry = if recv {
                    opcode::RecvMsg::new(types::Fd(fd), hdr)
                        .flags(libc::MSG_DONTWAIT as u32)
                        .build()
                } else {
                    opcode::SendMsg::new(types::Fd(fd), hdr)
                        .flags(libc::MSG_DONTWAIT as u32)
                        .build()
                }
                .user_data(i as u64);
                let entry = if i + 1 < n {
                    entry.flags(squeue::Flags::IO_LINK)
                } else {
                    entry
                };
                // SAFETY: the entry points at header i of the scratch, which
                // points at the scratch's iovec, address and control space and
                // at the caller's buffer for this call. All of it stays alive
                // and unmoved until the entry's completion is reaped below
                // before this function returns, or until the ring is dropped
                // without the entry ever being consumed (see the module docs).
                // Room for n entries was checked above, so push cannot fail.
                let _ = unsafe { sq.push(&entry) };
            }
        }
        let mut done = 0;
        while done < n {
            bump(syscalls, 1);
            match self.enter(n - done) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    let consumed = n - self.ring.submission().len();
                    if consumed == 0 {
                        // Nothing reached the kernel: the caller drops this ring.
                        return Err(Stop::Refused(e));
                    }
                    // Drained before anything is logged: a tracing
                    // subscriber is user code and may panic, and unwinding
                    // now would free buffers the kernel still writes to.
                    self.drain(consumed - done);
                    tracing::warn!(error = %e, "sockio: io_uring_enter failed with operations in flight; drained them");
                    self.broken = Some(e);
                    return Ok(());
                }
            }
            done += self.reap();
        }
        Ok(())
    }

    /// Moves every completion queued now into `self.results`; returns how many.
    fn reap(&mut self) -> usize {
        let mut reaped = 0;
        for cqe in self.ring.completion() {
            if let Some(slot) = self.results.get_mut(cqe.user_data() as usize) {
                *slot = cqe.result();
            }
            reaped += 1;
        }
        reaped
    }

    /// Waits, without `io_uring_enter`, until `in_flight` more completions
    /// have been reaped: asks the kernel to cancel what it still holds, then
    /// reads the shared completion queue, sleeping between reads (the
    /// submitting task runs the ring's deferred work on every return from a
    /// system call, so linked operations still finish).
    fn drain(&mut self, mut in_flight: usize) {
        let _ = self.ring.submitter().register_sync_cancel(
            Some(types::Timespec::new().nsec(100_000_000)),
            types::CancelBuilder::any(),
        );
        let deadline = Instant::now() + DRAIN_LIMIT;
        loop {
            in_flight = in_flight.saturating_sub(self.reap());
            if in_flight == 0 {
                return;
            }
            if Instant::now() > deadline {
                // Not through tracing: a subscriber that panicked here would
                // unwind past buffers the kernel may still write to.
                let _ = writeln!(
                    io::stderr(),
                    "tern-sockio: the kernel kept {in_flight} io_uring operations on caller buffers after cancelling them; aborting"
                );
                std::process::abort();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn enter(&mut self, want: usize) -> io::Result<usize> {
        #[cfg(test)]
        if self.fail_next_enter {
            self.fail_next_enter = false;
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        #[cfg(test)]
        if self.fail_next_wait {
            self.fail_next_wait = false;
            self.ring.submit()?;
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        self.ring.submit_and_wait(want)
    }

    pub(crate) fn send(
        &mut self,
        io: &TokioUdp,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop> {
        msg::send_gated(self, io.as_raw_fd(), transmits, cursor, counters, refusals)
    }

    /// Test hook: plays the kernel refusing the first GSO message of the
    /// batch. Returns how many messages to submit (those before it go out for
    /// real) and whether message 0 is the refused one.
    #[cfg(test)]
    fn take_injected_gso_refusal(&mut self, n: usize) -> (usize, bool) {
        if !self.scratch.fail_next_gso {
            return (n, false);
        }
        match self.scratch.gso[..n].iter().position(|g| *g) {
            Some(0) => {
                self.scratch.fail_next_gso = false;
                (n, true)
            }
            Some(first) => (first, false),
            None => (n, false),
        }
    }

    #[cfg(not(test))]
    fn take_injected_gso_refusal(&mut self, n: usize) -> (usize, bool) {
        (n, false)
    }

    pub(crate) fn recv(
        &mut self,
        io: &TokioUdp,
        bufs: &mut RecvBuffers,
        counters: &Counters,
    ) -> Result<usize, Stop> {
        if let Some(e) = self.broken.take() {
            return Err(Stop::Refused(e));
        }
        let fd = io.as_raw_fd();
        loop {
            let n = self.scratch.fill_recv_slots(bufs, self.recv_window);
            if n == 0 {
                return Err(Stop::Failed(msg::no_slots()));
            }
            let ran = self.run(fd, n, true, &counters.recv_syscalls);
            self.scratch.forget_buffers(n);
            ran?;
            let ok = self.results[..n].iter().take_while(|r| **r >= 0).count();
            self.recv_window = (ok * 2).max(4);
            if ok > 0 {
                let results = &self.results;
                return Ok(msg::finish_recv(
                    &self.scratch,
                    bufs,
                    ok,
                    |i| results[i] as usize,
                    counters,
                ));
            }
            if let Some(e) = self.broken.take() {
                return Err(Stop::Refused(e));
            }
            if let Some(stop) = msg::recv_stop(-self.results[0]) {
                return Err(stop);
            }
        }
    }
}

impl BatchSender for Uring {
    fn gso(&mut self) -> &mut GsoGate {
        &mut self.gso
    }

    /// One chain of operations per `io_uring_enter`, as [`msg::send_batch`]
    /// does with `sendmmsg`.
    fn send_batch(
        &mut self,
        fd: RawFd,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        max_segments: usize,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop> {
        // A drained ring may still hold entries it never submitted, pointing
        // at buffers of an earlier call: it must never be entered again.
        if let Some(e) = self.broken.take() {
            return Err(Stop::Refused(e));
        }
        loop {
            let n = self
                .scratch
                .plan_sends(transmits, *cursor, max_segments, MAX_UDP_PAYLOAD);
            if n == 0 {
                return Ok(());
            }
            let (n, refuse_first) = self.take_injected_gso_refusal(n);
            let ok = if refuse_first {
                self.results[0] = -libc::EIO;
                0
            } else {
                let ran = self.run(fd, n, false, &counters.send_syscalls);
                self.scratch.forget_buffers(n);
                ran?;
                self.results[..n].iter().take_while(|r| **r >= 0).count()
            };
            if let Some(e) = self.broken.take() {
                msg::settle_sends(&self.scratch, ok, None, cursor, counters, refusals)?;
                return Err(Stop::Refused(e));
            }
            let failed = (ok < n).then(|| -self.results[ok]);
            msg::settle_sends(&self.scratch, ok, failed, cursor, counters, refusals)?;
        }
    }
}
