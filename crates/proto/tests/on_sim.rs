//! Any tern-proto [`Node`] runs in tern-sim through one small adapter
//! (`support::OnSim`): the same state machine the driver runs on a socket
//! runs in virtual time, under loss and delay, reproducibly. This test
//! checks the adapter with a toy node.

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
mod support;

use support::OnSim;
use tern_proto::{Node, Transmit, TransmitLimits};
use tern_sim::{LinkConfig, Seed, Sim, SimConfig};

/// Sends numbered datagrams in runs as the limits allow until `total`, and
/// re-sends on a timer any number the peer has not confirmed; the peer
/// confirms the highest contiguous number it holds.
struct Reliable {
    peer: SocketAddr,
    total: u64,
    next: u64,
    confirmed: u64,
    retry_at: Option<Instant>,
    /// Receiver side: numbers seen, and the contiguous prefix.
    seen: Vec<bool>,
    contiguous: u64,
    confirm_due: bool,
}

impl Reliable {
    fn new(peer: SocketAddr, total: u64) -> Self {
        Self {
            peer,
            total,
            next: 0,
            confirmed: 0,
            retry_at: None,
            seen: vec![false; total as usize],
            contiguous: 0,
            confirm_due: false,
        }
    }
}

const RETRY: Duration = Duration::from_millis(30);

impl Node for Reliable {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, d: &mut [u8]) {
        let Some(number) = d
            .get(1..9)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
        else {
            return;
        };
        if d[0] == 0 {
            if let Some(slot) = self.seen.get_mut(number as usize) {
                *slot = true;
            }
            while self.seen.get(self.contiguous as usize) == Some(&true) {
                self.contiguous += 1;
            }
            self.confirm_due = true;
        } else {
            self.confirmed = self.confirmed.max(number);
        }
    }

    fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if self.confirm_due {
            self.confirm_due = false;
            buf[0] = 1;
            buf[1..9].copy_from_slice(&self.contiguous.to_be_bytes());
            return Some(Transmit {
                destination: self.peer,
                len: 9,
                segment_size: None,
                ttl: None,
            });
        }
        let window_end = (self.confirmed + 64).min(self.total);
        let n = window_end
            .saturating_sub(self.next)
            .min(limits.max_segments as u64) as usize;
        if n == 0 {
            return None;
        }
        for (i, d) in buf.chunks_mut(100).take(n).enumerate() {
            d[0] = 0;
            d[1..9].copy_from_slice(&(self.next + i as u64).to_be_bytes());
        }
        self.next += n as u64;
        self.retry_at = Some(now + RETRY);
        Some(Transmit {
            destination: self.peer,
            len: n * 100,
            segment_size: Some(100),
            ttl: None,
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.retry_at.filter(|_| self.confirmed < self.total)
    }

    fn handle_timeout(&mut self, now: Instant) {
        // Go back to the first unconfirmed number.
        self.next = self.confirmed;
        self.retry_at = Some(now + RETRY);
    }
}

#[test]
fn a_peer_node_moves_every_datagram_through_a_lossy_simulated_link() {
    let seed = Seed::from_env_or(5);
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1".parse().expect("a"),
        "10.0.0.2:2".parse().expect("b"),
    );
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        loss: 0.05,
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(SimConfig::seeded(seed.value()).with_default_link(link));
    let sender = sim
        .add_node(OnSim(Reliable::new(b, 5_000)), &[a])
        .expect("address");
    let receiver = sim
        .add_node(OnSim(Reliable::new(a, 5_000)), &[b])
        .expect("address");
    sim.run_until(
        |sim| sim.node(sender).0.confirmed == 5_000,
        Duration::from_secs(120),
    )
    .expect("everything confirmed");
    assert_eq!(sim.node(receiver).0.contiguous, 5_000);
    assert!(
        sim.link_stats(sender, receiver).lost > 0,
        "the link did lose datagrams"
    );
}
