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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ach_baselines::catalogue::{Catalogue, names};
use ach_redis::cluster::Cluster;
use ach_redis::control::{ControlOptions, Controller, live_ach_config, observe_once};
use ach_redis::migrate::MigrationOptions;
use ach_redis::rebalance::{LoopOptions, run};
use ach_redis::report::status_text;
use ach_redis::telemetry::ReadingRules;
use ach_telemetry::TelemetryConfig;
use workload::{DataSet, Workload, start_cluster, used_memory_mb};

fn options(capacity_mb: f64, beta: f64, min_slot_keys: u64) -> ControlOptions {
    let mut ach = live_ach_config();
    ach.m_max = 0.05;
    ach.m_horizon = 0.3;
    ach.horizon = 10;
    ControlOptions {
        algorithm: Catalogue::built_in()
            .get(names::ACH)
            .cloned()
            .expect("a built-in"),
        parameters: Vec::new(),
        weights: Vec::new(),
        idle_cpu: Vec::new(),
        request_capacity: Vec::new(),
        rules: ReadingRules {
            memory_capacity: Some(capacity_mb * 1024.0 * 1024.0),
            latency_target_usec: 1000.0,
            cpu_per_weight: 1.0,
        },
        telemetry: TelemetryConfig {
            beta,
            ..TelemetryConfig::paper()
        },
        ach,
        migration: MigrationOptions::default(),
        min_slot_keys,
        slot_stats: Default::default(),
        slot_split: Default::default(),
    }
}

fn status(seed: &str, capacity_mb: f64) -> String {
    let mut cluster = Cluster::connect(seed, Duration::from_secs(5)).unwrap();
    let controller = Controller::new(options(capacity_mb, 1.0, 1)).unwrap();
    let (_, observed) = observe_once(controller, &mut cluster, Duration::from_secs(1)).unwrap();
    status_text(&observed.snapshot, Some(&observed))
}

fn ops_per_second(workload: &Workload, window: Duration) -> f64 {
    let before = workload.ops.load(Ordering::Relaxed);
    let started = Instant::now();
    std::thread::sleep(window);
    (workload.ops.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let arguments: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are counts"))
        .collect();
    let uniform = arguments.first().copied().unwrap_or(20_000);
    let hot_slots = arguments.get(1).copied().unwrap_or(60);
    let per_hot_slot = arguments.get(2).copied().unwrap_or(500);
    let min_slot_keys = arguments.get(3).copied().unwrap_or(1) as u64;

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
    println!(
        "\nstatus before (what `ach-redis status --cluster {seed} --memory-capacity-mb {capacity_mb:.1}` prints):"
    );
    print!("{}", status(&seed, capacity_mb));

    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(600));
    std::thread::sleep(Duration::from_secs(1));
    let window = Duration::from_secs(5);
    let without = ops_per_second(&workload, window);

    let mut connection = Cluster::connect(&seed, Duration::from_secs(5)).unwrap();
    let mut controller = Controller::new(options(capacity_mb, 0.6, min_slot_keys)).unwrap();
    let stop = AtomicBool::new(false);
    let mut log = Vec::new();
    let ops_before = workload.ops.load(Ordering::Relaxed);
    let started = Instant::now();
    let moved = run(
        &mut connection,
        &mut controller,
        LoopOptions {
            steps: 20,
            interval: Duration::from_millis(300),
        },
        &MigrationOptions::default(),
        &stop,
        &mut log,
        &mut std::io::sink(),
    )
    .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let during = (workload.ops.load(Ordering::Relaxed) - ops_before) as f64 / elapsed;
    let after = ops_per_second(&workload, window);
    let report = workload.finish();

    let mut millis = Vec::new();
    let mut keys = Vec::new();
    let (mut big_slots, mut big_keys, mut big_ms) = (0usize, 0u64, 0.0f64);
    for line in String::from_utf8(log).unwrap().lines() {
        let step: serde_json::Value = serde_json::from_str(line).unwrap();
        for migration in step["outcome"]["migrations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let ms = migration["millis"].as_f64().unwrap();
            let count = migration["keys"].as_u64().unwrap();
            millis.push(ms);
            keys.push(count);
            if count >= 100 {
                big_slots += 1;
                big_keys += count;
                big_ms += ms;
            }
        }
    }
    millis.sort_by(f64::total_cmp);
    let slots = millis.len();
    let total_ms: f64 = millis.iter().sum();
    println!(
        "\nrebalance: 20 steps, 300 ms apart, ACH (M_max 0.05, M_H 0.3, H 10), --min-slot-keys {min_slot_keys}, in {elapsed:.1} s"
    );
    println!(
        "slots migrated: {slots}; keys moved: {moved} ({:.1} % of all keys)",
        100.0 * moved as f64 / data.keys.len() as f64
    );
    if slots > 0 {
        println!(
            "time per slot: mean {:.1} ms, median {:.1} ms, max {:.1} ms; mean {:.0} keys per slot, {:.0} keys/s while migrating",
            total_ms / slots as f64,
            millis[slots / 2],
            millis[slots - 1],
            keys.iter().sum::<u64>() as f64 / slots as f64,
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
    println!(
        "client ops/s (2 clients, SET + checked GET): {without:.0} without a rebalance (5 s), \
         {during:.0} during the rebalance ({elapsed:.1} s), {after:.0} after (5 s)"
    );
    println!(
        "client errors: {}, stale reads: {}, ops: {}",
        report.errors, report.stale_reads, report.ops
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine: {} cores, load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("\nstatus after:");
    print!("{}", status(&seed, capacity_mb));
}
