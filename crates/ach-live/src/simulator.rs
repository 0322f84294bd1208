//! The live scenario run through the simulator with matching parameters: the same nodes and
//! capacities, one token per slot dealt out as the live cluster deals its slots, the live
//! workload's own keys (each on its slot, each with the share of the requests the clients'
//! streams give it, in the hot-key phase too: [`key_table`]), the same read/write mix, steps
//! and load step, and the same algorithms (`redis-cli --cluster rebalance`, which gives slots in
//! proportion to the weights once, is the simulator's Static-Wt under the name `redis-cli`).
//! Calibrated: each class serves the demand per step that was measured for it before the arms
//! ([`calibration`]), so the simulator's `D_true` is in the live ground truth's unit.

use ach_baselines::RedisCliRebalance;
use ach_ring::NodeId;
use ach_sim::algorithms::AlgorithmInfo;
use ach_sim::config::{
    ClusterConfig, Degradation, HotKeys, InitialLayout, LoadProfile, TelemetryParams,
};
use ach_sim::keys::KeyTable;
use ach_sim::{Profile, Registry, RunSpec, SeriesConfig};

use crate::calibrate::ServiceRate;
use crate::error::SimulatorError;
use crate::experiment::{LiveConfig, REDIS_CLI};
use crate::listing::Listing;
use crate::pace::ArmCalibration;

/// Mean utilisation of the simulated cluster before the load step: the paper's C1 level
/// (1437.5 requests per step over 10 nodes of total capacity 5.95 at 350 requests each).
pub const BASE_UTILISATION: f64 = 1437.5 / (350.0 * 5.95);

/// The algorithm registry of the live experiment: the built-in algorithms and `redis-cli`,
/// which the simulator runs as [`RedisCliRebalance`] with the capacities as weights, as the
/// live arm does (the report draws it grey, with a cross), its nodes listed in node order.
pub fn registry() -> Registry {
    registry_listing(None)
}

/// [`registry`] with `redis-cli` taking the nodes in `listing` order (simulator nodes; `None`:
/// node order), the order a live run's `redis-cli` showed ([`crate::listing`]).
pub fn registry_listing(listing: Option<Vec<u32>>) -> Registry {
    let mut registry = Registry::built_in();
    registry
        .register(
            AlgorithmInfo::new(REDIS_CLI, REDIS_CLI),
            move |config: &SeriesConfig| {
                let capacities = config.cluster.classes.iter().map(|c| c.capacity());
                let rebalance = match &listing {
                    None => RedisCliRebalance::new(capacities.collect()),
                    Some(listing) => RedisCliRebalance::listed(
                        capacities.collect(),
                        listing.iter().copied().map(NodeId).collect(),
                    )?,
                };
                Ok(Box::new(rebalance) as _)
            },
        )
        .expect("redis-cli is a new, valid name");
    registry
}

/// The service rates of the simulated cluster, calibrated to the measured ones: the rate of a
/// node of capacity 1 (`mu_base`, in demand per step) and, for every node whose class's
/// measured rate is not `capacity * mu_base`, a degradation at step 0 by the factor that makes
/// it so. Without measured rates (none given), the paper's utilisation at the base rate.
pub fn calibration(config: &LiveConfig, rates: &[ServiceRate]) -> (f64, Vec<Degradation>) {
    let interval_s = config.interval_ms as f64 / 1000.0;
    let classes = config.classes();
    let Some(reference) = rates.first() else {
        let capacity: f64 = classes.iter().map(|c| c.capacity()).sum();
        let lambda = config.rate * interval_s;
        return (lambda / (capacity * BASE_UTILISATION), Vec::new());
    };
    let mu_base = reference.demand_per_s * interval_s / reference.class.capacity();
    let mut degradation: Vec<Degradation> = Vec::new();
    for rate in rates {
        let factor = rate.demand_per_s * interval_s / (rate.class.capacity() * mu_base);
        let nodes: Vec<u32> = (0..classes.len() as u32)
            .filter(|&i| classes[i as usize] == rate.class)
            .collect();
        if (factor - 1.0).abs() > 1e-12 && !nodes.is_empty() {
            degradation.push(Degradation {
                t: 0,
                nodes,
                factor,
            });
        }
    }
    (mu_base, degradation)
}

