//! Toy nodes for the tests: a blaster that sends numbered datagrams at a
//! fixed interval, and a sink that records what arrives.

#![allow(dead_code)] // each test file uses part of this module

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use tern_sim::{Node, Transmit};

pub(crate) fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

/// Bytes of a numbered datagram: the number, then bytes that depend on
/// every bit of it, so any flipped bit shows.
pub(crate) fn datagram(seq: u64, len: usize, out: &mut [u8]) {
    let head = seq.to_be_bytes();
    let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let body = (z ^ (z >> 31)).to_le_bytes();
    for (i, b) in out[..len].iter_mut().enumerate() {
        *b = if i < 8 {
            head[i]
        } else {
            body[i % 8] ^ i as u8
        };
    }
}

/// Sends `count` numbered datagrams of `len` bytes to `to`, one every `interval`.
pub(crate) struct Blaster {
    pub to: SocketAddr,
    pub len: usize,
    pub interval: Duration,
    pub count: u64,
    pub sent: u64,
    pub next_at: Option<Instant>,
    due: bool,
    /// Datagrams per transmit, as one run of equal segments (GSO).
    segments: usize,
}

impl Blaster {
    pub(crate) fn new(
        to: SocketAddr,
        len: usize,
        interval: Duration,
        count: u64,
        start: Instant,
    ) -> Self {
        Self {
            to,
            len,
            interval,
            count,
            sent: 0,
            next_at: Some(start),
            due: false,
            segments: 1,
        }
    }

    /// Each transmit a run of `segments` datagrams (the last run shorter
    /// if `count` ends it).
    pub(crate) fn in_runs_of(mut self, segments: usize) -> Self {
        self.segments = segments.max(1);
        self
    }
}

/// What the sink saw of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    pub seq: u64,
    pub at: Instant,
    pub from: SocketAddr,
    pub len: usize,
    pub intact: bool,
}

/// Records every datagram; optionally answers each with a copy of it.
#[derive(Default)]
pub(crate) struct Sink {
    pub arrivals: Vec<Arrival>,
    pub echo: bool,
    pub replies: Vec<(SocketAddr, Vec<u8>)>,
}

/// One node type for a whole simulation.
pub(crate) enum Toy {
    Blaster(Blaster),
    Sink(Sink),
}

impl Toy {
    pub(crate) fn sink(&self) -> &Sink {
        match self {
            Toy::Sink(s) => s,
            Toy::Blaster(_) => panic!("not a sink"),
        }
    }

    pub(crate) fn blaster(&self) -> &Blaster {
        match self {
            Toy::Blaster(b) => b,
            Toy::Sink(_) => panic!("not a blaster"),
        }
    }
}

impl Node for Toy {
    fn handle_datagram(
        &mut self,
        now: Instant,
        _local: SocketAddr,
        from: SocketAddr,
        d: &mut [u8],
    ) {
        if let Toy::Sink(sink) = self {
            let seq = d.get(..8).map_or(u64::MAX, |h| {
                u64::from_be_bytes(h.try_into().unwrap_or([0xff; 8]))
            });
            let mut expected = vec![0; d.len()];
            datagram(seq, d.len(), &mut expected);
            sink.arrivals.push(Arrival {
                seq,
                at: now,
                from,
                len: d.len(),
                intact: expected == d,
            });
            if sink.echo {
                sink.replies.push((from, d.to_vec()));
            }
        }
    }

    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        match self {
            Toy::Blaster(b) => {
                if !b.due || b.sent >= b.count {
                    return None;
                }
                b.due = false;
                let run = (b.count - b.sent).min(b.segments as u64) as usize;
                for (i, out) in buf.chunks_mut(b.len).take(run).enumerate() {
                    datagram(b.sent + i as u64, b.len, out);
                }
                b.sent += run as u64;
                Some(Transmit {
                    source: None,
                    destination: b.to,
                    len: b.len * run,
                    segment_size: (run > 1).then_some(b.len),
                })
            }
            Toy::Sink(s) => {
                let (to, d) = s.replies.pop()?;
                buf[..d.len()].copy_from_slice(&d);
                Some(Transmit {
                    source: None,
                    destination: to,
                    len: d.len(),
                    segment_size: None,
                })
            }
        }
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        match self {
            Toy::Blaster(b) if b.sent < b.count => b.next_at,
            _ => None,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Toy::Blaster(b) = self {
            b.due = true;
            b.next_at = Some(now + b.interval);
        }
    }
}
