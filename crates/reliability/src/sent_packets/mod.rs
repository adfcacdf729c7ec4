//! The packets this side has sent and not yet seen resolved.
//!
//! # Why a `VecDeque` indexed by packet-number offset
//!
//! Packet numbers are assigned in strictly increasing order, so the packets
//! in flight form a window `[base, largest_sent]`. A ring buffer indexed by
//! `pn - base` gives O(1) lookup, appends at the back in O(1), and releases
//! resolved packets from the front in O(1). Once it has grown to the size of
//! the congestion window it never allocates again, which a `BTreeMap` cannot
//! promise (it allocates and frees nodes as keys stream through it), and it is
//! contiguous in memory.
//!
//! The weak point of a plain ring is an ACK that repeats ranges already
//! processed (receivers repeat old ranges until they learn they arrived):
//! walking them slot by slot would cost O(n) per ACK. Every resolved slot
//! therefore holds a forward pointer to a slot at or before the next
//! unresolved one, and lookups compress those pointers as they go (the
//! "find" half of union–find). Walking an ACK range costs O(k) for the k
//! packets it newly resolves plus an amortised O(log n) for the jumps, so
//! processing an ACK of r ranges that newly acknowledges k of n packets is
//! O(r + k + log n) amortised, whatever numbers the ACK repeats (r is bounded
//! by the wire decoder and is 1 or 2 in steady state).
//!
//! Memory is bounded by the span between the oldest unresolved packet and the
//! newest one: packets declared lost are remembered (without their payload)
//! only for a horizon chosen by [`crate::LossDetector`], so that a late ACK can
//! be recognised as a spurious loss.

use std::collections::VecDeque;
use std::ops::RangeInclusive;

use quanta::Instant;

use crate::error::SendError;

/// The largest packet number a sender may use: 2^62 − 1, the largest
/// variable-length integer on the wire. Keeping far from `u64::MAX` keeps
/// every `pn + 1` in this crate exact.
pub const MAX_PACKET_NUMBER: u64 = (1 << 62) - 1;

/// How many packet numbers a sender may skip at once (see [`SendError::GapTooLarge`]).
pub const MAX_PACKET_NUMBER_GAP: u64 = 1024;

/// A packet in flight, as recorded when it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentPacket<T> {
    /// When it was handed to the socket.
    pub time_sent: Instant,
    /// Its size on the wire in bytes (UDP payload).
    pub size: u32,
    /// Whether it carries a frame the peer must acknowledge (anything but ACK and padding).
    pub ack_eliciting: bool,
    /// Whether it counts toward bytes in flight (RFC 9002: ack-eliciting or padding).
    pub in_flight: bool,
    /// What the caller needs to re-send its content as new frames if it is lost
    /// (typically which frames, stream ranges and messages it carried).
    pub payload: T,
}

/// A packet that was declared lost and then acknowledged after all.
///
/// RFC 9002 §6.1: "Spuriously declaring packets as lost leads to unnecessary
/// retransmissions and may result in degraded performance due to the actions
/// of the congestion controller upon detecting loss." Congestion control can
/// use this report to undo its reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpuriousLoss {
    /// The packet's number.
    pub packet_number: u64,
    /// When it was sent.
    pub time_sent: Instant,
    /// When it was declared lost.
    pub declared_lost_at: Instant,
    /// Its size in bytes.
    pub size: u32,
    /// Whether it had counted toward bytes in flight.
    pub in_flight: bool,
}

/// The run of consecutive losses persistent congestion is judged on.
///
/// RFC 9002 §7.6.2: persistent congestion needs two ack-eliciting packets
/// declared lost such that "all packets, across all packet number spaces,
/// sent between the send times of these two packets are declared lost", and
/// "a prior RTT sample existed when these two packets were sent". Losses are
/// declared in packet-number order, so the packets between two losses are
/// all lost exactly when the numbers between them are lost or were never
/// sent (skipped). The run grows as losses are declared, across ACKs and
/// timer expiries, and is broken by a packet in it or after it that was
/// delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LossRun {
    /// Its first and last lost packet numbers.
    first: u64,
    last: u64,
    /// Send times of its oldest and newest ack-eliciting packets sent after
    /// the first RTT sample; `None` while it has none.
    eligible: Option<(Instant, Instant)>,
}

/// What is remembered of a lost packet once its payload has been handed back.
#[derive(Debug, Clone, Copy)]
struct LostRecord {
    time_sent: Instant,
    declared_lost_at: Instant,
    size: u32,
    in_flight: bool,
}

