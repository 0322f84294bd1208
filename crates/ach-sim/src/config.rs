//! Series configuration: what one series of the experiment matrix runs, read from TOML.
//!
//! Every field has the paper's default, so a series file states only what differs from the
//! stationary series C1. Unknown fields are rejected. [`SeriesConfig::validate`] (in
//! [`crate::validate`]) checks every rule before any work starts and names the series, the
//! field, the value and the rule broken; [`SeriesConfig::at_point`] (in [`crate::point`]) sets
//! a sweep point's fields.

use ach_control::AchConfig;
use ach_telemetry::{DistortionConfig, TelemetryConfig};
use serde::{Deserialize, Serialize};

pub use crate::sweep::{Coordinate, Link, Sweep, SweepMode, SweepPoint};

/// Which modelling choices a run follows (spec section 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// The published simulation, quirks included (default): removed nodes stay in the load
    /// vector and their tokens go to node 0; key hashes share the ring's random stream.
    #[default]
    Paper,
    /// The quirks fixed: removed nodes leave the cluster and their tokens go clockwise to the
    /// next live owner; key hashes come from a stream of their own.
    Corrected,
}

impl Profile {
    /// The profile's name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Paper => "paper",
            Profile::Corrected => "corrected",
        }
    }
}

/// The name of A0, the baseline `against_a0` pairs every algorithm against.
pub const A0: &str = ach_baselines::catalogue::names::BASELINE;

/// The algorithms of the paper, in the order of its tables.
pub const ALGORITHMS: [&str; 5] = ach_baselines::catalogue::names::PAPER;

/// Capacity class of a node (spec section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeClass {
    /// Capacity 1.0.
    Strong,
    /// Capacity 0.55.
    Medium,
    /// Capacity 0.25.
    Weak,
}

impl NodeClass {
    /// The relative capacity `c`.
    pub fn capacity(self) -> f64 {
        match self {
            NodeClass::Strong => 1.0,
            NodeClass::Medium => 0.55,
            NodeClass::Weak => 0.25,
        }
    }

    /// Its name as configurations and outputs spell it (`strong`, `medium`, `weak`).
    pub fn name(self) -> &'static str {
        match self {
            NodeClass::Strong => "strong",
            NodeClass::Medium => "medium",
            NodeClass::Weak => "weak",
        }
    }
}

/// The request rate `Lambda(t)` over time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LoadProfile {
    /// `Lambda(t) = lambda`.
    Constant {
        /// Requests per step.
        lambda: f64,
    },
    /// `lambda` before `step_at`, then `high`; from `periodic_from` on multiplied by
    /// `1 + amplitude * sin(2 pi (t - periodic_from) / period)` (with `t - periodic_from` taken
    /// modulo `period`: the same value up to rounding, repeating exactly).
    StepPeriodic {
        /// Requests per step before the step.
        lambda: f64,
        /// Requests per step from `step_at` on.
        high: f64,
        /// Step at which the rate jumps to `high`.
        step_at: u32,
        /// Step from which the periodic factor applies.
        periodic_from: u32,
        /// Relative amplitude of the periodic factor.
        amplitude: f64,
        /// Period of the periodic factor, in steps.
        period: f64,
    },
}

impl LoadProfile {
    /// `Lambda(t)`.
    pub fn rate(&self, t: u32) -> f64 {
        match *self {
            LoadProfile::Constant { lambda } => lambda,
            LoadProfile::StepPeriodic {
                lambda,
                high,
                step_at,
                periodic_from,
                amplitude,
                period,
            } => {
                let base = if t < step_at { lambda } else { high };
                if t >= periodic_from {
                    // The elapsed time is reduced modulo the period first (`%` on floats is
                    // exact), so the rate repeats exactly from period to period; the sine's
                    // argument then stays in [0, 2 pi), where it is most accurate.
                    let elapsed = f64::from(t - periodic_from) % period;
                    let phase = 2.0 * std::f64::consts::PI * elapsed / period;
                    base * (1.0 + amplitude * phase.sin())
                } else {
                    base
                }
            }
        }
    }
}

/// Noise, lag and missing samples of the telemetry (spec section 3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoiseConfig {
    /// Standard deviation of the Gaussian noise added to every metric.
    pub sigma: f64,
    /// Lag in steps.
    pub lag: usize,
    /// Probability that one metric of one node is missing in a step.
    pub p_miss: f64,
}

