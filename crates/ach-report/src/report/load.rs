//! Reading saved results: `summary.json`, `config/<series>.toml`, and the per-run records a
//! figure needs, reduced at once to what the figures draw (per-run D-bar, per-step quantiles)
//! so that a whole series' traces are never held longer than needed.

use std::path::{Path, PathBuf};

use ach_sim::summary::MatrixSummary;
use ach_sim::{Registry, RunRecord, SeriesConfig};

use super::error::{RUN_FIRST, ReportError};
use crate::store;

/// Everything the tables and REPORT.md are made from.
#[derive(Clone, Debug)]
pub struct Results {
    /// `summary.json`.
    pub summary: MatrixSummary,
    /// The configuration of every series in the summary (sweeps included), in summary order.
    pub configs: Vec<SeriesConfig>,
    /// The configuration files as written, for REPORT.md, in the same order.
    pub config_texts: Vec<String>,
    /// The algorithms: every name of the summary and of the configurations is registered.
    pub registry: Registry,
}

impl Results {
    /// The configuration of a series.
    pub fn config(&self, name: &str) -> Option<&SeriesConfig> {
        self.configs.iter().find(|c| c.name == name)
    }
}

/// Names of the series in a summary, plain series first, then sweeps, without repeats.
pub fn series_names(summary: &MatrixSummary) -> Vec<String> {
    let mut names: Vec<String> = summary.series.iter().map(|s| s.name.clone()).collect();
    for point in &summary.sensitivity {
        if !names.contains(&point.series) {
            names.push(point.series.clone());
        }
    }
    names
}

/// Checks that every algorithm the summary and the configurations name is in `registry`; the
/// error names the file, the field and the value.
fn check_algorithms(out: &Path, results: &Results) -> Result<(), ReportError> {
    let registry = &results.registry;
    let summary_path = out.join("summary.json");
    for series in &results.summary.series {
        for (k, algorithm) in series.algorithms.iter().enumerate() {
            registry
                .info(&algorithm.name)
                .map_err(|e| ReportError::Malformed {
                    path: summary_path.clone(),
                    detail: format!("series {}: algorithms[{k}].name: {e}", series.name),
                })?;
        }
        for (k, comparison) in series.comparisons.iter().enumerate() {
            registry
                .info(&comparison.baseline)
                .map_err(|e| ReportError::Malformed {
                    path: summary_path.clone(),
                    detail: format!("series {}: comparisons[{k}].baseline: {e}", series.name),
                })?;
        }
        for (k, comparison) in series.against_a0.iter().enumerate() {
            let named = comparison.algorithm.iter().chain([&comparison.baseline]);
            for name in named {
                registry.info(name).map_err(|e| ReportError::Malformed {
                    path: summary_path.clone(),
                    detail: format!("series {}: against_a0[{k}]: {e}", series.name),
                })?;
            }
        }
    }
    for config in &results.configs {
        for (k, name) in config.algorithms.iter().enumerate() {
            registry.info(name).map_err(|e| {
                let path = out.join("config").join(format!("{}.toml", config.name));
                ReportError::Malformed {
                    path,
                    detail: format!("algorithms[{k}]: {e}"),
                }
            })?;
        }
    }
    Ok(())
}

/// Reads `summary.json` and the configuration of every series it names; every algorithm they
/// name must be in `registry`.
pub fn load_results(out: &Path, registry: Registry) -> Result<Results, ReportError> {
    let summary_path = out.join("summary.json");
    let text = std::fs::read_to_string(&summary_path).map_err(|source| ReportError::Missing {
        path: summary_path.clone(),
        source,
    })?;
    let summary: MatrixSummary =
        serde_json::from_str(&text).map_err(|e| ReportError::Malformed {
            path: summary_path.clone(),
            detail: format!("not a summary of this toolkit: {e} — {RUN_FIRST}"),
        })?;
    let mut configs = Vec::new();
    let mut config_texts = Vec::new();
    for name in series_names(&summary) {
        let path = out.join("config").join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).map_err(|source| ReportError::Missing {
            path: path.clone(),
            source,
        })?;
        let config = SeriesConfig::from_toml(&text).map_err(|e| ReportError::Malformed {
            path: path.clone(),
            detail: format!("not a series configuration: {e}"),
        })?;
        configs.push(config);
        config_texts.push(text);
    }
    let results = Results {
        summary,
        configs,
        config_texts,
        registry,
    };
    check_algorithms(out, &results)?;
    Ok(results)
}

