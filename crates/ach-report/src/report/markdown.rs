//! REPORT.md: what was run, the paper's tables beside ours, the statistics, the C5 sweep,
//! violations and the figures, readable on its own.

use std::fmt::Write as _;

use super::builders::ReportTables;
use super::compare::{self, BAND_RULE};
use super::figures::Figure;
use super::load::Results;
use super::paper;
use super::tables::{Cell, Table, to_markdown};

/// Everything REPORT.md is made of.
pub struct ReportInput<'a> {
    /// The results.
    pub results: &'a Results,
    /// The tables.
    pub tables: &'a ReportTables,
    /// The figures written, in report order (name and caption).
    pub figures: &'a [FigureEntry],
    /// Figures not drawn, with the reason.
    pub missing_figures: &'a [String],
}

/// A figure as REPORT.md refers to it.
#[derive(Clone, Debug)]
pub struct FigureEntry {
    /// File stem.
    pub name: String,
    /// Caption.
    pub caption: String,
}

impl From<&Figure> for FigureEntry {
    fn from(figure: &Figure) -> FigureEntry {
        FigureEntry {
            name: figure.name.clone(),
            caption: figure.caption.clone(),
        }
    }
}

/// A heading for a figure, from its file stem.
fn figure_heading(name: &str) -> String {
    match name {
        "fig2_c1" => "Fig. 2 — C1: D-bar and M_cum per algorithm".to_string(),
        "fig3_c3" => "Fig. 3 — C3: D-bar and M_cum per algorithm, with violations".to_string(),
        "fig4_noise_gradient" => "Fig. 4 — ACH against A0 as the telemetry noise grows".to_string(),
        "frontier_c5" => "Cost/benefit frontier — C1 and every C5 point".to_string(),
        _ => match name.split_once('_') {
            Some(("boxplot", series)) => format!("{series} — per-run D-bar, boxplot"),
            Some(("ecdf", series)) => format!("{series} — per-run D-bar, ECDF"),
            Some(("traces", series)) => format!("{series} — D(t) and cumulative M_keys(t)"),
            _ => name.to_string(),
        },
    }
}

/// Number of cells flagged outside the band, and of cells with a band and a value.
fn flagged(table: &Table) -> (usize, usize) {
    let mut outside = 0;
    let mut banded = 0;
    for row in &table.rows {
        for cell in row {
            if let Cell::Verdict(verdict) = cell {
                if verdict.is_outside() {
                    outside += 1;
                }
                if verdict.tolerance().is_some()
                    || matches!(verdict, super::compare::Verdict::Within { .. })
                    || verdict.is_outside()
                {
                    banded += 1;
                }
            }
        }
    }
    (outside, banded)
}

fn table_section(out: &mut String, heading: &str, table: &Table, after: &str) {
    let _ = writeln!(out, "### {heading}\n");
    let _ = writeln!(out, "{}\n", table.title);
    out.push_str(&to_markdown(table));
    let _ = writeln!(
        out,
        "\nAlso as [`tables/{0}.tex`](tables/{0}.tex) and [`tables/{0}.csv`](tables/{0}.csv).\n",
        table.name
    );
    if !after.is_empty() {
        let _ = writeln!(out, "{after}\n");
    }
}

/// The note under a table with the Forwarded column.
const FORWARDED_NOTE: &str = "Forwarded is the fraction of the requests after the warm-up that were served by a node other than their token's owner (CH-BL forwards a request clockwise past nodes at their bound, see docs/ch-bl.md): its cost beside M_cum, which is 0 for it since it never moves a token. \"—\": the algorithm routes every request to its token's owner.";

/// Whether a table shows the fraction of forwarded requests.
fn has_forwarded_column(table: &Table) -> bool {
    table
        .columns
        .iter()
        .any(|c| c.csv_name == super::builders::FORWARDED_COLUMN)
}

/// Renders REPORT.md.
pub fn render_report(input: &ReportInput<'_>) -> String {
    let mut out = String::new();
    write_title(&mut out, input);
    write_summary(&mut out, input);
    write_what_was_run(&mut out, input);
    write_paper_tables(&mut out, input);
    write_statistics(&mut out, input);
    write_c5(&mut out, input);
    write_sweeps_and_cv(&mut out, input);
    write_violations_and_aggregates(&mut out, input);
    write_figures(&mut out, input);
    out
}

/// The title and what rendered the report.
fn write_title(out: &mut String, input: &ReportInput<'_>) {
    let summary = &input.results.summary;
    let _ = writeln!(out, "# ACH experiment matrix: report\n");
    let _ = writeln!(
        out,
        "Reproduction of the experiments of Batanov and Bolbakov, *Adaptive consistent hashing method with budgeted redistribution cost constraint* (2026). Rendered by `cargo xtask report` (xtask {}) from `summary.json` (format {}); modelling profile **{}**. Re-render at any time with `cargo xtask report --out <this folder>`; nothing is rerun.\n",
        env!("CARGO_PKG_VERSION"),
        summary.format_version,
        summary.profile.name(),
    );
}

