//! The goodput matrix: 4 MiB transfers through tern-sim paths that are
//! slow (1, 10, 100 Mbit/s), long (10 to 300 ms), lossy (0.1 to 5 %, or in
//! bursts) and reordering (5 or 10 %), with LEDBAT and with CUBIC, three
//! seeds each: 1 080 transfers (10 080, with 28 seeds, in the level-1
//! benchmark `level1_matrix`). The table is printed (`--nocapture`), and
//! docs/benchmarks.md holds it as measured. Asserted in every cell: the
//! transfer finishes with every byte intact; the receiver never waits 3 s
//! for progress; and in each reordering cell (over its three seeds) the
//! sender declares at most 1.5 times as many packets lost as the path
//! dropped, beyond the few it takes to learn that the path reorders. Then
//! the targets per cell, over its seeds ([`TARGETS`]): no wait of a
//! second for progress, CUBIC at 80 % of the Mathis bound with independent
//! loss, 95 % (CUBIC) and 90 % (LEDBAT) of the ideal without loss, and
//! 150 ms × 1 % within three times its loss-free time; the cells that miss
//! a target are named below with their cause and held to a limit of their
//! own.

mod support;

use std::time::Duration;

use support::matrix::{
    LEARNING, Miss, Path, SIZE, Targets, buffer_cells, check_buffer_cells, matrix, transfer,
    transfer_at,
};
use tern_proto::CongestionConfig;
use tern_sim::Seed;

#[test]
fn the_goodput_matrix_at_1_mbit() {
    let tally = matrix(1, 3);
    tally.check(1);
    tally.assert_every_cell(1);
    tally.assert_targets(1, &TARGETS);
}

#[test]
fn the_goodput_matrix_at_10_mbit() {
    let tally = matrix(10, 3);
    tally.check(10);
    tally.assert_every_cell(10);
    tally.assert_targets(10, &TARGETS);
}

#[test]
fn the_goodput_matrix_at_100_mbit() {
    let tally = matrix(100, 3);
    tally.check(100);
    tally.assert_every_cell(100);
    tally.assert_targets(100, &TARGETS);
}

/// The targets per cell, and the cells that miss them, each with
/// its traced cause (docs/benchmarks.md, "Why each missing cell misses")
/// and a limit a few points under what it measures, so that a regression
/// there fails too.
const TARGETS: Targets = Targets {
    mathis: mathis_misses,
    loss_free: loss_free_misses,
    three_times: three_times_misses,
    waits: cells_that_wait,
};

/// CUBIC below 80 % of the Mathis bound (medians of 76-79 %).
fn mathis_misses(path: &Path) -> Option<Miss> {
    let cause = match (path.mbit, path.rtt_ms, path.loss) {
        (1, 50, 0.05) => {
            "the bound takes the base RTT; the window of about seven packets queues itself at 11.6 ms a packet, so the smoothed RTT is 73-82 ms, against which CUBIC reaches 86-98 %"
        }
        (10, 10, 0.05) => {
            "the bound takes the base RTT; the transfer's own queueing makes the smoothed RTT 12 ms, against which CUBIC reaches 88-97 %"
        }
        _ => return None,
    };
    Some(Miss { limit: 0.72, cause })
}

