//! `docs/wire-format.md` is normative; this test rebuilds its example packet
//! and key schedule byte for byte so the document cannot drift from the code.
//! It lives in the crate because the example's traffic secret is a fixed
//! one, and only the crate can make a secret from bytes.

use std::time::Duration;

use crate::keys::TrafficSecret;
use crate::test_support::{identity, other_identity, t0};
use crate::{
    Ack, AckFrameRanges, AckFrequency, Backend, Frame, Frames, Header, INTRO_LEN, KeyConfig,
    KeyPhase, MaxUdpPayload, ObservedAddress, PacketKey, PacketNumber, PacketOpener, PacketSealer,
    PendingIntro, ReplayGuard, Responder, Stream,
};
use rand_core::OsRng;
use rsa::Pss;
use rsa::pkcs8::DecodePublicKey;
use sha2::{Digest, Sha256};

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

#[test]
fn the_documented_max_message_size_frame_is_what_the_codec_writes() {
    let frame = Frame::MaxMessageSize(crate::MaxMessageSize { max: 1 << 16 });
    let mut buf = [0u8; 16];
    let len = frame.encode(&mut buf).expect("fits");
    let documented = doc_hex("example-max-message-size");
    assert_eq!(hex::encode(&buf[..len]), hex::encode(&documented));
    assert_eq!(Frame::decode_exact(&documented), Ok(frame));
}

#[test]
fn the_documented_observed_address_frame_is_what_the_codec_writes() {
    let frame = Frame::ObservedAddress(ObservedAddress {
        sequence: 1,
        address: "203.0.113.7:40112".parse().expect("an address"),
    });
    let mut buf = [0u8; 32];
    let len = frame.encode(&mut buf).expect("fits");
    let documented = doc_hex("example-observed-address");
    assert_eq!(hex::encode(&buf[..len]), hex::encode(&documented));
    assert_eq!(Frame::decode_exact(&documented), Ok(frame));
}

/// The Identity frame is laid out as documented, and its signature is an
/// RSASSA-PSS (SHA-256, 32-byte salt) signature, checked here with the `rsa`
/// crate directly, over SHA-256 of the documented label and the transcript
/// hash.
#[test]
fn the_documented_identity_proof_is_what_the_prover_signs() {
    let (responder_key, initiator_key) = (identity(), other_identity());
    let now = t0();
    let mut intro = [0u8; INTRO_LEN];
    let pending = PendingIntro::write(
        &responder_key.public(),
        1,
        KeyConfig::default(),
        now,
        &mut OsRng,
        &mut intro,
    )
    .expect("intro");
    let mut responder = Responder::new(
        responder_key.clone(),
        ReplayGuard::default(),
        KeyConfig::default(),
    );
    let accepted = responder.accept(&intro, now, &mut OsRng).expect("accepted");
    let mut reply = [0u8; 1452];
    let (len, _) = accepted.reply(2, &[], &mut reply).expect("reply");
    let transcript = pending
        .open_reply(&mut reply[..len])
        .expect("reply opens")
        .transcript;

    let proof = transcript.prove(initiator_key, &mut OsRng).expect("signs");
    let frame = proof.frame();
    let mut encoded = vec![0u8; frame.encoded_len()];
    frame.encode(&mut encoded).expect("fits");
    let spki = initiator_key.public().to_spki_der().expect("encodes");
    let signature = &encoded[1 + 2 + spki.len() + 2..];
    let mut expected = vec![0x12];
    expected.extend_from_slice(&[0xa6, 0x02]); // 294
    expected.extend_from_slice(&spki);
    expected.extend_from_slice(&[0x80, 0x02]); // 256
    expected.extend_from_slice(signature);
    assert_eq!(spki.len(), 294);
    assert_eq!(signature.len(), 256);
    assert_eq!(hex::encode(&encoded), hex::encode(&expected));

    let label = doc_hex("identity-proof-label");
    assert_eq!(label, b"tern v2 initiator identity");
    let digest = Sha256::new()
        .chain_update(&label)
        .chain_update(transcript.hash())
        .finalize();
    let key = rsa::RsaPublicKey::from_public_key_der(&spki).expect("SPKI");
    key.verify(Pss::new::<Sha256>(), &digest, signature)
        .expect("a PSS signature over label || transcript hash");
    assert_eq!(
        proof.verify(&transcript).expect("verifies"),
        initiator_key.public()
    );
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
        (1200, 1153, 1163),
        (1452, 1405, 1415),
        (8952, 8905, 8915),
        (65_507, 65_459, 65_469),
    ] {
        let max = MaxUdpPayload::new(payload).expect("in range");
        let row = format!("| {payload} | {stream} | {message} |");
        assert!(DOC.contains(&row), "row {row} missing from the document");
        assert_eq!(max.guaranteed_stream_data_capacity(), stream, "{payload}");
        assert_eq!(max.guaranteed_message_capacity(), message, "{payload}");
    }
}

