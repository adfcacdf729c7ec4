//! CUBIC on a modelled bottleneck: a queue of rate R and one-way delay D,
//! in virtual time (see `common/mod.rs`).
//!
//! Checks what CUBIC is for: alone it fills the link; two CUBIC flows share
//! it fairly, even when one comes late (faster with fast convergence than
//! without); beside LEDBAT it takes most of the link, because LEDBAT
//! yields. The queue is drop-tail, 250 ms deep (a common home-router size,
//! deeper than LEDBAT's 100 ms target), and there is no random loss: the
//! only losses are CUBIC's own overflows of the queue. HyStart++ is
//! compared with RFC 5681's slow start by the packets each loses in the
//! first 5 s (all of them in slow start or HyStart++'s Conservative Slow
//! Start).
//!
//! HyStart++ judges a round by its minimum RTT, which is that of the
//! packets sent first, before the queue the round itself builds: it sees
//! the queue a round late, when the window is already about twice the
//! path's capacity, and Conservative Slow Start then grows it about 3 times
//! more over its 5 rounds. On a queue of less than about 5 bandwidth-delay
//! products it therefore overflows once too, but loses fewer packets than a
//! slow start that runs until the queue overflows: a fifth as many on the
//! issue's 100 Mbit/s, 50 ms path, about half as many when the queue is
//! less than two bandwidth-delay products (150 ms).
//!
//! The results over a few rates and round trips are kept as a table in
//! `tests/snapshots/cubic_bottleneck.txt`; run with `TERN_BLESS=1` to
//! rewrite it after an intended change.

mod common;

use common::{Flow, Link, Report, Sim, assert_fair, assert_fills_the_link, assert_snapshot};
use std::sync::OnceLock;
use std::time::Duration;
use tern_congestion::{Controller, Cubic, CubicConfig, Ledbat, LedbatConfig};

const QUEUE: Duration = Duration::from_millis(250);

fn cubic() -> Box<dyn Controller> {
    Box::new(Cubic::new(CubicConfig::default()).expect("the default CUBIC configuration"))
}

fn cubic_with(change: impl FnOnce(&mut CubicConfig)) -> Box<dyn Controller> {
    let mut config = CubicConfig::default();
    change(&mut config);
    Box::new(Cubic::new(config).expect("a valid CUBIC configuration"))
}

fn ledbat() -> Box<dyn Controller> {
    Box::new(Ledbat::new(LedbatConfig::default()).expect("the default LEDBAT configuration"))
}

#[derive(Debug, Clone, Copy)]
struct Case {
    megabits: u64,
    rtt_ms: u64,
}

/// The path first: 100 Mbit/s, 50 ms round trip.
const CASES: [Case; 3] = [
    Case {
        megabits: 100,
        rtt_ms: 50,
    },
    Case {
        megabits: 20,
        rtt_ms: 20,
    },
    Case {
        megabits: 100,
        rtt_ms: 150,
    },
];

impl Case {
    fn link(self) -> Link {
        Link::new(
            self.megabits,
            Duration::from_millis(self.rtt_ms / 2),
            Some(QUEUE),
        )
    }

    /// One CUBIC flow, measured from 2 s on: slow start must have found
    /// the link by then.
    fn alone(self) -> Report {
        let flows = vec![Flow {
            controller: cubic(),
            start: Duration::ZERO,
            clock_offset: 0,
        }];
        Sim::new(self.link(), flows).run(Duration::from_secs(2), Duration::from_secs(40))
    }

    /// The first 5 s of one flow, slow start with HyStart++ or (`hystart`
    /// false) RFC 5681's.
    fn slow_start(self, hystart: bool) -> Report {
        let controller = cubic_with(|config| {
            if !hystart {
                config.hystart = None;
            }
        });
        let flows = vec![Flow {
            controller,
            start: Duration::ZERO,
            clock_offset: 0,
        }];
        Sim::new(self.link(), flows).run(Duration::ZERO, Duration::from_secs(5))
    }

    /// A second CUBIC flow joins 5 s after the first, when the first holds
    /// the whole link; measured over the 100 s from 20 s after it came.
    fn latecomer(self, fast_convergence: bool) -> Report {
        let flows = [Duration::ZERO, Duration::from_secs(5)]
            .into_iter()
            .map(|start| Flow {
                controller: cubic_with(|config| config.fast_convergence = fast_convergence),
                start,
                clock_offset: 0,
            })
            .collect();
        Sim::new(self.link(), flows).run(Duration::from_secs(25), Duration::from_secs(125))
    }