impl Default for NoiseConfig {
    fn default() -> Self {
        NoiseConfig {
            sigma: 0.0,
            lag: 0,
            p_miss: 0.0,
        }
    }
}

impl NoiseConfig {
    /// As the telemetry crate's distortion configuration.
    pub fn distortion(&self) -> DistortionConfig {
        DistortionConfig {
            sigma: self.sigma,
            lag: self.lag,
            p_miss: self.p_miss,
        }
    }
}

/// Smoothing and composite-load parameters (spec section 3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryParams {
    /// EWMA weight of the new observation.
    pub beta: f64,
    /// Weights of cpu, memory and latency.
    pub weights: [f64; 3],
    /// Exponent of the Lp composite.
    pub p: f64,
    /// Weight of the mean in the total load (the max gets `1 - alpha`).
    pub alpha: f64,
    /// The EWMA weight of the new observation in what the algorithms read (their loads, the
    /// per-token loads, ACH-A's smoothing), when it differs from `beta`, which then smooths
    /// the true loads alone (optional; absent, both are `beta`, the paper's model). Left out
    /// of the written configuration when absent, so that series without it keep their files
    /// and fingerprints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_beta: Option<f64>,
}

impl Default for TelemetryParams {
    fn default() -> Self {
        let c = TelemetryConfig::paper();
        TelemetryParams {
            beta: c.beta,
            weights: c.weights,
            p: c.p,
            alpha: c.alpha,
            controller_beta: None,
        }
    }
}

impl TelemetryParams {
    /// As the telemetry crate's configuration: the true loads' (and, without
    /// `controller_beta`, the algorithms').
    pub fn config(&self) -> TelemetryConfig {
        TelemetryConfig {
            beta: self.beta,
            weights: self.weights,
            p: self.p,
            alpha: self.alpha,
        }
    }

    /// The configuration of what the algorithms read: [`TelemetryParams::config`] with
    /// `controller_beta` as its smoothing factor, when given.
    pub fn controllers(&self) -> TelemetryConfig {
        TelemetryConfig {
            beta: self.controller_beta.unwrap_or(self.beta),
            ..self.config()
        }
    }
}

/// The initial cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Capacity class of each initial node, node 0 first.
    pub classes: Vec<NodeClass>,
    /// Service rate of a node of capacity 1, in requests per step.
    pub mu_base: f64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        use NodeClass::{Medium, Strong, Weak};
        ClusterConfig {
            classes: vec![
                Strong, Strong, Strong, Medium, Medium, Medium, Medium, Weak, Weak, Weak,
            ],
            mu_base: 350.0,
        }
    }
}

/// At step `t`, the capacity of `nodes` is multiplied by `factor`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Degradation {
    /// Step at which it happens.
    pub t: u32,
    /// The nodes degraded.
    pub nodes: Vec<u32>,
    /// The capacity factor, `> 0`.
    pub factor: f64,
}

/// At step `t`, nodes `remove` leave (in that order), then nodes of classes `add` join (ids
/// continue after the last node).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Churn {
    /// Step at which it happens.
    pub t: u32,
    /// Nodes removed, in order.
    #[serde(default)]
    pub remove: Vec<u32>,
    /// Classes of the nodes that join, in order.
    #[serde(default)]
    pub add: Vec<NodeClass>,
}

