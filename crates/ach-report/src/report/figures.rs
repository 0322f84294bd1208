//! The report's figures, drawn as SVG with `plotters`.
//!
//! Every algorithm has one colour (Okabe-Ito, safe for colour-blind readers) and one marker in
//! every figure. Costs (M_cum) span decades (Dynamic-R near 30, ACH near 0.06, the static
//! algorithms exactly 0), so they are drawn on a log axis with a separate "0" lane below a
//! break mark: a zero cost stays visible instead of falling off a log axis.

use std::ops::Range;

use ach_sim::Registry;
use ach_sim::algorithms::Marker;
use ach_sim::summary::{
    AlgorithmSummary, Interval, MatrixSummary, SensitivityPoint, SeriesSummary,
};
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::builders::{algorithm_info, long_name, short_name};
use super::load::{Results, SeriesRuns, TraceBand, quantile};
use super::paper;

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

/// Size of a one-panel figure, in pixels.
const SINGLE: (u32, u32) = (640, 420);
/// Size of a figure with two panels side by side.
const DOUBLE: (u32, u32) = (760, 420);
/// Size of a figure with two panels one above the other.
const STACKED: (u32, u32) = (640, 640);
/// Height of the legend strip under the panels.
const LEGEND_HEIGHT: u32 = 52;

const FONT: &str = "sans-serif";
const CAPTION_SIZE: u32 = 17;
const AXIS_LABEL_SIZE: u32 = 15;
const TICK_SIZE: u32 = 13;
const NOTE_SIZE: u32 = 12;

type DrawResult<T> = Result<T, String>;

fn draw_error<E: std::fmt::Debug>(error: E) -> String {
    format!("drawing failed: {error:?}")
}

/// Colour of an algorithm, from its registry entry (the built-ins: Okabe-Ito).
pub fn algorithm_color(registry: &Registry, name: &str) -> RGBColor {
    let [r, g, b] = algorithm_info(registry, name).color;
    RGBColor(r, g, b)
}

/// Marker shape of an algorithm, from its registry entry, so that colour is never the only cue.
fn algorithm_marker(registry: &Registry, name: &str) -> Marker {
    algorithm_info(registry, name).marker
}

/// How a marker is painted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    Solid,
    Hollow,
}

/// The outline of a marker of half-size `r` around the origin, in pixels.
fn marker_outline(marker: Marker, r: i32) -> Vec<(i32, i32)> {
    match marker {
        Marker::Circle => (0..16)
            .map(|k| {
                let angle = std::f64::consts::TAU * f64::from(k) / 16.0;
                (
                    (f64::from(r) * angle.cos()).round() as i32,
                    (f64::from(r) * angle.sin()).round() as i32,
                )
            })
            .collect(),
        Marker::Square => {
            let s = r * 4 / 5;
            vec![(-s, -s), (s, -s), (s, s), (-s, s)]
        }
        Marker::Triangle => vec![(0, -r), (r, r * 4 / 5), (-r, r * 4 / 5)],
        Marker::Diamond => vec![(0, -r), (r, 0), (0, r), (-r, 0)],
        Marker::Star => (0..10)
            .map(|k| {
                let radius = if k % 2 == 0 {
                    f64::from(r) * 1.15
                } else {
                    f64::from(r) * 0.5
                };
                let angle =
                    -std::f64::consts::FRAC_PI_2 + std::f64::consts::PI * f64::from(k) / 5.0;
                (
                    (radius * angle.cos()).round() as i32,
                    (radius * angle.sin()).round() as i32,
                )
            })
            .collect(),
        Marker::Cross => plus_outline(r)
            .into_iter()
            .map(|(x, y)| {
                // The plus sign turned by 45 degrees.
                let half = std::f64::consts::FRAC_1_SQRT_2;
                (
                    ((x - y) * half).round() as i32,
                    ((x + y) * half).round() as i32,
                )
            })
            .collect(),
        Marker::Plus => plus_outline(r)
            .into_iter()
            .map(|(x, y)| (x.round() as i32, y.round() as i32))
            .collect(),
        Marker::TriangleDown => vec![(0, r), (r, -r * 4 / 5), (-r, -r * 4 / 5)],
        Marker::Pentagon => regular_polygon(5, r, -std::f64::consts::FRAC_PI_2),
        Marker::Hexagon => regular_polygon(6, r, 0.0),
        Marker::Dash => vec![(-r, -r / 3), (r, -r / 3), (r, r / 3), (-r, r / 3)],
    }
}

/// The corners of a regular polygon of `k` sides and radius `r`, the first at `start` radians.
fn regular_polygon(k: u32, r: i32, start: f64) -> Vec<(i32, i32)> {
    (0..k)
        .map(|j| {
            let angle = start + std::f64::consts::TAU * f64::from(j) / f64::from(k);
            (
                (f64::from(r) * angle.cos()).round() as i32,
                (f64::from(r) * angle.sin()).round() as i32,
            )
        })
        .collect()
}

/// The outline of an upright plus sign of half-size `r` and arm half-width `r / 3`.
fn plus_outline(r: i32) -> [(f64, f64); 12] {
    let t = f64::from(r) / 3.0;
    let r = f64::from(r);
    [
        (t, -r),
        (t, -t),
        (r, -t),
        (r, t),
        (t, t),
        (t, r),
        (-t, r),
        (-t, t),
        (-r, t),
        (-r, -t),
        (-t, -t),
        (-t, -r),
    ]
}

/// Draws a marker at a data coordinate of a chart.
fn draw_marker<X, Y>(
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    at: (f64, f64),
    marker: Marker,
    color: RGBColor,
    fill: Fill,
    r: i32,
) -> DrawResult<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let mut outline = marker_outline(marker, r);
    let style = match fill {
        Fill::Solid => color.filled(),
        Fill::Hollow => WHITE.filled(),
    };
    let polygon = Polygon::new(outline.clone(), style);
    outline.push(outline[0]);
    let border = PathElement::new(outline, color.stroke_width(2));
    chart
        .plotting_area()
        .draw(&(EmptyElement::at(at) + polygon + border))
        .map_err(draw_error)
}

/// A vertical error bar with caps.
fn error_bar(
    x: f64,
    low: f64,
    high: f64,
    color: RGBColor,
) -> impl IntoIterator<Item = PathElement<(f64, f64)>> {
    let cap = 0.08;
    [
        PathElement::new(vec![(x, low), (x, high)], color.stroke_width(2)),
        PathElement::new(vec![(x - cap, low), (x + cap, low)], color.stroke_width(2)),
        PathElement::new(
            vec![(x - cap, high), (x + cap, high)],
            color.stroke_width(2),
        ),
    ]
}

/// A linear axis whose ticks are given explicitly (categories, decades of a log axis).
#[derive(Clone, Debug)]
struct TickedAxis {
    start: f64,
    end: f64,
    ticks: Vec<f64>,
}

impl TickedAxis {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> TickedAxis {
        TickedAxis {
            start: range.start,
            end: range.end,
            ticks,
        }
    }

