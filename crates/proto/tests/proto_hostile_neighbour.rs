//! A peer that lies (issue #23), beside an honest one: while an
//! authenticated attacker plays one of the worst attack classes against an
//! endpoint, an honest client on the same endpoint sends it a stream. The
//! transfer must arrive whole, and its goodput (virtual time, over a
//! modelled link) stay within [`KEPT`] of the same transfer's without the
//! attacker. Each class also asserts that it was played in earnest and
//! what it was held to: memory to the budget or its bound, a lie closed, a
//! forged address sent no more than three times what came from it.

mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use support::attacker::{Attacker, Limits, MAX_DATAGRAM, Tally};
use support::{seed_bytes, wall_start};
use tern_proto::{
    Bytes, ConnectionConfig, ConnectionError, ConnectionHandle, ConnectionStats, Direction,
    Endpoint, EndpointConfig, INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS,
    INITIAL_STREAM_WINDOW, Instant, Node, ProtocolError, ReadOutcome, SendError, Side, StreamId,
    TransmitLimits,
};
use tern_reliability::AckError;
use tern_wire::{Ack, AckFrameRanges, Datagram, Frame, Message, ResetStream, Stream};

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

/// The messages the endpoint holds to send to one peer until acknowledged
/// (`message_send_buffer`): within the budget, beside the honest transfer.
const SEND_BUFFER: usize = BUDGET as usize / 4;

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
    /// Packets full of empty datagrams the application never takes.
    EmptyDatagrams,
    /// A peer that grants every stream and byte (near 2^62) and never
    /// acknowledges, while the endpoint's application sends it 1 MiB
    /// messages as fast as they are taken: the send memory the endpoint
    /// holds for it.
    NeverAcks,
    /// A peer that acknowledges only every 8th packet while the endpoint's
    /// application has [`QUEUED`] small messages queued to it: seven
    /// packets in eight are lost, and their messages queued again (each in
    /// O(1), however many wait).
    SelectiveAcks,
    /// A peer that acknowledges exactly what it received, while the
    /// endpoint's application sends it datagrams, until it sees a packet
    /// number skipped: then acknowledges across it, as if nothing was
    /// missing.
    OptimisticAcks,
    /// An acknowledgement of a packet number never sent, from a victim's
    /// address (the connection moves there and closes), then pings from
    /// the attacker's own address: the Close aimed at the victim.
    SpoofedAck,
    /// A ping now and then from a victim's address, and nothing from the
    /// attacker's own, while the endpoint's application sends datagrams:
    /// whatever the endpoint sends to the victim.
    Migration,
}

/// The small messages queued to a peer that acknowledges every 8th packet.
const QUEUED: usize = 200_000;

/// The victim of the attacks that forge a source address.
const VICTIM: &str = "203.0.113.99:443";

/// The attacker's state across steps.
struct Attacking {
    attack: Attack,
    limits: Limits,
    sent: u64,
    next_message: u64,
    next_stream: u64,
    /// Sends of the endpoint's application to the attacker refused.
    refused: u64,
    /// The first packet number the attacker has not acknowledged yet (for
    /// the attacks that acknowledge exactly what arrived).
    acked_from: Option<u64>,
    /// Whether the attack's one-off opening was played.
    opened: bool,
}

