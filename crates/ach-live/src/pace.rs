//! The calibrated simulator's clock, measured in the run: how long the live rebalance loop's
//! control steps and migrations took, and how fast `redis-cli` moved keys, as the simulator's
//! [`Pacing`] (see [`ach_sim::pacing`]).
//!
//! The figures are pooled, the same for every arm of a kind: one clock for all the rebalance
//! loop's arms (from every step of every loop log: a control step's time besides its
//! migrations, and a least-squares line of a migration's milliseconds over its keys) and one
//! rate for `redis-cli` (its keys moved by the end of each run over the time it took). They
//! say how the platform moves slots, not how well an arm balanced.

use ach_sim::config::NodeClass;
use ach_sim::pacing::{JobGrouping, Pacing};
use ach_sim::reading::Reading;

use crate::experiment::{LiveResults, REDIS_CLI};
use crate::listing::{self, Listing, RunNode};
use crate::readings::{self, ClassReading, LoopReadings};

/// What the run's arms measured for the calibrated simulator: their clock and what the
/// rebalance loop read of each class, and the simulator's pacing and readings from them.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ArmCalibration {
    /// The clock.
    pub pace: MeasuredPace,
    /// The loop's reading of each class against the truth ([`crate::readings`]).
    pub class_readings: Vec<ClassReading>,
    /// The simulator's pacing of the arms.
    pub pacing: Vec<Pacing>,
    /// The simulator's readings of the nodes.
    pub readings: Vec<Reading>,
    /// The order `redis-cli` took the nodes in, in each repeat whose output and masters
    /// show it ([`crate::listing`]); the simulated run of a repeat without one lists the
    /// nodes in node order.
    #[serde(default)]
    pub redis_cli_listings: Vec<Listing>,
}

/// The calibration measured in `results`: the rebalance loop's arms (those with a step
/// log) and `redis-cli` paced, every node read as the loop read its class.
pub fn of_results(results: &LiveResults) -> ArmCalibration {
    let keys: Vec<Vec<u64>> = results
        .runs
        .iter()
        .map(|run| run.steps.iter().map(|s| s.keys_moved).collect())
        .collect();
    let true_loads: Vec<Vec<Vec<f64>>> = results
        .runs
        .iter()
        .map(|run| run.steps.iter().map(|s| s.true_loads.clone()).collect())
        .collect();
    let nodes: Vec<Vec<(String, NodeClass)>> = results
        .runs
        .iter()
        .map(|run| {
            run.nodes
                .iter()
                .map(|n| (n.address.clone(), n.class))
                .collect()
        })
        .collect();
    let initial_slots: Vec<Vec<Option<(u16, u16)>>> = results
        .runs
        .iter()
        .map(|run| run.nodes.iter().map(|n| n.initial_slots).collect())
        .collect();
    let steps: Vec<Vec<serde_json::Value>> = results
        .runs
        .iter()
        .map(|run| crate::cadence::step_events(&run.rebalance_log))
        .collect();
    let traces: Vec<ArmTrace<'_>> = (0..results.runs.len())
        .map(|k| ArmTrace {
            algorithm: &results.runs[k].algorithm,
            repeat: results.runs[k].repeat,
            steps: &steps[k],
            output: &results.runs[k].rebalance_log,
            keys_moved: &keys[k],
            nodes: &nodes[k],
            initial_slots: &initial_slots[k],
            true_loads: &true_loads[k],
        })
        .collect();
    let config = &results.config;
    let algorithms: Vec<String> = config.arms.iter().map(|a| a.name().to_string()).collect();
    let cluster = Cluster {
        interval_s: config.interval_ms as f64 / 1000.0,
        warmup: config.warmup() as usize,
        algorithms: &algorithms,
        classes: &config.classes(),
    };
    of_traces(&cluster, &traces)
}

/// The run a calibration is for: its steps, warm-up, algorithms and the simulated cluster's
/// classes (node `i` of class `classes[i]`).
#[derive(Clone, Copy, Debug)]
pub struct Cluster<'a> {
    /// Seconds per step (the control interval).
    pub interval_s: f64,
    /// Steps left out of the readings' fit.
    pub warmup: usize,
    /// The series' algorithms.
    pub algorithms: &'a [String],
    /// The simulated cluster's classes.
    pub classes: &'a [NodeClass],
}