/// A generator that counts: its bytes are 00, 01, 02, ... so the token key
/// of the documented example is `000102…0f` and its nonce `101112…1b`.
struct Counting(u8);

impl rand_core::RngCore for Counting {
    fn next_u32(&mut self) -> u32 {
        rand_core::impls::next_u32_via_fill(self)
    }
    fn next_u64(&mut self) -> u64 {
        rand_core::impls::next_u64_via_fill(self)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for byte in dest {
            *byte = self.0;
            self.0 = self.0.wrapping_add(1);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for Counting {}

#[test]
fn the_documented_token_and_retry_are_what_the_responder_writes() {
    let mut rng = Counting(0);
    let key = crate::TokenKey::random(&mut rng);
    let intro: [u8; 16] = core::array::from_fn(|i| 0xa0 + i as u8);
    let from = "192.0.2.1:4433".parse().expect("address");
    let token = key.seal(42, &intro, from, &mut rng);
    assert_eq!(token.to_vec(), doc_hex("example-token"));
    let retry = crate::write_retry(&intro, &token);
    assert_eq!(retry.to_vec(), doc_hex("example-retry"));
    assert_eq!(key.open(&token, &intro, from), Ok(()));
    assert_eq!(crate::parse_retry(&retry), Ok((intro, token)));
}

/// The example X25519 intro of §6.5: responder private key bytes 0x20 to
/// 0x3f, initiator's ephemeral private key bytes 0x40 to 0x5f, anonymous,
/// sent at 1 750 000 000 000 ms with index 0x01020304. The responder
/// with that key accepts it.
#[test]
fn the_example_x25519_intro_is_what_the_code_writes_and_its_responder_accepts() {
    let responder: [u8; 32] = core::array::from_fn(|i| 0x20 + i as u8);
    let ephemeral: [u8; 32] = core::array::from_fn(|i| 0x40 + i as u8);
    let intro = crate::handshake::example_x25519_intro(
        responder,
        ephemeral,
        1_750_000_000_000,
        RECEIVER_INDEX,
    );
    let public = x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(responder));
    if std::env::var_os("TERN_PRINT_EXAMPLE").is_some() {
        println!("{}", hex::encode(public.as_bytes()));
        for chunk in intro.chunks(32) {
            println!("{}", hex::encode(chunk));
        }
    }
    assert_eq!(
        public.as_bytes().to_vec(),
        doc_hex("example-x25519-responder-key")
    );
    assert_eq!(intro.to_vec(), doc_hex("example-x25519-intro"));
    let key = crate::IdentityKey(crate::identity::KeyPair::X25519(
        crate::crypto::x25519::SecretKey::from_bytes(responder),
    ));
    let mut responder = Responder::new(key, ReplayGuard::default(), KeyConfig::default());
    let accepted = responder
        .accept(&intro, t0(), &mut OsRng)
        .expect("accepted");
    assert_eq!(accepted.initiator_index(), RECEIVER_INDEX);
    assert_eq!(accepted.initiator_identity(), None);
}
