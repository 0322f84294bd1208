//! What the examples share: ACH's options, a rebalance under the clients' load with its log,
//! and the machine's line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ach_baselines::catalogue::{Catalogue, names};
use ach_redis::cluster::Cluster;
use ach_redis::control::{ControlOptions, Controller, observe_once};
use ach_redis::migrate::MigrationOptions;
use ach_redis::rebalance::{LoopOptions, run};
use ach_redis::report::status_text;

use crate::workload::Workload;

/// ACH's options with the command line's defaults (`rebalance --algorithm ach`).
pub fn ach_options() -> ControlOptions {
    let ach = Catalogue::built_in()
        .get(names::ACH)
        .cloned()
        .expect("a built-in");
    ControlOptions::new(ach)
}

/// What `ach-redis status` prints for the cluster of `connection` under `options`.
pub fn status(connection: &mut Cluster, options: ControlOptions) -> String {
    let controller = Controller::new(options).unwrap();
    let (_, observed) = observe_once(controller, connection, Duration::from_secs(1)).unwrap();
    status_text(&observed.snapshot, Some(&observed))
}

/// A rebalance run while the clients of a workload ran.
pub struct Rebalanced {
    /// Keys moved.
    pub moved: u64,
    /// How long it took, in seconds.
    pub seconds: f64,
    /// The clients' operations a second meanwhile.
    pub ops_per_second: f64,
    /// Its log: one JSON value a line.
    pub log: Vec<serde_json::Value>,
}

impl Rebalanced {
    /// Every migration of the log, in order.
    pub fn migrations(&self) -> impl Iterator<Item = &serde_json::Value> {
        self.log.iter().flat_map(|step| {
            step["outcome"]["migrations"]
                .as_array()
                .into_iter()
                .flatten()
        })
    }
}

/// Runs `options.steps` steps of `rebalance` with `controller` on `connection` while
/// `workload`'s clients run, its progress lines on `progress`.
pub fn rebalance(
    connection: &mut Cluster,
    controller: &mut Controller,
    options: LoopOptions,
    workload: &Workload,
    progress: &mut dyn std::io::Write,
) -> Rebalanced {
    let stop = AtomicBool::new(false);
    let mut log = Vec::new();
    let ops_before = workload.ops.load(Ordering::Relaxed);
    let started = Instant::now();
    let migration = MigrationOptions::default();
    let moved = run(
        connection, controller, options, &migration, &stop, &mut log, progress,
    );
    let seconds = started.elapsed().as_secs_f64();
    let ops = workload.ops.load(Ordering::Relaxed) - ops_before;
    Rebalanced {
        moved: moved.unwrap(),
        seconds,
        ops_per_second: ops as f64 / seconds,
        log: String::from_utf8(log)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
    }
}

/// The machine's cores and load average, to print beside a live figure.
pub fn machine() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "machine: {} cores, load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}
