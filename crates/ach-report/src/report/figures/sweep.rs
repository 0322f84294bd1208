//! Sweeps beyond C5's form: D-bar and M_cum (and, for a series with `report_cv = true`, the
//! true D-bar and the CV of the true loads) against each swept field.

use ach_sim::summary::{AlgorithmSummary, Interval, MatrixSummary, SensitivityPoint};

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::chart::{
    Frame, TickedAxis, chart, decade_label, draw_band, draw_marker, padded_range, render_svg,
};
use super::style::{CAPTION_SIZE, FONT, Fill, LEGEND_HEIGHT, Looks, draw_legend_strip};
use super::{Drawn, Figure, FigureError};
use crate::report::load::TraceBand;

/// Size of a figure with two panels one above the other.
pub const STACKED: (u32, u32) = (640, 640);

/// Adds, for every general sweep, one figure per swept field (and one CV figure per field when
/// the sweep reports CVs).
pub fn add_figures(drawn: &mut Drawn, looks: Looks<'_>, summary: &MatrixSummary) {
    for (series, points) in summary.general_sweeps() {
        for parameter in swept_fields(&points) {
            let spec = SweepFigureSpec::d_bar_and_m_cum(series, &parameter);
            let figure = banded_sweep_figure(looks, &parameter, &points, &spec);
            drawn.keep(&spec.name, figure);
        }
        let with_cv = points
            .iter()
            .any(|p| p.algorithms().iter().any(|a| a.cv_true_mean.is_some()));
        if with_cv {
            for parameter in swept_fields(&points) {
                let spec = SweepFigureSpec::cv_of_true_loads(series, &parameter);
                let figure = banded_sweep_figure(looks, &parameter, &points, &spec);
                drawn.keep(&spec.name, figure);
            }
        }
    }
}

/// The swept fields of a sweep's points, in order, each once.
fn swept_fields(points: &[&SensitivityPoint]) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for p in points {
        for c in &p.point.coordinates {
            if !fields.contains(&c.parameter) {
                fields.push(c.parameter.clone());
            }
        }
    }
    fields
}

/// The points along `field` with every other swept field at its first value (a grid's slice;
/// in a one-at-a-time sweep, the points of that field), with the field's value.
fn slice_along<'a>(
    points: &[&'a SensitivityPoint],
    field: &str,
) -> Vec<(f64, &'a SensitivityPoint)> {
    let first_value = |name: &str| {
        points
            .iter()
            .flat_map(|p| &p.point.coordinates)
            .find(|c| c.parameter == name)
            .map(|c| c.value)
    };
    points
        .iter()
        .filter_map(|p| {
            let mut value = None;
            for c in &p.point.coordinates {
                if c.parameter == field {
                    value = Some(c.value);
                } else if Some(c.value) != first_value(&c.parameter) {
                    return None;
                }
            }
            value.map(|v| (v, *p))
        })
        .collect()
}

/// One panel of a sweep figure: a metric of an algorithm at a point (`None`: not drawn there)
/// and its axis label.
type SweepPanel = (fn(&AlgorithmSummary) -> Option<Interval>, &'static str);

/// What a sweep figure draws: its name, title, panels (stacked top to bottom) and the start
/// of its caption.
struct SweepFigureSpec<'a> {
    name: String,
    title: String,
    panels: &'a [SweepPanel],
    caption: String,
}

