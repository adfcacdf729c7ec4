//! [`Endpoint`]: every connection on one UDP socket, and the handshake's
//! front door.
//!
//! Incoming datagrams are routed by the receiver index their header carries
//! (tern-wire v2), never by source address, so a connection survives its
//! peer's address changing. Intros — the only packets without an index —
//! go through the defences before any RSA work: a repeated intro is
//! answered with the stored reply, and the [`IntroLimiter`] bounds how
//! many intros per second are decrypted, per unvalidated source and in
//! total; an unvalidated intro it refuses is answered with a Retry, whose
//! token validates the source when the intro comes back with it (`retry`).
//! An intro never takes the place of this side's own connect: a connect
//! resolves only to the peer that proved holding the key it named.
//!
//! This module holds the endpoint, its commands and its turns; `intro`
//! what it does with an intro; `admission` who may take a place in the
//! table (caps per address and network, eviction of the idlest); `budget`
//! keeps its connections within one memory budget; `turn` what a look at
//! the touched connections does. The receiver-index
//! table and the intro limiter are its building blocks.

mod admission;
mod budget;
mod intro;
pub(crate) mod intro_limit;
pub(crate) mod receiver_index;
mod relay;
mod relayed;
mod rendezvous;
mod retry;
mod stats;
mod tickets;
mod transmit;
mod turn;

