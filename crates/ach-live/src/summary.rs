//! The arms over their repeats, as `summary.json` lists them, and ACH paired against every
//! other arm: Wilcoxon signed-rank and Cliff's delta from `ach-stats` over the repeats, with
//! Holm's adjustment across the arms of each metric.

use ach_sim::algorithms::names;
use ach_stats::{Summary, WilcoxonOptions, cliffs_delta, holm, wilcoxon};

use crate::experiment::{ArmRun, LiveResults};
use crate::simulator::SimArm;

/// One arm over its repeats.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmSummary {
    /// Algorithm name.
    pub algorithm: String,
    /// `redis` or `valkey`.
    pub backend: String,
    /// Repeats run.
    pub repeats: usize,
    /// Mean `d_bar_true` over the repeats (the ground truth).
    pub d_bar_true: f64,
    /// Half-width of its 95 % CI (Student t; `None` with one repeat).
    pub d_bar_true_ci95: Option<f64>,
    /// `d_bar_true` of every repeat.
    pub d_bar_true_per_repeat: Vec<f64>,
    /// Mean demand-over-capacity CV after the warm-up, over the repeats.
    pub cv_bar_true: f64,
    /// Mean D-bar of the INFO composite (what the controllers steer by), over the repeats.
    pub d_bar_telemetry: f64,
    /// Mean keys moved over the repeats.
    pub keys_moved: f64,
    /// Client errors, summed over the repeats.
    pub client_errors: u64,
    /// Keys missing at the end, summed over the repeats.
    pub lost_keys: u64,
    /// Keys holding another value than the last written at the end, summed over the repeats.
    pub stale_keys: u64,
    /// Reads that saw another value than the last written, summed over the repeats.
    pub stale_reads: u64,
    /// Mean requests scheduled per repeat.
    pub requests_offered: f64,
    /// Mean requests answered per repeat.
    pub requests_answered: f64,
    /// Mean answered requests per second.
    pub throughput: f64,
    /// Answered requests per second of every repeat.
    pub throughput_per_repeat: Vec<f64>,
    /// Mean client p50 over the repeats, in milliseconds.
    pub p50_ms: f64,
    /// Mean client p99 over the repeats, in milliseconds.
    pub p99_ms: f64,
    /// Client p99 of every repeat.
    pub p99_ms_per_repeat: Vec<f64>,
    /// Mean client p99.9 over the repeats, in milliseconds.
    pub p999_ms: f64,
    /// Mean migration time over the repeats that moved keys, in seconds.
    pub migration_s: Option<f64>,
    /// Mean client p99 while rebalancing (the steps from the first to the last in which keys
    /// moved) over the repeats that moved keys, in milliseconds.
    pub p99_rebalancing_ms: Option<f64>,
    /// A0's client p99 over the same steps of the same repeats, in milliseconds.
    pub static_p99_rebalancing_ms: Option<f64>,
    /// Mean time until `D_true` stays within 10 % of its final level, in seconds.
    pub settle_s: Option<f64>,
    /// The calibrated simulator's mean `D_true` after the warm-up (same unit as
    /// `d_bar_true`).
    pub sim_d_bar_true: Option<f64>,
    /// `(sim - live) / live` of `d_bar_true`.
    pub sim_relative_error: Option<f64>,
    /// The simulator's mean keys moved.
    pub sim_keys_moved: Option<f64>,
}

fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.into_iter().collect();
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn mean_of_some(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let values: Vec<f64> = values.into_iter().flatten().collect();
    (!values.is_empty()).then(|| mean(values))
}

