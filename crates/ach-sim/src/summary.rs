//! Statistics over the runs of a series: mean and CI95 of every aggregate, and ACH against
//! every baseline (paired Wilcoxon on D-bar, Holm-adjusted; Cliff's delta with its CI).

use ach_baselines::catalogue::names::ACH;
use ach_stats::{
    CliffCiOptions, Summary as Describe, WilcoxonOptions, cliffs_delta_ci, holm, wilcoxon,
};
use serde::{Deserialize, Serialize};

use crate::config::{A0, Profile, SeriesConfig, SweepPoint};
use crate::record::{Aggregates, RunRecord};

/// A mean with the half-width of its Student-t 95 % confidence interval (`None` with fewer
/// than two runs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Mean over runs.
    pub mean: f64,
    /// Half-width of the 95 % CI.
    pub ci95: Option<f64>,
    /// Sample standard deviation (`None` with fewer than two runs).
    pub sd: Option<f64>,
}

impl Interval {
    /// Mean and CI of `values`.
    pub fn of(values: &[f64]) -> Interval {
        match Describe::of(values) {
            Ok(s) => Interval {
                mean: s.mean,
                ci95: Some(s.ci95_half_width),
                sd: Some(s.sd),
            },
            Err(_) => Interval {
                mean: if values.is_empty() {
                    f64::NAN
                } else {
                    values.iter().sum::<f64>() / values.len() as f64
                },
                ci95: None,
                sd: None,
            },
        }
    }
}

/// One algorithm over the runs of a series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlgorithmSummary {
    /// Algorithm name.
    pub name: String,
    /// Number of runs.
    pub runs: usize,
    /// D-bar (observed).
    pub d_mean: Interval,
    /// D-bar from noise-free telemetry.
    pub d_true_mean: Interval,
    /// Largest D.
    pub d_max: Interval,
    /// Cumulative cost.
    pub m_cum: Interval,
    /// Fraction of steps with a move.
    pub pi_chg: Interval,
    /// Violations, summed over runs.
    pub n_viol: u64,
    /// Mean coefficient of variation of the true loads (a size-independent imbalance beside
    /// D-bar), for a series with `report_cv = true` whose every run carries it; left out of
    /// `summary.json` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_true_mean: Option<Interval>,
    /// Fraction of requests forwarded past their token's owner (CH-BL's cost beside M_cum),
    /// for an algorithm that routes its own way in every run; left out of `summary.json`
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_fraction: Option<Interval>,
}

/// An algorithm against one baseline on the per-run D-bar values: ACH (the `comparisons`
/// lists), or any algorithm against Static-W (the `against_a0` lists).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The algorithm tested against the baseline; absent for ACH (the `comparisons` lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// The baseline.
    pub baseline: String,
    /// Number of paired runs.
    pub n: usize,
    /// Wilcoxon signed-rank statistic (scipy: `min(R+, R-)`), two-sided, algorithm minus
    /// baseline.
    pub wilcoxon_statistic: Option<f64>,
    /// Its p-value (scipy 1.17 defaults: `auto` method, `wilcox` zeros, no correction).
    pub p_value: Option<f64>,
    /// The p-value Holm-adjusted across the comparisons of the series.
    pub p_holm: Option<f64>,
    /// Cliff's delta of the baseline's D-bar against the algorithm's: positive when the
    /// algorithm's is lower.
    pub cliffs_delta: Option<f64>,
    /// Lower end of its 95 % CI (effsize formulas, unbiased variance, t quantile).
    pub cliff_ci_low: Option<f64>,
    /// Upper end of its 95 % CI.
    pub cliff_ci_high: Option<f64>,
    /// Romano et al. (2006) label of `|delta|`.
    pub magnitude: Option<String>,
    /// `(D-bar algorithm - D-bar baseline) / D-bar baseline`, in percent.
    pub reduction_percent: f64,
}

impl Comparison {
    /// The algorithm tested against the baseline: the one named, or ACH.
    pub fn algorithm_name(&self) -> &str {
        self.algorithm.as_deref().unwrap_or(ACH)
    }
}

