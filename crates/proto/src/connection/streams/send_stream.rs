//! The sending half of a stream: bytes the application wrote, kept until
//! the peer acknowledged them, sent as chunks of whatever size a packet has
//! room for. Lost bytes are sent again as byte ranges — possibly cut
//! differently, in new packets — never as the old packet.
//!
//! The application's bytes are copied once, into a ring of the stream's
//! buffer size; `write` takes what fits, which is how a slow peer slows
//! its writer without anything being dropped.
//!
//! On a long path (the connection says which: a smoothed RTT of 250 ms or
//! more), a retransmission of the bytes the peer's in-order delivery waits
//! for (those at the oldest unacknowledged offset) goes twice: the copy is the
//! stream's next chunk after any other lost bytes, before new data, in a
//! packet of its own that counts in flight like any other. If the
//! retransmission is lost too, the copy usually is not, and the peer does
//! not wait for a second loss to be found: a packet lost twice held its
//! delivery up at least 2 × 9/8 of a round trip plus half of one (0.8 s
//! at 300 ms). Only these bytes go twice: copies of every retransmission
//! cost more time and saved no more waits. A copy spaced by two chunks of
//! new data came too late where the window is a few packets: the new
//! data waited for ACKs, and the retransmission's second loss was found
//! before the copy left.

use super::range_set::RangeSet;
use super::ring::Ring;

/// A piece of the stream to put in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendChunk<'a> {
    /// Stream offset of the first byte.
    pub offset: u64,
    /// The bytes (possibly empty when it only carries the fin).
    pub data: &'a [u8],
    /// Whether the stream ends with these bytes.
    pub fin: bool,
}

/// Where the end of the stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fin {
    /// The application may still write.
    Open,
    /// The application finished; the fin is to be sent (again, if lost).
    Pending,
    /// The fin was sent and is not known lost.
    Sent,
    /// The peer acknowledged the fin.
    Acked,
}

/// The sending half of one stream.
#[derive(Debug)]
pub struct SendStream {
    ring: Ring,
    /// Bytes the ring may hold.
    capacity: usize,
    /// Offset of the oldest unacknowledged byte (the ring's front).
    base: u64,
    /// Offset after the last byte written.
    end: u64,
    /// Offset of the first byte never sent.
    unsent: u64,
    /// Acknowledged ranges above `base`.
    acked: RangeSet,
    /// Ranges to send again.
    lost: RangeSet,
    /// Retransmitted bytes that blocked the peer's delivery, whose copies
    /// have not gone yet.
    repeats: RangeSet,
    fin: Fin,
    /// Set once the stream was reset: its final size.
    reset_at: Option<u64>,
}

