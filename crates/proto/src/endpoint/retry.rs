//! The responder's address-validation tokens over time: a token key that
//! is replaced by a fresh random one every [`TOKEN_LIFETIME`], the one
//! before it kept so a token issued just before the change still opens,
//! and the age check. The first key is drawn when the first token is
//! issued, so an endpoint never under load draws nothing for them. A token is therefore valid for at most one lifetime,
//! and an endpoint that restarts forgets every token it issued (its
//! initiators are simply answered with a new one).

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use rand_core::CryptoRngCore;
use tern_wire::replay::IntroId;
use tern_wire::{Token, TokenError, TokenKey, token_issued};

/// How long a token stays valid, and how often the key that seals tokens
/// is replaced. Long enough for a retried intro's round trip, even one
/// that waited out a few back-offs.
pub(crate) const TOKEN_LIFETIME: Duration = Duration::from_secs(10);

/// A key and the generation it seals: the issue times, in seconds since
/// the endpoint started, whose quotient by the lifetime is `generation`.
#[derive(Debug)]
struct Generation {
    generation: u32,
    key: TokenKey,
}

/// The token keys of one endpoint (see the module documentation).
#[derive(Debug)]
pub(crate) struct Tokens {
    /// The time that issue times count from.
    epoch: Instant,
    current: Option<Generation>,
    previous: Option<Generation>,
}

impl Tokens {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            epoch: now,
            current: None,
            previous: None,
        }
    }

    fn seconds(&self, now: Instant) -> u32 {
        u32::try_from(now.saturating_duration_since(self.epoch).as_secs()).unwrap_or(u32::MAX)
    }

    fn generation_of(seconds: u32) -> u32 {
        seconds / TOKEN_LIFETIME.as_secs() as u32
    }

    /// The key of `now`'s generation, made if time has moved past the
    /// current one (which is kept if it is the generation just before).
    fn rotate(&mut self, now: Instant, rng: &mut impl CryptoRngCore) -> &Generation {
        let generation = Self::generation_of(self.seconds(now));
        match self.current.take() {
            Some(current) if current.generation == generation => self.current.insert(current),
            old => {
                self.previous = old.filter(|old| old.generation + 1 == generation);
                let key = TokenKey::random(rng);
                self.current.insert(Generation { generation, key })
            }
        }
    }

    /// A token for the intro `intro` from `address`.
    pub(crate) fn issue(
        &mut self,
        now: Instant,
        intro: &IntroId,
        address: SocketAddr,
        rng: &mut impl CryptoRngCore,
    ) -> Token {
        let issued = self.seconds(now);
        let current = self.rotate(now, rng);
        current.key.seal(issued, intro, address, rng)
    }

    /// Whether `token` is one this endpoint issued for `intro` from
    /// `address`, no longer than a lifetime ago. (The age bounds the
    /// generations a valid token can be of to the current one and the one
    /// before, so checking needs no rotation.)
    pub(crate) fn check(
        &self,
        now: Instant,
        token: &Token,
        intro: &IntroId,
        address: SocketAddr,
    ) -> Result<(), TokenError> {
        let issued = token_issued(token);
        let age = self.seconds(now).checked_sub(issued);
        if age.is_none_or(|age| u64::from(age) > TOKEN_LIFETIME.as_secs()) {
            return Err(TokenError::Expired);
        }
        let generation = Self::generation_of(issued);
        let key = [self.current.as_ref(), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|g| g.generation == generation)
            .map(|g| &g.key)
            .ok_or(TokenError::Expired)?;
        key.open(token, intro, address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_chacha::rand_core::SeedableRng;

    fn setup() -> (quanta::Clock, std::sync::Arc<quanta::Mock>, ChaCha20Rng) {
        let (clock, mock) = quanta::Clock::mock();
        mock.increment(Duration::from_secs(1000));
        (clock, mock, ChaCha20Rng::seed_from_u64(11))
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn a_token_is_valid_for_its_lifetime_across_a_key_change_and_not_after() {
        let (clock, mock, mut rng) = setup();
        let mut tokens = Tokens::new(clock.now());
        let (intro, from) = ([1; 16], addr("192.0.2.7:1234"));
        // Issued late in a generation, checked after the key changed.
        mock.increment(Duration::from_secs(9));
        let token = tokens.issue(clock.now(), &intro, from, &mut rng);
        mock.increment(Duration::from_secs(5));
        assert_eq!(tokens.check(clock.now(), &token, &intro, from), Ok(()));
        mock.increment(Duration::from_secs(6));
        assert_eq!(
            tokens.check(clock.now(), &token, &intro, from),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn forged_foreign_and_future_tokens_are_refused() {
        let (clock, _, mut rng) = setup();
        let mut tokens = Tokens::new(clock.now());
        let (intro, from) = ([2; 16], addr("[2001:db8::5]:80"));
        let token = tokens.issue(clock.now(), &intro, from, &mut rng);
        let now = clock.now();
        let other = addr("[2001:db8::6]:80");
        assert_eq!(
            tokens.check(now, &token, &intro, other),
            Err(TokenError::Forged)
        );
        assert_eq!(
            tokens.check(now, &token, &[3; 16], from),
            Err(TokenError::Forged)
        );
        let mut future = token;
        future[..4].copy_from_slice(&100u32.to_be_bytes());
        assert_eq!(
            tokens.check(now, &future, &intro, from),
            Err(TokenError::Expired)
        );
        // Another endpoint's token (another key), of the right age.
        let mut stranger = Tokens::new(now);
        let foreign = stranger.issue(now, &intro, from, &mut ChaCha20Rng::seed_from_u64(12));
        assert_eq!(
            tokens.check(now, &foreign, &intro, from),
            Err(TokenError::Forged)
        );
    }

    #[test]
    fn a_key_two_generations_old_is_forgotten() {
        let (clock, mock, mut rng) = setup();
        let mut tokens = Tokens::new(clock.now());
        let (intro, from) = ([4; 16], addr("198.51.100.1:1"));
        let token = tokens.issue(clock.now(), &intro, from, &mut rng);
        mock.increment(TOKEN_LIFETIME * 2);
        tokens.rotate(clock.now(), &mut rng);
        assert!(tokens.previous.is_none(), "no key of the generation before");
        mock.increment(TOKEN_LIFETIME * 3);
        assert_eq!(
            tokens.check(clock.now(), &token, &intro, from),
            Err(TokenError::Expired)
        );
    }
}
