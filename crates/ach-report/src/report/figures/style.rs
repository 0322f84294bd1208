//! The house style of every figure: fonts and sizes, each algorithm's colour and marker (the
//! style table), marker outlines, and the legend strip under the panels.
//!
//! Colours and markers are rendering data, so they live here and not in the simulator's
//! registry. The built-in algorithms keep the colours of the Okabe-Ito palette (safe for
//! colour-blind readers) and one marker each, so that colour is never the only cue. A user's
//! binary gives its own algorithm a style with [`Styles::set`]; an algorithm without one gets
//! the next entry of a fixed fallback palette, by its place among the registry's unstyled
//! algorithms, so the same registry always draws the same colours.

use ach_sim::Registry;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::FigureError;

/// The font family of every text.
pub const FONT: &str = "sans-serif";
/// Title above the panels.
pub const CAPTION_SIZE: u32 = 17;
/// Axis descriptions.
pub const AXIS_LABEL_SIZE: u32 = 15;
/// Tick labels and legend entries.
pub const TICK_SIZE: u32 = 13;
/// Notes written on a chart.
pub const NOTE_SIZE: u32 = 12;
/// Height of the legend strip under the panels.
pub const LEGEND_HEIGHT: u32 = 52;

/// Grey of break marks and leader lines.
pub const GUIDE_GREY: RGBColor = RGBColor(0x88, 0x88, 0x88);
/// Grey of shaded regions (warm-up, outside applicability).
pub const SHADE_GREY: RGBColor = RGBColor(0xBB, 0xBB, 0xBB);

/// A marker shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marker {
    /// A circle.
    Circle,
    /// A square.
    Square,
    /// A triangle, point up.
    Triangle,
    /// A diamond.
    Diamond,
    /// A five-pointed star.
    Star,
    /// A cross (an x).
    Cross,
    /// A plus sign (an upright cross).
    Plus,
    /// A triangle, point down.
    TriangleDown,
    /// A regular pentagon, point up.
    Pentagon,
    /// A regular hexagon.
    Hexagon,
    /// A wide bar (a dash).
    Dash,
}

/// How an algorithm is drawn: its colour (RGB) and its marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// Colour of its lines, bands and markers, RGB.
    pub color: [u8; 3],
    /// Its marker shape.
    pub marker: Marker,
}

impl Style {
    /// A style.
    pub const fn new(color: [u8; 3], marker: Marker) -> Style {
        Style { color, marker }
    }

    /// The colour as plotters takes it.
    pub fn rgb(self) -> RGBColor {
        let [r, g, b] = self.color;
        RGBColor(r, g, b)
    }
}

/// The styles of the built-in algorithms (Okabe-Ito colours).
const BUILT_IN: [(&str, Style); 11] = [
    ("Static-W", Style::new([0x00, 0x72, 0xB2], Marker::Circle)),
    ("Static-Wt", Style::new([0xE6, 0x9F, 0x00], Marker::Square)),
    (
        "Dynamic-R",
        Style::new([0x00, 0x9E, 0x73], Marker::Triangle),
    ),
    (
        "Bounded-Loads",
        Style::new([0xCC, 0x79, 0xA7], Marker::Diamond),
    ),
    ("ACH", Style::new([0xD5, 0x5E, 0x00], Marker::Star)),
    ("ACH-F", Style::new([0x00, 0x00, 0x00], Marker::Cross)),
    ("CH-BL", Style::new([0x8C, 0x56, 0x4B], Marker::Plus)),
    (
        "ACH-H",
        Style::new([0x99, 0x00, 0x99], Marker::TriangleDown),
    ),
    ("ACH-A", Style::new([0x66, 0x99, 0x00], Marker::Pentagon)),
    ("ACH-HA", Style::new([0x33, 0x66, 0xCC], Marker::Hexagon)),
    ("Oracle", Style::new([0x80, 0x80, 0x80], Marker::Dash)),
];

