//! Level 0 benchmarks of tern-wire: packet protection, frame codec, nonce
//! construction, whole-packet creation, key update, receiver-index lookup,
//! the RSA + X25519 + HKDF handshake and the initiator's identity proof.
//!
//! Every AEAD figure has its ceiling in the same run: raw `aes-gcm` (and raw
//! `ring` with `--features ring`) sealing and opening the same number of
//! bytes, so the cost of Tern's wrapper is the difference. Seal, open, encode
//! and decode must not allocate; the allocation profiler shows it.

#![forbid(unsafe_code)]

use std::num::NonZeroUsize;
use std::time::{Duration, SystemTime};

use aes_gcm::Aes128Gcm;
use aes_gcm::aead::{AeadInOut, KeyInit};
use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use rand_core::{OsRng, RngCore};
use tern_wire::{
    Ack, AckFrameRanges, Backend, Frame, INTRO_LEN, IdentityKey, KeyConfig, PacketKey,
    PacketSealer, PendingIntro, ReplayGuard, Responder, Stream, TAG_LEN, peek_receiver_index,
};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// Payload sizes: a small message, typical mid sizes, the stream data of a
/// full 1452-byte packet (1364, as the reference transport measured), and a
/// whole datagram.
const SIZES: &[usize] = &[64, 256, 1024, 1364, 1452];
const KEY: [u8; 16] = [0x42; 16];
const IV: [u8; 12] = [0x24; 12];
/// A data packet header (type byte, receiver index, 2-byte packet number), the AEAD's associated data.
const AAD: [u8; 7] = [0x31, 0, 0, 0, 1, 0x00, 0x80];
const PACKET_NUMBER: u64 = 128;

fn key(backend: Backend) -> PacketKey {
    PacketKey::with_backend(backend, &KEY, &IV)
}

/// A sealer or opener's key configuration with `backend`.
fn config(backend: Backend) -> KeyConfig {
    KeyConfig {
        backend,
        ..KeyConfig::default()
    }
}

fn sealer(backend: Backend) -> PacketSealer {
    PacketSealer::with_opener(&mut OsRng, 1, config(backend)).0
}

/// The nonce for `PACKET_NUMBER`, for the raw ciphers.
fn nonce() -> [u8; 12] {
    key(Backend::RustCrypto).nonce(PACKET_NUMBER)
}

mod seal {
    use super::*;

    fn tern_with(bencher: Bencher, backend: Backend, size: usize) {
        let key = key(backend);
        let mut buf = vec![0xab; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            black_box(
                key.seal_in_place(PACKET_NUMBER, &AAD, black_box(&mut buf))
                    .expect("below the limit"),
            )
        });
    }

    /// Tern's `PacketKey` with the aes-gcm backend.
    #[divan::bench(args = SIZES)]
    fn tern(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::RustCrypto, size);
    }

    /// Tern's `PacketKey` with the ring backend.
    #[cfg(feature = "ring")]
    #[divan::bench(args = SIZES)]
    fn tern_ring(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::Ring, size);
    }

    /// The ceiling: aes-gcm 0.11 sealing in place, detached tag.
    #[divan::bench(args = SIZES)]
    fn raw_aes_gcm(bencher: Bencher, size: usize) {
        let cipher = Aes128Gcm::new(&KEY.into());
        let nonce = nonce().into();
        let mut buf = vec![0xab; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            black_box(
                cipher
                    .encrypt_inout_detached(&nonce, &AAD, black_box(buf.as_mut_slice()).into())
                    .expect("short input"),
            )
        });
    }

    /// The ceiling for the ring backend: ring sealing in place, separate tag.
    #[cfg(feature = "ring")]
    #[divan::bench(args = SIZES)]
    fn raw_ring(bencher: Bencher, size: usize) {
        use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY).expect("16-byte key"));
        let nonce_bytes = nonce();
        let mut buf = vec![0xab; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            let nonce = Nonce::assume_unique_for_key(nonce_bytes);
            black_box(
                key.seal_in_place_separate_tag(nonce, Aad::from(&AAD), black_box(&mut buf))
                    .expect("short input"),
            )
        });
    }
}

