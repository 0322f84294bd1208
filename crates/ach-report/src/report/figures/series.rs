//! The figures of one series from its run records: the boxplot and the ECDF of per-run D-bar,
//! and the traces of D(t) and the cumulative cost over time.

use std::ops::Range;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{
    Frame, LinearChart, LogZeroAxis, TickedAxis, chart, draw_band, draw_log_break, draw_marker,
    padded_range, render_svg,
};
use super::frontier::SINGLE;
use super::style::{
    CAPTION_SIZE, FONT, Fill, LEGEND_HEIGHT, Looks, Marker, NOTE_SIZE, SHADE_GREY,
    draw_legend_strip, text_style, text_width,
};
use super::sweep::STACKED;
use super::{Figure, FigureError};
use crate::report::load::{SeriesRuns, quantile};

/// Half-width of a box, in category units.
const BOX_HALF_WIDTH: f64 = 0.28;

/// The five numbers a box draws: whiskers, quartiles and median of sorted values.
#[derive(Clone, Copy, Debug, PartialEq)]
struct BoxStats {
    whisker_low: f64,
    q1: f64,
    median: f64,
    q3: f64,
    whisker_high: f64,
}

impl BoxStats {
    /// The box of sorted, non-empty `values`: whiskers to the furthest value within 1.5 IQR.
    fn of_sorted(values: &[f64]) -> BoxStats {
        let q1 = quantile(values, 0.25);
        let median = quantile(values, 0.5);
        let q3 = quantile(values, 0.75);
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
        BoxStats {
            whisker_low,
            q1,
            median,
            q3,
            whisker_high,
        }
    }
}

