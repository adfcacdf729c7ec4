//! What a connection does when its peer proves it receives at a new
//! address: the move is complete, and what measured the old path starts
//! again.

use quanta::Instant;
use tern_congestion::Controller;

use crate::connection::Connection;

impl Connection {
    /// The path the connection moved to answered a challenge at `now`.
    ///
    /// RFC 9000 §9.4: on "confirming a peer's ownership of its new
    /// address", the congestion controller and the RTT estimator start
    /// again from their initial values, and packets sent on the old path
    /// no longer count for either. The section lets a port-only change (a
    /// NAT rebinding) keep them; Tern resets on every move, because a
    /// rebinding can also be a new route, and LEDBAT with the old path's
    /// base delay reads a longer path as a standing queue and holds its
    /// minimum window for minutes, where a fresh slow start costs a few
    /// round trips.
    pub(in crate::connection) fn on_path_validated(&mut self, now: Instant) {
        if self.previous_path.take().is_some() {
            self.stats.rare().migrations += 1;
        }
        self.loss.on_path_change(now);
        if let Some(transfer) = self.transfer.as_mut() {
            transfer.controller.on_path_change(now);
        }
    }
}