/// One series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Series name.
    pub name: String,
    /// What it is about.
    pub description: String,
    /// Seeds of the runs, in run order.
    pub seeds: Vec<u64>,
    /// Every algorithm, in the configuration's order.
    pub algorithms: Vec<AlgorithmSummary>,
    /// ACH against each baseline (empty without ACH or baselines).
    pub comparisons: Vec<Comparison>,
    /// Every other algorithm against Static-W (A0), for a series with `against_a0 = true`;
    /// left out of `summary.json` otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub against_a0: Vec<Comparison>,
    /// Every algorithm's share of the gap between Static-W (A0) and the Oracle closed, for a
    /// series that runs both; left out of `summary.json` otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracle_gap: Vec<OracleGap>,
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SensitivityPoint {
    /// The series.
    pub series: String,
    /// The swept fields and their values.
    pub point: SweepPoint,
    /// ACH over the point's runs (`None` when the series does not run ACH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ach: Option<AlgorithmSummary>,
    /// Every algorithm over the point's runs, in the configuration's order, with ACH against
    /// each baseline; `None` when the series runs ACH alone (then `ach` says it all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<PointAlgorithms>,
}

/// Every algorithm at one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointAlgorithms {
    /// Every algorithm, in the configuration's order.
    pub algorithms: Vec<AlgorithmSummary>,
    /// ACH against each baseline (empty without ACH or baselines).
    pub comparisons: Vec<Comparison>,
    /// Every other algorithm against Static-W (A0), for a series with `against_a0 = true`;
    /// left out of `summary.json` otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub against_a0: Vec<Comparison>,
    /// Every algorithm's share of the gap between Static-W (A0) and the Oracle closed, for a
    /// series that runs both; left out of `summary.json` otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracle_gap: Vec<OracleGap>,
}

/// The name of the oracle: the limit the others are measured against, not a contender (it is
/// left out of every comparison).
pub const ORACLE: &str = "Oracle";

/// How much of the distance from Static-W (A0) to the Oracle an algorithm covers, on the true
/// D-bar (the D-bar of noise-free telemetry, which is the D-bar in a series without noise):
/// `(D(A0) - D(algorithm)) / (D(A0) - D(Oracle))` over the means of the runs. 1 is the
/// Oracle's balance, 0 no better than A0, negative worse than A0; above 1 the algorithm beat
/// the Oracle (which is a heuristic, not a bound).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OracleGap {
    /// The algorithm.
    pub algorithm: String,
    /// The share of the gap closed; `None` when A0 and the Oracle do not differ.
    pub share_closed: Option<f64>,
}

/// The share of the A0-to-Oracle gap each algorithm of `algorithms` closes, when both run.
pub fn oracle_gaps(algorithms: &[AlgorithmSummary]) -> Vec<OracleGap> {
    let d = |name: &str| {
        algorithms
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.d_true_mean.mean)
    };
    let (Some(a0), Some(oracle)) = (d(A0), d(ORACLE)) else {
        return Vec::new();
    };
    let gap = a0 - oracle;
    algorithms
        .iter()
        .map(|a| OracleGap {
            algorithm: a.name.clone(),
            share_closed: (gap.abs() > 1e-15).then(|| (a0 - a.d_true_mean.mean) / gap),
        })
        .collect()
}

/// Everything `summary.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixSummary {
    /// Format version of this document.
    pub format_version: u32,
    /// Modelling profile.
    pub profile: Profile,
    /// Series without a sweep.
    pub series: Vec<SeriesSummary>,
    /// Points of sweeps.
    pub sensitivity: Vec<SensitivityPoint>,
    /// Violations over every run and algorithm.
    pub total_violations: u64,
}

impl MatrixSummary {
    /// The names of the series with a sweep, in order, each once.
    pub fn sweep_series(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.sensitivity.iter().map(|p| p.series.as_str()).collect();
        names.dedup();
        names
    }
}

/// A one-field sweep point with ACH's statistics: C5's form, which the sensitivity tables and
/// figures show.
#[derive(Clone, Copy, Debug)]
pub struct AchPoint<'a> {
    /// The series.
    pub series: &'a str,
    /// The point.
    pub point: &'a SweepPoint,
    /// The swept field, as written in the sweep.
    pub parameter: &'a str,
    /// Its value.
    pub value: f64,
    /// ACH over the point's runs.
    pub ach: &'a AlgorithmSummary,
}

