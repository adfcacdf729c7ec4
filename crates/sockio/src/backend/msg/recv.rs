use super::*;

/// What an `errno` from a receive means.
pub(crate) fn recv_stop(errno: i32) -> Option<Stop> {
    match errno {
        // A pending ICMP error surfaces on the next receive; it concerns one
        // earlier send, never this receive, so just read again.
        libc::EINTR
        | libc::ECONNREFUSED
        | libc::ECONNRESET
        | libc::EHOSTUNREACH
        | libc::ENETUNREACH => None,
        libc::EAGAIN => Some(Stop::WouldBlock),
        libc::ENOSYS => Some(Stop::Refused(io::Error::from_raw_os_error(errno))),
        _ => Some(Stop::Failed(io::Error::from_raw_os_error(errno))),
    }
}

/// Receives up to one batch with `recvmmsg` into the caller's slots.
pub(crate) fn recv_batch(
    fd: RawFd,
    scratch: &mut MsgScratch,
    bufs: &mut RecvBuffers,
    counters: &Counters,
) -> Result<usize, Stop> {
    let n = scratch.fill_recv_slots(bufs, usize::MAX);
    if n == 0 {
        return Err(Stop::Failed(no_slots()));
    }
    let k = loop {
        bump(&counters.recv_syscalls, 1);
        // SAFETY: headers 0..n were just pointed into the scratch and at the
        // caller's slots 0..n, which `bufs` (borrowed mutably for this call)
        // keeps alive and unaliased; the kernel writes at most iov_len bytes
        // into each slot and at most msg_namelen/msg_controllen into the scratch.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                scratch.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
            )
        };
        if rc >= 0 {
            break rc as usize;
        }
        if let Some(stop) = recv_stop(errno()) {
            scratch.forget_buffers(n);
            return Err(stop);
        }
    };
    scratch.forget_buffers(n);
    if k == 0 {
        return Err(Stop::WouldBlock);
    }
    Ok(finish_recv(
        scratch,
        bufs,
        k,
        |i| scratch.hdrs[i].msg_len as usize,
        counters,
    ))
}

/// A receive was handed no slot to fill.
pub(crate) fn no_slots() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "receive buffers without a slot",
    )
}

/// Turns `k` filled headers into metadata and counts them; `len(i)` is how
/// many bytes message `i` received. Returns the number of datagrams.
pub(crate) fn finish_recv(
    scratch: &MsgScratch,
    bufs: &mut RecvBuffers,
    k: usize,
    len: impl Fn(usize) -> usize,
    counters: &Counters,
) -> usize {
    let mut datagrams = 0;
    let mut bytes = 0;
    let mut gro = 0;
    for i in 0..k {
        let meta = scratch.parse_recv(i, len(i).min(bufs.slot_len()), counters);
        let segments = meta.datagrams();
        datagrams += segments;
        bytes += meta.len;
        gro += u64::from(segments > 1);
        bufs.set_meta(i, meta);
    }
    bufs.set_filled(k);
    bump(&counters.datagrams_received, datagrams as u64);
    bump(&counters.bytes_received, bytes as u64);
    bump(&counters.gro_receives, gro);
    bump(&counters.recv_batches, 1);
    datagrams
}
