//! Sweeps: a series run at several points, each point setting numeric fields of the series by
//! their dotted path (`noise.sigma`, `ach.eps_on`, `zipf_s`, `tokens`, `load.lambda`,
//! `cluster.nodes`, ...).
//!
//! A series file's `[sweep]` table lists, per field, the values to run:
//!
//! ```toml
//! [sweep]
//! mode = "grid"                 # or "one-at-a-time" (the default)
//! "noise.sigma" = [0.0, 0.05, 0.10]
//! "ach.eps_on" = [0.08, 0.12]
//!
//! [sweep.linked]                # fields that follow a swept one: value = ratio * swept value
//! "ach.eps_off" = { of = "ach.eps_on", ratio = 0.4 }
//! ```
//!
//! In `one-at-a-time` mode every value of every field is one point (the other fields keep the
//! series' values); in `grid` mode every combination is one point, the first field outermost.
//! C5's short names `eps_on`, `kappa`, `tau`, `M_max` stand for `ach.eps_on`, ..., and its
//! `eps_off_ratio = r` for the link `"ach.eps_off" = { of = "ach.eps_on", ratio = r }`.
//!
//! Besides the fields of the series file, three paths set the initial cluster:
//! `cluster.nodes` (that many nodes, in the series' class proportions, largest remainder
//! first) and `cluster.strong`, `cluster.medium`, `cluster.weak` (that many nodes of the
//! class). The cluster lists its classes grouped: strong, then medium, then weak.
//!
//! This module holds the table and its points; [`crate::point`] sets a point's fields in a
//! configuration. It does no I/O and depends on no other module of the crate.

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a sweep combines the values of its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SweepMode {
    /// Every value of every field is a point of its own (C5's form).
    #[default]
    OneAtATime,
    /// Every combination of values is a point (cartesian product).
    Grid,
}

/// A field that follows a swept one: at every point that sets `of`, the field is set to
/// `ratio * value of of`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The swept field followed, as written in the sweep (short names allowed).
    pub of: String,
    /// The factor.
    pub ratio: f64,
}

/// The `[sweep]` table of a series.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Sweep {
    /// How values combine.
    pub mode: SweepMode,
    /// The swept fields, as written (dotted path or C5 short name), with their values, in file
    /// order (C5's short names alone: in C5's order `eps_on`, `kappa`, `tau`, `M_max`).
    pub fields: Vec<(String, Vec<f64>)>,
    /// C5's `eps_off_ratio`: `eps_off = ratio * eps_on` at the `eps_on` points.
    pub eps_off_ratio: Option<f64>,
    /// Linked fields (target path, link), in file order.
    pub linked: Vec<(String, Link)>,
}

/// C5's short names, in C5's point order, with the paths they stand for.
const SHORT_NAMES: [(&str, &str); 4] = [
    ("eps_on", "ach.eps_on"),
    ("kappa", "ach.kappa"),
    ("tau", "ach.tau"),
    ("M_max", "ach.M_max"),
];

/// The dotted path a field name of a sweep stands for.
pub fn resolve_path(name: &str) -> &str {
    SHORT_NAMES
        .iter()
        .find(|(short, _)| *short == name)
        .map_or(name, |(_, path)| path)
}

impl Sweep {
    /// True for a sweep written in C5's original form (short names only, default mode, no
    /// `linked` table). It serialises in that form, so its series' fingerprints stay as they
    /// were.
    fn is_c5_form(&self) -> bool {
        self.mode == SweepMode::OneAtATime
            && self.linked.is_empty()
            && self
                .fields
                .iter()
                .all(|(name, _)| SHORT_NAMES.iter().any(|(short, _)| short == name))
    }

    /// The values given for a field by its name as written.
    fn values(&self, name: &str) -> Vec<f64> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Every link, C5's `eps_off_ratio` included, as (target path, followed path, ratio).
    pub fn links(&self) -> Vec<(String, String, f64)> {
        let mut links: Vec<(String, String, f64)> = self
            .eps_off_ratio
            .map(|ratio| ("ach.eps_off".to_string(), "ach.eps_on".to_string(), ratio))
            .into_iter()
            .collect();
        links.extend(self.linked.iter().map(|(target, link)| {
            (
                resolve_path(target).to_string(),
                resolve_path(&link.of).to_string(),
                link.ratio,
            )
        }));
        links
    }

