//! The percentile bootstrap confidence interval with an explicitly seeded generator.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use crate::StatsError;
use crate::error::{check_confidence_level, check_finite};

/// Options of [`bootstrap_ci`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapOptions {
    /// The number of resamples (at least 1; 10 000 is a common choice).
    pub resamples: usize,
    /// The confidence level, strictly between 0 and 1.
    pub confidence_level: f64,
    /// The seed of the `Pcg64` generator; the same seed gives the same interval.
    pub seed: u64,
}

impl BootstrapOptions {
    /// 10 000 resamples at 95 % with the given seed.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            resamples: 10_000,
            confidence_level: 0.95,
            seed,
        }
    }
}

/// A percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapCi {
    /// The statistic of the original sample.
    pub estimate: f64,
    /// The `(1 - level) / 2` quantile of the bootstrap distribution.
    pub lower: f64,
    /// The `(1 + level) / 2` quantile of the bootstrap distribution.
    pub upper: f64,
}

/// The percentile bootstrap interval of `statistic` over `sample`.
///
/// Each of `resamples` resamples draws `n` values of `sample` with replacement (indices from a
/// `Pcg64` seeded with `options.seed`); the bounds are the `(1 - level) / 2` and
/// `(1 + level) / 2` quantiles of the resampled statistics, interpolated linearly between order
/// statistics (R `quantile` type 7, numpy's default).
///
/// # Errors
///
/// [`StatsError::TooFewValues`] for an empty sample or zero resamples,
/// [`StatsError::NonFinite`] for a NaN or infinite value or statistic, and
/// [`StatsError::InvalidOption`] for a level outside (0, 1).
///
/// # Example
///
/// ```
/// use ach_stats::{bootstrap_ci, BootstrapOptions};
///
/// let sample = [2.1, 2.5, 2.2, 3.0, 2.8, 2.4, 2.6, 2.9];
/// let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
/// let interval = bootstrap_ci(&sample, mean, &BootstrapOptions::with_seed(7))?;
/// assert!(interval.lower < interval.estimate && interval.estimate < interval.upper);
/// # Ok::<(), ach_stats::StatsError>(())
/// ```
pub fn bootstrap_ci<F>(
    sample: &[f64],
    statistic: F,
    options: &BootstrapOptions,
) -> Result<BootstrapCi, StatsError>
where
    F: Fn(&[f64]) -> f64,
{
    if sample.is_empty() {
        return Err(StatsError::TooFewValues {
            what: "the bootstrap (sample)",
            needed: 1,
            got: 0,
        });
    }
    if options.resamples == 0 {
        return Err(StatsError::TooFewValues {
            what: "the bootstrap (resamples)",
            needed: 1,
            got: 0,
        });
    }
    check_finite("x", sample)?;
    check_confidence_level(options.confidence_level)?;
    let estimate = statistic(sample);
    check_finite("statistic of the sample", &[estimate])?;

    let mut generator = Pcg64::seed_from_u64(options.seed);
    let mut resample = vec![0.0; sample.len()];
    let mut statistics = Vec::with_capacity(options.resamples);
    for _ in 0..options.resamples {
        for slot in resample.iter_mut() {
            *slot = sample[generator.random_range(0..sample.len())];
        }
        statistics.push(statistic(&resample));
    }
    check_finite("bootstrap statistics", &statistics)?;
    statistics.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - options.confidence_level) / 2.0;
    Ok(BootstrapCi {
        estimate,
        lower: quantile_type7(&statistics, tail),
        upper: quantile_type7(&statistics, 1.0 - tail),
    })
}

/// The type-7 quantile of sorted, non-empty `values`.
fn quantile_type7(values: &[f64], probability: f64) -> f64 {
    let position = probability * (values.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(values.len() - 1);
    let fraction = position - below as f64;
    values[below] + fraction * (values[above] - values[below])
}
