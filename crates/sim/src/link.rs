//! One direction between two nodes: its impairments, its bottleneck queue
//! and its counters.

use std::collections::VecDeque;
use std::time::Duration;

use quanta::Instant;
use rand_core_010::Rng;
use rand_pcg::Pcg64Mcg;

/// Bursty loss by the Gilbert–Elliott model: a good and a bad state, each
/// with its own loss probability, and the chances per datagram of moving
/// between them. The mean burst length is `1 / p_bad_to_good` datagrams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Chance per datagram of entering the bad state from the good one.
    pub p_good_to_bad: f64,
    /// Chance per datagram of leaving the bad state.
    pub p_bad_to_good: f64,
    /// Loss probability in the good state.
    pub loss_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The long-run share of datagrams lost.
    pub fn mean_loss(&self) -> f64 {
        let bad = self.p_good_to_bad / (self.p_good_to_bad + self.p_bad_to_good);
        bad * self.loss_bad + (1.0 - bad) * self.loss_good
    }
}

/// A bottleneck: a serialising rate and a finite tail-drop queue before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bottleneck {
    /// Link rate in bits per second.
    pub bits_per_second: u64,
    /// Bytes the queue holds (waiting or being serialised); a datagram that
    /// does not fit is dropped.
    pub queue_bytes: usize,
}

/// How one direction between two nodes behaves. The default is a perfect
/// link with no delay.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `0..=jitter` per datagram;
    /// datagrams overtake each other when it exceeds their spacing.
    pub jitter: Duration,
    /// Chance a datagram is held back one extra `delay` (plus 1 ms), so
    /// later ones overtake it, even without jitter.
    pub reorder: f64,
    /// Chance a datagram is lost, independently of the others.
    pub loss: f64,
    /// Bursty loss on top of `loss`.
    pub burst_loss: Option<GilbertElliott>,
    /// Chance a datagram arrives twice (the copy with its own jitter).
    pub duplicate: f64,
    /// Chance one bit of a datagram is flipped on the way.
    pub corrupt: f64,
    /// A rate limit with a finite queue.
    pub bottleneck: Option<Bottleneck>,
    /// Datagrams larger than this many bytes are dropped, as a path MTU does.
    pub max_datagram: Option<usize>,
}

/// What happened on one link, counted since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub sent: u64,
    /// Datagrams (copies included) handed to the receiving node.
    pub delivered: u64,
    /// Lost by random or bursty loss.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Delivered with a flipped bit.
    pub corrupted: u64,
    /// Dropped because the bottleneck queue was full.
    pub queue_dropped: u64,
    /// Dropped for exceeding the link's maximum datagram size.
    pub too_large: u64,
    /// Dropped while the link was down.
    pub down_dropped: u64,
    /// Held back to be overtaken.
    pub reordered: u64,
    /// The most bytes the bottleneck queue held.
    pub max_queue_bytes: u64,
    /// The longest a datagram waited in the bottleneck queue (including its
    /// own serialisation).
    pub max_sojourn: Duration,
    /// Total time datagrams spent in the bottleneck queue, for the mean.
    pub total_sojourn: Duration,
}

/// Why a datagram did not make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Random or bursty loss.
    Lost,
    /// The bottleneck queue was full.
    QueueFull,
    /// Larger than the link's maximum datagram size.
    TooLarge,
    /// The link was down.
    LinkDown,
    /// No node has the destination address.
    Unroutable,
    /// A NAT refused it on the way in: no mapping for its port, or the
    /// NAT's filtering rule refuses its sender.
    NatFiltered,
    /// Sent to the sender's own NAT's public address, and the NAT does not
    /// hairpin.
    NatHairpin,
    /// The sender's NAT had no free port for a new mapping.
    NatPortsExhausted,
}

/// The fate of one datagram offered to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Dropped(DropReason),
    /// Arrives after `delay` (from now); maybe a copy after `copy_delay`;
    /// maybe with bit `flip` flipped.
    Delivered {
        delay: Duration,
        copy_delay: Option<Duration>,
        flip: Option<usize>,
    },
}

