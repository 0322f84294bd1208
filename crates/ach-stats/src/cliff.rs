//! Cliff's delta for two independent samples, its magnitude label and its confidence interval.
//!
//! # The estimate
//!
//! `delta = (#{(i, j): x_i > y_j} - #{(i, j): x_i < y_j}) / (n1 n2)`: the probability that a
//! value of `x` (the treatment) exceeds a value of `y` (the control) minus the probability of the
//! reverse. Both samples are sorted and merged, so the cost is `O((n1 + n2) log(n1 + n2))`
//! rather than the `O(n1 n2)` of the dominance matrix; the counts are integers and `delta` is
//! their quotient rounded once.
//!
//! # The interval (Cliff 1993, Feng and Cliff 2004, as coded in R's `effsize::cliff.delta`)
//!
//! With the dominance matrix `d_ij = sign(x_i - y_j)`, row means `d_i.`, column means `d_.j`,
//! `d' = delta` (or `delta (n1 n2 - 1) / (n1 n2)` when `|delta| = 1`, so the variance is not
//! zero) and `SSR = sum_ij (d_ij - d')^2`:
//!
//! * unbiased variance:
//!   `S = (n2^2 sum_i (d_i. - d')^2 + n1^2 sum_j (d_.j - d')^2 - SSR) / (n1 n2 (n1 - 1) (n2 - 1))`,
//! * consistent variance: `S = ((n2 - 1) S_i. + (n1 - 1) S_.j + S_ij) / (n1 n2)` with
//!   `S_i. = sum_i (d_i. - d')^2 / (n1 - 1)`, `S_.j = sum_j (d_.j - d')^2 / (n2 - 1)`,
//!   `S_ij = SSR / ((n1 - 1) (n2 - 1))`.
//!
//! With `Z` the normal quantile or the Student t quantile with `n1 + n2 - 2` degrees of freedom,
//! the asymmetric interval is
//! `(d' - d'^3 -+ Z sqrt(S) sqrt((1 - d'^2)^2 + Z^2 S)) / (1 - d'^2 + Z^2 S)`, with the upper
//! bound set to 1 when `delta = 1` and the lower bound to -1 when `delta = -1`.
//!
//! effsize's defaults are the unbiased variance and the t quantile. effsize computes the row and
//! column means in two ways: from the dominance matrix (`return.dm = TRUE`, the definition,
//! [`CliffCiAlgorithm::Definition`]) or, by default, by a "row partitioning" binary search
//! ([`CliffCiAlgorithm::EffsizeRowPartition`]). The latter has a defect: its vectorised binary
//! search can leave the insertion point of a control value that exceeds every treatment value
//! one past the end, and the line meant to clamp it (`partitions[partitions[,1]>n1, 2] = n1`)
//! writes to the wrong column, so such a value gets `d_.j = -1/n1` instead of `-1`. The estimate
//! is unaffected, but the variance, hence the interval, differs. This crate uses the definition by
//! default and reproduces the row-partition result on request, so that R output can be checked.

use serde::{Deserialize, Serialize};

use crate::StatsError;
use crate::error::{check_confidence_level, check_finite};
use crate::normal::{normal_critical_value, student_t_critical_value};

/// The magnitude of Cliff's delta by the thresholds of Romano et al. (2006).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Magnitude {
    /// `|delta| < 0.147`.
    Negligible,
    /// `0.147 <= |delta| < 0.33`.
    Small,
    /// `0.33 <= |delta| < 0.474`.
    Medium,
    /// `|delta| >= 0.474`.
    Large,
}

impl Magnitude {
    /// Labels `delta` by the thresholds 0.147, 0.33 and 0.474 (Romano et al. 2006), each
    /// threshold belonging to the larger label, as in effsize's `findInterval`.
    pub fn of(delta: f64) -> Self {
        let size = delta.abs();
        if size < 0.147 {
            Magnitude::Negligible
        } else if size < 0.33 {
            Magnitude::Small
        } else if size < 0.474 {
            Magnitude::Medium
        } else {
            Magnitude::Large
        }
    }

    /// The label in lower case, as effsize prints it.
    pub fn name(self) -> &'static str {
        match self {
            Magnitude::Negligible => "negligible",
            Magnitude::Small => "small",
            Magnitude::Medium => "medium",
            Magnitude::Large => "large",
        }
    }
}

