//! The connection's own random numbers: path challenges, skipped packet
//! numbers, intro re-send jitter.
//!
//! `ChaCha8Rng` buffers a 256-byte block of output, 320 bytes in all, in
//! every connection; these draws come once per thousand packets sent or
//! per path event, so this keeps only the seed and the position in the
//! stream, and rebuilds the generator there for each draw (a block of
//! ChaCha8, about a hundred nanoseconds). The numbers drawn are exactly
//! `ChaCha8Rng`'s.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{self, CryptoRng, RngCore, SeedableRng};

/// A ChaCha8 stream without its output buffer.
#[derive(Debug)]
pub(super) struct ConnectionRng {
    seed: <ChaCha8Rng as SeedableRng>::Seed,
    /// The next word of the stream to draw.
    word_pos: u128,
}

impl ConnectionRng {
    /// Seeded from `rng` (the endpoint's); from `fallback` if it fails.
    pub(super) fn from_rng(rng: &mut impl rand_core::CryptoRngCore, fallback: u64) -> Self {
        let generator =
            ChaCha8Rng::from_rng(rng).unwrap_or_else(|_| ChaCha8Rng::seed_from_u64(fallback));
        Self {
            seed: generator.get_seed(),
            word_pos: generator.get_word_pos(),
        }
    }

    /// Runs `draw` on the generator at this stream's position.
    fn draw<R>(&mut self, draw: impl FnOnce(&mut ChaCha8Rng) -> R) -> R {
        let mut generator = ChaCha8Rng::from_seed(self.seed);
        generator.set_word_pos(self.word_pos);
        let drawn = draw(&mut generator);
        self.word_pos = generator.get_word_pos();
        drawn
    }
}

impl RngCore for ConnectionRng {
    fn next_u32(&mut self) -> u32 {
        self.draw(RngCore::next_u32)
    }

    fn next_u64(&mut self) -> u64 {
        self.draw(RngCore::next_u64)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.draw(|generator| generator.fill_bytes(dest));
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.draw(|generator| generator.try_fill_bytes(dest))
    }
}

impl CryptoRng for ConnectionRng {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_draws_what_chacha8_draws_without_holding_its_buffer() {
        let mut seeder = ChaCha8Rng::seed_from_u64(1);
        let mut reference = ChaCha8Rng::from_rng(&mut seeder).expect("seeded");
        let mut seeder = ChaCha8Rng::seed_from_u64(1);
        let mut rng = ConnectionRng::from_rng(&mut seeder, 0);
        for round in 0..100 {
            assert_eq!(rng.next_u64(), reference.next_u64(), "round {round}");
            assert_eq!(rng.next_u32(), reference.next_u32(), "round {round}");
            let (mut a, mut b) = ([0u8; 37], [0u8; 37]);
            rng.fill_bytes(&mut a);
            reference.fill_bytes(&mut b);
            assert_eq!(a, b, "round {round}");
        }
        assert!(size_of::<ConnectionRng>() <= 64);
    }
}
