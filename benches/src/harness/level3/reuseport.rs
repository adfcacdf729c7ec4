//! `SO_REUSEPORT` scaling: the `max_datagrams` load (64-byte messages as
//! fast as Tern takes them) from eight client endpoints on two client
//! threads, into one server endpoint, then into two endpoints bound to one
//! port with [`Config::reuse_port`](tern_peer::Config::reuse_port), each on
//! a thread of its own. Both runs set `reuse_port`, so they differ only in
//! the number of endpoints. The kernel spreads connections over the
//! endpoints by a hash of the client's address, so eight clients rarely all
//! land on one; the summary shows how they fell. The two runs alternate
//! within every sample, and the ratio is taken sample by sample (twice
//! the mode's samples, as a ratio of two noisy figures needs them).
//!
//! With two cores the two client threads compete with the server threads,
//! so the ratio says how much a second endpoint gains on this machine, not
//! what it gains with a core of its own.

use tern_peer::IdentityKey;

use super::servers::{Reply, Servers, Window, blast};
use crate::cli::Args;
use crate::report::{Better, median};

const PREFIX: &str = "level3/reuseport";
const CLIENT_THREADS: usize = 2;
const ENDPOINTS_PER_THREAD: usize = 4;

pub(super) fn names() -> Vec<String> {
    [
        "1_endpoint/messages_per_s",
        "2_endpoints/messages_per_s",
        "scaling",
    ]
    .iter()
    .map(|m| format!("{PREFIX}/{m}"))
    .collect()
}

/// Each sample's ratio of two to one endpoints' rate (as many ratios as
/// samples both runs have, in order).
fn scaling(one: &[f64], two: &[f64]) -> Vec<f64> {
    one.iter()
        .zip(two)
        .filter(|&(&one, _)| one > 0.0)
        .map(|(one, two)| two / one)
        .collect()
}

/// One run against `endpoints` server endpoints: what arrived, and how many
/// connections each endpoint held.
fn sample(
    args: &Args,
    identity: &IdentityKey,
    endpoints: usize,
) -> std::io::Result<(Window, Vec<usize>)> {
    let servers = Servers::start(identity, endpoints, true, Reply::None)?;
    let window = blast(
        &servers,
        CLIENT_THREADS,
        ENDPOINTS_PER_THREAD,
        args.mode.sample_time(),
        args.mode.sample_time() * 8,
    )?;
    Ok((window, servers.connections()))
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    let (mut one, mut two) = (Vec::new(), Vec::new());
    let mut spreads = Vec::new();
    let mut busy: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // A ratio of two noisy figures: twice the usual samples.
    for i in 0..args.mode.samples() * 2 {
        // Alternate which runs first, so neither always gets the warmer machine.
        let order = if i % 2 == 0 { [1, 2] } else { [2, 1] };
        let mut pair = [None, None];
        for endpoints in order {
            match sample(args, identity, endpoints) {
                Ok((window, connections)) => {
                    if endpoints == 2 {
                        spreads.push(connections);
                    }
                    pair[endpoints - 1] = Some(window.messages_per_s());
                    busy[endpoints - 1].extend(window.server_busy());
                }
                Err(e) => eprintln!("   {PREFIX}/{endpoints}: sample failed: {e}"),
            }
        }
        if let [Some(a), Some(b)] = pair {
            one.push(a);
            two.push(b);
        }
    }
    let ratios = scaling(&one, &two);
    eprintln!(
        "   {PREFIX}: 1 endpoint {:.0} messages/s, 2 endpoints {:.0} messages/s: {:.2}x (samples {:.2?}; server threads on a CPU {:.2} and {:.2} cores' worth; connections per endpoint {spreads:?}; 2 cores shared with the clients)",
        median(&one),
        median(&two),
        median(&ratios),
        ratios,
        median(&busy[0]),
        median(&busy[1]),
    );
    for (name, samples) in [("1_endpoint", one), ("2_endpoints", two)] {
        super::emit_metric(
            args,
            format!("{PREFIX}/{name}/messages_per_s"),
            "messages/s",
            Better::Higher,
            samples,
            None,
        );
    }
    super::emit_metric(
        args,
        format!("{PREFIX}/scaling"),
        "x",
        Better::Higher,
        ratios,
        None,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_pairs_the_samples_in_order_and_skips_an_empty_one_endpoint_run() {
        assert_eq!(scaling(&[100.0, 200.0], &[150.0, 100.0]), [1.5, 0.5]);
        assert_eq!(scaling(&[0.0, 50.0, 10.0], &[10.0, 100.0]), [2.0]);
        assert!(scaling(&[], &[1.0]).is_empty());
    }
}
