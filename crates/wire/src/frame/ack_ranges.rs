//! The ranges of an ACK frame: validated once, then read lazily straight
//! from the packet that carried them, or, where the frame is handed to a
//! [`FrameHandler`](crate::FrameHandler), kept as the decoder computed them.

use core::fmt;
use core::ops::RangeInclusive;

use super::MAX_ACK_RANGES;
use crate::codec::next_ack_range;
use crate::error::EncodeError;
use crate::varint::VARINT_MAX;

/// A validated set of acknowledged packet-number ranges, largest first,
/// either borrowed from the caller (to encode) or from a packet (decoded,
/// read lazily).
#[derive(Clone, Copy)]
pub struct AckFrameRanges<'a>(AckFrameRangesRepr<'a>);

#[derive(Clone, Copy)]
pub(crate) enum AckFrameRangesRepr<'a> {
    /// Ranges given by a sender, already validated.
    Slice(&'a [RangeInclusive<u64>]),
    /// Ranges as they were on the wire, already validated by the decoder.
    Wire {
        largest: u64,
        first_range: u64,
        additional: usize,
        /// `additional` postcard `(gap, length)` varint pairs.
        pairs: &'a [u8],
    },
    /// Ranges the decoder validated and kept as `(start, end)`, largest
    /// first (at least one): a peer chooses how many an ACK holds, so
    /// each is worked out once, not again wherever the frame is read.
    Decoded {
        ranges: &'a [(u64, u64)],
        /// The `(gap, length)` pairs they were read from, to encode them again.
        pairs: &'a [u8],
    },
}

impl<'a> AckFrameRanges<'a> {
    /// Checks that `ranges` can be encoded: non-empty, at most
    /// [`MAX_ACK_RANGES`], each `start <= end`, strictly descending and
    /// separated by at least one missing packet number (adjacent ranges must
    /// be merged), and the largest at most [`VARINT_MAX`].
    pub fn new(ranges: &'a [RangeInclusive<u64>]) -> Result<Self, EncodeError> {
        let first = ranges
            .first()
            .ok_or(EncodeError::InvalidAckRanges("no ranges"))?;
        if ranges.len() > MAX_ACK_RANGES {
            return Err(EncodeError::InvalidAckRanges("more than MAX_ACK_RANGES"));
        }
        if *first.end() > VARINT_MAX {
            return Err(EncodeError::ValueTooLarge {
                field: "ack largest",
                value: *first.end(),
            });
        }
        let mut previous_smallest: Option<u64> = None;
        for range in ranges {
            if range.start() > range.end() {
                return Err(EncodeError::InvalidAckRanges("range with start > end"));
            }
            if let Some(prev) = previous_smallest {
                // Gap is prev - end - 2 (RFC 9000 §19.3.1), so end + 2 <= prev.
                if range.end().checked_add(2).is_none_or(|e| e > prev) {
                    return Err(EncodeError::InvalidAckRanges(
                        "ranges not descending with a gap between them",
                    ));
                }
            }
            previous_smallest = Some(*range.start());
        }
        Ok(Self(AckFrameRangesRepr::Slice(ranges)))
    }

    pub(crate) const fn from_wire(
        largest: u64,
        first_range: u64,
        additional: usize,
        pairs: &'a [u8],
    ) -> Self {
        Self(AckFrameRangesRepr::Wire {
            largest,
            first_range,
            additional,
            pairs,
        })
    }

    pub(crate) const fn decoded(ranges: &'a [(u64, u64)], pairs: &'a [u8]) -> Self {
        Self(AckFrameRangesRepr::Decoded { ranges, pairs })
    }

    pub(crate) const fn repr(&self) -> &AckFrameRangesRepr<'a> {
        &self.0
    }

    /// The largest acknowledged packet number.
    #[must_use]
    #[inline]
    pub fn largest(&self) -> u64 {
        match self.0 {
            AckFrameRangesRepr::Slice(ranges) => ranges.first().map_or(0, |r| *r.end()),
            AckFrameRangesRepr::Wire { largest, .. } => largest,
            AckFrameRangesRepr::Decoded { ranges, .. } => ranges.first().map_or(0, |r| r.1),
        }
    }

    /// The number of ranges (at least 1).
    #[must_use]
    pub fn len(&self) -> usize {
        match self.0 {
            AckFrameRangesRepr::Slice(ranges) => ranges.len(),
            AckFrameRangesRepr::Wire { additional, .. } => 1 + additional,
            AckFrameRangesRepr::Decoded { ranges, .. } => ranges.len(),
        }
    }

    /// Always false: a valid ACK acknowledges at least one packet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The ranges, largest first.
    #[must_use]
    pub fn iter(&self) -> AckFrameRangesIter<'a> {
        match self.0 {
            AckFrameRangesRepr::Slice(ranges) => AckFrameRangesIter(IterRepr::Slice(ranges.iter())),
            AckFrameRangesRepr::Wire {
                largest,
                first_range,
                additional,
                pairs,
            } => AckFrameRangesIter(IterRepr::Wire {
                start: largest.saturating_sub(first_range),
                end: largest,
                left: 1 + additional,
                pairs,
            }),
            AckFrameRangesRepr::Decoded { ranges, .. } => {
                AckFrameRangesIter(IterRepr::Decoded(ranges.iter()))
            }
        }
    }

    /// The ranges as `(start, end)` pairs, largest first, when the decoder
    /// kept them so (a frame handed to a
    /// [`FrameHandler`](crate::FrameHandler)): read as a plain slice, with
    /// no choice of layout per range.
    #[must_use]
    #[inline]
    pub const fn kept(&self) -> Option<&'a [(u64, u64)]> {
        match self.0 {
            AckFrameRangesRepr::Decoded { ranges, .. } => Some(ranges),
            _ => None,
        }
    }

    /// Whether `packet_number` is acknowledged.
    #[must_use]
    pub fn contains(&self, packet_number: u64) -> bool {
        self.iter().any(|r| r.contains(&packet_number))
    }
}

