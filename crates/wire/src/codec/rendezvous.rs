//! The rendezvous frames' bodies (layouts in `docs/wire-format.md`):
//! Register is a list of local candidates (a count, one byte, at most 4,
//! then that many addresses as ObservedAddress writes one, none twice);
//! ConnectVia is a fingerprint (32 bytes);
//! IntroductionRefused a fingerprint and a reason (one byte); Introduce the
//! nonce (8 bytes), the fingerprint, the role (one byte, 0 or 1), the start
//! delay (varint, microseconds), an address as ObservedAddress writes one
//! and the peer's candidates as Register carries them.
//! RelayRequest is a fingerprint, RelayRefused as IntroductionRefused, and
//! RelayGrant the slot (4 bytes, big-endian, never 0), the fingerprint and
//! the role.

use super::observed_address::{address_len, decode_address, encode_address, is_source};
use super::{Cursor, take};
use crate::error::{DecodeError, EncodeError};
use crate::frame::FrameType;
use crate::rendezvous::{
    Candidates, ConnectVia, FINGERPRINT_LEN, Introduce, KeyFingerprint, MAX_CANDIDATES,
    MAX_START_DELAY, RefusalReason, Register, RelayGrant,
};
use crate::varint::varint_len;

fn micros(delay: core::time::Duration) -> u64 {
    u64::try_from(delay.as_micros()).unwrap_or(u64::MAX)
}

pub(super) fn introduce_len(frame: &Introduce) -> usize {
    8 + FINGERPRINT_LEN
        + 1
        + varint_len(micros(frame.start_delay))
        + address_len(&frame.address)
        + candidates_len(&frame.candidates)
}

/// Bytes of a candidate list: its count and the addresses.
pub(super) fn candidates_len(candidates: &Candidates) -> usize {
    1 + candidates.iter().map(|a| address_len(&a)).sum::<usize>()
}

fn encode_candidates(cursor: &mut Cursor<'_>, candidates: &Candidates) -> Result<(), EncodeError> {
    // At most MAX_CANDIDATES: a count that fits a byte.
    cursor.byte(candidates.len() as u8)?;
    candidates
        .iter()
        .try_for_each(|address| encode_address(cursor, &address))
}

/// Reads a candidate list of a frame of type `ty`: more than
/// [`MAX_CANDIDATES`], an address twice or one no packet can come from is
/// refused.
fn decode_candidates(ty: FrameType, body: &[u8]) -> Result<(Candidates, &[u8]), DecodeError> {
    let (&count, mut rest) = body.split_first().ok_or(DecodeError::Truncated(ty))?;
    if usize::from(count) > MAX_CANDIDATES {
        return Err(DecodeError::Malformed(ty));
    }
    let mut candidates = Candidates::default();
    for _ in 0..count {
        let (address, after) = decode_address(ty, rest)?;
        if !candidates.push(address) {
            return Err(DecodeError::Malformed(ty));
        }
        rest = after;
    }
    Ok((candidates, rest))
}

pub(super) fn encode_register(frame: &Register, body: &mut [u8]) -> Result<(), EncodeError> {
    encode_candidates(&mut Cursor::new(body), &frame.candidates)
}

pub(super) fn decode_register(body: &[u8]) -> Result<(Register, &[u8]), DecodeError> {
    let (candidates, rest) = decode_candidates(FrameType::Register, body)?;
    Ok((Register { candidates }, rest))
}

pub(super) fn validate_introduce(frame: &Introduce) -> Result<(), EncodeError> {
    if frame.start_delay > MAX_START_DELAY {
        return Err(EncodeError::ValueTooLarge {
            field: "start delay (µs)",
            value: micros(frame.start_delay),
        });
    }
    if !is_source(&frame.address) {
        return Err(EncodeError::InvalidAddress(frame.address));
    }
    Ok(())
}

fn fixed(cursor: &mut Cursor<'_>, bytes: &[u8]) -> Result<(), EncodeError> {
    bytes.iter().try_for_each(|&b| cursor.byte(b))
}

pub(super) fn validate_grant(frame: &RelayGrant) -> Result<(), EncodeError> {
    if frame.slot == 0 {
        return Err(EncodeError::Zero("relay slot"));
    }
    Ok(())
}

pub(super) fn encode_fingerprint(
    peer: &KeyFingerprint,
    body: &mut [u8],
) -> Result<(), EncodeError> {
    fixed(&mut Cursor::new(body), &peer.0)
}

