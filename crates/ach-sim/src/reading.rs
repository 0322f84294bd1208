//! Readings: what a live cluster's telemetry shows of a node's load (opt-in).
//!
//! The paper's algorithms observe the composite load of the model (with the series' noise).
//! A live node's reading is not that load: its CPU also serves the cluster bus, the timers and
//! the observers, which a small CPU quota shows as a floor under the reading, and the reading
//! grows with the load at its own rate. A series' `[[readings]]` entries give the nodes they
//! name an affine reading, `offset + scale * load`, or one that bends at a knee (a reading
//! that saturates as the node's CPU quota runs out grows more slowly above it): the
//! algorithms observe it (their plans and the observed `D`), while the true loads (`D_true`,
//! recorded whenever readings are set) stay the model's. Without entries a series is exactly
//! the paper's.

use serde::{Deserialize, Serialize};

/// The reading of some nodes: `offset + scale * load`, up to the knee's load if there is one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// The nodes (of the initial cluster) read this way, each in at most one entry.
    pub nodes: Vec<u32>,
    /// The reading of an idle node (finite).
    pub offset: f64,
    /// The reading's growth per unit of load (finite, > 0), up to the knee.
    pub scale: f64,
    /// Where the reading bends, if it does (`None`: a line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Knee>,
}

/// The load above which a reading grows at another rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knee {
    /// The load at the knee (finite, > 0).
    pub load: f64,
    /// The reading's growth per unit of load above it (finite, >= 0).
    pub scale: f64,
}

/// What a reading of `offset + scale * load`, bent at `knee` if there is one, shows at
/// `load`: the one formula of a reading, for the simulator and for the fits of readings.
pub fn read(offset: f64, scale: f64, knee: Option<Knee>, load: f64) -> f64 {
    match knee {
        Some(knee) if load > knee.load => {
            offset + scale * knee.load + knee.scale * (load - knee.load)
        }
        _ => offset + scale * load,
    }
}

/// One node's reading of its load, as [`per_node`] gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct NodeReading {
    offset: f64,
    scale: f64,
    knee: Option<Knee>,
}

impl NodeReading {
    /// A node no entry names reads its load.
    pub(crate) const IDENTITY: NodeReading = NodeReading {
        offset: 0.0,
        scale: 1.0,
        knee: None,
    };

    /// What the node reads at `load`.
    pub(crate) fn read(&self, load: f64) -> f64 {
        read(self.offset, self.scale, self.knee, load)
    }
}

impl Reading {
    /// The rule an entry breaks, as (field, value, rule); `index` is the entry's, `earlier`
    /// the entries before it and `nodes` the initial cluster's size.
    pub(crate) fn check(
        &self,
        index: usize,
        earlier: &[Reading],
        nodes: usize,
    ) -> Result<(), (String, String, String)> {
        let field = |name: &str| format!("readings[{index}].{name}");
        if !self.offset.is_finite() {
            return Err((
                field("offset"),
                self.offset.to_string(),
                "must be finite".into(),
            ));
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err((field("scale"), self.scale.to_string(), "must be > 0".into()));
        }
        if let Some(knee) = self.knee {
            if !(knee.load.is_finite() && knee.load > 0.0) {
                return Err((
                    field("knee.load"),
                    knee.load.to_string(),
                    "must be finite and > 0".into(),
                ));
            }
            if !(knee.scale.is_finite() && knee.scale >= 0.0) {
                return Err((
                    field("knee.scale"),
                    knee.scale.to_string(),
                    "must be finite and >= 0".into(),
                ));
            }
        }
        for (k, &node) in self.nodes.iter().enumerate() {
            let field = format!("readings[{index}].nodes[{k}]");
            if node as usize >= nodes {
                return Err((
                    field,
                    node.to_string(),
                    format!("must name a node of the initial cluster (< {nodes})"),
                ));
            }
            let before = earlier.iter().flat_map(|r| &r.nodes);
            if before.chain(&self.nodes[..k]).any(|&n| n == node) {
                return Err((
                    field,
                    node.to_string(),
                    "is read by an earlier entry".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Every node's reading under `readings`, for `nodes` nodes ([`NodeReading::IDENTITY`] for a
/// node no entry names); `None` without entries.
pub(crate) fn per_node(readings: &[Reading], nodes: usize) -> Option<Vec<NodeReading>> {
    if readings.is_empty() {
        return None;
    }
    let mut maps = vec![NodeReading::IDENTITY; nodes];
    for reading in readings {
        for &node in &reading.nodes {
            maps[node as usize] = NodeReading {
                offset: reading.offset,
                scale: reading.scale,
                knee: reading.knee,
            };
        }
    }
    Some(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(nodes: &[u32]) -> Reading {
        Reading {
            nodes: nodes.to_vec(),
            offset: 0.3,
            scale: 0.8,
            knee: None,
        }
    }

    #[test]
    fn nodes_no_entry_names_read_their_load() {
        assert_eq!(per_node(&[], 3), None);
        let maps = per_node(&[reading(&[2])], 3).unwrap();
        assert_eq!(maps[0], NodeReading::IDENTITY);
        assert_eq!(maps[1].read(0.7), 0.7);
        assert_eq!(maps[2].read(0.5), 0.3 + 0.8 * 0.5);
    }

    #[test]
    fn a_reading_bends_at_its_knee_and_is_continuous_there() {
        let mut bent = reading(&[0]);
        bent.knee = Some(Knee {
            load: 0.4,
            scale: 0.1,
        });
        let map = per_node(&[bent], 1).unwrap()[0];
        assert_eq!(map.read(0.2), 0.3 + 0.8 * 0.2);
        assert_eq!(map.read(0.4), 0.3 + 0.8 * 0.4);
        assert!((map.read(0.9) - (0.3 + 0.8 * 0.4 + 0.1 * 0.5)).abs() < 1e-15);
        assert!((map.read(0.4 + 1e-12) - map.read(0.4)).abs() < 1e-11);
    }

    #[test]
    fn a_knee_is_written_only_when_there_is_one() {
        let line = serde_json::to_value(reading(&[0])).unwrap();
        assert!(line.get("knee").is_none(), "a line serialises as before");
        let back: Reading = serde_json::from_value(line).unwrap();
        assert_eq!(back, reading(&[0]));
    }

    #[test]
    fn every_rule_names_its_field() {
        let mut bad = reading(&[0]);
        bad.scale = 0.0;
        assert_eq!(bad.check(1, &[], 3).unwrap_err().0, "readings[1].scale");
        let mut bad = reading(&[0]);
        bad.offset = f64::NAN;
        assert_eq!(bad.check(0, &[], 3).unwrap_err().0, "readings[0].offset");
        assert_eq!(
            reading(&[3]).check(0, &[], 3).unwrap_err().0,
            "readings[0].nodes[0]"
        );
        let error = reading(&[1]).check(1, &[reading(&[1])], 3).unwrap_err();
        assert_eq!(
            (error.0.as_str(), error.2.as_str()),
            ("readings[1].nodes[0]", "is read by an earlier entry")
        );
        assert_eq!(reading(&[0, 1]).check(0, &[], 3), Ok(()));
        let mut bad = reading(&[0]);
        bad.knee = Some(Knee {
            load: 0.0,
            scale: 0.5,
        });
        assert_eq!(bad.check(0, &[], 3).unwrap_err().0, "readings[0].knee.load");
        bad.knee = Some(Knee {
            load: 0.5,
            scale: -0.1,
        });
        assert_eq!(
            bad.check(0, &[], 3).unwrap_err().0,
            "readings[0].knee.scale"
        );
    }
}
