//! The responder's replay guard: each intro is accepted once while its
//! timestamp is inside the window, in memory bounded by the intro rate the
//! endpoint accepts.
//!
//! # What the guard is for in version 2
//!
//! Session keys depend on the responder's fresh X25519 key, so a replayed
//! intro, to any responder, after any restart or clock step, yields a
//! session whose keys nobody but the responder holds: no captured packet
//! opens, and the replayer cannot send. Replay protection therefore no
//! longer has to survive a restart. The guard keeps a replayed intro from
//! creating a second half-open connection and tells the endpoint that an
//! initiator repeated its intro ([`AcceptError::Replayed`]), so it can
//! resend the reply it already sent.
//!
//! # Sizing
//!
//! An intro is accepted while its timestamp is within `window` of the
//! responder's clock, in either direction, and remembered until its
//! timestamp is `window` in the past: at most `2 × window` after it was
//! accepted. If the endpoint accepts at most `R` intros a second (its rate
//! limit, which it needs anyway: each costs an RSA decryption), the guard
//! never holds more than `2 × window × R` intros that still matter, and
//! [`ReplayGuard::for_intro_rate`] sizes it so. With the defaults, 30 s and
//! 1 000 intros a second (about what one core decrypts), that is 60 000
//! entries, a few megabytes.
//!
//! A flood beyond that rate (the endpoint's limit failing, or a guard sized
//! too small) cannot lock anyone out: when full, the guard forgets its
//! oldest intro and still accepts every fresh one. The forgotten intro could
//! then be replayed once more within its window, which costs the responder
//! a decryption and a half-open connection, exactly what a fresh intro from
//! the same attacker costs, and gives the attacker no key.

use core::num::NonZeroUsize;
use core::time::Duration;
use std::collections::BTreeSet;

use crate::error::AcceptError;

/// Length of an intro id.
pub const INTRO_ID_LEN: usize = 16;

/// Names one intro datagram: the first 16 bytes of its SHA-256.
pub type IntroId = [u8; INTRO_ID_LEN];

/// The default window around the responder's clock in which an intro's
/// timestamp must fall: generous for unsynchronised peers.
pub const DEFAULT_TIMESTAMP_WINDOW: Duration = Duration::from_secs(30);

/// The default intro rate the guard is sized for: about what one core can
/// decrypt with RSA-2048 each second.
pub const DEFAULT_INTRO_RATE: u32 = 1_000;

/// Remembers accepted intros until their timestamps leave the window.
#[derive(Debug)]
pub struct ReplayGuard {
    window_ms: u64,
    capacity: NonZeroUsize,
    /// Remembered intros, oldest timestamp (ms since the UNIX epoch) first.
    seen: BTreeSet<(u64, IntroId)>,
}

impl ReplayGuard {
    /// A guard accepting timestamps within `window` of now in either
    /// direction and remembering at most `capacity` intros.
    ///
    /// The capacity is not zero: a guard that remembers nothing would
    /// accept every replay.
    ///
    /// ```compile_fail
    /// # use core::time::Duration;
    /// let guard = tern_wire::ReplayGuard::new(Duration::from_secs(30), 0); // error: not a NonZeroUsize
    /// ```
    #[must_use]
    pub fn new(window: Duration, capacity: NonZeroUsize) -> Self {
        Self {
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            capacity,
            seen: BTreeSet::new(),
        }
    }

    /// A guard sized for an endpoint that accepts at most
    /// `intros_per_second`: capacity `2 × window × rate` (see the module
    /// docs), and at least one intro however small the rate or the window.
    #[must_use]
    pub fn for_intro_rate(intros_per_second: u32, window: Duration) -> Self {
        let per_window = window
            .as_millis()
            .saturating_mul(u128::from(intros_per_second))
            / 1_000;
        let capacity = usize::try_from(per_window.saturating_mul(2)).unwrap_or(usize::MAX);
        Self::new(
            window,
            NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
        )
    }

    /// The most intros remembered at once.
    #[must_use]
    pub const fn capacity(&self) -> usize {
        self.capacity.get()
    }

    /// Number of intros remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no intro is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Refuses `timestamp_ms` if it is outside the window around `now_ms`.
    pub(crate) fn check_window(&self, timestamp_ms: u64, now_ms: u64) -> Result<(), AcceptError> {
        let skew_ms = timestamp_ms.abs_diff(now_ms);
        if skew_ms > self.window_ms {
            return Err(AcceptError::StaleTimestamp { skew_ms });
        }
        Ok(())
    }

    /// Accepts `id` with `timestamp_ms` at `now_ms` once; refuses it if the
    /// timestamp is outside the window or the intro is remembered.
    pub(crate) fn admit(
        &mut self,
        id: IntroId,
        timestamp_ms: u64,
        now_ms: u64,
    ) -> Result<(), AcceptError> {
        self.check_window(timestamp_ms, now_ms)?;
        let entry = (timestamp_ms, id);
        if self.seen.contains(&entry) {
            return Err(AcceptError::Replayed { intro_id: id });
        }
        // A replay at `now` of an intro with timestamp `t` fails the window
        // check once now > t + window, so it can be forgotten.
        while let Some(&(oldest, _)) = self.seen.first()
            && oldest.saturating_add(self.window_ms) < now_ms
        {
            self.seen.pop_first();
        }
        while self.seen.len() >= self.capacity.get() {
            self.seen.pop_first();
        }
        self.seen.insert(entry);
        Ok(())
    }
}

