//! The cost/benefit frontier: D-bar against M_cum for every algorithm of C1 and ACH at every
//! point of C5's one-at-a-time sweep.

use ach_sim::summary::MatrixSummary;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{
    Frame, LogZeroAxis, SvgChart, TickedAxis, chart, draw_marker, padded_range, render_svg,
};
use super::style::{
    Fill, GUIDE_GREY, LegendEntry, Looks, Marker, NOTE_SIZE, draw_legend_strip, text_style,
    text_width,
};
use super::{Drawn, Figure, FigureError};
use crate::report::paper;

/// Size of a one-panel figure, in pixels.
pub const SINGLE: (u32, u32) = (640, 420);

/// One point of the frontier.
struct FrontierPoint {
    label: String,
    m_cum: f64,
    d_mean: f64,
    color: RGBColor,
    marker: Marker,
    fill: Fill,
}

/// Adds the frontier, or notes that neither of its series is in the results.
pub fn add_figure(drawn: &mut Drawn, looks: Looks<'_>, summary: &MatrixSummary) {
    if summary.series.iter().any(|s| s.name == "C1") || !summary.ach_points().is_empty() {
        drawn.keep("frontier_c5", frontier_figure(looks, summary));
    } else {
        drawn.note("frontier_c5: not drawn, neither C1 nor C5 is in the results".to_string());
    }
}

/// The parameters ACH's one-at-a-time sweep points vary, in the order they first appear
/// (C5: `eps_on`, `kappa`, `tau`, `M_max`).
fn swept_parameters(summary: &MatrixSummary) -> Vec<&str> {
    let mut parameters: Vec<&str> = Vec::new();
    for p in summary.ach_points() {
        if !parameters.contains(&p.parameter) {
            parameters.push(p.parameter);
        }
    }
    parameters
}

/// One marker per swept parameter, by its place in `parameters` (C5's four get a circle, a
/// square, a triangle and a diamond), cycling past six.
fn parameter_marker(parameters: &[&str], parameter: &str) -> Marker {
    const MARKERS: [Marker; 6] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
        Marker::Star,
        Marker::Cross,
    ];
    let index = parameters.iter().position(|&p| p == parameter).unwrap_or(0);
    MARKERS[index % MARKERS.len()]
}

/// The points: sweep points first, so that the C1 markers are drawn on top of them.
fn frontier_points(looks: Looks<'_>, summary: &MatrixSummary) -> Vec<FrontierPoint> {
    let mut points = Vec::new();
    let parameters = swept_parameters(summary);
    for p in summary.ach_points() {
        points.push(FrontierPoint {
            label: format!("{} {}", p.parameter, p.value),
            m_cum: p.ach.m_cum.mean,
            d_mean: p.ach.d_mean.mean,
            color: looks.color(paper::ACH),
            marker: parameter_marker(&parameters, p.parameter),
            fill: Fill::Hollow,
        });
    }
    if let Some(c1) = summary.series.iter().find(|s| s.name == "C1") {
        for a in &c1.algorithms {
            points.push(FrontierPoint {
                label: format!("{} (C1)", looks.short(&a.name)),
                m_cum: a.m_cum.mean,
                d_mean: a.d_mean.mean,
                color: looks.color(&a.name),
                marker: looks.marker(&a.name),
                fill: Fill::Solid,
            });
        }
    }
    points
}

