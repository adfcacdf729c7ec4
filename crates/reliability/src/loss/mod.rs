//! Loss detection and the probe timeout, in the manner of RFC 9002 §6.
//!
//! [`LossDetector`] owns the sent-packet record and the RTT estimator. The
//! connection tells it what it sent ([`LossDetector::on_sent`]), hands it each
//! ACK frame ([`LossDetector::on_ack`]) and wakes it when its timer expires
//! ([`LossDetector::on_timeout`]). Acknowledged, lost and spuriously lost
//! packets are handed to a caller-supplied [`RecoverySink`] as they are found,
//! so nothing is allocated per ACK.
//!
//! RFC 9002's thresholds read reordering as loss; once a loss proves
//! spurious, a reordering window that adapts to the path takes over
//! (`reordering`, in the manner of RFC 8985).

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use quanta::Instant;

use crate::error::{AckError, SendError};
use crate::rtt::{DEFAULT_INITIAL_RTT, RttEstimator};
use crate::sent_packets::{PendingRanges, Resolved, SentPacket, SentPackets};
use reordering::ReorderingWindow;

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

mod reordering;
mod report;
#[cfg(test)]
mod tests;

pub use report::{AckSummary, LossReport, LossStats, RecoveryBuffer, RecoverySink, TimerEvent};

/// Sender-side reliability: sent packets, RTT, loss detection and probe timeout.
///
/// `T` is the caller's record of what a packet carried (see
/// [`SentPacket::payload`]).
#[derive(Debug)]
pub struct LossDetector<T> {
    /// Shared: the same for every connection of an endpoint (72 bytes
    /// each would hold a copy).
    config: Arc<LossConfig>,
    sent: SentPackets<T>,
    rtt: RttEstimator,
    /// When the first RTT sample was taken: persistent congestion only
    /// considers packets sent after it (RFC 9002 §7.6.2).
    first_rtt_sample: Option<Instant>,
    /// Packets sent before it give no RTT sample (`None`: all do): set
    /// when the connection moves to a new path, and when a packet goes
    /// again under its own number ([`LossDetector::on_resent`]).
    samples_since: Option<Instant>,
    /// Largest packet number the peer has acknowledged.
    largest_acked: Option<u64>,
    /// When the oldest unacked packet below `largest_acked` crosses the time threshold.
    loss_time: Option<Instant>,
    /// Consecutive probe timeouts since the last ACK that acknowledged something.
    pto_count: u32,
    /// How long a packet that later ones overtook is still waited for.
    reordering: ReorderingWindow,
    stats: LossStats,
}

