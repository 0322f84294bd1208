//! Figures of other front ends: the live experiment's time series (one line per algorithm and
//! panel) and the curve of `cargo xtask bench-scale`.

use ach_sim::Registry;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{Frame, chart, draw_marker, padded_range, render_svg};
use super::frontier::SINGLE;
use super::style::{
    CAPTION_SIZE, FONT, Fill, GUIDE_GREY, LEGEND_HEIGHT, LegendEntry, Looks, Marker, NOTE_SIZE,
    Styles, draw_legend_strip, text_style,
};
use super::sweep::STACKED;
use super::{Figure, FigureError};

/// One panel of a [`time_series_figure`]: a y axis and one line of `(t, value)` points per
/// algorithm.
#[derive(Clone, Debug)]
pub struct TimeSeriesPanel {
    /// Description of the y axis.
    pub y_label: String,
    /// `(algorithm name, points)`, in legend order; every name must be in the registry.
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// What a [`time_series_figure`] shows.
#[derive(Clone, Debug)]
pub struct TimeSeriesSpec {
    /// File stem.
    pub name: String,
    /// Title above the panels.
    pub title: String,
    /// Caption in a report.
    pub caption: String,
    /// Description of the shared x axis.
    pub x_label: String,
    /// The panels, top to bottom.
    pub panels: Vec<TimeSeriesPanel>,
}

/// [`time_series_figure_styled`] with the built-in styles (and the fallback palette for the
/// registry's other algorithms).
pub fn time_series_figure(
    registry: &Registry,
    spec: &TimeSeriesSpec,
) -> Result<Figure, FigureError> {
    let styles = Styles::built_in();
    time_series_figure_styled(
        Looks {
            registry,
            styles: &styles,
        },
        spec,
    )
}

/// Draws panels stacked one above the other, one line per algorithm with its colour and a
/// marker every few points, in the style of the simulator's traces figure. Fails on an
/// algorithm name the registry does not know.
pub fn time_series_figure_styled(
    looks: Looks<'_>,
    spec: &TimeSeriesSpec,
) -> Result<Figure, FigureError> {
    let mut names: Vec<&str> = Vec::new();
    for panel in &spec.panels {
        for (name, _) in &panel.lines {
            looks
                .registry
                .info(name)
                .map_err(|e| FigureError::UnknownAlgorithm(e.to_string()))?;
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let x_end = spec
        .panels
        .iter()
        .flat_map(|p| p.lines.iter().flat_map(|(_, points)| points.iter()))
        .map(|(t, _)| *t)
        .fold(1.0, f64::max);
    let x_range = 0.0..x_end;
    let panel_height = 300;
    let height = panel_height * spec.panels.len().max(1) as u32 + 30;
    let svg = render_svg((STACKED.0, height + LEGEND_HEIGHT), |root| {
        let (plots, legend) = root.split_vertically(height);
        let plots = plots.titled(&spec.title, (FONT, CAPTION_SIZE))?;
        for (area, panel) in plots
            .split_evenly((spec.panels.len().max(1), 1))
            .iter()
            .zip(&spec.panels)
        {
            let y_range = padded_range(
                panel
                    .lines
                    .iter()
                    .flat_map(|(_, points)| points.iter().map(|(_, v)| *v))
                    .chain([0.0]),
                0.05,
            );
            let decimals = label_decimals(y_range.end - y_range.start);
            let y_format = |v: &f64| {
                if v.abs() >= 1000.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.decimals$}")
                }
            };
            let frame = Frame::new(
                &spec.x_label,
                &panel.y_label,
                &|v| format!("{v:.0}"),
                &y_format,
            );
            let mut chart = chart(area, x_range.clone(), y_range, &frame)?;
            for (name, points) in &panel.lines {
                let color = looks.color(name);
                chart.draw_series(std::iter::once(PathElement::new(
                    points.clone(),
                    color.stroke_width(2),
                )))?;
                let every = (points.len() / 8).max(1);
                for point in points.iter().step_by(every) {
                    draw_marker(&chart, *point, looks.marker(name), color, Fill::Solid, 4)?;
                }
            }
        }
        draw_legend_strip(&legend, &looks.line_legend(&names))
    })?;
    Ok(Figure {
        name: spec.name.clone(),
        caption: spec.caption.clone(),
        svg,
    })
}

/// Decimals for the tick labels of an axis spanning `span`: two, or as many more as ticks
/// about a tenth of the span apart need to differ (0.005 apart need three).
fn label_decimals(span: f64) -> usize {
    if !(span.is_finite() && span > 0.0) {
        return 2;
    }
    let needed = (-(span / 10.0).log10()).ceil();
    needed.clamp(2.0, 9.0) as usize
}

/// The curve of `cargo xtask bench-scale`: the seconds of one run against its tokens x steps,
/// both axes logarithmic. `scale` are the scale series' points `(tokens x steps, seconds)` in
/// increasing size, joined by a line; `c1` is C1's point, drawn on its own; the dashed line has
/// slope 1 through the smallest scale point: a run whose time grows as its tokens x steps stays
/// on it, one that grows faster bends above it.
pub fn bench_curve_svg(scale: &[(f64, f64)], c1: (f64, f64)) -> Result<String, FigureError> {
    let all: Vec<(f64, f64)> = scale.iter().copied().chain([c1]).collect();
    let (x_min, x_max) = all.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let (y_min, y_max) = all.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    if !(x_min > 0.0 && y_min > 0.0 && x_max.is_finite() && y_max.is_finite()) {
        return Err(FigureError::NotPositive);
    }
    let x_range = (x_min / 2.0..x_max * 2.0).log_scale();
    let y_range = (y_min / 2.0..y_max * 2.0).log_scale();
    let scale_color = RGBColor(0xD5, 0x5E, 0x00);
    let c1_color = RGBColor(0x00, 0x72, 0xB2);
    render_svg((SINGLE.0, SINGLE.1 + 20), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 20 - LEGEND_HEIGHT);
        let frame = Frame {
            caption: Some("One run's time against its tokens x steps"),
            ..Frame::new(
                "tokens x steps",
                "seconds per run (best repeat)",
                &|v| format!("{v:.0e}"),
                &|v| format!("{v:.2}"),
            )
        };
        let mut chart = chart(&plot, x_range, y_range, &frame)?;
        if let Some(&(x0, y0)) = scale.first() {
            // Slope 1 through the smallest point, labelled where it leaves the plot.
            let (x_end, y_end) = (x_max * 2.0, y0 * x_max * 2.0 / x0);
            chart.draw_series(DashedLineSeries::new(
                [(x_min / 2.0, y0 * x_min / 2.0 / x0), (x_end, y_end)],
                4,
                4,
                GUIDE_GREY.stroke_width(1),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                "dashed: proportional to tokens x steps",
                (x_min / 2.0 * 1.1, y_max * 1.8),
                text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
            )))?;
        }
        chart.draw_series(LineSeries::new(
            scale.iter().copied(),
            scale_color.stroke_width(2),
        ))?;
        for &point in scale {
            draw_marker(&chart, point, Marker::Circle, scale_color, Fill::Solid, 5)?;
        }
        draw_marker(&chart, c1, Marker::Square, c1_color, Fill::Solid, 5)?;
        let entries = [
            LegendEntry {
                label: "scale series (V = 100 x nodes)".to_string(),
                color: scale_color,
                marker: Some(Marker::Circle),
                fill: Fill::Solid,
                line: true,
            },
            LegendEntry {
                label: "C1".to_string(),
                color: c1_color,
                marker: Some(Marker::Square),
                fill: Fill::Solid,
                line: false,
            },
        ];
        draw_legend_strip(&legend, &entries)
    })
}

#[cfg(test)]
mod tests {
    use super::label_decimals;

    #[test]
    fn tick_labels_get_the_decimals_their_spacing_needs() {
        // Spans of 0.1 and more keep two decimals, as before.
        assert_eq!(label_decimals(0.3), 2);
        assert_eq!(label_decimals(0.1), 2);
        assert_eq!(label_decimals(250.0), 2);
        // A span of 0.04 has ticks 0.005 apart: three decimals tell them apart.
        assert_eq!(label_decimals(0.04), 3);
        assert_eq!(label_decimals(0.002), 4);
        assert_eq!(label_decimals(0.0), 2);
        assert_eq!(label_decimals(f64::NAN), 2);
    }
}
