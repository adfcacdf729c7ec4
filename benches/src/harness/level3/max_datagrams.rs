//! Maximum datagrams per second through one endpoint: two client threads,
//! two client endpoints each, one connection per endpoint, send 64-byte
//! messages as fast as Tern takes them into one server endpoint. Measured
//! at the server after a warm-up: messages delivered to the application per
//! second, messages per second of the server thread's own CPU time (from
//! its thread clock: what the endpoint costs, whatever the clients and the
//! rest of the machine take), and UDP datagrams its socket received per
//! second. Tern packs the messages that wait into one datagram, so a
//! datagram carries several.
//!
//! Two ceilings, measured sample by sample in the same run with raw
//! tern-sockio (the backend the endpoints use, as many datagrams per send
//! call as the endpoint's driver sends per turn):
//! - for the messages, 64-byte datagrams, each one 64-byte message:
//!   `sockio_64B/messages_per_s`;
//! - for the datagrams, datagrams of the mean size Tern's were in that
//!   sample: `sockio_same_size/datagrams_per_s`.

use std::time::Duration;

use tern_peer::IdentityKey;

use super::servers::{MESSAGE_LEN, Reply, Servers, blast};
use crate::cli::Args;
use crate::report::{Better, median};

const PREFIX: &str = "level3/max_datagrams";
const CLIENT_THREADS: usize = 2;
const ENDPOINTS_PER_THREAD: usize = 2;

/// Every metric of the workload, after `PREFIX/`.
const METRICS: [&str; 6] = [
    "messages_per_s",
    "messages_per_server_cpu_s",
    "datagrams_per_s",
    "sockio_64B/messages_per_s",
    "sockio_same_size/datagrams_per_s",
    "bytes_per_datagram",
];

pub(super) fn names() -> Vec<String> {
    METRICS.iter().map(|m| format!("{PREFIX}/{m}")).collect()
}

/// Raw tern-sockio's delivered datagrams/s of `payload` bytes.
fn sockio_ceiling(payload: usize, duration: Duration) -> std::io::Result<f64> {
    let backend = tern_sockio::Capabilities::get().best();
    let batch = tern_peer::driver::DriverConfig::default().datagrams_per_turn();
    let sample = crate::sockio_matrix::run_tern(backend, payload, batch, duration)?;
    Ok(sample.delivered as f64 / sample.elapsed.as_secs_f64().max(1e-9))
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    let length = args.mode.sample_time() * 4;
    let (mut messages, mut datagrams, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut drops, mut per_cpu, mut busy) = (Vec::new(), Vec::new(), Vec::new());
    let mut clients_busy = Vec::new();
    let (mut loss, mut windows, mut rtts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ceiling_64, mut ceiling_same) = (Vec::new(), Vec::new());
    for _ in 0..args.mode.samples() {
        let window = Servers::start(identity, 1, false, Reply::None).and_then(|servers| {
            blast(
                &servers,
                CLIENT_THREADS,
                ENDPOINTS_PER_THREAD,
                args.mode.sample_time(),
                length,
            )
        });
        let window = match window {
            Ok(w) => w,
            Err(e) => {
                eprintln!("   {PREFIX}: sample failed: {e}");
                continue;
            }
        };
        messages.push(window.messages_per_s());
        datagrams.push(window.datagrams_per_s());
        sizes.push(window.mean_datagram() as f64);
        drops.push(window.kernel_drops);
        per_cpu.extend(window.messages_per_server_cpu_s());
        busy.extend(window.server_busy());
        clients_busy.extend(window.clients_busy());
        loss.push(window.clients_loss());
        windows.push(window.clients_window());
        rtts.push(window.clients_rtt().as_secs_f64());
        for (payload, into) in [
            (MESSAGE_LEN, &mut ceiling_64),
            (window.mean_datagram().max(1), &mut ceiling_same),
        ] {
            match sockio_ceiling(payload, length) {
                Ok(c) => into.push(c),
                Err(e) => eprintln!("   {PREFIX}/sockio {payload} B: sample failed: {e}"),
            }
        }
    }
    let share = |tern: &[f64], ceiling: &[f64]| 100.0 * median(tern) / median(ceiling).max(1e-9);
    eprintln!(
        "   {PREFIX}: {:.0} messages/s of {MESSAGE_LEN} B into one endpoint ({:.0} % of raw tern-sockio's {MESSAGE_LEN} B datagrams/s), in {:.0} datagrams/s of {:.0} B ({:.0} % of raw tern-sockio's at that size), {} connections; the server thread on a CPU {:.0} % of the time ({:.0} messages per CPU-second), the clients {:.2} cores' worth; datagrams its kernel queue dropped per sample {drops:?}; client connections: {:.2} % of packets lost, window {:.0} KiB, smoothed RTT {:.0} µs",
        median(&messages),
        share(&messages, &ceiling_64),
        median(&datagrams),
        median(&sizes),
        share(&datagrams, &ceiling_same),
        CLIENT_THREADS * ENDPOINTS_PER_THREAD,
        100.0 * median(&busy),
        median(&per_cpu),
        median(&clients_busy),
        100.0 * median(&loss),
        median(&windows) / 1024.0,
        median(&rtts) * 1e6,
    );
    let messages_ceiling = format!("{PREFIX}/sockio_64B/messages_per_s");
    let datagrams_ceiling = format!("{PREFIX}/sockio_same_size/datagrams_per_s");
    let metrics = [
        (
            "messages_per_s",
            "messages/s",
            messages,
            (!ceiling_64.is_empty()).then(|| messages_ceiling.clone()),
        ),
        (
            "datagrams_per_s",
            "datagrams/s",
            datagrams,
            (!ceiling_same.is_empty()).then(|| datagrams_ceiling.clone()),
        ),
        ("sockio_64B/messages_per_s", "messages/s", ceiling_64, None),
        (
            "sockio_same_size/datagrams_per_s",
            "datagrams/s",
            ceiling_same,
            None,
        ),
    ];
    for (name, unit, samples, ceiling) in metrics {
        super::emit_metric(
            args,
            format!("{PREFIX}/{name}"),
            unit,
            Better::Higher,
            samples,
            ceiling,
        );
    }
    super::emit_metric(
        args,
        format!("{PREFIX}/messages_per_server_cpu_s"),
        "messages/cpu-s",
        Better::Higher,
        per_cpu,
        None,
    );
    super::emit_metric(
        args,
        format!("{PREFIX}/bytes_per_datagram"),
        "B",
        Better::Higher,
        sizes,
        None,
    );
}
