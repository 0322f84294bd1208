//! The files of a live experiment: `summary.json`, `runs/<arm>-r<repeat>.json` (every step),
//! `REPORT.md` and `figures/*.svg`. Every number written comes from the measured runs and the
//! simulator's records.

use std::fmt::Write as _;
use std::path::Path;

use ach_report::report::{
    Cell, Column, CsvShape, Table, TimeSeriesPanel, TimeSeriesSpec, time_series_figure, to_markdown,
};
use ach_sim::algorithms::names;
use ach_stats::{Summary, WilcoxonOptions, cliffs_delta, wilcoxon};

use crate::error::OutputError;
use crate::experiment::{ArmRun, LiveResults};
use crate::simulator::{self, SimArm};

/// One arm averaged over the repeats, as `summary.json` lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmSummary {
    /// Algorithm name.
    pub algorithm: String,
    /// Mean D-bar over the repeats.
    pub d_bar: f64,
    /// Mean keys moved over the repeats.
    pub keys_moved: f64,
    /// Client errors, summed over the repeats.
    pub client_errors: u64,
    /// Keys missing or stale at the end, summed over the repeats.
    pub lost_keys: u64,
    /// Keys stale at the end (counted in `lost_keys` too), summed over the repeats.
    pub stale_keys: u64,
    /// Reads that saw another value than the last written, summed over the repeats.
    pub stale_reads: u64,
    /// Mean client p99 latency over the repeats, in milliseconds.
    pub p99_ms: f64,
    /// Mean client p50 latency over the repeats, in milliseconds.
    pub p50_ms: f64,
    /// Requests answered, summed over the repeats.
    pub requests: u64,
    /// The simulator's mean D-bar for the same algorithm and scenario.
    pub sim_d_bar: Option<f64>,
    /// The simulator's mean keys moved.
    pub sim_keys_moved: Option<f64>,
    /// D-bar of every repeat.
    pub d_bar_per_repeat: Vec<f64>,
}

/// Paired statistics of ACH against one other arm over the repeats (D-bar).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PairedRow {
    /// The other arm.
    pub against: String,
    /// Mean of ACH's D-bar minus the other's.
    pub mean_difference: f64,
    /// Wilcoxon signed-rank p-value (scipy's default options); `None` when it cannot be
    /// computed (too few repeats, all differences zero).
    pub wilcoxon_p: Option<f64>,
    /// Cliff's delta of ACH's D-bar against the other's (negative: ACH lower).
    pub cliffs_delta: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// The arms averaged over the repeats, in the configured order.
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
            ArmSummary {
                algorithm: arm.name().into(),
                d_bar: mean(runs.iter().map(|r| r.d_bar)),
                keys_moved: mean(runs.iter().map(|r| r.keys_moved as f64)),
                client_errors: runs.iter().map(|r| r.client_errors).sum(),
                lost_keys: runs.iter().map(|r| r.lost_keys + r.stale_keys).sum(),
                stale_keys: runs.iter().map(|r| r.stale_keys).sum(),
                stale_reads: runs.iter().map(|r| r.stale_reads).sum(),
                p99_ms: mean(runs.iter().map(|r| r.p99_ms)),
                p50_ms: mean(runs.iter().map(|r| r.p50_ms)),
                requests: runs.iter().map(|r| r.requests).sum(),
                sim_d_bar: (!sims.is_empty()).then(|| mean(sims.iter().map(|s| s.d_bar))),
                sim_keys_moved: (!sims.is_empty()).then(|| mean(sims.iter().map(|s| s.keys_moved))),
                d_bar_per_repeat: runs.iter().map(|r| r.d_bar).collect(),
            }
        })
        .collect()
}

