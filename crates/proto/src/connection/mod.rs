//! One connection: the state machine that ties packet protection
//! (tern-wire), loss recovery (tern-reliability) and congestion control
//! (tern-congestion) to the application's messages, streams and datagrams.
//!
//! A [`Connection`] lives in an [`Endpoint`](super::Endpoint), which finds it
//! from the receiver index its packets carry and makes its calls in this
//! order, with the same `now` for one turn:
//!
//! 1. `handle_datagram` for each datagram that arrived for it: packets are
//!    opened in place, duplicates dropped, ACKs processed at once (so a
//!    sender that never reads still learns what was delivered), frames
//!    dispatched;
//! 2. `handle_timeout` when [`Connection::poll_timeout`]'s deadline passed:
//!    intro re-sends, loss and probe timers, path and MTU timers,
//!    keep-alive, idle timeout;
//! 3. `poll_transmit` until it has nothing more: each call fills one
//!    datagram, or a run of equal-size datagrams for one GSO send, into the
//!    caller's buffer;
//! 4. [`Connection::poll_timeout`] for the next wake-up.
//!
//! Between turns the application calls the commands (`send_message`,
//! `open_stream`, `write`, `read`, `close`, ...) and drains
//! [`Connection::poll_event`].

mod carried;
pub(crate) mod path;
pub(crate) mod streams;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use quanta::Instant;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_core::CryptoRngCore;
use tern_congestion::{
    Acked, AnyController, Controller, Lost, OneWayDelay, Pacer, PacerConfig, Rtt, Take, TokenBucket,
};
use tern_reliability::{
    AckError, AckFrequency, AckPolicy, AckPolicyConfig, AckRanges, LossConfig, LossDetector,
    RecoveryBuffer, ReplayWindow, SentPacket, TimerEvent,
};
use tern_wire::{
    Accepted, Ack, AckFrameRanges, Close, CloseKind, ConnectionKeys, DecodeError, Frame, INTRO_LEN,
    KeyConfig, MAX_ACK_RANGES, PacketBuilder, PacketType, PathChallenge, PathResponse,
    PendingIntro, PublicIdentity, Transcript,
};

use crate::{ConnectionConfig, Direction, Side, StreamId, Transmit, TransmitLimits};
use carried::{Carried, CarriedRecord};
use path::{ChallengeToken, Path, PathTimeout};
pub use streams::ReadOutcome;
use streams::flow_control::FlowControlError;
use streams::messages::{MESSAGE_WINDOW, MessageReceiver, MessageSender, MessageWindowError};
use streams::recv_stream::StreamError;
use streams::scheduler::Urgency;
use streams::stream_id::StreamIdError;
use streams::{StreamRun, Streams, Turn};

/// Something the application should know about; drained with
/// [`Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished: data flows.
    Connected,
    /// A whole message arrived ([`Connection::recv_message`]).
    MessageReceived,
    /// A datagram arrived ([`Connection::recv_datagram`]).
    DatagramReceived,
    /// The peer opened a stream ([`Connection::accept_stream`]).
    StreamOpened,
    /// A stream has bytes to read, ended, or was reset by the peer.
    StreamReadable(StreamId),
    /// A stream whose last write took less than it was given has room
    /// again, or the peer asked it to stop.
    StreamWritable(StreamId),
    /// Messages were acknowledged, or the peer allows more large ones:
    /// `send_message` has room again.
    MessagesWritable,
    /// The peer allows more bidirectional streams: `open_stream` may succeed.
    StreamsAvailable,
    /// The connection is over.
    Closed(ConnectionError),
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// No reply to the intro within the handshake timeout: nobody listens
    /// there, or not with the key that was used.
    #[error("the handshake timed out")]
    HandshakeTimedOut,
    /// Nothing arrived from the peer within the idle timeout.
    #[error("the connection timed out")]
    TimedOut,
    /// The peer closed the connection.
    #[error("closed by the peer ({kind:?} code {code})")]
    PeerClosed {
        /// Whose code it is.
        kind: CloseKind,
        /// The code.
        code: u64,
        /// The peer's reason, as it sent it.
        reason: Bytes,
    },
    /// This side closed the connection.
    #[error("closed locally (code {code})")]
    LocallyClosed {
        /// The application's code.
        code: u64,
    },
    /// The peer broke the protocol; the connection was closed with a
    /// transport error.
    #[error("protocol violation: {0}")]
    Protocol(#[from] ProtocolError),
}

/// A rule of the protocol that the peer broke (after its packet was
/// authenticated: unauthenticated garbage is only counted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame did not decode.
    #[error("malformed frame: {0}")]
    Frame(#[from] DecodeError),
    /// An ACK acknowledged a packet never sent, or was malformed.
    #[error("invalid ACK: {0}")]
    Ack(#[from] AckError),
    /// A stream id the peer may not use.
    #[error("stream: {0}")]
    Stream(StreamIdError),
    /// Stream data broke flow control or the final size.
    #[error("stream data: {0}")]
    StreamData(StreamError),
    /// More data than the connection window allows.
    #[error("{0}")]
    FlowControl(FlowControlError),
    /// A message numbered too far ahead.
    #[error("{0}")]
    MessageWindow(MessageWindowError),
    /// A message larger than this side accepts.
    #[error("message larger than the configured maximum")]
    MessageTooLarge,
}

/// Transport close codes Tern sends.
mod close_code {
    /// A peer broke the protocol.
    pub(super) const PROTOCOL_VIOLATION: u64 = 1;
}

/// Why a write, finish or reset on a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// No such stream to send on (never opened, done with, or one-way).
    #[error("unknown stream {0:?}")]
    UnknownStream(StreamId),
    /// The peer asked this side to stop sending, or the stream was reset.
    #[error("stream stopped (code {0})")]
    Stopped(u64),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Why a read or stop-sending on a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No such stream to read (never opened, fully read, or one-way).
    #[error("unknown stream {0:?}")]
    UnknownStream(StreamId),
    /// The peer reset the stream.
    #[error("stream reset by the peer (code {0})")]
    Reset(u64),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Why `send_message` or `send_datagram` did not take its bytes.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send buffer is full: try again after [`Event::MessagesWritable`].
    #[error("the send buffer is full")]
    Blocked(Bytes),
    /// A datagram larger than a packet can carry.
    #[error("datagram of {0} bytes does not fit a packet")]
    TooLarge(usize),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

impl std::fmt::Debug for SendError {
    // The refused bytes can be large: their length says enough.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Blocked(message) => write!(f, "Blocked({} bytes)", message.len()),
            Self::TooLarge(len) => write!(f, "TooLarge({len})"),
            Self::Closed => f.write_str("Closed"),
        }
    }
}

/// Figures about one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Congestion window in bytes.
    pub window: u64,
    /// Bytes in flight now.
    pub bytes_in_flight: u64,
    /// Datagrams and bytes sent.
    pub sent_packets: u64,
    /// UDP payload bytes sent.
    pub sent_bytes: u64,
    /// Datagrams received and authenticated.
    pub received_packets: u64,
    /// UDP payload bytes received in authenticated packets.
    pub received_bytes: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Losses later proven spurious.
    pub spurious_losses: u64,
    /// Datagrams that did not authenticate (forged, corrupted, stale).
    pub dropped_unauthenticated: u64,
    /// Authenticated packets that were duplicates or too old.
    pub dropped_duplicates: u64,
    /// The current maximum UDP payload of the path.
    pub path_mtu: usize,
    /// Key updates this side made.
    pub key_updates: u64,
    /// Address changes of the peer that were validated.
    pub migrations: u64,
    /// Unreliable datagrams dropped: too large when sent, or the receive
    /// queue was full.
    pub datagrams_dropped: u64,
}

