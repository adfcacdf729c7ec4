//! Offload: segmentation offload out, receive offload in.
//!
//! A segmented transmit leaves as `UDP_SEGMENT` super-datagrams of up to 64
//! segments and 65 507 bytes, which the kernel cuts into the datagrams (or
//! hands whole to a GRO receiver over loopback). Several of them, to several
//! destinations and with different segment sizes, go in one `sendmmsg`.
//! Receives use `recvmmsg` with `UDP_GRO`, whose control message gives the
//! stride to split each coalesced message by.
//!
//! When the kernel refuses GSO at run time (`EIO` from a device without
//! checksum offload, `EINVAL` for a path that cannot take the segment size),
//! the refused message was not sent: the socket stops using GSO, counts a
//! fallback and sends the rest of the batch, starting with that message, as
//! plain datagrams.

use std::os::fd::AsRawFd;

use tokio::net::UdpSocket as TokioUdp;

use crate::backend::Stop;
use crate::backend::msg::{self, MsgScratch};
use crate::counters::Counters;
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::Transmit;

pub(crate) struct Offload {
    pub(crate) scratch: MsgScratch,
    /// Segments per message; 1 once the kernel refused GSO.
    max_segments: usize,
}

impl Offload {
    pub(crate) fn new(batch: usize, v6: bool, max_segments: usize) -> Self {
        Self {
            scratch: MsgScratch::new(batch, v6),
            max_segments: max_segments.max(1),
        }
    }

    pub(crate) fn max_segments(&self) -> usize {
        self.max_segments
    }

    pub(crate) fn send(
        &mut self,
        io: &TokioUdp,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        counters: &Counters,
    ) -> Result<(), Stop> {
        loop {
            match msg::send_batch(
                io.as_raw_fd(),
                &mut self.scratch,
                transmits,
                cursor,
                self.max_segments,
                counters,
            ) {
                Err(Stop::GsoRefused(e))
                    if msg::give_up_gso(&mut self.max_segments, &e, counters) => {}
                other => return other,
            }
        }
    }

    pub(crate) fn recv(
        &mut self,
        io: &TokioUdp,
        bufs: &mut RecvBuffers,
        counters: &Counters,
    ) -> Result<usize, Stop> {
        msg::recv_batch(io.as_raw_fd(), &mut self.scratch, bufs, counters)
    }
}
