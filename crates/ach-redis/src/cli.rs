//! The `ach-redis` command line: status, plan, rebalance and fix for a Redis Cluster, over a
//! catalogue of algorithms.
//!
//! The `ach-redis` binary runs it with the built-in catalogue; a user's binary runs it with its
//! own, and `--algorithm` then finds the user's algorithms too:
//!
//! ```no_run
//! use ach_baselines::StaticW;
//! use ach_baselines::catalogue::{Catalogue, Entry};
//!
//! // `my-ach-redis rebalance --cluster 127.0.0.1:7000 --algorithm mine --steps 10 --interval-ms 1000`
//! fn main() -> std::process::ExitCode {
//!     let mut catalogue = Catalogue::built_in();
//!     catalogue.add(Entry::new("Mine", "M1", |_| Ok(Box::new(StaticW)))).unwrap();
//!     ach_redis::cli::run(catalogue)
//! }
//! ```

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ach_baselines::catalogue::{Catalogue, Entry, names};
use ach_telemetry::TelemetryConfig;
use clap::{Args, Parser, Subcommand};

use crate::Error;
use crate::backend::{BackendChoice, SlotStatsReading};
use crate::cluster::{Cluster, ConnectOptions, Snapshot};
use crate::compact::SlotChoice;
use crate::control::{ControlOptions, Controller, Observed, SlotSplit, observe_once};
use crate::metrics::{Metrics, MetricsServer};
use crate::migrate::{MigrationOptions, ProtocolPoint};
use crate::node_telemetry::NodeTelemetry;
use crate::notable::name_hash_tags;
use crate::prometheus_telemetry::PrometheusTelemetry;
use crate::rebalance::{
    LoopMetrics, LoopOptions, LoopOutputs, RunRules, report_fix, run_with_summary,
};
use crate::report::{plan_text, status_text};
use crate::security::SecurityArgs;
use crate::slot::SLOT_COUNT;
use crate::telemetry::{ReadingRules, SlotRateStatistic};

