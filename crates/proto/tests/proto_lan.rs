//! Local candidates (wire format §5.14): two peers behind one NAT that
//! does not hairpin cannot meet at the NAT's public address; each names
//! its own address when it registers, the rendezvous hands it to the
//! other in the Introduce, and the asker connects there beside the
//! observed address: the pair goes direct over the LAN, not through the
//! relay.

mod support;

use std::time::Duration;

use support::rendezvous::{ASKER, NEIGHBOUR, RENDEZVOUS, TARGET, World, addr};
use tern_proto::{Candidates, ConnectionPath, Event, PathPolicy, RelayConfig};
use tern_sim::{NatConfig, Seed};

/// The kinds of NAT the two peers share, none hairpinning.
fn shared_nats() -> [(&'static str, NatConfig); 2] {
    [
        ("port-restricted", NatConfig::port_restricted_cone()),
        ("symmetric", NatConfig::symmetric()),
    ]
}

/// Registers both peers (so each Introduce names the other's
/// candidates), then asks for the target from the asker.
fn introduce_neighbours(world: &mut World, policy: PathPolicy) -> (Event, Duration) {
    let asker_to_r = world.asker_to_r;
    assert!(world.endpoint(world.asker).register(asker_to_r));
    world.introduce_with(Duration::from_secs(30), policy)
}

#[test]
fn two_peers_behind_one_nat_without_hairpinning_go_direct_over_their_lan_addresses() {
    let seed = Seed::from_env_or(2525);
    for loss in [0.0, 0.02] {
        for (name, nat) in shared_nats() {
            let cell = format!("both behind one {name} NAT, loss {loss}");
            let mut world = World::behind_one_nat(seed.value(), nat, loss, true);
            let (outcome, connected_in) = introduce_neighbours(&mut world, PathPolicy::default());
            let Event::Introduced { connection, .. } = outcome else {
                panic!("{cell}: {outcome:?}");
            };
            let path = world.endpoint(world.asker).path(connection);
            assert_eq!(
                path,
                Some(ConnectionPath::Direct(addr(NEIGHBOUR))),
                "{cell}"
            );
            let (first_byte, all) = world.transfer(connection, 1 << 20);
            // The target sees the asker at its LAN address too.
            let seen = world
                .endpoint(world.asker)
                .connection(connection)
                .and_then(|c| c.observed_address());
            assert_eq!(seen, Some(addr(ASKER)), "{cell}");
            let stats = world.endpoint(world.rendezvous).stats();
            assert_eq!(stats.relay_pairs_made, 0, "{cell}");
            // One candidate each: the target punched at most twice per
            // moment of its schedule (six).
            let punches = world.endpoint(world.target).stats().punches_sent;
            assert!((1..=12).contains(&punches), "{cell}: {punches} punches");
            println!(
                "{cell}: direct over the LAN in {connected_in:?}, first byte {first_byte:?}, \
                 1 MB in {all:?}"
            );
        }
    }
}

#[test]
fn without_local_candidates_the_same_pair_cannot_go_direct() {
    let seed = Seed::from_env_or(2525);
    for (name, nat) in shared_nats() {
        let mut world = World::behind_one_nat(seed.value(), nat.clone(), 0.0, false);
        let (outcome, connected_in) = introduce_neighbours(&mut world, PathPolicy::default());
        println!("both behind one {name} NAT, no candidates: relayed in {connected_in:?}");
        let Event::Introduced { connection, .. } = outcome else {
            panic!("{name}: {outcome:?}");
        };
        let path = world.endpoint(world.asker).path(connection);
        let via = addr(RENDEZVOUS);
        assert_eq!(path, Some(ConnectionPath::Relayed { via }), "{name}");
        let mut world = World::behind_one_nat(seed.value(), nat, 0.0, false);
        let (outcome, _) = introduce_neighbours(&mut world, PathPolicy::DirectOnly);
        assert!(
            matches!(outcome, Event::IntroductionFailed { .. }),
            "{name}: {outcome:?}"
        );
    }
}

#[test]
fn a_loopback_candidate_or_the_askers_own_address_is_refused_and_a_full_list_bounds_the_punches() {
    let seed = Seed::from_env_or(2525);
    let mut world = World::behind_one_nat(seed.value(), NatConfig::symmetric(), 0.0, true);
    let mut candidates = Candidates::default();
    for candidate in ["127.0.0.1:4000", "[::1]:4000", ASKER, NEIGHBOUR] {
        assert!(candidates.push(addr(candidate)));
    }
    world
        .endpoint(world.target)
        .set_local_candidates(candidates);
    // The asker names a full list: the target punches toward each.
    let mut full = Candidates::default();
    for candidate in [ASKER, "192.168.9.1:1", "192.168.9.2:2", "[fd00::9]:9"] {
        assert!(full.push(addr(candidate)));
    }
    world.endpoint(world.asker).set_local_candidates(full);
    let (outcome, _) = introduce_neighbours(&mut world, PathPolicy::DirectOnly);
    let Event::Introduced { connection, .. } = outcome else {
        panic!("{outcome:?}");
    };
    let path = world.endpoint(world.asker).path(connection);
    assert_eq!(path, Some(ConnectionPath::Direct(addr(NEIGHBOUR))));
    assert_eq!(world.endpoint(world.asker).stats().candidates_refused, 3);
    world.sim.run_for(Duration::from_secs(2));
    // Six moments of the schedule, each toward the observed address and
    // the candidates (at most 4: 30 punches is the bound one Introduce
    // sets). Here 3: the target named the asker's address as its own.
    let punches = world.endpoint(world.target).stats().punches_sent;
    assert_eq!(punches, 6 * (1 + 3));
    assert_eq!(world.endpoint(world.target).stats().candidates_refused, 1);
}

#[test]
fn candidates_on_another_lan_change_nothing_between_two_nats() {
    let seed = Seed::from_env_or(2525);
    let cells = [
        (NatConfig::port_restricted_cone(), false),
        (NatConfig::symmetric(), true),
    ];
    for (nat, relayed) in cells {
        let relay = RelayConfig::default();
        let mut world = World::build(seed.value(), nat.clone(), Some(nat), 0.0, relay, true);
        let (outcome, connected_in) = introduce_neighbours(&mut world, PathPolicy::default());
        let Event::Introduced { connection, .. } = outcome else {
            panic!("{outcome:?}");
        };
        // The peer's LAN address lies behind its own NAT: that connect
        // never completes, the observed address (or the relay) wins.
        let path = world.endpoint(world.asker).path(connection);
        assert_eq!(
            matches!(path, Some(ConnectionPath::Relayed { .. })),
            relayed,
            "{path:?}"
        );
        assert_ne!(path, Some(ConnectionPath::Direct(addr(TARGET))));
        let expected = if relayed { 2..3 } else { 0..1 };
        assert!(
            expected.contains(&connected_in.as_secs()),
            "{connected_in:?}"
        );
    }
}