/// One tracked packet number.
#[derive(Debug)]
enum Slot<T> {
    /// Sent, neither acknowledged nor declared lost.
    Unacked(SentPacket<T>),
    /// Declared lost; kept to recognise a late acknowledgement.
    Lost(LostRecord),
    /// Acknowledged, forgotten or never sent. `next` points forward: every
    /// slot in `(this, next)` is `Resolved` too.
    Resolved { next: u64 },
}

/// What an ACK range resolved, handed to the visitor of [`SentPackets::ack_range`].
#[derive(Debug)]
pub enum Resolved<T> {
    /// A packet acknowledged for the first time.
    Acked(SentPacket<T>),
    /// A packet that had been declared lost.
    Spurious(SpuriousLoss),
}

/// The sender's record of packets sent and not yet resolved, keyed by packet number.
///
/// See the module documentation for the data structure and its costs.
#[derive(Debug)]
pub struct SentPackets<T> {
    /// `slots[i]` describes packet number `base + i`.
    slots: VecDeque<Slot<T>>,
    /// Packet number of `slots[0]` (or of the next slot to be pushed when empty).
    base: u64,
    /// Largest packet number ever pushed.
    largest_sent: Option<u64>,
    /// Every slot below this packet number is not `Unacked`; loss detection starts here.
    loss_cursor: u64,
    /// Packet numbers deliberately skipped and still inside the tracked span, ascending.
    skipped: VecDeque<u64>,
    /// Number of `Unacked` slots.
    unacked: usize,
    /// Number of `Unacked` slots that are ack-eliciting.
    ack_eliciting_unacked: usize,
    /// Sum of the sizes of `Unacked` slots that count toward bytes in flight.
    bytes_in_flight: u64,
    /// `time_sent` of the newest packet, used to keep send times monotonic.
    last_time_sent: Option<Instant>,
    /// `time_sent` of the newest ack-eliciting packet (RFC 9002's
    /// `time_of_last_ack_eliciting_packet`); `None` while none is unacked.
    last_ack_eliciting_sent: Option<Instant>,
    /// The current run of consecutive losses, for persistent congestion.
    loss_run: Option<LossRun>,
    /// The most packet numbers `slots` may span (see [`SentPackets::set_max_tracked`]).
    max_tracked: u64,
}

