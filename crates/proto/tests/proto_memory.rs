//! An endpoint holds a thousand connections at a bounded cost each.
//! `allocation_counter` installs a counting global allocator in this test
//! binary; the bytes the test's own thread leaves on the heap are what the
//! connections cost (the simulator runs both endpoints on that thread).

mod support;

use std::time::Duration;

use support::{Pair, drive};
use tern_proto::{EndpointConfig, Event};
use tern_sim::{LinkConfig, Seed};

#[test]
fn a_thousand_connections_on_one_endpoint_cost_at_most_16_kib_each_when_idle() {
    let seed = Seed::from_env_or(63);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let mut config = EndpointConfig::default();
    // One client endpoint makes all the connections: let it.
    config.intro_limits.total_rate = 100_000;
    config.intro_limits.total_burst = 100_000;
    config.intro_limits.per_source_rate = 100_000;
    config.intro_limits.per_source_burst = 100_000;
    let mut pair = Pair::new(seed.value(), link, config);
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    let (client_node, server_node) = (pair.client, pair.server);
    let live = allocation_counter::measure(|| {
        let now = pair.sim.now();
        for _ in 0..1_000 {
            pair.client()
                .connect(now, server_addr, &public)
                .expect("connect");
        }
        let mut connected = 0;
        let mut accepted = 0;
        drive(&mut pair.sim, Duration::from_secs(30), |sim| {
            while let Some((_, event)) = sim.node_mut(client_node).0.poll_event() {
                assert!(!matches!(event, Event::Closed(_)), "{event:?}");
                connected += usize::from(event == Event::Connected);
            }
            let server = &mut sim.node_mut(server_node).0;
            while server.poll_event().is_some() {}
            while server.accept().is_some() {
                accepted += 1;
            }
            connected == 1_000 && accepted == 1_000
        });
        // Let every handshake's last ACKs settle, then measure both sides.
        pair.sim.run_for(Duration::from_millis(200));
    })
    .bytes_current;
    let per_connection = live / 2_000;
    assert_eq!(pair.sim.node(server_node).0.len(), 1_000);
    assert!(
        per_connection <= 16 * 1024,
        "an idle connection costs {per_connection} bytes ({} of them inline)",
        size_of::<tern_proto::Connection>()
    );
}
