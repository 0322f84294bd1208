//! `cargo xtask verify-trace`: replays recorded traces through this project's code.
//!
//! Not built yet (the controller/telemetry issue builds it). The pieces below are the shared
//! vocabulary of the two replays (`controller` and `telemetry`).

use std::process::ExitCode;

mod telemetry;

/// Arguments of `cargo xtask verify-trace`.
#[derive(clap::Args)]
pub struct Args {}

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

/// Outcome of one replay: the number of steps that matched, or the first divergence.
pub type Verdict = Result<usize, Divergence>;

/// Absolute tolerance for recorded floating-point values (loads, M_keys, C, m).
pub const TOLERANCE: f64 = 1e-12;

pub fn run(_args: Args) -> ExitCode {
    eprintln!("error: `cargo xtask verify-trace` is not built yet");
    ExitCode::from(2)
}
