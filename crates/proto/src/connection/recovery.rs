//! Loss recovery: what each sent packet carried is kept with it until an
//! ACK frame acknowledges it or the loss detector declares it lost; the
//! congestion controller, the MTU search, the streams and the messages
//! learn which.

use std::time::Duration;

use quanta::Instant;
use tern_congestion::{Acked, Controller, Lost, OneWayDelay, Rtt};
use tern_reliability::{AckFrequency, SendError, SentPacket};
use tern_wire::Ack;

use super::Connection;
use super::carried::{Carried, CarriedRecord};
use super::error::ProtocolError;
use super::event::Event;
use super::send::MIN_PACKET;
use super::streams::scheduler::Urgency;
use super::streams::{StreamRun, Turn};

/// How long a connection must have carried no application data before it
/// gives back its scratch memory, and the least time between two
/// releases. Everything it sent being acknowledged is common between
/// bursts (each round of a request and its response), and each release
/// costs a few allocations when sending resumes: a connection carrying
/// data never releases (its steady state allocates nothing), while one
/// gone quiet (after its handshake, after a keep-alive) holds none.
const QUIET_RELEASE_INTERVAL: Duration = Duration::from_secs(1);

/// Packet numbers the sent-packet ring may span besides twice the
/// congestion window in its smallest packets (see [`max_tracked`]).
const TRACKED_SLACK: u64 = 2048;

/// The most packet numbers the sent-packet ring may span for a
/// congestion window of `window` bytes: twice what the window holds in
/// the smallest packets worth building, plus [`TRACKED_SLACK`] for the
/// ACKs alone and the skipped numbers in between. Only the peer's
/// acknowledgements shrink the span (its oldest unresolved packet holds
/// it), so a peer that acknowledges nothing while it makes this side
/// answer (a PING each time) would grow it without end, 184 bytes a
/// packet. At the bound the ACKs alone and lost records at the ring's
/// front are forgotten (a receiver answers a sender that seldom asks for
/// acknowledgement with long runs of ACKs, some declared lost); if the
/// span is still at it, held by a packet the peer must acknowledge, the
/// connection closes
/// ([`ProtocolError::TooLittleAcknowledged`]). An honest peer stays below
/// it: it acknowledges every few ack-eliciting packets, what is in flight
/// is bounded by the window, and the bound follows the largest window the
/// connection had, so the records of a window a loss then reduced stay
/// within it.
pub(super) fn max_tracked(window: u64) -> u64 {
    2 * (window / MIN_PACKET as u64) + TRACKED_SLACK
}

/// One packet beyond a window that a loss just reduced, on the first ACK
/// after the reduction: the retransmission of the lost data, which goes
/// first. RFC 9002 §7.3.2: "If the congestion window is reduced
/// immediately, a single packet can be sent prior to reduction. This
/// speeds up loss recovery if the data in the lost packet is
/// retransmitted." Proportional Rate Reduction (RFC 6937 §3) sends it on
/// the first ACK of the recovery, one packet for the packets that ACK
/// says left the network; so does Tern. Without it, a window of a few
/// packets held the retransmission until ACKs brought the bytes in flight
/// under the reduced window: most of a round trip at 300 ms, twice when
/// the retransmission was lost as well. Sent at once when the loss timer
/// fires instead (tried), it went into a queue the sender kept full
/// (CUBIC at 1 Mbit/s), was dropped as well, and cost a round trip more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecoverySend {
    /// No reduction waits for its packet.
    Idle,
    /// A loss reduced the window; the next ACK that acknowledges in-flight
    /// bytes lets one packet go.
    AwaitingAck,
    /// The next ack-eliciting packet may go beyond the window.
    Due,
}

