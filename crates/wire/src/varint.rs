//! The variable-length integers every Tern header and frame is built from.
//!
//! Tern uses postcard's unsigned varint (LEB128: seven value bits per byte,
//! least significant group first, high bit set on every byte but the last).
//! This module only *predicts* sizes and states the bounds; the bytes
//! themselves are always written and read by postcard, and the codec's
//! property tests check that the prediction equals what postcard writes.

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
    }
}
