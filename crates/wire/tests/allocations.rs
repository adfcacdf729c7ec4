//! Sealing, opening, encoding and decoding never touch the heap; the first
//! packet each way expands its direction's key into a box (an idle
//! connection holds only the key's material), and following a key update
//! expands the next key once, into a box of its own.
//!
//! `allocation_counter` installs a counting global allocator in this test
//! binary. It counts per thread, so the test harness's own threads
//! (printing, collecting results) can allocate meanwhile without making the
//! test flaky.

use std::time::Duration;

use rand_core::OsRng;
use tern_wire::{
    Ack, AckFrameRanges, Backend, Close, CloseKind, Frame, Frames, KeyConfig, Message,
    PacketSealer, Stream,
};

/// Runs `f` and returns how many allocations (a reallocation is one) it
/// made on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

#[test]
fn sealing_opening_encoding_and_decoding_make_no_heap_allocations() {
    // The counter sees allocations at all.
    assert!(allocations_in(|| drop(std::hint::black_box(vec![1u8; 8]))) > 0);

    let ranges = [100..=120u64, 50..=90, 0..=40];
    let data = [0x5a; 1364];
    for backend in Backend::ALL {
        let config = KeyConfig {
            backend: *backend,
            key_limit: 60,
        };
        let (mut sealer, mut opener) = PacketSealer::with_opener(&mut OsRng, 9, config);
        let mut buf = [0u8; 1452];
        let (mut sealing, mut opening, mut updates) = (0, 0, 0);
        // Crosses key updates: updating allocates nothing (the new key is
        // expanded into the old one's box); following one allocates the
        // next phase's key once (it is expanded only when a packet first
        // claims that phase, so an idle connection does not hold it).
        for _ in 0..100 {
            let mut len = 0;
            sealing += allocations_in(|| {
                if sealer.key_update_due() {
                    sealer.update_key().expect("confirmed");
                }
                let mut packet = sealer.start(&mut buf).expect("room");
                let ack = Ack {
                    ranges: AckFrameRanges::new(&ranges).expect("valid"),
                    ack_delay: Duration::from_micros(300),
                    receive_time: Duration::from_micros(9_000),
                };
                packet.push(&Frame::Ack(ack)).expect("fits");
                packet
                    .push(&Frame::Message(Message {
                        id: 0,
                        data: b"small",
                    }))
                    .expect("fits");
                packet
                    .push(&Frame::Close(Close {
                        kind: CloseKind::Application,
                        code: 0,
                        reason: b"done",
                    }))
                    .expect("fits");
                let stream = Stream {
                    id: 8,
                    offset: 0,
                    fin: false,
                    data: &data[..1300],
                };
                packet.push(&Frame::Stream(stream)).expect("fits");
                let (sealed, number) = packet.finish().expect("below the limit");
                len = sealed;
                sealer.on_ack(number);
            });
            opening += allocations_in(|| {
                let opened = opener.open(&mut buf[..len]).expect("authentic");
                updates += usize::from(opened.key_updated());
                let mut frames = 0;
                for frame in Frames::new(opened.payload()) {
                    if let Frame::Ack(ack) = frame.expect("valid") {
                        assert_eq!(ack.ranges.iter().count(), 3);
                    }
                    frames += 1;
                }
                assert_eq!(frames, 4);
            });
        }
        assert_eq!(updates, 3, "{backend:?}: key updates followed");
        assert_eq!(sealing, 1, "{backend:?}: frames + seal allocated");
        assert_eq!(
            opening,
            1 + updates as u64,
            "{backend:?}: open + decode allocated beyond one key per update"
        );
    }
}
