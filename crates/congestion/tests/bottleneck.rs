//! LEDBAT on a modelled bottleneck: a queue of rate R and one-way delay D,
//! in virtual time (see `common/mod.rs`).
//!
//! Checks what LEDBAT is for: alone, it fills the link while keeping the
//! queue near the target; two LEDBAT flows share the link fairly even when
//! one comes late; against a loss-based flow it yields. The results over a
//! small matrix of rates and delays are kept as a table in
//! `tests/snapshots/bottleneck.txt`; run with `TERN_BLESS=1` to
//! rewrite it after an intended change.

mod common;

use common::{Flow, Link, Report, Sim, assert_fair, assert_fills_the_link, assert_snapshot};
use std::sync::OnceLock;
use std::time::Duration;
use tern_congestion::{Controller, Ledbat, LedbatConfig, Reno, RenoConfig};

const TARGET: Duration = Duration::from_millis(100);

fn ledbat() -> Box<dyn Controller> {
    let mut config = LedbatConfig::default();
    config.target = TARGET;
    Box::new(Ledbat::new(config).expect("a valid LEDBAT configuration"))
}

fn reno() -> Box<dyn Controller> {
    Box::new(Reno::new(RenoConfig::default()).expect("the default Reno configuration"))
}

#[derive(Debug, Clone, Copy)]
struct Case {
    megabits: u64,
    one_way_ms: u64,
}

const CASES: [Case; 4] = [
    Case {
        megabits: 5,
        one_way_ms: 10,
    },
    Case {
        megabits: 5,
        one_way_ms: 40,
    },
    Case {
        megabits: 20,
        one_way_ms: 10,
    },
    Case {
        megabits: 20,
        one_way_ms: 40,
    },
];

impl Case {
    fn link(self, buffer: Option<Duration>) -> Link {
        Link::new(
            self.megabits,
            Duration::from_millis(self.one_way_ms),
            buffer,
        )
    }

    /// One LEDBAT flow; measured once its queue has settled.
    fn alone(self) -> Report {
        let flows = vec![Flow {
            controller: ledbat(),
            start: Duration::ZERO,
            clock_offset: 123_456_789,
        }];
        Sim::new(self.link(None), flows).run(Duration::from_secs(20), Duration::from_secs(50))
    }

    /// A second LEDBAT flow joins 10 s after the first, when the first
    /// one's queue stands at the target; measured from 20 s after it came.
    fn latecomer(self) -> Report {
        let flows = vec![
            Flow {
                controller: ledbat(),
                start: Duration::ZERO,
                clock_offset: -5_000_000_000,
            },
            Flow {
                controller: ledbat(),
                start: Duration::from_secs(10),
                clock_offset: 7_000_000,
            },
        ];
        Sim::new(self.link(None), flows).run(Duration::from_secs(30), Duration::from_secs(60))
    }

    /// LEDBAT first, then a Reno flow from 5 s on, through a drop-tail
    /// buffer of 250 ms (a common home-router size: LEDBAT can only yield
    /// through delay if the buffer holds more than its target).
    fn against_reno(self) -> Report {
        let flows = vec![
            Flow {
                controller: ledbat(),
                start: Duration::ZERO,
                clock_offset: 0,
            },
            Flow {
                controller: reno(),
                start: Duration::from_secs(5),
                clock_offset: 0,
            },
        ];
        Sim::new(self.link(Some(Duration::from_millis(250))), flows)
            .run(Duration::from_secs(15), Duration::from_secs(45))
    }
}

struct Row {
    case: Case,
    alone: Report,
    latecomer: Report,
    against_reno: Report,
}

/// Every scenario of every case.
fn rows() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    common::rows_once(&ROWS, &CASES, |case| Row {
        case,
        alone: case.alone(),
        latecomer: case.latecomer(),
        against_reno: case.against_reno(),
    })
}

fn table() -> String {
    common::table(
        "LEDBAT (target 100 ms) on one bottleneck, virtual time; see tests/bottleneck.rs",
        "| rate      | one-way | alone: use | alone: queue | 2 flows: Jain | 2 flows: shares | vs Reno: LEDBAT share | vs Reno: use |",
        "|-----------|---------|------------|--------------|---------------|-----------------|-----------------------|--------------|",
        rows().iter().map(|row| {
            let shares = row.latecomer.shares();
            format!(
                "| {:>2} Mbit/s | {:>4} ms | {:>9.1}% | {:>9.1} ms | {:>13.3} | {:>6.1}% / {:>4.1}% | {:>20.1}% | {:>11.1}% |",
                row.case.megabits,
                row.case.one_way_ms,
                row.alone.utilisation * 100.0,
                row.alone.mean_queuing_delay.as_secs_f64() * 1_000.0,
                row.latecomer.jain(),
                shares[0] * 100.0,
                shares[1] * 100.0,
                row.against_reno.shares()[0] * 100.0,
                row.against_reno.utilisation * 100.0,
            )
        }),
    )
}

#[test]
fn one_ledbat_flow_fills_the_link_and_keeps_the_queue_at_the_target() {
    for row in rows() {
        let Row { case, alone, .. } = row;
        let queue = alone.mean_queuing_delay.as_secs_f64() / TARGET.as_secs_f64();
        assert!(
            (0.8..=1.2).contains(&queue),
            "{case:?}: queue {:?}",
            alone.mean_queuing_delay
        );
        assert_fills_the_link(case, alone);
        assert_eq!(alone.flows[0].drops, 0, "{case:?}");
    }
}

#[test]
fn a_late_second_ledbat_flow_shares_the_link_fairly() {
    for row in rows() {
        let Row {
            case, latecomer, ..
        } = row;
        assert_fair(case, latecomer);
        assert_fills_the_link(case, latecomer);
    }
}

#[test]
fn ledbat_yields_to_a_loss_based_flow() {
    for row in rows() {
        let Row {
            case, against_reno, ..
        } = row;
        let share = against_reno.shares()[0];
        assert!(share <= 0.25, "{case:?}: LEDBAT took {share}");
        assert_fills_the_link(case, against_reno);
    }
}

#[test]
fn the_table_matches_its_snapshot() {
    assert_snapshot("bottleneck.txt", &table());
}
