//! Replay of recorded telemetry traces (`telemetry_<series>_s<seed>.json.gz`).
//!
//! A trace records, per step of the ACH arm of one run, the request and write counts and
//! service rates of every node, the raw telemetry, the random draws of the distortion, the
//! distorted observation, the composite loads and the total load. The replay feeds the
//! counts through [`ach_telemetry`] and checks every recorded value to [`TOLERANCE`](super::TOLERANCE).
//!
//! Joins (series C3) are replayed with [`TelemetryPipeline::resize`], which extends every
//! stored vector (lag buffer, previous observation, smoothing state) with zeros.

use ach_telemetry::{
    DistortionConfig, Metrics, MissingMask, StepDraws, TelemetryConfig, TelemetryPipeline,
    raw_metrics_for_cluster, service_rate,
};
use serde::Deserialize;

use super::{Divergence, Verdict, compare_value};

/// A recorded telemetry trace.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryTrace {
    /// Free-text description of the recording (informational; the replay does not read it).
    #[allow(dead_code)]
    pub source: String,
    /// Parameters of the recorded run.
    pub params: TraceParams,
    /// One entry per step.
    pub steps: Vec<TraceStep>,
}

/// Parameters of the recorded run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceParams {
    /// Experiment series, e.g. `C1`.
    pub series: String,
    /// Seed of the run.
    pub seed: u64,
    /// Number of steps of the run.
    #[serde(rename = "T")]
    pub step_count: usize,
    /// The run's configuration (only the fields the telemetry replay needs are read).
    pub config: TraceConfig,
}

/// The parts of the run configuration that the telemetry replay needs. Other fields
/// (controller, workload, churn) are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct TraceConfig {
    /// Relative capacity of each initial node.
    pub capacities: Vec<f64>,
    /// Service rate of a capacity-1.0 node.
    pub mu_base: f64,
    /// Smoothing, composite and total-load parameters.
    pub telemetry: TraceTelemetry,
    /// Distortion parameters.
    pub noise: TraceNoise,
}

/// Recorded smoothing, composite and total-load parameters.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceTelemetry {
    /// EWMA factor.
    pub beta: f64,
    /// Weights of cpu, memory and latency.
    pub weights: [f64; 3],
    /// Norm exponent.
    pub p: f64,
    /// Mean/max mixing factor.
    pub alpha: f64,
}

/// Recorded distortion parameters.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceNoise {
    /// Standard deviation of the Gaussian noise.
    pub sigma: f64,
    /// Lag in steps.
    pub lag: usize,
    /// Probability of a missing entry.
    pub p_miss: f64,
}

/// One recorded step.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStep {
    /// Requests served by each node.
    pub requests: Vec<u64>,
    /// Writes among those requests.
    pub writes: Vec<u64>,
    /// Service rate of each node (0 for a removed node).
    pub mu: Vec<f64>,
    /// Raw telemetry `[cpu, memory, latency]` of each node.
    pub raw: Vec<Metrics>,
    /// Gaussian deltas of the step, if the run has noise.
    pub gauss_delta: Option<Vec<Metrics>>,
    /// Missing-data mask of the step (0 or 1), if the run has missing data.
    pub miss_mask: Option<Vec<[u8; 3]>>,
    /// Observation after distortion.
    pub noisy: Vec<Metrics>,
    /// Composite load of each node after smoothing.
    pub ell: Vec<f64>,
    /// Cluster total load.
    pub total_load: f64,
}

impl TelemetryTrace {
    /// One-line description of the trace, e.g. `telemetry C4c seed 42`.
    pub fn describe(&self) -> String {
        format!("telemetry {} seed {}", self.params.series, self.params.seed)
    }
}

impl TraceConfig {
    /// The telemetry configuration of the recorded run.
    fn telemetry_config(&self) -> TelemetryConfig {
        TelemetryConfig {
            beta: self.telemetry.beta,
            weights: self.telemetry.weights,
            p: self.telemetry.p,
            alpha: self.telemetry.alpha,
        }
    }

    /// The distortion configuration of the recorded run.
    fn distortion_config(&self) -> DistortionConfig {
        DistortionConfig {
            sigma: self.noise.sigma,
            lag: self.noise.lag,
            p_miss: self.noise.p_miss,
        }
    }
}

/// Parses a telemetry trace from its (decompressed) JSON text.
pub fn parse(json: &str) -> Result<TelemetryTrace, serde_json::Error> {
    serde_json::from_str(json)
}

