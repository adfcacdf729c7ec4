//! What the two benchmark sources (divan benches, `tern-harness`) share.

use crate::metric::Metric;

/// How long and how often to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Short runs, wide intervals: the default, and CI's smoke test.
    Quick,
    /// Longer runs, tighter intervals.
    Full,
}

impl Mode {
    /// As the results file and the harness spell it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Quick => "quick",
            Self::Full => "full",
        }
    }
}

/// What one source produced.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// The metrics it reported.
    pub(crate) metrics: Vec<Metric>,
    /// Things worth saying that did not stop it.
    pub(crate) warnings: Vec<String>,
    /// Why it failed, if it did; its metrics so far are kept.
    pub(crate) failure: Option<String>,
}