/// [`of_results`] from the arms' traces (of a saved output folder, say).
pub fn of_traces(cluster: &Cluster<'_>, traces: &[ArmTrace<'_>]) -> ArmCalibration {
    let interval_s = cluster.interval_s;
    let pace = MeasuredPace::of(traces, interval_s);
    let mut loop_arms: Vec<String> = Vec::new();
    let mut loops: Vec<LoopReadings<'_>> = Vec::new();
    for trace in traces {
        let is_loop = trace.algorithm != REDIS_CLI && !trace.steps.is_empty();
        if !is_loop {
            continue;
        }
        loops.push(LoopReadings {
            steps: trace.steps,
            nodes: trace.nodes,
            true_loads: trace.true_loads,
        });
        if !loop_arms.iter().any(|a| a == trace.algorithm) {
            loop_arms.push(trace.algorithm.to_string());
        }
    }
    let redis_cli = cluster.algorithms.iter().any(|a| a == REDIS_CLI);
    let class_readings = readings::measure(&loops, interval_s, cluster.warmup);
    ArmCalibration {
        pacing: pace.pacing(&loop_arms, redis_cli, interval_s),
        readings: readings::readings(&class_readings, cluster.classes),
        pace,
        class_readings,
        redis_cli_listings: redis_cli_listings(traces, cluster.classes),
    }
}

/// The listing of every `redis-cli` run whose output and masters show it, over the
/// simulator's nodes of `classes`.
fn redis_cli_listings(traces: &[ArmTrace<'_>], classes: &[NodeClass]) -> Vec<Listing> {
    let nodes = classes.len();
    let weights: Vec<f64> = classes.iter().map(|c| c.capacity()).collect();
    let mut listings = Vec::new();
    for trace in traces.iter().filter(|t| t.algorithm == REDIS_CLI) {
        let masters: Vec<RunNode<'_>> = trace
            .nodes
            .iter()
            .zip(trace.initial_slots)
            .map(|((address, _), &slots)| RunNode {
                address,
                simulator_node: listing::simulator_node(slots, nodes),
            })
            .collect();
        let transfers = listing::transfers(trace.output);
        if let Some(order) = listing::listing(&transfers, &masters, &weights) {
            listings.push(Listing {
                repeat: trace.repeat,
                nodes: order,
            });
        }
    }
    listings.sort_by_key(|l| l.repeat);
    listings
}

/// One arm run's traces the clock is measured from.
#[derive(Clone, Copy, Debug)]
pub struct ArmTrace<'a> {
    /// The arm's algorithm.
    pub algorithm: &'a str,
    /// The repeat.
    pub repeat: u32,
    /// Its rebalance loop's step events ([`crate::cadence::step_events`]; none for
    /// `redis-cli`, whose output is not a loop's log).
    pub steps: &'a [serde_json::Value],
    /// Its rebalancer's output: the loop's log, or what `redis-cli` printed.
    pub output: &'a str,
    /// Keys in slots that changed owner by each step, cumulative.
    pub keys_moved: &'a [u64],
    /// Every master's address and class, in the order of `true_loads`.
    pub nodes: &'a [(String, NodeClass)],
    /// Every master's initial slots, in the same order (`None`: not recorded).
    pub initial_slots: &'a [Option<(u16, u16)>],
    /// Every step's true loads.
    pub true_loads: &'a [Vec<f64>],
}

/// What the run's traces say about the clock.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeasuredPace {
    /// Control steps whose time to the next one was measured.
    pub control_steps: usize,
    /// Mean seconds from a control step's start to the next one's, besides its migrations.
    pub control_cycle_s: Option<f64>,
    /// Migrations measured.
    pub migrations: usize,
    /// Seconds a migration takes besides its keys (the line's intercept).
    pub job_s: Option<f64>,
    /// Seconds a migration takes per key (the line's slope, 0 when the fit gives less).
    pub key_s: Option<f64>,
    /// Keys `redis-cli` moved by the end of its runs, and the seconds that took.
    pub redis_cli_keys: u64,
    /// The seconds of that.
    pub redis_cli_s: f64,
}

