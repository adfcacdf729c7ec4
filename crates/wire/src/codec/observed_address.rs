//! The ObservedAddress frame's body: sequence (varint), family (one byte,
//! 4 or 6), the address (4 or 16 bytes), the port (2 bytes, big-endian).
//!
//! Fixed-width address fields keep the encoding canonical without a length
//! on the wire; the sequence is postcard's varint like every other count.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Cursor, bounded, checked, take};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{FrameType, ObservedAddress};
use crate::varint::varint_len;

const IPV4: u8 = 4;
const IPV6: u8 = 6;

pub(super) use crate::rendezvous::is_unicast_source as is_source;

/// Bytes of an address on the wire: family, address, port.
pub(super) fn address_len(address: &SocketAddr) -> usize {
    let ip = match address {
        SocketAddr::V4(_) => 4,
        SocketAddr::V6(_) => 16,
    };
    1 + ip + 2
}

/// Bytes of the body (after the type byte).
pub(super) fn body_len(frame: &ObservedAddress) -> usize {
    varint_len(frame.sequence) + address_len(&frame.address)
}

/// Refuses what the frame cannot carry.
pub(super) fn validate(frame: &ObservedAddress) -> Result<(), EncodeError> {
    checked("observed address sequence", frame.sequence)?;
    if !is_source(&frame.address) {
        return Err(EncodeError::InvalidAddress(frame.address));
    }
    Ok(())
}

/// Writes the body into `body`, sized by [`body_len`].
pub(super) fn encode_body(frame: &ObservedAddress, body: &mut [u8]) -> Result<(), EncodeError> {
    let mut cursor = Cursor::new(body);
    cursor.varint(frame.sequence)?;
    encode_address(&mut cursor, &frame.address)
}

/// Writes an address: family, address, port.
pub(super) fn encode_address(
    cursor: &mut Cursor<'_>,
    address: &SocketAddr,
) -> Result<(), EncodeError> {
    match address.ip() {
        IpAddr::V4(ip) => {
            cursor.byte(IPV4)?;
            ip.octets().iter().try_for_each(|&b| cursor.byte(b))?;
        }
        IpAddr::V6(ip) => {
            cursor.byte(IPV6)?;
            ip.octets().iter().try_for_each(|&b| cursor.byte(b))?;
        }
    }
    address
        .port()
        .to_be_bytes()
        .iter()
        .try_for_each(|&b| cursor.byte(b))
}

/// Reads a body: a truncated one, an unknown family or an address no packet
/// can come from is refused.
pub(super) fn decode_body(body: &[u8]) -> Result<(ObservedAddress, &[u8]), DecodeError> {
    let ty = FrameType::ObservedAddress;
    let (sequence, rest) = take::<u64>(ty, body)?;
    let sequence = bounded(ty, sequence)?;
    let (address, rest) = decode_address(ty, rest)?;
    Ok((ObservedAddress { sequence, address }, rest))
}

