//! `docs/wire-format.md` is normative; this test rebuilds its example packet
//! and key schedule byte for byte so the document cannot drift from the code.

use std::time::Duration;

use tern_wire::{
    Ack, AckFrameRanges, AckFrequency, Backend, Frame, Frames, Header, KeyConfig, KeyPhase,
    MaxUdpPayload, PacketKey, PacketNumber, PacketOpener, PacketSealer, Stream, TrafficSecret,
};

const DOC: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/wire-format.md"
));

/// The hex in the fenced block that follows `<!-- name -->`.
fn doc_hex(name: &str) -> Vec<u8> {
    let marker = format!("<!-- {name} -->");
    let start = DOC
        .find(&marker)
        .unwrap_or_else(|| panic!("{marker} missing from the document"));
    let block = &DOC[start + marker.len()..];
    let block = &block[block.find("```").expect("fenced block") + 3..];
    let block = &block[block.find('\n').expect("fence line") + 1..];
    let block = &block[..block.find("```").expect("closing fence")];
    let digits: String = block
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.chars().filter(char::is_ascii_hexdigit))
        .collect();
    hex::decode(digits).expect("even number of hex digits")
}

/// The example traffic secret: bytes 0x00 to 0x1f.
fn secret() -> TrafficSecret {
    TrafficSecret::from_bytes(core::array::from_fn(|i| i as u8))
}

const RECEIVER_INDEX: u32 = 0x0102_0304;
const PACKET_NUMBER: u64 = 300;
const ACK_RANGES: [std::ops::RangeInclusive<u64>; 2] = [40..=42, 30..=35];

fn example_frames() -> [Frame<'static>; 3] {
    [
        Frame::Ack(Ack {
            ranges: AckFrameRanges::new(&ACK_RANGES).expect("valid ranges"),
            ack_delay: Duration::from_micros(1_500),
            receive_time: Duration::from_micros(2_000_000),
        }),
        Frame::Stream(Stream {
            id: 4,
            offset: 1024,
            fin: true,
            data: b"hello, tern",
        }),
        Frame::Ping,
    ]
}

fn example_packet() -> Vec<u8> {
    let mut sealer = PacketSealer::new(secret(), RECEIVER_INDEX, KeyConfig::default());
    for _ in 0..PACKET_NUMBER {
        sealer.skip_packet_number().expect("far from the end");
    }
    let mut buf = [0u8; 1452];
    let mut packet = sealer.start(&mut buf).expect("room");
    for frame in &example_frames() {
        packet.push(frame).expect("fits");
    }
    let (len, number) = packet.finish().expect("below the limit");
    assert_eq!(number, PACKET_NUMBER);
    buf[..len].to_vec()
}

#[test]
fn the_documented_plaintext_is_what_the_codec_writes() {
    let mut plaintext = vec![0u8; 256];
    let mut at = 0;
    for frame in &example_frames() {
        at += frame.encode(&mut plaintext[at..]).expect("fits");
    }
    assert_eq!(
        hex::encode(&plaintext[..at]),
        hex::encode(doc_hex("example-plaintext"))
    );
}

#[test]
fn the_documented_ack_frequency_frame_is_what_the_codec_writes() {
    let frame = Frame::AckFrequency(AckFrequency {
        sequence: 7,
        ack_eliciting_threshold: 10,
        max_ack_delay: Duration::from_millis(25),
    });
    let mut buf = [0u8; 16];
    let len = frame.encode(&mut buf).expect("fits");
    let documented = doc_hex("example-ack-frequency");
    assert_eq!(hex::encode(&buf[..len]), hex::encode(&documented));
    assert_eq!(Frame::decode_exact(&documented), Ok(frame));
}

/// Whether two keys seal the same bytes to the same ciphertext and tag.
fn same_key(a: &PacketKey, b: &PacketKey) -> bool {
    let (mut x, mut y) = (*b"same key?", *b"same key?");
    let tag_x = a.seal_in_place(7, b"aad", &mut x).expect("seals");
    let tag_y = b.seal_in_place(7, b"aad", &mut y).expect("seals");
    x == y && tag_x == tag_y && a.nonce(7) == b.nonce(7)
}

#[test]
fn the_documented_key_schedule_is_what_hkdf_derives() {
    let key: [u8; 16] = doc_hex("example-key").try_into().expect("16 bytes");
    let iv: [u8; 12] = doc_hex("example-iv").try_into().expect("12 bytes");
    let derived = secret().packet_key(Backend::default());
    assert!(same_key(&derived, &PacketKey::new(&key, &iv)));
    assert_eq!(
        hex::encode(derived.nonce(PACKET_NUMBER)),
        hex::encode(doc_hex("example-nonce"))
    );
    let next: [u8; 32] = doc_hex("example-next-secret").try_into().expect("32 bytes");
    assert!(same_key(
        &secret().next().packet_key(Backend::default()),
        &TrafficSecret::from_bytes(next).packet_key(Backend::default())
    ));
}

#[test]
fn the_documented_packet_is_what_the_sealer_writes_and_it_opens() {
    let packet = example_packet();
    assert_eq!(hex::encode(&packet), hex::encode(doc_hex("example-packet")));
    assert_eq!(
        Header::parse(&packet).expect("valid"),
        (
            Header::Data {
                receiver_index: RECEIVER_INDEX,
                key_phase: KeyPhase(false),
                packet_number: PacketNumber::from_wire(300, 2).expect("valid"),
            },
            7
        )
    );

    let mut packet = doc_hex("example-packet");
    let mut opener = PacketOpener::new(secret(), RECEIVER_INDEX, KeyConfig::default());
    let opened = opener.open(&mut packet).expect("authentic");
    assert_eq!(opened.packet_number(), PACKET_NUMBER);
    let frames: Vec<_> = Frames::new(opened.payload())
        .collect::<Result<_, _>>()
        .expect("valid");
    assert_eq!(frames, example_frames());
}

#[test]
fn the_documented_capacities_are_what_size_computes() {
    for (payload, stream, message) in [
        (1200, 1153, 1172),
        (1452, 1405, 1424),
        (8952, 8905, 8924),
        (65_507, 65_459, 65_478),
    ] {
        let max = MaxUdpPayload::new(payload).expect("in range");
        let row = format!("| {payload} | {stream} | {message} |");
        assert!(DOC.contains(&row), "row {row} missing from the document");
        assert_eq!(max.guaranteed_stream_data_capacity(), stream, "{payload}");
        assert_eq!(max.guaranteed_message_capacity(), message, "{payload}");
    }
}
