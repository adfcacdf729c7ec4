//! Datagrams in: packets opened in place, duplicates dropped, the
//! initiator's reply finishing the handshake, a peer's new address taken
//! up (and challenged), and every frame dispatched.

use std::net::SocketAddr;

use bytes::Bytes;
use quanta::Instant;
use tern_wire::{
    Ack, Datagram, DecodeError, Frame, FrameHandler, Message, PacketType, PathChallenge,
    PathResponse, Stream,
};

use super::error::{ConnectionError, ProtocolError};
use super::event::Event;
use super::joined::Joined;
use super::path::Path;
use super::path::probe::is_probing;
use super::send::{ACKS_PER_PING, COPIED_PINGS_PER_RTT};
use super::streams::messages::MESSAGE_CHARGE;
use super::{Connection, State, small_message_limit};
use crate::{Direction, StreamId};

impl Connection {
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
            self.stats.rare().dropped_unauthenticated += 1;
            return;
        };
        let len = datagram.len();
        let opened = match keys.opener.open(datagram) {
            Ok(opened) => opened,
            Err(_) => {
                self.stats.rare().dropped_unauthenticated += 1;
                return;
            }
        };
        let pn = opened.packet_number();
        let key_updated = opened.key_updated();
        let frames = opened.frames();
        if self.replay.accept(pn).is_err() {
            self.stats.rare().dropped_duplicates += 1;
            return;
        }
        if key_updated {
            // The peer may update again only once it holds an ACK for a
            // packet under its current key, so this side must have sent
            // one (RFC 9001 §6.2): an earlier update is a violation.
            if self
                .largest_ack_sent
                .is_none_or(|acked| acked < self.peer_key_phase_start)
            {
                self.fail(now, ProtocolError::KeyUpdateTooSoon);
                return;
            }
            self.peer_key_phase_start = pn;
            self.discard_previous_key_at = Some(now + self.three_ptos());
        }
        if let State::Closing { .. } = self.state {
            // No answer of its own: the Close goes again once a probe
            // timeout (`handle_timeout`), however many packets arrive, so
            // a peer's packets cannot multiply it. What arrives raises the
            // path's amplification allowance, which the Close respects.
            if from == self.path.remote() {
                self.path.on_received(len);
            }
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
        if from != self.path.remote() && is_probing(&frames) {
            // A probe of another path (or the answer to one): it moves
            // nothing, and asks for no acknowledgement of its own.
            self.on_authenticated(now, from, pn, len, false);
            self.on_probing_packet(now, from, frames);
            self.on_packet_recorded(now, pn, false);
            return;
        }
        self.on_authenticated(now, from, pn, len, true);
        if self.holds_back(&frames) {
            // Not recorded as received: never acknowledged, so resent.
            self.stats.rare().held_before_proof += 1;
            return;
        }
        let mut packet = PacketFrames {
            connection: self,
            now,
            ack_eliciting: false,
            ping: false,
            streams_changed: false,
            joined: Joined::new(),
            delivered: Delivered::default(),
        };
        let result = frames
            .handle(&mut packet)
            .and_then(|()| packet.hand_over_joined());
        let (ack_eliciting, ping) = (packet.ack_eliciting, packet.ping);
        let (streams_changed, delivered) = (packet.streams_changed, packet.delivered);
        if streams_changed {
            self.flush_readable();
        }
        self.raise_delivered(now, delivered);
        match result {
            Ok(()) => {}
            Err(Stop::Violation(e)) => {
                self.fail(now, e);
                return;
            }
            Err(Stop::NotEstablished) => return,
        }
        self.on_packet_recorded(now, pn, ack_eliciting);
        if ping {
            // A PING asks for an acknowledgement (a probe, a keep-alive, an
            // MTU probe): it goes at once, not thinned. (Leaving MTU probes
            // thinned doubled the longest wait of a lossy-ACK cell.)
            self.ack_policy.ack_at_once(now);
            self.ping_unanswered = true;
            self.copy_acks_for_ping(now);
        }
    }

    /// Has the ACK of a PING go `ACKS_PER_PING` times, for at most
    /// `COPIED_PINGS_PER_RTT` PINGs per smoothed round trip: a probe
    /// timeout's probes all get their copies, while a peer that floods
    /// PINGs gets one ACK for each of the rest. Not before this side's
    /// first RTT sample: the PINGs of a handshake (the reply's) and of the
    /// first MTU probes are answered once, or two more ACK-only packets
    /// each stay on record on a connection that then idles (7 889 bytes
    /// per idle connection against 7 572, measured).
    fn copy_acks_for_ping(&mut self, now: Instant) {
        if !self.loss.rtt().has_sample() {
            return;
        }
        let (since, count) = &mut self.copied_pings;
        if now.saturating_duration_since(*since) >= self.loss.rtt().smoothed() {
            (*since, *count) = (now, 0);
        }
        if *count < COPIED_PINGS_PER_RTT {
            *count += 1;
            self.ack_copies_due = ACKS_PER_PING;
        }
    }

    /// The initiator's reply (or a repeat of it).
    fn handle_reply(&mut self, now: Instant, from: SocketAddr, datagram: &mut [u8]) {
        let State::Connecting(connecting) = &mut self.state else {
            if !self
                .transcript
                .as_ref()
                .is_some_and(|t| t.is_repeated_reply(datagram))
            {
                self.stats.rare().dropped_unauthenticated += 1;
            } else {
                self.stats.rare().dropped_duplicates += 1;
            }
            return;
        };
        if from != self.path.remote() {
            self.stats.rare().dropped_unauthenticated += 1;
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
                self.stats.rare().dropped_unauthenticated += 1;
                return;
            }
        };
        let pn = established.reply.packet_number();
        let frames = established.reply.frames();
        self.keys = Some(established.keys);
        self.transcript = Some(Box::new(established.transcript));
        self.on_responder_proven();
        self.state = State::Established;
        self.notify(Event::Connected);
        if self.replay.accept(pn).is_err() {
            return;
        }
        self.on_packet(now, from, pn, len, frames);
    }

    /// An authenticated, new packet of `len` bytes arrived from `from`; one
    /// that may `move_path` and comes from a new address moves the
    /// connection there. Always inlined (a plain `#[inline]` was declined):
    /// every packet comes through here, and as a call it cost a ping
    /// packet 23 instructions more (the call, and `from` compared with the
    /// path again).
    #[inline(always)]
    fn on_authenticated(
        &mut self,
        now: Instant,
        from: SocketAddr,
        pn: u64,
        len: usize,
        move_path: bool,
    ) {
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
            self.announce_confirmed();
        }
        if from == self.path.remote() {
            self.path.on_received(len);
        } else if self
            .previous_path
            .as_ref()
            .is_some_and(|p| p.remote() == from)
        {
            // A straggler from the address the peer left.
        } else if newest && move_path {
            // The peer's address changed (NAT rebinding, roaming): move
            // there, held to the amplification limit until it answers a
            // challenge.
            let mut path = Path::challenged(from, self.config.path_mtu(), now, self.loss.pto());
            path.on_received(len);
            let old = std::mem::replace(&mut self.path, path);
            if old.is_validated() {
                self.previous_path = Some(Box::new(old));
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

    /// A frame of the packet being read (the hot ones come through their
    /// own methods below, from [`PacketFrames`], or through here alike).
    fn handle_frame(&mut self, now: Instant, frame: &Frame<'_>) -> Result<(), ProtocolError> {
        match frame {
            Frame::Padding(_) | Frame::Ping => {}
            Frame::Ack(ack) => self.handle_ack(now, ack)?,
            Frame::Stream(s) => {
                self.on_stream(now, s)?;
                self.flush_readable();
            }
            Frame::Message(m) => {
                let messages = self.on_message(now, m)?;
                self.raise_delivered(
                    now,
                    Delivered {
                        messages,
                        ..Delivered::default()
                    },
                );
            }
            Frame::MaxData(m) => self.streams.on_max_data(m.max),
            Frame::MaxStreamData(m) => {
                self.streams.on_max_stream_data(m)?;
                self.flush_readable();
            }
            Frame::MaxStreams(m) => match self.streams.on_max_streams(m) {
                Some(Direction::Bi | Direction::OneWay) => self.notify(Event::StreamsAvailable),
                Some(Direction::Uni) => self.notify(Event::MessagesWritable),
                None => {}
            },
            // Its readable event is raised with the packet's stream frames
            // (`PacketFrames::on_frame`).
            Frame::ResetStream(r) => self.streams.on_reset(r)?,
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
            Frame::Identity(proof) => self.on_identity_frame(proof)?,
            Frame::ObservedAddress(report) => {
                if self.observed.on_report(report) {
                    self.notify(Event::ObservedAddressChanged);
                }
            }
            Frame::MaxMessageSize(limit) => self.message_limits.on_frame(*limit),
            Frame::Register(_)
            | Frame::ConnectVia(_)
            | Frame::Introduce(_)
            | Frame::IntroductionRefused(_)
            | Frame::RelayRequest(_)
            | Frame::RelayGrant(_)
            | Frame::RelayRefused(_) => {
                if let Some(signal) = super::signals::Signal::of(frame) {
                    self.signals.on_received(signal);
                }
            }
            Frame::NewTicket(ticket) => self.on_ticket_frame(ticket),
            Frame::PathChallenge(PathChallenge { data }) => {
                self.path_response_due = Some(*data);
            }
            Frame::PathResponse(PathResponse { data }) => {
                if self.path.on_response(*data) {
                    self.on_path_validated(now);
                }
            }
            Frame::Datagram(d) => {
                self.on_datagram(now, d)?;
                self.raise_delivered(
                    now,
                    Delivered {
                        datagrams: true,
                        ..Delivered::default()
                    },
                );
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

    /// A Stream frame; the events of the streams it made readable are
    /// the caller's to raise ([`Self::flush_readable`]), once for all the
    /// frames of a packet.
    fn on_stream(&mut self, now: Instant, s: &Stream<'_>) -> Result<(), ProtocolError> {
        self.last_data = now;
        let id = StreamId(s.id);
        if let Some(delivered) = self.streams.on_stream_frame(id, s.offset, s.data, s.fin)? {
            self.inbox
                .push_back(delivered.message, Some(delivered.held));
            self.notify(Event::MessageReceived);
        }
        Ok(())
    }

    /// A Message frame; whether it was new and went to the inbox (its
    /// event is the caller's to raise, [`Self::raise_delivered`], once for
    /// all the frames of a packet).
    #[inline]
    fn on_message(&mut self, now: Instant, m: &Message<'_>) -> Result<bool, ProtocolError> {
        self.last_data = now;
        if m.data.len() as u64 > self.config.max_message_size {
            return Err(ProtocolError::MessageTooLarge);
        }
        if self
            .messages_in
            .on_message(m.id)
            .map_err(ProtocolError::MessageWindow)?
        {
            self.streams
                .on_message_received(m.data.len() as u64 + MESSAGE_CHARGE)
                .map_err(ProtocolError::FlowControl)?;
            self.inbox.push_back(owned(m.data), None);
            return Ok(true);
        }
        Ok(false)
    }

    /// A Datagram frame, queued for the application (its event and the
    /// count of the datagrams it pushed out are the caller's,
    /// [`Self::raise_delivered`], once for all the frames of a packet).
    #[inline]
    fn on_datagram(&mut self, now: Instant, d: &Datagram<'_>) -> Result<(), ProtocolError> {
        self.last_data = now;
        if d.data.len() > small_message_limit() {
            return Err(ProtocolError::DatagramTooLarge);
        }
        self.datagrams_in
            .push(d.data, self.config.datagram_receive_queue);
        Ok(())
    }

    /// Queues the empty datagrams counted in `delivered` (one look at the
    /// ring for all of them), noting that datagrams were delivered.
    #[inline]
    fn queue_empty_datagrams(&mut self, now: Instant, delivered: &mut Delivered) {
        let count = std::mem::take(&mut delivered.empty_datagrams);
        if count > 0 {
            self.last_data = now;
            self.datagrams_in
                .push_empty(count, self.config.datagram_receive_queue);
            delivered.datagrams = true;
        }
    }

    /// Raises the events of what a packet's frames delivered (the empty
    /// datagrams counted queued first), counts the untaken datagrams they
    /// pushed out, and grants the window update the messages made due.
    #[inline]
    fn raise_delivered(&mut self, now: Instant, mut delivered: Delivered) {
        self.queue_empty_datagrams(now, &mut delivered);
        if delivered.messages || delivered.datagrams {
            self.raise_delivered_events(delivered);
        }
    }

    fn raise_delivered_events(&mut self, delivered: Delivered) {
        if delivered.messages {
            self.streams.after_messages_received();
            self.notify(Event::MessageReceived);
        }
        if delivered.datagrams {
            self.notify(Event::DatagramReceived);
            let dropped = self.datagrams_in.take_dropped();
            if dropped > 0 {
                self.stats.rare().datagrams_dropped += dropped;
            }
        }
    }
}

/// The peer's bytes, copied out of the packet; an empty message or
/// datagram costs no copy (a peer may send hundreds in a packet).
#[inline]
pub(super) fn owned(data: &[u8]) -> Bytes {
    if data.is_empty() {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(data)
    }
}

/// A packet's frames being handed to its connection, each where it is
/// read, and what they asked for.
struct PacketFrames<'c> {
    connection: &'c mut Connection,
    now: Instant,
    ack_eliciting: bool,
    ping: bool,
    /// Stream or reset frames were handled since their events were last
    /// raised.
    streams_changed: bool,
    /// Small stream frames held to be handed over as one.
    joined: Joined,
    /// Messages and datagrams delivered, their events not raised yet.
    delivered: Delivered,
}

/// What a packet's Message and Datagram frames delivered: their events are
/// raised once a packet, not once a frame (a peer may send hundreds of
/// empty ones in a packet).
#[derive(Debug, Default, Clone, Copy)]
struct Delivered {
    messages: bool,
    datagrams: bool,
    /// Empty datagrams counted, not queued yet: they are queued together
    /// where the events are raised (before any other datagram, and any
    /// rarer frame, so the order stays the frames').
    empty_datagrams: usize,
}

/// Why a packet's frames stopped being read.
enum Stop {
    /// A frame broke the protocol: the connection is closed for it.
    Violation(ProtocolError),
    /// A frame ended the connection's established state (the peer's
    /// Close): nothing after it is read.
    NotEstablished,
}

impl From<DecodeError> for Stop {
    fn from(e: DecodeError) -> Self {
        Self::Violation(ProtocolError::Frame(e))
    }
}

impl From<ProtocolError> for Stop {
    fn from(e: ProtocolError) -> Self {
        Self::Violation(e)
    }
}

impl PacketFrames<'_> {
    /// Hands the stream frames joined so far to the connection, if any.
    #[inline]
    fn hand_over_joined(&mut self) -> Result<(), Stop> {
        if self.joined.is_held() {
            self.hand_over_run()
        } else {
            Ok(())
        }
    }

    fn hand_over_run(&mut self) -> Result<(), Stop> {
        let Some(frame) = self.joined.take_run() else {
            return Ok(());
        };
        self.streams_changed = true;
        self.connection.on_stream(self.now, &frame)?;
        self.still_established()
    }

    /// Reading goes on while the connection is established.
    #[inline]
    fn still_established(&self) -> Result<(), Stop> {
        if matches!(self.connection.state, State::Established) {
            Ok(())
        } else {
            Err(Stop::NotEstablished)
        }
    }
}

impl<'a> FrameHandler<'a> for PacketFrames<'_> {
    type Stop = Stop;

    fn on_frame(&mut self, frame: Frame<'a>) -> Result<(), Stop> {
        self.hand_over_joined()?;
        if let Frame::ResetStream(_) = &frame {
            // As a stream frame: the readable event it makes is raised
            // with theirs, once for the packet (a peer may reset a stream
            // in every frame of it).
            self.ack_eliciting = true;
            self.streams_changed = true;
            self.connection.handle_frame(self.now, &frame)?;
            return Ok(());
        }
        // The events of the frames before it come first, as the frames did.
        if std::mem::take(&mut self.streams_changed) {
            self.connection.flush_readable();
        }
        self.connection
            .raise_delivered(self.now, std::mem::take(&mut self.delivered));
        self.ack_eliciting |= frame.is_ack_eliciting();
        self.ping |= matches!(frame, Frame::Ping);
        self.connection.handle_frame(self.now, &frame)?;
        self.still_established()
    }

    #[inline]
    fn on_ping(&mut self) -> Result<(), Stop> {
        self.ack_eliciting = true;
        self.ping = true;
        Ok(())
    }

    #[inline]
    fn on_ack(&mut self, frame: Ack<'_>) -> Result<(), Stop> {
        self.hand_over_joined()?;
        self.connection.handle_ack(self.now, &frame)?;
        self.still_established()
    }

    #[inline]
    fn on_stream(&mut self, frame: Stream<'a>) -> Result<(), Stop> {
        self.ack_eliciting = true;
        if self.joined.take(&frame) {
            return Ok(());
        }
        self.hand_over_joined()?;
        if self.joined.take(&frame) {
            return Ok(());
        }
        self.streams_changed = true;
        self.connection.on_stream(self.now, &frame)?;
        self.still_established()
    }

    #[inline]
    fn on_message(&mut self, frame: Message<'a>) -> Result<(), Stop> {
        self.ack_eliciting = true;
        self.hand_over_joined()?;
        // A message or datagram never changes the connection's state.
        self.delivered.messages |= self.connection.on_message(self.now, &frame)?;
        Ok(())
    }

    #[inline]
    fn on_datagram(&mut self, frame: Datagram<'a>) -> Result<(), Stop> {
        self.ack_eliciting = true;
        self.hand_over_joined()?;
        if frame.data.is_empty() {
            self.delivered.empty_datagrams += 1;
            return Ok(());
        }
        self.connection
            .queue_empty_datagrams(self.now, &mut self.delivered);
        self.connection.on_datagram(self.now, &frame)?;
        self.delivered.datagrams = true;
        Ok(())
    }
}
