//! Rendezvous: an endpoint introduces two of its peers to each other, and
//! is introduced by its own rendezvous to others (frames and packet:
//! `tern_wire::rendezvous`).
//!
//! As a rendezvous, it keeps the peers that registered, by the fingerprint
//! of the identity they proved, with the local candidates they named, and
//! answers each ConnectVia with an Introduce to both sides (each naming
//! the other's observed address and local candidates), or a typed refusal: the key is not registered,
//! the asker asks too often ([`EndpointConfig::introductions_per_second`]),
//! or it proved no identity.
//!
//! As the asker (initiator), it connects to the address it is given and
//! to each local candidate of the peer once the start delay passed (two
//! peers behind one NAT that does not hairpin meet at their local
//! addresses): connects like any other, each of which ends only at a
//! peer proving the key asked for. A punch that reaches it from another
//! address names the other side's mapping toward it (a NAT that maps per
//! destination): it connects there too, and keeps the first connection
//! that completes, releasing the others. As the side asked for, it sends
//! punches toward the asker's address on a short schedule, so that its own
//! NAT lets the asker's intro in; the connection then arrives at `accept`
//! as any other.
//!
//! When no connect completed `fallback_after` after they started
//! ([`RelayConfig`](crate::RelayConfig)), or all of them failed, the asker
//! asks the rendezvous to relay (`relay`, `relayed`): the relayed connect
//! is one more of the introduction's connects, and the first to complete
//! still wins. [`PathPolicy`] can rule either way out.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use rand_core::RngCore;
use rustc_hash::{FxHashMap, FxHashSet};
use tern_wire::{
    Candidates, ConnectVia, Introduce, IntroductionRefused, KeyFingerprint, MAX_CANDIDATES,
    MAX_START_DELAY, PublicIdentity, RefusalReason, Register, RelayRequest,
};

mod candidates;
mod fallback;
mod punch;

use super::{ConnectionHandle, Endpoint};
#[cfg(doc)]
use crate::EndpointConfig;
use crate::Event;
use crate::connection::signals::Signal;

/// When the side asked for punches, after its start: a few in the first
/// second, spaced out, so that one lost punch or a late intro still meets
/// an open filter.
const PUNCH_SCHEDULE: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];

/// How long the side asked for waits for the asker's punch to have left
/// before it punches, and the asker for the first punch to have left before
/// its intro goes: the one-way times are estimates (half round trips).
const PUNCH_LEAD: Duration = Duration::from_millis(10);

/// Introductions held at once; past it a new one is dropped (and counted).
const MAX_INTRODUCTIONS: usize = 64;

/// Introductions one rendezvous may have this side take part in at once,
/// so that one rendezvous cannot take every place (and have this side
/// punch toward 64 addresses of its choosing).
const MAX_INTRODUCTIONS_PER_RENDEZVOUS: usize = MAX_INTRODUCTIONS / 4;

/// Connects one introduction may start: the address given, the peer's
/// local candidates, and a few addresses punches came from.
const MAX_ATTEMPTS: usize = 1 + MAX_CANDIDATES + 3;

/// How long an introduction that started no connect (or the punching side's)
/// is kept.
const INTRODUCTION_LIFETIME: Duration = Duration::from_secs(10);

/// Which paths [`Endpoint::connect_via_with`] may take to the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PathPolicy {
    /// Direct where the NATs allow it; through the rendezvous's relay
    /// when no direct connect completed in time (the default).
    #[default]
    DirectThenRelay,
    /// Direct only: without one, the introduction fails.
    DirectOnly,
    /// Through the relay at once, without hole punching.
    RelayOnly,
}

/// Why `connect_via` could not ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectViaError {
    /// The rendezvous handle names no open connection.
    #[error("no such connection")]
    NoConnection,
    /// As many introductions are pending as the endpoint holds.
    #[error("too many introductions pending")]
    TooMany,
}

