//! `cargo xtask bench`: build, run every source, print one table, then
//! save, compare and report as asked.
//!
//! Order matters for trust: a baseline or result name is checked before
//! minutes of measuring; everything is compiled before the first
//! measurement, so compile time never mixes with the progress; and a source
//! that is missing is a note, not an error, while a source that fails makes
//! the exit status non-zero after the table of what did run.

use std::process::ExitCode;
use std::time::Instant;

use crate::args::BenchArgs;
use crate::ceiling::assign_divan_ceilings;
use crate::diff::{Change, Verdict, compare};
use crate::divan::{self, DivanTarget};
use crate::filter::DivanFilter;
use crate::harness::{self, HARNESS_LEVELS};
use crate::headline::headline_table;
use crate::host::Environment;
use crate::load::{BUSY_SHARE, CpuSnapshot};
use crate::metric::Metric;
use crate::progress::Progress;
use crate::report;
use crate::results::{Run, result_path};
use crate::source::{Collected, Mode};
use crate::table::results_table;
use crate::workspace::{BENCH_PACKAGE, HARNESS_BIN, Workspace};

/// What will run.
#[derive(Debug, Default)]
struct Plan {
    divan: Vec<DivanTarget>,
    harness_levels: Vec<u8>,
    notes: Vec<String>,
}

impl Plan {
    fn new(workspace: &Workspace, levels: &[u8]) -> Self {
        let mut plan = Self::default();
        let Some(package) = &workspace.bench_package else {
            plan.notes
                .push("no tern-benches package in this workspace: nothing to run".to_owned());
            return plan;
        };
        let divan_levels: Vec<u8> = levels
            .iter()
            .copied()
            .filter(|l| !HARNESS_LEVELS.contains(l))
            .collect();
        plan.divan = divan::discover(&package.dir.join("benches"), &divan_levels, &mut plan.notes);
        // The divan run builds the default features: a target that needs
        // others (a comparison transport) is left to be run by hand.
        let notes = &mut plan.notes;
        plan.divan.retain(|target| {
            let Some((_, features)) = package
                .feature_benches
                .iter()
                .find(|(name, _)| *name == target.name)
            else {
                return true;
            };
            let features = features.join(",");
            notes.push(format!(
                "{}: built only with feature {features}, skipped (cargo bench -p {BENCH_PACKAGE} --features {features} --bench {})",
                target.name, target.name
            ));
            false
        });
        for level in &divan_levels {
            if !plan.divan.iter().any(|t| t.level == *level) {
                plan.notes.push(format!(
                    "level {level}: no benches/benches/level{level}_*.rs yet, skipped"
                ));
            }
        }
        let harness_levels: Vec<u8> = levels
            .iter()
            .copied()
            .filter(|l| HARNESS_LEVELS.contains(l))
            .collect();
        if !harness_levels.is_empty() {
            if package.has_harness {
                plan.harness_levels = harness_levels;
            } else {
                plan.notes
                    .push(format!("no {HARNESS_BIN} binary: levels 2 and 3 skipped"));
            }
        }
        plan
    }

    fn is_empty(&self) -> bool {
        self.divan.is_empty() && self.harness_levels.is_empty()
    }
}

