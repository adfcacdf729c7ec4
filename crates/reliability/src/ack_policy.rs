//! When the receiver sends an ACK frame, and how a sender thins its peer's ACKs.
//!
//! RFC 9000 §13.2.2: "A receiver SHOULD send an ACK frame after receiving at
//! least two ack-eliciting packets." RFC 9000 §13.2.1: "ack-eliciting packets
//! MUST be acknowledged at least once within the maximum delay an endpoint
//! communicated using the max_ack_delay transport parameter", and an ACK goes
//! out without delay when packets arrive out of order.
//!
//! # ACK frequency
//!
//! An ACK every two packets is ~600 000 ACK packets per second at Tern's
//! target rate (1.2 M packets/s of 1452 bytes, ~14 Gbit/s): as many
//! datagrams to build, encrypt, send, receive and process as a quarter of the
//! data. Following the QUIC ACK-frequency draft
//! (draft-ietf-quic-ack-frequency), the sender, which knows its window and
//! round trip, asks the receiver to thin its ACKs ([`AckFrequency`], carried
//! to the peer in a frame by the connection layer), and the receiver's
//! [`AckPolicy`] applies the request within its own limits
//! ([`AckPolicy::on_ack_frequency`]).
//!
//! The arithmetic ([`AckFrequency::for_path`]): an ACK is due every
//! `window / 8` packets, so about [`ACKS_PER_WINDOW`] = 8 per round trip at
//! full rate (one per 1/8 RTT), but never fewer than every 2 packets (RFC
//! 9000's rule, which small windows keep) and never more than
//! [`DEFAULT_MAX_ACK_ELICITING_THRESHOLD`] = 32. At the target rate that is
//! 1.2 M / 32 = 37 500 ACKs per second, 16 times fewer. The ACK delay asked
//! for is 1/8 of the smoothed RTT, at least the timer granularity (1 ms)
//! and at most the max ack delay the receiver advertised, so the sender's
//! probe timeout stays valid.
//!
//! What bounds the thinning:
//! - loss detection: an out-of-order packet is acknowledged at once, and so
//!   are the [`REORDERING_ACKS`] = 3 packets after it: the ACK that shows a
//!   packet 3 below the largest acknowledged (the sender's packet threshold,
//!   RFC 9002 §6.1.1) leaves as soon as that packet arrives, whatever the
//!   threshold;
//! - LEDBAT: at least 8 ACKs per full window (4 once the window is below 16
//!   packets, where the 2-packet floor rules), each with a one-way-delay
//!   sample, against the 4 samples its current-delay filter takes the
//!   minimum of;
//! - the probe timeout: the delay never exceeds the advertised max ack delay.

use std::time::Duration;

use quanta::Instant;

use crate::ack_ranges::Arrival;

/// ACKs a sender asks for per window of packets ([`AckFrequency::for_path`]).
pub const ACKS_PER_WINDOW: u64 = 8;

/// The largest ack-eliciting threshold a sender asks for, and a receiver
/// accepts by default ([`AckPolicyConfig::max_ack_eliciting_threshold`]).
pub const DEFAULT_MAX_ACK_ELICITING_THRESHOLD: u32 = 32;

/// Ack-eliciting packets acknowledged at once after an out-of-order one:
/// RFC 9002's packet threshold (kPacketThreshold = 3), so the sender's loss
/// detection by count never waits for a thinned ACK.
pub const REORDERING_ACKS: u32 = 3;

/// The shortest ACK delay a sender asks for: the usual timer granularity
/// (RFC 9002's kGranularity, 1 ms).
pub const MIN_REQUESTED_ACK_DELAY: Duration = Duration::from_millis(1);

/// Parameters of the ACK policy. Construct with [`AckPolicyConfig::default`]
/// and change fields as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckPolicyConfig {
    /// The longest an ack-eliciting packet waits for its ACK (25 ms by
    /// default). This is the max ack delay advertised to the peer, which uses
    /// it in its probe timeout ([`crate::LossConfig::peer_max_ack_delay`]);
    /// a peer's [`AckFrequency`] request may shorten it, never lengthen it.
    pub max_ack_delay: Duration,
    /// Ack-eliciting packets that trigger an ACK at once until the peer asks
    /// otherwise (2 by default, at least 1).
    pub ack_eliciting_threshold: u32,
    /// The largest threshold a peer's [`AckFrequency`] request may set
    /// ([`DEFAULT_MAX_ACK_ELICITING_THRESHOLD`] by default): a bound on what a
    /// hostile or careless peer can make this side withhold.
    pub max_ack_eliciting_threshold: u32,
}

