//! Closing: the application's graceful close (once everything sent was
//! acknowledged) and abort, a protocol violation's transport close, and
//! the end that is reported once.

use std::time::Duration;

use bytes::Bytes;
use quanta::Instant;
use tern_wire::CloseKind;

use super::error::{ConnectionError, ProtocolError};
use super::event::Event;
use super::{Connection, State};

/// Transport close codes Tern sends.
mod close_code {
    /// A peer broke the protocol.
    pub(super) const PROTOCOL_VIOLATION: u64 = 1;
}

impl Connection {
    /// Closes gracefully: everything already sent is delivered first, then
    /// the peer is told `code` and `reason`.
    pub fn close(&mut self, now: Instant, code: u64, reason: Bytes) {
        if matches!(self.state, State::Connecting(_)) {
            self.finish_with(ConnectionError::LocallyClosed { code });
        } else if matches!(self.state, State::Established) && self.close_when_drained.is_none() {
            self.close_when_drained = Some((code, reason));
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

    pub(super) fn three_ptos(&self) -> Duration {
        self.loss.pto() * 3
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
            until: now + self.three_ptos(),
            resend_at: now + self.loss.pto(),
        };
        self.close_frame = Some((kind, code, reason));
        self.close_due = true;
        self.report_closed(error);
    }

    pub(super) fn report_closed(&mut self, error: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(error.clone());
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
    /// acknowledged.
    pub(super) fn close_if_drained(&mut self, now: Instant) {
        if self.close_when_drained.is_none()
            || self.messages_held > 0
            || self.streams.has_unacked_data()
        {
            return;
        }
        let Some((code, reason)) = self.close_when_drained.take() else {
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
}
