//! `--filter PATTERN`: a substring of metric names, handed on to each source.
//!
//! The harness takes the pattern as it is. divan matches a regular
//! expression against `module::function::arg` paths, which lack the target
//! name in front and the `/throughput`-like suffixes behind. So a pattern is
//! translated into every way it can lie across `<target>/`, the divan path
//! and a suffix; the result may select a little more than needed (never
//! less), and xtask keeps only the metrics whose names contain the pattern.

use crate::divan_parse::EXTRA_METRIC_SUFFIXES;

/// Which benchmarks of one divan target may yield a metric matching a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DivanFilter {
    /// Run every benchmark of the target.
    All,
    /// Run the benchmarks whose divan path matches one of these.
    AnyOf(Vec<Alternative>),
}

/// One reading of the pattern as a divan path fragment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Alternative {
    /// The fragment must start the divan path (the pattern began in `<target>/`).
    start: bool,
    /// The fragment, with `/` turned into divan's `::`.
    body: String,
    /// The fragment must end the path (the pattern ran on into a suffix).
    end: bool,
}

impl DivanFilter {
    /// Translates `pattern` for bench target `target`.
    pub(crate) fn new(target: &str, pattern: &str) -> Self {
        let head = format!("{target}/");
        let inside_suffix = EXTRA_METRIC_SUFFIXES.iter().any(|s| s.contains(pattern));
        if pattern.is_empty() || head.contains(pattern) || inside_suffix {
            return Self::All;
        }
        let mut alternatives = Vec::new();
        let starts = (0..=pattern.len().min(head.len()))
            .filter(|&at| pattern.is_char_boundary(at))
            .filter(|&at| at == 0 || head.ends_with(&pattern[..at]));
        for at in starts {
            let start = at > 0;
            let rest = &pattern[at..];
            alternatives.push(Alternative::new(start, rest, false));
            for suffix in EXTRA_METRIC_SUFFIXES {
                for cut in
                    (1..=suffix.len().min(rest.len())).filter(|&c| suffix.is_char_boundary(c))
                {
                    if let Some(body) = rest.strip_suffix(&suffix[..cut]) {
                        alternatives.push(Alternative::new(start, body, true));
                    }
                }
            }
        }
        alternatives.sort();
        alternatives.dedup();
        Self::AnyOf(alternatives)
    }

    /// The arguments that tell divan to run only these benchmarks.
    pub(crate) fn divan_args(&self) -> Vec<String> {
        match self {
            Self::All => Vec::new(),
            Self::AnyOf(alternatives) => {
                let regex: Vec<String> = alternatives.iter().map(Alternative::regex).collect();
                vec![regex.join("|")]
            }
        }
    }

    /// Whether divan would run the benchmark at `divan_path`.
    #[cfg(test)]
    fn matches(&self, divan_path: &str) -> bool {
        match self {
            Self::All => true,
            Self::AnyOf(alternatives) => alternatives.iter().any(|a| match (a.start, a.end) {
                (true, true) => divan_path == a.body,
                (true, false) => divan_path.starts_with(&a.body),
                (false, true) => divan_path.ends_with(&a.body),
                (false, false) => divan_path.contains(&a.body),
            }),
        }
    }
}

impl Alternative {
    fn new(start: bool, fragment: &str, end: bool) -> Self {
        Self {
            start,
            body: fragment.replace('/', "::"),
            end,
        }
    }

    /// This alternative as a regular expression in the syntax divan uses.
    fn regex(&self) -> String {
        let mut regex = String::from("(?:");
        if self.start {
            regex.push('^');
        }
        for c in self.body.chars() {
            if is_regex_meta(c) {
                regex.push('\\');
            }
            regex.push(c);
        }
        if self.end {
            regex.push('$');
        }
        regex.push(')');
        regex
    }
}