/// The arms over their repeats, in the configured order.
pub fn summarise(results: &LiveResults, sim: &[SimArm]) -> Vec<ArmSummary> {
    results
        .config
        .arms
        .iter()
        .map(|arm| {
            let runs: Vec<&ArmRun> = results
                .runs
                .iter()
                .filter(|r| r.algorithm == arm.name())
                .collect();
            let sims: Vec<&SimArm> = sim.iter().filter(|s| s.algorithm == arm.name()).collect();
            let per_repeat: Vec<f64> = runs.iter().map(|r| r.d_bar_true).collect();
            let d_bar_true = mean(per_repeat.iter().copied());
            let sim_d_bar_true = (!sims.is_empty()).then(|| mean(sims.iter().map(|s| s.d_bar)));
            ArmSummary {
                algorithm: arm.name().into(),
                backend: results.backend.into(),
                repeats: runs.len(),
                d_bar_true,
                d_bar_true_ci95: Summary::of(&per_repeat).ok().map(|s| s.ci95_half_width),
                d_bar_true_per_repeat: per_repeat,
                cv_bar_true: mean(runs.iter().map(|r| r.cv_bar_true)),
                d_bar_telemetry: mean(runs.iter().map(|r| r.d_bar_telemetry)),
                keys_moved: mean(runs.iter().map(|r| r.keys_moved as f64)),
                client_errors: runs.iter().map(|r| r.outcome.client_errors).sum(),
                lost_keys: runs.iter().map(|r| r.lost_keys).sum(),
                stale_keys: runs.iter().map(|r| r.stale_keys).sum(),
                stale_reads: runs.iter().map(|r| r.stale_reads).sum(),
                requests_offered: mean(runs.iter().map(|r| r.outcome.requests_offered as f64)),
                requests_answered: mean(runs.iter().map(|r| r.outcome.requests_answered as f64)),
                throughput: mean(runs.iter().map(|r| r.outcome.throughput)),
                throughput_per_repeat: runs.iter().map(|r| r.outcome.throughput).collect(),
                p50_ms: mean(runs.iter().map(|r| r.outcome.p50_ms)),
                p99_ms: mean(runs.iter().map(|r| r.outcome.p99_ms)),
                p99_ms_per_repeat: runs.iter().map(|r| r.outcome.p99_ms).collect(),
                p999_ms: mean(runs.iter().map(|r| r.outcome.p999_ms)),
                migration_s: mean_of_some(runs.iter().map(|r| r.migration_s)),
                p99_rebalancing_ms: mean_of_some(
                    runs.iter()
                        .map(|r| r.rebalancing.as_ref().map(|w| w.outcome.p99_ms)),
                ),
                static_p99_rebalancing_ms: mean_of_some(
                    runs.iter()
                        .map(|r| r.rebalancing.as_ref().and_then(|w| w.static_p99_ms)),
                ),
                settle_s: mean_of_some(runs.iter().map(|r| r.settle_s)),
                sim_relative_error: sim_d_bar_true.map(|s| (s - d_bar_true) / d_bar_true),
                sim_d_bar_true,
                sim_keys_moved: (!sims.is_empty()).then(|| mean(sims.iter().map(|s| s.keys_moved))),
            }
        })
        .collect()
}

/// The values of one metric over an arm's repeats.
pub type PerRepeat = fn(&ArmSummary) -> &[f64];

/// The metrics ACH is compared on, with the values of an arm's repeats.
pub const METRICS: [(&str, PerRepeat); 3] = [
    ("d_bar_true", |a| &a.d_bar_true_per_repeat),
    ("p99_ms", |a| &a.p99_ms_per_repeat),
    ("throughput", |a| &a.throughput_per_repeat),
];

/// ACH against one other arm on one metric, paired by repeat.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Comparison {
    /// ACH.
    pub algorithm: String,
    /// The other arm.
    pub baseline: String,
    /// `d_bar_true`, `p99_ms` or `throughput`.
    pub metric: String,
    /// Repeats paired.
    pub n: usize,
    /// Mean of ACH's value minus the baseline's.
    pub mean_difference: f64,
    /// Wilcoxon signed-rank p (two-sided, scipy's default options); `None` when it cannot be
    /// computed (fewer than 2 pairs, every difference zero).
    pub wilcoxon_p: Option<f64>,
    /// Holm's adjustment of `wilcoxon_p` across the baselines of this metric.
    pub holm_p: Option<f64>,
    /// Cliff's delta of ACH's values against the baseline's (negative: ACH lower).
    pub cliffs_delta: Option<f64>,
}

