//! Caller-owned receive buffers and what the kernel said about each message.

use std::net::{Ipv4Addr, SocketAddr};

/// Metadata of one received message.
///
/// With UDP generic receive offload a message holds several datagrams from
/// the same source, each `stride` bytes long except the last, which may be
/// shorter; without it `stride == len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecvMeta {
    /// Who sent it.
    pub source: SocketAddr,
    /// Bytes in the slot. A datagram longer than the slot is cut to it
    /// (and counted in `recv_truncated` where the backend can tell).
    pub len: usize,
    /// Size of each datagram in the slot but the last (the GRO segment size).
    pub stride: usize,
}

impl RecvMeta {
    pub(crate) const EMPTY: Self = Self {
        source: SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        len: 0,
        stride: 0,
    };

    /// How many datagrams the message holds (an empty datagram counts as one).
    pub fn datagrams(&self) -> usize {
        if self.stride == 0 || self.len == 0 {
            1
        } else {
            self.len.div_ceil(self.stride)
        }
    }
}

/// Receive buffers allocated once and reused for every batch: `slots` slots of
/// `slot_len` bytes, one message per slot.
///
/// Keeping them with the caller (not inside the socket) lets the driver parse
/// datagrams in place without copying, and keeps every receive free of heap
/// allocation. A socket with GRO enabled needs slots of at least
/// [`crate::GRO_SLOT_LEN`] bytes, since one message can carry up to 64 KiB.
#[derive(Debug)]
pub struct RecvBuffers {
    data: Box<[u8]>,
    slot_len: usize,
    meta: Box<[RecvMeta]>,
    filled: usize,
}

impl RecvBuffers {
    /// `slots` slots of `slot_len` bytes each (both at least 1).
    ///
    /// # Panics
    /// If `slots * slot_len` overflows `usize`, as `Vec` does for a capacity
    /// it cannot hold: such a size is a bug in the caller, and a wrapped
    /// product would leave fewer slots than the batch takes from
    /// [`slots`](Self::slots).
    pub fn new(slots: usize, slot_len: usize) -> Self {
        let slots = slots.max(1);
        let slot_len = slot_len.max(1);
        let Some(total) = slots.checked_mul(slot_len) else {
            panic!("RecvBuffers::new: {slots} slots of {slot_len} bytes overflow usize");
        };
        Self {
            data: vec![0; total].into_boxed_slice(),
            slot_len,
            meta: vec![RecvMeta::EMPTY; slots].into_boxed_slice(),
            filled: 0,
        }
    }

    /// How many slots there are.
    pub fn slots(&self) -> usize {
        self.meta.len()
    }

    /// Bytes per slot.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// How many messages the last receive filled.
    pub fn messages_len(&self) -> usize {
        self.filled
    }

