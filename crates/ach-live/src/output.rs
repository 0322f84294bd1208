//! The files of a live experiment: `summary.json`, `runs/<arm>-r<repeat>.json` (every step),
//! `REPORT.md` and `figures/*.svg`. Every number written comes from the measured runs and the
//! simulator's records.

use std::path::Path;

use ach_report::report::Figure;
use ach_report::report::{
    Cell, Column, CsvShape, Table, TimeSeriesPanel, TimeSeriesSpec, time_series_figure, to_markdown,
};

use crate::error::OutputError;
use crate::experiment::{ArmRun, LiveResults};
use crate::simulator::{self, SimArm};
use crate::summary::{ArmSummary, Comparison, compare, order_by, summarise};

fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| OutputError::Create {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| OutputError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The error of a figure that could not be drawn.
fn figure_error<E: std::fmt::Display>(name: &str) -> impl FnOnce(E) -> OutputError {
    let name = name.to_string();
    move |error| OutputError::Figure {
        name,
        message: error.to_string(),
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("results serialise") + "\n"
}

/// The arms side by side.
pub fn arms_table(arms: &[ArmSummary]) -> Table {
    let estimate = |a: &ArmSummary| Cell::Estimate {
        mean: Some(a.d_bar_true),
        ci95: a.d_bar_true_ci95,
        decimals: 4,
    };
    Table {
        name: "live_arms".into(),
        title: "Live arms (means over the repeats; ± the 95 % CI)".into(),
        columns: vec![
            Column::key("algorithm", "algorithm"),
            Column::value("D-bar true", "d_bar_true"),
            Column::value("D-bar simulator", "sim_d_bar_true"),
            Column::value("sim error", "sim_relative_error"),
            Column::value("CV true", "cv_bar_true"),
            Column::value("D-bar telemetry", "d_bar_telemetry"),
            Column::value("keys moved", "keys_moved"),
            Column::value("migration s", "migration_s"),
            Column::value("settle s", "settle_s"),
            Column::value("offered", "requests_offered"),
            Column::value("answered", "requests_answered"),
            Column::value("p50 ms", "p50_ms"),
            Column::value("p99 ms", "p99_ms"),
            Column::value("p99.9 ms", "p999_ms"),
            Column::value("p99 rebalancing ms", "p99_rebalancing_ms"),
            Column::value("A0 p99 same steps ms", "static_p99_rebalancing_ms"),
            Column::value("client errors", "client_errors"),
            Column::value("lost / stale keys", "lost_keys"),
        ],
        rows: arms
            .iter()
            .map(|a| {
                vec![
                    Cell::text(a.algorithm.clone()),
                    estimate(a),
                    Cell::number(a.sim_d_bar_true, 4),
                    Cell::Difference {
                        value: a.sim_relative_error,
                        decimals: 2,
                    },
                    Cell::number(Some(a.cv_bar_true), 3),
                    Cell::number(Some(a.d_bar_telemetry), 4),
                    Cell::number(Some(a.keys_moved), 0),
                    Cell::number(a.migration_s, 1),
                    Cell::number(a.settle_s, 1),
                    Cell::number(Some(a.requests_offered), 0),
                    Cell::number(Some(a.requests_answered), 0),
                    Cell::number(Some(a.p50_ms), 2),
                    Cell::number(Some(a.p99_ms), 2),
                    Cell::number(Some(a.p999_ms), 2),
                    Cell::number(a.p99_rebalancing_ms, 2),
                    Cell::number(a.static_p99_rebalancing_ms, 2),
                    Cell::Count(Some(a.client_errors)),
                    Cell::text(format!("{} / {}", a.lost_keys, a.stale_keys)),
                ]
            })
            .collect(),
        csv_shape: CsvShape::AsRows,
    }
}

fn comparisons_table(rows: &[Comparison]) -> Table {
    Table {
        name: "live_comparisons".into(),
        title: "ACH against each arm, paired by repeat (Holm across the arms of a metric)".into(),
        columns: vec![
            Column::key("metric", "metric"),
            Column::key("ACH against", "baseline"),
            Column::value("n", "n"),
            Column::value("mean difference", "mean_difference"),
            Column::value("Wilcoxon p", "wilcoxon_p"),
            Column::value("Holm p", "holm_p"),
            Column::value("Cliff's δ", "cliffs_delta"),
        ],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::text(r.metric.clone()),
                    Cell::text(r.baseline.clone()),
                    Cell::Count(Some(r.n as u64)),
                    Cell::Difference {
                        value: Some(r.mean_difference),
                        decimals: 4,
                    },
                    Cell::PValue(r.wilcoxon_p),
                    Cell::PValue(r.holm_p),
                    Cell::Difference {
                        value: r.cliffs_delta,
                        decimals: 2,
                    },
                ]
            })
            .collect(),
        csv_shape: CsvShape::AsRows,
    }
}

