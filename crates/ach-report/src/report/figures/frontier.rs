//! The cost/benefit frontier: D-bar against M_cum for every algorithm of C1 and ACH at every
//! point of C5's one-at-a-time sweep.

use std::ops::Range;

use ach_sim::summary::MatrixSummary;
use plotters::coord::types::RangedCoordf64;
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

/// Draws the frontier: the points with their labels on a log-with-zero-lane x axis, the
/// legend underneath, and the caption, which holds the labels of the groups of more than two
/// coinciding points.
fn frontier_figure(looks: Looks<'_>, summary: &MatrixSummary) -> Result<Figure, FigureError> {
    let points = frontier_points(looks, summary);
    let parameters = swept_parameters(summary);
    let axis = LogZeroAxis::fit(&points.iter().map(|p| p.m_cum).collect::<Vec<_>>());
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
        draw_zero_lane_break(&mut chart, axis, &y_range)?;
        draw_frontier_markers(&chart, axis, &points)?;
        let groups = coinciding_groups(&chart, axis, &points);
        let bounds = PlotBounds::of(&chart, &axis.range(), &y_range);
        draw_labels(&plot, &chart, &groups, bounds, &mut shared_labels)?;
        draw_legend_strip(
            &legend,
            &frontier_legend_entries(looks, summary, &parameters),
        )
    })?;
    Ok(Figure {
        name: "frontier_c5".to_string(),
        caption: frontier_caption(&shared_labels),
        svg,
    })
}

/// The frontier's chart: a log-with-zero-lane x axis of `M_cum`, a linear y axis of D-bar.
type FrontierChart<'a, 'b> = SvgChart<'a, 'b, TickedAxis, RangedCoordf64>;

/// Draws the dashed vertical line that separates the zero lane from the log decades, over the
/// whole height `y_range`.
fn draw_zero_lane_break(
    chart: &mut FrontierChart<'_, '_>,
    axis: LogZeroAxis,
    y_range: &Range<f64>,
) -> Result<(), FigureError> {
    let break_x = axis.break_position();
    chart.draw_series(DashedLineSeries::new(
        vec![(break_x, y_range.start), (break_x, y_range.end)],
        4,
        4,
        GUIDE_GREY.stroke_width(1),
    ))?;
    Ok(())
}

/// Draws every point's marker, in the order of `points`.
fn draw_frontier_markers(
    chart: &FrontierChart<'_, '_>,
    axis: LogZeroAxis,
    points: &[FrontierPoint],
) -> Result<(), FigureError> {
    for p in points {
        let x = axis.position(p.m_cum);
        draw_marker(chart, (x, p.d_mean), p.marker, p.color, p.fill, 6)?;
    }
    Ok(())
}

/// A group of points that land on the same pixel, which share one label: the first point's
/// position in chart coordinates and the labels of every point of the group.
type LabelGroup = (f64, f64, Vec<String>);

/// Groups the points that land within 6 pixels of a group's first point, in the order of
/// `points`.
fn coinciding_groups(
    chart: &FrontierChart<'_, '_>,
    axis: LogZeroAxis,
    points: &[FrontierPoint],
) -> Vec<LabelGroup> {
    let mut groups: Vec<LabelGroup> = Vec::new();
    for p in points {
        let x = axis.position(p.m_cum);
        let pixel = chart.backend_coord(&(x, p.d_mean));
        match groups.iter_mut().find(|(gx, gy, _)| {
            let other = chart.backend_coord(&(*gx, *gy));
            (other.0 - pixel.0).abs() <= 6 && (other.1 - pixel.1).abs() <= 6
        }) {
            Some(group) => group.2.push(p.label.clone()),
            None => groups.push((x, p.d_mean, vec![p.label.clone()])),
        }
    }
    groups
}

