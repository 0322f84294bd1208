//! Error types of the crate.

/// A [`TelemetryConfig`](crate::TelemetryConfig) field that breaks its rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelemetryConfigError {
    /// The smoothing factor is outside `(0, 1]`.
    #[error("telemetry config: beta = {value:?} is invalid; it must lie in (0, 1]")]
    Beta {
        /// The rejected value.
        value: f64,
    },
    /// A weight is negative or not finite, or all weights are zero.
    #[error(
        "telemetry config: weights = {value:?} are invalid; each must be finite and >= 0, and not all zero"
    )]
    Weights {
        /// The rejected weights `[cpu, memory, latency]`.
        value: [f64; 3],
    },
    /// The norm exponent is below 1 or not finite.
    #[error("telemetry config: p = {value:?} is invalid; it must be finite and >= 1")]
    Exponent {
        /// The rejected value.
        value: f64,
    },
    /// The mean/max mixing factor of the total load is outside `[0, 1]`.
    #[error("telemetry config: alpha = {value:?} is invalid; it must lie in [0, 1]")]
    Alpha {
        /// The rejected value.
        value: f64,
    },
}

/// A [`DistortionConfig`](crate::DistortionConfig) field that breaks its rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistortionConfigError {
    /// The noise standard deviation is negative or not finite.
    #[error("distortion config: sigma = {value:?} is invalid; it must be finite and >= 0")]
    Sigma {
        /// The rejected value.
        value: f64,
    },
    /// The lag is larger than [`MAX_LAG`](crate::MAX_LAG).
    #[error("distortion config: lag = {value} is invalid; it must be at most {max}")]
    Lag {
        /// The rejected value.
        value: usize,
        /// The largest accepted lag.
        max: usize,
    },
    /// The probability of a missing entry is outside `[0, 1]`.
    #[error("distortion config: p_miss = {value:?} is invalid; it must lie in [0, 1]")]
    MissingProbability {
        /// The rejected value.
        value: f64,
    },
}

/// Why a telemetry component refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelemetryError {
    /// The telemetry configuration is invalid.
    #[error(transparent)]
    TelemetryConfig(#[from] TelemetryConfigError),
    /// The distortion configuration is invalid.
    #[error(transparent)]
    DistortionConfig(#[from] DistortionConfigError),
    /// An input slice does not have one entry per node.
    #[error("{what} has {got} entries but {expected} nodes are tracked")]
    LengthMismatch {
        /// Which input was wrong, e.g. `raw` or `draws.gauss`.
        what: &'static str,
        /// The number of tracked nodes.
        expected: usize,
        /// The length of the input.
        got: usize,
    },
    /// The distortion config enables a random step but the caller supplied no draws for it.
    #[error("{what} draws are required by the distortion config but none were supplied")]
    MissingDraws {
        /// Which draws were missing: `gauss` or `missing`.
        what: &'static str,
    },
    /// A saved state has a version this release cannot read.
    #[error("saved tracker state has version {found}; this release reads version {supported}")]
    UnsupportedStateVersion {
        /// The version found.
        found: u32,
        /// The version this release reads.
        supported: u32,
    },
    /// A node index is not below the node count.
    #[error("node {node} is out of range; {node_count} nodes are tracked")]
    NodeOutOfRange {
        /// The rejected node index.
        node: usize,
        /// The number of tracked nodes.
        node_count: usize,
    },
}

impl TelemetryError {
    /// Returns a [`TelemetryError::LengthMismatch`] unless `got == expected`.
    pub(crate) fn check_length(
        what: &'static str,
        expected: usize,
        got: usize,
    ) -> Result<(), TelemetryError> {
        if got == expected {
            Ok(())
        } else {
            Err(TelemetryError::LengthMismatch {
                what,
                expected,
                got,
            })
        }
    }
}
