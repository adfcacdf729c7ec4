//! A connection's streams: the application's bidirectional streams and the
//! one-way streams that carry messages too large for one packet, with flow
//! control per stream and for the connection, and the stream-count limits.
//!
//! Every one-way stream carries exactly one message: it is reassembled as it
//! arrives and delivered whole when its last byte is in. So a large message
//! holds back no other message, and the application never sees a half.
//!
//! The application's streams share one send budget ([`SendBudget`]): a
//! write takes what fits in the stream's own buffer, in the connection's
//! budget (no more than an equal share while other streams want room) and,
//! once the peer has announced its flow-control limit for the stream,
//! under that limit; and no more than [`UNSENT_LIMIT`] of the stream's
//! bytes wait unsent, so that bytes are sent soon after they are written.
//! The flow-control bound keeps a stream whose reader does not read
//! from holding budget it cannot send, which would leave the other streams
//! waiting on that reader; and since each side announces a stream's whole
//! receive window as soon as it knows the stream (not when its application
//! first reads), bytes written before the announcement can always be sent.
//! A write that takes less than it was given puts its stream on the
//! waiting list; whenever room is released (acknowledgements, a stream
//! finished, reset or stopped, a higher limit from the peer, its unsent
//! bytes halved by sending), every
//! waiting stream that has room again gets
//! [`Event::StreamWritable`](super::Event).

pub(super) mod flow_control;
pub(crate) mod messages;
mod range_set;
pub(crate) mod recv_stream;
mod ring;
pub(super) mod scheduler;
mod send_budget;
pub(crate) mod send_stream;
pub(crate) mod stream_id;
#[cfg(test)]
mod stream_tests;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;
use tern_wire::{Frame, MaxStreamData, MaxStreams, PacketBuilder, ResetStream, StopSending};

use super::carried::{Carried, CarriedRecord};
use super::error::{ProtocolError, ReadError, WriteError};
use crate::config::{
    ConnectionConfig, INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW,
};
use flow_control::{RecvWindow, SendCredit};
use recv_stream::{RecvStream, StreamError};
use scheduler::{Scheduler, Urgency};
use send_budget::{Charge, SendBudget};
use send_stream::SendStream;
use stream_id::{Direction, Side, StreamId, StreamLimits};

/// Whose turn it is to put data in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Turn {
    /// The small messages, as one lane.
    Messages,
    /// A stream (an application stream or a large message).
    Stream(StreamId),
}

/// The sending half of a stream.
#[derive(Debug)]
struct Outgoing {
    data: SendStream,
    /// The peer's limit for this stream (an offset).
    credit: SendCredit,
    /// The peer has announced its limit for the stream (its first
    /// MaxStreamData arrived): writes stay under it from then on.
    credit_announced: bool,
    /// The rest of a large message not yet copied into `data`.
    message: Option<Bytes>,
    /// The application's error code once it reset the stream (or the peer
    /// asked it to stop).
    reset_code: Option<u64>,
    /// What the stream counts against the connection's send budget (an
    /// application stream's; a message's counts nothing).
    charge: Charge,
    /// The last write took less than it was given.
    wants_room: bool,
    /// The stream is on the waiting list for a writable event.
    waiting: bool,
}

/// The receiving half of a stream.
#[derive(Debug)]
struct Incoming {
    data: RecvStream,
    window: RecvWindow,
    /// A large message being reassembled (one-way streams only).
    message: Option<BytesMut>,
    /// The peer reset the stream with this code.
    reset_code: Option<u64>,
    /// This side asked the peer to stop sending, with this code.
    stop_code: Option<u64>,
}

/// What the application learns from a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes were copied (0 when nothing is there yet).
    Read(usize),
    /// The stream ended: every byte was read.
    Finished,
}

/// The most bytes an application stream holds that were written and never
/// sent (on top of those in flight): a write takes no more, and a writer
/// waiting on it is woken once sending brought it down by half. Bytes then
/// go out soon after they are written, while still in the CPU's cache —
/// copying them into packets from a buffer megabytes behind the writer
/// missed the cache on every line — and a stream's send buffer fills with
/// bytes in flight rather than bytes queued. The writer refills between
/// the driver's turns; of 128, 256, 384 and 512 KiB, 256 KiB gave the
/// highest bulk rate on loopback (docs/benchmarks.md, "ring bulk").
pub(super) const UNSENT_LIMIT: usize = 256 * 1024;

/// Contiguous bytes of one stream (and its end, with `fin`), as the
/// packets that carried them were acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StreamRun {
    pub(super) id: StreamId,
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) fin: bool,
}

impl StreamRun {
    /// Takes `chunk` in if it continues the run at either end; whether it did.
    pub(super) fn absorb(&mut self, chunk: &StreamRun) -> bool {
        if chunk.id != self.id {
            return false;
        }
        let end = self.offset + self.len;
        if !self.fin && chunk.offset == end {
            self.len += chunk.len;
            self.fin = chunk.fin;
            true
        } else if !chunk.fin && chunk.offset + chunk.len == self.offset {
            self.offset = chunk.offset;
            self.len += chunk.len;
            true
        } else {
            false
        }
    }
}

/// A large message delivered from a one-way stream.
#[derive(Debug)]
pub(super) struct Delivered {
    pub(super) message: Bytes,
}

