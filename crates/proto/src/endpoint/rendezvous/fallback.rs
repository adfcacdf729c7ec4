//! The asker's relay fallback: when to ask the rendezvous to relay, and
//! the relayed connect its grant starts (one more of the introduction's
//! connects: the first to complete still wins).

use quanta::Instant;
use rand_core::RngCore;
use tern_wire::{KeyFingerprint, RelayRefused, RelayRequest};

use super::{Fallback, INTRODUCTION_LIFETIME, Introduction, PathPolicy, Role};
use crate::connection::signals::Signal;
use crate::endpoint::Endpoint;

impl Endpoint {
    /// A RelayRefused from the rendezvous on `from`: the introduction
    /// that asked ends if no direct connect still runs.
    pub(super) fn on_relay_refused(&mut self, from: u32, refused: RelayRefused) {
        if let Some(&(rendezvous, _, PathPolicy::RelayOnly)) =
            self.rendezvous.asked.get(&refused.peer)
            && rendezvous == from
        {
            self.rendezvous.asked.remove(&refused.peer);
            return self.introduction_failed(from, refused.peer, Some(refused.reason));
        }
        let Some(nonce) = self.asking_relay(from, &refused.peer) else {
            self.stats.signals_unexpected += 1;
            return;
        };
        let Some(intro) = self.rendezvous.introductions.get_mut(&nonce) else {
            return;
        };
        if let Role::Initiator {
            attempts, fallback, ..
        } = &mut intro.role
        {
            *fallback = Fallback::Never;
            if attempts.is_empty() {
                self.rendezvous.introductions.remove(&nonce);
                self.introduction_failed(from, refused.peer, Some(refused.reason));
            }
        }
    }

    /// The introduction with `peer` through `rendezvous` that asked for a
    /// relay and has no grant yet.
    fn asking_relay(&self, rendezvous: u32, peer: &KeyFingerprint) -> Option<[u8; 8]> {
        self.rendezvous
            .introductions
            .iter()
            .find_map(|(nonce, intro)| match intro.role {
                Role::Initiator {
                    fallback: Fallback::Asked,
                    ..
                } if intro.rendezvous == rendezvous && intro.peer == *peer => Some(*nonce),
                _ => None,
            })
    }

    /// Whether this side asked the rendezvous on `rendezvous` for a relay
    /// toward `peer` and waits for the grant.
    pub(in crate::endpoint) fn relay_asked(&self, rendezvous: u32, peer: &KeyFingerprint) -> bool {
        let relay_only = matches!(
            self.rendezvous.asked.get(peer),
            Some(&(r, _, PathPolicy::RelayOnly)) if r == rendezvous
        );
        relay_only || self.asking_relay(rendezvous, peer).is_some()
    }

    /// Starts the relayed connect to `peer` through the rendezvous on
    /// `rendezvous`, carried on `slot`.
    pub(in crate::endpoint) fn connect_relayed(
        &mut self,
        now: Instant,
        rendezvous: u32,
        peer: KeyFingerprint,
        slot: u32,
    ) {
        let Some(relay) = self.relay_address(rendezvous) else {
            return;
        };
        let nonce = match self.asking_relay(rendezvous, &peer) {
            Some(nonce) => nonce,
            None => {
                // Relay only: the introduction starts now.
                let Some((_, key, _)) = self.rendezvous.asked.remove(&peer) else {
                    return;
                };
                let mut nonce = [0; 8];
                self.rng.fill_bytes(&mut nonce);
                let role = Role::Initiator {
                    key,
                    address: relay,
                    candidates: tern_wire::Candidates::default(),
                    start_at: None,
                    attempts: Vec::new(),
                    won: false,
                    // No punch: nothing is to go direct.
                    opened: true,
                    fallback: Fallback::Asked,
                };
                let introduction = Introduction {
                    rendezvous,
                    peer,
                    role,
                    expires: now + INTRODUCTION_LIFETIME,
                };
                self.rendezvous.introductions.insert(nonce, introduction);
                nonce
            }
        };
        let Some(Introduction {
            role:
                Role::Initiator {
                    key,
                    fallback,
                    address,
                    ..
                },
            ..
        }) = self.rendezvous.introductions.get_mut(&nonce)
        else {
            return;
        };
        *fallback = Fallback::Granted;
        let (key, address) = (key.clone(), *address);
        if address != relay {
            // The address the introduction named: probed while relayed.
            self.set_candidate(slot, address);
        }
        if let Some(index) = self.start_attempt(now, nonce, relay, &key) {
            self.carry(now, index, slot);
        }
    }

    /// Asks the rendezvous of introduction `nonce` to relay, if it still
    /// may.
    pub(super) fn ask_relay(&mut self, now: Instant, nonce: [u8; 8]) {
        let Some(intro) = self.rendezvous.introductions.get_mut(&nonce) else {
            return;
        };
        let Role::Initiator { fallback, won, .. } = &mut intro.role else {
            return;
        };
        if *won || !matches!(fallback, Fallback::At(_)) {
            return;
        }
        *fallback = Fallback::Asked;
        intro.expires = now + INTRODUCTION_LIFETIME;
        let (rendezvous, peer) = (intro.rendezvous, intro.peer);
        if let Some(connection) = self.connections.get_mut(rendezvous) {
            connection.send_signal(Signal::RelayRequest(RelayRequest { peer }));
            self.touch(rendezvous);
        }
    }
}
