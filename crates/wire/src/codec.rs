//! Frame encoding and decoding with postcard, into and out of the caller's buffers.
//!
//! Each frame is its type byte followed by a postcard-encoded body (varints
//! for integers, a varint length before byte strings, one byte for a bool).
//! Encoding writes into a caller's slice (the frames that carry data, Stream,
//! Message and Datagram, through a small writer of the same layout, as they
//! are on every packet's path); decoding borrows from the packet buffer. Neither allocates, and no length read from the wire is ever used
//! to size anything: a length past the end of the buffer is simply an error.
//!
//! Besides postcard's own checks the decoder refuses values above
//! [`VARINT_MAX`], stream data that would end past it, ACK ranges below zero
//! or more than [`MAX_ACK_RANGES`](crate::MAX_ACK_RANGES), and any encoding that is not the minimal
//! one (so `encode(decode(bytes)) == bytes` for every accepted frame).

use core::ops::RangeInclusive;
use core::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use crate::error::{DecodeError, EncodeError};
use crate::frame::{
    Ack, AckFrameRanges, AckFrameRangesRepr, AckFrequency, Frame, FrameType,
    MAX_REQUESTED_ACK_DELAY, Padding, PathChallenge, PathResponse,
};
use crate::ticket::TICKET_LEN;
use crate::varint::{VARINT_MAX, varint_len};

mod decode;
mod observed_address;
pub(crate) mod read;
mod rendezvous;

pub use decode::{FrameHandler, Frames};

/// Writes a byte string as one postcard length + memcpy (serde would
/// otherwise treat `&[u8]` as a sequence and push it byte by byte; the
/// bytes on the wire are the same).
fn as_bytes<S: Serializer>(data: &&[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(data)
}

#[derive(Serialize, Deserialize)]
struct AckHead {
    largest: u64,
    ack_delay_us: u64,
    receive_time_us: u64,
    additional_ranges: u64,
    first_range: u64,
}

/// Read only: [`Cursor`] writes this frame.
#[derive(Deserialize)]
struct StreamBody<'a> {
    id: u64,
    offset: u64,
    fin: bool,
    data: &'a [u8],
}

/// Read only: [`Cursor`] writes this frame.
#[derive(Deserialize)]
struct MessageBody<'a> {
    id: u64,
    data: &'a [u8],
}

#[derive(Serialize, Deserialize)]
struct MaxDataBody {
    max: u64,
}

#[derive(Serialize, Deserialize)]
struct MaxStreamDataBody {
    id: u64,
    max: u64,
}

#[derive(Serialize, Deserialize)]
struct CloseBody<'a> {
    code: u64,
    #[serde(serialize_with = "as_bytes")]
    reason: &'a [u8],
}

#[derive(Serialize, Deserialize)]
struct ResetStreamBody {
    id: u64,
    error_code: u64,
    final_size: u64,
}

#[derive(Serialize, Deserialize)]
struct StopSendingBody {
    id: u64,
    error_code: u64,
}

#[derive(Serialize, Deserialize)]
struct PathBody {
    data: [u8; 8],
}

/// Read only: [`Cursor`] writes this frame.
#[derive(Deserialize)]
struct DatagramBody<'a> {
    data: &'a [u8],
}

/// Read only: [`Cursor`] writes this frame.
#[derive(Deserialize)]
struct IdentityBody<'a> {
    public_key: &'a [u8],
    signature: &'a [u8],
}

#[derive(Serialize, Deserialize)]
struct AckFrequencyBody {
    sequence: u64,
    ack_eliciting_threshold: u64,
    max_ack_delay_us: u64,
}

impl AckFrequencyBody {
    fn of(frame: &AckFrequency) -> Self {
        Self {
            sequence: frame.sequence,
            ack_eliciting_threshold: u64::from(frame.ack_eliciting_threshold),
            max_ack_delay_us: micros(frame.max_ack_delay),
        }
    }
}

/// [`MAX_REQUESTED_ACK_DELAY`] in microseconds, the wire's unit.
const MAX_REQUESTED_ACK_DELAY_US: u64 = MAX_REQUESTED_ACK_DELAY.as_micros() as u64;