    /// An axis of `count` categories at 0, 1, ..., count - 1.
    fn categories(count: usize) -> TickedAxis {
        TickedAxis::new(
            -0.5..count as f64 - 0.5,
            (0..count).map(|i| i as f64).collect(),
        )
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = (value - self.start) / (self.end - self.start);
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.start..self.end
    }
}

/// A log axis with a lane for zero below a break, for costs that span decades and include 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogZeroAxis {
    /// Exponent of the lowest decade shown.
    pub floor_exponent: i32,
    /// Exponent of the highest decade shown.
    pub top_exponent: i32,
}

impl LogZeroAxis {
    /// Where 0 is drawn, in axis units (decades).
    fn zero_position(self) -> f64 {
        f64::from(self.floor_exponent) - 0.7
    }

    /// Where the break mark is drawn.
    fn break_position(self) -> f64 {
        f64::from(self.floor_exponent) - 0.35
    }

    /// An axis covering the positive `values` (zeros and non-finite values are ignored).
    pub fn fit(values: &[f64]) -> LogZeroAxis {
        let positive: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        if positive.is_empty() {
            return LogZeroAxis {
                floor_exponent: -3,
                top_exponent: 0,
            };
        }
        let low = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let high = positive.iter().copied().fold(0.0, f64::max);
        let floor_exponent = (low.log10().floor() as i32).max(-6);
        let top_exponent = (high.log10().ceil() as i32).max(floor_exponent + 1);
        LogZeroAxis {
            floor_exponent,
            top_exponent,
        }
    }

    /// Axis position of a value.
    pub fn position(self, value: f64) -> f64 {
        if value <= 0.0 || !value.is_finite() {
            self.zero_position()
        } else {
            value.log10().max(f64::from(self.floor_exponent))
        }
    }

    /// The axis range.
    fn range(self) -> Range<f64> {
        self.zero_position() - 0.25..f64::from(self.top_exponent) + 0.1
    }

    /// Tick positions: the zero lane and every decade.
    fn ticks(self) -> Vec<f64> {
        let mut ticks = vec![self.zero_position()];
        ticks.extend((self.floor_exponent..=self.top_exponent).map(f64::from));
        ticks
    }

    /// Tick label at an axis position.
    fn label(self, position: f64) -> String {
        if (position - self.zero_position()).abs() < 1e-9 {
            return "0".to_string();
        }
        let exponent = position.round() as i32;
        match exponent {
            e if e >= 0 => format!("{}", 10u64.pow(e as u32)),
            -1 => "0.1".to_string(),
            -2 => "0.01".to_string(),
            -3 => "0.001".to_string(),
            e => format!("1e{e}"),
        }
    }
}

/// One entry of a legend strip.
struct LegendEntry {
    label: String,
    color: RGBColor,
    marker: Option<Marker>,
    fill: Fill,
    line: bool,
}

fn algorithm_legend(registry: &Registry, names: &[&str]) -> Vec<LegendEntry> {
    names
        .iter()
        .map(|name| LegendEntry {
            label: long_name(registry, name),
            color: algorithm_color(registry, name),
            marker: Some(algorithm_marker(registry, name)),
            fill: Fill::Solid,
            line: false,
        })
        .collect()
}

/// The legend of a figure that draws every algorithm as a line with its marker.
fn line_legend(registry: &Registry, names: &[&str]) -> Vec<LegendEntry> {
    let mut entries = algorithm_legend(registry, names);
    for entry in &mut entries {
        entry.line = true;
    }
    entries
}

/// Approximate width of a text in pixels (sans-serif averages about 0.55 em per character).
fn text_width(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * f64::from(size) * 0.55).ceil() as i32
}

/// Draws entries centred in rows across `area` (wrapping when a row is full).
fn draw_legend_strip(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[LegendEntry],
) -> DrawResult<()> {
    let (width, height) = area.dim_in_pixel();
    let width = width as i32;
    let entry_width = |e: &LegendEntry| 30 + text_width(&e.label, TICK_SIZE) + 18;
    let mut rows: Vec<Vec<&LegendEntry>> = vec![Vec::new()];
    let mut used = 0;
    for entry in entries {
        let w = entry_width(entry);
        if used + w > width - 20 && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = 0;
        }
        used += w;
        rows.last_mut().expect("a row").push(entry);
    }
    let row_height = 20;
    let top = (height as i32 - row_height * rows.len() as i32) / 2 + row_height / 2;
    let style = TextStyle::from((FONT, TICK_SIZE).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (index, row) in rows.iter().enumerate() {
        let total: i32 = row.iter().map(|e| entry_width(e)).sum();
        let mut x = (width - total) / 2;
        let y = top + index as i32 * row_height;
        for entry in row {
            if entry.line {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    entry.color.stroke_width(3),
                ))
                .map_err(draw_error)?;
            }
            if let Some(marker) = entry.marker {
                let mut outline: Vec<(i32, i32)> = marker_outline(marker, 6)
                    .into_iter()
                    .map(|(dx, dy)| (x + 12 + dx, y + dy))
                    .collect();
                let fill = match entry.fill {
                    Fill::Solid => entry.color.filled(),
                    Fill::Hollow => WHITE.filled(),
                };
                area.draw(&Polygon::new(outline.clone(), fill))
                    .map_err(draw_error)?;
                outline.push(outline[0]);
                area.draw(&PathElement::new(outline, entry.color.stroke_width(2)))
                    .map_err(draw_error)?;
            }
            area.draw(&Text::new(entry.label.clone(), (x + 30, y), style.clone()))
                .map_err(draw_error)?;
            x += entry_width(entry);
        }
    }
    Ok(())
}

/// Renders a figure into an SVG string.
fn render_svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult<()>,
) -> DrawResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        draw(&root)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// A chart builder in the house layout: a 10 px margin, 42 px for the x labels and 58 px for the
/// y labels (a caller may override any of them).
fn chart_builder<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(10)
        .x_label_area_size(42)
        .y_label_area_size(58);
    builder
}

/// A mesh in the house style: no minor grid lines, the shared fonts, and the two axis
/// descriptions.
fn styled_mesh<'a, 'b, 'm, X, Y, XT, YT, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
    x_desc: &str,
    y_desc: &str,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType = XT> + ValueFormatter<XT>,
    Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    DB: DrawingBackend,
{
    mesh.light_line_style(TRANSPARENT)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, AXIS_LABEL_SIZE))
        .label_style((FONT, TICK_SIZE))
}

fn text_style(size: u32, pos: Pos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font())
        .color(&BLACK)
        .pos(pos)
}

/// A padded linear range around values.
fn padded_range(values: impl IntoIterator<Item = f64>, pad_fraction: f64) -> Range<f64> {
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        low = low.min(v);
        high = high.max(v);
    }
    if !low.is_finite() {
        return 0.0..1.0;
    }
    let span = (high - low).max(high.abs() * 0.05).max(1e-3);
    low - span * pad_fraction..high + span * pad_fraction
}

