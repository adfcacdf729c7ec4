//! Loss detection and the probe timeout, in the manner of RFC 9002 §6.
//!
//! [`LossDetector`] owns the sent-packet record and the RTT estimator. The
//! connection tells it what it sent ([`LossDetector::on_sent`]), hands it each
//! ACK frame ([`LossDetector::on_ack`]) and wakes it when its timer expires
//! ([`LossDetector::on_timeout`]). Acknowledged, lost and spuriously lost
//! packets are handed to a caller-supplied [`RecoverySink`] as they are found,
//! so nothing is allocated per ACK.

use std::ops::RangeInclusive;
use std::time::Duration;

use quanta::Instant;

use crate::error::{AckError, SendError};
use crate::rtt::{DEFAULT_INITIAL_RTT, RttEstimator};
use crate::sent_packets::{Resolved, SentPacket, SentPackets, SpuriousLoss};

/// RFC 9002 §6.1.2: "The RECOMMENDED time threshold (kTimeThreshold),
/// expressed as an RTT multiplier, is 9/8." Numerator and denominator.
const TIME_THRESHOLD: (u32, u32) = (9, 8);

/// The PTO doubles at most this many times (2^16 × PTO is already beyond
/// any idle timeout); the cap only keeps the arithmetic finite.
const MAX_PTO_BACKOFF_EXPONENT: u32 = 16;

/// RFC 9002 §7.6.1: the persistent congestion duration is the PTO times
/// "kPersistentCongestionThreshold", whose "RECOMMENDED value ... is 3".
const PERSISTENT_CONGESTION_THRESHOLD: u32 = 3;

/// Records of lost packets are kept this many PTOs (the persistent
/// congestion duration), long enough for a late (reordered or delayed) ACK
/// to prove the loss spurious.
const LOST_RECORD_PTOS: u32 = PERSISTENT_CONGESTION_THRESHOLD;

/// Parameters of loss detection. Construct with [`LossConfig::default`] and
/// change fields as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LossConfig {
    /// RTT assumed before the first sample (RFC 9002 §6.2.2: 333 ms, or the
    /// smoothed RTT of a previous connection to the same peer).
    pub initial_rtt: Duration,
    /// The longest the peer promises to delay an ACK (its max ack delay, 25 ms
    /// by default). Reported ack delays are capped to it for RTT estimation and
    /// it is part of the probe timeout.
    pub peer_max_ack_delay: Duration,
    /// Packets acknowledged after an unacknowledged one before it is declared
    /// lost. RFC 9002 §6.1.1: "The RECOMMENDED initial value for the packet
    /// reordering threshold (kPacketThreshold) is 3"; implementations "SHOULD
    /// NOT use a packet threshold less than 3".
    pub packet_threshold: u64,
    /// The local timer granularity (RFC 9002 §6.1.2: "The RECOMMENDED value of
    /// the timer granularity (kGranularity) is 1 millisecond").
    pub granularity: Duration,
    /// Reported ack delays above this are refused as hostile. Default 16.384 s:
    /// RFC 9000 §18.2 declares max_ack_delay "values of 2^14 or greater"
    /// (milliseconds) invalid.
    pub ack_delay_limit: Duration,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            initial_rtt: DEFAULT_INITIAL_RTT,
            peer_max_ack_delay: Duration::from_millis(25),
            packet_threshold: 3,
            granularity: Duration::from_millis(1),
            ack_delay_limit: Duration::from_millis(1 << 14),
        }
    }
}

/// Receives the packets [`LossDetector`] resolves, as it resolves them.
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
    /// When [`LossDetector::on_timeout`] should next run (same as
    /// [`LossDetector::poll_timeout`]).
    pub timer: Option<Instant>,
}

/// What [`LossDetector::on_timeout`] did.
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
    /// oldest unacked packet ([`LossDetector::unacked`]), or a PING.
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

/// Sender-side reliability: sent packets, RTT, loss detection and probe timeout.
///
/// `T` is the caller's record of what a packet carried (see
/// [`SentPacket::payload`]).
#[derive(Debug)]
pub struct LossDetector<T> {
    config: LossConfig,
    sent: SentPackets<T>,
    rtt: RttEstimator,
    /// When the first RTT sample was taken: persistent congestion only
    /// considers packets sent after it (RFC 9002 §7.6.2).
    first_rtt_sample: Option<Instant>,
    /// Largest packet number the peer has acknowledged.
    largest_acked: Option<u64>,
    /// When the oldest unacked packet below `largest_acked` crosses the time threshold.
    loss_time: Option<Instant>,
    /// Consecutive probe timeouts since the last ACK that acknowledged something.
    pto_count: u32,
    stats: LossStats,
}

impl<T> LossDetector<T> {
    /// A detector with the given parameters and nothing in flight.
    #[must_use]
    pub fn new(config: LossConfig) -> Self {
        Self {
            config,
            sent: SentPackets::new(),
            rtt: RttEstimator::new(config.initial_rtt),
            first_rtt_sample: None,
            largest_acked: None,
            loss_time: None,
            pto_count: 0,
            stats: LossStats::default(),
        }
    }

    /// Records a packet just sent. `packet.time_sent` is the send time.
    ///
    /// RFC 9002 §6.2.1: "A sender SHOULD restart its PTO timer every time an
    /// ack-eliciting packet is sent"; [`LossDetector::poll_timeout`] reflects it.
    ///
    /// # Errors
    /// [`SendError`] if the packet number does not increase or skips too much.
    pub fn on_sent(&mut self, packet_number: u64, packet: SentPacket<T>) -> Result<(), SendError> {
        self.sent.push(packet_number, packet)
    }

