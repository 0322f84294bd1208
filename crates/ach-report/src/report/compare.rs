//! Our results next to the published ones: one [`CheckRow`] per published cell, with the
//! difference and whether it falls inside the agreement band.
//!
//! The agreement band (stated in REPORT.md by [`BAND_RULE`]):
//! - D-bar and pi_chg: `|ours - paper| <= max(0.005, CI95)`, with the paper's CI95 where it
//!   prints one and ours otherwise.
//! - M_cum: `|ours - paper| <= max(10 % of paper, the paper's CI95 where printed, 0.0005)`;
//!   0.0005 is half the last printed digit, so that a printed 0.000 accepts anything that
//!   rounds to it.
//! - Violations: exactly the paper's count (0).
//! - Wilcoxon p: below the paper's bound (0.001). Cliff's delta: the same magnitude label.
//! - Reductions are not banded: they follow from the two D-bar cells they are made of.

use ach_sim::summary::{AlgorithmSummary, Comparison, Interval, MatrixSummary, SeriesSummary};

use super::paper::{
    self, Metric, PaperAlgorithmRow, PaperSensitivityRow, PaperSeriesRow, PaperTextValue,
};

/// The agreement band, in words, for REPORT.md.
pub const BAND_RULE: &str = "D-bar and pi_chg: |ours - paper| <= max(0.005, CI95), using the paper's CI95 \
where it prints one (Table 3, Table 4) and ours otherwise. M_cum: |ours - paper| <= max(10 % of the paper's \
value, the paper's CI95 where printed, 0.0005), where 0.0005 is half the last printed digit so that a printed \
0.000 accepts anything that rounds to it. Violations: exactly 0. Wilcoxon p: below the paper's bound 0.001. \
Cliff's delta: the same magnitude label (large). Reductions are not banded: they follow from the two D-bar cells \
they are made of.";

/// Smallest D-bar and pi_chg tolerance.
const FRACTION_FLOOR: f64 = 0.005;
/// Relative M_cum tolerance.
const M_CUM_RELATIVE: f64 = 0.10;
/// Smallest M_cum tolerance: half the last printed digit.
const M_CUM_FLOOR: f64 = 0.0005;

/// A published value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PaperValue {
    /// A number.
    Number(f64),
    /// A bound: the paper states the value is below it.
    Below(f64),
    /// A magnitude label with its number (Cliff's delta).
    Labelled(f64, &'static str),
}

/// Whether our value falls in the band around the published one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Inside; `tolerance` is the band's absolute half-width where it has one.
    Within { tolerance: Option<f64> },
    /// Outside.
    Outside { tolerance: Option<f64> },
    /// The cell has no band (derived from other cells).
    NotBanded,
    /// We have no value: the series or algorithm was not run.
    NotRun,
}

impl Verdict {
    /// Whether the cell is flagged.
    pub fn is_outside(self) -> bool {
        matches!(self, Verdict::Outside { .. })
    }

    /// The absolute tolerance, if the band has one.
    pub fn tolerance(self) -> Option<f64> {
        match self {
            Verdict::Within { tolerance } | Verdict::Outside { tolerance } => tolerance,
            Verdict::NotBanded | Verdict::NotRun => None,
        }
    }
}

/// One published cell against ours.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckRow {
    /// Series.
    pub series: String,
    /// Sweep point (`eps_on=0.05`) for C5 rows.
    pub point: Option<String>,
    /// Algorithm; for a comparison, the baseline ACH is compared with.
    pub algorithm: String,
    /// What the cell is.
    pub metric: Metric,
    /// The published value.
    pub paper: PaperValue,
    /// Our value.
    pub ours: Option<f64>,
    /// Half-width of our 95 % CI, where the cell is a mean over runs.
    pub ours_ci95: Option<f64>,
    /// Inside the band or not.
    pub verdict: Verdict,
    /// A remark (the paper's comment or a known discrepancy).
    pub remark: Option<String>,
}

impl CheckRow {
    /// `ours - paper`, for numeric published values.
    pub fn difference(&self) -> Option<f64> {
        match (self.paper, self.ours) {
            (PaperValue::Number(p) | PaperValue::Labelled(p, _), Some(o)) => Some(o - p),
            _ => None,
        }
    }
}