// ---------------------------------------------------------------------------------------
// Figures 2 and 3: D-bar and M_cum per algorithm.
// ---------------------------------------------------------------------------------------

/// What a D-bar / M_cum figure shows.
struct DotFigureSpec<'a> {
    name: &'a str,
    title: &'a str,
    caption: String,
    /// Write each algorithm's violation count above its D-bar point (red cross when > 0).
    mark_violations: bool,
}

fn dot_figure(
    registry: &Registry,
    series: &SeriesSummary,
    spec: &DotFigureSpec<'_>,
) -> DrawResult<Figure> {
    let algorithms: Vec<&AlgorithmSummary> = series.algorithms.iter().collect();
    let names: Vec<&str> = algorithms.iter().map(|a| a.name.as_str()).collect();
    let count = algorithms.len().max(1);
    let svg = render_svg(DOUBLE, |root| {
        let (plots, legend) = root.split_vertically(DOUBLE.1 - LEGEND_HEIGHT);
        let plots = plots
            .titled(spec.title, (FONT, CAPTION_SIZE))
            .map_err(draw_error)?;
        let (left, right) = plots.split_horizontally(DOUBLE.0 / 2);
        let x_range = || TickedAxis::categories(count);
        let x_label = |v: &f64| {
            let index = v.round();
            if (v - index).abs() < 1e-6 && index >= 0.0 {
                names
                    .get(index as usize)
                    .map_or(String::new(), |n| short_name(registry, n).to_string())
            } else {
                String::new()
            }
        };

        // Left: D-bar with CI95.
        let d_values = algorithms.iter().flat_map(|a| {
            let ci = a.d_mean.ci95.unwrap_or(0.0);
            [a.d_mean.mean - ci, a.d_mean.mean + ci]
        });
        let mut y_range = padded_range(d_values, 0.15);
        if spec.mark_violations {
            y_range.end += (y_range.end - y_range.start) * 0.12;
        }
        let mut chart = chart_builder(&left)
            .build_cartesian_2d(x_range(), y_range.clone())
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "algorithm",
            "D-bar (mean imbalance, fraction of load)",
        )
        .disable_x_mesh()
        .x_label_formatter(&x_label)
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(draw_error)?;
        for (index, a) in algorithms.iter().enumerate() {
            let x = index as f64;
            let color = algorithm_color(registry, &a.name);
            let ci = a.d_mean.ci95.unwrap_or(0.0);
            chart
                .draw_series(error_bar(x, a.d_mean.mean - ci, a.d_mean.mean + ci, color))
                .map_err(draw_error)?;
            draw_marker(
                &chart,
                (x, a.d_mean.mean),
                algorithm_marker(registry, &a.name),
                color,
                Fill::Solid,
                6,
            )?;
            if spec.mark_violations {
                let label_y = y_range.end - (y_range.end - y_range.start) * 0.06;
                let (text, text_color) = if a.n_viol == 0 {
                    ("0 viol.".to_string(), RGBColor(0x55, 0x55, 0x55))
                } else {
                    (format!("✕ {} viol.", a.n_viol), RGBColor(0xC0, 0x00, 0x00))
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (x, label_y),
                        text_style(NOTE_SIZE, Pos::new(HPos::Center, VPos::Center))
                            .color(&text_color),
                    )))
                    .map_err(draw_error)?;
            }
        }

        // Right: M_cum on the log axis with a zero lane.
        let axis = LogZeroAxis::fit(
            &algorithms
                .iter()
                .flat_map(|a| {
                    let ci = a.m_cum.ci95.unwrap_or(0.0);
                    [a.m_cum.mean, a.m_cum.mean + ci]
                })
                .collect::<Vec<_>>(),
        );
        let mut chart = chart_builder(&right)
            .build_cartesian_2d(x_range(), TickedAxis::new(axis.range(), axis.ticks()))
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "algorithm",
            "M_cum (fraction of key space, log)",
        )
        .disable_x_mesh()
        .x_label_formatter(&x_label)
        .y_label_formatter(&|v| axis.label(*v))
        .draw()
        .map_err(draw_error)?;
        draw_log_break(&mut chart, axis, -0.5..count as f64 - 0.5)?;
        for (index, a) in algorithms.iter().enumerate() {
            let x = index as f64;
            let color = algorithm_color(registry, &a.name);
            let ci = a.m_cum.ci95.unwrap_or(0.0);
            if ci > 0.0 {
                chart
                    .draw_series(error_bar(
                        x,
                        axis.position(a.m_cum.mean - ci),
                        axis.position(a.m_cum.mean + ci),
                        color,
                    ))
                    .map_err(draw_error)?;
            }
            let y = axis.position(a.m_cum.mean);
            draw_marker(
                &chart,
                (x, y),
                algorithm_marker(registry, &a.name),
                color,
                Fill::Solid,
                6,
            )?;
        }
        draw_legend_strip(&legend, &algorithm_legend(registry, &names))
    })?;
    Ok(Figure {
        name: spec.name.to_string(),
        caption: spec.caption.clone(),
        svg,
    })
}

/// Draws the dashed break line between the zero lane and the first decade of a log axis.
fn draw_log_break<X>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, TickedAxis>>,
    axis: LogZeroAxis,
    x_span: Range<f64>,
) -> DrawResult<()>
where
    X: Ranged<ValueType = f64>,
{
    let y = axis.break_position();
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x_span.start, y), (x_span.end, y)],
            4,
            4,
            RGBColor(0x88, 0x88, 0x88).stroke_width(1),
        ))
        .map_err(draw_error)?;
    Ok(())
}