/// Load-aware, budgeted rebalancing of a Redis Cluster with ACH.
#[derive(Parser)]
#[command(name = "ach-redis", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Nodes, slots, keys per node, the load vector and its inputs, open slots.
    Status {
        #[command(flatten)]
        common: Common,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Exactly the first step `rebalance` would take with the same options, printed with its
    /// score, a summary per source and target, and why nothing moves when nothing does;
    /// nothing is moved (a dry run). Give `--sample-ms` the `--interval-ms` of the rebalance.
    Plan {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        step: StepArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The control loop: observe, plan, migrate every planned slot, confirm, repeat.
    Rebalance(RebalanceArgs),
    /// Complete (or roll back) every slot left open by an interrupted migration.
    Fix {
        #[command(flatten)]
        common: Common,
        /// Work on a degraded cluster too (unreachable or failing masters, as redis-cli's
        /// --cluster-fix-with-unreachable-masters): close only the open slots that can be
        /// closed without losing a key, name every slot left open with the reason, and exit 5
        /// when one is.
        #[arg(long)]
        force_with_unreachable: bool,
    },
}

/// The options of `rebalance`.
#[derive(Args)]
struct RebalanceArgs {
    #[command(flatten)]
    common: Common,
    /// Number of control steps (with --until-balanced: the most steps).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Stop at the first step whose measured imbalance D is at most this (before planning
    /// it); --steps caps the run.
    #[arg(long, value_name = "D")]
    until_balanced: Option<f64>,
    /// Copy at most this many keys per second (checked after every migration: a slot key
    /// by key, a group for an atomic job).
    #[arg(long, value_name = "KEYS")]
    max_keys_per_second: Option<f64>,
    /// Start without asking (on a terminal, rebalance asks first; elsewhere it never asks).
    #[arg(long)]
    yes: bool,
    /// Time between two steps, in milliseconds (1 to 86400000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    interval_ms: u64,
    #[command(flatten)]
    step: StepArgs,
    /// Write one JSON line per step to this file.
    #[arg(long, value_name = "FILE.jsonl")]
    log: Option<std::path::PathBuf>,
    /// Keys per MIGRATE batch.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    batch: u64,
    /// Valkey 9: a group of slots holding fewer keys than this moves key by key (SETSLOT +
    /// MIGRATE) instead of in one atomic job, which forks its source (default 0: every
    /// group in an atomic job).
    #[arg(long, value_name = "KEYS", default_value_t = 0)]
    atomic_from_keys: u64,
    /// Serve the rebalancer's metrics at http://HOST:PORT/metrics (OpenMetrics for
    /// Prometheus, Prometheus text for other clients; docs/prometheus.md).
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// Test hook: wait forever at this point of the first migration.
    #[arg(long, value_enum, hide = true)]
    pause_at: Option<ProtocolPoint>,
}

/// How a step is planned: the options `plan` and `rebalance` share, so that `plan` is the
/// first step of `rebalance`.
#[derive(Args)]
struct StepArgs {
    #[command(flatten)]
    algorithm: AlgorithmArgs,
    /// ACH's per-step budget cap `M_max` (fraction of all keys).
    #[arg(long)]
    m_max: Option<f64>,
    /// ACH's horizon budget `M_H` (fraction of all keys per `--horizon` steps).
    #[arg(long)]
    m_horizon: Option<f64>,
    /// ACH's horizon `H` in steps.
    #[arg(long)]
    horizon: Option<usize>,
    /// ACH: carry out a step's plan only when it is predicted to remove at least this fraction
    /// of the load above the mean, in [0, 1) (default 0: every plan). Each migration costs its
    /// source a copy of the keys (on Valkey, a fork) whatever it gains.
    #[arg(long, value_name = "FRACTION")]
    min_gain: Option<f64>,
    /// Smoothing factor `beta` of the load tracker's EWMA, in (0, 1] (1: no smoothing; the
    /// smoothing starts from the first reading).
    #[arg(long, default_value_t = TelemetryConfig::paper().beta)]
    beta: f64,
    /// Skip planned moves of slots holding fewer keys (default 1: skip empty slots, which
    /// carry no load and still cost a protocol round and an epoch bump each).
    #[arg(long, default_value_t = 1)]
    min_slot_keys: u64,
    /// Valkey: ask each master for the per-slot statistics of at most this many of its slots
    /// per request (default: all in one request). A reply costs the server about 0.3 us a slot
    /// returned, in one burst; smaller requests spread it.
    #[arg(long, default_value_t = SLOT_COUNT)]
    slot_stats_chunk: usize,
    /// Valkey: wait this long between rounds of per-slot statistics requests (with
    /// --slot-stats-chunk; e.g. the CPU quota's period of masters under a cgroup quota).
    #[arg(long, default_value_t = 0)]
    slot_stats_pause_ms: u64,
    /// Read the per-slot figures (keys per slot; Valkey: CLUSTER SLOT-STATS) at every N-th
    /// control step only, and reuse them in the steps between (default 1: every step). The
    /// masters' own readings (INFO) are taken at every step either way.
    #[arg(long, default_value_t = 1)]
    slot_stats_every: u32,
    /// Valkey: each slot's load is its per-slot counter's growth over the last N readings of
    /// the per-slot figures (default 1: since the last reading). A slot asked a few times an
    /// interval reads mostly noise over one; over N the noise falls by about the square root
    /// of N, and a change of load shows fully after N readings.
    #[arg(long, default_value_t = 1)]
    slot_stats_window: u32,
    /// Valkey: which rate over the --slot-stats-window readings weights a master's slots:
    /// mean (the growth over the window over its time) or median (the median of the
    /// per-reading rates, over the sum of the master's means, so that one reading's outlier,
    /// such as a command preempted or throttled on a busy host, does not make a slot hot;
    /// use it with a window of 3 or more).
    #[arg(long, value_enum, default_value = "mean")]
    slot_rate: SlotRateStatistic,
    /// Valkey: the per-slot counter that splits each master's load among its slots: cpu
    /// (cpu-usec, whole microseconds per command, so a slot asked once or twice in an
    /// interval mostly reads 0) or network (network-bytes-in + network-bytes-out, every
    /// request counted).
    #[arg(long, value_enum, default_value = "cpu")]
    slot_split: SlotSplit,
    /// How each (source, target)'s slots are chosen: compact (contiguous ranges among slots of
    /// similar value, at most the planned keys) or planned (exactly the algorithm's slots).
    #[arg(long, value_enum, default_value = "compact")]
    slot_choice: SlotChoice,
}

#[derive(Args)]
struct AlgorithmArgs {
    /// The balancing algorithm, by name, label or alias, case-insensitive: ach, static-w (a0),
    /// static-wt (a1), dynamic-r (a2), bounded-loads (a3), ach-f, or one a user's catalogue
    /// adds.
    #[arg(long, default_value = names::ACH)]
    algorithm: String,
    /// A parameter of the algorithm, NAME=VALUE (`ach_f.window=7`); repeatable.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    parameters: Vec<(String, f64)>,
}

impl AlgorithmArgs {
    /// The catalogue entry named.
    fn entry(&self, catalogue: &Catalogue) -> Result<Entry, Error> {
        catalogue
            .find(&self.algorithm)
            .cloned()
            .map_err(|e| Error::Input(format!("--algorithm: {e}")))
    }
}

/// A `--param` that does not read as `NAME=VALUE` with a number.
#[derive(Debug, thiserror::Error)]
enum ParameterError {
    #[error("{text:?} is not NAME=VALUE (for example ach_f.window=7)")]
    NotNameValue { text: String },
    #[error("value {value:?} of {name:?} is not a number")]
    NotANumber { name: String, value: String },
}

fn parse_parameter(text: &str) -> Result<(String, f64), ParameterError> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| ParameterError::NotNameValue {
            text: text.to_string(),
        })?;
    let number: f64 = value.parse().map_err(|_| ParameterError::NotANumber {
        name: name.to_string(),
        value: value.to_string(),
    })?;
    Ok((name.to_string(), number))
}

