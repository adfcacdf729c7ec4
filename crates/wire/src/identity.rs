//! Long-term identities of two kinds: RSA-2048 and X25519. A responder's
//! key pair ([`IdentityKey`]) and the public half an initiator must know
//! beforehand ([`PublicIdentity`]); the kind of the public half decides
//! which intro reaches it (wire format §6).
//!
//! Both kinds travel as PKCS#8 (private) and SubjectPublicKeyInfo (public)
//! documents, in DER or PEM. An X25519 key is the RFC 8410 form: the
//! algorithm identifier id-X25519 (1.3.101.110) and the 32 key bytes, the
//! form `openssl genpkey -algorithm X25519` writes.
//!
//! What the `rsa` crate leaves in freed memory: [`rsa::RsaPrivateKey`] wipes
//! its own exponent and primes when dropped, and Tern wipes the decrypted
//! intro plaintext. The big-integer temporaries of a decryption (the
//! blinded ciphertext, the CRT halves, the padded message before OAEP
//! decoding) and of an encryption (the padded message holding the
//! initiator's secret) live in `num-bigint-dig` vectors that the crate frees
//! without wiping, out of Tern's reach. They hold one intro's secret, not
//! the RSA key, and that secret alone does not give the session keys (the
//! X25519 exchange does too). With the cargo feature `aws-lc`, aws-lc does
//! the RSA-OAEP operations and the X25519 exchanges, and it cleanses every
//! allocation it frees. An X25519 private key is wiped when dropped.

use core::fmt;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use rsa::pkcs8::der::pem;
use rsa::pkcs8::der::zeroize::Zeroizing;
use rsa::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rsa::traits::PublicKeyParts;
use rsa::{RsaPrivateKey, RsaPublicKey};

use crate::crypto::rsa_keys::{RsaPrivate, RsaPublic};
use crate::crypto::x25519::SecretKey;
use crate::error::KeyError;
use crate::header::X25519_KEY_LEN;

/// RSA modulus size of identity keys, in bits.
pub const RSA_BITS: usize = 2048;

/// RFC 8410 §7: an X25519 private key as PKCS#8 (version 0, id-X25519, an
/// OCTET STRING holding the 32-byte CurvePrivateKey OCTET STRING); the key
/// bytes follow.
const X25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
];
/// RFC 8410 §4: an X25519 public key as SubjectPublicKeyInfo (id-X25519, a
/// BIT STRING of the 32 key bytes); the key bytes follow.
const X25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00,
];
/// PEM label of a PKCS#8 private key (RFC 7468 §10).
const PRIVATE_LABEL: &str = "PRIVATE KEY";
/// PEM label of a SubjectPublicKeyInfo (RFC 7468 §13).
const PUBLIC_LABEL: &str = "PUBLIC KEY";

/// The kind of an identity, which decides the intro that reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentityKind {
    /// RSA-2048: the intro is RSA-OAEP encrypted to it (about a millisecond
    /// of the responder's CPU per intro).
    Rsa,
    /// X25519: the intro is sealed with Diffie-Hellman exchanges only, in
    /// the manner of Noise IK (tens of microseconds per intro).
    X25519,
}

impl fmt::Display for IdentityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rsa => "rsa",
            Self::X25519 => "x25519",
        })
    }
}

/// A long-term key pair of either kind.
#[derive(Clone)]
pub struct IdentityKey(pub(crate) KeyPair);

/// The private key of an [`IdentityKey`].
#[derive(Clone)]
pub(crate) enum KeyPair {
    /// Boxed: an RSA key is ten times an X25519 key's size.
    Rsa(Box<RsaPrivate>),
    X25519(SecretKey),
}

impl fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdentityKey({}, ..)", self.kind())
    }
}

fn check_size(public: &RsaPublicKey) -> Result<(), KeyError> {
    match public.size() * 8 {
        RSA_BITS => Ok(()),
        bits => Err(KeyError::WrongSize(bits)),
    }
}

/// The X25519 key of an RFC 8410 PKCS#8 document, if it is one.
fn x25519_from_pkcs8(der: &[u8]) -> Option<SecretKey> {
    let key = der.strip_prefix(&X25519_PKCS8_PREFIX)?;
    let key: [u8; X25519_KEY_LEN] = key.try_into().ok()?;
    Some(SecretKey::from_bytes(key))
}