impl PartialEq for AckFrameRanges<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for AckFrameRanges<'_> {}

impl fmt::Debug for AckFrameRanges<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for AckFrameRanges<'a> {
    type Item = RangeInclusive<u64>;
    type IntoIter = AckFrameRangesIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over [`AckFrameRanges`], largest range first.
#[derive(Debug, Clone)]
pub struct AckFrameRangesIter<'a>(IterRepr<'a>);

#[derive(Debug, Clone)]
enum IterRepr<'a> {
    Slice(core::slice::Iter<'a, RangeInclusive<u64>>),
    /// The next range is `start..=end` while `left` (the ranges not yet
    /// returned) is above zero; `pairs` holds the ones after it.
    Wire {
        start: u64,
        end: u64,
        left: usize,
        pairs: &'a [u8],
    },
    Decoded(core::slice::Iter<'a, (u64, u64)>),
}

impl Iterator for AckFrameRangesIter<'_> {
    type Item = RangeInclusive<u64>;

    /// Always inlined: a peer chooses how many ranges an ACK holds, and
    /// each one is read again wherever the frame is acted on (a call of its
    /// own cost as much as reading the range).
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Slice(iter) => iter.next().cloned(),
            IterRepr::Wire {
                start,
                end,
                left,
                pairs,
            } => {
                *left = left.checked_sub(1)?;
                let current = *start..=*end;
                if *left > 0 {
                    // The decoder validated every pair (whole varints, no
                    // range below packet number 0): read again without the
                    // checks, and if one failed all the same, end here.
                    let (gap, length) = validated_pair(pairs);
                    match next_ack_range(*start, gap, length) {
                        Some(next) => (*start, *end) = next.into_inner(),
                        None => *left = 0,
                    }
                }
                Some(current)
            }
            IterRepr::Decoded(iter) => iter.next().map(|&(start, end)| start..=end),
        }
    }
}

/// A `(gap, length)` pair the decoder validated, read off the front of
/// `bytes`. Two bytes under 0x80 are the whole pair (the gaps and lengths
/// of most ACKs, and all of one that acknowledges every other packet):
/// one look.
#[inline(always)]
fn validated_pair(bytes: &mut &[u8]) -> (u64, u64) {
    if let [gap, length, ref rest @ ..] = **bytes
        && gap < 0x80
        && length < 0x80
    {
        *bytes = rest;
        return (u64::from(gap), u64::from(length));
    }
    (validated_varint(bytes), validated_varint(bytes))
}

/// A varint the decoder validated, read off the front of `bytes` (LEB128:
/// seven bits a byte, the last byte's high bit clear).
#[inline(never)]
fn validated_varint(bytes: &mut &[u8]) -> u64 {
    let mut value = 0u64;
    let mut shift = 0u32;
    while let Some((&byte, rest)) = bytes.split_first() {
        *bytes = rest;
        value |= u64::from(byte & 0x7f).wrapping_shl(shift);
        if byte < 0x80 {
            break;
        }
        shift = shift.saturating_add(7);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_ranges_refuse_empty_overlapping_adjacent_and_ascending_input() {
        assert!(AckFrameRanges::new(&[]).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = [5..=3];
        assert!(AckFrameRanges::new(&reversed).is_err());
        assert!(
            AckFrameRanges::new(&[5..=9, 3..=4]).is_err(),
            "adjacent ranges must be merged"
        );
        assert!(AckFrameRanges::new(&[5..=9, 3..=6]).is_err());
        assert!(AckFrameRanges::new(&[1..=2, 5..=9]).is_err());
        assert!(AckFrameRanges::new(&[0..=VARINT_MAX + 1]).is_err());
        let too_many: Vec<_> = (0..=MAX_ACK_RANGES as u64)
            .rev()
            .map(|i| i * 2..=i * 2)
            .collect();
        assert!(AckFrameRanges::new(&too_many).is_err());
        assert!(AckFrameRanges::new(&too_many[1..]).is_ok());
        assert!(AckFrameRanges::new(&[5..=9, 0..=3]).is_ok());
    }

    #[test]
    fn ack_ranges_answer_membership() {
        let ranges = [10..=12, 4..=6];
        let ranges = AckFrameRanges::new(&ranges).unwrap();
        assert!(ranges.contains(11));
        assert!(ranges.contains(4));
        assert!(!ranges.contains(7));
        assert_eq!(ranges.largest(), 12);
        assert_eq!(ranges.len(), 2);
    }
}
