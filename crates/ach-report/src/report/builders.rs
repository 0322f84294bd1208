//! The report's tables, built from the results and the comparison rows.

use ach_sim::summary::{AlgorithmSummary, MatrixSummary};
use ach_sim::{AlgorithmInfo, Registry, SeriesConfig};

use super::compare::{self, CheckRow, PaperValue};
use super::load::Results;
use super::paper::{self, Metric};
use super::tables::{Cell, Column, CsvShape, Table};

/// The registry entry of an algorithm of the results. [`super::load::load_results`] has
/// checked that every algorithm the results name is registered.
pub fn algorithm_info<'r>(registry: &'r Registry, algorithm: &str) -> &'r AlgorithmInfo {
    registry
        .info(algorithm)
        .expect("load_results checked every algorithm name")
}

/// Short name of an algorithm (the paper's A0 to A3; ACH; a user's label).
pub fn short_name<'r>(registry: &'r Registry, algorithm: &str) -> &'r str {
    &algorithm_info(registry, algorithm).label
}

/// `Static-W (A0)`, or the name alone when it has no short name.
pub fn long_name(registry: &Registry, algorithm: &str) -> String {
    algorithm_info(registry, algorithm).long_label()
}

/// An algorithm: `Static-W (A0)` in Markdown and LaTeX, `Static-W` in CSV.
fn algorithm_cell(registry: &Registry, name: &str) -> Cell {
    Cell::Label {
        text: long_name(registry, name),
        csv: name.to_string(),
    }
}

/// A right-aligned key column (counts that identify a row, such as the number of runs).
fn numeric_key(header: &str, csv_name: &str) -> Column {
    Column {
        align: super::tables::Align::Right,
        ..Column::key(header, csv_name)
    }
}

/// Decimals (paper, ours) of a metric.
fn decimals(metric: Metric) -> (usize, usize) {
    match metric {
        Metric::DMean | Metric::PiChg | Metric::MCum => (3, 4),
        Metric::NViol => (0, 0),
        Metric::ReductionPercent => (1, 1),
        Metric::WilcoxonP | Metric::CliffsDelta => (3, 3),
    }
}

/// Every table of the report, in the order REPORT.md shows them.
pub struct ReportTables {
    /// What was run.
    pub overview: Table,
    /// Table 2 against ours.
    pub table_2: Table,
    /// Table 3 against ours.
    pub table_3: Table,
    /// The values of the text against ours.
    pub text_values: Table,
    /// Wilcoxon and Cliff's delta, ACH against every baseline.
    pub statistics: Table,
    /// The same, every other algorithm against Static-W (A0), when some series asks for it
    /// (`against_a0 = true`).
    pub statistics_a0: Option<Table>,
    /// Every algorithm's share of the A0-to-Oracle gap closed, when some series runs the
    /// Oracle beside Static-W (A0).
    pub oracle_gap: Option<Table>,
    /// Table 4 against ours.
    pub table_4: Table,
    /// Every C5 point of ours.
    pub sensitivity: Table,
    /// Violation counts.
    pub violations: Table,
    /// Every algorithm in every series.
    pub all_algorithms: Table,
    /// One table per sweep beyond C5's form (a grid, or every algorithm at every point).
    pub sweeps: Vec<Table>,
    /// The paired statistics at every point of those sweeps that compare algorithms (ACH
    /// against each baseline), one table per sweep.
    pub sweep_statistics: Vec<Table>,
    /// One table per series with `report_cv = true`: D-bar beside the coefficient of
    /// variation of the true loads (none for the default matrix).
    pub cv: Vec<Table>,
}

impl ReportTables {
    /// Every table, in report order.
    pub fn all(&self) -> Vec<&Table> {
        let mut all = vec![
            &self.overview,
            &self.table_2,
            &self.table_3,
            &self.text_values,
            &self.statistics,
        ];
        all.extend(&self.statistics_a0);
        all.extend(&self.oracle_gap);
        all.extend([
            &self.table_4,
            &self.sensitivity,
            &self.violations,
            &self.all_algorithms,
        ]);
        all.extend(&self.sweeps);
        all.extend(&self.sweep_statistics);
        all.extend(&self.cv);
        all
    }
}

