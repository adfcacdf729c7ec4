//! The receiving halves of a connection's streams ([`Incoming`]): the
//! application's reads, which move the stream's and the connection's
//! windows; stream data and resets from the peer, with the large messages
//! reassembled whole; and the window updates and stop requests to send
//! again when lost.

use tern_wire::ResetStream;

use super::flow_control::{FlowControlError, RecvWindow};
use super::messages::assembly::Assembly;
use super::recv_stream::RecvStream;
use super::stream_id::{Direction, StreamId};
use super::{Delivered, Incoming, ReadOutcome, Streams, slot, tables};
use crate::config::INITIAL_STREAM_WINDOW;
use crate::connection::error::{ProtocolError, ReadError};

impl Incoming {
    /// The receiving half of a stream `kind` opened, with `window` bytes
    /// its most: built where it is kept (see `Streams::insert_incoming`).
    /// A bidirectional stream's whole window is announced to the peer at
    /// once: what the peer writes before this side's application reads
    /// can then be sent, and does not sit in the peer's send budget that
    /// its other streams share.
    #[inline]
    fn new(kind: Direction, window: u64, unmade_outgoing: bool) -> Incoming {
        let announced = kind != Direction::Uni;
        let window = if announced {
            RecvWindow::new(window)
        } else {
            RecvWindow::with_initial_limit(window, INITIAL_STREAM_WINDOW)
        };
        Incoming {
            data: RecvStream::new(window.limit()),
            window,
            message: (kind == Direction::Uni).then(Assembly::new),
            charged: 0,
            reset_code: None,
            stop_code: None,
            readable_queued: false,
            unmade_outgoing,
        }
    }
}

impl Streams {
    /// Makes the receiving half of stream `id` in its place in the table,
    /// and queues its window's announcement if it is announced at once.
    pub(super) fn insert_incoming(&mut self, id: StreamId, unmade_outgoing: bool) {
        let kind = id.direction();
        let window = self.stream_receive_window;
        let tables = self.tables.get_mut();
        tables
            .incoming
            .entry(id)
            .or_insert_with(|| Incoming::new(kind, window, unmade_outgoing));
        if kind != Direction::Uni {
            tables::push(&mut tables.max_stream_data_due, id);
        }
    }

    // ---- the application's side ----

    pub(in crate::connection) fn stop_sending(
        &mut self,
        id: StreamId,
        code: u64,
    ) -> Result<(), ReadError> {
        if !id.direction().is_application() {
            return Err(ReadError::UnknownStream(id));
        }
        let inc = self
            .tables
            .get_mut()
            .incoming
            .get_mut(&id)
            .ok_or(ReadError::UnknownStream(id))?;
        if inc.stop_code.is_some() {
            return Ok(());
        }
        inc.stop_code = Some(code);
        if inc.reset_code.is_some() {
            // Reset already, and its bytes let go: nothing is left to read.
            self.retire_incoming(id);
            return Ok(());
        }
        // What arrived will never be read: its pages go, and the
        // connection window moves on as if it had been.
        let unread = inc.data.highest() - inc.data.read_offset();
        inc.data.discard(&mut self.pages);
        if inc.data.final_size().is_some() {
            // The peer sent it all (its end is known): there is nothing
            // to stop, and the stream is done with.
            self.retire_incoming(id);
        } else {
            self.tables.get_mut().stops_due.push((id, code));
        }
        self.on_consumed(unread);
        Ok(())
    }

    /// Whether an application stream holds bytes, or an end, the
    /// application has not read yet.
    pub(in crate::connection) fn has_unread(&self) -> bool {
        self.tables.get().incoming.iter().any(|(id, inc)| {
            id.direction().is_application()
                && (inc.data.readable() > 0
                    || inc.data.final_size().is_some()
                    || inc.reset_code.is_some())
        })
    }

    /// Forgets every byte received and not yet read.
    pub(in crate::connection) fn discard_unread(&mut self) {
        let Some(tables) = self.tables.existing() else {
            return;
        };
        for (_, mut inc) in tables.incoming.drain() {
            inc.data.discard(&mut self.pages);
        }
    }

