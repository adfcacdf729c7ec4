//! Ephemeral X25519 keys, and a small stock of them drawn ahead of the
//! handshakes that use them.
//!
//! A fresh key pair costs a fixed-base scalar multiplication (about
//! 12 µs here with x25519-dalek, 4 µs with aws-lc), on the critical path of both sides: the initiator draws
//! one before its intro can leave, the responder one before its reply can.
//! An endpoint that keeps a few drawn in a quiet moment takes that off
//! the connect's path. Each key still serves exactly one handshake: a key
//! is moved out of the stock when it is used and erased when that
//! handshake ends, so forward secrecy is that of a key drawn on the spot;
//! a key waiting in the stock has never been sent.

use core::fmt;

use rand_core::CryptoRngCore;

use crate::crypto::x25519::SecretKey;
use crate::header::X25519_KEY_LEN;

/// A fresh X25519 key pair for one handshake; erased when dropped.
pub struct EphemeralKey {
    secret: SecretKey,
    public: [u8; X25519_KEY_LEN],
}

impl fmt::Debug for EphemeralKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EphemeralKey").field(&self.public).finish()
    }
}

impl EphemeralKey {
    /// A key pair drawn from `rng`.
    pub fn random(rng: &mut impl CryptoRngCore) -> Self {
        Self::from_secret(SecretKey::random(rng))
    }

    /// The key pair of `secret`.
    pub(crate) fn from_secret(secret: SecretKey) -> Self {
        let public = secret.public_key();
        Self { secret, public }
    }

    /// The private half.
    pub(crate) const fn secret(&self) -> &SecretKey {
        &self.secret
    }

    /// The private half, by value (the handshake keeps it until the reply).
    pub(crate) fn into_secret(self) -> SecretKey {
        self.secret
    }

    /// The public half, as sent.
    #[must_use]
    pub const fn public(&self) -> &[u8; X25519_KEY_LEN] {
        &self.public
    }
}

/// Up to `depth` ephemeral keys drawn ahead; [`EphemeralKeys::take`] hands
/// one out, or draws one on the spot when none is left.
#[derive(Debug)]
pub struct EphemeralKeys {
    keys: Vec<EphemeralKey>,
    depth: usize,
}

impl EphemeralKeys {
    /// An empty stock that [`EphemeralKeys::refill`] fills to `depth` keys
    /// (0: every key is drawn when it is needed).
    #[must_use]
    pub fn new(depth: usize) -> Self {
        Self {
            keys: Vec::with_capacity(depth),
            depth,
        }
    }

    /// A key for one handshake: one drawn ahead if any is left, else one
    /// drawn now from `rng`.
    pub fn take(&mut self, rng: &mut impl CryptoRngCore) -> EphemeralKey {
        self.keys.pop().unwrap_or_else(|| EphemeralKey::random(rng))
    }

    /// Draws keys from `rng` until the stock holds `depth`; returns how
    /// many it drew.
    pub fn refill(&mut self, rng: &mut impl CryptoRngCore) -> usize {
        let missing = self.depth.saturating_sub(self.keys.len());
        self.keys
            .extend(core::iter::repeat_with(|| EphemeralKey::random(rng)).take(missing));
        missing
    }

    /// Whether the stock holds all the keys it keeps.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.keys.len() >= self.depth
    }

    /// Keys in stock.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the stock is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use rand_core::OsRng;

    use super::*;

    #[test]
    fn a_stock_hands_out_each_key_once_then_draws_on_the_spot() {
        let mut keys = EphemeralKeys::new(3);
        assert!(keys.is_empty() && !keys.is_full());
        assert_eq!(keys.refill(&mut OsRng), 3);
        assert!(keys.is_full());
        assert_eq!(keys.refill(&mut OsRng), 0, "a full stock draws nothing");
        let taken: Vec<[u8; X25519_KEY_LEN]> =
            (0..5).map(|_| *keys.take(&mut OsRng).public()).collect();
        assert!(keys.is_empty(), "the last two were drawn on the spot");
        for (i, a) in taken.iter().enumerate() {
            assert!(
                taken[i + 1..].iter().all(|b| a != b),
                "every handshake gets a key of its own"
            );
        }
        assert_eq!(keys.refill(&mut OsRng), 3);
    }

    #[test]
    fn a_key_is_the_pair_of_its_secret() {
        let key = EphemeralKey::random(&mut OsRng);
        assert_eq!(
            &key.secret().public_key(),
            key.public(),
            "the public half matches"
        );
        let printed = format!("{key:?}");
        assert!(printed.starts_with("EphemeralKey"), "{printed}");
    }
}