/// One introduction this side takes part in.
#[derive(Debug)]
struct Introduction {
    /// The connection to the rendezvous that made it.
    rendezvous: u32,
    peer: KeyFingerprint,
    role: Role,
    /// When it is dropped if no connect of its own is still running.
    expires: Instant,
}

#[derive(Debug)]
enum Role {
    /// This side asked: it connects.
    Initiator {
        key: PublicIdentity,
        address: SocketAddr,
        /// The peer's local addresses, connected to beside `address`.
        candidates: Candidates,
        /// When the first connect starts; `None` once it did.
        start_at: Option<Instant>,
        /// Connects started, with their addresses.
        attempts: Vec<(SocketAddr, u32)>,
        won: bool,
        /// Whether the punch of small TTL toward `address` is sent (or
        /// none is to be, see [`EndpointConfig::punch_ttl`]).
        opened: bool,
        fallback: Fallback,
    },
    /// This side was asked for: it punches toward the asker.
    Target {
        to: SocketAddr,
        /// The asker's local addresses, punched toward beside `to`.
        candidates: Candidates,
        start: Instant,
        /// Punches sent: one per address at each moment of
        /// `PUNCH_SCHEDULE`, so at most `PUNCH_SCHEDULE.len()` times
        /// `1 + MAX_CANDIDATES`.
        sent: usize,
    },
}

/// Where the asker is with the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fallback {
    /// It does not ask for one.
    Never,
    /// It asks at this moment if no connect completed by then (or as soon
    /// as all failed).
    At(Instant),
    /// It asked; the grant starts one more connect.
    Asked,
    /// The relayed connect started.
    Granted,
}

/// The endpoint's rendezvous state, on both sides.
#[derive(Debug, Default)]
pub(super) struct Rendezvous {
    /// As a rendezvous: registered peers by fingerprint, and back.
    registered: HashMap<KeyFingerprint, u32>,
    registered_as: FxHashMap<u32, (KeyFingerprint, Candidates)>,
    /// As a rendezvous: introductions asked for per connection in the
    /// current one-second window.
    asks: FxHashMap<u32, (Instant, u32)>,
    /// Connections to rendezvous this side registered with.
    registered_with: FxHashSet<u32>,
    /// Introductions (or relays) asked for and not yet answered: the
    /// rendezvous asked, the key, and the paths it may take.
    asked: HashMap<KeyFingerprint, (u32, PublicIdentity, PathPolicy)>,
    introductions: HashMap<[u8; 8], Introduction>,
    /// The introduction each connect started by one belongs to.
    attempts: FxHashMap<u32, [u8; 8]>,
    /// The latest time the endpoint was given, for releasing losing
    /// connects from `flush`, which has none.
    latest: Option<Instant>,
}

impl Rendezvous {
    /// The next moment something is due: a connect to start, a punch, an
    /// introduction to drop.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.introductions
            .values()
            .filter_map(|intro| match &intro.role {
                // Once started, its connects keep their own time.
                Role::Initiator {
                    start_at,
                    fallback,
                    attempts,
                    ..
                } => match fallback {
                    Fallback::At(at) => Some(start_at.map_or(*at, |start| start.min(*at))),
                    Fallback::Asked if attempts.is_empty() => Some(intro.expires),
                    _ => *start_at,
                },
                role @ Role::Target { start, .. } => Some(
                    role.next_punch()
                        .map_or(intro.expires, |(offset, _)| *start + offset),
                ),
            })
            .min()
    }

    /// Whether connection `index` is a connect an introduction started.
    pub(super) fn is_attempt(&self, index: u32) -> bool {
        self.attempts.contains_key(&index)
    }

    /// The connection registered under `peer`.
    pub(super) fn registered(&self, peer: &KeyFingerprint) -> Option<u32> {
        self.registered.get(peer).copied()
    }

    /// The address this side punches toward for `peer`, introduced by the
    /// rendezvous on `rendezvous`: the peer's direct address.
    pub(super) fn punching_toward(
        &self,
        rendezvous: u32,
        peer: &KeyFingerprint,
    ) -> Option<SocketAddr> {
        self.introductions
            .values()
            .find_map(|intro| match intro.role {
                Role::Target { to, .. }
                    if intro.rendezvous == rendezvous && intro.peer == *peer =>
                {
                    Some(to)
                }
                _ => None,
            })
    }
}

