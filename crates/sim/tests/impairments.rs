//! Each impairment's statistics for a fixed seed, within tight bounds.

mod common;

use std::time::Duration;

use common::{Blaster, Sink, Toy, addr};
use tern_sim::{Bottleneck, GilbertElliott, LinkConfig, NodeId, Seed, Sim, SimConfig};

/// A blaster and a sink joined by `link`; `count` datagrams of `len` bytes,
/// one every `interval`; runs until the blaster is done and nothing is in
/// flight.
fn blast(
    seed: u64,
    link: LinkConfig,
    count: u64,
    len: usize,
    interval: Duration,
) -> (Sim<Toy>, NodeId, NodeId) {
    let mut sim = Sim::new(SimConfig::seeded(seed));
    let start = sim.now();
    let tx = sim
        .add_node(
            Toy::Blaster(Blaster::new(addr(2, 2), len, interval, count, start)),
            &[addr(1, 1)],
        )
        .expect("address");
    let rx = sim
        .add_node(Toy::Sink(Sink::default()), &[addr(2, 2)])
        .expect("address");
    sim.set_link(tx, rx, link);
    while sim.step() {}
    assert_eq!(sim.node(tx).blaster().sent, count);
    (sim, tx, rx)
}

const US: Duration = Duration::from_micros(1);

#[test]
fn independent_loss_drops_its_share() {
    let seed = Seed::from_env_or(1);
    let link = LinkConfig {
        loss: 0.05,
        ..LinkConfig::default()
    };
    let (sim, tx, rx) = blast(seed.value(), link, 200_000, 100, US);
    let stats = sim.link_stats(tx, rx);
    let share = stats.lost as f64 / stats.sent as f64;
    assert!((0.048..0.052).contains(&share), "{share}");
    assert_eq!(
        sim.node(rx).sink().arrivals.len() as u64,
        stats.sent - stats.lost
    );
    assert_eq!(stats.delivered, 0, "counted per node, not per link");
}

/// Sends `count` numbered datagrams of 64 bytes through a link with bursty
/// loss `ge`, in runs of `segments` per transmit; returns the share lost
/// and the mean burst length in datagrams.
fn bursts_through(seed: u64, ge: GilbertElliott, count: u64, segments: usize) -> (f64, f64) {
    let mut sim = Sim::new(SimConfig::seeded(seed));
    let start = sim.now();
    let blaster = Blaster::new(addr(2, 2), 64, US, count, start).in_runs_of(segments);
    let tx = sim
        .add_node(Toy::Blaster(blaster), &[addr(1, 1)])
        .expect("address");
    let rx = sim
        .add_node(Toy::Sink(Sink::default()), &[addr(2, 2)])
        .expect("address");
    let link = LinkConfig {
        burst_loss: Some(ge),
        ..LinkConfig::default()
    };
    sim.set_link(tx, rx, link);
    while sim.step() {}
    assert_eq!(sim.node(tx).blaster().sent, count);
    let arrived: Vec<u64> = sim.node(rx).sink().arrivals.iter().map(|a| a.seq).collect();
    let lost = count - arrived.len() as u64;
    let bursts = arrived.windows(2).filter(|w| w[1] > w[0] + 1).count();
    (lost as f64 / count as f64, lost as f64 / bursts as f64)
}

