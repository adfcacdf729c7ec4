//! Tern congestion control: how much a connection may send, and when.
//!
//! This crate holds the pure state machines a Tern connection consults
//! before every packet:
//!
//! - a [`Controller`] decides the congestion window and the pacing rate:
//!   [`Ledbat`] (RFC 6817 with slow start and the LEDBAT++ fairness
//!   remedies; the default, since peer-to-peer transfers are background
//!   traffic that should yield to everything else), [`Cubic`] (RFC 9438 with
//!   HyStart++, RFC 9406: the foreground choice, for a user waiting on a
//!   transfer, which takes its fair share beside TCP) or [`Reno`] (loss-based
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
//! The connection owns one RTT estimator and one sent-packet tracker
//! (tern-reliability); a controller keeps neither an RTT estimate nor a
//! count of bytes in flight of its own, and is handed the tracker's figures
//! as arguments (see [`Rtt`] and the [`Controller`] docs). For each packet it
//! wants to send, a connection checks the tracker's
//! `bytes_in_flight + size <= window()`, asks the pacer (and the rate caps)
//! when the packet may leave, and after sending calls [`Controller::on_sent`]
//! and [`Pacer::on_sent`]. When an ACK frame arrives it calls
//! [`Controller::on_ack`] with what the tracker's summary says was
//! acknowledged ([`Acked`]), [`Controller::on_loss`] with what it declared
//! lost ([`Lost`]), [`Controller::on_spurious_loss`] for losses it proved
//! spurious and [`Controller::on_persistent_congestion`] when it established
//! persistent congestion.
//!
//! ```
//! use std::time::Duration;
//! use tern_congestion::{Acked, Controller, Ledbat, LedbatConfig, OneWayDelay, Pacer, PacerConfig, Rtt, Take};
//!
//! let (clock, mock) = quanta::Clock::mock();
//! let mut cc = Ledbat::new(LedbatConfig::default())?;
//! let mut pacer = Pacer::new(PacerConfig::default());
//! // The connection's own count (its sent-packet tracker) and RTT estimate.
//! let mut bytes_in_flight = 0;
//! let rtt = Rtt::initial(Duration::from_millis(333));
//!
//! // Send while the window and the pacer allow.
//! let size = 1_452;
//! let first_sent = clock.now();
//! while bytes_in_flight + size <= cc.window() {
//!     match pacer.poll(clock.now(), cc.pacing_rate(&rtt), size) {
//!         Take::Now => {
//!             bytes_in_flight += size;
//!             cc.on_sent(clock.now(), bytes_in_flight);
//!             pacer.on_sent(clock.now(), size);
//!         }
//!         // A driver would arm its timer here; the example just waits.
//!         Take::WaitUntil(at) => mock.increment(at.duration_since(clock.now())),
//!     }
//! }
//! assert_eq!(bytes_in_flight, 26 * size); // the initial window
//!
//! // The ACK of the whole window comes back, with an empty queue; the
//! // estimator took a 40 ms sample.
//! mock.increment(Duration::from_millis(40));
//! let rtt = Rtt::new(Duration::from_millis(40), Duration::from_millis(40), Duration::from_millis(40));
//! let acked = Acked {
//!     bytes: bytes_in_flight,
//!     largest_sent_at: first_sent,
//!     bytes_in_flight: 0,
//!     one_way_delay: Some(OneWayDelay::from_micros(20_000)),
//!     app_limited: false,
//! };
//! cc.on_ack(clock.now(), &acked, &rtt);
//! assert!(cc.in_slow_start());
//! assert_eq!(cc.window(), 2 * 26 * size);
//! # Ok::<(), tern_congestion::LedbatConfigError>(())
//! ```

#![forbid(unsafe_code)]

mod base_delay;
mod controller;
pub mod cubic;
mod delay_filter;
pub mod ledbat;
mod pacer;
mod recovery;
mod reno;
#[cfg(test)]
mod test_ops;
mod time;
mod token_bucket;
mod window;

pub use base_delay::{BUCKET, BaseDelayHistory, MAX_BASE_HISTORY};
pub use controller::{Acked, AnyController, Controller, Lost, OneWayDelay, Rtt};
pub use cubic::{Cubic, CubicConfig, CubicConfigError, HyStartConfig};
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
