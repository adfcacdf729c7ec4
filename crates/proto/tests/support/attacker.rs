//! A hostile peer: it completes a real handshake with an [`Endpoint`] (it
//! knows the endpoint's public key, which is all the handshake asks), then
//! seals whatever frames it likes into packets the endpoint authenticates,
//! from whatever source address it likes.
//!
//! Everything runs in one thread on a mock clock: the attacker hands the
//! endpoint its datagrams, runs the endpoint's timers when asked, and
//! records every datagram the endpoint sends, by destination, so a test can
//! weigh what went where.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use quanta::{Clock, Mock};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use tern_proto::{
    Connection, ConnectionError, ConnectionHandle, Direction, Endpoint, EndpointConfig, Instant,
    Node, Side, StreamId, TransmitLimits,
};
use tern_wire::{
    ConnectionKeys, Frame, INTRO_LEN, KeyConfig, MaxData, MaxStreams, PacketSealer, PendingIntro,
    Transcript,
};

use super::{identity, seed_bytes, wall_start};

/// The largest datagram either side sends.
pub const MAX_DATAGRAM: usize = 1452;

/// The most the wire can say: every stream and every byte, granted.
pub const UNLIMITED: u64 = (1 << 62) - 1;

/// Datagrams and bytes the endpoint sent to one address, or received from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub datagrams: u64,
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: usize) {
        self.datagrams += 1;
        self.bytes += bytes as u64;
    }
}

/// The flow-control limits the endpoint granted the attacker, as far as
/// it has read them ([`Attacker::take_limits`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// The connection's limit (MaxData).
    pub data: u64,
    /// Each stream's limit (MaxStreamData), by stream id.
    pub streams: HashMap<u64, u64>,
    /// How many two-way streams the attacker may open (MaxStreams).
    pub bi_streams: u64,
    /// How many large messages' streams the attacker may open (MaxStreams).
    pub message_streams: u64,
    /// How many one-way streams the attacker may open (MaxStreams).
    pub one_way_streams: u64,
}

/// An endpoint under attack, and the authenticated peer attacking it.
pub struct Attacker {
    /// The endpoint under attack (it has the shared test identity).
    pub endpoint: Endpoint,
    /// The endpoint's connection to the attacker.
    pub handle: ConnectionHandle,
    /// The endpoint's address.
    pub endpoint_addr: SocketAddr,
    /// The attacker's own address (where its handshake came from).
    pub addr: SocketAddr,
    keys: ConnectionKeys,
    /// The session's transcript, which a proof of identity signs.
    pub transcript: Transcript,
    clock: Clock,
    mock: Arc<Mock>,
    /// What the endpoint sent, by destination.
    pub sent_to: HashMap<SocketAddr, Tally>,
    /// What the endpoint was handed, by source.
    pub received_from: HashMap<SocketAddr, Tally>,
    /// The datagrams the endpoint sent to `addr` that the attacker has not
    /// looked at yet.
    pub inbox: Vec<Vec<u8>>,
    /// The datagrams the endpoint sent elsewhere (to its other peers, or
    /// to forged addresses), with their destination, while `keep_elsewhere`
    /// is set: for a test that carries them to an honest peer.
    pub elsewhere: Vec<(SocketAddr, Vec<u8>)>,
    /// Whether `elsewhere` keeps what the endpoint sends to addresses
    /// other than the attacker's (off: only counted).
    pub keep_elsewhere: bool,
    /// The flow-control limits the endpoint granted with the handshake
    /// (its first packets after it), as the attacker read them.
    pub granted: Limits,
    /// The packet numbers of what the endpoint sent with the handshake
    /// (its reply, numbered 0, and its first packets after it), as ACK
    /// ranges: for an attacker that acknowledges everything it received.
    pub handshake_ranges: Vec<RangeInclusive<u64>>,
}

impl Attacker {
    /// An endpoint with `config`, and an attacker that finished a handshake
    /// with it (the endpoint accepted the connection and saw it confirmed).
    pub fn connect(config: EndpointConfig) -> Self {
        Self::connect_with_keys(config, config.keys)
    }