impl MatrixSummary {
    /// The one-field sweep points where ACH runs, in order (grid points are left out).
    pub fn ach_points(&self) -> Vec<AchPoint<'_>> {
        self.sensitivity
            .iter()
            .filter_map(|p| {
                let coordinate = p.point.only()?;
                Some(AchPoint {
                    series: &p.series,
                    point: &p.point,
                    parameter: &coordinate.parameter,
                    value: coordinate.value,
                    ach: p.ach.as_ref()?,
                })
            })
            .collect()
    }
}

impl SensitivityPoint {
    /// Every algorithm at the point, in the configuration's order.
    pub fn algorithms(&self) -> Vec<&AlgorithmSummary> {
        match (&self.all, &self.ach) {
            (Some(all), _) => all.algorithms.iter().collect(),
            (None, Some(ach)) => vec![ach],
            (None, None) => Vec::new(),
        }
    }
}

impl MatrixSummary {
    /// The sweeps beyond C5's form (a grid, or other algorithms than ACH), each as its series
    /// name and its points, in order. C5-form sweeps have their own tables and figure.
    pub fn general_sweeps(&self) -> Vec<(&str, Vec<&SensitivityPoint>)> {
        self.sweep_series()
            .into_iter()
            .map(|name| {
                let points: Vec<&SensitivityPoint> = self
                    .sensitivity
                    .iter()
                    .filter(|p| p.series == name)
                    .collect();
                (name, points)
            })
            .filter(|(_, points)| {
                points
                    .iter()
                    .any(|p| p.all.is_some() || p.point.only().is_none())
            })
            .collect()
    }
}

/// Summarises one algorithm over runs.
pub fn summarize_algorithm(name: &str, aggregates: &[Aggregates]) -> AlgorithmSummary {
    let pick =
        |f: fn(&Aggregates) -> f64| Interval::of(&aggregates.iter().map(f).collect::<Vec<_>>());
    AlgorithmSummary {
        name: name.to_string(),
        runs: aggregates.len(),
        d_mean: pick(|a| a.d_mean),
        d_true_mean: pick(|a| a.d_true_mean),
        d_max: pick(|a| a.d_max),
        m_cum: pick(|a| a.m_cum),
        pi_chg: pick(|a| a.pi_chg),
        n_viol: aggregates.iter().map(|a| a.n_viol).sum(),
        cv_true_mean: optional_interval(aggregates, |a| a.cv_true_mean),
        forwarded_fraction: optional_interval(aggregates, |a| a.forwarded_fraction),
    }
}

/// Mean and CI of an optional aggregate, when every run has it (and there is a run).
fn optional_interval(
    aggregates: &[Aggregates],
    pick: fn(&Aggregates) -> Option<f64>,
) -> Option<Interval> {
    aggregates
        .iter()
        .map(pick)
        .collect::<Option<Vec<f64>>>()
        .filter(|values| !values.is_empty())
        .map(|values| Interval::of(&values))
}

fn aggregates_of(records: &[&RunRecord], name: &str) -> Vec<Aggregates> {
    records
        .iter()
        .filter_map(|r| r.algorithm(name).map(|a| a.aggregates))
        .collect()
}

/// An algorithm's per-run D-bar values against a baseline's (`name`), paired by run. The
/// comparison names no algorithm: ACH's list leaves it so, and the caller names any other.
pub fn compare(algorithm: &[f64], baseline: &[f64], name: &str) -> Comparison {
    let test = wilcoxon(algorithm, baseline, &WilcoxonOptions::scipy_default()).ok();
    let cliff = cliffs_delta_ci(baseline, algorithm, &CliffCiOptions::default()).ok();
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    Comparison {
        algorithm: None,
        baseline: name.to_string(),
        n: algorithm.len(),
        wilcoxon_statistic: test.as_ref().map(|t| t.statistic),
        p_value: test.as_ref().map(|t| t.pvalue),
        p_holm: None,
        cliffs_delta: cliff.map(|c| c.estimate.delta),
        cliff_ci_low: cliff.map(|c| c.lower),
        cliff_ci_high: cliff.map(|c| c.upper),
        magnitude: cliff.map(|c| c.estimate.magnitude.name().to_string()),
        reduction_percent: 100.0 * (mean(algorithm) - mean(baseline)) / mean(baseline),
    }
}

