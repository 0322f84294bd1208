//! Measures a live ACH rebalance on a local 4-node cluster and prints the figures quoted in
//! docs/redis.md: the status before and after, keys moved and time per slot, and the ops/s the
//! clients saw without a rebalance and during one.
//!
//! ```text
//! cargo run -p ach-redis --example measure -- [UNIFORM_KEYS] [HOT_SLOTS] [KEYS_PER_HOT_SLOT] [MIN_SLOT_KEYS]
//! ```
//!
//! Starts its own redis-server children (stopped when it ends) on free loopback ports.

#[path = "../tests/common/workload.rs"]
mod workload;

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ach_redis::cluster::Cluster;
use ach_redis::control::{ControlOptions, Controller};
use ach_redis::rebalance::LoopOptions;
use ach_telemetry::TelemetryConfig;
use common::{Rebalanced, ach_options, machine, rebalance, status};
use workload::{DataSet, Workload, start_cluster, used_memory_mb};

/// ACH with a budget of 5 % a step and 30 % over 10 steps, memory over `capacity_mb`, the
/// tracker's `beta` and `min_slot_keys`.
fn options(capacity_mb: f64, beta: f64, min_slot_keys: u64) -> ControlOptions {
    let defaults = ach_options();
    let mut ach = defaults.ach.clone();
    ach.m_max = 0.05;
    ach.m_horizon = 0.3;
    ach.horizon = 10;
    ControlOptions {
        rules: ach_redis::telemetry::ReadingRules {
            memory_capacity: Some(capacity_mb * 1024.0 * 1024.0),
            ..defaults.rules
        },
        telemetry: TelemetryConfig {
            beta,
            ..TelemetryConfig::paper()
        },
        ach,
        min_slot_keys,
        ..defaults
    }
}

fn ops_per_second(workload: &Workload, window: Duration) -> f64 {
    let before = workload.ops.load(Ordering::Relaxed);
    let started = Instant::now();
    std::thread::sleep(window);
    (workload.ops.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64()
}

/// The example's arguments: uniform keys, hot slots, keys per hot slot and `min_slot_keys`.
fn arguments() -> (usize, usize, usize, u64) {
    let arguments: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are counts"))
        .collect();
    let count = |index: usize, default: usize| arguments.get(index).copied().unwrap_or(default);
    (
        count(0, 20_000),
        count(1, 60),
        count(2, 500),
        count(3, 1) as u64,
    )
}

/// Prints the slots migrated, the time per slot and the keys a second while migrating, for
/// all slots and for those of at least 100 keys apart.
fn print_migrations(rebalanced: &Rebalanced, keys: usize) {
    let mut millis = Vec::new();
    let mut slot_keys = Vec::new();
    let (mut big_slots, mut big_keys, mut big_ms) = (0usize, 0u64, 0.0f64);
    for migration in rebalanced.migrations() {
        let ms = migration["millis"].as_f64().unwrap();
        let count = migration["keys"].as_u64().unwrap();
        millis.push(ms);
        slot_keys.push(count);
        if count >= 100 {
            big_slots += 1;
            big_keys += count;
            big_ms += ms;
        }
    }
    millis.sort_by(f64::total_cmp);
    let slots = millis.len();
    let total_ms: f64 = millis.iter().sum();
    let moved = rebalanced.moved;
    println!(
        "slots migrated: {slots}; keys moved: {moved} ({:.1} % of all keys)",
        100.0 * moved as f64 / keys as f64
    );
    if slots > 0 {
        println!(
            "time per slot: mean {:.1} ms, median {:.1} ms, max {:.1} ms; mean {:.0} keys per slot, {:.0} keys/s while migrating",
            total_ms / slots as f64,
            millis[slots / 2],
            millis[slots - 1],
            slot_keys.iter().sum::<u64>() as f64 / slots as f64,
            moved as f64 / (total_ms / 1000.0)
        );
    }
    if big_slots > 0 {
        println!(
            "slots of >= 100 keys: {big_slots}, mean {:.0} keys in {:.1} ms; smaller slots: {}, mean {:.1} ms",
            big_keys as f64 / big_slots as f64,
            big_ms / big_slots as f64,
            slots - big_slots,
            (total_ms - big_ms) / (slots - big_slots).max(1) as f64
        );
    }
}

fn main() {
    let (uniform, hot_slots, per_hot_slot, min_slot_keys) = arguments();
    let cluster = start_cluster(4);
    let data = Arc::new(DataSet::new(uniform, hot_slots, per_hot_slot, (0, 4095)));
    let loading = Instant::now();
    data.load(&cluster, 2);
    println!(
        "cluster of 4 masters; {} keys ({uniform} spread over all slots, {hot_slots} hot slots \
         of {per_hot_slot} keys on {}), {}-byte values, loaded in {:.1} s",
        data.keys.len(),
        cluster.servers()[0].address(),
        data.value_bytes,
        loading.elapsed().as_secs_f64()
    );
    let capacity_mb = used_memory_mb(&cluster.servers()[0]) * 1.05;
    let seed = cluster.seed();
    let mut connection = Cluster::connect(&seed, Duration::from_secs(5)).unwrap();
    println!(
        "\nstatus before (what `ach-redis status --cluster {seed} --memory-capacity-mb {capacity_mb:.1}` prints):"
    );
    print!("{}", status(&mut connection, options(capacity_mb, 1.0, 1)));

    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(600));
    std::thread::sleep(Duration::from_secs(1));
    let window = Duration::from_secs(5);
    let without = ops_per_second(&workload, window);

    let mut controller = Controller::new(options(capacity_mb, 0.6, min_slot_keys)).unwrap();
    let steps = LoopOptions {
        steps: 20,
        interval: Duration::from_millis(300),
    };
    let rebalanced = rebalance(
        &mut connection,
        &mut controller,
        steps,
        &workload,
        &mut std::io::sink(),
    );
    let after = ops_per_second(&workload, window);
    let report = workload.finish();
    let (during, elapsed) = (rebalanced.ops_per_second, rebalanced.seconds);
    println!(
        "\nrebalance: 20 steps, 300 ms apart, ACH (M_max 0.05, M_H 0.3, H 10), --min-slot-keys {min_slot_keys}, in {elapsed:.1} s"
    );
    print_migrations(&rebalanced, data.keys.len());
    println!(
        "client ops/s (2 clients, SET + checked GET): {without:.0} without a rebalance (5 s), \
         {during:.0} during the rebalance ({elapsed:.1} s), {after:.0} after (5 s)"
    );
    println!(
        "client errors: {}, stale reads: {}, ops: {}",
        report.errors, report.stale_reads, report.ops
    );
    println!("{}", machine());
    println!("\nstatus after:");
    print!("{}", status(&mut connection, options(capacity_mb, 1.0, 1)));
}
