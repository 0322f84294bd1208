//! Configuration of the smoothing/composite stage and of the distortion stage.

use crate::error::{DistortionConfigError, TelemetryConfigError};

/// Largest lag (in steps) a [`DistortionConfig`] accepts. It bounds the memory of the lag
/// buffer (`(lag + 1) * node_count` observations).
pub const MAX_LAG: usize = 65_536;

/// Parameters of smoothing, composite load and total load.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TelemetryConfig {
    /// EWMA smoothing factor `beta` in `(0, 1]`: `S <- (1 - beta) S + beta * obs`.
    pub beta: f64,
    /// Weights `[cpu, memory, latency]` of the composite load; each `>= 0`, not all zero.
    pub weights: [f64; 3],
    /// Exponent `p >= 1` of the weighted Lp norm that forms the composite load.
    pub p: f64,
    /// Mixing factor `alpha` in `[0, 1]` of the total load:
    /// `alpha * mean(l) + (1 - alpha) * max(l)`.
    pub alpha: f64,
}

impl TelemetryConfig {
    /// The paper's values: `beta = 0.3`, weights `(0.40, 0.25, 0.35)`, `p = 4`, `alpha = 0.5`.
    pub fn paper() -> TelemetryConfig {
        TelemetryConfig {
            beta: 0.3,
            weights: [0.4, 0.25, 0.35],
            p: 4.0,
            alpha: 0.5,
        }
    }

    /// Checks every field against its rule and names the first field that breaks it.
    pub fn validate(&self) -> Result<(), TelemetryConfigError> {
        validate_beta(self.beta)?;
        let weights_valid = self.weights.iter().all(|w| w.is_finite() && *w >= 0.0)
            && self.weights.iter().any(|w| *w > 0.0);
        if !weights_valid {
            return Err(TelemetryConfigError::Weights {
                value: self.weights,
            });
        }
        if !(self.p.is_finite() && self.p >= 1.0) {
            return Err(TelemetryConfigError::Exponent { value: self.p });
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(TelemetryConfigError::Alpha { value: self.alpha });
        }
        Ok(())
    }
}

impl Default for TelemetryConfig {
    /// Same as [`TelemetryConfig::paper`].
    fn default() -> TelemetryConfig {
        TelemetryConfig::paper()
    }
}

/// Checks the smoothing factor rule `beta in (0, 1]`.
pub(crate) fn validate_beta(beta: f64) -> Result<(), TelemetryConfigError> {
    if beta > 0.0 && beta <= 1.0 {
        Ok(())
    } else {
        Err(TelemetryConfigError::Beta { value: beta })
    }
}

/// Parameters of the telemetry distortion (MODEL.md, section 3).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DistortionConfig {
    /// Standard deviation of the additive Gaussian noise; 0 disables the noise.
    pub sigma: f64,
    /// Lag `d` in steps: the observation of step `t` is the raw telemetry of step `t - d`.
    pub lag: usize,
    /// Probability that an entry is missing and replaced by the previous observation;
    /// 0 disables missing data.
    pub p_miss: f64,
}

impl DistortionConfig {
    /// No distortion: no noise, no lag, no missing data. The observation is the clipped raw
    /// telemetry, which makes a noise-free pipeline cheap.
    pub fn none() -> DistortionConfig {
        DistortionConfig {
            sigma: 0.0,
            lag: 0,
            p_miss: 0.0,
        }
    }

    /// Whether the Gaussian noise step is enabled (`sigma > 0`): the caller must then supply
    /// [`StepDraws::gauss`](crate::StepDraws::gauss).
    pub fn uses_gauss(&self) -> bool {
        self.sigma > 0.0
    }

    /// Whether the missing-data step is enabled (`p_miss > 0`): the caller must then supply
    /// [`StepDraws::missing`](crate::StepDraws::missing).
    pub fn uses_missing(&self) -> bool {
        self.p_miss > 0.0
    }

    /// Whether this config leaves raw telemetry unchanged apart from clipping.
    pub fn is_none(&self) -> bool {
        self.lag == 0 && !self.uses_gauss() && !self.uses_missing()
    }

    /// Checks every field against its rule: `sigma` finite and `>= 0`, `lag <= MAX_LAG`,
    /// `p_miss` in `[0, 1]`.
    pub fn validate(&self) -> Result<(), DistortionConfigError> {
        if !(self.sigma.is_finite() && self.sigma >= 0.0) {
            return Err(DistortionConfigError::Sigma { value: self.sigma });
        }
        if self.lag > MAX_LAG {
            return Err(DistortionConfigError::Lag {
                value: self.lag,
                max: MAX_LAG,
            });
        }
        if !(0.0..=1.0).contains(&self.p_miss) {
            return Err(DistortionConfigError::MissingProbability { value: self.p_miss });
        }
        Ok(())
    }
}

impl Default for DistortionConfig {
    /// Same as [`DistortionConfig::none`].
    fn default() -> DistortionConfig {
        DistortionConfig::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_configs_are_valid() {
        assert_eq!(TelemetryConfig::paper().validate(), Ok(()));
        assert_eq!(DistortionConfig::none().validate(), Ok(()));
        assert!(DistortionConfig::none().is_none());
    }

    #[test]
    fn telemetry_config_errors_name_the_field() {
        let paper = TelemetryConfig::paper();
        for beta in [0.0, -0.1, 1.5, f64::NAN] {
            let config = TelemetryConfig { beta, ..paper };
            assert!(matches!(
                config.validate(),
                Err(TelemetryConfigError::Beta { .. })
            ));
        }
        assert_eq!(TelemetryConfig { beta: 1.0, ..paper }.validate(), Ok(()));
        for weights in [[0.0; 3], [-0.1, 0.5, 0.5], [f64::INFINITY, 0.0, 0.0]] {
            let config = TelemetryConfig { weights, ..paper };
            assert_eq!(
                config.validate(),
                Err(TelemetryConfigError::Weights { value: weights })
            );
        }
        let config = TelemetryConfig { p: 0.5, ..paper };
        assert_eq!(
            config.validate(),
            Err(TelemetryConfigError::Exponent { value: 0.5 })
        );
        let config = TelemetryConfig {
            alpha: 1.1,
            ..paper
        };
        assert_eq!(
            config.validate(),
            Err(TelemetryConfigError::Alpha { value: 1.1 })
        );
        let message = TelemetryConfigError::Alpha { value: 1.1 }.to_string();
        assert!(message.contains("alpha") && message.contains("1.1") && message.contains("[0, 1]"));
    }

    #[test]
    fn distortion_config_errors_name_the_field() {
        let none = DistortionConfig::none();
        let config = DistortionConfig {
            sigma: -1.0,
            ..none
        };
        assert_eq!(
            config.validate(),
            Err(DistortionConfigError::Sigma { value: -1.0 })
        );
        let config = DistortionConfig {
            sigma: f64::NAN,
            ..none
        };
        assert!(matches!(
            config.validate(),
            Err(DistortionConfigError::Sigma { .. })
        ));
        let config = DistortionConfig {
            p_miss: 2.0,
            ..none
        };
        assert_eq!(
            config.validate(),
            Err(DistortionConfigError::MissingProbability { value: 2.0 })
        );
        let config = DistortionConfig {
            lag: MAX_LAG + 1,
            ..none
        };
        assert!(matches!(
            config.validate(),
            Err(DistortionConfigError::Lag { .. })
        ));
    }
}
