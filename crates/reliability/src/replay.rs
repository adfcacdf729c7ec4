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
//! The window starts at [`INITIAL_REPLAY_WINDOW`] packet numbers (64 bytes
//! of bitmap, held inline: most connections, idle ones above all, never
//! see more reordering) and doubles, up to the size it was made with, as soon as an
//! accepted packet arrives half the window below the largest, or a packet
//! arrives too old for the window but not for its size. The numbers a
//! doubling adds below the old window were refused as too old until then,
//! and the window cannot know which of them it had accepted before, so it
//! counts them all as accepted: a packet among them is refused (and sent
//! again by the peer's loss recovery), never accepted twice.
//!
//! [`ReplayWindow::for_path`] computes the size. The default, 4096 packets (512
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

/// The window a [`ReplayWindow`] starts with: 512 packet numbers (64 bytes
/// of bitmap), unless it was made smaller.
pub const INITIAL_REPLAY_WINDOW: usize = 512;

/// The largest window: 2^20 packet numbers (128 KiB of bitmap), 0.87 s of
/// reordering at 1.2 M packets/s.
pub const MAX_REPLAY_WINDOW: usize = 1 << 20;

/// The words of the initial window, held inline.
const INLINE_WORDS: usize = INITIAL_REPLAY_WINDOW / 64;

/// A window's bitmap: inline at its initial size (no allocation, and no
/// allocator's header, for the many connections that never see more
/// reordering), boxed once it grows.
#[derive(Debug, Clone)]
enum Words {
    /// The first `len` of `words`.
    Inline {
        words: [u64; INLINE_WORDS],
        len: u8,
    },
    Boxed(Box<[u64]>),
}

impl Words {
    /// `len` words, all clear.
    fn new(len: usize) -> Self {
        match u8::try_from(len) {
            Ok(len) if usize::from(len) <= INLINE_WORDS => Self::Inline {
                words: [0; INLINE_WORDS],
                len,
            },
            _ => Self::Boxed(vec![0; len].into_boxed_slice()),
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        match self {
            Self::Inline { words, len } => &words[..usize::from(*len)],
            Self::Boxed(words) => words,
        }
    }
}

impl std::ops::DerefMut for Words {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Self::Inline { words, len } => &mut words[..usize::from(*len)],
            Self::Boxed(words) => words,
        }
    }
}

/// A sliding bitmap of recently accepted packet numbers.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// Bit `pn % window` is set if `pn` (within the window) was accepted.
    words: Words,
    /// Largest packet number accepted.
    largest: Option<u64>,
    /// The most packet numbers the window may grow to span.
    capacity: u64,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_WINDOW)
    }
}

