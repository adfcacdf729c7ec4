//! The receiving half of a stream: chunks arrive in any order, any number
//! of times, cut anywhere; the application reads one ordered byte stream.
//!
//! Bytes are copied once from the packet into pages taken where they land
//! ([`Pages`]) and once out to the reader. A peer that sends past the
//! window it was given, past the stream's final size, or changes the final
//! size, is breaking the protocol: the answer is an error for the
//! connection, never a panic or an unbounded buffer.
//!
//! What a stream holds is bounded by its window: the pages that
//! `read..limit` spans, a page for each run of bytes at most, plus what
//! records the runs (at most [`MAX_RUNS_SLACK`] runs, or one per
//! [`MIN_RUN_BYTES`] bytes buffered; past that the peer is cutting its data
//! into slivers no honest sender sends, and the connection fails).

use super::pages::{PagePool, Pages};
use super::range_set::RangeSet;

/// Separate runs of bytes a stream holds whatever their size: holes of
/// whole packets, from loss and reordering, never come near it.
pub(crate) const MAX_RUNS_SLACK: usize = 256;

/// Past [`MAX_RUNS_SLACK`], the bytes buffered per run at least. A run costs
/// about 32 bytes to record (a node's share of the ordered map), so runs
/// cost at most twice the bytes they hold.
pub(crate) const MIN_RUN_BYTES: u64 = 16;

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
    /// Data cut into more separate runs than the bytes buffered justify.
    #[error("stream data fragmented into {runs} runs for {bytes} bytes")]
    Fragmented {
        /// Runs held.
        runs: usize,
        /// Bytes held.
        bytes: u64,
    },
}

/// The receiving half of one stream.
#[derive(Debug)]
pub struct RecvStream {
    pages: Pages,
    /// Offset of the next byte the application reads.
    read: u64,
    /// Ranges received at or above `read`.
    received: RangeSet,
    /// Bytes in `received`.
    buffered: u64,
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
            pages: Pages::new(),
            read: 0,
            received: RangeSet::new(),
            buffered: 0,
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
        self.buffered
    }

    /// Bytes of pages this stream holds.
    pub fn memory(&self) -> usize {
        self.pages.memory()
    }

    /// Separate runs of bytes held.
    pub(crate) fn runs(&self) -> usize {
        self.received.len()
    }

    /// By how much `data.len()` bytes at `offset` (with `fin` if the stream
    /// ends after them) would grow the highest received offset: what counts
    /// against the connection's window. Data the stream may not take is
    /// refused, before anything is stored.
    pub fn growth(&self, offset: u64, len: usize, fin: bool) -> Result<u64, StreamError> {
        let end = offset
            .checked_add(len as u64)
            .ok_or(StreamError::FlowControl { limit: self.limit })?;
        if end > self.limit {
            return Err(StreamError::FlowControl { limit: self.limit });
        }
        match self.final_size {
            Some(size) if end > size || (fin && end != size) => Err(StreamError::FinalSize),
            None if fin && end < self.highest => Err(StreamError::FinalSize),
            _ => Ok(end.saturating_sub(self.highest)),
        }
    }

    /// `data` at `offset` arrived, with `fin` if the stream ends after it;
    /// pages come from `pool`. Returns by how much the highest received
    /// offset grew, as [`Self::growth`].
    pub fn insert(
        &mut self,
        pool: &mut PagePool,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<u64, StreamError> {
        let grew = self.growth(offset, data.len(), fin)?;
        self.store(pool, offset, data, fin)?;
        Ok(grew)
    }

    /// [`Self::insert`] of data [`Self::growth`] accepted (the caller
    /// checked it, and its windows, first): stored without a second check.
    pub(crate) fn store(
        &mut self,
        pool: &mut PagePool,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<(), StreamError> {
        let end = offset + data.len() as u64;
        if fin {
            self.final_size = Some(end);
        }
        self.highest = self.highest.max(end);
        let start = offset.max(self.read);
        if start >= end {
            return Ok(());
        }
        if self.received.end().is_none_or(|held| held <= start) {
            // Past everything held (bytes in order): all of it is new,
            // with no search for gaps.
            self.pages
                .write(pool, start, &data[(start - offset) as usize..]);
            self.buffered += end - start;
        } else {
            for gap in self.received.gaps(start..end) {
                let from = (gap.start - offset) as usize;
                let to = (gap.end - offset) as usize;
                self.pages.write(pool, gap.start, &data[from..to]);
                self.buffered += gap.end - gap.start;
            }
        }
        self.received.insert(start..end);
        let runs = self.received.len();
        if runs > MAX_RUNS_SLACK && runs as u64 > self.buffered / MIN_RUN_BYTES {
            return Err(StreamError::Fragmented {
                runs,
                bytes: self.buffered,
            });
        }
        Ok(())
    }

    /// Data ending at `end` (the stream's end if `fin`) arrived, which
    /// [`Self::growth`] accepted, for a stream nobody will read (its reader
    /// stopped it): the offsets move on as [`Self::store`]'s, and nothing is
    /// kept.
    pub(crate) fn skip(&mut self, end: u64, fin: bool) {
        if fin {
            self.final_size = Some(end);
        }
        self.highest = self.highest.max(end);
    }

    /// Forgets every byte held, giving its pages back to `pool`; the bytes
    /// will never be read (the stream was reset).
    pub fn discard(&mut self, pool: &mut PagePool) {
        self.pages.clear(pool);
        self.received.clear();
        self.buffered = 0;
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
    /// Pages the reader passed go back to `pool`.
    pub fn read(&mut self, pool: &mut PagePool, out: &mut [u8]) -> usize {
        let n = (self.readable() as usize).min(out.len());
        if n == 0 {
            return 0;
        }
        self.pages.read(self.read, &mut out[..n]);
        self.received.pop_front(n as u64);
        self.read += n as u64;
        self.buffered -= n as u64;
        self.pages.release_before(pool, self.read);
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
