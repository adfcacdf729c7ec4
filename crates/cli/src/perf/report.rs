//! What `tern perf` reports: samples of one end, the interval lines, each
//! end's summary, whether the two ends agree, and the `--json` document.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;
use tern_peer::{Connection, ConnectionStats, Endpoint};
use tern_sockio::CounterSnapshot;
use tokio::time::Instant;

use super::Counters;
use crate::control::{PerfParams, SideReport};
use crate::error::printable;
use crate::units;

/// What one end looked like at one moment.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sample {
    pub(super) at: Instant,
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) connection: Option<ConnectionStats>,
    pub(super) socket: CounterSnapshot,
}

impl Sample {
    pub(super) fn take(endpoint: &Endpoint, connection: &Connection, counters: &Counters) -> Self {
        Self {
            at: Instant::now(),
            sent: counters.sent.load(Ordering::Relaxed),
            received: counters.received.load(Ordering::Relaxed),
            connection: connection.stats(),
            socket: endpoint.stats().socket,
        }
    }
}

/// Datagrams per system call between two socket snapshots.
fn per_call(datagrams: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        datagrams as f64 / calls as f64
    }
}

/// One report line.
#[derive(Clone, Copy, Debug, Serialize)]
pub(super) struct Interval {
    /// Seconds since the start, at the interval's start and end.
    start: f64,
    end: f64,
    /// Application bytes this end sent and received in the interval.
    bytes: u64,
    bits_per_second: f64,
    rtt_ms: f64,
    window: u64,
    /// Packets declared lost in the interval (their data was re-sent).
    retransmits: u64,
    datagrams_per_send_call: f64,
    datagrams_per_recv_call: f64,
}

impl Interval {
    pub(super) fn between(start: Instant, from: &Sample, to: &Sample) -> Self {
        let bytes = (to.sent - from.sent) + (to.received - from.received);
        let elapsed = to.at - from.at;
        let stats = to.connection.unwrap_or_default();
        let lost_before = from.connection.map_or(0, |s| s.lost_packets);
        Self {
            start: (from.at - start).as_secs_f64(),
            end: (to.at - start).as_secs_f64(),
            bytes,
            bits_per_second: units::bits_per_second(bytes, elapsed),
            rtt_ms: stats.rtt.as_secs_f64() * 1e3,
            window: stats.window,
            retransmits: stats.lost_packets.saturating_sub(lost_before),
            datagrams_per_send_call: per_call(
                to.socket.datagrams_sent - from.socket.datagrams_sent,
                to.socket.send_syscalls - from.socket.send_syscalls,
            ),
            datagrams_per_recv_call: per_call(
                to.socket.datagrams_received - from.socket.datagrams_received,
                to.socket.recv_syscalls - from.socket.recv_syscalls,
            ),
        }
    }

    pub(super) fn line(&self) -> String {
        format!(
            "[{:5.1}-{:5.1} s] {:>9} {:>12}  rtt {:>8}  window {:>9}  retr {:>4}  dgrams/call tx {:4.1} rx {:4.1}",
            self.start,
            self.end,
            units::bytes(self.bytes),
            units::rate(self.bytes, Duration::from_secs_f64(self.end - self.start)),
            units::millis(Duration::from_secs_f64(self.rtt_ms / 1e3)),
            units::bytes(self.window),
            self.retransmits,
            self.datagrams_per_send_call,
            self.datagrams_per_recv_call,
        )
    }
}

/// This end's counts at the end of its data phase.
pub(super) fn side_report(first: &Sample, last: &Sample, start: Instant) -> SideReport {
    let stats = last.connection.unwrap_or_default();
    SideReport {
        congestion: stats.congestion.name().to_owned(),
        bytes_sent: last.sent,
        bytes_received: last.received,
        seconds: (last.at - start).as_secs_f64(),
        rtt_ms: stats.rtt.as_secs_f64() * 1e3,
        window: stats.window,
        lost_packets: stats.lost_packets,
        spurious_losses: stats.spurious_losses,
        sent_packets: stats.sent_packets,
        path_mtu: stats.path_mtu,
        key_updates: stats.key_updates,
        datagrams_per_send_call: per_call(
            last.socket.datagrams_sent - first.socket.datagrams_sent,
            last.socket.send_syscalls - first.socket.send_syscalls,
        ),
        datagrams_per_recv_call: per_call(
            last.socket.datagrams_received - first.socket.datagrams_received,
            last.socket.recv_syscalls - first.socket.recv_syscalls,
        ),
    }
}