impl Endpoint {
    /// Asks the rendezvous on connection `rendezvous` to introduce this
    /// side to whoever asks for its key (this side must have proved its
    /// identity on that connection, which it does by default). Returns
    /// whether the connection is open.
    pub fn register(&mut self, rendezvous: ConnectionHandle) -> bool {
        let Some(connection) = self.connections.get_mut(rendezvous.0) else {
            return false;
        };
        connection.send_signal(Signal::Register(Register {
            candidates: self.config.local_candidates,
        }));
        self.rendezvous.registered_with.insert(rendezvous.0);
        self.touch(rendezvous.0);
        true
    }

    /// Asks the rendezvous on connection `rendezvous` to introduce this
    /// side to the peer holding `peer`. The outcome comes as an event on
    /// the rendezvous connection: [`Event::Introduced`] with the
    /// connection to the peer, once one completed (it proved `peer`), or
    /// [`Event::IntroductionFailed`]. Direct where the NATs allow it,
    /// relayed otherwise ([`PathPolicy::DirectThenRelay`]).
    pub fn connect_via(
        &mut self,
        rendezvous: ConnectionHandle,
        peer: &PublicIdentity,
    ) -> Result<(), ConnectViaError> {
        self.connect_via_with(rendezvous, peer, PathPolicy::default())
    }

    /// [`connect_via`](Self::connect_via), on the paths `policy` allows.
    pub fn connect_via_with(
        &mut self,
        rendezvous: ConnectionHandle,
        peer: &PublicIdentity,
        policy: PathPolicy,
    ) -> Result<(), ConnectViaError> {
        if self.rendezvous.asked.len() + self.rendezvous.introductions.len() >= MAX_INTRODUCTIONS {
            return Err(ConnectViaError::TooMany);
        }
        let connection = self
            .connections
            .get_mut(rendezvous.0)
            .ok_or(ConnectViaError::NoConnection)?;
        let fingerprint = peer.fingerprint();
        connection.send_signal(match policy {
            PathPolicy::RelayOnly => Signal::RelayRequest(RelayRequest { peer: fingerprint }),
            _ => Signal::ConnectVia(ConnectVia { peer: fingerprint }),
        });
        self.rendezvous
            .asked
            .insert(fingerprint, (rendezvous.0, peer.clone(), policy));
        self.touch(rendezvous.0);
        Ok(())
    }

    /// A rendezvous frame from connection `index`.
    pub(super) fn on_signal(&mut self, now: Instant, index: u32, signal: Signal) {
        self.rendezvous.latest = Some(now);
        match signal {
            Signal::Register(register) => self.on_register(index, register.candidates),
            Signal::ConnectVia(ask) => self.on_connect_via(now, index, ask.peer),
            Signal::Introduce(intro) => self.on_introduce(now, index, intro),
            Signal::Refused(refused) => match self.rendezvous.asked.get(&refused.peer) {
                Some(&(from, _, _)) if from == index => {
                    self.rendezvous.asked.remove(&refused.peer);
                    self.introduction_failed(index, refused.peer, Some(refused.reason));
                }
                _ => self.stats.signals_unexpected += 1,
            },
            Signal::RelayRequest(ask) => self.on_relay_request(now, index, ask.peer),
            Signal::RelayGrant(grant) => self.on_relay_grant(now, index, grant),
            Signal::RelayRefused(refused) => self.on_relay_refused(index, refused),
        }
    }

    /// Whether this side registered with the rendezvous on `rendezvous`.
    pub(super) fn registered_with(&self, rendezvous: u32) -> bool {
        self.rendezvous.registered_with.contains(&rendezvous)
    }

    pub(super) fn peer_fingerprint(&self, index: u32) -> Option<KeyFingerprint> {
        let connection = self.connections.get(index)?;
        connection.peer_identity().map(PublicIdentity::fingerprint)
    }