/// Reads a body of frame type `ty` with postcard.
fn take<'a, T: Deserialize<'a>>(
    ty: FrameType,
    body: &'a [u8],
) -> Result<(T, &'a [u8]), DecodeError> {
    postcard::take_from_bytes::<T>(body).map_err(|e| body_error(ty, e))
}

/// Refuses a decoded value above [`VARINT_MAX`].
fn bounded(ty: FrameType, value: u64) -> Result<u64, DecodeError> {
    if value > VARINT_MAX {
        Err(DecodeError::ValueTooLarge(ty))
    } else {
        Ok(value)
    }
}

/// Whole microseconds of `duration`, saturating (for size prediction only;
/// [`Frame::encode`] refuses values above [`VARINT_MAX`] first).
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn checked(field: &'static str, value: u64) -> Result<u64, EncodeError> {
    if value > VARINT_MAX {
        Err(EncodeError::ValueTooLarge { field, value })
    } else {
        Ok(value)
    }
}

fn bytes_len(data: &[u8]) -> usize {
    varint_len(data.len() as u64) + data.len()
}

/// The `(gap, length)` pair that encodes `range` after a range whose
/// smallest packet number is `previous_smallest` (RFC 9000 §19.3.1:
/// "Gap: ... the number of contiguous unacknowledged packets preceding the
/// packet number one lower than the smallest in the preceding ACK Range").
fn ack_pair(previous_smallest: u64, range: &RangeInclusive<u64>) -> (u64, u64) {
    (
        previous_smallest - range.end() - 2,
        range.end() - range.start(),
    )
}

/// The range a `(gap, length)` pair denotes after a range whose smallest
/// packet number is `previous_smallest`, or `None` if it would go below zero.
pub(crate) fn next_ack_range(
    previous_smallest: u64,
    gap: u64,
    length: u64,
) -> Option<RangeInclusive<u64>> {
    let largest = previous_smallest.checked_sub(gap.checked_add(2)?)?;
    let smallest = largest.checked_sub(length)?;
    Some(smallest..=largest)
}

impl AckFrameRanges<'_> {
    /// Encoded size of the additional-range pairs.
    fn pairs_len(&self) -> usize {
        match *self.repr() {
            AckFrameRangesRepr::Slice(ranges) => ranges
                .windows(2)
                .map(|w| {
                    let (gap, length) = ack_pair(*w[0].start(), &w[1]);
                    varint_len(gap) + varint_len(length)
                })
                .sum(),
            AckFrameRangesRepr::Wire { pairs, .. } | AckFrameRangesRepr::Decoded { pairs, .. } => {
                pairs.len()
            }
        }
    }

    fn first_range(&self) -> u64 {
        match *self.repr() {
            AckFrameRangesRepr::Slice(ranges) => ranges.first().map_or(0, |r| r.end() - r.start()),
            AckFrameRangesRepr::Wire { first_range, .. } => first_range,
            AckFrameRangesRepr::Decoded { ranges, .. } => ranges.first().map_or(0, |r| r.1 - r.0),
        }
    }
}

impl Ack<'_> {
    fn head(&self) -> AckHead {
        AckHead {
            largest: self.ranges.largest(),
            ack_delay_us: micros(self.ack_delay),
            receive_time_us: micros(self.receive_time),
            additional_ranges: (self.ranges.len() - 1) as u64,
            first_range: self.ranges.first_range(),
        }
    }
}

fn head_len(head: &AckHead) -> usize {
    varint_len(head.largest)
        + varint_len(head.ack_delay_us)
        + varint_len(head.receive_time_us)
        + varint_len(head.additional_ranges)
        + varint_len(head.first_range)
}

/// Maps postcard's error for a body of frame type `ty`.
fn body_error(ty: FrameType, error: postcard::Error) -> DecodeError {
    match error {
        postcard::Error::DeserializeUnexpectedEnd => DecodeError::Truncated(ty),
        _ => DecodeError::Malformed(ty),
    }
}

