//! Mean, standard deviation and the Student t confidence interval of the mean.

use serde::{Deserialize, Serialize};

use crate::StatsError;
use crate::error::{check_confidence_level, check_finite};
use crate::normal::student_t_critical_value;

/// Descriptive statistics of one sample with the 95 % Student t interval of its mean.
///
/// * `mean = sum(x) / n`,
/// * `sd = sqrt(sum((x - mean)^2) / (n - 1))` (numpy `ddof=1`, R `sd`),
/// * `se = sd / sqrt(n)`,
/// * `ci95_half_width = t_{0.975, n-1} se`, the half width of `mean +- t se`
///   (R `t.test(x)$conf.int`, scipy `stats.t.interval(0.95, n - 1, mean, se)`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The number of values.
    pub n: usize,
    /// The arithmetic mean.
    pub mean: f64,
    /// The sample standard deviation (denominator `n - 1`).
    pub sd: f64,
    /// The standard error of the mean, `sd / sqrt(n)`.
    pub se: f64,
    /// The 0.975 quantile of Student t with `n - 1` degrees of freedom.
    pub t_crit_0975: f64,
    /// `t_crit_0975 * se`.
    pub ci95_half_width: f64,
    /// `mean - ci95_half_width`.
    pub ci95_lower: f64,
    /// `mean + ci95_half_width`.
    pub ci95_upper: f64,
}

impl Summary {
    /// Summarises `values`.
    ///
    /// # Errors
    ///
    /// [`StatsError::TooFewValues`] for fewer than 2 values, [`StatsError::NonFinite`] for NaN
    /// or infinite values.
    ///
    /// # Example
    ///
    /// ```
    /// let summary = ach_stats::Summary::of(&[1.0, 2.0, 3.0, 4.0])?;
    /// assert_eq!(summary.mean, 2.5);
    /// assert!((summary.ci95_half_width - 2.0542603).abs() < 1e-6);
    /// # Ok::<(), ach_stats::StatsError>(())
    /// ```
    pub fn of(values: &[f64]) -> Result<Self, StatsError> {
        let (n, mean, sd) = mean_and_sd(values)?;
        let se = sd / (n as f64).sqrt();
        let t_crit_0975 = student_t_critical_value(0.95, (n - 1) as f64)?;
        let ci95_half_width = t_crit_0975 * se;
        Ok(Self {
            n,
            mean,
            sd,
            se,
            t_crit_0975,
            ci95_half_width,
            ci95_lower: mean - ci95_half_width,
            ci95_upper: mean + ci95_half_width,
        })
    }

    /// The half width of the Student t interval of the mean at another confidence level.
    ///
    /// # Errors
    ///
    /// [`StatsError::InvalidOption`] for a level outside (0, 1).
    pub fn t_half_width(&self, confidence_level: f64) -> Result<f64, StatsError> {
        check_confidence_level(confidence_level)?;
        Ok(student_t_critical_value(confidence_level, (self.n - 1) as f64)? * self.se)
    }
}

/// Returns `(n, mean, sd)` after checking the input.
fn mean_and_sd(values: &[f64]) -> Result<(usize, f64, f64), StatsError> {
    if values.len() < 2 {
        return Err(StatsError::TooFewValues {
            what: "the sample standard deviation",
            needed: 2,
            got: values.len(),
        });
    }
    check_finite("x", values)?;
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    let sd = (squares / (n - 1) as f64).sqrt();
    if !mean.is_finite() || !sd.is_finite() {
        // Finite inputs near f64::MAX can overflow the sums.
        return Err(StatsError::NonFinite {
            sample: "sum of x",
            index: 0,
            value: if mean.is_finite() { sd } else { mean },
        });
    }
    Ok((n, mean, sd))
}
