//! A connection's streams: the application's streams (bidirectional and
//! one-way) and the one-way streams that carry messages too large for one
//! packet, with flow control per stream and for the connection, and the
//! stream-count limits. The two kinds of one-way stream have ids of their
//! own ([`stream_id`]) and counts of their own: a message never takes an
//! application stream's place, nor the other way round.
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
//!
//! This module holds [`Streams`] with the state of every stream's two
//! halves ([`Outgoing`], [`Incoming`]), the stream counts and the control
//! frames; `send` and `recv` what the application, the peer,
//! acknowledgements and losses do to each half (they import from this
//! module, never the other way). The other modules are the building
//! blocks: the halves' buffers (`send_stream`, `recv_stream`, over `ring`
//! and `range_set`), flow control, the send budget, the scheduler, stream
//! ids, and the messages that fit one packet.

pub(super) mod flow_control;
mod large_messages;
pub(crate) mod messages;
#[cfg(test)]
mod one_way_tests;
pub(crate) mod pages;
mod range_set;
mod recv;
pub(crate) mod recv_stream;
mod ring;
pub(super) mod scheduler;
mod send;
mod send_budget;
pub(crate) mod send_stream;
#[cfg(test)]
mod stop_tests;
pub(crate) mod stream_id;
#[cfg(test)]
mod stream_tests;
mod tables;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unmade_tests;

use bytes::Bytes;
use tern_wire::{Frame, MaxStreamData, MaxStreams, PacketBuilder, ResetStream, StopSending};

use super::carried::{Carried, CarriedRecord};
use super::error::ProtocolError;
use crate::config::{
    ConnectionConfig, INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW,
};
use flow_control::{RecvWindow, SendCredit};
use large_messages::Exempt;
use messages::assembly::Assembly;
use pages::PagePool;
use recv_stream::RecvStream;
use scheduler::{Scheduler, Urgency};
use send_budget::{Charge, SendBudget};
use send_stream::SendStream;
use stream_id::{Direction, Side, StreamId, StreamLimits};
use tables::LazyTables;

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
    /// The peer's code, once it asked this side to stop sending.
    stop_code: Option<u64>,
    /// What the stream counts against the connection's send budget (an
    /// application stream's; a message's counts nothing).
    charge: Charge,
    /// What a large message's stream counts against the messages' bound:
    /// the bytes not yet copied in and those held until acknowledged.
    message_held: usize,
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
    message: Option<Assembly>,
    /// Bytes of `message` still counted against the connection window.
    charged: u64,
    /// The peer reset the stream with this code.
    reset_code: Option<u64>,
    /// This side asked the peer to stop sending, with this code.
    stop_code: Option<u64>,
    /// A [`StreamReadable`](crate::Event::StreamReadable) event for it
    /// waits to be taken: no other is queued (see `poll_readable`).
    readable_queued: bool,
    /// The stream is the peer's, both ways, and its sending half is not
    /// made yet: nothing was written, and the peer said nothing of it. A
    /// stream an attacker opens and resets in one packet never needs one,
    /// so the half (about 600 bytes) is made at its first use (see
    /// `Streams::make_outgoing`), or when this half goes: the stream is not
    /// done with while its sending half is still to come.
    unmade_outgoing: bool,
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
const UNSENT_LIMIT: usize = 256 * 1024;

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
    pub(super) held: Held,
}

/// What a large message delivered and not yet taken holds of the
/// connection window: see [`large_messages`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// Its bytes still counted against the window.
    charge: u64,
    /// It was the one message let past the window.
    exempt: bool,
}

