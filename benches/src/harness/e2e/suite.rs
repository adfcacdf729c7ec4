//! The reference transport's manual suite, and many clients on one socket.
//!
//! The reference measured single messages of 1 to 32 KB at 0 and 2 ms round
//! trip, 1 KB messages as fast as possible for 2 s, and 4 concurrent
//! streams against one (its degradation ratio: one stream's rate ÷ the
//! aggregate of four). Here the same shapes run on every transport:
//!
//! - `message_<N>k/rtt<0|2>ms`: on a warm connection, one message of N KiB
//!   at a time, timed from the send until the server's 64-byte answer is
//!   back (the server answers once it has the message whole), so the 2 ms
//!   rows include one 2 ms round trip by construction. The 2 ms path goes
//!   through the harness's [delay relay](crate::relay), 1 ms each way.
//! - `msgs1k`: 1 KiB messages one way for the flood time, then one more
//!   that the server answers once it has counted all: messages/s over the
//!   whole, so nothing still in flight is counted.
//! - `streams4`: the same bytes on one stream, then split over four
//!   streams of one connection at once; degradation = one stream's rate ÷
//!   the four's aggregate (1.0 = none), per sample.
//! - `bidir`: one stream the server echoes, both directions at once.
//! - `clients50`: 50 client endpoints, each with one connection, each
//!   writing one stream for the sample time, at once; Tern also reports its
//!   server socket's datagrams per receive system call over the sample
//!   (calls that found nothing included).

use std::time::Duration;

use super::{Workloads, emit_all, latency_histogram};
use crate::cli::{Args, Mode};
use crate::relay::{Impairment, Relay};
use crate::report::{Better, median};

/// Message sizes of the single-message rows, in KiB.
const MESSAGE_KIB: [usize; 4] = [1, 4, 16, 32];
/// Round trips of the single-message rows, in ms (0: straight to the
/// server; otherwise through the relay, half each way).
const ROUND_TRIPS_MS: [u64; 2] = [0, 2];
/// Bytes of each message of `msgs1k`.
const FLOOD_MESSAGE: usize = 1024;
/// Streams of `streams4`.
const STREAMS: usize = 4;
/// Client endpoints of `clients50`.
const CLIENTS: usize = 50;

/// Single messages timed per sample.
fn messages_per_sample(mode: Mode) -> usize {
    match mode {
        Mode::Quick => 50,
        Mode::Normal => 300,
        Mode::Full => 1_000,
    }
}

/// How long `msgs1k` sends (the reference's 2 s outside quick runs).
fn flood_time(mode: Mode) -> Duration {
    match mode {
        Mode::Quick => mode.sample_time() * 2,
        Mode::Normal | Mode::Full => Duration::from_secs(2),
    }
}

/// Bytes of one `streams4` sample, on one stream and then on four.
fn streams_bytes(mode: Mode) -> u64 {
    match mode {
        Mode::Quick => 64 << 20,
        Mode::Normal => 256 << 20,
        Mode::Full => 512 << 20,
    }
}

/// Bytes each way of one `bidir` sample.
fn bidir_bytes(mode: Mode) -> u64 {
    match mode {
        Mode::Quick => 32 << 20,
        Mode::Normal => 128 << 20,
        Mode::Full => 256 << 20,
    }
}

fn message_name(prefix: &str, kib: usize, rtt_ms: u64, measure: &str) -> String {
    format!("{prefix}/message_{kib}k/rtt{rtt_ms}ms/{measure}")
}

/// Every metric of the suite a transport can emit.
fn names(prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for kib in MESSAGE_KIB {
        for rtt in ROUND_TRIPS_MS {
            for measure in ["p50", "p99"] {
                names.push(message_name(prefix, kib, rtt, measure));
            }
        }
    }
    names.extend(
        [
            "msgs1k/messages_per_s",
            "streams4/bytes_per_s",
            "streams4/degradation",
            "bidir/bytes_per_s",
            "clients50/bytes_per_s",
            "clients50/datagrams_per_recv_call",
        ]
        .iter()
        .map(|m| format!("{prefix}/{m}")),
    );
    names
}

