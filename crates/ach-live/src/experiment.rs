//! The experiment: one freshly loaded cluster per arm and repeat, the same request sequence,
//! measurement every step, every key checked at the end.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::control::imbalance;
use ach_redis::control::{ControlOptions, Controller, live_ach_config};
use ach_redis::local::{LocalCluster, redis_cli_binary};
use ach_redis::migrate::{MigrationOptions, fix};
use ach_redis::rebalance::{self, LoopOptions};
use ach_redis::telemetry::{NodeSample, ReadingRules, reading};
use ach_sim::algorithms::{Catalogue, Entry, names};
use ach_sim::config::NodeClass;
use ach_telemetry::{LoadTracker, TelemetryConfig};

use crate::cgroup::{CpuLimiter, CpuQuota};
use crate::workload::{self, ClientReport, Shared, WorkloadConfig, key_name};

/// One arm of the experiment: what rebalances the cluster while the workload runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arm {
    /// `redis-cli --cluster rebalance` with the capacity weights, once at the start.
    RedisCli,
    /// An algorithm of the catalogue, by its name: A0 Static-W is the cluster as created
    /// (nothing rebalances); any other runs through `ach-redis`'s rebalance loop (ACH with its
    /// live configuration).
    Algorithm(String),
}

/// The name of the `redis-cli --cluster rebalance` arm.
pub const REDIS_CLI: &str = "redis-cli";

impl Arm {
    /// The arms of a default run, in report order: A0, redis-cli, A2, A3, ACH.
    pub fn defaults() -> Vec<Arm> {
        let algorithm = |name: &str| Arm::Algorithm(name.to_string());
        vec![
            algorithm(names::STATIC_W),
            Arm::RedisCli,
            algorithm(names::DYNAMIC_R),
            algorithm(names::BOUNDED_LOADS),
            algorithm(names::ACH),
        ]
    }

    /// The name in outputs and in the algorithm registry.
    pub fn name(&self) -> &str {
        match self {
            Arm::RedisCli => REDIS_CLI,
            Arm::Algorithm(name) => name,
        }
    }

    /// Parses a name of `--algorithms`: `redis-cli`, or a name, label or alias of the
    /// catalogue (case-insensitive; `a0`, `static-w` and `none` are the same). An algorithm
    /// that routes requests its own way (CH-BL) cannot run on a Redis cluster.
    pub fn parse(text: &str) -> Result<Arm, String> {
        let text = text.trim();
        if [REDIS_CLI, "redis-cli-rebalance"]
            .iter()
            .any(|name| name.eq_ignore_ascii_case(text))
        {
            return Ok(Arm::RedisCli);
        }
        let catalogue = Catalogue::built_in();
        let live: Vec<&str> = catalogue
            .iter()
            .filter(|e| !e.routes())
            .map(|e| e.name())
            .collect();
        let expected = format!("expected a list of {REDIS_CLI}, {}", live.join(", "));
        match catalogue.find(text) {
            Ok(entry) if !entry.routes() => Ok(Arm::Algorithm(entry.name().to_string())),
            Ok(entry) => Err(format!(
                "--algorithms: {} routes requests its own way and cannot run on a Redis \
                 cluster; {expected}",
                entry.name()
            )),
            Err(_) => Err(format!(
                "--algorithms: unknown algorithm {text:?}; {expected} (case-insensitive; a0 to \
                 a3 for the paper's baselines)"
            )),
        }
    }

    /// The catalogue entry that rebalances the cluster, or `None` when nothing does.
    fn rebalancer(&self) -> Option<Entry> {
        match self {
            Arm::RedisCli => None,
            Arm::Algorithm(name) if name == names::STATIC_W => None,
            Arm::Algorithm(name) => Catalogue::built_in().get(name).cloned(),
        }
    }
}