    /// Drops every received byte and the spare pages kept for the next:
    /// for a connection closed to give its memory back.
    pub(in crate::connection) fn discard_received(&mut self) {
        self.discard_unread();
        self.pages.trim();
    }

    /// Forgets the receiving half of `id`, its pages back to the pool. A
    /// sending half still to come is made now: the stream lives on in it.
    pub(super) fn remove_incoming(&mut self, id: StreamId) {
        if let Some(mut inc) = self.tables.get_mut().incoming.remove(&id) {
            inc.data.discard(&mut self.pages);
            if inc.unmade_outgoing {
                let out = self.new_outgoing();
                self.tables.get_mut().outgoing.insert(id, out);
            }
        }
    }

    /// The application reads stream `id`: what it takes is consumed at
    /// once, and the windows move on.
    pub(in crate::connection) fn read(
        &mut self,
        id: StreamId,
        out: &mut [u8],
    ) -> Result<ReadOutcome, ReadError> {
        let outcome = self.take(id, out)?;
        if let ReadOutcome::Read(n) = outcome {
            self.consume_taken(Some(id), n as u64);
        }
        Ok(outcome)
    }

    /// Takes the next bytes of stream `id` out of its buffer without
    /// consuming them: they still count against the stream's and the
    /// connection's windows, and as received memory, until
    /// [`consume_taken`](Self::consume_taken) says the application has
    /// them. A stream's end is taken like a read's.
    pub(in crate::connection) fn take(
        &mut self,
        id: StreamId,
        out: &mut [u8],
    ) -> Result<ReadOutcome, ReadError> {
        if !id.direction().is_application() {
            return Err(ReadError::UnknownStream(id));
        }
        let inc = self
            .tables
            .get_mut()
            .incoming
            .get_mut(&id)
            .ok_or(ReadError::UnknownStream(id))?;
        if let Some(code) = inc.reset_code {
            self.retire_incoming(id);
            return Err(ReadError::Reset(code));
        }
        let n = inc.data.read(&mut self.pages, out);
        if n == 0 {
            if inc.data.is_finished() {
                self.retire_incoming(id);
                return Ok(ReadOutcome::Finished);
            }
            return Ok(ReadOutcome::Read(0));
        }
        self.taken += n as u64;
        Ok(ReadOutcome::Read(n))
    }

    /// The application has `bytes` that were taken out without being
    /// consumed: of stream `id` (whose window moves on while the stream
    /// is still received), or of messages (`None`). The connection window
    /// moves on.
    pub(in crate::connection) fn consume_taken(&mut self, id: Option<StreamId>, bytes: u64) {
        let bytes = bytes.min(self.taken);
        if bytes == 0 {
            return;
        }
        self.taken -= bytes;
        if let Some(id) = id
            && let Some(tables) = self.tables.existing()
            && let Some(inc) = tables.incoming.get_mut(&id)
            && inc.reset_code.is_none()
        {
            inc.window.on_consumed(bytes);
            if inc.window.poll_update().is_some() {
                inc.data.set_limit(inc.window.limit());
                tables.max_stream_data_due.push(id);
            }
        }
        self.on_consumed(bytes);
    }

    /// A message of `charge` bytes (as the connection window counts it)
    /// was taken out without being consumed: see
    /// [`consume_taken`](Self::consume_taken).
    pub(in crate::connection) fn on_message_taken_out(&mut self, charge: u64) {
        self.taken += charge;
    }

    /// Bytes of all streams and messages the application took: the
    /// connection window moves on.
    ///
    /// The update is granted only within `credit_room` (what the endpoint's
    /// memory budget lends, see [`Streams::lend_credit_room`]); one that
    /// does not fit waits, and `credit_wanted` says so.
    pub(in crate::connection) fn on_consumed(&mut self, bytes: u64) {
        self.window.on_consumed(bytes);
        self.grant_update();
    }

