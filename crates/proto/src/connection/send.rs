//! Datagrams out: what may be sent now (congestion window, pacer, rate
//! limit, amplification limit), and packet assembly — ACKs, path frames,
//! control frames, datagrams, then messages and stream chunks in turn —
//! into runs of equal-size datagrams for one GSO send.

use std::time::Duration;

use quanta::Instant;
use rand_core::RngCore;
use tern_congestion::Take;
use tern_wire::{
    Ack, AckFrameRanges, Frame, MAX_ACK_RANGES, PacketBuilder, PathChallenge, PathResponse,
};

use super::carried::{Carried, CarriedRecord};
use super::handshake::MAX_INTRO_BACKOFF;
use super::recovery::RecoverySend;
use super::streams::messages::{MESSAGE_CHARGE, MESSAGE_WINDOW, MessageSender};
use super::streams::scheduler::Urgency;
use super::streams::{Streams, Turn};
use super::timers::PROBE_PACKETS;
use super::{Connection, State};
use crate::Side;
use crate::{Transmit, TransmitLimits};

/// The smoothed RTT from which a retransmission of the bytes the peer's
/// delivery waits for goes twice (see `SendStream::poll_chunk`). A packet
/// lost and its retransmission lost too hold delivery up at least
/// 2 × 9/8 RTT + RTT/2, more with the reordering window or a window with
/// nothing sent after the retransmission: a second or more from about
/// 300 ms (traced in the goodput matrix). On shorter paths the copies cost
/// window and goodput for no second saved: sent on every path, they took
/// CUBIC at 1 Mbit/s × 150 ms × 5 % loss below 80 % of the Mathis bound.
/// Any value from 200 to 300 ms gives the same matrix.
const LONG_PATH: Duration = Duration::from_millis(250);

/// The smallest datagram worth building (an ACK, a challenge).
pub(super) const MIN_PACKET: usize = 64;

/// ACK datagrams sent, one after the other, for a packet that carries a
/// PING. A PING is a probe (RFC 9002 §6.2.4: sent "to elicit an
/// acknowledgment"), a keep-alive or an MTU probe: a sender that sends
/// one is waiting on its answer, and once a lossy way back has swallowed
/// the ACKs of a window, that answer is the only way out of backed-off
/// probe timeouts. Sent once, a burst of n lost datagrams lasted n/2
/// doubling timeouts (two probes each); sent three times, n/6. The cost is
/// two ACK-only datagrams (about 40 bytes each) per PING; on a path not
/// yet validated they count against the amplification allowance like any
/// other.
pub(super) const ACKS_PER_PING: u8 = 3;

/// PINGs per smoothed round trip whose ACK goes `ACKS_PER_PING` times: a
/// probe timeout's probes.
pub(super) const COPIED_PINGS_PER_RTT: u8 = PROBE_PACKETS;

/// One packet number in about this many is skipped, never sent: a peer
/// that acknowledges one acknowledges what it did not receive, to speed
/// this side up (an optimistic ACK, RFC 9000 §21.4), and the ACK is
/// refused as a protocol violation. Each skip costs the peer one more
/// ACK range, for a while.
const SKIP_INTERVAL: u64 = 1024;
/// Room left in a packet below which no more data is written into it: the
/// header of a frame and a few bytes. Data that leaves less than this
/// fills the packet to the byte with padding (see `build_packet`).
const FULL_PACKET_SLACK: usize = 24;

/// Packet numbers from one skip to the next: uniform in
/// `2..2 + 2 * SKIP_INTERVAL`, so the peer cannot tell where the next one is.
pub(super) fn skip_gap(rng: &mut impl RngCore) -> u64 {
    2 + rng.next_u64() % (2 * SKIP_INTERVAL)
}

