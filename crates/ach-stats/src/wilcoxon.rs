//! The Wilcoxon signed-rank test for paired samples, in scipy's and in R's conventions.
//!
//! # The statistic
//!
//! Let `d_i = x_i - y_i` (computed as an `f64` subtraction, exactly as numpy and R do) and rank
//! the absolute differences `|d_i|` with mid-ranks for ties. `R+` is the sum of the ranks of
//! the positive differences and `R-` that of the negative ones. Which differences take part
//! depends on the zero method ([`ZeroMethod`]):
//!
//! * `wilcox`: zero differences are dropped before ranking; `count` = number of nonzero `d_i`.
//! * `pratt`: zeros are ranked with the others (they receive the lowest ranks) but add to
//!   neither `R+` nor `R-`; `count` = `n`.
//! * `zsplit`: zeros are ranked with the others and half of each zero's rank is added to `R+`
//!   and half to `R-`; `count` = `n`.
//!
//! # The normal approximation
//!
//! `mean = count (count + 1) / 4` and
//! `se = sqrt((count (count + 1) (2 count + 1) - sum(t^3 - t) / 2) / 24)`, where `t` runs over
//! the sizes of the tie groups. For `pratt` the zeros' contribution is removed from both:
//! `mean -= n0 (n0 + 1) / 4`, the variance term loses `n0 (n0 + 1) (2 n0 + 1)`, and the zero
//! group is left out of the tie term (Cureton 1967). Then `z = (R+ - mean) / se`; with the
//! continuity correction `z -= sign * 0.5 / se`, where `sign` is `+1` for `greater`, `-1` for
//! `less` and `sign(z)` for `two-sided`. The p-value is `Phi(z)` (`less`), `1 - Phi(z)`
//! (`greater`) or `2 (1 - Phi(|z|))` (`two-sided`).
//!
//! # The exact distribution
//!
//! See [`SignedRankDistribution`]: tail probabilities are counts of sign patterns divided by
//! `2^count`, computed in integers. In scipy's convention (scipy 1.17, gh-19872) `exact` is
//! also used when there are ties or zeros: the untied distribution of size `count` is used with
//! `P(R+ <= ceil(R+))` for `less`, `P(R+ >= floor(R+))` for `greater`, and twice the smaller of
//! the two (capped at 1) for `two-sided`. That is *not* an exact test when there are ties or
//! zeros; `auto` avoids it by choosing the permutation test instead.
//!
//! # The permutation test
//!
//! scipy's `auto` with ties or zeros and `n <= 13` runs `scipy.stats.permutation_test` with
//! `permutation_type="samples"`, which flips the sign of every difference in all `2^n` ways
//! (zeros included, so each pattern of the nonzero signs appears `2^n0` times) and recomputes
//! `R+` with the chosen zero method. The p-values are `#{R+* <= R+} / 2^n` (`less`),
//! `#{R+* >= R+} / 2^n` (`greater`) and twice the smaller (capped at 1) for `two-sided`. Ranks
//! are half-integers, so the comparisons here are done exactly on doubled ranks; scipy's
//! relative tolerance of `100 eps` cannot change them.
//!
//! # scipy's and R's conventions side by side
//!
//! | | scipy 1.17 `wilcoxon` | R `wilcox.test(paired = TRUE)` |
//! |---|---|---|
//! | zeros | `zero_method` = wilcox (default), pratt, zsplit | always dropped (wilcox) |
//! | continuity correction | off by default (`correction=False`) | on by default (`correct = TRUE`) |
//! | reported statistic | `min(R+, R-)` for two-sided, `R+` for one-sided | `V = R+` always |
//! | exact by default when | `n <= 50` (all pairs, zeros included) and no ties and no zeros | `count < 50` (nonzero pairs) and no ties and no zeros |
//! | ties or zeros, small n | permutation test over `2^n` sign flips if `n <= 13`, else normal | normal approximation, with a warning if exact was requested or defaulted |
//! | `exact` forced with ties/zeros | untied distribution with ceil/floor of `R+` (gh-19872) | normal approximation with a warning |
//! | two-sided exact p | `2 min(P(R+ <= ceil), P(R+ >= floor))`, capped at 1 | `2 P(R+ >= V)` if `V > count (count + 1) / 4`, else `2 P(R+ <= V)`, capped at 1 |
//! | variance | `(c(c+1)(2c+1) - sum(t^3 - t)/2) / 24` | `c(c+1)(2c+1)/24 - sum(t^3 - t)/48` (the same) |
//! | z reported | only for `method="asymptotic"`; `-abs(z)` when two-sided | not reported (`z` is internal) |
//!
//! All differences zero (identical arms): the test carries no information, and the result says
//! so with [`WilcoxonResult::degenerate`]. scipy's convention returns scipy 1.17's numbers for
//! the chosen options (checked against scipy 1.17.1 for n = 1 to 60, every zero method, method,
//! alternative and correction: `tests/all_zero.rs`), for example p = 1 for `wilcox` with
//! `auto` up to 13 pairs and NaN above; R's convention returns `V = 0` and `p = NaN`, as R 4.x.