/// Every stream of one connection.
#[derive(Debug)]
pub(super) struct Streams {
    side: Side,
    limits: StreamLimits,
    /// The streams' halves and lists, out of line until the first stream.
    tables: LazyTables,
    /// Where the incoming streams' bytes wait.
    pages: PagePool,
    /// The large message let past the connection window, if any.
    exempt: Exempt,
    turns: Scheduler<Turn>,
    /// What the peer lets this side send over all streams and messages.
    credit: SendCredit,
    /// What this side lets the peer send over all streams and messages.
    window: RecvWindow,
    /// Credit the window may still grant: what the endpoint's memory
    /// budget lent for this turn (unbounded for a connection on its own).
    credit_room: u64,
    /// Credit granted since the endpoint last looked.
    granted: u64,
    /// An update of the window waits for room in the budget.
    credit_wanted: bool,
    /// Bytes taken out of the receive buffers without being consumed (see
    /// `Connection::take_stream`): held elsewhere, they still count
    /// against the windows and as received memory.
    taken: u64,
    /// Bytes the application's streams may hold together, and each.
    budget: SendBudget,
    /// Room was released since the waiting list was last looked at.
    room_released: bool,
    /// Bytes the large messages' streams hold together (see
    /// `Outgoing::message_held`): they count with the small messages
    /// against the connection's bound on messages.
    message_bytes: usize,
    /// Some of `message_bytes` was released since the last look.
    message_room_released: bool,
    stream_receive_window: u64,
    max_message_size: u64,
    /// Streams the peer may have open at once, per kind (see [`slot`]).
    concurrent: [u64; 3],
    /// Peer-opened streams per kind: every index below was opened.
    opened_remote: [u64; 3],
    /// Peer-opened streams per kind that are done with.
    retired_remote: [u64; 3],
    /// Stream counts last advertised to the peer, per kind.
    advertised_streams: [u64; 3],
    /// Whether MaxData is to be sent.
    max_data_due: bool,
    /// Whether the peer opened streams since the last look.
    opened_by_peer: bool,
}

/// Where a kind of stream is counted in the per-kind arrays.
fn slot(direction: Direction) -> usize {
    match direction {
        Direction::Bi => 0,
        Direction::Uni => 1,
        Direction::OneWay => 2,
    }
}

/// What recording one run of received bytes costs, about: its share of a
/// node of the ordered map that holds the runs.
const RUN_COST: usize = 32;

const DIRECTIONS: [Direction; 3] = [Direction::Bi, Direction::Uni, Direction::OneWay];

impl Streams {
    pub(super) fn new(side: Side, config: &ConnectionConfig) -> Self {
        let concurrent = [
            config.max_concurrent_streams,
            config.max_concurrent_messages,
            config.max_concurrent_streams,
        ];
        Self {
            side,
            tables: LazyTables::default(),
            limits: StreamLimits::new(side, [INITIAL_MAX_STREAMS; 3], [INITIAL_MAX_STREAMS; 3]),
            pages: PagePool::new(config.receive_window.max(INITIAL_CONNECTION_WINDOW)),
            exempt: Exempt::Free,
            turns: Scheduler::new(),
            credit: SendCredit::new(INITIAL_CONNECTION_WINDOW),
            window: RecvWindow::with_initial_limit(
                config.receive_window.max(INITIAL_CONNECTION_WINDOW),
                INITIAL_CONNECTION_WINDOW,
            ),
            credit_room: u64::MAX,
            granted: 0,
            credit_wanted: false,
            taken: 0,
            budget: SendBudget::new(config.send_buffer, config.stream_send_buffer),
            room_released: false,
            message_bytes: 0,
            message_room_released: false,
            stream_receive_window: config.stream_receive_window.max(INITIAL_STREAM_WINDOW),
            max_message_size: config.max_message_size,
            concurrent,
            opened_remote: [0; 3],
            retired_remote: [0; 3],
            advertised_streams: [INITIAL_MAX_STREAMS; 3],
            max_data_due: true,
            opened_by_peer: false,
        }
    }

    fn peer_side(&self) -> Side {
        match self.side {
            Side::Initiator => Side::Responder,
            Side::Responder => Side::Initiator,
        }
    }

    // ---- the application's side ----

    /// Opens a bidirectional stream, if the peer allows one more.
    pub(super) fn open(&mut self) -> Option<StreamId> {
        let id = self.limits.open(Direction::Bi)?;
        let out = self.new_outgoing();
        self.tables.get_mut().outgoing.insert(id, out);
        self.insert_incoming(id, false);
        Some(id)
    }

    /// Opens a one-way stream to the peer, if it allows one more.
    pub(super) fn open_one_way(&mut self) -> Option<StreamId> {
        let id = self.limits.open(Direction::OneWay)?;
        let out = self.new_outgoing();
        self.tables.get_mut().outgoing.insert(id, out);
        Some(id)
    }