/// Without loss, below 95 % (CUBIC) or 90 % (LEDBAT) of the ideal: 4 MiB
/// ends in or just after slow start where the bandwidth-delay product is
/// large (a model of slow start allows 89, 76, 94, 63, 35 and 23 % of the
/// ideal at 10 × 150, 10 × 300, 100 × 10, 100 × 50, 100 × 150 and 100 × 300).
/// The limits hold every reordering; reordering costs CUBIC more (its
/// spurious losses in slow start, and the reordering window's later
/// detection of the slow-start overflow).
fn loss_free_misses(controller: &str, path: &Path) -> Option<Miss> {
    let (limit, cause) = match (controller, path.mbit, path.rtt_ms) {
        ("cubic", 10, 150) => (0.75, "ends after slow start: model 89 %"),
        ("cubic", 10, 300) => (0.57, "ends after slow start: model 76 %"),
        ("cubic", 100, 10) => (0.78, "ends after slow start: model 94 %"),
        ("cubic", 100, 50) => (0.43, "ends in slow start: model 63 %"),
        ("cubic", 100, 150) => (0.23, "ends in slow start: model 35 %"),
        ("cubic", 100, 300) => (0.16, "ends in slow start: model 23 %"),
        ("ledbat", 10, 150) => (
            0.65,
            "leaves slow start at 3/4 of its target, then one packet a round trip",
        ),
        ("ledbat", 10, 300) => (
            0.45,
            "leaves slow start at 3/4 of its target, then one packet a round trip",
        ),
        ("ledbat", 100, 10) => (0.80, "with reordering only: spurious losses in slow start"),
        ("ledbat", 100, 50) => (0.47, "ends in slow start: model 63 %"),
        ("ledbat", 100, 150) => (0.27, "ends in slow start: model 35 %"),
        ("ledbat", 100, 300) => (0.18, "ends in slow start: model 23 %"),
        _ => return None,
    };
    Some(Miss { limit, cause })
}

/// 150 ms × 1 % slower than three times the loss-free time: at 10 and 100
/// Mbit/s the Mathis bound alone (0.945 Mbit/s, 35.7 s for 4 MiB) is 9x
/// and 25x the loss-free time.
fn three_times_misses(_controller: &str, path: &Path) -> Option<Miss> {
    let limit = match path.mbit {
        10 => 12.0,
        100 => 40.0,
        _ => return None,
    };
    Some(Miss {
        limit,
        cause: "the Mathis bound is 9x (10 Mbit/s) or 25x (100 Mbit/s) the loss-free time",
    })
}

/// Where a transfer may wait a second or more for progress; everywhere
/// else none may.
fn cells_that_wait(controller: &str, path: &Path) -> Option<&'static str> {
    match (controller, path.mbit, path.rtt_ms) {
        ("cubic", 1, 300) => Some(
            "CUBIC fills the 64 KB queue (0.51 s at 1 Mbit/s, a round trip of 0.8 s); a drop there is repaired a full-queue round trip later",
        ),
        (_, _, 300) if path.loss >= 0.05 => Some(
            "lost twice, the copy held behind other lost bytes by a window of two packets: each loss found 9/8 RTT and the reordering window (0.5 s) after the send",
        ),
        (_, _, 150) if path.loss >= 0.05 => {
            Some("lost three times, each found 9/8 RTT and the reordering window after it was sent")
        }
        _ => None,
    }
}

/// The lossy-ACK cells beside the matrix: 10 Mbit/s forward at 10 and 50
/// ms, the way back (the ACKs alone) losing 10 % or 30 % of its datagrams
/// in bursts of four on average, both controllers, six seeds. Asserted:
/// intact, the connection never closes (`transfer` fails if it does), and
/// no second without progress. Before probes asked for an ACK at once,
/// LEDBAT waited 2.0 s (10 ms) and 14.0 s (50 ms) at 10 %, and the
/// connection closed at 30 %; before a PING was answered with three ACK
/// datagrams, 2.3 s (10 ms, seed 28); before the responder's re-sent
/// handshake reply stopped giving RTT samples, 10.3 s (30 %, 50 ms, seed
/// 27: a five-second sample from the handshake left the receiver's probe
/// timeout at 16 s, and a lost window update waited for it); before a
/// flow-control update went again with the ACKs of the next round trip,
/// 4.15 s (30 %, 10 ms, seed 34: the update was lost, the sender used the
/// rest of its credit, and only the receiver's backed-off probes crossed
/// the lossy way).
#[test]
fn the_lossy_ack_cells() {
    let seed = Seed::from_env_or(26).value();
    let mut stalls = Vec::new();
    for back_loss in [0.10, 0.30] {
        for rtt_ms in [10, 50] {
            let path = Path {
                back_burst_loss: Some(back_loss),
                ..Path::plain(10, rtt_ms)
            };
            for (name, congestion) in [
                ("ledbat", CongestionConfig::ledbat()),
                ("cubic", CongestionConfig::cubic()),
            ] {
                for k in 0..6 {
                    let o = transfer(seed + k, path, congestion);
                    let ideal = SIZE as f64 * 8.0 / 10e6 + rtt_ms as f64 / 1e3;
                    eprintln!(
                        "{name:>6} ACKs lost {:>2.0} % {rtt_ms:>3} ms seed {}: {:>7.2} s ({:>5.1} % of ideal), gap {:>5.2} s",
                        back_loss * 100.0,
                        seed + k,
                        o.time.as_secs_f64(),
                        ideal / o.time.as_secs_f64() * 100.0,
                        o.longest_gap.as_secs_f64(),
                    );
                    if o.longest_gap >= Duration::from_secs(1) {
                        stalls.push((name, back_loss, rtt_ms, seed + k, o.longest_gap));
                    }
                }
            }
        }
    }
    assert!(stalls.is_empty(), "seconds without progress: {stalls:?}");
}

