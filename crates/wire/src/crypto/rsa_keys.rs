//! RSA-2048 identity keys' operations in the intro and the identity proof:
//! RSA-OAEP (SHA-256, MGF1-SHA-256, empty label) and RSASSA-PSS verification
//! (SHA-256, MGF1-SHA-256, 32-byte salt). The `rsa` crate parses, encodes and
//! generates keys and signs proofs; with the cargo feature `aws-lc`, aws-lc-rs
//! does the encryption, decryption and verification (several times faster:
//! its Montgomery arithmetic is assembly). The bytes on the wire are the
//! same standard encodings either way, so peers of either backend
//! interoperate.

use std::sync::Arc;

use rand_core::CryptoRngCore;
#[cfg(not(feature = "aws-lc"))]
use rsa::Oaep;
use rsa::traits::PublicKeyParts;
use rsa::{BigUint, Pss, RsaPrivateKey, RsaPublicKey};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::error::KeyError;
use crate::identity::RSA_BITS;

/// RSA ciphertext and signature size: the modulus size in bytes.
pub(crate) const RSA_LEN: usize = RSA_BITS / 8;

/// An RSA-2048 private key, with aws-lc's copy of it when that backend is
/// built in (parsed once, when the key is loaded).
#[derive(Clone)]
pub(crate) struct RsaPrivate {
    key: RsaPrivateKey,
    #[cfg(feature = "aws-lc")]
    oaep: Arc<aws_lc_rs::rsa::OaepPrivateDecryptingKey>,
}

impl RsaPrivate {
    /// The key; with aws-lc, its PKCS#8 form is loaded into aws-lc too.
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn new(key: RsaPrivateKey) -> Result<Self, KeyError> {
        Ok(Self { key })
    }

    /// The key; with aws-lc, its PKCS#8 form is loaded into aws-lc too.
    #[cfg(feature = "aws-lc")]
    pub(crate) fn new(key: RsaPrivateKey) -> Result<Self, KeyError> {
        use aws_lc_rs::rsa::{OaepPrivateDecryptingKey, PrivateDecryptingKey};
        use rsa::pkcs8::EncodePrivateKey;
        let der = key.to_pkcs8_der().map_err(KeyError::Pkcs8)?;
        let oaep = PrivateDecryptingKey::from_pkcs8(der.as_bytes())
            .ok()
            .and_then(|key| OaepPrivateDecryptingKey::new(key).ok())
            .ok_or(KeyError::Pkcs8(rsa::pkcs8::Error::KeyMalformed))?;
        Ok(Self {
            key,
            oaep: Arc::new(oaep),
        })
    }

    /// The `rsa` crate's key: encodings, the public half, signing.
    pub(crate) const fn key(&self) -> &RsaPrivateKey {
        &self.key
    }

    /// RSA-OAEP decryption of `ciphertext`, blinded (`rng` draws the
    /// blinding factor with the `rsa` crate; aws-lc blinds with its own
    /// generator). The plaintext is wiped when dropped.
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn decrypt(
        &self,
        ciphertext: &[u8],
        rng: &mut impl CryptoRngCore,
    ) -> Option<Zeroizing<Vec<u8>>> {
        self.key
            .decrypt_blinded(rng, Oaep::new::<Sha256>(), ciphertext)
            .ok()
            .map(Zeroizing::new)
    }

    /// RSA-OAEP decryption of `ciphertext`, blinded (`rng` draws the
    /// blinding factor with the `rsa` crate; aws-lc blinds with its own
    /// generator, and `rng` is drawn as the `rsa` crate would draw it). The
    /// plaintext is wiped when dropped.
    #[cfg(feature = "aws-lc")]
    pub(crate) fn decrypt(
        &self,
        ciphertext: &[u8],
        rng: &mut impl CryptoRngCore,
    ) -> Option<Zeroizing<Vec<u8>>> {
        use aws_lc_rs::rsa::OAEP_SHA256_MGF1SHA256;
        draw_as_rsa_blinding(self.key.n(), rng);
        let mut plaintext = Zeroizing::new(vec![0u8; RSA_LEN]);
        let len = self
            .oaep
            .decrypt(&OAEP_SHA256_MGF1SHA256, ciphertext, &mut plaintext, None)
            .ok()?
            .len();
        plaintext.truncate(len);
        Some(plaintext)
    }
}

