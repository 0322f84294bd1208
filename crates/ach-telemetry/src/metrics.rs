//! The per-node metric vector and the indices of its entries.

/// Number of metrics per node: cpu, memory and latency.
pub const METRIC_COUNT: usize = 3;

/// Index of the cpu entry in [`Metrics`].
pub const CPU: usize = 0;

/// Index of the memory entry in [`Metrics`].
pub const MEMORY: usize = 1;

/// Index of the latency entry in [`Metrics`].
pub const LATENCY: usize = 2;

/// The telemetry of one node in one step: `[cpu, memory, latency]`, each normally in `[0, 1]`
/// (use [`CPU`], [`MEMORY`] and [`LATENCY`] to index it).
pub type Metrics = [f64; METRIC_COUNT];

/// Which entries of a node's observation are missing this step, in the order of [`Metrics`].
pub type MissingMask = [bool; METRIC_COUNT];