/// The band of one numeric cell. `paper_ci95` is the paper's printed CI half-width, if any.
fn numeric_verdict(
    metric: Metric,
    paper: f64,
    paper_ci95: Option<f64>,
    ours: Option<f64>,
    ours_ci95: Option<f64>,
) -> Verdict {
    let Some(ours) = ours.filter(|v| v.is_finite()) else {
        return Verdict::NotRun;
    };
    let tolerance = match metric {
        Metric::DMean | Metric::PiChg => {
            let ci = paper_ci95.or(ours_ci95).unwrap_or(0.0);
            FRACTION_FLOOR.max(ci)
        }
        Metric::MCum => (M_CUM_RELATIVE * paper.abs())
            .max(paper_ci95.unwrap_or(0.0))
            .max(M_CUM_FLOOR),
        Metric::NViol => 0.0,
        Metric::ReductionPercent | Metric::WilcoxonP | Metric::CliffsDelta => {
            return Verdict::NotBanded;
        }
    };
    // A tiny slack absorbs the binary representation of printed decimals (0.177 - 0.172).
    if (ours - paper).abs() <= tolerance + 1e-12 {
        Verdict::Within {
            tolerance: Some(tolerance),
        }
    } else {
        Verdict::Outside {
            tolerance: Some(tolerance),
        }
    }
}

fn find_algorithm<'a>(series: &'a SeriesSummary, name: &str) -> Option<&'a AlgorithmSummary> {
    series.algorithms.iter().find(|a| a.name == name)
}

fn find_series<'a>(summary: &'a MatrixSummary, name: &str) -> Option<&'a SeriesSummary> {
    summary.series.iter().find(|s| s.name == name)
}

/// A check of one interval-valued metric.
struct IntervalCell<'a> {
    series: &'a str,
    point: Option<String>,
    algorithm: &'a str,
    metric: Metric,
    paper: f64,
    paper_ci95: Option<f64>,
    ours: Option<Interval>,
    remark: Option<String>,
}

impl IntervalCell<'_> {
    fn into_row(self) -> CheckRow {
        let ours = self.ours.map(|i| i.mean);
        let ours_ci95 = self.ours.and_then(|i| i.ci95);
        CheckRow {
            series: self.series.to_string(),
            point: self.point,
            algorithm: self.algorithm.to_string(),
            metric: self.metric,
            paper: PaperValue::Number(self.paper),
            ours,
            ours_ci95,
            verdict: numeric_verdict(self.metric, self.paper, self.paper_ci95, ours, ours_ci95),
            remark: self.remark,
        }
    }
}

fn violations_row(
    series: &str,
    point: Option<String>,
    algorithm: &str,
    paper: u64,
    ours: Option<u64>,
) -> CheckRow {
    let ours = ours.map(|n| n as f64);
    CheckRow {
        series: series.to_string(),
        point,
        algorithm: algorithm.to_string(),
        metric: Metric::NViol,
        paper: PaperValue::Number(paper as f64),
        ours,
        ours_ci95: None,
        verdict: numeric_verdict(Metric::NViol, paper as f64, None, ours, None),
        remark: None,
    }
}

/// Table 2 (ACH against A0, per series) against ours.
pub fn table_2_rows(summary: &MatrixSummary) -> Vec<CheckRow> {
    paper::TABLE_2
        .iter()
        .flat_map(|published| table_2_series_rows(summary, published))
        .collect()
}

fn table_2_series_rows(summary: &MatrixSummary, published: &PaperSeriesRow) -> Vec<CheckRow> {
    let series = find_series(summary, published.series);
    let ach = series.and_then(|s| find_algorithm(s, paper::ACH));
    let static_w = series.and_then(|s| find_algorithm(s, paper::STATIC_W));
    let comparison =
        series.and_then(|s| s.comparisons.iter().find(|c| c.baseline == paper::STATIC_W));
    let name = published.series;
    let mut rows = vec![
        IntervalCell {
            series: name,
            point: None,
            algorithm: paper::ACH,
            metric: Metric::DMean,
            paper: published.d_mean_ach,
            paper_ci95: None,
            ours: ach.map(|a| a.d_mean),
            remark: None,
        }
        .into_row(),
        IntervalCell {
            series: name,
            point: None,
            algorithm: paper::STATIC_W,
            metric: Metric::DMean,
            paper: published.d_mean_static_w,
            paper_ci95: None,
            ours: static_w.map(|a| a.d_mean),
            remark: None,
        }
        .into_row(),
    ];
    rows.push(reduction_row(name, published, comparison));
    rows.push(
        IntervalCell {
            series: name,
            point: None,
            algorithm: paper::ACH,
            metric: Metric::MCum,
            paper: published.m_cum_ach,
            paper_ci95: None,
            ours: ach.map(|a| a.m_cum),
            remark: None,
        }
        .into_row(),
    );
    rows.push(violations_row(
        name,
        None,
        paper::ACH,
        published.n_viol,
        ach.map(|a| a.n_viol),
    ));
    rows.push(p_value_row(name, comparison));
    rows.push(cliffs_delta_row(name, published, comparison));
    rows
}