/// Styles for algorithms the table does not list, in order: the two Okabe-Ito colours the
/// built-ins leave (sky blue, yellow), then Paul Tol's muted colours, each with a marker that
/// differs from its neighbours'.
const FALLBACK: [Style; 8] = [
    Style::new([0x56, 0xB4, 0xE9], Marker::Cross),
    Style::new([0xF0, 0xE4, 0x42], Marker::Plus),
    Style::new([0x88, 0x22, 0x55], Marker::Circle),
    Style::new([0x44, 0xAA, 0x99], Marker::Square),
    Style::new([0x33, 0x22, 0x88], Marker::Triangle),
    Style::new([0x99, 0x99, 0x33], Marker::Diamond),
    Style::new([0xAA, 0x44, 0x99], Marker::Star),
    Style::new([0x66, 0x66, 0x66], Marker::Cross),
];

/// The style table: one style per algorithm name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Styles {
    entries: Vec<(String, Style)>,
}

impl Default for Styles {
    fn default() -> Styles {
        Styles::built_in()
    }
}

impl Styles {
    /// The built-in algorithms' styles.
    pub fn built_in() -> Styles {
        Styles {
            entries: BUILT_IN
                .iter()
                .map(|(name, style)| (name.to_string(), *style))
                .collect(),
        }
    }

    /// Gives `name` its style (replacing any it had).
    pub fn set(&mut self, name: &str, style: Style) {
        match self.entries.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = style,
            None => self.entries.push((name.to_string(), style)),
        }
    }

    /// [`Styles::set`], by value: `Styles::built_in().with("Greedy-One", style)`.
    pub fn with(mut self, name: &str, style: Style) -> Styles {
        self.set(name, style);
        self
    }

    /// The style the table gives `name`, if any.
    pub fn get(&self, name: &str) -> Option<Style> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, style)| *style)
    }

    /// The style `name` is drawn in: its entry, or else the fallback palette's entry at its
    /// place among the registry's algorithms that have none (a name the registry does not
    /// know: by a stable hash of the name).
    pub fn resolve(&self, registry: &Registry, name: &str) -> Style {
        if let Some(style) = self.get(name) {
            return style;
        }
        let unstyled = registry
            .iter()
            .map(|a| a.info.name.as_str())
            .filter(|n| self.get(n).is_none())
            .position(|n| n == name);
        let index = unstyled.unwrap_or_else(|| stable_hash(name) as usize);
        FALLBACK[index % FALLBACK.len()]
    }
}

/// FNV-1a of a name: the same on every machine and every run.
fn stable_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a figure knows about algorithms: their labels (from the registry) and their styles.
#[derive(Clone, Copy, Debug)]
pub struct Looks<'a> {
    /// The algorithms, for their labels.
    pub registry: &'a Registry,
    /// Their styles.
    pub styles: &'a Styles,
}

impl<'a> Looks<'a> {
    /// The colour of an algorithm.
    pub fn color(&self, name: &str) -> RGBColor {
        self.styles.resolve(self.registry, name).rgb()
    }

    /// The marker of an algorithm.
    pub fn marker(&self, name: &str) -> Marker {
        self.styles.resolve(self.registry, name).marker
    }

    /// The short label of an algorithm (`A0`), or its name when the registry does not know it.
    pub fn short(&self, name: &'a str) -> &'a str {
        self.registry
            .get(name)
            .map_or(name, |a| a.info.label.as_str())
    }

    /// The long label of an algorithm (`Static-W (A0)`), or its name when the registry does
    /// not know it.
    pub fn long(&self, name: &str) -> String {
        self.registry
            .get(name)
            .map_or_else(|| name.to_string(), |a| a.info.long_label())
    }

    /// One legend entry per algorithm: its long label and solid marker.
    pub fn legend(&self, names: &[&str]) -> Vec<LegendEntry> {
        names
            .iter()
            .map(|name| LegendEntry {
                label: self.long(name),
                color: self.color(name),
                marker: Some(self.marker(name)),
                fill: Fill::Solid,
                line: false,
            })
            .collect()
    }

    /// The legend of a figure that draws every algorithm as a line with its marker.
    pub fn line_legend(&self, names: &[&str]) -> Vec<LegendEntry> {
        let mut entries = self.legend(names);
        for entry in &mut entries {
            entry.line = true;
        }
        entries
    }

    /// The legend of a figure that draws every algorithm as a line without markers.
    pub fn plain_line_legend(&self, names: &[&str]) -> Vec<LegendEntry> {
        let mut entries = self.line_legend(names);
        for entry in &mut entries {
            entry.marker = None;
        }
        entries
    }
}

/// How a marker is painted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// In its colour.
    Solid,
    /// White inside its coloured outline.
    Hollow,
}