/// Summarises the records of one series (all runs, no sweep).
pub fn summarize_series(config: &SeriesConfig, records: &[&RunRecord]) -> SeriesSummary {
    let (algorithms, comparisons, against_a0) = summarize_algorithms(config, records);
    SeriesSummary {
        name: config.name.clone(),
        description: config.description.clone(),
        seeds: records.iter().map(|r| r.seed).collect(),
        oracle_gap: oracle_gaps(&algorithms),
        algorithms,
        comparisons,
        against_a0,
    }
}

/// Every algorithm of `config` over `records`, ACH against every baseline, and (with
/// `against_a0`) every other algorithm against Static-W.
fn summarize_algorithms(
    config: &SeriesConfig,
    records: &[&RunRecord],
) -> (Vec<AlgorithmSummary>, Vec<Comparison>, Vec<Comparison>) {
    let algorithms: Vec<AlgorithmSummary> = config
        .algorithms
        .iter()
        .map(|name| summarize_algorithm(name, &aggregates_of(records, name)))
        .collect();
    let d_bars = |name: &str| -> Vec<f64> {
        aggregates_of(records, name)
            .iter()
            .map(|a| a.d_mean)
            .collect()
    };
    let mut comparisons = Vec::new();
    if config.algorithms.iter().any(|a| a == ACH) {
        let ach = d_bars(ACH);
        for name in config
            .algorithms
            .iter()
            .filter(|a| *a != ACH && *a != ORACLE)
        {
            comparisons.push(compare(&ach, &d_bars(name), name));
        }
        holm_adjust(&mut comparisons);
    }
    let mut against_a0 = Vec::new();
    if config.against_a0 && config.algorithms.iter().any(|a| a == A0) {
        let a0 = d_bars(A0);
        for name in config
            .algorithms
            .iter()
            .filter(|a| *a != A0 && *a != ORACLE)
        {
            against_a0.push(Comparison {
                algorithm: Some(name.clone()),
                ..compare(&d_bars(name), &a0, A0)
            });
        }
        holm_adjust(&mut against_a0);
    }
    (algorithms, comparisons, against_a0)
}

/// Sets the Holm-adjusted p-value of every comparison that has a p-value, the family being
/// `comparisons`.
fn holm_adjust(comparisons: &mut [Comparison]) {
    let tested: Vec<usize> = (0..comparisons.len())
        .filter(|&k| comparisons[k].p_value.is_some())
        .collect();
    let raw: Vec<f64> = tested
        .iter()
        .filter_map(|&k| comparisons[k].p_value)
        .collect();
    if let Ok(adjusted) = holm(&raw) {
        for (&k, p) in tested.iter().zip(adjusted) {
            comparisons[k].p_holm = Some(p);
        }
    }
}

