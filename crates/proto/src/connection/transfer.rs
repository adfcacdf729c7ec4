//! What sending needs beyond the loss detector's RTT estimate: the
//! congestion controller and the pacer, in one box that a connection gone
//! quiet gives back and builds again, fresh, for its next packet in flight.
//!
//! An idle connection holds one pointer for them instead of about 900
//! bytes (LEDBAT's state, its delay filter and base-delay history on the
//! heap, the pacer's bucket). Starting them again after a quiet period is
//! what the protocol wants anyway: LEDBAT's base delay is not to be
//! trusted after a long silence (RFC 6817 §4.4 lets it be refreshed, and
//! a route may have changed meanwhile), and a window opened by a transfer
//! long over no longer describes the path (RFC 7661's idle restart, RFC
//! 9002 §7.8: a sender that has been idle does not burst a large window).
//! The release waits for the same quiet as the scratch memory (at least a
//! second, never less than a probe timeout), so a connection carrying
//! data keeps them and allocates nothing in its steady state.

use quanta::Instant;
use tern_congestion::{AnyController, Controller, Pacer, PacerConfig, Rtt};

use super::Connection;
use crate::ConnectionConfig;

/// The congestion controller and the pacer of a connection that sends.
#[derive(Debug)]
pub(super) struct Transfer {
    pub(super) controller: AnyController,
    pub(super) pacer: Pacer,
}

impl Transfer {
    /// The machinery for `controller`, with a full pacing burst.
    pub(super) fn new(controller: AnyController, config: &ConnectionConfig) -> Box<Self> {
        let mut pacer_config = PacerConfig::default();
        pacer_config.max_datagram_size = config.max_udp_payload as u64;
        Box::new(Self {
            controller,
            pacer: Pacer::new(pacer_config),
        })
    }

    /// Fresh machinery for a connection of this configuration. Its
    /// congestion parameters were checked when the connection started
    /// (the endpoint made its first controller from them), and the
    /// configuration is immutable since.
    fn fresh(config: &ConnectionConfig) -> Box<Self> {
        let controller = config
            .congestion
            .controller(config.max_udp_payload as u64)
            .expect("the congestion parameters were checked when the connection started");
        Self::new(controller, config)
    }
}

impl Connection {
    /// The congestion controller and pacer, built again if a quiet period
    /// gave them back: for what sends a packet in flight.
    pub(super) fn transfer(&mut self) -> &mut Transfer {
        let config = &self.config;
        self.transfer.get_or_insert_with(|| Transfer::fresh(config))
    }

    /// Gives the congestion controller and pacer back (see the module
    /// documentation), keeping the count of reductions they undid.
    pub(super) fn release_transfer(&mut self) {
        if let Some(transfer) = self.transfer.take() {
            let undone = transfer.controller.undone_reductions();
            if undone > 0 {
                self.stats.rare().undone_reductions += undone;
            }
        }
    }

    /// The congestion window: a fresh controller's while none is held.
    pub(super) fn window(&self) -> u64 {
        self.transfer
            .as_ref()
            .map_or(self.initial_window, |t| t.controller.window())
    }

    /// Whether the controller is in slow start (a fresh one is).
    pub(super) fn in_slow_start(&self) -> bool {
        self.transfer
            .as_ref()
            .is_none_or(|t| t.controller.in_slow_start())
    }

    /// Bytes the pacer lets go back to back: a fresh pacer's full burst
    /// while none is held (nothing paced was sent since it was given back).
    pub(super) fn pacer_available(&self) -> u64 {
        self.transfer
            .as_ref()
            .map_or(u64::MAX, |t| t.pacer.available())
    }

    /// When the pacer lets `bytes` go at the controller's rate.
    pub(super) fn pace(&mut self, now: Instant, rtt: &Rtt, bytes: u64) -> tern_congestion::Take {
        let transfer = self.transfer();
        let rate = transfer.controller.pacing_rate(rtt);
        transfer.pacer.poll(now, rate, bytes)
    }
}
