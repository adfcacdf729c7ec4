//! The frames a protected packet carries, as values that borrow from the packet.
//!
//! A packet's plaintext is a sequence of frames. Decoded frames point into the
//! opened packet buffer (`Stream`, `Message` and `Datagram` data, a `Close`
//! reason, the ACK ranges), so decoding never copies payload and never allocates. The
//! encodings live in [`crate::codec`]; the byte layouts are in
//! `docs/wire-format.md`.

use core::net::SocketAddr;
use core::time::Duration;

pub use crate::rendezvous::{
    ConnectVia, Introduce, IntroductionRefused, Register, RelayGrant, RelayRefused, RelayRequest,
};
#[cfg(doc)]
use crate::varint::VARINT_MAX;

mod ack_ranges;

pub(crate) use ack_ranges::AckFrameRangesRepr;
pub use ack_ranges::{AckFrameRanges, AckFrameRangesIter};

/// The most ranges one ACK frame may carry.
///
/// A receiver reports the newest ranges first; older holes are reported again
/// in later ACKs, so a bound loses nothing and keeps decoding cost and the
/// frame's size predictable. Decoders refuse frames that claim more.
pub const MAX_ACK_RANGES: usize = 64;

/// The type byte that starts every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    /// [`Frame::Padding`]: each zero byte is one byte of padding.
    Padding = 0x00,
    /// [`Frame::Ping`].
    Ping = 0x01,
    /// [`Frame::Ack`].
    Ack = 0x02,
    /// [`Frame::Stream`].
    Stream = 0x03,
    /// [`Frame::Message`].
    Message = 0x04,
    /// [`Frame::MaxData`].
    MaxData = 0x05,
    /// [`Frame::MaxStreamData`].
    MaxStreamData = 0x06,
    /// [`Frame::Close`] with [`CloseKind::Transport`].
    TransportClose = 0x07,
    /// [`Frame::Close`] with [`CloseKind::Application`].
    ApplicationClose = 0x08,
    /// [`Frame::ResetStream`].
    ResetStream = 0x09,
    /// [`Frame::StopSending`].
    StopSending = 0x0a,
    /// [`Frame::DataBlocked`].
    DataBlocked = 0x0b,
    /// [`Frame::StreamDataBlocked`].
    StreamDataBlocked = 0x0c,
    /// [`Frame::MaxStreams`].
    MaxStreams = 0x0d,
    /// [`Frame::PathChallenge`].
    PathChallenge = 0x0e,
    /// [`Frame::PathResponse`].
    PathResponse = 0x0f,
    /// [`Frame::Datagram`].
    Datagram = 0x10,
    /// [`Frame::AckFrequency`].
    AckFrequency = 0x11,
    /// [`Frame::Identity`].
    Identity = 0x12,
    /// [`Frame::MaxMessageSize`].
    MaxMessageSize = 0x13,
    /// [`Frame::ObservedAddress`].
    ObservedAddress = 0x14,
    /// [`Frame::Register`].
    Register = 0x16,
    /// [`Frame::ConnectVia`].
    ConnectVia = 0x17,
    /// [`Frame::Introduce`].
    Introduce = 0x18,
    /// [`Frame::IntroductionRefused`].
    IntroductionRefused = 0x19,
    /// [`Frame::RelayRequest`].
    RelayRequest = 0x1a,
    /// [`Frame::RelayGrant`].
    RelayGrant = 0x1b,
    /// [`Frame::RelayRefused`].
    RelayRefused = 0x1c,
    /// [`Frame::NewTicket`].
    NewTicket = 0x15,
}