/// The lossy-ACK cells' handshakes that used to time out: at 30 % ACK loss
/// in bursts (LEDBAT, 10 ms), seeds 57 and 66 lost the responder's reply
/// to every intro until the 10 s handshake timeout. tern-sim's bursts last
/// a number of datagrams, and the handshake's way back carries only
/// replies: one per intro, six intros in 10 s with a back-off capped at
/// 2 s. Over seeds 20-1019 the handshake failed 29 times. Now an intro
/// goes again every second at most, and a repeated intro is answered with
/// two copies of the reply (both within three times the intro's bytes):
/// 0 of 1 000 fail. Asserted: the handshake completes (`transfer` fails if
/// the connection closes) and the transfer never waits a second for
/// progress.
#[test]
fn the_lossy_ack_handshakes_complete() {
    let path = Path {
        back_burst_loss: Some(0.30),
        ..Path::plain(10, 10)
    };
    for seed in [57, 66] {
        let o = transfer(seed, path, CongestionConfig::ledbat());
        eprintln!(
            "ledbat ACKs lost 30 %  10 ms seed {seed}: {:.2} s, gap {:.2} s",
            o.time.as_secs_f64(),
            o.longest_gap.as_secs_f64()
        );
        assert!(
            o.longest_gap < Duration::from_secs(1),
            "seed {seed}: {:?} without progress",
            o.longest_gap
        );
    }
}

/// 10 % reordering without loss at 100 Mbit/s x 150 ms, both controllers,
/// three seeds: a bound on the cell's time. It took 1.3-1.6 s, then 2.2-7.3
/// s once receive windows grew with use: the sender, waiting for credit,
/// had all its packets acknowledged, numbered the next ones in one byte,
/// and a packet the path held back (76 ms) arrived after more than 127
/// later ones, was rebuilt as the wrong number and failed to open; its
/// loss never proved spurious and the window cut stayed. Data packets are
/// now numbered in two bytes at least: 1.6-1.9 s.
#[test]
fn reordering_at_100_mbit_is_not_slowed_by_misread_packet_numbers() {
    let seed = Seed::from_env_or(26).value();
    let path = Path {
        reorder: 0.10,
        ..Path::plain(100, 150)
    };
    for (name, congestion) in [
        ("ledbat", CongestionConfig::ledbat()),
        ("cubic", CongestionConfig::cubic()),
    ] {
        for k in 0..3 {
            let o = transfer(seed + k, path, congestion);
            eprintln!(
                "{name:>6} 100 Mbit/s 150 ms reorder 10 % seed {}: {:.2} s, declared {} spurious {}",
                seed + k,
                o.time.as_secs_f64(),
                o.declared,
                o.spurious
            );
            assert!(
                o.time < Duration::from_millis(2_500),
                "{name}, seed {}: {:?}",
                seed + k,
                o.time
            );
        }
    }
}

