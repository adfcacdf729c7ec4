//! Ceilings: the same syscall patterns as the sockio backends, written
//! directly against libc, with nothing in between. Senders block; receivers
//! read without waiting while datagrams are queued and wait in `poll` only
//! when the queue is empty, as Tern's receivers do through the reactor.
//!
//! - `sendto`: one `sendto` per datagram into one `recvfrom` per datagram.
//! - `mmsg`: `sendmmsg` of the batch into `recvmmsg` of up to 64.
//! - `gso`: `sendmmsg` of `UDP_SEGMENT` super-datagrams into a `UDP_GRO`
//!   receiver reading with `recvmmsg`, counting datagrams by the GRO stride.
//!
//! Sockets get the same buffer sizes as Tern's defaults, so the comparison is
//! of the I/O path alone.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use nix::sys::socket::{setsockopt, sockopt};

use crate::sockio_matrix::{IDLE, RECV_SLOTS, SampleResult, gso_segments, receiver_done};

/// A raw syscall pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pattern {
    Sendto,
    Mmsg,
    Gso,
}

/// Receive slot for GRO (one message can carry 64 KiB).
const GRO_SLOT: usize = 65_535;

fn socket(send_buf: usize, recv_buf: usize) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // The FORCE variants pass the sysctl caps when the process may; otherwise
    // the plain options, as Tern's sockets do.
    if setsockopt(&socket, sockopt::SndBufForce, &send_buf).is_err() {
        socket.set_send_buffer_size(send_buf)?;
    }
    if setsockopt(&socket, sockopt::RcvBufForce, &recv_buf).is_err() {
        socket.set_recv_buffer_size(recv_buf)?;
    }
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
    Ok(socket.into())
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_in, libc::socklen_t) {
    let SocketAddr::V4(a) = addr else {
        unreachable!("raw ceilings bind IPv4 loopback only")
    };
    (
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            },
            sin_zero: [0; 8],
        },
        size_of::<libc::sockaddr_in>() as libc::socklen_t,
    )
}

/// Runs one sample: a sender thread sending `batch` datagrams of `payload`
/// bytes per call for `duration`, a receiver thread counting what arrives.
pub(crate) fn run(
    pattern: Pattern,
    payload: usize,
    batch: usize,
    duration: Duration,
) -> io::Result<SampleResult> {
    let rx = socket(4 << 20, 8 << 20)?;
    let tx = socket(4 << 20, 8 << 20)?;
    if pattern == Pattern::Gso {
        setsockopt(&rx, sockopt::UdpGroSegment, &true)?;
    }
    let to = rx.local_addr()?;
    let barrier = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (barrier, done) = (Arc::clone(&barrier), Arc::clone(&done));
        std::thread::spawn(move || receive(pattern, &rx, payload, &barrier, &done))
    };
    let sent = send(pattern, &tx, to, payload, batch, duration, &barrier);
    done.store(true, Ordering::Release);
    let received = receiver
        .join()
        .map_err(|_| io::Error::other("receiver thread panicked"))??;
    let (datagrams_sent, send_syscalls) = sent?;
    Ok(SampleResult {
        sent: datagrams_sent,
        send_syscalls,
        delivered: received.0,
        delivered_bytes: received.1,
        elapsed: received.2,
    })
}

/// Sends until `duration` has passed; returns (datagrams, syscalls).
fn send(
    pattern: Pattern,
    tx: &UdpSocket,
    to: SocketAddr,
    payload: usize,
    batch: usize,
    duration: Duration,
    barrier: &Barrier,
) -> io::Result<(u64, u64)> {
    let fd = tx.as_raw_fd();
    let data = vec![0x5a_u8; payload * batch];
    let (mut addr, addr_len) = sockaddr(to);
    // Messages of one call: for Gso, runs of up to `segs` segments; else one datagram each.
    let segs = if pattern == Pattern::Gso {
        gso_segments(payload)
    } else {
        1
    };
    let chunks: Vec<&[u8]> = data.chunks(payload * segs).collect();
    let mut iovs: Vec<libc::iovec> = chunks
        .iter()
        .map(|c| libc::iovec {
            iov_base: c.as_ptr().cast_mut().cast(),
            iov_len: c.len(),
        })
        .collect();
    #[repr(C, align(8))]
    #[derive(Clone, Copy)]
    struct Control([u8; 32]);
    let mut controls = vec![Control([0; 32]); chunks.len()];
    // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; chunks.len()];
    for (i, hdr) in hdrs.iter_mut().enumerate() {
        let msg = &mut hdr.msg_hdr;
        msg.msg_name = (&raw mut addr).cast();
        msg.msg_namelen = addr_len;
        msg.msg_iov = &raw mut iovs[i];
        msg.msg_iovlen = 1;
        if pattern == Pattern::Gso && chunks[i].len() > payload {
            msg.msg_control = controls[i].0.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE is arithmetic; the 32-byte aligned buffer holds
            // one cmsg of a u16, so FIRSTHDR is non-null and in bounds.
            unsafe {
                msg.msg_controllen = libc::CMSG_SPACE(2) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(msg);
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(2) as usize;
                ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), payload as u16);
            }
        }
    }
    let per_call: u64 = batch as u64;
    barrier.wait();
    let end = Instant::now() + duration;
    let (mut datagrams, mut syscalls) = (0u64, 0u64);
    while Instant::now() < end {
        match pattern {
            Pattern::Sendto => {
                syscalls += 1;
                // SAFETY: data and addr are live for the call; the kernel only reads them.
                let rc = unsafe {
                    libc::sendto(
                        fd,
                        data.as_ptr().cast(),
                        payload,
                        0,
                        (&raw const addr).cast(),
                        addr_len,
                    )
                };
                if rc >= 0 {
                    datagrams += 1;
                }
            }
            Pattern::Mmsg | Pattern::Gso => {
                let mut first = 0;
                while first < hdrs.len() {
                    syscalls += 1;
                    // SAFETY: every header points at live iovecs, address,
                    // control space and data owned by this function.
                    let rc = unsafe {
                        libc::sendmmsg(
                            fd,
                            hdrs[first..].as_mut_ptr(),
                            (hdrs.len() - first) as libc::c_uint,
                            0,
                        )
                    };
                    if rc <= 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted
                            && e.kind() != io::ErrorKind::WouldBlock
                        {
                            return Err(e);
                        }
                        continue;
                    }
                    first += rc as usize;
                }
                datagrams += per_call;
            }
        }
    }
    Ok((datagrams, syscalls))
}