impl serde::Serialize for Arm {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Everything the experiment is a function of (besides the machine).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveConfig {
    /// Masters in the cluster.
    pub nodes: usize,
    /// Keys loaded.
    pub keys: usize,
    /// Seconds of workload per arm.
    pub duration_s: u64,
    /// The arms, in order.
    pub arms: Vec<Arm>,
    /// Seed of repeat 0 (repeat `r` uses `seed + r`).
    pub seed: u64,
    /// Repeats of every arm.
    pub repeats: u32,
    /// Output folder.
    pub out: PathBuf,
    /// Client threads.
    pub clients: usize,
    /// Requests per second of all clients before the load step.
    pub rate: f64,
    /// CPUs of a strong node's quota (a medium node gets 0.55 of it, a weak one 0.25).
    pub cpu_per_strong_node: f64,
    /// Length of a measurement and control step, in milliseconds.
    pub interval_ms: u64,
}

impl Default for LiveConfig {
    fn default() -> LiveConfig {
        LiveConfig {
            nodes: 6,
            keys: 100_000,
            duration_s: 60,
            arms: Arm::defaults(),
            seed: 42,
            repeats: 1,
            out: PathBuf::from("results/live"),
            clients: 4,
            rate: 6000.0,
            cpu_per_strong_node: 0.2,
            interval_ms: 1000,
        }
    }
}

impl LiveConfig {
    /// Checks every field; the message names the option, its value and the rule.
    pub fn validate(&self) -> Result<(), String> {
        let rule = |ok: bool, text: String| if ok { Ok(()) } else { Err(text) };
        rule(
            (2..=64).contains(&self.nodes),
            format!("--nodes {}: must be 2 to 64", self.nodes),
        )?;
        rule(
            self.keys >= 100,
            format!("--keys {}: must be at least 100", self.keys),
        )?;
        rule(
            self.duration_s >= 3,
            format!("--duration-s {}: must be at least 3", self.duration_s),
        )?;
        rule(
            !self.arms.is_empty(),
            "--algorithms: the list is empty".into(),
        )?;
        rule(
            self.repeats >= 1,
            format!("--repeats {}: must be at least 1", self.repeats),
        )?;
        rule(
            (1..=64).contains(&self.clients),
            format!("--clients {}: must be 1 to 64", self.clients),
        )?;
        rule(
            self.rate.is_finite() && self.rate > 0.0,
            format!(
                "--rate {}: must be a positive number of requests per second",
                self.rate
            ),
        )?;
        rule(
            self.cpu_per_strong_node.is_finite() && self.cpu_per_strong_node > 0.0,
            format!(
                "--cpu-per-strong-node {}: must be positive",
                self.cpu_per_strong_node
            ),
        )?;
        rule(
            (100..=60_000).contains(&self.interval_ms),
            format!("--interval-ms {}: must be 100 to 60000", self.interval_ms),
        )?;
        let steps = self.steps();
        rule(
            steps >= 3,
            format!(
                "--duration-s {}: gives {steps} steps of --interval-ms {}; need at least 3",
                self.duration_s, self.interval_ms
            ),
        )
    }

    /// Measurement steps per arm.
    pub fn steps(&self) -> u32 {
        (self.duration_s * 1000 / self.interval_ms) as u32
    }

    /// The capacity class of node `i` (start order): the paper's 3 : 4 : 3 mix of strong,
    /// medium and weak, strong first.
    pub fn classes(&self) -> Vec<NodeClass> {
        let strong = ((self.nodes as f64) * 0.3).round().max(1.0) as usize;
        let weak = ((self.nodes as f64) * 0.3).round().max(1.0) as usize;
        (0..self.nodes)
            .map(|i| {
                if i < strong {
                    NodeClass::Strong
                } else if i < self.nodes.saturating_sub(weak) {
                    NodeClass::Medium
                } else {
                    NodeClass::Weak
                }
            })
            .collect()
    }

    /// The workload of repeat `repeat`.
    pub fn workload(&self, repeat: u32) -> WorkloadConfig {
        WorkloadConfig {
            keys: self.keys,
            clients: self.clients,
            rate: self.rate,
            duration_s: self.duration_s as f64,
            seed: self.seed + u64::from(repeat),
            zipf_s: 1.0,
            write_fraction: 0.3,
            hot_phase: (0.25, 0.5),
            hot_share: 0.3,
            hot_keys: 16,
            step_at: 0.5,
            step_factor: 3200.0 / 1437.5,
        }
    }

    /// The warm-up steps left out of D-bar: the first tenth of the run (at least 2: the first
    /// observation has no cpu reading yet).
    pub fn warmup(&self) -> u32 {
        (self.steps() / 10).max(2)
    }
}

/// One measured step.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepRecord {
    /// Step index.
    pub t: u32,
    /// Composite load of every master (by address order), from its own INFO.
    pub loads: Vec<f64>,
    /// `D(t) = max l - mean l`; `None` when the cluster could not be observed (degraded).
    pub d: Option<f64>,
    /// Keys in slots that changed owner since the start.
    pub keys_moved: u64,
    /// Client errors in this step.
    pub client_errors: u32,
    /// Client latency p50 per master, in milliseconds (`None`: no request).
    pub p50_ms: Vec<Option<f64>>,
    /// Client latency p99 per master, in milliseconds.
    pub p99_ms: Vec<Option<f64>>,
}

