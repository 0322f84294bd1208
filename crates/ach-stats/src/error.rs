//! The error type shared by every function of the crate.

use thiserror::Error;

/// Everything that can go wrong when a statistic is computed.
///
/// Every public function that can fail returns this type; no function of the crate panics on
/// bad input.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    /// The two samples of a paired test have different lengths.
    #[error("paired samples must have the same length, but x has {x_len} values and y has {y_len}")]
    LengthMismatch {
        /// The number of values in `x`.
        x_len: usize,
        /// The number of values in `y`.
        y_len: usize,
    },
    /// A sample has fewer values than the statistic needs.
    #[error("{what} needs at least {needed} values, but got {got}")]
    TooFewValues {
        /// What was being computed, e.g. `"the sample standard deviation"`.
        what: &'static str,
        /// The minimum number of values.
        needed: usize,
        /// The number of values given.
        got: usize,
    },
    /// A value is NaN or infinite.
    #[error("{sample}[{index}] is {value}, but every value must be finite")]
    NonFinite {
        /// Which sample holds the value (`"x"`, `"y"`, `"x - y"`, `"p"`, ...).
        sample: &'static str,
        /// The zero-based position of the value.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// The exact null distribution was requested for more observations than it can be counted
    /// for in 128-bit integers.
    #[error(
        "the exact signed-rank distribution is counted in 128-bit integers and supports at most \
         {max} observations, but {n} were given; use the asymptotic method"
    )]
    ExactSampleTooLarge {
        /// The number of observations that enter the exact distribution.
        n: usize,
        /// The largest supported number of observations.
        max: usize,
    },
    /// An option is outside its valid range or two options contradict each other.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A p-value given to a multiple-comparison adjustment is outside [0, 1].
    #[error("p[{index}] = {value} is not a probability in [0, 1]")]
    NotAProbability {
        /// The zero-based position of the value.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// The unbiased variance estimate of Cliff's delta is negative (possible for very small or
    /// degenerate samples), so no interval can be formed from it.
    #[error(
        "the unbiased variance estimate of Cliff's delta is negative ({variance}); use the \
         consistent estimate"
    )]
    NegativeVariance {
        /// The negative variance estimate.
        variance: f64,
    },
}

/// Checks that every value of `values` is finite and reports the first one that is not.
pub(crate) fn check_finite(sample: &'static str, values: &[f64]) -> Result<(), StatsError> {
    match values.iter().position(|value| !value.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            sample,
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// Checks that a confidence level lies strictly between 0 and 1.
pub(crate) fn check_confidence_level(level: f64) -> Result<(), StatsError> {
    if level.is_finite() && level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(StatsError::InvalidOption(format!(
            "the confidence level must lie strictly between 0 and 1, but is {level}"
        )))
    }
}
