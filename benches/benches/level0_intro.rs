//! Level 0: the responder's CPU per intro, for each kind of identity. One
//! iteration is everything a responder spends on a fresh intro that it
//! accepts: opening and checking it (RSA-OAEP decryption, or the X25519
//! intro's exchanges and seals, or a resumed intro's ticket), the replay
//! guard, its own ephemeral key, the key schedule and the sealed reply. The intros are made beforehand,
//! outside the timing; each iteration gets a distinct one.
//!
//! The inverse of a figure is how many intros one core answers a second:
//! the intro budget an endpoint can afford, and what a flood of valid
//! intros costs it.

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::num::NonZeroUsize;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use divan::{Bencher, black_box};
use rand_core::{OsRng, RngCore};
use tern_wire::{
    EphemeralKey, EphemeralKeys, Frame, INTRO_LEN, IdentityKey, KeyConfig, PendingIntro,
    ReplayGuard, Responder, ResumptionSecret, TicketPolicy,
};

fn main() {
    divan::main();
}

/// The responder's RSA-2048 identity (about 250 ms to make: once).
fn rsa() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate(&mut OsRng).expect("RSA key generation"))
}

/// The responder's X25519 identity.
fn x25519() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate_x25519(&mut OsRng))
}

/// An initiator's X25519 identity, proven in the intro.
fn initiator() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate_x25519(&mut OsRng))
}

/// A responder for `identity` whose replay guard never fills in a run.
/// What a responder does with an intro: accepts it and writes its reply
/// into `reply`; returns the reply's length.
fn answer(
    responder: &mut Responder,
    intro: &[u8; INTRO_LEN],
    now: SystemTime,
    reply: &mut [u8],
) -> usize {
    let accepted = responder
        .accept(intro, now, &mut OsRng)
        .expect("a fresh intro");
    let (len, _keys) = accepted.reply(9, &[Frame::Ping], reply).expect("fits");
    len
}

fn responder(identity: &IdentityKey) -> Responder {
    Responder::new(
        identity.clone(),
        ReplayGuard::new(
            Duration::from_secs(30),
            NonZeroUsize::new(1 << 20).expect("not zero"),
        ),
        KeyConfig::default(),
    )
}

/// Accepts and answers fresh intros to `identity`, from `proving` if given.
fn accept_and_reply(bencher: Bencher, identity: &IdentityKey, proving: Option<&IdentityKey>) {
    let now = SystemTime::now();
    let public = identity.public();
    let mut responder = responder(identity);
    let mut reply = [0u8; 3 * INTRO_LEN];
    bencher
        .with_inputs(|| {
            let mut intro = [0u8; INTRO_LEN];
            PendingIntro::write_as(
                proving,
                EphemeralKey::random(&mut OsRng),
                &public,
                7,
                KeyConfig::default(),
                now,
                &mut OsRng,
                &mut intro,
            )
            .expect("writes");
            intro
        })
        .bench_local_refs(|intro| black_box(answer(&mut responder, intro, now, &mut reply)));
}

/// Accepts and answers fresh anonymous intros to `identity` with the
/// responder's ephemeral key drawn ahead, outside the timing, as an
/// endpoint's stock of keys has it: what stands between the intro and the
/// reply.
fn accept_from_stock_and_reply(bencher: Bencher, identity: &IdentityKey) {
    let now = SystemTime::now();
    let public = identity.public();
    let mut responder = responder(identity);
    let mut reply = [0u8; 3 * INTRO_LEN];
    bencher
        .with_inputs(|| {
            let mut intro = [0u8; INTRO_LEN];
            PendingIntro::write(
                &public,
                7,
                KeyConfig::default(),
                now,
                &mut OsRng,
                &mut intro,
            )
            .expect("writes");
            let mut stock = EphemeralKeys::new(1);
            stock.refill(&mut OsRng);
            (intro, stock)
        })
        .bench_local_refs(|(intro, stock)| {
            let accepted = responder
                .accept_from(intro, now, stock, &mut OsRng)
                .expect("a fresh intro");
            let (len, _keys) = accepted.reply(9, &[Frame::Ping], &mut reply).expect("fits");
            black_box(len)
        });
}