/// Builds every table.
pub fn build_tables(results: &Results) -> ReportTables {
    let summary = &results.summary;
    ReportTables {
        overview: overview_table(results),
        table_2: check_table(
            &results.registry,
            "table2_ach_vs_a0",
            "Table 2: ACH against Static-W (A0) per series, paper against ours",
            &compare::table_2_rows(summary),
        ),
        table_3: check_table(
            &results.registry,
            "table3_c3_algorithms",
            "Table 3: every algorithm in C3, paper against ours",
            &compare::table_3_rows(summary),
        ),
        text_values: check_table(
            &results.registry,
            "text_values",
            "Values quoted in the paper's text, paper against ours",
            &compare::text_value_rows(summary),
        ),
        statistics: statistics_table(&results.registry, summary),
        statistics_a0: statistics_a0_table(&results.registry, summary),
        oracle_gap: oracle_gap_table(&results.registry, summary),
        table_4: check_table(
            &results.registry,
            "table4_c5_sensitivity",
            "Table 4: C5 sensitivity of ACH, paper against ours (every point in a printed range)",
            &compare::table_4_rows(summary),
        ),
        sensitivity: sensitivity_table(results),
        violations: violations_table(&results.registry, summary),
        all_algorithms: all_algorithms_table(&results.registry, summary),
        sweeps: summary
            .general_sweeps()
            .into_iter()
            .flat_map(|(series, points)| {
                let mut tables = vec![sweep_table(&results.registry, series, &points)];
                tables.extend(gain_threshold_table(&results.registry, series, &points));
                tables
            })
            .collect(),
        sweep_statistics: summary
            .general_sweeps()
            .into_iter()
            .filter_map(|(series, points)| {
                sweep_statistics_table(&results.registry, series, &points)
            })
            .collect(),
        cv: cv_tables(&results.registry, summary),
    }
}

/// The tables of D-bar beside the coefficient of variation of the true loads, one per series
/// whose summary carries it (`report_cv = true`), in summary order.
fn cv_tables(registry: &Registry, summary: &MatrixSummary) -> Vec<Table> {
    let mut tables = Vec::new();
    for series in &summary.series {
        let rows: Vec<(Option<String>, &AlgorithmSummary)> =
            series.algorithms.iter().map(|a| (None, a)).collect();
        if let Some(table) = cv_table(registry, &series.name, &rows) {
            tables.push(table);
        }
    }
    for name in summary.sweep_series() {
        let rows: Vec<(Option<String>, &AlgorithmSummary)> = summary
            .sensitivity
            .iter()
            .filter(|p| p.series == name)
            .flat_map(|p| {
                p.algorithms()
                    .into_iter()
                    .map(|a| (Some(p.point.label()), a))
            })
            .collect();
        if let Some(table) = cv_table(registry, name, &rows) {
            tables.push(table);
        }
    }
    tables
}

/// D-bar (observed and true) and CV of the true loads per algorithm (and point); `None` when
/// no row has the CV.
fn cv_table(
    registry: &Registry,
    series: &str,
    rows: &[(Option<String>, &AlgorithmSummary)],
) -> Option<Table> {
    if rows.iter().all(|(_, a)| a.cv_true_mean.is_none()) {
        return None;
    }
    let with_point = rows.iter().any(|(point, _)| point.is_some());
    let mut columns = Vec::new();
    if with_point {
        columns.push(Column::key("Point", "point"));
    }
    columns.extend([
        Column::key("Algorithm", "algorithm"),
        numeric_key("Runs", "runs"),
        Column::value("D-bar", "d_mean"),
        Column::value("D-bar true", "d_true_mean"),
        Column::value("CV true", "cv_true_mean"),
    ]);
    let rows = rows
        .iter()
        .map(|(point, a)| {
            let mut cells = Vec::new();
            if with_point {
                cells.push(Cell::text(point.clone().unwrap_or_default()));
            }
            cells.extend([
                algorithm_cell(registry, &a.name),
                Cell::Count(Some(a.runs as u64)),
                estimate(a.d_mean),
                estimate(a.d_true_mean),
                optional_estimate(a.cv_true_mean),
            ]);
            cells
        })
        .collect();
    Some(Table {
        name: format!("cv_{series}"),
        title: format!(
            "{series}: D-bar beside the coefficient of variation of the true loads (mean ± CI95 over the runs)"
        ),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    })
}

