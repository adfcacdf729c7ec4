//! A peer that lies (issue #23), beside an honest one: while an
//! authenticated attacker plays one of the worst attack classes against an
//! endpoint, an honest client on the same endpoint sends it a stream. The
//! transfer must arrive whole, and its goodput (virtual time, over a
//! modelled link) stay within [`KEPT`] of the same transfer's without the
//! attacker.

mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use support::attacker::{Attacker, Limits, MAX_DATAGRAM};
use support::{seed_bytes, wall_start};
use tern_proto::{
    ConnectionHandle, Direction, Endpoint, EndpointConfig, INITIAL_CONNECTION_WINDOW,
    INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW, Instant, Node, ReadOutcome, Side, StreamId,
    TransmitLimits,
};
use tern_wire::{Ack, AckFrameRanges, Frame, Message, ResetStream, Stream};

/// The fraction of its goodput alone the honest transfer keeps beside any
/// attacker.
const KEPT: f64 = 0.8;

/// What the honest client sends.
const TRANSFER: u64 = 4 << 20;

/// The honest client's link to the endpoint: one-way delay and rate.
const DELAY: Duration = Duration::from_millis(10);
const RATE: u64 = 50_000_000 / 8;

/// The endpoint's budget: small, so the attacker reaches it.
const BUDGET: u64 = 8 << 20;

/// One direction of the honest client's link: a queue served at [`RATE`],
/// each datagram arriving [`DELAY`] after it was served.
#[derive(Default)]
struct Link {
    free_at: Option<Instant>,
    queue: VecDeque<(Instant, Vec<u8>)>,
}

impl Link {
    fn push(&mut self, now: Instant, datagram: Vec<u8>) {
        let start = self.free_at.map_or(now, |at| at.max(now));
        let served = start + Duration::from_nanos(datagram.len() as u64 * 1_000_000_000 / RATE);
        self.free_at = Some(served);
        self.queue.push_back((served + DELAY, datagram));
    }

    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.front()?.0 <= now {
            return self.queue.pop_front().map(|(_, d)| d);
        }
        None
    }

    fn next(&self) -> Option<Instant> {
        self.queue.front().map(|(at, _)| *at)
    }
}

/// The attack classes, each the worst of its kind that keeps to the rules
/// (one that breaks them is closed at once, which is no test of the
/// honest peer's share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    /// No attacker: the baseline.
    None,
    /// One large message, sent as fast as flow control allows and never
    /// taken: memory up to the budget, which the honest transfer needs
    /// room in too.
    GreedyMessage,
    /// One byte in every page of the two-way streams' windows: a page
    /// held for each byte.
    Fragments,
    /// Empty messages the application never takes, up to the window.
    EmptyMessages,
    /// A flood of small ack-eliciting packets, each acknowledging all the
    /// endpoint sent.
    PingsAndAcks,
    /// Streams opened with a byte far ahead, then reset: credit churn.
    Resets,
}

/// The attacker's state across steps.
struct Attacking {
    attack: Attack,
    limits: Limits,
    sent: u64,
    next_message: u64,
    next_stream: u64,
}

