//! Address-validation tokens and the Retry packet (wire format §6.4).
//!
//! An intro costs its responder an RSA decryption, and its source address
//! is whatever the sender wrote. When intros come faster than a responder
//! wants to decrypt, it answers them with a Retry instead: a small packet
//! carrying a token that only the holder of the source address can receive.
//! The initiator sends its intro again with the token appended, and the
//! responder, checking the token with one AES-GCM operation, knows the
//! address is real before it spends anything asymmetric on it.
//!
//! A token is stateless for the responder: an AES-128-GCM tag, under a
//! secret key of the responder's, over the issue time, the intro id and the
//! address, with the time and the nonce carried in clear. Which key sealed
//! it, and whether it is too old, is the caller's business (tern-proto
//! rotates its key and checks the age): this module only seals and opens.

use std::net::{IpAddr, SocketAddr};

use aes_gcm::Aes128Gcm;
use aes_gcm::aead::{AeadInOut, KeyInit};
use rand_core::CryptoRngCore;

use crate::aead::{IV_LEN, KEY_LEN, TAG_LEN};
use crate::handshake::INTRO_LEN;
use crate::header::PacketType;
use crate::replay::{INTRO_ID_LEN, IntroId};

/// Length of a token: issue time (4), nonce (12), tag (16).
pub const TOKEN_LEN: usize = 4 + IV_LEN + TAG_LEN;
/// Length of a Retry: type byte, the intro id it answers, the token.
pub const RETRY_LEN: usize = 1 + INTRO_ID_LEN + TOKEN_LEN;
/// Length of an intro that carries a token: the intro, then the token.
pub const INTRO_WITH_TOKEN_LEN: usize = INTRO_LEN + TOKEN_LEN;

// A Retry goes to an address nobody validated: it must not amplify.
const _: () = assert!(RETRY_LEN < INTRO_LEN);

/// The label that starts a token's associated data, so a tag made for
/// anything else under the same key never passes for a token.
const LABEL: &[u8] = b"tern v2 token";
/// Associated data: label, issue time, intro id, IPv6 address, port.
const AAD_LEN: usize = LABEL.len() + 4 + INTRO_ID_LEN + 16 + 2;

/// An address-validation token, as carried on the wire.
pub type Token = [u8; TOKEN_LEN];

/// Why a token or a Retry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The datagram is not a Retry, or not of a Retry's length.
    #[error("not a Retry of {RETRY_LEN} bytes")]
    Malformed,
    /// The tag does not verify: forged, made for another address or intro,
    /// or sealed under a key the responder no longer holds.
    #[error("token does not authenticate")]
    Forged,
    /// The token is older than the responder accepts, or from its future.
    #[error("token expired")]
    Expired,
}

/// The secret a responder seals its tokens with.
pub struct TokenKey {
    cipher: Aes128Gcm,
}

impl core::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A fresh random key.
    pub fn random(rng: &mut impl CryptoRngCore) -> Self {
        let mut key = [0u8; KEY_LEN];
        rng.fill_bytes(&mut key);
        Self {
            cipher: Aes128Gcm::new(&key.into()),
        }
    }

    /// A token for `intro` from `address`, issued at `issued` (seconds on
    /// the responder's own clock); the nonce is drawn from `rng`.
    pub fn seal(
        &self,
        issued: u32,
        intro: &IntroId,
        address: SocketAddr,
        rng: &mut impl CryptoRngCore,
    ) -> Token {
        let mut token = [0u8; TOKEN_LEN];
        token[..4].copy_from_slice(&issued.to_be_bytes());
        rng.fill_bytes(&mut token[4..4 + IV_LEN]);
        let nonce: [u8; IV_LEN] = token_nonce(&token);
        let aad = associated_data(issued, intro, address);
        // Nothing is encrypted: the tag alone is the token's proof.
        let tag = self
            .cipher
            .encrypt_inout_detached(&nonce.into(), &aad, (&mut [][..]).into());
        // Sealing an empty message cannot exceed any limit of the cipher.
        if let Ok(tag) = tag {
            token[4 + IV_LEN..].copy_from_slice(&tag);
        }
        token
    }

    /// Checks that `token` was sealed by this key for `intro` from
    /// `address`. Its age is for the caller to check ([`token_issued`]).
    pub fn open(
        &self,
        token: &Token,
        intro: &IntroId,
        address: SocketAddr,
    ) -> Result<(), TokenError> {
        let nonce = token_nonce(token);
        let aad = associated_data(token_issued(token), intro, address);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&token[4 + IV_LEN..]);
        self.cipher
            .decrypt_inout_detached(&nonce.into(), &aad, (&mut [][..]).into(), &tag.into())
            .map_err(|_| TokenError::Forged)
    }
}

/// When a token says it was issued (unauthenticated until it opens).
#[must_use]
pub fn token_issued(token: &Token) -> u32 {
    u32::from_be_bytes([token[0], token[1], token[2], token[3]])
}

fn token_nonce(token: &Token) -> [u8; IV_LEN] {
    let mut nonce = [0u8; IV_LEN];
    nonce.copy_from_slice(&token[4..4 + IV_LEN]);
    nonce
}