/// Below this gain over Static-W (A0), in percent of A0's true D-bar, an algorithm is said to
/// have stopped beating A0 (issue 20's `noise` target).
const GAIN_FLOOR_PERCENT: f64 = 5.0;

/// For a sweep of one field that runs Static-W (A0): every other algorithm's gain over A0 on
/// the true D-bar at the first point, and the first value of the field at which the gain falls
/// below 5 % ("—" when it never does). `None` for grids or without A0.
fn gain_threshold_table(
    registry: &Registry,
    series: &str,
    points: &[&ach_sim::summary::SensitivityPoint],
) -> Option<Table> {
    let coordinates: Vec<_> = points
        .iter()
        .map(|p| p.point.only())
        .collect::<Option<_>>()?;
    let parameter = coordinates.first()?.parameter.clone();
    let gain = |p: &ach_sim::summary::SensitivityPoint, name: &str| {
        let algorithms = p.algorithms();
        let d = |n: &str| {
            algorithms
                .iter()
                .find(|a| a.name == n)
                .map(|a| a.d_true_mean.mean)
        };
        let a0 = d(ach_sim::config::A0)?;
        Some(100.0 * (a0 - d(name)?) / a0)
    };
    let first = points.first()?;
    gain(first, ach_sim::config::A0)?;
    let rows = first
        .algorithms()
        .iter()
        .filter(|a| a.name != ach_sim::config::A0)
        .map(|a| {
            let below = points
                .iter()
                .zip(&coordinates)
                .find(|(p, _)| gain(p, &a.name).is_some_and(|g| g < GAIN_FLOOR_PERCENT))
                .map(|(_, c)| c.value);
            vec![
                Cell::text(series),
                algorithm_cell(registry, &a.name),
                Cell::number(gain(first, &a.name), 1),
                Cell::number(below, 3),
            ]
        })
        .collect();
    Some(Table {
        name: format!("gain_threshold_{series}"),
        title: format!(
            "Sweep {series}: gain over Static-W (A0) on the true D-bar at the first point, and the first {parameter} at which it falls below {GAIN_FLOOR_PERCENT} %"
        ),
        columns: vec![
            Column::key("Series", "series"),
            Column::key("Algorithm", "algorithm"),
            Column::value("Gain at first point %", "gain_first_percent"),
            Column::value(&format!("{parameter} where gain < 5 %"), "threshold"),
        ],
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    })
}

/// Every algorithm at every point of one sweep.
fn sweep_table(
    registry: &Registry,
    series: &str,
    points: &[&ach_sim::summary::SensitivityPoint],
) -> Table {
    let forwarded = points.iter().any(|p| {
        p.algorithms()
            .iter()
            .any(|a| a.forwarded_fraction.is_some())
    });
    let mut columns = vec![
        Column::key("Point", "point"),
        Column::key("Algorithm", "algorithm"),
        numeric_key("Runs", "runs"),
        Column::value("D-bar", "d_mean"),
        Column::value("D-bar true", "d_true_mean"),
        Column::value("M_cum", "m_cum"),
        Column::value("pi_chg", "pi_chg"),
        Column::value("n_viol", "n_viol"),
    ];
    if forwarded {
        columns.push(forwarded_column());
    }
    let rows = points
        .iter()
        .flat_map(|p| {
            p.algorithms().into_iter().map(|a| {
                let mut cells = vec![
                    Cell::text(p.point.label()),
                    algorithm_cell(registry, &a.name),
                    Cell::Count(Some(a.runs as u64)),
                    estimate(a.d_mean),
                    estimate(a.d_true_mean),
                    estimate(a.m_cum),
                    estimate(a.pi_chg),
                    Cell::Count(Some(a.n_viol)),
                ];
                if forwarded {
                    cells.push(optional_estimate(a.forwarded_fraction));
                }
                cells
            })
        })
        .collect();
    Table {
        name: format!("sweep_{series}"),
        title: format!(
            "Sweep {series}: every algorithm at every point (mean ± CI95 over the point's runs)"
        ),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    }
}

