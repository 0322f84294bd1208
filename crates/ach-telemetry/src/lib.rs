//! `ach-telemetry`: from per-node request counts to the load vector an ACH controller
//! observes.
//!
//! This crate reproduces the telemetry model of the paper's simulation (MODEL.md, sections
//! 2-3) exactly, and is small enough to drive from a real deployment as well.
//!
//! # The model
//!
//! Per step and node `i` (`c_i` capacity, `mu_i = c_i * 350` service rate):
//!
//! - Utilisation ([`utilisation`]): a write costs 1.5 requests,
//!   `rho_i = clip((requests_i + 0.5 * writes_i) / max(mu_i, 1e-9), 0, 1)`.
//! - Raw telemetry ([`raw_metrics`]), `[cpu, memory, latency]` in `[0, 1]`:
//!   `cpu = rho`; `memory = clip(0.6 rho + 0.1 [rho > 0.5], 0, 1)`;
//!   `latency = clip((r / (1 - r)) / (0.849 / (1 - 0.849)), 0, 1)` with `r = min(rho, 0.849)`,
//!   and `latency = 1` when `rho >= 0.85`.
//! - Distortion ([`Distortion`], parameters `sigma`, lag `d`, `p_miss`): lag by `d` steps
//!   (zeros until `d + 1` steps were seen), add the Gaussian delta, replace missing entries by
//!   the previous observation (remembered before clipping), clip to `[0, 1]`.
//! - Smoothing ([`Smoother`]): `S <- (1 - beta) S + beta * obs`, from `S = 0`.
//! - Composite load ([`composite_load`]): `l_i = (sum_j w_j S_ij^p)^(1/p)`.
//! - Total load ([`total_load`]): `alpha * mean(l) + (1 - alpha) * max(l)`.
//!
//! The paper's values are [`TelemetryConfig::paper`]: `beta = 0.3`,
//! `w = (0.40, 0.25, 0.35)`, `p = 4`, `alpha = 0.5`.
//!
//! # Joins and removals
//!
//! [`TelemetryPipeline::resize`] grows every per-node vector for joining nodes: the smoothing
//! state starts at zero, and every stored lag-buffer slot and the remembered previous
//! observation are extended with zeros, so a new node is observed as zeros until its own raw
//! telemetry leaves the lag buffer. Removed nodes stay in the vectors (their service rate is
//! 0, so they report utilisation 0 when they receive nothing).
//!
//! # What it must not do
//!
//! The crate depends on no other `ach-*` crate, does no I/O, reads no clock and draws no
//! random numbers: the random draws of a step ([`StepDraws`]) are supplied by the caller, so
//! that the same draws can be applied to the pipelines of every algorithm. A step allocates
//! nothing once the pipeline is built.
//!
//! # Driving a step
//!
//! ```
//! use ach_telemetry::{
//!     CapacityClass, DistortionConfig, PAPER_MU_BASE, StepDraws, TelemetryConfig,
//!     TelemetryPipeline, raw_metrics_for_cluster,
//! };
//!
//! let classes = [CapacityClass::Strong, CapacityClass::Medium, CapacityClass::Weak];
//! let service_rates: Vec<f64> = classes.iter().map(|c| c.service_rate(PAPER_MU_BASE)).collect();
//! let noise = DistortionConfig { sigma: 0.1, lag: 1, p_miss: 0.1 };
//! let mut pipeline = TelemetryPipeline::new(3, TelemetryConfig::paper(), noise)?;
//! let mut true_pipeline = TelemetryPipeline::noise_free(3, TelemetryConfig::paper())?;
//!
//! let mut raw = Vec::new();
//! // One step: the counts come from the simulated workload, the draws from the caller's RNG.
//! raw_metrics_for_cluster(&[300, 150, 40], &[60, 30, 10], &service_rates, &mut raw)?;
//! let gauss = [[0.02, -0.01, 0.0], [0.0, 0.03, -0.02], [0.01, 0.0, 0.0]];
//! let missing = [[false; 3], [false, true, false], [false; 3]];
//! let draws = StepDraws { gauss: Some(&gauss), missing: Some(&missing) };
//! let step = pipeline.observe(&raw, &draws)?;
//! assert_eq!(step.loads.len(), 3);
//! let true_step = true_pipeline.observe(&raw, &draws)?; // ignores the draws
//! assert!(true_step.total_load > 0.0);
//!
//! // A node joins: every pipeline grows, the new node starts from zero.
//! pipeline.resize(4);
//! true_pipeline.resize(4);
//! # Ok::<(), ach_telemetry::TelemetryError>(())
//! ```
//!
//! # Live deployment
//!
//! Measured metrics can be fed directly, either to
//! [`TelemetryPipeline::observe`] with [`StepDraws::none`] and [`DistortionConfig::none`],
//! or one node at a time through a [`LoadTracker`]:
//!
//! ```
//! use ach_telemetry::{LoadTracker, TelemetryConfig};
//!
//! let mut tracker = LoadTracker::new(2, TelemetryConfig::paper())?;
//! // Readings arrive as they are scraped: [cpu, memory, latency], normalised to [0, 1].
//! // Nodes are indices (`usize`) or `ach_ring::NodeId`s.
//! let readings = [[0.72, 0.55, 0.40], [0.20, 0.31, 0.05]];
//! for (node, reading) in readings.into_iter().enumerate() {
//!     tracker.record(node, reading)?;
//! }
//! let step = tracker.finish_step();
//! assert!(step.loads[0] > step.loads[1]);
//! assert!((0.0..=1.0).contains(&step.total_load));
//! # Ok::<(), ach_telemetry::TelemetryError>(())
//! ```

mod cluster;
mod config;
mod distortion;
mod error;
mod metrics;
mod pipeline;
mod smoothing;

pub use cluster::{
    CapacityClass, LATENCY_KNEE, LATENCY_SATURATION, MEMORY_JUMP, MEMORY_JUMP_THRESHOLD,
    MEMORY_SLOPE, PAPER_INITIAL_CLASSES, PAPER_MU_BASE, SERVICE_RATE_FLOOR, WRITE_EXTRA_COST,
    raw_metrics, raw_metrics_for_cluster, service_rate, utilisation,
};
pub use config::{DistortionConfig, MAX_LAG, TelemetryConfig};
pub use distortion::{Distortion, StepDraws};
pub use error::{DistortionConfigError, TelemetryConfigError, TelemetryError};
pub use metrics::{CPU, LATENCY, MEMORY, METRIC_COUNT, Metrics, MissingMask};
pub use pipeline::{
    LOAD_TRACKER_STATE_VERSION, LoadTracker, LoadTrackerState, StepLoads, TelemetryPipeline,
};
pub use smoothing::{Smoother, composite_load, numpy_sum, total_load};
