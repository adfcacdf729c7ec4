//! The simulator: nodes, links between them, and the events of a run in
//! virtual time.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quanta::{Clock, Instant, Mock};
use rand_core_010::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::link::{DropReason, Fate, Link, LinkConfig, LinkStats};
use crate::nat::Nat;
use crate::node::Node;
use crate::pcap::Capture;
use crate::trace::{Digest, TraceEvent, TraceKind};

mod nats;

pub use nats::NatId;

/// Largest datagram a node may send (the UDP maximum over IPv4 is 65 507;
/// the buffer is the 16-bit maximum).
pub const MAX_DATAGRAM: usize = 65_535;

/// Steps at one instant after which the run is declared a livelock (a node
/// that keeps asking for a timer in the past or never stops sending).
const LIVELOCK_STEPS: u64 = 10_000_000;

/// A node's handle in its simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// How a simulation starts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SimConfig {
    /// Seeds every random choice of the run (see [`crate::Seed`]).
    pub seed: u64,
    /// Links between nodes that were not configured otherwise.
    pub default_link: LinkConfig,
    /// Keep every [`TraceEvent`] (the digest is kept either way).
    pub trace: bool,
}

impl SimConfig {
    /// Perfect links, no trace, this seed.
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            default_link: LinkConfig::default(),
            trace: false,
        }
    }

    /// The same with `link` between any two nodes not configured otherwise.
    pub fn with_default_link(self, link: LinkConfig) -> Self {
        Self {
            default_link: link,
            ..self
        }
    }

    /// The same, keeping the full trace.
    pub fn with_trace(self) -> Self {
        Self {
            trace: true,
            ..self
        }
    }
}

/// An address was given to two nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("address {0} belongs to another node")]
pub struct AddressInUse(pub SocketAddr);

/// [`Sim::run_until`] reached its deadline first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the condition did not hold within {elapsed:?} of virtual time")]
pub struct DeadlineReached {
    /// Virtual time elapsed when it gave up.
    pub elapsed: Duration,
}

/// Counts over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimStats {
    /// Events processed (deliveries, timers, scheduled changes).
    pub events: u64,
    /// Datagrams handed to nodes.
    pub delivered: u64,
    /// Datagrams whose destination no node has.
    pub unroutable: u64,
}

/// Where a datagram on a link is going.
#[derive(Debug, Clone, Copy)]
enum Hop {
    /// Straight to a node's own address.
    Node { node: usize, local: SocketAddr },
    /// To a NAT's public side, which decides on arrival where it goes on.
    Nat { nat: usize, port: u16 },
}

enum Kind {
    Deliver {
        to: Hop,
        from: SocketAddr,
        datagram: Vec<u8>,
    },
    Rebind {
        local: SocketAddr,
        public: SocketAddr,
    },
    LinkDown {
        from: usize,
        to: usize,
        down: bool,
    },
}

