//! Sizes and rates as people write and read them: `1G`, `200M`, `10s` in,
//! `1.23 GB` and `9.87 Gbit/s` out.

use std::time::Duration;

/// Parses a byte count: a number with an optional unit, `K`, `M`, `G`,
/// `T`, `P` (powers of 1000) or `Ki`, `Mi`, `Gi`, `Ti`, `Pi` (powers of 1024), each
/// optionally followed by `B`: `1500`, `64K`, `1G`, `1.5GB`, `4MiB`.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 1500, 64K, 1G, 4MiB)"))?;
    let unit = unit.trim();
    let unit = unit
        .strip_suffix('B')
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(unit);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "p" => 1_000_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => {
            return Err(format!(
                "`{text}`: unknown unit (use K, M, G, T or Ki, Mi, Gi, Ti)"
            ));
        }
    };
    let bytes = (number * multiplier as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// Parses a duration such as `10s`, `500ms`, `2m`, `1h 30m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration (examples: 10s, 500ms, 2m): {e}"))
}

/// A byte count with a decimal unit and three significant digits:
/// `512 B`, `1.23 MB`, `45.6 GB`.
pub(crate) fn bytes(count: u64) -> String {
    scaled(count as f64, "B", &["B", "kB", "MB", "GB", "TB", "PB"])
}

/// A rate in bits per second from bytes moved in `elapsed`:
/// `812 Mbit/s`, `9.87 Gbit/s`.
pub(crate) fn rate(bytes: u64, elapsed: Duration) -> String {
    scaled(
        bits_per_second(bytes, elapsed),
        "bit/s",
        &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"],
    )
}

/// Bits per second (0 when no time elapsed).
pub(crate) fn bits_per_second(bytes: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// A round-trip time in milliseconds with a precision that suits it.
pub(crate) fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn scaled(mut value: f64, base: &str, units: &[&str]) -> String {
    let mut unit = base;
    for next in units.iter().skip(1) {
        if value < 999.5 {
            break;
        }
        value /= 1000.0;
        unit = next;
    }
    if unit == base || value >= 99.95 {
        format!("{value:.0} {unit}")
    } else if value >= 9.995 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("64K"), Ok(64_000));
        assert_eq!(parse_size("1G"), Ok(1_000_000_000));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("2 gi"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("1.2.3M").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("ten").is_err());
    }

    #[test]
    fn sizes_and_rates_print_with_three_significant_digits() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_234_567), "1.23 MB");
        assert_eq!(bytes(45_600_000_000), "45.6 GB");
        assert_eq!(bytes(200_000_000), "200 MB");
        assert_eq!(rate(1_250_000_000, Duration::from_secs(1)), "10.0 Gbit/s");
        assert_eq!(rate(1_000, Duration::ZERO), "0 bit/s");
        assert_eq!(millis(Duration::from_micros(250)), "0.25 ms");
    }

    proptest! {
        #[test]
        fn a_printed_size_parses_back_within_its_rounding(count in 0u64..1 << 50) {
            let printed = bytes(count);
            let parsed = parse_size(&printed.replace(' ', "").replace("kB", "K"))
                .expect("what is printed parses");
            let error = (parsed as f64 - count as f64).abs();
            prop_assert!(error <= count as f64 * 0.006 + 0.5, "{count} -> {printed} -> {parsed}");
        }

        #[test]
        fn parsing_any_text_returns_without_panicking(text in ".{0,24}") {
            let _ = parse_size(&text);
            let _ = parse_duration(&text);
        }
    }
}
