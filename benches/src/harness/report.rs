//! Output: one JSON line per metric on standard output (BENCH-CONTRACT), and
//! the process CPU time that the MB-per-CPU-second metrics divide by.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;

/// Which direction is an improvement.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Better {
    Higher,
    Lower,
}

/// One metric line.
#[derive(Debug, Serialize)]
pub(crate) struct Metric {
    pub(crate) name: String,
    pub(crate) level: u8,
    pub(crate) unit: &'static str,
    pub(crate) better: Better,
    pub(crate) samples: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ceiling: Option<String>,
}

/// Prints the metric as one JSON line on standard output (nothing else goes there).
pub(crate) fn emit(metric: &Metric) {
    let Ok(line) = serde_json::to_string(metric) else {
        eprintln!("tern-harness: cannot encode metric {}", metric.name);
        return;
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Prints `metric` if the filter wants it and it has samples.
pub(crate) fn emit_wanted(args: &crate::cli::Args, metric: Metric) {
    if args.wants(&metric.name) && !metric.samples.is_empty() {
        emit(&metric);
    }
}

/// The resource usage of the whole process so far (every thread).
fn usage() -> Option<libc::rusage> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (rc == 0).then_some(usage)
}

/// User plus system CPU time of the whole process so far (every thread).
pub(crate) fn process_cpu_time() -> Duration {
    let Some(usage) = usage() else {
        return Duration::ZERO;
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Context switches of the whole process so far, voluntary (a thread
/// waited) and involuntary (a thread was preempted).
pub(crate) fn context_switches() -> u64 {
    usage().map_or(0, |u| {
        u64::try_from(u.ru_nvcsw).unwrap_or(0) + u64::try_from(u.ru_nivcsw).unwrap_or(0)
    })
}

/// The median of some samples (for the human summary on standard error).
pub(crate) fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_line_has_the_contract_fields_and_omits_a_missing_ceiling() {
        let mut metric = Metric {
            name: "sockio/mmsg/1452B/batch50/datagrams_per_s".to_owned(),
            level: 2,
            unit: "datagrams/s",
            better: Better::Higher,
            samples: vec![1.0, 2.5],
            ceiling: None,
        };
        let line = serde_json::to_string(&metric).expect("encodes");
        assert_eq!(
            line,
            r#"{"name":"sockio/mmsg/1452B/batch50/datagrams_per_s","level":2,"unit":"datagrams/s","better":"higher","samples":[1.0,2.5]}"#
        );
        metric.ceiling = Some("sockio/raw_mmsg/1452B/batch50/datagrams_per_s".to_owned());
        assert!(
            serde_json::to_string(&metric)
                .expect("encodes")
                .ends_with(r#""ceiling":"sockio/raw_mmsg/1452B/batch50/datagrams_per_s"}"#)
        );
    }

    #[test]
    fn cpu_time_moves_forward_while_the_process_works() {
        let before = process_cpu_time();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_cpu_time() > before);
        let switches = context_switches();
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            context_switches() > switches,
            "a sleep is a voluntary switch"
        );
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