/// The initiator's handshake until the reply arrives.
#[derive(Debug)]
struct Connecting {
    pending: Option<PendingIntro>,
    intro: Box<[u8]>,
    resend_at: Instant,
    backoff: Duration,
    deadline: Instant,
}

#[derive(Debug)]
enum State {
    /// Initiator: intro sent, no reply yet.
    Connecting(Box<Connecting>),
    /// Keys on both sides.
    Established,
    /// This side sent Close; it answers further packets with it, and sends
    /// it again at `resend_at` (once a probe timeout, so that a peer with
    /// nothing to send still hears it over a lossy path), until `until`.
    Closing { until: Instant, resend_at: Instant },
    /// The peer sent Close; nothing is sent until `until`.
    Draining { until: Instant },
    /// Over; the endpoint frees it.
    Closed,
}

/// What every new connection starts from.
#[derive(Debug)]
pub(crate) struct Start {
    /// Its configuration.
    pub(crate) config: ConnectionConfig,
    /// Its congestion controller, fresh.
    pub(crate) controller: AnyController,
    /// This side's receiver index for it.
    pub(crate) local_index: u32,
    /// The time it starts.
    pub(crate) now: Instant,
}

/// The smallest datagram worth building (an ACK, a challenge).
const MIN_PACKET: usize = 64;

/// Packets a probe timeout sends (RFC 9002 §6.2.4: one or two).
const PROBE_PACKETS: u8 = 2;

/// An intro is re-sent at most this often... and at least this rarely.
const MAX_INTRO_BACKOFF: Duration = Duration::from_secs(2);

/// One connection's state. See the module documentation for the order of calls.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    /// Path challenges: unpredictable to anyone without the endpoint's
    /// RNG, from which it is seeded.
    rng: ChaCha8Rng,
    config: ConnectionConfig,
    state: State,
    /// This side's receiver index (the endpoint's key for it).
    local_index: u32,
    keys: Option<ConnectionKeys>,
    transcript: Option<Transcript>,
    /// The reply to resend when the intro is repeated (responder, until the
    /// initiator's first packet confirms the handshake).
    reply: Option<Box<[u8]>>,
    /// When an unconfirmed incoming connection is given up, silently (the
    /// application never saw it).
    confirm_deadline: Option<Instant>,
    path: Path,
    /// The path before a migration, kept until the new one is validated.
    previous_path: Option<Path>,
    /// The origin of the receive times this side reports in ACKs.
    epoch: Instant,

    // Receiving.
    replay: ReplayWindow,
    received: AckRanges,
    ack_policy: AckPolicy,
    /// When the largest packet number so far arrived.
    largest_received_at: Option<(u64, Instant)>,
    /// Ack-eliciting packets received since the last ACK sent.
    ack_pending: bool,
    ack_ranges: Vec<RangeInclusive<u64>>,
    path_response_due: Option<ChallengeToken>,
    /// A challenge for the current path, to send with the next packet.
    challenge_due: Option<ChallengeToken>,
    last_received: Instant,
    discard_previous_key_at: Option<Instant>,

    // Sending.
    loss: LossDetector<CarriedRecord>,
    recovery: RecoveryBuffer<CarriedRecord>,
    controller: AnyController,
    pacer: Pacer,
    rate_limit: Option<TokenBucket>,
    /// When the pacer or rate limit lets the next batch go.
    send_blocked_until: Option<Instant>,
    app_limited: bool,
    probes_due: u8,
    ping_due: bool,
    last_ack_eliciting_sent: Instant,

    /// Sequence of the next ACK-frequency request.
    ack_frequency_sequence: u64,
    /// The last request made (sent, or to send when `ack_frequency_due`).
    ack_frequency_sent: Option<AckFrequency>,
    ack_frequency_due: bool,

    // Application data.
    streams: Streams,
    messages_out: MessageSender,
    /// Bytes of messages held until acknowledged.
    messages_held: usize,
    /// Messages numbered below this had their bytes charged to the peer's
    /// connection window (on their first send).
    messages_charged: u64,
    messages_in: MessageReceiver,
    /// Messages delivered and not yet taken; `true` for a large one.
    inbox: VecDeque<(Bytes, bool)>,
    /// The application let go of it: nothing is kept for it to read.
    released: bool,
    datagrams_out: VecDeque<Bytes>,
    datagrams_in: VecDeque<Bytes>,
    events: VecDeque<Event>,
    /// A graceful close waits for everything sent to be acknowledged.
    close_when_drained: Option<(u64, Bytes)>,
    close_frame: Option<(CloseKind, u64, Bytes)>,
    close_due: bool,
    error: Option<ConnectionError>,
    stats: ConnectionStats,
}

impl Connection {
    fn new(
        side: Side,
        state: State,
        path: Path,
        start: Start,
        rng: &mut impl CryptoRngCore,
    ) -> Self {
        let Start {
            config,
            controller,
            local_index,
            now,
        } = start;
        let mut loss_config = LossConfig::default();
        loss_config.initial_rtt = config.initial_rtt;
        let mut ack_config = AckPolicyConfig::default();
        ack_config.max_ack_delay = config.max_ack_delay;
        let mut pacer_config = PacerConfig::default();
        pacer_config.max_datagram_size = config.max_udp_payload as u64;
        let rate_limit = config
            .rate_limit
            .and_then(|rate| TokenBucket::new(rate, (rate / 100).max(64 * 1024)).ok());
        Self {
            side,
            rng: ChaCha8Rng::from_rng(rng)
                .unwrap_or_else(|_| ChaCha8Rng::seed_from_u64(u64::from(local_index))),
            streams: Streams::new(side, &config),
            config,
            state,
            local_index,
            keys: None,
            transcript: None,
            reply: None,
            confirm_deadline: None,
            path,
            previous_path: None,
            epoch: now,
            replay: ReplayWindow::default(),
            received: AckRanges::default(),
            ack_policy: AckPolicy::new(ack_config),
            largest_received_at: None,
            ack_pending: false,
            ack_ranges: Vec::new(),
            path_response_due: None,
            challenge_due: None,
            last_received: now,
            discard_previous_key_at: None,
            loss: LossDetector::new(loss_config),
            recovery: RecoveryBuffer::default(),
            controller,
            pacer: Pacer::new(pacer_config),
            rate_limit,
            send_blocked_until: None,
            app_limited: false,
            probes_due: 0,
            ping_due: false,
            last_ack_eliciting_sent: now,
            ack_frequency_sequence: 0,
            ack_frequency_sent: None,
            ack_frequency_due: false,
            messages_out: MessageSender::new(),
            messages_held: 0,
            messages_charged: 0,
            messages_in: MessageReceiver::new(),
            inbox: VecDeque::new(),
            released: false,
            datagrams_out: VecDeque::new(),
            datagrams_in: VecDeque::new(),
            events: VecDeque::new(),
            close_when_drained: None,
            close_frame: None,
            close_due: false,
            error: None,
            stats: ConnectionStats::default(),
        }
    }