#[derive(Args)]
struct Common {
    /// Any node of the cluster, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    cluster: String,
    /// Relative capacity of a node (address or node id), as `redis-cli --cluster rebalance`
    /// takes it; nodes not named weigh 1; 0 drains the node (as --drain). Repeatable.
    #[arg(long, value_name = "NODE=W", value_parser = parse_weight)]
    weight: Vec<(String, f64)>,
    /// Drain this master (address or node id): `rebalance` moves all its slots to the other
    /// masters within the budget, and it never receives one (the same as --weight NODE=0).
    /// Repeatable.
    #[arg(long, value_name = "NODE")]
    drain: Vec<String>,
    /// A master's cpu use without clients, in cores (address or node id): taken off its cpu
    /// reading, which becomes the use of the rest of its allowance (its relative weight in
    /// cores). The cluster bus, the timers and the readings cost a node the same whatever
    /// slots it owns, so moving slots cannot change that part. Repeatable.
    #[arg(long, value_name = "NODE=CORES", value_parser = parse_idle_cpu)]
    idle_cpu: Vec<(String, f64)>,
    /// A master's capacity in data commands per second (address or node id): the requests it
    /// answers at saturation, as a benchmark of the workload's mix measures them. Its cpu
    /// reading becomes its data commands per second over this (INFO commandstats, or the
    /// exporter's redis_commands_total, without the rebalancer's and operators' commands)
    /// instead of its cpu use, which also counts the cluster bus, the timers, the readings and
    /// the migrations. Not with --idle-cpu for the same master. Repeatable.
    #[arg(long, value_name = "NODE=REQUESTS_PER_S", value_parser = parse_request_capacity)]
    request_capacity: Vec<(String, f64)>,
    /// Memory capacity per node in MiB, for nodes without maxmemory (default: the machine's
    /// memory).
    #[arg(long, value_name = "MIB")]
    memory_capacity_mb: Option<f64>,
    /// p99 latency that counts as full load, in microseconds.
    #[arg(long, default_value_t = ReadingRules::default().latency_target_usec)]
    latency_target_us: f64,
    /// Wait between the two telemetry samples of `status` and `plan`, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    sample_ms: u64,
    /// Reply timeout of every command, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    timeout_ms: u64,
    /// The backend: detected from INFO server (valkey for Valkey >= 9, redis otherwise), or
    /// forced (valkey needs Valkey >= 9 on every master).
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// Turn on Valkey's per-slot load counters on every master first
    /// (CONFIG SET cluster-slot-stats-enabled yes); never done without this flag.
    #[arg(long)]
    enable_slot_stats: bool,
    #[command(flatten)]
    telemetry: TelemetryOptions,
    #[command(flatten)]
    security: SecurityArgs,
}

