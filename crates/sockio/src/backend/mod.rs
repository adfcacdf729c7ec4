//! The backends behind [`crate::UdpSocket`]: one file each, one shape.
//!
//! Every backend sends from a [`Cursor`] (moving it past what went out) and
//! receives into the caller's [`RecvBuffers`]; the socket wraps both in tokio
//! readiness and handles a [`Stop::Refused`] by falling back. Portable is
//! built everywhere; the others need Linux.

use std::io;

use tokio::net::UdpSocket as TokioUdp;

use crate::config::Backend;
use crate::counters::Counters;
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::{Refusals, Transmit};

#[cfg(target_os = "linux")]
pub(crate) mod mmsg;
#[cfg(target_os = "linux")]
pub(crate) mod msg;
#[cfg(target_os = "linux")]
pub(crate) mod offload;
pub(crate) mod portable;
#[cfg(target_os = "linux")]
pub(crate) mod uring;

/// Why a backend stopped before the end of a batch.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The socket has no room (send) or nothing queued (receive).
    WouldBlock,
    /// The kernel refused a segmented message (segmentation or its
    /// destination at fault); nothing of it was sent.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    GsoRefused(io::Error),
    /// The kernel refused the backend itself; nothing of the current message
    /// was sent and the socket must fall back.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Refused(io::Error),
    /// An error for the caller.
    Failed(io::Error),
}

/// One socket's backend and its scratch state.
pub(crate) enum State {
    Portable(portable::Portable),
    #[cfg(target_os = "linux")]
    Mmsg(mmsg::Mmsg),
    #[cfg(target_os = "linux")]
    Offload(offload::Offload),
    #[cfg(target_os = "linux")]
    /// Boxed: the ring's bookkeeping dwarfs the other variants.
    IoUring(Box<uring::Uring>),
}

impl State {
    /// Sets up `backend` for a socket of the given family with `batch`
    /// messages of scratch; GSO up to `gso_segments` segments per message
    /// (1 = off) where the backend uses it.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub(crate) fn new(
        backend: Backend,
        batch: usize,
        v6: bool,
        gso_segments: usize,
    ) -> io::Result<Self> {
        Ok(match backend {
            Backend::Portable => Self::Portable(portable::Portable::new(v6)),
            #[cfg(target_os = "linux")]
            Backend::Mmsg => Self::Mmsg(mmsg::Mmsg::new(batch, v6)),
            #[cfg(target_os = "linux")]
            Backend::Offload => Self::Offload(offload::Offload::new(batch, v6, gso_segments)),
            #[cfg(target_os = "linux")]
            Backend::IoUring => {
                Self::IoUring(Box::new(uring::Uring::new(batch, v6, gso_segments)?))
            }
            #[cfg(not(target_os = "linux"))]
            _ => Self::Portable(portable::Portable::new(v6)),
        })
    }

    pub(crate) fn kind(&self) -> Backend {
        match self {
            Self::Portable(_) => Backend::Portable,
            #[cfg(target_os = "linux")]
            Self::Mmsg(_) => Backend::Mmsg,
            #[cfg(target_os = "linux")]
            Self::Offload(_) => Backend::Offload,
            #[cfg(target_os = "linux")]
            Self::IoUring(_) => Backend::IoUring,
        }
    }

    /// Segments this backend puts in one message now (1 without GSO).
    pub(crate) fn max_segments(&self) -> usize {
        match self {
            Self::Portable(_) => 1,
            #[cfg(target_os = "linux")]
            Self::Mmsg(_) => 1,
            #[cfg(target_os = "linux")]
            Self::Offload(b) => b.max_segments(),
            #[cfg(target_os = "linux")]
            Self::IoUring(b) => b.max_segments(),
        }
    }

    /// Whether received messages may be GRO-coalesced.
    pub(crate) fn reads_gro_stride(&self) -> bool {
        match self {
            Self::Portable(_) => false,
            #[cfg(target_os = "linux")]
            Self::Mmsg(_) => false,
            #[cfg(target_os = "linux")]
            Self::Offload(_) | Self::IoUring(_) => true,
        }
    }

    pub(crate) fn send(
        &mut self,
        io: &TokioUdp,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop> {
        match self {
            Self::Portable(b) => b.send(io, transmits, cursor, counters, refusals),
            #[cfg(target_os = "linux")]
            Self::Mmsg(b) => b.send(io, transmits, cursor, counters, refusals),
            #[cfg(target_os = "linux")]
            Self::Offload(b) => b.send(io, transmits, cursor, counters, refusals),
            #[cfg(target_os = "linux")]
            Self::IoUring(b) => b.send(io, transmits, cursor, counters, refusals),
        }
    }

    pub(crate) fn recv(
        &mut self,
        io: &TokioUdp,
        bufs: &mut RecvBuffers,
        counters: &Counters,
    ) -> Result<usize, Stop> {
        match self {
            Self::Portable(b) => b.recv(io, bufs, counters),
            #[cfg(target_os = "linux")]
            Self::Mmsg(b) => b.recv(io, bufs, counters),
            #[cfg(target_os = "linux")]
            Self::Offload(b) => b.recv(io, bufs, counters),
            #[cfg(target_os = "linux")]
            Self::IoUring(b) => b.recv(io, bufs, counters),
        }
    }
}
