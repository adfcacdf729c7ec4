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
//!
//! This module holds the struct, its calling contract, the application's
//! commands (those on streams in `stream_commands`) and the event queue.
//! The rest of the `impl` is split by concern, one file each, over this
//! module's fields: `handshake`,
//! `identity` (the identity each side proved, and the proof it owes), `recv`
//! (datagrams in, frame dispatch), `recovery` (ACKs and losses), `send`
//! (packet assembly), `timers`, `close` and `figures` (stats and the
//! bytes held). The types the application sees are in `error`, `event`
//! and `stats`; what a connection is built from in `path`, `streams`,
//! `carried` and `datagram_queue`. These import nothing from the
//! files of the `impl`, and `streams` nothing from this module.

mod allotted;
mod carried;
mod close;
mod datagram_queue;
mod datagrams;
mod error;
mod event;
mod figures;
mod handshake;
mod identity;
mod joined;
mod lazy;
mod lazy_deque;
mod limits_repeat;
mod message_limit;
mod messages;
mod observed;
pub(crate) mod path;
mod received_datagrams;
mod recovery;
mod recv;
mod resumption;
mod rng;
mod send;
pub(crate) mod signals;
mod stats;
mod stream_commands;
pub(crate) mod streams;
mod taken;
mod timers;
mod transfer;
mod untaken;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use quanta::Instant;
use rand_core::CryptoRngCore;
use tern_congestion::{AnyController, Controller, TokenBucket};
use tern_reliability::{
    AckFrequency, AckPolicy, AckPolicyConfig, AckRanges, LossConfig, LossDetector, RecoveryBuffer,
    ReplayWindow,
};
use tern_wire::{CloseKind, ConnectionKeys, PendingIntro, Transcript};

use crate::{ConnectionConfig, Side, StreamId};
use carried::CarriedRecord;
use datagram_queue::DatagramQueue;
pub use error::{ConnectionError, ProtocolError, ReadError, SendError, WriteError};
pub use event::Event;
use path::{ChallengeToken, Path};
use recovery::RecoverySend;
pub(crate) use resumption::ReceivedTicket;
pub use stats::ConnectionStats;
pub use streams::ReadOutcome;
use streams::messages::{MESSAGE_CHARGE, MessageReceiver, MessageSender};
use streams::{Held, Streams};

/// The initiator's handshake until the reply arrives.
#[derive(Debug)]
struct Connecting {
    pending: Option<PendingIntro>,
    intro: Box<[u8]>,
    /// The responder's address-validation token, from its Retry: sent
    /// after the intro from then on.
    token: Option<tern_wire::Token>,
    /// The intro is a resumed one: a ResumeRefused for it brings a full
    /// intro.
    resumed: bool,
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
    /// This side sent Close; it sends it again at `resend_at` (once a
    /// probe timeout, so that a peer that missed it hears it again over a
    /// lossy path), until `until`. Packets that arrive meanwhile get no
    /// answer of their own: one Close per probe timeout, however many.
    Closing { until: Instant, resend_at: Instant },
    /// The peer sent Close; nothing is sent until `until`.
    Draining { until: Instant },
    /// Over; the endpoint frees it.
    Closed,
}

/// The loss detector's parameters a connection with `config` uses:
/// made once per endpoint, shared by its connections.
pub(crate) fn loss_config(config: &ConnectionConfig) -> LossConfig {
    let mut loss = LossConfig::default();
    loss.initial_rtt = config.initial_rtt;
    loss
}

/// What every new connection starts from.
#[derive(Debug)]
pub(crate) struct Start {
    /// Its configuration, shared by every connection of the endpoint.
    pub(crate) config: Arc<ConnectionConfig>,
    /// Its loss detector's parameters (see [`loss_config`]), shared
    /// likewise.
    pub(crate) loss_config: Arc<LossConfig>,
    /// Its congestion controller, fresh.
    pub(crate) controller: AnyController,
    /// This side's receiver index for it.
    pub(crate) local_index: u32,
    /// The time it starts.
    pub(crate) now: Instant,
}

impl Start {
    /// This template for the connection with `local_index`, starting
    /// `now`: the configurations shared, the controller copied.
    pub(crate) fn for_connection(&self, local_index: u32, now: Instant) -> Self {
        Self {
            config: Arc::clone(&self.config),
            loss_config: Arc::clone(&self.loss_config),
            controller: self.controller.clone(),
            local_index,
            now,
        }
    }
}