/// The legend: the C1 algorithms, then ACH once per swept parameter with its marker.
fn frontier_legend_entries(
    looks: Looks<'_>,
    summary: &MatrixSummary,
    parameters: &[&str],
) -> Vec<LegendEntry> {
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
    for &parameter in parameters {
        entries.push(LegendEntry {
            label: format!("{}, C5 {parameter}", looks.short(paper::ACH)),
            color: looks.color(paper::ACH),
            marker: Some(parameter_marker(parameters, parameter)),
            fill: Fill::Hollow,
            line: false,
        });
    }
    entries
}

/// The figure's caption, ending with the numbered labels that were too long for the plot.
fn frontier_caption(shared_labels: &[String]) -> String {
    format!(
        "Cost/benefit frontier (not in the paper): D-bar against M_cum for every algorithm in C1 (filled, mean over the C1 runs) and ACH at every C5 sweep point (hollow, one shape per parameter, mean over the point's runs); points on the same spot share a label. Lower left is better: less imbalance for less key movement.{}",
        shared_labels
            .iter()
            .enumerate()
            .map(|(k, text)| format!(" ({}) {text}.", k + 1))
            .collect::<String>()
    )
}

/// The plotting area's edges in pixels.
#[derive(Clone, Copy)]
struct PlotBounds {
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
}

impl PlotBounds {
    /// The edges of the area `x_axis` by `y_range` of `chart`, in pixels.
    fn of(chart: &FrontierChart<'_, '_>, x_axis: &Range<f64>, y_range: &Range<f64>) -> PlotBounds {
        PlotBounds {
            left: chart.backend_coord(&(x_axis.start, y_range.start)).0,
            right: chart.backend_coord(&(x_axis.end, y_range.start)).0,
            top: chart.backend_coord(&(x_axis.start, y_range.end)).1,
            bottom: chart.backend_coord(&(x_axis.start, y_range.start)).1,
        }
    }
}

/// A rectangle in pixels: left, top, width, height.
type PixelBox = (i32, i32, i32, i32);

/// Where a label may go: its left edge and top in pixels, and its horizontal anchor.
type LabelSpot = (i32, i32, HPos);

/// Places one label per group of coinciding points: beside its point where there is room and
/// no other point is nearer, else further away with a leader line. A group of more than two
/// points gets a numbered reference to the caption, whose text is pushed to `shared_labels`.
fn draw_labels(
    plot: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    chart: &FrontierChart<'_, '_>,
    groups: &[LabelGroup],
    bounds: PlotBounds,
    shared_labels: &mut Vec<String>,
) -> Result<(), FigureError> {
    let mut placed: Vec<PixelBox> = Vec::new();
    let pixels: Vec<(i32, i32)> = groups
        .iter()
        .map(|(x, y, _)| chart.backend_coord(&(*x, *y)))
        .collect();
    // Markers are obstacles for labels too.
    for &(px, py) in &pixels {
        placed.push((px - 7, py - 7, 14, 14));
    }
    for (&point, (_, _, labels)) in pixels.iter().zip(groups) {
        let text = label_text(labels, shared_labels);
        let placing = LabelPlacing {
            point,
            width: text_width(&text, NOTE_SIZE),
            height: NOTE_SIZE as i32,
            pixels: &pixels,
            placed: &placed,
            bounds,
        };
        let chosen = placing.choose();
        let (width, height) = (placing.width, placing.height);
        placed.push((chosen.0, chosen.1, width, height));
        draw_label(plot, text, point, chosen, (width, height))?;
    }
    Ok(())
}

/// The text of a group's label: its labels joined, or for more than two a numbered reference
/// to the caption, whose text is pushed to `shared_labels`.
fn label_text(labels: &[String], shared_labels: &mut Vec<String>) -> String {
    if labels.len() > 2 {
        shared_labels.push(compress_labels(labels));
        format!(
            "{} points, see caption ({})",
            labels.len(),
            shared_labels.len()
        )
    } else {
        compress_labels(labels)
    }
}

/// One label to place: its point and size, and what it must avoid.
struct LabelPlacing<'a> {
    /// The labelled point, in pixels.
    point: (i32, i32),
    /// The label's width in pixels.
    width: i32,
    /// The label's height in pixels.
    height: i32,
    /// Every labelled point, in pixels.
    pixels: &'a [(i32, i32)],
    /// The markers and the labels placed so far.
    placed: &'a [PixelBox],
    /// The plotting area.
    bounds: PlotBounds,
}