pub(super) fn encode_connect_via(frame: &ConnectVia, body: &mut [u8]) -> Result<(), EncodeError> {
    encode_fingerprint(&frame.peer, body)
}

pub(super) fn encode_refused(
    peer: &KeyFingerprint,
    reason: RefusalReason,
    body: &mut [u8],
) -> Result<(), EncodeError> {
    let mut cursor = Cursor::new(body);
    fixed(&mut cursor, &peer.0)?;
    cursor.byte(reason as u8)
}

pub(super) fn encode_grant(frame: &RelayGrant, body: &mut [u8]) -> Result<(), EncodeError> {
    let mut cursor = Cursor::new(body);
    fixed(&mut cursor, &frame.slot.to_be_bytes())?;
    fixed(&mut cursor, &frame.peer.0)?;
    cursor.byte(u8::from(frame.initiator))
}

fn role(ty: FrameType, byte: u8) -> Result<bool, DecodeError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::Malformed(ty)),
    }
}

pub(super) fn decode_grant(body: &[u8]) -> Result<(RelayGrant, &[u8]), DecodeError> {
    let ty = FrameType::RelayGrant;
    let (slot, rest) = body
        .split_first_chunk::<4>()
        .ok_or(DecodeError::Truncated(ty))?;
    let (peer, rest) = fingerprint(ty, rest)?;
    let (&initiator, rest) = rest.split_first().ok_or(DecodeError::Truncated(ty))?;
    let slot = u32::from_be_bytes(*slot);
    if slot == 0 {
        return Err(DecodeError::Malformed(ty));
    }
    let initiator = role(ty, initiator)?;
    Ok((
        RelayGrant {
            slot,
            peer,
            initiator,
        },
        rest,
    ))
}

pub(super) fn encode_introduce(frame: &Introduce, body: &mut [u8]) -> Result<(), EncodeError> {
    let mut cursor = Cursor::new(body);
    fixed(&mut cursor, &frame.nonce)?;
    fixed(&mut cursor, &frame.peer.0)?;
    cursor.byte(u8::from(frame.initiator))?;
    cursor.varint(micros(frame.start_delay))?;
    encode_address(&mut cursor, &frame.address)?;
    encode_candidates(&mut cursor, &frame.candidates)
}

pub(super) fn fingerprint(
    ty: FrameType,
    body: &[u8],
) -> Result<(KeyFingerprint, &[u8]), DecodeError> {
    let (peer, rest) = body
        .split_first_chunk::<FINGERPRINT_LEN>()
        .ok_or(DecodeError::Truncated(ty))?;
    Ok((KeyFingerprint(*peer), rest))
}

pub(super) fn decode_connect_via(body: &[u8]) -> Result<(ConnectVia, &[u8]), DecodeError> {
    let (peer, rest) = fingerprint(FrameType::ConnectVia, body)?;
    Ok((ConnectVia { peer }, rest))
}

/// The body of an IntroductionRefused or a RelayRefused (`ty`).
pub(super) fn decode_refused(
    ty: FrameType,
    body: &[u8],
) -> Result<((KeyFingerprint, RefusalReason), &[u8]), DecodeError> {
    let (peer, rest) = fingerprint(ty, body)?;
    let (&reason, rest) = rest.split_first().ok_or(DecodeError::Truncated(ty))?;
    let reason = RefusalReason::from_byte(reason).ok_or(DecodeError::Malformed(ty))?;
    Ok(((peer, reason), rest))
}

