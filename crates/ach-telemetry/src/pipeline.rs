//! The per-algorithm telemetry pipeline and a small tracker for live deployments.

use crate::config::{DistortionConfig, TelemetryConfig};
use crate::distortion::{Distortion, StepDraws};
use crate::error::TelemetryError;
use crate::metrics::{METRIC_COUNT, Metrics};
use crate::smoothing::{Smoother, composite_load, total_load};

/// The loads produced by one step of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLoads<'a> {
    /// Composite load of every node, in `[0, 1]` when the weights sum to at most 1.
    pub loads: &'a [f64],
    /// Cluster total load `alpha * mean(loads) + (1 - alpha) * max(loads)`.
    pub total_load: f64,
}

/// The telemetry pipeline of one algorithm for `n` nodes:
/// raw -> distortion -> smoothing -> composite load -> total load.
///
/// All buffers are allocated at construction and on [`resize`](Self::resize); a step
/// allocates nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryPipeline {
    config: TelemetryConfig,
    distortion: Distortion,
    smoother: Smoother,
    observation: Vec<Metrics>,
    loads: Vec<f64>,
    total_load: f64,
}

impl TelemetryPipeline {
    /// Creates a pipeline for `node_count` nodes with all state at zero.
    /// Fails when either configuration is invalid.
    pub fn new(
        node_count: usize,
        config: TelemetryConfig,
        distortion: DistortionConfig,
    ) -> Result<TelemetryPipeline, TelemetryError> {
        config.validate()?;
        Ok(TelemetryPipeline {
            config,
            distortion: Distortion::new(node_count, distortion)?,
            smoother: Smoother::new(node_count, config.beta)?,
            observation: vec![[0.0; METRIC_COUNT]; node_count],
            loads: vec![0.0; node_count],
            total_load: 0.0,
        })
    }

    /// Creates a pipeline without distortion, as used for the noise-free "true" telemetry.
    pub fn noise_free(
        node_count: usize,
        config: TelemetryConfig,
    ) -> Result<TelemetryPipeline, TelemetryError> {
        TelemetryPipeline::new(node_count, config, DistortionConfig::none())
    }

    /// The smoothing and composite configuration.
    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    /// The distortion configuration.
    pub fn distortion_config(&self) -> &DistortionConfig {
        self.distortion.config()
    }

    /// Number of nodes tracked.
    pub fn node_count(&self) -> usize {
        self.loads.len()
    }

    /// Changes the number of tracked nodes. Joining nodes start with zero state everywhere:
    /// zero smoothing state, and zeros in every stored lag-buffer slot and in the previous
    /// observation (see [`Distortion::resize`]). Shrinking drops the state of the last
    /// nodes; removed nodes that stay in the cluster vectors should instead be kept.
    pub fn resize(&mut self, node_count: usize) {
        self.distortion.resize(node_count);
        self.smoother.resize(node_count);
        self.observation.resize(node_count, [0.0; METRIC_COUNT]);
        self.loads.resize(node_count, 0.0);
    }

    /// Runs one step on the raw telemetry of every node (`raw[i] = [cpu, memory, latency]`)
    /// with the step's random draws, and returns the composite loads and the total load.
    ///
    /// Fails without changing any state when `raw` or a needed draw does not have one entry
    /// per node, or when a needed draw is not supplied.
    pub fn observe(
        &mut self,
        raw: &[Metrics],
        draws: &StepDraws<'_>,
    ) -> Result<StepLoads<'_>, TelemetryError> {
        self.distortion.apply(raw, draws, &mut self.observation)?;
        self.finish_observation();
        Ok(self.last_loads())
    }

    /// The observation of the last step after distortion (and clipping), before smoothing.
    pub fn last_observation(&self) -> &[Metrics] {
        &self.observation
    }

    /// The smoothed metrics after the last step.
    pub fn smoothed(&self) -> &[Metrics] {
        self.smoother.state()
    }

    /// The composite loads and total load of the last step (zeros before the first step).
    pub fn last_loads(&self) -> StepLoads<'_> {
        StepLoads {
            loads: &self.loads,
            total_load: self.total_load,
        }
    }

    /// Smooths `self.observation` and recomputes the loads; lengths are consistent by
    /// construction.
    fn finish_observation(&mut self) {
        let weights = self.config.weights;
        let p = self.config.p;
        self.smoother.fold(&self.observation);
        for (load, metrics) in self.loads.iter_mut().zip(self.smoother.state()) {
            *load = composite_load(metrics, &weights, p);
        }
        self.total_load = total_load(&self.loads, self.config.alpha);
    }
}