/// Replays `trace` step by step and returns the number of matching steps, or the first value
/// that differs from its recording by more than [`TOLERANCE`](super::TOLERANCE).
///
/// Per step the order of checks is: service rates (step 0 only, against
/// `capacity * mu_base`), `raw`, `noisy`, `ell`, `total_load`. The values computed by this
/// project, not the recorded ones, are fed to the next stage. A trace with fewer or more
/// steps than its `T` diverges at the end, at step `steps.len()`.
pub fn replay(trace: &TelemetryTrace) -> Verdict {
    let config = &trace.params.config;
    let initial_node_count = trace.steps.first().map_or(0, |step| step.requests.len());
    let mut pipeline = TelemetryPipeline::new(
        initial_node_count,
        config.telemetry_config(),
        config.distortion_config(),
    )
    .map_err(|error| Divergence::new(0, "config", "a valid configuration", error.to_string()))?;
    let mut raw = Vec::new();
    let mut missing: Vec<MissingMask> = Vec::new();
    for (step_index, step) in trace.steps.iter().enumerate() {
        if step_index == 0 {
            check_initial_service_rates(config, step)?;
        }
        let node_count = step.requests.len();
        if node_count != pipeline.node_count() {
            pipeline.resize(node_count);
        }
        raw_metrics_for_cluster(&step.requests, &step.writes, &step.mu, &mut raw).map_err(
            |error| {
                Divergence::new(
                    step_index,
                    "counts",
                    "one entry per node",
                    error.to_string(),
                )
            },
        )?;
        compare_metrics(step_index, "raw", &step.raw, &raw)?;

        missing.clear();
        if let Some(mask) = &step.miss_mask {
            missing.extend(mask.iter().map(|entry| entry.map(|flag| flag != 0)));
        }
        let draws = StepDraws {
            gauss: step.gauss_delta.as_deref(),
            missing: step.miss_mask.as_ref().map(|_| missing.as_slice()),
        };
        pipeline.observe(&raw, &draws).map_err(|error| {
            Divergence::new(step_index, "draws", "a valid step", error.to_string())
        })?;
        compare_metrics(
            step_index,
            "noisy",
            &step.noisy,
            pipeline.last_observation(),
        )?;
        let loads = pipeline.last_loads();
        compare_values(step_index, "ell", &step.ell, loads.loads)?;
        compare_value(step_index, "total_load", step.total_load, loads.total_load)?;
    }
    if trace.steps.len() != trace.params.step_count {
        return Err(Divergence::new(
            trace.steps.len(),
            "steps.len()",
            trace.params.step_count.to_string(),
            trace.steps.len().to_string(),
        ));
    }
    Ok(trace.steps.len())
}

/// Checks that the recorded service rates of the initial nodes are `capacity * mu_base`.
fn check_initial_service_rates(config: &TraceConfig, step: &TraceStep) -> Result<(), Divergence> {
    for (node, (&capacity, &recorded)) in config.capacities.iter().zip(&step.mu).enumerate() {
        let computed = service_rate(capacity, config.mu_base);
        compare_value(0, format!("mu[{node}]"), recorded, computed)?;
    }
    Ok(())
}

/// Compares per-node metric vectors entry by entry.
fn compare_metrics(
    step: usize,
    name: &str,
    expected: &[Metrics],
    got: &[Metrics],
) -> Result<(), Divergence> {
    compare_lengths(step, name, expected.len(), got.len())?;
    for (node, (expected, got)) in expected.iter().zip(got).enumerate() {
        for (metric, (&expected, &got)) in expected.iter().zip(got).enumerate() {
            compare_value(step, format!("{name}[{node}][{metric}]"), expected, got)?;
        }
    }
    Ok(())
}

/// Compares per-node values entry by entry.
fn compare_values(
    step: usize,
    name: &str,
    expected: &[f64],
    got: &[f64],
) -> Result<(), Divergence> {
    compare_lengths(step, name, expected.len(), got.len())?;
    for (node, (&expected, &got)) in expected.iter().zip(got).enumerate() {
        compare_value(step, format!("{name}[{node}]"), expected, got)?;
    }
    Ok(())
}

/// Reports a divergence when the two lengths differ.
fn compare_lengths(step: usize, name: &str, expected: usize, got: usize) -> Result<(), Divergence> {
    if expected == got {
        Ok(())
    } else {
        Err(Divergence::new(
            step,
            format!("{name}.len()"),
            expected.to_string(),
            got.to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn load(series: &str) -> TelemetryTrace {
        let path = format!(
            "{}/../crates/ach-sim/tests/data/traces/telemetry_{series}_s42.json.gz",
            env!("CARGO_MANIFEST_DIR")
        );
        let file = std::fs::File::open(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
        let mut json = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut json)
            .unwrap_or_else(|error| panic!("{path}: {error}"));
        parse(&json).unwrap_or_else(|error| panic!("{path}: {error}"))
    }

    #[test]
    fn stationary_trace_replays() {
        assert_eq!(replay(&load("C1")), Ok(600));
    }

    #[test]
    fn churn_trace_replays_through_joins() {
        let trace = load("C3");
        assert_eq!(trace.steps[0].requests.len(), 10);
        assert_eq!(trace.steps[599].requests.len(), 13);
        assert_eq!(replay(&trace), Ok(600));
    }

    #[test]
    fn noisy_lagged_trace_replays() {
        let trace = load("C4c");
        assert_eq!(trace.params.config.noise.lag, 2);
        assert_eq!(replay(&trace), Ok(600));
    }

    #[test]
    fn corrupted_load_is_reported_at_its_step() {
        let mut trace = load("C1");
        trace.steps[123].ell[4] += 1e-9;
        let divergence = replay(&trace).unwrap_err();
        assert_eq!(divergence.step, 123);
        assert_eq!(divergence.what, "ell[4]");
        assert_eq!(
            divergence.expected,
            format!("{:?}", trace.steps[123].ell[4])
        );
    }

    #[test]
    fn truncated_trace_is_reported_at_its_end() {
        let mut trace = load("C1");
        trace.steps.truncate(500);
        let divergence = replay(&trace).unwrap_err();
        assert_eq!(divergence.step, 500);
        assert_eq!(divergence.what, "steps.len()");
    }

    #[test]
    fn corrupted_draw_is_reported_at_its_step() {
        let mut trace = load("C4c");
        let mask = trace.steps[77].miss_mask.as_mut().unwrap();
        mask[2][1] = 1 - mask[2][1];
        let divergence = replay(&trace).unwrap_err();
        assert_eq!(divergence.step, 77);
        assert_eq!(divergence.what, "noisy[2][1]");
    }
}