/// One series of the experiment matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeriesConfig {
    /// Name, e.g. `C1`.
    pub name: String,
    /// One line saying what the series is about.
    pub description: String,
    /// Number of runs (per sweep point for a sweep).
    pub runs: u32,
    /// Steps per run `T`.
    pub steps: u32,
    /// Steps excluded from the aggregates at the start.
    pub warmup: u32,
    /// Seed of run 0.
    pub seed_base: u64,
    /// Seed increment per run: run `r` uses `seed_base + r * seed_stride`.
    pub seed_stride: u64,
    /// Number of tokens `V`.
    pub tokens: usize,
    /// Size of the key universe `NK`.
    pub keys: usize,
    /// Zipf exponent of key popularity (0: uniform).
    pub zipf_s: f64,
    /// Probability that a request is a write.
    pub write_fraction: f64,
    /// Algorithms run, by name (see [`ALGORITHMS`]).
    pub algorithms: Vec<String>,
    /// The initial cluster.
    pub cluster: ClusterConfig,
    /// The request rate over time.
    pub load: LoadProfile,
    /// Telemetry distortion.
    pub noise: NoiseConfig,
    /// Smoothing and composite.
    pub telemetry: TelemetryParams,
    /// ACH parameters.
    pub ach: AchConfig,
    /// Capacity changes.
    pub degradation: Vec<Degradation>,
    /// Nodes leaving and joining.
    pub churn: Vec<Churn>,
    /// The sweep, for a sensitivity series.
    pub sweep: Option<Sweep>,
    /// The telemetry filter of ACH-F (`[ach_f]`, optional: a window of 5 steps without it).
    /// Left out of the written configuration when absent, so that series without it keep
    /// their files and fingerprints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ach_f: Option<AchFilter>,
    /// The bound of CH-BL (`[ch_bl]`, optional: `eps = 0.25` without it). Left out of the
    /// written configuration when absent, so that series without it keep their files and
    /// fingerprints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ch_bl: Option<ChBlConfig>,
    /// Also report the coefficient of variation of the true loads (`report_cv = true`; default
    /// false), a size-independent imbalance beside D: per step `CV = std(l) / mean(l)` over the
    /// nodes D counts, on the noise-free loads, with the population standard deviation
    /// (divisor N) and `CV = 0` when the mean load is 0 or no node is counted; averaged over
    /// the steps after the warm-up like D-bar (see [`crate::record::coefficient_of_variation`]).
    /// Off, nothing of it is computed, and the configuration, its fingerprint, the records and
    /// the summary are exactly as without the field.
    #[serde(skip_serializing_if = "is_false")]
    pub report_cv: bool,
    /// Also pair every other algorithm against Static-W (A0) in the statistics
    /// (`against_a0 = true`; default false): the same paired Wilcoxon test, Holm adjustment and
    /// Cliff's delta as ACH against each baseline, in `summary.json`'s `against_a0` lists and
    /// a table of their own. It changes only the statistics, so it is left out of the
    /// fingerprint: records run without it are reused. Off, the configuration and the summary
    /// are exactly as without the field. The series must run Static-W.
    #[serde(skip_serializing_if = "is_false")]
    pub against_a0: bool,
    /// A hot-key phase (`[hot_keys]`, optional): for a span of steps a share of the requests
    /// goes to a few keys of one node (what the live experiment's workload does). Left out of
    /// the written configuration when absent, so that series without it keep their files,
    /// fingerprints and draws.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_keys: Option<HotKeys>,
    /// The live clock of some algorithms (`[[pacing]]`, optional; see [`crate::pacing`]): their
    /// moves take time to switch and they plan again only after them. Left out of the written
    /// configuration when empty, so that series without it keep their files, fingerprints and
    /// records. A series with churn cannot pace its algorithms.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pacing: Vec<crate::pacing::Pacing>,
    /// What the algorithms read of some nodes' loads (`[[readings]]`, optional; see
    /// [`crate::reading`]): `offset + scale * load`, the true loads recorded beside. Left out
    /// of the written configuration when empty, like `pacing`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<crate::reading::Reading>,
    /// Who owns each token at the start (`initial_layout`, optional): `"round-robin"` (the
    /// paper's and the default: token `s` is node `s mod n`'s) or `"contiguous"` (node `i`
    /// owns the tokens `floor(i V / n)` to `floor((i + 1) V / n) - 1`, as the live
    /// experiment's clusters deal out their slots). The default is left out of the written
    /// configuration.
    #[serde(skip_serializing_if = "InitialLayout::is_round_robin")]
    pub initial_layout: InitialLayout,
    /// The keys given one by one (`[key_table]`, optional; see [`crate::keys`]): each key's
    /// token and popularity instead of seeded hash positions and Zipf ranks. Left out of the
    /// written configuration when absent, like `hot_keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_table: Option<crate::keys::KeyTable>,
}

/// Who owns each token at the start of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialLayout {
    /// Token `s` is node `s mod n`'s (the paper).
    #[default]
    RoundRobin,
    /// Node `i` owns the tokens from `floor(i V / n)` to `floor((i + 1) V / n) - 1`.
    Contiguous,
}

