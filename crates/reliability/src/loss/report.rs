//! What loss detection hands back: the sink that receives resolved packets,
//! and the summaries of an ACK, a loss round and a timer expiry.

use std::time::Duration;

use quanta::Instant;

use crate::sent_packets::{SentPacket, SpuriousLoss};

/// Receives the packets [`LossDetector`](super::LossDetector) resolves, as it resolves them.
///
/// The connection layer implements this to queue the frames of lost packets
/// for re-sending in new packets and to inform congestion control, or uses
/// [`RecoveryBuffer`].
pub trait RecoverySink<T> {
    /// `packet` was acknowledged for the first time.
    fn on_acked(&mut self, packet_number: u64, packet: SentPacket<T>);
    /// `packet` is declared lost: its content should be re-sent as new frames.
    fn on_lost(&mut self, packet_number: u64, packet: SentPacket<T>);
    /// A packet declared lost earlier was acknowledged after all.
    fn on_spurious_loss(&mut self, loss: SpuriousLoss);
}

/// A [`RecoverySink`] that collects everything in vectors the caller reuses
/// (call [`RecoveryBuffer::clear`] between ACKs: capacity is kept, so the
/// steady state does not allocate).
#[derive(Debug)]
pub struct RecoveryBuffer<T> {
    /// Newly acknowledged packets, in the order found (ranges largest first,
    /// each ascending).
    pub acked: Vec<(u64, SentPacket<T>)>,
    /// Packets declared lost, oldest first.
    pub lost: Vec<(u64, SentPacket<T>)>,
    /// Losses proven spurious.
    pub spurious: Vec<SpuriousLoss>,
}

impl<T> RecoveryBuffer<T> {
    /// Empty buffers with room for `capacity` acknowledged and lost packets each.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            acked: Vec::with_capacity(capacity),
            lost: Vec::with_capacity(capacity),
            spurious: Vec::new(),
        }
    }

    /// Empties all three vectors, keeping their capacity.
    pub fn clear(&mut self) {
        self.acked.clear();
        self.lost.clear();
        self.spurious.clear();
    }
}

impl<T> Default for RecoveryBuffer<T> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<T> RecoverySink<T> for RecoveryBuffer<T> {
    fn on_acked(&mut self, packet_number: u64, packet: SentPacket<T>) {
        self.acked.push((packet_number, packet));
    }
    fn on_lost(&mut self, packet_number: u64, packet: SentPacket<T>) {
        self.lost.push((packet_number, packet));
    }
    fn on_spurious_loss(&mut self, loss: SpuriousLoss) {
        self.spurious.push(loss);
    }
}

/// What one round of loss detection (one ACK frame, or one expiry of the
/// loss timer) declared lost: what congestion control needs to know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LossReport {
    /// Packets declared lost (handed to the sink).
    pub packets: usize,
    /// Of those, packets that had counted toward bytes in flight: the ones
    /// congestion control reacts to.
    pub in_flight_packets: usize,
    /// Their bytes.
    pub bytes: u64,
    /// When the newest of the in-flight ones was sent; `None` if none was in
    /// flight. RFC 9002 §7.3.2: a loss of a packet sent before the current
    /// recovery period began does not start a new congestion event.
    pub largest_sent_at: Option<Instant>,
    /// Persistent congestion is established (RFC 9002 §7.6): the window must
    /// collapse to its minimum. Only the tracker can tell: it alone knows the
    /// send times of the run of lost packets and whether any packet sent in
    /// between was delivered.
    pub persistent_congestion: bool,
}

/// What one ACK frame changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckSummary {
    /// Packets acknowledged for the first time.
    pub newly_acked: usize,
    /// Their bytes that had counted toward bytes in flight.
    pub acked_bytes: u64,
    /// When the largest newly acknowledged packet was sent; `None` if
    /// nothing was newly acknowledged. RFC 9002 §7.3.2: the window does not
    /// grow for packets sent before the current recovery period began.
    pub largest_acked_sent_at: Option<Instant>,
    /// What loss detection declared lost while processing this ACK.
    pub lost: LossReport,
    /// Previously lost packets this ACK proved delivered (each handed to the
    /// sink's [`RecoverySink::on_spurious_loss`]).
    pub spurious: usize,
    /// The raw RTT sample taken from this ACK, if it qualified (RFC 9002 §5.1).
    pub rtt_sample: Option<Duration>,
    /// When [`LossDetector::on_timeout`](super::LossDetector::on_timeout) should next run (same as
    /// [`LossDetector::poll_timeout`](super::LossDetector::poll_timeout)).
    pub timer: Option<Instant>,
}

/// What [`LossDetector::on_timeout`](super::LossDetector::on_timeout) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerEvent {
    /// No timer had expired.
    Idle,
    /// The loss timer expired and packets were declared lost (handed to the sink).
    LossDeclared(LossReport),
    /// The probe timeout expired: send one or two ack-eliciting packets now.
    ///
    /// RFC 9002 §6.2.4: "When a PTO timer expires, a sender MUST send at least
    /// one ack-eliciting packet in the packet number space as a probe. An
    /// endpoint MAY send up to two full-sized datagrams containing
    /// ack-eliciting packets". Probes may carry new data or the frames of the
    /// oldest unacked packet ([`LossDetector::unacked`](super::LossDetector::unacked)), or a PING.
    Probe {
        /// Consecutive probe timeouts without an ACK (1 on the first).
        pto_count: u32,
    },
}

/// Running totals since the detector was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LossStats {
    /// Packets acknowledged (first acknowledgements only).
    pub acked: u64,
    /// Packets declared lost.
    pub lost: u64,
    /// Of those, packets later acknowledged: losses declared in error.
    pub spurious: u64,
    /// Probe timeouts that expired.
    pub probe_timeouts: u64,
    /// Times persistent congestion was established.
    pub persistent_congestion: u64,
}
