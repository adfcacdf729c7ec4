//! When the receiver sends an ACK frame.
//!
//! RFC 9000 §13.2.2: "A receiver SHOULD send an ACK frame after receiving at
//! least two ack-eliciting packets." RFC 9000 §13.2.1: "ack-eliciting packets
//! MUST be acknowledged at least once within the maximum delay an endpoint
//! communicated using the max_ack_delay transport parameter", and an ACK goes
//! out without delay when packets arrive out of order.

use std::time::Duration;

use quanta::Instant;

use crate::ack_ranges::Arrival;

/// Parameters of the ACK policy. Construct with [`AckPolicyConfig::default`]
/// and change fields as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckPolicyConfig {
    /// The longest an ack-eliciting packet waits for its ACK (25 ms by
    /// default). This is the max ack delay advertised to the peer, which uses
    /// it in its probe timeout ([`crate::LossConfig::peer_max_ack_delay`]).
    pub max_ack_delay: Duration,
    /// Ack-eliciting packets that trigger an ACK at once (2 by default, at least 1).
    pub ack_eliciting_threshold: u32,
}

impl Default for AckPolicyConfig {
    fn default() -> Self {
        Self {
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
        }
    }
}

/// Decides when an ACK frame is due.
///
/// Feed it every packet recorded in [`crate::AckRanges`] with the
/// [`Arrival`] that returned; send an ACK when [`AckPolicy::ack_due`] says so
/// (or earlier, alongside data) and then call [`AckPolicy::on_ack_sent`].
#[derive(Debug, Clone)]
pub struct AckPolicy {
    config: AckPolicyConfig,
    /// Ack-eliciting packets received since the last ACK was sent.
    pending_ack_eliciting: u32,
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
        Self {
            config,
            pending_ack_eliciting: 0,
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
        // RFC 9000 §13.2.1: "In order to assist loss detection at the sender, an
        // endpoint SHOULD generate and send an ACK frame without delay when it
        // receives an ack-eliciting packet either: when the received packet has a
        // packet number less than another ack-eliciting packet that has been
        // received, or when the packet has a packet number larger than the
        // highest-numbered ack-eliciting packet that has been received and there
        // are missing packets between that packet and this packet." Tern compares
        // with every packet received, ack-eliciting or not: a superset, so it
        // never acknowledges later than the RFC asks.
        let immediate = arrival.is_reordered()
            || self.pending_ack_eliciting >= self.config.ack_eliciting_threshold;
        let due = if immediate {
            now
        } else {
            now.checked_add(self.config.max_ack_delay).unwrap_or(now)
        };
        self.deadline = Some(self.deadline.map_or(due, |d| d.min(due)));
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

    /// Ack-eliciting packets received since the last ACK was sent.
    #[must_use]
    pub fn pending_ack_eliciting(&self) -> u32 {
        self.pending_ack_eliciting
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
        if self.pending_ack_eliciting > 0 && self.largest_received_at.is_none() {
            return Err("packets pending but none recorded as received".to_owned());
        }
        if self.config.ack_eliciting_threshold == 0 {
            return Err("ack-eliciting threshold is zero".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AckRanges;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    struct Receiver {
        ranges: AckRanges,
        policy: AckPolicy,
    }

    impl Receiver {
        fn new() -> Self {
            Self {
                ranges: AckRanges::default(),
                policy: AckPolicy::default(),
            }
        }
        fn receive(&mut self, now: Instant, pn: u64, ack_eliciting: bool) {
            let arrival = self.ranges.insert(pn);
            self.policy.on_received(now, ack_eliciting, arrival);
            self.policy.invariants().unwrap();
        }
    }

    #[test]
    fn single_ack_eliciting_packet_waits_max_ack_delay() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        rx.receive(t0, 0, true);
        assert_eq!(rx.policy.poll_timeout(), Some(t0 + 25 * MS));
        assert!(!rx.policy.ack_due(t0 + 24 * MS));
        assert!(rx.policy.ack_due(t0 + 25 * MS));
        assert_eq!(rx.policy.ack_delay(t0 + 25 * MS), 25 * MS);
    }

    #[test]
    fn second_ack_eliciting_packet_makes_the_ack_due_at_once() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        rx.receive(t0, 0, true);
        rx.receive(t0 + 3 * MS, 1, true);
        assert_eq!(rx.policy.poll_timeout(), Some(t0 + 3 * MS));
        rx.policy.on_ack_sent();
        assert_eq!(rx.policy.poll_timeout(), None);
        assert_eq!(rx.policy.pending_ack_eliciting(), 0);
    }

    #[test]
    fn non_ack_eliciting_packets_never_schedule_an_ack() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        for pn in 0..10 {
            rx.receive(t0, pn * 2, false);
        }
        assert_eq!(rx.policy.poll_timeout(), None);
    }

    #[test]
    fn gap_before_ack_eliciting_packet_triggers_immediate_ack() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        rx.receive(t0, 0, true);
        rx.policy.on_ack_sent();
        rx.receive(t0 + MS, 2, true);
        assert!(rx.policy.ack_due(t0 + MS));
    }

    #[test]
    fn late_ack_eliciting_packet_triggers_immediate_ack() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        rx.receive(t0, 0, true);
        rx.receive(t0, 2, false);
        rx.policy.on_ack_sent();
        rx.receive(t0 + MS, 1, true);
        assert!(rx.policy.ack_due(t0 + MS));
        // The ACK delay is measured from the largest packet, not the late one.
        assert_eq!(rx.policy.ack_delay(t0 + MS), MS);
    }

    #[test]
    fn duplicate_packet_changes_nothing() {
        let (clock, _) = quanta::Clock::mock();
        let t0 = clock.now();
        let mut rx = Receiver::new();
        rx.receive(t0, 0, true);
        rx.policy.on_ack_sent();
        rx.receive(t0 + MS, 0, true);
        assert_eq!(rx.policy.poll_timeout(), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn ack_is_never_due_later_than_max_ack_delay_after_an_ack_eliciting_packet(
            events in prop::collection::vec((0u64..64, any::<bool>(), 0u64..40, prop::bool::weighted(0.2)), 1..100)
        ) {
            let (clock, mock) = quanta::Clock::mock();
            let mut rx = Receiver::new();
            let mut oldest_unacked: Option<Instant> = None;
            for (pn, ack_eliciting, advance_ms, send_ack) in events {
                mock.increment(Duration::from_millis(advance_ms));
                let now = clock.now();
                let arrival = rx.ranges.insert(pn);
                rx.policy.on_received(now, ack_eliciting, arrival);
                if ack_eliciting && arrival.is_new() && oldest_unacked.is_none() {
                    oldest_unacked = Some(now);
                }
                prop_assert_eq!(rx.policy.invariants(), Ok(()));
                if let Some(oldest) = oldest_unacked {
                    let deadline = rx.policy.poll_timeout();
                    prop_assert!(deadline.is_some_and(|d| d <= oldest + 25 * MS));
                }
                if send_ack {
                    rx.policy.on_ack_sent();
                    oldest_unacked = None;
                }
            }
        }
    }
}
