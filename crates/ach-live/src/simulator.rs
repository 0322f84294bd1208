//! The live scenario run through the simulator with matching parameters: the same nodes and
//! capacities, one token per slot, the same keys, Zipf exponent, read/write mix, steps and load
//! step, and the same algorithms (`redis-cli --cluster rebalance`, which gives slots in
//! proportion to the weights once, is the simulator's Static-Wt under the name `redis-cli`).

use ach_baselines::StaticWt;
use ach_redis::control::live_ach_config;
use ach_sim::algorithms::AlgorithmInfo;
use ach_sim::config::{ClusterConfig, LoadProfile};
use ach_sim::{Profile, Registry, RunSpec, SeriesConfig};

use crate::error::SimulatorError;
use crate::experiment::{LiveConfig, REDIS_CLI};

/// Mean utilisation of the simulated cluster before the load step: the paper's C1 level
/// (1437.5 requests per step over 10 nodes of total capacity 5.95 at 350 requests each).
pub const BASE_UTILISATION: f64 = 1437.5 / (350.0 * 5.95);

/// The algorithm registry of the live experiment: the built-in algorithms and `redis-cli`,
/// which the simulator runs as Static-Wt (the report draws it grey, with a cross).
pub fn registry() -> Registry {
    let mut registry = Registry::built_in();
    registry
        .register(
            AlgorithmInfo::new(REDIS_CLI, REDIS_CLI),
            |config: &SeriesConfig| {
                let capacities = config.cluster.classes.iter().map(|c| c.capacity());
                Ok(Box::new(StaticWt::new(capacities.collect())) as _)
            },
        )
        .expect("redis-cli is a new, valid name");
    registry
}

/// The series the simulator runs for `config`.
pub fn series(config: &LiveConfig) -> SeriesConfig {
    let steps = config.steps();
    let workload = config.workload(0);
    let classes = config.classes();
    let capacity: f64 = classes.iter().map(|c| c.capacity()).sum();
    let lambda = config.rate * config.interval_ms as f64 / 1000.0;
    SeriesConfig {
        name: "live".into(),
        description: "The live experiment's scenario in the simulator".into(),
        runs: config.repeats,
        steps,
        warmup: config.warmup(),
        seed_base: config.seed,
        seed_stride: 1,
        tokens: ach_redis::slot::SLOT_COUNT.min(config.keys),
        keys: config.keys,
        zipf_s: workload.zipf_s,
        write_fraction: workload.write_fraction,
        algorithms: config.arms.iter().map(|a| a.name().to_string()).collect(),
        cluster: ClusterConfig {
            classes,
            mu_base: lambda / (capacity * BASE_UTILISATION),
        },
        load: LoadProfile::StepPeriodic {
            lambda,
            high: lambda * workload.step_factor,
            step_at: (f64::from(steps) * workload.step_at).round() as u32,
            periodic_from: steps,
            amplitude: 0.0,
            period: 1.0,
        },
        ach: live_ach_config(),
        ..SeriesConfig::default()
    }
}

/// One algorithm in one simulated run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SimArm {
    /// Algorithm name.
    pub algorithm: String,
    /// Run index (repeat).
    pub repeat: u32,
    /// Mean observed imbalance after the warm-up.
    pub d_bar: f64,
    /// Cumulative cost over every step, as keys (`M_keys` times the keys).
    pub keys_moved: f64,
    /// `D(t)` every step.
    pub d_trace: Vec<f64>,
    /// Cumulative keys moved every step.
    pub keys_moved_trace: Vec<f64>,
}

/// Runs the series once per repeat.
pub fn run(config: &LiveConfig) -> Result<Vec<SimArm>, SimulatorError> {
    let series = series(config);
    let registry = registry();
    series
        .validate_with(Profile::Paper, &registry)
        .map_err(|e| SimulatorError(e.to_string()))?;
    let specs: Vec<RunSpec<'_>> = (0..config.repeats)
        .map(|run_index| RunSpec {
            config: &series,
            point: None,
            profile: Profile::Paper,
            run_index,
        })
        .collect();
    let mut arms = Vec::new();
    for (repeat, record) in ach_sim::run::simulate_group_with(&specs, &registry)
        .into_iter()
        .enumerate()
    {
        let record = record.map_err(|e| SimulatorError(e.to_string()))?;
        for algorithm in record.algorithms {
            let mut total = 0.0;
            let keys_moved_trace: Vec<f64> = algorithm
                .m_trace
                .iter()
                .map(|m| {
                    total += m * config.keys as f64;
                    total
                })
                .collect();
            arms.push(SimArm {
                algorithm: algorithm.name,
                repeat: repeat as u32,
                d_bar: algorithm.aggregates.d_mean,
                // Every step counts, as in the live arm (M_cum leaves out the warm-up).
                keys_moved: keys_moved_trace.last().copied().unwrap_or(0.0),
                d_trace: algorithm.d_trace,
                keys_moved_trace,
            });
        }
    }
    Ok(arms)
}
