//! How an algorithm is drawn: its colour and marker, by name (rendering data, so they live in
//! the report, not in the simulator's registry).
//!
//! Temporary: today's colours of the built-in algorithms (Okabe-Ito, safe for colour-blind
//! readers) and of the live experiment's `redis-cli` arm, and one style for every other name,
//! until the report gets a style a user can set per algorithm.

use ach_sim::algorithms::names;

/// A marker shape of the figures, so that colour is never the only cue.
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
}

/// The colour (RGB) and marker of an algorithm's marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// Colour, RGB.
    pub color: [u8; 3],
    /// Marker shape.
    pub marker: Marker,
}

/// The style of every name without one of its own: Okabe-Ito's sky blue, a cross.
pub const OTHER: Style = Style {
    color: [0x56, 0xB4, 0xE9],
    marker: Marker::Cross,
};

/// The style of the algorithm called `name`.
pub fn algorithm_style(name: &str) -> Style {
    let styles = [
        (names::STATIC_W, [0x00, 0x72, 0xB2], Marker::Circle),
        (names::STATIC_WT, [0xE6, 0x9F, 0x00], Marker::Square),
        (names::DYNAMIC_R, [0x00, 0x9E, 0x73], Marker::Triangle),
        (names::BOUNDED_LOADS, [0xCC, 0x79, 0xA7], Marker::Diamond),
        (names::ACH, [0xD5, 0x5E, 0x00], Marker::Star),
        (names::ACH_F, [0x00, 0x00, 0x00], Marker::Cross),
        (names::CH_BL, [0x8C, 0x56, 0x4B], Marker::Plus),
        // The live experiment's `redis-cli --cluster rebalance` arm: grey.
        ("redis-cli", [0x66, 0x66, 0x66], Marker::Cross),
    ];
    styles
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or(OTHER, |&(_, color, marker)| Style { color, marker })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_has_its_own_colour_and_marker() {
        let registry = ach_sim::Registry::built_in();
        let styles: Vec<Style> = registry
            .iter()
            .map(|a| algorithm_style(&a.info.name))
            .collect();
        let mut colors: Vec<[u8; 3]> = styles.iter().map(|s| s.color).collect();
        colors.sort();
        colors.dedup();
        assert_eq!(colors.len(), styles.len());
        let mut markers: Vec<String> = styles.iter().map(|s| format!("{:?}", s.marker)).collect();
        markers.sort();
        markers.dedup();
        assert_eq!(markers.len(), styles.len());
        assert!(!styles.contains(&OTHER));
    }
}
