//! Probing a path the connection does not use yet (RFC 9000 §9.1): a
//! connection carried by a relay tries the peer's direct address in the
//! background, and moves there only once the peer answered a challenge
//! sent there, so a direct path that works one way only never carries the
//! connection.
//!
//! A probe is a packet holding only a PATH_CHALLENGE and padding, sent to
//! the candidate address; it is not counted in flight (its loss is no
//! congestion signal). Its peer does not follow a probing packet to the
//! address it came from: it answers there with a PATH_RESPONSE alone, no
//! larger than the probe, and stays where it is. Once the answer arrives,
//! this side moves to the candidate (the path estimates start again, as
//! for any move), and the peer follows the first ordinary packet it gets
//! from there, challenging it in turn. The path left stays known as the
//! previous one, so that the packets still on their way along it are
//! taken without moving back.

use std::net::SocketAddr;

use quanta::Instant;
use tern_wire::{Frame, PathChallenge, PathResponse};

use super::{ChallengeToken, Path, PathTimeout};
use crate::Transmit;
use crate::TransmitLimits;
use crate::connection::carried::CarriedRecord;
use crate::connection::{Connection, State};

/// What a probe is padded to: the smallest datagram every path carries,
/// which the peer's answer never exceeds.
const PROBE_SIZE: usize = 1200;

/// A path being probed, and a challenge that came on another path than
/// the connection's.
#[derive(Debug, Default)]
pub(crate) struct Probing {
    candidate: Option<Path>,
    /// A challenge from an address the connection does not use, to answer
    /// there.
    answer: Option<(ChallengeToken, SocketAddr)>,
}

/// Whether a packet holds only frames that probe a path: a packet that
/// does carries nothing the connection needs, and moves nobody.
pub(crate) fn is_probing(frames: &tern_wire::Frames<'_>) -> bool {
    frames.clone().all(|frame| {
        matches!(
            frame,
            Ok(Frame::PathChallenge(_) | Frame::PathResponse(_) | Frame::Padding(_))
        )
    })
}

impl Connection {
    /// Starts probing `to` as a path to the peer, unless it is the path in
    /// use or is being probed already. Only an established connection on
    /// a validated path probes. Returns whether a probe started.
    pub(crate) fn probe_path(&mut self, now: Instant, to: SocketAddr) -> bool {
        if !matches!(self.state, State::Established)
            || self.reply.is_some()
            || !self.path.is_validated()
            || self.path.remote() == to
        {
            return false;
        }
        let probing = self.probing.get_or_insert_with(Box::default);
        if probing.candidate.as_ref().is_some_and(|c| c.remote() == to) {
            return false;
        }
        let mut candidate = Path::challenged(to, self.config.path_mtu(), now, self.loss.pto());
        // This side chose the address: what it sends there amplifies
        // nothing (as an initiator's intro).
        candidate.confirm();
        probing.candidate = Some(candidate);
        true
    }

    /// Whether the peer has shown it receives on the path in use.
    pub(crate) fn path_is_validated(&self) -> bool {
        self.path.is_validated()
    }

    /// The time from the connection's start to `now`.
    pub(crate) fn since_start(&self, now: Instant) -> std::time::Duration {
        now.saturating_duration_since(self.epoch)
    }

    /// When the probing timers fire: the next challenge, the deadline.
    pub(in crate::connection) fn probe_timeout(&self) -> Option<Instant> {
        let candidate = self.probing.as_deref()?.candidate.as_ref()?;
        let next = candidate.next_challenge()?;
        Some(next.min(candidate.validation_deadline()?))
    }

    /// A probed path that never answered is given up.
    pub(in crate::connection) fn on_probe_timeout(&mut self, now: Instant) {
        if let Some(probing) = self.probing.as_deref_mut()
            && probing
                .candidate
                .as_mut()
                .is_some_and(|c| c.handle_timeout(now) == PathTimeout::ValidationFailed)
        {
            probing.candidate = None;
        }
    }

    /// Whether anything of the probing is due to be sent.
    pub(in crate::connection) fn probe_due(&self, now: Instant) -> bool {
        self.probing.as_deref().is_some_and(|probing| {
            probing.answer.is_some()
                || probing
                    .candidate
                    .as_ref()
                    .and_then(Path::next_challenge)
                    .is_some_and(|at| at <= now)
        })
    }

    /// A probing packet (see [`is_probing`]) from `from`, not the current
    /// path's address: challenges are answered there, and an answer to the
    /// candidate's challenge moves the connection to it.
    pub(in crate::connection) fn on_probing_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        frames: tern_wire::Frames<'_>,
    ) {
        let mut validated = false;
        for frame in frames.flatten() {
            match frame {
                Frame::PathChallenge(PathChallenge { data }) => {
                    let probing = self.probing.get_or_insert_with(Box::default);
                    probing.answer = Some((data, from));
                }
                Frame::PathResponse(PathResponse { data }) => {
                    let probed = self
                        .probing
                        .as_deref_mut()
                        .and_then(|p| p.candidate.as_mut())
                        .is_some_and(|c| c.remote() == from && c.on_response(data));
                    validated |= probed;
                    // An answer to the current path's challenge counts
                    // wherever it comes from (RFC 9000 §8.2.2).
                    if !probed && self.path.on_response(data) {
                        self.on_path_validated(now);
                    }
                }
                _ => {}
            }
        }
        if validated {
            self.move_to_candidate(now);
        }
    }

    /// The candidate answered: the connection moves there.
    fn move_to_candidate(&mut self, now: Instant) {
        let Some(candidate) = self.probing.as_deref_mut().and_then(|p| p.candidate.take()) else {
            return;
        };
        let old = std::mem::replace(&mut self.path, candidate);
        self.previous_path = None;
        self.on_path_validated(now);
        self.stats.rare().migrations += 1;
        self.previous_path = Some(Box::new(old));
    }

    /// The next probing datagram into `buf`: an answer to a challenge that
    /// came on another path, or a challenge to the candidate.
    pub(in crate::connection) fn poll_probe(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let probing = self.probing.as_deref_mut()?;
        let (frame, destination, pad) = if let Some((token, to)) = probing.answer.take() {
            (Frame::PathResponse(PathResponse { data: token }), to, false)
        } else {
            let candidate = probing.candidate.as_mut()?;
            let token = candidate.poll_challenge(now, &mut self.rng)?;
            let to = candidate.remote();
            (
                Frame::PathChallenge(PathChallenge { data: token }),
                to,
                true,
            )
        };
        let size = PROBE_SIZE.min(limits.max_datagram_size).min(buf.len());
        let keys = self.keys.as_mut()?;
        let mut packet = keys.sealer.start(&mut buf[..size]).ok()?;
        packet.push(&frame).ok()?;
        if pad {
            packet.pad_to(size).ok()?;
        }
        let (len, pn) = packet.finish().ok()?;
        // Neither ack-eliciting nor in flight for this side: a lost probe
        // is no congestion signal.
        self.on_sent(now, pn, len, false, false, CarriedRecord::new());
        Some(Transmit {
            destination,
            len,
            segment_size: None,
            ttl: None,
        })
    }
}
