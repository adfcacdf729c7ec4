//! The sending halves of a connection's streams ([`Outgoing`]): the
//! application's writes, held to the stream's buffer, the connection's send
//! budget and the peer's limits; large messages copied in as their streams
//! drain; stop requests and limits from the peer; chunks into packets; and
//! what acknowledgements and losses do to them.

use bytes::Bytes;
use rustc_hash::FxHashMap;
use tern_wire::{Frame, MaxStreamData, PacketBuilder, StopSending};

use super::flow_control::SendCredit;
use super::scheduler::Urgency;
use super::send_budget::{Charge, SendBudget};
use super::send_stream::SendStream;
use super::stream_id::{Direction, StreamId};
use super::tables::Tables;
use super::{Outgoing, StreamRun, Streams, Turn, UNSENT_LIMIT};
use crate::config::INITIAL_STREAM_WINDOW;
use crate::connection::carried::{Carried, CarriedRecord};
use crate::connection::error::{ProtocolError, WriteError};

impl Streams {
    // ---- the application's side ----

    pub(super) fn new_outgoing(&self) -> Outgoing {
        Outgoing {
            data: SendStream::new(self.budget.stream_limit()),
            credit: SendCredit::new(INITIAL_STREAM_WINDOW),
            credit_announced: false,
            message: None,
            reset_code: None,
            stop_code: None,
            charge: Charge::default(),
            message_held: 0,
            wants_room: false,
            waiting: false,
        }
    }

    /// Makes the sending half of a stream the peer opened both ways, if it
    /// is not made yet (see `Incoming::unmade_outgoing`): for whatever
    /// changes it, from the application or the peer.
    fn make_outgoing(&mut self, id: StreamId) {
        if id.opener() == self.side || id.direction() != Direction::Bi {
            return;
        }
        let unmade = self
            .tables
            .existing()
            .and_then(|t| t.incoming.get_mut(&id))
            .is_some_and(|inc| std::mem::take(&mut inc.unmade_outgoing));
        if unmade {
            let out = self.new_outgoing();
            self.tables.get_mut().outgoing.insert(id, out);
        }
    }

    /// Whether `id`'s sending half is still to be made: it reads as a
    /// fresh half, nothing written.
    fn outgoing_unmade(&self, id: StreamId) -> bool {
        self.tables
            .get()
            .incoming
            .get(&id)
            .is_some_and(|inc| inc.unmade_outgoing)
    }

