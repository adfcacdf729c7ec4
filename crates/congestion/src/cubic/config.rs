//! What a [`Cubic`](super::Cubic) controller is configured with, and the
//! errors of its checks.

use super::HyStartConfig;
use crate::window::BoundsError;

/// Configuration of a [`Cubic`](super::Cubic) controller.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CubicConfig {
    /// The size of a full packet (SMSS), in bytes (default 1452; 1 to
    /// 65 535).
    pub max_datagram_size: u64,
    /// The window a connection starts with, in packets (default 10, as
    /// RFC 9002's kInitialWindow).
    pub initial_window_packets: u32,
    /// The smallest window, in packets (default 2, as RFC 9002's
    /// kMinimumWindow and RFC 9438 §4.6's floor after a loss).
    pub min_window_packets: u32,
    /// The largest window, in bytes (default 64 MiB; at least the initial
    /// window, at most [`MAX_WINDOW_LIMIT`](crate::MAX_WINDOW_LIMIT)).
    pub max_window: u64,
    /// C: how fast the window grows away from the last congestion event, in
    /// packets per second³ (default 0.4, RFC 9438 §5's recommendation; in
    /// (0, 100]).
    pub c: f64,
    /// β_cubic: the window after a congestion event, as a fraction of the
    /// window before it (dimensionless, default 0.7, RFC 9438 §4.6's
    /// recommendation; in (0, 1)).
    pub beta: f64,
    /// Whether a flow whose window at a congestion event is below the last
    /// one's plateau lowers its plateau further (RFC 9438 §4.7's fast
    /// convergence; default true).
    pub fast_convergence: bool,
    /// HyStart++'s constants, or `None` for RFC 5681's slow start, which
    /// ends only at a loss (default: RFC 9406's constants).
    pub hystart: Option<HyStartConfig>,
}

impl Default for CubicConfig {
    fn default() -> Self {
        Self {
            max_datagram_size: 1_452,
            initial_window_packets: 10,
            min_window_packets: 2,
            max_window: 64 << 20,
            c: 0.4,
            beta: 0.7,
            fast_convergence: true,
            hystart: Some(HyStartConfig::default()),
        }
    }
}

/// A [`CubicConfig`] value out of its documented range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CubicConfigError {
    /// `max_datagram_size` is zero or above 65 535.
    #[error("max datagram size must be 1 to 65 535 bytes")]
    MaxDatagramSize,
    /// A window is zero, the initial window is below the minimum, or the
    /// maximum below the initial window or above 2^46 bytes.
    #[error("windows must satisfy 1 packet <= min <= initial <= max <= 2^46 bytes")]
    Window,
    /// `c` is not in (0, 100].
    #[error("C must be in (0, 100] packets per second cubed")]
    C,
    /// `beta` is not in (0, 1).
    #[error("beta must be in (0, 1)")]
    Beta,
    /// A HyStart++ constant is out of its range.
    #[error("HyStart++ constants out of range")]
    HyStart,
}

// What failed in the window bounds' check the controllers share, as this
// error (hidden: the check is private to the crate).
#[doc(hidden)]
impl From<BoundsError> for CubicConfigError {
    fn from(error: BoundsError) -> Self {
        match error {
            BoundsError::MaxDatagramSize => Self::MaxDatagramSize,
            BoundsError::Window | BoundsError::MaxWindow => Self::Window,
        }
    }
}