mod open {
    use super::*;

    /// A sealed payload of `size` bytes and its tag.
    fn sealed(size: usize) -> (Vec<u8>, [u8; TAG_LEN]) {
        let mut buf = vec![0xab; size];
        let tag = key(Backend::RustCrypto)
            .seal_in_place(PACKET_NUMBER, &AAD, &mut buf)
            .expect("below the limit");
        (buf, tag)
    }

    /// Opens a fresh copy of the same ciphertext each iteration; the copy is
    /// timed here and in the raw ceilings alike.
    fn tern_with(bencher: Bencher, backend: Backend, size: usize) {
        let key = key(backend);
        let (ciphertext, tag) = sealed(size);
        let mut scratch = vec![0u8; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            scratch.copy_from_slice(&ciphertext);
            key.open_in_place(PACKET_NUMBER, &AAD, black_box(&mut scratch), &tag)
                .expect("authentic");
        });
    }

    /// Tern's `PacketKey` with the aes-gcm backend (includes a copy of the
    /// ciphertext into the working buffer, as the raw ceiling does).
    #[divan::bench(args = SIZES)]
    fn tern(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::RustCrypto, size);
    }

    /// Tern's `PacketKey` with the ring backend.
    #[cfg(feature = "ring")]
    #[divan::bench(args = SIZES)]
    fn tern_ring(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::Ring, size);
    }

    /// The ceiling: aes-gcm 0.11 opening in place, detached tag.
    #[divan::bench(args = SIZES)]
    fn raw_aes_gcm(bencher: Bencher, size: usize) {
        let cipher = Aes128Gcm::new(&KEY.into());
        let nonce = nonce().into();
        let (ciphertext, tag) = sealed(size);
        let tag = tag.into();
        let mut scratch = vec![0u8; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            scratch.copy_from_slice(&ciphertext);
            cipher
                .decrypt_inout_detached(
                    &nonce,
                    &AAD,
                    black_box(scratch.as_mut_slice()).into(),
                    &tag,
                )
                .expect("authentic");
        });
    }

    /// The ceiling for the ring backend.
    #[cfg(feature = "ring")]
    #[divan::bench(args = SIZES)]
    fn raw_ring(bencher: Bencher, size: usize) {
        use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &KEY).expect("16-byte key"));
        let (ciphertext, tag) = sealed(size);
        let nonce_bytes = nonce();
        let mut scratch = vec![0u8; size];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            scratch.copy_from_slice(&ciphertext);
            let nonce = Nonce::assume_unique_for_key(nonce_bytes);
            key.open_in_place_separate_tag(
                nonce,
                Aad::from(&AAD),
                Tag::from(tag),
                black_box(&mut scratch),
                0..,
            )
            .expect("authentic");
        });
    }
}

mod frame {
    use super::*;

    const STREAM_DATA: usize = 1364;