impl SweepFigureSpec<'static> {
    /// D-bar (top) and M_cum (bottom) against a swept field.
    fn d_bar_and_m_cum(series: &str, field: &str) -> SweepFigureSpec<'static> {
        SweepFigureSpec {
            name: format!("sweep_{series}_{field}"),
            title: format!("{series}: D-bar and M_cum against {field}"),
            panels: &[
                (|a| Some(a.d_mean), "D-bar (fraction of load)"),
                (|a| Some(a.m_cum), "M_cum (fraction of key space)"),
            ],
            caption: format!(
                "Sweep {series}: D-bar (top) and M_cum (bottom) against {field}, one line per algorithm (mean over the point's runs) with its 95 % CI band."
            ),
        }
    }

    /// D-bar (observed and true) and the coefficient of variation of the true loads against a
    /// swept field, for a series with `report_cv = true`.
    fn cv_of_true_loads(series: &str, field: &str) -> SweepFigureSpec<'static> {
        SweepFigureSpec {
            name: format!("cv_{series}_{field}"),
            title: format!("{series}: D-bar and CV of the true loads against {field}"),
            panels: &[
                (|a| Some(a.d_mean), "D-bar observed"),
                (|a| Some(a.d_true_mean), "D-bar true"),
                (|a| a.cv_true_mean, "CV of the true loads"),
            ],
            caption: format!(
                "Sweep {series}: observed D-bar (top), true D-bar (middle) and the coefficient of variation of the true loads (bottom, size-independent) against {field}, one line per algorithm (mean over the point's runs) with its 95 % CI band."
            ),
        }
    }
}

/// One band per algorithm and metric: mean with its 95 % CI, against the field's value.
fn metric_band(
    slice: &[(f64, &SensitivityPoint)],
    name: &str,
    metric: fn(&AlgorithmSummary) -> Option<Interval>,
) -> TraceBand {
    let mut band = TraceBand {
        t: Vec::new(),
        low: Vec::new(),
        median: Vec::new(),
        high: Vec::new(),
    };
    for (x, p) in slice {
        if let Some(i) = p
            .algorithms()
            .into_iter()
            .find(|a| a.name == name)
            .and_then(metric)
        {
            let ci = i.ci95.unwrap_or(0.0);
            band.t.push(*x);
            band.low.push(i.mean - ci);
            band.median.push(i.mean);
            band.high.push(i.mean + ci);
        }
    }
    band
}

/// Draws the panels of `spec` against `field`, one band per algorithm, legend underneath.
fn banded_sweep_figure(
    looks: Looks<'_>,
    field: &str,
    points: &[&SensitivityPoint],
    spec: &SweepFigureSpec<'_>,
) -> Result<Figure, FigureError> {
    let mut slice = slice_along(points, field);
    slice.sort_by(|a, b| a.0.total_cmp(&b.0));
    let names = algorithm_names(&slice);
    let panels = panel_bands(spec, &names, &slice);
    // Every panel has the height of one of two stacked panels; a third adds to the figure.
    let panel_height = (STACKED.1 - 30) / 2;
    let plots_height = STACKED.1 + (panels.len() as u32).saturating_sub(2) * panel_height;
    let x_axis = SweepAxis::fit(&slice.iter().map(|(x, _)| *x).collect::<Vec<_>>());
    let others: Vec<String> = swept_fields(points)
        .into_iter()
        .filter(|f| f != field)
        .collect();
    let svg = render_svg((STACKED.0, plots_height + LEGEND_HEIGHT), |root| {
        let (plots, legend) = root.split_vertically(plots_height);
        let plots = plots.titled(&spec.title, (FONT, CAPTION_SIZE))?;
        let areas = stacked_areas(plots, panels.len(), panel_height);
        for (area, (bands, y_desc)) in areas.iter().zip(&panels) {
            let panel = PanelBands {
                field,
                y_desc,
                bands,
            };
            draw_sweep_panel(area, &x_axis, &panel, looks)?;
        }
        draw_legend_strip(&legend, &looks.line_legend(&names))
    })?;
    Ok(Figure {
        name: spec.name.clone(),
        caption: sweep_caption(spec, &others),
        svg,
    })
}

/// The algorithms of the slice's points, in order of first appearance, each once.
fn algorithm_names<'a>(slice: &[(f64, &'a SensitivityPoint)]) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for (_, p) in slice {
        for a in p.algorithms() {
            if !names.contains(&a.name.as_str()) {
                names.push(&a.name);
            }
        }
    }
    names
}

