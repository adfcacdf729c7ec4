//! The recovery period and the undoing of reductions that proved spurious,
//! shared by every controller of this crate.
//!
//! RFC 9002 §7.3.2: a sender "enters a recovery period when it detects the
//! loss of a packet", and "the recovery period aims to limit congestion
//! window reduction to once per round trip": losses of packets sent before
//! the period began are part of the same congestion event, and "during the
//! recovery period, the congestion window does not change in response to new
//! losses"; nor does it grow for acknowledgements of packets sent before it
//! began (RFC 9002 Appendix B.5: no increase while "InCongestionRecovery").
//!
//! Undo: RFC 9002 §6.1 warns that declaring packets lost in error "may
//! result in degraded performance due to the actions of the congestion
//! controller upon detecting loss", and leaves the remedy open. Tern undoes
//! a reduction in the manner of TCP's undo (RFC 4015, Eifel response): when
//! every packet whose loss was counted in the congestion event that caused
//! it has been acknowledged after all, the event never happened, so the
//! window and slow-start threshold return to what they were and the
//! recovery period ends. One genuine loss in the event keeps the reduction.
//! An event is undone only while it is the latest one; a spurious loss of an
//! older event changes nothing.
//!
//! A new path: RFC 9000 §9.4, "Packets sent on the old path MUST NOT
//! contribute to congestion control or RTT estimation for the new path".
//! After [`Recovery::on_path_change`] the controller ignores every report
//! about a packet sent before the change ([`Recovery::sent_on_old_path`]).

use crate::{InvariantViolation, Lost};
use quanta::Instant;

/// Window and slow-start threshold as they were before a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Before {
    pub(crate) window: u64,
    pub(crate) ssthresh: u64,
}

/// Recovery-period state of one controller; `B` is what undoing a reduction
/// restores (window and threshold for most, more for CUBIC).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recovery<B = Before> {
    /// When the current recovery period began: the last window reduction.
    start: Option<Instant>,
    /// What the reduction replaced; `None` once undone, or when persistent
    /// congestion made the event one that must not be undone.
    before: Option<B>,
    /// In-flight packets declared lost in the current congestion event.
    lost: u64,
    /// How many of them were acknowledged after all.
    spurious: u64,
    /// Reductions undone over the controller's life.
    undone: u64,
    /// When the connection moved to the path it is on; `None` on its first.
    path_since: Option<Instant>,
}

impl<B: Copy> Recovery<B> {
    pub(crate) const fn new() -> Self {
        Self {
            start: None,
            before: None,
            lost: 0,
            spurious: 0,
            undone: 0,
            path_since: None,
        }
    }

    /// The connection moved to a new path at `now`: the old path's
    /// congestion event, and its undo, are over.
    pub(crate) fn on_path_change(&mut self, now: Instant) {
        *self = Self {
            undone: self.undone,
            path_since: Some(now),
            ..Self::new()
        };
    }

    /// Whether a packet sent at `sent_at` left before the connection moved
    /// to the path it is on: what its acknowledgement or loss says is about
    /// the old path, and must not change the new path's window.
    pub(crate) fn sent_on_old_path(&self, sent_at: Instant) -> bool {
        self.path_since.is_some_and(|since| sent_at < since)
    }

    /// Whether a packet sent at `sent_at` was sent before the current
    /// recovery period began (RFC 9002 Appendix B.5's InCongestionRecovery):
    /// its acknowledgement must not grow the window, its loss must not
    /// shrink it again.
    pub(crate) fn covers(&self, sent_at: Instant) -> bool {
        self.start.is_some_and(|start| sent_at <= start)
    }

    /// Accounts for a loss report. Returns `true` if it begins a new
    /// congestion event: the caller then reduces its window, which was
    /// `before`.
    pub(crate) fn on_loss(&mut self, now: Instant, lost: &Lost, before: B) -> bool {
        if self.covers(lost.largest_sent_at) {
            self.lost = self.lost.saturating_add(lost.packets);
            return false;
        }
        self.start = Some(now);
        self.before = Some(before);
        self.lost = lost.packets;
        self.spurious = 0;
        true
    }

    /// Accounts for a loss declared at `declared_lost_at` that proved
    /// spurious. Returns what to restore when that completes the undo of the
    /// current event; the recovery period then ends.
    pub(crate) fn on_spurious_loss(&mut self, declared_lost_at: Instant) -> Option<B> {
        let start = self.start?;
        // Losses of the current event are declared at or after its reduction.
        if declared_lost_at < start || self.before.is_none() {
            return None;
        }
        self.spurious = self.spurious.saturating_add(1);
        if self.spurious < self.lost {
            return None;
        }
        self.start = None;
        self.undone = self.undone.saturating_add(1);
        self.before.take()
    }

