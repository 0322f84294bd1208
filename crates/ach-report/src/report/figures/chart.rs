//! The one chart set-up every figure uses ([`chart`] with a [`Frame`]), the axes beyond
//! plotters' own ([`TickedAxis`], [`LogZeroAxis`]), and the marks several families draw:
//! markers, error bars, median bands, the break of a log axis.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::FigureError;
use super::style::{
    AXIS_LABEL_SIZE, CAPTION_SIZE, FONT, Fill, GUIDE_GREY, Marker, TICK_SIZE, marker_outline,
};
use crate::report::load::TraceBand;

/// A chart on an SVG drawing area.
pub type SvgChart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// A chart whose two axes are plain linear ranges.
pub type LinearChart<'a, 'b> = SvgChart<'a, 'b, RangedCoordf64, RangedCoordf64>;

/// Renders a figure of `size` pixels into an SVG string.
pub fn render_svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), FigureError>,
) -> Result<String, FigureError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

/// How a chart is framed: its axis descriptions and tick labels, and the house layout (a 10 px
/// margin, 42 px for the x labels, 58 px for the y labels, no minor grid lines).
pub struct Frame<'a> {
    /// Description of the x axis.
    pub x_desc: &'a str,
    /// Description of the y axis.
    pub y_desc: &'a str,
    /// Tick label of an x value (plotters' own when `None`).
    pub x_format: Option<&'a dyn Fn(&f64) -> String>,
    /// Tick label of a y value.
    pub y_format: &'a dyn Fn(&f64) -> String,
    /// A title drawn above the chart, inside its area.
    pub caption: Option<&'a str>,
    /// Grid lines at the x ticks (off for categories).
    pub x_grid: bool,
    /// How many x tick labels plotters aims at (its default when `None`).
    pub x_labels: Option<usize>,
    /// Height of the area under the chart for the x labels, in pixels.
    pub x_label_area: u32,
}

impl<'a> Frame<'a> {
    /// A frame in the house layout with the given axis descriptions and tick labels.
    pub fn new(
        x_desc: &'a str,
        y_desc: &'a str,
        x_format: &'a dyn Fn(&f64) -> String,
        y_format: &'a dyn Fn(&f64) -> String,
    ) -> Frame<'a> {
        Frame {
            x_desc,
            y_desc,
            x_format: Some(x_format),
            y_format,
            caption: None,
            x_grid: true,
            x_labels: None,
            x_label_area: 42,
        }
    }
}

/// Builds a chart over `x` and `y` on `area` and draws its frame: the one chart set-up of
/// every figure.
pub fn chart<'a, 'b, X, Y>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: X,
    y: Y,
    frame: &Frame<'_>,
) -> Result<SvgChart<'a, 'b, X::CoordDescType, Y::CoordDescType>, FigureError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(10)
        .x_label_area_size(frame.x_label_area)
        .y_label_area_size(58);
    if let Some(caption) = frame.caption {
        builder.caption(caption, (FONT, CAPTION_SIZE));
    }
    let mut chart = builder.build_cartesian_2d(x, y)?;
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(TRANSPARENT)
        .x_desc(frame.x_desc)
        .y_desc(frame.y_desc)
        .axis_desc_style((FONT, AXIS_LABEL_SIZE))
        .label_style((FONT, TICK_SIZE))
        .y_label_formatter(frame.y_format);
    if let Some(x_format) = frame.x_format {
        mesh.x_label_formatter(x_format);
    }
    if !frame.x_grid {
        mesh.disable_x_mesh();
    }
    if let Some(count) = frame.x_labels {
        mesh.x_labels(count);
    }
    mesh.draw()?;
    Ok(chart)
}

