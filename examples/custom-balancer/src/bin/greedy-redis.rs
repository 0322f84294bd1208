//! `ach-redis` with Greedy-One added: `greedy-redis rebalance --cluster HOST:PORT --algorithm
//! greedy-one --steps 10 --interval-ms 1000` (and every other command and option of
//! `ach-redis`).

fn main() -> std::process::ExitCode {
    ach_redis::cli::run(custom_balancer::catalogue())
}