    /// Sends `message` on a one-way stream of its own, if the peer allows
    /// one more; gives it back otherwise.
    pub(in crate::connection) fn send_message(&mut self, message: Bytes) -> Result<(), Bytes> {
        let Some(id) = self.limits.open(Direction::Uni) else {
            return Err(message);
        };
        let mut out = self.new_outgoing();
        out.message_held = message.len();
        self.message_bytes += message.len();
        out.message = Some(message);
        Self::pump_message(&mut out);
        self.tables.get_mut().outgoing.insert(id, out);
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

    /// Brings a large message's count against the messages' bound up to
    /// date; returns whether bytes were released.
    fn settle_message(out: &mut Outgoing, total: &mut usize) -> bool {
        let held = out.message.as_ref().map_or(0, Bytes::len) + out.data.buffered();
        let old = std::mem::replace(&mut out.message_held, held);
        *total = *total - old + held;
        held < old
    }

    /// Bytes the large messages hold until acknowledged, together.
    pub(in crate::connection) fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// Whether large messages released bytes since the last look.
    pub(in crate::connection) fn take_message_room_released(&mut self) -> bool {
        std::mem::take(&mut self.message_room_released)
    }

    pub(in crate::connection) fn write(
        &mut self,
        id: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        self.make_outgoing(id);
        let tables = self.tables.get_mut();
        let out = Self::app_outgoing(&mut tables.outgoing, id)?;
        if let Some(code) = out.reset_code {
            return Err(WriteError::Stopped(code));
        }
        let room = Self::room(out, &self.budget);
        let n = out.data.write(&data[..data.len().min(room)]);
        out.wants_room = n < data.len();
        if out.wants_room && !out.waiting {
            out.waiting = true;
            tables.waiting.push(id);
        }
        self.room_released |= Self::settle(out, &mut self.budget);
        if n > 0 {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
        Ok(n)
    }

    pub(in crate::connection) fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        self.make_outgoing(id);
        let out = Self::app_outgoing(&mut self.tables.get_mut().outgoing, id)?;
        out.data.finish();
        self.room_released |= Self::settle(out, &mut self.budget);
        self.turns.schedule(Turn::Stream(id), Urgency::New);
        Ok(())
    }

    pub(in crate::connection) fn reset(
        &mut self,
        id: StreamId,
        code: u64,
    ) -> Result<(), WriteError> {
        self.make_outgoing(id);
        let out = Self::app_outgoing(&mut self.tables.get_mut().outgoing, id)?;
        if out.reset_code.is_none() {
            out.reset_code = Some(code);
            out.data.reset();
            self.room_released |= Self::settle(out, &mut self.budget);
            self.tables.get_mut().resets_due.push(id);
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
    /// budget. An application stream's half gets a writable event: whoever
    /// waits for it to be stopped learns it is done with instead.
    fn remove_outgoing(&mut self, id: StreamId) {
        if let Some(out) = self.tables.get_mut().outgoing.remove(&id) {
            self.room_released |= self.budget.recharge(out.charge, Charge::default());
            self.message_bytes -= out.message_held;
            self.message_room_released |= out.message_held > 0;
            if id.direction().is_application() {
                self.tables.get_mut().writable.push(id);
            }
        }
        self.turns.remove(Turn::Stream(id));
    }

    /// Forgets the sending half of every stream, and what it held to send
    /// or until acknowledged: for a connection that closed at once.
    pub(in crate::connection) fn abandon_sending(&mut self) {
        let Some(tables) = self.tables.existing() else {
            return;
        };
        let ids: Vec<StreamId> = tables.outgoing.keys().copied().collect();
        for id in ids {
            self.remove_outgoing(id);
        }
    }

    /// Gives every waiting stream that has room again its writable event,
    /// once room was released.
    pub(in crate::connection) fn wake_writers(&mut self) {
        if !std::mem::take(&mut self.room_released) {
            return;
        }
        let Self { tables, budget, .. } = self;
        // No stream ever written to waits.
        let Some(tables) = tables.existing() else {
            return;
        };
        let Tables {
            waiting,
            outgoing,
            writable,
            ..
        } = tables;
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
    pub(in crate::connection) fn send_buffered(&self) -> usize {
        self.budget.held()
    }

    fn app_outgoing(
        outgoing: &mut FxHashMap<StreamId, Outgoing>,
        id: StreamId,
    ) -> Result<&mut Outgoing, WriteError> {
        if !id.direction().is_application() {
            return Err(WriteError::UnknownStream(id));
        }
        outgoing.get_mut(&id).ok_or(WriteError::UnknownStream(id))
    }

    /// Bytes `write` would take on `id` now.
    pub(in crate::connection) fn writable(&self, id: StreamId) -> usize {
        match self.tables.get().outgoing.get(&id) {
            Some(out) if id.direction().is_application() && out.reset_code.is_none() => {
                Self::room(out, &self.budget)
            }
            None if self.outgoing_unmade(id) => Self::room(&self.new_outgoing(), &self.budget),
            _ => 0,
        }
    }

    /// Whether the peer announced its flow-control limit for `id`.
    pub(in crate::connection) fn credit_announced(&self, id: StreamId) -> bool {
        self.tables
            .get()
            .outgoing
            .get(&id)
            .is_some_and(|o| o.credit_announced)
    }

    /// The code the peer gave when it asked this side to stop sending on
    /// `id` (`None` while it has not); an error once the sending half is
    /// done with (every byte, or its reset, acknowledged) or never was.
    pub(in crate::connection) fn stop_code(&self, id: StreamId) -> Result<Option<u64>, WriteError> {
        match self.tables.get().outgoing.get(&id) {
            Some(out) if id.direction().is_application() => Ok(out.stop_code),
            None if self.outgoing_unmade(id) => Ok(None),
            _ => Err(WriteError::UnknownStream(id)),
        }
    }

    /// The next stream that gained room to write, was stopped, or whose
    /// sending half is done with, since the last look.
    pub(in crate::connection) fn poll_writable(&mut self) -> Option<StreamId> {
        self.tables.existing()?.writable.pop()
    }

    // ---- the peer's side ----

    pub(in crate::connection) fn on_stop_sending(
        &mut self,
        frame: &StopSending,
    ) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, false)?;
        self.make_outgoing(id);
        if let Some(out) = self.tables.get_mut().outgoing.get_mut(&id)
            && out.reset_code.is_none()
        {
            out.reset_code = Some(frame.error_code);
            out.stop_code = Some(frame.error_code);
            out.data.reset();
            if id.direction() == Direction::Uni {
                // A large message the peer refuses: its bytes go at once.
                out.message = None;
                self.message_room_released |= Self::settle_message(out, &mut self.message_bytes);
            }
            self.room_released |= Self::settle(out, &mut self.budget);
            self.tables.get_mut().resets_due.push(id);
            self.turns.remove(Turn::Stream(id));
            self.tables.get_mut().writable.push(id);
        }
        Ok(())
    }

    pub(in crate::connection) fn on_max_stream_data(
        &mut self,
        frame: &MaxStreamData,
    ) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, false)?;
        self.make_outgoing(id);
        if let Some(out) = self.tables.get_mut().outgoing.get_mut(&id) {
            out.credit.raise(frame.max);
            out.credit_announced = true;
            self.room_released |= out.waiting;
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        }
        Ok(())
    }

