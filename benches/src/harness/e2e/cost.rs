//! Cost accounting of the bulk run: one more one-stream bulk transfer of
//! the same size, run with the allocation counter on (the timed samples run
//! without it), and what it cost the whole process per megabyte moved —
//! heap allocations and context switches of every thread — and, where the
//! transport counts its sockets, system calls, datagrams per call and
//! allocations per datagram received.
//!
//! The run includes its connect and close, whose allocations (a thousand
//! or more inside the RSA crate alone) would swamp the transfer's: they are
//! measured on their own, one connect and close counted the same way, and
//! taken out of the transfer's count; they are reported beside it.

use crate::alloc_count::counting;
use crate::cli::Args;
use crate::report::{Better, context_switches};

use super::{SocketTotals, Workloads, bulk_bytes, emit_all, latency_histogram};

/// What one accounted bulk run cost.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cost {
    allocs_per_mb: f64,
    context_switches_per_mb: f64,
    /// From the sockets' counters, where the transport keeps them.
    sockets: Option<SocketCost>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct SocketCost {
    /// Allocations per datagram either end received (data and ACKs).
    allocs_per_packet: f64,
    syscalls_per_mb: f64,
    datagrams_per_send_call: f64,
    datagrams_per_recv_call: f64,
}

fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b.max(1) as f64
}

impl Cost {
    fn of(bytes: u64, allocs: u64, switches: u64, sockets: Option<SocketTotals>) -> Self {
        let mb = bytes as f64 / 1e6;
        Self {
            allocs_per_mb: allocs as f64 / mb,
            context_switches_per_mb: switches as f64 / mb,
            sockets: sockets.map(|s| SocketCost {
                allocs_per_packet: ratio(allocs, s.datagrams_received),
                syscalls_per_mb: (s.send_calls + s.recv_calls) as f64 / mb,
                datagrams_per_send_call: ratio(s.datagrams_sent, s.send_calls),
                datagrams_per_recv_call: ratio(s.datagrams_received, s.recv_calls),
            }),
        }
    }
}

/// Runs the accounted bulk transfer and emits its cost metrics under
/// `<prefix>/bulk/cost/`.
pub(super) fn run(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let bytes = bulk_bytes(args.mode);
    let mut latencies = latency_histogram();
    let (connected, handshake) = counting(|| transport.connects(1, &mut latencies));
    if let Err(e) = connected {
        eprintln!("   {prefix}/bulk/cost: connect failed: {e}");
        return;
    }
    let switches = context_switches();
    let sockets = transport.socket_totals();
    let (result, allocs) = counting(|| transport.bulk(1, bytes));
    if let Err(e) = result {
        eprintln!("   {prefix}/bulk/cost: run failed: {e}");
        return;
    }
    let switches = context_switches().saturating_sub(switches);
    let sockets = sockets
        .zip(transport.socket_totals())
        .map(|(before, after)| after - before);
    let cost = Cost::of(bytes, allocs.saturating_sub(handshake), switches, sockets);
    let name = |m: &str| format!("{prefix}/bulk/cost/{m}");
    let mut metrics = vec![
        (
            name("handshake_allocs"),
            "allocs",
            Better::Lower,
            vec![handshake as f64],
        ),
        (
            name("allocs_per_mb"),
            "allocs/MB",
            Better::Lower,
            vec![cost.allocs_per_mb],
        ),
        (
            name("context_switches_per_mb"),
            "switches/MB",
            Better::Lower,
            vec![cost.context_switches_per_mb],
        ),
    ];
    match cost.sockets {
        Some(s) => {
            eprintln!(
                "   {prefix}/bulk/cost: {:.4} allocations per datagram, {:.2} per MB (beyond a connect and close's {handshake}); {:.1} system calls and {:.1} context switches per MB; {:.1} datagrams per send call, {:.1} per receive call",
                s.allocs_per_packet,
                cost.allocs_per_mb,
                s.syscalls_per_mb,
                cost.context_switches_per_mb,
                s.datagrams_per_send_call,
                s.datagrams_per_recv_call
            );
            metrics.extend([
                (
                    name("allocs_per_packet"),
                    "allocs/packet",
                    Better::Lower,
                    vec![s.allocs_per_packet],
                ),
                (
                    name("syscalls_per_mb"),
                    "syscalls/MB",
                    Better::Lower,
                    vec![s.syscalls_per_mb],
                ),
                (
                    name("datagrams_per_send_call"),
                    "datagrams/call",
                    Better::Higher,
                    vec![s.datagrams_per_send_call],
                ),
                (
                    name("datagrams_per_recv_call"),
                    "datagrams/call",
                    Better::Higher,
                    vec![s.datagrams_per_recv_call],
                ),
            ]);
        }
        None => eprintln!(
            "   {prefix}/bulk/cost: {:.2} allocations per MB beyond a connect and close's {handshake}; {:.1} context switches per MB",
            cost.allocs_per_mb, cost.context_switches_per_mb
        ),
    }
    emit_all(args, metrics);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_are_per_megabyte_and_per_datagram() {
        let sockets = SocketTotals {
            send_calls: 100,
            recv_calls: 400,
            datagrams_sent: 2_000,
            datagrams_received: 2_000,
        };
        let cost = Cost::of(10_000_000, 50, 30, Some(sockets));
        assert_eq!(cost.allocs_per_mb, 5.0);
        assert_eq!(cost.context_switches_per_mb, 3.0);
        let s = cost.sockets.expect("counted");
        assert_eq!(s.allocs_per_packet, 0.025);
        assert_eq!(s.syscalls_per_mb, 50.0);
        assert_eq!(
            (s.datagrams_per_send_call, s.datagrams_per_recv_call),
            (20.0, 5.0)
        );
        assert_eq!(Cost::of(1_000_000, 0, 0, None).sockets, None);
    }
}