/// Where the per-node readings come from (`--telemetry`, docs/prometheus.md).
#[derive(Args)]
struct TelemetryOptions {
    /// The per-node readings: info (every master's INFO and LATENCY HISTOGRAM) or prometheus
    /// (PromQL over redis_exporter's series; needs --prometheus-url).
    #[arg(long, value_enum, default_value = "info")]
    telemetry: TelemetryKind,
    /// The Prometheus server of --telemetry prometheus, http://HOST:PORT[/PATH].
    #[arg(long, value_name = "URL", required_if_eq("telemetry", "prometheus"))]
    prometheus_url: Option<String>,
    /// The label whose value is a node's HOST:PORT (a redis:// prefix is ignored).
    #[arg(long, value_name = "LABEL", default_value = "instance")]
    prometheus_node_label: String,
    /// The window of every rate(), in seconds (at least two scrape intervals).
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    prometheus_window_s: u64,
    /// A node whose newest redis_up sample is older than this, in seconds, is a missing
    /// sample.
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    prometheus_max_age_s: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TelemetryKind {
    Info,
    Prometheus,
}

impl TelemetryOptions {
    /// The source these options name; a bad URL or a Prometheus option without
    /// `--telemetry prometheus` is an input error.
    fn source(&self) -> Result<NodeTelemetry, Error> {
        let Some(url) = &self.prometheus_url else {
            return Ok(NodeTelemetry::Info);
        };
        if self.telemetry != TelemetryKind::Prometheus {
            return Err(Error::Input(
                "--prometheus-url is given but --telemetry is info: add --telemetry prometheus"
                    .into(),
            ));
        }
        let mut prometheus =
            PrometheusTelemetry::new(url).map_err(|e| Error::Input(e.to_string()))?;
        prometheus.node_label = self.prometheus_node_label.clone();
        prometheus.window = Duration::from_secs(self.prometheus_window_s);
        prometheus.max_age = Duration::from_secs(self.prometheus_max_age_s);
        Ok(NodeTelemetry::Prometheus(prometheus))
    }
}

/// A `NODE=VALUE` option (`--weight`, `--idle-cpu`, `--request-capacity`) that does not read as one, or whose
/// value breaks its rule.
#[derive(Debug, thiserror::Error)]
#[error("{text:?}: {rule}")]
struct NodeValueError {
    text: String,
    rule: &'static str,
}

/// `NODE=VALUE` with a finite value >= 0; `example` and `rule` name the option's own.
fn parse_node_value(
    text: &str,
    example: &'static str,
    rule: &'static str,
) -> Result<(String, f64), NodeValueError> {
    let fail = |rule| NodeValueError {
        text: text.to_string(),
        rule,
    };
    let (node, value) = text.split_once('=').ok_or_else(|| fail(example))?;
    let value: f64 = value
        .parse()
        .map_err(|_| fail("the value after = is not a number"))?;
    if node.is_empty() || !(value.is_finite() && value >= 0.0) {
        return Err(fail(rule));
    }
    Ok((node.to_string(), value))
}

fn parse_weight(text: &str) -> Result<(String, f64), NodeValueError> {
    parse_node_value(
        text,
        "is not NODE=W (for example 127.0.0.1:7000=2)",
        "the node must be named and the weight finite and >= 0 (0 drains the node)",
    )
}

fn parse_idle_cpu(text: &str) -> Result<(String, f64), NodeValueError> {
    parse_node_value(
        text,
        "is not NODE=CORES (for example 127.0.0.1:7000=0.01)",
        "the node must be named and the cores finite and >= 0",
    )
}

fn parse_request_capacity(text: &str) -> Result<(String, f64), NodeValueError> {
    parse_node_value(
        text,
        "is not NODE=REQUESTS_PER_S (for example 127.0.0.1:7000=20000)",
        "the node must be named and the capacity finite and >= 0",
    )
}

/// `fix --force-with-unreachable`: a warning on stderr first, then every slot closed and every
/// slot left open with its reason; exit 5 when a slot is left open.
fn fix_with_unreachable(common: &Common) -> Result<u8, Error> {
    let mut cluster = connect(common)?;
    let snapshot = cluster.snapshot()?;
    eprintln!(
        "ach-redis: WARNING: fix --force-with-unreachable{}: only the open slots whose keys can \
         all be accounted for are closed; slots open on an unreachable master cannot be seen, \
         and the keys of the slots an unreachable master owns stay out of reach (lost if it \
         never returns and has no replica); no slot is given away from an unreachable master",
        if snapshot.healthy() {
            String::new()
        } else {
            format!(" on a degraded cluster ({})", snapshot.problems.join("; "))
        }
    );
    let fixed = cluster
        .backend()
        .fix_with_unreachable(&mut cluster, &MigrationOptions::default())?;
    if fixed.actions.is_empty() && fixed.left_open.is_empty() {
        println!("fix: no open slot");
    }
    report_fix(&fixed.actions, &mut std::io::stdout());
    for open in &fixed.left_open {
        println!("fix: slot {} LEFT OPEN: {}", open.slot, open.reason);
    }
    if !fixed.unreachable.is_empty() {
        println!(
            "fix: unreachable masters (their own open slots unseen): {}",
            fixed.unreachable.join(", ")
        );
    }
    Ok(if fixed.left_open.is_empty() {
        0
    } else {
        crate::summary::EXIT_DEGRADED
    })
}

/// Parses the process's arguments and runs the command with `catalogue`'s algorithms; errors
/// are printed, and the exit code is 2 for bad input, 1 for a failure; a `rebalance` that
/// ran exits with its summary's code (3: a migration failed, 4: planned moves dropped, 5: the
/// cluster degraded at exit, 6: a drain unfinished; docs/redis.md).
pub fn run(catalogue: Catalogue) -> ExitCode {
    let cli = Cli::parse();
    match execute(cli, &catalogue) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("ach-redis: error: {error}");
            ExitCode::from(error.exit_code() as u8)
        }
    }
}

