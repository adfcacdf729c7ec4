//! The frames on every packet's path, read by hand: Ping, Ack, Stream,
//! Message, Datagram and ResetStream.
//!
//! A peer decides how many frames a packet holds, so their decoding is
//! paid per attacker byte: through serde's visitors a frame of three bytes
//! cost about 250 instructions, most of the work of an empty datagram.
//! Here each field is read where it lies, in the layout postcard gives it
//! (LEB128 varints, a byte for a bool, a varint length before a byte
//! string).
//!
//! Postcard stays the definition of the wire format:
//! [`Frame::decode_with_postcard`] reads every frame type, the rare ones for
//! [`Frame::decode`] too, and a property test holds this reader to it on
//! random and mutated inputs (the same frame, or the same error). So the
//! errors come in postcard's order: a field postcard cannot read first
//! (`Truncated` at the end of the bytes, `Malformed` otherwise), then values
//! out of bounds, then a non-minimal encoding.

use core::time::Duration;

use crate::error::DecodeError;
use crate::frame::{
    Ack, AckFrameRanges, Datagram, Frame, FrameType, MAX_ACK_RANGES, Message, ResetStream, Stream,
};
use crate::varint::VARINT_MAX;

/// Why a field could not be read, in postcard's two classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The bytes ended inside the field (postcard's `DeserializeUnexpectedEnd`).
    End,
    /// Anything else: a varint longer than a `u64`, a bool not 0 or 1.
    Bad,
}

impl ReadError {
    /// The error of a frame of type `ty` whose body failed so.
    const fn in_frame(self, ty: FrameType) -> DecodeError {
        match self {
            Self::End => DecodeError::Truncated(ty),
            Self::Bad => DecodeError::Malformed(ty),
        }
    }
}

/// Reads fields off the front of a frame body, remembering whether any
/// varint was longer than it needed to be.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
    non_minimal: bool,
}

impl<'a> Reader<'a> {
    pub(crate) const fn new(bytes: &'a [u8]) -> Self {
        Self {
            rest: bytes,
            non_minimal: false,
        }
    }

    /// The bytes not read yet.
    pub(crate) const fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Whether every varint read so far had its minimal encoding: a
    /// LEB128 encoding is longer than needed exactly when it has more than
    /// one byte and its last is zero.
    pub(crate) const fn is_minimal(&self) -> bool {
        !self.non_minimal
    }

    /// A `u64` varint as postcard reads it: at most ten bytes, the tenth
    /// holding one bit. Varints of one or two bytes (most of a small
    /// frame's fields: numbers up to 16 383) are read here, inline; longer
    /// ones out of line.
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Result<u64, ReadError> {
        match *self.rest {
            [first, ref after @ ..] if first < 0x80 => {
                self.rest = after;
                Ok(u64::from(first))
            }
            [first, second, ref after @ ..] if second < 0x80 => {
                self.non_minimal |= second == 0;
                self.rest = after;
                Ok(u64::from(first & 0x7f) | (u64::from(second) << 7))
            }
            _ => self.long_varint(),
        }
    }

    /// A varint of more than two bytes (or one cut short).
    #[inline(never)]
    fn long_varint(&mut self) -> Result<u64, ReadError> {
        let &first = self.rest.first().ok_or(ReadError::End)?;
        let mut value = u64::from(first & 0x7f);
        for i in 1..10 {
            let byte = *self.rest.get(i).ok_or(ReadError::End)?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                if i == 9 && byte > 1 {
                    return Err(ReadError::Bad);
                }
                self.non_minimal |= byte == 0;
                self.rest = &self.rest[i + 1..];
                return Ok(value);
            }
        }
        Err(ReadError::Bad)
    }

    #[inline]
    fn bool(&mut self) -> Result<bool, ReadError> {
        let (&byte, after) = self.rest.split_first().ok_or(ReadError::End)?;
        let value = match byte {
            0 => false,
            1 => true,
            _ => return Err(ReadError::Bad),
        };
        self.rest = after;
        Ok(value)
    }

    /// A byte string: its length, then the bytes, borrowed.
    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], ReadError> {
        let len = self.varint()?;
        // A length no slice can have is past the end of any.
        let len = usize::try_from(len).map_err(|_| ReadError::End)?;
        if len > self.rest.len() {
            return Err(ReadError::End);
        }
        let (data, after) = self.rest.split_at(len);
        self.rest = after;
        Ok(data)
    }
}

