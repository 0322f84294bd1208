//! `cargo xtask bench-run`: the profile by phase of one C1 run and one 1000-node `scale` run,
//! the CPU and wall time of the default matrix, and (by hand, with `ACH_REFERENCE_SIM=DIR`) the
//! ratio to the published simulation; printed as Markdown and, with `--write FILE`, written
//! into FILE's generated section (docs/performance.md). It parses and prints: the measuring
//! and the Markdown are `ach_report::profile`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use ach_report::bench::BenchPoint;
use ach_report::profile::{
    GeneratedSection, PublishedSimulation, load_average, machine, profile_point, replace_section,
    time_matrix, utc_date, working_tree_commit,
};

/// Arguments of `cargo xtask bench-run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Points to profile, comma-separated: `C1` or a node count of the `scale` series.
    #[arg(long, value_delimiter = ',', default_value = "C1,1000")]
    points: Vec<String>,
    /// Repeats per point (each unprobed and probed); the figures are the best.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Do not time the default matrix (`experiments --no-report`, all cores, into a temporary
    /// folder).
    #[arg(long)]
    no_matrix: bool,
    /// Runs of the published simulation's C1 (with `ACH_REFERENCE_SIM`); the ratio takes the
    /// shortest, as the figures of our runs are the best of their repeats.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reference_runs: u32,
    /// Write the Markdown into this file, between its `bench-run:begin` and `bench-run:end`
    /// markers (docs/performance.md).
    #[arg(long)]
    write: Option<PathBuf>,
}

/// Profiles every point, times the matrix, prints (and writes) the Markdown.
pub fn run(args: Args) -> ExitCode {
    match run_checked(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run_checked(args: &Args) -> Result<(), String> {
    let points = args
        .points
        .iter()
        .map(|p| BenchPoint::parse(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    // Everything that can fail without measuring fails before measuring, not after.
    if let Some(path) = &args.write {
        read_with_section(path)?;
    }
    let reference = published_simulation()?;
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; run it as `cargo xtask bench-run` (release)");
    }
    let load_before = load_average();
    eprintln!("load average before: {load_before}");
    let mut profiles = Vec::new();
    for point in &points {
        eprintln!(
            "profiling {} ({} repeats) ...",
            point.argument(),
            args.repeats
        );
        profiles.push(profile_point(*point, args.repeats).map_err(|e| e.to_string())?);
    }
    let matrix = if args.no_matrix {
        None
    } else {
        eprintln!("timing the default matrix ...");
        let program =
            std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        Some(time_matrix(&program).map_err(|e| e.to_string())?)
    };
    let reference_cpu_seconds = time_published_simulation(reference.as_ref(), args.reference_runs)?;
    let load_after = load_average();
    eprintln!("load average after: {load_after}");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let markdown = GeneratedSection {
        command: &command_line(args, reference.as_ref()),
        date: &utc_date(now),
        commit: &working_tree_commit(),
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        machine: &machine(),
        load_before: &load_before,
        load_after: &load_after,
        profiles: &profiles,
        matrix,
        reference_cpu_seconds: reference_cpu_seconds.as_deref(),
    }
    .markdown();
    print!("{markdown}");
    if let Some(path) = &args.write {
        write_section(path, &markdown)?;
    }
    Ok(())
}

/// `runs` C1 runs of `simulation` in CPU seconds, or `None` without one.
fn time_published_simulation(
    simulation: Option<&PublishedSimulation>,
    runs: u32,
) -> Result<Option<Vec<f64>>, String> {
    let Some(simulation) = simulation else {
        return Ok(None);
    };
    eprintln!("timing {runs} C1 runs of the published simulation ...");
    (0..runs)
        .map(|_| simulation.c1_cpu_seconds())
        .collect::<Result<Vec<f64>, _>>()
        .map(Some)
        .map_err(|e| format!("ACH_REFERENCE_SIM: {e}"))
}

/// The text of the file at `path`, which must hold the generated section's markers.
fn read_with_section(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    replace_section(&text, "").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text)
}

/// Replaces the generated section of the file at `path` with `markdown`.
fn write_section(path: &Path, markdown: &str) -> Result<(), String> {
    let text = read_with_section(path)?;
    let new = replace_section(&text, markdown).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, new).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    eprintln!("written: {}", path.display());
    Ok(())
}

/// The published simulation named by `ACH_REFERENCE_SIM` (Python from `ACH_REFERENCE_PYTHON`,
/// default `python3`), checked ready to run, or `None` when the variable is not set.
fn published_simulation() -> Result<Option<PublishedSimulation>, String> {
    let Some(dir) = std::env::var_os("ACH_REFERENCE_SIM") else {
        return Ok(None);
    };
    let python = std::env::var("ACH_REFERENCE_PYTHON").unwrap_or_else(|_| "python3".into());
    PublishedSimulation::open(Path::new(&dir), &python)
        .map(Some)
        .map_err(|e| format!("ACH_REFERENCE_SIM: {e}"))
}

/// The command as a user would type it again (with `--reference-runs` when the published
/// simulation `reference` was timed).
fn command_line(args: &Args, reference: Option<&PublishedSimulation>) -> String {
    let mut line = format!(
        "cargo xtask bench-run --points {} --repeats {}",
        args.points.join(","),
        args.repeats
    );
    if args.no_matrix {
        line.push_str(" --no-matrix");
    }
    if reference.is_some() {
        line.push_str(&format!(" --reference-runs {}", args.reference_runs));
    }
    if let Some(path) = &args.write {
        line.push_str(&format!(" --write {}", path.display()));
    }
    line
}
