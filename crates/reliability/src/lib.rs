//! Tern reliability: the state machines that make a Tern connection reliable.
//!
//! On the sending side, [`LossDetector`] records every packet sent with the
//! caller's note of what it carried, processes ACK frames, estimates the RTT
//! ([`RttEstimator`]), declares packets lost by packet and time thresholds and
//! runs the probe timeout, in the manner of RFC 9002; once a loss proves
//! spurious, a reordering window that adapts to the path replaces the packet
//! threshold (RFC 8985). Lost packets are handed
//! back with their note so the connection re-sends their *content* as new
//! frames in new packets — never the old ciphertext, whose packet number is
//! its nonce. On the receiving side, [`ReplayWindow`] refuses duplicate
//! packets, [`AckRanges`] records what arrived as the ranges of the next ACK
//! frame, and [`AckPolicy`] says when that ACK is due.
//!
//! Everything here is a pure state machine: no sockets, no threads, no
//! clock. Time comes in as a `quanta::Instant` argument, so tests drive it
//! with `quanta::Clock::mock()`. Inputs from the network (ACK frames, packet
//! numbers) are treated as hostile: a malformed or lying ACK yields an
//! [`AckError`], never a panic, and costs time proportional to its ranges and
//! the packets it newly acknowledges, not to the packets in flight.
//!
//! # How the connection layer uses it
//!
//! One source of truth: the [`LossDetector`] holds the connection's only
//! RTT estimator ([`LossDetector::rtt`], ACK delay subtracted as RFC 9002 §5
//! asks) and its only count of bytes in flight
//! ([`LossDetector::bytes_in_flight`]). Loss detection, pacing and congestion
//! control all read these; tern-congestion's controllers keep neither and
//! take copies as arguments. Duplicates are refused once, by
//! [`ReplayWindow`].
//!
//! Sending a packet:
//! 1. [`LossDetector::on_sent`] with its number, size, flags and payload note;
//!    then the congestion controller's `on_sent` with
//!    [`LossDetector::bytes_in_flight`].
//!
//! Receiving a packet (after AEAD open succeeded):
//! 1. [`ReplayWindow::accept`] — drop the packet on error.
//! 2. Process its frames; hand each ACK frame to [`LossDetector::on_ack`]
//!    with a [`RecoverySink`] that queues lost frames for re-sending; an
//!    [`AckError`] closes the connection. Feed congestion control from the
//!    [`AckSummary`]: `acked_bytes` and `largest_acked_sent_at` (its
//!    `on_ack`), the [`LossReport`] (its `on_loss`, and its
//!    `on_persistent_congestion` when `persistent_congestion` is set), and
//!    each in-flight [`SpuriousLoss`] (its `on_spurious_loss`). An
//!    [`AckFrequency`] frame goes to [`AckPolicy::on_ack_frequency`].
//! 3. [`AckRanges::insert`], then [`AckPolicy::on_received`] with the returned
//!    [`Arrival`].
//!
//! Building a packet: if [`AckPolicy::ack_due`] (or there is room anyway),
//! write an ACK frame from [`AckRanges::iter`] and [`AckPolicy::ack_delay`],
//! then call [`AckPolicy::on_ack_sent`]. When [`AckFrequency::for_path`] for
//! the current window and RTT [`supersedes`](AckFrequency::supersedes) the
//! last request sent, send the new one to the peer.
//!
//! Timers: the connection's next wake-up is the earliest of
//! [`LossDetector::poll_timeout`] and [`AckPolicy::poll_timeout`]. On waking,
//! call [`LossDetector::on_timeout`]; a [`TimerEvent::Probe`] asks for one or
//! two ack-eliciting packets to be sent at once, a [`TimerEvent::LossDeclared`]
//! carries a [`LossReport`] for congestion control as an ACK's does.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tern_reliability::{
//!     AckPolicy, AckRanges, LossDetector, RecoveryBuffer, ReplayWindow, SentPacket,
//! };
//!
//! let (clock, time) = quanta::Clock::mock();
//! // The sender's note of what each packet carried: here, a message id.
//! let mut sender: LossDetector<u32> = LossDetector::default();
//! let (mut replay, mut received, mut policy) =
//!     (ReplayWindow::default(), AckRanges::default(), AckPolicy::default());
//!
//! // Send packets 0..6; packet 2 is lost on the way.
//! for pn in 0..6u64 {
//!     let packet = SentPacket {
//!         time_sent: clock.now(),
//!         size: 1452,
//!         ack_eliciting: true,
//!         in_flight: true,
//!         payload: pn as u32,
//!     };
//!     sender.on_sent(pn, packet)?;
//!     if pn != 2 {
//!         replay.accept(pn)?;
//!         let arrival = received.insert(pn);
//!         policy.on_received(clock.now(), true, arrival);
//!     }
//! }
//!
//! // The gap made the receiver's ACK due at once; it reaches the sender 50 ms later.
//! assert!(policy.ack_due(clock.now()));
//! let ack_delay = policy.ack_delay(clock.now());
//! policy.on_ack_sent();
//! time.increment(Duration::from_millis(50));
//!
//! let mut events = RecoveryBuffer::default();
//! let summary = sender.on_ack(clock.now(), received.iter(), ack_delay, &mut events)?;
//! assert_eq!(summary.newly_acked, 5);
//! assert_eq!(summary.lost.packets, 1);
//! assert_eq!(summary.rtt_sample, Some(Duration::from_millis(50)));
//! // Packet 2 is three below the largest acknowledged: lost; re-send message 2.
//! let lost: Vec<u32> = events.lost.iter().map(|(_, p)| p.payload).collect();
//! assert_eq!(lost, [2]);
//! assert_eq!(sender.bytes_in_flight(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod ack_policy;
mod ack_ranges;
mod error;
mod loss;
mod replay;
mod rtt;
mod sent_packets;

pub use ack_policy::{
    ACKS_PER_WINDOW, AckFrequency, AckPolicy, AckPolicyConfig, DEFAULT_MAX_ACK_ELICITING_THRESHOLD,
    MIN_REQUESTED_ACK_DELAY, REORDERING_ACKS,
};
pub use ack_ranges::{AckRanges, Arrival, DEFAULT_MAX_RANGES};
pub use error::{AckError, ReplayError, SendError};
pub use loss::{
    AckSummary, LossConfig, LossDetector, LossReport, LossStats, RecoveryBuffer, RecoverySink,
    TimerEvent,
};
pub use replay::{DEFAULT_REPLAY_WINDOW, INITIAL_REPLAY_WINDOW, MAX_REPLAY_WINDOW, ReplayWindow};
pub use rtt::{DEFAULT_INITIAL_RTT, RttEstimator};
pub use sent_packets::{
    MAX_PACKET_NUMBER, MAX_PACKET_NUMBER_GAP, Resolved, SentPacket, SentPackets, SpuriousLoss,
};
