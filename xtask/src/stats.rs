//! `cargo xtask stats`: not built yet (the statistics issue builds it).

use std::process::ExitCode;

/// Arguments of `cargo xtask stats`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("error: `cargo xtask stats` is not built yet");
    ExitCode::from(2)
}
