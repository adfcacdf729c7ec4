//! Figures about a connection ([`ConnectionStats`]): what it counted
//! ([`Counters`]), and what its loss detector, congestion controller and
//! path report.

use std::time::Duration;

use crate::CongestionKind;

/// Figures about one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// The congestion controller that governs what this side sends.
    pub congestion: CongestionKind,
    /// Congestion window in bytes.
    pub window: u64,
    /// Bytes in flight now.
    pub bytes_in_flight: u64,
    /// Datagrams and bytes sent.
    pub sent_packets: u64,
    /// UDP payload bytes sent.
    pub sent_bytes: u64,
    /// Datagrams received and authenticated.
    pub received_packets: u64,
    /// UDP payload bytes received in authenticated packets.
    pub received_bytes: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Losses later proven spurious.
    pub spurious_losses: u64,
    /// Window reductions the congestion controller undid because every
    /// loss behind them proved spurious.
    pub undone_reductions: u64,
    /// The wait the path's reordering has added to loss detection's time
    /// threshold (zero until a loss proved spurious).
    pub reordering_window: Duration,
    /// Datagrams that did not authenticate (forged, corrupted, stale).
    pub dropped_unauthenticated: u64,
    /// Authenticated packets that were duplicates or too old.
    pub dropped_duplicates: u64,
    /// The current maximum UDP payload of the path.
    pub path_mtu: usize,
    /// Key updates this side made.
    pub key_updates: u64,
    /// Address changes of the peer that were validated.
    pub migrations: u64,
    /// Unreliable datagrams dropped: too large when sent, or the send or
    /// receive queue was full.
    pub datagrams_dropped: u64,
    /// Of [`datagrams_dropped`](Self::datagrams_dropped), those dropped
    /// from a full send queue (the oldest, for a newer one): a sender
    /// outrunning its path, as opposed to a peer's full receive queue.
    pub datagrams_send_queue_dropped: u64,
    /// Bytes held to send: stream bytes and messages until acknowledged,
    /// datagrams until sent. Bounded by the configuration whatever the peer
    /// grants (see [`ConnectionConfig`](crate::ConnectionConfig)).
    pub send_memory: usize,
    /// Bytes of memory held for what the peer sent and the application has
    /// not taken (stream pages, large messages being put together,
    /// messages and datagrams not yet taken); bounded by the receive
    /// window plus a small slack per stream.
    pub receive_memory: usize,
    /// Authenticated packets dropped unacknowledged because they carried
    /// application data before the identity proof this side requires
    /// (the peer sends the data again).
    pub held_before_proof: u64,
}

/// What a connection counts itself, exactly, for its [`ConnectionStats`];
/// the rest of them are read from the parts that know them when asked.
///
/// Every packet counts in the first four; the rest count what a connection
/// carrying data the usual way rarely or never sees (a drop, a migration,
/// a key update), so they live out of line until the first of them is
/// counted: an idle connection holds 40 bytes here rather than the 192 of
/// the figures it reports.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) sent_packets: u64,
    pub(super) sent_bytes: u64,
    pub(super) received_packets: u64,
    pub(super) received_bytes: u64,
    rare: Option<Box<RareCounters>>,
}

/// The counters [`Counters`] keeps out of line: see the fields of
/// [`ConnectionStats`] of the same names.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RareCounters {
    pub(super) dropped_unauthenticated: u64,
    pub(super) dropped_duplicates: u64,
    pub(super) held_before_proof: u64,
    pub(super) datagrams_dropped: u64,
    pub(super) datagrams_send_queue_dropped: u64,
    pub(super) migrations: u64,
    pub(super) key_updates: u64,
    /// Reductions undone by congestion controllers given back since.
    pub(super) undone_reductions: u64,
}

impl Counters {
    /// The rare counters, to count in: allocated at the first.
    pub(super) fn rare(&mut self) -> &mut RareCounters {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The figures counted, the others left at zero for the caller.
    pub(super) fn figures(&self) -> ConnectionStats {
        let rare = self.rare.as_deref().copied().unwrap_or_default();
        ConnectionStats {
            sent_packets: self.sent_packets,
            sent_bytes: self.sent_bytes,
            received_packets: self.received_packets,
            received_bytes: self.received_bytes,
            dropped_unauthenticated: rare.dropped_unauthenticated,
            dropped_duplicates: rare.dropped_duplicates,
            held_before_proof: rare.held_before_proof,
            datagrams_dropped: rare.datagrams_dropped,
            datagrams_send_queue_dropped: rare.datagrams_send_queue_dropped,
            migrations: rare.migrations,
            key_updates: rare.key_updates,
            undone_reductions: rare.undone_reductions,
            ..ConnectionStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Counters;

    #[test]
    fn counters_report_what_was_counted_and_allocate_at_the_first_rare_one() {
        let mut counters = Counters::default();
        counters.sent_packets += 2;
        counters.received_bytes += 1_200;
        assert!(counters.rare.is_none());
        let figures = counters.figures();
        assert_eq!((figures.sent_packets, figures.received_bytes), (2, 1_200));
        assert_eq!(figures.dropped_duplicates, 0);
        counters.rare().dropped_duplicates += 1;
        counters.rare().key_updates += 3;
        assert!(counters.rare.is_some());
        let figures = counters.figures();
        assert_eq!((figures.dropped_duplicates, figures.key_updates), (1, 3));
        assert_eq!(figures.sent_packets, 2);
    }
}