impl Fill {
    /// The fill style of a marker of `color`.
    pub fn style(self, color: RGBColor) -> ShapeStyle {
        match self {
            Fill::Solid => color.filled(),
            Fill::Hollow => WHITE.filled(),
        }
    }
}

/// The outline of a marker of half-size `r` around the origin, in pixels.
pub fn marker_outline(marker: Marker, r: i32) -> Vec<(i32, i32)> {
    let rounded = |(x, y): (f64, f64)| (x.round() as i32, y.round() as i32);
    match marker {
        Marker::Circle => (0..16)
            .map(|k| {
                let angle = std::f64::consts::TAU * f64::from(k) / 16.0;
                rounded((f64::from(r) * angle.cos(), f64::from(r) * angle.sin()))
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
                let radius = f64::from(r) * if k % 2 == 0 { 1.15 } else { 0.5 };
                let angle =
                    -std::f64::consts::FRAC_PI_2 + std::f64::consts::PI * f64::from(k) / 5.0;
                rounded((radius * angle.cos(), radius * angle.sin()))
            })
            .collect(),
        Marker::Cross => plus_outline(r)
            .into_iter()
            .map(|(x, y)| {
                // The plus sign turned by 45 degrees.
                let half = std::f64::consts::FRAC_1_SQRT_2;
                rounded(((x - y) * half, (x + y) * half))
            })
            .collect(),
        Marker::Plus => plus_outline(r).into_iter().map(rounded).collect(),
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

/// A text style in the house font, black.
pub fn text_style(size: u32, pos: Pos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font())
        .color(&BLACK)
        .pos(pos)
}

/// Approximate width of a text in pixels (sans-serif averages about 0.55 em per character).
pub fn text_width(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * f64::from(size) * 0.55).ceil() as i32
}

/// One entry of a legend strip.
#[derive(Clone, Debug)]
pub struct LegendEntry {
    /// The text.
    pub label: String,
    /// The colour of its line and marker.
    pub color: RGBColor,
    /// Its marker, if it has one.
    pub marker: Option<Marker>,
    /// How the marker is painted.
    pub fill: Fill,
    /// Whether a short line is drawn through the marker.
    pub line: bool,
}

/// Width of a legend entry in pixels: its symbol, its text and the gap after it.
fn entry_width(entry: &LegendEntry) -> i32 {
    30 + text_width(&entry.label, TICK_SIZE) + 18
}

/// The entries in rows that fit `width` pixels, in order (a row holds at least one entry).
fn legend_rows(entries: &[LegendEntry], width: i32) -> Vec<Vec<&LegendEntry>> {
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
    rows
}

