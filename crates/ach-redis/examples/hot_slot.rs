//! The measurement of issue 21: a real 4-primary cluster with one hot slot of few keys that
//! takes 30 % of the requests, clients reading and writing, and `rebalance --algorithm ach`
//! with the defaults. Prints what the servers themselves report before and after (cpu per
//! node from `INFO cpu`, and per slot from `CLUSTER SLOT-STATS` on Valkey), the keys moved,
//! time per migration, atomic against key-by-key migrations, the clients' ops/s and errors,
//! the budget over every window and `redis-cli --cluster check`.
//!
//! ```text
//! cargo run -p ach-redis --example hot_slot -- valkey|redis [UNIFORM_KEYS] [HOT_KEYS] [STEPS]
//! ```
//!
//! `valkey` starts `valkey-server` (found as the tests find it: ACH_VALKEY_SERVER, PATH, the
//! cache folder) with the valkey backend and slot statistics turned on; `redis` starts
//! Debian's `redis-server` with the redis backend. Servers are children on free loopback
//! ports, stopped when it ends.

#[path = "../tests/common/workload.rs"]
mod workload;

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ach_redis::cluster::Cluster;
use ach_redis::control::{Controller, imbalance, live_ach_config};
use ach_redis::local::{LocalCluster, ServerKind};
use ach_redis::rebalance::LoopOptions;
use ach_redis::telemetry::parse_info;
use common::{Rebalanced, ach_options, machine, rebalance, status};
use workload::{DataSet, Workload, assert_check_clean, start_cluster_of, wrong_values};

/// Cpu seconds every server used so far (`INFO cpu`), and per-slot `cpu-usec` summed per
/// server (Valkey with slot statistics), by address.
fn server_cpu(cluster: &LocalCluster) -> BTreeMap<String, (f64, f64)> {
    let mut out = BTreeMap::new();
    for server in cluster.servers() {
        let mut connection = server.connection().unwrap();
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .query(&mut connection)
            .unwrap();
        let fields = parse_info(&info);
        let number = |name: &str| fields[name].trim().parse::<f64>().unwrap();
        let cpu = number("used_cpu_sys") + number("used_cpu_user");
        let slot_usec = if server.kind() == ServerKind::Valkey {
            let reply: redis::Value = redis::cmd("CLUSTER")
                .arg("SLOT-STATS")
                .arg("SLOTSRANGE")
                .arg(0)
                .arg(16383)
                .query(&mut connection)
                .unwrap();
            ach_redis::backend::valkey::parse_slot_stats(&reply)
                .unwrap()
                .iter()
                .filter_map(|s| s.cpu_usec)
                .sum::<u64>() as f64
        } else {
            f64::NAN
        };
        out.insert(server.address(), (cpu, slot_usec));
    }
    out
}

/// Over `window`: client ops/s, and per server (cores from INFO, cores from slot stats).
fn measure(
    cluster: &LocalCluster,
    workload: &Workload,
    window: Duration,
) -> (f64, Vec<(String, f64, f64)>) {
    let ops = workload.ops.load(Ordering::Relaxed);
    let before = server_cpu(cluster);
    let started = Instant::now();
    std::thread::sleep(window);
    let after = server_cpu(cluster);
    let seconds = started.elapsed().as_secs_f64();
    let ops = (workload.ops.load(Ordering::Relaxed) - ops) as f64 / seconds;
    let per_node = after
        .iter()
        .map(|(address, (cpu, usec))| {
            let (cpu0, usec0) = before[address];
            (
                address.clone(),
                (cpu - cpu0) / seconds,
                (usec - usec0) / 1e6 / seconds,
            )
        })
        .collect();
    (ops, per_node)
}

fn report(name: &str, hot: &str, ops: f64, per_node: &[(String, f64, f64)]) {
    for (label, column) in [("INFO cpu", 1usize), ("slot cpu-usec", 2)] {
        let loads: Vec<f64> = per_node
            .iter()
            .map(|n| if column == 1 { n.1 } else { n.2 })
            .collect();
        if loads.iter().any(|l| l.is_nan()) {
            continue;
        }
        let total: f64 = loads.iter().sum();
        let hot_cpu = per_node
            .iter()
            .zip(&loads)
            .find(|(n, _)| n.0 == hot)
            .map_or(0.0, |(_, l)| *l);
        let cells: Vec<String> = loads.iter().map(|l| format!("{l:.3}")).collect();
        println!(
            "{name}: {label} per node [{}] cores; hot node's share {:.3}; D = max - mean {:.3}",
            cells.join(", "),
            hot_cpu / total,
            imbalance(&loads)
        );
    }
    println!("{name}: client ops/s {ops:.0}");
}

/// The example's arguments: the server, and the uniform keys, hot keys and steps.
fn arguments() -> (ServerKind, usize, usize, u64) {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let kind = match arguments.first().map(String::as_str) {
        Some("valkey") => ServerKind::Valkey,
        Some("redis") => ServerKind::Redis,
        _ => {
            eprintln!("usage: hot_slot valkey|redis [UNIFORM_KEYS] [HOT_KEYS] [STEPS]");
            std::process::exit(2);
        }
    };
    let count = |index: usize, default: usize| {
        arguments
            .get(index)
            .map_or(default, |a| a.parse().expect("a count"))
    };
    (kind, count(1, 40_000), count(2, 20), count(3, 20) as u64)
}

