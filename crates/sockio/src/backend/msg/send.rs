use super::*;

/// What an `errno` from sending a message means for the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendErrno {
    /// Interrupted by a signal: try again.
    Retry,
    /// The socket buffer is full: stop and report progress.
    WouldBlock,
    /// The kernel refused this message for its destination or size alone
    /// (ICMP unreachable reported back, too large for the path, no route):
    /// skip it, count it, list it, go on with the rest.
    Skip(RefusalReason),
    /// The kernel refused a segmented message with an error that may be the
    /// segmentation's fault or the destination's: [`send_gated`] tells which.
    GsoRefused,
    /// The system call itself is refused: the socket must fall back to a
    /// simpler backend.
    Unsupported,
    /// Anything else goes back to the caller.
    Fail,
}

/// Classifies `errno` from a send of a message with or without GSO.
pub(crate) fn classify_send(errno: i32, gso: bool) -> SendErrno {
    match errno {
        libc::EINTR => SendErrno::Retry,
        libc::EAGAIN => SendErrno::WouldBlock,
        // EIO: the device cannot checksum offload; EINVAL: the segment size
        // or count is out of range for this path, or the destination is
        // invalid; EOPNOTSUPP: no GSO here.
        libc::EIO | libc::EINVAL | libc::EOPNOTSUPP if gso => SendErrno::GsoRefused,
        libc::ENOSYS => SendErrno::Unsupported,
        libc::EMSGSIZE => SendErrno::Skip(RefusalReason::TooLarge),
        libc::ECONNREFUSED
        | libc::ECONNRESET
        | libc::EHOSTUNREACH
        | libc::ENETUNREACH
        | libc::EHOSTDOWN
        | libc::ENETDOWN => SendErrno::Skip(RefusalReason::Unreachable),
        libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT | libc::EINVAL => {
            SendErrno::Skip(RefusalReason::InvalidDestination)
        }
        libc::ENOBUFS | libc::EACCES | libc::EPERM => SendErrno::Skip(RefusalReason::Denied),
        _ => SendErrno::Fail,
    }
}

/// Sends messages `0..n` of the scratch with one system call: `sendmsg` for a
/// single message, `sendmmsg` for several. Returns how many went out.
fn send_call(fd: RawFd, scratch: &mut MsgScratch, n: usize) -> Result<usize, i32> {
    #[cfg(test)]
    let n = {
        let mut n = n;
        match scratch.would_block_after {
            Some(0) => {
                scratch.would_block_after = None;
                return Err(libc::EAGAIN);
            }
            Some(left) => {
                n = n.min(left);
                scratch.would_block_after = Some(left - n);
            }
            None => {}
        }
        if scratch.fail_next_gso {
            match scratch.gso[..n].iter().position(|g| *g) {
                Some(0) => {
                    scratch.fail_next_gso = false;
                    return Err(libc::EIO);
                }
                // The kernel sends the messages before a failing one and reports them.
                Some(j) => n = j,
                None => {}
            }
        }
        n
    };
    if n == 1 {
        // SAFETY: header 0 was filled by plan_sends for this call: its name,
        // iovec and control pointers point into the scratch and into the
        // caller's transmit contents, all alive and unmoved for the call.
        let rc = unsafe { libc::sendmsg(fd, &raw const scratch.hdrs[0].msg_hdr, 0) };
        if rc < 0 { Err(errno()) } else { Ok(1) }
    } else {
        // SAFETY: headers 0..n were filled by plan_sends for this call (see
        // above); n is at most the scratch capacity, at most 1024.
        let rc = unsafe { libc::sendmmsg(fd, scratch.hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(rc as usize)
        }
    }
}

/// Adds the messages `0..k` that went out to the counters.
pub(crate) fn count_sent(scratch: &MsgScratch, k: usize, counters: &Counters) {
    let mut datagrams = 0;
    let mut bytes = 0;
    let mut gso = 0;
    for i in 0..k {
        datagrams += scratch.segments[i] as u64;
        bytes += scratch.iovs[i].iov_len as u64;
        gso += u64::from(scratch.gso[i]);
    }
    bump(&counters.datagrams_sent, datagrams);
    bump(&counters.bytes_sent, bytes);
    bump(&counters.gso_sends, gso);
}

/// Sends the batch from `cursor` on, `max_segments` per message (1 = no GSO),
/// moving the cursor past what went out or was skipped.
pub(crate) fn send_batch(
    fd: RawFd,
    scratch: &mut MsgScratch,
    transmits: &[Transmit<'_>],
    cursor: &mut Cursor,
    max_segments: usize,
    counters: &Counters,
    refusals: &mut Refusals,
) -> Result<(), Stop> {
    loop {
        let n = scratch.plan_sends(
            transmits,
            *cursor,
            max_segments,
            crate::config::MAX_UDP_PAYLOAD,
        );
        if n == 0 {
            return Ok(());
        }
        bump(&counters.send_syscalls, 1);
        let result = send_call(fd, scratch, n);
        scratch.forget_buffers(n);
        match result {
            Ok(0) => return Err(Stop::WouldBlock),
            Ok(k) => settle_sends(scratch, k, None, cursor, counters, refusals)?,
            Err(e) => settle_sends(scratch, 0, Some(e), cursor, counters, refusals)?,
        }
    }
}

/// Settles planned messages after the first `ok` went out and, with
/// `failed`, message `ok` was refused with that `errno`: counts what went
/// out, moves the cursor past it (and past a message skipped for its
/// destination alone), and says whether to plan on (`Ok`) or stop.
pub(crate) fn settle_sends(
    scratch: &MsgScratch,
    ok: usize,
    failed: Option<i32>,
    cursor: &mut Cursor,
    counters: &Counters,
    refusals: &mut Refusals,
) -> Result<(), Stop> {
    if ok > 0 {
        count_sent(scratch, ok, counters);
        *cursor = scratch.ends[ok - 1];
    }
    let Some(errno) = failed else {
        return Ok(());
    };
    let error = || io::Error::from_raw_os_error(errno);
    match classify_send(errno, scratch.gso[ok]) {
        SendErrno::Retry => Ok(()),
        SendErrno::WouldBlock => Err(Stop::WouldBlock),
        SendErrno::Skip(reason) => {
            tracing::debug!(
                errno,
                "sockio: datagram refused for its destination, skipped"
            );
            bump(&counters.send_errors, 1);
            refusals.push(cursor.transmit, reason);
            *cursor = scratch.ends[ok];
            Ok(())
        }
        SendErrno::GsoRefused => Err(Stop::GsoRefused(error())),
        SendErrno::Unsupported => Err(Stop::Refused(error())),
        SendErrno::Fail => Err(Stop::Failed(error())),
    }
}

/// Whether a socket segments now, and when it tries again after the
/// kernel refused segmentation.
///
/// A refusal turns GSO off for [`GSO_RETRY_FIRST`] send calls, then it is
/// tried again (a route or device may have changed); each refusal in a row
/// doubles the wait, up to [`GSO_RETRY_MAX`].
#[derive(Debug)]
pub(crate) struct GsoGate {
    /// Segments per message with GSO on (1: GSO is not available at all).
    limit: usize,
    /// Send calls left before GSO is tried again; 0 while it is on.
    off_for: u32,
    /// How long the next refusal turns GSO off for, in send calls.
    backoff: u32,
}

/// Send calls GSO stays off after a first refusal.
pub(crate) const GSO_RETRY_FIRST: u32 = 1024;
/// The longest GSO stays off after refusals in a row, in send calls.
pub(crate) const GSO_RETRY_MAX: u32 = 1 << 20;

impl GsoGate {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            off_for: 0,
            backoff: GSO_RETRY_FIRST,
        }
    }

    /// Segments per message now.
    pub(crate) fn max_segments(&self) -> usize {
        if self.off_for > 0 { 1 } else { self.limit }
    }

    /// Counts one send call while GSO is off; turns it back on when due.
    fn tick(&mut self) {
        if self.off_for > 0 {
            self.off_for -= 1;
            if self.off_for == 0 {
                tracing::debug!("sockio: trying UDP GSO again");
            }
        }
    }

    /// The kernel refused segmentation itself: plain datagrams for a while.
    fn refused(&mut self, why: &io::Error, counters: &Counters) {
        tracing::warn!(error = %why, calls = self.backoff, "sockio: kernel refused UDP GSO; sending plain datagrams for a while");
        self.off_for = self.backoff;
        self.backoff = self.backoff.saturating_mul(2).min(GSO_RETRY_MAX);
        bump(&counters.fallbacks, 1);
    }

    /// Segmentation worked: the next refusal waits the shortest time again.
    fn worked(&mut self) {
        if self.off_for == 0 {
            self.backoff = GSO_RETRY_FIRST;
        }
    }
}