pub use relayed::ConnectionPath;
pub use rendezvous::{ConnectViaError, PathPolicy};
pub use stats::EndpointStats;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use rustc_hash::{FxHashMap, FxHashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use quanta::Instant;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_core::RngCore;
use tern_congestion::TokenBucket;
use tern_wire::replay::IntroId;
use tern_wire::{
    EphemeralKey, IdentityKey, PacketType, PublicIdentity, ReplayGuard, Responder,
    peek_receiver_index,
};

use crate::config::{ConfigError, CongestionConfig, EndpointConfig};
use crate::connection::{Connection, Event, Start};
use crate::{Node, Transmit, TransmitLimits};
use admission::Admission;
use budget::MemoryBudget;
use intro_limit::IntroLimiter;
use receiver_index::{IndexFull, ReceiverIndex};
use retry::Tokens;
use tickets::TicketCache;
use turn::{EventKey, event_key};

/// A connection's handle: its receiver index, stable for its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionHandle(pub u32);

/// Why `connect` could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The endpoint holds as many connections as it may.
    #[error("{0}")]
    Full(#[from] IndexFull),
    /// The intro could not be made (the key or the clock).
    #[error("intro: {0}")]
    Intro(#[from] tern_wire::IntroError),
    /// The congestion controller given to
    /// [`connect_with`](Endpoint::connect_with) has parameters out of range.
    #[error("{0}")]
    Config(#[from] ConfigError),
}

/// Every connection on one socket (see the module documentation).
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    /// What every connection starts from: `config.connection` and the
    /// loss detector's parameters, which they share, and the congestion
    /// controller, of which each has a copy (checked once, here).
    start: Start,
    responder: Option<Responder>,
    /// The endpoint's key, kept to sign the proofs of identity of its
    /// connects (when they make one, see `ConnectionConfig::prove_identity`).
    prover: Option<IdentityKey>,
    limiter: IntroLimiter,
    admission: Admission,
    /// The keys of the address-validation tokens this side issues.
    tokens: Tokens,
    /// Retries waiting to be sent: destination and datagram.
    retries: VecDeque<(SocketAddr, [u8; tern_wire::RETRY_LEN])>,
    /// ResumeRefused packets waiting to be sent: destination, the relay
    /// slot to send it on (if the intro came through a relay), datagram.
    refusals: VecDeque<(SocketAddr, Option<u32>, [u8; tern_wire::RESUME_REFUSED_LEN])>,
    /// The tickets this side holds for its connects.
    tickets: TicketCache,
    /// Draws the ticket key and the tickets' nonces: a stream of its own,
    /// so that issuing tickets leaves every other draw of a seeded
    /// endpoint as it was.
    ticket_rng: ChaCha20Rng,
    /// Boxed, so a slot costs a pointer: the table grows by doubling and
    /// keeps the slots of closed connections, which inline would hold a
    /// whole connection's bytes each.
    connections: ReceiverIndex<Box<Connection>>,
    /// Replies stored for repeated intros, until their connection is
    /// confirmed.
    replies: HashMap<IntroId, u32>,
    /// Outgoing connections still waiting for their reply, by the id of
    /// their intro (which a Retry names): several may go to one address.
    connecting: HashMap<IntroId, u32>,
    /// Connections this side asked for (announced by `Connected`, never
    /// by `accept`).
    outgoing: FxHashSet<u32>,
    // The sets and maps keyed by connection index hash with FxHash: the
    // indices are this endpoint's own random numbers, not the peer's
    // choice, and these are touched for every datagram (SipHash was 5 % of
    // a receiving endpoint's time). Addresses and intro ids, which the
    // network picks, keep std's keyed hasher.
    /// Connections touched since the last look (a datagram, a timer, a
    /// send, an application command), in the order touched: only these can
    /// have new events, a new deadline, or be over. So the endpoint's work
    /// per turn follows its active connections, not all it holds.
    /// Each is on it once: marked [`turn::DIRTY`] in `connections`.
    dirty: Vec<u32>,
    /// Connections that may have something to send, in round-robin order;
    /// one leaves when it has nothing, and comes back when touched. Each
    /// is on it once: marked [`turn::SENDING`].
    sending: VecDeque<u32>,
    /// Every connection's deadline, earliest first; an entry is stale when
    /// it differs from `armed`, and is skipped.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    armed: FxHashMap<u32, Instant>,
    /// When the endpoint's rate limit lets the next datagram go.
    rate_wait: Option<Instant>,
    /// The soonest acknowledgement expected of what was sent since the
    /// driver last asked ([`Node::take_answer_expected`]).
    answer_expected: Option<Instant>,
    /// The same, for packets that opened an exchange
    /// ([`Node::take_exchange_opened`]).
    exchange_opened: Option<Instant>,
    rng: ChaCha20Rng,
    /// The wall-clock time at `epoch`, for intro timestamps.
    wall_epoch: (Instant, SystemTime),
    incoming: VecDeque<ConnectionHandle>,
    /// Replies to repeated intros waiting to be sent.
    stored_replies: VecDeque<(SocketAddr, u32)>,
    rate_limit: Option<TokenBucket>,
    events: VecDeque<(ConnectionHandle, Event)>,
    /// What `events` holds, to queue each event of a connection once: a
    /// connection's events are taken at every flush, several per turn, and
    /// the application takes them once per turn.
    queued: FxHashSet<(u32, EventKey)>,
    /// Connections freed and not yet reported by `poll_freed`.
    freed: Vec<u32>,
    /// New connections are refused: intros are dropped unread.
    refusing: bool,
    budget: MemoryBudget,
    /// Introductions made, asked for and taken part in.
    rendezvous: rendezvous::Rendezvous,
    /// As a rendezvous: the pairs it relays.
    relay: relay::Relay,
    /// As a peer: the relay slots granted to it, and what they carry.
    relayed: relayed::Relayed,
    stats: EndpointStats,
}

impl Endpoint {
    /// A new endpoint. With an `identity` it accepts connections (its
    /// public key is what initiators need); without, it only connects.
    /// `seed` seeds its cryptographic RNG (from the OS in production, fixed
    /// in a simulation); `now` and `wall` are the same moment on the
    /// monotonic and the wall clock. Fails only if the parameters of
    /// `config`'s congestion controller are out of range, or a bound on
    /// what a connection holds to send is zero.
    pub fn new(
        config: EndpointConfig,
        identity: Option<IdentityKey>,
        seed: [u8; 32],
        now: Instant,
        wall: SystemTime,
    ) -> Result<Self, ConfigError> {
        let connection = &config.connection;
        connection.validate()?;
        let controller = connection
            .congestion
            .controller(connection.max_udp_payload as u64)?;
        let mut rng = ChaCha20Rng::from_seed(seed);
        let mut ticket_rng = ChaCha20Rng::from_seed(seed);
        ticket_rng.set_stream(1);
        let prover = identity.clone().filter(|_| connection.prove_identity);
        let responder = identity.map(|identity| {
            let replay = ReplayGuard::for_intro_rate(
                u32::try_from(config.intro_limits.total_rate).unwrap_or(u32::MAX),
                tern_wire::DEFAULT_TIMESTAMP_WINDOW,
            );
            let responder = Responder::new(identity, replay, config.keys);
            match config.tickets {
                Some(policy) => responder.with_tickets(policy, &mut ticket_rng),
                None => responder,
            }
        });
        let limiter = IntroLimiter::new(config.intro_limits, rng.next_u64());
        let tokens = Tokens::new(now);
        let admission = Admission::new(&config);
        let rate_limit = config
            .rate_limit
            .and_then(|rate| TokenBucket::new(rate, (rate / 100).max(64 * 1024)).ok());
        Ok(Self {
            start: Start {
                loss_config: Arc::new(crate::connection::loss_config(&config.connection)),
                config: Arc::new(config.connection),
                controller,
                local_index: 0,
                now,
            },
            connections: ReceiverIndex::with_capacity(config.max_connections),
            config,
            responder,
            prover,
            limiter,
            admission,
            tokens,
            retries: VecDeque::new(),
            refusals: VecDeque::new(),
            tickets: TicketCache::new(config.ticket_cache),
            ticket_rng,
            replies: HashMap::new(),
            connecting: HashMap::new(),
            outgoing: FxHashSet::default(),
            dirty: Vec::new(),
            sending: VecDeque::new(),
            timers: BinaryHeap::new(),
            armed: FxHashMap::default(),
            rate_wait: None,
            answer_expected: None,
            exchange_opened: None,
            rng,
            wall_epoch: (now, wall),
            incoming: VecDeque::new(),
            stored_replies: VecDeque::new(),
            rate_limit,
            events: VecDeque::new(),
            queued: FxHashSet::default(),
            freed: Vec::new(),
            refusing: false,
            budget: MemoryBudget::new(config.memory_budget),
            rendezvous: rendezvous::Rendezvous::default(),
            relay: relay::Relay::default(),
            relayed: relayed::Relayed::default(),
            stats: EndpointStats::default(),
        })
    }

    /// This endpoint's public identity, if it accepts connections.
    pub fn public(&self) -> Option<PublicIdentity> {
        self.responder.as_ref().map(Responder::public)
    }

    fn wall_time(&self, now: Instant) -> SystemTime {
        let (epoch, wall) = self.wall_epoch;
        wall + now.saturating_duration_since(epoch)
    }

    /// Starts a connection to `remote`, whose identity is `responder`; the
    /// intro goes out with the next `poll_transmit`. [`Event::Connected`]
    /// or [`Event::Closed`] tells how it went.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        responder: &PublicIdentity,
    ) -> Result<ConnectionHandle, ConnectError> {
        let start = self.start.for_connection(0, now);
        self.connect_from(start, remote, responder)
    }

    /// [`connect`](Self::connect), with a congestion controller of its own
    /// for this connection instead of the endpoint's
    /// ([`ConnectionConfig::congestion`](crate::ConnectionConfig::congestion)).
    /// It governs what this side sends; connections the endpoint accepts
    /// always run the endpoint's.
    pub fn connect_with(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        responder: &PublicIdentity,
        congestion: CongestionConfig,
    ) -> Result<ConnectionHandle, ConnectError> {
        let mut start = self.start.for_connection(0, now);
        start.controller = congestion.controller(start.config.max_udp_payload as u64)?;
        Arc::make_mut(&mut start.config).congestion = congestion;
        self.connect_from(start, remote, responder)
    }

    fn connect_from(
        &mut self,
        mut start: Start,
        remote: SocketAddr,
        responder: &PublicIdentity,
    ) -> Result<ConnectionHandle, ConnectError> {
        let wall = self.wall_time(start.now);
        let vacant = self.connections.vacant(&mut self.rng)?;
        let index = vacant.index();
        start.local_index = index;
        let resume = self.tickets.take(start.now, responder);
        let ephemeral = EphemeralKey::random(&mut self.rng);
        let connection = Connection::connect(
            start,
            ephemeral,
            self.config.keys,
            remote,
            responder,
            self.prover.as_ref(),
            resume.as_ref(),
            wall,
            &mut self.rng,
        )?;
        if resume.is_some() {
            self.stats.connects_resumed += 1;
        }
        if let Some(id) = connection.pending_intro_id() {
            self.connecting.insert(id, index);
        }
        vacant.insert(Box::new(connection));
        self.outgoing.insert(index);
        self.touch(index);
        Ok(ConnectionHandle(index))
    }

    /// The next connection a peer opened (announced once confirmed).
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        if self.incoming.is_empty() {
            self.flush();
        }
        self.incoming.pop_front()
    }

    /// A connection, to use its commands.
    pub fn connection(&mut self, handle: ConnectionHandle) -> Option<&mut Connection> {
        self.settle_lent();
        let connection = self.connections.get_mut(handle.0)?;
        self.budget.lend_to_application(handle.0, connection);
        self.touch(handle.0);
        self.connections
            .get_mut(handle.0)
            .map(|connection| &mut **connection)
    }

    /// A connection, to look at: unlike [`connection`](Self::connection)
    /// it neither marks the connection as touched nor lends it memory, so
    /// looking costs the endpoint's next turn nothing.
    pub fn connection_ref(&self, handle: ConnectionHandle) -> Option<&Connection> {
        self.connections
            .get(handle.0)
            .map(|connection| &**connection)
    }

    /// The application is done with a connection: what it did not read is
    /// dropped, and one still open is closed gracefully with `code`. It is
    /// freed once over.
    pub fn release(&mut self, now: Instant, handle: ConnectionHandle, code: u64) {
        if let Some(connection) = self.connections.get_mut(handle.0) {
            connection.release(now, code);
            self.touch(handle.0);
        }
    }

    /// Whether `handle` names a connection the endpoint holds, without
    /// marking it as touched (unlike [`connection`](Self::connection)).
    pub fn holds(&self, handle: ConnectionHandle) -> bool {
        self.connections.get(handle.0).is_some()
    }

    /// From now on every intro is dropped unread (and counted), so no new
    /// connection starts here: for an endpoint shutting down. The
    /// connections it holds are not touched.
    pub fn refuse_connections(&mut self) {
        self.refusing = true;
    }

    /// Connections held.
    pub fn len(&self) -> usize {
        self.connections.len()
    }

    /// Whether no connection is held.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
    }

    /// Figures about the endpoint.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            memory_charged: self.budget.total(),
            relay_pairs: self.relay.pairs() as u64,
            ..self.stats
        }
    }

    /// The next event of any connection. A connection's last event is
    /// [`Event::Closed`]; it is freed after it drained.
    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        if self.events.is_empty() {
            self.flush();
        }
        let (handle, event) = self.events.pop_front()?;
        if let Some(key) = event_key(&event) {
            self.queued.remove(&(handle.0, key));
        }
        if let Event::StreamReadable(id) = event
            && let Some(connection) = self.connections.get_mut(handle.0)
        {
            connection.readable_event_taken(id);
        }
        Some((handle, event))
    }

    /// The next connection freed since the last call, each reported once
    /// and after its [`Event::Closed`] was queued: its handle names nothing
    /// any more (and may later name a new connection). Lets an application
    /// that keeps its own record per connection drop it without looking at
    /// every closed connection, turn after turn. Drain it as `poll_event`
    /// is drained: what is not taken stays queued.
    pub fn poll_freed(&mut self) -> Option<ConnectionHandle> {
        self.freed.pop().map(ConnectionHandle)
    }

    /// How many connections are marked as touched: what the next look
    /// (`poll_event`, `poll_timeout`) will visit. A driver whose idle turns
    /// leave this above zero makes the endpoint work on every turn.
    pub fn touched(&self) -> usize {
        self.dirty.len()
    }
}