/// Summarises a whole matrix: `series` are the configurations run, `records` every record in
/// job order.
pub fn summarize(
    series: &[SeriesConfig],
    records: &[RunRecord],
    profile: Profile,
) -> MatrixSummary {
    let mut out = MatrixSummary {
        format_version: 1,
        profile,
        series: Vec::new(),
        sensitivity: Vec::new(),
        total_violations: records
            .iter()
            .flat_map(|r| &r.algorithms)
            .map(|a| a.aggregates.n_viol)
            .sum(),
    };
    for config in series {
        let of_series: Vec<&RunRecord> =
            records.iter().filter(|r| r.series == config.name).collect();
        let points = config.sweep_points();
        if points.is_empty() {
            out.series.push(summarize_series(config, &of_series));
            continue;
        }
        for point in points {
            let at: Vec<&RunRecord> = of_series
                .iter()
                .copied()
                .filter(|r| r.point.as_ref() == Some(&point))
                .collect();
            let runs_ach = config.algorithms.iter().any(|a| a == ACH);
            let runs_only_ach = runs_ach && config.algorithms.len() == 1;
            let all = (!runs_only_ach).then(|| {
                let (algorithms, comparisons, against_a0) = summarize_algorithms(config, &at);
                PointAlgorithms {
                    oracle_gap: oracle_gaps(&algorithms),
                    algorithms,
                    comparisons,
                    against_a0,
                }
            });
            out.sensitivity.push(SensitivityPoint {
                series: config.name.clone(),
                ach: runs_ach.then(|| summarize_algorithm(ACH, &aggregates_of(&at, ACH))),
                point,
                all,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::built_in_series;
    use crate::record::AlgorithmRecord;

    /// Records of `config` whose D-bar per run and algorithm is `d_bar[run][algorithm]`.
    fn records(config: &SeriesConfig, d_bar: &[[f64; 3]]) -> Vec<RunRecord> {
        d_bar
            .iter()
            .enumerate()
            .map(|(run, values)| RunRecord {
                series: config.name.clone(),
                point: None,
                run_index: run as u32,
                seed: config.seed(run as u32),
                profile: Profile::Paper,
                fingerprint: 0,
                algorithms: config
                    .algorithms
                    .iter()
                    .zip(values)
                    .map(|(name, &d_mean)| AlgorithmRecord {
                        name: name.clone(),
                        aggregates: Aggregates {
                            d_mean,
                            d_max: d_mean,
                            d_true_mean: d_mean,
                            m_cum: 0.0,
                            pi_chg: 0.0,
                            n_viol: 0,
                            cv_true_mean: None,
                            forwarded_fraction: None,
                        },
                        d_trace: Vec::new(),
                        d_true_trace: Vec::new(),
                        m_trace: Vec::new(),
                        violations: Vec::new(),
                    })
                    .collect(),
            })
            .collect()
    }

    fn c1(against_a0: bool) -> SeriesConfig {
        let mut config = built_in_series().remove(0);
        config.algorithms = vec!["Static-W".into(), "Dynamic-R".into(), "ACH".into()];
        config.against_a0 = against_a0;
        config
    }

    const D_BAR: [[f64; 3]; 6] = [
        [0.30, 0.20, 0.25],
        [0.31, 0.22, 0.24],
        [0.29, 0.21, 0.26],
        [0.32, 0.19, 0.27],
        [0.30, 0.23, 0.25],
        [0.33, 0.20, 0.24],
    ];

    #[test]
    fn every_algorithm_is_paired_against_a0_when_asked() {
        let config = c1(true);
        let summary = summarize_series(
            &config,
            &records(&config, &D_BAR).iter().collect::<Vec<_>>(),
        );
        let names: Vec<_> = summary
            .against_a0
            .iter()
            .map(|c| c.algorithm.clone())
            .collect();
        assert_eq!(
            names,
            [Some("Dynamic-R".to_string()), Some("ACH".to_string())]
        );
        let dynamic_r = &summary.against_a0[0];
        assert_eq!(dynamic_r.baseline, "Static-W");
        // Algorithm minus A0: Dynamic-R is lower in every run, so its change is negative and
        // Cliff's delta (A0 against the algorithm) is +1.
        let mean = |k: usize| D_BAR.iter().map(|r| r[k]).sum::<f64>() / 6.0;
        let expected = 100.0 * (mean(1) - mean(0)) / mean(0);
        assert!((dynamic_r.reduction_percent - expected).abs() < 1e-12);
        assert_eq!(dynamic_r.cliffs_delta, Some(1.0));
        // Holm over the two comparisons of the series: both have p = 2/64, so both adjust to
        // 2 * 2/64.
        for c in &summary.against_a0 {
            assert_eq!(c.p_value, Some(2.0 / 64.0));
            assert_eq!(c.p_holm, Some(4.0 / 64.0));
        }
        // ACH against each baseline is unchanged by the option.
        let plain = summarize_series(
            &c1(false),
            &records(&config, &D_BAR).iter().collect::<Vec<_>>(),
        );
        assert_eq!(plain.comparisons, summary.comparisons);
    }

    #[test]
    fn without_the_option_the_summary_and_the_fingerprint_are_as_before() {
        let off = c1(false);
        let on = c1(true);
        let summary = summarize_series(&off, &records(&off, &D_BAR).iter().collect::<Vec<_>>());
        assert!(summary.against_a0.is_empty());
        let json = serde_json::to_string(&summary).unwrap();
        assert!(!json.contains("against_a0") && !json.contains("\"algorithm\""));
        assert_eq!(
            crate::record::fingerprint(&off, Profile::Paper),
            crate::record::fingerprint(&on, Profile::Paper)
        );
        assert!(!toml::to_string(&off).unwrap().contains("against_a0"));
    }

    #[test]
    fn against_a0_needs_a0_in_the_series() {
        let mut config = c1(true);
        config.algorithms.remove(0);
        let error = config.validate(Profile::Paper).unwrap_err().to_string();
        assert!(
            error.contains("against_a0") && error.contains("Static-W"),
            "{error}"
        );
    }
}
