//! What a connection reports about itself: its figures
//! ([`ConnectionStats`]) and the bytes it holds for data, to send and
//! received — what an endpoint-wide budget sums over its connections —
//! and the hooks that budget acts through.

use super::{Connection, ConnectionStats, MESSAGE_CHARGE, State};

impl Connection {
    /// Figures about the connection.
    pub fn stats(&self) -> ConnectionStats {
        let mut stats = self.stats.figures();
        stats.rtt = self.loss.rtt().smoothed();
        stats.congestion = self.config.congestion.kind();
        stats.window = self.window();
        stats.bytes_in_flight = self.loss.bytes_in_flight();
        let loss = self.loss.stats();
        stats.lost_packets = loss.lost;
        stats.spurious_losses = loss.spurious;
        if let Some(transfer) = &self.transfer {
            stats.undone_reductions += transfer.controller.undone_reductions();
        }
        stats.reordering_window = self.loss.reordering_window();
        stats.path_mtu = self.path.mtu().current();
        stats.send_memory = self.send_memory();
        stats.receive_memory = self.receive_memory();
        stats
    }

    /// Bytes this connection holds for data: stream buffers, messages held
    /// until acknowledged, messages and datagrams not yet taken.
    pub fn buffered_bytes(&self) -> usize {
        self.streams.memory()
            + self.messages_held
            + self.inbox.bytes()
            + self.datagrams_in.bytes()
            + self.datagrams_taken
            + self.datagrams_out.bytes()
    }

    /// Bytes held to send, bounded by the configuration alone (see
    /// [`ConnectionConfig`](crate::ConnectionConfig)): stream bytes and
    /// messages until acknowledged, datagrams until sent. O(1).
    pub(crate) fn send_memory(&self) -> usize {
        self.streams.send_buffered()
            + self.streams.message_bytes()
            + self.messages_held
            + self.datagrams_out.bytes()
    }

    /// Bytes of memory this connection holds for what the peer sent and
    /// the application has not taken: stream pages (in use, or kept for
    /// reuse), the records of their runs, large messages being put
    /// together, and messages and datagrams delivered and not yet taken.
    ///
    /// Flow control bounds it: stream bytes and messages count against the
    /// connection's receive window until the application takes them (a
    /// small message its bytes plus `MESSAGE_CHARGE`), but for one large
    /// message at a time, so the whole is at most the receive window, plus
    /// one large message (`max_message_size`), plus a page at each end of
    /// each stream's runs of bytes and the pool's spare pages (together
    /// within the pages the window spans), plus the records of the runs
    /// (at most twice the bytes they hold, past 256 runs per stream), plus
    /// the datagram queue (`datagram_receive_queue` datagrams of a packet,
    /// here or taken out and not reported consumed, and as many more
    /// arrived since the last take).
    pub(crate) fn receive_memory(&self) -> usize {
        self.streams.receive_memory()
            + self.inbox.bytes()
            + self.inbox.len() * MESSAGE_CHARGE as usize
            + self.datagrams_in.bytes()
            + self.datagrams_taken
    }
}

/// A connection's part in its endpoint's memory budget (see
/// `endpoint::budget`).
impl Connection {
    /// What the connection is charged against the endpoint's budget:
    /// the memory it holds to send and received, the room of its
    /// sent-packet ring (which only the peer's acknowledgements shrink:
    /// a peer that never acknowledges grows it to `recovery::max_tracked`
    /// records), and the connection credit granted to the peer and not
    /// used yet (a promise: the peer may send it without asking), in
    /// bytes. Receive memory grows only into credit already charged, but
    /// for page and record overheads and datagrams. A connection that
    /// closed grants nothing more.
    pub(crate) fn memory_charge(&self) -> (u64, u64) {
        let held = self.send_memory() + self.receive_memory() + self.loss.sent_packets().memory();
        let open = matches!(self.state, State::Connecting(_) | State::Established);
        let credit = if open {
            self.streams.unused_credit()
        } else {
            0
        };
        (held as u64, credit)
    }

    /// Lends the connection `room` bytes of credit it may grant its peer
    /// until the next call; an update that waited for room is granted if
    /// it now fits.
    pub(crate) fn lend_credit_room(&mut self, room: u64) {
        self.streams.lend_credit_room(room);
    }

    /// Credit granted to the peer since the last call, in bytes.
    pub(crate) fn take_granted(&mut self) -> u64 {
        self.streams.take_granted()
    }

    /// Whether the application read enough to earn the peer more credit,
    /// and the update waits for room in the budget.
    pub(crate) fn credit_wanted(&self) -> bool {
        self.streams.credit_wanted() && matches!(self.state, State::Established)
    }
}