impl SendStream {
    /// A stream that buffers up to `capacity` unacknowledged bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            ring: Ring::new(),
            capacity: capacity.max(1),
            base: 0,
            end: 0,
            unsent: 0,
            acked: RangeSet::new(),
            lost: RangeSet::new(),
            repeats: RangeSet::new(),
            fin: Fin::Open,
            reset_at: None,
        }
    }

    /// Bytes `write` would take now.
    pub fn free_space(&self) -> usize {
        if !self.is_open() {
            return 0;
        }
        self.capacity
            .saturating_sub((self.end - self.base) as usize)
    }

    /// From now on the stream buffers up to `capacity` unacknowledged
    /// bytes; what it holds beyond a smaller one stays until acknowledged,
    /// and no write is taken until then.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
    }

    /// Copies as much of `data` as fits; returns how much.
    pub fn write(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free_space());
        if n == 0 {
            return 0;
        }
        let live = (self.end - self.base) as usize;
        self.ring.reserve(live + n, self.capacity, live);
        self.ring.write_at(live, &data[..n]);
        self.end += n as u64;
        n
    }

    /// No more writes: the stream ends after what was written.
    pub fn finish(&mut self) {
        if self.fin == Fin::Open && self.reset_at.is_none() {
            self.fin = Fin::Pending;
        }
    }

    /// Abandons the stream: nothing more is sent and its bytes are let go
    /// at once; returns its final size (the bytes sent so far), for the
    /// reset frame. Idempotent.
    pub fn reset(&mut self) -> u64 {
        if let Some(at) = self.reset_at {
            return at;
        }
        self.ring = Ring::new();
        self.base = self.end;
        self.acked = RangeSet::new();
        self.lost = RangeSet::new();
        self.repeats = RangeSet::new();
        *self.reset_at.insert(self.unsent)
    }

    /// The final size if the stream was reset.
    pub fn reset_at(&self) -> Option<u64> {
        self.reset_at
    }

    /// Bytes written so far (the stream's length if it is finished).
    pub fn written(&self) -> u64 {
        self.end
    }

    /// Offset after the last byte ever sent: what a new chunk starts from.
    pub fn sent_offset(&self) -> u64 {
        self.unsent
    }

    /// Bytes written and never sent yet.
    pub fn unsent(&self) -> usize {
        (self.end - self.unsent) as usize
    }

    /// Bytes held until the peer acknowledges them.
    pub fn buffered(&self) -> usize {
        (self.end - self.base) as usize
    }

    /// Whether there is anything to send now (new bytes under `limit`, the
    /// flow-control offset the peer allows, lost bytes, or the fin).
    pub fn wants_to_send(&self, limit: u64) -> bool {
        self.reset_at.is_none()
            && (!self.lost.is_empty()
                || !self.repeats.is_empty()
                || self.unsent < self.end.min(limit)
                || (self.fin == Fin::Pending && self.unsent == self.end))
    }

    /// Whether new bytes wait for the peer's flow-control limit.
    pub fn blocked_at(&self, limit: u64) -> bool {
        self.reset_at.is_none()
            && self.lost.is_empty()
            && self.unsent < self.end
            && self.unsent >= limit
    }

    /// Whether the application may still write (it neither finished nor
    /// reset the stream).
    pub fn is_open(&self) -> bool {
        self.fin == Fin::Open && self.reset_at.is_none()
    }

    /// Whether the peer acknowledged every byte and the fin (a reset
    /// stream is done once its reset is acknowledged instead).
    pub fn is_done(&self) -> bool {
        self.reset_at.is_none() && self.fin == Fin::Acked && self.base == self.end
    }

    /// The next chunk of at most `max` bytes: lost bytes first, then
    /// copies of retransmitted bytes that blocked the peer's delivery, then
    /// new bytes below `limit` (the peer's flow-control offset for the
    /// stream). The chunk counts as sent. With `copy_blocking` (a long
    /// path), a retransmission of the bytes at the oldest unacknowledged
    /// offset is queued to go once more.
    pub fn poll_chunk(
        &mut self,
        max: usize,
        limit: u64,
        copy_blocking: bool,
    ) -> Option<SendChunk<'_>> {
        if self.reset_at.is_some() {
            return None;
        }
        let resend = self.lost.pop_front(max as u64);
        let repeat = if resend.is_none() {
            self.repeats.pop_front(max as u64)
        } else {
            None
        };
        let (offset, len) = if let Some(range) = resend.as_ref().or(repeat.as_ref()) {
            (range.start, (range.end - range.start) as usize)
        } else {
            let room = self.end.min(limit).saturating_sub(self.unsent);
            let len = room.min(max as u64) as usize;
            let fin_only = len == 0 && self.fin == Fin::Pending && self.unsent == self.end;
            if len == 0 && !fin_only {
                return None;
            }
            (self.unsent, len)
        };
        // The ring holds `base..end` and wraps: send what is contiguous.
        let data = self.ring.contiguous((offset - self.base) as usize, len);
        let sent_end = offset + data.len() as u64;
        if resend.is_some() {
            if data.len() < len {
                self.lost.insert(sent_end..offset + len as u64);
            }
            if copy_blocking && offset == self.base && sent_end > offset {
                self.repeats.insert(offset..sent_end);
            }
        }
        self.unsent = self.unsent.max(sent_end);
        // Every chunk that reaches the end carries the fin until it is
        // acknowledged: a repeated fin is harmless, a missing one is not.
        let fin = sent_end == self.end && matches!(self.fin, Fin::Pending | Fin::Sent);
        if fin {
            self.fin = Fin::Sent;
        }
        Some(SendChunk { offset, data, fin })
    }

    /// The peer acknowledged `offset..offset + len` (and the fin with it).
    pub fn on_acked(&mut self, offset: u64, len: u64, fin: bool) {
        let end = offset.saturating_add(len).min(self.end);
        let start = offset.max(self.base);
        if start < end {
            if start == self.base && self.acked.first().is_none_or(|f| f.start > end) {
                // In order (the usual case): the front moves on at once,
                // without a detour through `acked`.
                self.ring.advance((end - self.base) as usize);
                self.base = end;
            } else {
                self.acked.insert(start..end);
            }
            self.lost.remove(start..end);
            self.repeats.remove(start..end);
        }
        if let Some(first) = self.acked.first()
            && first.start == self.base
        {
            self.acked.pop_front(u64::MAX);
            self.ring.advance((first.end - self.base) as usize);
            self.base = first.end;
        }
        if self.base == self.end {
            self.ring.restart();
        }
        if fin && self.fin != Fin::Open {
            self.fin = Fin::Acked;
        }
    }

    /// The packet carrying `offset..offset + len` (and the fin with it) was
    /// lost: what the peer has not acknowledged is sent again.
    pub fn on_lost(&mut self, offset: u64, len: u64, fin: bool) {
        if self.reset_at.is_some() {
            return;
        }
        let end = offset.saturating_add(len).min(self.end);
        let start = offset.max(self.base);
        if start < end {
            for gap in self.acked.gaps(start..end) {
                self.lost.insert(gap);
            }
        }
        if fin && self.fin == Fin::Sent {
            self.fin = Fin::Pending;
        }
    }
}