/// The controller's options of `plan` and `rebalance`: the common ones and the step's.
fn step_options(
    common: &Common,
    step: &StepArgs,
    catalogue: &Catalogue,
) -> Result<ControlOptions, Error> {
    let entry = step.algorithm.entry(catalogue)?;
    let mut options = control_options(common, entry, step.algorithm.parameters.clone(), step.beta)?;
    if let Some(value) = step.m_max {
        options.ach.m_max = value;
    }
    if let Some(value) = step.m_horizon {
        options.ach.m_horizon = value;
    }
    if let Some(value) = step.horizon {
        options.ach.horizon = value;
    }
    if let Some(value) = step.min_gain {
        options.ach.min_gain = value;
    }
    options.min_slot_keys = step.min_slot_keys;
    if step.slot_stats_chunk == 0 {
        return Err(Error::Input(
            "--slot-stats-chunk 0: must be at least 1 slot".into(),
        ));
    }
    if step.slot_stats_every == 0 {
        return Err(Error::Input(
            "--slot-stats-every 0: must be at least 1 (1: every step)".into(),
        ));
    }
    if step.slot_stats_window == 0 {
        return Err(Error::Input(
            "--slot-stats-window 0: must be at least 1 (1: since the last reading)".into(),
        ));
    }
    options.slot_stats = SlotStatsReading {
        chunk_slots: step.slot_stats_chunk,
        pause: std::time::Duration::from_millis(step.slot_stats_pause_ms),
        every: step.slot_stats_every,
        window: step.slot_stats_window,
        statistic: step.slot_rate,
    };
    options.slot_split = step.slot_split;
    Ok(options)
}

