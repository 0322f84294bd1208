//! The files `cargo xtask experiments` writes besides the run records, and the summary it
//! prints. Schemas: `docs/results.md`.

use std::fmt::Write as _;
use std::path::Path;

use ach_sim::summary::{AlgorithmSummary, Comparison, Interval, MatrixSummary};
use ach_sim::{RunRecord, SeriesConfig};
use serde::Serialize;

use crate::report::ReportError;
use crate::store::write_atomic;

/// Optional outputs.
pub struct Extras {
    /// Write the published simulation's per-run JSON and `C5/sensitivity.json`.
    pub reference_json: bool,
}

/// Timing of a matrix, kept apart from the results so that they stay byte-identical.
#[derive(Serialize)]
pub struct Timing {
    /// Wall time of the matrix (runs and summary), seconds.
    pub wall_seconds: f64,
    /// Worker threads.
    pub threads: usize,
    /// Runs computed by this invocation.
    pub runs_executed: usize,
    /// Runs reused from disk.
    pub runs_reused: usize,
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), ReportError> {
    let mut text = serde_json::to_string_pretty(value).expect("results serialise");
    text.push('\n');
    write_text(path, &text)
}

fn write_text(path: &Path, text: &str) -> Result<(), ReportError> {
    write_atomic(path, text.as_bytes()).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `summary.json`, the configuration of every series, and the optional files.
pub fn write_all(
    out: &Path,
    series: &[SeriesConfig],
    records: &[RunRecord],
    summary: &MatrixSummary,
    extras: &Extras,
) -> Result<(), ReportError> {
    write_json(&out.join("summary.json"), summary)?;
    for config in series {
        let path = out.join("config").join(format!("{}.toml", config.name));
        let text = toml::to_string(config).map_err(|e| ReportError::Malformed {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        write_text(&path, &text)?;
    }
    if extras.reference_json {
        for record in records.iter().filter(|r| r.point.is_none()) {
            let path = out
                .join(&record.series)
                .join(format!("run_{:03}.json", record.run_index));
            write_json(&path, &ReferenceRun(record))?;
        }
        for name in summary.sweep_series() {
            write_json(
                &out.join(name).join("sensitivity.json"),
                &ReferenceSensitivity {
                    summary,
                    series: name,
                },
            )?;
        }
    }
    Ok(())
}

/// Writes `timing.json`.
pub fn write_timing(out: &Path, timing: &Timing) -> Result<(), ReportError> {
    write_json(&out.join("timing.json"), timing)
}

/// A run in the published simulation's schema.
struct ReferenceRun<'a>(&'a RunRecord);

impl Serialize for ReferenceRun<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.0;
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("run_id", &r.run_index)?;
        map.serialize_entry("seed", &r.seed)?;
        map.serialize_entry("series", &r.series)?;
        // Timing lives in timing.json, so that results are byte-identical run to run.
        map.serialize_entry("elapsed", &0.0)?;
        map.serialize_entry("algorithms", &ReferenceAlgorithms(r))?;
        map.end()
    }
}

struct ReferenceAlgorithms<'a>(&'a RunRecord);

impl Serialize for ReferenceAlgorithms<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.algorithms.iter().map(|a| {
            let g = &a.aggregates;
            (
                a.name.as_str(),
                serde_json::json!({
                    "D_trace": a.d_trace,
                    "M_trace": a.m_trace,
                    "agg": {
                        "D_mean": g.d_mean,
                        "D_max": g.d_max,
                        "M_cum": g.m_cum,
                        "pi_chg": g.pi_chg,
                        "ell_max": g.d_max,
                    },
                    "violations": a.violations,
                    "n_violations": g.n_viol,
                }),
            )
        }))
    }
}

/// `sensitivity.json` of a sweep: parameter -> value -> statistics.
struct ReferenceSensitivity<'a> {
    summary: &'a MatrixSummary,
    series: &'a str,
}

impl Serialize for ReferenceSensitivity<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let points: Vec<_> = self
            .summary
            .ach_points()
            .into_iter()
            .filter(|p| p.series == self.series)
            .collect();
        let mut parameters: Vec<&str> = points.iter().map(|p| p.parameter).collect();
        parameters.dedup();
        serializer.collect_map(parameters.into_iter().map(|parameter| {
            let values: serde_json::Map<String, serde_json::Value> = points
                .iter()
                .filter(|p| p.parameter == parameter)
                .map(|p| {
                    let a = p.ach;
                    (
                        python_float(p.value),
                        serde_json::json!({
                            "value": p.value,
                            "D_mean": a.d_mean.mean,
                            "D_ci": a.d_mean.ci95,
                            "M_cum": a.m_cum.mean,
                            "M_ci": a.m_cum.ci95,
                            "pi_chg": a.pi_chg.mean,
                            "pi_ci": a.pi_chg.ci95,
                        }),
                    )
                })
                .collect();
            (parameter, values)
        }))
    }
}

/// A float as Python's `str` writes it (`0.05`, `1.0`), as the published sweep's keys are.
fn python_float(value: f64) -> String {
    let text = value.to_string();
    if value.is_finite() && !text.contains(['.', 'e', 'E']) {
        format!("{text}.0")
    } else {
        text
    }
}