    /// Processes one ACK frame received at `now`.
    ///
    /// `ranges` are the acknowledged packet numbers, largest range first;
    /// `ack_delay` is the delay the peer reported for its largest acknowledged
    /// packet. Newly acknowledged, lost and spuriously lost packets go to
    /// `sink`; the summary says what changed and when the timer should fire.
    ///
    /// # Errors
    /// [`AckError`] if the frame is malformed or acknowledges a packet never
    /// sent. Nothing has changed when an error is returned.
    pub fn on_ack<I, S>(
        &mut self,
        now: Instant,
        ranges: I,
        ack_delay: Duration,
        sink: &mut S,
    ) -> Result<AckSummary, AckError>
    where
        I: IntoIterator<Item = RangeInclusive<u64>>,
        I::IntoIter: Clone,
        S: RecoverySink<T> + ?Sized,
    {
        if ack_delay > self.config.ack_delay_limit {
            return Err(AckError::AckDelayTooLarge {
                ack_delay,
                limit: self.config.ack_delay_limit,
            });
        }
        let ranges = ranges.into_iter();
        let largest = self.sent.validate_ack(ranges.clone())?;
        self.largest_acked = Some(self.largest_acked.map_or(largest, |l| l.max(largest)));

        let mut summary = AckSummary {
            newly_acked: 0,
            acked_bytes: 0,
            largest_acked_sent_at: None,
            lost: LossReport::default(),
            spurious: 0,
            rtt_sample: None,
            timer: None,
        };
        let mut largest_sent_at = None;
        let mut largest_newly_acked = None;
        let mut any_ack_eliciting = false;
        for range in ranges {
            self.sent.ack_range(range, |pn, resolved| match resolved {
                Resolved::Acked(packet) => {
                    if pn == largest {
                        largest_sent_at = Some(packet.time_sent);
                    }
                    if largest_newly_acked.is_none_or(|l| pn > l) {
                        largest_newly_acked = Some(pn);
                        summary.largest_acked_sent_at = Some(packet.time_sent);
                    }
                    any_ack_eliciting |= packet.ack_eliciting;
                    summary.newly_acked += 1;
                    if packet.in_flight {
                        summary.acked_bytes += u64::from(packet.size);
                    }
                    sink.on_acked(pn, packet);
                }
                Resolved::Spurious(loss) => {
                    summary.spurious += 1;
                    sink.on_spurious_loss(loss);
                }
            });
        }
        self.stats.acked += summary.newly_acked as u64;
        self.stats.spurious += summary.spurious as u64;

        if summary.newly_acked > 0 {
            // RFC 9002 §5.1: "An endpoint generates an RTT sample on receiving an
            // ACK frame that meets the following two conditions: the largest
            // acknowledged packet number is newly acknowledged, and at least one
            // of the newly acknowledged packets was ack-eliciting."
            if let Some(sent_at) = largest_sent_at
                && any_ack_eliciting
            {
                let latest = now.saturating_duration_since(sent_at);
                // RFC 9002 §5.3: an endpoint "MUST use the lesser of the
                // acknowledgment delay and the peer's max_ack_delay after the
                // handshake is confirmed".
                self.rtt
                    .update(latest, ack_delay.min(self.config.peer_max_ack_delay));
                self.first_rtt_sample.get_or_insert(now);
                summary.rtt_sample = Some(latest);
            }
            summary.lost = self.detect_lost(now, sink);
            // RFC 9002 §6.2.1: "The PTO backoff factor is reset when an
            // acknowledgment is received".
            self.pto_count = 0;
        }
        self.release(now);
        summary.timer = self.poll_timeout();
        Ok(summary)
    }