/// Accepts and answers fresh resumed intros to `identity`, each with a
/// ticket of its own (tickets are single-use) issued beforehand.
fn accept_resumed_and_reply(bencher: Bencher, identity: &IdentityKey) {
    let now = SystemTime::now();
    let responder =
        RefCell::new(responder(identity).with_tickets(TicketPolicy::default(), &mut OsRng));
    let mut reply = [0u8; 3 * INTRO_LEN];
    bencher
        .with_inputs(|| {
            let mut secret = [0u8; 32];
            OsRng.fill_bytes(&mut secret);
            let secret = ResumptionSecret::from_bytes(secret);
            let ticket = responder
                .borrow()
                .issue_ticket(&secret, None, now, &mut OsRng)
                .expect("issues tickets");
            let mut intro = [0u8; INTRO_LEN];
            PendingIntro::write_resumed(
                &ticket,
                &secret,
                EphemeralKey::random(&mut OsRng),
                7,
                KeyConfig::default(),
                now,
                &mut intro,
            )
            .expect("writes");
            intro
        })
        .bench_local_refs(|intro| {
            black_box(answer(&mut responder.borrow_mut(), intro, now, &mut reply))
        });
}

mod responder_per_intro {
    use super::*;

    /// A resumed intro (a ticket from an earlier session): two AES-GCM
    /// opens, the responder's ephemeral key and `ee`; no operation on its
    /// static key, so the same for either kind of identity.
    #[divan::bench]
    fn resumed(bencher: Bencher) {
        accept_resumed_and_reply(bencher, super::x25519());
    }

    /// An RSA intro: one blinded RSA-2048 decryption and one X25519
    /// exchange.
    #[divan::bench]
    fn rsa(bencher: Bencher) {
        accept_and_reply(bencher, super::rsa(), None);
    }

    /// An X25519 intro from an anonymous initiator: `es` and `ee`, one
    /// fixed-base multiplication for the responder's ephemeral key.
    #[divan::bench]
    fn x25519(bencher: Bencher) {
        accept_and_reply(bencher, super::x25519(), None);
    }

    /// An X25519 intro from an anonymous initiator, the responder's key
    /// drawn ahead: `es` and `ee`.
    #[divan::bench]
    fn x25519_key_ahead(bencher: Bencher) {
        accept_from_stock_and_reply(bencher, super::x25519());
    }

    /// An X25519 intro whose initiator proves its X25519 identity: `es`,
    /// `ss`, `ee` and `se`.
    #[divan::bench]
    fn x25519_proving(bencher: Bencher) {
        accept_and_reply(bencher, super::x25519(), Some(initiator()));
    }
}

mod initiator_per_intro {
    use super::*;

    /// The initiator writes an intro to `identity`.
    fn write(bencher: Bencher, identity: &IdentityKey, proving: Option<&IdentityKey>) {
        let now = SystemTime::now();
        let public = identity.public();
        let mut intro = [0u8; INTRO_LEN];
        bencher.bench_local(|| {
            black_box(
                PendingIntro::write_as(
                    proving,
                    EphemeralKey::random(&mut OsRng),
                    &public,
                    7,
                    KeyConfig::default(),
                    now,
                    &mut OsRng,
                    &mut intro,
                )
                .expect("writes"),
            )
        });
    }

    /// RSA-OAEP encryption to the responder.
    #[divan::bench]
    fn rsa(bencher: Bencher) {
        write(bencher, super::rsa(), None);
    }

    /// The X25519 intro, anonymous.
    #[divan::bench]
    fn x25519(bencher: Bencher) {
        write(bencher, super::x25519(), None);
    }

    /// The X25519 intro, anonymous, its ephemeral key drawn ahead (outside
    /// the timing): `es` and the seals.
    #[divan::bench]
    fn x25519_key_ahead(bencher: Bencher) {
        let now = SystemTime::now();
        let public = super::x25519().public();
        let mut intro = [0u8; INTRO_LEN];
        bencher
            .with_inputs(|| EphemeralKey::random(&mut OsRng))
            .bench_local_values(|key| {
                black_box(
                    PendingIntro::write_as(
                        None,
                        key,
                        &public,
                        7,
                        KeyConfig::default(),
                        now,
                        &mut OsRng,
                        &mut intro,
                    )
                    .expect("writes"),
                )
            });
    }
}

/// The RSA-2048 intro's decryption alone (RSA-OAEP with SHA-256, the
/// private key's CRT values precomputed as when it is generated or
/// loaded): with the blinding every intro gets, and without, to tell what
/// the blinding (a fresh random factor and its inverse modulo n per call)
/// costs.
mod rsa_decrypt {
    use super::*;
    use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
    use sha2::Sha256;