impl Connection {
    /// Gives back the scratch memory sending and acknowledging left behind
    /// once everything sent but ACKs alone is acknowledged, on a connection that carried
    /// no application data for [`QUIET_RELEASE_INTERVAL`] or never did
    /// (`last_data` still at the connection's start), at most once per
    /// interval and not in the first: the sent-packet ring, the ACK processing lists, the ACK
    /// frame's range list (about 1.7 KiB of an idle connection's heap),
    /// the queues of events, messages, datagrams and the streams' turns
    /// while empty, and the streams' tables once no stream is left (see
    /// `lazy`), and the congestion controller and
    /// pacer (see `transfer`), which start again from their initial state
    /// on the next packet in flight. A quiet period is never shorter than
    /// a probe timeout, the least idle time after which a sender restarts
    /// its window (RFC 7661 §4.3; RFC 5681 §4.1 counts it in
    /// retransmission timeouts).
    ///
    /// An ACK that leaves nothing tracked too soon for it leaves the
    /// release to a timer ([`quiet_release_at`](Self::quiet_release_at)):
    /// otherwise a connection that then falls silent (a responder right
    /// after its handshake, whose first ACK came within the second of an
    /// earlier release) would hold all this until its next keep-alive.
    pub(super) fn release_scratch_when_quiet(&mut self, now: Instant) {
        let sent = self.loss.sent_packets();
        if sent.ack_eliciting_unacked() > 0 || sent.bytes_in_flight() > 0 {
            self.release_waiting = false;
            return;
        }
        if now < self.release_from() {
            self.release_waiting = true;
            return;
        }
        self.release_waiting = false;
        // The last ACKs alone this side sent, which the peer acknowledges
        // only with its next ACK, if ever, hold the ring no longer; a
        // declared loss still remembered does (for a late ACK of it).
        if !self.loss.forget_acks_alone() {
            return;
        }
        self.released_scratch_at = now;
        self.loss.shrink_when_empty();
        self.recovery = None;
        self.ack_ranges = Vec::new();
        self.events.release_memory();
        self.streams.release_memory();
        self.messages_out.release_memory();
        self.inbox.release_memory();
        self.datagrams_in.release_memory();
        self.datagrams_out.release_memory();
        self.limits_repeat.release_memory(now);
        self.release_transfer();
    }

    /// The least time a quiet connection has carried no application data
    /// (or sent or received nothing, for the keys): the release interval,
    /// and never less than a probe timeout.
    fn quiet_period(&self) -> Duration {
        QUIET_RELEASE_INTERVAL.max(self.loss.base_pto())
    }

    /// The earliest the scratch memory may be given back: once the
    /// connection is quiet (it carried no application data for
    /// [`quiet_period`](Self::quiet_period), or never did) and an interval
    /// after the last release, or after the connection's start (a
    /// handshake's packets come and go within it, and need not be given
    /// back and made again each time). The rule both the release an ACK
    /// starts and its timer follow.
    fn release_from(&self) -> Instant {
        let after_last = self.released_scratch_at + QUIET_RELEASE_INTERVAL;
        if self.last_data == self.epoch {
            return after_last;
        }
        after_last.max(self.last_data + self.quiet_period())
    }

    /// When a release an ACK found too soon may run
    /// ([`release_from`](Self::release_from)). `None` when none waits.
    pub(super) fn quiet_release_at(&self) -> Option<Instant> {
        self.release_waiting.then(|| self.release_from())
    }

    /// When the expanded packet keys (about 340 bytes a direction) are
    /// given back: once no packet came and no ack-eliciting one went for
    /// [`QUIET_RELEASE_INTERVAL`] and a probe timeout. `None` while none
    /// is held. Whichever side's keep-alive goes first, both sides of an
    /// idle connection hold no expanded key between keep-alives (a side
    /// that only answers one gets no ACK to start the scratch release):
    /// the next packet either way expands what it needs again, and a
    /// connection that carries data never releases its keys.
    pub(super) fn keys_release_at(&self) -> Option<Instant> {
        if !self.keys.as_ref()?.holds_expanded() {
            return None;
        }
        Some(self.last_received.max(self.last_ack_eliciting_sent) + self.quiet_period())
    }

    /// Gives back the expanded packet keys at [`keys_release_at`], and
    /// with them the scratch memory if the connection is quiet: one
    /// release for both on the side that only answers keep-alives, which
    /// gets no ACK to start [`release_scratch_when_quiet`] (its last ACKs
    /// alone, the ACK frame's range list and the queues would otherwise
    /// stay until the next keep-alive it sends itself).
    ///
    /// [`keys_release_at`]: Self::keys_release_at
    /// [`release_scratch_when_quiet`]: Self::release_scratch_when_quiet
    pub(super) fn release_keys_and_scratch(&mut self, now: Instant) {
        if let Some(keys) = self.keys.as_mut() {
            keys.release_expanded();
        }
        self.release_scratch_when_quiet(now);
    }