/// Whether any metric of the suite passes the filter.
pub(super) fn selected(prefix: &str, args: &Args) -> bool {
    names(prefix).iter().any(|n| args.wants(n))
}

/// Runs the suite's selected workloads on `transport`.
pub(super) fn run(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let wants = |workload: &str| {
        names(prefix)
            .iter()
            .any(|n| n.starts_with(&format!("{prefix}/{workload}/")) && args.wants(n))
    };
    for kib in MESSAGE_KIB {
        for rtt in ROUND_TRIPS_MS {
            let wanted = ["p50", "p99"]
                .iter()
                .any(|m| args.wants(&message_name(prefix, kib, rtt, m)));
            if wanted {
                run_messages(prefix, transport, args, kib, rtt);
            }
        }
    }
    if wants("msgs1k") {
        run_flood(prefix, transport, args);
    }
    if wants("streams4") {
        run_streams(prefix, transport, args);
    }
    if wants("bidir") {
        run_bidir(prefix, transport, args);
    }
    if wants("clients50") {
        run_clients(prefix, transport, args);
    }
}

fn run_messages(prefix: &str, transport: &mut dyn Workloads, args: &Args, kib: usize, rtt: u64) {
    let cell = format!("{prefix}/message_{kib}k/rtt{rtt}ms");
    // The relay lives as long as the cell, so its threads run only here.
    let relay = if rtt == 0 {
        None
    } else {
        let one_way = Duration::from_millis(rtt) / 2;
        match Relay::start(transport.server_addr(), Impairment::delay(one_way)) {
            Ok(relay) => Some(relay),
            Err(e) => {
                eprintln!("   {cell}: no relay: {e}");
                return;
            }
        }
    };
    let to = relay
        .as_ref()
        .map_or_else(|| transport.server_addr(), Relay::addr);
    let count = messages_per_sample(args.mode);
    let (mut p50, mut p99) = (Vec::new(), Vec::new());
    for _ in 0..args.mode.samples() {
        let mut latencies = latency_histogram();
        match transport.messages(to, kib * 1024, count, &mut latencies) {
            Ok(()) => {
                p50.push(latencies.value_at_quantile(0.50) as f64);
                p99.push(latencies.value_at_quantile(0.99) as f64);
            }
            Err(e) => eprintln!("   {cell}: sample failed: {e}"),
        }
    }
    let relayed = relay.map(|r| {
        let counts = r.counts();
        format!(
            "; the relay forwarded {} datagrams, dropped {}",
            counts.forwarded, counts.dropped
        )
    });
    eprintln!(
        "   {cell}: p50 {:.0} µs, p99 {:.0} µs ({count} messages per sample{})",
        median(&p50) / 1e3,
        median(&p99) / 1e3,
        relayed.unwrap_or_default()
    );
    emit_all(
        args,
        vec![
            (format!("{cell}/p50"), "ns", Better::Lower, p50),
            (format!("{cell}/p99"), "ns", Better::Lower, p99),
        ],
    );
}