/// Reads an address of a frame of type `ty`: a truncated one, an unknown
/// family or an address no packet can come from is refused.
pub(super) fn decode_address(
    ty: FrameType,
    body: &[u8],
) -> Result<(SocketAddr, &[u8]), DecodeError> {
    let (&family, rest) = body.split_first().ok_or(DecodeError::Truncated(ty))?;
    let (ip, rest) = match family {
        IPV4 => {
            let (octets, rest) = rest
                .split_first_chunk::<4>()
                .ok_or(DecodeError::Truncated(ty))?;
            (IpAddr::V4(Ipv4Addr::from(*octets)), rest)
        }
        IPV6 => {
            let (octets, rest) = rest
                .split_first_chunk::<16>()
                .ok_or(DecodeError::Truncated(ty))?;
            (IpAddr::V6(Ipv6Addr::from(*octets)), rest)
        }
        _ => return Err(DecodeError::Malformed(ty)),
    };
    let (port, rest) = rest
        .split_first_chunk::<2>()
        .ok_or(DecodeError::Truncated(ty))?;
    let address = SocketAddr::new(ip, u16::from_be_bytes(*port));
    if !is_source(&address) {
        return Err(DecodeError::Malformed(ty));
    }
    Ok((address, rest))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use core::net::SocketAddrV6;

    use super::*;
    use crate::frame::Frame;

    fn frame(sequence: u64, address: &str) -> Frame<'static> {
        Frame::ObservedAddress(ObservedAddress {
            sequence,
            address: address.parse().expect("an address"),
        })
    }

    fn encoded(frame: &Frame<'_>) -> Vec<u8> {
        let mut buf = [0u8; 32];
        let len = frame.encode(&mut buf).expect("fits");
        buf[..len].to_vec()
    }

    #[test]
    fn the_layout_is_sequence_family_address_port() {
        assert_eq!(
            encoded(&frame(1, "203.0.113.7:40112")),
            [0x14, 0x01, 0x04, 203, 0, 113, 7, 0x9c, 0xb0]
        );
        let v6 = encoded(&frame(300, "[2001:db8::1]:443"));
        assert_eq!(&v6[..4], [0x14, 0xac, 0x02, 0x06]);
        assert_eq!(v6.len(), 1 + 2 + 1 + 16 + 2);
        assert_eq!(&v6[20..], [0x01, 0xbb]);
    }

    #[test]
    fn addresses_no_packet_comes_from_are_refused_both_ways() {
        for bad in [
            "0.0.0.0:443",
            "203.0.113.7:0",
            "224.0.0.1:443",
            "255.255.255.255:443",
            "[::]:443",
            "[ff02::1]:443",
        ] {
            let address: SocketAddr = bad.parse().expect("an address");
            let mut buf = [0u8; 32];
            assert_eq!(
                frame(1, bad).encode(&mut buf),
                Err(EncodeError::InvalidAddress(address)),
                "{bad}"
            );
            // The same bytes, written by hand, do not decode.
            let mut wire = vec![0x14, 0x01];
            match address.ip() {
                IpAddr::V4(ip) => wire.extend([IPV4].iter().chain(&ip.octets())),
                IpAddr::V6(ip) => wire.extend([IPV6].iter().chain(&ip.octets())),
            }
            wire.extend(address.port().to_be_bytes());
            assert_eq!(
                Frame::decode(&wire),
                Err(DecodeError::Malformed(FrameType::ObservedAddress)),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_unknown_family_a_short_body_or_a_huge_sequence_is_refused() {
        let ty = FrameType::ObservedAddress;
        let good = encoded(&frame(1, "203.0.113.7:40112"));
        for family in [0u8, 5, 7, 41, 255] {
            let mut bad = good.clone();
            bad[2] = family;
            assert_eq!(Frame::decode(&bad), Err(DecodeError::Malformed(ty)));
        }
        for end in 1..good.len() {
            assert_eq!(
                Frame::decode(&good[..end]),
                Err(DecodeError::Truncated(ty)),
                "cut at {end}"
            );
        }
        // 2^62 as a varint: one above VARINT_MAX.
        let mut huge = vec![0x14, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        huge.extend([IPV4, 203, 0, 113, 7, 0x9c, 0xb0]);
        assert_eq!(Frame::decode(&huge), Err(DecodeError::ValueTooLarge(ty)));
        let mut buf = [0u8; 32];
        assert!(
            frame(crate::VARINT_MAX + 1, "203.0.113.7:1")
                .encode(&mut buf)
                .is_err()
        );
        // A sequence written with more bytes than it needs.
        let long = [0x14, 0x81, 0x00, IPV4, 203, 0, 113, 7, 0x9c, 0xb0];
        assert_eq!(Frame::decode(&long), Err(DecodeError::NonCanonical(ty)));
    }

    #[test]
    fn flow_label_and_scope_are_not_carried() {
        let scoped = SocketAddr::V6(SocketAddrV6::new(
            "fe80::1".parse().expect("an address"),
            5000,
            7,
            3,
        ));
        let sent = Frame::ObservedAddress(ObservedAddress {
            sequence: 2,
            address: scoped,
        });
        let Ok(Frame::ObservedAddress(got)) = Frame::decode_exact(&encoded(&sent)) else {
            panic!("decodes");
        };
        assert_eq!(got.address, "[fe80::1]:5000".parse().expect("an address"));
    }

    fn source_address() -> impl Strategy<Value = SocketAddr> {
        let v4 = any::<[u8; 4]>().prop_map(|o| IpAddr::V4(Ipv4Addr::from(o)));
        let v6 = any::<[u8; 16]>().prop_map(|o| IpAddr::V6(Ipv6Addr::from(o)));
        (prop_oneof![v4, v6], 1u16..)
            .prop_map(|(ip, port)| SocketAddr::new(ip, port))
            .prop_filter("a source address", is_source)
    }

    proptest! {
        #[test]
        fn every_source_address_round_trips(sequence in 0..=crate::VARINT_MAX, address in source_address()) {
            let sent = Frame::ObservedAddress(ObservedAddress { sequence, address });
            let bytes = encoded(&sent);
            prop_assert_eq!(bytes.len(), sent.encoded_len());
            prop_assert_eq!(Frame::decode_exact(&bytes), Ok(sent));
        }

        #[test]
        fn any_bytes_after_the_type_decode_to_a_valid_report_or_an_error(body in prop::collection::vec(any::<u8>(), 0..24)) {
            let mut bytes = vec![0x14];
            bytes.extend(&body);
            if let Ok((Frame::ObservedAddress(o), used)) = Frame::decode(&bytes) {
                prop_assert!(is_source(&o.address));
                prop_assert!(o.sequence <= crate::VARINT_MAX);
                prop_assert_eq!(&encoded(&Frame::ObservedAddress(o))[..], &bytes[..used]);
            }
        }
    }
}
