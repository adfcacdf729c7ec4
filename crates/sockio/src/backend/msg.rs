//! What the Linux backends share: `msghdr` scratch built once per socket,
//! socket addresses, control messages (GSO segment size out, GRO stride and
//! drop count in) and the rules for what an `errno` means for a batch.
//!
//! Mmsg and Offload run their batches through [`send_batch`] and
//! [`recv_batch`]; IoUring fills the same headers and hands them to the ring.

use std::io;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::Ordering;

use crate::backend::Stop;
use crate::counters::{Counters, bump};
use crate::cursor::{Chunk, Cursor};
use crate::recv::{RecvBuffers, RecvMeta};
use crate::transmit::{RefusalReason, Refusals, Transmit};

/// Bytes of control space per message: room for a GRO stride (`int`), a drop
/// count (`u32`) and slack for anything else the kernel attaches.
const CONTROL_LEN: usize = 128;

/// Control-message space, aligned like `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; CONTROL_LEN]);

/// Headers, iovecs, addresses and control space for `capacity` messages,
/// allocated at bind so that a batch allocates nothing.
///
/// The raw pointers inside (`msg_name`, `msg_iov`, `msg_control`, `iov_base`)
/// are written at the start of every call, and a call hands the kernel only
/// the headers it filled. The pointers into the caller's buffers
/// (`iov_base`) are cleared when the call ends ([`forget_buffers`]), so none
/// outlives the borrow it came from.
///
/// [`forget_buffers`]: MsgScratch::forget_buffers
pub(crate) struct MsgScratch {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    controls: Box<[Control]>,
    /// Where the cursor stands after message `i` went out.
    pub(crate) ends: Box<[Cursor]>,
    /// Datagrams in message `i`.
    pub(crate) segments: Box<[usize]>,
    /// Whether message `i` carries a `UDP_SEGMENT` control message.
    pub(crate) gso: Box<[bool]>,
    /// The socket is IPv6: IPv4 destinations are written as v4-mapped addresses.
    v6: bool,
    /// Test hook: the next GSO message fails with `EIO` as a device without
    /// checksum offload would make it.
    #[cfg(test)]
    pub(crate) fail_next_gso: bool,
    /// Test hook: after this many more messages the socket buffer is full
    /// (`EAGAIN`), once.
    #[cfg(test)]
    pub(crate) would_block_after: Option<usize>,
}

// SAFETY: between calls the raw pointers in the headers point only into this
// struct's own boxes (pointers into the caller's buffers are cleared when a
// call ends); they are dereferenced, by the kernel, only during a call made
// through `&mut self`, and carry no ownership or thread affinity, so moving
// the scratch to another thread is sound.
unsafe impl Send for MsgScratch {}

