//! Progress of a transfer: a bar (bytes, rate, ETA) on a terminal, a plain
//! line every few seconds when standard error is a file or a pipe.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::units;

/// How often the plain form prints a line.
const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// Progress towards `total` bytes.
#[derive(Debug)]
pub(crate) struct Progress {
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    shown: Form,
}

#[derive(Debug)]
enum Form {
    Bar(ProgressBar),
    Plain { next_line: Instant },
}

impl Progress {
    /// Starts showing progress of `label` towards `total` bytes.
    pub(crate) fn new(label: &str, total: u64) -> Self {
        let now = Instant::now();
        let shown = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(label.to_owned());
            Form::Bar(bar)
        } else {
            Form::Plain {
                next_line: now + PLAIN_EVERY,
            }
        };
        Self {
            label: label.to_owned(),
            total,
            done: 0,
            started: now,
            shown,
        }
    }

    /// `bytes` more are done.
    pub(crate) fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        match &mut self.shown {
            Form::Bar(bar) => bar.set_position(self.done),
            Form::Plain { next_line } => {
                let now = Instant::now();
                if now >= *next_line {
                    *next_line = now + PLAIN_EVERY;
                    eprintln!("{}", self.line());
                }
            }
        }
    }

    /// Stops showing progress (the caller prints the outcome).
    pub(crate) fn finish(self) {
        if let Form::Bar(bar) = self.shown {
            bar.finish_and_clear();
        }
    }

    fn line(&self) -> String {
        let percent = if self.total == 0 {
            100.0
        } else {
            self.done as f64 * 100.0 / self.total as f64
        };
        format!(
            "{}: {} of {} ({percent:.0}%), {}",
            self.label,
            units::bytes(self.done),
            units::bytes(self.total),
            units::rate(self.done, self.started.elapsed()),
        )
    }
}
