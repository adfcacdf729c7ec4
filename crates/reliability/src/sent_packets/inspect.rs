//! What the tracker tells about itself: look-ups, counts and the checks of
//! its invariants that the property tests run after every operation.

use quanta::Instant;

use super::{SentPacket, SentPackets, Slot};

impl<T> SentPackets<T> {
    /// The unacked packet with this number, if any.
    #[must_use]
    pub fn get(&self, packet_number: u64) -> Option<&SentPacket<T>> {
        let index = usize::try_from(packet_number.checked_sub(self.base)?).ok()?;
        match self.slots.get(index)? {
            Slot::Unacked(packet) => Some(packet),
            _ => None,
        }
    }

    /// Unacked packets, oldest first (e.g. to choose what a probe re-sends).
    pub fn unacked(&self) -> impl Iterator<Item = (u64, &SentPacket<T>)> {
        (self.base..)
            .zip(&self.slots)
            .filter_map(|(pn, slot)| match slot {
                Slot::Unacked(packet) => Some((pn, packet)),
                _ => None,
            })
    }

    /// The largest packet number sent so far.
    #[must_use]
    pub fn largest_sent(&self) -> Option<u64> {
        self.largest_sent
    }

    /// How many packets are neither acknowledged nor declared lost.
    #[must_use]
    pub fn unacked_count(&self) -> usize {
        self.unacked
    }

    /// How many of them are ack-eliciting.
    #[must_use]
    pub fn ack_eliciting_unacked(&self) -> usize {
        self.ack_eliciting_unacked
    }

    /// Bytes of unacked packets that count toward the congestion window.
    #[must_use]
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Send time of the newest ack-eliciting packet, while any is unacked.
    #[must_use]
    pub fn last_ack_eliciting_sent(&self) -> Option<Instant> {
        self.last_ack_eliciting_sent
    }

    /// How many packet numbers are tracked (unacked, lost records and resolved
    /// slots not yet released): the memory this tracker holds, in slots.
    #[must_use]
    pub fn tracked_span(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of memory the tracker holds: the room its ring of records
    /// and its list of skipped numbers have allocated (a record holds its
    /// payload inline, so this is all of it). Only the peer's
    /// acknowledgements shrink the span; the room stays at the most it
    /// reached until [`shrink_when_empty`](Self::shrink_when_empty).
    #[must_use]
    pub fn memory(&self) -> usize {
        self.slots.capacity() * size_of::<Slot<T>>() + self.skipped.capacity() * size_of::<u64>()
    }

    /// The most packet numbers the tracker may span (see
    /// [`set_max_tracked`](Self::set_max_tracked)).
    #[must_use]
    pub fn max_tracked(&self) -> u64 {
        self.max_tracked
    }

    /// Checks the tracker's internal consistency. O(n): for tests.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        let end = self.end();
        if let Some(largest) = self.largest_sent
            && end != largest + 1
        {
            return Err(format!(
                "tracked span ends at {end}, largest sent is {largest}"
            ));
        }
        let (mut unacked, mut eliciting, mut bytes) = (0, 0, 0);
        let mut seen_unacked = false;
        let mut last_time: Option<Instant> = None;
        for (pn, slot) in (self.base..).zip(&self.slots) {
            match slot {
                Slot::Unacked(packet) => {
                    if pn < self.loss_cursor {
                        return Err(format!(
                            "unacked packet {pn} below the loss cursor {}",
                            self.loss_cursor
                        ));
                    }
                    if last_time.is_some_and(|t| packet.time_sent < t) {
                        return Err(format!("packet {pn} was sent before an older packet"));
                    }
                    last_time = Some(packet.time_sent);
                    seen_unacked = true;
                    unacked += 1;
                    eliciting += usize::from(packet.ack_eliciting);
                    if packet.in_flight {
                        bytes += u64::from(packet.size);
                    }
                }
                Slot::Lost(_) if seen_unacked => {
                    return Err(format!(
                        "lost packet {pn} follows an unacked one: losses must be a prefix"
                    ));
                }
                Slot::Lost(_) => {}
                Slot::Resolved { next } => {
                    if *next <= pn || *next > end {
                        return Err(format!(
                            "resolved slot {pn} points to {next}, outside ({pn}, {end}]"
                        ));
                    }
                    for between in pn + 1..*next {
                        if !matches!(self.slots[self.index(between)], Slot::Resolved { .. }) {
                            return Err(format!("slot {pn} jumps over pending packet {between}"));
                        }
                    }
                }
            }
        }
        if (unacked, eliciting, bytes)
            != (
                self.unacked,
                self.ack_eliciting_unacked,
                self.bytes_in_flight,
            )
        {
            return Err(format!(
                "counters (unacked {}, eliciting {}, bytes {}) disagree with slots ({unacked}, {eliciting}, {bytes})",
                self.unacked, self.ack_eliciting_unacked, self.bytes_in_flight
            ));
        }
        if let Some(run) = self.loss_run
            && (run.first > run.last
                || run.last >= end
                || run.eligible.is_some_and(|(oldest, newest)| oldest > newest))
        {
            return Err(format!("loss run {run:?} is inconsistent"));
        }
        if self.skipped.iter().any(|&s| s < self.base || s >= end)
            || self
                .skipped
                .iter()
                .zip(self.skipped.iter().skip(1))
                .any(|(a, b)| a >= b)
        {
            return Err(format!(
                "skipped numbers {:?} not ascending inside [{}, {end})",
                self.skipped, self.base
            ));
        }
        Ok(())
    }
}