fn control_options(
    common: &Common,
    algorithm: Entry,
    parameters: Vec<(String, f64)>,
    beta: f64,
) -> Result<ControlOptions, Error> {
    if let Some(mb) = common.memory_capacity_mb
        && !(mb.is_finite() && mb > 0.0)
    {
        return Err(Error::Input(format!(
            "--memory-capacity-mb {mb}: must be a finite number > 0"
        )));
    }
    if !(common.latency_target_us.is_finite() && common.latency_target_us > 0.0) {
        return Err(Error::Input(format!(
            "--latency-target-us {}: must be a finite number > 0",
            common.latency_target_us
        )));
    }
    Ok(ControlOptions {
        parameters,
        // A drain is a weight 0, after the weights: --drain wins over a --weight of the node.
        weights: common
            .weight
            .iter()
            .cloned()
            .chain(common.drain.iter().map(|node| (node.clone(), 0.0)))
            .collect(),
        idle_cpu: common.idle_cpu.clone(),
        request_capacity: common.request_capacity.clone(),
        rules: ReadingRules {
            memory_capacity: common.memory_capacity_mb.map(|mb| mb * 1024.0 * 1024.0),
            latency_target_usec: common.latency_target_us,
            ..ReadingRules::default()
        },
        telemetry: TelemetryConfig {
            beta,
            ..TelemetryConfig::paper()
        },
        ..ControlOptions::new(algorithm)
    })
}

/// Asks on the terminal whether to rebalance `snapshot`'s masters for up to `steps` steps;
/// true for an answer starting with `y`.
fn confirmed(snapshot: &crate::cluster::Snapshot, steps: u64) -> Result<bool, Error> {
    let masters: Vec<&str> = snapshot
        .masters
        .iter()
        .map(|m| m.address.as_str())
        .collect();
    eprint!(
        "ach-redis: rebalance {} masters ({}) for up to {steps} steps? [y/N] ",
        masters.len(),
        masters.join(", ")
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|source| Error::File {
            path: "stdin".into(),
            source,
        })?;
    Ok(answer.trim_start().starts_with(['y', 'Y']))
}

/// Connects, picks the backend and, with `--enable-slot-stats`, turns on the per-slot
/// counters.
fn connect(common: &Common) -> Result<Cluster, Error> {
    let mut cluster = Cluster::connect_with(
        &common.cluster,
        ConnectOptions {
            timeout: Duration::from_millis(common.timeout_ms),
            backend: common.backend,
            security: common.security.security()?,
        },
    )?;
    if common.enable_slot_stats {
        let snapshot = cluster.snapshot()?;
        cluster
            .backend()
            .enable_slot_stats(&mut cluster, &snapshot)?;
    }
    Ok(cluster)
}