use serde::{Deserialize, Serialize};

use crate::StatsError;
use crate::error::check_finite;
use crate::normal::{normal_cdf, normal_sf};
use crate::ranking::average_ranks;
use crate::signrank::SignedRankDistribution;

/// How zero differences are treated (scipy's `zero_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZeroMethod {
    /// Drop zero differences before ranking (Wilcoxon 1945; scipy's default; R's only choice).
    Wilcox,
    /// Rank zeros with the other differences but count them in neither `R+` nor `R-`
    /// (Pratt 1959).
    Pratt,
    /// Rank zeros with the other differences and split their ranks equally between `R+` and
    /// `R-`.
    Zsplit,
}

impl ZeroMethod {
    /// Every zero method, in scipy's order.
    pub const ALL: [ZeroMethod; 3] = [ZeroMethod::Wilcox, ZeroMethod::Pratt, ZeroMethod::Zsplit];

    /// scipy's name of the zero method.
    pub fn name(self) -> &'static str {
        match self {
            ZeroMethod::Wilcox => "wilcox",
            ZeroMethod::Pratt => "pratt",
            ZeroMethod::Zsplit => "zsplit",
        }
    }
}

/// Which null distribution gives the p-value (scipy's `method`; R's `exact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WilcoxonMethod {
    /// The exact distribution of the untied statistic (R: `exact = TRUE`).
    Exact,
    /// The normal approximation (R: `exact = FALSE`).
    Asymptotic,
    /// Let the convention choose (scipy: `method="auto"`; R: `exact = NULL`).
    Auto,
}

impl WilcoxonMethod {
    /// Every method, in scipy's order.
    pub const ALL: [WilcoxonMethod; 3] = [
        WilcoxonMethod::Exact,
        WilcoxonMethod::Asymptotic,
        WilcoxonMethod::Auto,
    ];

    /// scipy's name of the method.
    pub fn name(self) -> &'static str {
        match self {
            WilcoxonMethod::Exact => "exact",
            WilcoxonMethod::Asymptotic => "asymptotic",
            WilcoxonMethod::Auto => "auto",
        }
    }
}

/// The alternative hypothesis about the location of `x - y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Alternative {
    /// The differences are not symmetric about zero.
    #[serde(rename = "two-sided")]
    TwoSided,
    /// The differences are stochastically smaller than zero (`x` tends to be below `y`).
    #[serde(rename = "less")]
    Less,
    /// The differences are stochastically larger than zero (`x` tends to be above `y`).
    #[serde(rename = "greater")]
    Greater,
}

impl Alternative {
    /// Every alternative, in scipy's order.
    pub const ALL: [Alternative; 3] = [
        Alternative::TwoSided,
        Alternative::Less,
        Alternative::Greater,
    ];

    /// scipy's name of the alternative (R writes `two.sided`).
    pub fn name(self) -> &'static str {
        match self {
            Alternative::TwoSided => "two-sided",
            Alternative::Less => "less",
            Alternative::Greater => "greater",
        }
    }

    /// The alternative obtained by swapping `x` and `y`.
    pub fn mirrored(self) -> Self {
        match self {
            Alternative::TwoSided => Alternative::TwoSided,
            Alternative::Less => Alternative::Greater,
            Alternative::Greater => Alternative::Less,
        }
    }
}

/// Whose rules decide the method, the reported statistic and the exact two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    /// `scipy.stats.wilcoxon` as of scipy 1.17.
    Scipy,
    /// R's `wilcox.test(x, y, paired = TRUE)` (R 4.x, `digits.rank = Inf`).
    R,
}