/// The figures drawn from summary.json alone: Fig. 2, Fig. 3, Fig. 4 and the frontier.
/// A figure whose series is missing is skipped and named in the returned list of notes.
pub fn summary_figures(results: &Results) -> (Vec<Figure>, Vec<String>) {
    let summary = &results.summary;
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    let series = |name: &str| summary.series.iter().find(|s| s.name == name);
    fn keep(
        figures: &mut Vec<Figure>,
        notes: &mut Vec<String>,
        result: DrawResult<Figure>,
        name: &str,
    ) {
        match result {
            Ok(figure) => figures.push(figure),
            Err(e) => notes.push(format!("{name}: {e}")),
        }
    }
    match series("C1") {
        Some(c1) => keep(
            &mut figures,
            &mut notes,
            dot_figure(
                &results.registry,
                c1,
                &DotFigureSpec {
                    name: "fig2_c1",
                    title: "C1 (stationary): imbalance and cost per algorithm",
                    caption: format!(
                        "Fig. 2 (C1): D-bar (left) and M_cum (right, log axis with a lane for 0) per algorithm; mean over {} runs with 95 % CI error bars (bars narrower than the marker are hidden by it).",
                        c1.seeds.len()
                    ),
                    mark_violations: false,
                },
            ),
            "fig2_c1",
        ),
        None => notes.push("fig2_c1: not drawn, series C1 is not in the results".to_string()),
    }
    match series("C3") {
        Some(c3) => keep(
            &mut figures,
            &mut notes,
            dot_figure(
                &results.registry,
                c3,
                &DotFigureSpec {
                    name: "fig3_c3",
                    title: "C3 (Zipf keys, churn): imbalance and cost per algorithm",
                    caption: format!(
                        "Fig. 3 (C3): as Fig. 2, with each algorithm's invariant violations (summed over {} runs) written above its D-bar point; a red cross marks a non-zero count.",
                        c3.seeds.len()
                    ),
                    mark_violations: true,
                },
            ),
            "fig3_c3",
        ),
        None => notes.push("fig3_c3: not drawn, series C3 is not in the results".to_string()),
    }
    match noise_points(results) {
        points if points.is_empty() => notes.push(
            "fig4_noise_gradient: not drawn, none of C4a, C4b, C4c is in the results".to_string(),
        ),
        points => keep(
            &mut figures,
            &mut notes,
            noise_figure(&results.registry, &points),
            "fig4_noise_gradient",
        ),
    }
    if series("C1").is_some() || !summary.ach_points().is_empty() {
        keep(
            &mut figures,
            &mut notes,
            frontier_figure(&results.registry, summary),
            "frontier_c5",
        );
    } else {
        notes.push("frontier_c5: not drawn, neither C1 nor C5 is in the results".to_string());
    }
    for (series, points) in summary.general_sweeps() {
        for parameter in swept_fields(&points) {
            let name = format!("sweep_{series}_{parameter}");
            keep(
                &mut figures,
                &mut notes,
                sweep_figure(&results.registry, series, &parameter, &points),
                &name,
            );
        }
        let with_cv = points
            .iter()
            .any(|p| p.algorithms().iter().any(|a| a.cv_true_mean.is_some()));
        if with_cv {
            for parameter in swept_fields(&points) {
                let name = format!("cv_{series}_{parameter}");
                keep(
                    &mut figures,
                    &mut notes,
                    cv_sweep_figure(&results.registry, series, &parameter, &points),
                    &name,
                );
            }
        }
    }
    (figures, notes)
}

// ---------------------------------------------------------------------------------------
// Sweeps beyond C5's form: D-bar and M_cum against each swept field.
// ---------------------------------------------------------------------------------------

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
    registry: &Registry,
    series: &str,
    field: &str,
    points: &[&SensitivityPoint],
) -> DrawResult<Figure> {
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
    banded_sweep_figure(registry, field, points, &spec)
}

/// D-bar (observed and true) and the coefficient of variation of the true loads against a
/// swept field, for a series with `report_cv = true`.
fn cv_sweep_figure(
    registry: &Registry,
    series: &str,
    field: &str,
    points: &[&SensitivityPoint],
) -> DrawResult<Figure> {
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
    banded_sweep_figure(registry, field, points, &spec)
}

