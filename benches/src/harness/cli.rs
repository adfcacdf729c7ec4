//! The command line of BENCH-CONTRACT:
//! `tern-harness [--level N]... [--quick | --full] [--filter SUBSTRING] [--list]`.

use std::time::Duration;

/// How long and how often each benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// CI smoke runs: one short sample per cell; level 2 fits in about a minute.
    Quick,
    /// Neither flag: a few medium samples.
    Normal,
    /// Longer runs, more samples.
    Full,
}

impl Mode {
    /// Samples per benchmark cell.
    pub(crate) fn samples(self) -> usize {
        match self {
            Self::Quick => 1,
            Self::Normal => 3,
            Self::Full => 5,
        }
    }

    /// How long one sample sends for.
    pub(crate) fn sample_time(self) -> Duration {
        match self {
            Self::Quick => Duration::from_millis(150),
            Self::Normal => Duration::from_millis(250),
            Self::Full => Duration::from_millis(500),
        }
    }
}

/// Parsed arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Args {
    pub(crate) levels: Vec<u8>,
    pub(crate) mode: Mode,
    pub(crate) filter: Option<String>,
    pub(crate) list: bool,
}

impl Args {
    /// Whether a metric named `name` is wanted.
    pub(crate) fn wants(&self, name: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| name.contains(f))
    }
}

pub(crate) const USAGE: &str =
    "usage: tern-harness [--level N]... [--quick | --full] [--filter SUBSTRING] [--list]";

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut levels = Vec::new();
    let (mut quick, mut full, mut list) = (false, false, false);
    let mut filter = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--level" => {
                let v = value("--level")?;
                let level = v
                    .parse::<u8>()
                    .map_err(|_| format!("--level takes a number, not {v:?}"))?;
                if !levels.contains(&level) {
                    levels.push(level);
                }
            }
            "--filter" => filter = Some(value("--filter")?),
            "--quick" => quick = true,
            "--full" => full = true,
            "--list" => list = true,
            "--help" | "-h" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if quick && full {
        return Err("--quick and --full exclude each other".to_owned());
    }
    if levels.is_empty() {
        levels.push(2);
    }
    let mode = match (quick, full) {
        (true, _) => Mode::Quick,
        (_, true) => Mode::Full,
        _ => Mode::Normal,
    };
    Ok(Args {
        levels,
        mode,
        filter,
        list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn defaults_to_level_two_in_the_middle_mode() {
        let args = parse_str(&[]).expect("valid");
        assert_eq!(
            (args.levels, args.mode, args.list),
            (vec![2], Mode::Normal, false)
        );
    }

    #[test]
    fn repeated_levels_filters_and_inline_values_are_read() {
        let args = parse_str(&[
            "--level",
            "2",
            "--level=3",
            "--quick",
            "--filter=1452B",
            "--list",
        ])
        .expect("valid");
        assert_eq!(args.levels, [2, 3]);
        assert_eq!(args.mode, Mode::Quick);
        assert!(
            args.list
                && args.wants("sockio/mmsg/1452B/batch1/drop_ratio")
                && !args.wants("sockio/mmsg/512B")
        );
    }

    #[test]
    fn contradictions_and_strangers_are_refused() {
        assert!(parse_str(&["--quick", "--full"]).is_err());
        assert!(parse_str(&["--level", "two"]).is_err());
        assert!(parse_str(&["--filter"]).is_err());
        assert!(parse_str(&["--fast"]).is_err());
    }
}