#[test]
fn bursty_loss_has_the_models_rate_and_burst_length() {
    let seed = Seed::from_env_or(2);
    let ge = GilbertElliott {
        p_good_to_bad: 0.01,
        p_bad_to_good: 0.25,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    let (share, mean_burst) = bursts_through(seed.value(), ge, 400_000, 1);
    assert!(
        (share - ge.mean_loss()).abs() < 0.003,
        "{share} vs {}",
        ge.mean_loss()
    );
    assert!((3.7..4.3).contains(&mean_burst), "mean burst {mean_burst}");
}

/// The model's state moves once per datagram, so a burst's length is in
/// datagrams whether they go one per send or as the segments of one run
/// (GSO): counted per run, runs of 8 would lose 8 datagrams at a time and
/// bursts would average 32.
#[test]
fn bursty_loss_counts_each_segment_of_a_run() {
    let seed = Seed::from_env_or(4);
    let ge = GilbertElliott {
        p_good_to_bad: 0.25 * 0.3 / 0.7,
        p_bad_to_good: 0.25,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    let (share, mean_burst) = bursts_through(seed.value(), ge, 400_000, 8);
    assert!((share - 0.3).abs() < 0.005, "{share}");
    assert!((3.8..4.2).contains(&mean_burst), "mean burst {mean_burst}");
}

#[test]
fn delay_and_jitter_stay_in_range_and_reorder_only_with_jitter() {
    let seed = Seed::from_env_or(3);
    let delay = Duration::from_millis(10);
    let jitter = Duration::from_millis(4);
    for (jitter, expect_reordering) in [(Duration::ZERO, false), (jitter, true)] {
        let link = LinkConfig {
            delay,
            jitter,
            ..LinkConfig::default()
        };
        let interval = Duration::from_micros(100);
        let (sim, tx, rx) = blast(seed.value(), link, 20_000, 200, interval);
        let arrivals = &sim.node(rx).sink().arrivals;
        assert_eq!(arrivals.len(), 20_000);
        let start =
            arrivals[0].at - delay - arrivals[0].at.saturating_duration_since(arrivals[0].at);
        let _ = start;
        let mut total = Duration::ZERO;
        let first_send = sim
            .node(tx)
            .blaster()
            .next_at
            .map(|n| n - interval * 20_000);
        let first_send = first_send.expect("blaster clock");
        for a in arrivals {
            let sent = first_send + interval * a.seq as u32;
            let one_way = a.at.saturating_duration_since(sent);
            assert!(one_way >= delay && one_way <= delay + jitter, "{one_way:?}");
            total += one_way;
        }
        let mean = total / 20_000;
        let expected_mean = delay + jitter / 2;
        let error = mean.abs_diff(expected_mean);
        assert!(error < Duration::from_micros(50), "mean {mean:?}");
        let reordered = arrivals.windows(2).filter(|w| w[1].seq < w[0].seq).count();
        assert_eq!(reordered > 0, expect_reordering, "{reordered} out of order");
    }
}

#[test]
fn forced_reordering_holds_back_its_share() {
    let seed = Seed::from_env_or(4);
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        reorder: 0.02,
        ..LinkConfig::default()
    };
    let (sim, tx, rx) = blast(seed.value(), link, 50_000, 100, Duration::from_micros(50));
    let stats = sim.link_stats(tx, rx);
    let share = stats.reordered as f64 / 50_000.0;
    assert!((0.018..0.022).contains(&share), "{share}");
    // Each held-back datagram arrives after others sent later.
    let arrivals = &sim.node(rx).sink().arrivals;
    let late = arrivals.windows(2).filter(|w| w[1].seq < w[0].seq).count() as u64;
    assert!(
        late >= stats.reordered * 9 / 10 && late <= stats.reordered,
        "{late} vs {}",
        stats.reordered
    );
}

#[test]
fn duplication_and_corruption_happen_at_their_rates() {
    let seed = Seed::from_env_or(5);
    let link = LinkConfig {
        duplicate: 0.03,
        corrupt: 0.01,
        ..LinkConfig::default()
    };
    let (sim, tx, rx) = blast(seed.value(), link, 100_000, 300, US);
    let stats = sim.link_stats(tx, rx);
    let arrivals = &sim.node(rx).sink().arrivals;
    assert_eq!(arrivals.len() as u64, 100_000 + stats.duplicated);
    let dup = stats.duplicated as f64 / 100_000.0;
    assert!((0.028..0.032).contains(&dup), "{dup}");
    let damaged = arrivals.iter().filter(|a| !a.intact).count() as u64;
    assert_eq!(damaged, stats.corrupted);
    let corrupt = damaged as f64 / 100_000.0;
    assert!((0.009..0.011).contains(&corrupt), "{corrupt}");
}

#[test]
fn a_bottleneck_delivers_at_its_rate_and_never_queues_past_its_limit() {
    let seed = Seed::from_env_or(6);
    let bottleneck = Bottleneck {
        bits_per_second: 10_000_000,
        queue_bytes: 30_000,
    };
    let link = LinkConfig {
        bottleneck: Some(bottleneck),
        ..LinkConfig::default()
    };
    // 1000-byte datagrams every 400 µs: 20 Mbit/s offered to 10 Mbit/s.
    let (sim, tx, rx) = blast(seed.value(), link, 25_000, 1000, Duration::from_micros(400));
    let stats = sim.link_stats(tx, rx);
    let arrivals = &sim.node(rx).sink().arrivals;
    let first = arrivals[0].at;
    let last = arrivals[arrivals.len() - 1].at;
    let bits = (arrivals.len() as f64 - 1.0) * 8000.0;
    let rate = bits / last.saturating_duration_since(first).as_secs_f64();
    assert!((rate - 10e6).abs() / 10e6 < 0.005, "{rate}");
    assert!(stats.max_queue_bytes <= 30_000);
    assert!(stats.max_queue_bytes >= 29_000, "{}", stats.max_queue_bytes);
    let dropped = stats.queue_dropped as f64 / 25_000.0;
    assert!((0.49..0.51).contains(&dropped), "{dropped}");
    // 30 000 bytes drain in 24 ms at 10 Mbit/s.
    assert!(
        stats.max_sojourn <= Duration::from_millis(24),
        "{:?}",
        stats.max_sojourn
    );
    assert!(
        stats.max_sojourn >= Duration::from_millis(23),
        "{:?}",
        stats.max_sojourn
    );
}

#[test]
fn datagrams_over_the_paths_limit_are_dropped() {
    let mut sim = Sim::new(SimConfig::seeded(7));
    let start = sim.now();
    let small = sim
        .add_node(
            Toy::Blaster(Blaster::new(addr(9, 9), 1400, US, 10, start)),
            &[addr(1, 1)],
        )
        .expect("address");
    let large = sim
        .add_node(
            Toy::Blaster(Blaster::new(addr(9, 9), 1401, US, 10, start)),
            &[addr(2, 2)],
        )
        .expect("address");
    let rx = sim
        .add_node(Toy::Sink(Sink::default()), &[addr(9, 9)])
        .expect("address");
    let mtu = LinkConfig {
        max_datagram: Some(1400),
        ..LinkConfig::default()
    };
    sim.set_link(small, rx, mtu);
    sim.set_link(large, rx, mtu);
    while sim.step() {}
    assert_eq!(sim.node(rx).sink().arrivals.len(), 10);
    assert_eq!(sim.link_stats(large, rx).too_large, 10);
}

#[test]
fn a_partition_drops_everything_while_it_lasts_then_heals() {
    let mut sim = Sim::new(SimConfig::seeded(8));
    let start = sim.now();
    let interval = Duration::from_millis(10);
    let tx = sim
        .add_node(
            Toy::Blaster(Blaster::new(addr(2, 2), 100, interval, 300, start)),
            &[addr(1, 1)],
        )
        .expect("address");
    let rx = sim
        .add_node(Toy::Sink(Sink::default()), &[addr(2, 2)])
        .expect("address");
    sim.schedule_partition(tx, rx, Duration::from_secs(1), Duration::from_secs(1));
    while sim.step() {}
    let seqs: Vec<u64> = sim.node(rx).sink().arrivals.iter().map(|a| a.seq).collect();
    // Sent at 0, 10, ..., 2990 ms: those at 1000..2000 ms (seq 100..=199) fall in the partition.
    assert_eq!(seqs.len(), 200);
    assert!(seqs.iter().all(|s| !(100..200).contains(s)), "{seqs:?}");
    assert_eq!(sim.link_stats(tx, rx).down_dropped, 100);
}

#[test]
fn a_rebound_node_shows_a_new_address_and_is_reached_there() {
    let mut sim = Sim::new(SimConfig::seeded(9));
    let start = sim.now();
    let interval = Duration::from_millis(10);
    let (old, new) = (addr(1, 1), addr(1, 4242));
    let tx = sim
        .add_node(
            Toy::Blaster(Blaster::new(addr(2, 2), 100, interval, 100, start)),
            &[old],
        )
        .expect("address");
    let rx = sim
        .add_node(
            Toy::Sink(Sink {
                echo: true,
                ..Sink::default()
            }),
            &[addr(2, 2)],
        )
        .expect("address");
    sim.schedule_rebind(Duration::from_millis(495), old, new);
    while sim.step() {}
    let sources: Vec<_> = sim
        .node(rx)
        .sink()
        .arrivals
        .iter()
        .map(|a| a.from)
        .collect();
    assert_eq!(sources.len(), 100);
    assert!(sources[..50].iter().all(|s| *s == old));
    assert!(sources[50..].iter().all(|s| *s == new));
    // Echoes to the old address before the rebinding reached the blaster's
    // node; those after went to the new one and reached it too, while the
    // old address leads nowhere.
    assert_eq!(sim.stats().unroutable, 0);
    assert_eq!(sim.stats().delivered, 200);
    let _ = tx;
}