fn frontier_figure(looks: Looks<'_>, summary: &MatrixSummary) -> Result<Figure, FigureError> {
    let points = frontier_points(looks, summary);
    let parameters = swept_parameters(summary);
    let axis = LogZeroAxis::fit(&points.iter().map(|p| p.m_cum).collect::<Vec<_>>());
    let x_axis = axis.range();
    let y_range = padded_range(points.iter().map(|p| p.d_mean), 0.12);
    let mut shared_labels: Vec<String> = Vec::new();
    let svg = render_svg((SINGLE.0, SINGLE.1 + 60), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 60 - 76);
        let x_format = |v: &f64| axis.label(*v);
        let frame = Frame {
            caption: Some("Cost against benefit: C1 algorithms and every C5 point"),
            ..Frame::new(
                "M_cum (fraction of key space, log; 0 in its own lane)",
                "D-bar (fraction of load)",
                &x_format,
                &|v| format!("{v:.3}"),
            )
        };
        let mut chart = chart(&plot, axis.ticked(), y_range.clone(), &frame)?;
        let break_x = axis.break_position();
        chart.draw_series(DashedLineSeries::new(
            vec![(break_x, y_range.start), (break_x, y_range.end)],
            4,
            4,
            GUIDE_GREY.stroke_width(1),
        ))?;
        // Points that land on the same pixel share one label.
        let mut groups: Vec<(f64, f64, Vec<String>)> = Vec::new();
        for p in &points {
            let x = axis.position(p.m_cum);
            draw_marker(&chart, (x, p.d_mean), p.marker, p.color, p.fill, 6)?;
            let pixel = chart.backend_coord(&(x, p.d_mean));
            match groups.iter_mut().find(|(gx, gy, _)| {
                let other = chart.backend_coord(&(*gx, *gy));
                (other.0 - pixel.0).abs() <= 6 && (other.1 - pixel.1).abs() <= 6
            }) {
                Some(group) => group.2.push(p.label.clone()),
                None => groups.push((x, p.d_mean, vec![p.label.clone()])),
            }
        }
        let bounds = PlotBounds {
            left: chart.backend_coord(&(x_axis.start, y_range.start)).0,
            right: chart.backend_coord(&(x_axis.end, y_range.start)).0,
            top: chart.backend_coord(&(x_axis.start, y_range.end)).1,
            bottom: chart.backend_coord(&(x_axis.start, y_range.start)).1,
        };
        draw_labels(&plot, &chart, &groups, bounds, &mut shared_labels)?;
        let mut entries: Vec<LegendEntry> = Vec::new();
        if let Some(c1) = summary.series.iter().find(|s| s.name == "C1") {
            entries.extend(
                looks.legend(
                    &c1.algorithms
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>(),
                ),
            );
        }
        for &parameter in &parameters {
            entries.push(LegendEntry {
                label: format!("{}, C5 {parameter}", looks.short(paper::ACH)),
                color: looks.color(paper::ACH),
                marker: Some(parameter_marker(&parameters, parameter)),
                fill: Fill::Hollow,
                line: false,
            });
        }
        draw_legend_strip(&legend, &entries)
    })?;
    Ok(Figure {
        name: "frontier_c5".to_string(),
        caption: format!(
            "Cost/benefit frontier (not in the paper): D-bar against M_cum for every algorithm in C1 (filled, mean over the C1 runs) and ACH at every C5 sweep point (hollow, one shape per parameter, mean over the point's runs); points on the same spot share a label. Lower left is better: less imbalance for less key movement.{}",
            shared_labels
                .iter()
                .enumerate()
                .map(|(k, text)| format!(" ({}) {text}.", k + 1))
                .collect::<String>()
        ),
        svg,
    })
}

/// The plotting area's edges in pixels.
#[derive(Clone, Copy)]
struct PlotBounds {
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
}

