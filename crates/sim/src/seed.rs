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
        Self(choose(std::env::var(SEED_ENV).ok().as_deref(), default))
    }

    /// The seed's value.
    pub fn value(&self) -> u64 {
        self.0
    }

    /// The line a failing test prints.
    pub fn replay_hint(&self) -> String {
        format!(
            "tern-sim: this run used seed {0}; replay it with {SEED_ENV}={0}",
            self.0
        )
    }
}

/// The seed from the variable's value if it is a number, else `default`.
fn choose(value: Option<&str>, default: u64) -> u64 {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

impl Drop for Seed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.replay_hint());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_overrides_the_default_only_with_a_number() {
        assert_eq!(choose(None, 7), 7);
        assert_eq!(choose(Some(" 12345 "), 7), 12345);
        assert_eq!(choose(Some("many"), 7), 7);
    }

    #[test]
    fn a_failing_test_is_told_how_to_replay_it() {
        let seed = Seed(99);
        assert_eq!(
            seed.replay_hint(),
            "tern-sim: this run used seed 99; replay it with TERN_SIM_SEED=99"
        );
    }
}
