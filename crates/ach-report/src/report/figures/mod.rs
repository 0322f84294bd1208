//! The report's figures, drawn as SVG with `plotters`.
//!
//! - [`style`]: fonts, each algorithm's colour and marker (the style table), the legend strip;
//! - [`chart`]: the one chart set-up every figure uses, the axes and the shared marks;
//! - one module per family: [`per_algorithm`] (Fig. 2 and 3), [`noise`] (Fig. 4),
//!   [`frontier`], [`sweep`] (D-bar, M_cum and CV against a swept field), [`series`] (boxplot,
//!   ECDF and traces of one series) and [`front_ends`] (the live experiment's time series and
//!   the benchmark's curve).
//!
//! Costs (M_cum) span decades (Dynamic-R near 30, ACH near 0.06, the static algorithms exactly
//! 0), so they are drawn on a log axis with a separate "0" lane below a break mark: a zero cost
//! stays visible instead of falling off a log axis.

pub mod chart;
pub mod front_ends;
pub mod frontier;
pub mod noise;
pub mod per_algorithm;
pub mod series;
pub mod style;
pub mod sweep;

pub use front_ends::{TimeSeriesPanel, TimeSeriesSpec, bench_curve_svg, time_series_figure};
pub use style::{Looks, Marker, Style, Styles};

use plotters::drawing::DrawingAreaErrorKind;

use super::load::{Results, SeriesRuns};

/// A rendered figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem: `figures/<name>.svg`.
    pub name: String,
    /// Caption in REPORT.md.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

/// Why a figure could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    /// plotters failed (in words: its error holds a backend error that is not `Clone`).
    #[error("drawing failed: {0}")]
    Drawing(String),
    /// A figure names an algorithm the registry does not know.
    #[error("{0}")]
    UnknownAlgorithm(String),
    /// A point cannot be drawn on a log axis.
    #[error("every point needs positive, finite token-steps and seconds")]
    NotPositive,
}

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for FigureError {
    fn from(error: DrawingAreaErrorKind<E>) -> FigureError {
        FigureError::Drawing(format!("{error:?}"))
    }
}

/// The message of a figure error, for callers that still pass errors on as text.
impl From<FigureError> for String {
    fn from(error: FigureError) -> String {
        error.to_string()
    }
}

/// The figures drawn from summary.json alone: Fig. 2, Fig. 3, Fig. 4, the frontier and the
/// sweeps. A figure whose series is missing is skipped and named in the returned list of notes.
pub fn summary_figures(results: &Results, styles: &Styles) -> (Vec<Figure>, Vec<String>) {
    let looks = Looks {
        registry: &results.registry,
        styles,
    };
    let mut drawn = Drawn::default();
    per_algorithm::add_figures(&mut drawn, looks, &results.summary);
    noise::add_figure(&mut drawn, looks, results);
    frontier::add_figure(&mut drawn, looks, &results.summary);
    sweep::add_figures(&mut drawn, looks, &results.summary);
    (drawn.figures, drawn.notes)
}

/// The three figures of one series: boxplot, ECDF and traces.
pub fn series_figures(looks: Looks<'_>, runs: &SeriesRuns) -> Result<Vec<Figure>, FigureError> {
    Ok(vec![
        series::boxplot_figure(looks, runs)?,
        series::ecdf_figure(looks, runs)?,
        series::traces_figure(looks, runs)?,
    ])
}

/// The figures drawn so far and the notes on those that were not.
#[derive(Default)]
pub struct Drawn {
    figures: Vec<Figure>,
    notes: Vec<String>,
}

impl Drawn {
    /// Keeps a drawn figure, or notes why `name` was not drawn.
    pub fn keep(&mut self, name: &str, result: Result<Figure, FigureError>) {
        match result {
            Ok(figure) => self.figures.push(figure),
            Err(e) => self.notes.push(format!("{name}: {e}")),
        }
    }

    /// Notes a figure that was not drawn.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }
}
