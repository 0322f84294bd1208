//! Sweeps beyond C5's form: D-bar and M_cum (and, for a series with `report_cv = true`, the
//! true D-bar and the CV of the true loads) against each swept field.

use ach_sim::summary::{AlgorithmSummary, Interval, MatrixSummary, SensitivityPoint};

use super::chart::{Frame, chart, draw_band, padded_range, render_svg};
use super::style::{CAPTION_SIZE, FONT, LEGEND_HEIGHT, Looks, draw_legend_strip};
use super::{Drawn, Figure, FigureError};
use crate::report::load::TraceBand;

/// Size of a figure with two panels one above the other.
pub const STACKED: (u32, u32) = (640, 640);

/// Adds, for every general sweep, one figure per swept field (and one CV figure per field when
/// the sweep reports CVs).
pub fn add_figures(drawn: &mut Drawn, looks: Looks<'_>, summary: &MatrixSummary) {
    for (series, points) in summary.general_sweeps() {
        for parameter in swept_fields(&points) {
            let name = format!("sweep_{series}_{parameter}");
            drawn.keep(&name, sweep_figure(looks, series, &parameter, &points));
        }
        let with_cv = points
            .iter()
            .any(|p| p.algorithms().iter().any(|a| a.cv_true_mean.is_some()));
        if with_cv {
            for parameter in swept_fields(&points) {
                let name = format!("cv_{series}_{parameter}");
                drawn.keep(&name, cv_sweep_figure(looks, series, &parameter, &points));
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

fn sweep_figure(
    looks: Looks<'_>,
    series: &str,
    field: &str,
    points: &[&SensitivityPoint],
) -> Result<Figure, FigureError> {
    let spec = SweepFigureSpec {
        name: format!("sweep_{series}_{field}"),
        title: format!("{series}: D-bar and M_cum against {field}"),
        panels: &[
            (|a| Some(a.d_mean), "D-bar (fraction of load)"),
            (|a| Some(a.m_cum), "M_cum (fraction of key space)"),
        ],
        caption: format!(
            "Sweep {series}: D-bar (top) and M_cum (bottom) against {field}, one line per algorithm (mean over the point's runs) with its 95 % CI band."
        ),
    };
    banded_sweep_figure(looks, field, points, &spec)
}

/// D-bar (observed and true) and the coefficient of variation of the true loads against a
/// swept field, for a series with `report_cv = true`.
fn cv_sweep_figure(
    looks: Looks<'_>,
    series: &str,
    field: &str,
    points: &[&SensitivityPoint],
) -> Result<Figure, FigureError> {
    let spec = SweepFigureSpec {
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
    };
    banded_sweep_figure(looks, field, points, &spec)
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
    let mut names: Vec<&str> = Vec::new();
    for (_, p) in &slice {
        for a in p.algorithms() {
            if !names.contains(&a.name.as_str()) {
                names.push(&a.name);
            }
        }
    }
    let panels: Vec<(Vec<(&str, TraceBand)>, &str)> = spec
        .panels
        .iter()
        .map(|(metric, y_desc)| {
            let bands = names
                .iter()
                .map(|n| (*n, metric_band(&slice, n, *metric)))
                .collect();
            (bands, *y_desc)
        })
        .collect();
    // Every panel has the height of one of two stacked panels; a third adds to the figure.
    let panel_height = (STACKED.1 - 30) / 2;
    let plots_height = STACKED.1 + (panels.len() as u32).saturating_sub(2) * panel_height;
    let x_range = padded_range(slice.iter().map(|(x, _)| *x), 0.04);
    let others: Vec<String> = swept_fields(points)
        .into_iter()
        .filter(|f| f != field)
        .collect();
    let svg = render_svg((STACKED.0, plots_height + LEGEND_HEIGHT), |root| {
        let (plots, legend) = root.split_vertically(plots_height);
        let mut rest = plots.titled(&spec.title, (FONT, CAPTION_SIZE))?;
        let mut areas = Vec::new();
        for _ in 1..panels.len() {
            let (area, below) = rest.split_vertically(panel_height);
            areas.push(area);
            rest = below;
        }
        areas.push(rest);
        for (area, (bands, y_desc)) in areas.iter().zip(&panels) {
            let y_range = padded_range(
                bands
                    .iter()
                    .flat_map(|(_, b)| b.low.iter().chain(&b.high).copied()),
                0.05,
            );
            let y_range = y_range.start.max(0.0)..y_range.end;
            let frame = Frame {
                x_format: None,
                ..Frame::new(field, y_desc, &|v| format!("{v}"), &|v| format!("{v:.3}"))
            };
            let mut chart = chart(area, x_range.clone(), y_range, &frame)?;
            for (name, b) in bands.iter() {
                draw_band(&mut chart, b, looks.color(name), |v| v)?;
            }
        }
        draw_legend_strip(&legend, &looks.plain_line_legend(&names))
    })?;
    Ok(Figure {
        name: spec.name.clone(),
        caption: format!(
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
        ),
        svg,
    })
}