/// ACH against every other arm, paired by repeat; empty with fewer than 2 repeats or no ACH.
pub fn paired(arms: &[ArmSummary]) -> Vec<PairedRow> {
    let Some(ach) = arms.iter().find(|a| a.algorithm == names::ACH) else {
        return Vec::new();
    };
    if ach.d_bar_per_repeat.len() < 2 {
        return Vec::new();
    }
    arms.iter()
        .filter(|a| a.algorithm != names::ACH)
        .map(|other| PairedRow {
            against: other.algorithm.clone(),
            mean_difference: mean(
                ach.d_bar_per_repeat
                    .iter()
                    .zip(&other.d_bar_per_repeat)
                    .map(|(a, b)| a - b),
            ),
            wilcoxon_p: wilcoxon(
                &ach.d_bar_per_repeat,
                &other.d_bar_per_repeat,
                &WilcoxonOptions::scipy_default(),
            )
            .ok()
            .map(|w| w.pvalue),
            cliffs_delta: cliffs_delta(&ach.d_bar_per_repeat, &other.d_bar_per_repeat)
                .ok()
                .map(|c| c.delta),
        })
        .collect()
}

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
pub fn arms_table(arms: &[ArmSummary], repeats: u32) -> Table {
    let estimate = |values: &[f64], decimals: usize| {
        let summary = Summary::of(values).ok();
        Cell::Estimate {
            mean: Some(mean(values.iter().copied())),
            ci95: summary.map(|s| s.ci95_half_width),
            decimals,
        }
    };
    Table {
        name: "live_arms".into(),
        title: format!("Live arms ({repeats} repeat(s); ± the 95 % CI over repeats)"),
        columns: vec![
            Column::key("algorithm", "algorithm"),
            Column::value("D-bar (live)", "d_bar"),
            Column::value("D-bar (simulator)", "sim_d_bar"),
            Column::value("keys moved (live)", "keys_moved"),
            Column::value("keys moved (simulator)", "sim_keys_moved"),
            Column::value("client errors", "client_errors"),
            Column::value("lost/stale keys", "lost_keys"),
            Column::value("requests answered", "requests"),
            Column::value("p50 ms", "p50_ms"),
            Column::value("p99 ms", "p99_ms"),
        ],
        rows: arms
            .iter()
            .map(|a| {
                vec![
                    Cell::text(a.algorithm.clone()),
                    if repeats > 1 {
                        estimate(&a.d_bar_per_repeat, 4)
                    } else {
                        Cell::number(Some(a.d_bar), 4)
                    },
                    Cell::number(a.sim_d_bar, 4),
                    Cell::number(Some(a.keys_moved), 0),
                    Cell::number(a.sim_keys_moved, 0),
                    Cell::Count(Some(a.client_errors)),
                    Cell::Count(Some(a.lost_keys)),
                    Cell::Count(Some(a.requests)),
                    Cell::number(Some(a.p50_ms), 2),
                    Cell::number(Some(a.p99_ms), 2),
                ]
            })
            .collect(),
        csv_shape: CsvShape::AsRows,
    }
}