impl Attacking {
    /// One millisecond of the attack.
    fn step(&mut self, attacker: &mut Attacker) {
        if attacker.connection().is_none_or(|c| c.error().is_some()) {
            return;
        }
        // The limits, and (for the attacks that acknowledge) the same
        // datagrams' numbers.
        let inbox = attacker.inbox.clone();
        attacker.take_limits(&mut self.limits);
        attacker.inbox = inbox;
        let ranges = attacker.received_ranges();
        match self.attack {
            Attack::None => {}
            Attack::GreedyMessage => {
                let id = StreamId::new(Side::Initiator, Direction::Uni, 0);
                let stream = self.limits.streams.get(&id.0).copied();
                let limit = self
                    .limits
                    .data
                    .min(stream.unwrap_or(INITIAL_STREAM_WINDOW));
                let chunk = [7u8; 1100];
                for _ in 0..20 {
                    if self.sent + chunk.len() as u64 > limit {
                        break;
                    }
                    attacker.send(&[Frame::Stream(Stream {
                        id: id.0,
                        offset: self.sent,
                        fin: false,
                        data: &chunk,
                    })]);
                    self.sent += chunk.len() as u64;
                }
            }
            Attack::Fragments => {
                // One byte a page, across 16 streams: each stream's
                // highest offset counts against the connection window.
                for _ in 0..20 {
                    let (index, page) = (self.sent % 16, self.sent / 16);
                    if (self.sent + 1) * 4096 + 16 * 2 > self.limits.data {
                        break;
                    }
                    let id = StreamId::new(Side::Initiator, Direction::Bi, index);
                    attacker.send(&[Frame::Stream(Stream {
                        id: id.0,
                        offset: page * 4096 + 1,
                        fin: false,
                        data: b"x",
                    })]);
                    self.sent += 1;
                }
            }
            Attack::EmptyMessages => {
                // Each counts 64 bytes against the window: stay below it.
                let most = INITIAL_CONNECTION_WINDOW / 64 - 64;
                for _ in 0..5 {
                    if self.next_message + 100 > most {
                        break;
                    }
                    let frames: Vec<Frame<'_>> = (self.next_message..self.next_message + 100)
                        .map(|id| Frame::Message(Message { id, data: &[] }))
                        .collect();
                    attacker.send(&frames);
                    self.next_message += 100;
                }
            }
            Attack::PingsAndAcks => {
                for _ in 0..50 {
                    match ack_of(&ranges) {
                        Some(ack) => attacker.send(&[ack, Frame::Ping]),
                        None => attacker.send(&[Frame::Ping]),
                    };
                }
            }
            Attack::Resets => {
                // What the endpoint sent is acknowledged (its streams'
                // ends among it), so that the streams retire.
                if let Some(ack) = ack_of(&ranges) {
                    attacker.send(&[ack]);
                }
                let far = INITIAL_STREAM_WINDOW - 1;
                for _ in 0..5 {
                    let fits = self.sent + far < self.limits.data;
                    if !fits || self.next_stream >= self.limits.bi_streams {
                        break;
                    }
                    let id = StreamId::new(Side::Initiator, Direction::Bi, self.next_stream);
                    attacker.send(&[
                        Frame::Stream(Stream {
                            id: id.0,
                            offset: far,
                            fin: false,
                            data: b"x",
                        }),
                        Frame::ResetStream(ResetStream {
                            id: id.0,
                            error_code: 1,
                            final_size: far + 1,
                        }),
                    ]);
                    self.sent += far + 1;
                    self.next_stream += 1;
                }
                // The endpoint's application accepts each stream, reads
                // its reset and finishes its own half, so the peer may
                // open new ones.
                if let Some(connection) = attacker.connection() {
                    let mut buf = [0u8; 16];
                    while let Some(id) = connection.accept_stream() {
                        let _ = connection.read(id, &mut buf);
                        let _ = connection.finish(id);
                    }
                }
            }
        }
    }
}

/// An ACK of the first 32 of `ranges`, if there are any.
fn ack_of(ranges: &[RangeInclusive<u64>]) -> Option<Frame<'_>> {
    let ranges = ranges
        .get(..ranges.len().min(32))
        .filter(|r| !r.is_empty())?;
    Some(Frame::Ack(Ack {
        ranges: AckFrameRanges::new(ranges).expect("ranges"),
        ack_delay: Duration::ZERO,
        receive_time: Duration::ZERO,
    }))
}

/// What a run saw.
#[derive(Debug)]
struct Outcome {
    /// The honest transfer's goodput in bytes per second of virtual time,
    /// from the client's connect to the last byte read.
    goodput: f64,
    /// Packets the attacker sent.
    attack_packets: u64,
    /// The most receive memory the attacker's connection held.
    attacker_held: u64,
    /// Connections the endpoint closed for its memory budget.
    budget_closes: u64,
}