/// The X25519 key of an RFC 8410 SubjectPublicKeyInfo document, if it is one.
fn x25519_from_spki(der: &[u8]) -> Option<[u8; X25519_KEY_LEN]> {
    der.strip_prefix(&X25519_SPKI_PREFIX)?.try_into().ok()
}

/// The DER inside a PEM document labelled `label`, if it is one.
fn pem_der(text: &str, label: &str) -> Option<Zeroizing<Vec<u8>>> {
    let (found, der) = pem::decode_vec(text.as_bytes()).ok()?;
    (found == label).then_some(Zeroizing::new(der))
}

impl IdentityKey {
    /// Generates a new RSA-2048 key pair from the operating system's random
    /// source (about a quarter of a second).
    pub fn random() -> Result<Self, KeyError> {
        Self::generate(&mut rand_core::OsRng)
    }

    /// Generates a new RSA-2048 key pair from `rng` (about a quarter of a
    /// second): a seeded generator makes the same key every time, for
    /// reproducible tests and simulations.
    pub fn generate(rng: &mut impl CryptoRngCore) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::new(rng, RSA_BITS).map_err(KeyError::Generation)?;
        Ok(Self(KeyPair::Rsa(Box::new(RsaPrivate::new(key)?))))
    }

    /// Generates a new X25519 key pair from the operating system's random
    /// source (microseconds).
    #[must_use]
    pub fn random_x25519() -> Self {
        Self::generate_x25519(&mut rand_core::OsRng)
    }

    /// Generates a new X25519 key pair from `rng` (microseconds).
    pub fn generate_x25519(rng: &mut impl CryptoRngCore) -> Self {
        Self(KeyPair::X25519(SecretKey::random(rng)))
    }

    /// Generates a new key pair of `kind` from `rng`.
    pub fn generate_kind(
        kind: IdentityKind,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Self, KeyError> {
        match kind {
            IdentityKind::Rsa => Self::generate(rng),
            IdentityKind::X25519 => Ok(Self::generate_x25519(rng)),
        }
    }

    /// The kind of this key.
    #[must_use]
    pub const fn kind(&self) -> IdentityKind {
        match self.0 {
            KeyPair::Rsa(_) => IdentityKind::Rsa,
            KeyPair::X25519(_) => IdentityKind::X25519,
        }
    }

    /// Loads a PKCS#8 DER private key of either kind.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, KeyError> {
        if let Some(secret) = x25519_from_pkcs8(der) {
            return Ok(Self(KeyPair::X25519(secret)));
        }
        let key = RsaPrivateKey::from_pkcs8_der(der).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(KeyPair::Rsa(Box::new(RsaPrivate::new(key)?))))
    }

    /// Loads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`) of
    /// either kind.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, KeyError> {
        if let Some(secret) = pem_der(pem, PRIVATE_LABEL).and_then(|der| x25519_from_pkcs8(&der)) {
            return Ok(Self(KeyPair::X25519(secret)));
        }
        let key = RsaPrivateKey::from_pkcs8_pem(pem).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(KeyPair::Rsa(Box::new(RsaPrivate::new(key)?))))
    }

    /// The private key as PKCS#8 DER (wiped from memory when dropped).
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        match &self.0 {
            KeyPair::Rsa(key) => {
                let doc = key.key().to_pkcs8_der().map_err(KeyError::Pkcs8)?;
                Ok(Zeroizing::new(doc.as_bytes().to_vec()))
            }
            KeyPair::X25519(secret) => {
                let mut der = Zeroizing::new(X25519_PKCS8_PREFIX.to_vec());
                der.extend_from_slice(&secret.to_bytes()[..]);
                Ok(der)
            }
        }
    }

    /// The private key as PKCS#8 PEM (wiped from memory when dropped).
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        match &self.0 {
            KeyPair::Rsa(key) => key
                .key()
                .to_pkcs8_pem(LineEnding::LF)
                .map_err(KeyError::Pkcs8),
            KeyPair::X25519(_) => {
                let der = self.to_pkcs8_der()?;
                pem::encode_string(PRIVATE_LABEL, LineEnding::LF, &der)
                    .map(Zeroizing::new)
                    .map_err(|e| KeyError::Pkcs8(rsa::pkcs8::Error::Asn1(e.into())))
            }
        }
    }

    /// The public half, to give to initiators.
    #[must_use]
    pub fn public(&self) -> PublicIdentity {
        match &self.0 {
            KeyPair::Rsa(key) => {
                PublicIdentity(PublicKind::Rsa(RsaPublic::new(key.key().to_public_key())))
            }
            KeyPair::X25519(secret) => PublicIdentity(PublicKind::X25519(secret.public_key())),
        }
    }

    /// The RSA private key, if this is one.
    pub(crate) const fn rsa(&self) -> Option<&RsaPrivate> {
        match &self.0 {
            KeyPair::Rsa(key) => Some(key),
            KeyPair::X25519(_) => None,
        }
    }

    /// The X25519 private key, if this is one.
    pub(crate) const fn x25519(&self) -> Option<&SecretKey> {
        match &self.0 {
            KeyPair::X25519(secret) => Some(secret),
            KeyPair::Rsa(_) => None,
        }
    }
}