/// The level-1 seeds that declared the most losses at 100 Mbit/s x 150
/// ms with 10 % reordering and no loss (22, 18, 19 and 19, all spurious):
/// the path holds a packet back 76 ms, and once the window had two steps
/// (75 ms) the time threshold, 9/8 of the smoothed RTT plus the window,
/// fell 1-5 ms short of the held packets' acknowledgements when the queue
/// drained (the RTT fell from about 170 to 150 ms in a round trip, and the
/// smoothed RTT with it), declaring up to 13 in the 5 ms before the first
/// proved spurious. Once the path reorders, the threshold is now taken of
/// the largest RTT sample of the last round trip or two: 2-7 declared.
/// Asserted: no more than the losses a transfer may take to learn.
#[test]
fn a_draining_queue_does_not_turn_held_back_packets_into_losses() {
    let path = Path {
        reorder: 0.10,
        ..Path::plain(100, 150)
    };
    for (name, congestion, seed) in [
        ("cubic", CongestionConfig::cubic(), 46),
        ("cubic", CongestionConfig::cubic(), 48),
        ("ledbat", CongestionConfig::ledbat(), 43),
        ("ledbat", CongestionConfig::ledbat(), 52),
    ] {
        let o = transfer(seed, path, congestion);
        eprintln!(
            "{name} seed {seed}: {:.2} s, declared {} spurious {} dropped {}",
            o.time.as_secs_f64(),
            o.declared,
            o.spurious,
            o.dropped
        );
        assert!(o.declared <= LEARNING, "{name}, seed {seed}: {o:?}");
    }
}

/// 5 % loss at 10 Mbit/s x 300 ms, where the window is two to six
/// packets: every loss must be repaired without waiting for the window or
/// a second probe round trip. Traced: a retransmission waited most of a
/// round trip for ACKs to bring the bytes in flight under the window the
/// loss had just reduced (LEDBAT, seed 26: six waits of a second or more,
/// the longest 1.25 s), and a retransmission lost again at the tail, with
/// nothing sent after it, was re-sent only a round trip after the probe
/// timeout, which carried new data or a PING (CUBIC, seed 28: 1.56 s).
/// Now the first ACK after a reduction lets the retransmission go (RFC
/// 9002 §7.3.2, in the manner of RFC 6937), and a probe carries the
/// oldest unacknowledged data (RFC 9002 §6.2.4).
#[test]
fn retransmissions_on_a_long_lossy_path_wait_for_neither_the_window_nor_a_second_probe() {
    let path = Path {
        loss: 0.05,
        ..Path::plain(10, 300)
    };
    let ledbat = transfer(26, path, CongestionConfig::ledbat());
    let cubic = transfer(28, path, CongestionConfig::cubic());
    for (name, o) in [("ledbat, seed 26", ledbat), ("cubic, seed 28", cubic)] {
        eprintln!(
            "{name}: {:.2} s, longest wait {:.2} s, {} waits of a second or more",
            o.time.as_secs_f64(),
            o.longest_gap.as_secs_f64(),
            o.long_gaps
        );
    }
    assert!(ledbat.long_gaps <= 2, "ledbat: {ledbat:?}");
    assert!(
        cubic.longest_gap < Duration::from_millis(1_400),
        "cubic: {cubic:?}"
    );
}

