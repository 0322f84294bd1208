//! Concurrent lookups while the ring changes: `ach_ring::shared::SharedRing` snapshots against
//! the same work under `std::sync::RwLock` (see `ach_benches::concurrent` for the workload).
//!
//! * Criterion group `concurrent_lookup`, functions `snapshot` (`SharedRing::load` per lookup),
//!   `cached_reader` (a `RingReader` per thread) and `rwlock`, parameter the number of reader
//!   threads (1, 2, 4): each reader hashes 16-byte keys and finds their owner while a
//!   writer publishes a changed ring (a random plan of 1 to 4 moves on 1024 tokens, 16 nodes)
//!   every millisecond. Throughput is lookups per second over all readers.
//! * Then a latency report (printed after criterion's output): every lookup of every reader
//!   timed (two clock reads around it, included in the figures), p50, p99, p99.9 and max, with
//!   the writer idle and with it committing every millisecond, for the three ways and 1, 2 and 4
//!   readers; five rounds, each running the three ways in turn, with the median throughput. Without `--bench` (as under `cargo test --benches`) the report runs a few
//!   thousand lookups only, as a smoke test.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-bench cargo bench -p ach-benches --bench concurrent`.

#![allow(missing_docs)] // `criterion_group!` generates an undocumented public function.

use std::time::Duration;

use ach_benches::concurrent::{
    CachedReaderRouter, RouterRing, RunConfig, RunReport, RwLockRouter, SnapshotRouter, run,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};

const READER_COUNTS: [usize; 3] = [1, 2, 4];

fn concurrent_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("concurrent_lookup");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let snapshot = SnapshotRouter::new();
    let cached = CachedReaderRouter::default();
    let rwlock = RwLockRouter::new();
    for readers in READER_COUNTS {
        // One iteration is one lookup by each reader, in parallel.
        group.throughput(Throughput::Elements(readers as u64));
        group.bench_with_input(
            BenchmarkId::new("snapshot", readers),
            &readers,
            |b, &readers| b.iter_custom(|iters| timed_run(&snapshot, readers, iters)),
        );
        group.bench_with_input(
            BenchmarkId::new("cached_reader", readers),
            &readers,
            |b, &readers| b.iter_custom(|iters| timed_run(&cached, readers, iters)),
        );
        group.bench_with_input(
            BenchmarkId::new("rwlock", readers),
            &readers,
            |b, &readers| b.iter_custom(|iters| timed_run(&rwlock, readers, iters)),
        );
    }
    group.finish();
}

fn timed_run(router: &impl RouterRing, readers: usize, lookups_per_reader: u64) -> Duration {
    run(
        router,
        RunConfig {
            readers,
            lookups_per_reader,
            writer: true,
            record_latency: false,
        },
    )
    .elapsed
}

criterion_group!(benches, concurrent_lookup);

/// Rounds of the latency report: each round runs the three ways in turn, so a change of the
/// machine's load hits them alike; throughput is the median over the rounds.
const ROUNDS: usize = 5;

/// Times every lookup and prints throughput and latency percentiles as a Markdown table.
fn latency_report(lookups_per_reader: u64) {
    println!();
    println!(
        "Reader latency ({ROUNDS} rounds x {lookups_per_reader} timed lookups per reader; \
         1024 tokens, 16 nodes, 16-byte keys; latency includes two clock reads)"
    );
    println!();
    println!(
        "| sharing | readers | writer | commits/s | lookups/s median (min-max) | p50 ns | p99 ns | p99.9 ns | max ns |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for readers in READER_COUNTS {
        for writer in [false, true] {
            let config = RunConfig {
                readers,
                lookups_per_reader,
                writer,
                record_latency: true,
            };
            let mut rounds: [Vec<RunReport>; 3] = Default::default();
            for _ in 0..ROUNDS {
                rounds[0].push(run(&SnapshotRouter::new(), config));
                rounds[1].push(run(&CachedReaderRouter::default(), config));
                rounds[2].push(run(&RwLockRouter::new(), config));
            }
            for (sharing, reports) in ["snapshot", "cached_reader", "rwlock"]
                .into_iter()
                .zip(rounds)
            {
                print_row(sharing, reports, config);
            }
        }
    }
}

fn print_row(sharing: &str, reports: Vec<RunReport>, config: RunConfig) {
    let writer = if config.writer { "every 1 ms" } else { "idle" };
    let mut rates: Vec<f64> = reports.iter().map(RunReport::lookups_per_second).collect();
    rates.sort_by(f64::total_cmp);
    let seconds: f64 = reports.iter().map(|r| r.elapsed.as_secs_f64()).sum();
    let commits: u64 = reports.iter().map(|r| r.commits).sum();
    let mut pooled = RunReport {
        elapsed: Duration::from_secs_f64(seconds),
        lookups: reports.iter().map(|r| r.lookups).sum(),
        commits,
        latencies_ns: reports.into_iter().flat_map(|r| r.latencies_ns).collect(),
    };
    let p50 = pooled.latency_percentile_ns(0.50).unwrap_or(0);
    let p99 = pooled.latency_percentile_ns(0.99).unwrap_or(0);
    let p999 = pooled.latency_percentile_ns(0.999).unwrap_or(0);
    let max = pooled.latency_percentile_ns(1.0).unwrap_or(0);
    println!(
        "| {sharing} | {} | {writer} | {:.0} | {:.1} M ({:.1}-{:.1}) | {p50} | {p99} | {p999} | {max} |",
        config.readers,
        commits as f64 / seconds,
        rates[rates.len() / 2] / 1e6,
        rates[0] / 1e6,
        rates[rates.len() - 1] / 1e6,
    );
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let bench_mode = std::env::args().any(|arg| arg == "--bench");
    latency_report(if bench_mode { 1_000_000 } else { 2_000 });
}