impl Default for ReplayGuard {
    fn default() -> Self {
        Self::for_intro_rate(DEFAULT_INTRO_RATE, DEFAULT_TIMESTAMP_WINDOW)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn capacity(intros: usize) -> NonZeroUsize {
        NonZeroUsize::new(intros).expect("not zero")
    }

    /// `count` distinct intro ids from an attacker.
    fn flood_ids(count: u32) -> impl Iterator<Item = IntroId> {
        (0..count).map(|i| {
            let mut id = [0xaa; 16];
            id[..4].copy_from_slice(&i.to_be_bytes());
            id
        })
    }

    #[test]
    fn the_default_guard_holds_two_windows_of_the_default_rate() {
        let guard = ReplayGuard::default();
        assert_eq!(guard.capacity(), 60_000);
        let guard = ReplayGuard::for_intro_rate(50, Duration::from_secs(10));
        assert_eq!(guard.capacity(), 1_000);
    }

    #[test]
    fn a_guard_sized_for_no_intros_still_refuses_a_replay() {
        let now = 1_000_000;
        for (rate, window) in [
            (0, Duration::from_secs(30)),
            (1_000, Duration::ZERO),
            (1, Duration::from_millis(100)),
        ] {
            let mut guard = ReplayGuard::for_intro_rate(rate, window);
            assert_eq!(guard.capacity(), 1, "{rate}/s over {window:?}");
            guard.admit([1; 16], now, now).unwrap();
            assert_eq!(
                guard.admit([1; 16], now, now),
                Err(AcceptError::Replayed { intro_id: [1; 16] })
            );
        }
    }

    #[test]
    fn a_replay_is_refused_within_the_window_and_stale_after_it() {
        let mut guard = ReplayGuard::new(Duration::from_secs(10), capacity(8));
        let now = 1_000_000;
        guard.admit([1; 16], now, now).unwrap();
        assert_eq!(
            guard.admit([1; 16], now, now + 5_000),
            Err(AcceptError::Replayed { intro_id: [1; 16] })
        );
        assert_eq!(
            guard.admit([1; 16], now, now + 10_001),
            Err(AcceptError::StaleTimestamp { skew_ms: 10_001 })
        );
        // Exactly at the edge of the window it is still judged by the guard.
        assert!(guard.admit([2; 16], now + 10_000, now).is_ok());
    }

    #[test]
    fn point_9_a_flood_at_the_far_edge_of_the_window_does_not_lock_out_honest_initiators() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), capacity(64));
        let now = 1_000_000;
        let edge = now + 30_000;
        // capacity + 1 intros stamped at the window's future edge, and more.
        let admitted = flood_ids(1_000)
            .filter(|id| guard.admit(*id, edge, now).is_ok())
            .count();
        assert_eq!(admitted, 1_000);
        assert_eq!(guard.len(), 64);
        // An honest initiator with the current time is still accepted, and so
        // are initiators whose clocks run behind.
        guard.admit([1; 16], now, now).unwrap();
        guard.admit([2; 16], now - 20_000, now).unwrap();
        assert_eq!(guard.len(), 64);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Bounded, never admits a remembered intro twice, refuses an
        /// intro replayed right after it was admitted, and never refuses a
        /// fresh in-window intro.
        #[test]
        fn the_replay_guard_stays_bounded_and_refuses_only_replays_and_stale_intros(
            intros_held in 1usize..8,
            intros in proptest::collection::vec((0u8..12, 0u64..40, 0u64..60), 1..80),
        ) {
            let mut guard = ReplayGuard::new(Duration::from_secs(10), capacity(intros_held));
            let mut admitted = HashSet::new();
            let mut now_s = 0;
            for (id, timestamp_s, advance_s) in intros {
                now_s += advance_s % 3;
                let intro = ([id; 16], timestamp_s * 1_000);
                let in_window = timestamp_s.abs_diff(now_s) <= 10;
                match guard.admit(intro.0, intro.1, now_s * 1_000) {
                    Ok(()) => {
                        prop_assert!(in_window);
                        admitted.insert(intro);
                        prop_assert_eq!(
                            guard.admit(intro.0, intro.1, now_s * 1_000),
                            Err(AcceptError::Replayed { intro_id: intro.0 })
                        );
                    }
                    Err(AcceptError::Replayed { .. }) => prop_assert!(admitted.contains(&intro)),
                    Err(AcceptError::StaleTimestamp { .. }) => prop_assert!(!in_window),
                    Err(other) => prop_assert!(false, "unexpected {other:?}"),
                }
                prop_assert!(guard.len() <= intros_held);
            }
        }
    }
}