impl<T> LossDetector<T> {
    /// A detector with the given parameters and nothing in flight. An
    /// endpoint passes one `Arc` to all its connections' detectors.
    #[must_use]
    pub fn new(config: impl Into<Arc<LossConfig>>) -> Self {
        let config = config.into();
        Self {
            sent: SentPackets::new(),
            rtt: RttEstimator::new(config.initial_rtt),
            config,
            first_rtt_sample: None,
            samples_since: None,
            largest_acked: None,
            loss_time: None,
            pto_count: 0,
            reordering: ReorderingWindow::default(),
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

    /// Bounds the packet numbers tracked (see [`SentPackets::set_max_tracked`]).
    pub fn set_max_tracked(&mut self, limit: u64) {
        self.sent.set_max_tracked(limit);
    }

    /// [`on_sent`](Self::on_sent) for a packet that needs no record when
    /// nothing is tracked (see [`SentPackets::push_released`]).
    ///
    /// # Errors
    /// As [`on_sent`](Self::on_sent).
    pub fn on_sent_released(
        &mut self,
        packet_number: u64,
        packet: SentPacket<T>,
    ) -> Result<(), SendError> {
        self.sent.push_released(packet_number, packet)
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
        let mut pending = PendingRanges::new();
        let largest = self
            .sent
            .validate_ack_noting(ranges.clone(), &mut pending)?;
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
        // The ranges with something to resolve, or all of them again when
        // too many had.
        let noted = pending.noted();
        let again = noted.is_none().then_some(ranges);
        for range in noted
            .into_iter()
            .flatten()
            .chain(again.into_iter().flatten())
        {
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
        if summary.spurious > 0 {
            self.reordering.on_spurious_loss(now, &self.rtt);
        }

        if summary.newly_acked > 0 {
            // RFC 9002 §5.1: "An endpoint generates an RTT sample on receiving an
            // ACK frame that meets the following two conditions: the largest
            // acknowledged packet number is newly acknowledged, and at least one
            // of the newly acknowledged packets was ack-eliciting."
            // RFC 9000 §9.4: "Packets sent on the old path MUST NOT
            // contribute to ... RTT estimation for the new path."
            if let Some(sent_at) = largest_sent_at
                && any_ack_eliciting
                && self.samples_since.is_none_or(|since| sent_at >= since)
            {
                let latest = now.saturating_duration_since(sent_at);
                // RFC 9002 §5.3: an endpoint "MUST use the lesser of the
                // acknowledgment delay and the peer's max_ack_delay after the
                // handshake is confirmed".
                self.rtt
                    .update(latest, ack_delay.min(self.config.peer_max_ack_delay));
                self.first_rtt_sample.get_or_insert(now);
                self.reordering.on_rtt_sample(now, latest, &self.rtt);
                summary.rtt_sample = Some(latest);
            }
            summary.lost = self.detect_lost(now, sink);
            // RFC 9002 §6.2.1: "The PTO backoff factor is reset when an
            // acknowledgment is received".
            self.pto_count = 0;
        }
        if summary.newly_acked > 0 || summary.spurious > 0 {
            // Only a packet resolved frees the ring's front; an ACK that
            // repeats what earlier ones said (as often as a peer likes)
            // leaves the lost records that wait for their horizon to the
            // next one that does, or to the timer.
            self.release(now);
        }
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
        self.base_pto()
            .saturating_mul(1 << self.pto_count.min(MAX_PTO_BACKOFF_EXPONENT))
    }

    /// The probe timeout period the path's round trip calls for, without
    /// back-off (what RFC 9000 §10.1 measures the idle timeout against: a
    /// peer gone silent must not stretch it by backing off).
    #[must_use]
    pub fn base_pto(&self) -> Duration {
        self.rtt
            .pto_base(self.config.granularity, self.config.peer_max_ack_delay)
    }

    /// The connection moved to a new path at `now`. RFC 9000 §9.4: the RTT
    /// estimator starts again from its initial value, and packets sent
    /// before `now` give it no sample and leave bytes in flight (see
    /// [`SentPackets::leave_flight`]); they are still re-sent if lost.
    /// Persistent congestion again waits for a first sample, so losses on
    /// the old path cannot establish it on the new one.
    pub fn on_path_change(&mut self, now: Instant) {
        self.sent.leave_flight();
        self.rtt.reset();
        self.first_rtt_sample = None;
        self.samples_since = Some(now);
    }

    /// A packet already sent went again at `now` under its own packet
    /// number (a responder's handshake reply, re-sent as it was for a
    /// repeated intro). Its acknowledgement may be for either copy, so
    /// packets sent before `now` give no RTT sample: Karn's algorithm
    /// (RFC 6298 §3: "RTT samples MUST NOT be made using segments that
    /// were retransmitted"), which RFC 9002 needs nowhere else because a
    /// packet number is otherwise never sent twice. Without it, a reply
    /// lost for five seconds of intro resends gave a five-second sample,
    /// and the responder's probe timeout stayed above ten seconds.
    pub fn on_resent(&mut self, now: Instant) {
        self.samples_since = Some(self.samples_since.map_or(now, |since| since.max(now)));
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

    /// Forgets the ACKs alone still tracked when nothing else is (see
    /// [`SentPackets::forget_acks_alone`]); returns whether nothing is
    /// tracked now.
    pub fn forget_acks_alone(&mut self) -> bool {
        self.sent.forget_acks_alone()
    }

    /// Gives the sent-packet ring's memory back when it tracks nothing
    /// (see [`SentPackets::shrink_when_empty`]).
    pub fn shrink_when_empty(&mut self) {
        self.sent.shrink_when_empty();
    }

    /// Forgets every packet in flight and gives the ring's memory back:
    /// the connection will send nothing they could need again (it closed
    /// at once). What the detector learnt of the path, its RTT, stays.
    pub fn abandon_in_flight(&mut self) {
        self.sent = SentPackets::new();
        self.largest_acked = None;
        self.loss_time = None;
        self.pto_count = 0;
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

    /// The wait the path's reordering has added to the time threshold
    /// (zero until a loss proved spurious; see the module documentation).
    #[must_use]
    pub fn reordering_window(&self) -> Duration {
        self.reordering.extra_wait(&self.rtt)
    }

    /// Whether a loss has proved spurious, so that losses are now declared
    /// by time alone, not by the packet threshold.
    #[must_use]
    pub fn reordering_seen(&self) -> bool {
        self.reordering.reordering_seen()
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
        // max(smoothed_rtt, latest_rtt), kGranularity)", plus the wait the
        // path's reordering has earned.
        let loss_delay = self.loss_delay();
        let lost_send_time = now.checked_sub(loss_delay);
        let survivor_sent_at = self.sent.detect_lost(
            largest_acked,
            lost_send_time,
            self.reordering
                .packet_threshold(self.config.packet_threshold),
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
        if report.packets > 0 {
            self.reordering.on_losses_declared(now, &self.rtt);
        }
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

    /// How long after a packet was sent it is declared lost once a later
    /// one was acknowledged: RFC 9002's time threshold (of the largest
    /// recent RTT sample, once the path has shown reordering) plus the
    /// reordering window.
    fn loss_delay(&self) -> Duration {
        let (num, den) = TIME_THRESHOLD;
        let threshold = self.reordering.judged_rtt(&self.rtt).saturating_mul(num) / den;
        (threshold + self.reordering.extra_wait(&self.rtt)).max(self.config.granularity)
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