/// The per-phase outcomes of every arm, repeat 0.
fn phases_table(runs: &[&ArmRun]) -> Table {
    Table {
        name: "live_phases".into(),
        title: "Per phase (repeat 0)".into(),
        columns: vec![
            Column::key("algorithm", "algorithm"),
            Column::key("phase", "phase"),
            Column::value("steps", "steps"),
            Column::value("D true", "d_true"),
            Column::value("keys moved", "keys_moved"),
            Column::value("offered", "requests_offered"),
            Column::value("answered", "requests_answered"),
            Column::value("p50 ms", "p50_ms"),
            Column::value("p99 ms", "p99_ms"),
            Column::value("p99.9 ms", "p999_ms"),
            Column::value("client errors", "client_errors"),
        ],
        rows: runs
            .iter()
            .flat_map(|r| {
                r.phases.iter().map(|p| {
                    vec![
                        Cell::text(r.algorithm.clone()),
                        Cell::text(p.phase.clone()),
                        Cell::text(format!("{}–{}", p.steps.0, p.steps.1)),
                        Cell::number(Some(p.d_true).filter(|d| d.is_finite()), 4),
                        Cell::Count(Some(p.keys_moved)),
                        Cell::Count(Some(p.outcome.requests_offered)),
                        Cell::Count(Some(p.outcome.requests_answered)),
                        Cell::number(Some(p.outcome.p50_ms).filter(|v| v.is_finite()), 2),
                        Cell::number(Some(p.outcome.p99_ms).filter(|v| v.is_finite()), 2),
                        Cell::number(Some(p.outcome.p999_ms).filter(|v| v.is_finite()), 2),
                        Cell::Count(Some(p.outcome.client_errors)),
                    ]
                })
            })
            .collect(),
        csv_shape: CsvShape::AsRows,
    }
}

/// The name of the simulated line in the overlay figure.
const SIMULATED: &str = "simulated";

/// The registry the figures look their lines up in: the live registry and a `simulated` line.
fn figure_registry() -> ach_sim::Registry {
    let mut registry = simulator::registry();
    registry
        .register(
            ach_sim::algorithms::AlgorithmInfo::new(SIMULATED, SIMULATED),
            |config: &ach_sim::SeriesConfig| {
                let capacities = config.cluster.classes.iter().map(|c| c.capacity());
                Ok(Box::new(ach_baselines::StaticWt::new(capacities.collect())) as _)
            },
        )
        .expect("a new, valid name");
    registry
}

/// Points `(end of step in seconds, value)`.
fn points(values: impl Iterator<Item = (u32, f64)>, interval_s: f64) -> Vec<(f64, f64)> {
    values
        .filter(|(_, v)| v.is_finite())
        .map(|(t, v)| ((f64::from(t) + 1.0) * interval_s, v))
        .collect()
}

/// The figures: live `D_true(t)` and keys moved; live against simulated `D_true(t)` per arm;
/// the INFO composite's `D(t)`.
fn figures(results: &LiveResults, sim: &[SimArm]) -> Result<Vec<Figure>, OutputError> {
    let registry = figure_registry();
    let first: Vec<&ArmRun> = results.runs.iter().filter(|r| r.repeat == 0).collect();
    let interval = results.config.interval_ms as f64 / 1000.0;
    let live = TimeSeriesSpec {
        name: "live_d_true_and_keys_moved".into(),
        title: "Live cluster: D_true(t) and cumulative keys moved (repeat 0)".into(),
        caption: "Repeat 0: D_true(t), the spread of the true loads (the requests scheduled for the slots each master owned, over its measured service rate, through the simulator's composite), top; keys in slots that changed owner, cumulative, bottom.".into(),
        x_label: "t (s)".into(),
        panels: vec![
            TimeSeriesPanel {
                y_label: "D_true(t)".into(),
                lines: first
                    .iter()
                    .map(|r| (r.algorithm.clone(), points(r.steps.iter().map(|s| (s.t, s.d_true)), interval)))
                    .collect(),
            },
            TimeSeriesPanel {
                y_label: "keys moved (cumulative)".into(),
                lines: first
                    .iter()
                    .map(|r| (r.algorithm.clone(), points(r.steps.iter().map(|s| (s.t, s.keys_moved as f64)), interval)))
                    .collect(),
            },
        ],
    };
    let overlay = TimeSeriesSpec {
        name: "live_vs_simulated_d_true".into(),
        title: "D_true(t): live (repeat 0) against the calibrated simulator (run 0)".into(),
        caption: "One panel per arm: the live D_true(t) (the arm's colour) and the calibrated simulator's D_true(t) on the same scenario (grey), in the same unit.".into(),
        x_label: "t (s)".into(),
        panels: first
            .iter()
            .map(|r| {
                let simulated = sim
                    .iter()
                    .find(|s| s.repeat == 0 && s.algorithm == r.algorithm)
                    .map(|s| points(s.d_trace.iter().enumerate().map(|(t, d)| (t as u32, *d)), interval))
                    .unwrap_or_default();
                TimeSeriesPanel {
                    y_label: format!("{}: D_true(t)", r.algorithm),
                    lines: vec![
                        (r.algorithm.clone(), points(r.steps.iter().map(|s| (s.t, s.d_true)), interval)),
                        (SIMULATED.to_string(), simulated),
                    ],
                }
            })
            .collect(),
    };
    let telemetry = TimeSeriesSpec {
        name: "live_d_telemetry".into(),
        title: "Live cluster: D(t) of the INFO composite (repeat 0)".into(),
        caption: "Repeat 0: D(t) of the composite load the controllers steer by (cpu share of the quota, memory, p99 latency from each master's INFO, over its capacity weight).".into(),
        x_label: "t (s)".into(),
        panels: vec![TimeSeriesPanel {
            y_label: "D(t), INFO composite".into(),
            lines: first
                .iter()
                .map(|r| (r.algorithm.clone(), points(r.steps.iter().filter_map(|s| s.d_telemetry.map(|d| (s.t, d))), interval)))
                .collect(),
        }],
    };
    [live, overlay, telemetry]
        .iter()
        .map(|spec| time_series_figure(&registry, spec).map_err(figure_error(&spec.name)))
        .collect()
}

