//! A large message put together as its bytes arrive, in chunks that are
//! never moved: what it holds is what it is charged.
//!
//! One growing buffer doubles: while it copies into the new one, the old
//! one is still there, three times the bytes at the peak, and up to twice
//! the bytes held after (issue #23: the heap passed the memory budget by
//! one such copy). Chunks are allocated at their final size and filled in
//! place, each at least an eighth of what the message holds so far (4 KiB
//! to 1 MiB), so they hold at most an eighth more than the bytes (plus
//! one small chunk) and are few. The message is handed over in one
//! buffer, of exactly its length, made once when its last byte is in:
//! only then is its size known (the wire does not announce it).

use bytes::{Bytes, BytesMut};

/// The smallest chunk.
const MIN_CHUNK: usize = 4096;
/// The largest chunk.
const MAX_CHUNK: usize = 1 << 20;

/// The bytes of one large message so far.
#[derive(Debug, Default)]
pub(crate) struct Assembly {
    chunks: Vec<BytesMut>,
    len: usize,
    capacity: usize,
}

impl Assembly {
    /// Nothing yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Bytes put together.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of memory held: the chunks, and the list of them.
    pub(crate) fn memory(&self) -> usize {
        self.capacity + self.chunks.capacity() * std::mem::size_of::<BytesMut>()
    }

    /// Appends `n` bytes, which `fill` copies into the slice it is given
    /// (it may be called several times, once per chunk, and returns how
    /// many it copied).
    pub(crate) fn append(&mut self, mut n: usize, mut fill: impl FnMut(&mut [u8]) -> usize) {
        while n > 0 {
            let room = self.chunks.last().map_or(0, |c| c.capacity() - c.len());
            if room == 0 {
                let size = n.max((self.len / 8).clamp(MIN_CHUNK, MAX_CHUNK));
                self.chunks.push(BytesMut::with_capacity(size));
                self.capacity += size;
            }
            let Some(chunk) = self.chunks.last_mut() else {
                return;
            };
            let start = chunk.len();
            let take = n.min(chunk.capacity() - start);
            chunk.resize(start + take, 0);
            let copied = fill(&mut chunk[start..]).min(take);
            chunk.truncate(start + copied);
            self.len += copied;
            if copied < take {
                return;
            }
            n -= take;
        }
    }

    /// The whole message, in one buffer of exactly its length.
    pub(crate) fn finish(&mut self) -> Bytes {
        let chunks = std::mem::take(&mut self.chunks);
        let len = std::mem::take(&mut self.len);
        self.capacity = 0;
        match <[BytesMut; 1]>::try_from(chunks) {
            Ok([chunk]) if chunk.len() == chunk.capacity() => chunk.freeze(),
            Ok([chunk]) => Bytes::copy_from_slice(&chunk),
            Err(chunks) => {
                let mut whole = Vec::with_capacity(len);
                for chunk in chunks {
                    whole.extend_from_slice(&chunk);
                }
                Bytes::from(whole)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `bytes` as a stream reader would hand them over.
    fn append(assembly: &mut Assembly, bytes: &[u8]) {
        let mut at = 0;
        assembly.append(bytes.len(), |out| {
            out.copy_from_slice(&bytes[at..at + out.len()]);
            at += out.len();
            out.len()
        });
    }

    #[test]
    fn the_message_comes_out_whole_and_exact() {
        let message: Vec<u8> = (0..3_000_000u32).map(|k| (k * 7 + k / 251) as u8).collect();
        let mut assembly = Assembly::new();
        for piece in message.chunks(1_100) {
            append(&mut assembly, piece);
        }
        assert_eq!(assembly.len(), message.len());
        let held = assembly.memory();
        assert!(
            held <= message.len() + message.len() / 8 + MAX_CHUNK,
            "{held} held for {}",
            message.len()
        );
        let whole = assembly.finish();
        assert_eq!(&whole[..], &message[..]);
        assert_eq!(assembly.memory(), 0);
    }

    #[test]
    fn a_short_fill_stops_the_append() {
        let mut assembly = Assembly::new();
        assembly.append(100, |out| {
            out[..10].fill(1);
            10
        });
        assert_eq!(assembly.len(), 10);
        append(&mut assembly, &[2; 5]);
        let mut expected = vec![1; 10];
        expected.extend([2; 5]);
        assert_eq!(&assembly.finish()[..], &expected[..]);
    }
}