/// Every stream of one connection.
#[derive(Debug)]
pub(super) struct Streams {
    side: Side,
    limits: StreamLimits,
    // Looked up for every packet sent, received and acknowledged, so they
    // hash with FxHash: the keys cannot be chosen to collide, since the
    // streams that exist are always the first ones of each kind, up to
    // the limits this side announced.
    outgoing: FxHashMap<StreamId, Outgoing>,
    incoming: FxHashMap<StreamId, Incoming>,
    turns: Scheduler<Turn>,
    /// What the peer lets this side send over all streams and messages.
    pub(super) credit: SendCredit,
    /// What this side lets the peer send over all streams and messages.
    pub(super) window: RecvWindow,
    stream_send_buffer: usize,
    /// Bytes the application's streams may hold together.
    budget: SendBudget,
    /// Streams whose write took less than it was given, until they get
    /// their writable event.
    waiting: Vec<StreamId>,
    /// Room was released since the waiting list was last looked at.
    room_released: bool,
    stream_receive_window: u64,
    max_message_size: u64,
    concurrent: [u64; 2],
    /// Peer-opened streams per direction: every index below was opened.
    opened_remote: [u64; 2],
    /// Peer-opened streams per direction that are done with.
    retired_remote: [u64; 2],
    /// Stream counts last advertised to the peer, per direction.
    advertised_streams: [u64; 2],
    /// Streams the peer opened that the application has not accepted yet.
    accept_queue: VecDeque<StreamId>,
    /// Streams whose MaxStreamData is to be sent.
    max_stream_data_due: Vec<StreamId>,
    /// Streams whose reset is to be sent (or sent again).
    resets_due: Vec<StreamId>,
    /// Stop-sending requests to send: stream and code.
    stops_due: Vec<(StreamId, u64)>,
    /// Whether MaxData is to be sent.
    pub(super) max_data_due: bool,
    /// Streams that became readable since the last look.
    pub(super) readable: Vec<StreamId>,
    /// Streams that gained room to write, or were stopped, since the last look.
    pub(super) writable: Vec<StreamId>,
    /// Whether the peer opened streams since the last look.
    pub(super) opened_by_peer: bool,
}

fn slot(direction: Direction) -> usize {
    match direction {
        Direction::Bi => 0,
        Direction::Uni => 1,
    }
}

const DIRECTIONS: [Direction; 2] = [Direction::Bi, Direction::Uni];

impl Streams {
    pub(super) fn new(side: Side, config: &ConnectionConfig) -> Self {
        let concurrent = [
            config.max_concurrent_streams,
            config.max_concurrent_messages,
        ];
        Self {
            side,
            limits: StreamLimits::new(
                side,
                INITIAL_MAX_STREAMS,
                INITIAL_MAX_STREAMS,
                INITIAL_MAX_STREAMS,
                INITIAL_MAX_STREAMS,
            ),
            outgoing: FxHashMap::default(),
            incoming: FxHashMap::default(),
            turns: Scheduler::new(),
            credit: SendCredit::new(INITIAL_CONNECTION_WINDOW),
            window: RecvWindow::with_initial_limit(
                config.receive_window.max(INITIAL_CONNECTION_WINDOW),
                INITIAL_CONNECTION_WINDOW,
            ),
            stream_send_buffer: config.stream_send_buffer,
            budget: SendBudget::new(config.send_buffer),
            waiting: Vec::new(),
            room_released: false,
            stream_receive_window: config.stream_receive_window.max(INITIAL_STREAM_WINDOW),
            max_message_size: config.max_message_size,
            concurrent,
            opened_remote: [0; 2],
            retired_remote: [0; 2],
            advertised_streams: [INITIAL_MAX_STREAMS; 2],
            accept_queue: VecDeque::new(),
            max_stream_data_due: Vec::new(),
            resets_due: Vec::new(),
            stops_due: Vec::new(),
            max_data_due: true,
            readable: Vec::new(),
            writable: Vec::new(),
            opened_by_peer: false,
        }
    }

    fn peer_side(&self) -> Side {
        match self.side {
            Side::Initiator => Side::Responder,
            Side::Responder => Side::Initiator,
        }
    }

    fn new_outgoing(&self) -> Outgoing {
        Outgoing {
            data: SendStream::new(self.stream_send_buffer),
            credit: SendCredit::new(INITIAL_STREAM_WINDOW),
            credit_announced: false,
            message: None,
            reset_code: None,
            charge: Charge::default(),
            wants_room: false,
            waiting: false,
        }
    }

    fn new_incoming(&self, message: bool) -> Incoming {
        Incoming {
            data: RecvStream::new(INITIAL_STREAM_WINDOW),
            window: RecvWindow::with_initial_limit(
                self.stream_receive_window,
                INITIAL_STREAM_WINDOW,
            ),
            message: message.then(BytesMut::new),
            reset_code: None,
            stop_code: None,
        }
    }

    /// The receiving half of a bidirectional stream, with its whole window
    /// announced to the peer at once: what the peer writes before this
    /// side's application reads can then be sent, and does not sit in the
    /// peer's send budget that its other streams share.
    fn new_announced_incoming(&mut self, id: StreamId) -> Incoming {
        let mut inc = self.new_incoming(false);
        inc.window = RecvWindow::new(self.stream_receive_window);
        inc.data.set_limit(inc.window.limit());
        self.max_stream_data_due.push(id);
        inc
    }

    // ---- the application's side ----

    /// Opens a bidirectional stream, if the peer allows one more.
    pub(super) fn open(&mut self) -> Option<StreamId> {
        let id = self.limits.open(Direction::Bi)?;
        let out = self.new_outgoing();
        self.outgoing.insert(id, out);
        let inc = self.new_announced_incoming(id);
        self.incoming.insert(id, inc);
        Some(id)
    }

    /// Sends `message` on a one-way stream of its own, if the peer allows
    /// one more; gives it back otherwise.
    pub(super) fn send_message(&mut self, message: Bytes) -> Result<(), Bytes> {
        let Some(id) = self.limits.open(Direction::Uni) else {
            return Err(message);
        };
        let mut out = self.new_outgoing();
        out.message = Some(message);
        Self::pump_message(&mut out);
        self.outgoing.insert(id, out);
        self.turns.schedule(Turn::Stream(id), Urgency::New);
        Ok(())
    }

    /// Copies what fits of a large message into its stream.
    fn pump_message(out: &mut Outgoing) {
        let Some(rest) = out.message.as_mut() else {
            return;
        };
        let n = out.data.write(rest);
        let _ = rest.split_to(n);
        if rest.is_empty() {
            out.message = None;
            out.data.finish();
        }
    }

    /// The next stream the peer opened.
    pub(super) fn accept(&mut self) -> Option<StreamId> {
        self.accept_queue.pop_front()
    }

    pub(super) fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        let out = Self::app_outgoing(&mut self.outgoing, id)?;
        if let Some(code) = out.reset_code {
            return Err(WriteError::Stopped(code));
        }
        let room = Self::room(out, &self.budget);
        let n = out.data.write(&data[..data.len().min(room)]);
        out.wants_room = n < data.len();
        if out.wants_room && !out.waiting {
            out.waiting = true;
            self.waiting.push(id);
        }
        self.room_released |= Self::settle(out, &mut self.budget);
        if n > 0 {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
        Ok(n)
    }