    pub(super) fn rtt(&self) -> Rtt {
        let estimator = self.loss.rtt();
        let smoothed = estimator.smoothed();
        Rtt::new(
            smoothed,
            estimator.min().unwrap_or(smoothed),
            estimator.latest(),
        )
    }

    pub(super) fn handle_ack(&mut self, now: Instant, ack: &Ack<'_>) -> Result<(), ProtocolError> {
        let largest = ack.ranges.largest();
        let mut recovery = self.recovery.take().unwrap_or_default();
        recovery.clear();
        // The ranges as the decoder kept them are a plain slice: a peer
        // chooses how many there are.
        let result = match ack.ranges.kept() {
            Some(kept) => self.loss.on_ack(
                now,
                kept.iter().map(|&(start, end)| start..=end),
                ack.ack_delay,
                &mut *recovery,
            ),
            None => self
                .loss
                .on_ack(now, ack.ranges.iter(), ack.ack_delay, &mut *recovery),
        };
        let summary = match result {
            Ok(summary) => summary,
            Err(e) => {
                self.recovery = Some(recovery);
                return Err(ProtocolError::Ack(e));
            }
        };
        if let Some(keys) = self.keys.as_mut() {
            keys.sealer.on_ack(largest);
        }
        if summary.newly_acked == 0 && summary.spurious == 0 && summary.lost.packets == 0 {
            // It only repeats what earlier ACKs said: nothing the rest looks
            // at (packets, window, round trip, what waits to be sent) moved.
            // A peer may send these as fast as it likes; a quiet
            // connection's release is left to its timers.
            self.recovery = Some(recovery);
            return Ok(());
        }
        let mut largest_newly_acked = None;
        let mut stream_run = None;
        let mut ack_known = None;
        for (pn, packet) in recovery.acked.drain(..) {
            largest_newly_acked = Some(largest_newly_acked.map_or(pn, |l: u64| l.max(pn)));
            ack_known = ack_known.max(packet.payload.ack_largest);
            self.on_packet_acked(&packet, &mut stream_run);
        }
        if let Some(largest_reported) = ack_known {
            // The peer got an ACK up to it: what it covered need not be
            // reported again (RFC 9000 §13.2.4). Without this, the gaps of
            // skipped numbers, which never fill, would have every ACK carry
            // all the ranges this side remembers.
            self.received
                .forget_below(largest_reported.saturating_add(1));
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
            self.transfer().controller.on_ack(now, &acked, &rtt);
        }
        self.on_loss_report(now, summary.lost, &rtt);
        if summary.acked_bytes > 0 && self.recovery_send == RecoverySend::AwaitingAck {
            self.recovery_send = RecoverySend::Due;
        }
        for spurious in recovery.spurious.drain(..) {
            // A controller given back since started again: it has no
            // reduction to undo.
            if spurious.in_flight
                && let Some(transfer) = self.transfer.as_mut()
            {
                transfer
                    .controller
                    .on_spurious_loss(now, spurious.declared_lost_at);
            }
        }
        self.recovery = Some(recovery);
        self.release_scratch_when_quiet(now);
        self.after_acks(now);
        Ok(())
    }

    pub(super) fn on_loss_report(
        &mut self,
        now: Instant,
        report: tern_reliability::LossReport,
        rtt: &Rtt,
    ) {
        if let Some(sent_at) = report.largest_sent_at
            && report.in_flight_packets > 0
        {
            let lost = Lost {
                packets: report.in_flight_packets as u64,
                bytes: report.bytes,
                largest_sent_at: sent_at,
            };
            let controller = &mut self.transfer().controller;
            let before = controller.window();
            controller.on_loss(now, &lost, rtt);
            if controller.window() < before {
                self.recovery_send = RecoverySend::AwaitingAck;
            }
        }
        if report.persistent_congestion {
            self.transfer().controller.on_persistent_congestion(now);
        }
    }

