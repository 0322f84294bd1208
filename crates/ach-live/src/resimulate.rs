//! The calibrated simulator run again on a saved output folder (`cargo xtask live-resim
//! DIR`): the series its summary recorded, with the live workload's keys or the paper's drawn
//! ones, on either initial layout, as the paper models it (every plan switching at once, every
//! algorithm reading the model's loads), paced by the clock measured in its runs, paced and
//! reading each node on the line the loop read its class by, and calibrated (reading off the
//! line as the loop's readings scattered about it; see [`crate::pace`]), against the live
//! arms. A folder kept without its `runs/` can take the calibration saved in
//! an earlier resimulation ([`Options::calibration`]).

use std::path::{Path, PathBuf};

use ach_sim::SeriesConfig;
pub use ach_sim::config::InitialLayout;
use ach_sim::config::NodeClass;

use crate::error::ResimulateError;
use crate::experiment::LiveConfig;
use crate::pace::{self, ArmCalibration, ArmTrace};
use crate::readings::{ClassParts, ObservedStep, PartsRun, parts_by_class};
use crate::simulator::{self, SimArm};

/// One arm: its live D-bar true and the simulator's (means over the runs).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ArmAgreement {
    /// The algorithm.
    pub algorithm: String,
    /// The live mean over the repeats.
    pub live: f64,
    /// The simulator with every plan switching at once.
    pub instant: f64,
    /// The simulator paced by the measured clock.
    pub paced: f64,
    /// The simulator paced and reading on the lines the loop read by.
    pub lines: f64,
    /// The simulator paced and reading as the loop read, scatter included.
    pub calibrated: f64,
    /// `D_true(t)` of each, the mean over the runs at every step (live: from the folder's
    /// runs, empty for a folder kept without them).
    pub traces: Traces,
}

/// Mean `D_true(t)` over the runs, step by step.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Traces {
    /// The live arm's.
    pub live: Vec<f64>,
    /// The simulator's, every plan switching at once.
    pub instant: Vec<f64>,
    /// Paced.
    pub paced: Vec<f64>,
    /// Paced and reading on the lines.
    pub lines: Vec<f64>,
    /// Paced and reading as the loop read, scatter included.
    pub calibrated: Vec<f64>,
}

/// What the simulator says of a saved run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Resimulation {
    /// What the runs measured.
    pub calibration: ArmCalibration,
    /// The keys the simulator ran with.
    pub keys: Keys,
    /// The series the calibrated simulator ran (without the live keys' table).
    pub series: SeriesConfig,
    /// Every arm, in the summary's order.
    pub arms: Vec<ArmAgreement>,
    /// The parts of the observer's readings per arm and class against the truth (from the
    /// folder's runs; empty with a saved calibration).
    pub reading_parts: Vec<ClassParts>,
}

impl Resimulation {
    /// Writes the resimulation as JSON to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), ResimulateError> {
        let text = serde_json::to_string_pretty(self).expect("a resimulation serialises");
        std::fs::write(path, text + "\n").map_err(|source| ResimulateError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The keys the simulator runs with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keys {
    /// The live workload's own keys ([`simulator::key_table`]; what `live` simulates).
    #[default]
    Live,
    /// The keys as the paper draws them: seeded hash positions, Zipf ranks over all keys.
    Drawn,
}

impl std::str::FromStr for Keys {
    type Err = String;

    fn from_str(text: &str) -> Result<Keys, String> {
        match text {
            "live" => Ok(Keys::Live),
            "drawn" => Ok(Keys::Drawn),
            _ => Err(format!("{text:?}: must be \"live\" or \"drawn\"")),
        }
    }
}

/// How the simulator runs a saved folder again. The default is what `cargo xtask live`
/// simulates: the live keys on the contiguous layout, calibrated from the folder's runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Who owns each token at the start.
    pub layout: InitialLayout,
    /// The keys.
    pub keys: Keys,
    /// A resimulation's JSON (`--out` of an earlier `live-resim`) whose calibration is taken
    /// instead of measuring it in the folder's `runs/`, for a folder kept without them.
    pub calibration: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            layout: InitialLayout::Contiguous,
            keys: Keys::Live,
            calibration: None,
        }
    }
}