    fn refuse_introduction(&mut self, index: u32, peer: KeyFingerprint, reason: RefusalReason) {
        if let Some(connection) = self.connections.get_mut(index) {
            connection.send_signal(Signal::Refused(IntroductionRefused { peer, reason }));
            self.touch(index);
        }
        self.stats.introductions_refused += 1;
    }

    fn on_register(&mut self, index: u32, candidates: Candidates) {
        let Some(fingerprint) = self.peer_fingerprint(index) else {
            let nobody = KeyFingerprint([0; tern_wire::FINGERPRINT_LEN]);
            self.refuse_introduction(index, nobody, RefusalReason::NotIdentified);
            return;
        };
        // The newest connection of a key is the one to introduce.
        if let Some(old) = self.rendezvous.registered.insert(fingerprint, index)
            && old != index
        {
            self.rendezvous.registered_as.remove(&old);
        }
        self.rendezvous
            .registered_as
            .insert(index, (fingerprint, candidates));
    }

    fn on_connect_via(&mut self, now: Instant, asker: u32, peer: KeyFingerprint) {
        let Some(asker_fingerprint) = self.peer_fingerprint(asker) else {
            self.refuse_introduction(asker, peer, RefusalReason::NotIdentified);
            return;
        };
        if !self.may_ask(now, asker) {
            self.refuse_introduction(asker, peer, RefusalReason::RateLimited);
            return;
        }
        let Some(target) = self.registered_peer(asker, &peer) else {
            self.refuse_introduction(asker, peer, RefusalReason::UnknownPeer);
            return;
        };
        let (Some(asking), Some(asked)) = (
            self.connections
                .get(asker)
                .map(|c| (c.remote(), c.smoothed_rtt())),
            self.connections
                .get(target)
                .map(|c| (c.remote(), c.smoothed_rtt())),
        ) else {
            return;
        };
        let candidates_of = |index| {
            self.rendezvous
                .registered_as
                .get(&index)
                .map(|(_, candidates)| *candidates)
                .unwrap_or_default()
        };
        let (asker_candidates, target_candidates) = (candidates_of(asker), candidates_of(target));
        let mut nonce = [0; 8];
        self.rng.fill_bytes(&mut nonce);
        // Each Introduce arrives half its round trip from now. The asker
        // then sends a punch of small TTL that opens its NAT toward the side
        // asked for; that side starts punching a lead later, into the open
        // mapping (a punch of it arriving first would leave state in the
        // asker's NAT that moves the asker's mapping); the asker's intro goes
        // a lead after the first punch, so it never meets a closed filter.
        let (asker_way, target_way) = (asking.1 / 2, asked.1 / 2);
        let target_delay = (asker_way.saturating_sub(target_way) + PUNCH_LEAD).min(MAX_START_DELAY);
        let start_delay = ((target_way + target_delay).saturating_sub(asker_way) + PUNCH_LEAD)
            .min(MAX_START_DELAY);
        let to_target = Introduce {
            nonce,
            peer: asker_fingerprint,
            initiator: false,
            start_delay: target_delay,
            address: asking.0,
            candidates: asker_candidates,
        };
        let to_asker = Introduce {
            nonce,
            peer,
            initiator: true,
            start_delay,
            address: asked.0,
            candidates: target_candidates,
        };
        for (index, intro) in [(target, to_target), (asker, to_asker)] {
            if let Some(connection) = self.connections.get_mut(index) {
                connection.send_signal(Signal::Introduce(intro));
                self.touch(index);
            }
        }
        self.stats.introductions_made += 1;
    }

    /// Whether connection `asker` may ask for one more introduction or
    /// relay this second ([`EndpointConfig::introductions_per_second`]);
    /// counts the ask if so.
    pub(super) fn may_ask(&mut self, now: Instant, asker: u32) -> bool {
        let per_second = self.config.introductions_per_second;
        let window = self.rendezvous.asks.entry(asker).or_insert((now, 0));
        if now.saturating_duration_since(window.0) >= Duration::from_secs(1) {
            *window = (now, 0);
        }
        if window.1 >= per_second {
            return false;
        }
        window.1 += 1;
        true
    }

