//! Seeds that a failing test prints and `TERN_SIM_SEED` replays.

/// The environment variable that replays a run's seed.
pub const SEED_ENV: &str = "TERN_SIM_SEED";

/// A test's seed: the one in [`SEED_ENV`] if set, else the test's own.
/// Dropped while its thread panics (a failing assertion), it prints how to
/// replay the run.
#[derive(Debug)]
pub struct Seed(u64);

impl Seed {
    /// The seed to use: `TERN_SIM_SEED` if it holds a number, else `default`.
    pub fn from_env_or(default: u64) -> Self {
        let value = std::env::var(SEED_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default);
        Self(value)
    }

    /// The seed's value.
    pub fn value(&self) -> u64 {
        self.0
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "tern-sim: this run used seed {0}; replay it with {SEED_ENV}={0}",
                self.0
            );
        }
    }
}