/// One master of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeInfo {
    /// `host:port`.
    pub address: String,
    /// Capacity class.
    pub class: NodeClass,
    /// CPU quota in microseconds per period, when set.
    pub quota_us: Option<u64>,
    /// Client latency p50 over the run, in milliseconds.
    pub p50_ms: Option<f64>,
    /// Client latency p99 over the run, in milliseconds.
    pub p99_ms: Option<f64>,
}

/// One arm in one repeat.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmRun {
    /// The arm's name.
    pub algorithm: String,
    /// Repeat index.
    pub repeat: u32,
    /// Seed of the workload.
    pub seed: u64,
    /// Mean of `D(t)` after the warm-up.
    pub d_bar: f64,
    /// Keys in slots that changed owner, in all.
    pub keys_moved: u64,
    /// Requests that failed.
    pub client_errors: u64,
    /// Reads that returned another value than the last one written.
    pub stale_reads: u64,
    /// Keys missing at the end.
    pub lost_keys: u64,
    /// Keys holding another value than the last one written, at the end.
    pub stale_keys: u64,
    /// Requests answered.
    pub requests: u64,
    /// Client latency p50 over all requests, in milliseconds.
    pub p50_ms: f64,
    /// Client latency p99 over all requests, in milliseconds.
    pub p99_ms: f64,
    /// The masters.
    pub nodes: Vec<NodeInfo>,
    /// Every step.
    pub steps: Vec<StepRecord>,
    /// The first client error messages.
    pub error_samples: Vec<String>,
    /// What the rebalancer reported (errors, redis-cli's exit).
    pub rebalancer_notes: Vec<String>,
    /// The rebalance loop's step log (JSON lines) or redis-cli's output; written beside the
    /// run's file, not into it.
    #[serde(skip)]
    pub rebalance_log: String,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveResults {
    /// The configuration.
    pub config: LiveConfig,
    /// How CPU quotas were set: `cgroup-v1`, `cgroup-v2` or `none`.
    pub cpu_limits: String,
    /// Why quotas could not be set, when they could not.
    pub cpu_limits_note: Option<String>,
    /// Every arm and repeat, in the order run.
    pub runs: Vec<ArmRun>,
    /// Load average of the machine before and after (from `/proc/loadavg`).
    pub load_average: (String, String),
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs every arm of every repeat; reports progress on `progress`. `stop` ends the current arm
/// early (Ctrl-C); what was measured is still returned.
pub fn run(
    config: &LiveConfig,
    stop: &AtomicBool,
    progress: &mut dyn Write,
) -> Result<LiveResults, String> {
    config.validate()?;
    let limiter = CpuLimiter::detect();
    let note = match &limiter {
        CpuLimiter::Unavailable(reason) => {
            let _ = writeln!(
                progress,
                "warning: CPU quotas cannot be set ({reason}); every node gets the whole machine \
                 and the capacities are only declared (weights)"
            );
            Some(reason.clone())
        }
        _ => None,
    };
    let before = load_average();
    let mut runs = Vec::new();
    let total = config.arms.len() * config.repeats as usize;
    for repeat in 0..config.repeats {
        for arm in &config.arms {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let index = runs.len() + 1;
            let _ = writeln!(
                progress,
                "[{index}/{total}] {} (repeat {repeat}, seed {}): starting a {}-node cluster",
                arm.name(),
                config.seed + u64::from(repeat),
                config.nodes
            );
            let run = run_arm(config, arm.clone(), repeat, &limiter, stop, progress)
                .map_err(|e| format!("{} (repeat {repeat}): {e}", arm.name()))?;
            let _ = writeln!(
                progress,
                "[{index}/{total}] {}: D-bar {:.4}, keys moved {}, client errors {}, lost {}, stale {}, p99 {:.2} ms",
                arm.name(),
                run.d_bar,
                run.keys_moved,
                run.client_errors,
                run.lost_keys,
                run.stale_keys,
                run.p99_ms
            );
            runs.push(run);
        }
    }
    Ok(LiveResults {
        config: config.clone(),
        cpu_limits: limiter.name().into(),
        cpu_limits_note: note,
        runs,
        load_average: (before, load_average()),
    })
}

/// A local cluster whose servers run under CPU quotas. Field order matters: the servers are
/// stopped (dropped) before their cgroups are removed.
struct LiveCluster {
    cluster: LocalCluster,
    _quotas: Vec<CpuQuota>,
    nodes: Vec<NodeInfo>,
}

fn start_cluster(config: &LiveConfig, limiter: &CpuLimiter) -> Result<LiveCluster, String> {
    let cluster = LocalCluster::start(config.nodes).map_err(|e| e.to_string())?;
    let classes = config.classes();
    let mut quotas = Vec::new();
    let mut nodes = Vec::new();
    for (server, class) in cluster.servers().iter().zip(&classes) {
        let quota_us = match limiter {
            CpuLimiter::Unavailable(_) => None,
            _ => {
                let name = format!("ach-live-{}-{}", std::process::id(), server.port());
                let quota = limiter.limit(
                    &name,
                    server.pid(),
                    class.capacity() * config.cpu_per_strong_node,
                )?;
                let us = quota.quota_us();
                quotas.push(quota);
                Some(us)
            }
        };
        nodes.push(NodeInfo {
            address: server.address(),
            class: *class,
            quota_us,
            p50_ms: None,
            p99_ms: None,
        });
    }
    Ok(LiveCluster {
        cluster,
        _quotas: quotas,
        nodes,
    })
}

fn connect(seed: &str) -> Result<Cluster, String> {
    Cluster::connect(seed, Duration::from_secs(10)).map_err(|e| e.to_string())
}

/// Writes version 0 of every key, pipelined per owner.
fn load_keys(cluster: &mut Cluster, snapshot: &Snapshot, keys: usize) -> Result<(), String> {
    let mut per_node: Vec<Vec<usize>> = vec![Vec::new(); snapshot.masters.len()];
    for i in 0..keys {
        let slot = ach_redis::slot::key_slot(key_name(i).as_bytes());
        let owner = snapshot.owners[usize::from(slot)].ok_or("a slot has no owner")?;
        per_node[owner].push(i);
    }
    for (node, keys) in per_node.iter().enumerate() {
        let address = snapshot.masters[node].address.clone();
        for chunk in keys.chunks(1000) {
            let mut pipeline = redis::pipe();
            for &i in chunk {
                pipeline
                    .cmd("SET")
                    .arg(key_name(i))
                    .arg(workload::value(i, 0))
                    .ignore();
            }
            cluster
                .pipeline::<()>(&address, &pipeline, "SET")
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Reads every key from its owner and counts the missing ones and those that do not hold the
/// last value written.
fn check_keys(
    cluster: &mut Cluster,
    keys: usize,
    versions: &BTreeMap<usize, u64>,
) -> Result<(u64, u64), String> {
    let snapshot = cluster.snapshot().map_err(|e| e.to_string())?;
    if !snapshot.healthy() {
        return Err(format!(
            "cluster unhealthy at the final check: {}",
            snapshot.problems.join("; ")
        ));
    }
    let mut per_node: Vec<Vec<usize>> = vec![Vec::new(); snapshot.masters.len()];
    for i in 0..keys {
        let slot = ach_redis::slot::key_slot(key_name(i).as_bytes());
        let owner = snapshot.owners[usize::from(slot)].ok_or("a slot has no owner")?;
        per_node[owner].push(i);
    }
    let (mut lost, mut stale) = (0, 0);
    for (node, keys) in per_node.iter().enumerate() {
        let address = snapshot.masters[node].address.clone();
        for chunk in keys.chunks(1000) {
            let mut pipeline = redis::pipe();
            for &i in chunk {
                pipeline.cmd("GET").arg(key_name(i));
            }
            let values: Vec<Option<String>> = cluster
                .pipeline(&address, &pipeline, "GET")
                .map_err(|e| e.to_string())?;
            for (&i, value) in chunk.iter().zip(values) {
                let expected = workload::value(i, versions.get(&i).copied().unwrap_or(0));
                match value {
                    None => lost += 1,
                    Some(value) if value != expected => stale += 1,
                    Some(_) => {}
                }
            }
        }
    }
    Ok((lost, stale))
}

/// A `Write` into shared memory (the rebalance loop's step log).
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

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

fn control_options(
    algorithm: Entry,
    weights: Vec<(String, f64)>,
    cpu_per_weight: f64,
) -> ControlOptions {
    ControlOptions {
        algorithm,
        parameters: Vec::new(),
        weights,
        rules: reading_rules(cpu_per_weight),
        telemetry: TelemetryConfig::paper(),
        ach: live_ach_config(),
        migration: MigrationOptions::default(),
        min_slot_keys: 1,
    }
}

/// How INFO becomes readings, for the observer and the rebalancers alike: memory over the
/// machine's memory, p99 over 1 ms, cpu over the quota of a node of relative weight 1.
fn reading_rules(cpu_per_weight: f64) -> ReadingRules {
    ReadingRules {
        memory_capacity: None,
        latency_target_usec: 1000.0,
        cpu_per_weight,
    }
}

/// The load of every master from its own INFO, step by step, whatever the cluster's health
/// (a rebalancer's controller stops observing while nodes disagree on a slot's owner; the
/// measurement must not). Masters are those of the first snapshot, in address order.
struct Observer {
    sampler: Controller,
    tracker: LoadTracker,
    rules: ReadingRules,
    relative_weights: Vec<f64>,
    previous: Vec<Option<NodeSample>>,
    masters: Vec<String>,
}

impl Observer {
    fn new(
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        weights: &[(String, f64)],
        cpu_per_weight: f64,
    ) -> Result<Observer, String> {
        // The observer only samples: A0's balancer, which never moves a token.
        let observer = Catalogue::built_in()
            .get(names::STATIC_W)
            .cloned()
            .expect("a built-in");
        let options = control_options(observer, weights.to_vec(), cpu_per_weight);
        let telemetry = options.telemetry;
        let mut sampler = Controller::new(options).map_err(|e| e.to_string())?;
        let relative_weights = sampler
            .relative_weights(snapshot)
            .map_err(|e| e.to_string())?;
        let previous = sampler.sample(cluster, snapshot);
        Ok(Observer {
            sampler,
            tracker: LoadTracker::new(snapshot.masters.len(), telemetry)
                .map_err(|e| e.to_string())?,
            rules: reading_rules(cpu_per_weight),
            relative_weights,
            previous,
            masters: snapshot.masters.iter().map(|m| m.id.clone()).collect(),
        })
    }

    /// The seed's view of the cluster and the loads of one step.
    fn observe(&mut self, cluster: &mut Cluster) -> Result<(Snapshot, Vec<f64>), String> {
        let snapshot = cluster.snapshot().map_err(|e| e.to_string())?;
        let ids: Vec<String> = snapshot.masters.iter().map(|m| m.id.clone()).collect();
        if ids != self.masters {
            return Err("the set of masters changed".into());
        }
        let samples = self.sampler.sample(cluster, &snapshot);
        for (index, sample) in samples.iter().enumerate() {
            let raw = match sample {
                Some(now) => reading(self.previous[index].as_ref(), now, &self.rules),
                None => [f64::NAN; 3],
            };
            let weighted = raw.map(|value| value / self.relative_weights[index]);
            self.tracker
                .record(index, weighted)
                .map_err(|e| e.to_string())?;
            if sample.is_some() {
                self.previous[index] = sample.clone();
            }
        }
        let loads = self.tracker.finish_step().loads.to_vec();
        Ok((snapshot, loads))
    }
}

/// What rebalances the cluster during an arm.
enum Rebalancer {
    None,
    Loop(JoinHandle<Result<u64, String>>, SharedBuffer),
    RedisCli(std::process::Child),
}

/// Where and how long a rebalancer runs.
struct RebalancerSetup<'a> {
    seed: &'a str,
    weights: &'a [(String, f64)],
    snapshot: &'a Snapshot,
    steps: u32,
    interval: Duration,
    cpu_per_weight: f64,
}

fn start_rebalancer(
    arm: &Arm,
    setup: &RebalancerSetup<'_>,
    stop: Arc<AtomicBool>,
) -> Result<Rebalancer, String> {
    let RebalancerSetup {
        seed,
        weights,
        snapshot,
        steps,
        interval,
        cpu_per_weight,
    } = *setup;
    if *arm == Arm::RedisCli {
        let mut command = Command::new(redis_cli_binary().map_err(|e| e.to_string())?);
        command.args(["--cluster", "rebalance", seed, "--cluster-weight"]);
        for (address, weight) in weights {
            let master = snapshot
                .masters
                .iter()
                .find(|m| &m.address == address)
                .ok_or_else(|| format!("no master {address}"))?;
            command.arg(format!("{}={weight}", master.id));
        }
        command.arg("--cluster-use-empty-masters");
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("redis-cli: {e}"))?;
        return Ok(Rebalancer::RedisCli(child));
    }
    let Some(algorithm) = arm.rebalancer() else {
        return Ok(Rebalancer::None);
    };
    let buffer = SharedBuffer::default();
    let mut log = buffer.clone();
    let seed = seed.to_string();
    let options = control_options(algorithm, weights.to_vec(), cpu_per_weight);
    let handle = std::thread::spawn(move || {
        let mut cluster = connect(&seed)?;
        let mut controller = Controller::new(options.clone()).map_err(|e| e.to_string())?;
        rebalance::run(
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
        )
        .map_err(|e| e.to_string())
    });
    Ok(Rebalancer::Loop(handle, buffer))
}

/// Stops the rebalancer; returns its notes and its log (the rebalance loop's JSON lines, or
/// redis-cli's output).
fn finish_rebalancer(rebalancer: Rebalancer, stop: &AtomicBool) -> (Vec<String>, String) {
    stop.store(true, Ordering::SeqCst);
    let mut notes = Vec::new();
    let mut text = String::new();
    match rebalancer {
        Rebalancer::None => {}
        Rebalancer::Loop(handle, buffer) => {
            match handle.join() {
                Ok(Ok(keys)) => notes.push(format!("rebalance loop copied {keys} keys")),
                Ok(Err(error)) => notes.push(format!("rebalance loop failed: {error}")),
                Err(_) => notes.push("rebalance loop panicked".into()),
            }
            let log = buffer.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
            text = String::from_utf8_lossy(&log).into_owned();
            for line in text.lines() {
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(line)
                    && let Some(errors) = value["outcome"]["errors"].as_array()
                {
                    for error in errors {
                        notes.push(format!("step {}: {}", value["step"], error));
                    }
                }
            }
        }
        Rebalancer::RedisCli(mut child) => {
            // redis-cli finishes the slots it planned; give it a while, then stop it by PID
            // (the open slot it may leave is closed by `fix` afterwards).
            let started = Instant::now();
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        let mut output = String::new();
                        if let Some(mut out) = child.stdout.take() {
                            let _ = std::io::Read::read_to_string(&mut out, &mut output);
                        }
                        let moving: Vec<&str> =
                            output.lines().filter(|l| l.starts_with("Moving")).collect();
                        notes.push(format!(
                            "redis-cli --cluster rebalance exited with {status}; {} slot batches moved",
                            moving.len()
                        ));
                        if !status.success() {
                            let tail: Vec<&str> = output.lines().rev().take(3).collect();
                            notes.push(format!("redis-cli output ends: {}", tail.join(" | ")));
                        }
                        text = output;
                        break;
                    }
                    Ok(None) if started.elapsed() < Duration::from_secs(300) => {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        notes.push("redis-cli still running after 300 s: stopped by PID".into());
                        break;
                    }
                }
            }
        }
    }
    (notes, text)
}

