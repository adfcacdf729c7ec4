//! Random interleavings of application calls, datagram delivery and timers
//! on random links: nothing panics, every message arrives whole and once,
//! and a graceful close always brings both sides to rest.

mod support;

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use support::{Outbox, Pair, drive, exchange, message};
use tern_proto::{EndpointConfig, Event};
use tern_sim::LinkConfig;

#[derive(Debug, Clone)]
enum Op {
    /// The client (true) or the server queues a message of this size.
    Send(bool, usize),
    /// A datagram from the client.
    Datagram(usize),
    /// The simulation runs this many steps.
    Step(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), prop_oneof![0..1_200usize, 1_200..40_000usize]).prop_map(|(c, n)| Op::Send(c, n)),
        1 => (0..1_500usize).prop_map(Op::Datagram),
        3 => (1..300u16).prop_map(Op::Step),
    ]
}

fn link() -> impl Strategy<Value = LinkConfig> {
    (1..20u64, 0.0..0.1f64, 0.0..0.1f64, 0.0..0.05f64).prop_map(|(ms, loss, reorder, duplicate)| {
        LinkConfig {
            delay: Duration::from_millis(ms),
            jitter: Duration::from_micros(ms * 100),
            loss,
            reorder,
            duplicate,
            ..LinkConfig::default()
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_interleaving_delivers_everything_once_and_closes_cleanly(
        seed in any::<u64>(),
        link in link(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut pair = Pair::new(seed, link, EndpointConfig::default());
        let (client, server) = exchange(&mut pair, &[1], Duration::from_secs(60));
        let (client_node, server_node) = (pair.client, pair.server);
        let mut outboxes = [Outbox::default(), Outbox::default()];
        let mut expected: [Vec<Bytes>; 2] = [Vec::new(), Vec::new()];
        let mut got: [Vec<Bytes>; 2] = [Vec::new(), Vec::new()];
        let mut next_id = 0u32;
        let take = |sim: &mut support::EndpointSim, got: &mut [Vec<Bytes>; 2]| {
            for (i, (node, handle)) in [(client_node, client), (server_node, server)].into_iter().enumerate() {
                if let Some(connection) = sim.node_mut(node).0.connection(handle) {
                    while let Some(m) = connection.recv_message() {
                        got[1 - i].push(m);
                    }
                    while connection.recv_datagram().is_some() {}
                }
            }
        };
        for op in ops {
            match op {
                Op::Send(from_client, size) => {
                    let m = message(next_id, size.max(4));
                    next_id += 1;
                    let i = usize::from(!from_client);
                    expected[i].push(m.clone());
                    outboxes[i].push(m);
                }
                Op::Datagram(size) => {
                    let connection = pair.sim.node_mut(client_node).0.connection(client).expect("client");
                    let _ = connection.send_datagram(Bytes::from(vec![1u8; size]));
                }
                Op::Step(n) => {
                    for _ in 0..n {
                        for (i, (node, handle)) in [(client_node, client), (server_node, server)].into_iter().enumerate() {
                            outboxes[i].pump(pair.sim.node_mut(node).0.connection(handle).expect("open"));
                        }
                        take(&mut pair.sim, &mut got);
                        if !pair.sim.step() {
                            break;
                        }
                    }
                }
            }
        }
        let deadline = pair.sim.elapsed() + PHASE;
        drive(&mut pair.sim, deadline, |sim| {
            for (i, (node, handle)) in [(client_node, client), (server_node, server)].into_iter().enumerate() {
                outboxes[i].pump(sim.node_mut(node).0.connection(handle).expect("open"));
            }
            take(sim, &mut got);
            got[0].len() >= expected[0].len() && got[1].len() >= expected[1].len()
        });
        for i in 0..2 {
            let mut want = expected[i].clone();
            let mut have = got[i].clone();
            want.sort();
            have.sort();
            prop_assert!(want == have, "side {i}: {} expected, {} delivered", want.len(), have.len());
        }
        // A graceful close brings both sides to rest.
        let now = pair.sim.now();
        pair.sim.node_mut(client_node).0.connection(client).expect("open").close(now, 0, Bytes::new());
        let mut closed = [false, false];
        let deadline = pair.sim.elapsed() + PHASE;
        drive(&mut pair.sim, deadline, |sim| {
            for (i, node) in [client_node, server_node].into_iter().enumerate() {
                let endpoint = &mut sim.node_mut(node).0;
                while let Some((_, event)) = endpoint.poll_event() {
                    closed[i] |= matches!(event, Event::Closed(_));
                }
            }
            closed == [true, true]
        });
        pair.sim.run_for(Duration::from_secs(60));
        for node in [client_node, server_node] {
            let endpoint = &mut pair.sim.node_mut(node).0;
            let _ = tern_proto::Node::poll_timeout(endpoint);
            prop_assert!(endpoint.is_empty(), "all state freed");
        }
    }
}

/// How long delivery, and then the close, may each take in virtual time.
const PHASE: Duration = Duration::from_secs(600);
