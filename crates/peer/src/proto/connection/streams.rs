//! A connection's streams: the application's bidirectional streams and the
//! one-way streams that carry messages too large for one packet, with flow
//! control per stream and for the connection, and the stream-count limits.
//!
//! Every one-way stream carries exactly one message: it is reassembled as it
//! arrives and delivered whole when its last byte is in. So a large message
//! holds back no other message, and the application never sees a half.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};
use tern_wire::{Frame, MaxStreamData, MaxStreams, PacketBuilder, ResetStream, StopSending};

use super::super::config::{INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW};
use super::super::{
    Carried, CarriedRecord, Direction, RecvStream, RecvWindow, Scheduler, SendCredit, SendStream,
    Side, StreamId, StreamLimits, Urgency,
};
use super::{ConnectionConfig, ProtocolError, ReadError, WriteError};

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
    /// The rest of a large message not yet copied into `data`.
    message: Option<Bytes>,
    /// The application's error code once it reset the stream (or the peer
    /// asked it to stop).
    reset_code: Option<u64>,
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
    outgoing: HashMap<StreamId, Outgoing>,
    incoming: HashMap<StreamId, Incoming>,
    turns: Scheduler<Turn>,
    /// What the peer lets this side send over all streams and messages.
    pub(super) credit: SendCredit,
    /// What this side lets the peer send over all streams and messages.
    pub(super) window: RecvWindow,
    stream_send_buffer: usize,
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
            outgoing: HashMap::new(),
            incoming: HashMap::new(),
            turns: Scheduler::new(),
            credit: SendCredit::new(INITIAL_CONNECTION_WINDOW),
            window: RecvWindow::with_initial_limit(
                config.receive_window.max(INITIAL_CONNECTION_WINDOW),
                INITIAL_CONNECTION_WINDOW,
            ),
            stream_send_buffer: config.stream_send_buffer,
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
            message: None,
            reset_code: None,
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

    // ---- the application's side ----

    /// Opens a bidirectional stream, if the peer allows one more.
    pub(super) fn open(&mut self) -> Option<StreamId> {
        let id = self.limits.open(Direction::Bi)?;
        let out = self.new_outgoing();
        self.outgoing.insert(id, out);
        let inc = self.new_incoming(false);
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
        let out = self.app_outgoing(id)?;
        if let Some(code) = out.reset_code {
            return Err(WriteError::Stopped(code));
        }
        let n = out.data.write(data);
        if n > 0 {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
        Ok(n)
    }

    pub(super) fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        let out = self.app_outgoing(id)?;
        out.data.finish();
        self.turns.schedule(Turn::Stream(id), Urgency::New);
        Ok(())
    }

    pub(super) fn reset(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        let out = self.app_outgoing(id)?;
        if out.reset_code.is_none() {
            out.reset_code = Some(code);
            out.data.reset();
            self.resets_due.push(id);
        }
        self.turns.remove(Turn::Stream(id));
        Ok(())
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

    fn app_outgoing(&mut self, id: StreamId) -> Result<&mut Outgoing, WriteError> {
        if id.direction() != Direction::Bi {
            return Err(WriteError::UnknownStream(id));
        }
        self.outgoing
            .get_mut(&id)
            .ok_or(WriteError::UnknownStream(id))
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
            .filter(|o| o.reset_code.is_none())
            .map_or(0, |o| o.data.free_space())
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
            let inc = self.new_incoming(direction == Direction::Uni);
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
            if inc.window.poll_update().is_some() {
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
            return Err(ProtocolError::StreamData(
                super::super::StreamError::FinalSize,
            ));
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

    pub(super) fn on_stream_acked(&mut self, id: StreamId, offset: u64, len: u32, fin: bool) {
        let Some(out) = self.outgoing.get_mut(&id) else {
            return;
        };
        out.data.on_acked(offset, u64::from(len), fin);
        if out.message.is_some() {
            Self::pump_message(out);
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        } else if id.direction() == Direction::Bi && out.data.free_space() > 0 {
            self.writable.push(id);
        }
        if out.data.is_done() {
            self.outgoing.remove(&id);
            self.turns.remove(Turn::Stream(id));
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
            self.outgoing.remove(&id);
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