impl ReplayWindow {
    /// A window that grows to judge the `window` packet numbers up to the
    /// largest accepted (rounded up to a multiple of 64, at least 64, at
    /// most [`MAX_REPLAY_WINDOW`]). It starts at [`INITIAL_REPLAY_WINDOW`],
    /// or `window` if smaller, and allocates again each time it doubles.
    #[must_use]
    pub fn new(window: usize) -> Self {
        let capacity = window.min(MAX_REPLAY_WINDOW).div_ceil(64).max(1);
        Self {
            words: Words::new(capacity.min(INLINE_WORDS)),
            largest: None,
            capacity: capacity as u64 * 64,
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

    /// How many packet numbers the window spans now.
    #[must_use]
    pub fn window(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// How many packet numbers the window may grow to span.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.capacity
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
    #[inline]
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
        // Most packets arrive in order: the next number's slot held the
        // number a window below, which now falls out, so setting its bit
        // is the whole slide.
        if let Some(largest) = self.largest
            && largest.checked_add(1) == Some(packet_number)
        {
            self.largest = Some(packet_number);
            let (word, bit) = self.position(packet_number);
            self.words[word] |= bit;
            return Ok(());
        }
        if let Err(error) = self.check(packet_number) {
            if let (ReplayError::TooOld(_), Some(largest)) = (error, self.largest) {
                self.grow_for(largest - packet_number);
            }
            return Err(error);
        }
        match self.largest {
            Some(largest) if packet_number > largest => self.slide_to(largest, packet_number),
            Some(largest) if (largest - packet_number) * 2 >= self.window() => {
                self.grow_for(largest - packet_number);
            }
            Some(_) => {}
            None => self.largest = Some(packet_number),
        }
        let (word, bit) = self.position(packet_number);
        self.words[word] |= bit;
        Ok(())
    }

    /// Doubles the window until a packet `distance` below the largest lies
    /// in its lower half (up to its capacity). The numbers added below the
    /// old window count as accepted: they were refused as too old, and
    /// whether they had been accepted before is forgotten.
    fn grow_for(&mut self, distance: u64) {
        let Some(largest) = self.largest else {
            return;
        };
        let old = self.window();
        let mut new = old;
        while new < self.capacity && distance.saturating_mul(2) >= new {
            new *= 2;
        }
        let new = new.min(self.capacity);
        if new <= old {
            return;
        }
        let mut grown = Self {
            words: Words::Boxed(vec![0; (new / 64) as usize].into_boxed_slice()),
            largest: self.largest,
            capacity: self.capacity,
        };
        // Numbers from largest − new + 1 to largest, never below zero: those
        // within the old window keep their mark, the older ones are marked.
        for distance in 0..new.min(largest.saturating_add(1)) {
            let pn = largest - distance;
            let accepted = distance >= old || self.check(pn).is_err();
            if accepted {
                let (word, bit) = grown.position(pn);
                grown.words[word] |= bit;
            }
        }
        *self = grown;
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
        let span = window.window();
        assert_eq!(span, INITIAL_REPLAY_WINDOW as u64);
        assert_eq!(
            window.check(5000 - span),
            Err(ReplayError::TooOld(5000 - span))
        );
        assert_eq!(window.check(5000 - span + 1), Ok(()));
    }

    #[test]
    fn a_packet_too_old_for_the_window_but_not_its_size_grows_it_and_is_refused_once() {
        let mut window = ReplayWindow::new(2048);
        window.accept(5000).unwrap();
        window.accept(4000).unwrap_err();
        assert_eq!(window.window(), 2048);
        // 4000 was refused, not recorded: it is counted as accepted.
        assert_eq!(window.check(4000), Err(ReplayError::Duplicate(4000)));
        // Within the old window nothing changed; past the size, too old.
        assert_eq!(window.check(4999), Ok(()));
        assert_eq!(window.check(5000), Err(ReplayError::Duplicate(5000)));
        assert_eq!(window.check(5000 - 2048), Err(ReplayError::TooOld(2952)));
        // Later packets land in a window that spans the reordering.
        window.accept(6000).unwrap();
        window.accept(5001).unwrap();
        window.invariants().unwrap();
    }

    #[test]
    fn a_window_grows_ahead_of_reordering_that_grows_gradually() {
        let mut window = ReplayWindow::new(16_384);
        // Every 100th packet arrives late, each later than the one before,
        // up to 11 000 packets late.
        let mut late: Vec<(u64, u64)> = Vec::new();
        let mut accepted = HashSet::new();
        for pn in 0..200_000u64 {
            if pn % 100 == 0 {
                late.push((pn, pn + (pn / 2).min(11_000)));
                continue;
            }
            window.accept(pn).unwrap();
            accepted.insert(pn);
            while let Some(&(due, after)) = late.first() {
                if after > pn {
                    break;
                }
                late.remove(0);
                window.accept(due).unwrap();
                assert_eq!(window.accept(due), Err(ReplayError::Duplicate(due)));
                accepted.insert(due);
            }
        }
        assert!(accepted.len() > 199_000);
        assert_eq!(window.window(), 16_384);
        window.invariants().unwrap();
    }

    #[test]
    fn an_idle_window_is_small() {
        assert_eq!(ReplayWindow::default().window(), 512);
        assert_eq!(
            ReplayWindow::default().capacity(),
            DEFAULT_REPLAY_WINDOW as u64
        );
        // Inline until it grows; boxed from then on.
        let mut window = ReplayWindow::default();
        assert!(matches!(window.words, Words::Inline { len: 8, .. }));
        window.accept(1_000).unwrap();
        window.accept(1_000 - 300).unwrap();
        assert_eq!(window.window(), 1024);
        assert!(matches!(window.words, Words::Boxed(_)));
        assert!(matches!(
            ReplayWindow::new(128).words,
            Words::Inline { len: 2, .. }
        ));
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
            ReplayWindow::for_path(1_200_000, Duration::from_millis(10)).capacity(),
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
            ReplayWindow::new(usize::MAX).capacity(),
            MAX_REPLAY_WINDOW as u64
        );
    }

    #[test]
    fn a_sized_window_absorbs_its_reordering() {
        let mut window = ReplayWindow::for_path(1_200_000, Duration::from_millis(10));
        // A first packet 6 000 late is refused, too old for the initial
        // window, and the window grows to its size; from then on a packet
        // 12 000 late (10 ms) is accepted.
        window.accept(6_001).unwrap();
        assert_eq!(window.accept(1), Err(ReplayError::TooOld(1)));
        assert_eq!(window.window(), 12_032);
        for pn in 6_003..=18_002 {
            window.accept(pn).unwrap();
        }
        window.accept(6_002).unwrap();
        assert_eq!(window.accept(6_002), Err(ReplayError::Duplicate(6_002)));
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

        /// A window that grows never accepts a number twice, always
        /// accepts a number above the largest, and stays within its size.
        #[test]
        fn a_growing_window_never_accepts_a_number_twice(
            steps in prop::collection::vec(0u64..6_000, 1..400),
        ) {
            let mut window = ReplayWindow::new(2048);
            let mut seen = HashSet::new();
            let mut largest: Option<u64> = None;
            for pn in steps {
                let result = window.accept(pn);
                if seen.contains(&pn) {
                    prop_assert!(result.is_err());
                }
                if largest.is_none_or(|l| pn > l) {
                    prop_assert_eq!(result, Ok(()));
                }
                if result.is_ok() {
                    seen.insert(pn);
                    largest = Some(largest.map_or(pn, |l| l.max(pn)));
                }
                prop_assert!(window.window() <= window.capacity());
                prop_assert_eq!(window.invariants(), Ok(()));
            }
        }
    }
}
