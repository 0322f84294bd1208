//! What rebalances the cluster during an arm: nothing, `redis-cli --cluster rebalance` once,
//! or `ach-redis`'s rebalance loop on a thread of its own.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ach_redis::backend::SlotStatsReading;
use ach_redis::cluster::Snapshot;
use ach_redis::control::{ControlOptions, Controller, SlotSplit};
use ach_redis::local::redis_cli_binary;
use ach_redis::migrate::MigrationOptions;
use ach_redis::rebalance::{self, LoopOptions};
use ach_redis::security::Security;

use super::Arm;
use super::cluster::connect;
use super::observer::{CpuRules, control_options};
use crate::cadence::{LoopCadence, step_events};
use crate::error::ExperimentError;

/// A `Write` into shared memory (the rebalance loop's step log).
#[derive(Clone, Default)]
pub(super) struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What rebalances the cluster during an arm.
pub(super) enum Rebalancer {
    None,
    Loop(JoinHandle<Result<u64, ExperimentError>>, SharedBuffer),
    RedisCli(std::process::Child),
}

/// Where and how long a rebalancer runs.
pub(super) struct RebalancerSetup<'a> {
    pub(super) seed: &'a str,
    pub(super) weights: &'a [(String, f64)],
    pub(super) snapshot: &'a Snapshot,
    pub(super) steps: u32,
    pub(super) interval: Duration,
    /// How the loop reads a master's cpu part.
    pub(super) cpu: &'a CpuRules,
    /// How to log in to the cluster: `redis-cli` gets the password in `REDISCLI_AUTH`.
    pub(super) security: &'a Security,
    /// How the loop reads the per-slot statistics.
    pub(super) slot_stats: SlotStatsReading,
    /// Which per-slot counter splits a master's load among its slots.
    pub(super) slot_split: SlotSplit,
    /// ACH's configuration.
    pub(super) ach: &'a ach_control::AchConfig,
    /// The load tracker's smoothing and composite.
    pub(super) telemetry: ach_telemetry::TelemetryConfig,
    /// Groups of fewer keys move key by key (Valkey 9).
    pub(super) atomic_from_keys: u64,
}

/// Starts the arm's rebalancer; `stop` ends the rebalance loop.
pub(super) fn start_rebalancer(
    arm: &Arm,
    setup: &RebalancerSetup<'_>,
    stop: Arc<AtomicBool>,
) -> Result<Rebalancer, ExperimentError> {
    let RebalancerSetup {
        seed,
        weights,
        snapshot,
        steps,
        interval,
        cpu,
        security,
        slot_stats,
        slot_split,
        ach,
        telemetry,
        atomic_from_keys,
    } = *setup;
    if *arm == Arm::RedisCli {
        let mut command = Command::new(redis_cli_binary()?);
        command.args(["--cluster", "rebalance", seed, "--cluster-weight"]);
        for (address, weight) in weights {
            let master = snapshot
                .masters
                .iter()
                .find(|m| &m.address == address)
                .ok_or_else(|| ExperimentError::UnknownMaster(address.clone()))?;
            command.arg(format!("{}={weight}", master.id));
        }
        command.arg("--cluster-use-empty-masters");
        security.apply_to_redis_cli(&mut command);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ExperimentError::Spawn {
                program: "redis-cli",
                source,
            })?;
        return Ok(Rebalancer::RedisCli(child));
    }
    let Some(algorithm) = arm.rebalancer() else {
        return Ok(Rebalancer::None);
    };
    let buffer = SharedBuffer::default();
    let mut log = buffer.clone();
    let seed = seed.to_string();
    let base = control_options(algorithm, weights.to_vec(), cpu);
    let options = ControlOptions {
        slot_stats,
        slot_split,
        ach: ach.clone(),
        telemetry,
        migration: MigrationOptions {
            atomic_from_keys,
            ..base.migration
        },
        ..base
    };
    let handle = std::thread::spawn(move || {
        let mut cluster = connect(&seed)?;
        let mut controller = Controller::new(options.clone())?;
        Ok(rebalance::run(
            &mut cluster,
            &mut controller,
            LoopOptions {
                steps: u64::from(steps),
                interval,
            },
            &options.migration,
            &stop,
            &mut log,
            &mut std::io::sink(),
        )?)
    });
    Ok(Rebalancer::Loop(handle, buffer))
}

/// Stops the rebalancer; returns its notes and its log (the rebalance loop's JSON lines, or
/// redis-cli's output).
pub(super) fn finish_rebalancer(
    rebalancer: Rebalancer,
    stop: &AtomicBool,
) -> (Vec<String>, String) {
    stop.store(true, Ordering::SeqCst);
    match rebalancer {
        Rebalancer::None => (Vec::new(), String::new()),
        Rebalancer::Loop(handle, buffer) => finish_loop(handle, &buffer),
        Rebalancer::RedisCli(child) => finish_redis_cli(child),
    }
}

/// Joins the rebalance loop; its notes are its outcome and every step's errors.
fn finish_loop(
    handle: JoinHandle<Result<u64, ExperimentError>>,
    buffer: &SharedBuffer,
) -> (Vec<String>, String) {
    let mut notes = Vec::new();
    match handle.join() {
        Ok(Ok(keys)) => notes.push(format!("rebalance loop copied {keys} keys")),
        Ok(Err(error)) => notes.push(format!("rebalance loop failed: {error}")),
        Err(_) => notes.push("rebalance loop panicked".into()),
    }
    let log = buffer.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let text = String::from_utf8_lossy(&log).into_owned();
    let steps = step_events(&text);
    for step in &steps {
        for error in step["outcome"]["errors"].as_array().into_iter().flatten() {
            notes.push(format!("step {}: {}", step["step"], error));
        }
    }
    notes.push(LoopCadence::from_steps(&steps).note());
    (notes, text)
}

/// Waits for redis-cli, which finishes the slots it planned; after 300 s it is stopped by PID
/// (the open slot it may leave is closed by `fix` afterwards).
fn finish_redis_cli(mut child: std::process::Child) -> (Vec<String>, String) {
    let mut notes = Vec::new();
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut output = String::new();
                if let Some(mut out) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut out, &mut output);
                }
                notes.push(format!(
                    "redis-cli --cluster rebalance exited with {status}; {} slot batches moved",
                    crate::listing::transfers(&output).len()
                ));
                if !status.success() {
                    let tail: Vec<&str> = output.lines().rev().take(3).collect();
                    notes.push(format!("redis-cli output ends: {}", tail.join(" | ")));
                }
                return (notes, output);
            }
            Ok(None) if started.elapsed() < Duration::from_secs(300) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                notes.push("redis-cli still running after 300 s: stopped by PID".into());
                return (notes, String::new());
            }
        }
    }
}
