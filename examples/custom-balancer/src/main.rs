//! The paper's matrix with Greedy-One added: takes the arguments of `cargo xtask experiments`
//! and writes the same results layout with one more row.

use ach_report::experiments::{Args, run_with};
use ach_sim::Registry;
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "custom-balancer",
    about = "The paper's matrix with Greedy-One added"
)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn main() -> std::process::ExitCode {
    let registry = Registry::from_catalogue(&custom_balancer::catalogue());
    let mut args = Cli::parse().args;
    args.add_algorithms = vec![custom_balancer::NAME.to_string()];
    run_with(args, registry)
}