fn associated_data(issued: u32, intro: &IntroId, address: SocketAddr) -> [u8; AAD_LEN] {
    let ip = match address.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let mut aad = [0u8; AAD_LEN];
    let mut at = 0;
    for part in [
        LABEL,
        &issued.to_be_bytes(),
        intro,
        &ip.octets(),
        &address.port().to_be_bytes(),
    ] {
        aad[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    aad
}

/// A Retry answering the intro `intro` with `token`.
#[must_use]
pub fn write_retry(intro: &IntroId, token: &Token) -> [u8; RETRY_LEN] {
    let mut retry = [0u8; RETRY_LEN];
    retry[0] = PacketType::Retry as u8;
    retry[1..1 + INTRO_ID_LEN].copy_from_slice(intro);
    retry[1 + INTRO_ID_LEN..].copy_from_slice(token);
    retry
}

/// The intro id and the token of a Retry; anything but a Retry of exactly
/// [`RETRY_LEN`] bytes is refused.
pub fn parse_retry(datagram: &[u8]) -> Result<(IntroId, Token), TokenError> {
    let retry: &[u8; RETRY_LEN] = datagram.try_into().map_err(|_| TokenError::Malformed)?;
    if retry[0] != PacketType::Retry as u8 {
        return Err(TokenError::Malformed);
    }
    let mut intro = [0u8; INTRO_ID_LEN];
    intro.copy_from_slice(&retry[1..1 + INTRO_ID_LEN]);
    let mut token = [0u8; TOKEN_LEN];
    token.copy_from_slice(&retry[1 + INTRO_ID_LEN..]);
    Ok((intro, token))
}

/// An intro datagram split into the intro proper and the token it carries,
/// if any; `None` for any length but [`INTRO_LEN`] and
/// [`INTRO_WITH_TOKEN_LEN`].
#[must_use]
pub fn split_intro(datagram: &[u8]) -> Option<(&[u8], Option<Token>)> {
    match datagram.len() {
        INTRO_LEN => Some((datagram, None)),
        INTRO_WITH_TOKEN_LEN => {
            let (intro, token) = datagram.split_at(INTRO_LEN);
            Some((intro, token.try_into().ok()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand_core::OsRng;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn a_token_opens_for_its_intro_and_address_only() {
        let mut rng = OsRng;
        let key = TokenKey::random(&mut rng);
        let intro = [7u8; INTRO_ID_LEN];
        let from = addr("192.0.2.1:4000");
        let token = key.seal(42, &intro, from, &mut rng);
        assert_eq!(token_issued(&token), 42);
        assert_eq!(key.open(&token, &intro, from), Ok(()));
        let refused = [
            key.open(&token, &intro, addr("192.0.2.2:4000")),
            key.open(&token, &intro, addr("192.0.2.1:4001")),
            key.open(&token, &intro, addr("[::ffff:192.0.2.1]:4001")),
            key.open(&token, &[8u8; INTRO_ID_LEN], from),
            TokenKey::random(&mut rng).open(&token, &intro, from),
        ];
        assert!(refused.iter().all(|r| *r == Err(TokenError::Forged)));
        // An IPv4 address and its mapped IPv6 form are one address.
        assert_eq!(
            key.open(&token, &intro, addr("[::ffff:192.0.2.1]:4000")),
            Ok(())
        );
    }

    #[test]
    fn a_retry_round_trips_and_anything_else_is_refused() {
        let mut rng = OsRng;
        let key = TokenKey::random(&mut rng);
        let intro = [3u8; INTRO_ID_LEN];
        let token = key.seal(1, &intro, addr("[2001:db8::1]:9"), &mut rng);
        let retry = write_retry(&intro, &token);
        assert_eq!(retry[0], 0x40);
        assert_eq!(parse_retry(&retry), Ok((intro, token)));
        for len in 0..RETRY_LEN {
            assert_eq!(parse_retry(&retry[..len]), Err(TokenError::Malformed));
        }
        let mut wrong = retry;
        wrong[0] = 0x10;
        assert_eq!(parse_retry(&wrong), Err(TokenError::Malformed));
        let mut long = retry.to_vec();
        long.push(0);
        assert_eq!(parse_retry(&long), Err(TokenError::Malformed));
    }

    #[test]
    fn an_intro_is_split_only_at_its_two_lengths() {
        let datagram = [0x10u8; INTRO_WITH_TOKEN_LEN + 1];
        assert_eq!(
            split_intro(&datagram[..INTRO_LEN]),
            Some((&datagram[..INTRO_LEN], None))
        );
        let (intro, token) = split_intro(&datagram[..INTRO_WITH_TOKEN_LEN]).expect("splits");
        assert_eq!(intro.len(), INTRO_LEN);
        assert_eq!(token, Some([0x10; TOKEN_LEN]));
        for len in [0, 1, INTRO_LEN - 1, INTRO_LEN + 1, INTRO_WITH_TOKEN_LEN - 1] {
            assert_eq!(split_intro(&datagram[..len]), None, "{len}");
        }
        assert_eq!(split_intro(&datagram), None);
    }

    proptest! {
        /// No change to any bit of a token, the issue time included, gets
        /// past the check.
        #[test]
        fn a_token_with_any_bit_flipped_is_refused(
            issued in any::<u32>(),
            bit in 0..TOKEN_LEN * 8,
            seed in any::<u8>(),
        ) {
            let mut rng = OsRng;
            let key = TokenKey::random(&mut rng);
            let intro = [seed; INTRO_ID_LEN];
            let from = addr("198.51.100.9:777");
            let mut token = key.seal(issued, &intro, from, &mut rng);
            prop_assert_eq!(key.open(&token, &intro, from), Ok(()));
            token[bit / 8] ^= 1 << (bit % 8);
            prop_assert_eq!(key.open(&token, &intro, from), Err(TokenError::Forged));
        }

        /// Parsing never panics and accepts exactly the Retry length.
        #[test]
        fn parsing_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let parsed = parse_retry(&bytes);
            prop_assert_eq!(parsed.is_ok(), bytes.len() == RETRY_LEN && bytes[0] == 0x40);
        }
    }
}