    /// What follows acknowledgements: a new ACK-frequency request when the
    /// window or the round trip moved enough, freed buffers, a graceful
    /// close that may now go out.
    fn after_acks(&mut self, now: Instant) {
        let request = AckFrequency::for_path(
            self.ack_frequency_sequence,
            self.window(),
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
        if !self.in_slow_start() {
            self.streams.follow_window(self.window());
        }
        self.flush_readable();
        self.close_if_drained(now);
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
                Carried::Identity => self.on_proof_acked(),
                Carried::Signal(id) => self.signals.on_acked(id),
                _ => {}
            }
        }
        self.path.mtu_mut().on_packet_acked(packet.size as usize);
    }

    pub(super) fn on_packet_lost(&mut self, packet: &SentPacket<CarriedRecord>) {
        self.send_again(&packet.payload);
        if packet.payload.mtu_probe().is_none() {
            self.path.mtu_mut().on_packet_lost(packet.size as usize);
        }
    }

    /// A probe timeout passed: what the oldest packet still unacknowledged
    /// carried (an MTU probe aside) goes again in the probes, ahead of new
    /// data. RFC 9002 §6.2.4 lets a probe carry "new or retransmitted data
    /// based on the application's priorities"; a stream's reader waits for
    /// its oldest missing bytes whatever follows them. Without this, a
    /// retransmission lost again at the tail of a small window (nothing
    /// sent after it to prove it lost) was found only by the ACK of a
    /// probe, a round trip after the timeout, and re-sent then. The packet
    /// stays in flight, not declared lost: a probe timeout declares
    /// nothing (RFC 9002 §6.2).
    pub(super) fn send_oldest_again(&mut self) {
        let oldest = self
            .loss
            .unacked()
            .map(|(_, packet)| packet)
            .find(|packet| {
                packet.payload.mtu_probe().is_none()
                    && packet.payload.iter().any(|item| item.is_retransmittable())
            })
            .map(|packet| packet.payload);
        if let Some(record) = oldest {
            self.send_again(&record);
        }
    }

    /// Queues again what `record` carried, each item in its own way.
    fn send_again(&mut self, record: &CarriedRecord) {
        for item in record.iter() {
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
                Carried::MaxData => self.streams.on_max_data_lost(),
                Carried::AckFrequency => self.ack_frequency_due = true,
                Carried::MaxStreamData(id) => self.streams.on_max_stream_data_lost(id),
                Carried::MaxStreams(direction) => self.streams.on_max_streams_lost(direction),
                Carried::ResetStream(id) => self.streams.on_reset_lost(id),
                Carried::StopSending(id) => self.streams.on_stop_sending_lost(id),
                Carried::MtuProbe(size) => self.path.mtu_mut().on_probe_lost(size as usize),
                Carried::Identity => self.on_proof_lost(),
                Carried::ObservedAddress(sequence) => self.observed.on_lost(sequence),
                Carried::MaxMessageSize => self.message_limits.on_lost(),
                Carried::Signal(id) => self.signals.on_lost(id),
                Carried::PathChallenge | Carried::Ping => {}
            }
        }
    }

    pub(super) fn on_sent(
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
        // An ACK alone from a connection that gave back its transfer
        // machinery (quiet, nothing tracked) is not kept: nothing makes the
        // peer acknowledge it (it is not ack-eliciting), so its record
        // would hold the sent-packet ring (four records, 736 bytes) until
        // the peer's next keep-alive, and then the ACK answering that one
        // would take it again. Any other connection keeps the record, whose
        // acknowledgement lets it stop repeating the ranges it covered.
        let limit = max_tracked(self.window());
        if limit > self.loss.sent_packets().max_tracked() {
            self.loss.set_max_tracked(limit);
        }
        let recorded = if ack_eliciting || in_flight || self.transfer.is_some() {
            self.loss.on_sent(pn, packet)
        } else {
            self.loss.on_sent_released(pn, packet)
        };
        if let Err(SendError::TooManyTracked { .. }) = recorded {
            self.fail(now, ProtocolError::TooLittleAcknowledged);
        }
        if recorded.is_ok() && in_flight {
            let bytes_in_flight = self.loss.bytes_in_flight();
            self.transfer().controller.on_sent(now, bytes_in_flight);
        }
        if ack_eliciting {
            self.last_ack_eliciting_sent = now;
        }
        self.path.on_sent(len);
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len as u64;
    }
}
