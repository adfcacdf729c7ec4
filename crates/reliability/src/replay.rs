//! Refusing replayed packets.
//!
//! Every packet number is used once per key (it is the AEAD nonce counter),
//! so a packet number seen twice is a replay or a network duplicate, and
//! either way must not be processed again. [`ReplayWindow`] remembers the
//! last `window` packet numbers below the largest accepted in a bitmap and
//! refuses anything older, which it can no longer judge.
//!
//! # Where the connection calls it
//!
//! After AEAD open succeeds and before any frame is processed: first
//! [`ReplayWindow::check`], then, once the packet is accepted,
//! [`ReplayWindow::accept`] (or `accept` alone, which checks too). Checking
//! only authenticated packets matters: a forged packet number must not be able
//! to slide the window forward and make genuine packets look too old.
//!
//! # Sizing
//!
//! A packet that arrives more than `window` numbers below the largest one
//! accepted is refused as too old, and its data is then re-sent by the
//! peer's loss recovery: harmless once, costly if normal reordering does it.
//! The window must therefore span every packet sent during the longest
//! reordering the connection should absorb:
//!
//! ```text
//! window = packets per second × reordering time       (rounded up to 64)
//! ```
//!
//! [`ReplayWindow::for_path`] computes it. The default, 4096 packets (512
//! bytes of bitmap), absorbs 47 ms of reordering at 1 Gbit/s of 1452-byte
//! packets (86 000 packets/s) but only 3.4 ms at Tern's target of 1.2 M
//! packets/s (~14 Gbit/s), where 10 ms needs 12 032 packets (1.5 KiB). The
//! size is capped at [`MAX_REPLAY_WINDOW`] (128 KiB of bitmap), so a
//! configuration error cannot make a connection's state unbounded.

use std::time::Duration;

use crate::error::ReplayError;

/// Default window: 4096 packet numbers (512 bytes of bitmap), about 5.8 MB of
/// reordering at 1452-byte packets.
pub const DEFAULT_REPLAY_WINDOW: usize = 4096;

/// The largest window: 2^20 packet numbers (128 KiB of bitmap), 0.87 s of
/// reordering at 1.2 M packets/s.
pub const MAX_REPLAY_WINDOW: usize = 1 << 20;

/// A sliding bitmap of recently accepted packet numbers.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// Bit `pn % window` is set if `pn` (within the window) was accepted.
    words: Box<[u64]>,
    /// Largest packet number accepted.
    largest: Option<u64>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_WINDOW)
    }
}

impl ReplayWindow {
    /// A window judging the `window` packet numbers up to the largest accepted
    /// (rounded up to a multiple of 64, at least 64, at most
    /// [`MAX_REPLAY_WINDOW`]). Allocates once.
    #[must_use]
    pub fn new(window: usize) -> Self {
        let words = window.min(MAX_REPLAY_WINDOW).div_ceil(64).max(1);
        Self {
            words: vec![0; words].into_boxed_slice(),
            largest: None,
        }
    }

    /// A window for a path carrying `packets_per_second` that must absorb
    /// `reordering` of reordering: `packets_per_second × reordering` packet
    /// numbers, at least [`DEFAULT_REPLAY_WINDOW`] and at most
    /// [`MAX_REPLAY_WINDOW`] (see the module docs for the arithmetic).
    #[must_use]
    pub fn for_path(packets_per_second: u64, reordering: Duration) -> Self {
        Self::new(Self::size_for(packets_per_second, reordering))
    }

    /// The window size [`ReplayWindow::for_path`] uses, in packet numbers.
    #[must_use]
    pub fn size_for(packets_per_second: u64, reordering: Duration) -> usize {
        let packets =
            u128::from(packets_per_second).saturating_mul(reordering.as_nanos()) / 1_000_000_000;
        usize::try_from(packets)
            .unwrap_or(MAX_REPLAY_WINDOW)
            .clamp(DEFAULT_REPLAY_WINDOW, MAX_REPLAY_WINDOW)
            .next_multiple_of(64)
    }