    /// When [`LossDetector::on_timeout`] should next run; `None` when nothing
    /// ack-eliciting is unacknowledged.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // RFC 9002 §6.2.1: "The PTO timer MUST NOT be set if a timer is set for
        // time threshold loss detection".
        if self.loss_time.is_some() {
            return self.loss_time;
        }
        let last_sent = self.sent.last_ack_eliciting_sent()?;
        last_sent.checked_add(self.pto())
    }

    /// Handles the expiry of the timer from [`LossDetector::poll_timeout`].
    /// Calling it early (or with no timer) does nothing.
    pub fn on_timeout<S>(&mut self, now: Instant, sink: &mut S) -> TimerEvent
    where
        S: RecoverySink<T> + ?Sized,
    {
        let Some(deadline) = self.poll_timeout() else {
            return TimerEvent::Idle;
        };
        if now < deadline {
            return TimerEvent::Idle;
        }
        if self.loss_time.is_some() {
            let report = self.detect_lost(now, sink);
            self.release(now);
            return TimerEvent::LossDeclared(report);
        }
        // RFC 9002 §6.2: "A PTO timer expiration event does not indicate packet
        // loss and MUST NOT cause prior unacknowledged packets to be marked as
        // lost." RFC 9002 §6.2.1: "When a PTO timer expires, the PTO backoff
        // MUST be increased, resulting in the PTO period being set to twice its
        // current value."
        self.pto_count = self.pto_count.saturating_add(1);
        self.stats.probe_timeouts += 1;
        TimerEvent::Probe {
            pto_count: self.pto_count,
        }
    }

    /// The current probe timeout period, including back-off.
    #[must_use]
    pub fn pto(&self) -> Duration {
        let base = self
            .rtt
            .pto_base(self.config.granularity, self.config.peer_max_ack_delay);
        base.saturating_mul(1 << self.pto_count.min(MAX_PTO_BACKOFF_EXPONENT))
    }

    /// The connection's one RTT estimator (ACK delay subtracted): loss
    /// detection, pacing and congestion control all read it.
    #[must_use]
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The persistent congestion duration (RFC 9002 §7.6.1), the PTO without
    /// its back-off times kPersistentCongestionThreshold:
    /// `(smoothed_rtt + max(4*rttvar, kGranularity) + max_ack_delay) * 3`.
    #[must_use]
    pub fn persistent_congestion_duration(&self) -> Duration {
        self.rtt
            .pto_base(self.config.granularity, self.config.peer_max_ack_delay)
            .saturating_mul(PERSISTENT_CONGESTION_THRESHOLD)
    }

    /// Bytes of unacknowledged packets that count toward the congestion window.
    #[must_use]
    pub fn bytes_in_flight(&self) -> u64 {
        self.sent.bytes_in_flight()
    }

    /// The sent-packet record (read only).
    #[must_use]
    pub fn sent_packets(&self) -> &SentPackets<T> {
        &self.sent
    }

    /// Unacknowledged packets, oldest first.
    pub fn unacked(&self) -> impl Iterator<Item = (u64, &SentPacket<T>)> {
        self.sent.unacked()
    }

    /// Largest packet number the peer has acknowledged.
    #[must_use]
    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// Consecutive probe timeouts since the last useful ACK.
    #[must_use]
    pub fn pto_count(&self) -> u32 {
        self.pto_count
    }

    /// Running totals (acknowledged, lost, spurious, probe timeouts).
    #[must_use]
    pub fn stats(&self) -> LossStats {
        self.stats
    }

    /// The parameters in use.
    #[must_use]
    pub fn config(&self) -> &LossConfig {
        &self.config
    }

    /// Checks the detector's internal consistency. O(n): for tests.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        self.sent.invariants()?;
        self.rtt.invariants()?;
        if let Some(largest) = self.largest_acked
            && self.sent.largest_sent().is_none_or(|sent| largest > sent)
        {
            return Err(format!("largest acked {largest} was never sent"));
        }
        let waiting_below_largest = self
            .sent
            .unacked()
            .next()
            .zip(self.largest_acked)
            .is_some_and(|((pn, _), largest)| pn < largest);
        if self.loss_time.is_some() != waiting_below_largest {
            return Err(format!(
                "loss timer {:?} but an unacked packet below the largest acked: {waiting_below_largest}",
                self.loss_time
            ));
        }
        if self.stats.spurious > self.stats.lost {
            return Err(format!(
                "{} spurious losses out of {} losses",
                self.stats.spurious, self.stats.lost
            ));
        }
        Ok(())
    }

    /// RFC 9002 §6.1.2: "Once a later packet within the same packet number
    /// space has been acknowledged, an endpoint SHOULD declare an earlier
    /// packet lost if it was sent a threshold amount of time in the past."
    /// Also the packet threshold of §6.1.1. Sets the loss timer for the oldest
    /// survivor, and judges persistent congestion (§7.6). Returns what was
    /// declared lost.
    fn detect_lost<S>(&mut self, now: Instant, sink: &mut S) -> LossReport
    where
        S: RecoverySink<T> + ?Sized,
    {
        let mut report = LossReport::default();
        let Some(largest_acked) = self.largest_acked else {
            self.loss_time = None;
            return report;
        };
        // RFC 9002 §6.1.2: "The time threshold is: max(kTimeThreshold *
        // max(smoothed_rtt, latest_rtt), kGranularity)".
        let (num, den) = TIME_THRESHOLD;
        let loss_delay = (self
            .rtt
            .latest()
            .max(self.rtt.smoothed())
            .saturating_mul(num)
            / den)
            .max(self.config.granularity);
        let lost_send_time = now.checked_sub(loss_delay);
        let survivor_sent_at = self.sent.detect_lost(
            largest_acked,
            lost_send_time,
            self.config.packet_threshold,
            now,
            self.first_rtt_sample,
            |pn, packet| {
                report.packets += 1;
                if packet.in_flight {
                    report.in_flight_packets += 1;
                    report.bytes += u64::from(packet.size);
                    report.largest_sent_at = Some(packet.time_sent);
                }
                sink.on_lost(pn, packet);
            },
        );
        self.stats.lost += report.packets as u64;
        // RFC 9002 §6.1.2: "If packets sent prior to the largest acknowledged
        // packet cannot yet be declared lost, then a timer SHOULD be set for the
        // remaining time."
        self.loss_time = survivor_sent_at.and_then(|sent_at| sent_at.checked_add(loss_delay));
        // RFC 9002 §7.6.2: persistent congestion when "the duration between
        // the send times of these two packets exceeds the persistent
        // congestion duration". Its worked example (§7.6.3) declares it for a
        // span equal to the duration ("because the threshold was reached");
        // Tern follows the example. Declared once per run of losses.
        if report.packets > 0
            && self
                .sent
                .loss_run_span()
                .is_some_and(|span| span >= self.persistent_congestion_duration())
        {
            report.persistent_congestion = true;
            self.stats.persistent_congestion += 1;
            self.sent.end_loss_run();
            self.rtt.on_persistent_congestion();
        }
        report
    }

    /// Releases resolved slots and lost records older than the spurious-loss horizon.
    fn release(&mut self, now: Instant) {
        let base = self
            .rtt
            .pto_base(self.config.granularity, self.config.peer_max_ack_delay);
        let horizon = base.saturating_mul(LOST_RECORD_PTOS);
        self.sent.release(now.checked_sub(horizon));
    }
}