/// Observes once over `--sample-ms` (see [`observe_once`]).
fn observe_once_with(
    cluster: &mut Cluster,
    common: &Common,
    algorithm: Entry,
    parameters: Vec<(String, f64)>,
) -> Result<(Controller, Observed), Error> {
    let controller = Controller::new(control_options(common, algorithm, parameters, 1.0)?)?
        .with_node_telemetry(common.telemetry.source()?)
        .showing_drained_masters();
    observe_once(controller, cluster, Duration::from_millis(common.sample_ms))
}

fn execute(cli: Cli, catalogue: &Catalogue) -> Result<u8, Error> {
    match cli.command {
        Command::Status { common, json } => status(&common, json),
        Command::Plan { common, step, json } => plan(&common, &step, json, catalogue),
        Command::Rebalance(args) => rebalance(args, catalogue),
        Command::Fix {
            common,
            force_with_unreachable: true,
        } => fix_with_unreachable(&common),
        Command::Fix { common, .. } => fix(&common),
    }
}

/// `status`: the cluster's nodes, slots and loads, as text or JSON.
fn status(common: &Common, json: bool) -> Result<u8, Error> {
    let mut cluster = connect(common)?;
    let mut snapshot = cluster.snapshot()?;
    let observed = if snapshot.healthy() {
        // Observing plans nothing: any algorithm does; A0's never moves a token.
        let observer = Catalogue::built_in()
            .get(names::STATIC_W)
            .cloned()
            .expect("a built-in");
        // The cluster can turn degraded between the two samples (a slot switching
        // owner while gossip spreads it): then the status of a degraded cluster.
        match observe_once_with(&mut cluster, common, observer, Vec::new()) {
            Ok((_, observed)) => Some(observed),
            Err(Error::Degraded(problems)) => {
                snapshot.problems = problems;
                None
            }
            Err(error) => return Err(error),
        }
    } else {
        None
    };
    if json {
        let value = serde_json::json!({ "snapshot": snapshot, "observed": observed });
        println!("{value:#}");
    } else {
        print!("{}", status_text(&snapshot, observed.as_ref()));
    }
    Ok(0)
}

/// `plan`: the first step of `rebalance` with the same options, moving nothing.
fn plan(common: &Common, step: &StepArgs, json: bool, catalogue: &Catalogue) -> Result<u8, Error> {
    let options = step_options(common, step, catalogue)?;
    let controller = Controller::new(options)?
        .with_node_telemetry(common.telemetry.source()?)
        .with_slot_choice(step.slot_choice);
    let mut cluster = connect(common)?;
    let (mut controller, observed) = observe_once(
        controller,
        &mut cluster,
        Duration::from_millis(common.sample_ms),
    )?;
    let mut plan = controller.plan(&observed)?;
    name_hash_tags(&mut cluster, &observed.snapshot, &mut plan.notable_slots);
    if json {
        let value = serde_json::json!({ "observed": observed, "plan": plan });
        println!("{value:#}");
    } else {
        print!("{}", status_text(&observed.snapshot, Some(&observed)));
        print!("{}", plan_text(&plan));
    }
    Ok(0)
}

