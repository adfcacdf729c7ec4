//! Portable: one datagram per system call through tokio's `send_to` and
//! `recv_from`, on any OS tokio supports. The baseline every other backend is
//! measured against, and the last fallback.

use std::io;
use std::net::{SocketAddr, SocketAddrV6};

use tokio::net::UdpSocket as TokioUdp;

use crate::backend::Stop;
use crate::counters::{Counters, bump};
use crate::cursor::Cursor;
use crate::recv::{RecvBuffers, RecvMeta};
use crate::transmit::{RefusalReason, Refusals, Transmit};

pub(crate) struct Portable {
    v6: bool,
}

impl Portable {
    pub(crate) fn new(v6: bool) -> Self {
        Self { v6 }
    }

    pub(crate) fn send(
        &mut self,
        io: &TokioUdp,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop> {
        loop {
            let mut next = *cursor;
            let Some(chunk) = next.next_chunk(transmits, 1, usize::MAX) else {
                return Ok(());
            };
            let destination = match chunk.destination {
                SocketAddr::V4(a) if self.v6 => {
                    SocketAddr::V6(SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0))
                }
                other => other,
            };
            bump(&counters.send_syscalls, 1);
            let result = match chunk.ttl {
                None => io.try_send_to(chunk.bytes, destination),
                Some(ttl) => send_with_ttl(io, chunk.bytes, destination, ttl),
            };
            match result {
                Ok(_) => {
                    bump(&counters.datagrams_sent, 1);
                    bump(&counters.bytes_sent, chunk.bytes.len() as u64);
                    *cursor = next;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Stop::WouldBlock),
                Err(e) => match refusal(&e) {
                    Some(reason) => {
                        tracing::debug!(error = %e, "sockio: datagram refused for its destination, skipped");
                        bump(&counters.send_errors, 1);
                        refusals.push(cursor.transmit, reason);
                        *cursor = next;
                    }
                    None => return Err(Stop::Failed(e)),
                },
            }
        }
    }

    /// Fills slots one `recv_from` at a time until the queue is empty or the
    /// slots run out.
    pub(crate) fn recv(
        &mut self,
        io: &TokioUdp,
        bufs: &mut RecvBuffers,
        counters: &Counters,
    ) -> Result<usize, Stop> {
        let mut filled = 0;
        let mut bytes = 0;
        while filled < bufs.slots() {
            bump(&counters.recv_syscalls, 1);
            match io.try_recv_from(bufs.slot_mut(filled)) {
                Ok((len, source)) => {
                    bufs.set_meta(
                        filled,
                        RecvMeta {
                            source,
                            len,
                            stride: len,
                        },
                    );
                    bytes += len;
                    filled += 1;
                }
                Err(e) => match e.kind() {
                    // An ICMP error for an earlier send (Windows reports it here): read on.
                    io::ErrorKind::Interrupted
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionRefused => {}
                    io::ErrorKind::WouldBlock => break,
                    _ if filled > 0 => break,
                    _ => return Err(Stop::Failed(e)),
                },
            }
        }
        bufs.set_filled(filled);
        if filled == 0 {
            return Err(Stop::WouldBlock);
        }
        bump(&counters.datagrams_received, filled as u64);
        bump(&counters.bytes_received, bytes as u64);
        bump(&counters.recv_batches, 1);
        Ok(filled)
    }
}

/// Sends one datagram with its own time to live: the socket's option set
/// around the send and put back after (no ancillary data here). An option
/// the OS refuses fails the datagram alone, as refused by local policy:
/// sent with the socket's usual time to live, it would go further than its
/// sender meant.
fn send_with_ttl(
    io: &TokioUdp,
    bytes: &[u8],
    destination: SocketAddr,
    ttl: u8,
) -> io::Result<usize> {
    let socket = socket2::SockRef::from(io);
    let denied = |e: io::Error| io::Error::new(io::ErrorKind::PermissionDenied, e);
    let v6_path = matches!(destination, SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_none());
    if v6_path {
        let usual = socket.unicast_hops_v6().map_err(denied)?;
        socket.set_unicast_hops_v6(u32::from(ttl)).map_err(denied)?;
        let sent = io.try_send_to(bytes, destination);
        socket.set_unicast_hops_v6(usual)?;
        sent
    } else {
        let usual = socket.ttl_v4().map_err(denied)?;
        socket.set_ttl_v4(u32::from(ttl)).map_err(denied)?;
        let sent = io.try_send_to(bytes, destination);
        socket.set_ttl_v4(usual)?;
        sent
    }
}

/// Why the kernel refused a datagram for its destination or size alone;
/// `None` for an error that concerns the socket.
fn refusal(e: &io::Error) -> Option<RefusalReason> {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::EMSGSIZE) {
        return Some(RefusalReason::TooLarge);
    }
    match e.kind() {
        io::ErrorKind::ConnectionRefused
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::NetworkDown => Some(RefusalReason::Unreachable),
        io::ErrorKind::AddrNotAvailable | io::ErrorKind::InvalidInput => {
            Some(RefusalReason::InvalidDestination)
        }
        io::ErrorKind::PermissionDenied => Some(RefusalReason::Denied),
        _ => None,
    }
}