impl Default for AckPolicyConfig {
    fn default() -> Self {
        Self {
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            max_ack_eliciting_threshold: DEFAULT_MAX_ACK_ELICITING_THRESHOLD,
        }
    }
}

/// A sender's request for how often its peer acknowledges: the content of
/// the QUIC draft's ACK_FREQUENCY frame, minus its reordering threshold
/// (Tern's receiver always acknowledges an out-of-order packet at once, and
/// the [`REORDERING_ACKS`] packets after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFrequency {
    /// Grows with every request the sender makes; the receiver ignores a
    /// request whose sequence is not above the last it applied (frames may
    /// arrive out of order).
    pub sequence: u64,
    /// Ack-eliciting packets the receiver may receive before an ACK is due.
    pub ack_eliciting_threshold: u32,
    /// The longest the receiver should delay an ACK.
    pub max_ack_delay: Duration,
}

impl AckFrequency {
    /// What a sender asks for with a congestion window of `window` bytes,
    /// packets of `max_datagram_size` bytes and a smoothed RTT of
    /// `smoothed_rtt`: an ACK every `window / max_datagram_size / 8` packets,
    /// within `[2, DEFAULT_MAX_ACK_ELICITING_THRESHOLD]`, and an ACK delay of
    /// `smoothed_rtt / 8`, at least [`MIN_REQUESTED_ACK_DELAY`]: about
    /// [`ACKS_PER_WINDOW`] ACKs per round trip at full rate, each with the
    /// one-way-delay sample LEDBAT needs, and at most one per
    /// [`DEFAULT_MAX_ACK_ELICITING_THRESHOLD`] packets.
    #[must_use]
    pub fn for_path(
        sequence: u64,
        window: u64,
        max_datagram_size: u64,
        smoothed_rtt: Duration,
    ) -> Self {
        let packets = window / max_datagram_size.max(1);
        let threshold =
            (packets / ACKS_PER_WINDOW).clamp(2, u64::from(DEFAULT_MAX_ACK_ELICITING_THRESHOLD));
        Self {
            sequence,
            ack_eliciting_threshold: u32::try_from(threshold)
                .unwrap_or(DEFAULT_MAX_ACK_ELICITING_THRESHOLD),
            max_ack_delay: (smoothed_rtt / 8).max(MIN_REQUESTED_ACK_DELAY),
        }
    }

    /// Whether `self` is worth sending when `sent` is the last request the
    /// peer got: its threshold or its delay differs by a factor of two or
    /// more. Windows and round trips move continually; halvings and
    /// doublings are what change the ACK rate materially, so a sender makes a
    /// handful of requests per slow start, not one per ACK.
    #[must_use]
    pub fn supersedes(&self, sent: &AckFrequency) -> bool {
        let (new, old) = (self.ack_eliciting_threshold, sent.ack_eliciting_threshold);
        let (new_delay, old_delay) = (self.max_ack_delay, sent.max_ack_delay);
        new >= old.saturating_mul(2)
            || old >= new.saturating_mul(2)
            || new_delay >= old_delay.saturating_mul(2)
            || old_delay >= new_delay.saturating_mul(2)
    }
}

