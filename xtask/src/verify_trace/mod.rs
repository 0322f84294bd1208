//! `cargo xtask verify-trace`: not built yet (the controller/telemetry issue builds it).

use std::process::ExitCode;

/// Arguments of `cargo xtask verify-trace`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("error: `cargo xtask verify-trace` is not built yet");
    ExitCode::from(2)
}
