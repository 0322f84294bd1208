//! The experiment: one freshly loaded cluster per arm and repeat, the same request sequence,
//! measurement every step, every key checked at the end.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use ach_redis::local::ServerKind;
use ach_report::profile::load_average;
use ach_sim::algorithms::{Catalogue, Entry, names};
use ach_sim::config::NodeClass;

use crate::calibrate::ServiceRate;

use crate::cgroup::CpuLimiter;
use crate::error::{ConfigError, ExperimentError};

mod arm;
mod cluster;
mod config;
mod observer;
mod outcome;
mod rebalancer;
mod server_work;

pub use config::{CpuReading, LiveConfig};
pub use server_work::{CommandWork, ServerWork};

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
    pub fn parse(text: &str) -> Result<Arm, ConfigError> {
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
            Ok(entry) => Err(ConfigError::RoutingAlgorithm {
                name: entry.name().to_string(),
                expected,
            }),
            Err(_) => Err(ConfigError::UnknownAlgorithm {
                text: text.to_string(),
                expected,
            }),
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

/// `--backend`: which server the clusters run and which `ach-redis` backend drives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LiveBackend {
    /// Valkey 9 with per-slot load (`CLUSTER SLOT-STATS`) and atomic migration when its
    /// server is found ([`ach_redis::local::valkey_server_binary`]), Redis 7 otherwise.
    #[default]
    Auto,
    /// Debian's Redis 7 (`redis-server`), key-by-key migration, no per-slot load.
    Redis,
    /// Valkey 9, per-slot load and atomic migration; an error when its server is missing.
    Valkey,
}

impl LiveBackend {
    /// Parses `auto`, `redis` or `valkey`.
    pub fn parse(text: &str) -> Result<LiveBackend, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(LiveBackend::Auto),
            "redis" => Ok(LiveBackend::Redis),
            "valkey" => Ok(LiveBackend::Valkey),
            _ => Err(ConfigError::Invalid {
                option: "--backend",
                value: text.to_string(),
                rule: "must be auto, redis or valkey".into(),
            }),
        }
    }

    /// The server the clusters run, with the reason for `auto`'s choice.
    pub fn resolve(self) -> Result<(ServerKind, String), ExperimentError> {
        match self {
            LiveBackend::Redis => Ok((ServerKind::Redis, "Redis 7 (--backend redis)".into())),
            LiveBackend::Valkey => match ach_redis::local::valkey_server_binary() {
                Ok(path) => Ok((
                    ServerKind::Valkey,
                    format!("Valkey 9 (--backend valkey, {})", path.display()),
                )),
                Err(error) => Err(ExperimentError::Backend {
                    backend: "valkey",
                    reason: error.to_string(),
                }),
            },
            LiveBackend::Auto => match ach_redis::local::valkey_server_binary() {
                Ok(path) => Ok((
                    ServerKind::Valkey,
                    format!(
                        "Valkey 9 with per-slot load (--backend auto found {})",
                        path.display()
                    ),
                )),
                Err(error) => Ok((
                    ServerKind::Redis,
                    format!("Redis 7 (--backend auto: no Valkey 9 server: {error})"),
                )),
            },
        }
    }
}

/// One measured step.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepRecord {
    /// Step index.
    pub t: u32,
    /// True for the warm-up steps that D-bar (true and telemetry) leaves out.
    pub warmup: bool,
    /// `D_true(t)`: the spread of the true loads (the ground truth, [`crate::truth`]).
    pub d_true: f64,
    /// The true composite load of every master (address order), from the requests scheduled
    /// for the slots it owned in this step and its class's measured service rate.
    pub true_loads: Vec<f64>,
    /// Unclipped demand over capacity of every master.
    pub demand_over_capacity: Vec<f64>,
    /// Coefficient of variation of `demand_over_capacity`.
    pub cv_true: f64,
    /// Requests scheduled in the step.
    pub offered: u64,
    /// Composite load of every master (by address order), from its own INFO.
    pub telemetry_loads: Vec<f64>,
    /// The parts of every master's composite, `[cpu, memory, latency]` as the load tracker
    /// took them (each over the master's relative weight, the idle cpu taken off the cpu;
    /// `null`: not read), so the composite's offsets can be told apart.
    pub telemetry_readings: Vec<[Option<f64>; 3]>,
    /// `D(t)` of the INFO composite; `None` when the cluster could not be observed.
    pub d_telemetry: Option<f64>,
    /// Keys in slots that changed owner since the start.
    pub keys_moved: u64,
    /// Client errors in this step.
    pub client_errors: u32,
    /// Client latency p50 per master, in milliseconds (`None`: no request).
    pub p50_ms: Vec<Option<f64>>,
    /// Client latency p99 per master, in milliseconds.
    pub p99_ms: Vec<Option<f64>>,
}