/// Options of [`wilcoxon`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WilcoxonOptions {
    /// scipy's or R's rules.
    pub convention: Convention,
    /// The treatment of zero differences; R only supports [`ZeroMethod::Wilcox`].
    pub zero_method: ZeroMethod,
    /// The null distribution.
    pub method: WilcoxonMethod,
    /// Whether the normal approximation uses the continuity correction of 0.5.
    pub correction: bool,
    /// The alternative hypothesis.
    pub alternative: Alternative,
}

impl WilcoxonOptions {
    /// scipy's defaults: `zero_method="wilcox"`, `correction=False`,
    /// `alternative="two-sided"`, `method="auto"`.
    pub fn scipy_default() -> Self {
        Self {
            convention: Convention::Scipy,
            zero_method: ZeroMethod::Wilcox,
            method: WilcoxonMethod::Auto,
            correction: false,
            alternative: Alternative::TwoSided,
        }
    }

    /// R's defaults: zeros dropped, `correct = TRUE`, `alternative = "two.sided"`,
    /// `exact = NULL` (exact only for fewer than 50 nonzero differences without ties).
    pub fn r_default() -> Self {
        Self {
            convention: Convention::R,
            zero_method: ZeroMethod::Wilcox,
            method: WilcoxonMethod::Auto,
            correction: true,
            alternative: Alternative::TwoSided,
        }
    }

    /// Returns a copy with another alternative.
    pub fn with_alternative(self, alternative: Alternative) -> Self {
        Self {
            alternative,
            ..self
        }
    }
}

impl Default for WilcoxonOptions {
    fn default() -> Self {
        Self::scipy_default()
    }
}

/// The null distribution that actually produced the p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolvedMethod {
    /// The exact distribution of the untied statistic.
    Exact,
    /// The normal approximation.
    Asymptotic,
    /// The exhaustive sign-flip permutation distribution (scipy `auto`, `n <= 13`, ties or
    /// zeros).
    Permutation,
}

/// A condition that R reports as a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WilcoxonWarning {
    /// R: "cannot compute exact p-value with ties" (the normal approximation was used).
    #[serde(rename = "cannot compute exact p-value with ties")]
    TiesPreventExact,
    /// R: "cannot compute exact p-value with zeroes" (the normal approximation was used).
    #[serde(rename = "cannot compute exact p-value with zeroes")]
    ZerosPreventExact,
}

impl WilcoxonWarning {
    /// R's warning text.
    pub fn message(self) -> &'static str {
        match self {
            WilcoxonWarning::TiesPreventExact => "cannot compute exact p-value with ties",
            WilcoxonWarning::ZerosPreventExact => "cannot compute exact p-value with zeroes",
        }
    }
}

/// The outcome of [`wilcoxon`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WilcoxonResult {
    /// The reported statistic: scipy `min(R+, R-)` (two-sided) or `R+` (one-sided); R `V = R+`.
    pub statistic: f64,
    /// The p-value.
    pub pvalue: f64,
    /// The standardised statistic when the normal approximation was used. scipy reports
    /// `-abs(z)` for two-sided tests; R's value keeps its sign. Both include the continuity
    /// correction when it is on.
    pub zstatistic: Option<f64>,
    /// The null distribution that produced the p-value.
    pub resolved_method: ResolvedMethod,
    /// The sum of the ranks of the positive differences (plus half the zero ranks for zsplit).
    pub r_plus: f64,
    /// The sum of the ranks of the negative differences (plus half the zero ranks for zsplit).
    pub r_minus: f64,
    /// The number of pairs.
    pub n: usize,
    /// The number of zero differences.
    pub n_zero: usize,
    /// Whether the ranked absolute differences contain ties.
    pub has_ties: bool,
    /// R's warnings (always empty in scipy's convention).
    pub warnings: Vec<WilcoxonWarning>,
    /// Every paired difference is zero: the test carries no information. scipy's convention
    /// still returns scipy 1.17's numbers (a p-value of 1, NaN, or for `pratt` with the exact
    /// method a small p-value, depending on the options); R's returns `p = NaN`, as R does.
    #[serde(default)]
    pub degenerate: bool,
}

