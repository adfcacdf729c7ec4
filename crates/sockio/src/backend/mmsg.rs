//! Mmsg: `sendmmsg`/`recvmmsg`, up to a batch of plain datagrams per system
//! call. Segmented transmits are sent segment by segment.

use std::os::fd::AsRawFd;

use tokio::net::UdpSocket as TokioUdp;

use crate::backend::Stop;
use crate::backend::msg::{self, MsgScratch};
use crate::counters::Counters;
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::{Refusals, Transmit};

pub(crate) struct Mmsg {
    pub(crate) scratch: MsgScratch,
}

impl Mmsg {
    pub(crate) fn new(batch: usize, v6: bool) -> Self {
        Self {
            scratch: MsgScratch::new(batch, v6),
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
        msg::send_batch(
            io.as_raw_fd(),
            &mut self.scratch,
            transmits,
            cursor,
            1,
            counters,
            refusals,
        )
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