/// Receives until the sender is done and nothing came for `IDLE`; returns
/// (datagrams, bytes, time from start to the last datagram).
fn receive(
    pattern: Pattern,
    rx: &UdpSocket,
    payload: usize,
    barrier: &Barrier,
    done: &AtomicBool,
) -> io::Result<(u64, u64, Duration)> {
    let fd = rx.as_raw_fd();
    let slot = if pattern == Pattern::Gso {
        GRO_SLOT
    } else {
        payload.max(1)
    };
    let slots = if pattern == Pattern::Sendto {
        1
    } else {
        RECV_SLOTS
    };
    let mut data = vec![0u8; slot * slots];
    let mut iovs: Vec<libc::iovec> = data
        .chunks_mut(slot)
        .map(|c| libc::iovec {
            iov_base: c.as_mut_ptr().cast(),
            iov_len: c.len(),
        })
        .collect();
    #[repr(C, align(8))]
    #[derive(Clone, Copy)]
    struct Control([u8; 64]);
    let mut controls = vec![Control([0; 64]); slots];
    // SAFETY: all-zero is a valid mmsghdr.
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; slots];
    let (mut datagrams, mut bytes) = (0u64, 0u64);
    barrier.wait();
    let start = Instant::now();
    let mut last = start;
    loop {
        let got = match pattern {
            Pattern::Sendto => {
                // SAFETY: the buffer is live and `slot` bytes long.
                let rc = unsafe {
                    libc::recvfrom(
                        fd,
                        data.as_mut_ptr().cast(),
                        slot,
                        libc::MSG_DONTWAIT,
                        ptr::null_mut(),
                        ptr::null_mut(),
                    )
                };
                if rc >= 0 {
                    datagrams += 1;
                    bytes += rc as u64;
                }
                rc
            }
            Pattern::Mmsg | Pattern::Gso => {
                for (i, hdr) in hdrs.iter_mut().enumerate() {
                    let msg = &mut hdr.msg_hdr;
                    msg.msg_iov = &raw mut iovs[i];
                    msg.msg_iovlen = 1;
                    msg.msg_control = controls[i].0.as_mut_ptr().cast();
                    msg.msg_controllen = 64;
                }
                // SAFETY: headers point at live iovecs over `data` and at live control space.
                let rc = unsafe {
                    libc::recvmmsg(
                        fd,
                        hdrs.as_mut_ptr(),
                        slots as libc::c_uint,
                        libc::MSG_DONTWAIT,
                        ptr::null_mut(),
                    )
                };
                for hdr in hdrs.iter().take(usize::try_from(rc).unwrap_or(0)) {
                    let len = hdr.msg_len as u64;
                    bytes += len;
                    datagrams += match gro_stride(&hdr.msg_hdr) {
                        Some(stride) if stride > 0 => len.div_ceil(stride),
                        _ => 1,
                    };
                }
                rc as isize
            }
        };
        if got >= 0 {
            last = Instant::now();
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                if !readable_within(fd, IDLE) && receiver_done(done, start) {
                    break;
                }
            }
            _ => return Err(e),
        }
    }
    Ok((datagrams, bytes, last - start))
}

/// Waits until `fd` has something to read or `timeout` passes; whether it has.
///
/// Receivers read without waiting while data is queued and only wait here
/// when the queue is empty, as Tern's receivers do through the reactor.
fn readable_within(fd: RawFd, timeout: Duration) -> bool {
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd, live for the call.
    unsafe { libc::poll(&mut pollfd, 1, ms) > 0 }
}

/// The GRO segment size the kernel attached to a received message.
fn gro_stride(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: the kernel wrote msg_controllen bytes of control messages into
    // our buffer; FIRSTHDR/NXTHDR stay inside them and end with null.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let size = ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return u64::try_from(size).ok();
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}
