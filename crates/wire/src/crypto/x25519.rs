//! X25519 (RFC 7748) private keys and exchanges, from x25519-dalek or, with
//! the cargo feature `aws-lc`, from aws-lc-rs's assembly field arithmetic.
//!
//! Both backends clamp the scalar when they use it and take the 32 key bytes
//! as drawn, so a key has the same public half and the same exchanges in
//! either: peers built with different backends interoperate, and a seeded
//! generator draws the same keys. A private key is wiped from memory when
//! dropped (x25519-dalek zeroizes its secret; aws-lc cleanses every
//! allocation it frees).

use core::fmt;

use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

use crate::header::X25519_KEY_LEN;

/// An X25519 private key.
pub(crate) struct SecretKey(Inner);

#[cfg(not(feature = "aws-lc"))]
type Inner = x25519_dalek::StaticSecret;

/// Shared by a key's clones (aws-lc keys do not copy; the responder keeps
/// its ephemeral key while an identity proof may come).
#[cfg(feature = "aws-lc")]
type Inner = std::sync::Arc<aws_lc_rs::agreement::PrivateKey>;

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl Clone for SecretKey {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl SecretKey {
    /// A key drawn from `rng` (32 bytes, as x25519-dalek draws them).
    pub(crate) fn random(rng: &mut impl CryptoRngCore) -> Self {
        let mut bytes = [0u8; X25519_KEY_LEN];
        rng.fill_bytes(&mut bytes);
        Self::from_bytes(bytes)
    }

    /// The key of 32 bytes (clamped when used); `bytes` is wiped.
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn from_bytes(mut bytes: [u8; X25519_KEY_LEN]) -> Self {
        use zeroize::Zeroize;
        let key = x25519_dalek::StaticSecret::from(bytes);
        bytes.zeroize();
        Self(key)
    }

    /// The key of 32 bytes (clamped when used); `bytes` is wiped.
    #[cfg(feature = "aws-lc")]
    pub(crate) fn from_bytes(mut bytes: [u8; X25519_KEY_LEN]) -> Self {
        use aws_lc_rs::agreement::{PrivateKey, X25519};
        use zeroize::Zeroize;
        // Cannot fail: every 32-byte string is an X25519 private key.
        let key = PrivateKey::from_private_key(&X25519, &bytes)
            .expect("32 bytes are an X25519 private key");
        bytes.zeroize();
        Self(std::sync::Arc::new(key))
    }

    /// The 32 key bytes, for the key's PKCS#8 form (wiped when dropped).
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn to_bytes(&self) -> Zeroizing<[u8; X25519_KEY_LEN]> {
        Zeroizing::new(self.0.to_bytes())
    }

    /// The 32 key bytes, for the key's PKCS#8 form (wiped when dropped).
    #[cfg(feature = "aws-lc")]
    pub(crate) fn to_bytes(&self) -> Zeroizing<[u8; X25519_KEY_LEN]> {
        use aws_lc_rs::encoding::{AsBigEndian, Curve25519SeedBin};
        let mut bytes = Zeroizing::new([0u8; X25519_KEY_LEN]);
        // Cannot fail for an X25519 key, whose raw form is 32 bytes (in a
        // buffer aws-lc-rs wipes when dropped).
        let seed: Curve25519SeedBin<'static> =
            self.0.as_be_bytes().expect("an X25519 key has a raw form");
        bytes.copy_from_slice(seed.as_ref());
        bytes
    }

    /// The public half.
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn public_key(&self) -> [u8; X25519_KEY_LEN] {
        x25519_dalek::PublicKey::from(&self.0).to_bytes()
    }

    /// The public half.
    #[cfg(feature = "aws-lc")]
    pub(crate) fn public_key(&self) -> [u8; X25519_KEY_LEN] {
        let mut public = [0u8; X25519_KEY_LEN];
        // Cannot fail: aws-lc computed the public half when it loaded the key.
        let key = self
            .0
            .compute_public_key()
            .expect("an X25519 key has a public half");
        public.copy_from_slice(key.as_ref());
        public
    }

    /// The exchange of this key with `public`.
    #[cfg(not(feature = "aws-lc"))]
    pub(crate) fn diffie_hellman(&self, public: &[u8; X25519_KEY_LEN]) -> SharedSecret {
        let shared = self
            .0
            .diffie_hellman(&x25519_dalek::PublicKey::from(*public));
        SharedSecret(Zeroizing::new(shared.to_bytes()))
    }

    /// The exchange of this key with `public`. aws-lc refuses a result of
    /// all zeros (RFC 7748 §6.1's check); it stays all zeros here, which
    /// [`SharedSecret::was_contributory`] reports as x25519-dalek would.
    #[cfg(feature = "aws-lc")]
    pub(crate) fn diffie_hellman(&self, public: &[u8; X25519_KEY_LEN]) -> SharedSecret {
        use aws_lc_rs::agreement::{UnparsedPublicKey, X25519, agree};
        let mut shared = Zeroizing::new([0u8; X25519_KEY_LEN]);
        let _ = agree(
            &self.0,
            UnparsedPublicKey::new(&X25519, public),
            (),
            |bytes| {
                if bytes.len() == X25519_KEY_LEN {
                    shared.copy_from_slice(bytes);
                }
                Ok(())
            },
        );
        SharedSecret(shared)
    }
}

/// The result of an exchange, wiped from memory when dropped.
pub(crate) struct SharedSecret(Zeroizing<[u8; X25519_KEY_LEN]>);

impl SharedSecret {
    /// A result made elsewhere (by another implementation, in tests).
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: [u8; X25519_KEY_LEN]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The 32 bytes.
    pub(crate) fn as_bytes(&self) -> &[u8; X25519_KEY_LEN] {
        &self.0
    }

    /// Whether the result is not all zeros: all zeros is what a low-order
    /// public key (RFC 7748 §6.1) gives, whatever the private key. Checked
    /// without a branch on the bytes.
    pub(crate) fn was_contributory(&self) -> bool {
        self.0.iter().fold(0u8, |acc, &b| acc | b) != 0
    }
}

#[cfg(test)]
mod tests {
    use rand_core::OsRng;

    use super::*;

    /// RFC 7748 §6.1's Diffie-Hellman example.
    #[test]
    fn the_rfc_7748_exchange_gives_its_keys_and_secret() {
        let hex32 = |s: &str| -> [u8; 32] { hex::decode(s).unwrap().try_into().unwrap() };
        let alice = SecretKey::from_bytes(hex32(
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        ));
        let bob = SecretKey::from_bytes(hex32(
            "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
        ));
        assert_eq!(
            alice.public_key(),
            hex32("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
        assert_eq!(
            bob.public_key(),
            hex32("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        );
        let shared = alice.diffie_hellman(&bob.public_key());
        assert_eq!(
            shared.as_bytes(),
            &hex32("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        );
        assert_eq!(
            bob.diffie_hellman(&alice.public_key()).as_bytes(),
            shared.as_bytes()
        );
        assert!(shared.was_contributory());
    }

    #[test]
    fn a_low_order_key_gives_a_result_that_is_not_contributory() {
        let key = SecretKey::random(&mut OsRng);
        // The point of order 1 (zero), and one of order 8 (RFC 7748 §6.1's
        // check exists for such points).
        let order_8 =
            hex::decode("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")
                .unwrap();
        for public in [[0u8; 32], order_8.try_into().unwrap()] {
            assert!(!key.diffie_hellman(&public).was_contributory());
        }
    }

    #[test]
    fn a_key_keeps_its_bytes_and_its_clone_is_the_same_key() {
        let key = SecretKey::random(&mut OsRng);
        let again = SecretKey::from_bytes(*key.to_bytes());
        assert_eq!(again.public_key(), key.public_key());
        assert_eq!(key.clone().to_bytes(), key.to_bytes());
        assert_eq!(format!("{key:?}"), "SecretKey(..)");
    }

    /// With aws-lc built in, its keys and exchanges are x25519-dalek's (so
    /// peers of either backend interoperate).
    #[cfg(feature = "aws-lc")]
    #[test]
    fn aws_lc_and_x25519_dalek_agree_on_every_key_and_exchange() {
        use x25519_dalek::{PublicKey, StaticSecret};
        for _ in 0..64 {
            let key = SecretKey::random(&mut OsRng);
            let dalek = StaticSecret::from(*key.to_bytes());
            assert_eq!(key.public_key(), PublicKey::from(&dalek).to_bytes());
            let peer = StaticSecret::random_from_rng(OsRng);
            let peer_public = PublicKey::from(&peer).to_bytes();
            assert_eq!(
                key.diffie_hellman(&peer_public).as_bytes(),
                dalek
                    .diffie_hellman(&PublicKey::from(peer_public))
                    .as_bytes()
            );
            assert_eq!(
                key.diffie_hellman(&peer_public).as_bytes(),
                peer.diffie_hellman(&PublicKey::from(key.public_key()))
                    .as_bytes()
            );
        }
    }
}