/// Runs the paired Wilcoxon signed-rank test of `x` against `y`.
///
/// See the [module documentation](self) for the formulas and the differences between the
/// conventions.
///
/// # Errors
///
/// * [`StatsError::LengthMismatch`] when `x` and `y` differ in length,
/// * [`StatsError::TooFewValues`] when they are empty,
/// * [`StatsError::NonFinite`] when a value or a difference is NaN or infinite,
/// * [`StatsError::InvalidOption`] for R's convention with a zero method other than wilcox,
/// * [`StatsError::ExactSampleTooLarge`] when an exact test needs more than 127 observations.
///
/// # Example
///
/// ```
/// use ach_stats::{wilcoxon, WilcoxonOptions};
///
/// let x = [6.0, 8.0, 14.0, 16.0, 23.0, 24.0, 28.0, 29.0, 41.0, -48.0, 49.0, 56.0, 60.0, -67.0, 75.0];
/// let y = [0.0; 15];
/// let result = wilcoxon(&x, &y, &WilcoxonOptions::scipy_default())?;
/// assert_eq!(result.statistic, 24.0);
/// assert_eq!(result.pvalue, 169.0 / 4096.0);
/// # Ok::<(), ach_stats::StatsError>(())
/// ```
pub fn wilcoxon(
    x: &[f64],
    y: &[f64],
    options: &WilcoxonOptions,
) -> Result<WilcoxonResult, StatsError> {
    let differences = paired_differences(x, y)?;
    let degenerate = differences.iter().all(|&d| d == 0.0);
    let mut result = match options.convention {
        Convention::Scipy => wilcoxon_scipy(&differences, options)?,
        Convention::R => wilcoxon_r(&differences, options)?,
    };
    result.degenerate = degenerate;
    if degenerate && options.convention == Convention::R {
        // R drops every zero, leaving no observation: V = 0 and the p-value is NA.
        result.pvalue = f64::NAN;
        result.zstatistic = None;
    }
    Ok(result)
}

/// Validates the samples and returns `x - y`.
fn paired_differences(x: &[f64], y: &[f64]) -> Result<Vec<f64>, StatsError> {
    if x.len() != y.len() {
        return Err(StatsError::LengthMismatch {
            x_len: x.len(),
            y_len: y.len(),
        });
    }
    if x.is_empty() {
        return Err(StatsError::TooFewValues {
            what: "the Wilcoxon signed-rank test",
            needed: 1,
            got: 0,
        });
    }
    check_finite("x", x)?;
    check_finite("y", y)?;
    let differences: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    check_finite("x - y", &differences)?;
    Ok(differences)
}

/// The ranked differences under one zero method.
struct SignedRanks {
    /// Per difference: twice its rank if it takes part in the ranking, else 0.
    doubled_ranks: Vec<u64>,
    /// The number of ranked differences (`count` in scipy).
    count: usize,
    /// The sum of `t^3 - t` over the tie groups that enter the variance.
    tie_term: f64,
    /// Whether the ranked values contain ties (zeros included for pratt and zsplit).
    has_ties: bool,
}

impl SignedRanks {
    fn new(differences: &[f64], zero_method: ZeroMethod) -> Self {
        let n_zero = differences.iter().filter(|&&d| d == 0.0).count();
        match zero_method {
            ZeroMethod::Wilcox => {
                let nonzero: Vec<f64> = differences
                    .iter()
                    .filter(|&&d| d != 0.0)
                    .map(|d| d.abs())
                    .collect();
                let ranks = average_ranks(&nonzero);
                let mut nonzero_ranks = ranks.doubled_ranks.iter();
                let doubled_ranks = differences
                    .iter()
                    .map(|&d| {
                        if d == 0.0 {
                            0
                        } else {
                            *nonzero_ranks
                                .next()
                                .expect("one rank per nonzero difference")
                        }
                    })
                    .collect();
                Self {
                    doubled_ranks,
                    count: nonzero.len(),
                    tie_term: ranks.tie_term(),
                    has_ties: ranks.has_ties(),
                }
            }
            ZeroMethod::Pratt | ZeroMethod::Zsplit => {
                let absolute: Vec<f64> = differences.iter().map(|d| d.abs()).collect();
                let ranks = average_ranks(&absolute);
                let mut tie_term = ranks.tie_term();
                if zero_method == ZeroMethod::Pratt && n_zero > 0 {
                    // Zeros form the lowest tie group; Pratt's variance leaves it out.
                    let zeros = n_zero as f64;
                    tie_term -= zeros * zeros * zeros - zeros;
                }
                Self {
                    has_ties: ranks.has_ties(),
                    doubled_ranks: ranks.doubled_ranks,
                    count: differences.len(),
                    tie_term,
                }
            }
        }
    }