fn percentile(sorted: &[f32], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(f64::from(sorted[rank - 1]) / 1000.0)
}

fn run_arm(
    config: &LiveConfig,
    arm: Arm,
    repeat: u32,
    limiter: &CpuLimiter,
    user_stop: &AtomicBool,
    progress: &mut dyn Write,
) -> Result<ArmRun, String> {
    let mut live = start_cluster(config, limiter)?;
    let seed = live.cluster.seed();
    let mut cluster = connect(&seed)?;
    let snapshot = cluster.snapshot().map_err(|e| e.to_string())?;
    load_keys(&mut cluster, &snapshot, config.keys)?;
    let weights: Vec<(String, f64)> = live
        .nodes
        .iter()
        .map(|n| (n.address.clone(), n.class.capacity()))
        .collect();
    // Node indices follow the snapshot (masters sorted by address).
    let order: Vec<usize> = snapshot
        .masters
        .iter()
        .map(|m| {
            live.nodes
                .iter()
                .position(|n| n.address == m.address)
                .expect("every master is ours")
        })
        .collect();
    let workload = config.workload(repeat);
    // The hot keys live in the initial slots of the first medium node (a weak one if none).
    let hot_node = config
        .classes()
        .iter()
        .position(|c| *c == NodeClass::Medium)
        .unwrap_or(config.nodes - 1);
    let hot_address = &live.nodes[hot_node].address;
    let hot_slots = ach_redis::slot::SLOT_COUNT;
    let hot_index = snapshot
        .masters
        .iter()
        .position(|m| &m.address == hot_address)
        .expect("ours");
    let owned: Vec<u16> = (0..hot_slots as u16)
        .filter(|&s| snapshot.owners[usize::from(s)] == Some(hot_index))
        .collect();
    let hot = workload.hot_keys_in((owned[0], owned[owned.len() - 1]));

    let interval = Duration::from_millis(config.interval_ms);
    let steps = config.steps();
    // Keys are neither created nor deleted during the workload: count them per slot once.
    let slot_keys = cluster.key_counts(&snapshot).map_err(|e| e.to_string())?;
    let cpu_per_weight = match limiter {
        CpuLimiter::Unavailable(_) => 1.0,
        _ => {
            let classes = config.classes();
            let mean = classes.iter().map(|c| c.capacity()).sum::<f64>() / classes.len() as f64;
            config.cpu_per_strong_node * mean
        }
    };
    let mut observer = Observer::new(&mut cluster, &snapshot, &weights, cpu_per_weight)?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        owners: snapshot
            .owners
            .iter()
            .map(|o| AtomicU8::new(o.unwrap_or(0) as u8))
            .collect(),
        started: Instant::now(),
        interval,
    });
    let rebalance_stop = Arc::new(AtomicBool::new(false));
    let rebalancer = start_rebalancer(
        &arm,
        &RebalancerSetup {
            seed: &seed,
            weights: &weights,
            snapshot: &snapshot,
            steps,
            interval,
            cpu_per_weight,
        },
        Arc::clone(&rebalance_stop),
    )?;
    let clients: Vec<JoinHandle<ClientReport>> = (0..config.clients)
        .map(|client| {
            let workload = workload.clone();
            let hot = hot.clone();
            let urls = live.cluster.urls();
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || workload::run_client(&workload, client, &hot, urls, shared))
        })
        .collect();

    let mut records = Vec::new();
    let mut owners = snapshot.owners.clone();
    let mut moved = 0u64;
    for t in 0..steps {
        let due = shared.started + interval * (t + 1);
        while Instant::now() < due {
            if user_stop.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(50)));
        }
        if user_stop.load(Ordering::SeqCst) {
            let _ = writeln!(progress, "  stopped by request at step {t}");
            break;
        }
        let (loads, d) = match observer.observe(&mut cluster) {
            Ok((now, loads)) => {
                for (slot, owner) in now.owners.iter().enumerate() {
                    if *owner != owners[slot] && owner.is_some() {
                        moved += slot_keys[slot];
                        owners[slot] = *owner;
                        if let Some(owner) = owner {
                            shared.owners[slot].store(*owner as u8, Ordering::Relaxed);
                        }
                    }
                }
                let d = imbalance(&loads);
                (loads, d.is_finite().then_some(d))
            }
            Err(_) => (Vec::new(), None),
        };
        let _ = writeln!(
            progress,
            "  {} t={:>3}s/{}s  D={}  keys moved {}",
            arm.name(),
            (t + 1) as f64 * interval.as_secs_f64(),
            config.duration_s,
            d.map_or("  n/a ".to_string(), |d| format!("{d:.4}")),
            moved
        );
        records.push(StepRecord {
            t,
            loads,
            d,
            keys_moved: moved,
            client_errors: 0,
            p50_ms: Vec::new(),
            p99_ms: Vec::new(),
        });
    }
    shared.stop.store(true, Ordering::SeqCst);
    let reports: Vec<ClientReport> = clients
        .into_iter()
        .map(|h| h.join().map_err(|_| "a client thread panicked".to_string()))
        .collect::<Result<_, _>>()?;
    let (notes, rebalance_log) = finish_rebalancer(rebalancer, &rebalance_stop);
    // Slots a stopped migration left open are completed before the check.
    let fixed = fix(&mut cluster, &MigrationOptions::default()).map_err(|e| e.to_string())?;
    let mut notes = notes;
    if !fixed.is_empty() {
        notes.push(format!(
            "{} open slots closed by fix after the arm",
            fixed.len()
        ));
    }
    // The final layout's moves (redis-cli may have finished after the last step).
    let final_snapshot = cluster.snapshot().map_err(|e| e.to_string())?;
    let slot_keys = cluster
        .key_counts(&final_snapshot)
        .map_err(|e| e.to_string())?;
    for (slot, owner) in final_snapshot.owners.iter().enumerate() {
        if *owner != owners[slot] {
            moved += slot_keys[slot];
        }
    }

    let mut versions = BTreeMap::new();
    let mut latencies: Vec<(u32, u8, f32)> = Vec::new();
    let (mut errors, mut stale_reads, mut requests) = (0, 0, 0);
    let mut error_samples = Vec::new();
    let mut errors_per_step = vec![0u32; steps as usize + 1];
    for report in reports {
        versions.extend(report.versions);
        errors += report.errors;
        stale_reads += report.stale_reads;
        requests += report.requests;
        error_samples.extend(report.error_samples);
        for (step, count) in report.errors_per_step.iter().enumerate() {
            let step = step.min(errors_per_step.len() - 1);
            errors_per_step[step] += count;
        }
        latencies.extend(report.latencies);
    }
    let (lost_keys, stale_keys) = check_keys(&mut cluster, config.keys, &versions)?;

    let masters = snapshot.masters.len();
    let mut per_step: BTreeMap<(u32, u8), Vec<f32>> = BTreeMap::new();
    let mut per_node: Vec<Vec<f32>> = vec![Vec::new(); masters];
    let mut all: Vec<f32> = Vec::with_capacity(latencies.len());
    for &(step, node, micros) in &latencies {
        per_step.entry((step, node)).or_default().push(micros);
        per_node[usize::from(node).min(masters - 1)].push(micros);
        all.push(micros);
    }
    for values in per_step.values_mut().chain(per_node.iter_mut()) {
        values.sort_by(f32::total_cmp);
    }
    all.sort_by(f32::total_cmp);
    for record in &mut records {
        record.client_errors = errors_per_step[record.t as usize];
        for node in 0..masters {
            let values = per_step.get(&(record.t, node as u8)).map_or(&[][..], |v| v);
            record.p50_ms.push(percentile(values, 0.5));
            record.p99_ms.push(percentile(values, 0.99));
        }
    }
    let mut nodes: Vec<NodeInfo> = order.iter().map(|&i| live.nodes[i].clone()).collect();
    for (node, values) in nodes.iter_mut().zip(&per_node) {
        node.p50_ms = percentile(values, 0.5);
        node.p99_ms = percentile(values, 0.99);
    }
    live.nodes = nodes.clone();
    let measured: Vec<f64> = records
        .iter()
        .filter(|r| r.t >= config.warmup())
        .filter_map(|r| r.d)
        .collect();
    let d_bar = if measured.is_empty() {
        f64::NAN
    } else {
        measured.iter().sum::<f64>() / measured.len() as f64
    };
    drop(cluster);
    drop(live);
    Ok(ArmRun {
        algorithm: arm.name().into(),
        repeat,
        seed: workload.seed,
        d_bar,
        keys_moved: moved,
        client_errors: errors,
        stale_reads,
        lost_keys,
        stale_keys,
        requests,
        p50_ms: percentile(&all, 0.5).unwrap_or(f64::NAN),
        p99_ms: percentile(&all, 0.99).unwrap_or(f64::NAN),
        nodes,
        steps: records,
        error_samples,
        rebalancer_notes: notes,
        rebalance_log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_nodes_are_two_of_each_class_and_names_parse() {
        let config = LiveConfig::default();
        use NodeClass::{Medium, Strong, Weak};
        assert_eq!(
            config.classes(),
            vec![Strong, Strong, Medium, Medium, Weak, Weak]
        );
        assert!(config.validate().is_ok());
        assert_eq!(
            Arm::parse("A0").unwrap(),
            Arm::Algorithm(names::STATIC_W.into())
        );
        assert_eq!(Arm::parse("ach-f").unwrap().name(), names::ACH_F);
        assert!(Arm::parse("ch-bl").unwrap_err().contains("routes requests"));
        assert_eq!(Arm::parse("redis-cli").unwrap(), Arm::RedisCli);
        let error = Arm::parse("foo").unwrap_err();
        assert!(error.contains("\"foo\""), "{error}");
        let bad = LiveConfig {
            nodes: 1,
            ..LiveConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("--nodes 1"));
    }
}
