//! Figures about a connection ([`ConnectionStats`]): what it counted, and
//! what its loss detector, congestion controller and path report.

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