/// Writes the byte strings and varints of the data-carrying frames (Stream,
/// Message, Datagram) without serde, in the same layout postcard uses.
struct Cursor<'b> {
    dst: &'b mut [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    #[inline]
    const fn new(dst: &'b mut [u8]) -> Self {
        Self { dst, at: 0 }
    }

    /// The error for a `dst` shorter than the predicted length, which
    /// [`Frame::encode`] rules out by sizing it first.
    const fn too_small(&self) -> EncodeError {
        EncodeError::BufferTooSmall {
            needed: self.dst.len() + 1,
            available: self.dst.len(),
        }
    }

    #[inline]
    fn varint(&mut self, value: u64) -> Result<(), EncodeError> {
        let too_small = self.too_small();
        let rest = self.dst.get_mut(self.at..).unwrap_or_default();
        let written = crate::varint::write(value, rest).ok_or(too_small)?;
        self.at += written;
        Ok(())
    }

    #[inline]
    fn byte(&mut self, value: u8) -> Result<(), EncodeError> {
        let too_small = self.too_small();
        let slot = self.dst.get_mut(self.at).ok_or(too_small)?;
        *slot = value;
        self.at += 1;
        Ok(())
    }

    /// A byte string: its length as a varint, then the bytes.
    #[inline]
    fn bytes(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        self.varint(data.len() as u64)?;
        let too_small = self.too_small();
        let end = self.at + data.len();
        let slot = self.dst.get_mut(self.at..end).ok_or(too_small)?;
        slot.copy_from_slice(data);
        self.at = end;
        Ok(())
    }
}

/// Writes `value` with postcard into `dst`, which the caller sized with the
/// predicted length.
#[inline]
fn put<T: Serialize>(value: &T, dst: &mut [u8]) -> Result<usize, EncodeError> {
    let available = dst.len();
    postcard::to_slice(value, dst)
        .map(|written| written.len())
        .map_err(|_| EncodeError::BufferTooSmall {
            needed: available + 1,
            available,
        })
}

impl<'a> Frame<'a> {
    /// The exact number of bytes [`Frame::encode`] writes for this frame.
    #[must_use]
    #[inline]
    pub fn encoded_len(&self) -> usize {
        1 + match self {
            Self::Padding(padding) => return padding.len,
            Self::Ping => 0,
            Self::Ack(ack) => head_len(&ack.head()) + ack.ranges.pairs_len(),
            Self::Stream(s) => varint_len(s.id) + varint_len(s.offset) + 1 + bytes_len(s.data),
            Self::Message(m) => varint_len(m.id) + bytes_len(m.data),
            Self::MaxData(m) => varint_len(m.max),
            Self::MaxStreamData(m) => varint_len(m.id) + varint_len(m.max),
            Self::Close(c) => varint_len(c.code) + bytes_len(c.reason),
            Self::ResetStream(r) => {
                varint_len(r.id) + varint_len(r.error_code) + varint_len(r.final_size)
            }
            Self::StopSending(s) => varint_len(s.id) + varint_len(s.error_code),
            Self::DataBlocked(d) => varint_len(d.limit),
            Self::StreamDataBlocked(d) => varint_len(d.id) + varint_len(d.limit),
            Self::MaxStreams(m) => varint_len(m.max),
            Self::PathChallenge(_) | Self::PathResponse(_) => 8,
            Self::Datagram(d) => bytes_len(d.data),
            Self::AckFrequency(a) => {
                let body = AckFrequencyBody::of(a);
                varint_len(body.sequence)
                    + varint_len(body.ack_eliciting_threshold)
                    + varint_len(body.max_ack_delay_us)
            }
            Self::Identity(i) => bytes_len(i.public_key) + bytes_len(i.signature),
            Self::ObservedAddress(o) => observed_address::body_len(o),
            Self::MaxMessageSize(m) => varint_len(m.max),
            Self::Register(r) => rendezvous::candidates_len(&r.candidates),
            Self::ConnectVia(_) => crate::rendezvous::FINGERPRINT_LEN,
            Self::Introduce(i) => rendezvous::introduce_len(i),
            Self::IntroductionRefused(_) | Self::RelayRefused(_) => {
                crate::rendezvous::FINGERPRINT_LEN + 1
            }
            Self::RelayRequest(_) => crate::rendezvous::FINGERPRINT_LEN,
            Self::RelayGrant(_) => 4 + crate::rendezvous::FINGERPRINT_LEN + 1,
            Self::NewTicket(t) => varint_len(t.lifetime_s) + TICKET_LEN,
        }
    }

