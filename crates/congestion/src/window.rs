//! The window bounds every controller is configured with — a datagram size,
//! and a minimum, an initial and a maximum window — checked one way for all.

use crate::MAX_WINDOW_LIMIT;

/// A controller's window bounds in bytes, valid: `mss` is 1 to 65 535 and
/// `0 < min <= initial <= max <= MAX_WINDOW_LIMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowBounds {
    /// The size of a full packet.
    pub(crate) mss: u64,
    /// The smallest window.
    pub(crate) min: u64,
    /// The window a connection starts with.
    pub(crate) initial: u64,
    /// The largest window.
    pub(crate) max: u64,
}

/// Which check of [`WindowBounds::new`] failed. Each controller's
/// configuration error maps it to its own variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoundsError {
    /// The datagram size is zero or above 65 535.
    MaxDatagramSize,
    /// The minimum window is zero, or the initial window is below it.
    Window,
    /// The maximum window is below the initial window or above
    /// [`MAX_WINDOW_LIMIT`].
    MaxWindow,
}

impl WindowBounds {
    /// The bounds of a configuration, the minimum and initial windows given
    /// in packets of `max_datagram_size` bytes.
    pub(crate) fn new(
        max_datagram_size: u64,
        min_window_packets: u32,
        initial_window_packets: u32,
        max_window: u64,
    ) -> Result<Self, BoundsError> {
        if !(1..=65_535).contains(&max_datagram_size) {
            return Err(BoundsError::MaxDatagramSize);
        }
        // At most 2^32 packets of 2^16 bytes: the products cannot overflow.
        let mss = max_datagram_size;
        let min = u64::from(min_window_packets) * mss;
        let initial = u64::from(initial_window_packets) * mss;
        if min == 0 || initial < min {
            return Err(BoundsError::Window);
        }
        if max_window < initial || max_window > MAX_WINDOW_LIMIT {
            return Err(BoundsError::MaxWindow);
        }
        Ok(Self {
            mss,
            min,
            initial,
            max: max_window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_names_what_failed() {
        let valid = WindowBounds::new(1_000, 2, 10, 1 << 20);
        assert_eq!(
            valid,
            Ok(WindowBounds {
                mss: 1_000,
                min: 2_000,
                initial: 10_000,
                max: 1 << 20,
            })
        );
        for mss in [0, 65_536] {
            assert_eq!(
                WindowBounds::new(mss, 2, 10, 1 << 20),
                Err(BoundsError::MaxDatagramSize)
            );
        }
        for (min, initial) in [(0, 10), (3, 2)] {
            assert_eq!(
                WindowBounds::new(1_000, min, initial, 1 << 20),
                Err(BoundsError::Window)
            );
        }
        for max in [9_999, MAX_WINDOW_LIMIT + 1] {
            assert_eq!(
                WindowBounds::new(1_000, 2, 10, max),
                Err(BoundsError::MaxWindow)
            );
        }
        let widest = WindowBounds::new(65_535, u32::MAX, u32::MAX, MAX_WINDOW_LIMIT);
        assert_eq!(widest, Err(BoundsError::MaxWindow), "no overflow");
        assert!(WindowBounds::new(1, 1, 1, 1).is_ok(), "the smallest bounds");
    }
}