    /// How many packet numbers the window spans.
    #[must_use]
    pub fn window(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// The largest packet number accepted.
    #[must_use]
    pub fn largest(&self) -> Option<u64> {
        self.largest
    }

    /// Whether `packet_number` may be accepted, without recording it.
    ///
    /// # Errors
    /// [`ReplayError::Duplicate`] if it was accepted before,
    /// [`ReplayError::TooOld`] if it lies `window` or more below the largest.
    pub fn check(&self, packet_number: u64) -> Result<(), ReplayError> {
        let Some(largest) = self.largest else {
            return Ok(());
        };
        if packet_number > largest {
            return Ok(());
        }
        if largest - packet_number >= self.window() {
            return Err(ReplayError::TooOld(packet_number));
        }
        let (word, bit) = self.position(packet_number);
        if self.words[word] & bit != 0 {
            return Err(ReplayError::Duplicate(packet_number));
        }
        Ok(())
    }

    /// Checks `packet_number` and records it as accepted.
    ///
    /// # Errors
    /// As [`ReplayWindow::check`]; nothing is recorded then.
    pub fn accept(&mut self, packet_number: u64) -> Result<(), ReplayError> {
        self.check(packet_number)?;
        match self.largest {
            Some(largest) if packet_number > largest => self.slide_to(largest, packet_number),
            Some(_) => {}
            None => self.largest = Some(packet_number),
        }
        let (word, bit) = self.position(packet_number);
        self.words[word] |= bit;
        Ok(())
    }

    /// Checks the window's internal consistency: no bit is set for a number
    /// that cannot have been accepted, and the largest's bit is set.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        let Some(largest) = self.largest else {
            return match self.words.iter().all(|&w| w == 0) {
                true => Ok(()),
                false => Err("bits set before any packet was accepted".to_owned()),
            };
        };
        let (word, bit) = self.position(largest);
        if self.words[word] & bit == 0 {
            return Err(format!("largest {largest} is not marked"));
        }
        // Slots standing for numbers below zero (window wider than largest) must be clear.
        let window = self.window();
        for distance in largest.saturating_add(1)..window {
            let slot = (largest % window + window - distance) % window;
            if self.words[(slot / 64) as usize] & (1 << (slot % 64)) != 0 {
                return Err(format!(
                    "bit for {largest} - {distance} set below packet number zero"
                ));
            }
        }
        Ok(())
    }

    /// Moves the window's top from `largest` to `new_largest`, clearing the
    /// slots of the numbers in between (they have not been received).
    fn slide_to(&mut self, largest: u64, new_largest: u64) {
        self.largest = Some(new_largest);
        if new_largest - largest >= self.window() {
            self.words.fill(0);
            return;
        }
        // Count the numbers to clear rather than compare with `new_largest`,
        // which may be u64::MAX.
        let mut pn = largest + 1;
        let mut remaining = new_largest - largest;
        while remaining > 0 {
            let (word, bit) = self.position(pn);
            if pn.is_multiple_of(64) && remaining >= 64 {
                self.words[word] = 0;
                pn = pn.wrapping_add(64);
                remaining -= 64;
            } else {
                self.words[word] &= !bit;
                pn = pn.wrapping_add(1);
                remaining -= 1;
            }
        }
    }

    /// Word index and bit mask of a packet number's slot.
    fn position(&self, packet_number: u64) -> (usize, u64) {
        let slot = packet_number % self.window();
        ((slot / 64) as usize, 1 << (slot % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn duplicate_packet_is_refused_by_replay_window() {
        let mut window = ReplayWindow::default();
        window.accept(7).unwrap();
        assert_eq!(window.check(7), Err(ReplayError::Duplicate(7)));
        assert_eq!(window.accept(7), Err(ReplayError::Duplicate(7)));
    }

    #[test]
    fn reordered_packet_inside_the_window_is_accepted_once() {
        let mut window = ReplayWindow::new(128);
        window.accept(100).unwrap();
        window.accept(50).unwrap();
        assert_eq!(window.accept(50), Err(ReplayError::Duplicate(50)));
        window.accept(0).unwrap();
    }

    #[test]
    fn packet_a_full_window_below_the_largest_is_too_old() {
        let mut window = ReplayWindow::new(2048);
        window.accept(5000).unwrap();
        assert_eq!(
            window.check(5000 - 2048),
            Err(ReplayError::TooOld(5000 - 2048))
        );
        assert_eq!(window.check(5000 - 2047), Ok(()));
    }

    #[test]
    fn sliding_forward_forgets_old_marks() {
        let mut window = ReplayWindow::new(64);
        window.accept(1).unwrap();
        window.accept(65).unwrap();
        // 65 and 1 share a slot; 1 is now too old, and 65 must not look like 1.
        assert_eq!(window.check(1), Err(ReplayError::TooOld(1)));
        window.accept(200).unwrap();
        assert_eq!(window.check(137), Ok(()));
        window.invariants().unwrap();
    }

    #[test]
    fn the_window_is_sized_for_rate_times_reordering() {
        // 1.2 M packets/s and 10 ms of reordering: 12 000, rounded up to 64.
        let size = ReplayWindow::size_for(1_200_000, Duration::from_millis(10));
        assert_eq!(size, 12_032);
        assert_eq!(
            ReplayWindow::for_path(1_200_000, Duration::from_millis(10)).window(),
            12_032
        );
        // Slow paths keep the default; absurd ones stop at the cap.
        assert_eq!(
            ReplayWindow::size_for(1_000, Duration::from_millis(10)),
            DEFAULT_REPLAY_WINDOW
        );
        assert_eq!(
            ReplayWindow::size_for(u64::MAX, Duration::MAX),
            MAX_REPLAY_WINDOW
        );
        assert_eq!(
            ReplayWindow::new(usize::MAX).window(),
            MAX_REPLAY_WINDOW as u64
        );
    }

    #[test]
    fn a_sized_window_absorbs_its_reordering() {
        let mut window = ReplayWindow::for_path(1_200_000, Duration::from_millis(10));
        // Packet 0 arrives 10 ms late, after 12 000 later ones.
        for pn in 1..=12_000 {
            window.accept(pn).unwrap();
        }
        window.accept(0).unwrap();
        assert_eq!(window.accept(0), Err(ReplayError::Duplicate(0)));
        window.invariants().unwrap();
    }

    #[test]
    fn check_does_not_record() {
        let mut window = ReplayWindow::default();
        window.check(3).unwrap();
        window.accept(3).unwrap();
        assert_eq!(window.largest(), Some(3));
    }

    #[test]
    fn extreme_packet_numbers_are_handled() {
        let mut window = ReplayWindow::default();
        window.accept(u64::MAX - 200).unwrap();
        window.accept(u64::MAX).unwrap();
        window.accept(u64::MAX - 1).unwrap();
        assert_eq!(
            window.check(u64::MAX - 200),
            Err(ReplayError::Duplicate(u64::MAX - 200))
        );
        assert_eq!(
            window.check(u64::MAX),
            Err(ReplayError::Duplicate(u64::MAX))
        );
        assert_eq!(window.check(0), Err(ReplayError::TooOld(0)));
        window.invariants().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn replay_window_agrees_with_a_set_inside_its_window(
            window_words in 1usize..4,
            steps in prop::collection::vec((0u64..400, any::<bool>()), 1..300),
        ) {
            let mut window = ReplayWindow::new(window_words * 64);
            let span = window.window();
            let mut seen = HashSet::new();
            let mut largest: Option<u64> = None;
            for (pn, accept) in steps {
                let expected = match largest {
                    Some(l) if pn <= l && l - pn >= span => Err(ReplayError::TooOld(pn)),
                    _ if seen.contains(&pn) => Err(ReplayError::Duplicate(pn)),
                    _ => Ok(()),
                };
                prop_assert_eq!(window.check(pn), expected);
                if accept {
                    prop_assert_eq!(window.accept(pn), expected);
                    if expected.is_ok() {
                        seen.insert(pn);
                        largest = Some(largest.map_or(pn, |l| l.max(pn)));
                    }
                }
                prop_assert_eq!(window.invariants(), Ok(()));
            }
        }
    }
}