    fn stream(data: &[u8]) -> Frame<'_> {
        Frame::Stream(Stream {
            id: 4,
            offset: 1 << 30,
            fin: false,
            data,
        })
    }

    /// Eight ranges, as a receiver reports under moderate loss.
    const ACK_RANGES: [std::ops::RangeInclusive<u64>; 8] = [
        9_000..=9_100,
        8_800..=8_990,
        8_500..=8_700,
        8_000..=8_400,
        7_000..=7_900,
        6_000..=6_900,
        5_000..=5_900,
        0..=4_900,
    ];

    fn ack() -> Frame<'static> {
        Frame::Ack(Ack {
            ranges: AckFrameRanges::new(&ACK_RANGES).expect("valid ranges"),
            ack_delay: Duration::from_micros(1_250),
            receive_time: Duration::from_micros(123_456_789),
        })
    }

    #[divan::bench]
    fn encode_stream_1364(bencher: Bencher) {
        let data = vec![0x5a; STREAM_DATA];
        let mut buf = [0u8; 1500];
        bencher
            .counter(BytesCount::new(STREAM_DATA))
            .bench_local(|| black_box(stream(black_box(&data)).encode(&mut buf).expect("fits")));
    }

    #[divan::bench]
    fn decode_stream_1364(bencher: Bencher) {
        let data = vec![0x5a; STREAM_DATA];
        let mut buf = [0u8; 1500];
        let len = stream(&data).encode(&mut buf).expect("fits");
        bencher
            .counter(BytesCount::new(STREAM_DATA))
            .bench_local(|| black_box(Frame::decode(black_box(&buf[..len])).expect("valid")));
    }

    #[divan::bench]
    fn encode_ack_8_ranges(bencher: Bencher) {
        let mut buf = [0u8; 128];
        bencher
            .counter(ItemsCount::new(1usize))
            .bench_local(|| black_box(black_box(ack()).encode(&mut buf).expect("fits")));
    }

    /// Decodes (and validates) the frame, then walks its ranges, as a sender does.
    #[divan::bench]
    fn decode_ack_8_ranges(bencher: Bencher) {
        let mut buf = [0u8; 128];
        let len = ack().encode(&mut buf).expect("fits");
        bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
            let (frame, _) = Frame::decode(black_box(&buf[..len])).expect("valid");
            let Frame::Ack(ack) = frame else {
                unreachable!("an ACK was encoded")
            };
            black_box(ack.ranges.iter().map(|r| r.end() - r.start()).sum::<u64>())
        });
    }
}

mod nonce {
    use super::*;

    /// Tern: IV XOR packet number.
    #[divan::bench]
    fn counter(bencher: Bencher) {
        let key = key(Backend::RustCrypto);
        let mut packet_number = 0u64;
        bencher.bench_local(|| {
            packet_number += 1;
            black_box(key.nonce(black_box(packet_number)))
        });
    }

    /// The reference transport's way: 12 random bytes per packet, here from
    /// the operating system's CSPRNG (`getrandom`).
    #[divan::bench]
    fn random(bencher: Bencher) {
        bencher.bench_local(|| {
            let mut nonce = [0u8; 12];
            OsRng.fill_bytes(&mut nonce);
            black_box(nonce)
        });
    }
}

mod packet_creation {
    use super::*;

