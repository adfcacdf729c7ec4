//! Tern's batched UDP I/O: the only Tern crate that makes network system calls.
//!
//! It moves datagrams and nothing else — no crypto, no protocol. The endpoint
//! driver hands it a batch of [`Transmit`]s (destination, contents, optional
//! segment size) and gets back how far the batch went ([`Sent`]); it receives
//! a batch into reusable, caller-owned [`RecvBuffers`], each message with its
//! source, length and GRO stride. After bind, neither allocates.
//!
//! Syscalls were most of the reference transport's per-packet time (one
//! `send_to` per packet), so the backends exist to put many datagrams in one
//! system call:
//!
//! | [`Backend`] | send | receive |
//! |---|---|---|
//! | `Offload` | `sendmmsg` of `UDP_SEGMENT` super-datagrams (≤ 64 segments each) | `recvmmsg` with `UDP_GRO`, split by stride |
//! | `Mmsg` | `sendmmsg` | `recvmmsg` |
//! | `IoUring` | a chain of `SENDMSG` per `io_uring_enter` (GSO when available) | a chain of `RECVMSG` (GRO when available) |
//! | `Portable` | `send_to`, one per datagram, any OS | `recv_from` |
//!
//! [`SocketConfig::backend`] or the [`BACKEND_ENV`] variable force one;
//! otherwise bind probes the kernel ([`Capabilities`]) and takes the best.
//! When the kernel refuses a feature at run time (GSO on a device without
//! checksum offload, io_uring denied), the socket falls back and re-sends
//! without losing or repeating a datagram; GSO is tried again a while later.
//! A datagram refused for its destination or size alone (an unreachable
//! peer, port 0, larger than the path with [`MtuDiscovery::Do`]) fails on
//! its own: it is skipped, counted and listed in [`UdpSocket::refusals`],
//! and the rest of the batch, and every other peer, is unaffected.
//! Counters ([`CounterSnapshot`]) show datagrams per system call, drops and
//! fallbacks live.
//!
//! On Linux it also has the driver's [`PreciseTimer`]: a `timerfd` the
//! reactor waits on beside the socket, to the nanosecond where tokio's own
//! timer counts milliseconds.
//!
//! # Example
//! ```
//! use std::net::SocketAddr;
//! use tern_sockio::{SocketConfig, Transmit, UdpSocket};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
//! let mut receiver = UdpSocket::bind(loopback, SocketConfig::default())?;
//! let mut sender = UdpSocket::bind(loopback, SocketConfig::default())?;
//! let to = receiver.local_addr()?;
//!
//! // Three 100-byte datagrams in one transmit, and one more on its own.
//! let run = [7u8; 300];
//! let batch = [
//!     Transmit::new(to, &run).with_segment_size(100),
//!     Transmit::new(to, b"hello"),
//! ];
//! sender.send_all(&batch).await?;
//!
//! let mut bufs = receiver.new_recv_buffers();
//! let mut got = Vec::new();
//! while got.len() < 4 {
//!     receiver.recv(&mut bufs).await?;
//!     got.extend(bufs.datagrams().map(|(_, d)| d.len()));
//! }
//! assert_eq!(got, [100, 100, 100, 5]);
//! assert_eq!(sender.counters().datagrams_sent, 4);
//! # Ok(())
//! # }
//! ```

mod backend;
mod capabilities;
mod config;
mod counters;
mod cursor;
mod interfaces;
mod recv;
mod socket;
mod sockopt;
#[cfg(target_os = "linux")]
mod timer;
mod transmit;

pub use capabilities::Capabilities;
pub use config::{BACKEND_ENV, Backend, GRO_SLOT_LEN, MtuDiscovery, SocketConfig, UnknownBackend};
pub use counters::{CounterSnapshot, CountersHandle};
pub use interfaces::interface_addresses;
pub use recv::{RecvBuffers, RecvMeta};
pub use socket::UdpSocket;
#[cfg(target_os = "linux")]
pub use timer::PreciseTimer;
pub use transmit::{RefusalReason, SendRefusal, Sent, Transmit};

#[cfg(test)]
mod tests;