/// ACH against every other arm on every metric of [`METRICS`]; empty without ACH or with
/// fewer than 2 repeats.
pub fn compare(arms: &[ArmSummary]) -> Vec<Comparison> {
    let Some(ach) = arms.iter().find(|a| a.algorithm == names::ACH) else {
        return Vec::new();
    };
    if ach.repeats < 2 {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for (metric, values) in METRICS {
        let mut family: Vec<Comparison> = arms
            .iter()
            .filter(|a| a.algorithm != names::ACH)
            .map(|other| {
                let (x, y) = (values(ach), values(other));
                let n = x.len().min(y.len());
                let (x, y) = (&x[..n], &y[..n]);
                Comparison {
                    algorithm: ach.algorithm.clone(),
                    baseline: other.algorithm.clone(),
                    metric: metric.into(),
                    n,
                    mean_difference: mean(x.iter().zip(y).map(|(a, b)| a - b)),
                    wilcoxon_p: wilcoxon(x, y, &WilcoxonOptions::scipy_default())
                        .ok()
                        .map(|w| w.pvalue)
                        .filter(|p| p.is_finite()),
                    holm_p: None,
                    cliffs_delta: cliffs_delta(x, y).ok().map(|c| c.delta),
                }
            })
            .collect();
        let tested: Vec<usize> = (0..family.len())
            .filter(|&i| family[i].wilcoxon_p.is_some())
            .collect();
        let p: Vec<f64> = tested
            .iter()
            .filter_map(|&i| family[i].wilcoxon_p)
            .collect();
        if let Ok(adjusted) = holm(&p) {
            for (&i, q) in tested.iter().zip(adjusted) {
                family[i].holm_p = Some(q);
            }
        }
        rows.extend(family);
    }
    rows
}

/// `(name, value)` pairs lowest value first, equal values by name: the one order of the arms
/// that summary.json's lists and the texts share.
fn lowest_first<'a>(arms: impl IntoIterator<Item = (&'a str, f64)>) -> Vec<(&'a str, f64)> {
    let mut ordered: Vec<(&str, f64)> = arms.into_iter().collect();
    ordered.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
    ordered
}

/// The arms ordered by `value`, lowest first (ties by name).
pub fn order_by(arms: &[ArmSummary], value: impl Fn(&ArmSummary) -> Option<f64>) -> Vec<String> {
    lowest_first(
        arms.iter()
            .filter_map(|a| value(a).map(|v| (a.algorithm.as_str(), v))),
    )
    .into_iter()
    .map(|(name, _)| name.to_string())
    .collect()
}

/// The arms lowest first (ties by name), arms with equal values joined by `=`, the others by
/// `<`: `ACH < redis-cli < Bounded-Loads = Static-W`.
pub fn order_text<'a>(arms: impl IntoIterator<Item = (&'a str, f64)>) -> String {
    let ordered = lowest_first(arms);
    let mut text = String::new();
    for (index, (name, value)) in ordered.iter().enumerate() {
        if index > 0 {
            let tied = ordered[index - 1].1.total_cmp(value).is_eq();
            text.push_str(if tied { " = " } else { " < " });
        }
        text.push_str(name);
    }
    text
}