    fn key_and_ciphertext() -> (RsaPrivateKey, Vec<u8>) {
        let key = RsaPrivateKey::new(&mut OsRng, 2048).expect("RSA key generation");
        let ciphertext = RsaPublicKey::from(&key)
            .encrypt(&mut OsRng, Oaep::new::<Sha256>(), &[7u8; 120])
            .expect("encrypts");
        (key, ciphertext)
    }

    /// What every intro gets: blinded.
    #[divan::bench]
    fn blinded(bencher: Bencher) {
        let (key, ciphertext) = key_and_ciphertext();
        bencher.bench_local(|| {
            black_box(key.decrypt_blinded(&mut OsRng, Oaep::new::<Sha256>(), &ciphertext))
        });
    }

    /// Unblinded: for the comparison only (open to timing attacks).
    #[divan::bench]
    fn unblinded(bencher: Bencher) {
        let (key, ciphertext) = key_and_ciphertext();
        bencher.bench_local(|| black_box(key.decrypt(Oaep::new::<Sha256>(), &ciphertext)));
    }

    /// aws-lc's RSA-OAEP decryption of the same kind of ciphertext (always
    /// blinded): tern-wire's `aws-lc` backend.
    #[cfg(feature = "aws-lc")]
    #[divan::bench]
    fn aws_lc(bencher: Bencher) {
        use aws_lc_rs::rsa::{
            OAEP_SHA256_MGF1SHA256, OaepPrivateDecryptingKey, PrivateDecryptingKey,
        };
        use rsa::pkcs8::EncodePrivateKey;
        let (key, ciphertext) = key_and_ciphertext();
        let der = key.to_pkcs8_der().expect("encodes");
        let key = PrivateDecryptingKey::from_pkcs8(der.as_bytes())
            .ok()
            .and_then(|key| OaepPrivateDecryptingKey::new(key).ok())
            .expect("aws-lc loads the key");
        let mut plaintext = [0u8; 256];
        bencher.bench_local(|| {
            black_box(
                key.decrypt(&OAEP_SHA256_MGF1SHA256, &ciphertext, &mut plaintext, None)
                    .map(|plaintext| plaintext.len()),
            )
        });
    }
}

/// The X25519 operations an intro is made of, alone: what each step of the
/// connect's critical path costs on this machine.
mod exchange {
    use super::*;
    use x25519_dalek::{PublicKey, StaticSecret};

    /// A variable-base exchange (`es`, `ee`, `ss`, `se`): x25519-dalek's
    /// Montgomery ladder.
    #[divan::bench]
    fn diffie_hellman(bencher: Bencher) {
        let ours = StaticSecret::random_from_rng(OsRng);
        let theirs = PublicKey::from(&StaticSecret::random_from_rng(OsRng));
        bencher.bench_local(|| black_box(ours.diffie_hellman(black_box(&theirs))));
    }

    /// A fixed-base multiplication: the public half of a fresh key.
    #[divan::bench]
    fn public_key(bencher: Bencher) {
        let ours = StaticSecret::random_from_rng(OsRng);
        bencher.bench_local(|| black_box(PublicKey::from(black_box(&ours))));
    }

    /// A variable-base exchange with aws-lc (tern-wire's `aws-lc`
    /// backend): the key loaded once, the peer's key parsed each time.
    #[cfg(feature = "aws-lc")]
    #[divan::bench]
    fn aws_lc_diffie_hellman(bencher: Bencher) {
        use aws_lc_rs::agreement::{PrivateKey, UnparsedPublicKey, X25519, agree};
        let ours = PrivateKey::generate(&X25519).expect("a key");
        let theirs = PublicKey::from(&StaticSecret::random_from_rng(OsRng)).to_bytes();
        bencher.bench_local(|| {
            black_box(agree(
                &ours,
                UnparsedPublicKey::new(&X25519, black_box(&theirs)),
                (),
                |shared| Ok(shared[0]),
            ))
        });
    }

    /// A fresh key with aws-lc from 32 drawn bytes: the fixed-base
    /// multiplication that gives its public half.
    #[cfg(feature = "aws-lc")]
    #[divan::bench]
    fn aws_lc_fresh_key(bencher: Bencher) {
        use aws_lc_rs::agreement::{PrivateKey, X25519};
        bencher.bench_local(|| {
            let mut bytes = [0u8; 32];
            OsRng.fill_bytes(&mut bytes);
            black_box(PrivateKey::from_private_key(&X25519, &bytes).map(|key| key.algorithm()))
        });
    }
}