/// A long-term public key of either kind, which an initiator must know
/// beforehand to reach its holder.
///
/// Cloning it is cheap: an RSA key's 2 048-bit modulus is shared by the
/// clones (every connection to a responder keeps its key).
///
/// An application that keeps the identities it knows in a map keys it by
/// [`fingerprint`](Self::fingerprint) (a `Copy` hash of the key, the same
/// for either encoding of it).
#[derive(Clone, PartialEq, Eq)]
pub struct PublicIdentity(pub(crate) PublicKind);

/// The key of a [`PublicIdentity`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum PublicKind {
    Rsa(Arc<RsaPublic>),
    X25519([u8; X25519_KEY_LEN]),
}

impl fmt::Debug for PublicIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicIdentity({}, ..)", self.kind())
    }
}

impl PublicIdentity {
    /// An X25519 identity from its 32 key bytes.
    #[must_use]
    pub const fn from_x25519_bytes(key: [u8; X25519_KEY_LEN]) -> Self {
        Self(PublicKind::X25519(key))
    }

    /// The 32 key bytes of an X25519 identity; `None` for RSA.
    #[must_use]
    pub const fn x25519_bytes(&self) -> Option<&[u8; X25519_KEY_LEN]> {
        match &self.0 {
            PublicKind::X25519(key) => Some(key),
            PublicKind::Rsa(_) => None,
        }
    }

    /// The kind of this key, which decides the intro that reaches it.
    #[must_use]
    pub const fn kind(&self) -> IdentityKind {
        match self.0 {
            PublicKind::Rsa(_) => IdentityKind::Rsa,
            PublicKind::X25519(_) => IdentityKind::X25519,
        }
    }