/// The bands of every panel of `spec`, one per algorithm of `names`, with the panel's axis
/// label.
fn panel_bands<'a>(
    spec: &SweepFigureSpec<'a>,
    names: &[&'a str],
    slice: &[(f64, &SensitivityPoint)],
) -> Vec<(Vec<(&'a str, TraceBand)>, &'a str)> {
    spec.panels
        .iter()
        .map(|(metric, y_desc)| {
            let bands = names
                .iter()
                .map(|n| (*n, metric_band(slice, n, *metric)))
                .collect();
            (bands, *y_desc)
        })
        .collect()
}

/// Splits `plots` into `count` areas one above the other, each `panel_height` high but the
/// last, which takes the rest.
fn stacked_areas<'b>(
    plots: DrawingArea<SVGBackend<'b>, Shift>,
    count: usize,
    panel_height: u32,
) -> Vec<DrawingArea<SVGBackend<'b>, Shift>> {
    let mut rest = plots;
    let mut areas = Vec::new();
    for _ in 1..count {
        let (area, below) = rest.split_vertically(panel_height);
        areas.push(area);
        rest = below;
    }
    areas.push(rest);
    areas
}

/// What one panel of a sweep figure shows: the swept field, the y axis label and one band
/// per algorithm, along the field's values.
struct PanelBands<'a> {
    /// The swept field, the x axis.
    field: &'a str,
    /// The y axis label.
    y_desc: &'a str,
    /// One band per algorithm, by name.
    bands: &'a [(&'a str, TraceBand)],
}

/// Draws one panel: its y range fitted to the bands (from 0 at least), its bands placed on
/// `x_axis`, with the axis' own ticks when it has them.
fn draw_sweep_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    x_axis: &SweepAxis,
    panel: &PanelBands<'_>,
    looks: Looks<'_>,
) -> Result<(), FigureError> {
    let y_range = padded_range(
        panel
            .bands
            .iter()
            .flat_map(|(_, b)| b.low.iter().chain(&b.high).copied()),
        0.05,
    );
    let y_range = y_range.start.max(0.0)..y_range.end;
    let y_format = |v: &f64| format!("{v:.3}");
    let x_format = |v: &f64| x_axis.label(*v);
    let x_desc = x_axis.description(panel.field);
    let frame = Frame {
        x_format: (x_axis.ticks.is_some() || x_axis.integer)
            .then_some(&x_format as &dyn Fn(&f64) -> String),
        ..Frame::new(&x_desc, panel.y_desc, &x_format, &y_format)
    };
    let bands: Vec<(&str, TraceBand)> = panel
        .bands
        .iter()
        .map(|(name, band)| (*name, x_axis.place(band)))
        .collect();
    match &x_axis.ticks {
        Some(ticks) => {
            let axis = TickedAxis::new(x_axis.range.clone(), ticks.clone());
            sweep_panel(area, axis, y_range, &frame, &bands, looks)
        }
        None => sweep_panel(area, x_axis.range.clone(), y_range, &frame, &bands, looks),
    }
}

/// The figure's caption: the start from `spec`, then the other swept fields, if any, held at
/// their first value.
fn sweep_caption(spec: &SweepFigureSpec<'_>, others: &[String]) -> String {
    format!(
        "{}{}",
        spec.caption,
        if others.is_empty() {
            String::new()
        } else {
            format!(
                " The other swept fields ({}) are at their first value.",
                others.join(", ")
            )
        }
    )
}

/// The x axis of a sweep figure, fitted to the swept values: logarithmic when they are
/// positive and span two decades or more; ticks at the measured values when they are integers
/// (labelled as integers), at the decades on a log axis of other values, and plotters' own on
/// a linear axis of other values.
#[derive(Clone, Debug, PartialEq)]
struct SweepAxis {
    /// Whether positions are `log10` of the values.
    log: bool,
    /// Whether every value is an integer.
    integer: bool,
    /// The axis range, in positions.
    range: Range<f64>,
    /// Tick positions, when not plotters' own.
    ticks: Option<Vec<f64>>,
}

/// Values spanning at least this ratio (two decades) get a log axis.
const LOG_AXIS_RATIO: f64 = 100.0;

/// At most this many measured values get a tick each on a linear axis of integers.
const MAX_VALUE_TICKS: usize = 12;

