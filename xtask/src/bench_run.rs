//! `cargo xtask bench-run`: the profile by phase of one C1 run and one 1000-node `scale` run,
//! the CPU and wall time of the default matrix, and (by hand, with `ACH_REFERENCE_SIM=DIR`) the
//! ratio to the published simulation; printed as Markdown and, with `--write FILE`, written
//! into FILE's generated section (docs/performance.md).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ach_report::bench::BenchPoint;
use ach_report::profile::{
    PointProfile, best, load_average, machine, point_markdown, process_children_cpu_seconds,
    profile_point, replace_section, utc_date,
};

/// Arguments of `cargo xtask bench-run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Points to profile, comma-separated: `C1` or a node count of the `scale` series.
    #[arg(long, value_delimiter = ',', default_value = "C1,1000")]
    points: Vec<String>,
    /// Repeats per point (each unprobed and probed); the figures are the best.
    #[arg(long, default_value_t = 5)]
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
    if args.repeats == 0 {
        return Err("--repeats must be >= 1".into());
    }
    let points = args
        .points
        .iter()
        .map(|p| BenchPoint::parse(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if let Some(path) = &args.write {
        // Fail before measuring, not after.
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        replace_section(&text, "").map_err(|e| format!("{}: {e}", path.display()))?;
    }
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
        Some(time_matrix()?)
    };
    let reference = match std::env::var_os("ACH_REFERENCE_SIM") {
        Some(dir) => {
            eprintln!(
                "timing {} C1 runs of the published simulation ...",
                args.reference_runs
            );
            let runs = (0..args.reference_runs)
                .map(|_| reference_c1_cpu_seconds(Path::new(&dir)))
                .collect::<Result<Vec<f64>, String>>()?;
            Some(runs)
        }
        None => None,
    };
    let load_after = load_average();
    eprintln!("load average after: {load_after}");
    let markdown = section(&Section {
        profiles: &profiles,
        matrix,
        reference,
        load_before: &load_before,
        load_after: &load_after,
        command: &command_line(args),
    });
    print!("{markdown}");
    if let Some(path) = &args.write {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let new =
            replace_section(&text, &markdown).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::write(path, new).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        eprintln!("written: {}", path.display());
    }
    Ok(())
}

/// The command as a user would type it again.
fn command_line(args: &Args) -> String {
    let mut line = format!(
        "cargo xtask bench-run --points {} --repeats {}",
        args.points.join(","),
        args.repeats
    );
    if args.no_matrix {
        line.push_str(" --no-matrix");
    }
    if std::env::var_os("ACH_REFERENCE_SIM").is_some() {
        line.push_str(&format!(" --reference-runs {}", args.reference_runs));
    }
    if let Some(path) = &args.write {
        line.push_str(&format!(" --write {}", path.display()));
    }
    line
}

/// Wall and CPU seconds (every thread of the child) of the default matrix.
#[derive(Clone, Copy, Debug)]
struct MatrixTiming {
    wall: f64,
    cpu: Option<f64>,
}

/// Runs `experiments --no-report` (the default matrix, all cores) in a child process of this
/// binary into a temporary folder, and returns its wall time and its CPU time.
fn time_matrix() -> Result<MatrixTiming, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let out = std::env::temp_dir().join(format!("ach-bench-run-matrix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let cpu_before = process_children_cpu_seconds();
    let start = Instant::now();
    let status = Command::new(&exe)
        .arg("experiments")
        .arg("--no-report")
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu_before, process_children_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let _ = std::fs::remove_dir_all(&out);
    if !status.success() {
        return Err(format!("the default matrix failed ({status})"));
    }
    Ok(MatrixTiming { wall, cpu })
}

/// The Python program that times one C1 run (seed 42, run 0) of the published simulation in
/// CPU seconds of its process (`time.process_time`), configuration loading excluded.
const REFERENCE_SCRIPT: &str = r#"
import sys, os, time
root = sys.argv[1]
sys.path.insert(0, root)
sys.path.insert(0, os.path.join(root, "scripts"))
from run_series import _load_config
from src.experiment import run_experiment
cfg = _load_config("C1", os.path.join(root, "configs"))
start = time.process_time()
run_experiment(cfg, seed=42)
print(time.process_time() - start)
"#;

/// CPU seconds of one C1 run of the published simulation checked out at `dir`
/// (Kronv3rk/ach-experiment; Python from `ACH_REFERENCE_PYTHON`, default `python3`, with
/// numpy and pyyaml).
fn reference_c1_cpu_seconds(dir: &Path) -> Result<f64, String> {
    let python = std::env::var("ACH_REFERENCE_PYTHON").unwrap_or_else(|_| "python3".into());
    if !dir.join("src").join("experiment.py").is_file() {
        return Err(format!(
            "ACH_REFERENCE_SIM={}: no src/experiment.py there (a checkout of \
             Kronv3rk/ach-experiment is expected)",
            dir.display()
        ));
    }
    let output = Command::new(&python)
        .arg("-c")
        .arg(REFERENCE_SCRIPT)
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot start {python}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the published simulation failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("unexpected output of the published simulation: {text:?}"))
}