/// Runs `cargo xtask bench` with `args`.
pub(crate) fn run(args: &BenchArgs) -> Result<ExitCode, String> {
    let began = Instant::now();
    let workspace = Workspace::locate()?;
    let results_dir = workspace.results_dir();
    let save_path = args
        .save
        .as_deref()
        .map(|name| result_path(&results_dir, name))
        .transpose()?;
    let baseline = match args.baseline.as_deref() {
        Some(name) => Some((name, Run::load(&result_path(&results_dir, name)?)?)),
        None => None,
    };
    let mode = if args.full { Mode::Full } else { Mode::Quick };
    let plan = Plan::new(&workspace, &args.levels);
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    if plan.is_empty() {
        eprintln!("nothing to run for level {}", join(&args.levels));
        return Ok(ExitCode::SUCCESS);
    }

    let features: Vec<&str> = args.compare.iter().map(|c| c.feature()).collect();
    divan::build(&plan.divan)?;
    if !plan.harness_levels.is_empty() {
        harness::build(&features)?;
    }
    let compiled = Instant::now();

    let filter = args.filter.as_deref();
    let mut warnings: Vec<String> = Vec::new();
    let mut divan_runs: Vec<(DivanTarget, DivanFilter, Vec<String>)> = Vec::new();
    for target in &plan.divan {
        let divan_filter = filter.map_or(DivanFilter::All, |f| DivanFilter::new(&target.name, f));
        let listed = divan::list(target, &divan_filter)?;
        if listed.is_empty() {
            if filter.is_none() {
                warnings.push(format!("{}: no benchmarks in this target", target.name));
            }
            continue;
        }
        divan_runs.push((target.clone(), divan_filter, listed));
    }
    let groups = if plan.harness_levels.is_empty() {
        Vec::new()
    } else {
        harness::list(&plan.harness_levels, filter, &features).unwrap_or_else(|e| {
            warnings.push(e);
            Vec::new()
        })
    };
    if args.list {
        print_list(&divan_runs, &groups);
        return Ok(ExitCode::SUCCESS);
    }

    // The harness counts one step per group, or one in all if it lists none.
    let harness_steps = match (plan.harness_levels.is_empty(), groups.len()) {
        (true, _) => 0,
        (false, 0) => 1,
        (false, n) => n,
    };
    let total = divan_runs
        .iter()
        .map(|(_, _, listed)| listed.len())
        .sum::<usize>()
        + harness_steps;
    let progress = Progress::new(total);
    let before = CpuSnapshot::take();
    let mut collected: Vec<Collected> = Vec::new();
    for (target, divan_filter, listed) in &divan_runs {
        collected.push(divan::run(target, mode, divan_filter, listed, &progress));
    }
    if !plan.harness_levels.is_empty() {
        if groups.is_empty() {
            progress.start(&format!(
                "{HARNESS_BIN}: level {}",
                join(&plan.harness_levels)
            ));
        }
        collected.push(harness::run(
            &plan.harness_levels,
            mode,
            filter,
            &features,
            &groups,
            &progress,
        ));
    }
    progress.finish();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let others_cpu_share = before
        .zip(CpuSnapshot::take())
        .map(|(before, after)| before.others_share(&after, cpus));
    if let Some(share) = others_cpu_share.filter(|s| *s > BUSY_SHARE) {
        warnings.push(format!(
            "other processes used {:.0} % of the {cpus} CPUs while measuring: figures are slower and \
             noisier than on a quiet machine, and changes against a baseline may be the load",
            share * 100.0
        ));
    }

    let mut failures = Vec::new();
    let mut metrics = Vec::new();
    for source in collected {
        warnings.extend(source.warnings);
        failures.extend(source.failure);
        metrics.extend(source.metrics);
    }
    let mut metrics = keep(metrics, filter, &mut warnings);
    assign_divan_ceilings(&mut metrics);
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    for failure in &failures {
        eprintln!("error: {failure}");
    }

    let environment = Environment::detect(&workspace.root);
    let mut run = Run::now(environment, mode == Mode::Quick, metrics);
    run.others_cpu_share = others_cpu_share;
    let changes: Option<Vec<Change>> = baseline
        .as_ref()
        .map(|(_, base)| run.metrics.iter().map(|m| compare(m, base)).collect());
    print_header(
        &run,
        args,
        baseline.as_ref().map(|(name, base)| (*name, base)),
    );
    let headline = headline_table(&run.metrics);
    let table = results_table(&run.metrics, changes.as_deref());
    let everything = args.all || args.filter.is_some() || headline.is_empty();
    if !headline.is_empty() {
        print!("{}", headline.to_text());
        println!();
    }
    if table.is_empty() {
        println!("no metrics");
    } else if everything {
        print!("{}", table.to_text());
    } else {
        println!(
            "{} metrics in all: --all prints them{}",
            run.metrics.len(),
            if changes.is_some() {
                " with the baseline's changes"
            } else {
                ""
            }
        );
    }
    if let (Some((name, base)), Some(changes)) = (&baseline, &changes) {
        print_diff_summary(name, base, &run, args, changes);
    }
    eprintln!(
        "{} metrics in {:.0} s ({:.0} s compiling, {:.0} s measuring)",
        run.metrics.len(),
        began.elapsed().as_secs_f64(),
        compiled.duration_since(began).as_secs_f64(),
        compiled.elapsed().as_secs_f64(),
    );

    if let Some(path) = &save_path {
        if failures.is_empty() {
            run.save(path)?;
            eprintln!("saved {}", path.display());
        } else {
            eprintln!("not saved: a benchmark source failed, the run is incomplete");
        }
    }
    if args.report {
        let context = report::Context {
            levels: &args.levels,
            filter,
            baseline: baseline
                .as_ref()
                .zip(changes.as_deref())
                .map(|((name, base), changes)| (*name, base, changes)),
            warnings: &warnings,
        };
        let path = report::write(&results_dir, &run, &context)?;
        eprintln!("report: {}", path.display());
    }

    let regressed = changes
        .iter()
        .flatten()
        .any(|c| c.verdict == Verdict::Regressed);
    if !failures.is_empty() || (args.fail_on_regression && regressed) {
        if regressed && args.fail_on_regression {
            eprintln!("error: at least one metric regressed beyond its noise band");
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The metrics matching `filter`, each name once (the first wins).
fn keep(metrics: Vec<Metric>, filter: Option<&str>, warnings: &mut Vec<String>) -> Vec<Metric> {
    let mut seen = std::collections::HashSet::new();
    metrics
        .into_iter()
        .filter(|m| filter.is_none_or(|f| m.name.contains(f)))
        .filter(|m| {
            let first = seen.insert(m.name.clone());
            if !first {
                warnings.push(format!("{}: reported twice, the second is dropped", m.name));
            }
            first
        })
        .collect()
}

fn join(levels: &[u8]) -> String {
    levels
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_list(divan_runs: &[(DivanTarget, DivanFilter, Vec<String>)], groups: &[String]) {
    for (target, _, listed) in divan_runs {
        for leaf in listed {
            println!("{}/{leaf}", target.name);
        }
    }
    for group in groups {
        println!("{group}");
    }
}

fn print_header(run: &Run, args: &BenchArgs, baseline: Option<(&str, &Run)>) {
    let env = &run.environment;
    let mode = if run.quick { "quick" } else { "full" };
    let dirty = if env.dirty { ", dirty" } else { "" };
    let short: String = env.revision.chars().take(10).collect();
    println!(
        "Tern benchmarks, {mode} mode, level {} — {}, {} — rev {short}{dirty}, {}",
        join(&args.levels),
        env.cpu,
        env.kernel,
        run.time
    );
    if let Some((name, base)) = baseline {
        let short: String = base.environment.revision.chars().take(10).collect();
        println!(
            "baseline {name}: rev {short}, {}; noise bands 2 / 5 / 10 / 15 % at levels 0 / 1 / 2 / 3",
            base.time
        );
    }
    println!();
}

fn print_diff_summary(name: &str, base: &Run, run: &Run, args: &BenchArgs, changes: &[Change]) {
    let count = |verdict| changes.iter().filter(|c| c.verdict == verdict).count();
    println!(
        "\nagainst {name}: {} improved, {} regressed, {} within noise, {} new",
        count(Verdict::Improved),
        count(Verdict::Regressed),
        count(Verdict::Noise),
        count(Verdict::New)
    );
    let absent: Vec<&str> = base
        .metrics
        .iter()
        .filter(|m| args.levels.contains(&m.level))
        .filter(|m| args.filter.as_deref().is_none_or(|f| m.name.contains(f)))
        .filter(|m| run.metric(&m.name).is_none())
        .map(|m| m.name.as_str())
        .collect();
    if !absent.is_empty() {
        println!("in {name} but not in this run: {}", absent.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::{Better, Summary};

    fn metric(name: &str) -> Metric {
        let summary = Summary {
            median: 1.0,
            min: 1.0,
            max: 1.0,
            samples: 1,
        };
        Metric::new(name.to_owned(), 0, "ns", Better::Lower, summary)
    }

    #[test]
    fn kept_metrics_match_the_filter_and_are_unique() {
        let mut warnings = Vec::new();
        let metrics = vec![
            metric("a/seal"),
            metric("a/open"),
            metric("a/seal"),
            metric("b/seal/throughput"),
        ];
        let kept = keep(metrics, Some("seal"), &mut warnings);
        let names: Vec<&str> = kept.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a/seal", "b/seal/throughput"]);
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn the_plan_splits_levels_between_divan_and_the_harness() {
        let dir = std::env::temp_dir().join(format!("tern-xtask-plan-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("benches")).expect("dir");
        std::fs::write(dir.join("benches/level0_wire.rs"), "").expect("file");
        std::fs::write(dir.join("benches/level0_wire_quinn.rs"), "").expect("file");
        let workspace = Workspace {
            root: dir.clone(),
            target_dir: dir.join("target"),
            bench_package: Some(crate::workspace::BenchPackage {
                dir: dir.clone(),
                has_harness: true,
                feature_benches: vec![("level0_wire_quinn".to_owned(), vec!["quinn".to_owned()])],
            }),
        };
        let plan = Plan::new(&workspace, &[0, 1, 2]);
        assert_eq!(plan.divan.len(), 1);
        assert_eq!(plan.harness_levels, [2]);
        assert_eq!(plan.notes.len(), 2, "{:?}", plan.notes);
        assert!(plan.notes[0].starts_with("level0_wire_quinn: built only with feature quinn"));
        assert!(plan.notes[1].starts_with("level 1"));
        let plan = Plan::new(&workspace, &[3]);
        assert!(plan.divan.is_empty());
        assert_eq!(plan.harness_levels, [3]);
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
