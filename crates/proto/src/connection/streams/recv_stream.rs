//! The receiving half of a stream: chunks arrive in any order, any number
//! of times, cut anywhere; the application reads one ordered byte stream.
//!
//! Bytes are copied once from the packet into a ring sized by the stream's
//! flow-control window and once out to the reader. A peer that sends past
//! the window it was given, past the stream's final size, or changes the
//! final size, is breaking the protocol: the answer is an error for the
//! connection, never a panic or an unbounded buffer.

use super::range_set::RangeSet;
use super::ring::Ring;

/// A peer broke the rules of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// Data beyond the flow-control offset the receiver advertised.
    #[error("stream data beyond the advertised limit ({limit} bytes)")]
    FlowControl {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// Data beyond the stream's final size, or a second, different final size.
    #[error("stream final size violated")]
    FinalSize,
}

/// The receiving half of one stream.
#[derive(Debug)]
pub struct RecvStream {
    ring: Ring,
    /// Offset of the next byte the application reads (the ring's front).
    read: u64,
    /// Ranges received at or above `read`.
    received: RangeSet,
    /// The highest offset received (for connection-level flow control).
    highest: u64,
    /// The stream's length, once a fin told it.
    final_size: Option<u64>,
    /// The flow-control offset advertised to the peer.
    limit: u64,
}

impl RecvStream {
    /// A stream whose peer may send up to `limit` bytes for now.
    pub fn new(limit: u64) -> Self {
        Self {
            ring: Ring::new(),
            read: 0,
            received: RangeSet::new(),
            highest: 0,
            final_size: None,
            limit,
        }
    }

    /// The flow-control offset advertised to the peer.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Raises the advertised offset (never lowers it).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = self.limit.max(limit);
    }

    /// Bytes the application has read.
    pub fn read_offset(&self) -> u64 {
        self.read
    }

    /// The highest offset received so far.
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Bytes held for the reader (received, not yet read), in order or not.
    pub fn buffered(&self) -> u64 {
        self.received.iter().map(|r| r.end - r.start).sum()
    }

    /// `data` at `offset` arrived, with `fin` if the stream ends after it.
    /// Returns by how much the highest received offset grew (what counts
    /// against the connection's flow-control window).
    pub fn insert(&mut self, offset: u64, data: &[u8], fin: bool) -> Result<u64, StreamError> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(StreamError::FlowControl { limit: self.limit })?;
        if end > self.limit {
            return Err(StreamError::FlowControl { limit: self.limit });
        }
        match self.final_size {
            Some(size) if end > size || (fin && end != size) => return Err(StreamError::FinalSize),
            None if fin && end < self.highest => return Err(StreamError::FinalSize),
            _ => {}
        }
        if fin {
            self.final_size = Some(end);
        }
        let grew = end.saturating_sub(self.highest);
        self.highest = self.highest.max(end);
        let start = offset.max(self.read);
        if start < end {
            let window = (self.limit - self.read) as usize;
            let live = self
                .received
                .last()
                .map_or(0, |r| (r.end - self.read) as usize);
            self.ring.reserve((end - self.read) as usize, window, live);
            for gap in self.received.gaps(start..end) {
                let from = (gap.start - offset) as usize;
                let to = (gap.end - offset) as usize;
                self.ring
                    .write_at((gap.start - self.read) as usize, &data[from..to]);
            }
            self.received.insert(start..end);
        }
        Ok(grew)
    }

    /// The peer reset the stream, which ends at `final_size`. Returns by
    /// how much the highest received offset grew, as [`Self::insert`].
    /// A final size that contradicts one already known, or data already
    /// received, is refused (RFC 9000 §4.5: FINAL_SIZE_ERROR).
    pub fn reset(&mut self, final_size: u64) -> Result<u64, StreamError> {
        if self.final_size.is_some_and(|size| size != final_size) || final_size < self.highest {
            return Err(StreamError::FinalSize);
        }
        if final_size > self.limit {
            return Err(StreamError::FlowControl { limit: self.limit });
        }
        self.final_size = Some(final_size);
        let grew = final_size - self.highest;
        self.highest = final_size;
        Ok(grew)
    }

    /// Bytes the application can read now, in order.
    pub fn readable(&self) -> u64 {
        self.received
            .first()
            .filter(|r| r.start == self.read)
            .map_or(0, |r| r.end - r.start)
    }

    /// Copies the next bytes, in order, into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = (self.readable() as usize).min(out.len());
        if n == 0 {
            return 0;
        }
        self.ring.read_at(0, &mut out[..n]);
        self.ring.advance(n);
        self.received.pop_front(n as u64);
        self.read += n as u64;
        if self.received.is_empty() {
            self.ring.restart();
        }
        n
    }

    /// Whether the application has read the whole stream.
    pub fn is_finished(&self) -> bool {
        self.final_size == Some(self.read)
    }

    /// The stream's length, once known.
    pub fn final_size(&self) -> Option<u64> {
        self.final_size
    }
}