/// Places one label per group of coinciding points: beside its point where there is room and
/// no other point is nearer, else further away with a leader line. A group of more than two
/// points gets a numbered reference to the caption, whose text is pushed to `shared_labels`.
fn draw_labels(
    plot: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    chart: &SvgChart<'_, '_, TickedAxis, plotters::coord::types::RangedCoordf64>,
    groups: &[(f64, f64, Vec<String>)],
    bounds: PlotBounds,
    shared_labels: &mut Vec<String>,
) -> Result<(), FigureError> {
    let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
    let pixels: Vec<(i32, i32)> = groups
        .iter()
        .map(|(x, y, _)| chart.backend_coord(&(*x, *y)))
        .collect();
    // Markers are obstacles for labels too.
    for &(px, py) in &pixels {
        placed.push((px - 7, py - 7, 14, 14));
    }
    for (&(px, py), (_, _, labels)) in pixels.iter().zip(groups) {
        let text = if labels.len() > 2 {
            shared_labels.push(compress_labels(labels));
            format!(
                "{} points, see caption ({})",
                labels.len(),
                shared_labels.len()
            )
        } else {
            compress_labels(labels)
        };
        let width = text_width(&text, NOTE_SIZE);
        let height = NOTE_SIZE as i32;
        // Beside the point first, then ever further above and below, right before left.
        let mut candidates = Vec::new();
        for step in [0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5] {
            let top = py - height / 2 + step * (height + 2);
            candidates.push((px + 10, top, HPos::Left));
            candidates.push((px - 10 - width, top, HPos::Left));
        }
        // Further away, joined to the point by a leader line, for crowded spots.
        let mut far = Vec::new();
        for step in [-2, 2, -3, 3, -4, 4] {
            let top = py - height / 2 + step * (height + 2);
            far.push((px + 45, top, HPos::Left));
            far.push((px - 45 - width, top, HPos::Left));
        }
        let free = |left: i32, top: i32| {
            left + width <= bounds.right
                && left >= bounds.left
                && top >= bounds.top
                && top + height <= bounds.bottom
                && !placed.iter().any(|&(l, t, w, h)| {
                    left < l + w && l < left + width && top < t + h && t < top + height
                })
        };
        // A label must sit nearer its own point than any other point, or it would be read as
        // the other point's label.
        let unambiguous = |left: i32, top: i32| {
            let anchor_x = if left > px { left } else { left + width };
            let anchor_y = top + height / 2;
            let distance = |(x, y): (i32, i32)| {
                let (dx, dy) = (f64::from(x - anchor_x), f64::from(y - anchor_y));
                dx.hypot(dy)
            };
            let own = distance((px, py));
            pixels
                .iter()
                .filter(|&&other| other != (px, py))
                .all(|&other| distance(other) > own)
        };
        let chosen = candidates
            .iter()
            .find(|(left, top, _)| free(*left, *top) && unambiguous(*left, *top))
            .or_else(|| far.iter().find(|(left, top, _)| free(*left, *top)))
            .or_else(|| candidates.iter().find(|(left, top, _)| free(*left, *top)))
            .unwrap_or(&candidates[0]);
        placed.push((chosen.0, chosen.1, width, height));
        // A label moved away from its point gets a leader line back to it.
        if (chosen.1 + height / 2 - py).abs() > height / 2 || (chosen.0 - px).abs() > 40 {
            let end_x = if chosen.0 > px {
                chosen.0 - 2
            } else {
                chosen.0 + width + 2
            };
            plot.draw(&PathElement::new(
                vec![(px, py), (end_x, chosen.1 + height / 2)],
                GUIDE_GREY.stroke_width(1),
            ))?;
        }
        plot.draw(&Text::new(
            text,
            (chosen.0, chosen.1 + height / 2),
            text_style(NOTE_SIZE, Pos::new(chosen.2, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Joins labels of coinciding points: `kappa 0.05, 0.1, 0.15` rather than repeating the name.
fn compress_labels(labels: &[String]) -> String {
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for label in labels {
        let (name, value) = label.split_once(' ').unwrap_or((label.as_str(), ""));
        match parts.iter_mut().find(|(n, _)| n == name) {
            Some((_, values)) if !value.is_empty() => values.push(value.to_string()),
            _ => parts.push((
                name.to_string(),
                if value.is_empty() {
                    Vec::new()
                } else {
                    vec![value.to_string()]
                },
            )),
        }
    }
    let text: Vec<String> = parts
        .into_iter()
        .map(|(name, values)| {
            if values.is_empty() {
                name
            } else {
                format!("{name} {}", values.join(", "))
            }
        })
        .collect();
    text.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coinciding_labels_share_their_name() {
        let labels: Vec<String> = ["kappa 0.05", "kappa 0.1", "tau 3", "A0 (C1)"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(compress_labels(&labels), "kappa 0.05, 0.1; tau 3; A0 (C1)");
    }

    #[test]
    fn parameters_get_distinct_markers_in_order_and_cycle() {
        let parameters = ["eps_on", "kappa", "tau", "M_max"];
        assert_eq!(parameter_marker(&parameters, "eps_on"), Marker::Circle);
        assert_eq!(parameter_marker(&parameters, "M_max"), Marker::Diamond);
        let many: Vec<String> = (0..7).map(|k| format!("p{k}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(parameter_marker(&many, "p6"), Marker::Circle);
    }
}