/// Load tracking for a live deployment: record each node's measured metrics as they arrive,
/// then close the step.
///
/// No distortion is simulated (real measurements bring their own); readings are clipped to
/// `[0, 1]`, smoothed and combined exactly as in [`TelemetryPipeline`]. A node that reported
/// nothing during a step keeps its latest reading (zeros before its first report).
///
/// A reading that is NaN or infinite counts as a missing sample: that metric keeps the node's
/// latest finite reading, exactly as a node that did not report. So one bad sample cannot make
/// the smoothed load, or the cluster's total load, NaN for ever.
///
/// Nodes are named by index; `ach_ring::NodeId` converts into one, so
/// `tracker.record(node_id, metrics)` works as well as `tracker.record(3, metrics)`.
///
/// ```
/// use ach_telemetry::{LoadTracker, TelemetryConfig};
/// let mut tracker = LoadTracker::new(2, TelemetryConfig::paper()).unwrap();
/// tracker.record(0usize, [0.8, 0.5, 0.3]).unwrap();
/// tracker.record(1usize, [f64::NAN, 0.2, 0.1]).unwrap(); // the NaN cpu reading is ignored
/// let step = tracker.finish_step();
/// assert!(step.loads.iter().all(|l| l.is_finite()) && step.total_load.is_finite());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LoadTracker {
    pipeline: TelemetryPipeline,
    latest: Vec<Metrics>,
}

impl LoadTracker {
    /// Creates a tracker for `node_count` nodes. Fails when `config` is invalid.
    pub fn new(node_count: usize, config: TelemetryConfig) -> Result<LoadTracker, TelemetryError> {
        Ok(LoadTracker {
            pipeline: TelemetryPipeline::noise_free(node_count, config)?,
            latest: vec![[0.0; METRIC_COUNT]; node_count],
        })
    }

    /// Number of nodes tracked.
    pub fn node_count(&self) -> usize {
        self.latest.len()
    }

    /// Adds a node with zero state and returns its index.
    pub fn add_node(&mut self) -> usize {
        let node = self.latest.len();
        self.latest.push([0.0; METRIC_COUNT]);
        self.pipeline.resize(node + 1);
        node
    }

    /// Records the latest measured `[cpu, memory, latency]` of `node`, each normally in
    /// `[0, 1]`; a later record in the same step replaces an earlier one. A NaN or infinite
    /// metric is a missing sample: the metric keeps its latest finite reading.
    pub fn record(
        &mut self,
        node: impl Into<usize>,
        metrics: Metrics,
    ) -> Result<(), TelemetryError> {
        let node = node.into();
        let node_count = self.latest.len();
        let slot = self
            .latest
            .get_mut(node)
            .ok_or(TelemetryError::NodeOutOfRange { node, node_count })?;
        for (kept, reading) in slot.iter_mut().zip(metrics) {
            if reading.is_finite() {
                *kept = reading;
            }
        }
        Ok(())
    }