/// Runs the honest transfer beside `attack`.
fn goodput_beside(attack: Attack) -> Outcome {
    let mut config = EndpointConfig::default();
    config.connection.receive_window = 1 << 20;
    config.memory_budget = BUDGET;
    let mut attacker = Attacker::connect(config);
    attacker.keep_elsewhere = true;
    let server_addr = attacker.endpoint_addr;
    let client_addr: SocketAddr = "192.0.2.50:5000".parse().expect("address");
    let public = attacker.endpoint.public().expect("identity");
    let start = attacker.now();
    let mut client = Endpoint::new(
        EndpointConfig::default(),
        None,
        seed_bytes(24, 3),
        start,
        wall_start(),
    )
    .expect("config");
    let handle = client
        .connect(start, server_addr, &public)
        .expect("connect");
    let mut attacking = Attacking {
        attack,
        limits: Limits {
            data: INITIAL_CONNECTION_WINDOW,
            bi_streams: INITIAL_MAX_STREAMS,
            ..Limits::default()
        },
        sent: 0,
        next_message: 0,
        next_stream: 0,
    };
    let (mut up, mut down) = (Link::default(), Link::default());
    let mut honest: Option<ConnectionHandle> = None;
    let mut stream: Option<StreamId> = None;
    let (mut written, mut read) = (0u64, 0u64);
    let chunk = vec![0x42u8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let mut datagram = vec![0u8; MAX_DATAGRAM];
    let limits = TransmitLimits::new(1, MAX_DATAGRAM);
    let mut next_attack = start;
    let mut peak_held = 0;
    while read < TRANSFER {
        let now = attacker.now();
        assert!(
            now - start < Duration::from_secs(120),
            "{attack:?}: {read} of {TRANSFER} bytes after 120 s"
        );
        // The client: what arrived, its timers, its writes, what it sends.
        while let Some(mut d) = down.pop_due(now) {
            client.handle_datagram(now, client_addr, server_addr, &mut d);
        }
        if client.poll_timeout().is_some_and(|at| at <= now) {
            client.handle_timeout(now);
        }
        while client.poll_event().is_some() {}
        if let Some(connection) = client.connection(handle)
            && connection.is_established()
        {
            let id = *stream.get_or_insert_with(|| connection.open_stream().expect("a stream"));
            while written < TRANSFER {
                let left = (TRANSFER - written).min(chunk.len() as u64) as usize;
                let n = connection.write(id, &chunk[..left]).expect("open");
                if n == 0 {
                    break;
                }
                written += n as u64;
            }
        }
        while let Some(t) = client.poll_transmit(now, limits, &mut datagram) {
            up.push(now, datagram[..t.len].to_vec());
        }
        // The endpoint: the client's datagrams, the attack, its turn.
        while let Some(mut d) = up.pop_due(now) {
            attacker.deliver(client_addr, &mut d);
        }
        if now >= next_attack {
            attacking.step(&mut attacker);
            next_attack = now + Duration::from_millis(1);
        }
        attacker.turn();
        for (to, d) in std::mem::take(&mut attacker.elsewhere) {
            if to == client_addr {
                down.push(now, d);
            }
        }
        if let Some(c) = attacker.connection() {
            peak_held = peak_held.max(c.stats().receive_memory);
        }
        // The endpoint's application reads the honest stream.
        while let Some(h) = attacker.endpoint.accept() {
            honest = Some(h);
        }
        while attacker.endpoint.poll_event().is_some() {}
        if let Some(connection) = honest.and_then(|h| attacker.endpoint.connection(h)) {
            assert_eq!(
                connection.error(),
                None,
                "{attack:?}: the honest peer was closed"
            );
            while let Some(id) = connection.accept_stream() {
                stream.get_or_insert(id);
            }
            if let Some(id) = stream {
                while let Ok(ReadOutcome::Read(n @ 1..)) = connection.read(id, &mut buf) {
                    assert!(buf[..n].iter().all(|&b| b == 0x42), "corrupted");
                    read += n as u64;
                }
            }
        }
        let next = [
            client.poll_timeout(),
            attacker.endpoint.poll_timeout(),
            up.next(),
            down.next(),
            Some(next_attack),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(next_attack);
        let wait = next.saturating_duration_since(now);
        attacker.advance(wait.max(Duration::from_micros(100)));
    }
    assert_eq!(read, TRANSFER, "{attack:?}: delivered whole");
    let elapsed = (attacker.now() - start).as_secs_f64();
    let from_attacker = attacker.received_from[&attacker.addr];
    Outcome {
        goodput: TRANSFER as f64 / elapsed,
        attack_packets: from_attacker.datagrams,
        attacker_held: peak_held as u64,
        budget_closes: attacker.endpoint.stats().memory_budget_closes,
    }
}

#[test]
fn an_honest_transfer_keeps_its_goodput_beside_each_attack() {
    let alone = goodput_beside(Attack::None).goodput;
    for attack in [
        Attack::GreedyMessage,
        Attack::Fragments,
        Attack::EmptyMessages,
        Attack::PingsAndAcks,
        Attack::Resets,
    ] {
        let outcome = goodput_beside(attack);
        let kept = outcome.goodput / alone;
        eprintln!("{attack:?}: {outcome:?}, {alone:.0} B/s alone ({kept:.2} kept)");
        assert!(
            kept >= KEPT,
            "{attack:?}: the honest transfer kept {kept:.2} of its goodput"
        );
        // The attack was played in earnest while the transfer ran.
        assert!(outcome.attack_packets >= 40, "{attack:?}: {outcome:?}");
        match attack {
            Attack::GreedyMessage => {
                // Held to the budget: stopped by flow control once the
                // budget lends no more credit, or closed for it.
                assert!(outcome.attacker_held > BUDGET / 2, "{outcome:?}");
                assert!(outcome.attacker_held <= BUDGET, "{outcome:?}");
                assert!(outcome.budget_closes <= 1, "the attacker, and only it");
            }
            Attack::Fragments | Attack::EmptyMessages => {
                assert!(outcome.attacker_held >= 200 * 1024, "{outcome:?}");
            }
            _ => assert!(outcome.attack_packets >= 4000, "{outcome:?}"),
        }
    }
}
