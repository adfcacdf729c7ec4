//! Local candidates (wire format §5.14): the addresses this side names
//! when it registers, and which of those an Introduce names it tries.

use tern_wire::{Candidates, Introduce};

#[cfg(doc)]
use crate::EndpointConfig;
use crate::endpoint::Endpoint;

impl Endpoint {
    /// This side's local addresses, sent from the next
    /// [`register`](Self::register) on
    /// ([`EndpointConfig::local_candidates`]).
    pub fn set_local_candidates(&mut self, candidates: Candidates) {
        self.config.local_candidates = candidates;
    }

    /// The local candidates of an Introduce this side tries: not a
    /// loopback address (a rendezvous must not have this side connect or
    /// punch to its own host), not one of this side's own (two LANs
    /// numbered alike), nor the observed address again. Those left out
    /// are counted.
    pub(super) fn usable_candidates(&mut self, intro: &Introduce) -> Candidates {
        let own = self.config.local_candidates;
        let mut usable = Candidates::default();
        for candidate in intro.candidates.iter() {
            if candidate.ip().is_loopback()
                || candidate == intro.address
                || own.iter().any(|mine| mine == candidate)
            {
                self.stats.candidates_refused += 1;
            } else {
                usable.push(candidate);
            }
        }
        usable
    }
}