#[cfg(test)]
impl StepRecord {
    /// A record of step `t` with only its telemetry D and keys moved, for unit tests.
    pub(crate) fn for_test(t: u32, d_telemetry: Option<f64>, keys_moved: u64) -> StepRecord {
        StepRecord {
            t,
            warmup: false,
            d_true: 0.0,
            true_loads: Vec::new(),
            demand_over_capacity: Vec::new(),
            cv_true: 0.0,
            offered: 0,
            telemetry_loads: Vec::new(),
            telemetry_readings: Vec::new(),
            d_telemetry,
            keys_moved,
            client_errors: 0,
            p50_ms: Vec::new(),
            p99_ms: Vec::new(),
        }
    }
}

/// One master of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeInfo {
    /// `host:port`.
    pub address: String,
    /// Capacity class.
    pub class: NodeClass,
    /// The first and last slot it owned at the start (one range: the cluster deals out equal
    /// ranges in start order, as the simulator's contiguous layout deals its tokens; `None`
    /// in runs made before it was recorded).
    pub initial_slots: Option<(u16, u16)>,
    /// CPU quota in microseconds per period, when set.
    pub quota_us: Option<u64>,
    /// The cgroup's CPU throttling counters at the end of the arm, when read.
    pub throttling: Option<crate::cgroup::Throttling>,
    /// Its cpu use without clients, in cores, measured before the workload and taken off its
    /// cpu readings (`None`: not measured, `--idle-cpu-s 0`).
    pub idle_cpu_cores: Option<f64>,
    /// Its capacity in requests per second, over which its cpu part counted its data
    /// commands (`None`: its cpu use counted, `--cpu-reading cores`).
    pub request_capacity: Option<f64>,
    /// Client latency p50 over the run, in milliseconds.
    pub p50_ms: Option<f64>,
    /// Client latency p99 over the run, in milliseconds.
    pub p99_ms: Option<f64>,
    /// What the server counted of its work while the clients ran (`None`: not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_work: Option<ServerWork>,
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
    /// Mean of `D_true(t)` after the warm-up: the ground truth.
    pub d_bar_true: f64,
    /// Mean of the demand-over-capacity CV after the warm-up.
    pub cv_bar_true: f64,
    /// Mean of the INFO composite's `D(t)` after the warm-up.
    pub d_bar_telemetry: f64,
    /// Keys in slots that changed owner, in all.
    pub keys_moved: u64,
    /// Reads that returned another value than the last one written.
    pub stale_reads: u64,
    /// Keys missing at the end.
    pub lost_keys: u64,
    /// Keys holding another value than the last one written, at the end.
    pub stale_keys: u64,
    /// The operators' outcomes of the whole run.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The same per phase of the workload.
    pub phases: Vec<PhaseOutcome>,
    /// Seconds from the first to the last step in which keys moved (`None`: none moved).
    pub migration_s: Option<f64>,
    /// The clients' figures over those steps, beside A0's (`None`: no key moved).
    pub rebalancing: Option<Rebalancing>,
    /// Seconds until `D_true` stays within 10 % of its final level.
    pub settle_s: Option<f64>,
    /// Requests sent more than one step after their due time (the clients fell behind).
    pub late_requests: u64,
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
    /// Every answered request's `(step, node, microseconds)`, kept until the repeat's A0 run
    /// has given its p99 over this run's [`Rebalancing`] steps, then dropped.
    #[serde(skip)]
    pub latencies: Vec<(u32, u8, f32)>,
}

/// The clients' figures while an arm rebalanced: over the steps from the first in which keys
/// moved to the last, against A0's (which moves nothing) over the same steps of the same
/// repeat, so that the load of those steps is the same.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Rebalancing {
    /// The steps `[from, to)`.
    pub steps: (u32, u32),
    /// The arm's figures over them.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// A0's client p99 over the same steps, in milliseconds (`None` without an A0 arm).
    pub static_p99_ms: Option<f64>,
}

/// What an operator judges a rebalance by, over some steps.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Outcome {
    /// Requests scheduled.
    pub requests_offered: u64,
    /// Requests answered.
    pub requests_answered: u64,
    /// Answered requests per second.
    pub throughput: f64,
    /// Client latency p50, in milliseconds.
    pub p50_ms: f64,
    /// Client latency p99, in milliseconds.
    pub p99_ms: f64,
    /// Client latency p99.9, in milliseconds.
    pub p999_ms: f64,
    /// Requests that failed.
    pub client_errors: u64,
}

