//! How much of the machine other processes took while benchmarks ran.
//!
//! On a shared 2-core machine a neighbour's compile shifts every figure by
//! more than the 2 % band of level 0. The kernel counts busy CPU time for
//! the whole machine (`/proc/stat`) and for this process and its waited-for
//! children (`/proc/self/stat`); the difference over the measuring interval
//! is what others used. A run that shared the machine says so, so that its
//! verdicts are read with that in mind.

use std::time::Instant;

/// Ticks per second of the counters in `/proc` (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// Share of the machine used by others above which a run is called busy.
pub(crate) const BUSY_SHARE: f64 = 0.10;

/// CPU counters at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuSnapshot {
    machine_busy: u64,
    own: u64,
    at: Instant,
}

impl CpuSnapshot {
    /// Reads the counters; `None` where `/proc` is not Linux's.
    pub(crate) fn take() -> Option<Self> {
        let machine_busy = machine_busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let own = own_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some(Self {
            machine_busy,
            own,
            at: Instant::now(),
        })
    }

    /// The share (0–1) of all CPUs' capacity that other processes used
    /// between `self` and `later`.
    pub(crate) fn others_share(&self, later: &Self, cpus: usize) -> f64 {
        let seconds = later.at.duration_since(self.at).as_secs_f64();
        let busy = later.machine_busy.saturating_sub(self.machine_busy);
        let own = later.own.saturating_sub(self.own);
        share(busy.saturating_sub(own), seconds, cpus)
    }
}

fn share(other_ticks: u64, seconds: f64, cpus: usize) -> f64 {
    let capacity = seconds * TICKS_PER_S * cpus.max(1) as f64;
    if capacity <= 0.0 {
        return 0.0;
    }
    (other_ticks as f64 / capacity).clamp(0.0, 1.0)
}

/// Busy ticks of all CPUs: the `cpu` line of `/proc/stat` without idle and
/// iowait (user, nice, system, irq, softirq, steal).
fn machine_busy_ticks(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    Some(field(0) + field(1) + field(2) + field(5) + field(6) + field(7))
}

/// This process's CPU ticks and those of its waited-for children: fields
/// utime, stime, cutime and cstime of `/proc/self/stat` (14–17; the
/// command name in parentheses may hold spaces, so count after it).
fn own_ticks(self_stat: &str) -> Option<u64> {
    let after_name = &self_stat[self_stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    (11..=14).map(|i| fields.get(i)?.parse::<u64>().ok()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_busy_time_leaves_out_idle_and_iowait() {
        let stat = "cpu  306407 1 40670 88780 306 2 2279 1670 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            machine_busy_ticks(stat),
            Some(306_407 + 1 + 40_670 + 2 + 2279 + 1670)
        );
        assert_eq!(machine_busy_ticks("intr 1 2"), None);
    }

    #[test]
    fn own_time_counts_children_and_survives_spaces_in_the_name() {
        let stat = "4242 (cargo xtask) S 1 2 3 4 5 6 7 8 9 10 100 20 300 40 20 0 1 0";
        assert_eq!(own_ticks(stat), Some(100 + 20 + 300 + 40));
        assert_eq!(own_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn the_share_is_of_all_cpus_over_the_interval() {
        // 100 ticks of others over 1 s on 2 CPUs (200 ticks of capacity).
        assert_eq!(share(100, 1.0, 2), 0.5);
        assert_eq!(share(0, 10.0, 2), 0.0);
        assert_eq!(share(1000, 1.0, 2), 1.0);
        assert_eq!(share(5, 0.0, 2), 0.0);
    }

    #[test]
    fn snapshots_of_this_machine_give_a_share_between_zero_and_one() {
        let Some(before) = CpuSnapshot::take() else {
            return;
        };
        let after = CpuSnapshot::take().expect("/proc readable twice");
        let share = before.others_share(&after, 2);
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
