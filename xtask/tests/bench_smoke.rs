//! End-to-end checks of `cargo xtask bench`, run as the built binary.
//!
//! The cheap ones run with every `cargo test`. The smoke run builds the real
//! level-0 benches in the bench profile (minutes on a cold target directory,
//! seconds on a warm one), so it is ignored by default and run explicitly:
//! `cargo test -p xtask -- --ignored`, best after `cargo xtask bench` has
//! built the benches in the same target directory.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn an_unknown_option_is_a_usage_error() {
    let out = xtask(&["bench", "--fastest"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("usage: cargo xtask"));
}

#[test]
fn a_missing_baseline_fails_before_anything_is_built() {
    let out = xtask(&["bench", "--baseline", "no-such-baseline-anywhere"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no-such-baseline-anywhere.json"),
        "{stderr}"
    );
    assert!(!stderr.contains("Compiling"), "{stderr}");
}

#[test]
#[ignore = "builds and runs the level-0 benches in the bench profile; run with --ignored"]
fn a_quick_level_0_run_of_one_benchmark_prints_and_saves_it() {
    let listed = xtask(&["bench", "--levels", "0", "--list"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let stdout = text(&listed.stdout);
    let one = stdout
        .lines()
        .next()
        .expect("at least one level-0 benchmark")
        .to_owned();

    let out = xtask(&[
        "bench",
        "--levels",
        "0",
        "--quick",
        "--filter",
        &one,
        "--save",
        "xtask-smoke",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("lvl  metric"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains(&one)).collect();
    assert!(!rows.is_empty(), "no row for {one}:\n{stdout}");

    let saved = stderr
        .lines()
        .find_map(|l| l.strip_prefix("saved "))
        .expect("the run was saved");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(saved).expect("result file")).expect("JSON");
    assert_eq!(run["quick"], true);
    for field in ["host", "cpu", "kernel", "rustc", "revision", "time"] {
        assert!(
            run[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field} missing"
        );
    }
    let metrics = run["metrics"].as_array().expect("metrics");
    assert_eq!(metrics.len(), rows.len());
    for metric in metrics {
        assert!(
            metric["name"].as_str().expect("name").contains(&one),
            "{metric}"
        );
        assert_eq!(metric["level"], 0);
        assert!(
            metric["median"]
                .as_f64()
                .is_some_and(|m| m.is_finite() && m >= 0.0),
            "{metric}"
        );
        assert!(
            metric["samples"].as_u64().is_some_and(|n| n >= 1),
            "{metric}"
        );
    }
    std::fs::remove_file(saved).expect("cleaned up");
}