/// Writes every file into `results.config.out`; returns the arms' summaries.
pub fn write_all(results: &LiveResults, sim: &[SimArm]) -> Result<Vec<ArmSummary>, OutputError> {
    let out = &results.config.out;
    let arms = summarise(results, sim);
    let comparisons = compare(&arms);
    let calibration = crate::pace::of_results(results);
    let summary = serde_json::json!({
        "config": results.config,
        "server": results.server,
        "backend": results.backend,
        "steps": results.config.steps(),
        "warmup": results.config.warmup(),
        "cpu_limits": results.cpu_limits,
        "cpu_limits_note": results.cpu_limits_note,
        "load_average": { "before": results.load_average.0, "after": results.load_average.1 },
        "service_rates": results.service_rates,
        "warnings": results.warnings,
        "arms": arms,
        "comparisons": comparisons,
        "order": {
            "live": order_by(&arms, |a| Some(a.d_bar_true)),
            "simulator": order_by(&arms, |a| a.sim_d_bar_true),
        },
        "simulator": {
            // The series without its key table (five megabytes of the workload's keys, which
            // `simulator::key_table` rebuilds from the configuration).
            "series": ach_sim::SeriesConfig {
                key_table: None,
                ..simulator::series(&results.config, &results.service_rates, &calibration)
            },
            "keys": "live",
            "calibration": calibration,
            "arms": sim.iter().map(|s| serde_json::json!({
                "algorithm": s.algorithm, "repeat": s.repeat, "d_bar_true": s.d_bar,
                "keys_moved": s.keys_moved,
            })).collect::<Vec<_>>(),
        },
    });
    write(&out.join("summary.json"), &json(&summary))?;
    for run in &results.runs {
        let runs = out.join("runs");
        write(
            &runs.join(format!("{}-r{}.json", run.algorithm, run.repeat)),
            &json(run),
        )?;
        if !run.rebalance_log.is_empty() {
            write(
                &runs.join(format!("{}-r{}-rebalance.log", run.algorithm, run.repeat)),
                &run.rebalance_log,
            )?;
        }
    }
    let figures = figures(results, sim)?;
    for figure in &figures {
        write(
            &out.join("figures").join(format!("{}.svg", figure.name)),
            &figure.svg,
        )?;
    }
    write(
        &out.join("REPORT.md"),
        &crate::report::render(
            results,
            &arms,
            &comparisons,
            &figures.iter().collect::<Vec<_>>(),
        ),
    )?;
    Ok(arms)
}

/// The tables of REPORT.md, rendered.
pub(crate) fn tables_markdown(
    results: &LiveResults,
    arms: &[ArmSummary],
    comparisons: &[Comparison],
) -> (String, String, String) {
    let first: Vec<&ArmRun> = results.runs.iter().filter(|r| r.repeat == 0).collect();
    (
        to_markdown(&arms_table(arms)),
        if comparisons.is_empty() {
            String::new()
        } else {
            to_markdown(&comparisons_table(comparisons))
        },
        to_markdown(&phases_table(&first)),
    )
}
