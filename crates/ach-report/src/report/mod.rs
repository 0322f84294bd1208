//! Reports rendered from saved results: REPORT.md, tables (Markdown, LaTeX, CSV) and figures
//! (SVG), written into the results folder:
//!
//! - `DIR/REPORT.md`
//! - `DIR/tables/<name>.{md,csv}`, and `DIR/tables/<name>.tex` (a float-free `tabular`) with
//!   `DIR/tables/<name>_float.tex` (the same in a `table` or `table*` with caption and label)
//!   for each table or part of a long one, and `DIR/tables/preamble.tex` (the packages);
//! - `DIR/figures/<name>.{svg,pdf}` (the PDF a column wide, fonts embedded)
//!
//! Rendering is deterministic: the same results give byte-identical files.

mod builders;
mod compare;
pub mod docs;
mod error;
mod figures;
pub mod latex;
mod load;
mod markdown;
mod paper;
pub mod pdf;
mod tables;

#[cfg(test)]
mod tests;

pub use error::ReportError;
pub use figures::front_ends::time_series_figure_styled;
pub use figures::{
    Figure, FigureError, Marker, Style, Styles, TimeSeriesPanel, TimeSeriesSpec, bench_curve_svg,
    time_series_figure,
};
pub use tables::{Cell, Column, CsvShape, Table, to_markdown};

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ach_sim::Registry;

use crate::store::write_atomic;

/// Arguments of `cargo xtask report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The results folder of `cargo xtask experiments`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    write_atomic(path, text.as_bytes()).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes every table in its three formats into `out/tables`.
fn write_tables(out: &Path, tables: &builders::ReportTables) -> Result<(), ReportError> {
    let folder = out.join("tables");
    for table in tables.all() {
        write_file(
            &folder.join(format!("{}.md", table.name)),
            &format!("## {}\n\n{}", table.title, tables::to_markdown(table)),
        )?;
        for part in latex::render(table) {
            write_file(&folder.join(format!("{}.tex", part.name)), &part.tabular)?;
            write_file(
                &folder.join(format!("{}_float.tex", part.name)),
                &part.float,
            )?;
        }
        write_file(
            &folder.join(format!("{}.csv", table.name)),
            &tables::to_csv(table),
        )?;
    }
    write_file(&folder.join("preamble.tex"), latex::PREAMBLE)
}

/// Writes a figure as SVG and as PDF.
fn write_figure(folder: &Path, figure: &Figure, fonts: &pdf::PdfFonts) -> Result<(), ReportError> {
    write_file(&folder.join(format!("{}.svg", figure.name)), &figure.svg)?;
    let path = folder.join(format!("{}.pdf", figure.name));
    let bytes = pdf::svg_to_pdf(&figure.svg, fonts).map_err(|source| ReportError::Pdf {
        path: path.clone(),
        source,
    })?;
    write_atomic(&path, &bytes).map_err(|source| ReportError::Write { path, source })
}

/// Draws every figure from `results` (reading run records from `out` one series at a time)
/// and writes it into `out/figures`. Returns what REPORT.md lists, and the figures not drawn.
fn write_figures(
    out: &Path,
    results: &load::Results,
    styles: &Styles,
) -> Result<(Vec<markdown::FigureEntry>, Vec<String>), ReportError> {
    let folder = out.join("figures");
    let (summary_figures, mut missing) = figures::summary_figures(results, styles);
    let looks = figures::Looks {
        registry: &results.registry,
        styles,
    };
    let fonts = pdf::PdfFonts::load().map_err(|source| ReportError::Pdf {
        path: folder.clone(),
        source,
    })?;
    let mut entries = Vec::new();
    for figure in &summary_figures {
        write_figure(&folder, figure, &fonts)?;
        entries.push(markdown::FigureEntry::from(figure));
    }
    for series in &results.summary.series {
        let Some(config) = results.config(&series.name) else {
            missing.push(format!("{}: no configuration", series.name));
            continue;
        };
        let runs = load::load_series_runs(out, config)?;
        if runs.runs == 0 {
            missing.push(format!(
                "{}: per-series figures not drawn, no run records in runs/{}",
                series.name, series.name
            ));
            continue;
        }
        let drawn =
            figures::series_figures(looks, &runs).map_err(|source| ReportError::Figure {
                series: series.name.clone(),
                source,
            })?;
        for figure in &drawn {
            write_figure(&folder, figure, &fonts)?;
            entries.push(markdown::FigureEntry::from(figure));
        }
    }
    Ok((entries, missing))
}

/// Renders the report of the results in `out`: REPORT.md, tables and figures, for results of
/// the built-in algorithms.
pub fn render(out: &Path) -> Result<(), ReportError> {
    render_with(out, &Registry::built_in())
}

/// [`render`] for results whose algorithms are in `registry` (any other name is an error).
pub fn render_with(out: &Path, registry: &Registry) -> Result<(), ReportError> {
    render_styled(out, registry, &Styles::built_in())
}

/// [`render_with`], drawing the algorithms in the colours and markers of `styles` (a user's
/// binary gives its own algorithms a style there; any other gets the fallback palette).
pub fn render_styled(out: &Path, registry: &Registry, styles: &Styles) -> Result<(), ReportError> {
    let results = load::load_results(out, registry.clone())?;
    let report_tables = builders::build_tables(&results);
    write_tables(out, &report_tables)?;
    let (figure_entries, missing_figures) = write_figures(out, &results, styles)?;
    let report = markdown::render_report(&markdown::ReportInput {
        results: &results,
        tables: &report_tables,
        figures: &figure_entries,
        missing_figures: &missing_figures,
    });
    write_file(&out.join("REPORT.md"), &report)
}

/// `cargo xtask report`.
pub fn run(args: Args) -> ExitCode {
    match render(&args.out) {
        Ok(()) => {
            eprintln!("report: {}", args.out.join("REPORT.md").display());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