impl Connection {
    /// Fills `buf` with the next datagram, or a run of equal-size datagrams
    /// to the peer, within `limits`; `None` when nothing is to be sent now.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.sent_data = false;
        match &mut self.state {
            State::Closed | State::Draining { .. } => return None,
            State::Connecting(c) => {
                let token = c.token.as_ref().map_or(&[][..], |t| &t[..]);
                let len = c.intro.len() + token.len();
                if now < c.resend_at || buf.len() < len {
                    return None;
                }
                // Once the responder asked for a token it is at its budget,
                // and initiators that met it together would come back
                // together: their resends are spread over the later half of
                // the back-off.
                let wait = if c.token.is_some() {
                    let spread = f64::from(self.rng.next_u32()) / f64::from(u32::MAX);
                    c.backoff / 2 + (c.backoff / 2).mul_f64(spread)
                } else {
                    c.backoff
                };
                c.resend_at = now + wait;
                c.backoff = (c.backoff * 2).min(MAX_INTRO_BACKOFF);
                let (intro, rest) = buf.split_at_mut(c.intro.len());
                intro.copy_from_slice(&c.intro);
                rest[..token.len()].copy_from_slice(token);
                self.stats.sent_packets += 1;
                self.stats.sent_bytes += len as u64;
                return Some(self.transmit(len, None));
            }
            State::Closing { .. } => {
                if !self.close_due {
                    return None;
                }
                self.close_due = false;
                return self.poll_close(limits, buf);
            }
            State::Established => {}
        }
        if self.reply.is_some() {
            // Until the initiator's first packet, only the reply is ever sent.
            return None;
        }
        self.update_keys();
        if self
            .keys
            .as_ref()
            .is_some_and(|keys| keys.sealer.key_spent())
        {
            // Only a Close can be sealed now: it goes as soon as anything
            // else is due, never a silent stall.
            if !self.packet_due(now) {
                return None;
            }
            self.close_for_key_limit(now);
            self.close_due = false;
            return self.poll_close(limits, buf);
        }
        if self.probe_due(now)
            && let Some(probe) = self.poll_probe(now, limits, buf)
        {
            return Some(probe);
        }
        // On a path not yet validated, at most three times what came from it.
        let allowance = usize::try_from(self.path.allowance()).unwrap_or(usize::MAX);
        let size = self.datagram_size(limits).min(buf.len()).min(allowance);
        if size < MIN_PACKET {
            return None;
        }
        // A due proof of identity goes first: the responder may announce
        // the connection on the first packet it gets.
        if !self.proof_is_due()
            && let Some(len) = self.poll_mtu_probe(now, limits, buf)
        {
            return Some(self.transmit(len, None));
        }
        let in_flight_before = self.loss.bytes_in_flight();
        let quiet = in_flight_before == 0;
        let data_allowed = self.may_send_data(now, size, quiet);
        let mut written = 0;
        let mut stride = 0;
        let mut count = 0;
        while count < limits.max_segments {
            let max = if count == 0 { size } else { stride };
            let Some(window) = buf.get_mut(written..written + max) else {
                break;
            };
            if count > 0
                && (!self.may_send_more(size, written, quiet) || !self.path.can_send(stride))
            {
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
        // Only what the congestion window counts is paced: an ACK alone
        // goes when it is due, and does not hold back the data after it.
        let in_flight = self.loss.bytes_in_flight().saturating_sub(in_flight_before);
        let unpaced = if quiet {
            in_flight.min(self.initial_window)
        } else {
            0
        };
        // A packet in flight built the pacer again if it was given back.
        if let Some(transfer) = self.transfer.as_mut() {
            transfer.pacer.on_sent_unpaced(now, unpaced);
            transfer.pacer.on_sent(now, in_flight - unpaced);
        }
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
            ttl: None,
        }
    }

    /// Whether a packet can leave now, whatever the congestion window: the
    /// path's amplification allowance has room for the smallest one (on a
    /// path not yet validated it may be spent). Timers use it so that no
    /// deadline is set for what cannot be sent. (A spent packet key is no
    /// reason to wait: what falls due then closes the connection.)
    pub(super) fn can_send_packet(&self) -> bool {
        self.path.allowance() >= MIN_PACKET as u64 && self.keys.is_some()
    }

    /// Whether something must go now with a spent key: an ACK the peer
    /// needs, a probe, a PING.
    fn packet_due(&self, now: Instant) -> bool {
        self.ack_goes_alone(now, true) || self.probes_due > 0 || self.ping_due
    }

    /// Whether this side's packet key waits for the peer's confirmation
    /// with only the packets it keeps back (see
    /// [`PacketSealer::may_seal_new_data`](tern_wire::PacketSealer::may_seal_new_data)).
    pub(super) fn key_confirming(&self) -> bool {
        self.keys
            .as_ref()
            .is_some_and(|keys| !keys.sealer.may_seal_new_data())
    }