/// Decides when an ACK frame is due.
///
/// Feed it every packet recorded in [`crate::AckRanges`] with the
/// [`Arrival`] that returned; send an ACK when [`AckPolicy::ack_due`] says so
/// (or earlier, alongside data) and then call [`AckPolicy::on_ack_sent`].
/// Apply the peer's [`AckFrequency`] requests with
/// [`AckPolicy::on_ack_frequency`].
#[derive(Debug, Clone)]
pub struct AckPolicy {
    config: AckPolicyConfig,
    /// Ack-eliciting packets that make an ACK due at once.
    threshold: u32,
    /// The longest an ack-eliciting packet waits.
    max_ack_delay: Duration,
    /// Sequence of the last [`AckFrequency`] applied.
    last_request: Option<u64>,
    /// Ack-eliciting packets received since the last ACK was sent.
    pending_ack_eliciting: u32,
    /// When the first of them arrived.
    first_pending_at: Option<Instant>,
    /// Ack-eliciting packets still to be acknowledged at once after an
    /// out-of-order arrival.
    reordering_acks_left: u32,
    /// When the next ACK must be sent; `None` when nothing ack-eliciting waits.
    deadline: Option<Instant>,
    /// When the largest packet number so far was received (for the ACK Delay field).
    largest_received_at: Option<Instant>,
}

impl Default for AckPolicy {
    fn default() -> Self {
        Self::new(AckPolicyConfig::default())
    }
}

impl AckPolicy {
    /// A policy with nothing pending.
    #[must_use]
    pub fn new(mut config: AckPolicyConfig) -> Self {
        config.ack_eliciting_threshold = config.ack_eliciting_threshold.max(1);
        config.max_ack_eliciting_threshold = config
            .max_ack_eliciting_threshold
            .max(config.ack_eliciting_threshold);
        Self {
            config,
            threshold: config.ack_eliciting_threshold,
            max_ack_delay: config.max_ack_delay,
            last_request: None,
            pending_ack_eliciting: 0,
            first_pending_at: None,
            reordering_acks_left: 0,
            deadline: None,
            largest_received_at: None,
        }
    }

    /// Accounts for a packet received at `now`.
    pub fn on_received(&mut self, now: Instant, ack_eliciting: bool, arrival: Arrival) {
        if !arrival.is_new() {
            return;
        }
        if matches!(arrival, Arrival::InOrder | Arrival::AfterGap) {
            self.largest_received_at = Some(now);
        }
        // RFC 9000 §13.2.1: "An endpoint MUST NOT send a non-ack-eliciting packet
        // in response to a non-ack-eliciting packet". Such packets are
        // acknowledged with the next ACK sent for other reasons.
        if !ack_eliciting {
            return;
        }
        self.pending_ack_eliciting = self.pending_ack_eliciting.saturating_add(1);
        self.first_pending_at.get_or_insert(now);
        // RFC 9000 §13.2.1: "In order to assist loss detection at the sender, an
        // endpoint SHOULD generate and send an ACK frame without delay when it
        // receives an ack-eliciting packet either: when the received packet has a
        // packet number less than another ack-eliciting packet that has been
        // received, or when the packet has a packet number larger than the
        // highest-numbered ack-eliciting packet that has been received and there
        // are missing packets between that packet and this packet." Tern compares
        // with every packet received, ack-eliciting or not: a superset, so it
        // never acknowledges later than the RFC asks. The next few packets are
        // acknowledged at once too, whatever the threshold, so the sender's
        // packet threshold sees them (module docs).
        let reordered = arrival.is_reordered();
        let prompt = !reordered && self.reordering_acks_left > 0;
        if reordered {
            self.reordering_acks_left = REORDERING_ACKS;
        } else if prompt {
            self.reordering_acks_left -= 1;
        }
        let immediate = reordered || prompt || self.pending_ack_eliciting >= self.threshold;
        let due = if immediate {
            now
        } else {
            now.checked_add(self.max_ack_delay).unwrap_or(now)
        };
        self.deadline = Some(self.deadline.map_or(due, |d| d.min(due)));
    }

    /// Applies the peer's request at `now`, within this side's limits: the
    /// threshold to `[1, max_ack_eliciting_threshold]`, the delay to at most
    /// the advertised `max_ack_delay`. A request not newer than the last one
    /// applied is ignored; returns whether this one was applied. An ACK
    /// already pending becomes due by the new rules.
    pub fn on_ack_frequency(&mut self, now: Instant, request: AckFrequency) -> bool {
        if self
            .last_request
            .is_some_and(|last| request.sequence <= last)
        {
            return false;
        }
        self.last_request = Some(request.sequence);
        self.threshold = request
            .ack_eliciting_threshold
            .clamp(1, self.config.max_ack_eliciting_threshold);
        self.max_ack_delay = request.max_ack_delay.min(self.config.max_ack_delay);
        if let Some(first) = self.first_pending_at {
            let due = if self.pending_ack_eliciting >= self.threshold {
                now
            } else {
                first.checked_add(self.max_ack_delay).unwrap_or(first)
            };
            self.deadline = Some(self.deadline.map_or(due, |d| d.min(due)));
        }
        true
    }