/// Draws the panels of `spec` against `field`, one band per algorithm, legend underneath.
fn banded_sweep_figure(
    registry: &Registry,
    field: &str,
    points: &[&SensitivityPoint],
    spec: &SweepFigureSpec<'_>,
) -> DrawResult<Figure> {
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
    // One band per algorithm and metric: mean with its 95 % CI, against the field's value.
    let band = |name: &str, metric: fn(&AlgorithmSummary) -> Option<Interval>| {
        let mut b = TraceBand {
            t: Vec::new(),
            low: Vec::new(),
            median: Vec::new(),
            high: Vec::new(),
        };
        for (x, p) in &slice {
            if let Some(i) = p
                .algorithms()
                .into_iter()
                .find(|a| a.name == name)
                .and_then(metric)
            {
                let ci = i.ci95.unwrap_or(0.0);
                b.t.push(*x);
                b.low.push(i.mean - ci);
                b.median.push(i.mean);
                b.high.push(i.mean + ci);
            }
        }
        b
    };
    let panels: Vec<(Vec<(&str, TraceBand)>, &str)> = spec
        .panels
        .iter()
        .map(|(metric, y_desc)| {
            let bands = names.iter().map(|n| (*n, band(n, *metric))).collect();
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
        let mut rest = plots
            .titled(&spec.title, (FONT, CAPTION_SIZE))
            .map_err(draw_error)?;
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
            let mut chart = chart_builder(area)
                .build_cartesian_2d(x_range.clone(), y_range)
                .map_err(draw_error)?;
            styled_mesh(&mut chart.configure_mesh(), field, y_desc)
                .y_label_formatter(&|v| format!("{v:.3}"))
                .draw()
                .map_err(draw_error)?;
            for (name, b) in bands.iter() {
                draw_band(&mut chart, b, algorithm_color(registry, name), |v| v)?;
            }
        }
        let mut entries = algorithm_legend(registry, &names);
        for entry in &mut entries {
            entry.line = true;
            entry.marker = None;
        }
        draw_legend_strip(&legend, &entries)
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

// ---------------------------------------------------------------------------------------
// Figure 4: ACH against A0 as the telemetry noise grows.
// ---------------------------------------------------------------------------------------

/// One noise series: its sigma and its summary.
struct NoisePoint<'a> {
    sigma: f64,
    series: &'a SeriesSummary,
    eps_off: f64,
    note: String,
}

fn noise_points(results: &Results) -> Vec<NoisePoint<'_>> {
    let mut points: Vec<NoisePoint<'_>> = ["C4a", "C4b", "C4c"]
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

fn noise_figure(registry: &Registry, points: &[NoisePoint<'_>]) -> DrawResult<Figure> {
    let eps_off = points[0].eps_off;
    let sigma_max = points.iter().map(|p| p.sigma).fold(eps_off, f64::max);
    let x_range = 0.0..sigma_max * 1.15;
    let algorithms = ["Static-W", "ACH"];
    let published: Vec<(f64, &paper::PaperSeriesRow)> = points
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
        let plots = plots
            .titled(
                "Noisy telemetry: ACH against Static-W (A0)",
                (FONT, CAPTION_SIZE),
            )
            .map_err(draw_error)?;
        let (left, right) = plots.split_horizontally(DOUBLE.0 / 2);

        // Left: D-bar of both algorithms against sigma.
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
        for (_, row) in &published {
            d_values.extend([row.d_mean_ach, row.d_mean_static_w]);
        }
        let y_range = padded_range(d_values, 0.25);
        let mut chart = chart_builder(&left)
            .build_cartesian_2d(x_range.clone(), y_range.clone())
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "telemetry noise σ (fraction of load)",
            "D-bar (fraction of load)",
        )
        .x_labels(6)
        .x_label_formatter(&|v| format!("{v:.2}"))
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()
        .map_err(draw_error)?;
        draw_applicability(&mut chart, eps_off, x_range.end, y_range.clone())?;
        for name in algorithms {
            let color = algorithm_color(registry, name);
            let series: Vec<(f64, f64, f64)> = points
                .iter()
                .filter_map(|p| {
                    let a = p.series.algorithms.iter().find(|a| a.name == name)?;
                    Some((p.sigma, a.d_mean.mean, a.d_mean.ci95.unwrap_or(0.0)))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(
                    series.iter().map(|&(x, y, _)| (x, y)),
                    color.stroke_width(2),
                ))
                .map_err(draw_error)?;
            for &(x, y, ci) in &series {
                let cap = x_range.end * 0.012;
                chart
                    .draw_series([
                        PathElement::new(vec![(x, y - ci), (x, y + ci)], color.stroke_width(2)),
                        PathElement::new(
                            vec![(x - cap, y - ci), (x + cap, y - ci)],
                            color.stroke_width(2),
                        ),
                        PathElement::new(
                            vec![(x - cap, y + ci), (x + cap, y + ci)],
                            color.stroke_width(2),
                        ),
                    ])
                    .map_err(draw_error)?;
                draw_marker(
                    &chart,
                    (x, y),
                    algorithm_marker(registry, name),
                    color,
                    Fill::Solid,
                    6,
                )?;
            }
            for (sigma, row) in &published {
                let value = if name == "ACH" {
                    row.d_mean_ach
                } else {
                    row.d_mean_static_w
                };
                draw_marker(
                    &chart,
                    (sigma + x_range.end * 0.03, value),
                    algorithm_marker(registry, name),
                    color,
                    Fill::Hollow,
                    5,
                )?;
            }
        }
        // Series names along the bottom, one row each so that long notes never collide;
        // a note near the right edge ends at its point instead of centring on it.
        let row_height = (y_range.end - y_range.start) * 0.055;
        for (index, p) in points.iter().enumerate() {
            let anchor = if p.sigma > x_range.end * 0.6 {
                HPos::Right
            } else {
                HPos::Center
            };
            let y =
                y_range.start + (y_range.end - y_range.start) * 0.03 + row_height * index as f64;
            chart
                .draw_series(std::iter::once(Text::new(
                    p.note.clone(),
                    (p.sigma, y),
                    text_style(NOTE_SIZE, Pos::new(anchor, VPos::Bottom)),
                )))
                .map_err(draw_error)?;
        }

        // Right: relative change of D-bar, ACH against A0.
        let ours: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| {
                p.series
                    .comparisons
                    .iter()
                    .find(|c| c.baseline == "Static-W")
                    .map(|c| (p.sigma, c.reduction_percent))
            })
            .collect();
        let printed: Vec<(f64, f64)> = published
            .iter()
            .map(|(sigma, row)| (*sigma, row.reduction_percent))
            .collect();
        let low = ours.iter().chain(&printed).map(|p| p.1).fold(0.0, f64::min);
        let y_range = (low * 1.2).min(-5.0)..5.0;
        let mut chart = chart_builder(&right)
            .build_cartesian_2d(x_range.clone(), y_range.clone())
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "telemetry noise σ (fraction of load)",
            "D-bar change, ACH vs A0 (%)",
        )
        .x_labels(6)
        .x_label_formatter(&|v| format!("{v:.2}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(draw_error)?;
        draw_applicability(&mut chart, eps_off, x_range.end, y_range.clone())?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (x_range.end, 0.0)],
                BLACK.stroke_width(1),
            )))
            .map_err(draw_error)?;
        let color = algorithm_color(registry, "ACH");
        chart
            .draw_series(LineSeries::new(ours.iter().copied(), color.stroke_width(2)))
            .map_err(draw_error)?;
        for &(x, y) in &ours {
            draw_marker(&chart, (x, y), Marker::Star, color, Fill::Solid, 6)?;
        }
        for &(x, y) in &printed {
            draw_marker(
                &chart,
                (x + x_range.end * 0.03, y),
                Marker::Star,
                color,
                Fill::Hollow,
                5,
            )?;
        }

        let mut entries = algorithm_legend(registry, &algorithms);
        for entry in &mut entries {
            entry.line = true;
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
            color: RGBColor(0xBB, 0xBB, 0xBB),
            marker: Some(Marker::Square),
            fill: Fill::Solid,
            line: false,
        });
        draw_legend_strip(&legend, &entries)
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

/// Shades the region `sigma > eps_off` and draws its boundary.
fn draw_applicability(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    eps_off: f64,
    x_end: f64,
    y_range: Range<f64>,
) -> DrawResult<()> {
    let grey = RGBColor(0xBB, 0xBB, 0xBB);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(eps_off, y_range.start), (x_end, y_range.end)],
            grey.mix(0.25).filled(),
        )))
        .map_err(draw_error)?;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(eps_off, y_range.start), (eps_off, y_range.end)],
            6,
            4,
            RGBColor(0x55, 0x55, 0x55).stroke_width(2),
        ))
        .map_err(draw_error)?;
    chart
        .draw_series(std::iter::once(Text::new(
            "σ > ε_off".to_string(),
            (
                eps_off + x_end * 0.015,
                y_range.end - (y_range.end - y_range.start) * 0.03,
            ),
            text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
        )))
        .map_err(draw_error)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The cost/benefit frontier: D-bar against M_cum.
// ---------------------------------------------------------------------------------------