    fn on_introduce(&mut self, now: Instant, from: u32, intro: Introduce) {
        if self.rendezvous.introductions.contains_key(&intro.nonce) {
            return; // A repeat (its first packet's acknowledgement was lost).
        }
        let from_here = self
            .rendezvous
            .introductions
            .values()
            .filter(|held| held.rendezvous == from)
            .count();
        if self.rendezvous.introductions.len() >= MAX_INTRODUCTIONS
            || from_here >= MAX_INTRODUCTIONS_PER_RENDEZVOUS
        {
            self.stats.signals_unexpected += 1;
            return;
        }
        let start = now + intro.start_delay;
        let candidates = self.usable_candidates(&intro);
        let role = if intro.initiator {
            let policy = match self.rendezvous.asked.get(&intro.peer) {
                Some(&(rendezvous, _, policy))
                    if rendezvous == from && policy != PathPolicy::RelayOnly =>
                {
                    policy
                }
                _ => {
                    self.stats.signals_unexpected += 1;
                    return;
                }
            };
            let Some((_, key, _)) = self.rendezvous.asked.remove(&intro.peer) else {
                return;
            };
            let fallback = match policy {
                PathPolicy::DirectOnly => Fallback::Never,
                _ => Fallback::At(start + self.config.relay.fallback_after),
            };
            Role::Initiator {
                key,
                address: intro.address,
                candidates,
                start_at: Some(start),
                attempts: Vec::new(),
                won: false,
                opened: self.config.punch_ttl.is_none(),
                fallback,
            }
        } else {
            if !self.rendezvous.registered_with.contains(&from) {
                self.stats.signals_unexpected += 1;
                return;
            }
            Role::Target {
                to: intro.address,
                candidates,
                start,
                sent: 0,
            }
        };
        let introduction = Introduction {
            rendezvous: from,
            peer: intro.peer,
            role,
            expires: start + INTRODUCTION_LIFETIME,
        };
        self.rendezvous
            .introductions
            .insert(intro.nonce, introduction);
        self.handle_rendezvous_timeout(now);
    }

    /// Starts one of introduction `nonce`'s connects, to `to`; returns its
    /// connection.
    fn start_attempt(
        &mut self,
        now: Instant,
        nonce: [u8; 8],
        to: SocketAddr,
        key: &PublicIdentity,
    ) -> Option<u32> {
        let Ok(handle) = self.connect(now, to, key) else {
            // No room for it: if nothing else runs, the introduction is over.
            if let Some(Introduction {
                rendezvous,
                peer,
                role: Role::Initiator { attempts, .. },
                ..
            }) = self.rendezvous.introductions.get(&nonce)
                && attempts.is_empty()
            {
                let (rendezvous, peer) = (*rendezvous, *peer);
                self.rendezvous.introductions.remove(&nonce);
                self.introduction_failed(rendezvous, peer, None);
            }
            return None;
        };
        if let Some(Introduction {
            role: Role::Initiator { attempts, .. },
            ..
        }) = self.rendezvous.introductions.get_mut(&nonce)
        {
            attempts.push((to, handle.0));
        }
        self.rendezvous.attempts.insert(handle.0, nonce);
        Some(handle.0)
    }