/// Quantiles of a quantity across runs at every step (or every window of steps).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceBand {
    /// Step of each point (the middle of its window).
    pub t: Vec<f64>,
    /// 25th percentile across runs.
    pub low: Vec<f64>,
    /// Median across runs.
    pub median: Vec<f64>,
    /// 75th percentile across runs.
    pub high: Vec<f64>,
}

/// What the per-series figures draw of one algorithm.
#[derive(Clone, Debug, PartialEq)]
pub struct AlgorithmRuns {
    /// Algorithm name.
    pub name: String,
    /// D-bar of every run, in run order.
    pub d_mean_per_run: Vec<f64>,
    /// D(t): quantiles across runs.
    pub d_trace: TraceBand,
    /// Cumulative M_keys(t) from the end of the warm-up: quantiles across runs.
    pub m_cumulative: TraceBand,
}

/// What the per-series figures draw of one series.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesRuns {
    /// Series name.
    pub name: String,
    /// Number of runs read.
    pub runs: usize,
    /// Steps excluded from the aggregates.
    pub warmup: u32,
    /// Scenario events worth marking on a time axis: (step, what happens).
    pub events: Vec<(u32, String)>,
    /// Every algorithm, in configuration order.
    pub algorithms: Vec<AlgorithmRuns>,
}

/// The largest number of points a trace keeps: longer traces are averaged over windows.
pub const MAX_TRACE_POINTS: usize = 400;

/// The `q`-quantile of sorted values (linear interpolation, numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = q * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let fraction = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * fraction
}

/// Per-step quantiles across `traces` (every trace the same length; shorter ones are cut to
/// the shortest), then averaged over windows so that at most [`MAX_TRACE_POINTS`] remain.
pub fn trace_band(traces: &[Vec<f64>]) -> TraceBand {
    let steps = traces.iter().map(Vec::len).min().unwrap_or(0);
    let mut per_step = TraceBand::default();
    let mut column = Vec::with_capacity(traces.len());
    for t in 0..steps {
        column.clear();
        column.extend(traces.iter().map(|trace| trace[t]));
        column.sort_by(f64::total_cmp);
        per_step.t.push(t as f64);
        per_step.low.push(quantile(&column, 0.25));
        per_step.median.push(quantile(&column, 0.5));
        per_step.high.push(quantile(&column, 0.75));
    }
    let window = steps.div_ceil(MAX_TRACE_POINTS).max(1);
    if window == 1 {
        return per_step;
    }
    let average = |values: &[f64]| -> Vec<f64> {
        values
            .chunks(window)
            .map(|chunk| chunk.iter().sum::<f64>() / chunk.len() as f64)
            .collect()
    };
    TraceBand {
        t: average(&per_step.t),
        low: average(&per_step.low),
        median: average(&per_step.median),
        high: average(&per_step.high),
    }
}

/// Cumulative sum of `m` from step `warmup` on (zero before), so that the last value is the
/// run's M_cum.
pub fn cumulative_after_warmup(m: &[f64], warmup: usize) -> Vec<f64> {
    let mut total = 0.0;
    m.iter()
        .enumerate()
        .map(|(t, value)| {
            if t >= warmup {
                total += value;
            }
            total
        })
        .collect()
}