/// One point of the frontier.
struct FrontierPoint {
    label: String,
    m_cum: f64,
    d_mean: f64,
    color: RGBColor,
    marker: Marker,
    fill: Fill,
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

fn frontier_figure(registry: &Registry, summary: &MatrixSummary) -> DrawResult<Figure> {
    // Sweep points first, so that the C1 markers are drawn on top of them.
    let mut points = Vec::new();
    let parameters = swept_parameters(summary);
    for p in summary.ach_points() {
        points.push(FrontierPoint {
            label: format!("{} {}", p.parameter, p.value),
            m_cum: p.ach.m_cum.mean,
            d_mean: p.ach.d_mean.mean,
            color: algorithm_color(registry, "ACH"),
            marker: parameter_marker(&parameters, p.parameter),
            fill: Fill::Hollow,
        });
    }
    if let Some(c1) = summary.series.iter().find(|s| s.name == "C1") {
        for a in &c1.algorithms {
            points.push(FrontierPoint {
                label: format!("{} (C1)", short_name(registry, &a.name)),
                m_cum: a.m_cum.mean,
                d_mean: a.d_mean.mean,
                color: algorithm_color(registry, &a.name),
                marker: algorithm_marker(registry, &a.name),
                fill: Fill::Solid,
            });
        }
    }
    let axis = LogZeroAxis::fit(&points.iter().map(|p| p.m_cum).collect::<Vec<_>>());
    let x_axis = axis.range();
    let y_range = padded_range(points.iter().map(|p| p.d_mean), 0.12);
    let mut shared_labels: Vec<String> = Vec::new();
    let svg = render_svg((SINGLE.0, SINGLE.1 + 60), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 60 - 76);
        let mut chart = chart_builder(&plot)
            .caption(
                "Cost against benefit: C1 algorithms and every C5 point",
                (FONT, CAPTION_SIZE),
            )
            .build_cartesian_2d(
                TickedAxis::new(x_axis.clone(), axis.ticks()),
                y_range.clone(),
            )
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "M_cum (fraction of key space, log; 0 in its own lane)",
            "D-bar (fraction of load)",
        )
        .x_label_formatter(&|v| axis.label(*v))
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(draw_error)?;
        let break_x = axis.break_position();
        chart
            .draw_series(DashedLineSeries::new(
                vec![(break_x, y_range.start), (break_x, y_range.end)],
                4,
                4,
                RGBColor(0x88, 0x88, 0x88).stroke_width(1),
            ))
            .map_err(draw_error)?;
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
        let plot_right = chart.backend_coord(&(x_axis.end, y_range.start)).0;
        let plot_left = chart.backend_coord(&(x_axis.start, y_range.start)).0;
        let plot_top = chart.backend_coord(&(x_axis.start, y_range.end)).1;
        let plot_bottom = chart.backend_coord(&(x_axis.start, y_range.start)).1;
        let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
        let pixels: Vec<(i32, i32)> = groups
            .iter()
            .map(|(x, y, _)| chart.backend_coord(&(*x, *y)))
            .collect();
        // Markers are obstacles for labels too.
        for (x, y, _) in &groups {
            let (px, py) = chart.backend_coord(&(*x, *y));
            placed.push((px - 7, py - 7, 14, 14));
        }
        for (x, y, labels) in &groups {
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
            let (px, py) = chart.backend_coord(&(*x, *y));
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
                left + width <= plot_right
                    && left >= plot_left
                    && top >= plot_top
                    && top + height <= plot_bottom
                    && !placed.iter().any(|&(l, t, w, h)| {
                        left < l + w && l < left + width && top < t + h && t < top + height
                    })
            };
            // A label must sit nearer its own point than any other point, or it would be read
            // as the other point's label.
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
                    RGBColor(0x88, 0x88, 0x88).stroke_width(1),
                ))
                .map_err(draw_error)?;
            }
            plot.draw(&Text::new(
                text,
                (chosen.0, chosen.1 + height / 2),
                text_style(NOTE_SIZE, Pos::new(chosen.2, VPos::Center)),
            ))
            .map_err(draw_error)?;
        }
        let mut entries: Vec<LegendEntry> = Vec::new();
        if let Some(c1) = summary.series.iter().find(|s| s.name == "C1") {
            entries.extend(algorithm_legend(
                registry,
                &c1.algorithms
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>(),
            ));
        }
        for &parameter in &parameters {
            entries.push(LegendEntry {
                label: format!("ACH, C5 {parameter}"),
                color: algorithm_color(registry, "ACH"),
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

// ---------------------------------------------------------------------------------------
// Per-series figures: boxplot, ECDF, traces.
// ---------------------------------------------------------------------------------------

/// The three figures of one series.
pub fn series_figures(registry: &Registry, runs: &SeriesRuns) -> DrawResult<Vec<Figure>> {
    Ok(vec![
        boxplot_figure(registry, runs)?,
        ecdf_figure(registry, runs)?,
        traces_figure(registry, runs)?,
    ])
}

fn boxplot_figure(registry: &Registry, runs: &SeriesRuns) -> DrawResult<Figure> {
    let names: Vec<&str> = runs.algorithms.iter().map(|a| a.name.as_str()).collect();
    let count = names.len().max(1);
    let y_range = padded_range(
        runs.algorithms
            .iter()
            .flat_map(|a| a.d_mean_per_run.iter().copied()),
        0.08,
    );
    let svg = render_svg((SINGLE.0, SINGLE.1 + 20), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 20 - LEGEND_HEIGHT);
        let mut chart = chart_builder(&plot)
            .caption(
                format!("{}: D-bar of every run per algorithm", runs.name),
                (FONT, CAPTION_SIZE),
            )
            .build_cartesian_2d(TickedAxis::categories(count), y_range.clone())
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "algorithm",
            "D-bar per run (fraction of load)",
        )
        .disable_x_mesh()
        .x_label_formatter(&|v| {
            names
                .get(v.round().max(0.0) as usize)
                .map_or(String::new(), |n| short_name(registry, n).to_string())
        })
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(draw_error)?;
        for (index, algorithm) in runs.algorithms.iter().enumerate() {
            let mut values = algorithm.d_mean_per_run.clone();
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            let x = index as f64;
            let color = algorithm_color(registry, &algorithm.name);
            let q1 = quantile(&values, 0.25);
            let median = quantile(&values, 0.5);
            let q3 = quantile(&values, 0.75);
            let reach = 1.5 * (q3 - q1);
            let whisker_low = values
                .iter()
                .copied()
                .find(|v| *v >= q1 - reach)
                .unwrap_or(q1);
            let whisker_high = values
                .iter()
                .rev()
                .copied()
                .find(|v| *v <= q3 + reach)
                .unwrap_or(q3);
            let half = 0.28;
            chart
                .draw_series([
                    Rectangle::new([(x - half, q1), (x + half, q3)], color.mix(0.2).filled()),
                    Rectangle::new([(x - half, q1), (x + half, q3)], color.stroke_width(2)),
                ])
                .map_err(draw_error)?;
            chart
                .draw_series([
                    PathElement::new(
                        vec![(x - half, median), (x + half, median)],
                        color.stroke_width(3),
                    ),
                    PathElement::new(vec![(x, q3), (x, whisker_high)], color.stroke_width(2)),
                    PathElement::new(vec![(x, q1), (x, whisker_low)], color.stroke_width(2)),
                    PathElement::new(
                        vec![(x - 0.12, whisker_high), (x + 0.12, whisker_high)],
                        color.stroke_width(2),
                    ),
                    PathElement::new(
                        vec![(x - 0.12, whisker_low), (x + 0.12, whisker_low)],
                        color.stroke_width(2),
                    ),
                ])
                .map_err(draw_error)?;
            // Every run as a dot, spread deterministically across the box's width.
            chart
                .draw_series(algorithm.d_mean_per_run.iter().enumerate().map(|(k, &v)| {
                    let offset = ((k as f64 * 0.618_033_988_75) % 1.0 - 0.5) * 0.36;
                    Circle::new((x + offset, v), 2, BLACK.mix(0.55).filled())
                }))
                .map_err(draw_error)?;
        }
        // The plot shows boxes, so the legend shows filled squares in each box's colour.
        let mut entries = algorithm_legend(registry, &names);
        for entry in &mut entries {
            entry.marker = Some(Marker::Square);
        }
        draw_legend_strip(&legend, &entries)
    })?;
    Ok(Figure {
        name: format!("boxplot_{}", runs.name),
        caption: format!(
            "{}: D-bar of each of the {} runs per algorithm (dots); box from the first to the third quartile with the median as a thick line, whiskers to the furthest run within 1.5 IQR.",
            runs.name, runs.runs
        ),
        svg,
    })
}