/// The outcome of one phase of the workload.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PhaseOutcome {
    /// `base`, `hot-keys` or `load-step`.
    pub phase: String,
    /// Its steps, `[from, to)`.
    pub steps: (u32, u32),
    /// Mean `D_true` over its steps after the warm-up (NaN when none).
    pub d_true: f64,
    /// Keys moved in it.
    pub keys_moved: u64,
    /// Clients' figures.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveResults {
    /// The configuration.
    pub config: LiveConfig,
    /// The server the clusters ran (`redis` or `valkey`) and why.
    pub server: String,
    /// `redis` or `valkey`.
    pub backend: &'static str,
    /// The measured service rate of every class.
    pub service_rates: Vec<ServiceRate>,
    /// How CPU quotas were set: `cgroup-v1`, `cgroup-v2` or `none`.
    pub cpu_limits: String,
    /// Why quotas could not be set, when they could not.
    pub cpu_limits_note: Option<String>,
    /// Every arm and repeat, in the order run.
    pub runs: Vec<ArmRun>,
    /// Warnings about the run (clients that could not keep the schedule).
    pub warnings: Vec<String>,
    /// Load average of the machine before and after (from `/proc/loadavg`).
    pub load_average: (String, String),
}

/// The most threads the clients may send with together.
pub const MAX_CLIENT_THREADS: usize = 256;

/// The share of late requests above which a run warns that the clients could not keep the
/// schedule.
pub const LATE_SHARE_WARNING: f64 = 0.01;

/// A warning for every run whose clients sent more than [`LATE_SHARE_WARNING`] of the
/// scheduled requests more than a step late.
fn schedule_warnings(config: &LiveConfig, runs: &[ArmRun]) -> Vec<String> {
    runs.iter()
        .filter(|r| r.late_requests as f64 > LATE_SHARE_WARNING * r.outcome.requests_offered as f64)
        .map(|r| {
            format!(
                "{} (repeat {}): the clients could not keep the schedule: {} of {} requests \
                 ({:.1} %) were sent more than one step ({} ms) late, {} never sent",
                r.algorithm,
                r.repeat,
                r.late_requests,
                r.outcome.requests_offered,
                100.0 * r.late_requests as f64 / r.outcome.requests_offered.max(1) as f64,
                config.interval_ms,
                r.outcome
                    .requests_offered
                    .saturating_sub(r.outcome.requests_answered + r.outcome.client_errors)
            ) + &most_throttled(&r.nodes).unwrap_or_default()
        })
        .collect()
}