/// Draws from `rng` what the rsa crate 0.9's blinding draws before a
/// decryption (random numbers of n's bit length, as num-bigint-dig makes
/// them, until one is below n), and discards it: aws-lc blinds with its own
/// generator, and a seeded responder must draw the same afterwards (its
/// packet-number skips, its keys) with either backend. (The rsa crate
/// draws again if the number has no inverse modulo n, which happens with
/// probability about 2^-1000.) A unit test holds this to the rsa crate.
#[cfg(feature = "aws-lc")]
fn draw_as_rsa_blinding(n: &BigUint, rng: &mut impl CryptoRngCore) {
    const DIGIT: usize = 64;
    let bits = n.bits();
    let top_bits = bits % DIGIT;
    let mut bytes = Zeroizing::new(vec![0u8; bits.div_ceil(DIGIT) * 8]);
    loop {
        rng.fill_bytes(&mut bytes);
        // num-bigint-dig fills 64-bit digits, least significant first, and
        // keeps the top digit's high `top_bits` bits.
        if top_bits > 0 {
            let at = bytes.len() - 8;
            let mut top = [0u8; 8];
            top.copy_from_slice(&bytes[at..]);
            let top = u64::from_le_bytes(top) >> (DIGIT - top_bits);
            bytes[at..].copy_from_slice(&top.to_le_bytes());
        }
        if BigUint::from_bytes_le(&bytes) < *n {
            return;
        }
    }
}

/// An RSA-2048 public key, with aws-lc's copy of it made when first used.
pub(crate) struct RsaPublic {
    key: RsaPublicKey,
    #[cfg(feature = "aws-lc")]
    oaep: std::sync::OnceLock<Option<aws_lc_rs::rsa::OaepPublicEncryptingKey>>,
}

impl PartialEq for RsaPublic {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for RsaPublic {}

impl RsaPublic {
    /// The key.
    pub(crate) fn new(key: RsaPublicKey) -> Arc<Self> {
        Arc::new(Self {
            key,
            #[cfg(feature = "aws-lc")]
            oaep: std::sync::OnceLock::new(),
        })
    }

    /// The `rsa` crate's key: encodings, the modulus.
    pub(crate) const fn key(&self) -> &RsaPublicKey {
        &self.key
    }

    /// RSA-OAEP encryption of `plaintext` into `out`, with a seed from
    /// `rng` (aws-lc draws it from its own generator).
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn encrypt(
        &self,
        plaintext: &[u8],
        rng: &mut impl CryptoRngCore,
        out: &mut [u8; RSA_LEN],
    ) -> Result<(), rsa::Error> {
        let ciphertext = self.key.encrypt(rng, Oaep::new::<Sha256>(), plaintext)?;
        // OAEP output is always exactly the modulus size, which the key's
        // size check fixed.
        if ciphertext.len() != RSA_LEN {
            return Err(rsa::Error::Internal);
        }
        out.copy_from_slice(&ciphertext);
        Ok(())
    }