/// Runs the simulator again for the output folder `folder` of `cargo xtask live` as `options`
/// say.
pub fn resimulate(folder: &Path, options: &Options) -> Result<Resimulation, ResimulateError> {
    let summary_path = folder.join("summary.json");
    let summary: serde_json::Value = serde_json::from_str(&read(&summary_path)?)
        .map_err(|e| invalid(&summary_path, e.to_string()))?;
    let mut series: SeriesConfig =
        serde_json::from_value(summary["simulator"]["series"].clone())
            .map_err(|e| invalid(&summary_path, format!("simulator.series: {e}")))?;
    let live_runs = match &options.calibration {
        Some(_) => Vec::new(),
        None => traces_of(folder, &summary)?,
    };
    let (calibration, reading_parts) = match &options.calibration {
        Some(path) => (saved_calibration(path)?, Vec::new()),
        None => {
            let parts: Vec<PartsRun<'_>> = live_runs
                .iter()
                .map(|run| PartsRun {
                    algorithm: &run.algorithm,
                    nodes: &run.nodes,
                    true_loads: &run.true_loads,
                    steps: &run.observed,
                })
                .collect();
            let reading_parts = parts_by_class(&parts);
            (
                measured_calibration(folder, &summary, &series, &live_runs)?,
                reading_parts,
            )
        }
    };
    series.initial_layout = options.layout;
    series.key_table = match options.keys {
        Keys::Live => Some(simulator::key_table(&live_config(&summary_path, &summary)?)),
        Keys::Drawn => None,
    };
    series.pacing.clear();
    series.readings.clear();
    let listings = &calibration.redis_cli_listings;
    let instant = simulator::run_series(&series, listings)?;
    series.pacing = calibration.pacing.clone();
    let paced = simulator::run_series(&series, listings)?;
    series.readings = calibration.readings.clone();
    for reading in &mut series.readings {
        reading.scatter = None;
    }
    let lines = simulator::run_series(&series, listings)?;
    series.readings = calibration.readings.clone();
    let calibrated = simulator::run_series(&series, listings)?;
    let mut arms = Vec::new();
    for arm in summary["arms"].as_array().into_iter().flatten() {
        let algorithm = arm["algorithm"].as_str().unwrap_or_default().to_string();
        let live_traces = live_runs.iter().filter(|run| run.algorithm == algorithm);
        arms.push(ArmAgreement {
            live: arm["d_bar_true"].as_f64().unwrap_or(f64::NAN),
            instant: mean_of(&instant, &algorithm),
            paced: mean_of(&paced, &algorithm),
            lines: mean_of(&lines, &algorithm),
            calibrated: mean_of(&calibrated, &algorithm),
            traces: Traces {
                live: step_means(live_traces.map(|run| run.d_true.as_slice())),
                instant: sim_trace(&instant, &algorithm),
                paced: sim_trace(&paced, &algorithm),
                lines: sim_trace(&lines, &algorithm),
                calibrated: sim_trace(&calibrated, &algorithm),
            },
            algorithm,
        });
    }
    // The key table is the workload's keys, which `live_config` rebuilds: left out.
    series.key_table = None;
    Ok(Resimulation {
        calibration,
        keys: options.keys,
        series,
        arms,
        reading_parts,
    })
}

/// The calibration measured in the folder's runs.
fn measured_calibration(
    folder: &Path,
    summary: &serde_json::Value,
    series: &SeriesConfig,
    runs: &[SavedRun],
) -> Result<ArmCalibration, ResimulateError> {
    let interval_ms = summary["config"]["interval_ms"].as_f64().ok_or_else(|| {
        invalid(
            &folder.join("summary.json"),
            "config.interval_ms is missing".into(),
        )
    })?;
    let traces: Vec<ArmTrace<'_>> = runs
        .iter()
        .map(|run| ArmTrace {
            algorithm: &run.algorithm,
            repeat: run.repeat,
            steps: &run.steps,
            output: &run.output,
            keys_moved: &run.keys,
            nodes: &run.nodes,
            initial_slots: &run.initial_slots,
            true_loads: &run.true_loads,
        })
        .collect();
    let cluster = pace::Cluster {
        interval_s: interval_ms / 1000.0,
        warmup: series.warmup as usize,
        algorithms: &series.algorithms,
        classes: &series.cluster.classes,
    };
    Ok(pace::of_traces(&cluster, &traces))
}

/// The calibration of a saved resimulation.
fn saved_calibration(path: &Path) -> Result<ArmCalibration, ResimulateError> {
    let saved: serde_json::Value =
        serde_json::from_str(&read(path)?).map_err(|e| invalid(path, e.to_string()))?;
    serde_json::from_value(saved["calibration"].clone())
        .map_err(|e| invalid(path, format!("calibration: {e}")))
}

/// The part of the live configuration the workload's keys follow from: the nodes, keys and
/// clients of the summary's `config`.
fn live_config(path: &Path, summary: &serde_json::Value) -> Result<LiveConfig, ResimulateError> {
    let field = |name: &str| {
        summary["config"][name]
            .as_u64()
            .map(|value| value as usize)
            .ok_or_else(|| invalid(path, format!("config.{name} is missing")))
    };
    Ok(LiveConfig {
        nodes: field("nodes")?,
        keys: field("keys")?,
        clients: field("clients")?,
        ..LiveConfig::default()
    })
}

/// One saved run's traces.
struct SavedRun {
    algorithm: String,
    repeat: u32,
    /// The step events of its rebalance loop's log (none for redis-cli's output).
    steps: Vec<serde_json::Value>,
    /// Its rebalancer's output (`ARM-rK-rebalance.log`).
    output: String,
    keys: Vec<u64>,
    nodes: Vec<(String, NodeClass)>,
    /// Every master's initial slots (`None`: not recorded).
    initial_slots: Vec<Option<(u16, u16)>>,
    /// `D_true` of every step.
    d_true: Vec<f64>,
    true_loads: Vec<Vec<f64>>,
    /// The observer's readings of every step.
    observed: Vec<ObservedStep>,
}

