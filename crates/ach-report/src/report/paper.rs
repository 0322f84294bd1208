//! The published values of Batanov and Bolbakov (2026), copied from the paper as data, so that
//! the report can put them next to ours without reading anything outside the repository.

/// The paper's five algorithms by the names this project gives them: the only place outside
/// the style table where the report names an algorithm (its side-by-side with the paper).
pub const STATIC_W: &str = "Static-W";
/// A1.
pub const STATIC_WT: &str = "Static-Wt";
/// A2.
pub const DYNAMIC_R: &str = "Dynamic-R";
/// A3.
pub const BOUNDED_LOADS: &str = "Bounded-Loads";
/// The paper's algorithm.
pub const ACH: &str = "ACH";

/// One row of the paper's Table 2: ACH against Static-W (A0) in one series.
#[derive(Clone, Copy, Debug)]
pub struct PaperSeriesRow {
    /// Series name.
    pub series: &'static str,
    /// D-bar of ACH.
    pub d_mean_ach: f64,
    /// D-bar of Static-W.
    pub d_mean_static_w: f64,
    /// `(D-bar ACH - D-bar A0) / D-bar A0`, in percent (negative: ACH is lower).
    pub reduction_percent: f64,
    /// M_cum of ACH.
    pub m_cum_ach: f64,
    /// Violations of ACH.
    pub n_viol: u64,
    /// Cliff's delta of A0's per-run D-bar against ACH's (positive: ACH lower), from the text.
    pub cliffs_delta: f64,
}

/// Table 2 of the paper, with the Cliff's delta values of the text.
pub const TABLE_2: [PaperSeriesRow; 6] = [
    row2("C1", 0.177, 0.225, -21.5, 0.063, 0.996),
    row2("C2", 0.016, 0.035, -55.4, 0.028, 1.000),
    row2("C3", 0.340, 0.496, -31.6, 0.310, 1.000),
    row2("C4a", 0.172, 0.224, -23.2, 0.070, 1.000),
    row2("C4b", 0.166, 0.222, -25.2, 0.167, 1.000),
    row2("C4c", 0.198, 0.219, -9.8, 4.565, 0.936),
];

const fn row2(
    series: &'static str,
    d_mean_ach: f64,
    d_mean_static_w: f64,
    reduction_percent: f64,
    m_cum_ach: f64,
    cliffs_delta: f64,
) -> PaperSeriesRow {
    PaperSeriesRow {
        series,
        d_mean_ach,
        d_mean_static_w,
        reduction_percent,
        m_cum_ach,
        n_viol: 0,
        cliffs_delta,
    }
}

/// The paper states `p < 0.001` for the Wilcoxon test of ACH against A0 in C1 to C4c.
pub const TABLE_2_P_VALUE_BELOW: f64 = 0.001;

/// The magnitude label the paper gives every Cliff's delta of Table 2.
pub const TABLE_2_CLIFF_MAGNITUDE: &str = "large";

/// One row of the paper's Table 3: one algorithm in series C3.
#[derive(Clone, Copy, Debug)]
pub struct PaperAlgorithmRow {
    /// Algorithm name as used in this project.
    pub algorithm: &'static str,
    /// D-bar.
    pub d_mean: f64,
    /// Half-width of its printed 95 % CI.
    pub d_mean_ci95: f64,
    /// M_cum.
    pub m_cum: f64,
    /// pi_chg.
    pub pi_chg: f64,
    /// Violations.
    pub n_viol: u64,
    /// A remark printed next to the row in the report.
    pub remark: Option<&'static str>,
}

/// Table 3 of the paper: every algorithm in C3.
pub const TABLE_3: [PaperAlgorithmRow; 5] = [
    row3(STATIC_W, 0.496, 0.008, 0.000, 0.000, None),
    row3(STATIC_WT, 0.485, 0.008, 0.000, 0.000, None),
    row3(DYNAMIC_R, 0.339, 0.006, 4.839, 0.155, None),
    row3(
        BOUNDED_LOADS,
        0.275,
        0.023,
        0.750,
        0.045,
        Some(
            "known: the published code's A3 in C3 gives about 0.33 / M_cum 0.63, not the printed 0.275 / 0.750",
        ),
    ),
    row3(ACH, 0.340, 0.003, 0.310, 0.058, None),
];

const fn row3(
    algorithm: &'static str,
    d_mean: f64,
    d_mean_ci95: f64,
    m_cum: f64,
    pi_chg: f64,
    remark: Option<&'static str>,
) -> PaperAlgorithmRow {
    PaperAlgorithmRow {
        algorithm,
        d_mean,
        d_mean_ci95,
        m_cum,
        pi_chg,
        n_viol: 0,
        remark,
    }
}

/// The quantity a published value is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Mean imbalance D-bar.
    DMean,
    /// Cumulative redistribution cost M_cum.
    MCum,
    /// Fraction of steps with a move.
    PiChg,
    /// Invariant violations.
    NViol,
    /// `(D-bar ACH - D-bar baseline) / D-bar baseline`, in percent.
    ReductionPercent,
    /// Two-sided paired Wilcoxon p-value on per-run D-bar.
    WilcoxonP,
    /// Cliff's delta of the baseline's per-run D-bar against ACH's.
    CliffsDelta,
}