    /// Frames + seal into a reused buffer: a Stream frame carrying `size`
    /// bytes of application data (the copy from the application's buffer
    /// included), optionally preceded by a one-range ACK, sealed as one data
    /// packet. The comparable ceiling is `seal/raw_aes_gcm/<size>`.
    fn tern_with(bencher: Bencher, backend: Backend, size: usize, with_ack: bool) {
        let data = vec![0x5a; size];
        let ranges = [1_000..=1_200u64];
        let mut sealer = sealer(backend);
        let mut buf = [0u8; 1452];
        let mut offset = 0u64;
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            if sealer.remaining_packets() == 0 {
                sealer = self::sealer(backend);
            }
            let mut packet = sealer.start(&mut buf).expect("below the limit");
            if with_ack {
                let ack = Ack {
                    ranges: AckFrameRanges::new(&ranges).expect("valid"),
                    ack_delay: Duration::from_micros(500),
                    receive_time: Duration::from_micros(1_000_000),
                };
                packet.push(&Frame::Ack(ack)).expect("fits");
            }
            packet
                .push(&Frame::Stream(Stream {
                    id: 4,
                    offset,
                    fin: false,
                    data: black_box(&data),
                }))
                .expect("fits");
            offset += size as u64;
            let (len, number) = packet.finish().expect("below the limit");
            // The peer acknowledges everything: 1-byte packet numbers would
            // follow; a 2-byte one is the common case on a busy path.
            sealer.on_ack(number.saturating_sub(200));
            black_box(len)
        });
    }

    /// A Stream frame + seal, aes-gcm backend.
    #[divan::bench(args = [64, 1364])]
    fn tern(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::RustCrypto, size, false);
    }

    /// A Stream frame + seal, ring backend.
    #[cfg(feature = "ring")]
    #[divan::bench(args = [64, 1364])]
    fn tern_ring(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::Ring, size, false);
    }

    /// An ACK and a Stream frame + seal, aes-gcm backend: a typical
    /// bidirectional packet.
    #[divan::bench(args = [64, 1364])]
    fn tern_with_ack(bencher: Bencher, size: usize) {
        tern_with(bencher, Backend::RustCrypto, size, true);
    }

    /// Opening such a packet and decoding its frames: the receive path.
    #[divan::bench(args = [64, 1364])]
    fn open_and_decode(bencher: Bencher, size: usize) {
        let data = vec![0x5a; size];
        let (mut sealer, mut opener) =
            PacketSealer::with_opener(&mut OsRng, 1, config(Backend::RustCrypto));
        let mut sealed = [0u8; 1452];
        let mut packet = sealer.start(&mut sealed).expect("below the limit");
        packet
            .push(&Frame::Stream(Stream {
                id: 4,
                offset: 0,
                fin: false,
                data: &data,
            }))
            .expect("fits");
        let (len, _) = packet.finish().expect("below the limit");
        let mut buf = [0u8; 1452];
        bencher.counter(BytesCount::new(size)).bench_local(|| {
            buf[..len].copy_from_slice(&sealed[..len]);
            // The same packet again: the opener does not track duplicates
            // (the reliability layer's replay window does).
            let opened = opener.open(black_box(&mut buf[..len])).expect("authentic");
            for frame in opened.frames() {
                black_box(frame.expect("valid"));
            }
        });
    }
}

mod intro {
    use super::*;
    use std::sync::OnceLock;

    /// RSA-2048 key generation takes ~250 ms: once per process.
    pub(super) fn identity() -> &'static IdentityKey {
        static KEY: OnceLock<IdentityKey> = OnceLock::new();
        KEY.get_or_init(|| IdentityKey::generate(&mut OsRng).expect("RSA key generation"))
    }

    pub(super) fn responder() -> Responder {
        Responder::new(
            identity().clone(),
            ReplayGuard::new(
                Duration::from_secs(30),
                NonZeroUsize::new(1 << 20).expect("not zero"),
            ),
            KeyConfig::default(),
        )
    }

    fn write_intro(now: SystemTime, buf: &mut [u8; INTRO_LEN]) -> PendingIntro {
        PendingIntro::write(
            &identity().public(),
            7,
            KeyConfig::default(),
            now,
            &mut OsRng,
            buf,
        )
        .expect("writes")
    }

    /// The initiator: fresh secret and X25519 key, RSA-OAEP encryption to
    /// the responder.
    #[divan::bench]
    fn create(bencher: Bencher) {
        let now = SystemTime::now();
        let mut buf = [0u8; INTRO_LEN];
        bencher.bench_local(|| black_box(write_intro(now, &mut buf)));
    }

    /// The responder: RSA-OAEP decryption (blinded), checks, X25519,
    /// replay guard. Every iteration gets a distinct intro.
    #[divan::bench]
    fn accept(bencher: Bencher) {
        let now = SystemTime::now();
        let mut responder = responder();
        bencher
            .with_inputs(|| {
                let mut buf = [0u8; INTRO_LEN];
                write_intro(now, &mut buf);
                buf
            })
            .bench_local_refs(|intro| {
                black_box(
                    responder
                        .accept(intro, now, &mut OsRng)
                        .expect("a fresh intro"),
                )
            });
    }

    /// The responder builds its reply: HKDF key schedule, packet keys, seal.
    #[divan::bench]
    fn reply(bencher: Bencher) {
        let now = SystemTime::now();
        let mut responder = responder();
        let mut out = [0u8; 1452];
        bencher
            .with_inputs(|| {
                let mut buf = [0u8; INTRO_LEN];
                write_intro(now, &mut buf);
                responder.accept(&buf, now, &mut OsRng).expect("fresh")
            })
            .bench_local_values(|accepted| {
                black_box(accepted.reply(9, &[Frame::Ping], &mut out).expect("fits"))
            });
    }

    /// The initiator opens the reply: X25519, HKDF, packet keys, open.
    #[divan::bench]
    fn open_reply(bencher: Bencher) {
        let now = SystemTime::now();
        let mut responder = responder();
        bencher
            .with_inputs(|| {
                let mut buf = [0u8; INTRO_LEN];
                let pending = write_intro(now, &mut buf);
                let accepted = responder.accept(&buf, now, &mut OsRng).expect("fresh");
                let mut reply = vec![0u8; 1452];
                let (len, _) = accepted.reply(9, &[Frame::Ping], &mut reply).expect("fits");
                reply.truncate(len);
                (pending, reply)
            })
            .bench_local_values(|(pending, mut reply)| {
                black_box(pending.open_reply(&mut reply).is_ok())
            });
    }
}

