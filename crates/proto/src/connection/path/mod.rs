//! One network path of a connection: the peer's address, what the path
//! carries ([`PathMtu`]), and whether the peer has shown it receives what
//! is sent there.
//!
//! A connection's first path is validated by the handshake. When an
//! authenticated packet arrives from a new address (a NAT rebinding, a
//! roaming peer), the connection opens a new path there and challenges it
//! (RFC 9000 §8.2): until the peer echoes one of the challenges, sending
//! there is held to three times what arrived from it
//! ([`AmplificationLimit`]), so a forged source address cannot aim the
//! connection's traffic at a victim. Every challenge carries fresh random
//! bytes (§8.2.1); an answer to any of the last [`CHALLENGES_KEPT`] counts.
//! A path that does not answer within its deadline (three probe timeouts,
//! §8.2.4) has failed, and the connection stays on the path it had.

mod amplification;
pub(crate) mod mtu;
pub(crate) mod probe;
mod validated;

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use rand_core::RngCore;

use amplification::AmplificationLimit;
use mtu::{PathMtu, PathMtuConfig};

/// Challenges whose answers are still accepted.
pub(crate) const CHALLENGES_KEPT: usize = 3;

/// The bytes of a PATH_CHALLENGE, echoed in its PATH_RESPONSE.
pub(crate) type ChallengeToken = [u8; 8];

/// What a path timer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathTimeout {
    /// Nothing changed.
    Nothing,
    /// The challenge went unanswered until the deadline: the path failed.
    ValidationFailed,
}

#[derive(Debug, Clone)]
struct Validation {
    /// The newest challenges sent, newest last.
    tokens: [Option<ChallengeToken>; CHALLENGES_KEPT],
    /// When to send the next challenge (now, at first).
    next_send: Instant,
    /// Time between challenges: the probe timeout when validation began.
    interval: Duration,
    /// When the path has failed if still unanswered.
    deadline: Instant,
}

/// A path to the peer.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    remote: SocketAddr,
    mtu: PathMtu,
    limit: AmplificationLimit,
    /// The challenges of a path not validated yet (out of line: most
    /// connections keep the handshake's path, validated from the start).
    validation: Option<Box<Validation>>,
}

impl Path {
    /// A path known to reach the peer (the handshake's).
    pub(crate) fn validated(remote: SocketAddr, mtu: PathMtuConfig) -> Self {
        Self {
            remote,
            mtu: PathMtu::new(mtu),
            limit: AmplificationLimit::validated(),
            validation: None,
        }
    }

    /// The path an intro arrived on, before the initiator has shown it
    /// receives there: sending is held to three times what arrived
    /// ([`AmplificationLimit`]) until [`confirm`](Self::confirm).
    pub(crate) fn unconfirmed(remote: SocketAddr, mtu: PathMtuConfig) -> Self {
        Self {
            remote,
            mtu: PathMtu::new(mtu),
            limit: AmplificationLimit::new(),
            validation: None,
        }
    }

    /// The peer proved it receives on this path (an authenticated packet
    /// under keys only the handshake's reply could give it).
    pub(crate) fn confirm(&mut self) {
        self.limit.validate();
    }

    /// A path to a new address an authenticated packet came from at `now`;
    /// it is challenged every `probe_timeout` and fails after three of them.
    pub(crate) fn challenged(
        remote: SocketAddr,
        mtu: PathMtuConfig,
        now: Instant,
        probe_timeout: Duration,
    ) -> Self {
        Self {
            remote,
            mtu: PathMtu::new(mtu),
            limit: AmplificationLimit::new(),
            validation: Some(Box::new(Validation {
                tokens: [None; CHALLENGES_KEPT],
                next_send: now,
                interval: probe_timeout,
                deadline: now + probe_timeout * 3,
            })),
        }
    }

    /// The peer's address on this path.
    pub(crate) fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// The path's MTU search.
    pub(crate) fn mtu(&self) -> &PathMtu {
        &self.mtu
    }

    /// The path's MTU search, to feed it probe results.
    pub(crate) fn mtu_mut(&mut self) -> &mut PathMtu {
        &mut self.mtu
    }

    /// Whether the peer has shown it receives what is sent on this path.
    pub(crate) fn is_validated(&self) -> bool {
        self.validation.is_none() && self.limit.is_validated()
    }

    /// A datagram of `bytes` arrived on this path.
    pub(crate) fn on_received(&mut self, bytes: usize) {
        self.limit.on_received(bytes);
    }

    /// Whether a datagram of `bytes` may be sent on this path now.
    pub(crate) fn can_send(&self, bytes: usize) -> bool {
        self.limit.can_send(bytes)
    }

    /// Bytes that may still be sent on this path before the peer shows it
    /// receives there.
    pub(crate) fn allowance(&self) -> u64 {
        self.limit.allowance()
    }

    /// When the next challenge is due, while the path is being validated.
    pub(crate) fn next_challenge(&self) -> Option<Instant> {
        self.validation.as_ref().map(|v| v.next_send)
    }