    /// An outgoing connection: writes the intro to `responder` (sent by the
    /// first `poll_transmit`) with `local_index` for the responder's packets
    /// to carry. `wall` is the wall-clock time for the intro's timestamp.
    pub(crate) fn connect(
        start: Start,
        keys: KeyConfig,
        remote: SocketAddr,
        responder: &PublicIdentity,
        wall: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Self, tern_wire::IntroError> {
        let Start {
            config,
            local_index,
            now,
            ..
        } = start;
        let mut intro = vec![0u8; INTRO_LEN].into_boxed_slice();
        let pending = PendingIntro::write(responder, local_index, keys, wall, rng, &mut intro)?;
        let backoff = config.initial_rtt * 3;
        let connecting = Connecting {
            pending: Some(pending),
            intro,
            resend_at: now,
            backoff,
            deadline: now + config.handshake_timeout,
        };
        let path = Path::validated(remote, config.path_mtu());
        Ok(Self::new(
            Side::Initiator,
            State::Connecting(Box::new(connecting)),
            path,
            start,
            rng,
        ))
    }

    /// An incoming connection from an accepted intro of `intro_len` bytes
    /// from `remote`: builds the reply (kept to resend if the intro comes
    /// again) with the first flow-control frames in it.
    pub(crate) fn accept(
        start: Start,
        accepted: Accepted,
        intro_len: usize,
        remote: SocketAddr,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Self, tern_wire::ReplyBuildError> {
        let local_index = start.local_index;
        let mut path = Path::unconfirmed(remote, start.config.path_mtu());
        path.on_received(intro_len);
        let mut connection = Self::new(Side::Responder, State::Established, path, start, rng);
        let mut buf = vec![0u8; accepted.max_reply_len()];
        let (len, keys) = accepted.reply(local_index, &[Frame::Ping], &mut buf)?;
        buf.truncate(len);
        // The reply is packet 0 of this side: the initiator acknowledges it.
        let mut record = CarriedRecord::new();
        record.push(Carried::Ping);
        let now = connection.epoch;
        connection.on_sent(now, 0, len, true, true, record);
        connection.keys = Some(keys);
        connection.reply = Some(buf.into_boxed_slice());
        connection.confirm_deadline = Some(connection.epoch + connection.config.handshake_timeout);
        connection.ping_due = false;
        Ok(connection)
    }

    // ---- what the endpoint asks ----

    /// This side's receiver index.
    pub fn local_index(&self) -> u32 {
        self.local_index
    }

    /// The peer's address (the current path).
    pub fn remote(&self) -> SocketAddr {
        self.path.remote()
    }

    /// Which side of the handshake this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The reply to resend for a repeated intro, until the handshake is
    /// confirmed; counted against the path's amplification limit.
    pub(crate) fn reply_for_repeated_intro(&mut self, intro_len: usize) -> Option<&[u8]> {
        self.path.on_received(intro_len);
        let reply = self.reply.as_deref()?;
        if !self.path.can_send(reply.len()) {
            return None;
        }
        self.path.on_sent(reply.len());
        Some(reply)
    }

    /// The reply as first built (sent once when the intro is accepted).
    pub(crate) fn stored_reply(&self) -> Option<&[u8]> {
        self.reply.as_deref()
    }

    /// The intro's id while this side still waits for its reply (for
    /// simultaneous open).
    pub(crate) fn pending_intro_id(&self) -> Option<tern_wire::replay::IntroId> {
        match &self.state {
            State::Connecting(c) => c.pending.as_ref().map(PendingIntro::id),
            _ => None,
        }
    }

    /// Whether it is over: nothing more is sent or received.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Whether messages or stream bytes the peer delivered still wait for
    /// the application. A connection the peer closed keeps them, so that
    /// what was sent before a close is never lost to a slow reader.
    pub fn has_unread(&self) -> bool {
        !self.released && (!self.inbox.is_empty() || self.streams.has_unread())
    }

    /// Whether the endpoint may free it: over, with nothing left unread
    /// (a connection this side closed abandons what it did not read).
    pub(crate) fn is_done(&self) -> bool {
        self.is_closed()
            && (!self.has_unread()
                || matches!(self.error, Some(ConnectionError::LocallyClosed { .. })))
    }

    /// The application is gone: what it did not read is dropped, and a
    /// connection still open is closed gracefully with `code`.
    pub fn release(&mut self, now: Instant, code: u64) {
        self.released = true;
        self.inbox.clear();
        self.streams.discard_unread();
        self.close(now, code, Bytes::new());
    }

    /// Whether the handshake finished (both sides hold keys and the
    /// initiator has shown it has them).
    pub fn is_established(&self) -> bool {
        matches!(self.state, State::Established) && self.reply.is_none() && self.keys.is_some()
    }

    /// Why it closed, once it has.
    pub fn error(&self) -> Option<&ConnectionError> {
        self.error.as_ref()
    }

    /// Figures about the connection.
    pub fn stats(&self) -> ConnectionStats {
        let mut stats = self.stats;
        stats.rtt = self.loss.rtt().smoothed();
        stats.window = self.controller.window();
        stats.bytes_in_flight = self.loss.bytes_in_flight();
        let loss = self.loss.stats();
        stats.lost_packets = loss.lost;
        stats.spurious_losses = loss.spurious;
        stats.path_mtu = self.path.mtu().current();
        stats
    }

    /// Bytes this connection holds for data: stream buffers, messages held
    /// until acknowledged, messages and datagrams not yet taken.
    pub fn buffered_bytes(&self) -> usize {
        self.streams.memory()
            + self.messages_held
            + self.inbox.iter().map(|(m, _)| m.len()).sum::<usize>()
            + self.datagrams_in.iter().map(Bytes::len).sum::<usize>()
            + self.datagrams_out.iter().map(Bytes::len).sum::<usize>()
    }

    // ---- the application's commands ----

    /// Queues `event` unless the same one already waits: the queue holds
    /// each event once, so packets from the peer cannot grow it while the
    /// application is not looking (one `MessageReceived` means "call
    /// `recv_message` until it is empty").
    fn notify(&mut self, event: Event) {
        if !self.events.contains(&event) {
            self.events.push_back(event);
        }
    }

    /// The next event, if any. Each kind of event is queued once until it
    /// is taken: after `MessageReceived`, take every message; after
    /// `StreamOpened`, accept every stream.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_open_for_data(&self) -> bool {
        matches!(self.state, State::Connecting(_) | State::Established)
            && self.close_when_drained.is_none()
    }

    /// Queues a message of any size, delivered whole and exactly once. One
    /// that fits a packet travels in one frame; a larger one on a one-way
    /// stream of its own. Refused (and given back) while the send buffer
    /// is full.
    pub fn send_message(&mut self, message: Bytes) -> Result<(), SendError> {
        if !self.is_open_for_data() {
            return Err(SendError::Closed);
        }
        let len = message.len();
        if len > small_message_limit() {
            // A stream of its own: its bytes are the caller's, referenced,
            // and copied into the stream's bounded buffer as it drains; the
            // peer's limit on one-way streams bounds how many wait.
            return self
                .streams
                .send_message(message)
                .map_err(SendError::Blocked);
        }
        if self.messages_held > 0
            && self.messages_held.saturating_add(len) > self.config.message_send_buffer
        {
            return Err(SendError::Blocked(message));
        }
        self.messages_out.push(message);
        self.streams.schedule(Turn::Messages, Urgency::New);
        self.messages_held += len;
        Ok(())
    }

    /// The next whole message, if one arrived.
    pub fn recv_message(&mut self) -> Option<Bytes> {
        let (message, large) = self.inbox.pop_front()?;
        if large {
            self.streams.on_message_taken();
        } else {
            self.streams.on_consumed(message.len() as u64);
        }
        Some(message)
    }

    /// Queues an unreliable datagram: sent once if it fits a packet, never
    /// re-sent.
    pub fn send_datagram(&mut self, datagram: Bytes) -> Result<(), SendError> {
        if !self.is_open_for_data() {
            return Err(SendError::Closed);
        }
        if datagram.len() > small_message_limit() {
            self.stats.datagrams_dropped += 1;
            return Err(SendError::TooLarge(datagram.len()));
        }
        self.datagrams_out.push_back(datagram);
        Ok(())
    }

    /// The next unreliable datagram, if one arrived.
    pub fn recv_datagram(&mut self) -> Option<Bytes> {
        self.datagrams_in.pop_front()
    }

    /// Opens a bidirectional stream; `None` while the peer allows no more
    /// (it raises the limit as its streams finish) or before the handshake.
    pub fn open_stream(&mut self) -> Option<StreamId> {
        if !self.is_open_for_data() {
            return None;
        }
        self.streams.open()
    }

    /// The next stream the peer opened.
    pub fn accept_stream(&mut self) -> Option<StreamId> {
        self.streams.accept()
    }

    /// Copies what fits of `data` into the stream's send buffer: no more
    /// than [`writable`](Self::writable). When it takes less than it was
    /// given, [`Event::StreamWritable`] follows once the stream has room
    /// again.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        if !self.is_open_for_data() {
            return Err(WriteError::Closed);
        }
        let written = self.streams.write(id, data);
        self.flush_readable();
        written
    }

    /// Bytes `write` would take on `id` now: the least of the room in the
    /// stream's own buffer (`stream_send_buffer`), in the connection's
    /// (`send_buffer`, shared equally by the streams that want room) and
    /// under the peer's flow-control limit for the stream.
    pub fn writable(&self, id: StreamId) -> usize {
        self.streams.writable(id)
    }

    /// Bytes all streams hold until the peer acknowledges them, together
    /// (never more than the configured `send_buffer`).
    pub fn stream_send_buffered(&self) -> usize {
        self.streams.send_buffered()
    }

    /// Ends the stream after what was written.
    pub fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        if self.error.is_some() {
            return Err(WriteError::Closed);
        }
        let finished = self.streams.finish(id);
        self.flush_readable();
        finished
    }

    /// Abandons sending on the stream with an application code; its
    /// buffered bytes are let go at once.
    pub fn reset_stream(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        if self.error.is_some() {
            return Err(WriteError::Closed);
        }
        let reset = self.streams.reset(id, code);
        self.flush_readable();
        reset
    }

    /// Asks the peer to stop sending on the stream.
    pub fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), ReadError> {
        if self.error.is_some() {
            return Err(ReadError::Closed);
        }
        self.streams.stop_sending(id, code)
    }

    /// Reads the stream's next bytes, in order, into `out`.
    pub fn read(&mut self, id: StreamId, out: &mut [u8]) -> Result<ReadOutcome, ReadError> {
        match self.streams.read(id, out) {
            Err(ReadError::UnknownStream(_)) if self.error.is_some() => Err(ReadError::Closed),
            other => other,
        }
    }

    /// Closes gracefully: everything already sent is delivered first, then
    /// the peer is told `code` and `reason`.
    pub fn close(&mut self, now: Instant, code: u64, reason: Bytes) {
        if matches!(self.state, State::Connecting(_)) {
            self.finish_with(ConnectionError::LocallyClosed { code });
        } else if matches!(self.state, State::Established) && self.close_when_drained.is_none() {
            self.close_when_drained = Some((code, reason));
            self.close_if_drained(now);
        }
    }

    /// Closes at once: unsent and unacknowledged data is abandoned.
    pub fn abort(&mut self, now: Instant, code: u64, reason: Bytes) {
        if matches!(self.state, State::Connecting(_)) {
            self.finish_with(ConnectionError::LocallyClosed { code });
            return;
        }
        self.start_closing(
            now,
            CloseKind::Application,
            code,
            reason,
            ConnectionError::LocallyClosed { code },
        );
    }

    // ---- closing ----

    fn three_ptos(&self) -> Duration {
        self.loss.pto() * 3
    }

    /// Sends Close and waits three probe timeouts for stragglers.
    fn start_closing(
        &mut self,
        now: Instant,
        kind: CloseKind,
        code: u64,
        reason: Bytes,
        error: ConnectionError,
    ) {
        if !matches!(self.state, State::Established) {
            return;
        }
        self.state = State::Closing {
            until: now + self.three_ptos(),
            resend_at: now + self.loss.pto(),
        };
        self.close_frame = Some((kind, code, reason));
        self.close_due = true;
        self.report_closed(error);
    }

    fn report_closed(&mut self, error: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(error.clone());
            self.notify(Event::Closed(error));
        }
    }

    /// Over at once: nothing more is sent.
    fn finish_with(&mut self, error: ConnectionError) {
        self.state = State::Closed;
        self.report_closed(error);
    }

    fn fail(&mut self, now: Instant, error: ProtocolError) {
        let reason = Bytes::from(error.to_string());
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::PROTOCOL_VIOLATION,
            reason,
            ConnectionError::Protocol(error),
        );
    }

    // ---- receiving ----

    /// A datagram for this connection arrived from `from`.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &mut [u8]) {
        if matches!(self.state, State::Closed | State::Draining { .. }) {
            return;
        }
        if datagram.first() == Some(&(PacketType::IntroReply as u8)) {
            self.handle_reply(now, from, datagram);
            return;
        }
        let Some(keys) = self.keys.as_mut() else {
            self.stats.dropped_unauthenticated += 1;
            return;
        };
        let len = datagram.len();
        let opened = match keys.opener.open(datagram) {
            Ok(opened) => opened,
            Err(_) => {
                self.stats.dropped_unauthenticated += 1;
                return;
            }
        };
        let pn = opened.packet_number();
        let key_updated = opened.key_updated();
        let frames = opened.frames();
        if self.replay.accept(pn).is_err() {
            self.stats.dropped_duplicates += 1;
            return;
        }
        if key_updated {
            self.discard_previous_key_at = Some(now + self.three_ptos());
        }
        if let State::Closing { .. } = self.state {
            self.close_due = true;
            return;
        }
        self.on_packet(now, from, pn, len, frames);
    }

    /// The frames of an authenticated, new packet: dispatched in order; a
    /// frame that breaks the protocol closes the connection.
    fn on_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        pn: u64,
        len: usize,
        frames: tern_wire::Frames<'_>,
    ) {
        self.on_authenticated(now, from, pn, len);
        let mut ack_eliciting = false;
        for frame in frames {
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => {
                    self.fail(now, ProtocolError::Frame(e));
                    return;
                }
            };
            ack_eliciting |= frame.is_ack_eliciting();
            if let Err(e) = self.handle_frame(now, &frame) {
                self.fail(now, e);
                return;
            }
            if !matches!(self.state, State::Established) {
                return;
            }
        }
        self.on_packet_recorded(now, pn, ack_eliciting);
    }

    /// The initiator's reply (or a repeat of it).
    fn handle_reply(&mut self, now: Instant, from: SocketAddr, datagram: &mut [u8]) {
        let State::Connecting(connecting) = &mut self.state else {
            if !self
                .transcript
                .as_ref()
                .is_some_and(|t| t.is_repeated_reply(datagram))
            {
                self.stats.dropped_unauthenticated += 1;
            } else {
                self.stats.dropped_duplicates += 1;
            }
            return;
        };
        if from != self.path.remote() {
            self.stats.dropped_unauthenticated += 1;
            return;
        }
        let Some(pending) = connecting.pending.take() else {
            return;
        };
        let len = datagram.len();
        let established = match pending.open_reply(datagram) {
            Ok(established) => established,
            Err(refused) => {
                connecting.pending = Some(refused.pending);
                self.stats.dropped_unauthenticated += 1;
                return;
            }
        };
        let pn = established.reply.packet_number();
        let frames = established.reply.frames();
        self.keys = Some(established.keys);
        self.transcript = Some(established.transcript);
        self.state = State::Established;
        self.notify(Event::Connected);
        if self.replay.accept(pn).is_err() {
            return;
        }
        self.on_packet(now, from, pn, len, frames);
    }

    /// An authenticated, new packet of `len` bytes arrived from `from`.
    fn on_authenticated(&mut self, now: Instant, from: SocketAddr, pn: u64, len: usize) {
        self.stats.received_packets += 1;
        self.stats.received_bytes += len as u64;
        self.last_received = now;
        let newest = self
            .largest_received_at
            .is_none_or(|(largest, _)| pn > largest);
        if newest {
            self.largest_received_at = Some((pn, now));
        }
        if self.reply.take().is_some() {
            self.confirm_deadline = None;
            // The initiator's first packet: it holds the keys, so it got the
            // reply at this address.
            self.path.confirm();
            self.notify(Event::Connected);
        }
        if from == self.path.remote() {
            self.path.on_received(len);
        } else if self
            .previous_path
            .as_ref()
            .is_some_and(|p| p.remote() == from)
        {
            // A straggler from the address the peer left.
        } else if newest {
            // The peer's address changed (NAT rebinding, roaming): move
            // there, held to the amplification limit until it answers a
            // challenge.
            let mut path = Path::challenged(from, self.config.path_mtu(), now, self.loss.pto());
            path.on_received(len);
            let old = std::mem::replace(&mut self.path, path);
            if old.is_validated() {
                self.previous_path = Some(old);
            }
            self.challenge_due = self.path.poll_challenge(now, &mut self.rng);
        }
    }

    fn on_packet_recorded(&mut self, now: Instant, pn: u64, ack_eliciting: bool) {
        let arrival = self.received.insert(pn);
        self.ack_policy.on_received(now, ack_eliciting, arrival);
        if ack_eliciting {
            self.ack_pending = true;
        }
    }

    fn handle_frame(&mut self, now: Instant, frame: &Frame<'_>) -> Result<(), ProtocolError> {
        match frame {
            Frame::Padding(_) | Frame::Ping => {}
            Frame::Ack(ack) => self.handle_ack(now, ack)?,
            Frame::Stream(s) => {
                let id = StreamId(s.id);
                if let Some(delivered) =
                    self.streams.on_stream_frame(id, s.offset, s.data, s.fin)?
                {
                    self.inbox.push_back((delivered.message, true));
                    self.notify(Event::MessageReceived);
                }
                self.flush_readable();
            }
            Frame::Message(m) => {
                if m.data.len() as u64 > self.config.max_message_size {
                    return Err(ProtocolError::MessageTooLarge);
                }
                if self
                    .messages_in
                    .on_message(m.id)
                    .map_err(ProtocolError::MessageWindow)?
                {
                    self.streams
                        .window
                        .on_received(m.data.len() as u64)
                        .map_err(ProtocolError::FlowControl)?;
                    self.inbox
                        .push_back((Bytes::copy_from_slice(m.data), false));
                    self.notify(Event::MessageReceived);
                }
            }
            Frame::MaxData(m) => self.streams.on_max_data(m.max),
            Frame::MaxStreamData(m) => {
                self.streams.on_max_stream_data(m)?;
                self.flush_readable();
            }
            Frame::MaxStreams(m) => match self.streams.on_max_streams(m) {
                Some(Direction::Bi) => self.notify(Event::StreamsAvailable),
                Some(Direction::Uni) => self.notify(Event::MessagesWritable),
                None => {}
            },
            Frame::ResetStream(r) => {
                self.streams.on_reset(r)?;
                self.flush_readable();
            }
            Frame::StopSending(s) => {
                self.streams.on_stop_sending(s)?;
                self.flush_readable();
            }
            Frame::DataBlocked(_) | Frame::StreamDataBlocked(_) => {}
            Frame::AckFrequency(request) => {
                self.ack_policy.on_ack_frequency(
                    now,
                    tern_reliability::AckFrequency {
                        sequence: request.sequence,
                        ack_eliciting_threshold: request.ack_eliciting_threshold,
                        max_ack_delay: request.max_ack_delay,
                    },
                );
            }
            // This side does not ask the initiator to prove its identity;
            // an unrequested proof changes nothing.
            Frame::Identity(_) => {}
            Frame::PathChallenge(PathChallenge { data }) => {
                self.path_response_due = Some(*data);
            }
            Frame::PathResponse(PathResponse { data }) => {
                if self.path.on_response(*data) && self.previous_path.take().is_some() {
                    self.stats.migrations += 1;
                }
            }
            Frame::Datagram(d) => {
                if self.datagrams_in.len() >= self.config.datagram_receive_queue {
                    self.datagrams_in.pop_front();
                    self.stats.datagrams_dropped += 1;
                }
                self.datagrams_in.push_back(Bytes::copy_from_slice(d.data));
                self.notify(Event::DatagramReceived);
            }
            Frame::Close(close) => {
                let error = ConnectionError::PeerClosed {
                    kind: close.kind,
                    code: close.code,
                    reason: Bytes::copy_from_slice(close.reason),
                };
                self.state = State::Draining {
                    until: now + self.three_ptos(),
                };
                self.report_closed(error);
            }
        }
        Ok(())
    }

    /// Streams the last frames or commands made readable, writable or
    /// opened, as events.
    fn flush_readable(&mut self) {
        self.streams.wake_writers();
        while let Some(id) = self.streams.readable.pop() {
            self.notify(Event::StreamReadable(id));
        }
        while let Some(id) = self.streams.writable.pop() {
            self.notify(Event::StreamWritable(id));
        }
        if std::mem::take(&mut self.streams.opened_by_peer) {
            self.notify(Event::StreamOpened);
        }
    }

    fn rtt(&self) -> Rtt {
        let estimator = self.loss.rtt();
        let smoothed = estimator.smoothed();
        Rtt::new(
            smoothed,
            estimator.min().unwrap_or(smoothed),
            estimator.latest(),
        )
    }

    fn handle_ack(&mut self, now: Instant, ack: &Ack<'_>) -> Result<(), ProtocolError> {
        let largest = ack.ranges.largest();
        let mut recovery = std::mem::take(&mut self.recovery);
        recovery.clear();
        let result = self
            .loss
            .on_ack(now, ack.ranges.iter(), ack.ack_delay, &mut recovery);
        let summary = match result {
            Ok(summary) => summary,
            Err(e) => {
                self.recovery = recovery;
                return Err(ProtocolError::Ack(e));
            }
        };
        if let Some(keys) = self.keys.as_mut() {
            keys.sealer.on_ack(largest);
        }
        let mut largest_newly_acked = None;
        let mut stream_run = None;
        for (pn, packet) in recovery.acked.drain(..) {
            largest_newly_acked = Some(largest_newly_acked.map_or(pn, |l: u64| l.max(pn)));
            self.on_packet_acked(&packet, &mut stream_run);
        }
        if let Some(run) = stream_run {
            self.streams.on_stream_acked(run);
        }
        for (_, packet) in recovery.lost.drain(..) {
            self.on_packet_lost(&packet);
        }
        let rtt = self.rtt();
        if let Some(sent_at) = summary.largest_acked_sent_at
            && summary.acked_bytes > 0
        {
            // The frame's receive time is for its largest packet: a sample
            // only when that one is newly acknowledged.
            let one_way_delay = (largest_newly_acked == Some(largest)).then(|| {
                let sent = i64::try_from(sent_at.saturating_duration_since(self.epoch).as_nanos())
                    .unwrap_or(i64::MAX);
                // The peer's clock is its own and the value hostile: any
                // difference is a sample, none overflows.
                let received = i64::try_from(ack.receive_time.as_nanos()).unwrap_or(i64::MAX);
                OneWayDelay::from_nanos(received.saturating_sub(sent))
            });
            let acked = Acked {
                bytes: summary.acked_bytes,
                largest_sent_at: sent_at,
                bytes_in_flight: self.loss.bytes_in_flight(),
                one_way_delay,
                app_limited: self.app_limited,
            };
            self.controller.on_ack(now, &acked, &rtt);
        }
        self.on_loss_report(now, summary.lost, &rtt);
        for spurious in recovery.spurious.drain(..) {
            if spurious.in_flight {
                self.controller
                    .on_spurious_loss(now, spurious.declared_lost_at);
            }
        }
        self.recovery = recovery;
        self.after_acks(now);
        Ok(())
    }

    fn on_loss_report(&mut self, now: Instant, report: tern_reliability::LossReport, rtt: &Rtt) {
        if let Some(sent_at) = report.largest_sent_at
            && report.in_flight_packets > 0
        {
            let lost = Lost {
                packets: report.in_flight_packets as u64,
                bytes: report.bytes,
                largest_sent_at: sent_at,
            };
            self.controller.on_loss(now, &lost, rtt);
        }
        if report.persistent_congestion {
            self.controller.on_persistent_congestion(now);
        }
    }

    /// What follows acknowledgements: a new ACK-frequency request when the
    /// window or the round trip moved enough, freed buffers, a graceful
    /// close that may now go out.
    fn after_acks(&mut self, now: Instant) {
        let request = AckFrequency::for_path(
            self.ack_frequency_sequence,
            self.controller.window(),
            self.path.mtu().current() as u64,
            self.loss.rtt().smoothed(),
        );
        if self
            .ack_frequency_sent
            .is_none_or(|sent| request.supersedes(&sent))
        {
            self.ack_frequency_sequence += 1;
            self.ack_frequency_sent = Some(request);
            self.ack_frequency_due = true;
        }
        self.flush_readable();
        self.close_if_drained(now);
    }

    /// Sends the Close of a graceful close once everything sent was
    /// acknowledged.
    fn close_if_drained(&mut self, now: Instant) {
        if self.close_when_drained.is_none()
            || self.messages_held > 0
            || self.streams.has_unacked_data()
        {
            return;
        }
        let Some((code, reason)) = self.close_when_drained.take() else {
            return;
        };
        self.start_closing(
            now,
            CloseKind::Application,
            code,
            reason,
            ConnectionError::LocallyClosed { code },
        );
    }

    /// One acknowledged packet. Its stream chunks join `stream_run`, the
    /// acknowledged bytes of one stream that the packets before it left
    /// contiguous, which the stream is given when the run breaks (and by
    /// the caller after the last packet): one call per stream per ACK
    /// frame in a bulk transfer rather than one per packet.
    fn on_packet_acked(
        &mut self,
        packet: &SentPacket<CarriedRecord>,
        stream_run: &mut Option<StreamRun>,
    ) {
        for item in packet.payload.iter() {
            if let Carried::Stream {
                id,
                offset,
                len,
                fin,
            } = item
            {
                let chunk = StreamRun {
                    id,
                    offset,
                    len: u64::from(len),
                    fin,
                };
                if !stream_run.as_mut().is_some_and(|run| run.absorb(&chunk))
                    && let Some(run) = stream_run.replace(chunk)
                {
                    self.streams.on_stream_acked(run);
                }
                continue;
            }
            // Anything else about a stream comes after its bytes.
            if let Some(run) = stream_run.take() {
                self.streams.on_stream_acked(run);
            }
            match item {
                Carried::Message(id) => {
                    let freed = self.messages_out.on_acked(id);
                    if freed > 0 || self.messages_held > 0 {
                        self.messages_held = self.messages_held.saturating_sub(freed);
                        self.notify(Event::MessagesWritable);
                    }
                }
                Carried::ResetStream(id) => self.streams.on_reset_acked(id),
                Carried::MtuProbe(size) => self.path.mtu_mut().on_probe_acked(size as usize),
                _ => {}
            }
        }
        self.path.mtu_mut().on_packet_acked(packet.size as usize);
    }

    fn on_packet_lost(&mut self, packet: &SentPacket<CarriedRecord>) {
        for item in packet.payload.iter() {
            match item {
                Carried::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } => self.streams.on_stream_lost(id, offset, len, fin),
                Carried::Message(id) => {
                    self.messages_out.on_lost(id);
                    self.streams.schedule(Turn::Messages, Urgency::Resend);
                }
                Carried::MaxData => self.streams.max_data_due = true,
                Carried::AckFrequency => self.ack_frequency_due = true,
                Carried::MaxStreamData(id) => self.streams.on_max_stream_data_lost(id),
                Carried::MaxStreams(direction) => self.streams.on_max_streams_lost(direction),
                Carried::ResetStream(id) => self.streams.on_reset_lost(id),
                Carried::StopSending(id) => self.streams.on_stop_sending_lost(id),
                Carried::MtuProbe(size) => self.path.mtu_mut().on_probe_lost(size as usize),
                Carried::PathChallenge | Carried::Ping => {}
            }
        }
        if packet.payload.mtu_probe().is_none() {
            self.path.mtu_mut().on_packet_lost(packet.size as usize);
        }
    }

    // ---- timers ----

    /// When [`handle_timeout`](Self::handle_timeout) should run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        match &self.state {
            State::Closed => return None,
            State::Closing { until, resend_at } => return Some((*until).min(*resend_at)),
            State::Draining { until } => return Some(*until),
            State::Connecting(c) => {
                consider(Some(c.deadline));
                consider(Some(c.resend_at));
                return next;
            }
            State::Established => {}
        }
        if self.confirm_deadline.is_some() {
            return self.confirm_deadline;
        }
        consider(self.loss.poll_timeout());
        // An ACK that cannot go (a new path's amplification allowance is
        // spent) has no deadline: the peer's next datagram raises the
        // allowance and touches the connection; a deadline left in the past
        // would have the driver call again on every turn.
        if self.ack_pending && self.path.allowance() >= MIN_PACKET as u64 {
            consider(self.ack_policy.poll_timeout());
        }
        // The MTU raise timer needs no wake-up of its own: it is checked
        // whenever a packet may go, and keep-alives make that periodic.
        consider(self.path.next_challenge());
        consider(self.path.validation_deadline());
        consider(Some(self.last_received + self.config.idle_timeout));
        consider(self.keep_alive_at());
        consider(self.send_blocked_until);
        consider(self.discard_previous_key_at);
        next
    }

    fn keep_alive_at(&self) -> Option<Instant> {
        let interval = self.config.keep_alive?;
        Some(self.last_received.max(self.last_ack_eliciting_sent) + interval)
    }

    /// Runs every timer whose deadline is at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.state {
            State::Closed => return,
            State::Closing { until, resend_at } => {
                if now >= *until {
                    self.state = State::Closed;
                } else if now >= *resend_at {
                    *resend_at = now + self.loss.pto();
                    self.close_due = true;
                }
                return;
            }
            State::Draining { until } => {
                if now >= *until {
                    self.state = State::Closed;
                }
                return;
            }
            State::Connecting(c) => {
                if now >= c.deadline {
                    self.finish_with(ConnectionError::HandshakeTimedOut);
                }
                return;
            }
            State::Established => {}
        }
        if self.confirm_deadline.is_some_and(|t| now >= t) {
            // Never confirmed: a forged, replayed or abandoned handshake.
            self.state = State::Closed;
            return;
        }
        if now >= self.last_received + self.config.idle_timeout {
            self.finish_with(ConnectionError::TimedOut);
            return;
        }
        if self.keep_alive_at().is_some_and(|t| now >= t) {
            self.ping_due = true;
        }
        if self.send_blocked_until.is_some_and(|t| now >= t) {
            self.send_blocked_until = None;
        }
        if self.discard_previous_key_at.is_some_and(|t| now >= t) {
            self.discard_previous_key_at = None;
            if let Some(keys) = self.keys.as_mut() {
                keys.opener.discard_previous_key();
            }
        }
        if let Some(token) = self.path.poll_challenge(now, &mut self.rng) {
            self.challenge_due = Some(token);
        }
        if self.path.handle_timeout(now) == PathTimeout::ValidationFailed {
            // The new address never answered: back to the one that worked.
            if let Some(previous) = self.previous_path.take() {
                self.path = previous;
            } else {
                self.finish_with(ConnectionError::TimedOut);
                return;
            }
        }
        let mut recovery = std::mem::take(&mut self.recovery);
        recovery.clear();
        match self.loss.on_timeout(now, &mut recovery) {
            TimerEvent::LossDeclared(report) => {
                for (_, packet) in recovery.lost.drain(..) {
                    self.on_packet_lost(&packet);
                }
                let rtt = self.rtt();
                self.on_loss_report(now, report, &rtt);
            }
            TimerEvent::Probe { .. } => self.probes_due = PROBE_PACKETS,
            _ => {}
        }
        self.recovery = recovery;
    }

    // ---- sending ----

    /// Fills `buf` with the next datagram, or a run of equal-size datagrams
    /// to the peer, within `limits`; `None` when nothing is to be sent now.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        match &mut self.state {
            State::Closed | State::Draining { .. } => return None,
            State::Connecting(c) => {
                if now < c.resend_at || buf.len() < c.intro.len() {
                    return None;
                }
                c.resend_at = now + c.backoff;
                c.backoff = (c.backoff * 2).min(MAX_INTRO_BACKOFF);
                let len = c.intro.len();
                buf[..len].copy_from_slice(&c.intro);
                self.stats.sent_packets += 1;
                self.stats.sent_bytes += len as u64;
                return Some(self.transmit(len, None));
            }
            State::Closing { .. } => {
                if !self.close_due {
                    return None;
                }
                self.close_due = false;
                let max = self.datagram_size(limits).min(buf.len());
                let len = self.build_close(&mut buf[..max])?;
                return Some(self.transmit(len, None));
            }
            State::Established => {}
        }
        if self.reply.is_some() {
            // Until the initiator's first packet, only the reply is ever sent.
            return None;
        }
        self.update_keys();
        // On a path not yet validated, at most three times what came from it.
        let allowance = usize::try_from(self.path.allowance()).unwrap_or(usize::MAX);
        let size = self.datagram_size(limits).min(buf.len()).min(allowance);
        if size < MIN_PACKET {
            return None;
        }
        if let Some(len) = self.poll_mtu_probe(now, limits, buf) {
            return Some(self.transmit(len, None));
        }
        let data_allowed = self.may_send_data(now, size);
        let mut written = 0;
        let mut stride = 0;
        let mut count = 0;
        while count < limits.max_segments {
            let max = if count == 0 { size } else { stride };
            let Some(window) = buf.get_mut(written..written + max) else {
                break;
            };
            if count > 0 && (!self.may_send_more(size, written) || !self.path.can_send(stride)) {
                break;
            }
            let Some(len) = self.build_packet(now, window, data_allowed) else {
                break;
            };
            written += len;
            count += 1;
            if count == 1 {
                stride = len;
            }
            if len < stride || !data_allowed {
                break;
            }
        }
        if count == 0 {
            return None;
        }
        // Sending may have made room for a writer waiting on its unsent bytes.
        self.flush_readable();
        self.pacer.on_sent(now, written as u64);
        if let Some(bucket) = self.rate_limit.as_mut() {
            bucket.consume(written as u64, now);
        }
        let segment_size = (count > 1).then_some(stride);
        Some(self.transmit(written, segment_size))
    }

    fn transmit(&self, len: usize, segment_size: Option<usize>) -> Transmit {
        Transmit {
            destination: self.path.remote(),
            len,
            segment_size,
        }
    }

    /// The largest datagram for this path now.
    fn datagram_size(&self, limits: TransmitLimits) -> usize {
        self.path.mtu().current().min(limits.max_datagram_size)
    }

    /// Updates the packet key before the AEAD limit (once the peer has
    /// confirmed the previous update).
    fn update_keys(&mut self) {
        if let Some(keys) = self.keys.as_mut()
            && keys.sealer.key_update_due()
            && keys.sealer.key_update_confirmed()
            && keys.sealer.update_key().is_ok()
        {
            self.stats.key_updates += 1;
        }
    }

    /// Whether the congestion window, the pacer and the rate limit let a
    /// batch of data start now (asked once per batch).
    fn may_send_data(&mut self, now: Instant, size: usize) -> bool {
        if self.probes_due > 0 {
            return true;
        }
        if self.loss.bytes_in_flight() + size as u64 > self.controller.window() {
            self.app_limited = false;
            return false;
        }
        if !self.has_data_to_send() {
            self.app_limited = true;
            return true;
        }
        let rate = self.controller.pacing_rate(&self.rtt());
        if let Take::WaitUntil(at) = self.pacer.poll(now, rate, size as u64)
            && at > now
        {
            self.send_blocked_until = Some(at);
            return false;
        }
        if let Some(bucket) = self.rate_limit.as_mut()
            && let Take::WaitUntil(at) = bucket.ready_at(size as u64, now)
            && at > now
        {
            self.send_blocked_until = Some(at);
            return false;
        }
        self.send_blocked_until = None;
        true
    }

    /// Whether the window, and the rate limit's bucket, have room for one
    /// more datagram of the batch after the `written` bytes before it. The
    /// bucket was asked once for the batch's first datagram; without this
    /// a whole run (64 KiB) would go on one datagram's tokens and leave the
    /// connection silent while the debt is repaid, as bursts.
    fn may_send_more(&self, size: usize, written: usize) -> bool {
        self.probes_due > 0
            || (self.loss.bytes_in_flight() + size as u64 <= self.controller.window()
                && self
                    .rate_limit
                    .as_ref()
                    .is_none_or(|bucket| bucket.available() >= (written + size) as u64))
    }

    fn has_data_to_send(&self) -> bool {
        self.streams.wants_to_send()
            || !self.datagrams_out.is_empty()
            || self.ping_due
            || self.path_response_due.is_some()
    }

    /// An MTU probe, alone in its datagram, when one is due.
    fn poll_mtu_probe(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<usize> {
        if !self.path.is_validated()
            || self.loss.bytes_in_flight() + self.path.mtu().current() as u64
                > self.controller.window()
        {
            return None;
        }
        let size = self.path.mtu_mut().poll_probe(now)?;
        if size > limits.max_datagram_size || size > buf.len() {
            self.path.mtu_mut().on_probe_lost(size);
            return None;
        }
        let keys = self.keys.as_mut()?;
        let mut packet = keys.sealer.start(&mut buf[..size]).ok()?;
        let mut record = CarriedRecord::new();
        record.push(Carried::MtuProbe(size as u32));
        packet.push(&Frame::Ping).ok()?;
        packet.pad_to(size).ok()?;
        let (len, pn) = packet.finish().ok()?;
        self.on_sent(now, pn, len, true, false, record);
        Some(len)
    }

    fn build_close(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (kind, code, reason) = self.close_frame.as_ref()?;
        let keys = self.keys.as_mut()?;
        let mut packet = keys.sealer.start(buf).ok()?;
        let room = packet.remaining().saturating_sub(32);
        let reason = &reason[..reason.len().min(room)];
        packet
            .push(&Frame::Close(Close {
                kind: *kind,
                code: *code,
                reason,
            }))
            .ok()?;
        let (len, _) = packet.finish().ok()?;
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len as u64;
        Some(len)
    }

    /// Builds one packet into `buf`; `None` when there was nothing to put
    /// in it (no packet number is used then).
    fn build_packet(&mut self, now: Instant, buf: &mut [u8], data_allowed: bool) -> Option<usize> {
        let ack_due = self.ack_pending && self.ack_policy.ack_due(now);
        let send_ack = self.ack_pending && (ack_due || data_allowed);
        // An ACK rides on whatever else goes; alone only when worth it.
        let ack_alone = send_ack && self.ack_policy.worth_sending_alone(now);
        if send_ack {
            self.ack_ranges.clear();
            self.ack_ranges
                .extend(self.received.iter().take(MAX_ACK_RANGES));
        }
        let ack_delay = self.ack_policy.ack_delay(now);
        let receive_time = self.largest_received_at.map_or(Duration::ZERO, |(_, at)| {
            at.saturating_duration_since(self.epoch)
        });
        let probing = self.probes_due > 0;
        let keys = self.keys.as_mut()?;
        let mut packet = keys.sealer.start(buf).ok()?;
        let mut record = CarriedRecord::new();
        let mut ack_eliciting = false;
        let mut wrote_ack = false;

        if send_ack
            && let Ok(ranges) = AckFrameRanges::new(&self.ack_ranges)
            && packet
                .push(&Frame::Ack(Ack {
                    ranges,
                    ack_delay,
                    receive_time,
                }))
                .is_ok()
        {
            wrote_ack = true;
        }
        if let Some(token) = self.path_response_due
            && packet
                .push(&Frame::PathResponse(PathResponse { data: token }))
                .is_ok()
        {
            self.path_response_due = None;
            ack_eliciting = true;
        }
        if let Some(token) = self.challenge_due
            && packet
                .push(&Frame::PathChallenge(PathChallenge { data: token }))
                .is_ok()
        {
            self.challenge_due = None;
            record.push(Carried::PathChallenge);
            ack_eliciting = true;
        }
        if data_allowed {
            if self.ack_frequency_due
                && let Some(request) = self.ack_frequency_sent
                && !record.is_full()
                && packet
                    .push(&Frame::AckFrequency(tern_wire::AckFrequency {
                        sequence: request.sequence,
                        ack_eliciting_threshold: request.ack_eliciting_threshold,
                        max_ack_delay: request.max_ack_delay,
                    }))
                    .is_ok()
            {
                self.ack_frequency_due = false;
                record.push(Carried::AckFrequency);
                ack_eliciting = true;
            }
            ack_eliciting |= self.streams.write_control(&mut packet, &mut record);
            while let Some(datagram) = self.datagrams_out.front() {
                if datagram.len() > packet.datagram_capacity() {
                    break;
                }
                let frame = Frame::Datagram(tern_wire::Datagram { data: datagram });
                if packet.push(&frame).is_err() {
                    break;
                }
                self.datagrams_out.pop_front();
                ack_eliciting = true;
            }
            ack_eliciting |= Self::write_data(
                &mut self.streams,
                &mut self.messages_out,
                &mut self.messages_charged,
                &mut packet,
                &mut record,
            );
            if (self.ping_due || probing) && !ack_eliciting && packet.push(&Frame::Ping).is_ok() {
                record.push(Carried::Ping);
                ack_eliciting = true;
            }
        }
        if !(ack_eliciting || (wrote_ack && ack_alone)) {
            return None;
        }
        let (len, pn) = packet.finish().ok()?;
        if wrote_ack {
            self.ack_pending = false;
            self.ack_policy.on_ack_sent();
        }
        if ack_eliciting {
            self.ping_due = false;
            self.probes_due = self.probes_due.saturating_sub(1);
        }
        self.on_sent(now, pn, len, ack_eliciting, ack_eliciting, record);
        Some(len)
    }

    /// Messages and stream chunks, round-robin, until the packet or its
    /// record is full. Returns whether anything was written.
    fn write_data(
        streams: &mut Streams,
        messages: &mut MessageSender,
        charged: &mut u64,
        packet: &mut PacketBuilder<'_, '_>,
        record: &mut CarriedRecord,
    ) -> bool {
        let mut wrote = false;
        while !record.is_full() && packet.remaining() > 24 {
            let Some(turn) = streams.next_turn() else {
                break;
            };
            match turn {
                Turn::Messages => {
                    let mut any = false;
                    while !record.is_full() {
                        let credit = streams.credit.available();
                        let window_end = messages.oldest_unacked() + MESSAGE_WINDOW;
                        let Some((id, message)) = messages.poll(|id, len| {
                            id < window_end
                                && len <= packet.message_capacity(id)
                                && (id < *charged || len as u64 <= credit)
                        }) else {
                            break;
                        };
                        let len = message.len() as u64;
                        let frame = Frame::Message(tern_wire::Message { id, data: message });
                        if packet.push(&frame).is_err() {
                            messages.on_lost(id);
                            break;
                        }
                        if id >= *charged {
                            streams.credit.consume(len);
                            *charged = id + 1;
                        }
                        record.push(Carried::Message(id));
                        any = true;
                    }
                    if messages.wants_to_send() {
                        streams.schedule(Turn::Messages, Urgency::New);
                    }
                    wrote |= any;
                    if !any {
                        break;
                    }
                }
                Turn::Stream(id) => {
                    if !streams.write_stream(id, packet, record) {
                        streams.requeue(id);
                        break;
                    }
                    wrote = true;
                }
            }
        }
        wrote
    }

    fn on_sent(
        &mut self,
        now: Instant,
        pn: u64,
        len: usize,
        ack_eliciting: bool,
        in_flight: bool,
        record: CarriedRecord,
    ) {
        let packet = SentPacket {
            time_sent: now,
            size: len as u32,
            ack_eliciting,
            in_flight,
            payload: record,
        };
        if self.loss.on_sent(pn, packet).is_ok() && in_flight {
            self.controller.on_sent(now, self.loss.bytes_in_flight());
        }
        if ack_eliciting {
            self.last_ack_eliciting_sent = now;
        }
        self.path.on_sent(len);
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len as u64;
    }
}

/// The largest message that travels in one Message frame: what any packet
/// at the 1 200-byte minimum carries, so it fits whatever the path.
fn small_message_limit() -> usize {
    tern_wire::MaxUdpPayload::new(tern_wire::MIN_UDP_PAYLOAD)
        .map_or(1024, tern_wire::MaxUdpPayload::guaranteed_message_capacity)
}