    /// The points, in order (see the module documentation).
    pub fn points(&self) -> Vec<SweepPoint> {
        let coordinate = |name: &str, value: f64| Coordinate {
            parameter: name.to_string(),
            value,
        };
        match self.mode {
            SweepMode::OneAtATime => self
                .fields
                .iter()
                .flat_map(|(name, values)| {
                    values.iter().map(move |&value| SweepPoint {
                        coordinates: vec![coordinate(name, value)],
                    })
                })
                .collect(),
            SweepMode::Grid => {
                let mut points = vec![SweepPoint {
                    coordinates: Vec::new(),
                }];
                for (name, values) in &self.fields {
                    points = points
                        .iter()
                        .flat_map(|point| {
                            values.iter().map(move |&value| {
                                let mut next = point.clone();
                                next.coordinates.push(coordinate(name, value));
                                next
                            })
                        })
                        .collect();
                }
                if self.fields.is_empty() {
                    Vec::new()
                } else {
                    points
                }
            }
        }
    }
}

/// C5's original `[sweep]` layout, kept for serialisation (field order matters).
#[derive(Serialize)]
#[allow(non_snake_case)]
struct C5Form {
    eps_on: Vec<f64>,
    eps_off_ratio: Option<f64>,
    kappa: Vec<f64>,
    tau: Vec<f64>,
    M_max: Vec<f64>,
}

impl Serialize for Sweep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_c5_form() {
            return C5Form {
                eps_on: self.values("eps_on"),
                eps_off_ratio: self.eps_off_ratio,
                kappa: self.values("kappa"),
                tau: self.values("tau"),
                M_max: self.values("M_max"),
            }
            .serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("mode", &self.mode)?;
        for (name, values) in &self.fields {
            map.serialize_entry(name, values)?;
        }
        if let Some(ratio) = self.eps_off_ratio {
            map.serialize_entry("eps_off_ratio", &ratio)?;
        }
        if !self.linked.is_empty() {
            map.serialize_entry("linked", &LinkedTable(&self.linked))?;
        }
        map.end()
    }
}

struct LinkedTable<'a>(&'a [(String, Link)]);

impl Serialize for LinkedTable<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (target, link) in self.0 {
            map.serialize_entry(target, link)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Sweep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Sweep, D::Error> {
        deserializer.deserialize_map(SweepVisitor)
    }
}

struct SweepVisitor;

impl<'de> Visitor<'de> for SweepVisitor {
    type Value = Sweep;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sweep table: mode, field paths with lists of numbers, eps_off_ratio, linked")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sweep, A::Error> {
        let mut sweep = Sweep::default();
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format!("sweep: {key} is given twice")));
            }
            seen.push(key.clone());
            match key.as_str() {
                "mode" => sweep.mode = map.next_value()?,
                "eps_off_ratio" => sweep.eps_off_ratio = map.next_value()?,
                "linked" => sweep.linked = map.next_value::<LinkedEntries>()?.0,
                _ => {
                    let values: Vec<f64> = map.next_value().map_err(|e| {
                        de::Error::custom(format!("sweep.{key}: must be a list of numbers: {e}"))
                    })?;
                    sweep.fields.push((key, values));
                }
            }
        }
        if sweep.is_c5_form() {
            // C5's short names alone run in C5's order, whatever the file order.
            sweep.fields.sort_by_key(|(name, _)| {
                SHORT_NAMES
                    .iter()
                    .position(|(short, _)| short == name)
                    .unwrap_or(usize::MAX)
            });
        }
        Ok(sweep)
    }
}

/// The `[sweep.linked]` table, in file order.
struct LinkedEntries(Vec<(String, Link)>);

impl<'de> Deserialize<'de> for LinkedEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LinkedEntries, D::Error> {
        struct LinkedVisitor;
        impl<'de> Visitor<'de> for LinkedVisitor {
            type Value = LinkedEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a table of field paths to { of = \"path\", ratio = number }")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LinkedEntries, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let link: Link = map.next_value()?;
                    entries.push((key, link));
                }
                Ok(LinkedEntries(entries))
            }
        }
        deserializer.deserialize_map(LinkedVisitor)
    }
}

/// One field of a sweep point and its value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coordinate {
    /// The field, as written in the sweep (dotted path or C5 short name).
    pub parameter: String,
    /// The value.
    pub value: f64,
}

/// One point of a sweep: the value of each swept field (one field in `one-at-a-time` mode).
///
/// In JSON a one-field point is `{"parameter": ..., "value": ...}` (C5's form) and a grid point
/// `{"coordinates": [{"parameter": ..., "value": ...}, ...]}`. In binary formats every point is
/// the pair (parameter, value) that C5's records have always held; a grid point's pair is (its
/// coordinates as JSON, NaN), which no one-field point can be (sweep values are finite).
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// The fields set and their values, in the sweep's field order.
    pub coordinates: Vec<Coordinate>,
}