    /// Makes an ACK of the ack-eliciting packets waiting due at `now`,
    /// whatever the threshold: the last one received asked for it (a PING,
    /// which a sender's probe carries). RFC 9002 §6.2.4: a probe is sent
    /// "to elicit an acknowledgment"; delayed by the thinning, the one ACK
    /// a round of probes gets is one datagram for a lossy way back to
    /// swallow, where acknowledged at once each probe gets its own.
    pub fn ack_at_once(&mut self, now: Instant) {
        if self.first_pending_at.is_some() {
            self.deadline = Some(self.deadline.map_or(now, |d| d.min(now)));
        }
    }

    /// When an ACK must be sent; `None` when no ack-eliciting packet waits.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether an ACK must be sent at `now`.
    #[must_use]
    pub fn ack_due(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }

    /// Whether an ACK is worth a packet of its own at `now`: it is due, or
    /// two ack-eliciting packets wait for it (RFC 9000 §13.2.2's
    /// every-second-packet rule, which a peer's thinner request leaves to
    /// data to carry). Before that, an ACK waits for data going the other
    /// way — a response, the next request — to ride on, which saves the
    /// exchanges of small messages a datagram and a wake-up each way, or for
    /// the ack delay.
    #[must_use]
    pub fn worth_sending_alone(&self, now: Instant) -> bool {
        self.ack_due(now) || self.pending_ack_eliciting >= 2
    }

    /// Ack-eliciting packets received since the last ACK was sent.
    #[must_use]
    pub fn pending_ack_eliciting(&self) -> u32 {
        self.pending_ack_eliciting
    }

    /// The ack-eliciting threshold in force (the configured one, or the
    /// peer's latest request within the limits).
    #[must_use]
    pub fn ack_eliciting_threshold(&self) -> u32 {
        self.threshold
    }

    /// The longest an ack-eliciting packet waits, as in force.
    #[must_use]
    pub fn max_ack_delay(&self) -> Duration {
        self.max_ack_delay
    }

    /// The value for the ACK Delay field of an ACK sent at `now`: how long
    /// the largest acknowledged packet waited.
    #[must_use]
    pub fn ack_delay(&self, now: Instant) -> Duration {
        self.largest_received_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// Records that an ACK covering everything received was sent.
    pub fn on_ack_sent(&mut self) {
        self.pending_ack_eliciting = 0;
        self.first_pending_at = None;
        self.deadline = None;
    }

    /// The parameters in use.
    #[must_use]
    pub fn config(&self) -> &AckPolicyConfig {
        &self.config
    }

    /// Checks the policy's internal consistency.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        if self.deadline.is_some() != (self.pending_ack_eliciting > 0) {
            return Err(format!(
                "deadline {:?} with {} ack-eliciting packets pending",
                self.deadline, self.pending_ack_eliciting
            ));
        }
        if self.first_pending_at.is_some() != (self.pending_ack_eliciting > 0) {
            return Err("first pending arrival disagrees with the count".to_owned());
        }
        if self.pending_ack_eliciting > 0 && self.largest_received_at.is_none() {
            return Err("packets pending but none recorded as received".to_owned());
        }
        if self.threshold == 0 || self.threshold > self.config.max_ack_eliciting_threshold {
            return Err(format!("threshold {} outside its limits", self.threshold));
        }
        if self.max_ack_delay > self.config.max_ack_delay {
            return Err("max ack delay above the advertised one".to_owned());
        }
        if let (Some(first), Some(deadline)) = (self.first_pending_at, self.deadline)
            && first
                .checked_add(self.max_ack_delay)
                .is_some_and(|latest| deadline > latest)
        {
            return Err("an ACK is due later than the max ack delay allows".to_owned());
        }
        if self.reordering_acks_left > REORDERING_ACKS {
            return Err("too many prompt ACKs owed".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