    /// Returns four times `R+` for the signs of `differences`,
    /// including half of the zero ranks for zsplit.
    fn quadrupled_r_plus(&self, differences: &[f64], zero_method: ZeroMethod) -> u64 {
        let mut sum = 0;
        for (&d, &rank) in differences.iter().zip(&self.doubled_ranks) {
            if d > 0.0 {
                sum += 2 * rank;
            } else if d == 0.0 && zero_method == ZeroMethod::Zsplit {
                sum += rank;
            }
        }
        sum
    }
}

/// scipy 1.17's `wilcoxon` (see the module documentation).
fn wilcoxon_scipy(
    differences: &[f64],
    options: &WilcoxonOptions,
) -> Result<WilcoxonResult, StatsError> {
    let n = differences.len();
    let n_zero = differences.iter().filter(|&&d| d == 0.0).count();
    let zero_method = options.zero_method;
    let ranks = SignedRanks::new(differences, zero_method);

    // Rank sums are kept quadrupled (doubled ranks, and zsplit adds half of a doubled rank) so
    // that they stay exact integers.
    let quadrupled_r_plus = ranks.quadrupled_r_plus(differences, zero_method);
    let negated: Vec<f64> = differences.iter().map(|d| -d).collect();
    let quadrupled_r_minus = ranks.quadrupled_r_plus(&negated, zero_method);
    let r_plus = quadrupled_r_plus as f64 / 4.0;
    let r_minus = quadrupled_r_minus as f64 / 4.0;

    let count = ranks.count as f64;
    let mut mean = count * (count + 1.0) * 0.25;
    let mut variance_term = count * (count + 1.0) * (2.0 * count + 1.0);
    if zero_method == ZeroMethod::Pratt {
        let zeros = n_zero as f64;
        mean -= zeros * (zeros + 1.0) * 0.25;
        variance_term -= zeros * (zeros + 1.0) * (2.0 * zeros + 1.0);
    }
    let se = ((variance_term - ranks.tie_term / 2.0) / 24.0).sqrt();
    let z = (r_plus - mean) / se;

    let resolved_method = resolve_scipy_method(options.method, n, ranks.has_ties || n_zero > 0);
    let alternative = options.alternative;
    let mut zstatistic = None;
    let pvalue = match resolved_method {
        ResolvedMethod::Asymptotic => {
            let (pvalue, z) = asymptotic_pvalue(z, se, alternative, options.correction);
            zstatistic = Some(z);
            pvalue
        }
        ResolvedMethod::Exact => exact_pvalue(ranks.count, quadrupled_r_plus, alternative)?,
        ResolvedMethod::Permutation => {
            permutation_pvalue(differences, &ranks, zero_method, alternative)
        }
    };

    let statistic = match alternative {
        Alternative::TwoSided => r_plus.min(r_minus),
        Alternative::Less | Alternative::Greater => r_plus,
    };
    Ok(WilcoxonResult {
        statistic,
        pvalue,
        zstatistic,
        resolved_method,
        r_plus,
        r_minus,
        n,
        n_zero,
        has_ties: ranks.has_ties,
        warnings: Vec::new(),
        degenerate: false,
    })
}

/// scipy's choice for `method`: `auto` is exact without ties or zeros up to 50 differences,
/// else a permutation test up to 13, else asymptotic.
fn resolve_scipy_method(method: WilcoxonMethod, n: usize, ties_or_zeros: bool) -> ResolvedMethod {
    match method {
        WilcoxonMethod::Exact => ResolvedMethod::Exact,
        WilcoxonMethod::Asymptotic => ResolvedMethod::Asymptotic,
        WilcoxonMethod::Auto if n > 50 => ResolvedMethod::Asymptotic,
        WilcoxonMethod::Auto if !ties_or_zeros => ResolvedMethod::Exact,
        WilcoxonMethod::Auto if n <= 13 => ResolvedMethod::Permutation,
        WilcoxonMethod::Auto => ResolvedMethod::Asymptotic,
    }
}