    /// Whether a pending ACK is worth a packet of its own at `now`: as the
    /// ACK policy says, but while this side's key waits for its
    /// confirmation, each packet takes one of the few it keeps back, and
    /// only the ACKs the peer needs go: the first for the peer's current
    /// key (which confirms its update) and the answer to a PING. The
    /// others wait for the key's update, which the peer's next ACK allows.
    pub(super) fn ack_goes_alone(&self, now: Instant, confirming: bool) -> bool {
        self.ack_pending
            && if confirming {
                self.ping_unanswered
                    || self
                        .largest_ack_sent
                        .is_none_or(|acked| acked < self.peer_key_phase_start)
            } else {
                self.ack_policy.worth_sending_alone(now)
            }
    }

    /// The largest datagram for this path now.
    pub(super) fn datagram_size(&self, limits: TransmitLimits) -> usize {
        self.path.mtu().current().min(limits.max_datagram_size)
    }

    /// Updates the packet key before the AEAD limit (once the peer has
    /// confirmed the previous update).
    ///
    /// The peer confirms a key by acknowledging a packet sealed under it,
    /// and it acknowledges only ack-eliciting packets: a side that sends
    /// nothing but ACKs (the receiver of an upload) would never see its
    /// key confirmed. With an update due and nothing ack-eliciting in
    /// flight, a PING goes out to be acknowledged. A key still not
    /// confirmed at [`KeyConfig::new_data_until`](tern_wire::KeyConfig::new_data_until)
    /// seals no new data (`build_packet`), only what confirms keys, and a
    /// spent one only the Close (`poll_transmit`).
    fn update_keys(&mut self) {
        let Some(keys) = self.keys.as_mut() else {
            return;
        };
        if !keys.sealer.key_update_due() {
            return;
        }
        if keys.sealer.key_update_confirmed() {
            if keys.sealer.update_key().is_ok() {
                self.stats.rare().key_updates += 1;
            }
        } else if self.loss.bytes_in_flight() == 0 {
            self.ping_due = true;
        }
    }

