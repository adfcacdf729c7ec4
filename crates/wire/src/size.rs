//! Packet sizes, computed from the encodings rather than guessed.
//!
//! A connection starts at [`MIN_UDP_PAYLOAD`] (1200 bytes cross every path
//! unfragmented) and may grow to its configured maximum, [`DEFAULT_UDP_PAYLOAD`]
//! (1452 = 1500-byte Ethernet MTU − 40 IPv6 − 8 UDP) by default, or up to
//! [`MAX_UDP_PAYLOAD`] on loopback and jumbo-frame paths. Everything below
//! is derived from the header, frame and tag encodings, and the tests check
//! the result against bytes actually sealed.

use crate::aead::TAG_LEN;
use crate::error::SizeError;
use crate::header::MAX_HEADER_LEN;
use crate::varint::{VARINT_MAX, varint_len};

/// The smallest maximum UDP payload Tern accepts: what every IPv6 path carries
/// (1280-byte IPv6 minimum MTU minus headers, rounded down as QUIC does).
pub const MIN_UDP_PAYLOAD: usize = 1200;
/// The default maximum UDP payload: a 1500-byte Ethernet MTU minus 40 bytes
/// of IPv6 header and 8 of UDP header.
pub const DEFAULT_UDP_PAYLOAD: usize = 1452;
/// The largest UDP payload IPv4 can carry (65 535 − 20 IP − 8 UDP).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Bytes of a `Stream` frame besides its data, at most: type byte, stream id
/// and offset at [`VARINT_MAX`] size, fin byte. The data length prefix is
/// accounted separately because it depends on the data.
const STREAM_FIXED_MAX: usize = 1 + 2 * varint_len(VARINT_MAX) + 1;

/// A maximum UDP payload size, validated to `MIN_UDP_PAYLOAD..=MAX_UDP_PAYLOAD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaxUdpPayload(usize);

impl Default for MaxUdpPayload {
    fn default() -> Self {
        Self(DEFAULT_UDP_PAYLOAD)
    }
}

impl MaxUdpPayload {
    /// Validates a maximum UDP payload size in bytes.
    pub const fn new(bytes: usize) -> Result<Self, SizeError> {
        if bytes < MIN_UDP_PAYLOAD || bytes > MAX_UDP_PAYLOAD {
            return Err(SizeError::OutOfRange(bytes));
        }
        Ok(Self(bytes))
    }

    /// The size in bytes.
    #[must_use]
    pub const fn get(self) -> usize {
        self.0
    }

    /// Bytes of frames a data packet whose packet number takes
    /// `packet_number_len` bytes (1 to 4) can carry.
    #[must_use]
    pub const fn frames_capacity(self, packet_number_len: usize) -> usize {
        self.0 - 1 - 4 - packet_number_len - TAG_LEN
    }

    /// Bytes of frames any data packet can carry, whatever its number.
    #[must_use]
    pub const fn guaranteed_frames_capacity(self) -> usize {
        self.0 - MAX_HEADER_LEN - TAG_LEN
    }

    /// The most stream data one `Stream` frame can carry when it is the only
    /// frame of a packet whose number takes `packet_number_len` bytes.
    #[must_use]
    pub const fn stream_data_capacity(
        self,
        packet_number_len: usize,
        stream_id: u64,
        offset: u64,
    ) -> usize {
        stream_data_capacity(self.frames_capacity(packet_number_len), stream_id, offset)
    }

    /// Stream data a full packet carries in the worst case: a 4-byte packet
    /// number and a stream id and offset at the largest varint size.
    #[must_use]
    pub const fn guaranteed_stream_data_capacity(self) -> usize {
        byte_string_capacity(self.guaranteed_frames_capacity() - STREAM_FIXED_MAX)
    }

    /// The largest message a single `Message` frame can carry in any packet.
    #[must_use]
    pub const fn guaranteed_message_capacity(self) -> usize {
        byte_string_capacity(self.guaranteed_frames_capacity() - 1 - varint_len(VARINT_MAX))
    }

    /// Bytes of a full data packet that are not stream data, in the worst case.
    #[must_use]
    pub const fn stream_packet_overhead(self) -> usize {
        self.0 - self.guaranteed_stream_data_capacity()
    }
}