    /// Starts the connects whose delay passed, and drops introductions that
    /// are over.
    pub(super) fn handle_rendezvous_timeout(&mut self, now: Instant) {
        self.rendezvous.latest = Some(now);
        self.expire_relayed_pairs(now);
        self.relay.release(now);
        self.expire_grants(now);
        self.probe_direct_paths(now);
        let (mut starts, mut expired, mut relays, mut failed) = (vec![], vec![], vec![], vec![]);
        for (nonce, intro) in &mut self.rendezvous.introductions {
            match &mut intro.role {
                Role::Initiator {
                    key,
                    address,
                    candidates,
                    start_at,
                    fallback,
                    attempts,
                    ..
                } => {
                    if start_at.is_some_and(|at| at <= now) {
                        *start_at = None;
                        for to in std::iter::once(*address).chain(candidates.iter()) {
                            starts.push((*nonce, to, key.clone()));
                        }
                    } else if start_at.is_some() && intro.expires <= now {
                        expired.push(*nonce);
                    }
                    match fallback {
                        Fallback::At(at) if *at <= now => relays.push(*nonce),
                        Fallback::Asked if attempts.is_empty() && intro.expires <= now => {
                            failed.push((*nonce, intro.rendezvous, intro.peer));
                        }
                        _ => {}
                    }
                }
                role @ Role::Target { .. } => {
                    if role.next_punch().is_none() && intro.expires <= now {
                        expired.push(*nonce);
                    }
                }
            }
        }
        for (nonce, address, key) in starts {
            // One that found no room may have ended the introduction.
            if self.rendezvous.introductions.contains_key(&nonce) {
                self.start_attempt(now, nonce, address, &key);
            }
        }
        for nonce in expired {
            self.rendezvous.introductions.remove(&nonce);
        }
        for nonce in relays {
            self.ask_relay(now, nonce);
        }
        for (nonce, rendezvous, peer) in failed {
            self.rendezvous.introductions.remove(&nonce);
            self.introduction_failed(rendezvous, peer, None);
        }
    }

    /// A connect an introduction started connected (`true`) or closed.
    pub(super) fn on_attempt_outcome(&mut self, index: u32, connected: bool) {
        let Some(nonce) = self.rendezvous.attempts.remove(&index) else {
            return;
        };
        let Some(intro) = self.rendezvous.introductions.get_mut(&nonce) else {
            return;
        };
        let Role::Initiator {
            attempts,
            won,
            fallback,
            ..
        } = &mut intro.role
        else {
            return;
        };
        attempts.retain(|&(_, attempt)| attempt != index);
        let relay_next = matches!(fallback, Fallback::At(_) | Fallback::Asked);
        let (rendezvous, peer) = (intro.rendezvous, intro.peer);
        if connected && !*won {
            *won = true;
            let losers: Vec<u32> = attempts.drain(..).map(|(_, i)| i).collect();
            self.rendezvous.introductions.remove(&nonce);
            if let Some(now) = self.rendezvous.latest {
                for loser in losers {
                    self.rendezvous.attempts.remove(&loser);
                    self.release(now, ConnectionHandle(loser), 0);
                }
            }
            self.events.push_back((
                ConnectionHandle(rendezvous),
                Event::Introduced {
                    peer,
                    connection: ConnectionHandle(index),
                },
            ));
        } else if attempts.is_empty() && !*won {
            // Every direct connect failed: the relay is next, if allowed.
            match (relay_next, self.rendezvous.latest) {
                (true, Some(now)) => self.ask_relay(now, nonce),
                _ => {
                    self.rendezvous.introductions.remove(&nonce);
                    self.introduction_failed(rendezvous, peer, None);
                }
            }
        }
    }

    fn introduction_failed(
        &mut self,
        rendezvous: u32,
        peer: KeyFingerprint,
        reason: Option<RefusalReason>,
    ) {
        self.events.push_back((
            ConnectionHandle(rendezvous),
            Event::IntroductionFailed { peer, reason },
        ));
    }

    /// Connection `index` was freed: it is neither registered nor a
    /// rendezvous any more.
    pub(super) fn forget_in_rendezvous(&mut self, index: u32) {
        let state = &mut self.rendezvous;
        if let Some((fingerprint, _)) = state.registered_as.remove(&index) {
            state.registered.remove(&fingerprint);
        }
        state.asks.remove(&index);
        state.registered_with.remove(&index);
        state
            .asked
            .retain(|_, (rendezvous, _, _)| *rendezvous != index);
        self.forget_in_relay(index);
        self.forget_in_relayed(index);
    }
}