impl<T> Default for SentPackets<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> SentPackets<T> {
    /// An empty tracker.
    #[must_use]
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty tracker with room for `capacity` packets before it allocates.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: VecDeque::with_capacity(capacity),
            base: 0,
            largest_sent: None,
            loss_cursor: 0,
            skipped: VecDeque::new(),
            unacked: 0,
            ack_eliciting_unacked: 0,
            bytes_in_flight: 0,
            last_time_sent: None,
            last_ack_eliciting_sent: None,
            loss_run: None,
            max_tracked: u64::MAX,
        }
    }

    /// Bounds the packet numbers the tracker may span, from the oldest
    /// unresolved to the newest: a push beyond it is refused with
    /// [`SendError::TooManyTracked`]. The span is this tracker's memory,
    /// and only the peer's acknowledgements shrink it; a peer that
    /// acknowledges nothing while it makes this side send (ACKs answering
    /// its packets) would otherwise grow it without end. Unbounded until
    /// set.
    pub fn set_max_tracked(&mut self, limit: u64) {
        self.max_tracked = limit;
    }

    /// Records a sent packet.
    ///
    /// Send times are made monotonic: a `time_sent` earlier than the previous
    /// packet's is raised to it, so a clock that steps back cannot break the
    /// ordering loss detection relies on.
    ///
    /// # Errors
    /// [`SendError`] if `packet_number` is not above every number sent so far,
    /// skips more than [`MAX_PACKET_NUMBER_GAP`] numbers, exceeds
    /// [`MAX_PACKET_NUMBER`] or would make the span exceed the limit set by
    /// [`set_max_tracked`](Self::set_max_tracked) once the ACKs alone at
    /// its front are released. Nothing else changes then.
    pub fn push(&mut self, packet_number: u64, mut packet: SentPacket<T>) -> Result<(), SendError> {
        let first_new = self.first_new(packet_number)?;
        let added = packet_number - first_new + 1;
        if self.slots.len() as u64 + added > self.max_tracked {
            self.release_acks_alone_at_front();
        }
        let tracked = self.slots.len() as u64 + added;
        if tracked > self.max_tracked {
            return Err(SendError::TooManyTracked {
                tracked,
                limit: self.max_tracked,
            });
        }
        if self.largest_sent.is_none() {
            self.base = packet_number;
            self.loss_cursor = packet_number;
        }
        for skipped in first_new..packet_number {
            self.skipped.push_back(skipped);
            self.slots.push_back(Slot::Resolved { next: skipped + 1 });
        }
        if let Some(last) = self.last_time_sent {
            packet.time_sent = packet.time_sent.max(last);
        }
        self.last_time_sent = Some(packet.time_sent);
        self.unacked += 1;
        if packet.ack_eliciting {
            self.ack_eliciting_unacked += 1;
            self.last_ack_eliciting_sent = Some(packet.time_sent);
        }
        if packet.in_flight {
            self.bytes_in_flight += u64::from(packet.size);
        }
        self.slots.push_back(Slot::Unacked(packet));
        self.largest_sent = Some(packet_number);
        Ok(())
    }

    /// Records a packet that needs no record: sent while nothing is
    /// tracked, neither ack-eliciting nor in flight (an ACK alone from a
    /// quiet connection). Its number counts as sent, so an ACK of it is
    /// valid, and as released at once, as the ring's front is once
    /// resolved: the ring stays empty and allocates nothing. What an
    /// acknowledgement of it would have told the caller is lost, which
    /// for an ACK alone is only that the peer saw it. Any other packet,
    /// or with anything tracked, is recorded as [`push`](Self::push)
    /// records it.
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn push_released(
        &mut self,
        packet_number: u64,
        packet: SentPacket<T>,
    ) -> Result<(), SendError> {
        if !self.slots.is_empty() || packet.ack_eliciting || packet.in_flight {
            return self.push(packet_number, packet);
        }
        self.first_new(packet_number)?;
        // Numbers skipped before it are released with it, as `release`
        // forgets the skipped numbers below the ring's front.
        self.skipped.clear();
        self.base = packet_number + 1;
        self.loss_cursor = self.base;
        self.largest_sent = Some(packet_number);
        let time_sent = self
            .last_time_sent
            .map_or(packet.time_sent, |last| packet.time_sent.max(last));
        self.last_time_sent = Some(time_sent);
        Ok(())
    }

    /// The first number `packet_number` adds to the span: the one after
    /// the largest sent (those in between are skipped), or itself for the
    /// first packet.
    fn first_new(&self, packet_number: u64) -> Result<u64, SendError> {
        if packet_number > MAX_PACKET_NUMBER {
            return Err(SendError::OutOfRange(packet_number));
        }
        match self.largest_sent {
            None => Ok(packet_number),
            Some(largest_sent) if packet_number <= largest_sent => Err(SendError::NotIncreasing {
                packet_number,
                largest_sent,
            }),
            Some(largest_sent) => {
                let skipped = packet_number - largest_sent - 1;
                if skipped > MAX_PACKET_NUMBER_GAP {
                    return Err(SendError::GapTooLarge {
                        packet_number,
                        skipped,
                        limit: MAX_PACKET_NUMBER_GAP,
                    });
                }
                Ok(largest_sent + 1)
            }
        }
    }

    /// Resolves every tracked packet in `range` that is unacked or was declared
    /// lost, handing each to `visit` in ascending order. Numbers already
    /// resolved or released are skipped in amortised O(log n).
    ///
    /// Call [`SentPackets::validate_ack`] first: numbers never sent are not
    /// detected here.
    pub fn ack_range(
        &mut self,
        range: RangeInclusive<u64>,
        mut visit: impl FnMut(u64, Resolved<T>),
    ) {
        let end = *range.end();
        if self.resolved_through(*range.start(), end) {
            return;
        }
        let mut pn = self.next_pending(*range.start());
        while pn <= end && pn < self.end() {
            let index = self.index(pn);
            let slot = std::mem::replace(&mut self.slots[index], Slot::Resolved { next: pn + 1 });
            match slot {
                Slot::Unacked(packet) => {
                    self.forget_unacked(&packet);
                    visit(pn, Resolved::Acked(packet));
                }
                Slot::Lost(record) => {
                    // A packet of the current loss run was delivered: the
                    // path was not completely lost over that span.
                    if self
                        .loss_run
                        .is_some_and(|run| (run.first..=run.last).contains(&pn))
                    {
                        self.loss_run = None;
                    }
                    visit(
                        pn,
                        Resolved::Spurious(SpuriousLoss {
                            packet_number: pn,
                            time_sent: record.time_sent,
                            declared_lost_at: record.declared_lost_at,
                            size: record.size,
                            in_flight: record.in_flight,
                        }),
                    );
                }
                Slot::Resolved { .. } => unreachable!("next_pending stops only at pending slots"),
            }
            pn = self.next_pending(pn + 1);
        }
    }

    /// Declares lost, oldest first, every unacked packet numbered at most
    /// `largest_acked` that was sent at or before `lost_send_time` or
    /// `packet_threshold` or more numbers below `largest_acked`, handing each
    /// to `visit` with `now` as its declaration time.
    ///
    /// Returns the send time of the oldest unacked packet below `largest_acked`
    /// that is not lost yet: the loss timer runs from it. Because send times and
    /// packet numbers grow together, the lost packets are a prefix of the
    /// unacked ones and the scan stops at the first survivor.
    ///
    /// Each loss extends the run of consecutive losses that persistent
    /// congestion is judged on ([`SentPackets::loss_run_span`]); only
    /// ack-eliciting packets sent after `first_rtt_sample` can bound its span.
    pub fn detect_lost(
        &mut self,
        largest_acked: u64,
        lost_send_time: Option<Instant>,
        packet_threshold: u64,
        now: Instant,
        first_rtt_sample: Option<Instant>,
        mut visit: impl FnMut(u64, SentPacket<T>),
    ) -> Option<Instant> {
        loop {
            let pn = self.next_pending(self.loss_cursor);
            self.loss_cursor = pn;
            if pn > largest_acked || pn >= self.end() {
                return None;
            }
            let index = self.index(pn);
            let Slot::Unacked(packet) = &self.slots[index] else {
                // A lost record: already reported.
                self.loss_cursor = pn + 1;
                continue;
            };
            let by_time = lost_send_time.is_some_and(|t| packet.time_sent <= t);
            let by_count = largest_acked - pn >= packet_threshold;
            if !by_time && !by_count {
                return Some(packet.time_sent);
            }
            let record = LostRecord {
                time_sent: packet.time_sent,
                declared_lost_at: now,
                size: packet.size,
                in_flight: packet.in_flight,
            };
            let Slot::Unacked(packet) =
                std::mem::replace(&mut self.slots[index], Slot::Lost(record))
            else {
                unreachable!("matched as unacked above");
            };
            self.forget_unacked(&packet);
            self.loss_cursor = pn + 1;
            let eligible = packet.ack_eliciting
                && first_rtt_sample.is_some_and(|sample| packet.time_sent > sample);
            self.extend_loss_run(pn, eligible.then_some(packet.time_sent));
            visit(pn, packet);
        }
    }

    /// The time between the send times of the oldest and the newest
    /// ack-eliciting packets of the current run of consecutive losses (see
    /// [`SentPackets::detect_lost`]); `None` while the run has no such packet.
    /// Persistent congestion is established when it reaches the persistent
    /// congestion duration (RFC 9002 §7.6.1).
    #[must_use]
    pub fn loss_run_span(&self) -> Option<std::time::Duration> {
        let (oldest, newest) = self.loss_run?.eligible?;
        Some(newest.saturating_duration_since(oldest))
    }

    /// Forgets the current run of losses (once persistent congestion was
    /// declared for it, so it is declared once).
    pub fn end_loss_run(&mut self) {
        self.loss_run = None;
    }

    /// Adds lost packet `pn` (with its send time if it may bound a
    /// persistent-congestion span) to the current run, or starts a new run if
    /// a packet sent between the run's last loss and `pn` was delivered.
    fn extend_loss_run(&mut self, pn: u64, eligible_sent: Option<Instant>) {
        let run = match self.loss_run {
            Some(run) if self.only_skipped_between(run.last, pn) => run,
            _ => LossRun {
                first: pn,
                last: pn,
                eligible: None,
            },
        };
        let eligible = match (run.eligible, eligible_sent) {
            (Some((oldest, _)), Some(sent)) => Some((oldest, sent)),
            (None, Some(sent)) => Some((sent, sent)),
            (eligible, None) => eligible,
        };
        self.loss_run = Some(LossRun {
            last: pn,
            eligible,
            ..run
        });
    }

    /// Whether every number strictly between `low` and `high` was skipped
    /// (never sent). Numbers already released below `base` cannot be told
    /// apart, so a gap reaching below it counts as delivered.
    fn only_skipped_between(&self, low: u64, high: u64) -> bool {
        if high <= low {
            return false;
        }
        let between = high - low - 1;
        if between == 0 {
            return true;
        }
        if low < self.base {
            return false;
        }
        let from = self.skipped.partition_point(|&s| s <= low);
        let to = self.skipped.partition_point(|&s| s < high);
        (to - from) as u64 == between
    }

    /// Releases resolved slots from the front, and lost records declared at or
    /// before `forget_lost_before` (`None`: keep them).
    pub fn release(&mut self, forget_lost_before: Option<Instant>) {
        while let Some(front) = self.slots.front() {
            let releasable = match front {
                Slot::Resolved { .. } => true,
                Slot::Lost(record) => {
                    forget_lost_before.is_some_and(|t| record.declared_lost_at <= t)
                }
                Slot::Unacked(_) => false,
            };
            if !releasable {
                break;
            }
            self.slots.pop_front();
            self.base += 1;
        }
        self.loss_cursor = self.loss_cursor.max(self.base);
        while self.skipped.front().is_some_and(|&s| s < self.base) {
            self.skipped.pop_front();
        }
    }

    /// Releases the ring's front while it is resolved, an ACK alone
    /// (neither ack-eliciting nor in flight) or a lost record: what the
    /// acknowledgement of an ACK alone tells the caller (which ranges the
    /// peer has seen) a later one tells too, and the peer has no reason to
    /// acknowledge it soon; a lost record forgotten early only lets a late
    /// acknowledgement go unrecognised as a spurious loss. For a span at its limit: a receiver whose peer sends much and
    /// asks for acknowledgement seldom answers with runs of them.
    fn release_acks_alone_at_front(&mut self) {
        while let Some(front) = self.slots.front() {
            match front {
                Slot::Resolved { .. } => {}
                Slot::Unacked(packet) if !packet.ack_eliciting && !packet.in_flight => {
                    self.unacked -= 1;
                }
                Slot::Lost(_) => {}
                Slot::Unacked(_) => break,
            }
            self.slots.pop_front();
            self.base += 1;
        }
        self.loss_cursor = self.loss_cursor.max(self.base);
        while self.skipped.front().is_some_and(|&s| s < self.base) {
            self.skipped.pop_front();
        }
    }

    /// Forgets the packets still tracked when none of them is
    /// ack-eliciting, in flight or lost (ACKs alone, which the peer has no
    /// reason to acknowledge): they stay numbered as sent and are released
    /// as resolved ones are, as [`push_released`](Self::push_released)
    /// would have numbered them. Returns whether the ring now tracks
    /// nothing. O(n) in the tracked span when it forgets.
    pub fn forget_acks_alone(&mut self) -> bool {
        if self.ack_eliciting_unacked > 0
            || self.bytes_in_flight > 0
            || self.slots.iter().any(|slot| matches!(slot, Slot::Lost(_)))
        {
            return self.slots.is_empty();
        }
        self.base = self.end();
        self.slots.clear();
        self.skipped.clear();
        self.loss_cursor = self.base;
        self.unacked = 0;
        self.last_ack_eliciting_sent = None;
        true
    }

    /// Gives the ring's memory back when it tracks nothing (every packet
    /// resolved and released): for a sender gone quiet. The next packet
    /// pushed allocates it again, so a caller does this at most now and
    /// then, not each time the ring empties.
    pub fn shrink_when_empty(&mut self) {
        if self.slots.is_empty() {
            self.slots = VecDeque::new();
        }
        if self.skipped.is_empty() {
            self.skipped = VecDeque::new();
        }
    }

    /// One past the largest tracked packet number.
    fn end(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Slot index of a tracked packet number (caller checks `base <= pn < end`).
    fn index(&self, packet_number: u64) -> usize {
        // The span is bounded by memory, so it fits in usize.
        (packet_number - self.base) as usize
    }

    /// The smallest tracked packet number at or above `from` whose slot is
    /// unacked or lost, or `end()` if none; compresses the pointers it follows.
    fn next_pending(&mut self, from: u64) -> u64 {
        let end = self.end();
        let start = from.max(self.base);
        let mut root = start;
        while root < end {
            match self.slots[self.index(root)] {
                Slot::Resolved { next } => root = next,
                _ => break,
            }
        }
        let mut pn = start;
        while pn < root {
            let index = self.index(pn);
            match &mut self.slots[index] {
                Slot::Resolved { next } => {
                    pn = *next;
                    *next = root;
                }
                _ => break,
            }
        }
        root.min(end)
    }

    /// Updates the counters for a packet leaving the unacked state.
    fn forget_unacked(&mut self, packet: &SentPacket<T>) {
        self.unacked -= 1;
        if packet.ack_eliciting {
            self.ack_eliciting_unacked -= 1;
            if self.ack_eliciting_unacked == 0 {
                self.last_ack_eliciting_sent = None;
            }
        }
        if packet.in_flight {
            self.bytes_in_flight -= u64::from(packet.size);
        }
    }
}

mod ack_check;
mod inspect;
mod path_change;

pub(crate) use ack_check::PendingRanges;

#[cfg(test)]
mod tests;