struct Scheduled {
    at: Instant,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Earlier first; at equal times, in the order they were scheduled.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Slot<N> {
    node: N,
    addrs: Vec<SocketAddr>,
    timer: Option<Instant>,
    dirty: bool,
    /// The NAT the node sits behind.
    nat: Option<usize>,
}

/// A seeded network of sans-IO nodes in virtual time.
///
/// Nothing waits on a wall clock: [`step`](Self::step) jumps to the next
/// event. The same seed and the same nodes give the same run, event for
/// event ([`digest`](Self::digest) says so in one number). Memory holds
/// what is in flight, not what has passed: delivered datagrams' buffers
/// are reused.
pub struct Sim<N> {
    clock: Clock,
    mock: Arc<Mock>,
    start: Instant,
    config: SimConfig,
    nodes: Vec<Slot<N>>,
    /// Address as the network shows it → (node, the node's own address).
    routes: HashMap<SocketAddr, (usize, SocketAddr)>,
    /// A node's own address → how the network shows it, after a rebinding.
    public: HashMap<SocketAddr, SocketAddr>,
    links: HashMap<(usize, usize), Link>,
    link_configs: HashMap<(usize, usize), LinkConfig>,
    nats: Vec<Nat>,
    /// A NAT's public address → the NAT.
    nat_by_ip: HashMap<IpAddr, usize>,
    events: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    pool: Vec<Vec<u8>>,
    /// Datagram buffers ever made: the pool plus what is in flight.
    buffers: usize,
    transmit_buf: Vec<u8>,
    dirty: Vec<usize>,
    trace: Option<Vec<TraceEvent>>,
    digest: Digest,
    stats: SimStats,
    capture: Option<Capture>,
    /// Steps taken since the clock last moved.
    steps_at_now: u64,
}

impl<N: Node> std::fmt::Debug for Sim<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("elapsed", &self.elapsed())
            .field("nodes", &self.nodes.len())
            .field("in_flight", &self.events.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<N: Node> Sim<N> {
    /// An empty network.
    pub fn new(config: SimConfig) -> Self {
        let (clock, mock) = Clock::mock();
        // Start away from zero so that `now - something` never underflows.
        mock.increment(Duration::from_secs(1));
        let start = clock.now();
        Self {
            clock,
            mock,
            start,
            config,
            nodes: Vec::new(),
            routes: HashMap::new(),
            public: HashMap::new(),
            links: HashMap::new(),
            link_configs: HashMap::new(),
            nats: Vec::new(),
            nat_by_ip: HashMap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            pool: Vec::new(),
            buffers: 0,
            transmit_buf: vec![0; MAX_DATAGRAM],
            dirty: Vec::new(),
            trace: config.trace.then(Vec::new),
            digest: Digest::default(),
            stats: SimStats::default(),
            capture: None,
            steps_at_now: 0,
        }
    }

    /// Adds `node` with its addresses (at least one).
    pub fn add_node(&mut self, node: N, addrs: &[SocketAddr]) -> Result<NodeId, AddressInUse> {
        self.add_node_in(None, node, addrs)
    }

    fn add_node_in(
        &mut self,
        nat: Option<usize>,
        node: N,
        addrs: &[SocketAddr],
    ) -> Result<NodeId, AddressInUse> {
        if let Some(taken) = addrs.iter().find(|a| self.routes.contains_key(a)) {
            return Err(AddressInUse(*taken));
        }
        let id = self.nodes.len();
        for addr in addrs {
            self.routes.insert(*addr, (id, *addr));
        }
        self.nodes.push(Slot {
            node,
            addrs: addrs.to_vec(),
            timer: None,
            dirty: false,
            nat,
        });
        self.mark_dirty(id);
        Ok(NodeId(id))
    }

    /// The clock the run's instants come from (a mock: only the simulator moves it).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The virtual time now.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Virtual time since the simulation started.
    pub fn elapsed(&self) -> Duration {
        self.now().saturating_duration_since(self.start)
    }

    /// A node.
    pub fn node(&self, id: NodeId) -> &N {
        &self.nodes[id.0].node
    }

    /// A node, to change from outside (an application call); it is polled
    /// for datagrams and its timer at the next step.
    pub fn node_mut(&mut self, id: NodeId) -> &mut N {
        self.mark_dirty(id.0);
        &mut self.nodes[id.0].node
    }

    /// Sets the link from `from` to `to` (one direction).
    pub fn set_link(&mut self, from: NodeId, to: NodeId, config: LinkConfig) {
        self.link_configs.insert((from.0, to.0), config);
        if let Some(link) = self.links.get_mut(&(from.0, to.0)) {
            link.config = config;
        }
    }

    /// Sets both directions between `a` and `b`.
    pub fn set_links_between(&mut self, a: NodeId, b: NodeId, config: LinkConfig) {
        self.set_link(a, b, config);
        self.set_link(b, a, config);
    }

    /// The counters of the link from `from` to `to`.
    pub fn link_stats(&self, from: NodeId, to: NodeId) -> LinkStats {
        self.links
            .get(&(from.0, to.0))
            .map(|l| l.stats)
            .unwrap_or_default()
    }

    /// Bytes in the bottleneck queue from `from` to `to` now.
    pub fn queue_bytes(&mut self, from: NodeId, to: NodeId) -> usize {
        let now = self.now();
        self.links
            .get_mut(&(from.0, to.0))
            .map_or(0, |l| l.queue_bytes(now))
    }

    /// From `after` on, the node's address `local` shows as `public` (a NAT
    /// rebinding): its datagrams arrive from `public`, datagrams to
    /// `public` reach it, and the address it showed before reaches nothing.
    pub fn schedule_rebind(&mut self, after: Duration, local: SocketAddr, public: SocketAddr) {
        self.schedule(self.now() + after, Kind::Rebind { local, public });
    }

    /// Both directions between `a` and `b` go down `after` from now, for `length`.
    pub fn schedule_partition(&mut self, a: NodeId, b: NodeId, after: Duration, length: Duration) {
        let down = self.now() + after;
        for (from, to) in [(a.0, b.0), (b.0, a.0)] {
            self.schedule(
                down,
                Kind::LinkDown {
                    from,
                    to,
                    down: true,
                },
            );
            self.schedule(
                down + length,
                Kind::LinkDown {
                    from,
                    to,
                    down: false,
                },
            );
        }
    }

    /// Writes every delivered datagram from now on to a pcap file at `path`.
    pub fn capture_pcap(&mut self, path: &Path) -> io::Result<()> {
        self.capture = Some(Capture::create(path)?);
        Ok(())
    }

    /// Counts over the whole run.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// Every event so far, if the trace was asked for.
    pub fn trace(&self) -> Option<&[TraceEvent]> {
        self.trace.as_deref()
    }

    /// A digest of every event so far: equal for equal runs.
    pub fn digest(&self) -> u64 {
        self.digest.value()
    }

    /// Datagram buffers made so far. They are reused once delivered, so this
    /// is the most datagrams ever in flight at once, not the run's total.
    pub fn datagram_buffers(&self) -> usize {
        self.buffers
    }

    /// Datagrams and scheduled changes not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.events.len()
    }

    fn mark_dirty(&mut self, id: usize) {
        if !self.nodes[id].dirty {
            self.nodes[id].dirty = true;
            self.dirty.push(id);
        }
    }

    fn schedule(&mut self, at: Instant, kind: Kind) {
        self.seq += 1;
        self.events.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            kind,
        }));
    }

    fn record(&mut self, kind: TraceKind, from: SocketAddr, to: SocketAddr, len: usize) {
        let event = TraceEvent {
            at: self.elapsed(),
            kind,
            from,
            to,
            len,
        };
        self.digest.add(&event);
        if let Some(trace) = &mut self.trace {
            trace.push(event);
        }
    }

    /// The next instant something happens, if anything is left.
    pub fn next_time(&self) -> Option<Instant> {
        let event = self.events.peek().map(|e| e.0.at);
        let timer = self.nodes.iter().filter_map(|s| s.timer).min();
        match (event, timer) {
            (Some(e), Some(t)) => Some(e.min(t)),
            (e, t) => e.or(t),
        }
    }

    /// Processes the next event (a delivery, a timer, a scheduled change),
    /// moving the clock to it. False when nothing is left to happen.
    ///
    /// # Panics
    /// If ten million steps pass without the clock moving: a node that
    /// keeps asking for a timer in the past or never stops sending would
    /// otherwise hang the test.
    pub fn step(&mut self) -> bool {
        self.flush();
        let event_at = self.events.peek().map(|e| e.0.at);
        let timer = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.timer.map(|t| (t, i)))
            .min();
        let take_event = match (event_at, timer) {
            (None, None) => return false,
            (Some(e), Some((t, _))) => e <= t,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        let at = if take_event {
            event_at
        } else {
            timer.map(|t| t.0)
        };
        self.advance_to(at.unwrap_or_else(|| self.now()));
        self.stats.events += 1;
        if take_event {
            if let Some(Reverse(event)) = self.events.pop() {
                self.process(event.kind);
            }
        } else if let Some((_, i)) = timer {
            let now = self.now();
            let slot = &mut self.nodes[i];
            slot.timer = None;
            slot.node.handle_timeout(now);
            self.mark_dirty(i);
        }
        self.flush();
        true
    }

    /// Steps until `done` holds or the virtual `deadline` (from the start
    /// of the simulation) passes; the clock then stands at the deadline.
    pub fn run_until(
        &mut self,
        mut done: impl FnMut(&Self) -> bool,
        deadline: Duration,
    ) -> Result<(), DeadlineReached> {
        let deadline_at = self.start + deadline;
        loop {
            self.flush();
            if done(self) {
                return Ok(());
            }
            match self.next_time() {
                Some(next) if next <= deadline_at => {
                    self.step();
                }
                _ => {
                    self.advance_to(deadline_at);
                    return Err(DeadlineReached {
                        elapsed: self.elapsed(),
                    });
                }
            }
        }
    }

    /// Steps for `length` of virtual time from now.
    pub fn run_for(&mut self, length: Duration) {
        let until = self.elapsed() + length;
        let _ = self.run_until(|_| false, until);
    }

    fn advance_to(&mut self, at: Instant) {
        let now = self.now();
        if at > now {
            self.mock.increment(at.saturating_duration_since(now));
            self.steps_at_now = 0;
        } else {
            self.steps_at_now += 1;
            assert!(
                self.steps_at_now < LIVELOCK_STEPS,
                "tern-sim: {LIVELOCK_STEPS} steps without time passing: a node keeps \
                 asking for a timer in the past or never stops sending"
            );
        }
    }

    fn process(&mut self, kind: Kind) {
        match kind {
            Kind::Deliver { to, from, datagram } => match to {
                Hop::Node { node, local } => {
                    let shown = self.public.get(&local).copied().unwrap_or(local);
                    self.deliver(node, local, shown, from, datagram);
                }
                Hop::Nat { nat, port } => self.arrive_at_nat(nat, port, from, datagram),
            },
            Kind::Rebind { local, public } => {
                let old = self.public.get(&local).copied().unwrap_or(local);
                if let Some(owner) = self.routes.remove(&old) {
                    self.routes.insert(public, owner);
                    self.public.insert(local, public);
                }
            }
            Kind::LinkDown { from, to, down } => {
                self.link(from, to).down = down;
            }
        }
    }

    /// Hands `datagram` from `from` to `node` at its address `local`, which
    /// the network shows as `shown`.
    fn deliver(
        &mut self,
        node: usize,
        local: SocketAddr,
        shown: SocketAddr,
        from: SocketAddr,
        mut datagram: Vec<u8>,
    ) {
        let now = self.now();
        self.stats.delivered += 1;
        self.record(TraceKind::Delivered, from, local, datagram.len());
        if let Some(capture) = &mut self.capture {
            // A capture that cannot be written is given up, not the run.
            if capture
                .record(
                    now.saturating_duration_since(self.start),
                    from,
                    shown,
                    &datagram,
                )
                .is_err()
            {
                self.capture = None;
            }
        }
        self.nodes[node]
            .node
            .handle_datagram(now, local, from, &mut datagram);
        self.pool.push(datagram);
        self.mark_dirty(node);
    }

    fn link(&mut self, from: usize, to: usize) -> &mut Link {
        let config = self
            .link_configs
            .get(&(from, to))
            .copied()
            .unwrap_or(self.config.default_link);
        let seed = self.config.seed;
        self.links.entry((from, to)).or_insert_with(|| {
            let stream = ((from as u64) << 32) ^ to as u64;
            Link::new(
                config,
                Pcg64Mcg::seed_from_u64(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            )
        })
    }

    /// Polls every node marked dirty for its datagrams and its timer.
    fn flush(&mut self) {
        while let Some(id) = self.dirty.pop() {
            self.nodes[id].dirty = false;
            let now = self.now();
            while let Some(transmit) = self.nodes[id]
                .node
                .poll_transmit(now, &mut self.transmit_buf)
            {
                let len = transmit.len.min(MAX_DATAGRAM);
                let source = transmit
                    .source
                    .filter(|s| self.nodes[id].addrs.contains(s))
                    .or_else(|| self.nodes[id].addrs.first().copied());
                let Some(source) = source else {
                    continue;
                };
                let stride = transmit
                    .segment_size
                    .filter(|s| *s > 0)
                    .unwrap_or(len.max(1));
                let mut offset = 0;
                loop {
                    let end = (offset + stride).min(len);
                    self.send(id, source, transmit.destination, offset..end);
                    offset = end;
                    if offset >= len {
                        break;
                    }
                }
            }
            self.nodes[id].timer = self.nodes[id].node.poll_timeout();
        }
    }

    /// Puts `transmit_buf[range]` from node `id` onto its link.
    fn send(
        &mut self,
        id: usize,
        source: SocketAddr,
        destination: SocketAddr,
        range: std::ops::Range<usize>,
    ) {
        let shown = self.public.get(&source).copied().unwrap_or(source);
        let len = range.len();
        let from = match self.through_nat(id, shown, destination) {
            Ok(from) => from,
            Err(reason) => {
                self.record(TraceKind::Sent, shown, destination, len);
                self.record(TraceKind::Dropped(reason), shown, destination, len);
                return;
            }
        };
        self.record(TraceKind::Sent, from, destination, len);
        let Some(to) = self.hop(id, destination) else {
            self.stats.unroutable += 1;
            self.record(
                TraceKind::Dropped(DropReason::Unroutable),
                from,
                destination,
                len,
            );
            return;
        };
        let now = self.now();
        let link_end = match to {
            Hop::Node { node, .. } => node,
            Hop::Nat { nat, .. } => nats::link_end(nat),
        };
        match self.link(id, link_end).offer(now, len) {
            Fate::Dropped(reason) => {
                self.record(TraceKind::Dropped(reason), from, destination, len)
            }
            Fate::Delivered {
                delay,
                copy_delay,
                flip,
            } => {
                for (delay, flip) in [(Some(delay), flip), (copy_delay, None)] {
                    let Some(delay) = delay else { continue };
                    let mut datagram = self.pool.pop().unwrap_or_else(|| {
                        self.buffers += 1;
                        Vec::new()
                    });
                    datagram.clear();
                    datagram.extend_from_slice(&self.transmit_buf[range.clone()]);
                    if let Some(bit) = flip {
                        datagram[bit / 8] ^= 1 << (bit % 8);
                    }
                    self.schedule(now + delay, Kind::Deliver { to, from, datagram });
                }
            }
        }
    }
}