/// Cliff's delta of `x` (treatment) against `y` (control).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CliffsDelta {
    /// `(n_greater - n_less) / (n_x n_y)`.
    pub delta: f64,
    /// The number of pairs with `x_i > y_j`.
    pub n_greater: u64,
    /// The number of pairs with `x_i < y_j`.
    pub n_less: u64,
    /// The number of pairs with `x_i == y_j`.
    pub n_equal: u64,
    /// The size of `x`.
    pub n_x: usize,
    /// The size of `y`.
    pub n_y: usize,
    /// The magnitude label of `delta`.
    pub magnitude: Magnitude,
}

/// Computes Cliff's delta of `x` against `y` in `O((n1 + n2) log(n1 + n2))`.
///
/// # Errors
///
/// [`StatsError::TooFewValues`] when a sample is empty, [`StatsError::NonFinite`] for NaN or
/// infinite values.
///
/// # Example
///
/// ```
/// use ach_stats::{cliffs_delta, Magnitude};
///
/// let treatment = [10.0, 10.0, 20.0, 20.0, 20.0, 30.0, 30.0, 30.0, 40.0, 50.0];
/// let control = [10.0, 20.0, 30.0, 40.0, 40.0, 50.0];
/// let result = cliffs_delta(&treatment, &control)?;
/// assert_eq!(result.delta, -0.25);
/// assert_eq!(result.magnitude, Magnitude::Small);
/// # Ok::<(), ach_stats::StatsError>(())
/// ```
pub fn cliffs_delta(x: &[f64], y: &[f64]) -> Result<CliffsDelta, StatsError> {
    check_samples(x, y, 1)?;
    let x_sorted = sorted(x);
    let y_sorted = sorted(y);
    let rows = dominance_margins(&x_sorted, &y_sorted);
    let n_greater: u64 = rows.iter().map(|counts| counts.below).sum();
    let n_less: u64 = rows.iter().map(|counts| counts.above).sum();
    Ok(delta_from_counts(n_greater, n_less, x.len(), y.len()))
}

fn delta_from_counts(n_greater: u64, n_less: u64, n_x: usize, n_y: usize) -> CliffsDelta {
    let pairs = n_x as u64 * n_y as u64;
    // Both integers are exact in f64 below 2^53 pairs, so the quotient is rounded once.
    let delta = (n_greater as f64 - n_less as f64) / pairs as f64;
    CliffsDelta {
        delta,
        n_greater,
        n_less,
        n_equal: pairs - n_greater - n_less,
        n_x,
        n_y,
        magnitude: Magnitude::of(delta),
    }
}

/// The variance estimator of Cliff's delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CliffVariance {
    /// The unbiased estimate (effsize `use.unbiased = TRUE`, the default).
    Unbiased,
    /// The consistent estimate (effsize `use.unbiased = FALSE`; Cliff 1996).
    Consistent,
}

/// The distribution of the critical value of the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CliffQuantile {
    /// Student t with `n1 + n2 - 2` degrees of freedom (effsize `use.normal = FALSE`, the
    /// default; Feng and Cliff 2004).
    #[serde(rename = "student-t")]
    StudentT,
    /// The standard normal (effsize `use.normal = TRUE`).
    #[serde(rename = "normal")]
    Normal,
}

/// How the row and column means of the dominance matrix are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CliffCiAlgorithm {
    /// By their definition (effsize `return.dm = TRUE`), computed in `O(n log n)`.
    #[serde(rename = "definition")]
    Definition,
    /// effsize's default row-partition algorithm, including its column-clamping defect (see the
    /// module documentation); for reproducing R output only.
    #[serde(rename = "effsize-row-partition")]
    EffsizeRowPartition,
}

/// Options of [`cliffs_delta_ci`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CliffCiOptions {
    /// The confidence level, strictly between 0 and 1 (effsize: 0.95).
    pub confidence_level: f64,
    /// The variance estimator (effsize default: unbiased).
    pub variance: CliffVariance,
    /// The quantile (effsize default: Student t).
    pub quantile: CliffQuantile,
    /// How the dominance margins are computed (default: the definition).
    pub algorithm: CliffCiAlgorithm,
}