impl Attacking {
    /// One millisecond of the attack.
    fn step(&mut self, attacker: &mut Attacker) {
        // A closed attacker plays on only where what a closed connection
        // sends is the point.
        let Some(connection) = attacker.connection() else {
            return;
        };
        if connection.error().is_some() && self.attack != Attack::SpoofedAck {
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
                // Each byte is its page's last, so that it takes a whole
                // page (a stream's first bytes near its start would take
                // a short one).
                for _ in 0..20 {
                    let (index, page) = (self.sent % 16, self.sent / 16);
                    if (self.sent + 1) * 4096 + 16 * 2 > self.limits.data {
                        break;
                    }
                    let id = StreamId::new(Side::Initiator, Direction::Bi, index);
                    attacker.send(&[Frame::Stream(Stream {
                        id: id.0,
                        offset: page * 4096 + 4095,
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
            Attack::EmptyDatagrams => {
                for _ in 0..5 {
                    attacker.send(&[Frame::Datagram(Datagram { data: &[] }); 200]);
                }
            }
            Attack::NeverAcks => {
                if !std::mem::replace(&mut self.opened, true) {
                    attacker.grant_everything();
                }
                // Pings keep it alive; no ACK ever.
                attacker.send(&[Frame::Ping]);
                let message = Bytes::from(vec![0x5a; 1 << 20]);
                if let Some(connection) = attacker.connection() {
                    loop {
                        match connection.send_message(message.clone()) {
                            Ok(()) => {}
                            Err(SendError::Blocked(_)) => {
                                self.refused += 1;
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                }
            }
            Attack::SelectiveAcks => {
                if !std::mem::replace(&mut self.opened, true) {
                    attacker.grant_everything();
                    // Small enough that all of them fit `SEND_BUFFER`.
                    let message = Bytes::from_static(&[0x33; 8]);
                    if let Some(connection) = attacker.connection() {
                        for _ in 0..QUEUED {
                            if connection.send_message(message.clone()).is_err() {
                                self.refused += 1;
                            }
                        }
                    }
                }
                let every_8th: Vec<RangeInclusive<u64>> = ranges
                    .iter()
                    .flat_map(|r| r.clone().rev())
                    .filter(|pn| pn.is_multiple_of(8))
                    .map(|pn| pn..=pn)
                    .collect();
                for ranges in every_8th.chunks(32) {
                    if let Some(ack) = ack_of(ranges) {
                        attacker.send(&[ack]);
                    }
                }
                attacker.send(&[Frame::Ping]);
            }
            Attack::OptimisticAcks => {
                if let Some(connection) = attacker.connection() {
                    for _ in 0..20 {
                        let _ = connection.send_datagram(Bytes::from_static(&[0; 1000]));
                    }
                }
                let (Some(largest), Some(smallest)) = (ranges.first(), ranges.last()) else {
                    return;
                };
                let (largest, smallest) = (*largest.end(), *smallest.start());
                let from = *self.acked_from.get_or_insert(smallest);
                if ranges.len() > 1 || smallest > from {
                    // A number was skipped: acknowledge it with the rest.
                    attacker.send(&[ack_of(&[from..=largest]).expect("a range")]);
                } else {
                    attacker.send(&[ack_of(&ranges).expect("a range")]);
                    self.acked_from = Some(largest + 1);
                }
            }
            Attack::SpoofedAck => {
                if !std::mem::replace(&mut self.opened, true) {
                    let victim = VICTIM.parse().expect("address");
                    let absurd = [1_000_000..=1_000_000];
                    let ack = ack_of(&absurd).expect("a range");
                    attacker.send_from(victim, &[ack]);
                }
                for _ in 0..10 {
                    attacker.send(&[Frame::Ping]);
                }
            }
            Attack::Migration => {
                // A ping from the victim every 16 ms: what the endpoint may
                // send there is three times that, whatever its
                // application has to send.
                if self.sent.is_multiple_of(16) {
                    let victim = VICTIM.parse().expect("address");
                    attacker.send_from(victim, &[Frame::Ping]);
                }
                self.sent += 1;
                if let Some(connection) = attacker.connection() {
                    for _ in 0..20 {
                        let _ = connection.send_datagram(Bytes::from_static(&[0; 1000]));
                    }
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
    /// The most send memory the attacker's connection held.
    attacker_send_held: usize,
    /// Sends of the endpoint's application to the attacker refused.
    refused: u64,
    /// Why the endpoint closed the attacker's connection, if it did.
    attacker_error: Option<ConnectionError>,
    /// The attacker's connection's last figures.
    attacker_stats: ConnectionStats,
    /// What the endpoint sent to the victim, and received from it.
    to_victim: Tally,
    from_victim: Tally,
}

/// Runs the honest transfer beside `attack`, the endpoint's messages held
/// until acknowledged bounded by `message_send_buffer`.
fn goodput_beside(attack: Attack, message_send_buffer: usize) -> Outcome {
    let mut config = EndpointConfig::default();
    config.connection.receive_window = 1 << 20;
    config.connection.message_send_buffer = message_send_buffer;
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
        refused: 0,
        acked_from: None,
        opened: false,
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
    let (mut peak_held, mut peak_send) = (0, 0);
    let mut attacker_error = None;
    let mut attacker_stats = ConnectionStats::default();
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
        let closed = client.connection(handle).and_then(|c| c.error().cloned());
        assert_eq!(closed, None, "{attack:?}: the honest peer was closed");
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
            attacker_stats = c.stats();
            peak_held = peak_held.max(attacker_stats.receive_memory);
            peak_send = peak_send.max(attacker_stats.send_memory);
            if attacker_error.is_none() {
                attacker_error = c.error().cloned();
            }
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
    let victim: SocketAddr = VICTIM.parse().expect("address");
    let tally = |of: &std::collections::HashMap<SocketAddr, Tally>, at| {
        of.get(at).copied().unwrap_or_default()
    };
    let from_attacker = tally(&attacker.received_from, &attacker.addr);
    let from_victim = tally(&attacker.received_from, &victim);
    Outcome {
        goodput: TRANSFER as f64 / elapsed,
        attack_packets: from_attacker.datagrams + from_victim.datagrams,
        attacker_held: peak_held as u64,
        budget_closes: attacker.endpoint.stats().memory_budget_closes,
        attacker_send_held: peak_send,
        refused: attacking.refused,
        attacker_error,
        attacker_stats,
        to_victim: tally(&attacker.sent_to, &victim),
        from_victim,
    }
}

#[test]
fn an_honest_transfer_keeps_its_goodput_beside_each_attack() {
    let alone = goodput_beside(Attack::None, SEND_BUFFER).goodput;
    for attack in [
        Attack::GreedyMessage,
        Attack::Fragments,
        Attack::EmptyMessages,
        Attack::PingsAndAcks,
        Attack::Resets,
        Attack::EmptyDatagrams,
        Attack::NeverAcks,
        Attack::SelectiveAcks,
        Attack::OptimisticAcks,
        Attack::SpoofedAck,
        Attack::Migration,
    ] {
        let outcome = goodput_beside(attack, SEND_BUFFER);
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
            Attack::PingsAndAcks | Attack::Resets => {
                assert!(outcome.attack_packets >= 4000, "{outcome:?}");
            }
            Attack::EmptyDatagrams => {
                // The queue the application never takes overflowed, and
                // the oldest went: the attacker stayed open.
                assert!(outcome.attack_packets >= 3000, "{outcome:?}");
                assert!(outcome.attacker_stats.datagrams_dropped >= 100_000);
                assert_eq!(outcome.attacker_error, None);
                let queue = ConnectionConfig::default().datagram_receive_queue;
                assert!(outcome.attacker_held <= (queue * MAX_DATAGRAM) as u64);
            }
            Attack::NeverAcks => {
                // The endpoint's application was refused once the
                // messages held unacknowledged reached their bound (one
                // message beyond it at most), whatever the peer granted,
                // and the budget closed nobody.
                assert!(outcome.refused >= 100, "{outcome:?}");
                let held = outcome.attacker_send_held;
                assert!(held >= SEND_BUFFER / 2, "{outcome:?}");
                assert!(held <= SEND_BUFFER + (1 << 20), "{outcome:?}");
                assert_eq!(outcome.budget_closes, 0, "{outcome:?}");
                assert_eq!(outcome.attacker_error, None);
            }
            Attack::SelectiveAcks => {
                // All of them queued; seven packets in eight lost, their
                // messages queued again, the attacker open throughout.
                assert_eq!(outcome.refused, 0, "{outcome:?}");
                let stats = &outcome.attacker_stats;
                assert!(stats.lost_packets >= 1000, "{outcome:?}");
                assert!(
                    stats.lost_packets * 8 >= stats.sent_packets * 6,
                    "{outcome:?}"
                );
                assert!(outcome.attacker_send_held >= QUEUED * 8, "{outcome:?}");
                assert_eq!(outcome.attacker_error, None);
            }
            Attack::OptimisticAcks => {
                // Closed at the first skipped number it acknowledged.
                assert!(
                    matches!(
                        outcome.attacker_error,
                        Some(ConnectionError::Protocol(ProtocolError::Ack(
                            AckError::UnsentPacket { .. }
                        )))
                    ),
                    "{outcome:?}"
                );
                assert!(outcome.attacker_stats.sent_packets >= 500, "{outcome:?}");
            }
            Attack::SpoofedAck | Attack::Migration => {
                // The victim got something, and no more than three times
                // what came from its address.
                let (to, from) = (outcome.to_victim, outcome.from_victim);
                assert!(to.datagrams >= 1, "{outcome:?}");
                assert!(to.bytes <= 3 * from.bytes, "{outcome:?}");
                if attack == Attack::SpoofedAck {
                    assert!(
                        matches!(
                            outcome.attacker_error,
                            Some(ConnectionError::Protocol(ProtocolError::Ack(_)))
                        ),
                        "{outcome:?}"
                    );
                    assert!(outcome.attack_packets >= 4000, "{outcome:?}");
                }
            }
            Attack::None => {}
        }
    }
}

/// A peer that never acknowledges while the endpoint's application sends
/// it messages up to the default bound (16 MiB), twice the endpoint's
/// budget: the endpoint closes it for the budget, and it alone. Closed at
/// once, it gives back what it held to send; were it still charged that
/// until freed, three probe timeouts later, the total would stay over the
/// budget and the next greediest, the honest connection, would be closed
/// too.
#[test]
fn a_peer_that_never_acks_past_the_budget_is_closed_alone() {
    let default = ConnectionConfig::default().message_send_buffer;
    assert!(default as u64 > BUDGET);
    let outcome = goodput_beside(Attack::NeverAcks, default);
    assert_eq!(outcome.attacker_error, Some(ConnectionError::MemoryBudget));
    assert_eq!(outcome.budget_closes, 1, "{outcome:?}");
}
