//! A packet-level model of one bottleneck, driven in virtual time.
//!
//! Senders share a FIFO queue drained at `rate` bytes/s (the bottleneck
//! sits at the senders' side, like a home uplink), then `one_way`
//! propagation delay to the receiver; the queue has, optionally, a
//! drop-tail buffer. The
//! receiver acknowledges every packet at once with a one-way-delay sample
//! taken with its own clock (offset from the sender's by an arbitrary
//! constant per flow); ACKs cross an uncongested return path. A dropped
//! packet is reported lost when the ACK of the packet behind it would have
//! arrived. Each sender obeys its controller's window and a [`Pacer`] at
//! the controller's pacing rate.
//!
//! Each sender plays the connection's part of the one-source-of-truth
//! contract: it alone counts bytes in flight and estimates the round trip
//! (RFC 9002 §5's estimator; these ACKs carry no ACK delay, so none is
//! subtracted), and hands both to its controller with every call.
//!
//! A discrete-event loop on a mock clock: no sockets, no threads, no real
//! time, no randomness, so every run gives the same numbers.

use quanta::{Clock, Instant, Mock};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tern_congestion::{Acked, Controller, Lost, OneWayDelay, Pacer, PacerConfig, Rtt, Take};

/// Every packet is a full one.
pub(crate) const PACKET: u64 = 1_452;

/// The shared link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    /// Drain rate, in bytes per second.
    pub(crate) rate: u64,
    /// Propagation delay each way.
    pub(crate) one_way: Duration,
    /// Queue capacity, in bytes (`None`: unlimited).
    pub(crate) buffer: Option<u64>,
}

impl Link {
    /// A link of `megabits` Mbit/s and `one_way` propagation delay each way,
    /// its drop-tail buffer holding `buffer` of drain time (`None`:
    /// unlimited).
    pub(crate) fn new(megabits: u64, one_way: Duration, buffer: Option<Duration>) -> Self {
        let rate = megabits * 1_000_000 / 8;
        Self {
            rate,
            one_way,
            buffer: buffer.map(|b| {
                u64::try_from(u128::from(rate) * b.as_nanos() / 1_000_000_000)
                    .expect("buffer size fits in u64")
            }),
        }
    }
}

/// A sender on the link.
pub(crate) struct Flow {
    /// Its congestion controller.
    pub(crate) controller: Box<dyn Controller>,
    /// When it starts sending.
    pub(crate) start: Duration,
    /// Offset of its receiver's clock from the sender's, in nanoseconds.
    pub(crate) clock_offset: i64,
}

/// What a flow did during the measured interval.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FlowStats {
    /// Bytes that left the bottleneck.
    pub(crate) bytes: u64,
    /// Packets dropped at the bottleneck.
    pub(crate) drops: u64,
}

/// What the link saw during the measured interval.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    /// Per flow, in the order given.
    pub(crate) flows: Vec<FlowStats>,
    /// Link busy fraction: bytes that left / (rate × interval).
    pub(crate) utilisation: f64,
    /// Mean time packets waited in the queue.
    pub(crate) mean_queuing_delay: Duration,
}

impl Report {
    /// Share of the link's output each flow got.
    pub(crate) fn shares(&self) -> Vec<f64> {
        let total: u64 = self.flows.iter().map(|f| f.bytes).sum();
        self.flows
            .iter()
            .map(|f| f.bytes as f64 / total.max(1) as f64)
            .collect()
    }

    /// Jain's fairness index of the flows' throughputs: 1 when equal,
    /// 1/n when one flow has everything.
    pub(crate) fn jain(&self) -> f64 {
        let x: Vec<f64> = self.flows.iter().map(|f| f.bytes as f64).collect();
        let sum: f64 = x.iter().sum();
        let squares: f64 = x.iter().map(|v| v * v).sum();
        sum * sum / (x.len() as f64 * squares)
    }
}

/// Asserts that the flows together kept the link at least 95% busy.
pub(crate) fn assert_fills_the_link(case: &impl Debug, report: &Report) {
    assert!(
        report.utilisation >= 0.95,
        "{case:?}: link use {}",
        report.utilisation
    );
}

/// Asserts that the flows shared the link fairly: a Jain index of at least
/// 0.9.
pub(crate) fn assert_fair(case: &impl Debug, report: &Report) {
    assert!(
        report.jain() >= 0.9,
        "{case:?}: Jain {} {:?}",
        report.jain(),
        report.shares()
    );
}

