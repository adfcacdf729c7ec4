//! The progress line on standard error: which benchmark runs, how many are left.
//!
//! On a terminal the line is redrawn in place; otherwise (CI logs, a pipe)
//! each benchmark start is one plain line, and details are not repeated.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// Longest progress line drawn, so that it never wraps on a usual terminal.
const WIDTH: usize = 110;

/// Shared by the threads reading a child's output.
#[derive(Debug)]
pub(crate) struct Progress {
    state: Mutex<State>,
    terminal: bool,
}

#[derive(Debug, Default)]
struct State {
    total: usize,
    started: usize,
    current: String,
    drawn: bool,
}

impl Progress {
    /// A progress line for `total` benchmarks.
    pub(crate) fn new(total: usize) -> Self {
        Self {
            state: Mutex::new(State {
                total,
                ..State::default()
            }),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// A benchmark named `label` has started.
    pub(crate) fn start(&self, label: &str) {
        let mut state = self.lock();
        state.started += 1;
        state.total = state.total.max(state.started);
        state.current = label.to_owned();
        let line = state.line(None);
        self.draw(&mut state, &line, true);
    }

    /// The running benchmark reports `detail` (e.g. a harness stderr line).
    pub(crate) fn detail(&self, detail: &str) {
        let mut state = self.lock();
        let line = state.line(Some(detail));
        self.draw(&mut state, &line, false);
    }

    /// Removes the progress line.
    pub(crate) fn finish(&self) {
        let mut state = self.lock();
        self.clear(&mut state);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn draw(&self, state: &mut State, line: &str, started: bool) {
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let shown: String = line.chars().take(WIDTH).collect();
            let _ = write!(err, "\r\x1b[2K{shown}");
            let _ = err.flush();
            state.drawn = true;
        } else if started {
            let _ = writeln!(err, "{line}");
        }
    }

    fn clear(&self, state: &mut State) {
        if state.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            state.drawn = false;
        }
    }
}

impl State {
    fn line(&self, detail: Option<&str>) -> String {
        let left = self.total - self.started;
        let mut line = format!(
            "[{}/{}] {} ({left} left)",
            self.started, self.total, self.current
        );
        if let Some(detail) = detail.map(str::trim).filter(|d| !d.is_empty()) {
            line.push_str(": ");
            line.push_str(detail);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_started_benchmarks_and_those_left() {
        let progress = Progress {
            state: Mutex::new(State {
                total: 3,
                ..State::default()
            }),
            terminal: false,
        };
        progress.start("level0_wire: seal/tern/1452");
        let state = progress.lock();
        assert_eq!(
            state.line(None),
            "[1/3] level0_wire: seal/tern/1452 (2 left)"
        );
        assert_eq!(
            state.line(Some("  warming up ")),
            "[1/3] level0_wire: seal/tern/1452 (2 left): warming up"
        );
    }

    #[test]
    fn more_starts_than_announced_raise_the_total() {
        let progress = Progress {
            state: Mutex::new(State::default()),
            terminal: false,
        };
        progress.start("a");
        progress.start("b");
        assert_eq!(progress.lock().line(None), "[2/2] b (0 left)");
    }
}
