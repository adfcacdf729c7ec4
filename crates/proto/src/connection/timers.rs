//! The connection's timers: the next deadline, and what each does when it
//! passes (intro deadline, close and drain periods, confirmation, idle
//! timeout, a graceful close's drain timeout, keep-alive, pacing, old keys,
//! expanded keys of a quiet connection, path validation, loss and probe
//! timeouts).

use quanta::Instant;
use tern_reliability::{RecoveryBuffer, TimerEvent};

use super::error::ConnectionError;
use super::path::PathTimeout;
use super::{Connection, State};

/// Packets a probe timeout sends (RFC 9002 §6.2.4: one or two).
pub(super) const PROBE_PACKETS: u8 = 2;

impl Connection {
    /// When [`handle_timeout`](Self::handle_timeout) should run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        match &self.state {
            State::Closed => return None,
            State::Closing { until, resend_at } => return Some((*until).min(*resend_at)),
            State::Draining { until } => return Some(*until),
            State::Connecting(c) => {
                consider(Some(c.deadline));
                consider(Some(c.resend_at));
                return next;
            }
            State::Established => {}
        }
        if self.confirm_deadline.is_some() {
            return self.confirm_deadline;
        }
        consider(self.loss.poll_timeout());
        // A deadline for what no packet can carry now would be in the past
        // on every turn, and the driver would spin on it: an ACK or a
        // keep-alive waits for `can_send_packet`, which the peer's next
        // datagram (raising the allowance) changes, and which touches the
        // connection. A key waiting for its confirmation sends no ACK on a
        // timer (`ack_goes_alone`).
        if self.ack_pending && self.can_send_packet() && !self.key_confirming() {
            consider(self.ack_policy.poll_timeout());
        }
        // The MTU raise timer needs no wake-up of its own: it is checked
        // whenever a packet may go, and keep-alives make that periodic.
        consider(self.path.next_challenge());
        consider(self.path.validation_deadline());
        consider(self.probe_timeout());
        consider(Some(self.idle_deadline()));
        consider(self.close_deadline());
        consider(self.keep_alive_at());
        consider(self.send_blocked_until);
        consider(self.discard_previous_key_at);
        consider(self.proof_deadline());
        consider(self.quiet_release_at());
        consider(self.keys_release_at());
        next
    }

    /// When silence from the peer closes the connection: the configured
    /// idle timeout, raised to three probe timeouts (RFC 9000 §10.1), so
    /// that on a path longer than the timeout a busy connection is not
    /// closed between two round trips.
    fn idle_deadline(&self) -> Instant {
        let timeout = self
            .config
            .idle_timeout
            .max(self.loss.base_pto().saturating_mul(3));
        self.last_received + timeout
    }

    /// When a keep-alive ping is due; `None` while one waits to be sent.
    /// A ping the congestion window holds back (a lossy way back can leave
    /// a window of packets unacknowledged) must not leave a deadline in
    /// the past, or the driver would be asked to call again at once,
    /// forever; an ACK or the probe timeout opens the window again. Nor
    /// while no packet can go at all (`can_send_packet`).
    fn keep_alive_at(&self) -> Option<Instant> {
        if self.ping_due || !self.can_send_packet() {
            return None;
        }
        let interval = self.config.keep_alive?;
        Some(self.last_received.max(self.last_ack_eliciting_sent) + interval)
    }

    /// Runs every timer whose deadline is at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.state {
            State::Closed => return,
            State::Closing { until, resend_at } => {
                if now >= *until {
                    self.state = State::Closed;
                } else if now >= *resend_at {
                    *resend_at = now + self.loss.pto();
                    self.close_due = true;
                }
                return;
            }
            State::Draining { until } => {
                if now >= *until {
                    self.state = State::Closed;
                }
                return;
            }
            State::Connecting(c) => {
                if now >= c.deadline {
                    self.finish_with(ConnectionError::HandshakeTimedOut);
                }
                return;
            }
            State::Established => {}
        }
        if self.confirm_deadline.is_some_and(|t| now >= t) {
            // Never confirmed: a forged, replayed or abandoned handshake.
            self.state = State::Closed;
            return;
        }
        if now >= self.idle_deadline() {
            self.finish_with(ConnectionError::TimedOut);
            return;
        }
        self.check_proof_deadline(now);
        self.close_if_stalled(now);
        if !matches!(self.state, State::Established) {
            return;
        }
        if self.keep_alive_at().is_some_and(|t| now >= t) {
            self.ping_due = true;
        }
        if self.keys_release_at().is_some_and(|t| now >= t) {
            self.release_keys_and_scratch(now);
        }
        if self.send_blocked_until.is_some_and(|t| now >= t) {
            self.send_blocked_until = None;
        }
        if self.discard_previous_key_at.is_some_and(|t| now >= t) {
            self.discard_previous_key_at = None;
            if let Some(keys) = self.keys.as_mut() {
                keys.opener.discard_previous_key();
            }
        }
        self.on_probe_timeout(now);
        if let Some(token) = self.path.poll_challenge(now, &mut self.rng) {
            self.challenge_due = Some(token);
        }
        if self.path.handle_timeout(now) == PathTimeout::ValidationFailed {
            // The new address never answered: back to the one that worked.
            if let Some(previous) = self.previous_path.take() {
                self.path = *previous;
            } else {
                self.finish_with(ConnectionError::TimedOut);
                return;
            }
        }
        // The ACK-processing lists, if held; a timer of a connection that
        // gave them back uses empty ones and keeps nothing.
        let mut held = self.recovery.take();
        let mut spare = RecoveryBuffer::default();
        let recovery = held.as_deref_mut().unwrap_or(&mut spare);
        recovery.clear();
        match self.loss.on_timeout(now, recovery) {
            TimerEvent::LossDeclared(report) => {
                for (_, packet) in recovery.lost.drain(..) {
                    self.on_packet_lost(&packet);
                }
                let rtt = self.rtt();
                self.on_loss_report(now, report, &rtt);
            }
            TimerEvent::Probe { .. } => {
                // A key waiting for its confirmation sends one probe: each
                // takes one of the packets it keeps back.
                self.probes_due = if self.key_confirming() {
                    1
                } else {
                    PROBE_PACKETS
                };
                self.send_oldest_again();
                self.on_probe_timeout_for_proof();
            }
            _ => {}
        }
        self.recovery = held;
        if self.quiet_release_at().is_some_and(|t| now >= t) {
            self.release_scratch_when_quiet(now);
        }
    }
}
