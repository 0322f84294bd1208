//! The exact null distribution of the Wilcoxon signed-rank statistic, counted in integers.
//!
//! Under the null hypothesis each of the `n` ranks `1..=n` enters `R+` with probability 1/2,
//! independently, so `P(R+ = k) = c(n, k) / 2^n`, where `c(n, k)` is the number of subsets of
//! `{1, ..., n}` whose sum is `k`. The counts satisfy
//! `c(m, k) = c(m - 1, k) + c(m - 1, k - m)`, which is evaluated here in `u128`, so every
//! tail probability is an exact rational `count / 2^n` that is rounded to `f64` once. Floating
//! summation of probabilities (as scipy does) loses relative accuracy in the far tails; integer
//! counting does not.

use crate::StatsError;

/// The largest `n` whose `2^n` sign patterns fit in a `u128` count.
pub const MAX_EXACT_N: usize = 127;

/// The exact null distribution of `R+` for `n` untied, nonzero observations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRankDistribution {
    n: usize,
    /// `cumulative[k]` is the number of sign patterns with `R+ <= k`.
    cumulative: Vec<u128>,
}

impl SignedRankDistribution {
    /// Counts the distribution for `n` observations.
    ///
    /// # Errors
    ///
    /// [`StatsError::ExactSampleTooLarge`] when `n > 127`.
    pub fn new(n: usize) -> Result<Self, StatsError> {
        if n > MAX_EXACT_N {
            return Err(StatsError::ExactSampleTooLarge {
                n,
                max: MAX_EXACT_N,
            });
        }
        let max_sum = n * (n + 1) / 2;
        let mut counts = vec![0_u128; max_sum + 1];
        counts[0] = 1;
        for rank in 1..=n {
            let reachable = rank * (rank + 1) / 2;
            for k in (rank..=reachable).rev() {
                counts[k] += counts[k - rank];
            }
        }
        let mut cumulative = counts;
        for k in 1..cumulative.len() {
            cumulative[k] += cumulative[k - 1];
        }
        Ok(Self { n, cumulative })
    }

    /// The number of observations.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The number of sign patterns, `2^n`.
    pub fn total(&self) -> u128 {
        1_u128 << self.n
    }

    /// The number of sign patterns with `R+ <= k`.
    pub fn count_at_most(&self, k: i64) -> u128 {
        if k < 0 {
            0
        } else {
            let index = (k as usize).min(self.cumulative.len() - 1);
            self.cumulative[index]
        }
    }

    /// The number of sign patterns with `R+ >= k`.
    pub fn count_at_least(&self, k: i64) -> u128 {
        self.total() - self.count_at_most(k - 1)
    }

    /// Converts a count of sign patterns into a probability, rounded once to the nearest `f64`.
    pub fn probability(&self, count: u128) -> f64 {
        // The conversion of `count` rounds to nearest, and the division by a power of two is
        // exact, so the result is the correctly rounded value of `count / 2^n`.
        count as f64 / self.total() as f64
    }

    /// `P(R+ <= k)`.
    pub fn cdf(&self, k: i64) -> f64 {
        self.probability(self.count_at_most(k))
    }

    /// `P(R+ >= k)`.
    pub fn sf(&self, k: i64) -> f64 {
        self.probability(self.count_at_least(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_distribution_is_counted() {
        let distribution = SignedRankDistribution::new(3).unwrap();
        // Subsets of {1, 2, 3} by sum: 0:1, 1:1, 2:1, 3:2, 4:1, 5:1, 6:1.
        assert_eq!(distribution.count_at_most(3), 5);
        assert_eq!(distribution.count_at_least(3), 5);
        assert_eq!(distribution.count_at_most(6), 8);
        assert_eq!(distribution.count_at_most(-1), 0);
        assert_eq!(distribution.count_at_least(7), 0);
    }

    #[test]
    fn largest_distribution_fits() {
        let distribution = SignedRankDistribution::new(MAX_EXACT_N).unwrap();
        assert_eq!(distribution.count_at_most(i64::MAX), 1_u128 << MAX_EXACT_N);
        assert!(SignedRankDistribution::new(MAX_EXACT_N + 1).is_err());
    }
}