/// The record files of a plain series, sorted by name.
fn record_files(out: &Path, series: &str) -> Result<Vec<PathBuf>, ReportError> {
    let folder = out.join("runs").join(series);
    let entries = std::fs::read_dir(&folder).map_err(|source| ReportError::Missing {
        path: folder.clone(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("run_") && n.ends_with(".bin"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads the records of a plain series and reduces them to what the figures draw.
pub fn load_series_runs(out: &Path, config: &SeriesConfig) -> Result<SeriesRuns, ReportError> {
    let files = record_files(out, &config.name)?;
    let mut records: Vec<RunRecord> = Vec::with_capacity(files.len());
    for path in &files {
        let bytes = std::fs::read(path).map_err(|source| ReportError::Read {
            path: path.clone(),
            source,
        })?;
        let record = store::decode(&bytes).ok_or_else(|| ReportError::Malformed {
            path: path.clone(),
            detail: "not a run record of this toolkit (truncated or another format) — rerun `cargo xtask experiments`".to_string(),
        })?;
        records.push(record);
    }
    Ok(reduce_records(config, &records))
}

/// Reduces the records of one series to what the figures draw.
pub fn reduce_records(config: &SeriesConfig, records: &[RunRecord]) -> SeriesRuns {
    let warmup = config.warmup as usize;
    let algorithms = config
        .algorithms
        .iter()
        .map(|name| {
            let runs: Vec<_> = records.iter().filter_map(|r| r.algorithm(name)).collect();
            let d_traces: Vec<Vec<f64>> = runs.iter().map(|a| a.d_trace.clone()).collect();
            let m_traces: Vec<Vec<f64>> = runs
                .iter()
                .map(|a| cumulative_after_warmup(&a.m_trace, warmup))
                .collect();
            AlgorithmRuns {
                name: name.clone(),
                d_mean_per_run: runs.iter().map(|a| a.aggregates.d_mean).collect(),
                d_trace: trace_band(&d_traces),
                m_cumulative: trace_band(&m_traces),
            }
        })
        .collect();
    SeriesRuns {
        name: config.name.clone(),
        runs: records.len(),
        warmup: config.warmup,
        events: scenario_events(config),
        algorithms,
    }
}

/// The degradations and churn of a series, as (step, label).
pub fn scenario_events(config: &SeriesConfig) -> Vec<(u32, String)> {
    let mut events: Vec<(u32, String)> = config
        .degradation
        .iter()
        .map(|d| (d.t, format!("degradation x{}", d.factor)))
        .collect();
    if let ach_sim::config::LoadProfile::StepPeriodic {
        high,
        step_at,
        periodic_from,
        amplitude,
        ..
    } = config.load
    {
        events.push((step_at, format!("load steps to {high} req/step")));
        events.push((
            periodic_from,
            format!("periodic load, amplitude {amplitude}"),
        ));
    }
    for churn in &config.churn {
        let mut parts = Vec::new();
        if !churn.remove.is_empty() {
            parts.push(format!("-{}", churn.remove.len()));
        }
        if !churn.add.is_empty() {
            parts.push(format!("+{}", churn.add.len()));
        }
        events.push((churn.t, format!("churn {} nodes", parts.join("/"))));
    }
    events.sort_by_key(|(t, _)| *t);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&sorted, 0.5), 2.5);
        assert_eq!(quantile(&sorted, 0.25), 1.75);
    }

    #[test]
    fn cumulative_cost_starts_after_the_warmup() {
        assert_eq!(
            cumulative_after_warmup(&[1.0, 1.0, 0.5, 0.25], 2),
            vec![0.0, 0.0, 0.5, 0.75]
        );
    }

    #[test]
    fn long_traces_are_averaged_over_windows() {
        let traces = vec![vec![1.0; 2000], vec![3.0; 2000]];
        let band = trace_band(&traces);
        assert_eq!(band.t.len(), MAX_TRACE_POINTS);
        assert_eq!(band.median[0], 2.0);
        assert_eq!(band.t[0], 2.0);
    }
}