/// A table of published cells against ours: paper | ours | difference | band | status.
pub fn check_table(registry: &Registry, name: &str, title: &str, rows: &[CheckRow]) -> Table {
    let with_point = rows.iter().any(|r| r.point.is_some());
    let mut columns = vec![Column::key("Series", "series")];
    if with_point {
        columns.push(Column::key("Point", "point"));
    }
    columns.extend([
        Column::key("Algorithm", "algorithm"),
        Column::key("Metric", "metric"),
        Column::value("Paper", "paper"),
        Column::value("Ours (± CI95)", "ours"),
        Column::value("Difference", "difference"),
        Column::value("Band (±)", "tolerance"),
        Column::text_value("Status", "status"),
        Column::text_value("Remark", "remark"),
    ]);
    let table_rows = rows
        .iter()
        .map(|row| {
            let (paper_decimals, ours_decimals) = decimals(row.metric);
            let mut cells = vec![Cell::text(&row.series)];
            if with_point {
                cells.push(Cell::text(row.point.clone().unwrap_or_default()));
            }
            let metric = Cell::Label {
                text: row.metric.label().to_string(),
                csv: row.metric.csv_name().to_string(),
            };
            let paper = match row.paper {
                PaperValue::Number(v) | PaperValue::Labelled(v, _) => {
                    Cell::number(Some(v), paper_decimals)
                }
                PaperValue::Below(bound) => Cell::text(format!("< {bound}")),
            };
            let ours = match row.metric {
                Metric::WilcoxonP => Cell::PValue(row.ours),
                Metric::NViol => Cell::Count(row.ours.map(|v| v as u64)),
                _ => Cell::Estimate {
                    mean: row.ours,
                    ci95: row.ours_ci95,
                    decimals: ours_decimals,
                },
            };
            cells.extend([
                algorithm_cell(registry, &row.algorithm),
                metric,
                paper,
                ours,
                Cell::Difference {
                    value: row.difference(),
                    decimals: ours_decimals,
                },
                Cell::number(
                    row.verdict.tolerance(),
                    if row.metric == Metric::NViol {
                        0
                    } else {
                        ours_decimals.max(3)
                    },
                ),
                Cell::Verdict(row.verdict),
                Cell::text(row.remark.clone().unwrap_or_default()),
            ]);
            cells
        })
        .collect();
    Table {
        name: name.to_string(),
        title: title.to_string(),
        columns,
        rows: table_rows,
        csv_shape: CsvShape::AsRows,
    }
}

/// Seeds as `42, 1042, ..., 29042 (30 runs)`.
fn seeds_text(seeds: &[u64]) -> String {
    match seeds {
        [] => "—".to_string(),
        [only] => only.to_string(),
        [first, second] => format!("{first}, {second}"),
        [first, second, .., last] => format!("{first}, {second}, ..., {last}"),
    }
}

