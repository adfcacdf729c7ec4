//! Closing: the application's graceful close (once everything sent was
//! acknowledged, or when the peer stopped acknowledging for the drain
//! timeout) and abort, a protocol violation's transport close, and the end
//! that is reported once.

use std::time::Duration;

use bytes::Bytes;
use quanta::Instant;
use tern_wire::{Close, CloseKind, Frame};

use super::error::{ConnectionError, ProtocolError};
use super::event::Event;
use super::{Connection, State};
use crate::{Transmit, TransmitLimits};

/// Probe timeouts (without back-off) a graceful close waits for the peer's
/// next acknowledgement of data, unless the configuration says otherwise.
const DRAIN_PTOS: u32 = 4;

/// A graceful close waiting for everything sent to be acknowledged.
#[derive(Debug)]
pub(super) struct PendingClose {
    code: u64,
    reason: Bytes,
    /// Bytes the connection held when last looked at: fewer means the peer
    /// acknowledged (or the application read) something.
    held: usize,
    /// When the close gives up on what is left and sends its Close.
    deadline: Instant,
}

/// Transport close codes Tern sends.
mod close_code {
    /// A peer broke the protocol.
    pub(super) const PROTOCOL_VIOLATION: u64 = 1;
    /// The endpoint's memory budget was reached and this connection held
    /// the most.
    pub(super) const MEMORY_BUDGET: u64 = 2;
    /// The connection was evicted from a full table for a new peer.
    pub(super) const EVICTED: u64 = 3;
    /// The responder requires a proof of identity and none came within
    /// the handshake.
    pub(super) const IDENTITY_REQUIRED: u64 = 4;
    /// The sender's packet key reached its limit before the peer confirmed
    /// it (RFC 9001 §6.6: AEAD_LIMIT_REACHED).
    pub(super) const AEAD_LIMIT_REACHED: u64 = 5;
}

impl Connection {
    /// Closes gracefully: everything already sent is delivered first, then
    /// the peer is told `code` and `reason`.
    pub fn close(&mut self, now: Instant, code: u64, reason: Bytes) {
        if matches!(self.state, State::Connecting(_)) {
            self.finish_with(ConnectionError::LocallyClosed { code });
        } else if matches!(self.state, State::Established) && self.close_when_drained.is_none() {
            self.close_when_drained = Some(Box::new(PendingClose {
                code,
                reason,
                held: self.held_bytes(),
                deadline: now + self.drain_timeout(),
            }));
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

    /// Closes at once to give back what the connection holds: the
    /// endpoint's memory budget was reached and this connection held the
    /// most. What the peer sent and the application did not take is
    /// dropped; the peer is told with a transport close.
    pub(crate) fn close_for_memory(&mut self, now: Instant) {
        self.inbox.clear();
        self.datagrams_in.clear();
        self.streams.discard_received();
        if matches!(self.state, State::Connecting(_)) {
            self.finish_with(ConnectionError::MemoryBudget);
            return;
        }
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::MEMORY_BUDGET,
            Bytes::from_static(b"memory budget"),
            ConnectionError::MemoryBudget,
        );
    }

    /// Closes at once, with a transport Close, to make room for a new
    /// connection: the endpoint's table is full and this one carried no
    /// application data for the longest. What it still held is abandoned
    /// (it was idle), and the endpoint frees it at once.
    pub(crate) fn evict(&mut self, now: Instant) {
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::EVICTED,
            Bytes::from_static(b"evicted: idle while the table was full"),
            ConnectionError::Evicted,
        );
    }

