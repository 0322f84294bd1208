//! The `ach-redis` command: status, plan, rebalance and fix for a Redis Cluster, with the
//! built-in algorithms (see [`ach_redis::cli`]).

use std::process::ExitCode;

use ach_baselines::catalogue::Catalogue;

fn main() -> ExitCode {
    ach_redis::cli::run(Catalogue::built_in())
}
