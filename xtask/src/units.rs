//! Units: reading divan's scaled quantities and printing ours readably.
//!
//! Result files keep one unit per metric (divan times in `ns`, byte rates in
//! `B/s`) so that baselines compare like with like; only the printed table
//! rescales, to a unit chosen from the median.

/// Nanoseconds in one of the time units divan or the harness may print.
pub(crate) fn ns_per(unit: &str) -> Option<f64> {
    match unit {
        "ps" => Some(1e-3),
        "ns" => Some(1.0),
        "µs" | "μs" | "us" => Some(1e3),
        "ms" => Some(1e6),
        "s" => Some(1e9),
        _ => None,
    }
}

/// Parses a divan time cell such as `22.67 µs` into nanoseconds.
pub(crate) fn parse_duration_ns(cell: &str) -> Option<f64> {
    let (number, unit) = split_number(cell)?;
    Some(number * ns_per(unit)?)
}

/// Parses a plain number, as divan prints allocation counts (`1`, `0.007`).
pub(crate) fn parse_count(cell: &str) -> Option<f64> {
    let (number, unit) = split_number(cell)?;
    unit.is_empty().then_some(number)
}

/// Parses a divan byte size such as `1.452 KB` or `64 KiB` into bytes.
pub(crate) fn parse_bytes(cell: &str) -> Option<f64> {
    let (number, unit) = split_number(cell)?;
    Some(number * prefix_factor(unit.strip_suffix('B')?)?)
}

/// Parses a divan throughput cell such as `2.362 GB/s`, `29.03 Mitem/s` or
/// `665.3 GHz` into a rate in the returned base unit (`B/s`, `items/s`,
/// `chars/s`, `Hz`).
pub(crate) fn parse_rate(cell: &str) -> Option<(f64, &'static str)> {
    let (number, unit) = split_number(cell)?;
    const BASES: [(&str, &str); 4] = [
        ("B/s", "B/s"),
        ("item/s", "items/s"),
        ("char/s", "chars/s"),
        ("Hz", "Hz"),
    ];
    BASES.iter().find_map(|&(suffix, base)| {
        let prefix = unit.strip_suffix(suffix)?;
        Some((number * prefix_factor(prefix)?, base))
    })
}

/// Splits `12.5 unit` into the number and the unit (empty if absent).
fn split_number(cell: &str) -> Option<(f64, &str)> {
    let cell = cell.trim();
    let (number, unit) = cell.split_once(' ').unwrap_or((cell, ""));
    let number: f64 = number.parse().ok()?;
    number.is_finite().then_some((number, unit.trim()))
}

/// The factor of a decimal (`K`, `M`, ...) or binary (`Ki`, `Mi`, ...) prefix.
fn prefix_factor(prefix: &str) -> Option<f64> {
    const KI: f64 = 1024.0;
    Some(match prefix {
        "" => 1.0,
        "K" | "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "Ki" => KI,
        "Mi" => KI * KI,
        "Gi" => KI * KI * KI,
        "Ti" => KI * KI * KI * KI,
        "Pi" => KI * KI * KI * KI * KI,
        _ => return None,
    })
}

/// How to print the values of one metric: a divisor and the unit label.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Scale {
    divisor: f64,
    /// Unit label to print beside the scaled values.
    pub(crate) unit: String,
    /// Prefix appended to each number for units without a scaled name.
    suffix: &'static str,
}

impl Scale {
    /// Picks a readable scale for `unit` from a typical value (the median).
    pub(crate) fn for_value(value: f64, unit: &str) -> Self {
        let magnitude = value.abs();
        if let Some(ns) = ns_per(unit) {
            let in_ns = magnitude * ns;
            let (divisor_ns, label) = match in_ns {
                v if v < 1e3 => (1.0, "ns"),
                v if v < 1e6 => (1e3, "µs"),
                v if v < 1e9 => (1e6, "ms"),
                _ => (1e9, "s"),
            };
            return Self {
                divisor: divisor_ns / ns,
                unit: label.to_owned(),
                suffix: "",
            };
        }
        const DECIMAL: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")];
        let step = DECIMAL.iter().find(|(factor, _)| magnitude >= *factor);
        if let Some(base) = unit
            .strip_prefix('B')
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        {
            let (divisor, prefix) = step.copied().unwrap_or((1.0, ""));
            return Self {
                divisor,
                unit: format!("{prefix}B{base}"),
                suffix: "",
            };
        }
        let (divisor, suffix) = step.copied().unwrap_or((1.0, ""));
        Self {
            divisor,
            unit: unit.to_owned(),
            suffix,
        }
    }