fn interval(i: &Interval, digits: usize) -> String {
    match i.ci95 {
        Some(ci) => format!("{:.digits$} ± {:.digits$}", i.mean, ci),
        None => format!("{:.digits$}", i.mean),
    }
}

/// The table of algorithms (and ACH against each baseline) of a series or a sweep point.
fn write_algorithm_table(
    out: &mut String,
    algorithms: &[AlgorithmSummary],
    comparisons: &[Comparison],
) {
    // The forwarded fraction only when some algorithm forwards, so that other tables print as
    // before it existed.
    let forwarded = algorithms.iter().any(|a| a.forwarded_fraction.is_some());
    let mut header = format!(
        "  {:<14} {:>17} {:>17} {:>17} {:>8} {:>7}",
        "algorithm", "D-bar ± CI95", "D-bar true", "M_cum ± CI95", "pi_chg", "n_viol"
    );
    if forwarded {
        header.push_str(&format!(" {:>17}", "forwarded ± CI95"));
    }
    let _ = writeln!(out, "{header}");
    for a in algorithms {
        let mut line = format!(
            "  {:<14} {:>17} {:>17} {:>17} {:>8.4} {:>7}",
            a.name,
            interval(&a.d_mean, 4),
            interval(&a.d_true_mean, 4),
            interval(&a.m_cum, 3),
            a.pi_chg.mean,
            a.n_viol
        );
        if forwarded {
            let cell = a
                .forwarded_fraction
                .as_ref()
                .map_or("—".to_string(), |f| interval(f, 4));
            line.push_str(&format!(" {cell:>17}"));
        }
        let _ = writeln!(out, "{line}");
    }
    // "ACH vs Static-W": a column as wide as its longest entry, and at least 21 characters.
    let label = |c: &Comparison| format!("{} vs {}", c.algorithm_name(), c.baseline);
    let width = comparisons
        .iter()
        .map(|c| label(c).chars().count())
        .max()
        .unwrap_or(0)
        .max(21);
    for c in comparisons {
        let p = |v: Option<f64>| v.map_or("n/a".to_string(), |p| format!("{p:.2e}"));
        let _ = writeln!(
            out,
            "  {:<width$} D-bar {:+.1} %, Wilcoxon p = {} (Holm {}), Cliff's delta = {} ({})",
            label(c),
            c.reduction_percent,
            p(c.p_value),
            p(c.p_holm),
            c.cliffs_delta.map_or("n/a".into(), |d| format!("{d:.3}")),
            c.magnitude.as_deref().unwrap_or("n/a"),
        );
    }
}

/// The summary table printed at the end of a matrix.
pub fn render_summary_text(summary: &MatrixSummary) -> String {
    let mut out = String::new();
    for s in &summary.series {
        let runs = s.seeds.len();
        let _ = writeln!(
            out,
            "\n{} — {} ({runs} runs, profile {})",
            s.name,
            s.description,
            summary.profile.name()
        );
        let comparisons: Vec<Comparison> =
            s.comparisons.iter().chain(&s.against_a0).cloned().collect();
        write_algorithm_table(&mut out, &s.algorithms, &comparisons);
    }
    for p in &summary.sensitivity {
        // One-field points of ACH alone are C5's form: they go in the table below.
        let (algorithms, comparisons) = match (&p.all, &p.ach) {
            (Some(all), _) => (
                all.algorithms.clone(),
                all.comparisons
                    .iter()
                    .chain(&all.against_a0)
                    .cloned()
                    .collect(),
            ),
            (None, Some(ach)) if p.point.only().is_none() => (vec![ach.clone()], Vec::new()),
            _ => continue,
        };
        let _ = writeln!(
            out,
            "\n{} at {} ({} runs, profile {})",
            p.series,
            p.point.label(),
            algorithms.first().map_or(0, |a| a.runs),
            summary.profile.name()
        );
        write_algorithm_table(&mut out, &algorithms, &comparisons);
    }
    if !summary.ach_points().is_empty() {
        let _ = writeln!(
            out,
            "\nSensitivity of ACH (profile {})",
            summary.profile.name()
        );
        let _ = writeln!(
            out,
            "  {:<8} {:>7} {:>17} {:>17} {:>17}",
            "param", "value", "D-bar ± CI95", "M_cum ± CI95", "pi_chg ± CI95"
        );
        for p in summary.ach_points() {
            let _ = writeln!(
                out,
                "  {:<8} {:>7} {:>17} {:>17} {:>17}",
                p.parameter,
                p.value,
                interval(&p.ach.d_mean, 4),
                interval(&p.ach.m_cum, 3),
                interval(&p.ach.pi_chg, 4)
            );
        }
    }
    let _ = writeln!(
        out,
        "\nInvariant violations (five ring invariants and the budget invariant, every step of every run): {}",
        summary.total_violations
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_keyed_as_python_writes_them() {
        assert_eq!(python_float(0.05), "0.05");
        assert_eq!(python_float(0.1), "0.1");
        assert_eq!(python_float(1.0), "1.0");
        assert_eq!(python_float(0.005), "0.005");
    }
}
