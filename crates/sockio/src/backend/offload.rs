//! Offload: segmentation offload out, receive offload in.
//!
//! A segmented transmit leaves as `UDP_SEGMENT` super-datagrams of up to 64
//! segments and 65 507 bytes, which the kernel cuts into the datagrams (or
//! hands whole to a GRO receiver over loopback). Several of them, to several
//! destinations and with different segment sizes, go in one `sendmmsg`.
//! Receives use `recvmmsg` with `UDP_GRO`, whose control message gives the
//! stride to split each coalesced message by.
//!
//! When the kernel refuses a segmented message, [`msg::send_gated`] finds
//! out whether segmentation or the destination was at fault: only the
//! former turns GSO off, and only for a while.

use std::os::fd::{AsRawFd, RawFd};

use tokio::net::UdpSocket as TokioUdp;

use crate::backend::Stop;
use crate::backend::msg::{self, BatchSender, GsoGate, MsgScratch};
use crate::counters::Counters;
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::{Refusals, Transmit};

pub(crate) struct Offload {
    pub(crate) scratch: MsgScratch,
    gso: GsoGate,
}

impl Offload {
    pub(crate) fn new(batch: usize, v6: bool, max_segments: usize) -> Self {
        Self {
            scratch: MsgScratch::new(batch, v6),
            gso: GsoGate::new(max_segments),
        }
    }

    pub(crate) fn max_segments(&self) -> usize {
        self.gso.max_segments()
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

    pub(crate) fn recv(
        &mut self,
        io: &TokioUdp,
        bufs: &mut RecvBuffers,
        counters: &Counters,
    ) -> Result<usize, Stop> {
        msg::recv_batch(io.as_raw_fd(), &mut self.scratch, bufs, counters)
    }
}

impl BatchSender for Offload {
    fn gso(&mut self) -> &mut GsoGate {
        &mut self.gso
    }

    fn send_batch(
        &mut self,
        fd: RawFd,
        transmits: &[Transmit<'_>],
        cursor: &mut Cursor,
        max_segments: usize,
        counters: &Counters,
        refusals: &mut Refusals,
    ) -> Result<(), Stop> {
        msg::send_batch(
            fd,
            &mut self.scratch,
            transmits,
            cursor,
            max_segments,
            counters,
            refusals,
        )
    }
}