    /// Grants the connection window's update, if one is due and fits in
    /// `credit_room`. The bytes of the large messages under assembly
    /// (which the application cannot take before they are whole) count as
    /// held back; they are counted by a walk of the incoming streams, only
    /// once the peer used half the window in force (before, they cannot
    /// fill more than half of it).
    ///
    /// Inlined: called for every frame of data, which seldom makes an
    /// update due; granting one goes out of line.
    #[inline]
    fn grant_update(&mut self) {
        let held_back = if self.window.unused() <= self.window.current() / 2 {
            self.held_back()
        } else {
            0
        };
        self.window.set_held_back(held_back);
        if let Some(raise) = self.window.raise_due() {
            self.grant(raise);
        }
    }

    /// The bytes of the large messages under assembly.
    fn held_back(&self) -> u64 {
        self.tables
            .get()
            .incoming
            .values()
            .filter(|inc| inc.message.is_some())
            .map(|inc| inc.charged)
            .sum()
    }

    /// Grants the connection window's update of `raise` bytes, if it fits
    /// in `credit_room`.
    fn grant(&mut self, raise: u64) {
        if raise > self.credit_room {
            self.credit_wanted = true;
            return;
        }
        self.credit_room -= raise;
        self.granted += raise;
        self.credit_wanted = false;
        if self.window.poll_update().is_some() {
            self.max_data_due = true;
        }
    }

    /// Lets the connection window grant up to `room` more bytes of credit
    /// until the next call (the endpoint lends its memory budget's room
    /// before each of the connection's turns), and grants an update that
    /// was waiting for room, if it now fits.
    pub(in crate::connection) fn lend_credit_room(&mut self, room: u64) {
        self.credit_room = room;
        if self.credit_wanted {
            self.on_consumed(0);
        }
    }

    /// Credit granted since the last call, in bytes.
    pub(in crate::connection) fn take_granted(&mut self) -> u64 {
        std::mem::take(&mut self.granted)
    }

    /// Whether an update of the connection window waits for room.
    pub(in crate::connection) fn credit_wanted(&self) -> bool {
        self.credit_wanted
    }

    /// Connection credit granted to the peer and not used yet.
    pub(in crate::connection) fn unused_credit(&self) -> u64 {
        self.window.unused()
    }

    /// The receiving half of `id` is done: forgotten, and once both halves
    /// are, a peer's stream counts toward the streams it may open anew.
    fn retire_incoming(&mut self, id: StreamId) {
        self.remove_incoming(id);
        self.retire_if_done(id);
    }

    /// A large message was taken by the application: its stream's slot is
    /// free for the peer's next one.
    pub(in crate::connection) fn on_message_taken(&mut self) {
        self.retired_remote[slot(Direction::Uni)] += 1;
    }

    /// The next stream that became readable since the last look and had
    /// no readable event waiting (it has one from now on, until
    /// [`Self::readable_taken`]). So a stream's event is queued once,
    /// however many frames made it readable, at a constant cost.
    pub(in crate::connection) fn poll_readable(&mut self) -> Option<StreamId> {
        self.tables.existing()?.readable.pop()
    }

    /// The application took `id`'s readable event.
    pub(in crate::connection) fn readable_taken(&mut self, id: StreamId) {
        if let Some(inc) = self.tables.existing().and_then(|t| t.incoming.get_mut(&id)) {
            inc.readable_queued = false;
        }
    }

    // ---- the peer's side ----

    /// A small message of `bytes` arrived: it counts against the
    /// connection window like stream data. The window's update is looked
    /// at once for all the messages of a packet
    /// ([`Self::after_messages_received`]): a peer may send hundreds in one.
    #[inline]
    pub(in crate::connection) fn on_message_received(
        &mut self,
        bytes: u64,
    ) -> Result<(), FlowControlError> {
        self.window.on_received(bytes)
    }

    /// Grants the connection window's update if the small messages just
    /// received made one due. Until then the window is the one the peer
    /// knows, so a packet's messages are judged against it alike.
    pub(in crate::connection) fn after_messages_received(&mut self) {
        self.grant_update();
    }

