//! Errors, one enum per operation.

use std::time::Duration;

/// Why [`crate::LossDetector::on_sent`] (or [`crate::SentPackets::push`]) refused a packet.
///
/// These are programming errors of the caller, not network input; they are
/// still reported rather than panicking so a bug cannot crash an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Packet numbers must strictly increase: each one is also an AEAD nonce.
    #[error("packet number {packet_number} is not above the largest sent, {largest_sent}")]
    NotIncreasing {
        /// The refused packet number.
        packet_number: u64,
        /// The largest packet number already sent.
        largest_sent: u64,
    },
    /// Packet numbers stop at [`crate::MAX_PACKET_NUMBER`] (2^62 − 1, the
    /// largest varint); a connection rekeys or closes long before.
    #[error("packet number {0} exceeds the largest allowed")]
    OutOfRange(u64),
    /// A sender may skip a few packet numbers (to catch optimistic ACKs), not
    /// millions: every skipped number costs a tracking slot.
    #[error("packet number {packet_number} skips {skipped} numbers (at most {limit} allowed)")]
    GapTooLarge {
        /// The refused packet number.
        packet_number: u64,
        /// How many numbers it would skip.
        skipped: u64,
        /// The most that may be skipped at once.
        limit: u64,
    },
    /// The packet would make the tracker hold more packet numbers than
    /// its limit (see [`crate::SentPackets::set_max_tracked`]): the peer
    /// acknowledges too little for what it is sent.
    #[error("{tracked} packet numbers tracked, at most {limit} allowed")]
    TooManyTracked {
        /// The numbers the tracker would hold with this packet.
        tracked: u64,
        /// The most it may hold.
        limit: u64,
    },
}

/// Why an ACK frame was refused by [`crate::LossDetector::on_ack`].
///
/// Every variant means the peer is broken or hostile; RFC 9000 §13.1 says an
/// endpoint "SHOULD treat receipt of an acknowledgment for a packet it did not
/// send as a connection error of type PROTOCOL_VIOLATION". The tracker's state
/// is unchanged when an error is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// The ACK carried no range at all.
    #[error("ACK carries no range")]
    NoRanges,
    /// A range whose start lies above its end.
    #[error("ACK range {start}..={end} is inverted")]
    InvertedRange {
        /// The range's first packet number.
        start: u64,
        /// The range's last packet number.
        end: u64,
    },
    /// Ranges must come largest first and must not overlap.
    #[error(
        "ACK range ending at {end} is not below the previous range starting at {previous_start}"
    )]
    RangesNotDescending {
        /// The end of the offending range.
        end: u64,
        /// The start of the range before it.
        previous_start: u64,
    },
    /// The ACK covers a packet number this side never sent (above the largest
    /// sent, or one it deliberately skipped).
    #[error("ACK covers packet number {packet_number}, which was never sent")]
    UnsentPacket {
        /// The first never-sent number found.
        packet_number: u64,
    },
    /// The reported ack delay exceeds what any peer may claim.
    #[error("ack delay {ack_delay:?} exceeds the limit {limit:?}")]
    AckDelayTooLarge {
        /// The delay the peer reported.
        ack_delay: Duration,
        /// The configured limit ([`crate::LossConfig::ack_delay_limit`]).
        limit: Duration,
    },
}

/// Why [`crate::ReplayWindow`] refused a packet number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// This packet number was already accepted.
    #[error("packet number {0} was already received")]
    Duplicate(u64),
    /// The packet number lies below the window: it cannot be told apart from a replay.
    #[error("packet number {0} is too old to judge")]
    TooOld(u64),
}