    /// The loads of the last closed step (zeros before the first).
    pub fn last_loads(&self) -> StepLoads<'_> {
        self.pipeline.last_loads()
    }

    /// The saved state: everything a restarted tracker needs to continue exactly (the
    /// configuration is saved by the caller, as it is configuration).
    pub fn state(&self) -> LoadTrackerState {
        let bits = |m: &Metrics| m.map(f64::to_bits);
        LoadTrackerState {
            version: LOAD_TRACKER_STATE_VERSION,
            latest_bits: self.latest.iter().map(bits).collect(),
            smoothed_bits: self.pipeline.smoothed().iter().map(bits).collect(),
            observation_bits: self.pipeline.last_observation().iter().map(bits).collect(),
            load_bits: self.pipeline.loads.iter().map(|l| l.to_bits()).collect(),
            total_load_bits: self.pipeline.total_load.to_bits(),
        }
    }

    /// A tracker with `config` that continues from a saved state. Fails on an invalid
    /// configuration, an unknown version, or vectors of different lengths.
    pub fn from_state(
        config: TelemetryConfig,
        state: &LoadTrackerState,
    ) -> Result<LoadTracker, TelemetryError> {
        if state.version != LOAD_TRACKER_STATE_VERSION {
            return Err(TelemetryError::UnsupportedStateVersion {
                found: state.version,
                supported: LOAD_TRACKER_STATE_VERSION,
            });
        }
        let n = state.latest_bits.len();
        TelemetryError::check_length("smoothed_bits", n, state.smoothed_bits.len())?;
        TelemetryError::check_length("observation_bits", n, state.observation_bits.len())?;
        TelemetryError::check_length("load_bits", n, state.load_bits.len())?;
        let metrics = |b: &[u64; METRIC_COUNT]| b.map(f64::from_bits);
        let mut tracker = LoadTracker::new(n, config)?;
        tracker.latest = state.latest_bits.iter().map(metrics).collect();
        let pipeline = &mut tracker.pipeline;
        pipeline
            .smoother
            .restore(state.smoothed_bits.iter().map(metrics).collect());
        pipeline.observation = state.observation_bits.iter().map(metrics).collect();
        pipeline.loads = state.load_bits.iter().map(|&b| f64::from_bits(b)).collect();
        pipeline.total_load = f64::from_bits(state.total_load_bits);
        Ok(tracker)
    }

    /// Closes the step: folds the latest reading of every node into the smoothed state and
    /// returns the composite loads and total load.
    pub fn finish_step(&mut self) -> StepLoads<'_> {
        let TelemetryPipeline { observation, .. } = &mut self.pipeline;
        for (observed, reading) in observation.iter_mut().zip(&self.latest) {
            for metric in 0..METRIC_COUNT {
                observed[metric] = crate::cluster::clip_unit(reading[metric]);
            }
        }
        self.pipeline.finish_observation();
        self.pipeline.last_loads()
    }
}

/// The version of [`LoadTrackerState`] this release writes and reads.
pub const LOAD_TRACKER_STATE_VERSION: u32 = 1;