/// Every case's row, computed once in `cell` for all the tests of a file
/// (each scenario runs many simulated seconds).
pub(crate) fn rows_once<C: Copy, R>(
    cell: &'static OnceLock<Vec<R>>,
    cases: &[C],
    row: impl Fn(C) -> R,
) -> &'static [R] {
    cell.get_or_init(|| cases.iter().map(|&case| row(case)).collect())
}

/// A results table: a title, a blank line, the column headers, their rule
/// and one line per row.
pub(crate) fn table(
    title: &str,
    columns: &str,
    rule: &str,
    rows: impl Iterator<Item = String>,
) -> String {
    let mut out = [title, "", columns, rule].join("\n");
    out.push('\n');
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
    out
}

/// Compares `fresh` with the snapshot `tests/snapshots/{name}`, or rewrites
/// the snapshot with it when `TERN_BLESS` is set.
pub(crate) fn assert_snapshot(name: &str, fresh: &str) {
    let path = format!("{}/tests/snapshots/{name}", env!("CARGO_MANIFEST_DIR"));
    println!("{fresh}");
    if std::env::var_os("TERN_BLESS").is_some() {
        std::fs::write(path, fresh).expect("writing the snapshot");
        return;
    }
    let kept =
        std::fs::read_to_string(path).expect("no snapshot yet: run with TERN_BLESS=1 to write it");
    assert_eq!(
        fresh, kept,
        "the bottleneck table changed: check it, then TERN_BLESS=1"
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The flow may be able to send (pacer timer or start).
    Wake { flow: usize },
    /// The ACK of one packet arrives at its sender.
    Ack {
        flow: usize,
        sent: Instant,
        owd_nanos: i64,
    },
    /// The sender learns that a packet was dropped.
    Loss { flow: usize, sent: Instant },
}

/// The sender's round-trip estimate, as RFC 9002 §5.3 computes it: the
/// first sample, then `7/8 × smoothed + 1/8 × sample`; the minimum over the
/// connection; the latest sample.
struct RttEstimate {
    rtt: Rtt,
    sampled: bool,
}

impl RttEstimate {
    fn new() -> Self {
        Self {
            rtt: Rtt::initial(Duration::from_millis(333)),
            sampled: false,
        }
    }

    fn update(&mut self, latest: Duration) {
        let (smoothed, min) = if self.sampled {
            (
                (self.rtt.smoothed() * 7 + latest) / 8,
                self.rtt.min().min(latest),
            )
        } else {
            (latest, latest)
        };
        self.sampled = true;
        self.rtt = Rtt::new(smoothed, min, latest);
    }
}

struct Sender {
    flow: Flow,
    pacer: Pacer,
    rtt: RttEstimate,
    /// Bytes sent and neither acknowledged nor declared lost.
    bytes_in_flight: u64,
    /// The pending wake-up, if any (to avoid piling up duplicates).
    wake_at: Option<u64>,
    stats: FlowStats,
}

/// The simulation.
pub(crate) struct Sim {
    clock: Clock,
    mock: Arc<Mock>,
    now: u64,
    link: Link,
    senders: Vec<Sender>,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    link_free_at: u64,
    measure_from: u64,
    end: u64,
    queued_nanos: u128,
    queued_packets: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("simulated durations fit in u64")
}

impl Sim {
    /// A link with these flows.
    pub(crate) fn new(link: Link, flows: Vec<Flow>) -> Self {
        let (clock, mock) = Clock::mock();
        let mut sim = Self {
            clock,
            mock,
            now: 0,
            link,
            senders: Vec::new(),
            events: BinaryHeap::new(),
            sequence: 0,
            link_free_at: 0,
            measure_from: 0,
            end: 0,
            queued_nanos: 0,
            queued_packets: 0,
        };
        for (index, flow) in flows.into_iter().enumerate() {
            let start = nanos(flow.start);
            sim.senders.push(Sender {
                flow,
                pacer: Pacer::new(PacerConfig::default()),
                rtt: RttEstimate::new(),
                bytes_in_flight: 0,
                wake_at: Some(start),
                stats: FlowStats::default(),
            });
            sim.schedule(start, Event::Wake { flow: index });
        }
        sim
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, event)));
    }

    fn instant(&self) -> Instant {
        self.clock.now()
    }

    /// Runs until `end`, counting statistics from `measure_from` on.
    pub(crate) fn run(mut self, measure_from: Duration, end: Duration) -> Report {
        self.measure_from = nanos(measure_from);
        let end = nanos(end);
        self.end = end;
        while let Some(Reverse((at, _, event))) = self.events.pop() {
            if at > end {
                break;
            }
            self.mock.increment(at - self.now);
            self.now = at;
            match event {
                Event::Wake { flow } => {
                    if self.senders[flow].wake_at == Some(at) {
                        self.senders[flow].wake_at = None;
                    }
                    self.try_send(flow);
                }
                Event::Ack {
                    flow,
                    sent,
                    owd_nanos,
                } => {
                    let now = self.instant();
                    let sender = &mut self.senders[flow];
                    sender.rtt.update(now.duration_since(sent));
                    sender.bytes_in_flight -= PACKET;
                    let acked = Acked {
                        bytes: PACKET,
                        largest_sent_at: sent,
                        bytes_in_flight: sender.bytes_in_flight,
                        one_way_delay: Some(OneWayDelay::from_nanos(owd_nanos)),
                        app_limited: false,
                    };
                    sender.flow.controller.on_ack(now, &acked, &sender.rtt.rtt);
                    self.try_send(flow);
                }
                Event::Loss { flow, sent } => {
                    let now = self.instant();
                    let sender = &mut self.senders[flow];
                    sender.bytes_in_flight -= PACKET;
                    let lost = Lost {
                        packets: 1,
                        bytes: PACKET,
                        largest_sent_at: sent,
                    };
                    sender.flow.controller.on_loss(now, &lost, &sender.rtt.rtt);
                    self.try_send(flow);
                }
            }
        }
        let interval = end.saturating_sub(self.measure_from).max(1);
        let total: u64 = self.senders.iter().map(|s| s.stats.bytes).sum();
        Report {
            flows: self.senders.iter().map(|s| s.stats).collect(),
            utilisation: total as f64 * 1e9 / (self.link.rate as f64 * interval as f64),
            mean_queuing_delay: Duration::from_nanos(
                (self.queued_nanos / u128::from(self.queued_packets.max(1))) as u64,
            ),
        }
    }

    /// Sends as much as the window and the pacer allow, then sleeps until
    /// the pacer's next slot or the next ACK.
    fn try_send(&mut self, flow: usize) {
        if self.now < nanos(self.senders[flow].flow.start) {
            return;
        }
        loop {
            let now = self.instant();
            let sender = &mut self.senders[flow];
            let cc = &sender.flow.controller;
            if sender.bytes_in_flight + PACKET > cc.window() {
                return;
            }
            match sender
                .pacer
                .poll(now, cc.pacing_rate(&sender.rtt.rtt), PACKET)
            {
                Take::Now => {
                    sender.pacer.on_sent(now, PACKET);
                    sender.bytes_in_flight += PACKET;
                    sender.flow.controller.on_sent(now, sender.bytes_in_flight);
                    self.transmit(flow, now);
                }
                Take::WaitUntil(at) => {
                    let at = self.now + nanos(at.duration_since(now)).max(1);
                    if sender.wake_at.is_none_or(|pending| pending > at) {
                        sender.wake_at = Some(at);
                        self.schedule(at, Event::Wake { flow });
                    }
                    return;
                }
            }
        }
    }

    /// One packet enters the bottleneck queue now.
    fn transmit(&mut self, flow: usize, sent: Instant) {
        let d = nanos(self.link.one_way);
        let arrive = self.now;
        let backlog_nanos = self.link_free_at.saturating_sub(arrive);
        let backlog = u128::from(backlog_nanos) * u128::from(self.link.rate) / 1_000_000_000;
        if self
            .link
            .buffer
            .is_some_and(|buffer| backlog + u128::from(PACKET) > u128::from(buffer))
        {
            if (self.measure_from..=self.end).contains(&arrive) {
                self.senders[flow].stats.drops += 1;
            }
            // The loss shows when the next packet's ACK would have come.
            self.schedule(arrive + backlog_nanos + 2 * d, Event::Loss { flow, sent });
            return;
        }
        let transmission = PACKET * 1_000_000_000 / self.link.rate;
        let depart = arrive.max(self.link_free_at) + transmission;
        self.link_free_at = depart;
        if (self.measure_from..=self.end).contains(&depart) {
            self.senders[flow].stats.bytes += PACKET;
            self.queued_nanos += u128::from(backlog_nanos);
            self.queued_packets += 1;
        }
        let received = depart + d;
        let owd_nanos = i64::try_from(received - self.now).expect("delay fits")
            + self.senders[flow].flow.clock_offset;
        self.schedule(
            received + d,
            Event::Ack {
                flow,
                sent,
                owd_nanos,
            },
        );
    }
}
