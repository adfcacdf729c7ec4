//! A connection the relay carries moves to a direct path once one opens
//! (tern-sim): while relayed, both peers probe each other's direct
//! address in the background; the first probe answered moves the
//! connection, the other side follows, and the data in flight across the
//! move arrives intact, once.

mod support;

use std::time::Duration;

use support::rendezvous::World;
use tern_proto::{ConnectionHandle, ConnectionPath, Event, PathPolicy, RelayConfig};
use tern_sim::{NatConfig, Seed};

/// Two port-restricted NATs (direct works) whose direct way is cut for
/// the first `cut`: the introduction falls back to the relay, which
/// carries `bytes_per_second`; the asker's connection to the target.
fn relayed_until_the_cut_heals(
    seed: u64,
    loss: f64,
    cut: Duration,
    bytes_per_second: u64,
) -> (World, ConnectionHandle) {
    let nat = NatConfig::port_restricted_cone();
    let mut relay = RelayConfig::default();
    relay.bytes_per_second = bytes_per_second;
    let mut world = World::with_relay(seed, nat.clone(), nat, loss, relay);
    let [nat_a, nat_b] = world.nats;
    let sim = &mut world.sim;
    sim.schedule_partition_to_nat(world.asker, nat_b, Duration::ZERO, cut);
    sim.schedule_partition_to_nat(world.target, nat_a, Duration::ZERO, cut);
    let (outcome, _) = world.introduce_with(Duration::from_secs(30), PathPolicy::DirectThenRelay);
    let Event::Introduced { connection, .. } = outcome else {
        panic!("{outcome:?}");
    };
    let path = world.endpoint(world.asker).path(connection);
    assert!(
        matches!(path, Some(ConnectionPath::Relayed { .. })),
        "{path:?}"
    );
    (world, connection)
}

#[test]
fn a_relayed_transfer_moves_to_the_direct_path_once_it_opens_and_arrives_intact() {
    let seed = Seed::from_env_or(2520);
    for loss in [0.0, 0.02] {
        // 2 MB at 400 kB/s through the relay takes 5 s: the direct way
        // opens 4 s after the ask, in the middle of it.
        let cut = Duration::from_secs(4);
        let (mut world, connection) = relayed_until_the_cut_heals(seed.value(), loss, cut, 400_000);
        let len = 2 << 20;
        let (first_byte, all) = world.transfer(connection, len);
        let asker = world.endpoint(world.asker);
        let path = asker.path(connection);
        assert!(
            matches!(path, Some(ConnectionPath::Direct(_))),
            "loss {loss}: {path:?}"
        );
        let went_direct = asker.went_direct_after(connection);
        let stats = asker.stats();
        assert_eq!(stats.relayed_went_direct, 1, "loss {loss}: {stats:?}");
        assert!(stats.direct_probes >= 1, "{stats:?}");
        assert!(
            asker
                .connection(connection)
                .expect("open")
                .stats()
                .migrations
                >= 1,
            "the asker moved"
        );
        // The target moved too, and carries nothing through the relay.
        let target = world.endpoint(world.target);
        assert_eq!(target.stats().relayed_went_direct, 1, "loss {loss}");
        let relay = world.endpoint(world.rendezvous).stats();
        // Some of the data went through the relay, the rest direct.
        assert!(
            relay.relay_bytes_forwarded > 200_000 && relay.relay_bytes_forwarded < len as u64,
            "loss {loss}: {relay:?}"
        );
        println!(
            "loss {loss}: first byte {first_byte:?}, direct after {went_direct:?}, \
             2 MB in {all:?}, {} B relayed",
            relay.relay_bytes_forwarded
        );
    }
}

#[test]
fn a_connection_that_cannot_go_direct_keeps_probing_at_a_bounded_rate_and_stays_relayed() {
    let seed = Seed::from_env_or(2521);
    // The direct way never opens in this test's time.
    let cut = Duration::from_secs(600);
    let (mut world, connection) = relayed_until_the_cut_heals(seed.value(), 0.0, cut, 4_000_000);
    let before = world.endpoint(world.asker).stats().direct_probes;
    world.sim.run_for(Duration::from_secs(40));
    let asker = world.endpoint(world.asker);
    let probes = asker.stats().direct_probes - before;
    // Backed off to one every 4 s.
    assert!((8..=16).contains(&probes), "{probes} probes in 40 s");
    assert!(matches!(
        asker.path(connection),
        Some(ConnectionPath::Relayed { .. })
    ));
    assert_eq!(asker.went_direct_after(connection), None);
    let (_, all) = world.transfer(connection, 256 << 10);
    assert!(all < Duration::from_secs(5), "{all:?}");
}