    pub(in crate::connection) fn on_max_data(&mut self, max: u64) {
        let was_blocked = self.credit.available() == 0;
        self.credit.raise(max);
        if was_blocked && self.credit.available() > 0 {
            self.reschedule_all();
        }
    }

    /// Puts every stream with something to send back in line (after the
    /// connection window opened).
    fn reschedule_all(&mut self) {
        for (&id, out) in &self.tables.get().outgoing {
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        }
    }

    // ---- acknowledgements and losses ----

    pub(in crate::connection) fn on_stream_acked(&mut self, acked: StreamRun) {
        let StreamRun {
            id,
            offset,
            len,
            fin,
        } = acked;
        let Some(out) = self.tables.get_mut().outgoing.get_mut(&id) else {
            return;
        };
        out.data.on_acked(offset, len, fin);
        if out.message.is_some() {
            Self::pump_message(out);
            if out.data.wants_to_send(out.credit.limit()) {
                self.turns.schedule(Turn::Stream(id), Urgency::New);
            }
        }
        if id.direction().is_application() {
            self.room_released |= Self::settle(out, &mut self.budget);
        } else {
            self.message_room_released |= Self::settle_message(out, &mut self.message_bytes);
        }
        if out.data.is_done() {
            self.remove_outgoing(id);
            self.retire_if_done(id);
        }
    }

    pub(in crate::connection) fn on_stream_lost(
        &mut self,
        id: StreamId,
        offset: u64,
        len: u32,
        fin: bool,
    ) {
        let Some(out) = self.tables.get_mut().outgoing.get_mut(&id) else {
            return;
        };
        out.data.on_lost(offset, u64::from(len), fin);
        if out.data.wants_to_send(out.credit.limit()) {
            self.turns.schedule(Turn::Stream(id), Urgency::Resend);
        }
    }

    pub(in crate::connection) fn on_reset_acked(&mut self, id: StreamId) {
        if self
            .tables
            .get()
            .outgoing
            .get(&id)
            .is_some_and(|o| o.reset_code.is_some())
        {
            self.remove_outgoing(id);
            self.retire_if_done(id);
        }
    }

    pub(in crate::connection) fn on_reset_lost(&mut self, id: StreamId) {
        if self
            .tables
            .get()
            .outgoing
            .get(&id)
            .is_some_and(|o| o.reset_code.is_some())
        {
            self.tables.get_mut().resets_due.push(id);
        }
    }

    // ---- sending ----

    /// Bytes the peer's connection window still allows (messages count
    /// against it with the streams).
    pub(in crate::connection) fn credit_available(&self) -> u64 {
        self.credit.available()
    }

    /// A message's `bytes` went out for the first time: they count
    /// against the peer's connection window.
    pub(in crate::connection) fn consume_credit(&mut self, bytes: u64) {
        self.credit.consume(bytes);
    }

    /// Whether any stream data is waiting (for the close to drain).
    pub(in crate::connection) fn has_unacked_data(&self) -> bool {
        self.tables
            .get()
            .outgoing
            .values()
            .any(|o| o.reset_code.is_none() && (o.data.buffered() > 0 || o.message.is_some()))
    }

    /// Writes one chunk of stream `id` into the packet; returns whether it
    /// wrote anything. The stream is put back in line if it has more. With
    /// `copy_blocking` (a long path) a retransmission of the bytes the
    /// peer's delivery waits for goes twice (`SendStream::poll_chunk`).
    pub(in crate::connection) fn write_stream(
        &mut self,
        id: StreamId,
        packet: &mut PacketBuilder<'_, '_>,
        record: &mut CarriedRecord,
        copy_blocking: bool,
    ) -> bool {
        let Some(out) = self.tables.get_mut().outgoing.get_mut(&id) else {
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
        let wrote = match out.data.poll_chunk(max, limit, copy_blocking) {
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
    pub(in crate::connection) fn requeue(&mut self, id: StreamId) {
        if let Some(out) = self.tables.get().outgoing.get(&id)
            && out.data.wants_to_send(out.credit.limit())
        {
            self.turns.schedule(Turn::Stream(id), Urgency::New);
        }
    }
}