/// Reads one `(gap, length)` pair of an ACK frame, refusing a non-minimal
/// encoding. Two bytes under 0x80 are the whole pair, minimal: one look,
/// inline (a peer chooses how many pairs an ACK holds); anything else is
/// read out of line.
#[inline(always)]
pub(crate) fn ack_pair(bytes: &[u8]) -> Result<((u64, u64), &[u8]), DecodeError> {
    if let [gap, length, ref rest @ ..] = *bytes
        && gap < 0x80
        && length < 0x80
    {
        return Ok(((u64::from(gap), u64::from(length)), rest));
    }
    long_ack_pair(bytes)
}

/// An ACK frame's `(gap, length)` pair with a varint of more than one byte
/// (or one cut short).
#[inline(never)]
fn long_ack_pair(bytes: &[u8]) -> Result<((u64, u64), &[u8]), DecodeError> {
    let ty = FrameType::Ack;
    let mut r = Reader::new(bytes);
    let gap = r.varint().map_err(|e| e.in_frame(ty))?;
    let length = r.varint().map_err(|e| e.in_frame(ty))?;
    // The pairs are kept as raw bytes, so each is checked for minimal
    // varints here.
    if !r.is_minimal() {
        return Err(DecodeError::NonCanonical(ty));
    }
    Ok(((gap, length), r.rest()))
}

/// The frame of type byte `ty` with body `body` (the bytes after its type),
/// and the bytes after it; `None` for a type this module leaves to
/// postcard. Matched on the byte itself, so a hot frame's type is looked
/// at once.
#[inline]
pub(super) fn hot_frame(ty: u8, body: &[u8]) -> Option<Result<(Frame<'_>, &[u8]), DecodeError>> {
    Some(match ty {
        PING => Ok((Frame::Ping, body)),
        STREAM => stream(body).map(|(f, rest)| (Frame::Stream(f), rest)),
        MESSAGE => message(body).map(|(f, rest)| (Frame::Message(f), rest)),
        DATAGRAM => datagram(body).map(|(f, rest)| (Frame::Datagram(f), rest)),
        ACK => ack(body).map(|(f, rest)| (Frame::Ack(f), rest)),
        RESET_STREAM => reset_stream(body).map(|(f, rest)| (Frame::ResetStream(f), rest)),
        _ => return None,
    })
}

/// The type bytes of the frames read here.
pub(super) const PING: u8 = FrameType::Ping as u8;
pub(super) const ACK: u8 = FrameType::Ack as u8;
pub(super) const STREAM: u8 = FrameType::Stream as u8;
pub(super) const MESSAGE: u8 = FrameType::Message as u8;
pub(super) const DATAGRAM: u8 = FrameType::Datagram as u8;
pub(super) const RESET_STREAM: u8 = FrameType::ResetStream as u8;

/// Refuses a frame whose varints were not minimal, else gives it.
#[inline]
fn canonical<'a, F>(ty: FrameType, r: &Reader<'a>, frame: F) -> Result<(F, &'a [u8]), DecodeError> {
    if r.is_minimal() {
        Ok((frame, r.rest()))
    } else {
        Err(DecodeError::NonCanonical(ty))
    }
}