mod identity_proof {
    use super::intro::{identity, responder};
    use super::*;
    use std::sync::OnceLock;
    use tern_wire::{IdentityProof, Transcript};

    /// A finished handshake's transcript, from the initiator's side.
    fn transcript() -> &'static Transcript {
        static TRANSCRIPT: OnceLock<Transcript> = OnceLock::new();
        TRANSCRIPT.get_or_init(|| {
            let now = SystemTime::now();
            let mut intro = [0u8; INTRO_LEN];
            let pending = PendingIntro::write(
                &identity().public(),
                7,
                KeyConfig::default(),
                now,
                &mut OsRng,
                &mut intro,
            )
            .expect("writes");
            let accepted = responder().accept(&intro, now, &mut OsRng).expect("fresh");
            let mut reply = [0u8; 1452];
            let (len, _) = accepted.reply(9, &[], &mut reply).expect("fits");
            pending
                .open_reply(&mut reply[..len])
                .expect("opens")
                .transcript
        })
    }

    /// The initiator signs the transcript: RSA-2048 PSS, blinded.
    #[divan::bench]
    fn prove(bencher: Bencher) {
        let transcript = transcript();
        bencher.bench_local(|| black_box(transcript.prove(identity(), &mut OsRng).expect("signs")));
    }

    /// The responder checks it: SPKI parse and RSA-2048 PSS verification.
    #[divan::bench]
    fn verify(bencher: Bencher) {
        let transcript = transcript();
        let proof: IdentityProof = transcript.prove(identity(), &mut OsRng).expect("signs");
        bencher.bench_local(|| black_box(proof.verify(black_box(transcript)).expect("valid")));
    }
}

mod key_update {
    use super::*;

    /// The sender: next secret (HKDF), new AES key schedule, phase flip.
    #[divan::bench]
    fn sealer(bencher: Bencher) {
        let mut sealer = super::sealer(Backend::RustCrypto);
        let mut buf = [0u8; 64];
        bencher.bench_local(|| {
            let (_, number) = sealer
                .start(&mut buf)
                .expect("room")
                .finish()
                .expect("seals");
            sealer.on_ack(number);
            sealer.update_key().expect("confirmed");
        });
    }
}

mod receiver_index {
    use super::*;

    /// Reading the receiver index from a datagram's header, before any key:
    /// the wire's share of demultiplexing (the table lookup that follows is
    /// `level0_peer`'s `receiver_index` group).
    #[divan::bench]
    fn peek(bencher: Bencher) {
        let mut datagram = [0u8; 64];
        datagram[..7].copy_from_slice(&[0x30, 0, 0, 0, 0, 0, 0]);
        let mut i = 0u32;
        bencher.bench_local(|| {
            i = i.wrapping_add(0x9e37_79b9);
            datagram[1..5].copy_from_slice(&i.to_be_bytes());
            black_box(peek_receiver_index(black_box(&datagram)))
        });
    }
}