/// A backend that sends batches of messages of up to a given number of
/// segments each, as [`send_batch`] does.
pub(crate) trait BatchSender {
    /// The backend's GSO state.
    fn gso(&mut self) -> &mut GsoGate;

    /// Sends the batch from `cursor` on through socket `fd`, `max_segments`
    /// per message.
    fn send_batch(
        &mut self,
        fd: RawFd,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        max_segments: usize,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop>;
}

/// Sends the batch through `backend` with GSO where the gate allows it.
///
/// A segmented message refused with an error that can mean either "no
/// segmentation here" or "not this destination" (`EINVAL` does both) is
/// told apart by sending its first segment alone: if that goes out,
/// segmentation was refused and the gate turns GSO off for a while; if it
/// is refused too, the destination was at fault, and the whole message is
/// skipped, counted once and listed, while GSO stays on for everyone else.
pub(crate) fn send_gated(
    backend: &mut impl BatchSender,
    fd: RawFd,
    transmits: &[Transmit<'_>],
    cursor: &mut Cursor,
    counters: &Counters,
    refusals: &mut Refusals,
) -> Result<(), Stop> {
    backend.gso().tick();
    loop {
        let max_segments = backend.gso().max_segments();
        let why = match backend.send_batch(fd, transmits, cursor, max_segments, counters, refusals)
        {
            Err(Stop::GsoRefused(why)) => why,
            done => {
                if done.is_ok() && max_segments > 1 {
                    backend.gso().worked();
                }
                return done;
            }
        };
        let mut end = *cursor;
        let Some(chunk) = end.next_chunk(transmits, max_segments, crate::config::MAX_UDP_PAYLOAD)
        else {
            return Ok(());
        };
        let first = [Transmit {
            ttl: chunk.ttl,
            ..Transmit::new(
                chunk.destination,
                &chunk.bytes[..chunk.segment_size.min(chunk.bytes.len())],
            )
        }];
        let listed = refusals.len();
        let sent_before = counters.datagrams_sent.load(Ordering::Relaxed);
        backend.send_batch(fd, &first, &mut Cursor::default(), 1, counters, refusals)?;
        if counters.datagrams_sent.load(Ordering::Relaxed) > sent_before {
            backend.gso().refused(&why, counters);
            cursor.skip_segment(transmits);
        } else {
            refusals.relabel_since(listed, cursor.transmit);
            *cursor = end;
        }
    }
}