/// Characters the regex crate treats as syntax, which must be escaped to
/// match themselves (the set of `regex_syntax::is_meta_character`).
fn is_regex_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::divan_parse::DivanParser;

    /// Metric names of the captured divan output, with their divan paths.
    fn fixture_metrics() -> Vec<(String, String)> {
        let mut parser = DivanParser::new("level0_fix", 0);
        for line in include_str!("fixtures/divan_mixed.txt").lines() {
            parser.push_line(line);
        }
        parser
            .finish()
            .metrics
            .into_iter()
            .map(|m| {
                let tree = m.name.strip_prefix("level0_fix/").expect("target prefix");
                let tree = EXTRA_METRIC_SUFFIXES
                    .iter()
                    .find_map(|s| tree.strip_suffix(s))
                    .unwrap_or(tree);
                let divan_path = tree.replace('/', "::");
                (m.name, divan_path)
            })
            .collect()
    }

    #[test]
    fn every_benchmark_with_a_matching_metric_is_selected() {
        let metrics = fixture_metrics();
        let mut patterns: Vec<&str> = Vec::new();
        for (name, _) in &metrics {
            let bounds: Vec<usize> = (0..=name.len())
                .filter(|&i| name.is_char_boundary(i))
                .collect();
            for (i, &from) in bounds.iter().enumerate() {
                for &to in &bounds[i + 1..] {
                    if to - from <= 10 || from == 0 || to == name.len() {
                        patterns.push(&name[from..to]);
                    }
                }
            }
        }
        patterns.sort_unstable();
        patterns.dedup();
        for pattern in patterns {
            let filter = DivanFilter::new("level0_fix", pattern);
            for (name, divan_path) in &metrics {
                if name.contains(pattern) {
                    assert!(
                        filter.matches(divan_path),
                        "{pattern:?} matches {name} but {filter:?} skips {divan_path}"
                    );
                }
            }
        }
    }

    #[test]
    fn precise_patterns_select_precisely() {
        let metrics = fixture_metrics();
        let filter = DivanFilter::new("level0_fix", "level0_fix/seal/copy_bytes/1452/throughput");
        let selected: Vec<&str> = metrics
            .iter()
            .filter(|(_, path)| filter.matches(path))
            .map(|(_, path)| path.as_str())
            .collect();
        assert!(!selected.is_empty());
        assert!(selected.iter().all(|p| *p == "seal::copy_bytes::1452"));
        let filter = DivanFilter::new("level0_fix", "grow_vec");
        assert!(filter.matches("seal::grow_vec::100"));
        assert!(!filter.matches("seal::copy_bytes::64"));
    }

    #[test]
    fn patterns_inside_the_target_name_or_a_suffix_run_everything() {
        assert_eq!(DivanFilter::new("level0_wire", "wire"), DivanFilter::All);
        assert_eq!(
            DivanFilter::new("level0_wire", "level0_wire/"),
            DivanFilter::All
        );
        assert_eq!(
            DivanFilter::new("level0_wire", "throughput"),
            DivanFilter::All
        );
        assert_eq!(DivanFilter::new("level0_wire", ""), DivanFilter::All);
        assert_eq!(DivanFilter::All.divan_args(), Vec::<String>::new());
    }

    #[test]
    fn regex_anchors_and_escapes_the_fragments() {
        let filter = DivanFilter::new("level0_wire", "wire/seal/tern");
        let args = filter.divan_args();
        assert_eq!(args.len(), 1);
        assert!(args[0].contains("(?:^seal::tern)"), "{}", args[0]);
        assert!(args[0].contains("(?:wire::seal::tern)"), "{}", args[0]);
        let filter = DivanFilter::new("level0_wire", "1452/allocs");
        assert!(filter.divan_args()[0].contains("(?:1452$)"));
        let odd = Alternative::new(false, "a.b(c)-d", false);
        assert_eq!(odd.regex(), r"(?:a\.b\(c\)\-d)");
    }
}
