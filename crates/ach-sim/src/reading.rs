//! Readings: what a live cluster's telemetry shows of a node's load (opt-in).
//!
//! The paper's algorithms observe the composite load of the model (with the series' noise).
//! A live node's reading is not that load: its CPU also serves the cluster bus, the timers and
//! the observers, which a small CPU quota shows as a floor under the reading, and the reading
//! grows with the load at its own rate. A series' `[[readings]]` entries give the nodes they
//! name an affine reading, `offset + scale * load`, or one that bends at a knee (a reading
//! that saturates as the node's CPU quota runs out grows more slowly above it): the
//! algorithms observe it (their plans and the observed `D`), while the true loads (`D_true`,
//! recorded whenever readings are set) stay the model's. An entry may also say how its
//! readings scatter about the line ([`Scatter`]): each node's reading is then off by a
//! deviation drawn every step from the run's own `readings` stream. Without entries a series
//! is exactly the paper's.

use rand::Rng;
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::streams::{Stream, stream};

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
    /// How the readings scatter about the line, if they do (`None`: they lie on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scatter: Option<Scatter>,
}

/// How a node's readings scatter about its line: every step a reading is off by a Gaussian
/// deviation of standard deviation `sd`, and a node's deviations follow an autoregressive
/// process of order one whose lag-one autocorrelation is `autocorrelation` (0: independent
/// from step to step; near 1: a deviation that persists). The process starts stationary, so
/// every step's deviation has the same spread.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scatter {
    /// The deviations' standard deviation (finite, >= 0).
    pub sd: f64,
    /// The correlation of a node's deviation with its deviation one step before (in (-1, 1)).
    pub autocorrelation: f64,
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
        if let Some(scatter) = self.scatter {
            if !(scatter.sd.is_finite() && scatter.sd >= 0.0) {
                return Err((
                    field("scatter.sd"),
                    scatter.sd.to_string(),
                    "must be finite and >= 0".into(),
                ));
            }
            if !(scatter.autocorrelation > -1.0 && scatter.autocorrelation < 1.0) {
                return Err((
                    field("scatter.autocorrelation"),
                    scatter.autocorrelation.to_string(),
                    "must be > -1 and < 1".into(),
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

/// The deviations of every node's reading from its line ([`Scatter`]), step by step: every
/// step one standard normal per node whose entry scatters, in node order, from the run's
/// `readings` stream, so every arm of a run reads the same deviations.
pub(crate) struct ScatterDraws {
    rng: Pcg64Mcg,
    /// Every node's scatter (`None`: its readings lie on the line).
    scatters: Vec<Option<Scatter>>,
    /// Every node's deviation in units of its standard deviation.
    standardised: Vec<f64>,
    /// Every node's deviation (0 for a node without scatter).
    deviations: Vec<f64>,
    /// True once the first step's deviations are drawn.
    started: bool,
}

impl ScatterDraws {
    /// The draws of a run with `seed` of the `nodes` nodes of the initial cluster under
    /// `readings`; `None` when no entry scatters (the run then draws nothing).
    pub(crate) fn new(readings: &[Reading], nodes: usize, seed: u64) -> Option<ScatterDraws> {
        let mut scatters = vec![None; nodes];
        for reading in readings.iter().filter(|r| r.scatter.is_some()) {
            for &node in &reading.nodes {
                scatters[node as usize] = reading.scatter;
            }
        }
        scatters.iter().any(Option::is_some).then(|| ScatterDraws {
            rng: stream(seed, Stream::Readings),
            scatters,
            standardised: vec![0.0; nodes],
            deviations: vec![0.0; nodes],
            started: false,
        })
    }

    /// Draws the next step's deviations: `e = z` at the first step, `e = r e + sqrt(1 - r^2) z`
    /// after it, `z` standard normal and `r` the node's autocorrelation.
    pub(crate) fn advance(&mut self) {
        for ((scatter, e), deviation) in self
            .scatters
            .iter()
            .zip(&mut self.standardised)
            .zip(&mut self.deviations)
        {
            let Some(scatter) = scatter else { continue };
            let z: f64 = self.rng.sample(StandardNormal);
            let r = scatter.autocorrelation;
            *e = if self.started {
                r * *e + (1.0 - r * r).sqrt() * z
            } else {
                z
            };
            *deviation = scatter.sd * *e;
        }
        self.started = true;
    }

    /// The current step's deviation of every node of the initial cluster.
    pub(crate) fn deviations(&self) -> &[f64] {
        &self.deviations
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
            scatter: None,
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

    /// Draws `steps` steps of one node's deviations.
    fn deviations(scatter: Scatter, seed: u64, steps: usize) -> Vec<f64> {
        let reading = Reading {
            scatter: Some(scatter),
            ..reading(&[1])
        };
        let mut draws = ScatterDraws::new(&[reading], 2, seed).unwrap();
        (0..steps)
            .map(|_| {
                draws.advance();
                assert_eq!(draws.deviations()[0], 0.0, "node 0 does not scatter");
                draws.deviations()[1]
            })
            .collect()
    }

    #[test]
    fn deviations_have_the_scatters_spread_and_autocorrelation() {
        for (sd, r) in [(0.02, 0.0), (0.05, 0.6), (0.01, -0.3), (0.03, 0.95)] {
            let e = deviations(
                Scatter {
                    sd,
                    autocorrelation: r,
                },
                7,
                200_000,
            );
            let n = e.len() as f64;
            let mean = e.iter().sum::<f64>() / n;
            let var = e.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
            let lag1 = e
                .windows(2)
                .map(|w| (w[0] - mean) * (w[1] - mean))
                .sum::<f64>()
                / (n - 1.0)
                / var;
            // 200 000 steps: the spread within 3 %, the autocorrelation within 0.02 (a
            // persistent process estimates both less precisely).
            assert!(
                (var.sqrt() / sd - 1.0).abs() < 0.03,
                "sd {sd} r {r}: {}",
                var.sqrt()
            );
            assert!((lag1 - r).abs() < 0.02, "sd {sd} r {r}: lag-1 {lag1}");
        }
    }

    /// Value stability: a run's deviations must not change between releases.
    #[test]
    fn deviations_are_pinned() {
        let scatter = Scatter {
            sd: 0.5,
            autocorrelation: 0.5,
        };
        let first = deviations(scatter, 42, 3);
        assert_eq!(first, PINNED_DEVIATIONS);
        assert_eq!(ScatterDraws::new(&[reading(&[0])], 1, 42).map(|_| ()), None);
    }

    const PINNED_DEVIATIONS: [f64; 3] = [
        -0.3729901297034217,
        -0.6315591946149588,
        -0.35465237820870377,
    ];

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
        let mut bad = reading(&[0]);
        bad.scatter = Some(Scatter {
            sd: -0.1,
            autocorrelation: 0.0,
        });
        assert_eq!(
            bad.check(0, &[], 3).unwrap_err().0,
            "readings[0].scatter.sd"
        );
        bad.scatter = Some(Scatter {
            sd: 0.1,
            autocorrelation: 1.0,
        });
        let error = bad.check(0, &[], 3).unwrap_err();
        assert_eq!(
            (error.0.as_str(), error.2.as_str()),
            (
                "readings[0].scatter.autocorrelation",
                "must be > -1 and < 1"
            )
        );
    }
}