impl std::str::FromStr for InitialLayout {
    type Err = String;

    fn from_str(text: &str) -> Result<InitialLayout, String> {
        match text {
            "round-robin" => Ok(InitialLayout::RoundRobin),
            "contiguous" => Ok(InitialLayout::Contiguous),
            _ => Err(format!(
                "{text:?}: must be \"round-robin\" or \"contiguous\""
            )),
        }
    }
}

impl InitialLayout {
    /// Whether this is the paper's layout (left out of a written configuration).
    pub fn is_round_robin(&self) -> bool {
        *self == InitialLayout::RoundRobin
    }

    /// The owner of every one of `tokens` tokens over `nodes` nodes.
    pub fn owners(self, tokens: usize, nodes: usize) -> Vec<ach_ring::NodeId> {
        (0..tokens)
            .map(|s| match self {
                InitialLayout::RoundRobin => s % nodes,
                // The largest `i` with `floor(i V / n) <= s`.
                InitialLayout::Contiguous => ((s + 1) * nodes - 1) / tokens,
            })
            .map(|node| ach_ring::NodeId(node as u32))
            .collect()
    }
}

/// A hot-key phase: during steps `from <= t < to`, a request goes with probability `share` to
/// one of `keys` hot keys (uniformly), and otherwise follows the series' key popularity. The
/// hot keys are the `keys` lowest-numbered keys whose token is owned by node `node` in the
/// initial (round-robin) ring, so they all start on one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotKeys {
    /// First step of the phase.
    pub from: u32,
    /// First step after the phase.
    pub to: u32,
    /// Probability that a request of the phase goes to a hot key, in `[0, 1]`.
    pub share: f64,
    /// Number of hot keys (at least 1).
    pub keys: usize,
    /// The node whose initial tokens hold the hot keys.
    pub node: usize,
}

impl HotKeys {
    /// Whether step `t` is in the phase.
    pub fn active(&self, t: u32) -> bool {
        (self.from..self.to).contains(&t)
    }
}

/// True for `false`: leaves an unset flag out of the written configuration.
fn is_false(value: &bool) -> bool {
    !*value
}

/// ACH-F's telemetry filter: the median of each node's last `window` loads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AchFilter {
    /// Steps in the median window (>= 1; 1 is plain ACH).
    pub window: usize,
}

impl AchFilter {
    /// The window ACH-F uses when the series gives none.
    pub const DEFAULT_WINDOW: usize = 5;
}

/// CH-BL's bound: every live node serves at most `c = 1 + eps` times its capacity-weighted
/// share of a step's requests (see `ach_baselines::BoundedLoadsRouting`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChBlConfig {
    /// The slack over the capacity-weighted share: a finite number > 0.
    pub eps: f64,
}

impl ChBlConfig {
    /// The `eps` CH-BL uses when the series gives none (`c = 1.25`).
    pub const DEFAULT_EPS: f64 = 0.25;
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig {
            name: String::new(),
            description: String::new(),
            runs: 30,
            steps: 2000,
            warmup: 40,
            seed_base: 42,
            seed_stride: 1000,
            tokens: 1000,
            keys: 50_000,
            zipf_s: 0.0,
            write_fraction: 0.30,
            algorithms: ALGORITHMS.iter().map(|a| a.to_string()).collect(),
            cluster: ClusterConfig::default(),
            load: LoadProfile::Constant { lambda: 1437.5 },
            noise: NoiseConfig::default(),
            telemetry: TelemetryParams::default(),
            ach: AchConfig::paper(),
            degradation: Vec::new(),
            churn: Vec::new(),
            sweep: None,
            ach_f: None,
            ch_bl: None,
            report_cv: false,
            against_a0: false,
            hot_keys: None,
            pacing: Vec::new(),
            readings: Vec::new(),
            initial_layout: InitialLayout::RoundRobin,
            key_table: None,
        }
    }
}

/// A rule broken by a configuration value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("series {series}: {field} = {value} {rule}")]
pub struct ConfigError {
    /// The series.
    pub series: String,
    /// The field, as a path (`ach.eps_off`, `churn[0].remove`).
    pub field: String,
    /// The offending value, rendered.
    pub value: String,
    /// The rule, e.g. `must be < eps_on = 0.1`.
    pub rule: String,
}