    /// Whether the congestion window, the pacer and the rate limit let a
    /// batch of data start now (asked once per batch); `quiet`: nothing was
    /// in flight when the batch began (see [`unpaced`](Self::unpaced)).
    fn may_send_data(&mut self, now: Instant, size: usize, quiet: bool) -> bool {
        if self.probes_due > 0 {
            return true;
        }
        if self.loss.bytes_in_flight() + size as u64 > self.sending_window() {
            self.app_limited = false;
            return false;
        }
        if !self.has_data_to_send() {
            self.app_limited = true;
            return true;
        }
        let rtt = self.rtt();
        // Asked even for what need not wait, so that the pacer's rate and
        // what it has available stay current for the rest of the batch.
        if let Take::WaitUntil(at) = self.pace(now, &rtt, size as u64)
            && at > now
            && !self.unpaced(quiet, size)
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

    /// Whether the window, the pacer and the rate limit's bucket have room
    /// for one more datagram of the batch after the `written` bytes before
    /// it. The pacer and the bucket were asked once, for the batch's first
    /// datagram; without this a whole run (64 datagrams) would go on one
    /// datagram's tokens, as one burst into the bottleneck's queue, and
    /// leave the connection silent while the debt is repaid.
    fn may_send_more(&self, size: usize, written: usize, quiet: bool) -> bool {
        let batch = (written + size) as u64;
        self.probes_due > 0
            || (self.loss.bytes_in_flight() + size as u64 <= self.sending_window()
                && (self.pacer_available() >= batch || self.unpaced(quiet, size))
                && self
                    .rate_limit
                    .as_ref()
                    .is_none_or(|bucket| bucket.available() >= batch))
    }

    /// Whether the next `size` bytes may leave without asking the pacer: a
    /// batch that began with nothing in flight (the path's queue has
    /// drained, as at a connection's start) goes back to back as far as
    /// the initial window, the largest burst a sender makes anyway (RFC
    /// 9002 §7.7). An application that waits for each answer sends every
    /// message from quiet: paced, the last packets of a 32 KiB one waited
    /// for a timer that rounds a wait of microseconds up to the next
    /// millisecond, a round trip of 2 ms longer by half. They spend the
    /// pacer's tokens without leaving it a debt
    /// ([`Pacer::on_sent_unpaced`](tern_congestion::Pacer::on_sent_unpaced)).
    fn unpaced(&self, quiet: bool, size: usize) -> bool {
        quiet && self.loss.bytes_in_flight() + size as u64 <= self.initial_window
    }

    /// The window the next packet may fill: the congestion window, or
    /// without bound for the one packet a reduction lets go (see
    /// [`RecoverySend`]).
    fn sending_window(&self) -> u64 {
        if self.recovery_send == RecoverySend::Due {
            u64::MAX
        } else {
            self.window()
        }
    }

    fn has_data_to_send(&self) -> bool {
        self.streams.wants_to_send()
            || !self.datagrams_out.is_empty()
            || self.ping_due
            || self.path_response_due.is_some()
            || self.proof_is_due()
            || self.signals.has_due()
            || (self.side == Side::Responder && self.ticket.is_some())
    }

    /// An MTU probe, alone in its datagram, when one is due.
    fn poll_mtu_probe(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<usize> {
        if !self.path.is_validated()
            || self.loss.bytes_in_flight() + self.path.mtu().current() as u64 > self.window()
            || !self
                .keys
                .as_ref()
                .is_some_and(|keys| keys.sealer.may_seal_new_data())
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

    /// Builds one packet into `buf`; `None` when there was nothing to put
    /// in it (no packet number is used then).
    fn build_packet(&mut self, now: Instant, buf: &mut [u8], data_allowed: bool) -> Option<usize> {
        // Past the point where a key not yet confirmed takes no new data,
        // only ACKs, probes and PINGs go: what lets both sides confirm.
        let confirming = self.key_confirming();
        let ack_due = self.ack_pending && self.ack_policy.ack_due(now);
        let send_ack = self.ack_pending && (ack_due || data_allowed || confirming);
        // An ACK rides on whatever else goes; alone only when worth it.
        let ack_alone = send_ack && self.ack_goes_alone(now, confirming);
        if send_ack {
            self.received
                .ack_frame_ranges(MAX_ACK_RANGES, &mut self.ack_ranges);
        }
        let ack_delay = self.ack_policy.ack_delay(now);
        let receive_time = self.largest_received_at.map_or(Duration::ZERO, |(_, at)| {
            at.saturating_duration_since(self.epoch)
        });
        let probing = self.probes_due > 0;
        let rtt = self.loss.rtt().smoothed();
        let keys = self.keys.as_mut()?;
        if keys.sealer.remaining_packets() <= 1 {
            // The key's last packet is kept for a Close.
            return None;
        }
        let fresh_allowed = data_allowed && !confirming;
        if keys.sealer.next_packet_number() >= self.next_skip
            && let Ok(skipped) = keys.sealer.skip_packet_number()
        {
            self.next_skip = skipped + skip_gap(&mut self.rng);
        }
        let buf_len = buf.len();
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
        // RFC 9002 §6.2.4: probe packets "MUST be ack-eliciting". A probe
        // carries a PING whatever else it holds: the peer acknowledges a
        // PING at once (`AckPolicy::ack_at_once`), so each probe elicits
        // an ACK of its own.
        if probing && !record.is_full() && packet.push(&Frame::Ping).is_ok() {
            record.push(Carried::Ping);
            ack_eliciting = true;
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
        if fresh_allowed {
            // The proof goes ahead of any data: a responder that requires
            // it reads a packet only if the proof comes first.
            if let Some(proof) = self.identity.due_proof()
                && !record.is_full()
                && packet.push(&proof).is_ok()
            {
                self.identity.on_proof_sent();
                record.push(Carried::Identity);
                ack_eliciting = true;
            }
            if let Some(limit) = self.message_limits.due_frame(self.config.max_message_size)
                && !record.is_full()
                && packet.push(&limit).is_ok()
            {
                self.message_limits.on_sent();
                record.push(Carried::MaxMessageSize);
                ack_eliciting = true;
            }
            if self.side == Side::Responder
                && let Some(slot) = self.ticket.as_deref()
                && packet.push(&slot.frame()).is_ok()
            {
                // Sent once: a lost ticket costs a full intro next time.
                self.ticket = None;
                ack_eliciting = true;
            }
            self.observed.on_peer_address(self.path.remote());
            if let Some(report) = self.observed.due()
                && !record.is_full()
                && packet.push(&Frame::ObservedAddress(report)).is_ok()
            {
                self.observed.on_sent();
                record.push(Carried::ObservedAddress(report.sequence));
                ack_eliciting = true;
            }
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
            while !record.is_full()
                && let Some((id, signal)) = self.signals.next_due()
            {
                if packet.push(&signal.frame()).is_err() {
                    self.signals.put_back(id);
                    break;
                }
                record.push(Carried::Signal(id));
                ack_eliciting = true;
            }
            let repeating = wrote_ack && self.limits_repeat.repeat(now, &mut self.streams);
            let wrote_control = self.streams.write_control(&mut packet, &mut record);
            ack_eliciting |= wrote_control;
            // Only control frames raise limits: a packet without any (a
            // bulk sender's) is not looked through.
            if wrote_control && !repeating {
                self.limits_repeat.on_sent(now, rtt, &record);
            }
            while let Some(datagram) = self.datagrams_out.front() {
                if datagram.len() > packet.datagram_capacity() {
                    break;
                }
                let frame = Frame::Datagram(tern_wire::Datagram { data: datagram });
                if packet.push(&frame).is_err() {
                    break;
                }
                self.datagrams_out.pop();
                self.last_data = now;
                self.sent_data = true;
                ack_eliciting = true;
            }
            let copy_blocking = rtt >= LONG_PATH;
            if Self::write_data(
                &mut self.streams,
                &mut self.messages_out,
                &mut self.messages_charged,
                &mut packet,
                &mut record,
                copy_blocking,
            ) {
                self.last_data = now;
                self.sent_data = true;
                ack_eliciting = true;
                // Every packet of a run but the last is the run's stride
                // long (GSO), and a frame's room is reckoned for the
                // largest offset, so data left each packet a byte or two
                // short of the one before and ended its run: a 16 KiB
                // message went out as six runs of two datagrams, each a
                // send and a receive of its own, where one run of twelve
                // does. Padding the last bytes keeps the run going (a
                // packet that cannot be padded only ends its run).
                if packet.remaining() <= FULL_PACKET_SLACK {
                    let _ = packet.pad_to(buf_len);
                }
            }
        }
        // A key waiting for its confirmation asks for it with each ACK it
        // still sends: the peer answers a PING at once, and the answer
        // acknowledges a packet under this key. (Those ACKs are few, see
        // `ack_goes_alone`, and once the answer came the key is updated
        // and asks no more.)
        let ping = (data_allowed && self.ping_due) || (confirming && wrote_ack && ack_alone);
        if ping && !ack_eliciting && packet.push(&Frame::Ping).is_ok() {
            record.push(Carried::Ping);
            ack_eliciting = true;
        }
        if !(ack_eliciting || (wrote_ack && ack_alone)) {
            return None;
        }
        let (len, pn) = packet.finish().ok()?;
        if wrote_ack {
            let largest = self.ack_ranges.iter().map(|r| *r.end()).max();
            self.largest_ack_sent = self.largest_ack_sent.max(largest);
            record.ack_largest = largest;
            self.ping_unanswered = false;
            // Copies of an ACK (`ACKS_PER_PING`) would each take one of
            // the packets a waiting key keeps back.
            self.ack_copies_due = if confirming {
                0
            } else {
                self.ack_copies_due.saturating_sub(1)
            };
            if self.ack_copies_due == 0 {
                self.ack_pending = false;
                self.ack_policy.on_ack_sent();
            }
        }
        if ack_eliciting {
            self.ping_due = false;
            self.probes_due = self.probes_due.saturating_sub(1);
            self.recovery_send = RecoverySend::Idle;
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
        copy_blocking: bool,
    ) -> bool {
        let mut wrote = false;
        while !record.is_full() && packet.remaining() > FULL_PACKET_SLACK {
            let Some(turn) = streams.next_turn() else {
                break;
            };
            match turn {
                Turn::Messages => {
                    let mut any = false;
                    while !record.is_full() {
                        let credit = streams.credit_available();
                        let window_end = messages.oldest_unacked() + MESSAGE_WINDOW;
                        let Some((id, message)) = messages.poll(|id, len| {
                            id < window_end
                                && len <= packet.message_capacity(id)
                                && (id < *charged || len as u64 + MESSAGE_CHARGE <= credit)
                        }) else {
                            break;
                        };
                        let len = message.len() as u64 + MESSAGE_CHARGE;
                        let frame = Frame::Message(tern_wire::Message { id, data: message });
                        if packet.push(&frame).is_err() {
                            messages.on_lost(id);
                            break;
                        }
                        if id >= *charged {
                            streams.consume_credit(len);
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
                    if !streams.write_stream(id, packet, record, copy_blocking) {
                        streams.requeue(id);
                        break;
                    }
                    wrote = true;
                }
            }
        }
        wrote
    }
}