    /// Refuses frames the wire format cannot carry.
    #[inline]
    fn validate(&self) -> Result<(), EncodeError> {
        match self {
            Self::Padding(Padding { len: 0 }) => return Err(EncodeError::EmptyPadding),
            Self::Padding(_) | Self::Ping => {}
            Self::Ack(ack) => {
                let head = ack.head();
                checked("ack_delay", head.ack_delay_us)?;
                checked("receive_time", head.receive_time_us)?;
            }
            Self::Stream(s) => {
                checked("stream id", s.id)?;
                // RFC 9000 §19.8: "The largest offset delivered on a stream
                // -- the sum of the offset and data length -- cannot exceed 2^62-1".
                checked(
                    "stream offset + length",
                    s.offset.saturating_add(s.data.len() as u64),
                )?;
            }
            Self::Message(m) => {
                checked("message number", m.id)?;
            }
            Self::MaxData(m) => {
                checked("max data", m.max)?;
            }
            Self::MaxStreamData(m) => {
                checked("stream id", m.id)?;
                checked("max stream data", m.max)?;
            }
            Self::Close(c) => {
                checked("close code", c.code)?;
            }
            Self::ResetStream(r) => {
                checked("stream id", r.id)?;
                checked("error code", r.error_code)?;
                checked("final size", r.final_size)?;
            }
            Self::StopSending(s) => {
                checked("stream id", s.id)?;
                checked("error code", s.error_code)?;
            }
            Self::DataBlocked(d) => {
                checked("data limit", d.limit)?;
            }
            Self::StreamDataBlocked(d) => {
                checked("stream id", d.id)?;
                checked("stream data limit", d.limit)?;
            }
            Self::MaxStreams(m) => {
                checked("max streams", m.max)?;
            }
            Self::MaxMessageSize(m) => {
                checked("max message size", m.max)?;
            }
            Self::NewTicket(t) => {
                checked("ticket lifetime", t.lifetime_s)?;
            }
            Self::PathChallenge(_)
            | Self::PathResponse(_)
            | Self::Datagram(_)
            | Self::Identity(_) => {}
            Self::ObservedAddress(o) => observed_address::validate(o)?,
            Self::Register(_)
            | Self::ConnectVia(_)
            | Self::IntroductionRefused(_)
            | Self::RelayRequest(_)
            | Self::RelayRefused(_) => {}
            Self::RelayGrant(g) => rendezvous::validate_grant(g)?,
            Self::Introduce(i) => rendezvous::validate_introduce(i)?,
            Self::AckFrequency(a) => {
                checked("ack frequency sequence", a.sequence)?;
                if a.ack_eliciting_threshold == 0 {
                    return Err(EncodeError::Zero("ack-eliciting threshold"));
                }
                if a.max_ack_delay > MAX_REQUESTED_ACK_DELAY {
                    return Err(EncodeError::ValueTooLarge {
                        field: "max ack delay (µs)",
                        value: micros(a.max_ack_delay),
                    });
                }
            }
        }
        Ok(())
    }

