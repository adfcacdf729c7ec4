//! `docs/wire-format.md` is normative; this test rebuilds its example packet
//! byte for byte so the document cannot drift from the code.

use std::time::Duration;

use tern_wire::{
    Ack, AckRanges, Frame, Frames, Header, MaxUdpPayload, PacketKey, PacketOpener, PacketSealer,
    Stream,
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

const KEY: [u8; 16] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
];
const IV: [u8; 12] = [
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab,
];
const PACKET_NUMBER: u64 = 300;
const ACK_RANGES: [std::ops::RangeInclusive<u64>; 2] = [40..=42, 30..=35];

fn example_frames() -> [Frame<'static>; 3] {
    [
        Frame::Ack(Ack {
            ranges: AckRanges::new(&ACK_RANGES).expect("valid ranges"),
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
    let mut sealer = PacketSealer::new(PacketKey::new(&KEY, &IV));
    let mut scratch = [0u8; 64];
    for _ in 0..PACKET_NUMBER {
        sealer
            .start(&mut scratch)
            .expect("room")
            .finish()
            .expect("below the limit");
    }
    let mut buf = [0u8; 1452];
    let mut packet = sealer.start(&mut buf).expect("room");
    for frame in &example_frames() {
        packet.push(frame).expect("fits");
    }
    let len = packet.finish().expect("below the limit");
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
fn the_documented_packet_is_what_the_sealer_writes_and_it_opens() {
    let packet = example_packet();
    assert_eq!(hex::encode(&packet), hex::encode(doc_hex("example-packet")));
    assert_eq!(
        Header::parse(&packet).expect("valid"),
        (Header::Data { packet_number: 300 }, 3)
    );
    let nonce = PacketKey::new(&KEY, &IV).nonce(PACKET_NUMBER);
    assert_eq!(hex::encode(nonce), hex::encode(doc_hex("example-nonce")));

    let mut packet = doc_hex("example-packet");
    let opener = PacketOpener::new(PacketKey::new(&KEY, &IV));
    let opened = opener.open(&mut packet).expect("authentic");
    let frames: Vec<_> = Frames::new(opened.payload())
        .collect::<Result<_, _>>()
        .expect("valid");
    assert_eq!(frames, example_frames());
}

#[test]
fn the_documented_capacities_are_what_size_computes() {
    for (payload, stream, message) in [
        (1200, 1157, 1176),
        (1452, 1409, 1428),
        (8952, 8909, 8928),
        (65_507, 65_463, 65_482),
    ] {
        let max = MaxUdpPayload::new(payload).expect("in range");
        let row = format!("| {payload} | {stream} | {message} |");
        assert!(DOC.contains(&row), "row {row} missing from the document");
        assert_eq!(max.guaranteed_stream_data_capacity(), stream, "{payload}");
        assert_eq!(max.guaranteed_message_capacity(), message, "{payload}");
    }
}
