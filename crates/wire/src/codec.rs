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
//! or more than [`MAX_ACK_RANGES`], and any encoding that is not the minimal
//! one (so `encode(decode(bytes)) == bytes` for every accepted frame).

use core::ops::RangeInclusive;
use core::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use crate::error::{DecodeError, EncodeError};
use crate::frame::{
    Ack, AckFrameRanges, AckFrameRangesRepr, AckFrequency, Close, CloseKind, DataBlocked, Datagram,
    Frame, FrameType, Identity, MAX_ACK_RANGES, MAX_REQUESTED_ACK_DELAY, MaxData, MaxMessageSize,
    MaxStreamData, MaxStreams, Message, NewTicket, Padding, PathChallenge, PathResponse,
    ResetStream, StopSending, Stream, StreamDataBlocked,
};
use crate::ticket::TICKET_LEN;
use crate::varint::{VARINT_MAX, varint_len};

mod observed_address;
mod rendezvous;

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

/// Reads one `(gap, length)` pair.
pub(crate) fn take_ack_pair(bytes: &[u8]) -> postcard::Result<((u64, u64), &[u8])> {
    postcard::take_from_bytes::<(u64, u64)>(bytes)
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
            AckFrameRangesRepr::Wire { pairs, .. } => pairs.len(),
        }
    }

    fn first_range(&self) -> u64 {
        match *self.repr() {
            AckFrameRangesRepr::Slice(ranges) => ranges.first().map_or(0, |r| r.end() - r.start()),
            AckFrameRangesRepr::Wire { first_range, .. } => first_range,
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
                    AckFrameRangesRepr::Wire { pairs, .. } => {
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

    /// Decodes the frame at the start of `bytes`, returning it and the number
    /// of bytes it took. Data, reasons and ACK ranges borrow from `bytes`.
    pub fn decode(bytes: &'a [u8]) -> Result<(Self, usize), DecodeError> {
        let (&type_byte, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        let ty = FrameType::from_byte(type_byte).ok_or(DecodeError::UnknownFrameType(type_byte))?;
        let too_large = DecodeError::ValueTooLarge(ty);
        let (frame, rest) = match ty {
            FrameType::Padding => {
                let zeros = body.iter().position(|&b| b != 0).unwrap_or(body.len());
                return Ok((Self::Padding(Padding { len: 1 + zeros }), 1 + zeros));
            }
            FrameType::Ping => (Self::Ping, body),
            FrameType::Ack => decode_ack(body)?,
            FrameType::Stream => {
                let (s, rest) = postcard::take_from_bytes::<StreamBody<'a>>(body)
                    .map_err(|e| body_error(ty, e))?;
                if s.id > VARINT_MAX || s.offset.saturating_add(s.data.len() as u64) > VARINT_MAX {
                    return Err(too_large);
                }
                let frame = Stream {
                    id: s.id,
                    offset: s.offset,
                    fin: s.fin,
                    data: s.data,
                };
                (Self::Stream(frame), rest)
            }
            FrameType::Message => {
                let (m, rest) = postcard::take_from_bytes::<MessageBody<'a>>(body)
                    .map_err(|e| body_error(ty, e))?;
                let frame = Message {
                    id: bounded(ty, m.id)?,
                    data: m.data,
                };
                (Self::Message(frame), rest)
            }
            FrameType::MaxData => {
                let (m, rest) = postcard::take_from_bytes::<MaxDataBody>(body)
                    .map_err(|e| body_error(ty, e))?;
                if m.max > VARINT_MAX {
                    return Err(too_large);
                }
                (Self::MaxData(MaxData { max: m.max }), rest)
            }
            FrameType::MaxStreamData => {
                let (m, rest) = postcard::take_from_bytes::<MaxStreamDataBody>(body)
                    .map_err(|e| body_error(ty, e))?;
                if m.id > VARINT_MAX || m.max > VARINT_MAX {
                    return Err(too_large);
                }
                (
                    Self::MaxStreamData(MaxStreamData {
                        id: m.id,
                        max: m.max,
                    }),
                    rest,
                )
            }
            FrameType::TransportClose | FrameType::ApplicationClose => {
                let (c, rest) = take::<CloseBody<'a>>(ty, body)?;
                let kind = if ty == FrameType::TransportClose {
                    CloseKind::Transport
                } else {
                    CloseKind::Application
                };
                let close = Close {
                    kind,
                    code: bounded(ty, c.code)?,
                    reason: c.reason,
                };
                (Self::Close(close), rest)
            }
            FrameType::ResetStream => {
                let (r, rest) = take::<ResetStreamBody>(ty, body)?;
                let frame = ResetStream {
                    id: bounded(ty, r.id)?,
                    error_code: bounded(ty, r.error_code)?,
                    final_size: bounded(ty, r.final_size)?,
                };
                (Self::ResetStream(frame), rest)
            }
            FrameType::StopSending => {
                let (s, rest) = take::<StopSendingBody>(ty, body)?;
                let frame = StopSending {
                    id: bounded(ty, s.id)?,
                    error_code: bounded(ty, s.error_code)?,
                };
                (Self::StopSending(frame), rest)
            }
            FrameType::DataBlocked => {
                let (limit, rest) = take::<u64>(ty, body)?;
                let limit = bounded(ty, limit)?;
                (Self::DataBlocked(DataBlocked { limit }), rest)
            }
            FrameType::StreamDataBlocked => {
                let ((id, limit), rest) = take::<(u64, u64)>(ty, body)?;
                let frame = StreamDataBlocked {
                    id: bounded(ty, id)?,
                    limit: bounded(ty, limit)?,
                };
                (Self::StreamDataBlocked(frame), rest)
            }
            FrameType::MaxStreams => {
                let (max, rest) = take::<u64>(ty, body)?;
                let max = bounded(ty, max)?;
                (Self::MaxStreams(MaxStreams { max }), rest)
            }
            FrameType::MaxMessageSize => {
                let (max, rest) = take::<u64>(ty, body)?;
                let max = bounded(ty, max)?;
                (Self::MaxMessageSize(MaxMessageSize { max }), rest)
            }
            FrameType::PathChallenge => {
                let (p, rest) = take::<PathBody>(ty, body)?;
                (Self::PathChallenge(PathChallenge { data: p.data }), rest)
            }
            FrameType::PathResponse => {
                let (p, rest) = take::<PathBody>(ty, body)?;
                (Self::PathResponse(PathResponse { data: p.data }), rest)
            }
            FrameType::Datagram => {
                let (d, rest) = take::<DatagramBody<'a>>(ty, body)?;
                (Self::Datagram(Datagram { data: d.data }), rest)
            }
            FrameType::AckFrequency => {
                let (a, rest) = take::<AckFrequencyBody>(ty, body)?;
                let threshold = u32::try_from(a.ack_eliciting_threshold).map_err(|_| too_large)?;
                if threshold == 0 {
                    return Err(DecodeError::Zero(ty));
                }
                if a.max_ack_delay_us > MAX_REQUESTED_ACK_DELAY_US {
                    return Err(too_large);
                }
                let frame = AckFrequency {
                    sequence: bounded(ty, a.sequence)?,
                    ack_eliciting_threshold: threshold,
                    max_ack_delay: Duration::from_micros(a.max_ack_delay_us),
                };
                (Self::AckFrequency(frame), rest)
            }
            FrameType::Identity => {
                let (i, rest) = take::<IdentityBody<'a>>(ty, body)?;
                let frame = Identity {
                    public_key: i.public_key,
                    signature: i.signature,
                };
                (Self::Identity(frame), rest)
            }
            FrameType::ObservedAddress => {
                let (frame, rest) = observed_address::decode_body(body)?;
                (Self::ObservedAddress(frame), rest)
            }
            FrameType::Register => {
                let (frame, rest) = rendezvous::decode_register(body)?;
                (Self::Register(frame), rest)
            }
            FrameType::ConnectVia => {
                let (frame, rest) = rendezvous::decode_connect_via(body)?;
                (Self::ConnectVia(frame), rest)
            }
            FrameType::Introduce => {
                let (frame, rest) = rendezvous::decode_introduce(body)?;
                (Self::Introduce(frame), rest)
            }
            FrameType::IntroductionRefused => {
                let ((peer, reason), rest) = rendezvous::decode_refused(ty, body)?;
                (
                    Self::IntroductionRefused(crate::IntroductionRefused { peer, reason }),
                    rest,
                )
            }
            FrameType::RelayRequest => {
                let (peer, rest) = rendezvous::fingerprint(ty, body)?;
                (Self::RelayRequest(crate::RelayRequest { peer }), rest)
            }
            FrameType::RelayGrant => {
                let (frame, rest) = rendezvous::decode_grant(body)?;
                (Self::RelayGrant(frame), rest)
            }
            FrameType::RelayRefused => {
                let ((peer, reason), rest) = rendezvous::decode_refused(ty, body)?;
                (
                    Self::RelayRefused(crate::RelayRefused { peer, reason }),
                    rest,
                )
            }
            FrameType::NewTicket => {
                let (lifetime_s, rest) = take::<u64>(ty, body)?;
                let (ticket, rest) = rest
                    .split_first_chunk::<TICKET_LEN>()
                    .ok_or(DecodeError::Truncated(ty))?;
                let frame = NewTicket {
                    lifetime_s: bounded(ty, lifetime_s)?,
                    ticket,
                };
                (Self::NewTicket(frame), rest)
            }
        };
        let used = bytes.len() - rest.len();
        if used != frame.encoded_len() {
            return Err(DecodeError::NonCanonical(ty));
        }
        Ok((frame, used))
    }

    /// Decodes a frame that must fill `bytes` exactly (e.g. one stored on its own).
    pub fn decode_exact(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let (frame, used) = Self::decode(bytes)?;
        match bytes.len() - used {
            0 => Ok(frame),
            trailing => Err(DecodeError::TrailingBytes(trailing)),
        }
    }
}

fn decode_ack(body: &[u8]) -> Result<(Frame<'_>, &[u8]), DecodeError> {
    let ty = FrameType::Ack;
    let (head, mut rest) =
        postcard::take_from_bytes::<AckHead>(body).map_err(|e| body_error(ty, e))?;
    if head.largest > VARINT_MAX
        || head.ack_delay_us > VARINT_MAX
        || head.receive_time_us > VARINT_MAX
    {
        return Err(DecodeError::ValueTooLarge(ty));
    }
    if head.additional_ranges >= MAX_ACK_RANGES as u64 {
        return Err(DecodeError::InvalidAckRanges("more than MAX_ACK_RANGES"));
    }
    let mut smallest =
        head.largest
            .checked_sub(head.first_range)
            .ok_or(DecodeError::InvalidAckRanges(
                "first range below packet number 0",
            ))?;
    let pairs_start = rest;
    for _ in 0..head.additional_ranges {
        let ((gap, length), after) = take_ack_pair(rest).map_err(|e| body_error(ty, e))?;
        // The frame's total length is checked against its predicted size
        // below, but the pairs are kept as raw bytes, so each pair must be
        // checked for minimal varints here.
        if rest.len() - after.len() != varint_len(gap) + varint_len(length) {
            return Err(DecodeError::NonCanonical(ty));
        }
        let range = next_ack_range(smallest, gap, length)
            .ok_or(DecodeError::InvalidAckRanges("range below packet number 0"))?;
        smallest = *range.start();
        rest = after;
    }
    let pairs = &pairs_start[..pairs_start.len() - rest.len()];
    // Bounded by MAX_ACK_RANGES above.
    let additional = head.additional_ranges as usize;
    let ranges = AckFrameRanges::from_wire(head.largest, head.first_range, additional, pairs);
    let ack = Ack {
        ranges,
        ack_delay: Duration::from_micros(head.ack_delay_us),
        receive_time: Duration::from_micros(head.receive_time_us),
    };
    Ok((Frame::Ack(ack), rest))
}

/// The frames of a packet payload, decoded one at a time.
///
/// Yields `Err` once at the first malformed frame and then stops: a packet
/// with one bad frame is a protocol violation as a whole, and nothing after
/// the bad frame can be located.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Frames<'a> {
    /// Iterates over the frames in `payload`.
    #[must_use]
    pub const fn new(payload: &'a [u8]) -> Self {
        Self { rest: payload }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match Frame::decode(self.rest) {
            Ok((frame, used)) => {
                self.rest = &self.rest[used..];
                Some(Ok(frame))
            }
            Err(error) => {
                self.rest = &[];
                Some(Err(error))
            }
        }
    }
}

impl core::iter::FusedIterator for Frames<'_> {}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// An owned frame, so proptest can generate what `Frame` borrows.
    #[derive(Debug, Clone)]
    pub(crate) enum OwnedFrame {
        Padding(usize),
        Ping,
        Ack {
            ranges: Vec<RangeInclusive<u64>>,
            delay_us: u64,
            receive_us: u64,
        },
        Stream {
            id: u64,
            offset: u64,
            fin: bool,
            data: Vec<u8>,
        },
        Message {
            id: u64,
            data: Vec<u8>,
        },
        MaxData(u64),
        MaxStreamData {
            id: u64,
            max: u64,
        },
        Close {
            kind: CloseKind,
            code: u64,
            reason: Vec<u8>,
        },
        ResetStream(ResetStream),
        StopSending(StopSending),
        DataBlocked(DataBlocked),
        StreamDataBlocked(StreamDataBlocked),
        MaxStreams(MaxStreams),
        PathChallenge([u8; 8]),
        PathResponse([u8; 8]),
        Datagram(Vec<u8>),
        AckFrequency(AckFrequency),
        Identity {
            public_key: Vec<u8>,
            signature: Vec<u8>,
        },
        ObservedAddress(crate::ObservedAddress),
        MaxMessageSize(MaxMessageSize),
        Rendezvous(RendezvousFrame),
        NewTicket(u64, Box<crate::Ticket>),
    }

    /// The rendezvous frames, which borrow nothing.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub(crate) enum RendezvousFrame {
        Register(crate::Register),
        ConnectVia(crate::ConnectVia),
        Introduce(crate::Introduce),
        Refused(crate::IntroductionRefused),
        RelayRequest(crate::RelayRequest),
        RelayGrant(crate::RelayGrant),
        RelayRefused(crate::RelayRefused),
    }

    impl OwnedFrame {
        pub(crate) fn as_frame(&self) -> Frame<'_> {
            match self {
                Self::Padding(len) => Frame::Padding(Padding { len: *len }),
                Self::Ping => Frame::Ping,
                Self::Ack {
                    ranges,
                    delay_us,
                    receive_us,
                } => Frame::Ack(Ack {
                    ranges: AckFrameRanges::new(ranges).expect("generated ranges are valid"),
                    ack_delay: Duration::from_micros(*delay_us),
                    receive_time: Duration::from_micros(*receive_us),
                }),
                Self::Stream {
                    id,
                    offset,
                    fin,
                    data,
                } => Frame::Stream(Stream {
                    id: *id,
                    offset: *offset,
                    fin: *fin,
                    data,
                }),
                Self::Message { id, data } => Frame::Message(Message { id: *id, data }),
                Self::MaxData(max) => Frame::MaxData(MaxData { max: *max }),
                Self::MaxStreamData { id, max } => {
                    Frame::MaxStreamData(MaxStreamData { id: *id, max: *max })
                }
                Self::Close { kind, code, reason } => Frame::Close(Close {
                    kind: *kind,
                    code: *code,
                    reason,
                }),
                Self::ResetStream(r) => Frame::ResetStream(*r),
                Self::StopSending(s) => Frame::StopSending(*s),
                Self::DataBlocked(d) => Frame::DataBlocked(*d),
                Self::StreamDataBlocked(d) => Frame::StreamDataBlocked(*d),
                Self::MaxStreams(m) => Frame::MaxStreams(*m),
                Self::PathChallenge(data) => Frame::PathChallenge(PathChallenge { data: *data }),
                Self::PathResponse(data) => Frame::PathResponse(PathResponse { data: *data }),
                Self::Datagram(data) => Frame::Datagram(Datagram { data }),
                Self::AckFrequency(a) => Frame::AckFrequency(*a),
                Self::Identity {
                    public_key,
                    signature,
                } => Frame::Identity(Identity {
                    public_key,
                    signature,
                }),
                Self::ObservedAddress(o) => Frame::ObservedAddress(*o),
                Self::MaxMessageSize(m) => Frame::MaxMessageSize(*m),
                Self::Rendezvous(RendezvousFrame::Register(r)) => Frame::Register(*r),
                Self::Rendezvous(RendezvousFrame::ConnectVia(c)) => Frame::ConnectVia(*c),
                Self::Rendezvous(RendezvousFrame::Introduce(i)) => Frame::Introduce(*i),
                Self::Rendezvous(RendezvousFrame::Refused(r)) => Frame::IntroductionRefused(*r),
                Self::Rendezvous(RendezvousFrame::RelayRequest(r)) => Frame::RelayRequest(*r),
                Self::Rendezvous(RendezvousFrame::RelayGrant(g)) => Frame::RelayGrant(*g),
                Self::Rendezvous(RendezvousFrame::RelayRefused(r)) => Frame::RelayRefused(*r),
                Self::NewTicket(lifetime_s, ticket) => Frame::NewTicket(NewTicket {
                    lifetime_s: *lifetime_s,
                    ticket,
                }),
            }
        }
    }

    /// Values spread over every varint length up to `VARINT_MAX`.
    fn varint() -> impl Strategy<Value = u64> {
        (0u32..62, any::<u64>()).prop_map(|(bits, v)| v & ((1u64 << bits) | ((1u64 << bits) - 1)))
    }

    /// Valid ACK ranges: descending, gaps of at least one.
    fn ack_ranges() -> impl Strategy<Value = Vec<RangeInclusive<u64>>> {
        (varint(), vec((0u64..300, 0u64..300), 0..MAX_ACK_RANGES)).prop_map(|(largest, steps)| {
            let mut ranges = Vec::new();
            let mut end = largest.max(1 << 20);
            for (gap, len) in std::iter::once((0, 5)).chain(steps) {
                let Some(start) = end.checked_sub(len) else {
                    break;
                };
                ranges.push(start..=end);
                match start.checked_sub(gap + 2) {
                    Some(next_end) => end = next_end,
                    None => break,
                }
            }
            ranges
        })
    }

    pub(crate) fn any_frame() -> impl Strategy<Value = OwnedFrame> {
        prop_oneof![
            (1usize..40).prop_map(OwnedFrame::Padding),
            Just(OwnedFrame::Ping),
            (ack_ranges(), varint(), varint()).prop_map(|(ranges, delay_us, receive_us)| {
                OwnedFrame::Ack {
                    ranges,
                    delay_us,
                    receive_us,
                }
            }),
            (
                varint(),
                0u64..1 << 61,
                any::<bool>(),
                vec(any::<u8>(), 0..300)
            )
                .prop_map(|(id, offset, fin, data)| OwnedFrame::Stream {
                    id,
                    offset,
                    fin,
                    data
                }),
            (varint(), vec(any::<u8>(), 0..300))
                .prop_map(|(id, data)| OwnedFrame::Message { id, data }),
            varint().prop_map(OwnedFrame::MaxData),
            (varint(), varint()).prop_map(|(id, max)| OwnedFrame::MaxStreamData { id, max }),
            (any::<bool>(), varint(), vec(any::<u8>(), 0..64)).prop_map(|(app, code, reason)| {
                let kind = if app {
                    CloseKind::Application
                } else {
                    CloseKind::Transport
                };
                OwnedFrame::Close { kind, code, reason }
            }),
            (varint(), varint(), varint()).prop_map(|(id, error_code, final_size)| {
                OwnedFrame::ResetStream(ResetStream {
                    id,
                    error_code,
                    final_size,
                })
            }),
            (varint(), varint()).prop_map(|(id, error_code)| OwnedFrame::StopSending(
                StopSending { id, error_code }
            )),
            varint().prop_map(|limit| OwnedFrame::DataBlocked(DataBlocked { limit })),
            (varint(), varint()).prop_map(|(id, limit)| OwnedFrame::StreamDataBlocked(
                StreamDataBlocked { id, limit }
            )),
            varint().prop_map(|max| OwnedFrame::MaxStreams(MaxStreams { max })),
            any::<[u8; 8]>().prop_map(OwnedFrame::PathChallenge),
            any::<[u8; 8]>().prop_map(OwnedFrame::PathResponse),
            vec(any::<u8>(), 0..300).prop_map(OwnedFrame::Datagram),
            (varint(), 1..=u32::MAX, 0..=MAX_REQUESTED_ACK_DELAY_US).prop_map(
                |(sequence, ack_eliciting_threshold, delay_us)| {
                    OwnedFrame::AckFrequency(AckFrequency {
                        sequence,
                        ack_eliciting_threshold,
                        max_ack_delay: Duration::from_micros(delay_us),
                    })
                }
            ),
            (vec(any::<u8>(), 0..300), vec(any::<u8>(), 0..300)).prop_map(
                |(public_key, signature)| OwnedFrame::Identity {
                    public_key,
                    signature
                }
            ),
            (varint(), any::<[u8; 4]>(), 1..=u16::MAX)
                .prop_filter("a unicast address", |(_, ip, _)| ip[0] != 0 && ip[0] < 224)
                .prop_map(|(sequence, ip, port)| {
                    OwnedFrame::ObservedAddress(crate::ObservedAddress {
                        sequence,
                        address: core::net::SocketAddr::from((ip, port)),
                    })
                }),
            varint().prop_map(|max| OwnedFrame::MaxMessageSize(MaxMessageSize { max })),
            (varint(), any::<[u8; 32]>(), any::<u8>()).prop_map(|(lifetime, seed, fill)| {
                let mut ticket = [fill; TICKET_LEN];
                ticket[..32].copy_from_slice(&seed);
                OwnedFrame::NewTicket(lifetime, Box::new(ticket))
            }),
            rendezvous_frame().prop_map(OwnedFrame::Rendezvous),
        ]
    }

    fn rendezvous_frame() -> impl Strategy<Value = RendezvousFrame> {
        let peer = any::<[u8; 32]>().prop_map(crate::KeyFingerprint);
        prop_oneof![
            crate::rendezvous::tests::candidates()
                .prop_map(|candidates| RendezvousFrame::Register(crate::Register { candidates })),
            peer.clone()
                .prop_map(|peer| RendezvousFrame::ConnectVia(crate::ConnectVia { peer })),
            (
                any::<[u8; 8]>(),
                peer.clone(),
                any::<bool>(),
                0..=crate::MAX_START_DELAY.as_micros() as u64,
                any::<[u8; 4]>(),
                1..=u16::MAX,
                crate::rendezvous::tests::candidates(),
            )
                .prop_filter("a unicast address", |v| v.4[0] != 0 && v.4[0] < 224)
                .prop_map(
                    |(nonce, peer, initiator, delay_us, ip, port, candidates)| {
                        RendezvousFrame::Introduce(crate::Introduce {
                            nonce,
                            peer,
                            initiator,
                            start_delay: Duration::from_micros(delay_us),
                            address: core::net::SocketAddr::from((ip, port)),
                            candidates,
                        })
                    }
                ),
            (peer.clone(), 1u8..=4).prop_map(|(peer, reason)| {
                RendezvousFrame::Refused(crate::IntroductionRefused {
                    peer,
                    reason: crate::RefusalReason::from_byte(reason).expect("known"),
                })
            }),
            peer.clone()
                .prop_map(|peer| RendezvousFrame::RelayRequest(crate::RelayRequest { peer })),
            (1..=u32::MAX, peer.clone(), any::<bool>()).prop_map(|(slot, peer, initiator)| {
                RendezvousFrame::RelayGrant(crate::RelayGrant {
                    slot,
                    peer,
                    initiator,
                })
            }),
            (peer, 1u8..=4).prop_map(|(peer, reason)| {
                RendezvousFrame::RelayRefused(crate::RelayRefused {
                    peer,
                    reason: crate::RefusalReason::from_byte(reason).expect("known"),
                })
            }),
        ]
    }

    fn encode_all(frames: &[OwnedFrame]) -> Vec<u8> {
        let mut out = vec![0u8; frames.iter().map(|f| f.as_frame().encoded_len()).sum()];
        let mut at = 0;
        for frame in frames {
            at += frame.as_frame().encode(&mut out[at..]).unwrap();
        }
        assert_eq!(at, out.len());
        out
    }

    /// Decoding must either fail with a typed error or give frames that
    /// encode back to exactly the same bytes.
    fn check_decode_is_canonical(bytes: &[u8]) -> Result<(), TestCaseError> {
        let mut rebuilt = vec![0u8; bytes.len()];
        let mut at = 0;
        for frame in Frames::new(bytes) {
            let Ok(frame) = frame else { return Ok(()) };
            at += frame
                .encode(&mut rebuilt[at..])
                .expect("a decoded frame re-encodes");
        }
        prop_assert_eq!(&rebuilt[..at], bytes);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_frame_round_trips_and_its_predicted_size_is_what_is_written(owned in any_frame()) {
            let frame = owned.as_frame();
            let mut buf = vec![0u8; frame.encoded_len() + 8];
            let written = frame.encode(&mut buf).unwrap();
            prop_assert_eq!(written, frame.encoded_len());
            let decoded = Frame::decode_exact(&buf[..written]).unwrap();
            prop_assert_eq!(decoded, frame);
            prop_assert_eq!(decoded.encoded_len(), written);
            // A decoded frame (lazy ACK ranges included) encodes to the same bytes.
            let mut again = vec![0u8; written];
            prop_assert_eq!(decoded.encode(&mut again).unwrap(), written);
            prop_assert_eq!(&again[..], &buf[..written]);
        }

        #[test]
        fn a_buffer_one_byte_short_is_refused_without_writing_past_it(owned in any_frame()) {
            let frame = owned.as_frame();
            let len = frame.encoded_len();
            let mut buf = vec![0u8; len - 1];
            prop_assert_eq!(
                frame.encode(&mut buf),
                Err(EncodeError::BufferTooSmall { needed: len, available: len - 1 })
            );
        }

        #[test]
        fn a_sequence_of_frames_decodes_back_in_order(frames in vec(any_frame(), 1..12)) {
            // Adjacent padding runs are one run on the wire.
            let mut expected: Vec<OwnedFrame> = Vec::new();
            for frame in &frames {
                match (expected.last_mut(), frame) {
                    (Some(OwnedFrame::Padding(a)), OwnedFrame::Padding(b)) => *a += b,
                    _ => expected.push(frame.clone()),
                }
            }
            let bytes = encode_all(&frames);
            let decoded: Vec<Frame<'_>> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
            let expected: Vec<Frame<'_>> = expected.iter().map(OwnedFrame::as_frame).collect();
            prop_assert_eq!(decoded, expected);
        }

        #[test]
        fn every_truncation_of_a_frame_is_refused(owned in any_frame(), cut in any::<prop::sample::Index>()) {
            let frame = owned.as_frame();
            let mut buf = vec![0u8; frame.encoded_len()];
            let len = frame.encode(&mut buf).unwrap();
            let cut = cut.index(len);
            // A shorter run of padding is still padding; every other frame
            // cut short is refused.
            if !matches!(frame, Frame::Padding(_)) {
                prop_assert!(Frame::decode_exact(&buf[..cut]).is_err());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_what_decodes_is_canonical(bytes in vec(any::<u8>(), 0..200)) {
            check_decode_is_canonical(&bytes)?;
        }

        #[test]
        fn mutated_valid_frames_never_panic_and_what_decodes_is_canonical(
            frames in vec(any_frame(), 1..6),
            mutations in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = encode_all(&frames);
            for (index, value) in mutations {
                let i = index.index(bytes.len());
                bytes[i] = value;
            }
            check_decode_is_canonical(&bytes)?;
            let cut = cut.index(bytes.len() + 1);
            check_decode_is_canonical(&bytes[..cut])?;
        }
    }

    fn decode_err(bytes: &[u8]) -> DecodeError {
        Frame::decode_exact(bytes).expect_err("must be refused")
    }

    /// A Message frame written by hand: the number as postcard writes any
    /// u64, whatever its size, then the data with its length.
    fn message_bytes(id: u64, data: &[u8]) -> Vec<u8> {
        let mut number = [0u8; 10];
        let number = postcard::to_slice(&id, &mut number).expect("10 bytes hold any u64");
        let mut bytes = vec![FrameType::Message as u8];
        bytes.extend_from_slice(number);
        bytes.push(u8::try_from(data.len()).expect("short data"));
        bytes.extend_from_slice(data);
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A message number is a varint like any other: up to `VARINT_MAX`
        /// it round-trips, above it neither side accepts it.
        #[test]
        fn message_numbers_round_trip_up_to_varint_max_and_are_refused_above(
            below in 0u64..1 << 16,
            above in 0u64..1 << 16,
            far in VARINT_MAX + 1..=u64::MAX,
            data in vec(any::<u8>(), 0..64),
        ) {
            for id in [VARINT_MAX, VARINT_MAX - below] {
                let frame = Frame::Message(Message { id, data: &data });
                let mut buf = vec![0u8; frame.encoded_len()];
                prop_assert_eq!(frame.encode(&mut buf), Ok(buf.len()));
                prop_assert_eq!(&buf, &message_bytes(id, &data));
                prop_assert_eq!(Frame::decode_exact(&buf), Ok(frame));
            }
            for id in [VARINT_MAX + 1, VARINT_MAX + 1 + above, far] {
                let bytes = message_bytes(id, &data);
                prop_assert_eq!(
                    Frame::decode_exact(&bytes),
                    Err(DecodeError::ValueTooLarge(FrameType::Message))
                );
                let frame = Frame::Message(Message { id, data: &data });
                let mut buf = vec![0u8; frame.encoded_len()];
                prop_assert_eq!(
                    frame.encode(&mut buf),
                    Err(EncodeError::ValueTooLarge { field: "message number", value: id })
                );
            }
        }
    }

    #[test]
    fn unknown_frame_types_are_refused() {
        assert_eq!(decode_err(&[0x1d]), DecodeError::UnknownFrameType(0x1d));
        assert_eq!(
            decode_err(&[0xff, 1, 2]),
            DecodeError::UnknownFrameType(0xff)
        );
        assert_eq!(Frame::decode(&[]), Err(DecodeError::Empty));
    }

    #[test]
    fn lengths_past_the_end_are_refused() {
        // Message 7 claiming 5 bytes, carrying 2.
        assert_eq!(
            decode_err(&[0x04, 7, 5, 1, 2]),
            DecodeError::Truncated(FrameType::Message)
        );
        // Stream with a length varint claiming ~2^63 bytes.
        let bytes = [
            0x03, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert!(matches!(
            decode_err(&bytes),
            DecodeError::Truncated(_) | DecodeError::Malformed(_)
        ));
        // Close cut in the middle of its code.
        assert_eq!(
            decode_err(&[0x07, 0x80]),
            DecodeError::Truncated(FrameType::TransportClose)
        );
    }

    #[test]
    fn trailing_bytes_after_a_lone_frame_are_refused() {
        assert_eq!(decode_err(&[0x01, 0x01]), DecodeError::TrailingBytes(1));
        assert_eq!(
            decode_err(&[0x05, 0x07, 0xee, 0xee]),
            DecodeError::TrailingBytes(2)
        );
    }

    #[test]
    fn absurd_values_are_refused() {
        // MaxData of 2^62 (one past VARINT_MAX): 9 bytes of LEB128.
        let mut bytes = vec![0x05];
        bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
        assert_eq!(
            decode_err(&bytes),
            DecodeError::ValueTooLarge(FrameType::MaxData)
        );
        // A varint longer than any u64.
        let overlong = [
            0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(
            decode_err(&overlong),
            DecodeError::Malformed(FrameType::MaxData)
        );
        // Stream ending past 2^62 - 1: offset VARINT_MAX with one byte of data.
        let frame = [0x03, 0x00];
        let mut stream = frame.to_vec();
        stream.extend_from_slice(&[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x00, 0x01, 0xaa,
        ]);
        assert_eq!(
            decode_err(&stream),
            DecodeError::ValueTooLarge(FrameType::Stream)
        );
        // A bool that is neither 0 nor 1.
        assert_eq!(
            decode_err(&[0x03, 0, 0, 2, 0]),
            DecodeError::Malformed(FrameType::Stream)
        );
    }

    #[test]
    fn non_minimal_encodings_are_refused() {
        // MaxData 1 written as two bytes.
        assert_eq!(
            decode_err(&[0x05, 0x81, 0x00]),
            DecodeError::NonCanonical(FrameType::MaxData)
        );
        // An ACK whose additional range has its gap 1 written as two bytes.
        assert_eq!(
            decode_err(&[0x02, 10, 0, 0, 1, 0, 0x81, 0x00, 0]),
            DecodeError::NonCanonical(FrameType::Ack)
        );
        // The same ACK written minimally is accepted.
        assert!(Frame::decode_exact(&[0x02, 10, 0, 0, 1, 0, 1, 0]).is_ok());
    }

    #[test]
    fn ack_ranges_below_zero_or_too_many_are_refused() {
        // largest 3, first range 4: would start at -1.
        assert!(matches!(
            decode_err(&[0x02, 3, 0, 0, 0, 4]),
            DecodeError::InvalidAckRanges(_)
        ));
        // largest 10, first range 0, one more range with gap 9: 10 - 9 - 2 < 0.
        assert!(matches!(
            decode_err(&[0x02, 10, 0, 0, 1, 0, 9, 0]),
            DecodeError::InvalidAckRanges(_)
        ));
        // 64 additional ranges claimed: over MAX_ACK_RANGES.
        assert!(matches!(
            decode_err(&[0x02, 10, 0, 0, 64, 0]),
            DecodeError::InvalidAckRanges(_)
        ));
        // One additional range claimed, none present.
        assert_eq!(
            decode_err(&[0x02, 10, 0, 0, 1, 0]),
            DecodeError::Truncated(FrameType::Ack)
        );
    }

    #[test]
    fn ack_wire_layout_matches_rfc_9000_gap_encoding() {
        let ranges = [100..=105, 90..=97, 0..=0];
        let frame = Frame::Ack(Ack {
            ranges: AckFrameRanges::new(&ranges).unwrap(),
            ack_delay: Duration::from_micros(25),
            receive_time: Duration::from_micros(1000),
        });
        let mut buf = [0u8; 32];
        let len = frame.encode(&mut buf).unwrap();
        // type, largest 105, delay 25, receive 1000 (0xe8 0x07), 2 more ranges, first 5,
        // then (gap 100-97-2 = 1, len 7) and (gap 90-0-2 = 88, len 0).
        assert_eq!(&buf[..len], &[0x02, 105, 25, 0xe8, 0x07, 2, 5, 1, 7, 88, 0]);
        let Frame::Ack(decoded) = Frame::decode_exact(&buf[..len]).unwrap() else {
            panic!()
        };
        assert_eq!(decoded.ranges.iter().collect::<Vec<_>>(), ranges.to_vec());
    }

    #[test]
    fn ack_frequency_layout_and_bounds() {
        let request = Frame::AckFrequency(AckFrequency {
            sequence: 7,
            ack_eliciting_threshold: 10,
            max_ack_delay: Duration::from_millis(25),
        });
        let mut buf = [0u8; 32];
        let len = request.encode(&mut buf).unwrap();
        // type, sequence 7, threshold 10, 25 000 µs (a8 c3 01).
        assert_eq!(&buf[..len], &[0x11, 7, 10, 0xa8, 0xc3, 0x01]);
        assert_eq!(Frame::decode_exact(&buf[..len]).unwrap(), request);

        let limit = Frame::AckFrequency(AckFrequency {
            sequence: VARINT_MAX,
            ack_eliciting_threshold: u32::MAX,
            max_ack_delay: MAX_REQUESTED_ACK_DELAY,
        });
        let len = limit.encode(&mut buf).unwrap();
        assert_eq!(Frame::decode_exact(&buf[..len]).unwrap(), limit);

        let ty = FrameType::AckFrequency;
        // Threshold 0.
        assert_eq!(decode_err(&[0x11, 1, 0, 1]), DecodeError::Zero(ty));
        // Threshold 2^32: five bytes of LEB128.
        assert_eq!(
            decode_err(&[0x11, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1]),
            DecodeError::ValueTooLarge(ty)
        );
        // 16 384 001 µs, one past 2^14 ms: 81 80 e8 07.
        assert_eq!(
            decode_err(&[0x11, 1, 1, 0x81, 0x80, 0xe8, 0x07]),
            DecodeError::ValueTooLarge(ty)
        );
        assert!(Frame::decode_exact(&[0x11, 1, 1, 0x80, 0x80, 0xe8, 0x07]).is_ok());
        // Sequence 2^62.
        let mut too_far = vec![0x11];
        too_far.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
        too_far.extend_from_slice(&[1, 1]);
        assert_eq!(decode_err(&too_far), DecodeError::ValueTooLarge(ty));
        // Cut inside the delay.
        assert_eq!(decode_err(&[0x11, 1, 1, 0x80]), DecodeError::Truncated(ty));

        let refused = |sequence, ack_eliciting_threshold, max_ack_delay| {
            Frame::AckFrequency(AckFrequency {
                sequence,
                ack_eliciting_threshold,
                max_ack_delay,
            })
            .encode(&mut [0u8; 32])
        };
        assert_eq!(
            refused(1, 0, Duration::ZERO),
            Err(EncodeError::Zero("ack-eliciting threshold"))
        );
        assert!(matches!(
            refused(1, 1, MAX_REQUESTED_ACK_DELAY + Duration::from_micros(1)),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        assert!(matches!(
            refused(VARINT_MAX + 1, 1, Duration::ZERO),
            Err(EncodeError::ValueTooLarge { .. })
        ));
    }

    #[test]
    fn refused_frames_on_encode() {
        let mut buf = [0u8; 64];
        assert_eq!(
            Frame::Padding(Padding { len: 0 }).encode(&mut buf),
            Err(EncodeError::EmptyPadding)
        );
        let too_far = Frame::Stream(Stream {
            id: 0,
            offset: VARINT_MAX,
            fin: false,
            data: b"x",
        });
        assert!(matches!(
            too_far.encode(&mut buf),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        let huge_delay = Frame::Ack(Ack {
            ranges: AckFrameRanges::new(&[0..=0]).unwrap(),
            ack_delay: Duration::MAX,
            receive_time: Duration::ZERO,
        });
        assert!(matches!(
            huge_delay.encode(&mut buf),
            Err(EncodeError::ValueTooLarge { .. })
        ));
    }
}