impl FrameType {
    /// The frame type for a type byte, if Tern knows it.
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0x00 => Self::Padding,
            0x01 => Self::Ping,
            0x02 => Self::Ack,
            0x03 => Self::Stream,
            0x04 => Self::Message,
            0x05 => Self::MaxData,
            0x06 => Self::MaxStreamData,
            0x07 => Self::TransportClose,
            0x08 => Self::ApplicationClose,
            0x09 => Self::ResetStream,
            0x0a => Self::StopSending,
            0x0b => Self::DataBlocked,
            0x0c => Self::StreamDataBlocked,
            0x0d => Self::MaxStreams,
            0x0e => Self::PathChallenge,
            0x0f => Self::PathResponse,
            0x10 => Self::Datagram,
            0x11 => Self::AckFrequency,
            0x12 => Self::Identity,
            0x13 => Self::MaxMessageSize,
            0x14 => Self::ObservedAddress,
            0x16 => Self::Register,
            0x17 => Self::ConnectVia,
            0x18 => Self::Introduce,
            0x19 => Self::IntroductionRefused,
            0x1a => Self::RelayRequest,
            0x1b => Self::RelayGrant,
            0x1c => Self::RelayRefused,
            0x15 => Self::NewTicket,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Filler bytes, e.g. to reach a probe size.
    Padding(Padding),
    /// Asks for an acknowledgement and nothing else (keep-alive, RTT probe).
    Ping,
    /// Acknowledges received packets.
    Ack(Ack<'a>),
    /// Bytes of an ordered byte stream.
    Stream(Stream<'a>),
    /// A whole message that fits one packet, delivered reliably.
    Message(Message<'a>),
    /// Connection-level flow control limit.
    MaxData(MaxData),
    /// Stream-level flow control limit.
    MaxStreamData(MaxStreamData),
    /// The sender closes the connection.
    Close(Close<'a>),
    /// The sender abandons sending on a stream.
    ResetStream(ResetStream),
    /// The sender asks its peer to stop sending on a stream.
    StopSending(StopSending),
    /// The sender has data to send but the connection's limit stops it.
    DataBlocked(DataBlocked),
    /// The sender has data to send but the stream's limit stops it.
    StreamDataBlocked(StreamDataBlocked),
    /// How many streams the peer may open.
    MaxStreams(MaxStreams),
    /// Asks the peer to echo 8 bytes from the address it sees this packet come from.
    PathChallenge(PathChallenge),
    /// Echoes a path challenge.
    PathResponse(PathResponse),
    /// An unreliable datagram: never retransmitted.
    Datagram(Datagram<'a>),
    /// How often the sender asks its peer to acknowledge.
    AckFrequency(AckFrequency),
    /// The initiator proves its RSA identity for this session.
    Identity(Identity<'a>),
    /// The largest message the sender of this frame accepts.
    MaxMessageSize(MaxMessageSize),
    /// The address the sender sees the receiver's packets come from.
    ObservedAddress(ObservedAddress),
    /// The sender asks the receiver, a rendezvous, to introduce it to
    /// whoever asks for its key.
    Register(Register),
    /// The sender asks the receiver, a rendezvous, for an introduction.
    ConnectVia(ConnectVia),
    /// A rendezvous introduces the receiver to a peer.
    Introduce(Introduce),
    /// A rendezvous refuses an introduction the receiver asked for.
    IntroductionRefused(IntroductionRefused),
    /// The sender asks the receiver, a rendezvous, to relay its connection
    /// to a peer.
    RelayRequest(RelayRequest),
    /// A rendezvous grants the receiver a relay slot toward a peer.
    RelayGrant(RelayGrant),
    /// A rendezvous refuses a relay the receiver asked for.
    RelayRefused(RelayRefused),
    /// A resumption ticket from the responder.
    NewTicket(NewTicket<'a>),
}

impl Frame<'_> {
    /// This frame's type byte.
    #[must_use]
    pub const fn frame_type(&self) -> FrameType {
        match self {
            Self::Padding(_) => FrameType::Padding,
            Self::Ping => FrameType::Ping,
            Self::Ack(_) => FrameType::Ack,
            Self::Stream(_) => FrameType::Stream,
            Self::Message(_) => FrameType::Message,
            Self::MaxData(_) => FrameType::MaxData,
            Self::MaxStreamData(_) => FrameType::MaxStreamData,
            Self::Close(Close {
                kind: CloseKind::Transport,
                ..
            }) => FrameType::TransportClose,
            Self::Close(Close {
                kind: CloseKind::Application,
                ..
            }) => FrameType::ApplicationClose,
            Self::ResetStream(_) => FrameType::ResetStream,
            Self::StopSending(_) => FrameType::StopSending,
            Self::DataBlocked(_) => FrameType::DataBlocked,
            Self::StreamDataBlocked(_) => FrameType::StreamDataBlocked,
            Self::MaxStreams(_) => FrameType::MaxStreams,
            Self::PathChallenge(_) => FrameType::PathChallenge,
            Self::PathResponse(_) => FrameType::PathResponse,
            Self::Datagram(_) => FrameType::Datagram,
            Self::AckFrequency(_) => FrameType::AckFrequency,
            Self::Identity(_) => FrameType::Identity,
            Self::MaxMessageSize(_) => FrameType::MaxMessageSize,
            Self::ObservedAddress(_) => FrameType::ObservedAddress,
            Self::Register(_) => FrameType::Register,
            Self::ConnectVia(_) => FrameType::ConnectVia,
            Self::Introduce(_) => FrameType::Introduce,
            Self::IntroductionRefused(_) => FrameType::IntroductionRefused,
            Self::RelayRequest(_) => FrameType::RelayRequest,
            Self::RelayGrant(_) => FrameType::RelayGrant,
            Self::RelayRefused(_) => FrameType::RelayRefused,
            Self::NewTicket(_) => FrameType::NewTicket,
        }
    }

    /// Whether receiving this frame obliges the peer to acknowledge the packet.
    ///
    /// As in RFC 9002 §2: ACK, padding and close frames are not
    /// ack-eliciting, so two peers never acknowledge each other's
    /// acknowledgements forever, and a closing peer is not answered.
    #[must_use]
    pub const fn is_ack_eliciting(&self) -> bool {
        !matches!(self, Self::Ack(_) | Self::Padding(_) | Self::Close(_))
    }
}

/// `len` bytes of padding. On the wire every padding byte is a zero, and a
/// decoder returns a run of zeros as one `Padding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Padding {
    /// Number of padding bytes, at least 1.
    pub len: usize,
}

/// An acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack<'a> {
    /// The acknowledged packet numbers, largest range first.
    pub ranges: AckFrameRanges<'a>,
    /// How long the receiver held the largest acknowledged packet before this
    /// ACK was sent, so the sender can subtract it from its RTT sample
    /// (RFC 9002 §5.3). Carried in whole microseconds.
    pub ack_delay: Duration,
    /// The one-way-delay sample for LEDBAT: when the largest acknowledged
    /// packet arrived, on the receiver's clock (microseconds since an epoch of
    /// the receiver's choosing). The sender subtracts its own send time; the
    /// unknown offset between the two clocks cancels out because LEDBAT only
    /// uses the delay above the smallest one seen (RFC 6817 §3.4.2:
    /// "queuing_delay = current_delay() - base_delay()").
    pub receive_time: Duration,
}

/// Bytes of an ordered stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream<'a> {
    /// The stream id.
    pub id: u64,
    /// Where `data` starts in the stream.
    pub offset: u64,
    /// Whether `data` ends the stream.
    pub fin: bool,
    /// The bytes.
    pub data: &'a [u8],
}

/// A whole application message in one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message's number: the sender numbers its messages 0, 1, 2, ...
    /// so the receiver delivers each once, however often it arrives. At
    /// most [`VARINT_MAX`], like every varint.
    pub id: u64,
    /// The message.
    pub data: &'a [u8],
}

/// The total number of stream bytes the sender of this frame is willing to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxData {
    /// Limit in bytes, summed over all streams.
    pub max: u64,
}

/// The number of bytes of one stream the sender of this frame is willing to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxStreamData {
    /// The stream id.
    pub id: u64,
    /// Limit in bytes: the largest offset + 1 the peer may send.
    pub max: u64,
}

