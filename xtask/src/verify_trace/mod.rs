//! `cargo xtask verify-trace`: replays recorded traces through this project's code.
//!
//! A trace is gzipped (or plain) JSON in the format of the published simulation's recordings:
//! a controller trace (one algorithm on one run) or a telemetry trace (the telemetry pipeline
//! of one run). The kind is told from the content. Per file the command prints `match` or the
//! first divergence (step, what differed, expected and got). Exit status: 0 when every file
//! matches, 1 when one diverges, 2 when one cannot be read or parsed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub mod controller;
pub mod telemetry;

/// Arguments of `cargo xtask verify-trace`.
#[derive(clap::Args)]
pub struct Args {
    /// Trace files (`.json.gz` or `.json`).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// The first point where a replay disagrees with its recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// Step index `t` of the recording.
    pub step: usize,
    /// What differed, e.g. `ell[3]` or `moves`.
    pub what: String,
    /// The recorded value, rendered.
    pub expected: String,
    /// This project's value, rendered.
    pub got: String,
}

impl Divergence {
    /// The divergence at step `step` in `what`: the recording's value `expected`, ours `got`.
    pub fn new(
        step: usize,
        what: impl Into<String>,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) -> Divergence {
        Divergence {
            step,
            what: what.into(),
            expected: expected.into(),
            got: got.into(),
        }
    }
}

/// Outcome of one replay: the number of steps that matched, or the first divergence.
pub type Verdict = Result<usize, Divergence>;

/// Absolute tolerance for recorded floating-point values (loads, M_keys, C, m).
pub const TOLERANCE: f64 = 1e-12;

/// Reports a divergence in `what` at `step` unless `|expected - got| <= TOLERANCE` (NaN never
/// matches).
fn compare_value(
    step: usize,
    what: impl Into<String>,
    expected: f64,
    got: f64,
) -> Result<(), Divergence> {
    if (expected - got).abs() <= TOLERANCE {
        Ok(())
    } else {
        Err(Divergence::new(
            step,
            what,
            format!("{expected:?}"),
            format!("{got:?}"),
        ))
    }
}

/// The outcome of verifying one file.
#[derive(Debug)]
pub enum FileOutcome {
    /// Every step matched.
    Match {
        /// What the trace is.
        description: String,
        /// Number of steps replayed.
        steps: usize,
    },
    /// The replay diverged.
    Diverged {
        /// What the trace is.
        description: String,
        /// Where and how.
        divergence: Divergence,
    },
}

/// Reads, parses and replays one trace file. `Err` means it could not be read or parsed.
pub fn verify_file(path: &Path) -> Result<FileOutcome, String> {
    let text = read_maybe_gzipped(path)?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not valid JSON: {e}", path.display()))?;
    let malformed = |e: serde_json::Error| format!("{}: not a trace: {e}", path.display());
    let (description, verdict) = if value.get("algorithm").is_some() {
        let trace: controller::ControllerTrace =
            serde_json::from_value(value).map_err(malformed)?;
        (trace.describe(), controller::replay(&trace))
    } else {
        let trace = telemetry::parse(&text).map_err(malformed)?;
        (trace.describe(), telemetry::replay(&trace))
    };
    Ok(match verdict {
        Ok(steps) => FileOutcome::Match { description, steps },
        Err(divergence) => FileOutcome::Diverged {
            description,
            divergence,
        },
    })
}

fn read_maybe_gzipped(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: cannot decompress: {e}", path.display()))?;
        Ok(text)
    } else {
        String::from_utf8(bytes).map_err(|e| format!("{}: not UTF-8 text: {e}", path.display()))
    }
}

pub fn run(args: Args) -> ExitCode {
    let mut status = 0u8;
    for path in &args.files {
        match verify_file(path) {
            Ok(FileOutcome::Match { description, steps }) => {
                println!(
                    "match     {} ({description}, {steps} steps)",
                    path.display()
                );
            }
            Ok(FileOutcome::Diverged {
                description,
                divergence: d,
            }) => {
                println!("DIVERGED  {} ({description})", path.display());
                println!("          step {}: {} differs", d.step, d.what);
                println!("          expected {}", d.expected);
                println!("          got      {}", d.got);
                status = status.max(1);
            }
            Err(message) => {
                eprintln!("error: {message}");
                status = 2;
            }
        }
    }
    ExitCode::from(status)
}
