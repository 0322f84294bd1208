//! Figures 2 and 3: D-bar and M_cum per algorithm of one series, side by side.

use ach_sim::summary::{AlgorithmSummary, MatrixSummary, SeriesSummary};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{
    Frame, LogZeroAxis, TickedAxis, chart, draw_log_break, draw_marker, error_bar, padded_range,
    render_svg,
};
use super::style::{CAPTION_SIZE, FONT, Fill, LEGEND_HEIGHT, Looks, NOTE_SIZE, text_style};
use super::{Drawn, Figure, FigureError};

/// Size of a figure with two panels side by side.
pub const DOUBLE: (u32, u32) = (760, 420);

/// Half-width of an error bar's caps on a category axis.
const CATEGORY_CAP: f64 = 0.08;

/// What a D-bar / M_cum figure shows.
struct DotFigureSpec<'a> {
    name: &'a str,
    title: &'a str,
    caption: String,
    /// Write each algorithm's violation count above its D-bar point (red cross when > 0).
    mark_violations: bool,
}

/// Adds Fig. 2 (C1) and Fig. 3 (C3), or notes that their series is missing.
pub fn add_figures(drawn: &mut Drawn, looks: Looks<'_>, summary: &MatrixSummary) {
    let series = |name: &str| summary.series.iter().find(|s| s.name == name);
    match series("C1") {
        Some(c1) => drawn.keep(
            "fig2_c1",
            dot_figure(
                looks,
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
        ),
        None => drawn.note("fig2_c1: not drawn, series C1 is not in the results".to_string()),
    }
    match series("C3") {
        Some(c3) => drawn.keep(
            "fig3_c3",
            dot_figure(
                looks,
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
        ),
        None => drawn.note("fig3_c3: not drawn, series C3 is not in the results".to_string()),
    }
}

fn dot_figure(
    looks: Looks<'_>,
    series: &SeriesSummary,
    spec: &DotFigureSpec<'_>,
) -> Result<Figure, FigureError> {
    let algorithms: Vec<&AlgorithmSummary> = series.algorithms.iter().collect();
    let names: Vec<&str> = algorithms.iter().map(|a| a.name.as_str()).collect();
    let svg = render_svg(DOUBLE, |root| {
        let (plots, legend) = root.split_vertically(DOUBLE.1 - LEGEND_HEIGHT);
        let plots = plots.titled(spec.title, (FONT, CAPTION_SIZE))?;
        let (left, right) = plots.split_horizontally(DOUBLE.0 / 2);
        let x_label = |v: &f64| {
            let index = v.round();
            if (v - index).abs() < 1e-6 && index >= 0.0 {
                names
                    .get(index as usize)
                    .map_or(String::new(), |n| looks.short(n).to_string())
            } else {
                String::new()
            }
        };
        d_bar_panel(&left, looks, &algorithms, spec, &x_label)?;
        m_cum_panel(&right, looks, &algorithms, &x_label)?;
        super::style::draw_legend_strip(&legend, &looks.legend(&names))
    })?;
    Ok(Figure {
        name: spec.name.to_string(),
        caption: spec.caption.clone(),
        svg,
    })
}

/// The left panel: D-bar with its CI95 per algorithm, and the violation counts on request.
fn d_bar_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    looks: Looks<'_>,
    algorithms: &[&AlgorithmSummary],
    spec: &DotFigureSpec<'_>,
    x_label: &dyn Fn(&f64) -> String,
) -> Result<(), FigureError> {
    let d_values = algorithms.iter().flat_map(|a| {
        let ci = a.d_mean.ci95.unwrap_or(0.0);
        [a.d_mean.mean - ci, a.d_mean.mean + ci]
    });
    let mut y_range = padded_range(d_values, 0.15);
    if spec.mark_violations {
        y_range.end += (y_range.end - y_range.start) * 0.12;
    }
    let frame = Frame {
        x_grid: false,
        ..Frame::new(
            "algorithm",
            "D-bar (mean imbalance, fraction of load)",
            x_label,
            &|v| format!("{v:.3}"),
        )
    };
    let count = algorithms.len().max(1);
    let mut chart = chart(area, TickedAxis::categories(count), y_range.clone(), &frame)?;
    for (index, a) in algorithms.iter().enumerate() {
        let x = index as f64;
        let color = looks.color(&a.name);
        let ci = a.d_mean.ci95.unwrap_or(0.0);
        chart.draw_series(error_bar(
            x,
            (a.d_mean.mean - ci, a.d_mean.mean + ci),
            CATEGORY_CAP,
            color,
        ))?;
        draw_marker(
            &chart,
            (x, a.d_mean.mean),
            looks.marker(&a.name),
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
            chart.draw_series(std::iter::once(Text::new(
                text,
                (x, label_y),
                text_style(NOTE_SIZE, Pos::new(HPos::Center, VPos::Center)).color(&text_color),
            )))?;
        }
    }
    Ok(())
}

/// The right panel: M_cum per algorithm on the log axis with a zero lane.
fn m_cum_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    looks: Looks<'_>,
    algorithms: &[&AlgorithmSummary],
    x_label: &dyn Fn(&f64) -> String,
) -> Result<(), FigureError> {
    let axis = LogZeroAxis::fit(
        &algorithms
            .iter()
            .flat_map(|a| {
                let ci = a.m_cum.ci95.unwrap_or(0.0);
                [a.m_cum.mean, a.m_cum.mean + ci]
            })
            .collect::<Vec<_>>(),
    );
    let y_label = |v: &f64| axis.label(*v);
    let frame = Frame {
        x_grid: false,
        ..Frame::new(
            "algorithm",
            "M_cum (fraction of key space, log)",
            x_label,
            &y_label,
        )
    };
    let count = algorithms.len().max(1);
    let mut chart = chart(area, TickedAxis::categories(count), axis.ticked(), &frame)?;
    draw_log_break(&mut chart, axis, -0.5..count as f64 - 0.5)?;
    for (index, a) in algorithms.iter().enumerate() {
        let x = index as f64;
        let color = looks.color(&a.name);
        let ci = a.m_cum.ci95.unwrap_or(0.0);
        if ci > 0.0 {
            chart.draw_series(error_bar(
                x,
                (
                    axis.position(a.m_cum.mean - ci),
                    axis.position(a.m_cum.mean + ci),
                ),
                CATEGORY_CAP,
                color,
            ))?;
        }
        let y = axis.position(a.m_cum.mean);
        draw_marker(&chart, (x, y), looks.marker(&a.name), color, Fill::Solid, 6)?;
    }
    Ok(())
}