/// One connection's state. See the module documentation for the order of calls.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    /// Path challenges and skipped packet numbers: unpredictable to anyone
    /// without the endpoint's RNG, from which it is seeded.
    rng: rng::ConnectionRng,
    /// The next packet number to skip: a peer that acknowledges it claims
    /// a packet it never received (RFC 9000 §21.4).
    next_skip: u64,
    /// The endpoint's, shared: 300 bytes a connection need not copy.
    config: Arc<ConnectionConfig>,
    state: State,
    /// This side's receiver index (the endpoint's key for it).
    local_index: u32,
    keys: Option<ConnectionKeys>,
    /// The handshake transcript: the initiator's, to recognise a repeated
    /// reply; the responder's until the initiator's identity proof is
    /// checked against it (out of line: most connections drop it early).
    transcript: Option<Box<Transcript>>,
    /// Who the peer proved to be, and the proof this side owes.
    identity: identity::PeerIdentity,
    /// The largest message the peer accepts, and this side's announcement.
    message_limits: message_limit::MessageLimits,
    /// A resumption ticket: the responder's to send, the initiator's
    /// received and not yet taken by the endpoint (out of line: held for
    /// a moment only).
    ticket: Option<Box<resumption::TicketSlot>>,
    /// Responder: a ticket was issued (or refused) once.
    ticket_issued: bool,
    /// The reply to resend when the intro is repeated (responder, until the
    /// initiator's first packet confirms the handshake).
    reply: Option<Box<[u8]>>,
    /// When an unconfirmed incoming connection is given up, silently (the
    /// application never saw it).
    confirm_deadline: Option<Instant>,
    path: Path,
    /// The path before a migration, kept until the new one is validated
    /// (out of line: most connections never migrate).
    previous_path: Option<Box<Path>>,
    /// A path being probed, and a challenge to answer on another path
    /// (out of line: only a relayed connection probes).
    probing: Option<Box<path::probe::Probing>>,
    /// The peer's address as reported to it, and this side's as the peer
    /// reported it.
    observed: observed::ObservedAddresses,
    /// Rendezvous frames to send reliably, and received for the endpoint.
    signals: signals::Signals,
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
    /// ACK datagrams still to send for the last PING received, the next
    /// one included (see `ACKS_PER_PING`).
    ack_copies_due: u8,
    /// A PING arrived since the last ACK sent: its answer goes even while
    /// the packet key keeps its last packets back (`ack_goes_alone`).
    ping_unanswered: bool,
    /// Since when, and for how many PINGs, ACKs went `ACKS_PER_PING`
    /// times (see `COPIED_PINGS_PER_RTT`).
    copied_pings: (Instant, u8),
    /// The limits of the last flow-control update, repeated for a round
    /// trip (see `LimitsRepeat`).
    limits_repeat: limits_repeat::LimitsRepeat,
    ack_ranges: Vec<RangeInclusive<u64>>,
    path_response_due: Option<ChallengeToken>,
    /// A challenge for the current path, to send with the next packet.
    challenge_due: Option<ChallengeToken>,
    last_received: Instant,
    /// When application data (stream bytes, messages, datagrams) last went
    /// either way: a full endpoint evicts the connection for which it is
    /// the oldest. Keep-alives and acknowledgements do not count.
    last_data: Instant,
    discard_previous_key_at: Option<Instant>,
    /// The first packet number seen under the peer's current key.
    peer_key_phase_start: u64,
    /// The largest packet number any ACK this side sent acknowledged.
    largest_ack_sent: Option<u64>,

    // Sending.
    loss: LossDetector<CarriedRecord>,
    /// The ACK-processing lists, made by the first ACK and given back by
    /// the quiet release with the rest of the scratch memory.
    recovery: Option<Box<RecoveryBuffer<CarriedRecord>>>,
    /// The congestion controller and the pacer; `None` once a quiet
    /// period gave them back (see `transfer`).
    transfer: Option<Box<transfer::Transfer>>,
    /// A fresh congestion controller's window: the window while
    /// `transfer` is given back.
    initial_window: u64,
    /// The configured rate cap, if any (out of line: most connections
    /// have none).
    rate_limit: Option<Box<TokenBucket>>,
    /// When the pacer or rate limit lets the next batch go.
    send_blocked_until: Option<Instant>,
    app_limited: bool,
    /// See [`sent_data`](Self::sent_data).
    sent_data: bool,
    probes_due: u8,
    /// Whether one packet may go beyond a window a loss just reduced (see
    /// [`RecoverySend`]).
    recovery_send: RecoverySend,
    ping_due: bool,
    last_ack_eliciting_sent: Instant,
    /// When the connection last gave back its scratch memory (see
    /// `recovery::QUIET_RELEASE_INTERVAL`), or its start (`epoch`).
    released_scratch_at: Instant,
    /// An ACK left nothing tracked while the release had to wait (data
    /// too recent, or the last release): a timer runs it (see
    /// `recovery::quiet_release_at`).
    release_waiting: bool,

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
    /// Messages delivered and not yet taken; a large one with what it
    /// holds of the connection window.
    inbox: untaken::Untaken<Option<Held>>,
    /// The application let go of it: nothing is kept for it to read.
    released: bool,
    datagrams_out: DatagramQueue,
    datagrams_in: received_datagrams::ReceivedDatagrams,
    /// Bytes of datagrams taken out and not reported consumed yet (see
    /// [`take_datagrams`](Self::take_datagrams)).
    datagrams_taken: usize,
    events: event::Events,
    // A connection's close (out of line, 8 bytes each while open rather
    // than 152 together: an idle connection never closes).
    /// A graceful close waits for everything sent to be acknowledged.
    close_when_drained: Option<Box<close::PendingClose>>,
    close_frame: Option<Box<(CloseKind, u64, Bytes)>>,
    close_due: bool,
    error: Option<Box<ConnectionError>>,
    stats: stats::Counters,
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
            loss_config,
            controller,
            local_index,
            now,
        } = start;
        let mut ack_config = AckPolicyConfig::default();
        ack_config.max_ack_delay = config.max_ack_delay;
        let rate_limit = config
            .rate_limit
            .and_then(|rate| TokenBucket::new(rate, (rate / 100).max(64 * 1024)).ok())
            .map(Box::new);
        let mut rng = rng::ConnectionRng::from_rng(rng, u64::from(local_index));
        let next_skip = send::skip_gap(&mut rng);
        let datagrams_out = DatagramQueue::new(config.datagram_send_queue);
        let message_limits = message_limit::MessageLimits::new(config.max_message_size);
        let initial_window = controller.window();
        let mut loss = LossDetector::new(loss_config);
        loss.set_max_tracked(recovery::max_tracked(initial_window));
        let transfer = Some(transfer::Transfer::new(controller, &config));
        Self {
            side,
            rng,
            next_skip,
            streams: Streams::new(side, &config),
            config,
            state,
            local_index,
            keys: None,
            transcript: None,
            identity: identity::PeerIdentity::default(),
            message_limits,
            ticket: None,
            ticket_issued: false,
            reply: None,
            confirm_deadline: None,
            path,
            previous_path: None,
            probing: None,
            observed: observed::ObservedAddresses::default(),
            signals: signals::Signals::default(),
            epoch: now,
            replay: ReplayWindow::default(),
            received: AckRanges::default(),
            ack_policy: AckPolicy::new(ack_config),
            largest_received_at: None,
            ack_pending: false,
            ack_copies_due: 0,
            ping_unanswered: false,
            copied_pings: (now, 0),
            limits_repeat: limits_repeat::LimitsRepeat::default(),
            ack_ranges: Vec::new(),
            path_response_due: None,
            challenge_due: None,
            last_received: now,
            last_data: now,
            discard_previous_key_at: None,
            peer_key_phase_start: 0,
            largest_ack_sent: None,
            loss,
            recovery: None,
            initial_window,
            transfer,
            rate_limit,
            send_blocked_until: None,
            app_limited: false,
            sent_data: false,
            probes_due: 0,
            recovery_send: RecoverySend::Idle,
            ping_due: false,
            last_ack_eliciting_sent: now,
            released_scratch_at: now,
            release_waiting: false,
            ack_frequency_sequence: 0,
            ack_frequency_sent: None,
            ack_frequency_due: false,
            messages_out: MessageSender::new(),
            messages_held: 0,
            messages_charged: 0,
            messages_in: MessageReceiver::new(),
            inbox: untaken::Untaken::new(),
            released: false,
            datagrams_out,
            datagrams_in: received_datagrams::ReceivedDatagrams::default(),
            datagrams_taken: 0,
            events: event::Events::default(),
            close_when_drained: None,
            close_frame: None,
            close_due: false,
            error: None,
            stats: stats::Counters::default(),
        }
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

    /// Queues a rendezvous frame for the peer (sent reliably).
    pub(crate) fn send_signal(&mut self, signal: signals::Signal) {
        self.signals.send(signal);
    }

    /// The next rendezvous frame the peer sent, for the endpoint.
    pub(crate) fn poll_signal(&mut self) -> Option<signals::Signal> {
        self.signals.poll_received()
    }

    /// The smoothed round-trip time.
    pub(crate) fn smoothed_rtt(&self) -> Duration {
        self.loss.rtt().smoothed()
    }

    /// When an acknowledgement of the packets in flight is expected (`now`
    /// plus the smoothed round trip), if any packet in flight asks for one.
    pub(crate) fn answer_expected(&self, now: Instant) -> Option<Instant> {
        (self.loss.bytes_in_flight() > 0).then(|| now + self.smoothed_rtt())
    }

    /// Whether the last [`poll_transmit`](Self::poll_transmit) sent
    /// application data (stream bytes, a message, a datagram), not control
    /// frames alone: only such a packet opens an exchange.
    pub(crate) fn sent_data(&self) -> bool {
        self.sent_data
    }

    /// This side's address as the peer sees it (behind a NAT, the public
    /// address and port of its mapping), from the peer's newest report;
    /// `None` until the first one arrives. [`Event::ObservedAddressChanged`]
    /// says when it changes.
    pub fn observed_address(&self) -> Option<SocketAddr> {
        self.observed.mine()
    }

    /// Which side of the handshake this is.
    pub fn side(&self) -> Side {
        self.side
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
                || matches!(
                    self.error.as_deref(),
                    Some(ConnectionError::LocallyClosed { .. })
                ))
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

    /// Sends an ack-eliciting packet soon, as a keep-alive would: after
    /// this side's own address changed (its endpoint moved to another
    /// socket), it shows the peer the new path at once rather than at the
    /// next keep-alive. Nothing before the handshake's end.
    pub fn ping(&mut self) {
        if self.is_established() {
            self.ping_due = true;
        }
    }

    /// When application data last went either way (see `last_data`).
    pub(crate) fn last_data(&self) -> Instant {
        self.last_data
    }

    /// Why it closed, once it has.
    pub fn error(&self) -> Option<&ConnectionError> {
        self.error.as_deref()
    }

    // ---- the application's commands ----

    /// Queues `event` unless the same one already waits: the queue holds
    /// each event once, so packets from the peer cannot grow it while the
    /// application is not looking (one `MessageReceived` means "call
    /// `recv_message` until it is empty").
    #[inline]
    fn notify(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The next event, if any. Each kind of event is queued once until it
    /// is taken: after `MessageReceived`, take every message; after
    /// `StreamOpened`, accept every stream.
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.events.pop()?;
        if let Event::StreamReadable(id) = event {
            self.streams.readable_taken(id);
        }
        Some(event)
    }

    /// The next event, for an endpoint that queues it for its application:
    /// a stream's readable event stays marked as waiting until the
    /// application takes it ([`Self::readable_event_taken`]), so that no
    /// second one is queued meanwhile, and the endpoint keeps no record of
    /// its own per stream.
    pub(crate) fn poll_event_queued(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// The application took `id`'s readable event from the endpoint's
    /// queue (see [`Self::poll_event_queued`]).
    pub(crate) fn readable_event_taken(&mut self, id: StreamId) {
        self.streams.readable_taken(id);
    }

    fn is_open_for_data(&self) -> bool {
        matches!(self.state, State::Connecting(_) | State::Established)
            && self.close_when_drained.is_none()
    }

    /// Streams the last frames or commands made readable, writable or
    /// opened, as events.
    fn flush_readable(&mut self) {
        self.streams.wake_writers();
        while let Some(id) = self.streams.poll_readable() {
            self.events.push_new(Event::StreamReadable(id));
        }
        while let Some(id) = self.streams.poll_writable() {
            self.notify(Event::StreamWritable(id));
        }
        if self.streams.take_opened_by_peer() {
            self.notify(Event::StreamOpened);
        }
        if self.streams.take_message_room_released() {
            self.notify(Event::MessagesWritable);
        }
        if self.datagrams_out.take_room_released() {
            self.notify(Event::DatagramsWritable);
        }
    }
}

/// The largest message that travels in one Message frame: what any packet
/// at the 1 200-byte minimum carries, so it fits whatever the path.
/// Every Datagram frame received is checked against it.
fn small_message_limit() -> usize {
    SMALL_MESSAGE_LIMIT
}

/// [`small_message_limit`], worked out at compile time.
const SMALL_MESSAGE_LIMIT: usize = match tern_wire::MaxUdpPayload::new(tern_wire::MIN_UDP_PAYLOAD) {
    Ok(payload) => payload.guaranteed_message_capacity(),
    Err(_) => 1024,
};