/// Everything the generated section shows.
struct Section<'a> {
    profiles: &'a [PointProfile],
    matrix: Option<MatrixTiming>,
    /// CPU seconds of each C1 run of the published simulation.
    reference: Option<Vec<f64>>,
    load_before: &'a str,
    load_after: &'a str,
    command: &'a str,
}

/// The published simulation's C1 runs as the section gives them: the best CPU time, and every
/// run's when there are several.
fn reference_runs(runs: &[f64]) -> String {
    let best = best(runs).unwrap_or(f64::NAN);
    if runs.len() == 1 {
        return format!("{best:.2} s CPU");
    }
    let each: Vec<String> = runs.iter().map(|r| format!("{r:.2}")).collect();
    format!(
        "best {best:.2} s CPU of {} runs ({} s)",
        runs.len(),
        each.join(", ")
    )
}

/// `git describe`-like: the short commit and whether the tree has changes, or `unknown`.
fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{hash} with uncommitted changes"),
            _ => hash,
        },
        None => "unknown".into(),
    }
}

fn section(s: &Section<'_>) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = format!(
        "Generated by `{}` on {} (commit {}, {} build).\n\n- Machine: {}.\n- Load average \
         (1, 5, 15 min) before: {}; after: {}.\n\n",
        s.command,
        utc_date(now),
        commit(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        machine(),
        s.load_before,
        s.load_after,
    );
    for p in s.profiles {
        out.push_str(&point_markdown(p));
        out.push('\n');
    }
    let c1 = s.profiles.iter().find(|p| p.title == "C1");
    if let Some(c1) = c1 {
        for p in s.profiles.iter().filter(|p| p.title != "C1") {
            out.push_str(&format!(
                "- {} against C1 (best CPU time): {:.1}x for {:.0}x the tokens x steps.\n",
                p.title,
                p.best_cpu_or_wall() / c1.best_cpu_or_wall(),
                p.token_steps() / c1.token_steps()
            ));
        }
    }
    if let Some(m) = s.matrix {
        let cpu = m.cpu.map_or("n/a".to_string(), |c| format!("{c:.2} s"));
        out.push_str(&format!(
            "- The default matrix (`cargo xtask experiments --no-report`, all cores): **{:.2} s \
             wall**, CPU {cpu} (every thread).\n",
            m.wall
        ));
    }
    match (s.reference.as_deref(), c1) {
        (Some(runs), Some(c1)) => out.push_str(&format!(
            "- The published simulation (ACH_REFERENCE_SIM), one C1 run: {}, **{:.0}x** this C1 \
             run's best CPU time.\n",
            reference_runs(runs),
            best(runs).unwrap_or(f64::NAN) / c1.best_cpu_or_wall()
        )),
        (Some(runs), None) => out.push_str(&format!(
            "- The published simulation (ACH_REFERENCE_SIM), one C1 run: {}.\n",
            reference_runs(runs)
        )),
        (None, _) => out.push_str(
            "- The published simulation: not timed (set ACH_REFERENCE_SIM to a checkout of it).\n",
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_runs_give_the_shortest_and_each() {
        assert_eq!(reference_runs(&[1.83]), "1.83 s CPU");
        assert_eq!(
            reference_runs(&[1.861, 1.829, 1.888]),
            "best 1.83 s CPU of 3 runs (1.86, 1.83, 1.89 s)"
        );
        assert_eq!(best(&[2.0, 1.5, 1.75]), Some(1.5));
    }
}