    /// Encodes the frame at the start of `buf`, returning the bytes written
    /// (always [`Frame::encoded_len`]). On error nothing useful was written.
    #[inline]
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        self.validate()?;
        let len = self.encoded_len();
        let available = buf.len();
        let dst = buf.get_mut(..len).ok_or(EncodeError::BufferTooSmall {
            needed: len,
            available,
        })?;
        dst[0] = self.frame_type() as u8;
        let body = &mut dst[1..];
        // The data-carrying frames are written here, inlined into the packet
        // path; the rest out of line.
        match self {
            Self::Ping => {}
            Self::Stream(s) => {
                // StreamBody's layout: id, offset, fin, data.
                let mut cursor = Cursor::new(body);
                cursor.varint(s.id)?;
                cursor.varint(s.offset)?;
                cursor.byte(u8::from(s.fin))?;
                cursor.bytes(s.data)?;
            }
            Self::Message(m) => {
                // MessageBody's layout: id, data.
                let mut cursor = Cursor::new(body);
                cursor.varint(m.id)?;
                cursor.bytes(m.data)?;
            }
            Self::Datagram(d) => Cursor::new(body).bytes(d.data)?,
            _ => self.encode_control_body(body)?,
        }
        Ok(len)
    }

    /// Writes the body of a frame that carries no application data into
    /// `body`, sized by [`Frame::encoded_len`].
    #[inline(never)]
    fn encode_control_body(&self, body: &mut [u8]) -> Result<(), EncodeError> {
        match self {
            // Written by `encode` itself.
            Self::Ping | Self::Stream(_) | Self::Message(_) | Self::Datagram(_) => {}
            Self::Padding(_) => body.fill(0),
            Self::Ack(ack) => {
                let mut at = put(&ack.head(), body)?;
                match *ack.ranges.repr() {
                    AckFrameRangesRepr::Slice(ranges) => {
                        for w in ranges.windows(2) {
                            at += put(&ack_pair(*w[0].start(), &w[1]), &mut body[at..])?;
                        }
                    }
                    AckFrameRangesRepr::Wire { pairs, .. }
                    | AckFrameRangesRepr::Decoded { pairs, .. } => {
                        body[at..at + pairs.len()].copy_from_slice(pairs);
                    }
                }
            }
            Self::MaxData(m) => {
                put(&MaxDataBody { max: m.max }, body)?;
            }
            Self::MaxStreamData(m) => {
                put(
                    &MaxStreamDataBody {
                        id: m.id,
                        max: m.max,
                    },
                    body,
                )?;
            }
            Self::Close(c) => {
                put(
                    &CloseBody {
                        code: c.code,
                        reason: c.reason,
                    },
                    body,
                )?;
            }
            Self::ResetStream(r) => {
                put(&(r.id, r.error_code, r.final_size), body)?;
            }
            Self::StopSending(s) => {
                put(&(s.id, s.error_code), body)?;
            }
            Self::DataBlocked(d) => {
                put(&d.limit, body)?;
            }
            Self::StreamDataBlocked(d) => {
                put(&(d.id, d.limit), body)?;
            }
            Self::MaxStreams(m) => {
                put(&m.max, body)?;
            }
            Self::MaxMessageSize(m) => {
                put(&m.max, body)?;
            }
            Self::AckFrequency(a) => {
                put(&AckFrequencyBody::of(a), body)?;
            }
            Self::Identity(i) => {
                let mut cursor = Cursor::new(body);
                cursor.bytes(i.public_key)?;
                cursor.bytes(i.signature)?;
            }
            Self::PathChallenge(PathChallenge { data })
            | Self::PathResponse(PathResponse { data }) => {
                body.copy_from_slice(data);
            }
            Self::ObservedAddress(o) => observed_address::encode_body(o, body)?,
            Self::Register(r) => rendezvous::encode_register(r, body)?,
            Self::ConnectVia(c) => rendezvous::encode_connect_via(c, body)?,
            Self::Introduce(i) => rendezvous::encode_introduce(i, body)?,
            Self::IntroductionRefused(r) => rendezvous::encode_refused(&r.peer, r.reason, body)?,
            Self::RelayRequest(r) => rendezvous::encode_fingerprint(&r.peer, body)?,
            Self::RelayGrant(g) => rendezvous::encode_grant(g, body)?,
            Self::RelayRefused(r) => rendezvous::encode_refused(&r.peer, r.reason, body)?,
            Self::NewTicket(t) => {
                let at = put(&t.lifetime_s, body)?;
                body[at..].copy_from_slice(t.ticket);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