fn overview_table(results: &Results) -> Table {
    let registry = &results.registry;
    let columns = vec![
        Column::key("Series", "series"),
        Column::text_value("Description", "description"),
        Column::value("Runs", "runs"),
        Column::value("Steps", "steps"),
        Column::value("Warm-up", "warmup"),
        Column::text_value("Seeds", "seeds"),
        Column::value("sigma", "sigma"),
        Column::text_value("Algorithms", "algorithms"),
    ];
    let mut rows = Vec::new();
    for config in &results.configs {
        let summary_series = results
            .summary
            .series
            .iter()
            .find(|s| s.name == config.name);
        let (runs, seeds, description) = match summary_series {
            Some(s) => (
                s.seeds.len() as u64,
                seeds_text(&s.seeds),
                s.description.clone(),
            ),
            None => {
                let points = config.sweep_points().len() as u64;
                let runs = results
                    .summary
                    .sensitivity
                    .iter()
                    .filter(|p| p.series == config.name)
                    .filter_map(|p| p.ach.as_ref().map(|a| a.runs as u64))
                    .max()
                    .unwrap_or(0);
                let seeds: Vec<u64> = (0..runs as u32).map(|r| config.seed(r)).collect();
                (
                    runs,
                    format!("{} (at each of {points} points)", seeds_text(&seeds)),
                    config.description.clone(),
                )
            }
        };
        rows.push(vec![
            Cell::text(&config.name),
            Cell::text(description),
            Cell::Count(Some(runs)),
            Cell::Count(Some(u64::from(config.steps))),
            Cell::Count(Some(u64::from(config.warmup))),
            Cell::text(seeds),
            Cell::number(Some(config.noise.sigma), 2),
            Cell::text(
                config
                    .algorithms
                    .iter()
                    .map(|a| short_name(registry, a))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ]);
    }
    Table {
        name: "overview".to_string(),
        title: "What was run".to_string(),
        columns,
        rows,
        csv_shape: CsvShape::AsRows,
    }
}

fn statistics_table(registry: &Registry, summary: &MatrixSummary) -> Table {
    let rows = summary
        .series
        .iter()
        .flat_map(|series| {
            series
                .comparisons
                .iter()
                .map(|c| comparison_row(registry, &series.name, &c.baseline, c))
        })
        .collect();
    comparison_table(
        "statistics",
        "ACH against every baseline: paired Wilcoxon on per-run D-bar (raw and Holm-adjusted within each series), Cliff's delta with its 95 % CI",
        [
            Column::key("Series", "series"),
            Column::key("Baseline", "baseline"),
        ],
        rows,
    )
}

/// ACH against each baseline at every point of a sweep; `None` when no point compares.
fn sweep_statistics_table(
    registry: &Registry,
    series: &str,
    points: &[&ach_sim::summary::SensitivityPoint],
) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = points
        .iter()
        .filter_map(|p| Some((p.point.label(), p.all.as_ref()?)))
        .flat_map(|(label, all)| {
            all.comparisons
                .iter()
                .map(move |c| comparison_row(registry, &label, &c.baseline, c))
        })
        .collect();
    (!rows.is_empty()).then(|| {
        comparison_table(
            &format!("statistics_{series}"),
            &format!("Sweep {series}: ACH against every baseline at every point: paired Wilcoxon on per-run D-bar (raw and Holm-adjusted within each point), Cliff's delta with its 95 % CI"),
            [Column::key("Point", "point"), Column::key("Baseline", "baseline")],
            rows,
        )
    })
}

/// Every other algorithm against Static-W (A0), for the series with `against_a0 = true`;
/// `None` when no series has it (the default matrix).
fn statistics_a0_table(registry: &Registry, summary: &MatrixSummary) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = summary
        .series
        .iter()
        .flat_map(|series| {
            series
                .against_a0
                .iter()
                .map(|c| comparison_row(registry, &series.name, c.algorithm_name(), c))
        })
        .collect();
    (!rows.is_empty()).then(|| {
        comparison_table(
            "statistics_a0",
            "Every algorithm against Static-W (A0): paired Wilcoxon on per-run D-bar (raw and Holm-adjusted within each series), Cliff's delta with its 95 % CI",
            [Column::key("Series", "series"), Column::key("Algorithm", "algorithm")],
            rows,
        )
    })
}

/// Every algorithm's share of the A0-to-Oracle gap closed (on the true D-bar), in every series
/// and sweep point that runs both; `None` when none does.
fn oracle_gap_table(registry: &Registry, summary: &MatrixSummary) -> Option<Table> {
    let series = summary
        .series
        .iter()
        .map(|s| (s.name.clone(), &s.algorithms, &s.oracle_gap));
    let points = summary.sensitivity.iter().filter_map(|p| {
        let all = p.all.as_ref()?;
        Some((
            format!("{} {}", p.series, p.point.label()),
            &all.algorithms,
            &all.oracle_gap,
        ))
    });
    let mut rows = Vec::new();
    for (name, algorithms, gaps) in series.chain(points) {
        for gap in gaps {
            let Some(a) = algorithms.iter().find(|a| a.name == gap.algorithm) else {
                continue;
            };
            rows.push(vec![
                Cell::text(&name),
                algorithm_cell(registry, &gap.algorithm),
                estimate(a.d_true_mean),
                estimate(a.m_cum),
                Cell::number(gap.share_closed.map(|s| 100.0 * s), 1),
            ]);
        }
    }
    (!rows.is_empty()).then(|| Table {
        name: "oracle_gap".to_string(),
        title: "Share of the gap between Static-W (A0) and the Oracle closed, on the true D-bar: (D(A0) - D) / (D(A0) - D(Oracle))".to_string(),
        columns: vec![
            Column::key("Series", "series"),
            Column::key("Algorithm", "algorithm"),
            Column::value("D-bar (true)", "d_true_mean"),
            Column::value("M_cum", "m_cum"),
            Column::value("Gap closed %", "gap_closed_percent"),
        ],
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    })
}