    /// RSA-OAEP encryption of `plaintext` into `out`, with a seed from
    /// `rng` (aws-lc draws it from its own generator).
    #[cfg(feature = "aws-lc")]
    pub(crate) fn encrypt(
        &self,
        plaintext: &[u8],
        rng: &mut impl CryptoRngCore,
        out: &mut [u8; RSA_LEN],
    ) -> Result<(), rsa::Error> {
        // aws-lc takes the OAEP seed from its own generator; the 32 bytes the
        // rsa crate would draw for it are drawn all the same, so that what a
        // seeded initiator draws next (its packet-number skips, its keys) is
        // the same with either backend.
        let mut unused_seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut unused_seed[..]);
        use aws_lc_rs::rsa::{
            OAEP_SHA256_MGF1SHA256, OaepPublicEncryptingKey, PublicEncryptingKey,
        };
        use rsa::pkcs8::EncodePublicKey;
        let key = self
            .oaep
            .get_or_init(|| {
                let der = self.key.to_public_key_der().ok()?;
                let key = PublicEncryptingKey::from_der(der.as_bytes()).ok()?;
                OaepPublicEncryptingKey::new(key).ok()
            })
            .as_ref()
            .ok_or(rsa::Error::Internal)?;
        let written = key
            .encrypt(&OAEP_SHA256_MGF1SHA256, plaintext, out, None)
            .map_err(|_| rsa::Error::Internal)?;
        if written.len() == RSA_LEN {
            Ok(())
        } else {
            Err(rsa::Error::Internal)
        }
    }

    /// Whether `signature` is this key's RSASSA-PSS signature of the
    /// SHA-256 digest of `message`.
    ///
    /// RFC 8017 §8.1.2 step 2b applies RSAVP1, whose step 1 (§5.2.2) reads:
    /// "If the signature representative s is not between 0 and n - 1,
    /// output 'signature representative out of range'". The `rsa` crate's
    /// `Pss` verifier skips that step and reduces s mod n, so s + n would
    /// pass as a second encoding of a valid signature: Tern checks it
    /// first, whichever backend verifies.
    pub(crate) fn verify_pss(&self, message: &[u8], signature: &[u8]) -> PssCheck {
        if BigUint::from_bytes_be(signature) >= *self.key.n() {
            return PssCheck::OutOfRange;
        }
        if self.verify_below_modulus(message, signature) {
            PssCheck::Valid
        } else {
            PssCheck::Invalid
        }
    }

    #[cfg(not(feature = "aws-lc"))]
    fn verify_below_modulus(&self, message: &[u8], signature: &[u8]) -> bool {
        let digest = Sha256::digest(message);
        self.key
            .verify(Pss::new::<Sha256>(), &digest, signature)
            .is_ok()
    }

    #[cfg(feature = "aws-lc")]
    fn verify_below_modulus(&self, message: &[u8], signature: &[u8]) -> bool {
        use aws_lc_rs::rsa::PublicKeyComponents;
        use aws_lc_rs::signature::RSA_PSS_2048_8192_SHA256;
        let components = PublicKeyComponents {
            n: self.key.n().to_bytes_be(),
            e: self.key.e().to_bytes_be(),
        };
        components
            .verify(&RSA_PSS_2048_8192_SHA256, message, signature)
            .is_ok()
    }
}

/// What [`RsaPublic::verify_pss`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PssCheck {
    /// The signature verifies.
    Valid,
    /// The signature is not below the modulus.
    OutOfRange,
    /// The signature does not verify.
    Invalid,
}

/// The RSASSA-PSS signature of the SHA-256 digest of `message` with `key`
/// (blinded with `rng`), as [`RsaPublic::verify_pss`] checks it.
pub(crate) fn sign_pss(
    key: &RsaPrivateKey,
    message: &[u8],
    rng: &mut impl CryptoRngCore,
) -> Result<Vec<u8>, rsa::Error> {
    key.sign_with_rng(rng, Pss::new::<Sha256>(), &Sha256::digest(message))
}

#[cfg(test)]
mod tests {
    use rand_core::OsRng;
    use rsa::Oaep;

    use super::*;
    use crate::test_support::{identity, other_identity};

    fn private(key: &crate::IdentityKey) -> &RsaPrivate {
        key.rsa().expect("an RSA identity")
    }

    fn public(key: &crate::IdentityKey) -> Arc<RsaPublic> {
        RsaPublic::new(private(key).key().to_public_key())
    }