impl MsgScratch {
    pub(crate) fn new(capacity: usize, v6: bool) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain C structs for
        // which all-zero bytes (null pointers, zero lengths) are valid values.
        let (hdr, iov, addr) = unsafe {
            (
                std::mem::zeroed::<libc::mmsghdr>(),
                std::mem::zeroed::<libc::iovec>(),
                std::mem::zeroed::<libc::sockaddr_storage>(),
            )
        };
        Self {
            hdrs: vec![hdr; capacity].into_boxed_slice(),
            iovs: vec![iov; capacity].into_boxed_slice(),
            addrs: vec![addr; capacity].into_boxed_slice(),
            controls: vec![Control([0; CONTROL_LEN]); capacity].into_boxed_slice(),
            ends: vec![Cursor::default(); capacity].into_boxed_slice(),
            segments: vec![0; capacity].into_boxed_slice(),
            gso: vec![false; capacity].into_boxed_slice(),
            v6,
            #[cfg(test)]
            fail_next_gso: false,
            #[cfg(test)]
            would_block_after: None,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Plans up to `capacity` messages from `cursor` (without moving it) and
    /// fills their headers; returns how many.
    pub(crate) fn plan_sends(
        &mut self,
        transmits: &[Transmit<'_>],
        cursor: Cursor,
        max_segments: usize,
        max_bytes: usize,
    ) -> usize {
        let mut next = cursor;
        let mut n = 0;
        while n < self.capacity() {
            let Some(chunk) = next.next_chunk(transmits, max_segments, max_bytes) else {
                break;
            };
            self.fill_send(n, &chunk);
            self.ends[n] = next;
            n += 1;
        }
        n
    }

    fn fill_send(&mut self, i: usize, chunk: &Chunk<'_>) {
        let name_len = encode_addr(chunk.destination, self.v6, &mut self.addrs[i]);
        self.iovs[i] = libc::iovec {
            // The kernel only reads a send buffer; the cast to *mut is what iovec demands.
            iov_base: chunk.bytes.as_ptr().cast_mut().cast(),
            iov_len: chunk.bytes.len(),
        };
        self.segments[i] = chunk.segments;
        self.gso[i] = chunk.segments > 1;
        let hdr = &mut self.hdrs[i];
        hdr.msg_len = 0;
        let msg = &mut hdr.msg_hdr;
        msg.msg_name = (&raw mut self.addrs[i]).cast();
        msg.msg_namelen = name_len;
        msg.msg_iov = &raw mut self.iovs[i];
        msg.msg_iovlen = 1;
        msg.msg_flags = 0;
        let gso = chunk.segments > 1;
        if !gso && chunk.ttl.is_none() {
            msg.msg_control = ptr::null_mut();
            msg.msg_controllen = 0;
            return;
        }
        let len = if gso { cmsg_space(size_of::<u16>()) } else { 0 }
            + if chunk.ttl.is_some() {
                cmsg_space(size_of::<libc::c_int>())
            } else {
                0
            };
        // Cleared first: finding the next header reads its length field,
        // which a receive may have left behind.
        self.controls[i].0[..len].fill(0);
        msg.msg_control = self.controls[i].0.as_mut_ptr().cast();
        msg.msg_controllen = len;
        // SAFETY: msg_control points to CONTROL_LEN bytes aligned for
        // cmsghdr and msg_controllen covers exactly the control messages
        // written below (at most a u16 and an int, well within the buffer),
        // so each header CMSG_FIRSTHDR/CMSG_NXTHDR gives is non-null and it
        // and its data lie inside the buffer.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(msg);
            if gso {
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                // The segment size fits: a chunk of several segments is at most 65 507 bytes.
                let size = u16::try_from(chunk.segment_size).unwrap_or(u16::MAX);
                ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
                cmsg = libc::CMSG_NXTHDR(msg, cmsg);
            }
            if let Some(ttl) = chunk.ttl {
                // An IPv4 destination (v4-mapped on an IPv6 socket too) takes
                // the IPv4 option; the kernel reads either as an int.
                let (level, kind) = match chunk.destination {
                    SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_none() => {
                        (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT)
                    }
                    _ => (libc::IPPROTO_IP, libc::IP_TTL),
                };
                (*cmsg).cmsg_level = level;
                (*cmsg).cmsg_type = kind;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
                ptr::write_unaligned(
                    libc::CMSG_DATA(cmsg).cast::<libc::c_int>(),
                    libc::c_int::from(ttl),
                );
            }
        }
    }

    /// Points headers at the first `limit` slots of `bufs` (at most the
    /// scratch capacity) and returns how many it filled: exactly the headers
    /// to hand to the kernel for this call, whatever `bufs` claims to hold.
    pub(crate) fn fill_recv_slots(&mut self, bufs: &mut RecvBuffers, limit: usize) -> usize {
        let mut filled = 0;
        for (i, slot) in bufs
            .slots_mut()
            .take(limit.min(self.capacity()))
            .enumerate()
        {
            self.fill_recv(i, slot);
            filled = i + 1;
        }
        filled
    }

    /// Clears the caller's buffer pointers from headers `0..n` once a call
    /// is over: a header handed to the kernel again without being filled
    /// first then faults (`EFAULT`) instead of reaching memory of an earlier
    /// call. Lengths stay for the counters.
    pub(crate) fn forget_buffers(&mut self, n: usize) {
        for iov in &mut self.iovs[..n] {
            iov.iov_base = ptr::null_mut();
        }
    }

    /// Points header `i` at receive slot `slot` for the kernel to fill.
    pub(crate) fn fill_recv(&mut self, i: usize, slot: &mut [u8]) {
        self.iovs[i] = libc::iovec {
            iov_base: slot.as_mut_ptr().cast(),
            iov_len: slot.len(),
        };
        let hdr = &mut self.hdrs[i];
        hdr.msg_len = 0;
        let msg = &mut hdr.msg_hdr;
        msg.msg_name = (&raw mut self.addrs[i]).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &raw mut self.iovs[i];
        msg.msg_iovlen = 1;
        msg.msg_control = self.controls[i].0.as_mut_ptr().cast();
        msg.msg_controllen = CONTROL_LEN as _;
        msg.msg_flags = 0;
    }

    /// Reads what the kernel wrote into header `i` after it received `len` bytes.
    pub(crate) fn parse_recv(&self, i: usize, len: usize, counters: &Counters) -> RecvMeta {
        let msg = &self.hdrs[i].msg_hdr;
        let source = decode_addr(&self.addrs[i], msg.msg_namelen).unwrap_or(RecvMeta::EMPTY.source);
        let mut stride = len;
        if msg.msg_flags & libc::MSG_TRUNC != 0 {
            bump(&counters.recv_truncated, 1);
        }
        // SAFETY: the kernel set msg_control/msg_controllen to the control
        // messages it wrote into our CONTROL_LEN buffer; CMSG_FIRSTHDR and
        // CMSG_NXTHDR stay within msg_controllen and return null at the end,
        // and each data read is bounded by the cmsg's own length check below.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(msg);
            while !cmsg.is_null() {
                let data_len =
                    ((*cmsg).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_UDP, libc::UDP_GRO) if data_len >= size_of::<libc::c_int>() => {
                        let size = ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                        if let Ok(size) = usize::try_from(size)
                            && size > 0
                        {
                            stride = size.min(len.max(1));
                        }
                    }
                    (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if data_len >= size_of::<u32>() => {
                        let drops = ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<u32>());
                        counters.note_kernel_drops(u64::from(drops));
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(msg, cmsg);
            }
        }
        RecvMeta {
            source,
            len,
            stride,
        }
    }

    /// Header `i`, for io_uring's `SENDMSG`/`RECVMSG`.
    pub(crate) fn msghdr_mut(&mut self, i: usize) -> *mut libc::msghdr {
        &raw mut self.hdrs[i].msg_hdr
    }
}

fn cmsg_space(len: usize) -> usize {
    // SAFETY: CMSG_SPACE is pure arithmetic on its argument.
    unsafe { libc::CMSG_SPACE(len as u32) as usize }
}

/// Writes `addr` as a C socket address; an IPv4 address on an IPv6 socket
/// becomes its v4-mapped form, which a dual-stack socket needs.
fn encode_addr(
    addr: SocketAddr,
    v6_socket: bool,
    out: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    let addr = match addr {
        SocketAddr::V4(a) if v6_socket => {
            SocketAddr::V6(SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0))
        }
        other => other,
    };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write((&raw mut *out).cast::<libc::sockaddr_in>(), sin) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write((&raw mut *out).cast::<libc::sockaddr_in6>(), sin6) };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Reads the C socket address of `len` bytes the kernel wrote; `None` for