impl SweepPoint {
    /// A point of one field.
    pub fn single(parameter: &str, value: f64) -> SweepPoint {
        SweepPoint {
            coordinates: vec![Coordinate {
                parameter: parameter.to_string(),
                value,
            }],
        }
    }

    /// The coordinate of a one-field point (`None` for a grid point).
    pub fn only(&self) -> Option<&Coordinate> {
        match self.coordinates.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// A name usable as a folder name, e.g. `eps_on=0.05` or `noise.sigma=0.05,ach.eps_on=0.08`.
    pub fn label(&self) -> String {
        self.coordinates
            .iter()
            .map(|c| format!("{}={}", c.parameter, c.value))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[derive(Serialize, Deserialize)]
struct OneFieldForm {
    parameter: String,
    value: f64,
}

#[derive(Serialize, Deserialize)]
struct GridForm {
    coordinates: Vec<Coordinate>,
}

impl Serialize for SweepPoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !serializer.is_human_readable() {
            let pair = match self.only() {
                Some(c) => (c.parameter.clone(), c.value),
                None => (
                    serde_json::to_string(&self.coordinates).map_err(serde::ser::Error::custom)?,
                    f64::NAN,
                ),
            };
            return OneFieldForm {
                parameter: pair.0,
                value: pair.1,
            }
            .serialize(serializer);
        }
        match self.only() {
            Some(c) => OneFieldForm {
                parameter: c.parameter.clone(),
                value: c.value,
            }
            .serialize(serializer),
            None => GridForm {
                coordinates: self.coordinates.clone(),
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for SweepPoint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SweepPoint, D::Error> {
        if !deserializer.is_human_readable() {
            let pair = OneFieldForm::deserialize(deserializer)?;
            if !pair.value.is_nan() {
                return Ok(SweepPoint::single(&pair.parameter, pair.value));
            }
            let coordinates = serde_json::from_str(&pair.parameter).map_err(de::Error::custom)?;
            return Ok(SweepPoint { coordinates });
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct AnyForm {
            parameter: Option<String>,
            value: Option<f64>,
            coordinates: Option<Vec<Coordinate>>,
        }
        let form = AnyForm::deserialize(deserializer)?;
        match (form.parameter, form.value, form.coordinates) {
            (Some(parameter), Some(value), None) => Ok(SweepPoint::single(&parameter, value)),
            (None, None, Some(coordinates)) => Ok(SweepPoint { coordinates }),
            _ => Err(de::Error::custom(
                "a sweep point has either parameter and value, or coordinates",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_points_are_the_cartesian_product_first_field_outermost() {
        let sweep: Sweep = toml::from_str(
            "mode = \"grid\"\n\"noise.sigma\" = [0.0, 0.1]\n\"ach.eps_on\" = [0.08, 0.12, 0.2]\n",
        )
        .unwrap();
        let labels: Vec<String> = sweep.points().iter().map(SweepPoint::label).collect();
        assert_eq!(labels.len(), 6);
        assert_eq!(labels[0], "noise.sigma=0,ach.eps_on=0.08");
        assert_eq!(labels[5], "noise.sigma=0.1,ach.eps_on=0.2");
    }

    #[test]
    fn points_serialise_in_c5s_form_when_they_have_one_field() {
        let one = SweepPoint::single("eps_on", 0.05);
        let json = serde_json::to_string(&one).unwrap();
        assert_eq!(json, r#"{"parameter":"eps_on","value":0.05}"#);
        assert_eq!(serde_json::from_str::<SweepPoint>(&json).unwrap(), one);
        let grid = SweepPoint {
            coordinates: vec![one.coordinates[0].clone(), one.coordinates[0].clone()],
        };
        let json = serde_json::to_string(&grid).unwrap();
        assert!(json.starts_with(r#"{"coordinates":["#));
        assert_eq!(serde_json::from_str::<SweepPoint>(&json).unwrap(), grid);
    }

    #[test]
    fn the_c5_form_round_trips_through_toml_unchanged() {
        let text =
            "eps_on = [0.05, 0.1]\neps_off_ratio = 0.4\nkappa = [0.05]\ntau = []\nM_max = [0.02]\n";
        let sweep: Sweep = toml::from_str(text).unwrap();
        assert_eq!(toml::to_string(&sweep).unwrap(), text);
        let reordered: Sweep =
            toml::from_str("M_max = [0.02]\nkappa = [0.05]\neps_on = [0.05, 0.1]\n").unwrap();
        assert_eq!(reordered.points()[0].label(), "eps_on=0.05");
    }
}