fn ecdf_figure(registry: &Registry, runs: &SeriesRuns) -> DrawResult<Figure> {
    let names: Vec<&str> = runs.algorithms.iter().map(|a| a.name.as_str()).collect();
    let x_range = padded_range(
        runs.algorithms
            .iter()
            .flat_map(|a| a.d_mean_per_run.iter().copied()),
        0.05,
    );
    let svg = render_svg((SINGLE.0, SINGLE.1 + 20), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 20 - LEGEND_HEIGHT);
        let mut chart = chart_builder(&plot)
            .caption(
                format!("{}: distribution of per-run D-bar", runs.name),
                (FONT, CAPTION_SIZE),
            )
            .build_cartesian_2d(x_range.clone(), 0.0..1.02)
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "D-bar per run (fraction of load)",
            "fraction of runs with D-bar ≤ x",
        )
        .x_label_formatter(&|v| format!("{v:.3}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()
        .map_err(draw_error)?;
        for algorithm in &runs.algorithms {
            let mut values = algorithm.d_mean_per_run.clone();
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            let n = values.len() as f64;
            let mut steps = vec![(x_range.start, 0.0)];
            for (k, &v) in values.iter().enumerate() {
                steps.push((v, k as f64 / n));
                steps.push((v, (k + 1) as f64 / n));
            }
            steps.push((x_range.end, 1.0));
            let color = algorithm_color(registry, &algorithm.name);
            chart
                .draw_series(LineSeries::new(steps, color.stroke_width(2)))
                .map_err(draw_error)?;
            let median = quantile(&values, 0.5);
            draw_marker(
                &chart,
                (median, 0.5),
                algorithm_marker(registry, &algorithm.name),
                color,
                Fill::Solid,
                5,
            )?;
        }
        draw_legend_strip(&legend, &line_legend(registry, &names))
    })?;
    Ok(Figure {
        name: format!("ecdf_{}", runs.name),
        caption: format!(
            "{}: empirical CDF of the {} per-run D-bar values per algorithm; the marker sits at the median.",
            runs.name, runs.runs
        ),
        svg,
    })
}

fn traces_figure(registry: &Registry, runs: &SeriesRuns) -> DrawResult<Figure> {
    let names: Vec<&str> = runs.algorithms.iter().map(|a| a.name.as_str()).collect();
    let steps = runs
        .algorithms
        .iter()
        .filter_map(|a| a.d_trace.t.last().copied())
        .fold(1.0, f64::max);
    let x_range = 0.0..steps + 1.0;
    let window = runs
        .algorithms
        .first()
        .and_then(|a| {
            let t = &a.d_trace.t;
            (t.len() >= 2).then(|| (t[1] - t[0]).round() as usize)
        })
        .unwrap_or(1);
    let svg = render_svg((STACKED.0, STACKED.1 + LEGEND_HEIGHT), |root| {
        let (plots, legend) = root.split_vertically(STACKED.1);
        let plots = plots
            .titled(
                &format!("{}: imbalance and cumulative cost over time", runs.name),
                (FONT, CAPTION_SIZE),
            )
            .map_err(draw_error)?;
        let (top, bottom) = plots.split_vertically((STACKED.1 - 30) / 2);

        let d_range = padded_range(
            runs.algorithms
                .iter()
                .flat_map(|a| a.d_trace.low.iter().chain(&a.d_trace.high).copied()),
            0.05,
        );
        // Headroom above the data for the event labels, one row each.
        let headroom = (d_range.end - d_range.start) * 0.08 * runs.events.len() as f64;
        let d_range = d_range.start.max(0.0)..d_range.end + headroom;
        let mut chart = chart_builder(&top)
            .x_label_area_size(36)
            .build_cartesian_2d(x_range.clone(), d_range.clone())
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "t (steps)",
            "D(t) (fraction of load)",
        )
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()
        .map_err(draw_error)?;
        draw_time_marks(&mut chart, runs, d_range.clone())?;
        for algorithm in &runs.algorithms {
            draw_band(
                &mut chart,
                &algorithm.d_trace,
                algorithm_color(registry, &algorithm.name),
                |v| v,
            )?;
        }

        let axis = LogZeroAxis::fit(
            &runs
                .algorithms
                .iter()
                .flat_map(|a| {
                    a.m_cumulative
                        .high
                        .iter()
                        .chain(&a.m_cumulative.median)
                        .copied()
                })
                .filter(|v| *v > 1e-6)
                .collect::<Vec<_>>(),
        );
        let mut chart = chart_builder(&bottom)
            .build_cartesian_2d(x_range.clone(), TickedAxis::new(axis.range(), axis.ticks()))
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "t (steps)",
            "cumulative M_keys (fraction of key space)",
        )
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| axis.label(*v))
        .draw()
        .map_err(draw_error)?;
        draw_log_break(&mut chart, axis, x_range.clone())?;
        let warmup = f64::from(runs.warmup);
        let range = axis.range();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, range.start), (warmup, range.end)],
                RGBColor(0xBB, 0xBB, 0xBB).mix(0.35).filled(),
            )))
            .map_err(draw_error)?;
        for algorithm in &runs.algorithms {
            draw_band(
                &mut chart,
                &algorithm.m_cumulative,
                algorithm_color(registry, &algorithm.name),
                |v| axis.position(v),
            )?;
        }
        let never_moved: Vec<&str> = runs
            .algorithms
            .iter()
            .filter(|a| {
                !a.m_cumulative.high.is_empty() && a.m_cumulative.high.iter().all(|v| *v <= 0.0)
            })
            .map(|a| short_name(registry, &a.name))
            .collect();
        if !never_moved.is_empty() {
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("0 throughout: {}", never_moved.join(", ")),
                    (x_range.end * 0.98, axis.position(0.0) + 0.05),
                    text_style(NOTE_SIZE, Pos::new(HPos::Right, VPos::Bottom)),
                )))
                .map_err(draw_error)?;
        }
        let mut entries = algorithm_legend(registry, &names);
        for entry in &mut entries {
            entry.line = true;
            entry.marker = None;
        }
        draw_legend_strip(&legend, &entries)
    })?;
    let events: Vec<String> = runs
        .events
        .iter()
        .map(|(t, what)| format!("{what} at t = {t}"))
        .collect();
    Ok(Figure {
        name: format!("traces_{}", runs.name),
        caption: format!(
            "{}: observed D(t) (top; the imbalance of the telemetry the algorithms see) and cumulative M_keys(t) counted from the end of the warm-up (bottom, log axis with a lane for 0), median over {} runs with the inter-quartile band; quantiles are taken per step and averaged over windows of {window} steps. Grey: warm-up (t < {}).{}",
            runs.name,
            runs.runs,
            runs.warmup,
            if events.is_empty() {
                String::new()
            } else {
                format!(" Dashed lines: {}.", events.join("; "))
            }
        ),
        svg,
    })
}