    /// Closes at once, with a transport Close: this side requires a proof
    /// of the peer's identity and none came within the handshake.
    pub(super) fn close_unproven(&mut self, now: Instant) {
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::IDENTITY_REQUIRED,
            Bytes::from_static(b"identity proof required"),
            ConnectionError::IdentityNotProven,
        );
    }

    /// Closes at once, with a transport Close sealed in the packet key's
    /// last packet: the key is spent (the peer never confirmed it) and
    /// something is due that it cannot seal.
    pub(super) fn close_for_key_limit(&mut self, now: Instant) {
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::AEAD_LIMIT_REACHED,
            Bytes::from_static(b"packet key limit reached"),
            ConnectionError::AeadLimitReached,
        );
    }

    pub(super) fn three_ptos(&self) -> Duration {
        self.loss.pto() * 3
    }

    /// The probe timeout without its back-off: what this side's close is
    /// counted in (the drain timeout, the closing period), so that a peer
    /// that stopped answering (which backs the probe timeout off, up to
    /// 2^16 times) cannot stretch it.
    fn base_pto(&self) -> Duration {
        let loss = self.loss.config();
        self.loss
            .rtt()
            .pto_base(loss.granularity, loss.peer_max_ack_delay)
    }

    /// How long a graceful close waits for progress.
    fn drain_timeout(&self) -> Duration {
        self.config
            .close_drain_timeout
            .unwrap_or_else(|| self.base_pto() * DRAIN_PTOS)
    }

    /// What the connection holds for data, sent and received: the measure
    /// of a graceful close's progress.
    fn held_bytes(&self) -> usize {
        self.messages_held + self.streams.memory()
    }

    /// When a graceful close gives up waiting, if one waits.
    pub(super) fn close_deadline(&self) -> Option<Instant> {
        self.close_when_drained.as_ref().map(|p| p.deadline)
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
            until: now + self.base_pto() * 3,
            resend_at: now + self.loss.pto(),
        };
        self.close_frame = Some(Box::new((kind, code, reason)));
        self.close_due = true;
        self.abandon_sending();
        self.report_closed(error);
    }

    /// Gives back everything held to send or until acknowledged: closing
    /// at once, the connection sends nothing but its Close again, so what
    /// was written is abandoned (as [`abort`](Self::abort) says), and a
    /// connection closed for the memory budget stops being charged for it
    /// at once rather than three probe timeouts later.
    fn abandon_sending(&mut self) {
        self.messages_out.abandon();
        self.messages_held = 0;
        self.datagrams_out.abandon();
        self.streams.abandon_sending();
        self.loss.abandon_in_flight();
    }

    pub(super) fn report_closed(&mut self, error: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(Box::new(error.clone()));
            self.notify(Event::Closed(error));
        }
    }

    /// Over at once: nothing more is sent.
    pub(super) fn finish_with(&mut self, error: ConnectionError) {
        self.state = State::Closed;
        self.report_closed(error);
    }

    pub(super) fn fail(&mut self, now: Instant, error: ProtocolError) {
        let reason = Bytes::from(error.to_string());
        self.start_closing(
            now,
            CloseKind::Transport,
            close_code::PROTOCOL_VIOLATION,
            reason,
            ConnectionError::Protocol(error),
        );
    }

    /// Sends the Close of a graceful close once everything sent was
    /// acknowledged; until then, moves its deadline on when the peer made
    /// progress.
    pub(super) fn close_if_drained(&mut self, now: Instant) {
        let Some(pending) = &self.close_when_drained else {
            return;
        };
        if self.messages_held > 0 || self.streams.has_unacked_data() {
            let held = self.held_bytes();
            if held < pending.held {
                let deadline = now + self.drain_timeout();
                if let Some(pending) = self.close_when_drained.as_mut() {
                    pending.held = held;
                    pending.deadline = deadline;
                }
            }
            return;
        }
        self.send_pending_close(now);
    }

    /// The Close of a closing connection, into `buf`. To a path not yet
    /// validated (the peer may have forged the address it moved to) it is
    /// held to three times what came from there; when that allowance is
    /// spent, it goes to the path the peer left, if that one was
    /// validated, rather than nowhere: the peer learns why, and the
    /// forged address gets nothing more.
    pub(super) fn poll_close(
        &mut self,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let allowance = usize::try_from(self.path.allowance()).unwrap_or(usize::MAX);
        let size = self.datagram_size(limits).min(buf.len());
        if let Some(len) = self.build_close(&mut buf[..size.min(allowance)]) {
            self.path.on_sent(len);
            return Some(Transmit {
                destination: self.path.remote(),
                len,
                segment_size: None,
                ttl: None,
            });
        }
        let destination = self
            .previous_path
            .as_ref()
            .filter(|path| path.is_validated())?
            .remote();
        let size = size.min(self.previous_path.as_ref()?.mtu().current());
        let len = self.build_close(&mut buf[..size])?;
        Some(Transmit {
            destination,
            len,
            segment_size: None,
            ttl: None,
        })
    }

    /// A graceful close whose peer made no progress for the drain timeout
    /// abandons what is left and sends its Close.
    pub(super) fn close_if_stalled(&mut self, now: Instant) {
        if self.close_deadline().is_some_and(|at| now >= at) {
            self.send_pending_close(now);
        }
    }

    fn send_pending_close(&mut self, now: Instant) {
        let Some(PendingClose { code, reason, .. }) = self.close_when_drained.take().map(|p| *p)
        else {
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

    /// Seals the Close frame this connection is to send into `buf`, its
    /// reason cut to what fits; `None` when there is none or no keys.
    pub(super) fn build_close(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (kind, code, reason) = self.close_frame.as_deref()?;
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
}