pub(super) fn decode_introduce(body: &[u8]) -> Result<(Introduce, &[u8]), DecodeError> {
    let ty = FrameType::Introduce;
    let (nonce, rest) = body
        .split_first_chunk::<8>()
        .ok_or(DecodeError::Truncated(ty))?;
    let (peer, rest) = fingerprint(ty, rest)?;
    let (&initiator, rest) = rest.split_first().ok_or(DecodeError::Truncated(ty))?;
    let initiator = role(ty, initiator)?;
    let (delay_us, rest) = take::<u64>(ty, rest)?;
    let start_delay = core::time::Duration::from_micros(delay_us);
    if start_delay > MAX_START_DELAY {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    let (address, rest) = decode_address(ty, rest)?;
    let (candidates, rest) = decode_candidates(ty, rest)?;
    let frame = Introduce {
        nonce: *nonce,
        peer,
        initiator,
        start_delay,
        address,
        candidates,
    };
    Ok((frame, rest))
}

#[cfg(test)]
mod tests {
    use core::net::SocketAddr;
    use core::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::frame::Frame;
    use crate::rendezvous::{IntroductionRefused, Register, RelayRefused, RelayRequest};

    fn encoded(frame: &Frame<'_>) -> Vec<u8> {
        let mut buf = [0u8; 256];
        let len = frame.encode(&mut buf).expect("fits");
        assert_eq!(len, frame.encoded_len());
        buf[..len].to_vec()
    }

    fn introduce() -> Introduce {
        Introduce {
            nonce: [1, 2, 3, 4, 5, 6, 7, 8],
            peer: KeyFingerprint([0xab; 32]),
            initiator: true,
            start_delay: Duration::from_millis(20),
            address: "203.0.113.7:40112".parse().expect("an address"),
            candidates: Candidates::default(),
        }
    }

    fn lan() -> Candidates {
        let mut candidates = Candidates::default();
        candidates.push("192.168.1.2:4000".parse().expect("an address"));
        candidates.push("[fd00::2]:4000".parse().expect("an address"));
        candidates
    }

    #[test]
    fn candidates_are_a_count_then_addresses() {
        let register = encoded(&Frame::Register(Register { candidates: lan() }));
        assert_eq!(&register[..9], [0x16, 2, 4, 192, 168, 1, 2, 0x0f, 0xa0]);
        assert_eq!((register.len(), register[9]), (9 + 19, 6));
        let mut intro = introduce();
        intro.candidates = lan();
        let bytes = encoded(&Frame::Introduce(intro));
        assert_eq!(
            bytes.len(),
            encoded(&Frame::Introduce(introduce())).len() + 26
        );
        assert_eq!(Frame::decode_exact(&bytes), Ok(Frame::Introduce(intro)));
    }

    #[test]
    fn too_many_duplicate_or_unusable_candidates_are_refused() {
        let ty = FrameType::Register;
        let one = [4, 192, 168, 1, 2, 0x0f, 0xa0];
        let five = [&[0x16, 5][..], &one, &one, &one, &one, &one].concat();
        assert_eq!(Frame::decode(&five), Err(DecodeError::Malformed(ty)));
        let twice = [&[0x16, 2][..], &one, &one].concat();
        assert_eq!(Frame::decode(&twice), Err(DecodeError::Malformed(ty)));
        for ip in [[0, 0, 0, 0], [224, 0, 0, 1], [255, 255, 255, 255]] {
            let bad = [&[0x16, 1, 4][..], &ip, &[0x0f, 0xa0]].concat();
            assert_eq!(Frame::decode(&bad), Err(DecodeError::Malformed(ty)));
        }
        assert_eq!(Frame::decode(&[0x16]), Err(DecodeError::Truncated(ty)));
        assert_eq!(
            Frame::decode(&[0x16, 1, 4, 192]),
            Err(DecodeError::Truncated(ty))
        );
    }

    #[test]
    fn the_layouts_are_as_documented() {
        assert_eq!(encoded(&Frame::Register(Register::default())), [0x16, 0]);
        let via = encoded(&Frame::ConnectVia(ConnectVia {
            peer: KeyFingerprint([0xab; 32]),
        }));
        assert_eq!(via.len(), 33);
        assert_eq!((via[0], via[1], via[32]), (0x17, 0xab, 0xab));
        let intro = encoded(&Frame::Introduce(introduce()));
        assert_eq!(&intro[..9], [0x18, 1, 2, 3, 4, 5, 6, 7, 8]);
        // Role, 20 000 µs as a varint, then the address.
        assert_eq!(
            &intro[41..],
            [1, 0xa0, 0x9c, 0x01, 0x04, 203, 0, 113, 7, 0x9c, 0xb0, 0]
        );
        let refused = encoded(&Frame::IntroductionRefused(IntroductionRefused {
            peer: KeyFingerprint([0xab; 32]),
            reason: RefusalReason::UnknownPeer,
        }));
        assert_eq!((refused[0], refused.len(), refused[33]), (0x19, 34, 1));
        let request = encoded(&Frame::RelayRequest(RelayRequest {
            peer: KeyFingerprint([0xab; 32]),
        }));
        assert_eq!((request[0], request.len(), request[32]), (0x1a, 33, 0xab));
        let grant = encoded(&Frame::RelayGrant(RelayGrant {
            slot: 0x0102_0304,
            peer: KeyFingerprint([0xab; 32]),
            initiator: true,
        }));
        assert_eq!(&grant[..6], [0x1b, 1, 2, 3, 4, 0xab]);
        assert_eq!((grant.len(), grant[37]), (38, 1));
        let full = encoded(&Frame::RelayRefused(RelayRefused {
            peer: KeyFingerprint([0xab; 32]),
            reason: RefusalReason::RelayFull,
        }));
        assert_eq!((full[0], full.len(), full[33]), (0x1c, 34, 4));
    }

    #[test]
    fn a_grant_of_slot_zero_or_a_bad_role_is_refused() {
        let grant = RelayGrant {
            slot: 0,
            peer: KeyFingerprint([1; 32]),
            initiator: false,
        };
        let mut buf = [0u8; 64];
        assert!(Frame::RelayGrant(grant).encode(&mut buf).is_err());
        let ty = FrameType::RelayGrant;
        let zero = [&[0x1b, 0, 0, 0, 0][..], &[1; 32], &[0]].concat();
        assert_eq!(Frame::decode(&zero), Err(DecodeError::Malformed(ty)));
        let bad_role = [&[0x1b, 0, 0, 0, 1][..], &[1; 32], &[2]].concat();
        assert_eq!(Frame::decode(&bad_role), Err(DecodeError::Malformed(ty)));
        assert_eq!(
            Frame::decode(&bad_role[..37]),
            Err(DecodeError::Truncated(ty))
        );
    }

    #[test]
    fn a_bad_role_reason_delay_or_address_or_a_short_body_is_refused() {
        let good = encoded(&Frame::Introduce(introduce()));
        let ty = FrameType::Introduce;
        let mut bad = good.clone();
        bad[41] = 2;
        assert_eq!(Frame::decode(&bad), Err(DecodeError::Malformed(ty)));
        for end in 1..good.len() {
            assert_eq!(
                Frame::decode(&good[..end]),
                Err(DecodeError::Truncated(ty)),
                "cut at {end}"
            );
        }
        let mut late = introduce();
        late.start_delay = MAX_START_DELAY + Duration::from_micros(1);
        let mut buf = [0u8; 96];
        assert!(Frame::Introduce(late).encode(&mut buf).is_err());
        late.start_delay = MAX_START_DELAY;
        let len = Frame::Introduce(late).encode(&mut buf).expect("fits");
        // One microsecond more, written by hand: 10 000 001 as a varint.
        let mut over = buf[..len].to_vec();
        over.splice(42..46, [0x81, 0xad, 0xe2, 0x04]);
        assert_eq!(Frame::decode(&over), Err(DecodeError::ValueTooLarge(ty)));
        let mut nowhere = introduce();
        nowhere.address = "0.0.0.0:1".parse().expect("an address");
        assert!(Frame::Introduce(nowhere).encode(&mut buf).is_err());
        let refused = [&[0x19][..], &[0xab; 32], &[9]].concat();
        assert_eq!(
            Frame::decode(&refused),
            Err(DecodeError::Malformed(FrameType::IntroductionRefused))
        );
        assert_eq!(
            Frame::decode(&[0x17; 20]),
            Err(DecodeError::Truncated(FrameType::ConnectVia))
        );
    }

    fn address() -> impl Strategy<Value = SocketAddr> {
        (any::<[u8; 4]>(), 1..=u16::MAX)
            .prop_filter("a unicast address", |(ip, _)| ip[0] != 0 && ip[0] < 224)
            .prop_map(|(ip, port)| SocketAddr::from((ip, port)))
    }

    proptest! {
        #[test]
        fn every_introduction_round_trips(
            nonce in any::<[u8; 8]>(),
            peer in any::<[u8; 32]>(),
            initiator in any::<bool>(),
            delay_us in 0..=MAX_START_DELAY.as_micros() as u64,
            address in address(),
            candidates in crate::rendezvous::tests::candidates(),
        ) {
            let sent = Frame::Introduce(Introduce {
                nonce,
                peer: KeyFingerprint(peer),
                initiator,
                start_delay: Duration::from_micros(delay_us),
                address,
                candidates,
            });
            let bytes = encoded(&sent);
            prop_assert_eq!(Frame::decode_exact(&bytes), Ok(sent));
        }

        #[test]
        fn any_body_decodes_to_a_frame_that_encodes_back_or_an_error(
            ty in 0x16u8..=0x1c,
            body in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = vec![ty];
            bytes.extend(&body);
            if let Ok((frame, used)) = Frame::decode(&bytes) {
                prop_assert_eq!(&encoded(&frame)[..], &bytes[..used]);
            }
        }
    }
}