/// Table 2's reduction of D-bar by ACH against A0, which the paper gives without a band.
fn reduction_row(
    name: &str,
    published: &PaperSeriesRow,
    comparison: Option<&Comparison>,
) -> CheckRow {
    unbanded_row(
        (name, paper::STATIC_W, Metric::ReductionPercent),
        published.reduction_percent,
        comparison.map(|c| c.reduction_percent),
        "ACH against A0",
    )
}

/// The row of a cell `(series, algorithm, metric)` that the paper prints without a band:
/// "not banded" when we have a value, "not run" when not.
fn unbanded_row(
    (series, algorithm, metric): (&str, &str, Metric),
    paper: f64,
    ours: Option<f64>,
    remark: &str,
) -> CheckRow {
    CheckRow {
        series: series.to_string(),
        point: None,
        algorithm: algorithm.to_string(),
        metric,
        paper: PaperValue::Number(paper),
        ours,
        ours_ci95: None,
        verdict: if ours.is_some() {
            Verdict::NotBanded
        } else {
            Verdict::NotRun
        },
        remark: Some(remark.to_string()),
    }
}

/// Table 2's Wilcoxon p-value of ACH against A0 (raw): within when below the paper's bound.
fn p_value_row(name: &str, comparison: Option<&Comparison>) -> CheckRow {
    let p_value = comparison.and_then(|c| c.p_value);
    CheckRow {
        series: name.to_string(),
        point: None,
        algorithm: paper::STATIC_W.to_string(),
        metric: Metric::WilcoxonP,
        paper: PaperValue::Below(paper::TABLE_2_P_VALUE_BELOW),
        ours: p_value,
        ours_ci95: None,
        verdict: match p_value {
            None => Verdict::NotRun,
            Some(p) if p < paper::TABLE_2_P_VALUE_BELOW => Verdict::Within { tolerance: None },
            Some(_) => Verdict::Outside { tolerance: None },
        },
        remark: Some("ACH against A0, raw".to_string()),
    }
}

/// Table 2's Cliff's delta of ACH against A0: within when ours has the paper's magnitude.
fn cliffs_delta_row(
    name: &str,
    published: &PaperSeriesRow,
    comparison: Option<&Comparison>,
) -> CheckRow {
    let delta = comparison.and_then(|c| c.cliffs_delta);
    let magnitude = comparison.and_then(|c| c.magnitude.clone());
    CheckRow {
        series: name.to_string(),
        point: None,
        algorithm: paper::STATIC_W.to_string(),
        metric: Metric::CliffsDelta,
        paper: PaperValue::Labelled(published.cliffs_delta, paper::TABLE_2_CLIFF_MAGNITUDE),
        ours: delta,
        ours_ci95: None,
        verdict: match (&magnitude, delta) {
            (Some(label), Some(_)) if label == paper::TABLE_2_CLIFF_MAGNITUDE => {
                Verdict::Within { tolerance: None }
            }
            (Some(_), Some(_)) => Verdict::Outside { tolerance: None },
            _ => Verdict::NotRun,
        },
        remark: magnitude.map(|m| format!("ours: {m}")),
    }
}

/// Table 3 (every algorithm in C3) against ours.
pub fn table_3_rows(summary: &MatrixSummary) -> Vec<CheckRow> {
    let series = find_series(summary, "C3");
    paper::TABLE_3
        .iter()
        .flat_map(|published| table_3_algorithm_rows(series, published))
        .collect()
}

fn table_3_algorithm_rows(
    series: Option<&SeriesSummary>,
    published: &PaperAlgorithmRow,
) -> Vec<CheckRow> {
    let ours = series.and_then(|s| find_algorithm(s, published.algorithm));
    let remark = published.remark.map(str::to_string);
    let cell = |metric: Metric, paper: f64, paper_ci95: Option<f64>, value: Option<Interval>| {
        IntervalCell {
            series: "C3",
            point: None,
            algorithm: published.algorithm,
            metric,
            paper,
            paper_ci95,
            ours: value,
            remark: remark.clone(),
        }
        .into_row()
    };
    vec![
        cell(
            Metric::DMean,
            published.d_mean,
            Some(published.d_mean_ci95),
            ours.map(|a| a.d_mean),
        ),
        cell(Metric::MCum, published.m_cum, None, ours.map(|a| a.m_cum)),
        cell(
            Metric::PiChg,
            published.pi_chg,
            None,
            ours.map(|a| a.pi_chg),
        ),
        violations_row(
            "C3",
            None,
            published.algorithm,
            published.n_viol,
            ours.map(|a| a.n_viol),
        ),
    ]
}