/// Two cells of 5 % loss at 300 ms where, over three seeds, all six
/// transfers waited a second or more for progress (1.10-1.62 s; CUBIC at
/// 100 Mbit/s with 5 % reordering, LEDBAT at 10 Mbit/s without): the
/// retransmission of the bytes the receiver waited for was lost too, and
/// the second loss was found 9/8 of a round trip (and the reordering
/// window) after the first retransmission. On a path this long such a
/// retransmission now goes twice (its copy is the stream's next chunk):
/// 0.89-0.95 s. Asserted: no wait of a second.
#[test]
fn a_blocking_retransmission_goes_twice_on_a_long_path_so_a_second_loss_does_not_stall() {
    let seed = Seed::from_env_or(26).value();
    let cubic = Path {
        loss: 0.05,
        reorder: 0.05,
        ..Path::plain(100, 300)
    };
    let ledbat = Path {
        loss: 0.05,
        ..Path::plain(10, 300)
    };
    let mut stalls = Vec::new();
    for (name, path, congestion) in [
        ("cubic", cubic, CongestionConfig::cubic()),
        ("ledbat", ledbat, CongestionConfig::ledbat()),
    ] {
        for k in 0..3 {
            let o = transfer(seed + k, path, congestion);
            eprintln!(
                "{name} {path:?} seed {}: {:.2} s, longest wait {:.2} s",
                seed + k,
                o.time.as_secs_f64(),
                o.longest_gap.as_secs_f64()
            );
            if o.longest_gap >= Duration::from_secs(1) {
                stalls.push((name, seed + k, o.longest_gap));
            }
        }
    }
    assert!(stalls.is_empty(), "waits of a second or more: {stalls:?}");
}

/// The asymmetric cells beside the matrix: 11.6 Mbit/s up, the transfer's
/// way, and 250 Mbit/s down, at 10 to 300 ms, both controllers, three
/// seeds. Asserted as in the matrix: intact, and never 3 s without
/// progress.
#[test]
fn the_asymmetric_link_cells() {
    let seed = Seed::from_env_or(26).value();
    for rtt_ms in [10, 50, 150, 300] {
        let path = Path {
            back_mbit: Some(250.0),
            ..Path::plain(0, rtt_ms)
        };
        let (cell, mbit) = ("asymmetric 11.6/250", 11.6);
        {
            for (name, congestion) in [
                ("ledbat", CongestionConfig::ledbat()),
                ("cubic", CongestionConfig::cubic()),
            ] {
                for k in 0..3 {
                    let o = transfer_at(seed + k, path, mbit, congestion);
                    let ideal = SIZE as f64 * 8.0 / (mbit * 1e6) + rtt_ms as f64 / 1e3;
                    eprintln!(
                        "{name:>6} {cell:<20} {rtt_ms:>3} ms seed {}: {:>7.2} s ({:>5.1} % of ideal), gap {:>5.2} s, declared {:>4} dropped {:>4} spurious {:>3}",
                        seed + k,
                        o.time.as_secs_f64(),
                        ideal / o.time.as_secs_f64() * 100.0,
                        o.longest_gap.as_secs_f64(),
                        o.declared,
                        o.dropped,
                        o.spurious,
                    );
                    assert!(
                        o.longest_gap < Duration::from_secs(3),
                        "{name} {cell} {rtt_ms} ms: {:?} without progress",
                        o.longest_gap
                    );
                }
            }
        }
    }
}

/// The buffer cells beside the matrix: a deep buffer (one second of
/// queue) and a shallow one (a quarter of the bandwidth-delay product, at
/// least eight datagrams), without loss and with 1 %, both controllers,
/// three seeds, at 10 Mbit/s × 50 and 150 ms and at 1 Mbit/s × 50 ms
/// (where a second of queue is 125 KB, which a 4 MiB transfer fills).
/// Asserted: intact; never 3 s without progress; LEDBAT keeps the deep
/// buffer's mean queueing delay near its 100 ms target (at most 125 ms); goodput without
/// loss at least half the ideal, and with loss at least 70 % of the
/// Mathis bound (CUBIC). The table, with the queueing delay of each
/// transfer, is in docs/benchmarks.md.
#[test]
fn the_deep_and_shallow_buffer_cells() {
    let mut runs = buffer_cells(10, &[50, 150], 3);
    runs.extend(buffer_cells(1, &[50], 3));
    check_buffer_cells(&runs, 0.5);
}
