//! Frames out of a packet payload: [`Frame::decode`] (the frames on every
//! packet's path read by hand in [`super::read`], the rest with postcard),
//! postcard's reading of every frame type, the [`Frames`] iterator, and
//! [`Frames::handle`], which hands each frame to a [`FrameHandler`] where
//! it is read.

use core::time::Duration;

use super::{
    AckFrequencyBody, AckHead, CloseBody, DatagramBody, IdentityBody, MAX_REQUESTED_ACK_DELAY_US,
    MaxDataBody, MaxStreamDataBody, MessageBody, PathBody, ResetStreamBody, StopSendingBody,
    StreamBody, body_error, bounded, next_ack_range, observed_address, read, rendezvous, take,
};
use crate::error::DecodeError;
use crate::frame::{
    Ack, AckFrameRanges, AckFrequency, Close, CloseKind, DataBlocked, Datagram, Frame, FrameType,
    Identity, MAX_ACK_RANGES, MaxData, MaxMessageSize, MaxStreamData, MaxStreams, Message,
    NewTicket, Padding, PathChallenge, PathResponse, ResetStream, StopSending, Stream,
    StreamDataBlocked,
};
use crate::ticket::TICKET_LEN;
use crate::varint::{VARINT_MAX, varint_len};

impl<'a> Frame<'a> {
    /// Decodes the frame at the start of `bytes`, returning it and the number
    /// of bytes it took. Data, reasons and ACK ranges borrow from `bytes`.
    ///
    /// The frames on every packet's path are read by hand, the rest with
    /// postcard, which defines every frame's encoding; both accept and
    /// refuse the same bytes.
    #[inline]
    pub fn decode(bytes: &'a [u8]) -> Result<(Self, usize), DecodeError> {
        let (&type_byte, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match read::hot_frame(type_byte, body) {
            Some(Ok((frame, rest))) => Ok((frame, bytes.len() - rest.len())),
            Some(Err(error)) => Err(error),
            None => Self::decode_with_postcard(bytes),
        }
    }

    /// Decodes the frame at the start of `bytes` with postcard: the
    /// definition of every frame's encoding, and the decoder of the frames
    /// [`read`] leaves out. A property test holds [`Frame::decode`] to it.
    pub(crate) fn decode_with_postcard(bytes: &'a [u8]) -> Result<(Self, usize), DecodeError> {
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

/// An ACK frame's body, with postcard.
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
        let ((gap, length), after) =
            postcard::take_from_bytes::<(u64, u64)>(rest).map_err(|e| body_error(ty, e))?;
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

/// What the frames of a packet are handed to by [`Frames::handle`], each
/// where it is read.
///
/// A peer decides how many frames a packet holds, hundreds of small ones if
/// it likes, so each costs per attacker byte: the frames that carry data
/// and the ACK have a method of their own and reach it without being made
/// a [`Frame`] and moved through an iterator (about 45 instructions a
/// frame). Each but [`on_ack`](Self::on_ack) defaults to
/// [`on_frame`](Self::on_frame).
pub trait FrameHandler<'a> {
    /// Why the handler stopped reading: a frame it refused, or one that
    /// could not be decoded.
    type Stop: From<DecodeError>;

    /// A frame with no method of its own (or a handler that takes every
    /// frame here).
    fn on_frame(&mut self, frame: Frame<'a>) -> Result<(), Self::Stop>;

    /// A `Ping` frame.
    #[inline]
    fn on_ping(&mut self) -> Result<(), Self::Stop> {
        self.on_frame(Frame::Ping)
    }

    /// An `Ack` frame. Its ranges were worked out once as they were
    /// validated and are borrowed from the reader, not the packet, so it
    /// lives only for the call and has no [`on_frame`](Self::on_frame)
    /// default: a handler that keeps it copies what it needs.
    fn on_ack(&mut self, frame: Ack<'_>) -> Result<(), Self::Stop>;

    /// A `Stream` frame.
    #[inline]
    fn on_stream(&mut self, frame: Stream<'a>) -> Result<(), Self::Stop> {
        self.on_frame(Frame::Stream(frame))
    }

    /// A `Message` frame.
    #[inline]
    fn on_message(&mut self, frame: Message<'a>) -> Result<(), Self::Stop> {
        self.on_frame(Frame::Message(frame))
    }

    /// A `Datagram` frame.
    #[inline]
    fn on_datagram(&mut self, frame: Datagram<'a>) -> Result<(), Self::Stop> {
        self.on_frame(Frame::Datagram(frame))
    }
}

/// The most ranges an ACK may hold to be read into a buffer of that size
/// rather than of [`MAX_ACK_RANGES`]: clearing the large one costs more
/// than reading a few ranges.
const SMALL_ACK: usize = 8;

/// Reads an ACK's ranges into a buffer of `N` on the stack, then hands the
/// frame to `handler`.
#[inline(always)]
fn hand_ack<'a, H: FrameHandler<'a>, const N: usize>(
    handler: &mut H,
    fields: read::AckFields,
    pairs: &'a [u8],
) -> Result<&'a [u8], H::Stop> {
    let mut kept = [(0, 0); N];
    let (frame, after) = read::ack_kept(fields, pairs, &mut kept)?;
    handler.on_ack(frame)?;
    Ok(after)
}

impl<'a> Frames<'a> {
    /// Hands every frame left to `handler`, in order, each as it is read;
    /// stops at the first the handler refuses or that cannot be decoded
    /// (the same frames, accepted or refused alike, as the iterator).
    pub fn handle<H: FrameHandler<'a>>(self, handler: &mut H) -> Result<(), H::Stop> {
        let mut rest = self.rest;
        while let Some((&ty, body)) = rest.split_first() {
            rest = match ty {
                read::STREAM => {
                    let (frame, after) = read::stream(body)?;
                    handler.on_stream(frame)?;
                    after
                }
                read::MESSAGE => {
                    let (frame, after) = read::message(body)?;
                    handler.on_message(frame)?;
                    after
                }
                read::DATAGRAM => {
                    let (frame, after) = read::datagram(body)?;
                    handler.on_datagram(frame)?;
                    after
                }
                read::ACK => {
                    let (fields, pairs) = read::ack_head(body)?;
                    if fields.ranges() <= SMALL_ACK {
                        hand_ack::<H, SMALL_ACK>(handler, fields, pairs)?
                    } else {
                        hand_ack::<H, MAX_ACK_RANGES>(handler, fields, pairs)?
                    }
                }
                read::PING => {
                    handler.on_ping()?;
                    body
                }
                _ => {
                    let (frame, used) = Frame::decode(rest)?;
                    handler.on_frame(frame)?;
                    &rest[used..]
                }
            };
        }
        Ok(())
    }
}