    /// [`connect`](Self::connect), the attacker's own packets protected as
    /// `keys` says (its key limit apart from the endpoint's).
    pub fn connect_with_keys(config: EndpointConfig, keys: KeyConfig) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let endpoint_addr: SocketAddr = "192.0.2.1:7000".parse().expect("address");
        let addr: SocketAddr = "198.51.100.7:40000".parse().expect("address");
        let mut endpoint = Endpoint::new(
            config,
            Some(identity()),
            seed_bytes(23, 1),
            clock.now(),
            wall_start(),
        )
        .expect("valid config");
        let public = endpoint.public().expect("an identity");
        let mut rng = ChaCha8Rng::from_seed(seed_bytes(23, 2));
        let mut intro = vec![0; INTRO_LEN];
        let pending =
            PendingIntro::write(&public, 0x2323, keys, wall_start(), &mut rng, &mut intro)
                .expect("intro");
        let now = clock.now();
        endpoint.handle_datagram(now, endpoint_addr, addr, &mut intro);
        let mut reply = vec![0; MAX_DATAGRAM];
        let limits = TransmitLimits::new(1, MAX_DATAGRAM);
        let transmit = endpoint
            .poll_transmit(now, limits, &mut reply)
            .expect("the endpoint replied");
        assert_eq!(transmit.destination, addr);
        reply.truncate(transmit.len);
        let established = pending
            .open_reply(&mut reply)
            .map_err(|refused| refused.error)
            .expect("a genuine reply");
        let mut attacker = Self {
            endpoint,
            handle: ConnectionHandle(0),
            endpoint_addr,
            addr,
            keys: established.keys,
            transcript: established.transcript,
            clock,
            mock,
            sent_to: HashMap::new(),
            received_from: HashMap::new(),
            inbox: Vec::new(),
            elsewhere: Vec::new(),
            keep_elsewhere: false,
            granted: Limits::default(),
            handshake_ranges: Vec::new(),
        };
        attacker
            .received_from
            .entry(addr)
            .or_default()
            .add(INTRO_LEN);
        attacker.sent_to.entry(addr).or_default().add(transmit.len);
        // The first packet under the keys confirms the handshake.
        attacker.send(&[Frame::Ping]);
        attacker.turn();
        attacker.handle = attacker.endpoint.accept().expect("accepted");
        assert!(attacker.connection().is_some_and(|c| c.is_established()));
        // Read, and the inbox left empty.
        let inbox = attacker.inbox.clone();
        let mut granted = Limits::default();
        attacker.take_limits(&mut granted);
        attacker.granted = granted;
        attacker.inbox = inbox;
        let mut ranges = attacker.received_ranges();
        match ranges.last_mut() {
            Some(last) if *last.start() == 1 => *last = 0..=*last.end(),
            _ => ranges.push(0..=0),
        }
        attacker.handshake_ranges = ranges;
        attacker
    }

    /// The mock clock's time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Moves the clock forward.
    pub fn advance(&mut self, by: Duration) {
        self.mock.increment(by);
    }

    /// The endpoint's connection to the attacker, while it exists.
    pub fn connection(&mut self) -> Option<&mut Connection> {
        self.endpoint.connection(self.handle)
    }

    /// The attacker's sealer: its packet numbers and key phase, to skip
    /// numbers or update keys (`on_ack` can fake the confirmation an honest
    /// sealer waits for).
    pub fn sealer(&mut self) -> &mut PacketSealer {
        &mut self.keys.sealer
    }

    /// Seals `frames` into one packet from the attacker's address and hands
    /// it to the endpoint. Returns the datagram's length.
    pub fn send(&mut self, frames: &[Frame<'_>]) -> usize {
        self.send_from(self.addr, frames)
    }

    /// Seals `frames` into one packet and hands it to the endpoint as if
    /// it came from `from` (a forged source address). Returns its length.
    pub fn send_from(&mut self, from: SocketAddr, frames: &[Frame<'_>]) -> usize {
        let (mut datagram, pushed) = self.seal(frames);
        assert_eq!(pushed, frames.len(), "the frames fit");
        let len = datagram.len();
        self.deliver(from, &mut datagram);
        len
    }

    /// Seals the first of `frames` that fit into one packet under the
    /// attacker's keys, without sending it (to send it later, or twice).
    /// Returns the datagram and how many frames it holds.
    pub fn seal(&mut self, frames: &[Frame<'_>]) -> (Vec<u8>, usize) {
        self.seal_within(frames, MAX_DATAGRAM)
    }

    /// As [`seal`](Self::seal), into a datagram of at most `max` bytes.
    pub fn seal_within(&mut self, frames: &[Frame<'_>], max: usize) -> (Vec<u8>, usize) {
        let mut buf = vec![0; max];
        let mut packet = self.keys.sealer.start(&mut buf).expect("packet");
        let mut pushed = 0;
        for frame in frames {
            if packet.push(frame).is_err() {
                break;
            }
            pushed += 1;
        }
        if pushed == 0 {
            packet.push(&Frame::Ping).expect("a ping fits");
        }
        let (len, _) = packet.finish().expect("sealed");
        buf.truncate(len);
        (buf, pushed)
    }

    /// Moves the attacker's sealer to its next key whether or not the
    /// endpoint acknowledged anything under the current one (it fakes the
    /// ACK an honest sealer waits for). False when even that does not
    /// do: no packet was sealed under the current key yet.
    pub fn force_key_update(&mut self) -> bool {
        let sealer = &mut self.keys.sealer;
        let last = sealer.next_packet_number().saturating_sub(1);
        sealer.on_ack(last);
        sealer.update_key().is_ok()
    }

    /// Grants the endpoint (the responder) streams of every kind (2^58
    /// each: a one-way stream's id spends three bits on its kind, and ids
    /// stay below 2^62) and connection credit near 2^62: a peer that lies
    /// about what it can take.
    pub fn grant_everything(&mut self) {
        let streams = |direction| {
            Frame::MaxStreams(MaxStreams {
                max: StreamId::new(Side::Responder, direction, 1 << 58).0,
            })
        };
        self.send(&[
            streams(Direction::Bi),
            streams(Direction::Uni),
            Frame::MaxData(MaxData { max: UNLIMITED }),
        ]);
        self.turn();
    }

    /// Hands the endpoint a datagram from `from`.
    pub fn deliver(&mut self, from: SocketAddr, datagram: &mut [u8]) {
        self.received_from
            .entry(from)
            .or_default()
            .add(datagram.len());
        let now = self.now();
        self.endpoint
            .handle_datagram(now, self.endpoint_addr, from, datagram);
    }

    /// One turn of the endpoint: its timers if due, then everything it
    /// sends, recorded by destination (what goes to the attacker's address
    /// also lands in `inbox`, what goes elsewhere in `elsewhere` if kept). Returns the number of datagrams sent.
    pub fn turn(&mut self) -> usize {
        let now = self.now();
        if self.endpoint.poll_timeout().is_some_and(|at| at <= now) {
            self.endpoint.handle_timeout(now);
        }
        let limits = TransmitLimits::new(1, MAX_DATAGRAM);
        let mut buf = vec![0; MAX_DATAGRAM];
        let mut sent = 0;
        while let Some(transmit) = self.endpoint.poll_transmit(now, limits, &mut buf) {
            self.sent_to
                .entry(transmit.destination)
                .or_default()
                .add(transmit.len);
            let datagram = &buf[..transmit.len];
            if transmit.destination == self.addr {
                self.inbox.push(datagram.to_vec());
            } else if self.keep_elsewhere {
                self.elsewhere
                    .push((transmit.destination, datagram.to_vec()));
            }
            sent += 1;
        }
        sent
    }

    /// Turns of the endpoint until `duration` of mock time passed, each at
    /// its next deadline (or every `step` when it has none sooner).
    pub fn run_for(&mut self, duration: Duration, step: Duration) {
        let end = self.now() + duration;
        while self.now() < end {
            self.turn();
            let next = self
                .endpoint
                .poll_timeout()
                .unwrap_or(end)
                .min(end)
                .min(self.now() + step);
            let wait = next.saturating_duration_since(self.now());
            self.advance(wait.max(Duration::from_millis(1)));
        }
        self.turn();
    }

    /// Opens a datagram the endpoint sent to the attacker and gives its
    /// packet number and the types of its frames (`None` if it does not
    /// open: a reply, or the attacker's keys are behind).
    pub fn open(&mut self, datagram: &mut [u8]) -> Option<(u64, Vec<tern_wire::FrameType>)> {
        let opened = self.keys.opener.open(datagram).ok()?;
        let types = opened
            .frames()
            .filter_map(Result::ok)
            .map(|f| f.frame_type())
            .collect();
        Some((opened.packet_number(), types))
    }

    /// The endpoint's error, once its connection closed.
    pub fn error(&mut self) -> Option<ConnectionError> {
        self.connection().and_then(|c| c.error().cloned())
    }

    /// Whether the endpoint sent the attacker a transport Close among the
    /// datagrams in `inbox` (which this takes).
    pub fn sent_transport_close(&mut self) -> bool {
        let inbox = std::mem::take(&mut self.inbox);
        inbox.into_iter().any(|mut datagram| {
            self.open(&mut datagram)
                .is_some_and(|(_, types)| types.contains(&tern_wire::FrameType::TransportClose))
        })
    }

    /// Takes the datagrams in `inbox` and raises `limits` to the
    /// flow-control limits they carry: the connection's (MaxData), each
    /// stream's (MaxStreamData, by stream id) and the counts of two-way
    /// streams, large messages' streams and one-way streams (MaxStreams).
    pub fn take_limits(&mut self, limits: &mut Limits) {
        for mut datagram in std::mem::take(&mut self.inbox) {
            let Ok(opened) = self.keys.opener.open(&mut datagram) else {
                continue;
            };
            for frame in opened.frames().filter_map(Result::ok) {
                match frame {
                    Frame::MaxData(m) => limits.data = limits.data.max(m.max),
                    Frame::MaxStreamData(m) => {
                        let stream = limits.streams.entry(m.id).or_default();
                        *stream = (*stream).max(m.max);
                    }
                    Frame::MaxStreams(m) => {
                        let bound = StreamId(m.max);
                        match bound.direction() {
                            Direction::Bi => {
                                limits.bi_streams = limits.bi_streams.max(bound.index());
                            }
                            Direction::Uni => {
                                limits.message_streams = limits.message_streams.max(bound.index());
                            }
                            Direction::OneWay => {
                                limits.one_way_streams = limits.one_way_streams.max(bound.index());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Opens a datagram the endpoint sent to the attacker and gives its
    /// packet number and how many ranges its ACK frame held, if it had one.
    pub fn open_ack(&mut self, datagram: &mut [u8]) -> Option<(u64, usize)> {
        let opened = self.keys.opener.open(datagram).ok()?;
        let ranges = opened.frames().find_map(|frame| match frame {
            Ok(Frame::Ack(ack)) => Some(ack.ranges.iter().count()),
            _ => None,
        })?;
        Some((opened.packet_number(), ranges))
    }

    /// The packet numbers of what the endpoint sent the attacker since the
    /// last look (the inbox is emptied), as ACK ranges: largest first,
    /// adjacent ones merged.
    pub fn received_ranges(&mut self) -> Vec<RangeInclusive<u64>> {
        let inbox = std::mem::take(&mut self.inbox);
        let mut numbers: Vec<u64> = inbox
            .into_iter()
            .filter_map(|mut datagram| self.open(&mut datagram).map(|(pn, _)| pn))
            .collect();
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        let mut ranges: Vec<RangeInclusive<u64>> = Vec::new();
        for pn in numbers {
            match ranges.last_mut() {
                Some(last) if *last.start() == pn + 1 => *last = pn..=*last.end(),
                Some(last) if *last.start() == pn => {}
                _ => ranges.push(pn..=pn),
            }
        }
        ranges
    }
}