/// A link's configuration and state.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) config: LinkConfig,
    pub(crate) stats: LinkStats,
    rng: Pcg64Mcg,
    /// The Gilbert–Elliott state: in the bad state?
    bad: bool,
    pub(crate) down: bool,
    /// Departure times and sizes of datagrams in the bottleneck queue.
    queue: VecDeque<(Instant, usize)>,
    queued_bytes: usize,
}

/// A uniform draw in [0, 1).
fn unit(rng: &mut Pcg64Mcg) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn chance(rng: &mut Pcg64Mcg, p: f64) -> bool {
    p > 0.0 && unit(rng) < p
}

impl Link {
    pub(crate) fn new(config: LinkConfig, rng: Pcg64Mcg) -> Self {
        Self {
            config,
            stats: LinkStats::default(),
            rng,
            bad: false,
            down: false,
            queue: VecDeque::new(),
            queued_bytes: 0,
        }
    }

    /// Bytes in the bottleneck queue at `now`.
    pub(crate) fn queue_bytes(&mut self, now: Instant) -> usize {
        self.drain_queue(now);
        self.queued_bytes
    }

    fn drain_queue(&mut self, now: Instant) {
        while let Some(&(departs, len)) = self.queue.front() {
            if departs > now {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= len;
        }
    }

    fn jittered(&mut self) -> Duration {
        let jitter = self.config.jitter;
        let extra = if jitter.is_zero() {
            Duration::ZERO
        } else {
            jitter.mul_f64(unit(&mut self.rng))
        };
        self.config.delay + extra
    }

    /// Decides what happens to a datagram of `len` bytes offered at `now`.
    pub(crate) fn offer(&mut self, now: Instant, len: usize) -> Fate {
        self.stats.sent += 1;
        if self.down {
            self.stats.down_dropped += 1;
            return Fate::Dropped(DropReason::LinkDown);
        }
        if self.config.max_datagram.is_some_and(|max| len > max) {
            self.stats.too_large += 1;
            return Fate::Dropped(DropReason::TooLarge);
        }
        let mut lost = chance(&mut self.rng, self.config.loss);
        if let Some(ge) = self.config.burst_loss {
            let flip = if self.bad {
                ge.p_bad_to_good
            } else {
                ge.p_good_to_bad
            };
            if chance(&mut self.rng, flip) {
                self.bad = !self.bad;
            }
            let p = if self.bad { ge.loss_bad } else { ge.loss_good };
            lost |= chance(&mut self.rng, p);
        }
        if lost {
            self.stats.lost += 1;
            return Fate::Dropped(DropReason::Lost);
        }
        let mut wait = Duration::ZERO;
        if let Some(bottleneck) = self.config.bottleneck {
            self.drain_queue(now);
            if self.queued_bytes + len > bottleneck.queue_bytes {
                self.stats.queue_dropped += 1;
                return Fate::Dropped(DropReason::QueueFull);
            }
            let start = self.queue.back().map_or(now, |&(last, _)| last.max(now));
            let bits = len as u128 * 8;
            let nanos = bits * 1_000_000_000 / u128::from(bottleneck.bits_per_second.max(1));
            let departs = start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
            self.queue.push_back((departs, len));
            self.queued_bytes += len;
            wait = departs.saturating_duration_since(now);
            self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes as u64);
            self.stats.max_sojourn = self.stats.max_sojourn.max(wait);
            self.stats.total_sojourn += wait;
        }
        let mut delay = wait + self.jittered();
        if chance(&mut self.rng, self.config.reorder) {
            self.stats.reordered += 1;
            delay += self.config.delay + Duration::from_millis(1);
        }
        let copy_delay = chance(&mut self.rng, self.config.duplicate).then(|| {
            self.stats.duplicated += 1;
            wait + self.jittered()
        });
        let flip = (len > 0 && chance(&mut self.rng, self.config.corrupt)).then(|| {
            self.stats.corrupted += 1;
            (self.rng.next_u64() % (len as u64 * 8)) as usize
        });
        Fate::Delivered {
            delay,
            copy_delay,
            flip,
        }
    }
}