/// The normal approximation's p-value of `z` (standard error `se`), with the continuity
/// correction when `correction`, and the z statistic scipy reports.
fn asymptotic_pvalue(z: f64, se: f64, alternative: Alternative, correction: bool) -> (f64, f64) {
    let mut z = z;
    if correction {
        let sign = match alternative {
            Alternative::Greater => 1.0,
            Alternative::Less => -1.0,
            Alternative::TwoSided => signum_or_zero(z),
        };
        z -= sign * 0.5 / se;
    }
    let pvalue = match alternative {
        Alternative::Less => normal_cdf(z),
        Alternative::Greater => normal_sf(z),
        Alternative::TwoSided => 2.0 * normal_sf(z.abs()),
    };
    let zstatistic = match alternative {
        Alternative::TwoSided => -z.abs(),
        Alternative::Less | Alternative::Greater => z,
    };
    (pvalue, zstatistic)
}

/// The exact p-value of `R+ = quadrupled_r_plus / 4` among `count` non-zero differences.
fn exact_pvalue(
    count: usize,
    quadrupled_r_plus: u64,
    alternative: Alternative,
) -> Result<f64, StatsError> {
    let distribution = SignedRankDistribution::new(count)?;
    // R+ = q / 4; floor and ceil in integers.
    let floor = (quadrupled_r_plus / 4) as i64;
    let ceil = quadrupled_r_plus.div_ceil(4) as i64;
    Ok(match alternative {
        Alternative::Less => distribution.cdf(ceil),
        Alternative::Greater => distribution.sf(floor),
        Alternative::TwoSided => {
            let smaller = distribution
                .count_at_least(floor)
                .min(distribution.count_at_most(ceil));
            distribution.probability(2 * smaller).min(1.0)
        }
    })
}

/// The largest `n` for which the exhaustive sign-flip test is run (scipy: `2^13 < 9999`
/// resamples).
const MAX_PERMUTATION_N: usize = 13;

/// The exhaustive sign-flip permutation p-value of `R+` (scipy's `permutation_test` with
/// `permutation_type="samples"` and all `2^n` patterns).
fn permutation_pvalue(
    differences: &[f64],
    ranks: &SignedRanks,
    zero_method: ZeroMethod,
    alternative: Alternative,
) -> f64 {
    let n = differences.len();
    debug_assert!(n <= MAX_PERMUTATION_N);
    // Each difference contributes its quadrupled rank to quadrupled R+ when its (flipped) sign
    // is positive; zeros contribute their doubled rank under zsplit whatever the sign.
    let mut fixed = 0_u64;
    let mut flippable = Vec::with_capacity(n);
    for (&d, &rank) in differences.iter().zip(&ranks.doubled_ranks) {
        if d == 0.0 {
            if zero_method == ZeroMethod::Zsplit {
                fixed += rank;
            }
            flippable.push(0);
        } else {
            flippable.push(2 * rank);
        }
    }
    let observed = ranks.quadrupled_r_plus(differences, zero_method);
    let mut at_most = 0_u64;
    let mut at_least = 0_u64;
    for pattern in 0_u32..(1_u32 << n) {
        let mut statistic = fixed;
        for (bit, &contribution) in flippable.iter().enumerate() {
            if pattern & (1 << bit) != 0 {
                statistic += contribution;
            }
        }
        if statistic <= observed {
            at_most += 1;
        }
        if statistic >= observed {
            at_least += 1;
        }
    }
    let total = (1_u64 << n) as f64;
    let p_less = at_most as f64 / total;
    let p_greater = at_least as f64 / total;
    match alternative {
        Alternative::Less => p_less,
        Alternative::Greater => p_greater,
        Alternative::TwoSided => (2.0 * p_less.min(p_greater)).min(1.0),
    }
}