/// A padded linear range around values.
pub fn padded_range(values: impl IntoIterator<Item = f64>, pad_fraction: f64) -> Range<f64> {
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

/// A linear axis whose ticks are given explicitly (categories, decades of a log axis).
#[derive(Clone, Debug)]
pub struct TickedAxis {
    start: f64,
    end: f64,
    ticks: Vec<f64>,
}

impl TickedAxis {
    /// An axis over `range` with tick marks at `ticks`.
    pub fn new(range: Range<f64>, ticks: Vec<f64>) -> TickedAxis {
        TickedAxis {
            start: range.start,
            end: range.end,
            ticks,
        }
    }

    /// An axis of `count` categories at 0, 1, ..., count - 1.
    pub fn categories(count: usize) -> TickedAxis {
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
    pub fn break_position(self) -> f64 {
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
    pub fn range(self) -> Range<f64> {
        self.zero_position() - 0.25..f64::from(self.top_exponent) + 0.1
    }

    /// Tick positions: the zero lane and every decade.
    pub fn ticks(self) -> Vec<f64> {
        let mut ticks = vec![self.zero_position()];
        ticks.extend((self.floor_exponent..=self.top_exponent).map(f64::from));
        ticks
    }

    /// The axis as plotters draws it: the range with a tick at the zero lane and every decade.
    pub fn ticked(self) -> TickedAxis {
        TickedAxis::new(self.range(), self.ticks())
    }

    /// Tick label at an axis position.
    pub fn label(self, position: f64) -> String {
        if (position - self.zero_position()).abs() < 1e-9 {
            return "0".to_string();
        }
        decade_label(position.round() as i32)
    }
}

/// The label of the decade `10^exponent`: `1000`, `0.01`, `1e-4`.
pub fn decade_label(exponent: i32) -> String {
    match exponent {
        e if e >= 0 => format!("{}", 10u64.pow(e as u32)),
        -1 => "0.1".to_string(),
        -2 => "0.01".to_string(),
        -3 => "0.001".to_string(),
        e => format!("1e{e}"),
    }
}

/// Draws a marker of half-size `r` at a data coordinate of a chart.
pub fn draw_marker<X, Y>(
    chart: &SvgChart<'_, '_, X, Y>,
    at: (f64, f64),
    marker: Marker,
    color: RGBColor,
    fill: Fill,
    r: i32,
) -> Result<(), FigureError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let mut outline = marker_outline(marker, r);
    let polygon = Polygon::new(outline.clone(), fill.style(color));
    outline.push(outline[0]);
    let border = PathElement::new(outline, color.stroke_width(2));
    chart
        .plotting_area()
        .draw(&(EmptyElement::at(at) + polygon + border))?;
    Ok(())
}

/// A vertical error bar from `low` to `high` at `x` with caps `cap` wide on either side (in
/// x units).
pub fn error_bar(
    x: f64,
    (low, high): (f64, f64),
    cap: f64,
    color: RGBColor,
) -> [PathElement<(f64, f64)>; 3] {
    [
        PathElement::new(vec![(x, low), (x, high)], color.stroke_width(2)),
        PathElement::new(vec![(x - cap, low), (x + cap, low)], color.stroke_width(2)),
        PathElement::new(
            vec![(x - cap, high), (x + cap, high)],
            color.stroke_width(2),
        ),
    ]
}

/// Draws the dashed break line between the zero lane and the first decade of a log y axis.
pub fn draw_log_break<X>(
    chart: &mut SvgChart<'_, '_, X, TickedAxis>,
    axis: LogZeroAxis,
    x_span: Range<f64>,
) -> Result<(), FigureError>
where
    X: Ranged<ValueType = f64>,
{
    let y = axis.break_position();
    chart.draw_series(DashedLineSeries::new(
        vec![(x_span.start, y), (x_span.end, y)],
        4,
        4,
        GUIDE_GREY.stroke_width(1),
    ))?;
    Ok(())
}

/// Draws a median line with its band, mapping values through `map`.
pub fn draw_band<X, Y>(
    chart: &mut SvgChart<'_, '_, X, Y>,
    band: &TraceBand,
    color: RGBColor,
    map: impl Fn(f64) -> f64,
) -> Result<(), FigureError>
where
    X: Ranged<ValueType = f64>,
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
    chart.draw_series(std::iter::once(Polygon::new(
        outline,
        color.mix(0.18).filled(),
    )))?;
    chart.draw_series(LineSeries::new(
        band.t.iter().zip(&band.median).map(|(&t, &v)| (t, map(v))),
        color.stroke_width(2),
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_zero_axis_covers_its_decades_and_puts_zero_below_the_break() {
        let axis = LogZeroAxis::fit(&[0.0, 0.06, 30.0]);
        assert_eq!(axis.floor_exponent, -2);
        assert_eq!(axis.top_exponent, 2);
        assert!(axis.position(0.0) < axis.break_position());
        assert!(axis.break_position() < axis.position(0.01));
        assert_eq!(axis.label(axis.position(0.0)), "0");
        assert_eq!(axis.label(-2.0), "0.01");
        assert_eq!(axis.label(2.0), "100");
        let range = axis.range();
        assert!(axis.ticks().iter().all(|t| range.contains(t)));
        // Nothing positive: a default axis, never a panic.
        assert_eq!(LogZeroAxis::fit(&[0.0, f64::NAN]).floor_exponent, -3);
    }

    #[test]
    fn a_padded_range_contains_its_values_and_survives_a_constant_or_empty_input() {
        let range = padded_range([1.0, 2.0, f64::NAN], 0.1);
        assert!(range.start < 1.0 && range.end > 2.0);
        let constant = padded_range([0.0, 0.0], 0.1);
        assert!(constant.start < constant.end);
        assert_eq!(padded_range(std::iter::empty(), 0.1), 0.0..1.0);
    }

    #[test]
    fn categories_sit_on_integer_ticks_mapped_across_the_axis() {
        let axis = TickedAxis::categories(3);
        assert_eq!(axis.range(), -0.5..2.5);
        assert_eq!(axis.map(&-0.5, (0, 300)), 0);
        assert_eq!(axis.map(&1.0, (0, 300)), 150);
        assert_eq!(axis.map(&2.5, (0, 300)), 300);
    }

    #[test]
    fn the_chart_set_up_frames_a_chart_and_renders_a_document() {
        let svg = render_svg((200, 150), |root| {
            let frame = Frame {
                caption: Some("title"),
                ..Frame::new("x axis", "y axis", &|v| format!("{v:.1}"), &|v| {
                    format!("{v:.2}")
                })
            };
            let chart = chart(root, 0.0..1.0, 0.0..2.0, &frame)?;
            draw_marker(&chart, (0.5, 1.0), Marker::Star, BLACK, Fill::Solid, 5)
        })
        .expect("a figure");
        for text in ["title", "x axis", "y axis", "<polygon"] {
            assert!(svg.contains(text), "{text}");
        }
    }
}