    /// Opens (if `may_open`) this side's application streams of `id`'s
    /// kind in order, up to `id`, each as [`open`](Self::open) or
    /// [`open_one_way`](Self::open_one_way) would; whether `id` has been
    /// opened (now or before). `false` beyond the peer's limit, and for a
    /// stream this side does not open.
    pub(super) fn open_through(&mut self, id: StreamId, may_open: bool) -> bool {
        let open = match id.direction() {
            _ if id.opener() != self.side => return false,
            Direction::Bi => Self::open,
            Direction::OneWay => Self::open_one_way,
            Direction::Uni => return false,
        };
        while self.opened(id.direction()) <= id.index() {
            if !may_open || open(self).is_none() {
                return false;
            }
        }
        true
    }

    /// How many application streams of `direction` this side may have
    /// opened in all: the peer's limit.
    pub(super) fn local_limit(&self, direction: Direction) -> u64 {
        self.limits.local(direction).1
    }

    /// How many application streams of `direction` this side has opened.
    pub(super) fn opened(&self, direction: Direction) -> u64 {
        self.limits.local(direction).0
    }

    /// The next bidirectional stream the peer opened.
    pub(super) fn accept(&mut self) -> Option<StreamId> {
        self.tables.existing()?.accept_queue.pop_front()
    }

    /// The next one-way stream the peer opened.
    pub(super) fn accept_one_way(&mut self) -> Option<StreamId> {
        self.tables.existing()?.accept_one_way_queue.pop_front()
    }

    /// Whether the peer opened streams since the last look.
    pub(super) fn take_opened_by_peer(&mut self) -> bool {
        std::mem::take(&mut self.opened_by_peer)
    }

    fn retire_if_done(&mut self, id: StreamId) {
        if self.tables.get().incoming.contains_key(&id)
            || self.tables.get().outgoing.contains_key(&id)
        {
            return;
        }
        if id.opener() != self.side {
            self.retired_remote[slot(id.direction())] += 1;
        }
    }

    // ---- the peer's side ----

    /// Finds or opens (as the peer may, implicitly and in order) stream `id`
    /// named by a frame; `None` for a stream that is already done with.
    ///
    /// Inlined: a stream already open (every frame but a stream's first)
    /// costs the checks alone; opening goes out of line.
    #[inline(always)]
    fn remote_stream(&mut self, id: StreamId, sends_data: bool) -> Result<bool, ProtocolError> {
        self.limits
            .check_remote(id, sends_data)
            .map_err(ProtocolError::Stream)?;
        if id.opener() == self.side || id.index() < self.opened_remote[slot(id.direction())] {
            return Ok(true);
        }
        self.open_remote(id);
        Ok(true)
    }

    /// Opens the peer's streams up to `id` (which its limit allows), in
    /// order.
    fn open_remote(&mut self, id: StreamId) {
        let direction = id.direction();
        let opened = &mut self.opened_remote[slot(direction)];
        let first = *opened;
        *opened = id.index() + 1;
        self.make_room_for_remote(direction, first, id.index() + 1 - first);
        for index in first..=id.index() {
            let new = StreamId::new(id.opener(), direction, index);
            self.insert_incoming(new, direction == Direction::Bi);
            match direction {
                Direction::Bi => {
                    tables::push_back(&mut self.tables.get_mut().accept_queue, new);
                    self.opened_by_peer = true;
                }
                Direction::OneWay => {
                    tables::push_back(&mut self.tables.get_mut().accept_one_way_queue, new);
                    self.opened_by_peer = true;
                }
                Direction::Uni => {}
            }
        }
    }

