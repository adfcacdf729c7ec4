//! Level 3: one Tern endpoint under load, over loopback, every endpoint on a
//! thread of its own with a current-thread tokio runtime (what Tern
//! recommends), 64-byte messages, maximum UDP payload 1 452 bytes.
//!
//! | workload | what it measures |
//! |---|---|
//! | `max_datagrams` | four client connections send 64-byte messages into one server endpoint: messages/s delivered (and per CPU-second of the server's thread), and datagrams/s its socket received, beside raw tern-sockio in the same run |
//! | `idle10k` | 10 000 idle connections to one server endpoint in a process of its own: its resident memory per connection (500 connections, `idle`, in quick mode; 100 000, `idle100k`, in full mode) |
//! | `churn` | four tasks connect, exchange one message, close, again and again: connections/s |
//! | `loss1pct` | one stream through the relay, 1 ms each way and 1 % of datagrams dropped each way: goodput, and its share of the Mathis bound |
//! | `relaypath` | one stream through the relay impairing the path as issue #26 names it (5 to 7 ms each way, 3 % lost, 2 % duplicated, 5 % reordered), LEDBAT and CUBIC: goodput, its share of the Mathis bound, and the losses the sender declared over those the relay made |
//! | `flood` | honest connects, one every 125 ms from 127.0.0.1, while 10 000 well-formed intros per second come from 1 000 addresses of 127.1.0.0/16 that never answer a Retry: connect p50/p99 beside the same run's without a flood, the server's RSA operations per second (budget 100/s) and its CPU |
//! | `budget` | eight greedy peers against one endpoint's 8 MiB memory budget (tern-sim, the run of `proto_budget.rs`): the most its connections held, the most its budget charged, the process's heap peak |
//! | `reuseport` | the `max_datagrams` load from eight client endpoints into one server endpoint, then into two on one port with `SO_REUSEPORT`: messages/s of each and their ratio |
//!
//! The machine these figures come from has two cores, so the clients
//! compete with the servers for them: every figure here is a floor for what
//! one endpoint does with a core to itself, and the `SO_REUSEPORT` scaling
//! especially (a second server thread only gains what the clients leave).

mod budget;
mod churn;
mod flood;
mod idle;
mod lossy;
mod max_datagrams;
mod reuseport;
mod rss;
mod servers;

use rand_core::OsRng;
use tern_peer::IdentityKey;

use crate::cli::{Args, Mode};
use crate::report::{Better, Metric, emit_wanted};

const LEVEL: u8 = 3;

pub(crate) use idle::{child_requested as idle_child_requested, run_child as run_idle_child};

/// The level-3 group.
struct Level3;

pub(crate) fn groups(_args: &Args) -> Vec<Box<dyn crate::Group>> {
    vec![Box::new(Level3)]
}

/// The names of every metric of each workload in `mode`: a workload runs
/// when the filter wants one of them.
fn workloads(mode: Mode) -> [Vec<String>; 7] {
    [
        max_datagrams::names(),
        idle::names(mode),
        churn::names(),
        reuseport::names(),
        lossy::names(),
        flood::names(),
        budget::names(),
    ]
}

fn wanted(args: &Args, names: &[String]) -> bool {
    names.iter().any(|n| args.wants(n))
}

impl crate::Group for Level3 {
    fn name(&self) -> &str {
        "level3"
    }

    fn level(&self) -> u8 {
        LEVEL
    }

    fn selected(&self, args: &Args) -> bool {
        workloads(args.mode).iter().any(|names| wanted(args, names))
    }

    fn run(&self, args: &Args) {
        let [max_datagrams, idle, churn, reuseport, lossy, flood, budget] = workloads(args.mode);
        if wanted(args, &idle) {
            idle::run(args);
        }
        if wanted(args, &budget) {
            budget::run(args);
        }
        if ![&max_datagrams, &churn, &reuseport, &lossy, &flood]
            .iter()
            .any(|names| wanted(args, names))
        {
            return;
        }
        let identity = match IdentityKey::generate(&mut OsRng) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("   level3: no identity key: {e}");
                return;
            }
        };
        if wanted(args, &max_datagrams) {
            max_datagrams::run(args, &identity);
        }
        if wanted(args, &churn) {
            churn::run(args, &identity);
        }
        if wanted(args, &reuseport) {
            reuseport::run(args, &identity);
        }
        if wanted(args, &lossy) {
            lossy::run(args, &identity);
        }
        if wanted(args, &flood) {
            flood::run(args, &identity);
        }
    }
}

/// Emits a level-3 metric if it is wanted and has samples.
fn emit_metric(
    args: &Args,
    name: String,
    unit: &'static str,
    better: Better,
    samples: Vec<f64>,
    ceiling: Option<String>,
) {
    emit_wanted(
        args,
        Metric {
            name,
            level: LEVEL,
            unit,
            better,
            samples,
            ceiling,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(filter: &str, mode: Mode) -> Args {
        Args {
            levels: vec![LEVEL],
            mode,
            filter: Some(filter.to_owned()),
            list: false,
        }
    }

    /// Which of the seven workloads a filter runs.
    fn runs(args: &Args) -> Vec<bool> {
        workloads(args.mode)
            .iter()
            .map(|names| wanted(args, names))
            .collect()
    }

    #[test]
    fn a_filter_runs_the_workloads_whose_metrics_it_names() {
        let churn = filtered("level3/churn/connections_per_s", Mode::Normal);
        assert_eq!(
            runs(&churn),
            [false, false, true, false, false, false, false]
        );
        let ceiling = filtered("sockio_64B", Mode::Quick);
        assert_eq!(
            runs(&ceiling),
            [true, false, false, false, false, false, false]
        );
        assert_eq!(
            runs(&filtered("scaling", Mode::Full)),
            [false, false, false, true, false, false, false]
        );
        assert_eq!(
            runs(&filtered("mathis", Mode::Normal)),
            [false, false, false, false, true, false, false]
        );
        assert_eq!(
            runs(&filtered("flood", Mode::Normal)),
            [false, false, false, false, false, true, false]
        );
        assert_eq!(runs(&filtered("level3/", Mode::Quick)), [true; 7]);
    }

    #[test]
    fn the_budget_workload_runs_for_its_own_metrics_only() {
        assert_eq!(
            runs(&filtered("level3/budget/", Mode::Quick)),
            [false, false, false, false, false, false, true]
        );
        assert!(!wanted(
            &filtered("level3/budget/", Mode::Quick),
            &idle::names(Mode::Quick)
        ));
    }

    #[test]
    fn the_idle_metric_names_the_count_it_holds() {
        assert_eq!(
            runs(&filtered("idle10k", Mode::Normal)),
            [false, true, false, false, false, false, false]
        );
        assert_eq!(
            runs(&filtered("idle100k", Mode::Full)),
            [false, true, false, false, false, false, false]
        );
        assert_eq!(runs(&filtered("idle10k", Mode::Full)), [false; 7]);
        assert_eq!(runs(&filtered("idle10k", Mode::Quick)), [false; 7]);
        assert_eq!(
            runs(&filtered("level3/idle/", Mode::Quick)),
            [false, true, false, false, false, false, false]
        );
        assert!(!crate::Group::selected(
            &Level3,
            &filtered("e2e/", Mode::Quick)
        ));
    }
}