/// A table of paired comparisons, one row per [`comparison_row`]; `keys` are the columns of
/// the series (or point) and of the algorithm each row names.
fn comparison_table(name: &str, title: &str, keys: [Column; 2], rows: Vec<Vec<Cell>>) -> Table {
    let [first, named] = keys;
    let columns = vec![
        first,
        named,
        Column::value("n", "n"),
        Column::value("W", "wilcoxon_statistic"),
        Column::value("p (raw)", "p_value"),
        Column::value("p (Holm)", "p_holm"),
        Column::value("Cliff's delta", "cliffs_delta"),
        Column::value("CI95 low", "cliff_ci_low"),
        Column::value("CI95 high", "cliff_ci_high"),
        Column::key("Magnitude", "magnitude"),
        Column::value("D-bar change %", "reduction_percent"),
    ];
    Table {
        name: name.to_string(),
        title: title.to_string(),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    }
}

/// The cells of one paired comparison of series (or point) `series`, naming `algorithm`.
fn comparison_row(
    registry: &Registry,
    series: &str,
    algorithm: &str,
    c: &ach_sim::summary::Comparison,
) -> Vec<Cell> {
    vec![
        Cell::text(series),
        algorithm_cell(registry, algorithm),
        Cell::Count(Some(c.n as u64)),
        Cell::number(c.wilcoxon_statistic, 1),
        Cell::PValue(c.p_value),
        Cell::PValue(c.p_holm),
        Cell::number(c.cliffs_delta, 3),
        Cell::number(c.cliff_ci_low, 3),
        Cell::number(c.cliff_ci_high, 3),
        Cell::text(c.magnitude.clone().unwrap_or_else(|| "—".to_string())),
        Cell::Difference {
            value: Some(c.reduction_percent),
            decimals: 1,
        },
    ]
}

/// The estimate cells of an algorithm: D-bar, M_cum, pi_chg (4 decimals).
fn estimate(interval: ach_sim::summary::Interval) -> Cell {
    Cell::Estimate {
        mean: Some(interval.mean),
        ci95: interval.ci95,
        decimals: 4,
    }
}

/// An estimate that only some algorithms have; "—" for the others.
fn optional_estimate(interval: Option<ach_sim::summary::Interval>) -> Cell {
    interval.map_or(
        Cell::Estimate {
            mean: None,
            ci95: None,
            decimals: 4,
        },
        estimate,
    )
}

/// The CSV name of the column of forwarded fractions.
pub const FORWARDED_COLUMN: &str = "forwarded_fraction";

/// The column of the fraction of requests forwarded past their token's owner, shown only when
/// some algorithm of the table routes its own way (CH-BL).
fn forwarded_column() -> Column {
    Column::value("Forwarded", FORWARDED_COLUMN)
}

/// Whether `value` is the series' own value of the field at `path` (the sweep's base point):
/// setting it changes nothing.
fn is_base(config: Option<&SeriesConfig>, path: &str, value: f64) -> bool {
    let Some(config) = config else {
        return false;
    };
    let mut at_value = config.clone();
    let path = ach_sim::sweep::resolve_path(path);
    ach_sim::point::set_field(&mut at_value, path, value).is_ok() && at_value == *config
}

fn sensitivity_table(results: &Results) -> Table {
    let columns = vec![
        Column::key("Series", "series"),
        Column::key("Parameter", "parameter"),
        Column::key("Value", "parameter_value"),
        Column::key("Base", "base"),
        numeric_key("Runs", "runs"),
        Column::value("D-bar", "d_mean"),
        Column::value("M_cum", "m_cum"),
        Column::value("pi_chg", "pi_chg"),
        Column::value("n_viol", "n_viol"),
    ];
    let rows = results
        .summary
        .ach_points()
        .into_iter()
        .map(|p| {
            let base = is_base(results.config(p.series), p.parameter, p.value);
            vec![
                Cell::text(p.series),
                Cell::text(p.parameter),
                Cell::text(format!("{}", p.value)),
                Cell::text(if base { "base" } else { "" }),
                Cell::Count(Some(p.ach.runs as u64)),
                estimate(p.ach.d_mean),
                estimate(p.ach.m_cum),
                estimate(p.ach.pi_chg),
                Cell::Count(Some(p.ach.n_viol)),
            ]
        })
        .collect();
    Table {
        name: "c5_sensitivity".to_string(),
        title: "C5 sensitivity of ACH (ours, every point; mean ± CI95 over the point's runs)"
            .to_string(),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    }
}