/// The summary: the published cells outside their band, the violations and the figures.
fn write_summary(out: &mut String, input: &ReportInput<'_>) {
    let summary = &input.results.summary;
    let tables = input.tables;
    let checked = [
        &tables.table_2,
        &tables.table_3,
        &tables.text_values,
        &tables.table_4,
    ];
    let (outside, banded) = checked
        .iter()
        .map(|t| flagged(t))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let _ = writeln!(out, "## Summary\n");
    let _ = writeln!(
        out,
        "- Published cells compared: {banded} with an agreement band; **{outside} fall outside it** (marked **⚠ outside** below). A value the paper prints in two tables (C3 in Tables 2 and 3) counts twice."
    );
    let _ = writeln!(
        out,
        "- Invariant violations over every run and algorithm: **{}**.",
        summary.total_violations
    );
    let _ = writeln!(
        out,
        "- Figures: {} written{}.\n",
        input.figures.len(),
        if input.missing_figures.is_empty() {
            String::new()
        } else {
            format!(", {} not drawn (see the end)", input.missing_figures.len())
        }
    );
}

/// What was run: the series, the algorithms and each series' configuration.
fn write_what_was_run(out: &mut String, input: &ReportInput<'_>) {
    let results = input.results;
    let tables = input.tables;
    let _ = writeln!(out, "## What was run\n");
    out.push_str(&to_markdown(&tables.overview));
    // The algorithms the series ran, in registry order, as `A0 Static-W` (label, then name).
    let algorithms: Vec<String> = results
        .registry
        .iter()
        .map(|a| &a.info)
        .filter(|info| {
            results
                .configs
                .iter()
                .any(|c| c.algorithms.contains(&info.name))
        })
        .map(|info| {
            if info.label == info.name {
                info.name.clone()
            } else {
                format!("{} {}", info.label, info.name)
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "\nRun `r` of a series uses seed `seed_base + r * seed_stride` (see each configuration). Algorithms: {}. Tables also as [`tables/overview.tex`](tables/overview.tex) and [`tables/overview.csv`](tables/overview.csv).\n",
        algorithms.join(", ")
    );
    let _ = writeln!(out, "### Configuration of each series\n");
    for (config, text) in results.configs.iter().zip(&results.config_texts) {
        let _ = writeln!(
            out,
            "<details><summary>{} — {} (<code>config/{}.toml</code>)</summary>\n\n```toml\n{}\n```\n\n</details>\n",
            config.name,
            config.description,
            config.name,
            text.trim_end()
        );
    }
}

/// The paper's tables against ours.
fn write_paper_tables(out: &mut String, input: &ReportInput<'_>) {
    let results = input.results;
    let tables = input.tables;
    let _ = writeln!(out, "## The paper's tables against ours\n");
    let _ = writeln!(
        out,
        "Every published cell next to ours, with `difference = ours - paper`. **Agreement band:** {BAND_RULE} \"Band (±)\" gives the absolute half-width applied to each cell; \"n/a\" marks a cell without a band.\n"
    );
    table_section(out, "Table 2: ACH against A0", &tables.table_2, "");
    // Notes about the published simulation are printed only when our data show what they
    // explain: a flagged A3 cell in C3, a flagged cell of Table 4.
    let a3_flagged = compare::table_3_rows(&results.summary)
        .iter()
        .any(|row| row.algorithm == paper::BOUNDED_LOADS && row.verdict.is_outside());
    table_section(
        out,
        "Table 3: every algorithm in C3",
        &tables.table_3,
        if a3_flagged {
            "Known: the published code's A3 (Bounded-Loads) in C3 gives about D-bar 0.33 and M_cum 0.63, not the printed 0.275 and 0.750; our A3 follows the code, so those two cells are expected outside the band."
        } else {
            ""
        },
    );
    table_section(out, "Values quoted in the text", &tables.text_values, "");
}

/// The statistics: ACH against every baseline, every algorithm against A0, and the gap to the Oracle.
fn write_statistics(out: &mut String, input: &ReportInput<'_>) {
    let tables = input.tables;
    let _ = writeln!(out, "## Statistics: ACH against every baseline\n");
    table_section(
        out,
        "Wilcoxon and Cliff's delta",
        &tables.statistics,
        "Two-sided paired Wilcoxon signed-rank test on the per-run D-bar values (scipy defaults), Holm-adjusted across the comparisons of each series. Cliff's delta is the baseline's D-bar against ACH's: positive when ACH's is lower, as in the paper; CI95 by the effsize formulas; magnitude after Romano et al. (2006). \"D-bar change %\" is (ACH - baseline) / baseline. With n runs the exact two-sided p-value cannot go below 2 / 2^n (0.0625 for n = 5).",
    );

    if let Some(table) = &tables.statistics_a0 {
        let _ = writeln!(
            out,
            "## Statistics: every algorithm against Static-W (A0)\n"
        );
        table_section(
            out,
            "Wilcoxon and Cliff's delta against A0",
            table,
            "The same tests for every other algorithm against Static-W (A0), Holm-adjusted across the comparisons of each series: Cliff's delta is A0's D-bar against the algorithm's, positive when the algorithm's is lower; \"D-bar change %\" is (algorithm - A0) / A0. Series with `against_a0 = true` (or `--against-a0`) only.",
        );
    }

    if let Some(table) = &tables.oracle_gap {
        let _ = writeln!(out, "## How far from the Oracle\n");
        table_section(
            out,
            "Share of the A0-to-Oracle gap closed",
            table,
            "The Oracle plans, every step and without a budget, the assignment of tokens to serving nodes that minimises the peak expected utilisation with full knowledge (a heuristic limit, not a contender: it is in no comparison). 100 % is the Oracle's true D-bar, 0 % Static-W's; above 100 % an algorithm did better than the Oracle.",
        );
    }
}

/// C5: the sensitivity of ACH, against Table 4 and point by point.
fn write_c5(out: &mut String, input: &ReportInput<'_>) {
    let results = input.results;
    let tables = input.tables;
    let _ = writeln!(out, "## C5: sensitivity of ACH\n");
    table_section(
        out,
        "Table 4 against ours",
        &tables.table_4,
        format!(
            "A printed range row (e.g. kappa 0.05-0.20) is compared with every point of ours inside it. The paper's CI95 (D-bar {}, M_cum {}, pi_chg {}) widens the band. {}",
            paper::TABLE_4_CI95.d_mean,
            paper::TABLE_4_CI95.m_cum,
            paper::TABLE_4_CI95.pi_chg,
            if compare::table_4_rows(&results.summary)
                .iter()
                .any(|row| row.verdict.is_outside())
            {
                paper::TABLE_4_REMARK
            } else {
                ""
            }
        )
        .trim_end(),
    );
    table_section(out, "Every C5 point (ours)", &tables.sensitivity, "");
}

/// The sweeps beyond C5's form, and D-bar beside the coefficient of variation.
fn write_sweeps_and_cv(out: &mut String, input: &ReportInput<'_>) {
    let tables = input.tables;
    if !tables.sweeps.is_empty() {
        let _ = writeln!(out, "## Sweeps\n");
        for table in &tables.sweeps {
            let mut note = "One row per algorithm and point; the point gives each swept field's value (dotted path as in the series file). The figures `sweep_<series>_<field>` draw D-bar and M_cum against each field.".to_string();
            if has_forwarded_column(table) {
                note = format!("{note} {FORWARDED_NOTE}");
            }
            table_section(out, &table.name, table, &note);
        }
        for table in &tables.sweep_statistics {
            table_section(
                out,
                &table.name,
                table,
                "The tests of the statistics section at every point of the sweep, ACH against each baseline on the point's runs.",
            );
        }
    }

    // D-bar beside a size-independent imbalance (series with `report_cv = true`).
    if !tables.cv.is_empty() {
        let _ = writeln!(out, "## D-bar beside the coefficient of variation\n");
        for table in &tables.cv {
            table_section(
                out,
                &table.name,
                table,
                "CV true is the coefficient of variation std(l) / mean(l) of the noise-free loads over the nodes D counts (population std; 0 when the mean load is 0), per step, averaged over the steps after the warm-up like D-bar. Unlike D = max - mean it does not grow with the number of nodes when each node's load scatters by the same relative amount, so it separates the algorithms' balance from the metric's growth with size.",
            );
        }
    }
}

/// The violation counts and every algorithm's aggregates in every series.
fn write_violations_and_aggregates(out: &mut String, input: &ReportInput<'_>) {
    let tables = input.tables;
    let _ = writeln!(out, "## Violation counts\n");
    table_section(
        out,
        "Invariant violations",
        &tables.violations,
        "Counted every step of every run: the five ring invariants and the budget invariant. \"—\": the algorithm does not run in that series.",
    );

    // Everything else.
    let _ = writeln!(out, "## Every algorithm in every series\n");
    table_section(
        out,
        "All aggregates",
        &tables.all_algorithms,
        if has_forwarded_column(&tables.all_algorithms) {
            FORWARDED_NOTE
        } else {
            ""
        },
    );
}

/// The figures, and those not drawn.
fn write_figures(out: &mut String, input: &ReportInput<'_>) {
    let _ = writeln!(out, "## Figures\n");
    for figure in input.figures {
        let _ = writeln!(
            out,
            "### {}\n\n![{}](figures/{}.svg)\n\n{}\n",
            figure_heading(&figure.name),
            figure.name,
            figure.name,
            figure.caption
        );
    }
    if !input.missing_figures.is_empty() {
        let _ = writeln!(out, "### Figures not drawn\n");
        for note in input.missing_figures {
            let _ = writeln!(out, "- {note}");
        }
        out.push('\n');
    }
}