    #[test]
    fn oaep_round_trips_and_only_the_key_holder_decrypts() {
        let mut ciphertext = [0u8; RSA_LEN];
        public(identity())
            .encrypt(b"intro body", &mut OsRng, &mut ciphertext)
            .unwrap();
        let plaintext = private(identity())
            .decrypt(&ciphertext, &mut OsRng)
            .unwrap();
        assert_eq!(&plaintext[..], b"intro body");
        assert!(
            private(other_identity())
                .decrypt(&ciphertext, &mut OsRng)
                .is_none()
        );
        ciphertext[100] ^= 1;
        assert!(
            private(identity())
                .decrypt(&ciphertext, &mut OsRng)
                .is_none()
        );
        assert!(
            private(identity())
                .decrypt(&ciphertext[1..], &mut OsRng)
                .is_none()
        );
    }

    /// The `rsa` crate's encodings are the backend's: what it encrypts
    /// decrypts here and back, and its signatures verify here.
    #[test]
    fn the_rsa_crates_ciphertexts_and_signatures_are_understood_both_ways() {
        let key = private(identity()).key();
        let ciphertext = key
            .to_public_key()
            .encrypt(&mut OsRng, Oaep::new::<Sha256>(), b"from rsa")
            .unwrap();
        let plaintext = private(identity())
            .decrypt(&ciphertext, &mut OsRng)
            .unwrap();
        assert_eq!(&plaintext[..], b"from rsa");

        let mut ours = [0u8; RSA_LEN];
        public(identity())
            .encrypt(b"to rsa", &mut OsRng, &mut ours)
            .unwrap();
        let plaintext = key.decrypt(Oaep::new::<Sha256>(), &ours).unwrap();
        assert_eq!(plaintext, b"to rsa");

        let signature = sign_pss(key, b"message", &mut OsRng).unwrap();
        let digest = Sha256::digest(b"message");
        assert!(
            key.to_public_key()
                .verify(Pss::new::<Sha256>(), &digest, &signature)
                .is_ok()
        );
        assert_eq!(
            public(identity()).verify_pss(b"message", &signature),
            PssCheck::Valid
        );
    }

    /// A seeded caller draws the same from its generator with either
    /// backend: encrypting and decrypting consume what the rsa crate's do.
    #[test]
    fn oaep_draws_from_the_callers_generator_what_the_rsa_crate_draws() {
        use rand_chacha::ChaCha20Rng;
        use rand_core::{RngCore, SeedableRng};
        let key = private(identity()).key();
        for seed in 0..8 {
            let (mut ours, mut theirs) = (
                ChaCha20Rng::seed_from_u64(seed),
                ChaCha20Rng::seed_from_u64(seed),
            );
            let mut ciphertext = [0u8; RSA_LEN];
            public(identity())
                .encrypt(b"body", &mut ours, &mut ciphertext)
                .unwrap();
            let theirs_ciphertext = key
                .to_public_key()
                .encrypt(&mut theirs, Oaep::new::<Sha256>(), b"body")
                .unwrap();
            assert_eq!(ours.next_u64(), theirs.next_u64(), "after encrypting");
            private(identity()).decrypt(&ciphertext, &mut ours).unwrap();
            key.decrypt_blinded(&mut theirs, Oaep::new::<Sha256>(), &theirs_ciphertext)
                .unwrap();
            assert_eq!(ours.next_u64(), theirs.next_u64(), "after decrypting");
        }
    }

    #[test]
    fn a_pss_signature_verifies_for_its_message_and_key_only_and_below_the_modulus() {
        let signature = sign_pss(private(identity()).key(), b"message", &mut OsRng).unwrap();
        let public = public(identity());
        assert_eq!(public.verify_pss(b"other", &signature), PssCheck::Invalid);
        let mut flipped = signature.clone();
        flipped[RSA_LEN - 1] ^= 1;
        assert_eq!(public.verify_pss(b"message", &flipped), PssCheck::Invalid);
        let other = self::public(other_identity());
        assert_ne!(other.verify_pss(b"message", &signature), PssCheck::Valid);
        // s + n: the same value mod n, refused before any backend sees it.
        let lifted = (BigUint::from_bytes_be(&signature) + public.key().n()).to_bytes_be();
        assert_eq!(public.verify_pss(b"message", &lifted), PssCheck::OutOfRange);
    }
}