#[inline]
pub(super) fn stream(body: &[u8]) -> Result<(Stream<'_>, &[u8]), DecodeError> {
    let ty = FrameType::Stream;
    let mut r = Reader::new(body);
    let (id, offset, fin, data) = (|| Ok((r.varint()?, r.varint()?, r.bool()?, r.bytes()?)))()
        .map_err(|e: ReadError| e.in_frame(ty))?;
    if id > VARINT_MAX || offset.saturating_add(data.len() as u64) > VARINT_MAX {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    let frame = Stream {
        id,
        offset,
        fin,
        data,
    };
    canonical(ty, &r, frame)
}

#[inline]
pub(super) fn message(body: &[u8]) -> Result<(Message<'_>, &[u8]), DecodeError> {
    let ty = FrameType::Message;
    let mut r = Reader::new(body);
    let (id, data) = (|| Ok((r.varint()?, r.bytes()?)))().map_err(|e: ReadError| e.in_frame(ty))?;
    if id > VARINT_MAX {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    canonical(ty, &r, Message { id, data })
}

#[inline]
pub(super) fn datagram(body: &[u8]) -> Result<(Datagram<'_>, &[u8]), DecodeError> {
    let ty = FrameType::Datagram;
    let mut r = Reader::new(body);
    let data = r.bytes().map_err(|e| e.in_frame(ty))?;
    canonical(ty, &r, Datagram { data })
}

fn reset_stream(body: &[u8]) -> Result<(ResetStream, &[u8]), DecodeError> {
    let ty = FrameType::ResetStream;
    let mut r = Reader::new(body);
    let (id, error_code, final_size) = (|| Ok((r.varint()?, r.varint()?, r.varint()?)))()
        .map_err(|e: ReadError| e.in_frame(ty))?;
    if id > VARINT_MAX || error_code > VARINT_MAX || final_size > VARINT_MAX {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    let frame = ResetStream {
        id,
        error_code,
        final_size,
    };
    canonical(ty, &r, frame)
}

pub(super) fn ack(body: &[u8]) -> Result<(Ack<'_>, &[u8]), DecodeError> {
    let (fields, after_head) = ack_head(body)?;
    let (pairs, rest) = ack_ranges(&fields, after_head, |_, _| {})?;
    let ranges =
        AckFrameRanges::from_wire(fields.largest, fields.first_range, fields.additional, pairs);
    Ok((fields.with(ranges), rest))
}

/// The ACK frame whose head is `fields` and whose ranges start `pairs`,
/// the ranges kept in `kept` as they are validated, so that whoever acts
/// on it reads each once (a peer chooses how many an ACK holds). `kept`
/// holds at least [`AckFields::ranges`] of them.
#[inline(always)]
pub(super) fn ack_kept<'a: 'k, 'k>(
    fields: AckFields,
    pairs: &'a [u8],
    kept: &'k mut [(u64, u64)],
) -> Result<(Ack<'k>, &'a [u8]), DecodeError> {
    let room = kept.len();
    let mut slots = kept.iter_mut();
    let (pairs, rest) = ack_ranges(&fields, pairs, |start, end| {
        if let Some(slot) = slots.next() {
            *slot = (start, end);
        }
    })?;
    let len = room - slots.len();
    let ranges = AckFrameRanges::decoded(&kept[..len], pairs);
    Ok((fields.with(ranges), rest))
}

/// An ACK frame's fields but its additional ranges.
pub(super) struct AckFields {
    largest: u64,
    first_range: u64,
    /// How many ranges follow the first (below [`MAX_ACK_RANGES`]).
    additional: usize,
    ack_delay_us: u64,
    receive_time_us: u64,
    /// Whether its varints were minimal (refused only after the ranges
    /// are read, in postcard's order).
    minimal: bool,
}

impl AckFields {
    /// How many ranges the frame holds (1 to [`MAX_ACK_RANGES`]).
    pub(super) const fn ranges(&self) -> usize {
        1 + self.additional
    }

    fn with(self, ranges: AckFrameRanges<'_>) -> Ack<'_> {
        Ack {
            ranges,
            ack_delay: Duration::from_micros(self.ack_delay_us),
            receive_time: Duration::from_micros(self.receive_time_us),
        }
    }
}

/// An ACK frame's fields before its `(gap, length)` pairs, and the bytes
/// after them.
#[inline(always)]
pub(super) fn ack_head(body: &[u8]) -> Result<(AckFields, &[u8]), DecodeError> {
    let ty = FrameType::Ack;
    let mut head = Reader::new(body);
    let (largest, ack_delay_us, receive_time_us, additional, first_range) = (|| {
        Ok((
            head.varint()?,
            head.varint()?,
            head.varint()?,
            head.varint()?,
            head.varint()?,
        ))
    })()
    .map_err(|e: ReadError| e.in_frame(ty))?;
    if largest > VARINT_MAX || ack_delay_us > VARINT_MAX || receive_time_us > VARINT_MAX {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    if additional >= MAX_ACK_RANGES as u64 {
        return Err(DecodeError::InvalidAckRanges("more than MAX_ACK_RANGES"));
    }
    let fields = AckFields {
        largest,
        first_range,
        // Bounded by MAX_ACK_RANGES above.
        additional: additional as usize,
        ack_delay_us,
        receive_time_us,
        minimal: head.is_minimal(),
    };
    Ok((fields, head.rest()))
}

/// Reads and validates the ranges of the ACK frame whose head is
/// `fields`, its pairs starting `bytes`, handing each, largest first, to
/// `range` as `(start, end)`; returns the bytes of its pairs and the
/// bytes after it.
#[inline(always)]
fn ack_ranges<'a>(
    fields: &AckFields,
    bytes: &'a [u8],
    mut range: impl FnMut(u64, u64),
) -> Result<(&'a [u8], &'a [u8]), DecodeError> {
    let mut smallest =
        fields
            .largest
            .checked_sub(fields.first_range)
            .ok_or(DecodeError::InvalidAckRanges(
                "first range below packet number 0",
            ))?;
    range(smallest, fields.largest);
    let mut rest = bytes;
    for _ in 0..fields.additional {
        let ((gap, length), after) = ack_pair(rest)?;
        let (start, end) = super::next_ack_range(smallest, gap, length)
            .ok_or(DecodeError::InvalidAckRanges("range below packet number 0"))?
            .into_inner();
        range(start, end);
        smallest = start;
        rest = after;
    }
    if !fields.minimal {
        return Err(DecodeError::NonCanonical(FrameType::Ack));
    }
    Ok((&bytes[..bytes.len() - rest.len()], rest))
}

#[cfg(test)]
mod tests {
    use core::ops::RangeInclusive;
    use core::time::Duration;

    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::super::tests::{ack_ranges, any_frame, encode_all, encode_mutated};
    use crate::codec::{FrameHandler, Frames};
    use crate::error::DecodeError;
    use crate::frame::{Ack, AckFrameRanges, Datagram, Frame, FrameType, Message, Stream};

    /// [`Frame::decode`] gives what postcard gives, frame by frame: the
    /// same frame, or the same error.
    fn check_agrees_with_postcard(bytes: &[u8]) -> Result<(), TestCaseError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let fast = Frame::decode(rest);
            prop_assert_eq!(&fast, &Frame::decode_with_postcard(rest));
            match fast {
                Ok((_, used)) => rest = &rest[used..],
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// A frame as [`Frames::handle`] hands it over, an ACK's ranges copied
    /// out (they live only for the call).
    #[derive(Debug, PartialEq)]
    enum Handed<'a> {
        Frame(Frame<'a>),
        Ack {
            ranges: Vec<RangeInclusive<u64>>,
            ack_delay: Duration,
            receive_time: Duration,
        },
    }

    impl<'a> Handed<'a> {
        fn ack(frame: &Ack<'_>) -> Self {
            Self::Ack {
                ranges: frame.ranges.iter().collect(),
                ack_delay: frame.ack_delay,
                receive_time: frame.receive_time,
            }
        }

        fn from_frame(frame: Frame<'a>) -> Self {
            match frame {
                Frame::Ack(ack) => Self::ack(&ack),
                frame => Self::Frame(frame),
            }
        }
    }

    /// Collects what [`Frames::handle`] hands over, counting the frames
    /// that came through a method of their own.
    #[derive(Default)]
    struct Collect<'a> {
        frames: Vec<Handed<'a>>,
        own_method: usize,
    }

    impl<'a> Collect<'a> {
        fn own(&mut self, frame: Frame<'a>) -> Result<(), DecodeError> {
            self.own_method += 1;
            self.on_frame(frame)
        }
    }

    impl<'a> FrameHandler<'a> for Collect<'a> {
        type Stop = DecodeError;

        fn on_frame(&mut self, frame: Frame<'a>) -> Result<(), DecodeError> {
            self.frames.push(Handed::from_frame(frame));
            Ok(())
        }

        fn on_ping(&mut self) -> Result<(), DecodeError> {
            self.own(Frame::Ping)
        }

        /// Records the ranges as the decoder kept them.
        fn on_ack(&mut self, frame: Ack<'_>) -> Result<(), DecodeError> {
            self.own_method += 1;
            let kept = frame.ranges.kept().expect("a handed ACK keeps its ranges");
            self.frames.push(Handed::Ack {
                ranges: kept.iter().map(|&(start, end)| start..=end).collect(),
                ack_delay: frame.ack_delay,
                receive_time: frame.receive_time,
            });
            Ok(())
        }

        fn on_stream(&mut self, frame: Stream<'a>) -> Result<(), DecodeError> {
            self.own(Frame::Stream(frame))
        }

        fn on_message(&mut self, frame: Message<'a>) -> Result<(), DecodeError> {
            self.own(Frame::Message(frame))
        }

        fn on_datagram(&mut self, frame: Datagram<'a>) -> Result<(), DecodeError> {
            self.own(Frame::Datagram(frame))
        }
    }

    /// [`Frames::handle`] hands over the frames the iterator yields, and
    /// stops with the error it ends on.
    fn check_handle_agrees_with_iterator(bytes: &[u8]) -> Result<(), TestCaseError> {
        let mut iterated = Vec::new();
        let mut error = None;
        for frame in Frames::new(bytes) {
            match frame {
                Ok(frame) => iterated.push(frame),
                Err(e) => error = Some(e),
            }
        }
        let mut handled = Collect::default();
        let result = Frames::new(bytes).handle(&mut handled);
        let own_method = iterated
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    Frame::Ping
                        | Frame::Ack(_)
                        | Frame::Stream(_)
                        | Frame::Message(_)
                        | Frame::Datagram(_)
                )
            })
            .count();
        let iterated: Vec<_> = iterated.into_iter().map(Handed::from_frame).collect();
        prop_assert_eq!(handled.frames, iterated);
        prop_assert_eq!(handled.own_method, own_method);
        prop_assert_eq!(result.err(), error);
        Ok(())
    }

    /// A varint as a peer may write it: up to ten bytes, minimal or not,
    /// its last byte anything (often ten bytes, often a last byte of 0 to
    /// 3: the edges of postcard's reading).
    fn raw_varint() -> impl Strategy<Value = Vec<u8>> {
        (
            vec(0x80u8..=0xff, 9),
            prop_oneof![Just(9usize), 0usize..10],
            prop_oneof![0u8..=3, any::<u8>()],
        )
            .prop_map(|(mut bytes, len, last)| {
                bytes.truncate(len);
                bytes.push(last);
                bytes
            })
    }

    /// A frame of a type read by hand, its body made of raw varints and
    /// loose bytes.
    fn hot_frame_bytes() -> impl Strategy<Value = Vec<u8>> {
        let ty = prop::sample::select(vec![
            FrameType::Ping,
            FrameType::Ack,
            FrameType::Stream,
            FrameType::Message,
            FrameType::Datagram,
            FrameType::ResetStream,
        ]);
        let field = prop_oneof![raw_varint(), vec(any::<u8>(), 0..4)];
        (ty, vec(field, 0..8)).prop_map(|(ty, fields)| {
            let mut bytes = vec![ty as u8];
            bytes.extend(fields.into_iter().flatten());
            bytes
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn the_hand_reader_agrees_with_postcard_on_valid_frames(frames in vec(any_frame(), 1..8)) {
            let bytes = encode_all(&frames);
            check_agrees_with_postcard(&bytes)?;
            check_handle_agrees_with_iterator(&bytes)?;
        }

        #[test]
        fn an_ack_handed_over_holds_the_ranges_it_was_encoded_with(
            ranges in ack_ranges(),
            delay_us in 0u64..1 << 40,
        ) {
            let frame = Frame::Ack(Ack {
                ranges: AckFrameRanges::new(&ranges).expect("generated ranges are valid"),
                ack_delay: Duration::from_micros(delay_us),
                receive_time: Duration::ZERO,
            });
            let mut bytes = vec![0; frame.encoded_len()];
            let len = frame.encode(&mut bytes).expect("room for the frame");
            let mut handled = Collect::default();
            Frames::new(&bytes[..len]).handle(&mut handled).expect("a valid frame");
            let expected = Handed::Ack {
                ranges,
                ack_delay: Duration::from_micros(delay_us),
                receive_time: Duration::ZERO,
            };
            prop_assert_eq!(handled.frames, vec![expected]);
        }

        #[test]
        fn the_hand_reader_agrees_with_postcard_on_mutated_frames(
            frames in vec(any_frame(), 1..6),
            mutations in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = encode_mutated(&frames, &mutations);
            let cut = cut.index(bytes.len() + 1);
            check_agrees_with_postcard(&bytes[..cut])?;
            check_handle_agrees_with_iterator(&bytes[..cut])?;
        }

        #[test]
        fn the_hand_reader_agrees_with_postcard_on_raw_varints(bytes in hot_frame_bytes()) {
            check_agrees_with_postcard(&bytes)?;
            check_handle_agrees_with_iterator(&bytes)?;
        }

        #[test]
        fn the_hand_reader_agrees_with_postcard_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..64)) {
            check_agrees_with_postcard(&bytes)?;
            check_handle_agrees_with_iterator(&bytes)?;
        }
    }

    #[test]
    fn varints_at_the_edges_of_postcard_read_alike() {
        let ten_ones = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let message = |number: &[u8], tail: &[u8]| [&[0x04][..], number, tail].concat();
        let cases: [(Vec<u8>, Result<usize, DecodeError>); 8] = [
            // Datagram lengths: minimal, non-minimal, cut inside, past the end.
            (vec![0x10, 0x01, 0xaa], Ok(1 + 2)),
            (
                vec![0x10, 0x81, 0x00, 0xaa],
                Err(DecodeError::NonCanonical(FrameType::Datagram)),
            ),
            (
                vec![0x10, 0x81],
                Err(DecodeError::Truncated(FrameType::Datagram)),
            ),
            (
                vec![0x10, 0x05, 0xaa],
                Err(DecodeError::Truncated(FrameType::Datagram)),
            ),
            // Message numbers of ten bytes: a last byte of 1 is u64::MAX
            // (too large), of 2 is not a u64, and an eleventh byte never is.
            (
                message(&ten_ones, &[0x00]),
                Err(DecodeError::ValueTooLarge(FrameType::Message)),
            ),
            (
                message(&ten_ones[..9], &[0x02, 0x00]),
                Err(DecodeError::Malformed(FrameType::Message)),
            ),
            (
                message(&ten_ones[..9], &[0x81, 0x00, 0x00]),
                Err(DecodeError::Malformed(FrameType::Message)),
            ),
            // A Stream frame's bool other than 0 or 1.
            (
                vec![0x03, 0x00, 0x00, 0x02, 0x00],
                Err(DecodeError::Malformed(FrameType::Stream)),
            ),
        ];
        for (bytes, expected) in cases {
            let fast = Frame::decode(&bytes);
            assert_eq!(fast, Frame::decode_with_postcard(&bytes), "{bytes:02x?}");
            assert_eq!(fast.map(|(_, used)| used), expected, "{bytes:02x?}");
        }
    }
}
