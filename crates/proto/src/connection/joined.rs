//! A packet's small Stream frames of one stream, each starting where the
//! last one ended, joined to be handed to the stream as one frame.
//!
//! A peer may cut its data into one-byte frames, a hundred to a packet.
//! Handed over one by one, each frame pays the stream's checks, its
//! look-up, a store and a look at the windows; joined, those are paid once
//! per run, and a frame costs its decoding and the copy of its bytes
//! (docs/benchmarks.md, "tiny fragments"). A run is handed over before
//! any other frame is handled, and at the end of the packet, so frames
//! still act in the order they came.
//!
//! The stream is handed what the frames say together: the same bytes at
//! the same offsets, checked as one frame. A frame that breaks a rule
//! makes its run break it, and the connection fails; the checks see the
//! run's end (a flow-control error counts the bytes up to it) and the
//! bytes it buffers together (the bound on fragmentation is judged after
//! the run, as after the packet).

use tern_wire::Stream;

/// Bytes a run holds at most: a frame that does not fit goes on its own
/// (its fixed cost is small beside its bytes). Few, so that the run's
/// buffer costs a packet without small frames next to nothing.
const RUN_BYTES: usize = 64;

/// The run of frames held, if any.
pub(super) struct Joined {
    held: bool,
    id: u64,
    offset: u64,
    len: usize,
    bytes: [u8; RUN_BYTES],
}

impl Joined {
    pub(super) fn new() -> Self {
        Self {
            held: false,
            id: 0,
            offset: 0,
            len: 0,
            bytes: [0; RUN_BYTES],
        }
    }

    /// Whether a run is held.
    #[inline]
    pub(super) fn is_held(&self) -> bool {
        self.held
    }

    /// Takes `frame` in if it continues the run held, or starts a run if
    /// none is held; whether it did. A frame that ends its stream is never
    /// taken: it goes on its own, after the run.
    #[inline]
    pub(super) fn take(&mut self, frame: &Stream<'_>) -> bool {
        let len = frame.data.len();
        if frame.fin || len > RUN_BYTES - self.len {
            return false;
        }
        if !self.held {
            (self.held, self.id, self.offset) = (true, frame.id, frame.offset);
        } else if frame.id != self.id || frame.offset != self.offset + self.len as u64 {
            return false;
        }
        self.bytes[self.len..self.len + len].copy_from_slice(frame.data);
        self.len += len;
        true
    }

    /// The run held, as one frame; none is held after it.
    pub(super) fn take_run(&mut self) -> Option<Stream<'_>> {
        if !std::mem::take(&mut self.held) {
            return None;
        }
        let len = std::mem::take(&mut self.len);
        Some(Stream {
            id: self.id,
            offset: self.offset,
            fin: false,
            data: &self.bytes[..len],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: u64, offset: u64, data: &[u8], fin: bool) -> Stream<'_> {
        Stream {
            id,
            offset,
            fin,
            data,
        }
    }

    #[test]
    fn frames_that_continue_a_run_join_it() {
        let mut joined = Joined::new();
        assert!(joined.take_run().is_none(), "nothing held");
        assert!(joined.take(&frame(4, 10, b"ab", false)));
        assert!(joined.take(&frame(4, 12, b"c", false)));
        assert!(!joined.take(&frame(4, 14, b"d", false)), "a gap");
        assert!(!joined.take(&frame(8, 13, b"d", false)), "another stream");
        assert!(!joined.take(&frame(4, 13, b"d", true)), "the end");
        assert!(
            !joined.take(&frame(4, 13, &[0; RUN_BYTES], false)),
            "too long"
        );
        assert_eq!(joined.take_run(), Some(frame(4, 10, b"abc", false)));
        assert!(joined.take_run().is_none(), "handed over once");
        assert!(
            joined.take(&frame(8, 0, &[1; RUN_BYTES], false)),
            "a new run"
        );
        assert!(
            !joined.take(&frame(8, RUN_BYTES as u64, b"x", false)),
            "full"
        );
        assert_eq!(joined.take_run().map(|f| f.data.len()), Some(RUN_BYTES));
    }
}