/// One end's summary line. Losses that proved spurious (reordering,
/// not loss) are named when there were any.
pub(super) fn summary_line(who: &str, report: &SideReport) -> String {
    let moved = report.bytes_sent + report.bytes_received;
    let spurious = match report.spurious_losses {
        0 => String::new(),
        n => format!(" ({n} proved spurious)"),
    };
    format!(
        "{who}: sent {}, received {} in {:.2} s = {}; congestion {}, rtt {}, lost {} of {} packets{spurious}, path MTU {}, key updates {}, datagrams per send/recv call {:.1}/{:.1}",
        units::bytes(report.bytes_sent),
        units::bytes(report.bytes_received),
        report.seconds,
        units::rate(moved, Duration::from_secs_f64(report.seconds)),
        printable(&report.congestion),
        units::millis(Duration::from_secs_f64(report.rtt_ms / 1e3)),
        report.lost_packets,
        report.sent_packets,
        report.path_mtu,
        report.key_updates,
        report.datagrams_per_send_call,
        report.datagrams_per_recv_call,
    )
}

/// Whether what each end sent is what the other received, in words.
pub(super) fn agreement(client: &SideReport, server: &SideReport) -> (bool, Vec<String>) {
    let mut lines = Vec::new();
    let mut agree = true;
    for (what, sent, received) in [
        ("client to server", client.bytes_sent, server.bytes_received),
        ("server to client", server.bytes_sent, client.bytes_received),
    ] {
        if sent == 0 && received == 0 {
            continue;
        }
        if sent == received {
            lines.push(format!(
                "{what}: {sent} bytes sent, {received} received: they agree"
            ));
        } else {
            agree = false;
            lines.push(format!("{what}: {sent} bytes sent but {received} received"));
        }
    }
    (agree, lines)
}

/// The JSON document `--json` prints.
#[derive(Debug, Serialize)]
pub(super) struct JsonReport<'a> {
    pub(super) address: SocketAddr,
    /// `direct ADDR` or `relayed via ADDR` when the run ended (see
    /// [`path_of`](crate::rendezvous::path_of)).
    pub(super) path: String,
    /// From the start of the connect (through the rendezvous, if one was
    /// given) to the connection to the peer.
    pub(super) connect_ms: f64,
    /// From the start of the connect to the server's first answer (its
    /// [`Control::PerfReady`](crate::control::Control::PerfReady)): the
    /// first byte from the peer through the path taken.
    pub(super) first_byte_ms: f64,
    /// For a connection that started relayed and moved to a direct path:
    /// how long after it started it moved.
    pub(super) went_direct_ms: Option<f64>,
    pub(super) backend: String,
    pub(super) params: PerfParams,
    pub(super) intervals: &'a [Interval],
    pub(super) client: SideReport,
    pub(super) server: SideReport,
    pub(super) bytes_agree: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Control;

    fn report(lost_packets: u64, spurious_losses: u64) -> SideReport {
        SideReport {
            congestion: "ledbat".to_owned(),
            lost_packets,
            sent_packets: 1000,
            spurious_losses,
            ..SideReport::default()
        }
    }

    #[test]
    fn the_summary_names_spurious_losses_only_when_there_were_some() {
        let line = summary_line("client", &report(12, 5));
        assert!(
            line.contains("lost 12 of 1000 packets (5 proved spurious),"),
            "{line}"
        );
        let line = summary_line("client", &report(12, 0));
        assert!(line.contains("lost 12 of 1000 packets, path MTU"), "{line}");
    }

    #[test]
    fn a_report_from_an_end_that_does_not_count_spurious_losses_reads_as_none() {
        let mut json: serde_json::Value =
            serde_json::from_slice(&Control::PerfReport(report(12, 5)).encode()).expect("json");
        let fields = json.as_object_mut().expect("an object");
        assert!(fields.remove("spurious_losses").is_some(), "{fields:?}");
        let old_peer = serde_json::to_vec(&json).expect("encodes");
        assert_eq!(
            Control::decode(&old_peer),
            Ok(Control::PerfReport(report(12, 0)))
        );
    }
}
