//! The RSA intro's sealing: the intro body, RSA-OAEP(SHA-256) encrypted to
//! the responder's RSA-2048 key, after the type byte.

use rand_core::CryptoRngCore;
use rsa::Oaep;
use sha2::Sha256;
use zeroize::Zeroizing;

use super::body::IntroBody;
use crate::error::{AcceptError, IntroError};
use crate::header::PacketType;
use crate::identity::RSA_BITS;
use rsa::{RsaPrivateKey, RsaPublicKey};

/// RSA ciphertext size: the modulus size in bytes.
pub(super) const RSA_CIPHERTEXT_LEN: usize = RSA_BITS / 8;

/// Writes the intro datagram carrying `body`, encrypted to `responder`,
/// into `dst` (exactly [`super::INTRO_LEN`] bytes).
pub(super) fn seal(
    responder: &RsaPublicKey,
    body: &IntroBody,
    rng: &mut impl CryptoRngCore,
    dst: &mut [u8],
) -> Result<(), IntroError> {
    let ciphertext = responder
        .encrypt(rng, Oaep::new::<Sha256>(), &body.to_bytes()[..])
        .map_err(IntroError::Encryption)?;
    // OAEP output is always exactly the modulus size, which the key's size
    // check fixed.
    let ciphertext: &[u8; RSA_CIPHERTEXT_LEN] = ciphertext
        .as_slice()
        .try_into()
        .map_err(|_| IntroError::Encryption(rsa::Error::Internal))?;
    dst[0] = PacketType::Intro as u8;
    dst[1..].copy_from_slice(ciphertext);
    Ok(())
}

/// Decrypts the body of an intro datagram of the right type and length
/// (`rng` blinds the decryption against timing attacks).
pub(super) fn open(
    identity: &RsaPrivateKey,
    datagram: &[u8],
    rng: &mut impl CryptoRngCore,
) -> Result<IntroBody, AcceptError> {
    let plaintext = Zeroizing::new(
        identity
            .decrypt_blinded(rng, Oaep::new::<Sha256>(), &datagram[1..])
            .map_err(|_| AcceptError::Decryption)?,
    );
    IntroBody::from_bytes(&plaintext).ok_or(AcceptError::Malformed)
}
