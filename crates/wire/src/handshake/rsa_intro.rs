//! The RSA intro's sealing: the intro body, RSA-OAEP(SHA-256) encrypted to
//! the responder's RSA-2048 key, after the type byte.

use rand_core::CryptoRngCore;

use super::body::IntroBody;
use crate::crypto::rsa_keys::{RSA_LEN, RsaPrivate, RsaPublic};
use crate::error::{AcceptError, IntroError};
use crate::header::PacketType;

/// RSA ciphertext size: the modulus size in bytes.
pub(super) const RSA_CIPHERTEXT_LEN: usize = RSA_LEN;

/// Writes the intro datagram carrying `body`, encrypted to `responder`,
/// into `dst` (exactly [`super::INTRO_LEN`] bytes).
pub(super) fn seal(
    responder: &RsaPublic,
    body: &IntroBody,
    rng: &mut impl CryptoRngCore,
    dst: &mut [u8],
) -> Result<(), IntroError> {
    let (type_byte, ciphertext) = dst
        .split_first_mut()
        .ok_or(IntroError::Encryption(rsa::Error::Internal))?;
    let ciphertext: &mut [u8; RSA_CIPHERTEXT_LEN] = ciphertext
        .try_into()
        .map_err(|_| IntroError::Encryption(rsa::Error::Internal))?;
    responder
        .encrypt(&body.to_bytes()[..], rng, ciphertext)
        .map_err(IntroError::Encryption)?;
    *type_byte = PacketType::Intro as u8;
    Ok(())
}

/// Decrypts the body of an intro datagram of the right type and length
/// (`rng` blinds the decryption against timing attacks).
pub(super) fn open(
    identity: &RsaPrivate,
    datagram: &[u8],
    rng: &mut impl CryptoRngCore,
) -> Result<IntroBody, AcceptError> {
    let plaintext = identity
        .decrypt(&datagram[1..], rng)
        .ok_or(AcceptError::Decryption)?;
    IntroBody::from_bytes(&plaintext).ok_or(AcceptError::Malformed)
}