/// Saved state of a [`LoadTracker`]: versioned, serde, exact (every `f64` as its bits).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadTrackerState {
    /// Format version ([`LOAD_TRACKER_STATE_VERSION`]).
    pub version: u32,
    /// The latest reading of every node, as `f64` bits.
    pub latest_bits: Vec<[u64; METRIC_COUNT]>,
    /// The smoothed metrics of every node, as `f64` bits.
    pub smoothed_bits: Vec<[u64; METRIC_COUNT]>,
    /// The last clipped observation of every node, as `f64` bits.
    pub observation_bits: Vec<[u64; METRIC_COUNT]>,
    /// The last composite loads, as `f64` bits.
    pub load_bits: Vec<u64>,
    /// The last total load, as `f64` bits.
    pub total_load_bits: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_rejects_wrong_lengths_without_side_effects() {
        let mut pipeline = TelemetryPipeline::noise_free(2, TelemetryConfig::paper()).unwrap();
        let error = pipeline
            .observe(&[[0.5; 3]], &StepDraws::none())
            .unwrap_err();
        assert_eq!(
            error,
            TelemetryError::LengthMismatch {
                what: "raw",
                expected: 2,
                got: 1
            }
        );
        assert_eq!(pipeline.smoothed(), &[[0.0; 3]; 2]);
    }

    #[test]
    fn pipeline_resize_starts_joining_nodes_at_zero() {
        let mut pipeline = TelemetryPipeline::new(
            1,
            TelemetryConfig::paper(),
            DistortionConfig {
                sigma: 0.0,
                lag: 1,
                p_miss: 0.0,
            },
        )
        .unwrap();
        pipeline.observe(&[[1.0; 3]], &StepDraws::none()).unwrap();
        pipeline.resize(2);
        assert_eq!(pipeline.node_count(), 2);
        let loads = pipeline
            .observe(&[[1.0; 3], [1.0; 3]], &StepDraws::none())
            .unwrap();
        assert!(loads.loads[0] > 0.0);
        assert_eq!(loads.loads[1], 0.0);
        assert_eq!(pipeline.last_observation(), &[[1.0; 3], [0.0; 3]]);
    }

    #[test]
    fn pipeline_computes_the_documented_formulas() {
        let config = TelemetryConfig::paper();
        let mut pipeline = TelemetryPipeline::noise_free(2, config).unwrap();
        let raw = [[1.0, 0.7, 1.0], [0.0; 3]];
        let step = pipeline.observe(&raw, &StepDraws::none()).unwrap();
        let smoothed = [0.3, 0.21, 0.3];
        let expected = composite_load(&smoothed, &config.weights, 4.0);
        assert_eq!(step.loads, &[expected, 0.0]);
        assert_eq!(step.total_load, 0.5 * (expected / 2.0) + 0.5 * expected);
    }

    #[test]
    fn tracker_carries_readings_and_rejects_unknown_nodes() {
        let mut tracker = LoadTracker::new(2, TelemetryConfig::paper()).unwrap();
        tracker.record(0usize, [0.9, 0.6, 0.8]).unwrap();
        assert_eq!(
            tracker.record(2usize, [0.1; 3]),
            Err(TelemetryError::NodeOutOfRange {
                node: 2,
                node_count: 2
            })
        );
        tracker
            .record(1usize, [0.5, f64::NAN, f64::INFINITY])
            .unwrap();
        let first = tracker.finish_step().loads[0];
        let second = tracker.finish_step().loads[0];
        assert!(second > first);
        assert_eq!(tracker.add_node(), 2);
        tracker.record(2usize, [2.0, 0.5, 0.5]).unwrap();
        let step = tracker.finish_step();
        assert_eq!(step.loads.len(), 3);
        assert!(step.loads[2] > 0.0 && step.loads[2] <= 1.0);
        assert!(
            step.loads.iter().all(|l| l.is_finite()),
            "NaN and inf readings are ignored"
        );
    }

    #[test]
    fn tracker_state_round_trips_exactly_and_continues_identically() {
        let config = TelemetryConfig::paper();
        let mut tracker = LoadTracker::new(3, config).unwrap();
        for t in 0..50u32 {
            for node in 0..3usize {
                let x = f64::from((t * 7 + node as u32 * 13) % 17) / 17.0;
                tracker.record(node, [x, x * 0.3 + 0.1, 1.0 / 3.0]).unwrap();
            }
            tracker.finish_step();
        }
        let json = serde_json::to_string(&tracker.state()).unwrap();
        let state: LoadTrackerState = serde_json::from_str(&json).unwrap();
        let mut restored = LoadTracker::from_state(config, &state).unwrap();
        assert_eq!(restored, tracker);
        tracker.record(1usize, [0.7, 0.1, 0.2]).unwrap();
        restored.record(1usize, [0.7, 0.1, 0.2]).unwrap();
        assert_eq!(restored.finish_step(), tracker.finish_step());
        let mut bad = state.clone();
        bad.version = 9;
        assert!(matches!(
            LoadTracker::from_state(config, &bad),
            Err(TelemetryError::UnsupportedStateVersion { found: 9, .. })
        ));
    }
}