/// The master whose CPU quota ran out in the most periods, as a clause for a warning that the
/// clients fell behind: a thread waiting on an overloaded master falls behind with it.
fn most_throttled(nodes: &[NodeInfo]) -> Option<String> {
    nodes
        .iter()
        .filter_map(|node| node.throttling.map(|t| (t.share(), node)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(share, node)| {
            format!(
                "; the most throttled master, {} ({}), ran out of quota in {:.0} % of the periods",
                node.address,
                node.class.name(),
                100.0 * share
            )
        })
}

/// Gives every run of one repeat A0's client p99 over the steps in which the run moved keys,
/// then drops the repeat's latencies.
fn compare_with_static(repeat: &mut [ArmRun]) {
    let static_latencies = repeat
        .iter_mut()
        .find(|run| run.algorithm == names::STATIC_W)
        .map(|run| std::mem::take(&mut run.latencies));
    for run in repeat.iter_mut() {
        if let (Some(window), Some(latencies)) = (run.rebalancing.as_mut(), &static_latencies) {
            window.static_p99_ms = outcome::p99_in(latencies, window.steps);
        }
        run.latencies = Vec::new();
    }
}

/// Why the nodes' CPU quotas cannot be set, when they cannot (also warned on `progress`):
/// every node then gets the whole machine and the capacities are only declared.
fn cpu_limits_note(limiter: &CpuLimiter, progress: &mut dyn Write) -> Option<String> {
    let CpuLimiter::Unavailable(reason) = limiter else {
        return None;
    };
    let _ = writeln!(
        progress,
        "warning: CPU quotas cannot be set ({reason}); every node gets the whole machine \
         and the capacities are only declared (weights)"
    );
    Some(reason.clone())
}

/// One line on `progress` with what an arm's run measured, after `label` (its place and
/// name), and the time it took.
fn report_arm(progress: &mut dyn Write, label: &str, run: &ArmRun, took: std::time::Duration) {
    let _ = writeln!(
        progress,
        "{label}: D-bar true {:.4} (telemetry {:.4}), keys moved {}, answered {} of {}, \
         client errors {}, lost {}, stale {}, p99 {:.2} ms ({:.0} s)",
        run.d_bar_true,
        run.d_bar_telemetry,
        run.keys_moved,
        run.outcome.requests_answered,
        run.outcome.requests_offered,
        run.outcome.client_errors,
        run.lost_keys,
        run.stale_keys,
        run.outcome.p99_ms,
        took.as_secs_f64()
    );
}

/// Runs every arm of every repeat; reports progress on `progress`. `stop` ends the current arm
/// early (Ctrl-C); what was measured is still returned.
pub fn run(
    config: &LiveConfig,
    stop: &AtomicBool,
    progress: &mut dyn Write,
) -> Result<LiveResults, ExperimentError> {
    config.validate()?;
    let limiter = CpuLimiter::detect();
    let note = cpu_limits_note(&limiter, progress);
    let before = load_average();
    let (kind, server) = config.backend.resolve()?;
    let backend = match kind {
        ServerKind::Valkey => "valkey",
        _ => "redis",
    };
    let _ = writeln!(progress, "server: {server}; backend {backend}");
    let service_rates = crate::calibrate::measure(config, kind, &limiter, progress)?;
    let setup = arm::ArmSetup {
        kind,
        limiter: &limiter,
        service_rates: &service_rates,
    };
    let mut runs: Vec<ArmRun> = Vec::new();
    let total = config.arms.len() * config.repeats as usize;
    for repeat in 0..config.repeats {
        let first_of_repeat = runs.len();
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
            let arm_started = std::time::Instant::now();
            let run = arm::run_arm(config, arm.clone(), repeat, &setup, stop, progress).map_err(
                |error| ExperimentError::Arm {
                    arm: arm.name().to_string(),
                    repeat,
                    source: Box::new(error),
                },
            )?;
            let label = format!("[{index}/{total}] {}", arm.name());
            report_arm(progress, &label, &run, arm_started.elapsed());
            runs.push(run);
        }
        compare_with_static(&mut runs[first_of_repeat..]);
    }
    let warnings = schedule_warnings(config, &runs);
    for warning in &warnings {
        let _ = writeln!(progress, "warning: {warning}");
    }
    Ok(LiveResults {
        config: config.clone(),
        server,
        backend,
        service_rates,
        warnings,
        cpu_limits: limiter.name().into(),
        cpu_limits_note: note,
        runs,
        load_average: (before, load_average()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_names_parse() {
        assert_eq!(
            Arm::parse("A0").unwrap(),
            Arm::Algorithm(names::STATIC_W.into())
        );
        assert_eq!(Arm::parse("ach-f").unwrap().name(), names::ACH_F);
        assert!(
            Arm::parse("ch-bl")
                .unwrap_err()
                .to_string()
                .contains("routes requests")
        );
        assert_eq!(Arm::parse("redis-cli").unwrap(), Arm::RedisCli);
        let error = Arm::parse("foo").unwrap_err().to_string();
        assert!(error.contains("\"foo\""), "{error}");
    }

    #[test]
    fn a_late_warning_names_the_most_throttled_master() {
        let node = |address: &str, class: NodeClass, throttled_periods: u64| NodeInfo {
            address: address.to_string(),
            class,
            initial_slots: None,
            quota_us: Some(1000),
            throttling: Some(crate::cgroup::Throttling {
                periods: 100,
                throttled_periods,
                throttled_ms: 0.0,
            }),
            idle_cpu_cores: None,
            request_capacity: None,
            p50_ms: None,
            p99_ms: None,
            server_work: None,
        };
        let nodes = [
            node("127.0.0.1:1", NodeClass::Strong, 3),
            node("127.0.0.1:2", NodeClass::Weak, 57),
            node("127.0.0.1:3", NodeClass::Medium, 12),
        ];
        assert_eq!(
            most_throttled(&nodes).as_deref(),
            Some(
                "; the most throttled master, 127.0.0.1:2 (weak), ran out of quota in 57 % of \
                 the periods"
            )
        );
        let unread = NodeInfo {
            throttling: None,
            ..nodes[0].clone()
        };
        assert_eq!(most_throttled(&[unread]), None);
    }
}
