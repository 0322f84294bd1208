//! The calibrated simulator run again on a saved output folder (`cargo xtask live-resim
//! DIR`): the series its summary recorded, as the paper models it (every plan switching at
//! once, every algorithm reading the model's loads), paced by the clock measured in its runs,
//! and calibrated (paced, and reading each node as the loop read its class; see
//! [`crate::pace`]), against the live arms.

use std::path::{Path, PathBuf};

use ach_sim::SeriesConfig;
pub use ach_sim::config::InitialLayout;
use ach_sim::config::NodeClass;

use crate::error::ResimulateError;
use crate::pace::{self, ArmCalibration, ArmTrace};
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
    /// The simulator paced and reading as the loop read.
    pub calibrated: f64,
}

/// What the simulator says of a saved run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Resimulation {
    /// What the runs measured.
    pub calibration: ArmCalibration,
    /// The series the calibrated simulator ran.
    pub series: SeriesConfig,
    /// Every arm, in the summary's order.
    pub arms: Vec<ArmAgreement>,
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

/// Runs the simulator again for the output folder `folder` of `cargo xtask live`, starting
/// from the initial layout `layout` (the live experiment's simulator uses the paper's,
/// round-robin; live, each server owns one contiguous range of slots).
pub fn resimulate(folder: &Path, layout: InitialLayout) -> Result<Resimulation, ResimulateError> {
    let summary: serde_json::Value = serde_json::from_str(&read(&folder.join("summary.json"))?)
        .map_err(|e| invalid(&folder.join("summary.json"), e.to_string()))?;
    let series_value = summary["simulator"]["series"].clone();
    let mut series: SeriesConfig = serde_json::from_value(series_value).map_err(|e| {
        invalid(
            &folder.join("summary.json"),
            format!("simulator.series: {e}"),
        )
    })?;
    let interval_ms = summary["config"]["interval_ms"].as_f64().ok_or_else(|| {
        invalid(
            &folder.join("summary.json"),
            "config.interval_ms is missing".into(),
        )
    })?;
    let runs = traces_of(folder, &summary)?;
    let traces: Vec<ArmTrace<'_>> = runs
        .iter()
        .map(|run| ArmTrace {
            algorithm: &run.algorithm,
            rebalance_log: &run.log,
            keys_moved: &run.keys,
            nodes: &run.nodes,
            true_loads: &run.true_loads,
        })
        .collect();
    let cluster = pace::Cluster {
        interval_s: interval_ms / 1000.0,
        warmup: series.warmup as usize,
        algorithms: &series.algorithms,
        classes: &series.cluster.classes,
    };
    let calibration = pace::of_traces(&cluster, &traces);
    series.initial_layout = layout;
    series.pacing.clear();
    series.readings.clear();
    let instant = simulator::run_series(&series)?;
    series.pacing = calibration.pacing.clone();
    let paced = simulator::run_series(&series)?;
    series.readings = calibration.readings.clone();
    let calibrated = simulator::run_series(&series)?;
    let mut arms = Vec::new();
    for arm in summary["arms"].as_array().into_iter().flatten() {
        let algorithm = arm["algorithm"].as_str().unwrap_or_default().to_string();
        arms.push(ArmAgreement {
            live: arm["d_bar_true"].as_f64().unwrap_or(f64::NAN),
            instant: mean_of(&instant, &algorithm),
            paced: mean_of(&paced, &algorithm),
            calibrated: mean_of(&calibrated, &algorithm),
            algorithm,
        });
    }
    Ok(Resimulation {
        calibration,
        series,
        arms,
    })
}

/// One saved run's traces.
struct SavedRun {
    algorithm: String,
    log: String,
    keys: Vec<u64>,
    nodes: Vec<(String, NodeClass)>,
    true_loads: Vec<Vec<f64>>,
}

/// Every run's traces, from `runs/ARM-rK.json` and `runs/ARM-rK-rebalance.log` for each arm
/// and repeat the summary lists.
fn traces_of(folder: &Path, summary: &serde_json::Value) -> Result<Vec<SavedRun>, ResimulateError> {
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
            let log_path = PathBuf::from(format!("{}-rebalance.log", stem.display()));
            runs.push(SavedRun {
                algorithm: algorithm.to_string(),
                log: std::fs::read_to_string(&log_path).unwrap_or_default(),
                keys: keys.collect(),
                nodes,
                true_loads: true_loads.collect(),
            });
        }
    }
    Ok(runs)
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