/// The series the simulator runs for `config`, with the service rates `rates` measured
/// before the arms (the paper's utilisation when empty) and the clock and readings `arms`
/// measured in the arms ([`crate::pace`]; empty: every plan switches at once and every
/// algorithm reads the model's loads).
pub fn series(config: &LiveConfig, rates: &[ServiceRate], arms: &ArmCalibration) -> SeriesConfig {
    let steps = config.steps();
    let workload = config.workload(0);
    let classes = config.classes();
    let lambda = config.rate * config.interval_ms as f64 / 1000.0;
    let (mu_base, degradation) = calibration(config, rates);
    SeriesConfig {
        name: "live".into(),
        description: "The live experiment's scenario in the simulator".into(),
        runs: config.repeats,
        steps,
        warmup: config.warmup(),
        seed_base: config.seed,
        seed_stride: 1,
        tokens: tokens(config),
        keys: config.keys,
        zipf_s: workload.zipf_s,
        write_fraction: workload.write_fraction,
        algorithms: config.arms.iter().map(|a| a.name().to_string()).collect(),
        cluster: ClusterConfig { classes, mu_base },
        degradation,
        load: LoadProfile::StepPeriodic {
            lambda,
            high: lambda * workload.step_factor,
            step_at: (f64::from(steps) * workload.step_at).round() as u32,
            periodic_from: steps,
            amplitude: 0.0,
            period: 1.0,
        },
        ach: config.ach_config(),
        telemetry: telemetry_params(config),
        hot_keys: hot_phase(config),
        pacing: arms.pacing.clone(),
        readings: arms.readings.clone(),
        initial_layout: InitialLayout::Contiguous,
        key_table: Some(key_table(config)),
        ..SeriesConfig::default()
    }
}

/// The simulator's telemetry: the paper's, with the rebalancers' smoothing factor for what
/// its algorithms read when [`LiveConfig::beta`] is not the paper's (the truth keeps it).
fn telemetry_params(config: &LiveConfig) -> TelemetryParams {
    let paper = TelemetryParams::default();
    TelemetryParams {
        controller_beta: (config.beta != paper.beta).then_some(config.beta),
        ..paper
    }
}

/// The live workload's keys as the simulator's key table: each key on its slot's token, with
/// the shares of the requests `config`'s clients give it, the hot keys in the initial slots
/// of the hot node (the live cluster deals its slots out as
/// [`ach_redis::local::even_slot_ranges`], the simulator's contiguous layout). One token per
/// slot; with fewer keys than slots, [`tokens`] of them, slot `s` on token
/// `floor(s * tokens / 16384)` (the paper's profile draws a token's position from a key's).
pub fn key_table(config: &LiveConfig) -> KeyTable {
    let workload = config.workload(0);
    let hot_slots = ach_redis::local::even_slot_ranges(config.nodes)[config.hot_node()];
    let mut table = workload.key_table(&workload.hot_keys_in(hot_slots));
    let (tokens, slots) = (tokens(config) as u64, ach_redis::slot::SLOT_COUNT as u64);
    if tokens < slots {
        for token in &mut table.tokens {
            *token = (u64::from(*token) * tokens / slots) as u32;
        }
    }
    table
}

/// The simulator's tokens for `config`: one per slot, or one per key with fewer keys.
pub fn tokens(config: &LiveConfig) -> usize {
    ach_redis::slot::SLOT_COUNT.min(config.keys)
}

/// The live workload's hot-key phase in the simulator: the same steps, share and number of
/// keys, on the node the live hot keys start on (the first medium node, a weak one if none);
/// `None` when the phase spans no whole step.
fn hot_phase(config: &LiveConfig) -> Option<HotKeys> {
    let workload = config.workload(0);
    let steps = f64::from(config.steps());
    let step_of = |fraction: f64| (steps * fraction).round() as u32;
    let (from, to) = (step_of(workload.hot_phase.0), step_of(workload.hot_phase.1));
    let node = config.hot_node();
    (from < to).then_some(HotKeys {
        from,
        to,
        share: workload.hot_share,
        keys: workload.hot_keys,
        node,
    })
}

/// One algorithm in one simulated run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SimArm {
    /// Algorithm name.
    pub algorithm: String,
    /// Run index (repeat).
    pub repeat: u32,
    /// Mean true imbalance after the warm-up (`D_true`; the observed one without noise).
    pub d_bar: f64,
    /// Cumulative cost over every step, as keys (`M_keys` times the keys).
    pub keys_moved: f64,
    /// `D(t)` every step.
    pub d_trace: Vec<f64>,
    /// Cumulative keys moved every step.
    pub keys_moved_trace: Vec<f64>,
}

/// Runs the series once per repeat, calibrated with `rates` and `arms`.
pub fn run(
    config: &LiveConfig,
    rates: &[ServiceRate],
    arms: &ArmCalibration,
) -> Result<Vec<SimArm>, SimulatorError> {
    run_series(&series(config, rates, arms), &arms.redis_cli_listings)
}