impl Metric {
    /// Name in tables (plain ASCII, so that it needs no escaping in LaTeX beyond `_`).
    pub fn label(self) -> &'static str {
        match self {
            Metric::DMean => "D-bar",
            Metric::MCum => "M_cum",
            Metric::PiChg => "pi_chg",
            Metric::NViol => "n_viol",
            Metric::ReductionPercent => "reduction %",
            Metric::WilcoxonP => "Wilcoxon p",
            Metric::CliffsDelta => "Cliff's delta",
        }
    }

    /// Name in CSV files.
    pub fn csv_name(self) -> &'static str {
        match self {
            Metric::DMean => "d_mean",
            Metric::MCum => "m_cum",
            Metric::PiChg => "pi_chg",
            Metric::NViol => "n_viol",
            Metric::ReductionPercent => "reduction_percent",
            Metric::WilcoxonP => "wilcoxon_p",
            Metric::CliffsDelta => "cliffs_delta",
        }
    }
}

/// A value the paper quotes in its text rather than in a table.
#[derive(Clone, Copy, Debug)]
pub struct PaperTextValue {
    /// Series.
    pub series: &'static str,
    /// Algorithm (for a reduction: the baseline ACH is compared with).
    pub algorithm: &'static str,
    /// What the value is.
    pub metric: Metric,
    /// The value.
    pub value: f64,
    /// What the text says about it.
    pub remark: &'static str,
}

/// Values quoted in the text.
pub const TEXT_VALUES: [PaperTextValue; 3] = [
    PaperTextValue {
        series: "C1",
        algorithm: STATIC_WT,
        metric: Metric::DMean,
        value: 0.175,
        remark: "difference to ACH not significant",
    },
    PaperTextValue {
        series: "C1",
        algorithm: DYNAMIC_R,
        metric: Metric::MCum,
        value: 30.028,
        remark: "cost of full rebalancing",
    },
    PaperTextValue {
        series: "C3",
        algorithm: STATIC_WT,
        metric: Metric::ReductionPercent,
        value: -30.0,
        remark: "ACH against A1 (printed as a 30.0 % reduction)",
    },
];

/// One row of the paper's Table 4 (C5): a parameter value or a range of values with the same
/// printed result.
#[derive(Clone, Copy, Debug)]
pub struct PaperSensitivityRow {
    /// `eps_on`, `kappa`, `tau` or `M_max`.
    pub parameter: &'static str,
    /// Lowest value of the row's range.
    pub low: f64,
    /// Highest value of the row's range (equal to `low` for a single value).
    pub high: f64,
    /// D-bar of ACH.
    pub d_mean: f64,
    /// M_cum of ACH.
    pub m_cum: f64,
    /// pi_chg of ACH.
    pub pi_chg: f64,
    /// The paper's comment.
    pub remark: &'static str,
}

impl PaperSensitivityRow {
    /// The row's parameter range as printed, e.g. `kappa 0.05-0.20`.
    pub fn label(&self) -> String {
        if self.low == self.high {
            format!("{} {}", self.parameter, self.low)
        } else {
            format!("{} {}-{}", self.parameter, self.low, self.high)
        }
    }

    /// Whether a sweep value falls in the row's range.
    pub fn covers(&self, parameter: &str, value: f64) -> bool {
        parameter == self.parameter && value >= self.low - 1e-9 && value <= self.high + 1e-9
    }
}

/// Table 4 of the paper.
pub const TABLE_4: [PaperSensitivityRow; 7] = [
    row4(
        "eps_on",
        0.05,
        0.05,
        0.169,
        0.234,
        0.256,
        "aggressive correction",
    ),
    row4(
        "eps_on",
        0.10,
        0.10,
        0.176,
        0.064,
        0.036,
        "working point (base)",
    ),
    row4(
        "eps_on",
        0.15,
        0.15,
        0.208,
        0.000,
        0.000,
        "correction never starts",
    ),
    row4(
        "kappa",
        0.05,
        0.20,
        0.176,
        0.064,
        0.036,
        "no effect in range",
    ),
    row4(
        "tau",
        0.70,
        0.80,
        0.225,
        0.000,
        0.000,
        "gamma = 0, suppressed",
    ),
    row4("tau", 0.85, 0.85, 0.176, 0.064, 0.036, "base"),
    row4("M_max", 0.005, 0.10, 0.176, 0.064, 0.036, "bound by M_H/H"),
];

const fn row4(
    parameter: &'static str,
    low: f64,
    high: f64,
    d_mean: f64,
    m_cum: f64,
    pi_chg: f64,
    remark: &'static str,
) -> PaperSensitivityRow {
    PaperSensitivityRow {
        parameter,
        low,
        high,
        d_mean,
        m_cum,
        pi_chg,
        remark,
    }
}

/// Half-widths of the 95 % CIs the paper states for every C5 metric (upper bounds).
pub const TABLE_4_CI95: SensitivityCi = SensitivityCi {
    d_mean: 0.008,
    m_cum: 0.012,
    pi_chg: 0.015,
};

/// The CI half-widths of Table 4.
#[derive(Clone, Copy, Debug)]
pub struct SensitivityCi {
    /// Of D-bar.
    pub d_mean: f64,
    /// Of M_cum.
    pub m_cum: f64,
    /// Of pi_chg.
    pub pi_chg: f64,
}

/// A remark printed under Table 4.
pub const TABLE_4_REMARK: &str = "Known: the published code's own sweep does not reproduce every printed cell \
(e.g. the eps_on = 0.05 row and the pi_chg column; base pi_chg is about 0.003 in the code against 0.036 in print).";
