//! Walking a batch of transmits in the units a backend puts in one message.
//!
//! A backend without segmentation offload sends one datagram per message; one
//! with it sends up to `max_segments` equal segments of one transmit per
//! message. The cursor says where the next message starts, so progress can be
//! reported as a [`Sent`] and a refused message skipped or re-planned without
//! losing or repeating a datagram.

use std::net::SocketAddr;

use crate::transmit::{Sent, Transmit};

/// Position in a batch: a transmit and a byte offset into its contents
/// (always at a segment boundary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) transmit: usize,
    pub(crate) offset: usize,
}

/// The next message to send: bytes of one transmit, `segments` datagrams of
/// `segment_size` bytes (the last may be shorter).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunk<'a> {
    pub(crate) destination: SocketAddr,
    pub(crate) bytes: &'a [u8],
    pub(crate) segment_size: usize,
    pub(crate) segments: usize,
    /// The transmit's own time to live, if any.
    pub(crate) ttl: Option<u8>,
}

impl Cursor {
    /// Takes the next message of at most `max_segments` segments and
    /// `max_bytes` bytes (at least one segment whatever its size), and moves
    /// past it. `None` when the batch is done.
    pub(crate) fn next_chunk<'a>(
        &mut self,
        transmits: &[Transmit<'a>],
        max_segments: usize,
        max_bytes: usize,
    ) -> Option<Chunk<'a>> {
        let transmit = transmits.get(self.transmit)?;
        let stride = transmit.stride();
        let rest = &transmit.contents[self.offset.min(transmit.contents.len())..];
        let take = match max_bytes.checked_div(stride) {
            Some(fit) => rest
                .len()
                .min(max_segments.min(fit).max(1).saturating_mul(stride)),
            None => 0,
        };
        let bytes = &rest[..take];
        self.offset += take;
        if self.offset >= transmit.contents.len() {
            self.transmit += 1;
            self.offset = 0;
        }
        Some(Chunk {
            destination: transmit.destination,
            bytes,
            segment_size: stride,
            segments: if stride == 0 {
                1
            } else {
                take.div_ceil(stride)
            },
            ttl: transmit.ttl,
        })
    }

    /// Moves past one segment of the current transmit.
    pub(crate) fn skip_segment(&mut self, transmits: &[Transmit<'_>]) {
        let Some(transmit) = transmits.get(self.transmit) else {
            return;
        };
        self.offset += transmit.stride().max(1);
        if self.offset >= transmit.contents.len() {
            self.transmit += 1;
            self.offset = 0;
        }
    }

    /// The progress this position stands for.
    pub(crate) fn sent(&self, transmits: &[Transmit<'_>]) -> Sent {
        let segments = match transmits.get(self.transmit) {
            Some(t) if self.offset > 0 && t.stride() > 0 => self.offset / t.stride(),
            _ => 0,
        };
        Sent {
            transmits: self.transmit,
            segments,
        }
    }

    /// Whether nothing has been sent yet.
    pub(crate) fn at_start(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    #[test]
    fn gso_chunks_respect_the_segment_and_byte_limits_and_keep_the_short_tail() {
        let bytes = vec![7u8; 10 * 100 + 30];
        let batch = [Transmit::new(dest(), &bytes).with_segment_size(100)];
        let mut cursor = Cursor::default();
        let a = cursor.next_chunk(&batch, 4, usize::MAX).expect("first");
        assert_eq!((a.bytes.len(), a.segments), (400, 4));
        assert_eq!(
            cursor.sent(&batch),
            Sent {
                transmits: 0,
                segments: 4
            }
        );
        let b = cursor.next_chunk(&batch, 64, 450).expect("second");
        assert_eq!((b.bytes.len(), b.segments), (400, 4));
        let c = cursor.next_chunk(&batch, 64, usize::MAX).expect("third");
        assert_eq!((c.bytes.len(), c.segments), (230, 3));
        assert_eq!(
            cursor.sent(&batch),
            Sent {
                transmits: 1,
                segments: 0
            }
        );
        assert!(cursor.next_chunk(&batch, 64, usize::MAX).is_none());
    }

    #[test]
    fn one_segment_per_message_walks_every_datagram_including_empty_ones() {
        let bytes = [1u8; 25];
        let batch = [
            Transmit::new(dest(), &bytes).with_segment_size(10),
            Transmit::new(dest(), &[]),
        ];
        let mut cursor = Cursor::default();
        let sizes: Vec<usize> = std::iter::from_fn(|| cursor.next_chunk(&batch, 1, usize::MAX))
            .map(|c| c.bytes.len())
            .collect();
        assert_eq!(sizes, [10, 10, 5, 0]);
    }

    #[test]
    fn a_segment_larger_than_the_byte_limit_still_goes_alone() {
        let bytes = [1u8; 300];
        let batch = [Transmit::new(dest(), &bytes).with_segment_size(200)];
        let mut cursor = Cursor::default();
        let a = cursor.next_chunk(&batch, 64, 100).expect("first");
        assert_eq!((a.bytes.len(), a.segments), (200, 1));
    }
}