/// The migrations of a rebalance: how many of each method and how many failed, and the
/// slots and times of those that succeeded.
#[derive(Default)]
struct MigrationFigures {
    atomic: usize,
    by_keys: usize,
    failed: usize,
    slots: usize,
    millis: f64,
    /// Each successful migration's time in milliseconds, in ascending order.
    per_migration: Vec<f64>,
}

impl MigrationFigures {
    fn of(rebalanced: &Rebalanced) -> MigrationFigures {
        let mut figures = MigrationFigures::default();
        for migration in rebalanced.migrations() {
            match migration["method"].as_str() {
                Some("atomic") => figures.atomic += 1,
                _ => figures.by_keys += 1,
            }
            if migration["outcome"] != "success" {
                figures.failed += 1;
                continue;
            }
            let ms = migration["millis"].as_f64().unwrap_or(0.0);
            figures.slots += migration["slots"].as_array().map_or(0, Vec::len);
            figures.millis += ms;
            figures.per_migration.push(ms);
        }
        figures.per_migration.sort_by(f64::total_cmp);
        figures
    }
}

/// Prints the rebalance's keys, migrations and the budget it spent at its worst step and
/// over its worst window.
fn print_rebalance(rebalanced: &Rebalanced, steps: u64, keys: usize) {
    let ach = live_ach_config();
    let horizon = ach.horizon;
    let fractions: Vec<f64> = rebalanced
        .log
        .iter()
        .map(|step| step["moved_fraction"].as_f64().unwrap_or(0.0))
        .collect();
    let worst_window = (0..fractions.len())
        .map(|start| {
            fractions[start..(start + horizon).min(fractions.len())]
                .iter()
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    let worst_step = fractions.iter().copied().fold(0.0, f64::max);
    let figures = MigrationFigures::of(rebalanced);
    println!(
        "\nrebalance --algorithm ach (defaults: AchConfig::live(), M_max {}, M_H {}, H {}): \
         {steps} steps 500 ms apart in {:.1} s",
        ach.m_max, ach.m_horizon, horizon, rebalanced.seconds
    );
    println!(
        "keys moved {} ({:.2} % of all keys) in {} slots; migrations: {} atomic, \
         {} key by key, {} not successful",
        rebalanced.moved,
        100.0 * rebalanced.moved as f64 / keys as f64,
        figures.slots,
        figures.atomic,
        figures.by_keys,
        figures.failed
    );
    let per_migration = &figures.per_migration;
    if !per_migration.is_empty() {
        println!(
            "time per migration: median {:.1} ms, max {:.1} ms; per slot {:.2} ms",
            per_migration[per_migration.len() / 2],
            per_migration[per_migration.len() - 1],
            figures.millis / figures.slots.max(1) as f64
        );
    }
    println!(
        "budget: worst step {worst_step:.4} (M_max {}), worst window of {horizon} steps \
         {worst_window:.4} (M_H {})",
        ach.m_max, ach.m_horizon
    );
}

fn main() {
    let (kind, uniform, hot_keys, steps) = arguments();
    let cluster = start_cluster_of(kind, 4);
    let data = Arc::new(DataSet::with_hot_slot(uniform, hot_keys, (0, 4095)));
    data.load(&cluster, 2);
    let hot = cluster.servers()[0].address();
    let seed = cluster.seed();
    println!(
        "{} cluster of 4 primaries; {} keys ({uniform} over all slots, {hot_keys} in slot {} \
         on {hot}); 2 clients, 30 % of their writes and checked reads to the hot slot",
        kind.name(),
        data.keys.len(),
        data.hot_slots[0]
    );
    let mut connection = Cluster::connect(&seed, Duration::from_secs(5)).unwrap();
    if kind == ServerKind::Valkey {
        let snapshot = connection.snapshot().unwrap();
        connection
            .backend()
            .enable_slot_stats(&mut connection, &snapshot)
            .unwrap();
    }
    let workload = Workload::start_hot(&cluster, &data, 2, Duration::from_secs(900), 30);
    std::thread::sleep(Duration::from_secs(2));
    let window = Duration::from_secs(5);
    let (ops, before) = measure(&cluster, &workload, window);
    report("before", &hot, ops, &before);
    println!("\nstatus before (what `ach-redis status --cluster {seed}` prints):");
    print!("{}", status(&mut connection, ach_options()));

    let mut controller = Controller::new(ach_options()).unwrap();
    let options = LoopOptions {
        steps,
        interval: Duration::from_millis(500),
    };
    let rebalanced = rebalance(
        &mut connection,
        &mut controller,
        options,
        &workload,
        &mut std::io::stderr(),
    );
    let (ops_after, after) = measure(&cluster, &workload, window);
    let result = workload.finish();
    print_rebalance(&rebalanced, steps, data.keys.len());
    println!(
        "client ops/s during the rebalance {:.0}",
        rebalanced.ops_per_second
    );
    report("after", &hot, ops_after, &after);
    let wrong = wrong_values(&cluster, &result.last_written);
    println!(
        "clients: {} ops, {} errors, {} stale reads; keys lost or stale afterwards: {}",
        result.ops,
        result.errors,
        result.stale_reads,
        wrong.len()
    );
    assert_check_clean(&cluster);
    println!("redis-cli --cluster check: clean");
    println!("{}", machine());
    println!("\nstatus after:");
    print!("{}", status(&mut connection, ach_options()));
}