impl Default for CliffCiOptions {
    /// effsize's defaults (95 %, unbiased variance, Student t) with the definitional margins.
    fn default() -> Self {
        Self {
            confidence_level: 0.95,
            variance: CliffVariance::Unbiased,
            quantile: CliffQuantile::StudentT,
            algorithm: CliffCiAlgorithm::Definition,
        }
    }
}

/// Cliff's delta with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CliffsDeltaCi {
    /// The estimate and its counts.
    pub estimate: CliffsDelta,
    /// The variance estimate of delta.
    pub variance: f64,
    /// The critical value `Z` of the interval.
    pub critical_value: f64,
    /// The lower bound of the interval.
    pub lower: f64,
    /// The upper bound of the interval.
    pub upper: f64,
    /// The confidence level.
    pub confidence_level: f64,
}

/// Computes Cliff's delta of `x` against `y` with its asymmetric confidence interval.
///
/// # Errors
///
/// [`StatsError::TooFewValues`] when a sample has fewer than 2 values,
/// [`StatsError::NonFinite`] for NaN or infinite values, [`StatsError::InvalidOption`] for a
/// confidence level outside (0, 1), and [`StatsError::NegativeVariance`] when the unbiased
/// variance estimate is negative.
///
/// # Example
///
/// ```
/// use ach_stats::{cliffs_delta_ci, CliffCiOptions};
///
/// let treatment = [10.0, 10.0, 20.0, 20.0, 20.0, 30.0, 30.0, 30.0, 40.0, 50.0];
/// let control = [10.0, 20.0, 30.0, 40.0, 40.0, 50.0];
/// let result = cliffs_delta_ci(&treatment, &control, &CliffCiOptions::default())?;
/// // effsize::cliff.delta(treatment, control) prints -0.7265846 and 0.3890062.
/// assert!((result.lower - -0.7265846).abs() < 1e-7);
/// assert!((result.upper - 0.3890062).abs() < 1e-7);
/// # Ok::<(), ach_stats::StatsError>(())
/// ```
pub fn cliffs_delta_ci(
    x: &[f64],
    y: &[f64],
    options: &CliffCiOptions,
) -> Result<CliffsDeltaCi, StatsError> {
    check_samples(x, y, 2)?;
    check_confidence_level(options.confidence_level)?;
    let x_sorted = sorted(x);
    let y_sorted = sorted(y);
    let n1 = x.len() as f64;
    let n2 = y.len() as f64;
    let dominance = match options.algorithm {
        CliffCiAlgorithm::Definition => Dominance::by_definition(&x_sorted, &y_sorted),
        CliffCiAlgorithm::EffsizeRowPartition => Dominance::as_effsize(&x_sorted, &y_sorted),
    };
    let delta = dominance.estimate.delta;
    let pairs = n1 * n2;
    let adjusted = if delta.abs() == 1.0 {
        delta * (pairs - 1.0) / pairs
    } else {
        delta
    };
    let variance = dominance.variance(adjusted, options.variance);
    if variance < 0.0 {
        return Err(StatsError::NegativeVariance { variance });
    }
    let critical_value = match options.quantile {
        CliffQuantile::Normal => normal_critical_value(options.confidence_level),
        CliffQuantile::StudentT => {
            student_t_critical_value(options.confidence_level, n1 + n2 - 2.0)?
        }
    };
    let z = critical_value;
    let spread =
        z * variance.sqrt() * ((1.0 - adjusted * adjusted).powi(2) + z * z * variance).sqrt();
    let denominator = 1.0 - adjusted * adjusted + z * z * variance;
    let centre = adjusted - adjusted.powi(3);
    let mut lower = (centre - spread) / denominator;
    let mut upper = (centre + spread) / denominator;
    if delta == 1.0 {
        upper = 1.0;
    }
    if delta == -1.0 {
        lower = -1.0;
    }
    Ok(CliffsDeltaCi {
        estimate: dominance.estimate,
        variance,
        critical_value,
        lower,
        upper,
        confidence_level: options.confidence_level,
    })
}

/// The dominance of two sorted samples that the interval of [`cliffs_delta_ci`] needs: the
/// estimate, each row's and each column's mean dominance, and the pairs in which `x` is
/// greater and less.
struct Dominance {
    estimate: CliffsDelta,
    /// Per value of `x`: (values of `y` below it - values above it) / `n_y`.
    row_means: Vec<f64>,
    /// Per value of `y`: (values of `x` above it - values below it) / `n_x`.
    column_means: Vec<f64>,
    n_greater: u64,
    n_less: u64,
}