/// `rebalance`: the control loop, after its checks and, on a terminal, the operator's yes.
fn rebalance(args: RebalanceArgs, catalogue: &Catalogue) -> Result<u8, Error> {
    let RebalanceArgs {
        common,
        steps,
        interval_ms,
        until_balanced,
        max_keys_per_second,
        yes,
        step,
        log,
        batch,
        atomic_from_keys,
        metrics_addr,
        pause_at,
    } = args;
    // The endpoint starts first: a port in use stops the run before anything moves.
    let metrics = Arc::new(Metrics::new());
    let _server = match &metrics_addr {
        Some(address) => Some(
            MetricsServer::start(address, Arc::clone(&metrics))
                .map_err(|e| Error::Input(e.to_string()))?,
        ),
        None => None,
    };
    let rules = RunRules {
        until_balanced,
        max_keys_per_second,
        show_eta: std::io::stderr().is_terminal(),
    };
    check_rules(&rules)?;
    let mut options = step_options(&common, &step, catalogue)?;
    options.migration = MigrationOptions {
        batch: batch as usize,
        pause_at,
        atomic_from_keys,
        ..MigrationOptions::default()
    };
    let migration = options.migration;
    let (horizon, m_horizon) = (options.ach.horizon, options.ach.m_horizon);
    let mut controller = Controller::new(options)?
        .with_node_telemetry(common.telemetry.source()?)
        .with_slot_choice(step.slot_choice);
    let (mut cluster, snapshot) = connect_to_rebalance(&common, &controller)?;
    if !yes && std::io::stdin().is_terminal() && !confirmed(&snapshot, steps)? {
        println!("rebalance not confirmed: nothing moved");
        return Ok(0);
    }
    let mut log_file = open_log(log.as_deref())?;
    let stop = stop_on_ctrl_c();
    let outputs = LoopOutputs {
        log: &mut log_file,
        progress: &mut std::io::stderr(),
        metrics: metrics_addr.as_ref().map(|_| LoopMetrics {
            metrics: &metrics,
            horizon,
            m_horizon,
        }),
    };
    let options = LoopOptions {
        steps,
        interval: Duration::from_millis(interval_ms),
    };
    let summary = run_with_summary(
        &mut cluster,
        &mut controller,
        options,
        rules,
        &migration,
        &stop,
        outputs,
    )?;
    println!("rebalance done: {} keys moved", summary.keys_moved);
    print!("{}", summary.text());
    Ok(summary.exit_code())
}

/// Connects to the cluster `rebalance` moves slots in, and checks before anything moves
/// that it is healthy or [`fixable`](Snapshot::fixable), that the controller can weigh its
/// masters and that its telemetry reads them.
fn connect_to_rebalance(
    common: &Common,
    controller: &Controller,
) -> Result<(Cluster, Snapshot), Error> {
    let mut cluster = connect(common)?;
    let snapshot = cluster.snapshot()?;
    if !snapshot.fixable() {
        return Err(Error::Degraded(snapshot.problems));
    }
    controller.relative_weights(&snapshot)?;
    controller.check_telemetry(&snapshot)?;
    Ok((cluster, snapshot))
}

/// `--until-balanced` and `--max-keys-per-second` by their rules.
fn check_rules(rules: &RunRules) -> Result<(), Error> {
    if let Some(tolerance) = rules.until_balanced
        && !(tolerance.is_finite() && tolerance >= 0.0)
    {
        return Err(Error::Input(format!(
            "--until-balanced {tolerance}: must be a finite number >= 0"
        )));
    }
    if let Some(rate) = rules.max_keys_per_second
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(Error::Input(format!(
            "--max-keys-per-second {rate}: must be a finite number > 0"
        )));
    }
    Ok(())
}

/// The step log of `--log`, created (or emptied), or nowhere.
fn open_log(log: Option<&std::path::Path>) -> Result<Box<dyn Write>, Error> {
    Ok(match log {
        Some(path) => Box::new(std::fs::File::create(path).map_err(|source| Error::File {
            path: path.display().to_string(),
            source,
        })?),
        None => Box::new(std::io::sink()),
    })
}

/// A flag that Ctrl-C sets: the loop stops after the slot in flight.
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = Arc::clone(&stop);
    let _ = ctrlc::set_handler(move || {
        eprintln!(
            "ach-redis: stopping after the slot in flight (a running atomic job is \
             cancelled)"
        );
        handler_stop.store(true, Ordering::SeqCst);
    });
    stop
}

/// `fix`: every open slot of a healthy cluster closed.
fn fix(common: &Common) -> Result<u8, Error> {
    let mut cluster = connect(common)?;
    let actions = cluster
        .backend()
        .fix(&mut cluster, &MigrationOptions::default())?;
    if actions.is_empty() {
        println!("fix: no open slot");
    }
    report_fix(&actions, &mut std::io::stdout());
    Ok(0)
}