/// Draws entries centred in rows across `area` (wrapping when a row is full).
pub fn draw_legend_strip(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[LegendEntry],
) -> Result<(), FigureError> {
    let (width, height) = area.dim_in_pixel();
    let width = width as i32;
    let rows = legend_rows(entries, width);
    let row_height = 20;
    let top = (height as i32 - row_height * rows.len() as i32) / 2 + row_height / 2;
    let style = text_style(TICK_SIZE, Pos::new(HPos::Left, VPos::Center));
    for (index, row) in rows.iter().enumerate() {
        let total: i32 = row.iter().map(|e| entry_width(e)).sum();
        let mut x = (width - total) / 2;
        let y = top + index as i32 * row_height;
        for entry in row {
            if entry.line {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    entry.color.stroke_width(3),
                ))?;
            }
            if let Some(marker) = entry.marker {
                let mut outline: Vec<(i32, i32)> = marker_outline(marker, 6)
                    .into_iter()
                    .map(|(dx, dy)| (x + 12 + dx, y + dy))
                    .collect();
                area.draw(&Polygon::new(
                    outline.clone(),
                    entry.fill.style(entry.color),
                ))?;
                outline.push(outline[0]);
                area.draw(&PathElement::new(outline, entry.color.stroke_width(2)))?;
            }
            area.draw(&Text::new(entry.label.clone(), (x + 30, y), style.clone()))?;
            x += entry_width(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_ins_keep_their_colours_and_markers() {
        let registry = Registry::built_in();
        let styles = Styles::built_in();
        let ach = styles.resolve(&registry, "ACH");
        assert_eq!(ach, Style::new([0xD5, 0x5E, 0x00], Marker::Star));
        let a0 = styles.resolve(&registry, "Static-W");
        assert_eq!(a0, Style::new([0x00, 0x72, 0xB2], Marker::Circle));
        let colors: Vec<[u8; 3]> = BUILT_IN.iter().map(|(_, s)| s.color).collect();
        for (k, color) in colors.iter().enumerate() {
            assert!(!colors[k + 1..].contains(color), "colour {k} repeats");
        }
    }

    #[test]
    fn a_user_style_wins_and_unstyled_algorithms_fall_back_in_registry_order() {
        let registry = Registry::built_in();
        // An empty table leaves every built-in unstyled: they take the fallback in order.
        let empty = Styles {
            entries: Vec::new(),
        };
        assert_eq!(empty.resolve(&registry, "Static-W"), FALLBACK[0]);
        assert_eq!(empty.resolve(&registry, "Static-Wt"), FALLBACK[1]);
        let mine = Style::new([1, 2, 3], Marker::Diamond);
        let styled = empty.with("Static-W", mine);
        assert_eq!(styled.resolve(&registry, "Static-W"), mine);
        // "Static-Wt" is now the first unstyled algorithm, so it takes the first fallback.
        assert_eq!(styled.resolve(&registry, "Static-Wt"), FALLBACK[0]);
        // A name the registry does not know gets a stable fallback.
        let unknown = styled.resolve(&registry, "Elsewhere");
        assert_eq!(
            unknown,
            FALLBACK[(stable_hash("Elsewhere") % FALLBACK.len() as u64) as usize]
        );
        // Setting a style twice keeps one entry.
        let twice = Styles::built_in().with("ACH", mine).with("ACH", mine);
        assert_eq!(twice.entries.len(), BUILT_IN.len());
    }

    #[test]
    fn every_marker_outline_is_a_closed_shape_within_its_size() {
        for marker in [
            Marker::Circle,
            Marker::Square,
            Marker::Triangle,
            Marker::Diamond,
            Marker::Star,
            Marker::Cross,
            Marker::Plus,
            Marker::TriangleDown,
            Marker::Pentagon,
            Marker::Hexagon,
            Marker::Dash,
        ] {
            let outline = marker_outline(marker, 6);
            assert!(outline.len() >= 3, "{marker:?}");
            assert!(
                outline.iter().all(|(x, y)| x.abs() <= 7 && y.abs() <= 7),
                "{marker:?}: {outline:?}"
            );
        }
    }

    #[test]
    fn legend_rows_wrap_when_full_and_never_leave_a_row_empty() {
        let entry = |label: &str| LegendEntry {
            label: label.to_string(),
            color: BLACK,
            marker: None,
            fill: Fill::Solid,
            line: true,
        };
        let entries: Vec<LegendEntry> = (0..6).map(|k| entry(&format!("algorithm {k}"))).collect();
        let rows = legend_rows(&entries, 300);
        assert!(rows.len() > 1);
        assert!(rows.iter().all(|row| !row.is_empty()));
        assert_eq!(rows.iter().map(Vec::len).sum::<usize>(), 6);
        // One entry wider than the strip still gets a row of its own.
        let wide = [entry(&"x".repeat(100))];
        assert_eq!(legend_rows(&wide, 100).len(), 1);
    }
}
