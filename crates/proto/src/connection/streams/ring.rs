//! A fixed-capacity byte ring: where a stream's bytes wait, copied in once
//! and out once, with no allocation after the first use.
//!
//! Positions are relative to the ring's front (the oldest byte kept): a
//! send stream's front is its oldest unacknowledged byte, a receive
//! stream's the next byte the application reads.

/// Bytes at positions `0..capacity` from the front, stored circularly.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    buf: Box<[u8]>,
    /// Index in `buf` of position 0.
    front: usize,
}

impl Ring {
    /// An empty ring; memory is taken when it is first needed.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Makes room for positions `0..needed`, keeping the `live` bytes at
    /// the front: the ring at least doubles when it grows (from 4 KiB), but
    /// never past `max`, so a stream that carries a few bytes does not hold
    /// its whole window in memory.
    pub(crate) fn reserve(&mut self, needed: usize, max: usize, live: usize) {
        let cap = self.buf.len();
        if needed <= cap {
            return;
        }
        let capacity = needed.max(cap * 2).max(4096).min(max.max(needed));
        let mut grown = vec![0u8; capacity].into_boxed_slice();
        self.read_at(0, &mut grown[..live.min(self.buf.len())]);
        self.buf = grown;
        self.front = 0;
    }

    /// Copies `data` to positions `at..at + data.len()` (within capacity).
    pub(crate) fn write_at(&mut self, at: usize, data: &[u8]) {
        let cap = self.buf.len();
        debug_assert!(at + data.len() <= cap);
        if data.is_empty() {
            return;
        }
        let start = (self.front + at) % cap;
        let first = data.len().min(cap - start);
        self.buf[start..start + first].copy_from_slice(&data[..first]);
        self.buf[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Copies positions `at..at + out.len()` into `out`.
    pub(crate) fn read_at(&self, at: usize, out: &mut [u8]) {
        let cap = self.buf.len();
        if out.is_empty() || cap == 0 {
            return;
        }
        let start = (self.front + at) % cap;
        let first = out.len().min(cap - start);
        out[..first].copy_from_slice(&self.buf[start..start + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.buf[..rest]);
    }

    /// The bytes from position `at`, at most `max`, up to where the ring wraps.
    pub(crate) fn contiguous(&self, at: usize, max: usize) -> &[u8] {
        let cap = self.buf.len();
        if cap == 0 || max == 0 {
            return &[];
        }
        let start = (self.front + at) % cap;
        &self.buf[start..start + max.min(cap - start)]
    }

    /// Drops `n` bytes from the front.
    pub(crate) fn advance(&mut self, n: usize) {
        if self.buf.is_empty() {
            return;
        }
        self.front = (self.front + n) % self.buf.len();
    }

    /// The ring holds no byte: the next ones go to the start of the buffer.
    /// A ring drained after each burst (a reader that keeps up) then reuses
    /// the same first bytes of its buffer, still in the CPU's cache, rather
    /// than walking its whole capacity and missing the cache on every line.
    pub(crate) fn restart(&mut self) {
        self.front = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_wrap_around_the_end() {
        let mut ring = Ring::new();
        ring.reserve(8, 8, 0);
        ring.write_at(0, b"abcdef");
        ring.advance(5);
        ring.write_at(1, b"ghijk");
        let mut out = [0; 6];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"fghijk");
        assert_eq!(ring.contiguous(0, 10), b"fgh");
        ring.reserve(16, 16, 6);
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"fghijk");
        assert_eq!(ring.contiguous(0, 10), b"fghijk\0\0\0\0");
    }
}