impl Dominance {
    /// By the definition ([`CliffCiAlgorithm::Definition`]).
    fn by_definition(x_sorted: &[f64], y_sorted: &[f64]) -> Dominance {
        let (n1, n2) = (x_sorted.len() as f64, y_sorted.len() as f64);
        let rows = dominance_margins(x_sorted, y_sorted);
        let columns = dominance_margins(y_sorted, x_sorted);
        let n_greater: u64 = rows.iter().map(|counts| counts.below).sum();
        let n_less: u64 = rows.iter().map(|counts| counts.above).sum();
        Dominance {
            estimate: delta_from_counts(n_greater, n_less, x_sorted.len(), y_sorted.len()),
            row_means: rows
                .iter()
                .map(|counts| (counts.below as f64 - counts.above as f64) / n2)
                .collect(),
            column_means: columns
                .iter()
                .map(|counts| (counts.above as f64 - counts.below as f64) / n1)
                .collect(),
            n_greater,
            n_less,
        }
    }

    /// As effsize computes it, its defect included
    /// ([`CliffCiAlgorithm::EffsizeRowPartition`]).
    fn as_effsize(x_sorted: &[f64], y_sorted: &[f64]) -> Dominance {
        let (n1, n2) = (x_sorted.len() as f64, y_sorted.len() as f64);
        let rows = effsize_partition(x_sorted, y_sorted);
        let columns = effsize_partition(y_sorted, x_sorted);
        let n_x = x_sorted.len() as i64;
        let n_y = y_sorted.len() as i64;
        // Rows: `partitions[,2] = n2 - H + 1; partitions[partitions[,1] > n2, 1] = n2`.
        let row_counts: Vec<(i64, i64)> = rows
            .iter()
            .map(|&(low, high)| (low.min(n_y), n_y - high + 1))
            .collect();
        // Columns: `partitions[,2] = n1 - H + 1; partitions[partitions[,1] > n1, 2] = n1`
        // (the defect: the second column is overwritten, the first is left as it is).
        let column_counts: Vec<(i64, i64)> = columns
            .iter()
            .map(|&(low, high)| {
                let above = if low > n_x { n_x } else { n_x - high + 1 };
                (low, above)
            })
            .collect();
        let row_means: Vec<f64> = row_counts
            .iter()
            .map(|&(below, above)| (below - above) as f64 / n2)
            .collect();
        let column_means: Vec<f64> = column_counts
            .iter()
            .map(|&(below, above)| (above - below) as f64 / n1)
            .collect();
        let n_greater: i64 = row_counts.iter().map(|counts| counts.0).sum();
        let n_less: i64 = row_counts.iter().map(|counts| counts.1).sum();
        // effsize takes the estimate as the mean of the row means.
        let mut estimate = delta_from_counts(
            n_greater as u64,
            n_less as u64,
            x_sorted.len(),
            y_sorted.len(),
        );
        estimate.delta = row_means.iter().sum::<f64>() / n1;
        estimate.magnitude = Magnitude::of(estimate.delta);
        Dominance {
            estimate,
            row_means,
            column_means,
            n_greater: n_greater as u64,
            n_less: n_less as u64,
        }
    }

    /// The variance of the estimate around `adjusted` (the estimate moved off +-1), by `kind`.
    fn variance(&self, adjusted: f64, kind: CliffVariance) -> f64 {
        let n1 = self.row_means.len() as f64;
        let n2 = self.column_means.len() as f64;
        let pairs = n1 * n2;
        let n_equal = pairs - self.n_greater as f64 - self.n_less as f64;
        let ssr = self.n_greater as f64 * (1.0 - adjusted).powi(2)
            + n_equal * adjusted.powi(2)
            + self.n_less as f64 * (1.0 + adjusted).powi(2);
        let row_squares: f64 = self.row_means.iter().map(|m| (m - adjusted).powi(2)).sum();
        let column_squares: f64 = self
            .column_means
            .iter()
            .map(|m| (m - adjusted).powi(2))
            .sum();
        match kind {
            CliffVariance::Unbiased => {
                (n2 * n2 * row_squares + n1 * n1 * column_squares - ssr)
                    / (n1 * n2 * (n1 - 1.0) * (n2 - 1.0))
            }
            CliffVariance::Consistent => {
                let row_term = row_squares / (n1 - 1.0);
                let column_term = column_squares / (n2 - 1.0);
                let cell_term = ssr / ((n1 - 1.0) * (n2 - 1.0));
                ((n2 - 1.0) * row_term + (n1 - 1.0) * column_term + cell_term) / (n1 * n2)
            }
        }
    }
}