/// Every run's traces, from `runs/ARM-rK.json` and `runs/ARM-rK-rebalance.log` for each arm
/// and repeat the summary lists.
fn traces_of(folder: &Path, summary: &serde_json::Value) -> Result<Vec<SavedRun>, ResimulateError> {
    let runs_folder = folder.join("runs");
    if !runs_folder.is_dir() {
        return Err(invalid(
            &runs_folder,
            "missing: the calibration is measured in the arms' per-step files; a folder kept \
             without them can take the calibration an earlier resimulation saved \
             (--calibration FILE)"
                .into(),
        ));
    }
    let mut runs = Vec::new();
    for arm in summary["arms"].as_array().into_iter().flatten() {
        let algorithm = arm["algorithm"].as_str().unwrap_or_default();
        let repeats = arm["repeats"].as_u64().unwrap_or(0);
        for repeat in 0..repeats {
            let stem = folder.join("runs").join(format!("{algorithm}-r{repeat}"));
            let run_path = stem.with_extension("json");
            let run: serde_json::Value = serde_json::from_str(&read(&run_path)?)
                .map_err(|e| invalid(&run_path, e.to_string()))?;
            let steps = run["steps"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let keys = steps
                .iter()
                .map(|step| step["keys_moved"].as_u64().unwrap_or(0));
            let true_loads = steps.iter().map(|step| {
                let loads = step["true_loads"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                loads.iter().map(|l| l.as_f64().unwrap_or(0.0)).collect()
            });
            let nodes: Vec<(String, NodeClass)> = run["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|node| {
                    let address = node["address"].as_str().unwrap_or_default().to_string();
                    let class = serde_json::from_value(node["class"].clone())
                        .map_err(|e| invalid(&run_path, format!("nodes[].class: {e}")))?;
                    Ok((address, class))
                })
                .collect::<Result<_, ResimulateError>>()?;
            let initial_slots = run["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|node| {
                    serde_json::from_value(node["initial_slots"].clone())
                        .ok()
                        .flatten()
                })
                .collect();
            let log_path = PathBuf::from(format!("{}-rebalance.log", stem.display()));
            let output = std::fs::read_to_string(&log_path).unwrap_or_default();
            runs.push(SavedRun {
                observed: steps.iter().map(observed_step).collect(),
                algorithm: algorithm.to_string(),
                repeat: repeat as u32,
                steps: crate::cadence::step_events(&output),
                output,
                keys: keys.collect(),
                nodes,
                initial_slots,
                d_true: steps
                    .iter()
                    .map(|step| step["d_true"].as_f64().unwrap_or(f64::NAN))
                    .collect(),
                true_loads: true_loads.collect(),
            });
        }
    }
    Ok(runs)
}

/// A saved step's observer readings (missing fields read as not read).
fn observed_step(step: &serde_json::Value) -> ObservedStep {
    let numbers = |value: &serde_json::Value| -> Vec<f64> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .collect()
    };
    let parts = step["telemetry_readings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|master| [0, 1, 2].map(|k| master[k].as_f64()))
        .collect();
    let p99_ms = step["p99_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(serde_json::Value::as_f64)
        .collect();
    ObservedStep {
        warmup: step["warmup"].as_bool().unwrap_or(false),
        composite: numbers(&step["telemetry_loads"]),
        parts,
        p99_ms,
    }
}

/// The mean of `traces` at every step, over the traces that reach it.
fn step_means<'a>(traces: impl Iterator<Item = &'a [f64]>) -> Vec<f64> {
    let mut sums: Vec<(f64, usize)> = Vec::new();
    for trace in traces {
        if sums.len() < trace.len() {
            sums.resize(trace.len(), (0.0, 0));
        }
        for (sum, &value) in sums.iter_mut().zip(trace) {
            *sum = (sum.0 + value, sum.1 + 1);
        }
    }
    sums.iter().map(|&(sum, n)| sum / n as f64).collect()
}

fn sim_trace(arms: &[SimArm], algorithm: &str) -> Vec<f64> {
    step_means(
        arms.iter()
            .filter(|a| a.algorithm == algorithm)
            .map(|a| a.d_trace.as_slice()),
    )
}

fn mean_of(arms: &[SimArm], algorithm: &str) -> f64 {
    let values: Vec<f64> = arms
        .iter()
        .filter(|a| a.algorithm == algorithm)
        .map(|a| a.d_bar)
        .collect();
    values.iter().sum::<f64>() / values.len() as f64
}

fn read(path: &Path) -> Result<String, ResimulateError> {
    std::fs::read_to_string(path).map_err(|source| ResimulateError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn invalid(path: &Path, detail: String) -> ResimulateError {
    ResimulateError::Invalid {
        path: path.to_path_buf(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_mean_is_over_the_traces_that_reach_it() {
        let traces: [&[f64]; 3] = [&[1.0, 2.0, 3.0], &[3.0, 4.0], &[]];
        assert_eq!(step_means(traces.into_iter()), [2.0, 3.0, 3.0]);
        assert!(step_means(std::iter::empty()).is_empty());
    }
}