fn violations_table(registry: &Registry, summary: &MatrixSummary) -> Table {
    let mut algorithms: Vec<String> = Vec::new();
    for series in &summary.series {
        for a in &series.algorithms {
            if !algorithms.contains(&a.name) {
                algorithms.push(a.name.clone());
            }
        }
    }
    if !summary.sensitivity.is_empty() && !algorithms.iter().any(|a| a == paper::ACH) {
        algorithms.push(paper::ACH.to_string());
    }
    let mut columns = vec![Column::key("Series", "series")];
    columns.extend(
        algorithms
            .iter()
            .map(|a| Column::value(short_name(registry, a), a)),
    );
    columns.push(Column::value("Total", "total"));
    let count_of = |list: &[AlgorithmSummary], name: &str| {
        list.iter().find(|a| a.name == name).map(|a| a.n_viol)
    };
    let mut rows = Vec::new();
    for series in &summary.series {
        let mut row = vec![Cell::text(&series.name)];
        row.extend(
            algorithms
                .iter()
                .map(|name| Cell::Count(count_of(&series.algorithms, name))),
        );
        row.push(Cell::Count(Some(
            series.algorithms.iter().map(|a| a.n_viol).sum(),
        )));
        rows.push(row);
    }
    for sweep in summary.sweep_series() {
        let points: Vec<AlgorithmSummary> = summary
            .sensitivity
            .iter()
            .filter(|p| p.series == sweep)
            .filter_map(|p| p.ach.clone())
            .collect();
        let total: u64 = points.iter().map(|a| a.n_viol).sum();
        let mut row = vec![Cell::text(format!("{sweep} (all points)"))];
        row.extend(algorithms.iter().map(|name| {
            if name == paper::ACH {
                Cell::Count(Some(total))
            } else {
                Cell::Count(None)
            }
        }));
        row.push(Cell::Count(Some(total)));
        rows.push(row);
    }
    Table {
        name: "violations".to_string(),
        title: format!(
            "Invariant violations, summed over runs (total over the matrix: {})",
            summary.total_violations
        ),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "algorithm",
            fixed: Some(("metric", "n_viol")),
        },
    }
}

fn all_algorithms_table(registry: &Registry, summary: &MatrixSummary) -> Table {
    let forwarded = summary
        .series
        .iter()
        .any(|s| s.algorithms.iter().any(|a| a.forwarded_fraction.is_some()));
    let mut columns = vec![
        Column::key("Series", "series"),
        Column::key("Algorithm", "algorithm"),
        numeric_key("Runs", "runs"),
        Column::value("D-bar", "d_mean"),
        Column::value("D-bar (true)", "d_true_mean"),
        Column::value("D_max", "d_max"),
        Column::value("M_cum", "m_cum"),
        Column::value("pi_chg", "pi_chg"),
        Column::value("n_viol", "n_viol"),
    ];
    if forwarded {
        columns.push(forwarded_column());
    }
    let mut rows = Vec::new();
    for series in &summary.series {
        for a in &series.algorithms {
            let mut cells = vec![
                Cell::text(&series.name),
                algorithm_cell(registry, &a.name),
                Cell::Count(Some(a.runs as u64)),
                estimate(a.d_mean),
                estimate(a.d_true_mean),
                estimate(a.d_max),
                estimate(a.m_cum),
                estimate(a.pi_chg),
                Cell::Count(Some(a.n_viol)),
            ];
            if forwarded {
                cells.push(optional_estimate(a.forwarded_fraction));
            }
            rows.push(cells);
        }
    }
    Table {
        name: "all_algorithms".to_string(),
        title: "Every algorithm in every series (ours; mean ± CI95 over runs)".to_string(),
        columns,
        rows,
        csv_shape: CsvShape::Melt {
            variable: "metric",
            fixed: None,
        },
    }
}