    /// LEDBAT first, then CUBIC from 5 s on.
    fn beside_ledbat(self) -> Report {
        let flows = vec![
            Flow {
                controller: ledbat(),
                start: Duration::ZERO,
                clock_offset: 3_000_000,
            },
            Flow {
                controller: cubic(),
                start: Duration::from_secs(5),
                clock_offset: 0,
            },
        ];
        Sim::new(self.link(), flows).run(Duration::from_secs(15), Duration::from_secs(45))
    }
}

struct Row {
    case: Case,
    alone: Report,
    hystart: Report,
    rfc5681: Report,
    latecomer: Report,
    latecomer_without_fast_convergence: Report,
    beside_ledbat: Report,
}

/// Every scenario of every case.
fn rows() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    common::rows_once(&ROWS, &CASES, |case| Row {
        case,
        alone: case.alone(),
        hystart: case.slow_start(true),
        rfc5681: case.slow_start(false),
        latecomer: case.latecomer(true),
        latecomer_without_fast_convergence: case.latecomer(false),
        beside_ledbat: case.beside_ledbat(),
    })
}

fn table() -> String {
    common::table(
        "CUBIC (RFC 9438, HyStart++) on one bottleneck with a 250 ms drop-tail queue, virtual time; see tests/cubic_bottleneck.rs",
        "| rate       | RTT    | alone: use | alone: queue | 0-5 s drops: HyStart++ / RFC 5681  | 2 flows: Jain | 2 flows: shares | 2 flows, no fast conv.: Jain | vs LEDBAT: CUBIC share | vs LEDBAT: use |",
        "|------------|--------|------------|--------------|-------------------------------------|---------------|-----------------|------------------------------|------------------------|----------------|",
        rows().iter().map(|row| {
            let shares = row.latecomer.shares();
            format!(
                "| {:>3} Mbit/s | {:>3} ms | {:>9.1}% | {:>9.1} ms | {:>20} / {:>12} | {:>13.3} | {:>6.1}% / {:>4.1}% | {:>28.3} | {:>21.1}% | {:>13.1}% |",
                row.case.megabits,
                row.case.rtt_ms,
                row.alone.utilisation * 100.0,
                row.alone.mean_queuing_delay.as_secs_f64() * 1_000.0,
                row.hystart.flows[0].drops,
                row.rfc5681.flows[0].drops,
                row.latecomer.jain(),
                shares[0] * 100.0,
                shares[1] * 100.0,
                row.latecomer_without_fast_convergence.jain(),
                row.beside_ledbat.shares()[1] * 100.0,
                row.beside_ledbat.utilisation * 100.0,
            )
        }),
    )
}

#[test]
fn one_cubic_flow_fills_the_link() {
    for Row { case, alone, .. } in rows() {
        assert_fills_the_link(case, alone);
    }
}

#[test]
fn hystart_loses_less_than_a_slow_start_run_to_overflow() {
    for Row {
        case,
        hystart,
        rfc5681,
        ..
    } in rows()
    {
        let (with, without) = (hystart.flows[0].drops, rfc5681.flows[0].drops);
        assert!(without > 0, "{case:?}: RFC 5681's slow start overflows");
        assert!(with < without, "{case:?}: {with} drops vs {without}");
    }
}

#[test]
fn two_cubic_flows_converge_to_a_fair_share() {
    for Row {
        case, latecomer, ..
    } in rows()
    {
        assert_fair(case, latecomer);
        assert_fills_the_link(case, latecomer);
    }
}

#[test]
fn fast_convergence_makes_the_share_fairer() {
    for Row {
        case,
        latecomer,
        latecomer_without_fast_convergence: without,
        ..
    } in rows()
    {
        assert!(
            latecomer.jain() > without.jain(),
            "{case:?}: Jain {} with, {} without",
            latecomer.jain(),
            without.jain()
        );
    }
}

#[test]
fn cubic_takes_most_of_the_link_from_ledbat() {
    for Row {
        case,
        beside_ledbat,
        ..
    } in rows()
    {
        let share = beside_ledbat.shares()[1];
        assert!(share >= 0.75, "{case:?}: CUBIC took {share}");
        assert_fills_the_link(case, beside_ledbat);
    }
}

#[test]
fn the_table_matches_its_snapshot() {
    assert_snapshot("cubic_bottleneck.txt", &table());
}
