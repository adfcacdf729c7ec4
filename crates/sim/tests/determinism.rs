//! The same seed gives the same run, bit for bit; events at one instant
//! keep the order they were scheduled in; a run can be captured as pcap.

mod common;

use std::time::Duration;

use common::{Blaster, Sink, Toy, addr};
use tern_sim::{Bottleneck, GilbertElliott, LinkConfig, Seed, Sim, SimConfig, TraceKind};

fn rough_link() -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(3),
        reorder: 0.01,
        loss: 0.02,
        burst_loss: Some(GilbertElliott {
            p_good_to_bad: 0.005,
            p_bad_to_good: 0.3,
            loss_good: 0.0,
            loss_bad: 0.8,
        }),
        duplicate: 0.01,
        corrupt: 0.005,
        bottleneck: Some(Bottleneck {
            bits_per_second: 50_000_000,
            queue_bytes: 64_000,
        }),
        max_datagram: Some(1452),
    }
}

/// Three blasters into one echoing sink over rough links; returns the
/// digest and the trace.
fn run(seed: u64) -> (u64, Vec<tern_sim::TraceEvent>) {
    let mut sim = Sim::new(
        SimConfig::seeded(seed)
            .with_default_link(rough_link())
            .with_trace(),
    );
    let start = sim.now();
    for (i, len) in [(1u8, 1200usize), (2, 1452), (3, 1453)] {
        let blaster = Blaster::new(addr(9, 9), len, Duration::from_micros(150), 20_000, start);
        sim.add_node(Toy::Blaster(blaster), &[addr(i, 1)])
            .expect("address");
    }
    sim.add_node(
        Toy::Sink(Sink {
            echo: true,
            ..Sink::default()
        }),
        &[addr(9, 9)],
    )
    .expect("address");
    while sim.step() {}
    (sim.digest(), sim.trace().expect("trace on").to_vec())
}

#[test]
fn the_same_seed_replays_a_long_run_bit_for_bit() {
    let seed = Seed::from_env_or(11);
    let (digest_a, trace_a) = run(seed.value());
    let (digest_b, trace_b) = run(seed.value());
    assert!(trace_a.len() > 100_000, "{}", trace_a.len());
    assert_eq!(digest_a, digest_b);
    assert_eq!(trace_a, trace_b);
    let (digest_c, _) = run(seed.value() + 1);
    assert_ne!(digest_a, digest_c, "another seed, another run");
}

#[test]
fn datagrams_sent_at_one_instant_arrive_in_the_order_sent() {
    let mut sim = Sim::new(SimConfig::seeded(1).with_trace());
    let start = sim.now();
    // Every datagram is due at the same instant (interval zero).
    let blaster = Blaster::new(addr(2, 2), 100, Duration::ZERO, 500, start);
    sim.add_node(Toy::Blaster(blaster), &[addr(1, 1)])
        .expect("address");
    let rx = sim
        .add_node(Toy::Sink(Sink::default()), &[addr(2, 2)])
        .expect("address");
    while sim.step() {}
    let arrivals = &sim.node(rx).sink().arrivals;
    assert_eq!(arrivals.len(), 500);
    assert!(arrivals.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
    assert!(arrivals.iter().all(|a| a.at == start));
    let delivered = sim
        .trace()
        .expect("trace on")
        .iter()
        .filter(|e| e.kind == TraceKind::Delivered)
        .count();
    assert_eq!(delivered, 500);
}

#[test]
fn a_capture_holds_every_delivered_datagram_as_ip_and_udp() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("run.pcap");
    let mut sim = Sim::new(SimConfig::seeded(3));
    sim.capture_pcap(&path).expect("create capture");
    let start = sim.now();
    let blaster = Blaster::new(addr(2, 2), 333, Duration::from_millis(1), 10, start);
    sim.add_node(Toy::Blaster(blaster), &[addr(1, 1)])
        .expect("address");
    sim.add_node(Toy::Sink(Sink::default()), &[addr(2, 2)])
        .expect("address");
    while sim.step() {}
    drop(sim); // flushes the capture
    let file = std::fs::File::open(&path).expect("capture written");
    let mut reader = pcap_file::pcap::PcapReader::new(file).expect("a pcap file");
    let mut packets = 0;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.expect("a packet");
        assert_eq!(packet.data.len(), 20 + 8 + 333);
        assert_eq!(packet.data[0], 0x45);
        assert_eq!(&packet.data[12..16], &[10, 0, 0, 1]);
        assert_eq!(u16::from_be_bytes([packet.data[22], packet.data[23]]), 2);
        packets += 1;
    }
    assert_eq!(packets, 10);
}