    /// The messages of the last receive, each with its bytes.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = (&RecvMeta, &[u8])> + '_ {
        self.meta[..self.filled]
            .iter()
            .zip(self.data.chunks_exact(self.slot_len))
            .map(|(meta, slot)| (meta, &slot[..meta.len]))
    }

    /// The datagrams of the last receive, GRO messages split by their stride.
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.messages().flat_map(|(meta, bytes)| {
            let stride = if meta.stride == 0 {
                bytes.len().max(1)
            } else {
                meta.stride
            };
            let empty = bytes.is_empty();
            bytes
                .chunks(stride)
                .chain(empty.then_some(&bytes[..0]))
                .map(move |d| (meta.source, d))
        })
    }

    /// The datagrams of the last receive, writable in place: a packet can be
    /// decrypted where the kernel wrote it, without a copy.
    pub fn datagrams_mut(&mut self) -> impl Iterator<Item = (SocketAddr, &mut [u8])> + '_ {
        self.meta[..self.filled]
            .iter()
            .zip(self.data.chunks_exact_mut(self.slot_len))
            .flat_map(|(meta, slot)| {
                let stride = if meta.stride == 0 {
                    meta.len.max(1)
                } else {
                    meta.stride
                };
                // An empty datagram is one datagram: `chunks_mut` of nothing
                // yields nothing, so the empty tail stands in for it.
                let (bytes, tail) = slot[..meta.len].split_at_mut(meta.len);
                bytes
                    .chunks_mut(stride)
                    .chain((meta.len == 0).then_some(tail))
                    .map(move |d| (meta.source, d))
            })
    }

    /// Slot `index` for the kernel or the portable backend to write into.
    pub(crate) fn slot_mut(&mut self, index: usize) -> &mut [u8] {
        let start = index * self.slot_len;
        &mut self.data[start..start + self.slot_len]
    }

    /// Every slot, as disjoint mutable slices taken from one borrow of the
    /// storage: pointers the kernel is handed for a batch stay valid together
    /// (taking each slot with its own `slot_mut` would reborrow the whole
    /// storage each time and invalidate the pointers taken before).
    pub(crate) fn slots_mut(&mut self) -> impl Iterator<Item = &mut [u8]> + '_ {
        self.data.chunks_exact_mut(self.slot_len)
    }

    /// Records what arrived in slot `index`.
    pub(crate) fn set_meta(&mut self, index: usize, meta: RecvMeta) {
        self.meta[index] = meta;
    }

    /// Marks the first `filled` slots as this receive's messages.
    pub(crate) fn set_filled(&mut self, filled: usize) {
        self.filled = filled.min(self.meta.len());
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    #[test]
    fn pointers_to_every_slot_of_a_batch_stay_writable_together() {
        // As the kernel does: take every slot's pointer first, write through
        // them all afterwards (run under Miri, this checks they stay valid).
        let mut bufs = RecvBuffers::new(3, 4);
        let ptrs: Vec<*mut u8> = bufs.slots_mut().map(|s| s.as_mut_ptr()).collect();
        for (i, p) in ptrs.into_iter().enumerate() {
            // SAFETY: each pointer starts a live 4-byte slot of `bufs`, which
            // is not otherwise borrowed until the writes are done.
            unsafe { p.write_bytes(i as u8 + 1, 4) };
        }
        let source = SocketAddr::from(([127, 0, 0, 1], 5));
        for i in 0..3 {
            bufs.set_meta(
                i,
                RecvMeta {
                    source,
                    len: 4,
                    stride: 4,
                },
            );
        }
        bufs.set_filled(3);
        let got: Vec<&[u8]> = bufs.messages().map(|(_, d)| d).collect();
        assert_eq!(got, [[1u8; 4], [2; 4], [3; 4]]);
    }

    #[test]
    #[should_panic(expected = "overflow usize")]
    fn sizes_whose_product_overflows_are_refused() {
        let _ = RecvBuffers::new(2, 1 << (usize::BITS - 1));
    }

    const SOURCE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 5);

    /// Two messages from [`SOURCE`]: a GRO one of 25 bytes in datagrams
    /// of 10 (the last 5), and an empty one.
    fn a_gro_message_and_an_empty_one() -> RecvBuffers {
        let mut bufs = RecvBuffers::new(2, 64);
        for (index, (len, stride)) in [(25, 10), (0, 0)].into_iter().enumerate() {
            bufs.set_meta(
                index,
                RecvMeta {
                    source: SOURCE,
                    len,
                    stride,
                },
            );
        }
        bufs.set_filled(2);
        bufs
    }

    #[test]
    fn datagrams_mut_splits_like_datagrams_and_writes_in_place() {
        let mut bufs = a_gro_message_and_an_empty_one();
        let mut sizes = Vec::new();
        for (i, (from, d)) in bufs.datagrams_mut().enumerate() {
            assert_eq!(from, SOURCE);
            sizes.push(d.len());
            d.fill(i as u8 + 1);
        }
        assert_eq!(sizes, [10, 10, 5, 0]);
        let seen: Vec<Vec<u8>> = bufs.datagrams().map(|(_, d)| d.to_vec()).collect();
        assert_eq!(seen, [vec![1; 10], vec![2; 10], vec![3; 5], vec![]]);
    }

    #[test]
    fn datagrams_split_a_gro_message_by_its_stride_with_a_short_tail() {
        let mut bufs = a_gro_message_and_an_empty_one();
        bufs.slot_mut(0)[..25].copy_from_slice(&[1; 25]);
        let sizes: Vec<usize> = bufs.datagrams().map(|(_, d)| d.len()).collect();
        assert_eq!(sizes, [10, 10, 5, 0]);
        assert_eq!(
            bufs.messages().map(|(m, _)| m.datagrams()).sum::<usize>(),
            4
        );
    }
}