/// Whose error a [`Close`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseKind {
    /// A transport error (protocol violation, idle timeout, ...), in Tern's code space.
    Transport,
    /// The application closed the connection, with its own code.
    Application,
}

/// The sender closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close<'a> {
    /// Whose code space `code` is in.
    pub kind: CloseKind,
    /// The error code.
    pub code: u64,
    /// Human-readable reason (UTF-8 by convention; not checked).
    pub reason: &'a [u8],
}

/// The sender abandons sending on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetStream {
    /// The stream id.
    pub id: u64,
    /// The application's error code.
    pub error_code: u64,
    /// The stream's final size: the bytes the sender had sent on it.
    pub final_size: u64,
}

/// The sender asks its peer to stop sending on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSending {
    /// The stream id.
    pub id: u64,
    /// The application's error code.
    pub error_code: u64,
}

/// The sender is blocked by the connection's flow-control limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBlocked {
    /// The limit it is blocked at.
    pub limit: u64,
}

/// The sender is blocked by a stream's flow-control limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamDataBlocked {
    /// The stream id.
    pub id: u64,
    /// The limit it is blocked at.
    pub limit: u64,
}

/// The receiver's bound on stream ids: the peer may open streams with ids
/// below `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxStreams {
    /// One past the largest stream id the peer may use.
    pub max: u64,
}

/// Eight unpredictable bytes the peer must echo in a [`PathResponse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathChallenge {
    /// The challenge.
    pub data: [u8; 8],
}

/// The echo of a [`PathChallenge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathResponse {
    /// The challenge's bytes.
    pub data: [u8; 8],
}

/// An unreliable datagram: delivered at most once, never retransmitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The datagram.
    pub data: &'a [u8],
}