/// families other than IP or a length too short for the family (the rest of
/// the storage may still hold an address from an earlier message).
fn decode_addr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    let family_len = size_of_val(&storage.ss_family);
    if len < family_len {
        return None;
    }
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is large enough and aligned for it.
            let sin = unsafe { &*(&raw const *storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                sin.sin_addr.s_addr.to_ne_bytes().into(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(&raw const *storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

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

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_survive_the_c_round_trip() {
        let mut storage = unsafe { std::mem::zeroed() };
        for addr in ["127.0.0.1:4433", "[::1]:9", "[fe80::1%3]:80"] {
            let addr: SocketAddr = addr.parse().expect("address");
            let len = encode_addr(addr, addr.is_ipv6(), &mut storage);
            assert_eq!(decode_addr(&storage, len), Some(addr));
        }
        let v4: SocketAddr = "10.0.0.1:53".parse().expect("address");
        let len = encode_addr(v4, true, &mut storage);
        assert_eq!(
            decode_addr(&storage, len),
            Some("[::ffff:10.0.0.1]:53".parse().expect("address"))
        );
    }

    /// Receive header 0 as the kernel would leave it: `len` bytes arrived
    /// with one `SOL_UDP`/`UDP_GRO` control message of `data_len` bytes
    /// holding `stride`.
    fn gro_message(scratch: &mut MsgScratch, slot: &mut [u8], stride: i32, data_len: u32) {
        scratch.fill_recv(0, slot);
        let msg = &mut scratch.hdrs[0].msg_hdr;
        // SAFETY: msg_control points at CONTROL_LEN bytes aligned for cmsghdr,
        // room for one header and an int; the length is set before reading it.
        unsafe {
            msg.msg_controllen = cmsg_space(size_of::<libc::c_int>());
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_GRO;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
            ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), stride);
        }
    }

    #[test]
    fn a_hostile_gro_stride_never_splits_past_the_message() {
        let counters = Counters::default();
        let mut scratch = MsgScratch::new(1, false);
        let mut slot = [0u8; 64];
        let four = size_of::<libc::c_int>() as u32;
        // (stride the kernel wrote, bytes of cmsg data) -> stride used for 50 bytes
        for (stride, data_len, expected) in [
            (20, four, 20),
            (0, four, 50),
            (-5, four, 50),
            (10_000, four, 50),
            (20, 2, 50),
        ] {
            gro_message(&mut scratch, &mut slot, stride, data_len);
            let meta = scratch.parse_recv(0, 50, &counters);
            assert_eq!(meta.stride, expected, "stride {stride}, data {data_len}");
            assert!((1..=50).contains(&meta.datagrams()));
        }
    }

    #[test]
    fn no_pointer_into_a_callers_buffer_outlives_the_call() {
        use std::os::fd::AsRawFd;
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_nonblocking(true).expect("non-blocking");
        let to = rx.local_addr().expect("address");
        let counters = Counters::default();
        let mut refusals = Refusals::with_capacity(4);
        let mut scratch = MsgScratch::new(4, false);
        let stale = |scratch: &MsgScratch| scratch.iovs.iter().any(|iov| !iov.iov_base.is_null());

        let contents = [[7u8; 100], [8; 100]];
        let batch: Vec<Transmit<'_>> = contents.iter().map(|c| Transmit::new(to, c)).collect();
        let mut cursor = Cursor::default();
        send_batch(
            tx.as_raw_fd(),
            &mut scratch,
            &batch,
            &mut cursor,
            1,
            &counters,
            &mut refusals,
        )
        .expect("send");
        assert_eq!(cursor.transmit, 2);
        assert!(!stale(&scratch));

        let mut bufs = RecvBuffers::new(4, 200);
        let mut received = 0;
        // Bounded: 2 s at most for two loopback datagrams.
        for _ in 0..2000 {
            match recv_batch(rx.as_raw_fd(), &mut scratch, &mut bufs, &counters) {
                Ok(n) => received += n,
                Err(Stop::WouldBlock) => std::thread::sleep(std::time::Duration::from_millis(1)),
                Err(other) => panic!("receive: {other:?}"),
            }
            assert!(!stale(&scratch));
            if received == 2 {
                break;
            }
        }
        assert_eq!(received, 2);
    }

    #[test]
    fn a_short_or_foreign_sender_address_is_no_address() {
        let mut storage = unsafe { std::mem::zeroed() };
        let v6: SocketAddr = "[::1]:9".parse().expect("address");
        let len = encode_addr(v6, true, &mut storage);
        // A stale IPv6 address in the storage is not read past a short length.
        assert_eq!(decode_addr(&storage, 0), None);
        assert_eq!(decode_addr(&storage, len - 1), None);
        storage.ss_family = libc::AF_UNIX as libc::sa_family_t;
        assert_eq!(decode_addr(&storage, len), None);
    }

    #[test]
    fn gso_refusals_downgrade_while_destination_errors_only_skip() {
        assert_eq!(classify_send(libc::EIO, true), SendErrno::GsoRefused);
        assert_eq!(classify_send(libc::EINVAL, true), SendErrno::GsoRefused);
        assert_eq!(
            classify_send(libc::ECONNREFUSED, true),
            SendErrno::Skip(RefusalReason::Unreachable)
        );
        assert_eq!(
            classify_send(libc::EINVAL, false),
            SendErrno::Skip(RefusalReason::InvalidDestination)
        );
        assert_eq!(
            classify_send(libc::EMSGSIZE, true),
            SendErrno::Skip(RefusalReason::TooLarge)
        );
        assert_eq!(classify_send(libc::EAGAIN, false), SendErrno::WouldBlock);
        assert_eq!(classify_send(libc::ENOSYS, false), SendErrno::Unsupported);
        assert_eq!(classify_send(libc::EBADF, false), SendErrno::Fail);
    }
}
