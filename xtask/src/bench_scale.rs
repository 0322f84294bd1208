//! `cargo xtask bench-scale`: the command line over [`ach_report::bench`].
//!
//! Measures every point in a child process of this binary (`bench-scale --measure POINT`), so
//! that each point's peak memory is its own, and prints the table.

use std::process::{Command, ExitCode};

use ach_report::bench::{BenchPoint, Measurement, measure_in_this_process, table};
use ach_report::profile::load_average;

/// Arguments of `cargo xtask bench-scale`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Cluster sizes of the `scale` series to time, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    nodes: Vec<usize>,
    /// Runs per point; the table gives the best and every repeat.
    #[arg(long, default_value_t = 3)]
    repeats: u32,
    /// Also draw the curve (seconds against tokens x steps, log-log, with a line of slope 1)
    /// into this SVG file.
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
    /// Internal: measure this one point (`C1` or a node count) in this process and print one
    /// line of figures.
    #[arg(long, hide = true)]
    measure: Option<String>,
}

/// Times one run per point and prints the table; exit code 2 on bad input, 1 on a failure.
pub fn run(args: Args) -> ExitCode {
    if args.repeats == 0 || args.nodes.contains(&0) {
        eprintln!("error: --repeats and every --nodes value must be >= 1");
        return ExitCode::from(2);
    }
    if let Some(point) = &args.measure {
        let point = match BenchPoint::parse(point) {
            Ok(point) => point,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        };
        return match measure_in_this_process(point, args.repeats) {
            Ok(measurement) => {
                println!("{}", measurement.to_line());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; time with `cargo xtask` (release) for real figures");
    }
    eprintln!("load average before: {}", load_average());
    let points =
        std::iter::once(BenchPoint::C1).chain(args.nodes.iter().map(|&n| BenchPoint::Scale(n)));
    let mut measured = Vec::new();
    for point in points {
        eprintln!(
            "measuring {} ({} repeats) ...",
            point.argument(),
            args.repeats
        );
        match measure_in_child(point, args.repeats) {
            Ok(m) => measured.push(m),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!("load average after: {}", load_average());
    let (c1, scale) = measured.split_first().expect("C1 is always measured");
    print!("{}", table(c1, scale));
    if let Some(path) = &args.svg {
        let point = |m: &Measurement| (m.token_steps(), m.best());
        let curve: Vec<(f64, f64)> = scale.iter().map(point).collect();
        let written = ach_report::report::bench_curve_svg(&curve, point(c1))
            .map_err(|e| e.to_string())
            .and_then(|svg| std::fs::write(path, svg).map_err(|e| e.to_string()));
        if let Err(error) = written {
            eprintln!("error: {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("curve: {}", path.display());
    }
    ExitCode::SUCCESS
}

/// Measures `point` in a fresh process of this binary.
fn measure_in_child(point: BenchPoint, repeats: u32) -> Result<Measurement, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let output = Command::new(&exe)
        .args(["bench-scale", "--repeats", &repeats.to_string()])
        .args(["--measure", &point.argument()])
        .output()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    if !output.status.success() {
        return Err(format!(
            "measuring {} failed ({}): {}",
            point.argument(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    Measurement::parse(stdout.trim()).map_err(|e| e.to_string())
}
