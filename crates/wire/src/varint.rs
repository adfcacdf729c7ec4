//! The variable-length integers every Tern header and frame is built from.
//!
//! Tern uses postcard's unsigned varint (LEB128: seven value bits per byte,
//! least significant group first, high bit set on every byte but the last).
//! This module predicts sizes, states the bounds and writes the varints of
//! the frames that carry data (see [`write`]); every other encoding is
//! written by postcard and all are read by postcard. Property tests check
//! that the prediction equals what postcard writes and that [`write`]
//! writes the same bytes.

/// The largest value any Tern varint field may carry: 2^62 − 1.
///
/// The same bound as QUIC (RFC 9000 §16: "values ... up to 2^62-1"). Stream
/// ids, offsets, flow-control limits, error codes and times never need more,
/// and a decoder refuses anything above it as an absurd value, so arithmetic
/// on decoded values (`offset + len`, `largest - range`) cannot overflow.
/// It also caps every varint at 9 bytes on the wire.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// The number of bytes postcard writes for `value` (1 to 10).
#[must_use]
pub const fn varint_len(value: u64) -> usize {
    // One byte per started group of seven significant bits; zero takes one byte.
    let bits = 64 - (value | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// Writes `value` as postcard does at the start of `dst` and returns the
/// bytes written, or `None` if `dst` is too short.
///
/// The packet path writes the header of a Stream, Message or Datagram frame
/// with this instead of going through serde: the frame's data is copied
/// right after, and in front of a 6 GB/s cipher the serializer's per-field
/// dispatch is a measurable share of creating a packet.
#[inline]
pub(crate) fn write(mut value: u64, dst: &mut [u8]) -> Option<usize> {
    for (i, byte) in dst.iter_mut().enumerate() {
        if value < 0x80 {
            // Lossless: below 0x80.
            *byte = value as u8;
            return Some(i + 1);
        }
        // The low seven bits, with the continuation bit.
        *byte = (value as u8) | 0x80;
        value >>= 7;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn boundaries_of_each_length_are_where_leb128_puts_them() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16_383), 2);
        assert_eq!(varint_len(16_384), 3);
        assert_eq!(varint_len(VARINT_MAX), 9);
        assert_eq!(varint_len(u64::MAX), 10);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn predicted_length_equals_what_postcard_writes(value in any::<u64>()) {
            let mut buf = [0u8; 16];
            let written = postcard::to_slice(&value, &mut buf).expect("16 bytes hold any u64").len();
            prop_assert_eq!(varint_len(value), written);
        }

        #[test]
        fn write_writes_what_postcard_writes_and_refuses_a_short_buffer(value in any::<u64>()) {
            let mut expected = [0u8; 16];
            let expected = postcard::to_slice(&value, &mut expected).expect("16 bytes hold any u64");
            let mut buf = [0u8; 16];
            prop_assert_eq!(write(value, &mut buf), Some(expected.len()));
            prop_assert_eq!(&buf[..expected.len()], &*expected);
            prop_assert_eq!(write(value, &mut buf[..expected.len() - 1]), None);
        }
    }
}