    /// Persistent congestion: RFC 9002 Appendix B.8 resets the recovery start
    /// ("congestion_recovery_start_time = 0") so the collapsed window grows
    /// again with the first acknowledgement; such a collapse is never undone.
    pub(crate) fn on_persistent_congestion(&mut self) {
        *self = Self {
            undone: self.undone,
            path_since: self.path_since,
            ..Self::new()
        };
    }

    /// Reductions undone so far.
    pub(crate) fn undone(&self) -> u64 {
        self.undone
    }

    pub(crate) fn invariants(&self) -> Result<(), InvariantViolation> {
        if self.before.is_some() && self.start.is_none() {
            return Err(InvariantViolation("undo state without a recovery period"));
        }
        if self.before.is_some() && self.spurious >= self.lost && self.lost > 0 {
            return Err(InvariantViolation("a fully spurious event was not undone"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const BEFORE: Before = Before {
        window: 100,
        ssthresh: u64::MAX,
    };

    fn lost(packets: u64, largest_sent_at: Instant) -> Lost {
        Lost {
            packets,
            bytes: packets * 10,
            largest_sent_at,
        }
    }

    #[test]
    fn a_loss_sent_before_the_period_is_part_of_the_same_event() {
        let (clock, mock) = quanta::Clock::mock();
        let sent = clock.now();
        mock.increment(Duration::from_millis(50));
        let mut recovery = Recovery::new();
        assert!(recovery.on_loss(clock.now(), &lost(1, sent), BEFORE));
        assert!(recovery.covers(sent));
        assert!(!recovery.on_loss(clock.now(), &lost(2, sent), BEFORE));
        mock.increment(Duration::from_millis(1));
        assert!(!recovery.covers(clock.now()));
        assert!(recovery.on_loss(clock.now(), &lost(1, clock.now()), BEFORE));
        recovery.invariants().unwrap();
    }

    #[test]
    fn an_event_is_undone_only_when_all_its_losses_were_spurious() {
        let (clock, mock) = quanta::Clock::mock();
        let sent = clock.now();
        mock.increment(Duration::from_millis(50));
        let declared = clock.now();
        let mut recovery = Recovery::new();
        assert!(recovery.on_loss(declared, &lost(2, sent), BEFORE));
        assert_eq!(recovery.on_spurious_loss(declared), None, "one of two");
        recovery.invariants().unwrap();
        assert_eq!(recovery.on_spurious_loss(declared), Some(BEFORE));
        assert!(!recovery.covers(sent), "the recovery period ended");
        assert_eq!(recovery.undone(), 1);
        assert_eq!(recovery.on_spurious_loss(declared), None, "undone once");
        recovery.invariants().unwrap();
    }

    #[test]
    fn a_spurious_loss_of_an_older_event_changes_nothing() {
        let (clock, mock) = quanta::Clock::mock();
        let old_declared = clock.now();
        mock.increment(Duration::from_millis(50));
        let mut recovery = Recovery::new();
        assert!(recovery.on_loss(clock.now(), &lost(1, clock.now()), BEFORE));
        assert_eq!(recovery.on_spurious_loss(old_declared), None);
        recovery.on_persistent_congestion();
        assert_eq!(recovery.on_spurious_loss(clock.now()), None, "never undone");
        recovery.invariants().unwrap();
    }

    #[test]
    fn after_a_path_change_only_packets_sent_since_count() {
        let (clock, mock) = quanta::Clock::mock();
        let old = clock.now();
        let mut recovery = Recovery::new();
        assert!(!recovery.sent_on_old_path(old), "no change yet");
        assert!(recovery.on_loss(clock.now(), &lost(1, old), BEFORE));
        mock.increment(Duration::from_millis(10));
        recovery.on_path_change(clock.now());
        assert!(recovery.sent_on_old_path(old));
        assert!(!recovery.sent_on_old_path(clock.now()));
        assert!(
            !recovery.covers(old),
            "the old path's recovery period is over"
        );
        assert_eq!(recovery.on_spurious_loss(clock.now()), None);
        recovery.on_persistent_congestion();
        assert!(
            recovery.sent_on_old_path(old),
            "kept through persistent congestion"
        );
        recovery.invariants().unwrap();
    }
}