/// The longest ACK delay an [`AckFrequency`] frame may ask for: 2^14 ms.
///
/// RFC 9000 §18.2 calls a max_ack_delay of "2^14 or greater" milliseconds
/// invalid; Tern refuses anything above 2^14 ms, the same bound
/// tern-reliability puts on a reported ACK delay.
pub const MAX_REQUESTED_ACK_DELAY: Duration = Duration::from_millis(1 << 14);

/// A sender's request for how often its peer acknowledges (the QUIC ACK
/// frequency draft's ACK_FREQUENCY frame without its reordering threshold).
///
/// tern-reliability's `AckPolicy::on_ack_frequency` applies it; the fields
/// are the same as its own `AckFrequency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFrequency {
    /// Grows with every request; a receiver ignores a request whose sequence
    /// is not above the last one it applied (frames may arrive out of order).
    pub sequence: u64,
    /// Ack-eliciting packets the receiver may receive before an ACK is due;
    /// at least 1.
    pub ack_eliciting_threshold: u32,
    /// The longest the receiver should delay an ACK, at most
    /// [`MAX_REQUESTED_ACK_DELAY`]. Carried in whole microseconds.
    pub max_ack_delay: Duration,
}

/// The initiator's RSA identity and its signature over this session's
/// handshake transcript; [`Identity::verify`] checks it (see
/// [`crate::proof`]). The codec only delimits the two byte strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    /// The initiator's RSA-2048 public key, SubjectPublicKeyInfo DER.
    pub public_key: &'a [u8],
    /// RSASSA-PSS (SHA-256) signature over the session's transcript.
    pub signature: &'a [u8],
}

/// The largest message a peer assumes its other end accepts until a
/// [`MaxMessageSize`] frame says otherwise: 1 GiB. Part of the wire
/// format: both ends assume it, so an endpoint whose limit is this one
/// need not send the frame.
pub const DEFAULT_MAX_MESSAGE_SIZE: u64 = 1 << 30;

/// The largest message, in bytes, the sender of this frame accepts; a
/// larger one is a protocol violation. Sent once per connection (again if
/// lost) by an endpoint whose limit is not [`DEFAULT_MAX_MESSAGE_SIZE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxMessageSize {
    /// The limit in bytes, at most [`VARINT_MAX`].
    pub max: u64,
}

/// The address the sender sees its peer's packets come from: behind a NAT,
/// the peer's public address, which the peer cannot learn by itself.
///
/// Sent once after the handshake and again whenever the address changes.
/// The codec refuses an address no packet can come from (an unspecified,
/// multicast or broadcast address, or port 0); an IPv6 address's flow label
/// and scope are not carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedAddress {
    /// Grows with every new address the sender reports; a receiver keeps
    /// the report with the largest sequence (frames may arrive out of
    /// order, or again). At most [`VARINT_MAX`].
    pub sequence: u64,
    /// The address the receiver's packets come from, as the sender sees it.
    pub address: SocketAddr,
}

/// A resumption ticket (wire format §6.6): the responder sends one once
/// the handshake is confirmed, and the initiator may present it, once,
/// in its next intro to the same responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewTicket<'a> {
    /// How long the ticket may be used, in seconds from its arrival. At
    /// most [`VARINT_MAX`].
    pub lifetime_s: u64,
    /// The ticket, opaque to the initiator.
    pub ticket: &'a crate::Ticket,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ack_padding_and_close_are_not_ack_eliciting() {
        assert!(Frame::Ping.is_ack_eliciting());
        assert!(!Frame::Padding(Padding { len: 3 }).is_ack_eliciting());
        for kind in [CloseKind::Transport, CloseKind::Application] {
            let close = Frame::Close(Close {
                kind,
                code: 1,
                reason: b"",
            });
            assert!(!close.is_ack_eliciting());
        }
        assert!(Frame::Datagram(Datagram { data: b"x" }).is_ack_eliciting());
        assert!(Frame::PathChallenge(PathChallenge { data: [1; 8] }).is_ack_eliciting());
        assert!(Frame::MaxData(MaxData { max: 1 }).is_ack_eliciting());
        let request = Frame::AckFrequency(AckFrequency {
            sequence: 1,
            ack_eliciting_threshold: 10,
            max_ack_delay: Duration::from_millis(25),
        });
        assert!(request.is_ack_eliciting());
        let proof = Frame::Identity(Identity {
            public_key: b"key",
            signature: b"signature",
        });
        assert!(proof.is_ack_eliciting());
        assert!(Frame::MaxMessageSize(MaxMessageSize { max: 1 << 16 }).is_ack_eliciting());
    }
}