    /// A Stream frame arrived. Returns a large message it completed.
    pub(in crate::connection) fn on_stream_frame(
        &mut self,
        id: StreamId,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<Option<Delivered>, ProtocolError> {
        self.remote_stream(id, true)?;
        let Some(inc) = self.tables.get_mut().incoming.get_mut(&id) else {
            return Ok(None);
        };
        if inc.reset_code.is_some() {
            return Ok(None);
        }
        let end = offset.saturating_add(data.len() as u64);
        if inc.message.is_some() && end > self.max_message_size {
            return Err(ProtocolError::MessageTooLarge);
        }
        // Both windows are checked before a byte is stored: data refused
        // by flow control takes no memory.
        let grew = inc
            .data
            .growth(offset, data.len(), fin)
            .map_err(ProtocolError::StreamData)?;
        inc.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        self.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        if inc.stop_code.is_some() {
            // Stopped by its reader: nothing is kept, and the stream is
            // done with once its end is known.
            inc.data.skip(end, fin);
            self.on_consumed(grew);
            if fin {
                self.retire_incoming(id);
            }
            return Ok(None);
        }
        inc.data
            .store(&mut self.pages, offset, data, fin)
            .map_err(ProtocolError::StreamData)?;
        if inc.message.is_none() {
            // Queued once until the application takes the event: most
            // frames find it queued already and look no further.
            if !inc.readable_queued && (inc.data.readable() > 0 || inc.data.is_finished()) {
                inc.readable_queued = true;
                tables::push(&mut self.tables.get_mut().readable, id);
            }
            self.grant_update();
            return Ok(None);
        }
        let delivered = self.on_message_data(id);
        self.grant_update();
        Ok(delivered)
    }

    pub(in crate::connection) fn on_reset(
        &mut self,
        frame: &ResetStream,
    ) -> Result<(), ProtocolError> {
        let id = StreamId(frame.id);
        self.remote_stream(id, true)?;
        let Some(inc) = self.tables.get_mut().incoming.get_mut(&id) else {
            return Ok(());
        };
        let grew = inc
            .data
            .reset(frame.final_size)
            .map_err(ProtocolError::StreamData)?;
        if inc.reset_code.is_some() {
            // A repeat (the first one's ACK was lost): counted already.
            return Ok(());
        }
        self.window
            .on_received(grew)
            .map_err(ProtocolError::FlowControl)?;
        if inc.stop_code.is_some() {
            // Stopped by its reader, who let go of what came before: the
            // rest is let go likewise, and the stream is done with.
            self.retire_incoming(id);
            self.on_consumed(grew);
            return Ok(());
        }
        // Whatever was sent and will not be read frees the connection
        // window, and the bytes held for it are let go at once.
        let unread = frame.final_size.saturating_sub(inc.data.read_offset());
        if inc.message.is_some() {
            let charged = inc.charged;
            self.remove_incoming(id);
            self.on_message_taken();
            self.on_consumed(charged);
            self.on_message_gone(id);
        } else {
            inc.data.discard(&mut self.pages);
            inc.reset_code = Some(frame.error_code);
            if !std::mem::replace(&mut inc.readable_queued, true) {
                tables::push(&mut self.tables.get_mut().readable, id);
            }
        }
        self.on_consumed(unread);
        Ok(())
    }

    // ---- losses ----

    pub(in crate::connection) fn on_max_data_lost(&mut self) {
        self.max_data_due = true;
    }

    pub(in crate::connection) fn on_max_stream_data_lost(&mut self, id: StreamId) {
        if self.tables.get().incoming.contains_key(&id) {
            self.tables.get_mut().max_stream_data_due.push(id);
        }
    }

    pub(in crate::connection) fn on_stop_sending_lost(&mut self, id: StreamId) {
        if let Some(code) = self
            .tables
            .get()
            .incoming
            .get(&id)
            .and_then(|i| i.stop_code)
        {
            self.tables.get_mut().stops_due.push((id, code));
        }
    }
}