/// R's `wilcox.test(x, y, paired = TRUE)` (see the module documentation).
fn wilcoxon_r(
    differences: &[f64],
    options: &WilcoxonOptions,
) -> Result<WilcoxonResult, StatsError> {
    if options.zero_method != ZeroMethod::Wilcox {
        return Err(StatsError::InvalidOption(format!(
            "R's wilcox.test always drops zero differences; zero_method {} needs scipy's \
             convention",
            options.zero_method.name()
        )));
    }
    let n_pairs = differences.len();
    let n_zero = differences.iter().filter(|&&d| d == 0.0).count();
    let zeroes = n_zero > 0;
    let ranks = SignedRanks::new(differences, ZeroMethod::Wilcox);
    let count = ranks.count;
    let exact_requested = match options.method {
        WilcoxonMethod::Exact => true,
        WilcoxonMethod::Asymptotic => false,
        WilcoxonMethod::Auto => count < 50,
    };
    let quadrupled_v = ranks.quadrupled_r_plus(differences, ZeroMethod::Wilcox);
    let negated: Vec<f64> = differences.iter().map(|d| -d).collect();
    let quadrupled_minus = ranks.quadrupled_r_plus(&negated, ZeroMethod::Wilcox);
    let v = quadrupled_v as f64 / 4.0;
    let mut warnings = Vec::new();
    let mut zstatistic = None;

    let (pvalue, resolved_method) = if exact_requested && !ranks.has_ties && !zeroes {
        let pvalue = r_exact_pvalue(count, quadrupled_v, options.alternative)?;
        (pvalue, ResolvedMethod::Exact)
    } else {
        let (pvalue, z) = r_normal_pvalue(v, &ranks, options);
        if exact_requested && ranks.has_ties {
            warnings.push(WilcoxonWarning::TiesPreventExact);
        }
        if exact_requested && zeroes {
            warnings.push(WilcoxonWarning::ZerosPreventExact);
        }
        zstatistic = Some(z);
        (pvalue, ResolvedMethod::Asymptotic)
    };

    Ok(WilcoxonResult {
        statistic: v,
        pvalue,
        zstatistic,
        resolved_method,
        r_plus: v,
        r_minus: quadrupled_minus as f64 / 4.0,
        n: n_pairs,
        n_zero,
        has_ties: ranks.has_ties,
        warnings,
        degenerate: false,
    })
}

/// R's exact p-value of `V` (given quadrupled, `4 V`) over `count` non-zero differences
/// without ties; the two-sided one doubles the tail on V's side of the mean `n (n + 1) / 4`.
fn r_exact_pvalue(
    count: usize,
    quadrupled_v: u64,
    alternative: Alternative,
) -> Result<f64, StatsError> {
    let v = quadrupled_v as f64 / 4.0;
    let distribution = SignedRankDistribution::new(count)?;
    // Without ties V is an integer.
    let v_integer = (quadrupled_v / 4) as i64;
    let n = count as f64;
    Ok(match alternative {
        Alternative::Less => distribution.cdf(v_integer),
        Alternative::Greater => distribution.sf(v_integer),
        Alternative::TwoSided => {
            let tail = if v > n * (n + 1.0) / 4.0 {
                distribution.count_at_least(v_integer)
            } else {
                distribution.count_at_most(v_integer)
            };
            distribution.probability(2 * tail).min(1.0)
        }
    })
}

/// R's normal approximation of `V` over the ranked non-zero differences, with R's tie term
/// and, when `options.correction` is on, its continuity correction (towards the mean for
/// two-sided), for `options.alternative`; returns the p-value and `z`.
fn r_normal_pvalue(v: f64, ranks: &SignedRanks, options: &WilcoxonOptions) -> (f64, f64) {
    let alternative = options.alternative;
    let n = ranks.count as f64;
    let centred = v - n * (n + 1.0) / 4.0;
    let sigma = (n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - ranks.tie_term / 48.0).sqrt();
    let correction = if options.correction {
        match alternative {
            Alternative::TwoSided => signum_or_zero(centred) * 0.5,
            Alternative::Greater => 0.5,
            Alternative::Less => -0.5,
        }
    } else {
        0.0
    };
    let z = (centred - correction) / sigma;
    let pvalue = match alternative {
        Alternative::Less => normal_cdf(z),
        Alternative::Greater => normal_sf(z),
        Alternative::TwoSided => 2.0 * normal_cdf(z).min(normal_sf(z)),
    };
    (pvalue, z)
}

/// The sign of `value` as numpy's `sign` and R's `sign` give it: -1, 0 or +1.
fn signum_or_zero(value: f64) -> f64 {
    if value > 0.0 {
        1.0
    } else if value < 0.0 {
        -1.0
    } else {
        0.0
    }
}
