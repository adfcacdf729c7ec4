//! Long-term RSA-2048 identities: the responder's key pair and the public
//! half an initiator must know beforehand.
//!
//! What the `rsa` crate leaves in freed memory: [`rsa::RsaPrivateKey`] wipes
//! its own exponent and primes when dropped, and Tern wipes the decrypted
//! intro plaintext. The big-integer temporaries of a decryption (the
//! blinded ciphertext, the CRT halves, the padded message before OAEP
//! decoding) and of an encryption (the padded message holding the
//! initiator's secret) live in `num-bigint-dig` vectors that the crate frees
//! without wiping, out of Tern's reach. They hold one intro's secret, not
//! the RSA key, and that secret alone does not give the session keys (the
//! X25519 exchange does too).

use core::fmt;

use rand_core::CryptoRngCore;
use rsa::pkcs8::der::zeroize::Zeroizing;
use rsa::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rsa::traits::PublicKeyParts;
use rsa::{RsaPrivateKey, RsaPublicKey};

use crate::error::KeyError;

/// RSA modulus size of identity keys, in bits.
pub const RSA_BITS: usize = 2048;

/// A responder's long-term RSA-2048 key pair.
#[derive(Clone)]
pub struct IdentityKey(pub(crate) RsaPrivateKey);

impl fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdentityKey(..)")
    }
}

fn check_size(public: &RsaPublicKey) -> Result<(), KeyError> {
    match public.size() * 8 {
        RSA_BITS => Ok(()),
        bits => Err(KeyError::WrongSize(bits)),
    }
}

impl IdentityKey {
    /// Generates a new key pair from the operating system's random source
    /// (about a quarter of a second).
    pub fn random() -> Result<Self, KeyError> {
        Self::generate(&mut rand_core::OsRng)
    }

    /// Generates a new key pair from `rng` (about a quarter of a second): a
    /// seeded generator makes the same key every time, for reproducible
    /// tests and simulations.
    pub fn generate(rng: &mut impl CryptoRngCore) -> Result<Self, KeyError> {
        RsaPrivateKey::new(rng, RSA_BITS)
            .map(Self)
            .map_err(KeyError::Generation)
    }

    /// Loads a PKCS#8 DER private key.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_der(der).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(key))
    }

    /// Loads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_pem(pem).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(key))
    }

    /// The private key as PKCS#8 DER (wiped from memory when dropped).
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let doc = self.0.to_pkcs8_der().map_err(KeyError::Pkcs8)?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// The private key as PKCS#8 PEM (wiped from memory when dropped).
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        self.0.to_pkcs8_pem(LineEnding::LF).map_err(KeyError::Pkcs8)
    }

    /// The public half, to give to initiators.
    #[must_use]
    pub fn public(&self) -> PublicIdentity {
        PublicIdentity(self.0.to_public_key())
    }
}

/// A responder's RSA-2048 public key, which an initiator must know beforehand.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicIdentity(pub(crate) RsaPublicKey);

impl fmt::Debug for PublicIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PublicIdentity(..)")
    }
}

impl PublicIdentity {
    /// Loads a SubjectPublicKeyInfo DER public key.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, KeyError> {
        let key = RsaPublicKey::from_public_key_der(der).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(key))
    }

    /// Loads a SubjectPublicKeyInfo PEM public key (`-----BEGIN PUBLIC KEY-----`).
    pub fn from_spki_pem(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPublicKey::from_public_key_pem(pem).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(key))
    }

    /// The public key as SubjectPublicKeyInfo DER.
    pub fn to_spki_der(&self) -> Result<Vec<u8>, KeyError> {
        self.0
            .to_public_key_der()
            .map(|doc| doc.into_vec())
            .map_err(KeyError::Spki)
    }

    /// The public key as SubjectPublicKeyInfo PEM.
    pub fn to_spki_pem(&self) -> Result<String, KeyError> {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .map_err(KeyError::Spki)
    }
}

#[cfg(test)]
mod tests {
    use rand_core::OsRng;
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey};

    use super::*;
    use crate::test_support::identity;

    #[test]
    fn identity_keys_survive_pkcs8_and_spki_in_der_and_pem() {
        let key = identity();
        let der = key.to_pkcs8_der().unwrap();
        let pem = key.to_pkcs8_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(
            IdentityKey::from_pkcs8_der(&der).unwrap().public(),
            key.public()
        );
        assert_eq!(
            IdentityKey::from_pkcs8_pem(&pem).unwrap().public(),
            key.public()
        );

        let public = key.public();
        let spki_der = public.to_spki_der().unwrap();
        let spki_pem = public.to_spki_pem().unwrap();
        assert!(spki_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(PublicIdentity::from_spki_der(&spki_der).unwrap(), public);
        assert_eq!(PublicIdentity::from_spki_pem(&spki_pem).unwrap(), public);
    }

    #[test]
    fn garbage_and_wrong_size_keys_are_refused() {
        assert!(matches!(
            IdentityKey::from_pkcs8_der(b"not a key"),
            Err(KeyError::Pkcs8(_))
        ));
        assert!(matches!(
            IdentityKey::from_pkcs8_pem("-----BEGIN"),
            Err(KeyError::Pkcs8(_))
        ));
        assert!(matches!(
            PublicIdentity::from_spki_der(&[0x30, 0x00]),
            Err(KeyError::Spki(_))
        ));
        let small = RsaPrivateKey::new(&mut OsRng, 1024).unwrap();
        let der = small.to_pkcs8_der().unwrap();
        assert!(matches!(
            IdentityKey::from_pkcs8_der(der.as_bytes()),
            Err(KeyError::WrongSize(1024))
        ));
        let spki = small.to_public_key().to_public_key_der().unwrap();
        assert!(matches!(
            PublicIdentity::from_spki_der(spki.as_bytes()),
            Err(KeyError::WrongSize(1024))
        ));
    }
}