/// D-bar of every run per algorithm: a box per algorithm and a dot per run.
pub fn boxplot_figure(looks: Looks<'_>, runs: &SeriesRuns) -> Result<Figure, FigureError> {
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
        let title = format!("{}: D-bar of every run per algorithm", runs.name);
        let x_format = |v: &f64| {
            names
                .get(v.round().max(0.0) as usize)
                .map_or(String::new(), |n| looks.short(n).to_string())
        };
        let frame = Frame {
            caption: Some(&title),
            x_grid: false,
            ..Frame::new(
                "algorithm",
                "D-bar per run (fraction of load)",
                &x_format,
                &|v| format!("{v:.3}"),
            )
        };
        let mut chart = chart(
            &plot,
            TickedAxis::categories(count),
            y_range.clone(),
            &frame,
        )?;
        for (index, algorithm) in runs.algorithms.iter().enumerate() {
            let mut values = algorithm.d_mean_per_run.clone();
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            let color = looks.color(&algorithm.name);
            draw_box(
                &mut chart,
                index as f64,
                BoxStats::of_sorted(&values),
                color,
            )?;
            // Every run as a dot, spread deterministically across the box's width.
            let x = index as f64;
            chart.draw_series(algorithm.d_mean_per_run.iter().enumerate().map(|(k, &v)| {
                let offset = ((k as f64 * 0.618_033_988_75) % 1.0 - 0.5) * 0.36;
                Circle::new((x + offset, v), 2, BLACK.mix(0.55).filled())
            }))?;
        }
        // The plot shows boxes, so the legend shows filled squares in each box's colour.
        let mut entries = looks.legend(&names);
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

/// Draws one box with its median and whiskers at category `x`.
fn draw_box(
    chart: &mut LinearChartOf<'_, '_, TickedAxis>,
    x: f64,
    stats: BoxStats,
    color: RGBColor,
) -> Result<(), FigureError> {
    let half = BOX_HALF_WIDTH;
    let BoxStats {
        whisker_low,
        q1,
        median,
        q3,
        whisker_high,
    } = stats;
    chart.draw_series([
        Rectangle::new([(x - half, q1), (x + half, q3)], color.mix(0.2).filled()),
        Rectangle::new([(x - half, q1), (x + half, q3)], color.stroke_width(2)),
    ])?;
    chart.draw_series([
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
    ])?;
    Ok(())
}

/// A chart with the x axis `X` and a linear y axis.
type LinearChartOf<'a, 'b, X> =
    super::chart::SvgChart<'a, 'b, X, plotters::coord::types::RangedCoordf64>;

/// The empirical CDF of per-run D-bar, one step line per algorithm with a marker at its median.
pub fn ecdf_figure(looks: Looks<'_>, runs: &SeriesRuns) -> Result<Figure, FigureError> {
    let names: Vec<&str> = runs.algorithms.iter().map(|a| a.name.as_str()).collect();
    let x_range = padded_range(
        runs.algorithms
            .iter()
            .flat_map(|a| a.d_mean_per_run.iter().copied()),
        0.05,
    );
    let svg = render_svg((SINGLE.0, SINGLE.1 + 20), |root| {
        let (plot, legend) = root.split_vertically(SINGLE.1 + 20 - LEGEND_HEIGHT);
        let title = format!("{}: distribution of per-run D-bar", runs.name);
        let frame = Frame {
            caption: Some(&title),
            ..Frame::new(
                "D-bar per run (fraction of load)",
                "fraction of runs with D-bar ≤ x",
                &|v| format!("{v:.3}"),
                &|v| format!("{v:.1}"),
            )
        };
        let mut chart = chart(&plot, x_range.clone(), 0.0..1.02, &frame)?;
        for algorithm in &runs.algorithms {
            let mut values = algorithm.d_mean_per_run.clone();
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            let color = looks.color(&algorithm.name);
            chart.draw_series(LineSeries::new(
                ecdf_steps(&values, &x_range),
                color.stroke_width(2),
            ))?;
            let median = quantile(&values, 0.5);
            draw_marker(
                &chart,
                (median, 0.5),
                looks.marker(&algorithm.name),
                color,
                Fill::Solid,
                5,
            )?;
        }
        draw_legend_strip(&legend, &looks.line_legend(&names))
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

/// The corners of the step line of the empirical CDF of sorted `values` across `x_range`.
fn ecdf_steps(values: &[f64], x_range: &Range<f64>) -> Vec<(f64, f64)> {
    let n = values.len() as f64;
    let mut steps = vec![(x_range.start, 0.0)];
    for (k, &v) in values.iter().enumerate() {
        steps.push((v, k as f64 / n));
        steps.push((v, (k + 1) as f64 / n));
    }
    steps.push((x_range.end, 1.0));
    steps
}

/// Observed D(t) (top) and the cumulative cost M_keys(t) (bottom) over time: median and
/// inter-quartile band per algorithm.
pub fn traces_figure(looks: Looks<'_>, runs: &SeriesRuns) -> Result<Figure, FigureError> {
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
        let plots = plots.titled(
            &format!("{}: imbalance and cumulative cost over time", runs.name),
            (FONT, CAPTION_SIZE),
        )?;
        let (top, bottom) = plots.split_vertically((STACKED.1 - 30) / 2);
        d_trace_panel(&top, looks, runs, &x_range)?;
        cost_trace_panel(&bottom, looks, runs, &x_range)?;
        draw_legend_strip(&legend, &looks.plain_line_legend(&names))
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

/// The top panel of the traces: D(t) with the warm-up and the scenario's events.
fn d_trace_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    looks: Looks<'_>,
    runs: &SeriesRuns,
    x_range: &Range<f64>,
) -> Result<(), FigureError> {
    let d_range = padded_range(
        runs.algorithms
            .iter()
            .flat_map(|a| a.d_trace.low.iter().chain(&a.d_trace.high).copied()),
        0.05,
    );
    // Headroom above the data for the event labels, one row each.
    let headroom = (d_range.end - d_range.start) * 0.08 * runs.events.len() as f64;
    let d_range = d_range.start.max(0.0)..d_range.end + headroom;
    let frame = Frame {
        x_label_area: 36,
        ..Frame::new(
            "t (steps)",
            "D(t) (fraction of load)",
            &|v| format!("{v:.0}"),
            &|v| format!("{v:.2}"),
        )
    };
    let mut chart = chart(area, x_range.clone(), d_range.clone(), &frame)?;
    draw_time_marks(&mut chart, runs, d_range)?;
    for algorithm in &runs.algorithms {
        draw_band(
            &mut chart,
            &algorithm.d_trace,
            looks.color(&algorithm.name),
            |v| v,
        )?;
    }
    Ok(())
}

/// The bottom panel of the traces: the cumulative cost on a log axis with a zero lane.
fn cost_trace_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    looks: Looks<'_>,
    runs: &SeriesRuns,
    x_range: &Range<f64>,
) -> Result<(), FigureError> {
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
    let y_format = |v: &f64| axis.label(*v);
    let frame = Frame::new(
        "t (steps)",
        "cumulative M_keys (fraction of key space)",
        &|v| format!("{v:.0}"),
        &y_format,
    );
    let mut chart = chart(area, x_range.clone(), axis.ticked(), &frame)?;
    draw_log_break(&mut chart, axis, x_range.clone())?;
    let warmup = f64::from(runs.warmup);
    let range = axis.range();
    chart.draw_series(std::iter::once(Rectangle::new(
        [(0.0, range.start), (warmup, range.end)],
        SHADE_GREY.mix(0.35).filled(),
    )))?;
    for algorithm in &runs.algorithms {
        draw_band(
            &mut chart,
            &algorithm.m_cumulative,
            looks.color(&algorithm.name),
            |v| axis.position(v),
        )?;
    }
    let never_moved: Vec<&str> = runs
        .algorithms
        .iter()
        .filter(|a| {
            !a.m_cumulative.high.is_empty() && a.m_cumulative.high.iter().all(|v| *v <= 0.0)
        })
        .map(|a| looks.short(&a.name))
        .collect();
    if !never_moved.is_empty() {
        chart.draw_series(std::iter::once(Text::new(
            format!("0 throughout: {}", never_moved.join(", ")),
            (x_range.end * 0.98, axis.position(0.0) + 0.05),
            text_style(NOTE_SIZE, Pos::new(HPos::Right, VPos::Bottom)),
        )))?;
    }
    Ok(())
}

/// Shades the warm-up and marks scenario events on a time axis.
fn draw_time_marks(
    chart: &mut LinearChart<'_, '_>,
    runs: &SeriesRuns,
    y_range: Range<f64>,
) -> Result<(), FigureError> {
    chart.draw_series(std::iter::once(Rectangle::new(
        [(0.0, y_range.start), (f64::from(runs.warmup), y_range.end)],
        SHADE_GREY.mix(0.35).filled(),
    )))?;
    for (t, _) in &runs.events {
        let x = f64::from(*t);
        chart.draw_series(DashedLineSeries::new(
            vec![(x, y_range.start), (x, y_range.end)],
            5,
            4,
            RGBColor(0x44, 0x44, 0x44).stroke_width(1),
        ))?;
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
        chart.draw_series(std::iter::once(Rectangle::new(
            [(left, label_y), (left + width, label_y - line_height * 0.9)],
            WHITE.mix(0.85).filled(),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            text,
            (left, label_y),
            text_style(NOTE_SIZE, Pos::new(HPos::Left, VPos::Top)),
        )))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_reaches_its_whiskers_to_the_furthest_value_within_1_5_iqr() {
        let values = [1.0, 2.0, 3.0, 4.0, 100.0];
        let stats = BoxStats::of_sorted(&values);
        assert_eq!(stats.median, 3.0);
        assert!(stats.q1 <= stats.median && stats.median <= stats.q3);
        // 100 lies beyond 1.5 IQR: the upper whisker stops at 4.
        assert_eq!(stats.whisker_high, 4.0);
        assert_eq!(stats.whisker_low, 1.0);
    }

    #[test]
    fn the_ecdf_climbs_from_0_to_1_in_one_step_per_value() {
        let steps = ecdf_steps(&[0.2, 0.4], &(0.0..1.0));
        assert_eq!(
            steps,
            vec![
                (0.0, 0.0),
                (0.2, 0.0),
                (0.2, 0.5),
                (0.4, 0.5),
                (0.4, 1.0),
                (1.0, 1.0)
            ]
        );
    }
}