impl LabelPlacing<'_> {
    /// The first spot beside the point that is free and unambiguous, else the first free spot
    /// further away, else the first free spot beside it, else the spot right of the point.
    fn choose(&self) -> LabelSpot {
        let candidates = self.spots_beside();
        let far = self.spots_far();
        *candidates
            .iter()
            .find(|(left, top, _)| self.is_free(*left, *top) && self.is_unambiguous(*left, *top))
            .or_else(|| far.iter().find(|(left, top, _)| self.is_free(*left, *top)))
            .or_else(|| {
                candidates
                    .iter()
                    .find(|(left, top, _)| self.is_free(*left, *top))
            })
            .unwrap_or(&candidates[0])
    }

    /// Spots beside the point first, then ever further above and below, right before left.
    fn spots_beside(&self) -> Vec<LabelSpot> {
        let (px, py) = self.point;
        let (width, height) = (self.width, self.height);
        let mut candidates = Vec::new();
        for step in [0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5] {
            let top = py - height / 2 + step * (height + 2);
            candidates.push((px + 10, top, HPos::Left));
            candidates.push((px - 10 - width, top, HPos::Left));
        }
        candidates
    }

    /// Spots further away, joined to the point by a leader line, for crowded spots.
    fn spots_far(&self) -> Vec<LabelSpot> {
        let (px, py) = self.point;
        let (width, height) = (self.width, self.height);
        let mut far = Vec::new();
        for step in [-2, 2, -3, 3, -4, 4] {
            let top = py - height / 2 + step * (height + 2);
            far.push((px + 45, top, HPos::Left));
            far.push((px - 45 - width, top, HPos::Left));
        }
        far
    }

    /// Whether the label at `left`, `top` lies inside the plotting area and overlaps no marker
    /// and no label placed so far.
    fn is_free(&self, left: i32, top: i32) -> bool {
        let (width, height, bounds) = (self.width, self.height, self.bounds);
        left + width <= bounds.right
            && left >= bounds.left
            && top >= bounds.top
            && top + height <= bounds.bottom
            && !self.placed.iter().any(|&(l, t, w, h)| {
                left < l + w && l < left + width && top < t + h && t < top + height
            })
    }

    /// Whether the label at `left`, `top` sits nearer its own point than any other point, so
    /// that it cannot be read as the other point's label.
    fn is_unambiguous(&self, left: i32, top: i32) -> bool {
        let (px, py) = self.point;
        let anchor_x = if left > px { left } else { left + self.width };
        let anchor_y = top + self.height / 2;
        let distance = |(x, y): (i32, i32)| {
            let (dx, dy) = (f64::from(x - anchor_x), f64::from(y - anchor_y));
            dx.hypot(dy)
        };
        let own = distance((px, py));
        self.pixels
            .iter()
            .filter(|&&other| other != (px, py))
            .all(|&other| distance(other) > own)
    }
}

/// Draws a label at `spot`, with a leader line back to its point when it was moved away from
/// the point; `size` is the label's width and height in pixels.
fn draw_label(
    plot: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    text: String,
    (px, py): (i32, i32),
    spot: LabelSpot,
    (width, height): (i32, i32),
) -> Result<(), FigureError> {
    if (spot.1 + height / 2 - py).abs() > height / 2 || (spot.0 - px).abs() > 40 {
        let end_x = if spot.0 > px {
            spot.0 - 2
        } else {
            spot.0 + width + 2
        };
        plot.draw(&PathElement::new(
            vec![(px, py), (end_x, spot.1 + height / 2)],
            GUIDE_GREY.stroke_width(1),
        ))?;
    }
    plot.draw(&Text::new(
        text,
        (spot.0, spot.1 + height / 2),
        text_style(NOTE_SIZE, Pos::new(spot.2, VPos::Center)),
    ))?;
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