/// The values quoted in the paper's text against ours.
pub fn text_value_rows(summary: &MatrixSummary) -> Vec<CheckRow> {
    paper::TEXT_VALUES
        .iter()
        .map(|published| text_value_row(summary, published))
        .collect()
}

fn text_value_row(summary: &MatrixSummary, published: &PaperTextValue) -> CheckRow {
    let series = find_series(summary, published.series);
    let algorithm = series.and_then(|s| find_algorithm(s, published.algorithm));
    let interval = match published.metric {
        Metric::DMean => algorithm.map(|a| a.d_mean),
        Metric::MCum => algorithm.map(|a| a.m_cum),
        Metric::PiChg => algorithm.map(|a| a.pi_chg),
        _ => None,
    };
    if published.metric == Metric::ReductionPercent {
        let reduction = series
            .and_then(|s| {
                s.comparisons
                    .iter()
                    .find(|c| c.baseline == published.algorithm)
            })
            .map(|c| c.reduction_percent);
        return unbanded_row(
            (published.series, published.algorithm, published.metric),
            published.value,
            reduction,
            published.remark,
        );
    }
    IntervalCell {
        series: published.series,
        point: None,
        algorithm: published.algorithm,
        metric: published.metric,
        paper: published.value,
        paper_ci95: None,
        ours: interval,
        remark: Some(published.remark.to_string()),
    }
    .into_row()
}

/// Table 4 (C5) against ours: every sweep point of ours inside a printed row's range is
/// compared with that row.
pub fn table_4_rows(summary: &MatrixSummary) -> Vec<CheckRow> {
    let ci = paper::TABLE_4_CI95;
    let mut rows = Vec::new();
    for published in &paper::TABLE_4 {
        let points: Vec<_> = summary
            .ach_points()
            .into_iter()
            .filter(|p| published.covers(p.parameter, p.value))
            .collect();
        if points.is_empty() {
            rows.extend(table_4_point_rows(published, &ci, None, None));
        }
        for point in points {
            rows.extend(table_4_point_rows(
                published,
                &ci,
                Some(point.point.label()),
                Some(point.ach),
            ));
        }
    }
    rows
}

fn table_4_point_rows(
    published: &PaperSensitivityRow,
    ci: &paper::SensitivityCi,
    point: Option<String>,
    ours: Option<&AlgorithmSummary>,
) -> Vec<CheckRow> {
    let point = point.or_else(|| Some(published.label()));
    let remark = Some(format!("{}: {}", published.label(), published.remark));
    let cell = |metric: Metric, paper: f64, paper_ci95: f64, value: Option<Interval>| {
        IntervalCell {
            series: "C5",
            point: point.clone(),
            algorithm: paper::ACH,
            metric,
            paper,
            paper_ci95: Some(paper_ci95),
            ours: value,
            remark: remark.clone(),
        }
        .into_row()
    };
    vec![
        cell(
            Metric::DMean,
            published.d_mean,
            ci.d_mean,
            ours.map(|a| a.d_mean),
        ),
        cell(
            Metric::MCum,
            published.m_cum,
            ci.m_cum,
            ours.map(|a| a.m_cum),
        ),
        cell(
            Metric::PiChg,
            published.pi_chg,
            ci.pi_chg,
            ours.map(|a| a.pi_chg),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d_bar_band_uses_the_paper_ci_then_ours_then_the_floor() {
        let within = numeric_verdict(Metric::DMean, 0.340, Some(0.003), Some(0.344), None);
        assert_eq!(
            within,
            Verdict::Within {
                tolerance: Some(0.005)
            }
        );
        let outside = numeric_verdict(Metric::DMean, 0.275, Some(0.023), Some(0.33), None);
        assert!(outside.is_outside());
        let ours_ci = numeric_verdict(Metric::DMean, 0.2, None, Some(0.21), Some(0.011));
        assert!(!ours_ci.is_outside());
    }

    #[test]
    fn m_cum_band_is_relative_with_a_floor_for_printed_zero() {
        assert!(!numeric_verdict(Metric::MCum, 0.0, None, Some(0.0004), None).is_outside());
        assert!(numeric_verdict(Metric::MCum, 0.0, None, Some(0.001), None).is_outside());
        assert!(!numeric_verdict(Metric::MCum, 30.028, None, Some(32.0), None).is_outside());
        assert!(numeric_verdict(Metric::MCum, 0.063, None, Some(0.08), None).is_outside());
        assert_eq!(
            numeric_verdict(Metric::MCum, 0.063, None, None, None),
            Verdict::NotRun
        );
    }
}
