//! Reports rendered from saved results: REPORT.md, tables and figures.
//!
//! Not built yet (the reports issue builds it): `render` writes nothing so far.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `cargo xtask report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The results folder of `cargo xtask experiments`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

/// Renders the report of the results in `out`. Not built yet: writes nothing.
pub fn render(_out: &Path) -> Result<(), String> {
    Ok(())
}

pub fn run(args: Args) -> ExitCode {
    match render(&args.out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