    pub(super) fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        let out = Self::app_outgoing(&mut self.outgoing, id)?;
        out.data.finish();
        self.room_released |= Self::settle(out, &mut self.budget);
        self.turns.schedule(Turn::Stream(id), Urgency::New);
        Ok(())
    }

    pub(super) fn reset(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        let out = Self::app_outgoing(&mut self.outgoing, id)?;
        if out.reset_code.is_none() {
            out.reset_code = Some(code);
            out.data.reset();
            self.room_released |= Self::settle(out, &mut self.budget);
            self.resets_due.push(id);
        }
        self.turns.remove(Turn::Stream(id));
        Ok(())
    }

    /// Bytes an application stream's write may take: what fits in its own
    /// buffer, in the connection's budget, and under the peer's limit once
    /// the peer announced it.
    fn room(out: &Outgoing, budget: &SendBudget) -> usize {
        let credit = if out.credit_announced {
            let left = out.credit.limit().saturating_sub(out.data.written());
            usize::try_from(left).unwrap_or(usize::MAX)
        } else {
            usize::MAX
        };
        out.data
            .free_space()
            .min(credit)
            .min(budget.room(out.charge))
            .min(UNSENT_LIMIT.saturating_sub(out.data.unsent()))
    }

    /// Brings an application stream's charge against the budget up to
    /// date; returns whether room was released.
    fn settle(out: &mut Outgoing, budget: &mut SendBudget) -> bool {
        let held = out.data.buffered();
        let charge = Charge {
            held,
            contending: out.data.is_open() && (held > 0 || out.wants_room),
        };
        let old = std::mem::replace(&mut out.charge, charge);
        budget.recharge(old, charge)
    }

    /// Forgets the sending half of `id`, and what it counted against the
    /// budget.
    fn remove_outgoing(&mut self, id: StreamId) {
        if let Some(out) = self.outgoing.remove(&id) {
            self.room_released |= self.budget.recharge(out.charge, Charge::default());
        }
        self.turns.remove(Turn::Stream(id));
    }

    /// Gives every waiting stream that has room again its writable event,
    /// once room was released.
    pub(super) fn wake_writers(&mut self) {
        if !std::mem::take(&mut self.room_released) {
            return;
        }
        let Self {
            waiting,
            outgoing,
            budget,
            writable,
            ..
        } = self;
        waiting.retain(|id| {
            let Some(out) = outgoing.get_mut(id) else {
                return false;
            };
            // A finished stream waits for nothing; a stopped one had its
            // event when it was stopped.
            if out.data.is_open() && Self::room(out, budget) == 0 {
                return true;
            }
            out.waiting = false;
            if out.data.is_open() {
                writable.push(*id);
            }
            false
        });
    }

    /// Bytes the application's streams hold until acknowledged, together.
    pub(super) fn send_buffered(&self) -> usize {
        self.budget.held()
    }

    pub(super) fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), ReadError> {
        let inc = self
            .incoming
            .get_mut(&id)
            .ok_or(ReadError::UnknownStream(id))?;
        if inc.stop_code.is_none() {
            inc.stop_code = Some(code);
            self.stops_due.push((id, code));
        }
        Ok(())
    }

    fn app_outgoing(
        outgoing: &mut FxHashMap<StreamId, Outgoing>,
        id: StreamId,
    ) -> Result<&mut Outgoing, WriteError> {
        if id.direction() != Direction::Bi {
            return Err(WriteError::UnknownStream(id));
        }
        outgoing.get_mut(&id).ok_or(WriteError::UnknownStream(id))
    }

    /// Whether a bidirectional stream holds bytes, or an end, the
    /// application has not read yet.
    pub(super) fn has_unread(&self) -> bool {
        self.incoming.iter().any(|(id, inc)| {
            id.direction() == Direction::Bi
                && (inc.data.readable() > 0
                    || inc.data.final_size().is_some()
                    || inc.reset_code.is_some())
        })
    }

    /// Forgets every byte received and not yet read.
    pub(super) fn discard_unread(&mut self) {
        self.incoming.clear();
    }

    /// Bytes `write` would take on `id` now.
    pub(super) fn writable(&self, id: StreamId) -> usize {
        self.outgoing
            .get(&id)
            .filter(|o| id.direction() == Direction::Bi && o.reset_code.is_none())
            .map_or(0, |o| Self::room(o, &self.budget))
    }

    pub(super) fn read(&mut self, id: StreamId, out: &mut [u8]) -> Result<ReadOutcome, ReadError> {
        if id.direction() != Direction::Bi {
            return Err(ReadError::UnknownStream(id));
        }
        let inc = self
            .incoming
            .get_mut(&id)
            .ok_or(ReadError::UnknownStream(id))?;
        if let Some(code) = inc.reset_code {
            self.retire_incoming(id);
            return Err(ReadError::Reset(code));
        }
        let n = inc.data.read(out);
        if n == 0 {
            if inc.data.is_finished() {
                self.retire_incoming(id);
                return Ok(ReadOutcome::Finished);
            }
            return Ok(ReadOutcome::Read(0));
        }
        inc.window.on_consumed(n as u64);
        if inc.window.poll_update().is_some() {
            inc.data.set_limit(inc.window.limit());
            self.max_stream_data_due.push(id);
        }
        self.on_consumed(n as u64);
        Ok(ReadOutcome::Read(n))
    }

    /// Bytes of all streams and messages the application took: the
    /// connection window moves on.
    pub(super) fn on_consumed(&mut self, bytes: u64) {
        self.window.on_consumed(bytes);
        if self.window.poll_update().is_some() {
            self.max_data_due = true;
        }
    }

    /// The receiving half of `id` is done: forgotten, and once both halves
    /// are, a peer's stream counts toward the streams it may open anew.
    fn retire_incoming(&mut self, id: StreamId) {
        self.incoming.remove(&id);
        self.retire_if_done(id);
    }

    fn retire_if_done(&mut self, id: StreamId) {
        if self.incoming.contains_key(&id) || self.outgoing.contains_key(&id) {
            return;
        }
        if id.opener() != self.side {
            self.retired_remote[slot(id.direction())] += 1;
        }
    }

    /// A large message was taken by the application: its stream's slot is
    /// free for the peer's next one.
    pub(super) fn on_message_taken(&mut self) {
        self.retired_remote[slot(Direction::Uni)] += 1;
    }

    // ---- the peer's side ----

    /// Finds or opens (as the peer may, implicitly and in order) stream `id`
    /// named by a frame; `None` for a stream that is already done with.
    fn remote_stream(&mut self, id: StreamId, sends_data: bool) -> Result<bool, ProtocolError> {
        self.limits
            .check_remote(id, sends_data)
            .map_err(ProtocolError::Stream)?;
        if id.opener() == self.side {
            return Ok(true);
        }
        let direction = id.direction();
        let opened = &mut self.opened_remote[slot(direction)];
        if id.index() < *opened {
            return Ok(true);
        }
        let first = *opened;
        *opened = id.index() + 1;
        for index in first..=id.index() {
            let new = StreamId::new(id.opener(), direction, index);
            let inc = match direction {
                Direction::Bi => self.new_announced_incoming(new),
                Direction::Uni => self.new_incoming(true),
            };
            self.incoming.insert(new, inc);
            if direction == Direction::Bi {
                let out = self.new_outgoing();
                self.outgoing.insert(new, out);
                self.accept_queue.push_back(new);
                self.opened_by_peer = true;
            }
        }
        Ok(true)
    }

    /// A Stream frame arrived. Returns a large message it completed.
    pub(super) fn on_stream_frame(
        &mut self,
        id: StreamId,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<Option<Delivered>, ProtocolError> {
        self.remote_stream(id, true)?;
        let Some(inc) = self.incoming.get_mut(&id) else {
            return Ok(None);
        };
        if inc.reset_code.is_some() {
            return Ok(None);
        }
        let end = offset.saturating_add(data.len() as u64);
        if inc.message.is_some() && end > self.max_message_size {
            return Err(ProtocolError::MessageTooLarge);
        }
        let grew = inc
            .data
            .insert(offset, data, fin)
            .map_err(ProtocolError::StreamData)?;
        inc.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        self.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        let Some(assembly) = inc.message.as_mut() else {
            if inc.data.readable() > 0 || inc.data.is_finished() {
                self.readable.push(id);
            }
            return Ok(None);
        };
        let ready = inc.data.readable() as usize;
        if ready > 0 {
            let start = assembly.len();
            assembly.resize(start + ready, 0);
            inc.data.read(&mut assembly[start..]);
            inc.window.on_consumed(ready as u64);
            // A message's stream asks for more room only once the message
            // has taken half the limit every stream starts with: most
            // messages fit in it, and an update would be one more
            // ack-eliciting packet, and its ACK, in the middle of each.
            if inc.window.received() > INITIAL_STREAM_WINDOW / 2
                && inc.window.poll_update().is_some()
            {
                inc.data.set_limit(inc.window.limit());
                self.max_stream_data_due.push(id);
            }
            self.window.on_consumed(ready as u64);
            if self.window.poll_update().is_some() {
                self.max_data_due = true;
            }
        }
        if !inc.data.is_finished() {
            return Ok(None);
        }
        let message = assembly.split().freeze();
        self.incoming.remove(&id);
        Ok(Some(Delivered { message }))
    }

    pub(super) fn on_reset(&mut self, frame: &ResetStream) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, true)?;
        let Some(inc) = self.incoming.get_mut(&id) else {
            return Ok(());
        };
        let grew = frame.final_size.saturating_sub(inc.data.highest());
        if inc.data.final_size().is_some_and(|f| f != frame.final_size)
            || frame.final_size < inc.data.highest()
            || frame.final_size > inc.data.limit()
        {
            return Err(ProtocolError::StreamData(StreamError::FinalSize));
        }
        self.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        // Whatever was sent and will not be read frees the connection window.
        let unread = frame.final_size.saturating_sub(inc.data.read_offset());
        if inc.message.is_some() {
            self.incoming.remove(&id);
            self.on_message_taken();
        } else if inc.reset_code.is_none() {
            inc.reset_code = Some(frame.error_code);
            self.readable.push(id);
        }
        self.on_consumed(unread);
        Ok(())
    }

    pub(super) fn on_stop_sending(&mut self, frame: &StopSending) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, false)?;
        if let Some(out) = self.outgoing.get_mut(&id)
            && out.reset_code.is_none()
        {
            out.reset_code = Some(frame.error_code);
            out.data.reset();
            self.room_released |= Self::settle(out, &mut self.budget);
            self.resets_due.push(id);
            self.turns.remove(Turn::Stream(id));
            self.writable.push(id);
        }
        Ok(())
    }

    pub(super) fn on_max_stream_data(
        &mut self,
        frame: &MaxStreamData,
    ) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, false)?;
        if let Some(out) = self.outgoing.get_mut(&id) {
            out.credit.raise(frame.max);
            out.credit_announced = true;
            self.room_released |= out.waiting;
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        }
        Ok(())
    }

    /// The peer's new limit on streams this side opens; the direction whose
    /// limit rose, if one did (so a blocked `open` or large message may go).
    pub(super) fn on_max_streams(&mut self, frame: &MaxStreams) -> Option<Direction> {
        let bound = StreamId(frame.max);
        if bound.opener() != self.side {
            return None;
        }
        let direction = bound.direction();
        self.limits
            .on_max_streams(direction, bound.index())
            .then_some(direction)
    }

    pub(super) fn on_max_data(&mut self, max: u64) {
        let was_blocked = self.credit.available() == 0;
        self.credit.raise(max);
        if was_blocked && self.credit.available() > 0 {
            self.reschedule_all();
        }
    }

    /// Puts every stream with something to send back in line (after the
    /// connection window opened).
    fn reschedule_all(&mut self) {
        for (&id, out) in &self.outgoing {
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        }
    }

    // ---- acknowledgements and losses ----

    pub(super) fn on_stream_acked(&mut self, acked: StreamRun) {
        let StreamRun {
            id,
            offset,
            len,
            fin,
        } = acked;
        let Some(out) = self.outgoing.get_mut(&id) else {
            return;
        };
        out.data.on_acked(offset, len, fin);
        if out.message.is_some() {
            Self::pump_message(out);
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        } else if id.direction() == Direction::Bi {
            self.room_released |= Self::settle(out, &mut self.budget);
        }
        if out.data.is_done() {
            self.remove_outgoing(id);
            self.retire_if_done(id);
        }
    }

    pub(super) fn on_stream_lost(&mut self, id: StreamId, offset: u64, len: u32, fin: bool) {
        let Some(out) = self.outgoing.get_mut(&id) else {
            return;
        };
        out.data.on_lost(offset, u64::from(len), fin);
        if out.data.wants_to_send(out.credit.limit()) {
            self.turns.schedule(Turn::Stream(id), Urgency::Resend);
        }
    }

    pub(super) fn on_reset_acked(&mut self, id: StreamId) {
        if self
            .outgoing
            .get(&id)
            .is_some_and(|o| o.reset_code.is_some())
        {
            self.remove_outgoing(id);
            self.retire_if_done(id);
        }
    }

    pub(super) fn on_reset_lost(&mut self, id: StreamId) {
        if self
            .outgoing
            .get(&id)
            .is_some_and(|o| o.reset_code.is_some())
        {
            self.resets_due.push(id);
        }
    }

    pub(super) fn on_max_stream_data_lost(&mut self, id: StreamId) {
        if self.incoming.contains_key(&id) {
            self.max_stream_data_due.push(id);
        }
    }

    pub(super) fn on_max_streams_lost(&mut self, direction: Direction) {
        self.advertised_streams[slot(direction)] = 0;
    }

    pub(super) fn on_stop_sending_lost(&mut self, id: StreamId) {
        if let Some(code) = self.incoming.get(&id).and_then(|i| i.stop_code) {
            self.stops_due.push((id, code));
        }
    }

    // ---- sending ----

    /// Whether anything waits to be sent (data or control).
    pub(super) fn wants_to_send(&self) -> bool {
        !self.turns.is_empty()
            || self.max_data_due
            || !self.max_stream_data_due.is_empty()
            || !self.resets_due.is_empty()
            || !self.stops_due.is_empty()
            || self.max_streams_due().is_some()
    }

    /// Whether any stream data is waiting (for the close to drain).
    pub(super) fn has_unacked_data(&self) -> bool {
        self.outgoing
            .values()
            .any(|o| o.reset_code.is_none() && (o.data.buffered() > 0 || o.message.is_some()))
    }

    fn max_streams_due(&self) -> Option<Direction> {
        DIRECTIONS.into_iter().find(|&d| {
            let i = slot(d);
            let allowed = self.retired_remote[i] + self.concurrent[i];
            allowed > self.advertised_streams[i]
        })
    }

    /// Writes the control frames that are due (flow control, stream counts,
    /// resets, stop-sending) while they fit.
    pub(super) fn write_control(
        &mut self,
        packet: &mut PacketBuilder<'_, '_>,
        record: &mut CarriedRecord,
    ) -> bool {
        let mut wrote = false;
        if self.max_data_due && !record.is_full() {
            let frame = Frame::MaxData(tern_wire::MaxData {
                max: self.window.limit(),
            });
            if packet.push(&frame).is_ok() {
                record.push(Carried::MaxData);
                self.max_data_due = false;
                wrote = true;
            }
        }
        while let Some(direction) = self.max_streams_due() {
            if record.is_full() {
                break;
            }
            let i = slot(direction);
            let allowed = self.retired_remote[i] + self.concurrent[i];
            let max = StreamId::new(self.peer_side(), direction, allowed).0;
            if packet.push(&Frame::MaxStreams(MaxStreams { max })).is_err() {
                break;
            }
            self.limits.allow_remote(direction, allowed);
            self.advertised_streams[i] = allowed;
            record.push(Carried::MaxStreams(direction));
            wrote = true;
        }
        while let Some(&id) = self.max_stream_data_due.last() {
            if record.is_full() {
                break;
            }
            let Some(inc) = self.incoming.get(&id) else {
                self.max_stream_data_due.pop();
                continue;
            };
            let frame = Frame::MaxStreamData(MaxStreamData {
                id: id.0,
                max: inc.window.limit(),
            });
            if packet.push(&frame).is_err() {
                break;
            }
            self.max_stream_data_due.pop();
            record.push(Carried::MaxStreamData(id));
            wrote = true;
        }
        while let Some(&id) = self.resets_due.last() {
            if record.is_full() {
                break;
            }
            let Some((code, final_size)) = self
                .outgoing
                .get(&id)
                .and_then(|o| Some((o.reset_code?, o.data.reset_at()?)))
            else {
                self.resets_due.pop();
                continue;
            };
            let frame = Frame::ResetStream(ResetStream {
                id: id.0,
                error_code: code,
                final_size,
            });
            if packet.push(&frame).is_err() {
                break;
            }
            self.resets_due.pop();
            record.push(Carried::ResetStream(id));
            wrote = true;
        }
        while let Some(&(id, code)) = self.stops_due.last() {
            if record.is_full() {
                break;
            }
            let frame = Frame::StopSending(StopSending {
                id: id.0,
                error_code: code,
            });
            if packet.push(&frame).is_err() {
                break;
            }
            self.stops_due.pop();
            record.push(Carried::StopSending(id));
            wrote = true;
        }
        wrote
    }

    /// The next stream or lane whose turn it is.
    pub(super) fn next_turn(&mut self) -> Option<Turn> {
        self.turns.next_turn()
    }

    /// Puts `turn` back in line (it has more to send).
    pub(super) fn schedule(&mut self, turn: Turn, urgency: Urgency) {
        self.turns.schedule(turn, urgency);
    }

    /// Writes one chunk of stream `id` into the packet; returns whether it
    /// wrote anything. The stream is put back in line if it has more.
    pub(super) fn write_stream(
        &mut self,
        id: StreamId,
        packet: &mut PacketBuilder<'_, '_>,
        record: &mut CarriedRecord,
    ) -> bool {
        let Some(out) = self.outgoing.get_mut(&id) else {
            return false;
        };
        if out.reset_code.is_some() || record.is_full() {
            return false;
        }
        let max = packet.stream_capacity(id.0, out.data.written());
        if max == 0 {
            return false;
        }
        let sent = out.data.sent_offset();
        let connection_room = self.credit.available();
        let limit = out.credit.limit().min(sent.saturating_add(connection_room));
        let wrote = match out.data.poll_chunk(max, limit) {
            Some(chunk) => {
                let frame = Frame::Stream(tern_wire::Stream {
                    id: id.0,
                    offset: chunk.offset,
                    fin: chunk.fin,
                    data: chunk.data,
                });
                let len = chunk.data.len() as u32;
                let (offset, fin) = (chunk.offset, chunk.fin);
                if packet.push(&frame).is_ok() {
                    record.push(Carried::Stream {
                        id,
                        offset,
                        len,
                        fin,
                    });
                    true
                } else {
                    // Did not fit after all: the bytes go out with the next packet.
                    out.data.on_lost(offset, u64::from(len), fin);
                    false
                }
            }
            _ => false,
        };
        let new_bytes = out.data.sent_offset().saturating_sub(sent);
        out.credit.consume(new_bytes);
        self.credit.consume(new_bytes);
        self.room_released |= out.waiting && new_bytes > 0 && out.data.unsent() <= UNSENT_LIMIT / 2;
        if wrote && out.data.wants_to_send(out.credit.limit()) {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
        wrote
    }

    /// Streams that have something to send but wait for a full packet or
    /// the connection window: put back in line.
    pub(super) fn requeue(&mut self, id: StreamId) {
        if let Some(out) = self.outgoing.get(&id)
            && out.data.wants_to_send(out.credit.limit())
        {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
    }

    /// Bytes buffered on this side for streams: sent and unacknowledged or
    /// unsent, plus what was received and not yet read.
    pub(super) fn memory(&self) -> usize {
        let out: usize = self.outgoing.values().map(|o| o.data.buffered()).sum();
        let inc: usize = self
            .incoming
            .values()
            .map(|i| i.data.buffered() as usize + i.message.as_ref().map_or(0, BytesMut::len))
            .sum();
        out + inc
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Streams of a connection whose streams may each hold `stream` bytes
    /// and together `connection`.
    fn streams(stream: usize, connection: usize) -> Streams {
        let config = ConnectionConfig {
            stream_send_buffer: stream,
            send_buffer: connection,
            ..ConnectionConfig::default()
        };
        Streams::new(Side::Initiator, &config)
    }

    /// Opens a stream the peer lets send as much as it likes.
    fn open(streams: &mut Streams) -> StreamId {
        let id = streams.open().expect("the peer allows it");
        streams
            .on_max_stream_data(&MaxStreamData {
                id: id.0,
                max: u64::MAX / 2,
            })
            .expect("own stream");
        id
    }

    /// Acknowledges `len` bytes of `id` from `offset`, then hands out the
    /// writable events that follow.
    fn ack(streams: &mut Streams, id: StreamId, offset: u64, len: u32) -> Vec<StreamId> {
        streams.on_stream_acked(StreamRun {
            id,
            offset,
            len: u64::from(len),
            fin: false,
        });
        woken(streams)
    }

    fn woken(streams: &mut Streams) -> Vec<StreamId> {
        streams.wake_writers();
        let mut woken = std::mem::take(&mut streams.writable);
        woken.sort_by_key(|id| id.0);
        woken
    }

    const DATA: [u8; 10_000] = [9; 10_000];

    #[test]
    fn one_stream_alone_fills_its_buffer_and_the_next_one_finds_the_budget_spent() {
        let mut streams = streams(4000, 4000);
        let (a, b) = (open(&mut streams), open(&mut streams));
        assert_eq!(streams.writable(a), 4000);
        assert_eq!(streams.write(a, &DATA), Ok(4000));
        assert_eq!(streams.writable(b), 0);
        assert_eq!(streams.write(b, &DATA), Ok(0));
        assert_eq!(streams.send_buffered(), 4000);
    }

    #[test]
    fn acknowledged_bytes_wake_the_stream_below_its_share_and_go_to_it() {
        let mut streams = streams(4000, 4000);
        let (a, b) = (open(&mut streams), open(&mut streams));
        streams.write(a, &DATA).expect("open");
        streams.write(b, &DATA).expect("open");
        // `a` holds more than its half: what its acknowledgements free is `b`'s.
        assert_eq!(ack(&mut streams, a, 0, 1000), vec![b]);
        assert_eq!(streams.writable(a), 0);
        assert_eq!(streams.write(b, &DATA), Ok(1000));
        assert_eq!(ack(&mut streams, a, 1000, 1000), vec![b]);
        assert_eq!(streams.write(b, &DATA), Ok(1000));
        // Now each holds its half; freed bytes are the acknowledged stream's.
        assert_eq!(ack(&mut streams, b, 0, 500), vec![b]);
        assert_eq!(ack(&mut streams, a, 2000, 500), vec![a]);
        assert_eq!(streams.write(a, &DATA), Ok(500));
        assert_eq!(streams.write(b, &DATA), Ok(500));
        assert_eq!(streams.send_buffered(), 4000);
    }

    #[test]
    fn every_blocked_stream_is_woken_when_the_budget_frees_up() {
        let mut streams = streams(8000, 8000);
        let ids: Vec<StreamId> = (0..4).map(|_| open(&mut streams)).collect();
        assert_eq!(streams.write(ids[0], &DATA), Ok(8000));
        for &id in &ids[1..] {
            assert_eq!(streams.write(id, &DATA), Ok(0));
        }
        assert_eq!(ack(&mut streams, ids[0], 0, 8000), ids);
        for &id in &ids {
            assert_eq!(streams.write(id, &DATA), Ok(2000));
        }
        assert_eq!(streams.send_buffered(), 8000);
    }

    #[test]
    fn a_stream_that_finishes_leaves_its_share_to_the_others() {
        let mut streams = streams(4000, 4000);
        let (a, b) = (open(&mut streams), open(&mut streams));
        assert_eq!(streams.write(a, &DATA[..1000]), Ok(1000));
        assert_eq!(streams.write(b, &DATA), Ok(2000));
        assert_eq!(streams.writable(b), 0);
        streams.finish(a).expect("open");
        assert_eq!(woken(&mut streams), vec![b]);
        assert_eq!(streams.write(b, &DATA), Ok(1000));
        assert_eq!(streams.send_buffered(), 4000);
    }

    #[test]
    fn reset_and_stopped_streams_release_their_bytes_at_once() {
        let mut streams = streams(4000, 4000);
        let (a, b, c) = (open(&mut streams), open(&mut streams), open(&mut streams));
        streams.write(a, &DATA).expect("open");
        streams.write(b, &DATA).expect("open");
        streams.write(c, &DATA).expect("open");
        streams.reset(a, 7).expect("open");
        assert_eq!(streams.send_buffered(), 0);
        assert_eq!(woken(&mut streams), vec![b, c]);
        assert_eq!(streams.write(b, &DATA), Ok(2000));
        assert_eq!(streams.write(c, &DATA), Ok(2000));
        // The peer stops `b`: its bytes go, and `c` (above its half no
        // more) is woken for them.
        assert_eq!(streams.write(c, &DATA), Ok(0));
        streams
            .on_stop_sending(&StopSending {
                id: b.0,
                error_code: 9,
            })
            .expect("own stream");
        assert_eq!(streams.send_buffered(), 2000);
        assert_eq!(woken(&mut streams), vec![b, c]);
        assert_eq!(streams.write(b, &DATA), Err(WriteError::Stopped(9)));
        assert_eq!(streams.write(c, &DATA), Ok(2000));
        // A late acknowledgement of a reset stream's bytes changes nothing.
        streams.on_stream_acked(StreamRun {
            id: a,
            offset: 0,
            len: 4000,
            fin: false,
        });
        assert_eq!(streams.send_buffered(), 4000);
    }

    #[test]
    fn once_the_peer_announced_its_limit_a_stream_buffers_no_further() {
        let mut streams = streams(1 << 20, 1 << 20);
        let (a, b) = (
            streams.open().expect("allowed"),
            streams.open().expect("allowed"),
        );
        let big = vec![1u8; 100_000];
        // Before the announcement, the stream's buffer is the bound.
        assert_eq!(streams.write(a, &big), Ok(100_000));
        let limit = |id: StreamId, max: u64| MaxStreamData { id: id.0, max };
        streams.on_max_stream_data(&limit(b, 150_000)).expect("own");
        assert_eq!(streams.write(b, &big), Ok(100_000));
        assert_eq!(streams.write(b, &big), Ok(50_000));
        assert!(woken(&mut streams).is_empty());
        streams.on_max_stream_data(&limit(b, 180_000)).expect("own");
        assert_eq!(woken(&mut streams), vec![b]);
        assert_eq!(streams.write(b, &big), Ok(30_000));
    }

    #[test]
    fn each_side_announces_a_bidirectional_streams_window_as_soon_as_it_knows_it() {
        let mut streams = streams(4000, 4000);
        let own = streams.open().expect("allowed");
        let theirs = StreamId::new(Side::Responder, Direction::Bi, 0);
        streams
            .on_stream_frame(theirs, 0, b"hello", false)
            .expect("a valid frame");
        let mut due = streams.max_stream_data_due.clone();
        due.sort_by_key(|id| id.0);
        assert_eq!(due, vec![own, theirs]);
        let window = ConnectionConfig::default().stream_receive_window;
        assert_eq!(streams.incoming[&theirs].window.limit(), window);
        assert_eq!(streams.incoming[&own].data.limit(), window);
    }

    /// Hands the peer's large message `len` bytes long to `streams` in
    /// packet-sized Stream frames; whether it was delivered whole.
    fn receive_message(streams: &mut Streams, index: u64, len: usize) -> bool {
        let id = StreamId::new(Side::Responder, Direction::Uni, index);
        let data = vec![7u8; len];
        let mut delivered = None;
        for (i, chunk) in data.chunks(1400).enumerate() {
            let offset = (i * 1400) as u64;
            let fin = offset as usize + chunk.len() == len;
            delivered = streams
                .on_stream_frame(id, offset, chunk, fin)
                .expect("a valid frame");
        }
        delivered.is_some_and(|d| d.message.len() == len)
    }

    #[test]
    fn a_message_within_half_the_initial_stream_window_asks_for_no_more_room() {
        let mut streams = streams(4000, 4000);
        let half = (INITIAL_STREAM_WINDOW / 2) as usize;
        assert!(receive_message(&mut streams, 0, 16 * 1024));
        assert!(receive_message(&mut streams, 1, half));
        assert!(streams.max_stream_data_due.is_empty());
        // A larger one asks, once it has taken half: the sender would
        // otherwise stop at the initial limit.
        let id = StreamId::new(Side::Responder, Direction::Uni, 2);
        streams
            .on_stream_frame(id, 0, &vec![7u8; half], false)
            .expect("a valid frame");
        assert!(streams.max_stream_data_due.is_empty());
        streams
            .on_stream_frame(id, half as u64, &[7u8; 100], false)
            .expect("a valid frame");
        assert_eq!(streams.max_stream_data_due, vec![id]);
        assert!(streams.incoming[&id].window.limit() > INITIAL_STREAM_WINDOW);
    }

    #[test]
    fn large_messages_count_nothing_against_the_budget() {
        let mut streams = streams(4000, 4000);
        streams
            .send_message(Bytes::from(vec![3u8; 10_000]))
            .expect("allowed");
        let a = open(&mut streams);
        assert_eq!(streams.send_buffered(), 0);
        assert_eq!(streams.write(a, &DATA), Ok(4000));
    }

    /// Sends `bytes` of `id`'s unsent data in full packets (fewer if it
    /// has less), then hands out the writable events that follow.
    fn send(streams: &mut Streams, id: StreamId, bytes: usize) -> Vec<StreamId> {
        let mut sealer = tern_wire::PacketSealer::new(
            tern_wire::TrafficSecret::from_bytes([7; 32]),
            1,
            tern_wire::KeyConfig::default(),
        );
        let mut buf = [0u8; 1452];
        let target = streams.outgoing[&id].data.sent_offset() + bytes as u64;
        while streams.outgoing[&id].data.sent_offset() < target {
            let mut packet = sealer.start(&mut buf).expect("room for a packet");
            let mut record = CarriedRecord::new();
            if !streams.write_stream(id, &mut packet, &mut record) {
                break;
            }
        }
        woken(streams)
    }

    #[test]
    fn a_stream_holds_no_more_unsent_bytes_than_the_limit_and_its_writer_wakes_at_half() {
        let mut streams = streams(4 * UNSENT_LIMIT, 4 * UNSENT_LIMIT);
        let a = open(&mut streams);
        let big = vec![5u8; 2 * UNSENT_LIMIT];
        assert_eq!(streams.write(a, &big), Ok(UNSENT_LIMIT));
        assert_eq!(streams.write(a, &big), Ok(0));
        assert_eq!(streams.writable(a), 0);
        // Sent but not acknowledged bytes count against the buffer only.
        assert!(send(&mut streams, a, UNSENT_LIMIT / 4).is_empty());
        assert_eq!(send(&mut streams, a, UNSENT_LIMIT / 4), vec![a]);
        let room = streams.writable(a);
        assert!(room >= UNSENT_LIMIT / 2, "{room}");
        assert_eq!(streams.write(a, &big), Ok(room));
        assert_eq!(streams.send_buffered(), UNSENT_LIMIT + room);
    }

    proptest! {
        /// Acknowledged chunks of two streams, in any order, merged into
        /// runs as the connection merges the packets of one ACK frame:
        /// the runs cover exactly the chunks' bytes, each once, stream by
        /// stream, and the fin comes with the run that ends the stream.
        #[test]
        fn acknowledged_runs_cover_exactly_their_chunks(
            chunks in proptest::collection::vec((0usize..2, 1u64..3000), 1..60)
                .prop_map(|cuts| {
                    let mut next = [0u64; 2];
                    let mut chunks: Vec<StreamRun> = cuts
                        .into_iter()
                        .map(|(s, len)| {
                            let id = StreamId::new(Side::Initiator, Direction::Bi, s as u64);
                            let offset = next[s];
                            next[s] += len;
                            StreamRun { id, offset, len, fin: false }
                        })
                        .collect();
                    for (s, &end) in next.iter().enumerate() {
                        if let Some(last) = chunks
                            .iter_mut()
                            .find(|c| c.id.index() == s as u64 && c.offset + c.len == end)
                        {
                            last.fin = true;
                        }
                    }
                    (chunks, next)
                })
                .prop_flat_map(|(chunks, ends)| (Just(chunks).prop_shuffle(), Just(ends))),
        ) {
            let (chunks, ends) = chunks;
            let mut runs = Vec::new();
            let mut run: Option<StreamRun> = None;
            for chunk in &chunks {
                if !run.as_mut().is_some_and(|r| r.absorb(chunk))
                    && let Some(done) = run.replace(*chunk)
                {
                    runs.push(done);
                }
            }
            runs.extend(run);
            for s in 0..2u64 {
                let mine: Vec<&StreamRun> = runs.iter().filter(|r| r.id.index() == s).collect();
                let mut covered = super::range_set::RangeSet::new();
                for r in &mine {
                    // Nothing of the run was covered before.
                    let fresh: u64 = covered.gaps(r.offset..r.offset + r.len).map(|g| g.end - g.start).sum();
                    prop_assert_eq!(fresh, r.len);
                    covered.insert(r.offset..r.offset + r.len);
                    prop_assert_eq!(r.fin, r.offset + r.len == ends[s as usize]);
                }
                let total: u64 = mine.iter().map(|r| r.len).sum();
                prop_assert_eq!(total, ends[s as usize]);
            }
            prop_assert!(runs.len() <= chunks.len());
        }
    }

    /// What the application does to one of four streams.
    #[derive(Debug, Clone)]
    enum Op {
        Write(usize, usize),
        /// The oldest `n` unacknowledged bytes of a stream are acknowledged.
        Ack(usize, usize),
        Finish(usize),
        Reset(usize),
        Stop(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..4, 1usize..6000).prop_map(|(s, n)| Op::Write(s, n)),
            4 => (0usize..4, 1usize..6000).prop_map(|(s, n)| Op::Ack(s, n)),
            1 => (0usize..4).prop_map(Op::Finish),
            1 => (0usize..4).prop_map(Op::Reset),
            1 => (0usize..4).prop_map(Op::Stop),
        ]
    }

    proptest! {
        /// Whatever four streams do, they never hold more than the budget
        /// together; a writable event comes only with room; and once every
        /// byte is acknowledged, no stream whose write came up short is
        /// still waiting for its event.
        #[test]
        fn the_budget_holds_and_no_writer_waits_forever(
            stream in 1usize..8000,
            budget in 1usize..12_000,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut streams = streams(stream, budget);
            let ids: Vec<StreamId> = (0..4).map(|_| open(&mut streams)).collect();
            let mut written = [0u64; 4];
            let mut acked = [0u64; 4];
            let mut waits = [false; 4];
            let mut over = [false; 4];
            for op in ops.into_iter().chain((0..4).map(|s| Op::Ack(s, usize::MAX))) {
                match op {
                    Op::Write(s, n) => {
                        if let Ok(took) = streams.write(ids[s], &vec![0u8; n]) {
                            written[s] += took as u64;
                            waits[s] = took < n;
                        }
                    }
                    Op::Ack(s, n) => {
                        let len = (written[s] - acked[s]).min(n as u64).min(u64::from(u32::MAX));
                        streams.on_stream_acked(StreamRun {
                            id: ids[s],
                            offset: acked[s],
                            len,
                            fin: false,
                        });
                        acked[s] += len;
                    }
                    Op::Finish(s) => {
                        if streams.finish(ids[s]).is_ok() {
                            over[s] = true;
                        }
                    }
                    Op::Reset(s) => {
                        if streams.reset(ids[s], 1).is_ok() {
                            over[s] = true;
                        }
                    }
                    Op::Stop(s) => {
                        streams
                            .on_stop_sending(&StopSending { id: ids[s].0, error_code: 2 })
                            .expect("own stream");
                        over[s] = true;
                    }
                }
                for id in woken(&mut streams) {
                    let s = ids.iter().position(|&i| i == id).expect("one of ours");
                    prop_assert!(over[s] || streams.writable(id) > 0);
                    waits[s] = false;
                }
                prop_assert!(streams.send_buffered() <= budget);
            }
            for s in 0..4 {
                prop_assert!(!waits[s] || over[s], "stream {s} waits forever");
            }
        }
    }
}
