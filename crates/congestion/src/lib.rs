//! Tern congestion control: how much a connection may send, and when.
//!
//! This crate holds the pure state machines a Tern connection consults
//! before every packet:
//!
//! - a [`Controller`] decides the congestion window and the pacing rate:
//!   [`Ledbat`] (RFC 6817 with slow start and the LEDBAT++ fairness
//!   remedies; the default, since peer-to-peer transfers are background
//!   traffic that should yield to everything else) or [`Reno`] (loss-based
//!   AIMD); [`AnyController`] dispatches between them without virtual calls;
//! - a [`Pacer`] spreads the window over the round trip;
//! - a [`TokenBucket`] enforces an optional rate cap, per connection and per
//!   endpoint ([`take_all`]).
//!
//! Nothing here reads a clock, sleeps, spawns or touches a socket: `now` is
//! an argument (a `quanta::Instant`; tests drive a `quanta::Clock::mock()`),
//! durations are `std::time::Duration`, sizes are bytes, rates bytes per
//! second. Calls never panic, whatever the inputs: counts saturate and
//! instants earlier than the last one are tolerated.
//!
//! # How a connection uses it
//!
//! For each packet it wants to send, a connection checks
//! `bytes_in_flight() + size <= window()`, asks the pacer (and the rate
//! caps) when the packet may leave, and after sending calls
//! [`Controller::on_sent`] and [`Pacer::on_sent`]. When an ACK frame
//! arrives it calls [`Controller::on_ack`] with the newly acknowledged
//! bytes, the RTT sample and the one-way-delay sample the frame carries;
//! when loss detection declares a packet lost, [`Controller::on_loss`] with
//! the time that packet was sent.
//!
//! ```
//! use std::time::Duration;
//! use tern_congestion::{Controller, Ledbat, LedbatConfig, OneWayDelay, Pacer, PacerConfig, Take};
//!
//! let (clock, mock) = quanta::Clock::mock();
//! let mut cc = Ledbat::new(LedbatConfig::default())?;
//! let mut pacer = Pacer::new(PacerConfig::default());
//!
//! // Send while the window and the pacer allow.
//! let size = 1_452;
//! let mut sent = 0;
//! while cc.bytes_in_flight() + size <= cc.window() {
//!     match pacer.poll(clock.now(), cc.pacing_rate(), size) {
//!         Take::Now => {
//!             cc.on_sent(clock.now(), size);
//!             pacer.on_sent(clock.now(), size);
//!             sent += 1;
//!         }
//!         // A driver would arm its timer here; the example just waits.
//!         Take::WaitUntil(at) => mock.increment(at.duration_since(clock.now())),
//!     }
//! }
//! assert_eq!(sent, 26); // the initial window
//!
//! // One round trip later the ACK comes back, with an empty queue.
//! mock.increment(Duration::from_millis(40));
//! cc.on_ack(
//!     clock.now(),
//!     sent * size,
//!     Some(Duration::from_millis(40)),
//!     Some(OneWayDelay::from_micros(20_000)),
//! );
//! assert!(cc.in_slow_start());
//! assert_eq!(cc.window(), 2 * 26 * size);
//! # Ok::<(), tern_congestion::LedbatConfigError>(())
//! ```

mod base_delay;
mod controller;
mod delay_filter;
pub mod ledbat;
mod pacer;
mod reno;
mod rtt;
mod time;
mod token_bucket;

pub use base_delay::{BUCKET, BaseDelayHistory, MAX_BASE_HISTORY};
pub use controller::{AnyController, Controller, OneWayDelay};
pub use delay_filter::{CurrentDelayFilter, MAX_CURRENT_FILTER};
pub use ledbat::{Ledbat, LedbatConfig, LedbatConfigError, MAX_WINDOW_LIMIT};
pub use pacer::{
    PACING_GAIN_PERMILLE, Pacer, PacerConfig, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate,
};
pub use reno::{Reno, RenoConfig, RenoConfigError};
pub use token_bucket::{Take, TokenBucket, TokenBucketError, take_all};

/// A broken internal invariant, found by an `invariants()` check.
///
/// Seeing one is a bug in this crate, never a consequence of inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct InvariantViolation(pub &'static str);