    /// When the path fails if still unanswered.
    pub(crate) fn validation_deadline(&self) -> Option<Instant> {
        self.validation.as_ref().map(|v| v.deadline)
    }

    /// A datagram of `bytes` was sent on this path.
    pub(crate) fn on_sent(&mut self, bytes: usize) {
        self.limit.on_sent(bytes);
    }

    /// A challenge to send now, if one is due: fresh bytes from `rng`.
    pub(crate) fn poll_challenge(
        &mut self,
        now: Instant,
        rng: &mut impl RngCore,
    ) -> Option<ChallengeToken> {
        let validation = self.validation.as_mut()?;
        if now < validation.next_send || now >= validation.deadline {
            return None;
        }
        let mut token = [0; 8];
        rng.fill_bytes(&mut token);
        validation.tokens.rotate_left(1);
        validation.tokens[CHALLENGES_KEPT - 1] = Some(token);
        validation.next_send = now + validation.interval;
        Some(token)
    }

    /// A PATH_RESPONSE with `token` arrived on this path. Returns whether
    /// it validated the path (it answers one of our recent challenges).
    pub(crate) fn on_response(&mut self, token: ChallengeToken) -> bool {
        let answered = self
            .validation
            .as_ref()
            .is_some_and(|v| v.tokens.contains(&Some(token)));
        if answered {
            self.validation = None;
            self.limit.validate();
        }
        answered
    }

    /// When this path's next timer fires: a challenge to re-send, the
    /// validation deadline, or the MTU raise timer.
    #[cfg(test)]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let validation = self
            .validation
            .as_ref()
            .map(|v| v.next_send.min(v.deadline));
        match (validation, self.mtu.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the path's timers at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> PathTimeout {
        match &self.validation {
            Some(v) if now >= v.deadline => PathTimeout::ValidationFailed,
            _ => PathTimeout::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::SplitMix;

    fn addr() -> SocketAddr {
        SocketAddr::from(([198, 51, 100, 9], 40_000))
    }

    const PTO: Duration = Duration::from_millis(100);

    #[test]
    fn a_new_address_is_held_to_three_times_what_it_sent_until_it_answers() {
        let (clock, _) = quanta::Clock::mock();
        let mut rng = SplitMix(0);
        let mut path = Path::challenged(addr(), PathMtuConfig::default(), clock.now(), PTO);
        assert!(!path.is_validated() && !path.can_send(1));
        path.on_received(100);
        assert!(path.can_send(300) && !path.can_send(301));
        let token = path
            .poll_challenge(clock.now(), &mut rng)
            .expect("a challenge");
        assert_eq!(
            path.poll_challenge(clock.now(), &mut rng),
            None,
            "one per interval"
        );
        path.on_sent(300);
        assert!(!path.can_send(1));
        assert!(!path.on_response([0xee; 8]), "a forged answer");
        assert!(path.on_response(token));
        assert!(path.is_validated() && path.can_send(65_507));
    }

    #[test]
    fn challenges_repeat_with_fresh_bytes_and_any_recent_one_validates() {
        let (clock, mock) = quanta::Clock::mock();
        let mut rng = SplitMix(0);
        let mut path = Path::challenged(addr(), PathMtuConfig::default(), clock.now(), PTO);
        let first = path.poll_challenge(clock.now(), &mut rng).expect("first");
        mock.increment(PTO);
        let second = path.poll_challenge(clock.now(), &mut rng).expect("second");
        assert_ne!(first, second);
        assert!(
            path.on_response(first),
            "a late answer to the first still counts"
        );
    }

    #[test]
    fn an_unanswered_path_fails_after_three_probe_timeouts() {
        let (clock, mock) = quanta::Clock::mock();
        let mut rng = SplitMix(0);
        let start = clock.now();
        let mut path = Path::challenged(addr(), PathMtuConfig::default(), start, PTO);
        let mut sent = 0;
        while path.handle_timeout(clock.now()) == PathTimeout::Nothing {
            sent += usize::from(path.poll_challenge(clock.now(), &mut rng).is_some());
            let next = path.poll_timeout().expect("a timer while validating");
            mock.increment(
                next.saturating_duration_since(clock.now())
                    .max(Duration::from_millis(1)),
            );
        }
        assert_eq!(clock.now().saturating_duration_since(start), PTO * 3);
        assert_eq!(sent, 3);
        assert_eq!(path.poll_challenge(clock.now(), &mut rng), None);
    }

    #[test]
    fn the_handshake_path_needs_no_challenge() {
        let (clock, _) = quanta::Clock::mock();
        let mut path = Path::validated(addr(), PathMtuConfig::default());
        assert!(path.is_validated() && path.can_send(1452));
        assert_eq!(path.poll_challenge(clock.now(), &mut SplitMix(0)), None);
        assert_eq!(path.mtu().current(), 1200);
    }
}