impl Node for Endpoint {
    fn handle_datagram(
        &mut self,
        now: Instant,
        _local: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    ) {
        match datagram.first() {
            Some(&first)
                if first == PacketType::Intro as u8 || first == PacketType::IntroX25519 as u8 =>
            {
                if self.refusing {
                    self.stats.intros_declined += 1;
                } else {
                    self.handle_intro(now, from, datagram, None);
                }
                return;
            }
            Some(&first) if first == PacketType::IntroResume as u8 => {
                if self.refusing {
                    self.stats.intros_declined += 1;
                } else {
                    self.handle_intro(now, from, datagram, None);
                }
                return;
            }
            Some(&tern_wire::RELAY_TYPE) => {
                match tern_wire::parse_relay(datagram) {
                    Some((slot, _)) if self.relayed.is_granted(slot) => {
                        self.handle_relayed(now, from, datagram);
                    }
                    _ => self.forward_relayed(now, from, datagram),
                }
                return;
            }
            Some(&first) if first == PacketType::Retry as u8 => {
                self.handle_retry(now, from, datagram);
                return;
            }
            Some(&tern_wire::PUNCH_TYPE) => {
                match tern_wire::parse_punch(datagram) {
                    Some(nonce) => self.on_punch(now, from, nonce),
                    None => self.stats.dropped_unroutable += 1,
                }
                return;
            }
            Some(&first) if first == PacketType::ResumeRefused as u8 => {
                self.handle_resume_refused(now, from, datagram);
                return;
            }
            _ => {}
        }
        match peek_receiver_index(datagram) {
            // A connection the relay carries takes its peer's direct
            // packets too (probes, and its move there): only what opens
            // under its keys counts.
            Some(index) => self.handle_indexed(now, index, from, datagram),
            None => self.stats.dropped_unroutable += 1,
        }
    }

    fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.poll_transmit_any(now, limits, buf)
    }

    fn take_answer_expected(&mut self) -> Option<Instant> {
        self.answer_expected.take()
    }

    fn take_exchange_opened(&mut self) -> Option<Instant> {
        self.exchange_opened.take()
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.flush();
        self.prune_timers();
        let next = self.timers.peek().map(|&Reverse((at, _))| at);
        let relay = self.relay.deadline(self.config.relay.idle_timeout);
        [
            next,
            self.rate_wait,
            self.rendezvous.deadline(),
            relay,
            self.relayed.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.budget.saw(now);
        self.handle_rendezvous_timeout(now);
        self.flush();
        loop {
            self.prune_timers();
            let Some(&Reverse((at, index))) = self.timers.peek() else {
                break;
            };
            if at > now {
                break;
            }
            self.timers.pop();
            self.armed.remove(&index);
            if let Some(connection) = self.connections.get_mut(index) {
                connection.handle_timeout(now);
                self.touch(index);
            }
        }
    }

    /// Idle once it holds no connection (every one closed and freed).
    fn is_idle(&mut self) -> bool {
        self.is_empty()
    }
}

impl Endpoint {
    /// A datagram with receiver index `index`, to the connection it names.
    fn handle_indexed(&mut self, now: Instant, index: u32, from: SocketAddr, datagram: &mut [u8]) {
        self.budget.saw(now);
        self.settle_lent();
        match self.connections.get_mut(index) {
            Some(connection) => {
                self.budget.lend(connection);
                connection.handle_datagram(now, from, datagram);
                if connection.wants_to_prove()
                    && let Some(key) = &self.prover
                {
                    connection.prove(key, &mut self.rng);
                }
                if connection.wants_ticket() {
                    let (epoch, wall) = self.wall_epoch;
                    let wall = wall + now.saturating_duration_since(epoch);
                    let issued = Self::issue_ticket(
                        self.responder.as_ref(),
                        connection,
                        wall,
                        &mut self.ticket_rng,
                    );
                    self.stats.tickets_issued += u64::from(issued.is_some());
                    connection.send_ticket(issued);
                }
                if let Some(ticket) = connection.take_ticket()
                    && let Some(responder) = connection.peer_identity()
                {
                    self.tickets.insert(now, responder, ticket);
                    self.stats.tickets_received += 1;
                }
                self.budget.settle(index, connection);
                // Rare, and at most a packet's worth: most packets bring
                // none, and skip collecting.
                let signals: Vec<_> = match connection.poll_signal() {
                    Some(first) => std::iter::once(first)
                        .chain(std::iter::from_fn(|| connection.poll_signal()))
                        .collect(),
                    None => Vec::new(),
                };
                self.touch(index);
                for signal in signals {
                    self.on_signal(now, index, signal);
                }
                self.check_went_direct(now, index);
            }
            None => self.stats.dropped_unroutable += 1,
        }
    }
}
