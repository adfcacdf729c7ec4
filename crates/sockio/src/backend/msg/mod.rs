//! What the Linux backends share: `msghdr` scratch built once per socket,
//! socket addresses, control messages (GSO segment size out, GRO stride and
//! drop count in) and the rules for what an `errno` means for a batch.
//!
//! Mmsg and Offload run their batches through [`send_batch`] and
//! [`recv_batch`]; IoUring fills the same headers and hands them to the ring.
//! Sending is in `send`, receiving in `recv`.

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

mod recv;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use recv::{finish_recv, no_slots, recv_batch, recv_stop};
pub(crate) use send::{BatchSender, GsoGate, send_batch, send_gated, settle_sends};
#[cfg(test)]
pub(crate) use send::{GSO_RETRY_FIRST, SendErrno, classify_send};

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

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