/// Whether two measures of the same arms order them alike: every pair of arms in the same
/// strict order under both, or equal under both. A tie under one measure that the other
/// separates is a disagreement (a tie says nothing of which arm is lower), so the verdict
/// never rests on how ties are listed.
pub fn same_order(pairs: &[(f64, f64)]) -> bool {
    pairs.iter().enumerate().all(|(i, a)| {
        pairs[i + 1..]
            .iter()
            .all(|b| a.0.total_cmp(&b.0) == a.1.total_cmp(&b.1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tie_under_one_measure_is_not_the_same_order() {
        assert!(same_order(&[(0.3, 3.0), (0.1, 1.0), (0.2, 2.0)]));
        assert!(!same_order(&[(0.3, 3.0), (0.1, 2.0), (0.2, 1.0)]));
        // Live separates the last two, the simulator ties them: not the same order.
        assert!(!same_order(&[
            (0.1, 0.1),
            (0.1041, 0.1046),
            (0.1045, 0.1046)
        ]));
        assert!(same_order(&[(0.1, 0.1), (0.2, 0.3), (0.2, 0.3)]));
        assert_eq!(
            order_text([
                ("Static-W", 0.1046),
                ("ACH", 0.03),
                ("Bounded-Loads", 0.1046)
            ]),
            "ACH < Bounded-Loads = Static-W"
        );
    }

    fn arm(name: &str, d: &[f64]) -> ArmSummary {
        ArmSummary {
            algorithm: name.into(),
            backend: "redis".into(),
            repeats: d.len(),
            d_bar_true: mean(d.iter().copied()),
            d_bar_true_ci95: None,
            d_bar_true_per_repeat: d.to_vec(),
            cv_bar_true: 0.0,
            d_bar_telemetry: 0.0,
            keys_moved: 0.0,
            client_errors: 0,
            lost_keys: 0,
            stale_keys: 0,
            stale_reads: 0,
            requests_offered: 10.0,
            requests_answered: 10.0,
            throughput: 1.0,
            throughput_per_repeat: vec![1.0; d.len()],
            p50_ms: 0.5,
            p99_ms: 1.0,
            p99_ms_per_repeat: d.iter().map(|x| 10.0 * x).collect(),
            p999_ms: 2.0,
            migration_s: None,
            p99_rebalancing_ms: None,
            static_p99_rebalancing_ms: None,
            settle_s: None,
            sim_d_bar_true: None,
            sim_relative_error: None,
            sim_keys_moved: None,
        }
    }

    #[test]
    fn ach_is_paired_with_every_other_arm_and_holm_adjusts_across_arms() {
        let ach = arm("ACH", &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
        let a0 = arm("Static-W", &[0.2, 0.4, 0.5, 0.7, 0.8, 1.0]);
        let cli = arm("redis-cli", &[0.3, 0.5, 0.6, 0.8, 0.9, 1.1]);
        let rows = compare(&[a0, cli, ach]);
        let d: Vec<&Comparison> = rows.iter().filter(|r| r.metric == "d_bar_true").collect();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].baseline, "Static-W");
        assert!((d[0].mean_difference + 0.25).abs() < 1e-12);
        // Every difference negative, n = 6: the exact two-sided p is 2 / 64; Holm over two
        // equal p-values doubles both.
        assert_eq!(d[0].wilcoxon_p, Some(2.0 / 64.0));
        assert_eq!(d[0].holm_p, Some(4.0 / 64.0));
        assert_eq!(d[1].holm_p, Some(4.0 / 64.0));
        assert!(d[0].cliffs_delta.is_some_and(|d| d < 0.0));
        // Every tested row has its adjusted p, never below its own.
        for row in &rows {
            assert_eq!(row.wilcoxon_p.is_some(), row.holm_p.is_some(), "{row:?}");
            if let (Some(p), Some(q)) = (row.wilcoxon_p, row.holm_p) {
                assert!(q >= p, "{row:?}");
            }
        }
        assert_eq!(rows.len(), 6);
        assert!(compare(&[arm("ACH", &[0.1]), arm("Static-W", &[0.2])]).is_empty());
    }

    #[test]
    fn arms_are_ordered_lowest_first() {
        let arms = [arm("a", &[0.3]), arm("b", &[0.1]), arm("c", &[0.2])];
        assert_eq!(order_by(&arms, |a| Some(a.d_bar_true)), ["b", "c", "a"]);
    }
}
