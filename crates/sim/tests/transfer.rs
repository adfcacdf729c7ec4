//! A gigabyte between two nodes over a delayed bottleneck, in virtual time:
//! the simulator is never what makes a protocol test slow.

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use tern_sim::{Bottleneck, LinkConfig, Node, Seed, Sim, SimConfig, Transmit};

const DATAGRAM: usize = 1400;
const HEADER: usize = 8;
/// Datagrams per GSO run the sender hands over at once.
const RUN: usize = 16;
/// Datagrams in flight.
const WINDOW: u64 = 1024;
/// The receiver acknowledges every this many datagrams.
const ACK_EVERY: u64 = 8;

/// The payload after each datagram's 8-byte number: the same for all, so
/// checking it is a comparison, not a hash over a gigabyte.
fn body() -> Vec<u8> {
    (0..DATAGRAM - HEADER).map(|i| (i * 7 + 3) as u8).collect()
}

struct Sender {
    to: SocketAddr,
    total: u64,
    sent: u64,
    acked: u64,
    body: Vec<u8>,
}

struct Receiver {
    from: Option<SocketAddr>,
    expected: u64,
    body: Vec<u8>,
    damaged: u64,
    ack_due: bool,
}

enum End {
    Sender(Sender),
    Receiver(Receiver),
}

impl Node for End {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
        match self {
            End::Sender(s) => {
                if let Ok(head) = <[u8; 8]>::try_from(&d[..d.len().min(8)]) {
                    s.acked = s.acked.max(u64::from_be_bytes(head));
                }
            }
            End::Receiver(r) => {
                r.from = Some(from);
                let number = d
                    .get(..HEADER)
                    .and_then(|h| <[u8; 8]>::try_from(h).ok())
                    .map(u64::from_be_bytes);
                if number != Some(r.expected) || d[HEADER..] != r.body[..] {
                    r.damaged += 1;
                }
                r.expected += 1;
                if r.expected % ACK_EVERY == 0 {
                    r.ack_due = true;
                }
            }
        }
    }

    fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<Transmit> {
        match self {
            End::Sender(s) => {
                let room = (s.acked + WINDOW)
                    .saturating_sub(s.sent)
                    .min(s.total - s.sent);
                let n = room.min(RUN as u64) as usize;
                if n == 0 {
                    return None;
                }
                for (i, datagram) in buf.chunks_mut(DATAGRAM).take(n).enumerate() {
                    datagram[..HEADER].copy_from_slice(&(s.sent + i as u64).to_be_bytes());
                    datagram[HEADER..].copy_from_slice(&s.body);
                }
                s.sent += n as u64;
                Some(Transmit {
                    source: None,
                    destination: s.to,
                    len: n * DATAGRAM,
                    segment_size: Some(DATAGRAM),
                })
            }
            End::Receiver(r) if r.ack_due => {
                r.ack_due = false;
                buf[..8].copy_from_slice(&r.expected.to_be_bytes());
                Some(Transmit {
                    source: None,
                    destination: r.from?,
                    len: 8,
                    segment_size: None,
                })
            }
            End::Receiver(_) => None,
        }
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

#[test]
fn a_gigabyte_crosses_a_delayed_bottleneck_intact_in_virtual_time() {
    let seed = Seed::from_env_or(21);
    let total = (1u64 << 30).div_ceil(DATAGRAM as u64);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        bottleneck: Some(Bottleneck {
            bits_per_second: 10_000_000_000,
            queue_bytes: 4 << 20,
        }),
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(SimConfig::seeded(seed.value()).with_default_link(link));
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1".parse().expect("a"),
        "10.0.0.2:2".parse().expect("b"),
    );
    let sender = Sender {
        to: b,
        total,
        sent: 0,
        acked: 0,
        body: body(),
    };
    let receiver = Receiver {
        from: None,
        expected: 0,
        body: body(),
        damaged: 0,
        ack_due: false,
    };
    sim.add_node(End::Sender(sender), &[a]).expect("address");
    let rx = sim
        .add_node(End::Receiver(receiver), &[b])
        .expect("address");
    let done = |sim: &Sim<End>| matches!(sim.node(rx), End::Receiver(r) if r.expected == total);
    sim.run_until(done, Duration::from_secs(60))
        .expect("the transfer finishes");
    let End::Receiver(r) = sim.node(rx) else {
        panic!("the receiver");
    };
    assert_eq!(r.damaged, 0);
    // 1 GiB at 10 Gbit/s is about 0.86 s of link time; the window of 1024
    // datagrams over a 2 ms round trip allows ~5.7 Gbit/s, so ~1.5 s.
    let elapsed = sim.elapsed();
    assert!(
        elapsed > Duration::from_millis(850) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    // Memory follows what is in flight, not what has passed: buffers for
    // the window, one run ahead and the acknowledgements, not 767 000.
    let bound = (WINDOW + RUN as u64 + WINDOW / ACK_EVERY) as usize;
    assert!(
        sim.datagram_buffers() <= bound,
        "{}",
        sim.datagram_buffers()
    );
}
