//! `ach-stats`: the statistics that papers built on the ACH toolkit report, computed exactly as
//! scipy and R compute them.
//!
//! The crate stands on its own (it depends on no other `ach-*` crate) and offers:
//!
//! * [`wilcoxon()`]: the paired Wilcoxon signed-rank test with scipy 1.17's zero methods
//!   (`wilcox`, `pratt`, `zsplit`), methods (`exact`, `asymptotic`, `auto` with scipy's
//!   exhaustive sign-flip permutation test) and alternatives, plus R's `wilcox.test`
//!   convention ([`WilcoxonOptions::r_default`]). Exact p-values come from a null distribution
//!   counted in integers ([`SignedRankDistribution`]), so tails are exact rationals rounded once.
//! * [`cliffs_delta`] and [`cliffs_delta_ci`]: Cliff's delta in `O(n log n)` with the
//!   Romano et al. (2006) [`Magnitude`] labels and the asymmetric interval of R's `effsize`.
//! * [`Summary`]: mean, standard deviation and the Student t 95 % interval of the mean.
//! * [`holm`] and [`bonferroni`]: multiple-comparison adjustments (R `p.adjust`).
//! * [`bootstrap_ci`]: the percentile bootstrap interval with an explicit seed.
//!
//! Each value is checked against scipy 1.17.1 (and R-compatible ports) in
//! `tests/golden.rs`, which reads `tests/data/wilcoxon_cliff.json`.
//!
//! # What the crate must not do
//!
//! It performs no I/O, reads no clock and uses no unseeded randomness: every result is a pure
//! function of the arguments (the bootstrap takes its seed as an argument). It never panics on
//! bad input: mismatched lengths, too few values, NaN or infinite values and all-zero
//! differences are reported as [`StatsError`].
//!
//! # Example
//!
//! ```
//! use ach_stats::{cliffs_delta, holm, wilcoxon, Magnitude, Summary, WilcoxonOptions};
//!
//! // Per-run values of two configurations (paired by run).
//! let ach = [0.91, 0.88, 0.93, 0.90, 0.95, 0.89, 0.92, 0.94];
//! let baseline = [0.85, 0.87, 0.86, 0.88, 0.90, 0.84, 0.89, 0.86];
//!
//! let test = wilcoxon(&ach, &baseline, &WilcoxonOptions::scipy_default())?;
//! assert_eq!(test.statistic, 0.0); // min(R+, R-): every difference is positive
//! assert_eq!(test.pvalue, 2.0 / 256.0); // exact: 2 * P(R+ >= 36) with n = 8
//!
//! let r_style = wilcoxon(&ach, &baseline, &WilcoxonOptions::r_default())?;
//! assert_eq!(r_style.statistic, 36.0); // R reports V = R+
//!
//! let effect = cliffs_delta(&ach, &baseline)?;
//! assert_eq!(effect.magnitude, Magnitude::Large);
//!
//! let summary = Summary::of(&ach)?;
//! assert!(summary.ci95_lower < summary.mean && summary.mean < summary.ci95_upper);
//!
//! let adjusted = holm(&[test.pvalue, 0.03, 0.2])?;
//! assert_eq!(adjusted[0], 3.0 * test.pvalue);
//! # Ok::<(), ach_stats::StatsError>(())
//! ```

mod adjust;
mod bootstrap;
mod cliff;
mod error;
mod normal;
mod ranking;
pub mod signrank;
pub mod wilcoxon;

pub use adjust::{bonferroni, holm};
pub use bootstrap::{BootstrapCi, BootstrapOptions, bootstrap_ci};
pub use cliff::{
    CliffCiAlgorithm, CliffCiOptions, CliffQuantile, CliffVariance, CliffsDelta, CliffsDeltaCi,
    Magnitude, cliffs_delta, cliffs_delta_ci,
};
pub use error::StatsError;
pub use signrank::SignedRankDistribution;
pub use summary::Summary;
pub use wilcoxon::{
    Alternative, Convention, ResolvedMethod, WilcoxonMethod, WilcoxonOptions, WilcoxonResult,
    WilcoxonWarning, ZeroMethod, wilcoxon,
};

mod summary;