fn paired_table(rows: &[PairedRow]) -> Table {
    Table {
        name: "live_paired".into(),
        title: "ACH against each arm, paired by repeat (D-bar)".into(),
        columns: vec![
            Column::key("ACH against", "against"),
            Column::value("mean ΔD-bar", "mean_difference"),
            Column::value("Wilcoxon p", "wilcoxon_p"),
            Column::value("Cliff's δ", "cliffs_delta"),
        ],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::text(r.against.clone()),
                    Cell::Difference {
                        value: Some(r.mean_difference),
                        decimals: 4,
                    },
                    Cell::PValue(r.wilcoxon_p),
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

/// Writes every file into `results.config.out`; returns the arms' summaries.
pub fn write_all(results: &LiveResults, sim: &[SimArm]) -> Result<Vec<ArmSummary>, OutputError> {
    let out = &results.config.out;
    let arms = summarise(results, sim);
    let pairs = paired(&arms);
    let summary = serde_json::json!({
        "config": results.config,
        "steps": results.config.steps(),
        "warmup": results.config.warmup(),
        "cpu_limits": results.cpu_limits,
        "cpu_limits_note": results.cpu_limits_note,
        "load_average": { "before": results.load_average.0, "after": results.load_average.1 },
        "arms": arms,
        "paired": pairs,
        "simulator": {
            "series": simulator::series(&results.config),
            "arms": sim.iter().map(|s| serde_json::json!({
                "algorithm": s.algorithm, "repeat": s.repeat, "d_bar": s.d_bar,
                "keys_moved": s.keys_moved,
            })).collect::<Vec<_>>(),
        },
    });
    write(&out.join("summary.json"), &json(&summary))?;
    for run in &results.runs {
        write(
            &out.join("runs")
                .join(format!("{}-r{}.json", run.algorithm, run.repeat)),
            &json(run),
        )?;
        if !run.rebalance_log.is_empty() {
            write(
                &out.join("runs")
                    .join(format!("{}-r{}-rebalance.log", run.algorithm, run.repeat)),
                &run.rebalance_log,
            )?;
        }
    }
    let registry = simulator::registry();
    let first: Vec<&ArmRun> = results.runs.iter().filter(|r| r.repeat == 0).collect();
    let interval = results.config.interval_ms as f64 / 1000.0;
    let live_figure = time_series_figure(
        &registry,
        &TimeSeriesSpec {
            name: "live_d_and_keys_moved".into(),
            title: "Live cluster: D(t) and cumulative keys moved (repeat 0)".into(),
            caption: "Live Redis Cluster, repeat 0: D(t) from the nodes' own INFO (top) and keys in slots that changed owner, cumulative (bottom), per arm.".into(),
            x_label: "t (s)".into(),
            panels: vec![
                TimeSeriesPanel {
                    y_label: "D(t) (composite load)".into(),
                    lines: first
                        .iter()
                        .map(|r| {
                            let points = r
                                .steps
                                .iter()
                                .filter_map(|s| s.d.map(|d| ((f64::from(s.t) + 1.0) * interval, d)))
                                .collect();
                            (r.algorithm.clone(), points)
                        })
                        .collect(),
                },
                TimeSeriesPanel {
                    y_label: "keys moved (cumulative)".into(),
                    lines: first
                        .iter()
                        .map(|r| {
                            let points = r
                                .steps
                                .iter()
                                .map(|s| ((f64::from(s.t) + 1.0) * interval, s.keys_moved as f64))
                                .collect();
                            (r.algorithm.clone(), points)
                        })
                        .collect(),
                },
            ],
        },
    )
    .map_err(figure_error("live_d_and_keys_moved"))?;
    let sim_first: Vec<&SimArm> = sim.iter().filter(|s| s.repeat == 0).collect();
    let sim_figure = time_series_figure(
        &registry,
        &TimeSeriesSpec {
            name: "simulator_d_and_keys_moved".into(),
            title: "Simulator, same scenario: D(t) and cumulative keys moved (run 0)".into(),
            caption: "The simulator on the live scenario's parameters, run 0: observed D(t) (top) and cumulative M_keys times the keys (bottom).".into(),
            x_label: "t (steps)".into(),
            panels: vec![
                TimeSeriesPanel {
                    y_label: "D(t) (fraction of load)".into(),
                    lines: sim_first
                        .iter()
                        .map(|s| {
                            let points = s
                                .d_trace
                                .iter()
                                .enumerate()
                                .map(|(t, d)| (t as f64 + 1.0, *d))
                                .collect();
                            (s.algorithm.clone(), points)
                        })
                        .collect(),
                },
                TimeSeriesPanel {
                    y_label: "keys moved (cumulative)".into(),
                    lines: sim_first
                        .iter()
                        .map(|s| {
                            let points = s
                                .keys_moved_trace
                                .iter()
                                .enumerate()
                                .map(|(t, k)| (t as f64 + 1.0, *k))
                                .collect();
                            (s.algorithm.clone(), points)
                        })
                        .collect(),
                },
            ],
        },
    )
    .map_err(figure_error("simulator_d_and_keys_moved"))?;
    for figure in [&live_figure, &sim_figure] {
        write(
            &out.join("figures").join(format!("{}.svg", figure.name)),
            &figure.svg,
        )?;
    }
    write(
        &out.join("REPORT.md"),
        &render_report(results, &arms, &pairs, &[&live_figure, &sim_figure]),
    )?;
    Ok(arms)
}

/// REPORT.md.
pub fn render_report(
    results: &LiveResults,
    arms: &[ArmSummary],
    pairs: &[PairedRow],
    figures: &[&ach_report::report::Figure],
) -> String {
    let config = &results.config;
    let mut text = String::new();
    let _ = writeln!(text, "# Live experiment: a real Redis Cluster\n");
    let _ = writeln!(
        text,
        "{} masters ({}), {} keys, {} s per arm in steps of {} ms ({} warm-up steps left out of D-bar), \
         {} client threads at {} requests/s before the load step, seed {}, {} repeat(s).\n",
        config.nodes,
        config
            .classes()
            .iter()
            .map(|c| format!("{c:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", "),
        config.keys,
        config.duration_s,
        config.interval_ms,
        config.warmup(),
        config.clients,
        config.rate,
        config.seed,
        config.repeats
    );
    match &results.cpu_limits_note {
        None => {
            let _ = writeln!(
                text,
                "CPU quotas: {} (period {} µs; a strong node gets {} CPU, medium 0.55 and weak 0.25 of that).\n",
                results.cpu_limits,
                crate::cgroup::PERIOD_US,
                config.cpu_per_strong_node
            );
        }
        Some(reason) => {
            let _ = writeln!(
                text,
                "**CPU quotas could not be set ({reason}).** Every node had the whole machine; the \
                 capacities were only declared (as weights), so the classes differ in name only.\n"
            );
        }
    }
    let _ = writeln!(
        text,
        "Machine load average (1, 5, 15 min): {} before, {} after.\n",
        results.load_average.0, results.load_average.1
    );
    let _ = writeln!(
        text,
        "## Arms side by side\n\n{}",
        to_markdown(&arms_table(arms, config.repeats))
    );
    if !pairs.is_empty() {
        let _ = writeln!(
            text,
            "## Paired statistics over the repeats\n\n{}",
            to_markdown(&paired_table(pairs))
        );
    }
    let _ = writeln!(text, "## Figures\n");
    for figure in figures {
        let _ = writeln!(
            text,
            "![{}](figures/{}.svg)\n\n{}\n",
            figure.name, figure.name, figure.caption
        );
    }
    let _ = writeln!(
        text,
        "## Live and simulator: what differs\n\n\
         - Units: live D(t) is the spread of the composite load (cpu share of the quota, memory, \
         p99 latency) each master reports in INFO, over its capacity weight; the simulator's is \
         the spread of offered requests over service capacity. Compare orders and ratios between \
         arms, not absolute values.\n\
         - The simulator has no hot-key phase (its Zipf popularity is fixed); the live workload \
         sends {:.0} % of the requests to {} keys of one medium node for a quarter of the run.\n\
         - redis-cli is simulated as Static-Wt (slots in proportion to the weights, once); live, \
         it moves slots as fast as it can, key by key, while the clients run.\n\
         - Live loads include the cost of the migrations themselves and of the telemetry queries; \
         a live step is a wall-clock interval, and a slot move takes real time.\n",
        config.workload(0).hot_share * 100.0,
        config.workload(0).hot_keys
    );
    let notes: Vec<String> = results
        .runs
        .iter()
        .flat_map(|r| {
            r.rebalancer_notes
                .iter()
                .chain(&r.error_samples)
                .map(move |n| format!("- {} (repeat {}): {n}", r.algorithm, r.repeat))
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(
            text,
            "## Rebalancer and client notes\n\n{}\n",
            notes.join("\n")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str, d: &[f64]) -> ArmSummary {
        ArmSummary {
            algorithm: name.into(),
            d_bar: mean(d.iter().copied()),
            keys_moved: 0.0,
            client_errors: 0,
            lost_keys: 0,
            stale_keys: 0,
            stale_reads: 0,
            p99_ms: 1.0,
            p50_ms: 0.5,
            requests: 10,
            sim_d_bar: None,
            sim_keys_moved: None,
            d_bar_per_repeat: d.to_vec(),
        }
    }

    #[test]
    fn ach_is_paired_with_every_other_arm_by_repeat() {
        let ach = arm("ACH", &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
        let a0 = arm("Static-W", &[0.2, 0.4, 0.5, 0.7, 0.8, 1.0]);
        let rows = paired(&[a0.clone(), ach.clone()]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].against, "Static-W");
        assert!((rows[0].mean_difference + 0.25).abs() < 1e-12);
        // Every difference negative, n = 6: the exact two-sided p is 2 / 64.
        assert_eq!(rows[0].wilcoxon_p, Some(2.0 / 64.0));
        assert!(rows[0].cliffs_delta.is_some_and(|d| d < 0.0));
        // One repeat: nothing to pair.
        assert!(paired(&[arm("ACH", &[0.1]), arm("Static-W", &[0.2])]).is_empty());
    }
}