fn run_flood(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let duration = flood_time(args.mode);
    let mut rate = Vec::new();
    for _ in 0..args.mode.samples() {
        match transport.message_flood(FLOOD_MESSAGE, duration) {
            Ok((count, elapsed)) => rate.push(count as f64 / elapsed.as_secs_f64().max(1e-9)),
            Err(e) => eprintln!("   {prefix}/msgs1k: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {prefix}/msgs1k: {:.0} messages/s ({:.1} MB/s of 1 KiB messages)",
        median(&rate),
        median(&rate) * FLOOD_MESSAGE as f64 / 1e6
    );
    emit_all(
        args,
        vec![(
            format!("{prefix}/msgs1k/messages_per_s"),
            "messages/s",
            Better::Higher,
            rate,
        )],
    );
}

fn run_streams(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let bytes = streams_bytes(args.mode);
    let (mut single, mut aggregate, mut degradation) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.mode.samples() {
        let sample = transport.bulk(1, bytes).and_then(|one| {
            let four = transport.bulk(STREAMS, bytes / STREAMS as u64)?;
            Ok((one, four))
        });
        match sample {
            Ok((one, four)) => {
                let rate = |d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9);
                single.push(rate(one));
                aggregate.push(rate(four));
                degradation.push(rate(one) / rate(four));
            }
            Err(e) => eprintln!("   {prefix}/streams4: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {prefix}/streams4: {:.1} MB/s on 4 streams, {:.1} MB/s on one: degradation {:.2}x ({} MiB per sample)",
        median(&aggregate) / 1e6,
        median(&single) / 1e6,
        median(&degradation),
        bytes >> 20
    );
    emit_all(
        args,
        vec![
            (
                format!("{prefix}/streams4/bytes_per_s"),
                "B/s",
                Better::Higher,
                aggregate,
            ),
            (
                format!("{prefix}/streams4/degradation"),
                "x",
                Better::Lower,
                degradation,
            ),
        ],
    );
}

fn run_bidir(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let bytes = bidir_bytes(args.mode);
    let mut rate = Vec::new();
    for _ in 0..args.mode.samples() {
        match transport.bidirectional(bytes) {
            Ok(elapsed) => rate.push(2.0 * bytes as f64 / elapsed.as_secs_f64().max(1e-9)),
            Err(e) => eprintln!("   {prefix}/bidir: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {prefix}/bidir: {:.1} MB/s both ways together ({} MiB each way per sample)",
        median(&rate) / 1e6,
        bytes >> 20
    );
    emit_all(
        args,
        vec![(
            format!("{prefix}/bidir/bytes_per_s"),
            "B/s",
            Better::Higher,
            rate,
        )],
    );
}

fn run_clients(prefix: &str, transport: &mut dyn Workloads, args: &Args) {
    let duration = args.mode.sample_time() * 4;
    let (mut rate, mut per_call) = (Vec::new(), Vec::new());
    for _ in 0..args.mode.samples() {
        match transport.clients(CLIENTS, duration) {
            Ok(sample) => {
                rate.push(sample.bytes as f64 / sample.elapsed.as_secs_f64().max(1e-9));
                per_call.extend(sample.datagrams_per_recv_call);
            }
            Err(e) => eprintln!("   {prefix}/clients50: sample failed: {e}"),
        }
    }
    let calls = if per_call.is_empty() {
        String::new()
    } else {
        format!(
            ", server {:.1} datagrams per receive call",
            median(&per_call)
        )
    };
    eprintln!(
        "   {prefix}/clients50: {:.1} MB/s from {CLIENTS} clients{calls}",
        median(&rate) / 1e6
    );
    emit_all(
        args,
        vec![
            (
                format!("{prefix}/clients50/bytes_per_s"),
                "B/s",
                Better::Higher,
                rate,
            ),
            (
                format!("{prefix}/clients50/datagrams_per_recv_call"),
                "datagrams/call",
                Better::Higher,
                per_call,
            ),
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_name_is_under_the_prefix_and_unique() {
        let names = names("e2e/tern");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert_eq!(names.len(), 16 + 6);
        assert!(names.contains(&"e2e/tern/message_32k/rtt2ms/p99".to_owned()));
        assert!(names.iter().all(|n| n.starts_with("e2e/tern/")));
    }

    #[test]
    fn a_filter_selects_one_cell() {
        let args =
            crate::cli::parse(["--filter".to_owned(), "tern/streams4".to_owned()]).expect("valid");
        assert!(selected("e2e/tern", &args));
        assert!(!selected("e2e/quinn", &args));
    }
}