/// The most stream data one `Stream` frame for `stream_id` at `offset` can
/// carry in `room` bytes of frames.
pub(crate) const fn stream_data_capacity(room: usize, stream_id: u64, offset: u64) -> usize {
    let fixed = 1 + varint_len(stream_id) + varint_len(offset) + 1;
    let data = byte_string_capacity(room.saturating_sub(fixed));
    // The stream may not extend past VARINT_MAX (RFC 9000 §19.8).
    let left_in_stream = VARINT_MAX.saturating_sub(offset);
    if (data as u64) < left_in_stream {
        data
    } else {
        left_in_stream as usize
    }
}

/// The longest byte string whose postcard encoding (varint length, then the
/// bytes) fits in `room` bytes.
pub(crate) const fn byte_string_capacity(room: usize) -> usize {
    if room == 0 {
        return 0;
    }
    let data = room - varint_len(room as u64);
    // With a one-byte-shorter length prefix, one more data byte may fit.
    if data + 1 + varint_len(data as u64 + 1) <= room {
        data + 1
    } else {
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Frame, Stream};
    use crate::header::PacketNumber;
    use crate::keys::{KeyConfig, SECRET_LEN, TrafficSecret};
    use crate::packet::PacketSealer;
    use proptest::prelude::*;

    #[test]
    fn a_full_stream_packet_carries_at_least_1150_bytes_at_1200_and_1400_at_1452() {
        let at_1200 = MaxUdpPayload::new(1200)
            .unwrap()
            .guaranteed_stream_data_capacity();
        let at_1452 = MaxUdpPayload::new(1452)
            .unwrap()
            .guaranteed_stream_data_capacity();
        assert!(at_1200 >= 1150, "{at_1200}");
        assert!(at_1452 >= 1400, "{at_1452}");
        // 9 header + 16 tag + 20 fixed stream fields + 2 length bytes.
        assert_eq!(MaxUdpPayload::default().stream_packet_overhead(), 47);
    }

    #[test]
    fn out_of_range_payload_sizes_are_refused() {
        assert_eq!(MaxUdpPayload::new(1199), Err(SizeError::OutOfRange(1199)));
        assert_eq!(
            MaxUdpPayload::new(65_508),
            Err(SizeError::OutOfRange(65_508))
        );
        assert!(MaxUdpPayload::new(65_507).is_ok());
    }

    #[test]
    fn byte_string_capacity_is_tight_at_length_prefix_boundaries() {
        for room in 1..20_000usize {
            let data = byte_string_capacity(room);
            assert!(data + varint_len(data as u64) <= room, "room {room}");
            assert!(data + 1 + varint_len(data as u64 + 1) > room, "room {room}");
        }
    }

    /// Seals a packet holding one stream frame of `len` bytes; its length, or
    /// `None` if the frame did not fit.
    fn sealed_len(
        max: MaxUdpPayload,
        packet_number: u64,
        id: u64,
        offset: u64,
        len: usize,
    ) -> Option<usize> {
        let data = vec![0xab; len];
        let mut sealer = PacketSealer::new(
            TrafficSecret::from_bytes([3; SECRET_LEN]),
            7,
            KeyConfig::default(),
        );
        sealer.set_next_packet_number(packet_number);
        let mut buf = vec![0u8; max.get()];
        let mut packet = sealer.start(&mut buf).unwrap();
        let frame = Frame::Stream(Stream {
            id,
            offset,
            fin: true,
            data: &data,
        });
        packet.push(&frame).ok()?;
        Some(packet.finish().unwrap().0)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn the_computed_stream_capacity_fills_the_packet_exactly(
            max in MIN_UDP_PAYLOAD..=9000usize,
            packet_number in prop_oneof![0u64..200, 0u64..1 << 31],
            id in any::<u64>().prop_map(|v| v >> 2),
            offset in (0u64..1 << 61),
        ) {
            let max = MaxUdpPayload::new(max).unwrap();
            let pn_len = PacketNumber::encode_data(packet_number, None).unwrap().len();
            let capacity = max.stream_data_capacity(pn_len, id, offset);
            let len = sealed_len(max, packet_number, id, offset, capacity);
            prop_assert!(len.is_some_and(|l| l <= max.get()), "capacity does not fit");
            prop_assert!(len.is_some_and(|l| l + 1 >= max.get()), "more than one byte wasted");
            prop_assert_eq!(sealed_len(max, packet_number, id, offset, capacity + 1), None);
            prop_assert!(max.guaranteed_stream_data_capacity() <= capacity);
        }
    }
}