/// Shades the warm-up and marks scenario events on a time axis.
fn draw_time_marks(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    runs: &SeriesRuns,
    y_range: Range<f64>,
) -> DrawResult<()> {
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, y_range.start), (f64::from(runs.warmup), y_range.end)],
            RGBColor(0xBB, 0xBB, 0xBB).mix(0.35).filled(),
        )))
        .map_err(draw_error)?;
    for (t, _) in &runs.events {
        let x = f64::from(*t);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, y_range.start), (x, y_range.end)],
                5,
                4,
                RGBColor(0x44, 0x44, 0x44).stroke_width(1),
            ))
            .map_err(draw_error)?;
    }
    // Labels go on top of every line, each on a white patch so that no line runs through it.
    let line_height = (y_range.end - y_range.start) * 0.065;
    let origin = chart.backend_coord(&(0.0, y_range.start));
    let unit = chart.backend_coord(&(1.0, y_range.start));
    let pixels_per_step = f64::from((unit.0 - origin.0).max(1));
    for (index, (t, what)) in runs.events.iter().enumerate() {
        let x = f64::from(*t);
        let label_y = y_range.end - line_height * index as f64;
        let text = format!("t = {t}: {what}");
        let width = f64::from(text_width(&text, NOTE_SIZE)) / pixels_per_step;
        let left = x + 4.0 / pixels_per_step;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(left, label_y), (left + width, label_y - line_height * 0.9)],
                WHITE.mix(0.85).filled(),
            )))
            .map_err(draw_error)?;
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (left, label_y),
                text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
            )))
            .map_err(draw_error)?;
    }
    Ok(())
}

/// Draws a median line with its inter-quartile band, mapping values through `map`.
fn draw_band<Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    band: &TraceBand,
    color: RGBColor,
    map: impl Fn(f64) -> f64,
) -> DrawResult<()>
where
    Y: Ranged<ValueType = f64>,
{
    if band.t.is_empty() {
        return Ok(());
    }
    let mut outline: Vec<(f64, f64)> = band
        .t
        .iter()
        .zip(&band.high)
        .map(|(&t, &v)| (t, map(v)))
        .collect();
    outline.extend(
        band.t
            .iter()
            .zip(&band.low)
            .rev()
            .map(|(&t, &v)| (t, map(v))),
    );
    chart
        .draw_series(std::iter::once(Polygon::new(
            outline,
            color.mix(0.18).filled(),
        )))
        .map_err(draw_error)?;
    chart
        .draw_series(LineSeries::new(
            band.t.iter().zip(&band.median).map(|(&t, &v)| (t, map(v))),
            color.stroke_width(2),
        ))
        .map_err(draw_error)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Time series of other front ends (the live experiment): one line per algorithm and panel.
// ---------------------------------------------------------------------------------------

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

/// Draws panels stacked one above the other, one line per algorithm with its registry colour
/// and a marker every few points, in the style of the simulator's traces figure. Fails on an
/// algorithm name the registry does not know.
pub fn time_series_figure(registry: &Registry, spec: &TimeSeriesSpec) -> DrawResult<Figure> {
    let mut names: Vec<&str> = Vec::new();
    for panel in &spec.panels {
        for (name, _) in &panel.lines {
            registry.info(name)?;
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
        let plots = plots
            .titled(&spec.title, (FONT, CAPTION_SIZE))
            .map_err(draw_error)?;
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
            let mut chart = chart_builder(area)
                .build_cartesian_2d(x_range.clone(), y_range)
                .map_err(draw_error)?;
            styled_mesh(&mut chart.configure_mesh(), &spec.x_label, &panel.y_label)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| {
                    if v.abs() >= 1000.0 {
                        format!("{v:.0}")
                    } else {
                        format!("{v:.2}")
                    }
                })
                .draw()
                .map_err(draw_error)?;
            for (name, points) in &panel.lines {
                let color = algorithm_color(registry, name);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        points.clone(),
                        color.stroke_width(2),
                    )))
                    .map_err(draw_error)?;
                let every = (points.len() / 8).max(1);
                for point in points.iter().step_by(every) {
                    draw_marker(
                        &chart,
                        *point,
                        algorithm_marker(registry, name),
                        color,
                        Fill::Solid,
                        4,
                    )?;
                }
            }
        }
        draw_legend_strip(&legend, &line_legend(registry, &names))
    })?;
    Ok(Figure {
        name: spec.name.clone(),
        caption: spec.caption.clone(),
        svg,
    })
}

/// The curve of `cargo xtask bench-scale`: the seconds of one run against its tokens x steps,
/// both axes logarithmic. `scale` are the scale series' points `(tokens x steps, seconds)` in
/// increasing size, joined by a line; `c1` is C1's point, drawn on its own; the dashed line has
/// slope 1 through the smallest scale point: a run whose time grows as its tokens x steps stays
/// on it, one that grows faster bends above it.
pub fn bench_curve_svg(scale: &[(f64, f64)], c1: (f64, f64)) -> DrawResult<String> {
    let all: Vec<(f64, f64)> = scale.iter().copied().chain([c1]).collect();
    let (x_min, x_max) = all.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let (y_min, y_max) = all.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    if !(x_min > 0.0 && y_min > 0.0 && x_max.is_finite() && y_max.is_finite()) {
        return Err("every point needs positive, finite token-steps and seconds".into());
    }
    let x_range = (x_min / 2.0..x_max * 2.0).log_scale();
    let y_range = (y_min / 2.0..y_max * 2.0).log_scale();
    let scale_color = RGBColor(0xD5, 0x5E, 0x00);
    let c1_color = RGBColor(0x00, 0x72, 0xB2);
    render_svg((SINGLE.0, SINGLE.1 + 20), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 20 - LEGEND_HEIGHT);
        let mut chart = chart_builder(&plot)
            .caption(
                "One run's time against its tokens x steps",
                (FONT, CAPTION_SIZE),
            )
            .build_cartesian_2d(x_range, y_range)
            .map_err(draw_error)?;
        styled_mesh(
            &mut chart.configure_mesh(),
            "tokens x steps",
            "seconds per run (best repeat)",
        )
        .x_label_formatter(&|v| format!("{v:.0e}"))
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()
        .map_err(draw_error)?;
        if let Some(&(x0, y0)) = scale.first() {
            // Slope 1 through the smallest point, labelled where it leaves the plot.
            let (x_end, y_end) = (x_max * 2.0, y0 * x_max * 2.0 / x0);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_min / 2.0, y0 * x_min / 2.0 / x0), (x_end, y_end)],
                    4,
                    4,
                    RGBColor(0x88, 0x88, 0x88).stroke_width(1),
                ))
                .map_err(draw_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    "dashed: proportional to tokens x steps",
                    (x_min / 2.0 * 1.1, y_max * 1.8),
                    text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
                )))
                .map_err(draw_error)?;
        }
        chart
            .draw_series(LineSeries::new(
                scale.iter().copied(),
                scale_color.stroke_width(2),
            ))
            .map_err(draw_error)?;
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
