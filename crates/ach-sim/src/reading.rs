//! Readings: what a live cluster's telemetry shows of a node's load (opt-in).
//!
//! The paper's algorithms observe the composite load of the model (with the series' noise).
//! A live node's reading is not that load: its CPU also serves the cluster bus, the timers and
//! the observers, which a small CPU quota shows as a floor under the reading, and the reading
//! grows with the load at its own rate. A series' `[[readings]]` entries give the nodes they
//! name an affine reading, `offset + scale * load`: the algorithms observe it (their plans
//! and the observed `D`), while the true loads (`D_true`, recorded whenever readings are set)
//! stay the model's. Without entries a series is exactly the paper's.

use serde::{Deserialize, Serialize};

/// The reading of some nodes: `offset + scale * load`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// The nodes (of the initial cluster) read this way, each in at most one entry.
    pub nodes: Vec<u32>,
    /// The reading of an idle node (finite).
    pub offset: f64,
    /// The reading's growth per unit of load (finite, > 0).
    pub scale: f64,
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

/// Every node's (offset, scale) under `readings`, for `nodes` nodes ((0, 1) for a node no
/// entry names); `None` without entries.
pub(crate) fn per_node(readings: &[Reading], nodes: usize) -> Option<Vec<(f64, f64)>> {
    if readings.is_empty() {
        return None;
    }
    let mut maps = vec![(0.0, 1.0); nodes];
    for reading in readings {
        for &node in &reading.nodes {
            maps[node as usize] = (reading.offset, reading.scale);
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
        }
    }

    #[test]
    fn nodes_no_entry_names_read_their_load() {
        assert_eq!(per_node(&[], 3), None);
        let maps = per_node(&[reading(&[2])], 3).unwrap();
        assert_eq!(maps, [(0.0, 1.0), (0.0, 1.0), (0.3, 0.8)]);
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
    }
}