    /// Makes room in the table of receiving halves for `count` streams of
    /// `direction` the peer opens after its first `opened`: when it is
    /// full, room grows by [`tables::more_room`], never past what the peer
    /// may still open (what it could make the table hold at once anyway).
    fn make_room_for_remote(&mut self, direction: Direction, opened: u64, count: u64) {
        let incoming = &mut self.tables.get_mut().incoming;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if incoming.capacity() - incoming.len() >= count {
            return;
        }
        let may_open = self.limits.remote_allowed(direction).saturating_sub(opened);
        let may_open = usize::try_from(may_open).unwrap_or(usize::MAX);
        let room = tables::more_room(incoming.len()).min(may_open);
        incoming.reserve(room.max(count));
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

    // ---- acknowledgements and losses ----

    pub(super) fn on_max_streams_lost(&mut self, direction: Direction) {
        self.advertised_streams[slot(direction)] = 0;
    }

    // ---- sending ----

    /// Whether anything waits to be sent (data or control).
    pub(super) fn wants_to_send(&self) -> bool {
        !self.turns.is_empty()
            || self.max_data_due
            || !self.tables.get().max_stream_data_due.is_empty()
            || !self.tables.get().resets_due.is_empty()
            || !self.tables.get().stops_due.is_empty()
            || self.max_streams_due().is_some()
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
        while let Some(&id) = self.tables.get().max_stream_data_due.last() {
            if record.is_full() {
                break;
            }
            // A stream whose size is known (its end or its reset came)
            // needs no more credit: nothing is announced for it (RFC 9000
            // §4.5), so a stream reset as it opens costs no frame.
            let Some(inc) = self
                .tables
                .get()
                .incoming
                .get(&id)
                .filter(|inc| inc.data.final_size().is_none())
            else {
                self.tables.get_mut().max_stream_data_due.pop();
                continue;
            };
            let frame = Frame::MaxStreamData(MaxStreamData {
                id: id.0,
                max: inc.window.limit(),
            });
            if packet.push(&frame).is_err() {
                break;
            }
            self.tables.get_mut().max_stream_data_due.pop();
            record.push(Carried::MaxStreamData(id));
            wrote = true;
        }
        while let Some(&id) = self.tables.get().resets_due.last() {
            if record.is_full() {
                break;
            }
            let Some((code, final_size)) = self
                .tables
                .get()
                .outgoing
                .get(&id)
                .and_then(|o| Some((o.reset_code?, o.data.reset_at()?)))
            else {
                self.tables.get_mut().resets_due.pop();
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
            self.tables.get_mut().resets_due.pop();
            record.push(Carried::ResetStream(id));
            wrote = true;
        }
        while let Some(&(id, code)) = self.tables.get().stops_due.last() {
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
            self.tables.get_mut().stops_due.pop();
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

    /// Gives back what a quiet connection need not hold: the pages kept
    /// for reuse, the scheduler's queues while no turn waits, and the
    /// tables once no stream is left and no list holds anything. Each is
    /// made again at its next use.
    pub(super) fn release_memory(&mut self) {
        self.pages.trim();
        self.turns.release_if_empty();
        self.tables.release_if_empty();
    }

    /// Bytes of memory held for what the peer sent on streams: the pages
    /// in use or kept for reuse (at most the pages the connection window
    /// spans, plus one partly filled page at each end of a run of bytes),
    /// what records the runs (at most twice the bytes they hold, plus a
    /// slack per stream: see [`recv_stream`]), and the large messages being
    /// put together (each counted against the connection window; its
    /// chunks hold at most an eighth more than its bytes, plus 4 KiB: see
    /// [`messages::assembly`]), and the bytes and messages taken out
    /// without being consumed, which the application's side holds.
    pub(super) fn receive_memory(&self) -> usize {
        let streams: usize = self
            .tables
            .get()
            .incoming
            .values()
            .map(|i| i.data.runs() * RUN_COST + i.message.as_ref().map_or(0, Assembly::memory))
            .sum();
        self.pages.memory() + streams + self.taken as usize
    }

    /// Bytes buffered on this side for streams: sent and unacknowledged or
    /// unsent, plus what was received and not yet read.
    pub(super) fn memory(&self) -> usize {
        let out: usize = self
            .tables
            .get()
            .outgoing
            .values()
            .map(|o| o.data.buffered() + o.message.as_ref().map_or(0, Bytes::len))
            .sum();
        let inc: usize = self
            .tables
            .get()
            .incoming
            .values()
            .map(|i| i.data.buffered() as usize + i.message.as_ref().map_or(0, Assembly::len))
            .sum();
        out + inc
    }
}
