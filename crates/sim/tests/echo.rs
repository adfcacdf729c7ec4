//! A toy echo node shows the trait is usable without any Tern crate.

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use tern_sim::{LinkConfig, Node, Sim, SimConfig, Transmit};

/// Sends a ping every second until it has three answers; remembers each
/// round trip.
struct Pinger {
    server: SocketAddr,
    next_ping: Option<Instant>,
    due: bool,
    sent_at: Option<Instant>,
    round_trips: Vec<Duration>,
}

/// Answers every datagram with the same bytes.
struct Echo {
    pending: Vec<(SocketAddr, Vec<u8>)>,
}

enum Peer {
    Pinger(Pinger),
    Echo(Echo),
}

impl Node for Peer {
    fn handle_datagram(
        &mut self,
        now: Instant,
        _: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    ) {
        match self {
            Peer::Echo(echo) => echo.pending.push((from, datagram.to_vec())),
            Peer::Pinger(p) => {
                if let Some(sent) = p.sent_at.take() {
                    p.round_trips.push(now.saturating_duration_since(sent));
                }
            }
        }
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let (to, bytes): (SocketAddr, &[u8]) = match self {
            Peer::Echo(echo) => {
                let (to, bytes) = echo.pending.pop()?;
                buf[..bytes.len()].copy_from_slice(&bytes);
                return Some(Transmit {
                    source: None,
                    destination: to,
                    len: bytes.len(),
                    segment_size: None,
                });
            }
            Peer::Pinger(p) if p.due => {
                p.due = false;
                p.sent_at = Some(now);
                (p.server, b"ping")
            }
            Peer::Pinger(_) => return None,
        };
        buf[..bytes.len()].copy_from_slice(bytes);
        Some(Transmit {
            source: None,
            destination: to,
            len: bytes.len(),
            segment_size: None,
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        match self {
            Peer::Pinger(p) if p.round_trips.len() < 3 => p.next_ping,
            _ => None,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Peer::Pinger(p) = self {
            p.due = true;
            p.next_ping = Some(now + Duration::from_secs(1));
        }
    }
}

#[test]
fn an_echo_over_ipv6_answers_in_one_round_trip() {
    let (client, server): (SocketAddr, SocketAddr) = (
        "[2001:db8::1]:5000".parse().expect("address"),
        "[2001:db8::2]:7".parse().expect("address"),
    );
    let link = LinkConfig {
        delay: Duration::from_millis(40),
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(SimConfig::seeded(1).with_default_link(link));
    let pinger = Pinger {
        server,
        next_ping: Some(sim.now()),
        due: false,
        sent_at: None,
        round_trips: Vec::new(),
    };
    let id = sim
        .add_node(Peer::Pinger(pinger), &[client])
        .expect("address");
    sim.add_node(
        Peer::Echo(Echo {
            pending: Vec::new(),
        }),
        &[server],
    )
    .expect("address");
    while sim.step() {}
    let Peer::Pinger(p) = sim.node(id) else {
        panic!("the pinger");
    };
    assert_eq!(p.round_trips, [Duration::from_millis(80); 3]);
    assert_eq!(sim.elapsed(), Duration::from_millis(2080));
}