/// Runs `series` (a [`series`], perhaps read back from a summary) once per run, `redis-cli`
/// taking the nodes in the order `listings` give for the run's repeat (node order for a
/// repeat they do not list).
pub fn run_series(
    series: &SeriesConfig,
    listings: &[Listing],
) -> Result<Vec<SimArm>, SimulatorError> {
    series
        .validate_with(Profile::Paper, &registry())
        .map_err(|e| SimulatorError(e.to_string()))?;
    let mut arms = Vec::new();
    for repeat in 0..series.runs {
        let listing = listings.iter().find(|l| l.repeat == repeat);
        let registry = registry_listing(listing.map(|l| l.nodes.clone()));
        let spec = RunSpec {
            config: series,
            point: None,
            profile: Profile::Paper,
            run_index: repeat,
        };
        let record = ach_sim::run::simulate_with(&spec, &registry)
            .map_err(|e| SimulatorError(e.to_string()))?;
        for algorithm in record.algorithms {
            let mut total = 0.0;
            let keys_moved_trace: Vec<f64> = algorithm
                .m_trace
                .iter()
                .map(|m| {
                    total += m * series.keys as f64;
                    total
                })
                .collect();
            arms.push(SimArm {
                algorithm: algorithm.name,
                repeat,
                d_bar: algorithm.aggregates.d_true_mean,
                // Every step counts, as in the live arm (M_cum leaves out the warm-up).
                keys_moved: keys_moved_trace.last().copied().unwrap_or(0.0),
                d_trace: if algorithm.d_true_trace.is_empty() {
                    algorithm.d_trace
                } else {
                    algorithm.d_true_trace
                },
                keys_moved_trace,
            });
        }
    }
    Ok(arms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulators_contiguous_layout_is_the_live_clusters() {
        let slots = ach_redis::slot::SLOT_COUNT;
        for nodes in 1..=16 {
            let owners = InitialLayout::Contiguous.owners(slots, nodes);
            for (node, (first, last)) in ach_redis::local::even_slot_ranges(nodes)
                .into_iter()
                .enumerate()
            {
                let owned: Vec<usize> = (0..slots)
                    .filter(|&s| owners[s].0 as usize == node)
                    .collect();
                assert_eq!(owned.first(), Some(&usize::from(first)), "{nodes} nodes");
                assert_eq!(owned.last(), Some(&usize::from(last)), "{nodes} nodes");
                assert_eq!(owned.len(), usize::from(last - first) + 1, "{nodes} nodes");
            }
        }
    }

    #[test]
    fn the_series_carries_the_live_keys_and_layout() {
        let config = LiveConfig::default();
        let series = series(&config, &[], &ArmCalibration::default());
        assert_eq!(series.initial_layout, InitialLayout::Contiguous);
        let table = series.key_table.as_ref().unwrap();
        assert_eq!(table.tokens.len(), config.keys);
        assert_eq!(series.tokens, ach_redis::slot::SLOT_COUNT);
        // The hot keys get their share in the phase, on the hot node's initial slots.
        let hot = series.hot_keys.as_ref().unwrap();
        let (first, last) = ach_redis::local::even_slot_ranges(config.nodes)[hot.node];
        let hot_weights = table.hot_weights.as_ref().unwrap();
        let on_hot_node = |weights: &[f64]| -> f64 {
            (0..config.keys)
                .filter(|&k| (u32::from(first)..=u32::from(last)).contains(&table.tokens[k]))
                .map(|k| weights[k])
                .sum()
        };
        let gain = on_hot_node(hot_weights) - on_hot_node(&table.weights);
        assert!(gain > 0.2 && gain < config.workload(0).hot_share, "{gain}");
        series.validate_with(Profile::Paper, &registry()).unwrap();
    }

    #[test]
    fn the_rebalancers_smoothing_is_the_simulated_algorithms_and_not_the_truths() {
        let paper = series(&LiveConfig::default(), &[], &ArmCalibration::default());
        assert_eq!(paper.telemetry, TelemetryParams::default());
        let raw = LiveConfig {
            beta: 1.0,
            ..LiveConfig::default()
        };
        assert_eq!(raw.controllers_telemetry().beta, 1.0);
        let series = series(&raw, &[], &ArmCalibration::default());
        assert_eq!(series.telemetry.controllers(), raw.controllers_telemetry());
        assert_eq!(
            series.telemetry.config(),
            ach_telemetry::TelemetryConfig::paper()
        );
    }

    #[test]
    fn with_fewer_keys_than_slots_a_token_takes_neighbouring_slots() {
        let config = LiveConfig {
            keys: 2_000,
            ..LiveConfig::default()
        };
        let series = series(&config, &[], &ArmCalibration::default());
        assert_eq!(series.tokens, 2_000);
        let table = series.key_table.as_ref().unwrap();
        let slot = u32::from(ach_redis::slot::key_slot(b"k:0"));
        assert_eq!(table.tokens[0], slot * 2_000 / 16_384);
        series.validate_with(Profile::Paper, &registry()).unwrap();
        run_series(&SeriesConfig { runs: 1, ..series }, &[]).expect("it runs");
    }
}