fn check_samples(x: &[f64], y: &[f64], needed: usize) -> Result<(), StatsError> {
    for sample in [x, y] {
        if sample.len() < needed {
            return Err(StatsError::TooFewValues {
                what: if needed == 1 {
                    "Cliff's delta (each sample)"
                } else {
                    "the confidence interval of Cliff's delta (each sample)"
                },
                needed,
                got: sample.len(),
            });
        }
    }
    check_finite("x", x)?;
    check_finite("y", y)
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted
}

/// For one value: how many values of the other sample lie below and above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MarginCounts {
    below: u64,
    above: u64,
}

/// For each value of `values` (sorted), counts the values of `other` (sorted) strictly below and
/// strictly above it, by a single merge pass.
fn dominance_margins(values: &[f64], other: &[f64]) -> Vec<MarginCounts> {
    let mut counts = Vec::with_capacity(values.len());
    let mut strictly_below = 0;
    let mut at_most = 0;
    for &value in values {
        while strictly_below < other.len() && other[strictly_below] < value {
            strictly_below += 1;
        }
        if at_most < strictly_below {
            at_most = strictly_below;
        }
        while at_most < other.len() && other[at_most] <= value {
            at_most += 1;
        }
        counts.push(MarginCounts {
            below: strictly_below as u64,
            above: (other.len() - at_most) as u64,
        });
    }
    counts
}

/// A literal port of effsize's `.bsearch.partition(x, a)` (1-based results `(below, above)`),
/// including the vectorised loop that keeps stepping converged elements.
fn effsize_partition(x: &[f64], a: &[f64]) -> Vec<(i64, i64)> {
    let end = a.len() as i64;
    // `a[k]` in R (1-based); indices outside 1..=end are NA, for which comparisons are FALSE.
    let at = |k: i64| -> Option<f64> {
        if k >= 1 && k <= end {
            Some(a[(k - 1) as usize])
        } else {
            None
        }
    };
    let mut low = vec![1_i64; x.len()];
    let mut high = vec![end; x.len()];
    loop {
        for i in 0..x.len() {
            let middle = (low[i] + high[i]) / 2;
            let goes_left = at(middle).is_some_and(|value| x[i] <= value);
            if goes_left {
                high[i] = middle;
            } else {
                low[i] = middle + 1;
            }
        }
        if low.iter().zip(&high).all(|(l, h)| h <= l) {
            break;
        }
    }
    let mut result = Vec::with_capacity(x.len());
    for i in 0..x.len() {
        let mut h = low[i];
        while at(h).is_some_and(|value| value == x[i]) {
            h += 1;
        }
        let mut l = low[i];
        while at(l).is_some_and(|value| value >= x[i]) {
            l -= 1;
        }
        if l == h {
            h = l + 1;
        }
        h = h.min(end + 1);
        result.push((l, h));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quadratic_delta(x: &[f64], y: &[f64]) -> f64 {
        let mut sum = 0_i64;
        for a in x {
            for b in y {
                sum += if a > b {
                    1
                } else if a < b {
                    -1
                } else {
                    0
                };
            }
        }
        sum as f64 / (x.len() * y.len()) as f64
    }

    #[test]
    fn merge_matches_pairwise_loop() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let y = [2.0, 7.0, 1.0, 8.0, 2.0, 8.0];
        assert_eq!(cliffs_delta(&x, &y).unwrap().delta, quadratic_delta(&x, &y));
    }

    #[test]
    fn magnitude_thresholds_belong_to_the_larger_label() {
        assert_eq!(Magnitude::of(0.1469), Magnitude::Negligible);
        assert_eq!(Magnitude::of(-0.147), Magnitude::Small);
        assert_eq!(Magnitude::of(0.33), Magnitude::Medium);
        assert_eq!(Magnitude::of(0.474), Magnitude::Large);
    }
}