/// The built-in series files, embedded at build time (name, TOML text).
pub const BUILT_IN: [(&str, &str); 8] = [
    ("C1", include_str!("../series/C1.toml")),
    ("C2", include_str!("../series/C2.toml")),
    ("C3", include_str!("../series/C3.toml")),
    ("C4", include_str!("../series/C4.toml")),
    ("C4a", include_str!("../series/C4a.toml")),
    ("C4b", include_str!("../series/C4b.toml")),
    ("C4c", include_str!("../series/C4c.toml")),
    ("C5", include_str!("../series/C5.toml")),
];

/// Built-in series that are not in the default matrix: run them by name (`--series noise`).
pub const OPT_IN: [(&str, &str); 2] = [
    ("noise", include_str!("../series/noise.toml")),
    ("scale", include_str!("../series/scale.toml")),
];

/// The opt-in built-in series ([`OPT_IN`]), parsed.
pub fn opt_in_series() -> Vec<SeriesConfig> {
    OPT_IN
        .iter()
        .map(|(name, text)| {
            SeriesConfig::from_toml(text)
                .unwrap_or_else(|e| panic!("built-in series {name} does not parse: {e}"))
        })
        .collect()
}

/// The built-in series, parsed, in matrix order.
pub fn built_in_series() -> Vec<SeriesConfig> {
    BUILT_IN
        .iter()
        .map(|(name, text)| {
            SeriesConfig::from_toml(text)
                .unwrap_or_else(|e| panic!("built-in series {name} does not parse: {e}"))
        })
        .collect()
}

impl SeriesConfig {
    /// Parses one series from TOML (fields not given take the paper's defaults).
    pub fn from_toml(text: &str) -> Result<SeriesConfig, toml::de::Error> {
        toml::from_str(text)
    }

    /// The seed of run `run`.
    pub fn seed(&self, run: u32) -> u64 {
        self.seed_base
            .wrapping_add(u64::from(run).wrapping_mul(self.seed_stride))
    }

    /// Number of nodes ever in the cluster (initial plus joins).
    pub fn max_nodes(&self) -> usize {
        self.cluster.classes.len() + self.churn.iter().map(|c| c.add.len()).sum::<usize>()
    }

    /// The sweep points (empty without a sweep), in order (see [`Sweep::points`]).
    pub fn sweep_points(&self) -> Vec<SweepPoint> {
        self.sweep.as_ref().map(Sweep::points).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_name_is_its_serialised_name() {
        for class in [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak] {
            let serialised = serde_json::to_string(&class).unwrap();
            assert_eq!(serialised, format!("\"{}\"", class.name()));
        }
    }

    #[test]
    fn c5s_sweep_keeps_its_original_serialised_form() {
        // The form is part of every C5 record's fingerprint: a change would discard saved runs.
        let c5 = &built_in_series()[7];
        assert_eq!(
            serde_json::to_string(&c5.sweep).unwrap(),
            "{\"eps_on\":[0.05,0.08,0.1,0.15,0.2],\"eps_off_ratio\":0.4,\"kappa\":[0.05,0.1,0.15,0.2],\
             \"tau\":[0.7,0.8,0.85,0.9,0.95],\"M_max\":[0.005,0.01,0.02,0.05,0.1]}"
        );
    }

    #[test]
    fn load_profile_of_c2() {
        let c2 = &built_in_series()[1];
        assert_eq!(c2.load.rate(0), 1437.5);
        assert_eq!(c2.load.rate(199), 1437.5);
        assert_eq!(c2.load.rate(200), 3200.0);
        assert_eq!(c2.load.rate(350), 3200.0);
        assert!(
            (c2.load.rate(362)
                - 3200.0 * (1.0 + 0.25 * (2.0 * std::f64::consts::PI * 12.0 / 50.0).sin()))
            .abs()
                < 1e-9
        );
        // Exactly periodic, and equal to the unreduced formula up to rounding.
        assert_eq!(c2.load.rate(1362).to_bits(), c2.load.rate(362).to_bits());
        let unreduced = 3200.0 * (1.0 + 0.25 * (2.0 * std::f64::consts::PI * 1012.0 / 50.0).sin());
        assert!((c2.load.rate(1362) - unreduced).abs() < 1e-9);
    }
}