    /// `value` (in the metric's stored unit) as a number on this scale.
    pub(crate) fn apply(&self, value: f64) -> f64 {
        value / self.divisor
    }

    /// Formats `value` (in the metric's stored unit) on this scale.
    pub(crate) fn format(&self, value: f64) -> String {
        format!("{}{}", significant(self.apply(value)), self.suffix)
    }
}

/// Four significant digits, without exponent notation, trailing zeros kept
/// off: `22.67`, `1452`, `0.4930` becomes `0.493`.
pub(crate) fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits_before_point = value.abs().log10().floor() as i32 + 1;
    let decimals = (4 - digits_before_point).clamp(0, 12) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_divan_time_unit_becomes_nanoseconds() {
        assert_eq!(parse_duration_ns("493 ps"), Some(0.493));
        assert_eq!(parse_duration_ns("0.493 ns"), Some(0.493));
        assert_eq!(parse_duration_ns("22.67 µs"), Some(22_670.0));
        assert_eq!(parse_duration_ns("22.67 us"), Some(22_670.0));
        assert_eq!(parse_duration_ns("2.06 ms"), Some(2_060_000.0));
        assert_eq!(parse_duration_ns("1.5 s"), Some(1.5e9));
        assert_eq!(parse_duration_ns("1.5 min"), None);
        assert_eq!(parse_duration_ns(""), None);
    }

    #[test]
    fn throughput_cells_keep_their_kind_and_lose_their_prefix() {
        assert_eq!(parse_rate("2.362 GB/s"), Some((2.362e9, "B/s")));
        assert_eq!(
            parse_rate("3 GiB/s"),
            Some((3.0 * 1024.0 * 1024.0 * 1024.0, "B/s"))
        );
        assert_eq!(parse_rate("0 B/s"), Some((0.0, "B/s")));
        assert_eq!(parse_rate("29.5 Mitem/s"), Some((29.5e6, "items/s")));
        assert_eq!(parse_rate("2 Kitem/s"), Some((2e3, "items/s")));
        assert_eq!(parse_rate("121.5 Mchar/s"), Some((121.5e6, "chars/s")));
        assert_eq!(parse_rate("665 GHz"), Some((665e9, "Hz")));
        assert_eq!(parse_rate("inf B/s"), None);
        assert_eq!(parse_rate("12 Xitem/s"), None);
    }

    #[test]
    fn sizes_and_counts_parse_as_divan_prints_them() {
        assert_eq!(parse_bytes("1.5 KB"), Some(1500.0));
        assert_eq!(parse_bytes("2 KiB"), Some(2048.0));
        assert_eq!(parse_bytes("384 B"), Some(384.0));
        assert_eq!(parse_bytes("384"), None);
        assert_eq!(parse_count("0.007"), Some(0.007));
        assert_eq!(parse_count("5"), Some(5.0));
        assert_eq!(parse_count("5 B"), None);
    }

    #[test]
    fn times_are_printed_in_the_unit_that_suits_the_median() {
        let scale = Scale::for_value(22_670.0, "ns");
        assert_eq!(scale.unit, "µs");
        assert_eq!(scale.format(22_670.0), "22.67");
        assert_eq!(scale.format(65_010.0), "65.01");
        let harness_latency = Scale::for_value(2_500.0, "µs");
        assert_eq!(harness_latency.unit, "ms");
        assert_eq!(harness_latency.format(2_500.0), "2.5");
        assert_eq!(Scale::for_value(0.493, "ns").format(0.493), "0.493");
    }

    #[test]
    fn byte_rates_get_a_prefixed_unit_and_other_rates_a_suffixed_number() {
        let bytes = Scale::for_value(2.362e9, "B/s");
        assert_eq!(
            (bytes.unit.as_str(), bytes.format(2.362e9).as_str()),
            ("GB/s", "2.362")
        );
        let datagrams = Scale::for_value(612_345.0, "datagrams/s");
        assert_eq!(datagrams.unit, "datagrams/s");
        assert_eq!(datagrams.format(612_345.0), "612.3K");
        let ratio = Scale::for_value(0.87, "ratio");
        assert_eq!(ratio.format(0.87), "0.87");
    }

    #[test]
    fn significant_digits_stay_at_four_without_exponents() {
        assert_eq!(significant(1452.0), "1452");
        assert_eq!(significant(612_345.0), "612345");
        assert_eq!(significant(0.000_123_4), "0.0001234");
        assert_eq!(significant(-3.5), "-3.5");
        assert_eq!(significant(0.0), "0");
    }
}
