//! Figure 4: ACH against A0 as the telemetry noise grows (C4a to C4c), beside the paper's
//! Table 2.

use std::ops::Range;

use ach_sim::summary::SeriesSummary;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{Frame, LinearChart, chart, draw_marker, error_bar, padded_range, render_svg};
use super::per_algorithm::DOUBLE;
use super::style::{
    CAPTION_SIZE, FONT, Fill, LEGEND_HEIGHT, LegendEntry, Looks, Marker, NOTE_SIZE, SHADE_GREY,
    draw_legend_strip, text_style,
};
use super::{Drawn, Figure, FigureError};
use crate::report::load::Results;
use crate::report::paper;

/// The series of the noise gradient.
const NOISE_SERIES: [&str; 3] = ["C4a", "C4b", "C4c"];

/// One noise series: its sigma and its summary.
struct NoisePoint<'a> {
    sigma: f64,
    series: &'a SeriesSummary,
    eps_off: f64,
    note: String,
}

/// Adds Fig. 4, or notes that none of its series is in the results.
pub fn add_figure(drawn: &mut Drawn, looks: Looks<'_>, results: &Results) {
    let points = noise_points(results);
    if points.is_empty() {
        drawn.note(
            "fig4_noise_gradient: not drawn, none of C4a, C4b, C4c is in the results".to_string(),
        );
    } else {
        drawn.keep("fig4_noise_gradient", noise_figure(looks, &points));
    }
}

fn noise_points(results: &Results) -> Vec<NoisePoint<'_>> {
    let mut points: Vec<NoisePoint<'_>> = NOISE_SERIES
        .iter()
        .filter_map(|name| {
            let series = results.summary.series.iter().find(|s| s.name == *name)?;
            let config = results.config(name)?;
            let mut extras = Vec::new();
            if config.noise.lag > 0 {
                extras.push(format!("lag {}", config.noise.lag));
            }
            if config.noise.p_miss > 0.0 {
                extras.push(format!("p_miss {}", config.noise.p_miss));
            }
            Some(NoisePoint {
                sigma: config.noise.sigma,
                series,
                eps_off: config.ach.eps_off,
                note: if extras.is_empty() {
                    name.to_string()
                } else {
                    format!("{name} (+{})", extras.join(", "))
                },
            })
        })
        .collect();
    points.sort_by(|a, b| a.sigma.total_cmp(&b.sigma));
    points
}

/// The paper's Table 2 rows of the noise series, at their sigma.
type Published<'p> = Vec<(f64, &'p paper::PaperSeriesRow)>;

fn noise_figure(looks: Looks<'_>, points: &[NoisePoint<'_>]) -> Result<Figure, FigureError> {
    let eps_off = points[0].eps_off;
    let sigma_max = points.iter().map(|p| p.sigma).fold(eps_off, f64::max);
    let x_range = 0.0..sigma_max * 1.15;
    let published: Published<'_> = points
        .iter()
        .filter_map(|p| {
            paper::TABLE_2
                .iter()
                .find(|row| row.series == p.series.name)
                .map(|row| (p.sigma, row))
        })
        .collect();
    let svg = render_svg(DOUBLE, |root| {
        let (plots, legend) = root.split_vertically(DOUBLE.1 - LEGEND_HEIGHT);
        let plots = plots.titled(
            "Noisy telemetry: ACH against Static-W (A0)",
            (FONT, CAPTION_SIZE),
        )?;
        let (left, right) = plots.split_horizontally(DOUBLE.0 / 2);
        d_bar_panel(&left, looks, points, &published, &x_range)?;
        change_panel(&right, looks, points, &published, &x_range)?;
        draw_legend_strip(&legend, &legend_entries(looks, eps_off))
    })?;
    let names: Vec<String> = points.iter().map(|p| p.series.name.clone()).collect();
    Ok(Figure {
        name: "fig4_noise_gradient".to_string(),
        caption: format!(
            "Fig. 4 ({}): D-bar of ACH and A0 (left, mean with 95 % CI) and ACH's relative change of D-bar against A0 (right) as the telemetry noise sigma grows; filled markers are ours, hollow markers (drawn slightly to the right) the paper's Table 2. The grey region sigma > eps_off = {eps_off} lies outside ACH's applicability boundary: the noise exceeds the hysteresis band, so corrections chase noise.",
            names.join(", "),
        ),
        svg,
    })
}

/// The frame of both panels: sigma along x with two decimals.
fn sigma_frame<'a>(y_desc: &'a str, y_format: &'a dyn Fn(&f64) -> String) -> Frame<'a> {
    Frame {
        x_labels: Some(6),
        ..Frame::new(
            "telemetry noise σ (fraction of load)",
            y_desc,
            &|v| format!("{v:.2}"),
            y_format,
        )
    }
}