    /// Loads a SubjectPublicKeyInfo DER public key of either kind.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, KeyError> {
        if let Some(key) = x25519_from_spki(der) {
            return Ok(Self::from_x25519_bytes(key));
        }
        let key = RsaPublicKey::from_public_key_der(der).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(PublicKind::Rsa(RsaPublic::new(key))))
    }

    /// Loads a SubjectPublicKeyInfo PEM public key (`-----BEGIN PUBLIC
    /// KEY-----`) of either kind.
    pub fn from_spki_pem(pem: &str) -> Result<Self, KeyError> {
        if let Some(key) = pem_der(pem, PUBLIC_LABEL).and_then(|der| x25519_from_spki(&der)) {
            return Ok(Self::from_x25519_bytes(key));
        }
        let key = RsaPublicKey::from_public_key_pem(pem).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(PublicKind::Rsa(RsaPublic::new(key))))
    }

    /// The public key as SubjectPublicKeyInfo DER.
    pub fn to_spki_der(&self) -> Result<Vec<u8>, KeyError> {
        match &self.0 {
            PublicKind::Rsa(key) => key
                .key()
                .to_public_key_der()
                .map(|doc| doc.into_vec())
                .map_err(KeyError::Spki),
            PublicKind::X25519(key) => {
                let mut der = X25519_SPKI_PREFIX.to_vec();
                der.extend_from_slice(key);
                Ok(der)
            }
        }
    }

    /// The public key as SubjectPublicKeyInfo PEM.
    pub fn to_spki_pem(&self) -> Result<String, KeyError> {
        match &self.0 {
            PublicKind::Rsa(key) => key
                .key()
                .to_public_key_pem(LineEnding::LF)
                .map_err(KeyError::Spki),
            PublicKind::X25519(_) => {
                let der = self.to_spki_der()?;
                pem::encode_string(PUBLIC_LABEL, LineEnding::LF, &der)
                    .map_err(|e| KeyError::Spki(rsa::pkcs8::spki::Error::Asn1(e.into())))
            }
        }
    }

    /// What a resumption ticket is bound to: the SubjectPublicKeyInfo DER
    /// (empty in the case, never seen, of an RSA key that does not encode).
    pub(crate) fn binding(&self) -> Vec<u8> {
        self.to_spki_der().unwrap_or_default()
    }

    /// The RSA public key, if this is one.
    pub(crate) fn rsa(&self) -> Option<&RsaPublic> {
        match &self.0 {
            PublicKind::Rsa(key) => Some(key),
            PublicKind::X25519(_) => None,
        }
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
    fn identities_of_either_kind_key_a_set_by_their_fingerprints() {
        use std::collections::HashSet;
        let rsa = identity().public();
        let (x, y) = (IdentityKey::random_x25519(), IdentityKey::random_x25519());
        assert_eq!(x.kind(), IdentityKind::X25519);
        assert_ne!(x.public(), y.public(), "each draw is a new key");
        let known: HashSet<_> = [rsa.fingerprint(), x.public().fingerprint()].into();
        // The same keys, decoded afresh, are found; another key is not.
        let rsa_again = PublicIdentity::from_spki_der(&rsa.to_spki_der().unwrap()).unwrap();
        assert!(known.contains(&rsa_again.fingerprint()));
        let x_again = PublicIdentity::from_x25519_bytes(*x.public().x25519_bytes().unwrap());
        assert!(known.contains(&x_again.fingerprint()));
        assert!(!known.contains(&y.public().fingerprint()));
    }

    #[test]
    fn x25519_keys_survive_rfc_8410_pkcs8_and_spki_in_der_and_pem() {
        let key = IdentityKey::generate_x25519(&mut OsRng);
        assert_eq!(key.kind(), IdentityKind::X25519);
        let der = key.to_pkcs8_der().unwrap();
        assert_eq!(der.len(), 48);
        let pem = key.to_pkcs8_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        for loaded in [
            IdentityKey::from_pkcs8_der(&der).unwrap(),
            IdentityKey::from_pkcs8_pem(&pem).unwrap(),
        ] {
            assert_eq!(loaded.public(), key.public());
        }
        let public = key.public();
        assert_eq!(public.kind(), IdentityKind::X25519);
        let spki_der = public.to_spki_der().unwrap();
        assert_eq!(spki_der.len(), 44);
        let spki_pem = public.to_spki_pem().unwrap();
        assert!(spki_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(PublicIdentity::from_spki_der(&spki_der).unwrap(), public);
        assert_eq!(PublicIdentity::from_spki_pem(&spki_pem).unwrap(), public);
        assert_ne!(public, identity().public());
        // A truncated X25519 document is neither kind.
        assert!(IdentityKey::from_pkcs8_der(&der[..47]).is_err());
        assert!(PublicIdentity::from_spki_der(&spki_der[..43]).is_err());
    }

    #[test]
    fn an_x25519_key_openssl_wrote_loads() {
        // RFC 8410 §10.3's example private key; the public key is what
        // `openssl pkey -pubout` derives from it.
        let private = "-----BEGIN PRIVATE KEY-----\n\
            MC4CAQAwBQYDK2VuBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n\
            -----END PRIVATE KEY-----\n";
        let key = IdentityKey::from_pkcs8_pem(private).unwrap();
        assert_eq!(key.kind(), IdentityKind::X25519);
        let public = key.public();
        assert_eq!(
            hex::encode(public.x25519_bytes().unwrap()),
            "226ad8f8f62b7b2637247e6b21ffb5723d6330c4d5dd5a8d11e7e7de65c1c501"
        );
        let openssl = "-----BEGIN PUBLIC KEY-----\n\
            MCowBQYDK2VuAyEAImrY+PYreyY3JH5rIf+1cj1jMMTV3VqNEefn3mXBxQE=\n\
            -----END PUBLIC KEY-----\n";
        assert_eq!(PublicIdentity::from_spki_pem(openssl).unwrap(), public);
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