impl<T> Default for LossDetector<T> {
    fn default() -> Self {
        Self::new(LossConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    const MS: Duration = Duration::from_millis(1);

    /// A detector, a mock clock and a reusable sink.
    struct Harness {
        clock: quanta::Clock,
        time: Arc<quanta::Mock>,
        detector: LossDetector<u64>,
        events: RecoveryBuffer<u64>,
    }

    impl Harness {
        fn new() -> Self {
            Self::with_config(LossConfig::default())
        }
        fn with_config(config: LossConfig) -> Self {
            let (clock, time) = quanta::Clock::mock();
            Self {
                clock,
                time,
                detector: LossDetector::new(config),
                events: RecoveryBuffer::default(),
            }
        }
        fn now(&self) -> Instant {
            self.clock.now()
        }
        fn advance(&self, by: Duration) {
            self.time.increment(by);
        }
        fn send(&mut self, pn: u64) {
            self.send_with(pn, true);
        }
        fn send_with(&mut self, pn: u64, ack_eliciting: bool) {
            let packet = SentPacket {
                time_sent: self.now(),
                size: 1000,
                ack_eliciting,
                in_flight: ack_eliciting,
                payload: pn,
            };
            self.detector.on_sent(pn, packet).unwrap();
            self.detector.invariants().unwrap();
        }
        fn ack(
            &mut self,
            ranges: &[RangeInclusive<u64>],
            ack_delay: Duration,
        ) -> Result<AckSummary, AckError> {
            self.events.clear();
            let now = self.now();
            let result =
                self.detector
                    .on_ack(now, ranges.iter().cloned(), ack_delay, &mut self.events);
            self.detector.invariants().unwrap();
            result
        }
        fn timeout(&mut self) -> TimerEvent {
            self.events.clear();
            let now = self.now();
            let event = self.detector.on_timeout(now, &mut self.events);
            self.detector.invariants().unwrap();
            event
        }
        fn lost(&self) -> Vec<u64> {
            self.events.lost.iter().map(|(pn, _)| *pn).collect()
        }
        fn acked(&self) -> Vec<u64> {
            self.events.acked.iter().map(|(pn, _)| *pn).collect()
        }
    }

    #[test]
    fn third_later_packet_acked_declares_first_lost() {
        let mut h = Harness::new();
        for pn in 0..4 {
            h.send(pn);
        }
        h.advance(10 * MS);
        let summary = h.ack(&[1..=2], Duration::ZERO).unwrap();
        assert_eq!(
            summary.lost.packets, 0,
            "only two later packets acknowledged"
        );
        assert!(summary.timer.is_some(), "the loss timer waits for packet 0");
        let summary = h.ack(&[1..=3], Duration::ZERO).unwrap();
        assert_eq!(summary.lost.packets, 1);
        assert_eq!(summary.lost.bytes, 1000);
        assert_eq!(h.lost(), [0]);
        assert_eq!(
            h.events.lost[0].1.payload, 0,
            "the payload comes back for re-sending"
        );
        assert_eq!(h.detector.bytes_in_flight(), 0);
        assert_eq!(summary.timer, None);
    }

    #[test]
    fn time_threshold_declares_loss_without_reordering() {
        let mut h = Harness::new();
        let t0 = h.now();
        h.send(0);
        h.advance(MS);
        h.send(1);
        h.advance(100 * MS);
        let summary = h.ack(&[1..=1], Duration::ZERO).unwrap();
        // One RTT sample of 100 ms: packet 0 is lost 9/8 × 100 ms = 112.5 ms after it was sent.
        assert_eq!(summary.rtt_sample, Some(100 * MS));
        assert_eq!(summary.lost.packets, 0);
        assert_eq!(summary.timer, Some(t0 + Duration::from_micros(112_500)));
        assert_eq!(h.detector.poll_timeout(), summary.timer);
        h.advance(11 * MS);
        assert_eq!(h.timeout(), TimerEvent::Idle, "too early");
        h.advance(Duration::from_micros(500));
        assert_eq!(
            h.timeout(),
            TimerEvent::LossDeclared(LossReport {
                packets: 1,
                in_flight_packets: 1,
                bytes: 1000,
                largest_sent_at: Some(t0),
                persistent_congestion: false,
            })
        );
        assert_eq!(h.lost(), [0]);
        assert_eq!(h.detector.poll_timeout(), None);
    }

    #[test]
    fn pto_backs_off_exponentially_and_resets_on_ack() {
        let mut h = Harness::new();
        let t0 = h.now();
        h.send(0);
        // No RTT sample yet: PTO = 333 + 4 × 166.5 + 25 = 1024 ms.
        assert_eq!(h.detector.poll_timeout(), Some(t0 + 1024 * MS));
        h.advance(1024 * MS);
        assert_eq!(h.timeout(), TimerEvent::Probe { pto_count: 1 });
        assert!(h.events.lost.is_empty(), "a PTO declares nothing lost");
        assert_eq!(h.detector.poll_timeout(), Some(t0 + 2048 * MS));
        h.advance(1024 * MS);
        assert_eq!(h.timeout(), TimerEvent::Probe { pto_count: 2 });
        assert_eq!(h.detector.poll_timeout(), Some(t0 + 4096 * MS));
        // A probe is sent; its timer runs from its own send time with the backed-off period.
        h.send(1);
        assert_eq!(h.detector.poll_timeout(), Some(h.now() + 4096 * MS));
        h.advance(100 * MS);
        h.ack(&[1..=1], Duration::ZERO).unwrap();
        assert_eq!(h.detector.pto_count(), 0);
        assert_eq!(h.detector.stats().probe_timeouts, 2);
    }

    #[test]
    fn loss_timer_takes_precedence_over_pto() {
        let mut h = Harness::new();
        h.send(0);
        h.send(1);
        h.send(2);
        h.advance(50 * MS);
        let summary = h.ack(&[2..=2], Duration::ZERO).unwrap();
        let sent_at = h.now() - 50 * MS;
        assert_eq!(summary.timer, Some(sent_at + Duration::from_micros(56_250)));
    }

    #[test]
    fn spurious_loss_is_reported_when_a_lost_packet_is_acked() {
        let mut h = Harness::new();
        for pn in 0..4 {
            h.send(pn);
        }
        h.advance(10 * MS);
        h.ack(&[1..=3], Duration::ZERO).unwrap();
        assert_eq!(h.lost(), [0]);
        h.advance(MS);
        let summary = h.ack(&[0..=3], Duration::ZERO).unwrap();
        assert_eq!((summary.newly_acked, summary.spurious), (0, 1));
        assert_eq!(h.events.spurious[0].packet_number, 0);
        assert_eq!(
            h.detector.stats(),
            LossStats {
                acked: 3,
                lost: 1,
                spurious: 1,
                probe_timeouts: 0,
                persistent_congestion: 0,
            }
        );
        // Reported once only.
        let summary = h.ack(&[0..=3], Duration::ZERO).unwrap();
        assert_eq!(summary.spurious, 0);
    }

    #[test]
    fn lost_records_are_forgotten_once_a_late_ack_is_implausible() {
        let mut h = Harness::new();
        for pn in 0..4 {
            h.send(pn);
        }
        h.advance(10 * MS);
        h.ack(&[1..=3], Duration::ZERO).unwrap();
        assert_eq!(
            h.detector.sent_packets().tracked_span(),
            4,
            "lost packet 0 is remembered and holds the front"
        );
        // Records live three PTOs (at the estimate of the moment); wait well past that.
        h.advance(h.detector.pto() * 4);
        h.send(4);
        h.ack(&[4..=4], Duration::ZERO).unwrap();
        assert_eq!(h.detector.sent_packets().tracked_span(), 0);
        let summary = h.ack(&[4..=4, 0..=0], Duration::ZERO).unwrap();
        assert_eq!(summary.spurious, 0, "too late to tell");
    }

    #[test]
    fn memory_is_released_as_packets_are_acknowledged() {
        let mut h = Harness::new();
        for round in 0..100u64 {
            for pn in round * 10..round * 10 + 10 {
                h.send(pn);
            }
            h.advance(10 * MS);
            // The receiver repeats the whole history each time.
            h.ack(&[0..=round * 10 + 9], Duration::ZERO).unwrap();
            assert_eq!(h.detector.sent_packets().tracked_span(), 0);
        }
        assert_eq!(h.detector.stats().acked, 1000);
    }

    #[test]
    fn rtt_sample_needs_the_largest_newly_acknowledged() {
        let mut h = Harness::new();
        h.send(0);
        h.send(1);
        h.advance(30 * MS);
        assert_eq!(
            h.ack(&[1..=1], Duration::ZERO).unwrap().rtt_sample,
            Some(30 * MS)
        );
        h.advance(30 * MS);
        // Packet 0 is newly acknowledged but the largest, 1, is not.
        let summary = h.ack(&[0..=1], Duration::ZERO).unwrap();
        assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
    }

    #[test]
    fn ack_of_only_non_ack_eliciting_packets_gives_no_rtt_sample() {
        let mut h = Harness::new();
        h.send_with(0, false);
        h.advance(30 * MS);
        let summary = h.ack(&[0..=0], Duration::ZERO).unwrap();
        assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
        assert!(!h.detector.rtt().has_sample());
    }

    #[test]
    fn ack_delay_is_capped_at_peer_max_ack_delay() {
        let mut h = Harness::new();
        h.send(0);
        h.advance(100 * MS);
        h.ack(&[0..=0], Duration::ZERO).unwrap();
        h.send(1);
        h.advance(200 * MS);
        h.ack(&[1..=1], 150 * MS).unwrap();
        // adjusted = 200 − min(150, 25) = 175; smoothed = 7/8 · 100 + 1/8 · 175.
        assert_eq!(h.detector.rtt().smoothed(), Duration::from_micros(109_375));
    }

    #[test]
    fn ack_for_packet_never_sent_is_refused() {
        let mut h = Harness::new();
        assert_eq!(
            h.ack(&[0..=0], Duration::ZERO),
            Err(AckError::UnsentPacket { packet_number: 0 })
        );
        h.send(0);
        h.send(1);
        assert_eq!(
            h.ack(&[0..=5], Duration::ZERO),
            Err(AckError::UnsentPacket { packet_number: 5 })
        );
        h.send(3);
        assert_eq!(
            h.ack(&[3..=3, 0..=2], Duration::ZERO),
            Err(AckError::UnsentPacket { packet_number: 2 })
        );
        assert_eq!(
            h.detector.sent_packets().unacked_count(),
            3,
            "a refused ACK changes nothing"
        );
        assert_eq!(h.detector.largest_acked(), None);
    }

    #[test]
    fn malformed_ranges_are_refused() {
        let mut h = Harness::new();
        for pn in 0..10 {
            h.send(pn);
        }
        assert_eq!(h.ack(&[], Duration::ZERO), Err(AckError::NoRanges));
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = [5..=3];
        assert_eq!(
            h.ack(&inverted, Duration::ZERO),
            Err(AckError::InvertedRange { start: 5, end: 3 })
        );
        assert_eq!(
            h.ack(&[2..=3, 5..=6], Duration::ZERO),
            Err(AckError::RangesNotDescending {
                end: 6,
                previous_start: 2
            })
        );
        assert_eq!(
            h.ack(&[4..=8, 1..=4], Duration::ZERO),
            Err(AckError::RangesNotDescending {
                end: 4,
                previous_start: 4
            })
        );
        assert_eq!(h.detector.sent_packets().unacked_count(), 10);
    }

    #[test]
    fn absurd_ack_delay_is_refused() {
        let mut h = Harness::new();
        h.send(0);
        let delay = Duration::from_secs(3600);
        assert_eq!(
            h.ack(&[0..=0], delay),
            Err(AckError::AckDelayTooLarge {
                ack_delay: delay,
                limit: Duration::from_millis(16_384)
            })
        );
    }

    #[test]
    fn acked_packets_and_their_payloads_reach_the_sink() {
        let mut h = Harness::new();
        for pn in 0..6 {
            h.send(pn);
        }
        h.advance(MS);
        let summary = h.ack(&[4..=5, 0..=1], Duration::ZERO).unwrap();
        assert_eq!(h.acked(), [4, 5, 0, 1]);
        assert_eq!(summary.acked_bytes, 4000);
        assert!(h.events.acked.iter().all(|(pn, p)| p.payload == *pn));
        assert_eq!(h.lost(), [2], "5 − 2 ≥ 3; 3 is only two below");
    }

    /// RFC 9002 §7.6.3's assumptions: smoothed_rtt = 1 (here 100 ms),
    /// rttvar = 0, max_ack_delay = 0; kGranularity is taken as 0 so the
    /// persistent congestion duration is exactly 3. Packets 0..100 warm the
    /// estimator up (identical samples decay rttvar to zero); returns the
    /// next packet number.
    fn rfc_9002_example_harness() -> (Harness, u64) {
        let mut h = Harness::with_config(LossConfig {
            granularity: Duration::ZERO,
            peer_max_ack_delay: Duration::ZERO,
            ..LossConfig::default()
        });
        for pn in 0..100 {
            h.send(pn);
            h.advance(100 * MS);
            h.ack(&[pn..=pn], Duration::ZERO).unwrap();
        }
        assert_eq!(h.detector.rtt().smoothed(), 100 * MS);
        assert_eq!(h.detector.rtt().rttvar(), Duration::ZERO);
        assert_eq!(h.detector.persistent_congestion_duration(), 300 * MS);
        (h, 100)
    }

    /// Sends packets 1..=4 of the RFC's example at t = 0, 1, 3 and 7 (in
    /// units of 100 ms from now), packet numbers from `first`, and returns
    /// them with the time t = 8.
    fn rfc_9002_example_sends(h: &mut Harness, first: u64) -> [u64; 4] {
        let pns = [first, first + 1, first + 2, first + 3];
        for (pn, wait) in pns.into_iter().zip([1, 2, 4, 1]) {
            h.send(pn);
            h.advance(wait * 100 * MS);
        }
        pns
    }

    #[test]
    fn persistent_congestion_is_established_as_in_rfc_9002_example() {
        let (mut h, first) = rfc_9002_example_harness();
        let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
        // t = 8: the ACK of packet 4; packets 1 to 3 are lost, sent over 3 units.
        let summary = h.ack(&[p4..=p4], Duration::ZERO).unwrap();
        assert_eq!(h.lost(), [p1, p2, p3]);
        assert_eq!(summary.lost.in_flight_packets, 3);
        assert!(summary.lost.persistent_congestion);
        assert_eq!(h.detector.stats().persistent_congestion, 1);
        // RFC 9002 §5.2: min_rtt restarts from the newest sample.
        assert_eq!(h.detector.rtt().min(), Some(100 * MS));
    }

    #[test]
    fn a_delivered_packet_between_the_losses_means_no_persistent_congestion() {
        let (mut h, first) = rfc_9002_example_harness();
        let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
        let summary = h.ack(&[p4..=p4, p2..=p2], Duration::ZERO).unwrap();
        assert_eq!(h.lost(), [p1, p3]);
        assert!(!summary.lost.persistent_congestion);
    }

    #[test]
    fn losses_over_less_than_the_duration_are_not_persistent_congestion() {
        let (mut h, first) = rfc_9002_example_harness();
        let pns = [first, first + 1, first + 2, first + 3];
        // Sent at t = 0, 1, 2.9, 3.9: the lost run spans 2.9 units.
        for (pn, wait) in pns.into_iter().zip([100, 190, 100, 100]) {
            h.send(pn);
            h.advance(wait * MS);
        }
        let summary = h.ack(&[pns[3]..=pns[3]], Duration::ZERO).unwrap();
        assert_eq!(summary.lost.packets, 3);
        assert!(!summary.lost.persistent_congestion);
    }

    #[test]
    fn losses_before_the_first_rtt_sample_are_not_persistent_congestion() {
        let mut h = Harness::with_config(LossConfig {
            initial_rtt: 100 * MS,
            granularity: Duration::ZERO,
            peer_max_ack_delay: Duration::ZERO,
            ..LossConfig::default()
        });
        for (pn, wait) in (0..4).zip([1, 2, 4, 1]) {
            h.send(pn);
            h.advance(wait * 100 * MS);
        }
        let summary = h.ack(&[3..=3], Duration::ZERO).unwrap();
        assert_eq!(summary.lost.packets, 3);
        assert!(!summary.lost.persistent_congestion);
    }

    #[test]
    fn persistent_congestion_builds_across_acks_and_is_declared_once() {
        let (mut h, first) = rfc_9002_example_harness();
        let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
        let p5 = p4 + 1;
        h.send(p5);
        // The first ACK (of 4) loses 1 to 3 at once; an ACK of 5 that also
        // repeats 4 adds nothing, so persistent congestion is not repeated.
        let summary = h.ack(&[p4..=p4], Duration::ZERO).unwrap();
        assert!(summary.lost.persistent_congestion);
        assert_eq!(h.lost(), [p1, p2, p3]);
        h.advance(100 * MS);
        let summary = h.ack(&[p4..=p5], Duration::ZERO).unwrap();
        assert!(!summary.lost.persistent_congestion);
        assert_eq!(h.detector.stats().persistent_congestion, 1);
    }

    #[test]
    fn summaries_carry_the_send_times_congestion_control_needs() {
        let mut h = Harness::new();
        let t0 = h.now();
        for pn in 0..6 {
            h.send(pn);
            h.advance(MS);
        }
        let summary = h.ack(&[4..=5, 0..=0], Duration::ZERO).unwrap();
        // Largest newly acknowledged: 5, sent 5 ms after packet 0.
        assert_eq!(summary.largest_acked_sent_at, Some(t0 + 5 * MS));
        // Lost: 1 and 2 (three below 5), 3 by time (sent 3 ms ago with a
        // 1 ms RTT); the newest was sent at 3 ms.
        assert_eq!(h.lost(), [1, 2, 3]);
        assert_eq!(summary.lost.largest_sent_at, Some(t0 + 3 * MS));
        let summary = h.ack(&[4..=5, 0..=0], Duration::ZERO).unwrap();
        assert_eq!(summary.largest_acked_sent_at, None, "nothing new");
    }

    // ---- random operation sequences against a model ----

    #[derive(Debug, Clone)]
    enum Op {
        Send {
            ack_eliciting: bool,
            skip: bool,
        },
        /// Acknowledge, from the largest sent minus `top_back`, the numbers whose bit is set.
        Ack {
            top_back: u64,
            mask: u64,
            delay_ms: u64,
        },
        /// Random ranges, probably nonsense.
        HostileAck {
            ranges: Vec<(u64, u64)>,
            delay_ms: u64,
        },
        Advance {
            ms: u64,
        },
        Timeout,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (prop::bool::weighted(0.9), prop::bool::weighted(0.05))
                .prop_map(|(ack_eliciting, skip)| Op::Send { ack_eliciting, skip }),
            5 => (0u64..8, any::<u64>(), 0u64..50).prop_map(|(top_back, mask, delay_ms)| Op::Ack { top_back, mask, delay_ms }),
            1 => (prop::collection::vec((0u64..300, 0u64..300), 0..4), 0u64..20_000)
                .prop_map(|(ranges, delay_ms)| Op::HostileAck { ranges, delay_ms }),
            4 => (0u64..400).prop_map(|ms| Op::Advance { ms }),
            2 => Just(Op::Timeout),
        ]
    }

    /// What happened to every packet sent, to judge persistent congestion
    /// independently of the tracker.
    #[derive(Default)]
    struct History {
        /// Packet number → (send time, ack-eliciting, declared lost, acknowledged).
        packets: BTreeMap<u64, (Instant, bool, bool, bool)>,
        first_sample: Option<Instant>,
    }

    impl History {
        fn record(&mut self, h: &Harness, summary_had_sample: bool) {
            if summary_had_sample {
                self.first_sample.get_or_insert(h.now());
            }
            for pn in h.acked() {
                if let Some(p) = self.packets.get_mut(&pn) {
                    p.3 = true;
                }
            }
            for pn in h.lost() {
                if let Some(p) = self.packets.get_mut(&pn) {
                    p.2 = true;
                }
            }
            for loss in &h.events.spurious {
                if let Some(p) = self.packets.get_mut(&loss.packet_number) {
                    p.3 = true;
                }
            }
        }

        /// RFC 9002 §7.6.2 over the whole history: two ack-eliciting lost
        /// packets, sent after the first RTT sample and `duration` or more
        /// apart, with every packet sent between them lost (never-sent
        /// numbers are not in the history, so they do not interrupt).
        fn allows_persistent_congestion(&self, duration: Duration) -> bool {
            let mut oldest: Option<Instant> = None;
            for &(sent, eliciting, lost, acked) in self.packets.values() {
                if !lost || acked {
                    oldest = None;
                    continue;
                }
                if !eliciting || self.first_sample.is_none_or(|f| sent <= f) {
                    continue;
                }
                match oldest {
                    Some(first) if sent.saturating_duration_since(first) >= duration => {
                        return true;
                    }
                    Some(_) => {}
                    None => oldest = Some(sent),
                }
            }
            false
        }
    }

    /// Descending ranges of the numbers `top - i` for each set bit `i` of `mask`.
    fn ranges_from_mask(top: u64, mask: u64) -> Vec<RangeInclusive<u64>> {
        let mut ranges: Vec<RangeInclusive<u64>> = Vec::new();
        for i in 0..64u64.min(top + 1) {
            if mask & (1 << i) == 0 {
                continue;
            }
            let pn = top - i;
            match ranges.last_mut() {
                Some(range) if *range.start() == pn + 1 => *range = pn..=*range.end(),
                _ => ranges.push(pn..=pn),
            }
        }
        ranges
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Random sends, ACKs (valid and hostile), time jumps and timeouts keep
        /// every invariant, and the unacked packets always match a `BTreeMap`
        /// model updated from what the sink reports.
        #[test]
        fn random_operations_keep_invariants_and_match_a_model(ops in prop::collection::vec(op(), 1..200)) {
            let mut h = Harness::new();
            let mut model: BTreeMap<u64, bool> = BTreeMap::new();
            let mut history = History::default();
            let mut skipped: Vec<u64> = Vec::new();
            let mut next_pn = 0u64;
            for op in ops {
                match op {
                    Op::Send { ack_eliciting, skip } => {
                        if skip {
                            skipped.push(next_pn);
                            next_pn += 1;
                        }
                        h.send_with(next_pn, ack_eliciting);
                        model.insert(next_pn, ack_eliciting);
                        history.packets.insert(next_pn, (h.now(), ack_eliciting, false, false));
                        next_pn += 1;
                    }
                    Op::Ack { top_back, mask, delay_ms } => {
                        let Some(largest) = h.detector.sent_packets().largest_sent() else { continue };
                        let ranges: Vec<_> = ranges_from_mask(largest.saturating_sub(top_back), mask)
                            .into_iter()
                            .filter(|r| !skipped.iter().any(|s| r.contains(s)))
                            .collect();
                        if ranges.is_empty() { continue; }
                        let previously_largest = h.detector.largest_acked();
                        let summary = h.ack(&ranges, Duration::from_millis(delay_ms)).unwrap();
                        history.record(&h, summary.rtt_sample.is_some());
                        if summary.lost.persistent_congestion {
                            let duration = h.detector.persistent_congestion_duration();
                            prop_assert!(history.allows_persistent_congestion(duration));
                        }
                        let expected: Vec<u64> = ranges
                            .iter()
                            .flat_map(|r| model.range(r.clone()).map(|(&pn, _)| pn).collect::<Vec<_>>())
                            .collect();
                        prop_assert_eq!(h.acked(), expected);
                        prop_assert_eq!(summary.newly_acked, h.events.acked.len());
                        for pn in h.acked() { model.remove(&pn); }
                        let largest_acked = h.detector.largest_acked().unwrap();
                        prop_assert_eq!(largest_acked, previously_largest.max(Some(*ranges[0].end())).unwrap());
                        for pn in h.lost() {
                            prop_assert!(pn < largest_acked);
                            prop_assert!(model.remove(&pn).is_some());
                        }
                        // Nothing far enough below the largest acknowledged survives.
                        prop_assert!(model.range(..largest_acked.saturating_sub(2)).next().is_none());
                    }
                    Op::HostileAck { ranges, delay_ms } => {
                        let ranges: Vec<_> = ranges.into_iter().map(|(a, b)| a..=b).collect();
                        let before = h.detector.sent_packets().unacked_count();
                        match h.ack(&ranges, Duration::from_millis(delay_ms)) {
                            Ok(summary) => {
                                history.record(&h, summary.rtt_sample.is_some());
                                if summary.lost.persistent_congestion {
                                    let duration = h.detector.persistent_congestion_duration();
                                    prop_assert!(history.allows_persistent_congestion(duration));
                                }
                                for pn in h.acked() { prop_assert!(model.remove(&pn).is_some()); }
                                for pn in h.lost() { prop_assert!(model.remove(&pn).is_some()); }
                            }
                            Err(_) => prop_assert_eq!(h.detector.sent_packets().unacked_count(), before),
                        }
                    }
                    Op::Advance { ms } => h.advance(Duration::from_millis(ms)),
                    Op::Timeout => {
                        let event = h.timeout();
                        history.record(&h, false);
                        if let TimerEvent::LossDeclared(report) = event {
                            prop_assert_eq!(report.packets, h.events.lost.len());
                            if report.persistent_congestion {
                                let duration = h.detector.persistent_congestion_duration();
                                prop_assert!(history.allows_persistent_congestion(duration));
                            }
                        }
                        for pn in h.lost() { prop_assert!(model.remove(&pn).is_some()); }
                    }
                }
                let unacked: Vec<u64> = h.detector.unacked().map(|(pn, _)| pn).collect();
                prop_assert_eq!(unacked, model.keys().copied().collect::<Vec<_>>());
                let eliciting = model.values().filter(|&&e| e).count();
                prop_assert_eq!(h.detector.sent_packets().ack_eliciting_unacked(), eliciting);
                // One count of bytes in flight: the sum of the in-flight packets' sizes.
                prop_assert_eq!(h.detector.bytes_in_flight(), 1000 * eliciting as u64);
                if eliciting > 0 {
                    prop_assert!(h.detector.poll_timeout().is_some(), "ack-eliciting packets in flight need a timer");
                }
                if model.is_empty() {
                    prop_assert_eq!(h.detector.poll_timeout(), None);
                }
            }
        }
    }
}