/// The left panel: D-bar of both algorithms against sigma, ours and the paper's.
fn d_bar_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    looks: Looks<'_>,
    points: &[NoisePoint<'_>],
    published: &Published<'_>,
    x_range: &Range<f64>,
) -> Result<(), FigureError> {
    let algorithms = [paper::STATIC_W, paper::ACH];
    let mut d_values = Vec::new();
    for p in points {
        for a in p
            .series
            .algorithms
            .iter()
            .filter(|a| algorithms.contains(&a.name.as_str()))
        {
            let ci = a.d_mean.ci95.unwrap_or(0.0);
            d_values.extend([a.d_mean.mean - ci, a.d_mean.mean + ci]);
        }
    }
    for (_, row) in published {
        d_values.extend([row.d_mean_ach, row.d_mean_static_w]);
    }
    let y_range = padded_range(d_values, 0.25);
    let y_format = |v: &f64| format!("{v:.2}");
    let frame = sigma_frame("D-bar (fraction of load)", &y_format);
    let mut chart = chart(area, x_range.clone(), y_range.clone(), &frame)?;
    let eps_off = points[0].eps_off;
    draw_applicability(&mut chart, eps_off, x_range.end, y_range.clone())?;
    for name in algorithms {
        let color = looks.color(name);
        let series: Vec<(f64, f64, f64)> = points
            .iter()
            .filter_map(|p| {
                let a = p.series.algorithms.iter().find(|a| a.name == name)?;
                Some((p.sigma, a.d_mean.mean, a.d_mean.ci95.unwrap_or(0.0)))
            })
            .collect();
        chart.draw_series(LineSeries::new(
            series.iter().map(|&(x, y, _)| (x, y)),
            color.stroke_width(2),
        ))?;
        for &(x, y, ci) in &series {
            chart.draw_series(error_bar(x, (y - ci, y + ci), x_range.end * 0.012, color))?;
            draw_marker(&chart, (x, y), looks.marker(name), color, Fill::Solid, 6)?;
        }
        for (sigma, row) in published {
            let value = if name == paper::ACH {
                row.d_mean_ach
            } else {
                row.d_mean_static_w
            };
            draw_marker(
                &chart,
                (sigma + x_range.end * 0.03, value),
                looks.marker(name),
                color,
                Fill::Hollow,
                5,
            )?;
        }
    }
    // Series names along the bottom, one row each so that long notes never collide; a note
    // near the right edge ends at its point instead of centring on it.
    let row_height = (y_range.end - y_range.start) * 0.055;
    for (index, p) in points.iter().enumerate() {
        let anchor = if p.sigma > x_range.end * 0.6 {
            HPos::Right
        } else {
            HPos::Center
        };
        let y = y_range.start + (y_range.end - y_range.start) * 0.03 + row_height * index as f64;
        chart.draw_series(std::iter::once(Text::new(
            p.note.clone(),
            (p.sigma, y),
            text_style(NOTE_SIZE, Pos::new(anchor, VPos::Bottom)),
        )))?;
    }
    Ok(())
}

/// The right panel: ACH's relative change of D-bar against A0, ours and the paper's.
fn change_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    looks: Looks<'_>,
    points: &[NoisePoint<'_>],
    published: &Published<'_>,
    x_range: &Range<f64>,
) -> Result<(), FigureError> {
    let ours: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            p.series
                .comparisons
                .iter()
                .find(|c| c.baseline == paper::STATIC_W)
                .map(|c| (p.sigma, c.reduction_percent))
        })
        .collect();
    let printed: Vec<(f64, f64)> = published
        .iter()
        .map(|(sigma, row)| (*sigma, row.reduction_percent))
        .collect();
    let low = ours.iter().chain(&printed).map(|p| p.1).fold(0.0, f64::min);
    let y_range = (low * 1.2).min(-5.0)..5.0;
    let y_format = |v: &f64| format!("{v:.0}");
    let frame = sigma_frame("D-bar change, ACH vs A0 (%)", &y_format);
    let mut chart = chart(area, x_range.clone(), y_range.clone(), &frame)?;
    draw_applicability(&mut chart, points[0].eps_off, x_range.end, y_range)?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 0.0), (x_range.end, 0.0)],
        BLACK.stroke_width(1),
    )))?;
    let color = looks.color(paper::ACH);
    let marker = looks.marker(paper::ACH);
    chart.draw_series(LineSeries::new(ours.iter().copied(), color.stroke_width(2)))?;
    for &(x, y) in &ours {
        draw_marker(&chart, (x, y), marker, color, Fill::Solid, 6)?;
    }
    for &(x, y) in &printed {
        draw_marker(
            &chart,
            (x + x_range.end * 0.03, y),
            marker,
            color,
            Fill::Hollow,
            5,
        )?;
    }
    Ok(())
}

/// Both algorithms (ours), the paper's marks and the shaded region.
fn legend_entries(looks: Looks<'_>, eps_off: f64) -> Vec<LegendEntry> {
    let mut entries = looks.line_legend(&[paper::STATIC_W, paper::ACH]);
    for entry in &mut entries {
        entry.label = format!("{} (ours)", entry.label);
    }
    entries.push(LegendEntry {
        label: "paper (Table 2)".to_string(),
        color: RGBColor(0x44, 0x44, 0x44),
        marker: Some(Marker::Circle),
        fill: Fill::Hollow,
        line: false,
    });
    entries.push(LegendEntry {
        label: format!("σ > ε_off = {eps_off} (outside applicability)"),
        color: SHADE_GREY,
        marker: Some(Marker::Square),
        fill: Fill::Solid,
        line: false,
    });
    entries
}

/// Shades the region `sigma > eps_off` and draws its boundary.
fn draw_applicability(
    chart: &mut LinearChart<'_, '_>,
    eps_off: f64,
    x_end: f64,
    y_range: Range<f64>,
) -> Result<(), FigureError> {
    chart.draw_series(std::iter::once(Rectangle::new(
        [(eps_off, y_range.start), (x_end, y_range.end)],
        SHADE_GREY.mix(0.25).filled(),
    )))?;
    chart.draw_series(DashedLineSeries::new(
        vec![(eps_off, y_range.start), (eps_off, y_range.end)],
        6,
        4,
        RGBColor(0x55, 0x55, 0x55).stroke_width(2),
    ))?;
    chart.draw_series(std::iter::once(Text::new(
        "σ > ε_off".to_string(),
        (
            eps_off + x_end * 0.015,
            y_range.end - (y_range.end - y_range.start) * 0.03,
        ),
        text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
    )))?;
    Ok(())
}