impl MeasuredPace {
    /// The clock of `traces`, for steps of `step_s` seconds.
    pub fn of(traces: &[ArmTrace<'_>], step_s: f64) -> MeasuredPace {
        let mut cycles: Vec<f64> = Vec::new();
        let mut migrations: Vec<(f64, f64)> = Vec::new();
        let mut measured = MeasuredPace::default();
        for trace in traces {
            if trace.algorithm == REDIS_CLI {
                let last = trace.keys_moved.last().copied().unwrap_or(0);
                let steps = trace.keys_moved.iter().position(|&k| k == last);
                if let (true, Some(steps)) = (last > 0, steps) {
                    measured.redis_cli_keys += last;
                    measured.redis_cli_s += (steps + 1) as f64 * step_s;
                }
            } else {
                loop_samples(trace.steps, &mut cycles, &mut migrations);
            }
        }
        // Sorted, so that the sums do not depend on the order the runs come in.
        cycles.sort_by(f64::total_cmp);
        migrations.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        measured.control_steps = cycles.len();
        measured.control_cycle_s = mean(&cycles);
        measured.migrations = migrations.len();
        if let Some((intercept, slope)) = least_squares(&migrations) {
            measured.job_s = Some(intercept.max(0.0) / 1000.0);
            measured.key_s = Some(slope.max(0.0) / 1000.0);
        }
        measured
    }

    /// The simulator's pacing for the loop arms `loop_arms` and the `redis-cli` arm (when the
    /// series runs it): the loop waits `interval_s` after its migrations (the rest of a cycle
    /// is its control time) and runs one job per (source, target) pair; `redis-cli` moves one
    /// slot at a time at its measured rate. A kind without measurements is not paced.
    pub fn pacing(&self, loop_arms: &[String], redis_cli: bool, interval_s: f64) -> Vec<Pacing> {
        let mut pacing = Vec::new();
        if let (Some(cycle), Some(job_s), Some(key_s), false) = (
            self.control_cycle_s,
            self.job_s,
            self.key_s,
            loop_arms.is_empty(),
        ) {
            pacing.push(Pacing {
                algorithms: loop_arms.to_vec(),
                step_s: interval_s,
                control_s: (cycle - interval_s).max(0.0),
                wait_s: interval_s,
                job_s,
                key_s,
                jobs: JobGrouping::SourceTarget,
            });
        }
        if redis_cli && self.redis_cli_keys > 0 {
            pacing.push(Pacing {
                algorithms: vec![REDIS_CLI.to_string()],
                step_s: interval_s,
                control_s: 0.0,
                wait_s: 0.0,
                job_s: 0.0,
                key_s: self.redis_cli_s / self.redis_cli_keys as f64,
                jobs: JobGrouping::Token,
            });
        }
        pacing
    }

    /// One paragraph for the report.
    pub fn describe(&self) -> String {
        let or_none = |value: Option<f64>, scale: f64, unit: &str| {
            value.map_or("not measured".to_string(), |v| {
                format!("{:.1} {unit}", v * scale)
            })
        };
        format!(
            "control step {} besides its migrations ({} steps); a migration {} plus {} per key \
             ({} migrations); redis-cli {} keys in {:.0} s",
            or_none(self.control_cycle_s, 1.0, "s"),
            self.control_steps,
            or_none(self.job_s, 1000.0, "ms"),
            or_none(self.key_s, 1000.0, "ms"),
            self.migrations,
            self.redis_cli_keys,
            self.redis_cli_s,
        )
    }
}

/// Adds a loop's cycles (seconds from each step's start to the next one's, less the earlier
/// step's migrations) and migrations (keys, milliseconds) to the samples.
fn loop_samples(
    steps: &[serde_json::Value],
    cycles: &mut Vec<f64>,
    migrations: &mut Vec<(f64, f64)>,
) {
    let mut previous: Option<(f64, f64)> = None;
    for event in steps {
        let Some(started_ms) = event["unix_ms"].as_f64() else {
            continue;
        };
        let mut migrating_ms = 0.0;
        for migration in event["outcome"]["migrations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (keys, millis) = (migration["keys"].as_f64(), migration["millis"].as_f64());
            if let (Some(keys), Some(millis)) = (keys, millis) {
                migrations.push((keys, millis));
                migrating_ms += millis;
            }
        }
        if let Some((earlier_ms, earlier_migrating_ms)) = previous {
            cycles.push((started_ms - earlier_ms - earlier_migrating_ms) / 1000.0);
        }
        previous = Some((started_ms, migrating_ms));
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The least-squares line `y = intercept + slope x` through `points`; a flat line through the
/// mean when every `x` is equal, `None` without points.
pub(crate) fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mean_x = mean(&points.iter().map(|p| p.0).collect::<Vec<_>>())?;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return Some((mean_y, 0.0));
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(unix_ms: u64, migrations: &[(u64, f64)]) -> String {
        let migrations: Vec<serde_json::Value> = migrations
            .iter()
            .map(|&(keys, millis)| serde_json::json!({"keys": keys, "millis": millis}))
            .collect();
        serde_json::json!({"event": "step", "unix_ms": unix_ms, "outcome": {"migrations": migrations}})
            .to_string()
    }

    #[test]
    fn pools_the_loops_cycles_and_fits_a_line_to_their_migrations() {
        // Cycles: 1.2 s, then 3.0 - 1.2 - 0.6 = 1.2 s, then 4.2 - 3.0 = 1.2 s. Migrations
        // (100 keys, 200 ms), (300 keys, 400 ms): 100 ms plus 1 ms per key.
        let log = [
            step(0, &[]),
            step(1200, &[(100, 200.0), (300, 400.0)]),
            step(3000, &[]),
            "not json".to_string(),
            step(4200, &[]),
        ]
        .join("\n");
        let cli_keys = [0, 50, 100, 100];
        let steps = crate::cadence::step_events(&log);
        let traces = [
            ArmTrace {
                algorithm: "ACH",
                repeat: 0,
                steps: &steps,
                output: &log,
                keys_moved: &[],
                nodes: &[],
                initial_slots: &[],
                true_loads: &[],
            },
            ArmTrace {
                algorithm: REDIS_CLI,
                repeat: 0,
                steps: &[],
                output: "",
                keys_moved: &cli_keys,
                nodes: &[],
                initial_slots: &[],
                true_loads: &[],
            },
        ];
        let measured = MeasuredPace::of(&traces, 1.0);
        assert_eq!((measured.control_steps, measured.migrations), (3, 2));
        assert!((measured.control_cycle_s.unwrap() - 1.2).abs() < 1e-12);
        assert!((measured.job_s.unwrap() - 0.1).abs() < 1e-12);
        assert!((measured.key_s.unwrap() - 0.001).abs() < 1e-12);
        // redis-cli's 100 keys were all moved by step 2: 3 s.
        assert_eq!((measured.redis_cli_keys, measured.redis_cli_s), (100, 3.0));
        let pacing = measured.pacing(&["ACH".into()], true, 1.0);
        assert_eq!(pacing.len(), 2);
        assert!((pacing[0].control_s - 0.2).abs() < 1e-12);
        assert_eq!(pacing[0].jobs, JobGrouping::SourceTarget);
        assert_eq!(pacing[1].algorithms, [REDIS_CLI]);
        assert!((pacing[1].key_s - 0.03).abs() < 1e-12);
        assert!(measured.describe().contains("redis-cli 100 keys in 3 s"));
    }

    #[test]
    fn nothing_measured_paces_nothing() {
        let measured = MeasuredPace::of(&[], 1.0);
        assert_eq!(measured, MeasuredPace::default());
        assert!(measured.pacing(&["ACH".into()], true, 1.0).is_empty());
        assert!(measured.describe().starts_with("control step not measured"));
        assert_eq!(least_squares(&[(5.0, 2.0), (5.0, 4.0)]), Some((3.0, 0.0)));
    }
}