impl SweepAxis {
    fn fit(values: &[f64]) -> SweepAxis {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let low = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let high = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log = !finite.is_empty() && low > 0.0 && high / low >= LOG_AXIS_RATIO;
        let integer = !finite.is_empty() && finite.iter().all(|v| v.fract() == 0.0);
        let position = |v: f64| if log { v.log10() } else { v };
        let range = padded_range(finite.iter().map(|v| position(*v)), 0.04);
        let mut distinct: Vec<f64> = finite.iter().map(|v| position(*v)).collect();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let ticks = if integer && (log || distinct.len() <= MAX_VALUE_TICKS) {
            Some(distinct)
        } else if log {
            let decades = range.start.ceil() as i32..=range.end.floor() as i32;
            Some(decades.map(f64::from).collect())
        } else {
            None
        };
        SweepAxis {
            log,
            integer,
            range,
            ticks,
        }
    }

    /// The axis description: the field, and "log" on a log axis.
    fn description(&self, field: &str) -> String {
        if self.log {
            format!("{field} (log)")
        } else {
            field.to_string()
        }
    }

    /// The tick label at a position.
    fn label(&self, position: f64) -> String {
        let value = if self.log {
            10f64.powf(position)
        } else {
            position
        };
        if self.integer {
            format!("{}", value.round() as i64)
        } else if self.log {
            decade_label(position.round() as i32)
        } else {
            format!("{value}")
        }
    }

    /// A band with its values along x turned into positions.
    fn place(&self, band: &TraceBand) -> TraceBand {
        let mut placed = band.clone();
        if self.log {
            placed.t = band.t.iter().map(|v| v.log10()).collect();
        }
        placed
    }
}

/// One panel of a sweep figure: a band per algorithm with a marker at every measured point.
fn sweep_panel<X>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    x_axis: X,
    y_range: Range<f64>,
    frame: &Frame<'_>,
    bands: &[(&str, TraceBand)],
    looks: Looks<'_>,
) -> Result<(), FigureError>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = chart(area, x_axis, y_range, frame)?;
    for (name, band) in bands {
        draw_band(&mut chart, band, looks.color(name), |v| v)?;
    }
    for (name, band) in bands {
        for (&x, &y) in band.t.iter().zip(&band.median) {
            draw_marker(
                &chart,
                (x, y),
                looks.marker(name),
                looks.color(name),
                Fill::Solid,
                4,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_values_over_decades_get_a_log_axis_ticked_at_each_value() {
        let axis = SweepAxis::fit(&[10.0, 30.0, 100.0, 300.0, 1000.0]);
        assert!(axis.log && axis.integer);
        let ticks = axis.ticks.clone().expect("ticks at the values");
        let labels: Vec<String> = ticks.iter().map(|t| axis.label(*t)).collect();
        assert_eq!(labels, ["10", "30", "100", "300", "1000"]);
        assert!(ticks.iter().all(|t| axis.range.contains(t)));
        assert_eq!(axis.description("cluster.nodes"), "cluster.nodes (log)");
    }

    #[test]
    fn fractions_from_zero_keep_a_linear_axis_with_plotters_ticks() {
        let axis = SweepAxis::fit(&[0.0, 0.025, 0.05, 0.15]);
        assert!(!axis.log && !axis.integer);
        assert_eq!(axis.ticks, None);
        assert_eq!(axis.description("noise.sigma"), "noise.sigma");
    }

    #[test]
    fn a_few_integers_on_a_narrow_span_are_ticked_as_integers() {
        let axis = SweepAxis::fit(&[2.0, 4.0, 8.0]);
        assert!(!axis.log && axis.integer);
        let labels: Vec<String> = axis
            .ticks
            .clone()
            .unwrap()
            .iter()
            .map(|t| axis.label(*t))
            .collect();
        assert_eq!(labels, ["2", "4", "8"]);
    }

    #[test]
    fn fractions_over_decades_are_ticked_at_the_decades() {
        let axis = SweepAxis::fit(&[0.001, 0.01, 0.1, 0.5]);
        assert!(axis.log && !axis.integer);
        let labels: Vec<String> = axis
            .ticks
            .clone()
            .unwrap()
            .iter()
            .map(|t| axis.label(*t))
            .collect();
        assert_eq!(labels, ["0.001", "0.01", "0.1"]);
    }
}
